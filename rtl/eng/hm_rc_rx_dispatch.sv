// Receive dispatch: splits the accepted RoCEv2 packets of the RX path by role. RC requests
// (SEND, WRITE, READ request, atomics) and UC packets (SEND and WRITE, 0x20-0x2B: all
// requests) go to the responder, RC responses (ACK/NAK, READ response, atomic ACK) to the
// completer, each with its payload. A CNP (0x81) is reported on m_cnp_* (registered pulse, its
// DestQP: the local QP whose traffic was marked) and counted (stat_cnp). Everything else
// (UD) is not handled by the engine: it is counted (stat_other) and its payload dropped.
// Headers pass as soon as their consumer takes them, ahead of the payloads of earlier
// packets: the destination of every packet with payload waits in a small queue that routes
// the payload beats, in packet order (so a consumer can decide on the next header while
// the previous payload is still being placed). The packet whose payload flows keeps its
// destination in a register from its first beat on; when no payload waits, the first beat of
// the packet whose header passes in the same cycle is routed at once, so back-to-back
// packets lose no cycle between them (the queue's read takes two).
module hm_rc_rx_dispatch
  import hm_pkg::*;
#(
  // Datapath width in bits.
  parameter int DATA_WIDTH = 512,
  // Packets whose payload may wait behind their header (power of two).
  parameter int PAY_DEPTH = 8,
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

  // Congestion notifications received
  output logic                  m_cnp_valid,
  output logic [23:0]           m_cnp_qpn,

  output logic [31:0]           stat_other,
  output logic [31:0]           stat_cnp
);
  typedef enum logic [1:0] { D_REQ, D_RSP, D_DROP } dst_t;

  function automatic dst_t classify(input logic [7:0] op);
    if (op <= HM_OP_READ_REQ || op == HM_OP_CMP_SWAP || op == HM_OP_FETCH_ADD || op == HM_OP_SEND_LAST_INV || op == HM_OP_SEND_ONLY_INV) return D_REQ;
    if (op >= HM_OP_READ_RESP_FIRST && op <= HM_OP_ATOMIC_ACK) return D_RSP;
    if (op >= (HM_OP_SEND_FIRST | 8'h20) && op <= (HM_OP_WRITE_ONLY_IMM | 8'h20)) return D_REQ;
    return D_DROP;
  endfunction

  // payload routing of the packet whose header was passed on
  dst_t dst_h, dst_p;
  assign dst_h = classify(s_hdr.opcode);
  // the packet whose payload flows (set at its first beat, cleared at its last)
  logic cur_v_q;
  dst_t cur_dst_q;

  // destinations of the payloads to come
  logic       pq_room, pq_valid, pq_push, pq_pop;
  logic [1:0] pq_data;
  logic [$clog2(PAY_DEPTH+1):0] pq_level;
  hm_fifo #(.WIDTH(2), .DEPTH(PAY_DEPTH)) u_payq (
    .clk, .rst, .s_data(2'(dst_h)), .s_valid(pq_push), .s_ready(pq_room),
    .m_data(pq_data), .m_valid(pq_valid), .m_ready(pq_pop), .level(pq_level));

  logic has_pay, hdr_go;
  assign has_pay         = s_hdr.payload_len != 16'd0;
  assign m_req_hdr       = s_hdr;
  assign m_rsp_hdr       = s_hdr;
  assign m_req_hdr_valid = s_hdr_valid && dst_h == D_REQ && (pq_room || !has_pay);
  assign m_rsp_hdr_valid = s_hdr_valid && dst_h == D_RSP && (pq_room || !has_pay);
  assign s_hdr_ready     = (pq_room || !has_pay) && (dst_h == D_REQ ? m_req_hdr_ready :
                                                     dst_h == D_RSP ? m_rsp_hdr_ready : 1'b1);
  assign hdr_go          = s_hdr_valid && s_hdr_ready;

  // where the payload beat goes: the flowing packet's destination, else the oldest waiting
  // one's, else (nothing waits, not even in the queue's RAM) that of the header passing now
  logic route_v, byp, beat;
  assign byp     = !cur_v_q && pq_level == '0 && hdr_go && has_pay;
  assign route_v = cur_v_q || pq_valid || byp;
  assign dst_p   = cur_v_q ? cur_dst_q : pq_valid ? dst_t'(pq_data) : dst_h;
  assign beat    = s_axis_tvalid && s_axis_tready;
  // a header is queued unless its payload starts at once (routed by byp)
  assign pq_push = hdr_go && has_pay && !(byp && beat);

  assign m_req_tdata  = s_axis_tdata;
  assign m_req_tkeep  = s_axis_tkeep;
  assign m_req_tlast  = s_axis_tlast;
  assign m_rsp_tdata  = s_axis_tdata;
  assign m_rsp_tkeep  = s_axis_tkeep;
  assign m_rsp_tlast  = s_axis_tlast;
  assign m_req_tvalid = route_v && dst_p == D_REQ && s_axis_tvalid;
  assign m_rsp_tvalid = route_v && dst_p == D_RSP && s_axis_tvalid;
  assign s_axis_tready = route_v && (dst_p == D_REQ ? m_req_tready :
                                     dst_p == D_RSP ? m_rsp_tready : 1'b1);
  // a queued packet leaves the queue at its first beat
  assign pq_pop        = beat && !cur_v_q && pq_valid;
  always_ff @(posedge clk) begin
    if (rst) cur_v_q <= 1'b0;
    else if (beat) begin
      if (s_axis_tlast) cur_v_q <= 1'b0;
      else if (!cur_v_q) begin
        cur_v_q   <= 1'b1;
        cur_dst_q <= dst_p;
      end
    end
  end

  logic is_cnp;
  assign is_cnp = s_hdr.opcode == HM_OP_CNP;
  always_ff @(posedge clk) begin
    m_cnp_qpn <= s_hdr.dest_qp;
    if (rst) begin
      stat_other  <= '0;
      stat_cnp    <= '0;
      m_cnp_valid <= 1'b0;
    end else begin
      m_cnp_valid <= hdr_go && is_cnp;
      if (hdr_go && dst_h == D_DROP && !is_cnp) stat_other <= stat_other + 1'b1;
      if (hdr_go && is_cnp) stat_cnp <= stat_cnp + 1'b1;
    end
  end

endmodule
