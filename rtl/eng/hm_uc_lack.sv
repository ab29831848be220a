// UC local acknowledgement: UC has no ACKs on the wire, so a UC send WQE completes once its
// last packet has left the requester for the TX path with all of its payload (every byte
// read from host memory: its CQE can never tell the application to reuse a buffer that is
// still being read). This block watches the requester's port of the TX arbiter: each
// header taken there (s_fire, with its hm_ucl_t sideband) and each payload packet's last
// beat taken (s_tlast_fire; payloads follow their headers in order). When a marked UC packet
// has left (a message's last; also every 64th of a message and the one at the requester's
// window edge, as RC asks for ACKs there, so that a message longer than the window moves it),
// it becomes a local ACK for the completer (opcode ACK, the local QP as DestQP, the packet's
// PSN, syndrome ACK), which retires every WQE of the QP up to that PSN and moves the window
// as a received ACK would. A UC packet whose payload read failed (tuser on its last beat: the
// TX path aborts the frame, so the peer sees a gap) becomes a local NAK instead, whether marked
// or not (opcode ACK, syndrome NAK remote operational error, its PSN): the completer retires
// the WQEs before that PSN, completes the one holding it with LOC_PROT_ERR and stops the QP.
// A QP's pending NAK is never replaced by a newer ACK (it is handed over first).
//
// Three stages, none of which waits on the completer to take what the one before gives it
// (the completer may itself be waiting on the requester, which waits on this block's room):
//   1. headers in order (those with payload, and marked ones), a FIFO of DEPTH; an entry leaves
//      once a last beat has been taken for it (or at once without payload), with that beat's
//      error flag (a FIFO of them, never deeper than the headers); while it is full, s_room
//      holds the arbiter's port back;
//   2. per QP, the newest local ACK not yet handed over (ACKs are cumulative: a newer one
//      replaces it), in a table, and a FIFO of the QPs that have one (each at most once, so
//      NUM_QPS entries never overflow);
//   3. one QP's ACK read from the table, handed to the completer once every started-WQE
//      record the requester had made when its packet left (i_made, counted when the header was
//      taken) has reached the completer (i_sent_fire): the completer never judges an ACK
//      against a QP state that lacks its WQE (a record still in the completer's merge stage
//      is taken there with the ACK).
module hm_uc_lack
  import hm_pkg::*;
  import hm_eng_pkg::*;
