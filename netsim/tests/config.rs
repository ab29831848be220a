//! Configuration defaults, validation and time-compression scaling.

use hematite_netsim::{pfc_headroom_bytes, EcnConfig, PfcConfig, Switch, SwitchConfig, WireFormat};

#[test]
fn defaults() {
    let c = SwitchConfig::new(17, 100, 250);
    assert_eq!(c.ports(), 17);
    assert_eq!(c.port_rate_mbps[16], 100_000);
    assert_eq!(c.buffer_bytes, 16_000_000);
    assert_eq!(
        c.ecn,
        Some(EcnConfig { kmin_bytes: 400_000, kmax_bytes: 1_600_000, pmax_ppm: 200_000, class_mask: 0xFF })
    );
    assert_eq!(c.pfc, None);
    assert_eq!((c.dscp_class[26], c.dscp_class[48], c.dscp_class[0], c.dscp_class[46]), (3, 6, 0, 0));
    assert_eq!(
        EcnConfig::dcqcn_paper(),
        EcnConfig { kmin_bytes: 5_000, kmax_bytes: 200_000, pmax_ppm: 10_000, class_mask: 0xFF }
    );
    let p = PfcConfig::default();
    assert_eq!(
        (p.class_mask, p.xoff_bytes, p.xon_bytes, p.headroom_bytes, p.pause_quanta),
        (8, 256_000, 224_000, 64_000, 0xFFFF)
    );
    let sw = Switch::new(c).unwrap();
    assert_eq!(sw.port_mac(3), [0x02, 0x48, 0x4D, 0x53, 0x00, 0x03]);
    // 2 µs round trip at 100G (25,000 B) + 2 × 4,096-byte-payload frames (4,154 + 24) + a
    // pause frame (84): the default 64,000 covers it.
    let h = pfc_headroom_bytes(100_000, 250, 500, 4154, WireFormat::default());
    assert_eq!(h, 25_000 + 1 + 2 * 4178 + 84);
    assert!(h < p.headroom_bytes);
}

#[test]
fn validation() {
    let ok = SwitchConfig::new(2, 100, 250);
    assert!(Switch::new(ok.clone()).is_ok());
    let bad = [
        SwitchConfig { port_rate_mbps: vec![], ..ok.clone() },
        SwitchConfig { clk_mhz: 0, ..ok.clone() },
        SwitchConfig { port_rate_mbps: vec![100_000, 0], ..ok.clone() },
        SwitchConfig { buffer_bytes: 0, ..ok.clone() },
        SwitchConfig {
            ecn: Some(EcnConfig { kmin_bytes: 2, kmax_bytes: 1, pmax_ppm: 1, class_mask: 1 }),
            ..ok.clone()
        },
        SwitchConfig { ecn: Some(EcnConfig { pmax_ppm: 1_000_001, ..EcnConfig::dcqcn_paper() }), ..ok.clone() },
        SwitchConfig { pfc: Some(PfcConfig { xon_bytes: 300_000, ..PfcConfig::default() }), ..ok.clone() },
        SwitchConfig { pfc: Some(PfcConfig { pause_quanta: 0, ..PfcConfig::default() }), ..ok.clone() },
        SwitchConfig { dscp_class: [8; 64], ..ok.clone() },
    ];
    for b in bad {
        let e = Switch::new(b.clone()).unwrap_err();
        assert!(e.to_string().starts_with("invalid switch configuration"), "{b:?}");
    }
}

#[test]
fn scaled_divides_bytes_and_times_not_rates() {
    let c = SwitchConfig {
        pfc: Some(PfcConfig::default()),
        latency_cycles: 100,
        queue_limit_bytes: Some(1_000_000),
        ..SwitchConfig::new(4, 100, 250)
    };
    let s = c.scaled(8);
    assert_eq!(s.port_rate_mbps, c.port_rate_mbps);
    assert_eq!(s.clk_mhz, 250);
    assert_eq!(s.buffer_bytes, 2_000_000);
    assert_eq!(s.queue_limit_bytes, Some(125_000));
    assert_eq!(s.latency_cycles, 12);
    assert_eq!(s.ecn.map(|e| (e.kmin_bytes, e.kmax_bytes, e.pmax_ppm)), Some((50_000, 200_000, 200_000)));
    let p = s.pfc.unwrap();
    assert_eq!((p.xoff_bytes, p.xon_bytes, p.headroom_bytes, p.pause_quanta), (32_000, 28_000, 8_000, 8191));
    assert_eq!(s.trace.step_bytes, 125);
    assert_eq!(c.scaled(1), c);
}
