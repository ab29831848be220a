//! DCQCN congestion control: the cycle-level specification of the notification point
//! ([`Np`]), the reaction point ([`Rp`]) and the per-QP transmit pacer ([`Pacer`]).
//!
//! This module is written as a hardware specification, not as a network simulator: every
//! quantity is an integer of a stated width, every `step` is exactly one clock of the RTL, each
//! clock applies at most one read-modify-write to the per-QP table, and no operation loops over
//! QPs or over time. The RTL (issue 7) implements exactly this and is compared against it cycle
//! for cycle. `docs/dcqcn.md` explains the design, the widths, the parameter conversion and
//! every deviation from NVIDIA's documented behaviour; the short version:
//!
//! * **Time** is a free-running cycle counter of `time_bits` bits (32 by default) that wraps.
//!   Deadlines are compared wrap-safe: `d` is due when `(now - d) mod 2^bits < 2^(bits-1)`.
//! * **Rates** are unsigned 32-bit values in *rate units* (RU): 2^-20 bytes per clock cycle
//!   ([`RATE_FRAC`]). The pacer uses them directly; [`mbps_to_ru`] converts from Mb/s.
//! * **α** is a 10-bit fraction (0..=1023, 1024 ≙ 1.0); stage counters are 5-bit saturating.
//! * [`HwParams`] is the register set, already in hardware units;
//!   [`HwParams::from_cc`] converts the 19 firmware CC parameters (Mb/s, µs, bytes) to it with
//!   integer arithmetic only (no `u128`, no floating point), so it can move to the firmware.
//!
//! Nothing here panics on any input (out-of-range QPNs are counted and ignored, parameters
//! are clamped) and everything is deterministic.
//!
//! ```
//! use hematite_model::dcqcn::{HwParams, Rp, RpCfg, RpIn, NVIDIA_DEFAULTS};
//!
//! let p = HwParams::from_cc(&NVIDIA_DEFAULTS, 250, 100_000, 1);
//! let mut rp = Rp::new(p, RpCfg { nqp: 8, ..RpCfg::default() });
//! rp.step(&RpIn { cnp: Some(3), tx: None }); // the CNP enters the FIFO
//! let out = rp.step(&RpIn::default());       // first CNP of QP 3: activation + cut
//! let u = out.rate.unwrap();
//! assert_eq!((u.qpn, u.limited), (3, true));
//! assert_eq!(u.rate, p.max_rate - ((u64::from(p.max_rate) * 1023) >> 11) as u32); // α = 1023/1024, rate·α/2
//! ```

use std::collections::VecDeque;

include!("dcqcn_params.rs");

// ------------------------------------------------------------------------------------------
// Wrap-safe time
// ------------------------------------------------------------------------------------------

/// A free-running counter of `bits` bits (8..=32) and its wrap-safe comparisons.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Clock {
    mask: u32,
    half: u32,
}

impl Clock {
    fn new(bits: u32) -> Clock {
        let bits = bits.clamp(8, 32);
        let mask = if bits == 32 { u32::MAX } else { (1u32 << bits) - 1 };
        Clock { mask, half: 1u32 << (bits - 1) }
    }
    /// `(a - b) mod 2^bits`.
    fn age(&self, now: u32, t: u32) -> u32 {
        now.wrapping_sub(t) & self.mask
    }
    /// Deadline `d` has been reached: `(now - d) mod 2^bits < 2^(bits-1)`.
    fn due(&self, now: u32, d: u32) -> bool {
        self.age(now, d) < self.half
    }
    fn add(&self, t: u32, d: u32) -> u32 {
        t.wrapping_add(d) & self.mask
    }
    /// Longest period the deadlines may use: 2^(bits-2).
    fn period_cap(&self) -> u32 {
        self.half >> 1
    }
}

// ------------------------------------------------------------------------------------------
// Notification point
// ------------------------------------------------------------------------------------------

/// Notification point configuration (RTL parameters).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NpCfg {
    /// Number of QPs (table entries).
    pub nqp: usize,
    /// Width of the time counter (8..=32).
    pub time_bits: u32,
}

impl Default for NpCfg {
    fn default() -> NpCfg {
        NpCfg { nqp: 64, time_bits: 32 }
    }
}

/// One clock of NP input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NpIn {
    /// A CE-marked RoCE data packet was accepted for local QP `q` this cycle.
    pub ce: Option<u32>,
    /// The CNP sender cannot take a request this cycle (its queue is full).
    pub cnp_full: bool,
}

