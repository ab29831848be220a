//! Verilator co-simulation of Hematite's RTL.
//!
//! [`PktSim`] is the Verilated packet path (the RX and the TX path, each its own model) at 256
//! or 512 bits; one tick is one clock cycle of one path through a single FFI call. [`run_rx`] and
//! [`run_tx`] are testbench drivers: they stream frames or header records through the model
//! with optional random idle cycles and back-pressure and collect what comes out, with cycle
//! counts.

pub mod axil;
pub mod bundle;
pub mod csr;
pub mod demo;
pub mod device;
pub mod dma;
pub mod duo;
pub mod eng;
pub mod fw;
pub mod host;
pub mod rc;
pub mod ffi;
pub mod layout;
pub mod mr;
pub mod np;
pub mod cc;
pub mod ccexp;
pub mod slots;
pub mod qpc;
pub mod qpb;
pub mod rxcheck;
pub mod fuzz;
pub mod fuzz_engine;

pub use hematite_model::record::{DropReason, HdrRecord};
pub use bundle::counters;
pub use layout::{pack_hdr, unpack_hdr, unpack_status, RxStatus};

/// Cases of a random (proptest) test that runs `n` in the suite, times
/// `$HEMATITE_PROPTEST_SCALE` (a positive integer, default 1): the long run of the random
/// co-simulation tests, for the rare schedule the suite's few cases seldom meet
/// (docs/verification.md, "Random tests").
pub fn proptest_cases(n: u32) -> u32 {
    scaled_cases(n, std::env::var("HEMATITE_PROPTEST_SCALE").ok().as_deref())
}

/// `n` times `scale` when it is a positive integer, else `n` (an unset, empty, zero or
/// malformed scale leaves the suite's count).
fn scaled_cases(n: u32, scale: Option<&str>) -> u32 {
    scale.and_then(|s| s.trim().parse::<u32>().ok()).filter(|&k| k > 0).map_or(n, |k| n.saturating_mul(k))
}

/// Supported AXI4-Stream widths.
pub const WIDTHS: [usize; 2] = [256, 512];

/// One Verilated packet path: the RX and the TX path, independent models of one width.
pub struct PktSim {
    rx: ffi::HmRxModel,
    tx: ffi::HmTxModel,
    width: usize,
    /// RX outputs after the last clock edge (what the RX path presents during the next cycle).
    rx_out: ffi::HmRxOut,
    /// TX outputs after the last clock edge.
    tx_out: ffi::HmTxOut,
}

impl PktSim {
    /// Both paths of the given data width (256 or 512), held in reset for a few cycles.
    pub fn new(width: usize) -> Result<PktSim, String> {
        let bad = || format!("unsupported DATA_WIDTH {width} (256 or 512)");
        let mut rx = ffi::HmRxModel::new(width).ok_or_else(bad)?;
        let mut tx = ffi::HmTxModel::new(width).ok_or_else(bad)?;
        rx.hold(&ffi::HmRxIn { rst: 1, ..ffi::HmRxIn::idle() }, 4);
        tx.hold(&ffi::HmTxIn { rst: 1, ..ffi::HmTxIn::idle() }, 4);
        let rx_out = rx.tick(&ffi::HmRxIn::idle());
        let tx_out = tx.tick(&ffi::HmTxIn::idle());
        Ok(PktSim { rx, tx, width, rx_out, tx_out })
    }

    pub fn width(&self) -> usize {
        self.width
    }
    pub fn bytes_per_beat(&self) -> usize {
        self.width / 8
    }
    /// Clock cycles the RX path has run since construction.
    pub fn rx_cycles(&self) -> u64 {
        self.rx.cycles
    }
}

/// Small deterministic PRNG (xorshift64*) for stimulus.
#[derive(Clone, Debug)]
pub struct Rng(u64);
impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x9E37_79B9_7F4A_7C15 | 1)
    }
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// True with probability pct/100.
    pub fn pct(&mut self, pct: u32) -> bool {
        pct > 0 && (self.next() % 100) < pct as u64
    }
}

