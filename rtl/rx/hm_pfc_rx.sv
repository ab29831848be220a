// Priority flow control receiver (IEEE 802.1Qbb): watches the frames the MAC delivers and keeps
// one pause timer per priority. The TX side holds new packets of a paused priority.
//
// Frame layout (bytes from the start of the frame, without FCS; untagged MAC control frame):
//   0..5   destination 01-80-C2-00-00-01      6..11  source
//   12..13 EtherType 0x8808 (MAC control)      14..15 opcode 0x0101 (PFC)
//   16..17 class-enable vector (bit i: priority i; bits 15..8 reserved)
//   18..33 pause time of priority 0..7, 16 bits each, in quanta of 512 bit times
// A frame that matches (and is at least 34 bytes long) sets, for every enabled priority, its
// timer to time * cfg_quanta_q8 / 256 cycles (time 0 resumes it at once). Timers count down
// one per cycle. Other frames are ignored (the RX path drops and counts them on its own).
//
// The tap only observes the stream (no back-pressure). Output registered: o_paused[i] is set
// from the cycle after the frame's 34th byte was seen.
module hm_pfc_rx #(
  parameter int DATA_WIDTH = 512,                 // MAC stream width in bits, >= 64
  localparam int KEEP_WIDTH = DATA_WIDTH / 8
) (
  input  logic                  clk,
  input  logic                  rst,

  input  logic [DATA_WIDTH-1:0] s_axis_tdata,     // the MAC's receive stream (observed)
  input  logic [KEEP_WIDTH-1:0] s_axis_tkeep,
  input  logic                  s_axis_tvalid,
  input  logic                  s_axis_tready,
  input  logic                  s_axis_tlast,

  input  logic                  cfg_enable,       // honour PFC frames
  input  logic [15:0]           cfg_quanta_q8,    // cycles per quantum, 8 fraction bits

  output logic [7:0]            o_paused,         // priority i is paused
  output logic [31:0]           stat_pfc_rx       // PFC frames honoured
);
  localparam int HB = 34;                         // header bytes needed
  localparam int BEATS = (HB + KEEP_WIDTH - 1) / KEEP_WIDTH;
  localparam int BW = $clog2(BEATS + 1);

  logic [8*HB-1:0] hdr_q;                         // the first HB bytes of the current frame
  logic [BW-1:0]   beat_q;                        // beats of the current frame seen (saturating)
  logic [23:0]     timer_q [8];

  // the header as it stands after this beat
  logic [8*HB-1:0] hdr_d;
  logic            hs, complete;
  always_comb begin
    hs    = s_axis_tvalid && s_axis_tready;
    hdr_d = hdr_q;
    for (int b = 0; b < HB; b++)
      if (b / KEEP_WIDTH == int'(beat_q)) hdr_d[8*b +: 8] = s_axis_tdata[8*(b % KEEP_WIDTH) +: 8];
    // the beat that carries byte HB-1, with that byte present
    complete = hs && int'(beat_q) == (HB - 1) / KEEP_WIDTH && s_axis_tkeep[(HB - 1) % KEEP_WIDTH];
  end

  function automatic logic [7:0] byte_at(input logic [8*HB-1:0] h, input int i);
    return h[8*i +: 8];
  endfunction

  logic       is_pfc;
  logic [7:0] cev;                                // class-enable vector, low byte
  assign cev = byte_at(hdr_d, 17);
  always_comb begin
    is_pfc = byte_at(hdr_d, 0) == 8'h01 && byte_at(hdr_d, 1) == 8'h80 && byte_at(hdr_d, 2) == 8'hC2 &&
             byte_at(hdr_d, 3) == 8'h00 && byte_at(hdr_d, 4) == 8'h00 && byte_at(hdr_d, 5) == 8'h01 &&
             byte_at(hdr_d, 12) == 8'h88 && byte_at(hdr_d, 13) == 8'h08 &&
             byte_at(hdr_d, 14) == 8'h01 && byte_at(hdr_d, 15) == 8'h01;
  end

  always_ff @(posedge clk) begin
    if (hs) hdr_q <= hdr_d;
    if (rst) begin
      beat_q      <= '0;
      stat_pfc_rx <= '0;
      o_paused    <= '0;
      for (int i = 0; i < 8; i++) timer_q[i] <= '0;
    end else begin
      if (hs) beat_q <= s_axis_tlast ? '0 : (int'(beat_q) == BEATS ? beat_q : beat_q + 1'b1);
      for (int i = 0; i < 8; i++) begin
        logic [23:0] t;
        t = 24'((32'({byte_at(hdr_d, 18 + 2 * i), byte_at(hdr_d, 19 + 2 * i)}) * 32'(cfg_quanta_q8)) >> 8);
        if (complete && is_pfc && cfg_enable && cev[i])
          timer_q[i] <= t;
        else if (timer_q[i] != '0)
          timer_q[i] <= timer_q[i] - 1'b1;
        o_paused[i] <= cfg_enable && (complete && is_pfc && cev[i] ? t != '0
                                                                                : timer_q[i] > 24'd1);
      end
      if (complete && is_pfc && cfg_enable) stat_pfc_rx <= stat_pfc_rx + 1'b1;
    end
  end
endmodule
