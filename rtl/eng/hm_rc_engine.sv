// Hematite RC transport engine: the top of the core an FPGA/DPU user instantiates.
//
//   s_bar_*   AXI4-Lite slave: register BAR (hm_csr; identity, capabilities, doorbells, counters)
//   s_ctl_*   AXI4-Lite slave: internal control bus (hm_ctl; QP / CQ / MR context tables)
//   m_axi_*   AXI4 master, DATA_WIDTH bits, 64-bit addresses: all host memory access
//   s_rx_*    AXI4-Stream from the MAC;  m_tx_* AXI4-Stream to the MAC
//
// Status of this block (see docs/transport-engine.md): the requester side is implemented —
// doorbells, WQE fetch, local SGE checks, segmentation of SEND / WRITE / READ / atomic
// requests, gather DMA and the TX path. Started WQEs leave on m_sent_* for the completer,
// which is not built yet; neither is the receive side: received frames are counted
// (counter 7) and discarded, RQ and CQ doorbells are counted (counter 4) and discarded, and
// CQ-table and read commands on the control bus answer HM_CTL_ST_BAD_CMD.
module hm_rc_engine
  import hm_pkg::*;
  import hm_desc_pkg::*;
  import hm_regs_pkg::*;
  import hm_eng_pkg::*;
