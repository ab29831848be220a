// Data term of a wide CRC-32 update: L(beat), the register that a zero register reaches after
// absorbing all DATA_BYTES bytes of the beat (lane 0 first). The XOR tree is split into PARTS
// partial sums, registered, so the caller folds them into its register update:
//   r' = Z^DATA_BYTES * r ^ part_q[0] ^ ... ^ part_q[PARTS-1]
// One cycle of latency, no flow control (the caller carries valid alongside).
module hm_crc32_fold #(
  // Bytes per beat.
  parameter int DATA_BYTES = 64,
  // Number of registered partial sums (splits the XOR tree for timing); divides DATA_BYTES.
  parameter int PARTS = 4
) (
  input  logic                          clk,
  input  logic                          en,      // register enable
  input  logic [DATA_BYTES*8-1:0]       data,
  output logic [PARTS-1:0][31:0]        part_q
);
  import hm_crc_pkg::*;

  localparam int DW = DATA_BYTES * 8;
  localparam int CW = DW / PARTS;

  // Row i: which beat bits form bit i of L(beat).
  function automatic logic [31:0][DW-1:0] data_matrix();
    logic [31:0][DW-1:0] m;
    logic [7:0][31:0]    v;
    for (int j = 0; j < 8; j++) v[j] = hm_crc_zbyte(32'h1 << j);
    for (int b = DATA_BYTES - 1; b >= 0; b--) begin
      for (int j = 0; j < 8; j++) begin
        for (int i = 0; i < 32; i++) m[i][8*b+j] = v[j][i];
        v[j] = hm_crc_zbyte(v[j]);
      end
    end
    return m;
  endfunction

  localparam logic [31:0][DW-1:0] DMAT = data_matrix();

  // The XOR trees feed only the enabled register, so they are written inside its enable: a
  // simulator evaluates them only for a beat that moves (same logic in synthesis).
  always_ff @(posedge clk) begin
    if (en) begin
      for (int p = 0; p < PARTS; p++)
        for (int i = 0; i < 32; i++)
          part_q[p][i] <= ^(data[p*CW +: CW] & DMAT[i][p*CW +: CW]);
    end
  end

  if (DW % (PARTS * 8) != 0) begin : g_bad_parts
    $error("hm_crc32_fold: PARTS must divide DATA_BYTES");
  end

endmodule
