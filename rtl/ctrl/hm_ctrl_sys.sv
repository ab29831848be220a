// Control-core system: everything around the embedded CPU except the CPU itself. The CPU
// drives one simple memory bus (the picorv32 native interface: valid / ready, word address,
// byte strobes; any core with a similar bus fits, see hm_ctrl_core) and sees the map
// hm_ctrl_cpu (IMEM, DMEM, XMEM, the mailbox, the engine's control bus as an AXI4-Lite master with
// one access at a time, a cycle counter); the host sees hm_ctrl_host through the AXI4-Lite
// slave (the mailbox, core control, the IMEM window). Both maps: regs/hematite.rdl, generated
// into hm_regs_pkg (HM_CPU_*, HM_MBOX_*, HM_TIMER_*, HM_HOST_*) and docs/registers.md.
//
// CPU side: any other address completes at once (reads return 0) and sets the sticky `fault`
// flag, as do stores to IMEM; an error response of the control bus returns 0xFFFF_FFFF and
// sets it too: the CPU is never left waiting. Firmware layout and command formats:
// docs/firmware.md.
//
// Host side: anything else, a misaligned or partial-strobe write, a read of a write-only
// register, or an access to the IMEM window while the CPU runs answers SLVERR.
// `irq_done` pulses for one cycle when a command completes (the host's command vector).
module hm_ctrl_sys
  import hm_pkg::*;
  import hm_regs_pkg::*;
