// AXI4 write-channel arbiter: PORTS write masters share one AXI4 master port. Write
// addresses are granted round-robin (registered towards the slave) and the granted master
// is remembered in order, so write data follows the address order burst by burst (AXI4 has
// no write interleaving). Write responses are routed back by BID, so master i must use
// AWID = i.
module hm_axi_wr_arb
  import hm_pkg::*;
#(
  // Number of write masters (2..8).
  parameter int PORTS = 2,
  // AXI data width.
  parameter int DATA_WIDTH = 512,
  // Granted bursts whose data has not finished (power of two).
  parameter int ORDER_DEPTH = 16,
  // Bytes per beat (derived).
  localparam int STRB_WIDTH = DATA_WIDTH / 8,
  // AXI ID width (hm_pkg; at least clog2(PORTS)).
  localparam int ID_WIDTH = HM_AXI_ID_W
) (
  input  logic                             clk,
  input  logic                             rst,

  // Masters
  input  hm_axi_ax_t [PORTS-1:0]           s_aw,
  input  logic [PORTS-1:0]                 s_awvalid,
  output logic [PORTS-1:0]                 s_awready,
  input  logic [PORTS-1:0][DATA_WIDTH-1:0] s_wdata,
  input  logic [PORTS-1:0][STRB_WIDTH-1:0] s_wstrb,
  input  logic [PORTS-1:0]                 s_wlast,
  input  logic [PORTS-1:0]                 s_wvalid,
  output logic [PORTS-1:0]                 s_wready,
  output logic [ID_WIDTH-1:0]              s_bid,
  output logic [1:0]                       s_bresp,
  output logic [PORTS-1:0]                 s_bvalid,
  input  logic [PORTS-1:0]                 s_bready,

  // Slave
  output hm_axi_ax_t                       m_aw,
  output logic                             m_awvalid,
  input  logic                             m_awready,
  output logic [DATA_WIDTH-1:0]            m_wdata,
  output logic [STRB_WIDTH-1:0]            m_wstrb,
  output logic                             m_wlast,
  output logic                             m_wvalid,
  input  logic                             m_wready,
  input  logic [ID_WIDTH-1:0]              m_bid,
  input  logic [1:0]                       m_bresp,
  input  logic                             m_bvalid,
  output logic                             m_bready
);
  localparam int PW = PORTS > 1 ? $clog2(PORTS) : 1;

  // AW: round-robin grant into a registered slot; the grant order goes into a FIFO
  logic [PW-1:0] pick;
  logic          any, take, ord_room;
  hm_rr_pick #(.PORTS(PORTS)) u_pick (.clk, .rst, .req(s_awvalid), .adv(take), .any, .pick);
  assign take = any && (!m_awvalid || m_awready) && ord_room;
  always_comb begin
    s_awready = '0;
    if (take) s_awready[pick] = 1'b1;
  end
  always_ff @(posedge clk) begin
    if (rst) begin
      m_awvalid <= 1'b0;
    end else begin
      if (m_awvalid && m_awready) m_awvalid <= 1'b0;
      if (take) begin
        m_awvalid <= 1'b1;
      end
    end
    if (take) begin
      m_aw       <= s_aw[pick];
    end
  end

  // W: from the master at the head of the grant order, until WLAST
  logic [PW-1:0] w_sel;
  logic          w_have, w_pop;
  logic [$clog2(ORDER_DEPTH+1):0] ord_level;
  hm_fifo #(.WIDTH(PW), .DEPTH(ORDER_DEPTH)) u_order (
    .clk, .rst,
    .s_data(pick), .s_valid(take), .s_ready(ord_room),
    .m_data(w_sel), .m_valid(w_have), .m_ready(w_pop),
    .level(ord_level)
  );
  assign m_wdata  = s_wdata[w_sel];
  assign m_wstrb  = s_wstrb[w_sel];
  assign m_wlast  = s_wlast[w_sel];
  assign m_wvalid = w_have && s_wvalid[w_sel];
  always_comb begin
    s_wready = '0;
    if (w_have) s_wready[w_sel] = m_wready;
  end
  assign w_pop = m_wvalid && m_wready && m_wlast;

  // B: by ID (unknown IDs are accepted and dropped)
  assign s_bid   = m_bid;
  assign s_bresp = m_bresp;
  always_comb begin
    s_bvalid = '0;
    m_bready = 1'b1;
    for (int p = 0; p < PORTS; p++) begin
      if (m_bid == ID_WIDTH'(p)) begin
        s_bvalid[p] = m_bvalid;
        m_bready    = s_bready[p];
      end
    end
  end

  logic unused_ok;
  assign unused_ok = ^{ord_level};

  if (PORTS < 2 || PORTS > 8 || (1 << ID_WIDTH) < PORTS) begin : g_bad_param
    $error("hm_axi_wr_arb: PORTS must be 2..8 and fit in ID_WIDTH");
  end
endmodule
