// Pushed send WQEs (the requester's MMIO path, hm_rc_req): the host writes a WQE into the
// send queue ring, then the slot's first PUSH_BYTES whole into its QP's push window, then
// rings the doorbell. A push is a hint that saves the WQE fetch: the ring stays the truth,
// and a push that is lost, evicted or never bound costs only the fetch. A push is taken only
// when the WQE's header says that nothing it uses lies beyond PUSH_BYTES (inline data of a
// SEND or WRITE up to PUSH_BYTES - 32 bytes, or SGEs that end within PUSH_BYTES; an atomic's
// operands and SGE end at byte 64); others are dropped at once, and the WQE is fetched.
//
// The index: a push carries the low byte of its WQE's index in the header's reserved byte
// (`rsvd`, zero in the ring; it is zeroed again here). Doorbells reach the requester through
// the BAR's doorbell FIFO, pushes directly, so a push may arrive before the doorbells that
// precede it; the doorbell that posts the pushed WQE binds it. At a doorbell of its QP, an
// unbound push whose tag is the low byte of pi - 1 is bound to WQE pi - 1; one whose tag is
// behind it (by 1 to 127) was for a WQE that doorbell or an earlier one posted, and is
// dropped; one ahead waits for its own doorbell. A second push of the same WQE while the first
// is unbound replaces it. A push and a doorbell of its QP in one cycle: the push is taken first. The
// host must post a push's WQE with the next doorbell of its QP (pushes are for WQEs posted
// alone) and fence between the push and the doorbell. Entries are SLOTS registers, replaced
// round-robin; an entry is dropped when it is used (i_take), when a WQE read of its QP covers
// its index (i_fetch: the fetcher has passed it), and when its QP's context is written
// (i_inval: a QP reloaded starts its indices over).
module hm_wqe_push
  import hm_desc_pkg::*;
