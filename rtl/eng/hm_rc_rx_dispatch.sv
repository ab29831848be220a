// Receive dispatch: splits the accepted RoCEv2 packets of the RX path by role. RC requests
// (SEND, WRITE, READ request, atomics) go to the responder, RC responses (ACK/NAK, READ
// response, atomic ACK) to the completer, each with its payload. Everything else (UC, UD,
// CNP) is not handled by the RC engine: it is counted (stat_other) and its payload dropped.
// One packet at a time: its header first, then its payload beats (if payload_len != 0).
module hm_rc_rx_dispatch
  import hm_pkg::*;
#(
  // Datapath width in bits.
  parameter int DATA_WIDTH = 512,
  // Bytes per beat (derived).
  localparam int KEEP_WIDTH = DATA_WIDTH / 8
) (
  input  logic                  clk,
  input  logic                  rst,

  input  hm_roce_hdr_t          s_hdr,
  input  logic                  s_hdr_valid,
  output logic                  s_hdr_ready,
  input  logic [DATA_WIDTH-1:0] s_axis_tdata,
  input  logic [KEEP_WIDTH-1:0] s_axis_tkeep,
  input  logic                  s_axis_tvalid,
  output logic                  s_axis_tready,
  input  logic                  s_axis_tlast,

  // Requests (to the responder)
  output hm_roce_hdr_t          m_req_hdr,
  output logic                  m_req_hdr_valid,
  input  logic                  m_req_hdr_ready,
  output logic [DATA_WIDTH-1:0] m_req_tdata,
  output logic [KEEP_WIDTH-1:0] m_req_tkeep,
  output logic                  m_req_tvalid,
  input  logic                  m_req_tready,
  output logic                  m_req_tlast,

  // Responses (to the completer)
  output hm_roce_hdr_t          m_rsp_hdr,
  output logic                  m_rsp_hdr_valid,
  input  logic                  m_rsp_hdr_ready,
  output logic [DATA_WIDTH-1:0] m_rsp_tdata,
  output logic [KEEP_WIDTH-1:0] m_rsp_tkeep,
  output logic                  m_rsp_tvalid,
  input  logic                  m_rsp_tready,
  output logic                  m_rsp_tlast,

  output logic [31:0]           stat_other
);
  typedef enum logic [1:0] { D_REQ, D_RSP, D_DROP } dst_t;

  function automatic dst_t classify(input logic [7:0] op);
    if (op <= 8'h0C || op == 8'h13 || op == 8'h14 || op == 8'h16 || op == 8'h17) return D_REQ;
    if (op >= 8'h0D && op <= 8'h12) return D_RSP;
    return D_DROP;
  endfunction

  // payload routing of the packet whose header was passed on
  logic pay_q;
  dst_t dst_q, dst_h;
  assign dst_h = classify(s_hdr.opcode);

  assign m_req_hdr       = s_hdr;
  assign m_rsp_hdr       = s_hdr;
  assign m_req_hdr_valid = !pay_q && s_hdr_valid && dst_h == D_REQ;
  assign m_rsp_hdr_valid = !pay_q && s_hdr_valid && dst_h == D_RSP;
  assign s_hdr_ready     = !pay_q && (dst_h == D_REQ ? m_req_hdr_ready :
                                      dst_h == D_RSP ? m_rsp_hdr_ready : 1'b1);

  assign m_req_tdata  = s_axis_tdata;
  assign m_req_tkeep  = s_axis_tkeep;
  assign m_req_tlast  = s_axis_tlast;
  assign m_rsp_tdata  = s_axis_tdata;
  assign m_rsp_tkeep  = s_axis_tkeep;
  assign m_rsp_tlast  = s_axis_tlast;
  assign m_req_tvalid = pay_q && dst_q == D_REQ && s_axis_tvalid;
  assign m_rsp_tvalid = pay_q && dst_q == D_RSP && s_axis_tvalid;
  assign s_axis_tready = pay_q && (dst_q == D_REQ ? m_req_tready :
                                   dst_q == D_RSP ? m_rsp_tready : 1'b1);

  always_ff @(posedge clk) begin
    if (rst) begin
      pay_q      <= 1'b0;
      stat_other <= '0;
    end else begin
      if (s_hdr_valid && s_hdr_ready) begin
        dst_q <= dst_h;
        pay_q <= s_hdr.payload_len != 16'd0;
        if (dst_h == D_DROP) stat_other <= stat_other + 1'b1;
      end
      if (s_axis_tvalid && s_axis_tready && s_axis_tlast) pay_q <= 1'b0;
    end
  end
endmodule