#(
  // Datapath width in bits (256 or 512).
  parameter int DATA_WIDTH = 512,
  // QP table entries (power of two).
  parameter int NUM_QPS = 4096,
  // MR table entries (power of two).
  parameter int NUM_MRS = 4096,
  // Bytes per beat, staging words (derived).
  localparam int KEEP_WIDTH = DATA_WIDTH / 8,
  localparam int SW = int'(HM_CTL_STAGE_WORDS)
) (
  input  logic                  clk,
  input  logic                  rst,

  // Register BAR
  input  logic [15:0]           s_bar_awaddr,
  input  logic                  s_bar_awvalid,
  output logic                  s_bar_awready,
  input  logic [31:0]           s_bar_wdata,
  input  logic [3:0]            s_bar_wstrb,
  input  logic                  s_bar_wvalid,
  output logic                  s_bar_wready,
  output logic [1:0]            s_bar_bresp,
  output logic                  s_bar_bvalid,
  input  logic                  s_bar_bready,
  input  logic [15:0]           s_bar_araddr,
  input  logic                  s_bar_arvalid,
  output logic                  s_bar_arready,
  output logic [31:0]           s_bar_rdata,
  output logic [1:0]            s_bar_rresp,
  output logic                  s_bar_rvalid,
  input  logic                  s_bar_rready,

  // Control bus
  input  logic [11:0]           s_ctl_awaddr,
  input  logic                  s_ctl_awvalid,
  output logic                  s_ctl_awready,
  input  logic [31:0]           s_ctl_wdata,
  input  logic [3:0]            s_ctl_wstrb,
  input  logic                  s_ctl_wvalid,
  output logic                  s_ctl_wready,
  output logic [1:0]            s_ctl_bresp,
  output logic                  s_ctl_bvalid,
  input  logic                  s_ctl_bready,
  input  logic [11:0]           s_ctl_araddr,
  input  logic                  s_ctl_arvalid,
  output logic                  s_ctl_arready,
  output logic [31:0]           s_ctl_rdata,
  output logic [1:0]            s_ctl_rresp,
  output logic                  s_ctl_rvalid,
  input  logic                  s_ctl_rready,

  // Host memory (AXI4 master)
  output logic [3:0]            m_axi_arid,
  output logic [63:0]           m_axi_araddr,
  output logic [7:0]            m_axi_arlen,
  output logic [2:0]            m_axi_arsize,
  output logic [1:0]            m_axi_arburst,
  output logic                  m_axi_arvalid,
  input  logic                  m_axi_arready,
  input  logic [3:0]            m_axi_rid,
  input  logic [DATA_WIDTH-1:0] m_axi_rdata,
  input  logic [1:0]            m_axi_rresp,
  input  logic                  m_axi_rlast,
  input  logic                  m_axi_rvalid,
  output logic                  m_axi_rready,
  output logic [3:0]            m_axi_awid,
  output logic [63:0]           m_axi_awaddr,
  output logic [7:0]            m_axi_awlen,
  output logic [2:0]            m_axi_awsize,
  output logic [1:0]            m_axi_awburst,
  output logic                  m_axi_awvalid,
  input  logic                  m_axi_awready,
  output logic [DATA_WIDTH-1:0] m_axi_wdata,
  output logic [KEEP_WIDTH-1:0] m_axi_wstrb,
  output logic                  m_axi_wlast,
  output logic                  m_axi_wvalid,
  input  logic                  m_axi_wready,
  input  logic [3:0]            m_axi_bid,
  input  logic [1:0]            m_axi_bresp,
  input  logic                  m_axi_bvalid,
  output logic                  m_axi_bready,

  // MAC receive
  input  logic [DATA_WIDTH-1:0] s_rx_tdata,
  input  logic [KEEP_WIDTH-1:0] s_rx_tkeep,
  input  logic                  s_rx_tvalid,
  output logic                  s_rx_tready,
  input  logic                  s_rx_tlast,
  input  logic                  s_rx_tuser,

  // MAC transmit
  output logic [DATA_WIDTH-1:0] m_tx_tdata,
  output logic [KEEP_WIDTH-1:0] m_tx_tkeep,
  output logic                  m_tx_tvalid,
  input  logic                  m_tx_tready,
  output logic                  m_tx_tlast,
  output logic                  m_tx_tuser,

  // Per-QP rate limit (DCQCN reaction point): bit q set = QP q may not start a packet
  input  logic [NUM_QPS-1:0]    rl_pause,

  // Started WQEs (towards the completer)
  output hm_sent_t              m_sent,
  output logic                  m_sent_valid,
  input  logic                  m_sent_ready
);
  localparam int NUM_COUNTERS = 16;

  // ---------------------------------------------------------------------------------------
  // Register BAR
  // ---------------------------------------------------------------------------------------
  hm_db_evt_t db;
  logic       db_valid, db_ready;
  logic [NUM_COUNTERS-1:0][31:0] counters;

  hm_csr #(
    .ADDR_WIDTH(16), .NUM_COUNTERS(NUM_COUNTERS), .LOG2_QPS($clog2(NUM_QPS)), .LOG2_CQS(12),
    .DATA_WIDTH(DATA_WIDTH)
  ) u_csr (
    .clk, .rst,
    .s_axil_awaddr(s_bar_awaddr), .s_axil_awvalid(s_bar_awvalid), .s_axil_awready(s_bar_awready),
    .s_axil_wdata(s_bar_wdata), .s_axil_wstrb(s_bar_wstrb), .s_axil_wvalid(s_bar_wvalid),
    .s_axil_wready(s_bar_wready), .s_axil_bresp(s_bar_bresp), .s_axil_bvalid(s_bar_bvalid),
    .s_axil_bready(s_bar_bready), .s_axil_araddr(s_bar_araddr), .s_axil_arvalid(s_bar_arvalid),
    .s_axil_arready(s_bar_arready), .s_axil_rdata(s_bar_rdata), .s_axil_rresp(s_bar_rresp),
    .s_axil_rvalid(s_bar_rvalid), .s_axil_rready(s_bar_rready),
    .m_db_data(db), .m_db_valid(db_valid), .m_db_ready(db_ready),
    .counters
  );

  // SQ doorbells to the requester; the others are not consumed yet (counted)
  logic req_db_ready;
  logic [31:0] db_dropped_q;
  hm_db_qp_t db_qp;
  assign db_qp    = hm_db_qp_t'(db.word);
  assign db_ready = db.kind == HM_DB_SQ ? req_db_ready : 1'b1;
  always_ff @(posedge clk) begin
    if (rst) db_dropped_q <= '0;
    else if (db_valid && db_ready && db.kind != HM_DB_SQ) db_dropped_q <= db_dropped_q + 1'b1;
  end

  // ---------------------------------------------------------------------------------------
  // Control bus and command routing
  // ---------------------------------------------------------------------------------------
  hm_ctl_cmd_t      cmd;
  logic [SW*32-1:0] cmd_data;
  logic             cmd_valid, cmd_ready;
  logic [7:0]       rsp_status_q;
  logic             rsp_valid_q;

  hm_ctl u_ctl (
    .clk, .rst,
    .s_axil_awaddr(s_ctl_awaddr), .s_axil_awvalid(s_ctl_awvalid), .s_axil_awready(s_ctl_awready),
    .s_axil_wdata(s_ctl_wdata), .s_axil_wstrb(s_ctl_wstrb), .s_axil_wvalid(s_ctl_wvalid),
    .s_axil_wready(s_ctl_wready), .s_axil_bresp(s_ctl_bresp), .s_axil_bvalid(s_ctl_bvalid),
    .s_axil_bready(s_ctl_bready), .s_axil_araddr(s_ctl_araddr), .s_axil_arvalid(s_ctl_arvalid),
    .s_axil_arready(s_ctl_arready), .s_axil_rdata(s_ctl_rdata), .s_axil_rresp(s_ctl_rresp),
    .s_axil_rvalid(s_ctl_rvalid), .s_axil_rready(s_ctl_rready),
    .m_cmd(cmd), .m_cmd_data(cmd_data), .m_cmd_valid(cmd_valid), .m_cmd_ready(cmd_ready),
    .s_rsp_status(rsp_status_q), .s_rsp_data('0), .s_rsp_read(1'b0), .s_rsp_valid(rsp_valid_q)
  );

  logic is_wr, qp_cmd, mr_cmd, in_range, req_ctl_ready;
  assign is_wr    = cmd.op == HM_CTL_OP_WRITE;
  assign qp_cmd   = cmd.table_sel == HM_CTL_TBL_QP;
  assign mr_cmd   = cmd.table_sel == HM_CTL_TBL_MR;
  assign in_range = qp_cmd ? 32'(cmd.index) < NUM_QPS : 32'(cmd.index) < NUM_MRS;
  assign cmd_ready = (is_wr && qp_cmd && in_range) ? req_ctl_ready : 1'b1;

  always_ff @(posedge clk) begin
    rsp_valid_q <= 1'b0;
    if (cmd_valid && cmd_ready) begin
      rsp_valid_q <= 1'b1;
      if (!is_wr || !(qp_cmd || mr_cmd)) rsp_status_q <= HM_CTL_ST_BAD_CMD;
      else if (!in_range)               rsp_status_q <= HM_CTL_ST_RANGE;
      else                              rsp_status_q <= HM_CTL_ST_OK;
    end
    if (rst) rsp_valid_q <= 1'b0;
  end

  // ---------------------------------------------------------------------------------------
  // MR table
  // ---------------------------------------------------------------------------------------
  hm_mr_ctx_t mr_wr;
  assign mr_wr = hm_mr_ctx_t'(cmd_data[$bits(hm_mr_ctx_t)-1:0]);
  logic [31:0] chk_key, chk_pd;
  logic [63:0] chk_addr, chk_len;
  logic [2:0]  chk_need, res_err;
  logic        chk_valid, chk_ready, res_ok, res_valid, res_ready, mr_wr_ready;
  logic [63:0] res_base;
  logic [7:0]  res_id;

  hm_mr_table #(.NUM_MRS(NUM_MRS), .ID_WIDTH(8)) u_mr (
    .clk, .rst,
    .s_wr_index($clog2(NUM_MRS)'(cmd.index)), .s_wr_entry_valid(mr_wr.valid), .s_wr_tag(mr_wr.tag),
    .s_wr_pd(mr_wr.pd), .s_wr_base(mr_wr.base), .s_wr_len(mr_wr.len), .s_wr_access(mr_wr.access),
    .s_wr_valid(cmd_valid && is_wr && mr_cmd && in_range), .s_wr_ready(mr_wr_ready),
    .s_chk_key(chk_key), .s_chk_pd(chk_pd), .s_chk_addr(chk_addr), .s_chk_len(chk_len),
    .s_chk_need(chk_need), .s_chk_id(8'd0), .s_chk_valid(chk_valid), .s_chk_ready(chk_ready),
    .m_res_ok(res_ok), .m_res_err(res_err), .m_res_base(res_base), .m_res_id(res_id),
    .m_res_valid(res_valid), .m_res_ready(res_ready)
  );

  // ---------------------------------------------------------------------------------------
  // Requester
  // ---------------------------------------------------------------------------------------
  logic [63:0] wrd_addr, prd_addr;
  logic [31:0] wrd_len, prd_len;
  logic        wrd_valid, wrd_ready, prd_valid, prd_ready;
  logic [DATA_WIDTH-1:0] wqe_tdata, pay_tdata, inl_tdata, g_tdata;
  logic [KEEP_WIDTH-1:0] wqe_tkeep, pay_tkeep, inl_tkeep, g_tkeep;
  logic wqe_tvalid, wqe_tready, wqe_tlast, wqe_tuser;
  logic pay_tvalid, pay_tready, pay_tlast, pay_tuser;
  logic inl_tvalid, inl_tready, inl_tlast;
  logic g_tvalid, g_tready, g_tlast, g_tuser;
  hm_piece_t pc;
  logic pc_valid, pc_ready;
  hm_roce_hdr_t hdr;
  logic hdr_valid, hdr_ready;
  logic [31:0] st_wqes, st_pkts, st_lerr, st_dbbad;

  hm_rc_req #(.DATA_WIDTH(DATA_WIDTH), .NUM_QPS(NUM_QPS)) u_req (
    .clk, .rst,
    .s_ctl_cmd(cmd), .s_ctl_data(cmd_data), .s_ctl_valid(cmd_valid && is_wr && qp_cmd && in_range),
    .s_ctl_ready(req_ctl_ready),
    .s_db_qpn(db_qp.qpn), .s_db_pi(db_qp.pi), .s_db_valid(db_valid && db.kind == HM_DB_SQ),
    .s_db_ready(req_db_ready),
    .rl_pause,
    .m_wrd_addr(wrd_addr), .m_wrd_len(wrd_len), .m_wrd_valid(wrd_valid), .m_wrd_ready(wrd_ready),
    .s_wqe_tdata(wqe_tdata), .s_wqe_tvalid(wqe_tvalid), .s_wqe_tready(wqe_tready),
    .s_wqe_tlast(wqe_tlast), .s_wqe_tuser(wqe_tuser),
    .m_chk_key(chk_key), .m_chk_pd(chk_pd), .m_chk_addr(chk_addr), .m_chk_len(chk_len),
    .m_chk_need(chk_need), .m_chk_valid(chk_valid), .m_chk_ready(chk_ready),
    .s_res_ok(res_ok), .s_res_valid(res_valid), .s_res_ready(res_ready),
    .m_pc(pc), .m_pc_valid(pc_valid), .m_pc_ready(pc_ready),
    .m_inl_tdata(inl_tdata), .m_inl_tkeep(inl_tkeep), .m_inl_tvalid(inl_tvalid),
    .m_inl_tready(inl_tready), .m_inl_tlast(inl_tlast),
    .m_hdr(hdr), .m_hdr_valid(hdr_valid), .m_hdr_ready(hdr_ready),
    .m_sent, .m_sent_valid, .m_sent_ready,
    .stat_wqes(st_wqes), .stat_pkts(st_pkts), .stat_local_err(st_lerr), .stat_db_bad(st_dbbad)
  );

  hm_rc_gather #(.DATA_WIDTH(DATA_WIDTH)) u_gather (
    .clk, .rst,
    .s_pc(pc), .s_pc_valid(pc_valid), .s_pc_ready(pc_ready),
    .s_inl_tdata(inl_tdata), .s_inl_tkeep(inl_tkeep), .s_inl_tvalid(inl_tvalid),
    .s_inl_tready(inl_tready), .s_inl_tlast(inl_tlast),
    .m_rd_addr(prd_addr), .m_rd_len(prd_len), .m_rd_valid(prd_valid), .m_rd_ready(prd_ready),
    .s_rd_tdata(pay_tdata), .s_rd_tkeep(pay_tkeep), .s_rd_tvalid(pay_tvalid),
    .s_rd_tready(pay_tready), .s_rd_tlast(pay_tlast), .s_rd_tuser(pay_tuser),
    .m_axis_tdata(g_tdata), .m_axis_tkeep(g_tkeep), .m_axis_tvalid(g_tvalid),
    .m_axis_tready(g_tready), .m_axis_tlast(g_tlast), .m_axis_tuser(g_tuser)
  );

  // ---------------------------------------------------------------------------------------
  // DMA reads: engine 0 fetches WQEs, engine 1 payload; one AXI read port
  // ---------------------------------------------------------------------------------------
  logic [1:0][3:0]  a_arid;
  logic [1:0][63:0] a_araddr;
  logic [1:0][7:0]  a_arlen;
  logic [1:0][2:0]  a_arsize;
  logic [1:0][1:0]  a_arburst;
  logic [1:0]       a_arvalid, a_arready, a_rvalid, a_rready;
  logic [3:0]       a_rid;
  logic [DATA_WIDTH-1:0] a_rdata;
  logic [1:0]       a_rresp;
  logic             a_rlast;
  logic [31:0]      rd0_bad, rd1_bad;
  logic [7:0]       tid0, tid1;

  hm_dma_rd #(.DATA_WIDTH(DATA_WIDTH), .AXI_ID(4'd0), .MAX_OUTSTANDING(4)) u_rd_wqe (
    .clk, .rst,
    .s_req_addr(wrd_addr), .s_req_len(wrd_len), .s_req_tag(8'd0), .s_req_valid(wrd_valid),
    .s_req_ready(wrd_ready),
    .m_axis_tdata(wqe_tdata), .m_axis_tkeep(wqe_tkeep), .m_axis_tvalid(wqe_tvalid),
    .m_axis_tready(wqe_tready), .m_axis_tlast(wqe_tlast), .m_axis_tuser(wqe_tuser), .m_axis_tid(tid0),
    .m_axi_arid(a_arid[0]), .m_axi_araddr(a_araddr[0]), .m_axi_arlen(a_arlen[0]),
    .m_axi_arsize(a_arsize[0]), .m_axi_arburst(a_arburst[0]), .m_axi_arvalid(a_arvalid[0]),
    .m_axi_arready(a_arready[0]), .m_axi_rid(a_rid), .m_axi_rdata(a_rdata), .m_axi_rresp(a_rresp),
    .m_axi_rlast(a_rlast), .m_axi_rvalid(a_rvalid[0]), .m_axi_rready(a_rready[0]),
    .stat_bad_req(rd0_bad)
  );

  hm_dma_rd #(.DATA_WIDTH(DATA_WIDTH), .AXI_ID(4'd1)) u_rd_pay (
    .clk, .rst,
    .s_req_addr(prd_addr), .s_req_len(prd_len), .s_req_tag(8'd0), .s_req_valid(prd_valid),
    .s_req_ready(prd_ready),
    .m_axis_tdata(pay_tdata), .m_axis_tkeep(pay_tkeep), .m_axis_tvalid(pay_tvalid),
    .m_axis_tready(pay_tready), .m_axis_tlast(pay_tlast), .m_axis_tuser(pay_tuser), .m_axis_tid(tid1),
    .m_axi_arid(a_arid[1]), .m_axi_araddr(a_araddr[1]), .m_axi_arlen(a_arlen[1]),
    .m_axi_arsize(a_arsize[1]), .m_axi_arburst(a_arburst[1]), .m_axi_arvalid(a_arvalid[1]),
    .m_axi_arready(a_arready[1]), .m_axi_rid(a_rid), .m_axi_rdata(a_rdata), .m_axi_rresp(a_rresp),
    .m_axi_rlast(a_rlast), .m_axi_rvalid(a_rvalid[1]), .m_axi_rready(a_rready[1]),
    .stat_bad_req(rd1_bad)
  );

  hm_axi_rd_arb #(.PORTS(2), .DATA_WIDTH(DATA_WIDTH), .ADDR_WIDTH(64), .ID_WIDTH(4)) u_rd_arb (
    .clk, .rst,
    .s_arid(a_arid), .s_araddr(a_araddr), .s_arlen(a_arlen), .s_arsize(a_arsize),
    .s_arburst(a_arburst), .s_arvalid(a_arvalid), .s_arready(a_arready),
    .s_rid(a_rid), .s_rdata(a_rdata), .s_rresp(a_rresp), .s_rlast(a_rlast),
    .s_rvalid(a_rvalid), .s_rready(a_rready),
    .m_arid(m_axi_arid), .m_araddr(m_axi_araddr), .m_arlen(m_axi_arlen), .m_arsize(m_axi_arsize),
    .m_arburst(m_axi_arburst), .m_arvalid(m_axi_arvalid), .m_arready(m_axi_arready),
    .m_rid(m_axi_rid), .m_rdata(m_axi_rdata), .m_rresp(m_axi_rresp), .m_rlast(m_axi_rlast),
    .m_rvalid(m_axi_rvalid), .m_rready(m_axi_rready)
  );

  // No host-memory writes yet (completer and responder not built)
  assign m_axi_awid    = '0;
  assign m_axi_awaddr  = '0;
  assign m_axi_awlen   = '0;
  assign m_axi_awsize  = '0;
  assign m_axi_awburst = '0;
  assign m_axi_awvalid = 1'b0;
  assign m_axi_wdata   = '0;
  assign m_axi_wstrb   = '0;
  assign m_axi_wlast   = 1'b0;
  assign m_axi_wvalid  = 1'b0;
  assign m_axi_bready  = 1'b1;

  // ---------------------------------------------------------------------------------------
  // TX path
  // ---------------------------------------------------------------------------------------
  logic [31:0] tx_frames, tx_len_err, tx_bad_req;
  hm_tx_path #(.DATA_WIDTH(DATA_WIDTH)) u_tx (
    .clk, .rst,
    .s_hdr_data(hdr), .s_hdr_valid(hdr_valid), .s_hdr_ready(hdr_ready),
    .s_axis_tdata(g_tdata), .s_axis_tkeep(g_tkeep), .s_axis_tvalid(g_tvalid),
    .s_axis_tready(g_tready), .s_axis_tlast(g_tlast), .s_axis_tuser(g_tuser),
    .m_axis_tdata(m_tx_tdata), .m_axis_tkeep(m_tx_tkeep), .m_axis_tvalid(m_tx_tvalid),
    .m_axis_tready(m_tx_tready), .m_axis_tlast(m_tx_tlast), .m_axis_tuser(m_tx_tuser),
    .stat_frames(tx_frames), .stat_len_err(tx_len_err), .stat_bad_req(tx_bad_req)
  );

  // ---------------------------------------------------------------------------------------
  // Receive side (not built yet): frames are counted and discarded
  // ---------------------------------------------------------------------------------------
  logic [31:0] rx_ignored_q;
  assign s_rx_tready = 1'b1;
  always_ff @(posedge clk) begin
    if (rst) rx_ignored_q <= '0;
    else if (s_rx_tvalid && s_rx_tlast) rx_ignored_q <= rx_ignored_q + 1'b1;
  end

  // ---------------------------------------------------------------------------------------
  // Counters (BAR HM_REG_CNT_BASE + 4 i)
  // ---------------------------------------------------------------------------------------
  always_comb begin
    counters     = '0;
    counters[0]  = tx_frames;
    counters[1]  = st_wqes;
    counters[2]  = st_pkts;
    counters[3]  = st_lerr;
    counters[4]  = db_dropped_q + st_dbbad;
    counters[5]  = tx_len_err;
    counters[6]  = tx_bad_req;
    counters[7]  = rx_ignored_q;
    counters[8]  = rd0_bad + rd1_bad;
  end

  /* verilator lint_off UNUSEDSIGNAL */
  logic unused_ok;
  assign unused_ok = ^{s_rx_tdata, s_rx_tkeep, s_rx_tuser, m_axi_bid, m_axi_bresp, m_axi_bvalid,
                       m_axi_awready, m_axi_wready, wqe_tkeep, tid0, tid1, res_err, res_base, res_id,
                       mr_wr_ready};
  /* verilator lint_on UNUSEDSIGNAL */
endmodule
