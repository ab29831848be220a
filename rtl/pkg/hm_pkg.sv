// Hematite shared definitions: the RoCEv2 header record, RX status, drop reason codes and the
// opcode table. This file is the single source of truth for the record layout: the Rust side
// (hematite-sim's build script) parses `hm_roce_hdr_t` below and generates its bit packing.
// Keep one field per line in the form `logic [N-1:0] name;` or `logic name;`.
package hm_pkg;
  // UDP destination port that identifies RoCEv2.
  localparam logic [15:0] HM_ROCE_UDP_PORT = 16'd4791;

  // ---------------------------------------------------------------------------------------
  // Header record. RX: decoded fields. TX: input (fields marked computed are ignored).
  // Packed: the first field is the most significant.
  // ---------------------------------------------------------------------------------------
  typedef struct packed {
    logic [47:0]  eth_dst;
    logic [47:0]  eth_src;
    logic         vlan_valid;
    logic [2:0]   vlan_pcp;
    logic         vlan_dei;
    logic [11:0]  vlan_vid;
    logic         ipv6;
    logic [127:0] ip_src;
    logic [127:0] ip_dst;
    logic [5:0]   dscp;
    logic [1:0]   ecn;
    logic [7:0]   ttl;
    logic [15:0]  ip_id;
    logic         ip_df;
    logic [19:0]  flow_label;
    logic [15:0]  udp_sport;
    logic [15:0]  udp_dport;
    logic [15:0]  udp_len;
    logic [15:0]  udp_csum;
    logic [7:0]   opcode;
    logic         se;
    logic         migreq;
    logic [1:0]   padcnt;
    logic [3:0]   tver;
    logic [15:0]  pkey;
    logic         fecn;
    logic         becn;
    logic [5:0]   resv6;
    logic [23:0]  dest_qp;
    logic         ackreq;
    logic [6:0]   resv7;
    logic [23:0]  psn;
    logic [63:0]  va;
    logic [31:0]  rkey;
    logic [31:0]  dma_len;
    logic [63:0]  swap_add;
    logic [63:0]  compare;
    logic [7:0]   syndrome;
    logic [23:0]  msn;
    logic [63:0]  atomic_orig;
    logic [31:0]  imm;
    logic [31:0]  qkey;
    logic [23:0]  src_qp;
    logic [15:0]  payload_off;
    logic [15:0]  payload_len;
  } hm_roce_hdr_t;

  // Drop reason codes (0 = accepted). Priority is documented in docs/packet-path.md and in
  // hematite-model's DropReason.
  localparam logic [3:0] HM_RSN_ACCEPT         = 4'd0;
  localparam logic [3:0] HM_RSN_TRUNCATED      = 4'd1;
  localparam logic [3:0] HM_RSN_NOT_IP         = 4'd2;
  localparam logic [3:0] HM_RSN_IPV4_OPT_FRAG  = 4'd3;
  localparam logic [3:0] HM_RSN_NOT_ROCE       = 4'd4;
  localparam logic [3:0] HM_RSN_LENGTH         = 4'd5;
  localparam logic [3:0] HM_RSN_BAD_ICRC       = 4'd6;
  localparam logic [3:0] HM_RSN_BAD_IPV4_CSUM  = 4'd7;
  localparam logic [3:0] HM_RSN_TVER           = 4'd8;
  localparam logic [3:0] HM_RSN_UNKNOWN_OPCODE = 4'd9;
  localparam logic [3:0] HM_RSN_MAC_ERROR      = 4'd10;  // MAC flagged the frame (tuser)
  localparam logic [3:0] HM_RSN_MISALIGNED     = 4'd11;  // payload + pad not a multiple of 4
  localparam logic [3:0] HM_RSN_PAD_NOT_LAST   = 4'd12;  // PadCnt on a FIRST / MIDDLE packet
  localparam logic [3:0] HM_RSN_TOO_LONG       = 4'd13;  // payload larger than 4096 bytes
  localparam logic [3:0] HM_RSN_BAD_PKEY       = 4'd14;  // P_Key does not match the port's
  localparam int         HM_RSN_COUNT          = 15;
  // The engine's counters: HM_CNT_X is BAR0 CNT[HM_CNT_X] (32 bits, wrapping; docs/counters.md
  // gives each one's meaning, its sysfs file and its mlx5 equivalent). Each grows by at most 64
  // a cycle, so a reader that samples every 2^25 cycles or more often sees every wrap.
  localparam int HM_CNT_TX_FRAMES      = 0;   // frames transmitted
  localparam int HM_CNT_WQES           = 1;   // WQEs started
  localparam int HM_CNT_REQ_PKTS       = 2;   // request packets sent (incl. retransmissions)
  localparam int HM_CNT_WQE_LOCAL_ERR  = 3;   // WQEs refused by local checks
  localparam int HM_CNT_DB_IGNORED     = 4;   // doorbells ignored (unknown kind, QP beyond the table)
  localparam int HM_CNT_TX_ABORTED     = 5;   // frames aborted (payload length or DMA error)
  localparam int HM_CNT_TX_BAD_HDR     = 6;   // header records rejected by the TX path
  localparam int HM_CNT_REQS_RX        = 7;   // request packets received
  localparam int HM_CNT_DMA_ZERO_LEN   = 8;   // DMA requests of length 0
  localparam int HM_CNT_RX_ACCEPTED    = 9;   // frames accepted by the RX path
  localparam int HM_CNT_RX_DROPPED     = 10;  // frames dropped by the RX path (any reason)
  localparam int HM_CNT_RX_NOT_RC      = 11;  // RoCE packets neither RC nor UC (UD): not handled
  localparam int HM_CNT_ACKS_RX        = 12;  // ACK/NAK packets received
  localparam int HM_CNT_RESP_STALE     = 13;  // responses dropped by the completer (stale, out of window)
  localparam int HM_CNT_IMPLIED_NAKS   = 14;  // implied NAKs
  localparam int HM_CNT_DMA_WR_ERR     = 15;  // DMA write errors
  localparam int HM_CNT_CQES           = 16;  // CQEs written
  localparam int HM_CNT_CQ_OVERRUNS    = 17;  // CQ overruns
  localparam int HM_CNT_CQE_BAD_CQ     = 18;  // CQEs for invalid CQs
  localparam int HM_CNT_DUP_REQS       = 19;  // duplicate requests received
  localparam int HM_CNT_SEQ_NAKS_TX    = 20;  // NAK sequence errors sent
  localparam int HM_CNT_ERR_NAKS_TX    = 21;  // error NAKs sent (access, invalid request, operational)
  localparam int HM_CNT_REQS_DROPPED   = 22;  // requests dropped (QP not ready, in ERR, unknown)
  localparam int HM_CNT_RESP_PKTS      = 23;  // response packets sent
  localparam int HM_CNT_RETRIES        = 24;  // go-back-N retries
  localparam int HM_CNT_ACK_TIMEOUTS   = 25;  // local ACK timeouts
  localparam int HM_CNT_ECN_CE_RX      = 26;  // requests received with IP ECN = CE
  localparam int HM_CNT_CNP_TX         = 27;  // CNPs sent
  localparam int HM_CNT_CNP_RX         = 28;  // CNPs received
  localparam int HM_CNT_CNP_SUPPRESSED = 29;  // CE requests inside the CNP interval (no CNP)
  localparam int HM_CNT_RP_CUTS        = 30;  // rate cuts
  localparam int HM_CNT_RP_ACTIVATIONS = 31;  // QPs that became rate limited (first CNP)
  localparam int HM_CNT_RP_RELEASES    = 32;  // rate-limited QPs released
  localparam int HM_CNT_CNP_NO_SLOT    = 33;  // CNPs not applied (no rate limiter free, QPN beyond the table)
  localparam int HM_CNT_PFC_RX         = 34;  // PFC frames honoured
  localparam int HM_CNT_RX_DROP_BASE   = 35;  // + r - 1: frames dropped by the RX path for reason r (1 .. HM_RSN_COUNT-1)
  localparam int HM_CNT_TX_BYTES       = 49;  // bytes transmitted (frames from the Ethernet header to the ICRC)
  localparam int HM_CNT_RX_BYTES       = 50;  // bytes received (every frame the MAC delivered, also dropped ones)
  localparam int HM_CNT_RNR_NAKS_TX    = 51;  // RNR NAKs sent
  localparam int HM_CNT_SEQ_NAKS_RX    = 52;  // NAK sequence errors received
  localparam int HM_CNT_RNR_NAKS_RX    = 53;  // RNR NAKs received
  localparam int HM_CNT_OOS_RX         = 54;  // requests received ahead of the expected PSN
  localparam int HM_CNT_WRITE_REQS_RX  = 55;  // RDMA WRITE requests received (FIRST or ONLY, in sequence)
  localparam int HM_CNT_READ_REQS_RX   = 56;  // RDMA READ requests received (in sequence)
  localparam int HM_CNT_ATOMIC_REQS_RX = 57;  // atomic requests received (in sequence)
  localparam int HM_CNT_CQE_ERR_BASE   = 58;  // + s - 1: error CQEs written with status s (1 .. HM_CQE_ERR_STATUSES)
  localparam int HM_CNT_CQE_ERR_RQ     = 67;  // error CQEs of receive queues (any status)
  localparam int HM_CNT_CQE_FLUSH_RQ   = 68;  // flush-error CQEs of receive queues
  localparam int HM_CNT_QPC_LOST       = 69;  // per-QP counter events not counted (event FIFO full)
  localparam int HM_CNT_EARLY_RETX     = 70;  // early retransmissions (adaptive timer, tail-loss probe; no retry used)
  localparam int HM_CNT_PUSH_USED      = 71;  // pushed WQEs (the MMIO path) sent without a WQE read
  localparam int HM_CNT_PUSH_DROPPED   = 72;  // pushed WQEs dropped unused (replaced, evicted, never bound, the WQE was read)
  localparam int HM_CNT_COUNT          = 73;  // counters at BAR0 CNT
  localparam int HM_CQE_ERR_STATUSES   = 9;   // error CQE statuses counted (hm_desc_pkg HM_CQE_ST_*)
  // Per-QP counters (hm_qp_counters): HM_QPC_X is BAR0 QPC[HM_QPC_X] after a QPC_SEL write
  // (32 bits, from the QP's creation; docs/counters.md).
  localparam int HM_QPC_REQ_PKTS_TX    = 0;   // request packets sent (incl. retransmissions)
  localparam int HM_QPC_REQS_RX        = 1;   // request packets received
  localparam int HM_QPC_RETRIES        = 2;   // go-back-N retries
  localparam int HM_QPC_ACK_TIMEOUTS   = 3;   // local ACK timeouts
  localparam int HM_QPC_SEQ_NAKS_RX    = 4;   // NAK sequence errors received
  localparam int HM_QPC_RNR_NAKS_RX    = 5;   // RNR NAKs received
  localparam int HM_QPC_OOS_RX         = 6;   // requests received ahead of the expected PSN
  localparam int HM_QPC_DUP_REQS       = 7;   // duplicate requests received
  localparam int HM_QPC_CQE_ERR        = 8;   // error CQEs (any error status, flushes included)
  localparam int HM_QPC_CNP_RX         = 9;   // CNPs received for the QP
  localparam int HM_QPC_COUNT          = 10;  // counters per QP
  // Largest payload of one packet (the largest path MTU).
  localparam int         HM_MAX_PAYLOAD        = 4096;

  // Per-frame RX status, reported for every frame on the monitor port.
  typedef struct packed {
    hm_roce_hdr_t hdr;
    logic [3:0]   reason;
    logic         icrc_ok;
    logic         ipv4_csum_ok;
    logic [15:0]  frame_len;
  } hm_rx_status_t;

  // ---------------------------------------------------------------------------------------
  // Opcode table (ROCEV2.md section 4). hdr_len counts BTH + extension headers.
  // Extension offsets are relative to the end of the BTH.
  // ---------------------------------------------------------------------------------------
  // An MR check a block asks of the MR table (hm_mr_table, through the engine's arbiter), and
  // its result.
  typedef struct packed {
    logic [31:0] key;            // L_Key or R_Key
    logic [31:0] pd;             // the QP's protection domain
    logic [63:0] addr;           // first byte accessed
    logic [63:0] len;            // bytes accessed
    logic [2:0]  need;           // HM_MRN_* (hm_desc_pkg)
  } hm_mr_chk_t;

  typedef struct packed {
    logic        ok;             // every check passed
    logic [63:0] base;           // the region of a successful check: first byte
    logic [63:0] limit;          // ... and its end (saturated at 2^64 - 1)
  } hm_mr_res_t;

  // ---------------------------------------------------------------------------------------
  // Counter bundles of the DCQCN blocks (rtl/cc): free-running 32-bit event counters, one
  // bundle per block (the engine's own blocks have theirs in hm_eng_pkg).
  // ---------------------------------------------------------------------------------------
  typedef struct packed {
    logic [31:0] cnp_dropped;    // CNPs dropped: the CNP FIFO was full
    logic [31:0] tx_dropped;     // byte reports dropped: the TX FIFO was full
    logic [31:0] tx_merged;      // byte reports merged into a queued one of the same QP
    logic [31:0] bad_qpn;        // CNPs and byte reports for a QPN out of range
    logic [31:0] activations;    // QPs that became rate limited (first CNP)
    logic [31:0] releases;       // rate-limited QPs released (back at the maximum rate)
    logic [31:0] cuts;           // rate cuts
    logic [31:0] increases;      // rate increases
    logic [31:0] timer_skips;    // timers rescheduled from now: their next deadline had passed
  } hm_rp_stats_t;

  typedef struct packed {
    logic [31:0] cnps;           // CNPs requested
    logic [31:0] suppressed;     // CE packets inside their QP's CNP interval
    logic [31:0] blocked;        // CNPs due while the CNP sender could not take one
    logic [31:0] bad_qpn;        // CE events for a QPN out of range
  } hm_np_stats_t;

  typedef struct packed {
    logic [31:0] no_slot;        // CNPs with every slot in use
    logic [31:0] bad_qpn;        // CNPs for a QPN out of range
    logic [31:0] allocs;         // slots allocated
  } hm_slots_stats_t;

  // ---------------------------------------------------------------------------------------
  // BTH opcodes (IBTA vol. 1 table 38; RoCEv2 annex A17 for the CNP) and AETH syndromes that
  // the engine sends or acts on. The reference model's table (model/src/opcode.rs) is written
  // from the spec on its own; model/tests/opcode_pkg.rs checks that the two agree.
  // ---------------------------------------------------------------------------------------
  localparam logic [7:0] HM_OP_SEND_FIRST          = 8'h00;
  localparam logic [7:0] HM_OP_SEND_MIDDLE         = 8'h01;
  localparam logic [7:0] HM_OP_SEND_LAST           = 8'h02;
  localparam logic [7:0] HM_OP_SEND_LAST_IMM       = 8'h03;
  localparam logic [7:0] HM_OP_SEND_ONLY           = 8'h04;
  localparam logic [7:0] HM_OP_SEND_ONLY_IMM       = 8'h05;
  localparam logic [7:0] HM_OP_WRITE_FIRST         = 8'h06;
  localparam logic [7:0] HM_OP_WRITE_MIDDLE        = 8'h07;
  localparam logic [7:0] HM_OP_WRITE_LAST          = 8'h08;
  localparam logic [7:0] HM_OP_WRITE_LAST_IMM      = 8'h09;
  localparam logic [7:0] HM_OP_WRITE_ONLY          = 8'h0A;
  localparam logic [7:0] HM_OP_WRITE_ONLY_IMM      = 8'h0B;
  localparam logic [7:0] HM_OP_READ_REQ            = 8'h0C;
  localparam logic [7:0] HM_OP_READ_RESP_FIRST     = 8'h0D;
  localparam logic [7:0] HM_OP_READ_RESP_MIDDLE    = 8'h0E;
  localparam logic [7:0] HM_OP_READ_RESP_LAST      = 8'h0F;
  localparam logic [7:0] HM_OP_READ_RESP_ONLY      = 8'h10;
  localparam logic [7:0] HM_OP_ACK                 = 8'h11;
  localparam logic [7:0] HM_OP_ATOMIC_ACK          = 8'h12;
  localparam logic [7:0] HM_OP_CMP_SWAP            = 8'h13;
  localparam logic [7:0] HM_OP_FETCH_ADD           = 8'h14;
  localparam logic [7:0] HM_OP_SEND_LAST_INV       = 8'h16;
  localparam logic [7:0] HM_OP_SEND_ONLY_INV       = 8'h17;
  localparam logic [7:0] HM_OP_CNP                 = 8'h81;

  // What an RC request opcode does (any other opcode: all 0).
  typedef struct packed {
    logic send;                  // SEND (any position, with ImmDt or IETH)
    logic write;                 // RDMA WRITE
    logic read;                  // RDMA READ request
    logic atomic;                // CmpSwap or FetchAdd
    logic first;                 // starts a message: FIRST or ONLY (a READ or an atomic too)
    logic last;                  // ends a message: LAST or ONLY (a READ or an atomic too)
    logic imm;                   // carries ImmDt
    logic inv;                   // carries IETH (SEND with Invalidate)
  } hm_req_class_t;
  function automatic hm_req_class_t hm_req_class(input logic [7:0] op);
    hm_req_class_t c;
    c = '0;
    unique case (op)
      HM_OP_SEND_FIRST:     begin c.send = 1'b1; c.first = 1'b1; end
      HM_OP_SEND_MIDDLE:    c.send = 1'b1;
      HM_OP_SEND_LAST:      begin c.send = 1'b1; c.last = 1'b1; end
      HM_OP_SEND_LAST_IMM:  begin c.send = 1'b1; c.last = 1'b1; c.imm = 1'b1; end
      HM_OP_SEND_ONLY:      begin c.send = 1'b1; c.first = 1'b1; c.last = 1'b1; end
      HM_OP_SEND_ONLY_IMM:  begin c.send = 1'b1; c.first = 1'b1; c.last = 1'b1; c.imm = 1'b1; end
      HM_OP_SEND_LAST_INV:  begin c.send = 1'b1; c.last = 1'b1; c.inv = 1'b1; end
      HM_OP_SEND_ONLY_INV:  begin c.send = 1'b1; c.first = 1'b1; c.last = 1'b1; c.inv = 1'b1; end
      HM_OP_WRITE_FIRST:    begin c.write = 1'b1; c.first = 1'b1; end
      HM_OP_WRITE_MIDDLE:   c.write = 1'b1;
      HM_OP_WRITE_LAST:     begin c.write = 1'b1; c.last = 1'b1; end
      HM_OP_WRITE_LAST_IMM: begin c.write = 1'b1; c.last = 1'b1; c.imm = 1'b1; end
      HM_OP_WRITE_ONLY:     begin c.write = 1'b1; c.first = 1'b1; c.last = 1'b1; end
      HM_OP_WRITE_ONLY_IMM: begin c.write = 1'b1; c.first = 1'b1; c.last = 1'b1; c.imm = 1'b1; end
      HM_OP_READ_REQ:       begin c.read = 1'b1; c.first = 1'b1; c.last = 1'b1; end
      HM_OP_CMP_SWAP, HM_OP_FETCH_ADD: begin c.atomic = 1'b1; c.first = 1'b1; c.last = 1'b1; end
      default: ;
    endcase
    return c;
  endfunction

  // AETH syndrome: class [7:5], then the credit count, RNR timer or NAK code [4:0]
  localparam logic [2:0] HM_AETH_CLS_ACK           = 3'd0;
  localparam logic [2:0] HM_AETH_CLS_RNR           = 3'd1;
  localparam logic [2:0] HM_AETH_CLS_NAK           = 3'd3;
  localparam logic [7:0] HM_AETH_ACK               = 8'h1F;  // ACK, credit count invalid (31)
  localparam logic [7:0] HM_AETH_RNR               = 8'h20;  // | the 5-bit RNR timer code
  localparam logic [7:0] HM_AETH_NAK_PSN_SEQ       = 8'h60;
  localparam logic [7:0] HM_AETH_NAK_INV_REQ       = 8'h61;
  localparam logic [7:0] HM_AETH_NAK_REM_ACCESS    = 8'h62;
  localparam logic [7:0] HM_AETH_NAK_REM_OP        = 8'h63;

  // The requester's window (docs/transport-engine.md, "The window"): a QP sends a request
  // packet only while its PSN is before its limit, at most HM_WIN_MAX PSNs beyond the oldest
  // unacknowledged one. A retransmission (NAK, timeout, implied NAK, READ gap) shrinks the
  // window to HM_WIN_MIN PSNs beyond the PSN resent; every PSN acknowledged after that widens
  // it by one, up to HM_WIN_MAX. The completer moves the requester's limit when it would
  // move by HM_WIN_STEP or more (at most HM_WIN_MIN, so the last packet before the limit,
  // which asks for an ACK, always moves it).
  localparam logic [11:0] HM_WIN_MAX  = 12'd512;
  localparam logic [11:0] HM_WIN_MIN  = 12'd16;
  localparam logic [11:0] HM_WIN_STEP = 12'd16;

  // The push windows (the MMIO path for send WQEs, rtl/eng/hm_wqe_push.sv): bytes per QP's
  // window and per push, one send WQE of the 64-byte stride.
  localparam int HM_PUSH_BYTES = 64;

  // Adaptive retransmission (docs/transport-engine.md, "Adaptive retransmission"): a QP times
  // the round trip of one request packet at a time (never one that was resent) and keeps a
  // smoothed RTT and its variation (RFC 6298 gains, 1/8 and 1/4). While requests are
  // outstanding, an early timer runs beside the standard ACK timeout (4.096 us x 2^timeout):
  // after SRTT + 4 RTTVAR (at least HM_RTO_MIN_US), or, when the QP has nothing more to
  // start, after a tail-loss probe time of 2 SRTT (at least HM_PTO_MIN_US), it resends from
  // the oldest unacknowledged PSN with the window at HM_WIN_MIN. It uses no retry: retry_cnt
  // still counts standard timeouts only, so a QP never fails sooner than with the standard
  // timer alone. Each early retransmission without progress doubles the next interval; at
  // most HM_RTO_BACKOFF of them until progress. The QP context's std_timer bit, or an
  // infinite timeout, turns it off.
  localparam int HM_RTO_MIN_US   = 8;
  localparam int HM_PTO_MIN_US   = 4;
  localparam int HM_RTO_BACKOFF  = 4;

  typedef struct packed {
    logic       known;
    logic [5:0] hdr_len;
    logic       reth;        // RETH at ext offset 0
    logic       atomic_eth;  // AtomicETH at ext offset 0
    logic       aeth;        // AETH at ext offset 0
    logic       atomic_ack;  // AtomicAckETH at ext offset 4
    logic       deth;        // DETH at ext offset 0
    logic       imm;         // ImmDt at ext offset imm_off
    logic       ieth;        // IETH at ext offset 0
    logic [4:0] imm_off;     // 0, 8 (after DETH) or 16 (after RETH)
    logic       cnp;         // 16 reserved bytes
    logic       no_payload;  // must carry neither payload nor pad
  } hm_op_info_t;

  function automatic hm_op_info_t hm_op_info(input logic [7:0] op);
    hm_op_info_t i;
    logic [4:0]  o;
    i = '0;
    o = op[4:0];
    if (op[7:5] == 3'b000 || (op[7:5] == 3'b001 && o <= 5'h0B)) begin
      // RC (0x00-0x17) and UC (0x20-0x2B, same layouts as RC 0x00-0x0B)
      i.known = 1'b1;
      i.hdr_len = 6'd12;
      case (o)
        5'h00, 5'h01, 5'h02, 5'h04: ;
        5'h03, 5'h05: begin i.imm = 1'b1; i.hdr_len = 6'd16; end
        5'h06, 5'h0A: begin i.reth = 1'b1; i.hdr_len = 6'd28; end
        5'h07, 5'h08: ;
        5'h09: begin i.imm = 1'b1; i.hdr_len = 6'd16; end
        5'h0B: begin i.reth = 1'b1; i.imm = 1'b1; i.imm_off = 5'd16; i.hdr_len = 6'd32; end
        5'h0C: begin i.reth = 1'b1; i.hdr_len = 6'd28; i.no_payload = 1'b1; end
        5'h0D, 5'h0F, 5'h10: begin i.aeth = 1'b1; i.hdr_len = 6'd16; end
        5'h0E: ;
        5'h11: begin i.aeth = 1'b1; i.hdr_len = 6'd16; i.no_payload = 1'b1; end
        5'h12: begin i.aeth = 1'b1; i.atomic_ack = 1'b1; i.hdr_len = 6'd24; i.no_payload = 1'b1; end
        5'h13, 5'h14: begin i.atomic_eth = 1'b1; i.hdr_len = 6'd40; i.no_payload = 1'b1; end
        5'h16, 5'h17: begin i.ieth = 1'b1; i.hdr_len = 6'd16; end
        default: i = '0;
      endcase
    end else if (op == 8'h64) begin
      i.known = 1'b1; i.deth = 1'b1; i.hdr_len = 6'd20;
    end else if (op == 8'h65) begin
      i.known = 1'b1; i.deth = 1'b1; i.imm = 1'b1; i.imm_off = 5'd8; i.hdr_len = 6'd24;
    end else if (op == 8'h81) begin
      i.known = 1'b1; i.cnp = 1'b1; i.hdr_len = 6'd28; i.no_payload = 1'b1;
    end
    return i;
  endfunction

  // Byte count of a contiguous tkeep (a thermometer code) of up to 128 lanes, zero-extended:
  // bit b of the count is the XOR of keep[m * 2^b - 1] over m >= 1 (a shallow XOR tree
  // instead of a priority chain).
  function automatic logic [7:0] hm_keep_bytes(input logic [127:0] keep);
    logic [7:0] n;
    for (int b = 0; b < 8; b++) begin
      n[b] = 1'b0;
      for (int m = 1; m * (1 << b) <= 128; m++) n[b] = n[b] ^ keep[m * (1 << b) - 1];
    end
    return n;
  endfunction

  // ---------------------------------------------------------------------------------------
  // AXI4-Lite with 32-bit data, as two bundles: what the manager drives (the AW, W and AR
  // channels and the B and R readies) and what the subordinate drives. A subordinate uses the
  // low address bits it decodes.
  // ---------------------------------------------------------------------------------------
  typedef struct packed {
    logic [31:0] awaddr;
    logic        awvalid;
    logic [31:0] wdata;
    logic [3:0]  wstrb;
    logic        wvalid;
    logic        bready;
    logic [31:0] araddr;
    logic        arvalid;
    logic        rready;
  } hm_axil_req_t;

  typedef struct packed {
    logic        awready;
    logic        wready;
    logic [1:0]  bresp;
    logic        bvalid;
    logic        arready;
    logic [31:0] rdata;
    logic [1:0]  rresp;
    logic        rvalid;
  } hm_axil_rsp_t;

  // ---------------------------------------------------------------------------------------
  // AXI4 as the engine's DMA fabric uses it (hm_eng_dma): 4-bit IDs, 64-bit addresses. An
  // address channel's payload (AR or AW):
  // ---------------------------------------------------------------------------------------
  localparam int HM_AXI_ID_W = 4;
  typedef struct packed {
    logic [3:0]  id;
    logic [63:0] addr;
    logic [7:0]  len;             // beats - 1
    logic [2:0]  size;            // log2(bytes per beat)
    logic [1:0]  burst;           // 2'b01: INCR
  } hm_axi_ax_t;

  // QPN <-> context-table entry of a table of 2^qw QPs. QPNs 0 and 1 are reserved (QP0, QP1),
  // so entries 0 and 1 answer to the two QPNs above the table, 2^qw and 2^qw + 1, and every
  // entry is usable (docs/transport-engine.md, "QPNs and table entries"). The mapping flips
  // bit qw when the bits below it, bit 0 aside, are zero; it is its own inverse. Applied to a
  // QPN from outside (the wire, a doorbell, a push) it gives the entry, with zero bits from qw
  // up, or a value with such bits set for QPNs 0 and 1 and every QPN outside the table; applied
  // to an entry it gives the QPN that the host sees (CQEs, events).
  function automatic logic [23:0] hm_qpn_swap(input logic [23:0] x, input int qw);
    logic [23:0] bit_qw, low;
    bit_qw = 24'd1 << qw;
    low    = x & (bit_qw - 24'd2);
    return low == '0 ? x ^ bit_qw : x;
  endfunction
  // 3:2 carry-save compressor on 20-bit operands: {sum, carry << 1}.
  function automatic logic [39:0] hm_csa20(input logic [19:0] a, input logic [19:0] b, input logic [19:0] c);
    return {(a ^ b ^ c), ((a & b) | (a & c) | (b & c)) << 1};
  endfunction
endpackage