#(
  // Pushed WQEs held at once (power of two, 2 or more).
  parameter int SLOTS = 4,
  // Bytes per pushed WQE (the push window).
  parameter int PUSH_BYTES = 64
) (
  input  logic                    clk,
  input  logic                    rst,

  // Pushes: a WQE's first PUSH_BYTES, its index's low byte in the reserved byte
  input  logic [15:0]             s_qpn,
  input  logic [PUSH_BYTES*8-1:0] s_data,
  input  logic                    s_valid,
  output logic                    s_ready,

  // Send queue doorbells taken (QP, new producer index)
  input  logic                    i_db,
  input  logic [15:0]             i_db_qpn,
  input  logic [15:0]             i_db_pi,

  // A QP's context was written: its pushes are dropped
  input  logic                    i_inval,
  input  logic [15:0]             i_inval_qpn,

  // Lookup of WQE i_idx of QP i_qpn (combinational), and its use
  input  logic [15:0]             i_qpn,
  input  logic [15:0]             i_idx,
  output logic                    o_hit,
  output logic [PUSH_BYTES*8-1:0] o_data,
  input  logic                    i_take,

  // A WQE read of QP i_qpn was issued for WQEs [i_idx, i_idx + i_fetch_n)
  input  logic                    i_fetch,
  input  logic [15:0]             i_fetch_n,

  // Pushes taken, used (i_take), dropped unused (replaced, evicted, passed, invalidated)
  output logic [31:0]             stat_pushed,
  output logic [31:0]             stat_used,
  output logic [31:0]             stat_dropped
);
  localparam int SL = SLOTS > 1 ? $clog2(SLOTS) : 1;

  logic [SLOTS-1:0]        v_q, b_q;     // valid, bound to an index
  logic [15:0]             qpn_q [SLOTS];
  logic [15:0]             idx_q [SLOTS];
  logic [7:0]              tag_q [SLOTS];
  logic [PUSH_BYTES*8-1:0] data_q [SLOTS];
  logic [SL-1:0]           rr_q;

  assign s_ready = 1'b1;

  // the pushed WQE uses nothing beyond the push; its tag; the data as the ring holds it
  hm_sq_wqe_hdr_t          ph;
  logic                    fits, ph_inl;
  logic [PUSH_BYTES*8-1:0] s_clean;
  assign ph     = hm_sq_wqe_hdr_t'(s_data[255:0]);
  assign ph_inl = (ph.flags & HM_WQE_F_INLINE) != 0 &&
                  (ph.opcode == HM_WQE_OP_SEND || ph.opcode == HM_WQE_OP_SEND_IMM || ph.opcode == HM_WQE_OP_SEND_INV ||
                   ph.opcode == HM_WQE_OP_WRITE || ph.opcode == HM_WQE_OP_WRITE_IMM);
  assign fits   = ph_inl ? ph.length <= 32'(PUSH_BYTES - 32) :
                  (ph.opcode == HM_WQE_OP_CMP_SWAP || ph.opcode == HM_WQE_OP_FETCH_ADD) ? PUSH_BYTES >= 64 :
                  int'(ph.num_sge) <= (PUSH_BYTES - 32) / 16;
  always_comb begin
    s_clean        = s_data;
    s_clean[31:24] = 8'd0;
  end

  // lookup
  logic [SLOTS-1:0] hit;
  always_comb begin
    o_hit  = 1'b0;
    o_data = data_q[0];
    for (int k = 0; k < SLOTS; k++) begin
      hit[k] = v_q[k] && b_q[k] && qpn_q[k] == i_qpn && idx_q[k] == i_idx;
      if (hit[k]) begin
        o_hit  = 1'b1;
        o_data = data_q[k];
      end
    end
  end

  // where a push goes: the unbound entry of the same QP and index (replaced), else a free
  // one, else the round-robin victim
  logic [SL-1:0] wslot;
  logic          w_same, w_free;
  always_comb begin
    wslot  = rr_q;
    w_same = 1'b0;
    w_free = 1'b0;
    for (int k = SLOTS - 1; k >= 0; k--) begin
      if (!v_q[k]) begin
        w_free = 1'b1;
        wslot  = SL'(k);
      end
    end
    for (int k = 0; k < SLOTS; k++) begin
      if (v_q[k] && !b_q[k] && qpn_q[k] == s_qpn && tag_q[k] == ph.rsvd) begin
        w_same = 1'b1;
        wslot  = SL'(k);
      end
    end
  end

  // a doorbell against an unbound push's tag: 0 binds it, 1..127 behind (dropped)
  logic [7:0] db_last;
  assign db_last = 8'(i_db_pi - 16'd1);

  // what happens to each entry this cycle
  logic             push_ok, push_db, push_bind, push_behind;
  logic [7:0]       push_d;
  logic [SLOTS-1:0] kill, drop, bnd;
  always_comb begin
    // (a push beside a context write of its QP is dropped: which came first is not known)
    push_d      = db_last - ph.rsvd;
    push_db     = i_db && i_db_qpn == s_qpn;
    push_bind   = push_db && push_d == 8'd0;
    push_behind = push_db && push_d != 8'd0 && !push_d[7];
    push_ok     = s_valid && fits && !(i_inval && i_inval_qpn == s_qpn) && !push_behind;
    for (int k = 0; k < SLOTS; k++) begin
      logic [7:0] d;
      logic       mine;
      d       = db_last - tag_q[k];
      mine    = i_db && v_q[k] && !b_q[k] && qpn_q[k] == i_db_qpn;
      bnd[k]  = mine && d == 8'd0;
      kill[k] = v_q[k] && ((i_take && hit[k]) ||
                           (mine && d != 8'd0 && !d[7]) ||
                           (i_fetch && b_q[k] && qpn_q[k] == i_qpn && 16'(idx_q[k] - i_idx) < i_fetch_n) ||
                           (i_inval && qpn_q[k] == i_inval_qpn));
      // dropped unused: killed but not taken, or overwritten by the push while still valid
      drop[k] = (kill[k] && !(i_take && hit[k])) ||
                (push_ok && wslot == SL'(k) && v_q[k] && !kill[k]);
    end
  end

  // counter events, added one cycle later (the drops as one bit each: their sum is taken
  // from registers, off the path of the entry matches)
  localparam int DW = $clog2(SLOTS + 2);
  logic          ev_push_q, ev_used_q;
  logic [SLOTS:0] ev_drop_q;     // {refused push, dropped entries}
  logic [DW-1:0]  nd;
  always_comb begin
    nd = '0;
    for (int k = 0; k <= SLOTS; k++) nd = nd + DW'(ev_drop_q[k]);
  end

  always_ff @(posedge clk) begin
    if (rst) begin
      v_q          <= '0;
      b_q          <= '0;
      rr_q         <= '0;
      ev_push_q    <= 1'b0;
      ev_used_q    <= 1'b0;
      ev_drop_q    <= '0;
      stat_pushed  <= '0;
      stat_used    <= '0;
      stat_dropped <= '0;
    end else begin
      for (int k = 0; k < SLOTS; k++) begin
        if (bnd[k]) begin
          b_q[k]   <= 1'b1;
          idx_q[k] <= i_db_pi - 16'd1;
        end
      end
      v_q <= v_q & ~kill;
      if (push_ok) begin
        v_q[wslot]    <= 1'b1;
        b_q[wslot]    <= push_bind;
        idx_q[wslot]  <= i_db_pi - 16'd1;
        tag_q[wslot]  <= ph.rsvd;
        qpn_q[wslot]  <= s_qpn;
        data_q[wslot] <= s_clean;
        if (!w_same && !w_free) rr_q <= rr_q + 1'b1;
      end
      ev_push_q    <= s_valid;
      ev_used_q    <= i_take && o_hit;
      ev_drop_q    <= {s_valid && !push_ok, drop};
      stat_pushed  <= stat_pushed + 32'(ev_push_q);
      stat_used    <= stat_used + 32'(ev_used_q);
      stat_dropped <= stat_dropped + 32'(nd);
    end
  end

  logic unused_ok;
  assign unused_ok = ^{ph};

  if (SLOTS < 2 || (1 << SL) != SLOTS) begin : g_bad_slots
    $error("hm_wqe_push: SLOTS must be a power of two, 2 or more");
  end
endmodule
