// DMA read engine: host memory -> stream, over an AXI4 master read channel.
//
// Each request reads `len` bytes (len >= 1) from any byte address. The engine splits it into
// INCR bursts of full beats that never cross a 4 KiB boundary and are at most MAX_BURST beats,
// keeps up to MAX_OUTSTANDING bursts in flight, and streams the bytes out realigned to lane 0:
// one AXI4-Stream packet per request, in request order, tlast on its last beat, tid = the
// request's tag, tuser on the last beat = an AXI error (SLVERR/DECERR) on any of its beats.
// A request with len == 0 is consumed, produces nothing and is counted in stat_bad_req.
//
// Realignment: with off = addr mod KW, output beat j takes lanes [off, KW) of read beat j and
// lanes [0, off) of read beat j+1. When the request's last output beat lies wholly in its last
// read beat and another output beat is emitted from that same read beat, the extra beat waits
// in a pending register for the next cycle (the next request's first read beat emits nothing
// unless the whole request fits in it, the only case that costs a cycle).
module hm_dma_rd #(
  // AXI and stream data width in bits (power of two, 128..1024).
  parameter int DATA_WIDTH = 512,
  // AXI address width.
  parameter int ADDR_WIDTH = 64,
  // Request length width (bytes).
  parameter int LEN_WIDTH = 32,
  // Request tag width, returned on m_axis_tid.
  parameter int TAG_WIDTH = 8,
  // AXI ID width; all reads use ARID = AXI_ID.
  parameter int ID_WIDTH = 4,
  // ARID used.
  parameter logic [ID_WIDTH-1:0] AXI_ID = '0,
  // Beats per burst (1..256).
  parameter int MAX_BURST = 64,
  // Bursts in flight (power of two).
  parameter int MAX_OUTSTANDING = 8,
  // Requests queued between the AR and R sides (power of two).
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

  // Data, one packet per request
  output logic [DATA_WIDTH-1:0] m_axis_tdata,
  output logic [KEEP_WIDTH-1:0] m_axis_tkeep,
  output logic                  m_axis_tvalid,
  input  logic                  m_axis_tready,
  output logic                  m_axis_tlast,
  output logic                  m_axis_tuser,
  output logic [TAG_WIDTH-1:0]  m_axis_tid,

  // AXI4 read address and data channels
  output logic [ID_WIDTH-1:0]   m_axi_arid,
  output logic [ADDR_WIDTH-1:0] m_axi_araddr,
  output logic [7:0]            m_axi_arlen,
  output logic [2:0]            m_axi_arsize,
  output logic [1:0]            m_axi_arburst,
  output logic                  m_axi_arvalid,
  input  logic                  m_axi_arready,
  input  logic [ID_WIDTH-1:0]   m_axi_rid,
  input  logic [DATA_WIDTH-1:0] m_axi_rdata,
  input  logic [1:0]            m_axi_rresp,
  input  logic                  m_axi_rlast,
  input  logic                  m_axi_rvalid,
  output logic                  m_axi_rready,

  output logic [31:0]           stat_bad_req
);
  localparam int KW = KEEP_WIDTH;
  localparam int KB = $clog2(KW);
  // lanes / bytes below lane n (all of them when n >= KW), word-level masks
  function automatic logic [KW-1:0] lanes_below(input logic [KB:0] n);
    return int'(n) >= KW ? '1 : ~({KW{1'b1}} << n);
  endfunction
  function automatic logic [DATA_WIDTH-1:0] bytes_below(input logic [KB:0] n);
    return int'(n) >= KW ? '1 : ~({DATA_WIDTH{1'b1}} << (8 * int'(n)));
  endfunction
  localparam int BW = LEN_WIDTH - KB + 1;          // beat counts
  localparam int PB = 12 - KB;                     // bits of a beat index within a 4 KiB page
  localparam int PW = ADDR_WIDTH - 12;             // page number bits

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

  // Per-request plan for the R side.
  typedef struct packed {
    logic [TAG_WIDTH-1:0] tag;
    logic [KB-1:0]        off;      // addr mod KW
    logic [BW-1:0]        nbeats;   // read beats
    logic                 tail;     // (off > 0) last output beat comes from the last read beat alone
    logic [KB:0]          lastn;    // bytes in the last output beat
    logic                 one;      // a single read beat
  } plan_t;

  // ----------------------------------------------------------------------------------------
  // AR side: split the current request into bursts (hm_axi_burst_gen)
  // ----------------------------------------------------------------------------------------
  logic                  pf_s_ready, pf_push, gen_ready;
  plan_t                 pl;
  logic                  r_last_fire;

  // Beat counts from the whole beats of len plus a small correction (no wide compares):
  // read beats = hi + ceil((lo + off) / KW), output beats = hi + (lo != 0).
  always_comb begin
    logic [BW-1:0] hi;
    logic [KB+1:0] nb_lo;
    logic          no_lo;
    hi        = BW'(rq_len >> KB);
    nb_lo     = ((KB+2)'(rq_len[KB-1:0]) + (KB+2)'(rq_addr[KB-1:0]) + (KB+2)'(KW - 1)) >> KB;
    no_lo     = rq_len[KB-1:0] != '0;
    pl.tag    = rq_tag;
    pl.off    = rq_addr[KB-1:0];
    pl.nbeats = hi + BW'(nb_lo);
    pl.tail   = rq_addr[KB-1:0] != '0 && nb_lo == (KB+2)'(no_lo);
    pl.lastn  = no_lo ? (KB+1)'(rq_len[KB-1:0]) : (KB+1)'(KW);
    pl.one    = (hi == '0 && nb_lo == (KB+2)'(1)) || (hi == BW'(1) && nb_lo == '0);
  end

  // Request stage: the plan and the page numbers, registered.
  logic          p_valid, p_take, p_len0;
  plan_t         p_pl;
  logic [PW-1:0] p_page, p_page1;
  logic [PB:0]   p_beat;
  assign rq_ready = !p_valid || p_take;
  always_ff @(posedge clk) begin
    if (rq_ready) begin
      p_pl    <= pl;
      p_len0  <= rq_len == '0;
      p_page  <= rq_addr[ADDR_WIDTH-1:12];
      p_page1 <= rq_addr[ADDR_WIDTH-1:12] + 1'b1;
      p_beat  <= (PB+1)'(rq_addr[11:KB]);
    end
    if (rst) p_valid <= 1'b0;
    else if (rq_ready) p_valid <= rq_valid;
  end

  // Accept a request when the generator is idle and its plan fits in the queue; len == 0 is
  // dropped and counted.
  assign pf_push = gen_ready && p_valid && !p_len0 && pf_s_ready;
  assign p_take  = gen_ready && (pf_s_ready || p_len0);

  logic       gen_load, gen_last;
  logic [8:0] gen_beats;
  hm_axi_burst_gen #(.ADDR_WIDTH(ADDR_WIDTH), .KB(KB), .BW(BW), .MAX_BURST(MAX_BURST),
                     .MAX_OUTSTANDING(MAX_OUTSTANDING)) u_ar (
    .clk, .rst,
    .s_page(p_page), .s_page1(p_page1), .s_beat(p_beat), .s_nbeats(p_pl.nbeats),
    .s_valid(pf_push), .s_ready(gen_ready),
    .gate(1'b1), .done(r_last_fire),
    .m_addr(m_axi_araddr), .m_len(m_axi_arlen), .m_valid(m_axi_arvalid), .m_ready(m_axi_arready),
    .load(gen_load), .load_beats(gen_beats), .load_last(gen_last)
  );

  assign m_axi_arid    = AXI_ID;
  assign m_axi_arsize  = 3'(KB);
  assign m_axi_arburst = 2'b01;

  always_ff @(posedge clk) begin
    if (rst) stat_bad_req <= '0;
    else if (p_valid && p_take && p_len0) stat_bad_req <= stat_bad_req + 1'b1;
  end

  // Plan FIFO between the sides
  plan_t pf_head;
  logic  pf_m_valid, pf_m_ready;
  logic [$clog2(REQ_FIFO_DEPTH+1):0] pf_level;
  hm_fifo #(.WIDTH($bits(plan_t)), .DEPTH(REQ_FIFO_DEPTH)) u_plan_fifo (
    .clk, .rst,
    .s_data(p_pl), .s_valid(pf_push), .s_ready(pf_s_ready),
    .m_data(pf_head), .m_valid(pf_m_valid), .m_ready(pf_m_ready),
    .level(pf_level)
  );

  // ----------------------------------------------------------------------------------------
  // R side: realign each request's beats to lane 0
  // ----------------------------------------------------------------------------------------
  logic          busy_q, err_q;
  plan_t         cp_q, c;
  logic [BW-1:0] left_q;             // read beats left, the next one included
  logic          lastb_q;            // the next beat is the request's last
  logic [KW-1:0][7:0] held_q, rot, e1_data;
  logic [2*DATA_WIDTH-1:0] rot2;
  logic          pend_q, pend_err_q, pend_last_q;
  logic [KW-1:0][7:0] pend_data_q;
  logic [KB:0]   pend_n_q;
  logic [TAG_WIDTH-1:0] pend_tag_q;
  logic          out_ready, proc, first, lastb, cerr, beat_err;
  logic [1:0]    ecnt;
  logic [KB:0]   e1_n;
  logic          e1_last;
  logic          o_valid, o_last, o_err;
  logic [KW-1:0][7:0] o_data;
  logic [KB:0]   o_n;
  logic [TAG_WIDTH-1:0] o_tag;

  always_comb begin
    first = !busy_q;
    c     = busy_q ? cp_q : pf_head;
    lastb = busy_q ? lastb_q : pf_head.one;
    beat_err = m_axi_rresp != 2'b00;
    cerr  = (busy_q && err_q) || beat_err;
    // (gating this rotation with m_axi_rvalid would spare a simulator the shift while idle,
    // at about 300 LUTs of gating in synthesis: not done)
    rot2  = {m_axi_rdata, m_axi_rdata} >> (8 * c.off);
    rot   = rot2[DATA_WIDTH-1:0];

    ecnt = 2'd0; e1_data = rot; e1_n = (KB+1)'(KW); e1_last = 1'b0;
    if (c.off == '0) begin
      ecnt = 2'd1; e1_last = lastb; if (lastb) e1_n = c.lastn;
    end else if (first) begin
      if (lastb) begin ecnt = 2'd1; e1_last = 1'b1; e1_n = c.lastn; end
    end else begin
      ecnt = 2'd1;
      e1_data = (held_q & bytes_below((KB+1)'(KW - int'(c.off)))) | (rot & ~bytes_below((KB+1)'(KW - int'(c.off))));
      if (lastb) begin
        if (c.tail) ecnt = 2'd2;
        else begin e1_last = 1'b1; e1_n = c.lastn; end
      end
    end

    proc = (busy_q || pf_m_valid) && m_axi_rvalid && out_ready && !(pend_q && ecnt == 2'd2);

    o_valid = 1'b0; o_data = e1_data; o_n = e1_n; o_last = e1_last; o_err = cerr; o_tag = c.tag;
    if (out_ready) begin
      if (pend_q) begin
        o_valid = 1'b1; o_data = pend_data_q; o_n = pend_n_q; o_last = pend_last_q; o_err = pend_err_q; o_tag = pend_tag_q;
      end else if (proc && ecnt != 0) begin
        o_valid = 1'b1;
      end
    end
  end

  assign m_axi_rready = proc;
  assign pf_m_ready   = proc && first;
  assign r_last_fire  = m_axi_rvalid && m_axi_rready && m_axi_rlast;

  always_ff @(posedge clk) begin
    if (rst) begin
      busy_q <= 1'b0;
      pend_q <= 1'b0;
    end else begin
      if (proc) begin
        busy_q <= !lastb;
        cp_q   <= c;
        left_q  <= (busy_q ? left_q : pf_head.nbeats) - BW'(1);
        lastb_q <= (busy_q ? left_q : pf_head.nbeats) == BW'(2);
        err_q  <= cerr;
        held_q <= rot;
      end
      if (out_ready) begin
        if (pend_q) begin
          pend_q      <= proc && ecnt != 0;
          pend_data_q <= e1_data;
          pend_n_q    <= e1_n;
          pend_last_q <= e1_last;
          pend_err_q  <= cerr;
          pend_tag_q  <= c.tag;
        end else if (proc && ecnt == 2'd2) begin
          pend_q      <= 1'b1;
          pend_data_q <= rot;
          pend_n_q    <= c.lastn;
          pend_last_q <= 1'b1;
          pend_err_q  <= cerr;
          pend_tag_q  <= c.tag;
        end
      end
    end
  end

  // Output skid
  localparam int OW = DATA_WIDTH + KW + 2 + TAG_WIDTH;
  logic [OW-1:0]       o_pack, m_pack;
  logic [KW-1:0]       o_keep;
  logic [DATA_WIDTH-1:0] o_masked;
  always_comb begin
    o_keep   = lanes_below(o_n);
    o_masked = o_data & bytes_below(o_n);
    o_pack = {o_masked, o_keep, o_last, o_last && o_err, o_tag};
  end
  hm_skid #(.WIDTH(OW)) u_out_skid (
    .clk, .rst,
    .s_data(o_pack), .s_valid(o_valid), .s_ready(out_ready),
    .m_data(m_pack), .m_valid(m_axis_tvalid), .m_ready(m_axis_tready)
  );
  assign {m_axis_tdata, m_axis_tkeep, m_axis_tlast, m_axis_tuser, m_axis_tid} = m_pack;

  logic unused_ok;
  assign unused_ok = ^{m_axi_rid, rot2[2*DATA_WIDTH-1:DATA_WIDTH], pf_level, gen_load, gen_beats, gen_last};

  if (DATA_WIDTH < 128 || DATA_WIDTH > 1024 || (1 << KB) != KW) begin : g_bad_width
    $error("hm_dma_rd: DATA_WIDTH must be a power of two from 128 to 1024 bits");
  end
  if (LEN_WIDTH < KB + 10) begin : g_bad_len
    $error("hm_dma_rd: LEN_WIDTH too small for the beat counters");
  end
  if (REQ_FIFO_DEPTH < 2 || MAX_OUTSTANDING < 1) begin : g_bad_depth
    $error("hm_dma_rd: REQ_FIFO_DEPTH must be at least 2 and MAX_OUTSTANDING at least 1");
  end
endmodule
