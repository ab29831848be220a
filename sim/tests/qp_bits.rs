//! The per-QP bit table (`rtl/common/hm_qp_bits.sv`) on its own, against a plain `Vec<bool>`:
//! random writes and reads on both ports, a reset in the middle of a run with bits set (the
//! clear sweeps every row, takes exactly one cycle a row, and ignores writes meanwhile), and
//! a table whose last row is only partly used (200 entries in rows of 64). The TRANSPARENT
//! build against the same vector from the first clock after reset: reads and writes during the
//! clear behave as on flip-flops reset to zero.
use hematite_sim::qpb::{qpb_model, qpbt_model, HmQpbIn, HmQpbModel, HmQpbtIn, QPB_NUM, QPB_ROWS};
use proptest::prelude::*;

struct Bench {
    sim: HmQpbModel,
    want: Vec<bool>,
}

impl Bench {
    fn new() -> Bench {
        let mut b = Bench { sim: qpb_model(), want: vec![false; QPB_NUM] };
        b.wait_clear();
        b
    }

    /// Clocks until the clear ends, offering a write every cycle (a busy table must ignore it),
    /// and checks that it took one cycle per row.
    fn wait_clear(&mut self) {
        let mut n = 0;
        loop {
            let i = HmQpbIn { we: 1, waddr: (n * 67 % QPB_NUM) as u8, wbit: 1, ..Default::default() };
            if self.sim.tick(&i).busy == 0 {
                // (this cycle's write was taken: the table is ready)
                self.want[n * 67 % QPB_NUM] = true;
                break;
            }
            n += 1;
            assert!(n <= QPB_ROWS + 2, "the clear never ends");
        }
        assert_eq!(n, QPB_ROWS, "the clear sweeps one row a cycle");
        for (k, w) in self.want.iter_mut().enumerate() {
            if k != n * 67 % QPB_NUM {
                *w = false;
            }
        }
    }

    /// One clock: an optional write, reads at `a` and `b` (old contents: the write lands at
    /// the edge).
    fn step(&mut self, w: Option<(usize, bool)>, a: usize, b: usize) {
        let mut i = HmQpbIn { raddr: (a as u16) | ((b as u16) << 8), ..Default::default() };
        if let Some((addr, bit)) = w {
            i.we = 1;
            i.waddr = addr as u8;
            i.wbit = bit as u8;
        }
        let o = self.sim.tick(&i);
        assert_eq!(o.busy, 0);
        assert_eq!(o.rbit & 1 != 0, self.want[a], "port 0 reads entry {a}");
        assert_eq!(o.rbit & 2 != 0, self.want[b], "port 1 reads entry {b}");
        if let Some((addr, bit)) = w {
            self.want[addr] = bit;
        }
    }

    fn check_all(&mut self) {
        for k in 0..QPB_NUM {
            self.step(None, k, QPB_NUM - 1 - k);
        }
    }

    fn reset(&mut self) {
        self.sim.hold(&HmQpbIn { rst: 1, ..Default::default() }, 2);
        self.wait_clear();
    }
}

#[test]
fn starts_clear_and_reads_every_entry() {
    let mut b = Bench::new();
    b.check_all();
}

#[test]
fn reset_clears_a_full_table() {
    let mut b = Bench::new();
    for k in 0..QPB_NUM {
        b.step(Some((k, true)), k, 0);
    }
    b.check_all();
    assert!(b.want.iter().all(|&x| x));
    b.reset();
    b.check_all();
    assert_eq!(b.want.iter().filter(|&&x| x).count(), 1, "only the write taken after the clear");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn matches_a_vector(ops in prop::collection::vec((0..QPB_NUM, any::<bool>(), any::<bool>(), 0..QPB_NUM, 0..QPB_NUM, 0u8..40), 1..400)) {
        let mut b = Bench::new();
        for (addr, bit, write, ra, rb, r) in ops {
            if r == 0 {
                b.reset();
            } else {
                b.step(write.then_some((addr, bit)), ra, rb);
            }
        }
        b.check_all();
    }
}

/// TRANSPARENT: from the first clock after reset, random writes and two reads per clock
/// against a vector of zeros; one-clock resets at random points, each with a write offered
/// during it (the clear restarts, with rows full of ones from before); the sweep may take
/// longer than a row a clock (it waits for writes) but ends within a row a clock once the port
/// is free.
fn transparent_run(ops: &[(usize, bool, bool, usize, usize, u8)]) -> Result<(), TestCaseError> {
    let mut sim = qpbt_model();
    let mut want = vec![false; QPB_NUM];
    // (fill the memory with ones first, so that a row the clear misses shows)
    for k in 0..QPB_NUM {
        sim.tick(&HmQpbtIn { we: 1, waddr: k as u8, wbit: 1, ..Default::default() });
    }
    sim.hold(&HmQpbtIn { rst: 1, ..Default::default() }, 2);
    for &(addr, bit, write, ra, rb, r) in ops {
        if r == 0 {
            // a reset of one clock, with a write offered in it (flip-flops in reset take none)
            sim.tick(&HmQpbtIn { rst: 1, we: 1, waddr: addr as u8, wbit: 1, ..Default::default() });
            want = vec![false; QPB_NUM];
            continue;
        }
        let mut i = HmQpbtIn { raddr: (ra as u16) | ((rb as u16) << 8), ..Default::default() };
        if write {
            i.we = 1;
            i.waddr = addr as u8;
            i.wbit = bit as u8;
        }
        let o = sim.tick(&i);
        prop_assert_eq!(o.rbit & 1 != 0, want[ra], "port 0 reads entry {} (busy {})", ra, o.busy);
        prop_assert_eq!(o.rbit & 2 != 0, want[rb], "port 1 reads entry {} (busy {})", rb, o.busy);
        if write {
            want[addr] = bit;
        }
    }
    // the clear ends once writes leave the port free, and every entry reads as the vector
    let mut n = 0;
    while sim.tick(&HmQpbtIn::default()).busy != 0 {
        n += 1;
        prop_assert!(n <= QPB_ROWS, "the clear ends within a row a clock once the port is free");
    }
    for k in 0..QPB_NUM {
        let o = sim.tick(&HmQpbtIn { raddr: k as u16 | ((QPB_NUM - 1 - k) as u16) << 8, ..Default::default() });
        prop_assert_eq!(o.rbit & 1 != 0, want[k], "entry {} after the clear", k);
        prop_assert_eq!(o.rbit & 2 != 0, want[QPB_NUM - 1 - k], "entry {} after the clear", QPB_NUM - 1 - k);
    }
    Ok(())
}

#[test]
fn transparent_reads_zero_at_once_after_reset() {
    // no write at all: the first clock after reset already reads zeros everywhere
    transparent_run(&[(0, false, false, 0, QPB_NUM - 1, 1), (0, false, false, 64, 199, 1), (0, false, false, 130, 63, 1)]).unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn transparent_matches_flip_flops(ops in prop::collection::vec((0..QPB_NUM, any::<bool>(), prop::bool::weighted(0.6), 0..QPB_NUM, 0..QPB_NUM, 0u8..60), 1..300)) {
        transparent_run(&ops)?;
    }
}
