//! RC, UC and UD transport reference model (ROCEV2.md §6-§10): the packet-level oracle for
//! Hematite's transport engine.
//!
//! * [`mem`]: sparse host memory ([`HostMem`]) and the memory-region table ([`MrTable`]) with
//!   key / PD / bounds / access checks.
//! * [`qp`]: one RC queue pair ([`Qp`]): requester (segmentation, PSNs, ACK/NAK processing,
//!   go-back-N, RNR and retry counters, READ/atomic responses) and responder (ePSN checks, MSN,
//!   receive WQEs, ACK coalescing, READ responses, atomics with responder resources).
//! * [`node`]: a host ([`Node`]): memory, MRs, QPs; packets in via [`Node::receive`], out via
//!   [`Node::poll_tx`], time via [`Node::tick`].
//! * [`sim`]: a deterministic two-node harness with a seeded faulty wire and a virtual clock.
//!
//! Every packet is a [`Pkt`]: an [`HdrRecord`] (as `build_frame` wants it, already passed
//! through [`crate::normalize_for_tx`]) plus its payload bytes. Nothing here panics on any input,
//! and everything is deterministic (no wall clock, no hashing with random state).
//!
//! ## Rules this model fixes (where ROCEV2.md leaves a choice)
//! * **AckReq**: set on the last packet of every request message (including READ requests and
//!   atomics) and on every packet whose index inside its message is `63 mod 64`, so no more
//!   than 63 consecutive request packets go without AckReq. The rule only depends on the
//!   packet's position in its message, and on the last packet before the window's limit
//!   (below).
//! * **The requester's window** (go-back-N that does not collapse under loss): a request
//!   packet goes only while its PSN is before the QP's limit (a READ request is checked at its
//!   first PSN). The limit starts `WIN_MAX` PSNs beyond the first PSN. A retransmission (NAK,
//!   timeout, implied NAK, READ-response gap; not an RNR wait) sets it `WIN_MIN` PSNs beyond
//!   the PSN resent; every PSN acknowledged after that widens the window (limit minus oldest
//!   unacknowledged PSN) by one, up to `WIN_MAX`, and the limit moves when it would move by
//!   `WIN_STEP` or more. So a lost NAK or a lost retransmission costs at most a window of
//!   packets, not everything posted.
//! * **Responder ACKs** only for AckReq packets (and NAKs); a duplicate SEND/WRITE packet with
//!   AckReq is re-ACKed with PSN ePSN−1 and the current MSN, never re-executed.
//! * **Local checks** (SGL keys, PD, bounds, local-write for READ/atomic targets, atomic shape)
//!   are done when the requester reaches the WQE; a failing WQE is not started, the send queue
//!   stalls at it, and once every earlier WQE has completed it completes with
//!   `LocProtErr` / `LocLenErr` / `LocQpOpErr` and the QP goes to ERR.
//! * **QP access flags** missing for a WRITE / READ / atomic → NAK invalid request (0x61), as in
//!   ROCEV2.md §10; **MR** key / PD / bounds / access failures → NAK remote access error (0x62).
//!   A zero-length WRITE / READ skips the MR check.
//! * **Responder-local errors** (receive SGL protection, bad IETH key) → receive CQE
//!   `LocProtErr` + NAK remote operational error (0x63); a SEND longer than the receive SGL →
//!   receive CQE `LocLenErr` + NAK invalid request (0x61). Error NAKs move both QPs to ERR.
//! * After an RNR NAK the responder, like after a NAK-sequence error, silently drops further
//!   out-of-order packets until ePSN arrives.
//! * Implied NAK, a NAK-sequence error and a READ-response gap each consume one `retry_cnt`
//!   retry (like a timeout); any forward progress resets both retry counters.
//! * Atomic operands in host memory are little-endian `u64`s (host order).
//! * CQEs for errors and flushes are always generated, even for unsignaled WQEs.
//!
//! ## UC (unreliable connected: `QpConfig::uc`)
//! The same segmentation, PSNs and receive placement as RC, with opcodes 0x20-0x2B, and nothing
//! that makes it reliable:
//! * **Operations**: SEND, SEND with immediate, WRITE, WRITE with immediate. A READ, atomic or
//!   SEND with invalidate WQE fails its local checks with `LocQpOpErr`.
//! * **Requester**: AckReq is never set; no window, no timers, no retries. A WQE completes
//!   (a CQE if signaled) once its last packet has been sent. Packets of other classes that
//!   arrive for a UC QP (RC responses included) are dropped.
//! * **Responder**: no ACK or NAK, ever. Every packet sets ePSN to its PSN + 1. A packet
//!   whose PSN is not ePSN (a gap: counted in `QpStats::seq_drops`) ends the message in
//!   progress (dropped; a SEND keeps its receive WQE for the next message) and is dropped
//!   itself unless it starts a message (FIRST or ONLY). A MIDDLE or LAST without its message, a payload length or QP access flag violation,
//!   a WRITE whose R_Key fails its check or whose payload overruns its DMA length, a SEND with
//!   no receive WQE, a WRITE with immediate with no receive WQE at its last packet: the
//!   message is dropped (counted in `QpStats::uc_drops`), the QP stays as it is. Responder-local
//!   errors complete the receive WQE as in RC (`LocProtErr`, `LocLenErr`) and move the QP to
//!   ERR, without a NAK.
//! * **States**: as RC; SQE is not used (a send error moves a UC QP to ERR, as in RC).
//!
//! ## Selective repeat (`QpConfig::sr`)
//! Set on both QPs of a connection once they agreed on it (ECE; the engine does not implement
//! it yet, so the provider offers no option and the model alone has it). RC only. The rules,
//! in the style of IRN (SIGCOMM 2018):
//! * **Every WRITE packet carries its placement.** The packets of a WRITE after its first go
//!   as the manufacturer-specific opcodes `opcode::SR_WRITE_MIDDLE` / `SR_WRITE_LAST` /
//!   `SR_WRITE_LAST_IMM` (0xC7-0xC9; IBTA reserves 0xC0-0xFF), the MIDDLE / LAST layouts with
//!   a RETH added: the packet's own target address, the R_Key, the message's DMA length.
//!   Arriving at ePSN such a packet must continue the message in progress (its address where
//!   that message has reached, the same DMA length), else a NAK invalid request. A QP without
//!   selective repeat drops them as unknown opcodes, as the engine's receive path does.
//! * **Responder.** A WRITE packet up to `SR_WIN` PSNs beyond ePSN is placed when every check
//!   a packet can pass on its own passes: QP access, the PMTU length rules, the DMA length
//!   limit, the R_Key over the whole message (FIRST / ONLY) or over the packet (the others).
//!   Everything else beyond ePSN is dropped: SENDs (a SEND's receive WQE and offset depend on
//!   the messages before it, which its packets do not carry), READs and atomics (executed in
//!   order only: a READ sees the WRITEs before it, an atomic runs once), and packets failing a
//!   check (checked again, with their outcome, when they come in order). Packets `SR_WIN` or
//!   more beyond ePSN are dropped without an answer.
//! * Each other packet beyond ePSN, placed or dropped, is answered with a **selective NAK**:
//!   an ACKNOWLEDGE whose BTH PSN is ePSN (every PSN before it acknowledged), whose AETH NAK
//!   code is 5 (`SYN_SNAK_PLACED`) or 6 (`SYN_SNAK_DROPPED`, codes IBTA reserves; sent only
//!   under the agreement), and whose MSN field carries the PSN that arrived. A duplicate of a
//!   placed packet gets `SYN_SNAK_PLACED` again.
//! * When a packet arrives at ePSN, ePSN then moves over the placed packets that follow, doing
//!   what their arrival in order does: the sequence (a FIRST inside a message, a packet that
//!   does not continue the message: NAK invalid request), the R_Key again (a SEND with
//!   invalidate before it may have revoked it: NAK remote access error), MSN, a WRITE with
//!   immediate's receive WQE and CQE (none: an RNR NAK there; the packet is taken again when
//!   resent). An ACK for ePSN − 1 follows. A QP that fails keeps the WRITE data it placed
//!   beyond ePSN, each in a region its R_Key allowed when it arrived.
//! * **Requester.** It records the PSNs acknowledged selectively. A selective NAK acknowledges
//!   everything before its PSN and starts (or extends) a recovery up to the PSN it reports
//!   (placed; a PSN of a READ or atomic is never taken as placed) or past it (dropped): every
//!   PSN of the recovery neither acknowledged nor resent is resent once, before anything new
//!   and within the window's limit. A READ's missing responses are asked for by runs (a READ
//!   request for `k` packets at the PSN of the first, answered with those packets and their
//!   opcodes in the whole response), or whole while nothing of the READ has been answered (a
//!   part of a READ the responder has not executed would be taken as a new, shorter READ).
//!   An ACK beyond an unanswered READ or atomic starts a recovery instead of a retry, and is
//!   kept: once the READ or atomic completes it acknowledges what follows. An error NAK behind
//!   an unanswered READ or atomic likewise waits: the error is the WQE's it names, once
//!   everything before it completed (the timers still run). Selective NAKs and
//!   recoveries use no retry. A timer (standard or adaptive, with the same retry and backoff
//!   rules as go-back-N, the window shrinking the same way) starts a recovery over everything
//!   sent: each PSN not acknowledged selectively is resent once, and the oldest
//!   unacknowledged one and the one after the highest cumulative acknowledgement in any case
//!   (the ACK or an RNR NAK for it may be what was lost), but no request packet the kept
//!   cumulative acknowledgement covers; the cursor for new packets stays where it is. A packet at the oldest unacknowledged PSN always asks for
//!   an ACK. After an RNR wait the requester resends from the PSN NAKed (forgetting its
//!   selective acknowledgement), skipping the PSNs acknowledged selectively.
//! * READ responses and atomic results are written to local memory as they arrive, in any
//!   order; a READ completes once all of its responses are placed, an atomic once its result
//!   is, each in order.
//! * **Ordering.** Placement out of order must not let an earlier request's late data land
//!   over a later request's, or a later WRITE's data be read by an earlier READ. So a WRITE
//!   whose target overlaps the target of an outstanding WRITE, READ or atomic starts only
//!   once those completed, and so does a READ or atomic whose local buffers overlap those of
//!   an outstanding READ or atomic. Targets are compared by
//!   address, whatever the R_Key. Memory then ends as with go-back-N, with one exception the
//!   requester cannot see: a SEND whose receive buffer overlaps the target of a WRITE after
//!   it may be placed after that WRITE.
//! * **One side only** (ECE prevents it): a responder with selective repeat serves a
//!   requester without it completely (the selective NAKs are ignored; the requester recovers
//!   on its timers); a requester with it facing a responder without it fails with
//!   `RetryExcErr`: its selective-repeat WRITE packets are dropped as unknown, and a READ's
//!   partial repair goes unanswered.
//!
//! ## UD (unreliable datagram)
//! [`ud::UdQp`], its own type (a destination per WR, one packet per message, no connection
//! state): the rules are in [`ud`]'s module docs.

