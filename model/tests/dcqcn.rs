//! DCQCN model tests: parameter conversion, NP pacing, RP invariants and hand-computed cases,
//! time-scale invariance, pacer accuracy, FIFO behaviour, and a small bottleneck demo.

use hematite_model::dcqcn::*;
use proptest::prelude::*;
use std::collections::{HashMap, VecDeque};

fn config(cases: u32) -> ProptestConfig {
    ProptestConfig { cases, failure_persistence: None, ..ProptestConfig::default() }
}

/// Small round numbers for hand computation (RU values chosen freely).
fn hand_params() -> HwParams {
    HwParams {
        clamp_tgt_rate: false,
        clamp_after_inc: true,
        inc_period: 1000,
        byte_reset: 10_000,
        threshold: 5,
        max_rate: 1 << 24,
        ai_rate: 1000,
        hai_rate: 10_000,
        gd: 11,
        min_dec_q10: 512,
        min_rate: 100,
        first_rate: 0,
        g: 1019,
        alpha_period: 100_000,
        dec_period: 70,
        initial_alpha: 1023,
        cnp_interval: 100,
        cnp_dscp: 48,
        cnp_prio: 6,
        line_rate: 1 << 24,
    }
}

fn idle(rp: &mut Rp, n: u32) -> Vec<RpOut> {
    (0..n).map(|_| rp.step(&RpIn::default())).collect()
}

/// `i` for one clock, then one clock of nothing.
fn step_idle(rp: &mut Rp, i: RpIn) {
    rp.step(&i);
    rp.step(&RpIn::default());
}

fn cnp(q: u32) -> RpIn {
    RpIn { cnp: Some(q), tx: None }
}

fn tx(q: u32, b: u32) -> RpIn {
    RpIn { cnp: None, tx: Some((q, b)) }
}

/// Runs until the next op on `q` matching `f` (at most `limit` clocks); returns (time of that
/// op, state after it).
fn run_until(rp: &mut Rp, q: u32, limit: u32, f: impl Fn(&RpOp) -> bool) -> (u32, RpQp) {
    for _ in 0..limit {
        let t = rp.now();
        let out = rp.step(&RpIn::default());
        if f(&out.op) {
            return (t, rp.qp(q).unwrap_or_default());
        }
    }
    panic!("no matching op within {limit} clocks");
}

fn is_inc_timer(op: &RpOp) -> bool {
    matches!(op, RpOp::Timer { kind: TimerKind::Increase, .. })
}

// ------------------------------------------------------------------------------------------
// Parameter conversion
// ------------------------------------------------------------------------------------------

#[test]
fn from_cc_nvidia_defaults_250mhz_100g() {
    let p = HwParams::from_cc(&NVIDIA_DEFAULTS, 250, 100_000, 1);
    assert_eq!(p.line_rate, 50 << 20); // 100 Gb/s at 250 MHz = 50 bytes per cycle
    assert_eq!(p.max_rate, p.line_rate);
    assert_eq!(p.ai_rate, 2621); // 5 Mb/s = 0.0025 B/cycle = 2621.44 RU
    assert_eq!(p.hai_rate, 26_214);
    assert_eq!(p.min_rate, 524);
    assert_eq!(p.first_rate, 0);
    assert_eq!((p.alpha_period, p.dec_period, p.inc_period, p.cnp_interval), (250, 1000, 75_000, 1000));
    assert_eq!(p.byte_reset, 32_767);
    assert_eq!((p.threshold, p.gd, p.min_dec_q10, p.g, p.initial_alpha), (1, 11, 512, 1019, 1023));
    assert_eq!((p.clamp_tgt_rate, p.clamp_after_inc, p.cnp_dscp, p.cnp_prio), (false, true, 48, 6));
    assert_eq!(p.normalized(), p);

    // time compression by 4: time constants and B divided (rounded to nearest), rates kept
    let q = HwParams::from_cc(&NVIDIA_DEFAULTS, 250, 100_000, 4);
    assert_eq!((q.alpha_period, q.dec_period, q.inc_period, q.cnp_interval), (63, 250, 18_750, 250));
    assert_eq!(q.byte_reset, 8192);
    assert_eq!((q.max_rate, q.ai_rate, q.hai_rate, q.min_rate), (p.max_rate, p.ai_rate, p.hai_rate, p.min_rate));
}

#[test]
fn from_cc_paper_preset() {
    let p = HwParams::from_cc(&PAPER, 250, 40_000, 1);
    assert_eq!(p.g, 1020); // g = 1/256
    assert_eq!((p.alpha_period, p.inc_period, p.cnp_interval, p.dec_period), (55 * 250, 55 * 250, 50 * 250, 250));
    assert_eq!(p.byte_reset, 10_000_000);
    assert_eq!(p.threshold, 5);
    assert!(p.clamp_tgt_rate);
    assert_eq!(p.ai_rate, mbps_to_ru(40, 250));
    assert_eq!(p.min_rate, mbps_to_ru(100, 250));
    assert_eq!(p.max_rate, mbps_to_ru(40_000, 250));
    for (i, v) in PAPER.iter().enumerate() {
        assert!((CC_RANGES[i].0..=CC_RANGES[i].1).contains(v), "{} out of range", CC_NAMES[i]);
    }
}

#[test]
fn from_cc_rate_clamps() {
    let mut cc = NVIDIA_DEFAULTS;
    cc[idx::RPG_MAX_RATE] = 200_000; // above the line: clamped to it
    cc[idx::RPG_MIN_RATE] = 300_000; // above max: clamped to max
    cc[idx::RATE_TO_SET_ON_FIRST_CNP] = 10;
    let p = HwParams::from_cc(&cc, 250, 100_000, 1);
    assert_eq!(p.max_rate, p.line_rate);
    assert_eq!(p.min_rate, p.max_rate);
    assert_eq!(p.first_rate, p.min_rate); // first rate kept within [min, max]
    cc[idx::MIN_TIME_BETWEEN_CNPS] = 0;
    assert_eq!(HwParams::from_cc(&cc, 250, 100_000, 1).cnp_interval, 0);
}

