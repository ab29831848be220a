// Hematite descriptor formats: send/receive WQEs and CQEs in host memory, and the QP and CQ
// context entries written through the internal control bus. Single source of truth: the
// build scripts parse the `hm_*_t` structs and `localparam` constants below and generate the
// Rust layouts (hematite-model's `desc` module; hostdrv and the tests use it).
//
// Host-memory descriptors are little-endian byte arrays. Their structs list the fields from
// the highest byte offset down to byte 0, so that a descriptor read by DMA (byte i in bits
// [8i+7:8i] of the data beat) casts directly to the struct and every multi-byte field reads
// as a little-endian integer. Keep one field per line: `logic [N-1:0] name;` or `logic name;`.
package hm_desc_pkg;
  // ---------------------------------------------------------------------------------------
  // Send WQE. The send queue is a ring of 2^sq_log_size slots of (64 << sq_log_stride)
  // bytes. Bytes 0..31 are the header below; bytes 32.. hold the scatter/gather list (16 bytes
  // per SGE, hm_sge_t), or the inline data (flags.inline), or for atomics the operands at
  // 32..47 and the single local SGE at 48..63.
  // ---------------------------------------------------------------------------------------
  localparam logic [7:0] HM_WQE_OP_SEND       = 8'd0;
  localparam logic [7:0] HM_WQE_OP_SEND_IMM   = 8'd1;
  localparam logic [7:0] HM_WQE_OP_SEND_INV   = 8'd2;
  localparam logic [7:0] HM_WQE_OP_WRITE      = 8'd3;
  localparam logic [7:0] HM_WQE_OP_WRITE_IMM  = 8'd4;
  localparam logic [7:0] HM_WQE_OP_READ       = 8'd5;
  localparam logic [7:0] HM_WQE_OP_CMP_SWAP   = 8'd6;
  localparam logic [7:0] HM_WQE_OP_FETCH_ADD  = 8'd7;
  localparam logic [7:0] HM_WQE_OP_COUNT      = 8'd8;

  // flags
  localparam logic [7:0] HM_WQE_F_SIGNALED    = 8'h01;  // CQE on success
  localparam logic [7:0] HM_WQE_F_SOLICITED   = 8'h02;  // SE on the last packet
  localparam logic [7:0] HM_WQE_F_INLINE      = 8'h04;  // data follows the header
  localparam logic [7:0] HM_WQE_F_FENCE       = 8'h08;  // wait for earlier READ/atomics

  typedef struct packed {
    logic [31:0] lkey;           // 12: local key of the MR holding the buffer
    logic [31:0] len;            // 8: length in bytes
    logic [63:0] addr;           // 0: start address
  } hm_sge_t;

  typedef struct packed {
    logic [31:0] length;         // 28: message length (sum of the SGE lengths, or inline bytes)
    logic [31:0] rkey;           // 24: remote key (WRITE, READ, atomics)
    logic [63:0] remote_addr;    // 16: remote address (WRITE, READ, atomics)
    logic [63:0] wr_id;          // 8: returned in the CQE
    logic [31:0] imm;            // 4: immediate data (SEND_IMM, WRITE_IMM) in network byte order: bytes 4..7 are the wire bytes; or the R_Key to invalidate (SEND_INV), a little-endian integer
    logic [7:0]  rsvd;           // 3: zero
    logic [7:0]  num_sge;        // 2: SGEs at byte 32 (atomics: 1, at byte 48)
    logic [7:0]  flags;          // 1: HM_WQE_F_*
    logic [7:0]  opcode;         // 0: HM_WQE_OP_*
  } hm_sq_wqe_hdr_t;

  // Atomic operands (bytes 32..47 of an atomic send WQE)
  typedef struct packed {
    logic [63:0] swap_add;       // 40: swap value (CMP_SWAP) or addend (FETCH_ADD)
    logic [63:0] compare;        // 32: compare value (CMP_SWAP)
  } hm_atomic_args_t;

  // ---------------------------------------------------------------------------------------
  // Receive WQE. The receive queue is a ring of 2^rq_log_size slots of (64 << rq_log_stride)
  // bytes: a 16-byte header, then num_sge SGEs (hm_sge_t) from byte 16.
  // ---------------------------------------------------------------------------------------
  typedef struct packed {
    logic [55:0] rsvd;           // 9: zero
    logic [7:0]  num_sge;        // 8: SGEs at byte 16
    logic [63:0] wr_id;          // 0: returned in the CQE
  } hm_rq_wqe_hdr_t;

  // ---------------------------------------------------------------------------------------
  // Completion queue entry (32 bytes). The CQ is a ring of 2^log_size entries. The engine
  // writes entry i with owner = the phase of its pass over the ring (1 on the first pass,
  // then alternating), so software owns an entry when its owner bit equals the phase
  // software expects; entries start zeroed.
  // ---------------------------------------------------------------------------------------
  localparam logic [7:0] HM_CQE_OP_SEND           = 8'd0;
  localparam logic [7:0] HM_CQE_OP_RDMA_WRITE     = 8'd1;
  localparam logic [7:0] HM_CQE_OP_RDMA_READ      = 8'd2;
  localparam logic [7:0] HM_CQE_OP_CMP_SWAP       = 8'd3;
  localparam logic [7:0] HM_CQE_OP_FETCH_ADD      = 8'd4;
  localparam logic [7:0] HM_CQE_OP_RECV           = 8'd5;
  localparam logic [7:0] HM_CQE_OP_RECV_RDMA_IMM  = 8'd6;
  localparam logic [7:0] HM_CQE_OP_EVENT          = 8'd7;  // event-queue entry: status = HM_EV_*, qpn = the QP or CQ

  // Asynchronous events, written as CQEs (opcode HM_CQE_OP_EVENT) into the CQ that
  // HM_CTL_EQ names, with that CQ's owner bit, overrun protection and armed interrupt.
  localparam logic [7:0] HM_EV_QP_FATAL           = 8'd1;  // the QP moved to ERR (qpn = QP)
  localparam logic [7:0] HM_EV_CQ_OVERRUN         = 8'd2;  // a CQE found its CQ full (qpn = CQN), once until reloaded
  localparam logic [7:0] HM_EV_PORT_ACTIVE        = 8'd3;  // the port came up (qpn = port number); posted by firmware
  localparam logic [7:0] HM_EV_PORT_ERR           = 8'd4;  // the port went down (qpn = port number); posted by firmware

  localparam logic [7:0] HM_CQE_ST_SUCCESS        = 8'd0;
  localparam logic [7:0] HM_CQE_ST_LOC_LEN_ERR    = 8'd1;
  localparam logic [7:0] HM_CQE_ST_LOC_PROT_ERR   = 8'd2;
  localparam logic [7:0] HM_CQE_ST_LOC_QP_OP_ERR  = 8'd3;
  localparam logic [7:0] HM_CQE_ST_WR_FLUSH_ERR   = 8'd4;
  localparam logic [7:0] HM_CQE_ST_REM_ACCESS_ERR = 8'd5;
  localparam logic [7:0] HM_CQE_ST_REM_INV_REQ_ERR = 8'd6;
  localparam logic [7:0] HM_CQE_ST_REM_OP_ERR     = 8'd7;
  localparam logic [7:0] HM_CQE_ST_RETRY_EXC_ERR  = 8'd8;
  localparam logic [7:0] HM_CQE_ST_RNR_RETRY_EXC_ERR = 8'd9;

  localparam logic [7:0] HM_CQE_F_IMM             = 8'h01;  // imm holds immediate data
  localparam logic [7:0] HM_CQE_F_INV             = 8'h02;  // imm holds the invalidated R_Key
  localparam logic [7:0] HM_CQE_F_RQ              = 8'h04;  // receive queue completion
  localparam logic [7:0] HM_CQE_F_OWNER           = 8'h80;  // owner/phase bit

  typedef struct packed {
    logic [7:0]  flags;          // 31: HM_CQE_F_* (bit 7 owner)
    logic [39:0] rsvd;           // 26: zero
    logic [15:0] wqe_index;      // 24: send or receive queue slot completed
    logic [7:0]  status;         // 23: HM_CQE_ST_*
    logic [7:0]  opcode;         // 22: HM_CQE_OP_*
    logic [15:0] rsvd2;          // 20: zero
    logic [31:0] qpn;            // 16: local QP number
    logic [31:0] imm;            // 12: immediate data (network byte order, as in the WQE) or the invalidated R_Key (little-endian) (see flags)
    logic [31:0] byte_len;       // 8: bytes received / read; 8 for atomics; 0 on error
    logic [63:0] wr_id;          // 0: from the WQE
  } hm_cqe_t;

  // ---------------------------------------------------------------------------------------
  // QP context (control bus, not host memory): written as 32-bit words, bit 0 of word 0 is
  // bit 0 of the struct. Static attributes set by the control plane; the engine keeps its
  // dynamic state (indices, PSNs, retry counters) separately and (re)loads it from sq_psn /
  // rq_psn when the write asks for it (HM_CTL_F_LOAD_SQ / HM_CTL_F_LOAD_RQ).
  // ---------------------------------------------------------------------------------------
  localparam logic [2:0] HM_QPS_RESET = 3'd0;
  localparam logic [2:0] HM_QPS_INIT  = 3'd1;
  localparam logic [2:0] HM_QPS_RTR   = 3'd2;
  localparam logic [2:0] HM_QPS_RTS   = 3'd3;
  localparam logic [2:0] HM_QPS_SQD   = 3'd4;
  localparam logic [2:0] HM_QPS_ERR   = 3'd5;

  // access bits
  localparam logic [2:0] HM_QPA_REMOTE_WRITE  = 3'b001;
  localparam logic [2:0] HM_QPA_REMOTE_READ   = 3'b010;
  localparam logic [2:0] HM_QPA_REMOTE_ATOMIC = 3'b100;

  typedef struct packed {
    logic         uc;             // unreliable connected (UC opcodes, no ACKs, no retransmission) instead of RC
    logic         std_timer;      // the standard ACK timeout alone (no adaptive early retransmission)
    logic [3:0]   max_dest_rd_atomic; // responder resources (1..HM_MAX_RD_ATOMIC)
    logic [3:0]   max_rd_atomic;  // outstanding READ/atomics as requester (1..HM_MAX_RD_ATOMIC)
    logic [4:0]   min_rnr_timer;  // code put into our RNR NAKs
    logic [2:0]   rnr_retry;      // 7 = infinite
    logic [2:0]   retry_cnt;      // 7 is finite
    logic [4:0]   timeout;        // local ACK timeout 4.096 us << timeout, 0 = infinite
    logic [1:0]   rq_log_stride;  // receive WQE size 64 << n
    logic [4:0]   rq_log_size;    // receive queue slots 2^n
    logic [1:0]   sq_log_stride;  // send WQE size 64 << n
    logic [4:0]   sq_log_size;    // send queue slots 2^n
    logic [2:0]   access;         // HM_QPA_*
    logic [2:0]   pmtu;           // path MTU 128 << pmtu (2 = 512 ... 5 = 4096; 1 = 256)
    logic [2:0]   state;          // HM_QPS_*
    logic [15:0]  rq_cqn;         // CQ of receive completions
    logic [15:0]  sq_cqn;         // CQ of send completions
    logic [23:0]  rq_psn;         // responder's initial expected PSN
    logic [23:0]  sq_psn;         // requester's initial PSN
    logic [23:0]  dest_qpn;       // peer QP
    logic [31:0]  pd;             // protection domain
    logic [63:0]  rq_base;        // receive queue ring address
    logic [63:0]  sq_base;        // send queue ring address
    logic [15:0]  pkey;           // BTH P_Key
    logic [19:0]  flow_label;     // IPv6 flow label
    logic [15:0]  udp_sport;      // UDP source port
    logic [7:0]   ttl;            // TTL / hop limit
    logic [1:0]   ecn;            // ECN of data packets
    logic [5:0]   dscp;           // DSCP
    logic [127:0] ip_dst;         // peer IP (IPv4 in the low 32 bits)
    logic [127:0] ip_src;         // our IP
    logic         ipv6;           // IPv6 (1) or IPv4 (0)
    logic [11:0]  vlan_vid;       // VLAN ID
    logic [2:0]   vlan_pcp;       // VLAN priority
    logic         vlan_valid;     // 802.1Q tag
    logic [47:0]  eth_src;        // our MAC
    logic [47:0]  eth_dst;        // next-hop MAC
  } hm_qp_ctx_t;

  // CQ context
  typedef struct packed {
    logic [7:0]   irq_vec;        // interrupt vector raised when armed
    logic [4:0]   log_size;       // entries 2^n
    logic         valid;          // CQ exists
    logic [63:0]  base;           // ring address (32-byte entries)
  } hm_cq_ctx_t;

  // MR entry (hm_mr_table)
  typedef struct packed {
    logic [3:0]   access;         // {remote_atomic, remote_write, remote_read, local_write}
    logic [63:0]  len;            // length in bytes
    logic [63:0]  base;           // first address
    logic [31:0]  pd;             // protection domain
    logic [7:0]   tag;            // key = index << 8 | tag
    logic         valid;          // entry in use
  } hm_mr_ctx_t;

  // MR entry access bits (hm_mr_ctx_t.access)
  localparam logic [3:0] HM_MRA_LOCAL_WRITE   = 4'b0001;
  localparam logic [3:0] HM_MRA_REMOTE_READ   = 4'b0010;
  localparam logic [3:0] HM_MRA_REMOTE_WRITE  = 4'b0100;
  localparam logic [3:0] HM_MRA_REMOTE_ATOMIC = 4'b1000;

  // MR check (hm_mr_table): what an access needs (s_chk_need)
  localparam logic [2:0] HM_MRN_LOCAL_READ    = 3'd0;  // always granted
  localparam logic [2:0] HM_MRN_LOCAL_WRITE   = 3'd1;
  localparam logic [2:0] HM_MRN_REMOTE_READ   = 3'd2;
  localparam logic [2:0] HM_MRN_REMOTE_WRITE  = 3'd3;
  localparam logic [2:0] HM_MRN_REMOTE_ATOMIC = 3'd4;
  localparam logic [2:0] HM_MRN_INVALIDATE    = 3'd5;  // SEND with invalidate: no right, no bounds
  // ... and its verdict (m_res_err), the first failure in this order
  localparam logic [2:0] HM_MRE_OK            = 3'd0;
  localparam logic [2:0] HM_MRE_BAD_KEY       = 3'd1;  // index out of range, invalid, tag mismatch
  localparam logic [2:0] HM_MRE_PD            = 3'd2;
  localparam logic [2:0] HM_MRE_ACCESS        = 3'd3;
  localparam logic [2:0] HM_MRE_BOUNDS        = 3'd4;

  // ---------------------------------------------------------------------------------------
  // Control bus commands. The bus's register map (HM_CTL_STAGE, HM_CTL_CMD, ..., the
  // congestion control registers HM_CC_*) is in hm_regs_pkg, generated from
  // regs/hematite.rdl. A command copies the staging window into (write) or out of (read)
  // entry `index` of table `table`.
  // ---------------------------------------------------------------------------------------
  localparam logic [3:0] HM_CTL_OP_WRITE   = 4'd1;
  localparam logic [3:0] HM_CTL_OP_READ    = 4'd2;
  localparam logic [3:0] HM_CTL_TBL_QP     = 4'd0;
  localparam logic [3:0] HM_CTL_TBL_CQ     = 4'd1;
  localparam logic [3:0] HM_CTL_TBL_MR     = 4'd2;
  localparam logic [7:0] HM_CTL_F_LOAD_SQ  = 8'h01;  // QP write: reset requester state (PSN from sq_psn, indices 0)
  localparam logic [7:0] HM_CTL_F_LOAD_RQ  = 8'h02;  // QP write: reset responder state (ePSN from rq_psn, indices 0)
  localparam logic [7:0] HM_CTL_F_LOAD_CQ  = 8'h04;  // CQ write: reset producer index and phase
  localparam logic [7:0] HM_CTL_F_LOAD_RQ_PSN = 8'h08;  // QP write: responder ePSN from rq_psn, message state reset, receive queue indices kept

  typedef struct packed {
    logic [3:0]  op;             // HM_CTL_OP_*
    logic [3:0]  table_sel;      // HM_CTL_TBL_*
    logic [7:0]  flags;          // HM_CTL_F_*
    logic [15:0] index;          // QPN, CQN or MR index
  } hm_ctl_cmd_t;

  localparam logic [7:0] HM_CTL_ST_OK      = 8'd0;
  localparam logic [7:0] HM_CTL_ST_BAD_CMD = 8'd1;  // unknown op or table
  localparam logic [7:0] HM_CTL_ST_RANGE   = 8'd2;  // index beyond the table

  typedef struct packed {
    logic        busy;           // command in progress
    logic [22:0] rsvd;
    logic [7:0]  status;         // HM_CTL_ST_* of the last command
  } hm_ctl_status_t;

  typedef struct packed {
    logic        enable;         // events are written (else dropped)
    logic [14:0] rsvd;
    logic [15:0] cqn;            // the CQ that serves as event queue
  } hm_ctl_eq_t;

  // HM_CTL_POST: QP_ERR moves QP `id` to ERR in every block now (its queues are flushed
  // without waiting for a doorbell; no event: the control plane asked for it); EVENT queues
  // event `code` (HM_EV_*) for `id` into the event queue (dropped while it is off).
  localparam logic [3:0] HM_CTL_POST_QP_ERR = 4'd1;
  localparam logic [3:0] HM_CTL_POST_EVENT  = 4'd2;

  typedef struct packed {
    logic [3:0]  op;             // HM_CTL_POST_*
    logic [3:0]  rsvd;
    logic [7:0]  code;           // EVENT: HM_EV_*
    logic [15:0] id;             // QPN, or the event's id
  } hm_ctl_post_t;
endpackage
