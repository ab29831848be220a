//! The per-QP counters (`rtl/eng/hm_qp_counters.sv`) on their own, against a plain count per
//! QP and counter: events from three sources, back to back on one QP (the read-modify-write
//! pipeline's forwarding), clears, reads, QPNs beyond the table, and sources that outrun the
//! pipeline (every event is counted or counted as lost).
use hematite_sim::qpc::{qpc_model, HmQpcIn, HmQpcModel, QPC_CNT, QPC_QPS, QPC_SRC};
use hematite_sim::Rng;
use proptest::prelude::*;

struct Bench {
    sim: HmQpcModel,
    want: Vec<[u32; QPC_CNT]>,
    sent_lost: u32,
}

impl Bench {
    fn new() -> Bench {
        let mut sim = qpc_model();
        let mut n = 0;
        while sim.tick(&HmQpcIn::default()).init_busy != 0 {
            n += 1;
            assert!(n < 100, "init never ends");
        }
        assert!(n >= QPC_QPS - 1, "init clears every row ({n} cycles)");
        Bench { sim, want: vec![[0; QPC_CNT]; QPC_QPS], sent_lost: 0 }
    }

    /// One clock with these events: (source, QPN, mask).
    fn events(&mut self, ev: &[(usize, u16, u8)]) -> u32 {
        let mut i = HmQpcIn::default();
        for &(s, q, m) in ev {
            i.ev_valid |= 1 << s;
            i.ev_qpn |= (q as u64) << (16 * s);
            i.ev_mask |= ((m & 0xF) as u16) << (4 * s);
            if (q as usize) < QPC_QPS {
                for k in 0..QPC_CNT {
                    self.want[q as usize][k] += ((m >> k) & 1) as u32;
                }
            } else {
                self.sent_lost += 1;
            }
        }
        self.sim.tick(&i).lost
    }

    fn idle(&mut self, n: usize) -> u32 {
        let mut lost = 0;
        for _ in 0..n {
            lost = self.events(&[]);
        }
        lost
    }

    fn read(&mut self, q: u16) -> [u32; QPC_CNT] {
        let mut i = HmQpcIn { s_rd_valid: 1, s_rd_qpn: q, ..Default::default() };
        let mut taken = false;
        for _ in 0..20 {
            let o = self.sim.tick(&i);
            if taken && o.m_rd_valid != 0 {
                return o.m_rd_data;
            }
            if o.s_rd_ready != 0 {
                taken = true;
                i = HmQpcIn::default();
            }
        }
        panic!("read of QP {q} never answered");
    }

    fn clear(&mut self, q: u16) {
        let i = HmQpcIn { clr_valid: 1, clr_qpn: q, ..Default::default() };
        for _ in 0..20 {
            if self.sim.tick(&i).clr_ready != 0 {
                if (q as usize) < QPC_QPS {
                    self.want[q as usize] = [0; QPC_CNT];
                }
                return;
            }
        }
        panic!("clear of QP {q} never taken");
    }

    fn check_all(&mut self) {
        self.idle(12);
        for q in 0..QPC_QPS as u16 {
            assert_eq!(self.read(q), self.want[q as usize], "QP {q}");
        }
    }
}

#[test]
fn back_to_back_events_on_one_qp_all_count() {
    let mut b = Bench::new();
    // the three sources, every cycle, all on QP 3 (one event a cycle, then all three at once:
    // the FIFOs absorb a short burst)
    for c in 0..30 {
        b.events(&[(c % QPC_SRC, 3, 0b0001)]);
    }
    for _ in 0..3 {
        b.events(&[(0, 3, 0b0010), (1, 3, 0b0100), (2, 3, 0b1000)]);
    }
    // alternating QPs 3 and 4, so each RAM read races the other QP's write too
    for c in 0..20u16 {
        b.events(&[((c % 3) as usize, 3 + (c % 2), 0b1111)]);
    }
    let lost = b.idle(20);
    assert_eq!(lost, 0);
    assert_eq!(b.read(3), b.want[3]);
    assert_eq!(b.want[3], [40, 13, 13, 13]);
    b.check_all();
}

#[test]
fn clears_reads_and_qpns_beyond_the_table() {
    let mut b = Bench::new();
    for q in 0..QPC_QPS as u16 {
        b.events(&[(0, q, 0b1010)]);
    }
    b.idle(10);
    b.clear(5);
    b.clear(40); // beyond: nothing cleared
    b.events(&[(1, 40, 0b1111), (2, 5, 0b0001)]);
    let lost = b.idle(10);
    assert_eq!(lost, 1, "the event for QP 40 is not counted");
    assert_eq!(b.read(40), [0; QPC_CNT], "a QPN beyond the table reads zeros");
    assert_eq!(b.read(5), [1, 0, 0, 0]);
    b.check_all();
}

#[test]
fn sources_faster_than_the_pipeline_lose_only_what_they_count_as_lost() {
    // all three sources every cycle for 200 cycles: the pipeline takes one a cycle, the rest
    // fill the FIFOs and are refused; counted + lost = sent
    let mut b = Bench::new();
    let mut rng = Rng::new(9);
    let mut sent = 0u64;
    for _ in 0..200 {
        let ev: Vec<(usize, u16, u8)> = (0..QPC_SRC).map(|s| (s, (rng.next() % 4) as u16, 1u8 << (rng.next() % 4))).collect();
        sent += ev.len() as u64;
        b.events(&ev);
    }
    let lost = b.idle(30) as u64;
    let mut counted = 0u64;
    for q in 0..QPC_QPS as u16 {
        counted += b.read(q).iter().map(|&v| v as u64).sum::<u64>();
    }
    assert!(lost > 0, "the sources outran the pipeline");
    assert_eq!(counted + lost, sent, "every event counted or lost (counted {counted}, lost {lost})");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: hematite_sim::proptest_cases(24), failure_persistence: None, ..ProptestConfig::default() })]

    /// Random schedules of at most one event a cycle (the FIFOs never fill), mostly on a few
    /// QPs, with clears and reads between quiet stretches: every read equals the counts.
    #[test]
    fn random_schedules_count_exactly(seed in any::<u64>(), n in 50usize..400) {
        let mut b = Bench::new();
        let mut rng = Rng::new(seed);
        for c in 0..n {
            match rng.next() % 10 {
                0..=6 => {
                    let q = if rng.next() % 8 == 0 { (rng.next() % 20) as u16 } else { (rng.next() % 3) as u16 };
                    let s = (rng.next() % QPC_SRC as u64) as usize;
                    let m = (rng.next() % 16) as u8;
                    b.events(&[(s, q, m)]);
                }
                7 if c % 17 == 0 => {
                    b.idle(8);
                    let q = (rng.next() % 3) as u16;
                    b.clear(q);
                }
                8 if c % 13 == 0 => {
                    b.idle(8);
                    let q = (rng.next() % QPC_QPS as u64) as u16;
                    let got = b.read(q);
                    prop_assert_eq!(got, b.want[q as usize], "QP {} at event {}", q, c);
                }
                _ => { b.idle(1); }
            }
        }
        let lost = b.idle(12);
        prop_assert_eq!(lost, b.sent_lost, "only events beyond the table are lost");
        b.check_all();
    }
}
