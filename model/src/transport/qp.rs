//! One RC queue pair: requester and responder halves (ROCEV2.md §6-§10).

use super::mem::{HostMem, MemError, MrTable, Need};
use super::*;
use crate::opcode;
use crate::psn::{add, diff, ge, gt, le, sub};
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
    // responder
    rq: VecDeque<RecvWr>,
    epsn: u32,
    msn: u32,
    nak_sent: bool,
    cur: Option<InMsg>,
    res: VecDeque<Resource>,
    resp_out: VecDeque<Pkt>,
    // completions
    send_cq: VecDeque<Cqe>,
    recv_cq: VecDeque<Cqe>,
    stats: QpStats,
    exec: Vec<Exec>,
}

fn sgl_len(sgl: &[Sge]) -> u64 {
    sgl.iter().map(|s| s.len as u64).sum()
}

fn gather(sgl: &[Sge], off: u64, n: usize, mem: &HostMem) -> Vec<u8> {
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
fn scatter(sgl: &[Sge], off: u64, data: &[u8], mem: &mut HostMem) -> bool {
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

fn check_sgl(sgl: &[Sge], pd: u32, need: Need, mrs: &MrTable) -> Result<(), MemError> {
    for s in sgl {
        mrs.check(s.lkey, pd, s.addr, s.len as u64, need)?;
    }
    Ok(())
}

fn is_request(op: u8) -> bool {
    matches!(op, 0x00..=0x0C | 0x13 | 0x14 | 0x16 | 0x17)
}

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
        let cfg = QpConfig { sq_psn: cfg.sq_psn & psn::MASK, rq_psn: cfg.rq_psn & psn::MASK, ..cfg };
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
            rq: VecDeque::new(),
            epsn: cfg.rq_psn,
            msn: 0,
            nak_sent: false,
            cur: None,
            res: VecDeque::new(),
            resp_out: VecDeque::new(),
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
    /// Drains the send completion queue.
    pub fn poll_send_cq(&mut self) -> Vec<Cqe> {
        self.send_cq.drain(..).collect()
    }
    /// Drains the receive completion queue.
    pub fn poll_recv_cq(&mut self) -> Vec<Cqe> {
        self.recv_cq.drain(..).collect()
    }

    /// State transition (verbs table of ROCEV2.md §10; any → RESET / ERR always allowed).
    /// → ERR flushes every WQE; → RESET clears everything and reloads the PSNs.
    pub fn modify_state(&mut self, to: QpState) -> Result<(), PostError> {
        use QpState::*;
        let ok = matches!(
            (self.state, to),
            (_, Reset) | (_, Err) | (Reset, Init) | (Init, Init) | (Init, Rtr) | (Rtr, Rts) | (Rts, Rts)
                | (Rts, Sqd) | (Sqd, Sqd) | (Sqd, Rts)
        );
        if !ok {
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
        match self.state {
            QpState::Rts | QpState::Sqd => {}
            QpState::Err => {
                self.send_cq.push_back(self.cqe(wr.wr_id, WcStatus::WrFlushErr, wr.op.wc_opcode(), 0));
                return Ok(());
            }
            _ => return Err(PostError::InvalidState),
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
            QpState::Init | QpState::Rtr | QpState::Rts | QpState::Sqd => {}
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
        self.rnr_until = None;
    }

    /// Dispatches a received RC packet (`rec.dest_qp` already matched).
    pub fn receive(&mut self, now: u64, rec: &HdrRecord, payload: &[u8], cx: &mut Ctx<'_>) {
        let Some(info) = opcode::info(rec.opcode) else { return };
        if info.class != opcode::Transport::Rc || (info.no_payload && !payload.is_empty()) {
            return;
        }
        if is_request(rec.opcode) {
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
            }
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
        match (self.timer_start, ack_timeout_ns(self.cfg.timeout)) {
            (Some(t0), Some(to)) if self.outstanding() => Some(t0.saturating_add(to)),
            _ => None,
        }
    }

    /// Work is pending without needing time to pass (responses queued or requests to send).
    pub fn has_tx(&self) -> bool {
        !self.resp_out.is_empty()
    }

    // ------------------------------------------------------------------------------------
    // requester

    fn outstanding(&self) -> bool {
        self.sq.front().is_some_and(|e| e.started)
    }

    fn local_check(&mut self, idx: usize, cx: &Ctx<'_>) {
        let pd = self.cfg.pd;
        let Some(e) = self.sq.get_mut(idx) else { return };
        if e.checked {
            return;
        }
        e.checked = true;
        if e.local_err.is_some() {
            return;
        }
        let err = if e.wr.sgl.len() > MAX_SGE {
            Some(WcStatus::LocQpOpErr)
        } else {
            match e.wr.op {
                SendOp::CmpSwap { remote_addr, .. } | SendOp::FetchAdd { remote_addr, .. } => {
                    if remote_addr % 8 != 0 {
                        Some(WcStatus::LocQpOpErr)
                    } else if e.wr.sgl.len() != 1 || sgl_len(&e.wr.sgl) != 8 {
                        Some(WcStatus::LocLenErr)
                    } else if check_sgl(&e.wr.sgl, pd, Need::LocalWrite, cx.mrs).is_err() {
                        Some(WcStatus::LocProtErr)
                    } else {
                        None
                    }
                }
                SendOp::Read { .. } => {
                    if e.len > MAX_MSG_LEN {
                        Some(WcStatus::LocLenErr)
                    } else if check_sgl(&e.wr.sgl, pd, Need::LocalWrite, cx.mrs).is_err() {
                        Some(WcStatus::LocProtErr)
                    } else {
                        None
                    }
                }
                _ => {
                    if e.len > MAX_MSG_LEN {
                        Some(WcStatus::LocLenErr)
                    } else if e.inline_data.is_none()
                        && check_sgl(&e.wr.sgl, pd, Need::LocalRead, cx.mrs).is_err()
                    {
                        Some(WcStatus::LocProtErr)
                    } else {
                        None
                    }
                }
            }
        };
        e.local_err = err;
    }

    fn outstanding_rd_atomic(&self) -> usize {
        self.sq.iter().take_while(|e| e.started).filter(|e| e.wr.op.is_rd_atomic()).count()
    }

    fn span(&self) -> u32 {
        diff(self.next_psn, self.una()).max(0) as u32
    }

    fn req_poll(&mut self, now: u64, cx: &mut Ctx<'_>, out: &mut Vec<Pkt>) {
        if !matches!(self.state, QpState::Rts | QpState::Sqd) {
            return;
        }
        if let Some(t) = self.rnr_until {
            if now < t {
                return;
            }
            self.rnr_until = None;
            self.timer_start = Some(now);
        }
        loop {
            let idx = self.tx_idx;
            let Some(e) = self.sq.get(idx) else { break };
            if !e.started {
                if self.state == QpState::Sqd {
                    break;
                }
                self.local_check(idx, cx);
                let Some(e) = self.sq.get(idx) else { break };
                if e.local_err.is_some() {
                    break;
                }
                let rd = e.wr.op.is_rd_atomic();
                let np = if e.wr.op.is_atomic() { 1 } else { pkts_for(e.len, self.cfg.pmtu) };
                if rd && self.outstanding_rd_atomic() >= self.cfg.max_rd_atomic as usize {
                    break;
                }
                if self.span().saturating_add(np) > MAX_OUTSTANDING_PSNS {
                    break;
                }
                let first = self.next_psn;
                self.next_psn = add(first, np);
                let Some(e) = self.sq.get_mut(idx) else { break };
                e.started = true;
                e.first_psn = first;
                e.npkts = np;
                e.done = 0;
            }
            let Some(e) = self.sq.get(idx) else { break };
            let pkt = self.req_pkt(e, self.tx_off, cx.mem);
            out.push(pkt);
            self.stats.req_pkts += 1;
            if e.wr.op.is_rd_atomic() || self.tx_off.saturating_add(1) >= e.npkts {
                self.tx_idx += 1;
                self.tx_off = 0;
            } else {
                self.tx_off += 1;
            }
            if self.timer_start.is_none() {
                self.timer_start = Some(now);
            }
        }
        self.report_head_local_error();
    }

    /// A WQE that failed its local checks completes (and moves the QP to ERR) once it is the
    /// oldest one.
    fn report_head_local_error(&mut self) {
        if let Some(e) = self.sq.front() {
            if let (Some(st), false) = (e.local_err, e.started) {
                self.fatal(st);
            }
        }
    }

    fn req_pkt(&self, e: &SqEntry, k: u32, mem: &HostMem) -> Pkt {
        let pmtu = self.cfg.pmtu as u64;
        let psn = add(e.first_psn, k);
        let off = k as u64 * pmtu;
        let only = e.npkts <= 1;
        let last = k.saturating_add(1) >= e.npkts;
        let ackreq = last || k % ACKREQ_INTERVAL == ACKREQ_INTERVAL - 1;
        let data = |this: &Self| -> Vec<u8> {
            let _ = this;
            let n = e.len.saturating_sub(off).min(pmtu) as usize;
            match &e.inline_data {
                Some(d) => d.get(off as usize..off as usize + n).map(|s| s.to_vec()).unwrap_or_default(),
                None => gather(&e.wr.sgl, off, n, mem),
            }
        };
        match e.wr.op {
            SendOp::Send | SendOp::SendImm(_) | SendOp::SendInv(_) => {
                let (o_only, o_last) = match e.wr.op {
                    SendOp::SendImm(_) => (0x05, 0x03),
                    SendOp::SendInv(_) => (0x17, 0x16),
                    _ => (0x04, 0x02),
                };
                let op = if only { o_only } else if k == 0 { 0x00 } else if last { o_last } else { 0x01 };
                let mut r = self.hdr(op, psn);
                r.ackreq = ackreq;
                if last {
                    r.se = e.wr.solicited;
                    match e.wr.op {
                        SendOp::SendImm(v) | SendOp::SendInv(v) => r.imm = v,
                        _ => {}
                    }
                }
                Self::finish(r, data(self))
            }
            SendOp::Write { remote_addr, rkey } | SendOp::WriteImm { remote_addr, rkey, .. } => {
                let imm = match e.wr.op {
                    SendOp::WriteImm { imm, .. } => Some(imm),
                    _ => None,
                };
                let op = match (only, k == 0, last, imm.is_some()) {
                    (true, _, _, false) => 0x0A,
                    (true, _, _, true) => 0x0B,
                    (false, true, _, _) => 0x06,
                    (false, false, true, false) => 0x08,
                    (false, false, true, true) => 0x09,
                    _ => 0x07,
                };
                let mut r = self.hdr(op, psn);
                r.ackreq = ackreq;
                if k == 0 {
                    r.va = remote_addr;
                    r.rkey = rkey;
                    r.dma_len = e.len.min(u32::MAX as u64) as u32;
                }
                if last {
                    if let Some(v) = imm {
                        r.imm = v;
                        r.se = e.wr.solicited;
                    }
                }
                Self::finish(r, data(self))
            }
            SendOp::Read { remote_addr, rkey } => {
                let mut r = self.hdr(0x0C, psn);
                r.ackreq = true;
                r.va = remote_addr.wrapping_add(off);
                r.rkey = rkey;
                r.dma_len = e.len.saturating_sub(off).min(u32::MAX as u64) as u32;
                Self::finish(r, Vec::new())
            }
            SendOp::CmpSwap { remote_addr, rkey, compare, swap } => {
                let mut r = self.hdr(0x13, psn);
                r.ackreq = true;
                r.va = remote_addr;
                r.rkey = rkey;
                r.swap_add = swap;
                r.compare = compare;
                Self::finish(r, Vec::new())
            }
            SendOp::FetchAdd { remote_addr, rkey, add: a } => {
                let mut r = self.hdr(0x14, psn);
                r.ackreq = true;
                r.va = remote_addr;
                r.rkey = rkey;
                r.swap_add = a;
                Self::finish(r, Vec::new())
            }
        }
    }

    fn progress(&mut self, now: u64) {
        self.retry_left = self.cfg.retry_cnt;
        self.rnr_left = self.cfg.rnr_retry;
        self.nak_guard = None;
        self.timer_start = if self.outstanding() { Some(now) } else { None };
    }

    fn pop_success(&mut self) {
        let Some(e) = self.sq.pop_front() else { return };
        if self.tx_idx == 0 {
            self.tx_off = 0;
        } else {
            self.tx_idx -= 1;
        }
        if e.wr.signaled {
            let c = self.cqe(e.wr.wr_id, WcStatus::Success, e.wr.op.wc_opcode(), e.len.min(u32::MAX as u64) as u32);
            self.send_cq.push_back(c);
        }
    }

    /// Completes the oldest WQE with `status` and moves the QP to ERR.
    fn fatal(&mut self, status: WcStatus) {
        if let Some(e) = self.sq.pop_front() {
            let c = self.cqe(e.wr.wr_id, status, e.wr.op.wc_opcode(), 0);
            self.send_cq.push_back(c);
        }
        self.go_err();
    }

    /// Go-back-N: the next request packet sent is the one with PSN `p`.
    fn rewind(&mut self, p: u32) {
        let mut n_started = 0;
        for (i, e) in self.sq.iter().enumerate() {
            if !e.started {
                break;
            }
            n_started = i + 1;
            let d = diff(p, e.first_psn);
            if d >= 0 && (d as u32) < e.npkts {
                self.tx_idx = i;
                self.tx_off = d as u32;
                return;
            }
        }
        self.tx_idx = n_started;
        self.tx_off = 0;
    }

    fn retry(&mut self, p: u32, now: u64, _cx: &mut Ctx<'_>) {
        if self.retry_left == 0 {
            self.fatal(WcStatus::RetryExcErr);
            return;
        }
        self.retry_left -= 1;
        self.stats.retries += 1;
        self.rewind(p);
        self.timer_start = Some(now);
    }

    /// Cumulative acknowledgement of every PSN ≤ `n`. Returns false if it triggered an implied
    /// NAK (an unanswered READ/atomic at or before `n`), which already retried / failed.
    fn ack_through(&mut self, n: u32, now: u64, cx: &mut Ctx<'_>) -> bool {
        let mut prog = false;
        loop {
            let Some(e) = self.sq.front() else { break };
            if !e.started {
                break;
            }
            if e.wr.op.is_rd_atomic() {
                if ge(n, e.first_psn) {
                    let p = add(e.first_psn, e.done);
                    if prog {
                        self.progress(now);
                    }
                    // one retry per missing response until progress (later responses of
                    // subsequent READs / duplicate ACKs carry no new information)
                    if self.nak_guard != Some(p) && self.rnr_until.is_none() {
                        self.stats.implied_naks += 1;
                        self.retry(p, now, cx);
                        if self.state != QpState::Err {
                            self.nak_guard = Some(p);
                        }
                    }
                    return false;
                }
                break;
            }
            let last = add(e.first_psn, e.npkts.saturating_sub(1));
            if le(last, n) {
                self.pop_success();
                prog = true;
                continue;
            }
            if ge(n, e.first_psn) {
                let nd = diff(n, e.first_psn) as u32 + 1;
                if nd > e.done {
                    if let Some(f) = self.sq.front_mut() {
                        f.done = nd;
                    }
                    prog = true;
                }
            }
            break;
        }
        if prog {
            self.progress(now);
        }
        true
    }

    /// `p` lies in `[una, next_psn)` (or `== next_psn` when `incl_next`).
    fn psn_in_window(&self, p: u32, incl_next: bool) -> bool {
        let una = self.una();
        ge(p, una) && (gt(self.next_psn, p) || (incl_next && p == self.next_psn))
    }

    fn req_recv(&mut self, now: u64, rec: &HdrRecord, payload: &[u8], cx: &mut Ctx<'_>) {
        if !matches!(self.state, QpState::Rts | QpState::Sqd) {
            return;
        }
        match rec.opcode {
            0x11 => self.on_ack(now, rec, cx),
            0x0D..=0x10 => self.on_read_resp(now, rec, payload, cx),
            0x12 => self.on_atomic_ack(now, rec, cx),
            _ => {}
        }
    }

    fn on_ack(&mut self, now: u64, rec: &HdrRecord, cx: &mut Ctx<'_>) {
        let p = rec.psn;
        let syn = rec.syndrome;
        match syn >> 5 {
            0 => {
                // ACK: valid for PSNs in [una-1, next_psn-1]
                if self.psn_in_window(add(p, 1), true) {
                    self.ack_through(p, now, cx);
                }
            }
            1 => {
                if !self.psn_in_window(p, false) {
                    return;
                }
                self.stats.rnr_rcvd += 1;
                if !self.ack_through(sub(p, 1), now, cx) {
                    return;
                }
                if self.rnr_left == 0 {
                    self.fatal(WcStatus::RnrRetryExcErr);
                    return;
                }
                if self.cfg.rnr_retry != 7 {
                    self.rnr_left -= 1;
                }
                self.rewind(p);
                self.rnr_until = Some(now.saturating_add(rnr_timer_ns(syn & 0x1F)));
                self.timer_start = None;
            }
            3 => match syn {
                SYN_NAK_SEQ => {
                    if !self.psn_in_window(p, true) || self.rnr_until.is_some() || self.nak_guard == Some(p) {
                        return;
                    }
                    self.stats.nak_seq_rcvd += 1;
                    if !self.ack_through(sub(p, 1), now, cx) {
                        return;
                    }
                    self.retry(p, now, cx);
                    if self.state != QpState::Err {
                        self.nak_guard = Some(p);
                    }
                }
                SYN_NAK_INV_REQ | SYN_NAK_REM_ACCESS | SYN_NAK_REM_OP => {
                    if !self.psn_in_window(p, false) {
                        return;
                    }
                    if !self.ack_through(sub(p, 1), now, cx) {
                        return;
                    }
                    self.fatal(match syn {
                        SYN_NAK_INV_REQ => WcStatus::RemInvReqErr,
                        SYN_NAK_REM_ACCESS => WcStatus::RemAccessErr,
                        _ => WcStatus::RemOpErr,
                    });
                }
                _ => {}
            },
            _ => {}
        }
    }

    fn on_read_resp(&mut self, now: u64, rec: &HdrRecord, payload: &[u8], cx: &mut Ctx<'_>) {
        let q = rec.psn;
        let found = self.sq.iter().take_while(|e| e.started).find(|e| {
            matches!(e.wr.op, SendOp::Read { .. }) && {
                let d = diff(q, e.first_psn);
                d >= 0 && (d as u32) < e.npkts
            }
        });
        let Some(e) = found else { return };
        let first = e.first_psn;
        let expected = add(first, e.done);
        let d = diff(q, expected);
        if d < 0 {
            return;
        }
        if d > 0 {
            if self.nak_guard != Some(expected) && self.rnr_until.is_none() {
                if !self.ack_through(sub(first, 1), now, cx) {
                    return;
                }
                self.retry(expected, now, cx);
                if self.state != QpState::Err {
                    self.nak_guard = Some(expected);
                }
            }
            return;
        }
        if !self.ack_through(sub(first, 1), now, cx) {
            return;
        }
        let pmtu = self.cfg.pmtu as u64;
        let Some(e) = self.sq.front() else { return };
        if e.first_psn != first || !matches!(e.wr.op, SendOp::Read { .. }) {
            return;
        }
        let k = diff(q, first) as u64;
        let off = k * pmtu;
        let exp_len = e.len.saturating_sub(off).min(pmtu) as usize;
        let is_last = k + 1 == e.npkts as u64;
        let Some(info) = opcode::info(rec.opcode) else { return };
        if info.end != is_last || payload.len() != exp_len || (info.aeth && rec.syndrome >> 5 != 0) {
            return;
        }
        let pd = self.cfg.pd;
        let ok = check_sgl(&e.wr.sgl, pd, Need::LocalWrite, cx.mrs).is_ok()
            && scatter(&e.wr.sgl, off, payload, cx.mem);
        if !ok {
            self.fatal(WcStatus::LocProtErr);
            return;
        }
        let done = match self.sq.front_mut() {
            Some(f) => {
                f.done += 1;
                f.done >= f.npkts
            }
            None => false,
        };
        if done {
            self.pop_success();
        }
        self.progress(now);
    }

    fn on_atomic_ack(&mut self, now: u64, rec: &HdrRecord, cx: &mut Ctx<'_>) {
        let q = rec.psn;
        if rec.syndrome >> 5 != 0 {
            return;
        }
        let found = self
            .sq
            .iter()
            .take_while(|e| e.started)
            .any(|e| e.wr.op.is_atomic() && e.first_psn == q);
        if !found || !self.ack_through(sub(q, 1), now, cx) {
            return;
        }
        let Some(e) = self.sq.front() else { return };
        if !(e.wr.op.is_atomic() && e.first_psn == q) {
            return;
        }
        let pd = self.cfg.pd;
        let ok = check_sgl(&e.wr.sgl, pd, Need::LocalWrite, cx.mrs).is_ok()
            && scatter(&e.wr.sgl, 0, &rec.atomic_orig.to_le_bytes(), cx.mem);
        if !ok {
            self.fatal(WcStatus::LocProtErr);
            return;
        }
        if let Some(f) = self.sq.front_mut() {
            f.done = 1;
        }
        self.pop_success();
        self.progress(now);
    }

    // ------------------------------------------------------------------------------------
    // responder

    fn push_resp(&mut self, rec: HdrRecord, payload: Vec<u8>) {
        self.resp_out.push_back(Self::finish(rec, payload));
    }

    fn send_aeth(&mut self, psn: u32, syndrome: u8) {
        let mut r = self.hdr(0x11, psn);
        r.syndrome = syndrome;
        r.msn = self.msn;
        self.push_resp(r, Vec::new());
    }

    /// Error NAK: the responder QP goes to ERR, the NAK still goes out.
    fn nak_fatal(&mut self, psn: u32, syndrome: u8) {
        self.go_err();
        self.send_aeth(psn, syndrome);
    }

    fn rnr_nak(&mut self, psn: u32) {
        self.stats.rnr_sent += 1;
        self.nak_sent = true;
        self.send_aeth(psn, SYN_RNR | (self.cfg.min_rnr_timer & 0x1F));
    }

    fn recv_err(&mut self, wr_id: u64, status: WcStatus) {
        let c = self.cqe(wr_id, status, WcOpcode::Recv, 0);
        self.recv_cq.push_back(c);
    }

    fn log(&mut self, psn: u32, kind: ExecKind) {
        self.exec.push(Exec { qpn: self.qpn, psn, kind });
    }

    fn save_resource(&mut self, r: Resource) {
        self.res.push_back(r);
        while self.res.len() > self.cfg.max_dest_rd_atomic as usize {
            self.res.pop_front();
        }
    }

    fn read_responses(&mut self, psn0: u32, va: u64, len: u64, mem: &HostMem) {
        let pmtu = self.cfg.pmtu as u64;
        let n = pkts_for(len, self.cfg.pmtu);
        for k in 0..n {
            let op = if n == 1 {
                0x10
            } else if k == 0 {
                0x0D
            } else if k + 1 == n {
                0x0F
            } else {
                0x0E
            };
            let off = k as u64 * pmtu;
            let cnt = len.saturating_sub(off).min(pmtu) as usize;
            let data = mem.read(va.wrapping_add(off), cnt);
            let mut r = self.hdr(op, add(psn0, k));
            if op != 0x0E {
                r.syndrome = SYN_ACK;
                r.msn = self.msn;
            }
            self.push_resp(r, data);
        }
    }

    fn resp_recv(&mut self, rec: &HdrRecord, payload: &[u8], cx: &mut Ctx<'_>) {
        if !matches!(self.state, QpState::Rtr | QpState::Rts | QpState::Sqd) {
            return;
        }
        let p = rec.psn;
        let d = diff(p, self.epsn);
        if d > 0 {
            self.stats.seq_drops += 1;
            if !self.nak_sent {
                self.nak_sent = true;
                self.stats.nak_seq_sent += 1;
                self.send_aeth(self.epsn, SYN_NAK_SEQ);
            }
            return;
        }
        if d < 0 {
            self.stats.dup_reqs += 1;
            self.duplicate(rec, cx);
            return;
        }
        self.nak_sent = false;
        let op = rec.opcode;
        let in_send = matches!(self.cur, Some(InMsg::Send { .. }));
        let in_write = matches!(self.cur, Some(InMsg::Write { .. }));
        let seq_ok = match op {
            0x01 | 0x02 | 0x03 | 0x16 => in_send,
            0x07..=0x09 => in_write,
            0x00 | 0x04 | 0x05 | 0x17 | 0x06 | 0x0A | 0x0B | 0x0C | 0x13 | 0x14 => self.cur.is_none(),
            _ => false,
        };
        if !seq_ok {
            return self.nak_fatal(p, SYN_NAK_INV_REQ);
        }
        let pmtu = self.cfg.pmtu as usize;
        let len = payload.len();
        let len_ok = match op {
            0x00 | 0x01 | 0x06 | 0x07 => len == pmtu,
            0x02 | 0x03 | 0x16 | 0x08 | 0x09 => (1..=pmtu).contains(&len),
            0x04 | 0x05 | 0x17 | 0x0A | 0x0B => len <= pmtu,
            _ => true,
        };
        let acc = self.cfg.access;
        let acc_ok = match op {
            0x06..=0x0B => acc.remote_write,
            0x0C => acc.remote_read,
            0x13 | 0x14 => acc.remote_atomic,
            _ => true,
        };
        if !len_ok || !acc_ok {
            return self.nak_fatal(p, SYN_NAK_INV_REQ);
        }
        match op {
            0x00..=0x05 | 0x16 | 0x17 => self.exec_send(rec, payload, cx),
            0x06..=0x0B => self.exec_write(rec, payload, cx),
            0x0C => self.exec_read(rec, cx),
            _ => self.exec_atomic(rec, cx),
        }
    }

    fn exec_send(&mut self, rec: &HdrRecord, payload: &[u8], cx: &mut Ctx<'_>) {
        let p = rec.psn;
        let op = rec.opcode;
        let pd = self.cfg.pd;
        if matches!(op, 0x00 | 0x04 | 0x05 | 0x17) {
            let Some(wr) = self.rq.front() else { return self.rnr_nak(p) };
            if check_sgl(&wr.sgl, pd, Need::LocalWrite, cx.mrs).is_err() {
                let id = wr.wr_id;
                self.rq.pop_front();
                self.recv_err(id, WcStatus::LocProtErr);
                return self.nak_fatal(p, SYN_NAK_REM_OP);
            }
            let Some(wr) = self.rq.pop_front() else { return };
            let total = sgl_len(&wr.sgl);
            self.cur = Some(InMsg::Send { wr, off: 0, total });
        }
        let Some(InMsg::Send { wr, off, total }) = self.cur.take() else { return };
        let end = matches!(op, 0x02 | 0x03 | 0x04 | 0x05 | 0x16 | 0x17);
        if off + payload.len() as u64 > total {
            self.recv_err(wr.wr_id, WcStatus::LocLenErr);
            return self.nak_fatal(p, SYN_NAK_INV_REQ);
        }
        let inv = matches!(op, 0x16 | 0x17);
        if inv && cx.mrs.invalidate(rec.imm, pd).is_err() {
            self.recv_err(wr.wr_id, WcStatus::LocProtErr);
            return self.nak_fatal(p, SYN_NAK_REM_OP);
        }
        scatter(&wr.sgl, off, payload, cx.mem);
        let off = off + payload.len() as u64;
        self.log(p, ExecKind::Send);
        self.epsn = add(self.epsn, 1);
        if end {
            self.msn = add(self.msn, 1);
            let mut c = self.cqe(wr.wr_id, WcStatus::Success, WcOpcode::Recv, off as u32);
            if matches!(op, 0x03 | 0x05) {
                c.imm = Some(rec.imm);
            }
            if inv {
                c.invalidated_rkey = Some(rec.imm);
            }
            self.recv_cq.push_back(c);
        } else {
            self.cur = Some(InMsg::Send { wr, off, total });
        }
        if rec.ackreq {
            self.send_aeth(p, SYN_ACK);
        }
    }

    fn exec_write(&mut self, rec: &HdrRecord, payload: &[u8], cx: &mut Ctx<'_>) {
        let p = rec.psn;
        let op = rec.opcode;
        let imm = matches!(op, 0x09 | 0x0B);
        let end = matches!(op, 0x08 | 0x09 | 0x0A | 0x0B);
        if matches!(op, 0x06 | 0x0A | 0x0B) {
            let dma_len = rec.dma_len as u64;
            if dma_len > MAX_MSG_LEN {
                return self.nak_fatal(p, SYN_NAK_INV_REQ);
            }
            if dma_len > 0
                && cx.mrs.check(rec.rkey, self.cfg.pd, rec.va, dma_len, Need::RemoteWrite).is_err()
            {
                return self.nak_fatal(p, SYN_NAK_REM_ACCESS);
            }
            self.cur = Some(InMsg::Write { va: rec.va, dma_len, off: 0 });
        }
        let Some(InMsg::Write { va, dma_len, off }) = self.cur else { return };
        let noff = off + payload.len() as u64;
        if noff > dma_len || (end && noff != dma_len) {
            self.cur = None;
            return self.nak_fatal(p, SYN_NAK_INV_REQ);
        }
        if imm && self.rq.is_empty() {
            if matches!(op, 0x0B) {
                self.cur = None;
            }
            return self.rnr_nak(p);
        }
        cx.mem.write(va.wrapping_add(off), payload);
        self.log(p, ExecKind::Write);
        self.epsn = add(self.epsn, 1);
        if end {
            self.cur = None;
            self.msn = add(self.msn, 1);
            if imm {
                if let Some(wr) = self.rq.pop_front() {
                    let mut c = self.cqe(wr.wr_id, WcStatus::Success, WcOpcode::RecvRdmaWithImm, dma_len as u32);
                    c.imm = Some(rec.imm);
                    self.recv_cq.push_back(c);
                }
            }
        } else {
            self.cur = Some(InMsg::Write { va, dma_len, off: noff });
        }
        if rec.ackreq {
            self.send_aeth(p, SYN_ACK);
        }
    }

    fn exec_read(&mut self, rec: &HdrRecord, cx: &mut Ctx<'_>) {
        let p = rec.psn;
        let len = rec.dma_len as u64;
        if len > MAX_MSG_LEN || self.cfg.max_dest_rd_atomic == 0 {
            return self.nak_fatal(p, SYN_NAK_INV_REQ);
        }
        if len > 0 && cx.mrs.check(rec.rkey, self.cfg.pd, rec.va, len, Need::RemoteRead).is_err() {
            return self.nak_fatal(p, SYN_NAK_REM_ACCESS);
        }
        let n = pkts_for(len, self.cfg.pmtu);
        self.msn = add(self.msn, 1);
        self.epsn = add(self.epsn, n);
        self.save_resource(Resource { first_psn: p, npkts: n, kind: ResKind::Read { va: rec.va, rkey: rec.rkey, len } });
        self.log(p, ExecKind::Read);
        self.read_responses(p, rec.va, len, cx.mem);
    }

    fn exec_atomic(&mut self, rec: &HdrRecord, cx: &mut Ctx<'_>) {
        let p = rec.psn;
        if self.cfg.max_dest_rd_atomic == 0 || rec.va % 8 != 0 {
            return self.nak_fatal(p, SYN_NAK_INV_REQ);
        }
        if cx.mrs.check(rec.rkey, self.cfg.pd, rec.va, 8, Need::RemoteAtomic).is_err() {
            return self.nak_fatal(p, SYN_NAK_REM_ACCESS);
        }
        let orig = cx.mem.read_u64(rec.va);
        let new = if rec.opcode == 0x13 {
            if orig == rec.compare {
                rec.swap_add
            } else {
                orig
            }
        } else {
            orig.wrapping_add(rec.swap_add)
        };
        cx.mem.write_u64(rec.va, new);
        self.msn = add(self.msn, 1);
        self.epsn = add(self.epsn, 1);
        self.save_resource(Resource { first_psn: p, npkts: 1, kind: ResKind::Atomic { va: rec.va, rkey: rec.rkey, orig } });
        self.log(p, ExecKind::Atomic);
        self.atomic_ack(p, orig);
    }

    fn atomic_ack(&mut self, p: u32, orig: u64) {
        let mut r = self.hdr(0x12, p);
        r.syndrome = SYN_ACK;
        r.msn = self.msn;
        r.atomic_orig = orig;
        self.push_resp(r, Vec::new());
    }

    fn duplicate(&mut self, rec: &HdrRecord, cx: &mut Ctx<'_>) {
        let p = rec.psn;
        match rec.opcode {
            0x0C => {
                let pmtu = self.cfg.pmtu as u64;
                let hit = self.res.iter().rev().find_map(|r| match r.kind {
                    ResKind::Read { va, rkey, len } => {
                        let d = diff(p, r.first_psn);
                        if d >= 0 && (d as u32) < r.npkts {
                            Some((d as u64, va, rkey, len))
                        } else {
                            None
                        }
                    }
                    _ => None,
                });
                let Some((k, va, rkey, len)) = hit else { return };
                let off = k * pmtu;
                let nva = va.wrapping_add(off);
                let nlen = len.saturating_sub(off);
                if rec.rkey != rkey || rec.va != nva || rec.dma_len as u64 != nlen {
                    return;
                }
                if nlen > 0 && cx.mrs.check(rkey, self.cfg.pd, nva, nlen, Need::RemoteRead).is_err() {
                    return;
                }
                self.log(p, ExecKind::ReadReplay);
                self.read_responses(p, nva, nlen, cx.mem);
            }
            0x13 | 0x14 => {
                let hit = self.res.iter().rev().find_map(|r| match r.kind {
                    ResKind::Atomic { va, rkey, orig } if r.first_psn == p => Some((va, rkey, orig)),
                    _ => None,
                });
                let Some((va, rkey, orig)) = hit else { return };
                if rec.va != va || rec.rkey != rkey {
                    return;
                }
                self.log(p, ExecKind::AtomicReplay);
                self.atomic_ack(p, orig);
            }
            _ => {
                if rec.ackreq {
                    self.send_aeth(sub(self.epsn, 1), SYN_ACK);
                }
            }
        }
    }
}

use crate::psn;
