// UC local acknowledgement: UC has no ACKs on the wire, so a UC send WQE completes once its
// last packet has left the requester for the TX path with all of its payload (every byte
// read from host memory: its CQE can never tell the application to reuse a buffer that is
// still being read). This block watches the requester's port of the TX arbiter: each
// header taken there (s_fire, with its hm_ucl_t sideband) and each payload packet's last
// beat taken (s_tlast_fire; payloads follow their headers in order). When the last packet of
// a UC message has left, it emits a local ACK record for the completer (opcode ACK, the
// local QP as DestQP, the packet's PSN, syndrome ACK), which retires every WQE of the QP up
// to that PSN as a received ACK would.
//
// The local ACK must not reach the completer before the started-WQE record of its WQE (the
// completer judges an ACK against the PSNs started): the requester made that record before
// the header, so the ACK waits until every record made by the time the packet left
// (i_made, counted when the header is taken) has been handed to the completer (i_sent_fire);
// a record that is still in the completer's merge stage is taken there with the ACK.
//
// Headers are tracked in order (those with payload, and UC message ends without payload) in a
// FIFO of DEPTH entries; while it is full, s_room holds the arbiter's port back. An entry
// with payload leaves once a last beat is counted for it. Records wait in an output
// register until the completer takes them.
module hm_uc_lack
  import hm_pkg::*;
  import hm_eng_pkg::*;
#(
  // Headers whose payload, or whose turn, is still to come (power of two): at least the TX
  // arbiter's ORDER_DEPTH.
  parameter int DEPTH = 32
) (
  input  logic         clk,
  input  logic         rst,

  // the requester's headers as the TX arbiter takes them
  input  hm_roce_hdr_t s_hdr,
  input  hm_ucl_t      s_ucl,
  input  logic         s_fire,
  output logic         s_room,
  // the last beat of a requester payload packet taken by the TX arbiter
  input  logic         s_tlast_fire,
  // started-WQE records: made by the requester (a running count) and handed to the completer
  input  logic [15:0]  i_made,
  input  logic         i_sent_fire,

  // local ACK records (to the completer, beside the received responses)
  output hm_roce_hdr_t m_ack,
  output logic         m_ack_valid,
  input  logic         m_ack_ready
);
  localparam int CW = $clog2(DEPTH + 1) + 1;

  typedef struct packed {
    logic        pay;            // the packet has payload (leaves with a counted last beat)
    logic        last;           // a UC message ends with it
    logic [15:0] qpn;
    logic [23:0] psn;
    logic [15:0] made;           // records made by the time the header was taken
  } ent_t;

  ent_t e_in, e_hd;
  logic push, f_room, f_valid, pop;
  logic [$clog2(DEPTH+1):0] level;
  assign e_in = '{pay: s_hdr.payload_len != 16'd0, last: s_ucl.last, qpn: s_ucl.qpn, psn: s_hdr.psn, made: i_made};
  assign push = s_fire && (e_in.pay || e_in.last);
  assign s_room = f_room;
  hm_fifo #(.WIDTH($bits(ent_t)), .DEPTH(DEPTH)) u_q (
    .clk, .rst, .s_data(e_in), .s_valid(push), .s_ready(f_room),
    .m_data(e_hd), .m_valid(f_valid), .m_ready(pop), .level(level));

  // last beats taken and not yet matched with their entry; records handed over
  logic [CW-1:0] beats_q;
  logic [15:0]   handed_q, ahead;
  logic          out_free;
  assign out_free = !m_ack_valid || m_ack_ready;
  assign ahead    = e_hd.made - handed_q;     // records still to hand over (a few at most)
  assign pop      = f_valid && (!e_hd.pay || beats_q != '0) &&
                    (!e_hd.last || (out_free && (ahead == '0 || ahead[15])));

  always_ff @(posedge clk) begin
    if (rst) begin
      beats_q     <= '0;
      handed_q    <= '0;
      m_ack_valid <= 1'b0;
    end else begin
      beats_q  <= beats_q + CW'(s_tlast_fire) - CW'(pop && e_hd.pay);
      handed_q <= handed_q + 16'(i_sent_fire);
      if (m_ack_ready) m_ack_valid <= 1'b0;
      if (pop && e_hd.last) m_ack_valid <= 1'b1;
    end
  end
  always_ff @(posedge clk) begin
    if (pop && e_hd.last && out_free) begin
      m_ack          <= '0;
      m_ack.opcode   <= HM_OP_ACK;
      m_ack.syndrome <= HM_AETH_ACK;
      m_ack.dest_qp  <= 24'(e_hd.qpn);
      m_ack.psn      <= e_hd.psn;
    end
  end

  logic unused_ok;
  assign unused_ok = ^{level, s_hdr};

  if (DEPTH < 2 || (DEPTH & (DEPTH - 1)) != 0) begin : g_bad_depth
    $error("hm_uc_lack: DEPTH must be a power of two, at least 2");
  end
endmodule
