// Payload gather: turns the requester's payload pieces into one lane-0-aligned stream packet
// per RoCE packet. DMA pieces become read requests (issued as soon as they arrive, so reads
// for later packets overlap the transmission of earlier ones); inline pieces take one packet
// from the requester's inline stream. The pieces of a packet are concatenated byte-exactly
// (an accumulator of up to KEEP_WIDTH-1 bytes and two byte shifters). A bus error on any
// piece sets tuser on the packet's last beat, which makes the TX path abort that frame.
module hm_rc_gather
  import hm_pkg::*;
  import hm_eng_pkg::*;
#(
  // Datapath width in bits (256 or 512).
  parameter int DATA_WIDTH = 512,
  // Pieces whose data may be outstanding (power of two).
  parameter int ORDER_DEPTH = 32,
  // Bytes per beat (derived).
  localparam int KEEP_WIDTH = DATA_WIDTH / 8
) (
  input  logic                  clk,
  input  logic                  rst,

  // Pieces
  input  hm_piece_t             s_pc,
  input  logic                  s_pc_valid,
  output logic                  s_pc_ready,

  // Inline bytes (one packet per inline piece)
  input  logic [DATA_WIDTH-1:0] s_inl_tdata,
  input  logic [KEEP_WIDTH-1:0] s_inl_tkeep,
  input  logic                  s_inl_tvalid,
  output logic                  s_inl_tready,
  input  logic                  s_inl_tlast,

  // DMA read requests and data (one stream packet per request)
  output hm_dma_req_t           m_rd,
  output logic                  m_rd_valid,
  input  logic                  m_rd_ready,
  input  logic [DATA_WIDTH-1:0] s_rd_tdata,
  input  logic [KEEP_WIDTH-1:0] s_rd_tkeep,
  input  logic                  s_rd_tvalid,
  output logic                  s_rd_tready,
  input  logic                  s_rd_tlast,
  input  logic                  s_rd_tuser,

  // Payload packets
  output logic [DATA_WIDTH-1:0] m_axis_tdata,
  output logic [KEEP_WIDTH-1:0] m_axis_tkeep,
  output logic                  m_axis_tvalid,
  input  logic                  m_axis_tready,
  output logic                  m_axis_tlast,
  output logic                  m_axis_tuser
);
  localparam int LW = $clog2(KEEP_WIDTH);

  // ---------------------------------------------------------------------------------------
  // Issue side: DMA pieces go to the read engine; every piece leaves an order entry
  // ---------------------------------------------------------------------------------------
  logic ord_room, ord_valid, ord_pop;
  logic [1:0] ord_in, ord_out;    // {inline, last}
  logic [$clog2(ORDER_DEPTH+1):0] ord_level;

  assign m_rd.addr  = s_pc.addr;
  assign m_rd.len   = 32'(s_pc.len);
  assign m_rd_valid = s_pc_valid && !s_pc.inline_src && ord_room;
  assign s_pc_ready = ord_room && (s_pc.inline_src || m_rd_ready);
  assign ord_in     = {s_pc.inline_src, s_pc.last};

  hm_fifo #(.WIDTH(2), .DEPTH(ORDER_DEPTH)) u_order (
    .clk, .rst,
    .s_data(ord_in), .s_valid(s_pc_valid && s_pc_ready), .s_ready(ord_room),
    .m_data(ord_out), .m_valid(ord_valid), .m_ready(ord_pop),
    .level(ord_level)
  );

  // ---------------------------------------------------------------------------------------
  // Data side: the source named by the oldest order entry, into the accumulator
  // ---------------------------------------------------------------------------------------
  logic                  in_valid, in_ready, in_last, in_err, grp_last;
  logic [DATA_WIDTH-1:0] in_data;
  logic [KEEP_WIDTH-1:0] in_keep;

  always_comb begin
    grp_last = ord_out[0];
    if (ord_out[1]) begin
      in_valid = ord_valid && s_inl_tvalid;
      in_data  = s_inl_tdata;
      in_keep  = s_inl_tkeep;
      in_last  = s_inl_tlast;
      in_err   = 1'b0;
    end else begin
      in_valid = ord_valid && s_rd_tvalid;
      in_data  = s_rd_tdata;
      in_keep  = s_rd_tkeep;
      in_last  = s_rd_tlast;
      in_err   = s_rd_tuser;
    end
  end
  assign s_inl_tready = ord_valid && ord_out[1] && in_ready;
  assign s_rd_tready  = ord_valid && !ord_out[1] && in_ready;
  assign ord_pop      = in_valid && in_ready && in_last;

  // ---------------------------------------------------------------------------------------
  // Accumulator and output register
  // ---------------------------------------------------------------------------------------
  logic [DATA_WIDTH-1:0] acc_q;
  logic [LW-1:0]         fill_q;      // bytes held in acc_q
  logic                  flush_q;     // acc_q holds the tail of a finished packet
  logic                  err_q;
  logic                  can_out;

  assign can_out  = !m_axis_tvalid || m_axis_tready;
  assign in_ready = can_out && !flush_q;

  logic [LW:0]           n_in, total;
  logic [DATA_WIDTH-1:0] merged, over, in_masked;
  logic [KEEP_WIDTH-1:0] keep_total, keep_fill;
  always_comb begin
    // the beat is counted, masked and placed only when there is one (total, merged and over
    // are used only with in_valid): a simulator skips the shifts otherwise
    n_in      = '0;
    in_masked = '0;
    merged    = acc_q;
    over      = '0;
    if (in_valid) begin
      n_in = (LW+1)'(hm_keep_bytes(128'(in_keep)));
      for (int b = 0; b < KEEP_WIDTH; b++) in_masked[8*b +: 8] = in_keep[b] ? in_data[8*b +: 8] : 8'h00;
      merged = acc_q | (in_masked << (8 * int'(fill_q)));
      if (fill_q != '0) over = in_masked >> (8 * (KEEP_WIDTH - int'(fill_q)));
    end
    total      = (LW+1)'(fill_q) + n_in;
    keep_total = int'(total) >= KEEP_WIDTH ? '1 : ~({KEEP_WIDTH{1'b1}} << total);
    keep_fill  = ~({KEEP_WIDTH{1'b1}} << fill_q);
  end

  always_ff @(posedge clk) begin
    if (rst) begin
      m_axis_tvalid <= 1'b0;
      acc_q         <= '0;
      fill_q        <= '0;
      flush_q       <= 1'b0;
      err_q         <= 1'b0;
    end else if (can_out) begin
      m_axis_tvalid <= 1'b0;
      if (flush_q) begin
        m_axis_tvalid <= 1'b1;
        m_axis_tdata  <= acc_q;
        m_axis_tkeep  <= keep_fill;
        m_axis_tlast  <= 1'b1;
        m_axis_tuser  <= err_q;
        acc_q   <= '0;
        fill_q  <= '0;
        flush_q <= 1'b0;
        err_q   <= 1'b0;
      end else if (in_valid) begin
        logic done, e;
        done = in_last && grp_last;
        e    = err_q || (in_err && in_last);
        if (total >= (LW+1)'(KEEP_WIDTH)) begin
          m_axis_tvalid <= 1'b1;
          m_axis_tdata  <= merged;
          m_axis_tkeep  <= '1;
          m_axis_tlast  <= done && total == (LW+1)'(KEEP_WIDTH);
          m_axis_tuser  <= e && done && total == (LW+1)'(KEEP_WIDTH);
          acc_q  <= over;
          fill_q <= LW'(total - (LW+1)'(KEEP_WIDTH));
          if (done && total != (LW+1)'(KEEP_WIDTH)) flush_q <= 1'b1;
          err_q  <= (done && total == (LW+1)'(KEEP_WIDTH)) ? 1'b0 : e;
        end else if (done) begin
          m_axis_tvalid <= 1'b1;
          m_axis_tdata  <= merged;
          m_axis_tkeep  <= keep_total;
          m_axis_tlast  <= 1'b1;
          m_axis_tuser  <= e;
          acc_q  <= '0;
          fill_q <= '0;
          err_q  <= 1'b0;
        end else begin
          acc_q  <= merged;
          fill_q <= LW'(total);
          err_q  <= e;
        end
      end
    end
  end

  logic unused_ok;
  assign unused_ok = ^{ord_level, s_pc.len};

  if (DATA_WIDTH != 256 && DATA_WIDTH != 512) begin : g_bad_width
    $error("hm_rc_gather: DATA_WIDTH must be 256 or 512");
  end
endmodule