proptest! {
    #![proptest_config(config(512))]
    /// Any input words, clock, line rate and scale: no panic, output already normalized and
    /// within the documented widths.
    #[test]
    fn from_cc_total(words in prop::array::uniform19(any::<u32>()), clk in any::<u32>(), line in any::<u32>(), s in any::<u32>()) {
        let p = HwParams::from_cc(&words, clk, line, s);
        prop_assert_eq!(p.normalized(), p);
        prop_assert!(p.min_rate >= 1 && p.min_rate <= p.max_rate && p.max_rate <= p.line_rate && p.line_rate <= RATE_MAX);
        prop_assert!(p.inc_period >= 1 && p.alpha_period >= 1 && p.dec_period >= 1);
        prop_assert!(p.byte_reset >= 1 && p.byte_reset <= 0xFF_FFFF);
        prop_assert!(p.min_dec_q10 >= 11 && p.min_dec_q10 <= 1024);
    }
}

// ------------------------------------------------------------------------------------------
// Notification point
// ------------------------------------------------------------------------------------------

fn np_params(interval: u32) -> HwParams {
    HwParams { cnp_interval: interval, ..hand_params() }
}

#[test]
fn np_flood_one_cnp_per_interval() {
    // CE packets for 3 QPs on every clock (round robin): each QP gets its first CNP at once,
    // then exactly one per interval.
    let interval = 37;
    let mut np = Np::new(&np_params(interval), NpCfg { nqp: 8, time_bits: 32 });
    let mut sent: HashMap<u32, Vec<u64>> = HashMap::new();
    for t in 0..3000u64 {
        let q = (t % 3) as u32;
        let out = np.step(&NpIn { ce: Some(q), cnp_full: false });
        if let Some(c) = out.cnp {
            assert_eq!(c, q);
            sent.entry(q).or_default().push(t);
        } else {
            assert!(out.suppressed);
        }
    }
    for q in 0..3u32 {
        let v = &sent[&q];
        assert_eq!(v[0], u64::from(q), "first CE of QP {q} sends at once");
        for w in v.windows(2) {
            // the first CE at or after last + interval: every 3 clocks → interval rounded up to 3
            assert_eq!(w[1] - w[0], u64::from(interval).div_ceil(3) * 3);
        }
    }
}

proptest! {
    #![proptest_config(config(128))]
    /// Random CE schedules for several QPs with random CNP back-pressure, against a direct
    /// statement of the rule on unbounded time.
    #[test]
    fn np_matches_rule(interval in 0u32..200, bits in prop::sample::select(vec![12u32, 16, 32]),
                       start in any::<u32>(),
                       sched in prop::collection::vec((0u32..5, 0u32..600, any::<bool>(), 0u8..10), 1..300)) {
        let cfg = NpCfg { nqp: 4, time_bits: bits };
        let mut np = Np::with_now(&np_params(interval), cfg, start);
        let mut last: HashMap<u32, u64> = HashMap::new();
        let mut t = 0u64;
        for &(q, gap, burst, full) in &sched {
            for _ in 0..gap {
                let out = np.step(&NpIn::default());
                prop_assert_eq!(out, NpOut::default());
                t += 1;
            }
            for _ in 0..(if burst { 20 } else { 1 }) {
                let full = full == 0;
                let out = np.step(&NpIn { ce: Some(q), cnp_full: full });
                if q >= 4 {
                    prop_assert_eq!(out, NpOut::default());
                } else {
                    let due = last.get(&q).is_none_or(|&l| t - l >= u64::from(interval));
                    prop_assert_eq!(out.cnp.is_some(), due && !full, "t={} q={}", t, q);
                    prop_assert_eq!(out.blocked, due && full);
                    prop_assert_eq!(out.suppressed, !due);
                    if out.cnp.is_some() {
                        last.insert(q, t);
                    }
                }
                t += 1;
            }
        }
    }
}

#[test]
fn np_wrap_after_long_idle() {
    // 12-bit time: half period 2048. QP 1 idles a full period plus a little (less than the
    // interval): without the scrubber its age would alias to a small value and suppress the CNP.
    let interval = 100;
    let mut np = Np::with_now(&np_params(interval), NpCfg { nqp: 4, time_bits: 12 }, 4000);
    assert!(np.step(&NpIn { ce: Some(1), cnp_full: false }).cnp.is_some());
    for _ in 0..(4096 + 10 - 1) {
        np.step(&NpIn::default());
    }
    assert_eq!(np.last_cnp(1), None, "scrubbed");
    assert_eq!(np.step(&NpIn { ce: Some(1), cnp_full: false }).cnp, Some(1));
    // and right after, the interval applies again
    assert!(np.step(&NpIn { ce: Some(1), cnp_full: false }).suppressed);
}

// ------------------------------------------------------------------------------------------
// Reaction point: hand-computed cases
// ------------------------------------------------------------------------------------------

