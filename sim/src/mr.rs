//! The memory-region table (`rtl/ctx/hm_mr_table.sv`) in co-simulation.

use crate::Rng;

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct HmMrIn {
    pub wr_base: u64,
    pub wr_len: u64,
    pub chk_addr: u64,
    pub chk_len: u64,
    pub wr_pd: u32,
    pub chk_key: u32,
    pub chk_pd: u32,
    pub wr_index: u16,
    pub rst: u8,
    pub wr_entry_valid: u8,
    pub wr_tag: u8,
    pub wr_access: u8,
    pub wr_valid: u8,
    pub chk_need: u8,
    pub chk_id: u8,
    pub chk_valid: u8,
    pub res_ready: u8,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct HmMrOut {
    pub res_base: u64,
    pub wr_ready: u8,
    pub chk_ready: u8,
    pub res_ok: u8,
    pub res_err: u8,
    pub res_id: u8,
    pub res_valid: u8,
}

#[repr(C)]
struct HmMr {
    _private: [u8; 0],
}

extern "C" {
    fn hm_mr_new() -> *mut HmMr;
    fn hm_mr_tick(h: *mut HmMr, inp: *const HmMrIn, out: *mut HmMrOut);
    fn hm_mr_free(h: *mut HmMr);
}

/// One table write: entry `index` becomes (valid, tag, pd, base, len, access bits).
#[derive(Clone, Copy, Debug)]
pub struct MrWrite {
    pub index: u16,
    pub valid: bool,
    pub tag: u8,
    pub pd: u32,
    pub base: u64,
    pub len: u64,
    /// {remote_atomic, remote_write, remote_read, local_write}
    pub access: u8,
}

/// One check: key, PD, address, length, need (0 local read .. 4 remote atomic).
#[derive(Clone, Copy, Debug)]
pub struct MrCheck {
    pub key: u32,
    pub pd: u32,
    pub addr: u64,
    pub len: u64,
    pub need: u8,
}

/// The Verilated table (4096 entries).
pub struct MrSim {
    h: *mut HmMr,
}

impl MrSim {
    pub fn new() -> MrSim {
        // SAFETY: no preconditions.
        let h = unsafe { hm_mr_new() };
        let mut s = MrSim { h };
        let mut i = HmMrIn { rst: 1, ..Default::default() };
        for _ in 0..4 {
            s.tick(&i);
        }
        i.rst = 0;
        s.tick(&i);
        s
    }
    pub fn tick(&mut self, i: &HmMrIn) -> HmMrOut {
        let mut o = HmMrOut::default();
        // SAFETY: self.h is live until Drop; #[repr(C)] twins of the C structs.
        unsafe { hm_mr_tick(self.h, i, &mut o) };
        o
    }

    /// Apply the writes (one per cycle), then run the checks with random idle cycles and
    /// result back-pressure; returns (ok, err code, base) per check, in order, and the cycles.
    pub fn run(&mut self, writes: &[MrWrite], checks: &[MrCheck], stall_pct: u32, seed: u64) -> (Vec<(bool, u8, u64)>, u64) {
        let mut rng = Rng::new(seed);
        let mut i = HmMrIn::default();
        for w in writes {
            i.wr_valid = 1;
            i.wr_index = w.index;
            i.wr_entry_valid = w.valid as u8;
            i.wr_tag = w.tag;
            i.wr_pd = w.pd;
            i.wr_base = w.base;
            i.wr_len = w.len;
            i.wr_access = w.access;
            self.tick(&i);
        }
        i.wr_valid = 0;
        let mut out = Vec::new();
        let mut k = 0usize;
        let mut cycles = 0u64;
        while out.len() < checks.len() {
            cycles += 1;
            assert!(cycles < 100 * (checks.len() as u64 + 10), "MR table hang");
            i.chk_valid = (k < checks.len() && !rng.pct(stall_pct)) as u8;
            if i.chk_valid != 0 {
                let c = &checks[k];
                i.chk_key = c.key;
                i.chk_pd = c.pd;
                i.chk_addr = c.addr;
                i.chk_len = c.len;
                i.chk_need = c.need;
                i.chk_id = k as u8;
            }
            i.res_ready = (!rng.pct(stall_pct)) as u8;
            let o = self.tick(&i);
            if i.chk_valid != 0 && o.chk_ready != 0 {
                k += 1;
            }
            if o.res_valid != 0 && i.res_ready != 0 {
                assert_eq!(o.res_id, out.len() as u8, "results out of order");
                out.push((o.res_ok != 0, o.res_err, o.res_base));
            }
        }
        (out, cycles)
    }
}

impl Default for MrSim {
    fn default() -> Self {
        MrSim::new()
    }
}

impl Drop for MrSim {
    fn drop(&mut self) {
        // SAFETY: created by hm_mr_new, freed once.
        unsafe { hm_mr_free(self.h) }
    }
}
