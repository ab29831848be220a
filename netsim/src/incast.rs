//! The DCQCN N:1 incast experiment (issue 7): N sender NICs, one receiver NIC and the
//! [`Switch`], stepped in lockstep one clock at a time, with the congestion control of every
//! NIC behind a trait so that a Verilated RTL backend can replace the reference model.
//!
//! ```text
//!  sender 0 ──up[0]──▶ ┌────────┐
//!  sender 1 ──up[1]──▶ │ switch │ ──down[N]──▶ receiver (port N)
//!     …                │        │ ◀──up[N]──── CNPs (class 6)
//!  sender N-1 ───────▶ └────────┘ ──down[i]──▶ CNPs, PFC frames back to sender i
//! ```
//!
//! * **Senders**: one QP each doing a backlogged RDMA WRITE (RC RDMA WRITE MIDDLE frames with
//!   `payload_bytes` of payload, DSCP 26 → the lossless class 3, ECT(0)). A sender starts a frame
//!   in a cycle when its flow has started, its MAC is ready (the uplink holds no frame behind
//!   the one being serialised), the data class is not paused by a PFC frame from the switch,
//!   and [`SenderCc::may_send`] allows it; it then reports `(qp, frame bytes)` to
//!   [`SenderCc::step`] in the same cycle. A CNP for its QP is fed to [`SenderCc::step`] in the
//!   cycle it arrives.
//! * **Receiver**: for every data frame that arrives with IP ECN = CE it passes the local QP to
//!   [`ReceiverCc::step`]; when that asks for a CNP for a QP it builds a RoCEv2 CNP (BTH opcode
//!   0x81, BECN, DestQP = the sender's QP, DSCP `cnp_dscp` = 48 → class 6, ECT(0): what the
//!   engine sends, [`cnp_spec`]) and sends it through the switch. ACKs are not modelled (an RC
//!   WRITE stream's ACKs are small frames in the uncongested reverse direction; they carry no
//!   congestion signal in DCQCN).
//! * **Time compression** by `scale` = s: the DCQCN registers come from
//!   [`HwParams::from_cc`] with `time_scale` = s (timers and the byte counter ÷ s), the switch
//!   from [`SwitchConfig::scaled`] (buffer, Kmin/Kmax, XOFF/XON, pause time ÷ s; the PFC
//!   headroom is recomputed for the scaled round trip), link delays, the flow stagger and the
//!   sample window are ÷ s. Rates (bytes per cycle) and the frame size are not scaled. All
//!   reported times are real (× s) µs; queue depths are given as simulated bytes and × s.
//!   Because the frame size is not compressed, a flow sends s times fewer frames per real µs
//!   than it would uncompressed, and RED marks per frame: the marks (hence CNPs) per real µs
//!   would drop s-fold. The runner therefore multiplies Pmax by s (`pmax_compensation`), which
//!   keeps the marking probability per byte, and refuses a scale where that exceeds 100 %.
//!
//! See `docs/experiments.md` for the definitions of the reported figures.

use crate::pkt::{self, RoceSpec, ECN_CE, ECN_ECT0, OPCODE_CNP};
use crate::{pfc_headroom_bytes, DepthTrace, EcnConfig, Link, LinkRate, PfcConfig, Switch, SwitchConfig, TraceConfig, WireFormat};
use hematite_model::dcqcn::{
    HwParams, Np, NpCfg, NpIn, Pacer, PacerCfg, Rp, RpCfg, RpIn, CC_PARAMS, NVIDIA_DEFAULTS, PAPER, RATE_FRAC,
};
use std::collections::VecDeque;
use std::fmt::Write as _;

/// Clock of every NIC and the switch (MHz): 100 Gb/s = 50 bytes per cycle.
pub const CLK_MHZ: u64 = 250;
/// Line rate of every link (Gb/s).
pub const LINE_GBPS: u64 = 100;
/// BTH opcode of the data frames: RC RDMA WRITE MIDDLE (no RETH, so every frame of the long
/// WRITE has the same size).
pub const OPCODE_WRITE_MIDDLE: u8 = 0x07;
/// Data DSCP (Hematite's default; the switch's default map puts it in the lossless class 3).
pub const DATA_DSCP: u8 = 26;
/// QP number of sender i's QP: `SENDER_QPN_BASE + i`.
pub const SENDER_QPN_BASE: u32 = 2;
/// QP number of the receiver's QP of flow i: `RECEIVER_QPN_BASE + i`.
pub const RECEIVER_QPN_BASE: u32 = 2;

// ------------------------------------------------------------------------------------------
// Congestion-control backends
// ------------------------------------------------------------------------------------------

/// Sender-side DCQCN of one NIC (reaction point + pacer), one `step` per clock.
pub trait SenderCc {
    /// May QP `qp` start a frame in this cycle? Called before `step` of the same cycle.
    fn may_send(&mut self, qp: u32) -> bool;
    /// One clock: a CNP for `cnp` arrived this cycle; `tx` = (qp, frame bytes without FCS) of a frame started this cycle.
    fn step(&mut self, cnp: Option<u32>, tx: Option<(u32, u32)>);
    /// Current pacing rate of `qp` in rate units (2^-20 bytes/cycle) and whether it is limited.
    fn rate(&self, qp: u32) -> (u32, bool);
}

/// Receiver-side DCQCN (notification point), one `step` per clock; returns the QP to send a CNP for.
pub trait ReceiverCc {
    /// One clock: `ce` = the local QP of a data frame that arrived with ECN = CE this cycle.
    fn step(&mut self, ce: Option<u32>) -> Option<u32>;
}

/// What the runner asks a backend to build for one NIC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NicSpec {
    /// The DCQCN registers in use (already time-compressed by `time_scale`).
    pub params: HwParams,
    /// Smallest QP table that covers every QP number this NIC uses (a backend may have more).
    pub nqp: usize,
    /// Which NIC: sender 0..N−1, or N for the receiver.
    pub index: usize,
    /// The time compression factor the parameters were made with (for backends that size
    /// byte quantities of their own, e.g. a pacer burst).
    pub time_scale: u32,
    /// The largest frame the NIC sends (bytes without FCS).
    pub max_frame: u32,
}

/// Builds the congestion control of each NIC of a run. The runner calls [`sender`](Self::sender)
/// once per sender NIC and [`receiver`](Self::receiver) once for the receiver NIC, before cycle 0;
/// every returned object is then stepped once per clock from cycle 0 on.
pub trait BackendFactory {
    /// A short description for the output headers (e.g. "reference model").
    fn describe(&self) -> String {
        String::from("unnamed backend")
    }
    /// The sender-side congestion control of sender NIC `nic.index`.
    fn sender(&self, nic: &NicSpec) -> Result<Box<dyn SenderCc>, String>;
    /// The receiver-side congestion control of the receiver NIC.
    fn receiver(&self, nic: &NicSpec) -> Result<Box<dyn ReceiverCc>, String>;
}

