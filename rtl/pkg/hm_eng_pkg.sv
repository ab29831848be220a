// Hematite transport engine internals: records passed between the engine's blocks (not a
// host-visible format; those live in hm_desc_pkg).
package hm_eng_pkg;
  /* verilator lint_off UNUSEDPARAM */

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

  // Payload piece: a contiguous host buffer range (or inline bytes from the requester) that
  // becomes part of a packet's payload; `last` ends the packet.
  typedef struct packed {
    logic        inline_src;     // bytes come from the requester's inline stream
    logic        last;           // last piece of the packet
    logic [12:0] len;            // 1..4096 bytes
    logic [63:0] addr;           // host address (DMA pieces)
  } hm_piece_t;

  // A completion to write: the CQE (owner bit filled in by the CQ unit) and its CQ.
  typedef struct packed {
    logic                solicited; // the message carried SE (wakes a CQ armed for solicited)
    logic [15:0]         cqn;       // target CQ
    hm_desc_pkg::hm_cqe_t cqe;      // the entry
  } hm_cqe_req_t;

  /* verilator lint_on UNUSEDPARAM */
endpackage
