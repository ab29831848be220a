//! The Verilated transport engine (`hm_rc_engine`, 512-bit) and a testbench around it: host
//! memory behind the engine's AXI4 master ([`AxiMem`]), AXI4-Lite masters for the register
//! BAR and the control bus, the MAC ports (transmitted frames collected, frames to receive
//! queued) and the interrupt messages.

use crate::dma::{AxiMem, HmDmaIn, HmDmaOut, MemCfg, PagedMem};
use crate::Rng;
use std::collections::VecDeque;
use std::os::raw::c_void;


/// Engine QP table size (the RTL default).
pub const NUM_QPS: usize = 4096;
/// Datapath bytes per beat.
pub const KW: usize = 64;

#[repr(C)]
#[derive(Clone, Copy)]
pub struct HmEngIn {
    pub rdata: [u32; 16],
    pub rx_tdata: [u32; 16],
    pub rl_pause: [u32; NUM_QPS / 32],
    pub rx_tkeep: u64,
    pub bar_wdata: u32,
    pub ctl_wdata: u32,
    pub bar_awaddr: u16,
    pub bar_araddr: u16,
    pub ctl_awaddr: u16,
    pub ctl_araddr: u16,
    pub rst: u8,
    pub bar_awvalid: u8,
    pub bar_wstrb: u8,
    pub bar_wvalid: u8,
    pub bar_bready: u8,
    pub bar_arvalid: u8,
    pub bar_rready: u8,
    pub ctl_awvalid: u8,
    pub ctl_wstrb: u8,
    pub ctl_wvalid: u8,
    pub ctl_bready: u8,
    pub ctl_arvalid: u8,
    pub ctl_rready: u8,
    pub arready: u8,
    pub rid: u8,
    pub rresp: u8,
    pub rlast: u8,
    pub rvalid: u8,
    pub awready: u8,
    pub wready: u8,
    pub bid: u8,
    pub bresp: u8,
    pub bvalid: u8,
    pub rx_tvalid: u8,
    pub rx_tlast: u8,
    pub rx_tuser: u8,
    pub tx_tready: u8,
    pub irq_ready: u8,
    // control core (hm_sim_nic_top): its host port, and who drives the engine's control bus
    pub fw_wdata: u32,
    pub fw_awaddr: u16,
    pub fw_araddr: u16,
    pub ctl_sel: u8,
    pub fw_awvalid: u8,
    pub fw_wstrb: u8,
    pub fw_wvalid: u8,
    pub fw_bready: u8,
    pub fw_arvalid: u8,
    pub fw_rready: u8,
    /// The Ethernet link as the control core sees it (1 = up).
    pub fw_link: u8,
}

