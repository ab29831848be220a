//! RED/ECN marking: statistics, thresholds, Not-ECT, header integrity (IPv4 checksum, ICRC).

mod common;
use common::*;
use hematite_model::{build_frame, classify, icrc, HdrRecord};
use hematite_netsim::pkt::{self, MarkOutcome, Pfc};
use hematite_netsim::rng::SplitMix64;
use hematite_netsim::{EcnConfig, RxVerdict, SwitchConfig};
use proptest::prelude::*;

fn p_mark(e: &EcnConfig, q: u64) -> f64 {
    if q <= e.kmin_bytes {
        0.0
    } else if q > e.kmax_bytes {
        1.0
    } else {
        e.pmax_ppm as f64 / 1e6 * (q - e.kmin_bytes) as f64 / (e.kmax_bytes - e.kmin_bytes) as f64
    }
}

/// At fixed depths the marked fraction over many draws matches Pmax·(q−Kmin)/(Kmax−Kmin).
#[test]
fn red_probability_at_fixed_depths() {
    for e in [
        EcnConfig::hpcc(100),
        EcnConfig::dcqcn_paper(),
        EcnConfig { kmin_bytes: 0, kmax_bytes: 10, pmax_ppm: 1_000_000, class_mask: 0xFF },
    ] {
        let span = e.kmax_bytes - e.kmin_bytes;
        let depths = [
            0,
            e.kmin_bytes,
            e.kmin_bytes + 1,
            e.kmin_bytes + span / 4,
            e.kmin_bytes + span / 2,
            e.kmax_bytes - 1,
            e.kmax_bytes,
            e.kmax_bytes + 1,
            100 * e.kmax_bytes,
        ];
        let mut rng = SplitMix64::new(42);
        for q in depths {
            let n = 200_000u32;
            let marked = (0..n).filter(|_| e.decide(q, rng.next_u32())).count() as f64;
            let p = p_mark(&e, q);
            let sigma = (p * (1.0 - p) / n as f64).sqrt();
            let frac = marked / n as f64;
            assert!((frac - p).abs() <= 5.0 * sigma + 1e-9, "{e:?} q {q}: {frac} vs {p}");
            if q <= e.kmin_bytes {
                assert_eq!(marked, 0.0);
            }
            if q > e.kmax_bytes {
                assert_eq!(marked, n as f64);
            }
        }
        // The integer threshold is monotone and exact at the band edges.
        assert_eq!(e.threshold(e.kmin_bytes), 0);
        assert_eq!(e.threshold(e.kmax_bytes), (e.pmax_ppm as u64 * (1 << 32)) / 1_000_000);
        assert_eq!(e.threshold(e.kmax_bytes + 1), 1 << 32);
    }
}

fn pause(port: usize, mask: u8, q: u16) -> Vec<u8> {
    pkt::build_pfc(host(port), &Pfc { class_enable: mask, quanta: [q; 8] })
}

