//! The DCQCN rate-limiter slot map RTL (rtl/cc/hm_dcqcn_slots.sv, 4 slots, 5-bit keys) against
//! the reference model (hematite_model::dcqcn_slots::Slots), cycle for cycle, on random
//! schedules of CNPs (repeated, new and out-of-range QPNs), bytes reports, queries and QP
//! resets. The reaction point behind both is the reference RP (hematite_model::dcqcn::Rp) on
//! the slots the model forwards; its reports reach both maps one clock later, as in the
//! engine, and the harness makes the RP's CNP FIFO refuse some CNPs (the drop report). Each
//! clock: the combinational lookups (CNP slot, bytes slot, query hit/slot) of that clock and
//! the registered outputs (counters, unmapped, slots in use) of the previous one. Runs where
//! QPs recover within a few thousand clocks of their last CNP churn through the slots; runs
//! with NVIDIA's defaults hold them and exhaust the pool. At the end of a churning run every
//! slot is free again (no leak).
use hematite_model::dcqcn::{HwParams, Rp, RpCfg, RpIn, NVIDIA_DEFAULTS};
use hematite_model::dcqcn_slots::{Slots, SlotsCfg, SlotsFeedback, SlotsIn};
use hematite_sim::cc::rp_op_code;
use hematite_sim::slots::{HmSlotsIn, SlotsSim, SLOTS_KEY_BITS, SLOTS_N};
use proptest::prelude::*;

#[derive(Clone, Copy, Debug, Default)]
struct Clk {
    cnp: Option<u8>,
    tx: Option<(u8, u16)>,
    query: u8,
    detach: Option<u8>,
    /// the RP's CNP FIFO refuses this clock's CNP
    refuse: bool,
}

/// Runs both maps on `clocks`; returns the model's final counters (allocations, no slot, bad
/// QPN) and the slots in use at the end.
fn run(quick: bool, clocks: &[Clk]) -> Result<(u32, u32, u32, u32), TestCaseError> {
    let mut p = HwParams::from_cc(&NVIDIA_DEFAULTS, 250, 100_000, 1);
    if quick {
        // QPs recover within a few thousand clocks of their last CNP: start at the maximum,
        // alpha forgotten at once, timers of 32 clocks (a release needs a scan visit with no
        // timer due), additive increase straight back to the maximum
        p.first_rate = p.max_rate;
        p.initial_alpha = 0;
        p.g = 0;
        (p.inc_period, p.alpha_period, p.dec_period) = (32, 32, 32);
        (p.ai_rate, p.hai_rate) = (p.max_rate, p.max_rate);
    }
    let mut rp = Rp::new(p, RpCfg { nqp: SLOTS_N, ..RpCfg::default() });
    let mut m = Slots::new(SlotsCfg { nslots: SLOTS_N, key_bits: SLOTS_KEY_BITS });
    let mut r = SlotsSim::new();
    let mut fb = SlotsFeedback::default();
    let mut prev = None;
    for (t, c) in clocks.iter().enumerate() {
        let inp = SlotsIn {
            cnp: c.cnp.map(u32::from),
            tx: c.tx.map(|(q, b)| (u32::from(q), u32::from(b))),
            query: u32::from(c.query),
            detach: c.detach.map(u32::from),
        };
        let (op, op_slot) = rp_op_code(&fb.op);
        let o = r.tick(&HmSlotsIn {
            s_tx_bytes: c.tx.map_or(0, |x| x.1),
            rst: 0,
            s_cnp_valid: c.cnp.is_some() as u8,
            s_cnp_qpn: c.cnp.unwrap_or(0),
            s_tx_valid: c.tx.is_some() as u8,
            s_tx_qpn: c.tx.map_or(0, |x| x.0),
            query_qpn: c.query,
            detach_valid: c.detach.is_some() as u8,
            detach_qpn: c.detach.unwrap_or(0),
            op,
            op_slot: op_slot as u8,
            cnp_dropped: fb.cnp_dropped as u8,
        });
        let mo = m.step(&inp, &fb);
        prop_assert_eq!(o.m_cnp_valid != 0, mo.cnp.is_some(), "clock {}: CNP forwarded", t);
        if let Some(s) = mo.cnp {
            prop_assert_eq!(u32::from(o.m_cnp_slot), s, "clock {}: CNP slot", t);
        }
        prop_assert_eq!(o.m_tx_valid != 0, mo.tx.is_some(), "clock {}: bytes forwarded", t);
        if let Some((s, b)) = mo.tx {
            prop_assert_eq!((u32::from(o.m_tx_slot), u32::from(o.m_tx_bytes)), (s, b), "clock {}: bytes slot", t);
        }
        prop_assert_eq!(o.query_hit != 0, mo.query.is_some(), "clock {}: query hit", t);
        if let Some(s) = mo.query {
            prop_assert_eq!(u32::from(o.query_slot), s, "clock {}: query slot", t);
        }
        if let Some((cn, un, used)) = prev {
            let cn: hematite_model::dcqcn_slots::SlotsCounters = cn;
            prop_assert_eq!(o.stat(), [cn.no_slot, cn.bad_qpn, cn.allocs], "clock {}: counters", t - 1);
            prop_assert_eq!(o.unmapped != 0, un, "clock {}: unmapped", t - 1);
            prop_assert_eq!(u32::from(o.used), used, "clock {}: slots in use", t - 1);
        }
        prev = Some((m.counters(), mo.unmapped, m.used_before()));
        prop_assert!(!m.pend_wrapped(), "clock {}: a pend counter wrapped", t);
        // the reaction point on the forwarded CNP (unless refused) and bytes
        let refuse = c.refuse && mo.cnp.is_some();
        let ro = rp.step(&RpIn { cnp: if refuse { None } else { mo.cnp }, tx: mo.tx });
        fb = SlotsFeedback { op: ro.op, cnp_dropped: refuse || ro.cnp_dropped };
    }
    let c = m.counters();
    Ok((c.allocs, c.no_slot, c.bad_qpn, m.used()))
}