pub mod mem;
pub mod node;
pub mod qp;
pub mod sim;
pub mod ud;

pub use mem::{HostMem, MemError, Mr, MrAccess, MrTable};
pub use node::Node;
pub use qp::Qp;

use crate::HdrRecord;

/// One transport packet: header record plus payload (no pad, no ICRC).
pub type Pkt = (HdrRecord, Vec<u8>);

/// Per-QP address vector: everything below the BTH that the engine puts on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AddrVec {
    /// Our MAC (48 bits).
    pub eth_src: u64,
    /// Next-hop MAC (48 bits).
    pub eth_dst: u64,
    /// IPv6 (true) or IPv4 (false; addresses in the low 32 bits).
    pub ipv6: bool,
    /// Our IP address.
    pub ip_src: u128,
    /// Peer IP address.
    pub ip_dst: u128,
    /// DSCP (6 bits).
    pub dscp: u8,
    /// ECN (2 bits); data packets should be ECT.
    pub ecn: u8,
    /// IPv4 TTL / IPv6 hop limit.
    pub ttl: u8,
    /// UDP source port (constant per QP).
    pub udp_sport: u16,
    /// IPv6 flow label (20 bits).
    pub flow_label: u32,
    /// BTH P_Key.
    pub pkey: u16,
}