impl Default for HmEngIn {
    fn default() -> Self {
        // SAFETY-free: all fields are plain integers; zero is a valid value for each.
        HmEngIn {
            rdata: [0; 16],
            rx_tdata: [0; 16],
            rl_pause: [0; NUM_QPS / 32],
            rx_tkeep: 0,
            bar_wdata: 0,
            ctl_wdata: 0,
            bar_awaddr: 0,
            bar_araddr: 0,
            ctl_awaddr: 0,
            ctl_araddr: 0,
            rst: 0,
            bar_awvalid: 0,
            bar_wstrb: 0,
            bar_wvalid: 0,
            bar_bready: 0,
            bar_arvalid: 0,
            bar_rready: 0,
            ctl_awvalid: 0,
            ctl_wstrb: 0,
            ctl_wvalid: 0,
            ctl_bready: 0,
            ctl_arvalid: 0,
            ctl_rready: 0,
            arready: 0,
            rid: 0,
            rresp: 0,
            rlast: 0,
            rvalid: 0,
            awready: 0,
            wready: 0,
            bid: 0,
            bresp: 0,
            bvalid: 0,
            rx_tvalid: 0,
            rx_tlast: 0,
            rx_tuser: 0,
            tx_tready: 1,
            irq_ready: 1,
            fw_wdata: 0,
            fw_awaddr: 0,
            fw_araddr: 0,
            ctl_sel: 0,
            fw_awvalid: 0,
            fw_wstrb: 0,
            fw_wvalid: 0,
            fw_bready: 0,
            fw_arvalid: 0,
            fw_rready: 0,
            fw_link: 1,
        }
    }
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct HmEngOut {
    pub wdata: [u32; 16],
    pub tx_tdata: [u32; 16],
    pub araddr: u64,
    pub awaddr: u64,
    pub wstrb: u64,
    pub tx_tkeep: u64,
    pub bar_rdata: u32,
    pub ctl_rdata: u32,
    pub bar_awready: u8,
    pub bar_wready: u8,
    pub bar_bresp: u8,
    pub bar_bvalid: u8,
    pub bar_arready: u8,
    pub bar_rresp: u8,
    pub bar_rvalid: u8,
    pub ctl_awready: u8,
    pub ctl_wready: u8,
    pub ctl_bresp: u8,
    pub ctl_bvalid: u8,
    pub ctl_arready: u8,
    pub ctl_rresp: u8,
    pub ctl_rvalid: u8,
    pub arid: u8,
    pub arlen: u8,
    pub arsize: u8,
    pub arburst: u8,
    pub arvalid: u8,
    pub rready: u8,
    pub awid: u8,
    pub awlen: u8,
    pub awsize: u8,
    pub awburst: u8,
    pub awvalid: u8,
    pub wlast: u8,
    pub wvalid: u8,
    pub bready: u8,
    pub rx_tready: u8,
    pub tx_tvalid: u8,
    pub tx_tlast: u8,
    pub tx_tuser: u8,
    pub irq_valid: u8,
    pub irq_vec: u8,
    pub fw_rdata: u32,
    pub fw_awready: u8,
    pub fw_wready: u8,
    pub fw_bresp: u8,
    pub fw_bvalid: u8,
    pub fw_arready: u8,
    pub fw_rresp: u8,
    pub fw_rvalid: u8,
    pub fw_irq_done: u8,
    pub fw_fault: u8,
    pub fw_trap: u8,
}

extern "C" {
    fn hm_eng_new() -> *mut c_void;
    fn hm_eng_tick(h: *mut c_void, inp: *const HmEngIn, out: *mut HmEngOut);
    fn hm_eng_free(h: *mut c_void);
}

/// One Verilated engine.
pub struct EngSim {
    h: *mut c_void,
    pub cycle: u64,
}

impl EngSim {
    fn new() -> EngSim {
        // SAFETY: no preconditions; returns an owned handle.
        let h = unsafe { hm_eng_new() };
        EngSim { h, cycle: 0 }
    }
    fn tick(&mut self, inp: &HmEngIn) -> HmEngOut {
        let mut out = HmEngOut::default();
        // SAFETY: h is live until Drop; inp/out are #[repr(C)] twins of the C structs.
        unsafe { hm_eng_tick(self.h, inp, &mut out) };
        self.cycle += 1;
        out
    }
}

impl Drop for EngSim {
    fn drop(&mut self) {
        // SAFETY: created by hm_eng_new, freed once.
        unsafe { hm_eng_free(self.h) }
    }
}

/// One AXI4-Lite access.
#[derive(Debug, Clone, Copy)]
pub enum LiteOp {
    Write { addr: u16, data: u32 },
    Read { addr: u16 },
}

/// A cycle-level AXI4-Lite master that performs one access at a time.
#[derive(Default)]
struct Lite {
    cur: Option<(LiteOp, bool, bool, bool)>,
    result: Option<(u32, bool)>,
}

struct LiteDrive {
    awaddr: u16,
    awvalid: u8,
    wdata: u32,
    wvalid: u8,
    araddr: u16,
    arvalid: u8,
}

impl Lite {
    fn start(&mut self, op: LiteOp) {
        self.cur = Some((op, false, false, false));
        self.result = None;
    }
    fn drive(&self) -> LiteDrive {
        let mut d = LiteDrive { awaddr: 0, awvalid: 0, wdata: 0, wvalid: 0, araddr: 0, arvalid: 0 };
        if let Some((op, aw, w, ar)) = self.cur {
            match op {
                LiteOp::Write { addr, data } => {
                    if !aw {
                        d.awaddr = addr;
                        d.awvalid = 1;
                    }
                    if !w {
                        d.wdata = data;
                        d.wvalid = 1;
                    }
                }
                LiteOp::Read { addr } => {
                    if !ar {
                        d.araddr = addr;
                        d.arvalid = 1;
                    }
                }
            }
        }
        d
    }
    #[allow(clippy::too_many_arguments)]
    fn update(&mut self, d: &LiteDrive, awready: u8, wready: u8, bvalid: u8, bresp: u8, arready: u8, rvalid: u8, rdata: u32, rresp: u8) {
        let Some((op, aw, w, ar)) = self.cur.as_mut() else { return };
        if d.awvalid != 0 && awready != 0 {
            *aw = true;
        }
        if d.wvalid != 0 && wready != 0 {
            *w = true;
        }
        if d.arvalid != 0 && arready != 0 {
            *ar = true;
        }
        match op {
            LiteOp::Write { .. } if bvalid != 0 => {
                self.result = Some((0, bresp == 0));
                self.cur = None;
            }
            LiteOp::Read { .. } if rvalid != 0 => {
                self.result = Some((rdata, rresp == 0));
                self.cur = None;
            }
            _ => {}
        }
    }
}

/// The engine with its host memory, bus masters and MAC sinks.
pub struct Engine {
    sim: EngSim,
    pub mem: AxiMem,
    bar: Lite,
    ctl: Lite,
    fw: Lite,
    pub inp: HmEngIn,
    /// Frames the engine transmitted (bytes, aborted flag), in order.
    pub tx: Vec<(Vec<u8>, bool)>,
    cur_tx: Vec<u8>,
    /// Cycle at which each transmitted frame ended.
    pub tx_cycle: Vec<u64>,
    /// Cycle at which each transmitted frame started (its first beat).
    pub tx_start: Vec<u64>,
    /// Beats transmitted.
    pub tx_beats: u64,
    /// Interrupt messages (cycle, vector), in order.
    pub irqs: Vec<(u64, u8)>,
    /// Percent of cycles the MAC withholds tready.
    pub tx_stall_pct: u32,
    rng: Rng,
    /// Frames queued towards the engine's receive port.
    pub rx_q: VecDeque<Vec<u8>>,
    rx_off: usize,
    /// Control core outputs of the last cycle: (command done pulse, fault, trap).
    pub fw_out: (bool, bool, bool),
    /// Cycles at which the control core completed a command (its done pulse).
    pub fw_done_cycles: Vec<u64>,
}

/// The AXI4-Lite slave ports of the NIC.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Port {
    /// The engine's register BAR.
    Bar,
    /// The engine's control bus (when the testbench drives it).
    Ctl,
    /// The control core's host port.
    Fw,
}

