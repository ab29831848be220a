// RC and UC responder: executes the requests that arrive for a QP (ROCEV2.md sections 6-10, with
// the choices of hematite-model's transport::qp, which is its oracle).
//
// Per QP: expected PSN, MSN, receive queue consumer index (the producer index comes from RQ
// doorbells), the message in progress (SEND: bytes placed into the current receive WQE and
// the SGL total; WRITE: target VA, DMA length, bytes placed), the NAK-sent flag, ERR, and a
// ring of MAX_RES responder resources (READ: first PSN, packets, VA, R_Key, length; atomic:
// PSN, VA, R_Key, original value) for duplicates.
//
//  * PSN = ePSN: executed. Opcode sequence, payload length, and the QP's remote access flags
//    are checked first (NAK invalid request). SEND takes the next receive WQE (none: RNR NAK
//    with the QP's RNR timer; an RQ doorbell that finds the next receive WQE posted and not
//    cached, with no request waiting, reads it ahead into the one-entry cache) whose SGL must
//    pass its MR checks (else receive CQE
//    LOC_PROT_ERR + NAK remote operational error) and hold the message (else LOC_LEN_ERR +
//    NAK invalid request); SEND with invalidate invalidates the R_Key (failure: LOC_PROT_ERR
//    + NAK remote operational error). WRITE checks its R_Key once for the whole DMA length
//    (NAK remote access error), READ and atomics likewise; atomics need 8-byte alignment.
//    Payload goes to host memory through the scatter unit; ACK for packets with AckReq.
//  * PSN ahead of ePSN: dropped; one NAK sequence error until ePSN arrives.
//  * PSN behind ePSN: duplicate. SEND/WRITE with AckReq: ACK for ePSN-1. READ: executed
//    again if it matches a saved READ resource; atomic: the saved result is returned.
//  * Error NAKs move the QP to ERR: the receive queue is flushed (WR_FLUSH_ERR CQEs) and the
//    requester and completer of the QP are told (m_err).
// Writes to host memory complete before the ACK, READ response or CQE that follows them.
//
// UC QPs (the context's `uc` bit; UC packets 0x20-0x2B decoded as the RC operation, and the
// other class of the two dropped on either kind of QP): no ACK or NAK, ever. Every packet
// sets ePSN to its PSN + 1; a PSN that is not ePSN (counted out of sequence) ends the message
// in progress and drops the packet unless it starts a message. A MIDDLE/LAST without its
// message, a length or access flag violation, an R_Key failure, a WRITE overrunning its DMA
// length, a SEND (or the last packet of a WRITE with immediate) with no receive WQE: the
// message is dropped (counted in `dropped`), the QP goes on; a SEND's receive WQE stays for
// the next message (it is consumed at the CQE). Receive-side local errors complete the WQE
// and move the QP to ERR as on RC, without the NAK. No fast path.
//
// Fast path: an in-order RDMA WRITE Only (no immediate) whose R_Key, PD and range lie in the
// region of the last successful remote-write check (a one-entry cache, cleared by any MR
// change) is placed and acknowledged without the general decode and check states, its
// payload piece and ACK job issued in the same cycle. The next request of the same QP is
// taken straight from the header input while the QP's state stays in registers (one
// packet per cycle; R_FWAIT keeps it there until other work arrives), and when it is already waiting, in order and asking for an ACK
// itself, this packet's ACK is left to it (coalesced: an ACK or NAK for PSN n acknowledges
// every PSN before n; at most ACK_COALESCE in a row).
module hm_rc_resp
  import hm_pkg::*;
  import hm_desc_pkg::*;
  import hm_regs_pkg::*;
  import hm_eng_pkg::*;