fn schedule() -> impl Strategy<Value = Vec<Clk>> {
    let qpn = prop_oneof![6 => 0u8..6, 3 => 0u8..32, 1 => 32u8..=255];
    let clk = (
        prop::option::weighted(0.3, qpn),
        prop::option::weighted(0.3, (0u8..8, 1u16..4200)),
        0u8..10,
        prop::option::weighted(0.03, 0u8..8),
        prop::bool::weighted(0.1),
    )
        .prop_map(|(cnp, tx, query, detach, refuse)| Clk { cnp, tx, query, detach, refuse });
    let burst = prop::collection::vec(clk, 1..300);
    let idle = (1usize..400).prop_map(|n| vec![Clk::default(); n]);
    prop::collection::vec(prop_oneof![3 => burst, 1 => idle], 1..10).prop_map(|v| v.concat())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: hematite_sim::proptest_cases(96), ..ProptestConfig::default() })]
    #[test]
    fn slots_match_model(quick in prop::bool::weighted(0.7), mut clocks in schedule()) {
        if quick {
            // let every QP recover: the scan visits each active slot within a few clocks
            clocks.extend(std::iter::repeat(Clk::default()).take(5000));
        }
        let (_, _, _, used) = run(quick, &clocks)?;
        if quick {
            prop_assert_eq!(used, 0, "slots still in use after the QPs recovered");
        }
    }
}

/// Four QPs held at NVIDIA's defaults take every slot; CNPs for a fifth QP are refused, CNPs
/// for the held QPs still reach their slots; a reset QP's slot is detached (its CNPs then find
/// no slot either); out-of-range QPNs are refused as such.
/// A long churning run (20,000 clocks, quick recovery) from a fixed seed, to show what the
/// random schedules exercise: many allocations, pool exhaustion, refused CNPs, out-of-range
/// QPNs, and every slot free at the end.
#[test]
fn long_churn() {
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    let mut rnd = move |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    };
    let mut clocks = Vec::new();
    for t in 0..20_000u64 {
        let busy = (t / 2000) % 2 == 0; // bursts of CNPs, then quiet stretches
        let cnp = (busy && rnd(3) == 0).then(|| if rnd(10) == 0 { 32 + rnd(200) as u8 } else { rnd(12) as u8 });
        let tx = (rnd(3) == 0).then(|| (rnd(12) as u8, 64 + rnd(4000) as u16));
        let detach = (rnd(50) == 0).then(|| rnd(12) as u8);
        clocks.push(Clk { cnp, tx, query: rnd(14) as u8, detach, refuse: rnd(8) == 0 });
    }
    clocks.extend(std::iter::repeat(Clk::default()).take(5000));
    let (allocs, no_slot, bad, used) = run(true, &clocks).expect("RTL matches the model");
    eprintln!("20,000 clocks: {allocs} allocations, {no_slot} CNPs without a free slot, {bad} out of range, {used} slots in use at the end");
    assert!(allocs > 50 && no_slot > 50 && bad > 50, "the run did not churn");
    assert_eq!(used, 0);
}

#[test]
fn pool_exhaustion_and_detach() {
    let mut clocks = Vec::new();
    let cnp = |q: u8| Clk { cnp: Some(q), ..Default::default() };
    for q in [3u8, 9, 17, 30] {
        clocks.push(cnp(q));
        clocks.extend([Clk::default(); 3]);
    }
    clocks.push(cnp(5)); // no slot
    clocks.push(cnp(17)); // its slot
    clocks.push(cnp(40)); // out of range
    clocks.push(Clk { detach: Some(9), ..Default::default() });
    clocks.push(cnp(9)); // detached: no slot
    clocks.extend([Clk::default(); 4]);
    let (allocs, no_slot, bad, used) = run(false, &clocks).expect("RTL matches the model");
    assert_eq!((allocs, no_slot, bad, used), (4, 2, 1, 4));
}