/// The reference model (`hematite_model::dcqcn`): [`Rp`] + [`Pacer`] on the sender, [`Np`] on
/// the receiver.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ModelBackend {
    /// Pacer bucket depth in bytes; `None`: max(16 KiB / time_scale, 2 × max_frame) (the
    /// model's default burst, time-compressed like every byte quantity, but never below the two
    /// maximum frames the pacer specification requires).
    pub burst_bytes: Option<u32>,
}

/// [`SenderCc`] of the reference model: an [`Rp`] and a [`Pacer`] sharing one time counter.
#[derive(Debug, Clone)]
pub struct ModelSender {
    /// The reaction point.
    pub rp: Rp,
    /// The pacer.
    pub pacer: Pacer,
}

impl SenderCc for ModelSender {
    fn may_send(&mut self, qp: u32) -> bool {
        self.pacer.may_send(qp, self.rp.now())
    }
    fn step(&mut self, cnp: Option<u32>, tx: Option<(u32, u32)>) {
        // The pacer takes every frame at the time it starts (limited or not); the RP gets the
        // same report this clock; a rate update of this clock goes to the pacer.
        if let Some((q, b)) = tx {
            self.pacer.sent(q, b, self.rp.now());
        }
        let out = self.rp.step(&RpIn { cnp, tx });
        if let Some(u) = out.rate {
            self.pacer.update(&u);
        }
    }
    fn rate(&self, qp: u32) -> (u32, bool) {
        match self.pacer.qp(qp) {
            Some(e) => (e.rate, e.limited),
            None => self.rp.rate(qp),
        }
    }
}

/// [`ReceiverCc`] of the reference model: an [`Np`] (its CNP requests are always accepted).
#[derive(Debug, Clone)]
pub struct ModelReceiver {
    /// The notification point.
    pub np: Np,
}

impl ReceiverCc for ModelReceiver {
    fn step(&mut self, ce: Option<u32>) -> Option<u32> {
        self.np.step(&NpIn { ce, cnp_full: false }).cnp
    }
}

impl BackendFactory for ModelBackend {
    fn describe(&self) -> String {
        String::from("reference model (hematite_model::dcqcn Rp + Pacer, Np)")
    }
    fn sender(&self, nic: &NicSpec) -> Result<Box<dyn SenderCc>, String> {
        let burst = self
            .burst_bytes
            .unwrap_or_else(|| (16_384 / nic.time_scale.max(1)).max(2 * nic.max_frame))
            .clamp(1, hematite_model::dcqcn::PACER_BURST_MAX);
        let rp = Rp::new(nic.params, RpCfg { nqp: nic.nqp, ..RpCfg::default() });
        let pacer = Pacer::new(PacerCfg { nqp: nic.nqp, burst_bytes: burst, time_bits: 32 }, nic.params.line_rate, 0);
        Ok(Box::new(ModelSender { rp, pacer }))
    }
    fn receiver(&self, nic: &NicSpec) -> Result<Box<dyn ReceiverCc>, String> {
        Ok(Box::new(ModelReceiver { np: Np::new(&nic.params, NpCfg { nqp: nic.nqp, time_bits: 32 }) }))
    }
}

/// "DCQCN off": never limits a QP, never asks for a CNP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OffBackend;

/// [`SenderCc`] of [`OffBackend`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OffSender {
    line_rate: u32,
}

impl SenderCc for OffSender {
    fn may_send(&mut self, _qp: u32) -> bool {
        true
    }
    fn step(&mut self, _cnp: Option<u32>, _tx: Option<(u32, u32)>) {}
    fn rate(&self, _qp: u32) -> (u32, bool) {
        (self.line_rate, false)
    }
}

/// [`ReceiverCc`] of [`OffBackend`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OffReceiver;

impl ReceiverCc for OffReceiver {
    fn step(&mut self, _ce: Option<u32>) -> Option<u32> {
        None
    }
}

impl BackendFactory for OffBackend {
    fn describe(&self) -> String {
        String::from("DCQCN off (no rate limiting, no CNPs)")
    }
    fn sender(&self, nic: &NicSpec) -> Result<Box<dyn SenderCc>, String> {
        Ok(Box::new(OffSender { line_rate: nic.params.line_rate }))
    }
    fn receiver(&self, _nic: &NicSpec) -> Result<Box<dyn ReceiverCc>, String> {
        Ok(Box::new(OffReceiver))
    }
}

// ------------------------------------------------------------------------------------------
// Configuration
// ------------------------------------------------------------------------------------------

/// Default time compression of the experiments.
pub const DEFAULT_SCALE: u32 = 2;

/// One incast run. Every time and byte quantity is given **uncompressed** (real); the runner
/// divides by `scale`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IncastConfig {
    /// Number of senders (≥ 1).
    pub n: usize,
    /// Label of the DCQCN parameter set (for the output).
    pub preset: String,
    /// The 19 DCQCN words (firmware order and units), e.g. [`NVIDIA_DEFAULTS`] or [`PAPER`].
    pub cc_params: [u32; CC_PARAMS],
    /// DCQCN on (the given backend) or off ([`OffBackend`]); the CLI picks the backend.
    pub cc_on: bool,
    /// PFC generation at the switch (the senders always honour PFC frames).
    pub pfc: bool,
    /// Time compression factor s (≥ 1).
    pub scale: u32,
    /// Run length, real µs.
    pub duration_us: u64,
    /// Flow i starts at i × `stagger_us` (real µs).
    pub stagger_us: u64,
    /// One-way propagation delay of every link, real ns.
    pub link_delay_ns: u64,
    /// RDMA payload per data frame (bytes; frame = payload + 58 header/ICRC bytes).
    pub payload_bytes: u16,
    /// Sample window, real µs.
    pub window_us: u64,
    /// Convergence window, real µs (windows of this length from the last flow's start).
    pub conv_window_us: u64,
    /// Shared buffer, real bytes.
    pub buffer_bytes: u64,
    /// ECN marking at the switch (real byte thresholds); `None`: no marking.
    pub ecn: Option<EcnConfig>,
    /// PFC thresholds (real bytes; the headroom is recomputed for the scaled round trip).
    pub pfc_cfg: PfcConfig,
    /// Switch PRNG seed (RED draws).
    pub seed: u64,
    /// Capture the first `n` bytes of every frame at every switch port (tests, pcaps).
    pub capture_snaplen: Option<u32>,
    /// Multiply the ECN Pmax by `scale` (see the module documentation: the frame size is not
    /// compressed, so without it a flow sees `scale` times fewer marks per real µs). A scale
    /// for which Pmax × scale exceeds 100 % is refused.
    pub pmax_compensation: bool,
}

