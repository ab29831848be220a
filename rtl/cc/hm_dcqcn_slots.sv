// DCQCN rate-limiter slots: maps any local QPN to one of NUM_SLOTS reaction-point / pacer
// entries, allocated when a CNP arrives for a QP that has none and freed when the reaction
// point releases the entry (the QP is back at full rate). Every QP can be rate limited; at most
// NUM_SLOTS at a time (as on other RoCE NICs, rate limiters are a pool).
//
// Per slot (flops): used, attached, key (the QPN), active (a copy of the reaction point's
// active bit, from its o_op reports) and pend (CNPs handed to the reaction point whose outcome
// (dropped, first CNP, CNP) has not been reported yet, 0..7).
//
// Per cycle:
//   * CNP for QPN q (s_cnp_*): q >= 2^KEY_W -> not applied (o_unmapped, stats.bad_qpn); a slot
//     attached to q -> forwarded with that slot; else the lowest unused slot is allocated
//     (attached to q) and the CNP forwarded with it; no unused slot -> not applied
//     (o_unmapped, stats.no_slot; a slot being freed in this cycle is not yet unused). A CNP
//     for the QPN detached in the same cycle counts as arriving first: it is applied, and a
//     slot allocated for it is detached at once (it paces nothing and is freed on release).
//     Forwarding is combinational (m_cnp_*, into the reaction point's CNP FIFO).
//   * bytes report (s_tx_*): forwarded with the QP's slot (combinational: m_tx_*); dropped
//     when the QP has no slot (it is not rate limited: nothing to count).
//   * query (s_query_qpn): o_query_hit / o_query_slot, combinational (a CAM read port); a QP
//     without a slot is not rate limited.
//   * detach (s_detach_*, the QP was reset or destroyed): a slot attached to that QPN is
//     detached: no further CNPs, bytes or queries reach it, so a new QP with that QPN starts
//     unlimited; the slot stays used until the reaction point releases it. A CNP still in
//     flight from the peer for the old connection (or for a QPN without a QP) takes a slot
//     like any other; the map does not know which QPs are live.
//   * reaction point feedback (i_op*, i_cnp_dropped, one cycle after the operation): first CNP
//     -> active, pend - 1; CNP -> pend - 1; release -> not active; dropped -> pend - 1 for the
//     slot of the previous cycle's forwarded CNP.
//   * a used slot that is not active with pend = 0 becomes unused (also a slot whose first CNP
//     the reaction point dropped).
//
// A slot freed and reallocated while bytes of its old QP are still in the reaction point's
// bytes FIFO credits them to the new QP (at most TX_FIFO_DEPTH reports): the new QP's byte
// counter starts a little ahead. The pacer's bucket of a reallocated slot carries over (an
// unlimited QP's bucket is full).
module hm_dcqcn_slots
  import hm_pkg::*;
