//! The DCQCN reaction point and pacer RTL (rtl/cc/hm_dcqcn_rp.sv feeding hm_dcqcn_pacer.sv,
//! hematite_sim::cc::CcSim) against the reference model
//! (hematite_model::dcqcn::{Rp, Pacer}), cycle for cycle, on random schedules of CNPs (first
//! and repeated, in-range and out-of-range QPNs, bursts that overflow the CNP FIFO),
//! transmitted-bytes reports (merging, FIFO overflow, 0 bytes, inactive QPs), idle stretches
//! long enough for timers to fire, skip and release QPs, and random register sets (from
//! `HwParams::normalized`, so every documented range is reachable), on a 32-bit time counter
//! that wraps 4096 clocks after reset.
//!
//! Compared at every clock: the operation, the rate update, the drop/merge/filter strobes and
//! the nine counters (one clock later: the outputs are registered); the entry of one QP per
//! clock (round robin) through the debug port, with the active bit, the scan pointer and the
//! FIFO fill levels; the pacer's stored tokens, rate and limited bit of that QP, and its answer
//! to a random may-send query (one clock later). The pacer takes the reaction point's rate
//! updates as the RTL does: the update of clock t is written at the end of clock t+1.
use hematite_model::dcqcn::{
    HwParams, Pacer, PacerCfg, Rp, RpCfg, RpCounters, RpIn, RpOut, NVIDIA_DEFAULTS, PAPER,
};
use hematite_sim::cc::{CcIn, CcOut, CcSim, HmCcCfg, CC_CNP_FIFO, CC_NOW_INIT, CC_QPS, CC_TIME_BITS, CC_TX_FIFO};
use proptest::prelude::*;

#[derive(Clone, Copy, Debug, Default)]
struct Clk {
    cnp: Option<u8>,
    tx: Option<(u8, u16)>,
    query: u8,
}

fn counters_vec(c: &RpCounters) -> [u32; 9] {
    [
        c.cnp_dropped,
        c.tx_dropped,
        c.tx_merged,
        c.bad_qpn,
        c.activations,
        c.releases,
        c.cuts,
        c.increases,
        c.timer_skips,
    ]
}

/// Runs the RTL and the model on `sched`; returns the model's final counters.
fn run(p: HwParams, burst: u32, sched: &[Clk]) -> Result<RpCounters, TestCaseError> {
    let rcfg = RpCfg { nqp: CC_QPS, cnp_fifo_depth: CC_CNP_FIFO, tx_fifo_depth: CC_TX_FIFO, time_bits: CC_TIME_BITS };
    let mut rp = Rp::with_now(p, rcfg, CC_NOW_INIT);
    let p = *rp.params();
    let mut pacer = Pacer::new(PacerCfg { nqp: CC_QPS, burst_bytes: burst, time_bits: CC_TIME_BITS }, p.line_rate, CC_NOW_INIT);
    let mut rtl = CcSim::new(HmCcCfg::from_params(&p, burst));
    let mut prev: Option<(RpOut, RpCounters, bool)> = None;
    let mut pending_rate = None;
    let tail = [Clk::default(); 2];
    for (t, c) in sched.iter().chain(tail.iter()).enumerate() {
        let dq = (t % CC_QPS) as u8;
        let now = rp.now();
        let CcOut { rp: o, pacer: po } = rtl.tick(&CcIn { cnp: c.cnp, tx: c.tx, query_qpn: c.query, dbg_qpn: dq });
        // outputs of the previous clock
        if let Some((mo, mc, ok)) = prev {
            let tp = t - 1;
            prop_assert_eq!(o.op(), mo.op, "clock {}: operation", tp);
            prop_assert_eq!(o.rate_update(), mo.rate, "clock {}: rate update", tp);
            prop_assert_eq!(
                (o.cnp_dropped != 0, o.tx_dropped != 0, o.tx_merged != 0, o.tx_filtered != 0),
                (mo.cnp_dropped, mo.tx_dropped, mo.tx_merged, mo.tx_filtered),
                "clock {}: cnp_dropped, tx_dropped, tx_merged, tx_filtered",
                tp
            );
            prop_assert_eq!(o.stat(), counters_vec(&mc), "clock {}: counters", tp);
            prop_assert_eq!(po.query_ok != 0, ok, "clock {}: pacer may_send", tp);
        }
        // state at the start of this clock
        prop_assert_eq!(o.now, now, "clock {}: time counter", t);
        let q = u32::from(dq);
        prop_assert_eq!(o.dbg_active != 0, rp.is_active(q), "clock {}: active bit of QP {}", t, q);
        if let Some(e) = rp.qp(q) {
            prop_assert_eq!(o.entry(), e, "clock {}: entry of QP {}", t, q);
        }
        prop_assert_eq!(usize::from(o.dbg_scan), rp.scan_ptr(), "clock {}: scan pointer", t);
        prop_assert_eq!(usize::from(o.dbg_cnp_count), rp.cnp_fifo_len(), "clock {}: CNP FIFO fill", t);
        prop_assert_eq!(usize::from(o.dbg_tx_count), rp.tx_fifo().count(), "clock {}: bytes FIFO fill", t);
        let pq = pacer.qp(q).expect("in range");
        prop_assert_eq!(
            (po.tokens(), po.dbg_rate, po.dbg_limited != 0),
            (pq.tokens, pq.rate, pq.limited),
            "clock {}: pacer entry of QP {}",
            t,
            q
        );
        // the model's clock t
        let ok = pacer.may_send(u32::from(c.query), now);
        let mo = rp.step(&RpIn { cnp: c.cnp.map(u32::from), tx: c.tx.map(|(q, b)| (u32::from(q), u32::from(b))) });
        if let Some((q, b)) = c.tx {
            pacer.sent(u32::from(q), u32::from(b), now);
        }
        if let Some(u) = pending_rate.take() {
            pacer.update(&u);
        }
        pending_rate = mo.rate;
        prev = Some((mo, rp.counters(), ok));
    }
    if std::env::var_os("HM_CC_TRACE").is_some() {
        eprintln!("clocks {} {:?}", sched.len(), rp.counters());
    }
    Ok(rp.counters())
}

