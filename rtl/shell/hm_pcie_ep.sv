// The shell's PCIe side: what sits between the UltraScale+ PCIe block's user interfaces and the
// core, for physical function 0 (512 bits, DWORD-aligned, no straddling, client tags, MSI-X in
// external-table mode).
//
//   - hm_pcie_cq: the host's requests to BAR 0 (AXI4-Lite) and the push window (BAR PUSH_BAR);
//   - BAR 0 decoded (BAR0_AW = 18 bits, 256 KiB):
//       0x00000..0x0ffff  the engine's register block (m_eng_axil_*)
//       0x10000..0x1ffff  the control core's host port (m_ctl_axil_*)
//       0x20000..0x20fff  the MSI-X table (0x20000) and PBA (0x20800), hm_msix
//       0x30000..0x30fff  the shell's register block (m_shl_axil_*; hm_card)
//       anything else     reserved: reads answer an error (the completer sends Completer
//                         Abort), writes are dropped (the access answers an error, counted);
//                         the answer comes the clock after the address is taken
//     (the function BAR of docs/registers.md, hm_bar);
//   - hm_msix: the core's interrupt events to MSI-X messages (sent only while MSI-X and bus
//     mastering are enabled: a message is a memory write);
//   - hm_pcie_dma: the engine's DMA master to RQ/RC.
// Bus mastering is PF0's Bus Master Enable (cfg_function_status bit 2).
//
// Function-level reset (cfg_flr_in_process[0] from the block): core_rst goes up the clock after
// (the engine and the control core stop, and MSI-X returns to its reset state: every vector
// masked); while it is up, BAR 0 accesses are answered as failed by the completer without
// reaching the blocks in reset (one part way included: they never answer it); the DMA bridge
// starts no new TLP on RQ, finishes the one it may be part way through and is then reset
// (FLR_RESET clocks; completions still on their way find no tag in flight and are dropped and
// counted; the tag values are used again after the FLR, which PCIe gives 100 ms, far longer
// than any completion takes); then cfg_flr_done[0] is raised for one clock. If the block takes
// nothing on RQ for FLR_WAIT clocks (its link is down: it resets its user side itself), the
// bridge is reset anyway, which may leave a TLP unfinished on RQ. core_rst stays up until the
// block drops cfg_flr_in_process.
module hm_pcie_ep #(
  parameter int NUM_VEC      = 32,      // MSI-X vectors
  parameter int PUSH_BAR     = 2,       // BAR of the push window
  parameter int PUSH_QW      = 16,      // QP number bits of a push
  parameter int TIMEOUT_TICK = 65536,   // DMA completion timeout tick (hm_pcie_dma)
  parameter int MSIX_TIMEOUT = 65536,   // MSI-X answer timeout (hm_msix)
  parameter int FLR_RESET    = 16,      // clocks the DMA bridge is held in reset in an FLR
  parameter int FLR_WAIT     = 65536    // clocks an FLR waits for RQ to be between TLPs
) (
  input  logic                clk,
  input  logic                rst,
  output logic                core_rst,           // the core's reset: rst, or an FLR

  // ---- the PCIe block
  input  logic [511:0]        s_axis_cq_tdata,
  input  logic [15:0]         s_axis_cq_tkeep,
  input  logic                s_axis_cq_tlast,
  input  logic [182:0]        s_axis_cq_tuser,
  input  logic                s_axis_cq_tvalid,
  output logic                s_axis_cq_tready,
  output logic [511:0]        m_axis_cc_tdata,
  output logic [15:0]         m_axis_cc_tkeep,
  output logic                m_axis_cc_tlast,
  output logic [80:0]         m_axis_cc_tuser,
  output logic                m_axis_cc_tvalid,
  input  logic                m_axis_cc_tready,
  output logic [511:0]        m_axis_rq_tdata,
  output logic [15:0]         m_axis_rq_tkeep,
  output logic                m_axis_rq_tlast,
  output logic [136:0]        m_axis_rq_tuser,
  output logic                m_axis_rq_tvalid,
  input  logic                m_axis_rq_tready,
  input  logic [511:0]        s_axis_rc_tdata,
  input  logic [15:0]         s_axis_rc_tkeep,
  input  logic                s_axis_rc_tlast,
  input  logic [160:0]        s_axis_rc_tuser,
  input  logic                s_axis_rc_tvalid,
  output logic                s_axis_rc_tready,
  input  logic [1:0]          cfg_max_payload,
  input  logic [2:0]          cfg_max_read_req,
  input  logic [15:0]         cfg_function_status,
  input  logic [3:0]          cfg_interrupt_msix_enable,
  input  logic [3:0]          cfg_interrupt_msix_mask,
  output logic [63:0]         cfg_interrupt_msix_address,
  output logic [31:0]         cfg_interrupt_msix_data,
  output logic                cfg_interrupt_msix_int,
  input  logic                cfg_interrupt_msix_sent,
  input  logic                cfg_interrupt_msix_fail,
  input  logic [3:0]          cfg_flr_in_process,
  output logic [3:0]          cfg_flr_done,

  // ---- the core: its register blocks (AXI4-Lite, 16-bit offsets)
  output logic [15:0]         m_eng_axil_awaddr,
  output logic                m_eng_axil_awvalid,
  input  logic                m_eng_axil_awready,
  output logic [31:0]         m_eng_axil_wdata,
  output logic [3:0]          m_eng_axil_wstrb,
  output logic                m_eng_axil_wvalid,
  input  logic                m_eng_axil_wready,
  input  logic [1:0]          m_eng_axil_bresp,
  input  logic                m_eng_axil_bvalid,
  output logic                m_eng_axil_bready,
  output logic [15:0]         m_eng_axil_araddr,
  output logic                m_eng_axil_arvalid,
  input  logic                m_eng_axil_arready,
  input  logic [31:0]         m_eng_axil_rdata,
  input  logic [1:0]          m_eng_axil_rresp,
  input  logic                m_eng_axil_rvalid,
  output logic                m_eng_axil_rready,
  output logic [15:0]         m_ctl_axil_awaddr,
  output logic                m_ctl_axil_awvalid,
  input  logic                m_ctl_axil_awready,
  output logic [31:0]         m_ctl_axil_wdata,
  output logic [3:0]          m_ctl_axil_wstrb,
  output logic                m_ctl_axil_wvalid,
  input  logic                m_ctl_axil_wready,
  input  logic [1:0]          m_ctl_axil_bresp,
  input  logic                m_ctl_axil_bvalid,
  output logic                m_ctl_axil_bready,
  output logic [15:0]         m_ctl_axil_araddr,
  output logic                m_ctl_axil_arvalid,
  input  logic                m_ctl_axil_arready,
  input  logic [31:0]         m_ctl_axil_rdata,
  input  logic [1:0]          m_ctl_axil_rresp,
  input  logic                m_ctl_axil_rvalid,
  output logic                m_ctl_axil_rready,
  // ---- the shell's register block (AXI4-Lite, 12-bit offsets)
  output logic [11:0]         m_shl_axil_awaddr,
  output logic                m_shl_axil_awvalid,
  input  logic                m_shl_axil_awready,
  output logic [31:0]         m_shl_axil_wdata,
  output logic [3:0]          m_shl_axil_wstrb,
  output logic                m_shl_axil_wvalid,
  input  logic                m_shl_axil_wready,
  input  logic [1:0]          m_shl_axil_bresp,
  input  logic                m_shl_axil_bvalid,
  output logic                m_shl_axil_bready,
  output logic [11:0]         m_shl_axil_araddr,
  output logic                m_shl_axil_arvalid,
  input  logic                m_shl_axil_arready,
  input  logic [31:0]         m_shl_axil_rdata,
  input  logic [1:0]          m_shl_axil_rresp,
  input  logic                m_shl_axil_rvalid,
  output logic                m_shl_axil_rready,

  // ---- the core: pushes, interrupt events, DMA (AXI4 slave, 512-bit)
  output logic [PUSH_QW-1:0]  m_push_qpn,
  output logic [511:0]        m_push_data,
  output logic                m_push_valid,
  input  logic                m_push_ready,
  input  logic [7:0]          s_irq_vec,
  input  logic                s_irq_valid,
  output logic                s_irq_ready,
  input  logic [3:0]          s_axi_arid,
  input  logic [63:0]         s_axi_araddr,
  input  logic [7:0]          s_axi_arlen,
  input  logic [2:0]          s_axi_arsize,
  input  logic [1:0]          s_axi_arburst,
  input  logic                s_axi_arvalid,
  output logic                s_axi_arready,
  output logic [3:0]          s_axi_rid,
  output logic [511:0]        s_axi_rdata,
  output logic [1:0]          s_axi_rresp,
  output logic                s_axi_rlast,
  output logic                s_axi_rvalid,
  input  logic                s_axi_rready,
  input  logic [3:0]          s_axi_awid,
  input  logic [63:0]         s_axi_awaddr,
  input  logic [7:0]          s_axi_awlen,
  input  logic [2:0]          s_axi_awsize,
  input  logic [1:0]          s_axi_awburst,
  input  logic                s_axi_awvalid,
  output logic                s_axi_awready,
  input  logic [511:0]        s_axi_wdata,
  input  logic [63:0]         s_axi_wstrb,
  input  logic                s_axi_wlast,
  input  logic                s_axi_wvalid,
  output logic                s_axi_wready,
  output logic [3:0]          s_axi_bid,
  output logic [1:0]          s_axi_bresp,
  output logic                s_axi_bvalid,
  input  logic                s_axi_bready,

  // ---- counters (32 bits, wrapping; MSI-X's and the DMA bridge's are cleared by an FLR, the
  // completer's and stat_flr are not: the completer serves BAR 0 across an FLR)
  output logic [31:0]         stat_mmio_wr,       // BAR 0 writes taken
  output logic [31:0]         stat_mmio_rd,       // BAR 0 reads answered
  output logic [31:0]         stat_push,          // pushes passed on
  output logic [31:0]         stat_ur,            // requests answered Unsupported Request
  output logic [31:0]         stat_dropped,       // posted requests dropped
  output logic [31:0]         stat_axil_err,      // BAR 0 accesses answered with an error
  output logic [31:0]         stat_msix_sent,     // MSI-X messages sent
  output logic [31:0]         stat_msix_fail,     // MSI-X messages refused by the block
  output logic [31:0]         stat_dma_rd_req,    // memory read requests sent
  output logic [31:0]         stat_dma_wr_req,    // memory writes sent
  output logic [31:0]         stat_dma_cpl,       // completions taken
  output logic [31:0]         stat_dma_cpl_err,   // completions with an error or malformed
  output logic [31:0]         stat_dma_cpl_unexpected, // completions for no tag in flight
  output logic [31:0]         stat_dma_timeout,   // read requests timed out
  output logic [31:0]         stat_dma_bad_burst, // DMA bursts refused
  output logic [5:0]          stat_dma_tags_retired, // read tags out of use until reset
  output logic [31:0]         stat_flr            // function-level resets begun
);
  import hm_pkg::*;
  localparam int AW = 18;

  // ---- BAR 0 from the completer (one access at a time: AW and W, then B; or AR, then R)
  logic [AW-1:0] b_awaddr, b_araddr;
  logic          b_awvalid, b_awready, b_wvalid, b_wready, b_bvalid, b_bready;
  logic          b_arvalid, b_arready, b_rvalid, b_rready;
  logic [31:0]   b_wdata, b_rdata;
  logic [3:0]    b_wstrb;
  logic [1:0]    b_bresp, b_rresp;

  hm_pcie_cq #(.BAR0_AW(AW), .PUSH_BAR(PUSH_BAR), .PUSH_QW(PUSH_QW)) u_cq (
    .clk, .rst, .fence(core_rst),
    .s_axis_cq_tdata, .s_axis_cq_tkeep, .s_axis_cq_tlast, .s_axis_cq_tuser, .s_axis_cq_tvalid,
    .s_axis_cq_tready,
    .m_axis_cc_tdata, .m_axis_cc_tkeep, .m_axis_cc_tlast, .m_axis_cc_tuser, .m_axis_cc_tvalid,
    .m_axis_cc_tready,
    .m_axil_awaddr(b_awaddr), .m_axil_awvalid(b_awvalid), .m_axil_awready(b_awready),
    .m_axil_wdata(b_wdata), .m_axil_wstrb(b_wstrb), .m_axil_wvalid(b_wvalid),
    .m_axil_wready(b_wready), .m_axil_bresp(b_bresp), .m_axil_bvalid(b_bvalid),
    .m_axil_bready(b_bready), .m_axil_araddr(b_araddr), .m_axil_arvalid(b_arvalid),
    .m_axil_arready(b_arready), .m_axil_rdata(b_rdata), .m_axil_rresp(b_rresp),
    .m_axil_rvalid(b_rvalid), .m_axil_rready(b_rready),
    .m_push_qpn, .m_push_data, .m_push_valid, .m_push_ready,
    .stat_mmio_wr, .stat_mmio_rd, .stat_push, .stat_ur, .stat_dropped, .stat_axil_err
  );

  // ---- decode: by the address of the access in progress, registered (the completer offers an
  // address from the clock after it sets it, and holds it until the answer)
  // (four targets: the shell's registers and the reserved space share T_OTH and are told
  // apart by a registered flag of their own, a 2:1 selection ahead of the 4:1)
  typedef enum logic [1:0] {T_ENG, T_CTL, T_MSIX, T_OTH} tgt_t;
  function automatic tgt_t tgt(input logic [AW-1:0] a);
    logic unused_lo;
    unused_lo = ^a[11:0];
    if (a[17:16] == 2'd0) return T_ENG;
    if (a[17:16] == 2'd1) return T_CTL;
    if (a[17:12] == 6'h20) return T_MSIX;
    return T_OTH;
  endfunction
  tgt_t wt, rt;
  logic w_shl, r_shl;                     // T_OTH: the shell's registers (else reserved)
  always_ff @(posedge clk) begin
    wt    <= tgt(b_awaddr);
    rt    <= tgt(b_araddr);
    w_shl <= b_awaddr[17:12] == 6'h30;
    r_shl <= b_araddr[17:12] == 6'h30;
  end
  logic w_none, r_none, w_sh, r_sh;
  assign w_sh   = wt == T_OTH && w_shl;
  assign r_sh   = rt == T_OTH && r_shl;
  assign w_none = wt == T_OTH && !w_shl;
  assign r_none = rt == T_OTH && !r_shl;

  // ---- function-level reset
  typedef enum logic [1:0] {F_IDLE, F_WAIT, F_RESET, F_HOLD} flr_t;
  flr_t          flr_q;
  logic [$clog2(FLR_WAIT + FLR_RESET + 1)-1:0] flr_cnt_q;
  logic          dma_rst_q, flr_done_q, rq_between;
  always_ff @(posedge clk) begin
    flr_done_q <= 1'b0;
    if (rst) begin
      flr_q     <= F_IDLE;
      dma_rst_q <= 1'b1;
      core_rst  <= 1'b1;
      stat_flr  <= '0;
    end else begin
      dma_rst_q <= 1'b0;
      core_rst  <= flr_q != F_IDLE || cfg_flr_in_process[0];
      unique case (flr_q)
        F_IDLE: if (cfg_flr_in_process[0]) begin
          flr_q     <= F_WAIT;
          flr_cnt_q <= '0;
          stat_flr  <= stat_flr + 1'b1;
        end
        F_WAIT: begin
          flr_cnt_q <= flr_cnt_q + 1'b1;
          if (rq_between || 32'(flr_cnt_q) >= FLR_WAIT - 1) begin
            flr_q     <= F_RESET;
            flr_cnt_q <= '0;
            dma_rst_q <= 1'b1;
          end
        end
        F_RESET: begin
          dma_rst_q <= 1'b1;
          flr_cnt_q <= flr_cnt_q + 1'b1;
          if (32'(flr_cnt_q) >= FLR_RESET - 1) begin
            flr_q      <= F_HOLD;
            dma_rst_q  <= 1'b0;
            flr_done_q <= 1'b1;
          end
        end
        F_HOLD: if (!cfg_flr_in_process[0]) flr_q <= F_IDLE;
        default: flr_q <= F_IDLE;
      endcase
    end
  end
  assign cfg_flr_done = {3'b000, flr_done_q};

  // (an MSI-X message is a memory write: sent only while bus mastering is enabled; until
  // then events wait, pending; registered, a clock late like the block's own status)
  logic msix_en_q;
  always_ff @(posedge clk) msix_en_q <= cfg_interrupt_msix_enable[0] && cfg_function_status[2];

  // the MSI-X window
  logic          x_awready, x_wready, x_bvalid, x_arready, x_rvalid;
  logic [1:0]    x_bresp, x_rresp;
  logic [31:0]   x_rdata;
  logic [31:0]   x_to_u, x_bad_u;
  hm_msix #(.NUM_VEC(NUM_VEC), .ADDR_W(12), .PBA_OFFSET('h800), .TIMEOUT(MSIX_TIMEOUT)) u_msix (
    .clk, .rst(core_rst),
    .s_axil_awaddr(b_awaddr[11:0]), .s_axil_awvalid(b_awvalid && wt == T_MSIX),
    .s_axil_awready(x_awready),
    .s_axil_wdata(b_wdata), .s_axil_wstrb(b_wstrb), .s_axil_wvalid(b_wvalid && wt == T_MSIX),
    .s_axil_wready(x_wready), .s_axil_bresp(x_bresp), .s_axil_bvalid(x_bvalid),
    .s_axil_bready(b_bready && wt == T_MSIX),
    .s_axil_araddr(b_araddr[11:0]), .s_axil_arvalid(b_arvalid && rt == T_MSIX),
    .s_axil_arready(x_arready), .s_axil_rdata(x_rdata), .s_axil_rresp(x_rresp),
    .s_axil_rvalid(x_rvalid), .s_axil_rready(b_rready && rt == T_MSIX),
    .s_irq_vec, .s_irq_valid, .s_irq_ready,
    .cfg_interrupt_msix_enable(msix_en_q),
    .cfg_interrupt_msix_mask(cfg_interrupt_msix_mask[0]),
    .cfg_interrupt_msix_address, .cfg_interrupt_msix_data, .cfg_interrupt_msix_int,
    .cfg_interrupt_msix_sent, .cfg_interrupt_msix_fail,
    .stat_sent(stat_msix_sent), .stat_fail(stat_msix_fail), .stat_timeout(x_to_u), .stat_bad_vec(x_bad_u)
  );

  // reserved space: the register blocks' AXI4-Lite front end, refusing every access (SLVERR
  // on B and R, read data 0)
  hm_axil_req_t n_req;
  hm_axil_rsp_t n_rsp;
  logic         n_wr_pend_u, n_wr_do_u, n_rd_do_u;
  logic [AW-1:0] n_wr_addr_u, n_rd_addr_u;
  logic [31:0]  n_wr_data_u;
  logic [3:0]   n_wr_strb_u;
  assign n_req = '{awaddr: 32'(b_awaddr), awvalid: b_awvalid && w_none, wdata: b_wdata,
                   wstrb: b_wstrb, wvalid: b_wvalid && w_none,
                   bready: b_bready && w_none, araddr: 32'(b_araddr),
                   arvalid: b_arvalid && r_none, rready: b_rready && r_none};
  hm_axil_fe #(.ADDR_WIDTH(AW)) u_none (
    .clk, .rst, .s_axil_req(n_req), .s_axil_rsp(n_rsp),
    .wr_pend(n_wr_pend_u), .wr_addr(n_wr_addr_u), .wr_data(n_wr_data_u), .wr_strb(n_wr_strb_u),
    .wr_err(1'b1), .wr_stall(1'b0), .wr_do(n_wr_do_u),
    .rd_do(n_rd_do_u), .rd_addr(n_rd_addr_u), .rd_data(32'd0), .rd_err(1'b1)
  );

  // T_OTH's answers: the shell's registers or the reserved-space responder
  logic        o_awready, o_wready, o_bvalid, o_arready, o_rvalid;
  logic [1:0]  o_bresp, o_rresp;
  logic [31:0] o_rdata;
  assign o_awready = w_shl ? m_shl_axil_awready : n_rsp.awready;
  assign o_wready  = w_shl ? m_shl_axil_wready  : n_rsp.wready;
  assign o_bvalid  = w_shl ? m_shl_axil_bvalid  : n_rsp.bvalid;
  assign o_bresp   = w_shl ? m_shl_axil_bresp   : n_rsp.bresp;
  assign o_arready = r_shl ? m_shl_axil_arready : n_rsp.arready;
  assign o_rvalid  = r_shl ? m_shl_axil_rvalid  : n_rsp.rvalid;
  assign o_rdata   = r_shl ? m_shl_axil_rdata   : n_rsp.rdata;
  assign o_rresp   = r_shl ? m_shl_axil_rresp   : n_rsp.rresp;

  assign m_eng_axil_awaddr  = b_awaddr[15:0];
  assign m_eng_axil_awvalid = b_awvalid && wt == T_ENG;
  assign m_eng_axil_wdata   = b_wdata;
  assign m_eng_axil_wstrb   = b_wstrb;
  assign m_eng_axil_wvalid  = b_wvalid && wt == T_ENG;
  assign m_eng_axil_bready  = b_bready && wt == T_ENG;
  assign m_eng_axil_araddr  = b_araddr[15:0];
  assign m_eng_axil_arvalid = b_arvalid && rt == T_ENG;
  assign m_eng_axil_rready  = b_rready && rt == T_ENG;
  assign m_ctl_axil_awaddr  = b_awaddr[15:0];
  assign m_ctl_axil_awvalid = b_awvalid && wt == T_CTL;
  assign m_ctl_axil_wdata   = b_wdata;
  assign m_ctl_axil_wstrb   = b_wstrb;
  assign m_ctl_axil_wvalid  = b_wvalid && wt == T_CTL;
  assign m_ctl_axil_bready  = b_bready && wt == T_CTL;
  assign m_ctl_axil_araddr  = b_araddr[15:0];
  assign m_ctl_axil_arvalid = b_arvalid && rt == T_CTL;
  assign m_ctl_axil_rready  = b_rready && rt == T_CTL;
  assign m_shl_axil_awaddr  = b_awaddr[11:0];
  assign m_shl_axil_awvalid = b_awvalid && w_sh;
  assign m_shl_axil_wdata   = b_wdata;
  assign m_shl_axil_wstrb   = b_wstrb;
  assign m_shl_axil_wvalid  = b_wvalid && w_sh;
  assign m_shl_axil_bready  = b_bready && w_sh;
  assign m_shl_axil_araddr  = b_araddr[11:0];
  assign m_shl_axil_arvalid = b_arvalid && r_sh;
  assign m_shl_axil_rready  = b_rready && r_sh;

  always_comb begin
    unique case (wt)
      T_ENG:  begin b_awready = m_eng_axil_awready; b_wready = m_eng_axil_wready;
                    b_bvalid = m_eng_axil_bvalid; b_bresp = m_eng_axil_bresp; end
      T_CTL:  begin b_awready = m_ctl_axil_awready; b_wready = m_ctl_axil_wready;
                    b_bvalid = m_ctl_axil_bvalid; b_bresp = m_ctl_axil_bresp; end
      T_MSIX: begin b_awready = x_awready; b_wready = x_wready; b_bvalid = x_bvalid;
                    b_bresp = x_bresp; end
      default: begin b_awready = o_awready; b_wready = o_wready; b_bvalid = o_bvalid;
                     b_bresp = o_bresp; end
    endcase
    unique case (rt)
      T_ENG:  begin b_arready = m_eng_axil_arready; b_rvalid = m_eng_axil_rvalid;
                    b_rdata = m_eng_axil_rdata; b_rresp = m_eng_axil_rresp; end
      T_CTL:  begin b_arready = m_ctl_axil_arready; b_rvalid = m_ctl_axil_rvalid;
                    b_rdata = m_ctl_axil_rdata; b_rresp = m_ctl_axil_rresp; end
      T_MSIX: begin b_arready = x_arready; b_rvalid = x_rvalid; b_rdata = x_rdata;
                    b_rresp = x_rresp; end
      default: begin b_arready = o_arready; b_rvalid = o_rvalid; b_rdata = o_rdata;
                     b_rresp = o_rresp; end
    endcase
  end

  // ---- DMA
  hm_pcie_dma #(.TIMEOUT_TICK(TIMEOUT_TICK)) u_dma (
    .clk, .rst(dma_rst_q),
    .s_axi_arid, .s_axi_araddr, .s_axi_arlen, .s_axi_arsize, .s_axi_arburst, .s_axi_arvalid,
    .s_axi_arready, .s_axi_rid, .s_axi_rdata, .s_axi_rresp, .s_axi_rlast, .s_axi_rvalid,
    .s_axi_rready, .s_axi_awid, .s_axi_awaddr, .s_axi_awlen, .s_axi_awsize, .s_axi_awburst,
    .s_axi_awvalid, .s_axi_awready, .s_axi_wdata, .s_axi_wstrb, .s_axi_wlast, .s_axi_wvalid,
    .s_axi_wready, .s_axi_bid, .s_axi_bresp, .s_axi_bvalid, .s_axi_bready,
    .m_axis_rq_tdata, .m_axis_rq_tkeep, .m_axis_rq_tlast, .m_axis_rq_tuser, .m_axis_rq_tvalid,
    .m_axis_rq_tready,
    .s_axis_rc_tdata, .s_axis_rc_tkeep, .s_axis_rc_tlast, .s_axis_rc_tuser, .s_axis_rc_tvalid,
    .s_axis_rc_tready,
    .cfg_max_payload, .cfg_max_read_req, .cfg_bus_master_en(cfg_function_status[2]),
    .stat_rd_req(stat_dma_rd_req), .stat_wr_req(stat_dma_wr_req), .stat_cpl(stat_dma_cpl),
    .stat_cpl_err(stat_dma_cpl_err), .stat_cpl_unexpected(stat_dma_cpl_unexpected),
    .stat_timeout(stat_dma_timeout), .stat_bad_burst(stat_dma_bad_burst),
    .tags_retired(stat_dma_tags_retired), .rq_hold(flr_q == F_WAIT || flr_q == F_RESET), .rq_between
  );

  // (MSI-X's timeout and bad-vector counts are not in the shell's registers)
  logic unused_ok;
  assign unused_ok = ^{x_to_u, x_bad_u, cfg_function_status[15:3],
                       cfg_function_status[1:0], cfg_interrupt_msix_enable[3:1],
                       cfg_interrupt_msix_mask[3:1], cfg_flr_in_process[3:1], n_wr_pend_u,
                       n_wr_do_u, n_rd_do_u, n_wr_addr_u, n_rd_addr_u, n_wr_data_u, n_wr_strb_u};

endmodule
