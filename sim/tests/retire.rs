//! Send completions from the completer's on-chip start records (hm_rc_compl, RETIRE_DEPTH):
//! a SEND / WRITE completes without its WQE being read back from the send queue ring; more
//! WQEs outstanding than the table holds, READs (whose SGL is needed) and a QP reloaded with
//! its indices starting over still complete with their own wr_id, opcode and length. And the
//! responder reads a receive WQE ahead when it is posted.
use hematite_model::transport::mem::MrAccess;
use hematite_model::transport::{QpConfig, SendOp, SendWr, Sge, WcOpcode, WcStatus};
use hematite_sim::dma::MemCfg;
use hematite_sim::duo::{DuoBench, WireFaults};
use hematite_sim::host::SQ_BASE;

const BUF: u64 = 0x10_0000;
const LEN: u64 = 0x20_0000;
// (table entry 1: QPNs 0 and 1 are reserved, entries 0 and 1 are QPNs 4096 and 4097)
const QA: u32 = 4097;
const QB: u32 = 2;

fn cfg() -> QpConfig {
    QpConfig { pmtu: 1024, timeout: 3, ..QpConfig::default() }
}

fn pair() -> (DuoBench, u32, u32) {
    let mut d = DuoBench::new(MemCfg { latency: 100, seed: 3, ..Default::default() }, WireFaults::default()).unwrap();
    let data: Vec<u8> = (0..LEN).map(|i| (i * 13 + 5) as u8).collect();
    d.h[0].fill(BUF, &data);
    d.h[1].fill(BUF, &data);
    let k0 = d.h[0].reg_mr(1, BUF, LEN, MrAccess::ALL).unwrap().lkey;
    let k1 = d.h[1].reg_mr(1, BUF, LEN, MrAccess::ALL).unwrap().rkey;
    d.connect(QA, QB, cfg(), 0).unwrap();
    d.h[0].eng.mem.read_log = Some(Vec::new());
    (d, k0, k1)
}

/// Read bursts host 0's engine made in QP QA's send queue ring.
fn ring_reads(d: &DuoBench) -> usize {
    let ring = SQ_BASE + hematite_sim::host::EngHost::entry(QA) as u64 * 0x1_0000;
    d.h[0].eng.mem.read_log.as_ref().unwrap().iter().filter(|(_, a, _)| *a >= ring && *a < ring + 0x1_0000).count()
}

fn write(id: u64, k0: u32, k1: u32, len: u32) -> SendWr {
    SendWr::new(id, SendOp::Write { remote_addr: BUF + 0x8_0000 + (id % 32) * 0x1000, rkey: k1 }, vec![Sge { addr: BUF + (id % 32) * 0x1000, len, lkey: k0 }])
}

fn run_to(d: &mut DuoBench, n: usize) {
    d.run(2_000_000, |d| d.h[0].cqes.len() >= n).unwrap_or_else(|e| panic!("waiting for {n} CQEs: {e}"));
}

/// (wr_id, status, opcode, byte_len) of host 0's CQEs in order.
fn cqes(d: &DuoBench) -> Vec<(u64, WcStatus, WcOpcode, u32)> {
    d.h[0].cqes.iter().map(|c| (c.cqe.wr_id, c.cqe.status, c.cqe.opcode, c.cqe.byte_len)).collect()
}

#[test]
fn a_write_completes_without_its_wqe_read_back() {
    let (mut d, k0, k1) = pair();
    d.h[0].post_send(QA, &write(77, k0, k1, 64), true).unwrap();
    run_to(&mut d, 1);
    assert_eq!(cqes(&d), vec![(77, WcStatus::Success, WcOpcode::RdmaWrite, 64)]);
    // one read of the ring: the requester's fetch (a read-back would make it two)
    assert_eq!(ring_reads(&d), 1, "reads of the send queue ring: {:?}", d.h[0].eng.mem.read_log);
    assert_eq!(d.h[0].mem_diff(BUF, 0x1000), None);
    assert_eq!(d.h[1].eng.mem.mem.read(BUF + 0x8_0000 + 77 % 32 * 0x1000, 64), d.h[0].eng.mem.mem.read(BUF + 77 % 32 * 0x1000, 64));
}

