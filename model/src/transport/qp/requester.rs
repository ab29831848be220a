//! The requester half of a [`Qp`]: local checks of send WQEs, segmentation into request
//! packets, PSN assignment and the limits on outstanding READ/atomic requests and PSN span.

use super::*;

impl Qp {
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
        let uc_bad = self.cfg.uc && (e.wr.op.is_rd_atomic() || matches!(e.wr.op, SendOp::SendInv(_)));
        let err = if e.wr.sgl.len() > MAX_SGE || uc_bad {
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

    pub(super) fn req_poll(&mut self, now: u64, cx: &mut Ctx<'_>, out: &mut Vec<Pkt>) {
        if !matches!(self.state, QpState::Rts | QpState::Sqd) {
            return;
        }
        if let Some(t) = self.rnr_until {
            if now < t {
                return;
            }
            self.rnr_until = None;
            self.timer_start = Some(now);
            self.arm_early(now);
        }
        if self.cfg.sr {
            self.sr_repairs(now, cx, out);
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
                if self.cfg.sr && self.sr_waits(idx) {
                    break;
                }
                let Some(e) = self.sq.get(idx) else { break };
                let rd = e.wr.op.is_rd_atomic();
                let np = if e.wr.op.is_atomic() { 1 } else { pkts_for(e.len, self.cfg.pmtu) };
                if rd && self.outstanding_rd_atomic() >= self.cfg.max_rd_atomic as usize {
                    break;
                }
                // (UC: no window, nothing is acknowledged)
                if !self.cfg.uc
                    && (self.span().saturating_add(np) > MAX_OUTSTANDING_PSNS || !lt(self.next_psn, self.win_lim))
                {
                    break;
                }
                let first = self.next_psn;
                self.next_psn = add(first, np);
                let Some(e) = self.sq.get_mut(idx) else { break };
                e.started = true;
                e.first_psn = first;
                e.npkts = np;
                e.done = 0;
                // one round trip timed at a time: this WQE's first packet
                if self.rtt_probe.is_none() && !self.cfg.uc {
                    self.rtt_probe = Some((first, now));
                }
            }
            let Some(e) = self.sq.get(idx) else { break };
            if !self.cfg.uc && !lt(add(e.first_psn, self.tx_off), self.win_lim) {
                break; // beyond the window: an ACK or a retransmission moves it
            }
            // selective repeat: a PSN the responder already has is not sent again (after an RNR
            // wait; timers use recoveries)
            let skip = self.cfg.sr && !e.wr.op.is_rd_atomic() && self.sacked(add(e.first_psn, self.tx_off));
            if !skip {
                let pkt = self.req_pkt(e, self.tx_off, cx.mem);
                out.push(pkt);
                self.stats.req_pkts += 1;
            }
            if e.wr.op.is_rd_atomic() || self.tx_off.saturating_add(1) >= e.npkts {
                self.tx_idx += 1;
                self.tx_off = 0;
                if self.cfg.uc {
                    // UC: complete once sent (every earlier WQE already has: it is the oldest)
                    self.pop_success();
                    continue;
                }
            } else {
                self.tx_off += 1;
            }
            if self.cfg.uc {
                continue;
            }
            if self.timer_start.is_none() {
                self.timer_start = Some(now);
                self.arm_early(now);
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

    /// The READ request for packets `k..` of the response to `e` (a READ), `len` bytes.
    pub(super) fn read_req(&self, e: &SqEntry, k: u32, len: u64) -> Pkt {
        let (remote_addr, rkey) = match e.wr.op {
            SendOp::Read { remote_addr, rkey } => (remote_addr, rkey),
            _ => (0, 0),
        };
        let mut r = self.hdr(0x0C, add(e.first_psn, k));
        r.ackreq = true;
        r.va = remote_addr.wrapping_add(k as u64 * self.cfg.pmtu as u64);
        r.rkey = rkey;
        r.dma_len = len.min(u32::MAX as u64) as u32;
        Self::finish(r, Vec::new())
    }

    pub(super) fn req_pkt(&self, e: &SqEntry, k: u32, mem: &HostMem) -> Pkt {
        let pmtu = self.cfg.pmtu as u64;
        let psn = add(e.first_psn, k);
        let off = k as u64 * pmtu;
        let only = e.npkts <= 1;
        let last = k.saturating_add(1) >= e.npkts;
        let ackreq = !self.cfg.uc
            && (last
                || k % ACKREQ_INTERVAL == ACKREQ_INTERVAL - 1
                || add(psn, 1) == self.win_lim
                || (self.cfg.sr && psn == self.una()));
        // UC: the same operation in the UC class (0x20-0x2B)
        let class = if self.cfg.uc { 0x20 } else { 0x00 };
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
                let mut r = self.hdr(op | class, psn);
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
                // selective repeat: every packet after the first carries a RETH with its own
                // target address (0xC7-0xC9)
                let sr = self.cfg.sr && k > 0;
                let op = if sr { op - 0x07 + opcode::SR_WRITE_MIDDLE } else { op };
                let mut r = self.hdr(op | class, psn);
                r.ackreq = ackreq;
                if k == 0 || sr {
                    r.va = remote_addr.wrapping_add(off);
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
            SendOp::Read { .. } => self.read_req(e, k, e.len.saturating_sub(off)),
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
}
