// One-entry holding register that lets a newer entry replace the one it holds: for records
// that are cumulative (the newest says everything the older one did), so a slow consumer sees
// one merged record instead of a queue. `s_merge` says the incoming entry may replace the
// held one (the caller compares them); otherwise it waits until the held one is taken.
module hm_merge_reg #(
  // Entry width in bits.
  parameter int WIDTH = 32
) (
  input  logic             clk,
  input  logic             rst,
  input  logic [WIDTH-1:0] s_data,
  input  logic             s_valid,
  input  logic             s_merge,    // s_data may replace m_data
  output logic             s_ready,
  output logic [WIDTH-1:0] m_data,
  output logic             m_valid,
  input  logic             m_ready
);
  logic take, put;
  assign take    = m_valid && m_ready;
  assign s_ready = !m_valid || take || s_merge;
  assign put     = s_valid && s_ready;
  always_ff @(posedge clk) begin
    if (put) m_data <= s_data;
    if (rst) m_valid <= 1'b0;
    else if (put) m_valid <= 1'b1;
    else if (take) m_valid <= 1'b0;
  end
endmodule
