// Pushed send WQEs (the requester's MMIO path, hm_rc_req): the host writes a whole 64-byte
// WQE into its QP's push window as well as into the send queue ring, then rings the doorbell.
// A push is a hint that saves the WQE fetch: the ring stays the truth, and a push that is
// lost, evicted or never bound costs only the fetch. A push carries the first PUSH_BYTES of
// the WQE's slot, whatever the ring's stride: it is taken only when the WQE's header says
// that nothing it uses lies beyond (inline data up to PUSH_BYTES - 32 bytes, or SGEs that end
// within PUSH_BYTES; an atomic's operands and SGE end at byte 64); others are dropped at
// once, and the WQE is fetched.
//
// A push carries no WQE index: the doorbell that follows it on the same path (posted writes
// of one QP arrive in order) binds the QP's unbound push to WQE pi - 1, the last WQE that
// doorbell posts. A second push of a QP before its doorbell replaces the first (only the
// latest is bound). A push and a doorbell of the same QP in one cycle are taken as push
// first. The shell must deliver a QP's push before the doorbell that follows it, as PCIe
// delivers posted writes of one requester (the host fences between the two stores): a push
// that came after its doorbell would be bound by the QP's next doorbell to the wrong WQE. Entries are SLOTS registers, replaced
// round-robin; an entry is dropped when it is used (i_take), when a WQE read of its QP covers
// its index (i_fetch: the fetcher has passed it), and when its QP's context is written
// (i_inval: a QP reloaded starts its indices over).
module hm_wqe_push
  import hm_desc_pkg::*;
#(
  // Pushed WQEs held at once (power of two).
  parameter int SLOTS = 4,
  // Bytes per pushed WQE (the push window).
  parameter int PUSH_BYTES = 64
) (
  input  logic                    clk,
  input  logic                    rst,

  // Pushes: a QP's next WQE, whole
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
  logic [PUSH_BYTES*8-1:0] data_q [SLOTS];
  logic [SL-1:0]           rr_q;

  assign s_ready = 1'b1;

  // the pushed WQE uses nothing beyond the push
  hm_sq_wqe_hdr_t ph;
  logic           fits;
  assign ph   = hm_sq_wqe_hdr_t'(s_data[255:0]);
  assign fits = (ph.flags & HM_WQE_F_INLINE) != 0 ? ph.length <= 32'(PUSH_BYTES - 32) :
                (ph.opcode == HM_WQE_OP_CMP_SWAP || ph.opcode == HM_WQE_OP_FETCH_ADD) ? PUSH_BYTES >= 64 :
                int'(ph.num_sge) <= (PUSH_BYTES - 32) / 16;

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

  // where a push goes: the QP's unbound entry (replaced), else a free one, else the
  // round-robin victim
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
      if (v_q[k] && !b_q[k] && qpn_q[k] == s_qpn) begin
        w_same = 1'b1;
        wslot  = SL'(k);
      end
    end
  end

  // what happens to each entry this cycle
  logic             push_ok, push_db;
  logic [SLOTS-1:0] kill, drop;
  always_comb begin
    // (a push beside a context write of its QP is dropped: which came first is not known)
    push_ok = s_valid && fits && !(i_inval && i_inval_qpn == s_qpn);
    // a push beside its QP's doorbell came first (a QP's writes arrive in order): bound now
    push_db = i_db && i_db_qpn == s_qpn;
    for (int k = 0; k < SLOTS; k++) begin
      kill[k] = v_q[k] && ((i_take && hit[k]) ||
                           (i_fetch && b_q[k] && qpn_q[k] == i_qpn && 16'(idx_q[k] - i_idx) < i_fetch_n) ||
                           (i_inval && qpn_q[k] == i_inval_qpn));
      // dropped unused: killed but not taken, or overwritten by the push while still valid
      drop[k] = (kill[k] && !(i_take && hit[k])) ||
                (push_ok && wslot == SL'(k) && v_q[k] && !kill[k]);
    end
  end

  // counter events, added one cycle later
  localparam int DW = $clog2(SLOTS + 2);
  logic          ev_push_q, ev_used_q;
  logic [DW-1:0] ev_drop_q;

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
      logic [DW-1:0] nd;
      for (int k = 0; k < SLOTS; k++) begin
        // a doorbell binds its QP's unbound push
        if (i_db && v_q[k] && !b_q[k] && qpn_q[k] == i_db_qpn) begin
          b_q[k]   <= 1'b1;
          idx_q[k] <= i_db_pi - 16'd1;
        end
      end
      v_q <= v_q & ~kill;
      if (push_ok) begin
        v_q[wslot]    <= 1'b1;
        b_q[wslot]    <= push_db;
        idx_q[wslot]  <= i_db_pi - 16'd1;
        qpn_q[wslot]  <= s_qpn;
        data_q[wslot] <= s_data;
        if (!w_same && !w_free) rr_q <= rr_q + 1'b1;
      end
      nd = DW'(s_valid && !push_ok);
      for (int k = 0; k < SLOTS; k++) nd = nd + DW'(drop[k]);
      ev_push_q    <= s_valid;
      ev_used_q    <= i_take && o_hit;
      ev_drop_q    <= nd;
      stat_pushed  <= stat_pushed + 32'(ev_push_q);
      stat_used    <= stat_used + 32'(ev_used_q);
      stat_dropped <= stat_dropped + 32'(ev_drop_q);
    end
  end

  logic unused_ok;
  assign unused_ok = ^{ph};

  if (SLOTS < 1 || (1 << SL) != SLOTS && SLOTS != 1) begin : g_bad_slots
    $error("hm_wqe_push: SLOTS must be a power of two");
  end
endmodule