/// End to end through the switch: a held queue is filled with Not-ECT frames to a depth, then
/// ECT probes arrive; the number marked matches the sum of the RED probabilities at the depths
/// each probe found (within 5σ, overall and per quarter of the band); nothing is marked at or
/// below Kmin, everything above Kmax; Not-ECT frames are never marked; only the packet's own
/// class queue counts; marked frames leave with CE and a valid IPv4 checksum.
#[test]
fn switch_marks_on_the_depth_each_packet_finds() {
    let e = EcnConfig { kmin_bytes: 20_000, kmax_bytes: 1_020_000, pmax_ppm: 500_000, class_mask: 0xFF };
    let mut sw = switch(SwitchConfig { ecn: Some(e), buffer_bytes: 100_000_000, seed: 7, ..cfg(3, 100, 250) });
    sw.rx(2, pause(2, 0xFF, 0xFFFF));
    let probe = |ecn: u8, psn: u32| data(2, 0, 122, 26, ecn, psn);
    let mut psn = 0u32;
    let mut check_probe = |sw: &mut hematite_netsim::Switch, ecn: u8, seen: &mut Vec<(u64, bool)>| {
        let q = sw.queue_bytes(2, 3);
        psn += 1;
        match sw.rx(0, probe(ecn, psn)) {
            RxVerdict::Queued { out: 2, class: 3, marked } => seen.push((q, marked)),
            v => panic!("{v:?}"),
        }
    };
    // Class 0 (ECT) filling up is marked on its own depth and does not count toward class 3.
    let mut c0 = Vec::new();
    for _ in 0..1_000 {
        let q = sw.queue_bytes(2, 0);
        match sw.rx(1, data(2, 1, 1498, 0, 2, 0)) {
            RxVerdict::Queued { class: 0, marked, .. } => c0.push((q, marked)),
            v => panic!("{v:?}"),
        }
    }
    assert!(c0.iter().all(|&(q, m)| m || q <= e.kmax_bytes) && c0.iter().any(|x| x.1));
    // Below Kmin: never.
    let mut low = Vec::new();
    for _ in 0..150 {
        check_probe(&mut sw, pkt::ECN_ECT0, &mut low);
    }
    assert!(low.iter().all(|&(q, m)| q <= e.kmin_bytes && !m));
    // Fill with Not-ECT to 200 KB, then probes through the band (alternating ECT(0)/ECT(1),
    // with Not-ECT frames interleaved: never marked).
    while sw.queue_bytes(2, 3) < 200_000 {
        assert!(matches!(sw.rx(1, data(2, 1, 1498, 26, 0, 0)), RxVerdict::Queued { marked: false, .. }));
    }
    let mut band = Vec::new();
    let mut not_ect = Vec::new();
    for i in 0..6_000 {
        check_probe(&mut sw, if i % 2 == 0 { pkt::ECN_ECT0 } else { pkt::ECN_ECT1 }, &mut band);
        if i % 10 == 0 {
            check_probe(&mut sw, pkt::ECN_NOT_ECT, &mut not_ect);
        }
    }
    assert!(not_ect.iter().all(|&(_, m)| !m));
    assert!(band.last().unwrap().0 < e.kmax_bytes);
    let stat = |s: &[(u64, bool)]| {
        let exp: f64 = s.iter().map(|&(q, _)| p_mark(&e, q)).sum();
        let var: f64 = s.iter().map(|&(q, _)| p_mark(&e, q) * (1.0 - p_mark(&e, q))).sum();
        let got = s.iter().filter(|x| x.1).count() as f64;
        (got, exp, var.sqrt())
    };
    let (got, exp, sd) = stat(&band);
    assert!((got - exp).abs() <= 5.0 * sd, "band: {got} marked, expected {exp} ± {sd}");
    for quarter in band.chunks(band.len() / 4) {
        let (got, exp, sd) = stat(quarter);
        assert!((got - exp).abs() <= 5.0 * sd, "quarter: {got} marked, expected {exp} ± {sd}");
    }
    // Above Kmax: always.
    while sw.queue_bytes(2, 3) <= e.kmax_bytes {
        sw.rx(1, data(2, 1, 1498, 26, 0, 0));
    }
    let mut high = Vec::new();
    for _ in 0..500 {
        check_probe(&mut sw, pkt::ECN_ECT0, &mut high);
    }
    assert!(high.iter().all(|&(q, m)| q > e.kmax_bytes && m));
    // Already-CE arrivals are counted, not re-marked.
    sw.rx(0, data(2, 0, 122, 26, pkt::ECN_CE, 0));
    let marked_total = low.iter().chain(&band).chain(&high).chain(&c0).filter(|x| x.1).count() as u64;
    assert_eq!(sw.counters(2).ecn_marked, marked_total);
    assert_eq!(sw.counters(2).ecn_ce_in, 1);
    // Drain: what left carries exactly the marks, every IPv4 checksum valid.
    sw.rx(2, pause(2, 0xFF, 0));
    let mut ce = 0u64;
    let mut n = 0;
    while !sw.is_idle() {
        sw.step();
        while let Some(f) = sw.poll_tx(2) {
            n += 1;
            assert_eq!(pkt::ipv4_checksum_ok(&f), Some(true));
            if pkt::ecn(&f) == Some(pkt::ECN_CE) {
                ce += 1;
            }
        }
    }
    assert_eq!(ce, marked_total + 1);
    assert_eq!(n, sw.counters(0).rx_frames + sw.counters(1).rx_frames);
}