#(
  parameter int NUM_SLOTS = 64,                     // rate limiters, >= 2
  parameter int QPN_W     = 24,                     // width of the QPN ports
  parameter int KEY_W     = 12                      // QPNs 0..2^KEY_W-1 can get a slot, <= QPN_W
) (
  input  logic                         clk,
  input  logic                         rst,         // synchronous, active high

  input  logic                         s_cnp_valid, // a CNP arrived for local QP s_cnp_qpn
  input  logic [QPN_W-1:0]             s_cnp_qpn,
  output logic                         m_cnp_valid, // ... to the reaction point, for this slot
  output logic [$clog2(NUM_SLOTS)-1:0] m_cnp_slot,

  input  logic                         s_tx_valid,  // the requester committed a packet ...
  input  logic [QPN_W-1:0]             s_tx_qpn,
  input  logic [15:0]                  s_tx_bytes,  // ... of this many bytes
  output logic                         m_tx_valid,  // ... for the reaction point and pacer (comb.)
  output logic [$clog2(NUM_SLOTS)-1:0] m_tx_slot,
  output logic [15:0]                  m_tx_bytes,

  input  logic [QPN_W-1:0]             s_query_qpn, // the QP the requester serves
  output logic                         o_query_hit, // it has a slot (combinational) ...
  output logic [$clog2(NUM_SLOTS)-1:0] o_query_slot, // ... this one

  input  logic                         s_detach_valid, // the QP was reset or destroyed
  input  logic [QPN_W-1:0]             s_detach_qpn,

  input  logic [2:0]                   i_op,        // the reaction point's o_op ...
  input  logic [$clog2(NUM_SLOTS)-1:0] i_op_slot,   // ... and o_op_qpn
  input  logic                         i_cnp_dropped, // its o_cnp_dropped

  output logic                         o_unmapped,  // a CNP was not applied (registered)
  output hm_slots_stats_t              stats,
  output logic [$clog2(NUM_SLOTS):0]   o_used       // slots in use
);
  localparam int SW = $clog2(NUM_SLOTS);
  localparam logic [2:0] OP_FIRST = 3'd1, OP_CNP = 3'd2, OP_RELEASE = 3'd6;

  logic [NUM_SLOTS-1:0] used_q, att_q, act_q;
  // Packed (flops either way): a simulator commits a packed vector as one word copy, an
  // unpacked array as one check per element and cycle.
  logic [NUM_SLOTS-1:0][KEY_W-1:0] key_q;
  logic [NUM_SLOTS-1:0][2:0]       pend_q;
  logic                 fwd_q;                      // a CNP was forwarded last cycle ...
  logic [SW-1:0]        fwd_slot_q;                 // ... for this slot

  // CAM lookup: the attached slot holding `q`, if any (one-hot OR into an index)
  function automatic logic [SW:0] lookup(input logic [QPN_W-1:0] q);
    logic [SW-1:0] idx;
    logic          hit;
    logic          in_range;
    idx = '0;
    hit = 1'b0;
    in_range = (QPN_W == KEY_W) || (q >> KEY_W) == '0;
    for (int s = 0; s < NUM_SLOTS; s++) begin
      if (att_q[s] && key_q[s] == q[KEY_W-1:0]) begin
        idx = idx | SW'(s);
        hit = 1'b1;
      end
    end
    return {hit && in_range, idx};
  endfunction

  // ---- CNP: look up, else allocate the lowest unused slot
  logic          c_range, c_hit, c_alloc, c_fwd, c_none, c_bad, c_det;
  logic [SW-1:0] c_slot, free_slot;
  logic          any_free;
  always_comb begin
    logic [SW:0] l;
    // The lookup and the free-slot search serve only a CNP that is there (every use below is
    // qualified by s_cnp_valid): a simulator skips them otherwise.
    l        = '0;
    any_free = 1'b0;
    free_slot = '0;
    if (s_cnp_valid) begin
      l = lookup(s_cnp_qpn);
      for (int s = NUM_SLOTS - 1; s >= 0; s--) begin
        if (!used_q[s]) begin
          any_free  = 1'b1;
          free_slot = SW'(s);
        end
      end
    end
    c_range  = (QPN_W == KEY_W) || (s_cnp_qpn >> KEY_W) == '0;
    c_det    = s_detach_valid && s_detach_qpn == s_cnp_qpn;
    c_hit    = l[SW];
    c_bad   = s_cnp_valid && !c_range;
    c_alloc = s_cnp_valid && !c_bad && !c_hit && any_free;
    c_none  = s_cnp_valid && !c_bad && !c_hit && !any_free;
    c_fwd   = s_cnp_valid && !c_bad && (c_hit || any_free);
    c_slot  = c_hit ? l[SW-1:0] : free_slot;
  end
  assign m_cnp_valid = c_fwd;
  assign m_cnp_slot  = c_slot;

  // ---- query
  always_comb begin
    logic [SW:0] l;
    l            = lookup(s_query_qpn);
    o_query_hit  = l[SW];
    o_query_slot = l[SW-1:0];
  end

  // ---- bytes (combinational: the pacer must see a packet in the cycle after it was committed,
  // when the requester asks about the same QP again)
  always_comb begin
    logic [SW:0] l;
    l          = '0;
    if (s_tx_valid) l = lookup(s_tx_qpn);   // m_tx_slot matters only with m_tx_valid
    m_tx_valid = s_tx_valid && l[SW];
    m_tx_slot  = l[SW-1:0];
    m_tx_bytes = s_tx_bytes;
  end

  // ---- detach
  logic [SW:0] d_l;
  always_comb begin
    d_l = '0;
    if (s_detach_valid) d_l = lookup(s_detach_qpn);   // used only with s_detach_valid
  end

  // ---- slot state
  logic [SW:0] used_cnt;
  always_comb begin
    used_cnt = '0;
    for (int s = 0; s < NUM_SLOTS; s++) used_cnt = used_cnt + (SW + 1)'(used_q[s]);
  end

  // A slot's state changes only in a cycle with an event that names it (a forwarded CNP, a
  // reaction-point report, a dropped CNP, a detach that hits): a used slot is always active
  // or has CNPs pending, and an attached one is used, so without an event every slot keeps
  // its state. The update runs only then (a clock enable; a simulator skips the loop).
  logic slot_ev;
  assign slot_ev = c_fwd || i_op == OP_FIRST || i_op == OP_CNP || i_op == OP_RELEASE ||
                   (i_cnp_dropped && fwd_q) || (s_detach_valid && d_l[SW]);

  always_ff @(posedge clk) begin
    if (rst || slot_ev) for (int s = 0; s < NUM_SLOTS; s++) begin
      logic       inc, dec_op, dec_drop, act_d, used_d, att_d;
      logic [2:0] pend_d;
      inc      = c_fwd && c_slot == SW'(s);
      dec_op   = (i_op == OP_FIRST || i_op == OP_CNP) && i_op_slot == SW'(s);
      dec_drop = i_cnp_dropped && fwd_q && fwd_slot_q == SW'(s);
      // never both today (the RP's CNP FIFO does not fill while it pops every cycle); counted
      // right if they ever are
      pend_d   = pend_q[s] + {2'd0, inc} - {1'b0, dec_op && dec_drop, dec_op ^ dec_drop};
      act_d  = (act_q[s] || (i_op == OP_FIRST && i_op_slot == SW'(s))) &&
               !(i_op == OP_RELEASE && i_op_slot == SW'(s));
      att_d  = (att_q[s] && !(s_detach_valid && d_l[SW] && d_l[SW-1:0] == SW'(s))) ||
               (c_alloc && c_slot == SW'(s) && !c_det);
      used_d = (used_q[s] || (c_alloc && c_slot == SW'(s))) && (act_d || pend_d != 3'd0);
      pend_q[s] <= pend_d;
      act_q[s]  <= act_d;
      used_q[s] <= used_d;
      att_q[s]  <= att_d && used_d;
      if (c_alloc && c_slot == SW'(s)) key_q[s] <= s_cnp_qpn[KEY_W-1:0];
      if (rst) begin
        pend_q[s] <= '0;
        act_q[s]  <= 1'b0;
        used_q[s] <= 1'b0;
        att_q[s]  <= 1'b0;
      end
    end
  end

  always_ff @(posedge clk) begin
    fwd_q      <= c_fwd;
    fwd_slot_q <= c_slot;
    o_unmapped <= c_none || c_bad;
    o_used     <= used_cnt;
    if (c_none)  stats.no_slot <= stats.no_slot + 1'b1;
    if (c_bad)   stats.bad_qpn <= stats.bad_qpn + 1'b1;
    if (c_alloc) stats.allocs  <= stats.allocs + 1'b1;
    if (rst) begin
      fwd_q        <= 1'b0;
      o_unmapped   <= 1'b0;
      o_used       <= '0;
      stats <= '0;
    end
  end

  // ---- parameter checks
  if (NUM_SLOTS < 2 || KEY_W < 1 || KEY_W > QPN_W) begin : g_bad_param
    $error("hm_dcqcn_slots: NUM_SLOTS must be >= 2 and 1 <= KEY_W <= QPN_W");
  end
endmodule
