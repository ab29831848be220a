//! One RC or UC queue pair (ROCEV2.md §6-§10): its state, the verbs-facing API (posting, state
//! transitions, completions, packets in and out, timers) and the scatter/gather helpers. The
//! protocol work is split by role:
//!
//! * `requester`: local checks of send WQEs, segmentation into request packets, PSN
//!   assignment, the limits on outstanding READ/atomic and PSN span.
//! * `completer`: responses to our requests (ACK, NAK, READ response, atomic ACK): cumulative
//!   acknowledgement, implied NAKs, go-back-N, RNR and retry counters, send completions.
//! * `responder`: requests from the peer: ePSN checks, receive WQEs, SEND/WRITE placement,
//!   READ/atomic execution with responder resources, duplicates, ACKs and NAKs; UC's rules
//!   (no responses, messages dropped on a PSN gap or an error, resynchronised on a FIRST/ONLY).

mod completer;
mod requester;
mod responder;
mod sr;

use super::mem::{HostMem, MemError, MrTable, Need};
use super::*;
use crate::opcode;
use crate::psn;
use crate::psn::{add, diff, ge, gt, le, lt, sub};
use crate::{normalize_for_tx, HdrRecord};
use std::collections::VecDeque;

/// The node resources a QP works on.
pub struct Ctx<'a> {
    /// Host memory.
    pub mem: &'a mut HostMem,
    /// MR table.
    pub mrs: &'a mut MrTable,
}

/// What a responder executed (for "nothing executed twice" checks).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ExecKind {
    /// A SEND packet was placed.
    Send,
    /// A WRITE packet was placed.
    Write,
    /// A READ request was executed (first time).
    Read,
    /// A duplicate READ request was re-executed.
    ReadReplay,
    /// An atomic was executed.
    Atomic,
    /// A duplicate atomic was answered from the saved result.
    AtomicReplay,
}

/// One responder execution.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Exec {
    /// Responder QP.
    pub qpn: u32,
    /// Request PSN.
    pub psn: u32,
    /// What happened.
    pub kind: ExecKind,
}

/// Counters (diagnostics; not part of the wire behaviour).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct QpStats {
    /// Request packets sent (including retransmissions).
    pub req_pkts: u64,
    /// Go-back-N retries taken (timeouts, NAK-seq, implied NAK, READ gap).
    pub retries: u64,
    /// Local ACK timeouts.
    pub timeouts: u64,
    /// Early retransmissions (adaptive timer, tail-loss probe); they use no retry.
    pub early_retx: u64,
    /// Implied NAKs detected.
    pub implied_naks: u64,
    /// NAK-sequence errors received and acted on.
    pub nak_seq_rcvd: u64,
    /// RNR NAKs received.
    pub rnr_rcvd: u64,
    /// Response packets sent (ACK/NAK/read response/atomic ACK).
    pub resp_pkts: u64,
    /// NAK-sequence errors sent.
    pub nak_seq_sent: u64,
    /// RNR NAKs sent.
    pub rnr_sent: u64,
    /// Duplicate requests received.
    pub dup_reqs: u64,
    /// Out-of-sequence requests dropped.
    pub seq_drops: u64,
    /// UC: packets dropped with their message (sequence, length, access, R_Key, no receive
    /// WQE); PSN gaps count in `seq_drops`.
    pub uc_drops: u64,
    /// Selective repeat, responder: WRITE packets placed beyond ePSN.
    pub sr_placed: u64,
    /// Selective repeat, responder: selective NAKs sent (one per packet beyond ePSN).
    pub snak_sent: u64,
    /// Selective repeat, requester: selective NAKs received.
    pub snak_rcvd: u64,
    /// Selective repeat, requester: packets resent by a recovery (each PSN at most once per
    /// recovery; a READ request asking for a run of missing responses counts once).
    pub sr_resent: u64,
}

#[derive(Debug, Clone)]
struct SqEntry {
    wr: SendWr,
    inline_data: Option<Vec<u8>>,
    len: u64,
    checked: bool,
    local_err: Option<WcStatus>,
    started: bool,
    first_psn: u32,
    npkts: u32,
    /// SEND/WRITE: packets acknowledged; READ: response packets placed.
    done: u32,
}

