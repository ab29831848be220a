//! The configuration of one incast run ([`IncastConfig`]), the experiment's defaults (ECN
//! marking, depth trace, stagger, windows, convergence thresholds, run lengths) and the DCQCN
//! parameter presets.

use crate::{EcnConfig, PfcConfig, TraceConfig};
use hematite_model::dcqcn::{CC_PARAMS, NVIDIA_DEFAULTS, PAPER};

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
    /// DCQCN on (the given backend) or off ([`OffBackend`](super::OffBackend)); the CLI picks the backend.
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
