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
  input  hm_pkg::hm_axil_req_t  s_bar_req,
  output hm_pkg::hm_axil_rsp_t  s_bar_rsp,
  input  logic                  ctl_sel,
  input  hm_pkg::hm_axil_req_t  s_ctl_req,
  output hm_pkg::hm_axil_rsp_t  s_ctl_rsp,
  input  hm_pkg::hm_axil_req_t  s_fw_req,
  output hm_pkg::hm_axil_rsp_t  s_fw_rsp,
  input  logic                  fw_link,
  output logic                  fw_irq_done,
  output logic                  fw_fault,
  output logic                  fw_trap,
  output logic                  fw_fetch,     // control core instruction fetch (profiling)
  output logic [31:0]           fw_pc,
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
  input  logic [15:0]           s_push_qpn,
  input  logic [hm_pkg::HM_PUSH_BYTES*8-1:0] s_push_data,
  input  logic                  s_push_valid,
  output logic                  s_push_ready,
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
  input  logic                  m_irq_ready,
  // Taps for the waveform trigger of the device (hematite-sim device --trace-on), by
  // hierarchical reference (the simulator's top only; nothing under rtl/ knows of them): the
  // CQE the engine issues this cycle (its status) and the frame the RX path delivers or drops
  // this cycle (its reason, HM_RSN_*)
  output logic                  dbg_cqe_valid,
  output logic [7:0]            dbg_cqe_status,
  output logic                  dbg_rx_valid,
  output logic [3:0]            dbg_rx_reason
);
  assign dbg_cqe_valid  = u_eng.u_cq.m_wr_valid && u_eng.u_cq.m_wr_ready;
  assign dbg_cqe_status = u_eng.u_cq.cqe_w.status;
  assign dbg_rx_valid   = u_eng.rx_mon_valid;
  assign dbg_rx_reason  = u_eng.rx_mon.reason;

  // engine control bus (from the core or the testbench), and the core's
  hm_pkg::hm_axil_req_t e_req, c_req;
  hm_pkg::hm_axil_rsp_t e_rsp;
  logic [31:0] caps;
  logic [7:0]  mr_log;
  assign e_req     = ctl_sel ? c_req : s_ctl_req;
  assign s_ctl_rsp = ctl_sel ? '0 : e_rsp;   // readies and valids low while the core owns the bus

  hm_rc_engine #(.DATA_WIDTH(DATA_WIDTH), .NUM_QPS(NUM_QPS), .NUM_MRS(NUM_MRS), .NUM_CQS(NUM_CQS)) u_eng (
    .clk, .rst,
    .s_bar_req, .s_bar_rsp, .s_ctl_req(e_req), .s_ctl_rsp(e_rsp),
    .s_push_qpn, .s_push_data, .s_push_valid, .s_push_ready,
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
  assign core_clk_en = rst || !core_idle || s_fw_req.awvalid || s_fw_req.wvalid || s_fw_req.arvalid ||
                       s_fw_rsp.bvalid || s_fw_rsp.rvalid;

  hm_ctrl_core u_core (
    .clk(clk_core), .rst, .caps, .mr_log, .link_up(fw_link), .poll_idle(core_idle),
    .s_axil_req(s_fw_req), .s_axil_rsp(s_fw_rsp), .m_ctl_req(c_req), .m_ctl_rsp(ctl_sel ? e_rsp : '0),
    .irq_done(fw_irq_done), .fault(fw_fault), .trap(fw_trap),
    .trace_fetch(fw_fetch), .trace_pc(fw_pc)
  );
endmodule
