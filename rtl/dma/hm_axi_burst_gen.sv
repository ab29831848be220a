// AXI4 address-channel burst generator shared by the DMA engines: splits one request of
// `nbeats` full beats starting at a beat-aligned address into INCR bursts that never cross a
// 4 KiB boundary and are at most MAX_BURST beats, and issues them on one address channel
// (ARx or AWx payload; VALID registered, payload stable until READY) while fewer than
// MAX_OUTSTANDING bursts are in flight.
//
// The address is kept as page number + beat index within the page (page + 1 ready in its own
// register), so the 4 KiB rule needs only narrow arithmetic. The size of a request's first
// burst is computed from the request itself, and a new request is accepted in the cycle the
// previous one's last burst is loaded, so single-burst requests go out one per cycle; within
// a request the next burst's size is registered one cycle after the address and count
// changed, so its bursts go out at most every other cycle (plenty for bursts of two beats or
// more).
module hm_axi_burst_gen #(
  // AXI address width.
  parameter int ADDR_WIDTH = 64,
  // log2 of the bytes per beat.
  parameter int KB = 6,
  // Width of beat counts.
  parameter int BW = 27,
  // Beats per burst (1..256).
  parameter int MAX_BURST = 64,
  // Bursts in flight.
  parameter int MAX_OUTSTANDING = 8,
  // Bits of a beat index within a 4 KiB page, and of a page number (derived).
  localparam int PB = 12 - KB,
  localparam int PW = ADDR_WIDTH - 12
) (
  input  logic                  clk,
  input  logic                  rst,

  // A new request (accepted when s_ready)
  input  logic [PW-1:0]         s_page,     // page of the first beat
  input  logic [PW-1:0]         s_page1,    // s_page + 1
  input  logic [PB:0]           s_beat,     // beat index of the first beat in its page
  input  logic [BW-1:0]         s_nbeats,   // beats to request (>= 1)
  input  logic                  s_valid,
  output logic                  s_ready,

  input  logic                  gate,       // extra condition for loading a burst
  input  logic                  done,       // one burst completed (last R beat / B response)

  // Address channel
  output logic [ADDR_WIDTH-1:0] m_addr,
  output logic [7:0]            m_len,
  output logic                  m_valid,
  input  logic                  m_ready,

  // A burst was loaded into the address register this cycle: its beats, and whether it is the
  // request's last
  output logic                  load,
  output logic [8:0]            load_beats,
  output logic                  load_last
);
  logic                  busy_q, burst_ok_q, fire;
  logic [PW-1:0]         page_q, page1_q;
  logic [PB:0]           beat_q;
  logic [BW-1:0]         left_q;
  logic [$clog2(MAX_OUTSTANDING+1)-1:0] outst_q;
  logic [8:0]            burst_d, burst_n, burst;

  assign fire    = m_valid && m_ready;

  // size of the next burst: of the current request (burst_d), of a new one (burst_n)
  function automatic logic [8:0] burst_size(input logic [PB:0] beat, input logic [BW-1:0] left);
    logic [PB+1:0] to4k;
    logic [8:0]    b;
    to4k = (PB+2)'(1 << PB) - (PB+2)'(beat);
    b    = 9'(MAX_BURST);
    if (10'(to4k) < 10'(b)) b = 9'(to4k);
    if (left < BW'(b)) b = 9'(left);
    return b;
  endfunction
  assign burst_d = burst_size(beat_q, left_q);
  assign burst_n = burst_size(s_beat, s_nbeats);

  assign load = busy_q && burst_ok_q && gate && (!m_valid || fire) &&
                outst_q + $bits(outst_q)'(fire) - $bits(outst_q)'(done) < $bits(outst_q)'(MAX_OUTSTANDING);
  assign load_beats = burst;
  assign load_last  = left_q == BW'(burst);
  assign s_ready    = !busy_q || (load && load_last);

  always_ff @(posedge clk) begin
    if (rst) begin
      busy_q     <= 1'b0;
      burst_ok_q <= 1'b0;
      m_valid    <= 1'b0;
      outst_q    <= '0;
    end else begin
      burst_ok_q <= !load;
      burst      <= burst_d;
      if (fire) m_valid <= 1'b0;
      if (load) begin
        m_valid <= 1'b1;
        m_addr  <= {page_q, beat_q[PB-1:0], KB'(0)};
        m_len   <= 8'(burst - 9'd1);
        left_q  <= left_q - BW'(burst);
        if ((PB+2)'(beat_q) + (PB+2)'(burst) == (PB+2)'(1 << PB)) begin
          beat_q  <= '0;
          page_q  <= page1_q;
          page1_q <= page1_q + 1'b1;
        end else begin
          beat_q  <= beat_q + (PB+1)'(burst);
        end
        if (left_q == BW'(burst)) busy_q <= 1'b0;
      end
      // a new request (possibly in the cycle its predecessor's last burst was loaded)
      if (s_valid && s_ready) begin
        busy_q     <= 1'b1;
        page_q     <= s_page;
        page1_q    <= s_page1;
        beat_q     <= s_beat;
        left_q     <= s_nbeats;
        burst      <= burst_n;
        burst_ok_q <= 1'b1;
      end
      outst_q <= outst_q + $bits(outst_q)'(fire) - $bits(outst_q)'(done);
    end
  end

  if (MAX_BURST < 1 || MAX_BURST > 256) begin : g_bad_burst
    $error("hm_axi_burst_gen: MAX_BURST must be 1..256");
  end
endmodule
