//! UD queue pairs (unreliable datagram; ROCEV2.md §3 DETH, §4 "UD receive buffer", §8 states):
//! the reference the engine's UD path is checked against. Written from the specification; the
//! choices where it leaves one are listed here.
//!
//! * **Operations**: SEND and SEND with immediate, one packet each (opcodes 0x64 and 0x65, BTH +
//!   DETH [+ ImmDt]). Local checks when the requester reaches the WQE: any other operation
//!   fails with `LocQpOpErr`; a message longer than the path MTU with `LocLenErr`; an SGE whose
//!   key, PD or bounds fail with `LocProtErr`. A failing WQE sends nothing; it completes with
//!   its status once every earlier WQE has, and the QP goes to ERR.
//! * **Destination per WR** ([`UdDest`]): an address handle ([`Ah`]: next-hop MAC, IP version
//!   and addresses, traffic class, TTL / hop limit, flow label), the remote QPN and the remote
//!   Q_Key. A Q_Key with its high-order bit set (`0x8000_0000`) stands for the QP's own Q_Key
//!   (the IBTA rule for controlled Q_Keys); DETH carries the Q_Key and our QPN.
//! * **Requester**: PSNs from `sq_psn`, one per packet; AckReq never set; no window, timers or
//!   retries. WQEs go in order; each completes (a CQE if signaled, opcode `Send`, its length)
//!   once its packet is sent.
//! * **Responder**: a UD QP takes UD SEND ONLY and SEND ONLY with immediate in RTR, RTS and SQD;
//!   any other opcode, or any packet in another state, is dropped. The PSN is not checked (each
//!   datagram stands alone), nor is the payload length against the path MTU (the frame bounds
//!   it; the receive buffer must hold it). A DETH Q_Key different from the QP's drops the
//!   packet (`UdStats::qkey_drops`); so does a P_Key of another partition, or two limited
//!   members (the receive path's rule, [`crate::rx::pkey_matches`]: `pkey_drops`), and a
//!   packet with no receive WQE posted (`no_wqe_drops`: UD has no RNR). The receive buffer gets
//!   a 40-byte GRH area first: over IPv6 the packet's IPv6 header, over IPv4 20 zero bytes and
//!   then its IPv4 header, as received; the payload follows. A receive SGL shorter than 40 +
//!   payload completes its WQE with `LocLenErr`, one that fails its MR checks with
//!   `LocProtErr`; both move the QP to ERR (as on RC and UC). The receive CQE ([`UdRecv`]):
//!   opcode `Recv`, byte_len 40 + payload, the immediate, the source QPN from DETH, and the GRH
//!   flag (always set: every RoCEv2 packet has its network header).
//! * **States**: RTS sends and receives; RTR receives; SQD starts no new WQE. ERR flushes both
//!   queues (`WrFlushErr`; posts in ERR complete at once). RESET empties the queues and the
//!   completions not yet polled, as on RC. RESET -> ERR is refused (the kernel's table has no
//!   such transition). SQE is not used: a send error moves a
//!   UD QP to ERR, as on UC (a stated decision: the engine keeps one error state per QP).

use super::mem::Need;
use super::qp::{check_sgl, gather, scatter, sgl_len, Ctx};
use super::{legal_transition, pmtu_valid, send_post_flushes, Cqe, Pkt, PostError, QpState, RecvWr, SendOp, SendWr, WcOpcode, WcStatus};
use crate::psn;
use crate::{build_frame, normalize_for_tx, HdrRecord};
use std::collections::VecDeque;

/// UD SEND ONLY.
pub const OP_UD_SEND: u8 = 0x64;
/// UD SEND ONLY with immediate.
pub const OP_UD_SEND_IMM: u8 = 0x65;
/// Bytes of the GRH area in front of every UD receive.
pub const GRH_LEN: usize = 40;
/// A WR Q_Key with this bit set means the QP's own Q_Key.
pub const QKEY_USE_QP: u32 = 0x8000_0000;
/// Most WQEs a UD queue holds.
pub const UD_MAX_WR: usize = 4096;

/// The sending side of a UD QP: our port's addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdSource {
    /// Our MAC (48 bits).
    pub eth_src: u64,
    /// IPv6 (true) or IPv4 (addresses in the low 32 bits).
    pub ipv6: bool,
    /// Our IP address.
    pub ip_src: u128,
    /// UDP source port (constant per QP).
    pub udp_sport: u16,
}

