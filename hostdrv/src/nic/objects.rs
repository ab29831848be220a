//! The reference-counted objects: [`Pd`], [`Mr`], [`Cq`], [`Qp`] and what they hold (rings,
//! locks, the work-queue occupancy a QP shares with its CQs). Dropping the last handle
//! destroys the object on the device before its memory goes. They are made and destroyed by
//! the [`Nic`](super::Nic)'s control path (`control.rs`).

use super::shared::Shared;
use super::{QpCaps, Sge};
use crate::lock::SpinLock;
use crate::mem::DmaBuf;
use hematite_abi::mbox;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

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
    /// were still in the CQ then: they are skipped when polled, since their indices name
    /// slots of the queue as it was (a flushed WQE's completion would otherwise free a slot
    /// of the new queue that still holds a posted WQE, which the next post overwrites).
    pub(super) stale_sq: AtomicU32,
    pub(super) stale_rq: AtomicU32,
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
    pub(super) fn reset(&self) {
        for a in [&self.sq_pi, &self.sq_done, &self.rq_pi, &self.rq_done] {
            a.store(0, Ordering::Release);
        }
    }
}

pub(super) struct QpInner {
    pub(super) sh: Arc<Shared>,
    pub(super) qpn: u32,
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

impl Drop for QpInner {
    fn drop(&mut self) {
        if let Err(e) = destroy_if_live(&self.sh, &self.live, mbox::OP_DESTROY_QP, self.qpn) {
            eprintln!("hostdrv: destroying QP {}: {e}", self.qpn);
        }
        self.sh.qps.lock().unwrap().remove(&self.qpn);
        for cq in [&self._scq, &self._rcq] {
            cq.0.st.lock().qps.retain(|(n, _)| *n != self.qpn);
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
    /// The capacities the device granted.
    pub fn caps(&self) -> QpCaps {
        self.0.caps
    }
}

/// Send/receive ring slots up to a completion's (`idx`, the 16-bit slot counter of the
/// completed WQE) are free again; everything before it completed too (unsignaled WQEs are
/// retired by a later signaled one). A stale or duplicate index changes nothing.
#[inline(always)]
pub(super) fn retire(qps: &[(u32, Arc<WqTrack>)], qpn: u32, idx: u16, rq: bool, ok: bool) {
    let Some((_, t)) = qps.iter().find(|(n, _)| *n == qpn) else { return };
    let stale = if rq { &t.stale_rq } else { &t.stale_sq };
    if stale.load(Ordering::Relaxed) != 0 {
        // a completion from before the QP's last RESET (see WqTrack::stale_sq)
        stale.fetch_sub(1, Ordering::Relaxed);
        return;
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
