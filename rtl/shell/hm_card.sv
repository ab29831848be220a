// The card's logic, without the board: the transport engine, the control core, the PCIe side
// (hm_pcie_ep), one Ethernet port (hm_eth_port) and the shell's register block, wired to the
// user interfaces of an UltraScale+ PCIe block (512 bits, 250 MHz) and of a 100G MAC (CMAC,
// 512 bits, its own clock). A board's top (boards/<card>/) instantiates the hard IPs, the
// clock buffers and this; a second card of the same family is a new top and constraints.
//
//   host --PCIe block-- hm_pcie_ep --BAR 0--+-- engine registers (hm_rc_engine s_bar)
//                          |                +-- control core host port (hm_ctrl_core)
//                          |                +-- MSI-X table and PBA
//                          |                +-- shell registers (hm_shell_regs, PeakRDL)
//                          +-- push window --> engine s_push
//                          +-- DMA (RQ/RC) <-- engine m_axi
//                          +-- MSI-X <-------- engine m_irq
//   MAC (mac_clk) -- hm_eth_port (frame FIFOs, PFC) -- engine s_rx / m_tx (clk)
//
// Clocks: clk is the PCIe block's user clock and the core's clock (the engine, the control
// core, the registers, the core side of the MAC FIFOs); mac_clk is the MAC's. Resets: rst is
// the PCIe block's user reset (synchronous to clk); an FLR resets the core and the shell's
// registers too (hm_pcie_ep core_rst: a function reset brings back PFC off and every setting's
// reset value); mac_rst is the MAC's own, synchronous to mac_clk.
//
// The engine's per-QP rate-limit input (rl_pause, a test hook of the co-simulation) is held
// at 0: DCQCN paces QPs inside the engine. The control core's mailbox-done line is not an
// interrupt here (the host driver polls MBOX_STATUS), and its fetch trace is left unused.
module hm_card
  import hm_pkg::*;
  import hm_regs_pkg::*;
  import hm_shell_regs_pkg::*;
