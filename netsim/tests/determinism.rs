//! Determinism (same seed → same run), traces, CSV and pcapng output.

mod common;
use common::*;
use hematite_netsim::pcap::Dir;
use hematite_netsim::{EcnConfig, PfcConfig, Switch, SwitchConfig, TraceConfig};

fn fnv(h: &mut u64, b: &[u8]) {
    for &x in b {
        *h = (*h ^ x as u64).wrapping_mul(0x100_0000_01B3);
    }
}

/// 4:1 incast with random sizes, ECN and PFC on (senders ignore PFC); returns the switch and a
/// hash of every frame each port sent, in order.
fn run(seed: u64, trace_step: u64) -> (Switch, u64) {
    let mut sw = switch(SwitchConfig {
        seed,
        ecn: Some(EcnConfig { kmin_bytes: 5_000, kmax_bytes: 60_000, pmax_ppm: 200_000, class_mask: 0xFF }),
        pfc: Some(PfcConfig {
            xoff_bytes: 30_000,
            xon_bytes: 25_000,
            headroom_bytes: 20_000,
            pause_quanta: 2_000,
            ..PfcConfig::default()
        }),
        buffer_bytes: 150_000,
        trace: TraceConfig { step_bytes: trace_step, interval_cycles: 500, max_samples: 1 << 16 },
        ..cfg(5, 100, 250)
    });
    for p in 0..5 {
        sw.enable_capture(p, 96);
    }
    let mut g = Gen(0xC0FFEE);
    let mut h = 0xCBF2_9CE4_8422_2325u64;
    for t in 0..40_000u64 {
        for s in 0..4 {
            if t < 30_000 && g.below(100) < 3 {
                let len = 58 + 4 * g.below(360) as usize;
                sw.rx(s, data(4, s, len, if g.below(10) == 0 { 48 } else { 26 }, 2, t as u32));
            }
        }
        sw.step();
        for p in 0..5 {
            while let Some(f) = sw.poll_tx(p) {
                fnv(&mut h, &(p as u64).to_le_bytes());
                fnv(&mut h, &(sw.now()).to_le_bytes());
                fnv(&mut h, &f);
            }
        }
    }
    (sw, h)
}

#[test]
fn same_seed_same_run() {
    let (a, ha) = run(11, 1);
    let (b, hb) = run(11, 1);
    assert_eq!(ha, hb);
    for p in 0..5 {
        assert_eq!(a.counters(p), b.counters(p));
        assert_eq!(a.depth_trace(p), b.depth_trace(p));
        assert_eq!(a.captured(p), b.captured(p));
    }
    let marks = a.counters(4).ecn_marked;
    assert!(marks > 100, "{marks}");
    assert!(a.counters(0).pfc_tx > 0);
    // Another seed: the same traffic, different marking decisions.
    let (c, hc) = run(12, 1);
    assert_ne!(ha, hc);
    assert_eq!(c.counters(4).rx_frames, a.counters(4).rx_frames);
    assert!(c.counters(4).ecn_marked.abs_diff(marks) < marks / 5);
}

#[test]
fn traces_csv_and_pcap() {
    let (sw, _) = run(3, 1);
    // step 1: every change is recorded (one sample per cycle); the trace ends drained.
    let tr = sw.depth_trace(4).samples();
    assert!(tr.windows(2).all(|w| w[0].0 < w[1].0));
    assert_eq!(tr.last().unwrap().1, 0);
    // (A cycle's last value is kept: a peak inside one cycle may be a few frames above it.)
    let peak = tr.iter().map(|s| s.1).max().unwrap();
    let max_q = sw.counters(4).max_queue_bytes;
    assert!(peak <= max_q && peak + 4 * 1498 >= max_q, "{peak} vs {max_q}");
    // A coarse step keeps far fewer samples but still ends at 0.
    let (coarse, _) = run(3, 10_000);
    let tc = coarse.depth_trace(4).samples();
    assert!(tc.len() * 5 < tr.len(), "{} vs {}", tc.len(), tr.len());
    assert_eq!(tc.last().unwrap().1, 0);
    assert!(!coarse.depth_trace(4).truncated());

    let dir = std::env::temp_dir().join(format!("hm-netsim-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let csv = dir.join("depth.csv");
    sw.write_depth_csv_file(&csv).unwrap();
    let text = std::fs::read_to_string(&csv).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("queue,cycle,time_ns,bytes"));
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    let p4: Vec<(u64, u64)> =
        rows.iter().filter(|r| r[0] == "p4").map(|r| (r[1].parse().unwrap(), r[3].parse().unwrap())).collect();
    assert_eq!(p4, tr);
    assert!(rows.iter().all(|r| r[2].parse::<u64>().unwrap() == r[1].parse::<u64>().unwrap() * 4));
    assert!(rows.iter().any(|r| r[0] == "buffer"));

    for p in [0, 4] {
        let path = dir.join(format!("p{p}.pcapng"));
        sw.write_pcap(p, &path).unwrap();
        let frames = hematite_model::capture::read_frames(&path).unwrap();
        let cap = sw.captured(p);
        assert_eq!(frames.len(), cap.len());
        assert!(frames.iter().zip(cap).all(|(f, c)| *f == c.data && f.len() <= 96));
        // Timestamps: parse the enhanced packet blocks back (4 ns per cycle at 250 MHz).
        let raw = std::fs::read(&path).unwrap();
        let mut off = 0;
        let mut ts = Vec::new();
        let mut dirs = Vec::new();
        while off < raw.len() {
            let bt = u32::from_le_bytes(raw[off..off + 4].try_into().unwrap());
            let bl = u32::from_le_bytes(raw[off + 4..off + 8].try_into().unwrap()) as usize;
            if bt == 6 {
                let b = &raw[off + 8..off + bl - 4];
                let hi = u32::from_le_bytes(b[4..8].try_into().unwrap()) as u64;
                let lo = u32::from_le_bytes(b[8..12].try_into().unwrap()) as u64;
                ts.push(hi << 32 | lo);
                let cap_len = u32::from_le_bytes(b[12..16].try_into().unwrap()) as usize;
                let o = 20 + cap_len.div_ceil(4) * 4;
                assert_eq!(&b[o..o + 4], &[2, 0, 4, 0]); // epb_flags
                dirs.push(b[o + 4]);
            }
            off += bl;
        }
        assert_eq!(ts, cap.iter().map(|c| c.cycle * 4).collect::<Vec<_>>());
        assert_eq!(dirs, cap.iter().map(|c| if c.dir == Dir::In { 1 } else { 2 }).collect::<Vec<_>>());
        // Port 0: data in, PFC out; port 4: data out only.
        assert_eq!(cap.iter().any(|c| c.dir == Dir::In), p == 0);
        assert!(cap.iter().any(|c| c.dir == Dir::Out));
        assert!(cap.iter().all(|c| c.orig_len as usize >= c.data.len()));
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