#[derive(Debug, Clone, Copy)]
enum ResKind {
    Read { va: u64, rkey: u32, len: u64 },
    Atomic { va: u64, rkey: u32, orig: u64 },
}

#[derive(Debug, Clone, Copy)]
struct Resource {
    first_psn: u32,
    npkts: u32,
    kind: ResKind,
}

#[derive(Debug, Clone)]
enum InMsg {
    Send { wr: RecvWr, off: u64, total: u64 },
    Write { va: u64, dma_len: u64, off: u64 },
}

/// One RC queue pair.
#[derive(Debug, Clone)]
pub struct Qp {
    qpn: u32,
    cfg: QpConfig,
    state: QpState,
    // requester
    sq: VecDeque<SqEntry>,
    tx_idx: usize,
    tx_off: u32,
    next_psn: u32,
    retry_left: u8,
    rnr_left: u8,
    timer_start: Option<u64>,
    rnr_until: Option<u64>,
    nak_guard: Option<u32>,
    /// The window: the PSN limit (exclusive), its width to be, and the oldest unacknowledged
    /// PSN when it was last widened.
    win_lim: u32,
    cwnd: u32,
    win_una: u32,
    /// Adaptive retransmission: the PSN being timed and when its WQE started, the smoothed
    /// RTT and its variation (ns; `srtt` 0 = no sample yet), early retransmissions since the
    /// last progress, and the early deadline.
    rtt_probe: Option<(u32, u64)>,
    srtt: u64,
    rttvar: u64,
    early_n: u32,
    early_at: Option<u64>,
    /// Selective repeat: PSNs from the oldest unacknowledged on, acknowledged selectively or
    /// resent in this recovery; the recovery's end (exclusive).
    sr_tx: sr::PsnMap<u8>,
    rec_hi: Option<u32>,
    /// Selective repeat: a timer fired; the next recovery resends the oldest unacknowledged
    /// PSN even if it was acknowledged selectively (its cumulative ACK may be what was lost).
    sr_una_again: bool,
    /// Selective repeat: the highest cumulative acknowledgement seen while the oldest WQEs
    /// still wait for answers.
    sr_cum: Option<u32>,
    /// Selective repeat: an error NAK for a PSN behind a READ or atomic still unanswered,
    /// applied once everything before it completed.
    sr_fatal: Option<(u32, WcStatus)>,
    // responder
    rq: VecDeque<RecvWr>,
    epsn: u32,
    msn: u32,
    nak_sent: bool,
    cur: Option<InMsg>,
    res: VecDeque<Resource>,
    resp_out: VecDeque<Pkt>,
    /// Selective repeat: WRITE packets placed beyond ePSN.
    sr_rx: sr::PsnMap<sr::Mark>,
    // completions
    send_cq: VecDeque<Cqe>,
    recv_cq: VecDeque<Cqe>,
    stats: QpStats,
    exec: Vec<Exec>,
}

pub(crate) fn sgl_len(sgl: &[Sge]) -> u64 {
    sgl.iter().map(|s| s.len as u64).sum()
}

pub(crate) fn gather(sgl: &[Sge], off: u64, n: usize, mem: &HostMem) -> Vec<u8> {
    let mut out = Vec::with_capacity(n);
    let mut skip = off;
    for s in sgl {
        if out.len() >= n {
            break;
        }
        let l = s.len as u64;
        if skip >= l {
            skip -= l;
            continue;
        }
        let take = ((l - skip) as usize).min(n - out.len());
        out.extend_from_slice(&mem.read(s.addr.wrapping_add(skip), take));
        skip = 0;
    }
    out.resize(n, 0);
    out
}

/// Writes `data` at byte offset `off` of the SGL; false if it does not fit.
pub(crate) fn scatter(sgl: &[Sge], off: u64, data: &[u8], mem: &mut HostMem) -> bool {
    let mut skip = off;
    let mut rest = data;
    for s in sgl {
        if rest.is_empty() {
            break;
        }
        let l = s.len as u64;
        if skip >= l {
            skip -= l;
            continue;
        }
        let n = ((l - skip) as usize).min(rest.len());
        mem.write(s.addr.wrapping_add(skip), &rest[..n]);
        rest = &rest[n..];
        skip = 0;
    }
    rest.is_empty()
}

