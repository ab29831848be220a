//! Selective repeat (`QpConfig::sr`; the rules are in the module docs of `transport`,
//! "Selective repeat"): the responder's out-of-order placement and selective NAKs, the
//! requester's SACK record, recovery and repairs.

use super::*;

/// Per-PSN entries from a base PSN on, wrap-safe (PSNs compared with `diff`).
#[derive(Debug, Clone)]
pub(super) struct PsnMap<T: Copy> {
    base: u32,
    limit: usize,
    v: VecDeque<Option<T>>,
}

impl<T: Copy> PsnMap<T> {
    /// Entries for at most `limit` PSNs from the base on.
    pub(super) fn new(base: u32, limit: u32) -> Self {
        PsnMap { base: base & psn::MASK, limit: limit as usize, v: VecDeque::new() }
    }

    fn idx(&self, p: u32) -> Option<usize> {
        let d = diff(p, self.base);
        (d >= 0).then_some(d as usize)
    }

    pub(super) fn get(&self, p: u32) -> Option<T> {
        self.idx(p).and_then(|i| self.v.get(i).copied().flatten())
    }

    /// Sets the entry of `p` (ignored before the base or `limit` PSNs or more beyond it).
    pub(super) fn set(&mut self, p: u32, t: T) {
        let Some(i) = self.idx(p) else { return };
        if i >= self.limit {
            return;
        }
        if self.v.len() <= i {
            self.v.resize(i + 1, None);
        }
        self.v[i] = Some(t);
    }

    pub(super) fn take(&mut self, p: u32) -> Option<T> {
        let i = self.idx(p)?;
        self.v.get_mut(i).and_then(Option::take)
    }

    /// Drops every entry before `p`; `p` becomes the base.
    pub(super) fn trim(&mut self, p: u32) {
        let d = diff(p, self.base);
        if d <= 0 {
            return;
        }
        let n = (d as usize).min(self.v.len());
        self.v.drain(..n);
        self.base = p & psn::MASK;
    }

    pub(super) fn clear(&mut self, base: u32) {
        self.base = base & psn::MASK;
        self.v.clear();
    }
}

/// A WRITE packet placed beyond ePSN, waiting for ePSN to reach it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Mark {
    /// Where its payload went, and how long it is.
    va: u64,
    len: u64,
    /// Its message's DMA length (RETH).
    dma_len: u64,
    /// The message's first packet (FIRST, ONLY), its last (LAST, ONLY).
    start: bool,
    end: bool,
    /// WRITE with immediate: the immediate (its receive WQE is taken in order).
    imm: Option<u32>,
    /// Its R_Key (checked again in order: an invalidation may have come in between).
    rkey: u32,
}

/// The requester's record of a PSN: acknowledged selectively, resent in this recovery.
pub(super) const F_SACKED: u8 = 1;
pub(super) const F_RESENT: u8 = 2;

impl Qp {
    // --------------------------------------------------------------------------------------
    // responder

    /// The selective NAK: BTH PSN = ePSN (every PSN before it is acknowledged), the MSN field
    /// = the PSN that arrived out of order, the NAK code = whether it was placed.
    fn snak(&mut self, s: u32, syn: u8) {
        self.stats.snak_sent += 1;
        let mut r = self.hdr(0x11, self.epsn);
        r.syndrome = syn;
        r.msn = s & psn::MASK;
        self.resp_out.push_back(Self::finish(r, Vec::new()));
    }

    /// A request packet beyond ePSN on a selective-repeat QP.
    pub(super) fn sr_ooo(&mut self, rec: &HdrRecord, payload: &[u8], cx: &mut Ctx<'_>) {
        let p = rec.psn;
        if diff(p, self.epsn) as u32 >= SR_WIN {
            self.stats.seq_drops += 1;
            return;
        }
        if self.sr_rx.get(p).is_some() {
            self.stats.dup_reqs += 1;
            return self.snak(p, SYN_SNAK_PLACED);
        }
        match self.sr_place(rec, payload, cx) {
            Some(m) => {
                self.sr_rx.set(p, m);
                self.stats.sr_placed += 1;
                self.log(p, ExecKind::Write);
                self.snak(p, SYN_SNAK_PLACED);
            }
            None => {
                self.stats.seq_drops += 1;
                self.snak(p, SYN_SNAK_DROPPED);
            }
        }
    }

