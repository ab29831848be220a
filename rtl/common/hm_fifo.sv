// Synchronous first-word-fall-through FIFO with a registered RAM read (block-RAM friendly).
// s_* is the write side, m_* the read side, both valid/ready. `level` counts every stored
// entry including the one presented on m_*.
module hm_fifo #(
  // Entry width in bits.
  parameter int WIDTH = 64,
  // Entries in the RAM (power of two); one more sits in the output register.
  parameter int DEPTH = 16
) (
  input  logic             clk,
  input  logic             rst,
  input  logic [WIDTH-1:0] s_data,
  input  logic             s_valid,
  output logic             s_ready,
  output logic [WIDTH-1:0] m_data,
  output logic             m_valid,
  input  logic             m_ready,
  output logic [$clog2(DEPTH+1):0] level
);
  localparam int AW = $clog2(DEPTH);

  logic [WIDTH-1:0] mem [DEPTH];
  logic [AW:0]      wr_ptr_q, rd_ptr_q;
  logic [AW:0]      used;          // entries in the RAM
  logic             push, pop_ram;

  assign used    = wr_ptr_q - rd_ptr_q;
  assign s_ready = used != DEPTH[AW:0];
  assign push    = s_valid && s_ready;
  assign pop_ram = (used != '0) && (!m_valid || m_ready);
  assign level   = ($clog2(DEPTH+1)+1)'(used) + ($clog2(DEPTH+1)+1)'(m_valid);

  always_ff @(posedge clk) begin
    if (push) mem[wr_ptr_q[AW-1:0]] <= s_data;
    if (pop_ram) m_data <= mem[rd_ptr_q[AW-1:0]];
  end

  always_ff @(posedge clk) begin
    if (rst) begin
      wr_ptr_q <= '0;
      rd_ptr_q <= '0;
      m_valid  <= 1'b0;
    end else begin
      if (push) wr_ptr_q <= wr_ptr_q + 1'b1;
      if (pop_ram) begin
        rd_ptr_q <= rd_ptr_q + 1'b1;
        m_valid  <= 1'b1;
      end else if (m_ready) begin
        m_valid <= 1'b0;
      end
    end
  end

  if ((1 << AW) != DEPTH) begin : g_bad_depth
    $error("hm_fifo: DEPTH must be a power of two");
  end

endmodule
