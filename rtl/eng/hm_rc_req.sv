// RC requester: schedules QPs with posted send WQEs, fetches the WQEs by DMA, checks their
// local SGEs against the MR table, and turns each message into request packets (header
// records for the TX path, payload pieces for the gather unit).
//
// Scheduling: a QP becomes active when a doorbell or a context write gives it work; active
// QPs wait in a FIFO (each at most once) and are served round-robin, QUANTUM_PKTS packets at
// a time while others wait (a QP alone keeps going), so the scheduler is fair and
// work-conserving. A QP whose `rl_pause` bit is set, or that the DCQCN pacer holds back
// (`rl_hold`, its answer for `m_rl_qpn`, the QP being served, one cycle later; an answer for
// another QP counts as no hold), is passed over (requeued) without fetching anything or stops
// at the next packet boundary. Every packet header committed is reported on m_txr_* (QP and
// frame bytes without FCS) for the pacer and the reaction point's byte counter. A QP whose
// priority is paused by PFC (`pfc_paused`) is held the same way; headers already queued
// (at most PKT_QUEUE_BYTES of payload) still leave.
//
// Per QP the requester keeps {head WQE index, byte offset in it, next PSN}; the producer
// index written by doorbells lives in its own RAM (and doorbells for the QP being served
// reach it at once). A message longer than a quantum is resumed at its saved offset: the SGE
// cursor is recomputed from the WQE.
//
// Pipeline: while a QP is served, a prefetcher keeps WQE reads of up to FETCH_BYTES in
// flight into a ring of WQE_BUF_BYTES (starting at the head WQE, never past the producer
// index, at most a quantum ahead while other QPs wait). A WQE the host pushed (s_push,
// hm_wqe_push: the MMIO path) goes into the ring in one cycle instead of being read, when it
// is the next one to fetch and nothing is in flight, at 512 bits (a push is one beat): its
// first beat is the push, and the slot's later beats, which the pushed WQE does not use
// (hm_wqe_push takes only such), are counted as arrived and never read. Otherwise the WQE
// is fetched as usual. A WQE becomes readable once the whole DMA read that carries it has
// arrived, so a bus error (reported on the read's last beat) marks every WQE of that read. An
// assembly stage collects the next WQE while the current one is being sent and decodes it on
// the way in. A new single-packet SEND or WRITE whose payload is inline (one beat) or one SGE
// inside the last checked MR region is sent in the cycle it is decoded (header, piece, sent
// record at once): one WQE per cycle when the WQE is one beat. Every other WQE takes the
// general path (SGE checks, cursor walk, multi-packet messages, READ/atomic limits). When the
// QP's turn ends, reads still in flight are discarded as they arrive, except a next-turn read.
//
// Next-turn reads: they hide the WQE fetch latency between turns. When the QP served has
// issued the reads of all it will send this turn (all it has posted, or its quantum), the QP
// waiting at the head of the active FIFO gets one read of its first WQEs (up to a quantum and
// FETCH_BYTES) into the ring behind the current QP's; its context, head and producer index
// are read for the FIFO's head anyway. The read takes the QP out of the FIFO into the
// read-ahead list (up to LA_DEPTH turns, in FIFO order; the QP stays marked queued), and the
// FIFO's next QP gets the next read, so the reads of many short turns are in flight at once.
// Turns start from the list before the FIFO. While usable reads are in the ring, the QP served
// fetches nothing more this turn: the turn ends with the WQEs it has (the QP is requeued if it
// has more). A turn from the list whose QP's head is still its read's first WQE, with no
// error mark from before its read (which could hide its own read's failure), starts with
// those WQEs in the ring, at the read's first beat. Otherwise the list's WQEs are all dropped
// (its QPs keep their turns and fetch as usual; no read is added until the list has drained):
// after a context write, a rewind or clamp that moved a listed QP's head, or when a turn ends
// with a failed read in the ring (the one error mark cannot tell whose read failed: the
// failing read is issued again by its own QP's turn).
//
// UC QPs (the context's `uc` bit) send the same packets with UC opcodes (0x20-0x2B) and no
// AckReq; m_hdr_ucl marks the packets where RC would ask for an ACK (a message's last, every
// 64th, the window's edge), which hm_uc_lack turns into local ACKs once they have left with
// their payload (a WQE completes on its last packet's; the window moves on them).
//
// Local checks (in this order): unknown opcode (on a UC QP: anything but SEND and WRITE, with
// or without immediate), too many SGEs for the WQE size, inline data
// longer than the WQE, misaligned atomic -> LOC_QP_OP_ERR; atomic without exactly one 8-byte
// SGE, message longer than 2^31 -> LOC_LEN_ERR; SGE lengths not summing to the WQE length ->
// LOC_QP_OP_ERR; any SGE failing its MR check (local read for SEND/WRITE, local write for
// READ/atomic targets) -> LOC_PROT_ERR. A failing WQE sends nothing: it is reported on m_sent
// with the status, and the QP stops (marked ERR here; a later context write clears the mark)
// for the completer to finish and flush. An ERR event from another block stops it too. A WQE
// fetch that returns a bus error is reported the same way as LOC_QP_OP_ERR.
module hm_rc_req
  import hm_pkg::*;
  import hm_desc_pkg::*;
  import hm_regs_pkg::*;
  import hm_eng_pkg::*;
