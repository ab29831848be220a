// The shell's DMA bridge: the engine's AXI4 master (hm_rc_engine's m_axi_*) to the UltraScale+
// PCIe block's requester interfaces, RQ (requests out) and RC (completions in), 512 bits,
// DWORD-aligned mode, no straddling, client tags. It runs in the block's user clock, which is
// also the core clock.
//
// Reads. An AR burst (64-byte beats, INCR, inside one 4 KiB page; what hm_dma_rd issues) gets a
// place in the reorder buffer (ROB, ROB_BEATS beats of block RAM) and is cut into memory read
// requests of at most the negotiated max read request size (cfg_max_read_req), each with a tag
// of its own (TAGS of them, tag values 0..TAGS-1, so extended tags are not needed). Completions
// may arrive split at any 64-byte boundary and in any order between tags; each is written at
// its place in the ROB (the payload realigned from DWORD 3 of the stream), and a burst's beats
// go out on R, in the order the bursts were accepted, once every one of its requests is
// complete. A burst is answered SLVERR on every beat, with zeros for data (the engine's DMA
// error: an error CQE), when:
//   - a completion reports an error (completion status, poisoned, the block's error code,
//     including its own completion timeout): the tag is free again once the completion says
//     the request is over (an error status does), else retired;
//   - a completion is malformed (not 64-byte aligned, a length that is not whole beats or runs
//     past its request, fewer beats than its length): its data is not written, and the tag is
//     retired, since more may still come for it;
//   - a request is not completed in time: a tag that sees no completion for 2 to 3 periods of
//     TIMEOUT_TICK clocks times out; its tag is retired (never used again until reset), so a
//     late completion can only be dropped and counted, never taken for a later request;
//   - the burst itself is not one the bridge carries (size other than 64 bytes, not INCR,
//     crossing 4 KiB), bus mastering is disabled, or every tag is retired: no request is sent
//     (a request already waiting for RQ when bus mastering is disabled still goes; the block
//     drops it, and it times out).
// As in AXI, an address that is not a multiple of 64 reads from the start of its beat (the
// bytes before it in the same 64-byte block are read too; hm_dma_rd's addresses are aligned).
// Completions for tags that are not in flight are dropped and counted (stat_cpl_unexpected).
// The bridge never back-pressures RC: a completion's place was reserved with its request.
//
// Writes. An AW burst (64-byte beats, INCR, inside one 4 KiB page; its start address aligned
// down to the beat, the strobes say which bytes) is cut at max payload size (cfg_max_payload)
// boundaries into memory writes covering the enabled bytes (first and last DWORD byte enables from the strobes; the
// strobes of a burst must be contiguous, as hm_dma_wr's are: DWORDs between the first and last
// enabled byte are written whole). The beats of one write are collected before its header goes
// out (the header carries the length), so a write never stalls mid-TLP for want of data. B
// answers a burst once the last beat of its last write is in the RQ output register (writes
// are posted: every request after that, a read that depends on the write included, goes out
// behind it, and PCIe keeps them in that order); SLVERR, with nothing written, for a burst the
// bridge does not carry or when bus mastering is disabled at its first beat (a burst is
// refused or written as a whole).
//
// Read requests and writes share RQ, alternating between the two at TLP boundaries.
module hm_pcie_dma #(
  parameter int ID_W        = 4,        // AXI ID bits
  parameter int TAGS        = 32,       // read tags (<= 32: tag values fit 5 bits)
  parameter int BURSTS      = 16,       // AR bursts in the bridge at once (power of two)
  parameter int ROB_BEATS   = 512,      // reorder buffer, 64-byte beats (power of two, >= 64);
                                        // at most this much read data is outstanding; the
                                        // block's completion buffer (2,048 credits of 16 bytes
                                        // and 256 headers in cocotbext-pcie's model of it)
                                        // holds less as small completions, but RC is never
                                        // held back, so completions leave it as they arrive;
                                        // 32 KiB keeps reads at the interface's rate with a
                                        // 1.6 us latency (tests/shell/bench_pcie_dma.py)
  parameter int W_DEPTH     = 32,       // write beats buffered (power of two, >= 20)
  parameter int TIMEOUT_TICK = 65536,   // clocks per completion-timeout tick
  parameter int CNT_W       = 32,       // counter width
  // (derived)
  parameter int TW          = $clog2(TAGS),
  parameter int BW          = $clog2(BURSTS),
  parameter int RW          = $clog2(ROB_BEATS)
) (
  input  logic              clk,
  input  logic              rst,

  // ---- AXI4 slave (the engine's DMA master), 512-bit
  input  logic [ID_W-1:0]   s_axi_arid,
  input  logic [63:0]       s_axi_araddr,
  input  logic [7:0]        s_axi_arlen,
  input  logic [2:0]        s_axi_arsize,
  input  logic [1:0]        s_axi_arburst,
  input  logic              s_axi_arvalid,
  output logic              s_axi_arready,
  output logic [ID_W-1:0]   s_axi_rid,
  output logic [511:0]      s_axi_rdata,
  output logic [1:0]        s_axi_rresp,
  output logic              s_axi_rlast,
  output logic              s_axi_rvalid,
  input  logic              s_axi_rready,
  input  logic [ID_W-1:0]   s_axi_awid,
  input  logic [63:0]       s_axi_awaddr,
  input  logic [7:0]        s_axi_awlen,
  input  logic [2:0]        s_axi_awsize,
  input  logic [1:0]        s_axi_awburst,
  input  logic              s_axi_awvalid,
  output logic              s_axi_awready,
  input  logic [511:0]      s_axi_wdata,
  input  logic [63:0]       s_axi_wstrb,
  input  logic              s_axi_wlast,
  input  logic              s_axi_wvalid,
  output logic              s_axi_wready,
  output logic [ID_W-1:0]   s_axi_bid,
  output logic [1:0]        s_axi_bresp,
  output logic              s_axi_bvalid,
  input  logic              s_axi_bready,

  // ---- requester request (to the block)
  output logic [511:0]      m_axis_rq_tdata,
  output logic [15:0]       m_axis_rq_tkeep,
  output logic              m_axis_rq_tlast,
  output logic [136:0]      m_axis_rq_tuser,
  output logic              m_axis_rq_tvalid,
  input  logic              m_axis_rq_tready,

  // ---- requester completion (from the block)
  input  logic [511:0]      s_axis_rc_tdata,
  input  logic [15:0]       s_axis_rc_tkeep,
  input  logic              s_axis_rc_tlast,
  input  logic [160:0]      s_axis_rc_tuser,
  input  logic              s_axis_rc_tvalid,
  output logic              s_axis_rc_tready,   // always 1

  // ---- the block's configuration status
  input  logic [1:0]        cfg_max_payload,    // 0: 128 B .. 3: 1024 B
  input  logic [2:0]        cfg_max_read_req,   // 0: 128 B .. 5: 4096 B
  input  logic              cfg_bus_master_en,  // Bus Master Enable of the function

  // ---- counters
  output logic [CNT_W-1:0]  stat_rd_req,        // memory read requests sent
  output logic [CNT_W-1:0]  stat_wr_req,        // memory writes sent
  output logic [CNT_W-1:0]  stat_cpl,           // completions taken
  output logic [CNT_W-1:0]  stat_cpl_err,       // completions with an error or malformed
  output logic [CNT_W-1:0]  stat_cpl_unexpected,// completions for no tag in flight (dropped)
  output logic [CNT_W-1:0]  stat_timeout,       // read requests timed out
  output logic [CNT_W-1:0]  stat_bad_burst,     // AXI bursts refused (SLVERR, nothing sent)
  output logic [TW:0]       tags_retired,       // tags out of use until reset
  input  logic              rq_hold,            // start no TLP on RQ (one part way is finished)
  output logic              rq_between          // RQ is between TLPs (nothing offered, none part
                                                // way): with rq_hold, a reset then cuts no TLP
);
  localparam logic [1:0] RESP_OK = 2'b00, RESP_SLVERR = 2'b10;

  // tuser of an RQ beat (no straddling: TLP 0 only; no parity, no sequence numbers)
  function automatic logic [136:0] rq_user(input logic [3:0] fbe, input logic [3:0] lbe,
                                           input logic sop, input logic eop,
                                           input logic [3:0] eop_ptr);
    logic [136:0] u;
    u = '0;
    u[3:0]   = fbe;      // first_be
    u[11:8]  = lbe;      // last_be
    u[20]    = sop;      // is_sop[0] (pointer 0)
    u[26]    = eop;      // is_eop[0]
    u[31:28] = eop_ptr;  // is_eop0_ptr: the last DWORD
    return u;
  endfunction

  // a memory request descriptor (DWORD-aligned mode): address, DWORD count, request type
  // (0: read, 1: write), tag; requester ID from the block (requester ID enable 0), TC 0,
  // attributes 0
  function automatic logic [127:0] rq_desc(input logic [63:0] addr, input logic [10:0] ndw,
                                           input logic [3:0] rtype, input logic [7:0] tag);
    logic unused_lo;
    unused_lo = ^addr[1:0];
    return {1'b0, 3'b000, 3'b000, 1'b0, 16'h0000, tag, 16'h0000, 1'b0, rtype, ndw,
            addr[63:2], 2'b00};
  endfunction

  // RQ arbitration (below), used by both sides
  logic            rq_take_r, wo_take, rq_free;

  // index of the lowest set bit of a tag vector (0 when none): the bit isolated by x & -x (a
  // carry chain), then each index bit an OR of the one-hot bits that have it set
  function automatic logic [TW-1:0] lowest_tag(input logic [TAGS-1:0] x);
    logic [TAGS-1:0] oh;
    logic [TW-1:0]   idx;
    oh  = x & (~x + 1'b1);
    idx = '0;
    for (int i = 0; i < TAGS; i++) idx = idx | (oh[i] ? TW'(i) : '0);
    return idx;
  endfunction

  // lowest and highest set bit of each byte of a 64-bit vector, and whether it has any
  function automatic logic [55:0] groups64(input logic [63:0] x);
    logic [7:0]  any;
    logic [23:0] lo, hi;
    for (int k = 0; k < 8; k++) begin
      any[k] = |x[8*k +: 8];
      lo[3*k +: 3] = '0;
      hi[3*k +: 3] = '0;
      for (int i = 7; i >= 0; i--) if (x[8*k + i]) lo[3*k +: 3] = 3'(i);
      for (int i = 0; i < 8; i++) if (x[8*k + i]) hi[3*k +: 3] = 3'(i);
    end
    return {any, lo, hi};
  endfunction

  // ================================================================ read side
  // ---- bursts: a ring, allocated at b_head, answered from b_tail
  logic [ID_W-1:0] b_id_q     [BURSTS];
  logic [RW-1:0]   b_start_q  [BURSTS];   // first ROB beat
  logic [8:0]      b_nbeats_q [BURSTS];   // beats on R
  logic [6:0]      b_robn_q   [BURSTS];   // ROB beats it holds (0 for a refused burst)
  logic [BURSTS-1:0] b_err_q, b_issued_q;
  logic [TW:0]     b_outst_q  [BURSTS];   // requests in flight
  logic [BW:0]     b_head_q, b_tail_q;
  logic [RW:0]     rob_wp_q, rob_rp_q;

  // ---- tags
  logic [TAGS-1:0] t_act_q, t_ret_q;
  logic [BW-1:0]   t_burst_q [TAGS];
  logic [RW-1:0]   t_rob_q   [TAGS];      // ROB beat of the request's first byte
  logic [5:0]      t_alo_q   [TAGS];      // address bits [11:6] of the request
  logic [6:0]      t_nb_q    [TAGS];      // beats requested
  logic [6:0]      t_left_q  [TAGS];      // beats not yet completed
  logic [1:0]      t_age_q   [TAGS];

  // ---- issue state (one burst cut into requests at a time)
  logic            iss_q;
  logic [BW-1:0]   iss_b_q;
  logic [63:0]     iss_addr_q;
  logic [12:0]     iss_left_q;            // bytes
  logic [RW-1:0]   iss_rob_q;
  logic            iss_ev_q, iss_ev_last_q; // a request issued last clock (its burst's last)
  logic [BW-1:0]   iss_ev_b_q;

  // read request register (one beat on RQ)
  logic            rr_valid_q;
  logic [127:0]    rr_desc_q;

  // ---- AR acceptance
  // (room for a burst of 64 beats and a burst entry: registered, so not used the clock after
  // a burst is taken)
  logic            ar_room_q, ar_took_q;
  logic            ar_fire, ar_bad;
  assign s_axi_arready = !rst && !iss_q && ar_room_q && !ar_took_q;
  assign ar_fire  = s_axi_arvalid && s_axi_arready;
  assign ar_bad   = s_axi_arsize != 3'd6 || s_axi_arburst != 2'b01 ||
                    9'(s_axi_araddr[11:6]) + 9'(s_axi_arlen) > 9'd63 || !cfg_bus_master_en;

  // ---- request cutting. The free tag is picked a clock ahead (nf_q, from the tags free a
  // clock ago): only a request issued last clock can have taken it (a tag is only ever taken
  // by an issue), and none was: an issue fills the request register (rr_valid_q), which RQ
  // empties a clock later at the earliest.
  logic [12:0]     mrrs, chunk;
  logic [TAGS-1:0] t_usable;
  logic [TW-1:0]   nf_q;
  logic            nf_v_q, all_ret_q;
  logic            iss_fire, iss_abort;
  assign mrrs = cfg_max_read_req > 3'd5 ? 13'd4096 : 13'd128 << cfg_max_read_req;
  assign chunk = iss_left_q < mrrs ? iss_left_q : mrrs;
  assign t_usable = ~t_act_q & ~t_ret_q;
  assign iss_abort = iss_q && (all_ret_q || !cfg_bus_master_en);
  assign iss_fire  = iss_q && !iss_abort && nf_v_q && !rr_valid_q;

  // ---- completions: two registered stages. Stage A looks the tag up; stage B checks the
  // completion and writes its data into the ROB.
  logic [511:0]    ra_d_q, rb_d_q;
  logic            ra_v_q, ra_last_q, ra_disc_q, ra_in_q;
  logic            rb_v_q, rb_last_q, rb_disc_q, rb_sop_q;
  logic            sop_a;
  logic [511:0]    rb_prev_q;
  always_ff @(posedge clk) begin
    ra_d_q    <= s_axis_rc_tdata;
    ra_last_q <= s_axis_rc_tlast;
    ra_disc_q <= s_axis_rc_tuser[96];   // discontinue: the block found the TLP corrupt
    ra_v_q    <= !rst && s_axis_rc_tvalid;
    rb_d_q    <= ra_d_q;
    rb_last_q <= ra_last_q;
    rb_disc_q <= ra_disc_q;
    rb_v_q    <= !rst && ra_v_q;
    rb_sop_q  <= sop_a;
  end
  assign s_axis_rc_tready = 1'b1;
  assign sop_a = ra_v_q && !ra_in_q;

  // the tag's entry, read in stage A (the beats left forwarded from a completion of the same
  // tag ending in stage B now)
  logic [RW-1:0]   lk_rob_q;
  logic            lk_act_q;              // in flight (and not finished by the finish applied now)
  logic [BW-1:0]   lk_b_q;
  logic [5:0]      lk_off_q;              // beats from the request's start to the completion's
  logic            lk_tagok_q;            // a tag value the bridge uses
  logic [6:0]      lk_nb_q, lk_left_q;
  logic [TW-1:0]   a_slot;
  assign a_slot = ra_d_q[64 +: TW];

  // the descriptor of a first beat, in stage B
  logic [5:0]      c_lo;                  // (bits 11:6: in stage A, lk_off_q)
  logic [3:0]      c_ec;
  logic            c_rc;                  // request completed
  logic [10:0]     c_dw;
  logic [2:0]      c_st;
  logic            c_ep;
  logic [TW-1:0]   c_tag;                 // (all 8 bits: in stage A, lk_tagok_q)
  logic [TW-1:0]   c_slot;
  logic            c_known, c_fail, c_bad;
  logic [5:0]      c_off;
  logic [6:0]      c_n;
  // the finish registered last clock (applied at the end of this one)
  logic            fin_v_q, fin_err_q, fin_ret_q, fin_to_q;
  logic [TW-1:0]   fin_slot_q;
  logic [BW-1:0]   fin_b_q;
  assign c_lo  = rb_d_q[5:0];
  assign c_ec  = rb_d_q[15:12];
  assign c_rc  = rb_d_q[30];
  assign c_dw  = rb_d_q[42:32];
  assign c_st  = rb_d_q[45:43];
  assign c_ep  = rb_d_q[46];
  assign c_tag = rb_d_q[64 +: TW];
  assign c_slot = c_tag[TW-1:0];
  // (a tag in flight, not finished by last clock's event)
  assign c_known = lk_tagok_q && lk_act_q && !(fin_v_q && fin_slot_q == c_slot);
  assign c_fail  = c_ec != 4'd0 || c_st != 3'd0 || c_ep;
  assign c_off   = lk_off_q;
  assign c_n     = c_dw[10:4];
  assign c_bad   = c_lo != '0 || c_dw[3:0] != '0 || c_dw == '0 || c_dw[10] ||
                   8'(c_off) + 8'(c_n) > 8'(lk_nb_q);

  // the completion in progress (stage B)
  logic            cur_ok_q, cur_keep_q; // writing its data; a tag to finish at its end
  logic            cur_err_q, cur_ret_q, cur_done_q;
  logic [TW-1:0]   cur_slot_q;
  logic [RW-1:0]   cur_wa_q;
  logic [6:0]      cur_rem_q, cur_left_q; // beats still to write; the tag's beats left after it
  logic            cur_remz_q, cur_rem1_q;
  logic            cur_live, cur_live_q;  // its tag still in flight
  logic [BW-1:0]   cur_b_q;
  logic            sop, rc_end;
  assign sop      = rb_v_q && rb_sop_q;
  assign rc_end   = rb_v_q && rb_last_q;
  assign cur_live = cur_live_q && !(fin_v_q && fin_slot_q == cur_slot_q);

  // ROB
  logic [511:0]    rob [ROB_BEATS];
  logic            rob_we;
  logic [RW-1:0]   rob_wa, rob_ra;
  logic [511:0]    rob_wd, rob_rd_q;
  logic            rob_re;
  // (a tag timed out meanwhile writes no more: its burst may already be gone)
  assign rob_we = rb_v_q && !rb_sop_q && cur_ok_q && !cur_remz_q && cur_live;
  assign rob_wa = cur_wa_q;
  assign rob_wd = {rb_d_q[95:0], rb_prev_q[511:96]};
  always_ff @(posedge clk) begin
    if (rob_we) rob[rob_wa] <= rob_wd;
    if (rob_re) rob_rd_q <= rob[rob_ra];
  end

  // A tag finishing: decided now, applied through fin_*_q. From a completion's last beat
  // (done or failed), else from a timeout.
  logic            fin_d, fin_err_d, fin_ret_d, fin_to_d;
  logic [TW-1:0]   fin_slot_d;
  logic [BW-1:0]   fin_b_d;
  logic            rc_fin;
  // (the state of the completion ending now: from its first beat when it is one beat long;
  // a completion with data is at least two beats, so a one-beat one is short)
  logic            e_keep, e_ok, e_err, e_ret, e_short;
  logic [TW-1:0]   e_slot;
  logic [BW-1:0]   e_b;
  always_comb begin
    if (sop) begin
      e_keep = c_known;
      e_ok   = c_known && !c_fail && !c_bad;
      e_err  = c_fail || c_bad;
      // (an error completion carries no data: only a successful one can be malformed)
      e_ret  = (c_bad && !c_fail) || (c_fail && !c_rc);
      e_slot = c_slot;
      e_b    = lk_b_q;
    end else begin
      e_keep = cur_keep_q && cur_live;
      e_ok   = cur_ok_q;
      e_err  = cur_err_q;
      e_ret  = cur_ret_q;
      e_slot = cur_slot_q;
      e_b    = cur_b_q;
    end
  end
  // (its last beat must be the last of its length: one beat left to write now)
  assign e_short = e_ok && (sop || !cur_rem1_q || rb_disc_q);
  assign rc_fin  = rc_end && e_keep && (!e_ok || e_short || cur_done_q);
  // a completion that ends well: its tag's count of beats left goes down
  logic left_upd;
  assign left_upd = rc_end && !sop && cur_ok_q && cur_rem1_q && !rb_disc_q;

  // timeouts: the tags that have aged out, registered, the lowest of them registered again;
  // it times out if it is still in flight and aged out (not finished or reused since)
  logic [$clog2(TIMEOUT_TICK+1)-1:0] tick_cnt_q;
  logic            tick;
  logic [TAGS-1:0] t_old_q;
  logic [TW-1:0]   to_slot_q, to2_slot_q;
  logic [BW-1:0]   to2_b_q;
  logic            to_v_q, to_now;
  assign tick   = tick_cnt_q == '0;
  // (to2_*: the candidate and its burst, a clock later; the checks are on the tag's state now)
  logic            to2_v_q, to2_ok_d;
  // (still in flight and aged out, and not finished by the finish applied now)
  assign to2_ok_d = t_act_q[to_slot_q] && t_age_q[to_slot_q] == 2'd3 &&
                    !(fin_v_q && fin_slot_q == to_slot_q);
  assign to_now = to2_v_q && !(fin_v_q && fin_slot_q == to2_slot_q);

  always_comb begin
    fin_d = 1'b0; fin_err_d = 1'b0; fin_ret_d = 1'b0; fin_to_d = 1'b0; fin_slot_d = e_slot;
    fin_b_d = e_b;
    if (rc_fin) begin
      fin_d = 1'b1; fin_err_d = e_err || e_short; fin_ret_d = e_ret || e_short;
    end else if (to_now) begin
      fin_d = 1'b1; fin_err_d = 1'b1; fin_ret_d = 1'b1; fin_to_d = 1'b1; fin_slot_d = to2_slot_q;
      fin_b_d = to2_b_q;
    end
  end

  // ---- R: the oldest burst, once all its requests are complete (head_rdy_q: registered; not
  // used the clock after the tail moves)
  logic            head_rdy_q, moved_q, rd_go, rd_inflight_q;
  logic [8:0]      out_cnt_q;
  logic            rd_last;
  logic [BW-1:0]   bt;
  logic [$clog2(4+1):0] rf_level;
  logic            rf_ready_unused;
  logic [ID_W+2:0] rd_meta_q;
  assign bt       = b_tail_q[BW-1:0];
  assign rd_go    = head_rdy_q && !moved_q && (32'(rf_level) + 32'(rd_inflight_q)) < 4;
  assign rd_last  = out_cnt_q == b_nbeats_q[bt] - 9'd1;
  assign rob_re   = rd_go;
  assign rob_ra   = b_start_q[bt] + RW'(out_cnt_q);

  hm_fifo #(.WIDTH(ID_W + 3 + 512), .DEPTH(4)) u_rfifo (
    .clk, .rst,
    // (a failed burst's beats carry zeros, not what the buffer held from earlier bursts)
    .s_data({rd_meta_q, rd_meta_q[2:1] == RESP_OK ? rob_rd_q : 512'd0}), .s_valid(rd_inflight_q),
    .s_ready(rf_ready_unused),
    .m_data({s_axi_rid, s_axi_rresp, s_axi_rlast, s_axi_rdata}), .m_valid(s_axi_rvalid),
    .m_ready(s_axi_rready), .level(rf_level)
  );

  // ================================================================ write side
  // W beats pass two registered stages (w0: taken; w1: first and last enabled byte found)
  // before the chunk measurement; wready leaves room in the FIFOs for them.
  logic            aw_v_q, aw_bad_q;
  logic [ID_W-1:0] aw_id_q;
  logic [63:0]     aw_addr_q;             // address of the next beat
  logic [11:0]     mps;
  logic            w_fire, room_q;
  logic            w0_v_q, w0_last_q, w0_bad_q, w1_v_q, w1_last_q, w1_bad_q, w1_cut_q, w1_any_q;
  logic [ID_W-1:0] w0_id_q, w1_id_q;
  logic [63:0]     w0_addr_q, w1_addr_q;
  logic [7:0]      w0_any_q;              // per byte of strobes: any, lowest, highest enabled
  logic [23:0]     w0_lo_q, w0_hi_q;
  logic [2:0]      w0_glo, w0_ghi;
  logic [511:0]    w0_data_q, w1_data_q;
  logic [5:0]      w1_fe_q, w1_le_q;
  // the chunk being measured
  logic            ch_has_q;
  logic [63:0]     ch_first_q;
  logic [11:0]     ch_last_q;
  logic [4:0]      ch_beats_q, ch_fb_q, ch_lb_q;
  // chunk descriptors: first byte address, last byte [11:0], lead beats, payload beats,
  // total beats, has data, last of burst, refused burst, id
  localparam int CDW = 64 + 12 + 5 + 5 + 5 + 1 + 1 + 1 + ID_W;
  logic [CDW-1:0]  cd_in, cd_out;
  logic            cd_ready_unused, cd_valid, cd_pop;
  logic [511:0]    wf_data;
  logic            wf_ready_unused, wf_valid, wf_pop;
  logic [$clog2(W_DEPTH+1):0] wf_level;
  logic [$clog2(16+1):0] cd_level;
  // the descriptor at the head of the chunk FIFO
  logic [63:0]     cd_first;
  logic [11:0]     cd_last;
  logic [4:0]      cd_lead, cd_pay, cd_tot;
  logic            cd_has, cd_lastb, cd_bad;
  logic [ID_W-1:0] cd_id;
  logic [8:0]      cd_ndw;
  logic [3:0]      cd_fbe, cd_lbe;
  assign {cd_first, cd_last, cd_lead, cd_pay, cd_tot, cd_has, cd_lastb, cd_bad, cd_id} = cd_out;
  assign cd_ndw = 9'(cd_last[11:2]) - 9'(cd_first[11:2]) + 9'd1;
  assign cd_fbe = 4'hf << cd_first[1:0];
  assign cd_lbe = 4'hf >> (2'd3 - cd_last[1:0]);

  always_comb begin
    w0_glo = '0;
    w0_ghi = '0;
    for (int k = 7; k >= 0; k--) if (w0_any_q[k]) w0_glo = 3'(k);
    for (int k = 0; k < 8; k++) if (w0_any_q[k]) w0_ghi = 3'(k);
  end
  assign mps = cfg_max_payload == 2'd3 ? 12'd1024 : 12'd128 << cfg_max_payload;
  assign s_axi_awready = !rst && !aw_v_q;
  assign s_axi_wready  = aw_v_q && room_q;
  assign w_fire = s_axi_wvalid && s_axi_wready;

  always_comb begin
    logic        has;
    logic [63:0] first;
    logic [11:0] last;
    logic [4:0]  fb, lb;
    has   = ch_has_q || w1_any_q;
    first = ch_has_q ? ch_first_q : {w1_addr_q[63:6], w1_fe_q};
    fb    = ch_has_q ? ch_fb_q : ch_beats_q;
    last  = w1_any_q ? {w1_addr_q[11:6], w1_le_q} : ch_last_q;
    lb    = w1_any_q ? ch_beats_q : ch_lb_q;
    cd_in = {first, last, fb, lb - fb + 5'd1, ch_beats_q + 5'd1, has, w1_last_q, w1_bad_q, w1_id_q};
  end

  hm_fifo #(.WIDTH(512), .DEPTH(W_DEPTH)) u_wfifo (
    .clk, .rst, .s_data(w1_data_q), .s_valid(w1_v_q), .s_ready(wf_ready_unused),
    .m_data(wf_data), .m_valid(wf_valid), .m_ready(wf_pop), .level(wf_level)
  );
  hm_fifo #(.WIDTH(CDW), .DEPTH(16)) u_cfifo (
    .clk, .rst, .s_data(cd_in), .s_valid(w1_v_q && w1_cut_q), .s_ready(cd_ready_unused),
    .m_data(cd_out), .m_valid(cd_valid), .m_ready(cd_pop), .level(cd_level)
  );

  // ---- emitting one chunk: its header, then its payload shifted so that its first DWORD
  // follows the 4-DWORD descriptor. The input beats are taken in three runs (lead beats with
  // nothing enabled, dropped; payload; tail, dropped), counted down with registered
  // zero (and one) flags so that the per-clock decisions stay shallow.
  logic            em_q;                  // a chunk is being emitted
  logic            em_send_q;             // it is sent (has data, not refused)
  logic            em_drop_q;             // refused (bad burst, bus mastering off at its start)
  logic            em_lastb_q, em_first_q;
  logic [63:0]     em_first_addr_q;
  logic [ID_W-1:0] em_id_q;
  logic [8:0]      em_ndw_q;              // DWORDs in the write (1..256)
  logic [3:0]      em_fbe_q, em_lbe_q, em_sh_q, em_lastdw_q;
  logic            em_pre_q;              // the first payload beat must be taken before output
  logic [4:0]      lead_q, pay_q, in_q, out_q;   // beats left: lead, payload, input, output
  logic            lead_z_q, pay_z_q, in_z_q, in1_q, out_z_q, out1_q;
  logic [511:0]    em_prev_q;
  logic            bf_ready_unused, bf_room_q;
  logic            mid_q, bdrop_q;        // a burst part way through; its refusal
  logic            ld_drop;
  logic [$clog2(16+1):0] bf_level;

  logic            em_discard;            // a lead or tail beat, or a chunk not sent
  // the writer's beats go to RQ through a skid buffer (registered both ways)
  logic [511:0]    wo_data, wb_data;
  logic [15:0]     wo_keep, wb_keep;
  logic [136:0]    wo_user, wb_user;
  logic            wo_last, wb_last, wo_sop, wb_sop, wo_valid;
  logic            wo_adv;                // the skid buffer can take a beat
  logic            em_step;               // one output beat produced now
  logic            em_done;               // the chunk's last input/output is handled now
  logic [1023:0]   win;
  logic [511:0]    shifted;
  logic [511:0]    cur_in;
  logic [8:0]      ld_nout;
  logic            ld_send;

  // (the last beat of a burst's last write carries its B: answered once that beat is taken
  // into the RQ register, behind which every later request goes)
  logic            wb_b, wo_b;
  logic [ID_W-1:0] wo_bid;
  assign wb_b = out1_q && em_lastb_q;
  hm_skid #(.WIDTH(512 + 16 + 137 + 3 + ID_W)) u_wskid (
    .clk, .rst,
    .s_data({wb_data, wb_keep, wb_user, wb_last, wb_sop, wb_b, em_id_q}), .s_valid(em_step),
    .s_ready(wo_adv),
    .m_data({wo_data, wo_keep, wo_user, wo_last, wo_sop, wo_b, wo_bid}), .m_valid(wo_valid),
    .m_ready(wo_take)
  );
  assign wb_sop  = em_first_q;
  assign wb_last = out1_q;
  assign wb_data = em_first_q ?
                   {shifted[511:128], rq_desc(em_first_addr_q, 11'(em_ndw_q), 4'b0001, 8'h00)} : shifted;
  assign wb_keep = out1_q ? 16'hffff >> (4'd15 - em_lastdw_q) : 16'hffff;
  assign wb_user = rq_user(em_first_q ? em_fbe_q : 4'h0, em_first_q ? em_lbe_q : 4'h0,
                           em_first_q, out1_q, out1_q ? em_lastdw_q : 4'hf);
  assign em_discard = em_q && wf_valid && !in_z_q && (!lead_z_q || pay_z_q || em_pre_q);
  // an output beat takes the next payload beat if one is left
  assign cur_in     = pay_z_q ? '0 : wf_data;
  assign em_step    = em_q && em_send_q && !em_pre_q && lead_z_q && !out_z_q && wo_adv &&
                      (pay_z_q || wf_valid);
  assign win        = {cur_in, em_prev_q};
  always_comb begin
    shifted = '0;
    for (int d = 0; d < 16; d++) begin
      if (em_sh_q == 4'(d)) shifted = win[32*d +: 512];
    end
  end
  assign wf_pop  = em_discard || (em_step && !pay_z_q);
  // done: every input beat taken and every output beat sent; a burst whose last chunk sends
  // nothing is answered here, once the writes before it are all in the RQ register
  logic            b_nosend;
  assign b_nosend = em_lastb_q && !em_send_q;
  assign em_done = em_q && (in_z_q || (wf_pop && in1_q)) && (out_z_q || (em_step && out1_q)) &&
                   (!b_nosend || !wo_valid);
  // (a chunk starts only with room for its B and the two that may still be in the skid buffer)
  assign cd_pop  = !em_q && cd_valid && bf_room_q;
  // a burst is refused, or not, as a whole: decided at its first chunk
  assign ld_drop = mid_q ? bdrop_q : cd_bad || !cfg_bus_master_en;
  assign ld_send = cd_has && !ld_drop;
  assign ld_nout = ld_send ? (cd_ndw + 9'd4 + 9'd15) >> 4 : 9'd0;

  logic            b_push;
  assign b_push = (wo_take && wo_b) || (em_done && b_nosend);
  hm_fifo #(.WIDTH(ID_W + 2), .DEPTH(16)) u_bfifo (
    .clk, .rst,
    .s_data(wo_take && wo_b ? {wo_bid, RESP_OK} : {em_id_q, em_drop_q ? RESP_SLVERR : RESP_OK}),
    .s_valid(b_push), .s_ready(bf_ready_unused),
    .m_data({s_axi_bid, s_axi_bresp}), .m_valid(s_axi_bvalid), .m_ready(s_axi_bready),
    .level(bf_level)
  );

  // ================================================================ RQ
  logic            rq_lock_q;             // a write TLP is part way out
  logic            rq_last_w_q;           // the last TLP granted was a write
  assign rq_free   = !m_axis_rq_tvalid || m_axis_rq_tready;
  assign rq_take_r = rq_free && rr_valid_q && !rq_lock_q && !rq_hold && (!wo_valid || rq_last_w_q);
  assign wo_take   = rq_free && wo_valid && (rq_lock_q || (!rq_hold && (!rr_valid_q || !rq_last_w_q)));

  // ================================================================ state
  logic [CNT_W-1:0] n_rd_q, n_wr_q, n_cpl_q, n_cerr_q, n_cunx_q, n_to_q, n_bad_q;
  logic             bad_r_q, bad_w_q;     // a burst refused last clock (read, write)

  always_ff @(posedge clk) begin
    // ---------------- read: bursts and requests
    if (ar_fire) begin
      b_id_q[b_head_q[BW-1:0]]     <= s_axi_arid;
      b_start_q[b_head_q[BW-1:0]]  <= rob_wp_q[RW-1:0];
      b_nbeats_q[b_head_q[BW-1:0]] <= {1'b0, s_axi_arlen} + 9'd1;
      b_robn_q[b_head_q[BW-1:0]]   <= ar_bad ? 7'd0 : 7'(s_axi_arlen) + 7'd1;
      iss_b_q    <= b_head_q[BW-1:0];
      iss_addr_q <= {s_axi_araddr[63:6], 6'd0};
      iss_left_q <= {7'(s_axi_arlen) + 7'd1, 6'd0};
      iss_rob_q  <= rob_wp_q[RW-1:0];
    end
    iss_ev_b_q    <= iss_b_q;
    iss_ev_last_q <= iss_left_q == chunk;
    if (iss_fire) begin
      rr_desc_q <= rq_desc(iss_addr_q, chunk[12:2], 4'b0000, 8'(nf_q));
      t_burst_q[nf_q] <= iss_b_q;
      t_rob_q[nf_q]   <= iss_rob_q;
      t_alo_q[nf_q]   <= iss_addr_q[11:6];
      t_nb_q[nf_q]    <= chunk[12:6];
      iss_addr_q <= iss_addr_q + 64'(chunk);
      iss_left_q <= iss_left_q - chunk;
      iss_rob_q  <= iss_rob_q + RW'(chunk[12:6]);
    end
    ar_room_q <= (RW+1)'(ROB_BEATS) - (rob_wp_q - rob_rp_q) >= (RW+1)'(64) &&
                 (b_head_q - b_tail_q) != (BW+1)'(BURSTS);
    nf_q      <= lowest_tag(t_usable);
    nf_v_q    <= |t_usable;
    all_ret_q <= &t_ret_q;
    // tag state
    for (int i = 0; i < TAGS; i++) begin
      if (tick && t_age_q[i] != 2'd3) t_age_q[i] <= t_age_q[i] + 2'd1;
      t_old_q[i] <= t_act_q[i] && t_age_q[i] == 2'd3;
    end
    to_slot_q <= lowest_tag(t_old_q);
    if (sop && c_known) t_age_q[c_slot] <= '0;
    if (left_upd) t_left_q[cur_slot_q] <= cur_left_q;
    if (iss_fire) begin
      t_age_q[nf_q]  <= '0;
      t_left_q[nf_q] <= chunk[12:6];
    end

    // ---------------- completions
    if (sop_a) begin
      lk_rob_q  <= t_rob_q[a_slot];
      lk_act_q  <= t_act_q[a_slot] && !(fin_v_q && fin_slot_q == a_slot);
      lk_b_q    <= t_burst_q[a_slot];
      lk_off_q  <= ra_d_q[11:6] - t_alo_q[a_slot];
      lk_tagok_q <= ra_d_q[71:64] < 8'(TAGS);
      lk_nb_q   <= t_nb_q[a_slot];
      // (a completion of the same tag ending in stage B now has just changed its count)
      lk_left_q <= left_upd && cur_slot_q == a_slot ? cur_left_q : t_left_q[a_slot];
    end
    if (rb_v_q) rb_prev_q <= rb_d_q;
    if (sop) begin
      cur_keep_q <= c_known;
      cur_ok_q   <= c_known && !c_fail && !c_bad;
      cur_err_q  <= c_fail || c_bad;
      cur_ret_q  <= (c_bad && !c_fail) || (c_fail && !c_rc);
      cur_slot_q <= c_slot;
      cur_b_q    <= lk_b_q;
      cur_live_q <= c_known;
      cur_wa_q   <= lk_rob_q + RW'(c_off);
      cur_rem_q  <= c_n;
      cur_remz_q <= c_n == '0;
      cur_rem1_q <= c_n == 7'd1;
      cur_left_q <= lk_left_q - c_n;
      cur_done_q <= lk_left_q == c_n;
    end else begin
      if (rob_we) begin
        cur_wa_q   <= cur_wa_q + 1'b1;
        cur_rem_q  <= cur_rem_q - 7'd1;
        cur_remz_q <= cur_rem1_q;
        cur_rem1_q <= cur_rem_q == 7'd2;
      end
      cur_live_q <= cur_live;
    end
    fin_slot_q <= fin_slot_d;
    fin_err_q  <= fin_err_d;
    fin_ret_q  <= fin_ret_d;
    fin_to_q   <= fin_to_d;
    fin_b_q    <= fin_b_d;
    to2_slot_q <= to_slot_q;
    to2_b_q    <= t_burst_q[to_slot_q];

    // ---------------- R
    rd_inflight_q <= rd_go;
    if (rd_go) rd_meta_q <= {b_id_q[bt], b_err_q[bt] ? RESP_SLVERR : RESP_OK, rd_last};
    head_rdy_q <= b_head_q != b_tail_q && b_issued_q[bt] && b_outst_q[bt] == '0;

    // ---------------- write: taking W, finding the enabled bytes, measuring
    if (s_axi_awvalid && s_axi_awready) begin
      aw_id_q   <= s_axi_awid;
      aw_addr_q <= {s_axi_awaddr[63:6], 6'd0};
      aw_bad_q  <= s_axi_awsize != 3'd6 || s_axi_awburst != 2'b01 ||
                   9'(s_axi_awaddr[11:6]) + 9'(s_axi_awlen) > 9'd63;
    end
    if (w_fire) aw_addr_q <= aw_addr_q + 64'd64;
    w0_data_q <= s_axi_wdata;
    {w0_any_q, w0_lo_q, w0_hi_q} <= groups64(aw_bad_q ? '0 : s_axi_wstrb);
    w0_last_q <= s_axi_wlast;
    w0_bad_q  <= aw_bad_q;
    w0_id_q   <= aw_id_q;
    w0_addr_q <= aw_addr_q;
    w1_data_q <= w0_data_q;
    w1_last_q <= w0_last_q;
    w1_bad_q  <= w0_bad_q;
    w1_id_q   <= w0_id_q;
    w1_addr_q <= w0_addr_q;
    w1_any_q  <= |w0_any_q;
    w1_fe_q   <= {w0_glo, w0_lo_q[3*w0_glo +: 3]};
    w1_le_q   <= {w0_ghi, w0_hi_q[3*w0_ghi +: 3]};
    // the write is cut after this beat: the next beat starts a max-payload-sized block, or the
    // burst ends
    w1_cut_q  <= w0_last_q || ((w0_addr_q[11:0] + 12'd64) & (mps - 12'd1)) == '0;
    // room for this beat and the two behind it
    room_q    <= 32'(wf_level) + 4 <= W_DEPTH && 32'(cd_level) + 4 <= 16;
    if (w1_v_q) begin
      if (w1_cut_q) begin
        ch_has_q   <= 1'b0;
        ch_beats_q <= '0;
      end else begin
        ch_beats_q <= ch_beats_q + 5'd1;
        if (!ch_has_q && w1_any_q) begin
          ch_first_q <= {w1_addr_q[63:6], w1_fe_q};
          ch_fb_q    <= ch_beats_q;
        end
        if (w1_any_q) begin
          ch_has_q  <= 1'b1;
          ch_last_q <= {w1_addr_q[11:6], w1_le_q};
          ch_lb_q   <= ch_beats_q;
        end
      end
    end

    // ---------------- write: emitting
    if (cd_pop) begin
      em_send_q   <= ld_send;
      em_drop_q   <= ld_drop;
      bdrop_q     <= ld_drop;
      mid_q       <= !cd_lastb;
      em_lastb_q  <= cd_lastb;
      em_first_q  <= 1'b1;
      em_id_q     <= cd_id;
      em_first_addr_q <= cd_first;
      em_ndw_q    <= cd_ndw;
      em_fbe_q    <= cd_ndw == 9'd1 ? (cd_fbe & cd_lbe) : cd_fbe;
      em_lbe_q    <= cd_ndw == 9'd1 ? 4'h0 : cd_lbe;
      em_sh_q     <= cd_first[5:2] + 4'd12;
      em_pre_q    <= ld_send && cd_first[5:2] >= 4'd4;
      em_lastdw_q <= 4'(cd_ndw + 9'd3);
      // (a chunk not sent drops all its beats as lead beats)
      lead_q      <= ld_send ? cd_lead : cd_tot;
      lead_z_q    <= ld_send ? cd_lead == '0 : 1'b0;
      pay_q       <= ld_send ? cd_pay : 5'd0;
      pay_z_q     <= !ld_send;
      in_q        <= cd_tot;
      in_z_q      <= 1'b0;
      in1_q       <= cd_tot == 5'd1;
      out_q       <= 5'(ld_nout);
      out_z_q     <= !ld_send;
      out1_q      <= ld_nout == 9'd1;
    end
    if (wf_pop) begin
      in_q   <= in_q - 5'd1;
      in_z_q <= in1_q;
      in1_q  <= in_q == 5'd2;
      if (!lead_z_q) begin
        lead_q   <= lead_q - 5'd1;
        lead_z_q <= lead_q == 5'd1;
      end else if (!pay_z_q) begin
        pay_q   <= pay_q - 5'd1;
        pay_z_q <= pay_q == 5'd1;
      end
      if (em_pre_q && lead_z_q) begin
        em_prev_q <= wf_data;
        em_pre_q  <= 1'b0;
      end
    end
    if (em_step) begin
      em_prev_q  <= cur_in;
      em_first_q <= 1'b0;
      out_q  <= out_q - 5'd1;
      out_z_q <= out1_q;
      out1_q <= out_q == 5'd2;
    end

    // RQ
    if (rq_free) m_axis_rq_tvalid <= 1'b0;
    if (rq_take_r) begin
      m_axis_rq_tvalid <= 1'b1;
      m_axis_rq_tdata  <= {384'd0, rr_desc_q};
      m_axis_rq_tkeep  <= 16'h000f;
      m_axis_rq_tlast  <= 1'b1;
      m_axis_rq_tuser  <= rq_user(4'hf, 4'hf, 1'b1, 1'b1, 4'd3);
      rr_valid_q  <= 1'b0;
      rq_last_w_q <= 1'b0;
    end
    if (wo_take) begin
      m_axis_rq_tvalid <= 1'b1;
      m_axis_rq_tdata  <= wo_data;
      m_axis_rq_tkeep  <= wo_keep;
      m_axis_rq_tlast  <= wo_last;
      m_axis_rq_tuser  <= wo_user;
      rq_lock_q   <= !wo_last;
      rq_last_w_q <= 1'b1;
    end
    if (iss_fire) rr_valid_q <= 1'b1;

    // ---------------- counters
    if (rq_take_r) n_rd_q <= n_rd_q + 1'b1;
    if (wo_take && wo_sop) n_wr_q <= n_wr_q + 1'b1;
    if (sop && c_known) n_cpl_q <= n_cpl_q + 1'b1;
    if (rc_fin && (e_err || e_short)) n_cerr_q <= n_cerr_q + 1'b1;
    if (sop && !c_known) n_cunx_q <= n_cunx_q + 1'b1;
    if (fin_v_q && fin_to_q) n_to_q <= n_to_q + 1'b1;
    bad_r_q <= (ar_fire && ar_bad) || iss_abort;
    bad_w_q <= em_done && b_nosend && em_drop_q;
    bf_room_q <= 32'(bf_level) + 4 <= 16;
    n_bad_q <= n_bad_q + CNT_W'(bad_r_q) + CNT_W'(bad_w_q);

    if (rst) begin
      b_head_q <= '0; b_tail_q <= '0; rob_wp_q <= '0; rob_rp_q <= '0;
      b_err_q <= '0; b_issued_q <= '0;
      for (int i = 0; i < BURSTS; i++) b_outst_q[i] <= '0;
      t_act_q <= '0; t_ret_q <= '0;
      for (int i = 0; i < TAGS; i++) t_age_q[i] <= '0;
      iss_q <= 1'b0; iss_ev_q <= 1'b0; rr_valid_q <= 1'b0; ar_took_q <= 1'b0;
      ra_in_q <= 1'b0;
      cur_ok_q <= 1'b0; cur_keep_q <= 1'b0; cur_err_q <= 1'b0; cur_ret_q <= 1'b0;
      fin_v_q <= 1'b0; to_v_q <= 1'b0; to2_v_q <= 1'b0;
      tick_cnt_q <= '0;
      out_cnt_q <= '0; rd_inflight_q <= 1'b0; head_rdy_q <= 1'b0; moved_q <= 1'b0;
      aw_v_q <= 1'b0; aw_bad_q <= 1'b0; room_q <= 1'b0;
      w0_v_q <= 1'b0; w1_v_q <= 1'b0;
      ch_has_q <= 1'b0; ch_beats_q <= '0;
      em_q <= 1'b0; em_pre_q <= 1'b0; in_z_q <= 1'b1; mid_q <= 1'b0; bf_room_q <= 1'b0;
      rq_lock_q <= 1'b0; rq_last_w_q <= 1'b0; m_axis_rq_tvalid <= 1'b0;
      n_rd_q <= '0; n_wr_q <= '0; n_cpl_q <= '0; n_cerr_q <= '0; n_cunx_q <= '0; n_to_q <= '0;
      n_bad_q <= '0; bad_r_q <= 1'b0; bad_w_q <= 1'b0;
    end else begin
      tick_cnt_q <= tick ? $bits(tick_cnt_q)'(TIMEOUT_TICK - 1) : tick_cnt_q - 1'b1;
      to_v_q     <= |t_old_q;
      to2_v_q    <= to_v_q && to2_ok_d;
      ar_took_q <= ar_fire;
      if (ar_fire) begin
        b_head_q <= b_head_q + 1'b1;
        b_err_q[b_head_q[BW-1:0]]    <= ar_bad;
        b_issued_q[b_head_q[BW-1:0]] <= ar_bad;
        b_outst_q[b_head_q[BW-1:0]]  <= '0;
        if (!ar_bad) begin
          rob_wp_q <= rob_wp_q + (RW+1)'(s_axi_arlen) + 1'b1;
          iss_q    <= 1'b1;
        end
      end
      // requests: one issued (counted in its burst a clock later, together with the burst's
      // "all issued", so that the two agree), or the burst given up
      iss_ev_q <= iss_fire;
      if (iss_fire && iss_left_q == chunk) iss_q <= 1'b0;
      if (iss_ev_q && iss_ev_last_q) b_issued_q[iss_ev_b_q] <= 1'b1;
      if (iss_abort) begin
        iss_q <= 1'b0;
        b_issued_q[iss_b_q] <= 1'b1;
        b_err_q[iss_b_q]    <= 1'b1;
      end
      // outstanding requests per burst: +1 for an issue, -1 for a finish
      for (int i = 0; i < BURSTS; i++) begin
        if (!(ar_fire && b_head_q[BW-1:0] == BW'(i)))
          b_outst_q[i] <= b_outst_q[i] + (TW+1)'(iss_ev_q && iss_ev_b_q == BW'(i))
                                       - (TW+1)'(fin_v_q && fin_b_q == BW'(i));
      end
      fin_v_q <= fin_d;
      if (fin_v_q) begin
        t_act_q[fin_slot_q] <= 1'b0;
        if (fin_ret_q) t_ret_q[fin_slot_q] <= 1'b1;
        if (fin_err_q) b_err_q[fin_b_q] <= 1'b1;
      end
      if (iss_fire) t_act_q[nf_q] <= 1'b1;
      // completions
      if (ra_v_q) ra_in_q <= !ra_last_q;
      // R
      moved_q <= rd_go && rd_last;
      if (rd_go) begin
        if (rd_last) begin
          out_cnt_q <= '0;
          b_tail_q  <= b_tail_q + 1'b1;
          rob_rp_q  <= rob_rp_q + (RW+1)'(b_robn_q[bt]);
        end else begin
          out_cnt_q <= out_cnt_q + 9'd1;
        end
      end
      // write
      if (s_axi_awvalid && s_axi_awready) aw_v_q <= 1'b1;
      if (w_fire && s_axi_wlast) aw_v_q <= 1'b0;
      w0_v_q <= w_fire;
      w1_v_q <= w0_v_q;
      if (cd_pop) em_q <= 1'b1;
      if (em_done) em_q <= 1'b0;
    end
  end

  // (tkeep and the rest of the RC tuser carry nothing the descriptor does not: the DWORD count
  // gives the length, and byte enables matter only for reads of less than a DWORD)
  logic unused_ok;
  assign unused_ok = ^{s_axis_rc_tkeep, s_axis_rc_tuser[160:97], s_axis_rc_tuser[95:0],
                       rb_prev_q[95:0], s_axi_araddr[5:0], s_axi_awaddr[5:0], w1_addr_q[5:0], wf_level, cd_level, bf_level, wf_ready_unused,
                       cd_ready_unused, rf_ready_unused, bf_ready_unused};

  assign rq_between = !m_axis_rq_tvalid && !rq_lock_q;
  assign stat_rd_req = n_rd_q;
  assign stat_wr_req = n_wr_q;
  assign stat_cpl = n_cpl_q;
  assign stat_cpl_err = n_cerr_q;
  assign stat_cpl_unexpected = n_cunx_q;
  assign stat_timeout = n_to_q;
  assign stat_bad_burst = n_bad_q;
  always_comb begin
    tags_retired = '0;
    for (int i = 0; i < TAGS; i++) tags_retired = tags_retired + (TW+1)'(t_ret_q[i]);
  end

  if (TAGS > 32 || (1 << BW) != BURSTS || (1 << RW) != ROB_BEATS || ROB_BEATS < 64 ||
      W_DEPTH < 20 || TIMEOUT_TICK < 64) begin : g_bad_param
    // (W_DEPTH: a whole write of 1 KiB, 16 beats, plus the beats in flight towards the FIFO)
    $error("hm_pcie_dma: TAGS <= 32, BURSTS and ROB_BEATS powers of two, ROB_BEATS >= 64, W_DEPTH >= 20, TIMEOUT_TICK >= 64");
  end

endmodule
