//! Strict priority between classes, class selection (PCP, DSCP map), forwarding latency.

mod common;
use common::*;
use hematite_netsim::pkt::{self, RoceSpec};
use hematite_netsim::{LinkRate, RxVerdict, SwitchConfig, WireFormat};

/// A CNP (DSCP 48 → class 6) overtakes a full data queue (class 3): it leaves right after the
/// data frame on the wire when it arrives.
#[test]
fn cnp_overtakes_a_full_data_queue() {
    let mut sw = switch(cfg(3, 100, 250));
    for i in 0..50 {
        assert!(matches!(sw.rx(0, data(2, 0, 1082, 26, 2, i)), RxVerdict::Queued { class: 3, .. }));
    }
    let cnp = pkt::build_roce(&RoceSpec::cnp(host(2), host(1), 0x42)).unwrap();
    assert_eq!(cnp.len(), 74);
    let mut out = Vec::new();
    for t in 0..3_000u64 {
        if t == 100 {
            assert!(matches!(sw.rx(1, cnp.clone()), RxVerdict::Queued { out: 2, class: 6, .. }));
        }
        sw.step();
        while let Some(f) = sw.poll_tx(2) {
            out.push((t, f));
        }
    }
    assert_eq!(out.len(), 51);
    // Data frames back to back: the 5th ends at ⌈5·1106/50⌉ − 1 = 110 ≥ 100, so the CNP is 6th.
    let pos = out.iter().position(|(_, f)| pkt::is_cnp(f)).unwrap();
    assert_eq!(pos, 5);
    assert_eq!(out[4].0, 110);
    let w = WireFormat::default();
    let lr = LinkRate { rate_mbps: 100_000, clk_mhz: 250 };
    assert_eq!(out[5].0, lr.cycles_for(5 * w.wire_bytes(1082) + w.wire_bytes(74)) - 1);
    let r = pkt::parse_roce(&out[5].1).unwrap();
    assert_eq!((r.bth.opcode, r.bth.becn, r.bth.dest_qp), (0x81, true, 0x42));
    assert_eq!(sw.counters(2).tx_class_frames[6], 1);
    assert_eq!(sw.counters(2).tx_class_frames[3], 50);
}

/// The 802.1Q PCP decides the class of tagged frames, the DSCP map that of untagged IP frames;
/// the highest non-empty class always goes first.
#[test]
fn class_selection_and_strict_order() {
    let mut map = hematite_netsim::default_dscp_class();
    map[10] = 1;
    let mut sw = switch(SwitchConfig { dscp_class: map, latency_cycles: 5, ..cfg(3, 100, 250) });
    // Arrival order: class 0, 1, 3 (dscp), 5 (pcp overrides dscp 26), 7 (pcp), 6 (dscp 48).
    let mk = |dscp: u8, pcp: Option<u8>, psn: u32| {
        pkt::build_roce(&RoceSpec { dscp, vlan_pcp: pcp, psn, ..RoceSpec::data(host(2), host(0), 200) }).unwrap()
    };
    let frames =
        [mk(0, None, 0), mk(10, None, 1), mk(26, None, 3), mk(26, Some(5), 5), mk(0, Some(7), 7), mk(48, None, 6)];
    for f in &frames {
        let c = sw.class_of(f);
        assert!(matches!(sw.rx(0, f.clone()), RxVerdict::Queued { class, .. } if class == c));
    }
    let mut order = Vec::new();
    let mut first = None;
    for t in 0..500 {
        sw.step();
        while let Some(f) = sw.poll_tx(2) {
            first.get_or_insert(t);
            order.push(pkt::parse_roce(&f).unwrap().bth.psn);
        }
    }
    // All arrived in cycle 0 and became eligible in cycle 5: strict priority from then on.
    assert_eq!(order, [7, 6, 5, 3, 1, 0]);
    let w = WireFormat::default().wire_bytes(frames[4].len());
    assert_eq!(first, Some(5 + w.div_ceil(50) - 1));
}

/// With a forwarding latency, a lower class that is ready goes before a higher class that is
/// not yet ready (work conserving).
#[test]
fn latency_is_work_conserving() {
    let mut sw = switch(SwitchConfig { latency_cycles: 50, ..cfg(3, 100, 250) });
    sw.rx(0, data(2, 0, 1082, 0, 2, 1));
    let mut out = Vec::new();
    for t in 0..400u64 {
        if t == 60 {
            sw.rx(1, data(2, 1, 1082, 48, 2, 2)); // class 6, ready at 110
            sw.rx(0, data(2, 0, 1082, 0, 2, 3)); // class 0, ready at 110
        }
        sw.step();
        while let Some(f) = sw.poll_tx(2) {
            out.push((t, pkt::parse_roce(&f).unwrap().bth.psn));
        }
    }
    assert_eq!(out[0], (50 + 22, 1));
    assert_eq!(out[1], (110 + 22, 2));
    assert_eq!(out[2].1, 3);
}