/// One clock of NP output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NpOut {
    /// Send a CNP for local QP `q` (the CNP builder addresses it to the QP's remote QPN).
    pub cnp: Option<u32>,
    /// The CE packet fell inside the QP's interval: no CNP.
    pub suppressed: bool,
    /// A CNP was due but `cnp_full` was set: nothing sent, timestamp unchanged (the next CE
    /// packet of the QP tries again).
    pub blocked: bool,
}

/// NP counters (32-bit, wrapping).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NpCounters {
    /// CNPs requested.
    pub cnps: u32,
    /// CE packets without a CNP (inside the interval).
    pub suppressed: u32,
    /// CNPs lost to `cnp_full`.
    pub blocked: u32,
    /// CE events with a QPN outside the table (ignored).
    pub bad_qpn: u32,
}

/// Notification point: per QP the time of its last CNP plus a valid bit.
///
/// Per clock: a CE event for QP q sends a CNP if q has no valid timestamp or
/// `(now − last[q]) mod 2^bits ≥ cnp_interval`, and stores `last[q] = now`. A clock without a CE
/// event scrubs one table entry (round robin): an entry older than half the counter period is
/// invalidated, so an age can never wrap past a full period (see `docs/dcqcn.md`).
#[derive(Debug, Clone)]
pub struct Np {
    interval: u32,
    clock: Clock,
    now: u32,
    last: Vec<u32>,
    valid: Vec<bool>,
    scrub: usize,
    counters: NpCounters,
}

impl Np {
    /// A reset NP (no valid entries) at time 0.
    pub fn new(params: &HwParams, cfg: NpCfg) -> Np {
        Np::with_now(params, cfg, 0)
    }

    /// A reset NP whose counter starts at `now` (to test wrap-around).
    pub fn with_now(params: &HwParams, cfg: NpCfg, now: u32) -> Np {
        let clock = Clock::new(cfg.time_bits);
        let nqp = cfg.nqp.max(1);
        Np {
            interval: params.cnp_interval.min(clock.period_cap()),
            clock,
            now: now & clock.mask,
            last: vec![0; nqp],
            valid: vec![false; nqp],
            scrub: 0,
            counters: NpCounters::default(),
        }
    }

    /// Loads a new interval register (from [`HwParams::cnp_interval`]); effective next clock.
    pub fn set_params(&mut self, params: &HwParams) {
        self.interval = params.cnp_interval.min(self.clock.period_cap());
    }

    /// The current time counter value.
    pub fn now(&self) -> u32 {
        self.now
    }

    /// The effective interval in cycles.
    pub fn interval(&self) -> u32 {
        self.interval
    }

    /// The counters.
    pub fn counters(&self) -> NpCounters {
        self.counters
    }

    /// `Some(last)` if QP q has a valid last-CNP timestamp.
    pub fn last_cnp(&self, q: u32) -> Option<u32> {
        let i = q as usize;
        match (self.valid.get(i), self.last.get(i)) {
            (Some(true), Some(t)) => Some(*t),
            _ => None,
        }
    }

    /// One clock.
    pub fn step(&mut self, inp: &NpIn) -> NpOut {
        let mut out = NpOut::default();
        let now = self.now;
        match inp.ce {
            Some(q) if (q as usize) < self.last.len() => {
                let i = q as usize;
                let due = !self.valid[i] || self.clock.age(now, self.last[i]) >= self.interval;
                if !due {
                    out.suppressed = true;
                    self.counters.suppressed = self.counters.suppressed.wrapping_add(1);
                } else if inp.cnp_full {
                    out.blocked = true;
                    self.counters.blocked = self.counters.blocked.wrapping_add(1);
                } else {
                    out.cnp = Some(q);
                    self.last[i] = now;
                    self.valid[i] = true;
                    self.counters.cnps = self.counters.cnps.wrapping_add(1);
                }
            }
            Some(_) => self.counters.bad_qpn = self.counters.bad_qpn.wrapping_add(1),
            None => {
                let i = self.scrub;
                if self.valid[i] && self.clock.age(now, self.last[i]) >= self.clock.half {
                    self.valid[i] = false;
                }
                self.scrub = if i + 1 >= self.last.len() { 0 } else { i + 1 };
            }
        }
        self.now = self.clock.add(now, 1);
        out
    }
}

// ------------------------------------------------------------------------------------------
// Reaction point
// ------------------------------------------------------------------------------------------

