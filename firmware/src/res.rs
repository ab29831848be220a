//! Resource tables: protection domains, CQs, MRs (with their rotating key tags), QPs and the
//! GID table; fixed capacity (no heap on the core), effective limits from the engine's CAPS /
//! MR_LOG words, allocation, and reference counts (a CQ is used by QPs, a PD by MRs and QPs).
//!
//! The QP and CQ records are [`Slab`]s: on the control core they live in XMEM (section
//! `.xmem`, 1 MiB, never cleared), with the in-use bitmap in DMEM's .bss; the rest of the
//! tables are in .bss.

use crate::qp::QpState;

/// Firmware table capacities (the engine's tables may be smaller: [`Limits`]). QPs and CQs
/// match the engine's 4096-entry tables (their records are in XMEM); MRs keep 4 bytes each
/// in DMEM.
pub const FW_MAX_QP: usize = 4096;
pub const FW_MAX_CQ: usize = 4096;
pub const FW_MAX_MR: usize = 4096;
pub const FW_MAX_PD: usize = 256;
/// QPNs 0 and 1 (the IB special QPs) are never allocated.
pub const FIRST_QPN: usize = 2;
/// GID table entries.
pub const GID_TBL_LEN: usize = 4;

/// A protection domain (handle = index + 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pd {
    pub used: bool,
    /// MRs and QPs in this PD.
    pub refs: u16,
}

/// A completion queue (CQN = index; in use: [`Slab::used`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cq {
    pub log_size: u8,
    pub irq_vec: u8,
    pub base: u64,
    /// QPs using it (send or receive; a QP using it for both counts twice).
    pub refs: u16,
}

impl Cq {
    pub const ZERO: Cq = Cq { log_size: 0, irq_vec: 0, base: 0, refs: 0 };
}

/// An MR (key = index << 8 | tag).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mr {
    pub used: bool,
    /// Tag of the current (or last) key of this index; the next one is `tag + 1` (skipping 0).
    pub tag: u8,
    /// PD handle.
    pub pd: u16,
}

/// A GID table entry: our address and its MAC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gid {
    pub valid: bool,
    /// GID bytes as 4 big-endian words.
    pub gid: [u32; 4],
    /// MAC as a 48-bit number.
    pub mac: u64,
}

/// Address vector as set by MODIFY_QP (with the source resolved from the GID table then).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Av {
    pub sgid_index: u8,
    pub dgid: [u32; 4],
    pub dmac: u64,
    pub hop_limit: u8,
    pub traffic_class: u8,
    pub flow_label: u32,
    /// As requested (0 = derived from the QPN).
    pub udp_sport: u16,
    pub ipv6: bool,
    /// Source GID (from the GID table when the AV was set).
    pub sgid: [u32; 4],
    pub smac: u64,
}

/// QP attributes set by MODIFY_QP (ibverbs values).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpAttr {
    pub access: u32,
    pub pkey_index: u16,
    pub port: u8,
    pub path_mtu: u8,
    pub timeout: u8,
    pub retry_cnt: u8,
    pub rnr_retry: u8,
    pub min_rnr_timer: u8,
    pub max_rd_atomic: u8,
    pub max_dest_rd_atomic: u8,
    pub en_sqd_async_notify: u8,
    pub rq_psn: u32,
    pub sq_psn: u32,
    pub dest_qpn: u32,
    pub av: Av,
    /// The standard ACK timeout alone (no adaptive early retransmission).
    pub std_timer: bool,
}

/// Queue capacities of a QP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpCap {
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
    pub max_send_sge: u32,
    pub max_recv_sge: u32,
    pub max_inline: u32,
}

/// A QP (its QPN: [`Tables::qpn_of`] its entry; in use: [`Slab::used`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Qp {
    pub state: QpState,
    pub pd: u16,
    pub send_cq: u16,
    pub recv_cq: u16,
    pub sq_base: u64,
    pub rq_base: u64,
    pub sq_log_size: u8,
    pub sq_log_stride: u8,
    pub rq_log_size: u8,
    pub rq_log_stride: u8,
    /// UC (else RC).
    pub uc: bool,
    pub cap: QpCap,
    pub attr: QpAttr,
}

impl Av {
    pub const ZERO: Av = Av {
        sgid_index: 0,
        dgid: [0; 4],
        dmac: 0,
        hop_limit: 0,
        traffic_class: 0,
        flow_label: 0,
        udp_sport: 0,
        ipv6: false,
        sgid: [0; 4],
        smac: 0,
    };
}

