//! The MMIO path (hm_wqe_push in the requester): a WQE pushed whole before its doorbell is
//! sent without being read from the send queue ring; pushes that cannot be used (evicted,
//! passed by a WQE read, left from before a QP reload) cost a fetch and nothing else.
use hematite_abi::pkt as k;
use hematite_model::transport::mem::MrAccess;
use hematite_model::transport::{QpConfig, SendOp, SendWr, Sge, WcStatus};
use hematite_sim::dma::MemCfg;
use hematite_sim::duo::{DuoBench, WireFaults};
use hematite_sim::host::SQ_BASE;

const BUF: u64 = 0x10_0000;
const LEN: u64 = 0x20_0000;

fn cfg() -> QpConfig {
    QpConfig { pmtu: 1024, timeout: 3, ..QpConfig::default() }
}

/// Host 0's QPs 1..=n (QP 1 as QPN Q1) connected to host 1's 101..; both memories filled with a
/// pattern.
fn pairs(n: u32) -> (DuoBench, u32, u32) {
    let mut d = DuoBench::new(MemCfg { latency: 100, seed: 5, ..Default::default() }, WireFaults::default()).unwrap();
    let data: Vec<u8> = (0..LEN).map(|i| (i * 29 + 1) as u8).collect();
    d.h[0].fill(BUF, &data);
    let k0 = d.h[0].reg_mr(1, BUF, LEN, MrAccess::ALL).unwrap().lkey;
    let k1 = d.h[1].reg_mr(1, BUF, LEN, MrAccess::ALL).unwrap().rkey;
    for q in 1..=n {
        d.connect(qp(q), 100 + q, cfg(), 0).unwrap();
    }
    d.h[0].eng.mem.read_log = Some(Vec::new());
    (d, k0, k1)
}

/// QPN of the first QP of each test: table entry 1, whose QPN is 4097 (QPNs 0 and 1 are
/// reserved; entries 0 and 1 answer to the QPNs above the 4096-entry table), so the pushes
/// also cross the push port's QPN mapping. The others keep their numbers.
const Q1: u32 = 4097;

fn qp(q: u32) -> u32 {
    if q == 1 {
        Q1
    } else {
        q
    }
}

fn ring_reads(d: &DuoBench, q: u32) -> usize {
    let ring = SQ_BASE + hematite_sim::host::EngHost::entry(q) as u64 * 0x1_0000;
    d.h[0].eng.mem.read_log.as_ref().unwrap().iter().filter(|(_, a, _)| *a >= ring && *a < ring + 0x1_0000).count()
}

/// An 8-byte inline WRITE (k = 0) or a 64-byte WRITE from memory, to a target of its own.
fn write(id: u64, k0: u32, k1: u32, inline: bool) -> SendWr {
    let len = if inline { 8 } else { 64 };
    let mut w = SendWr::new(id, SendOp::Write { remote_addr: dst(id), rkey: k1 }, vec![Sge { addr: BUF + (id % 64) * 0x100, len, lkey: k0 }]);
    w.inline = inline;
    w
}

fn dst(id: u64) -> u64 {
    BUF + 0x10_0000 + id * 0x100
}

fn run_to(d: &mut DuoBench, n: usize) {
    d.run(2_000_000, |d| d.h[0].cqes.len() >= n).unwrap_or_else(|e| panic!("waiting for {n} CQEs: {e}"));
}

/// Every CQE succeeded, in posting order per QP, and every WRITE's bytes are at its target.
fn check(d: &DuoBench, ids: &[(u32, u64, bool)]) {
    for &(q, id, inline) in ids {
        let c = d.h[0].cqes.iter().find(|c| c.cqe.wr_id == id).unwrap_or_else(|| panic!("no CQE for {id}"));
        assert_eq!((c.cqe.qpn, c.cqe.status), (q, WcStatus::Success), "WR {id}");
        let n = if inline { 8 } else { 64 };
        assert_eq!(d.h[1].eng.mem.mem.read(dst(id), n), d.h[0].eng.mem.mem.read(BUF + (id % 64) * 0x100, n), "WR {id}'s bytes");
    }
}

fn counter(d: &mut DuoBench, i: u32) -> u32 {
    d.h[0].eng.counter(i as u16).unwrap()
}