/// Reaction point configuration (RTL parameters, not registers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RpCfg {
    /// Number of QPs (table entries, 1..=65536).
    pub nqp: usize,
    /// CNP input FIFO depth (≥ 1).
    pub cnp_fifo_depth: usize,
    /// Transmitted-bytes FIFO depth (≥ 1).
    pub tx_fifo_depth: usize,
    /// Width of the time counter (8..=32). Periods are capped at 2^(bits−2).
    pub time_bits: u32,
}

impl Default for RpCfg {
    fn default() -> RpCfg {
        RpCfg { nqp: 64, cnp_fifo_depth: 2, tx_fifo_depth: 8, time_bits: 32 }
    }
}

/// One clock of RP input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RpIn {
    /// A valid CNP arrived for local QP q.
    pub cnp: Option<u32>,
    /// The TX scheduler transmitted a packet of `bytes` bytes (frame without FCS, 1..=65535;
    /// 0 is ignored, more is clamped) for QP q.
    pub tx: Option<(u32, u32)>,
}

/// Per-QP reaction point state (one table entry; meaningful while the QP is active).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RpQp {
    /// Current rate R_C (RU).
    pub rc: u32,
    /// Target rate R_T (RU).
    pub rt: u32,
    /// α (10-bit fraction, 0..=1023).
    pub alpha: u16,
    /// A CNP arrived since the last α update.
    pub cnp_seen: bool,
    /// A CNP arrived since the last cut: cut at the next decrease tick.
    pub dec_pending: bool,
    /// Timer increase events since the last cut (5-bit, saturating).
    pub t_stage: u8,
    /// Byte-counter increase events since the last cut (5-bit, saturating).
    pub bc_stage: u8,
    /// Bytes counted toward the next byte-counter event (25 bits, always < B).
    pub byte_cnt: u32,
    /// Next α update (time counter value).
    pub alpha_dl: u32,
    /// Next decrease tick.
    pub dec_dl: u32,
    /// Next increase-timer event.
    pub inc_dl: u32,
}

/// The three per-QP timers, in tie-break order (earliest deadline first; on equal deadlines
/// α before decrease before increase).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimerKind {
    /// α update.
    Alpha,
    /// Decrease tick (cuts if a CNP is pending).
    Decrease,
    /// Increase timer event.
    Increase,
}

/// What the RP's single per-QP operation did in one clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RpOp {
    /// No CNP, no bytes, no active QP to visit.
    #[default]
    Idle,
    /// First CNP of an idle QP: activation (and a cut unless `first_rate` is set).
    FirstCnp {
        /// QP.
        qpn: u32,
    },
    /// CNP for an active QP: `cnp_seen` and `dec_pending` set.
    Cnp {
        /// QP.
        qpn: u32,
    },
    /// Transmitted-bytes entry applied to an active QP.
    Bytes {
        /// QP.
        qpn: u32,
        /// The byte counter reached B: one increase event.
        event: bool,
    },
    /// Transmitted-bytes entry for a QP that was released meanwhile: nothing changed.
    BytesStale {
        /// QP.
        qpn: u32,
    },
    /// Timer scan visit that applied one timer action.
    Timer {
        /// QP.
        qpn: u32,
        /// Which timer.
        kind: TimerKind,
        /// For [`TimerKind::Decrease`]: a cut was applied.
        cut: bool,
    },
    /// Timer scan visit that released the QP (R_C = R_T = max, α = 0, nothing pending).
    Release {
        /// QP.
        qpn: u32,
    },
    /// Timer scan visit with nothing due.
    Visit {
        /// QP.
        qpn: u32,
    },
}

/// A rate change toward the pacer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateUpdate {
    /// QP.
    pub qpn: u32,
    /// New R_C (RU); the line rate when `limited` is false.
    pub rate: u32,
    /// The QP is rate limited (active in the RP).
    pub limited: bool,
}

/// One clock of RP output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RpOut {
    /// The operation applied this clock.
    pub op: RpOp,
    /// R_C or the limited state of a QP changed this clock.
    pub rate: Option<RateUpdate>,
    /// This clock's CNP input was dropped (FIFO full).
    pub cnp_dropped: bool,
    /// This clock's bytes input was dropped (FIFO full).
    pub tx_dropped: bool,
    /// This clock's bytes input was added to the FIFO's tail entry.
    pub tx_merged: bool,
    /// This clock's bytes input was for an inactive QP (not queued).
    pub tx_filtered: bool,
}