impl QpAttr {
    pub const ZERO: QpAttr = QpAttr {
        access: 0,
        pkey_index: 0,
        port: 0,
        path_mtu: 0,
        timeout: 0,
        retry_cnt: 0,
        rnr_retry: 0,
        min_rnr_timer: 0,
        max_rd_atomic: 0,
        max_dest_rd_atomic: 0,
        en_sqd_async_notify: 0,
        rq_psn: 0,
        sq_psn: 0,
        dest_qpn: 0,
        av: Av::ZERO,
        std_timer: false,
    };
}

/// A QP's attributes but the address vector: what MODIFY_QP keeps to put back when the command
/// fails. Copying the whole `QpAttr` costs a `memcpy` of about 600 control-core cycles; these
/// fields are copied one by one, and the address vector only when the command sets it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpAttrUndo {
    access: u32,
    pkey_index: u16,
    port: u8,
    path_mtu: u8,
    timeout: u8,
    retry_cnt: u8,
    rnr_retry: u8,
    min_rnr_timer: u8,
    max_rd_atomic: u8,
    max_dest_rd_atomic: u8,
    en_sqd_async_notify: u8,
    rq_psn: u32,
    sq_psn: u32,
    dest_qpn: u32,
    std_timer: bool,
}

impl QpAttrUndo {
    /// The fields of `a` but its address vector.
    #[inline(always)]
    pub fn of(a: &QpAttr) -> QpAttrUndo {
        // (a QpAttr built field by field: a field added to QpAttr and not here is a compile error)
        let QpAttr {
            access,
            pkey_index,
            port,
            path_mtu,
            timeout,
            retry_cnt,
            rnr_retry,
            min_rnr_timer,
            max_rd_atomic,
            max_dest_rd_atomic,
            en_sqd_async_notify,
            rq_psn,
            sq_psn,
            dest_qpn,
            av: _,
            std_timer,
        } = *a;
        QpAttrUndo {
            access,
            pkey_index,
            port,
            path_mtu,
            timeout,
            retry_cnt,
            rnr_retry,
            min_rnr_timer,
            max_rd_atomic,
            max_dest_rd_atomic,
            en_sqd_async_notify,
            rq_psn,
            sq_psn,
            dest_qpn,
            std_timer,
        }
    }

    /// Puts them back into `a` (its address vector stays).
    #[inline(always)]
    pub fn put(&self, a: &mut QpAttr) {
        a.access = self.access;
        a.pkey_index = self.pkey_index;
        a.port = self.port;
        a.path_mtu = self.path_mtu;
        a.timeout = self.timeout;
        a.retry_cnt = self.retry_cnt;
        a.rnr_retry = self.rnr_retry;
        a.min_rnr_timer = self.min_rnr_timer;
        a.max_rd_atomic = self.max_rd_atomic;
        a.max_dest_rd_atomic = self.max_dest_rd_atomic;
        a.en_sqd_async_notify = self.en_sqd_async_notify;
        a.rq_psn = self.rq_psn;
        a.sq_psn = self.sq_psn;
        a.dest_qpn = self.dest_qpn;
        a.std_timer = self.std_timer;
    }
}

impl Qp {
    /// RC or UC.
    pub fn qpt(&self) -> hematite_abi::qp::QpType {
        if self.uc {
            hematite_abi::qp::QpType::Uc
        } else {
            hematite_abi::qp::QpType::Rc
        }
    }

    pub const ZERO: Qp = Qp {
        state: QpState::Reset,
        pd: 0,
        send_cq: 0,
        recv_cq: 0,
        sq_base: 0,
        rq_base: 0,
        sq_log_size: 0,
        sq_log_stride: 0,
        rq_log_size: 0,
        rq_log_stride: 0,
        uc: false,
        cap: QpCap { max_send_wr: 0, max_recv_wr: 0, max_send_sge: 0, max_recv_sge: 0, max_inline: 0 },
        attr: QpAttr::ZERO,
    };
}

/// Effective numbers of table entries (firmware capacity and engine size, whichever is less).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// QP entries, all usable (QPNs 2..qps, and qps and qps + 1 for entries 0 and 1).
    pub qps: usize,
    /// log2 of the engine's QP table (CAPS), whose size decides the QPNs of entries 0 and 1
    /// (`hematite_abi::qp::qpn_swap`); `qps` may be smaller (the firmware's own capacity).
    pub qp_log: u32,
    pub cqs: usize,
    pub mrs: usize,
    pub pds: usize,
}

