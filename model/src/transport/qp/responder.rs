//! The responder half of a [`Qp`]: requests from the peer, checked against ePSN (NAK-sequence,
//! duplicates), the QP's access flags and the MR table; SEND placement into receive WQEs, WRITE
//! placement, READ and atomic execution with responder resources, replay of duplicate READs and
//! atomics, ACKs, RNR NAKs and error NAKs.

use super::*;

impl Qp {
    fn push_resp(&mut self, rec: HdrRecord, payload: Vec<u8>) {
        self.resp_out.push_back(Self::finish(rec, payload));
    }

    pub(super) fn send_aeth(&mut self, psn: u32, syndrome: u8) {
        let mut r = self.hdr(0x11, psn);
        r.syndrome = syndrome;
        r.msn = self.msn;
        self.push_resp(r, Vec::new());
    }

    /// Error NAK: the responder QP goes to ERR, the NAK still goes out.
    pub(super) fn nak_fatal(&mut self, psn: u32, syndrome: u8) {
        self.go_err();
        self.send_aeth(psn, syndrome);
    }

    pub(super) fn rnr_nak(&mut self, psn: u32) {
        self.stats.rnr_sent += 1;
        self.nak_sent = true;
        self.send_aeth(psn, SYN_RNR | (self.cfg.min_rnr_timer & 0x1F));
    }

    fn recv_err(&mut self, wr_id: u64, status: WcStatus) {
        let c = self.cqe(wr_id, status, WcOpcode::Recv, 0);
        self.recv_cq.push_back(c);
    }

    pub(super) fn log(&mut self, psn: u32, kind: ExecKind) {
        self.exec.push(Exec { qpn: self.qpn, psn, kind });
    }

    fn save_resource(&mut self, r: Resource) {
        self.res.push_back(r);
        while self.res.len() > self.cfg.max_dest_rd_atomic as usize {
            self.res.pop_front();
        }
    }

    fn read_responses(&mut self, psn0: u32, va: u64, len: u64, mem: &HostMem) {
        let n = pkts_for(len, self.cfg.pmtu);
        self.read_response_part(psn0, va, len, 0..n, mem);
    }