#(
  // Datapath width in bits (256 or 512).
  parameter int DATA_WIDTH = 512,
  // QP table entries (power of two).
  parameter int NUM_QPS = 4096,
  // Responder resources per QP (READ / atomic requests remembered for duplicates): 1, 2 or 4.
  parameter int MAX_RES = 4,
  // Fast-path ACKs left to the next waiting request of the QP, at most, in a row (0: none).
  parameter int ACK_COALESCE = 16,
  // Derived.
  localparam int QW = $clog2(NUM_QPS),
  localparam int SW = int'(HM_CTL_STAGE_WORDS)
) (
  input  logic                  clk,
  input  logic                  rst,

  // QP context writes
  input  hm_ctl_cmd_t           s_ctl_cmd,
  input  logic [SW*32-1:0]      s_ctl_data,
  input  logic                  s_ctl_valid,
  output logic                  s_ctl_ready,

  // Receive queue doorbells
  input  hm_db_qp_t             s_db,
  input  logic                  s_db_valid,
  output logic                  s_db_ready,

  // QPs another block moved to ERR
  input  logic [15:0]           s_err_qpn,
  input  logic                  s_err_valid,
  output logic                  s_err_ready,

  // Request header records (payload goes to the scatter unit by pieces)
  input  hm_roce_hdr_t          s_hdr,
  input  logic                  s_hdr_valid,
  output logic                  s_hdr_ready,

  // Small DMA reads: receive WQEs and atomic operands
  output hm_dma_req_t           m_srd,
  output logic                  m_srd_valid,
  input  logic                  m_srd_ready,
  input  logic [DATA_WIDTH-1:0] s_srd_tdata,
  input  logic                  s_srd_tvalid,
  output logic                  s_srd_tready,
  input  logic                  s_srd_tlast,
  input  logic                  s_srd_tuser,

  // MR checks (need 1 local write, 2 remote read, 3 remote write, 4 remote atomic, 5 invalidate)
  output hm_mr_chk_t            m_chk,
  output logic                  m_chk_valid,
  input  logic                  m_chk_ready,
  input  hm_mr_res_t            s_res,
  input  logic                  s_res_valid,
  output logic                  s_res_ready,
  input  logic                  mr_changed,     // an MR entry changed: forget cached regions

  // Payload pieces to the scatter unit, and its write completions
  output hm_scat_pc_t           m_pc,
  output logic                  m_pc_valid,
  input  logic                  m_pc_ready,
  input  logic                  s_done_valid,
  input  logic                  s_done_err,

  // Congestion: a request accepted for a QP arrived with IP ECN = CE (registered pulse; the
  // job carries the QP's addressing for a CNP back to the sender)
  output logic                  m_ce_valid,
  output logic [15:0]           m_ce_qpn,
  output hm_rjob_t              m_ce_job,

  // Priorities whose packets are ECN-capable (else Not-ECT)
  input  logic [7:0]            ecn_mask,

  // Responses to send
  output hm_rjob_t              m_job,
  output logic                  m_job_valid,
  input  logic                  m_job_ready,
  output logic [31:0]           wr_done,      // writes completed (for the response generator)

  // Receive CQEs
  output hm_cqe_req_t           m_cqe,
  output logic                  m_cqe_valid,
  input  logic                  m_cqe_ready,

  // QPs this block moved to ERR
  output logic [15:0]           m_err_qpn,
  output logic                  m_err_valid,
  input  logic                  m_err_ready,

  // Counters
  output hm_resp_stats_t        stats,
  // Per-QP counter events (requests received, out of sequence, duplicates)
  output hm_qpc_ev_t            m_qpc,
  output logic                  m_qpc_valid
);
  localparam int CTXW    = $bits(hm_qp_ctx_t);
  localparam int KW      = DATA_WIDTH / 8;
  localparam int WQE_MAX = 256;
  localparam int RW      = $clog2(MAX_RES) > 0 ? $clog2(MAX_RES) : 1;

  typedef struct packed {
    logic [23:0] epsn;
    logic [23:0] msn;
    logic [15:0] rq_ci;
    logic        in_send;
    logic        in_write;
    logic [31:0] moff;        // bytes of the message placed so far
    logic [31:0] total;       // SEND: receive SGL length; WRITE: DMA length
    logic [63:0] wva;         // WRITE: target address
    logic        nak_sent;
    logic        err;
    logic [RW-1:0] res_head;  // next resource slot
    logic [2:0]  res_cnt;     // valid resources
  } rdyn_t;

  typedef struct packed {
    logic        atomic;
    logic [23:0] first;
    logic [23:0] npkts;
    logic [63:0] va;
    logic [31:0] rkey;
    logic [31:0] len;
    logic [63:0] orig;
  } res_t;

  hm_qp_ctx_t  ctx_mem [NUM_QPS];
  rdyn_t       dyn_mem [NUM_QPS];
  logic [15:0] pi_mem  [NUM_QPS];
  res_t        res_mem [NUM_QPS * MAX_RES];

  // doorbells: queued, and ahead of a control command that comes after them (hm_db_order)
  hm_db_qp_t dbf;
  logic      dbf_valid, dbf_pop, ctl_arm_q, ctl_drain;

  typedef enum logic [5:0] {
    R_IDLE, R_CTL, R_LOAD, R_DISPATCH, R_SEQ, R_DUP, R_DUPRES, R_DUPCHK, R_EXEC,
    R_RQCHK, R_RQFETCH, R_RQDATA, R_SGLINIT, R_SGLCHK, R_SEND, R_INV, R_PLACE, R_WRCHK, R_WRITE,
    R_RDCHK, R_READ, R_ATCHK, R_ATWAIT, R_ATREAD, R_ATDATA, R_ATWRITE, R_RESSAVE,
    R_ACK, R_CQE, R_NAK, R_ERRCQE, R_ERRNOTE, R_FLUSH, R_DISCARD, R_WAITWR, R_SAVE, R_FAST, R_FWAIT
  } st_t;
  typedef enum logic [1:0] { K_DB, K_EVT, K_PKT } kind_t;
  st_t   st_q, after_q, disc_next_q;
  kind_t kind_q;

  logic [QW-1:0] q_q;
  hm_qp_ctx_t    ctx_q, ctx_rd;
  rdyn_t         d_q, dyn_rd;
  logic [15:0]   pi_q, pi_rd, dbpi_q;
  hm_roce_hdr_t  h_q;

  // work selection. A control command first lets the doorbells queued before it act (they
  // belong to the receive queue as it was; a QP reloaded behind them must not take the old
  // producer index): u_dbf holds it back (o_drain) until they are taken.
  logic take_ctl, take_evt, take_db, take_pkt;
  logic [QW-1:0] sel_q;
  always_comb begin
    take_ctl = st_q == R_IDLE && s_ctl_valid && ctl_arm_q && !ctl_drain;
    take_evt = st_q == R_IDLE && !s_ctl_valid && s_err_valid;
    take_db  = st_q == R_IDLE && dbf_valid && (s_ctl_valid ? ctl_drain : !s_err_valid);
    take_pkt = st_q == R_IDLE && !s_ctl_valid && !s_err_valid && !dbf_valid && s_hdr_valid;
    sel_q = QW'(s_hdr.dest_qp);
    if (s_ctl_valid && ctl_drain) sel_q = QW'(dbf.qpn);
    else if (s_ctl_valid) sel_q = QW'(s_ctl_cmd.index);
    else if (s_err_valid) sel_q = QW'(s_err_qpn);
    else if (dbf_valid) sel_q = QW'(dbf.qpn);
  end
  assign s_ctl_ready = st_q == R_CTL;
  assign s_err_ready = take_evt;
  assign dbf_pop     = take_db;
  hm_db_order #(.DEPTH(16)) u_dbf (
    .clk, .rst, .s_db, .s_db_valid, .s_db_ready, .m_db(dbf), .m_db_valid(dbf_valid), .m_db_ready(dbf_pop),
    .i_idle(st_q == R_IDLE), .i_ctl_valid(s_ctl_valid), .i_ctl_take(take_ctl), .o_armed(ctl_arm_q), .o_drain(ctl_drain));
  // the fast path chains to the next request of its QP (fchain, below)
  logic fchain;
  assign s_hdr_ready = take_pkt || fchain;

  always_ff @(posedge clk) begin
    ctx_rd <= ctx_mem[sel_q];
    dyn_rd <= dyn_mem[sel_q];
    pi_rd  <= pi_mem[sel_q];
  end

  // resources: read port addressed by the FSM
  logic [QW+RW-1:0] res_ra;
  res_t             res_rd;
  logic             res_we;
  res_t             res_wd;
  always_ff @(posedge clk) begin
    res_rd <= res_mem[res_ra];
    if (res_we) res_mem[{q_q, d_q.res_head}] <= res_wd;
  end

  // derived
  logic [3:0]  lpmtu;
  logic [12:0] pmtu;
  logic [3:0]  lstride;
  logic [15:0] rq_mask;
  logic [3:0]  max_res;
  assign lpmtu   = 4'd7 + 4'(ctx_q.pmtu);
  assign pmtu    = 13'd1 << lpmtu;
  assign lstride = 4'd6 + 4'(ctx_q.rq_log_stride);
  assign rq_mask = 16'((17'd1 << ctx_q.rq_log_size) - 17'd1);
  assign max_res = ctx_q.max_dest_rd_atomic > 4'(MAX_RES) ? 4'(MAX_RES) : ctx_q.max_dest_rd_atomic;

  // packet classes
  logic [7:0]    op;
  logic [15:0]   plen;
  hm_req_class_t oc;
  logic          uc_pkt;      // a UC packet (0x20-0x2B): decoded as the RC operation
  assign op     = h_q.opcode;
  assign plen   = h_q.payload_len;
  assign uc_pkt = op[7:5] == 3'b001;
  assign oc     = hm_req_class(uc_pkt ? (op[4:0] <= 5'h0B ? {3'b000, op[4:0]} : 8'hFF) : op);

  // the receive WQE (cache of one)
  logic [WQE_MAX*8-1:0] rqe_q;
  logic                 rc_v_q;
  logic [QW-1:0]        rc_q;
  logic [15:0]          rc_idx_q;
  logic [3:0]           rb_q;
  logic                 rfetch_err_q;
  hm_rq_wqe_hdr_t       rw;
  assign rw = hm_rq_wqe_hdr_t'(rqe_q[127:0]);
  logic rq_cached;
  assign rq_cached = rc_v_q && rc_q == q_q && rc_idx_q == d_q.rq_ci;
  logic [3:0] rnsge;
  assign rnsge = rw.num_sge > 8'd15 ? 4'd15 : 4'(rw.num_sge);

  // duplicate READ lookup
  logic [2:0]  dup_i_q;
  logic [63:0] dup_va_q;
  logic [31:0] dup_len_q;
  logic        dup_hit_q;

  // checks
  logic [4:0]  cj_q, cr_q, cn_q;
  logic        cerr_q;
  logic [35:0] csum_q;
  hm_sge_t     sge_c;
  assign sge_c = hm_rq_sge(rqe_q, cj_q[3:0]);
  logic chk_state;               // a state that issues MR checks (cj_q of cn_q) and takes results
  assign chk_state = st_q inside {R_SGLCHK, R_INV, R_WRCHK, R_RDCHK, R_DUPCHK, R_ATCHK};
  always_comb begin
    m_chk.pd    = ctx_q.pd;
    m_chk.key   = h_q.rkey;
    m_chk.addr  = h_q.va;
    m_chk.len   = 64'(h_q.dma_len);
    m_chk.need  = HM_MRN_REMOTE_WRITE;        // R_WRCHK
    m_chk_valid = chk_state && cj_q < cn_q;
    case (st_q)
      R_SGLCHK: begin
        m_chk.key = sge_c.lkey; m_chk.addr = sge_c.addr; m_chk.len = 64'(sge_c.len);
        m_chk.need = HM_MRN_LOCAL_WRITE;
      end
      R_INV:    begin m_chk.key = h_q.imm; m_chk.need = HM_MRN_INVALIDATE; end
      R_RDCHK:  m_chk.need = HM_MRN_REMOTE_READ;
      R_DUPCHK: begin m_chk.need = HM_MRN_REMOTE_READ; m_chk.addr = dup_va_q; m_chk.len = 64'(dup_len_q); end
      R_ATCHK:  begin m_chk.need = HM_MRN_REMOTE_ATOMIC; m_chk.len = 64'd8; end
      default: ;
    endcase
  end
  assign s_res_ready = chk_state;

  // small reads
  logic [15:0] rq_slot;
  assign rq_slot      = d_q.rq_ci & rq_mask;
  assign m_srd.addr   = st_q == R_ATREAD ? h_q.va : ctx_q.rq_base + (64'(rq_slot) << lstride);
  assign m_srd.len    = st_q == R_ATREAD ? 32'd8 : 32'd1 << lstride;
  assign m_srd_valid  = st_q == R_RQFETCH || st_q == R_ATREAD;
  assign s_srd_tready = st_q == R_RQDATA || st_q == R_ATDATA;

  // SEND placement: the SGL cursor (loaded by R_SEND / R_INV, stepped in R_PLACE)
  logic        pc_send_q;   // R_PLACE is placing into the SGL (SEND) or at wva (WRITE)
  logic        cur_load, cur_valid, cur_last;
  logic [3:0]  cur_sge;
  logic [12:0] cur_take;
  logic [63:0] cur_addr;
  hm_sgl_cursor u_cur (
    .clk, .rst, .i_load(cur_load), .i_seek(d_q.moff), .i_len(13'(plen)),
    .o_sge(cur_sge), .i_sge(hm_rq_sge(rqe_q, cur_sge)),
    .i_step(st_q == R_PLACE && pc_send_q), .i_ready(m_pc_ready), .o_addr(cur_addr),
    .o_take(cur_take), .o_valid(cur_valid), .o_last(cur_last));
  // loaded in every cycle before R_PLACE, so it holds the packet's offset and length there
  assign cur_load = st_q != R_PLACE;

  // writes issued / completed
  logic [31:0] wr_issued_q, wr_done_q;
  assign wr_done = wr_done_q;

  // region of the last successful remote-write check (R_Key, PD, bounds)
  logic        wk_v_q;
  logic [31:0] wk_key_q, wk_pd_q;
  logic [63:0] wk_base_q, wk_end_q;
  always_ff @(posedge clk) begin
    if (st_q == R_WRCHK && s_res_valid && s_res.ok) begin
      wk_v_q    <= 1'b1;
      wk_key_q  <= h_q.rkey;
      wk_pd_q   <= ctx_q.pd;
      wk_base_q <= s_res.base;
      wk_end_q  <= s_res.limit;
    end
    if (rst || mr_changed) wk_v_q <= 1'b0;
  end
  // an in-order WRITE Only the fast path takes (checked in R_DISPATCH)
  logic fast_wr;
  assign fast_wr = op == HM_OP_WRITE_ONLY && !ctx_q.uc && h_q.psn == d_q.epsn && !d_q.in_send && !d_q.in_write &&
                   plen <= 16'(pmtu) && (ctx_q.access & HM_QPA_REMOTE_WRITE) != '0 && h_q.dma_len == 32'(plen) &&
                   (h_q.dma_len == '0 ||
                    (wk_v_q && h_q.rkey == wk_key_q && ctx_q.pd == wk_pd_q && h_q.va >= wk_base_q &&
                     65'(h_q.va) + 65'(h_q.dma_len) <= 65'(wk_end_q)));

  // fast path: piece and ACK job issued together; fpc_q / fjob_q: already taken
  logic       fpc_q, fjob_q, fnext, fdefer, fneed_pc, fack, fpc_ok, fjob_ok, ffin;
  logic [4:0] fco_q;      // ACKs coalesced in a row
  // the next request of the QP is waiting and nothing else is (it keeps the QP's state)
  assign fnext   = s_hdr_valid && s_hdr.dest_qp == 24'(q_q) && !s_ctl_valid && !s_err_valid && !dbf_valid;
  // ... and it is an in-order WRITE Only that asks for an ACK: it acknowledges this one too
  assign fdefer  = fnext && s_hdr.opcode == HM_OP_WRITE_ONLY && s_hdr.ackreq && s_hdr.psn == h_q.psn + 24'd1 &&
                   32'(fco_q) < ACK_COALESCE;
  assign fneed_pc = plen != '0 && !fpc_q;
  assign fack    = h_q.ackreq && !fdefer && !fjob_q;
  assign fpc_ok  = !fneed_pc || m_pc_ready;
  assign fjob_ok = !fack || m_job_ready;
  assign ffin    = st_q == R_FAST && fast_wr && fpc_ok && fjob_ok;
  assign fchain  = (ffin || st_q == R_FWAIT) && fnext;

  // congestion: a request taken for execution (its QP is in RTR/RTS/SQD and not in error, or
  // it is chained on the fast path) that arrived with IP ECN = CE
  logic ce_now;
  always_comb begin
    ce_now = (st_q == R_DISPATCH && kind_q == K_PKT && !d_q.err && h_q.ecn == 2'b11 &&
              (ctx_q.state == HM_QPS_RTR || ctx_q.state == HM_QPS_RTS || ctx_q.state == HM_QPS_SQD)) ||
             (fchain && s_hdr.ecn == 2'b11);
  end
  always_ff @(posedge clk) begin
    m_ce_valid <= !rst && ce_now;
    m_ce_qpn   <= 16'(q_q);
    m_ce_job   <= m_job;
  end

  // atomic
  logic [63:0] at_orig_q, at_new;
  assign at_new = op == HM_OP_CMP_SWAP ? (at_orig_q == h_q.compare ? h_q.swap_add : at_orig_q)
                              : at_orig_q + h_q.swap_add;

  // pieces
  always_comb begin
    m_pc.discard = 1'b0;
    m_pc.imm     = 1'b0;
    m_pc.data    = at_new;
    m_pc.last    = 1'b1;
    m_pc.len     = 13'd8;
    m_pc.addr    = h_q.va;
    m_pc_valid   = 1'b0;
    case (st_q)
      R_DISCARD: begin m_pc.discard = 1'b1; m_pc_valid = 1'b1; end
      R_ATWRITE: begin m_pc.imm = 1'b1; m_pc_valid = 1'b1; end
      R_FAST: begin
        m_pc.len   = 13'(plen);
        m_pc_valid = fast_wr && fneed_pc;
      end
      R_PLACE: begin
        if (pc_send_q) begin
          m_pc.len   = cur_take;
          m_pc.addr  = cur_addr;
          m_pc.last  = cur_last;
          m_pc_valid = cur_valid;
        end else begin
          m_pc.len   = 13'(plen);
          m_pc.addr  = d_q.wva + 64'(d_q.moff);
          m_pc_valid = 1'b1;
        end
      end
      default: ;
    endcase
  end

  // response job
  logic [1:0]  job_kind_q;
  logic [23:0] job_psn_q;
  logic [7:0]  job_syn_q;
  logic [63:0] job_va_q;
  logic [31:0] job_len_q;
  always_comb begin
    m_job            = '0;
    m_job.kind       = job_kind_q;
    m_job.psn        = job_psn_q;
    m_job.syndrome   = job_syn_q;
    m_job.msn        = d_q.msn;
    m_job.va         = job_va_q;
    m_job.len        = job_len_q;
    m_job.orig       = at_orig_q;
    m_job.wr_seq     = wr_issued_q;
    m_job.pmtu       = ctx_q.pmtu;
    m_job.av         = hm_ctx_av(ctx_q, ecn_mask);
    if (st_q == R_FAST) begin
      // the fast path's ACK: this packet, after its write (issued now or before)
      m_job.kind     = HM_RJ_AETH;
      m_job.psn      = h_q.psn;
      m_job.syndrome = HM_AETH_ACK;
      m_job.msn      = d_q.msn + 24'd1;
      m_job.wr_seq   = wr_issued_q + 32'(fneed_pc);
    end
  end
  assign m_job_valid = st_q == R_ACK || (st_q == R_NAK && !ctx_q.uc) || (st_q == R_FAST && fast_wr && fack);

  // receive CQE
  logic [7:0]  cqe_st_q;
  logic [31:0] cqe_len_q;
  logic        cqe_wimm_q;    // RECV_RDMA_WITH_IMM
  always_comb begin
    m_cqe = '0;
    m_cqe.solicited     = h_q.se && kind_q == K_PKT && cqe_st_q == HM_CQE_ST_SUCCESS;
    m_cqe.cqn           = ctx_q.rq_cqn;
    m_cqe.cqe.wr_id     = rw.wr_id;
    m_cqe.cqe.byte_len  = cqe_st_q == HM_CQE_ST_SUCCESS ? cqe_len_q : 32'd0;
    m_cqe.cqe.qpn       = 32'(q_q);
    m_cqe.cqe.opcode    = cqe_wimm_q ? HM_CQE_OP_RECV_RDMA_IMM : HM_CQE_OP_RECV;
    m_cqe.cqe.status    = cqe_st_q;
    m_cqe.cqe.wqe_index = d_q.rq_ci;
    m_cqe.cqe.flags     = HM_CQE_F_RQ;
    if (cqe_st_q == HM_CQE_ST_SUCCESS && oc.imm && kind_q == K_PKT) begin
      m_cqe.cqe.flags = m_cqe.cqe.flags | HM_CQE_F_IMM;
      m_cqe.cqe.imm   = {h_q.imm[7:0], h_q.imm[15:8], h_q.imm[23:16], h_q.imm[31:24]};
    end
    if (cqe_st_q == HM_CQE_ST_SUCCESS && oc.inv && kind_q == K_PKT) begin
      m_cqe.cqe.flags = m_cqe.cqe.flags | HM_CQE_F_INV;
      m_cqe.cqe.imm   = h_q.imm;
    end
  end
  assign m_cqe_valid = (st_q == R_CQE || st_q == R_ERRCQE) && !rfetch_err_q;
  assign m_err_qpn   = 16'(q_q);
  assign m_err_valid = st_q == R_ERRNOTE;

  // resource record written in R_RESSAVE
  always_comb begin
    res_wd        = '0;
    res_wd.atomic = oc.atomic;
    res_wd.first  = h_q.psn;
    res_wd.npkts  = oc.atomic ? 24'd1 : hm_pkts(h_q.dma_len, lpmtu);
    res_wd.va     = h_q.va;
    res_wd.rkey   = h_q.rkey;
    res_wd.len    = h_q.dma_len;
    res_wd.orig   = at_orig_q;
  end
  assign res_we = st_q == R_RESSAVE;
  assign res_ra = {q_q, RW'(d_q.res_head - RW'(dup_i_q) - RW'(1))};

  hm_qp_ctx_t ctl_ctx;
  assign ctl_ctx = hm_qp_ctx_t'(s_ctl_data[CTXW-1:0]);

  always_ff @(posedge clk) begin
    if (st_q == R_CTL) begin
      ctx_mem[QW'(s_ctl_cmd.index)] <= ctl_ctx;
      if ((s_ctl_cmd.flags & (HM_CTL_F_LOAD_RQ | HM_CTL_F_LOAD_RQ_PSN)) != 0) begin
        // LOAD_RQ: a new receive queue; LOAD_RQ_PSN (INIT -> RTR): receives posted (and rung)
        // while in INIT stay posted
        dyn_mem[QW'(s_ctl_cmd.index)] <= '{epsn: ctl_ctx.rq_psn, msn: 24'd0,
          rq_ci: (s_ctl_cmd.flags & HM_CTL_F_LOAD_RQ) != 0 ? 16'd0 : dyn_rd.rq_ci,
          in_send: 1'b0, in_write: 1'b0, moff: 32'd0, total: 32'd0, wva: 64'd0,
          nak_sent: 1'b0, err: ctl_ctx.state == HM_QPS_ERR, res_head: '0, res_cnt: 3'd0};
        if ((s_ctl_cmd.flags & HM_CTL_F_LOAD_RQ) != 0) pi_mem[QW'(s_ctl_cmd.index)] <= 16'd0;
      end else if (ctl_ctx.state == HM_QPS_ERR) begin
        dyn_mem[QW'(s_ctl_cmd.index)].err <= 1'b1;
      end
    end
    if (st_q == R_SAVE) begin
      dyn_mem[q_q] <= d_q;
      if (kind_q == K_DB) pi_mem[q_q] <= pi_q;
    end
  end

  // the response job: an ACK / NAK (AETH), READ response or atomic ACK for PSN psn
  task automatic job(input logic [1:0] kind, input logic [23:0] psn, input logic [7:0] syn);
    job_kind_q <= kind;
    job_psn_q  <= psn;
    job_syn_q  <= syn;
  endtask

  // no receive WQE: an RNR NAK, nothing consumed (the payload is discarded), the QP saved
  task automatic rnr_nak();
    d_q.nak_sent   <= 1'b1;
    stats.rnr_naks <= stats.rnr_naks + 1'b1;
    job(HM_RJ_AETH, h_q.psn, HM_AETH_RNR | {3'd0, ctx_q.min_rnr_timer});
    after_q        <= plen != 0 ? R_DISCARD : R_SAVE;
    st_q           <= R_ACK;
  endtask

  // an executed packet: ACK it when it asks for one (AckReq; never on UC), then save the QP
  task automatic ack_if_asked();
    job(HM_RJ_AETH, h_q.psn, HM_AETH_ACK);
    after_q    <= R_SAVE;
    st_q       <= h_q.ackreq && !ctx_q.uc ? R_ACK : R_SAVE;
  endtask

  // UC: this packet and the message in progress are dropped (counted), the QP goes on
  task automatic uc_drop();
    d_q.in_send   <= 1'b0;
    d_q.in_write  <= 1'b0;
    stats.dropped <= stats.dropped + 1'b1;
    st_q          <= plen != 0 ? R_DISCARD : R_SAVE;
  endtask

  // a fatal error: NAK with `syn` (none on UC), optionally a receive CQE first
  task automatic fatal(input logic [7:0] syn, input logic with_cqe, input logic [7:0] cst);
    job(HM_RJ_AETH, h_q.psn, syn);
    cqe_st_q   <= cst;
    if (!ctx_q.uc) stats.err_naks <= stats.err_naks + 1'b1;
    after_q    <= R_NAK;
    st_q       <= with_cqe ? R_ERRCQE : R_NAK;
  endtask

  always_ff @(posedge clk) begin
    if (rst) begin
      st_q          <= R_IDLE;
      rc_v_q        <= 1'b0;
      wr_issued_q   <= '0;
      wr_done_q     <= '0;
      stats <= '0;
      m_qpc_valid <= 1'b0;
    end else begin
      // a request packet taken counts for its QP (s_hdr); R_SEQ's events for the loaded one
      m_qpc_valid <= 1'b0;
      m_qpc       <= '{qpn: st_q == R_SEQ ? 16'(q_q) : s_hdr.dest_qp[15:0], mask: '0};
      if (s_done_valid) begin
        wr_done_q <= wr_done_q + 1'b1;
        if (s_done_err) stats.wr_err <= stats.wr_err + 1'b1;
      end
      if (m_pc_valid && m_pc_ready && !m_pc.discard) wr_issued_q <= wr_issued_q + 1'b1;
      // the MR checks of the check states (R_*CHK, R_INV): requests issued, results in (the
      // states that start a series reset the counters; a check state waits for cr_q == cn_q)
      if (m_chk_valid && m_chk_ready) cj_q <= cj_q + 1'b1;
      if (s_res_valid && s_res_ready) begin
        cr_q <= cr_q + 1'b1;
        if (!s_res.ok) cerr_q <= 1'b1;
      end
      case (st_q)
        R_IDLE: begin
          q_q         <= sel_q;
          disc_next_q <= R_SAVE;
          if (take_ctl) st_q <= R_CTL;
          else if (take_evt) begin kind_q <= K_EVT; st_q <= R_LOAD; end
          else if (take_db) begin kind_q <= K_DB; dbpi_q <= dbf.pi; st_q <= R_LOAD; end
          else if (take_pkt) begin
            kind_q <= K_PKT;
            h_q    <= s_hdr;
            stats.reqs <= stats.reqs + 1'b1;
            if ((s_hdr.dest_qp >> QW) != '0) begin
              stats.dropped <= stats.dropped + 1'b1;
              disc_next_q  <= R_IDLE;
              st_q <= s_hdr.payload_len != 0 ? R_DISCARD : R_IDLE;
            end else begin
              m_qpc_valid <= 1'b1;
              m_qpc.mask[hm_pkg::HM_QPC_REQS_RX] <= 1'b1;
              st_q <= R_LOAD;
            end
          end
        end
        R_CTL: begin rc_v_q <= 1'b0; st_q <= R_IDLE; end
        R_LOAD: begin
          ctx_q <= ctx_rd;
          d_q   <= dyn_rd;
          pi_q  <= pi_rd;
          st_q  <= R_DISPATCH;
        end
        R_DISPATCH: begin
          case (kind_q)
            K_DB: begin
              pi_q <= dbpi_q;
              // receive WQE prefetch: a doorbell that finds the QP's next receive WQE posted and
              // not cached, with no request waiting, reads it now (the one-entry cache), so the
              // SEND that takes it need not wait for host memory
              if (!d_q.err && d_q.rq_ci != dbpi_q && !rq_cached && !s_hdr_valid &&
                  (ctx_q.state == HM_QPS_INIT || ctx_q.state == HM_QPS_RTR || ctx_q.state == HM_QPS_RTS ||
                   ctx_q.state == HM_QPS_SQD)) begin
                after_q <= R_SAVE;
                st_q    <= R_RQFETCH;
              end else st_q <= d_q.err ? R_FLUSH : R_SAVE;
            end
            K_EVT: begin
              d_q.err <= 1'b1;
              st_q    <= R_FLUSH;      // also when already in ERR: flushing is idempotent
            end
            default: begin
              if (!(ctx_q.state == HM_QPS_RTR || ctx_q.state == HM_QPS_RTS || ctx_q.state == HM_QPS_SQD) ||
                  d_q.err || uc_pkt != ctx_q.uc) begin
                stats.dropped <= stats.dropped + 1'b1;
                disc_next_q  <= R_IDLE;
                st_q <= plen != 0 ? R_DISCARD : R_IDLE;
              end else begin
                fpc_q  <= 1'b0;
                fjob_q <= 1'b0;
                fco_q  <= '0;
                st_q   <= fast_wr ? R_FAST : R_SEQ;
              end
            end
          endcase
        end
        R_SEQ: begin
          if (uc_pkt != ctx_q.uc) begin
            // (a chained request of the other class of the two)
            stats.dropped <= stats.dropped + 1'b1;
            st_q <= plen != 0 ? R_DISCARD : R_SAVE;
          end else if (ctx_q.uc) begin
            // UC: ePSN follows every packet; a gap loses the message in progress, and the
            // packet too unless it starts a message
            d_q.epsn <= h_q.psn + 24'd1;
            if (oc.write && oc.first) stats.wr_reqs <= stats.wr_reqs + 1'b1;
            if (h_q.psn != d_q.epsn) begin
              stats.oos <= stats.oos + 1'b1;
              m_qpc_valid <= 1'b1;
              m_qpc.mask[hm_pkg::HM_QPC_OOS_RX] <= 1'b1;
              d_q.in_send  <= 1'b0;
              d_q.in_write <= 1'b0;
              st_q <= oc.first ? R_EXEC : plen != 0 ? R_DISCARD : R_SAVE;
            end else st_q <= R_EXEC;
          end else if (h_q.psn == d_q.epsn) begin
            d_q.nak_sent <= 1'b0;
            if (oc.write && oc.first) stats.wr_reqs <= stats.wr_reqs + 1'b1;
            if (oc.read) stats.rd_reqs <= stats.rd_reqs + 1'b1;
            if (oc.atomic) stats.at_reqs <= stats.at_reqs + 1'b1;
            st_q <= R_EXEC;
          end else if (hm_psn_lt(h_q.psn, d_q.epsn)) begin
            stats.dups <= stats.dups + 1'b1;
            m_qpc_valid <= 1'b1;
            m_qpc.mask[hm_pkg::HM_QPC_DUP_REQS] <= 1'b1;
            dup_i_q   <= '0;
            dup_hit_q <= 1'b0;
            st_q      <= R_DUP;
          end else begin
            // ahead: one NAK sequence error until ePSN arrives
            stats.oos <= stats.oos + 1'b1;
            m_qpc_valid <= 1'b1;
            m_qpc.mask[hm_pkg::HM_QPC_OOS_RX] <= 1'b1;
            if (!d_q.nak_sent) begin
              d_q.nak_sent  <= 1'b1;
              stats.seq_naks <= stats.seq_naks + 1'b1;
              job(HM_RJ_AETH, d_q.epsn, HM_AETH_NAK_PSN_SEQ);
              after_q       <= plen != 0 ? R_DISCARD : R_SAVE;
              st_q          <= R_ACK;
            end else st_q <= plen != 0 ? R_DISCARD : R_SAVE;
          end
        end

        // ------------------------------------------------------------------ duplicates
        R_DUP: begin
          if (oc.read || oc.atomic) begin
            // newest resource first
            if (dup_i_q == d_q.res_cnt) st_q <= plen != 0 ? R_DISCARD : R_SAVE;   // not found: dropped
            else st_q <= R_DUPRES;
          end else begin
            if (h_q.ackreq) begin
              job(HM_RJ_AETH, d_q.epsn - 24'd1, HM_AETH_ACK);
              after_q    <= plen != 0 ? R_DISCARD : R_SAVE;
              st_q       <= R_ACK;
            end else st_q <= plen != 0 ? R_DISCARD : R_SAVE;
          end
        end
        R_DUPRES: begin
          // res_rd is the entry dup_i_q back from the head (read issued the cycle before)
          logic [23:0] k;
          logic [31:0] off;
          k   = h_q.psn - res_rd.first;
          off = 32'(k) << lpmtu;
          if (oc.read && !res_rd.atomic && k < res_rd.npkts) begin
            if (h_q.rkey == res_rd.rkey && h_q.va == res_rd.va + 64'(off) &&
                h_q.dma_len == res_rd.len - off) begin
              dup_va_q  <= h_q.va;
              dup_len_q <= h_q.dma_len;
              cj_q <= '0; cr_q <= '0; cerr_q <= 1'b0;
              cn_q <= h_q.dma_len != '0 ? 5'd1 : 5'd0;
              st_q <= R_DUPCHK;
            end else st_q <= R_SAVE;
          end else if (oc.atomic && res_rd.atomic && res_rd.first == h_q.psn) begin
            if (h_q.va == res_rd.va && h_q.rkey == res_rd.rkey) begin
              at_orig_q  <= res_rd.orig;
              job(HM_RJ_ATOMIC, h_q.psn, HM_AETH_ACK);
              after_q    <= R_SAVE;
              st_q       <= R_ACK;
            end else st_q <= R_SAVE;
          end else begin
            dup_i_q <= dup_i_q + 1'b1;
            st_q    <= R_DUP;
          end
        end
        R_DUPCHK: begin
          if (cr_q == cn_q) begin
            if (cerr_q) st_q <= R_SAVE;
            else begin
              job(HM_RJ_READ, h_q.psn, HM_AETH_ACK);
              job_va_q   <= dup_va_q;
              job_len_q  <= dup_len_q;
              after_q    <= R_SAVE;
              st_q       <= R_ACK;
            end
          end
        end

        // ------------------------------------------------------------------ in order
        R_EXEC: begin
          logic seq_ok, len_ok, acc_ok;
          // a message continues only its own kind; a new one starts only outside one; SEND and
          // WRITE packets before the last carry exactly one path MTU, the last at least a byte
          if (!(oc.send || oc.write || oc.read || oc.atomic)) seq_ok = 1'b0;
          else if (oc.first) seq_ok = ctx_q.uc || (!d_q.in_send && !d_q.in_write);
          else seq_ok = oc.send ? d_q.in_send : d_q.in_write;
          if (!(oc.send || oc.write)) len_ok = 1'b1;
          else if (!oc.last) len_ok = plen == 16'(pmtu);
          else len_ok = (oc.first || plen != 0) && plen <= 16'(pmtu);
          acc_ok = !(oc.write && (ctx_q.access & HM_QPA_REMOTE_WRITE) == '0) &&
                   !(oc.read && (ctx_q.access & HM_QPA_REMOTE_READ) == '0) &&
                   !(oc.atomic && (ctx_q.access & HM_QPA_REMOTE_ATOMIC) == '0);
          cj_q <= '0; cr_q <= '0; cerr_q <= 1'b0;
          // (UC: a message that starts ends one still in progress: its rest was lost)
          if (ctx_q.uc && oc.first) begin
            d_q.in_send  <= 1'b0;
            d_q.in_write <= 1'b0;
          end
          if (!seq_ok || !len_ok || !acc_ok) begin
            d_q.in_send  <= 1'b0;
            d_q.in_write <= 1'b0;
            if (ctx_q.uc) uc_drop();
            else fatal(HM_AETH_NAK_INV_REQ, 1'b0, HM_CQE_ST_SUCCESS);
          end else if (oc.send) begin
            if (oc.first) begin
              if (d_q.rq_ci == pi_q) begin   // no receive WQE
                if (ctx_q.uc) uc_drop();
                else rnr_nak();
              end else begin
                after_q <= R_SGLINIT;
                st_q    <= rq_cached ? R_SGLINIT : R_RQFETCH;
              end
            end else begin
              after_q <= R_SEND;
              st_q    <= rq_cached ? R_SEND : R_RQFETCH;
            end
          end else if (oc.write) begin
            if (oc.first) begin
              if (h_q.dma_len > 32'h8000_0000) begin
                if (ctx_q.uc) uc_drop();
                else fatal(HM_AETH_NAK_INV_REQ, 1'b0, HM_CQE_ST_SUCCESS);
              end else begin
                cn_q <= h_q.dma_len != '0 ? 5'd1 : 5'd0;
                st_q <= R_WRCHK;
              end
            end else st_q <= R_WRITE;
          end else if (oc.read) begin
            if (h_q.dma_len > 32'h8000_0000 || max_res == '0) fatal(HM_AETH_NAK_INV_REQ, 1'b0, HM_CQE_ST_SUCCESS);
            else begin
              cn_q <= h_q.dma_len != '0 ? 5'd1 : 5'd0;
              st_q <= R_RDCHK;
            end
          end else begin
            if (max_res == '0 || h_q.va[2:0] != 3'd0) fatal(HM_AETH_NAK_INV_REQ, 1'b0, HM_CQE_ST_SUCCESS);
            else begin
              cn_q <= 5'd1;
              st_q <= R_ATCHK;
            end
          end
        end

        // fetch the receive WQE at rq_ci into the cache
        R_RQFETCH: if (m_srd_ready) begin
          rb_q <= '0;
          rfetch_err_q <= 1'b0;
          st_q <= R_RQDATA;
        end
        R_RQDATA: if (s_srd_tvalid) begin
          if (32'(rb_q) * KW < WQE_MAX) rqe_q[int'(rb_q) * DATA_WIDTH +: DATA_WIDTH] <= s_srd_tdata;
          rb_q <= rb_q + 1'b1;
          if (s_srd_tuser) rfetch_err_q <= 1'b1;
          if (s_srd_tlast) begin
            rc_v_q   <= 1'b1;
            rc_q     <= q_q;
            rc_idx_q <= d_q.rq_ci;
            st_q     <= after_q;
          end
        end

        // first SEND packet: the receive SGL must be writable and its length is the limit
        R_SGLINIT: begin
          cj_q   <= '0;
          cr_q   <= '0;
          cerr_q <= 1'b0;
          cn_q   <= 5'(rnsge);
          csum_q <= '0;
          st_q   <= R_SGLCHK;
        end
        R_SGLCHK: begin
          begin
            if (m_chk_valid && m_chk_ready) csum_q <= csum_q + 36'(sge_c.len);
            if (cr_q == cn_q) begin
              if (cerr_q || rfetch_err_q || rw.num_sge > 8'd15) begin
                d_q.in_send <= 1'b0;
                fatal(HM_AETH_NAK_REM_OP, 1'b1, HM_CQE_ST_LOC_PROT_ERR);
              end else begin
                d_q.in_send <= 1'b1;
                d_q.moff    <= '0;
                d_q.total   <= csum_q[35:32] != '0 ? 32'hFFFF_FFFF : csum_q[31:0];
                st_q        <= R_SEND;
              end
            end
          end
        end
        R_SEND: begin
          if (d_q.moff + 32'(plen) > d_q.total || d_q.moff + 32'(plen) < d_q.moff) begin
            d_q.in_send <= 1'b0;
            fatal(HM_AETH_NAK_INV_REQ, 1'b1, HM_CQE_ST_LOC_LEN_ERR);
          end else if (oc.inv) begin
            cj_q <= '0; cr_q <= '0; cerr_q <= 1'b0; cn_q <= 5'd1;
            st_q <= R_INV;
          end else begin
            pc_send_q <= 1'b1;
            st_q <= plen != 0 ? R_PLACE : R_WAITWR;
          end
        end
        R_INV: begin
          if (cr_q == cn_q) begin
            if (cerr_q) begin
              d_q.in_send <= 1'b0;
              fatal(HM_AETH_NAK_REM_OP, 1'b1, HM_CQE_ST_LOC_PROT_ERR);
            end else begin
              pc_send_q <= 1'b1;
              st_q <= plen != 0 ? R_PLACE : R_WAITWR;
            end
          end
        end

        R_WRCHK: begin
          if (cr_q == cn_q) begin
            if (cerr_q && ctx_q.uc) uc_drop();
            else if (cerr_q) fatal(HM_AETH_NAK_REM_ACCESS, 1'b0, HM_CQE_ST_SUCCESS);
            else begin
              d_q.in_write <= 1'b1;
              d_q.wva      <= h_q.va;
              d_q.total    <= h_q.dma_len;
              d_q.moff     <= '0;
              st_q         <= R_WRITE;
            end
          end
        end
        R_WRITE: begin
          logic [32:0] noff;
          noff = 33'(d_q.moff) + 33'(plen);
          if (noff > 33'(d_q.total) || (oc.write && oc.last && noff != 33'(d_q.total))) begin
            d_q.in_write <= 1'b0;
            if (ctx_q.uc) uc_drop();
            else fatal(HM_AETH_NAK_INV_REQ, 1'b0, HM_CQE_ST_SUCCESS);
          end else if (oc.write && oc.imm && d_q.rq_ci == pi_q) begin
            if (ctx_q.uc) uc_drop();
            else begin
              if (op == HM_OP_WRITE_ONLY_IMM) d_q.in_write <= 1'b0;
              rnr_nak();
            end
          end else begin
            pc_send_q <= 1'b0;
            st_q <= plen != 0 ? R_PLACE : R_WAITWR;
          end
        end

        R_PLACE: begin
          if (!pc_send_q) begin
            if (m_pc_ready) st_q <= R_WAITWR;
          end else if (cur_valid && cur_last && m_pc_ready) begin
            st_q <= R_WAITWR;
          end
        end

        // SEND / WRITE packet placed: advance, complete the message, ACK
        R_WAITWR: begin
          logic fin, need_wqe;
          fin      = oc.last && (oc.send || oc.write);
          need_wqe = fin && (oc.send || (oc.write && oc.imm));
          if (!ctx_q.uc) d_q.epsn <= d_q.epsn + 24'd1;   // (UC: set in R_SEQ)
          d_q.moff <= d_q.moff + 32'(plen);
          if (fin) begin
            d_q.msn      <= d_q.msn + 24'd1;
            d_q.in_send  <= 1'b0;
            d_q.in_write <= 1'b0;
          end
          if (need_wqe) begin
            cqe_st_q   <= HM_CQE_ST_SUCCESS;
            cqe_len_q  <= oc.send ? d_q.moff + 32'(plen) : d_q.total;
            cqe_wimm_q <= oc.write;
            // the CQE follows the data: wait for the writes, then the receive WQE's wr_id
            after_q <= R_CQE;
            st_q    <= R_RQCHK;
          end else ack_if_asked();
        end
        R_RQCHK: begin
          if (wr_done_q == wr_issued_q) st_q <= rq_cached ? R_CQE : R_RQFETCH;
        end
        R_CQE: begin
          if (rfetch_err_q || m_cqe_ready) begin
            d_q.rq_ci  <= d_q.rq_ci + 1'b1;
            rc_v_q     <= 1'b0;
            ack_if_asked();
          end
        end

        R_RDCHK: begin
          if (cr_q == cn_q) begin
            if (cerr_q) fatal(HM_AETH_NAK_REM_ACCESS, 1'b0, HM_CQE_ST_SUCCESS);
            else st_q <= R_READ;
          end
        end
        R_READ: begin
          d_q.msn    <= d_q.msn + 24'd1;
          d_q.epsn   <= d_q.epsn + res_wd.npkts;
          job(HM_RJ_READ, h_q.psn, HM_AETH_ACK);
          job_va_q   <= h_q.va;
          job_len_q  <= h_q.dma_len;
          after_q    <= R_ACK;
          st_q       <= R_RESSAVE;
        end
        R_ATCHK: begin
          if (cr_q == cn_q) begin
            if (cerr_q) fatal(HM_AETH_NAK_REM_ACCESS, 1'b0, HM_CQE_ST_SUCCESS);
            else st_q <= R_ATWAIT;
          end
        end
        // the operand is read after every earlier write of this responder completed
        R_ATWAIT: if (wr_done_q == wr_issued_q) st_q <= R_ATREAD;
        R_ATREAD: if (m_srd_ready) st_q <= R_ATDATA;
        R_ATDATA: if (s_srd_tvalid) begin
          at_orig_q <= s_srd_tdata[63:0];
          if (s_srd_tlast) st_q <= R_ATWRITE;
        end
        R_ATWRITE: if (m_pc_ready) begin
          d_q.msn    <= d_q.msn + 24'd1;
          d_q.epsn   <= d_q.epsn + 24'd1;
          job(HM_RJ_ATOMIC, h_q.psn, HM_AETH_ACK);
          after_q    <= R_ACK;
          st_q       <= R_RESSAVE;
        end
        R_RESSAVE: begin
          d_q.res_head <= d_q.res_head + 1'b1;
          if (d_q.res_cnt < 3'(max_res)) d_q.res_cnt <= d_q.res_cnt + 1'b1;
          after_q <= R_SAVE;
          st_q    <= R_ACK;
        end

        // responses (MSN as updated by this packet)
        R_ACK: if (m_job_ready) st_q <= after_q;

        // fatal: [receive CQE], NAK, ERR, flush
        R_ERRCQE: begin
          if (!rq_cached) begin
            after_q <= R_ERRCQE;
            st_q    <= R_RQFETCH;
          end else if (rfetch_err_q || m_cqe_ready) begin
            d_q.rq_ci <= d_q.rq_ci + 1'b1;
            rc_v_q    <= 1'b0;
            st_q      <= R_NAK;
          end
        end
        R_NAK: if (m_job_ready || ctx_q.uc) begin
          d_q.err      <= 1'b1;
          d_q.in_send  <= 1'b0;
          d_q.in_write <= 1'b0;
          disc_next_q  <= R_ERRNOTE;
          st_q         <= plen != 0 ? R_DISCARD : R_ERRNOTE;
        end
        R_ERRNOTE: if (m_err_ready) st_q <= R_FLUSH;
        R_FLUSH: begin
          if (d_q.rq_ci == pi_q) st_q <= R_SAVE;
          else if (!rq_cached) begin
            after_q <= R_FLUSH;
            st_q    <= R_RQFETCH;
          end else begin
            cqe_st_q <= HM_CQE_ST_WR_FLUSH_ERR;
            st_q     <= R_ERRCQE;
            after_q  <= R_FLUSH;
          end
        end
        R_DISCARD: if (m_pc_ready) st_q <= disc_next_q;
        R_SAVE: st_q <= R_IDLE;
        // fast WRITE Only: payload to its target, then the ACK if asked for (the response
        // generator sends it once this write has completed)
        R_FAST: begin
          if (!fast_wr) begin
            // a chained request that is not for the fast path: the general path
            st_q <= R_SEQ;
          end else begin
            if (m_pc_valid && m_pc_ready) fpc_q <= 1'b1;
            if (m_job_valid && m_job_ready) fjob_q <= 1'b1;
            if (ffin) begin
              stats.wr_reqs <= stats.wr_reqs + 1'b1;
              d_q.epsn     <= d_q.epsn + 24'd1;
              d_q.msn      <= d_q.msn + 24'd1;
              d_q.nak_sent <= 1'b0;
              d_q.wva      <= h_q.va;
              d_q.total    <= h_q.dma_len;
              d_q.moff     <= 32'(plen);
              fpc_q        <= 1'b0;
              fjob_q       <= 1'b0;
              fco_q        <= (h_q.ackreq && fdefer) ? fco_q + 1'b1 : '0;
              if (fchain) begin
                h_q       <= s_hdr;
                stats.reqs <= stats.reqs + 1'b1;
                m_qpc_valid <= 1'b1;
                m_qpc.mask[hm_pkg::HM_QPC_REQS_RX] <= 1'b1;
              end else st_q <= R_FWAIT;
            end
          end
        end
        // the QP's state stays in registers for its next request while nothing else waits
        R_FWAIT: begin
          if (fchain) begin
            h_q       <= s_hdr;
            stats.reqs <= stats.reqs + 1'b1;
            m_qpc_valid <= 1'b1;
            m_qpc.mask[hm_pkg::HM_QPC_REQS_RX] <= 1'b1;
            st_q      <= R_FAST;
          end else if (s_ctl_valid || s_err_valid || dbf_valid || s_hdr_valid) st_q <= R_SAVE;
        end
        default: st_q <= R_IDLE;
      endcase
      // a flush CQE returns to the flush loop
      if (st_q == R_ERRCQE && rq_cached && (rfetch_err_q || m_cqe_ready) && cqe_st_q == HM_CQE_ST_WR_FLUSH_ERR)
        st_q <= R_FLUSH;
      // after an ACK that follows a discard
      if (st_q == R_ACK && m_job_ready && after_q == R_DISCARD) disc_next_q <= R_SAVE;
    end
  end

  logic unused_ok;
  assign unused_ok = ^{s_ctl_data, s_ctl_cmd, s_err_qpn, h_q, ctx_q, d_q, rw,
                       sge_c, s_srd_tdata, res_rd, dup_hit_q, csum_q};

  if ((1 << QW) != NUM_QPS) begin : g_bad_qps
    $error("hm_rc_resp: NUM_QPS must be a power of two");
  end
  if (MAX_RES != 1 && MAX_RES != 2 && MAX_RES != 4) begin : g_bad_res
    $error("hm_rc_resp: MAX_RES must be 1, 2 or 4");
  end
endmodule
