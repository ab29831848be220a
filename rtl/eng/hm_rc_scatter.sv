// Payload scatter: cuts each received payload packet into the host-memory pieces the
// transport logic chose (receive SGEs, a WRITE's target, a READ requester's SGL) and hands
// each piece to the DMA write engine as a request plus a lane-0-aligned stream packet.
//
// Pieces arrive in packet order; a packet's pieces end with one marked `last`. A `discard`
// piece drops the rest of the packet (packets that are duplicates, out of sequence or in
// error). Bytes of the packet beyond its last piece are dropped; a piece longer than what is
// left of the packet is completed with zero bytes, so the DMA engine always receives exactly
// the length it was asked for. Internally a byte buffer of two beats: each cycle it may emit
// one output beat (taking up to KEEP_WIDTH bytes from its bottom) and take one input beat;
// a piece takes two cycles at least (its DMA request, then its data). One more piece waits
// behind the current one: its DMA request is issued while the current piece's data still
// flows, so the DMA engine has it queued when that data ends and the next piece's data
// follows without the engine's request-to-data delay (a multi-packet WRITE is placed at the
// wire rate).
module hm_rc_scatter
  import hm_eng_pkg::*;
#(
  // Datapath width in bits (256 or 512).
  parameter int DATA_WIDTH = 512,
  // Bytes per beat (derived).
  localparam int KEEP_WIDTH = DATA_WIDTH / 8
) (
  input  logic                  clk,
  input  logic                  rst,

  // Pieces: {discard, imm, last, len (1..4096), addr}; an `imm` piece writes s_pc.data
  // (len <= 8 bytes) and takes nothing from the payload stream
  input  hm_scat_pc_t           s_pc,
  input  logic                  s_pc_valid,
  output logic                  s_pc_ready,

  // Payload packets (lane 0 aligned, contiguous tkeep)
  input  logic [DATA_WIDTH-1:0] s_axis_tdata,
  input  logic [KEEP_WIDTH-1:0] s_axis_tkeep,
  input  logic                  s_axis_tvalid,
  output logic                  s_axis_tready,
  input  logic                  s_axis_tlast,

  // DMA write requests and data
  output hm_dma_req_t           m_wr,
  output logic                  m_wr_valid,
  input  logic                  m_wr_ready,
  output logic [DATA_WIDTH-1:0] m_axis_tdata,
  output logic [KEEP_WIDTH-1:0] m_axis_tkeep,
  output logic                  m_axis_tvalid,
  input  logic                  m_axis_tready,
  output logic                  m_axis_tlast
);
  localparam int LW = $clog2(KEEP_WIDTH);

  logic [2*DATA_WIDTH-1:0] buf_q;
  logic [LW+1:0]           cnt_q;        // bytes in buf_q (0..2*KW)
  logic                    in_done_q;    // the packet's last input beat was taken
  // current piece
  logic                    cur_v_q, cur_disc_q, cur_last_q, req_q, cur_imm_q;
  logic [63:0]             cur_data_q;
  logic [12:0]             left_q;
  logic [63:0]             cur_addr_q;
  // the next piece, and whether its DMA request was issued
  logic                    nx_v_q, nx_req_q;
  hm_scat_pc_t             nx_q;

  // output skid (registered boundary towards the DMA engine)
  logic [DATA_WIDTH-1:0] o_data;
  logic [KEEP_WIDTH-1:0] o_keep;
  logic                  o_last, o_valid, o_ready;
  hm_skid #(.WIDTH(DATA_WIDTH + KEEP_WIDTH + 1)) u_out (
    .clk, .rst,
    .s_data({o_data, o_keep, o_last}), .s_valid(o_valid), .s_ready(o_ready),
    .m_data({m_axis_tdata, m_axis_tkeep, m_axis_tlast}), .m_valid(m_axis_tvalid),
    .m_ready(m_axis_tready)
  );

  // the DMA request of a write piece goes out once, before its data; the next piece's after
  // the current one's
  logic cur_wr, nx_wr;
  assign cur_wr     = cur_v_q && !cur_disc_q && !req_q;
  assign nx_wr      = nx_v_q && !nx_q.discard && !nx_req_q && !cur_wr;
  assign m_wr.addr  = cur_wr ? cur_addr_q : nx_q.addr;
  assign m_wr.len   = cur_wr ? 32'(left_q) : 32'(nx_q.len);
  assign m_wr_valid = cur_wr || nx_wr;

  // this cycle's output beat
  logic [LW:0]  take;                    // bytes the beat takes (1..KW)
  logic         can_emit, emit, piece_end, in_take;
  logic [LW+1:0] cnt_after;
  always_comb begin
    take      = left_q > 13'(KEEP_WIDTH) ? (LW+1)'(KEEP_WIDTH) : (LW+1)'(left_q);
    can_emit  = cur_v_q && !cur_disc_q && req_q &&
                (cur_imm_q || cnt_q >= (LW+2)'(take) || in_done_q);  // short packet: zero fill
    emit      = can_emit && o_ready;
    o_valid   = can_emit;
    o_data    = cur_imm_q ? DATA_WIDTH'(cur_data_q) : buf_q[DATA_WIDTH-1:0];
    o_keep    = int'(take) >= KEEP_WIDTH ? '1 : ~({KEEP_WIDTH{1'b1}} << take);
    o_last    = left_q == 13'(take);
    piece_end = (emit && (o_last || cur_imm_q)) ||
                (cur_v_q && cur_disc_q && (in_done_q || (s_axis_tvalid && s_axis_tlast)));
    cnt_after = (emit && !cur_imm_q) ? (cnt_q > (LW+2)'(take) ? cnt_q - (LW+2)'(take) : '0) : cnt_q;
    // take an input beat while the packet lasts and the buffer has room; a discard piece
    // swallows beats
    in_take   = s_axis_tvalid && !in_done_q && cur_v_q && !cur_imm_q &&
                (cur_disc_q || cnt_after <= (LW+2)'(KEEP_WIDTH));
  end
  assign s_axis_tready = in_take;
  // the current piece may be replaced in the cycle it ends, unless the rest of its packet is
  // still to be swallowed; a piece is taken while the next-piece place is free
  logic cur_free;
  assign cur_free      = !cur_v_q || (piece_end && (!cur_last_q || cur_imm_q || in_done_q ||
                                                    (in_take && s_axis_tlast)));
  assign s_pc_ready    = !nx_v_q;

  always_ff @(posedge clk) begin
    if (rst) begin
      cur_v_q   <= 1'b0;
      nx_v_q    <= 1'b0;
      cnt_q     <= '0;
      in_done_q <= 1'b0;
      buf_q     <= '0;
    end else begin
      logic [2*DATA_WIDTH-1:0] b;
      logic [LW+1:0]           c;
      logic                    done;
      hm_scat_pc_t             ld;
      b    = buf_q;
      c    = cnt_q;
      done = in_done_q;
      ld   = nx_v_q ? nx_q : s_pc;
      if (cur_wr && m_wr_ready) req_q <= 1'b1;
      if (nx_wr && m_wr_ready) nx_req_q <= 1'b1;
      if (emit && !cur_imm_q) begin
        b = b >> (8 * int'(take));
        c = cnt_after;
        left_q     <= left_q - 13'(take);
        cur_addr_q <= cur_addr_q + 64'(take);
      end
      if (in_take) begin
        if (!cur_disc_q) begin
          // input bytes outside tkeep are not guaranteed zero; masked only for a beat taken
          logic [DATA_WIDTH-1:0] in_masked;
          for (int k = 0; k < KEEP_WIDTH; k++) in_masked[8*k +: 8] = s_axis_tkeep[k] ? s_axis_tdata[8*k +: 8] : 8'h00;
          b = b | ((2*DATA_WIDTH)'(in_masked) << (8 * int'(c)));
          c = c + (LW+2)'(hm_pkg::hm_keep_bytes(128'(s_axis_tkeep)));
        end
        if (s_axis_tlast) done = 1'b1;
      end
      if (piece_end) begin
        cur_v_q <= 1'b0;
        if (cur_last_q && !cur_imm_q) begin
          // the packet is finished: drop what is left of it
          if (done) begin
            b    = '0;
            c    = '0;
            done = 1'b0;
          end else begin
            // beats still to come belong to this packet: swallow them first
            cur_v_q    <= 1'b1;
            cur_disc_q <= 1'b1;
            cur_last_q <= 1'b1;
            b = '0;
            c = '0;
          end
        end
      end
      if (cur_free && (nx_v_q || (s_pc_valid && s_pc_ready))) begin
        // the next piece becomes the current one (its request may have gone out already),
        // else a new piece does
        nx_v_q     <= 1'b0;
        cur_v_q    <= 1'b1;
        cur_disc_q <= ld.discard;
        cur_imm_q  <= ld.imm && !ld.discard;
        cur_data_q <= ld.data;
        cur_last_q <= ld.last || ld.discard;
        left_q     <= ld.len;
        cur_addr_q <= ld.addr;
        req_q      <= nx_v_q && (nx_req_q || (nx_wr && m_wr_ready));
      end else if (s_pc_valid && s_pc_ready) begin
        nx_v_q   <= 1'b1;
        nx_q     <= s_pc;
        nx_req_q <= 1'b0;
      end
      buf_q     <= b;
      cnt_q     <= c;
      in_done_q <= done;
    end
  end

  if (DATA_WIDTH != 256 && DATA_WIDTH != 512) begin : g_bad_width
    $error("hm_rc_scatter: DATA_WIDTH must be 256 or 512");
  end
endmodule
