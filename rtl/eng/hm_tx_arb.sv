// TX arbiter: two sources of (header record, payload packet) share the TX path. Source 1
// (responses: ACK/NAK, READ responses, atomic ACKs) has priority over source 0 (requests),
// so responses are never stuck behind bulk data. Headers are passed one per cycle; each
// packet's payload follows in the same order (an order FIFO), so headers may run ahead of
// the payload of earlier packets as the TX path allows.
module hm_tx_arb
  import hm_pkg::*;
#(
  // Datapath width in bits.
  parameter int DATA_WIDTH = 512,
  // Packets whose payload may be outstanding (power of two).
  parameter int ORDER_DEPTH = 16,
  // Bytes per beat (derived).
  localparam int KEEP_WIDTH = DATA_WIDTH / 8
) (
  input  logic                     clk,
  input  logic                     rst,

  input  hm_roce_hdr_t [1:0]       s_hdr,
  input  logic [1:0]               s_hdr_valid,
  output logic [1:0]               s_hdr_ready,
  input  logic [1:0][DATA_WIDTH-1:0] s_tdata,
  input  logic [1:0][KEEP_WIDTH-1:0] s_tkeep,
  input  logic [1:0]               s_tvalid,
  output logic [1:0]               s_tready,
  input  logic [1:0]               s_tlast,
  input  logic [1:0]               s_tuser,

  output hm_roce_hdr_t             m_hdr,
  output logic                     m_hdr_valid,
  input  logic                     m_hdr_ready,
  output logic [DATA_WIDTH-1:0]    m_tdata,
  output logic [KEEP_WIDTH-1:0]    m_tkeep,
  output logic                     m_tvalid,
  input  logic                     m_tready,
  output logic                     m_tlast,
  output logic                     m_tuser
);
  logic sel, ord_room, ord_valid, ord_src, ord_pop;
  logic [$clog2(ORDER_DEPTH+1):0] level;
  assign sel         = s_hdr_valid[1];
  assign m_hdr       = s_hdr[sel];
  assign m_hdr_valid = s_hdr_valid[sel] && ord_room;
  always_comb begin
    s_hdr_ready = '0;
    s_hdr_ready[sel] = m_hdr_ready && ord_room;
  end

  hm_fifo #(.WIDTH(1), .DEPTH(ORDER_DEPTH)) u_order (
    .clk, .rst,
    .s_data(sel), .s_valid(m_hdr_valid && m_hdr_ready && m_hdr.payload_len != 16'd0),
    .s_ready(ord_room),
    .m_data(ord_src), .m_valid(ord_valid), .m_ready(ord_pop), .level(level));

  assign m_tdata  = s_tdata[ord_src];
  assign m_tkeep  = s_tkeep[ord_src];
  assign m_tlast  = s_tlast[ord_src];
  assign m_tuser  = s_tuser[ord_src];
  assign m_tvalid = ord_valid && s_tvalid[ord_src];
  always_comb begin
    s_tready = '0;
    s_tready[ord_src] = ord_valid && m_tready;
  end
  assign ord_pop = m_tvalid && m_tready && m_tlast;

  logic unused_ok;
  assign unused_ok = ^{level};
endmodule