impl Default for AddrVec {
    fn default() -> Self {
        AddrVec {
            eth_src: 0x02_00_00_00_00_01,
            eth_dst: 0x02_00_00_00_00_02,
            ipv6: false,
            ip_src: 0x0A00_0001,
            ip_dst: 0x0A00_0002,
            dscp: 26,
            ecn: 2,
            ttl: 64,
            udp_sport: 0xC000,
            flow_label: 0,
            pkey: 0xFFFF,
        }
    }
}

impl AddrVec {
    /// The same path seen from the other end (MACs and IPs swapped).
    pub fn reversed(&self) -> AddrVec {
        AddrVec {
            eth_src: self.eth_dst,
            eth_dst: self.eth_src,
            ip_src: self.ip_dst,
            ip_dst: self.ip_src,
            ..*self
        }
    }
}

/// QP state (verbs): the one encoding of hematite-abi (`enum ibv_qp_state` values; the engine's
/// `HM_QPS_*` codes are derived from it by `QpState::engine_code`). Only RTS starts new send
/// WQEs (SQD finishes started ones); RTR, RTS and SQD receive; ERR flushes and drops. RC never
/// enters SQE: the model refuses a transition to it.
pub use hematite_abi::qp::QpState;

/// QP-level remote access flags (which remote requests the responder accepts).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct QpAccess {
    /// Accept RDMA WRITE.
    pub remote_write: bool,
    /// Accept RDMA READ.
    pub remote_read: bool,
    /// Accept atomics.
    pub remote_atomic: bool,
}

