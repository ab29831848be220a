//! Posting and polling with owned values: [`Nic::post_send`] / [`Nic::post_recv`] encode
//! work requests through `hematite_model::desc`, [`Nic::poll_cq`] decodes completions, the
//! waits (blocking and async) sleep on the CQ's interrupt, [`Nic::poll_events`] reads the
//! event queue. The allocation-free variants the verbs provider uses are in `fastpath.rs`.

use super::objects::{purge_spent, retire, CqInner, CqState};
use super::shared::db;
use super::{AsyncEvent, Cq, Cqe, Nic, Qp, RecvWr, SendWr, WcOpcode, WcStatus};
use crate::{regs, Error, Result};
use hematite_model::desc;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{fence, Ordering};
use std::time::{Duration, Instant};

/// A work queue's ring as posting sees it: its buffer and geometry, the producer index and
/// the count of entries the device is done with, and its doorbell register.
struct Ring<'a> {
    buf: &'a crate::mem::DmaBuf,
    stride: usize,
    log: u8,
    pi: &'a std::sync::atomic::AtomicU32,
    done: &'a std::sync::atomic::AtomicU32,
    db: u16,
    qpn: u32,
}

impl Nic {
    /// Posts send WRs (one doorbell for the batch). Nothing of a WR that fails validation is
    /// posted, nor anything after it; the WRs before it are (and the doorbell rung for them).
    pub fn post_send(&self, qp: &Qp, wrs: &[SendWr]) -> Result<()> {
        let q = &qp.0;
        let _g = q.sq_lock.lock();
        let ring = Ring { buf: &q.sq, stride: q.sq_stride, log: q.sq_log, pi: &q.trk.sq_pi, done: &q.trk.sq_done, db: regs::HM_REG_DB_SQ, qpn: q.qpn };
        self.post_ring(ring, wrs, |wr| {
            if wr.sgl.len() > q.caps.max_send_sge as usize && !wr.inline {
                return Err(Error::inval(format!("{} SGEs (QP allows {})", wr.sgl.len(), q.caps.max_send_sge)));
            }
            let inline = if wr.inline { Some(self.gather_inline(wr, q.caps.max_inline_data)?) } else { None };
            desc::encode_send_wqe(wr, q.sq_stride, inline.as_deref()).map_err(|e| Error::inval(format!("send WR: {e}")))
        })
    }

    /// Writes the WQE `encode` makes of each of `wrs` into `ring` and rings its doorbell once
    /// for the batch. A full ring or a WR `encode` refuses ends the batch: that error is
    /// returned after the doorbell for the WQEs before it.
    fn post_ring<W>(&self, ring: Ring<'_>, wrs: &[W], mut encode: impl FnMut(&W) -> Result<Vec<u8>>) -> Result<()> {
        let mut pi = ring.pi.load(Ordering::Relaxed);
        let slots = 1u32 << ring.log;
        let mut posted = 0;
        let mut err = None;
        let mut last = Vec::new();
        for wr in wrs {
            if pi.wrapping_sub(ring.done.load(Ordering::Acquire)) >= slots {
                err = Some(Error::QueueFull);
                break;
            }
            let bytes = match encode(wr) {
                Ok(b) => b,
                Err(e) => {
                    err = Some(e);
                    break;
                }
            };
            let slot = (pi & (slots - 1)) as usize;
            ring.buf.write(slot * ring.stride, &bytes)?;
            pi = pi.wrapping_add(1);
            posted += 1;
            last = bytes;
        }
        if posted > 0 {
            ring.pi.store(pi, Ordering::Release);
            fence(Ordering::SeqCst);
            // one send WQE alone also goes through the push window, ahead of its doorbell
            if posted == 1 && ring.db == regs::HM_REG_DB_SQ && self.sh.push && desc::wqe_fits_push(&last) {
                let w: &[u8; desc::PUSH_BYTES] = last[..desc::PUSH_BYTES].try_into().expect("a slot holds a push");
                self.sh.dev.push64(ring.qpn, pi.wrapping_sub(1) as u16, w)?;
            }
            self.sh.dev.write32(ring.db as u64, db::qp(pi, ring.qpn))?;
        }
        err.map_or(Ok(()), Err)
    }

    fn gather_inline(&self, wr: &SendWr, max: u32) -> Result<Vec<u8>> {
        let total: u64 = wr.sgl.iter().map(|s| s.len as u64).sum();
        if total > max as u64 {
            return Err(Error::inval(format!("{total} inline bytes (QP allows {max})")));
        }
        let mrs = self.sh.mrs.lock().unwrap();
        let mut d = Vec::with_capacity(total as usize);
        for s in &wr.sgl {
            let (base, len) = *mrs.get(&s.lkey).ok_or_else(|| Error::inval(format!("inline SGE lkey {:#x} is not a registered MR", s.lkey)))?;
            if s.addr < base || s.addr.checked_add(s.len as u64).is_none_or(|e| e > base + len) {
                return Err(Error::inval(format!("inline SGE {:#x}+{} outside its MR", s.addr, s.len)));
            }
            let start = d.len();
            d.resize(start + s.len as usize, 0);
            // SAFETY: the range lies inside an MR registered through this driver, whose memory
            // is owned by the MR (alloc_mr) or promised live by the caller of reg_mr_raw.
            unsafe { std::ptr::copy_nonoverlapping(s.addr as *const u8, d[start..].as_mut_ptr(), s.len as usize) };
        }
        Ok(d)
    }