impl IncastConfig {
    /// The defaults of the experiment for `n` senders with a preset ("nvidia" or "paper").
    pub fn new(n: usize, preset: &str, cc_on: bool) -> Result<IncastConfig, String> {
        let (cc_params, duration_us) = preset_params(preset)?;
        Ok(IncastConfig {
            n,
            preset: preset.to_string(),
            cc_params,
            cc_on,
            pfc: true,
            scale: DEFAULT_SCALE,
            duration_us,
            stagger_us: DEFAULT_STAGGER_US,
            link_delay_ns: 1000,
            payload_bytes: 1024,
            window_us: DEFAULT_WINDOW_US,
            conv_window_us: DEFAULT_CONV_WINDOW_US,
            buffer_bytes: 4_000_000,
            ecn: Some(DEFAULT_ECN),
            pfc_cfg: PfcConfig::default(),
            seed: 1,
            capture_snaplen: None,
            pmax_compensation: true,
        })
    }

    /// Data frame length (without FCS).
    pub fn frame_bytes(&self) -> u32 {
        self.payload_bytes as u32 + 58
    }
}

/// The experiment's ECN marking (real bytes; `docs/experiments.md` §2): the DCQCN paper's
/// thresholds (Kmin 5 KB, Kmax 200 KB at 40 GbE) scaled to 100 Gb/s by the line-rate ratio 2.5
/// (the bandwidth scaling HPCC's `run.py` applies to its thresholds), with the Pmax of HPCC's
/// DCQCN preset, 20 %, which is tuned for the NVIDIA-style reaction point (α updated every 1 µs,
/// 4 µs decrease window; the paper's 1 % goes with its 50 µs CNP interval). With the default PFC
/// XOFF of 256 KB per ingress, marking starts (Kmin) far below XOFF even if one ingress holds the
/// whole queue, and reaches 100 % (Kmax) before 2 × XOFF, so for N ≥ 2 with equal shares ECN
/// acts before PFC.
pub const DEFAULT_ECN: EcnConfig =
    EcnConfig { kmin_bytes: 12_500, kmax_bytes: 500_000, pmax_ppm: 200_000, class_mask: 0xFF };

/// The switch's queue-depth trace in the experiments (real units; scaled like everything else):
/// a sample when the depth moved by 8 KB or more (or reached or left 0), else at most one per
/// 2 µs (the switch model's default, 1000 B / 4 µs, records every frame); at most 2^20 samples
/// per trace.
pub const DEPTH_TRACE: TraceConfig = TraceConfig { step_bytes: 8_000, interval_cycles: 500, max_samples: 1 << 20 };

/// Default flow stagger, real µs.
pub const DEFAULT_STAGGER_US: u64 = 100;
/// Default sample window, real µs.
pub const DEFAULT_WINDOW_US: u64 = 100;
/// Convergence: Jain's index at least this in every convergence window …
pub const CONV_JAIN: f64 = 0.95;
/// … and the bottleneck utilisation at least this.
pub const CONV_UTIL: f64 = 0.90;
/// Default convergence window, real µs.
pub const DEFAULT_CONV_WINDOW_US: u64 = 1000;
/// Default run length with the NVIDIA defaults, real µs (see `docs/experiments.md`).
pub const DEFAULT_DURATION_NVIDIA_US: u64 = 150_000;
/// Default run length with the paper preset, real µs.
pub const DEFAULT_DURATION_PAPER_US: u64 = 150_000;

/// The DCQCN words and default run length of a preset name ("nvidia" / "paper").
pub fn preset_params(name: &str) -> Result<([u32; CC_PARAMS], u64), String> {
    match name {
        "nvidia" => Ok((NVIDIA_DEFAULTS, DEFAULT_DURATION_NVIDIA_US)),
        "paper" => Ok((PAPER, DEFAULT_DURATION_PAPER_US)),
        _ => Err(format!("unknown preset {name:?} (nvidia, paper)")),
    }
}

/// Rate units (2^-20 bytes per cycle at [`CLK_MHZ`]) to Gb/s.
pub fn ru_to_gbps(ru: u32) -> f64 {
    ru as f64 * 8.0 * CLK_MHZ as f64 / (1u64 << RATE_FRAC) as f64 / 1000.0
}

/// Jain's fairness index (Σx)² / (n·Σx²); 1 for an empty or all-zero vector.
pub fn jain(x: &[f64]) -> f64 {
    let s: f64 = x.iter().sum();
    let q: f64 = x.iter().map(|v| v * v).sum();
    if x.is_empty() || q == 0.0 {
        1.0
    } else {
        s * s / (x.len() as f64 * q)
    }
}

// ------------------------------------------------------------------------------------------
// Results
// ------------------------------------------------------------------------------------------

/// One sample window.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// End of the window (simulated cycle).
    pub cycle: u64,
    /// End of the window, real µs.
    pub time_us: f64,
    /// Per-flow throughput at the receiver in the window (frame bytes without FCS, Gb/s).
    pub gbps: Vec<f64>,
    /// Per-flow pacing rate at the end of the window (Gb/s; the line rate when not limited).
    pub rate_gbps: Vec<f64>,
    /// Per-flow "rate limited" flag at the end of the window.
    pub limited: Vec<bool>,
    /// Bottleneck queue at the end of the window (simulated bytes).
    pub queue: u64,
    /// Largest bottleneck queue in the window (simulated bytes).
    pub queue_max: u64,
    /// Bottleneck utilisation in the window (wire bytes / line capacity).
    pub util: f64,
    /// Jain's index of the window's per-flow throughputs (over the flows started by the window's start).
    pub jain: f64,
    /// Flows started by the window's start.
    pub active: usize,
    /// PFC frames the switch sent so far.
    pub pfc_frames: u64,
    /// CNPs the receiver sent so far.
    pub cnps: u64,
    /// Frames the switch dropped so far.
    pub drops: u64,
}