/// An address handle: where one datagram goes (its IP version is the source's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ah {
    /// Next-hop MAC (48 bits).
    pub eth_dst: u64,
    /// Peer IP address.
    pub ip_dst: u128,
    /// DSCP (6 bits).
    pub dscp: u8,
    /// ECN (2 bits).
    pub ecn: u8,
    /// IPv4 TTL / IPv6 hop limit.
    pub ttl: u8,
    /// IPv6 flow label (20 bits).
    pub flow_label: u32,
}

/// The destination of a UD send WR.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdDest {
    /// Address handle.
    pub ah: Ah,
    /// Remote QP number (24 bits).
    pub qpn: u32,
    /// Remote Q_Key ([`QKEY_USE_QP`] set: the QP's own).
    pub qkey: u32,
}

/// UD QP attributes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdConfig {
    /// Protection domain (SGE keys must belong to it).
    pub pd: u32,
    /// Path MTU in bytes (256 .. 4096): the largest datagram.
    pub pmtu: u32,
    /// The QP's Q_Key.
    pub qkey: u32,
    /// BTH P_Key.
    pub pkey: u16,
    /// First PSN.
    pub sq_psn: u32,
    /// Our addresses.
    pub src: UdSource,
}

/// A UD receive completion: the CQE and what only UD reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdRecv {
    /// The completion (opcode `Recv`; byte_len includes the 40-byte GRH area).
    pub cqe: Cqe,
    /// Source QP (DETH); 0 for flushes and errors before a packet was taken.
    pub src_qp: u32,
    /// A GRH area was placed (every RoCEv2 receive that succeeds).
    pub grh: bool,
}

/// Counters (diagnostics).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct UdStats {
    /// Datagrams sent.
    pub sent: u64,
    /// Datagrams placed into a receive WQE.
    pub received: u64,
    /// Dropped: DETH Q_Key is not the QP's.
    pub qkey_drops: u64,
    /// Dropped: BTH P_Key of another partition (or both limited members).
    pub pkey_drops: u64,
    /// Dropped: no receive WQE posted.
    pub no_wqe_drops: u64,
    /// Dropped: not a UD SEND, or the QP takes no packets in its state.
    pub other_drops: u64,
}

/// One UD queue pair.
#[derive(Debug, Clone)]
pub struct UdQp {
    qpn: u32,
    cfg: UdConfig,
    state: QpState,
    sq: VecDeque<(SendWr, UdDest, Option<Vec<u8>>)>,
    rq: VecDeque<RecvWr>,
    next_psn: u32,
    send_cq: VecDeque<Cqe>,
    recv_cq: VecDeque<UdRecv>,
    stats: UdStats,
}

/// The 40-byte GRH area of a received packet: its network header as it was on the wire
/// (IPv6: 40 bytes; IPv4: 20 zero bytes, then the 20-byte header).
pub fn grh_area(rec: &HdrRecord, payload: &[u8]) -> Option<[u8; GRH_LEN]> {
    let mut r = *rec;
    r.payload_len = u16::try_from(payload.len()).ok()?;
    let frame = build_frame(&r, payload).ok()?;
    let l3 = 14 + if r.vlan_valid { 4 } else { 0 };
    let mut g = [0u8; GRH_LEN];
    if r.ipv6 {
        g.copy_from_slice(frame.get(l3..l3 + 40)?);
    } else {
        g[20..].copy_from_slice(frame.get(l3..l3 + 20)?);
    }
    Some(g)
}

impl UdQp {
    /// A UD QP in RTS (`Err(InvalidAttr)` for an invalid PMTU or a QPN wider than 24 bits).
    pub fn new(qpn: u32, cfg: UdConfig) -> Result<UdQp, PostError> {
        if !pmtu_valid(cfg.pmtu) || qpn > psn::MASK {
            return Err(PostError::InvalidAttr);
        }
        Ok(UdQp {
            qpn,
            cfg: UdConfig { sq_psn: cfg.sq_psn & psn::MASK, ..cfg },
            state: QpState::Rts,
            sq: VecDeque::new(),
            rq: VecDeque::new(),
            next_psn: cfg.sq_psn & psn::MASK,
            send_cq: VecDeque::new(),
            recv_cq: VecDeque::new(),
            stats: UdStats::default(),
        })
    }

    /// QP number.
    pub fn qpn(&self) -> u32 {
        self.qpn
    }

    /// Current state.
    pub fn state(&self) -> QpState {
        self.state
    }

    /// Counters.
    pub fn stats(&self) -> UdStats {
        self.stats
    }

    /// Next PSN the requester uses.
    pub fn next_psn(&self) -> u32 {
        self.next_psn
    }

