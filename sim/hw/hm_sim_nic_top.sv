// Co-simulation top: the transport engine and the control core as one NIC. The engine's
// control bus is driven by the control core when ctl_sel is 1 (the firmware owns the
// tables, as in hardware) and by the testbench's s_ctl_* port when it is 0 (the engine tests
// that write contexts directly). The core's host port (mailbox, core control, IMEM window)
// is s_fw_*. Every other port is the engine's.
module hm_sim_nic_top #(
  parameter int DATA_WIDTH = 512,
  parameter int NUM_QPS = 4096,
  parameter int NUM_MRS = 4096,
  parameter int NUM_CQS = 4096,
  localparam int KEEP_WIDTH = DATA_WIDTH / 8
) (
  input  logic                  clk,
  // The control core's clock: clk while core_clk_en is 1, stopped otherwise (the harness
  // raises it with clk when core_clk_en, read after the inputs of the cycle, is set)
  input  logic                  clk_core,
  output logic                  core_clk_en,
  input  logic                  rst,
  input  logic [15:0]           s_bar_awaddr,
  input  logic                  s_bar_awvalid,
  output logic                  s_bar_awready,
  input  logic [31:0]           s_bar_wdata,
  input  logic [3:0]            s_bar_wstrb,
  input  logic                  s_bar_wvalid,
  output logic                  s_bar_wready,
  output logic [1:0]            s_bar_bresp,
  output logic                  s_bar_bvalid,
  input  logic                  s_bar_bready,
  input  logic [15:0]           s_bar_araddr,
  input  logic                  s_bar_arvalid,
  output logic                  s_bar_arready,
  output logic [31:0]           s_bar_rdata,
  output logic [1:0]            s_bar_rresp,
  output logic                  s_bar_rvalid,
  input  logic                  s_bar_rready,
  input  logic                  ctl_sel,
  input  logic [11:0]           s_ctl_awaddr,
  input  logic                  s_ctl_awvalid,
  output logic                  s_ctl_awready,
  input  logic [31:0]           s_ctl_wdata,
  input  logic [3:0]            s_ctl_wstrb,
  input  logic                  s_ctl_wvalid,
  output logic                  s_ctl_wready,
  output logic [1:0]            s_ctl_bresp,
  output logic                  s_ctl_bvalid,
  input  logic                  s_ctl_bready,
  input  logic [11:0]           s_ctl_araddr,
  input  logic                  s_ctl_arvalid,
  output logic                  s_ctl_arready,
  output logic [31:0]           s_ctl_rdata,
  output logic [1:0]            s_ctl_rresp,
  output logic                  s_ctl_rvalid,
  input  logic                  s_ctl_rready,
  input  logic [15:0]           s_fw_awaddr,
  input  logic                  s_fw_awvalid,
  output logic                  s_fw_awready,
  input  logic [31:0]           s_fw_wdata,
  input  logic [3:0]            s_fw_wstrb,
  input  logic                  s_fw_wvalid,
  output logic                  s_fw_wready,
  output logic [1:0]            s_fw_bresp,
  output logic                  s_fw_bvalid,
  input  logic                  s_fw_bready,
  input  logic [15:0]           s_fw_araddr,
  input  logic                  s_fw_arvalid,
  output logic                  s_fw_arready,
  output logic [31:0]           s_fw_rdata,
  output logic [1:0]            s_fw_rresp,
  output logic                  s_fw_rvalid,
  input  logic                  s_fw_rready,
  input  logic                  fw_link,
  output logic                  fw_irq_done,
  output logic                  fw_fault,
  output logic                  fw_trap,
  output logic [3:0]            m_axi_arid,
  output logic [63:0]           m_axi_araddr,
  output logic [7:0]            m_axi_arlen,
  output logic [2:0]            m_axi_arsize,
  output logic [1:0]            m_axi_arburst,
  output logic                  m_axi_arvalid,
  input  logic                  m_axi_arready,
  input  logic [3:0]            m_axi_rid,
  input  logic [DATA_WIDTH-1:0] m_axi_rdata,
  input  logic [1:0]            m_axi_rresp,
  input  logic                  m_axi_rlast,
  input  logic                  m_axi_rvalid,
  output logic                  m_axi_rready,
  output logic [3:0]            m_axi_awid,
  output logic [63:0]           m_axi_awaddr,
  output logic [7:0]            m_axi_awlen,
  output logic [2:0]            m_axi_awsize,
  output logic [1:0]            m_axi_awburst,
  output logic                  m_axi_awvalid,
  input  logic                  m_axi_awready,
  output logic [DATA_WIDTH-1:0] m_axi_wdata,
  output logic [KEEP_WIDTH-1:0] m_axi_wstrb,
  output logic                  m_axi_wlast,
  output logic                  m_axi_wvalid,
  input  logic                  m_axi_wready,
  input  logic [3:0]            m_axi_bid,
  input  logic [1:0]            m_axi_bresp,
  input  logic                  m_axi_bvalid,
  output logic                  m_axi_bready,
  input  logic [DATA_WIDTH-1:0] s_rx_tdata,
  input  logic [KEEP_WIDTH-1:0] s_rx_tkeep,
  input  logic                  s_rx_tvalid,
  output logic                  s_rx_tready,
  input  logic                  s_rx_tlast,
  input  logic                  s_rx_tuser,
  output logic [DATA_WIDTH-1:0] m_tx_tdata,
  output logic [KEEP_WIDTH-1:0] m_tx_tkeep,
  output logic                  m_tx_tvalid,
  input  logic                  m_tx_tready,
  output logic                  m_tx_tlast,
  output logic                  m_tx_tuser,
  input  logic [NUM_QPS-1:0]    rl_pause,
  output logic [7:0]            m_irq_vec,
  output logic                  m_irq_valid,
  input  logic                  m_irq_ready
);
  // engine control bus, and the core's
  logic [11:0] e_awaddr, e_araddr, c_awaddr, c_araddr;
  logic [31:0] e_wdata, e_rdata, c_wdata;
  logic [3:0]  e_wstrb, c_wstrb;
  logic [1:0]  e_bresp, e_rresp;
  logic e_awvalid, e_awready, e_wvalid, e_wready, e_bvalid, e_bready, e_arvalid, e_arready, e_rvalid, e_rready;
  logic c_awvalid, c_wvalid, c_bready, c_arvalid, c_rready;
  logic [31:0] caps;
  logic [7:0]  mr_log;

  assign e_awaddr  = ctl_sel ? c_awaddr  : s_ctl_awaddr;
  assign e_awvalid = ctl_sel ? c_awvalid : s_ctl_awvalid;
  assign e_wdata   = ctl_sel ? c_wdata   : s_ctl_wdata;
  assign e_wstrb   = ctl_sel ? c_wstrb   : s_ctl_wstrb;
  assign e_wvalid  = ctl_sel ? c_wvalid  : s_ctl_wvalid;
  assign e_bready  = ctl_sel ? c_bready  : s_ctl_bready;
  assign e_araddr  = ctl_sel ? c_araddr  : s_ctl_araddr;
  assign e_arvalid = ctl_sel ? c_arvalid : s_ctl_arvalid;
  assign e_rready  = ctl_sel ? c_rready  : s_ctl_rready;
  assign s_ctl_awready = !ctl_sel && e_awready;
  assign s_ctl_wready  = !ctl_sel && e_wready;
  assign s_ctl_bvalid  = !ctl_sel && e_bvalid;
  assign s_ctl_bresp   = e_bresp;
  assign s_ctl_arready = !ctl_sel && e_arready;
  assign s_ctl_rvalid  = !ctl_sel && e_rvalid;
  assign s_ctl_rdata   = e_rdata;
  assign s_ctl_rresp   = e_rresp;

  hm_rc_engine #(.DATA_WIDTH(DATA_WIDTH), .NUM_QPS(NUM_QPS), .NUM_MRS(NUM_MRS), .NUM_CQS(NUM_CQS)) u_eng (
    .clk, .rst,
    .s_bar_awaddr, .s_bar_awvalid, .s_bar_awready, .s_bar_wdata, .s_bar_wstrb, .s_bar_wvalid,
    .s_bar_wready, .s_bar_bresp, .s_bar_bvalid, .s_bar_bready, .s_bar_araddr, .s_bar_arvalid,
    .s_bar_arready, .s_bar_rdata, .s_bar_rresp, .s_bar_rvalid, .s_bar_rready,
    .s_ctl_awaddr(e_awaddr), .s_ctl_awvalid(e_awvalid), .s_ctl_awready(e_awready),
    .s_ctl_wdata(e_wdata), .s_ctl_wstrb(e_wstrb), .s_ctl_wvalid(e_wvalid), .s_ctl_wready(e_wready),
    .s_ctl_bresp(e_bresp), .s_ctl_bvalid(e_bvalid), .s_ctl_bready(e_bready),
    .s_ctl_araddr(e_araddr), .s_ctl_arvalid(e_arvalid), .s_ctl_arready(e_arready),
    .s_ctl_rdata(e_rdata), .s_ctl_rresp(e_rresp), .s_ctl_rvalid(e_rvalid), .s_ctl_rready(e_rready),
    .m_axi_arid, .m_axi_araddr, .m_axi_arlen, .m_axi_arsize, .m_axi_arburst, .m_axi_arvalid,
    .m_axi_arready, .m_axi_rid, .m_axi_rdata, .m_axi_rresp, .m_axi_rlast, .m_axi_rvalid,
    .m_axi_rready, .m_axi_awid, .m_axi_awaddr, .m_axi_awlen, .m_axi_awsize, .m_axi_awburst,
    .m_axi_awvalid, .m_axi_awready, .m_axi_wdata, .m_axi_wstrb, .m_axi_wlast, .m_axi_wvalid,
    .m_axi_wready, .m_axi_bid, .m_axi_bresp, .m_axi_bvalid, .m_axi_bready,
    .s_rx_tdata, .s_rx_tkeep, .s_rx_tvalid, .s_rx_tready, .s_rx_tlast, .s_rx_tuser,
    .m_tx_tdata, .m_tx_tkeep, .m_tx_tvalid, .m_tx_tready, .m_tx_tlast, .m_tx_tuser,
    .rl_pause, .m_irq_vec, .m_irq_valid, .m_irq_ready, .caps, .mr_log
  );

  // Clock gate of the control core (a simulation speed-up, issue 23; on an FPGA the same
  // enable could drive a BUFGCE): while the firmware polls an empty mailbox with the link as
  // it last saw it (poll_idle), its clock stops until the host port is accessed. Its
  // observable behaviour is unchanged; its timer does not count while it sleeps (the
  // firmware does not read it).
  logic core_idle;
  assign core_clk_en = rst || !core_idle || s_fw_awvalid || s_fw_wvalid || s_fw_arvalid ||
                       s_fw_bvalid || s_fw_rvalid;

  hm_ctrl_core u_core (
    .clk(clk_core), .rst, .caps, .mr_log, .link_up(fw_link), .poll_idle(core_idle),
    .s_axil_awaddr(s_fw_awaddr), .s_axil_awvalid(s_fw_awvalid), .s_axil_awready(s_fw_awready),
    .s_axil_wdata(s_fw_wdata), .s_axil_wstrb(s_fw_wstrb), .s_axil_wvalid(s_fw_wvalid),
    .s_axil_wready(s_fw_wready), .s_axil_bresp(s_fw_bresp), .s_axil_bvalid(s_fw_bvalid),
    .s_axil_bready(s_fw_bready), .s_axil_araddr(s_fw_araddr), .s_axil_arvalid(s_fw_arvalid),
    .s_axil_arready(s_fw_arready), .s_axil_rdata(s_fw_rdata), .s_axil_rresp(s_fw_rresp),
    .s_axil_rvalid(s_fw_rvalid), .s_axil_rready(s_fw_rready),
    .m_ctl_awaddr(c_awaddr), .m_ctl_awvalid(c_awvalid), .m_ctl_awready(ctl_sel && e_awready),
    .m_ctl_wdata(c_wdata), .m_ctl_wstrb(c_wstrb), .m_ctl_wvalid(c_wvalid),
    .m_ctl_wready(ctl_sel && e_wready), .m_ctl_bresp(e_bresp), .m_ctl_bvalid(ctl_sel && e_bvalid),
    .m_ctl_bready(c_bready), .m_ctl_araddr(c_araddr), .m_ctl_arvalid(c_arvalid),
    .m_ctl_arready(ctl_sel && e_arready), .m_ctl_rdata(e_rdata), .m_ctl_rresp(e_rresp),
    .m_ctl_rvalid(ctl_sel && e_rvalid), .m_ctl_rready(c_rready),
    .irq_done(fw_irq_done), .fault(fw_fault), .trap(fw_trap)
  );
endmodule