/// The figures of one run (definitions in `docs/experiments.md`).
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// Preset label.
    pub preset: String,
    /// Senders.
    pub n: usize,
    /// DCQCN on.
    pub cc_on: bool,
    /// PFC on.
    pub pfc: bool,
    /// Time compression.
    pub scale: u32,
    /// Backend description.
    pub backend: String,
    /// Run length, real µs.
    pub duration_us: f64,
    /// Start of the steady-state window (the last half of the run), real µs.
    pub steady_from_us: f64,
    /// Start of the last flow, real µs.
    pub last_start_us: f64,
    /// Jain's index of the per-flow mean throughputs over the steady-state window.
    pub fairness: f64,
    /// Per-flow mean throughput over the steady-state window (Gb/s).
    pub flow_gbps: Vec<f64>,
    /// Bottleneck utilisation over the steady-state window.
    pub util: f64,
    /// Convergence time after the last flow started (real µs), `None` = not converged.
    pub converge_us: Option<f64>,
    /// The same in simulated cycles.
    pub converge_cycles: Option<u64>,
    /// Smallest / largest per-flow mean throughput over the steady-state window.
    pub min_max_ratio: f64,
    /// Peak bottleneck queue over the run (simulated bytes).
    pub peak_queue: u64,
    /// Peak bottleneck queue in the steady-state window (simulated bytes).
    pub steady_queue_max: u64,
    /// Mean bottleneck queue in the steady-state window (simulated bytes).
    pub steady_queue_mean: f64,
    /// PFC frames sent by the switch (XOFF, refresh and XON).
    pub pfc_frames: u64,
    /// XOFF transitions (pauses started) at the switch.
    pub xoff: u64,
    /// PFC frames sent by the switch during the steady-state window.
    pub pfc_frames_steady: u64,
    /// XOFF transitions during the steady-state window.
    pub xoff_steady: u64,
    /// Frames dropped during the steady-state window.
    pub drops_steady: u64,
    /// Cycles senders spent paused (data class), summed over senders.
    pub paused_cycles: u64,
    /// Frames dropped by the switch.
    pub drops: u64,
    /// Frames the switch marked CE.
    pub ecn_marked: u64,
    /// CNPs sent by the receiver.
    pub cnps_sent: u64,
    /// CNPs received by the senders.
    pub cnps_rx: u64,
    /// Base round trip (empty queues: data to the receiver, CNP back), cycles.
    pub base_rtt_cycles: u64,
    /// Bandwidth-delay product: base RTT at line rate (simulated bytes).
    pub bdp_bytes: u64,
    /// Kmin / Kmax in use (simulated bytes); 0 without ECN.
    pub kmin: u64,
    /// Kmax in use (simulated bytes).
    pub kmax: u64,
    /// Simulated cycles.
    pub cycles: u64,
}

impl Summary {
    /// Simulated bytes → real (uncompressed) KB (1000 bytes).
    pub fn real_kb(&self, sim_bytes: f64) -> f64 {
        sim_bytes * self.scale as f64 / 1000.0
    }
    /// "on" / "off".
    pub fn cc_str(&self) -> &'static str {
        if self.cc_on {
            "on"
        } else {
            "off"
        }
    }
    /// Header of [`csv_row`](Self::csv_row).
    pub const CSV_HEADER: &'static str = "preset,n,cc,pfc,backend,scale,duration_us,cycles,steady_from_us,fairness,min_max_ratio,converge_us,converge_cycles,util,\
peak_queue_kb_sim,peak_queue_kb,steady_queue_mean_kb_sim,steady_queue_mean_kb,steady_queue_max_kb_sim,steady_queue_max_kb,\
pfc_frames,xoff,pfc_frames_steady,xoff_steady,paused_us,drops,drops_steady,ecn_marked,cnps_sent,cnps_rx,base_rtt_cycles,bdp_kb_sim,kmin_kb_sim,kmax_kb_sim,flow_gbps";
    /// One line of `summary.csv` (KB = 1000 bytes; "_sim" = simulated, else × scale).
    pub fn csv_row(&self) -> String {
        let kb = |b: f64| b / 1000.0;
        let s = self.scale as f64;
        format!(
            "{},{},{},{},{},{},{:.0},{},{:.0},{:.4},{:.4},{},{},{:.4},{:.1},{:.1},{:.1},{:.1},{:.1},{:.1},{},{},{},{},{:.1},{},{},{},{},{},{},{:.1},{:.1},{:.1},{}",
            self.preset,
            self.n,
            self.cc_str(),
            if self.pfc { "on" } else { "off" },
            self.backend.replace(',', ";"),
            self.scale,
            self.duration_us,
            self.cycles,
            self.steady_from_us,
            self.fairness,
            self.min_max_ratio,
            self.converge_us.map_or(String::from("not converged"), |c| format!("{c:.0}")),
            self.converge_cycles.map_or(String::from("not converged"), |c| c.to_string()),
            self.util,
            kb(self.peak_queue as f64),
            kb(self.peak_queue as f64 * s),
            kb(self.steady_queue_mean),
            kb(self.steady_queue_mean * s),
            kb(self.steady_queue_max as f64),
            kb(self.steady_queue_max as f64 * s),
            self.pfc_frames,
            self.xoff,
            self.pfc_frames_steady,
            self.xoff_steady,
            self.paused_cycles as f64 * s / CLK_MHZ as f64,
            self.drops,
            self.drops_steady,
            self.ecn_marked,
            self.cnps_sent,
            self.cnps_rx,
            self.base_rtt_cycles,
            kb(self.bdp_bytes as f64),
            kb(self.kmin as f64),
            kb(self.kmax as f64),
            self.flow_gbps.iter().map(|g| format!("{g:.2}")).collect::<Vec<_>>().join(";"),
        )
    }
}

/// One convergence window (from the last flow's start on).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ConvWindow {
    /// Start (simulated cycle).
    pub start: u64,
    /// Jain's index of the per-flow throughputs in the window.
    pub jain: f64,
    /// Bottleneck utilisation in the window.
    pub util: f64,
}

/// Everything a run produces.
#[derive(Debug, Clone)]
pub struct IncastResult {
    /// The configuration.
    pub cfg: IncastConfig,
    /// The DCQCN registers used (time-compressed).
    pub params: HwParams,
    /// The switch configuration used (time-compressed).
    pub switch_cfg: SwitchConfig,
    /// Sample windows.
    pub samples: Vec<Sample>,
    /// Convergence windows.
    pub conv: Vec<ConvWindow>,
    /// The figures.
    pub summary: Summary,
}