#[test]
fn single_cnp_fast_recovery_then_additive() {
    let p = hand_params();
    let mut rp = Rp::new(p, RpCfg { nqp: 4, ..RpCfg::default() });
    assert_eq!(rp.step(&cnp(2)).op, RpOp::Idle);
    let t_act = rp.now();
    let out = rp.step(&RpIn::default());
    assert_eq!(out.op, RpOp::FirstCnp { qpn: 2 });
    let s = rp.qp(2).unwrap();
    let max = u64::from(p.max_rate);
    let rc1 = (max - ((max * 1023) >> 11)) as u32; // α = 1023/1024: cut by α/2
    assert_eq!((s.rc, s.rt, s.alpha), (rc1, p.max_rate, 1023));
    assert_eq!(out.rate, Some(RateUpdate { qpn: 2, rate: rc1, limited: true }));
    assert_eq!((s.alpha_dl, s.dec_dl, s.inc_dl), (t_act + 100_000, t_act + 70, t_act + 1000));

    // F = 5 timer events of fast recovery at t_act + k·T
    let d0 = p.max_rate - rc1;
    let mut rc = rc1;
    for k in 1..=5u32 {
        let (t, s) = run_until(&mut rp, 2, 2000, is_inc_timer);
        assert_eq!(t, t_act + k * 1000);
        rc = (p.max_rate + rc).div_ceil(2);
        assert_eq!((s.rc, s.rt, s.t_stage), (rc, p.max_rate, k as u8));
    }
    let s = rp.qp(2).unwrap();
    assert_eq!(s.rt - s.rc, d0 >> 5, "within 2^-F of R_T");
    // max rate reached by R_T already: additive increase is clamped; lower R_T to see AI
    let mut p2 = p;
    p2.max_rate = p.max_rate * 2;
    p2.line_rate = p2.max_rate;
    rp.set_params(p2);
    let (_, s6) = run_until(&mut rp, 2, 2000, is_inc_timer);
    assert_eq!(s6.rt, p.max_rate + 1000);
    assert_eq!(s6.rc, (s6.rt + s.rc).div_ceil(2));
    let (_, s7) = run_until(&mut rp, 2, 2000, is_inc_timer);
    assert_eq!((s7.rt, s7.rc, s7.t_stage), (s6.rt + 1000, (s6.rt + 1000 + s6.rc).div_ceil(2), 7));
}

#[test]
fn hyper_increase_steps() {
    // F = 1; byte events (B bytes each) and timer events; stages counted after the event:
    // max ≤ F fast recovery, min > F hyper by (min − F)·R_HAI, else additive.
    // rate_to_set_on_first_cnp keeps R_T far below the max rate (no cut on the first CNP)
    let p = HwParams { threshold: 1, first_rate: 1 << 20, max_rate: 1 << 30, line_rate: 1 << 30, ..hand_params() };
    let mut rp = Rp::new(p, RpCfg { nqp: 1, ..RpCfg::default() });
    step_idle(&mut rp, cnp(0));
    let s0 = rp.qp(0).unwrap();
    let (mut rt, mut rc) = (s0.rt, s0.rc);
    let mut check = |rp: &Rp, step: u32, t: u8, b: u8| {
        rt += step;
        rc = (rt + rc).div_ceil(2);
        let s = rp.qp(0).unwrap();
        assert_eq!((s.rt, s.rc, s.t_stage, s.bc_stage), (rt, rc, t, b));
    };
    // BC = 1: fast recovery; BC = 2: additive (max 2 > F, min 0)
    step_idle(&mut rp, tx(0, 10_000));
    check(&rp, 0, 0, 1);
    step_idle(&mut rp, tx(0, 10_000));
    check(&rp, 1000, 0, 2);
    // T = 1: min 1 = F → additive; T = 2: min 2 → hyper 1·R_HAI
    run_until(&mut rp, 0, 2000, is_inc_timer);
    check(&rp, 1000, 1, 2);
    run_until(&mut rp, 0, 2000, is_inc_timer);
    check(&rp, 10_000, 2, 2);
    // BC = 3: min 2 → hyper 1; T = 3: min 3 → hyper 2
    step_idle(&mut rp, tx(0, 10_000));
    check(&rp, 10_000, 2, 3);
    run_until(&mut rp, 0, 2000, is_inc_timer);
    check(&rp, 20_000, 3, 3);
    // bytes below B only count
    step_idle(&mut rp, tx(0, 9_999));
    assert_eq!(rp.qp(0).unwrap().byte_cnt, 9_999);
    step_idle(&mut rp, tx(0, 2));
    check(&rp, 20_000, 3, 4);
    assert_eq!(rp.qp(0).unwrap().byte_cnt, 1);
}

/// Two cuts with `between` happening between them; returns (R_T after the second cut,
/// R_C just before it).
fn two_cuts(clamp_tgt: bool, after_inc: bool, between: &str) -> (u32, u32) {
    let p = HwParams { clamp_tgt_rate: clamp_tgt, clamp_after_inc: after_inc, threshold: 5, ..hand_params() };
    let mut rp = Rp::new(p, RpCfg { nqp: 1, ..RpCfg::default() });
    step_idle(&mut rp, cnp(0)); // first cut at t = 1; ticks at 71, 141, ...; increase timer at 1001
    match between {
        "timer" => {
            run_until(&mut rp, 0, 2000, is_inc_timer);
        }
        "bytes" => {
            step_idle(&mut rp, tx(0, 10_000));
        }
        _ => {}
    }
    let before = rp.qp(0).unwrap();
    rp.step(&cnp(0));
    run_until(&mut rp, 0, 200, |op| matches!(op, RpOp::Timer { kind: TimerKind::Decrease, cut: true, .. }));
    (rp.qp(0).unwrap().rt, before.rc)
}

#[test]
fn clamp_rules() {
    let max = hand_params().max_rate;
    for (ct, ai) in [(false, false), (false, true), (true, false), (true, true)] {
        // back-to-back cuts: R_T keeps the older, higher value unless clamp_tgt_rate
        let (rt, rc) = two_cuts(ct, ai, "none");
        assert_eq!(rt, if ct { rc } else { max }, "none {ct} {ai}");
        // a timer increase in between: clamped with clamp_tgt_rate or _after_time_inc
        let (rt, rc) = two_cuts(ct, ai, "timer");
        assert_eq!(rt, if ct || ai { rc } else { max }, "timer {ct} {ai}");
        // a byte-counter increase in between: always clamped
        let (rt, rc) = two_cuts(ct, ai, "bytes");
        assert_eq!(rt, rc, "bytes {ct} {ai}");
    }
}

