//! PFC: lossless 2:1 overload, frame format, refresh, XON, received pauses.

mod common;
use common::*;
use hematite_netsim::pkt::{self, Pfc};
use hematite_netsim::{pfc_headroom_bytes, Link, LinkRate, PfcConfig, Switch, SwitchConfig, WireFormat};

/// Checks a PFC frame the switch sent out of `port` and returns it parsed.
fn check_pfc_format(sw: &Switch, port: usize, f: &[u8], quanta: u16) -> Pfc {
    assert_eq!(f.len(), 60);
    assert_eq!(&f[0..6], &pkt::PFC_DST);
    assert_eq!(&f[6..12], &sw.port_mac(port));
    assert_eq!(&f[12..16], &[0x88, 0x08, 0x01, 0x01]);
    assert_eq!(f[16], 0, "class-enable vector high byte");
    assert!(f[34..].iter().all(|&b| b == 0), "padding");
    let p = pkt::parse_pfc(f).unwrap();
    assert_eq!(p.class_enable, 1 << 3, "only the lossless class");
    assert!(p.quanta[3] == quanta || p.quanta[3] == 0);
    p
}

struct Sender {
    link: Link,
    back: Link,
    paused_until: u64,
    psn: u32,
}

struct Run {
    sw: Switch,
    xoff: Vec<u64>,
    xon: Vec<u64>,
    out_bytes: Vec<(u64, u64)>,
}

/// Two senders at line rate into one output: the harness loop (links with delay `d` both ways,
/// senders honouring PFC at frame boundaries).
fn incast(cfg: SwitchConfig, d: u64, cycles: u64) -> Run {
    let mut sw = switch(cfg);
    let rate = sw.port_rate(0);
    let quanta = sw.config().pfc.map_or(0, |p| p.pause_quanta);
    let mut s: Vec<Sender> = (0..2)
        .map(|_| Sender {
            link: Link::new(rate.rate_mbps, rate.clk_mhz, d),
            back: Link::new(0, rate.clk_mhz, d),
            paused_until: 0,
            psn: 0,
        })
        .collect();
    let (mut xoff, mut xon, mut out_bytes) = (Vec::new(), Vec::new(), Vec::new());
    let mut out = 0u64;
    for t in 0..cycles {
        for (i, snd) in s.iter_mut().enumerate() {
            while let Some(f) = snd.back.recv() {
                let p = pkt::parse_pfc(&f).expect("only PFC frames flow back");
                if p.class_enable & 8 != 0 {
                    snd.paused_until = t + pkt::pause_cycles(p.quanta[3], rate.rate_mbps, rate.clk_mhz);
                }
            }
            if snd.link.ready() && t >= snd.paused_until {
                snd.psn += 1;
                snd.link.send(data(2, i, 1082, 26, 2, snd.psn));
            }
            snd.link.step();
            while let Some(f) = snd.link.recv() {
                sw.rx(i, f);
            }
        }
        sw.step();
        for (i, snd) in s.iter_mut().enumerate() {
            while let Some(f) = sw.poll_tx(i) {
                let p = check_pfc_format(&sw, i, &f, quanta);
                if p.quanta[3] == 0 {
                    xon.push(t)
                } else {
                    xoff.push(t)
                }
                snd.back.send(f);
            }
            snd.back.step();
        }
        while let Some(f) = sw.poll_tx(2) {
            out += WireFormat::default().wire_bytes(f.len());
        }
        out_bytes.push((t, out));
    }
    Run { sw, xoff, xon, out_bytes }
}