impl IncastResult {
    /// The time series as CSV: `#` comment lines (parameters, scale, the summary), then a
    /// header and one line per sample window.
    pub fn timeseries_csv(&self) -> String {
        let c = &self.cfg;
        let s = &self.summary;
        let mut o = String::new();
        let _ = writeln!(
            o,
            "# dcqcn incast: preset={} n={} cc={} pfc={} backend={} scale={} (times are real µs = simulated × {}; queue_kb = simulated × {}, queue_kb_sim = simulated)",
            c.preset,
            c.n,
            s.cc_str(),
            if c.pfc { "on" } else { "off" },
            s.backend.replace(',', ";"),
            c.scale,
            c.scale,
            c.scale
        );
        let _ = writeln!(
            o,
            "# clk={} MHz line={} Gb/s payload={} B frame={} B link_delay={} ns stagger={} µs window={} µs conv_window={} µs duration={} µs buffer={} B ecn={} pfc_xoff={} B pfc_xon={} B (real values) seed={}",
            CLK_MHZ,
            LINE_GBPS,
            c.payload_bytes,
            c.frame_bytes(),
            c.link_delay_ns,
            c.stagger_us,
            c.window_us,
            c.conv_window_us,
            c.duration_us,
            c.buffer_bytes,
            c.ecn.map_or(String::from("off"), |e| format!(
                "kmin={};kmax={};pmax_ppm={}",
                e.kmin_bytes, e.kmax_bytes, e.pmax_ppm
            )),
            c.pfc_cfg.xoff_bytes,
            c.pfc_cfg.xon_bytes,
            c.seed
        );
        let _ = writeln!(
            o,
            "# in use (simulated): {} ; cc_params={:?} ; hw_params={:?}",
            self.switch_cfg.ecn.map_or(String::from("ecn off"), |e| format!(
                "kmin={} B kmax={} B pmax_ppm={} ({})",
                e.kmin_bytes,
                e.kmax_bytes,
                e.pmax_ppm,
                if c.pmax_compensation { "Pmax x scale" } else { "Pmax not compensated" }
            )),
            c.cc_params,
            self.params
        );
        let _ = writeln!(
            o,
            "# summary: fairness={:.4} converge_us={} util={:.4} peak_queue_kb={:.1} steady_queue_mean_kb={:.1} steady_queue_max_kb={:.1} pfc_frames={} (steady {}) drops={} (steady {}) cnps={} steady_from_us={:.0}",
            s.fairness,
            s.converge_us.map_or(String::from("not converged"), |v| format!("{v:.0}")),
            s.util,
            s.real_kb(s.peak_queue as f64),
            s.real_kb(s.steady_queue_mean),
            s.real_kb(s.steady_queue_max as f64),
            s.pfc_frames,
            s.pfc_frames_steady,
            s.drops,
            s.drops_steady,
            s.cnps_sent,
            s.steady_from_us
        );
        let n = c.n;
        let mut h = String::from("time_us,cycle");
        for i in 0..n {
            let _ = write!(h, ",f{i}_gbps");
        }
        for i in 0..n {
            let _ = write!(h, ",f{i}_rate_gbps");
        }
        h.push_str(",queue_kb,queue_kb_sim,queue_max_kb,util,jain,active,pfc_frames,cnps,drops");
        o.push_str(&h);
        o.push('\n');
        for sm in &self.samples {
            let _ = write!(o, "{:.1},{}", sm.time_us, sm.cycle);
            for g in &sm.gbps {
                let _ = write!(o, ",{g:.3}");
            }
            for r in &sm.rate_gbps {
                let _ = write!(o, ",{r:.3}");
            }
            let _ = writeln!(
                o,
                ",{:.2},{:.3},{:.2},{:.4},{:.4},{},{},{},{}",
                sm.queue as f64 * c.scale as f64 / 1000.0,
                sm.queue as f64 / 1000.0,
                sm.queue_max as f64 * c.scale as f64 / 1000.0,
                sm.util,
                sm.jain,
                sm.active,
                sm.pfc_frames,
                sm.cnps,
                sm.drops
            );
        }
        o
    }
}

// ------------------------------------------------------------------------------------------
// The runner
// ------------------------------------------------------------------------------------------

struct SenderNic {
    cc: Box<dyn SenderCc>,
    qpn: u32,
    spec: RoceSpec,
    psn: u32,
    start: u64,
    paused_until: [u64; 8],
    cnp_in: VecDeque<u32>,
    cnps_rx: u64,
    paused_cycles: u64,
}

struct ReceiverNic {
    cc: Box<dyn ReceiverCc>,
    ce_in: VecDeque<u32>,
    cnps_sent: u64,
}

/// MAC of sender i.
pub fn sender_mac(i: usize) -> [u8; 6] {
    [0x02, 0x48, 0x4D, 0x01, 0x00, i as u8]
}
/// MAC of the receiver.
pub const RECEIVER_MAC: [u8; 6] = [0x02, 0x48, 0x4D, 0x02, 0x00, 0x00];
/// IPv4 address of sender i (10.0.1.i+1).
pub fn sender_ip(i: usize) -> u128 {
    0x0A00_0101 + i as u128
}
/// IPv4 address of the receiver (10.0.2.1).
pub const RECEIVER_IP: u128 = 0x0A00_0201;

/// The CNP the receiver sends for flow i, as the engine sends it (`docs/dcqcn.md` §11): BTH
/// opcode 0x81, BECN, DestQP = sender i's QP, P_Key 0xFFFF, PSN 0, 16 reserved bytes, DSCP
/// `dscp` (`cnp_dscp`, 48 by default), ECT(0), untagged IPv4; 74 bytes without FCS.
pub fn cnp_spec(flow: usize, dscp: u8) -> RoceSpec {
    RoceSpec {
        dscp,
        ecn: ECN_ECT0,
        psn: 0,
        ip_src: RECEIVER_IP,
        ip_dst: sender_ip(flow),
        ..RoceSpec::cnp(sender_mac(flow), RECEIVER_MAC, SENDER_QPN_BASE + flow as u32)
    }
}

/// A running incast experiment. [`Incast::run`] runs it to the end; [`Incast::step`] and
/// [`Incast::switch`] let tests look inside.
pub struct Incast {
    cfg: IncastConfig,
    params: HwParams,
    backend: String,
    sw: Switch,
    up: Vec<Link>,
    down: Vec<Link>,
    snd: Vec<SenderNic>,
    rcv: ReceiverNic,
    now: u64,
    end: u64,
    window: u64,
    steady_from: u64,
    data_class: u8,
    wire: WireFormat,
    // measurement
    win_bytes: Vec<u64>,
    win_wire: u64,
    win_qmax: u64,
    steady_bytes: Vec<u64>,
    steady_wire: u64,
    steady_qsum: u128,
    steady_qmax: u64,
    at_steady: (u64, u64, u64),
    samples: Vec<Sample>,
    base_rtt: u64,
    last_start: u64,
    conv_window: u64,
    conv_bytes: Vec<u64>,
    conv_wire: u64,
    conv: Vec<ConvWindow>,
}

fn cycles_of_us(us: u64, scale: u32) -> u64 {
    (us * CLK_MHZ + scale as u64 / 2) / scale as u64
}

