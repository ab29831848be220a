//! The BAR0 register block (`rtl/csr/hm_csr.sv`) in co-simulation, with an AXI4-Lite master
//! driver. [`regs`] is the register map (hematite_model's, generated from
//! `rtl/pkg/hm_regs_pkg.sv`, itself generated from `regs/hematite.rdl`).

use crate::Rng;

pub use hematite_abi::regs;

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct HmCsrIn {
    pub counters: [u32; 16],
    pub awaddr: u32,
    pub wdata: u32,
    pub araddr: u32,
    pub rst: u8,
    pub awvalid: u8,
    pub wstrb: u8,
    pub wvalid: u8,
    pub bready: u8,
    pub arvalid: u8,
    pub rready: u8,
    pub db_ready: u8,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct HmCsrOut {
    pub db_data: u64,
    pub rdata: u32,
    pub awready: u8,
    pub wready: u8,
    pub bresp: u8,
    pub bvalid: u8,
    pub arready: u8,
    pub rresp: u8,
    pub rvalid: u8,
    pub db_valid: u8,
}

#[repr(C)]
struct HmCsr {
    _private: [u8; 0],
}

extern "C" {
    fn hm_csr_new() -> *mut HmCsr;
    fn hm_csr_tick(h: *mut HmCsr, inp: *const HmCsrIn, out: *mut HmCsrOut);
    fn hm_csr_free(h: *mut HmCsr);
}

/// The Verilated register block (16 counters, 512-bit datapath capabilities).
pub struct CsrSim {
    h: *mut HmCsr,
    pub cycle: u64,
}

impl CsrSim {
    pub fn new() -> CsrSim {
        // SAFETY: hm_csr_new has no preconditions.
        let h = unsafe { hm_csr_new() };
        let mut s = CsrSim { h, cycle: 0 };
        let mut i = HmCsrIn { rst: 1, ..Default::default() };
        for _ in 0..4 {
            s.tick(&i);
        }
        i.rst = 0;
        s.tick(&i);
        s
    }
    /// Apply `inp`, return the outputs before the rising edge, then clock.
    pub fn tick(&mut self, inp: &HmCsrIn) -> HmCsrOut {
        let mut o = HmCsrOut::default();
        // SAFETY: self.h is live until Drop; both structs are #[repr(C)] twins of the C ones.
        unsafe { hm_csr_tick(self.h, inp, &mut o) };
        self.cycle += 1;
        o
    }
}

impl Default for CsrSim {
    fn default() -> Self {
        CsrSim::new()
    }
}

impl Drop for CsrSim {
    fn drop(&mut self) {
        // SAFETY: created by hm_csr_new, freed once.
        unsafe { hm_csr_free(self.h) }
    }
}

/// One AXI4-Lite access.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    Write { addr: u32, data: u32, strb: u8 },
    Read { addr: u32 },
}

/// What a run returned: per access its response (read data or 0, and OKAY = true), and the
/// doorbell events (kind, word) in order.
#[derive(Debug, Default)]
pub struct CsrRun {
    pub responses: Vec<(u32, bool)>,
    pub doorbells: Vec<(u8, u32)>,
    pub cycles: u64,
}

/// Issue `accs` in order (AW and W of a write presented independently, with random delays),
/// one outstanding access at a time, with the doorbell sink ready `db_ready_pct` of the time.
pub fn run_csr(sim: &mut CsrSim, accs: &[Access], counters: [u32; 16], stall_pct: u32, db_ready_pct: u32, seed: u64) -> Result<CsrRun, String> {
    let mut rng = Rng::new(seed);
    let mut run = CsrRun::default();
    let mut i = HmCsrIn { counters, ..Default::default() };
    let start = sim.cycle;
    for (k, a) in accs.iter().enumerate() {
        let (mut aw_done, mut w_done, mut ar_done) = (false, false, false);
        let mut guard = 0u64;
        loop {
            guard += 1;
            if guard > 100_000 {
                return Err(format!("access {k} ({a:?}) never completed"));
            }
            i.awvalid = 0;
            i.wvalid = 0;
            i.arvalid = 0;
            match *a {
                Access::Write { addr, data, strb } => {
                    if !aw_done && !rng.pct(stall_pct) {
                        i.awvalid = 1;
                        i.awaddr = addr;
                    }
                    if !w_done && !rng.pct(stall_pct) {
                        i.wvalid = 1;
                        i.wdata = data;
                        i.wstrb = strb;
                    }
                }
                Access::Read { addr } => {
                    if !ar_done && !rng.pct(stall_pct) {
                        i.arvalid = 1;
                        i.araddr = addr;
                    }
                }
            }
            i.bready = (!rng.pct(stall_pct)) as u8;
            i.rready = (!rng.pct(stall_pct)) as u8;
            i.db_ready = (rng.next() % 100 < db_ready_pct as u64) as u8;
            let o = sim.tick(&i);
            if o.db_valid != 0 && i.db_ready != 0 {
                run.doorbells.push(((o.db_data >> 32) as u8, o.db_data as u32));
            }
            if i.awvalid != 0 && o.awready != 0 {
                aw_done = true;
            }
            if i.wvalid != 0 && o.wready != 0 {
                w_done = true;
            }
            if i.arvalid != 0 && o.arready != 0 {
                ar_done = true;
            }
            if o.bvalid != 0 && i.bready != 0 {
                if !matches!(a, Access::Write { .. }) || !aw_done || !w_done {
                    return Err(format!("access {k}: write response without a write"));
                }
                run.responses.push((0, o.bresp == 0));
                break;
            }
            if o.rvalid != 0 && i.rready != 0 {
                if !matches!(a, Access::Read { .. }) || !ar_done {
                    return Err(format!("access {k}: read data without a read"));
                }
                run.responses.push((o.rdata, o.rresp == 0));
                break;
            }
        }
    }
    // drain doorbells still queued
    for _ in 0..200 {
        i.awvalid = 0;
        i.wvalid = 0;
        i.arvalid = 0;
        i.db_ready = 1;
        let o = sim.tick(&i);
        if o.db_valid != 0 {
            run.doorbells.push(((o.db_data >> 32) as u8, o.db_data as u32));
        }
    }
    run.cycles = sim.cycle - start;
    Ok(run)
}
