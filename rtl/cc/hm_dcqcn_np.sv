// DCQCN notification point: decides, per received CE-marked RoCE data packet, whether to send a
// CNP to the sending QP, at most one per QP per `cfg_interval` cycles (NVIDIA's
// min_time_between_cnps; the first CE packet of a QP sends at once).
//
// Specification: hematite_model::dcqcn::Np (model/src/dcqcn.rs), checked cycle for cycle by
// sim/tests/dcqcn_np.rs; design notes in docs/dcqcn.md. Latency: the decision for the event on
// s_ce_* in cycle t appears on m_cnp_* / o_suppressed / o_blocked in cycle t+1 (registered).
//
// State: per QP the time of its last CNP (a NUM_QPS x TIME_W memory with one asynchronous read
// port and one write port: distributed RAM) and a valid bit (hm_qp_bits: distributed RAM that
// reads as cleared from the clock after reset). A free-running TIME_W-bit counter is the clock. Ages are (now - last) mod 2^TIME_W; the interval is
// capped at 2^(TIME_W-2). Each cycle without a CE event scrubs one entry (round robin): an
// entry older than half the counter period is invalidated, so that an age never wraps.
//
// Per cycle, for a CE event on QP q (q < NUM_QPS):
//   due = !valid[q] || age(last[q]) >= interval
//   !due             -> o_suppressed (counted)
//   due, i_cnp_full  -> o_blocked (counted), nothing stored: the next CE packet tries again
//   due              -> CNP request for q, last[q] = now, valid[q] = 1
// A CE event with q >= NUM_QPS is counted (stats.bad_qpn) and ignored.
module hm_dcqcn_np
  import hm_pkg::*;
#(
  // (the defaults are the engine's: hm_eng_cc, and so the suite's synthesis, use these)
  parameter int NUM_QPS = 4096,                     // table entries (QPNs 0..NUM_QPS-1), >= 2
  parameter int QPN_W   = 16,                       // width of the QPN inputs and outputs
  parameter int TIME_W  = 24,                       // time counter width, 8..32
  parameter logic [TIME_W-1:0] NOW_INIT = '0        // counter value after reset (tests)
) (
  input  logic              clk,
  input  logic              rst,                    // synchronous, active high

  input  logic [TIME_W-1:0] cfg_interval,           // CNP interval in cycles (register)

  input  logic              s_ce_valid,             // CE-marked data packet accepted ...
  input  logic [QPN_W-1:0]  s_ce_qpn,               // ... for this local QP
  input  logic              i_cnp_full,             // the CNP sender cannot take a request

  output logic              m_cnp_valid,            // send a CNP for local QP m_cnp_qpn
  output logic [QPN_W-1:0]  m_cnp_qpn,
  output logic              o_suppressed,           // CE packet inside the QP's interval
  output logic              o_blocked,              // CNP due but i_cnp_full

  output hm_np_stats_t      stats,
  output logic [TIME_W-1:0] o_now                   // the time counter (for the RP and tests)
);
  localparam int IDX_W = $clog2(NUM_QPS);
  localparam logic [TIME_W-1:0] CAP  = TIME_W'(1) << (TIME_W - 2);
  localparam logic [TIME_W-1:0] HALF = TIME_W'(1) << (TIME_W - 1);

  // (last_mem is banks of up to 64 entries and a multiplexer over them: Yosys maps no deeper
  // single-port distributed RAM, and a 4,096-entry one fails its mapping)
  localparam int BB  = IDX_W < 6 ? IDX_W : 6;
  localparam int NB  = (NUM_QPS + (1 << BB) - 1) >> BB;
  localparam int NBW = NB > 1 ? $clog2(NB) : 1;
  logic [NB-1:0][TIME_W-1:0] last_b;
  logic valid_rd, valid_we, valid_busy;
  logic [TIME_W-1:0] now_q, interval_q;
  logic [IDX_W-1:0]  scrub_q;

  // ---- read (one port: the CE event's QP, else the scrub pointer)
  logic              in_range;
  logic [IDX_W-1:0]  addr;
  logic [TIME_W-1:0] rd_last, age;
  logic              rd_valid, due;
  logic [TIME_W-1:0] rd_b;
  assign addr = s_ce_valid ? s_ce_qpn[IDX_W-1:0] : scrub_q;
  if (NB > 1) begin : g_bsel
    assign rd_b = last_b[NBW'(32'(addr) >> BB)];
  end else begin : g_bsel1
    assign rd_b = last_b[0];
  end
  always_comb begin
    in_range = s_ce_qpn < QPN_W'(NUM_QPS);
    rd_last  = rd_b;
    rd_valid = valid_rd;
    age      = now_q - rd_last;
    due      = !rd_valid || age >= interval_q;
  end

  // ---- decision
  logic fire, supp, blk, bad, scrub_clr;
  always_comb begin
    fire      = 1'b0;
    supp      = 1'b0;
    blk       = 1'b0;
    bad       = 1'b0;
    scrub_clr = 1'b0;
    if (s_ce_valid) begin
      if (!in_range)        bad  = 1'b1;
      else if (!due)        supp = 1'b1;
      else if (i_cnp_full)  blk  = 1'b1;
      else                  fire = 1'b1;
    end else begin
      scrub_clr = rd_valid && age >= HALF;
    end
  end

  for (genvar b = 0; b < NB; b++) begin : g_last
    logic [TIME_W-1:0] last_mem [1 << BB];
    assign last_b[b] = last_mem[addr[BB-1:0]];
    always_ff @(posedge clk) begin
      if (fire && (32'(addr) >> BB) == b) last_mem[addr[BB-1:0]] <= now_q;
    end
  end

  assign valid_we = fire || scrub_clr;
  // (the valid bits in distributed RAM, rows of 64, cleared after reset by a sweep that is
  // invisible at the ports: as 4,096 flip-flops they cost about 15,000 LUTs)
  hm_qp_bits #(.NUM(NUM_QPS), .RD(1), .TRANSPARENT(1'b1)) u_valid (
    .clk, .rst, .o_busy(valid_busy), .i_we(valid_we), .i_waddr(addr), .i_wbit(fire),
    .i_raddr(addr), .o_rbit(valid_rd));

  always_ff @(posedge clk) begin
    if (rst) begin
      now_q           <= NOW_INIT;
      interval_q      <= (cfg_interval > CAP) ? CAP : cfg_interval;
      scrub_q         <= '0;
      m_cnp_valid     <= 1'b0;
      m_cnp_qpn       <= '0;
      o_suppressed    <= 1'b0;
      o_blocked       <= 1'b0;
      stats <= '0;
    end else begin
      now_q        <= now_q + 1'b1;
      interval_q   <= (cfg_interval > CAP) ? CAP : cfg_interval;
      m_cnp_valid  <= fire;
      m_cnp_qpn    <= s_ce_qpn;
      o_suppressed <= supp;
      o_blocked    <= blk;
      if (!s_ce_valid) scrub_q <= (32'(scrub_q) == NUM_QPS - 1) ? '0 : scrub_q + 1'b1;
      if (fire) stats.cnps       <= stats.cnps + 1'b1;
      if (supp) stats.suppressed <= stats.suppressed + 1'b1;
      if (blk)  stats.blocked    <= stats.blocked + 1'b1;
      if (bad)  stats.bad_qpn    <= stats.bad_qpn + 1'b1;
    end
  end

  assign o_now = now_q;

  logic unused_ok;
  assign unused_ok = valid_busy;
endmodule
