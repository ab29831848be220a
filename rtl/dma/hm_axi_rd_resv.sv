// AXI4 read reservation buffer, between one read master and a shared read port: a burst's
// address goes out only when the buffer has room for all of its beats, and read data is
// always accepted into the buffer (RREADY stays high) and handed to the master from there.
// Masters sharing a port then never block each other: a slave may return bursts in address
// order, and a master whose consumer stalls would otherwise hold back every later burst of
// every other master (head-of-line blocking that can deadlock when consumers depend on each
// other, as the transport engine's TX path does on two read engines).
module hm_axi_rd_resv
  import hm_pkg::*;
#(
  // AXI data width.
  parameter int DATA_WIDTH = 512,
  // Buffer depth in beats (power of two, at least the largest burst).
  parameter int DEPTH = 128,
  // AXI ID width (hm_pkg).
  localparam int ID_WIDTH = HM_AXI_ID_W
) (
  input  logic                  clk,
  input  logic                  rst,

  // From the master
  input  hm_axi_ax_t            s_ar,
  input  logic                  s_arvalid,
  output logic                  s_arready,
  output logic [ID_WIDTH-1:0]   s_rid,
  output logic [DATA_WIDTH-1:0] s_rdata,
  output logic [1:0]            s_rresp,
  output logic                  s_rlast,
  output logic                  s_rvalid,
  input  logic                  s_rready,

  // To the shared port
  output hm_axi_ax_t            m_ar,
  output logic                  m_arvalid,
  input  logic                  m_arready,
  input  logic [ID_WIDTH-1:0]   m_rid,
  input  logic [DATA_WIDTH-1:0] m_rdata,
  input  logic [1:0]            m_rresp,
  input  logic                  m_rlast,
  input  logic                  m_rvalid,
  output logic                  m_rready
);
  localparam int CW = $clog2(DEPTH) + 1;

  // beats reserved by bursts issued and not yet handed to the master
  logic [CW-1:0] resv_q;
  logic          room, ar_go, r_out;
  // a burst longer than the buffer could never go out: it is a configuration error (the
  // simulation stops), see the DEPTH parameter
  assign room      = 32'(resv_q) + 32'(s_ar.len) + 32'd1 <= DEPTH;
  // synthesis translate_off
  always_ff @(posedge clk) if (!rst && s_arvalid && 32'(s_ar.len) + 32'd1 > DEPTH)
    $fatal(1, "hm_axi_rd_resv: burst of %0d beats, buffer of %0d", 32'(s_ar.len) + 1, DEPTH);
  // synthesis translate_on
  assign m_arvalid = s_arvalid && room;
  assign s_arready = m_arready && room;
  assign ar_go     = m_arvalid && m_arready;
  assign m_ar      = s_ar;

  assign r_out = s_rvalid && s_rready;
  always_ff @(posedge clk) begin
    if (rst) resv_q <= '0;
    else resv_q <= resv_q + (ar_go ? CW'(s_ar.len) + CW'(1) : '0) - CW'(r_out);
  end

  // the reservation guarantees room: data is never refused
  logic fifo_ready;
  logic [$clog2(DEPTH+1):0] level;
  hm_fifo #(.WIDTH(ID_WIDTH + DATA_WIDTH + 3), .DEPTH(DEPTH)) u_buf (
    .clk, .rst,
    .s_data({m_rid, m_rdata, m_rresp, m_rlast}), .s_valid(m_rvalid), .s_ready(fifo_ready),
    .m_data({s_rid, s_rdata, s_rresp, s_rlast}), .m_valid(s_rvalid), .m_ready(s_rready),
    .level(level)
  );
  assign m_rready = 1'b1;

  logic unused_ok;
  assign unused_ok = ^{fifo_ready, level};

  if ((1 << $clog2(DEPTH)) != DEPTH || DEPTH < 2) begin : g_bad_depth
    $error("hm_axi_rd_resv: DEPTH must be a power of two");
  end
endmodule