/// Stimulus options for the drivers.
#[derive(Clone, Debug, Default)]
pub struct Flow {
    /// Percent of cycles in which the source withholds valid.
    pub idle_pct: u32,
    /// Percent of cycles in which the sinks deassert ready.
    pub stall_pct: u32,
    pub seed: u64,
}

fn load_beat(words: &mut [u32; 16], bytes: &[u8]) -> u64 {
    *words = [0; 16];
    for (i, b) in bytes.iter().enumerate() {
        words[i / 4] |= (*b as u32) << (8 * (i % 4));
    }
    if bytes.len() >= 64 {
        u64::MAX
    } else {
        (1u64 << bytes.len()) - 1
    }
}

fn store_beat(words: &[u32; 16], keep: u64, nbytes: usize, out: &mut Vec<u8>) {
    for i in 0..nbytes {
        if keep >> i & 1 == 1 {
            out.push((words[i / 4] >> (8 * (i % 4))) as u8);
        }
    }
}

/// Result of streaming frames through the RX path.
#[derive(Debug, Default)]
pub struct RxRun {
    /// Monitor output, one per input frame, in order.
    pub status: Vec<RxStatus>,
    /// Header records of accepted frames.
    pub hdrs: Vec<HdrRecord>,
    /// Payloads delivered on m_axis (frames with payload only), in order.
    pub payloads: Vec<Vec<u8>>,
    /// Counters by reason code (0 = accepted).
    pub counters: [u32; 15],
    /// Cycles from the first input beat to the last monitor report.
    pub cycles: u64,
    /// Input beats transferred.
    pub in_beats: u64,
    /// Cycles in which the source offered a beat and the RX path was not ready.
    pub in_stalls: u64,
    /// Output beats on m_axis.
    pub out_beats: u64,
}

/// The end of a streaming run: settled once the path has had nothing to do for more than
/// `quiet` cycles in a row.
struct Settle {
    idle: u64,
    quiet: u64,
}

impl Settle {
    fn new(quiet: u64) -> Settle {
        Settle { idle: 0, quiet }
    }
    /// Counts one cycle (`busy`: the path still had work); true once settled.
    fn settled(&mut self, busy: bool) -> bool {
        self.idle = if busy { 0 } else { self.idle + 1 };
        self.idle > self.quiet
    }
}

/// Stream `frames` through the RX path of `sim` and collect everything it reports.
pub fn run_rx(sim: &mut PktSim, frames: &[Vec<u8>], flow: &Flow) -> Result<RxRun, String> {
    run_rx_flagged(sim, frames, &[], flow)
}

