// A synchroniser: STAGES flip-flops in the destination clock for a signal (or a Gray-coded bus,
// where at most one bit changes per source clock) that comes from another clock domain.
//
// The stages carry ASYNC_REG, which tells the implementation tools (Vivado) to place them
// together and to analyse them as a synchroniser. The path into the first stage needs a
// max-delay (datapath only) and, for a Gray-coded bus, a bus-skew constraint: those belong to
// the shell's constraints, which are not written yet (docs/fpga.md). Nothing here is
// combinational: d_i must come straight from a register of the source domain.
module hm_sync #(
  parameter int WIDTH  = 1,                      // bits, each synchronised on its own
  parameter int STAGES = 2                       // flip-flops in series, >= 2
) (
  input  logic             clk,                  // destination clock
  input  logic             rst,                  // synchronous to clk, active high
  input  logic [WIDTH-1:0] d_i,                  // from a register of the source domain
  output logic [WIDTH-1:0] q_o                   // d_i, STAGES clocks of clk later
);
  (* ASYNC_REG = "TRUE" *) logic [WIDTH-1:0] s_q [STAGES];

  always_ff @(posedge clk) begin
    if (rst) begin
      for (int i = 0; i < STAGES; i++) s_q[i] <= '0;
    end else begin
      s_q[0] <= d_i;
      for (int i = 1; i < STAGES; i++) s_q[i] <= s_q[i-1];
    end
  end
  assign q_o = s_q[STAGES-1];

  if (STAGES < 2) begin : g_bad
    $error("hm_sync: STAGES must be at least 2");
  end
endmodule