#(
  // Instruction memory bytes (power of two, at most 32 KiB: the host window is 32 KiB).
  parameter int IMEM_BYTES = 32768,
  // Data memory bytes (power of two).
  parameter int DMEM_BYTES = 65536,
  // Table memory bytes (power of two, at most the XMEM region): the firmware's per-QP and
  // per-CQ records; never cleared (the firmware tracks which entries it wrote). The firmware
  // is linked for the whole region (firmware/memory.x; elf2hex prints what its .xmem uses):
  // a smaller memory must still hold that.
  parameter int XMEM_BYTES = 1048576,
  // $readmemh file that initialises IMEM (32-bit words), or "" for none (the host loads it).
  parameter string IMEM_INIT = ""
) (
  input  logic        clk,
  input  logic        rst,

  // CPU memory bus
  input  logic        c_valid,
  output logic        c_ready,
  input  logic [31:0] c_addr,
  // Look-ahead read (picorv32's mem_la_read / mem_la_addr): a read of c_la_addr will be
  // requested in the next cycle. IMEM, DMEM and XMEM start it now and answer the request in
  // its own cycle; a core without it ties c_la_read low (every access then waits a cycle).
  input  logic        c_la_read,
  input  logic [31:0] c_la_addr,
  input  logic [31:0] c_wdata,
  input  logic [3:0]  c_wstrb,
  output logic [31:0] c_rdata,
  output logic        c_resetn,     // CPU reset (active low): held until CORE_CTRL.run
  input  logic        c_trap,

  // Engine facts the firmware reads
  input  logic [31:0] caps,
  input  logic [7:0]  mr_log,
  input  logic        link_up,

  // Host AXI4-Lite slave
  input  hm_axil_req_t s_axil_req,
  output hm_axil_rsp_t s_axil_rsp,

  // Engine control bus (AXI4-Lite master)
  output hm_axil_req_t m_ctl_req,
  input  hm_axil_rsp_t m_ctl_rsp,

  output logic        irq_done,
  output logic        fault,
  // The CPU polls an empty mailbox: its last access read CTRL with no command pending,
  // none is pending now and link_up is what it last read. A clock gate (a BUFGCE on an FPGA,
  // the co-simulation top) may stop clk while this is set and the host port is not being
  // accessed: nothing else gives the firmware work.
  output logic        poll_idle
);
  // The host port's and the control-bus master's outputs, packed into their bundles
  logic        h_awready, h_wready, h_bvalid, h_arready, h_rvalid;
  logic [1:0]  h_bresp, h_rresp;
  logic [31:0] h_rdata;
  assign s_axil_rsp = '{awready: h_awready, wready: h_wready, bresp: h_bresp, bvalid: h_bvalid,
                        arready: h_arready, rdata: h_rdata, rresp: h_rresp, rvalid: h_rvalid};
  logic [11:0] mc_awaddr, mc_araddr;
  logic [31:0] mc_wdata;
  logic [3:0]  mc_wstrb;
  logic        mc_awvalid, mc_wvalid, mc_bready, mc_arvalid, mc_rready;
  assign m_ctl_req = '{awaddr: 32'(mc_awaddr), awvalid: mc_awvalid, wdata: mc_wdata, wstrb: mc_wstrb,
                       wvalid: mc_wvalid, bready: mc_bready, araddr: 32'(mc_araddr), arvalid: mc_arvalid,
                       rready: mc_rready};

  localparam int IW = $clog2(IMEM_BYTES / 4);
  localparam int DW = $clog2(DMEM_BYTES / 4);
  localparam int XW = $clog2(XMEM_BYTES / 4);

  logic [31:0] imem [IMEM_BYTES / 4];
  logic [31:0] dmem [DMEM_BYTES / 4];
  logic [31:0] xmem [XMEM_BYTES / 4];
  logic [31:0] cmd_in  [int'(HM_HOST_CMD_IN_WORDS)];
  logic [31:0] cmd_out [int'(HM_HOST_CMD_OUT_WORDS)];

  if (IMEM_INIT != "") begin : g_init
    initial $readmemh(IMEM_INIT, imem);
  end

  logic        run_q, pend_q, fault_q, trap_q;
  logic [15:0] done_cnt_q;
  logic [63:0] now_q;
  assign c_resetn = run_q && !rst;
  assign fault    = fault_q;

  // ---------------------------------------------------------------------------------------
  // CPU side: one access at a time. IMEM, DMEM and XMEM answer a write, and a read announced
  // on the look-ahead port, in the cycle of the request (no wait state); any other memory
  // read the cycle after; the mailbox and timer the cycle after; the control bus when its
  // response arrives.
  // ---------------------------------------------------------------------------------------
  typedef enum logic [2:0] { C_IDLE, C_DONE, C_CTL_W, C_CTL_B, C_CTL_AR, C_CTL_R } cst_t;
  cst_t        cst_q;
  logic [31:0] crd_q;
  logic        aw_done_q, w_done_q;
  logic        is_imem, is_dmem, is_xmem, is_mbox, is_ctl, is_tmr, wr;
  logic        mb_in, mb_out, mb_ctrl, mb_done, mb_caps, mb_mrlog, mb_link, mb_ver;
  // (each region's base is aligned to its size: the high bits select it)
  assign wr       = c_wstrb != 4'd0;
  assign is_imem  = c_addr[31:28] == HM_CPU_IMEM[31:28] && c_addr[27:2] < 26'(IMEM_BYTES / 4);
  assign is_dmem  = c_addr[31:28] == HM_CPU_DMEM[31:28] && c_addr[27:2] < 26'(DMEM_BYTES / 4);
  assign is_xmem  = c_addr[31:28] == HM_CPU_XMEM[31:28] && c_addr[27:2] < 26'(XMEM_BYTES / 4);
  assign is_mbox  = c_addr[31:12] == HM_CPU_MBOX[31:12];
  assign is_ctl   = c_addr[31:12] == HM_CPU_CTL[31:12];
  assign is_tmr   = c_addr[31:3] == HM_CPU_TIMER[31:3];
  assign mb_in    = c_addr[11:8] == HM_MBOX_CMD_IN[11:8];      // 64 words each
  assign mb_out   = c_addr[11:8] == HM_MBOX_CMD_OUT[11:8];
  assign mb_ctrl  = c_addr[11:2] == HM_MBOX_CTRL[11:2];
  assign mb_done  = c_addr[11:2] == HM_MBOX_DONE[11:2];
  assign mb_caps  = c_addr[11:2] == HM_MBOX_CAPS[11:2];
  assign mb_mrlog = c_addr[11:2] == HM_MBOX_MR_LOG[11:2];
  assign mb_link  = c_addr[11:2] == HM_MBOX_LINK[11:2];
  assign mb_ver   = c_addr[11:2] == HM_MBOX_VERSION[11:2];

  // Zero-wait accesses to the memories (registered reads, as block RAM). Each memory has one
  // read port with its output register: it reads the look-ahead address, or, for a
  // request that was not announced (or whose look-ahead was cancelled), the request's address
  // (its answer then comes the next cycle, in C_DONE). An announced request answers at once
  // when it asks for the word read. A write to the word being looked ahead in the same cycle
  // cancels the look-ahead (the request then takes the one-wait path and reads the new value).
  logic        la_imem, la_dmem, la_xmem, la_ok_q, fast_rd, fast_wr, fast, slow_rd, mem_done_q;
  logic        rd_imem, rd_dmem;
  // (word index bits a read port needs: the largest memory's)
  localparam int RW = IW > DW ? (IW > XW ? IW : XW) : (DW > XW ? DW : XW);
  logic [RW-1:0] rd_word;
  logic [29:0] la_word_q;
  logic [31:0] imem_q, dmem_q, xmem_q, mrd;
  logic [1:0]  rd_sel_q;     // {IMEM, DMEM} read last cycle (else XMEM)
  assign la_imem = c_la_addr[31:28] == HM_CPU_IMEM[31:28] && c_la_addr[27:2] < 26'(IMEM_BYTES / 4);
  assign la_dmem = c_la_addr[31:28] == HM_CPU_DMEM[31:28] && c_la_addr[27:2] < 26'(DMEM_BYTES / 4);
  assign la_xmem = c_la_addr[31:28] == HM_CPU_XMEM[31:28] && c_la_addr[27:2] < 26'(XMEM_BYTES / 4);
  assign fast_rd = cst_q == C_IDLE && c_valid && c_resetn && !wr && la_ok_q && la_word_q == c_addr[31:2];
  assign fast_wr = cst_q == C_IDLE && c_valid && c_resetn && wr && (is_dmem || is_xmem);
  assign fast    = fast_rd || fast_wr;
  assign slow_rd = cst_q == C_IDLE && c_valid && c_resetn && !wr && !fast_rd && (is_imem || is_dmem || is_xmem);
  assign rd_word = slow_rd ? c_addr[RW+1:2] : c_la_addr[RW+1:2];
  assign rd_imem = slow_rd ? is_imem : la_imem;
  assign rd_dmem = slow_rd ? is_dmem : la_dmem;
  always_ff @(posedge clk) begin
    la_ok_q   <= c_la_read && c_resetn && !slow_rd && (la_imem || la_dmem || la_xmem) &&
                 !(fast_wr && c_addr[31:2] == c_la_addr[31:2]);
    la_word_q <= c_la_addr[31:2];
    mem_done_q <= slow_rd;
    rd_sel_q   <= {rd_imem, rd_dmem};
    // one registered read port per memory, reading every cycle (block RAM)
    imem_q <= imem[rd_word[IW-1:0]];
    dmem_q <= dmem[rd_word[DW-1:0]];
    xmem_q <= xmem[rd_word[XW-1:0]];
  end
  assign mrd = rd_sel_q[1] ? imem_q : rd_sel_q[0] ? dmem_q : xmem_q;

  logic unused_la;
  assign unused_la = ^c_la_addr[1:0];    // word accesses

  assign c_ready = cst_q == C_DONE || fast;
  assign c_rdata = fast_rd || mem_done_q ? mrd : crd_q;

  assign mc_awaddr  = c_addr[11:0];      // HM_CPU_CTL_BYTES: 4 KiB
  assign mc_araddr  = c_addr[11:0];
  assign mc_wdata   = c_wdata;
  assign mc_wstrb   = c_wstrb;
  assign mc_awvalid = cst_q == C_CTL_W && !aw_done_q;
  assign mc_wvalid  = cst_q == C_CTL_W && !w_done_q;
  assign mc_bready  = cst_q == C_CTL_B;
  assign mc_arvalid = cst_q == C_CTL_AR;
  assign mc_rready  = cst_q == C_CTL_R;

  logic mbox_done;     // the CPU wrote MBOX_DONE this cycle
  assign mbox_done = cst_q == C_IDLE && c_valid && c_resetn && is_mbox && wr && mb_done;

  // host-side IMEM window (only while the CPU is held)
  logic        h_imem_we;
  logic [IW-1:0] h_imem_wa;
  logic [31:0] h_imem_wd;

  always_ff @(posedge clk) begin
    if (cst_q == C_IDLE && c_valid && c_resetn) begin
      if (is_dmem) begin
        for (int b = 0; b < 4; b++) if (c_wstrb[b]) dmem[c_addr[DW+1:2]][8*b +: 8] <= c_wdata[8*b +: 8];
      end
      if (is_xmem) begin
        for (int b = 0; b < 4; b++) if (c_wstrb[b]) xmem[c_addr[XW+1:2]][8*b +: 8] <= c_wdata[8*b +: 8];
      end
      if (is_mbox && wr && mb_out) begin
        for (int b = 0; b < 4; b++) if (c_wstrb[b]) cmd_out[c_addr[7:2]][8*b +: 8] <= c_wdata[8*b +: 8];
      end
    end
    if (h_imem_we) imem[h_imem_wa] <= h_imem_wd;
  end

  always_ff @(posedge clk) begin
    if (rst) begin
      cst_q   <= C_IDLE;
      fault_q <= 1'b0;
      now_q   <= '0;
      trap_q  <= 1'b0;
    end else begin
      now_q <= now_q + 1'b1;
      if (c_trap && c_resetn) trap_q <= 1'b1;
      case (cst_q)
        C_IDLE: if (c_valid && c_resetn && !fast) begin
          crd_q <= '0;
          cst_q <= C_DONE;
          // (a memory read's data comes from its read port; writes to IMEM are ignored)
          if (is_imem || is_dmem || is_xmem) crd_q <= '0;
          else if (is_mbox) begin
            if (mb_in) crd_q <= cmd_in[c_addr[7:2]];
            else if (mb_out) crd_q <= cmd_out[c_addr[7:2]];
            else if (mb_ctrl) crd_q <= {31'd0, pend_q};
            else if (mb_caps) crd_q <= caps;
            else if (mb_mrlog) crd_q <= {24'd0, mr_log};
            else if (mb_link) crd_q <= {31'd0, link_up};
            else if (mb_ver) crd_q <= HM_MBOX_VERSION_RESET;
            else if (!(mb_done && wr)) fault_q <= 1'b1;     // DONE is write-only
          end else if (is_ctl) begin
            aw_done_q <= 1'b0;
            w_done_q  <= 1'b0;
            cst_q     <= wr ? C_CTL_W : C_CTL_AR;
          end else if (is_tmr) crd_q <= c_addr[2] ? now_q[63:32] : now_q[31:0];
          else fault_q <= 1'b1;
          if (is_imem && wr) fault_q <= 1'b1;
        end
        C_DONE: cst_q <= C_IDLE;
        C_CTL_W: begin
          if (m_ctl_rsp.awready) aw_done_q <= 1'b1;
          if (m_ctl_rsp.wready) w_done_q <= 1'b1;
          if ((aw_done_q || m_ctl_rsp.awready) && (w_done_q || m_ctl_rsp.wready)) cst_q <= C_CTL_B;
        end
        C_CTL_B: if (m_ctl_rsp.bvalid) begin
          if (m_ctl_rsp.bresp != 2'b00) fault_q <= 1'b1;
          cst_q <= C_DONE;
        end
        C_CTL_AR: if (m_ctl_rsp.arready) cst_q <= C_CTL_R;
        C_CTL_R: if (m_ctl_rsp.rvalid) begin
          crd_q <= m_ctl_rsp.rresp == 2'b00 ? m_ctl_rsp.rdata : 32'hFFFF_FFFF;
          if (m_ctl_rsp.rresp != 2'b00) fault_q <= 1'b1;
          cst_q <= C_DONE;
        end
        default: cst_q <= C_IDLE;
      endcase
      if (!c_resetn) cst_q <= C_IDLE;
    end
  end

  // poll_idle: the last access read CTRL with nothing pending, nothing has become pending
  // since, and the link is as the firmware last read it (a change of either wakes it)
  logic poll_idle_q, link_seen_q;
  always_ff @(posedge clk) begin
    if (rst || !c_resetn) begin
      poll_idle_q <= 1'b0;
      link_seen_q <= 1'b0;
    end else if (cst_q == C_IDLE && c_valid) begin
      poll_idle_q <= is_mbox && !wr && mb_ctrl && !pend_q;
      if (is_mbox && !wr && mb_link) link_seen_q <= link_up;
    end
  end
  assign poll_idle = poll_idle_q && !pend_q && link_up == link_seen_q;

  // ---------------------------------------------------------------------------------------
  // Host side: a write needs address and data together; one response at a time
  // ---------------------------------------------------------------------------------------
  logic        hw_go, hr_go, hw_ok;
  logic [15:0] hwa, hra;
  logic        hw_imem, hw_in, hr_imem, hr_in, hr_out;
  // (CMD_IN and CMD_OUT are 256 bytes each, the IMEM window the upper half of the port)
  assign hw_imem = hwa[15] == HM_HOST_IMEM[15];
  assign hw_in   = hwa[15:8] == HM_HOST_CMD_IN[15:8];
  assign hr_imem = hra[15] == HM_HOST_IMEM[15];
  assign hr_in   = hra[15:8] == HM_HOST_CMD_IN[15:8];
  assign hr_out  = hra[15:8] == HM_HOST_CMD_OUT[15:8];
  assign hwa = s_axil_req.awaddr[15:0];
  assign hra = s_axil_req.araddr[15:0];
  assign hw_go = s_axil_req.awvalid && s_axil_req.wvalid && !h_bvalid;
  assign h_awready = hw_go;
  assign h_wready  = hw_go;
  assign hr_go = s_axil_req.arvalid && !h_rvalid;
  assign h_arready = hr_go;

  always_comb begin
    hw_ok     = 1'b0;
    h_imem_we = 1'b0;
    h_imem_wa = hwa[IW+1:2];
    h_imem_wd = s_axil_req.wdata;
    if (hw_go && s_axil_req.wstrb == 4'hF && hwa[1:0] == 2'b00) begin
      if (hw_imem) begin
        hw_ok     = !run_q && 32'(hwa[14:2]) < IMEM_BYTES / 4;
        h_imem_we = hw_ok;
      end else if (hw_in) hw_ok = !pend_q;
      else if (hwa == HM_HOST_MBOX_DB) hw_ok = !pend_q;
      else if (hwa == HM_HOST_CORE_CTRL) hw_ok = 1'b1;
    end
  end

  always_ff @(posedge clk) begin
    if (hw_go && hw_ok && hw_in) cmd_in[hwa[7:2]] <= s_axil_req.wdata;
  end

  always_ff @(posedge clk) begin
    if (rst) begin
      h_bvalid <= 1'b0;
      h_rvalid <= 1'b0;
      run_q         <= 1'b0;
      pend_q        <= 1'b0;
      done_cnt_q    <= '0;
      irq_done      <= 1'b0;
    end else begin
      irq_done <= 1'b0;
      if (h_bvalid && s_axil_req.bready) h_bvalid <= 1'b0;
      if (h_rvalid && s_axil_req.rready) h_rvalid <= 1'b0;
      if (hw_go) begin
        h_bvalid <= 1'b1;
        h_bresp  <= hw_ok ? 2'b00 : 2'b10;
        if (hw_ok && hwa == HM_HOST_MBOX_DB) pend_q <= 1'b1;
        if (hw_ok && hwa == HM_HOST_CORE_CTRL) begin
          run_q <= s_axil_req.wdata[0];
          if (!s_axil_req.wdata[0]) pend_q <= 1'b0;    // a held CPU answers nothing
        end
      end
      if (mbox_done && pend_q) begin
        pend_q     <= 1'b0;
        done_cnt_q <= done_cnt_q + 1'b1;
        irq_done   <= 1'b1;
      end
      if (hr_go) begin
        h_rvalid <= 1'b1;
        h_rresp  <= 2'b00;
        h_rdata  <= '0;
        if (hra[1:0] != 2'b00) h_rresp <= 2'b10;
        else if (hr_imem) h_rresp <= 2'b10;    // the IMEM window is write-only
        else if (hr_in) h_rdata <= cmd_in[hra[7:2]];
        else if (hr_out) h_rdata <= cmd_out[hra[7:2]];
        else if (hra == HM_HOST_MBOX_STATUS)
          h_rdata <= hm_mbox_status_t'{done_count: done_cnt_q, trap: trap_q, fault: fault_q,
                                            running: run_q, pending: pend_q, default: '0};
        else if (hra == HM_HOST_CORE_CTRL) h_rdata <= {31'd0, run_q};
        else h_rresp <= 2'b10;
      end
    end
  end

  if (IMEM_BYTES > int'(HM_HOST_IMEM_BYTES) || IMEM_BYTES > int'(HM_CPU_IMEM_BYTES) ||
      (1 << IW) * 4 != IMEM_BYTES) begin : g_bad_imem
    $error("hm_ctrl_sys: IMEM_BYTES must be a power of two, at most the IMEM window (32 KiB)");
  end
  if (DMEM_BYTES > int'(HM_CPU_DMEM_BYTES)) begin : g_big_dmem
    $error("hm_ctrl_sys: DMEM_BYTES beyond the DMEM region of the map");
  end
  if ((1 << DW) * 4 != DMEM_BYTES) begin : g_bad_dmem
    $error("hm_ctrl_sys: DMEM_BYTES must be a power of two");
  end
  if (XMEM_BYTES > int'(HM_CPU_XMEM_BYTES) || (1 << XW) * 4 != XMEM_BYTES) begin : g_bad_xmem
    $error("hm_ctrl_sys: XMEM_BYTES must be a power of two, at most the XMEM region");
  end
endmodule