/// RP counters (32-bit, wrapping).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RpCounters {
    /// CNPs dropped at a full FIFO.
    pub cnp_dropped: u32,
    /// Byte reports dropped at a full FIFO.
    pub tx_dropped: u32,
    /// Byte reports merged into the FIFO tail.
    pub tx_merged: u32,
    /// Inputs with a QPN outside the table (ignored).
    pub bad_qpn: u32,
    /// QP activations (first CNPs).
    pub activations: u32,
    /// QP releases.
    pub releases: u32,
    /// Rate cuts.
    pub cuts: u32,
    /// Increase events (timer and byte counter).
    pub increases: u32,
    /// Timer actions taken a whole period or more late (the missed periods were dropped and the
    /// timer restarted from the current time).
    pub timer_skips: u32,
}

/// Reaction point for `nqp` QPs: the per-QP table, the active bitmap, the two input FIFOs and
/// the timer scan. See the module documentation and `docs/dcqcn.md` for the exact rules.
#[derive(Debug, Clone)]
pub struct Rp {
    p: HwParams,
    cfg: RpCfg,
    clock: Clock,
    now: u32,
    qps: Vec<RpQp>,
    active: Vec<u64>,
    scan: usize,
    cnp_fifo: VecDeque<u32>,
    tx_fifo: VecDeque<(u32, u32)>,
    counters: RpCounters,
}

fn sat_inc(s: u8) -> u8 {
    if s >= STAGE_MAX {
        STAGE_MAX
    } else {
        s + 1
    }
}

impl Rp {
    /// A reset RP (every QP inactive) at time 0.
    pub fn new(params: HwParams, cfg: RpCfg) -> Rp {
        Rp::with_now(params, cfg, 0)
    }

    /// A reset RP whose time counter starts at `now`.
    pub fn with_now(params: HwParams, cfg: RpCfg, now: u32) -> Rp {
        let clock = Clock::new(cfg.time_bits);
        let nqp = cfg.nqp.clamp(1, 65_536);
        let cfg = RpCfg {
            nqp,
            cnp_fifo_depth: cfg.cnp_fifo_depth.max(1),
            tx_fifo_depth: cfg.tx_fifo_depth.max(1),
            time_bits: cfg.time_bits.clamp(8, 32),
        };
        let mut rp = Rp {
            p: params,
            cfg,
            clock,
            now: now & clock.mask,
            qps: vec![RpQp::default(); nqp],
            active: vec![0; nqp.div_ceil(64)],
            scan: 0,
            cnp_fifo: VecDeque::with_capacity(cfg.cnp_fifo_depth),
            tx_fifo: VecDeque::with_capacity(cfg.tx_fifo_depth),
            counters: RpCounters::default(),
        };
        rp.set_params(params);
        rp
    }

    /// Loads a new register set (normalized; periods capped at 2^(time_bits−2)); used from the
    /// next clock on. Active QPs keep their deadlines.
    pub fn set_params(&mut self, params: HwParams) {
        let cap = self.clock.period_cap();
        let n = params.normalized();
        self.p = HwParams {
            inc_period: n.inc_period.min(cap),
            alpha_period: n.alpha_period.min(cap),
            dec_period: n.dec_period.min(cap),
            cnp_interval: n.cnp_interval.min(cap),
            ..n
        };
    }

    /// The register set in use.
    pub fn params(&self) -> &HwParams {
        &self.p
    }

    /// The configuration in use (after clamping).
    pub fn cfg(&self) -> &RpCfg {
        &self.cfg
    }

    /// The current time counter value (the value the next `step` sees).
    pub fn now(&self) -> u32 {
        self.now
    }

    /// The counters.
    pub fn counters(&self) -> RpCounters {
        self.counters
    }

    /// Whether QP q is active (rate limited).
    pub fn is_active(&self, q: u32) -> bool {
        let i = q as usize;
        i < self.cfg.nqp && self.active.get(i / 64).is_some_and(|w| w >> (i % 64) & 1 != 0)
    }

