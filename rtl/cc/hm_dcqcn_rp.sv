// DCQCN reaction point: per-QP rate state (current rate R_C, target rate R_T, alpha, byte
// counter, increase stages, three timers) driven by received CNPs, transmitted bytes and timers,
// with one read-modify-write of one QP's entry per clock.
//
// Specification: hematite_model::dcqcn::Rp (model/src/dcqcn.rs) and docs/dcqcn.md section 5;
// checked cycle for cycle by sim/tests/dcqcn_rp.rs. Every output is registered: the operation of
// cycle t and its rate update appear in cycle t+1.
//
// Per cycle:
//   1. inputs are qualified against the state at the start of the cycle: a CNP with an
//      out-of-range QPN, and a bytes report with one, are counted (stats.bad_qpn) and ignored; a
//      bytes report of 0 bytes is ignored; one for an inactive QP is filtered (o_tx_filtered);
//   2. one operation: the head of the CNP FIFO, else the head of the bytes FIFO, else one visit
//      of the timer scan to the first active QP at or after the scan pointer (circularly);
//   3. this cycle's inputs enter the FIFOs (after the pop); a bytes report merges into the tail
//      entry when that is for the same QP and the sum stays <= min(B, 65535);
//   4. the time counter advances.
//
// Operations (details in docs/dcqcn.md 5.3): first CNP (activate: R_C = R_T = first rate or max
// rate, alpha = initial alpha, timers armed; cut unless a first rate is set), CNP (cnp_seen,
// dec_pending), bytes (byte counter; one increase event when it reaches B), timer visit (the
// earliest due of alpha / decrease / increase; ties in that order), release (back at max rate
// with alpha 0 and nothing pending: inactive, unlimited).
//
// Storage: the per-QP entries are a NUM_QPS-deep memory with one asynchronous read port for the
// operation, one for the debug port, and one write port (distributed RAM); the active bitmap,
// the FIFOs and the counters are flops. The find-next over the active bitmap is a flat priority
// encoder (fine for tens of QPs; thousands need a two-level summary, docs/dcqcn.md 10).
//
// Register inputs (cfg_*) must be in the ranges hematite_model::dcqcn::HwParams::normalized
// gives (the firmware converts and clamps them with HwParams::from_cc); the periods are capped
// here at 2^(TIME_W-2) so the wrap-safe deadline comparison always holds.
//
// Entry field layout (one memory word, LSB first):
//   [31:0] R_C  [63:32] R_T  [73:64] alpha  [74] cnp_seen  [75] dec_pending  [80:76] T stage
//   [85:81] BC stage  [109:86] byte counter  then alpha, decrease and increase deadlines.
module hm_dcqcn_rp
  import hm_pkg::*;