impl Incast {
    /// Sets up a run with `backend` for the congestion control (used when `cfg.cc_on`; DCQCN off
    /// uses [`OffBackend`]).
    pub fn new(cfg: IncastConfig, backend: &dyn BackendFactory) -> Result<Incast, String> {
        let s = cfg.scale;
        if s == 0 {
            return Err(String::from("scale must be >= 1"));
        }
        if cfg.n == 0 || cfg.n > 250 {
            return Err(String::from("n must be 1..=250"));
        }
        if cfg.payload_bytes == 0 || cfg.payload_bytes % 4 != 0 || cfg.payload_bytes > 4096 {
            return Err(String::from("payload must be a multiple of 4 in 4..=4096"));
        }
        let frame = cfg.frame_bytes() as u64;
        let params = HwParams::from_cc(&cfg.cc_params, CLK_MHZ as u32, (LINE_GBPS * 1000) as u32, s);
        // Switch: 100G ports, the receiver on port n.
        let mut base = SwitchConfig::new(cfg.n + 1, LINE_GBPS, CLK_MHZ);
        base.buffer_bytes = cfg.buffer_bytes;
        base.ecn = cfg.ecn;
        base.seed = cfg.seed;
        base.pfc = cfg.pfc.then_some(cfg.pfc_cfg);
        base.trace = DEPTH_TRACE;
        let mut swc = base.scaled(s as u64);
        let delay = (cfg.link_delay_ns * CLK_MHZ + 500 * s as u64) / (1000 * s as u64);
        let rate = LinkRate { rate_mbps: LINE_GBPS * 1000, clk_mhz: CLK_MHZ };
        let wire = WireFormat::default();
        let frame_cycles = rate.cycles_for(wire.wire_bytes(frame as usize));
        if let Some(p) = &mut swc.pfc {
            // The headroom does not scale (its frame terms do not shrink): recompute it for the
            // scaled round trip. The sender reacts at once but has one frame on the wire and one
            // queued in its MAC.
            let rtt = 2 * delay + frame_cycles + 2;
            p.headroom_bytes = pfc_headroom_bytes(rate.rate_mbps, CLK_MHZ, rtt, frame as usize, wire) + frame;
            if p.xoff_bytes < p.xon_bytes + 2 * frame {
                return Err(format!(
                    "scale {s}: XOFF − XON = {} B after scaling is below two frames ({} B)",
                    p.xoff_bytes - p.xon_bytes,
                    2 * frame
                ));
            }
        }
        if let Some(e) = &mut swc.ecn {
            if cfg.pmax_compensation {
                let p = e.pmax_ppm as u64 * s as u64;
                if p > 1_000_000 {
                    return Err(format!(
                        "scale {s}: Pmax × scale = {:.0} % exceeds 100 % (use a smaller scale, or no Pmax compensation)",
                        p as f64 / 1e4
                    ));
                }
                e.pmax_ppm = p as u32;
            }
            if e.kmax_bytes < e.kmin_bytes + 4 * frame {
                return Err(format!("scale {s}: Kmax − Kmin after scaling is below four frames"));
            }
        }
        if swc.buffer_bytes < 8 * frame {
            return Err(format!("scale {s}: the scaled buffer holds fewer than 8 frames"));
        }
        if cfg.cc_on && (params.byte_reset as u64) < frame {
            return Err(format!(
                "scale {s}: the scaled byte counter B = {} B is below one frame ({frame} B)",
                params.byte_reset
            ));
        }
        let end = cycles_of_us(cfg.duration_us, s);
        let window = cycles_of_us(cfg.window_us, s).max(1);
        let conv_window = cycles_of_us(cfg.conv_window_us, s).max(1);
        let stagger = cycles_of_us(cfg.stagger_us, s);
        let last_start = stagger * (cfg.n as u64 - 1);
        let steady_from = (end / 2).div_ceil(window) * window;
        if steady_from < last_start || end < steady_from + window {
            return Err(format!(
                "duration {} µs too short: the steady-state window (the last half) must begin after the last flow starts ({} µs) and hold a sample window",
                cfg.duration_us,
                cfg.stagger_us * (cfg.n as u64 - 1)
            ));
        }
        let mut sw = Switch::new(swc).map_err(|e| e.to_string())?;
        for i in 0..cfg.n {
            sw.add_route(sender_mac(i), i);
        }
        sw.add_route(RECEIVER_MAC, cfg.n);
        if let Some(snap) = cfg.capture_snaplen {
            for p in 0..=cfg.n {
                sw.enable_capture(p, snap);
            }
        }
        let fallback = OffBackend;
        let be: &dyn BackendFactory = if cfg.cc_on { backend } else { &fallback };
        let nqp_s = SENDER_QPN_BASE as usize + cfg.n;
        let nqp_r = RECEIVER_QPN_BASE as usize + cfg.n;
        let mut snd = Vec::with_capacity(cfg.n);
        for i in 0..cfg.n {
            let nic = NicSpec { params, nqp: nqp_s, index: i, time_scale: s, max_frame: frame as u32 };
            let spec = RoceSpec {
                dst: RECEIVER_MAC,
                src: sender_mac(i),
                vlan_pcp: None,
                ipv6: false,
                ip_src: sender_ip(i),
                ip_dst: RECEIVER_IP,
                dscp: DATA_DSCP,
                ecn: ECN_ECT0,
                opcode: OPCODE_WRITE_MIDDLE,
                dest_qp: RECEIVER_QPN_BASE + i as u32,
                psn: 0,
                payload_len: cfg.payload_bytes,
            };
            pkt::build_roce(&spec).map_err(|e| format!("data frame: {e:?}"))?;
            snd.push(SenderNic {
                cc: be.sender(&nic)?,
                qpn: SENDER_QPN_BASE + i as u32,
                spec,
                psn: 0,
                start: stagger * i as u64,
                paused_until: [0; 8],
                cnp_in: VecDeque::new(),
                cnps_rx: 0,
                paused_cycles: 0,
            });
        }
        let nic = NicSpec { params, nqp: nqp_r, index: cfg.n, time_scale: s, max_frame: 74 };
        let rcv = ReceiverNic { cc: be.receiver(&nic)?, ce_in: VecDeque::new(), cnps_sent: 0 };
        let data_class = sw.class_of(&pkt::build_roce(&snd[0].spec).map_err(|e| format!("{e:?}"))?);
        // CNPs must overtake data (strict priority: a higher class is served first).
        let cnp = pkt::build_roce(&cnp_spec(0, params.cnp_dscp)).map_err(|e| format!("CNP: {e:?}"))?;
        if sw.class_of(&cnp) <= data_class {
            return Err(format!(
                "CNP DSCP {} maps to class {}, not above the data class {data_class}",
                params.cnp_dscp,
                sw.class_of(&cnp)
            ));
        }
        let up = (0..=cfg.n).map(|_| Link::new(rate.rate_mbps, CLK_MHZ, delay)).collect();
        let down = (0..=cfg.n).map(|_| Link::new(0, CLK_MHZ, delay)).collect();
        // Base RTT: a data frame serialised by the sender, the delay, serialised by the switch, the
        // delay; the CNP serialised by the receiver, the delay, by the switch, the delay (plus the
        // one-cycle hand-offs of the cycle convention, 4).
        let cnp_cycles = rate.cycles_for(wire.wire_bytes(74));
        let base_rtt = 2 * frame_cycles + 2 * cnp_cycles + 4 * delay + 4;
        let backend = if cfg.cc_on { backend.describe() } else { fallback.describe() };
        Ok(Incast {
            params,
            backend,
            sw,
            up,
            down,
            snd,
            rcv,
            now: 0,
            end,
            window,
            steady_from,
            data_class,
            wire,
            win_bytes: vec![0; cfg.n],
            win_wire: 0,
            win_qmax: 0,
            steady_bytes: vec![0; cfg.n],
            steady_wire: 0,
            steady_qsum: 0,
            steady_qmax: 0,
            at_steady: (0, 0, 0),
            samples: Vec::new(),
            base_rtt,
            last_start,
            conv_window,
            conv_bytes: vec![0; cfg.n],
            conv_wire: 0,
            conv: Vec::new(),
            cfg,
        })
    }

    /// The switch.
    pub fn switch(&self) -> &Switch {
        &self.sw
    }

