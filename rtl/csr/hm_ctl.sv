// Internal control bus (AXI4-Lite, 32-bit): the port through which the control plane (the
// control core's firmware, or a test) writes the QP, CQ and MR context tables.
//
// Map (hm_desc_pkg): HM_CTL_STAGE + 4 i: staging word i (read/write, i < HM_CTL_STAGE_WORDS);
// HM_CTL_CMD: write an hm_ctl_cmd_t to start a command; HM_CTL_STATUS: hm_ctl_status_t;
// HM_CTL_EQ: the event queue; HM_CTL_POST: an hm_ctl_post_t for the engine (QP to ERR now, or
// an event), busy until the engine took it (unknown ops answer SLVERR); HM_CTL_CNT + 4 i:
// the engine's counter i (read-only; the firmware's QUERY_COUNTERS reads them here);
// HM_CTL_CC + 4 i: congestion control register i (read/write, byte strobes honoured; the
// register block hm_cc_rf that scripts/regs.py generates with PeakRDL-regblock from
// regs/hematite.rdl, so reserved bits read 0).
// A write command sends the staging window and the command on m_cmd_*; the engine answers on
// s_rsp_* (status, and for reads the entry, which is copied into the staging window). While a
// command is in flight STATUS.busy is set, and writes to the staging window or CMD are held
// off (no AWREADY) until it completes, so a control plane that polls nothing still cannot
// corrupt a command. Unmapped offsets, partial-strobe CMD writes and reads of CMD answer
// SLVERR and change nothing.
module hm_ctl
  import hm_pkg::*;
  import hm_desc_pkg::*;
  import hm_regs_pkg::*;