    /// Places a WRITE packet beyond ePSN when every check a packet can pass on its own passes;
    /// `None`: dropped (it is checked again when resent in order). Each packet carries its
    /// placement: FIRST / ONLY their RETH, MIDDLE / LAST the selective-repeat opcodes' RETH
    /// (the packet's own address, the R_Key, the message's DMA length).
    fn sr_place(&mut self, rec: &HdrRecord, payload: &[u8], cx: &mut Ctx<'_>) -> Option<Mark> {
        let pmtu = self.cfg.pmtu as u64;
        let len = payload.len() as u64;
        let dma_len = rec.dma_len as u64;
        if !self.cfg.access.remote_write || dma_len > MAX_MSG_LEN {
            return None;
        }
        let (start, end, imm) = match rec.opcode {
            0x06 => (true, false, false),
            0x0A => (true, true, false),
            0x0B => (true, true, true),
            opcode::SR_WRITE_MIDDLE => (false, false, false),
            opcode::SR_WRITE_LAST => (false, true, false),
            opcode::SR_WRITE_LAST_IMM => (false, true, true),
            _ => return None,
        };
        let len_ok = match (start, end) {
            (true, false) | (false, false) => len == pmtu && dma_len > pmtu,
            (true, true) => len <= pmtu && len == dma_len,
            (false, true) => len >= 1 && len <= pmtu && len < dma_len,
        };
        if !len_ok {
            return None;
        }
        // FIRST / ONLY: the whole message's range; MIDDLE / LAST: the packet's own
        let clen = if start { dma_len } else { len };
        if clen > 0 && cx.mrs.check(rec.rkey, self.cfg.pd, rec.va, clen, Need::RemoteWrite).is_err() {
            return None;
        }
        cx.mem.write(rec.va, payload);
        Some(Mark { va: rec.va, len, dma_len, start, end, imm: imm.then_some(rec.imm), rkey: rec.rkey })
    }

    /// A selective-repeat WRITE packet arriving at ePSN: it must continue the message in
    /// progress (its address where that message has reached, the same DMA length); it is then
    /// taken as the MIDDLE / LAST it stands for.
    pub(super) fn sr_in_order(&mut self, rec: &HdrRecord, payload: &[u8], cx: &mut Ctx<'_>) {
        let ok = matches!(self.cur, Some(InMsg::Write { va, dma_len, off })
            if va.wrapping_add(off) == rec.va && dma_len == rec.dma_len as u64);
        if !ok {
            return self.nak_fatal(rec.psn, SYN_NAK_INV_REQ);
        }
        let std = HdrRecord { opcode: rec.opcode - opcode::SR_WRITE_MIDDLE + 0x07, ..rec.clone() };
        self.resp_recv_rc(&std, payload, cx);
    }

