// Completion queues: writes CQEs into the CQ rings in host memory and raises the CQ's
// interrupt vector when it is armed.
//
// Per CQ: the context written by the control bus (base, 2^log_size entries, vector, valid),
// the producer index (reset by a context write with HM_CTL_F_LOAD_CQ), and from CQ
// doorbells the consumer index and the arm state (next completion / next solicited). Entry
// i of the ring is written with owner = the phase of the pass (1 on the first pass over the
// ring, then alternating), so software owns it when the owner bit equals the phase it
// expects. A CQE for a CQ that is full (producer - consumer = size) is not written: it is
// counted as an overrun (stats.overrun) and the CQ is marked overrun, so no entry software
// has not consumed is ever overwritten; a CQE for an invalid CQ is counted and dropped.
// An interrupt is signalled only after the CQE write that caused it has completed, and
// arming a CQ that already holds unconsumed entries signals at once.
module hm_rc_cq
  import hm_pkg::*;
  import hm_desc_pkg::*;
  import hm_regs_pkg::*;
  import hm_eng_pkg::*;
#(
  // Datapath width in bits (256 or 512).
  parameter int DATA_WIDTH = 512,
  // CQ table entries (power of two).
  parameter int NUM_CQS = 4096,
  // QP table entries (a CQE's QPN is written as the host knows it: hm_qpn_swap).
  parameter int NUM_QPS = 4096,
  // Bytes per beat, CQN bits, staging words (derived).
  localparam int KEEP_WIDTH = DATA_WIDTH / 8,
  localparam int CW = $clog2(NUM_CQS),
  localparam int SW = int'(HM_CTL_STAGE_WORDS)
) (
  input  logic                  clk,
  input  logic                  rst,

  // CQ context writes
  input  hm_ctl_cmd_t           s_ctl_cmd,
  input  logic [SW*32-1:0]      s_ctl_data,
  input  logic                  s_ctl_valid,
  output logic                  s_ctl_ready,

  // CQ doorbells
  input  hm_regs_pkg::hm_db_cq_t s_db,
  input  logic                  s_db_valid,
  output logic                  s_db_ready,

  // CQE requests (two producers)
  input  hm_cqe_req_t           s_a,
  input  logic                  s_a_valid,
  output logic                  s_a_ready,
  input  hm_cqe_req_t           s_b,
  input  logic                  s_b_valid,
  output logic                  s_b_ready,

  // DMA writes of CQEs
  output hm_dma_req_t           m_wr,
  output logic                  m_wr_valid,
  input  logic                  m_wr_ready,
  output logic [DATA_WIDTH-1:0] m_axis_tdata,
  output logic [KEEP_WIDTH-1:0] m_axis_tkeep,
  output logic                  m_axis_tvalid,
  input  logic                  m_axis_tready,
  output logic                  m_axis_tlast,
  input  logic                  s_done_valid,
  input  logic                  s_done_err,
  output logic                  s_done_ready,

  // A CQ found full for the first time since its context was loaded (registered pulse)
  output logic [15:0]           m_ovr_cqn,
  output logic                  m_ovr_valid,

  // Interrupts (MSI-X style: one message per event)
  output logic [7:0]            m_irq_vec,
  output logic                  m_irq_valid,
  input  logic                  m_irq_ready,

  // Counters
  output hm_cq_stats_t          stats,
  // Per-QP counter events (an error CQE written)
  output hm_qpc_ev_t            m_qpc,
  output logic                  m_qpc_valid
);
  localparam int CTXW = $bits(hm_cq_ctx_t);

  hm_cq_ctx_t  ctx_mem [NUM_CQS];
  logic [15:0] pi_mem  [NUM_CQS];
  logic [15:0] ci_mem  [NUM_CQS];
  logic [1:0]  arm_mem [NUM_CQS];
  logic        ovr_mem [NUM_CQS];

  typedef enum logic [2:0] { Q_IDLE, Q_CTL, Q_DB, Q_LOAD, Q_CQE, Q_DATA } st_t;
  st_t st_q;

  // request selection (round-robin between the two producers)
  logic        pick_b_q, sel_b;
  hm_cqe_req_t req_q;
  assign sel_b     = s_b_valid && (!s_a_valid || pick_b_q);
  assign s_a_ready = st_q == Q_IDLE && !s_ctl_valid && !s_db_valid && s_a_valid && !sel_b;
  assign s_b_ready = st_q == Q_IDLE && !s_ctl_valid && !s_db_valid && sel_b;
  assign s_ctl_ready = st_q == Q_CTL;
  assign s_db_ready  = st_q == Q_IDLE && !s_ctl_valid;

  // registered reads
  logic [CW-1:0] rd_idx;
  hm_cq_ctx_t    ctx_rd;
  logic [15:0]   pi_rd, ci_rd;
  logic [1:0]    arm_rd;
  logic          ovr_rd;
  always_ff @(posedge clk) begin
    ctx_rd <= ctx_mem[rd_idx];
    pi_rd  <= pi_mem[rd_idx];
    ci_rd  <= ci_mem[rd_idx];
    arm_rd <= arm_mem[rd_idx];
    ovr_rd <= ovr_mem[rd_idx];
  end

  hm_regs_pkg::hm_db_cq_t db_q;
  logic          db_pending_q;
  logic [CW-1:0] cq_q;
  hm_cq_ctx_t    ctx_q;
  logic [15:0]   pi_q, ci_q;
  logic [1:0]    arm_q;
  logic          ovr_q;
  logic [15:0]   size;
  assign size = 16'(17'd1 << ctx_q.log_size);

  always_comb begin
    rd_idx = CW'(s_a.cqn);
    if (s_ctl_valid) rd_idx = CW'(s_ctl_cmd.index);
    else if (s_db_valid) rd_idx = CW'(s_db.cqn);
    else if (sel_b) rd_idx = CW'(s_b.cqn);
  end

  // interrupts wait for the completion of the CQE write before them
  logic [31:0] wr_issued_q, wr_done_q;
  logic        irq_push, irq_room, irq_head_v;
  logic [39:0] irq_head;
  logic [7:0]  irq_vec_d;
  logic [31:0] irq_seq_d;
  logic [$clog2(8+1):0] irq_level;
  hm_fifo #(.WIDTH(40), .DEPTH(8)) u_irq (
    .clk, .rst,
    .s_data({irq_vec_d, irq_seq_d}), .s_valid(irq_push), .s_ready(irq_room),
    .m_data(irq_head), .m_valid(irq_head_v), .m_ready(m_irq_valid && m_irq_ready),
    .level(irq_level)
  );
  assign m_irq_vec    = irq_head[39:32];
  assign m_irq_valid  = irq_head_v && $signed(wr_done_q - irq_head[31:0]) >= 0;
  assign s_done_ready = 1'b1;

  // CQE data
  hm_cqe_t cqe_w;
  logic    valid_cq, full, wants_irq;
  always_comb begin
    cqe_w = req_q.cqe;
    if (req_q.cqe.opcode != HM_CQE_OP_EVENT) cqe_w.qpn = 32'(hm_qpn_swap(req_q.cqe.qpn[23:0], $clog2(NUM_QPS)));
    cqe_w.flags[7] = ~pi_q[ctx_q.log_size[3:0]];    // owner = phase of this pass (log_size <= 15)
    valid_cq  = ctx_q.valid && !ovr_q;
    full      = (pi_q - ci_q) == size;
    wants_irq = arm_q == 2'd1 || (arm_q == 2'd2 && req_q.solicited);
  end
  logic [15:0] slot;
  assign slot          = pi_q & (size - 16'd1);
  assign m_wr.addr     = ctx_q.base + (64'(slot) << 5);
  assign m_wr.len      = 32'd32;
  // (a CQE for an invalid or full CQ is not written: no request either, else the next
  // CQE's data would go to this one's address)
  assign m_wr_valid    = st_q == Q_CQE && valid_cq && !full;
  assign m_axis_tdata  = DATA_WIDTH'(cqe_w);
  assign m_axis_tkeep  = KEEP_WIDTH'({32{1'b1}});
  assign m_axis_tlast  = 1'b1;
  assign m_axis_tvalid = st_q == Q_DATA;

  always_comb begin
    irq_push  = 1'b0;
    irq_vec_d = ctx_q.irq_vec;
    irq_seq_d = wr_issued_q;
    if (st_q == Q_DB && db_q.arm != 2'd0 && ctx_q.valid && pi_q != db_q.ci) irq_push = irq_room;
    if (st_q == Q_DATA && m_axis_tready && wants_irq) irq_push = irq_room;
  end

  always_ff @(posedge clk) begin
    case (st_q)
      Q_CTL: begin
        ctx_mem[CW'(s_ctl_cmd.index)] <= hm_cq_ctx_t'(s_ctl_data[CTXW-1:0]);
        if ((s_ctl_cmd.flags & HM_CTL_F_LOAD_CQ) != 0) begin
          pi_mem[CW'(s_ctl_cmd.index)]  <= '0;
          ci_mem[CW'(s_ctl_cmd.index)]  <= '0;
          arm_mem[CW'(s_ctl_cmd.index)] <= '0;
          ovr_mem[CW'(s_ctl_cmd.index)] <= 1'b0;
        end
      end
      Q_DB: begin
        ci_mem[cq_q] <= db_q.ci;
        // arming with unconsumed entries signals now and leaves the CQ disarmed
        if (db_q.arm != 2'd0 && !(ctx_q.valid && pi_q != db_q.ci && irq_room))
          arm_mem[cq_q] <= db_q.arm;
        else if (db_q.arm != 2'd0)
          arm_mem[cq_q] <= 2'd0;
      end
      Q_LOAD: ;
      Q_DATA: if (m_axis_tready) begin
        pi_mem[cq_q] <= pi_q + 1'b1;
        if (wants_irq && irq_room) arm_mem[cq_q] <= 2'd0;
      end
      default: ;
    endcase
    if (st_q == Q_CQE && !valid_cq) ;
    else if (st_q == Q_CQE && full) ovr_mem[cq_q] <= 1'b1;
  end

  always_ff @(posedge clk) begin
    if (rst) begin
      st_q         <= Q_IDLE;
      pick_b_q     <= 1'b0;
      wr_issued_q  <= '0;
      wr_done_q    <= '0;
      stats <= '0;
      m_qpc_valid <= 1'b0;
    end else begin
      m_qpc_valid <= 1'b0;
      m_qpc       <= '{qpn: req_q.cqe.qpn[15:0], mask: '0};
      if (s_done_valid) begin
        wr_done_q <= wr_done_q + 1'b1;
        if (s_done_err) stats.wr_err <= stats.wr_err + 1'b1;
      end
      case (st_q)
        Q_IDLE: begin
          cq_q <= rd_idx;
          if (s_ctl_valid) st_q <= Q_CTL;
          else if (s_db_valid) begin
            db_q <= s_db;
            st_q <= (32'(s_db.cqn) < NUM_CQS) ? Q_LOAD : Q_IDLE;
          end else if (s_a_valid || s_b_valid) begin
            req_q    <= sel_b ? s_b : s_a;
            pick_b_q <= !sel_b;
            if ((sel_b ? {16'd0, s_b.cqn} : {16'd0, s_a.cqn}) < 32'(NUM_CQS)) st_q <= Q_LOAD;
            else stats.dropped <= stats.dropped + 1'b1;
          end
        end
        Q_CTL: st_q <= Q_IDLE;
        Q_LOAD: begin
          ctx_q <= ctx_rd;
          pi_q  <= pi_rd;
          ci_q  <= ci_rd;
          arm_q <= arm_rd;
          ovr_q <= ovr_rd;
          st_q  <= db_pending_q ? Q_DB : Q_CQE;
        end
        Q_DB: st_q <= Q_IDLE;
        Q_CQE: begin
          if (!valid_cq) begin
            stats.dropped <= stats.dropped + 1'b1;
            st_q <= Q_IDLE;
          end else if (full) begin
            stats.overrun <= stats.overrun + 1'b1;
            st_q <= Q_IDLE;
          end else if (m_wr_ready) begin
            wr_issued_q <= wr_issued_q + 1'b1;
            st_q <= Q_DATA;
          end
        end
        Q_DATA: if (m_axis_tready) begin
          stats.cqes <= stats.cqes + 1'b1;
          if (req_q.cqe.opcode != HM_CQE_OP_EVENT && req_q.cqe.status != HM_CQE_ST_SUCCESS) begin
            m_qpc_valid <= 1'b1;
            m_qpc.mask[hm_pkg::HM_QPC_CQE_ERR] <= 1'b1;
            for (int k = 0; k < hm_pkg::HM_CQE_ERR_STATUSES; k++)
              if (req_q.cqe.status == 8'(k + 1)) stats.err_st[k] <= stats.err_st[k] + 1'b1;
            if ((req_q.cqe.flags & HM_CQE_F_RQ) != 8'd0) begin
              stats.err_rq <= stats.err_rq + 1'b1;
              if (req_q.cqe.status == HM_CQE_ST_WR_FLUSH_ERR) stats.flush_rq <= stats.flush_rq + 1'b1;
            end
          end
          st_q <= Q_IDLE;
        end
        default: st_q <= Q_IDLE;
      endcase
    end
  end

  // which kind of work Q_LOAD serves
  always_ff @(posedge clk) begin
    if (rst) db_pending_q <= 1'b0;
    else if (st_q == Q_IDLE) db_pending_q <= !s_ctl_valid && s_db_valid;
  end

  // overrun event: the first CQE that finds its CQ full (ovr_q: already marked overrun)
  always_ff @(posedge clk) begin
    m_ovr_cqn   <= 16'(cq_q);
    m_ovr_valid <= !rst && st_q == Q_CQE && valid_cq && full && !ovr_q;
  end

  logic unused_ok;
  assign unused_ok = ^{irq_level, s_ctl_data, s_ctl_cmd, req_q, db_q};

  if ((1 << CW) != NUM_CQS || NUM_CQS > 16384) begin : g_bad_cqs
    $error("hm_rc_cq: NUM_CQS must be a power of two up to 16384");
  end
endmodule