    /// The current cycle.
    pub fn now(&self) -> u64 {
        self.now
    }

    /// The last cycle + 1 of the run.
    pub fn end(&self) -> u64 {
        self.end
    }

    /// The DCQCN registers in use.
    pub fn params(&self) -> &HwParams {
        &self.params
    }

    /// Current pacing rate of sender i (rate units, limited).
    pub fn sender_rate(&self, i: usize) -> (u32, bool) {
        self.snd[i].cc.rate(self.snd[i].qpn)
    }

    /// The switch, mutable (e.g. to start a capture part way through a run).
    pub fn switch_mut(&mut self) -> &mut Switch {
        &mut self.sw
    }

    /// The configuration.
    pub fn config(&self) -> &IncastConfig {
        &self.cfg
    }

    /// Writes the bottleneck egress's queue-depth trace and the switch's buffer-use trace (see
    /// [`DEPTH_TRACE`]) as CSV: `#` lines, then `series,cycle,time_us,bytes_sim,kb` with
    /// `series` = `queue` (the bottleneck egress, all classes), `p<i>` (egress port i, every
    /// port including the bottleneck's) or `buffer` (shared + headroom),
    /// `time_us` real (cycle × s / 250), `kb` real (simulated bytes × s / 1000).
    pub fn write_depth_csv(&self, path: &std::path::Path) -> std::io::Result<()> {
        use std::io::Write;
        let s = self.cfg.scale as f64;
        let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
        let q = self.sw.depth_trace(self.cfg.n);
        let b = self.sw.buffer_trace();
        writeln!(
            f,
            "# switch depth trace: preset={} n={} cc={} pfc={} scale={} port={} (the bottleneck egress); a sample when the depth moved by >= {} B simulated or reached/left 0, else at most one per {} cycles; truncated: queue={} buffer={}",
            self.cfg.preset,
            self.cfg.n,
            if self.cfg.cc_on { "on" } else { "off" },
            if self.cfg.pfc { "on" } else { "off" },
            self.cfg.scale,
            self.cfg.n,
            self.sw.config().trace.step_bytes,
            self.sw.config().trace.interval_cycles,
            q.truncated(),
            b.truncated()
        )?;
        writeln!(f, "series,cycle,time_us,bytes_sim,kb")?;
        let mut series: Vec<(String, &DepthTrace)> = vec![("queue".into(), q)];
        for p in 0..self.sw.ports() {
            series.push((format!("p{p}"), self.sw.depth_trace(p)));
        }
        series.push(("buffer".into(), b));
        for (name, t) in series {
            for &(c, v) in t.samples() {
                writeln!(f, "{name},{c},{:.3},{v},{:.3}", c as f64 * s / CLK_MHZ as f64, v as f64 * s / 1000.0)?;
            }
        }
        f.flush()
    }

    /// The switch port of the receiver (the bottleneck egress).
    pub fn receiver_port(&self) -> usize {
        self.cfg.n
    }

    /// One clock of everything.
    pub fn step(&mut self) {
        let t = self.now;
        let n = self.cfg.n;
        if t == self.steady_from {
            self.at_steady = self.totals();
        }
        // 1. NICs take the frames that arrived from the switch.
        for (i, sd) in self.snd.iter_mut().enumerate() {
            while let Some(f) = self.down[i].recv() {
                if let Some(p) = pkt::parse_pfc(&f) {
                    for c in 0..8 {
                        if p.class_enable >> c & 1 != 0 {
                            sd.paused_until[c] = t + pkt::pause_cycles(p.quanta[c], LINE_GBPS * 1000, CLK_MHZ);
                        }
                    }
                } else if let Some(r) = pkt::parse_roce(&f) {
                    if r.bth.opcode == OPCODE_CNP && r.bth.dest_qp == sd.qpn {
                        sd.cnp_in.push_back(sd.qpn);
                        sd.cnps_rx += 1;
                    }
                }
            }
        }
        while let Some(f) = self.down[n].recv() {
            if let Some(r) = pkt::parse_roce(&f) {
                let q = r.bth.dest_qp;
                if r.bth.opcode != OPCODE_CNP && q >= RECEIVER_QPN_BASE && ((q - RECEIVER_QPN_BASE) as usize) < n {
                    let flow = (q - RECEIVER_QPN_BASE) as usize;
                    self.win_bytes[flow] += f.len() as u64;
                    self.win_wire += self.wire.wire_bytes(f.len());
                    if t >= self.last_start {
                        self.conv_bytes[flow] += f.len() as u64;
                        self.conv_wire += self.wire.wire_bytes(f.len());
                    }
                    if t >= self.steady_from {
                        self.steady_bytes[flow] += f.len() as u64;
                        self.steady_wire += self.wire.wire_bytes(f.len());
                    }
                    if r.l3.ecn() == ECN_CE {
                        self.rcv.ce_in.push_back(q);
                    }
                }
            }
        }
        // 2. Senders.
        let dc = self.data_class as usize;
        for (i, sd) in self.snd.iter_mut().enumerate() {
            let paused = sd.paused_until[dc] > t;
            if paused {
                sd.paused_cycles += 1;
            }
            let mut tx = None;
            if t >= sd.start && self.up[i].ready() && !paused && sd.cc.may_send(sd.qpn) {
                let spec = RoceSpec { psn: sd.psn, ..sd.spec };
                sd.psn = (sd.psn + 1) & 0xFF_FFFF;
                let f = pkt::build_roce(&spec).expect("validated in new()");
                tx = Some((sd.qpn, f.len() as u32));
                self.up[i].send(f);
            }
            let cnp = sd.cnp_in.pop_front();
            sd.cc.step(cnp, tx);
        }
        // 3. Receiver: notification point and CNPs.
        let ce = self.rcv.ce_in.pop_front();
        if let Some(q) = self.rcv.cc.step(ce) {
            if q >= RECEIVER_QPN_BASE && ((q - RECEIVER_QPN_BASE) as usize) < n {
                let flow = (q - RECEIVER_QPN_BASE) as usize;
                let f = pkt::build_roce(&cnp_spec(flow, self.params.cnp_dscp)).expect("CNP builds");
                self.up[n].send(f);
                self.rcv.cnps_sent += 1;
            }
        }
        // 4. Uplinks into the switch.
        for p in 0..=n {
            self.up[p].step();
            while let Some(f) = self.up[p].recv() {
                self.sw.rx(p, f);
            }
        }
        // 5. The switch, then the downlinks.
        self.sw.step();
        for p in 0..=n {
            while let Some(f) = self.sw.poll_tx(p) {
                self.down[p].send(f);
            }
            self.down[p].step();
        }
        // Measurement.
        let q = self.sw.port_queue_bytes(n);
        self.win_qmax = self.win_qmax.max(q);
        if t >= self.steady_from {
            self.steady_qsum += q as u128;
            self.steady_qmax = self.steady_qmax.max(q);
        }
        self.now += 1;
        if self.now % self.window == 0 {
            self.sample();
        }
        if self.now > self.last_start && (self.now - self.last_start) % self.conv_window == 0 {
            let g: Vec<f64> = self.conv_bytes.iter().map(|&b| b as f64).collect();
            let cap = LinkRate { rate_mbps: LINE_GBPS * 1000, clk_mhz: CLK_MHZ }.bytes_in(self.conv_window);
            self.conv.push(ConvWindow {
                start: self.now - self.conv_window,
                jain: jain(&g),
                util: self.conv_wire as f64 / cap as f64,
            });
            self.conv_bytes.iter_mut().for_each(|b| *b = 0);
            self.conv_wire = 0;
        }
    }

