// Priority flow control transmitter (IEEE 802.1Qbb) for the shell's receive FIFO: when the FIFO
// between the MAC and the core fills past cfg_xoff_level, it sends the link partner a PFC frame
// that pauses the priorities in cfg_prio_mask for cfg_quanta; it repeats that frame every
// cfg_refresh clocks (decision to decision) while the level stays above cfg_xon_level (so that
// the partner's timers do not run out), and sends a PFC frame with pause time 0 (XON) once the
// level falls to cfg_xon_level or below, or when cfg_enable is cleared while the partner is
// paused. The priorities, pause time and source address are taken with the first XOFF of a
// pause; its refreshes and its XON carry the same (the XON releases exactly what was paused).
//
// The receive side has one FIFO for every priority, so there is one pause state, sent for the
// configured set of priorities (the RoCE traffic class; docs/fpga.md).
//
// PFC frames are inserted into the transmit stream to the MAC between frames, never inside one,
// ahead of the next data frame. Frame (60 bytes; the MAC adds the FCS):
//   0..5   destination 01-80-C2-00-00-01      6..11  source cfg_src_mac
//   12..13 EtherType 0x8808                    14..15 opcode 0x0101
//   16..17 class-enable vector {8'h00, cfg_prio_mask}
//   18..33 pause time of priority 0..7 (16 bits each, big-endian): cfg_quanta for the
//          priorities in the mask (0 in an XON frame), 0 for the others;  34..59 zero
// Everything is in the MAC clock (clk): i_level comes from the receive FIFO's write side, and
// the cfg_* inputs must be stable or synchronised into clk by the instantiating shell. The
// output is registered.
module hm_pfc_gen #(
  parameter int DATA_WIDTH = 512,                // MAC stream width in bits, 256 or more
  parameter int KEEP_WIDTH = DATA_WIDTH / 8,     // (derived)
  parameter int LEVEL_W    = 10                  // width of the level and the thresholds
) (
  input  logic                  clk,             // MAC clock
  input  logic                  rst,             // synchronous to clk, active high: all
  input  logic                  rst_tx,          // the stream side only (the frame leaving is
                                                 // cut); the pause state stays, to send its XON

  input  logic [LEVEL_W-1:0]    i_level,         // the receive FIFO's fill level (beats)

  input  logic                  cfg_enable,
  input  logic [7:0]            cfg_prio_mask,   // priorities paused by an XOFF frame
  input  logic [LEVEL_W-1:0]    cfg_xoff_level,  // send XOFF at this level or above
  input  logic [LEVEL_W-1:0]    cfg_xon_level,   // send XON at this level or below
  input  logic [15:0]           cfg_quanta,      // pause time sent, quanta of 512 bit times
  input  logic [23:0]           cfg_refresh,     // clocks between XOFF frames while paused
                                                 // (0: the XOFF is not repeated)
  input  logic [47:0]           cfg_src_mac,

  // ---- transmit stream from the core (through the transmit FIFO)
  input  logic [DATA_WIDTH-1:0] s_axis_tdata,
  input  logic [KEEP_WIDTH-1:0] s_axis_tkeep,
  input  logic                  s_axis_tvalid,
  output logic                  s_axis_tready,
  input  logic                  s_axis_tlast,

  // ---- to the MAC
  output logic [DATA_WIDTH-1:0] m_axis_tdata,
  output logic [KEEP_WIDTH-1:0] m_axis_tkeep,
  output logic                  m_axis_tvalid,
  input  logic                  m_axis_tready,
  output logic                  m_axis_tlast,

  output logic                  o_paused,        // an XOFF is in force (from its decision to
                                                 // the decision to send the XON)
  output logic [31:0]           stat_xoff,       // XOFF frames sent (refreshes included)
  output logic [31:0]           stat_xon         // XON frames sent
);
  localparam int FB = 60;                        // PFC frame bytes (without FCS)
  localparam int NB = (FB + KEEP_WIDTH - 1) / KEEP_WIDTH;  // its beats
  localparam int BI = NB > 1 ? $clog2(NB) : 1;

  // ---- pause state: decided a clock after the level, sent at the next frame boundary
  logic        paused_q, req_q, req_xoff_q, ge_xoff_q, le_xon_q;
  logic [23:0] timer_q;
  // (the priorities, pause time and source address of the pause in force, taken with its
  // first XOFF: its refreshes and its XON carry the same, whatever the configuration does)
  logic [7:0]  pmask_q;
  logic [15:0] quanta_q;
  logic [47:0] smac_q;
  logic        take_pfc;                         // the output register takes the PFC frame
  logic        pfc_on_q;                         // a PFC frame is being sent (below)

  always_ff @(posedge clk) begin
    if (rst) begin
      paused_q   <= 1'b0;
      req_q      <= 1'b0;
      req_xoff_q <= 1'b0;
      ge_xoff_q  <= 1'b0;
      le_xon_q   <= 1'b1;
      timer_q    <= '0;
      pmask_q    <= '0;
      quanta_q   <= '0;
      smac_q     <= '0;
    end else begin
      ge_xoff_q <= i_level >= cfg_xoff_level;
      le_xon_q  <= i_level <= cfg_xon_level;
      if (timer_q != '0) timer_q <= timer_q - 1'b1;
      if (take_pfc) req_q <= 1'b0;
      if (rst_tx && pfc_on_q) req_q <= 1'b1;     // (a PFC frame cut by rst_tx goes again)
      if (!paused_q) begin
        if (cfg_enable && ge_xoff_q) begin
          paused_q   <= 1'b1;
          req_q      <= 1'b1;
          req_xoff_q <= 1'b1;
          timer_q    <= cfg_refresh;
          pmask_q    <= cfg_prio_mask;
          quanta_q   <= cfg_quanta;
          smac_q     <= cfg_src_mac;
        end
      end else if (!cfg_enable || le_xon_q) begin
        paused_q   <= 1'b0;
        req_q      <= 1'b1;
        req_xoff_q <= 1'b0;
        timer_q    <= '0;
      end else if (timer_q == 24'd1) begin   // cfg_refresh clocks after the last decision
        req_q      <= 1'b1;
        req_xoff_q <= 1'b1;
        timer_q    <= cfg_refresh;
      end
    end
  end

  // ---- the PFC frame being sent (its kind latched when it starts)
  logic        xoff_tx_q;                        // the frame being sent is an XOFF
  logic [NB*DATA_WIDTH-1:0] pfc;
  always_comb begin
    logic [15:0] t;
    pfc = '0;
    t   = xoff_tx_q ? quanta_q : 16'd0;
    pfc[0*8 +: 8]  = 8'h01; pfc[1*8 +: 8] = 8'h80; pfc[2*8 +: 8] = 8'hC2;
    pfc[3*8 +: 8]  = 8'h00; pfc[4*8 +: 8] = 8'h00; pfc[5*8 +: 8] = 8'h01;
    for (int i = 0; i < 6; i++) pfc[(6+i)*8 +: 8] = smac_q[(5-i)*8 +: 8];
    pfc[12*8 +: 8] = 8'h88; pfc[13*8 +: 8] = 8'h08;
    pfc[14*8 +: 8] = 8'h01; pfc[15*8 +: 8] = 8'h01;
    pfc[16*8 +: 8] = 8'h00; pfc[17*8 +: 8] = pmask_q;
    for (int p = 0; p < 8; p++) begin
      pfc[(18+2*p)*8 +: 8] = pmask_q[p] ? t[15:8] : 8'h00;
      pfc[(19+2*p)*8 +: 8] = pmask_q[p] ? t[7:0]  : 8'h00;
    end
  end

  // ---- output register: data beats pass, a PFC frame goes in between frames
  logic          in_frame_q;                     // a data frame has started in the register
  // (pfc_on_q: a PFC frame is being sent, beat pfc_idx_q)
  logic [BI-1:0] pfc_idx_q;
  logic          load, start_pfc, pfc_last;
  assign load          = !m_axis_tvalid || m_axis_tready;
  assign start_pfc     = req_q && !in_frame_q && !pfc_on_q;
  assign take_pfc      = load && start_pfc && !rst_tx;
  assign pfc_last      = 32'(pfc_idx_q) == NB - 1;
  assign s_axis_tready = load && !start_pfc && !pfc_on_q && !rst_tx;

  always_ff @(posedge clk) begin
    if (load) begin
      if (pfc_on_q) begin
        m_axis_tdata <= pfc[pfc_idx_q*DATA_WIDTH +: DATA_WIDTH];
        m_axis_tkeep <= pfc_last ? KEEP_WIDTH'({(FB - (NB - 1) * KEEP_WIDTH){1'b1}}) : '1;
        m_axis_tlast <= pfc_last;
      end else begin
        m_axis_tdata <= s_axis_tdata;
        m_axis_tkeep <= s_axis_tkeep;
        m_axis_tlast <= s_axis_tlast;
      end
    end
  end

  // (a PFC frame starts in the clock after take_pfc: pfc_on_q selects its beats, so that the
  // frame's kind is latched first)
  always_ff @(posedge clk) begin
    if (rst || rst_tx) begin
      m_axis_tvalid <= 1'b0;
      in_frame_q    <= 1'b0;
      pfc_on_q      <= 1'b0;
      pfc_idx_q     <= '0;
      xoff_tx_q     <= 1'b0;
    end else begin
      if (load) m_axis_tvalid <= pfc_on_q || (s_axis_tvalid && !start_pfc);
      if (s_axis_tvalid && s_axis_tready) in_frame_q <= !s_axis_tlast;
      if (take_pfc) begin
        pfc_on_q  <= 1'b1;
        pfc_idx_q <= '0;
        xoff_tx_q <= req_xoff_q;
      end else if (load && pfc_on_q) begin
        if (pfc_last) pfc_on_q <= 1'b0;
        pfc_idx_q <= pfc_idx_q + 1'b1;
      end
    end
  end
  always_ff @(posedge clk) begin
    if (rst) begin
      stat_xoff <= '0;
      stat_xon  <= '0;
    end else if (take_pfc) begin
      if (req_xoff_q) stat_xoff <= stat_xoff + 1'b1;
      else            stat_xon  <= stat_xon + 1'b1;
    end
  end
  assign o_paused = paused_q;

  if (DATA_WIDTH < 256) begin : g_bad_width
    $error("hm_pfc_gen: DATA_WIDTH must be at least 256");
  end
endmodule