    /// After a packet in order: ePSN moves over the packets placed beyond it, doing what their
    /// arrival in order would have done; a cumulative ACK follows when it moved.
    pub(super) fn sr_advance(&mut self, cx: &mut Ctx<'_>) {
        let mut moved = false;
        while matches!(self.state, QpState::Rtr | QpState::Rts | QpState::Sqd) {
            let p = self.epsn;
            let Some(m) = self.sr_rx.get(p) else { break };
            // the sequence rules a packet out of order could not be checked against
            let seq_ok = if m.start {
                self.cur.is_none()
            } else {
                matches!(self.cur, Some(InMsg::Write { va, dma_len, off })
                    if va.wrapping_add(off) == m.va && dma_len == m.dma_len && off + m.len <= dma_len
                        && (off + m.len == dma_len) == m.end)
            };
            if !seq_ok {
                self.sr_rx.take(p);
                self.nak_fatal(p, SYN_NAK_INV_REQ);
                break;
            }
            // the R_Key again, in order (a SEND with invalidate before it may have revoked it;
            // the data placed stays, in the region the key allowed when it arrived)
            let (cva, clen) = if m.start { (m.va, m.dma_len) } else { (m.va, m.len) };
            if clen > 0 && cx.mrs.check(m.rkey, self.cfg.pd, cva, clen, Need::RemoteWrite).is_err() {
                self.sr_rx.take(p);
                self.nak_fatal(p, SYN_NAK_REM_ACCESS);
                break;
            }
            if m.end && m.imm.is_some() && self.rq.is_empty() {
                // taken again in order after the RNR wait
                self.sr_rx.take(p);
                self.rnr_nak(p);
                break;
            }
            self.sr_rx.take(p);
            self.epsn = add(p, 1);
            moved = true;
            if m.end {
                self.cur = None;
                self.msn = add(self.msn, 1);
                if let Some(imm) = m.imm {
                    if let Some(wr) = self.rq.pop_front() {
                        let mut c = self.cqe(wr.wr_id, WcStatus::Success, WcOpcode::RecvRdmaWithImm, m.dma_len as u32);
                        c.imm = Some(imm);
                        self.recv_cq.push_back(c);
                    }
                }
            } else if m.start {
                self.cur = Some(InMsg::Write { va: m.va, dma_len: m.dma_len, off: m.len });
            } else if let Some(InMsg::Write { off, .. }) = &mut self.cur {
                *off += m.len;
            }
        }
        self.sr_rx.trim(self.epsn);
        if moved && self.state != QpState::Err {
            self.nak_sent = false;
            self.send_aeth(sub(self.epsn, 1), SYN_ACK);
        }
    }

    /// Forgets what was placed out of order (ERR, RESET).
    pub(super) fn sr_clear(&mut self) {
        self.sr_rx.clear(self.epsn);
        self.sr_tx.clear(self.una());
        self.rec_hi = None;
        self.sr_cum = None;
        self.sr_fatal = None;
        self.sr_una_again = false;
    }

    // --------------------------------------------------------------------------------------
    // requester

    pub(super) fn sacked(&self, p: u32) -> bool {
        self.sr_tx.get(p).is_some_and(|f| f & F_SACKED != 0)
    }

    /// Recovery: every PSN before `hi` neither acknowledged nor resent is taken as lost.
    pub(super) fn sr_recover(&mut self, hi: u32) {
        let hi = if gt(hi, self.next_psn) { self.next_psn } else { hi };
        self.rec_hi = Some(match self.rec_hi {
            Some(h) if ge(h, hi) => h,
            _ => hi,
        });
    }

    /// Progress: the record starts at the oldest unacknowledged PSN; recovery ends when it
    /// passes its end.
    pub(super) fn sr_trim(&mut self) {
        let u = self.una();
        self.sr_tx.trim(u);
        if self.sr_cum.is_some_and(|c| lt(c, u)) {
            self.sr_cum = None;
        }
        if self.rec_hi.is_some_and(|h| le(h, u)) {
            self.rec_hi = None;
            self.sr_tx.clear_flag(F_RESENT);
        }
    }

    /// A selective NAK (see `snak`).
    pub(super) fn on_snak(&mut self, now: u64, rec: &HdrRecord, cx: &mut Ctx<'_>) {
        let e = rec.psn;
        let s = rec.msn & psn::MASK;
        if !self.psn_in_window(e, true) {
            return;
        }
        self.stats.snak_rcvd += 1;
        if !self.ack_through(sub(e, 1), now, cx) || self.state == QpState::Err {
            return;
        }
        if !self.psn_in_window(s, false) || s == e {
            return;
        }
        // (a READ's or atomic's PSNs are answered by responses, never placed at the responder)
        let rd = self.wqe_at(s).is_some_and(|i| self.sq[i].wr.op.is_rd_atomic());
        if rec.syndrome == SYN_SNAK_PLACED && !rd {
            let f = self.sr_tx.get(s).unwrap_or(0);
            self.sr_tx.set(s, f | F_SACKED);
            self.sr_recover(s);
        } else {
            self.sr_recover(add(s, 1));
        }
    }