#(
  parameter int NUM_QPS        = 64,                  // table entries (QPNs 0..NUM_QPS-1), >= 2
  parameter int QPN_W          = 24,                  // width of the QPN ports
  parameter int TIME_W         = 32,                  // time counter width, 8..32
  parameter int CNP_FIFO_DEPTH = 2,                   // CNP FIFO entries, >= 1
  parameter int TX_FIFO_DEPTH  = 8,                   // transmitted-bytes FIFO entries, >= 1
  parameter logic [TIME_W-1:0] NOW_INIT = '0          // counter value after reset (tests)
) (
  input  logic              clk,
  input  logic              rst,                      // synchronous, active high

  // ---- registers (HwParams, normalized)
  input  logic              cfg_clamp_tgt_rate,
  input  logic              cfg_clamp_after_inc,
  input  logic [31:0]       cfg_inc_period,           // cycles
  input  logic [31:0]       cfg_alpha_period,         // cycles
  input  logic [31:0]       cfg_dec_period,           // cycles
  input  logic [23:0]       cfg_byte_reset,           // B, bytes
  input  logic [4:0]        cfg_threshold,            // F
  input  logic [31:0]       cfg_max_rate,             // rates: 2^-20 bytes per cycle
  input  logic [31:0]       cfg_ai_rate,
  input  logic [31:0]       cfg_hai_rate,
  input  logic [31:0]       cfg_min_rate,
  input  logic [31:0]       cfg_first_rate,           // 0: start at max rate and cut
  input  logic [31:0]       cfg_line_rate,            // reported for unlimited QPs
  input  logic [3:0]        cfg_gd,
  input  logic [10:0]       cfg_min_dec_q10,
  input  logic [9:0]        cfg_g,
  input  logic [9:0]        cfg_initial_alpha,

  // ---- events
  input  logic              s_cnp_valid,              // a CNP arrived for local QP s_cnp_qpn
  input  logic [QPN_W-1:0]  s_cnp_qpn,
  input  logic              s_tx_valid,               // the TX scheduler started a frame ...
  input  logic [QPN_W-1:0]  s_tx_qpn,                 // ... of this QP ...
  input  logic [15:0]       s_tx_bytes,               // ... of this many bytes (no FCS)

  // ---- rate updates toward the pacer
  output logic              m_rate_valid,
  output logic [QPN_W-1:0]  m_rate_qpn,
  output logic [31:0]       m_rate,                   // R_C, or the line rate when unlimited
  output logic              m_rate_limited,

  // ---- what the operation of the previous cycle did (for counters, traces, the model check)
  output logic [2:0]        o_op,                     // 0 idle, 1 first CNP, 2 CNP, 3 bytes,
                                                      // 4 stale bytes, 5 timer, 6 release, 7 visit
  output logic [QPN_W-1:0]  o_op_qpn,
  output logic [1:0]        o_op_timer,               // 0 alpha, 1 decrease, 2 increase
  output logic              o_op_flag,                // bytes: increase event; decrease: cut
  output logic              o_cnp_dropped,
  output logic              o_tx_dropped,
  output logic              o_tx_merged,
  output logic              o_tx_filtered,

  output hm_rp_stats_t      stats,
  output logic [TIME_W-1:0] o_now,                    // the time counter (for the pacer)

  // ---- debug read port (combinational, state after the last edge)
  input  logic [QPN_W-1:0]  dbg_qpn,
  output logic              dbg_active,
  output logic [109+3*TIME_W:0] dbg_entry,
  output logic [$clog2(NUM_QPS)-1:0] dbg_scan,
  output logic [7:0]        dbg_cnp_count,
  output logic [7:0]        dbg_tx_count
);
  localparam int IDX_W = $clog2(NUM_QPS);
  localparam int CF_W  = (CNP_FIFO_DEPTH > 1) ? $clog2(CNP_FIFO_DEPTH) : 1;
  localparam int TF_W  = (TX_FIFO_DEPTH > 1) ? $clog2(TX_FIFO_DEPTH) : 1;
  localparam logic [31:0] CAP = 32'(1) << (TIME_W - 2);
  localparam logic [31:0] RATE_MAX = 32'h7FFF_FFFF;

  localparam logic [2:0] OP_IDLE = 3'd0, OP_FIRST = 3'd1, OP_CNP = 3'd2, OP_BYTES = 3'd3,
                         OP_STALE = 3'd4, OP_TIMER = 3'd5, OP_RELEASE = 3'd6, OP_VISIT = 3'd7;
  localparam logic [1:0] TK_ALPHA = 2'd0, TK_DEC = 2'd1, TK_INC = 2'd2;

  typedef struct packed {
    logic [TIME_W-1:0] inc_dl;
    logic [TIME_W-1:0] dec_dl;
    logic [TIME_W-1:0] alpha_dl;
    logic [23:0]       byte_cnt;
    logic [4:0]        bc_stage;
    logic [4:0]        t_stage;
    logic              dec_pending;
    logic              cnp_seen;
    logic [9:0]        alpha;
    logic [31:0]       rt;
    logic [31:0]       rc;
  } entry_t;

  // ---- state
  entry_t             mem [NUM_QPS];
  logic [NUM_QPS-1:0] active_q;
  logic [TIME_W-1:0]  now_q;
  logic [IDX_W-1:0]   scan_q;
  logic [IDX_W-1:0]   cf_mem [CNP_FIFO_DEPTH];
  logic [CF_W-1:0]    cf_rd_q, cf_wr_q;
  logic [7:0]         cf_cnt_q;
  logic [IDX_W-1:0]   tf_qpn [TX_FIFO_DEPTH];
  logic [15:0]        tf_bytes [TX_FIFO_DEPTH];
  logic [TF_W-1:0]    tf_rd_q, tf_wr_q;
  logic [7:0]         tf_cnt_q;

  // ---- periods, capped
  logic [TIME_W-1:0] inc_per, alpha_per, dec_per;
  always_comb begin
    inc_per   = TIME_W'((cfg_inc_period   > CAP) ? CAP : cfg_inc_period);
    alpha_per = TIME_W'((cfg_alpha_period > CAP) ? CAP : cfg_alpha_period);
    dec_per   = TIME_W'((cfg_dec_period   > CAP) ? CAP : cfg_dec_period);
  end

  function automatic logic [CF_W-1:0] cf_inc(input logic [CF_W-1:0] p);
    return (32'(p) == CNP_FIFO_DEPTH - 1) ? '0 : p + 1'b1;
  endfunction
  function automatic logic [TF_W-1:0] tf_inc(input logic [TF_W-1:0] p);
    return (32'(p) == TX_FIFO_DEPTH - 1) ? '0 : p + 1'b1;
  endfunction
  function automatic logic [TF_W-1:0] tf_dec(input logic [TF_W-1:0] p);
    return (p == '0) ? TF_W'(TX_FIFO_DEPTH - 1) : p - 1'b1;
  endfunction
  // deadline d has been reached: (now - d) mod 2^TIME_W < 2^(TIME_W-1)
  function automatic logic due(input logic [TIME_W-1:0] now, input logic [TIME_W-1:0] d);
    logic [TIME_W-1:0] a;
    a = now - d;
    return !a[TIME_W-1];
  endfunction

  // ---- 1. input qualification
  logic tx_in, tx_filt, cnp_in;
  logic [1:0] bad_inc;
  always_comb begin
    tx_in   = 1'b0;
    tx_filt = 1'b0;
    cnp_in  = 1'b0;
    bad_inc = 2'd0;
    if (s_tx_valid) begin
      if (s_tx_qpn >= QPN_W'(NUM_QPS))      bad_inc = bad_inc + 2'd1;
      else if (s_tx_bytes != 16'd0) begin
        if (active_q[s_tx_qpn[IDX_W-1:0]])  tx_in   = 1'b1;
        else                                tx_filt = 1'b1;
      end
    end
    if (s_cnp_valid) begin
      if (s_cnp_qpn >= QPN_W'(NUM_QPS))     bad_inc = bad_inc + 2'd1;
      else                                  cnp_in  = 1'b1;
    end
  end

  // ---- find-next over the active bitmap, circularly from the scan pointer
  logic             scan_hit;
  logic [IDX_W-1:0] scan_idx;
  always_comb begin
    logic hit_hi;
    logic [IDX_W-1:0] idx_hi, idx_lo;
    hit_hi   = 1'b0;
    scan_hit = 1'b0;
    idx_hi   = '0;
    idx_lo   = '0;
    for (int i = NUM_QPS - 1; i >= 0; i--) begin
      if (active_q[i]) begin
        scan_hit = 1'b1;
        idx_lo   = IDX_W'(i);
        if (IDX_W'(i) >= scan_q) begin
          hit_hi = 1'b1;
          idx_hi = IDX_W'(i);
        end
      end
    end
    scan_idx = hit_hi ? idx_hi : idx_lo;
  end

  // ---- 2. operation select and entry read
  logic             do_cnp, do_bytes, do_scan;
  logic [IDX_W-1:0] op_idx;
  logic [15:0]      op_bytes;
  entry_t           rd;
  logic             rd_active;
  always_comb begin
    do_cnp   = cf_cnt_q != 8'd0;
    do_bytes = !do_cnp && tf_cnt_q != 8'd0;
    do_scan  = !do_cnp && !do_bytes && scan_hit;
    op_idx   = do_cnp ? cf_mem[cf_rd_q] : do_bytes ? tf_qpn[tf_rd_q] : scan_idx;
    op_bytes = tf_bytes[tf_rd_q];
    rd       = mem[op_idx];
    rd_active = active_q[op_idx];
  end

  // ---- operand preparation: the fresh entry of a first CNP, the due timer of a scan visit,
  // the byte counter sum, and the operands of the shared cut and increase units
  entry_t            fresh;
  logic              any_due;
  logic [1:0]        kind;
  logic [TIME_W-1:0] d_pick;
  logic [24:0]       sum;
  logic [23:0]       rem;
  entry_t            cut_in, inc_in;
  logic              inc_timer;
  always_comb begin
    logic [TIME_W-1:0] a_age, d_age, i_age, best_age;
    logic a_due, d_due, i_due;
    logic [31:0] r0;
    r0 = (cfg_first_rate != 32'd0) ? cfg_first_rate : cfg_max_rate;
    fresh = '0;
    fresh.rc       = r0;
    fresh.rt       = r0;
    fresh.alpha    = cfg_initial_alpha;
    fresh.alpha_dl = now_q + alpha_per;
    fresh.dec_dl   = now_q + dec_per;
    fresh.inc_dl   = now_q + inc_per;

    // earliest due deadline of the entry read; ties in the order alpha, decrease, increase
    a_age = now_q - rd.alpha_dl;
    d_age = now_q - rd.dec_dl;
    i_age = now_q - rd.inc_dl;
    a_due = due(now_q, rd.alpha_dl);
    d_due = due(now_q, rd.dec_dl);
    i_due = due(now_q, rd.inc_dl);
    any_due  = 1'b0;
    kind     = TK_ALPHA;
    best_age = '0;
    d_pick   = rd.alpha_dl;
    if (a_due) begin
      any_due = 1'b1; kind = TK_ALPHA; best_age = a_age; d_pick = rd.alpha_dl;
    end
    if (d_due && (!any_due || d_age > best_age)) begin
      any_due = 1'b1; kind = TK_DEC; best_age = d_age; d_pick = rd.dec_dl;
    end
    if (i_due && (!any_due || i_age > best_age)) begin
      any_due = 1'b1; kind = TK_INC; d_pick = rd.inc_dl;
    end

    // byte counter: one event when the sum reaches B, remainder kept below B
    sum = 25'(rd.byte_cnt) + 25'(op_bytes);
    rem = ((sum - 25'(cfg_byte_reset)) < 25'(cfg_byte_reset - 24'd1)) ? 24'(sum - 25'(cfg_byte_reset))
                                                                      : cfg_byte_reset - 24'd1;

    cut_in = do_cnp ? fresh : rd;
    inc_in = rd;
    if (do_bytes) inc_in.byte_cnt = rem;
    inc_timer = !do_bytes;
  end

  // ---- shared arithmetic: one cut and one increase per cycle
  // Cut: clamp R_T, then R_C = max(R_C - (R_C*alpha >> gd), R_C*min_dec_q10 >> 10, min rate).
  entry_t cut_out;
  always_comb begin
    logic [41:0] red;
    logic [31:0] a, b, n, hi;
    cut_out = cut_in;
    if (cfg_clamp_tgt_rate || cut_in.bc_stage != 5'd0 || (cfg_clamp_after_inc && cut_in.t_stage != 5'd0))
      cut_out.rt = cut_in.rc;
    red = (42'(cut_in.rc) * 42'(cut_in.alpha)) >> cfg_gd;
    a   = (42'(cut_in.rc) > red) ? cut_in.rc - red[31:0] : 32'd0;
    b   = 32'((43'(cut_in.rc) * 43'(cfg_min_dec_q10)) >> 10);  // <= R_C: min_dec_q10 <= 1024
    n   = (a > b) ? a : b;
    n   = (n > cfg_min_rate) ? n : cfg_min_rate;
    n   = (n > RATE_MAX) ? RATE_MAX : n;
    cut_out.rc = n;
    hi = (cfg_max_rate > n) ? cfg_max_rate : n;
    if (cut_out.rt < n)       cut_out.rt = n;
    else if (cut_out.rt > hi) cut_out.rt = hi;
    cut_out.t_stage     = 5'd0;
    cut_out.bc_stage    = 5'd0;
    cut_out.byte_cnt    = 24'd0;
    cut_out.dec_pending = 1'b0;
  end

  // Increase event (timer or byte counter): stage += 1 (saturating at 31); fast recovery while
  // max(T, BC) <= F, hyper increase by (min - F) * R_HAI when min(T, BC) > F, else R_AI; R_T
  // clamped to the max rate; R_C = ceil((R_T + R_C) / 2).
  entry_t inc_out;
  always_comb begin
    logic [4:0]  lo, hi;
    logic [36:0] step;
    logic [37:0] rt;
    logic [32:0] rc;
    inc_out = inc_in;
    if (inc_timer) inc_out.t_stage  = (inc_in.t_stage  == 5'd31) ? 5'd31 : inc_in.t_stage + 5'd1;
    else           inc_out.bc_stage = (inc_in.bc_stage == 5'd31) ? 5'd31 : inc_in.bc_stage + 5'd1;
    lo = (inc_out.t_stage < inc_out.bc_stage) ? inc_out.t_stage : inc_out.bc_stage;
    hi = (inc_out.t_stage < inc_out.bc_stage) ? inc_out.bc_stage : inc_out.t_stage;
    if (lo > cfg_threshold)      step = 37'(5'(lo - cfg_threshold)) * 37'(cfg_hai_rate);
    else if (hi > cfg_threshold) step = 37'(cfg_ai_rate);
    else                         step = 37'd0;
    rt = 38'(inc_in.rt) + 38'(step);
    if (rt > 38'(cfg_max_rate)) rt = 38'(cfg_max_rate);
    rc = (33'(rt[31:0]) + 33'(inc_in.rc) + 33'd1) >> 1;
    if (rc > 33'(rt[31:0])) rc = 33'(rt[31:0]);
    inc_out.rt = rt[31:0];
    inc_out.rc = rc[31:0];
  end

  // a fired timer's next deadline: one period after the one picked (d_pick), or one period
  // from now when that has passed too (late: the missed periods are skipped and counted)
  function automatic logic late(input logic [TIME_W-1:0] per);
    return due(now_q, d_pick + per);
  endfunction
  function automatic logic [TIME_W-1:0] next_dl(input logic [TIME_W-1:0] per);
    return late(per) ? now_q + per : d_pick + per;
  endfunction

  // ---- the operation
  entry_t      wr;
  logic        wr_en, set_act, clr_act, skipped;
  logic [2:0]  op;
  logic [1:0]  op_timer;
  logic        op_flag, rate_upd, rate_lim, did_cut, did_inc;
  logic [31:0] rate_val;
  always_comb begin
    wr        = rd;
    wr_en     = 1'b0;
    set_act   = 1'b0;
    clr_act   = 1'b0;
    skipped   = 1'b0;
    op        = OP_IDLE;
    op_timer  = TK_ALPHA;
    op_flag   = 1'b0;
    rate_upd  = 1'b0;
    rate_lim  = 1'b1;
    rate_val  = 32'd0;
    did_cut   = 1'b0;
    did_inc   = 1'b0;

    if (do_cnp) begin
      if (rd_active) begin
        op              = OP_CNP;
        wr.cnp_seen     = 1'b1;
        wr.dec_pending  = 1'b1;
        wr_en           = 1'b1;
      end else begin
        op       = OP_FIRST;
        did_cut  = cfg_first_rate == 32'd0;
        wr       = did_cut ? cut_out : fresh;
        wr_en    = 1'b1;
        set_act  = 1'b1;
        rate_upd = 1'b1;
        rate_val = wr.rc;
      end
    end else if (do_bytes) begin
      if (!rd_active) begin
        op = OP_STALE;
      end else begin
        op    = OP_BYTES;
        wr_en = 1'b1;
        if (sum >= 25'(cfg_byte_reset)) begin
          op_flag        = 1'b1;
          did_inc        = 1'b1;
          wr             = inc_out;
        end else begin
          wr.byte_cnt = sum[23:0];
        end
        rate_upd = wr.rc != rd.rc;
        rate_val = wr.rc;
      end
    end else if (do_scan) begin
      if (!any_due) begin
        if (rd.rc == cfg_max_rate && rd.rt == cfg_max_rate && rd.alpha == 10'd0 && !rd.cnp_seen && !rd.dec_pending) begin
          op       = OP_RELEASE;
          clr_act  = 1'b1;
          rate_upd = 1'b1;
          rate_lim = 1'b0;
          rate_val = cfg_line_rate;
        end else begin
          op = OP_VISIT;
        end
      end else begin
        op       = OP_TIMER;
        op_timer = kind;
        wr_en    = 1'b1;
        unique case (kind)
          TK_ALPHA: begin
            logic [9:0]  prod_hi;
            logic [10:0] na;
            prod_hi = 10'((20'(rd.alpha) * 20'(cfg_g)) >> 10);
            na   = 11'(prod_hi) + (rd.cnp_seen ? 11'd1024 - 11'(cfg_g) : 11'd0);
            wr.alpha    = (na > 11'd1023) ? 10'd1023 : na[9:0];
            wr.cnp_seen = 1'b0;
            wr.alpha_dl = next_dl(alpha_per);
            skipped = skipped | late(alpha_per);
          end
          TK_DEC: begin
            op_flag = rd.dec_pending;
            if (rd.dec_pending) begin
              did_cut  = 1'b1;
              wr       = cut_out;
              wr.inc_dl = next_dl(inc_per);
              skipped = skipped | late(inc_per);
            end
            wr.dec_dl = next_dl(dec_per);
            skipped = skipped | late(dec_per);
          end
          default: begin
            did_inc   = 1'b1;
            wr        = inc_out;
            wr.inc_dl = next_dl(inc_per);
            skipped = skipped | late(inc_per);
          end
        endcase
        rate_upd = wr.rc != rd.rc;
        rate_val = wr.rc;
      end
    end
  end

  // ---- 3. FIFO pushes (after the pop)
  logic       cf_push, cf_drop, tf_push, tf_merge, tf_drop;
  logic [7:0] cf_left, tf_left;
  logic [15:0] merge_cap;
  logic [16:0] merge_sum;
  logic [TF_W-1:0] tf_tail;
  always_comb begin
    cf_left   = cf_cnt_q - {7'd0, do_cnp};
    tf_left   = tf_cnt_q - {7'd0, do_bytes};
    merge_cap = (cfg_byte_reset < 24'hFFFF) ? cfg_byte_reset[15:0] : 16'hFFFF;
    tf_tail   = tf_dec(tf_wr_q);
    merge_sum = 17'(tf_bytes[tf_tail]) + 17'(s_tx_bytes);
    cf_push   = cnp_in && 32'(cf_left) < CNP_FIFO_DEPTH;
    cf_drop   = cnp_in && !cf_push;
    tf_merge  = tx_in && tf_left != 8'd0 && tf_qpn[tf_tail] == s_tx_qpn[IDX_W-1:0] &&
                merge_sum <= 17'(merge_cap);
    tf_push   = tx_in && !tf_merge && 32'(tf_left) < TX_FIFO_DEPTH;
    tf_drop   = tx_in && !tf_merge && !tf_push;
  end

  // ---- state update
  always_ff @(posedge clk) begin
    if (wr_en) mem[op_idx] <= wr;
    if (cf_push) cf_mem[cf_wr_q] <= s_cnp_qpn[IDX_W-1:0];
    if (tf_push) begin
      tf_qpn[tf_wr_q]   <= s_tx_qpn[IDX_W-1:0];
      tf_bytes[tf_wr_q] <= s_tx_bytes;
    end
    if (tf_merge) tf_bytes[tf_tail] <= merge_sum[15:0];
  end

  always_ff @(posedge clk) begin
    if (rst) begin
      active_q         <= '0;
      now_q            <= NOW_INIT;
      scan_q           <= '0;
      cf_rd_q          <= '0;
      cf_wr_q          <= '0;
      cf_cnt_q         <= 8'd0;
      tf_rd_q          <= '0;
      tf_wr_q          <= '0;
      tf_cnt_q         <= 8'd0;
      m_rate_valid     <= 1'b0;
      m_rate_qpn       <= '0;
      m_rate           <= 32'd0;
      m_rate_limited   <= 1'b0;
      o_op             <= OP_IDLE;
      o_op_qpn         <= '0;
      o_op_timer       <= TK_ALPHA;
      o_op_flag        <= 1'b0;
      o_cnp_dropped    <= 1'b0;
      o_tx_dropped     <= 1'b0;
      o_tx_merged      <= 1'b0;
      o_tx_filtered    <= 1'b0;
      stats <= '0;
    end else begin
      now_q <= now_q + 1'b1;
      if (set_act) active_q[op_idx] <= 1'b1;
      if (clr_act) active_q[op_idx] <= 1'b0;
      if (do_scan) scan_q <= (32'(scan_idx) == NUM_QPS - 1) ? '0 : scan_idx + 1'b1;
      if (do_cnp)  cf_rd_q <= cf_inc(cf_rd_q);
      if (cf_push) cf_wr_q <= cf_inc(cf_wr_q);
      cf_cnt_q <= cf_left + {7'd0, cf_push};
      if (do_bytes) tf_rd_q <= tf_inc(tf_rd_q);
      if (tf_push)  tf_wr_q <= tf_inc(tf_wr_q);
      tf_cnt_q <= tf_left + {7'd0, tf_push};

      m_rate_valid   <= rate_upd;
      m_rate_qpn     <= QPN_W'(op_idx);
      m_rate         <= rate_val;
      m_rate_limited <= rate_lim;
      o_op           <= op;
      o_op_qpn       <= QPN_W'(op_idx);
      o_op_timer     <= op_timer;
      o_op_flag      <= op_flag;
      o_cnp_dropped  <= cf_drop;
      o_tx_dropped   <= tf_drop;
      o_tx_merged    <= tf_merge;
      o_tx_filtered  <= tx_filt;
      if (cf_drop)  stats.cnp_dropped <= stats.cnp_dropped + 1'b1;
      if (tf_drop)  stats.tx_dropped  <= stats.tx_dropped + 1'b1;
      if (tf_merge) stats.tx_merged   <= stats.tx_merged + 1'b1;
      stats.bad_qpn <= stats.bad_qpn + 32'(bad_inc);
      if (set_act)  stats.activations <= stats.activations + 1'b1;
      if (clr_act)  stats.releases    <= stats.releases + 1'b1;
      if (did_cut)  stats.cuts        <= stats.cuts + 1'b1;
      if (did_inc)  stats.increases   <= stats.increases + 1'b1;
      if (skipped)  stats.timer_skips <= stats.timer_skips + 1'b1;
    end
  end

  assign o_now         = now_q;
  assign dbg_active    = (dbg_qpn < QPN_W'(NUM_QPS)) && active_q[dbg_qpn[IDX_W-1:0]];
  assign dbg_entry     = mem[dbg_qpn[IDX_W-1:0]];
  assign dbg_scan      = scan_q;
  assign dbg_cnp_count = cf_cnt_q;
  assign dbg_tx_count  = tf_cnt_q;
endmodule
