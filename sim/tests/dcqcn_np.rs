//! The DCQCN notification point RTL (rtl/cc/hm_dcqcn_np.sv) against the reference model
//! (hematite_model::dcqcn::Np), cycle for cycle: random schedules of CE-marked packets (in-range
//! and out-of-range QPNs, bursts and idle stretches), random CNP-sender back-pressure and random
//! interval registers (including 0 and values above the 2^(bits-2) cap), on a 12-bit time counter
//! that wraps within the run. The RTL's decision for clock t is compared with the model's
//! step t one clock later (the outputs are registered), counters and time counter at every clock.
use hematite_model::dcqcn::{HwParams, Np, NpCfg, NpIn, NVIDIA_DEFAULTS};
use hematite_sim::np::{NpSim, NP_NOW_INIT, NP_QPS, NP_TIME_BITS};
use proptest::prelude::*;

fn model(interval: u16) -> Np {
    let mut p = HwParams::from_cc(&NVIDIA_DEFAULTS, 250, 100_000, 1);
    p.cnp_interval = u32::from(interval);
    Np::with_now(&p, NpCfg { nqp: NP_QPS, time_bits: NP_TIME_BITS }, NP_NOW_INIT)
}

/// Runs both on `events` ((CE QPN or none, cnp_full) per clock); returns, per QP, the clocks
/// of the CE packets that produced a CNP.
fn run(interval: u16, events: &[(Option<u8>, bool)]) -> Result<Vec<Vec<usize>>, TestCaseError> {
    let mut m = model(interval);
    let mut r = NpSim::new(interval);
    let mut cnps = vec![Vec::new(); 256];
    let mut prev = None;
    for (t, &(ce, full)) in events.iter().chain(std::iter::once(&(None, false))).enumerate() {
        let now_before = m.now();
        let o = r.tick(ce, full);
        if let Some(want) = prev {
            let (mo, c): (hematite_model::dcqcn::NpOut, hematite_model::dcqcn::NpCounters) = want;
            prop_assert_eq!(o.cnp_valid != 0, mo.cnp.is_some(), "clock {}: CNP valid", t - 1);
            if let Some(q) = mo.cnp {
                prop_assert_eq!(u32::from(o.cnp_qpn), q, "clock {}: CNP QPN", t - 1);
                cnps[q as usize].push(t - 1);
            }
            prop_assert_eq!(o.suppressed != 0, mo.suppressed, "clock {}: suppressed", t - 1);
            prop_assert_eq!(o.blocked != 0, mo.blocked, "clock {}: blocked", t - 1);
            prop_assert_eq!(o.stat(), [c.cnps, c.suppressed, c.blocked, c.bad_qpn], "clock {}: counters", t - 1);
        }
        prop_assert_eq!(u32::from(o.now), now_before, "clock {}: time counter", t);
        let mo = m.step(&NpIn { ce: ce.map(u32::from), cnp_full: full });
        prev = Some((mo, m.counters()));
    }
    Ok(cnps)
}

fn schedule() -> impl Strategy<Value = Vec<(Option<u8>, bool)>> {
    // bursts of CE events on a few QPs, idle stretches, occasional out-of-range QPNs
    let ev = prop_oneof![
        6 => (0u8..4).prop_map(Some),
        2 => (0u8..13).prop_map(Some),
        1 => (13u8..=255).prop_map(Some),
        4 => Just(None),
    ];
    let clock = (ev, prop::bool::weighted(0.1));
    let idle = (1usize..3000).prop_map(|n| vec![(None, false); n]);
    prop::collection::vec(prop_oneof![3 => prop::collection::vec(clock, 1..200), 1 => idle], 1..12)
        .prop_map(|v| v.concat())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: hematite_sim::proptest_cases(64), ..ProptestConfig::default() })]
    #[test]
    fn np_matches_model(interval in prop_oneof![Just(0u16), 1u16..64, 64u16..1100, Just(4095u16)], ev in schedule()) {
        run(interval, &ev)?;
    }
}

/// A flood of CE packets for three QPs (every clock, round robin) with a 100-cycle interval:
/// each QP gets its first CNP at once and then exactly one per interval: QP q sees CE packets
/// on clocks q, q+3, ..., so every CNP after the first comes exactly 102 clocks after the
/// previous one (the first CE packet at least 100 clocks later). One QP flooded on every
/// clock gets its CNPs exactly 100 clocks apart.
#[test]
fn np_flood_one_cnp_per_interval() {
    let n = 3000usize;
    let ev: Vec<(Option<u8>, bool)> = (0..n).map(|i| (Some((i % 3) as u8), false)).collect();
    let cnps = run(100, &ev).expect("RTL matches the model");
    for (q, times) in cnps.iter().enumerate().take(3) {
        let want: Vec<usize> = (q..n).step_by(102).collect();
        assert_eq!(times, &want, "QP {q}: CNPs at clocks {times:?}");
    }
    assert!(cnps[3..].iter().all(|t| t.is_empty()));
    let ev: Vec<(Option<u8>, bool)> = (0..n).map(|_| (Some(7), false)).collect();
    let cnps = run(100, &ev).expect("RTL matches the model");
    assert_eq!(cnps[7], (0..n).step_by(100).collect::<Vec<_>>(), "one QP, CE every clock");
    eprintln!("flood of {n} clocks: 3 QPs, {} CNPs each, 102 clocks apart; one QP: {} CNPs, 100 clocks apart", (n - 1) / 102 + 1, cnps[7].len());
}