/// Bitmap words of a table of `n` entries.
pub const fn bitmap_words(n: usize) -> usize {
    n.div_ceil(32)
}

/// A table of up to `N` records of `T` (`W` = [`bitmap_words`]`(N)`), for records too large
/// for DMEM. Which entries are in use is a bitmap kept here; the records themselves are in
/// storage that is never cleared (XMEM on the control core, a vector elsewhere), so an entry
/// is written whole when it is taken ([`Slab::insert`]) and only entries in use are read.
pub struct Slab<T: Copy + 'static, const N: usize, const W: usize> {
    used: [u32; W],
    #[cfg(target_arch = "riscv32")]
    store: *mut T,
    #[cfg(not(target_arch = "riscv32"))]
    store: alloc::vec::Vec<T>,
}

impl<T: Copy + 'static, const N: usize, const W: usize> Slab<T, N, W> {
    const CHECK: () = assert!(W == bitmap_words(N));

    /// No entry in use, no storage yet ([`Slab::attach`] gives it).
    pub const fn new() -> Self {
        let () = Self::CHECK;
        Slab {
            used: [0; W],
            #[cfg(target_arch = "riscv32")]
            store: core::ptr::null_mut(),
            #[cfg(not(target_arch = "riscv32"))]
            store: alloc::vec::Vec::new(),
        }
    }

    /// Gives the storage: `N` records at `store`, which nothing else uses (on the control core,
    /// the XMEM array of this table). Every entry becomes free.
    #[cfg(target_arch = "riscv32")]
    pub fn attach(&mut self, store: *mut T, _zero: T) {
        self.store = store;
        self.used = [0; W];
    }

    /// Gives the storage (host builds: a vector of `N` copies of `zero`). Every entry becomes
    /// free.
    #[cfg(not(target_arch = "riscv32"))]
    pub fn attach(&mut self, _store: *mut T, zero: T) {
        self.store = alloc::vec![zero; N];
        self.used = [0; W];
    }

    /// Whether entry `i` is in use.
    pub fn used(&self, i: usize) -> bool {
        i < N && self.used.get(i / 32).is_some_and(|w| w >> (i % 32) & 1 != 0)
    }

    /// Entry `i`, if in use.
    pub fn get(&self, i: usize) -> Option<&T> {
        if !self.used(i) {
            return None;
        }
        #[cfg(target_arch = "riscv32")]
        // SAFETY: i < N, `store` holds N records (attach), and entry i was written whole by
        // insert before its bit was set.
        return Some(unsafe { &*self.store.add(i) });
        #[cfg(not(target_arch = "riscv32"))]
        return self.store.get(i);
    }

    /// Entry `i`, if in use.
    pub fn get_mut(&mut self, i: usize) -> Option<&mut T> {
        if !self.used(i) {
            return None;
        }
        #[cfg(target_arch = "riscv32")]
        // SAFETY: as get; &mut self makes the reference unique.
        return Some(unsafe { &mut *self.store.add(i) });
        #[cfg(not(target_arch = "riscv32"))]
        return self.store.get_mut(i);
    }

    /// Takes entry `i` with record `v`; false (and nothing taken) when `i` is not below `N` or
    /// the slab has no storage yet.
    pub fn insert(&mut self, i: usize, v: T) -> bool {
        if i >= N {
            return false;
        }
        #[cfg(target_arch = "riscv32")]
        {
            if self.store.is_null() {
                return false;
            }
            // SAFETY: i < N and `store` (not null) holds N records (attach); a write of a whole
            // record needs no initialised memory behind it.
            unsafe { self.store.add(i).write(v) };
        }
        #[cfg(not(target_arch = "riscv32"))]
        match self.store.get_mut(i) {
            Some(e) => *e = v,
            None => return false,
        }
        if let Some(w) = self.used.get_mut(i / 32) {
            *w |= 1 << (i % 32);
        }
        true
    }

    /// Frees entry `i`.
    pub fn remove(&mut self, i: usize) {
        if let Some(w) = self.used.get_mut(i / 32) {
            *w &= !(1 << (i % 32));
        }
    }

    /// Entries in use.
    pub fn count(&self) -> usize {
        self.used.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// The first free entry in `[lo, hi)` at or after `from` (wrapping to `lo`), a bitmap
    /// word at a time.
    pub fn free_from(&self, lo: usize, hi: usize, from: usize) -> Option<usize> {
        let hi = hi.min(N);
        if lo >= hi {
            return None;
        }
        let from = if (lo..hi).contains(&from) { from } else { lo };
        self.scan(from, hi).or_else(|| self.scan(lo, from))
    }

    fn scan(&self, mut i: usize, hi: usize) -> Option<usize> {
        while i < hi {
            let w = *self.used.get(i / 32)? >> (i % 32);
            if w == u32::MAX >> (i % 32) {
                // the rest of this word is in use
                i = (i / 32 + 1) * 32;
                continue;
            }
            let j = i + (!w).trailing_zeros() as usize;
            return (j < hi).then_some(j);
        }
        None
    }
}

