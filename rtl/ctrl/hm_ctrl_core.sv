// The NIC's control core: a picorv32 (RV32IMC, fetched at build time from PyPI's
// pythondata-cpu-picorv32, pinned in ./hematite) on the memory bus of hm_ctrl_sys, which
// holds the memories, the host mailbox, the timer and the bridge to the engine's control
// bus. Only this file knows the CPU: an FPGA or DPU user replaces it with their own core (or
// drives hm_ctrl_sys's bus from the DPU's Arm cores) and keeps everything else. Firmware:
// firmware/ (docs/firmware.md).
module hm_ctrl_core
  import hm_pkg::*;
#(
  // Instruction memory bytes (power of two, at most 32 KiB).
  parameter int IMEM_BYTES = 32768,
  // Data memory bytes (power of two).
  parameter int DMEM_BYTES = 65536,
  // Table memory bytes (power of two; the firmware's QP and CQ records, see hm_ctrl_sys).
  parameter int XMEM_BYTES = 1048576,
  // $readmemh file with the firmware image, or "" (the host loads it through the window).
  parameter string IMEM_INIT = ""
) (
  input  logic        clk,
  input  logic        rst,

  input  logic [31:0] caps,
  input  logic [7:0]  mr_log,
  input  logic        link_up,       // the Ethernet link (the firmware reports port state)

  // Host AXI4-Lite slave (mailbox, core control, IMEM window)
  input  hm_axil_req_t s_axil_req,
  output hm_axil_rsp_t s_axil_rsp,

  // Engine control bus (AXI4-Lite master)
  output hm_axil_req_t m_ctl_req,
  input  hm_axil_rsp_t m_ctl_rsp,

  output logic        irq_done,
  output logic        fault,
  output logic        trap,
  output logic        poll_idle,     // the firmware polls an empty mailbox (hm_ctrl_sys)
  // Instruction-fetch trace (for a profiler or an FPGA logic analyser): trace_fetch is high
  // in the cycle an instruction word is delivered, trace_pc its (word-aligned) address
  output logic        trace_fetch,
  output logic [31:0] trace_pc
);
  logic        c_valid, c_ready, c_resetn, c_instr, c_la_read;
  logic [31:0] c_la_addr;
  logic [31:0] c_addr, c_wdata, c_rdata;
  logic [3:0]  c_wstrb;

  hm_ctrl_sys #(.IMEM_BYTES(IMEM_BYTES), .DMEM_BYTES(DMEM_BYTES), .XMEM_BYTES(XMEM_BYTES), .IMEM_INIT(IMEM_INIT)) u_sys (
    .clk, .rst,
    .c_valid, .c_ready, .c_addr, .c_la_read, .c_la_addr, .c_wdata, .c_wstrb, .c_rdata, .c_resetn, .c_trap(trap),
    .caps, .mr_log, .link_up,
    .s_axil_req, .s_axil_rsp, .m_ctl_req, .m_ctl_rsp,
    .irq_done, .fault, .poll_idle
  );

  picorv32 #(
    .ENABLE_COUNTERS(1'b1), .ENABLE_COUNTERS64(1'b1), .ENABLE_REGS_16_31(1'b1),
    .ENABLE_REGS_DUALPORT(1'b1), .BARREL_SHIFTER(1'b1), .COMPRESSED_ISA(1'b1),
    .CATCH_MISALIGN(1'b1), .CATCH_ILLINSN(1'b1), .ENABLE_MUL(1'b1), .ENABLE_DIV(1'b1),
    .ENABLE_IRQ(1'b0), .PROGADDR_RESET(32'h0000_0000),
    .STACKADDR(32'h1000_0000 + 32'(DMEM_BYTES))
  ) u_cpu (
    .clk, .resetn(c_resetn), .trap,
    .mem_valid(c_valid), .mem_instr(c_instr), .mem_ready(c_ready), .mem_addr(c_addr),
    .mem_wdata(c_wdata), .mem_wstrb(c_wstrb), .mem_rdata(c_rdata),
    .mem_la_read(c_la_read), .mem_la_write(), .mem_la_addr(c_la_addr), .mem_la_wdata(), .mem_la_wstrb(),
    .pcpi_valid(), .pcpi_insn(), .pcpi_rs1(), .pcpi_rs2(),
    .pcpi_wr(1'b0), .pcpi_rd(32'd0), .pcpi_wait(1'b0), .pcpi_ready(1'b0),
    .irq(32'd0), .eoi(),
    .trace_valid(), .trace_data()
  );

  assign trace_fetch = c_valid && c_ready && c_instr;
  assign trace_pc    = c_addr;
endmodule
