//! Reference model of the engine's DCQCN rate-limiter slot map (`rtl/cc/hm_dcqcn_slots.sv`,
//! docs/dcqcn.md section 11): any QPN gets one of `nslots` reaction-point / pacer entries when a
//! CNP arrives for it, freed when the reaction point releases the entry and no CNP handed to it
//! is still unreported; a QP reset detaches its slot. Cycle semantics as the RTL: the lookups
//! of a clock see the state at its start (their results are combinational in the RTL), the
//! reaction point's reports (`SlotsFeedback`) are those of the previous clock, and the
//! counters / `unmapped` / `used` are registered (visible one clock later in the RTL).

use crate::dcqcn::RpOp;

/// Shape of the map.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlotsCfg {
    /// Slots (rate limiters), >= 2.
    pub nslots: usize,
    /// QPNs 0..2^key_bits can get a slot; higher ones are refused.
    pub key_bits: u32,
}

/// One clock's inputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SlotsIn {
    /// A CNP arrived for this local QPN.
    pub cnp: Option<u32>,
    /// The requester committed a packet (QPN, bytes).
    pub tx: Option<(u32, u32)>,
    /// The QPN the requester serves (pacer query).
    pub query: u32,
    /// This QPN was reset or destroyed.
    pub detach: Option<u32>,
}

/// The reaction point's reports about the previous clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SlotsFeedback {
    /// Its operation (slot numbers as QPNs).
    pub op: RpOp,
    /// The CNP forwarded in the previous clock was dropped (its FIFO was full).
    pub cnp_dropped: bool,
}

/// One clock's combinational outputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SlotsOut {
    /// The CNP, forwarded for this slot.
    pub cnp: Option<u32>,
    /// The bytes report, forwarded for this slot.
    pub tx: Option<(u32, u32)>,
    /// The queried QP's slot (None: not rate limited).
    pub query: Option<u32>,
    /// The CNP was not applied (no free slot, or QPN out of range).
    pub unmapped: bool,
}

/// Counters (registered in the RTL).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SlotsCounters {
    /// CNPs not applied: every slot in use.
    pub no_slot: u32,
    /// CNPs not applied: QPN beyond the keys.
    pub bad_qpn: u32,
    /// Slots allocated.
    pub allocs: u32,
}

#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    used: bool,
    attached: bool,
    active: bool,
    key: u32,
    pend: u8,
}

/// The slot map.
#[derive(Debug, Clone)]
pub struct Slots {
    cfg: SlotsCfg,
    s: Vec<Slot>,
    fwd_prev: Option<u32>,
    counters: SlotsCounters,
    used_before: u32,
    pend_wrapped: bool,
}

impl Slots {
    /// An empty map (every slot unused).
    pub fn new(cfg: SlotsCfg) -> Slots {
        Slots {
            cfg,
            s: vec![Slot::default(); cfg.nslots.max(2)],
            fwd_prev: None,
            counters: SlotsCounters::default(),
            used_before: 0,
            pend_wrapped: false,
        }
    }

    fn in_range(&self, q: u32) -> bool {
        self.cfg.key_bits >= 32 || q >> self.cfg.key_bits == 0
    }

    /// The attached slot of `q` (at most one).
    pub fn lookup(&self, q: u32) -> Option<u32> {
        if !self.in_range(q) {
            return None;
        }
        self.s.iter().position(|e| e.attached && e.key == q).map(|i| i as u32)
    }

    /// One clock.
    pub fn step(&mut self, inp: &SlotsIn, fb: &SlotsFeedback) -> SlotsOut {
        let mut out = SlotsOut::default();
        self.used_before = self.s.iter().filter(|e| e.used).count() as u32;
        // CNP
        let mut alloc = None;
        let mut det_alloc = false;
        if let Some(q) = inp.cnp {
            if !self.in_range(q) {
                out.unmapped = true;
                self.counters.bad_qpn = self.counters.bad_qpn.wrapping_add(1);
            } else if let Some(h) = self.lookup(q) {
                out.cnp = Some(h);
            } else if let Some(f) = self.s.iter().position(|e| !e.used) {
                out.cnp = Some(f as u32);
                alloc = Some((f, q));
                det_alloc = inp.detach == Some(q);
                self.counters.allocs = self.counters.allocs.wrapping_add(1);
            } else {
                out.unmapped = true;
                self.counters.no_slot = self.counters.no_slot.wrapping_add(1);
            }
        }
        out.tx = inp.tx.and_then(|(q, b)| self.lookup(q).map(|s| (s, b)));
        out.query = self.lookup(inp.query);
        let det = inp.detach.and_then(|q| self.lookup(q));
        // per-slot update
        for (i, e) in self.s.iter_mut().enumerate() {
            let i = i as u32;
            let inc = out.cnp == Some(i);
            let dec_op = matches!(fb.op, RpOp::FirstCnp { qpn } | RpOp::Cnp { qpn } if qpn == i);
            let dec_drop = fb.cnp_dropped && self.fwd_prev == Some(i);
            let p = i16::from(e.pend) + i16::from(inc) - i16::from(dec_op) - i16::from(dec_drop);
            if !(0..=7).contains(&p) {
                self.pend_wrapped = true;
            }
            let pend = (p & 7) as u8;
            let first = matches!(fb.op, RpOp::FirstCnp { qpn } if qpn == i);
            let release = matches!(fb.op, RpOp::Release { qpn } if qpn == i);
            let active = (e.active || first) && !release;
            let new = alloc.is_some_and(|(f, _)| f as u32 == i);
            let attached = (e.attached && det != Some(i)) || (new && !det_alloc);
            let used = (e.used || new) && (active || pend != 0);
            e.pend = pend;
            e.active = active;
            e.used = used;
            e.attached = attached && used;
            if new {
                e.key = alloc.map_or(0, |(_, q)| q);
            }
        }
        self.fwd_prev = out.cnp;
        out
    }

    /// The counters after the last clock.
    pub fn counters(&self) -> SlotsCounters {
        self.counters
    }

    /// Slots in use at the start of the last clock (the RTL's registered `o_used`).
    pub fn used_before(&self) -> u32 {
        self.used_before
    }

    /// Slots in use now.
    pub fn used(&self) -> u32 {
        self.s.iter().filter(|e| e.used).count() as u32
    }

    /// A pend counter left 0..=7 (a reaction point reporting an outcome for a CNP it was never
    /// given, or more than 7 outstanding): the RTL's 3-bit counter would have wrapped.
    pub fn pend_wrapped(&self) -> bool {
        self.pend_wrapped
    }
}