impl QpAccess {
    /// Everything allowed.
    pub const ALL: QpAccess = QpAccess { remote_write: true, remote_read: true, remote_atomic: true };
}

/// QP attributes (the RC set of ROCEV2.md §10).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpConfig {
    /// Protection domain of the QP (SGE and remote keys must belong to it).
    pub pd: u32,
    /// Path MTU in bytes: 256, 512, 1024, 2048 or 4096.
    pub pmtu: u32,
    /// Peer QP number (BTH DestQP of everything we send).
    pub dest_qpn: u32,
    /// First PSN the requester uses.
    pub sq_psn: u32,
    /// Initial expected PSN of the responder.
    pub rq_psn: u32,
    /// Local ACK timeout code: 4.096 µs × 2^timeout, 0 = infinite.
    pub timeout: u8,
    /// Retries after timeout / NAK-sequence error (0..7; 7 is *not* infinite).
    pub retry_cnt: u8,
    /// RNR retries (0..6; 7 = infinite).
    pub rnr_retry: u8,
    /// RNR timer code put into our RNR NAKs (0..31).
    pub min_rnr_timer: u8,
    /// Outstanding READ/atomic requests we may have as requester.
    pub max_rd_atomic: u8,
    /// Responder resources (remembered READ/atomic requests).
    pub max_dest_rd_atomic: u8,
    /// Remote access flags.
    pub access: QpAccess,
    /// Address vector.
    pub av: AddrVec,
    /// The standard ACK timeout alone: no adaptive early retransmission (see the module docs).
    pub std_timer: bool,
    /// Unreliable connected (UC) instead of RC (see the module docs).
    pub uc: bool,
    /// Selective repeat (see the module docs): set on both QPs once they agreed on it (ECE).
    pub sr: bool,
}