/// Marking on a frame built by `hematite_model::build_frame` (IPv4 and IPv6, tagged and not):
/// only the ECN bits and the IPv4 checksum change, the checksum is valid by recomputation, the
/// ICRC still verifies, and the model's receive path accepts the marked frame with ECN = CE.
#[test]
fn marking_keeps_ipv4_checksum_and_icrc() {
    for ipv6 in [false, true] {
        for vlan in [false, true] {
            for ecn in [pkt::ECN_ECT0, pkt::ECN_ECT1] {
                let rec = HdrRecord {
                    eth_dst: 0x02_00_00_00_10_02,
                    eth_src: 0x02_00_00_00_10_01,
                    vlan_valid: vlan,
                    vlan_pcp: 3,
                    ipv6,
                    ip_src: 0x0A00_0001,
                    ip_dst: 0x0A00_0002,
                    dscp: 26,
                    ecn,
                    ttl: 64,
                    opcode: 0x0A, // RC RDMA WRITE ONLY
                    pkey: 0xFFFF,
                    dest_qp: 0x123,
                    psn: 77,
                    payload_len: 1000,
                    rkey: 5,
                    dma_len: 1000,
                    ..HdrRecord::default()
                };
                let orig = build_frame(&rec, &[0x5A; 1000]).unwrap();
                let mut f = orig.clone();
                assert_eq!(pkt::mark_ce(&mut f), MarkOutcome::Marked);
                assert_eq!(pkt::mark_ce(&mut f.clone()), MarkOutcome::AlreadyCe);
                let l3 = if vlan { 18 } else { 14 };
                let changed: Vec<usize> = (0..f.len()).filter(|&i| f[i] != orig[i]).collect();
                if ipv6 {
                    assert_eq!(changed, [l3 + 1]);
                } else {
                    assert!(changed.iter().all(|&i| [l3 + 1, l3 + 10, l3 + 11].contains(&i)), "{changed:?}");
                    let stored = u16::from_be_bytes([f[l3 + 10], f[l3 + 11]]);
                    assert_eq!(stored, hematite_model::wire::ipv4_header_checksum(&f[l3..]));
                    assert_eq!(pkt::ipv4_checksum_ok(&f), Some(true));
                }
                // ICRC: the stored value still verifies (the residue over IP..ICRC).
                assert!(icrc::residue_ok(&f[l3..], ipv6));
                let out = classify(&f);
                assert_eq!(out.reason, None);
                assert!(out.icrc_ok);
                assert_eq!(out.rec.ecn, 3);
                assert_eq!(out.ipv4_csum_ok, !ipv6);
                assert_eq!(pkt::ecn(&f), Some(pkt::ECN_CE));
                // Through the switch too (class from the PCP when tagged, else DSCP 26 → 3).
                let mut sw = switch(SwitchConfig {
                    ecn: Some(EcnConfig { kmin_bytes: 0, kmax_bytes: 0, pmax_ppm: 0, class_mask: 0xFF }),
                    ..cfg(3, 100, 250)
                });
                sw.add_route_u64(0x02_00_00_00_10_02, 2);
                sw.rx(0, orig.clone());
                assert_eq!(sw.rx(0, orig.clone()), RxVerdict::Queued { out: 2, class: 3, marked: true });
                let mut outs = Vec::new();
                while !sw.is_idle() {
                    sw.step();
                    outs.extend(std::iter::from_fn(|| sw.poll_tx(2)));
                }
                assert_eq!(outs, [orig.clone(), f.clone()]);
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// Any valid RoCEv2 frame: `ecn()` and `parse_roce()` read the builder's fields; marking
    /// turns exactly the ECT frames into CE and keeps the frame valid for the receive path.
    #[test]
    fn mark_any_valid_frame((rec, payload) in hematite_model::arb::hdr_record()) {
        let orig = build_frame(&rec, &payload).unwrap();
        prop_assume!(classify(&orig).reason.is_none());
        prop_assert_eq!(pkt::ecn(&orig), Some(rec.ecn));
        prop_assert_eq!(pkt::dscp(&orig), Some(rec.dscp));
        let r = pkt::parse_roce(&orig).unwrap();
        prop_assert_eq!((r.bth.opcode, r.bth.dest_qp, r.bth.psn), (rec.opcode, rec.dest_qp, rec.psn));
        prop_assert_eq!(pkt::is_cnp(&orig), rec.opcode == 0x81);
        prop_assert_eq!(r.l2.pcp, rec.vlan_valid.then_some(rec.vlan_pcp));
        let mut f = orig.clone();
        let m = pkt::mark_ce(&mut f);
        match rec.ecn {
            0 => prop_assert_eq!(m, MarkOutcome::NotEct),
            3 => prop_assert_eq!(m, MarkOutcome::AlreadyCe),
            _ => prop_assert_eq!(m, MarkOutcome::Marked),
        }
        if m != MarkOutcome::Marked {
            prop_assert_eq!(&f, &orig);
        }
        let out = classify(&f);
        prop_assert_eq!(out.reason, None);
        prop_assert!(out.icrc_ok);
        prop_assert_eq!(out.rec.ecn, if rec.ecn == 0 { 0 } else { 3 });
        prop_assert_eq!(out.rec, hematite_model::classify(&orig).rec.with_ecn(out.rec.ecn));
    }
}

trait WithEcn {
    fn with_ecn(self, e: u8) -> Self;
}
impl WithEcn for HdrRecord {
    fn with_ecn(mut self, e: u8) -> Self {
        self.ecn = e;
        self
    }
}