    fn totals(&self) -> (u64, u64, u64) {
        let mut pfc = 0;
        let mut drops = 0;
        let mut xoff = 0;
        for p in 0..self.sw.ports() {
            let c = self.sw.counters(p);
            pfc += c.pfc_tx;
            drops += c.drop_buffer + c.drop_queue_limit + c.drop_malformed + c.drop_no_route + c.drop_unsupported_ctrl;
            xoff += c.xoff_sent.iter().sum::<u64>();
        }
        (pfc, drops, xoff)
    }

    fn sample(&mut self) {
        let w = self.window as f64;
        let to_gbps = |b: u64| b as f64 * 8.0 * CLK_MHZ as f64 / w / 1000.0;
        let win_start = self.now - self.window;
        let active = self.snd.iter().filter(|s| s.start <= win_start).count();
        let gbps: Vec<f64> = self.win_bytes.iter().map(|&b| to_gbps(b)).collect();
        let (rates, limited): (Vec<f64>, Vec<bool>) = self
            .snd
            .iter()
            .map(|s| {
                let (r, l) = s.cc.rate(s.qpn);
                (ru_to_gbps(r), l)
            })
            .unzip();
        let act: Vec<f64> = self.snd.iter().zip(&gbps).filter(|(s, _)| s.start <= win_start).map(|(_, g)| *g).collect();
        let (pfc_frames, drops, _) = self.totals();
        let cap = LinkRate { rate_mbps: LINE_GBPS * 1000, clk_mhz: CLK_MHZ }.bytes_in(self.window);
        self.samples.push(Sample {
            cycle: self.now,
            time_us: self.now as f64 * self.cfg.scale as f64 / CLK_MHZ as f64,
            gbps,
            rate_gbps: rates,
            limited,
            queue: self.sw.port_queue_bytes(self.cfg.n),
            queue_max: self.win_qmax,
            util: self.win_wire as f64 / cap as f64,
            jain: jain(&act),
            active,
            pfc_frames,
            cnps: self.rcv.cnps_sent,
            drops,
        });
        self.win_bytes.iter_mut().for_each(|b| *b = 0);
        self.win_wire = 0;
        self.win_qmax = 0;
    }

    /// Runs to the end and evaluates.
    pub fn run(mut self) -> IncastResult {
        while self.now < self.end {
            self.step();
        }
        self.finish()
    }

    /// Evaluates the run so far (normally called by [`run`](Self::run) at the end).
    pub fn finish(self) -> IncastResult {
        let s = self.cfg.scale as f64;
        let us = |c: u64| c as f64 * s / CLK_MHZ as f64;
        let steady_cycles = self.now.saturating_sub(self.steady_from).max(1);
        let flow_gbps: Vec<f64> = self
            .steady_bytes
            .iter()
            .map(|&b| b as f64 * 8.0 * CLK_MHZ as f64 / steady_cycles as f64 / 1000.0)
            .collect();
        let cap = LinkRate { rate_mbps: LINE_GBPS * 1000, clk_mhz: CLK_MHZ }.bytes_in(steady_cycles);
        let last_start = self.last_start;
        // Convergence: the first convergence window (they tile the run from the last flow's
        // start) from which every window to the end has Jain ≥ 0.95 and utilisation ≥ 0.9;
        // converged only if that stretch begins no later than the steady-state window.
        let mut from: Option<u64> = None;
        for w in self.conv.iter().rev() {
            if w.jain < CONV_JAIN || w.util < CONV_UTIL {
                break;
            }
            from = Some(w.start);
        }
        let converge_cycles = from.filter(|&c| c <= self.steady_from).map(|c| c - last_start);
        let converge_us = converge_cycles.map(us);
        let (lo, hi) = flow_gbps.iter().fold((f64::MAX, 0.0f64), |(l, h), &g| (l.min(g), h.max(g)));
        let min_max_ratio = if hi > 0.0 { lo / hi } else { 1.0 };
        let (pfc_frames, drops, xoff) = self.totals();
        let (pfc0, drops0, xoff0) =
            if self.now > self.steady_from { self.at_steady } else { (pfc_frames, drops, xoff) };
        let rp = self.cfg.n;
        let c = self.sw.counters(rp);
        let swc = self.sw.config().clone();
        let summary = Summary {
            preset: self.cfg.preset.clone(),
            n: self.cfg.n,
            cc_on: self.cfg.cc_on,
            pfc: self.cfg.pfc,
            scale: self.cfg.scale,
            backend: self.backend.clone(),
            duration_us: us(self.now),
            steady_from_us: us(self.steady_from),
            last_start_us: us(last_start),
            fairness: jain(&flow_gbps),
            flow_gbps,
            util: self.steady_wire as f64 / cap as f64,
            converge_us,
            converge_cycles,
            min_max_ratio,
            peak_queue: c.max_queue_bytes,
            steady_queue_max: self.steady_qmax,
            steady_queue_mean: self.steady_qsum as f64 / steady_cycles as f64,
            pfc_frames,
            xoff,
            pfc_frames_steady: pfc_frames - pfc0,
            xoff_steady: xoff - xoff0,
            drops_steady: drops - drops0,
            paused_cycles: self.snd.iter().map(|x| x.paused_cycles).sum(),
            drops,
            ecn_marked: c.ecn_marked,
            cnps_sent: self.rcv.cnps_sent,
            cnps_rx: self.snd.iter().map(|x| x.cnps_rx).sum(),
            base_rtt_cycles: self.base_rtt,
            bdp_bytes: LinkRate { rate_mbps: LINE_GBPS * 1000, clk_mhz: CLK_MHZ }.bytes_in(self.base_rtt),
            kmin: swc.ecn.map_or(0, |e| e.kmin_bytes),
            kmax: swc.ecn.map_or(0, |e| e.kmax_bytes),
            cycles: self.now,
        };
        IncastResult {
            cfg: self.cfg,
            params: self.params,
            switch_cfg: swc,
            samples: self.samples,
            conv: self.conv,
            summary,
        }
    }
}

/// Runs one experiment to the end.
pub fn run(cfg: IncastConfig, backend: &dyn BackendFactory) -> Result<IncastResult, String> {
    Ok(Incast::new(cfg, backend)?.run())
}
