// Hematite BAR0 register map: the single source of truth for register offsets and doorbell
// formats. sim/build.rs parses the `localparam logic [N-1:0] HM_REG_* = N'hX;` lines and the
// `hm_db_*_t` structs below and generates the Rust constants and packing; model/build.rs
// generates hematite_model::regs (used by hostdrv) from the same lines. Keep one declaration
// per line.
package hm_regs_pkg;
  // Identity and capabilities (read-only)
  localparam logic [15:0] HM_REG_ID        = 16'h0000;  // "HMTE" = 0x484D5445
  localparam logic [15:0] HM_REG_VERSION   = 16'h0004;  // major << 16 | minor
  localparam logic [15:0] HM_REG_CAPS      = 16'h0008;  // hm_caps_t
  // Driver scratch register (read/write), for probing the BAR
  localparam logic [15:0] HM_REG_SCRATCH   = 16'h000C;
  // Doorbells (write-only, 32-bit writes with all strobes set)
  localparam logic [15:0] HM_REG_DB_SQ     = 16'h0100;  // hm_db_qp_t: send queue producer index
  localparam logic [15:0] HM_REG_DB_RQ     = 16'h0104;  // hm_db_qp_t: receive queue producer index
  localparam logic [15:0] HM_REG_DB_CQ     = 16'h0108;  // hm_db_cq_t: CQ consumer index and arm
  // Doorbells accepted since reset (read-only)
  localparam logic [15:0] HM_REG_DB_COUNT  = 16'h0110;
  // Access errors answered with SLVERR since reset (read-only)
  localparam logic [15:0] HM_REG_ERR_COUNT = 16'h0114;
  // Counters (read-only, 32 bits each, 4 bytes apart, index i at HM_REG_CNT_BASE + 4 * i)
  localparam logic [15:0] HM_REG_CNT_BASE  = 16'h1000;

  localparam logic [31:0] HM_ID_VALUE      = 32'h484D5445;
  localparam logic [15:0] HM_VERSION_MAJOR = 16'd0;
  localparam logic [15:0] HM_VERSION_MINOR = 16'd1;

  // Capabilities word
  typedef struct packed {
    logic [7:0] log2_qps;        // QP table size
    logic [7:0] log2_cqs;        // CQ table size
    logic [7:0] data_bytes;      // datapath bytes per beat / 8
    logic [7:0] num_counters;    // counters at HM_REG_CNT_BASE
  } hm_caps_t;

  // SQ/RQ doorbell write data
  typedef struct packed {
    logic [15:0] pi;             // new producer index
    logic [15:0] qpn;            // queue pair number
  } hm_db_qp_t;

  // CQ doorbell write data
  typedef struct packed {
    logic [15:0] ci;             // consumer index
    logic [1:0]  arm;            // 0 none, 1 next completion, 2 next solicited, 3 reserved
    logic [13:0] cqn;            // completion queue number
  } hm_db_cq_t;

  // Doorbell event towards the engine
  localparam logic [1:0] HM_DB_SQ = 2'd0;
  localparam logic [1:0] HM_DB_RQ = 2'd1;
  localparam logic [1:0] HM_DB_CQ = 2'd2;
  typedef struct packed {
    logic [1:0]  kind;           // HM_DB_SQ / HM_DB_RQ / HM_DB_CQ
    logic [31:0] word;           // the doorbell write data (hm_db_qp_t or hm_db_cq_t)
  } hm_db_evt_t;
endpackage
