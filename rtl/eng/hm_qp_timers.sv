// Per-QP deadline timers, scanned one QP per cycle: a free-running cycle counter (o_now), a
// table of {armed, deadline} per QP (block RAM, registered read), and a FIFO of the QPs whose
// armed deadline has passed. A QP is reported each time the scan finds it expired while the
// FIFO has room, so the owner re-checks its own copy of the timer when it takes one (the
// completer's ACK timeout and RNR timer).
module hm_qp_timers #(
  // Timer entries (QPs), a power of two.
  parameter int NUM_QPS = 4096,
  // Expired-QP FIFO entries (a power of two).
  parameter int FIFO_DEPTH = 8,
  // Time counter width in bits (wide enough never to wrap in practice).
  parameter int TIME_W = 48,
  // QPN width (derived).
  localparam int QW = $clog2(NUM_QPS)
) (
  input  logic              clk,
  input  logic              rst,

  // The cycle counter (0 after reset)
  output logic [TIME_W-1:0] o_now,

  // Table write: QP i_wr_qpn's timer becomes {i_wr_armed, i_wr_deadline}
  input  logic              i_wr,
  input  logic [QW-1:0]     i_wr_qpn,
  input  logic              i_wr_armed,
  input  logic [TIME_W-1:0] i_wr_deadline,

  // Expired QPs
  output logic [QW-1:0]     m_qpn,
  output logic              m_valid,
  input  logic              m_ready
);
  logic [TIME_W:0] tmr_mem [NUM_QPS];     // {armed, deadline}
  logic [QW-1:0]   scan_q, scan_d1_q;
  logic [TIME_W:0] scan_rd;
  logic            push, room;

  always_ff @(posedge clk) begin
    scan_rd   <= tmr_mem[scan_q];
    scan_d1_q <= scan_q;
    if (i_wr) tmr_mem[i_wr_qpn] <= {i_wr_armed, i_wr_deadline};
    if (rst) begin
      o_now  <= '0;
      scan_q <= '0;
    end else begin
      o_now  <= o_now + 1'b1;
      scan_q <= scan_q + 1'b1;
    end
  end

  assign push = scan_rd[TIME_W] && $signed(o_now - scan_rd[TIME_W-1:0]) >= 0 && room;

  logic [$clog2(FIFO_DEPTH+1):0] level_unused;
  hm_fifo #(.WIDTH(QW), .DEPTH(FIFO_DEPTH)) u_fifo (
    .clk, .rst, .s_data(scan_d1_q), .s_valid(push), .s_ready(room),
    .m_data(m_qpn), .m_valid, .m_ready, .level(level_unused));
endmodule
