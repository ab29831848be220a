// Per-QP counters: NUM_CNT 32-bit counters for each of NUM_QPS QPs, one row per QP in block
// RAM, updated by read-modify-write in a four-stage pipeline that takes one operation a cycle.
//
// Operations, in priority order:
//   * init: after reset every row is cleared, one a cycle (NUM_QPS cycles; events wait);
//   * clear (s_clr_*): a QP was created, its row starts again from zero (taken at once
//     during init);
//   * read (s_rd_*): the row is copied to m_rd_data, m_rd_valid pulses;
//   * events (s_ev_*, NUM_SRC sources, each with its own FIFO): add 1 to every counter whose
//     bit is set in the mask. An event that finds its FIFO full, or names a QP beyond the
//     table, is not counted; `lost` counts it.
// The RAM is read with its output register (two cycles) and written in the fourth stage; an
// operation whose row is being written by one of the two before it takes that row instead
// of the RAM's (forwarding), so back-to-back operations on one QP count every event.
module hm_qp_counters #(
  // QPs (rows).
  parameter int NUM_QPS = 4096,
  // Event sources.
  parameter int NUM_SRC = 6,
  // Counters per QP.
  parameter int NUM_CNT = hm_pkg::HM_QPC_COUNT,
  // Entries of each source's event FIFO (power of two).
  parameter int EV_DEPTH = 16
) (
  input  logic                            clk,
  input  logic                            rst,

  input  logic [NUM_SRC-1:0]              s_ev_valid,
  input  logic [NUM_SRC-1:0][15:0]        s_ev_qpn,
  input  logic [NUM_SRC-1:0][NUM_CNT-1:0] s_ev_mask,

  input  logic                            s_clr_valid,
  input  logic [15:0]                     s_clr_qpn,
  output logic                            s_clr_ready,

  input  logic                            s_rd_valid,
  input  logic [15:0]                     s_rd_qpn,
  output logic                            s_rd_ready,
  output logic [NUM_CNT-1:0][31:0]        m_rd_data,
  output logic                            m_rd_valid,

  output logic [31:0]                     lost,
  output logic                            init_busy   // rows still being cleared after reset
);
  localparam int QW = $clog2(NUM_QPS);
  localparam int EW = QW + NUM_CNT;
  localparam int SW = NUM_SRC > 1 ? $clog2(NUM_SRC) : 1;

  typedef enum logic [1:0] { OP_INC, OP_ZERO, OP_READ } op_t;
  typedef struct packed {
    op_t                op;
    logic               oor;     // clear / read of a QPN beyond the table: no write, zeros read
    logic [QW-1:0]      qpn;
    logic [NUM_CNT-1:0] mask;
  } op_s;

  // ------------------------------------------------------------------ event FIFOs
  logic [NUM_SRC-1:0]         f_ready, f_valid, f_pop, in_range;
  logic [NUM_SRC-1:0][EW-1:0] f_data;
  for (genvar i = 0; i < NUM_SRC; i++) begin : g_src
    assign in_range[i] = (s_ev_qpn[i] >> QW) == '0;
    logic [$clog2(EV_DEPTH+1):0] unused_level;
    hm_fifo #(.WIDTH(EW), .DEPTH(EV_DEPTH)) u_ev (
      .clk, .rst,
      .s_data({s_ev_qpn[i][QW-1:0], s_ev_mask[i]}), .s_valid(s_ev_valid[i] && in_range[i]),
      .s_ready(f_ready[i]),
      .m_data(f_data[i]), .m_valid(f_valid[i]), .m_ready(f_pop[i]), .level(unused_level)
    );
  end

  always_ff @(posedge clk) begin
    if (rst) lost <= '0;
    else begin
      logic [31:0] n;
      n = '0;
      for (int i = 0; i < NUM_SRC; i++) n = n + 32'(s_ev_valid[i] && !(in_range[i] && f_ready[i]));
      lost <= lost + n;
    end
  end

  logic          init_q;
  logic [QW-1:0] init_idx_q;
  assign init_busy = init_q;

  // ------------------------------------------------------------------ stage A: pick
  logic          ev_any;
  logic [SW-1:0] ev_pick;
  logic          take_clr, take_rd, take_ev;
  hm_rr_pick #(.PORTS(NUM_SRC)) u_pick (
    .clk, .rst, .req(f_valid), .adv(take_ev), .any(ev_any), .pick(ev_pick)
  );
  assign take_clr    = !init_q && s_clr_valid;
  assign take_rd     = !init_q && !s_clr_valid && s_rd_valid;
  assign take_ev     = !init_q && !s_clr_valid && !s_rd_valid && ev_any;
  // during init a clear is already done: its row is zero, or will be, and no event is
  // counted before init ends
  assign s_clr_ready = init_q || take_clr;
  assign s_rd_ready  = take_rd;
  always_comb begin
    f_pop = '0;
    if (take_ev) f_pop[ev_pick] = 1'b1;
  end

  op_s a_d, a_q, b_q, c_q;
  logic a_v, b_v, c_v;
  always_comb begin
    a_d = '{op: OP_INC, oor: 1'b0, qpn: f_data[ev_pick][EW-1:NUM_CNT], mask: f_data[ev_pick][NUM_CNT-1:0]};
    if (init_q)        a_d = '{op: OP_ZERO, oor: 1'b0, qpn: init_idx_q, mask: '0};
    else if (take_clr) a_d = '{op: OP_ZERO, oor: (s_clr_qpn >> QW) != '0, qpn: s_clr_qpn[QW-1:0], mask: '0};
    else if (take_rd)  a_d = '{op: OP_READ, oor: (s_rd_qpn >> QW) != '0, qpn: s_rd_qpn[QW-1:0], mask: '0};
  end

  // ------------------------------------------------------------------ stages B, C: RAM read
  logic [NUM_CNT*32-1:0] mem [NUM_QPS];
  logic [NUM_CNT*32-1:0] ram_b, ram_c;
  logic                  wr_en;
  logic [QW-1:0]         wr_idx;
  logic [NUM_CNT*32-1:0] wr_row;
  always_ff @(posedge clk) begin
    ram_b <= mem[a_q.qpn];
    ram_c <= ram_b;
    if (wr_en) mem[wr_idx] <= wr_row;
  end

  // ------------------------------------------------------------------ stage D: add, write
  // the two writes before this one (newest first) may not be in what the RAM gave
  logic                  w1_v, w2_v;
  logic [QW-1:0]         w1_idx, w2_idx;
  logic [NUM_CNT*32-1:0] w1_row, w2_row;
  logic [NUM_CNT*32-1:0] base;
  always_comb begin
    base = ram_c;
    if (w2_v && w2_idx == c_q.qpn) base = w2_row;
    if (w1_v && w1_idx == c_q.qpn) base = w1_row;
    wr_en  = c_v && c_q.op != OP_READ && !c_q.oor;
    wr_idx = c_q.qpn;
    wr_row = '0;
    if (c_q.op == OP_INC)
      for (int k = 0; k < NUM_CNT; k++) wr_row[32*k +: 32] = base[32*k +: 32] + 32'(c_q.mask[k]);
  end

  always_ff @(posedge clk) begin
    if (rst) begin
      init_q     <= 1'b1;
      init_idx_q <= '0;
      a_v        <= 1'b0;
      b_v        <= 1'b0;
      c_v        <= 1'b0;
      w1_v       <= 1'b0;
      w2_v       <= 1'b0;
      m_rd_valid <= 1'b0;
    end else begin
      if (init_q) begin
        init_idx_q <= init_idx_q + 1'b1;
        if (32'(init_idx_q) == NUM_QPS - 1) init_q <= 1'b0;
      end
      a_v <= init_q || take_clr || take_rd || take_ev;
      b_v <= a_v;
      c_v <= b_v;
      w1_v <= wr_en;
      w2_v <= w1_v;
      m_rd_valid <= c_v && c_q.op == OP_READ;
    end
    a_q    <= a_d;
    b_q    <= a_q;
    c_q    <= b_q;
    w1_idx <= wr_idx;
    w1_row <= wr_row;
    w2_idx <= w1_idx;
    w2_row <= w1_row;
    if (c_v && c_q.op == OP_READ) m_rd_data <= c_q.oor ? '0 : base;
  end

  if (NUM_QPS < 2 || (1 << QW) != NUM_QPS || NUM_CNT < 1 || NUM_SRC < 1) begin : g_bad_param
    $error("hm_qp_counters: NUM_QPS must be a power of two, NUM_CNT and NUM_SRC at least 1");
  end
endmodule
