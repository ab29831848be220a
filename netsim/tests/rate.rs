//! Serialisation: exact departure times and exact long-run link rates.

mod common;
use common::*;
use hematite_netsim::{Link, LinkRate, SwitchConfig, WireFormat};

const COMBOS: [(u64, u64); 6] =
    [(100_000, 250), (25_000, 322), (40_000, 161), (100_000, 156), (400_000, 500), (10_000, 100)];

fn gbps_cfg(rate_mbps: u64, clk: u64, latency: u64) -> SwitchConfig {
    SwitchConfig { port_rate_mbps: vec![rate_mbps; 3], latency_cycles: latency, ..cfg(3, 100, clk) }
}

#[test]
fn idle_port_departure_cycle() {
    let wire = WireFormat::default();
    for (rate, clk) in COMBOS {
        for latency in [0, 7] {
            for len in [58, 62, 122, 1082, 1498, 4154] {
                let mut sw = switch(gbps_cfg(rate, clk, latency));
                for _ in 0..5 {
                    sw.step();
                }
                let f = data(2, 0, len, 26, 2, 0);
                let len = f.len();
                sw.rx(0, f);
                let lr = LinkRate { rate_mbps: rate, clk_mhz: clk };
                let want = 5 + latency + lr.cycles_for(wire.wire_bytes(len)) - 1;
                let mut got = None;
                for _ in 0..20_000 {
                    let t = sw.now();
                    sw.step();
                    if let Some(f) = sw.poll_tx(2) {
                        assert_eq!(f.len(), len);
                        got = Some(t);
                        break;
                    }
                }
                assert_eq!(got, Some(want), "rate {rate} clk {clk} latency {latency} len {len}");
                // Minimum-size padding: a 58-byte frame costs 60 + 24 wire bytes.
                assert_eq!(sw.counters(2).tx_wire_bytes, wire.wire_bytes(len));
            }
        }
    }
    assert_eq!(WireFormat::default().wire_bytes(58), 84);
    assert_eq!(WireFormat::default().wire_bytes(1500), 1524);
}

/// A backlogged output moves exactly ⌊cycles·rate/(8·clk)⌋ wire bytes, to within the frame in
/// flight, at every cycle of a long run with mixed frame sizes from two ingress ports.
#[test]
fn saturated_port_drains_exactly_the_link_rate() {
    let wire = WireFormat::default();
    let sizes: Vec<Vec<u8>> = (0..16).map(|k| data(2, 0, 58 + 4 * (k * 97 % 361), 26, 0, 0)).collect();
    let max_wire = sizes.iter().map(|f| wire.wire_bytes(f.len())).max().unwrap();
    for (rate, clk) in COMBOS {
        let mut sw = switch(gbps_cfg(rate, clk, 0));
        let lr = LinkRate { rate_mbps: rate, clk_mhz: clk };
        let mut g = Gen(0x5EED ^ rate);
        let cycles = 150_000u64;
        let mut tx_frames = 0u64;
        for t in 0..cycles {
            while sw.queue_bytes(2, 3) < 12_000 {
                let f = sizes[g.below(16) as usize].clone();
                sw.rx((t % 2) as usize, f);
            }
            sw.step();
            while sw.poll_tx(2).is_some() {
                tx_frames += 1;
            }
            let moved = sw.counters(2).tx_wire_bytes;
            let ideal = lr.bytes_in(t + 1);
            assert!(moved <= ideal && ideal - moved < max_wire, "rate {rate} clk {clk} cycle {t}: {moved} vs {ideal}");
        }
        assert!(tx_frames > 1000);
        let c = sw.counters(2);
        assert_eq!(c.tx_frames, tx_frames);
        assert_eq!(c.drop_buffer, 0);
    }
}

/// The harness link helper follows the same arithmetic, and a pure delay line adds only delay.
#[test]
fn link_rate_and_delay() {
    let wire = WireFormat::default();
    for (rate, clk) in COMBOS {
        let lr = LinkRate { rate_mbps: rate, clk_mhz: clk };
        let mut l = Link::new(rate, clk, 40);
        let f = data(1, 0, 1082, 26, 2, 0);
        let mut arrived = 0u64;
        let mut first = None;
        for t in 0..100_000u64 {
            if l.ready() {
                l.send(f.clone());
            }
            l.step();
            while l.recv().is_some() {
                arrived += 1;
                first.get_or_insert(t);
            }
            let (_, moved) = l.sent();
            let ideal = lr.bytes_in(t + 1);
            assert!(moved <= ideal && ideal - moved < wire.wire_bytes(1082));
        }
        // First frame: serialised in cycles 0..k-1, arrives k-1+40, received after that step.
        assert_eq!(first, Some(lr.cycles_for(wire.wire_bytes(1082)) - 1 + 40));
        assert!(arrived > 0);
    }
    let mut d = Link::new(0, 250, 3);
    d.send(vec![1, 2, 3]);
    let mut when = None;
    for t in 0..10 {
        d.step();
        if d.recv().is_some() {
            when = Some(t);
        }
    }
    assert_eq!(when, Some(3));
}

/// Frames of one class leave in arrival order.
#[test]
fn fifo_within_a_class() {
    let mut sw = switch(cfg(3, 100, 250));
    for i in 0..50u32 {
        sw.rx((i % 2) as usize, data(2, i as usize % 2, 58 + 4 * (i as usize % 30), 26, 2, i));
    }
    let mut psns = Vec::new();
    for _ in 0..5_000 {
        sw.step();
        while let Some(f) = sw.poll_tx(2) {
            psns.push(hematite_netsim::pkt::parse_roce(&f).unwrap().bth.psn);
        }
    }
    assert_eq!(psns, (0..50).collect::<Vec<_>>());
    assert!(sw.is_idle());
}
