//! The fast path for the verbs provider: posting sessions ([`SqPost`], from [`Nic::sq_post`]
//! / [`Nic::rq_post`]) that hand out ring slots to be written in place, and polling that
//! passes raw completions to a closure ([`Nic::poll_cq_raw`]); neither allocates nor takes
//! any lock but the queue's own. After a fatal device error the driver makes the flush
//! completions itself ([`Nic::poll_cq_flushed`]).

use super::objects::{purge_spent, retire, CqState, QpInner};
use super::{Cq, Nic, Qp, QpCaps};
use crate::{regs, Error, Result};
use hematite_model::desc;
use std::sync::atomic::{fence, Ordering};

impl Nic {
    /// Starts posting to `qp`'s send queue: takes the queue's lock (nothing else), and rings
    /// the doorbell once for everything committed when [`SqPost::finish`] is called (or the
    /// poster is dropped). For the verbs provider, whose callers hand it WRs that have to be
    /// written into the ring without building intermediate values.
    #[inline]
    pub fn sq_post<'a>(&'a self, qp: &'a Qp) -> SqPost<'a> {
        self.wq_post(qp, false)
    }

    /// The receive-queue twin of [`Nic::sq_post`].
    #[inline]
    pub fn rq_post<'a>(&'a self, qp: &'a Qp) -> SqPost<'a> {
        self.wq_post(qp, true)
    }

    /// [`Nic::sq_post`] (`rq` false) or [`Nic::rq_post`]: the queue's lock and its producer index.
    #[inline(always)]
    fn wq_post<'a>(&'a self, qp: &'a Qp, rq: bool) -> SqPost<'a> {
        let q = &*qp.0;
        let (lock, pi) = if rq { (&q.rq_lock, &q.trk.rq_pi) } else { (&q.sq_lock, &q.trk.sq_pi) };
        let guard = lock.lock();
        let pi = pi.load(Ordering::Relaxed);
        SqPost { nic: self, q, _guard: guard, pi, start: pi, rq }
    }

    /// Takes up to `max` completions from `cq` without allocating: `f` gets each raw entry
    /// (codes as `hematite_model::desc` defines them); returns how many were taken. Retires
    /// the work-queue slots the completions free, like [`Nic::poll_cq`].
    #[inline]
    pub fn poll_cq_raw(&self, cq: &Cq, max: usize, mut f: impl FnMut(&crate::fast::CqeRaw)) -> Result<usize> {
        let c = &*cq.0;
        let mut st = c.st.lock();
        let log = c.log as u32;
        let mask = (1u32 << log) - 1;
        let base = c.ring.as_ptr() as *const u8;
        let mut n = 0;
        let mut ci = st.ci;
        while n < max {
            let slot = (ci & mask) as usize * desc::CQE_BYTES;
            // SAFETY: slot + 32 lies inside the ring (ci is masked to the ring's size).
            if unsafe { crate::fast::CqeRaw::owner(base.add(slot)) } == ((ci >> log) & 1 != 0) {
                break;
            }
            fence(Ordering::Acquire);
            // SAFETY: as above; the owner bit says the device finished writing the entry.
            let e = unsafe { crate::fast::CqeRaw::from_slot(base.add(slot)) };
            ci = ci.wrapping_add(1);
            if retire(&st.qps, e.qpn, e.wqe_index, e.is_rq(), e.status == desc::HM_CQE_ST_SUCCESS || e.status == desc::HM_CQE_ST_WR_FLUSH_ERR) {
                f(&e);
                n += 1;
            } else {
                purge_spent(&mut st.qps);
            }
        }
        st.ci = ci;
        if ci.wrapping_sub(st.ci_told) > mask >> 2 {
            st.ci_told = ci;
            self.cq_doorbell(c, ci, 0)?;
        }
        Ok(n)
    }

    /// After a fatal device error ([`Nic::is_fatal`]): up to `max` WR_FLUSH_ERR completions
    /// for the work requests still outstanding on the queues completing into `cq` (see
    /// `flush_fatal`); 0 while the device is fine. Call it when [`Nic::poll_cq_raw`] found
    /// nothing more (the entries the device wrote come first).
    #[inline(never)]
    pub fn poll_cq_flushed(&self, cq: &Cq, max: usize, mut f: impl FnMut(&crate::fast::CqeRaw)) -> usize {
        if !self.sh.fatal.load(Ordering::Acquire) {
            return 0;
        }
        let c = &*cq.0;
        let st = c.st.lock();
        Self::flush_fatal(&st, c.cqn, max, &mut f)
    }

