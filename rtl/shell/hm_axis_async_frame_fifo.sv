// An AXI-Stream frame FIFO between two clock domains: the shell's crossing between the 100G
// MAC (CMAC, 322.265625 MHz) and the core clock, one instance per direction.
//
// A frame becomes visible to the destination only once its last beat is written
// (store-and-forward): the destination then reads it at one beat per clock without a gap, so a
// MAC fed from this FIFO never sees an underflow in the middle of a frame. A frame is dropped
// whole, never in part, and counted:
//   - bad: its last beat carries s_axis_tuser (the MAC's FCS or framing error);
//   - oversize: it is longer than DEPTH beats (it could never be committed);
//   - full (DROP_WHEN_FULL = 1 only): the FIFO filled while it was written.
// DROP_WHEN_FULL = 1 (the receive side) holds s_axis_tready high at all times: a MAC has no
// backpressure. DROP_WHEN_FULL = 0 (the transmit side) holds the source back while the FIFO is
// full, as long as the frame itself still fits.
//
// Crossing:
//   - the read pointer steps by one beat at a time, so its Gray code changes one bit per read
//     clock: it crosses as a Gray code from a register through hm_sync (ASYNC_REG);
//   - the committed pointer jumps by a whole frame when a frame is committed, so a Gray code
//     would change several bits at once: it crosses by request and acknowledge instead. The
//     write side holds the binary value it offers (com_x_q) still and toggles a request; the
//     read side sees the synchronised toggle, takes the value (still for at least STAGES of its
//     clocks by then) and toggles its acknowledge back; only then is a newer value offered
//     (commits in between are taken together). The offered value's path into the read side
//     needs a max-delay of about one read clock and a bus-skew constraint (the flow, not yet
//     written);
//   - the counters step by one, so they cross as Gray codes, like the read pointer.
// The memory is one simple dual-port block RAM with a write clock and a read clock and a
// registered read, which is the output register. Both resets must be asserted together (each
// synchronous to its own clock) for at least STAGES + 1 clocks of the slower clock: a side
// reset alone leaves the other's pointers behind (hm_eth_port resets both whenever either is).
module hm_axis_async_frame_fifo #(
  parameter int DATA_WIDTH     = 512,            // tdata bits
  parameter int KEEP_WIDTH     = DATA_WIDTH / 8, // tkeep bits
  parameter int DEPTH          = 512,            // beats, a power of two, >= 4
  parameter bit DROP_WHEN_FULL = 1'b0,           // 1: never back-pressure; drop what does not fit
  parameter int STAGES         = 2,              // synchroniser flip-flops, >= 2
  parameter int CNT_W          = 32,             // counter width
  parameter int AW             = $clog2(DEPTH)   // (derived) address bits
) (
  // ---- source side (s_clk)
  input  logic                  s_clk,
  input  logic                  s_rst,           // synchronous to s_clk, active high
  input  logic [DATA_WIDTH-1:0] s_axis_tdata,
  input  logic [KEEP_WIDTH-1:0] s_axis_tkeep,
  input  logic                  s_axis_tvalid,
  output logic                  s_axis_tready,
  input  logic                  s_axis_tlast,
  input  logic                  s_axis_tuser,    // with tlast: the frame is bad, drop it
  output logic [AW:0]           s_level,         // beats held, written frames and the one being
                                                 // written (a few clocks late for the reads)
  output logic [CNT_W-1:0]      s_cnt_frames,    // frames committed
  output logic [CNT_W-1:0]      s_cnt_bad,       // frames dropped: tuser on the last beat
  output logic [CNT_W-1:0]      s_cnt_oversize,  // frames dropped: longer than DEPTH beats
  output logic [CNT_W-1:0]      s_cnt_full,      // frames dropped: the FIFO was full

  // ---- destination side (m_clk)
  input  logic                  m_clk,
  input  logic                  m_rst,           // synchronous to m_clk, active high
  output logic [DATA_WIDTH-1:0] m_axis_tdata,
  output logic [KEEP_WIDTH-1:0] m_axis_tkeep,
  output logic                  m_axis_tvalid,
  input  logic                  m_axis_tready,
  output logic                  m_axis_tlast,
  output logic [CNT_W-1:0]      m_cnt_frames,    // the four counters, crossed to m_clk
  output logic [CNT_W-1:0]      m_cnt_bad,       // (a few m_clk clocks late)
  output logic [CNT_W-1:0]      m_cnt_oversize,
  output logic [CNT_W-1:0]      m_cnt_full
);
  localparam int MW = DATA_WIDTH + KEEP_WIDTH + 1;   // memory word: tlast, tkeep, tdata

  function automatic logic [AW:0] b2g(input logic [AW:0] b);
    return b ^ (b >> 1);
  endfunction
  // (Gray to binary: bit i is the XOR of bits i and above; Yosys maps these as chains of
  // two-input XORs all the same, the deepest path of this block)
  function automatic logic [AW:0] g2b(input logic [AW:0] g);
    logic [AW:0] b;
    for (int i = 0; i <= AW; i++) b[i] = ^(g >> i);
    return b;
  endfunction
  function automatic logic [CNT_W-1:0] c2g(input logic [CNT_W-1:0] b);
    return b ^ (b >> 1);
  endfunction

  logic [MW-1:0] mem [DEPTH];

  // ------------------------------------------------------------------ write side (s_clk)
  logic [AW:0] wr_q;                 // next beat's slot (the frame being written ends here)
  logic [AW:0] com_q;                // end of the last committed frame
  logic [AW:0] com_x_q;              // the committed pointer offered to the read side (held)
  logic        req_q;                // toggled when com_x_q is offered
  logic        ack_s;                // the read side's acknowledge toggle, synchronised
  logic [AW:0] rd_g_s;               // the read side's pointer, synchronised (Gray)
  logic [AW:0] rd_s_q;               // ... in binary (a clock later)
  logic        drop_q;               // the rest of the frame being written is dropped
  logic        full, over, take;

  assign full = (wr_q - rd_s_q) == (AW + 1)'(DEPTH);
  assign over = (wr_q - com_q) == (AW + 1)'(DEPTH);
  if (DROP_WHEN_FULL) begin : g_rx_ready
    assign s_axis_tready = 1'b1;
  end else begin : g_tx_ready
    assign s_axis_tready = drop_q || !full || over;
  end
  assign take = s_axis_tvalid && s_axis_tready;

  always_ff @(posedge s_clk) begin
    if (take && !drop_q && !full) mem[wr_q[AW-1:0]] <= {s_axis_tlast, s_axis_tkeep, s_axis_tdata};
  end

  always_ff @(posedge s_clk) begin
    if (s_rst) begin
      wr_q           <= '0;
      com_q          <= '0;
      com_x_q        <= '0;
      req_q          <= 1'b0;
      rd_s_q         <= '0;
      drop_q         <= 1'b0;
      s_level        <= '0;
      s_cnt_frames   <= '0;
      s_cnt_bad      <= '0;
      s_cnt_oversize <= '0;
      s_cnt_full     <= '0;
    end else begin
      // (a new offer once the last one is taken: the request and the acknowledge agree)
      if (req_q == ack_s && com_x_q != com_q) begin
        com_x_q <= com_q;
        req_q   <= !req_q;
      end
      rd_s_q  <= g2b(rd_g_s);
      s_level <= wr_q - rd_s_q;
      if (take) begin
        if (drop_q) begin
          if (s_axis_tlast) drop_q <= 1'b0;
        end else if (full) begin
          // the beat does not fit: the frame goes, whole
          wr_q   <= com_q;
          drop_q <= !s_axis_tlast;
          if (over) s_cnt_oversize <= s_cnt_oversize + 1'b1;
          else      s_cnt_full     <= s_cnt_full + 1'b1;
        end else if (s_axis_tlast && s_axis_tuser) begin
          wr_q      <= com_q;
          s_cnt_bad <= s_cnt_bad + 1'b1;
        end else if (s_axis_tlast) begin
          wr_q         <= wr_q + 1'b1;
          com_q        <= wr_q + 1'b1;
          s_cnt_frames <= s_cnt_frames + 1'b1;
        end else begin
          wr_q <= wr_q + 1'b1;
        end
      end
    end
  end

  // ------------------------------------------------------------------ read side (m_clk)
  logic [AW:0] rd_q;                 // next slot to read
  logic [AW:0] rd_g_q;               // its Gray code, for the write side
  logic        req_m;                // the write side's request toggle, synchronised
  logic        ack_q;                // toggled when an offer is taken
  logic [AW:0] com_m_q;              // the committed pointer, as last taken
  logic        ren;
  logic [MW-1:0] out_q;

  assign ren = rd_q != com_m_q && (!m_axis_tvalid || m_axis_tready);

  always_ff @(posedge m_clk) begin
    if (ren) out_q <= mem[rd_q[AW-1:0]];
  end
  assign {m_axis_tlast, m_axis_tkeep, m_axis_tdata} = out_q;

  always_ff @(posedge m_clk) begin
    if (m_rst) begin
      rd_q          <= '0;
      rd_g_q        <= '0;
      com_m_q       <= '0;
      ack_q         <= 1'b0;
      m_axis_tvalid <= 1'b0;
    end else begin
      rd_g_q  <= b2g(rd_q);
      if (req_m != ack_q) begin
        com_m_q <= com_x_q;              // (held still since before req_m changed)
        ack_q   <= req_m;
      end
      if (ren) begin
        rd_q          <= rd_q + 1'b1;
        m_axis_tvalid <= 1'b1;
      end else if (m_axis_tready) begin
        m_axis_tvalid <= 1'b0;
      end
    end
  end

  // ------------------------------------------------------------------ crossings
  hm_sync #(.WIDTH(1), .STAGES(STAGES)) u_req_sync (
    .clk(m_clk), .rst(m_rst), .d_i(req_q), .q_o(req_m));
  hm_sync #(.WIDTH(1), .STAGES(STAGES)) u_ack_sync (
    .clk(s_clk), .rst(s_rst), .d_i(ack_q), .q_o(ack_s));
  hm_sync #(.WIDTH(AW + 1), .STAGES(STAGES)) u_rd_sync (
    .clk(s_clk), .rst(s_rst), .d_i(rd_g_q), .q_o(rd_g_s));

  logic [4*CNT_W-1:0] cnt_g_q, cnt_g_m;
  always_ff @(posedge s_clk) begin
    if (s_rst) cnt_g_q <= '0;
    else cnt_g_q <= {c2g(s_cnt_full), c2g(s_cnt_oversize), c2g(s_cnt_bad), c2g(s_cnt_frames)};
  end
  hm_sync #(.WIDTH(4 * CNT_W), .STAGES(STAGES)) u_cnt_sync (
    .clk(m_clk), .rst(m_rst), .d_i(cnt_g_q), .q_o(cnt_g_m));
  // Gray to binary in two registered steps (a 32-bit XOR chain is too deep for one clock):
  // first each bit's XOR up to the top of its group of 8 and each group's parity, then each
  // bit with the parities of the groups above it.
  localparam int NG = (CNT_W + 7) / 8;
  logic [4*CNT_W-1:0] cnt_p_q;                   // step 1: XOR within the group, from bit i up
  logic [4*NG-1:0]    cnt_gp_q;                  // step 1: group parities
  always_ff @(posedge m_clk) begin
    if (m_rst) begin
      cnt_p_q        <= '0;
      cnt_gp_q       <= '0;
      m_cnt_frames   <= '0;
      m_cnt_bad      <= '0;
      m_cnt_oversize <= '0;
      m_cnt_full     <= '0;
    end else begin
      for (int c = 0; c < 4; c++) begin
        for (int i = 0; i < CNT_W; i++) begin
          logic x;
          x = 1'b0;
          for (int j = i; j < CNT_W && j < (i / 8 + 1) * 8; j++) x = x ^ cnt_g_m[c*CNT_W + j];
          cnt_p_q[c*CNT_W + i] <= x;
        end
        for (int k = 0; k < NG; k++) begin
          logic x;
          x = 1'b0;
          for (int j = k * 8; j < CNT_W && j < k * 8 + 8; j++) x = x ^ cnt_g_m[c*CNT_W + j];
          cnt_gp_q[c*NG + k] <= x;
        end
      end
      m_cnt_frames   <= g2c(cnt_p_q[0*CNT_W +: CNT_W], cnt_gp_q[0*NG +: NG]);
      m_cnt_bad      <= g2c(cnt_p_q[1*CNT_W +: CNT_W], cnt_gp_q[1*NG +: NG]);
      m_cnt_oversize <= g2c(cnt_p_q[2*CNT_W +: CNT_W], cnt_gp_q[2*NG +: NG]);
      m_cnt_full     <= g2c(cnt_p_q[3*CNT_W +: CNT_W], cnt_gp_q[3*NG +: NG]);
    end
  end
  function automatic logic [CNT_W-1:0] g2c(input logic [CNT_W-1:0] p, input logic [NG-1:0] gp);
    logic [CNT_W-1:0] b;
    for (int i = 0; i < CNT_W; i++) begin
      b[i] = p[i];
      for (int k = i / 8 + 1; k < NG; k++) b[i] = b[i] ^ gp[k];
    end
    return b;
  endfunction

  if (DEPTH < 4 || (DEPTH & (DEPTH - 1)) != 0) begin : g_bad_depth
    $error("hm_axis_async_frame_fifo: DEPTH must be a power of two, at least 4");
  end
endmodule
