// Co-simulation wrapper of the DCQCN blocks of one NIC: reaction point (hm_dcqcn_rp), pacer
// (hm_dcqcn_pacer, fed by the reaction point's rate updates) and notification point
// (hm_dcqcn_np), with the parameters the cycle-for-cycle tests (sim/tests/dcqcn_rp.rs) and the
// incast experiment (hematite-experiment --backend rtl) use: 13 QPs (not a power of two), 8-bit
// QPNs (13..255 are out of range), a 32-bit time counter that starts at 0xFFFF_F000 (it wraps
// after 4096 cycles). A started packet (s_tx_*) is reported to both the reaction point's byte
// counter and the pacer.
module hm_sim_cc_top (
  input  logic        clk,
  input  logic        rst,
  input  logic        cfg_clamp_tgt_rate,
  input  logic        cfg_clamp_after_inc,
  input  logic [31:0] cfg_inc_period,
  input  logic [31:0] cfg_alpha_period,
  input  logic [31:0] cfg_dec_period,
  input  logic [23:0] cfg_byte_reset,
  input  logic [4:0]  cfg_threshold,
  input  logic [31:0] cfg_max_rate,
  input  logic [31:0] cfg_ai_rate,
  input  logic [31:0] cfg_hai_rate,
  input  logic [31:0] cfg_min_rate,
  input  logic [31:0] cfg_first_rate,
  input  logic [31:0] cfg_line_rate,
  input  logic [3:0]  cfg_gd,
  input  logic [10:0] cfg_min_dec_q10,
  input  logic [9:0]  cfg_g,
  input  logic [9:0]  cfg_initial_alpha,
  input  logic [20:0] cfg_burst,
  input  logic [31:0] cfg_cnp_interval,
  input  logic        s_cnp_valid,
  input  logic [7:0]  s_cnp_qpn,
  input  logic        s_tx_valid,
  input  logic [7:0]  s_tx_qpn,
  input  logic [15:0] s_tx_bytes,
  input  logic [7:0]  s_query_qpn,
  input  logic        s_ce_valid,
  input  logic [7:0]  s_ce_qpn,
  input  logic        i_cnp_full,
  input  logic [7:0]  dbg_qpn,
  output logic        m_rate_valid,
  output logic [7:0]  m_rate_qpn,
  output logic [31:0] m_rate,
  output logic        m_rate_limited,
  output logic [2:0]  o_op,
  output logic [7:0]  o_op_qpn,
  output logic [1:0]  o_op_timer,
  output logic        o_op_flag,
  output logic        o_cnp_dropped,
  output logic        o_tx_dropped,
  output logic        o_tx_merged,
  output logic        o_tx_filtered,
  output logic [31:0] stat_cnp_dropped,
  output logic [31:0] stat_tx_dropped,
  output logic [31:0] stat_tx_merged,
  output logic [31:0] stat_bad_qpn,
  output logic [31:0] stat_activations,
  output logic [31:0] stat_releases,
  output logic [31:0] stat_cuts,
  output logic [31:0] stat_increases,
  output logic [31:0] stat_timer_skips,
  output logic [31:0] o_now,
  output logic        dbg_active,
  output logic [205:0] dbg_entry,
  output logic [3:0]  dbg_scan,
  output logic [7:0]  dbg_cnp_count,
  output logic [7:0]  dbg_tx_count,
  output logic        o_query_ok,
  output logic [41:0] dbg_tokens,
  output logic [31:0] dbg_last,
  output logic [31:0] dbg_rate,
  output logic        dbg_limited,
  output logic        m_cnp_valid,
  output logic [7:0]  m_cnp_qpn,
  output logic        o_np_suppressed,
  output logic        o_np_blocked,
  output logic [31:0] stat_np_cnps
);
  localparam logic [31:0] NOW_INIT = 32'hFFFF_F000;

  hm_dcqcn_rp #(.NUM_QPS(13), .QPN_W(8), .TIME_W(32), .CNP_FIFO_DEPTH(2), .TX_FIFO_DEPTH(4),
                .NOW_INIT(NOW_INIT)) u_rp (.*);

  hm_dcqcn_pacer #(.NUM_QPS(13), .QPN_W(8), .TIME_W(32)) u_pacer (
    .clk, .rst, .i_now(o_now), .cfg_burst, .cfg_line_rate,
    .s_rate_valid(m_rate_valid), .s_rate_qpn(m_rate_qpn), .s_rate(m_rate), .s_rate_limited(m_rate_limited),
    .s_query_qpn, .o_query_ok,
    .s_sent_valid(s_tx_valid), .s_sent_qpn(s_tx_qpn), .s_sent_bytes(s_tx_bytes),
    .dbg_qpn, .dbg_tokens, .dbg_last, .dbg_rate, .dbg_limited
  );

  logic [31:0] np_now, np_supp, np_blk, np_bad;
  hm_dcqcn_np #(.NUM_QPS(13), .QPN_W(8), .TIME_W(32), .NOW_INIT(NOW_INIT)) u_np (
    .clk, .rst, .cfg_interval(cfg_cnp_interval), .s_ce_valid, .s_ce_qpn, .i_cnp_full,
    .m_cnp_valid, .m_cnp_qpn, .o_suppressed(o_np_suppressed), .o_blocked(o_np_blocked),
    .stat_cnps(stat_np_cnps), .stat_suppressed(np_supp), .stat_blocked(np_blk), .stat_bad_qpn(np_bad),
    .o_now(np_now)
  );
  // verilator lint_off UNUSEDSIGNAL
  logic unused;
  assign unused = ^{np_now, np_supp, np_blk, np_bad};
  // verilator lint_on UNUSEDSIGNAL
endmodule
