//! What an incast run reports: the sample windows ([`Sample`]), the convergence windows
//! ([`ConvWindow`]), the figures ([`Summary`], definitions in `docs/experiments.md`) and the whole
//! result ([`IncastResult`]) with their CSV forms, plus the helpers the figures use ([`jain`],
//! [`ru_to_gbps`]).

use super::{IncastConfig, CLK_MHZ, LINE_GBPS};
use crate::SwitchConfig;
use hematite_model::dcqcn::{HwParams, RATE_FRAC};
use std::fmt::Write as _;

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
    /// The steady-state targets of a DCQCN incast with PFC on that the model and the RTL incast
    /// tests hold a run to: Jain's index and utilisation at least 0.95 over the steady-state
    /// window, the steady queue at most Kmax + one BDP, no loss. One line per target missed
    /// (empty: all met).
    pub fn steady_violations(&self) -> Vec<String> {
        let mut v = Vec::new();
        if self.fairness < 0.95 {
            v.push(format!("Jain {}", self.fairness));
        }
        if self.util < 0.95 {
            v.push(format!("utilisation {}", self.util));
        }
        if self.drops != 0 {
            v.push(format!("drops {} (PFC on: no loss)", self.drops));
        }
        if self.steady_queue_max > self.kmax + self.bdp_bytes {
            v.push(format!("steady queue {} > Kmax {} + BDP {}", self.steady_queue_max, self.kmax, self.bdp_bytes));
        }
        v
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