#[test]
fn two_to_one_overload_is_lossless_and_bounded() {
    let d = 250; // 1 µs each way at 250 MHz
    let wire = WireFormat::default();
    // Reaction: the pause is serialised (2 cycles) and received one cycle after arrival.
    let headroom = pfc_headroom_bytes(100_000, 250, 2 * d + 3, 1082, wire);
    let pfc = PfcConfig { xoff_bytes: 100_000, xon_bytes: 80_000, headroom_bytes: headroom, ..PfcConfig::default() };
    let buffer = 2 * pfc.xoff_bytes;
    let cfg_on = SwitchConfig { pfc: Some(pfc), buffer_bytes: buffer, ..cfg(3, 100, 250) };
    let cycles = 200_000;
    let r = incast(cfg_on, d, cycles);
    let sw = &r.sw;
    let mut max_ing = 0;
    for p in 0..2 {
        let c = sw.counters(p);
        assert!(c.xoff_sent[3] >= 3 && c.xon_sent[3] >= 3, "port {p}: {c:?}");
        assert_eq!(c.pfc_tx, c.xoff_sent[3] + c.xon_sent[3] + c.pfc_refresh);
        assert!(
            c.max_ingress_bytes[3] <= pfc.xoff_bytes + headroom,
            "port {p}: {} > {} + {headroom}",
            c.max_ingress_bytes[3],
            pfc.xoff_bytes
        );
        assert!(c.xoff_cycles[3] > 0);
        max_ing = max_ing.max(c.max_ingress_bytes[3]);
    }
    let out = sw.counters(2);
    assert_eq!(out.drop_buffer + out.drop_queue_limit, 0, "lossless");
    assert!(out.max_queue_bytes <= 2 * (pfc.xoff_bytes + headroom));
    assert!(sw.max_buffer_used().1 <= buffer + 2 * headroom);
    // XOFF and XON alternate and the output never starves: from the first XOFF on, the output
    // moves exactly its line rate (to within one frame).
    assert!(!r.xoff.is_empty() && !r.xon.is_empty());
    let t0 = r.xoff[0];
    let lr = LinkRate { rate_mbps: 100_000, clk_mhz: 250 };
    let moved = r.out_bytes[cycles as usize - 1].1 - r.out_bytes[t0 as usize].1;
    let ideal = lr.bytes_in(cycles - 1 - t0);
    assert!(ideal - moved <= wire.wire_bytes(1082), "{moved} of {ideal}");
    let hf = sw.counters(0).headroom_frames + sw.counters(1).headroom_frames;
    eprintln!(
        "2:1 PFC: headroom {headroom} B, max ingress {max_ing} B (XOFF {}), max queue {} B, XOFF frames {}, \
         XON frames {}, headroom frames {hf}",
        pfc.xoff_bytes,
        out.max_queue_bytes,
        r.xoff.len(),
        r.xon.len()
    );

    // The same overload without PFC drops.
    let r = incast(SwitchConfig { pfc: None, buffer_bytes: buffer, ..cfg(3, 100, 250) }, d, 50_000);
    assert!(r.sw.counters(2).drop_buffer > 0);
    assert_eq!(r.sw.counters(0).pfc_tx, 0);
}

/// A sender that ignores PFC: XOFF is refreshed every `refresh_cycles` while the class stays
/// above XON, then one XON when it drains.
#[test]
fn xoff_refresh_and_xon() {
    let pfc = PfcConfig {
        xoff_bytes: 20_000,
        xon_bytes: 10_000,
        headroom_bytes: 1 << 30,
        pause_quanta: 1000,
        ..PfcConfig::default()
    };
    let mut sw = switch(SwitchConfig { pfc: Some(pfc), ..cfg(3, 100, 250) });
    let refresh = pkt::pause_cycles(1000, 100_000, 250) / 2;
    assert_eq!(refresh, 640);
    // Hold output 2 so the ingress count only grows.
    sw.rx(2, pkt::build_pfc(host(2), &Pfc { class_enable: 8, quanta: [0xFFFF; 8] }));
    let (mut gen_on, mut gen_off) = (None, None);
    let mut frames = Vec::new();
    for t in 0..9_000u64 {
        if t < 100 {
            sw.rx(0, data(2, 0, 1082, 26, 2, t as u32));
        }
        if t == 4_000 {
            sw.rx(2, pkt::build_pfc(host(2), &Pfc { class_enable: 8, quanta: [0; 8] }));
        }
        let before = sw.xoff_state(0);
        sw.step();
        if before == 0 && sw.xoff_state(0) != 0 {
            gen_on = Some(t);
        }
        if before != 0 && sw.xoff_state(0) == 0 {
            gen_off = Some(t);
            assert!(sw.ingress_bytes(0, 3) <= pfc.xon_bytes);
        }
        while let Some(f) = sw.poll_tx(0) {
            frames.push((t, check_pfc_format(&sw, 0, &f, 1000)));
        }
        while sw.poll_tx(2).is_some() {}
    }
    // XOFF in the cycle the 19th frame (> 20,000 B) arrived; each PFC frame leaves 1 cycle
    // after its decision (84 wire bytes at 50 B/cycle); refreshes every 640 cycles from the
    // last one while above XON (the output drains from cycle 4000 on), then one XON.
    let (t0, t1) = (gen_on.unwrap(), gen_off.unwrap());
    assert_eq!(t0, 18);
    let xoffs: Vec<u64> = frames.iter().filter(|f| f.1.quanta[3] != 0).map(|f| f.0).collect();
    let want: Vec<u64> = (0..).map(|k| t0 + 1 + k * refresh).take_while(|&t| t <= t1).collect();
    assert_eq!(xoffs, want);
    let xons: Vec<u64> = frames.iter().filter(|f| f.1.quanta[3] == 0).map(|f| f.0).collect();
    assert_eq!(xons, [t1 + 1]);
    let c = sw.counters(0);
    assert_eq!((c.xoff_sent[3], c.xon_sent[3], c.pfc_refresh), (1, 1, want.len() as u64 - 1));
    assert_eq!(c.xoff_cycles[3], t1 - t0);
    assert_eq!(sw.xoff_state(0), 0);
    assert!(sw.is_idle());
}

