// AXI4 write gate, between one write master and a shared write port: write data is buffered
// and a burst's address goes out only once all of its data beats are in the buffer. On the
// shared port the data of a granted burst then never waits for its master, so one master's
// slow data source cannot hold the write channel (and through it every other master's
// writes) hostage. Write responses pass straight through.
module hm_axi_wr_gate
  import hm_pkg::*;
#(
  // AXI data width.
  parameter int DATA_WIDTH = 512,
  // Data buffer depth in beats (power of two, at least the largest burst).
  parameter int DEPTH = 64,
  // Addresses buffered (power of two).
  parameter int AW_DEPTH = 8,
  // Bytes per beat (derived).
  localparam int STRB_WIDTH = DATA_WIDTH / 8,
  // AXI ID width (hm_pkg).
  localparam int ID_WIDTH = HM_AXI_ID_W
) (
  input  logic                  clk,
  input  logic                  rst,

  // From the master
  input  hm_axi_ax_t            s_aw,
  input  logic                  s_awvalid,
  output logic                  s_awready,
  input  logic [DATA_WIDTH-1:0] s_wdata,
  input  logic [STRB_WIDTH-1:0] s_wstrb,
  input  logic                  s_wlast,
  input  logic                  s_wvalid,
  output logic                  s_wready,
  output logic [ID_WIDTH-1:0]   s_bid,
  output logic [1:0]            s_bresp,
  output logic                  s_bvalid,
  input  logic                  s_bready,

  // To the shared port
  output hm_axi_ax_t            m_aw,
  output logic                  m_awvalid,
  input  logic                  m_awready,
  output logic [DATA_WIDTH-1:0] m_wdata,
  output logic [STRB_WIDTH-1:0] m_wstrb,
  output logic                  m_wlast,
  output logic                  m_wvalid,
  input  logic                  m_wready,
  input  logic [ID_WIDTH-1:0]   m_bid,
  input  logic [1:0]            m_bresp,
  input  logic                  m_bvalid,
  output logic                  m_bready
);
  localparam int AWW = $bits(hm_axi_ax_t);

  // addresses wait here
  logic [AWW-1:0] aw_head;
  logic           aw_have, aw_pop;
  logic [$clog2(AW_DEPTH+1):0] aw_level;
  hm_fifo #(.WIDTH(AWW), .DEPTH(AW_DEPTH)) u_aw (
    .clk, .rst,
    .s_data(s_aw), .s_valid(s_awvalid), .s_ready(s_awready),
    .m_data(aw_head), .m_valid(aw_have), .m_ready(aw_pop), .level(aw_level)
  );

  // data waits here; complete bursts in the buffer not yet matched with a released address
  logic w_in, w_room;
  logic [$clog2(DEPTH+1):0] w_level;
  hm_fifo #(.WIDTH(DATA_WIDTH + STRB_WIDTH + 1), .DEPTH(DEPTH)) u_w (
    .clk, .rst,
    .s_data({s_wdata, s_wstrb, s_wlast}), .s_valid(s_wvalid), .s_ready(w_room),
    .m_data({m_wdata, m_wstrb, m_wlast}), .m_valid(m_wvalid), .m_ready(m_wready),
    .level(w_level)
  );
  assign s_wready = w_room;
  assign w_in     = s_wvalid && w_room;

  logic [$clog2(DEPTH+1):0] bursts_q;
  assign m_awvalid = aw_have && bursts_q != '0;
  assign aw_pop    = m_awvalid && m_awready;
  assign m_aw      = aw_head;
  always_ff @(posedge clk) begin
    if (rst) bursts_q <= '0;
    else bursts_q <= bursts_q + ($clog2(DEPTH+1)+1)'(w_in && s_wlast) - ($clog2(DEPTH+1)+1)'(aw_pop);
  end

  assign s_bid    = m_bid;
  assign s_bresp  = m_bresp;
  assign s_bvalid = m_bvalid;
  assign m_bready = s_bready;

  logic unused_ok;
  assign unused_ok = ^{aw_level, w_level};

  if ((1 << $clog2(DEPTH)) != DEPTH || DEPTH < 2) begin : g_bad_depth
    $error("hm_axi_wr_gate: DEPTH must be a power of two");
  end
endmodule