    /// State transition: UD's legal ones (any -> RESET, any but RESET -> ERR, RESET -> INIT, INIT -> INIT /
    /// RTR, RTR -> RTS, RTS -> RTS / SQD, SQD -> SQD / RTS); others `InvalidState`. RESET
    /// empties both queues without completions; ERR flushes them.
    pub fn modify_state(&mut self, to: QpState) -> Result<(), PostError> {
        use QpState::*;
        if !legal_transition(self.state, to) {
            return Result::Err(PostError::InvalidState);
        }
        match to {
            Err => self.go_err(),
            Reset => {
                self.sq.clear();
                self.rq.clear();
                self.send_cq.clear();
                self.recv_cq.clear();
                self.next_psn = self.cfg.sq_psn;
                self.state = Reset;
            }
            s => self.state = s,
        }
        Ok(())
    }

    fn cqe(&self, wr_id: u64, status: WcStatus, opcode: WcOpcode, byte_len: u32) -> Cqe {
        Cqe { wr_id, status, opcode, byte_len, imm: None, invalidated_rkey: None, qpn: self.qpn }
    }

    fn flush_recv(&self, wr_id: u64) -> UdRecv {
        UdRecv { cqe: self.cqe(wr_id, WcStatus::WrFlushErr, WcOpcode::Recv, 0), src_qp: 0, grh: false }
    }

    fn go_err(&mut self) {
        self.state = QpState::Err;
        while let Some((wr, _, _)) = self.sq.pop_front() {
            let c = self.cqe(wr.wr_id, WcStatus::WrFlushErr, wr.op.wc_opcode(), 0);
            self.send_cq.push_back(c);
        }
        while let Some(w) = self.rq.pop_front() {
            let c = self.flush_recv(w.wr_id);
            self.recv_cq.push_back(c);
        }
    }

    /// Posts a send WR towards `dest` (RTS, SQD; in ERR it completes at once with
    /// `WrFlushErr`). An inline WR's bytes are copied now (its keys are checked now too).
    pub fn post_send(&mut self, wr: SendWr, dest: UdDest, cx: &mut Ctx<'_>) -> Result<(), PostError> {
        if send_post_flushes(self.state)? {
            self.send_cq.push_back(self.cqe(wr.wr_id, WcStatus::WrFlushErr, wr.op.wc_opcode(), 0));
            return Ok(());
        }
        if self.sq.len() >= UD_MAX_WR || dest.qpn > psn::MASK {
            return Err(if dest.qpn > psn::MASK { PostError::InvalidAttr } else { PostError::QueueFull });
        }
        let data = (wr.inline
            && sgl_len(&wr.sgl) <= self.cfg.pmtu as u64
            && check_sgl(&wr.sgl, self.cfg.pd, Need::LocalRead, cx.mrs).is_ok())
        .then(|| gather(&wr.sgl, 0, sgl_len(&wr.sgl) as usize, cx.mem));
        self.sq.push_back((wr, dest, data));
        Ok(())
    }

    /// Posts a receive WR (INIT, RTR, RTS, SQD; in ERR it completes at once with `WrFlushErr`).
    pub fn post_recv(&mut self, wr: RecvWr) -> Result<(), PostError> {
        match self.state {
            QpState::Init | QpState::Rtr | QpState::Rts | QpState::Sqd => {}
            QpState::Err => {
                let c = self.flush_recv(wr.wr_id);
                self.recv_cq.push_back(c);
                return Ok(());
            }
            _ => return Err(PostError::InvalidState),
        }
        if self.rq.len() >= UD_MAX_WR {
            return Err(PostError::QueueFull);
        }
        self.rq.push_back(wr);
        Ok(())
    }

    /// The local checks of a send WQE: `None` when it may go.
    fn local_check(&self, wr: &SendWr, inline: bool, cx: &Ctx<'_>) -> Option<WcStatus> {
        if !matches!(wr.op, SendOp::Send | SendOp::SendImm(_)) {
            return Some(WcStatus::LocQpOpErr);
        }
        if sgl_len(&wr.sgl) > self.cfg.pmtu as u64 {
            return Some(WcStatus::LocLenErr);
        }
        if !inline && check_sgl(&wr.sgl, self.cfg.pd, Need::LocalRead, cx.mrs).is_err() {
            return Some(WcStatus::LocProtErr);
        }
        if wr.inline && !inline {
            // an inline WR whose keys failed at post time
            return Some(WcStatus::LocProtErr);
        }
        None
    }

