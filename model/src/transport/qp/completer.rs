//! The completer of a [`Qp`]: responses to our requests (ACK, RNR NAK, NAK, READ response,
//! atomic ACK), cumulative acknowledgement, implied NAKs, go-back-N, the RNR and retry
//! counters, and send completions.

use super::*;

impl Qp {
    pub(super) fn progress(&mut self, now: u64) {
        self.retry_left = self.cfg.retry_cnt;
        self.rnr_left = self.cfg.rnr_retry;
        self.nak_guard = None;
        self.timer_start = if self.outstanding() { Some(now) } else { None };
        if let Some((p, t0)) = self.rtt_probe {
            if lt(p, self.una()) {
                self.rtt_sample(now.saturating_sub(t0));
                self.rtt_probe = None;
            }
        }
        self.early_n = 0;
        self.arm_early(now);
        self.widen();
        self.sr_trim();
    }

    /// A round trip of `r` ns: the smoothed RTT and its variation, with RFC 6298's gains (1/8,
    /// 1/4) in integer arithmetic, as the engine computes them.
    fn rtt_sample(&mut self, r: u64) {
        if self.srtt == 0 {
            self.srtt = r.max(1);
            self.rttvar = r / 2;
        } else {
            let d = self.srtt.abs_diff(r);
            self.rttvar = self.rttvar - self.rttvar / 4 + d / 4;
            self.srtt = self.srtt - self.srtt / 8 + r / 8;
        }
    }

    /// The smoothed RTT and its variation, ns (`None` before the first sample).
    pub fn rtt(&self) -> Option<(u64, u64)> {
        (self.srtt != 0).then_some((self.srtt, self.rttvar))
    }

    /// The early timer from `now`: SRTT + 4 RTTVAR (at least `RTO_MIN_NS`), or the tail-loss
    /// probe's 2 SRTT (at least `PTO_MIN_NS`, at most the former) when nothing more waits to
    /// start; doubled per early retransmission since the last progress. None with the
    /// standard timer, an infinite ACK timeout, no sample yet, the backoff used up, or nothing
    /// outstanding.
    pub(super) fn arm_early(&mut self, now: u64) {
        self.early_at = None;
        if self.cfg.std_timer || self.cfg.timeout == 0 || self.srtt == 0 || self.early_n >= RTO_BACKOFF || !self.outstanding() {
            return;
        }
        let rto = (self.srtt + 4 * self.rttvar).max(RTO_MIN_NS);
        let tail = self.sq.iter().all(|e| e.started);
        let base = if self.early_n == 0 && tail { (2 * self.srtt).max(PTO_MIN_NS).min(rto) } else { rto };
        self.early_at = Some(now.saturating_add(base << self.early_n));
    }

    /// The early timer expired: resend from the oldest unacknowledged PSN with the window at
    /// `WIN_MIN`, using no retry; the standard timer keeps running from the last progress.
    pub(super) fn early_retransmit(&mut self, now: u64) {
        self.stats.early_retx += 1;
        self.go_back(self.una());
        self.early_n += 1;
        self.arm_early(now);
    }

    /// Every PSN acknowledged since the last call widens the window by one, up to `WIN_MAX`;
    /// the limit moves when it moves by `WIN_STEP` or more.
    fn widen(&mut self) {
        let u = self.una();
        let k = diff(u, self.win_una).max(0) as u32;
        self.win_una = u;
        self.cwnd = self.cwnd.saturating_add(k).min(WIN_MAX);
        let want = add(u, self.cwnd);
        if diff(want, self.win_lim) >= WIN_STEP as i32 {
            self.win_lim = want;
        }
    }

