// A table of one bit per queue pair (or any index), held in distributed RAM rather than in
// flip-flops: one write port that writes a single bit, RD combinational read ports, and a
// clear after reset that sweeps the table a row a cycle.
//
// A 4,096-bit vector of flip-flops written at a computed index costs thousands of LUTs for its
// write decode alone, and more for each further write port. Held as rows of 64 bits (Yosys maps
// a 4,096 x 1 distributed RAM to no primitive, and a simulator reads one row instead of 64
// banks), the same table is a few hundred LUTRAM. The price is the clear: memories have no reset,
// so after `rst` the module clears one row of 2^RB bits per cycle, ceil(NUM / 2^RB) cycles in
// all, and holds `o_busy` high meanwhile. While busy:
//   - writes are ignored (the owner must hold back whatever writes: it gates its inputs on
//     o_busy, as hm_uc_lack and hm_rc_req do);
//   - a read of a row not yet cleared returns the row's old contents (the owner does not use
//     reads while busy).
// A table that needs no clear (CLEAR = 0) is never busy.
//
// Writes take effect at the clock edge; a read in the same cycle returns the old bit (the owner
// forwards where it needs the new one).
module hm_qp_bits #(
  parameter int NUM   = 4096,                    // entries (indices 0..NUM-1), >= 2
  parameter int RD    = 1,                       // combinational read ports, >= 1
  parameter bit CLEAR = 1'b1,                    // clear after reset (0: contents undefined)
  parameter int AW    = (NUM > 1) ? $clog2(NUM) : 1  // index width (derived)
) (
  input  logic                 clk,
  input  logic                 rst,              // synchronous, active high: starts the clear

  output logic                 o_busy,           // the clear after reset is running

  input  logic                 i_we,             // write i_wbit at i_waddr (ignored while busy)
  input  logic [AW-1:0]        i_waddr,
  input  logic                 i_wbit,

  input  logic [RD-1:0][AW-1:0] i_raddr,         // read port r: o_rbit[r] = table[i_raddr[r]]
  output logic [RD-1:0]        o_rbit
);
  localparam int RB = AW < 6 ? AW : 6;           // a row holds 2^RB bits
  localparam int NR = (NUM + (1 << RB) - 1) >> RB;  // rows
  localparam int RW = NR > 1 ? $clog2(NR) : 1;   // row index width

  logic [(1 << RB)-1:0] mem [NR];

  function automatic logic [RW-1:0] row(input logic [AW-1:0] a);
    return RW'(32'(a) >> RB);
  endfunction

  for (genvar r = 0; r < RD; r++) begin : g_rd
    assign o_rbit[r] = mem[row(i_raddr[r])][i_raddr[r][RB-1:0]];
  end

  if (CLEAR) begin : g_clear
    logic          busy_q;
    logic [RW-1:0] idx_q;                        // the row being cleared
    always_ff @(posedge clk) begin
      if (busy_q) mem[idx_q] <= '0;
      else if (i_we) mem[row(i_waddr)][i_waddr[RB-1:0]] <= i_wbit;
    end
    always_ff @(posedge clk) begin
      if (rst) begin
        busy_q <= 1'b1;
        idx_q  <= '0;
      end else if (busy_q) begin
        idx_q <= idx_q + 1'b1;
        if (32'(idx_q) == NR - 1) busy_q <= 1'b0;
      end
    end
    assign o_busy = busy_q;
  end else begin : g_noclear
    always_ff @(posedge clk) begin
      if (i_we) mem[row(i_waddr)][i_waddr[RB-1:0]] <= i_wbit;
    end
    assign o_busy = 1'b0;
    logic unused_ok;
    assign unused_ok = rst;
  end

  if (NUM < 2 || RD < 1) begin : g_bad
    $error("hm_qp_bits: NUM must be at least 2 and RD at least 1");
  end
endmodule
