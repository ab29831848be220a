// The shell's Ethernet side for one 100G port: the crossings between the MAC's clock
// (CMAC: 322.265625 MHz) and the core clock, and PFC generated from the receive FIFO's level.
//
//   MAC rx --> [ frame FIFO, never back-pressures, drops whole frames ] --> core rx
//   MAC tx <-- [ PFC insertion (hm_pfc_gen) ] <-- [ store-and-forward frame FIFO ] <-- core tx
//
// The configuration comes from the core's clock: registered there, then synchronised into the
// MAC clock bit by bit, the enable through one more stage than the values (so that what it
// enables has settled when it arrives). Change the thresholds, quanta, priorities and MAC
// address only while cfg_pfc_enable is 0; a pause in force keeps the priorities, quanta and
// address it started with until its XON (hm_pfc_gen). Counters: the receive FIFO's and the
// transmit FIFO's in the core clock; the PFC frames sent in the MAC clock.
//
// Resets: the FIFOs need both their sides reset together, and the CMAC's reset pulses on its
// own (a link going down). So each clock's side of the FIFOs is reset by its own reset or by
// the other clock's, synchronised (for as long as it lasts, plus the synchroniser's delay). A
// core reset empties the receive FIFO, so a pause in force ends with its XON; it also cuts a
// frame that is leaving for the MAC (tvalid falls inside it: the CMAC sends it as bad).
module hm_eth_port #(
  parameter int DATA_WIDTH = 512,                // stream width (the CMAC's 512 bits)
  parameter int KEEP_WIDTH = DATA_WIDTH / 8,     // (derived)
  parameter int RX_DEPTH   = 512,                // receive FIFO beats (32 KiB at 512 bits)
  parameter int TX_DEPTH   = 256,                // transmit FIFO beats, more than a frame
  parameter int STAGES     = 2,                  // synchroniser flip-flops
  parameter int LW         = $clog2(RX_DEPTH) + 1  // (derived) level width
) (
  input  logic                  mac_clk,
  input  logic                  mac_rst,         // synchronous to mac_clk
  input  logic                  core_clk,
  input  logic                  core_rst,        // synchronous to core_clk, asserted with mac_rst

  // ---- MAC receive (mac_clk): no tready, a MAC cannot be held back
  input  logic [DATA_WIDTH-1:0] mac_rx_tdata,
  input  logic [KEEP_WIDTH-1:0] mac_rx_tkeep,
  input  logic                  mac_rx_tvalid,
  input  logic                  mac_rx_tlast,
  input  logic                  mac_rx_tuser,    // with tlast: bad frame (FCS error)

  // ---- MAC transmit (mac_clk)
  output logic [DATA_WIDTH-1:0] mac_tx_tdata,
  output logic [KEEP_WIDTH-1:0] mac_tx_tkeep,
  output logic                  mac_tx_tvalid,
  input  logic                  mac_tx_tready,
  output logic                  mac_tx_tlast,
  output logic                  mac_tx_tuser,    // never set: no frame is sent bad

  // ---- core receive (core_clk)
  output logic [DATA_WIDTH-1:0] core_rx_tdata,
  output logic [KEEP_WIDTH-1:0] core_rx_tkeep,
  output logic                  core_rx_tvalid,
  input  logic                  core_rx_tready,
  output logic                  core_rx_tlast,

  // ---- core transmit (core_clk)
  input  logic [DATA_WIDTH-1:0] core_tx_tdata,
  input  logic [KEEP_WIDTH-1:0] core_tx_tkeep,
  input  logic                  core_tx_tvalid,
  output logic                  core_tx_tready,
  input  logic                  core_tx_tlast,
  input  logic                  core_tx_tuser,   // with tlast: the frame is bad (dropped whole, counted)

  // ---- configuration (core_clk)
  input  logic                  cfg_pfc_enable,
  input  logic [7:0]            cfg_pfc_prio_mask,
  input  logic [LW-1:0]         cfg_pfc_xoff_level,
  input  logic [LW-1:0]         cfg_pfc_xon_level,
  input  logic [15:0]           cfg_pfc_quanta,
  input  logic [23:0]           cfg_pfc_refresh,  // MAC clocks
  input  logic [47:0]           cfg_src_mac,

  // ---- counters
  output logic [31:0]           rx_frames,        // core_clk: frames delivered to the core
  output logic [31:0]           rx_drop_bad,      // core_clk
  output logic [31:0]           rx_drop_oversize, // core_clk
  output logic [31:0]           rx_drop_full,     // core_clk
  output logic [31:0]           tx_frames,        // core_clk: frames taken from the core
  output logic [31:0]           tx_drop_oversize, // core_clk
  output logic [31:0]           tx_drop_bad,      // core_clk: frames the core marked bad
  output logic                  pfc_paused,       // mac_clk
  output logic [31:0]           pfc_xoff_sent,    // mac_clk
  output logic [31:0]           pfc_xon_sent      // mac_clk
);
  // ---- resets: either side's reset resets both sides of the FIFOs
  logic core_rst_m, mac_rst_c, mac_side_rst, core_side_rst;
  logic core_rst_q, mac_rst_q;                   // (each reset from a register of its clock)
  hm_sync #(.WIDTH(1), .STAGES(STAGES)) u_core_rst_sync (
    .clk(mac_clk), .rst(1'b0), .d_i(core_rst_q), .q_o(core_rst_m));
  hm_sync #(.WIDTH(1), .STAGES(STAGES)) u_mac_rst_sync (
    .clk(core_clk), .rst(1'b0), .d_i(mac_rst_q), .q_o(mac_rst_c));
  always_ff @(posedge core_clk) core_rst_q <= core_rst;
  always_ff @(posedge mac_clk)  mac_rst_q  <= mac_rst;
  assign mac_side_rst  = mac_rst || mac_rst_q || core_rst_m;
  assign core_side_rst = core_rst || core_rst_q || mac_rst_c;

  // ---- receive
  logic [LW-1:0] rx_level;
  logic          rx_ready_unused;
  logic [31:0]   rxs_frames, rxs_bad, rxs_over, rxs_full;
  hm_axis_async_frame_fifo #(.DATA_WIDTH(DATA_WIDTH), .KEEP_WIDTH(KEEP_WIDTH), .DEPTH(RX_DEPTH),
                             .DROP_WHEN_FULL(1'b1), .STAGES(STAGES)) u_rx (
    .s_clk(mac_clk), .s_rst(mac_side_rst),
    .s_axis_tdata(mac_rx_tdata), .s_axis_tkeep(mac_rx_tkeep), .s_axis_tvalid(mac_rx_tvalid),
    .s_axis_tready(rx_ready_unused), .s_axis_tlast(mac_rx_tlast), .s_axis_tuser(mac_rx_tuser),
    .s_level(rx_level),
    .s_cnt_frames(rxs_frames), .s_cnt_bad(rxs_bad), .s_cnt_oversize(rxs_over), .s_cnt_full(rxs_full),
    .m_clk(core_clk), .m_rst(core_side_rst),
    .m_axis_tdata(core_rx_tdata), .m_axis_tkeep(core_rx_tkeep), .m_axis_tvalid(core_rx_tvalid),
    .m_axis_tready(core_rx_tready), .m_axis_tlast(core_rx_tlast),
    .m_cnt_frames(rx_frames), .m_cnt_bad(rx_drop_bad), .m_cnt_oversize(rx_drop_oversize),
    .m_cnt_full(rx_drop_full));

  // ---- transmit
  logic [DATA_WIDTH-1:0] tx_tdata;
  logic [KEEP_WIDTH-1:0] tx_tkeep;
  logic                  tx_tvalid, tx_tready, tx_tlast;
  logic [$clog2(TX_DEPTH):0] tx_level_unused;
  logic [31:0] txs_full_unused, txm_frames_unused, txm_bad_unused,
               txm_over_unused, txm_full_unused;
  hm_axis_async_frame_fifo #(.DATA_WIDTH(DATA_WIDTH), .KEEP_WIDTH(KEEP_WIDTH), .DEPTH(TX_DEPTH),
                             .DROP_WHEN_FULL(1'b0), .STAGES(STAGES)) u_tx (
    .s_clk(core_clk), .s_rst(core_side_rst),
    .s_axis_tdata(core_tx_tdata), .s_axis_tkeep(core_tx_tkeep), .s_axis_tvalid(core_tx_tvalid),
    .s_axis_tready(core_tx_tready), .s_axis_tlast(core_tx_tlast), .s_axis_tuser(core_tx_tuser),
    .s_level(tx_level_unused),
    .s_cnt_frames(tx_frames), .s_cnt_bad(tx_drop_bad), .s_cnt_oversize(tx_drop_oversize),
    .s_cnt_full(txs_full_unused),
    .m_clk(mac_clk), .m_rst(mac_side_rst),
    .m_axis_tdata(tx_tdata), .m_axis_tkeep(tx_tkeep), .m_axis_tvalid(tx_tvalid),
    .m_axis_tready(tx_tready), .m_axis_tlast(tx_tlast),
    .m_cnt_frames(txm_frames_unused), .m_cnt_bad(txm_bad_unused), .m_cnt_oversize(txm_over_unused),
    .m_cnt_full(txm_full_unused));

  // ---- configuration into the MAC clock (the enable a clock behind the values)
  localparam int CW = 8 + 2 * LW + 16 + 24 + 48;
  logic [CW-1:0] cfg_s, cfg_m;
  logic          en_s, en_m;
  // (from registers of the core clock, as a synchroniser's input must be)
  always_ff @(posedge core_clk) begin
    cfg_s <= {cfg_pfc_prio_mask, cfg_pfc_xoff_level, cfg_pfc_xon_level, cfg_pfc_quanta,
              cfg_pfc_refresh, cfg_src_mac};
    if (core_rst) en_s <= 1'b0;
    else          en_s <= cfg_pfc_enable;
  end
  hm_sync #(.WIDTH(CW), .STAGES(STAGES)) u_cfg_sync (
    .clk(mac_clk), .rst(mac_rst), .d_i(cfg_s), .q_o(cfg_m));
  hm_sync #(.WIDTH(1), .STAGES(STAGES + 1)) u_en_sync (
    .clk(mac_clk), .rst(mac_rst), .d_i(en_s), .q_o(en_m));

  hm_pfc_gen #(.DATA_WIDTH(DATA_WIDTH), .KEEP_WIDTH(KEEP_WIDTH), .LEVEL_W(LW)) u_pfc (
    .clk(mac_clk), .rst(mac_rst), .rst_tx(mac_side_rst), .i_level(rx_level),
    .cfg_enable(en_m), .cfg_prio_mask(cfg_m[CW-1 -: 8]),
    .cfg_xoff_level(cfg_m[CW-9 -: LW]), .cfg_xon_level(cfg_m[CW-9-LW -: LW]),
    .cfg_quanta(cfg_m[72 +: 16]), .cfg_refresh(cfg_m[48 +: 24]), .cfg_src_mac(cfg_m[0 +: 48]),
    .s_axis_tdata(tx_tdata), .s_axis_tkeep(tx_tkeep), .s_axis_tvalid(tx_tvalid),
    .s_axis_tready(tx_tready), .s_axis_tlast(tx_tlast),
    .m_axis_tdata(mac_tx_tdata), .m_axis_tkeep(mac_tx_tkeep), .m_axis_tvalid(mac_tx_tvalid),
    .m_axis_tready(mac_tx_tready), .m_axis_tlast(mac_tx_tlast),
    .o_paused(pfc_paused), .stat_xoff(pfc_xoff_sent), .stat_xon(pfc_xon_sent));
  assign mac_tx_tuser = 1'b0;

  logic unused_ok;
  assign unused_ok = ^{rx_ready_unused, rxs_frames, rxs_bad, rxs_over, rxs_full, tx_level_unused,
                       txs_full_unused, txm_frames_unused, txm_bad_unused,
                       txm_over_unused, txm_full_unused};
endmodule
