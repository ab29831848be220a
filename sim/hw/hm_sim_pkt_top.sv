// Simulation top for the packet-path tests: the RX and TX paths side by side, independent.
// Not part of the synthesisable core (rtl/); it only gives the Verilated model one top.
module hm_sim_pkt_top
  import hm_pkg::*;
#(
  parameter int DATA_WIDTH = 512,
  localparam int KEEP_WIDTH = DATA_WIDTH / 8
) (
  input  logic                  clk,
  input  logic                  rst,
  // RX
  input  logic [DATA_WIDTH-1:0] rx_s_tdata,
  input  logic [KEEP_WIDTH-1:0] rx_s_tkeep,
  input  logic                  rx_s_tvalid,
  output logic                  rx_s_tready,
  input  logic                  rx_s_tlast,
  input  logic                  rx_s_tuser,
  output hm_roce_hdr_t          rx_hdr_data,
  output logic                  rx_hdr_valid,
  input  logic                  rx_hdr_ready,
  output logic [DATA_WIDTH-1:0] rx_m_tdata,
  output logic [KEEP_WIDTH-1:0] rx_m_tkeep,
  output logic                  rx_m_tvalid,
  input  logic                  rx_m_tready,
  output logic                  rx_m_tlast,
  output hm_rx_status_t         rx_mon_data,
  output logic                  rx_mon_valid,
  output logic [HM_RSN_COUNT-1:0][31:0] rx_stat_cnt,
  // TX
  input  hm_roce_hdr_t          tx_hdr_data,
  input  logic                  tx_hdr_valid,
  output logic                  tx_hdr_ready,
  input  logic [DATA_WIDTH-1:0] tx_s_tdata,
  input  logic [KEEP_WIDTH-1:0] tx_s_tkeep,
  input  logic                  tx_s_tvalid,
  output logic                  tx_s_tready,
  input  logic                  tx_s_tlast,
  output logic [DATA_WIDTH-1:0] tx_m_tdata,
  output logic [KEEP_WIDTH-1:0] tx_m_tkeep,
  output logic                  tx_m_tvalid,
  input  logic                  tx_m_tready,
  output logic                  tx_m_tlast,
  output logic                  tx_m_tuser,
  output logic [31:0]           tx_stat_frames,
  output logic [31:0]           tx_stat_len_err,
  output logic [31:0]           tx_stat_bad_req
);
  hm_rx_path #(.DATA_WIDTH(DATA_WIDTH)) u_rx (
    .clk, .rst,
    .s_axis_tdata(rx_s_tdata), .s_axis_tkeep(rx_s_tkeep), .s_axis_tvalid(rx_s_tvalid),
    .s_axis_tready(rx_s_tready), .s_axis_tlast(rx_s_tlast), .s_axis_tuser(rx_s_tuser),
    .m_hdr_data(rx_hdr_data), .m_hdr_valid(rx_hdr_valid), .m_hdr_ready(rx_hdr_ready),
    .m_axis_tdata(rx_m_tdata), .m_axis_tkeep(rx_m_tkeep), .m_axis_tvalid(rx_m_tvalid),
    .m_axis_tready(rx_m_tready), .m_axis_tlast(rx_m_tlast),
    .mon_data(rx_mon_data), .mon_valid(rx_mon_valid), .stat_cnt(rx_stat_cnt)
  );
  hm_tx_path #(.DATA_WIDTH(DATA_WIDTH)) u_tx (
    .clk, .rst,
    .s_hdr_data(tx_hdr_data), .s_hdr_valid(tx_hdr_valid), .s_hdr_ready(tx_hdr_ready),
    .s_axis_tdata(tx_s_tdata), .s_axis_tkeep(tx_s_tkeep), .s_axis_tvalid(tx_s_tvalid),
    .s_axis_tready(tx_s_tready), .s_axis_tlast(tx_s_tlast), .s_axis_tuser(1'b0),
    .m_axis_tdata(tx_m_tdata), .m_axis_tkeep(tx_m_tkeep), .m_axis_tvalid(tx_m_tvalid),
    .m_axis_tready(tx_m_tready), .m_axis_tlast(tx_m_tlast), .m_axis_tuser(tx_m_tuser),
    .stat_frames(tx_stat_frames), .stat_len_err(tx_stat_len_err), .stat_bad_req(tx_stat_bad_req)
  );
endmodule