#[test]
fn cnps_in_one_window_coalesce_into_one_cut() {
    let p = HwParams { alpha_period: 10_000, ..hand_params() };
    let mut rp = Rp::new(p, RpCfg { nqp: 2, ..RpCfg::default() });
    rp.step(&cnp(1));
    let t_act = rp.now();
    rp.step(&RpIn::default());
    let s1 = rp.qp(1).unwrap();
    // five CNPs inside the first window (ticks at t_act + 70k)
    for k in 0..5 {
        rp.step(&cnp(1));
        idle(&mut rp, 3 + k);
    }
    assert_eq!(rp.qp(1).unwrap().rc, s1.rc, "no cut inside the window");
    let mut cuts = vec![];
    for _ in 0..400 {
        let t = rp.now();
        if let RpOp::Timer { kind: TimerKind::Decrease, cut, .. } = rp.step(&RpIn::default()).op {
            cuts.push((t, cut));
        }
    }
    assert_eq!(&cuts[..3], &[(t_act + 70, true), (t_act + 140, false), (t_act + 210, false)]);
    let s2 = rp.qp(1).unwrap();
    let rc1 = u64::from(s1.rc);
    assert_eq!(u64::from(s2.rc), rc1 - ((rc1 * 1023) >> 11), "one cut with the same α");
    assert_eq!(rp.counters().cuts, 2);
}

#[test]
fn alpha_update_arithmetic() {
    let p = HwParams { alpha_period: 20, dec_period: 1000, initial_alpha: 600, ..hand_params() };
    let mut rp = Rp::new(p, RpCfg { nqp: 1, ..RpCfg::default() });
    step_idle(&mut rp, cnp(0));
    let alpha = |rp: &mut Rp| run_until(rp, 0, 100, |op| matches!(op, RpOp::Timer { kind: TimerKind::Alpha, .. })).1.alpha;
    // first CNP does not count as "seen": decay
    assert_eq!(alpha(&mut rp), ((600 * 1019) >> 10) as u16);
    rp.step(&cnp(0));
    let a = ((597u32 * 1019) >> 10) + 5;
    assert_eq!(alpha(&mut rp), a as u16);
    // G = 0 with a CNP saturates at 1023
    let mut rp = Rp::new(HwParams { g: 0, ..p }, RpCfg { nqp: 1, ..RpCfg::default() });
    step_idle(&mut rp, cnp(0));
    rp.step(&cnp(0));
    assert_eq!(alpha(&mut rp), 1023);
}

#[test]
fn first_rate_and_release() {
    // rate_to_set_on_first_cnp: R_C = R_T = that rate, no cut; with G = 0 α drops to 0 at the
    // first tick without CNP, and quick increases bring the QP back to max, where it is released.
    let p = HwParams { first_rate: 1 << 20, g: 0, alpha_period: 30, threshold: 1, ai_rate: 1 << 22, inc_period: 40, ..hand_params() };
    let mut rp = Rp::new(p, RpCfg { nqp: 3, ..RpCfg::default() });
    let mut pacer = Pacer::new(PacerCfg { nqp: 3, ..PacerCfg::default() }, p.line_rate, 0);
    rp.step(&cnp(1));
    let out = rp.step(&RpIn::default());
    assert_eq!(out.rate, Some(RateUpdate { qpn: 1, rate: 1 << 20, limited: true }));
    let s = rp.qp(1).unwrap();
    assert_eq!((s.rc, s.rt, s.alpha), (1 << 20, 1 << 20, 1023));
    let mut released = None;
    for _ in 0..2000 {
        let t = rp.now();
        let out = rp.step(&RpIn::default());
        if let Some(u) = out.rate {
            pacer.update(&u);
        }
        if let RpOp::Release { qpn } = out.op {
            released = Some((t, qpn, out.rate));
            break;
        }
    }
    let (_, q, u) = released.expect("released");
    assert_eq!(q, 1);
    assert_eq!(u, Some(RateUpdate { qpn: 1, rate: p.line_rate, limited: false }));
    assert!(!rp.is_active(1));
    assert_eq!(rp.active_count(), 0);
    assert!(!pacer.qp(1).unwrap().limited);
    // nothing active: every clock is idle; the next CNP is a first CNP again
    assert!(idle(&mut rp, 50).iter().all(|o| o.op == RpOp::Idle));
    rp.step(&cnp(1));
    assert_eq!(rp.step(&RpIn::default()).op, RpOp::FirstCnp { qpn: 1 });
}

#[test]
fn scan_visits_active_qps_round_robin() {
    let p = HwParams { alpha_period: 1 << 20, dec_period: 1 << 20, inc_period: 1 << 20, ..hand_params() };
    let mut rp = Rp::new(p, RpCfg { nqp: 200, ..RpCfg::default() });
    for q in [5u32, 70, 199] {
        rp.step(&cnp(q));
    }
    idle(&mut rp, 3);
    let visits: Vec<RpOp> = idle(&mut rp, 6).into_iter().map(|o| o.op).collect();
    let v = |qpn| RpOp::Visit { qpn };
    // the pointer was left after the last visit; the order is circular
    let expect = [v(5), v(70), v(199)];
    let start = expect.iter().position(|x| *x == visits[0]).unwrap();
    for (k, op) in visits.iter().enumerate() {
        assert_eq!(*op, expect[(start + k) % 3]);
    }
}

// ------------------------------------------------------------------------------------------
// Reaction point: invariants over random schedules and parameters
// ------------------------------------------------------------------------------------------

/// CC parameter words within the firmware ranges, with time constants kept short enough
/// that timers fire within a test run.
fn cc_strategy() -> impl Strategy<Value = [u32; CC_PARAMS]> {
    (
        (0u32..=1, 0u32..=1, 1u32..=400, 1u32..=200_000, 1u32..=31, prop_oneof![Just(0u32), 1u32..=400_000]),
        (1u32..=20_000, 1u32..=100_000, 1u32..=15, 1u32..=100, 1u32..=50_000, prop_oneof![Just(0u32), 1u32..=400_000]),
        (0u32..=1023, 1u32..=40, 1u32..=50, 0u32..=1023, 0u32..=100),
    )
        .prop_map(|((a0, a1, a2, a3, a4, a5), (b6, b7, b8, b9, b10, b11), (c12, c13, c14, c15, c16))| {
            [a0, a1, a2, a3, a4, a5, b6, b7, b8, b9, b10, b11, c12, c13, c14, c15, c16, 48, 6]
        })
}

