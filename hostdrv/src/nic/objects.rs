//! The reference-counted objects: [`Pd`], [`Mr`], [`Cq`], [`Qp`] and what they hold (rings,
//! locks, the work-queue occupancy a QP shares with its CQs). Dropping the last handle
//! destroys the object on the device before its memory goes. They are made and destroyed by
//! the [`Nic`](super::Nic)'s control path (`control.rs`).

use super::shared::Shared;
use super::{QpCaps, Sge};
use crate::lock::SpinLock;
use crate::mem::DmaBuf;
use hematite_abi::mbox;
use std::sync::atomic::{fence, AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, Weak};

/// A handle type: a clone of the reference-counted inner object, with its `users` count.
macro_rules! handle {
    ($(#[$doc:meta])* $name:ident($inner:ident)) => {
        $(#[$doc])*
        #[derive(Clone)]
        pub struct $name(pub(super) Arc<$inner>);

        impl $name {
            /// Handles to this object alive (clones, and the QPs / MRs that use it).
            pub fn users(&self) -> usize {
                Arc::strong_count(&self.0)
            }
        }
    };
}

/// From the last handle's drop: the firmware command `op` that destroys object `id`, unless
/// the object was destroyed explicitly (`live` false).
fn destroy_if_live(sh: &Shared, live: &Mutex<bool>, op: u16, id: u32) -> crate::Result<()> {
    if *live.lock().unwrap() {
        sh.cmd(op, &[id])?;
    }
    Ok(())
}

pub(super) struct PdInner {
    pub(super) sh: Arc<Shared>,
    pub(super) id: u32,
    pub(super) live: Mutex<bool>,
}

impl Drop for PdInner {
    fn drop(&mut self) {
        let _ = destroy_if_live(&self.sh, &self.live, mbox::OP_DEALLOC_PD, self.id);
    }
}

handle!(
    /// A protection domain.
    Pd(PdInner)
);

impl Pd {
    /// The PD handle.
    pub fn id(&self) -> u32 {
        self.0.id
    }
}

pub(super) enum MrMem {
    Owned(DmaBuf),
    /// Memory the caller owns; pinned pages [addr, addr+len).
    Raw(u64, u64),
    /// Memory the caller owns, seen by the device at another address: a DMA window of its own
    /// (IOVA of the first page, length), mapped to the memory's pages.
    Translated(u64, u64),
}

impl MrMem {
    /// Undoes what registering caller-owned memory set up: its pins, or its DMA window (an
    /// owned buffer unpins itself when it is dropped). Errors are ignored.
    pub(super) fn release(&self, sh: &Shared) {
        match *self {
            MrMem::Raw(a, l) => {
                let _ = sh.pins.lock().unwrap().unpin(sh.dev.as_ref(), a, l);
            }
            MrMem::Translated(iova, l) => {
                let _ = sh.dev.dma_unmap(iova, l);
            }
            MrMem::Owned(_) => {}
        }
    }
}

pub(super) struct MrInner {
    pub(super) sh: Arc<Shared>,
    pub(super) _pd: Pd,
    pub(super) key: u32,
    pub(super) addr: u64,
    pub(super) len: u64,
    pub(super) mem: MrMem,
    pub(super) live: Mutex<bool>,
}

impl Drop for MrInner {
    fn drop(&mut self) {
        let _ = destroy_if_live(&self.sh, &self.live, mbox::OP_DEREG_MR, self.key);
        self.sh.mrs.lock().unwrap().remove(&self.key);
        self.mem.release(&self.sh);
    }
}

handle!(
    /// A registered memory region.
    Mr(MrInner)
);

impl Mr {
    pub fn lkey(&self) -> u32 {
        self.0.key
    }
    pub fn rkey(&self) -> u32 {
        self.0.key
    }
    /// First address (= IOVA).
    pub fn addr(&self) -> u64 {
        self.0.addr
    }
    pub fn len(&self) -> u64 {
        self.0.len
    }
    pub fn is_empty(&self) -> bool {
        self.0.len == 0
    }
    /// The buffer behind an MR made by [`Nic::alloc_mr`](super::Nic::alloc_mr).
    pub fn buf(&self) -> Option<&DmaBuf> {
        match &self.0.mem {
            MrMem::Owned(b) => Some(b),
            MrMem::Raw(..) | MrMem::Translated(..) => None,
        }
    }
    /// An SGE covering `off..off + len` of the region.
    pub fn sge(&self, off: u64, len: u32) -> Sge {
        Sge { addr: self.0.addr + off, len, lkey: self.0.key }
    }
}

pub(super) struct CqState {
    /// Entries consumed (the consumer index, not wrapped).
    pub(super) ci: u32,
    /// Consumer index last told to the device.
    pub(super) ci_told: u32,
    /// The work-queue trackers of the QPs completing into this CQ (a short list: usually one
    /// or two QPs), so that retiring a completion needs no global lookup.
    pub(super) qps: Vec<(u32, Arc<WqTrack>)>,
}

impl CqState {
    pub(super) fn new(ci: u32) -> CqState {
        CqState { ci, ci_told: 0, qps: Vec::new() }
    }
}

pub(super) struct CqInner {
    pub(super) sh: Arc<Shared>,
    pub(super) cqn: u32,
    pub(super) log: u8,
    pub(super) vector: u32,
    pub(super) ring: DmaBuf,
    pub(super) st: SpinLock<CqState>,
    pub(super) live: Mutex<bool>,
}

impl Drop for CqInner {
    fn drop(&mut self) {
        let _ = destroy_if_live(&self.sh, &self.live, mbox::OP_DESTROY_CQ, self.cqn);
    }
}

handle!(
    /// A completion queue.
    Cq(CqInner)
);

impl Cq {
    pub fn cqn(&self) -> u32 {
        self.0.cqn
    }
    /// Entries in the ring.
    pub fn entries(&self) -> u32 {
        1 << self.0.log
    }
    /// The interrupt vector the CQ raises when armed.
    pub fn vector(&self) -> u32 {
        self.0.vector
    }
}

/// Ring occupancy of a QP's two work queues. The producer indices are written by the posting
/// thread (under the queue's lock), the done counters by whoever polls the queue's CQ (under
/// the CQ's lock): one writer each, so plain atomics suffice and polling takes no QP lock.
#[derive(Default)]
pub(super) struct WqTrack {
    /// Send queue producer index (not wrapped).
    pub(super) sq_pi: AtomicU32,
    /// Send queue slots the device finished with (not wrapped).
    pub(super) sq_done: AtomicU32,
    pub(super) rq_pi: AtomicU32,
    pub(super) rq_done: AtomicU32,
    /// The engine moved the QP to ERR (an error completion or a QP-fatal event); the firmware
    /// learns it at the next query.
    pub(super) errored: AtomicBool,
    /// Completions of the send / receive queue from before the last transition to RESET that
    /// were still in the CQ then: they are dropped when polled (never returned), since their indices name
    /// slots of the queue as it was (a flushed WQE's completion would otherwise free a slot
    /// of the new queue that still holds a posted WQE, which the next post overwrites).
    pub(super) stale_sq: AtomicU32,
    pub(super) stale_rq: AtomicU32,
    /// QP-fatal events of this QP from before its last transition to RESET that were still in
    /// the event queue then: when the event thread takes them they must not mark the QP as
    /// moved to ERR by the engine (`errored`), or its next transition (RESET -> INIT) would be
    /// preceded by a refused move to ERR.
    pub(super) stale_fatal: AtomicU32,
    /// A marker, not a QP's tracker: a destroyed QP's completions still in one CQ when it was
    /// destroyed (`stale_sq` / `stale_rq`, both counted in that CQ's ring; no queue, nothing
    /// outstanding). It takes the QP's place on that CQ's list, so that they are dropped when
    /// polled (never returned: ConnectX providers clean a destroyed QP's completions from its
    /// CQs too), and leaves the list once they are ([`purge_spent`]); a later QP of the same
    /// number, whose tracker comes after it on the list, gets only completions that come
    /// after them in the ring.
    pub(super) dead: AtomicBool,
    /// The rings (address, log2 of the slots, stride) and the CQs, for the flush completions
    /// the driver makes itself after a fatal device error ([`Nic::poll_cq_raw`](super::Nic::poll_cq_raw)).
    pub(super) sq_ring: (usize, u8, usize),
    pub(super) rq_ring: (usize, u8, usize),
    pub(super) scqn: u32,
    pub(super) rcqn: u32,
    /// The device failed for good (a copy of `Shared::fatal` where the posting fast path
    /// already looks: [`SqPost::fatal`](super::SqPost::fatal)).
    pub(super) fatal: AtomicBool,
}

impl WqTrack {
    /// A destroyed QP's tracker with none of its completions left to drop (see `dead`).
    pub(super) fn spent(&self) -> bool {
        self.dead.load(Ordering::Acquire) && self.stale_sq.load(Ordering::Relaxed) == 0 && self.stale_rq.load(Ordering::Relaxed) == 0
    }

    pub(super) fn reset(&self) {
        for a in [&self.sq_pi, &self.sq_done, &self.rq_pi, &self.rq_done] {
            a.store(0, Ordering::Release);
        }
    }
}

pub(super) struct QpInner {
    pub(super) sh: Arc<Shared>,
    pub(super) qpn: u32,
    pub(super) qpt: hematite_abi::qp::QpType,
    pub(super) _pd: Pd,
    pub(super) _scq: Cq,
    pub(super) _rcq: Cq,
    pub(super) sq: DmaBuf,
    pub(super) rq: DmaBuf,
    pub(super) sq_log: u8,
    pub(super) sq_stride: usize,
    pub(super) rq_log: u8,
    pub(super) rq_stride: usize,
    pub(super) caps: QpCaps,
    /// Held while posting to the send / receive queue.
    pub(super) sq_lock: SpinLock<()>,
    pub(super) rq_lock: SpinLock<()>,
    pub(super) trk: Arc<WqTrack>,
    pub(super) live: Mutex<bool>,
}

impl CqInner {
    /// Of an event queue: the QP-fatal events of QP `qpn` in the ring not taken yet, less
    /// those of destroyed QPs of that number (`Shared::dead_fatal`), which come first.
    pub(super) fn events_of(&self, st: &CqState, qpn: u32) -> u32 {
        let mut probe = CqState::new(st.ci);
        let mut n = 0u32;
        for _ in 0..1u32 << self.log {
            let Ok(Some(bytes)) = crate::nic::Nic::peek_entry(self, &probe) else { break };
            if let Ok((crate::nic::AsyncEvent::QpFatal(q), _)) = hematite_model::desc::decode_event(&bytes) {
                n += u32::from(q == qpn);
            }
            probe.ci = probe.ci.wrapping_add(1);
        }
        n.saturating_sub(self.sh.dead_fatal.lock().unwrap().get(&qpn).copied().unwrap_or(0))
    }

    /// The completions of QP `qpn` in the ring that are not polled yet (the device finished
    /// writing them), less those a destroyed QP of that number still drops: (send queue,
    /// receive queue).
    pub(super) fn pending_of(&self, st: &CqState, qpn: u32) -> (u32, u32) {
        let log = self.log as u32;
        let mask = (1u32 << log) - 1;
        let base = self.ring.as_ptr() as *const u8;
        let (mut ns, mut nr) = (0u32, 0u32);
        for k in 0..=mask {
            let ci = st.ci.wrapping_add(k);
            let slot = (ci & mask) as usize * hematite_model::desc::CQE_BYTES;
            // SAFETY: slot + 32 lies inside the ring (ci is masked to the ring's size).
            if unsafe { crate::fast::CqeRaw::owner(base.add(slot)) } == ((ci >> log) & 1 != 0) {
                break;
            }
            fence(Ordering::Acquire);
            // SAFETY: as above; the owner bit says the device finished writing the entry.
            let e = unsafe { crate::fast::CqeRaw::from_slot(base.add(slot)) };
            if e.qpn == qpn {
                if e.is_rq() {
                    nr += 1;
                } else {
                    ns += 1;
                }
            }
        }
        // those that a destroyed QP of the same number (earlier on the list) drops first
        for (n, t) in &st.qps {
            // a destroyed QP's marker counts completions of this ring only
            if *n == qpn && t.dead.load(Ordering::Acquire) {
                ns = ns.saturating_sub(t.stale_sq.load(Ordering::Relaxed));
                nr = nr.saturating_sub(t.stale_rq.load(Ordering::Relaxed));
            }
        }
        (ns, nr)
    }
}

impl Drop for QpInner {
    fn drop(&mut self) {
        // Before DESTROY_QP frees the number (after it, another thread's CREATE_QP may get the
        // same number, whose entries must not be touched): the QP leaves the number map, and on
        // each of its CQs, under that CQ's lock (one at a time: two QPs may use the same two CQs
        // the other way round), its tracker is replaced by a marker that counts its completions
        // still in that ring, so that they are dropped when polled (see WqTrack::dead) and a
        // concurrent poll takes each either before the count or as counted. A completion the
        // device writes while DESTROY_QP runs is returned, as before the cleaning.
        {
            let mut m = self.sh.qps.lock().unwrap();
            if m.get(&self.qpn).is_some_and(|w| std::ptr::eq(w.as_ptr(), self)) {
                m.remove(&self.qpn);
            }
        }
        let same = Arc::ptr_eq(&self._scq.0, &self._rcq.0);
        let cqs = if same { [Some(&self._scq), None] } else { [Some(&self._scq), Some(&self._rcq)] };
        for cq in cqs.iter().flatten() {
            let mut st = cq.0.st.lock();
            let Some(k) = st.qps.iter().position(|(n, t)| *n == self.qpn && Arc::ptr_eq(t, &self.trk)) else { continue };
            let (ns, nr) = cq.0.pending_of(&st, self.qpn);
            if ns + nr > 0 {
                let marker = WqTrack::default();
                marker.stale_sq.store(ns, Ordering::Relaxed);
                marker.stale_rq.store(nr, Ordering::Relaxed);
                marker.dead.store(true, Ordering::Relaxed);
                st.qps[k].1 = Arc::new(marker);
            } else {
                st.qps.remove(k);
            }
        }
        // and its QP-fatal events still in the event queue, which a later QP of the same number
        // must not take for its own
        if let Some(eq) = self.sh.eq.get().and_then(Weak::upgrade) {
            let st = eq.st.lock();
            let n = eq.events_of(&st, self.qpn);
            if n > 0 {
                *self.sh.dead_fatal.lock().unwrap().entry(self.qpn).or_insert(0) += n;
            }
        }
        if let Err(e) = destroy_if_live(&self.sh, &self.live, mbox::OP_DESTROY_QP, self.qpn) {
            eprintln!("hostdrv: destroying QP {}: {e}", self.qpn);
        }
    }
}

handle!(
    /// An RC queue pair.
    Qp(QpInner)
);

impl Qp {
    pub fn qpn(&self) -> u32 {
        self.0.qpn
    }
    /// RC or UC.
    pub fn qp_type(&self) -> hematite_abi::qp::QpType {
        self.0.qpt
    }
    /// The capacities the device granted.
    pub fn caps(&self) -> QpCaps {
        self.0.caps
    }
}

/// Send/receive ring slots up to a completion's (`idx`, the 16-bit slot counter of the
/// completed WQE) are free again; everything before it completed too (unsignaled WQEs are
/// retired by a later signaled one). A duplicate index changes nothing. Returns whether the
/// completion goes to the caller: one from before the QP's last transition to RESET, or of a
/// destroyed QP, does not (ConnectX providers clean them from the CQ at RESET and at destroy
/// too); the caller then calls [`purge_spent`].
#[inline(always)]
pub(super) fn retire(qps: &[(u32, Arc<WqTrack>)], qpn: u32, idx: u16, rq: bool, ok: bool) -> bool {
    let Some((_, t)) = qps.iter().find(|(n, _)| *n == qpn) else { return true };
    let stale = if rq { &t.stale_rq } else { &t.stale_sq };
    if stale.load(Ordering::Relaxed) != 0 {
        // a completion from before the QP's last RESET, or of a destroyed QP (see
        // WqTrack::stale_sq, WqTrack::dead)
        stale.fetch_sub(1, Ordering::Relaxed);
        return false;
    }
    if !ok {
        t.errored.store(true, Ordering::Release);
    }
    let (pi, done) = if rq { (&t.rq_pi, &t.rq_done) } else { (&t.sq_pi, &t.sq_done) };
    let d = done.load(Ordering::Relaxed);
    let outstanding = pi.load(Ordering::Acquire).wrapping_sub(d);
    let ahead = (idx as u32).wrapping_sub(d) & 0xFFFF;
    if ahead < outstanding {
        done.store(d.wrapping_add(ahead + 1), Ordering::Release);
    }
    true
}

/// After a completion was dropped: a destroyed QP's tracker that has no completion left to
/// drop leaves the CQ's list at once, before a later QP of the same number gets a completion
/// (its tracker comes later on the list, and [`retire`] takes the first of a number).
#[cold]
#[inline(never)]
pub(super) fn purge_spent(qps: &mut Vec<(u32, Arc<WqTrack>)>) {
    qps.retain(|(_, t)| !t.spent());
}

impl std::fmt::Debug for Pd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Pd({})", self.0.id)
    }
}
impl std::fmt::Debug for Mr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Mr(key {:#x}, {:#x}+{:#x})", self.0.key, self.0.addr, self.0.len)
    }
}
impl std::fmt::Debug for Cq {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Cq({})", self.0.cqn)
    }
}
impl std::fmt::Debug for Qp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Qp({})", self.0.qpn)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn live(pi: u32) -> Arc<WqTrack> {
        let t = WqTrack::default();
        t.sq_pi.store(pi, Ordering::Relaxed);
        Arc::new(t)
    }

    #[test]
    fn stale_completions_are_dropped_then_the_live_qp_retires() {
        // a QP moved to RESET with two send completions still in its CQ
        let t = live(0);
        t.stale_sq.store(2, Ordering::Relaxed);
        t.sq_pi.store(3, Ordering::Relaxed); // three WRs posted after the RESET
        let qps = vec![(7, t.clone())];
        assert!(!retire(&qps, 7, 40, false, false), "an old completion is dropped");
        assert!(!retire(&qps, 7, 41, false, false));
        assert!(!t.errored.load(Ordering::Relaxed), "an old error completion does not mark the new QP");
        assert_eq!(t.sq_done.load(Ordering::Relaxed), 0, "no slot of the new queue freed");
        assert!(retire(&qps, 7, 1, false, true), "the new queue's completion is returned");
        assert_eq!(t.sq_done.load(Ordering::Relaxed), 2);
        assert!(retire(&qps, 9, 0, false, true), "a completion of a QP not on the list is returned");
    }

    #[test]
    fn a_destroyed_qps_completions_go_before_a_new_qp_of_the_same_number() {
        let dead = live(0);
        dead.stale_rq.store(2, Ordering::Relaxed);
        dead.dead.store(true, Ordering::Relaxed);
        let new = live(4);
        let mut qps = vec![(5, dead.clone()), (6, live(1)), (5, new.clone())];
        assert!(!dead.spent());
        assert!(!retire(&qps, 5, 0, true, false));
        purge_spent(&mut qps);
        assert_eq!(qps.len(), 3, "one completion of the destroyed QP left");
        assert!(!retire(&qps, 5, 1, true, false));
        assert!(dead.spent());
        purge_spent(&mut qps);
        assert_eq!(qps.iter().filter(|(n, _)| *n == 5).count(), 1, "the destroyed QP's tracker left the list");
        assert!(Arc::ptr_eq(&qps.iter().find(|(n, _)| *n == 5).unwrap().1, &new));
        assert!(retire(&qps, 5, 2, false, true), "the new QP's completion is returned");
        assert_eq!(new.sq_done.load(Ordering::Relaxed), 3, "and retires its slots");
        assert!(!new.errored.load(Ordering::Relaxed));
    }
}