// Host builds (the tests snapshot the tables to check that a refused command changed
// nothing): two slabs are equal when the same entries are in use with the same records.
#[cfg(not(target_arch = "riscv32"))]
impl<T: Copy + PartialEq + 'static, const N: usize, const W: usize> PartialEq for Slab<T, N, W> {
    fn eq(&self, o: &Self) -> bool {
        self.used == o.used && (0..N).filter(|&i| self.used(i)).all(|i| self.get(i) == o.get(i))
    }
}

#[cfg(not(target_arch = "riscv32"))]
impl<T: Copy + Eq + 'static, const N: usize, const W: usize> Eq for Slab<T, N, W> {}

#[cfg(not(target_arch = "riscv32"))]
impl<T: Copy + 'static, const N: usize, const W: usize> Clone for Slab<T, N, W> {
    fn clone(&self) -> Self {
        Slab { used: self.used, store: self.store.clone() }
    }
}

#[cfg(not(target_arch = "riscv32"))]
impl<T: Copy + core::fmt::Debug + 'static, const N: usize, const W: usize> core::fmt::Debug for Slab<T, N, W> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_map().entries((0..N).filter_map(|i| self.get(i).map(|e| (i, e)))).finish()
    }
}

/// The QP records.
pub type QpSlab = Slab<Qp, FW_MAX_QP, { bitmap_words(FW_MAX_QP) }>;
/// The CQ records.
pub type CqSlab = Slab<Cq, FW_MAX_CQ, { bitmap_words(FW_MAX_CQ) }>;

#[cfg(target_arch = "riscv32")]
mod xmem {
    use super::{Cq, Qp, FW_MAX_CQ, FW_MAX_QP};
    use core::mem::MaybeUninit;
    // The records in XMEM (NOLOAD, never cleared): reached only through the one Tables of the
    // firmware (Tables::attach_storage, called once by Firmware::init).
    #[link_section = ".xmem"]
    pub static mut QPS: MaybeUninit<[Qp; FW_MAX_QP]> = MaybeUninit::uninit();
    #[link_section = ".xmem"]
    pub static mut CQS: MaybeUninit<[Cq; FW_MAX_CQ]> = MaybeUninit::uninit();
}

/// All resource tables.
#[cfg_attr(not(target_arch = "riscv32"), derive(Debug, Clone, PartialEq, Eq))]
pub struct Tables {
    pub pds: [Pd; FW_MAX_PD],
    pub cqs: CqSlab,
    pub mrs: [Mr; FW_MAX_MR],
    pub qps: QpSlab,
    pub gids: [Gid; GID_TBL_LEN],
    pub limits: Limits,
    /// Where the next QPN / MR index search starts (round robin, so numbers are not reused
    /// at once).
    pub next_qp: usize,
    pub next_mr: usize,
}

/// Entries of a table of 2^log entries capped at `cap` (a log of 16 or more means "at least
/// 65536"; control-bus indices are 16 bits).
pub fn entries(log: u32, cap: usize) -> usize {
    if log >= 16 {
        cap.min(1 << 16)
    } else {
        cap.min(1usize << log)
    }
}

impl Tables {
    pub const ZERO: Tables = Tables {
        pds: [Pd { used: false, refs: 0 }; FW_MAX_PD],
        cqs: Slab::new(),
        mrs: [Mr { used: false, tag: 0, pd: 0 }; FW_MAX_MR],
        qps: Slab::new(),
        gids: [Gid { valid: false, gid: [0; 4], mac: 0 }; GID_TBL_LEN],
        limits: Limits { qps: 0, qp_log: 0, cqs: 0, mrs: 0, pds: 0 },
        next_qp: 0,
        next_mr: 0,
    };

