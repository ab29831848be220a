// Co-simulation wrapper of the DCQCN rate-limiter slot map (hm_dcqcn_slots) for the
// cycle-for-cycle test against the reference model (sim/tests/dcqcn_slots.rs): 4 slots, 8-bit
// QPNs, 5-bit keys (QPNs 32..255 are out of range). The reaction point's reports (i_op*,
// i_cnp_dropped) come from the test, which runs the reference reaction point.
module hm_sim_slots_top (
  input  logic        clk,
  input  logic        rst,
  input  logic        s_cnp_valid,
  input  logic [7:0]  s_cnp_qpn,
  input  logic        s_tx_valid,
  input  logic [7:0]  s_tx_qpn,
  input  logic [15:0] s_tx_bytes,
  input  logic [7:0]  s_query_qpn,
  input  logic        s_detach_valid,
  input  logic [7:0]  s_detach_qpn,
  input  logic [2:0]  i_op,
  input  logic [1:0]  i_op_slot,
  input  logic        i_cnp_dropped,
  output logic        m_cnp_valid,
  output logic [1:0]  m_cnp_slot,
  output logic        m_tx_valid,
  output logic [1:0]  m_tx_slot,
  output logic [15:0] m_tx_bytes,
  output logic        o_query_hit,
  output logic [1:0]  o_query_slot,
  output logic        o_unmapped,
  output logic [31:0] stat_no_slot,
  output logic [31:0] stat_bad_qpn,
  output logic [31:0] stat_allocs,
  output logic [2:0]  o_used
);
  hm_dcqcn_slots #(.NUM_SLOTS(4), .QPN_W(8), .KEY_W(5)) u_slots (.*);
endmodule
