// AXI4 read-channel arbiter: PORTS read masters share one AXI4 master port. Address requests
// are granted round-robin (one per cycle, registered towards the slave); read data is routed
// back by RID, so master i must use ARID = i (the DMA read engines take their ID as a
// parameter). Data of different masters may interleave at burst boundaries as AXI allows.
module hm_axi_rd_arb
  import hm_pkg::*;
#(
  // Number of read masters (2..8).
  parameter int PORTS = 2,
  // AXI data width.
  parameter int DATA_WIDTH = 512,
  // Background ports (bit mask): granted only when no other port requests, or after
  // BG_EVERY grants to other ports while one of them waits (so they never starve).
  parameter logic [PORTS-1:0] BG_MASK = '0,
  parameter int BG_EVERY = 8,
  // AXI ID width (hm_pkg; at least clog2(PORTS)).
  localparam int ID_WIDTH = HM_AXI_ID_W
) (
  input  logic                             clk,
  input  logic                             rst,

  // Masters
  input  hm_axi_ax_t [PORTS-1:0]           s_ar,
  input  logic [PORTS-1:0]                 s_arvalid,
  output logic [PORTS-1:0]                 s_arready,
  output logic [ID_WIDTH-1:0]              s_rid,
  output logic [DATA_WIDTH-1:0]            s_rdata,
  output logic [1:0]                       s_rresp,
  output logic                             s_rlast,
  output logic [PORTS-1:0]                 s_rvalid,
  input  logic [PORTS-1:0]                 s_rready,

  // Slave
  output hm_axi_ax_t                       m_ar,
  output logic                             m_arvalid,
  input  logic                             m_arready,
  input  logic [ID_WIDTH-1:0]              m_rid,
  input  logic [DATA_WIDTH-1:0]            m_rdata,
  input  logic [1:0]                       m_rresp,
  input  logic                             m_rlast,
  input  logic                             m_rvalid,
  output logic                             m_rready
);
  localparam int PW = PORTS > 1 ? $clog2(PORTS) : 1;

  // AR: round-robin grant into a registered output slot
  logic [PW-1:0] pick;
  logic          any, take;
  logic [PORTS-1:0] req;
  logic [$clog2(BG_EVERY+1)-1:0] bg_wait_q;
  always_comb begin
    req = s_arvalid;
    if ((s_arvalid & ~BG_MASK) != '0 && 32'(bg_wait_q) < BG_EVERY) req = s_arvalid & ~BG_MASK;
  end
  always_ff @(posedge clk) begin
    if (rst) bg_wait_q <= '0;
    else if (take) begin
      if ((s_arvalid & BG_MASK) == '0 || BG_MASK[pick]) bg_wait_q <= '0;
      else if (32'(bg_wait_q) < BG_EVERY) bg_wait_q <= bg_wait_q + 1'b1;
    end
  end
  hm_rr_pick #(.PORTS(PORTS)) u_pick (.clk, .rst, .req(req), .adv(take), .any, .pick);
  assign take = any && (!m_arvalid || m_arready);
  always_comb begin
    s_arready = '0;
    if (take) s_arready[pick] = 1'b1;
  end
  always_ff @(posedge clk) begin
    if (rst) begin
      m_arvalid <= 1'b0;
    end else begin
      if (m_arvalid && m_arready) m_arvalid <= 1'b0;
      if (take) begin
        m_arvalid <= 1'b1;
      end
    end
    if (take) begin
      m_ar       <= s_ar[pick];
    end
  end

  // R: by ID (unknown IDs are accepted and dropped so the bus never hangs)
  assign s_rid   = m_rid;
  assign s_rdata = m_rdata;
  assign s_rresp = m_rresp;
  assign s_rlast = m_rlast;
  always_comb begin
    s_rvalid = '0;
    m_rready = 1'b1;
    for (int p = 0; p < PORTS; p++) begin
      if (m_rid == ID_WIDTH'(p)) begin
        s_rvalid[p] = m_rvalid;
        m_rready    = s_rready[p];
      end
    end
  end

  if (PORTS < 2 || PORTS > 8 || (1 << ID_WIDTH) < PORTS) begin : g_bad_param
    $error("hm_axi_rd_arb: PORTS must be 2..8 and fit in ID_WIDTH");
  end
endmodule