#(
  // AXI4-Lite address width.
  parameter int ADDR_WIDTH = 12,
  // Engine counters readable at HM_CTL_CNT (at most 64).
  parameter int NUM_COUNTERS = 26,
  // Staging words (derived from the package).
  localparam int SW = int'(HM_CTL_STAGE_WORDS),
  localparam int CCW = int'(HM_CTL_CC_WORDS)
) (
  input  logic                  clk,
  input  logic                  rst,

  input  hm_axil_req_t          s_axil_req,
  output hm_axil_rsp_t          s_axil_rsp,

  // Commands to the context tables
  output hm_ctl_cmd_t           m_cmd,
  output logic [SW*32-1:0]      m_cmd_data,
  output logic                  m_cmd_valid,
  input  logic                  m_cmd_ready,

  // Command responses
  input  logic [7:0]            s_rsp_status,
  input  logic [SW*32-1:0]      s_rsp_data,
  input  logic                  s_rsp_read,     // s_rsp_data is the entry read
  input  logic                  s_rsp_valid,

  // Event queue configuration (HM_CTL_EQ)
  output hm_ctl_eq_t            m_eq,

  // Posts (HM_CTL_POST)
  output hm_ctl_post_t          m_post,
  output logic                  m_post_valid,
  input  logic                  m_post_ready,

  // Congestion control registers (HM_CTL_CC)
  output logic [CCW-1:0][31:0]  m_cc,

  // The engine's counters
  input  logic [NUM_COUNTERS-1:0][31:0] counters
);

  logic [31:0] stage_q [SW];
  logic        busy_q, issued_q;
  logic [7:0]  status_q;
  hm_ctl_cmd_t cmd_q;

  logic [ADDR_WIDTH-1:0] aw_q, rd_addr;
  logic [31:0]           wd_q, rd_data;
  logic [3:0]            ws_q;
  logic                  wr_pend, w_err, wr_stall, do_write, rd_do, rd_err;

  hm_axil_fe #(.ADDR_WIDTH(ADDR_WIDTH)) u_fe (
    .clk, .rst,
    .s_axil_req, .s_axil_rsp,
    .wr_pend, .wr_addr(aw_q), .wr_data(wd_q), .wr_strb(ws_q), .wr_err(w_err), .wr_stall,
    .wr_do(do_write), .rd_do, .rd_addr, .rd_data, .rd_err
  );

  // ----------------------------------------------------------------------------------------
  // Writes
  // ----------------------------------------------------------------------------------------
  logic is_stage, is_cmd, is_eq, is_post, post_ok, is_cc, rd_cc;

  always_comb begin
    is_stage = aw_q < ADDR_WIDTH'(HM_CTL_STAGE + 12'(4 * SW)) && aw_q[1:0] == 2'b00;
    is_cmd   = aw_q == ADDR_WIDTH'(HM_CTL_CMD);
    is_eq    = aw_q == ADDR_WIDTH'(HM_CTL_EQ);
    is_post  = aw_q == ADDR_WIDTH'(HM_CTL_POST);
    post_ok  = wd_q[31:28] == HM_CTL_POST_QP_ERR || wd_q[31:28] == HM_CTL_POST_EVENT;
    is_cc    = aw_q >= ADDR_WIDTH'(HM_CTL_CC) && aw_q < ADDR_WIDTH'(HM_CTL_CC + 12'(4 * CCW)) &&
               aw_q[1:0] == 2'b00;
    w_err    = !(is_stage || is_cc || ((is_cmd || is_eq || (is_post && post_ok)) && ws_q == 4'hF));
    rd_cc    = rd_addr >= ADDR_WIDTH'(HM_CTL_CC) && rd_addr < ADDR_WIDTH'(HM_CTL_CC + 12'(4 * CCW)) &&
               rd_addr[1:0] == 2'b00;
    // a valid write waits while a command or a post is busy, and a CC write while a read is
    // taken (the CC register block takes one access a cycle: at most one cycle, as the front
    // end takes no read while R is held); errors are answered at once
    wr_stall = busy_q || m_post_valid || (is_cc && rd_do);
  end

  // The congestion-control registers (generated: build/gen/rtl/hm_cc_rf.sv). A CC write
  // never executes in the cycle a read is taken (it waits), so the block's address is the
  // read's whenever a read is taken, without waiting for either decode.
  logic                   cc_err;
  logic [$clog2(CCW)-1:0] cc_word;
  logic [31:0]            cc_rd_data;

  assign cc_word = $clog2(CCW)'(((rd_do ? rd_addr : aw_q) - ADDR_WIDTH'(HM_CTL_CC)) >> 2);

  hm_cc_rf u_cc (
    .clk, .rst,
    .req((rd_do && rd_cc) || (do_write && !w_err && is_cc)), .req_wr(!rd_do), .word(cc_word),
    .wr_data(wd_q), .wr_strb(ws_q), .rd_data(cc_rd_data), .err(cc_err),
    .words(m_cc)
  );

  always_ff @(posedge clk) begin
    if (do_write && !w_err && is_stage)
      for (int b = 0; b < 4; b++)
        if (ws_q[b]) stage_q[aw_q[$clog2(SW)+1:2]][8*b +: 8] <= wd_q[8*b +: 8];
    if (s_rsp_valid && s_rsp_read && s_rsp_status == HM_CTL_ST_OK)
      for (int i = 0; i < SW; i++) stage_q[i] <= s_rsp_data[32*i +: 32];
    if (do_write && !w_err && is_cmd) cmd_q <= hm_ctl_cmd_t'(wd_q);
    if (rst) begin
      busy_q        <= 1'b0;
      issued_q      <= 1'b0;
      status_q      <= HM_CTL_ST_OK;
      m_eq          <= '0;
      m_post_valid  <= 1'b0;
    end else begin
      if (do_write && !w_err && is_eq) m_eq <= hm_ctl_eq_t'(wd_q);
      if (do_write && !w_err && is_post) begin
        m_post       <= hm_ctl_post_t'(wd_q);
        m_post_valid <= 1'b1;
      end
      if (m_post_valid && m_post_ready) m_post_valid <= 1'b0;
      if (do_write && !w_err && is_cmd) begin
        busy_q   <= 1'b1;
        issued_q <= 1'b0;
      end
      if (m_cmd_valid && m_cmd_ready) issued_q <= 1'b1;
      if (s_rsp_valid && busy_q) begin
        busy_q   <= 1'b0;
        status_q <= s_rsp_status;
      end
    end
  end

  assign m_cmd       = cmd_q;
  assign m_cmd_valid = busy_q && !issued_q;
  always_comb for (int i = 0; i < SW; i++) m_cmd_data[32*i +: 32] = stage_q[i];

  // ----------------------------------------------------------------------------------------
  // Reads
  // ----------------------------------------------------------------------------------------
  always_comb begin
    rd_err  = 1'b0;
    rd_data = '0;
    if (rd_addr < ADDR_WIDTH'(HM_CTL_STAGE + 12'(4 * SW)) && rd_addr[1:0] == 2'b00)
      rd_data = stage_q[rd_addr[$clog2(SW)+1:2]];
    else if (rd_addr == ADDR_WIDTH'(HM_CTL_STATUS))
      rd_data = {busy_q || m_post_valid, 23'd0, status_q};
    else if (rd_addr == ADDR_WIDTH'(HM_CTL_EQ))
      rd_data = m_eq;
    else if (rd_cc) begin
      rd_data = cc_rd_data;
      rd_err  = cc_err;
    end
    else if (rd_addr >= ADDR_WIDTH'(HM_CTL_CNT) &&
             rd_addr < ADDR_WIDTH'(HM_CTL_CNT) + ADDR_WIDTH'(4 * NUM_COUNTERS) && rd_addr[1:0] == 2'b00)
      rd_data = counters[6'((rd_addr - ADDR_WIDTH'(HM_CTL_CNT)) >> 2)];
    else
      rd_err = 1'b1;
  end

  logic unused_ok;
  assign unused_ok = wr_pend;

  if (ADDR_WIDTH < 10 || (1 << $clog2(SW)) != SW || NUM_COUNTERS > 64 || NUM_COUNTERS < 1) begin : g_bad_param
    $error("hm_ctl: ADDR_WIDTH must cover the command registers; staging words a power of two");
  end
endmodule
