// Hematite transport engine internals: records passed between the engine's blocks (not a
// host-visible format; those live in hm_desc_pkg).
package hm_eng_pkg;
  // A send WQE the requester started (or refused), in posting order per QP: what the
  // completer needs to retire it. first_psn/npsn cover the PSNs of its request packets
  // (a READ reserves one PSN per response packet).
  typedef struct packed {
    logic [15:0] qpn;            // local QP
    logic [15:0] wqe_idx;        // send queue index (not wrapped to the ring size)
    logic [63:0] wr_id;          // from the WQE
    logic [7:0]  opcode;         // HM_WQE_OP_*
    logic [7:0]  flags;          // HM_WQE_F_*
    logic [23:0] first_psn;      // PSN of the first request packet
    logic [23:0] npsn;           // PSNs used (at least 1)
    logic [31:0] len;            // message length
    logic [7:0]  status;         // HM_CQE_ST_SUCCESS, or the local error that stopped the QP
  } hm_sent_t;

  // Sideband of a request header record: a UC QP's packet whose departure the completer must
  // hear of (a message's last packet, and the packets where RC would ask for an ACK: every
  // 64th of a message and the one at the window's edge). Once the packet has left for the TX
  // path with all of its payload, hm_uc_lack turns it into a local ACK for the completer (UC
  // has no ACKs on the wire; its WQEs complete when sent, and its window moves on these).
  // A UC packet whose payload could not be read (the TX path aborts the frame) becomes a local
  // NAK instead, marked or not: its WQE completes with LOC_PROT_ERR and the QP stops.
  typedef struct packed {
    logic        uc;             // a packet of a UC QP
    logic        ack;            // a local ACK once this UC packet has left
    logic [15:0] qpn;            // local QP
  } hm_ucl_t;

  // Payload piece: a contiguous host buffer range (or inline bytes from the requester) that
  // becomes part of a packet's payload; `last` ends the packet.
  typedef struct packed {
    logic        inline_src;     // bytes come from the requester's inline stream
    logic        last;           // last piece of the packet
    logic [12:0] len;            // 1..4096 bytes
    logic [63:0] addr;           // host address (DMA pieces)
  } hm_piece_t;

  // A DMA request of a block: `len` bytes (1 or more) at host address `addr`. A read engine
  // answers it with one stream packet, a write engine takes one (hm_eng_dma).
  typedef struct packed {
    logic [63:0] addr;
    logic [31:0] len;
  } hm_dma_req_t;

  // A piece for a scatter unit (hm_rc_scatter): `len` (1..4096) bytes of the payload stream
  // go to host address `addr`; `last` ends the packet's pieces; `discard` drops the rest of
  // the packet; an `imm` piece writes `data` (len <= 8 bytes) and takes no payload.
  typedef struct packed {
    logic        discard;
    logic        imm;
    logic [63:0] data;
    logic        last;
    logic [12:0] len;
    logic [63:0] addr;
  } hm_scat_pc_t;

  // A completion to write: the CQE (owner bit filled in by the CQ unit) and its CQ.
  typedef struct packed {
    logic                solicited; // the message carried SE (wakes a CQ armed for solicited)
    logic [15:0]         cqn;       // target CQ
    hm_desc_pkg::hm_cqe_t cqe;      // the entry
  } hm_cqe_req_t;

  // A QP's address vector: where its packets go and how they are marked (hm_qp_ctx_t's
  // fields; `ecn` already masked by the ECN-capable priorities).
  typedef struct packed {
    logic [23:0]  dest_qp;       // peer QP
    logic [47:0]  eth_dst;
    logic [47:0]  eth_src;
    logic         vlan_valid;
    logic [2:0]   vlan_pcp;
    logic [11:0]  vlan_vid;
    logic         ipv6;
    logic [127:0] ip_src;
    logic [127:0] ip_dst;
    logic [5:0]   dscp;
    logic [1:0]   ecn;
    logic [7:0]   ttl;
    logic [15:0]  udp_sport;
    logic [19:0]  flow_label;
    logic [15:0]  pkey;
  } hm_av_t;

  // The address vector of QP context `c`; its packets carry its ECN codepoint when their
  // priority (VLAN PCP, else DSCP[5:3]) is set in `ecn_mask` (HM_CC_PFC[15:8]).
  function automatic hm_av_t hm_ctx_av(input hm_desc_pkg::hm_qp_ctx_t c, input logic [7:0] ecn_mask);
    logic unused_ok;
    unused_ok = ^c;              // the context's other fields are not part of it
    return '{dest_qp: c.dest_qpn, eth_dst: c.eth_dst, eth_src: c.eth_src, vlan_valid: c.vlan_valid,
             vlan_pcp: c.vlan_pcp, vlan_vid: c.vlan_vid, ipv6: c.ipv6, ip_src: c.ip_src, ip_dst: c.ip_dst,
             dscp: c.dscp, ecn: ecn_mask[c.vlan_valid ? c.vlan_pcp : c.dscp[5:3]] ? c.ecn : 2'b00,
             ttl: c.ttl, udp_sport: c.udp_sport, flow_label: c.flow_label, pkey: c.pkey};
  endfunction

  // A header record addressed by `av` (every other field 0): an IPv4 address is its low 32
  // bits; IPv4 packets carry DF and no flow label; no VLAN tag, no PCP or VID.
  function automatic hm_pkg::hm_roce_hdr_t hm_av_hdr(input hm_av_t av);
    hm_pkg::hm_roce_hdr_t h;
    h            = '0;
    h.eth_dst    = av.eth_dst;
    h.eth_src    = av.eth_src;
    h.vlan_valid = av.vlan_valid;
    h.vlan_pcp   = av.vlan_valid ? av.vlan_pcp : 3'd0;
    h.vlan_vid   = av.vlan_valid ? av.vlan_vid : 12'd0;
    h.ipv6       = av.ipv6;
    h.ip_src     = av.ipv6 ? av.ip_src : {96'd0, av.ip_src[31:0]};
    h.ip_dst     = av.ipv6 ? av.ip_dst : {96'd0, av.ip_dst[31:0]};
    h.dscp       = av.dscp;
    h.ecn        = av.ecn;
    h.ttl        = av.ttl;
    h.ip_df      = !av.ipv6;
    h.flow_label = av.ipv6 ? av.flow_label : 20'd0;
    h.udp_sport  = av.udp_sport;
    h.udp_dport  = hm_pkg::HM_ROCE_UDP_PORT;
    h.pkey       = av.pkey;
    h.dest_qp    = av.dest_qp;
    return h;
  endfunction

  // A response the responder asks the response generator to send: ACK/NAK (AETH), READ
  // response packets for [va, va+len), or an atomic ACK; with the address vector of the QP.
  localparam logic [1:0] HM_RJ_AETH   = 2'd0;
  localparam logic [1:0] HM_RJ_READ   = 2'd1;
  localparam logic [1:0] HM_RJ_ATOMIC = 2'd2;
  typedef struct packed {
    logic [1:0]   kind;          // HM_RJ_*
    logic [23:0]  psn;           // PSN of the (first) response packet
    logic [7:0]   syndrome;      // AETH syndrome (ACK 0x1F, NAKs, RNR)
    logic [23:0]  msn;           // AETH MSN
    logic [63:0]  va;            // READ: address of the data
    logic [31:0]  len;           // READ: bytes
    logic [63:0]  orig;          // atomic ACK: original value
    logic [31:0]  wr_seq;        // responder writes issued before it (sent after they complete)
    logic [2:0]   pmtu;          // path MTU code of the QP
    hm_av_t       av;            // the QP's address vector
  } hm_rjob_t;

  // Completer -> requester commands.
  localparam logic [2:0] HM_RQC_REWIND  = 3'd0;  // go back: next packet is PSN psn, WQE idx at byte off, window limit lim; releases a hold
  localparam logic [2:0] HM_RQC_HOLD    = 3'd1;  // send nothing until the next REWIND (RNR wait)
  localparam logic [2:0] HM_RQC_RD_DONE = 3'd2;  // a READ / atomic completed (max_rd_atomic credit back)
  localparam logic [2:0] HM_RQC_CLAMP   = 3'd3;  // WQEs before idx completed: a resend position behind idx moves to idx (PSN psn, offset 0)
  localparam logic [2:0] HM_RQC_WIN     = 3'd4;  // the window's limit moves to lim (HM_WIN_* in hm_pkg)
  typedef struct packed {
    logic [2:0]  op;             // HM_RQC_*
    logic [15:0] qpn;
    logic [15:0] idx;            // REWIND, CLAMP: WQE index
    logic [31:0] off;            // REWIND: byte offset in that WQE (a multiple of the path MTU)
    logic [23:0] psn;            // REWIND, CLAMP: PSN of that packet
    logic [23:0] lim;            // REWIND, WIN: the window's limit, the first PSN that may not be sent
  } hm_rq_cmd_t;

  // PSN order in the 24-bit PSN space (ROCEV2.md section 8): a is at or after b when a - b
  // lies in [0, 2^23).
  function automatic logic hm_psn_ge(input logic [23:0] a, input logic [23:0] b);
    logic [23:0] d;
    d = a - b;
    return d < 24'h80_0000;
  endfunction
  function automatic logic hm_psn_lt(input logic [23:0] a, input logic [23:0] b);
    return !hm_psn_ge(a, b);
  endfunction

  // Timer lengths in clock cycles at cycles_per_us: the ACK timeout, 4.096 us * 2^t (t: the
  // QP's timeout attribute, 1..31), and the RNR timer of an RNR NAK's 5-bit code (the IBTA
  // table, in units of 0.1 us; code 0 is 655.36 ms).
  function automatic logic [47:0] hm_ack_timeout_cycles(input logic [4:0] t, input int cycles_per_us);
    return (48'(4096 * cycles_per_us) / 48'd1000) << t;
  endfunction
  function automatic logic [47:0] hm_rnr_timer_cycles(input logic [4:0] c, input int cycles_per_us);
    logic [22:0] u;
    case (c)
      5'd0: u = 23'd6553600; 5'd1: u = 23'd100; 5'd2: u = 23'd200; 5'd3: u = 23'd300;
      5'd4: u = 23'd400; 5'd5: u = 23'd600; 5'd6: u = 23'd800; 5'd7: u = 23'd1200;
      5'd8: u = 23'd1600; 5'd9: u = 23'd2400; 5'd10: u = 23'd3200; 5'd11: u = 23'd4800;
      5'd12: u = 23'd6400; 5'd13: u = 23'd9600; 5'd14: u = 23'd12800; 5'd15: u = 23'd19200;
      5'd16: u = 23'd25600; 5'd17: u = 23'd38400; 5'd18: u = 23'd51200; 5'd19: u = 23'd76800;
      5'd20: u = 23'd102400; 5'd21: u = 23'd153600; 5'd22: u = 23'd204800; 5'd23: u = 23'd307200;
      5'd24: u = 23'd409600; 5'd25: u = 23'd614400; 5'd26: u = 23'd819200; 5'd27: u = 23'd1228800;
      5'd28: u = 23'd1638400; 5'd29: u = 23'd2457600; 5'd30: u = 23'd3276800;
      default: u = 23'd4915200;
    endcase
    return 48'(u) * 48'(cycles_per_us) / 48'd10;
  endfunction

  // Largest WQE in bytes (stride code 2), and the SGEs of WQEs held in registers of that size:
  // a send WQE's SGE `slot` starts at byte 32 + 16 * slot (an atomic's one SGE is slot 1, at
  // byte 48), a receive WQE's SGE j at byte 16 + 16 * j (hm_desc_pkg, docs/descriptors.md).
  localparam int HM_WQE_MAX_BYTES = 256;
  function automatic hm_desc_pkg::hm_sge_t hm_sq_sge(input logic [HM_WQE_MAX_BYTES*8-1:0] wq,
                                                     input logic [4:0] slot);
    return hm_desc_pkg::hm_sge_t'(wq[(256 + 128 * int'(slot)) +: 128]);
  endfunction
  function automatic hm_desc_pkg::hm_sge_t hm_rq_sge(input logic [HM_WQE_MAX_BYTES*8-1:0] wq,
                                                     input logic [3:0] j);
    return hm_desc_pkg::hm_sge_t'(wq[(128 + 128 * int'(j)) +: 128]);
  endfunction

  // The packets of a `len`-byte message at path MTU 2^lp (an empty one: one). Send WQE classes
  // (HM_WQE_OP_*): an atomic, a WQE that waits for response data (READ or atomic), and the
  // PSNs a WQE's request packets take (an atomic: one).
  function automatic logic hm_wqe_atomic(input logic [7:0] op);
    return op == hm_desc_pkg::HM_WQE_OP_CMP_SWAP || op == hm_desc_pkg::HM_WQE_OP_FETCH_ADD;
  endfunction
  function automatic logic hm_wqe_rdat(input logic [7:0] op);
    return op == hm_desc_pkg::HM_WQE_OP_READ || hm_wqe_atomic(op);
  endfunction
  function automatic logic [23:0] hm_pkts(input logic [31:0] len, input logic [3:0] lp);
    if (len == '0) return 24'd1;
    return 24'((33'(len) + (33'd1 << lp) - 33'd1) >> lp);
  endfunction
  function automatic logic [23:0] hm_wqe_npsn(input logic [7:0] op, input logic [31:0] len,
                                              input logic [3:0] lp);
    return hm_wqe_atomic(op) ? 24'd1 : hm_pkts(len, lp);
  endfunction

  // Doorbell event from the BAR0 block (rtl/csr/hm_csr.sv) to the engine
  localparam logic [1:0] HM_DB_SQ = 2'd0;
  localparam logic [1:0] HM_DB_RQ = 2'd1;
  localparam logic [1:0] HM_DB_CQ = 2'd2;
  typedef struct packed {
    logic [1:0]  kind;           // HM_DB_SQ / HM_DB_RQ / HM_DB_CQ
    logic [31:0] word;           // the doorbell write data (hm_db_qp_t or hm_db_cq_t)
  } hm_db_evt_t;

  // Counter taps: the free-running 32-bit event counters of each engine block, one bundle per
  // block; the engine maps them onto BAR0 CNT (the table in docs/transport-engine.md).
  typedef struct packed {
    logic [31:0] wqes;           // WQEs started
    logic [31:0] pkts;           // request packets sent (retransmissions included)
    logic [31:0] local_err;      // WQEs refused by local checks
    logic [31:0] db_bad;         // SQ doorbells for a QP beyond the table
  } hm_req_stats_t;

  typedef struct packed {
    logic [31:0] reqs;           // request packets received
    logic [31:0] dups;           // duplicate requests
    logic [31:0] seq_naks;       // NAK sequence errors sent
    logic [31:0] rnr_naks;       // RNR NAKs sent
    logic [31:0] err_naks;       // error NAKs sent (access, invalid request, operational)
    logic [31:0] dropped;        // requests dropped (QP beyond the table, not ready, in ERR)
    logic [31:0] wr_err;         // DMA write errors (received data)
    logic [31:0] oos;            // requests ahead of the expected PSN (each, NAKed or not)
    logic [31:0] wr_reqs;        // RDMA WRITE requests in sequence (FIRST or ONLY)
    logic [31:0] rd_reqs;        // RDMA READ requests in sequence
    logic [31:0] at_reqs;        // atomic requests in sequence
  } hm_resp_stats_t;

  typedef struct packed {
    logic [31:0] acks;           // ACK/NAK packets received
    logic [31:0] dropped;        // responses dropped (stale, out of window)
    logic [31:0] unhandled;      // implied NAKs
    logic [31:0] wr_err;         // DMA write errors (READ responses, atomic results)
    logic [31:0] retries;        // go-back-N retries
    logic [31:0] timeouts;       // local ACK timeouts
    logic [31:0] seq_naks;       // NAK sequence errors received
    logic [31:0] rnr_naks;       // RNR NAKs received
    logic [31:0] early;          // early retransmissions (adaptive timer, tail-loss probe)
  } hm_compl_stats_t;

  typedef struct packed {
    logic [31:0] cqes;           // CQEs written
    logic [31:0] overrun;        // CQ overruns
    logic [31:0] dropped;        // CQEs for invalid CQs
    logic [31:0] wr_err;         // DMA write errors (CQEs)
    logic [hm_pkg::HM_CQE_ERR_STATUSES-1:0][31:0] err_st;  // [s - 1]: error CQEs of status s
    logic [31:0] err_rq;         // error CQEs of receive queues
    logic [31:0] flush_rq;       // flush-error CQEs of receive queues
  } hm_cq_stats_t;

  typedef struct packed {
    logic [31:0] ce;             // requests received with IP ECN = CE
    logic [31:0] np_suppressed;  // CE requests inside the CNP interval (no CNP)
    logic [31:0] rp_cuts;        // rate cuts
    logic [31:0] rp_activations; // QPs that became rate limited (first CNP)
    logic [31:0] rp_releases;    // rate-limited QPs released (back at the maximum rate)
    logic [31:0] no_slot;        // CNPs not applied: every rate limiter in use, or a bad QPN
  } hm_cc_stats_t;

  // A per-QP counter event (hm_qp_counters): add 1 to the counters HM_QPC_* set in `mask` of
  // QP `qpn`.
  typedef struct packed {
    logic [15:0]                       qpn;
    logic [hm_pkg::HM_QPC_COUNT-1:0]   mask;
  } hm_qpc_ev_t;
endpackage