/// A received PFC frame stops that class at the output for exactly ⌈quanta·512 / rate⌉ (in
/// cycles); the frame in progress completes; other classes keep flowing; pause time 0 resumes
/// at once.
#[test]
fn received_pause_stops_the_output_for_the_right_time() {
    for (rate, clk, quanta) in [(100_000u64, 250u64, 1000u16), (25_000, 322, 77), (40_000, 161, 5000)] {
        let mut sw = switch(SwitchConfig { port_rate_mbps: vec![rate; 3], ..cfg(3, 100, clk) });
        let lr = LinkRate { rate_mbps: rate, clk_mhz: clk };
        let ser = lr.cycles_for(WireFormat::default().wire_bytes(1082));
        let dur = pkt::pause_cycles(quanta, rate, clk);
        assert_eq!(dur, (quanta as u64 * 512 * clk).div_ceil(rate));
        for i in 0..40 {
            sw.rx(0, data(2, 0, 1082, 26, 2, i));
        }
        let tp = 3; // pause arrives while the first frame is on the wire
        let mut done = Vec::new();
        for t in 0..dur + 40 * ser + 500 {
            if t == tp {
                assert!(matches!(
                    sw.rx(2, pkt::build_pfc(host(2), &Pfc { class_enable: 8, quanta: [quanta; 8] })),
                    hematite_netsim::RxVerdict::Pfc(_)
                ));
                assert!(sw.is_paused(2, 3) && !sw.is_paused(2, 6));
            }
            if t == tp + 10 {
                sw.rx(1, pkt::build_roce(&pkt::RoceSpec::cnp(host(2), host(1), 5)).unwrap());
            }
            sw.step();
            while let Some(f) = sw.poll_tx(2) {
                done.push((t, pkt::is_cnp(&f)));
            }
        }
        // First frame completes (started at 0), the CNP flows during the pause, the next data
        // frame starts exactly when the pause ends.
        assert_eq!(done[0], (ser - 1, false), "rate {rate}");
        assert!(done[1].1);
        assert!(done[1].0 < tp + dur);
        assert_eq!(done[2], (tp + dur + ser - 1, false), "rate {rate} clk {clk}");
        assert_eq!(sw.counters(2).paused_cycles[3], dur);
        assert_eq!(sw.counters(2).paused_cycles[6], 0);
        assert_eq!(sw.counters(2).pfc_rx, 1);
        assert_eq!(done.len(), 41);
    }
    // Pause time 0 resumes at once.
    let mut sw = switch(cfg(3, 100, 250));
    sw.rx(2, pkt::build_pfc(host(2), &Pfc { class_enable: 8, quanta: [0xFFFF; 8] }));
    sw.rx(0, data(2, 0, 1082, 26, 2, 0));
    for _ in 0..100 {
        sw.step();
    }
    assert!(sw.poll_tx(2).is_none());
    sw.rx(2, pkt::build_pfc(host(2), &Pfc { class_enable: 8, quanta: [0; 8] }));
    let t = sw.now();
    let mut left = None;
    for _ in 0..100 {
        let c = sw.now();
        sw.step();
        if sw.poll_tx(2).is_some() {
            left = Some(c);
        }
    }
    assert_eq!(left, Some(t + 22));
    assert_eq!(sw.counters(2).paused_cycles[3], 100);
}