    /// After a fatal device error (the CQ's own entries all taken): up to `max` completions
    /// with WR_FLUSH_ERR for the work requests still outstanding on the queues completing
    /// into this CQ, oldest first, send queues before receive queues, as the device would
    /// have flushed them (every WR, signaled or not). Returns how many were made.
    #[cold]
    #[inline(never)]
    fn flush_fatal(st: &CqState, cqn: u32, max: usize, f: &mut impl FnMut(&crate::fast::CqeRaw)) -> usize {
        let mut n = 0;
        for (qpn, t) in &st.qps {
            if t.dead.load(Ordering::Acquire) {
                // a destroyed QP's rings are gone (and nothing is outstanding on them)
                continue;
            }
            for rq in [false, true] {
                let (ring, pi, done, cq) =
                    if rq { (t.rq_ring, &t.rq_pi, &t.rq_done, t.rcqn) } else { (t.sq_ring, &t.sq_pi, &t.sq_done, t.scqn) };
                if cq != cqn {
                    continue;
                }
                let end = pi.load(Ordering::Acquire);
                let mut d = done.load(Ordering::Relaxed);
                while d != end && n < max {
                    let (base, log, stride) = ring;
                    let slot = (base + (d & ((1u32 << log) - 1)) as usize * stride) as *const u8;
                    let mut e = crate::fast::CqeRaw { qpn: *qpn, status: desc::HM_CQE_ST_WR_FLUSH_ERR, wqe_index: d as u16, ..Default::default() };
                    if rq {
                        // SAFETY: a slot of the QP's receive ring, which lives while the QP is
                        // on this CQ's list (its destructor takes it off under the CQ's lock).
                        e.wr_id = unsafe { crate::fast::read_recv_wr_id(slot) };
                        e.opcode = desc::HM_CQE_OP_RECV;
                        e.flags = crate::fast::CQE_F_RQ;
                    } else {
                        // SAFETY: as above, the send ring.
                        let (id, op) = unsafe { crate::fast::read_send_wr_id_op(slot) };
                        e.wr_id = id;
                        e.opcode = match op {
                            desc::HM_WQE_OP_WRITE | desc::HM_WQE_OP_WRITE_IMM => desc::HM_CQE_OP_RDMA_WRITE,
                            desc::HM_WQE_OP_READ => desc::HM_CQE_OP_RDMA_READ,
                            desc::HM_WQE_OP_CMP_SWAP => desc::HM_CQE_OP_CMP_SWAP,
                            desc::HM_WQE_OP_FETCH_ADD => desc::HM_CQE_OP_FETCH_ADD,
                            _ => desc::HM_CQE_OP_SEND,
                        };
                    }
                    t.errored.store(true, Ordering::Release);
                    d = d.wrapping_add(1);
                    done.store(d, Ordering::Release);
                    f(&e);
                    n += 1;
                }
            }
        }
        n
    }

    /// Whether `cq` holds an entry not polled yet (does not consume it).
    /// After a fatal device error, work requests still to be flushed count as entries.
    pub fn cq_pending(&self, cq: &Cq) -> bool {
        let c = &*cq.0;
        let st = c.st.lock();
        if matches!(Self::peek_entry(c, &st), Ok(Some(_))) {
            return true;
        }
        self.sh.fatal.load(Ordering::Acquire)
            && st.qps.iter().any(|(_, t)| {
                (t.scqn == c.cqn && t.sq_pi.load(Ordering::Acquire) != t.sq_done.load(Ordering::Acquire))
                    || (t.rcqn == c.cqn && t.rq_pi.load(Ordering::Acquire) != t.rq_done.load(Ordering::Acquire))
            })
    }
}

#[cold]
#[inline(never)]
fn cold_errno(e: Error) -> i32 {
    e.errno()
}

/// A posting session on one work queue (see [`Nic::sq_post`]): holds the queue's lock.
pub struct SqPost<'a> {
    nic: &'a Nic,
    q: &'a QpInner,
    _guard: crate::lock::SpinGuard<'a, ()>,
    pi: u32,
    start: u32,
    rq: bool,
}