/// As [`run_rx`], with `mac_error[i]` driving `s_axis_tuser` on the last beat of frame i (the
/// MAC reporting a bad FCS); missing entries are false.
pub fn run_rx_flagged(sim: &mut PktSim, frames: &[Vec<u8>], mac_error: &[bool], flow: &Flow) -> Result<RxRun, String> {
    let kw = sim.bytes_per_beat();
    let mut rng = Rng::new(flow.seed);
    let mut run = RxRun::default();
    let (mut fi, mut off) = (0usize, 0usize);
    let mut cur_payload: Vec<u8> = Vec::new();
    let mut inp = ffi::HmRxIn::idle();
    let start = sim.rx.cycles;
    let limit = 10_000 + frames.iter().map(|f| f.len() as u64 / kw as u64 + 8).sum::<u64>() * 20;
    // A dropped frame is discarded from the data FIFO silently, one beat a cycle, and the
    // record of an accepted frame behind it is pushed only when its delivery starts: wait
    // without output as long as discarding a full data FIFO takes (several dropped frames can
    // be queued in it; the fuzzer found the run ending while records were still to come).
    let fifo_beats = (hematite_model::MAX_FRAME as u64 / kw as u64 + 32).next_power_of_two();
    let queued = frames.iter().map(|f| f.len() as u64 / kw as u64 + 1).sum::<u64>().min(fifo_beats);
    let mut settle = Settle::new(64 + 2 * queued);
    loop {
        // source
        let offer = fi < frames.len() && !rng.pct(flow.idle_pct);
        inp.s_axis_tvalid = offer as u8;
        if offer {
            let f = &frames[fi];
            let end = (off + kw).min(f.len());
            inp.s_axis_tkeep = load_beat(&mut inp.s_axis_tdata, &f[off..end]);
            inp.s_axis_tlast = (end == f.len()) as u8;
            inp.s_axis_tuser = (end == f.len() && mac_error.get(fi).copied().unwrap_or(false)) as u8;
        }
        inp.m_axis_tready = (!rng.pct(flow.stall_pct)) as u8;
        inp.hdr_ready = (!rng.pct(flow.stall_pct)) as u8;
        let prev = sim.rx_out;
        sim.rx.tick_into(&inp, &mut sim.rx_out);
        // transfers at this edge were decided by `prev` (registered outputs) and `inp`
        if offer {
            if prev.s_axis_tready != 0 {
                run.in_beats += 1;
                off += kw;
                if off >= frames[fi].len() {
                    fi += 1;
                    off = 0;
                }
            } else {
                run.in_stalls += 1;
            }
        }
        if prev.m_axis_tvalid != 0 && inp.m_axis_tready != 0 {
            run.out_beats += 1;
            store_beat(&prev.m_axis_tdata, prev.m_axis_tkeep, kw, &mut cur_payload);
            if prev.m_axis_tlast != 0 {
                run.payloads.push(std::mem::take(&mut cur_payload));
            }
        }
        if prev.hdr_valid != 0 && inp.hdr_ready != 0 {
            run.hdrs.push(unpack_hdr(&prev.hdr_data));
        }
        if sim.rx_out.mon_valid != 0 {
            run.status.push(unpack_status(&sim.rx_out.mon_data));
            run.cycles = sim.rx.cycles - start;
        }
        let busy = fi < frames.len()
            || run.status.len() < frames.len()
            || sim.rx_out.m_axis_tvalid != 0
            || sim.rx_out.hdr_valid != 0;
        if settle.settled(busy) {
            break;
        }
        if sim.rx.cycles - start > limit {
            return Err(format!(
                "RX hang: {} of {} frames reported after {} cycles (fed {} frames)",
                run.status.len(),
                frames.len(),
                sim.rx.cycles - start,
                fi
            ));
        }
    }
    if !cur_payload.is_empty() {
        return Err("RX: payload beats without tlast".into());
    }
    for (i, c) in run.counters.iter_mut().enumerate() {
        *c = sim.rx_out.stat_cnt[i];
    }
    Ok(run)
}

/// One frame out of the TX path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxFrame {
    pub bytes: Vec<u8>,
    /// m_axis_tuser on the last beat: the frame is bad and the MAC must abort it.
    pub bad: bool,
}

/// Result of streaming header records and payloads through the TX path.
#[derive(Debug, Default)]
pub struct TxRun {
    pub frames: Vec<TxFrame>,
    /// Cycles from the first record offered to the last beat out.
    pub cycles: u64,
    pub out_beats: u64,
    /// Cycles between the first and last output beat in which no beat went out.
    pub out_gaps: u64,
    /// frames, length errors, rejected records
    pub counters: [u32; 3],
}

/// One TX job: the record and the payload stream (its length may disagree with
/// `rec.payload_len` to exercise the error path).
#[derive(Debug, Clone)]
pub struct TxJob {
    pub rec: HdrRecord,
    pub payload: Vec<u8>,
}