fn params() -> impl Strategy<Value = (HwParams, u32)> {
    let base = prop_oneof![Just(NVIDIA_DEFAULTS), Just(PAPER)];
    (
        base,
        (1u32..300, 1u32..1200, 1u32..4000, 1u32..20_000, 1u8..6, 1u8..16),
        (0u16..1024, 0u16..1100, 0u16..1024, any::<bool>(), any::<bool>()),
        (1u32..60_000_000, 1u32..5_000_000, 1u32..3_000_000, 1u32..20_000_000, 0u32..60_000_000),
        prop_oneof![Just(16_384u32), 1u32..4096, 4096u32..(1 << 20), Just(1 << 20)],
    )
        .prop_map(|(base, (ap, dp, ip, b, f, gd), (g, mdq, ia, c1, c2), (line, ai, hai, minr, first), burst)| {
            let mut p = HwParams::from_cc(&base, 250, 100_000, 1);
            p.alpha_period = ap;
            p.dec_period = dp;
            p.inc_period = ip;
            p.byte_reset = b;
            p.threshold = f;
            p.gd = gd;
            p.g = g;
            p.min_dec_q10 = mdq;
            p.initial_alpha = ia;
            p.clamp_tgt_rate = c1;
            p.clamp_after_inc = c2;
            p.line_rate = line;
            p.max_rate = line - line / 7;
            p.ai_rate = ai;
            p.hai_rate = hai;
            p.min_rate = minr;
            p.first_rate = first % 3 * (first / 3);
            (p.normalized(), burst)
        })
}

fn schedule() -> impl Strategy<Value = Vec<Clk>> {
    let qpn = prop_oneof![8 => 0u8..3, 3 => 0u8..13, 1 => 13u8..=255];
    let bytes = prop_oneof![6 => 64u16..4200, 1 => Just(0u16), 1 => Just(65535u16), 1 => 1u16..64];
    let clk = (
        prop::option::weighted(0.15, qpn.clone()),
        prop::option::weighted(0.5, (qpn.clone(), bytes)),
        0u8..16,
    )
        .prop_map(|(cnp, tx, query)| Clk { cnp, tx, query });
    let idle = (1usize..20_000, 0u8..16).prop_map(|(n, q)| vec![Clk { query: q, ..Clk::default() }; n]);
    // a storm: a CNP every clock (the CNP FIFO has priority, so the bytes FIFO fills and drops)
    // with byte reports alternating between QPs (no merging)
    let storm = (1usize..60, 0u8..13, 0u8..13).prop_map(|(n, a, b)| {
        (0..n)
            .map(|i| Clk { cnp: Some((i % 13) as u8), tx: Some((if i % 2 == 0 { a } else { b }, 1500)), query: a })
            .collect::<Vec<_>>()
    });
    prop::collection::vec(prop_oneof![3 => prop::collection::vec(clk, 1..400), 1 => idle, 1 => storm], 1..14)
        .prop_map(|v| v.concat())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: hematite_sim::proptest_cases(96), ..ProptestConfig::default() })]
    #[test]
    fn rp_and_pacer_match_model((p, burst) in params(), sched in schedule()) {
        run(p, burst, &sched)?;
    }
}

/// A long deterministic run with the NVIDIA defaults at 250 MHz / 100 Gb/s on three QPs: CNPs
/// every few microseconds while "congested", full-size packets at line rate, then a quiet
/// stretch in which timers raise the rates back and release every QP (increase timer and step
/// raised so that this happens within the run). Checks that the run
/// exercised cuts, increases and releases (so the comparison above is not vacuous here).
#[test]
fn rp_long_run_nvidia_defaults() {
    let mut p = HwParams::from_cc(&NVIDIA_DEFAULTS, 250, 100_000, 1);
    // faster recovery than the defaults (75,000-cycle timer, 5 Mb/s steps) so the QPs get back
    // to the line rate and are released within the run
    p.inc_period = 5000;
    p.ai_rate = 2_000_000;
    let mut sched = Vec::new();
    for t in 0..120_000u32 {
        let cnp = (t < 60_000 && t % 1500 == (t / 1500 % 3) * 7).then_some((t / 1500 % 3) as u8);
        let tx = (t % 21 == 0).then_some(((t / 21 % 3) as u8, 1082u16));
        sched.push(Clk { cnp, tx, query: (t % 4) as u8 });
    }
    // then quiet until the QPs are released (α decays with g = 1019/1024 every 250 cycles)
    sched.extend(std::iter::repeat_n(Clk::default(), 600_000));
    let c = run(p, 16_384, &sched).expect("RTL matches the model");
    assert!(c.activations >= 3 && c.cuts >= 10 && c.increases >= 10 && c.releases >= 3, "{c:?}");
}