    pub(super) fn pop_success(&mut self) {
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
    pub(super) fn fatal(&mut self, status: WcStatus) {
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

    pub(super) fn retry(&mut self, p: u32, now: u64, _cx: &mut Ctx<'_>) {
        if self.retry_left == 0 {
            self.fatal(WcStatus::RetryExcErr);
            return;
        }
        self.retry_left -= 1;
        self.stats.retries += 1;
        self.go_back(p);
        self.timer_start = Some(now);
        self.arm_early(now);
    }

    /// What every retransmission does (a retry or an early one): the next request packet is
    /// `p`, the window shrinks to `WIN_MIN` PSNs beyond it, and (Karn) no round trip is timed
    /// across it.
    /// With selective repeat the cursor stays: a recovery over everything sent resends each PSN
    /// not acknowledged selectively once, and the oldest unacknowledged one in any case.
    fn go_back(&mut self, p: u32) {
        if self.cfg.sr {
            self.sr_tx.clear_flag(sr::F_RESENT);
            // the PSN after the highest cumulative acknowledgement is resent too: if it was
            // acknowledged selectively, an RNR NAK for it may have been lost
            if let Some(c) = self.sr_cum {
                let q = add(c, 1);
                if let Some(f) = self.sr_tx.get(q) {
                    self.sr_tx.set(q, f & !sr::F_SACKED);
                }
            }
            self.rec_hi = None;
            let hi = self.tx_psn();
            self.sr_recover(hi);
            self.sr_una_again = true;
        } else {
            self.rewind(p);
        }
        self.cwnd = WIN_MIN;
        self.win_lim = add(p, WIN_MIN);
        self.win_una = self.una();
        self.rtt_probe = None;
    }

    /// Cumulative acknowledgement of every PSN ≤ `n`. Returns false if it triggered an implied
    /// NAK (an unanswered READ/atomic at or before `n`), which already retried / failed.
    pub(super) fn ack_through(&mut self, n: u32, now: u64, cx: &mut Ctx<'_>) -> bool {
        // selective repeat: the highest cumulative acknowledgement seen, kept while a READ or
        // atomic before it is still missing its answer
        let n = if self.cfg.sr {
            let m = match self.sr_cum {
                Some(c) if gt(c, n) => c,
                _ => n,
            };
            self.sr_cum = Some(m);
            m
        } else {
            n
        };
        let mut prog = false;
        loop {
            let Some(e) = self.sq.front() else { break };
            if !e.started {
                break;
            }
            if e.wr.op.is_rd_atomic() {
                if self.cfg.sr && matches!(e.wr.op, SendOp::Read { .. }) {
                    // selective repeat: responses placed while an earlier WQE was the oldest
                    let (first, np) = (e.first_psn, e.npkts);
                    let mut d = e.done;
                    while d < np && self.sacked(add(first, d)) {
                        d += 1;
                    }
                    if let Some(f) = self.sq.front_mut() {
                        if d != f.done {
                            f.done = d;
                            prog = true;
                        }
                    }
                    if d >= np {
                        self.pop_success();
                        prog = true;
                        continue;
                    }
                }
                let Some(e) = self.sq.front() else { break };
                if self.cfg.sr && e.wr.op.is_atomic() && self.sacked(e.first_psn) {
                    // its result was written when its ACK arrived
                    if let Some(f) = self.sq.front_mut() {
                        f.done = 1;
                    }
                    self.pop_success();
                    prog = true;
                    continue;
                }
                let Some(e) = self.sq.front() else { break };
                if ge(n, e.first_psn) {
                    let p = add(e.first_psn, e.done);
                    let end = add(e.first_psn, e.npkts);
                    if self.cfg.sr {
                        // its missing answers are taken as lost: asked for again, no retry;
                        // the acknowledgement is kept for after them
                        self.stats.implied_naks += 1;
                        self.sr_recover(end);
                        break;
                    }
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
        if let Some((p, st)) = self.sr_fatal {
            if self.una() == p && self.state != QpState::Err {
                self.sr_fatal = None;
                self.fatal(st);
                return false;
            }
        }
        true
    }

    /// `p` lies in `[una, next_psn)` (or `== next_psn` when `incl_next`).
    pub(super) fn psn_in_window(&self, p: u32, incl_next: bool) -> bool {
        let una = self.una();
        ge(p, una) && (gt(self.next_psn, p) || (incl_next && p == self.next_psn))
    }

    pub(super) fn req_recv(&mut self, now: u64, rec: &HdrRecord, payload: &[u8], cx: &mut Ctx<'_>) {
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
                if self.cfg.sr {
                    // (a WRITE with immediate placed out of order and refused in order)
                    let f = self.sr_tx.get(p).unwrap_or(0);
                    self.sr_tx.set(p, f & !sr::F_SACKED);
                }
                self.rnr_until = Some(now.saturating_add(rnr_timer_ns(syn & 0x1F)));
                self.timer_start = None;
                self.early_at = None;
                self.rtt_probe = None;
            }
            3 => match syn {
                SYN_SNAK_PLACED | SYN_SNAK_DROPPED if self.cfg.sr => self.on_snak(now, rec, cx),
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
                    let st = match syn {
                        SYN_NAK_INV_REQ => WcStatus::RemInvReqErr,
                        SYN_NAK_REM_ACCESS => WcStatus::RemAccessErr,
                        _ => WcStatus::RemOpErr,
                    };
                    if self.cfg.sr && self.una() != p {
                        // selective repeat: a READ or atomic before it still waits for its
                        // answer; the error is the WQE's at `p`, once everything before it
                        // completed (the timers still run)
                        self.sr_fatal = Some((p, st));
                        return;
                    }
                    self.fatal(st);
                }
                _ => {}
            },
            _ => {}
        }
    }

    fn on_read_resp(&mut self, now: u64, rec: &HdrRecord, payload: &[u8], cx: &mut Ctx<'_>) {
        if self.cfg.sr {
            return self.sr_read_resp(now, rec, payload, cx);
        }
        let q = rec.psn;
        let Some(e) = self.wqe_at(q).map(|i| &self.sq[i]) else { return };
        if !matches!(e.wr.op, SendOp::Read { .. }) {
            return;
        }
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
        let Some(e) = self.sq.front() else { return };
        if e.first_psn != first || !matches!(e.wr.op, SendOp::Read { .. }) {
            return;
        }
        let Some(off) = self.read_resp_off(e, rec, payload) else { return };
        if !self.write_local(0, off, payload, cx) {
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

    /// The index of the started send WQE whose PSNs include `q`.
    pub(super) fn wqe_at(&self, q: u32) -> Option<usize> {
        self.sq.iter().take_while(|e| e.started).position(|e| {
            let d = diff(q, e.first_psn);
            d >= 0 && (d as u32) < e.npkts
        })
    }

    /// A READ response to `e` (a READ): its byte offset in the READ when its opcode and length
    /// fit its position (the end flag on the last packet only, a full PMTU before it, an AETH
    /// that is an ACK).
    pub(super) fn read_resp_off(&self, e: &SqEntry, rec: &HdrRecord, payload: &[u8]) -> Option<u64> {
        let pmtu = self.cfg.pmtu as u64;
        let k = diff(rec.psn, e.first_psn) as u64;
        let off = k * pmtu;
        let exp_len = e.len.saturating_sub(off).min(pmtu) as usize;
        let is_last = k + 1 == e.npkts as u64;
        let info = opcode::info(rec.opcode)?;
        (info.end == is_last && payload.len() == exp_len && !(info.aeth && rec.syndrome >> 5 != 0)).then_some(off)
    }

    /// Writes `data` at byte offset `off` of the local buffers of the send WQE at `i` (a READ's
    /// or atomic's), after their local-write check; false if the check or the write fails.
    pub(super) fn write_local(&self, i: usize, off: u64, data: &[u8], cx: &mut Ctx<'_>) -> bool {
        let Some(e) = self.sq.get(i) else { return false };
        check_sgl(&e.wr.sgl, self.cfg.pd, Need::LocalWrite, cx.mrs).is_ok() && scatter(&e.wr.sgl, off, data, cx.mem)
    }

    fn on_atomic_ack(&mut self, now: u64, rec: &HdrRecord, cx: &mut Ctx<'_>) {
        let q = rec.psn;
        if rec.syndrome >> 5 != 0 {
            return;
        }
        if self.cfg.sr {
            return self.sr_atomic_ack(now, rec, cx);
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
        if !self.write_local(0, 0, &rec.atomic_orig.to_le_bytes(), cx) {
            self.fatal(WcStatus::LocProtErr);
            return;
        }
        if let Some(f) = self.sq.front_mut() {
            f.done = 1;
        }
        self.pop_success();
        self.progress(now);
    }
}