impl Engine {
    /// A fresh engine after reset, with the given host-memory timing.
    pub fn new(cfg: MemCfg) -> Engine {
        let seed = cfg.seed;
        let mut e = Engine {
            sim: EngSim::new(),
            mem: AxiMem::new(PagedMem::new(0), KW, cfg),
            bar: Lite::default(),
            ctl: Lite::default(),
            fw: Lite::default(),
            inp: HmEngIn::default(),
            tx: Vec::new(),
            cur_tx: Vec::new(),
            tx_cycle: Vec::new(),
            tx_start: Vec::new(),
            tx_beats: 0,
            irqs: Vec::new(),
            tx_stall_pct: 0,
            rng: Rng::new(seed ^ 0xE16),
            rx_q: VecDeque::new(),
            rx_off: 0,
            fw_out: (false, false, false),
            fw_done_cycles: Vec::new(),
        };
        e.inp.rst = 1;
        for _ in 0..8 {
            e.step();
        }
        e.inp.rst = 0;
        e.step();
        e
    }

    pub fn cycle(&self) -> u64 {
        self.sim.cycle
    }

    /// One clock cycle.
    pub fn step(&mut self) {
        let now = self.sim.cycle;
        let mut di = HmDmaIn::default();
        self.mem.drive(now, &mut di);
        let i = &mut self.inp;
        i.arready = di.arready;
        i.rid = di.rid;
        i.rdata = di.rdata;
        i.rresp = di.rresp;
        i.rlast = di.rlast;
        i.rvalid = di.rvalid;
        i.awready = di.awready;
        i.wready = di.wready;
        i.bid = di.bid;
        i.bresp = di.bresp;
        i.bvalid = di.bvalid;
        let bd = self.bar.drive();
        i.bar_awaddr = bd.awaddr;
        i.bar_awvalid = bd.awvalid;
        i.bar_wdata = bd.wdata;
        i.bar_wstrb = 0xF;
        i.bar_wvalid = bd.wvalid;
        i.bar_bready = 1;
        i.bar_araddr = bd.araddr;
        i.bar_arvalid = bd.arvalid;
        i.bar_rready = 1;
        let cd = self.ctl.drive();
        i.ctl_awaddr = cd.awaddr;
        i.ctl_awvalid = cd.awvalid;
        i.ctl_wdata = cd.wdata;
        i.ctl_wstrb = 0xF;
        i.ctl_wvalid = cd.wvalid;
        i.ctl_bready = 1;
        i.ctl_araddr = cd.araddr;
        i.ctl_arvalid = cd.arvalid;
        i.ctl_rready = 1;
        let fd = self.fw.drive();
        i.fw_awaddr = fd.awaddr;
        i.fw_awvalid = fd.awvalid;
        i.fw_wdata = fd.wdata;
        i.fw_wstrb = 0xF;
        i.fw_wvalid = fd.wvalid;
        i.fw_bready = 1;
        i.fw_araddr = fd.araddr;
        i.fw_arvalid = fd.arvalid;
        i.fw_rready = 1;
        i.tx_tready = (!self.rng.pct(self.tx_stall_pct)) as u8;
        // receive port
        i.rx_tvalid = 0;
        if let Some(f) = self.rx_q.front() {
            let end = (self.rx_off + KW).min(f.len());
            i.rx_tdata = [0; 16];
            for (k, v) in f[self.rx_off..end].iter().enumerate() {
                i.rx_tdata[k / 4] |= (*v as u32) << (8 * (k % 4));
            }
            let n = end - self.rx_off;
            i.rx_tkeep = if n >= 64 { u64::MAX } else { (1u64 << n) - 1 };
            i.rx_tlast = (end == f.len()) as u8;
            i.rx_tuser = 0;
            i.rx_tvalid = 1;
        }
        let o = self.sim.tick(&self.inp);
        let i = &self.inp;
        let dout = HmDmaOut {
            araddr: o.araddr,
            awaddr: o.awaddr,
            wstrb: o.wstrb,
            wdata: o.wdata,
            arid: o.arid,
            arlen: o.arlen,
            arsize: o.arsize,
            arburst: o.arburst,
            arvalid: o.arvalid,
            rready: o.rready,
            awid: o.awid,
            awlen: o.awlen,
            awsize: o.awsize,
            awburst: o.awburst,
            awvalid: o.awvalid,
            wlast: o.wlast,
            wvalid: o.wvalid,
            bready: o.bready,
            ..Default::default()
        };
        self.mem.update(now, &di, &dout);
        self.bar.update(&bd, o.bar_awready, o.bar_wready, o.bar_bvalid, o.bar_bresp, o.bar_arready, o.bar_rvalid, o.bar_rdata, o.bar_rresp);
        self.ctl.update(&cd, o.ctl_awready, o.ctl_wready, o.ctl_bvalid, o.ctl_bresp, o.ctl_arready, o.ctl_rvalid, o.ctl_rdata, o.ctl_rresp);
        self.fw.update(&fd, o.fw_awready, o.fw_wready, o.fw_bvalid, o.fw_bresp, o.fw_arready, o.fw_rvalid, o.fw_rdata, o.fw_rresp);
        self.fw_out = (o.fw_irq_done != 0, o.fw_fault != 0, o.fw_trap != 0);
        if o.fw_irq_done != 0 {
            self.fw_done_cycles.push(now);
        }
        if o.tx_tvalid != 0 && i.tx_tready != 0 {
            if self.cur_tx.is_empty() {
                self.tx_start.push(now);
            }
            self.tx_beats += 1;
            for k in 0..KW {
                if o.tx_tkeep >> k & 1 == 1 {
                    self.cur_tx.push((o.tx_tdata[k / 4] >> (8 * (k % 4))) as u8);
                }
            }
            if o.tx_tlast != 0 {
                self.tx.push((std::mem::take(&mut self.cur_tx), o.tx_tuser != 0));
                self.tx_cycle.push(now);
            }
        }
        if o.irq_valid != 0 && i.irq_ready != 0 {
            self.irqs.push((now, o.irq_vec));
        }
        if i.rx_tvalid != 0 && o.rx_tready != 0 {
            self.rx_off += KW;
            if i.rx_tlast != 0 {
                self.rx_q.pop_front();
                self.rx_off = 0;
            }
        }
    }

