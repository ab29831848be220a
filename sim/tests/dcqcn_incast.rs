//! The DCQCN incast with the RTL in the loop: every sender's reaction point and pacer and the
//! receiver's notification point are the Verilated blocks of rtl/cc (`hematite_sim::ccexp`),
//! the network is the switch model (`hematite_netsim`). 4:1 incast at a 100 Gb/s bottleneck
//! with NVIDIA's defaults and PFC on: Jain's fairness >= 0.95 and the queue <= Kmax + one BDP
//! over the steady state (the last half), no loss; and the RTL's run agrees with the reference
//! model's on the same configuration within a few percent (they differ by the RTL's registered
//! outputs: a CNP request one clock later, the pacer's answer two clocks later).
use hematite_netsim::incast::{self, IncastConfig, IncastResult, ModelBackend};
use hematite_sim::ccexp::RtlBackend;

fn cfg(n: usize, preset: &str, duration_us: u64) -> IncastConfig {
    let mut c = IncastConfig::new(n, preset, true).unwrap();
    c.pfc = true;
    c.duration_us = duration_us;
    c
}

fn show(tag: &str, r: &IncastResult) {
    let s = &r.summary;
    println!(
        "{tag}: {} n={}: Jain {:.4}, util {:.3}, steady queue max {} B (Kmax {} + BDP {}), peak {} B, PFC {}, drops {}, CNPs {}",
        s.preset, s.n, s.fairness, s.util, s.steady_queue_max, s.kmax, s.bdp_bytes, s.peak_queue, s.pfc_frames, s.drops, s.cnps_sent
    );
}

#[test]
fn rtl_incast_4_to_1_is_fair_bounded_and_lossless() {
    let rtl = incast::run(cfg(4, "nvidia", 100_000), &RtlBackend::default()).unwrap();
    show("rtl", &rtl);
    let s = &rtl.summary;
    let missed = s.steady_violations();
    assert!(missed.is_empty(), "{}", missed.join("; "));
    assert!(s.cnps_sent > 100, "the RTL NP sent {} CNPs", s.cnps_sent);
    let last = rtl.samples.last().unwrap();
    assert!(last.limited.iter().all(|&l| l), "every RTL pacer limits its flow: {:?}", last.limited);
    // the reference model on the same run
    let model = incast::run(cfg(4, "nvidia", 100_000), &ModelBackend::default()).unwrap();
    show("model", &model);
    let m = &model.summary;
    let rel = |a: f64, b: f64| (a - b).abs() / b.max(1.0);
    assert!(rel(s.cnps_sent as f64, m.cnps_sent as f64) < 0.15, "CNPs: RTL {} model {}", s.cnps_sent, m.cnps_sent);
    assert!(rel(s.steady_queue_mean, m.steady_queue_mean) < 0.25, "mean queue: RTL {} model {}", s.steady_queue_mean, m.steady_queue_mean);
    assert!((s.util - m.util).abs() < 0.03, "utilisation: RTL {} model {}", s.util, m.util);
}
