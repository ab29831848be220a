// DMA write engine: stream -> host memory, over an AXI4 master write channel.
//
// Each request writes `len` bytes (len >= 1) taken from its own s_axis packet (bytes packed
// from lane 0, tlast on the last beat) to any byte address. The engine splits it into INCR
// bursts of full beats that never cross a 4 KiB boundary and are at most MAX_BURST beats,
// realigns the data to the address with byte strobes (nothing outside [addr, addr+len) is
// written), keeps up to MAX_OUTSTANDING bursts in flight, and reports each request on m_done
// once every burst has its write response: m_done_err = an AXI error response on any burst or
// a stream whose length disagreed with len. Strobes follow the request alone, so nothing
// outside [addr, addr+len) is ever written; after a length mismatch the content of that range
// is unspecified (extra beats are discarded up to tlast) and the completion reports the
// error. A
// request with len == 0 is consumed, writes nothing, and is counted in stat_bad_req (no
// s_axis packet belongs to it).
module hm_dma_wr #(
  // AXI and stream data width in bits (power of two, 128..1024).
  parameter int DATA_WIDTH = 512,
  // AXI address width.
  parameter int ADDR_WIDTH = 64,
  // Request length width (bytes).
  parameter int LEN_WIDTH = 32,
  // Request tag width, returned on m_done_tag.
  parameter int TAG_WIDTH = 8,
  // AXI ID width; all writes use AWID = AXI_ID.
  parameter int ID_WIDTH = 4,
  // AWID used.
  parameter logic [ID_WIDTH-1:0] AXI_ID = '0,
  // Beats per burst (1..256).
  parameter int MAX_BURST = 64,
  // Bursts in flight (power of two).
  parameter int MAX_OUTSTANDING = 8,
  // Requests queued between the sides (power of two).
  parameter int REQ_FIFO_DEPTH = 16,
  // Bytes per beat (derived).
  localparam int KEEP_WIDTH = DATA_WIDTH / 8
) (
  input  logic                  clk,
  input  logic                  rst,

  // Requests
  input  logic [ADDR_WIDTH-1:0] s_req_addr,
  input  logic [LEN_WIDTH-1:0]  s_req_len,
  input  logic [TAG_WIDTH-1:0]  s_req_tag,
  input  logic                  s_req_valid,
  output logic                  s_req_ready,

  // Data, one packet per request with len != 0
  input  logic [DATA_WIDTH-1:0] s_axis_tdata,
  input  logic [KEEP_WIDTH-1:0] s_axis_tkeep,
  input  logic                  s_axis_tvalid,
  output logic                  s_axis_tready,
  input  logic                  s_axis_tlast,

  // Completions, in request order
  output logic [TAG_WIDTH-1:0]  m_done_tag,
  output logic                  m_done_err,
  output logic                  m_done_valid,
  input  logic                  m_done_ready,

  // AXI4 write channels
  output logic [ID_WIDTH-1:0]   m_axi_awid,
  output logic [ADDR_WIDTH-1:0] m_axi_awaddr,
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
  input  logic [ID_WIDTH-1:0]   m_axi_bid,
  input  logic [1:0]            m_axi_bresp,
  input  logic                  m_axi_bvalid,
  output logic                  m_axi_bready,

  output logic [31:0]           stat_bad_req,
  output logic [31:0]           stat_len_err
);
  localparam int KW = KEEP_WIDTH;
  localparam int KB = $clog2(KW);
  localparam int BW = LEN_WIDTH - KB + 1;
  localparam int PB = 12 - KB;                     // bits of a beat index within a 4 KiB page
  localparam int PW = ADDR_WIDTH - 12;             // page number bits

  function automatic logic [KB:0] keep_bytes(input logic [KW-1:0] keep);
    return (KB+1)'(hm_pkg::hm_keep_bytes(128'(keep)));
  endfunction

  // Lanes [0, n) of a beat (n >= KW: all), as lane bits and as data bits: word-level masks,
  // which a simulator evaluates as a few shifts instead of a loop over the lanes.
  function automatic logic [KW-1:0] lanes_below(input logic [KB:0] n);
    return int'(n) >= KW ? '1 : ~({KW{1'b1}} << n);
  endfunction
  function automatic logic [DATA_WIDTH-1:0] bytes_below(input logic [KB:0] n);
    return int'(n) >= KW ? '1 : ~({DATA_WIDTH{1'b1}} << (8 * int'(n)));
  endfunction

  // ----------------------------------------------------------------------------------------
  // Request input (skid: registered ready)
  // ----------------------------------------------------------------------------------------
  logic [ADDR_WIDTH-1:0] rq_addr;
  logic [LEN_WIDTH-1:0]  rq_len;
  logic [TAG_WIDTH-1:0]  rq_tag;
  logic                  rq_valid, rq_ready;
  hm_skid #(.WIDTH(ADDR_WIDTH + LEN_WIDTH + TAG_WIDTH)) u_req_skid (
    .clk, .rst,
    .s_data({s_req_addr, s_req_len, s_req_tag}), .s_valid(s_req_valid), .s_ready(s_req_ready),
    .m_data({rq_addr, rq_len, rq_tag}), .m_valid(rq_valid), .m_ready(rq_ready)
  );

  typedef struct packed {
    logic [KB-1:0] off;       // addr mod KW
    logic [BW-1:0] nw;        // W beats
    logic [BW-1:0] nin;       // input beats
    logic [KB:0]   lastn_in;  // bytes in the last input beat
    logic [KB:0]   end_w;     // strobed lanes in the last W beat (1..KW)
    logic          w_one;     // a single W beat
    logic          in_one;    // a single input beat
  } wplan_t;

  typedef struct packed {
    logic [TAG_WIDTH-1:0] tag;
    logic [BW-1:0]        nb_m1;    // bursts - 1
  } bplan_t;

  // ----------------------------------------------------------------------------------------
  // AW side: split the current request into bursts (hm_axi_burst_gen)
  // ----------------------------------------------------------------------------------------
  logic [BW-1:0]         aw_nb_q;        // bursts issued for the current request
  wplan_t                wp;
  bplan_t                bp;
  logic                  wpf_ready, bpf_ready, bf_ready, accept, b_fire, aw_load, gen_ready, gen_last;
  logic [8:0]            burst;

  // Beat counts from the whole beats of len plus a small correction (see hm_dma_rd).
  always_comb begin
    logic [BW-1:0] hi;
    logic [KB+1:0] nb_lo;
    logic [KB-1:0] endl;
    logic          no_lo;
    hi          = BW'(rq_len >> KB);
    nb_lo       = ((KB+2)'(rq_len[KB-1:0]) + (KB+2)'(rq_addr[KB-1:0]) + (KB+2)'(KW - 1)) >> KB;
    no_lo       = rq_len[KB-1:0] != '0;
    endl        = rq_len[KB-1:0] + rq_addr[KB-1:0];
    wp.off      = rq_addr[KB-1:0];
    wp.nw       = hi + BW'(nb_lo);
    wp.nin      = hi + BW'(no_lo);
    wp.lastn_in = no_lo ? (KB+1)'(rq_len[KB-1:0]) : (KB+1)'(KW);
    wp.end_w    = (endl == '0) ? (KB+1)'(KW) : (KB+1)'(endl);
    wp.w_one    = (hi == '0 && nb_lo == (KB+2)'(1)) || (hi == BW'(1) && nb_lo == '0);
    wp.in_one   = (hi == '0 && no_lo) || (hi == BW'(1) && !no_lo);
    bp.tag      = rq_tag;
    bp.nb_m1    = '0;   // filled in when the last burst is issued
  end

  // Request stage: the plan and the page numbers, registered.
  logic                 p_valid, p_take, p_len0;
  wplan_t               p_wp;
  logic [TAG_WIDTH-1:0] p_tag;
  logic [PW-1:0]        p_page, p_page1;
  logic [PB:0]          p_beat;
  assign rq_ready = !p_valid || p_take;
  always_ff @(posedge clk) begin
    if (rq_ready) begin
      p_wp    <= wp;
      p_tag   <= rq_tag;
      p_len0  <= rq_len == '0;
      p_page  <= rq_addr[ADDR_WIDTH-1:12];
      p_page1 <= rq_addr[ADDR_WIDTH-1:12] + 1'b1;
      p_beat  <= (PB+1)'(rq_addr[11:KB]);
    end
    if (rst) p_valid <= 1'b0;
    else if (rq_ready) p_valid <= rq_valid;
  end

  assign accept = gen_ready && p_valid && !p_len0 && wpf_ready;
  assign p_take = gen_ready && (wpf_ready || p_len0);

  hm_axi_burst_gen #(.ADDR_WIDTH(ADDR_WIDTH), .KB(KB), .BW(BW), .MAX_BURST(MAX_BURST),
                     .MAX_OUTSTANDING(MAX_OUTSTANDING)) u_aw (
    .clk, .rst,
    .s_page(p_page), .s_page1(p_page1), .s_beat(p_beat), .s_nbeats(p_wp.nw),
    .s_valid(accept), .s_ready(gen_ready),
    .gate(bf_ready && bpf_ready), .done(b_fire),
    .m_addr(m_axi_awaddr), .m_len(m_axi_awlen), .m_valid(m_axi_awvalid), .m_ready(m_axi_awready),
    .load(aw_load), .load_beats(burst), .load_last(gen_last)
  );

  assign m_axi_awid    = AXI_ID;
  assign m_axi_awsize  = 3'(KB);
  assign m_axi_awburst = 2'b01;

  logic [TAG_WIDTH-1:0] aw_tag_q;
  always_ff @(posedge clk) begin
    if (rst) begin
      stat_bad_req <= '0;
    end else begin
      if (p_valid && p_take && p_len0) stat_bad_req <= stat_bad_req + 1'b1;
      if (aw_load) aw_nb_q <= aw_nb_q + 1'b1;
      // a new request may be accepted in the cycle the previous one's last burst is loaded
      if (accept) begin
        aw_nb_q  <= '0;
        aw_tag_q <= p_tag;
      end
    end
  end

  // Burst lengths for the W side (WLAST placement), request plans for W and B sides.
  logic [8:0] bf_head;
  logic       bf_m_valid, bf_m_ready;
  logic [$clog2(REQ_FIFO_DEPTH*4+1):0] bf_level;
  hm_fifo #(.WIDTH(9), .DEPTH(REQ_FIFO_DEPTH * 4)) u_burst_fifo (
    .clk, .rst,
    .s_data(burst), .s_valid(aw_load), .s_ready(bf_ready),
    .m_data(bf_head), .m_valid(bf_m_valid), .m_ready(bf_m_ready),
    .level(bf_level)
  );
  wplan_t wph;
  logic   wpf_m_valid, wpf_m_ready;
  logic [$clog2(REQ_FIFO_DEPTH+1):0] wpf_level;
  hm_fifo #(.WIDTH($bits(wplan_t)), .DEPTH(REQ_FIFO_DEPTH)) u_wplan_fifo (
    .clk, .rst,
    .s_data(p_wp), .s_valid(accept), .s_ready(wpf_ready),
    .m_data(wph), .m_valid(wpf_m_valid), .m_ready(wpf_m_ready),
    .level(wpf_level)
  );
  bplan_t bph, bp_last;
  logic   bpf_m_valid, bpf_m_ready, bpf_push;
  logic [$clog2(REQ_FIFO_DEPTH+1):0] bpf_level;
  always_comb begin
    bp_last = bp;
    bp_last.tag = aw_tag_q;
    bp_last.nb_m1 = aw_nb_q;
  end
  assign bpf_push = aw_load && gen_last;
  hm_fifo #(.WIDTH($bits(bplan_t)), .DEPTH(REQ_FIFO_DEPTH)) u_bplan_fifo (
    .clk, .rst,
    .s_data(bp_last), .s_valid(bpf_push), .s_ready(bpf_ready),
    .m_data(bph), .m_valid(bpf_m_valid), .m_ready(bpf_m_ready),
    .level(bpf_level)
  );

  // ----------------------------------------------------------------------------------------
  // W side: realign the stream to the address, strobes, WLAST per burst
  // ----------------------------------------------------------------------------------------
  logic          w_busy_q, w_short_q, w_err_q, w_drain_q;
  wplan_t        wc_q, wc;
  logic          wfirst;               // first W beat of the request
  logic [BW-1:0] wl_q, il_q;           // W / input beats left, the next one included
  logic          wlast_q, inlast_q, need_q;
  logic [8:0]    bleft_q, cbl;         // beats left in the current burst
  logic          bfirst_q;
  logic [KW-1:0][7:0] held_q, rot;
  logic [2*DATA_WIDTH-1:0] rot2;
  logic          need_in, wgo, w_last_req, len_bad, w_out_ready, short_now, in_last;
  logic [BW-1:0] wl_cur, il_cur;
  logic [KW-1:0][7:0] w_data;
  logic [KW-1:0] w_strb;
  logic          werr_push, werr_s_ready;

  always_comb begin
    wc  = w_busy_q ? wc_q : wph;
    wfirst = !w_busy_q;
    cbl = bfirst_q ? bf_head : bleft_q;
    need_in = w_busy_q ? (need_q && !w_short_q) : 1'b1;
    // rotate up by off: lane l = input byte (l - off) mod KW
    // only an input beat that is there and needed is rotated
    rot2 = '0;
    if (need_in && s_axis_tvalid) rot2 = {s_axis_tdata, s_axis_tdata} >> (8 * (KW - int'(wc.off)));
    rot  = rot2[DATA_WIDTH-1:0];
    w_last_req = w_busy_q ? wlast_q : wph.w_one;
    // beat data and strobes: lanes below off hold the previous input beat's bytes; the
    // first beat strobes from off, the last one up to end_w
    w_strb = '1;
    if (wfirst) w_strb = w_strb & ~lanes_below((KB+1)'(wc.off));
    if (w_last_req) w_strb = w_strb & lanes_below(wc.end_w);
    // a short stream: tlast before the expected last input beat
    in_last   = w_busy_q ? inlast_q : wph.in_one;
    wl_cur    = w_busy_q ? wl_q : wph.nw;
    il_cur    = w_busy_q ? il_q : wph.nin;
    short_now = need_in && s_axis_tlast && !in_last;
    // length check of an input beat that is there (used only with wgo)
    len_bad   = 1'b0;
    if (need_in && s_axis_tvalid)
      len_bad = (in_last && (!s_axis_tlast || keep_bytes(s_axis_tkeep) != wc.lastn_in)) || short_now;
    // While draining surplus beats of the previous stream, only beats that need no input
    // (the trailing beat of a request whose data ends before its last lane) may proceed.
    wgo = (!w_drain_q || !need_in) && (w_busy_q || wpf_m_valid) && bf_m_valid && w_out_ready && (!need_in || s_axis_tvalid) &&
          (!w_last_req || werr_s_ready);
    // the W beat is assembled only when it goes (the skid takes it only with wgo)
    w_data = '0;
    if (wgo) w_data = (held_q & bytes_below((KB+1)'(wc.off))) | (rot & ~bytes_below((KB+1)'(wc.off)));
  end

  assign s_axis_tready = (wgo && need_in) || w_drain_q;
  assign wpf_m_ready   = wgo && !w_busy_q;
  assign bf_m_ready    = wgo && cbl == 9'd1;
  assign werr_push     = wgo && w_last_req;

  always_ff @(posedge clk) begin
    if (rst) begin
      w_busy_q  <= 1'b0;
      w_drain_q <= 1'b0;
      bfirst_q  <= 1'b1;
      stat_len_err <= '0;
    end else begin
      if (w_drain_q && s_axis_tvalid && s_axis_tlast) w_drain_q <= 1'b0;
      if (wgo) begin
        w_busy_q  <= !w_last_req;
        wc_q      <= wc;
        wl_q      <= wl_cur - BW'(1);
        wlast_q   <= wl_cur == BW'(2);
        il_q      <= need_in ? il_cur - BW'(1) : il_cur;
        inlast_q  <= need_in ? il_cur == BW'(2) : il_cur == BW'(1);
        need_q    <= need_in ? il_cur != BW'(1) : il_cur != '0;
        held_q    <= rot;
        w_short_q <= (w_busy_q && w_short_q) || short_now;
        w_err_q   <= (w_busy_q && w_err_q) || len_bad;
        bleft_q   <= cbl - 9'd1;
        bfirst_q  <= cbl == 9'd1;
        if (w_last_req && ((w_busy_q && w_err_q) || len_bad)) stat_len_err <= stat_len_err + 1'b1;
        // the stream did not end where the request does: discard up to its tlast
        if (need_in && in_last && !s_axis_tlast) w_drain_q <= 1'b1;
      end
    end
  end

  // W output register (skid)
  localparam int WOW = DATA_WIDTH + KW + 1;
  logic [WOW-1:0] w_pack, w_mpack;
  assign w_pack = {w_data, w_strb, cbl == 9'd1};
  hm_skid #(.WIDTH(WOW)) u_w_skid (
    .clk, .rst,
    .s_data(w_pack), .s_valid(wgo), .s_ready(w_out_ready),
    .m_data(w_mpack), .m_valid(m_axi_wvalid), .m_ready(m_axi_wready)
  );
  assign {m_axi_wdata, m_axi_wstrb, m_axi_wlast} = w_mpack;

  // Length errors per request, for the B side
  logic werr_head, werr_m_valid, werr_m_ready;
  logic [$clog2(REQ_FIFO_DEPTH+1):0] werr_level;
  hm_fifo #(.WIDTH(1), .DEPTH(REQ_FIFO_DEPTH)) u_werr_fifo (
    .clk, .rst,
    .s_data((w_busy_q && w_err_q) || len_bad), .s_valid(werr_push), .s_ready(werr_s_ready),
    .m_data(werr_head), .m_valid(werr_m_valid), .m_ready(werr_m_ready),
    .level(werr_level)
  );

  // ----------------------------------------------------------------------------------------
  // B side: count responses per request, report completion
  // ----------------------------------------------------------------------------------------
  // A request's plan (its burst count) is queued when its last burst is issued, so responses
  // to its earlier bursts may arrive before the plan: they are counted, never final (the final
  // response follows the last burst's AW and W, after the plan is visible).
  logic [BW-1:0] bcnt_q;
  logic          berr_q, b_done;
  assign b_done       = bpf_m_valid && bcnt_q == bph.nb_m1;
  assign m_axi_bready = !b_done || (werr_m_valid && (!m_done_valid || m_done_ready));
  assign b_fire       = m_axi_bvalid && m_axi_bready;
  assign bpf_m_ready  = b_fire && b_done;
  assign werr_m_ready = b_fire && b_done;

  always_ff @(posedge clk) begin
    if (rst) begin
      bcnt_q       <= '0;
      berr_q       <= 1'b0;
      m_done_valid <= 1'b0;
    end else begin
      if (m_done_valid && m_done_ready) m_done_valid <= 1'b0;
      if (b_fire) begin
        if (b_done) begin
          bcnt_q       <= '0;
          berr_q       <= 1'b0;
          m_done_valid <= 1'b1;
          m_done_tag   <= bph.tag;
          m_done_err   <= berr_q || m_axi_bresp != 2'b00 || werr_head;
        end else begin
          bcnt_q <= bcnt_q + BW'(1);
          berr_q <= berr_q || m_axi_bresp != 2'b00;
        end
      end
    end
  end

  logic unused_ok;
  assign unused_ok = ^{m_axi_bid, rot2[2*DATA_WIDTH-1:DATA_WIDTH], bf_level, wpf_level, bpf_level, werr_level};

  if (DATA_WIDTH < 128 || DATA_WIDTH > 1024 || (1 << KB) != KW) begin : g_bad_width
    $error("hm_dma_wr: DATA_WIDTH must be a power of two from 128 to 1024 bits");
  end
  if (LEN_WIDTH < KB + 10) begin : g_bad_len
    $error("hm_dma_wr: LEN_WIDTH too small for the beat counters");
  end
  if (REQ_FIFO_DEPTH < 2 || MAX_OUTSTANDING < 1) begin : g_bad_depth
    $error("hm_dma_wr: REQ_FIFO_DEPTH must be at least 2 and MAX_OUTSTANDING at least 1");
  end
endmodule