/// One schedule entry: idle clocks, then one clock with these inputs (repeated `rep` times).
#[derive(Debug, Clone)]
struct Ev {
    gap: u32,
    cnp: Option<u32>,
    tx: Option<(u32, u32)>,
    rep: u32,
}

fn ev_strategy(nqp: u32) -> impl Strategy<Value = Ev> {
    (
        prop_oneof![4 => 0u32..20, 2 => 0u32..500, 1 => 0u32..20_000],
        prop::option::weighted(0.3, 0..nqp + 1),
        prop::option::weighted(0.8, (0..nqp + 1, prop_oneof![0u32..100, 64u32..9300, 0u32..70_000])),
        prop_oneof![8 => Just(1u32), 1 => 1u32..40],
    )
        .prop_map(|(gap, cnp, tx, rep)| Ev { gap, cnp, tx, rep })
}

fn check_invariants(rp: &Rp, q: u32) -> Result<(), TestCaseError> {
    let p = rp.params();
    if let Some(s) = rp.qp(q) {
        prop_assert!(p.min_rate <= s.rc && s.rc <= s.rt && s.rt <= p.max_rate, "qp {} {:?} {:?}", q, s, p);
        prop_assert!(s.alpha <= 1023);
        prop_assert!(s.t_stage <= 31 && s.bc_stage <= 31);
        prop_assert!(s.byte_cnt < p.byte_reset);
        prop_assert_eq!(rp.rate(q), (s.rc, true));
    } else {
        prop_assert_eq!(rp.rate(q), (p.line_rate, false));
    }
    Ok(())
}

proptest! {
    #![proptest_config(config(96))]
    #[test]
    fn rp_invariants(cc in cc_strategy(), clk in prop::sample::select(vec![100u32, 156, 250, 322, 500]),
                     line in prop::sample::select(vec![10_000u32, 25_000, 100_000, 400_000]),
                     scale in 1u32..=64, nqp in 1u32..=6, depths in (1usize..=4, 1usize..=8),
                     bits in prop::sample::select(vec![20u32, 32]),
                     sched in prop::collection::vec(ev_strategy(6), 1..150)) {
        let p = HwParams::from_cc(&cc, clk, line, scale);
        let cfg = RpCfg { nqp: nqp as usize, cnp_fifo_depth: depths.0, tx_fifo_depth: depths.1, time_bits: bits };
        let mut rp = Rp::with_now(p, cfg, 0xFFFF_F000);
        let mut pacer = Pacer::new(PacerCfg { nqp: nqp as usize, time_bits: bits, ..PacerCfg::default() }, p.line_rate, rp.now());
        let pct = u64::from(cc[idx::RPG_MIN_DEC_FAC]);
        let mut cnp_in = 0u32;
        for ev in &sched {
            for k in 0..ev.gap + ev.rep {
                let inp = if k < ev.gap { RpIn::default() } else { RpIn { cnp: ev.cnp, tx: ev.tx } };
                let before: Vec<Option<RpQp>> = (0..nqp).map(|q| rp.qp(q)).collect();
                let out = rp.step(&inp);
                if inp.cnp.is_some_and(|q| q < nqp) {
                    cnp_in += 1;
                }
                // a cut never goes below rpg_min_dec_fac % of the old rate nor below min_rate
                let cut_of = match out.op {
                    RpOp::FirstCnp { qpn } if p.first_rate == 0 => Some((qpn, u64::from(p.max_rate))),
                    RpOp::Timer { qpn, kind: TimerKind::Decrease, cut: true } => Some((qpn, u64::from(before[qpn as usize].unwrap().rc))),
                    _ => None,
                };
                if let Some((q, old)) = cut_of {
                    let new = u64::from(rp.qp(q).unwrap().rc);
                    prop_assert!(new >= old * pct / 100, "cut {} -> {} below {}%", old, new, pct);
                    prop_assert!(new <= old && new >= u64::from(p.min_rate));
                }
                // a rate update is emitted exactly when R_C or the limited state changed
                for q in 0..nqp {
                    let changed = before[q as usize].map(|s| s.rc) != rp.qp(q).map(|s| s.rc);
                    let upd = out.rate.filter(|u| u.qpn == q);
                    prop_assert_eq!(changed, upd.is_some(), "update for qp {} op {:?}", q, out.op);
                    check_invariants(&rp, q)?;
                }
                if let Some(u) = out.rate {
                    prop_assert_eq!((u.rate, u.limited), rp.rate(u.qpn));
                    pacer.update(&u);
                }
                prop_assert!(rp.cnp_fifo_len() <= depths.0 && rp.tx_fifo().count() <= depths.1);
                prop_assert!(rp.tx_fifo().all(|(_, b)| (1..=TX_BYTES_MAX).contains(&b)));
            }
        }
        // every CNP accepted is eventually taken (none dropped: at most one arrives per clock)
        idle(&mut rp, 8);
        prop_assert_eq!(rp.counters().cnp_dropped, 0);
        prop_assert_eq!(rp.counters().activations + rp.counters().cuts >= 1, cnp_in > 0);
    }
}

// ------------------------------------------------------------------------------------------
// Time-scale invariance
// ------------------------------------------------------------------------------------------

/// (time of op, op, state after it with the byte counter in units of the scale) for every op
/// that is not an idle clock or an empty visit.
type Trace = Vec<(u32, RpOp, Option<(u32, u32, u16, bool, bool, u8, u8, u32)>)>;

fn trace_run(p: HwParams, events: &[(u32, bool, u32)], div: u32, tail: u32) -> Trace {
    let mut rp = Rp::new(p, RpCfg { nqp: 1, ..RpCfg::default() });
    let mut tr = Trace::new();
    let end = events.last().map_or(0, |e| e.0) / div + tail;
    let mut evs = events.iter().peekable();
    for t in 0..end {
        let mut inp = RpIn::default();
        if let Some(&&(et, c, b)) = evs.peek() {
            if et / div == t {
                evs.next();
                inp = RpIn { cnp: c.then_some(0), tx: (b > 0).then_some((0, b / div)) };
            }
        }
        let now = rp.now();
        let out = rp.step(&inp);
        if !matches!(out.op, RpOp::Idle | RpOp::Visit { .. }) {
            let st = rp.qp(0).map(|s| (s.rc, s.rt, s.alpha, s.cnp_seen, s.dec_pending, s.t_stage, s.bc_stage, s.byte_cnt));
            tr.push((now, out.op, st));
        }
    }
    tr
}

