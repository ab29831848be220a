//! The DCQCN blocks of one NIC (`rtl/cc/hm_dcqcn_rp.sv`, `hm_dcqcn_pacer.sv`, `hm_dcqcn_np.sv`,
//! wrapped by `sim/hw/hm_sim_cc_top.sv`: 13 QPs, 8-bit QPNs, a 32-bit time counter starting at
//! [`CC_NOW_INIT`]) in co-simulation, with decoders from the RTL's outputs to the reference
//! model's types (`hematite_model::dcqcn`).

use hematite_model::dcqcn::{HwParams, RateUpdate, RpOp, RpQp, TimerKind};

/// The wrapper's parameters, for the reference model.
pub const CC_QPS: usize = 13;
pub const CC_TIME_BITS: u32 = 32;
pub const CC_NOW_INIT: u32 = 0xFFFF_F000;
pub const CC_CNP_FIFO: usize = 2;
pub const CC_TX_FIFO: usize = 4;

#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct HmCcCfg {
    pub inc_period: u32,
    pub alpha_period: u32,
    pub dec_period: u32,
    pub byte_reset: u32,
    pub max_rate: u32,
    pub ai_rate: u32,
    pub hai_rate: u32,
    pub min_rate: u32,
    pub first_rate: u32,
    pub line_rate: u32,
    pub burst: u32,
    pub cnp_interval: u32,
    pub min_dec_q10: u16,
    pub g: u16,
    pub initial_alpha: u16,
    pub clamp_tgt_rate: u8,
    pub clamp_after_inc: u8,
    pub threshold: u8,
    pub gd: u8,
}

impl HmCcCfg {
    /// The register values for `p` (which should be normalized, as `HwParams::from_cc` output
    /// is) and a pacer bucket of `burst` bytes.
    pub fn from_params(p: &HwParams, burst: u32) -> HmCcCfg {
        HmCcCfg {
            inc_period: p.inc_period,
            alpha_period: p.alpha_period,
            dec_period: p.dec_period,
            byte_reset: p.byte_reset,
            max_rate: p.max_rate,
            ai_rate: p.ai_rate,
            hai_rate: p.hai_rate,
            min_rate: p.min_rate,
            first_rate: p.first_rate,
            line_rate: p.line_rate,
            burst,
            cnp_interval: p.cnp_interval,
            min_dec_q10: p.min_dec_q10,
            g: p.g,
            initial_alpha: p.initial_alpha,
            clamp_tgt_rate: p.clamp_tgt_rate as u8,
            clamp_after_inc: p.clamp_after_inc as u8,
            threshold: p.threshold,
            gd: p.gd,
        }
    }
}

#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct HmCcIn {
    pub tx_bytes: u16,
    pub rst: u8,
    pub cnp_valid: u8,
    pub cnp_qpn: u8,
    pub tx_valid: u8,
    pub tx_qpn: u8,
    pub query_qpn: u8,
    pub ce_valid: u8,
    pub ce_qpn: u8,
    pub cnp_full: u8,
    pub dbg_qpn: u8,
}

#[repr(C)]
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct HmCcOut {
    pub rate: u32,
    pub now: u32,
    /// cnp_dropped, tx_dropped, tx_merged, bad_qpn, activations, releases, cuts, increases,
    /// timer_skips (the order of `RpCounters`).
    pub stat: [u32; 9],
    pub entry: [u32; 7],
    pub tokens: u64,
    pub dbg_last: u32,
    pub dbg_rate: u32,
    pub np_cnps: u32,
    pub rate_valid: u8,
    pub rate_qpn: u8,
    pub rate_limited: u8,
    pub op: u8,
    pub op_qpn: u8,
    pub op_timer: u8,
    pub op_flag: u8,
    pub cnp_dropped: u8,
    pub tx_dropped: u8,
    pub tx_merged: u8,
    pub tx_filtered: u8,
    pub dbg_active: u8,
    pub dbg_scan: u8,
    pub dbg_cnp_count: u8,
    pub dbg_tx_count: u8,
    pub query_ok: u8,
    pub dbg_limited: u8,
    pub cnp_valid: u8,
    pub cnp_qpn: u8,
    pub np_suppressed: u8,
    pub np_blocked: u8,
}

