//! The per-QP bit table (`rtl/common/hm_qp_bits.sv`) on its own, against a plain `Vec<bool>`:
//! random writes and reads on both ports, a reset in the middle of a run with bits set (the
//! clear sweeps every row, takes exactly one cycle a row, and ignores writes meanwhile), and
//! a table whose last row is only partly used (200 entries in rows of 64).
use hematite_sim::qpb::{qpb_model, HmQpbIn, HmQpbModel, QPB_NUM, QPB_ROWS};
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
