// RC completer: the requester's receive side. Retires send WQEs on ACKs, places RDMA READ
// response data and atomic results into the WQE's local SGL, writes send CQEs, handles
// error NAKs and local errors (the failing WQE completes with its status, the QP moves to
// ERR and every later WQE is flushed with WR_FLUSH_ERR).
//
// Per QP it keeps {ci: oldest uncompleted WQE, una: its first PSN, shead / spsn: WQEs and
// PSNs the requester has started (from m_sent), rd_done: READ response packets placed for
// the WQE at ci, the pending local error, ERR}. WQEs are read back from the send queue ring
// when they are retired (their wr_id, opcode, length and SGL are not kept on chip); a
// one-entry cache serves consecutive responses of one READ.
//
// Rules (ROCEV2.md section 8, as in hematite-model's transport::qp): an ACK with PSN p is
// valid for p in [una-1, spsn-1] and retires every SEND/WRITE WQE whose last PSN is <= p; a
// READ response or atomic ACK must be for the oldest outstanding WQE and in order (READ
// response packet una + rd_done, right opcode position and length); error NAKs (invalid
// request, remote access, remote operational) are valid for p in [una, spsn-1] and complete
// the oldest WQE with REM_INV_REQ_ERR / REM_ACCESS_ERR / REM_OP_ERR. Anything else is
// dropped and counted. Data written for a READ or an atomic is complete in host memory
// before its CQE is requested.
//
// Not yet implemented (counted in stat_unhandled, no retransmission happens): NAK sequence
// error, RNR NAK, implied NAK, local ACK timeout - the go-back-N retransmission path.
module hm_rc_compl
  import hm_pkg::*;
  import hm_desc_pkg::*;
  import hm_eng_pkg::*;