    /// Step until `done` holds; error after `max` cycles.
    pub fn run_until(&mut self, max: u64, mut done: impl FnMut(&Engine) -> bool) -> Result<u64, String> {
        let start = self.sim.cycle;
        while !done(self) {
            if self.sim.cycle - start > max {
                return Err(format!("no progress within {max} cycles (tx frames {})", self.tx.len()));
            }
            self.step();
        }
        Ok(self.sim.cycle - start)
    }

    fn lite(&mut self, bar: bool, op: LiteOp) -> Result<(u32, bool), String> {
        self.lite_on(if bar { Port::Bar } else { Port::Ctl }, op)
    }

    fn lite_on(&mut self, port: Port, op: LiteOp) -> Result<(u32, bool), String> {
        match port {
            Port::Bar => self.bar.start(op),
            Port::Ctl => self.ctl.start(op),
            Port::Fw => self.fw.start(op),
        }
        for _ in 0..10_000 {
            self.step();
            let r = match port {
                Port::Bar => self.bar.result.take(),
                Port::Ctl => self.ctl.result.take(),
                Port::Fw => self.fw.result.take(),
            };
            if let Some(r) = r {
                return Ok(r);
            }
        }
        Err(format!("AXI4-Lite access {op:?} never completed"))
    }

    fn lite_mut(&mut self, port: Port) -> &mut Lite {
        match port {
            Port::Bar => &mut self.bar,
            Port::Ctl => &mut self.ctl,
            Port::Fw => &mut self.fw,
        }
    }