/// Stream `jobs` through the TX path; `expect_frames` is how many frames to wait for.
pub fn run_tx(sim: &mut PktSim, jobs: &[TxJob], expect_frames: usize, flow: &Flow) -> Result<TxRun, String> {
    let kw = sim.bytes_per_beat();
    let mut rng = Rng::new(flow.seed ^ 0x5A5A);
    let mut run = TxRun::default();
    let mut inp = ffi::HmTxIn::idle();
    let (mut hi, mut pj, mut off) = (0usize, 0usize, 0usize);
    let mut cur: Vec<u8> = Vec::new();
    let start = sim.tx.cycles;
    let mut first_out: Option<u64> = None;
    let mut last_out = 0u64;
    let mut settle = Settle::new(64);
    let limit = 10_000 + jobs.iter().map(|j| j.payload.len() as u64 / kw as u64 + 8).sum::<u64>() * 20;
    // skip payload streams of zero length (no beats)
    let next_pj = |mut p: usize| {
        while p < jobs.len() && jobs[p].payload.is_empty() {
            p += 1;
        }
        p
    };
    pj = next_pj(pj);
    loop {
        let offer_h = hi < jobs.len() && !rng.pct(flow.idle_pct);
        inp.hdr_valid = offer_h as u8;
        if offer_h {
            pack_hdr(&jobs[hi].rec, &mut inp.hdr_data);
        }
        let offer_p = pj < jobs.len() && !rng.pct(flow.idle_pct);
        inp.s_axis_tvalid = offer_p as u8;
        if offer_p {
            let p = &jobs[pj].payload;
            let end = (off + kw).min(p.len());
            inp.s_axis_tkeep = load_beat(&mut inp.s_axis_tdata, &p[off..end]);
            inp.s_axis_tlast = (end == p.len()) as u8;
        }
        inp.m_axis_tready = (!rng.pct(flow.stall_pct)) as u8;
        let prev = sim.tx_out;
        sim.tx.tick_into(&inp, &mut sim.tx_out);
        if offer_h && prev.hdr_ready != 0 {
            hi += 1;
        }
        if offer_p && prev.s_axis_tready != 0 {
            off += kw;
            if off >= jobs[pj].payload.len() {
                pj = next_pj(pj + 1);
                off = 0;
            }
        }
        if prev.m_axis_tvalid != 0 && inp.m_axis_tready != 0 {
            let c = sim.tx.cycles - 1;
            if let Some(_f) = first_out {
                run.out_gaps += c - last_out - 1;
            } else {
                first_out = Some(c);
            }
            last_out = c;
            run.out_beats += 1;
            store_beat(&prev.m_axis_tdata, prev.m_axis_tkeep, kw, &mut cur);
            if prev.m_axis_tlast != 0 {
                run.frames.push(TxFrame { bytes: std::mem::take(&mut cur), bad: prev.m_axis_tuser != 0 });
                run.cycles = sim.tx.cycles - start;
            }
        }
        let busy = hi < jobs.len() || pj < jobs.len() || run.frames.len() < expect_frames || sim.tx_out.m_axis_tvalid != 0;
        if settle.settled(busy) {
            break;
        }
        if sim.tx.cycles - start > limit {
            return Err(format!(
                "TX hang: {} of {} frames after {} cycles (records taken {}, payloads taken {})",
                run.frames.len(),
                expect_frames,
                sim.tx.cycles - start,
                hi,
                pj
            ));
        }
    }
    run.counters = [sim.tx_out.stat_frames, sim.tx_out.stat_len_err, sim.tx_out.stat_bad_req];
    Ok(run)
}

#[cfg(test)]
mod tests {
    use super::scaled_cases;
    #[test]
    fn proptest_scale_multiplies_only_a_positive_integer() {
        assert_eq!(scaled_cases(24, None), 24);
        assert_eq!(scaled_cases(24, Some("100")), 2400);
        assert_eq!(scaled_cases(24, Some(" 3 ")), 72);
        for bad in ["", "0", "-2", "1.5", "many"] {
            assert_eq!(scaled_cases(24, Some(bad)), 24, "scale {bad:?}");
        }
        assert_eq!(scaled_cases(u32::MAX / 2, Some("4")), u32::MAX, "saturates");
    }
}