    /// Gives the QP and CQ tables their storage (XMEM on the control core); every QP and CQ
    /// becomes free. Called once, by [`crate::Firmware::init`].
    pub fn attach_storage(&mut self) {
        // (the XMEM arrays are used by this one Tables only: the firmware has one, and init
        // attaches it once; raw pointers, no reference to the uninitialised memory)
        #[cfg(target_arch = "riscv32")]
        {
            self.qps.attach(core::ptr::addr_of_mut!(xmem::QPS) as *mut Qp, Qp::ZERO);
            self.cqs.attach(core::ptr::addr_of_mut!(xmem::CQS) as *mut Cq, Cq::ZERO);
        }
        #[cfg(not(target_arch = "riscv32"))]
        {
            self.qps.attach(core::ptr::null_mut(), Qp::ZERO);
            self.cqs.attach(core::ptr::null_mut(), Cq::ZERO);
        }
    }

    /// Sets the limits from the CAPS word and the MR_LOG word.
    pub fn set_limits(&mut self, caps: u32, mr_log: u32) {
        let qps = entries(caps >> 24, FW_MAX_QP);
        self.limits = Limits {
            qps,
            qp_log: (caps >> 24).min(16),
            cqs: entries((caps >> 16) & 0xFF, FW_MAX_CQ),
            mrs: entries(mr_log, FW_MAX_MR),
            pds: FW_MAX_PD,
        };
    }

    /// Reported maximum number of QPs: every entry of the table (entries 0 and 1 answer to
    /// the QPNs above it, `hematite_abi::qp::qpn_swap`).
    pub fn max_qp(&self) -> usize {
        self.limits.qps
    }

    /// The QPN of QP entry `i`.
    pub fn qpn_of(&self, i: usize) -> u32 {
        hematite_abi::qp::qpn_of_entry(i as u32, self.limits.qp_log)
    }

    /// A used PD by handle.
    pub fn pd(&self, handle: u32) -> Option<usize> {
        let i = usize::try_from(handle).ok()?.checked_sub(1)?;
        (i < self.limits.pds && self.pds.get(i)?.used).then_some(i)
    }

    /// A used CQ by CQN.
    pub fn cq(&self, cqn: u32) -> Option<usize> {
        let i = usize::try_from(cqn).ok()?;
        (i < self.limits.cqs && self.cqs.used(i)).then_some(i)
    }

    /// A used QP by QPN: its table entry (`hematite_abi::qp::qp_entry` for the engine's table,
    /// written here with its size, a power of two, in a few instructions; entries beyond the
    /// firmware's `qps` are not used; `qp_entry_matches_the_abi` holds the two together).
    pub fn qp(&self, qpn: u32) -> Option<usize> {
        let n = 1u32 << self.limits.qp_log;
        let e = if qpn & n.wrapping_sub(2) == 0 { qpn ^ n } else { qpn };
        (n >= 2 && (e as usize) < self.limits.qps && self.qps.used(e as usize)).then_some(e as usize)
    }

    /// A used MR by key (index and tag must match).
    pub fn mr(&self, key: u32) -> Option<usize> {
        let i = (key >> 8) as usize;
        let m = self.mrs.get(i)?;
        (i < self.limits.mrs && m.used && m.tag == key as u8).then_some(i)
    }

    /// A free PD index.
    pub fn free_pd(&self) -> Option<usize> {
        (0..self.limits.pds).find(|&i| self.pds.get(i).is_some_and(|p| !p.used))
    }

    /// A free CQ index (the lowest).
    pub fn free_cq(&self) -> Option<usize> {
        self.cqs.free_from(0, self.limits.cqs, 0)
    }

    /// A free QP entry, searching round robin from `next_qp` (the entry after the last one
    /// taken) over entries FIRST_QPN and up, whose QPNs are their numbers; entries 0 and 1
    /// (QPNs 2^n and 2^n + 1) are taken last.
    pub fn free_qp(&self) -> Option<usize> {
        if self.limits.qps < 2 {
            return None;
        }
        self.qps.free_from(FIRST_QPN, self.limits.qps, self.next_qp).or_else(|| self.qps.free_from(0, FIRST_QPN, 0))
    }

    /// A free MR index, searching round robin from `next_mr`.
    pub fn free_mr(&self) -> Option<usize> {
        let n = self.limits.mrs;
        if n == 0 {
            return None;
        }
        let start = self.next_mr % n;
        (0..n).map(|k| (start + k) % n).find(|&i| self.mrs.get(i).is_some_and(|m| !m.used))
    }
}
