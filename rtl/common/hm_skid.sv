// Two-entry skid buffer: registers both the forward path (data/valid) and the backward path
// (ready), so a block boundary carries no combinational path in either direction.
module hm_skid #(
  // Payload width in bits.
  parameter int WIDTH = 64
) (
  input  logic             clk,
  input  logic             rst,
  input  logic [WIDTH-1:0] s_data,
  input  logic             s_valid,
  output logic             s_ready,
  output logic [WIDTH-1:0] m_data,
  output logic             m_valid,
  input  logic             m_ready
);
  logic [WIDTH-1:0] skid_q;
  logic             skid_valid_q;

  assign s_ready = !skid_valid_q;

  always_ff @(posedge clk) begin
    if (rst) begin
      m_valid      <= 1'b0;
      skid_valid_q <= 1'b0;
    end else begin
      if (!m_valid || m_ready) begin
        // Output register free: take the skid entry first, then the input.
        if (skid_valid_q) begin
          m_valid      <= 1'b1;
          skid_valid_q <= 1'b0;
        end else begin
          m_valid <= s_valid;
        end
      end else if (s_valid && s_ready) begin
        skid_valid_q <= 1'b1;
      end
    end
  end

  // Data registers load only with an entry (m_data matters only with m_valid): no copy of the
  // payload while the buffer is idle.
  always_ff @(posedge clk) begin
    if (!m_valid || m_ready) begin
      if (skid_valid_q)  m_data <= skid_q;
      else if (s_valid) m_data <= s_data;
    end else if (s_valid && s_ready) begin
      skid_q <= s_data;
    end
  end

endmodule