#[test]
fn a_pushed_wqe_is_sent_without_a_wqe_read() {
    let (mut d, k0, k1) = pairs(1);
    d.h[0].post_send_push(Q1, &write(7, k0, k1, true)).unwrap();
    run_to(&mut d, 1);
    check(&d, &[(Q1, 7, true)]);
    // neither the requester nor the completer read the ring
    assert_eq!(ring_reads(&d, Q1), 0, "reads: {:?}", d.h[0].eng.mem.read_log);
    assert_eq!((counter(&mut d, k::HM_CNT_PUSH_USED), counter(&mut d, k::HM_CNT_PUSH_DROPPED)), (1, 0));
    // and the next one, from memory
    d.h[0].post_send_push(Q1, &write(8, k0, k1, false)).unwrap();
    run_to(&mut d, 2);
    check(&d, &[(Q1, 8, false)]);
    assert_eq!(ring_reads(&d, Q1), 0);
    assert_eq!(counter(&mut d, k::HM_CNT_PUSH_USED), 2);
}

#[test]
fn more_pushes_than_slots_and_pushes_behind_reads_fall_back_to_the_ring() {
    let (mut d, k0, k1) = pairs(6);
    // six QPs push and ring one after the other, faster than the requester serves them: the
    // four slots hold the latest pushes, the others are fetched
    let mut ids = Vec::new();
    for q in 1..=6u32 {
        let id = 100 + q as u64;
        d.h[0].post_send_push(qp(q), &write(id, k0, k1, q % 2 == 0)).unwrap();
        ids.push((qp(q), id, q % 2 == 0));
    }
    // QP 1 again, 40 WQEs each pushed and rung back to back while earlier ones are in flight
    for j in 0..40u64 {
        let id = 200 + j;
        d.h[0].post_send_push(Q1, &write(id, k0, k1, j % 3 == 0)).unwrap();
        ids.push((Q1, id, j % 3 == 0));
    }
    run_to(&mut d, ids.len());
    check(&d, &ids);
    let mut last = std::collections::HashMap::new();
    for c in &d.h[0].cqes {
        let prev = last.insert(c.cqe.qpn, c.cqe.wr_id);
        assert!(prev.is_none_or(|p| p < c.cqe.wr_id), "QP {}: CQEs out of order", c.cqe.qpn);
    }
    let (used, dropped) = (counter(&mut d, k::HM_CNT_PUSH_USED), counter(&mut d, k::HM_CNT_PUSH_DROPPED));
    assert_eq!(used + dropped, 46, "every push used or dropped (used {used}, dropped {dropped})");
    assert!(used > 0 && dropped > 0, "used {used}, dropped {dropped}");
}

#[test]
fn a_push_from_before_a_qp_reload_is_not_used() {
    let (mut d, k0, k1) = pairs(1);
    // a push whose doorbell never came (a WQE with an unknown opcode, which would fail the QP)
    let mut bad = [0u8; 64];
    bad[0] = 0xEE;
    d.h[0].eng.push_wqe(Q1 as u16, bad);
    d.run(100, |_| false).ok();
    // the QP is reloaded (both ends), then a WRITE is posted the ordinary way
    let c = cfg();
    d.h[0].reload_qp(Q1, QpConfig { dest_qpn: 101, ..c }, 0).unwrap();
    d.h[1].reload_qp(101, QpConfig { dest_qpn: Q1, av: c.av.reversed(), sq_psn: c.rq_psn, rq_psn: c.sq_psn, ..c }, 0).unwrap();
    d.h[0].post_send(Q1, &write(9, k0, k1, true), true).unwrap();
    run_to(&mut d, 1);
    check(&d, &[(Q1, 9, true)]);
    assert_eq!(ring_reads(&d, Q1), 1, "the WQE was read from the ring");
    assert_eq!((counter(&mut d, k::HM_CNT_PUSH_USED), counter(&mut d, k::HM_CNT_PUSH_DROPPED)), (0, 1));
}

