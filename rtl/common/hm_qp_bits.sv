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
// TRANSPARENT = 1 hides the clear: the table then behaves, from the clock after `rst`, exactly
// as flip-flops reset to zero, at the price of a flag per row and a mask on the reads. A read
// of a row the clear has not reached returns 0; a write to such a row writes the whole row
// (zeros and the bit) and marks it cleared, and the sweep skips rows already cleared (it waits
// while a write uses the port). o_busy then only reports that the sweep is running. The
// notification point uses this (its decisions right after reset are specified against
// flip-flops); hm_uc_lack and hm_rc_req hold their inputs back instead.
//
// Writes take effect at the clock edge; a read in the same cycle returns the old bit (the owner
// forwards where it needs the new one).
module hm_qp_bits #(
  parameter int NUM   = 4096,                    // entries (indices 0..NUM-1), >= 2
  parameter int RD    = 1,                       // combinational read ports, >= 1
  parameter bit CLEAR = 1'b1,                    // clear after reset (0: contents undefined)
  parameter bit TRANSPARENT = 1'b0,              // with CLEAR: reads and writes while clearing
  parameter int AW    = (NUM > 1) ? $clog2(NUM) : 1  // index width (derived)
) (
  input  logic                 clk,
  input  logic                 rst,              // synchronous, active high: starts the clear

  output logic                 o_busy,           // the clear after reset is running

  input  logic                 i_we,             // write i_wbit at i_waddr (ignored while busy
                                                 // unless TRANSPARENT)
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

  logic [RD-1:0] rbit;
  for (genvar r = 0; r < RD; r++) begin : g_rd
    assign rbit[r] = mem[row(i_raddr[r])][i_raddr[r][RB-1:0]];
  end

  if (CLEAR && TRANSPARENT) begin : g_transparent
    logic          busy_q;
    logic [RW-1:0] idx_q;                        // the sweep's next row
    logic [NR-1:0] done_q;                       // rows cleared since reset
    logic [RW-1:0] wa;
    logic [(1 << RB)-1:0] wd, wm, onehot;
    logic          wen, sweep;
    always_comb begin
      onehot = '0;
      onehot[i_waddr[RB-1:0]] = 1'b1;
      sweep = busy_q && !i_we;
      if (i_we) begin
        wa  = row(i_waddr);
        wen = 1'b1;
        if (busy_q && !done_q[row(i_waddr)]) begin
          wm = '1;                               // a row not cleared yet: all of it
          wd = i_wbit ? onehot : '0;
        end else begin
          wm = onehot;
          wd = {(1 << RB){i_wbit}};
        end
      end else begin
        wa  = idx_q;
        wen = busy_q && !done_q[idx_q];
        wm  = '1;
        wd  = '0;
      end
    end
    always_ff @(posedge clk) begin
      if (wen) begin
        for (int b = 0; b < (1 << RB); b++) if (wm[b]) mem[wa][b] <= wd[b];
      end
    end
    always_ff @(posedge clk) begin
      if (rst) begin
        busy_q <= 1'b1;
        idx_q  <= '0;
        done_q <= '0;
      end else if (busy_q) begin
        if (wen) done_q[wa] <= 1'b1;
        if (sweep) begin
          idx_q <= idx_q + 1'b1;
          if (32'(idx_q) == NR - 1) busy_q <= 1'b0;
        end
      end
    end
    for (genvar r = 0; r < RD; r++) begin : g_mask
      assign o_rbit[r] = rbit[r] && (!busy_q || done_q[row(i_raddr[r])]);
    end
    assign o_busy = busy_q;
  end else if (CLEAR) begin : g_clear
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
    assign o_rbit = rbit;
    assign o_busy = busy_q;
  end else begin : g_noclear
    always_ff @(posedge clk) begin
      if (i_we) mem[row(i_waddr)][i_waddr[RB-1:0]] <= i_wbit;
    end
    assign o_rbit = rbit;
    assign o_busy = 1'b0;
    logic unused_ok;
    assign unused_ok = rst;
  end

  if (NUM < 2 || RD < 1) begin : g_bad
    $error("hm_qp_bits: NUM must be at least 2 and RD at least 1");
  end
endmodule
