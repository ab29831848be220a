// The transport engine's DCQCN subsystem (docs/dcqcn.md): the notification point, which turns
// CE-marked requests into at most one CNP per QP per interval (section 4); the slot map, which
// gives a QP one of CC_SLOTS rate limiters when a CNP arrives for it (section 11); and the
// reaction point and pacer of those slots (sections 5 and 6): CNPs received cut the QP's rate,
// the requester's packets feed the byte counter and the token bucket, and the requester asks
// the pacer about the QP it serves. Parameters come from the control bus's CC registers.
module hm_eng_cc
  import hm_pkg::*;
  import hm_regs_pkg::*;
  import hm_desc_pkg::*;
  import hm_eng_pkg::*;
#(
  // QP table entries (power of two).
  parameter int NUM_QPS = 4096,
  // DCQCN rate limiters: at most CC_SLOTS QPs are rate-limited at a time (further CNPs are
  // counted and ignored).
  parameter int CC_SLOTS = 64,
  // Control-bus CC words (derived).
  localparam int CCW = int'(HM_CTL_CC_WORDS)
) (
  input  logic                 clk,
  input  logic                 rst,

  // The control bus's CC registers (HM_CC_*)
  input  logic [CCW-1:0][31:0] cc_regs,

  // CE-marked requests from the responder, with the response addressing a CNP would use
  input  logic                 s_ce_valid,
  input  logic [15:0]          s_ce_qpn,
  input  hm_rjob_t             s_ce_job,

  // CNPs to send (to the response generator)
  output hm_rjob_t             m_cnp,
  output logic                 m_cnp_valid,
  input  logic                 m_cnp_ready,

  // CNPs received for local QPs (from the receive dispatch)
  input  logic                 s_rcnp_valid,
  input  logic [23:0]          s_rcnp_qpn,

  // Packets the requester started (QP, bytes)
  input  logic                 s_tx_valid,
  input  logic [15:0]          s_tx_qpn,
  input  logic [15:0]          s_tx_bytes,

  // The QP the requester serves; o_hold (a cycle later): its pacer has no tokens
  input  logic [15:0]          s_query_qpn,
  output logic                 o_hold,

  // A QP was reset or destroyed: its slot is freed
  input  logic                 s_detach_valid,
  input  logic [15:0]          s_detach_qpn,

  // Counters
  output hm_cc_stats_t          stats
);
  // ---- Notification point. The QP's addressing is held beside the NP's one-cycle decision.
  hm_cc_ctrl_t cc_ctrl;
  hm_rjob_t    cnp_cand_q;
  logic        np_fire, cnp_room;
  logic [15:0] np_qpn;
  logic        np_supp_p, np_blk_p;
  hm_np_stats_t np_st;
  logic [31:0]  ce_q;
  logic [$clog2(4+1):0] cnp_level;
  logic [23:0] np_now;
  assign cc_ctrl = hm_cc_ctrl_t'(cc_regs[HM_CC_CTRL]);
  always_ff @(posedge clk) begin
    if (s_ce_valid) cnp_cand_q <= s_ce_job;
    if (rst) ce_q <= '0;
    else if (s_ce_valid) ce_q <= ce_q + 1'b1;
  end
  hm_dcqcn_np #(.NUM_QPS(NUM_QPS), .QPN_W(16), .TIME_W(24)) u_np (
    .clk, .rst, .cfg_interval(24'(cc_regs[HM_CC_CNP_INTERVAL] > 32'hFF_FFFF ? 32'hFF_FFFF : cc_regs[HM_CC_CNP_INTERVAL])),
    .s_ce_valid(s_ce_valid && cc_ctrl.np_enable), .s_ce_qpn(s_ce_qpn), .i_cnp_full(!cnp_room),
    .m_cnp_valid(np_fire), .m_cnp_qpn(np_qpn), .o_suppressed(np_supp_p), .o_blocked(np_blk_p),
    .stats(np_st),
    .o_now(np_now)
  );
  // ---- Slot map, reaction point and pacer
  hm_cc_alpha_t cc_alpha;
  hm_cc_cut_t   cc_cut;
  logic        rl_upd, rl_lim, pacer_ok, sl_q_hit_q;
  logic [23:0] rl_upd_qpn;
  logic [31:0] rl_rate, cc_now;
  hm_rp_stats_t rp_st;
  logic [2:0]  rp_op;
  logic [23:0] rp_op_qpn;
  logic [1:0]  rp_op_timer;
  logic        rp_op_flag, rp_cd, rp_td, rp_tm, rp_tf, rp_dbg_act, pc_dbg_lim;
  logic [109+3*32:0] rp_dbg_entry;
  logic [$clog2(CC_SLOTS)-1:0] rp_dbg_scan;
  logic [7:0]  rp_dbg_cc, rp_dbg_tc;
  logic [41:0] pc_dbg_tok;
  logic [31:0] pc_dbg_last, pc_dbg_rate;
  assign cc_alpha = hm_cc_alpha_t'(cc_regs[HM_CC_ALPHA]);
  assign cc_cut   = hm_cc_cut_t'(cc_regs[HM_CC_CUT]);
  // QPN -> rate-limiter slot (docs/dcqcn.md section 11): allocated on a CNP, freed on release,
  // detached when the QP is reset or destroyed (a QP write with state RESET)
  localparam int CS_W = $clog2(CC_SLOTS);
  logic            sl_cnp_valid, sl_tx_valid, sl_q_hit, sl_unmapped;
  logic [CS_W-1:0] sl_cnp_slot, sl_tx_slot, sl_q_slot;
  logic [15:0]     sl_tx_bytes;
  hm_slots_stats_t sl_st;
  logic [CS_W:0]   sl_used;
  hm_dcqcn_slots #(.NUM_SLOTS(CC_SLOTS), .QPN_W(24), .KEY_W($clog2(NUM_QPS))) u_slots (
    .clk, .rst,
    .s_cnp_valid(s_rcnp_valid && cc_ctrl.rp_enable), .s_cnp_qpn(s_rcnp_qpn),
    .m_cnp_valid(sl_cnp_valid), .m_cnp_slot(sl_cnp_slot),
    .s_tx_valid(s_tx_valid), .s_tx_qpn(24'(s_tx_qpn)), .s_tx_bytes(s_tx_bytes),
    .m_tx_valid(sl_tx_valid), .m_tx_slot(sl_tx_slot), .m_tx_bytes(sl_tx_bytes),
    .s_query_qpn(24'(s_query_qpn)), .o_query_hit(sl_q_hit), .o_query_slot(sl_q_slot),
    .s_detach_valid, .s_detach_qpn(24'(s_detach_qpn)),
    .i_op(rp_op), .i_op_slot(rp_op_qpn[CS_W-1:0]), .i_cnp_dropped(rp_cd),
    .o_unmapped(sl_unmapped), .stats(sl_st), .o_used(sl_used)
  );
  always_ff @(posedge clk) sl_q_hit_q <= sl_q_hit && !rst;
  hm_dcqcn_rp #(.NUM_QPS(CC_SLOTS), .QPN_W(24), .TIME_W(32)) u_rp (
    .clk, .rst,
    .cfg_clamp_tgt_rate(cc_ctrl.clamp_tgt_rate), .cfg_clamp_after_inc(cc_ctrl.clamp_after_inc),
    .cfg_inc_period(cc_regs[HM_CC_INC_PERIOD]), .cfg_alpha_period(cc_regs[HM_CC_ALPHA_PERIOD]),
    .cfg_dec_period(cc_regs[HM_CC_DEC_PERIOD]), .cfg_byte_reset(cc_regs[HM_CC_BYTE_RESET][23:0]),
    .cfg_threshold(cc_ctrl.threshold), .cfg_max_rate(cc_regs[HM_CC_MAX_RATE]),
    .cfg_ai_rate(cc_regs[HM_CC_AI_RATE]), .cfg_hai_rate(cc_regs[HM_CC_HAI_RATE]),
    .cfg_min_rate(cc_regs[HM_CC_MIN_RATE]), .cfg_first_rate(cc_regs[HM_CC_FIRST_RATE]),
    .cfg_line_rate(cc_regs[HM_CC_LINE_RATE]), .cfg_gd(cc_cut.gd), .cfg_min_dec_q10(cc_cut.min_dec_q10),
    .cfg_g(cc_alpha.g), .cfg_initial_alpha(cc_alpha.initial_alpha),
    .s_cnp_valid(sl_cnp_valid), .s_cnp_qpn(24'(sl_cnp_slot)),
    .s_tx_valid(sl_tx_valid), .s_tx_qpn(24'(sl_tx_slot)), .s_tx_bytes(sl_tx_bytes),
    .m_rate_valid(rl_upd), .m_rate_qpn(rl_upd_qpn), .m_rate(rl_rate), .m_rate_limited(rl_lim),
    .o_op(rp_op), .o_op_qpn(rp_op_qpn), .o_op_timer(rp_op_timer), .o_op_flag(rp_op_flag),
    .o_cnp_dropped(rp_cd), .o_tx_dropped(rp_td), .o_tx_merged(rp_tm), .o_tx_filtered(rp_tf),
    .stats(rp_st),
    .o_now(cc_now),
    .dbg_qpn('0), .dbg_active(rp_dbg_act), .dbg_entry(rp_dbg_entry), .dbg_scan(rp_dbg_scan),
    .dbg_cnp_count(rp_dbg_cc), .dbg_tx_count(rp_dbg_tc)
  );
  hm_dcqcn_pacer #(.NUM_QPS(CC_SLOTS), .QPN_W(16), .TIME_W(32)) u_pacer (
    .clk, .rst, .i_now(cc_now), .cfg_burst(cc_regs[HM_CC_BURST][20:0]),
    .cfg_line_rate(cc_regs[HM_CC_LINE_RATE]),
    .s_rate_valid(rl_upd), .s_rate_qpn(16'(rl_upd_qpn)), .s_rate(rl_rate), .s_rate_limited(rl_lim),
    .s_query_qpn(16'(sl_q_slot)), .o_query_ok(pacer_ok),
    .s_sent_valid(sl_tx_valid), .s_sent_qpn(16'(sl_tx_slot)), .s_sent_bytes(sl_tx_bytes),
    .dbg_qpn('0), .dbg_tokens(pc_dbg_tok), .dbg_last(pc_dbg_last), .dbg_rate(pc_dbg_rate),
    .dbg_limited(pc_dbg_lim)
  );
  assign o_hold = cc_ctrl.rp_enable && sl_q_hit_q && !pacer_ok;

  hm_fifo #(.WIDTH($bits(hm_rjob_t)), .DEPTH(4)) u_cnpq (
    .clk, .rst, .s_data(cnp_cand_q), .s_valid(np_fire), .s_ready(cnp_room),
    .m_data(m_cnp), .m_valid(m_cnp_valid), .m_ready(m_cnp_ready), .level(cnp_level));

  assign stats = '{ce: ce_q, np_suppressed: np_st.suppressed, rp_cuts: rp_st.cuts, rp_activations: rp_st.activations,
                   rp_releases: rp_st.releases, no_slot: sl_st.no_slot + sl_st.bad_qpn};

  logic unused_ok;
  assign unused_ok = ^{cnp_level, np_now, np_qpn, np_supp_p, np_blk_p, np_st.cnps, np_st.blocked, np_st.bad_qpn,
                       cc_ctrl.rsvd0, cc_ctrl.rsvd1, cc_ctrl.rsvd2, cc_ctrl.rsvd3, cc_ctrl.cnp_dscp,
                       cc_ctrl.cnp_prio, cc_alpha.rsvd0, cc_alpha.rsvd1, cc_cut.rsvd0, cc_cut.rsvd1,
                       cc_regs[HM_CC_BYTE_RESET][31:24], cc_regs[HM_CC_BURST][31:21], cc_regs[HM_CC_PFC],
                       rp_st.cnp_dropped, rp_st.tx_dropped, rp_st.tx_merged, rp_st.increases, rp_st.timer_skips, rp_op_qpn[23:CS_W],
                       rp_op_timer, rp_op_flag, rp_td, rp_tm, rp_tf, rp_dbg_act, rp_dbg_entry, rp_dbg_scan,
                       rp_dbg_cc, rp_dbg_tc, pc_dbg_tok, pc_dbg_last, pc_dbg_rate, pc_dbg_lim,
                       rl_upd_qpn[23:16], rp_st.bad_qpn, sl_unmapped, sl_st.allocs, sl_used};
endmodule
