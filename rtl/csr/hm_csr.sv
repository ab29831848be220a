// BAR0 register block: AXI4-Lite slave (32-bit data) with identity, capabilities, a scratch
// register, doorbells and read-only counters (register map: rtl/pkg/hm_regs_pkg.sv).
//
// Doorbell writes become events on m_db (valid/ready) in write order; when the event FIFO is
// full the write is held (AWREADY/WREADY stay low), so no doorbell is ever dropped. Accesses
// to unmapped offsets, misaligned offsets, writes to read-only registers, reads of write-only
// registers and doorbell writes without all four strobes are answered with SLVERR, change
// nothing and are counted (HM_REG_ERR_COUNT).
module hm_csr
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

  input  logic [ADDR_WIDTH-1:0] s_axil_awaddr,
  input  logic                  s_axil_awvalid,
  output logic                  s_axil_awready,
  input  logic [31:0]           s_axil_wdata,
  input  logic [3:0]            s_axil_wstrb,
  input  logic                  s_axil_wvalid,
  output logic                  s_axil_wready,
  output logic [1:0]            s_axil_bresp,
  output logic                  s_axil_bvalid,
  input  logic                  s_axil_bready,
  input  logic [ADDR_WIDTH-1:0] s_axil_araddr,
  input  logic                  s_axil_arvalid,
  output logic                  s_axil_arready,
  output logic [31:0]           s_axil_rdata,
  output logic [1:0]            s_axil_rresp,
  output logic                  s_axil_rvalid,
  input  logic                  s_axil_rready,

  // Doorbell events
  output hm_db_evt_t            m_db_data,
  output logic                  m_db_valid,
  input  logic                  m_db_ready,

  // Counters to expose
  input  logic [NUM_COUNTERS-1:0][31:0] counters
);
  localparam logic [1:0] OKAY = 2'b00, SLVERR = 2'b10;
  localparam hm_caps_t CAPS = '{log2_qps: 8'(LOG2_QPS), log2_cqs: 8'(LOG2_CQS),
                                data_bytes: 8'(DATA_WIDTH / 64), num_counters: 8'(NUM_COUNTERS)};

  // ----------------------------------------------------------------------------------------
  // Write channel: hold AW and W, then execute once both are here and B is free
  // ----------------------------------------------------------------------------------------
  logic [ADDR_WIDTH-1:0] aw_q;
  logic                  aw_v_q, w_v_q;
  logic [31:0]           wd_q;
  logic [3:0]            ws_q;
  logic [31:0]           scratch_q, db_count_q, err_count_q;
  logic                  dbf_ready, db_push, do_write, w_err, r_err_now;
  logic [1:0]            db_kind;
  logic                  is_db;

  assign s_axil_awready = !aw_v_q;
  assign s_axil_wready  = !w_v_q;

  always_comb begin
    logic [15:0] a;
    a = 16'(aw_q);
    is_db   = 1'b0;
    db_kind = HM_DB_SQ;
    w_err   = 1'b0;
    if (a == HM_REG_DB_SQ) begin is_db = 1'b1; db_kind = HM_DB_SQ; end
    else if (a == HM_REG_DB_RQ) begin is_db = 1'b1; db_kind = HM_DB_RQ; end
    else if (a == HM_REG_DB_CQ) begin is_db = 1'b1; db_kind = HM_DB_CQ; end
    if (is_db) w_err = ws_q != 4'hF;
    else if (a != HM_REG_SCRATCH) w_err = 1'b1;
    if (ADDR_WIDTH > 16 && (aw_q >> 16) != '0) w_err = 1'b1;
    // execute when both halves are held, the response slot is free and a doorbell has room
    do_write = aw_v_q && w_v_q && (!s_axil_bvalid || s_axil_bready) && (!is_db || w_err || dbf_ready);
    db_push  = do_write && is_db && !w_err;
  end

  always_ff @(posedge clk) begin
    if (s_axil_awvalid && s_axil_awready) aw_q <= s_axil_awaddr;
    if (s_axil_wvalid && s_axil_wready) begin wd_q <= s_axil_wdata; ws_q <= s_axil_wstrb; end
    if (rst) begin
      aw_v_q        <= 1'b0;
      w_v_q         <= 1'b0;
      s_axil_bvalid <= 1'b0;
      scratch_q     <= '0;
      db_count_q    <= '0;
      err_count_q   <= '0;
    end else begin
      if (s_axil_awvalid && s_axil_awready) aw_v_q <= 1'b1;
      if (s_axil_wvalid && s_axil_wready) w_v_q <= 1'b1;
      if (s_axil_bvalid && s_axil_bready) s_axil_bvalid <= 1'b0;
      if (do_write) begin
        aw_v_q        <= 1'b0;
        w_v_q         <= 1'b0;
        s_axil_bvalid <= 1'b1;
        s_axil_bresp  <= w_err ? SLVERR : OKAY;
        if (!w_err && !is_db)
          for (int b = 0; b < 4; b++) if (ws_q[b]) scratch_q[8*b +: 8] <= wd_q[8*b +: 8];
        if (db_push) db_count_q <= db_count_q + 1'b1;
      end
      err_count_q <= err_count_q + 32'(do_write && w_err) + 32'(r_err_now);
    end
  end

  logic [$clog2(DB_FIFO_DEPTH+1):0] dbf_level;
  hm_fifo #(.WIDTH($bits(hm_db_evt_t)), .DEPTH(DB_FIFO_DEPTH)) u_db_fifo (
    .clk, .rst,
    .s_data({db_kind, wd_q}), .s_valid(db_push), .s_ready(dbf_ready),
    .m_data(m_db_data), .m_valid(m_db_valid), .m_ready(m_db_ready),
    .level(dbf_level)
  );

  // ----------------------------------------------------------------------------------------
  // Read channel: one read at a time, data registered
  // ----------------------------------------------------------------------------------------
  assign s_axil_arready = !s_axil_rvalid;
  always_comb begin
    logic [15:0] a;
    a = 16'(s_axil_araddr);
    r_err_now = 1'b0;
    if (s_axil_arvalid && s_axil_arready) begin
      r_err_now = 1'b1;
      if (ADDR_WIDTH <= 16 || (s_axil_araddr >> 16) == '0) begin
        if (a == HM_REG_ID || a == HM_REG_VERSION || a == HM_REG_CAPS || a == HM_REG_SCRATCH ||
            a == HM_REG_DB_COUNT || a == HM_REG_ERR_COUNT)
          r_err_now = 1'b0;
        if (a >= HM_REG_CNT && a < HM_REG_CNT + 16'(4 * NUM_COUNTERS) && a[1:0] == 2'b00)
          r_err_now = 1'b0;
      end
    end
  end

  always_ff @(posedge clk) begin
    if (rst) begin
      s_axil_rvalid <= 1'b0;
    end else begin
      if (s_axil_rvalid && s_axil_rready) s_axil_rvalid <= 1'b0;
      if (s_axil_arvalid && s_axil_arready) begin
        logic [15:0] a;
        a = 16'(s_axil_araddr);
        s_axil_rvalid <= 1'b1;
        s_axil_rresp  <= r_err_now ? SLVERR : OKAY;
        s_axil_rdata  <= '0;
        if (!r_err_now) begin
          if (a == HM_REG_ID)             s_axil_rdata <= HM_REG_ID_RESET;
          else if (a == HM_REG_VERSION)   s_axil_rdata <= HM_REG_VERSION_RESET;
          else if (a == HM_REG_CAPS)      s_axil_rdata <= CAPS;
          else if (a == HM_REG_SCRATCH)   s_axil_rdata <= scratch_q;
          else if (a == HM_REG_DB_COUNT)  s_axil_rdata <= db_count_q;
          else if (a == HM_REG_ERR_COUNT) s_axil_rdata <= err_count_q;
          else                            s_axil_rdata <= counters[(a - HM_REG_CNT) >> 2];
        end
      end
    end
  end

  logic unused_ok;
  assign unused_ok = ^{dbf_level};

  if (NUM_COUNTERS < 1 || NUM_COUNTERS > 255 || 4 * NUM_COUNTERS > 16'hF000) begin : g_bad_cnt
    $error("hm_csr: NUM_COUNTERS must be 1..255");
  end
  if (ADDR_WIDTH < 14) begin : g_bad_addr
    $error("hm_csr: ADDR_WIDTH must be at least 14 (counters start at 0x1000)");
  end
endmodule