proptest! {
    #![proptest_config(config(64))]
    /// With every time constant divided by s (exactly: 256 MHz clock, s | 256) and every byte
    /// quantity divided by s, the scaled run applies the same operations with the same results;
    /// each op's time differs from the unscaled one only by the fixed pipeline offset and a few
    /// clocks of arbitration.
    #[test]
    fn time_scale_invariance(cc in cc_strategy(), s in prop::sample::select(vec![2u32, 4, 8]),
                             evs in prop::collection::vec((2u32..200, any::<bool>(), 0u32..6), 1..30)) {
        let mut cc = cc;
        // B a multiple of s, reports at most B (so the remainder clamp never binds)
        cc[idx::RPG_BYTE_RESET] = (cc[idx::RPG_BYTE_RESET].max(64) / 8) * 8;
        let b = cc[idx::RPG_BYTE_RESET];
        let p1 = HwParams::from_cc(&cc, 256, 100_000, 1);
        let ps = HwParams::from_cc(&cc, 256, 100_000, s);
        prop_assert_eq!(ps.alpha_period * s, p1.alpha_period);
        prop_assert_eq!(ps.byte_reset * s, p1.byte_reset);
        // events at multiples of 8s, at least 8s apart; the first is a CNP
        let mut t = 0u32;
        let mut events = vec![];
        for (i, &(gap, c, bsel)) in evs.iter().enumerate() {
            t += gap * 8 * s;
            let bytes = [0, b, b / 2, 8 * s, b / 3, b / 8][bsel as usize].min(65_528) / s * s;
            events.push((t, c || i == 0, bytes));
        }
        let tail = p1.inc_period * 3 + 100;
        let t1 = trace_run(p1, &events, 1, tail);
        let ts = trace_run(ps, &events, s, tail / s);
        // the runs end within s clocks of each other (mapped): compare the common prefix
        let n = t1.len().min(ts.len());
        prop_assert!(t1.len().abs_diff(ts.len()) <= 3, "lengths {} {}", t1.len(), ts.len());
        for k in 0..n.saturating_sub(3) {
            let (u, op1, st1) = t1[k];
            let (c, ops, sts) = ts[k];
            prop_assert_eq!(op1, ops, "op {}", k);
            let sts = sts.map(|mut x| { x.7 *= s; x });
            prop_assert_eq!(st1, sts, "state after op {} ({:?})", k, op1);
            let mapped = i64::from(s) * (i64::from(c) - 1) + 1;
            prop_assert!((i64::from(u) - mapped).abs() <= i64::from(s) * 4, "time {} vs {}·({}−1)+1", u, s, c);
        }
    }
}

// ------------------------------------------------------------------------------------------
// FIFOs
// ------------------------------------------------------------------------------------------

#[test]
fn tx_fifo_full_drops_and_counts() {
    let p = hand_params();
    let depth = 4;
    let mut rp = Rp::new(p, RpCfg { nqp: 4, cnp_fifo_depth: 1, tx_fifo_depth: depth, time_bits: 32 });
    for q in 0..4 {
        rp.step(&cnp(q));
    }
    idle(&mut rp, 2);
    assert_eq!(rp.active_count(), 4);
    // a CNP every clock starves the bytes FIFO; reports alternate between QPs 1 and 2 until it
    // is full, then come for QP 3 (never the tail's QP, so nothing merges)
    let flood = 20;
    let mut dropped = 0;
    for k in 0..flood {
        let q = if k < depth as u32 { 1 + k % 2 } else { 3 };
        let out = rp.step(&RpIn { cnp: Some(0), tx: Some((q, 100)) });
        assert!(!out.cnp_dropped, "one CNP per clock never overflows the CNP FIFO");
        assert!(k == 0 || out.op == RpOp::Cnp { qpn: 0 });
        dropped += u32::from(out.tx_dropped);
    }
    assert_eq!(rp.tx_fifo().count(), depth);
    assert_eq!(dropped, flood - depth as u32);
    assert_eq!(rp.counters().tx_dropped, dropped);
    // a full FIFO still merges a report for its tail entry's QP
    let out = rp.step(&RpIn { cnp: Some(0), tx: Some((2, 100)) });
    assert!(out.tx_merged && !out.tx_dropped);
    assert_eq!(rp.tx_fifo().collect::<Vec<_>>(), vec![(1, 100), (2, 100), (1, 100), (2, 200)]);
    // drain: the pending CNP, then one entry per clock
    let ops: Vec<RpOp> = idle(&mut rp, 1 + depth as u32).into_iter().map(|o| o.op).collect();
    assert_eq!(ops[0], RpOp::Cnp { qpn: 0 });
    assert!(ops[1..].iter().all(|o| matches!(o, RpOp::Bytes { event: false, .. })));
    assert_eq!((rp.qp(1).unwrap().byte_cnt, rp.qp(2).unwrap().byte_cnt, rp.qp(3).unwrap().byte_cnt), (200, 300, 0));
}

#[test]
fn tx_reports_merge_and_filter() {
    let p = HwParams { byte_reset: 1000, ..hand_params() };
    let mut rp = Rp::new(p, RpCfg { nqp: 4, cnp_fifo_depth: 1, tx_fifo_depth: 2, time_bits: 32 });
    // inactive QP: filtered, costs nothing
    let out = rp.step(&tx(3, 500));
    assert!(out.tx_filtered);
    assert_eq!(out.op, RpOp::Idle);
    step_idle(&mut rp, cnp(0));
    // CNP flood holds the bytes FIFO: same-QP reports merge up to B = 1000
    let mut merged = 0;
    for _ in 0..5 {
        let out = rp.step(&RpIn { cnp: Some(0), tx: Some((0, 300)) });
        merged += u32::from(out.tx_merged);
    }
    // 300 | +300 +300 = 900 | 300 +300 = 600 → two entries, three merges
    assert_eq!(rp.tx_fifo().collect::<Vec<_>>(), vec![(0, 900), (0, 600)]);
    assert_eq!(merged, 3);
}

