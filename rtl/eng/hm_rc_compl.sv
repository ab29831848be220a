// RC completer: the requester's receive side. Retires send WQEs on ACKs, places RDMA READ
// response data and atomic results into the WQE's local SGL, writes send CQEs, handles
// error NAKs and local errors (the failing WQE completes with its status, the QP moves to
// ERR and every later WQE is flushed with WR_FLUSH_ERR).
//
// Per QP it keeps {ci: oldest uncompleted WQE, una: its first PSN, shead / spsn: WQEs and
// PSNs the requester has started (from m_sent), rd_done: READ response packets placed for
// the WQE at ci, the pending local error, ERR}. WQEs are read back from the send queue ring
// when they are retired (their wr_id, opcode, length and SGL are not kept on chip), several
// per DMA read, into a batch buffer (hm_sq_batch); the WQE in use is kept in a register,
// which serves consecutive responses of one READ. A SEND / WRITE WQE needs no read-back: the
// requester's start record carries what its completion needs (wr_id, opcode, flags, length),
// and the last RETIRE_DEPTH records of every QP are kept on chip (block RAM, tagged with the
// WQE index), so a response that finds its WQE neither cached nor in the batch buffer retires
// it from there. READ / atomic WQEs (whose SGL receives data), WQEs the table no longer holds
// (more than RETIRE_DEPTH outstanding) and the flush of WQEs never started are read back; the
// start record of a READ / atomic lets its QP take over an unused batch window, so that the
// prefetch reads the WQE while its response is on the way.
//
// Rules (ROCEV2.md section 8, as in hematite-model's transport::qp): an ACK with PSN p is
// valid for p in [una-1, spsn-1] and retires every SEND/WRITE WQE whose last PSN is <= p; a
// READ response or atomic ACK must be for the oldest outstanding WQE and in order (READ
// response packet una + rd_done, right opcode position and length); error NAKs (invalid
// request, remote access, remote operational) are valid for p in [una, spsn-1] and complete
// the oldest WQE with REM_INV_REQ_ERR / REM_ACCESS_ERR / REM_OP_ERR. Anything else is
// dropped and counted. Data written for a READ or an atomic is complete in host memory
// before its CQE is requested.
//
// Work is taken in turns, one QP at a time: a response packet, a start record, an ERR event,
// a timeout, a control command, or a doorbell of a QP in ERR (its flush); each loads the QP's
// state (C_LOAD), works on it and saves it (C_SAVE); the next turn is taken in the cycle a
// packet's turn saves. Other doorbells take no turn: they only write the QP's producer index
// (the doorbell stage below).
//
// Go-back-N (ROCEV2.md section 9): a NAK sequence error, an implied NAK (an ACK beyond a READ
// or atomic that got no response), a gap in READ responses, or the local ACK timeout (4.096 us
// x 2^timeout, scanned per QP) rewinds the requester to the first unacknowledged PSN; each
// consumes one of retry_cnt retries (7 is finite) and exhaustion completes the oldest WQE
// with RETRY_EXC_ERR. An RNR NAK holds the requester for the RNR timer it carries and then
// rewinds; rnr_retry 7 retries forever, otherwise exhaustion gives RNR_RETRY_EXC_ERR. Any
// progress restores both counters. One retry per missing PSN until progress (a NAK guard).
//
// UC QPs (the context's `uc` bit) get no responses from the wire: their WQEs retire on the
// local ACKs of hm_uc_lack (s_hdr_local), handled as received ACKs; a UC QP takes nothing
// else, an RC QP never a local ACK, and a UC QP has no timers. A local NAK (a packet whose
// payload could not be read) is handled as an error NAK whose WQE completes LOC_PROT_ERR.
//
// Adaptive retransmission (hm_pkg HM_RTO_*): the round trip from a WQE's start record to the
// response that acknowledges its first PSN is timed, one at a time and never across a rewind
// (Karn); six steps, from the cycle the response is seen to acknowledge it, update SRTT /
// RTTVAR (RFC 6298 gains) and the early intervals, beside the retire steps.
// An early deadline runs beside the standard one; the timer table holds the earlier of the
// two. When only the early one has passed, the QP resends from the oldest unacknowledged PSN
// with the window at HM_WIN_MIN, without using a retry, and the next early interval doubles.
module hm_rc_compl
  import hm_pkg::*;
  import hm_desc_pkg::*;
  import hm_regs_pkg::*;
  import hm_eng_pkg::*;
