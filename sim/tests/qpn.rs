//! QPNs and table entries (hm_pkg::hm_qpn_swap, hematite_abi::qp::qpn_swap): QPNs 0 and 1 are
//! reserved, so the 4096-entry QP table's entries 0 and 1 answer to QPNs 4096 and 4097 and every
//! entry is a usable QP. These tests run traffic between entries 0 and 1 of two engines by
//! those QPNs (doorbells, the wire's DestQP in both directions, CQEs), and check that QPNs 0
//! and 1 reach no QP: a packet for QPN 1 is dropped and counted, with entry 1 live in RTS, and
//! a doorbell for QPN 0 or 1 is ignored and counted.
use hematite_abi::pkt as k;
use hematite_model::transport::mem::MrAccess;
use hematite_model::transport::{QpConfig, RecvWr, SendOp, SendWr, Sge, WcStatus};
use hematite_sim::dma::MemCfg;
use hematite_sim::duo::{DuoBench, WireFaults};

const BUF: u64 = 0x10_0000;
const LEN: u64 = 0x20_0000;
const DST: u64 = BUF + 0x10_0000;

fn bench() -> (DuoBench, u32, u32, u32, u32) {
    let mut d = DuoBench::new(MemCfg { latency: 100, seed: 7, ..Default::default() }, WireFaults::default()).unwrap();
    let data: Vec<u8> = (0..LEN).map(|i| (i * 13 + 5) as u8).collect();
    d.h[0].fill(BUF, &data);
    let m0 = d.h[0].reg_mr(1, BUF, LEN, MrAccess::ALL).unwrap();
    let m1 = d.h[1].reg_mr(1, BUF, LEN, MrAccess::ALL).unwrap();
    (d, m0.lkey, m0.rkey, m1.lkey, m1.rkey)
}

fn cfg() -> QpConfig {
    QpConfig { pmtu: 1024, timeout: 3, ..QpConfig::default() }
}

fn write(id: u64, len: u32, to: u64, lkey: u32, rkey: u32) -> SendWr {
    SendWr::new(id, SendOp::Write { remote_addr: to, rkey }, vec![Sge { addr: BUF + id * 0x1000, len, lkey }])
}

fn counter(d: &mut DuoBench, nic: usize, i: u32) -> u32 {
    d.h[nic].eng.counter(i as u16).unwrap()
}

#[test]
fn entries_0_and_1_carry_traffic_as_qpns_4096_and_4097() {
    assert_eq!(hematite_sim::host::EngHost::entry(4096), 0);
    assert_eq!(hematite_sim::host::EngHost::entry(4097), 1);
    let (mut d, l0, _r0, l1, r1) = bench();
    // A's QPN 4096 (entry 0) with B's QPN 4097 (entry 1), and A's 4097 with B's 4096
    d.connect(4096, 4097, cfg(), 0).unwrap();
    d.connect(4097, 4096, cfg(), 0).unwrap();
    // a three-packet WRITE and a SEND from A 4096, a READ from A 4097
    d.h[1].post_recv(4097, &RecvWr { wr_id: 77, sgl: vec![Sge { addr: DST + 0x8000, len: 4096, lkey: l1 }] }).unwrap();
    d.h[0].post_send(4096, &write(1, 3000, DST, l0, r1), false).unwrap();
    d.h[0]
        .post_send(4096, &SendWr::new(2, SendOp::Send, vec![Sge { addr: BUF + 0x2000, len: 1500, lkey: l0 }]), true)
        .unwrap();
    d.h[1].fill(DST + 0x4000, &(0..2048u32).map(|i| (i * 3 + 1) as u8).collect::<Vec<u8>>());
    d.h[0]
        .post_send(4097, &SendWr::new(3, SendOp::Read { remote_addr: DST + 0x4000, rkey: r1 }, vec![Sge { addr: BUF + 0x3000, len: 2048, lkey: l0 }]), true)
        .unwrap();
    d.run(2_000_000, |d| d.h[0].cqes.len() >= 3 && !d.h[1].cqes.is_empty()).unwrap();
    let mut a: Vec<(u32, u64, WcStatus)> = d.h[0].cqes.iter().map(|c| (c.cqe.qpn, c.cqe.wr_id, c.cqe.status)).collect();
    a.sort_by_key(|c| c.1);
    assert_eq!(a, vec![(4096, 1, WcStatus::Success), (4096, 2, WcStatus::Success), (4097, 3, WcStatus::Success)], "A's CQEs name the QPNs");
    let b: Vec<(u32, u64, WcStatus)> = d.h[1].cqes.iter().map(|c| (c.cqe.qpn, c.cqe.wr_id, c.cqe.status)).collect();
    assert_eq!(b, vec![(4097, 77, WcStatus::Success)], "B's receive CQE names QPN 4097");
    assert_eq!(d.h[1].eng.mem.mem.read(DST, 3000), d.h[0].eng.mem.mem.read(BUF + 0x1000, 3000), "the WRITE");
    assert_eq!(d.h[1].eng.mem.mem.read(DST + 0x8000, 1500), d.h[0].eng.mem.mem.read(BUF + 0x2000, 1500), "the SEND");
    assert_eq!(d.h[0].eng.mem.mem.read(BUF + 0x3000, 2048), d.h[1].eng.mem.mem.read(DST + 0x4000, 2048), "the READ");
    // nothing was refused on the way
    for nic in 0..2 {
        assert_eq!(counter(&mut d, nic, k::HM_CNT_REQS_DROPPED), 0, "NIC {nic}");
        assert_eq!(counter(&mut d, nic, k::HM_CNT_DB_IGNORED), 0, "NIC {nic}");
    }
}