impl Default for QpConfig {
    fn default() -> Self {
        QpConfig {
            pd: 1,
            pmtu: 1024,
            dest_qpn: 0,
            sq_psn: 0,
            rq_psn: 0,
            timeout: 14,
            retry_cnt: 7,
            rnr_retry: 7,
            min_rnr_timer: 1,
            max_rd_atomic: 4,
            max_dest_rd_atomic: 4,
            access: QpAccess::ALL,
            av: AddrVec::default(),
            std_timer: false,
            uc: false,
            sr: false,
        }
    }
}

/// One scatter/gather element.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sge {
    /// Start address.
    pub addr: u64,
    /// Length in bytes.
    pub len: u32,
    /// Local key of the MR holding it.
    pub lkey: u32,
}

impl Sge {
    /// `len` bytes at `addr` in the MR of `lkey`.
    pub const fn new(addr: u64, len: u32, lkey: u32) -> Sge {
        Sge { addr, len, lkey }
    }
}

/// Send work request operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendOp {
    /// SEND.
    Send,
    /// SEND with immediate data.
    SendImm(u32),
    /// SEND with invalidate (the R_Key to invalidate at the responder).
    SendInv(u32),
    /// RDMA WRITE.
    Write {
        /// Remote VA.
        remote_addr: u64,
        /// Remote key.
        rkey: u32,
    },
    /// RDMA WRITE with immediate (consumes a receive WQE at the responder).
    WriteImm {
        /// Remote VA.
        remote_addr: u64,
        /// Remote key.
        rkey: u32,
        /// Immediate data.
        imm: u32,
    },
    /// RDMA READ into the local SGL.
    Read {
        /// Remote VA.
        remote_addr: u64,
        /// Remote key.
        rkey: u32,
    },
    /// Atomic compare & swap; the original value goes to the (single, 8-byte) local SGE.
    CmpSwap {
        /// Remote VA (8-byte aligned).
        remote_addr: u64,
        /// Remote key.
        rkey: u32,
        /// Expected value.
        compare: u64,
        /// New value.
        swap: u64,
    },
    /// Atomic fetch & add; the original value goes to the (single, 8-byte) local SGE.
    FetchAdd {
        /// Remote VA (8-byte aligned).
        remote_addr: u64,
        /// Remote key.
        rkey: u32,
        /// Value to add.
        add: u64,
    },
}

impl SendOp {
    /// READ or atomic (needs a `max_rd_atomic` slot).
    pub fn is_rd_atomic(&self) -> bool {
        matches!(self, SendOp::Read { .. } | SendOp::CmpSwap { .. } | SendOp::FetchAdd { .. })
    }
    /// CmpSwap or FetchAdd.
    pub fn is_atomic(&self) -> bool {
        matches!(self, SendOp::CmpSwap { .. } | SendOp::FetchAdd { .. })
    }
    /// Completion opcode of this operation.
    pub fn wc_opcode(&self) -> WcOpcode {
        match self {
            SendOp::Send | SendOp::SendImm(_) | SendOp::SendInv(_) => WcOpcode::Send,
            SendOp::Write { .. } | SendOp::WriteImm { .. } => WcOpcode::RdmaWrite,
            SendOp::Read { .. } => WcOpcode::RdmaRead,
            SendOp::CmpSwap { .. } => WcOpcode::CmpSwap,
            SendOp::FetchAdd { .. } => WcOpcode::FetchAdd,
        }
    }
}

/// A send work request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendWr {
    /// User cookie, returned in the CQE.
    pub wr_id: u64,
    /// Operation.
    pub op: SendOp,
    /// Local scatter/gather list (source for SEND/WRITE, target for READ/atomics).
    pub sgl: Vec<Sge>,
    /// Generate a CQE on success.
    pub signaled: bool,
    /// Set SE on the last packet (SEND / WRITE with immediate).
    pub solicited: bool,
    /// SEND/WRITE only: copy the SGL bytes at post time (keys are still checked then).
    pub inline: bool,
}

impl SendWr {
    /// A signaled, non-solicited, non-inline WR.
    pub fn new(wr_id: u64, op: SendOp, sgl: Vec<Sge>) -> SendWr {
        SendWr { wr_id, op, sgl, signaled: true, solicited: false, inline: false }
    }
}