impl SqPost<'_> {
    /// Bytes per slot.
    #[inline(always)]
    pub fn stride(&self) -> usize {
        if self.rq { self.q.rq_stride } else { self.q.sq_stride }
    }

    /// The capacities the device granted the QP.
    #[inline(always)]
    pub fn caps(&self) -> &QpCaps {
        &self.q.caps
    }

    /// The device has failed for good ([`Nic::check_fatal`]): nothing posted can reach it.
    /// The verbs provider refuses the post then (EIO).
    #[inline(always)]
    pub fn fatal(&self) -> bool {
        self.q.trk.fatal.load(Ordering::Relaxed)
    }

    /// The next free slot, or None when the ring is full. Write it completely (header and what
    /// the header says follows), then [`SqPost::commit`].
    #[inline(always)]
    pub fn slot(&mut self) -> Option<*mut u8> {
        let (log, done, buf, stride) = if self.rq {
            (self.q.rq_log, &self.q.trk.rq_done, &self.q.rq, self.q.rq_stride)
        } else {
            (self.q.sq_log, &self.q.trk.sq_done, &self.q.sq, self.q.sq_stride)
        };
        if self.pi.wrapping_sub(done.load(Ordering::Acquire)) >= 1u32 << log {
            return None;
        }
        let i = (self.pi & ((1u32 << log) - 1)) as usize;
        // SAFETY: i < 2^log slots of `stride` bytes: inside the ring buffer.
        Some(unsafe { buf.as_ptr().add(i * stride) })
    }

    /// Forgets every WR committed in this session: nothing is published or rung, and their
    /// slots are free again (all-or-nothing posting, `ibv_wr_complete`).
    #[inline]
    pub fn abandon(mut self) {
        self.pi = self.start;
    }

    /// The slot returned by the last [`SqPost::slot`] is complete.
    #[inline(always)]
    pub fn commit(&mut self) {
        self.pi = self.pi.wrapping_add(1);
    }

    /// Publishes what was committed and rings the doorbell once (nothing when nothing was).
    #[inline]
    pub fn finish(mut self) -> Result<()> {
        match self.ring() {
            Ok(()) => {
                self.start = self.pi;
                Ok(())
            }
            Err(e) => Err(self.unpost(e)),
        }
    }

    /// [`SqPost::finish`] for C callers: 0, or the errno of a failed doorbell write.
    #[inline(always)]
    pub fn finish_errno(mut self) -> i32 {
        match self.ring() {
            Ok(()) => {
                self.start = self.pi;
                0
            }
            Err(e) => cold_errno(self.unpost(e)),
        }
    }

    /// The doorbell did not reach the device (it is gone): the WRs of this session were not
    /// posted, and do not count as outstanding (no flush completion is made for them).
    #[cold]
    #[inline(never)]
    fn unpost(&mut self, e: Error) -> Error {
        let pi = if self.rq { &self.q.trk.rq_pi } else { &self.q.trk.sq_pi };
        pi.store(self.start, Ordering::Release);
        self.pi = self.start;
        e
    }

    /// Publishes the producer index and rings the doorbell; `start` is moved up by the caller
    /// once that succeeded.
    #[inline(always)]
    fn ring(&mut self) -> Result<()> {
        if self.pi == self.start {
            return Ok(());
        }
        let (pi, reg) = if self.rq { (&self.q.trk.rq_pi, regs::HM_REG_DB_RQ) } else { (&self.q.trk.sq_pi, regs::HM_REG_DB_SQ) };
        pi.store(self.pi, Ordering::Release);
        fence(Ordering::SeqCst);
        if !self.rq && self.pi == self.start.wrapping_add(1) && self.nic.sh.push {
            self.push_one()?;
        }
        self.nic.sh.dev.write32(reg as u64, super::shared::db::qp(self.pi, self.q.qpn))
    }
}

impl SqPost<'_> {
    /// The one WQE of this session, through the push window (the MMIO path), ahead of the
    /// doorbell, when it uses nothing beyond the push's 64 bytes (`fast::wqe_fits_push`).
    #[inline(never)]
    fn push_one(&self) -> Result<()> {
        let i = (self.start & ((1u32 << self.q.sq_log) - 1)) as usize;
        // SAFETY: the first 64 bytes of slot i of the send ring (i < 2^sq_log slots of
        // sq_stride >= 64 bytes), written by this session, which holds the queue's lock; the
        // device only reads the ring.
        let w = unsafe { &*(self.q.sq.as_ptr().add(i * self.q.sq_stride) as *const [u8; desc::PUSH_BYTES]) };
        if !crate::fast::wqe_fits_push(w) {
            return Ok(());
        }
        self.nic.sh.dev.push64(self.q.qpn, self.start as u16, w)
    }

    /// A poster dropped with WRs committed but not published ([`SqPost::finish`] not called).
    #[cold]
    #[inline(never)]
    fn ring_on_drop(&mut self) {
        match self.ring() {
            Ok(()) => self.start = self.pi,
            Err(e) => drop(self.unpost(e)),
        }
    }
}

impl Drop for SqPost<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        if self.pi != self.start {
            self.ring_on_drop();
        }
    }
}