#[test]
fn more_wqes_outstanding_than_the_table_holds_and_reads_among_them() {
    let (mut d, k0, k1) = pair();
    // 40 signaled WQEs posted at once (the table holds 8 per QP): WRITEs of several sizes
    // (multi-packet ones among them) and every fifth a READ
    let mut want = Vec::new();
    for i in 0..40u64 {
        let len = [0u32, 8, 64, 3000, 1024][i as usize % 5];
        let wr = if i % 5 == 4 {
            SendWr::new(1000 + i, SendOp::Read { remote_addr: BUF + 0x1_0000 + i * 0x100, rkey: k1 }, vec![Sge { addr: BUF + 0x10_0000 + i * 0x1000, len: 200, lkey: k0 }])
        } else {
            let sgl = if len == 0 { vec![] } else { vec![Sge { addr: BUF + i * 0x1000, len, lkey: k0 }] };
            SendWr::new(1000 + i, SendOp::Write { remote_addr: BUF + 0x8_0000 + i * 0x1000, rkey: k1 }, sgl)
        };
        want.push((1000 + i, WcStatus::Success, if i % 5 == 4 { WcOpcode::RdmaRead } else { WcOpcode::RdmaWrite }, if i % 5 == 4 { 200 } else { len }));
        d.h[0].post_send(QA, &wr, false).unwrap();
    }
    d.h[0].doorbell(QA).unwrap();
    run_to(&mut d, 40);
    assert_eq!(cqes(&d), want);
    for i in (4..40u64).step_by(5) {
        assert_eq!(d.h[0].eng.mem.mem.read(BUF + 0x10_0000 + i * 0x1000, 200), d.h[1].eng.mem.mem.read(BUF + 0x1_0000 + i * 0x100, 200), "READ {i}");
    }
}

#[test]
fn a_reloaded_qp_does_not_complete_with_records_of_its_earlier_life() {
    let (mut d, k0, k1) = pair();
    for id in 100..103u64 {
        d.h[0].post_send(QA, &write(id, k0, k1, 64), false).unwrap();
    }
    d.h[0].doorbell(QA).unwrap();
    run_to(&mut d, 3);
    // both ends reloaded: the send queue's indices start at 0 again, and slots 0..2 of the
    // table still hold the records of WQEs 0..2 of the QP's earlier life (100..102)
    let c = cfg();
    d.h[0].reload_qp(QA, QpConfig { dest_qpn: QB, ..c }, 0).unwrap();
    d.h[1].reload_qp(QB, QpConfig { dest_qpn: QA, av: c.av.reversed(), sq_psn: c.rq_psn, rq_psn: c.sq_psn, ..c }, 0).unwrap();
    for (k, id) in (200..203u64).enumerate() {
        d.h[0].post_send(QA, &write(id, k0, k1, 8 + k as u32), true).unwrap();
    }
    run_to(&mut d, 6);
    let got = cqes(&d);
    assert_eq!(got[3..], [(200, WcStatus::Success, WcOpcode::RdmaWrite, 8), (201, WcStatus::Success, WcOpcode::RdmaWrite, 9),
                          (202, WcStatus::Success, WcOpcode::RdmaWrite, 10)]);
    assert_eq!(d.h[0].cqes[3..].iter().map(|c| c.wqe_index).collect::<Vec<_>>(), vec![0, 1, 2]);
}

/// The responder reads a receive WQE ahead when its doorbell finds it posted and not cached:
/// the SEND that takes it finds it on chip (one read of the receive ring in all, made before
/// the SEND arrived).
#[test]
fn a_receive_wqe_is_read_ahead_when_it_is_posted() {
    use hematite_model::transport::RecvWr;
    use hematite_sim::host::RQ_BASE;
    let (mut d, k0, _) = pair();
    let lk1 = d.h[1].reg_mr(1, BUF + LEN, 0x1_0000, MrAccess::ALL).unwrap().lkey;
    d.h[1].eng.mem.read_log = Some(Vec::new());
    d.h[1].post_recv(QB, &RecvWr { wr_id: 55, sgl: vec![Sge { addr: BUF + LEN, len: 256, lkey: lk1 }] }).unwrap();
    d.run(400, |_| false).ok();
    let ring = RQ_BASE + QB as u64 * 0x1_0000;
    let rq_reads = |d: &DuoBench| d.h[1].eng.mem.read_log.as_ref().unwrap().iter().filter(|(_, a, _)| *a >= ring && *a < ring + 0x1_0000).count();
    assert_eq!(rq_reads(&d), 1, "the receive WQE read ahead");
    d.h[0].post_send(QA, &SendWr::new(56, SendOp::Send, vec![Sge { addr: BUF + 0x40, len: 100, lkey: k0 }]), true).unwrap();
    d.run(2_000_000, |d| d.h[0].cqes.len() >= 1 && d.h[1].cqes.len() >= 1).unwrap();
    assert_eq!(rq_reads(&d), 1, "no second read of the receive ring");
    let c = d.h[1].cqes[0].cqe;
    assert_eq!((c.wr_id, c.status, c.opcode, c.byte_len), (55, WcStatus::Success, WcOpcode::Recv, 100));
    assert_eq!(d.h[1].eng.mem.mem.read(BUF + LEN, 100), d.h[0].eng.mem.mem.read(BUF + 0x40, 100));
}