    /// Starts an access on `port` without waiting (the port must be idle: see
    /// [`Engine::lite_idle`]); its result comes from [`Engine::lite_take`] after some steps.
    pub fn lite_start(&mut self, port: Port, op: LiteOp) {
        self.lite_mut(port).start(op);
    }

    /// True when `port` has no access in flight.
    pub fn lite_idle(&mut self, port: Port) -> bool {
        self.lite_mut(port).cur.is_none()
    }

    /// The result of the access started on `port`, once it completed: (read data, OKAY).
    pub fn lite_take(&mut self, port: Port) -> Option<(u32, bool)> {
        self.lite_mut(port).result.take()
    }

    /// Register BAR write; true when answered OKAY.
    pub fn bar_write(&mut self, addr: u16, data: u32) -> Result<bool, String> {
        self.lite(true, LiteOp::Write { addr, data }).map(|r| r.1)
    }
    /// Register BAR read: (data, OKAY).
    pub fn bar_read(&mut self, addr: u16) -> Result<(u32, bool), String> {
        self.lite(true, LiteOp::Read { addr })
    }
    /// Control core host port (mailbox, core control, IMEM window) write; true when OKAY.
    pub fn fw_write(&mut self, addr: u16, data: u32) -> Result<bool, String> {
        self.lite_on(Port::Fw, LiteOp::Write { addr, data }).map(|r| r.1)
    }
    /// Control core host port read: (data, OKAY).
    pub fn fw_read(&mut self, addr: u16) -> Result<(u32, bool), String> {
        self.lite_on(Port::Fw, LiteOp::Read { addr })
    }
    /// 1: the control core drives the engine's control bus (the firmware owns the tables);
    /// 0: this testbench does (ctl_write / ctl_cmd).
    pub fn set_ctl_from_core(&mut self, on: bool) {
        self.inp.ctl_sel = on as u8;
    }

    /// Control bus write; true when answered OKAY.
    pub fn ctl_write(&mut self, addr: u16, data: u32) -> Result<bool, String> {
        self.lite(false, LiteOp::Write { addr, data }).map(|r| r.1)
    }
    /// Control bus read: (data, OKAY).
    pub fn ctl_read(&mut self, addr: u16) -> Result<(u32, bool), String> {
        self.lite(false, LiteOp::Read { addr })
    }

    /// A control-bus command: staging words, then the command word, then STATUS polled until
    /// not busy. Returns the command's status code.
    pub fn ctl_cmd(&mut self, cmd: u32, words: &[u32]) -> Result<u8, String> {
        use hematite_abi::regs::{HM_CTL_CMD, HM_CTL_STAGE, HM_CTL_STATUS};
        for (k, w) in words.iter().enumerate() {
            if !self.ctl_write(HM_CTL_STAGE as u16 + 4 * k as u16, *w)? {
                return Err(format!("staging word {k} write refused"));
            }
        }
        if !self.ctl_write(HM_CTL_CMD as u16, cmd)? {
            return Err("command write refused".into());
        }
        for _ in 0..1000 {
            let (st, ok) = self.ctl_read(HM_CTL_STATUS as u16)?;
            if !ok {
                return Err("status read refused".into());
            }
            if st >> 31 == 0 {
                return Ok(st as u8);
            }
        }
        Err("control command stayed busy".into())
    }

    /// Counter `i` of the BAR.
    pub fn counter(&mut self, i: u16) -> Result<u32, String> {
        let (v, ok) = self.bar_read(crate::csr::regs::HM_REG_CNT + 4 * i)?;
        if ok {
            Ok(v)
        } else {
            Err(format!("counter {i} read refused"))
        }
    }

    /// Pause or release QP `q` at the rate-limit input.
    pub fn set_pause(&mut self, q: usize, on: bool) {
        if on {
            self.inp.rl_pause[q / 32] |= 1 << (q % 32);
        } else {
            self.inp.rl_pause[q / 32] &= !(1 << (q % 32));
        }
    }

    /// AXI protocol violations the memory model saw.
    pub fn violations(&self) -> &[String] {
        &self.mem.violations
    }
}