#[test]
fn qpns_0_and_1_reach_no_qp() {
    let (mut d, l0, _r0, l1, r1) = bench();
    // B's entry 1 is a live QP (QPN 4097, connected to A's QPN 2); A's QPN 3 sends to QPN 1,
    // which before the alias named that same entry
    d.connect(2, 4097, cfg(), 0).unwrap();
    d.h[0].create_qp(3, QpConfig { dest_qpn: 1, ..cfg() }, 0).unwrap();
    // (the test host refuses to create QPs with the reserved QPNs, as the firmware never hands
    // them out)
    for q in [0u32, 1, 4098] {
        assert!(d.h[0].create_qp(q, cfg(), 0).is_err(), "QPN {q}");
    }
    d.h[0].post_send(3, &write(1, 64, DST, l0, r1), true).unwrap();
    d.run(3_000, |_| false).ok();
    assert_eq!(counter(&mut d, 1, k::HM_CNT_REQS_DROPPED), 1, "the WRITE for QPN 1 is dropped and counted");
    assert_ne!(d.h[1].eng.mem.mem.read(DST, 64), d.h[0].eng.mem.mem.read(BUF + 0x1000, 64), "and placed nowhere");
    // the same WRITE through the real QPN arrives
    d.h[0].post_send(2, &write(2, 64, DST + 0x100, l0, r1), true).unwrap();
    d.run(1_000_000, |d| d.h[0].cqes.iter().any(|c| c.cqe.wr_id == 2)).unwrap();
    let c = d.h[0].cqes.iter().find(|c| c.cqe.wr_id == 2).unwrap();
    assert_eq!((c.cqe.qpn, c.cqe.status), (2, WcStatus::Success));
    assert_eq!(d.h[1].eng.mem.mem.read(DST + 0x100, 64), d.h[0].eng.mem.mem.read(BUF + 0x2000, 64));
    // doorbells for QPNs 0 and 1 (and for 4098, beyond the table) are ignored and counted
    let before = counter(&mut d, 0, k::HM_CNT_DB_IGNORED);
    for q in [0u32, 1, 4098] {
        d.h[0].doorbell_at(q, 1).unwrap();
        d.run(50, |_| false).ok();
    }
    assert_eq!(counter(&mut d, 0, k::HM_CNT_DB_IGNORED), before + 3);
    // and they reach neither the completer's nor the responder's copy of entries 0 and 1 when
    // those are live QPs (QPNs 4096 and 4097): B's entry 1 has one receive posted; SQ and RQ
    // doorbells for QPN 1 claiming 50 WQEs are ignored and counted, and a SEND to QPN 4097
    // takes the one receive posted, a second SEND finds none (RNR, retried until the bench
    // gives up), so B completes exactly one receive
    let before = counter(&mut d, 1, k::HM_CNT_DB_IGNORED);
    d.h[1].post_recv(4097, &RecvWr { wr_id: 500, sgl: vec![Sge { addr: DST + 0x1_0000, len: 256, lkey: l1 }] }).unwrap();
    for db in [hematite_sim::csr::regs::HM_REG_DB_RQ, hematite_sim::csr::regs::HM_REG_DB_SQ] {
        for q in [0u32, 1] {
            assert!(d.h[1].eng.bar_write(db, 50 << 16 | q).unwrap());
            d.run(50, |_| false).ok();
        }
    }
    assert_eq!(counter(&mut d, 1, k::HM_CNT_DB_IGNORED), before + 4, "RQ and SQ doorbells for QPNs 0 and 1");
    for id in [10u64, 11] {
        d.h[0].post_send(2, &SendWr::new(id, SendOp::Send, vec![Sge { addr: BUF + 0x5000, len: 100, lkey: l0 }]), true).unwrap();
    }
    d.run(200_000, |_| false).ok();
    let rx: Vec<(u64, WcStatus)> = d.h[1].cqes.iter().map(|c| (c.cqe.wr_id, c.cqe.status)).collect();
    assert_eq!(rx, vec![(500, WcStatus::Success)], "B's receives: the one posted, no phantom ones");
}
