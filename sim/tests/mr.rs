//! The memory-region table and checker (rtl/ctx/hm_mr_table.sv) against the transport model's
//! MrTable::check: random registrations, deregistrations (slot reuse with a new tag), and
//! random checks with valid, stale and random keys, wrong PDs, every access kind and bounds
//! around the region edges including 64-bit overflow; verdicts and bases must match exactly.
use hematite_model::transport::mem::{MemError, MrAccess, MrTable, Need};
use hematite_sim::mr::{MrCheck, MrSim, MrWrite};
use hematite_sim::Rng;
use proptest::prelude::*;

fn need_code(n: Need) -> u8 {
    match n {
        Need::LocalRead => 0,
        Need::LocalWrite => 1,
        Need::RemoteRead => 2,
        Need::RemoteWrite => 3,
        Need::RemoteAtomic => 4,
    }
}

fn err_code(e: MemError) -> u8 {
    match e {
        MemError::BadKey => 1,
        MemError::Pd => 2,
        MemError::Access => 3,
        MemError::Bounds => 4,
    }
}

fn clear_all() -> Vec<MrWrite> {
    (0..4096u16).map(|i| MrWrite { index: i, valid: false, tag: 0, pd: 0, base: 0, len: 0, access: 0 }).collect()
}

fn scenario(seed: u64, n_ops: usize, n_checks: usize) -> (Vec<MrWrite>, Vec<MrCheck>, Vec<Result<u64, MemError>>) {
    let mut r = Rng::new(seed);
    let mut t = MrTable::new();
    let mut writes = clear_all();
    let mut live: Vec<u32> = Vec::new();
    let mut stale: Vec<u32> = Vec::new();
    for _ in 0..n_ops {
        if !live.is_empty() && r.next() % 4 == 0 {
            let k = live.swap_remove((r.next() % live.len() as u64) as usize);
            assert!(t.deregister(k));
            writes.push(MrWrite { index: (k >> 8) as u16, valid: false, tag: 0, pd: 0, base: 0, len: 0, access: 0 });
            stale.push(k);
            continue;
        }
        let base = match r.next() % 4 {
            0 => r.next() & 0xFFFF_F000,
            1 => u64::MAX - (r.next() % 0x10000),
            _ => r.next(),
        };
        let len = match r.next() % 4 {
            0 => 0,
            1 => r.next() % 64,
            _ => r.next() % 0x100_0000,
        };
        let bits = (r.next() % 16) as u8;
        let acc = MrAccess { local_write: bits & 1 != 0, remote_read: bits & 2 != 0, remote_write: bits & 4 != 0, remote_atomic: bits & 8 != 0 };
        let pd = 1 + (r.next() % 3) as u32;
        if let Some(mr) = t.register(pd, base, len, acc) {
            writes.push(MrWrite { index: (mr.lkey >> 8) as u16, valid: true, tag: mr.lkey as u8, pd, base, len, access: bits });
            live.push(mr.lkey);
        }
    }
    let mut checks = Vec::new();
    let mut want = Vec::new();
    for _ in 0..n_checks {
        let key = match r.next() % 6 {
            0 if !stale.is_empty() => stale[(r.next() % stale.len() as u64) as usize],
            1 => (r.next() as u32) & 0x00FF_FFFF,
            2 => r.next() as u32,
            _ if !live.is_empty() => live[(r.next() % live.len() as u64) as usize],
            _ => r.next() as u32 & 0xFFFF,
        };
        let mr = t.get(key);
        let pd = if r.next() % 5 == 0 { 1 + (r.next() % 3) as u32 } else { mr.map(|m| m.pd).unwrap_or(1) };
        let (addr, len) = match (mr, r.next() % 6) {
            (Some(m), 0) => (m.base, m.len),                              // exactly the region
            (Some(m), 1) => (m.base.wrapping_add(m.len), 1),              // just past the end
            (Some(m), 2) => (m.base.wrapping_sub(1), 2),                  // starts before
            (Some(m), 3) => (m.base + m.len / 2, (m.len - m.len / 2) + (r.next() % 2)),
            (_, 4) => (u64::MAX - (r.next() % 8), r.next() % 16),         // overflow
            _ => (r.next(), r.next() % 0x10000),
        };
        let need = [Need::LocalRead, Need::LocalWrite, Need::RemoteRead, Need::RemoteWrite, Need::RemoteAtomic][(r.next() % 5) as usize];
        checks.push(MrCheck { key, pd, addr, len, need: need_code(need) });
        want.push(t.check(key, pd, addr, len, need).map(|m| m.base));
    }
    (writes, checks, want)
}

fn compare(got: &[(bool, u8, u64)], want: &[Result<u64, MemError>], checks: &[MrCheck]) -> Result<(), String> {
    for (k, (g, w)) in got.iter().zip(want).enumerate() {
        let ok = match w {
            Ok(base) => g.0 && g.1 == 0 && g.2 == *base,
            Err(e) => !g.0 && g.1 == err_code(*e),
        };
        if !ok {
            return Err(format!("check {k} {:?}: rtl {:?}, model {:?}", checks[k], g, w));
        }
    }
    Ok(())
}

#[test]
fn fixed_scenarios_match_the_model() {
    let mut totals = [0usize; 5];
    for seed in 0..6 {
        let (writes, checks, want) = scenario(seed, 300, 2000);
        let mut sim = MrSim::new();
        let (got, cycles) = sim.run(&writes, &checks, 0, seed);
        compare(&got, &want, &checks).unwrap();
        assert!(cycles <= checks.len() as u64 + 8, "one check per cycle: {cycles} cycles for {}", checks.len());
        for w in &want {
            totals[w.map(|_| 0).unwrap_or_else(err_code) as usize] += 1;
        }
    }
    println!("12000 checks equal to the model: ok {}, bad key {}, PD {}, access {}, bounds {}", totals[0], totals[1], totals[2], totals[3], totals[4]);
    assert!(totals.iter().all(|t| *t > 100), "every outcome exercised: {totals:?}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: hematite_sim::proptest_cases(24), ..ProptestConfig::default() })]
    #[test]
    fn random_tables_and_checks(seed in any::<u64>(), ops in 1usize..400, stall in 0u32..50) {
        let (writes, checks, want) = scenario(seed, ops, 300);
        let mut sim = MrSim::new();
        let (got, _) = sim.run(&writes, &checks, stall, seed);
        compare(&got, &want, &checks).map_err(TestCaseError::fail)?;
    }
}