    /// Selective repeat's ordering rule: a WRITE whose target overlaps the target of an
    /// outstanding WRITE, READ or atomic, or a READ whose local buffers overlap those of an
    /// outstanding READ, does not start before that one completes (placement out of order
    /// must not let an earlier request's resent packet land after a later one's).
    pub(super) fn sr_waits(&self, idx: usize) -> bool {
        let Some(e) = self.sq.get(idx) else { return false };
        let overlap = |a: (u64, u64), b: (u64, u64)| a.0 < b.0.saturating_add(b.1) && b.0 < a.0.saturating_add(a.1);
        let remote = |x: &SqEntry| -> Option<(u64, u64)> {
            match x.wr.op {
                SendOp::Write { remote_addr, .. } | SendOp::WriteImm { remote_addr, .. } | SendOp::Read { remote_addr, .. } => {
                    (x.len > 0).then_some((remote_addr, x.len))
                }
                SendOp::CmpSwap { remote_addr, .. } | SendOp::FetchAdd { remote_addr, .. } => Some((remote_addr, 8)),
                _ => None,
            }
        };
        let local = |x: &SqEntry| -> Vec<(u64, u64)> {
            x.wr.sgl.iter().filter(|s| s.len > 0).map(|s| (s.addr, s.len as u64)).collect()
        };
        let earlier = || self.sq.iter().take(idx).filter(|x| x.started);
        match e.wr.op {
            SendOp::Write { .. } | SendOp::WriteImm { .. } => {
                let Some(r) = remote(e) else { return false };
                earlier().any(|x| remote(x).is_some_and(|q| overlap(q, r)))
            }
            // a READ's responses and an atomic's result land in local memory as they arrive
            SendOp::Read { .. } | SendOp::CmpSwap { .. } | SendOp::FetchAdd { .. } => {
                let mine = local(e);
                earlier()
                    .filter(|x| x.wr.op.is_rd_atomic())
                    .any(|x| local(x).iter().any(|q| mine.iter().any(|m| overlap(*q, *m))))
            }
            _ => false,
        }
    }

    /// The PSN the requester's cursor sends next.
    pub(super) fn tx_psn(&self) -> u32 {
        match self.sq.get(self.tx_idx) {
            Some(e) if e.started => add(e.first_psn, self.tx_off),
            _ => self.next_psn,
        }
    }

    /// Recovery's repairs: each PSN before the recovery's end (and before the cursor) that is
    /// neither acknowledged nor resent goes once; a READ's missing responses are asked for by
    /// runs.
    pub(super) fn sr_repairs(&mut self, now: u64, cx: &mut Ctx<'_>, out: &mut Vec<Pkt>) {
        let Some(hi) = self.rec_hi else { return };
        // up to the recovery's end, the cursor and the window's limit
        let tx = self.tx_psn();
        let mut end = if lt(hi, tx) { hi } else { tx };
        if lt(self.win_lim, end) {
            end = self.win_lim;
        }
        let una = self.una();
        let mut q = una;
        let mut sent = false;
        while lt(q, end) {
            let again = q == una && self.sr_una_again && self.sr_tx.get(q).unwrap_or(0) & F_RESENT == 0;
            if self.sr_tx.get(q).unwrap_or(0) != 0 && !again {
                q = add(q, 1);
                continue;
            }
            let Some(e) = self.wqe_at(q).map(|i| &self.sq[i]) else { break };
            // a request packet the kept cumulative ACK covers arrived (a READ's or atomic's
            // answer may still be missing)
            if !again && !e.wr.op.is_rd_atomic() && self.sr_cum.is_some_and(|c| le(q, c)) {
                q = add(q, 1);
                continue;
            }
            self.sr_una_again = false;
            let k = diff(q, e.first_psn) as u32;
            let (pkt, next) = if matches!(e.wr.op, SendOp::Read { .. }) {
                // partial only once the responder has executed the READ (a response arrived)
                let answered = e.done > 0 || (0..e.npkts).any(|j| self.sacked(add(e.first_psn, j)));
                let mut r = k + 1;
                if answered {
                    while r < e.npkts && lt(add(e.first_psn, r), end) && self.sr_tx.get(add(e.first_psn, r)).unwrap_or(0) == 0 {
                        r += 1;
                    }
                } else {
                    r = e.npkts;
                }
                let pmtu = self.cfg.pmtu as u64;
                let off = k as u64 * pmtu;
                let len = e.len.saturating_sub(off).min((r - k) as u64 * pmtu);
                (self.read_req(e, k, len), r)
            } else {
                (self.req_pkt(e, k, cx.mem), k + 1)
            };
            let first = e.first_psn;
            for j in k..next {
                let p = add(first, j);
                let f = self.sr_tx.get(p).unwrap_or(0);
                self.sr_tx.set(p, f | F_RESENT);
                if self.rtt_probe.is_some_and(|(rp, _)| rp == p) {
                    self.rtt_probe = None; // (Karn)
                }
            }
            out.push(pkt);
            self.stats.req_pkts += 1;
            self.stats.sr_resent += 1;
            sent = true;
            q = add(first, next);
        }
        if sent && self.timer_start.is_none() {
            self.timer_start = Some(now);
            self.arm_early(now);
        }
    }