#(
  // Datapath width in bits (256 or 512).
  parameter int DATA_WIDTH = 512,
  // QP table entries (power of two, 2..65536).
  parameter int NUM_QPS = 4096,
  // WQE prefetch ring in bytes (power of two, at least 2 * FETCH_BYTES): bounds the WQE
  // bytes in flight, which must cover the host memory latency for one WQE per cycle.
  parameter int WQE_BUF_BYTES = 16384,
  // Largest WQE read in bytes (power of two, 256..4096).
  parameter int FETCH_BYTES = 2048,
  // Packets a QP may send before the scheduler moves to the next active QP.
  parameter int QUANTUM_PKTS = 16,
  // Next-turn reads in flight at most (power of two, 2..64): the turns whose WQEs are read
  // ahead, which must cover the host memory latency over the length of a short turn.
  parameter int LA_DEPTH = 16,
  // Header records and payload pieces queued ahead of the TX path (power of two): they
  // cover the payload read latency, so at least latency / (beats per small frame).
  parameter int PKT_FIFO_DEPTH = 64,
  // Payload bytes those queued headers may carry: enough to cover the payload read latency,
  // small enough that a go-back-N rewind is not stuck behind a long queue of stale packets.
  parameter int PKT_QUEUE_BYTES = 16384,
  // Bytes per beat, QPN bits, control staging words (derived).
  localparam int KEEP_WIDTH = DATA_WIDTH / 8,
  localparam int QW = $clog2(NUM_QPS),
  localparam int SW = int'(HM_CTL_STAGE_WORDS)
) (
  input  logic                  clk,
  input  logic                  rst,

  // QP context writes (control bus commands for table QP, op write)
  input  hm_ctl_cmd_t           s_ctl_cmd,
  input  logic [SW*32-1:0]      s_ctl_data,
  input  logic                  s_ctl_valid,
  output logic                  s_ctl_ready,

  // Send queue doorbells
  input  hm_db_qp_t             s_db,
  input  logic                  s_db_valid,
  output logic                  s_db_ready,

  // Pushed WQEs (the MMIO path): a QP's next WQE, HM_PUSH_BYTES, ahead of its doorbell
  input  logic [15:0]           s_push_qpn,
  input  logic [HM_PUSH_BYTES*8-1:0] s_push_data,
  input  logic                  s_push_valid,
  output logic                  s_push_ready,
  output logic [31:0]           stat_push_used,     // pushes that replaced a WQE read
  output logic [31:0]           stat_push_dropped,  // pushes dropped unused (the WQE was read)

  // QPs moved to ERR elsewhere (the completer, the responder): stop sending
  input  logic [15:0]           s_err_qpn,
  input  logic                  s_err_valid,
  output logic                  s_err_ready,

  // Commands from the completer: rewind (go-back-N), hold (RNR wait), READ/atomic done, clamp
  // (WQEs before idx completed: a resend position behind them moves up to idx)
  input  hm_rq_cmd_t            s_cmd,
  input  logic                  s_cmd_valid,
  output logic                  s_cmd_ready,

  // Rate limiter: bit q set = QP q may not start a packet now
  input  logic [NUM_QPS-1:0]    rl_pause,
  output logic [15:0]           m_rl_qpn,
  input  logic                  rl_hold,
  input  logic [7:0]            pfc_paused,
  input  logic [7:0]            ecn_mask,        // priorities whose packets are ECN-capable
  output logic                  m_txr_valid,
  output logic [15:0]           m_txr_qpn,
  output logic [15:0]           m_txr_bytes,

  // WQE fetch: DMA read requests and their data
  output hm_dma_req_t           m_wrd,
  output logic                  m_wrd_valid,
  input  logic                  m_wrd_ready,
  input  logic [DATA_WIDTH-1:0] s_wqe_tdata,
  input  logic                  s_wqe_tvalid,
  output logic                  s_wqe_tready,
  input  logic                  s_wqe_tlast,
  input  logic                  s_wqe_tuser,

  // MR checks of local SGEs (results in request order)
  output hm_mr_chk_t            m_chk,
  output logic                  m_chk_valid,
  input  logic                  m_chk_ready,
  input  hm_mr_res_t            s_res,
  input  logic                  s_res_valid,
  output logic                  s_res_ready,
  input  logic                  mr_changed,     // an MR entry changed: forget cached regions

  // Payload pieces, in packet order
  output hm_piece_t             m_pc,
  output logic                  m_pc_valid,
  input  logic                  m_pc_ready,

  // Inline payload: one stream packet per inline piece
  output logic [DATA_WIDTH-1:0] m_inl_tdata,
  output logic [KEEP_WIDTH-1:0] m_inl_tkeep,
  output logic                  m_inl_tvalid,
  input  logic                  m_inl_tready,
  output logic                  m_inl_tlast,

  // Request header records (m_hdr_ucl: a UC packet to be acknowledged locally, hm_uc_lack)
  output hm_roce_hdr_t          m_hdr,
  output hm_ucl_t               m_hdr_ucl,
  output logic                  m_hdr_valid,
  input  logic                  m_hdr_ready,

  // Started or refused WQEs, in order per QP
  output hm_sent_t              m_sent,
  output logic                  m_sent_valid,
  input  logic                  m_sent_ready,
  output logic [15:0]           m_sent_made,    // records made so far (a running count)

  // Counters
  output hm_req_stats_t         stats,
  // Per-QP counter events (a request packet sent)
  output hm_qpc_ev_t            m_qpc,
  output logic                  m_qpc_valid
);
  localparam int BUF_BEATS = WQE_BUF_BYTES / KEEP_WIDTH;
  localparam int BW        = $clog2(BUF_BEATS);
  localparam int WQE_MAX   = 256;               // largest WQE (bytes): stride code 2
  localparam int CTXW      = $bits(hm_qp_ctx_t);
  localparam int LKW       = $clog2(KEEP_WIDTH);

  // ---------------------------------------------------------------------------------------
  // Per-QP memories
  // ---------------------------------------------------------------------------------------
  typedef struct packed {
    logic [15:0] head;            // next WQE to send from
    logic [31:0] off;             // bytes of it already sent (0 = not started)
    logic [23:0] psn;             // next PSN
    logic [15:0] shw;             // WQEs ever started (head < shw: retransmitting)
    logic [3:0]  rd_out;          // READ / atomic WQEs started and not completed
    logic [23:0] lim;             // the window's limit: the first PSN that may not be sent
  } dyn_t;

  hm_qp_ctx_t ctx_mem [NUM_QPS];
  dyn_t       dyn_mem [NUM_QPS];
  logic [15:0] pi_mem [NUM_QPS];

  // Per-QP flags (the tables below the FSM): queued (the QP is in the active FIFO), ERR (nothing more is
  // sent; cleared by a context write) and hold (the QP waits for an RNR timer; cleared by a
  // rewind), read at the QP being activated (queued) and at the FSM's QP (the others).
  logic          queued_act, qerr_cur, hold_cur;
  logic          init_q;          // the flags are being cleared after reset: the FSM waits

  // ---------------------------------------------------------------------------------------
  // Activation: at most one per cycle (the FSM's requeue or a context write first, then a
  // doorbell); a QP enters the active FIFO only if it is not already queued.
  // ---------------------------------------------------------------------------------------
  logic          act_fsm;         // FSM (re)activates fsm_act_q
  logic [QW-1:0] act_fsm_q;
  logic          act_v;
  logic [QW-1:0] act_q;
  logic          pop;
  logic [QW-1:0] pop_q;
  logic          af_valid, af_ready, af_in_ready;
  logic [QW-1:0] af_data;
  logic          db_take, db_ok;
  logic          fsm_pi_clear;    // the FSM writes pi_mem this cycle

  assign db_ok      = (s_db.qpn >> QW) == '0;
  assign s_db_ready = !act_fsm && !fsm_pi_clear && !init_q;
  assign db_take    = s_db_valid && s_db_ready;
  assign act_v      = act_fsm || (db_take && db_ok);
  assign act_q      = act_fsm ? act_fsm_q : QW'(s_db.qpn);

  logic act_push;
  assign act_push = act_v && (!queued_act || (pop && pop_q == act_q));

  always_ff @(posedge clk) begin
    if (db_take && db_ok) pi_mem[QW'(s_db.qpn)] <= s_db.pi;
  end

  logic [$clog2(NUM_QPS+1):0] af_level;
  hm_fifo #(.WIDTH(QW), .DEPTH(NUM_QPS)) u_active (
    .clk, .rst,
    .s_data(act_q), .s_valid(act_push), .s_ready(af_in_ready),
    .m_data(af_data), .m_valid(af_valid), .m_ready(af_ready),
    .level(af_level)
  );

  // ---------------------------------------------------------------------------------------
  // Output FIFOs
  // ---------------------------------------------------------------------------------------
  hm_roce_hdr_t hdr_d;
  logic         hdr_push, hdr_room, hdr_fifo_room;
  logic [31:0]  qbytes_q;         // payload bytes of the queued headers
  assign hdr_room = hdr_fifo_room && qbytes_q < 32'(PKT_QUEUE_BYTES);
  always_ff @(posedge clk) begin
    if (rst) qbytes_q <= '0;
    else qbytes_q <= qbytes_q + (hdr_push ? 32'(hdr_d.payload_len) : 32'd0) -
                     (m_hdr_valid && m_hdr_ready ? 32'(m_hdr.payload_len) : 32'd0);
  end
  hm_piece_t    pc_d;
  logic         pc_push, pc_room;
  logic [DATA_WIDTH-1:0] inl_data_d;
  logic [KEEP_WIDTH-1:0] inl_keep_d;
  logic         inl_last_d, inl_push, inl_room;
  hm_sent_t     sent_d;
  logic         sent_push, sent_room;

  logic [$clog2(PKT_FIFO_DEPTH+1):0] l0, l1;
  logic [$clog2(16+1):0] l2, l3;
  hm_ucl_t ucl_d;
  hm_fifo #(.WIDTH($bits(hm_ucl_t) + $bits(hm_roce_hdr_t)), .DEPTH(PKT_FIFO_DEPTH)) u_hdr_fifo (
    .clk, .rst, .s_data({ucl_d, hdr_d}), .s_valid(hdr_push), .s_ready(hdr_fifo_room),
    .m_data({m_hdr_ucl, m_hdr}), .m_valid(m_hdr_valid), .m_ready(m_hdr_ready), .level(l0));
  hm_fifo #(.WIDTH($bits(hm_piece_t)), .DEPTH(PKT_FIFO_DEPTH)) u_pc_fifo (
    .clk, .rst, .s_data(pc_d), .s_valid(pc_push), .s_ready(pc_room),
    .m_data(m_pc), .m_valid(m_pc_valid), .m_ready(m_pc_ready), .level(l1));
  hm_fifo #(.WIDTH(DATA_WIDTH + KEEP_WIDTH + 1), .DEPTH(16)) u_inl_fifo (
    .clk, .rst, .s_data({inl_last_d, inl_keep_d, inl_data_d}), .s_valid(inl_push), .s_ready(inl_room),
    .m_data({m_inl_tlast, m_inl_tkeep, m_inl_tdata}), .m_valid(m_inl_tvalid), .m_ready(m_inl_tready),
    .level(l2));
  always_ff @(posedge clk) begin
    if (rst) m_sent_made <= '0;
    else if (sent_push && sent_room) m_sent_made <= m_sent_made + 1'b1;
  end
  hm_fifo #(.WIDTH($bits(hm_sent_t)), .DEPTH(16)) u_sent_fifo (
    .clk, .rst, .s_data(sent_d), .s_valid(sent_push), .s_ready(sent_room),
    .m_data(m_sent), .m_valid(m_sent_valid), .m_ready(m_sent_ready), .level(l3));

  // ---------------------------------------------------------------------------------------
  // FSM
  // ---------------------------------------------------------------------------------------
  typedef enum logic [4:0] {
    S_IDLE, S_CTL, S_LOAD, S_EVAL, S_WAITW, S_DECODE, S_CHECK, S_START,
    S_SEEK, S_PKT, S_PIECE, S_INL, S_WEND, S_SAVE, S_CMD, S_CMD2
  } state_t;
  state_t state_q;

  logic [QW-1:0]      q_q;
  hm_qp_ctx_t         ctx_q, ctx_rd;

  // the pacer's answer for the QP served in the previous cycle
  logic [QW-1:0]      rlq_q;
  logic               paused;
  always_ff @(posedge clk) rlq_q <= q_q;
  assign m_rl_qpn = 16'(q_q);
  // the QP's priority: its VLAN PCP, else DSCP / 8 (the usual DSCP-to-priority map)
  assign paused   = rl_pause[q_q] || (rl_hold && rlq_q == q_q) ||
                    pfc_paused[ctx_q.vlan_valid ? ctx_q.vlan_pcp : ctx_q.dscp[5:3]];

  // the packet committed, for the DCQCN pacer and byte counter: frame bytes without FCS
  // (Ethernet 14, VLAN 4, IPv4 20 / IPv6 40, UDP 8, BTH and extension headers, payload, ICRC 4)
  hm_op_info_t  txr_info;
  logic [5:0]   txr_hlen;
  assign txr_info = hm_op_info(hdr_d.opcode);
  assign txr_hlen = txr_info.hdr_len;
  logic unused_txr;
  assign unused_txr = ^txr_info;
  assign m_txr_valid = hdr_push;
  assign m_txr_qpn   = 16'(q_q);
  assign m_txr_bytes = 16'(26 + (hdr_d.ipv6 ? 40 : 20) + (hdr_d.vlan_valid ? 4 : 0)) + 16'(txr_hlen) +
                       hdr_d.payload_len;

  dyn_t               dyn_rd, dyn_rd_q;
  logic [15:0]        pi_q, pi_rd, head_q, shw_q;
  logic [3:0]         rd_out_q;
  logic               blocked_q;       // stopped at a READ / atomic by max_rd_atomic
  hm_rq_cmd_t         cmd_q;
  logic [31:0]        off_q;
  logic [23:0]        psn_q;
  // the window (HM_WIN_* in hm_pkg): a packet goes only while its PSN is before the limit;
  // the last one before it asks for an ACK (the completer then moves the limit)
  logic [23:0]        lim_q, lim1_q;   // the limit, and the limit minus one
  logic               win_ok, win_edge;
  assign win_ok   = !hm_psn_ge(psn_q, lim_q);
  assign win_edge = psn_q == lim1_q;
  logic [WQE_MAX*8-1:0] wqe_q;
  logic [15:0]        pkts_q;          // packets this quantum
  // decoded WQE
  hm_sq_wqe_hdr_t     w;
  logic [7:0]         status_q;
  logic               inl_q, sge_first_q;
  logic [3:0]         nsge_q;
  logic [4:0]         cj_q, cr_q;      // checks issued / answered
  logic               cerr_q;
  logic [36:0]        csum_q;
  // payload cursor
  logic [3:0]         sj_q;
  logic [31:0]        soff_q;
  logic [12:0]        prem_q;          // payload bytes of the current packet still to cut
  logic [31:0]        seek_q;
  logic [2:0]         ib_q;            // inline beat

  assign w = hm_sq_wqe_hdr_t'(wqe_q[255:0]);

  // the read-ahead list of next-turn reads (declared here: used below before its logic)
  typedef struct packed {
    logic [QW-1:0] qp;
    logic [15:0]   idx;                   // its first WQE
    logic [15:0]   n;                     // WQEs read
    logic [31:0]   b0;                    // its first beat in the ring
  } la_t;
  localparam int LW = $clog2(LA_DEPTH);
  la_t             ls_mem [LA_DEPTH];
  logic [LW:0]     ls_wr_q, ls_rd_q;      // list pointers (one bit more than the index)
  logic            ls_drop_q;             // every entry's WQEs are dropped
  logic            ls_any, ls_full, ls_ok; // non-empty; full; non-empty with usable WQEs
  logic            ls_push, ls_pop;
  la_t             lh, cur_q;             // the list's head; the entry the turn started from
  logic            cur_v_q;               // the turn started from a usable entry
  logic            others;                // other turns wait (FIFO or list)
  // ctx/dyn/pi reads for the QP at the head of the active FIFO (or of the list, when a turn
  // starts from it)
  logic [QW-1:0] rd_q;
  assign rd_q = (s_cmd_valid && !s_ctl_valid && !s_err_valid) ? QW'(s_cmd.qpn) :
                (state_q == S_IDLE && ls_any) ? lh.qp : af_data;
  logic [QW-1:0] rd_prev_q;               // the QP whose entries ctx_rd / dyn_rd / pi_rd hold
  always_ff @(posedge clk) begin
    ctx_rd <= ctx_mem[rd_q];
    dyn_rd <= dyn_mem[rd_q];
    pi_rd  <= pi_mem[rd_q];
    rd_prev_q <= rd_q;
  end

  // derived per-QP values
  logic [3:0]  lpmtu;                   // log2 path MTU
  logic [12:0] pmtu;
  logic [3:0]  lstride;                 // log2 WQE size
  logic [4:0]  max_sge;
  logic [15:0] ring_mask;
  assign lpmtu     = 4'd7 + 4'(ctx_q.pmtu);
  assign pmtu      = 13'd1 << lpmtu;
  assign lstride   = 4'd6 + 4'(ctx_q.sq_log_stride);
  assign max_sge   = (5'd4 << ctx_q.sq_log_stride) - 5'd2;
  assign ring_mask = 16'((17'd1 << ctx_q.sq_log_size) - 17'd1);

  // ---------------------------------------------------------------------------------------
  // WQE prefetch: reads of up to FETCH_BYTES into the ring while the QP is served. Beat
  // counters are absolute (they wrap together); beats of reads issued before the current
  // turn (below skip_q) are dropped on arrival. A read's beats become readable (cmt_q) when
  // its last beat is in; a bus error marks beats from the read's first one (err_from_q).
  // ---------------------------------------------------------------------------------------
  logic          serving, serving_q;      // a QP is being served (its WQEs may be fetched)
  logic          xfer;                    // the assembled WQE moves to the decoder
  logic [15:0]   fx_q;                    // next WQE to fetch
  logic [31:0]   iss_q, rcv_q, cmt_q, rda_q, skip_q, rq_first_q, err_from_q;
  logic          err_v_q;
  logic [3:0]    lbpw;                    // log2 beats per WQE
  logic [15:0]   f_pend, f_wrap, f_room, f_quant, f_n;
  logic [31:0]   f_free;
  logic [15:0]   fslot;                   // ring slot of fx_q
  assign fslot = fx_q & ring_mask;
  assign serving = state_q == S_WAITW || state_q == S_DECODE || state_q == S_CHECK ||
                   state_q == S_START || state_q == S_SEEK || state_q == S_PKT ||
                   state_q == S_PIECE || state_q == S_INL || state_q == S_WEND;
  assign lbpw    = lstride > 4'(LKW) ? lstride - 4'(LKW) : 4'd0;
  always_comb begin
    f_pend  = pi_q - fx_q;
    f_wrap  = 16'((17'd1 << ctx_q.sq_log_size) - 17'(fslot));
    f_free  = 32'(BUF_BEATS) - (iss_q - rda_q);
    f_room  = 16'(f_free >> lbpw);
    f_quant = (others && 16'(QUANTUM_PKTS) > fx_q - head_q) ? 16'(QUANTUM_PKTS) - (fx_q - head_q) :
              others ? 16'd0 : 16'hFFFF;
    f_n     = 16'(FETCH_BYTES >> lstride);
    if (f_pend < f_n) f_n = f_pend;
    if (f_wrap < f_n) f_n = f_wrap;
    if (f_room < f_n) f_n = f_room;
    if (f_quant < f_n) f_n = f_quant;
  end
  // next-turn reads (see the header): the QP at the head of the active FIFO, whose entries
  // were read in the previous cycle, with WQEs posted and in RTS; what fits (its stride, ring
  // end, a read's size, a quantum, the ring's free beats). Each read issued takes its QP out
  // of the FIFO into the read-ahead list (ls_*), in FIFO order; turns start from the list's
  // head before the FIFO's (the QP stays marked queued until its turn starts). The list is
  // either all usable or all dropped (ls_drop_q): dropped entries are still turns to serve,
  // whose WQEs are fetched as usual; no read is added until the list has drained.
  assign ls_any  = ls_wr_q != ls_rd_q;
  assign ls_full = ls_wr_q == {~ls_rd_q[LW], ls_rd_q[LW-1:0]};
  assign ls_ok   = ls_any && !ls_drop_q;
  assign lh      = ls_mem[ls_rd_q[LW-1:0]];
  assign others  = af_valid || ls_any;
  logic          la_go;                   // a next-turn read is issued now (instead of a read of the QP served)
  logic          la_hit;                  // the turn starting (S_LOAD) has its WQEs in the ring
  logic [3:0]    la_lstride, la_lbpw;
  logic [15:0]   la_mask, la_slot, la_pend, la_wrap, la_room, la_n;
  always_comb begin
    la_lstride = 4'd6 + 4'(ctx_rd.sq_log_stride);
    la_lbpw    = la_lstride > 4'(LKW) ? la_lstride - 4'(LKW) : 4'd0;
    la_mask    = 16'((17'd1 << ctx_rd.sq_log_size) - 17'd1);
    la_slot    = dyn_rd.head & la_mask;
    la_pend    = pi_rd - dyn_rd.head;
    la_wrap    = 16'((17'd1 << ctx_rd.sq_log_size) - 17'(la_slot));
    la_room    = 16'(f_free >> la_lbpw);
    la_n       = 16'(FETCH_BYTES >> la_lstride);
    if (la_n > 16'(QUANTUM_PKTS)) la_n = 16'(QUANTUM_PKTS);
    if (la_pend < la_n) la_n = la_pend;
    if (la_wrap < la_n) la_n = la_wrap;
    if (la_room < la_n) la_n = la_room;
  end
  // (not when an error mark older than the entry's first beat stands: the single mark would
  // hide a failure of the entry's own read, which the turn then fetches again itself)
  assign la_hit = cur_v_q && cur_q.qp == q_q && dyn_rd.head == cur_q.idx &&
                  !(err_v_q && $signed(err_from_q - cur_q.b0) < 0);
  // (the QP served fetches nothing more: all it sends this turn is read, or usable entries
  // are in the ring behind it)
  assign la_go = serving && (f_n == '0 || ls_ok) && !ls_drop_q && !ls_full && af_valid && rd_prev_q == af_data &&
                 af_data != q_q && ctx_rd.state == HM_QPS_RTS && la_n != '0;
  logic ls_drop_now;
  assign ls_push = m_wrd_valid && m_wrd_ready && la_go;
  assign ls_pop  = state_q == S_IDLE && !s_ctl_valid && !s_err_valid && !s_cmd_valid && ls_any;
  // a context write may give any QP a new ring (its head and producer index start over); a
  // turn that does not start at its entry's WQEs, or that ends with a failed read in the ring
  // (the one error mark cannot tell whose read failed), drops the rest
  assign ls_drop_now = state_q == S_CTL || (state_q == S_LOAD && !la_hit) || (serving_q && !serving && err_v_q);
  always_ff @(posedge clk) begin
    if (ls_push) ls_mem[ls_wr_q[LW-1:0]] <= '{qp: af_data, idx: dyn_rd.head, n: la_n, b0: iss_q};
    if (rst) begin
      ls_wr_q <= '0; ls_rd_q <= '0; ls_drop_q <= 1'b0; cur_v_q <= 1'b0;
    end else begin
      if (ls_push) ls_wr_q <= ls_wr_q + 1'b1;
      if (ls_pop) begin
        ls_rd_q <= ls_rd_q + 1'b1;
        cur_q   <= lh;
        cur_v_q <= !ls_drop_q && !ls_drop_now;
      end else if (state_q == S_IDLE && !s_ctl_valid && !s_err_valid && !s_cmd_valid && af_valid) cur_v_q <= 1'b0;
      if (ls_drop_now) ls_drop_q <= 1'b1;
      if (!ls_any && !ls_push) ls_drop_q <= 1'b0;
      if (ls_pop && ls_rd_q + 1'b1 == ls_wr_q && !ls_push) ls_drop_q <= 1'b0;
    end
  end

  // a pushed WQE instead of a read
  logic         ph_hit, inj;
  logic [HM_PUSH_BYTES*8-1:0] ph_data;
  logic [31:0]  unused_pushed;
  hm_wqe_push #(.SLOTS(4), .PUSH_BYTES(HM_PUSH_BYTES)) u_push (
    .clk, .rst,
    .s_qpn(s_push_qpn), .s_data(s_push_data), .s_valid(s_push_valid), .s_ready(s_push_ready),
    .i_db(db_take && db_ok), .i_db_qpn(s_db.qpn), .i_db_pi(s_db.pi),
    .i_inval(state_q == S_CTL), .i_inval_qpn(16'(s_ctl_cmd.index)),
    .i_qpn(la_go ? 16'(af_data) : 16'(q_q)), .i_idx(la_go ? dyn_rd.head : fx_q), .o_hit(ph_hit),
    .o_data(ph_data), .i_take(inj),
    .i_fetch(m_wrd_valid && m_wrd_ready), .i_fetch_n(la_go ? la_n : f_n),
    .stat_pushed(unused_pushed), .stat_used(stat_push_used), .stat_dropped(stat_push_dropped));
  // (while usable next-turn reads are in the ring, the QP served fetches nothing more this
  // turn: the ring holds the reads in issue order)
  assign inj = KEEP_WIDTH == HM_PUSH_BYTES && serving && f_n != '0 && !ls_ok && iss_q == rcv_q && !s_wqe_tvalid &&
               ph_hit;
  assign m_wrd.addr   = la_go ? ctx_rd.sq_base + (64'(la_slot) << la_lstride) : ctx_q.sq_base + (64'(fslot) << lstride);
  assign m_wrd.len    = la_go ? 32'(la_n) << la_lstride : 32'(f_n) << lstride;
  assign m_wrd_valid  = (serving && f_n != '0 && !ls_ok && !inj) || la_go;
  assign s_wqe_tready = 1'b1;             // ring space was reserved when the read was issued

  logic [DATA_WIDTH-1:0] buf_mem [BUF_BEATS];
  logic [DATA_WIDTH-1:0] buf_rd;
  logic                  buf_err_q;       // the beat in buf_rd belongs to a failed read
  logic                  rd_v_q;          // buf_rd holds a beat not yet taken
  logic                  beat_take, re;
  logic                  drop_beat;
  assign drop_beat = $signed(rcv_q - skip_q) < 0;
  assign re        = serving && $signed(cmt_q - rda_q) > 0 && (!rd_v_q || beat_take) && !(ls_ok && rda_q == lh.b0);
  always_ff @(posedge clk) begin
    if (s_wqe_tvalid && !drop_beat) buf_mem[BW'(rcv_q)] <= s_wqe_tdata;
    else if (inj) buf_mem[BW'(rcv_q)] <= ph_data[DATA_WIDTH-1:0];
    if (re) buf_rd <= buf_mem[BW'(rda_q)];
  end

  // assembly of the next WQE (dw_q) from the ring
  logic [WQE_MAX*8-1:0] dw_q;
  logic [3:0]           dwc_q, dwc_eff;
  logic                 dw_full_q, dw_err_q;
  assign beat_take = rd_v_q && (!dw_full_q || xfer);
  assign dwc_eff   = xfer ? 4'd0 : dwc_q;

  always_ff @(posedge clk) begin
    if (rst) begin
      iss_q <= '0; rcv_q <= '0; cmt_q <= '0; rda_q <= '0; skip_q <= '0; rq_first_q <= '0;
      err_from_q <= '0; err_v_q <= 1'b0; rd_v_q <= 1'b0; serving_q <= 1'b0;
      dwc_q <= '0; dw_full_q <= 1'b0; dw_err_q <= 1'b0;
    end else begin
      serving_q <= serving;
      if (state_q == S_LOAD) begin
        // a turn starts at the head WQE, or after the WQEs a next-turn read brought (the
        // ring is reset below)
        fx_q   <= la_hit ? cur_q.idx + cur_q.n : dyn_rd.head;
      end
      if (ls_push) begin
        iss_q    <= iss_q + (32'(la_n) << la_lbpw);
      end else if (m_wrd_valid && m_wrd_ready) begin
        fx_q  <= fx_q + f_n;
        iss_q <= iss_q + (32'(f_n) << lbpw);
      end
      if (inj) begin
        // a one-WQE read that has arrived whole
        fx_q       <= fx_q + 16'd1;
        iss_q      <= iss_q + (32'd1 << lbpw);
        rcv_q      <= rcv_q + (32'd1 << lbpw);
        rq_first_q <= rcv_q + (32'd1 << lbpw);
        cmt_q      <= rcv_q + (32'd1 << lbpw);
      end
      if (s_wqe_tvalid) begin
        rcv_q <= rcv_q + 1'b1;
        if (s_wqe_tlast) begin
          rq_first_q <= rcv_q + 1'b1;
          cmt_q      <= rcv_q + 1'b1;
          if (s_wqe_tuser && !drop_beat && !err_v_q) begin
            err_v_q    <= 1'b1;
            err_from_q <= rq_first_q;
          end
        end
      end
      if (re) begin
        rda_q     <= rda_q + 1'b1;
        rd_v_q    <= 1'b1;
        buf_err_q <= err_v_q && $signed(rda_q - err_from_q) >= 0;
      end else if (beat_take) rd_v_q <= 1'b0;
      if (beat_take) begin
        // beats past the largest WQE this block holds are not kept (a ring of a larger stride
        // is refused at decode, below)
        if ((32'(dwc_eff) << LKW) < 32'(WQE_MAX)) dw_q[int'(dwc_eff) * DATA_WIDTH +: DATA_WIDTH] <= buf_rd;
        dw_err_q  <= (xfer ? 1'b0 : dw_err_q) | buf_err_q;
        dwc_q     <= dwc_eff + 1'b1;
        dw_full_q <= dwc_eff + 1'b1 == 4'(1 << lbpw);
      end else if (xfer) begin
        dwc_q     <= '0;
        dw_full_q <= 1'b0;
        dw_err_q  <= 1'b0;
      end
      // the turn is over: drop what is still in flight, empty the ring and the assembly;
      // next-turn reads stay (unless a read failed: the one error mark cannot tell whose,
      // so the list is dropped above)
      if (serving_q && !serving) begin
        if (ls_ok && !err_v_q) begin
          skip_q  <= lh.b0;
          rda_q   <= lh.b0;
        end else begin
          skip_q  <= iss_q;
          rda_q   <= iss_q;
          err_v_q <= 1'b0;
        end
        rd_v_q    <= 1'b0;
        dwc_q     <= '0;
        dw_full_q <= 1'b0;
        dw_err_q  <= 1'b0;
      end
      // a turn that does not start with a next-turn read's WQEs: drop what is still in the
      // ring or in flight (after the error mark above: a failed read of an earlier turn ending
      // now leaves no mark); one that does starts at its first beat (entries before it whose
      // turns ended unserved are skipped, with an error mark in them)
      if (state_q == S_LOAD && !la_hit) begin
        skip_q  <= iss_q;
        rda_q   <= iss_q;
        err_v_q <= 1'b0;
      end else if (state_q == S_LOAD) begin
        skip_q  <= cur_q.b0;
        rda_q   <= cur_q.b0;
        // a skipped entry's read that fails in this very cycle leaves no mark (later beats
        // below the entry are dropped, with their errors)
        if (s_wqe_tvalid && s_wqe_tlast && s_wqe_tuser && !drop_beat && !err_v_q &&
            $signed(rq_first_q - cur_q.b0) < 0) err_v_q <= 1'b0;
      end
    end
  end

  // decode of the assembled WQE on its way to the decoder (registered at xfer)
  hm_sq_wqe_hdr_t dwh;
  hm_sge_t        dw_sge0, dw_sge1;
  assign dwh     = hm_sq_wqe_hdr_t'(dw_q[255:0]);
  assign dw_sge0 = hm_sq_sge(dw_q, 5'd0);
  assign dw_sge1 = hm_sq_sge(dw_q, 5'd1);
  logic [7:0] dd_st;
  logic       dd_inl, dd_atom, dd_sw, dd_fast;
  logic [3:0] dd_nsge;
  always_comb begin
    logic d_send, d_write;
    d_send  = dwh.opcode == HM_WQE_OP_SEND || dwh.opcode == HM_WQE_OP_SEND_IMM || dwh.opcode == HM_WQE_OP_SEND_INV;
    d_write = dwh.opcode == HM_WQE_OP_WRITE || dwh.opcode == HM_WQE_OP_WRITE_IMM;
    dd_atom = hm_wqe_atomic(dwh.opcode);
    dd_sw   = d_send || d_write;
    dd_inl  = dwh.flags[2] && dd_sw;
    dd_st   = HM_CQE_ST_SUCCESS;
    // a stride beyond WQE_MAX (code 3, 512 bytes) is not supported: every WQE is refused
    // (UC: SEND, SEND with immediate, WRITE and WRITE with immediate only)
    if (dw_err_q || dwh.opcode >= HM_WQE_OP_COUNT || lstride > 4'($clog2(WQE_MAX)) ||
        (ctx_q.uc && !(d_write || dwh.opcode == HM_WQE_OP_SEND || dwh.opcode == HM_WQE_OP_SEND_IMM)))
      dd_st = HM_CQE_ST_LOC_QP_OP_ERR;
    else if (!dd_inl && !dd_atom && 5'(dwh.num_sge) > max_sge) dd_st = HM_CQE_ST_LOC_QP_OP_ERR;
    else if (!dd_inl && !dd_atom && dwh.num_sge > 8'd14) dd_st = HM_CQE_ST_LOC_QP_OP_ERR;
    else if (dd_inl && dwh.length > (32'd1 << lstride) - 32'd32) dd_st = HM_CQE_ST_LOC_QP_OP_ERR;
    else if (dd_atom && dwh.remote_addr[2:0] != 3'd0) dd_st = HM_CQE_ST_LOC_QP_OP_ERR;
    else if (dd_atom && (dwh.num_sge != 8'd1 || dw_sge1.len != 32'd8)) dd_st = HM_CQE_ST_LOC_LEN_ERR;
    else if (dwh.length > 32'h8000_0000) dd_st = HM_CQE_ST_LOC_LEN_ERR;
    dd_nsge = dd_inl ? 4'd0 : 4'(dwh.num_sge);
    // the fast path: a single-packet SEND/WRITE with one beat of inline data, one SGE that
    // covers the message, or nothing at all
    dd_fast = dd_st == HM_CQE_ST_SUCCESS && dd_sw && dwh.length <= 32'(pmtu) &&
              (dd_inl ? dwh.length <= 32'(KEEP_WIDTH) :
               dwh.num_sge == 8'd1 ? (dw_sge0.len == dwh.length && dwh.length != '0) :
               (dwh.num_sge == 8'd0 && dwh.length == '0));
  end

  // operation class of the decoded WQE
  logic is_send, is_write, is_read, is_atomic, has_imm, is_inv;
  assign is_send   = w.opcode == HM_WQE_OP_SEND || w.opcode == HM_WQE_OP_SEND_IMM || w.opcode == HM_WQE_OP_SEND_INV;
  assign is_write  = w.opcode == HM_WQE_OP_WRITE || w.opcode == HM_WQE_OP_WRITE_IMM;
  assign is_read   = w.opcode == HM_WQE_OP_READ;
  assign is_atomic = hm_wqe_atomic(w.opcode);
  assign has_imm   = w.opcode == HM_WQE_OP_SEND_IMM || w.opcode == HM_WQE_OP_WRITE_IMM;
  assign is_inv    = w.opcode == HM_WQE_OP_SEND_INV;

  hm_sge_t sge_c, sge_k, sge_s;
  assign sge_c = hm_sq_sge(wqe_q, 5'(cj_q[3:0]) + 5'(sge_first_q));
  assign sge_k = hm_sq_sge(wqe_q, 5'(sj_q) + 5'(sge_first_q));
  assign sge_s = hm_sq_sge(wqe_q, 5'd1);

  // a WQE started for the first time (not a retransmission), and the max_rd_atomic limit
  logic new_start, rd_block;
  assign new_start = head_q == shw_q;
  assign rd_block  = new_start && (is_read || is_atomic) && rd_out_q >= ctx_q.max_rd_atomic;

  // packet arithmetic at the current offset
  logic [31:0] rem;
  logic [12:0] plen;
  logic        last_pkt, first_pkt;
  logic [5:0]  kidx;
  logic [23:0] npsn_w;
  assign rem       = w.length - off_q;
  assign last_pkt  = rem <= 32'(pmtu);
  assign first_pkt = off_q == '0;
  assign plen      = last_pkt ? 13'(rem) : pmtu;
  assign kidx      = 6'(off_q >> lpmtu);
  // PSNs a READ request for the rest of the message reserves
  logic [23:0] rpk;
  assign rpk       = hm_pkts(rem, lpmtu);
  assign npsn_w    = hm_wqe_npsn(w.opcode, w.length, lpmtu);

  // immediate data is stored in network byte order (the WQE bytes are the wire bytes)
  logic [31:0] imm_wire;
  assign imm_wire = {w.imm[7:0], w.imm[15:8], w.imm[23:16], w.imm[31:24]};

  // header record of the packet at off_q
  always_comb begin
    logic [7:0] op;
    hdr_d = hm_av_hdr(hm_ctx_av(ctx_q, ecn_mask));
    hdr_d.psn        = psn_q;
    op = HM_OP_SEND_FIRST;
    if (is_send) begin
      if (first_pkt && last_pkt)  op = has_imm ? HM_OP_SEND_ONLY_IMM : is_inv ? HM_OP_SEND_ONLY_INV : HM_OP_SEND_ONLY;
      else if (first_pkt)         op = HM_OP_SEND_FIRST;
      else if (last_pkt)          op = has_imm ? HM_OP_SEND_LAST_IMM : is_inv ? HM_OP_SEND_LAST_INV : HM_OP_SEND_LAST;
      else                        op = HM_OP_SEND_MIDDLE;
      hdr_d.ackreq      = last_pkt || kidx[5:0] == 6'd63 || win_edge;
      hdr_d.payload_len = 16'(plen);
      if (last_pkt) begin
        hdr_d.se  = w.flags[1];
        hdr_d.imm = has_imm ? imm_wire : is_inv ? w.imm : 32'd0;
      end
    end else if (is_write) begin
      if (first_pkt && last_pkt)  op = has_imm ? HM_OP_WRITE_ONLY_IMM : HM_OP_WRITE_ONLY;
      else if (first_pkt)         op = HM_OP_WRITE_FIRST;
      else if (last_pkt)          op = has_imm ? HM_OP_WRITE_LAST_IMM : HM_OP_WRITE_LAST;
      else                        op = HM_OP_WRITE_MIDDLE;
      hdr_d.ackreq      = last_pkt || kidx[5:0] == 6'd63 || win_edge;
      hdr_d.payload_len = 16'(plen);
      if (first_pkt) begin
        hdr_d.va      = w.remote_addr;
        hdr_d.rkey    = w.rkey;
        hdr_d.dma_len = w.length;
      end
      if (last_pkt && has_imm) begin
        hdr_d.se  = w.flags[1];
        hdr_d.imm = imm_wire;
      end
    end else if (is_read) begin
      op            = HM_OP_READ_REQ;
      hdr_d.ackreq  = 1'b1;
      hdr_d.va      = w.remote_addr + 64'(off_q);
      hdr_d.rkey    = w.rkey;
      hdr_d.dma_len = rem;
    end else begin
      op             = w.opcode == HM_WQE_OP_CMP_SWAP ? HM_OP_CMP_SWAP : HM_OP_FETCH_ADD;
      hdr_d.ackreq   = 1'b1;
      hdr_d.va       = w.remote_addr;
      hdr_d.rkey     = w.rkey;
      hdr_d.compare  = w.opcode == HM_WQE_OP_CMP_SWAP ? wqe_q[256 +: 64] : 64'd0;
      hdr_d.swap_add = wqe_q[320 +: 64];
    end
    // UC: the same operation in the UC class (0x20-0x2B), never asking for an ACK
    hdr_d.opcode = ctx_q.uc ? (op | 8'h20) : op;
    if (ctx_q.uc) hdr_d.ackreq = 1'b0;
  end
  // (UC: where RC would ask for an ACK, a local one follows the packet's departure)
  assign ucl_d = '{uc: ctx_q.uc, ack: ctx_q.uc && (is_send || is_write) && (last_pkt || kidx[5:0] == 6'd63 || win_edge),
                   qpn: 16'(q_q)};

  // sent record
  always_comb begin
    sent_d           = '0;
    sent_d.qpn       = 16'(q_q);
    sent_d.wqe_idx   = head_q;
    sent_d.wr_id     = w.wr_id;
    sent_d.opcode    = w.opcode;
    sent_d.flags     = w.flags;
    sent_d.first_psn = psn_q;
    sent_d.npsn      = npsn_w;
    sent_d.len       = w.length;
    sent_d.status    = status_q;
  end

  // MR check request for SGE cj
  assign m_chk = '{key: sge_c.lkey, pd: ctx_q.pd, addr: sge_c.addr, len: 64'(sge_c.len),
                   need: (is_read || is_atomic) ? HM_MRN_LOCAL_WRITE : HM_MRN_LOCAL_READ};
  // The region of the last successful check is cached (key, PD, whether local write was
  // checked, bounds): an SGE inside it needs no table lookup. Any MR table change clears it.
  logic        rc_v_q, rc_lw_q;
  logic [31:0] rc_key_q, rc_pd_q;
  logic [63:0] rc_base_q, rc_end_q;
  logic        chk_lw, chk_hit;
  assign chk_lw  = is_read || is_atomic;
  assign chk_hit = rc_v_q && sge_c.lkey == rc_key_q && ctx_q.pd == rc_pd_q && (rc_lw_q || !chk_lw) &&
                   sge_c.addr >= rc_base_q && (65'(sge_c.addr) + 65'(sge_c.len)) <= 65'(rc_end_q);
  // a lookup goes out only with none outstanding, so its result belongs to sge_c's key
  assign m_chk_valid = state_q == S_CHECK && cj_q < 5'(nsge_q) && !chk_hit && cj_q == cr_q;
  assign s_res_ready = state_q == S_CHECK;
  logic [31:0] iss_key_q;          // key of the lookup in flight
  always_ff @(posedge clk) begin
    if (m_chk_valid && m_chk_ready) iss_key_q <= sge_c.lkey;
    if (rst || mr_changed) rc_v_q <= 1'b0;
    else if (state_q == S_CHECK && s_res_valid && s_res.ok) begin
      rc_v_q    <= 1'b1;
      rc_key_q  <= iss_key_q;
      rc_pd_q   <= ctx_q.pd;
      rc_lw_q   <= chk_lw;
      rc_base_q <= s_res.base;
      rc_end_q  <= s_res.limit;
    end
  end

  // fast path: the decoded WQE goes out whole this cycle (see the header comment); its SGE
  // (if any) must lie in the cached region, which needs no lookup
  logic        fast_q;             // the decoded WQE qualifies (static part)
  logic [64:0] sge0_end_q;         // end of its first SGE
  logic        fast_hit, fast_go, fast_more, f_pay;
  assign fast_hit  = rc_v_q && sge_c.lkey == rc_key_q && ctx_q.pd == rc_pd_q &&
                     sge_c.addr >= rc_base_q && sge0_end_q <= 65'(rc_end_q);
  assign f_pay     = w.length != '0;
  // (a WQE reaches the decoder only with its PSN inside the window: S_EVAL, S_WEND and
  // fast_more check it)
  assign fast_go   = state_q == S_DECODE && fast_q && off_q == '0 && new_start &&
                     ctx_q.state == HM_QPS_RTS && (inl_q || nsge_q == '0 || fast_hit) &&
                     sent_room && hdr_room && (!f_pay || pc_room) && (!(f_pay && inl_q) || inl_room);
  // a command (rewind, hold, READ done), a context write or an ERR event waits: the turn ends
  // at the next packet boundary so it is handled at once (a rewind must not wait for the
  // rest of a long queue of work)
  logic yield_now;
  assign yield_now = s_cmd_valid || s_ctl_valid || s_err_valid;
  // how far this turn may go: the producer index, or with a next-turn read issued, the WQEs
  // fetched before it
  logic [15:0] pi_eff;
  assign pi_eff = ls_ok ? fx_q : pi_q;
  // after a WQE: go on with the next one of this QP?
  assign fast_more = head_q + 1'b1 != pi_eff && (pkts_q + 1'b1 < 16'(QUANTUM_PKTS) || !others) &&
                     !paused && !yield_now && ctx_q.state == HM_QPS_RTS && !qerr_cur && !win_edge;
  assign xfer      = dw_full_q && (state_q == S_WAITW || (fast_go && fast_more));

  // piece at the cursor
  logic [31:0] s_avail;
  logic [12:0] take;
  logic        has_pay, one_piece;
  assign s_avail = sge_k.len - soff_q;
  assign take    = s_avail < 32'(prem_q) ? 13'(s_avail) : prem_q;
  assign has_pay   = plen != '0 && !is_read && !is_atomic;
  assign one_piece = has_pay && !inl_q && s_avail >= 32'(plen);

  // inline beat
  logic [WQE_MAX*8-1:0]   inl_all;
  logic [31:0]            inl_left;
  assign inl_all  = {256'd0, wqe_q[WQE_MAX*8-1:256]};
  assign inl_left = w.length - 32'(ib_q) * KEEP_WIDTH;
  always_comb begin
    inl_data_d = inl_all[int'(ib_q) * DATA_WIDTH +: DATA_WIDTH];
    for (int b = 0; b < KEEP_WIDTH; b++) inl_keep_d[b] = 32'(b) < inl_left;
    inl_last_d = inl_left <= 32'(KEEP_WIDTH);
  end

  // per-state strobes (defaults first)
  always_comb begin
    s_ctl_ready  = 1'b0;
    pop          = 1'b0;
    pop_q        = af_data;
    af_ready     = 1'b0;
    act_fsm      = 1'b0;
    fsm_pi_clear = 1'b0;
    hdr_push     = 1'b0;
    pc_push      = 1'b0;
    inl_push     = 1'b0;
    sent_push    = 1'b0;
    pc_d         = '0;
    case (state_q)
      S_IDLE: begin
        if (init_q || s_ctl_valid || s_err_valid || s_cmd_valid) ;
        else if (ls_any) begin pop = 1'b1; pop_q = lh.qp; end
        else if (af_valid) begin pop = 1'b1; af_ready = 1'b1; end
      end
      S_CMD2: act_fsm = cmd_q.op != HM_RQC_HOLD;
      S_CTL: begin
        s_ctl_ready  = 1'b1;
        act_fsm      = 1'b1;
        fsm_pi_clear = (s_ctl_cmd.flags & HM_CTL_F_LOAD_SQ) != 0;
      end
      S_DECODE: if (fast_go) begin
        sent_push = 1'b1;
        hdr_push  = 1'b1;
        if (f_pay) begin
          pc_push  = 1'b1;
          inl_push = inl_q;
          pc_d     = '{inline_src: inl_q, last: 1'b1, len: 13'(w.length),
                       addr: inl_q ? 64'd0 : sge_k.addr};
        end
      end
      S_START: sent_push = sent_room && ((new_start && !rd_block) || status_q != HM_CQE_ST_SUCCESS);
      S_PKT: begin
        hdr_push = hdr_room && !((inl_q || one_piece) && !pc_room);
        // inline packets, and packets whose payload lies in the cursor's SGE, push their
        // single piece together with the header
        if (hdr_push && inl_q && has_pay) begin
          pc_push = 1'b1;
          pc_d    = '{inline_src: 1'b1, last: 1'b1, len: plen, addr: 64'd0};
        end else if (hdr_push && one_piece) begin
          pc_push = 1'b1;
          pc_d    = '{inline_src: 1'b0, last: 1'b1, len: plen, addr: sge_k.addr + 64'(soff_q)};
        end
      end
      S_PIECE: begin
        if (s_avail != 0 && pc_room) begin
          pc_push = 1'b1;
          pc_d    = '{inline_src: 1'b0, last: take == prem_q, len: take,
                      addr: sge_k.addr + 64'(soff_q)};
        end
      end
      S_INL: inl_push = inl_room;
      S_SAVE: begin
        act_fsm = !qerr_cur && !blocked_q && win_ok && ((ctx_q.state == HM_QPS_RTS && head_q != pi_q) ||
                  (off_q != '0 && (ctx_q.state == HM_QPS_RTS || ctx_q.state == HM_QPS_SQD)));
      end
      default: ;
    endcase
    // a next-turn read takes its QP out of the active FIFO (it stays marked queued)
    if (ls_push) af_ready = 1'b1;
  end
  assign act_fsm_q = state_q == S_CTL ? QW'(s_ctl_cmd.index) : state_q == S_CMD2 ? QW'(cmd_q.qpn) : q_q;
  assign s_cmd_ready = state_q == S_IDLE && !init_q && !s_ctl_valid && !s_err_valid;

  hm_qp_ctx_t ctl_ctx;
  assign ctl_ctx = hm_qp_ctx_t'(s_ctl_data[CTXW-1:0]);

  always_ff @(posedge clk) begin
    // context writes
    if (state_q == S_CTL) begin
      ctx_mem[QW'(s_ctl_cmd.index)] <= ctl_ctx;
      if ((s_ctl_cmd.flags & HM_CTL_F_LOAD_SQ) != 0) begin
        dyn_mem[QW'(s_ctl_cmd.index)] <= '{head: 16'd0, off: 32'd0, psn: ctl_ctx.sq_psn,
                                           shw: 16'd0, rd_out: 4'd0,
                                           lim: ctl_ctx.sq_psn + 24'(HM_WIN_MAX)};
        pi_mem[QW'(s_ctl_cmd.index)]  <= 16'd0;
      end
    end
    if (state_q == S_SAVE) dyn_mem[q_q] <= '{head: head_q, off: off_q, psn: psn_q, shw: shw_q, rd_out: rd_out_q,
                                             lim: lim_q};
    if (state_q == S_CMD2) begin
      dyn_t d;
      d = dyn_rd_q;
      case (cmd_q.op)
        HM_RQC_REWIND: begin d.head = cmd_q.idx; d.off = cmd_q.off; d.psn = cmd_q.psn; d.lim = cmd_q.lim; end
        HM_RQC_WIN: d.lim = cmd_q.lim;
        HM_RQC_RD_DONE: if (d.rd_out != '0) d.rd_out = d.rd_out - 1'b1;
        HM_RQC_CLAMP: if (16'(cmd_q.idx - d.head) != 16'd0 && 16'(cmd_q.idx - d.head) < 16'h8000) begin
          d.head = cmd_q.idx; d.off = 32'd0; d.psn = cmd_q.psn;
        end
        default: ;
      endcase
      dyn_mem[QW'(cmd_q.qpn)] <= d;
    end
  end

  assign s_err_ready = state_q == S_IDLE && !init_q && !s_ctl_valid;
  always_ff @(posedge clk) if (state_q == S_CMD) dyn_rd_q <= dyn_rd;
  // The per-QP flags in distributed RAM (hm_qp_bits: rows of 64 bits written one bit at a
  // time), read combinationally as the flip-flop vectors they replace were (4,096 flip-flops
  // per flag, written from several ports and read at any QP, cost tens of thousands of LUTs).
  // Each table has one write port: queued is a toggle pair, u_ins flipped by the activations
  // and u_emt set equal to it by the pops (queued = ins ^ emt); ERR and hold are each written
  // from FSM states that exclude one another (the error events are taken in S_IDLE, ERR is
  // cleared in S_CTL and set in S_START; hold is cleared in S_CTL and set or cleared in
  // S_CMD2). After reset every QP's flags are cleared, a row of 64 QPs a cycle (NUM_QPS / 64
  // cycles), while the FSM waits in S_IDLE and no doorbell, error or command is taken.
  logic            ins_act, ins_pop, emt_act, qerr_we, qerr_wd, hold_we, hold_wd;
  logic [QW-1:0]   qerr_wa, hold_wa;
  logic [3:0]      fl_busy;
  hm_qp_bits #(.NUM(NUM_QPS), .RD(2)) u_ins (
    .clk, .rst, .o_busy(fl_busy[0]), .i_we(act_push), .i_waddr(act_q), .i_wbit(!ins_act),
    .i_raddr({pop_q, act_q}), .o_rbit({ins_pop, ins_act}));
  hm_qp_bits #(.NUM(NUM_QPS), .RD(1)) u_emt (
    .clk, .rst, .o_busy(fl_busy[1]), .i_we(pop), .i_waddr(pop_q), .i_wbit(ins_pop),
    .i_raddr(act_q), .o_rbit(emt_act));
  hm_qp_bits #(.NUM(NUM_QPS), .RD(1)) u_qerr (
    .clk, .rst, .o_busy(fl_busy[2]), .i_we(qerr_we), .i_waddr(qerr_wa), .i_wbit(qerr_wd),
    .i_raddr(q_q), .o_rbit(qerr_cur));
  hm_qp_bits #(.NUM(NUM_QPS), .RD(1)) u_hold (
    .clk, .rst, .o_busy(fl_busy[3]), .i_we(hold_we), .i_waddr(hold_wa), .i_wbit(hold_wd),
    .i_raddr(q_q), .o_rbit(hold_cur));
  assign queued_act = ins_act ^ emt_act;
  assign init_q     = |fl_busy;
  always_comb begin
    qerr_we = 1'b0;
    qerr_wd = 1'b1;
    qerr_wa = q_q;
    if (state_q == S_CTL) begin
      qerr_we = 1'b1;
      qerr_wd = 1'b0;
      qerr_wa = QW'(s_ctl_cmd.index);
    end else if (s_err_valid && s_err_ready && (s_err_qpn >> QW) == '0) begin
      qerr_we = 1'b1;
      qerr_wa = QW'(s_err_qpn);
    end else if (state_q == S_START && status_q != HM_CQE_ST_SUCCESS && sent_room) begin
      qerr_we = 1'b1;
    end
    hold_we = state_q == S_CTL || (state_q == S_CMD2 && (cmd_q.op == HM_RQC_HOLD || cmd_q.op == HM_RQC_REWIND));
    hold_wd = state_q == S_CMD2 && cmd_q.op == HM_RQC_HOLD;
    hold_wa = state_q == S_CTL ? QW'(s_ctl_cmd.index) : QW'(cmd_q.qpn);
  end
  always_ff @(posedge clk) begin
    if (rst) begin
      state_q <= S_IDLE;
      stats   <= '0;
      m_qpc_valid <= 1'b0;
    end else begin
      m_qpc_valid <= 1'b0;
      m_qpc       <= '{qpn: 16'(q_q), mask: '0};
      if (db_take && !db_ok) stats.db_bad <= stats.db_bad + 1'b1;
      case (state_q)
        S_IDLE: begin
          if (init_q) ;
          else if (s_ctl_valid) state_q <= S_CTL;
          else if (s_err_valid) ;
          else if (s_cmd_valid) begin
            cmd_q   <= s_cmd;
            state_q <= ((s_cmd.qpn >> QW) == '0) ? S_CMD : S_IDLE;
          end
          else if (ls_any) begin
            q_q     <= lh.qp;
            state_q <= S_LOAD;
          end
          else if (af_valid) begin
            q_q     <= af_data;
            state_q <= S_LOAD;
          end
        end
        S_CTL: state_q <= S_IDLE;
        S_CMD: state_q <= S_CMD2;
        S_CMD2: state_q <= S_IDLE;
        S_LOAD: begin
          ctx_q   <= ctx_rd;
          head_q  <= dyn_rd.head;
          off_q   <= dyn_rd.off;
          psn_q   <= dyn_rd.psn;
          shw_q   <= dyn_rd.shw;
          rd_out_q <= dyn_rd.rd_out;
          lim_q   <= dyn_rd.lim;
          lim1_q  <= dyn_rd.lim - 24'd1;
          blocked_q <= 1'b0;
          pi_q    <= pi_rd;
          pkts_q  <= '0;
          state_q <= S_EVAL;
        end
        S_EVAL: begin
          logic ok;
          ok = (ctx_q.state == HM_QPS_RTS ||
                (ctx_q.state == HM_QPS_SQD && off_q != '0)) && !qerr_cur && !hold_cur;
          if (!ok || pi_q == head_q) state_q <= S_IDLE;      // nothing to do, not requeued
          // at the window's limit: not requeued, the completer's WIN or REWIND requeues it
          else if (!win_ok) state_q <= S_IDLE;
          // requeued untouched; a waiting command (a CLAMP past WQEs that completed) goes first
          else if (paused || yield_now) state_q <= S_SAVE;
          else state_q <= S_WAITW;
        end
        // the next WQE is being fetched and assembled; xfer moves it to the decoder
        S_WAITW: if (dw_full_q) state_q <= S_DECODE;
        S_DECODE: begin
          if (fast_go) begin
            // sent whole this cycle (header, piece, sent record)
            stats.wqes <= stats.wqes + 1'b1;
            stats.pkts <= stats.pkts + 1'b1;
            m_qpc_valid <= 1'b1;
            m_qpc.mask[hm_pkg::HM_QPC_REQ_PKTS_TX] <= 1'b1;
            shw_q     <= shw_q + 1'b1;
            head_q    <= head_q + 1'b1;
            psn_q     <= psn_q + 24'd1;
            pkts_q    <= pkts_q + 1'b1;
            if (!fast_more) state_q <= S_SAVE;
            else if (!dw_full_q) state_q <= S_WAITW;
          end else if (!fast_q) begin
            state_q <= status_q != HM_CQE_ST_SUCCESS ? S_START : S_CHECK;
          end else if (!(off_q == '0 && new_start && ctx_q.state == HM_QPS_RTS &&
                         (inl_q || nsge_q == '0 || fast_hit))) begin
            state_q <= S_CHECK;       // eligible, but not now: the general path
          end else if (yield_now) begin
            // waiting for room (the sent-record FIFO the completer drains) while a command
            // waits: the completer may be waiting for this FSM to take it, so the turn ends
            // here, nothing of the WQE sent
            state_q <= S_SAVE;
          end
        end
        S_CHECK: begin
          if (m_chk_valid && m_chk_ready) begin
            cj_q   <= cj_q + 1'b1;
            csum_q <= csum_q + 37'(sge_c.len);
          end else if (cj_q < 5'(nsge_q) && chk_hit && cj_q == cr_q) begin
            // cached region: checked here, no lookup
            cj_q   <= cj_q + 1'b1;
            cr_q   <= cr_q + 1'b1;
            csum_q <= csum_q + 37'(sge_c.len);
          end
          if (s_res_valid) begin
            cr_q <= cr_q + 1'b1;
            if (!s_res.ok) cerr_q <= 1'b1;
          end
          if (cr_q == 5'(nsge_q)) begin
            if (!inl_q && !is_atomic && csum_q != 37'(w.length)) status_q <= HM_CQE_ST_LOC_QP_OP_ERR;
            else if (cerr_q) status_q <= HM_CQE_ST_LOC_PROT_ERR;
            state_q <= S_START;
          end
        end
        S_START: begin
          if (status_q == HM_CQE_ST_SUCCESS && rd_block) begin
            // max_rd_atomic READs / atomics outstanding: wait for RD_DONE (which reactivates)
            blocked_q <= 1'b1;
            state_q   <= S_SAVE;
          end else if (sent_room || (!new_start && status_q == HM_CQE_ST_SUCCESS)) begin
            if (status_q != HM_CQE_ST_SUCCESS) begin
              stats.local_err <= stats.local_err + 1'b1;
              ctx_q.state    <= HM_QPS_ERR;
              state_q        <= S_IDLE;               // stopped; the completer flushes
            end else begin
              if (new_start) begin
                stats.wqes <= stats.wqes + 1'b1;
                shw_q     <= shw_q + 1'b1;
                if (is_read || is_atomic) rd_out_q <= rd_out_q + 1'b1;
              end
              sj_q    <= '0;
              soff_q  <= '0;
              seek_q  <= off_q;
              state_q <= (first_pkt || inl_q || is_read || is_atomic) ? S_PKT : S_SEEK;
            end
          end else if (yield_now) begin
            // no room for the sent record and a command waits (see S_DECODE): nothing of the
            // WQE was started, the turn ends
            state_q <= S_SAVE;
          end
        end
        S_SEEK: begin
          if (seek_q >= sge_k.len && sj_q != 4'd15) begin
            seek_q <= seek_q - sge_k.len;
            sj_q   <= sj_q + 1'b1;
          end else begin
            soff_q  <= seek_q;
            state_q <= S_PKT;
          end
        end
        S_PKT: begin
          if (hdr_push) begin
            stats.pkts <= stats.pkts + 1'b1;
            m_qpc_valid <= 1'b1;
            m_qpc.mask[hm_pkg::HM_QPC_REQ_PKTS_TX] <= 1'b1;
            pkts_q    <= pkts_q + 1'b1;
            psn_q     <= psn_q + (is_read ? rpk : 24'd1);
            prem_q    <= plen;
            ib_q      <= '0;
            if (is_read || is_atomic || plen == '0) state_q <= S_WEND;
            else if (inl_q) state_q <= S_INL;
            else if (one_piece) begin
              // the piece went out with the header: advance the cursor and the message
              if (32'(plen) == s_avail) begin sj_q <= sj_q + 1'b1; soff_q <= '0; end
              else soff_q <= soff_q + 32'(plen);
              off_q <= off_q + 32'(plen);
              if (last_pkt) state_q <= S_WEND;
              else if ((pkts_q + 1'b1 >= 16'(QUANTUM_PKTS) && others) || paused || yield_now || win_edge) state_q <= S_SAVE;
              else state_q <= S_PKT;
            end
            else state_q <= S_PIECE;
          end
        end
        S_PIECE: begin
          if (s_avail == '0) begin
            if (sj_q != 4'd15) sj_q <= sj_q + 1'b1;
            soff_q <= '0;
          end else if (pc_room) begin
            prem_q <= prem_q - take;
            if (32'(take) == s_avail) begin
              sj_q   <= sj_q + 1'b1;
              soff_q <= '0;
            end else begin
              soff_q <= soff_q + 32'(take);
            end
            if (take == prem_q) begin
              off_q <= off_q + 32'(plen);
              if (last_pkt) state_q <= S_WEND;
              else if ((pkts_q >= 16'(QUANTUM_PKTS) && others) || paused || yield_now || !win_ok) state_q <= S_SAVE;
              else state_q <= S_PKT;
            end
          end
        end
        S_INL: begin
          if (inl_room) begin
            ib_q <= ib_q + 1'b1;
            if (inl_last_d) state_q <= S_WEND;
          end
        end
        S_WEND: begin
          head_q <= head_q + 1'b1;
          off_q  <= '0;
          if (head_q + 1'b1 != pi_eff && (pkts_q < 16'(QUANTUM_PKTS) || !others) && !paused && !yield_now &&
              ctx_q.state == HM_QPS_RTS && !qerr_cur && win_ok)
            state_q <= S_WAITW;
          else
            state_q <= S_SAVE;
        end
        S_SAVE: state_q <= S_IDLE;
        default: state_q <= S_IDLE;
      endcase
      // doorbells for the QP being served raise its producer index at once
      if (db_take && db_ok && QW'(s_db.qpn) == q_q && state_q != S_IDLE) pi_q <= s_db.pi;
      // the assembled WQE enters the decoder, decoded on the way
      if (xfer) begin
        wqe_q       <= dw_q;
        status_q    <= dd_st;
        inl_q       <= dd_inl;
        sge_first_q <= dd_atom;
        nsge_q      <= dd_nsge;
        fast_q      <= dd_fast;
        sge0_end_q  <= 65'(dw_sge0.addr) + 65'(dw_sge0.len);
        cj_q        <= '0;
        cr_q        <= '0;
        cerr_q      <= 1'b0;
        csum_q      <= '0;
        sj_q        <= '0;
        soff_q      <= '0;
        ib_q        <= '0;
        state_q     <= S_DECODE;
      end
    end
  end

  logic unused_ok;
  assign unused_ok = ^{unused_pushed, ph_data, l0, l1, l2, l3, af_level, af_in_ready, s_ctl_cmd, s_ctl_data, s_wqe_tdata,
                       csum_q, nsge_q, w, sge_k, sge_s, ctx_q, dwh, dw_sge0, dw_sge1};

  if (DATA_WIDTH != 256 && DATA_WIDTH != 512) begin : g_bad_width
    $error("hm_rc_req: DATA_WIDTH must be 256 or 512");
  end
  if ((1 << QW) != NUM_QPS || NUM_QPS < 2 || NUM_QPS > 65536) begin : g_bad_qps
    $error("hm_rc_req: NUM_QPS must be a power of two, 2..65536");
  end
  if ((1 << $clog2(WQE_BUF_BYTES)) != WQE_BUF_BYTES || WQE_BUF_BYTES < WQE_MAX) begin : g_bad_buf
    $error("hm_rc_req: WQE_BUF_BYTES must be a power of two of at least 256");
  end
endmodule