/// A receive work request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecvWr {
    /// User cookie.
    pub wr_id: u64,
    /// Where incoming SEND data goes.
    pub sgl: Vec<Sge>,
}

/// The verbs state transitions every QP type here allows (ROCEV2.md §10): any → RESET, any but
/// RESET → ERR (the kernel's table has no RESET → ERR), and the table's forward moves; SQE is
/// never entered.
pub(crate) fn legal_transition(from: QpState, to: QpState) -> bool {
    use QpState::*;
    matches!(
        (from, to),
        (_, Reset) | (Init | Rtr | Rts | Sqd | Sqe | Err, Err) | (Reset, Init) | (Init, Init) | (Init, Rtr)
            | (Rtr, Rts) | (Rts, Rts) | (Rts, Sqd) | (Sqd, Sqd) | (Sqd, Rts)
    )
}

/// Whether a send WR may be posted in state `s`: `Ok(false)` queue it (RTS, SQD), `Ok(true)`
/// complete it at once with `WrFlushErr` (ERR), `InvalidState` otherwise.
pub(crate) fn send_post_flushes(s: QpState) -> Result<bool, PostError> {
    match s {
        QpState::Rts | QpState::Sqd => Ok(false),
        QpState::Err => Ok(true),
        _ => Err(PostError::InvalidState),
    }
}

/// Completion status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WcStatus {
    /// Success.
    Success,
    /// Local length error (message longer than the receive SGL, atomic SGL not 8 bytes, ...).
    LocLenErr,
    /// Local protection error (SGE key / PD / bounds / access).
    LocProtErr,
    /// Malformed WR (misaligned atomic, too many bytes).
    LocQpOpErr,
    /// Flushed (QP in ERR).
    WrFlushErr,
    /// Peer NAKed with remote access error.
    RemAccessErr,
    /// Peer NAKed with invalid request.
    RemInvReqErr,
    /// Peer NAKed with remote operational error.
    RemOpErr,
    /// retry_cnt exhausted.
    RetryExcErr,
    /// rnr_retry exhausted.
    RnrRetryExcErr,
}

/// Completion opcode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WcOpcode {
    /// SEND (any variant), requester side.
    Send,
    /// RDMA WRITE (any variant), requester side.
    RdmaWrite,
    /// RDMA READ.
    RdmaRead,
    /// Compare & swap.
    CmpSwap,
    /// Fetch & add.
    FetchAdd,
    /// Receive of a SEND.
    Recv,
    /// Receive consumed by an RDMA WRITE with immediate.
    RecvRdmaWithImm,
}

/// A completion queue entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cqe {
    /// From the WR.
    pub wr_id: u64,
    /// Status.
    pub status: WcStatus,
    /// Opcode.
    pub opcode: WcOpcode,
    /// Bytes transferred (receive: message length; READ: length; atomics: 8; errors: 0).
    pub byte_len: u32,
    /// Immediate data received.
    pub imm: Option<u32>,
    /// R_Key invalidated by a SEND with invalidate.
    pub invalidated_rkey: Option<u32>,
    /// Local QP number.
    pub qpn: u32,
}

/// Why a post or a QP operation was refused (nothing queued).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PostError {
    /// No such QP.
    NoQp,
    /// QP state forbids posting (RESET, or a send post before RTS).
    InvalidState,
    /// Invalid QP attribute (PMTU, QPN width, ...).
    InvalidAttr,
    /// Queue full.
    QueueFull,
}

/// AETH syndrome of a plain ACK ("credits invalid").
pub const SYN_ACK: u8 = 0x1F;
/// AETH syndrome base of an RNR NAK (low 5 bits: timer code).
pub const SYN_RNR: u8 = 0x20;
/// NAK PSN sequence error.
pub const SYN_NAK_SEQ: u8 = 0x60;
/// NAK invalid request.
pub const SYN_NAK_INV_REQ: u8 = 0x61;
/// NAK remote access error.
pub const SYN_NAK_REM_ACCESS: u8 = 0x62;
/// NAK remote operational error.
pub const SYN_NAK_REM_OP: u8 = 0x63;
/// Selective NAK, the packet placed (NAK code 5, reserved by IBTA; sent only when both QPs
/// agreed on selective repeat): see the module docs.
pub const SYN_SNAK_PLACED: u8 = 0x65;
/// Selective NAK, the packet dropped (NAK code 6, likewise).
pub const SYN_SNAK_DROPPED: u8 = 0x66;