#(
  // Datapath width in bits (256 or 512).
  parameter int DATA_WIDTH = 512,
  // QP table entries (power of two).
  parameter int NUM_QPS = 4096,
  // Derived.
  localparam int QW = $clog2(NUM_QPS),
  localparam int SW = int'(HM_CTL_STAGE_WORDS)
) (
  input  logic                  clk,
  input  logic                  rst,

  // QP context writes
  input  hm_ctl_cmd_t           s_ctl_cmd,
  input  logic [SW*32-1:0]      s_ctl_data,
  input  logic                  s_ctl_valid,
  output logic                  s_ctl_ready,

  // Started / refused WQEs from the requester
  input  hm_sent_t              s_sent,
  input  logic                  s_sent_valid,
  output logic                  s_sent_ready,

  // Send queue doorbells (producer index, for flushing)
  input  logic [15:0]           s_db_qpn,
  input  logic [15:0]           s_db_pi,
  input  logic                  s_db_valid,
  output logic                  s_db_ready,

  // QPs another block moved to ERR
  input  logic [15:0]           s_err_qpn,
  input  logic                  s_err_valid,
  output logic                  s_err_ready,

  // Response header records (ACK, READ response, atomic ACK)
  input  hm_roce_hdr_t          s_hdr,
  input  logic                  s_hdr_valid,
  output logic                  s_hdr_ready,

  // WQE reads
  output logic [63:0]           m_wrd_addr,
  output logic [31:0]           m_wrd_len,
  output logic                  m_wrd_valid,
  input  logic                  m_wrd_ready,
  input  logic [DATA_WIDTH-1:0] s_wqe_tdata,
  input  logic                  s_wqe_tvalid,
  output logic                  s_wqe_tready,
  input  logic                  s_wqe_tlast,
  input  logic                  s_wqe_tuser,

  // MR checks of the local SGL of READ / atomic WQEs
  output logic [31:0]           m_chk_key,
  output logic [31:0]           m_chk_pd,
  output logic [63:0]           m_chk_addr,
  output logic [63:0]           m_chk_len,
  output logic [2:0]            m_chk_need,
  output logic                  m_chk_valid,
  input  logic                  m_chk_ready,
  input  logic                  s_res_ok,
  input  logic                  s_res_valid,
  output logic                  s_res_ready,

  // Payload pieces to the scatter unit (and its DMA write completions)
  output logic                  m_pc_discard,
  output logic                  m_pc_imm,
  output logic [63:0]           m_pc_data,
  output logic                  m_pc_last,
  output logic [12:0]           m_pc_len,
  output logic [63:0]           m_pc_addr,
  output logic                  m_pc_valid,
  input  logic                  m_pc_ready,
  input  logic                  s_done_valid,
  input  logic                  s_done_err,

  // Send CQEs
  output hm_cqe_req_t           m_cqe,
  output logic                  m_cqe_valid,
  input  logic                  m_cqe_ready,

  // QPs this block moved to ERR
  output logic [15:0]           m_err_qpn,
  output logic                  m_err_valid,
  input  logic                  m_err_ready,

  // Counters
  output logic [31:0]           stat_acks,
  output logic [31:0]           stat_dropped,
  output logic [31:0]           stat_unhandled,
  output logic [31:0]           stat_wr_err
);
  localparam int CTXW    = $bits(hm_qp_ctx_t);
  localparam int KW      = DATA_WIDTH / 8;
  localparam int WQE_MAX = 256;

  typedef struct packed {
    logic [15:0] ci;
    logic [23:0] una;
    logic [15:0] shead;
    logic [23:0] spsn;
    logic [23:0] rd_done;
    logic        lerr_v;
    logic [7:0]  lerr_st;
    logic [15:0] lerr_idx;
    logic        err;
  } cdyn_t;

  hm_qp_ctx_t  ctx_mem [NUM_QPS];
  cdyn_t       dyn_mem [NUM_QPS];
  logic [15:0] pi_mem  [NUM_QPS];

  // doorbells wait in a FIFO so the requester never waits for the completer
  logic [31:0] dbf_data;
  logic        dbf_valid, dbf_pop;
  logic [$clog2(16+1):0] dbf_level;
  hm_fifo #(.WIDTH(32), .DEPTH(16)) u_dbf (
    .clk, .rst, .s_data({s_db_qpn, s_db_pi}), .s_valid(s_db_valid), .s_ready(s_db_ready),
    .m_data(dbf_data), .m_valid(dbf_valid), .m_ready(dbf_pop), .level(dbf_level));

  // ---------------------------------------------------------------------------------------
  // FSM
  // ---------------------------------------------------------------------------------------
  typedef enum logic [4:0] {
    C_IDLE, C_CTL, C_LOAD, C_DISPATCH, C_RL, C_WREQ, C_WDATA, C_WCHK, C_WGOT, C_AFTER,
    C_PLACE, C_ATOMIC, C_DISCARD, C_WAITWR, C_RETIRE, C_ERRNOTE, C_FLUSH, C_LERR, C_SAVE
  } st_t;
  typedef enum logic [2:0] { K_SENT, K_DB, K_EVT, K_PKT } kind_t;
  st_t   st_q, ret_q, disc_next_q;
  kind_t kind_q;

  logic [QW-1:0] q_q;
  hm_qp_ctx_t    ctx_q, ctx_rd;
  cdyn_t         d_q, dyn_rd;
  logic [15:0]   pi_q, pi_rd;
  hm_sent_t      sent_q;
  hm_roce_hdr_t  h_q;
  logic [15:0]   dbpi_q;

  // work selection in C_IDLE
  logic          take_ctl, take_evt, take_sent, take_db, take_pkt;
  logic [QW-1:0] sel_q;
  always_comb begin
    take_ctl  = st_q == C_IDLE && s_ctl_valid;
    take_evt  = st_q == C_IDLE && !s_ctl_valid && s_err_valid;
    take_sent = st_q == C_IDLE && !s_ctl_valid && !s_err_valid && s_sent_valid;
    take_db   = st_q == C_IDLE && !s_ctl_valid && !s_err_valid && !s_sent_valid && dbf_valid;
    take_pkt  = st_q == C_IDLE && !s_ctl_valid && !s_err_valid && !s_sent_valid && !dbf_valid && s_hdr_valid;
    sel_q = QW'(s_hdr.dest_qp);
    if (s_ctl_valid) sel_q = QW'(s_ctl_cmd.index);
    else if (s_err_valid) sel_q = QW'(s_err_qpn);
    else if (s_sent_valid) sel_q = QW'(s_sent.qpn);
    else if (dbf_valid) sel_q = QW'(dbf_data[31:16]);
  end
  assign s_ctl_ready  = st_q == C_CTL;
  assign s_err_ready  = take_evt;
  assign s_sent_ready = take_sent;
  assign dbf_pop      = take_db;
  assign s_hdr_ready  = take_pkt;

  always_ff @(posedge clk) begin
    ctx_rd <= ctx_mem[sel_q];
    dyn_rd <= dyn_mem[sel_q];
    pi_rd  <= pi_mem[sel_q];
  end

  // derived from the loaded QP
  logic [3:0]  lpmtu, lstride;
  logic [12:0] pmtu;
  logic [15:0] ring_mask;
  assign lpmtu     = 4'd7 + 4'(ctx_q.pmtu);
  assign pmtu      = 13'd1 << lpmtu;
  assign lstride   = 4'd6 + 4'(ctx_q.sq_log_stride);
  assign ring_mask = 16'((17'd1 << ctx_q.sq_log_size) - 17'd1);

  // the WQE at ci (one-entry cache)
  logic [WQE_MAX*8-1:0] wqe_q;
  logic                 wc_v_q;
  logic [QW-1:0]        wc_q;
  logic [15:0]          wc_idx_q;
  logic [3:0]           wb_q;
  logic                 wfetch_err_q, wchk_err_q;
  hm_sq_wqe_hdr_t       w;
  assign w = hm_sq_wqe_hdr_t'(wqe_q[255:0]);
  logic w_rdat, w_read, w_atomic;
  assign w_read   = w.opcode == HM_WQE_OP_READ;
  assign w_atomic = w.opcode == HM_WQE_OP_CMP_SWAP || w.opcode == HM_WQE_OP_FETCH_ADD;
  assign w_rdat   = w_read || w_atomic;
  logic [23:0] w_npsn, w_last;
  assign w_npsn = w_atomic ? 24'd1 :
                  (w.length == '0 ? 24'd1 : 24'((33'(w.length) + 33'(pmtu) - 33'd1) >> lpmtu));
  assign w_last = d_q.una + w_npsn - 24'd1;

  // PSN comparisons in the 2^23 window
  function automatic logic psn_ge(input logic [23:0] a, input logic [23:0] b);
    logic [23:0] d;
    d = a - b;
    return d < 24'h80_0000;   // a - b in [0, 2^23)
  endfunction

  // SGE j of the WQE
  function automatic hm_sge_t sge_at(input logic [WQE_MAX*8-1:0] wq, input logic first, input logic [3:0] j);
    logic [4:0] slot;
    slot = 5'(j) + 5'(first);
    return hm_sge_t'(wq[(256 + 128 * int'(slot)) +: 128]);
  endfunction

  // checks of the local SGL (READ / atomic)
  logic [4:0]  cj_q, cr_q;
  logic [3:0]  nsge;
  hm_sge_t     sge_c;
  assign nsge  = w_atomic ? 4'd1 : (w.num_sge > 8'd14 ? 4'd14 : 4'(w.num_sge));
  assign sge_c = sge_at(wqe_q, w_atomic, cj_q[3:0]);
  assign m_chk_key   = sge_c.lkey;
  assign m_chk_pd    = ctx_q.pd;
  assign m_chk_addr  = sge_c.addr;
  assign m_chk_len   = 64'(sge_c.len);
  assign m_chk_need  = 3'd1;
  assign m_chk_valid = st_q == C_WCHK && w_rdat && !flushing_q && cj_q < 5'(nsge);
  assign s_res_ready = st_q == C_WCHK;

  // WQE fetch
  logic [15:0] slot;
  assign slot         = d_q.ci & ring_mask;
  assign m_wrd_addr   = ctx_q.sq_base + (64'(slot) << lstride);
  assign m_wrd_len    = 32'd1 << lstride;
  assign m_wrd_valid  = st_q == C_WREQ;
  assign s_wqe_tready = st_q == C_WDATA;

  // response classification
  logic [2:0]  syn_cls;
  logic        is_ack, is_rresp, is_aack, rr_first, rr_last, rr_aeth;
  logic [23:0] p;
  assign p        = h_q.psn;
  assign syn_cls  = h_q.syndrome[7:5];
  assign is_ack   = h_q.opcode == 8'h11;
  assign is_rresp = h_q.opcode >= 8'h0D && h_q.opcode <= 8'h10;
  assign is_aack  = h_q.opcode == 8'h12;
  assign rr_first = h_q.opcode == 8'h0D || h_q.opcode == 8'h10;
  assign rr_last  = h_q.opcode == 8'h0F || h_q.opcode == 8'h10;
  assign rr_aeth  = h_q.opcode != 8'h0E;

  // READ response placement: SGL cursor
  logic [3:0]  sj_q;
  logic [31:0] soff_q, seek_q;
  logic [12:0] prem_q;
  hm_sge_t     sge_k;
  logic [31:0] s_avail;
  logic [12:0] take;
  assign sge_k   = sge_at(wqe_q, 1'b0, sj_q);
  assign s_avail = sge_k.len - soff_q;
  assign take    = s_avail < 32'(prem_q) ? 13'(s_avail) : prem_q;

  // retire bookkeeping
  logic [7:0]  rt_status_q;
  logic [31:0] wr_issued_q, wr_done_q;
  logic        flushing_q;      // retiring the rest of the queue with WR_FLUSH_ERR

  // pieces
  hm_sge_t sge_atom;
  assign sge_atom = sge_at(wqe_q, 1'b1, 4'd0);
  always_comb begin
    m_pc_discard = 1'b0;
    m_pc_imm     = 1'b0;
    m_pc_data    = h_q.atomic_orig;
    m_pc_last    = 1'b1;
    m_pc_len     = 13'd8;
    m_pc_addr    = sge_atom.addr;
    m_pc_valid   = 1'b0;
    case (st_q)
      C_DISCARD: begin m_pc_discard = 1'b1; m_pc_valid = 1'b1; end
      C_ATOMIC:  begin m_pc_imm = 1'b1; m_pc_valid = 1'b1; end
      C_PLACE: begin
        m_pc_len   = take;
        m_pc_addr  = sge_k.addr + 64'(soff_q);
        m_pc_last  = take == prem_q;
        m_pc_valid = s_avail != '0 && seek_q == '0;
      end
      default: ;
    endcase
  end

  // CQE
  logic [7:0] cqe_op;
  always_comb begin
    case (w.opcode)
      HM_WQE_OP_WRITE, HM_WQE_OP_WRITE_IMM: cqe_op = HM_CQE_OP_RDMA_WRITE;
      HM_WQE_OP_READ:                       cqe_op = HM_CQE_OP_RDMA_READ;
      HM_WQE_OP_CMP_SWAP:                   cqe_op = HM_CQE_OP_CMP_SWAP;
      HM_WQE_OP_FETCH_ADD:                  cqe_op = HM_CQE_OP_FETCH_ADD;
      default:                              cqe_op = HM_CQE_OP_SEND;
    endcase
    m_cqe = '0;
    m_cqe.cqn           = ctx_q.sq_cqn;
    m_cqe.cqe.wr_id     = w.wr_id;
    m_cqe.cqe.byte_len  = rt_status_q == HM_CQE_ST_SUCCESS ? w.length : 32'd0;
    m_cqe.cqe.qpn       = 32'(q_q);
    m_cqe.cqe.opcode    = cqe_op;
    m_cqe.cqe.status    = rt_status_q;
    m_cqe.cqe.wqe_index = d_q.ci;
  end
  // a WQE is retired with a CQE when signaled or in error
  logic need_cqe;
  assign need_cqe   = w.flags[0] || rt_status_q != HM_CQE_ST_SUCCESS;
  assign m_cqe_valid = st_q == C_RETIRE && need_cqe && !wfetch_err_q;
  assign m_err_qpn   = 16'(q_q);
  assign m_err_valid = st_q == C_ERRNOTE;

  hm_qp_ctx_t ctl_ctx;
  assign ctl_ctx = hm_qp_ctx_t'(s_ctl_data[CTXW-1:0]);

  always_ff @(posedge clk) begin
    if (st_q == C_CTL) begin
      ctx_mem[QW'(s_ctl_cmd.index)] <= ctl_ctx;
      if ((s_ctl_cmd.flags & HM_CTL_F_LOAD_SQ) != 0) begin
        dyn_mem[QW'(s_ctl_cmd.index)] <= '{ci: 16'd0, una: ctl_ctx.sq_psn, shead: 16'd0,
                                           spsn: ctl_ctx.sq_psn, rd_done: 24'd0, lerr_v: 1'b0,
                                           lerr_st: 8'd0, lerr_idx: 16'd0,
                                           err: ctl_ctx.state == HM_QPS_ERR};
        pi_mem[QW'(s_ctl_cmd.index)] <= 16'd0;
      end else if (ctl_ctx.state == HM_QPS_ERR) begin
        // the control plane moved the QP to ERR: the next doorbell or event flushes it
        dyn_mem[QW'(s_ctl_cmd.index)].err <= 1'b1;
      end
    end
    if (st_q == C_SAVE) begin
      dyn_mem[q_q] <= d_q;
      if (kind_q == K_DB) pi_mem[q_q] <= pi_q;
    end
  end

  always_ff @(posedge clk) begin
    if (rst) begin
      st_q           <= C_IDLE;
      wc_v_q         <= 1'b0;
      wr_issued_q    <= '0;
      wr_done_q      <= '0;
      stat_acks      <= '0;
      stat_dropped   <= '0;
      stat_unhandled <= '0;
      stat_wr_err    <= '0;
    end else begin
      if (s_done_valid) begin
        wr_done_q <= wr_done_q + 1'b1;
        if (s_done_err) stat_wr_err <= stat_wr_err + 1'b1;
      end
      if (m_pc_valid && m_pc_ready && !m_pc_discard) wr_issued_q <= wr_issued_q + 1'b1;
      case (st_q)
        C_IDLE: begin
          q_q        <= sel_q;
          flushing_q <= 1'b0;
          if (take_ctl) st_q <= C_CTL;
          else if (take_evt) begin kind_q <= K_EVT; st_q <= C_LOAD; end
          else if (take_sent) begin kind_q <= K_SENT; sent_q <= s_sent; st_q <= C_LOAD; end
          else if (take_db) begin kind_q <= K_DB; dbpi_q <= dbf_data[15:0]; st_q <= C_LOAD; end
          else if (take_pkt) begin
            kind_q <= K_PKT;
            h_q    <= s_hdr;
            disc_next_q <= C_IDLE;
            st_q   <= (s_hdr.dest_qp >> QW) == '0 ? C_LOAD : (s_hdr.payload_len != 0 ? C_DISCARD : C_IDLE);
            if ((s_hdr.dest_qp >> QW) != '0) stat_dropped <= stat_dropped + 1'b1;
          end
        end
        C_CTL: begin
          wc_v_q <= 1'b0;
          st_q   <= C_IDLE;
        end
        C_LOAD: begin
          ctx_q <= ctx_rd;
          d_q   <= dyn_rd;
          pi_q  <= pi_rd;
          st_q  <= C_DISPATCH;
        end
        C_DISPATCH: begin
          case (kind_q)
            K_SENT: begin
              if (sent_q.status == HM_CQE_ST_SUCCESS) begin
                d_q.shead <= sent_q.wqe_idx + 1'b1;
                d_q.spsn  <= sent_q.first_psn + sent_q.npsn;
                st_q      <= C_SAVE;
              end else begin
                d_q.lerr_v   <= 1'b1;
                d_q.lerr_st  <= sent_q.status;
                d_q.lerr_idx <= sent_q.wqe_idx;
                st_q         <= C_SAVE;        // reported once every earlier WQE completed
              end
            end
            K_DB: begin
              pi_q <= dbpi_q;
              st_q <= d_q.err ? C_FLUSH : C_SAVE;
              flushing_q <= d_q.err;
            end
            K_EVT: begin
              d_q.err    <= 1'b1;
              flushing_q <= 1'b1;
              st_q       <= d_q.err ? C_SAVE : C_FLUSH;
            end
            default: begin   // K_PKT
              logic ok;
              ok = (ctx_q.state == HM_QPS_RTS || ctx_q.state == HM_QPS_SQD) && !d_q.err;
              if (is_ack && syn_cls == 3'd0)
                ok = ok && psn_ge(p + 24'd1, d_q.una) && psn_ge(d_q.spsn, p + 24'd1);
              else
                ok = ok && psn_ge(p, d_q.una) && psn_ge(d_q.spsn - 24'd1, p) && d_q.spsn != d_q.una;
              if (is_ack) stat_acks <= stat_acks + 1'b1;
              if (!ok) begin
                stat_dropped <= stat_dropped + 1'b1;
                disc_next_q  <= C_IDLE;
                st_q <= h_q.payload_len != 0 ? C_DISCARD : C_IDLE;
              end else begin
                st_q <= C_RL;
              end
            end
          endcase
        end

        // retire loop: SEND/WRITE WQEs covered by the packet (or all due ones)
        C_RL: begin
          if (d_q.ci == d_q.shead) st_q <= C_AFTER;
          else if (!(wc_v_q && wc_q == q_q && wc_idx_q == d_q.ci)) begin
            ret_q <= C_RL;
            st_q  <= C_WREQ;
          end else if (w_rdat) st_q <= C_AFTER;
          else begin
            logic due;
            if (kind_q != K_PKT) due = 1'b0;
            else if (is_ack && syn_cls == 3'd0) due = psn_ge(p, w_last);
            else due = psn_ge(p - 24'd1, w_last);
            if (due) begin
              rt_status_q <= HM_CQE_ST_SUCCESS;
              ret_q       <= C_RL;
              st_q        <= C_RETIRE;
            end else st_q <= C_AFTER;
          end
        end
        C_WREQ: if (m_wrd_ready) begin
          wb_q         <= '0;
          wfetch_err_q <= 1'b0;
          st_q         <= C_WDATA;
        end
        C_WDATA: if (s_wqe_tvalid) begin
          if (32'(wb_q) * KW < WQE_MAX) wqe_q[int'(wb_q) * DATA_WIDTH +: DATA_WIDTH] <= s_wqe_tdata;
          wb_q <= wb_q + 1'b1;
          if (s_wqe_tuser) wfetch_err_q <= 1'b1;
          if (s_wqe_tlast) begin
            wc_v_q     <= 1'b1;
            wc_q       <= q_q;
            wc_idx_q   <= d_q.ci;
            cj_q       <= '0;
            cr_q       <= '0;
            wchk_err_q <= 1'b0;
            st_q       <= C_WCHK;
          end
        end
        C_WCHK: begin
          // READ / atomic SGLs are checked again before anything is written into them
          if (!w_rdat || flushing_q) st_q <= ret_q;
          else begin
            if (m_chk_valid && m_chk_ready) cj_q <= cj_q + 1'b1;
            if (s_res_valid) begin
              cr_q <= cr_q + 1'b1;
              if (!s_res_ok) wchk_err_q <= 1'b1;
            end
            if (cr_q == 5'(nsge)) st_q <= ret_q;
          end
        end

        // after the retire loop: what the packet / event asks for
        C_AFTER: begin
          disc_next_q <= C_SAVE;
          if (kind_q != K_PKT) begin
            st_q <= C_SAVE;
          end else if (kind_q == K_PKT && is_ack && syn_cls == 3'd3 &&
                       h_q.syndrome >= 8'h61 && h_q.syndrome <= 8'h63 && d_q.ci != d_q.shead) begin
            // error NAK: the oldest WQE fails, the QP goes to ERR
            if (!(wc_v_q && wc_q == q_q && wc_idx_q == d_q.ci)) begin
              ret_q <= C_AFTER;
              st_q  <= C_WREQ;
            end else begin
              rt_status_q <= h_q.syndrome == 8'h61 ? HM_CQE_ST_REM_INV_REQ_ERR :
                             h_q.syndrome == 8'h62 ? HM_CQE_ST_REM_ACCESS_ERR : HM_CQE_ST_REM_OP_ERR;
              d_q.err     <= 1'b1;
              flushing_q  <= 1'b1;
              ret_q       <= C_ERRNOTE;
              st_q        <= C_RETIRE;
            end
          end else if (kind_q == K_PKT && is_rresp) begin
            logic okr;
            logic [31:0] off, exp_len;
            off     = 32'(d_q.rd_done) << lpmtu;
            exp_len = (w.length - off) > 32'(pmtu) ? 32'(pmtu) : w.length - off;
            okr = d_q.ci != d_q.shead && wc_v_q && wc_q == q_q && wc_idx_q == d_q.ci && w_read &&
                  p == d_q.una + d_q.rd_done && !(rr_aeth && syn_cls != 3'd0) &&
                  rr_first == (d_q.rd_done == '0) && rr_last == (d_q.rd_done + 24'd1 == w_npsn) &&
                  32'(h_q.payload_len) == exp_len;
            if (!okr) begin
              if (d_q.ci != d_q.shead && wc_v_q && w_rdat && psn_ge(p, d_q.una)) stat_unhandled <= stat_unhandled + 1'b1;
              else stat_dropped <= stat_dropped + 1'b1;
              st_q <= h_q.payload_len != 0 ? C_DISCARD : C_SAVE;
            end else if (wchk_err_q || wfetch_err_q) begin
              rt_status_q <= HM_CQE_ST_LOC_PROT_ERR;
              d_q.err     <= 1'b1;
              flushing_q  <= 1'b1;
              ret_q       <= C_ERRNOTE;
              disc_next_q <= C_RETIRE;
              st_q        <= h_q.payload_len != 0 ? C_DISCARD : C_RETIRE;
            end else begin
              sj_q   <= '0;
              soff_q <= '0;
              seek_q <= off;
              prem_q <= 13'(h_q.payload_len);
              st_q   <= h_q.payload_len != 0 ? C_PLACE : C_WAITWR;
            end
          end else if (kind_q == K_PKT && is_aack) begin
            if (d_q.ci != d_q.shead && wc_v_q && wc_q == q_q && wc_idx_q == d_q.ci && w_atomic &&
                p == d_q.una && syn_cls == 3'd0) begin
              if (wchk_err_q || wfetch_err_q) begin
                rt_status_q <= HM_CQE_ST_LOC_PROT_ERR;
                d_q.err     <= 1'b1;
                flushing_q  <= 1'b1;
                ret_q       <= C_ERRNOTE;
                st_q        <= C_RETIRE;
              end else st_q <= C_ATOMIC;
            end else begin
              stat_dropped <= stat_dropped + 1'b1;
              st_q <= C_SAVE;
            end
          end else begin
            if (kind_q == K_PKT && is_ack && syn_cls != 3'd0) stat_unhandled <= stat_unhandled + 1'b1;
            else if (kind_q == K_PKT && is_ack && d_q.ci != d_q.shead && wc_v_q && w_rdat &&
                     psn_ge(p, d_q.una)) stat_unhandled <= stat_unhandled + 1'b1;  // implied NAK
            st_q <= (kind_q == K_PKT && h_q.payload_len != 0) ? C_DISCARD : C_SAVE;
          end
        end

        C_PLACE: begin
          if (seek_q != '0) begin
            // move the cursor to the packet's offset in the SGL
            if (seek_q >= sge_k.len && sj_q != 4'd15) begin
              seek_q <= seek_q - sge_k.len;
              sj_q   <= sj_q + 1'b1;
            end else begin
              soff_q <= seek_q;
              seek_q <= '0;
            end
          end else if (s_avail == '0) begin
            if (sj_q != 4'd15) sj_q <= sj_q + 1'b1;
            soff_q <= '0;
          end else if (m_pc_ready) begin
            prem_q <= prem_q - take;
            if (32'(take) == s_avail) begin sj_q <= sj_q + 1'b1; soff_q <= '0; end
            else soff_q <= soff_q + 32'(take);
            if (take == prem_q) st_q <= C_WAITWR;
          end
        end
        C_ATOMIC: if (m_pc_ready) st_q <= C_WAITWR;
        C_WAITWR: begin
          // READ response / atomic result placed: count it, retire at the end
          if (is_rresp && !rr_last) begin
            d_q.rd_done <= d_q.rd_done + 1'b1;
            st_q        <= C_SAVE;
          end else if (wr_done_q == wr_issued_q) begin
            d_q.rd_done <= '0;
            rt_status_q <= HM_CQE_ST_SUCCESS;
            ret_q       <= C_SAVE;
            st_q        <= C_RETIRE;
          end
        end
        C_DISCARD: if (m_pc_ready) st_q <= disc_next_q;

        C_RETIRE: begin
          if (!need_cqe || wfetch_err_q || m_cqe_ready) begin
            d_q.ci  <= d_q.ci + 1'b1;
            d_q.una <= d_q.una + w_npsn;
            wc_v_q  <= 1'b0;
            st_q    <= ret_q;
          end
        end
        C_ERRNOTE: if (m_err_ready) st_q <= C_FLUSH;   // then flush from the next WQE
        C_FLUSH: begin
          // every WQE posted and not completed: WR_FLUSH_ERR
          if (d_q.ci == pi_q) st_q <= C_SAVE;
          else if (!(wc_v_q && wc_q == q_q && wc_idx_q == d_q.ci)) begin
            ret_q <= C_FLUSH;
            st_q  <= C_WREQ;
          end else begin
            rt_status_q <= HM_CQE_ST_WR_FLUSH_ERR;
            ret_q       <= C_FLUSH;
            st_q        <= C_RETIRE;
          end
        end
        C_LERR: begin
          // a local error completes once every earlier WQE has completed
          if (!(wc_v_q && wc_q == q_q && wc_idx_q == d_q.ci)) begin
            ret_q <= C_LERR;
            st_q  <= C_WREQ;
          end else begin
            rt_status_q <= d_q.lerr_st;
            d_q.lerr_v  <= 1'b0;
            d_q.err     <= 1'b1;
            flushing_q  <= 1'b1;
            ret_q       <= C_ERRNOTE;
            st_q        <= C_RETIRE;
          end
        end
        C_SAVE: begin
          if (d_q.lerr_v && d_q.ci == d_q.lerr_idx && !d_q.err) st_q <= C_LERR;
          else st_q <= C_IDLE;
        end
        default: st_q <= C_IDLE;
      endcase
    end
  end

  /* verilator lint_off UNUSEDSIGNAL */
  logic unused_ok;
  assign unused_ok = ^{dbf_level, s_ctl_data, h_q, sent_q, w, sge_k, sge_c, sge_atom, ctx_q, d_q, s_wqe_tdata, s_ctl_cmd, s_err_qpn};
  /* verilator lint_on UNUSEDSIGNAL */
  /* verilator lint_off UNUSEDSIGNAL */
  /* verilator lint_on UNUSEDSIGNAL */

  if ((1 << QW) != NUM_QPS) begin : g_bad_qps
    $error("hm_rc_compl: NUM_QPS must be a power of two");
  end
endmodule