    /// Datagrams to send now (RTS: every queued WQE, in order, until one fails its checks).
    pub fn poll_tx(&mut self, cx: &mut Ctx<'_>) -> Vec<Pkt> {
        let mut out = Vec::new();
        while self.state == QpState::Rts {
            let Some((wr, dest, data)) = self.sq.pop_front() else { break };
            if let Some(st) = self.local_check(&wr, data.is_some(), cx) {
                let c = self.cqe(wr.wr_id, st, wr.op.wc_opcode(), 0);
                self.send_cq.push_back(c);
                self.go_err();
                break;
            }
            let payload = data.unwrap_or_else(|| gather(&wr.sgl, 0, sgl_len(&wr.sgl) as usize, cx.mem));
            let src = &self.cfg.src;
            let (op, imm) = match wr.op {
                SendOp::SendImm(i) => (OP_UD_SEND_IMM, i),
                _ => (OP_UD_SEND, 0),
            };
            let rec = HdrRecord {
                eth_dst: dest.ah.eth_dst,
                eth_src: src.eth_src,
                ipv6: src.ipv6,
                ip_src: src.ip_src,
                ip_dst: dest.ah.ip_dst,
                dscp: dest.ah.dscp,
                ecn: dest.ah.ecn,
                ttl: dest.ah.ttl,
                ip_df: !src.ipv6,
                flow_label: if src.ipv6 { dest.ah.flow_label } else { 0 },
                udp_sport: src.udp_sport,
                opcode: op,
                se: wr.solicited,
                pkey: self.cfg.pkey,
                dest_qp: dest.qpn,
                psn: self.next_psn,
                qkey: if dest.qkey & QKEY_USE_QP != 0 { self.cfg.qkey } else { dest.qkey },
                src_qp: self.qpn,
                imm,
                payload_len: payload.len() as u16,
                ..HdrRecord::default()
            };
            self.next_psn = psn::add(self.next_psn, 1);
            self.stats.sent += 1;
            if wr.signaled {
                let c = self.cqe(wr.wr_id, WcStatus::Success, WcOpcode::Send, payload.len() as u32);
                self.send_cq.push_back(c);
            }
            out.push((normalize_for_tx(&rec), payload));
        }
        out
    }

    /// A received packet (`rec.dest_qp` already matched).
    pub fn receive(&mut self, rec: &HdrRecord, payload: &[u8], cx: &mut Ctx<'_>) {
        if !matches!(rec.opcode, OP_UD_SEND | OP_UD_SEND_IMM)
            || !matches!(self.state, QpState::Rtr | QpState::Rts | QpState::Sqd)
        {
            self.stats.other_drops += 1;
            return;
        }
        if !crate::rx::pkey_matches(rec.pkey, self.cfg.pkey) {
            self.stats.pkey_drops += 1;
            return;
        }
        if rec.qkey != self.cfg.qkey {
            self.stats.qkey_drops += 1;
            return;
        }
        let Some(wr) = self.rq.pop_front() else {
            self.stats.no_wqe_drops += 1;
            return;
        };
        let Some(grh) = grh_area(rec, payload) else {
            // (a record the wire could not have carried: not a packet)
            self.rq.push_front(wr);
            self.stats.other_drops += 1;
            return;
        };
        let total = GRH_LEN + payload.len();
        let err = |st| UdRecv { cqe: self.cqe(wr.wr_id, st, WcOpcode::Recv, 0), src_qp: 0, grh: false };
        if check_sgl(&wr.sgl, self.cfg.pd, Need::LocalWrite, cx.mrs).is_err() {
            let c = err(WcStatus::LocProtErr);
            self.recv_cq.push_back(c);
            return self.go_err();
        }
        if (total as u64) > sgl_len(&wr.sgl) {
            let c = err(WcStatus::LocLenErr);
            self.recv_cq.push_back(c);
            return self.go_err();
        }
        let mut bytes = grh.to_vec();
        bytes.extend_from_slice(payload);
        scatter(&wr.sgl, 0, &bytes, cx.mem);
        self.stats.received += 1;
        let mut cqe = self.cqe(wr.wr_id, WcStatus::Success, WcOpcode::Recv, total as u32);
        if rec.opcode == OP_UD_SEND_IMM {
            cqe.imm = Some(rec.imm);
        }
        self.recv_cq.push_back(UdRecv { cqe, src_qp: rec.src_qp & psn::MASK, grh: true });
    }

    /// Drains the send completions.
    pub fn poll_send_cq(&mut self) -> Vec<Cqe> {
        self.send_cq.drain(..).collect()
    }

    /// Drains the receive completions.
    pub fn poll_recv_cq(&mut self) -> Vec<UdRecv> {
        self.recv_cq.drain(..).collect()
    }

    /// Receive WQEs posted and not yet used.
    pub fn rq_len(&self) -> usize {
        self.rq.len()
    }
}