    /// Posts receive WRs (one doorbell per WR batch).
    pub fn post_recv(&self, qp: &Qp, wrs: &[RecvWr]) -> Result<()> {
        let q = &qp.0;
        let _g = q.rq_lock.lock();
        let ring = Ring { buf: &q.rq, stride: q.rq_stride, log: q.rq_log, pi: &q.trk.rq_pi, done: &q.trk.rq_done, db: regs::HM_REG_DB_RQ, qpn: q.qpn };
        self.post_ring(ring, wrs, |wr| {
            if wr.sgl.len() > q.caps.max_recv_sge as usize {
                return Err(Error::inval(format!("{} receive SGEs (QP allows {})", wr.sgl.len(), q.caps.max_recv_sge)));
            }
            desc::encode_recv_wqe(wr, q.rq_stride).map_err(|e| Error::inval(format!("receive WR: {e}")))
        })
    }

    /// (After a fatal device error the doorbell goes nowhere, and that is no error: the CQ's
    /// entries are still read, and its flushes made, by the host.)
    #[inline(never)]
    pub(super) fn cq_doorbell(&self, cq: &CqInner, ci: u32, arm: u32) -> Result<()> {
        match self.sh.dev.write32(regs::HM_REG_DB_CQ as u64, db::cq(ci, arm, cq.cqn)) {
            Err(_) if self.sh.check_fatal() => Ok(()),
            r => r,
        }
    }

    /// The entry at the consumer index if the device has written it (its owner bit matches the
    /// pass over the ring); the consumer index is not advanced.
    pub(super) fn peek_entry(c: &CqInner, st: &CqState) -> Result<Option<[u8; desc::CQE_BYTES]>> {
        let size = 1u32 << c.log;
        let off = (st.ci & (size - 1)) as usize * desc::CQE_BYTES;
        let phase = (st.ci >> c.log) & 1 == 0;
        // the owner bit is the entry's last byte, which the device writes last
        if (c.ring.read_u64(off + desc::CQE_BYTES - 8)? >> 63 == 1) != phase {
            return Ok(None);
        }
        fence(Ordering::Acquire);
        let mut e = [0u8; desc::CQE_BYTES];
        c.ring.read(off, &mut e)?;
        Ok(Some(e))
    }

    /// Tells the device the consumer index once `every` entries were consumed since last time.
    fn ack_entries(&self, c: &CqInner, st: &mut CqState, every: u32) -> Result<()> {
        if st.ci.wrapping_sub(st.ci_told) >= every {
            self.cq_doorbell(c, st.ci, 0)?;
            st.ci_told = st.ci;
        }
        Ok(())
    }

    /// Takes up to `max` completions from `cq`.
    pub fn poll_cq(&self, cq: &Cq, max: usize) -> Result<Vec<Cqe>> {
        let c = &cq.0;
        let mut st = c.st.lock();
        let mut out = Vec::new();
        while out.len() < max {
            let Some(bytes) = Self::peek_entry(c, &st)? else { break };
            let (cqe, idx, _) = desc::decode_cqe(&bytes).map_err(|e| Error::Device(format!("CQ {} entry {}: {e}", c.cqn, st.ci)))?;
            st.ci = st.ci.wrapping_add(1);
            let rq = matches!(cqe.opcode, WcOpcode::Recv | WcOpcode::RecvRdmaWithImm);
            if retire(&st.qps, cqe.qpn, idx, rq, cqe.status == WcStatus::Success || cqe.status == WcStatus::WrFlushErr) {
                out.push(cqe);
            } else {
                purge_spent(&mut st.qps);
            }
        }
        self.ack_entries(c, &mut st, ((1u32 << c.log) / 4).max(1))?;
        Ok(out)
    }

    /// Arms `cq`: the next completion (or next solicited one) raises its interrupt vector.
    pub fn req_notify_cq(&self, cq: &Cq, solicited_only: bool) -> Result<()> {
        let st = cq.0.st.lock();
        self.cq_doorbell(&cq.0, st.ci, if solicited_only { 2 } else { 1 })
    }

    /// One step of the waits below: polls `cq`; when it is empty, arms it and polls once more
    /// (a completion that landed before the arm raised nothing). Empty: armed, sleep on the
    /// vector's eventfd.
    fn poll_or_arm(&self, cq: &Cq, max: usize) -> Result<Vec<Cqe>> {
        let got = self.poll_cq(cq, max)?;
        if !got.is_empty() {
            return Ok(got);
        }
        self.req_notify_cq(cq, false)?;
        self.poll_cq(cq, max)
    }