/// The RTL's `o_op` code and `o_op_qpn` of a reaction-point operation (the inverse of
/// [`HmCcOut::op`] for the code and the QPN).
pub fn rp_op_code(op: &RpOp) -> (u8, u32) {
    match *op {
        RpOp::Idle => (0, 0),
        RpOp::FirstCnp { qpn } => (1, qpn),
        RpOp::Cnp { qpn } => (2, qpn),
        RpOp::Bytes { qpn, .. } => (3, qpn),
        RpOp::BytesStale { qpn } => (4, qpn),
        RpOp::Timer { qpn, .. } => (5, qpn),
        RpOp::Release { qpn } => (6, qpn),
        RpOp::Visit { qpn } => (7, qpn),
    }
}

impl HmCcOut {
    /// The operation the reaction point applied in the previous clock.
    pub fn op(&self) -> RpOp {
        let qpn = u32::from(self.op_qpn);
        let flag = self.op_flag != 0;
        match self.op {
            1 => RpOp::FirstCnp { qpn },
            2 => RpOp::Cnp { qpn },
            3 => RpOp::Bytes { qpn, event: flag },
            4 => RpOp::BytesStale { qpn },
            5 => {
                let kind = match self.op_timer {
                    0 => TimerKind::Alpha,
                    1 => TimerKind::Decrease,
                    _ => TimerKind::Increase,
                };
                RpOp::Timer { qpn, kind, cut: kind == TimerKind::Decrease && flag }
            }
            6 => RpOp::Release { qpn },
            7 => RpOp::Visit { qpn },
            _ => RpOp::Idle,
        }
    }

    /// The rate update of the previous clock.
    pub fn rate_update(&self) -> Option<RateUpdate> {
        (self.rate_valid != 0).then_some(RateUpdate {
            qpn: u32::from(self.rate_qpn),
            rate: self.rate,
            limited: self.rate_limited != 0,
        })
    }

    fn bits(&self, lsb: usize, width: usize) -> u64 {
        let mut v = 0u64;
        for i in 0..width {
            let b = lsb + i;
            v |= u64::from(self.entry[b / 32] >> (b % 32) & 1) << i;
        }
        v
    }

    /// The debug port's entry (the QP chosen by `dbg_qpn`), decoded (layout in
    /// `rtl/cc/hm_dcqcn_rp.sv`).
    pub fn entry(&self) -> RpQp {
        RpQp {
            rc: self.bits(0, 32) as u32,
            rt: self.bits(32, 32) as u32,
            alpha: self.bits(64, 10) as u16,
            cnp_seen: self.bits(74, 1) != 0,
            dec_pending: self.bits(75, 1) != 0,
            t_stage: self.bits(76, 5) as u8,
            bc_stage: self.bits(81, 5) as u8,
            byte_cnt: self.bits(86, 24) as u32,
            alpha_dl: self.bits(110, 32) as u32,
            dec_dl: self.bits(142, 32) as u32,
            inc_dl: self.bits(174, 32) as u32,
        }
    }

    /// The pacer's debug tokens (2^-20 bytes, sign-extended from 42 bits).
    pub fn tokens(&self) -> i64 {
        ((self.tokens << 22) as i64) >> 22
    }
}

#[repr(C)]
struct HmCc {
    _private: [u8; 0],
}

extern "C" {
    fn hm_cc_new() -> *mut HmCc;
    fn hm_cc_tick(h: *mut HmCc, cfg: *const HmCcCfg, inp: *const HmCcIn, out: *mut HmCcOut);
    fn hm_cc_free(h: *mut HmCc);
}

/// The Verilated DCQCN blocks of one NIC.
pub struct CcSim {
    h: *mut HmCc,
    /// The registers applied at every clock.
    pub cfg: HmCcCfg,
}

impl CcSim {
    /// A model held in reset for a few cycles with the registers `cfg`; the next
    /// [`CcSim::tick`] is the first clock after reset (time counter [`CC_NOW_INIT`]).
    pub fn new(cfg: HmCcCfg) -> CcSim {
        // SAFETY: no preconditions.
        let h = unsafe { hm_cc_new() };
        let mut s = CcSim { h, cfg };
        let i = HmCcIn { rst: 1, ..Default::default() };
        for _ in 0..3 {
            s.tick(&i);
        }
        s
    }

    /// One clock with the inputs `i`; returns the outputs sampled before the edge.
    pub fn tick(&mut self, i: &HmCcIn) -> HmCcOut {
        let mut o = HmCcOut::default();
        // SAFETY: self.h is live until Drop; #[repr(C)] twins of the C structs.
        unsafe { hm_cc_tick(self.h, &self.cfg, i, &mut o) };
        o
    }
}

impl Drop for CcSim {
    fn drop(&mut self) {
        // SAFETY: created by hm_cc_new, freed once.
        unsafe { hm_cc_free(self.h) }
    }
}