    /// Packets `ks` of the response to a READ of `len` bytes at `va` whose first PSN is `psn0`,
    /// each with its opcode in the whole response.
    fn read_response_part(&mut self, psn0: u32, va: u64, len: u64, ks: core::ops::Range<u32>, mem: &HostMem) {
        let pmtu = self.cfg.pmtu as u64;
        let n = pkts_for(len, self.cfg.pmtu);
        for k in ks {
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

    pub(super) fn resp_recv(&mut self, rec: &HdrRecord, payload: &[u8], cx: &mut Ctx<'_>) {
        if !matches!(self.state, QpState::Rtr | QpState::Rts | QpState::Sqd) {
            return;
        }
        let d = diff(rec.psn, self.epsn);
        if self.cfg.sr && d > 0 {
            return self.sr_ooo(rec, payload, cx);
        }
        if self.cfg.sr && d == 0 && opcode::is_sr_write(rec.opcode) {
            self.sr_in_order(rec, payload, cx);
        } else {
            // (a selective-repeat opcode on a QP without it: an invalid request)
            self.resp_recv_rc(rec, payload, cx);
        }
        if self.cfg.sr && d == 0 {
            self.sr_advance(cx);
        }
    }

    pub(super) fn resp_recv_rc(&mut self, rec: &HdrRecord, payload: &[u8], cx: &mut Ctx<'_>) {
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
        self.epsn = add(self.epsn, 1);
        self.write_place(rec, payload, (va, dma_len, off), end, imm, cx);
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
                let dl = rec.dma_len as u64;
                // selective repeat: a run of whole packets inside the rest
                let part = self.cfg.sr && dl > 0 && dl < nlen && dl % pmtu == 0;
                if rec.rkey != rkey || rec.va != nva || (dl != nlen && !part) {
                    return;
                }
                if nlen > 0 && cx.mrs.check(rkey, self.cfg.pd, nva, dl, Need::RemoteRead).is_err() {
                    return;
                }
                self.log(p, ExecKind::ReadReplay);
                if part {
                    let k = k as u32;
                    let first = sub(p, k);
                    self.read_response_part(first, va, len, k..k + (dl / pmtu) as u32, cx.mem);
                } else {
                    self.read_responses(p, nva, nlen, cx.mem);
                }
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

impl Qp {
    /// UC: drops the message in progress; a SEND's receive WQE goes back to the head of the
    /// receive queue for the next message (the bytes already placed in it are not undone).
    fn uc_drop_msg(&mut self) {
        if let Some(InMsg::Send { wr, .. }) = self.cur.take() {
            self.rq.push_front(wr);
        }
    }

    /// UC: this packet and its message are dropped; the QP stays as it is.
    fn uc_drop(&mut self) {
        self.stats.uc_drops += 1;
        self.uc_drop_msg();
    }

    /// A UC request (see the module docs of `transport`): placed like RC's, never answered.
    pub(super) fn resp_recv_uc(&mut self, rec: &HdrRecord, payload: &[u8], cx: &mut Ctx<'_>) {
        if !matches!(self.state, QpState::Rtr | QpState::Rts | QpState::Sqd) {
            return;
        }
        // the RC layout of the same operation
        let op = rec.opcode & 0x1F;
        let start = matches!(op, 0x00 | 0x04 | 0x05 | 0x06 | 0x0A | 0x0B);
        let p = rec.psn;
        let gap = p != self.epsn;
        // the next PSN expected follows whatever arrived, taken or dropped
        self.epsn = add(p, 1);
        if gap {
            // packets lost (or a PSN from the past): the message in progress is lost with them
            self.stats.seq_drops += 1;
            self.uc_drop_msg();
            if !start {
                return;
            }
        }
        let seq_ok = match op {
            0x01..=0x03 => matches!(self.cur, Some(InMsg::Send { .. })),
            0x07..=0x09 => matches!(self.cur, Some(InMsg::Write { .. })),
            _ => start,
        };
        if !seq_ok {
            return self.uc_drop();
        }
        if start {
            // (a start ends a message still in progress: its rest was lost)
            self.uc_drop_msg();
        }
        let pmtu = self.cfg.pmtu as usize;
        let len = payload.len();
        let len_ok = match op {
            0x00 | 0x01 | 0x06 | 0x07 => len == pmtu,
            0x02 | 0x03 | 0x08 | 0x09 => (1..=pmtu).contains(&len),
            _ => len <= pmtu,
        };
        let acc_ok = !matches!(op, 0x06..=0x0B) || self.cfg.access.remote_write;
        if !len_ok || !acc_ok {
            return self.uc_drop();
        }
        if op <= 0x05 {
            self.uc_send(rec, payload, cx)
        } else {
            self.uc_write(rec, payload, cx)
        }
    }

    fn uc_send(&mut self, rec: &HdrRecord, payload: &[u8], cx: &mut Ctx<'_>) {
        let op = rec.opcode & 0x1F;
        if matches!(op, 0x00 | 0x04 | 0x05) {
            let Some(wr) = self.rq.front() else { return self.uc_drop() };
            if check_sgl(&wr.sgl, self.cfg.pd, Need::LocalWrite, cx.mrs).is_err() {
                let id = wr.wr_id;
                self.rq.pop_front();
                self.recv_err(id, WcStatus::LocProtErr);
                return self.go_err();
            }
            let Some(wr) = self.rq.pop_front() else { return };
            let total = sgl_len(&wr.sgl);
            self.cur = Some(InMsg::Send { wr, off: 0, total });
        }
        let Some(InMsg::Send { wr, off, total }) = self.cur.take() else { return };
        if off + payload.len() as u64 > total {
            self.recv_err(wr.wr_id, WcStatus::LocLenErr);
            return self.go_err();
        }
        scatter(&wr.sgl, off, payload, cx.mem);
        let off = off + payload.len() as u64;
        self.log(rec.psn, ExecKind::Send);
        if matches!(op, 0x02 | 0x03 | 0x04 | 0x05) {
            self.msn = add(self.msn, 1);
            let mut c = self.cqe(wr.wr_id, WcStatus::Success, WcOpcode::Recv, off as u32);
            if matches!(op, 0x03 | 0x05) {
                c.imm = Some(rec.imm);
            }
            self.recv_cq.push_back(c);
        } else {
            self.cur = Some(InMsg::Send { wr, off, total });
        }
    }

    fn uc_write(&mut self, rec: &HdrRecord, payload: &[u8], cx: &mut Ctx<'_>) {
        let op = rec.opcode & 0x1F;
        let imm = matches!(op, 0x09 | 0x0B);
        let end = matches!(op, 0x08 | 0x09 | 0x0A | 0x0B);
        if matches!(op, 0x06 | 0x0A | 0x0B) {
            let dma_len = rec.dma_len as u64;
            if dma_len > MAX_MSG_LEN
                || (dma_len > 0
                    && cx.mrs.check(rec.rkey, self.cfg.pd, rec.va, dma_len, Need::RemoteWrite).is_err())
            {
                return self.uc_drop();
            }
            self.cur = Some(InMsg::Write { va: rec.va, dma_len, off: 0 });
        }
        let Some(InMsg::Write { va, dma_len, off }) = self.cur else { return };
        let noff = off + payload.len() as u64;
        if noff > dma_len || (end && noff != dma_len) || (imm && self.rq.is_empty()) {
            self.cur = None;
            return self.uc_drop();
        }
        self.write_place(rec, payload, (va, dma_len, off), end, imm, cx);
    }

    /// A WRITE packet that passed its checks (RC and UC): its payload placed at its offset in
    /// the message; at the message's end a WRITE with immediate takes the receive WQE at the
    /// head, else the message's progress is kept.
    fn write_place(&mut self, rec: &HdrRecord, payload: &[u8], (va, dma_len, off): (u64, u64, u64), end: bool, imm: bool, cx: &mut Ctx<'_>) {
        cx.mem.write(va.wrapping_add(off), payload);
        self.log(rec.psn, ExecKind::Write);
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
            self.cur = Some(InMsg::Write { va, dma_len, off: off + payload.len() as u64 });
        }
    }
}
