//! The DCQCN notification point (`rtl/cc/hm_dcqcn_np.sv`, wrapped by `sim/hw/hm_sim_np_top.sv`:
//! 13 QPs, 8-bit QPNs, a 12-bit time counter starting at [`NP_NOW_INIT`]) in co-simulation.

/// The wrapper's parameters, for the reference model.
pub const NP_QPS: usize = 13;
pub const NP_TIME_BITS: u32 = 12;
pub const NP_NOW_INIT: u32 = 0xE00;

#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct HmNpIn {
    pub cfg_interval: u16,
    pub rst: u8,
    pub ce_valid: u8,
    pub ce_qpn: u8,
    pub cnp_full: u8,
}

#[repr(C)]
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct HmNpOut {
    pub stat_cnps: u32,
    pub stat_suppressed: u32,
    pub stat_blocked: u32,
    pub stat_bad_qpn: u32,
    pub now: u16,
    pub cnp_valid: u8,
    pub cnp_qpn: u8,
    pub suppressed: u8,
    pub blocked: u8,
}

#[repr(C)]
struct HmNp {
    _private: [u8; 0],
}

extern "C" {
    fn hm_np_new() -> *mut HmNp;
    fn hm_np_tick(h: *mut HmNp, inp: *const HmNpIn, out: *mut HmNpOut);
    fn hm_np_free(h: *mut HmNp);
}

/// The Verilated notification point.
pub struct NpSim {
    h: *mut HmNp,
    interval: u16,
}

impl NpSim {
    /// A model held in reset for a few cycles with the interval register at `interval`; the
    /// next [`NpSim::tick`] is the first clock after reset (time counter [`NP_NOW_INIT`]).
    pub fn new(interval: u16) -> NpSim {
        // SAFETY: no preconditions.
        let h = unsafe { hm_np_new() };
        let mut s = NpSim { h, interval };
        let i = HmNpIn { rst: 1, cfg_interval: interval, ..Default::default() };
        for _ in 0..3 {
            s.tick_raw(&i);
        }
        s
    }

    fn tick_raw(&mut self, i: &HmNpIn) -> HmNpOut {
        let mut o = HmNpOut::default();
        // SAFETY: self.h is live until Drop; #[repr(C)] twins of the C structs.
        unsafe { hm_np_tick(self.h, i, &mut o) };
        o
    }

    /// One clock with a CE event (`Some(qpn)`) or none; returns the outputs sampled before
    /// the edge (the registered decision of the previous clock).
    pub fn tick(&mut self, ce: Option<u8>, cnp_full: bool) -> HmNpOut {
        let i = HmNpIn {
            cfg_interval: self.interval,
            rst: 0,
            ce_valid: ce.is_some() as u8,
            ce_qpn: ce.unwrap_or(0),
            cnp_full: cnp_full as u8,
        };
        self.tick_raw(&i)
    }
}

impl Drop for NpSim {
    fn drop(&mut self) {
        // SAFETY: created by hm_np_new, freed once.
        unsafe { hm_np_free(self.h) }
    }
}