#(
  // Datapath width in bits (256 or 512).
  parameter int DATA_WIDTH = 512,
  // QP table entries (power of two).
  parameter int NUM_QPS = 4096,
  // Clock cycles per microsecond (timers).
  parameter int CYCLES_PER_US = 250,
  // WQE bytes per demand read of the batch buffer (power of two, 256..4096; the engine's read
  // buffer must hold BATCH_BYTES).
  parameter int BATCH_BYTES = 4096,
  // Start records kept on chip per QP (power of two, 2 or more): how many outstanding SEND /
  // WRITE WQEs of a QP retire without a read-back.
  parameter int RETIRE_DEPTH = 8,
  // Derived.
  localparam int QW = $clog2(NUM_QPS),
  localparam int RL = $clog2(RETIRE_DEPTH),
  localparam int SW = int'(HM_CTL_STAGE_WORDS)
) (
  input  logic                  clk,
  input  logic                  rst,

  // QP context writes
  input  hm_ctl_cmd_t           s_ctl_cmd,
  input  logic [SW*32-1:0]      s_ctl_data,
  input  logic                  s_ctl_valid,
  output logic                  s_ctl_ready,

  // Started / refused WQEs from the requester
  input  hm_sent_t              s_sent,
  input  logic                  s_sent_valid,
  output logic                  s_sent_ready,

  // Send queue doorbells (producer index, for flushing)
  input  hm_db_qp_t             s_db,
  input  logic                  s_db_valid,
  output logic                  s_db_ready,

  // QPs another block moved to ERR
  input  logic [15:0]           s_err_qpn,
  input  logic                  s_err_valid,
  output logic                  s_err_ready,

  // Response header records (ACK, READ response, atomic ACK); s_hdr_local: a local ACK or NAK
  // of a UC QP (hm_uc_lack), which takes no other
  input  hm_roce_hdr_t          s_hdr,
  input  logic                  s_hdr_local,
  input  logic                  s_hdr_valid,
  output logic                  s_hdr_ready,

  // WQE reads
  output hm_dma_req_t           m_wrd,
  output logic                  m_wrd_valid,
  input  logic                  m_wrd_ready,
  input  logic [DATA_WIDTH-1:0] s_wqe_tdata,
  input  logic                  s_wqe_tvalid,
  output logic                  s_wqe_tready,
  input  logic                  s_wqe_tlast,
  input  logic                  s_wqe_tuser,

  // MR checks of the local SGL of READ / atomic WQEs
  output hm_mr_chk_t            m_chk,
  output logic                  m_chk_valid,
  input  logic                  m_chk_ready,
  input  hm_mr_res_t            s_res,
  input  logic                  s_res_valid,
  output logic                  s_res_ready,

  // Payload pieces to the scatter unit (and its DMA write completions)
  output hm_scat_pc_t           m_pc,
  output logic                  m_pc_valid,
  input  logic                  m_pc_ready,
  input  logic                  s_done_valid,
  input  logic                  s_done_err,

  // Send CQEs
  output hm_cqe_req_t           m_cqe,
  output logic                  m_cqe_valid,
  input  logic                  m_cqe_ready,

  // Commands to the requester (rewind, hold, READ/atomic done)
  output hm_rq_cmd_t            m_rqc,
  output logic                  m_rqc_valid,
  input  logic                  m_rqc_ready,

  // QPs this block moved to ERR
  output logic [15:0]           m_err_qpn,
  output logic                  m_err_valid,
  input  logic                  m_err_ready,

  // Counters
  output hm_compl_stats_t       stats,
  // Per-QP counter events: NAKs as they arrive (m_qpc_rx, the packet's QP), retries and
  // timeouts (m_qpc, the QP being worked on); both may fire in one cycle
  output hm_qpc_ev_t            m_qpc_rx,
  output logic                  m_qpc_rx_valid,
  output hm_qpc_ev_t            m_qpc,
  output logic                  m_qpc_valid
);
  localparam int CTXW    = $bits(hm_qp_ctx_t);
  localparam int KW      = DATA_WIDTH / 8;
  localparam int WQE_MAX = 256;

  typedef struct packed {
    logic [15:0] ci;          // oldest uncompleted WQE
    logic [23:0] una;         // its first PSN
    logic [15:0] shead;       // WQEs started
    logic [23:0] spsn;        // PSNs used
    logic [23:0] rd_done;     // packets of WQE ci acknowledged / READ responses placed
    logic        lerr_v;
    logic [7:0]  lerr_st;
    logic [15:0] lerr_idx;
    logic        err;
    logic [2:0]  retry_left;
    logic [2:0]  rnr_left;
    logic        guard_v;     // one retry per missing PSN until progress
    logic [23:0] guard;
    logic        rnr_wait;    // requester held for an RNR timer
    logic [23:0] rnr_psn;     // where to resume after it
    logic        tmr_on;      // timer armed (ACK timeout, or the RNR timer when rnr_wait)
    logic [47:0] deadline;
    logic        rw_v;        // a REWIND went to the requester since the QP last drained
    logic [23:0] lim;         // the window's limit the requester was last given (HM_WIN_*)
    logic [11:0] cwnd;        // the window's width to be: limit minus oldest unacknowledged PSN
    logic        rt_on;       // a round trip being timed: to the ACK of rt_psn
    logic [23:0] rt_psn;      // the first PSN of a WQE started
    logic [31:0] rt_t0;       // when its start was recorded (now_q[31:0])
    logic [23:0] srtt;        // smoothed RTT, cycles (0: no sample yet)
    logic [23:0] rttvar;      // its variation
    logic [23:0] rto;         // early interval: SRTT + 4 RTTVAR, at least HM_RTO_MIN_US
    logic [23:0] pto;         // tail-loss probe interval: 2 SRTT, at least HM_PTO_MIN_US, at most rto
    logic [2:0]  e_n;         // early retransmissions since the last progress
    logic        e_on;        // early deadline armed
    logic [47:0] e_dl;        // the early deadline
  } cdyn_t;

  hm_qp_ctx_t  ctx_mem [NUM_QPS];
  cdyn_t       dyn_mem [NUM_QPS];
  logic [15:0] pi_mem  [NUM_QPS];

  // ACK timeout and RNR timers: every QP's deadline mirrored in the timer table (written when
  // the QP is saved or loaded), scanned one QP per cycle; expired QPs queue for the FSM, which
  // re-checks its own copy
  logic [47:0]   now_q;
  logic          tmr_wr, tmr_armed, tmo_valid, tmo_pop;
  logic [QW-1:0] tmr_qpn, tmo_q;
  logic [47:0]   tmr_deadline;
  hm_qp_timers #(.NUM_QPS(NUM_QPS), .FIFO_DEPTH(8), .TIME_W(48)) u_tmr (
    .clk, .rst, .o_now(now_q),
    .i_wr(tmr_wr), .i_wr_qpn(tmr_qpn), .i_wr_armed(tmr_armed), .i_wr_deadline(tmr_deadline),
    .m_qpn(tmo_q), .m_valid(tmo_valid), .m_ready(tmo_pop));

  // doorbells wait in a FIFO (the requester never waits for the completer), ahead of a
  // control command that comes after them (hm_db_order)
  hm_db_qp_t dbf;
  logic      dbf_valid, dbf_pop, ctl_arm_q, ctl_drain;

  // Doorbell fast path. A doorbell only moves its QP's producer index (pi_mem), which the
  // flush and the WQE window use; it needs an FSM turn only when its QP is in ERR (its WQEs
  // are flushed). Each doorbell leaves the FIFO into a one-entry stage (db_v_q) while err_mem,
  // a copy of every QP's ERR bit (written where dyn_mem is), is read for it; in the next
  // cycle its producer index is written (db_pw) and, unless its QP is in ERR, the stage is
  // free again: one doorbell per cycle. A doorbell of a QP in ERR stays in the stage
  // (db_hold) until the FSM takes it (K_DB), ahead of the packets and records that come
  // after it, as before. While a control command waits, only the doorbells queued before it
  // leave the FIFO (hm_db_order), and the command is taken once the stage is empty.
  // The FSM's copy of the producer index (pi_q) follows a write for the QP it has loaded,
  // and a write in the cycle it read pi_mem (db_hit_q); no turn writes pi_mem (only a
  // control command's LOAD_SQ resets it).
  hm_db_qp_t     db_q;
  logic          db_v_q, db_new_q, db_hold, db_pw, db_pop, db_err, db_taken;
  logic          err_w, err_wd, err_byp_q, err_bypd_q, err_rd_q, db_hit_q;
  logic [QW-1:0] err_wa;
  logic [15:0]   db_hit_pi_q;
  logic          err_mem [NUM_QPS];

  // ---------------------------------------------------------------------------------------
  // FSM
  // ---------------------------------------------------------------------------------------
  typedef enum logic [4:0] {
    C_IDLE, C_CTL, C_LOAD, C_DISPATCH, C_RL, C_WREQ, C_WDATA, C_BLOAD, C_WCHK, C_WGOT, C_AFTER,
    C_PLACE, C_ATOMIC, C_DISCARD, C_WAITWR, C_RETIRE, C_ERRNOTE, C_FLUSH, C_LERR, C_SAVE,
    C_RETRY, C_RWND, C_RQC, C_FATAL, C_RFAST, C_RI
  } st_t;
  typedef enum logic [2:0] { K_SENT, K_DB, K_EVT, K_PKT, K_TMO } kind_t;
  st_t   st_q, ret_q, disc_next_q;
  kind_t kind_q;

  logic [QW-1:0] q_q;
  logic          flushing_q;      // retiring the rest of the queue with WR_FLUSH_ERR
  hm_qp_ctx_t    ctx_q, ctx_rd;
  cdyn_t         d_q, dyn_rd;
  logic [15:0]   pi_q, pi_rd;
  hm_sent_t      sent_q;
  hm_roce_hdr_t  h_q;
  logic          h_local_q;     // h_q is a local ACK (hm_uc_lack)

  // Started WQEs wait in a one-entry stage; a successful start of the same QP as the one
  // waiting replaces it (only the latest WQE index and PSN matter), so the requester can
  // start one WQE per cycle.
  hm_sent_t mg_q;
  logic     mg_v_q, mg_can;
  assign mg_can = mg_v_q && s_sent.qpn == mg_q.qpn && s_sent.status == HM_CQE_ST_SUCCESS &&
                  mg_q.status == HM_CQE_ST_SUCCESS;

  // Response headers wait in a one-entry stage too; a plain ACK (no payload) replaces a
  // waiting plain ACK of the same QP with an earlier or equal PSN: ACKs are cumulative, so
  // only the newest matters while the FSM is busy.
  hm_roce_hdr_t hk_q;
  logic         hk_v_q, hk_can, hk_local_q;
  assign hk_can = hk_v_q && s_hdr_local == hk_local_q && s_hdr.opcode == HM_OP_ACK && s_hdr.syndrome[7:5] == HM_AETH_CLS_ACK && s_hdr.payload_len == '0 &&
                  hk_q.opcode == HM_OP_ACK && hk_q.syndrome[7:5] == HM_AETH_CLS_ACK && hk_q.payload_len == '0 &&
                  s_hdr.dest_qp == hk_q.dest_qp && hm_psn_ge(s_hdr.psn, hk_q.psn);

  // work selection in C_IDLE: response packets and started-WQE records take turns (a
  // packet's turn also absorbs a waiting record of its own QP, see C_DISPATCH)
  logic          take_ctl, take_evt, take_sent, take_db, take_pkt, take_tmo, pkt_first, rr_pkt_q;
  logic          absorb, absorbed_q;
  // a packet's turn ends in C_SAVE this cycle (to C_IDLE): the next one may be taken in that
  // cycle. (Not after a start record's turn: with that too, one QP's 256 64-byte WRITEs left
  // at 3.15 cycles apiece, not at the wire floor's 3.00, with the completer never holding the
  // requester's records back; record turns then came as fast as the records, every 3 cycles.
  // The cause is not isolated further.)
  logic          turn_end;
  logic [QW-1:0] sel_q;
  // A control command first waits for the doorbells queued before it: a doorbell rung before
  // the control plane reloaded a QP belongs to the old ring and must act on the old state (a
  // QP in ERR flushes its WQEs), never on the reloaded one (it would believe the old producer
  // index). u_dbf holds the command back (o_drain) until they are taken; they go first,
  // ahead of packets and records; later ones wait as usual.
  always_comb begin
    logic base;
    base      = (st_q == C_IDLE || turn_end) && !s_ctl_valid && !s_err_valid;
    pkt_first = hk_v_q && (!mg_v_q || !rr_pkt_q);
    take_ctl  = st_q == C_IDLE && s_ctl_valid && ctl_arm_q && !ctl_drain && !db_v_q;
    take_evt  = st_q == C_IDLE && !s_ctl_valid && s_err_valid;
    take_sent = base && mg_v_q && !pkt_first;
    take_db   = (base && !pkt_first && !mg_v_q && !s_sent_valid && db_hold) ||
                (st_q == C_IDLE && s_ctl_valid && db_hold);
    take_pkt  = base && hk_v_q && (pkt_first || (!mg_v_q && !s_sent_valid && !db_hold));
    take_tmo  = base && !mg_v_q && !s_sent_valid && !db_hold && !hk_v_q && tmo_valid;
    sel_q = hk_v_q ? QW'(hk_q.dest_qp) : tmo_q;
    if (s_ctl_valid && db_hold) sel_q = QW'(db_q.qpn);
    else if (s_ctl_valid) sel_q = QW'(s_ctl_cmd.index);
    else if (s_err_valid) sel_q = QW'(s_err_qpn);
    else if (pkt_first) sel_q = QW'(hk_q.dest_qp);
    else if (mg_v_q) sel_q = QW'(mg_q.qpn);
    else if (db_hold) sel_q = QW'(db_q.qpn);
  end
  assign s_ctl_ready  = st_q == C_CTL;
  assign s_err_ready  = take_evt;
  hm_merge_reg #(.WIDTH($bits(hm_sent_t))) u_sent_mg (
    .clk, .rst, .s_data(s_sent), .s_valid(s_sent_valid), .s_merge(mg_can), .s_ready(s_sent_ready),
    .m_data(mg_q), .m_valid(mg_v_q), .m_ready(take_sent || absorb));
  assign dbf_pop      = db_pop;
  hm_db_order #(.DEPTH(16)) u_dbf (
    .clk, .rst, .s_db, .s_db_valid, .s_db_ready, .m_db(dbf), .m_db_valid(dbf_valid), .m_db_ready(dbf_pop),
    .i_idle(st_q == C_IDLE), .i_ctl_valid(s_ctl_valid), .i_ctl_take(take_ctl), .o_armed(ctl_arm_q), .o_drain(ctl_drain));
  hm_merge_reg #(.WIDTH(1 + $bits(hm_roce_hdr_t))) u_hdr_mg (
    .clk, .rst, .s_data({s_hdr_local, s_hdr}), .s_valid(s_hdr_valid), .s_merge(hk_can), .s_ready(s_hdr_ready),
    .m_data({hk_local_q, hk_q}), .m_valid(hk_v_q), .m_ready(take_pkt));
  assign tmo_pop      = take_tmo;
  // a packet's turn first takes the waiting started-WQE record of its QP (once), so an
  // ACK is never judged against a QP state that is missing a record already made
  assign absorb = st_q == C_DISPATCH && kind_q == K_PKT && !absorbed_q && mg_v_q &&
                  mg_q.qpn == 16'(q_q) && mg_q.status == HM_CQE_ST_SUCCESS;

  // (the table reads: below, after save_d)

  // the doorbell stage (see u_dbf above): a doorbell leaves the FIFO when the stage is free
  // or frees this cycle, and not while a control command waits for the FIFO's older entries
  // to go (nor in the cycle the completer arms for it, nor while it is taken)
  // (ERR: saved, being saved, or set by the turn that holds the QP and not yet saved: a turn
  // ending its flush would not see this doorbell's producer index in time; not in C_LOAD,
  // where d_q still holds the QP before and err_mem answers)
  assign db_err   = (err_byp_q ? err_bypd_q : err_rd_q) || (err_w && err_wa == QW'(db_q.qpn) && err_wd) ||
                    (st_q != C_IDLE && st_q != C_CTL && st_q != C_LOAD && q_q == QW'(db_q.qpn) && d_q.err);
  assign db_pw    = db_v_q && db_new_q;
  assign db_hold  = db_v_q && !db_new_q;
  assign db_taken = take_db;
  assign db_pop   = dbf_valid && (!s_ctl_valid || ctl_drain) && st_q != C_CTL &&
                    (!db_v_q || (db_new_q && !db_err));
  always_ff @(posedge clk) begin
    if (err_w) err_mem[err_wa] <= err_wd;
    err_rd_q   <= err_mem[QW'(dbf.qpn)];   // (registered read, the FIFO head's QP)
    err_byp_q  <= err_w && err_wa == QW'(dbf.qpn);
    err_bypd_q <= err_wd;
    // C_LOAD takes pi_rd, read in the cycle before: a write in that cycle is forwarded
    db_hit_q    <= db_pw && QW'(db_q.qpn) == sel_q;
    db_hit_pi_q <= db_q.pi;
    if (rst) begin
      db_v_q   <= 1'b0;
      db_new_q <= 1'b0;
    end else begin
      if (db_pw && !db_err) db_v_q <= 1'b0;
      if (db_pw) db_new_q <= 1'b0;
      if (db_taken) db_v_q <= 1'b0;
      if (db_pop) begin
        db_q     <= dbf;
        db_v_q   <= 1'b1;
        db_new_q <= 1'b1;
      end
    end
  end

  // Retire information: each successful start record as it arrives (before the merge stage,
  // which keeps only the latest), at {QP, WQE index mod RETIRE_DEPTH}, tagged with the index.
  // A WQE is retired only after its record was taken in (shead beyond it), and records come
  // in posting order, so an entry whose tag is the WQE's index holds that WQE's record: a
  // later WQE in the slot changes the tag, and a QP reloaded by the control plane starts its
  // WQEs again at 0 and writes each slot before it can retire from it. Read address: the QP
  // and its ci (set in C_RL), data in C_RI.
  typedef struct packed {
    logic [15:0] idx;         // the WQE index this record is for
    logic [63:0] wr_id;
    logic [7:0]  opcode;
    logic [7:0]  flags;
    logic [31:0] len;
  } rinfo_t;
  rinfo_t        ri_mem [NUM_QPS * RETIRE_DEPTH];
  rinfo_t        ri_rd;
  logic [RL-1:0] ri_slot;
  always_ff @(posedge clk) begin
    if (s_sent_valid && s_sent_ready && s_sent.status == HM_CQE_ST_SUCCESS)
      ri_mem[{QW'(s_sent.qpn), s_sent.wqe_idx[RL-1:0]}] <= '{idx: s_sent.wqe_idx, wr_id: s_sent.wr_id,
                                                           opcode: s_sent.opcode, flags: s_sent.flags,
                                                           len: s_sent.len};
    ri_rd <= ri_mem[{q_q, ri_slot}];
  end

  assign ri_slot = d_q.ci[RL-1:0];

  // derived from the loaded QP
  logic [3:0]  lpmtu, lstride;
  logic [12:0] pmtu;
  assign lpmtu     = 4'd7 + 4'(ctx_q.pmtu);
  assign pmtu      = 13'd1 << lpmtu;
  assign lstride   = 4'd6 + 4'(ctx_q.sq_log_stride);

  // the WQE at ci (one-entry cache)
  logic [WQE_MAX*8-1:0] wqe_q;
  logic                 wc_v_q;
  logic [QW-1:0]        wc_q;
  logic [15:0]          wc_idx_q;
  logic                 wfetch_err_q, wchk_err_q;
  hm_sq_wqe_hdr_t       w;
  assign w = hm_sq_wqe_hdr_t'(wqe_q[255:0]);
  logic w_rdat, w_read, w_atomic;
  assign w_read   = w.opcode == HM_WQE_OP_READ;
  assign w_atomic = hm_wqe_atomic(w.opcode);
  assign w_rdat   = hm_wqe_rdat(w.opcode);
  logic [23:0] w_npsn, w_last;
  assign w_npsn = hm_wqe_npsn(w.opcode, w.length, lpmtu);
  assign w_last = d_q.una + w_npsn - 24'd1;


  // checks of the local SGL (READ / atomic)
  logic [4:0]  cj_q, cr_q;
  logic [3:0]  nsge;
  hm_sge_t     sge_c;
  assign nsge  = w_atomic ? 4'd1 : (w.num_sge > 8'd14 ? 4'd14 : 4'(w.num_sge));
  assign sge_c = hm_sq_sge(wqe_q, 5'(cj_q[3:0]) + 5'(w_atomic));
  assign m_chk = '{key: sge_c.lkey, pd: ctx_q.pd, addr: sge_c.addr, len: 64'(sge_c.len), need: HM_MRN_LOCAL_WRITE};
  assign m_chk_valid = st_q == C_WCHK && w_rdat && !flushing_q && cj_q < 5'(nsge);
  assign s_res_ready = st_q == C_WCHK;

  // WQE fetch: the batch buffer (hm_sq_batch) holds a window of one QP's posted WQEs, filled
  // on demand from fx_q (C_WREQ, C_WDATA) and prefetched while the FSM works
  logic [15:0]           fx_q, bat_ra_idx;
  logic [4:0]            bi_q, bg_q, bat_ra_beat;   // beats of the WQE read from the buffer: issued, got
  logic                  in_batch, ci_in_batch, cb_err, dem_taken, dem_done;
  logic [DATA_WIDTH-1:0] cb_rd;
  logic [3:0]            lbpw;
  assign lbpw = lstride > 4'($clog2(KW)) ? lstride - 4'($clog2(KW)) : 4'd0;
  always_comb begin
    // C_RL reads the header beat of WQE ci for C_RFAST, which reads the one after its own
    bat_ra_idx  = fx_q;
    bat_ra_beat = bi_q;
    if (st_q == C_RL) begin bat_ra_idx = d_q.ci; bat_ra_beat = '0; end
    else if (st_q == C_RFAST) begin bat_ra_idx = fx_q + 16'd1; bat_ra_beat = '0; end
  end

  // the WQE being loaded from the batch is a READ / atomic (its header is its first beat)
  logic [7:0] bld_op;
  logic       bld_rdat;
  assign bld_op   = bg_q == '0 ? cb_rd[7:0] : w.opcode;     // the opcode is byte 0 of a WQE
  assign bld_rdat = hm_wqe_rdat(bld_op);

  // response classification
  logic [2:0]  syn_cls;
  logic        is_ack, is_rresp, is_aack, rr_last, rr_aeth;
  logic [23:0] p;
  assign p        = h_q.psn;
  assign syn_cls  = h_q.syndrome[7:5];
  assign is_ack   = h_q.opcode == HM_OP_ACK;
  assign is_rresp = h_q.opcode >= HM_OP_READ_RESP_FIRST && h_q.opcode <= HM_OP_READ_RESP_ONLY;
  assign is_aack  = h_q.opcode == HM_OP_ATOMIC_ACK;
  assign rr_last  = h_q.opcode == HM_OP_READ_RESP_LAST || h_q.opcode == HM_OP_READ_RESP_ONLY;
  assign rr_aeth  = h_q.opcode != HM_OP_READ_RESP_MIDDLE;

  // fast retire (C_RFAST): the header of WQE fx_q == ci straight from the batch buffer; an
  // unsignaled SEND / WRITE the packet covers is retired in one cycle
  hm_sq_wqe_hdr_t fh;
  logic           f_rdat, f_due, f_ok;
  logic [23:0]    f_npsn, f_last;
  assign fh     = hm_sq_wqe_hdr_t'(cb_rd[255:0]);
  assign f_rdat = hm_wqe_rdat(fh.opcode);
  assign f_npsn = hm_wqe_npsn(fh.opcode, fh.length, lpmtu);
  assign f_last = d_q.una + f_npsn - 24'd1;
  assign f_due  = (is_ack && syn_cls == HM_AETH_CLS_ACK) ? hm_psn_ge(p, f_last) : hm_psn_ge(p - 24'd1, f_last);
  assign f_ok   = d_q.ci != d_q.shead && ci_in_batch && !cb_err && !f_rdat && !fh.flags[0] && f_due;

  // retire from a start record (C_RI): whether the packet covers the WQE the record is for
  logic [23:0] ri_last;
  logic        ri_due;
  assign ri_last = d_q.una + hm_wqe_npsn(ri_rd.opcode, ri_rd.len, lpmtu) - 24'd1;
  assign ri_due  = (is_ack && syn_cls == HM_AETH_CLS_ACK) ? hm_psn_ge(p, ri_last) : hm_psn_ge(p - 24'd1, ri_last);

  // READ response placement: the SGL cursor (loaded by C_DISPATCH, stepped in C_PLACE)
  logic        cur_load, cur_valid, cur_last;
  logic [3:0]  cur_sge;
  logic [31:0] cur_seek;
  logic [12:0] cur_take;
  logic [63:0] cur_addr;
  hm_sgl_cursor u_cur (
    .clk, .rst, .i_load(cur_load), .i_seek(cur_seek), .i_len(13'(h_q.payload_len)),
    .o_sge(cur_sge), .i_sge(hm_sq_sge(wqe_q, 5'(cur_sge))),
    .i_step(st_q == C_PLACE), .i_ready(m_pc_ready), .o_addr(cur_addr), .o_take(cur_take),
    .o_valid(cur_valid), .o_last(cur_last));
  // loaded in every cycle before C_PLACE, so it holds the packet's offset and length there
  assign cur_load = st_q != C_PLACE;
  assign cur_seek = 32'(d_q.rd_done) << lpmtu;

  // retire bookkeeping
  logic [7:0]  rt_status_q;
  logic [31:0] wr_issued_q, wr_done_q;

  // pieces
  hm_sge_t sge_atom;
  assign sge_atom = hm_sq_sge(wqe_q, 5'd1);
  always_comb begin
    m_pc.discard = 1'b0;
    m_pc.imm     = 1'b0;
    m_pc.data    = h_q.atomic_orig;
    m_pc.last    = 1'b1;
    m_pc.len     = 13'd8;
    m_pc.addr    = sge_atom.addr;
    m_pc_valid   = 1'b0;
    case (st_q)
      C_DISCARD: begin m_pc.discard = 1'b1; m_pc_valid = 1'b1; end
      C_ATOMIC:  begin m_pc.imm = 1'b1; m_pc_valid = 1'b1; end
      C_PLACE: begin
        m_pc.len   = cur_take;
        m_pc.addr  = cur_addr;
        m_pc.last  = cur_last;
        m_pc_valid = cur_valid;
      end
      default: ;
    endcase
  end

  // CQE
  logic [7:0] cqe_op;
  always_comb begin
    case (w.opcode)
      HM_WQE_OP_WRITE, HM_WQE_OP_WRITE_IMM: cqe_op = HM_CQE_OP_RDMA_WRITE;
      HM_WQE_OP_READ:                       cqe_op = HM_CQE_OP_RDMA_READ;
      HM_WQE_OP_CMP_SWAP:                   cqe_op = HM_CQE_OP_CMP_SWAP;
      HM_WQE_OP_FETCH_ADD:                  cqe_op = HM_CQE_OP_FETCH_ADD;
      default:                              cqe_op = HM_CQE_OP_SEND;
    endcase
    m_cqe = '0;
    m_cqe.cqn           = ctx_q.sq_cqn;
    m_cqe.cqe.wr_id     = w.wr_id;
    m_cqe.cqe.byte_len  = rt_status_q == HM_CQE_ST_SUCCESS ? w.length : 32'd0;
    m_cqe.cqe.qpn       = 32'(q_q);
    m_cqe.cqe.opcode    = cqe_op;
    m_cqe.cqe.status    = rt_status_q;
    m_cqe.cqe.wqe_index = d_q.ci;
  end
  // a WQE is retired with a CQE when signaled or in error
  logic need_cqe;
  assign need_cqe   = w.flags[0] || rt_status_q != HM_CQE_ST_SUCCESS;
  assign m_cqe_valid = st_q == C_RETIRE && need_cqe && !wfetch_err_q;
  // retired WQE index: d_q.ci
  assign m_err_qpn   = 16'(q_q);
  assign m_err_valid = st_q == C_ERRNOTE;

  hm_qp_ctx_t ctl_ctx;
  assign ctl_ctx = hm_qp_ctx_t'(s_ctl_data[CTXW-1:0]);

  // effective first unacknowledged PSN (model: una())
  logic [23:0] una_eff;
  assign una_eff = d_q.una + d_q.rd_done;

  // requester commands
  hm_rq_cmd_t rqc_q;
  st_t        rqc_next_q;
  assign m_rqc       = rqc_q;
  assign m_rqc_valid = st_q == C_RQC;

  // retry / rewind bookkeeping
  logic [23:0] rt_psn_q;          // PSN to go back to
  logic        rt_guard_q;        // set the NAK guard to rt_psn_q
  logic        rwd_q;             // this packet / event sent a REWIND
  logic        clamped_q;         // this packet sent its CLAMP
  logic [15:0] rw_idx_q;          // rewind walk: WQE and its first PSN
  logic [23:0] rw_f_q;
  logic        prog_q;            // progress made by this packet
  logic        tmr_restart_q;     // (re)arm the ACK timer at C_SAVE
  logic        e_arm_q;           // (re)arm the early timer at C_SAVE
  logic        early_q;           // the retry under way is an early retransmission
  // WQEs retired after a REWIND that the requester may not have applied yet (its transmit
  // side held, commands wait for a packet boundary): a CLAMP to the new oldest WQE goes
  // first, then the QP is saved (once). Every such progress sends one until nothing is
  // outstanding: the requester applies them in order, so the last one wins.
  logic        clamp_due, save_now;
  assign clamp_due = kind_q == K_PKT && prog_q && d_q.rw_v && !rwd_q && !clamped_q && !d_q.err;
  // The window (HM_WIN_* in hm_pkg): after a response packet that sent no REWIND, every PSN
  // it acknowledged widens the window by one up to HM_WIN_MAX, and the requester's limit
  // moves (a WIN command) when it would move by HM_WIN_STEP or more. Three steps at C_SAVE,
  // one adder each: the PSNs acknowledged, the new width and limit, the compare.
  logic [23:0] una0_q;            // una_eff when the QP was loaded
  logic [1:0]  wph_q;             // window step: 0 acked, 1 width, 2 compare, 3 done
  logic [23:0] wk_q, want_q;      // PSNs acknowledged by this packet; the limit it gives
  logic [24:0] cw_sum;
  logic [11:0] cw_next;
  logic        win_step;
  assign cw_sum   = 25'(d_q.cwnd) + 25'(wk_q);
  assign cw_next  = cw_sum >= 25'(HM_WIN_MAX) ? HM_WIN_MAX : 12'(cw_sum);
  assign win_step = kind_q == K_PKT && !rwd_q && !d_q.err && wph_q != 2'd3;
  // The round trip (HM_RTO_*): a response that acknowledged the PSN timed, with no REWIND
  // since it was started, gives a sample; six steps, one adder or compare each (started as
  // soon as una_eff passes the PSN timed, so beside the retire steps; C_SAVE waits for them):
  // the sample R (saturated), |SRTT - R| and the decays, SRTT and RTTVAR, SRTT + 4 RTTVAR
  // and 2 SRTT, the floors, the probe's ceiling.
  localparam int RTO_MIN_C = HM_RTO_MIN_US * CYCLES_PER_US;
  localparam int PTO_MIN_C = HM_PTO_MIN_US * CYCLES_PER_US;
  logic [2:0]  rph_q;             // 0..5: the steps; 7: done
  logic [23:0] rs_q, rd_q, sa_q, va_q;
  logic [25:0] rr_q;
  logic [24:0] rp_q, rt_sub;
  logic [31:0] rt_el;
  logic        rt_neg, rtt_step;
  assign rt_el    = now_q[31:0] - d_q.rt_t0;
  assign rt_sub   = 25'(d_q.srtt) - 25'(rs_q);
  assign rt_neg   = rt_sub[24];
  // (started in any state of a packet's turn after C_DISPATCH, as soon as una_eff passes
  // rt_psn, and run to the end; C_SAVE waits for them)
  assign rtt_step = kind_q == K_PKT && rph_q != 3'd7 &&
                    st_q != C_IDLE && st_q != C_LOAD && st_q != C_DISPATCH && st_q != C_CTL &&
                    (rph_q != 3'd0 || (!rwd_q && !d_q.err && d_q.rt_on && !hm_psn_ge(d_q.rt_psn, una_eff)));
  // which deadline a K_TMO turn found passed (the table holds the earlier one)
  logic std_due, early_due;
  assign std_due   = $signed(now_q - d_q.deadline) >= 0;
  assign early_due = d_q.e_on && !d_q.rnr_wait && $signed(now_q - d_q.e_dl) >= 0;
  assign save_now  = st_q == C_SAVE && !clamp_due && !win_step && !rtt_step;
  assign turn_end  = save_now && kind_q == K_PKT && !(d_q.lerr_v && d_q.ci == d_q.lerr_idx && !d_q.err);
  // the end of what the QP has posted: the later of the doorbell's producer index and the
  // WQEs started (a doorbell may still wait in u_dbf); the WQE window and the flush use it
  logic [15:0] posted_end;
  assign posted_end = 16'(pi_q - d_q.shead) < 16'h8000 ? pi_q : d_q.shead;
  // the batch buffer (signals declared with the WQE fetch, above)
  hm_sq_batch #(.DATA_WIDTH(DATA_WIDTH), .NUM_QPS(NUM_QPS), .BATCH_BYTES(BATCH_BYTES)) u_batch (
    .clk, .rst, .i_q(q_q), .i_sq_base(ctx_q.sq_base), .i_sq_log_size(ctx_q.sq_log_size), .i_lstride(lstride),
    .i_shead(d_q.shead), .i_pi(pi_q), .i_posted_end(posted_end), .i_ci(d_q.ci), .i_fx(fx_q), .o_has_fx(in_batch), .o_has_ci(ci_in_batch),
    .o_err(cb_err), .i_dem_valid(st_q == C_WREQ && !in_batch), .o_dem_taken(dem_taken),
    .i_dem_data(st_q == C_WDATA), .o_dem_done(dem_done), .i_inval(st_q == C_CTL),
    .i_pf_allow(st_q != C_WREQ && st_q != C_WDATA && st_q != C_CTL),
    .i_db(db_pw), .i_db_q(QW'(db_q.qpn)), .i_db_pi(db_q.pi),
    .i_save(save_now), .i_open(((kind_q == K_PKT && d_q.ci != d_q.shead) || (kind_q == K_SENT && hm_wqe_rdat(sent_q.opcode))) && !d_q.err),
    .i_rd_idx(bat_ra_idx), .i_rd_beat(bat_ra_beat), .o_rd(cb_rd),
    .m_wrd, .m_wrd_valid, .m_wrd_ready, .s_wqe_tdata, .s_wqe_tvalid, .s_wqe_tready, .s_wqe_tlast, .s_wqe_tuser);
  logic [7:0]  fatal_st_q;
  logic [47:0] ack_to;
  logic        tmo_on;         // the QP has an ACK timeout (not infinite, not UC)
  assign ack_to = hm_ack_timeout_cycles(ctx_q.timeout, CYCLES_PER_US);
  assign tmo_on = ctx_q.timeout != 5'd0 && !ctx_q.uc;

  // the timer table follows the saved QP, and a QP (re)loaded by the control plane starts
  // disarmed (the two never in the same cycle: C_CTL and C_SAVE)
  // The early deadline is set whenever the standard one is (and after an early
  // retransmission): the tail-loss probe interval when the QP has started every WQE posted
  // and no early retransmission happened since the last progress, else rto; doubled per
  // early retransmission.
  cdyn_t save_d;
  logic [23:0] e_base;
  always_comb begin
    save_d = d_q;
    if (kind_q == K_PKT && una_eff != una0_q) save_d.e_n = 3'd0;   // progress
    if (save_d.err) save_d.tmr_on = 1'b0;
    else if (tmr_restart_q && !save_d.rnr_wait) begin
      save_d.tmr_on   = save_d.ci != save_d.shead && tmo_on;
      save_d.deadline = now_q + ack_to;
    end
    e_base = save_d.e_n == 3'd0 && save_d.shead == posted_end ? save_d.pto : save_d.rto;
    if ((tmr_restart_q || e_arm_q) && !save_d.rnr_wait) begin
      save_d.e_on = !ctx_q.std_timer && save_d.srtt != '0 && 32'(save_d.e_n) < HM_RTO_BACKOFF;
      save_d.e_dl = now_q + (48'(e_base) << save_d.e_n);
    end
    if (save_d.err || !save_d.tmr_on || save_d.rnr_wait) save_d.e_on = 1'b0;
  end
  // the table reads for the turn taken (C_IDLE, or C_SAVE as it saves: its own QP forwarded)
  always_ff @(posedge clk) begin
    ctx_rd <= ctx_mem[sel_q];
    dyn_rd <= save_now && sel_q == q_q ? save_d : dyn_mem[sel_q];   // (a turn taken in C_SAVE)
    pi_rd  <= pi_mem[sel_q];
  end

  assign tmr_wr       = save_now || (st_q == C_CTL && (s_ctl_cmd.flags & HM_CTL_F_LOAD_SQ) != 0);
  assign tmr_qpn      = save_now ? q_q : QW'(s_ctl_cmd.index);
  assign tmr_armed    = save_now && save_d.tmr_on;
  assign tmr_deadline = !save_now ? 48'd0 :
                        save_d.e_on && $signed(save_d.e_dl - save_d.deadline) < 0 ? save_d.e_dl : save_d.deadline;

  // pi_mem's one write port: a control command's LOAD_SQ resets the index, a doorbell moves
  // it. The two never meet: a control command is taken (C_CTL) only once the doorbell stage
  // is empty (u_dbf, hm_db_order), so db_pw is low in C_CTL. (Two write ports made the table
  // 65,536 flip-flops: Yosys maps no RAM with two write ports and a read port.)
  logic          pi_we;
  logic [QW-1:0] pi_wa;
  logic [15:0]   pi_wd;
  always_comb begin
    pi_we = db_pw || (st_q == C_CTL && (s_ctl_cmd.flags & HM_CTL_F_LOAD_SQ) != 0);
    pi_wa = db_pw ? QW'(db_q.qpn) : QW'(s_ctl_cmd.index);
    pi_wd = db_pw ? db_q.pi : 16'd0;
  end

  // err_mem follows dyn_mem's ERR bit (the two writes below)
  always_comb begin
    err_w  = save_now || (st_q == C_CTL && ((s_ctl_cmd.flags & HM_CTL_F_LOAD_SQ) != 0 ||
                                            ctl_ctx.state == HM_QPS_ERR));
    err_wa = save_now ? q_q : QW'(s_ctl_cmd.index);
    err_wd = save_now ? save_d.err : ctl_ctx.state == HM_QPS_ERR;
  end

  always_ff @(posedge clk) begin
    if (st_q == C_CTL) begin
      ctx_mem[QW'(s_ctl_cmd.index)] <= ctl_ctx;
      if ((s_ctl_cmd.flags & HM_CTL_F_LOAD_SQ) != 0) begin
        dyn_mem[QW'(s_ctl_cmd.index)] <= '{ci: 16'd0, una: ctl_ctx.sq_psn, shead: 16'd0,
                                           spsn: ctl_ctx.sq_psn, rd_done: 24'd0, lerr_v: 1'b0,
                                           lerr_st: 8'd0, lerr_idx: 16'd0,
                                           err: ctl_ctx.state == HM_QPS_ERR,
                                           retry_left: ctl_ctx.retry_cnt, rnr_left: ctl_ctx.rnr_retry,
                                           guard_v: 1'b0, guard: 24'd0, rnr_wait: 1'b0, rnr_psn: 24'd0, rw_v: 1'b0,
                                           tmr_on: 1'b0, deadline: 48'd0,
                                           lim: ctl_ctx.sq_psn + 24'(HM_WIN_MAX), cwnd: HM_WIN_MAX,
                                           rt_on: 1'b0, rt_psn: 24'd0, rt_t0: 32'd0, srtt: 24'd0, rttvar: 24'd0,
                                           rto: 24'd0, pto: 24'd0, e_n: 3'd0, e_on: 1'b0, e_dl: 48'd0};
      end else if (ctl_ctx.state == HM_QPS_ERR) begin
        // the control plane moved the QP to ERR: the next doorbell or event flushes it
        dyn_mem[QW'(s_ctl_cmd.index)].err <= 1'b1;
      end
    end
    if (save_now) dyn_mem[q_q] <= save_d;
    if (pi_we) pi_mem[pi_wa] <= pi_wd;
  end

  // is WQE x in the cache
  function automatic logic cached(input logic [15:0] x);
    return wc_v_q && wc_q == q_q && wc_idx_q == x;
  endfunction

  // read WQE idx into the one-entry cache (C_WREQ, through the batch buffer), then go to ret
  task automatic fetch(input logic [15:0] idx, input st_t ret);
    fx_q  <= idx;
    ret_q <= ret;
    st_q  <= C_WREQ;
  endtask

  // complete the WQE at ci with `status` (C_RETIRE), then go to ret
  task automatic retire(input logic [7:0] status, input st_t ret);
    rt_status_q <= status;
    ret_q       <= ret;
    st_q        <= C_RETIRE;
  endtask

  // a WQE the requester started (successfully): its head and next PSN move on, and the ACK
  // timer runs while anything is outstanding; its first PSN is timed unless a round trip
  // already is (or `time_it` is 0: a record taken in with a response, which may have waited
  // behind it, so its start time is not known)
  task automatic started(input logic [15:0] wqe_idx, input logic [23:0] first_psn, input logic [23:0] psn_end,
                         input logic time_it);
    d_q.shead <= wqe_idx + 1'b1;
    d_q.spsn  <= psn_end;
    if (!d_q.rt_on && time_it) begin
      d_q.rt_on  <= 1'b1;
      d_q.rt_psn <= first_psn;
      d_q.rt_t0  <= now_q[31:0];
    end
    if (!d_q.tmr_on && !d_q.rnr_wait && tmo_on && !d_q.err) begin
      d_q.tmr_on   <= 1'b1;
      d_q.deadline <= now_q + ack_to;
      e_arm_q      <= 1'b1;
    end
  endtask

  // the start of a turn (C_IDLE, or C_SAVE as a turn ends): the work taken, if any
  task automatic begin_turn();
    q_q           <= sel_q;
    flushing_q    <= 1'b0;
    prog_q        <= 1'b0;
    rwd_q         <= 1'b0;
    clamped_q     <= 1'b0;
    wph_q         <= 2'd0;
    tmr_restart_q <= 1'b0;
    e_arm_q       <= 1'b0;
    early_q       <= 1'b0;
    rph_q         <= 3'd0;
    disc_next_q   <= C_SAVE;
    absorbed_q    <= 1'b0;
    if (take_pkt) rr_pkt_q <= 1'b1;
    if (take_sent) rr_pkt_q <= 1'b0;
    if (take_ctl) st_q <= C_CTL;
    else if (take_evt) begin kind_q <= K_EVT; st_q <= C_LOAD; end
    else if (take_sent) begin kind_q <= K_SENT; sent_q <= mg_q; st_q <= C_LOAD; end
    else if (take_db) begin kind_q <= K_DB; st_q <= C_LOAD; end
    else if (take_pkt) begin
      kind_q <= K_PKT;
      h_q    <= hk_q;
      h_local_q <= hk_local_q;
      if ((hk_q.dest_qp >> QW) != '0) begin
        stats.dropped <= stats.dropped + 1'b1;
        disc_next_q  <= C_IDLE;
        st_q <= hk_q.payload_len != 0 ? C_DISCARD : C_IDLE;
      end else st_q <= C_LOAD;
    end
    else if (take_tmo) begin kind_q <= K_TMO; st_q <= C_LOAD; end
  endtask

  always_ff @(posedge clk) begin
    if (rst) begin
      st_q           <= C_IDLE;
      wc_v_q         <= 1'b0;
      rr_pkt_q       <= 1'b0;
      wr_issued_q    <= '0;
      wr_done_q      <= '0;
      stats <= '0;
      m_qpc_valid    <= 1'b0;
      m_qpc_rx_valid <= 1'b0;
    end else begin
      m_qpc_valid    <= 1'b0;
      m_qpc          <= '{qpn: 16'(q_q), mask: '0};
      m_qpc_rx_valid <= 1'b0;
      m_qpc_rx       <= '{qpn: s_hdr.dest_qp[15:0], mask: '0};
      if (s_done_valid) begin
        wr_done_q <= wr_done_q + 1'b1;
        if (s_done_err) stats.wr_err <= stats.wr_err + 1'b1;
      end
      if (m_pc_valid && m_pc_ready && !m_pc.discard) wr_issued_q <= wr_issued_q + 1'b1;
      // every ACK received counts once, on entry: also one merged into the next (coalesced
      // cumulative ACKs) and one for a QP number out of range (a local ACK is not received)
      if (s_hdr_valid && s_hdr_ready && s_hdr.opcode == HM_OP_ACK && !s_hdr_local) begin
        stats.acks <= stats.acks + 1'b1;
        if (s_hdr.syndrome[7:5] == HM_AETH_CLS_RNR) stats.rnr_naks <= stats.rnr_naks + 1'b1;
        if (s_hdr.syndrome == HM_AETH_NAK_PSN_SEQ) stats.seq_naks <= stats.seq_naks + 1'b1;
        m_qpc_rx_valid <= (s_hdr.dest_qp >> QW) == '0 &&
                          (s_hdr.syndrome[7:5] == HM_AETH_CLS_RNR || s_hdr.syndrome == HM_AETH_NAK_PSN_SEQ);
        m_qpc_rx.mask[hm_pkg::HM_QPC_RNR_NAKS_RX] <= s_hdr.syndrome[7:5] == HM_AETH_CLS_RNR;
        m_qpc_rx.mask[hm_pkg::HM_QPC_SEQ_NAKS_RX] <= s_hdr.syndrome == HM_AETH_NAK_PSN_SEQ;
      end
      case (st_q)
        C_IDLE: begin_turn();
        C_CTL: begin
          wc_v_q <= 1'b0;
          st_q   <= C_IDLE;
        end
        C_LOAD: begin
          ctx_q <= ctx_rd;
          d_q   <= dyn_rd;
          una0_q <= dyn_rd.una + dyn_rd.rd_done;
          pi_q  <= db_hit_q ? db_hit_pi_q : pi_rd;
          st_q  <= C_DISPATCH;
        end
        C_DISPATCH: begin
          case (kind_q)
            K_SENT: begin
              if (sent_q.status == HM_CQE_ST_SUCCESS) begin
                started(sent_q.wqe_idx, sent_q.first_psn, sent_q.first_psn + sent_q.npsn, 1'b1);
                st_q <= C_SAVE;
              end else begin
                d_q.lerr_v   <= 1'b1;
                d_q.lerr_st  <= sent_q.status;
                d_q.lerr_idx <= sent_q.wqe_idx;
                st_q         <= C_SAVE;        // reported once every earlier WQE completed
              end
            end
            K_DB: begin
              // (pi_q holds this doorbell's producer index, or a later one)
              st_q <= d_q.err ? C_FLUSH : C_SAVE;
              flushing_q <= d_q.err;
            end
            K_EVT: begin
              // (also when already in ERR, e.g. by a context write: the flush is what the
              // event asks for, and it is idempotent)
              d_q.err    <= 1'b1;
              flushing_q <= 1'b1;
              st_q       <= C_FLUSH;
            end
            K_TMO: begin
              // the scanner saw an expired deadline; this copy decides (it may be stale)
              if (!d_q.tmr_on || (!std_due && !early_due) || d_q.err ||
                  !(ctx_q.state == HM_QPS_RTS || ctx_q.state == HM_QPS_SQD)) begin
                st_q <= C_IDLE;
              end else if (d_q.rnr_wait) begin
                // RNR timer over: resume at the NAKed PSN
                d_q.rnr_wait  <= 1'b0;
                tmr_restart_q <= 1'b1;
                rt_psn_q      <= d_q.rnr_psn;
                rw_idx_q      <= d_q.ci;
                rw_f_q        <= d_q.una;
                st_q          <= C_RWND;
              end else if (d_q.ci == d_q.shead) begin
                d_q.tmr_on <= 1'b0;
                d_q.e_on   <= 1'b0;
                st_q       <= C_SAVE;
              end else if (!std_due) begin
                // early retransmission: no retry used, the standard deadline stands
                stats.early <= stats.early + 1'b1;
                d_q.e_n     <= d_q.e_n + 1'b1;
                e_arm_q     <= 1'b1;
                early_q     <= 1'b1;
                rt_psn_q    <= una_eff;
                rt_guard_q  <= 1'b0;
                st_q        <= C_RETRY;
              end else begin
                stats.timeouts <= stats.timeouts + 1'b1;
                m_qpc_valid    <= 1'b1;
                m_qpc.mask[hm_pkg::HM_QPC_ACK_TIMEOUTS] <= 1'b1;
                rt_psn_q      <= una_eff;
                rt_guard_q    <= 1'b0;
                st_q          <= C_RETRY;
              end
            end
            default: if (absorb) begin   // K_PKT, a record of the QP waiting
              absorbed_q <= 1'b1;
              started(mg_q.wqe_idx, mg_q.first_psn, mg_q.first_psn + mg_q.npsn, 1'b0);
            end else begin   // K_PKT
              logic ok;
              // (a UC QP takes its local ACKs only, an RC QP never one)
              ok = (ctx_q.state == HM_QPS_RTS || ctx_q.state == HM_QPS_SQD) && !d_q.err && h_local_q == ctx_q.uc;
              if (is_ack && syn_cls == HM_AETH_CLS_ACK)
                ok = ok && hm_psn_ge(p + 24'd1, una_eff) && hm_psn_ge(d_q.spsn, p + 24'd1);
              else if (is_ack && h_q.syndrome == HM_AETH_NAK_PSN_SEQ)
                // NAK sequence error: PSN in [una, spsn]; ignored while waiting for an RNR
                // timer or when this PSN was already retried
                ok = ok && hm_psn_ge(p, una_eff) && hm_psn_ge(d_q.spsn, p) && !d_q.rnr_wait &&
                     !(d_q.guard_v && d_q.guard == p);
              else if (is_ack)
                ok = ok && hm_psn_ge(p, una_eff) && hm_psn_ge(d_q.spsn - 24'd1, p) && d_q.spsn != una_eff;
              else
                // READ response / atomic ACK: PSN in [una, spsn-1]; one beyond every PSN sent
                // (a stale or forged frame) must not retire the SEND/WRITE WQEs before a READ
                ok = ok && d_q.ci != d_q.shead && hm_psn_ge(p, d_q.una) && hm_psn_ge(d_q.spsn - 24'd1, p);
              if (!ok) begin
                // dropped; a started-WQE record absorbed for it is kept (saved)
                stats.dropped <= stats.dropped + 1'b1;
                disc_next_q  <= absorbed_q ? C_SAVE : C_IDLE;
                st_q <= h_q.payload_len != 0 ? C_DISCARD : absorbed_q ? C_SAVE : C_IDLE;
              end else begin
                st_q <= C_RL;
              end
            end
          endcase
        end

        // retire loop: SEND/WRITE WQEs covered by the packet
        C_RL: begin
          if (d_q.ci == d_q.shead) st_q <= C_AFTER;
          else if (!cached(d_q.ci)) begin
            fx_q  <= d_q.ci;
            ret_q <= C_RL;
            bi_q  <= '0;
            bg_q  <= '0;
            st_q  <= !ci_in_batch ? (kind_q == K_PKT && !flushing_q ? C_RI : C_WREQ) :
                     (kind_q == K_PKT && !flushing_q) ? C_RFAST : C_BLOAD;
          end else if (w_rdat) st_q <= C_AFTER;
          else begin
            logic due;
            if (kind_q != K_PKT) due = 1'b0;
            else if (is_ack && syn_cls == HM_AETH_CLS_ACK) due = hm_psn_ge(p, w_last);
            else due = hm_psn_ge(p - 24'd1, w_last);
            if (due) begin
              retire(HM_CQE_ST_SUCCESS, C_RL);
            end else st_q <= C_AFTER;
          end
        end
        C_RFAST: begin
          if (f_ok) begin
            d_q.ci        <= d_q.ci + 1'b1;
            d_q.una       <= d_q.una + f_npsn;
            d_q.rd_done   <= '0;
            prog_q        <= 1'b1;
            tmr_restart_q <= 1'b1;
            fx_q          <= fx_q + 1'b1;
          end else if (d_q.ci != d_q.shead && ci_in_batch && !cb_err && !f_rdat) begin
            // a SEND / WRITE that is signaled or not yet due: C_RL decides on its header,
            // which is all the retire, CQE, rewind and C_AFTER steps read of such a WQE
            wqe_q[DATA_WIDTH-1:0] <= cb_rd;
            wc_v_q       <= 1'b1;
            wc_q         <= q_q;
            wc_idx_q     <= fx_q;
            wfetch_err_q <= 1'b0;
            st_q         <= C_RL;
          end else if (d_q.ci != d_q.shead && ci_in_batch) begin
            // anything else (READ / atomic, fetch error): the WQE is loaded whole and C_RL
            // decides
            bi_q  <= '0;
            bg_q  <= '0;
            ret_q <= C_RL;
            st_q  <= C_BLOAD;
          end else st_q <= C_RL;
        end
        C_RI: begin
          // WQE ci from its start record: a SEND / WRITE is complete in its header, which is
          // all the retire, CQE, rewind and C_AFTER steps read of it; anything else is read
          // back (C_WREQ, fx_q = ci)
          if (ri_rd.idx == d_q.ci && !hm_wqe_rdat(ri_rd.opcode)) begin
            wqe_q[255:0] <= 256'(hm_sq_wqe_hdr_t'{length: ri_rd.len, rkey: 32'd0, remote_addr: 64'd0,
                                                  wr_id: ri_rd.wr_id, imm: 32'd0, rsvd: 8'd0, num_sge: 8'd0,
                                                  flags: ri_rd.flags, opcode: ri_rd.opcode});
            wc_v_q       <= 1'b1;
            wc_q         <= q_q;
            wc_idx_q     <= d_q.ci;
            wfetch_err_q <= 1'b0;
            // a WQE the packet covers retires at once (C_RL would decide the same on it)
            if (ri_due) retire(HM_CQE_ST_SUCCESS, C_RL);
            else st_q <= C_RL;
          end else st_q <= C_WREQ;
        end
        C_WREQ: begin
          if (in_batch) begin
            bi_q <= '0;
            bg_q <= '0;
            st_q <= C_BLOAD;
          end else if (dem_taken) st_q <= C_WDATA;
        end
        C_WDATA: if (dem_done) begin
          bi_q <= '0;
          bg_q <= '0;
          st_q <= C_BLOAD;
        end
        C_BLOAD: begin
          // the beats of WQE fx_q: read address in one cycle, data the next
          if (bi_q != 5'(1 << lbpw)) bi_q <= bi_q + 1'b1;
          if (bi_q != '0) begin
            if (32'(bg_q) * KW < WQE_MAX) wqe_q[int'(bg_q) * DATA_WIDTH +: DATA_WIDTH] <= cb_rd;
            bg_q <= bg_q + 1'b1;
            if (bg_q + 1'b1 == 5'(1 << lbpw)) begin
              wc_v_q       <= 1'b1;
              wc_q         <= q_q;
              wc_idx_q     <= fx_q;
              wfetch_err_q <= cb_err;
              cj_q         <= '0;
              cr_q         <= '0;
              wchk_err_q   <= 1'b0;
              // only READ / atomic SGLs are checked (C_WCHK); others go straight back
              st_q         <= (bld_rdat && !flushing_q) ? C_WCHK : ret_q;
            end
          end
        end
        C_WCHK: begin
          // READ / atomic SGLs are checked again before anything is written into them
          if (!w_rdat || flushing_q) st_q <= ret_q;
          else begin
            if (m_chk_valid && m_chk_ready) cj_q <= cj_q + 1'b1;
            if (s_res_valid) begin
              cr_q <= cr_q + 1'b1;
              if (!s_res.ok) wchk_err_q <= 1'b1;
            end
            if (cr_q == 5'(nsge)) st_q <= ret_q;
          end
        end

        // after the retire loop: what the packet asks for
        C_AFTER: begin
          logic at, implied, gv;
          logic [23:0] n;
          at = d_q.ci != d_q.shead;          // WQE ci is in the cache when at
          n  = (is_ack && syn_cls == HM_AETH_CLS_ACK) ? p : p - 24'd1;
          // progress so far (retired WQEs) resets the counters and the NAK guard first
          gv = d_q.guard_v && !prog_q;
          if (prog_q) begin
            d_q.retry_left <= ctx_q.retry_cnt;
            d_q.rnr_left   <= ctx_q.rnr_retry;
            d_q.guard_v    <= 1'b0;
            tmr_restart_q  <= 1'b1;
          end
          // an ACK / NAK beyond an unanswered READ or atomic: implied NAK
          implied = at && w_rdat && hm_psn_ge(n, d_q.una) && !(is_rresp && w_read &&
                    hm_psn_ge(p, d_q.una) && !hm_psn_ge(p, d_q.una + w_npsn));
          disc_next_q <= C_SAVE;
          if (kind_q != K_PKT) begin
            st_q <= C_SAVE;
          end else if (implied && !(is_aack && w_atomic && p == d_q.una)) begin
            // one retry per missing response until progress
            if (!(gv && d_q.guard == una_eff) && !d_q.rnr_wait) begin
              stats.unhandled <= stats.unhandled + 1'b1;    // implied NAKs
              rt_psn_q   <= una_eff;
              rt_guard_q <= 1'b1;
              disc_next_q <= C_RETRY;
              st_q <= h_q.payload_len != 0 ? C_DISCARD : C_RETRY;
            end else st_q <= h_q.payload_len != 0 ? C_DISCARD : C_SAVE;
          end else if (is_ack) begin
            // partial acknowledgement of the SEND/WRITE at ci
            if (at && !w_rdat && hm_psn_ge(n, d_q.una) && 24'(n - d_q.una + 24'd1) > d_q.rd_done) begin
              d_q.rd_done    <= n - d_q.una + 24'd1;
              d_q.retry_left <= ctx_q.retry_cnt;
              d_q.rnr_left   <= ctx_q.rnr_retry;
              d_q.guard_v    <= 1'b0;
              tmr_restart_q  <= 1'b1;
            end
            if (syn_cls == HM_AETH_CLS_RNR) begin
              // RNR NAK: hold the requester for the timer, then resume at p
              if (d_q.rnr_left == 3'd0) begin
                fatal_st_q <= HM_CQE_ST_RNR_RETRY_EXC_ERR;
                st_q       <= C_FATAL;
              end else begin
                if (ctx_q.rnr_retry != 3'd7) d_q.rnr_left <= d_q.rnr_left - 1'b1;
                d_q.rnr_wait <= 1'b1;
                d_q.rnr_psn  <= p;
                d_q.rt_on    <= 1'b0;
                d_q.tmr_on   <= 1'b1;
                d_q.deadline <= now_q + hm_rnr_timer_cycles(h_q.syndrome[4:0], CYCLES_PER_US);
                rqc_q        <= '{op: HM_RQC_HOLD, qpn: 16'(q_q), idx: 16'd0, off: 32'd0, psn: 24'd0, lim: 24'd0};
                rqc_next_q   <= C_SAVE;
                st_q         <= C_RQC;
              end
            end else if (h_q.syndrome == HM_AETH_NAK_PSN_SEQ) begin
              rt_psn_q   <= p;
              rt_guard_q <= 1'b1;
              st_q       <= C_RETRY;
            end else if (syn_cls == HM_AETH_CLS_NAK && h_q.syndrome >= HM_AETH_NAK_INV_REQ && h_q.syndrome <= HM_AETH_NAK_REM_OP && at) begin
              // (a local NAK of hm_uc_lack: the packet's payload could not be read)
              fatal_st_q <= h_local_q ? HM_CQE_ST_LOC_PROT_ERR :
                            h_q.syndrome == HM_AETH_NAK_INV_REQ ? HM_CQE_ST_REM_INV_REQ_ERR :
                            h_q.syndrome == HM_AETH_NAK_REM_ACCESS ? HM_CQE_ST_REM_ACCESS_ERR : HM_CQE_ST_REM_OP_ERR;
              st_q       <= C_FATAL;
            end else st_q <= C_SAVE;
          end else if (is_rresp) begin
            logic [31:0] off, exp_len;
            logic [23:0] expct;
            expct   = una_eff;
            off     = cur_seek;
            exp_len = (w.length - off) > 32'(pmtu) ? 32'(pmtu) : w.length - off;
            if (!(at && w_read && hm_psn_ge(p, d_q.una) && !hm_psn_ge(p, d_q.una + w_npsn))) begin
              stats.dropped <= stats.dropped + 1'b1;
              st_q <= h_q.payload_len != 0 ? C_DISCARD : C_SAVE;
            end else if (p != expct) begin
              // behind: duplicate, dropped; ahead: a response is missing, go back once
              if (hm_psn_ge(p, expct) && !(gv && d_q.guard == expct) && !d_q.rnr_wait) begin
                rt_psn_q    <= expct;
                rt_guard_q  <= 1'b1;
                disc_next_q <= C_RETRY;
              end
              st_q <= h_q.payload_len != 0 ? C_DISCARD : (hm_psn_ge(p, expct) && !(gv && d_q.guard == expct) && !d_q.rnr_wait) ? C_RETRY : C_SAVE;
            end else if ((rr_aeth && syn_cls != HM_AETH_CLS_ACK) ||
                         // a READ re-requested from the middle starts again with FIRST/ONLY
                         rr_last != (d_q.rd_done + 24'd1 == w_npsn) ||
                         32'(h_q.payload_len) != exp_len) begin
              stats.dropped <= stats.dropped + 1'b1;
              st_q <= h_q.payload_len != 0 ? C_DISCARD : C_SAVE;
            end else if (wchk_err_q || wfetch_err_q) begin
              fatal_st_q  <= HM_CQE_ST_LOC_PROT_ERR;
              disc_next_q <= C_FATAL;
              st_q        <= h_q.payload_len != 0 ? C_DISCARD : C_FATAL;
            end else begin
              st_q   <= h_q.payload_len != 0 ? C_PLACE : C_WAITWR;
            end
          end else begin
            // atomic ACK
            if (at && w_atomic && p == d_q.una && syn_cls == HM_AETH_CLS_ACK) begin
              if (wchk_err_q || wfetch_err_q) begin
                fatal_st_q <= HM_CQE_ST_LOC_PROT_ERR;
                st_q       <= C_FATAL;
              end else st_q <= C_ATOMIC;
            end else begin
              stats.dropped <= stats.dropped + 1'b1;
              st_q <= C_SAVE;
            end
          end
        end

        C_PLACE: if (cur_valid && cur_last && m_pc_ready) st_q <= C_WAITWR;
        C_ATOMIC: if (m_pc_ready) st_q <= C_WAITWR;
        C_WAITWR: begin
          // a READ response placed is progress; the last one (or the atomic result) retires
          // the WQE once its data is in memory
          if (is_rresp && !rr_last) begin
            d_q.rd_done    <= d_q.rd_done + 1'b1;
            d_q.retry_left <= ctx_q.retry_cnt;
            d_q.rnr_left   <= ctx_q.rnr_retry;
            d_q.guard_v    <= 1'b0;
            tmr_restart_q  <= 1'b1;
            st_q           <= C_SAVE;
          end else if (wr_done_q == wr_issued_q) begin
            d_q.retry_left <= ctx_q.retry_cnt;
            d_q.rnr_left   <= ctx_q.rnr_retry;
            d_q.guard_v    <= 1'b0;
            retire(HM_CQE_ST_SUCCESS, C_SAVE);
          end
        end
        C_DISCARD: if (m_pc_ready) st_q <= disc_next_q;

        C_RETIRE: begin
          if (!need_cqe || wfetch_err_q || m_cqe_ready) begin
            d_q.ci      <= d_q.ci + 1'b1;
            d_q.una     <= d_q.una + w_npsn;
            d_q.rd_done <= '0;
            wc_v_q      <= 1'b0;
            if (rt_status_q == HM_CQE_ST_SUCCESS) begin
              prog_q        <= 1'b1;
              tmr_restart_q <= 1'b1;
            end
            if (rt_status_q == HM_CQE_ST_SUCCESS && w_rdat) begin
              // max_rd_atomic credit back to the requester
              rqc_q      <= '{op: HM_RQC_RD_DONE, qpn: 16'(q_q), idx: 16'd0, off: 32'd0, psn: 24'd0, lim: 24'd0};
              rqc_next_q <= ret_q;
              st_q       <= C_RQC;
            end else st_q <= ret_q;
          end
        end

        // go back to rt_psn_q (one retry), or fail with RETRY_EXC_ERR when none is left
        C_RETRY: begin
          if (d_q.retry_left == 3'd0 && !early_q) begin
            fatal_st_q <= HM_CQE_ST_RETRY_EXC_ERR;
            st_q       <= C_FATAL;
          end else begin
            if (!early_q) begin
              stats.retries   <= stats.retries + 1'b1;
              m_qpc_valid     <= 1'b1;
              m_qpc.mask[hm_pkg::HM_QPC_RETRIES] <= 1'b1;
              d_q.retry_left <= d_q.retry_left - 1'b1;
              tmr_restart_q  <= 1'b1;
            end
            d_q.rt_on      <= 1'b0;       // Karn: nothing is timed across a rewind
            d_q.rw_v       <= 1'b1;
            // the window shrinks to HM_WIN_MIN PSNs beyond the one resent (the REWIND says so)
            d_q.cwnd       <= HM_WIN_MIN;
            d_q.lim        <= rt_psn_q + 24'(HM_WIN_MIN);
            rwd_q          <= 1'b1;
            if (rt_guard_q) begin
              d_q.guard_v <= 1'b1;
              d_q.guard   <= rt_psn_q;
            end
            rw_idx_q      <= d_q.ci;
            rw_f_q        <= d_q.una;
            st_q          <= C_RWND;
          end
        end
        // find the WQE holding rt_psn_q and tell the requester to resend from there
        C_RWND: begin
          if (rw_idx_q == d_q.shead) begin
            rqc_q      <= '{op: HM_RQC_REWIND, qpn: 16'(q_q), idx: d_q.shead, off: 32'd0, psn: rt_psn_q, lim: d_q.lim};
            rqc_next_q <= C_SAVE;
            st_q       <= C_RQC;
          end else if (!cached(rw_idx_q)) begin
            fetch(rw_idx_q, C_RWND);
          end else if (!hm_psn_ge(rt_psn_q - rw_f_q, w_npsn)) begin
            rqc_q      <= '{op: HM_RQC_REWIND, qpn: 16'(q_q), idx: rw_idx_q,
                            off: 32'(24'(rt_psn_q - rw_f_q)) << lpmtu, psn: rt_psn_q, lim: d_q.lim};
            rqc_next_q <= C_SAVE;
            st_q       <= C_RQC;
          end else begin
            rw_f_q   <= rw_f_q + w_npsn;
            rw_idx_q <= rw_idx_q + 1'b1;
          end
        end
        C_RQC: if (m_rqc_ready) st_q <= rqc_next_q;

        // fatal: the oldest WQE completes with fatal_st_q, the QP goes to ERR, the rest flush
        C_FATAL: begin
          if (d_q.ci == d_q.shead && !(d_q.lerr_v && d_q.ci == d_q.lerr_idx)) st_q <= C_SAVE;
          else if (!cached(d_q.ci)) begin
            fetch(d_q.ci, C_FATAL);
          end else begin
            d_q.err    <= 1'b1;
            flushing_q <= 1'b1;
            retire(fatal_st_q, C_ERRNOTE);
          end
        end
        C_ERRNOTE: if (m_err_ready) st_q <= C_FLUSH;   // then flush from the next WQE
        C_FLUSH: begin
          // every WQE posted and not completed: WR_FLUSH_ERR, up to the later of the
          // doorbell's producer index and the WQEs started. A doorbell may still wait in
          // u_dbf (pi_q behind WQEs already retired); its own turn flushes what it adds.
          if (d_q.ci == posted_end || 16'(posted_end - d_q.ci) >= 16'h8000) st_q <= C_SAVE;
          else if (!cached(d_q.ci)) begin
            fetch(d_q.ci, C_FLUSH);
          end else begin
            retire(HM_CQE_ST_WR_FLUSH_ERR, C_FLUSH);
          end
        end
        C_LERR: begin
          // a local error completes once every earlier WQE has completed
          if (!cached(d_q.ci)) begin
            fetch(d_q.ci, C_LERR);
          end else begin
            d_q.lerr_v <= 1'b0;
            d_q.err    <= 1'b1;
            flushing_q <= 1'b1;
            retire(d_q.lerr_st, C_ERRNOTE);
          end
        end
        C_SAVE: begin
          if (clamp_due) begin
            // the requester must not go back to WQEs that completed: the host may already
            // have written their slots again
            d_q.rw_v   <= d_q.ci != d_q.shead;
            clamped_q  <= 1'b1;
            rqc_q      <= '{op: HM_RQC_CLAMP, qpn: 16'(q_q), idx: d_q.ci, off: 32'd0, psn: d_q.una, lim: 24'd0};
            rqc_next_q <= C_SAVE;
            st_q       <= C_RQC;
          end else begin
            // the window's and the round trip's steps run side by side (they share no field)
            if (win_step) begin
              unique case (wph_q)
                2'd0: begin
                  // at most 2^23 - 1: una only moves forward while a packet is worked on
                  wk_q  <= hm_psn_ge(una_eff, una0_q) ? una_eff - una0_q : 24'd0;
                  wph_q <= una_eff == una0_q ? 2'd3 : 2'd1;   // nothing acknowledged: done
                end
                2'd1: begin
                  d_q.cwnd <= cw_next;
                  want_q   <= una_eff + 24'(cw_next);
                  wph_q    <= 2'd2;
                end
                default: begin
                  wph_q <= 2'd3;
                  if (hm_psn_ge(want_q, d_q.lim + 24'(HM_WIN_STEP))) begin
                    d_q.lim    <= want_q;
                    rqc_q      <= '{op: HM_RQC_WIN, qpn: 16'(q_q), idx: 16'd0, off: 32'd0, psn: 24'd0, lim: want_q};
                    rqc_next_q <= C_SAVE;
                    st_q       <= C_RQC;
                  end
                end
              endcase
            end
            if (!win_step && !rtt_step) begin   // (rtt_step: below the FSM)
              if (d_q.lerr_v && d_q.ci == d_q.lerr_idx && !d_q.err) st_q <= C_LERR;
              else begin
                st_q <= C_IDLE;
                begin_turn();
              end
            end
          end
        end
        default: st_q <= C_IDLE;
      endcase
      // the round trip's steps: from the cycle the packet acknowledges the PSN timed (also
      // before C_SAVE, beside the retire steps, which share no field with them)
      if (rtt_step) begin
        unique case (rph_q)
          3'd0: begin
            rs_q  <= rt_el[31:24] != '0 ? 24'hFF_FFFF : rt_el[23:0] == '0 ? 24'd1 : rt_el[23:0];
            rph_q <= 3'd1;
          end
          3'd1: begin
            rd_q  <= rt_neg ? 24'(rs_q - d_q.srtt) : rt_sub[23:0];      // |SRTT - R|
            sa_q  <= d_q.srtt - (d_q.srtt >> 3);
            va_q  <= d_q.rttvar - (d_q.rttvar >> 2);
            rph_q <= 3'd2;
          end
          3'd2: begin
            if (d_q.srtt == '0) begin
              d_q.srtt   <= rs_q;
              d_q.rttvar <= rs_q >> 1;
            end else begin
              d_q.srtt   <= sa_q + (rs_q >> 3);
              d_q.rttvar <= va_q + (rd_q >> 2);
            end
            rph_q <= 3'd3;
          end
          3'd3: begin
            rr_q  <= 26'(d_q.srtt) + (26'(d_q.rttvar) << 2);
            rp_q  <= 25'(d_q.srtt) << 1;
            rph_q <= 3'd4;
          end
          3'd4: begin
            d_q.rto <= rr_q < 26'(RTO_MIN_C) ? 24'(RTO_MIN_C) : rr_q[25:24] != '0 ? 24'hFF_FFFF : rr_q[23:0];
            rp_q    <= rp_q < 25'(PTO_MIN_C) ? 25'(PTO_MIN_C) : rp_q;
            rph_q   <= 3'd5;
          end
          default: begin
            d_q.pto   <= rp_q > 25'(d_q.rto) ? d_q.rto : rp_q[23:0];
            d_q.rt_on <= 1'b0;
            rph_q     <= 3'd7;
          end
        endcase
      end
      // a doorbell's producer index for the QP loaded (the doorbell stage)
      if (db_pw && QW'(db_q.qpn) == q_q && st_q != C_IDLE) pi_q <= db_q.pi;
    end
  end

  logic unused_ok;
  assign unused_ok = ^{s_res.base, s_res.limit, s_ctl_data, h_q, sent_q, w, fh, sge_c, sge_atom, ctx_q, d_q, s_wqe_tdata, s_ctl_cmd, s_err_qpn};

  if ((1 << QW) != NUM_QPS) begin : g_bad_qps
    $error("hm_rc_compl: NUM_QPS must be a power of two");
  end
endmodule