// ------------------------------------------------------------------------------------------
// Pacer
// ------------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(config(64))]
    /// A backlogged, link-limited sender limited at `rate`: the first cycle at which `may_send`
    /// becomes true is found by bisection (the token level only grows while idle); long-run
    /// bytes stay within one burst plus one packet of rate × time.
    #[test]
    fn pacer_rate_accuracy(rate_mbps in 100u32..=100_000, pkt in 64u32..=9216, burst in 18_432u32..=65_536,
                           start in any::<u32>()) {
        let clk = 250;
        let line = mbps_to_ru(100_000, clk);
        let rate = mbps_to_ru(rate_mbps, clk);
        let mut pc = Pacer::new(PacerCfg { nqp: 2, burst_bytes: burst, time_bits: 32 }, line, start);
        pc.update(&RateUpdate { qpn: 1, rate, limited: true });
        let at = |t: u64| (u64::from(start) + t) as u32;
        let ser = u64::from(pkt).div_ceil(50); // link: 50 bytes per cycle
        let mut t = 0u64;
        let mut bytes = 0u64;
        let n = 2000;
        let link_mbps = pkt as f64 / ser as f64 * 8.0 * f64::from(clk);
        let paced = f64::from(rate_mbps) < 0.95 * link_mbps;
        for _ in 0..n {
            // first cycle ≥ t with may_send
            if !pc.may_send(1, at(t)) {
                let (mut lo, mut hi) = (t, t + 1);
                while !pc.may_send(1, at(hi)) {
                    hi = t + (hi - t) * 2;
                }
                while hi - lo > 1 {
                    let m = (lo + hi) / 2;
                    if pc.may_send(1, at(m)) { hi = m } else { lo = m }
                }
                t = hi;
            }
            prop_assert!(pc.may_send(1, at(t)));
            pc.sent(1, pkt, at(t));
            bytes += u64::from(pkt);
            t += ser;
        }
        // bytes sent before time t vs the rate
        let ideal = (t as f64) * f64::from(rate) / f64::from(1u32 << RATE_FRAC);
        let sent_before = (bytes - u64::from(pkt)) as f64;
        prop_assert!(sent_before <= ideal + f64::from(burst) + f64::from(pkt), "{} > {}", sent_before, ideal);
        if paced {
            prop_assert!(bytes as f64 >= ideal - f64::from(pkt) * 2.0, "{} < {}", bytes, ideal);
        }
        // long-run rate within 1 % once the burst is amortised
        let measured = (bytes as f64 - f64::from(burst)) / t as f64 * 8.0 * f64::from(clk);
        if (bytes as f64) > 20.0 * f64::from(burst) && paced {
            prop_assert!((measured / f64::from(rate_mbps) - 1.0).abs() < 0.01, "{} vs {}", measured, rate_mbps);
        }
    }

    /// Unlimited QPs are never held back, whatever was sent; a QP limited at exactly the line
    /// rate with a burst of at least one packet never waits for a link-limited sender.
    #[test]
    fn pacer_no_bubbles(pkts in prop::collection::vec(64u32..=9216, 1..300), start in any::<u32>()) {
        let line = mbps_to_ru(100_000, 250); // exactly 50 << 20
        let mut pc = Pacer::new(PacerCfg { nqp: 2, burst_bytes: 9216, time_bits: 32 }, line, start);
        pc.update(&RateUpdate { qpn: 1, rate: line, limited: true });
        let mut t = u64::from(start);
        for &b in &pkts {
            prop_assert!(pc.may_send(0, t as u32));
            prop_assert!(pc.may_send(1, t as u32), "limited at line rate waited");
            pc.sent(0, b, t as u32);
            pc.sent(1, b, t as u32);
            t += u64::from(b).div_ceil(50);
        }
        prop_assert!(pc.may_send(0, t as u32) && pc.may_send(0, (t + 1) as u32));
    }
}

#[test]
fn never_cut_qps_cost_nothing() {
    let p = HwParams::from_cc(&NVIDIA_DEFAULTS, 250, 100_000, 1);
    let mut rp = Rp::new(p, RpCfg { nqp: 4096, ..RpCfg::default() });
    let pc = Pacer::new(PacerCfg { nqp: 4096, ..PacerCfg::default() }, p.line_rate, 0);
    for k in 0..10_000u32 {
        let out = rp.step(&tx(k % 4096, 1500));
        assert!(out.op == RpOp::Idle && out.rate.is_none() && out.tx_filtered);
        assert!(pc.may_send(k % 4096, rp.now()));
    }
    assert_eq!(rp.tx_fifo().count(), 0);
}

// ------------------------------------------------------------------------------------------
// Bottleneck demo
// ------------------------------------------------------------------------------------------

/// xorshift64* (deterministic).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

struct Sender {
    rp: Rp,
    pacer: Pacer,
    link_free: u64,
    start: u64,
    cnp_in: VecDeque<u64>,
}

struct DemoResult {
    gbps: Vec<f64>,
    jain: f64,
    util: f64,
    max_queue: u64,
    cnps: u32,
}

