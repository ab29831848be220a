// Control-core system: everything around the embedded CPU except the CPU itself. The CPU
// drives one simple memory bus (the picorv32 native interface: valid / ready, word address,
// byte strobes; any core with a similar bus fits, see hm_ctrl_core) and sees:
//
//   0x0000_0000  IMEM   IMEM_BYTES: code, rodata and the .data load image (loads allowed)
//   0x1000_0000  DMEM   DMEM_BYTES: data, bss, stack
//   0x2000_0000  mailbox: +0x000 CMD_IN (64 words, host-written, read-only here),
//                +0x100 CMD_OUT (64 words), +0x200 MBOX_CTRL (bit 0: a command is pending),
//                +0x204 MBOX_DONE (write: the answer is in CMD_OUT; clears pending),
//                +0x300 CAPS (hm_caps_t of the engine), +0x304 MR_LOG (log2 MR entries),
//                +0x308 LINK (bit 0: the Ethernet link is up)
//   0x3000_0000  engine control bus: offset X at +X (AXI4-Lite master, one access at a time)
//   0x4000_0000  timer: +0 cycle counter [31:0], +4 [63:32]
//
// Any other address completes at once (reads return 0) and sets the sticky `fault` flag;
// an error response of the control bus returns 0xFFFF_FFFF and sets it too: the CPU is never
// left waiting. Firmware layout and command formats: docs/firmware.md.
//
// Host side (AXI4-Lite slave, block-relative 16-bit offsets; BAR placement in docs/):
//   0x0000  CMD_IN      RW  64 words; writes refused (SLVERR) while a command is pending
//   0x0100  CMD_OUT     RO  64 words
//   0x0200  MBOX_DB     WO  write: starts the command in CMD_IN (SLVERR while one is pending)
//   0x0204  MBOX_STATUS RO  [0] pending, [1] core running, [2] fault, [3] trap,
//                           [31:16] commands completed (wraps)
//   0x0208  CORE_CTRL   RW  [0] run: 0 holds the CPU in reset (the IMEM window is writable
//                           only then)
//   0x8000  IMEM        WO  the instruction memory, word by word, while the CPU is held
// Anything else, or an access to the IMEM window while the CPU runs, answers SLVERR.
// `irq_done` pulses for one cycle when a command completes (the host's command vector).
module hm_ctrl_sys #(
  // Instruction memory bytes (power of two, at most 32 KiB: the host window is 32 KiB).
  parameter int IMEM_BYTES = 32768,
  // Data memory bytes (power of two).
  parameter int DMEM_BYTES = 65536,
  // $readmemh file that initialises IMEM (32-bit words), or "" for none (the host loads it).
  parameter string IMEM_INIT = ""
) (
  input  logic        clk,
  input  logic        rst,

  // CPU memory bus
  input  logic        c_valid,
  output logic        c_ready,
  input  logic [31:0] c_addr,
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
  input  logic [15:0] s_axil_awaddr,
  input  logic        s_axil_awvalid,
  output logic        s_axil_awready,
  input  logic [31:0] s_axil_wdata,
  input  logic [3:0]  s_axil_wstrb,
  input  logic        s_axil_wvalid,
  output logic        s_axil_wready,
  output logic [1:0]  s_axil_bresp,
  output logic        s_axil_bvalid,
  input  logic        s_axil_bready,
  input  logic [15:0] s_axil_araddr,
  input  logic        s_axil_arvalid,
  output logic        s_axil_arready,
  output logic [31:0] s_axil_rdata,
  output logic [1:0]  s_axil_rresp,
  output logic        s_axil_rvalid,
  input  logic        s_axil_rready,

  // Engine control bus (AXI4-Lite master)
  output logic [11:0] m_ctl_awaddr,
  output logic        m_ctl_awvalid,
  input  logic        m_ctl_awready,
  output logic [31:0] m_ctl_wdata,
  output logic [3:0]  m_ctl_wstrb,
  output logic        m_ctl_wvalid,
  input  logic        m_ctl_wready,
  input  logic [1:0]  m_ctl_bresp,
  input  logic        m_ctl_bvalid,
  output logic        m_ctl_bready,
  output logic [11:0] m_ctl_araddr,
  output logic        m_ctl_arvalid,
  input  logic        m_ctl_arready,
  input  logic [31:0] m_ctl_rdata,
  input  logic [1:0]  m_ctl_rresp,
  input  logic        m_ctl_rvalid,
  output logic        m_ctl_rready,

  output logic        irq_done,
  output logic        fault
);
  localparam int IW = $clog2(IMEM_BYTES / 4);
  localparam int DW = $clog2(DMEM_BYTES / 4);

  logic [31:0] imem [IMEM_BYTES / 4];
  logic [31:0] dmem [DMEM_BYTES / 4];
  logic [31:0] cmd_in  [64];
  logic [31:0] cmd_out [64];

  if (IMEM_INIT != "") begin : g_init
    initial $readmemh(IMEM_INIT, imem);
  end

  logic        run_q, pend_q, fault_q, trap_q;
  logic [15:0] done_cnt_q;
  logic [63:0] now_q;
  assign c_resetn = run_q && !rst;
  assign fault    = fault_q;

  // ---------------------------------------------------------------------------------------
  // CPU side: one access at a time; memories answer the cycle after the request, the control
  // bus when its response arrives
  // ---------------------------------------------------------------------------------------
  typedef enum logic [2:0] { C_IDLE, C_DONE, C_CTL_W, C_CTL_B, C_CTL_AR, C_CTL_R } cst_t;
  cst_t        cst_q;
  logic [31:0] crd_q;
  logic        aw_done_q, w_done_q;
  logic [3:0]  reg_sel;
  logic        is_imem, is_dmem, is_mbox, is_ctl, is_tmr, wr;
  assign wr      = c_wstrb != 4'd0;
  assign is_imem = c_addr[31:28] == 4'h0 && c_addr[27:2] < 26'(IMEM_BYTES / 4);
  assign is_dmem = c_addr[31:28] == 4'h1 && c_addr[27:2] < 26'(DMEM_BYTES / 4);
  assign is_mbox = c_addr[31:12] == 20'h20000;
  assign is_ctl  = c_addr[31:12] == 20'h30000;
  assign is_tmr  = c_addr[31:4] == 28'h4000000;
  assign reg_sel = c_addr[11:8];

  assign c_ready = cst_q == C_DONE;
  assign c_rdata = crd_q;

  assign m_ctl_awaddr  = c_addr[11:0];
  assign m_ctl_araddr  = c_addr[11:0];
  assign m_ctl_wdata   = c_wdata;
  assign m_ctl_wstrb   = c_wstrb;
  assign m_ctl_awvalid = cst_q == C_CTL_W && !aw_done_q;
  assign m_ctl_wvalid  = cst_q == C_CTL_W && !w_done_q;
  assign m_ctl_bready  = cst_q == C_CTL_B;
  assign m_ctl_arvalid = cst_q == C_CTL_AR;
  assign m_ctl_rready  = cst_q == C_CTL_R;

  logic mbox_done;     // the CPU wrote MBOX_DONE this cycle
  assign mbox_done = cst_q == C_IDLE && c_valid && c_resetn && is_mbox && wr && c_addr[11:0] == 12'h204;

  // host-side IMEM window (only while the CPU is held)
  logic        h_imem_we;
  logic [IW-1:0] h_imem_wa;
  logic [31:0] h_imem_wd;

  always_ff @(posedge clk) begin
    if (cst_q == C_IDLE && c_valid && c_resetn) begin
      if (is_dmem) begin
        for (int b = 0; b < 4; b++) if (c_wstrb[b]) dmem[c_addr[DW+1:2]][8*b +: 8] <= c_wdata[8*b +: 8];
      end
      if (is_mbox && wr && reg_sel == 4'h1) cmd_out[c_addr[7:2]] <= c_wdata;
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
        C_IDLE: if (c_valid && c_resetn) begin
          crd_q <= '0;
          cst_q <= C_DONE;
          if (is_imem) crd_q <= imem[c_addr[IW+1:2]];       // writes to IMEM are ignored
          else if (is_dmem) crd_q <= dmem[c_addr[DW+1:2]];
          else if (is_mbox) begin
            case (reg_sel)
              4'h0: crd_q <= cmd_in[c_addr[7:2]];
              4'h1: crd_q <= cmd_out[c_addr[7:2]];
              4'h2: crd_q <= {31'd0, pend_q};
              4'h3: crd_q <= c_addr[3] ? {31'd0, link_up} : c_addr[2] ? {24'd0, mr_log} : caps;
              default: fault_q <= 1'b1;
            endcase
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
          if (m_ctl_awready) aw_done_q <= 1'b1;
          if (m_ctl_wready) w_done_q <= 1'b1;
          if ((aw_done_q || m_ctl_awready) && (w_done_q || m_ctl_wready)) cst_q <= C_CTL_B;
        end
        C_CTL_B: if (m_ctl_bvalid) begin
          if (m_ctl_bresp != 2'b00) fault_q <= 1'b1;
          cst_q <= C_DONE;
        end
        C_CTL_AR: if (m_ctl_arready) cst_q <= C_CTL_R;
        C_CTL_R: if (m_ctl_rvalid) begin
          crd_q <= m_ctl_rresp == 2'b00 ? m_ctl_rdata : 32'hFFFF_FFFF;
          if (m_ctl_rresp != 2'b00) fault_q <= 1'b1;
          cst_q <= C_DONE;
        end
        default: cst_q <= C_IDLE;
      endcase
      if (!c_resetn) cst_q <= C_IDLE;
    end
  end

  // ---------------------------------------------------------------------------------------
  // Host side: a write needs address and data together; one response at a time
  // ---------------------------------------------------------------------------------------
  logic        hw_go, hr_go, hw_ok;
  logic [15:0] hwa, hra;
  assign hwa = s_axil_awaddr;
  assign hra = s_axil_araddr;
  assign hw_go = s_axil_awvalid && s_axil_wvalid && !s_axil_bvalid;
  assign s_axil_awready = hw_go;
  assign s_axil_wready  = hw_go;
  assign hr_go = s_axil_arvalid && !s_axil_rvalid;
  assign s_axil_arready = hr_go;

  always_comb begin
    hw_ok     = 1'b0;
    h_imem_we = 1'b0;
    h_imem_wa = hwa[IW+1:2];
    h_imem_wd = s_axil_wdata;
    if (hw_go && s_axil_wstrb == 4'hF && hwa[1:0] == 2'b00) begin
      if (hwa[15]) begin
        hw_ok     = !run_q && 32'(hwa[14:2]) < IMEM_BYTES / 4;
        h_imem_we = hw_ok;
      end else if (hwa[15:8] == 8'h00) hw_ok = !pend_q;             // CMD_IN
      else if (hwa == 16'h0200) hw_ok = !pend_q;                     // MBOX_DB
      else if (hwa == 16'h0208) hw_ok = 1'b1;                        // CORE_CTRL
    end
  end

  always_ff @(posedge clk) begin
    if (hw_go && hw_ok && hwa[15:8] == 8'h00) cmd_in[hwa[7:2]] <= s_axil_wdata;
  end

  always_ff @(posedge clk) begin
    if (rst) begin
      s_axil_bvalid <= 1'b0;
      s_axil_rvalid <= 1'b0;
      run_q         <= 1'b0;
      pend_q        <= 1'b0;
      done_cnt_q    <= '0;
      irq_done      <= 1'b0;
    end else begin
      irq_done <= 1'b0;
      if (s_axil_bvalid && s_axil_bready) s_axil_bvalid <= 1'b0;
      if (s_axil_rvalid && s_axil_rready) s_axil_rvalid <= 1'b0;
      if (hw_go) begin
        s_axil_bvalid <= 1'b1;
        s_axil_bresp  <= hw_ok ? 2'b00 : 2'b10;
        if (hw_ok && hwa == 16'h0200) pend_q <= 1'b1;
        if (hw_ok && hwa == 16'h0208) begin
          run_q <= s_axil_wdata[0];
          if (!s_axil_wdata[0]) pend_q <= 1'b0;    // a held CPU answers nothing
        end
      end
      if (mbox_done && pend_q) begin
        pend_q     <= 1'b0;
        done_cnt_q <= done_cnt_q + 1'b1;
        irq_done   <= 1'b1;
      end
      if (hr_go) begin
        s_axil_rvalid <= 1'b1;
        s_axil_rresp  <= 2'b00;
        s_axil_rdata  <= '0;
        if (hra[1:0] != 2'b00) s_axil_rresp <= 2'b10;
        else if (hra[15]) s_axil_rresp <= 2'b10;    // the IMEM window is write-only
        else if (hra[15:8] == 8'h00) s_axil_rdata <= cmd_in[hra[7:2]];
        else if (hra[15:8] == 8'h01) s_axil_rdata <= cmd_out[hra[7:2]];
        else if (hra == 16'h0204) s_axil_rdata <= {done_cnt_q, 12'd0, trap_q, fault_q, run_q, pend_q};
        else if (hra == 16'h0208) s_axil_rdata <= {31'd0, run_q};
        else s_axil_rresp <= 2'b10;
      end
    end
  end

  if (IMEM_BYTES > 32768 || (1 << IW) * 4 != IMEM_BYTES) begin : g_bad_imem
    $error("hm_ctrl_sys: IMEM_BYTES must be a power of two, at most 32 KiB");
  end
  if ((1 << DW) * 4 != DMEM_BYTES) begin : g_bad_dmem
    $error("hm_ctrl_sys: DMEM_BYTES must be a power of two");
  end
endmodule