    /// Number of active QPs.
    pub fn active_count(&self) -> usize {
        self.active.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// The state of QP q if it is active (the comparison view: inactive entries are don't-care).
    pub fn qp(&self, q: u32) -> Option<RpQp> {
        if self.is_active(q) {
            self.qps.get(q as usize).copied()
        } else {
            None
        }
    }

    /// The rate the pacer should apply to QP q: `(R_C, true)` while active, else
    /// `(line rate, false)`.
    pub fn rate(&self, q: u32) -> (u32, bool) {
        match self.qp(q) {
            Some(s) => (s.rc, true),
            None => (self.p.line_rate, false),
        }
    }

    /// Entries waiting in the CNP FIFO.
    pub fn cnp_fifo_len(&self) -> usize {
        self.cnp_fifo.len()
    }

    /// Entries waiting in the transmitted-bytes FIFO, head first.
    pub fn tx_fifo(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        self.tx_fifo.iter().copied()
    }

    /// Next QP that the timer scan visits (the scan pointer; the visit goes to the first
    /// active QP at or after it, circularly).
    pub fn scan_ptr(&self) -> usize {
        self.scan
    }

    fn set_active(&mut self, i: usize, on: bool) {
        if let Some(w) = self.active.get_mut(i / 64) {
            if on {
                *w |= 1 << (i % 64);
            } else {
                *w &= !(1 << (i % 64));
            }
        }
    }

    /// First active QP at or after `from`, circularly (the RTL's find-next).
    fn find_next(&self, from: usize) -> Option<usize> {
        let n = self.cfg.nqp;
        let words = self.active.len();
        let start = if from >= n { 0 } else { from };
        let (sw, sb) = (start / 64, start % 64);
        for k in 0..=words {
            let wi = (sw + k) % words;
            let mut w = self.active[wi];
            if k == 0 {
                w &= !0u64 << sb;
            }
            if k == words {
                // wrapped around to the start word: only the bits below the start
                w = self.active[sw] & !(!0u64 << sb);
            }
            if w != 0 {
                let i = wi * 64 + w.trailing_zeros() as usize;
                if i < n {
                    return Some(i);
                }
            }
        }
        None
    }

    /// One clock: selects and applies at most one operation, then takes this clock's inputs
    /// into the FIFOs, then advances the time counter.
    pub fn step(&mut self, inp: &RpIn) -> RpOut {
        let mut out = RpOut::default();
        // Inputs are qualified against the state at the start of the clock.
        let tx_in = match inp.tx {
            Some((q, b)) if (q as usize) < self.cfg.nqp && b > 0 => {
                if self.is_active(q) {
                    Some((q, b.min(TX_BYTES_MAX)))
                } else {
                    out.tx_filtered = true;
                    None
                }
            }
            Some((q, _)) if (q as usize) >= self.cfg.nqp => {
                self.counters.bad_qpn = self.counters.bad_qpn.wrapping_add(1);
                None
            }
            _ => None,
        };
        let cnp_in = match inp.cnp {
            Some(q) if (q as usize) < self.cfg.nqp => Some(q),
            Some(_) => {
                self.counters.bad_qpn = self.counters.bad_qpn.wrapping_add(1);
                None
            }
            None => None,
        };

        // 1. The operation: CNP FIFO head, else bytes FIFO head, else one timer-scan visit.
        if let Some(q) = self.cnp_fifo.pop_front() {
            self.op_cnp(q, &mut out);
        } else if let Some((q, b)) = self.tx_fifo.pop_front() {
            self.op_bytes(q, b, &mut out);
        } else {
            self.op_scan(&mut out);
        }

        // 2. This clock's inputs enter the FIFOs (after the pop: a full FIFO that was popped
        //    accepts; a bytes report merges into the tail entry if it is for the same QP and the
        //    sum stays within min(B, 65535)).
        if let Some(q) = cnp_in {
            if self.cnp_fifo.len() < self.cfg.cnp_fifo_depth {
                self.cnp_fifo.push_back(q);
            } else {
                out.cnp_dropped = true;
                self.counters.cnp_dropped = self.counters.cnp_dropped.wrapping_add(1);
            }
        }
        if let Some((q, b)) = tx_in {
            let cap = self.p.byte_reset.min(TX_BYTES_MAX);
            let room = self.tx_fifo.len() < self.cfg.tx_fifo_depth;
            match self.tx_fifo.back_mut() {
                Some(t) if t.0 == q && t.1 + b <= cap => {
                    t.1 += b;
                    out.tx_merged = true;
                    self.counters.tx_merged = self.counters.tx_merged.wrapping_add(1);
                }
                _ if room => self.tx_fifo.push_back((q, b)),
                _ => {
                    out.tx_dropped = true;
                    self.counters.tx_dropped = self.counters.tx_dropped.wrapping_add(1);
                }
            }
        }

        self.now = self.clock.add(self.now, 1);
        out
    }

    fn update(&self, q: u32) -> RateUpdate {
        let (rate, limited) = self.rate(q);
        RateUpdate { qpn: q, rate, limited }
    }

    /// CNP operation.
    fn op_cnp(&mut self, q: u32, out: &mut RpOut) {
        let i = q as usize;
        let now = self.now;
        let p = self.p;
        if self.is_active(q) {
            let s = &mut self.qps[i];
            s.cnp_seen = true;
            s.dec_pending = true;
            out.op = RpOp::Cnp { qpn: q };
            return;
        }
        // First CNP: allocate the QP.
        let r0 = if p.first_rate != 0 { p.first_rate } else { p.max_rate };
        let mut s = RpQp {
            rc: r0,
            rt: r0,
            alpha: p.initial_alpha,
            cnp_seen: false,
            dec_pending: false,
            t_stage: 0,
            bc_stage: 0,
            byte_cnt: 0,
            alpha_dl: self.clock.add(now, p.alpha_period),
            dec_dl: self.clock.add(now, p.dec_period),
            inc_dl: self.clock.add(now, p.inc_period),
        };
        if p.first_rate == 0 {
            cut(&mut s, &p);
            self.counters.cuts = self.counters.cuts.wrapping_add(1);
        }
        self.qps[i] = s;
        self.set_active(i, true);
        self.counters.activations = self.counters.activations.wrapping_add(1);
        out.op = RpOp::FirstCnp { qpn: q };
        out.rate = Some(self.update(q));
    }

    /// Transmitted-bytes operation.
    fn op_bytes(&mut self, q: u32, b: u32, out: &mut RpOut) {
        if !self.is_active(q) {
            out.op = RpOp::BytesStale { qpn: q };
            return;
        }
        let p = self.p;
        let s = &mut self.qps[q as usize];
        let old = s.rc;
        let sum = s.byte_cnt + b; // < 2^24 + 2^16: 25 bits
        let event = sum >= p.byte_reset;
        if event {
            // one event per entry; the remainder is kept below B
            s.byte_cnt = (sum - p.byte_reset).min(p.byte_reset - 1);
            increase(s, &p, false);
            self.counters.increases = self.counters.increases.wrapping_add(1);
        } else {
            s.byte_cnt = sum;
        }
        let changed = s.rc != old;
        out.op = RpOp::Bytes { qpn: q, event };
        if changed {
            out.rate = Some(self.update(q));
        }
    }

    /// One timer-scan visit.
    fn op_scan(&mut self, out: &mut RpOut) {
        let Some(i) = self.find_next(self.scan) else {
            out.op = RpOp::Idle;
            return;
        };
        self.scan = if i + 1 >= self.cfg.nqp { 0 } else { i + 1 };
        let q = i as u32;
        let now = self.now;
        let p = self.p;
        let clock = self.clock;
        let mut s = self.qps[i];
        // Earliest due deadline; ties in the order α, decrease, increase.
        let mut pick: Option<(TimerKind, u32)> = None;
        for (kind, d) in [(TimerKind::Alpha, s.alpha_dl), (TimerKind::Decrease, s.dec_dl), (TimerKind::Increase, s.inc_dl)] {
            if clock.due(now, d) && pick.is_none_or(|(_, pd)| clock.age(now, d) > clock.age(now, pd)) {
                pick = Some((kind, d));
            }
        }
        let old_rc = s.rc;
        let mut skipped = false;
        // Next deadline of a periodic timer: d + P, or now + P when that is already due
        // (the visit was a whole period late: the missed periods are dropped).
        let mut next = |d: u32, per: u32| {
            let n = clock.add(d, per);
            if clock.due(now, n) {
                skipped = true;
                clock.add(now, per)
            } else {
                n
            }
        };
        match pick {
            Some((TimerKind::Alpha, d)) => {
                let a = (u32::from(s.alpha) * u32::from(p.g)) >> 10; // 10 x 10 bits
                let a = if s.cnp_seen { a + (1024 - u32::from(p.g)) } else { a };
                s.alpha = a.min(u32::from(ALPHA_MAX)) as u16;
                s.cnp_seen = false;
                s.alpha_dl = next(d, p.alpha_period);
                out.op = RpOp::Timer { qpn: q, kind: TimerKind::Alpha, cut: false };
            }
            Some((TimerKind::Decrease, d)) => {
                let did = s.dec_pending;
                if did {
                    cut(&mut s, &p);
                    // the increase timer restarts at the tick's nominal time
                    s.inc_dl = next(d, p.inc_period);
                    self.counters.cuts = self.counters.cuts.wrapping_add(1);
                }
                s.dec_dl = next(d, p.dec_period);
                out.op = RpOp::Timer { qpn: q, kind: TimerKind::Decrease, cut: did };
            }
            Some((TimerKind::Increase, d)) => {
                increase(&mut s, &p, true);
                s.inc_dl = next(d, p.inc_period);
                self.counters.increases = self.counters.increases.wrapping_add(1);
                out.op = RpOp::Timer { qpn: q, kind: TimerKind::Increase, cut: false };
            }
            None => {
                if s.rc == p.max_rate && s.rt == p.max_rate && s.alpha == 0 && !s.cnp_seen && !s.dec_pending {
                    self.set_active(i, false);
                    self.counters.releases = self.counters.releases.wrapping_add(1);
                    out.op = RpOp::Release { qpn: q };
                    out.rate = Some(self.update(q));
                } else {
                    out.op = RpOp::Visit { qpn: q };
                }
                return;
            }
        }
        if skipped {
            self.counters.timer_skips = self.counters.timer_skips.wrapping_add(1);
        }
        self.qps[i] = s;
        if s.rc != old_rc {
            out.rate = Some(self.update(q));
        }
    }
}

/// The rate cut (decrease tick with a pending CNP, or the first CNP):
/// clamp R_T, then R_C ← max(R_C − (R_C·α >> gd), R_C·min_dec_q10 >> 10, min_rate); stages,
/// byte counter and the pending flag are cleared (the caller restarts the increase timer).
fn cut(s: &mut RpQp, p: &HwParams) {
    let clamp = p.clamp_tgt_rate || s.bc_stage > 0 || (p.clamp_after_inc && s.t_stage > 0);
    if clamp {
        s.rt = s.rc;
    }
    let rc = u64::from(s.rc);
    let red = (rc * u64::from(s.alpha)) >> p.gd; // 32 x 10 bits
    let a = rc.saturating_sub(red);
    let b = (rc * u64::from(p.min_dec_q10)) >> 10; // 32 x 11 bits
    let new = a.max(b).max(u64::from(p.min_rate));
    s.rc = new.min(u64::from(RATE_MAX)) as u32;
    s.rt = s.rt.clamp(s.rc, p.max_rate.max(s.rc));
    s.t_stage = 0;
    s.bc_stage = 0;
    s.byte_cnt = 0;
    s.dec_pending = false;
}

/// One increase event (timer if `timer`, else byte counter). The event's stage counter is
/// incremented first; with the counts T, BC after that: max(T, BC) ≤ F → fast recovery;
/// min(T, BC) > F → hyper increase by (min − F)·R_HAI; otherwise additive increase by R_AI.
/// R_T is clamped to the max rate, then R_C ← ⌈(R_T + R_C)/2⌉ (rounded up so R_C reaches R_T).
fn increase(s: &mut RpQp, p: &HwParams, timer: bool) {
    if timer {
        s.t_stage = sat_inc(s.t_stage);
    } else {
        s.bc_stage = sat_inc(s.bc_stage);
    }
    let f = p.threshold;
    let (lo, hi) = (s.t_stage.min(s.bc_stage), s.t_stage.max(s.bc_stage));
    let step = if lo > f {
        u64::from(lo - f) * u64::from(p.hai_rate) // 5 x 32 bits
    } else if hi > f {
        u64::from(p.ai_rate)
    } else {
        0
    };
    let rt = (u64::from(s.rt) + step).min(u64::from(p.max_rate));
    let rc = (rt + u64::from(s.rc)).div_ceil(2).min(rt);
    s.rt = rt as u32;
    s.rc = rc as u32;
}

// ------------------------------------------------------------------------------------------
// Pacer
// ------------------------------------------------------------------------------------------

/// Largest time difference the pacer multiplies (28 bits): beyond it the bucket is full anyway
/// for any rate ≥ 2^12 RU (≈ 1 Mb/s at 500 MHz) with the largest burst.
pub const PACER_DT_MAX: u32 = (1 << 28) - 1;
/// Largest pacer burst in bytes (2^20).
pub const PACER_BURST_MAX: u32 = 1 << 20;
/// Lowest token level: one largest report (65535 bytes) below zero, in 2^-20 bytes.
const TOKENS_MIN: i64 = -((TX_BYTES_MAX as i64) << RATE_FRAC);

/// Pacer configuration (RTL parameters).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PacerCfg {
    /// Number of QPs.
    pub nqp: usize,
    /// Bucket depth in bytes (1..=2^20): how far a limited QP may run ahead of its rate. At
    /// least two maximum-size packets so a QP limited at line rate never waits.
    pub burst_bytes: u32,
    /// Width of the time counter (8..=32); the same counter as the RP's.
    pub time_bits: u32,
}

