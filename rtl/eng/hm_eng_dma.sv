// The transport engine's DMA subsystem: RD_PORTS read engines (hm_dma_rd) and WR_PORTS write
// engines (hm_dma_wr) sharing one AXI4 master port.
//
//   reads   every engine's bursts pass a reservation stage (hm_axi_rd_resv: a burst is issued
//           only with room for all its beats, so no engine blocks another on the shared R
//           channel), then a round-robin read arbiter (hm_axi_rd_arb); AXI ID = engine index
//   writes  every engine's bursts pass a gate (hm_axi_wr_gate: a burst's address goes out
//           only with all its data at hand), then a write arbiter (hm_axi_wr_arb); AXI ID =
//           engine index
//
// Each engine's depths are chosen for its client (the table below, per engine index); the
// engine top assigns the clients: reads 0 requester WQEs, 1 requester payload, 2 completer
// WQEs, 3 responder receive WQEs and atomic operands, 4 READ response payload; writes 0
// completer data, 1 CQEs, 2 responder data. Request tags are not used (all 0).
module hm_eng_dma
  import hm_pkg::*;
  import hm_eng_pkg::*;
#(
  // AXI and stream data width in bits (256 or 512).
  parameter int DATA_WIDTH = 512,
  // Read engines (the depth tables below have an entry per engine).
  parameter int RD_PORTS = 5,
  // Write engines.
  parameter int WR_PORTS = 3,
  // Per read engine (defaults: the engine's clients, above): bursts in flight, queued
  // requests, reserved read-buffer beats (the requester's WQE fetcher 256 for its 4 KiB
  // batches, the other WQE fetchers 128 and 32, the payload readers 512: enough to keep one
  // beat per cycle flowing across a long memory round trip).
  parameter int RD_OUTSTANDING [RD_PORTS] = '{8, 64, 4, 4, 64},
  parameter int RD_REQ_DEPTH [RD_PORTS] = '{16, 128, 16, 16, 128},
  parameter int RD_RESV_BEATS [RD_PORTS] = '{256, 512, 128, 32, 512},
  // Read engine whose bursts yield to the others, -1 for none (the completer's WQE prefetch:
  // it would take read bandwidth the requester needs for the next WQEs and payloads).
  parameter int RD_BACKGROUND = 2,
  // Per write engine: bursts in flight, queued requests, beats per burst, gate depth (beats);
  // CQEs go one beat per burst.
  parameter int WR_OUTSTANDING [WR_PORTS] = '{64, 8, 64},
  parameter int WR_REQ_DEPTH [WR_PORTS] = '{64, 16, 64},
  parameter int WR_MAX_BURST [WR_PORTS] = '{64, 1, 64},
  parameter int WR_GATE_BEATS [WR_PORTS] = '{64, 4, 64},
  // Bytes per beat (derived).
  localparam int KEEP_WIDTH = DATA_WIDTH / 8
) (
  input  logic                                clk,
  input  logic                                rst,

  // Read requests and their data streams (one packet per request), per read engine
  input  hm_dma_req_t [RD_PORTS-1:0]         s_rd,
  input  logic [RD_PORTS-1:0]                 s_rd_valid,
  output logic [RD_PORTS-1:0]                 s_rd_ready,
  output logic [RD_PORTS-1:0][DATA_WIDTH-1:0] m_rd_tdata,
  output logic [RD_PORTS-1:0][KEEP_WIDTH-1:0] m_rd_tkeep,
  output logic [RD_PORTS-1:0]                 m_rd_tvalid,
  input  logic [RD_PORTS-1:0]                 m_rd_tready,
  output logic [RD_PORTS-1:0]                 m_rd_tlast,
  output logic [RD_PORTS-1:0]                 m_rd_tuser,

  // Write requests, their data streams and their completions, per write engine
  input  hm_dma_req_t [WR_PORTS-1:0]         s_wr,
  input  logic [WR_PORTS-1:0]                 s_wr_valid,
  output logic [WR_PORTS-1:0]                 s_wr_ready,
  input  logic [WR_PORTS-1:0][DATA_WIDTH-1:0] s_wr_tdata,
  input  logic [WR_PORTS-1:0][KEEP_WIDTH-1:0] s_wr_tkeep,
  input  logic [WR_PORTS-1:0]                 s_wr_tvalid,
  output logic [WR_PORTS-1:0]                 s_wr_tready,
  input  logic [WR_PORTS-1:0]                 s_wr_tlast,
  output logic [WR_PORTS-1:0]                 m_done_valid,
  output logic [WR_PORTS-1:0]                 m_done_err,
  input  logic [WR_PORTS-1:0]                 m_done_ready,

  // Host memory (AXI4 master)
  output logic [3:0]                          m_axi_arid,
  output logic [63:0]                         m_axi_araddr,
  output logic [7:0]                          m_axi_arlen,
  output logic [2:0]                          m_axi_arsize,
  output logic [1:0]                          m_axi_arburst,
  output logic                                m_axi_arvalid,
  input  logic                                m_axi_arready,
  input  logic [3:0]                          m_axi_rid,
  input  logic [DATA_WIDTH-1:0]               m_axi_rdata,
  input  logic [1:0]                          m_axi_rresp,
  input  logic                                m_axi_rlast,
  input  logic                                m_axi_rvalid,
  output logic                                m_axi_rready,
  output logic [3:0]                          m_axi_awid,
  output logic [63:0]                         m_axi_awaddr,
  output logic [7:0]                          m_axi_awlen,
  output logic [2:0]                          m_axi_awsize,
  output logic [1:0]                          m_axi_awburst,
  output logic                                m_axi_awvalid,
  input  logic                                m_axi_awready,
  output logic [DATA_WIDTH-1:0]               m_axi_wdata,
  output logic [KEEP_WIDTH-1:0]               m_axi_wstrb,
  output logic                                m_axi_wlast,
  output logic                                m_axi_wvalid,
  input  logic                                m_axi_wready,
  input  logic [3:0]                          m_axi_bid,
  input  logic [1:0]                          m_axi_bresp,
  input  logic                                m_axi_bvalid,
  output logic                                m_axi_bready,

  // Requests refused (length 0) by any engine
  output logic [31:0]                         stat_bad_req
);
  localparam int RP = RD_PORTS;
  localparam int WP = WR_PORTS;

  // ---------------------------------------------------------------------------------------
  // Reads: engine -> reservation -> arbiter
  // ---------------------------------------------------------------------------------------
  hm_axi_ax_t [RP-1:0]           d_ar, a_ar;
  hm_axi_ax_t                    ar;
  logic [RP-1:0][3:0]            d_rid;
  logic [RP-1:0][1:0]            d_rresp;
  logic [RP-1:0]                 d_arvalid, d_arready, d_rvalid, d_rready, d_rlast;
  logic [RP-1:0]                 a_arvalid, a_arready, a_rvalid, a_rready;
  logic [RP-1:0][DATA_WIDTH-1:0] d_rdata;
  logic [3:0]                    a_rid;
  logic [DATA_WIDTH-1:0]         a_rdata;
  logic [1:0]                    a_rresp;
  logic                          a_rlast;
  logic [RP-1:0][31:0]           rd_bad;
  logic [RP-1:0][7:0]            rd_tid;

  for (genvar i = 0; i < RP; i++) begin : g_rd
    hm_dma_rd #(.DATA_WIDTH(DATA_WIDTH), .AXI_ID(4'(i)), .MAX_OUTSTANDING(RD_OUTSTANDING[i]),
                .REQ_FIFO_DEPTH(RD_REQ_DEPTH[i])) u_rd (
      .clk, .rst,
      .s_req_addr(s_rd[i].addr), .s_req_len(s_rd[i].len), .s_req_tag(8'd0),
      .s_req_valid(s_rd_valid[i]), .s_req_ready(s_rd_ready[i]),
      .m_axis_tdata(m_rd_tdata[i]), .m_axis_tkeep(m_rd_tkeep[i]), .m_axis_tvalid(m_rd_tvalid[i]),
      .m_axis_tready(m_rd_tready[i]), .m_axis_tlast(m_rd_tlast[i]), .m_axis_tuser(m_rd_tuser[i]),
      .m_axis_tid(rd_tid[i]),
      .m_axi_arid(d_ar[i].id), .m_axi_araddr(d_ar[i].addr), .m_axi_arlen(d_ar[i].len),
      .m_axi_arsize(d_ar[i].size), .m_axi_arburst(d_ar[i].burst), .m_axi_arvalid(d_arvalid[i]),
      .m_axi_arready(d_arready[i]), .m_axi_rid(d_rid[i]), .m_axi_rdata(d_rdata[i]),
      .m_axi_rresp(d_rresp[i]), .m_axi_rlast(d_rlast[i]), .m_axi_rvalid(d_rvalid[i]),
      .m_axi_rready(d_rready[i]),
      .stat_bad_req(rd_bad[i])
    );

    hm_axi_rd_resv #(.DATA_WIDTH(DATA_WIDTH), .DEPTH(RD_RESV_BEATS[i])) u_resv (
      .clk, .rst,
      .s_ar(d_ar[i]), .s_arvalid(d_arvalid[i]), .s_arready(d_arready[i]),
      .s_rid(d_rid[i]), .s_rdata(d_rdata[i]), .s_rresp(d_rresp[i]), .s_rlast(d_rlast[i]),
      .s_rvalid(d_rvalid[i]), .s_rready(d_rready[i]),
      .m_ar(a_ar[i]), .m_arvalid(a_arvalid[i]), .m_arready(a_arready[i]),
      .m_rid(a_rid), .m_rdata(a_rdata), .m_rresp(a_rresp), .m_rlast(a_rlast),
      .m_rvalid(a_rvalid[i]), .m_rready(a_rready[i])
    );
  end

  hm_axi_rd_arb #(.PORTS(RP), .DATA_WIDTH(DATA_WIDTH),
                  .BG_MASK(RD_BACKGROUND < 0 ? '0 : RP'(1 << RD_BACKGROUND)), .BG_EVERY(8)) u_rd_arb (
    .clk, .rst,
    .s_ar(a_ar), .s_arvalid(a_arvalid), .s_arready(a_arready),
    .s_rid(a_rid), .s_rdata(a_rdata), .s_rresp(a_rresp), .s_rlast(a_rlast),
    .s_rvalid(a_rvalid), .s_rready(a_rready),
    .m_ar(ar), .m_arvalid(m_axi_arvalid), .m_arready(m_axi_arready),
    .m_rid(m_axi_rid), .m_rdata(m_axi_rdata), .m_rresp(m_axi_rresp), .m_rlast(m_axi_rlast),
    .m_rvalid(m_axi_rvalid), .m_rready(m_axi_rready)
  );

  // ---------------------------------------------------------------------------------------
  // Writes: engine -> gate -> arbiter
  // ---------------------------------------------------------------------------------------
  hm_axi_ax_t [WP-1:0]           e_aw, w_aw;
  hm_axi_ax_t                    aw;
  logic [WP-1:0][3:0]            e_bid;
  logic [WP-1:0][1:0]            e_bresp;
  logic [WP-1:0]                 e_awvalid, e_awready, e_wlast, e_wvalid, e_wready, e_bvalid, e_bready;
  logic [WP-1:0]                 w_awvalid, w_awready, w_wlast, w_wvalid, w_wready, w_bvalid, w_bready;
  logic [WP-1:0][DATA_WIDTH-1:0] e_wdata, w_wdata;
  logic [WP-1:0][KEEP_WIDTH-1:0] e_wstrb, w_wstrb;
  logic [3:0]                    w_bid;
  logic [1:0]                    w_bresp;
  logic [WP-1:0][31:0]           wr_bad, wr_lerr;
  logic [WP-1:0][7:0]            wr_tag;

  for (genvar i = 0; i < WP; i++) begin : g_wr
    hm_dma_wr #(.DATA_WIDTH(DATA_WIDTH), .AXI_ID(4'(i)), .MAX_BURST(WR_MAX_BURST[i]),
                .MAX_OUTSTANDING(WR_OUTSTANDING[i]), .REQ_FIFO_DEPTH(WR_REQ_DEPTH[i])) u_wr (
      .clk, .rst,
      .s_req_addr(s_wr[i].addr), .s_req_len(s_wr[i].len), .s_req_tag(8'd0),
      .s_req_valid(s_wr_valid[i]), .s_req_ready(s_wr_ready[i]),
      .s_axis_tdata(s_wr_tdata[i]), .s_axis_tkeep(s_wr_tkeep[i]), .s_axis_tvalid(s_wr_tvalid[i]),
      .s_axis_tready(s_wr_tready[i]), .s_axis_tlast(s_wr_tlast[i]),
      .m_done_tag(wr_tag[i]), .m_done_err(m_done_err[i]), .m_done_valid(m_done_valid[i]),
      .m_done_ready(m_done_ready[i]),
      .m_axi_awid(e_aw[i].id), .m_axi_awaddr(e_aw[i].addr), .m_axi_awlen(e_aw[i].len),
      .m_axi_awsize(e_aw[i].size), .m_axi_awburst(e_aw[i].burst), .m_axi_awvalid(e_awvalid[i]),
      .m_axi_awready(e_awready[i]), .m_axi_wdata(e_wdata[i]), .m_axi_wstrb(e_wstrb[i]),
      .m_axi_wlast(e_wlast[i]), .m_axi_wvalid(e_wvalid[i]), .m_axi_wready(e_wready[i]),
      .m_axi_bid(e_bid[i]), .m_axi_bresp(e_bresp[i]), .m_axi_bvalid(e_bvalid[i]),
      .m_axi_bready(e_bready[i]),
      .stat_bad_req(wr_bad[i]), .stat_len_err(wr_lerr[i])
    );

    hm_axi_wr_gate #(.DATA_WIDTH(DATA_WIDTH), .DEPTH(WR_GATE_BEATS[i])) u_gate (
      .clk, .rst,
      .s_aw(e_aw[i]), .s_awvalid(e_awvalid[i]), .s_awready(e_awready[i]),
      .s_wdata(e_wdata[i]), .s_wstrb(e_wstrb[i]), .s_wlast(e_wlast[i]), .s_wvalid(e_wvalid[i]),
      .s_wready(e_wready[i]),
      .s_bid(e_bid[i]), .s_bresp(e_bresp[i]), .s_bvalid(e_bvalid[i]), .s_bready(e_bready[i]),
      .m_aw(w_aw[i]), .m_awvalid(w_awvalid[i]), .m_awready(w_awready[i]),
      .m_wdata(w_wdata[i]), .m_wstrb(w_wstrb[i]), .m_wlast(w_wlast[i]), .m_wvalid(w_wvalid[i]),
      .m_wready(w_wready[i]),
      .m_bid(w_bid), .m_bresp(w_bresp), .m_bvalid(w_bvalid[i]), .m_bready(w_bready[i])
    );
  end

  hm_axi_wr_arb #(.PORTS(WP), .DATA_WIDTH(DATA_WIDTH)) u_wr_arb (
    .clk, .rst,
    .s_aw(w_aw), .s_awvalid(w_awvalid), .s_awready(w_awready),
    .s_wdata(w_wdata), .s_wstrb(w_wstrb), .s_wlast(w_wlast), .s_wvalid(w_wvalid), .s_wready(w_wready),
    .s_bid(w_bid), .s_bresp(w_bresp), .s_bvalid(w_bvalid), .s_bready(w_bready),
    .m_aw(aw), .m_awvalid(m_axi_awvalid), .m_awready(m_axi_awready),
    .m_wdata(m_axi_wdata), .m_wstrb(m_axi_wstrb), .m_wlast(m_axi_wlast), .m_wvalid(m_axi_wvalid),
    .m_wready(m_axi_wready),
    .m_bid(m_axi_bid), .m_bresp(m_axi_bresp), .m_bvalid(m_axi_bvalid), .m_bready(m_axi_bready)
  );

  assign {m_axi_arid, m_axi_araddr, m_axi_arlen, m_axi_arsize, m_axi_arburst} = ar;
  assign {m_axi_awid, m_axi_awaddr, m_axi_awlen, m_axi_awsize, m_axi_awburst} = aw;

  always_comb begin
    stat_bad_req = '0;
    for (int i = 0; i < RP; i++) stat_bad_req = stat_bad_req + rd_bad[i];
    for (int i = 0; i < WP; i++) stat_bad_req = stat_bad_req + wr_bad[i];
  end

  logic unused_ok;
  assign unused_ok = ^{rd_tid, wr_tag, wr_lerr};
endmodule