    /// A READ response on a selective-repeat QP: placed wherever it falls in its READ, in any
    /// order; a response beyond the next one expected starts a recovery.
    pub(super) fn sr_read_resp(&mut self, now: u64, rec: &HdrRecord, payload: &[u8], cx: &mut Ctx<'_>) {
        let q = rec.psn;
        let find = |this: &Self| this.wqe_at(q).filter(|&i| matches!(this.sq[i].wr.op, SendOp::Read { .. }));
        let Some(i) = find(self) else { return };
        let first = self.sq[i].first_psn;
        if lt(q, add(first, self.sq[i].done)) || self.sacked(q) {
            return;
        }
        // every request before this READ arrived
        self.ack_through(sub(first, 1), now, cx);
        if self.state == QpState::Err {
            return;
        }
        let Some(i) = find(self) else { return };
        let e = &self.sq[i];
        let Some(off) = self.read_resp_off(e, rec, payload) else { return };
        let gap = diff(q, add(first, e.done)) > 0;
        if !self.write_local(i, off, payload, cx) {
            if i == 0 {
                self.fatal(WcStatus::LocProtErr);
            }
            return;
        }
        let f = self.sr_tx.get(q).unwrap_or(0);
        self.sr_tx.set(q, f | F_SACKED);
        if gap {
            self.sr_recover(q);
        }
        self.sr_settle(now, cx);
    }

    /// READs and atomics at the head whose answers have all arrived complete, and the highest
    /// cumulative acknowledgement seen then goes on past them.
    pub(super) fn sr_settle(&mut self, now: u64, cx: &mut Ctx<'_>) {
        let n = self.sr_cum.unwrap_or_else(|| sub(self.una(), 1));
        self.ack_through(n, now, cx);
    }

    /// An atomic ACK on a selective-repeat QP: its result is written when it arrives, whether
    /// or not the atomic is the oldest WQE (the ordering rule keeps later READs' and atomics'
    /// local buffers apart from it).
    pub(super) fn sr_atomic_ack(&mut self, now: u64, rec: &HdrRecord, cx: &mut Ctx<'_>) {
        let q = rec.psn;
        let find = |this: &Self| this.sq.iter().take_while(|e| e.started).position(|e| e.wr.op.is_atomic() && e.first_psn == q);
        if find(self).is_none() || self.sacked(q) {
            return;
        }
        self.ack_through(sub(q, 1), now, cx);
        if self.state == QpState::Err {
            return;
        }
        let Some(i) = find(self) else { return };
        if !self.write_local(i, 0, &rec.atomic_orig.to_le_bytes(), cx) {
            if i == 0 {
                self.fatal(WcStatus::LocProtErr);
            }
            return;
        }
        let f = self.sr_tx.get(q).unwrap_or(0);
        self.sr_tx.set(q, f | F_SACKED);
        self.sr_settle(now, cx);
    }
}

impl PsnMap<u8> {
    pub(super) fn clear_flag(&mut self, f: u8) {
        for x in self.v.iter_mut().flatten() {
            *x &= !f;
        }
    }
}
