//! Shared-buffer accounting, tail drop, queue limits.

mod common;
use common::*;
use hematite_netsim::pkt::{self, Pfc, RoceSpec};
use hematite_netsim::{DropReason, PfcConfig, RxVerdict, SwitchConfig, TraceConfig, CLASSES};
use proptest::prelude::*;

fn pause_frame(from: usize, mask: u8, quanta: u16) -> Vec<u8> {
    pkt::build_pfc(host(from), &Pfc { class_enable: mask, quanta: [quanta; 8] })
}

#[test]
fn tail_drop_when_the_shared_buffer_is_full() {
    let mut sw = switch(SwitchConfig { buffer_bytes: 10_000, ..cfg(3, 100, 250) });
    // Hold output 2 (all classes) so nothing drains.
    assert!(matches!(sw.rx(2, pause_frame(2, 0xFF, 0xFFFF)), RxVerdict::Pfc(_)));
    let mut verdicts = Vec::new();
    for i in 0..20 {
        verdicts.push(sw.rx(i % 2, data(2, i % 2, 1082, 26, 2, i as u32)));
        sw.step();
    }
    let queued = verdicts.iter().filter(|v| matches!(v, RxVerdict::Queued { .. })).count();
    assert_eq!(queued, 9);
    assert!(verdicts[9..].iter().all(|v| *v == RxVerdict::Dropped(DropReason::BufferFull)));
    let c = sw.counters(2);
    assert_eq!((c.drop_buffer, c.drop_bytes, c.drop_queue_limit), (11, 11 * 1082, 0));
    assert_eq!(sw.shared_used(), 9 * 1082);
    assert_eq!(sw.max_buffer_used(), (9 * 1082, 9 * 1082));
    // A lossy class is dropped too (one shared pool) unless it fits.
    assert_eq!(sw.rx(0, data(2, 0, 1082, 0, 0, 99)), RxVerdict::Dropped(DropReason::BufferFull));
    assert!(matches!(sw.rx(0, data(2, 0, 62, 0, 0, 99)), RxVerdict::Queued { class: 0, .. }));
    // Resume: everything drains, the buffer returns to 0.
    sw.rx(2, pause_frame(2, 0xFF, 0));
    for _ in 0..2_000 {
        sw.step();
        while sw.poll_tx(2).is_some() {}
    }
    assert_eq!(sw.counters(2).tx_frames, 10);
    assert!(sw.is_idle());
    assert_eq!(sw.shared_used(), 0);
}

#[test]
fn per_queue_limit() {
    let mut sw = switch(SwitchConfig { queue_limit_bytes: Some(3_000), ..cfg(3, 100, 250) });
    sw.rx(2, pause_frame(2, 0xFF, 0xFFFF));
    let mut v = Vec::new();
    for dscp in [26, 0] {
        for i in 0..4 {
            v.push(sw.rx(0, data(2, 0, 1082, dscp, 2, i)));
        }
    }
    let q = |v: &RxVerdict| matches!(v, RxVerdict::Queued { .. });
    assert_eq!(v.iter().map(q).collect::<Vec<_>>(), [true, true, false, false, true, true, false, false]);
    assert_eq!(sw.counters(2).drop_queue_limit, 4);
    assert_eq!((sw.queue_bytes(2, 3), sw.queue_bytes(2, 0)), (2164, 2164));
}

#[test]
fn unknown_destination_and_runts_are_counted_at_ingress() {
    let mut sw = switch(cfg(3, 100, 250));
    assert_eq!(sw.rx(1, data(7, 1, 100 - 2, 26, 2, 0)), RxVerdict::Dropped(DropReason::NoRoute));
    assert_eq!(sw.rx(1, vec![0; 13]), RxVerdict::Dropped(DropReason::Malformed));
    let mut classic_pause = pause_frame(1, 1, 5);
    classic_pause[14] = 0x00; // opcode 0x0001
    assert_eq!(sw.rx(1, classic_pause), RxVerdict::Dropped(DropReason::UnsupportedControl));
    let c = sw.counters(1);
    assert_eq!((c.rx_frames, c.drop_no_route, c.drop_malformed, c.drop_unsupported_ctrl), (3, 1, 1, 1));
    assert_eq!(sw.shared_used(), 0);
}

#[derive(Debug, Clone)]
struct Op {
    port: usize,
    dst: usize,
    len: usize,
    dscp: u8,
    ecn: u8,
    pcp: Option<u8>,
    pfc: Option<(u8, u16)>,
}

