// Hematite RC transport engine: the top of the core an FPGA/DPU user instantiates.
//
//   s_bar_req/_rsp  AXI4-Lite slave (hm_axil_req_t / hm_axil_rsp_t): register BAR (hm_csr;
//                   identity, capabilities, doorbells, counters)
//   s_ctl_req/_rsp  AXI4-Lite slave: internal control bus (hm_ctl; QP / CQ / MR context tables)
//   m_axi_*   AXI4 master, DATA_WIDTH bits, 64-bit addresses: all host memory access
//   s_rx_*    AXI4-Stream from the MAC;  m_tx_* AXI4-Stream to the MAC
//
//   m_irq_*   interrupt messages (vector) for armed CQs
//
// Blocks: requester (doorbells, WQE fetch, local SGE checks, segmentation, gather DMA),
// responder (PSN checks, receive WQEs, placement, READ/atomic execution, ACK/NAK/RNR,
// duplicates), response generator, completer (ACKs, READ responses, atomic ACKs, error
// NAKs, send CQEs, flush on ERR, go-back-N on NAK / implied NAK / timeout, RNR waits), CQ
// unit, RX/TX paths. Not yet (see docs/transport-engine.md): control-bus reads (answered
// HM_CTL_ST_BAD_CMD).
module hm_rc_engine
  import hm_pkg::*;
  import hm_desc_pkg::*;
  import hm_regs_pkg::*;
  import hm_eng_pkg::*;