impl Default for PacerCfg {
    fn default() -> PacerCfg {
        PacerCfg { nqp: 64, burst_bytes: 16_384, time_bits: 32 }
    }
}

/// Per-QP pacer state: token bucket (tokens with 20 fraction bits, 42-bit signed) refilled
/// lazily from the time of the last packet, plus the rate copy written by the RP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PacerQp {
    /// Tokens in 2^-20 bytes after the last packet (≤ burst, ≥ −65535 bytes).
    pub tokens: i64,
    /// Time of the last packet (or of reset).
    pub last: u32,
    /// Refill rate (RU), from the last [`RateUpdate`].
    pub rate: u32,
    /// Rate limited; an unlimited QP is never held back.
    pub limited: bool,
}

/// Per-QP transmit pacer (token bucket, deficit style): a limited QP may start a packet while
/// its refilled token level is ≥ 0; the packet's bytes are then subtracted (the level may go
/// negative by up to one packet). Refill: `min(tokens + min(now − last, 2^28−1) · rate, burst)`
/// with `rate` in RU, so tokens are in 2^-20 bytes and no conversion is needed. Unlimited QPs
/// (never cut, or released) are never held back; their bucket is still updated by `sent`.
#[derive(Debug, Clone)]
pub struct Pacer {
    clock: Clock,
    burst: i64,
    qps: Vec<PacerQp>,
}

