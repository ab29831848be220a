// DCQCN transmit pacer: a per-QP token bucket that holds a rate-limited QP to its current rate.
//
// Specification: hematite_model::dcqcn::Pacer (model/src/dcqcn.rs) and docs/dcqcn.md section 6;
// checked cycle for cycle by sim/tests/dcqcn_rp.rs.
//
// Per QP: tokens (42-bit signed, 2^-20 bytes), the time of the last packet, and a copy of the
// reaction point's rate and limited bit (written by its rate updates). Tokens are refilled lazily:
//   refill(q) = min(tokens + min(now - last, 2^28 - 1) * rate, burst)
//   may_send(q) = !limited || refill(q) >= 0          (deficit style: a packet may overdraw)
//   sent(q, bytes): tokens = max(refill(q) - bytes * 2^20, -65535 * 2^20), last = now
// An unlimited QP is never held back. Entries not written since reset read as unlimited at the
// line rate with a full bucket (valid bits in flops; the memories need no reset).
//
// Per cycle t: the query on s_query_qpn is answered on o_query_ok in cycle t+1 (registered) from
// the state at the start of cycle t; s_sent_* and s_rate_* are applied at the end of cycle t
// (sent first: it refills at the rate in force before this cycle's update). Storage: two small
// memories with two asynchronous read ports each and one write port each (distributed RAM).
module hm_dcqcn_pacer #(
  parameter int NUM_QPS = 64,                     // entries (QPNs 0..NUM_QPS-1), >= 2
  parameter int QPN_W   = 24,                     // width of the QPN ports
  parameter int TIME_W  = 32                      // time counter width, 8..32
) (
  input  logic              clk,
  input  logic              rst,                  // synchronous, active high

  input  logic [TIME_W-1:0] i_now,                // the reaction point's time counter
  input  logic [20:0]       cfg_burst,            // bucket depth in bytes, 1..2^20
  input  logic [31:0]       cfg_line_rate,        // rate of entries never written

  input  logic              s_rate_valid,         // rate update from the reaction point
  input  logic [QPN_W-1:0]  s_rate_qpn,
  input  logic [31:0]       s_rate,
  input  logic              s_rate_limited,

  input  logic [QPN_W-1:0]  s_query_qpn,          // may this QP start a packet now?
  output logic              o_query_ok,           // answer, one cycle later

  input  logic              s_sent_valid,         // a packet of this QP started ...
  input  logic [QPN_W-1:0]  s_sent_qpn,
  input  logic [15:0]       s_sent_bytes,         // ... with this many bytes

  input  logic [QPN_W-1:0]  dbg_qpn,              // debug read port (combinational)
  output logic [41:0]       dbg_tokens,           // refilled to last, not to now
  output logic [TIME_W-1:0] dbg_last,
  output logic [31:0]       dbg_rate,
  output logic              dbg_limited
);
  localparam int IDX_W = $clog2(NUM_QPS);
  localparam logic [TIME_W-1:0] DT_MAX = (TIME_W > 28) ? TIME_W'(28'hFFF_FFFF) : '1;
  localparam logic signed [41:0] TOK_MIN = -(42'sd65535 <<< 20);

  logic signed [41:0] tok_mem  [NUM_QPS];
  logic [TIME_W-1:0]  last_mem [NUM_QPS];
  logic [31:0]        rate_mem [NUM_QPS];
  logic               lim_mem  [NUM_QPS];
  logic [NUM_QPS-1:0] tok_v_q, rate_v_q;

  logic signed [41:0] burst;
  always_comb begin
    logic [20:0] b;
    b = cfg_burst;
    if (b > 21'h10_0000) b = 21'h10_0000;
    if (b == 21'd0)      b = 21'd1;
    burst = $signed({1'b0, b, 20'd0});
  end

  // refill of one entry at i_now
  function automatic logic signed [41:0] refill(input logic tv, input logic signed [41:0] tok,
                                                input logic [TIME_W-1:0] last,
                                                input logic [31:0] rate,
                                                input logic signed [41:0] full,
                                                input logic [TIME_W-1:0] now);
    logic [TIME_W-1:0] dt;
    logic [59:0] gain;
    logic signed [61:0] sum;
    if (!tv) return full;
    dt   = now - last;
    if (dt > DT_MAX) dt = DT_MAX;
    gain = 60'(dt) * 60'(rate);
    sum  = 62'(tok) + $signed({2'b00, gain});
    return (sum > 62'(full)) ? full : sum[41:0];
  endfunction

  // ---- query
  logic             q_in, q_ok;
  logic [IDX_W-1:0] qi;
  always_comb begin
    logic signed [41:0] r;
    logic lim;
    q_in = s_query_qpn < QPN_W'(NUM_QPS);
    qi   = s_query_qpn[IDX_W-1:0];
    lim  = rate_v_q[qi] ? lim_mem[qi] : 1'b0;
    r    = refill(tok_v_q[qi], tok_mem[qi], last_mem[qi], rate_v_q[qi] ? rate_mem[qi] : cfg_line_rate,
                  burst, i_now);
    q_ok = !q_in || !lim || r >= 0;
  end

  // ---- sent
  logic               s_in;
  logic [IDX_W-1:0]   si;
  logic signed [41:0] s_tok;
  always_comb begin
    logic signed [42:0] t;
    s_in = s_sent_valid && s_sent_qpn < QPN_W'(NUM_QPS);
    si   = s_sent_qpn[IDX_W-1:0];
    t    = 43'(refill(tok_v_q[si], tok_mem[si], last_mem[si], rate_v_q[si] ? rate_mem[si] : cfg_line_rate,
                      burst, i_now)) - $signed({7'd0, s_sent_bytes, 20'd0});
    s_tok = (t < 43'(TOK_MIN)) ? TOK_MIN : t[41:0];
  end

  logic r_in;
  logic [IDX_W-1:0] ri;
  always_comb begin
    r_in = s_rate_valid && s_rate_qpn < QPN_W'(NUM_QPS);
    ri   = s_rate_qpn[IDX_W-1:0];
  end

  always_ff @(posedge clk) begin
    if (s_in) begin
      tok_mem[si]  <= s_tok;
      last_mem[si] <= i_now;
    end
    if (r_in) begin
      rate_mem[ri] <= s_rate;
      lim_mem[ri]  <= s_rate_limited;
    end
  end

  always_ff @(posedge clk) begin
    if (rst) begin
      tok_v_q    <= '0;
      rate_v_q   <= '0;
      o_query_ok <= 1'b1;
    end else begin
      if (s_in) tok_v_q[si]  <= 1'b1;
      if (r_in) rate_v_q[ri] <= 1'b1;
      o_query_ok <= q_ok;
    end
  end

  logic [IDX_W-1:0] di;
  logic             d_in;
  always_comb begin
    d_in        = dbg_qpn < QPN_W'(NUM_QPS);
    di          = dbg_qpn[IDX_W-1:0];
    dbg_tokens  = (d_in && tok_v_q[di]) ? tok_mem[di] : burst;
    dbg_last    = last_mem[di];
    dbg_rate    = (d_in && rate_v_q[di]) ? rate_mem[di] : cfg_line_rate;
    dbg_limited = d_in && rate_v_q[di] && lim_mem[di];
  end
endmodule
