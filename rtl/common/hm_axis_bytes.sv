// Byte counter of an AXI4-Stream port: the bytes of every beat taken (tvalid && tready), by
// its tkeep. Three registered stages, so no stage is wider than one small adder: the set bits
// of each 8-bit group of tkeep, their sum, the running total. `count` lags the stream by three
// cycles and wraps at 2^32 (a reader samples it at least every 2^32 / KEEP_WIDTH cycles).
module hm_axis_bytes #(
  // Stream data width in bits (a multiple of 64).
  parameter int DATA_WIDTH = 512,
  // tkeep width.
  parameter int KEEP_WIDTH = DATA_WIDTH / 8
) (
  input  logic                  clk,
  input  logic                  rst,
  input  logic [KEEP_WIDTH-1:0] mon_tkeep,
  input  logic                  mon_fire,     // tvalid && tready
  output logic [31:0]           count
);
  localparam int G  = KEEP_WIDTH / 8;         // 8-bit groups
  localparam int SW = $clog2(KEEP_WIDTH + 1); // width of a beat's byte count

  logic [G-1:0][3:0] grp_q;
  logic [SW-1:0]     beat_q;

  always_ff @(posedge clk) begin
    if (rst) begin
      grp_q  <= '0;
      beat_q <= '0;
      count  <= '0;
    end else begin
      for (int g = 0; g < G; g++) begin
        logic [3:0] n;
        n = '0;
        for (int b = 0; b < 8; b++) n = n + 4'(mon_tkeep[8 * g + b]);
        grp_q[g] <= mon_fire ? n : 4'd0;
      end
      begin
        logic [SW-1:0] t;
        t = '0;
        for (int g = 0; g < G; g++) t = t + SW'(grp_q[g]);
        beat_q <= t;
      end
      count <= count + 32'(beat_q);
    end
  end

  if (KEEP_WIDTH % 8 != 0 || KEEP_WIDTH < 8) begin : g_bad_param
    $error("hm_axis_bytes: KEEP_WIDTH must be a multiple of 8");
  end
endmodule