#(
  parameter int NUM_QPS      = 4096,    // engine QP table entries (hm_rc_engine)
  parameter int NUM_MRS      = 4096,    // engine MR table entries
  parameter int NUM_CQS      = 4096,    // engine CQ table entries
  parameter int NUM_VEC      = 32,      // MSI-X vectors (the PCIe block's table size)
  parameter int PUSH_BAR     = 2,       // BAR of the push window (64 B per QP)
  parameter int RX_DEPTH     = 512,     // MAC receive FIFO beats (power of two)
  parameter int TX_DEPTH     = 256,     // MAC transmit FIFO beats (power of two, > a frame)
  parameter int TIMEOUT_TICK = 65536,   // DMA completion timeout tick (hm_pcie_dma)
  parameter int MSIX_TIMEOUT = 65536,   // MSI-X answer timeout (hm_msix)
  parameter int FLR_RESET    = 16,      // clocks the DMA bridge is held in reset in an FLR
  parameter int FLR_WAIT     = 65536,   // clocks an FLR waits for RQ to be between TLPs
  parameter int STAGES       = 2,       // synchroniser flip-flops
  localparam int LW          = $clog2(RX_DEPTH) + 1
) (
  input  logic          clk,
  input  logic          rst,

  // ---- the PCIe block's user interfaces (clk)
  input  logic [511:0]  s_axis_cq_tdata,
  input  logic [15:0]   s_axis_cq_tkeep,
  input  logic          s_axis_cq_tlast,
  input  logic [182:0]  s_axis_cq_tuser,
  input  logic          s_axis_cq_tvalid,
  output logic          s_axis_cq_tready,
  output logic [511:0]  m_axis_cc_tdata,
  output logic [15:0]   m_axis_cc_tkeep,
  output logic          m_axis_cc_tlast,
  output logic [80:0]   m_axis_cc_tuser,
  output logic          m_axis_cc_tvalid,
  input  logic          m_axis_cc_tready,
  output logic [511:0]  m_axis_rq_tdata,
  output logic [15:0]   m_axis_rq_tkeep,
  output logic          m_axis_rq_tlast,
  output logic [136:0]  m_axis_rq_tuser,
  output logic          m_axis_rq_tvalid,
  input  logic          m_axis_rq_tready,
  input  logic [511:0]  s_axis_rc_tdata,
  input  logic [15:0]   s_axis_rc_tkeep,
  input  logic          s_axis_rc_tlast,
  input  logic [160:0]  s_axis_rc_tuser,
  input  logic          s_axis_rc_tvalid,
  output logic          s_axis_rc_tready,
  input  logic [1:0]    cfg_max_payload,
  input  logic [2:0]    cfg_max_read_req,
  input  logic [15:0]   cfg_function_status,
  input  logic [3:0]    cfg_interrupt_msix_enable,
  input  logic [3:0]    cfg_interrupt_msix_mask,
  output logic [63:0]   cfg_interrupt_msix_address,
  output logic [31:0]   cfg_interrupt_msix_data,
  output logic          cfg_interrupt_msix_int,
  input  logic          cfg_interrupt_msix_sent,
  input  logic          cfg_interrupt_msix_fail,
  input  logic [3:0]    cfg_flr_in_process,
  output logic [3:0]    cfg_flr_done,

  // ---- the MAC's user interfaces (mac_clk)
  input  logic          mac_clk,
  input  logic          mac_rst,
  input  logic [511:0]  mac_rx_tdata,
  input  logic [63:0]   mac_rx_tkeep,
  input  logic          mac_rx_tvalid,
  input  logic          mac_rx_tlast,
  input  logic          mac_rx_tuser,      // with tlast: bad frame
  input  logic          mac_rx_aligned,    // the MAC's receive side is aligned (link up)
  output logic [511:0]  mac_tx_tdata,
  output logic [63:0]   mac_tx_tkeep,
  output logic          mac_tx_tvalid,
  input  logic          mac_tx_tready,
  output logic          mac_tx_tlast,
  output logic          mac_tx_tuser,

  // ---- status (clk), for LEDs
  output logic          link_up,
  output logic          core_fault         // the control core trapped or faulted
);
  localparam int DW = 512;
  localparam int KW = DW / 8;

  // ---------------------------------------------------------------------------------------
  // the PCIe side
  // ---------------------------------------------------------------------------------------
  logic          core_rst;
  hm_axil_req_t  bar_req, host_req, ctl_req;
  hm_axil_rsp_t  bar_rsp, host_rsp, ctl_rsp;
  logic [15:0]   eng_awaddr, eng_araddr, host_awaddr, host_araddr;
  logic [11:0]   shl_awaddr, shl_araddr;
  logic          shl_awvalid, shl_awready, shl_wvalid, shl_wready, shl_bvalid, shl_bready;
  logic          shl_arvalid, shl_arready, shl_rvalid, shl_rready;
  logic [31:0]   shl_wdata, shl_rdata;
  logic [3:0]    shl_wstrb;
  logic [1:0]    shl_bresp, shl_rresp;
  logic [15:0]   push_qpn;
  logic [511:0]  push_data;
  logic          push_valid, push_ready;
  logic [7:0]    irq_vec;
  logic          irq_valid, irq_ready;
  logic [3:0]    axi_arid, axi_rid, axi_awid, axi_bid;
  logic [63:0]   axi_araddr, axi_awaddr;
  logic [7:0]    axi_arlen, axi_awlen;
  logic [2:0]    axi_arsize, axi_awsize;
  logic [1:0]    axi_arburst, axi_awburst, axi_rresp, axi_bresp;
  logic          axi_arvalid, axi_arready, axi_rlast, axi_rvalid, axi_rready;
  logic          axi_awvalid, axi_awready, axi_wlast, axi_wvalid, axi_wready;
  logic          axi_bvalid, axi_bready;
  logic [DW-1:0] axi_rdata, axi_wdata;
  logic [KW-1:0] axi_wstrb;
  logic [31:0]   s_mmio_wr, s_mmio_rd, s_push, s_ur, s_dropped, s_axil_err, s_msix_sent,
                 s_msix_fail, s_rd_req, s_wr_req, s_cpl, s_cpl_err, s_cpl_unx, s_timeout,
                 s_bad_burst, s_flr;
  logic [5:0]    s_tags_retired;

  hm_pcie_ep #(.NUM_VEC(NUM_VEC), .PUSH_BAR(PUSH_BAR), .PUSH_QW(16), .TIMEOUT_TICK(TIMEOUT_TICK),
               .MSIX_TIMEOUT(MSIX_TIMEOUT), .FLR_RESET(FLR_RESET), .FLR_WAIT(FLR_WAIT)) u_ep (
    .clk, .rst, .core_rst,
    .s_axis_cq_tdata, .s_axis_cq_tkeep, .s_axis_cq_tlast, .s_axis_cq_tuser, .s_axis_cq_tvalid,
    .s_axis_cq_tready,
    .m_axis_cc_tdata, .m_axis_cc_tkeep, .m_axis_cc_tlast, .m_axis_cc_tuser, .m_axis_cc_tvalid,
    .m_axis_cc_tready,
    .m_axis_rq_tdata, .m_axis_rq_tkeep, .m_axis_rq_tlast, .m_axis_rq_tuser, .m_axis_rq_tvalid,
    .m_axis_rq_tready,
    .s_axis_rc_tdata, .s_axis_rc_tkeep, .s_axis_rc_tlast, .s_axis_rc_tuser, .s_axis_rc_tvalid,
    .s_axis_rc_tready,
    .cfg_max_payload, .cfg_max_read_req, .cfg_function_status, .cfg_interrupt_msix_enable,
    .cfg_interrupt_msix_mask, .cfg_interrupt_msix_address, .cfg_interrupt_msix_data,
    .cfg_interrupt_msix_int, .cfg_interrupt_msix_sent, .cfg_interrupt_msix_fail,
    .cfg_flr_in_process, .cfg_flr_done,
    .m_eng_axil_awaddr(eng_awaddr), .m_eng_axil_awvalid(bar_req.awvalid),
    .m_eng_axil_awready(bar_rsp.awready), .m_eng_axil_wdata(bar_req.wdata),
    .m_eng_axil_wstrb(bar_req.wstrb), .m_eng_axil_wvalid(bar_req.wvalid),
    .m_eng_axil_wready(bar_rsp.wready), .m_eng_axil_bresp(bar_rsp.bresp),
    .m_eng_axil_bvalid(bar_rsp.bvalid), .m_eng_axil_bready(bar_req.bready),
    .m_eng_axil_araddr(eng_araddr), .m_eng_axil_arvalid(bar_req.arvalid),
    .m_eng_axil_arready(bar_rsp.arready), .m_eng_axil_rdata(bar_rsp.rdata),
    .m_eng_axil_rresp(bar_rsp.rresp), .m_eng_axil_rvalid(bar_rsp.rvalid),
    .m_eng_axil_rready(bar_req.rready),
    .m_ctl_axil_awaddr(host_awaddr), .m_ctl_axil_awvalid(host_req.awvalid),
    .m_ctl_axil_awready(host_rsp.awready), .m_ctl_axil_wdata(host_req.wdata),
    .m_ctl_axil_wstrb(host_req.wstrb), .m_ctl_axil_wvalid(host_req.wvalid),
    .m_ctl_axil_wready(host_rsp.wready), .m_ctl_axil_bresp(host_rsp.bresp),
    .m_ctl_axil_bvalid(host_rsp.bvalid), .m_ctl_axil_bready(host_req.bready),
    .m_ctl_axil_araddr(host_araddr), .m_ctl_axil_arvalid(host_req.arvalid),
    .m_ctl_axil_arready(host_rsp.arready), .m_ctl_axil_rdata(host_rsp.rdata),
    .m_ctl_axil_rresp(host_rsp.rresp), .m_ctl_axil_rvalid(host_rsp.rvalid),
    .m_ctl_axil_rready(host_req.rready),
    .m_shl_axil_awaddr(shl_awaddr), .m_shl_axil_awvalid(shl_awvalid),
    .m_shl_axil_awready(shl_awready), .m_shl_axil_wdata(shl_wdata), .m_shl_axil_wstrb(shl_wstrb),
    .m_shl_axil_wvalid(shl_wvalid), .m_shl_axil_wready(shl_wready), .m_shl_axil_bresp(shl_bresp),
    .m_shl_axil_bvalid(shl_bvalid), .m_shl_axil_bready(shl_bready),
    .m_shl_axil_araddr(shl_araddr), .m_shl_axil_arvalid(shl_arvalid),
    .m_shl_axil_arready(shl_arready), .m_shl_axil_rdata(shl_rdata), .m_shl_axil_rresp(shl_rresp),
    .m_shl_axil_rvalid(shl_rvalid), .m_shl_axil_rready(shl_rready),
    .m_push_qpn(push_qpn), .m_push_data(push_data), .m_push_valid(push_valid),
    .m_push_ready(push_ready),
    .s_irq_vec(irq_vec), .s_irq_valid(irq_valid), .s_irq_ready(irq_ready),
    .s_axi_arid(axi_arid), .s_axi_araddr(axi_araddr), .s_axi_arlen(axi_arlen),
    .s_axi_arsize(axi_arsize), .s_axi_arburst(axi_arburst), .s_axi_arvalid(axi_arvalid),
    .s_axi_arready(axi_arready), .s_axi_rid(axi_rid), .s_axi_rdata(axi_rdata),
    .s_axi_rresp(axi_rresp), .s_axi_rlast(axi_rlast), .s_axi_rvalid(axi_rvalid),
    .s_axi_rready(axi_rready), .s_axi_awid(axi_awid), .s_axi_awaddr(axi_awaddr),
    .s_axi_awlen(axi_awlen), .s_axi_awsize(axi_awsize), .s_axi_awburst(axi_awburst),
    .s_axi_awvalid(axi_awvalid), .s_axi_awready(axi_awready), .s_axi_wdata(axi_wdata),
    .s_axi_wstrb(axi_wstrb), .s_axi_wlast(axi_wlast), .s_axi_wvalid(axi_wvalid),
    .s_axi_wready(axi_wready), .s_axi_bid(axi_bid), .s_axi_bresp(axi_bresp),
    .s_axi_bvalid(axi_bvalid), .s_axi_bready(axi_bready),
    .stat_mmio_wr(s_mmio_wr), .stat_mmio_rd(s_mmio_rd), .stat_push(s_push), .stat_ur(s_ur),
    .stat_dropped(s_dropped), .stat_axil_err(s_axil_err), .stat_msix_sent(s_msix_sent),
    .stat_msix_fail(s_msix_fail), .stat_dma_rd_req(s_rd_req), .stat_dma_wr_req(s_wr_req),
    .stat_dma_cpl(s_cpl), .stat_dma_cpl_err(s_cpl_err), .stat_dma_cpl_unexpected(s_cpl_unx),
    .stat_dma_timeout(s_timeout), .stat_dma_bad_burst(s_bad_burst),
    .stat_dma_tags_retired(s_tags_retired), .stat_flr(s_flr)
  );
  // (the register blocks decode the low address bits they need)
  assign bar_req.awaddr  = 32'(eng_awaddr);
  assign bar_req.araddr  = 32'(eng_araddr);
  assign host_req.awaddr = 32'(host_awaddr);
  assign host_req.araddr = 32'(host_araddr);

  // ---------------------------------------------------------------------------------------
  // the engine and the control core
  // ---------------------------------------------------------------------------------------
  logic [DW-1:0] rx_tdata, tx_tdata;
  logic [KW-1:0] rx_tkeep, tx_tkeep;
  logic          rx_tvalid, rx_tready, rx_tlast, tx_tvalid, tx_tready, tx_tlast, tx_tuser;
  logic [31:0]   caps;
  logic [7:0]    mr_log;

  hm_rc_engine #(.DATA_WIDTH(DW), .NUM_QPS(NUM_QPS), .NUM_MRS(NUM_MRS), .NUM_CQS(NUM_CQS)) u_eng (
    .clk, .rst(core_rst),
    .s_bar_req(bar_req), .s_bar_rsp(bar_rsp), .s_ctl_req(ctl_req), .s_ctl_rsp(ctl_rsp),
    .s_push_qpn(push_qpn), .s_push_data(push_data), .s_push_valid(push_valid),
    .s_push_ready(push_ready),
    .m_axi_arid(axi_arid), .m_axi_araddr(axi_araddr), .m_axi_arlen(axi_arlen),
    .m_axi_arsize(axi_arsize), .m_axi_arburst(axi_arburst), .m_axi_arvalid(axi_arvalid),
    .m_axi_arready(axi_arready), .m_axi_rid(axi_rid), .m_axi_rdata(axi_rdata),
    .m_axi_rresp(axi_rresp), .m_axi_rlast(axi_rlast), .m_axi_rvalid(axi_rvalid),
    .m_axi_rready(axi_rready), .m_axi_awid(axi_awid), .m_axi_awaddr(axi_awaddr),
    .m_axi_awlen(axi_awlen), .m_axi_awsize(axi_awsize), .m_axi_awburst(axi_awburst),
    .m_axi_awvalid(axi_awvalid), .m_axi_awready(axi_awready), .m_axi_wdata(axi_wdata),
    .m_axi_wstrb(axi_wstrb), .m_axi_wlast(axi_wlast), .m_axi_wvalid(axi_wvalid),
    .m_axi_wready(axi_wready), .m_axi_bid(axi_bid), .m_axi_bresp(axi_bresp),
    .m_axi_bvalid(axi_bvalid), .m_axi_bready(axi_bready),
    .s_rx_tdata(rx_tdata), .s_rx_tkeep(rx_tkeep), .s_rx_tvalid(rx_tvalid),
    .s_rx_tready(rx_tready), .s_rx_tlast(rx_tlast), .s_rx_tuser(1'b0),
    .m_tx_tdata(tx_tdata), .m_tx_tkeep(tx_tkeep), .m_tx_tvalid(tx_tvalid),
    .m_tx_tready(tx_tready), .m_tx_tlast(tx_tlast), .m_tx_tuser(tx_tuser),
    .rl_pause('0), .m_irq_vec(irq_vec), .m_irq_valid(irq_valid), .m_irq_ready(irq_ready),
    .caps, .mr_log
  );

  logic core_trap, core_err, irq_done_u, poll_idle_u, fetch_u;
  logic [31:0] pc_u;
  hm_ctrl_core u_core (
    .clk, .rst(core_rst), .caps, .mr_log, .link_up,
    .s_axil_req(host_req), .s_axil_rsp(host_rsp), .m_ctl_req(ctl_req), .m_ctl_rsp(ctl_rsp),
    .irq_done(irq_done_u), .fault(core_err), .trap(core_trap), .poll_idle(poll_idle_u),
    .trace_fetch(fetch_u), .trace_pc(pc_u)
  );
  always_ff @(posedge clk) core_fault <= core_err || core_trap;

  // ---------------------------------------------------------------------------------------
  // the Ethernet port
  // ---------------------------------------------------------------------------------------
  hm_shell_regs__in_t  hw_in;
  hm_shell_regs__out_t hw_out;
  logic [LW-1:0] xoff_q, xon_q;
  logic [31:0]   e_rx_frames, e_rx_bad, e_rx_over, e_rx_full, e_tx_frames, e_tx_over, e_tx_bad;
  logic          paused_m, paused_c, aligned_c;
  logic [31:0]   xoff_sent_u, xon_sent_u;

  // a level above the FIFO's depth acts as the depth (registered: the port registers the
  // settings again before they cross)
  function automatic logic [LW-1:0] level(input logic [15:0] beats);
    return 32'(beats) > RX_DEPTH ? LW'(RX_DEPTH) : LW'(beats);
  endfunction
  always_ff @(posedge clk) begin
    xoff_q <= level(hw_out.PFC_XOFF.beats.value);
    xon_q  <= level(hw_out.PFC_XON.beats.value);
  end

  hm_eth_port #(.DATA_WIDTH(DW), .RX_DEPTH(RX_DEPTH), .TX_DEPTH(TX_DEPTH), .STAGES(STAGES)) u_eth (
    .mac_clk, .mac_rst, .core_clk(clk), .core_rst,
    .mac_rx_tdata, .mac_rx_tkeep, .mac_rx_tvalid, .mac_rx_tlast, .mac_rx_tuser,
    .mac_tx_tdata, .mac_tx_tkeep, .mac_tx_tvalid, .mac_tx_tready, .mac_tx_tlast, .mac_tx_tuser,
    .core_rx_tdata(rx_tdata), .core_rx_tkeep(rx_tkeep), .core_rx_tvalid(rx_tvalid),
    .core_rx_tready(rx_tready), .core_rx_tlast(rx_tlast),
    .core_tx_tdata(tx_tdata), .core_tx_tkeep(tx_tkeep), .core_tx_tvalid(tx_tvalid),
    .core_tx_tready(tx_tready), .core_tx_tlast(tx_tlast), .core_tx_tuser(tx_tuser),
    .cfg_pfc_enable(hw_out.PFC_CTRL.enable.value),
    .cfg_pfc_prio_mask(hw_out.PFC_CTRL.prio_mask.value),
    .cfg_pfc_xoff_level(xoff_q), .cfg_pfc_xon_level(xon_q),
    .cfg_pfc_quanta(hw_out.PFC_QUANTA.quanta.value),
    .cfg_pfc_refresh(hw_out.PFC_REFRESH.clocks.value),
    .cfg_src_mac({hw_out.MAC_HI.v.value, hw_out.MAC_LO.v.value}),
    .rx_frames(e_rx_frames), .rx_drop_bad(e_rx_bad), .rx_drop_oversize(e_rx_over),
    .rx_drop_full(e_rx_full), .tx_frames(e_tx_frames), .tx_drop_oversize(e_tx_over),
    .tx_drop_bad(e_tx_bad), .pfc_paused(paused_m), .pfc_xoff_sent(xoff_sent_u),
    .pfc_xon_sent(xon_sent_u)
  );

  // the MAC clock's status bits into the core clock (levels: each bit on its own)
  logic paused_mq, aligned_mq;
  always_ff @(posedge mac_clk) begin
    paused_mq  <= paused_m;
    aligned_mq <= mac_rx_aligned;
  end
  hm_sync #(.WIDTH(2), .STAGES(STAGES)) u_status_sync (
    .clk, .rst(1'b0), .d_i({paused_mq, aligned_mq}), .q_o({paused_c, aligned_c}));
  assign link_up = aligned_c;

  // ---------------------------------------------------------------------------------------
  // the shell's registers (PeakRDL-regblock, regs/hematite.rdl hm_shell_regs)
  // ---------------------------------------------------------------------------------------
  always_comb begin
    hw_in.STATUS.link_up.next            = aligned_c;
    hw_in.STATUS.pfc_paused.next         = paused_c;
    hw_in.ETH_RX_FRAMES.v.next           = e_rx_frames;
    hw_in.ETH_RX_DROP_BAD.v.next         = e_rx_bad;
    hw_in.ETH_RX_DROP_OVERSIZE.v.next    = e_rx_over;
    hw_in.ETH_RX_DROP_FULL.v.next        = e_rx_full;
    hw_in.ETH_TX_FRAMES.v.next           = e_tx_frames;
    hw_in.ETH_TX_DROP_OVERSIZE.v.next    = e_tx_over;
    hw_in.ETH_TX_DROP_BAD.v.next         = e_tx_bad;
    hw_in.PCIE_MMIO_WR.v.next            = s_mmio_wr;
    hw_in.PCIE_MMIO_RD.v.next            = s_mmio_rd;
    hw_in.PCIE_PUSH.v.next               = s_push;
    hw_in.PCIE_UR.v.next                 = s_ur;
    hw_in.PCIE_DROPPED.v.next            = s_dropped;
    hw_in.PCIE_AXIL_ERR.v.next           = s_axil_err;
    hw_in.MSIX_SENT.v.next               = s_msix_sent;
    hw_in.MSIX_FAIL.v.next               = s_msix_fail;
    hw_in.DMA_RD_REQ.v.next              = s_rd_req;
    hw_in.DMA_WR_REQ.v.next              = s_wr_req;
    hw_in.DMA_CPL.v.next                 = s_cpl;
    hw_in.DMA_CPL_ERR.v.next             = s_cpl_err;
    hw_in.DMA_CPL_UNEXPECTED.v.next      = s_cpl_unx;
    hw_in.DMA_TIMEOUT.v.next             = s_timeout;
    hw_in.DMA_BAD_BURST.v.next           = s_bad_burst;
    hw_in.DMA_TAGS_RETIRED.v.next        = 8'(s_tags_retired);
    hw_in.FLR_COUNT.v.next               = s_flr;
  end

  hm_shell_regs u_regs (
    .clk, .rst(core_rst),
    .s_axil_awready(shl_awready), .s_axil_awvalid(shl_awvalid), .s_axil_awaddr(shl_awaddr),
    .s_axil_awprot(3'b000), .s_axil_wready(shl_wready), .s_axil_wvalid(shl_wvalid),
    .s_axil_wdata(shl_wdata), .s_axil_wstrb(shl_wstrb), .s_axil_bready(shl_bready),
    .s_axil_bvalid(shl_bvalid), .s_axil_bresp(shl_bresp), .s_axil_arready(shl_arready),
    .s_axil_arvalid(shl_arvalid), .s_axil_araddr(shl_araddr), .s_axil_arprot(3'b000),
    .s_axil_rready(shl_rready), .s_axil_rvalid(shl_rvalid), .s_axil_rdata(shl_rdata),
    .s_axil_rresp(shl_rresp),
    .hwif_in(hw_in), .hwif_out(hw_out)
  );

  // the register block's size matches the FIFO it describes
  if (HM_SHELL_RX_FIFO_BEATS_RESET != 32'(RX_DEPTH)) begin : g_depth_check
    $error("hm_card: RX_DEPTH differs from HM_SHELL_RX_FIFO_BEATS (regs/hematite.rdl)");
  end

  logic unused_ok;
  assign unused_ok = ^{irq_done_u, poll_idle_u, fetch_u, pc_u, xoff_sent_u, xon_sent_u,
                       1'b0};
endmodule
