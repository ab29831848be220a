//! The DMA engines (`rtl/dma/`) in co-simulation: the Verilated test top, a host-memory model
//! behind an AXI4 slave with configurable latency, random back-pressure and error ranges, and
//! a driver that runs read and write requests through both engines at once.
//!
//! The memory model also checks the master's AXI protocol: INCR bursts of full beats, aligned
//! addresses, no 4 KiB crossing, WLAST exactly on each burst's last beat; any violation is
//! reported in [`DmaRun::violations`].

use crate::Rng;
use std::collections::{HashMap, VecDeque};
use std::os::raw::c_int;

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct HmDmaIn {
    pub rd_req_addr: u64,
    pub wr_req_addr: u64,
    pub wr_s_tkeep: u64,
    pub rd_req_len: u32,
    pub wr_req_len: u32,
    pub rdata: [u32; 16],
    pub wr_s_tdata: [u32; 16],
    pub rst: u8,
    pub rd_req_tag: u8,
    pub rd_req_valid: u8,
    pub rd_m_tready: u8,
    pub arready: u8,
    pub rid: u8,
    pub rresp: u8,
    pub rlast: u8,
    pub rvalid: u8,
    pub wr_req_tag: u8,
    pub wr_req_valid: u8,
    pub wr_s_tvalid: u8,
    pub wr_s_tlast: u8,
    pub wr_done_ready: u8,
    pub awready: u8,
    pub wready: u8,
    pub bid: u8,
    pub bresp: u8,
    pub bvalid: u8,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct HmDmaOut {
    pub araddr: u64,
    pub awaddr: u64,
    pub rd_m_tkeep: u64,
    pub wstrb: u64,
    pub rd_m_tdata: [u32; 16],
    pub wdata: [u32; 16],
    pub rd_bad: u32,
    pub wr_bad: u32,
    pub wr_len_err: u32,
    pub rd_req_ready: u8,
    pub rd_m_tvalid: u8,
    pub rd_m_tlast: u8,
    pub rd_m_tuser: u8,
    pub rd_m_tid: u8,
    pub arid: u8,
    pub arlen: u8,
    pub arsize: u8,
    pub arburst: u8,
    pub arvalid: u8,
    pub rready: u8,
    pub wr_req_ready: u8,
    pub wr_s_tready: u8,
    pub wr_done_tag: u8,
    pub wr_done_err: u8,
    pub wr_done_valid: u8,
    pub awid: u8,
    pub awlen: u8,
    pub awsize: u8,
    pub awburst: u8,
    pub awvalid: u8,
    pub wlast: u8,
    pub wvalid: u8,
    pub bready: u8,
}

#[repr(C)]
struct HmDma {
    _private: [u8; 0],
}

extern "C" {
    fn hm_dma_new(width: c_int) -> *mut HmDma;
    fn hm_dma_tick(h: *mut HmDma, inp: *const HmDmaIn, out: *mut HmDmaOut);
    fn hm_dma_free(h: *mut HmDma);
}

/// The Verilated DMA test top.
pub struct DmaSim {
    h: *mut HmDma,
    width: usize,
    pub cycle: u64,
}

impl DmaSim {
    pub fn new(width: usize) -> Result<DmaSim, String> {
        // SAFETY: no preconditions; null for unsupported widths.
        let h = unsafe { hm_dma_new(width as c_int) };
        if h.is_null() {
            return Err(format!("unsupported DATA_WIDTH {width}"));
        }
        let mut s = DmaSim { h, width, cycle: 0 };
        let mut i = HmDmaIn { rst: 1, ..Default::default() };
        for _ in 0..4 {
            s.tick(&i);
        }
        i.rst = 0;
        s.tick(&i);
        Ok(s)
    }
    /// Apply `inp`, settle, return the outputs as they were before the rising edge, then clock.
    pub fn tick(&mut self, inp: &HmDmaIn) -> HmDmaOut {
        let mut out = HmDmaOut::default();
        // SAFETY: self.h is live until Drop; inp/out are #[repr(C)] twins of the C structs.
        unsafe { hm_dma_tick(self.h, inp, &mut out) };
        self.cycle += 1;
        out
    }
    pub fn width(&self) -> usize {
        self.width
    }
}

impl Drop for DmaSim {
    fn drop(&mut self) {
        // SAFETY: created by hm_dma_new, freed once.
        unsafe { hm_dma_free(self.h) }
    }
}

/// Sparse byte memory in 4 KiB pages; unwritten bytes read as `fill`.
#[derive(Clone, Debug)]
pub struct PagedMem {
    pages: HashMap<u64, Box<[u8; 4096]>>,
    pub fill: u8,
}

impl PagedMem {
    pub fn new(fill: u8) -> PagedMem {
        PagedMem { pages: HashMap::new(), fill }
    }
    pub fn read(&self, addr: u64, len: usize) -> Vec<u8> {
        (0..len as u64).map(|i| self.byte(addr.wrapping_add(i))).collect()
    }
    pub fn byte(&self, a: u64) -> u8 {
        self.pages.get(&(a >> 12)).map(|p| p[(a & 4095) as usize]).unwrap_or(self.fill)
    }
    pub fn write(&mut self, addr: u64, data: &[u8]) {
        for (i, b) in data.iter().enumerate() {
            self.set(addr.wrapping_add(i as u64), *b);
        }
    }
    pub fn set(&mut self, a: u64, v: u8) {
        let fill = self.fill;
        self.pages.entry(a >> 12).or_insert_with(|| Box::new([fill; 4096]))[(a & 4095) as usize] = v;
    }
    /// Addresses of all bytes whose value differs between the two memories.
    pub fn diff(&self, other: &PagedMem) -> Vec<u64> {
        let mut keys: Vec<u64> = self.pages.keys().chain(other.pages.keys()).copied().collect();
        keys.sort();
        keys.dedup();
        let mut d = Vec::new();
        for p in keys {
            for o in 0..4096u64 {
                let a = (p << 12) | o;
                if self.byte(a) != other.byte(a) {
                    d.push(a);
                }
            }
        }
        d
    }
}

/// Timing and fault settings of the memory model.
#[derive(Clone, Debug)]
pub struct MemCfg {
    /// Cycles from the address handshake to the first read beat / to the write response.
    pub latency: u64,
    /// Percent of cycles each ready/valid of the slave is withheld.
    pub stall_pct: u32,
    /// Byte ranges [start, end) that answer SLVERR (reads return garbage, writes are dropped).
    pub err_ranges: Vec<(u64, u64)>,
    pub seed: u64,
}

impl Default for MemCfg {
    fn default() -> Self {
        MemCfg { latency: 100, stall_pct: 0, err_ranges: Vec::new(), seed: 1 }
    }
}

struct Burst {
    at: u64,
    addr: u64,
    beats: u64,
    id: u8,
    /// Read bursts from an [`ExtMem`]: the whole burst read at the address handshake, and
    /// whether that read failed (every beat then answers SLVERR).
    data: Option<(Vec<u8>, bool)>,
    off: usize,
}

/// Host memory outside this process (the simulated device's client): the AXI slave reads a
/// whole burst at its address handshake and writes a burst when its last beat is in. An access
/// outside what the memory allows (an IOMMU fault) fails as a whole and answers SLVERR.
pub trait ExtMem: Send {
    /// Fills `buf` from `addr`; false when any byte may not be read.
    fn read(&mut self, addr: u64, buf: &mut [u8]) -> bool;
    /// Writes the bytes of `data` whose `mask` entry is true, `data[0]` at `addr`; false (and
    /// nothing written) when any of them may not be written.
    fn write(&mut self, addr: u64, data: &[u8], mask: &[bool]) -> bool;
}

/// AXI4 slave in front of a [`PagedMem`].
pub struct AxiMem {
    pub mem: PagedMem,
    /// When set, DMA goes here instead of `mem`.
    pub ext: Option<Box<dyn ExtMem>>,
    cfg: MemCfg,
    kw: usize,
    rng: Rng,
    ar_q: VecDeque<Burst>,
    aw_q: VecDeque<Burst>,
    w_q: VecDeque<(Vec<u8>, u64, bool)>,
    b_q: VecDeque<(u64, u8, u8)>,
    pub violations: Vec<String>,
    pub read_beats: u64,
    pub write_beats: u64,
    /// When set, every read beat must lie inside one of these [start, end) ranges and every
    /// written byte (by its strobe) inside one of `write_windows`; anything else is reported in
    /// `violations` (the engine fuzzer's "no DMA outside the registered regions").
    pub read_windows: Option<Vec<(u64, u64)>>,
    pub write_windows: Option<Vec<(u64, u64)>>,
}

fn in_windows(w: &[(u64, u64)], a: u64, n: u64) -> bool {
    w.iter().any(|(s, e)| a >= *s && a + n <= *e)
}

impl AxiMem {
    pub fn new(mem: PagedMem, kw: usize, cfg: MemCfg) -> AxiMem {
        let rng = Rng::new(cfg.seed ^ 0xA11);
        AxiMem {
            mem,
            ext: None,
            cfg,
            kw,
            rng,
            ar_q: VecDeque::new(),
            aw_q: VecDeque::new(),
            w_q: VecDeque::new(),
            b_q: VecDeque::new(),
            violations: Vec::new(),
            read_beats: 0,
            write_beats: 0,
            read_windows: None,
            write_windows: None,
        }
    }

    fn in_err(&self, a: u64, n: u64) -> bool {
        self.cfg.err_ranges.iter().any(|(s, e)| a < *e && a + n > *s)
    }

    fn check_burst(&mut self, ch: &str, addr: u64, len: u8, size: u8, burst: u8) {
        let kw = self.kw as u64;
        let beats = len as u64 + 1;
        if size as u32 != kw.trailing_zeros() {
            self.violations.push(format!("{ch}: size {size} for a {kw}-byte bus"));
        }
        if burst != 1 {
            self.violations.push(format!("{ch}: burst type {burst}"));
        }
        if addr % kw != 0 {
            self.violations.push(format!("{ch}: unaligned address {addr:#x}"));
        }
        if (addr >> 12) != ((addr + beats * kw - 1) >> 12) {
            self.violations.push(format!("{ch}: burst at {addr:#x} of {beats} beats crosses 4 KiB"));
        }
    }

    /// Drive the slave's inputs to the DUT for this cycle (before the DUT evaluates).
    pub fn drive(&mut self, now: u64, i: &mut HmDmaIn) {
        let sp = self.cfg.stall_pct;
        i.arready = (!self.rng.pct(sp)) as u8;
        i.awready = (!self.rng.pct(sp)) as u8;
        i.wready = (self.w_q.len() < 4096 && !self.rng.pct(sp)) as u8;
        i.rvalid = 0;
        i.rlast = 0;
        if let Some(b) = self.ar_q.front() {
            if b.at <= now && !self.rng.pct(sp) {
                i.rdata = [0; 16];
                if let Some((d, err)) = &b.data {
                    for (k, v) in d[b.off..b.off + self.kw].iter().enumerate() {
                        i.rdata[k / 4] |= (*v as u32) << (8 * (k % 4));
                    }
                    i.rresp = if *err { 2 } else { 0 };
                } else {
                    let bytes = self.mem.read(b.addr, self.kw);
                    for (k, v) in bytes.iter().enumerate() {
                        i.rdata[k / 4] |= (*v as u32) << (8 * (k % 4));
                    }
                    i.rresp = if self.in_err(b.addr, self.kw as u64) { 2 } else { 0 };
                }
                i.rlast = (b.beats == 1) as u8;
                i.rvalid = 1;
                i.rid = b.id;
            }
        }
        i.bvalid = 0;
        if let Some((at, resp, id)) = self.b_q.front() {
            if *at <= now && !self.rng.pct(sp) {
                i.bvalid = 1;
                i.bresp = *resp;
                i.bid = *id;
            }
        }
    }

    /// Update from the handshakes of this cycle (`i` as driven, `o` the DUT's pre-edge outputs).
    pub fn update(&mut self, now: u64, i: &HmDmaIn, o: &HmDmaOut) {
        let lat = self.cfg.latency;
        if o.arvalid != 0 && i.arready != 0 {
            self.check_burst("AR", o.araddr, o.arlen, o.arsize, o.arburst);
            let beats = o.arlen as u64 + 1;
            if let Some(w) = &self.read_windows {
                let kw = self.kw as u64;
                if let Some(k) = (0..beats).find(|k| !in_windows(w, o.araddr + k * kw, kw)) {
                    let a = o.araddr + k * kw;
                    self.violations.push(format!("AR: read of {kw} bytes at {a:#x} outside the registered regions"));
                }
            }
            let data = self.ext.as_mut().map(|x| {
                let mut d = vec![0u8; beats as usize * self.kw];
                let ok = x.read(o.araddr, &mut d);
                (d, !ok)
            });
            self.ar_q.push_back(Burst { at: now + lat, addr: o.araddr, beats, id: o.arid, data, off: 0 });
        }
        if i.rvalid != 0 && o.rready != 0 {
            self.read_beats += 1;
            let kw = self.kw as u64;
            let b = self.ar_q.front_mut().unwrap();
            b.addr += kw;
            b.off += kw as usize;
            b.beats -= 1;
            if b.beats == 0 {
                self.ar_q.pop_front();
            }
        }
        if o.awvalid != 0 && i.awready != 0 {
            self.check_burst("AW", o.awaddr, o.awlen, o.awsize, o.awburst);
            self.aw_q.push_back(Burst { at: 0, addr: o.awaddr, beats: o.awlen as u64 + 1, id: o.awid, data: None, off: 0 });
        }
        if o.wvalid != 0 && i.wready != 0 {
            self.write_beats += 1;
            let mut d = Vec::with_capacity(self.kw);
            for k in 0..self.kw {
                d.push((o.wdata[k / 4] >> (8 * (k % 4))) as u8);
            }
            let strb = if self.kw == 64 { o.wstrb } else { o.wstrb & ((1u64 << self.kw) - 1) };
            self.w_q.push_back((d, strb, o.wlast != 0));
        }
        // complete write bursts whose address and data are both here
        while let Some(b) = self.aw_q.front() {
            if (self.w_q.len() as u64) < b.beats {
                break;
            }
            let b = self.aw_q.pop_front().unwrap();
            let mut err = false;
            if let Some(x) = self.ext.as_mut() {
                let n = b.beats as usize * self.kw;
                let mut buf = vec![0u8; n];
                let mut mask = vec![false; n];
                for k in 0..b.beats as usize {
                    let (d, strb, last) = self.w_q.pop_front().unwrap();
                    if last != (k as u64 == b.beats - 1) {
                        self.violations.push(format!("W: WLAST {last} on beat {k} of a {}-beat burst at {:#x}", b.beats, b.addr));
                    }
                    for (l, v) in d.iter().enumerate() {
                        buf[k * self.kw + l] = *v;
                        mask[k * self.kw + l] = strb >> l & 1 == 1;
                    }
                }
                err = !x.write(b.addr, &buf, &mask);
                self.b_q.push_back((now + lat, if err { 2 } else { 0 }, b.id));
                continue;
            }
            for k in 0..b.beats {
                let (d, strb, last) = self.w_q.pop_front().unwrap();
                if last != (k == b.beats - 1) {
                    self.violations.push(format!("W: WLAST {last} on beat {k} of a {}-beat burst at {:#x}", b.beats, b.addr));
                }
                let base = b.addr + k * self.kw as u64;
                for (l, v) in d.iter().enumerate() {
                    if strb >> l & 1 == 1 {
                        if let Some(w) = &self.write_windows {
                            if !in_windows(w, base + l as u64, 1) {
                                let a = base + l as u64;
                                self.violations.push(format!("W: byte written at {a:#x} outside the registered regions"));
                            }
                        }
                        if self.in_err(base + l as u64, 1) {
                            err = true;
                        } else {
                            self.mem.set(base + l as u64, *v);
                        }
                    }
                }
            }
            self.b_q.push_back((now + lat, if err { 2 } else { 0 }, b.id));
        }
        if i.bvalid != 0 && o.bready != 0 {
            self.b_q.pop_front();
        }
    }

    pub fn idle(&self) -> bool {
        self.ar_q.is_empty() && self.aw_q.is_empty() && self.w_q.is_empty() && self.b_q.is_empty()
    }
}

/// A read request and what came back.
#[derive(Clone, Debug)]
pub struct DmaRead {
    pub addr: u64,
    pub len: u32,
    pub tag: u8,
}

/// A write request: `len` is what the request says, `data` is the stream actually sent (a
/// different length exercises the length-error path; empty for len 0 sends no packet).
#[derive(Clone, Debug)]
pub struct DmaWrite {
    pub addr: u64,
    pub len: u32,
    pub data: Vec<u8>,
    pub tag: u8,
}

#[derive(Debug, Default)]
pub struct DmaRun {
    /// (tag, bytes, error) per read packet, in order.
    pub reads: Vec<(u8, Vec<u8>, bool)>,
    /// (tag, error) per write completion, in order.
    pub writes: Vec<(u8, bool)>,
    pub cycles: u64,
    pub read_out_beats: u64,
    pub violations: Vec<String>,
    pub rd_bad: u32,
    pub wr_bad: u32,
    pub wr_len_err: u32,
}

/// Run read and write requests through the engines concurrently until everything completed.
/// `stall_pct` withholds the request/stream sources and the sinks' readies at random.
pub fn run_dma(
    sim: &mut DmaSim,
    mem: &mut AxiMem,
    reads: &[DmaRead],
    writes: &[DmaWrite],
    stall_pct: u32,
    seed: u64,
) -> Result<DmaRun, String> {
    let kw = sim.width() / 8;
    let mut rng = Rng::new(seed);
    let mut run = DmaRun::default();
    let mut i = HmDmaIn::default();
    let (mut ri, mut wi, mut wd, mut woff) = (0usize, 0usize, 0usize, 0usize);
    let mut cur: Vec<u8> = Vec::new();
    let want_reads = reads.iter().filter(|r| r.len != 0).count();
    let want_writes = writes.iter().filter(|w| w.len != 0).count();
    let skip_empty = |mut k: usize| {
        while k < writes.len() && writes[k].data.is_empty() {
            k += 1;
        }
        k
    };
    wd = skip_empty(wd);
    let start = sim.cycle;
    let limit = 20_000 + 40 * (reads.iter().map(|r| r.len as u64).sum::<u64>() + writes.iter().map(|w| w.len as u64 + w.data.len() as u64).sum::<u64>()) / kw as u64
        + 4 * mem.cfg.latency * (reads.len() + writes.len()) as u64;
    loop {
        let now = sim.cycle;
        i.rd_req_valid = (ri < reads.len() && !rng.pct(stall_pct)) as u8;
        if i.rd_req_valid != 0 {
            i.rd_req_addr = reads[ri].addr;
            i.rd_req_len = reads[ri].len;
            i.rd_req_tag = reads[ri].tag;
        }
        i.rd_m_tready = (!rng.pct(stall_pct)) as u8;
        i.wr_req_valid = (wi < writes.len() && !rng.pct(stall_pct)) as u8;
        if i.wr_req_valid != 0 {
            i.wr_req_addr = writes[wi].addr;
            i.wr_req_len = writes[wi].len;
            i.wr_req_tag = writes[wi].tag;
        }
        i.wr_s_tvalid = (wd < writes.len() && !rng.pct(stall_pct)) as u8;
        if i.wr_s_tvalid != 0 {
            let d = &writes[wd].data;
            let end = (woff + kw).min(d.len());
            i.wr_s_tdata = [0; 16];
            for (k, v) in d[woff..end].iter().enumerate() {
                i.wr_s_tdata[k / 4] |= (*v as u32) << (8 * (k % 4));
            }
            let n = end - woff;
            i.wr_s_tkeep = if n >= 64 { u64::MAX } else { (1u64 << n) - 1 };
            i.wr_s_tlast = (end == d.len()) as u8;
        }
        i.wr_done_ready = (!rng.pct(stall_pct)) as u8;
        mem.drive(now, &mut i);
        let o = sim.tick(&i);
        mem.update(now, &i, &o);
        if i.rd_req_valid != 0 && o.rd_req_ready != 0 {
            ri += 1;
        }
        if i.wr_req_valid != 0 && o.wr_req_ready != 0 {
            wi += 1;
        }
        if i.wr_s_tvalid != 0 && o.wr_s_tready != 0 {
            woff += kw;
            if woff >= writes[wd].data.len() {
                wd = skip_empty(wd + 1);
                woff = 0;
            }
        }
        if o.rd_m_tvalid != 0 && i.rd_m_tready != 0 {
            run.read_out_beats += 1;
            for k in 0..kw {
                if o.rd_m_tkeep >> k & 1 == 1 {
                    cur.push((o.rd_m_tdata[k / 4] >> (8 * (k % 4))) as u8);
                }
            }
            if o.rd_m_tlast != 0 {
                run.reads.push((o.rd_m_tid, std::mem::take(&mut cur), o.rd_m_tuser != 0));
            }
        }
        if o.wr_done_valid != 0 && i.wr_done_ready != 0 {
            run.writes.push((o.wr_done_tag, o.wr_done_err != 0));
        }
        run.rd_bad = o.rd_bad;
        run.wr_bad = o.wr_bad;
        run.wr_len_err = o.wr_len_err;
        if run.reads.len() == want_reads && run.writes.len() == want_writes && ri == reads.len() && wi == writes.len()
            && wd >= writes.len() && mem.idle()
        {
            // a few more cycles so the counters settle
            for _ in 0..4 {
                i.rd_req_valid = 0;
                i.wr_req_valid = 0;
                i.wr_s_tvalid = 0;
                mem.drive(sim.cycle, &mut i);
                let o = sim.tick(&i);
                mem.update(sim.cycle - 1, &i, &o);
                run.rd_bad = o.rd_bad;
                run.wr_bad = o.wr_bad;
                run.wr_len_err = o.wr_len_err;
            }
            run.cycles = sim.cycle - start;
            break;
        }
        if sim.cycle - start > limit {
            return Err(format!(
                "DMA hang after {} cycles: reads {}/{} (requests taken {}), writes {}/{} (requests {}, streams {})",
                sim.cycle - start,
                run.reads.len(),
                want_reads,
                ri,
                run.writes.len(),
                want_writes,
                wi,
                wd
            ));
        }
    }
    run.violations = mem.violations.clone();
    Ok(run)
}
