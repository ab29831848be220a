// The completer's batch buffer of send WQEs (hm_rc_compl): WQEs are read back from the host's
// send queue ring to be retired, several per DMA read, into a ring of 4 x BATCH_BYTES
// addressed by WQE index (block RAM, registered read). It holds a window [first, first + n)
// of one QP's WQEs:
// - a demand fill: the completer asks for the WQEs from i_fx on (as many as are posted, up
//   to BATCH_BYTES and the end of the ring) when it needs one that is not there; the window
//   becomes what was read;
// - a prefetch: while the completer works, the window's next posted WQEs are read, up to half
//   the ring per read, into its free part (what the QP has retired is free), so a QP that
//   keeps retiring rarely waits for its WQEs. One read is in flight at a time, never beside a
//   demand fill;
// - on every save of the window's QP, what it still needs (its ci) and how far it is posted
//   are taken; a QP saved after a response packet with WQEs outstanding takes over an unused
//   window (none, or one whose QP has retired all it posted) and the prefetch reads its WQEs.
// A bus error marks a demand-filled window (o_err); a prefetch that fails, or whose window a
// control command dropped meanwhile (i_inval), adds nothing (the completer then reads those
// WQEs itself).
module hm_sq_batch
  import hm_eng_pkg::*;
#(
  // Datapath width in bits.
  parameter int DATA_WIDTH = 512,
  // QP table entries (power of two).
  parameter int NUM_QPS = 4096,
  // WQE bytes per demand read (power of two, 256..4096); the ring holds four times as much.
  parameter int BATCH_BYTES = 4096,
  // Derived.
  localparam int QW  = $clog2(NUM_QPS),
  localparam int KW  = DATA_WIDTH / 8,
  localparam int CBW = $clog2(4 * BATCH_BYTES / KW)
) (
  input  logic                  clk,
  input  logic                  rst,

  // The QP the completer works on, its send queue ring and how far it is posted
  input  logic [QW-1:0]         i_q,
  input  logic [63:0]           i_sq_base,
  input  logic [4:0]            i_sq_log_size,
  input  logic [3:0]            i_lstride,     // log2 of the WQE stride in bytes
  input  logic [15:0]           i_shead,       // WQEs the requester started
  input  logic [15:0]           i_pi,          // the producer index of its last doorbell
  input  logic [15:0]           i_posted_end,  // the end of its posted WQEs (shead or pi)
  input  logic [15:0]           i_ci,          // its oldest uncompleted WQE

  // Is WQE i_fx (and WQE i_ci) of QP i_q in the window
  input  logic [15:0]           i_fx,
  output logic                  o_has_fx,
  output logic                  o_has_ci,
  output logic                  o_err,         // the window's demand fill had a bus error

  // Demand fill of the WQEs from i_fx on: asked (i_dem_valid), taken (o_dem_taken, the
  // read is issued), its data while i_dem_data (o_dem_done: the last beat)
  input  logic                  i_dem_valid,
  output logic                  o_dem_taken,
  input  logic                  i_dem_data,
  output logic                  o_dem_done,

  // A control command: the window is dropped
  input  logic                  i_inval,
  // The prefetch may issue a read (the completer is not filling on demand, nor in a command)
  input  logic                  i_pf_allow,
  // QP i_q is saved (its ci i_ci); i_open: it may take over an unused window
  input  logic                  i_save,
  input  logic                  i_open,
  // A doorbell of QP i_db_q announced WQEs up to i_db_pi: the window's prefetch may go on to
  // there (it is not known to i_posted_end when another QP is loaded)
  input  logic                  i_db,
  input  logic [QW-1:0]         i_db_q,
  input  logic [15:0]           i_db_pi,

  // Read port: beat i_rd_beat of WQE i_rd_idx (data the next cycle)
  input  logic [15:0]           i_rd_idx,
  input  logic [4:0]            i_rd_beat,
  output logic [DATA_WIDTH-1:0] o_rd,

  // WQE reads
  output hm_dma_req_t           m_wrd,
  output logic                  m_wrd_valid,
  input  logic                  m_wrd_ready,
  input  logic [DATA_WIDTH-1:0] s_wqe_tdata,
  input  logic                  s_wqe_tvalid,
  output logic                  s_wqe_tready,
  input  logic                  s_wqe_tlast,
  input  logic                  s_wqe_tuser
);
  localparam int CB_BEATS = 4 * BATCH_BYTES / KW;

  logic [DATA_WIDTH-1:0] cb_mem [CB_BEATS];
  logic [CBW-1:0] cb_wa_q;
  logic           cb_v_q, cb_err_q;
  logic [QW-1:0]  cb_q;
  logic [15:0]    cb_first_q, cb_n_q, cbn, cbn_q;
  logic [15:0]    slot;
  logic [3:0]     lbpw;
  assign slot       = i_fx & 16'((17'd1 << i_sq_log_size) - 17'd1);
  assign lbpw       = i_lstride > 4'($clog2(KW)) ? i_lstride - 4'($clog2(KW)) : 4'd0;
  function automatic logic has(input logic [15:0] x);
    return cb_v_q && cb_q == i_q && 16'(x - cb_first_q) < cb_n_q;
  endfunction
  assign o_has_fx = has(i_fx);
  assign o_has_ci = has(i_ci);
  assign o_err    = cb_err_q;

  // a demand fill: the WQEs posted from i_fx on (started ones, or announced by a doorbell),
  // at least one, up to BATCH_BYTES and the end of the ring
  always_comb begin
    logic [15:0] a1, a2, wrap;
    a1   = i_shead - i_fx;
    a2   = i_pi - i_fx;
    if (a1[15]) a1 = '0;
    if (a2[15]) a2 = '0;
    if (a2 > a1) a1 = a2;
    if (a1 == '0) a1 = 16'd1;
    wrap = 16'((17'd1 << i_sq_log_size) - 17'(slot));
    cbn  = 16'(BATCH_BYTES >> i_lstride);
    if (a1 < cbn) cbn = a1;
    if (wrap < cbn) cbn = wrap;
  end

  // prefetch: the window's QP (ring, stride), the oldest WQE it still needs (its ci at its
  // last save) and how far it is posted
  logic [63:0]    cbx_base_q;
  logic [4:0]     cbx_lsize_q;
  logic [3:0]     cbx_lstride_q, cbx_lbpw;
  logic [15:0]    cb_lo_q, cb_lim_q, pf_n_q;
  logic           pf_busy_q, pf_stale_q, pf_err_q, pf_want, pf_go;
  logic [15:0]    pf_e, pf_n, pf_lo, pf_slot;
  assign cbx_lbpw = cbx_lstride_q > 4'($clog2(KW)) ? cbx_lstride_q - 4'($clog2(KW)) : 4'd0;
  always_comb begin
    logic [15:0] lo_off, cap, posted, wrap, free;
    pf_e    = cb_first_q + cb_n_q;
    pf_slot = pf_e & 16'((17'd1 << cbx_lsize_q) - 17'd1);
    lo_off  = cb_lo_q - cb_first_q;
    if (lo_off[15]) lo_off = '0;
    if (lo_off > cb_n_q) lo_off = cb_n_q;
    pf_lo   = cb_first_q + lo_off;
    cap     = 16'((4 * BATCH_BYTES) >> cbx_lstride_q);
    free    = cap - (cb_n_q - lo_off);
    posted  = cb_lim_q - pf_e;
    if (posted[15]) posted = '0;
    wrap    = 16'((17'd1 << cbx_lsize_q) - 17'(pf_slot));
    pf_n    = posted;
    if (free < pf_n) pf_n = free;
    if (wrap < pf_n) pf_n = wrap;
    if ((cap >> 1) < pf_n) pf_n = cap >> 1;
    pf_want = cb_v_q && !cb_err_q && !pf_busy_q && i_pf_allow &&
              pf_n != '0 && (pf_n == posted || pf_n == (cap >> 1));
  end
  assign pf_go = pf_want && m_wrd_ready;

  assign m_wrd.addr   = i_dem_valid ? i_sq_base + (64'(slot) << i_lstride)
                                    : cbx_base_q + (64'(pf_slot) << cbx_lstride_q);
  assign m_wrd.len    = i_dem_valid ? 32'(cbn) << i_lstride : 32'(pf_n) << cbx_lstride_q;
  assign m_wrd_valid  = (i_dem_valid && !pf_busy_q) || pf_want;
  assign o_dem_taken  = i_dem_valid && m_wrd_ready && !pf_busy_q;
  assign s_wqe_tready = i_dem_data || pf_busy_q;
  assign o_dem_done   = i_dem_data && s_wqe_tvalid && s_wqe_tlast;

  always_ff @(posedge clk) begin
    if ((i_dem_data || pf_busy_q) && s_wqe_tvalid) cb_mem[cb_wa_q] <= s_wqe_tdata;
    o_rd <= cb_mem[CBW'((32'(i_rd_idx) << lbpw) + 32'(i_rd_beat))];
  end

  // QP i_q's window becomes the n WQEs from `first`, which it still needs, posted up to
  // i_posted_end
  task automatic take_window(input logic [15:0] first, input logic [15:0] n);
    cb_v_q        <= 1'b1;
    cb_q          <= i_q;
    cb_first_q    <= first;
    cb_n_q        <= n;
    cbx_base_q    <= i_sq_base;
    cbx_lsize_q   <= i_sq_log_size;
    cbx_lstride_q <= i_lstride;
    cb_lo_q       <= first;
    cb_lim_q      <= i_posted_end;
  endtask

  always_ff @(posedge clk) begin
    if (rst) begin
      cb_v_q    <= 1'b0;
      pf_busy_q <= 1'b0;
    end else begin
      if (i_inval) cb_v_q <= 1'b0;
      // demand fill: issue, then data; the window becomes what was read
      if (o_dem_taken) begin
        cb_wa_q  <= CBW'(32'(i_fx) << lbpw);
        cb_v_q   <= 1'b0;
        cb_err_q <= 1'b0;
        cbn_q    <= cbn;
      end
      if (i_dem_data && s_wqe_tvalid) begin
        cb_wa_q <= cb_wa_q + 1'b1;
        if (s_wqe_tuser) cb_err_q <= 1'b1;
        if (s_wqe_tlast) take_window(i_fx, cbn_q);
      end
      // the window's QP saved: what it still needs and how far it is posted
      begin
        logic [15:0] lim;
        logic        upd;
        lim = cb_lim_q;
        upd = 1'b0;
        if (i_save && cb_v_q && cb_q == i_q) begin
          cb_lo_q <= i_ci;
          lim     = i_posted_end;
          upd     = 1'b1;
        end
        // (a doorbell behind the limit, a stale one, leaves it)
        if (i_db && cb_v_q && cb_q == i_db_q && 16'(i_db_pi - lim) < 16'h8000) begin
          lim = i_db_pi;
          upd = 1'b1;
        end
        if (upd) cb_lim_q <= lim;
      end
      // another QP takes over an unused window
      if (i_save && i_open && !pf_busy_q && (!cb_v_q || (cb_q != i_q && cb_lo_q == cb_lim_q))) begin
        take_window(i_ci, '0);
        cb_err_q <= 1'b0;
      end
      // prefetch: issue (the window drops what was retired), data, completion (a bus error
      // or a window dropped meanwhile discards it)
      if (pf_go) begin
        pf_busy_q  <= 1'b1;
        pf_stale_q <= 1'b0;
        pf_err_q   <= 1'b0;
        pf_n_q     <= pf_n;
        cb_wa_q    <= CBW'(32'(pf_e) << cbx_lbpw);
        cb_first_q <= pf_lo;
        cb_n_q     <= pf_e - pf_lo;
      end
      if (pf_busy_q && s_wqe_tvalid) begin
        cb_wa_q <= cb_wa_q + 1'b1;
        if (s_wqe_tuser) pf_err_q <= 1'b1;
        if (s_wqe_tlast) begin
          pf_busy_q <= 1'b0;
          if (!pf_stale_q && !pf_err_q && !s_wqe_tuser && cb_v_q) cb_n_q <= cb_n_q + pf_n_q;
        end
      end
      if (pf_busy_q && i_inval) pf_stale_q <= 1'b1;
    end
  end
endmodule
