//! BAR0 register block (rtl/csr/hm_csr.sv) over AXI4-Lite: identity, capabilities, scratch
//! with byte strobes, doorbells in order and never dropped under back-pressure, counters, and
//! SLVERR (counted, nothing changed) for every bad access.
use hematite_sim::csr::regs::*;
use hematite_sim::csr::{run_csr, Access, CsrSim};
use proptest::prelude::*;

fn rd(addr: u16) -> Access {
    Access::Read { addr: addr as u32 }
}
fn wr(addr: u16, data: u32) -> Access {
    Access::Write { addr: addr as u32, data, strb: 0xF }
}

#[test]
fn identity_scratch_counters_and_doorbells() {
    let mut counters = [0u32; 16];
    for (k, c) in counters.iter_mut().enumerate() {
        *c = 0x1000_0000 + k as u32 * 7;
    }
    let accs = vec![
        rd(HM_REG_ID),
        rd(HM_REG_VERSION),
        rd(HM_REG_CAPS),
        wr(HM_REG_SCRATCH, 0xDEAD_BEEF),
        rd(HM_REG_SCRATCH),
        Access::Write { addr: HM_REG_SCRATCH as u32, data: 0x1122_3344, strb: 0b0101 },
        rd(HM_REG_SCRATCH),
        wr(HM_REG_DB_SQ, 0x0005_0011),
        wr(HM_REG_DB_RQ, 0x0009_0011),
        wr(HM_REG_DB_CQ, 0x0003_4002),
        rd(HM_REG_DB_COUNT),
        rd(HM_REG_CNT),
        rd(HM_REG_CNT + 4 * 15),
        rd(HM_REG_ERR_COUNT),
    ];
    let mut sim = CsrSim::new();
    let run = run_csr(&mut sim, &accs, counters, 20, 100, 1).unwrap();
    let r = &run.responses;
    assert!(r.iter().all(|(_, ok)| *ok), "{r:?}");
    assert_eq!(r[0].0, HM_REG_ID_RESET);
    assert_eq!(r[1].0, HM_REG_VERSION_RESET);
    // caps: log2 QPs 12, log2 CQs 12, 512-bit datapath (8 x 64 bits), 16 counters
    assert_eq!(r[2].0, 12 << 24 | 12 << 16 | 8 << 8 | 16);
    assert_eq!(r[4].0, 0xDEAD_BEEF);
    assert_eq!(r[6].0, 0xDE22_BE44, "strobes write bytes 0 and 2 only");
    assert_eq!(r[10].0, 3);
    assert_eq!(r[11].0, counters[0]);
    assert_eq!(r[12].0, counters[15]);
    assert_eq!(r[13].0, 0);
    assert_eq!(run.doorbells, vec![(0, 0x0005_0011), (1, 0x0009_0011), (2, 0x0003_4002)]);
    // the generated doorbell layout matches what the hardware forwards
    assert_eq!(HM_DB_QP_T_FIELDS, &[("pi", 16, 16), ("qpn", 0, 16)]);
    assert_eq!(HM_DB_CQ_T_FIELDS, &[("ci", 16, 16), ("arm", 14, 2), ("cqn", 0, 14)]);
}

#[test]
fn bad_accesses_answer_slverr_and_change_nothing() {
    let accs = vec![
        wr(HM_REG_SCRATCH, 0x5A5A_5A5A),
        rd(0x0040),                                                     // unmapped
        wr(0x0040, 1),                                                  // unmapped
        wr(HM_REG_ID, 0),                                               // read-only
        wr(HM_REG_CNT, 0),                                         // read-only counter
        rd(HM_REG_DB_SQ),                                               // write-only
        Access::Write { addr: HM_REG_DB_SQ as u32, data: 1, strb: 0x3 }, // partial doorbell
        rd(HM_REG_SCRATCH + 1),                                         // misaligned
        rd(HM_REG_CNT + 4 * 16),                                   // past the counters
        wr(HM_REG_SCRATCH + 2, 7),                                      // misaligned write
        rd(HM_REG_SCRATCH),
        rd(HM_REG_DB_COUNT),
        rd(HM_REG_ERR_COUNT),
    ];
    let mut sim = CsrSim::new();
    let run = run_csr(&mut sim, &accs, [0; 16], 10, 100, 2).unwrap();
    let ok: Vec<bool> = run.responses.iter().map(|(_, k)| *k).collect();
    assert_eq!(ok, vec![true, false, false, false, false, false, false, false, false, false, true, true, true]);
    assert_eq!(run.responses[10].0, 0x5A5A_5A5A, "no bad write changed the scratch register");
    assert_eq!(run.responses[11].0, 0, "no doorbell was accepted");
    assert_eq!(run.responses[12].0, 9, "every SLVERR counted");
    assert!(run.doorbells.is_empty());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: hematite_sim::proptest_cases(32), ..ProptestConfig::default() })]
    /// Many doorbells with the engine side mostly stalled: every doorbell arrives, in order,
    /// exactly once (the writes are held, never dropped), interleaved with scratch accesses.
    #[test]
    fn doorbells_are_never_lost(dbs in proptest::collection::vec((0u8..3, any::<u32>()), 1..80),
                                stall in 0u32..50, ready in 1u32..60, seed in any::<u64>()) {
        let mut accs = Vec::new();
        let mut want = Vec::new();
        for (k, (kind, word)) in dbs.iter().enumerate() {
            let off = [HM_REG_DB_SQ, HM_REG_DB_RQ, HM_REG_DB_CQ][*kind as usize];
            accs.push(wr(off, *word));
            want.push((*kind, *word));
            if k % 7 == 3 {
                accs.push(wr(HM_REG_SCRATCH, *word));
                accs.push(rd(HM_REG_SCRATCH));
            }
        }
        accs.push(rd(HM_REG_DB_COUNT));
        let mut sim = CsrSim::new();
        let run = run_csr(&mut sim, &accs, [0; 16], stall, ready, seed).map_err(TestCaseError::fail)?;
        prop_assert!(run.responses.iter().all(|(_, ok)| *ok));
        prop_assert_eq!(&run.doorbells, &want);
        prop_assert_eq!(run.responses.last().unwrap().0 as usize, dbs.len());
    }
}