#[test]
fn a_pushed_wqe_in_a_ring_of_a_larger_stride_and_one_that_does_not_fit() {
    // 256-byte slots (a QP made for larger inline data, as perftest's latency tests make it):
    // the push carries the slot's first 64 bytes, which hold all this WQE uses
    let mut d = DuoBench::new(MemCfg { latency: 100, seed: 6, ..Default::default() }, WireFaults::default()).unwrap();
    let data: Vec<u8> = (0..LEN).map(|i| (i * 29 + 1) as u8).collect();
    d.h[0].fill(BUF, &data);
    let k0 = d.h[0].reg_mr(1, BUF, LEN, MrAccess::ALL).unwrap().lkey;
    let k1 = d.h[1].reg_mr(1, BUF, LEN, MrAccess::ALL).unwrap().rkey;
    d.connect(Q1, 101, cfg(), 2).unwrap();
    d.h[0].eng.mem.read_log = Some(Vec::new());
    d.h[0].post_send_push(Q1, &write(3, k0, k1, true)).unwrap();
    run_to(&mut d, 1);
    check(&d, &[(Q1, 3, true)]);
    assert_eq!(ring_reads(&d, Q1), 0, "reads: {:?}", d.h[0].eng.mem.read_log);
    // three SGEs end beyond the push: the host does not push such a WQE, and the engine
    // drops a push that claims them (the WQE is read from the ring)
    let sgl: Vec<Sge> = (0..3u64).map(|j| Sge { addr: BUF + 0x3000 + j * 8, len: 8, lkey: k0 }).collect();
    let wr = SendWr::new(4, SendOp::Write { remote_addr: dst(4), rkey: k1 }, sgl);
    d.h[0].post_send(Q1, &wr, false).unwrap();
    let slot = 1u64 * 256;
    let b = d.h[0].eng.mem.mem.read(SQ_BASE + 0x1_0000 + slot, 64);
    assert!(!hematite_model::desc::wqe_fits_push(&b));
    d.h[0].eng.push_wqe(Q1 as u16, b.try_into().unwrap());
    d.h[0].doorbell(Q1).unwrap();
    run_to(&mut d, 2);
    assert_eq!(d.h[0].cqes[1].cqe.status, WcStatus::Success);
    assert_eq!(d.h[1].eng.mem.mem.read(dst(4), 24), d.h[0].eng.mem.mem.read(BUF + 0x3000, 24));
    assert_eq!(ring_reads(&d, Q1), 1);
    assert_eq!((counter(&mut d, k::HM_CNT_PUSH_USED), counter(&mut d, k::HM_CNT_PUSH_DROPPED)), (1, 1));
}

/// Doorbells reach the requester through the BAR's doorbell FIFO, pushes directly: a push can
/// arrive before the doorbells that precede it, or (a host that got it wrong) after its own.
/// The index byte a push carries binds it to its own WQE or drops it; a WQE is never sent
/// with another's bytes.
#[test]
fn a_push_that_overtakes_or_trails_the_doorbells_binds_to_its_own_wqe_or_is_dropped() {
    use hematite_model::desc::push_tagged;
    let (mut d, k0, k1) = pairs(1);
    let slot = |d: &DuoBench, i: u64| -> Vec<u8> { d.h[0].eng.mem.mem.read(SQ_BASE + 0x1_0000 + i * 64, 64) };
    // 1. both WQEs in the ring, both pushes ahead of both doorbells: the first doorbell binds
    // the first push (the second's index is ahead: it waits) and the second doorbell the
    // second
    d.h[0].post_send(Q1, &write(20, k0, k1, true), false).unwrap();
    d.h[0].post_send(Q1, &write(21, k0, k1, false), false).unwrap();
    let (w0, w1) = (slot(&d, 0), slot(&d, 1));
    d.h[0].eng.push_wqe(Q1 as u16, push_tagged(&w0, 0));
    d.h[0].eng.push_wqe(Q1 as u16, push_tagged(&w1, 1));
    d.run(4, |_| false).ok();
    d.h[0].doorbell_at(Q1, 1).unwrap();
    d.run(400, |_| false).ok();
    d.h[0].doorbell_at(Q1, 2).unwrap();
    run_to(&mut d, 2);
    check(&d, &[(Q1, 20, true), (Q1, 21, false)]);
    assert_eq!((counter(&mut d, k::HM_CNT_PUSH_USED), counter(&mut d, k::HM_CNT_PUSH_DROPPED)), (2, 0));
    // 2. a push that trails its own doorbell: the next doorbell finds its index behind and
    // drops it; the WQE that doorbell posts is read from the ring
    d.h[0].post_send(Q1, &write(22, k0, k1, true), true).unwrap();
    d.run(60, |_| false).ok();
    let w2 = slot(&d, 2);
    d.h[0].eng.push_wqe(Q1 as u16, push_tagged(&w2, 2));
    d.run(4, |_| false).ok();
    d.h[0].post_send(Q1, &write(23, k0, k1, false), true).unwrap();
    run_to(&mut d, 4);
    check(&d, &[(Q1, 22, true), (Q1, 23, false)]);
    assert_eq!((counter(&mut d, k::HM_CNT_PUSH_USED), counter(&mut d, k::HM_CNT_PUSH_DROPPED)), (2, 1));
}