#(
  // Headers whose payload, or whose turn, is still to come (power of two): at least the TX
  // arbiter's ORDER_DEPTH.
  parameter int DEPTH = 32,
  // QP table entries (power of two).
  parameter int NUM_QPS = 4096,
  // Derived.
  localparam int QW = $clog2(NUM_QPS)
) (
  input  logic         clk,
  input  logic         rst,

  // the requester's headers as the TX arbiter takes them
  input  hm_roce_hdr_t s_hdr,
  input  hm_ucl_t      s_ucl,
  input  logic         s_fire,
  output logic         s_room,
  // the last beat of a requester payload packet taken by the TX arbiter, and its tuser (the
  // payload could not be read: the frame is aborted)
  input  logic         s_tlast_fire,
  input  logic         s_tlast_err,
  // started-WQE records: made by the requester (a running count) and handed to the completer
  input  logic [15:0]  i_made,
  input  logic         i_sent_fire,

  // local ACK records (to the completer, beside the received responses)
  output hm_roce_hdr_t m_ack,
  output logic         m_ack_valid,
  input  logic         m_ack_ready
);
  typedef struct packed {
    logic        pay;            // the packet has payload (leaves with a counted last beat)
    logic        uc;             // a UC packet (a failed payload makes it a local NAK)
    logic        ack;            // a marked UC packet: a local ACK once it has left
    logic [15:0] qpn;
    logic [23:0] psn;
    logic [15:0] made;           // records made by the time the header was taken
  } ent_t;

  typedef struct packed {
    logic        err;            // a local NAK (the packet's payload could not be read)
    logic [23:0] psn;
    logic [15:0] made;
  } pend_t;

  // ---------------------------------------------------------------- 1. headers in order
  ent_t e_in, e_hd;
  logic push, f_room, f_valid, pop;
  logic          init_q;         // the per-QP toggles are being cleared after reset (2.)
  logic [$clog2(DEPTH+1):0] level;
  assign e_in = '{pay: s_hdr.payload_len != 16'd0, uc: s_ucl.uc, ack: s_ucl.ack, qpn: s_ucl.qpn, psn: s_hdr.psn, made: i_made};
  assign push = s_fire && (e_in.pay || e_in.ack);
  assign s_room = f_room && !init_q;
  hm_fifo #(.WIDTH($bits(ent_t)), .DEPTH(DEPTH)) u_q (
    .clk, .rst, .s_data(e_in), .s_valid(push), .s_ready(f_room),
    .m_data(e_hd), .m_valid(f_valid), .m_ready(pop), .level(level));

  // last beats taken and not yet matched with their entry: their error flags, in order (an
  // entry with payload is in u_q before its last beat is taken, so there are never more of
  // them than entries)
  logic b_err, b_valid, b_pop, b_room, err_now;
  logic [$clog2(DEPTH+1):0] b_level;
  hm_fifo #(.WIDTH(1), .DEPTH(DEPTH)) u_beats (
    .clk, .rst, .s_data(s_tlast_err), .s_valid(s_tlast_fire), .s_ready(b_room),
    .m_data(b_err), .m_valid(b_valid), .m_ready(b_pop), .level(b_level));
  assign pop     = f_valid && (!e_hd.pay || b_valid);
  assign b_pop   = pop && e_hd.pay;
  assign err_now = e_hd.pay && e_hd.uc && b_err;

  // ---------------------------------------------------------------- 2. per QP, the newest
  // Whether a QP has an ACK in the table (and waits in u_pend) is the difference of two
  // toggle bits, one flipped by the inserts and one set equal to it by the emitter, so that
  // each per-QP bit table has one write port and one read port (distributed RAM, read
  // combinationally as the flip-flops it replaces were: 4,096 of them with two write ports
  // cost tens of thousands of LUTs). The NAK bit (a newer ACK does not replace a NAK) counts
  // only while the QP waits. After reset the toggles are cleared, a row of 64 QPs a cycle
  // (NUM_QPS / 64 cycles, while s_room holds the arbiter's port back).
  logic [QW-1:0] ins_q, pq;
  logic          ins, same, keep, wr, pq_valid, em_pop, pend_push, pend_room, pv, pe, ins_t, pq_t;
  // (each table is an hm_qp_bits: rows of 64 bits in distributed RAM, one bit written at a
  // time; its clear after reset is the init_q above)
  logic emt_t, ins_busy, emt_busy, nak_busy;
  pend_t         pa_mem [NUM_QPS];
  pend_t         pa_rd;
  logic [$clog2(NUM_QPS+1):0] pend_level;
  assign ins       = pop && (e_hd.ack || err_now);
  assign ins_q     = QW'(e_hd.qpn);
  assign pv        = ins_t ^ emt_t;
  assign same      = em_pop && pq == ins_q;
  assign keep      = pv && pe && !same;
  assign wr        = ins && !keep;
  // (the QP the emitter takes now goes back in when a newer ACK arrives in the same cycle)
  // (= wr && (!pv || same): a kept NAK is a waiting QP, so it is never pushed)
  assign pend_push = ins && (!pv || same);
  // (each queued QP with its insert toggle as pushed: the emitter writes it to the QP's emit
  // toggle, which makes the two equal; no read port at pq)
  hm_fifo #(.WIDTH(QW + 1), .DEPTH(NUM_QPS)) u_pend (
    .clk, .rst, .s_data({!ins_t, ins_q}), .s_valid(pend_push), .s_ready(pend_room),
    .m_data({pq_t, pq}), .m_valid(pq_valid), .m_ready(em_pop), .level(pend_level));

  hm_qp_bits #(.NUM(NUM_QPS), .RD(1)) u_ins (
    .clk, .rst, .o_busy(ins_busy), .i_we(pend_push), .i_waddr(ins_q), .i_wbit(!ins_t),
    .i_raddr(ins_q), .o_rbit(ins_t));
  hm_qp_bits #(.NUM(NUM_QPS), .RD(1)) u_emt (
    .clk, .rst, .o_busy(emt_busy), .i_we(em_pop), .i_waddr(pq), .i_wbit(pq_t),
    .i_raddr(ins_q), .o_rbit(emt_t));
  // (the NAK bit is only read while the QP waits, so it needs no clear)
  hm_qp_bits #(.NUM(NUM_QPS), .RD(1), .CLEAR(1'b0)) u_nak (
    .clk, .rst, .o_busy(nak_busy), .i_we(wr), .i_waddr(ins_q), .i_wbit(err_now),
    .i_raddr(ins_q), .o_rbit(pe));
  assign init_q = ins_busy;           // (u_emt's clear runs in the same cycles)

  // ---------------------------------------------------------------- 3. one ACK, handed over
  logic          e1_v_q;
  logic [QW-1:0] e1_q;
  logic [15:0]   handed_q, ahead;
  logic          out_free, e1_go;
  assign em_pop   = pq_valid && !e1_v_q;
  assign out_free = !m_ack_valid || m_ack_ready;
  assign ahead    = pa_rd.made - handed_q;     // records still to hand over (a few at most)
  assign e1_go    = e1_v_q && out_free && (ahead == '0 || ahead[15]);

  always_ff @(posedge clk) begin
    if (wr) pa_mem[ins_q] <= '{err: err_now, psn: e_hd.psn, made: e_hd.made};
    if (em_pop) begin
      pa_rd <= pa_mem[pq];
      e1_q  <= pq;
    end
    if (e1_go) begin
      m_ack          <= '0;
      m_ack.opcode   <= HM_OP_ACK;
      m_ack.syndrome <= pa_rd.err ? HM_AETH_NAK_REM_OP : HM_AETH_ACK;
      m_ack.dest_qp  <= 24'(e1_q);
      m_ack.psn      <= pa_rd.psn;
    end
  end

  always_ff @(posedge clk) begin
    if (rst) begin
      handed_q    <= '0;
      e1_v_q      <= 1'b0;
      m_ack_valid <= 1'b0;
    end else begin
      handed_q <= handed_q + 16'(i_sent_fire);
      if (em_pop) e1_v_q <= 1'b1;
      else if (e1_go) e1_v_q <= 1'b0;
      if (m_ack_ready) m_ack_valid <= 1'b0;
      if (e1_go) m_ack_valid <= 1'b1;
    end
  end

  logic unused_ok;
  assign unused_ok = ^{nak_busy, emt_busy, level, s_hdr, pend_room, pend_level, b_room, b_level};

  if (DEPTH < 2 || (DEPTH & (DEPTH - 1)) != 0) begin : g_bad_depth
    $error("hm_uc_lack: DEPTH must be a power of two, at least 2");
  end
  if ((1 << QW) != NUM_QPS) begin : g_bad_qps
    $error("hm_uc_lack: NUM_QPS must be a power of two");
  end
endmodule