#(
  // Datapath width in bits (256 or 512).
  parameter int DATA_WIDTH = 512,
  // QP table entries (power of two, 2..32768: the QPNs of entries 0 and 1, NUM_QPS and
  // NUM_QPS + 1, must fit the 16-bit QPN of doorbells, pushes and events).
  parameter int NUM_QPS = 4096,
  // MR table entries (power of two).
  parameter int NUM_MRS = 4096,
  // CQ table entries (power of two).
  parameter int NUM_CQS = 4096,
  // DCQCN rate limiters (reaction point and pacer entries): any QP gets one when a CNP
  // arrives for it, at most CC_SLOTS QPs at a time (further CNPs are counted and ignored).
  parameter int CC_SLOTS = 64,
  // Request payload beats buffered between the receive dispatch and the responder's scatter
  // unit (power of two): the next packet's header is handled while the previous packet's
  // payload is still being placed, so a multi-packet WRITE is placed at the wire rate (the
  // responder needs about a dozen cycles per header; without the buffer those cycles stalled
  // the payload of every packet).
  parameter int RQ_PAY_BEATS = 32,
  // Bytes per beat, staging words (derived).
  localparam int KEEP_WIDTH = DATA_WIDTH / 8,
  localparam int SW = int'(HM_CTL_STAGE_WORDS)
) (
  input  logic                  clk,
  input  logic                  rst,

  // Register BAR
  input  hm_axil_req_t          s_bar_req,
  output hm_axil_rsp_t          s_bar_rsp,

  // Control bus
  input  hm_axil_req_t          s_ctl_req,
  output hm_axil_rsp_t          s_ctl_rsp,

  // Pushed send WQEs (the MMIO path): a QP's next WQE, whole, written by the host into the
  // QP's push window (on a card the PCIe shell turns a complete 64-byte write-combined write
  // into one push; partial writes are not pushes); the doorbell that follows binds it
  input  logic [15:0]           s_push_qpn,
  input  logic [HM_PUSH_BYTES*8-1:0] s_push_data,
  input  logic                  s_push_valid,
  output logic                  s_push_ready,

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

  // Interrupt messages
  output logic [7:0]            m_irq_vec,
  output logic                  m_irq_valid,
  input  logic                  m_irq_ready,

  // What the control core reads of the engine: hm_caps_t (as BAR HM_REG_CAPS), log2 MRs
  output logic [31:0]           caps,
  output logic [7:0]            mr_log
);
  localparam int NUM_COUNTERS = HM_CNT_COUNT;
  localparam int CTL_COUNTERS = NUM_COUNTERS < 64 ? NUM_COUNTERS : 64;  // the control bus's window
  assign caps   = {8'($clog2(NUM_QPS)), 8'($clog2(NUM_CQS)), 8'(DATA_WIDTH / 64), 8'(NUM_COUNTERS)};
  assign mr_log = 8'($clog2(NUM_MRS));

  // DMA engine ports (read engines 0..4 and write engines 0..2, see the DMA sections below)
  localparam int RP = 5;
  localparam int WP = 3;
  hm_cqe_req_t rcqe;                       // responder CQEs (towards the CQ unit)
  logic        rcqe_valid, rcqe_ready;
  hm_ctl_eq_t  eq_cfg;                     // the event queue (control bus HM_CTL_EQ)
  hm_ctl_post_t post;                      // control bus HM_CTL_POST: QP to ERR, or an event
  logic        post_valid, post_ready;
  logic [15:0] ovr_cqn;                    // CQ overrun events from the CQ unit
  logic        ovr_valid;
  logic        ev_qp_ok;                   // the event queue has room for a QP-fatal event
  // ---------------------------------------------------------------------------------------
  // Register BAR
  // ---------------------------------------------------------------------------------------
  hm_db_evt_t db;
  logic       db_valid, db_ready;
  logic [NUM_COUNTERS-1:0][31:0] counters;
  logic        qpc_rd_valid, qpc_rd_ready, qpc_valid;
  logic [15:0] qpc_rd_qpn;
  logic [HM_QPC_COUNT-1:0][31:0] qpc_data;
  // per-QP counter events from the blocks, and the counters' clear and init (see u_qpc)
  hm_qpc_ev_t            req_qpc, resp_qpc, cmpl_qpc, cmpl_qpc_rx, cq_qpc;
  logic                  req_qpc_v, resp_qpc_v, cmpl_qpc_v, cmpl_qpc_rx_v, cq_qpc_v;
  logic                  qpc_clr_q, qpc_clr_ready;
  logic [15:0]           qpc_clr_qpn_q;
  logic [31:0]           qpc_lost;
  logic                  qpc_init;

  hm_csr #(
    .ADDR_WIDTH(16), .NUM_COUNTERS(NUM_COUNTERS), .LOG2_QPS($clog2(NUM_QPS)),
    .LOG2_CQS($clog2(NUM_CQS)), .DATA_WIDTH(DATA_WIDTH)
  ) u_csr (
    .clk, .rst,
    .s_axil_req(s_bar_req), .s_axil_rsp(s_bar_rsp),
    .m_db_data(db), .m_db_valid(db_valid), .m_db_ready(db_ready),
    .counters,
    .m_qpc_rd_valid(qpc_rd_valid), .m_qpc_rd_qpn(qpc_rd_qpn), .m_qpc_rd_ready(qpc_rd_ready),
    .s_qpc_data(qpc_data), .s_qpc_valid(qpc_valid), .s_qpc_init(qpc_init)
  );

  // SQ doorbells go to the requester and the completer (both must take them), RQ doorbells
  // to the responder, CQ doorbells to the CQ unit
  logic req_db_ready, cmpl_db_ready, cq_db_ready, resp_db_ready;
  logic [31:0] db_dropped_q;
  hm_db_qp_t db_qp;
  logic      db_sq, db_cq, db_rq;
  // (the doorbell's QPN names its table entry from here on: hm_qpn_swap)
  always_comb begin
    db_qp     = hm_db_qp_t'(db.word);
    db_qp.qpn = 16'(hm_qpn_swap(24'(db_qp.qpn), $clog2(NUM_QPS)));
  end
  assign db_sq    = db.kind == HM_DB_SQ;
  assign db_cq    = db.kind == HM_DB_CQ;
  assign db_rq    = db.kind == HM_DB_RQ;
  // a QPN that names no entry (0, 1, beyond the table): an SQ doorbell goes to the requester
  // alone, which counts it (DB_IGNORED); an RQ doorbell is dropped and counted here
  logic db_inr;
  assign db_inr   = (db_qp.qpn >> $clog2(NUM_QPS)) == '0;
  assign db_ready = db_sq ? (req_db_ready && (cmpl_db_ready || !db_inr)) : db_cq ? cq_db_ready :
                    db_rq ? (resp_db_ready || !db_inr) : 1'b1;
  always_ff @(posedge clk) begin
    if (rst) db_dropped_q <= '0;
    else if (db_valid && db_ready && ((!db_sq && !db_cq && !db_rq) || (db_rq && !db_inr))) db_dropped_q <= db_dropped_q + 1'b1;
  end

  // ---------------------------------------------------------------------------------------
  // Control bus and command routing
  // ---------------------------------------------------------------------------------------
  hm_ctl_cmd_t      cmd;
  logic [SW*32-1:0] cmd_data;
  logic             cmd_valid, cmd_ready;
  logic [7:0]       rsp_status_q;
  logic             rsp_valid_q;

  logic [int'(HM_CTL_CC_WORDS)-1:0][31:0] cc_regs;
  hm_ctl #(.NUM_COUNTERS(CTL_COUNTERS)) u_ctl (
    .clk, .rst,
    .s_axil_req(s_ctl_req), .s_axil_rsp(s_ctl_rsp),
    .m_cmd(cmd), .m_cmd_data(cmd_data), .m_cmd_valid(cmd_valid), .m_cmd_ready(cmd_ready),
    .s_rsp_status(rsp_status_q), .s_rsp_data('0), .s_rsp_read(1'b0), .s_rsp_valid(rsp_valid_q),
    .m_eq(eq_cfg), .m_post(post), .m_post_valid(post_valid), .m_post_ready(post_ready),
    .m_cc(cc_regs), .counters(counters[CTL_COUNTERS-1:0])
  );

  logic is_wr, qp_cmd, mr_cmd, cq_cmd, in_range;
  logic req_ctl_ready, cmpl_ctl_ready, cq_ctl_ready, resp_ctl_ready;
  logic qp_go, req_took_q, cmpl_took_q, resp_took_q;
  assign is_wr    = cmd.op == HM_CTL_OP_WRITE;
  assign qp_cmd   = cmd.table_sel == HM_CTL_TBL_QP;
  assign mr_cmd   = cmd.table_sel == HM_CTL_TBL_MR;
  assign cq_cmd   = cmd.table_sel == HM_CTL_TBL_CQ;
  assign in_range = qp_cmd ? 32'(cmd.index) < NUM_QPS :
                    cq_cmd ? 32'(cmd.index) < NUM_CQS : 32'(cmd.index) < NUM_MRS;
  // a QP write goes to every block holding a copy of the QP context
  assign qp_go     = cmd_valid && is_wr && qp_cmd && in_range;
  assign cmd_ready = (is_wr && qp_cmd && in_range) ?
                       ((req_took_q || req_ctl_ready) && (cmpl_took_q || cmpl_ctl_ready) &&
                        (resp_took_q || resp_ctl_ready) && !qpc_clr_q) :
                     (is_wr && cq_cmd && in_range) ? cq_ctl_ready : 1'b1;

  always_ff @(posedge clk) begin
    rsp_valid_q <= 1'b0;
    if (qp_go && req_ctl_ready) req_took_q <= 1'b1;
    if (qp_go && cmpl_ctl_ready) cmpl_took_q <= 1'b1;
    if (qp_go && resp_ctl_ready) resp_took_q <= 1'b1;
    if (cmd_valid && cmd_ready) begin
      req_took_q  <= 1'b0;
      cmpl_took_q <= 1'b0;
      resp_took_q <= 1'b0;
      rsp_valid_q <= 1'b1;
      if (!is_wr || !(qp_cmd || mr_cmd || cq_cmd)) rsp_status_q <= HM_CTL_ST_BAD_CMD;
      else if (!in_range)                         rsp_status_q <= HM_CTL_ST_RANGE;
      else                                        rsp_status_q <= HM_CTL_ST_OK;
    end
    if (rst) begin
      rsp_valid_q <= 1'b0;
      req_took_q  <= 1'b0;
      cmpl_took_q <= 1'b0;
      resp_took_q <= 1'b0;
    end
  end

  // ---------------------------------------------------------------------------------------
  // MR table, shared by the requester (ID 0), the completer (ID 1) and the responder (ID 2)
  // ---------------------------------------------------------------------------------------
  hm_mr_ctx_t mr_wr;
  assign mr_wr = hm_mr_ctx_t'(cmd_data[$bits(hm_mr_ctx_t)-1:0]);
  hm_mr_chk_t [2:0] c_chk;
  logic [2:0]       c_valid, c_ready, r_valid, r_ready;
  hm_mr_chk_t  chk;
  hm_mr_res_t  res;
  logic [2:0]  res_err;
  logic        chk_valid, chk_ready, res_valid, res_ready, mr_wr_ready;
  logic [1:0]  chk_sel;
  logic        mr_changed;
  logic [7:0]  res_id;
  // fixed priority (each client issues a few checks and then waits for their results)
  assign chk_sel   = c_valid[0] ? 2'd0 : c_valid[1] ? 2'd1 : 2'd2;
  assign chk       = c_chk[chk_sel];
  assign chk_valid = |c_valid;
  always_comb begin
    c_ready = '0;
    c_ready[chk_sel] = chk_ready;
    r_valid = '0;
    r_valid[res_id[1:0]] = res_valid;
  end
  assign res_ready = r_ready[res_id[1:0]];

  hm_mr_table #(.NUM_MRS(NUM_MRS), .ID_WIDTH(8)) u_mr (
    .clk, .rst,
    .s_wr_index($clog2(NUM_MRS)'(cmd.index)), .s_wr(mr_wr),
    .s_wr_valid(cmd_valid && is_wr && mr_cmd && in_range), .s_wr_ready(mr_wr_ready),
    .s_chk(chk), .s_chk_id({6'd0, chk_sel}), .s_chk_valid(chk_valid), .s_chk_ready(chk_ready),
    .m_res(res), .m_res_err(res_err), .m_res_id(res_id), .m_res_valid(res_valid), .m_res_ready(res_ready),
    .m_changed(mr_changed)
  );

  // ---------------------------------------------------------------------------------------
  // Requester
  // ---------------------------------------------------------------------------------------
  hm_dma_req_t wrd, prd, crd;
  logic        wrd_valid, wrd_ready, prd_valid, prd_ready, crd_valid, crd_ready;
  logic [DATA_WIDTH-1:0] wqe_tdata, pay_tdata, inl_tdata, g_tdata, cwqe_tdata;
  logic [KEEP_WIDTH-1:0] wqe_tkeep, pay_tkeep, inl_tkeep, g_tkeep, cwqe_tkeep;
  logic wqe_tvalid, wqe_tready, wqe_tlast, wqe_tuser;
  logic cwqe_tvalid, cwqe_tready, cwqe_tlast, cwqe_tuser;
  logic pay_tvalid, pay_tready, pay_tlast, pay_tuser;
  logic inl_tvalid, inl_tready, inl_tlast;
  logic g_tvalid, g_tready, g_tlast, g_tuser;
  hm_piece_t pc;
  logic pc_valid, pc_ready;
  hm_roce_hdr_t hdr;
  hm_ucl_t hdr_ucl;
  logic hdr_valid, hdr_ready, rq_hdr_valid_a;
  hm_sent_t sent;
  logic sent_valid, sent_ready;
  logic [15:0] sent_made;
  logic [15:0] cerr_qpn, rerr_qpn, eb_qpn;
  logic cerr_valid, cerr_ready, rerr_valid, rerr_ready;
  logic eb_valid, eb_req_ready, eb_cmpl_ready, eb_resp_ready, eb_ready;
  logic eb_req_took_q, eb_cmpl_took_q, eb_resp_took_q;
  hm_req_stats_t req_st;
  hm_rq_cmd_t  rqc;
  logic        rqc_valid, rqc_ready;

  // ---- PFC: pause frames from the link hold new packets of the paused priorities
  hm_cc_pfc_t  cc_pfc;
  logic [7:0]  pfc_paused;
  logic [31:0] st_pfc_rx;
  assign cc_pfc = hm_cc_pfc_t'(cc_regs[HM_CC_PFC]);
  hm_pfc_rx #(.DATA_WIDTH(DATA_WIDTH)) u_pfc (
    .clk, .rst,
    .s_axis_tdata(s_rx_tdata), .s_axis_tkeep(s_rx_tkeep), .s_axis_tvalid(s_rx_tvalid),
    .s_axis_tready(s_rx_tready), .s_axis_tlast(s_rx_tlast),
    .cfg_enable(cc_pfc.enable), .cfg_quanta_q8(cc_pfc.quanta_q8),
    .o_paused(pfc_paused), .stat_pfc_rx(st_pfc_rx)
  );

  logic [15:0] rl_qpn, txr_qpn, txr_bytes;
  logic        rl_hold, txr_valid;
  logic [31:0] push_used, push_dropped;
  hm_rc_req #(.DATA_WIDTH(DATA_WIDTH), .NUM_QPS(NUM_QPS)) u_req (
    .clk, .rst,
    .s_ctl_cmd(cmd), .s_ctl_data(cmd_data), .s_ctl_valid(qp_go && !req_took_q),
    .s_ctl_ready(req_ctl_ready),
    .s_db(db_qp), .s_db_valid(db_valid && db_sq && (cmpl_db_ready || !db_inr)),
    .s_db_ready(req_db_ready),
    .s_push_qpn(16'(hm_qpn_swap(24'(s_push_qpn), $clog2(NUM_QPS)))), .s_push_data, .s_push_valid, .s_push_ready,
    .stat_push_used(push_used), .stat_push_dropped(push_dropped),
    .s_err_qpn(eb_qpn), .s_err_valid(eb_valid && !eb_req_took_q), .s_err_ready(eb_req_ready),
    .s_cmd(rqc), .s_cmd_valid(rqc_valid), .s_cmd_ready(rqc_ready),
    .rl_pause, .m_rl_qpn(rl_qpn), .rl_hold, .pfc_paused, .ecn_mask(cc_pfc.ecn_mask),
    .m_txr_valid(txr_valid), .m_txr_qpn(txr_qpn), .m_txr_bytes(txr_bytes),
    .m_wrd(wrd), .m_wrd_valid(wrd_valid), .m_wrd_ready(wrd_ready),
    .s_wqe_tdata(wqe_tdata), .s_wqe_tvalid(wqe_tvalid), .s_wqe_tready(wqe_tready),
    .s_wqe_tlast(wqe_tlast), .s_wqe_tuser(wqe_tuser),
    .m_chk(c_chk[0]), .m_chk_valid(c_valid[0]), .m_chk_ready(c_ready[0]),
    .s_res(res), .s_res_valid(r_valid[0]),
    .s_res_ready(r_ready[0]), .mr_changed,
    .m_pc(pc), .m_pc_valid(pc_valid), .m_pc_ready(pc_ready),
    .m_inl_tdata(inl_tdata), .m_inl_tkeep(inl_tkeep), .m_inl_tvalid(inl_tvalid),
    .m_inl_tready(inl_tready), .m_inl_tlast(inl_tlast),
    .m_hdr(hdr), .m_hdr_ucl(hdr_ucl), .m_hdr_valid(hdr_valid), .m_hdr_ready(hdr_ready),
    .m_sent(sent), .m_sent_valid(sent_valid), .m_sent_ready(sent_ready), .m_sent_made(sent_made),
    .stats(req_st), .m_qpc(req_qpc), .m_qpc_valid(req_qpc_v)
  );

  hm_rc_gather #(.DATA_WIDTH(DATA_WIDTH), .ORDER_DEPTH(128)) u_gather (
    .clk, .rst,
    .s_pc(pc), .s_pc_valid(pc_valid), .s_pc_ready(pc_ready),
    .s_inl_tdata(inl_tdata), .s_inl_tkeep(inl_tkeep), .s_inl_tvalid(inl_tvalid),
    .s_inl_tready(inl_tready), .s_inl_tlast(inl_tlast),
    .m_rd(prd), .m_rd_valid(prd_valid), .m_rd_ready(prd_ready),
    .s_rd_tdata(pay_tdata), .s_rd_tkeep(pay_tkeep), .s_rd_tvalid(pay_tvalid),
    .s_rd_tready(pay_tready), .s_rd_tlast(pay_tlast), .s_rd_tuser(pay_tuser),
    .m_axis_tdata(g_tdata), .m_axis_tkeep(g_tkeep), .m_axis_tvalid(g_tvalid),
    .m_axis_tready(g_tready), .m_axis_tlast(g_tlast), .m_axis_tuser(g_tuser)
  );

  // ---------------------------------------------------------------------------------------
  // Receive path and dispatch
  // ---------------------------------------------------------------------------------------
  hm_roce_hdr_t rx_hdr_w, rx_hdr, rq_hdr, rs_hdr;
  // past the RX path, a packet's DestQP names its table entry (hm_qpn_swap): QPNs 2^QW and
  // 2^QW + 1 are entries 0 and 1, and QPNs 0 and 1 fall outside the table like any unknown QPN
  always_comb begin
    rx_hdr         = rx_hdr_w;
    rx_hdr.dest_qp = hm_qpn_swap(rx_hdr_w.dest_qp, $clog2(NUM_QPS));
  end
  logic rx_hdr_valid, rx_hdr_ready, rq_hdr_valid, rq_hdr_ready, rs_hdr_valid, rs_hdr_ready;
  logic [DATA_WIDTH-1:0] rx_tdata, rq_tdata, rs_tdata;
  logic [KEEP_WIDTH-1:0] rx_tkeep, rq_tkeep, rs_tkeep;
  logic rx_tvalid, rx_tready, rx_tlast, rq_tvalid, rq_tready, rq_tlast, rs_tvalid, rs_tready, rs_tlast;
  hm_rx_status_t rx_mon;
  logic rx_mon_valid;
  logic [HM_RSN_COUNT-1:0][31:0] rx_stat;
  logic [31:0] rx_other;

  hm_rx_path #(.DATA_WIDTH(DATA_WIDTH)) u_rx (
    .clk, .rst,
    .s_axis_tdata(s_rx_tdata), .s_axis_tkeep(s_rx_tkeep), .s_axis_tvalid(s_rx_tvalid),
    .s_axis_tready(s_rx_tready), .s_axis_tlast(s_rx_tlast), .s_axis_tuser(s_rx_tuser),
    .m_hdr_data(rx_hdr_w), .m_hdr_valid(rx_hdr_valid), .m_hdr_ready(rx_hdr_ready),
    .m_axis_tdata(rx_tdata), .m_axis_tkeep(rx_tkeep), .m_axis_tvalid(rx_tvalid),
    .m_axis_tready(rx_tready), .m_axis_tlast(rx_tlast),
    .mon_data(rx_mon), .mon_valid(rx_mon_valid),
    .stat_cnt(rx_stat)
  );

  logic        rcnp_valid;
  logic [23:0] rcnp_qpn;
  logic [31:0] st_cnp_rx;
  // the dispatch's request payloads, into the payload buffer (u_rq_pay)
  logic [DATA_WIDTH-1:0] rqd_tdata;
  logic [KEEP_WIDTH-1:0] rqd_tkeep;
  logic                  rqd_tvalid, rqd_tready, rqd_tlast;
  logic [$clog2(RQ_PAY_BEATS+1):0] rq_pay_level;
  hm_rc_rx_dispatch #(.DATA_WIDTH(DATA_WIDTH)) u_disp (
    .clk, .rst,
    .s_hdr(rx_hdr), .s_hdr_valid(rx_hdr_valid), .s_hdr_ready(rx_hdr_ready),
    .s_axis_tdata(rx_tdata), .s_axis_tkeep(rx_tkeep), .s_axis_tvalid(rx_tvalid),
    .s_axis_tready(rx_tready), .s_axis_tlast(rx_tlast),
    .m_req_hdr(rq_hdr), .m_req_hdr_valid(rq_hdr_valid), .m_req_hdr_ready(rq_hdr_ready),
    .m_req_tdata(rqd_tdata), .m_req_tkeep(rqd_tkeep), .m_req_tvalid(rqd_tvalid),
    .m_req_tready(rqd_tready), .m_req_tlast(rqd_tlast),
    .m_rsp_hdr(rs_hdr), .m_rsp_hdr_valid(rs_hdr_valid), .m_rsp_hdr_ready(rs_hdr_ready),
    .m_rsp_tdata(rs_tdata), .m_rsp_tkeep(rs_tkeep), .m_rsp_tvalid(rs_tvalid),
    .m_rsp_tready(rs_tready), .m_rsp_tlast(rs_tlast),
    .m_cnp_valid(rcnp_valid), .m_cnp_qpn(rcnp_qpn),
    .stat_other(rx_other), .stat_cnp(st_cnp_rx)
  );

  // request payloads on their way to the scatter unit (RQ_PAY_BEATS, above)
  hm_fifo #(.WIDTH(DATA_WIDTH + KEEP_WIDTH + 1), .DEPTH(RQ_PAY_BEATS)) u_rq_pay (
    .clk, .rst,
    .s_data({rqd_tlast, rqd_tkeep, rqd_tdata}), .s_valid(rqd_tvalid), .s_ready(rqd_tready),
    .m_data({rq_tlast, rq_tkeep, rq_tdata}), .m_valid(rq_tvalid), .m_ready(rq_tready),
    .level(rq_pay_level));

  // ---------------------------------------------------------------------------------------
  // QP error events: from the completer or the responder, to every block holding the QP
  // ---------------------------------------------------------------------------------------
  // (the control plane's HM_CTL_POST QP_ERR enters here too, marked silent: no QP-fatal event;
  // a QPN beyond the table is dropped)
  logic [16:0] ef_in;
  logic        ef_push, ef_room, post_qperr, eb_silent;
  logic [$clog2(8+1):0] ef_level;
  assign post_qperr = post_valid && post.op == HM_CTL_POST_QP_ERR;
  assign ef_in      = cerr_valid ? {1'b0, cerr_qpn} : rerr_valid ? {1'b0, rerr_qpn} : {1'b1, post.id};
  assign ef_push    = cerr_valid || rerr_valid || (post_qperr && (post.id >> $clog2(NUM_QPS)) == '0);
  assign cerr_ready = ef_room;
  assign rerr_ready = ef_room && !cerr_valid;
  hm_fifo #(.WIDTH(17), .DEPTH(8)) u_errq (
    .clk, .rst, .s_data(ef_in), .s_valid(ef_push), .s_ready(ef_room),
    .m_data({eb_silent, eb_qpn}), .m_valid(eb_valid), .m_ready(eb_ready), .level(ef_level));
  // (and, when the event queue is on, room for its QP-fatal event)
  assign eb_ready = (eb_req_took_q || eb_req_ready) && (eb_cmpl_took_q || eb_cmpl_ready) &&
                    (eb_resp_took_q || eb_resp_ready) && (!eq_cfg.enable || eb_silent || ev_qp_ok);
  always_ff @(posedge clk) begin
    if (rst || (eb_valid && eb_ready)) begin
      eb_req_took_q  <= 1'b0;
      eb_cmpl_took_q <= 1'b0;
      eb_resp_took_q <= 1'b0;
    end else if (eb_valid) begin
      if (eb_req_ready) eb_req_took_q <= 1'b1;
      if (eb_cmpl_ready) eb_cmpl_took_q <= 1'b1;
      if (eb_resp_ready) eb_resp_took_q <= 1'b1;
    end
  end

  // ---------------------------------------------------------------------------------------
  // Responder, its scatter unit and the response generator
  // ---------------------------------------------------------------------------------------
  hm_scat_pc_t rpc;
  logic        rpc_valid, rpc_ready;
  hm_dma_req_t srd, rw, rrd;
  logic        srd_valid, srd_ready, rw_valid, rw_ready, rrd_valid, rrd_ready;
  logic [DATA_WIDTH-1:0] srd_tdata, rw_tdata, rr_tdata;
  logic [KEEP_WIDTH-1:0] srd_tkeep, rw_tkeep, rr_tkeep;
  logic        srd_tvalid, srd_tready, srd_tlast, srd_tuser;
  logic        rw_tvalid, rw_tready, rw_tlast;
  logic        rr_tvalid, rr_tready, rr_tlast, rr_tuser;
  logic        rdone_valid, rdone_err;
  hm_rjob_t    job;
  logic        job_valid, job_ready;
  logic [31:0] r_wr_done;
  hm_roce_hdr_t rhdr;
  logic        rhdr_valid, rhdr_ready;
  hm_resp_stats_t resp_st;
  logic [31:0] st_rpkts;

  hm_rjob_t    ce_job;
  logic        ce_valid;
  logic [15:0] ce_qpn;
  hm_rc_resp #(.DATA_WIDTH(DATA_WIDTH), .NUM_QPS(NUM_QPS)) u_resp (
    .clk, .rst,
    .s_ctl_cmd(cmd), .s_ctl_data(cmd_data), .s_ctl_valid(qp_go && !resp_took_q),
    .s_ctl_ready(resp_ctl_ready),
    .s_db(db_qp), .s_db_valid(db_valid && db_rq && db_inr), .s_db_ready(resp_db_ready),
    .s_err_qpn(eb_qpn), .s_err_valid(eb_valid && !eb_resp_took_q), .s_err_ready(eb_resp_ready),
    .s_hdr(rq_hdr), .s_hdr_valid(rq_hdr_valid), .s_hdr_ready(rq_hdr_ready),
    .m_srd(srd), .m_srd_valid(srd_valid), .m_srd_ready(srd_ready),
    .s_srd_tdata(srd_tdata), .s_srd_tvalid(srd_tvalid), .s_srd_tready(srd_tready),
    .s_srd_tlast(srd_tlast), .s_srd_tuser(srd_tuser),
    .m_chk(c_chk[2]), .m_chk_valid(c_valid[2]), .m_chk_ready(c_ready[2]),
    .s_res(res), .s_res_valid(r_valid[2]),
    .s_res_ready(r_ready[2]), .mr_changed,
    .m_pc(rpc), .m_pc_valid(rpc_valid), .m_pc_ready(rpc_ready),
    .s_done_valid(rdone_valid), .s_done_err(rdone_err),
    .m_ce_valid(ce_valid), .m_ce_qpn(ce_qpn), .m_ce_job(ce_job), .ecn_mask(cc_pfc.ecn_mask),
    .m_job(job), .m_job_valid(job_valid), .m_job_ready(job_ready), .wr_done(r_wr_done),
    .m_cqe(rcqe), .m_cqe_valid(rcqe_valid), .m_cqe_ready(rcqe_ready),
    .m_err_qpn(rerr_qpn), .m_err_valid(rerr_valid), .m_err_ready(rerr_ready),
    .stats(resp_st), .m_qpc(resp_qpc), .m_qpc_valid(resp_qpc_v)
  );

  hm_rc_scatter #(.DATA_WIDTH(DATA_WIDTH)) u_rscat (
    .clk, .rst,
    .s_pc(rpc), .s_pc_valid(rpc_valid), .s_pc_ready(rpc_ready),
    .s_axis_tdata(rq_tdata), .s_axis_tkeep(rq_tkeep), .s_axis_tvalid(rq_tvalid),
    .s_axis_tready(rq_tready), .s_axis_tlast(rq_tlast),
    .m_wr(rw), .m_wr_valid(rw_valid), .m_wr_ready(rw_ready),
    .m_axis_tdata(rw_tdata), .m_axis_tkeep(rw_tkeep), .m_axis_tvalid(rw_tvalid),
    .m_axis_tready(rw_tready), .m_axis_tlast(rw_tlast)
  );

  // ---- DCQCN (hm_eng_cc): CE-marked requests -> CNPs (notification point); CNPs received ->
  // a rate limiter per QP (slot map, reaction point, pacer) that holds the requester
  hm_cc_ctrl_t cc_ctrl;
  hm_rjob_t    cnp_job;
  logic        cnp_valid, cnp_ready, sl_detach;
  hm_cc_stats_t cc_st;
  logic [31:0] st_cnp_tx;
  hm_qp_ctx_t  qp_wr_ctx;
  assign cc_ctrl   = hm_cc_ctrl_t'(cc_regs[HM_CC_CTRL]);
  assign qp_wr_ctx = hm_qp_ctx_t'(cmd_data[$bits(hm_qp_ctx_t)-1:0]);
  // a QP reset or destroyed (a QP write with state RESET) frees its rate limiter; once per
  // write: qp_go can stay high for many cycles (until every block took the write)
  assign sl_detach = cmd_valid && cmd_ready && is_wr && qp_cmd && in_range && qp_wr_ctx.state == HM_QPS_RESET;
  hm_eng_cc #(.NUM_QPS(NUM_QPS), .CC_SLOTS(CC_SLOTS)) u_cc (
    .clk, .rst, .cc_regs,
    .s_ce_valid(ce_valid), .s_ce_qpn(ce_qpn), .s_ce_job(ce_job),
    .m_cnp(cnp_job), .m_cnp_valid(cnp_valid), .m_cnp_ready(cnp_ready),
    .s_rcnp_valid(rcnp_valid), .s_rcnp_qpn(rcnp_qpn),
    .s_tx_valid(txr_valid), .s_tx_qpn(txr_qpn), .s_tx_bytes(txr_bytes),
    .s_query_qpn(rl_qpn), .o_hold(rl_hold),
    .s_detach_valid(sl_detach), .s_detach_qpn(cmd.index),
    .stats(cc_st)
  );

  hm_rc_resp_tx u_resp_tx (
    .clk, .rst,
    .s_job(job), .s_job_valid(job_valid), .s_job_ready(job_ready), .wr_done(r_wr_done),
    .s_cnp(cnp_job), .s_cnp_valid(cnp_valid), .s_cnp_ready(cnp_ready),
    .cfg_cnp_dscp(cc_ctrl.cnp_dscp), .cfg_cnp_prio(cc_ctrl.cnp_prio), .pfc_paused,
    .m_hdr(rhdr), .m_hdr_valid(rhdr_valid), .m_hdr_ready(rhdr_ready),
    .m_rd(rrd), .m_rd_valid(rrd_valid), .m_rd_ready(rrd_ready),
    .stat_pkts(st_rpkts), .stat_cnps(st_cnp_tx)
  );

  // ---------------------------------------------------------------------------------------
  // Completer, its scatter unit and the CQ unit
  // ---------------------------------------------------------------------------------------
  hm_scat_pc_t cpc;
  logic        cpc_valid, cpc_ready;
  hm_dma_req_t cw, qw;
  logic        cw_valid, cw_ready, qw_valid, qw_ready;
  logic [DATA_WIDTH-1:0] cw_tdata, qw_tdata;
  logic [KEEP_WIDTH-1:0] cw_tkeep, qw_tkeep;
  logic        cw_tvalid, cw_tready, cw_tlast, qw_tvalid, qw_tready, qw_tlast;
  logic        cdone_valid, cdone_err, qdone_valid, qdone_err, qdone_ready;
  hm_cqe_req_t ccqe;
  logic        ccqe_valid, ccqe_ready;
  hm_compl_stats_t compl_st;
  hm_cq_stats_t cq_st;

  // UC local ACKs (hm_uc_lack) and received responses take turns into the completer
  hm_roce_hdr_t lack;
  logic         lack_valid, lack_ready, lack_room, cmp_hdr_ready, pick_lack, lack_turn_q;
  assign pick_lack    = lack_valid && (!rs_hdr_valid || lack_turn_q);
  assign lack_ready   = cmp_hdr_ready && pick_lack;
  assign rs_hdr_ready = cmp_hdr_ready && !pick_lack;
  always_ff @(posedge clk) begin
    if (rst) lack_turn_q <= 1'b0;
    else if (cmp_hdr_ready && (lack_valid || rs_hdr_valid)) lack_turn_q <= !pick_lack;
  end
  hm_uc_lack #(.DEPTH(32), .NUM_QPS(NUM_QPS)) u_lack (
    .clk, .rst,
    .s_hdr(hdr), .s_ucl(hdr_ucl), .s_fire(rq_hdr_valid_a && hdr_ready), .s_room(lack_room),
    .s_tlast_fire(g_tvalid && g_tready && g_tlast),
    .s_tlast_err(g_tuser),
    .i_made(sent_made), .i_sent_fire(sent_valid && sent_ready),
    .m_ack(lack), .m_ack_valid(lack_valid), .m_ack_ready(lack_ready)
  );

  hm_rc_compl #(.DATA_WIDTH(DATA_WIDTH), .NUM_QPS(NUM_QPS)) u_cmpl (
    .clk, .rst,
    .s_ctl_cmd(cmd), .s_ctl_data(cmd_data), .s_ctl_valid(qp_go && !cmpl_took_q),
    .s_ctl_ready(cmpl_ctl_ready),
    .s_sent(sent), .s_sent_valid(sent_valid), .s_sent_ready(sent_ready),
    .s_db(db_qp), .s_db_valid(db_valid && db_sq && db_inr && req_db_ready),
    .s_db_ready(cmpl_db_ready),
    .s_err_qpn(eb_qpn), .s_err_valid(eb_valid && !eb_cmpl_took_q), .s_err_ready(eb_cmpl_ready),
    .s_hdr(pick_lack ? lack : rs_hdr), .s_hdr_local(pick_lack),
    .s_hdr_valid(lack_valid || rs_hdr_valid), .s_hdr_ready(cmp_hdr_ready),
    .m_wrd(crd), .m_wrd_valid(crd_valid), .m_wrd_ready(crd_ready),
    .s_wqe_tdata(cwqe_tdata), .s_wqe_tvalid(cwqe_tvalid), .s_wqe_tready(cwqe_tready),
    .s_wqe_tlast(cwqe_tlast), .s_wqe_tuser(cwqe_tuser),
    .m_chk(c_chk[1]), .m_chk_valid(c_valid[1]), .m_chk_ready(c_ready[1]),
    .s_res(res), .s_res_valid(r_valid[1]), .s_res_ready(r_ready[1]),
    .m_pc(cpc), .m_pc_valid(cpc_valid), .m_pc_ready(cpc_ready),
    .s_done_valid(cdone_valid), .s_done_err(cdone_err),
    .m_cqe(ccqe), .m_cqe_valid(ccqe_valid), .m_cqe_ready(ccqe_ready),
    .m_rqc(rqc), .m_rqc_valid(rqc_valid), .m_rqc_ready(rqc_ready),
    .m_err_qpn(cerr_qpn), .m_err_valid(cerr_valid), .m_err_ready(cerr_ready),
    .stats(compl_st), .m_qpc(cmpl_qpc), .m_qpc_valid(cmpl_qpc_v),
    .m_qpc_rx(cmpl_qpc_rx), .m_qpc_rx_valid(cmpl_qpc_rx_v)
  );

  hm_rc_scatter #(.DATA_WIDTH(DATA_WIDTH)) u_cscat (
    .clk, .rst,
    .s_pc(cpc), .s_pc_valid(cpc_valid), .s_pc_ready(cpc_ready),
    .s_axis_tdata(rs_tdata), .s_axis_tkeep(rs_tkeep), .s_axis_tvalid(rs_tvalid),
    .s_axis_tready(rs_tready), .s_axis_tlast(rs_tlast),
    .m_wr(cw), .m_wr_valid(cw_valid), .m_wr_ready(cw_ready),
    .m_axis_tdata(cw_tdata), .m_axis_tkeep(cw_tkeep), .m_axis_tvalid(cw_tvalid),
    .m_axis_tready(cw_tready), .m_axis_tlast(cw_tlast)
  );

  // ---------------------------------------------------------------------------------------
  // Event queue: QP-fatal events (every QP the error bus moves to ERR) and CQ overruns
  // become CQEs with opcode HM_CQE_OP_EVENT in the CQ HM_CTL_EQ names; they share the CQ
  // unit's second port with the responder's CQEs (which go first)
  // ---------------------------------------------------------------------------------------
  logic [23:0] ev_in, ev_out;             // {HM_EV_*, id}
  logic        ev_push, ev_room, ev_valid, ev_pop, ev_ovr;
  logic [$clog2(16+1):0] ev_level;
  hm_cqe_req_t ev_cqe, cqb;
  logic        cqb_valid, cqb_ready;
  // an overrun of the event queue itself is not reported into it
  // (a posted event goes in when nothing else does; while the queue is off it is dropped)
  logic ev_fatal, ev_post;
  assign ev_ovr   = eq_cfg.enable && ovr_valid && ovr_cqn != eq_cfg.cqn;
  assign ev_qp_ok = ev_room && !ev_ovr;
  assign ev_fatal = eq_cfg.enable && eb_valid && eb_ready && !eb_silent;
  assign ev_post  = post_valid && post.op == HM_CTL_POST_EVENT && eq_cfg.enable && ev_room && !ev_ovr && !ev_fatal;
  assign ev_push  = ev_ovr || ev_fatal || ev_post;
  assign ev_in    = ev_ovr ? {HM_EV_CQ_OVERRUN, ovr_cqn} : ev_fatal ? {HM_EV_QP_FATAL, 16'(hm_qpn_swap(24'(eb_qpn), $clog2(NUM_QPS)))} : {post.code, post.id};
  assign post_ready = post.op == HM_CTL_POST_QP_ERR ?
                      (ef_room && !cerr_valid && !rerr_valid) || (post.id >> $clog2(NUM_QPS)) != '0 :
                      ev_post || !eq_cfg.enable;
  hm_fifo #(.WIDTH(24), .DEPTH(16)) u_evq (
    .clk, .rst, .s_data(ev_in), .s_valid(ev_push && ev_room), .s_ready(ev_room),
    .m_data(ev_out), .m_valid(ev_valid), .m_ready(ev_pop), .level(ev_level));
  always_comb begin
    ev_cqe              = '0;
    ev_cqe.cqn          = eq_cfg.cqn;
    ev_cqe.solicited    = 1'b1;
    ev_cqe.cqe.opcode   = HM_CQE_OP_EVENT;
    ev_cqe.cqe.status   = ev_out[23:16];
    ev_cqe.cqe.qpn      = 32'(ev_out[15:0]);
  end
  assign cqb        = rcqe_valid ? rcqe : ev_cqe;
  assign cqb_valid  = rcqe_valid || (ev_valid && eq_cfg.enable);
  assign rcqe_ready = cqb_ready;
  // events queued while the event queue was on are dropped once it is off
  assign ev_pop     = ev_valid && (eq_cfg.enable ? (!rcqe_valid && cqb_ready) : 1'b1);

  hm_rc_cq #(.DATA_WIDTH(DATA_WIDTH), .NUM_CQS(NUM_CQS), .NUM_QPS(NUM_QPS)) u_cq (
    .clk, .rst,
    .s_ctl_cmd(cmd), .s_ctl_data(cmd_data), .s_ctl_valid(cmd_valid && is_wr && cq_cmd && in_range),
    .s_ctl_ready(cq_ctl_ready),
    .s_db(hm_db_cq_t'(db.word)), .s_db_valid(db_valid && db_cq), .s_db_ready(cq_db_ready),
    .s_a(ccqe), .s_a_valid(ccqe_valid), .s_a_ready(ccqe_ready),
    .s_b(cqb), .s_b_valid(cqb_valid), .s_b_ready(cqb_ready),
    .m_wr(qw), .m_wr_valid(qw_valid), .m_wr_ready(qw_ready),
    .m_axis_tdata(qw_tdata), .m_axis_tkeep(qw_tkeep), .m_axis_tvalid(qw_tvalid),
    .m_axis_tready(qw_tready), .m_axis_tlast(qw_tlast),
    .s_done_valid(qdone_valid), .s_done_err(qdone_err), .s_done_ready(qdone_ready),
    .m_ovr_cqn(ovr_cqn), .m_ovr_valid(ovr_valid),
    .m_irq_vec, .m_irq_valid, .m_irq_ready,
    .stats(cq_st), .m_qpc(cq_qpc), .m_qpc_valid(cq_qpc_v)
  );

  // ---------------------------------------------------------------------------------------
  // DMA (hm_eng_dma): reads 0 requester WQEs, 1 requester payload, 2 completer WQEs (its
  // prefetch yields to the others: it would take read bandwidth the requester needs for the
  // next WQEs and payloads), 3 responder receive WQEs and atomic operands, 4 READ response
  // payload; writes 0 completer data (READ responses, atomic results), 1 CQEs, 2 responder data
  // (SEND / WRITE payload, atomic results).
  // ---------------------------------------------------------------------------------------
  logic [RP-1:0][DATA_WIDTH-1:0] rd_tdata;
  logic [RP-1:0][KEEP_WIDTH-1:0] rd_tkeep;
  logic [RP-1:0]                 rd_ready, rd_tvalid, rd_tlast, rd_tuser;
  logic [WP-1:0]                 wr_ready, wr_tready, done_valid, done_err;
  logic [31:0]                   st_dma_bad;
  assign {rrd_ready, srd_ready, crd_ready, prd_ready, wrd_ready} = rd_ready;
  assign {rr_tdata, srd_tdata, cwqe_tdata, pay_tdata, wqe_tdata} = rd_tdata;
  assign {rr_tkeep, srd_tkeep, cwqe_tkeep, pay_tkeep, wqe_tkeep} = rd_tkeep;
  assign {rr_tvalid, srd_tvalid, cwqe_tvalid, pay_tvalid, wqe_tvalid} = rd_tvalid;
  assign {rr_tlast, srd_tlast, cwqe_tlast, pay_tlast, wqe_tlast} = rd_tlast;
  assign {rr_tuser, srd_tuser, cwqe_tuser, pay_tuser, wqe_tuser} = rd_tuser;
  assign {rw_ready, qw_ready, cw_ready} = wr_ready;
  assign {rw_tready, qw_tready, cw_tready} = wr_tready;
  assign {rdone_valid, qdone_valid, cdone_valid} = done_valid;
  assign {rdone_err, qdone_err, cdone_err} = done_err;

  // (per-engine depths: hm_eng_dma's defaults, which are this engine's table)
  hm_eng_dma #(.DATA_WIDTH(DATA_WIDTH), .RD_PORTS(RP), .WR_PORTS(WP)) u_dma (
    .clk, .rst,
    .s_rd({rrd, srd, crd, prd, wrd}),
    .s_rd_valid({rrd_valid, srd_valid, crd_valid, prd_valid, wrd_valid}), .s_rd_ready(rd_ready),
    .m_rd_tdata(rd_tdata), .m_rd_tkeep(rd_tkeep), .m_rd_tvalid(rd_tvalid),
    .m_rd_tready({rr_tready, srd_tready, cwqe_tready, pay_tready, wqe_tready}),
    .m_rd_tlast(rd_tlast), .m_rd_tuser(rd_tuser),
    .s_wr({rw, qw, cw}),
    .s_wr_valid({rw_valid, qw_valid, cw_valid}), .s_wr_ready(wr_ready),
    .s_wr_tdata({rw_tdata, qw_tdata, cw_tdata}), .s_wr_tkeep({rw_tkeep, qw_tkeep, cw_tkeep}),
    .s_wr_tvalid({rw_tvalid, qw_tvalid, cw_tvalid}), .s_wr_tready(wr_tready),
    .s_wr_tlast({rw_tlast, qw_tlast, cw_tlast}),
    .m_done_valid(done_valid), .m_done_err(done_err), .m_done_ready({1'b1, qdone_ready, 1'b1}),
    .m_axi_arid, .m_axi_araddr, .m_axi_arlen, .m_axi_arsize, .m_axi_arburst, .m_axi_arvalid,
    .m_axi_arready, .m_axi_rid, .m_axi_rdata, .m_axi_rresp, .m_axi_rlast, .m_axi_rvalid,
    .m_axi_rready,
    .m_axi_awid, .m_axi_awaddr, .m_axi_awlen, .m_axi_awsize, .m_axi_awburst, .m_axi_awvalid,
    .m_axi_awready, .m_axi_wdata, .m_axi_wstrb, .m_axi_wlast, .m_axi_wvalid, .m_axi_wready,
    .m_axi_bid, .m_axi_bresp, .m_axi_bvalid, .m_axi_bready,
    .stat_bad_req(st_dma_bad)
  );

  // ---------------------------------------------------------------------------------------
  // TX path
  // ---------------------------------------------------------------------------------------
  // Per-QP counters (BAR0 QPC_SEL / QPC): events of the requester, the responder, the
  // completer (two), the CQ unit and the CNPs received, each for a QP inside the table (the
  // sources drop the others); a QP's row is cleared when it is created (a QP write that loads
  // both queues' state: RESET -> INIT)
  localparam int QPC_SRC = 6;
  always_ff @(posedge clk) begin
    if (rst) qpc_clr_q <= 1'b0;
    else if (cmd_valid && cmd_ready && is_wr && qp_cmd && in_range &&
             (cmd.flags & (HM_CTL_F_LOAD_SQ | HM_CTL_F_LOAD_RQ)) == (HM_CTL_F_LOAD_SQ | HM_CTL_F_LOAD_RQ)) begin
      qpc_clr_q     <= 1'b1;
      qpc_clr_qpn_q <= cmd.index;
    end else if (qpc_clr_ready) qpc_clr_q <= 1'b0;
  end
  hm_qp_counters #(.NUM_QPS(NUM_QPS), .NUM_SRC(QPC_SRC), .NUM_CNT(HM_QPC_COUNT)) u_qpc (
    .clk, .rst,
    .s_ev_valid({rcnp_valid && (rcnp_qpn >> $clog2(NUM_QPS)) == '0, cq_qpc_v, cmpl_qpc_rx_v, cmpl_qpc_v, resp_qpc_v, req_qpc_v}),
    .s_ev_qpn({rcnp_qpn[15:0], cq_qpc.qpn, cmpl_qpc_rx.qpn, cmpl_qpc.qpn, resp_qpc.qpn, req_qpc.qpn}),
    .s_ev_mask({HM_QPC_COUNT'(1) << HM_QPC_CNP_RX, cq_qpc.mask, cmpl_qpc_rx.mask, cmpl_qpc.mask, resp_qpc.mask, req_qpc.mask}),
    .s_clr_valid(qpc_clr_q), .s_clr_qpn(qpc_clr_qpn_q), .s_clr_ready(qpc_clr_ready),
    .s_rd_valid(qpc_rd_valid), .s_rd_qpn(16'(hm_qpn_swap(24'(qpc_rd_qpn), $clog2(NUM_QPS)))), .s_rd_ready(qpc_rd_ready),
    .m_rd_data(qpc_data), .m_rd_valid(qpc_valid),
    .lost(qpc_lost), .init_busy(qpc_init)
  );

  logic [31:0] tx_frames, tx_len_err, tx_bad_req;
  hm_roce_hdr_t t_hdr;
  logic t_hdr_valid, t_hdr_ready, t_tvalid, t_tready, t_tlast, t_tuser;
  logic [DATA_WIDTH-1:0] t_tdata;
  logic [KEEP_WIDTH-1:0] t_tkeep;
  logic [1:0] a_hdr_ready, a_tready;
  // (the requester's headers wait while hm_uc_lack cannot track one more)
  assign rq_hdr_valid_a = hdr_valid && lack_room;
  assign hdr_ready  = a_hdr_ready[0] && lack_room;
  assign rhdr_ready = a_hdr_ready[1];
  assign g_tready   = a_tready[0];
  assign rr_tready  = a_tready[1];
  hm_tx_arb #(.DATA_WIDTH(DATA_WIDTH)) u_tx_arb (
    .clk, .rst,
    .s_hdr({rhdr, hdr}), .s_hdr_valid({rhdr_valid, rq_hdr_valid_a}), .s_hdr_ready(a_hdr_ready),
    .s_tdata({rr_tdata, g_tdata}), .s_tkeep({rr_tkeep, g_tkeep}), .s_tvalid({rr_tvalid, g_tvalid}),
    .s_tready(a_tready), .s_tlast({rr_tlast, g_tlast}), .s_tuser({rr_tuser, g_tuser}),
    .m_hdr(t_hdr), .m_hdr_valid(t_hdr_valid), .m_hdr_ready(t_hdr_ready),
    .m_tdata(t_tdata), .m_tkeep(t_tkeep), .m_tvalid(t_tvalid), .m_tready(t_tready),
    .m_tlast(t_tlast), .m_tuser(t_tuser)
  );
  hm_tx_path #(.DATA_WIDTH(DATA_WIDTH)) u_tx (
    .clk, .rst,
    .s_hdr_data(t_hdr), .s_hdr_valid(t_hdr_valid), .s_hdr_ready(t_hdr_ready),
    .s_axis_tdata(t_tdata), .s_axis_tkeep(t_tkeep), .s_axis_tvalid(t_tvalid),
    .s_axis_tready(t_tready), .s_axis_tlast(t_tlast), .s_axis_tuser(t_tuser),
    .m_axis_tdata(m_tx_tdata), .m_axis_tkeep(m_tx_tkeep), .m_axis_tvalid(m_tx_tvalid),
    .m_axis_tready(m_tx_tready), .m_axis_tlast(m_tx_tlast), .m_axis_tuser(m_tx_tuser),
    .stat_frames(tx_frames), .stat_len_err(tx_len_err), .stat_bad_req(tx_bad_req)
  );

  // ---------------------------------------------------------------------------------------
  // Counters (BAR HM_REG_CNT + 4 i); docs/registers.md lists them
  // ---------------------------------------------------------------------------------------
  logic [31:0] rx_dropped;
  always_comb begin
    rx_dropped = '0;
    for (int r = 1; r < HM_RSN_COUNT; r++) rx_dropped = rx_dropped + rx_stat[r];
  end
  logic [31:0] tx_bytes, rx_bytes;
  hm_axis_bytes #(.DATA_WIDTH(DATA_WIDTH)) u_tx_bytes (
    .clk, .rst, .mon_tkeep(m_tx_tkeep), .mon_fire(m_tx_tvalid && m_tx_tready), .count(tx_bytes)
  );
  hm_axis_bytes #(.DATA_WIDTH(DATA_WIDTH)) u_rx_bytes (
    .clk, .rst, .mon_tkeep(s_rx_tkeep), .mon_fire(s_rx_tvalid && s_rx_tready), .count(rx_bytes)
  );
  always_comb begin
    counters = '0;
    // TX path, requester, doorbells
    counters[HM_CNT_TX_FRAMES] = tx_frames;  counters[HM_CNT_TX_ABORTED] = tx_len_err;  counters[HM_CNT_TX_BAD_HDR] = tx_bad_req;
    counters[HM_CNT_WQES] = req_st.wqes;  counters[HM_CNT_REQ_PKTS] = req_st.pkts;  counters[HM_CNT_WQE_LOCAL_ERR] = req_st.local_err;
    counters[HM_CNT_DB_IGNORED] = db_dropped_q + req_st.db_bad;
    counters[HM_CNT_DMA_ZERO_LEN] = st_dma_bad;
    counters[HM_CNT_DMA_WR_ERR] = compl_st.wr_err + cq_st.wr_err + resp_st.wr_err;
    // RX path: accepted, dropped (in all and by reason), not RC, bytes
    counters[HM_CNT_RX_ACCEPTED] = rx_stat[0];  counters[HM_CNT_RX_DROPPED] = rx_dropped;  counters[HM_CNT_RX_NOT_RC] = rx_other;
    for (int r = 1; r < HM_RSN_COUNT; r++) counters[HM_CNT_RX_DROP_BASE + r - 1] = rx_stat[r];
    counters[HM_CNT_TX_BYTES] = tx_bytes;  counters[HM_CNT_RX_BYTES] = rx_bytes;
    // responder
    counters[HM_CNT_REQS_RX] = resp_st.reqs;  counters[HM_CNT_DUP_REQS] = resp_st.dups;  counters[HM_CNT_OOS_RX] = resp_st.oos;
    counters[HM_CNT_SEQ_NAKS_TX] = resp_st.seq_naks;  counters[HM_CNT_RNR_NAKS_TX] = resp_st.rnr_naks;
    counters[HM_CNT_ERR_NAKS_TX] = resp_st.err_naks;  counters[HM_CNT_REQS_DROPPED] = resp_st.dropped;
    counters[HM_CNT_WRITE_REQS_RX] = resp_st.wr_reqs;  counters[HM_CNT_READ_REQS_RX] = resp_st.rd_reqs;
    counters[HM_CNT_ATOMIC_REQS_RX] = resp_st.at_reqs;  counters[HM_CNT_RESP_PKTS] = st_rpkts;
    // completer
    counters[HM_CNT_ACKS_RX] = compl_st.acks;  counters[HM_CNT_RESP_STALE] = compl_st.dropped;
    counters[HM_CNT_IMPLIED_NAKS] = compl_st.unhandled;  counters[HM_CNT_RETRIES] = compl_st.retries;
    counters[HM_CNT_ACK_TIMEOUTS] = compl_st.timeouts;
    counters[HM_CNT_SEQ_NAKS_RX] = compl_st.seq_naks;  counters[HM_CNT_RNR_NAKS_RX] = compl_st.rnr_naks;
    // CQ unit
    counters[HM_CNT_CQES] = cq_st.cqes;  counters[HM_CNT_CQ_OVERRUNS] = cq_st.overrun;  counters[HM_CNT_CQE_BAD_CQ] = cq_st.dropped;
    for (int k = 0; k < HM_CQE_ERR_STATUSES; k++) counters[HM_CNT_CQE_ERR_BASE + k] = cq_st.err_st[k];
    counters[HM_CNT_CQE_ERR_RQ] = cq_st.err_rq;  counters[HM_CNT_CQE_FLUSH_RQ] = cq_st.flush_rq;
    // congestion control and PFC
    counters[HM_CNT_ECN_CE_RX] = cc_st.ce;  counters[HM_CNT_CNP_TX] = st_cnp_tx;  counters[HM_CNT_CNP_RX] = st_cnp_rx;
    counters[HM_CNT_CNP_SUPPRESSED] = cc_st.np_suppressed;  counters[HM_CNT_RP_CUTS] = cc_st.rp_cuts;
    counters[HM_CNT_RP_ACTIVATIONS] = cc_st.rp_activations;  counters[HM_CNT_RP_RELEASES] = cc_st.rp_releases;
    counters[HM_CNT_CNP_NO_SLOT] = cc_st.no_slot;  counters[HM_CNT_PFC_RX] = st_pfc_rx;
    // per-QP counters
    counters[HM_CNT_QPC_LOST] = qpc_lost;
    counters[HM_CNT_EARLY_RETX] = compl_st.early;
    counters[HM_CNT_PUSH_USED] = push_used;  counters[HM_CNT_PUSH_DROPPED] = push_dropped;
  end

  if (HM_CNT_RX_DROP_BASE + HM_RSN_COUNT - 1 > HM_CNT_TX_BYTES ||
      HM_CNT_CQE_ERR_BASE + HM_CQE_ERR_STATUSES > HM_CNT_CQE_ERR_RQ) begin : g_bad_cnt_map
    $error("hm_rc_engine: the HM_CNT_* ranges overlap (hm_pkg)");
  end

  logic unused_ok;
  assign unused_ok = ^{rq_pay_level, wqe_tkeep, cwqe_tkeep, res_err, mr_wr_ready,
                       rx_mon, rx_mon_valid, res_id, srd_tkeep, ef_level, ev_level, eq_cfg.rsvd, post.rsvd,
                       cc_ctrl.rsvd0, cc_ctrl.rsvd1, cc_ctrl.rsvd2, cc_ctrl.rsvd3, cc_ctrl.np_enable,
                       cc_ctrl.rp_enable, cc_ctrl.clamp_tgt_rate, cc_ctrl.clamp_after_inc, cc_ctrl.threshold,
                       cc_pfc.rsvd0, qp_wr_ctx};

  if (NUM_QPS < 2 || NUM_QPS > 32768 || (1 << $clog2(NUM_QPS)) != NUM_QPS) begin : g_bad_qps
    $error("hm_rc_engine: NUM_QPS must be a power of two, 2..32768");
  end
endmodule
