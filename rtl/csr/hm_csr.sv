// BAR0 register block: AXI4-Lite slave (32-bit data) with identity, capabilities, a scratch
// register, doorbells and read-only counters (register map: rtl/pkg/hm_regs_pkg.sv).
//
// Doorbell writes become events on m_db (valid/ready) in write order; when the event FIFO is
// full the write is held (AWREADY/WREADY stay low), so no doorbell is ever dropped. Accesses
// to unmapped offsets, misaligned offsets, writes to read-only registers, reads of write-only
// registers and doorbell writes without all four strobes are answered with SLVERR, change
// nothing and are counted (HM_REG_ERR_COUNT).
//
// A QPC_SEL write asks for a QP's counters on m_qpc_rd (held, with its QPN, until taken);
// QPC_SEL.busy reads 1 until s_qpc_valid brings them, and QPC[k] reads s_qpc_data[k]. A
// second QPC_SEL write while busy is held. After reset QPC_SEL.busy also reads 1 while the
// per-QP counters are being cleared (s_qpc_init): a driver waits for it before it counts on
// them.
module hm_csr
  import hm_pkg::*;
  import hm_regs_pkg::*;
  import hm_eng_pkg::*;
#(
  // AXI4-Lite address width (BAR size 2^ADDR_WIDTH bytes).
  parameter int ADDR_WIDTH = 16,
  // Number of counters exposed at HM_REG_CNT (1..255).
  parameter int NUM_COUNTERS = 16,
  // Capabilities reported in HM_REG_CAPS.
  parameter int LOG2_QPS = 12,
  parameter int LOG2_CQS = 12,
  parameter int DATA_WIDTH = 512,
  // Doorbell event FIFO depth (power of two).
  parameter int DB_FIFO_DEPTH = 16
) (
  input  logic                  clk,
  input  logic                  rst,

  input  hm_axil_req_t          s_axil_req,
  output hm_axil_rsp_t          s_axil_rsp,

  // Doorbell events
  output hm_db_evt_t            m_db_data,
  output logic                  m_db_valid,
  input  logic                  m_db_ready,

  // Counters to expose
  input  logic [NUM_COUNTERS-1:0][31:0] counters,

  // Per-QP counters: the request (a QPN, held until taken); the counters it brings (with a
  // one-cycle s_qpc_valid); s_qpc_init while every QP's are being cleared after reset
  output logic [15:0]           m_qpc_rd_qpn,
  output logic                  m_qpc_rd_valid,
  input  logic                  m_qpc_rd_ready,
  input  logic [HM_QPC_COUNT-1:0][31:0] s_qpc_data,
  input  logic                  s_qpc_valid, s_qpc_init
);
  localparam int NUM_QPC = HM_QPC_COUNT;   // per-QP counters readable at HM_REG_QPC
  localparam hm_caps_t CAPS = '{log2_qps: 8'(LOG2_QPS), log2_cqs: 8'(LOG2_CQS),
                                data_bytes: 8'(DATA_WIDTH / 64), num_counters: 8'(NUM_COUNTERS)};

  logic [ADDR_WIDTH-1:0] wr_addr, rd_addr;
  logic [31:0]           wr_data, rd_data;
  logic [3:0]            wr_strb;
  logic                  wr_pend, wr_err, wr_stall, wr_do, rd_do, rd_err;

  hm_axil_fe #(.ADDR_WIDTH(ADDR_WIDTH)) u_fe (
    .clk, .rst,
    .s_axil_req, .s_axil_rsp,
    .wr_pend, .wr_addr, .wr_data, .wr_strb, .wr_err, .wr_stall, .wr_do,
    .rd_do, .rd_addr, .rd_data, .rd_err
  );

  // ----------------------------------------------------------------------------------------
  // Writes: the scratch register and the doorbells
  // ----------------------------------------------------------------------------------------
  logic [31:0] scratch_q, db_count_q, err_count_q, err_count;
  logic [1:0]  err_inc_q;     // refused accesses of the last cycle, not yet in err_count_q
  logic        qpc_busy_q;
  logic        dbf_ready, db_push, is_db;
  logic [1:0]  db_kind;

  always_comb begin
    logic [15:0] a;
    a = 16'(wr_addr);
    is_db   = 1'b0;
    db_kind = HM_DB_SQ;
    wr_err  = 1'b0;
    if (a == HM_REG_DB_SQ) begin is_db = 1'b1; db_kind = HM_DB_SQ; end
    else if (a == HM_REG_DB_RQ) begin is_db = 1'b1; db_kind = HM_DB_RQ; end
    else if (a == HM_REG_DB_CQ) begin is_db = 1'b1; db_kind = HM_DB_CQ; end
    if (is_db || a == HM_REG_QPC_SEL) wr_err = wr_strb != 4'hF;
    else if (a != HM_REG_SCRATCH) wr_err = 1'b1;
    if (ADDR_WIDTH > 16 && (wr_addr >> 16) != '0) wr_err = 1'b1;
    // a doorbell waits for room in the event FIFO, a QP counter request for the last one
    wr_stall = (is_db && !dbf_ready) || (a == HM_REG_QPC_SEL && (qpc_busy_q || m_qpc_rd_valid));
  end

  always_ff @(posedge clk) begin
    if (rst) begin
      qpc_busy_q     <= 1'b0;
      m_qpc_rd_valid <= 1'b0;
      m_qpc_rd_qpn   <= '0;
    end else begin
      if (wr_do && !wr_err && 16'(wr_addr) == HM_REG_QPC_SEL) begin
        m_qpc_rd_valid <= 1'b1;
        m_qpc_rd_qpn   <= wr_data[15:0];
        qpc_busy_q     <= 1'b1;
      end else if (m_qpc_rd_valid && m_qpc_rd_ready) m_qpc_rd_valid <= 1'b0;
      if (s_qpc_valid) qpc_busy_q <= 1'b0;
    end
  end
  assign db_push = wr_do && is_db && !wr_err;

  always_ff @(posedge clk) begin
    if (rst) begin
      scratch_q   <= '0;
      db_count_q  <= '0;
      err_count_q <= '0;
      err_inc_q   <= '0;
    end else begin
      if (wr_do && !wr_err && !is_db && 16'(wr_addr) == HM_REG_SCRATCH)
        for (int b = 0; b < 4; b++) if (wr_strb[b]) scratch_q[8*b +: 8] <= wr_data[8*b +: 8];
      if (db_push) db_count_q <= db_count_q + 1'b1;
      // (counted a cycle late, off the address decode's path; a read sees them at once)
      err_inc_q   <= 2'(wr_do && wr_err) + 2'(rd_do && rd_err);
      err_count_q <= err_count;
    end
  end

  assign err_count = err_count_q + 32'(err_inc_q);

  logic [$clog2(DB_FIFO_DEPTH+1):0] dbf_level;
  hm_fifo #(.WIDTH($bits(hm_db_evt_t)), .DEPTH(DB_FIFO_DEPTH)) u_db_fifo (
    .clk, .rst,
    .s_data({db_kind, wr_data}), .s_valid(db_push), .s_ready(dbf_ready),
    .m_data(m_db_data), .m_valid(m_db_valid), .m_ready(m_db_ready),
    .level(dbf_level)
  );

  // ----------------------------------------------------------------------------------------
  // Reads
  // ----------------------------------------------------------------------------------------
  always_comb begin
    logic [15:0] a;
    a = 16'(rd_addr);
    rd_err  = 1'b1;
    rd_data = '0;
    if (ADDR_WIDTH <= 16 || (rd_addr >> 16) == '0) begin
      rd_err = 1'b0;
      if (a == HM_REG_ID)             rd_data = HM_REG_ID_RESET;
      else if (a == HM_REG_VERSION)   rd_data = HM_REG_VERSION_RESET;
      else if (a == HM_REG_CAPS)      rd_data = CAPS;
      else if (a == HM_REG_SCRATCH)   rd_data = scratch_q;
      else if (a == HM_REG_DB_COUNT)  rd_data = db_count_q;
      else if (a == HM_REG_ERR_COUNT) rd_data = err_count;
      else if (a == HM_REG_QPC_SEL)   rd_data = {qpc_busy_q || s_qpc_init, 15'd0, m_qpc_rd_qpn};
      else if (a[15:6] == HM_REG_QPC[15:6] && a[1:0] == 2'b00)   // 16 words, 64-byte aligned
        rd_data = 32'(a[5:2]) < NUM_QPC ? s_qpc_data[a[5:2]] : 32'd0;
      else if (a[15:12] == HM_REG_CNT[15:12] && 32'(a[11:2]) < NUM_COUNTERS && a[1:0] == 2'b00)
        rd_data = counters[a[9:2]];      // (the window starts at a 4 KiB boundary; at most 255)
      else rd_err = 1'b1;
    end
  end

  logic unused_ok;
  assign unused_ok = ^{dbf_level, wr_pend};

  if (NUM_QPC < 1 || NUM_QPC > int'(HM_REG_QPC_WORDS) || HM_REG_QPC_WORDS != 16 || HM_REG_QPC[5:0] != '0) begin : g_bad_qpc
    $error("hm_csr: NUM_QPC must be 1..16, the QPC window 16 words at a 64-byte boundary");
  end
  if (NUM_COUNTERS < 1 || NUM_COUNTERS > 255 || HM_REG_CNT[11:0] != '0) begin : g_bad_cnt
    $error("hm_csr: NUM_COUNTERS must be 1..255, the counter window at a 4 KiB boundary");
  end
  if (ADDR_WIDTH < 14) begin : g_bad_addr
    $error("hm_csr: ADDR_WIDTH must be at least 14 (counters start at 0x1000)");
  end
endmodule