    /// Blocks until `cq` has a completion or `timeout` passes (arms the CQ and sleeps on its
    /// interrupt's eventfd). Returns what was polled (empty on timeout).
    pub fn wait_cq(&self, cq: &Cq, max: usize, timeout: Duration) -> Result<Vec<Cqe>> {
        let fd = self.vector_fd(cq.vector())?;
        let t0 = Instant::now();
        loop {
            let got = self.poll_or_arm(cq, max)?;
            if !got.is_empty() {
                return Ok(got);
            }
            let left = timeout.saturating_sub(t0.elapsed());
            if left.is_zero() {
                return Ok(Vec::new());
            }
            let mut p = libc::pollfd { fd: fd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
            // CQs on one vector share its eventfd, and another waiter may consume the wake-up:
            // sleep in slices of at most 50 ms and poll again.
            // SAFETY: one valid pollfd.
            unsafe { libc::poll(&mut p, 1, left.as_millis().min(50) as i32) };
            drain_eventfd(fd.as_raw_fd());
        }
    }

    /// Async twin of [`Nic::wait_cq`] (tokio): waits for the CQ's interrupt without blocking
    /// the runtime's thread.
    pub async fn wait_cq_async(&self, cq: &Cq, max: usize) -> Result<Vec<Cqe>> {
        let fd = self.vector_fd(cq.vector())?;
        // A duplicate per wait, so that concurrent waits on one vector register distinct
        // descriptors with the runtime.
        // SAFETY: dup(2) of a descriptor we hold; the result is checked and owned below.
        let d = unsafe { libc::dup(fd.as_raw_fd()) };
        if d < 0 {
            return Err(Error::last_os("dup"));
        }
        // SAFETY: a new descriptor nobody else owns.
        let dup = unsafe { OwnedFd::from_raw_fd(d) };
        // SAFETY: the AsyncFd owns the duplicate, so it stays open while registered.
        let afd = unsafe { tokio::io::unix::AsyncFd::register_with_interest(dup, tokio::io::Interest::READABLE) }
            .map_err(|e| Error::sys("AsyncFd", e.into()))?;
        loop {
            let got = self.poll_or_arm(cq, max)?;
            if !got.is_empty() {
                return Ok(got);
            }
            // bounded, like wait_cq: another waiter on the vector may take the wake-up
            if let Ok(g) = tokio::time::timeout(Duration::from_millis(50), afd.readable()).await {
                let mut g = g.map_err(|e| Error::sys("eventfd wait", e))?;
                drain_eventfd(fd.as_raw_fd());
                g.clear_ready();
            }
        }
    }

    /// Asynchronous events waiting in the event queue.
    pub fn poll_events(&self) -> Result<Vec<AsyncEvent>> {
        let Some(eq) = &self.eq else { return Err(Error::NotSupported("opened without an event queue".into())) };
        let c = &eq.0;
        // QP handles taken below: dropped after the queue's lock (declared first, dropped
        // last), since a QP's last handle destroys it, which looks at this queue
        let mut held = Vec::new();
        let mut st = c.st.lock();
        let mut out = Vec::new();
        while let Some(bytes) = Self::peek_entry(c, &st)? {
            let (ev, _) = desc::decode_event(&bytes).map_err(|e| Error::Device(format!("event entry {}: {e}", st.ci)))?;
            if let AsyncEvent::QpFatal(n) = ev {
                // one of a destroyed QP of this number (see Shared::dead_fatal)
                let dead = {
                    let mut d = self.sh.dead_fatal.lock().unwrap();
                    match d.get_mut(&n) {
                        Some(k) => {
                            *k -= 1;
                            if *k == 0 {
                                d.remove(&n);
                            }
                            true
                        }
                        None => false,
                    }
                };
                // (the map's lock is released before the QP is looked at: this may be the QP's
                // last handle, whose drop takes that lock)
                let q = if dead { None } else { self.sh.qps.lock().unwrap().get(&n).and_then(|w| w.upgrade()) };
                if let Some(q) = q {
                    // one from before the QP's last RESET says nothing of the QP now (see
                    // WqTrack::stale_fatal); it is still delivered
                    if q.trk.stale_fatal.load(Ordering::Relaxed) != 0 {
                        q.trk.stale_fatal.fetch_sub(1, Ordering::Relaxed);
                    } else {
                        q.trk.errored.store(true, Ordering::Release);
                    }
                    held.push(q);
                }
            }
            out.push(ev);
            st.ci = st.ci.wrapping_add(1);
        }
        self.ack_entries(c, &mut st, 1)?;
        Ok(out)
    }
}

/// Consumes a vector's pending wake-ups (reads its non-blocking eventfd's counter; nothing
/// pending reads nothing).
fn drain_eventfd(fd: std::os::fd::RawFd) {
    let mut v = 0u64;
    // SAFETY: reading 8 bytes into a u64 from a non-blocking eventfd.
    unsafe { libc::read(fd, &mut v as *mut u64 as *mut libc::c_void, 8) };
}
