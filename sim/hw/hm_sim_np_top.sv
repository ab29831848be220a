// Co-simulation wrapper of the DCQCN notification point (hm_dcqcn_np) with the parameters the
// cycle-for-cycle test uses (sim/tests/dcqcn_np.rs): 13 QPs (not a power of two, so the scrub
// pointer's wrap is exercised), 8-bit QPNs (QPNs 13..255 are out of range), a 12-bit time
// counter that starts at 0xE00 (it wraps within the first 512 cycles).
module hm_sim_np_top (
  input  logic        clk,
  input  logic        rst,
  input  logic [11:0] cfg_interval,
  input  logic        s_ce_valid,
  input  logic [7:0]  s_ce_qpn,
  input  logic        i_cnp_full,
  output logic        m_cnp_valid,
  output logic [7:0]  m_cnp_qpn,
  output logic        o_suppressed,
  output logic        o_blocked,
  output logic [31:0] stat_cnps,
  output logic [31:0] stat_suppressed,
  output logic [31:0] stat_blocked,
  output logic [31:0] stat_bad_qpn,
  output logic [11:0] o_now
);
  hm_dcqcn_np #(.NUM_QPS(13), .QPN_W(8), .TIME_W(12), .NOW_INIT(12'hE00)) u_np (.*);
endmodule