/// `n` senders (one QP each, 100 Gb/s links, 250 MHz) into one 100 Gb/s bottleneck with RED/ECN
/// marking on the instantaneous queue, a receiver NP and CNPs back; time compressed by `s`
/// (time constants, B, Kmin/Kmax and propagation delays all divided by s). Flows start
/// staggered; throughput is measured at the bottleneck over the last quarter.
fn demo(n: usize, cc: &[u32; CC_PARAMS], s: u32, total_us: u64, kmin: u64, kmax: u64, pmax_pct: u64) -> DemoResult {
    let clk = 250u64;
    let p = HwParams::from_cc(cc, clk as u32, 100_000, s);
    let pkt = 1000u64; // bytes per packet; 20 cycles on a 50 B/cycle link
    let ser = pkt / 50;
    let prop = (clk / u64::from(s)).max(1); // 1 µs each way, scaled
    let (kmin, kmax) = (kmin / u64::from(s), kmax / u64::from(s));
    let end = total_us * clk / u64::from(s);
    let stagger = end / 4 / n as u64;
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut snd: Vec<Sender> = (0..n)
        .map(|i| Sender {
            rp: Rp::new(p, RpCfg { nqp: 1, ..RpCfg::default() }),
            pacer: Pacer::new(PacerCfg { nqp: 1, burst_bytes: 16_384, time_bits: 32 }, p.line_rate, 0),
            link_free: 0,
            start: i as u64 * stagger,
            cnp_in: VecDeque::new(),
        })
        .collect();
    let mut np = Np::new(&p, NpCfg { nqp: n, time_bits: 32 });
    let mut arrivals: VecDeque<(u64, usize)> = VecDeque::new(); // at the switch (time order per sender only)
    let mut pending: Vec<(u64, usize)> = vec![];
    let mut queue: VecDeque<(usize, bool)> = VecDeque::new();
    let mut qbytes = 0u64;
    let mut max_queue = 0u64;
    let mut egress_free = 0u64;
    let mut to_rx: VecDeque<(u64, usize, bool)> = VecDeque::new();
    let measure_from = end - end / 4;
    let mut delivered = vec![0u64; n];
    for t in 0..end {
        let now = t as u32;
        // senders
        for (i, sd) in snd.iter_mut().enumerate() {
            let c = if sd.cnp_in.front() == Some(&t) {
                sd.cnp_in.pop_front();
                Some(0)
            } else {
                None
            };
            let mut txr = None;
            if t >= sd.start && sd.link_free <= t && sd.pacer.may_send(0, now) {
                sd.pacer.sent(0, pkt as u32, now);
                txr = Some((0, pkt as u32));
                sd.link_free = t + ser;
                pending.push((t + ser + prop, i));
            }
            let out = sd.rp.step(&RpIn { cnp: c, tx: txr });
            if let Some(u) = out.rate {
                sd.pacer.update(&u);
            }
        }
        pending.sort_unstable();
        arrivals.extend(pending.drain(..));
        // switch ingress: RED on the instantaneous queue
        while arrivals.front().is_some_and(|a| a.0 <= t) {
            let (_, i) = arrivals.pop_front().unwrap_or_default();
            let mark = if qbytes <= kmin {
                false
            } else if qbytes > kmax {
                true
            } else {
                rng.next() % (100 * (kmax - kmin)) < pmax_pct * (qbytes - kmin)
            };
            queue.push_back((i, mark));
            qbytes += pkt;
            max_queue = max_queue.max(qbytes);
        }
        // switch egress
        if egress_free <= t {
            if let Some((i, mark)) = queue.pop_front() {
                qbytes -= pkt;
                egress_free = t + ser;
                to_rx.push_back((t + ser + prop, i, mark));
                if t >= measure_from {
                    delivered[i] += pkt;
                }
            }
        }
        // receiver NP
        let mut ce = None;
        if to_rx.front().is_some_and(|a| a.0 <= t) {
            let (_, i, mark) = to_rx.pop_front().unwrap_or_default();
            if mark {
                ce = Some(i as u32);
            }
        }
        if let Some(q) = np.step(&NpIn { ce, cnp_full: false }).cnp {
            snd[q as usize].cnp_in.push_back(t + prop);
        }
    }
    // rates are not scaled by time compression (bytes per cycle are kept)
    let span_us = (end - measure_from) as f64 / clk as f64;
    let gbps: Vec<f64> = delivered.iter().map(|&b| b as f64 * 8.0 / span_us / 1000.0).collect();
    let sum: f64 = gbps.iter().sum();
    let sq: f64 = gbps.iter().map(|x| x * x).sum();
    DemoResult { jain: sum * sum / (n as f64 * sq), util: sum / 100.0, gbps, max_queue: max_queue * u64::from(s), cnps: np.counters().cnps }
}

#[test]
fn bottleneck_fairness_demo() {
    // (preset, flows, time compression, simulated µs, RED Kmin / Kmax bytes, Pmax %)
    // NVIDIA defaults with HPCC's DCQCN RED preset scaled to 100 Gb/s (400 KB / 1600 KB / 20 %);
    // the paper preset with the paper's RED values (5 KB / 200 KB / 1 %), which recovers more
    // slowly (T = 55 µs, F = 5, R_AI = 40 Mb/s) and so runs longer.
    type Run<'a> = (&'a str, &'a [u32; CC_PARAMS], usize, u32, u64, u64, u64, u64);
    let runs: [Run; 4] = [
        ("nvidia", &NVIDIA_DEFAULTS, 2, 8, 40_000, 400_000, 1_600_000, 20),
        ("nvidia", &NVIDIA_DEFAULTS, 4, 8, 40_000, 400_000, 1_600_000, 20),
        ("paper", &PAPER, 2, 8, 100_000, 5_000, 200_000, 1),
        ("paper", &PAPER, 4, 8, 100_000, 5_000, 200_000, 1),
    ];
    for (name, cc, n, s, us, kmin, kmax, pmax) in runs {
        let r = demo(n, cc, s, us, kmin, kmax, pmax);
        println!(
            "dcqcn demo: {name:6} {n} flows, time/{s}, {us} µs: last-quarter Gb/s {:?}, Jain {:.3}, utilisation {:.2}, max queue {} KB (unscaled), {} CNPs",
            r.gbps.iter().map(|g| (g * 10.0).round() / 10.0).collect::<Vec<_>>(),
            r.jain,
            r.util,
            r.max_queue / 1000,
            r.cnps
        );
        assert!(r.jain >= 0.9, "{name} {n} flows: Jain {}", r.jain);
        assert!(r.util > 0.8, "{name} {n} flows: utilisation {}", r.util);
    }
}