impl Pacer {
    /// Every QP unlimited at `line_rate` with a full bucket, `last` = `now`.
    pub fn new(cfg: PacerCfg, line_rate: u32, now: u32) -> Pacer {
        let clock = Clock::new(cfg.time_bits);
        let burst = i64::from(cfg.burst_bytes.clamp(1, PACER_BURST_MAX)) << RATE_FRAC;
        let qp = PacerQp { tokens: burst, last: now & clock.mask, rate: line_rate, limited: false };
        Pacer { clock, burst, qps: vec![qp; cfg.nqp.max(1)] }
    }

    /// Takes a rate update from the RP (writes the rate copy only; the tokens gained since the
    /// last packet are computed at the new rate when next needed).
    pub fn update(&mut self, u: &RateUpdate) {
        if let Some(s) = self.qps.get_mut(u.qpn as usize) {
            s.rate = u.rate;
            s.limited = u.limited;
        }
    }

    /// The entry of QP q.
    pub fn qp(&self, q: u32) -> Option<&PacerQp> {
        self.qps.get(q as usize)
    }

    /// Refilled token level of QP q at `now` (2^-20 bytes).
    pub fn tokens(&self, q: u32, now: u32) -> i64 {
        match self.qps.get(q as usize) {
            Some(s) => self.refill(s, now),
            None => 0,
        }
    }

    fn refill(&self, s: &PacerQp, now: u32) -> i64 {
        let dt = self.clock.age(now, s.last).min(PACER_DT_MAX);
        let gain = i64::from(dt) * i64::from(s.rate); // 28 x 32 bits
        (s.tokens + gain).min(self.burst)
    }

    /// QP q may start a packet at `now`: unlimited, or its refilled token level is ≥ 0.
    /// Out-of-range QPs are never held back.
    pub fn may_send(&self, q: u32, now: u32) -> bool {
        match self.qps.get(q as usize) {
            Some(s) => !s.limited || self.refill(s, now) >= 0,
            None => true,
        }
    }

    /// QP q started a packet of `bytes` bytes at `now` (clamped to 65535).
    pub fn sent(&mut self, q: u32, bytes: u32, now: u32) {
        let now = now & self.clock.mask;
        if let Some(s) = self.qps.get(q as usize).copied() {
            let t = self.refill(&s, now) - (i64::from(bytes.min(TX_BYTES_MAX)) << RATE_FRAC);
            if let Some(e) = self.qps.get_mut(q as usize) {
                e.tokens = t.max(TOKENS_MIN);
                e.last = now;
            }
        }
    }
}