fn op() -> impl Strategy<Value = Op> {
    (
        0usize..4,
        0usize..6,
        0usize..370,
        prop::sample::select(vec![0u8, 26, 48, 10]),
        0u8..4,
        prop::option::weighted(0.2, 0u8..8),
        prop::option::weighted(0.05, (any::<u8>(), 0u16..400)),
    )
        .prop_map(|(port, dst, k, dscp, ecn, pcp, pfc)| Op { port, dst, len: 58 + 4 * k, dscp, ecn, pcp, pfc })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

    /// Random traffic (unknown destinations, all classes, tagged and untagged, random received
    /// pauses) into a small buffer: the buffer use never exceeds B (or B + headroom with PFC),
    /// every byte is accounted to exactly one output queue and one ingress, and after draining
    /// every received frame was sent, dropped (with a counted reason) or consumed as PFC.
    #[test]
    fn buffer_accounting(
        ops in prop::collection::vec(prop::option::weighted(0.15, op()), 500..2500),
        buffer in 3_000u64..40_000,
        limit in prop::option::of(2_000u64..20_000),
        latency in 0u64..4,
        pfc_on in any::<bool>(),
        ecn_on in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let pfc = pfc_on.then_some(PfcConfig {
            class_mask: 0x48, xoff_bytes: 2_000, xon_bytes: 1_000, headroom_bytes: 3_000, pause_quanta: 300,
            refresh_cycles: None,
        });
        let ecn = ecn_on.then_some(hematite_netsim::EcnConfig {
            kmin_bytes: 1_000, kmax_bytes: 8_000, pmax_ppm: 500_000, class_mask: 0xFF,
        });
        let mut sw = switch(SwitchConfig {
            buffer_bytes: buffer, queue_limit_bytes: limit, latency_cycles: latency, pfc, ecn, seed,
            port_rate_mbps: vec![100_000, 25_000, 40_000, 100_000],
            trace: TraceConfig { step_bytes: 1, ..TraceConfig::default() },
            ..cfg(4, 100, 250)
        });
        let headroom_cap = pfc.map_or(0, |p| p.headroom_bytes);
        let mut pfc_out = 0u64;
        let total = ops.len() + 20_000;
        for t in 0..total {
            if let Some(Some(o)) = ops.get(t) {
                let f = match o.pfc {
                    Some((mask, q)) => pause_frame(o.port, mask, q),
                    None => pkt::build_roce(&RoceSpec {
                        dscp: o.dscp, ecn: o.ecn, vlan_pcp: o.pcp,
                        ..RoceSpec::data(host(o.dst), host(o.port), (o.len - 58) as u16)
                    }).unwrap(),
                };
                sw.rx(o.port, f);
            }
            if t == ops.len() {
                for p in 0..4 {
                    sw.rx(p, pause_frame(p, 0xFF, 0));
                }
            }
            sw.step();
            for p in 0..4 {
                while let Some(f) = sw.poll_tx(p) {
                    if pkt::parse_pfc(&f).is_some() {
                        pfc_out += 1;
                    }
                }
            }
            let used = sw.shared_used();
            prop_assert!(used <= buffer);
            prop_assert!(sw.headroom_used() <= 4 * 2 * headroom_cap);
            let q: u64 = (0..4).map(|p| sw.port_queue_bytes(p)).sum();
            prop_assert_eq!(q, used + sw.headroom_used());
            let ing: u64 = (0..4)
                .flat_map(|p| (0..CLASSES as u8).map(move |c| (p, c)))
                .map(|(p, c)| sw.ingress_bytes(p, c))
                .sum();
            prop_assert_eq!(ing, q);
            if let Some(l) = limit {
                for p in 0..4 {
                    for c in 0..8 {
                        prop_assert!(sw.queue_bytes(p, c) <= l);
                    }
                }
            }
            if t > ops.len() && sw.is_idle() {
                break;
            }
        }
        prop_assert!(sw.is_idle());
        let c: Vec<_> = (0..4).map(|p| sw.counters(p).clone()).collect();
        let sum = |f: &dyn Fn(&hematite_netsim::PortCounters) -> u64| c.iter().map(f).sum::<u64>();
        let rx = sum(&|c| c.rx_frames);
        let tx = sum(&|c| c.tx_frames);
        let drops = sum(&|c| {
            c.drop_buffer + c.drop_queue_limit + c.drop_no_route + c.drop_malformed + c.drop_unsupported_ctrl
        });
        let pfc_in = sum(&|c| c.pfc_rx);
        prop_assert_eq!(sum(&|c| c.pfc_tx), pfc_out);
        prop_assert_eq!(rx, tx - pfc_out + drops + pfc_in);
        prop_assert_eq!(sw.depth_trace(0).samples().last().map(|s| s.1), Some(0));
        if !pfc_on {
            prop_assert_eq!(sw.max_buffer_used().1, sw.max_buffer_used().0);
            prop_assert_eq!(pfc_out, 0);
        }
    }
}