pub(crate) fn check_sgl(sgl: &[Sge], pd: u32, need: Need, mrs: &MrTable) -> Result<(), MemError> {
    for s in sgl {
        mrs.check(s.lkey, pd, s.addr, s.len as u64, need)?;
    }
    Ok(())
}

use crate::wire::is_rc_request as is_request;

impl Qp {
    /// A QP in state RTS with the given attributes (`Err(InvalidAttr)` for an invalid PMTU,
    /// QPN wider than 24 bits, retry counts above 7).
    pub fn new(qpn: u32, cfg: QpConfig) -> Result<Qp, PostError> {
        if !pmtu_valid(cfg.pmtu)
            || qpn > psn::MASK
            || cfg.dest_qpn > psn::MASK
            || cfg.retry_cnt > 7
            || cfg.rnr_retry > 7
            || cfg.timeout > 31
            || cfg.min_rnr_timer > 31
        {
            return Err(PostError::InvalidAttr);
        }
        // (selective repeat is RC's: UC has nothing to repeat)
        let cfg = QpConfig { sq_psn: cfg.sq_psn & psn::MASK, rq_psn: cfg.rq_psn & psn::MASK, sr: cfg.sr && !cfg.uc, ..cfg };
        Ok(Qp {
            qpn,
            cfg,
            state: QpState::Rts,
            sq: VecDeque::new(),
            tx_idx: 0,
            tx_off: 0,
            next_psn: cfg.sq_psn,
            retry_left: cfg.retry_cnt,
            rnr_left: cfg.rnr_retry,
            timer_start: None,
            rnr_until: None,
            nak_guard: None,
            win_lim: add(cfg.sq_psn, WIN_MAX),
            cwnd: WIN_MAX,
            win_una: cfg.sq_psn,
            rtt_probe: None,
            srtt: 0,
            rttvar: 0,
            early_n: 0,
            early_at: None,
            sr_tx: sr::PsnMap::new(cfg.sq_psn, MAX_OUTSTANDING_PSNS),
            rec_hi: None,
            sr_una_again: false,
            sr_cum: None,
            sr_fatal: None,
            rq: VecDeque::new(),
            epsn: cfg.rq_psn,
            msn: 0,
            nak_sent: false,
            cur: None,
            res: VecDeque::new(),
            resp_out: VecDeque::new(),
            sr_rx: sr::PsnMap::new(cfg.rq_psn, SR_WIN),
            send_cq: VecDeque::new(),
            recv_cq: VecDeque::new(),
            stats: QpStats::default(),
            exec: Vec::new(),
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
    /// Attributes.
    pub fn config(&self) -> &QpConfig {
        &self.cfg
    }
    /// Counters.
    pub fn stats(&self) -> &QpStats {
        &self.stats
    }
    /// Responder executions so far.
    pub fn exec_log(&self) -> &[Exec] {
        &self.exec
    }
    /// Next PSN a new request gets.
    pub fn next_psn(&self) -> u32 {
        self.next_psn
    }
    /// Responder expected PSN.
    pub fn epsn(&self) -> u32 {
        self.epsn
    }
    /// Responder MSN.
    pub fn msn(&self) -> u32 {
        self.msn
    }
    /// Send WQEs not yet completed.
    pub fn sq_len(&self) -> usize {
        self.sq.len()
    }
    /// Receive WQEs not yet consumed.
    pub fn rq_len(&self) -> usize {
        self.rq.len()
    }
    /// Oldest unacknowledged PSN (= next PSN when nothing is outstanding).
    pub fn una(&self) -> u32 {
        match self.sq.front() {
            Some(e) if e.started => add(e.first_psn, e.done),
            _ => self.next_psn,
        }
    }
    /// A request is outstanding (the oldest send WQE has been started).
    fn outstanding(&self) -> bool {
        self.sq.front().is_some_and(|e| e.started)
    }
    /// Drains the send completion queue.
    pub fn poll_send_cq(&mut self) -> Vec<Cqe> {
        self.send_cq.drain(..).collect()
    }
    /// Drains the receive completion queue.
    pub fn poll_recv_cq(&mut self) -> Vec<Cqe> {
        self.recv_cq.drain(..).collect()
    }

    /// State transition (verbs table of ROCEV2.md §10; any → RESET, and any but RESET → ERR,
    /// always allowed: the kernel's table has no RESET → ERR). → ERR flushes every WQE; → RESET
    /// clears everything and reloads the PSNs.
    pub fn modify_state(&mut self, to: QpState) -> Result<(), PostError> {
        use QpState::*;
        if !legal_transition(self.state, to) {
            return Result::Err(PostError::InvalidState);
        }
        match to {
            Err => {
                if self.state != Err {
                    self.go_err();
                }
            }
            Reset => {
                if let Ok(fresh) = Qp::new(self.qpn, self.cfg) {
                    let stats = self.stats;
                    let exec = core::mem::take(&mut self.exec);
                    *self = fresh;
                    self.stats = stats;
                    self.exec = exec;
                }
                self.state = Reset;
            }
            s => self.state = s,
        }
        Ok(())
    }

    // ------------------------------------------------------------------------------------
    // posting

    /// Posts a send WR. In ERR it completes at once with `WrFlushErr`.
    pub fn post_send(&mut self, wr: SendWr, cx: &mut Ctx<'_>) -> Result<(), PostError> {
        if send_post_flushes(self.state)? {
            self.send_cq.push_back(self.cqe(wr.wr_id, WcStatus::WrFlushErr, wr.op.wc_opcode(), 0));
            return Ok(());
        }
        if self.sq.len() >= MAX_WR {
            return Err(PostError::QueueFull);
        }
        let len = if wr.op.is_atomic() { 8 } else { sgl_len(&wr.sgl) };
        let mut e = SqEntry {
            wr,
            inline_data: None,
            len,
            checked: false,
            local_err: None,
            started: false,
            first_psn: 0,
            npkts: 0,
            done: 0,
        };
        if e.wr.inline && !e.wr.op.is_rd_atomic() {
            if check_sgl(&e.wr.sgl, self.cfg.pd, Need::LocalRead, cx.mrs).is_err() {
                e.local_err = Some(WcStatus::LocProtErr);
            } else if len <= MAX_MSG_LEN {
                e.inline_data = Some(gather(&e.wr.sgl, 0, len as usize, cx.mem));
            }
        }
        self.sq.push_back(e);
        Ok(())
    }

    /// Posts a receive WR (INIT, RTR, RTS, SQD). In ERR it completes at once with `WrFlushErr`.
    pub fn post_recv(&mut self, wr: RecvWr) -> Result<(), PostError> {
        match self.state {
            // (SQE keeps its receive queue working; RC never enters it)
            QpState::Init | QpState::Rtr | QpState::Rts | QpState::Sqd | QpState::Sqe => {}
            QpState::Err => {
                self.recv_cq.push_back(self.cqe(wr.wr_id, WcStatus::WrFlushErr, WcOpcode::Recv, 0));
                return Ok(());
            }
            QpState::Reset => return Err(PostError::InvalidState),
        }
        if self.rq.len() >= MAX_WR {
            return Err(PostError::QueueFull);
        }
        self.rq.push_back(wr);
        Ok(())
    }

    fn cqe(&self, wr_id: u64, status: WcStatus, opcode: WcOpcode, byte_len: u32) -> Cqe {
        Cqe { wr_id, status, opcode, byte_len, imm: None, invalidated_rkey: None, qpn: self.qpn }
    }

    // ------------------------------------------------------------------------------------
    // common

    fn hdr(&self, op: u8, psn: u32) -> HdrRecord {
        let av = &self.cfg.av;
        HdrRecord {
            eth_dst: av.eth_dst,
            eth_src: av.eth_src,
            ipv6: av.ipv6,
            ip_src: av.ip_src,
            ip_dst: av.ip_dst,
            dscp: av.dscp,
            ecn: av.ecn,
            ttl: av.ttl,
            ip_df: !av.ipv6,
            flow_label: if av.ipv6 { av.flow_label } else { 0 },
            udp_sport: av.udp_sport,
            opcode: op,
            pkey: av.pkey,
            dest_qp: self.cfg.dest_qpn,
            psn: psn & psn::MASK,
            ..HdrRecord::default()
        }
    }

    fn finish(mut rec: HdrRecord, payload: Vec<u8>) -> Pkt {
        rec.payload_len = payload.len().min(u16::MAX as usize) as u16;
        (normalize_for_tx(&rec), payload)
    }

    /// Moves to ERR: flushes SQ, RQ and an in-progress receive; queued responses are dropped.
    fn go_err(&mut self) {
        self.state = QpState::Err;
        while let Some(e) = self.sq.pop_front() {
            let c = self.cqe(e.wr.wr_id, WcStatus::WrFlushErr, e.wr.op.wc_opcode(), 0);
            self.send_cq.push_back(c);
        }
        if let Some(InMsg::Send { wr, .. }) = self.cur.take() {
            let c = self.cqe(wr.wr_id, WcStatus::WrFlushErr, WcOpcode::Recv, 0);
            self.recv_cq.push_back(c);
        }
        while let Some(w) = self.rq.pop_front() {
            let c = self.cqe(w.wr_id, WcStatus::WrFlushErr, WcOpcode::Recv, 0);
            self.recv_cq.push_back(c);
        }
        self.resp_out.clear();
        self.tx_idx = 0;
        self.tx_off = 0;
        self.timer_start = None;
        self.early_at = None;
        self.rnr_until = None;
        self.sr_clear();
    }

    /// Dispatches a received packet (`rec.dest_qp` already matched): RC opcodes to an RC QP,
    /// UC opcodes (all requests) to a UC QP; anything else is dropped.
    pub fn receive(&mut self, now: u64, rec: &HdrRecord, payload: &[u8], cx: &mut Ctx<'_>) {
        let Some(info) = opcode::wire_info(rec.opcode) else { return };
        let class = if self.cfg.uc { opcode::Transport::Uc } else { opcode::Transport::Rc };
        if info.class != class || (info.no_payload && !payload.is_empty()) {
            return;
        }
        if self.cfg.uc {
            self.resp_recv_uc(rec, payload, cx);
        } else if opcode::is_sr_write(rec.opcode) && !self.cfg.sr {
            // (a QP without selective repeat takes its opcodes as the engine does: unknown,
            // dropped)
        } else if is_request(rec.opcode) || opcode::is_sr_write(rec.opcode) {
            self.resp_recv(rec, payload, cx);
        } else {
            self.req_recv(now, rec, payload, cx);
        }
    }

    /// Packets to send now: queued responses first, then requests.
    pub fn poll_tx(&mut self, now: u64, cx: &mut Ctx<'_>) -> Vec<Pkt> {
        let mut out: Vec<Pkt> = self.resp_out.drain(..).collect();
        self.stats.resp_pkts += out.len() as u64;
        self.req_poll(now, cx, &mut out);
        out
    }

    /// Time-driven work: the local ACK timeout.
    pub fn tick(&mut self, now: u64, cx: &mut Ctx<'_>) {
        if !matches!(self.state, QpState::Rts | QpState::Sqd) || self.rnr_until.is_some() {
            return;
        }
        if let (Some(t0), Some(to)) = (self.timer_start, ack_timeout_ns(self.cfg.timeout)) {
            if self.outstanding() && now >= t0.saturating_add(to) {
                self.stats.timeouts += 1;
                let p = self.una();
                self.retry(p, now, cx);
                return;
            }
        }
        if self.early_at.is_some_and(|t| now >= t) && self.outstanding() {
            self.early_retransmit(now);
        }
    }

    /// Earliest time at which [`Qp::tick`] or [`Qp::poll_tx`] has timed work.
    pub fn next_deadline(&self) -> Option<u64> {
        if !matches!(self.state, QpState::Rts | QpState::Sqd) {
            return None;
        }
        if let Some(t) = self.rnr_until {
            return Some(t);
        }
        let std = match (self.timer_start, ack_timeout_ns(self.cfg.timeout)) {
            (Some(t0), Some(to)) if self.outstanding() => Some(t0.saturating_add(to)),
            _ => None,
        };
        let early = self.early_at.filter(|_| self.outstanding());
        match (std, early) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Work is pending without needing time to pass (responses queued or requests to send).
    pub fn has_tx(&self) -> bool {
        !self.resp_out.is_empty()
    }
}