/// Largest message length (2^31 bytes).
pub const MAX_MSG_LEN: u64 = 1 << 31;
/// Most SGEs per WR.
pub const MAX_SGE: usize = 32;
/// Most PSNs the requester keeps outstanding (well under 2^23).
pub const MAX_OUTSTANDING_PSNS: u32 = 1 << 22;
/// Most WRs queued per send / receive queue.
pub const MAX_WR: usize = 1 << 16;
/// Packets per message between forced AckReqs (see the module docs).
pub const ACKREQ_INTERVAL: u32 = 64;
// The requester's window (see the module docs), defined once for RTL and model in
// `rtl/pkg/hm_pkg.sv` (through hematite-abi).
/// The window's widest: PSNs beyond the oldest unacknowledged one.
pub const WIN_MAX: u32 = hematite_abi::pkt::HM_WIN_MAX as u32;
/// The window after a retransmission: PSNs beyond the one resent.
pub const WIN_MIN: u32 = hematite_abi::pkt::HM_WIN_MIN as u32;
/// The least move of the limit.
pub const WIN_STEP: u32 = hematite_abi::pkt::HM_WIN_STEP as u32;
/// Selective repeat: the responder places packets up to this many PSNs beyond ePSN (the
/// requester's window never sends further).
pub const SR_WIN: u32 = WIN_MAX;
// Adaptive retransmission (see the module docs), also from `rtl/pkg/hm_pkg.sv`.
/// The early timer's floor, ns.
pub const RTO_MIN_NS: u64 = hematite_abi::pkt::HM_RTO_MIN_US as u64 * 1000;
/// The tail-loss probe's floor, ns.
pub const PTO_MIN_NS: u64 = hematite_abi::pkt::HM_PTO_MIN_US as u64 * 1000;
/// Early retransmissions without progress, each doubling the interval.
pub const RTO_BACKOFF: u32 = hematite_abi::pkt::HM_RTO_BACKOFF as u32;

/// RNR timer code → nanoseconds (ROCEV2.md §7; code 0 = 655.36 ms).
pub fn rnr_timer_ns(code: u8) -> u64 {
    const US100: [u32; 32] = [
        6_553_600, 100, 200, 300, 400, 600, 800, 1_200, 1_600, 2_400, 3_200, 4_800, 6_400, 9_600,
        12_800, 19_200, 25_600, 38_400, 51_200, 76_800, 102_400, 153_600, 204_800, 307_200,
        409_600, 614_400, 819_200, 1_228_800, 1_638_400, 2_457_600, 3_276_800, 4_915_200,
    ];
    // table is in units of 0.1 µs
    US100[(code & 0x1F) as usize] as u64 * 100
}

/// Local ACK timeout code → nanoseconds (`None` for 0 = infinite): 4096 ns × 2^code.
pub fn ack_timeout_ns(code: u8) -> Option<u64> {
    if code == 0 {
        None
    } else {
        Some(4096u64 << (code & 0x1F))
    }
}

/// PMTU is one of 256, 512, 1024, 2048, 4096.
pub fn pmtu_valid(pmtu: u32) -> bool {
    matches!(pmtu, 256 | 512 | 1024 | 2048 | 4096)
}

/// Packets of a message of `len` bytes at `pmtu` (at least 1). Also the number of PSNs a READ
/// of `len` bytes reserves.
pub fn pkts_for(len: u64, pmtu: u32) -> u32 {
    let p = pmtu.max(1) as u64;
    len.div_ceil(p).clamp(1, u32::MAX as u64) as u32
}
