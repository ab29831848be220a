//! Scenario tests of the RC transport reference model (`hematite_model::transport`).

mod common;

use hematite_model::transport::mem::MrAccess;
use hematite_model::transport::qp::ExecKind;
use hematite_model::transport::sim::{FaultConfig, Sim};
use hematite_model::transport::*;
use hematite_model::{classify, HdrRecord};

const QA: u32 = 0x11;
const QB: u32 = 0x22;
const BASE: u64 = 0x10_0000;
const MRLEN: u64 = 0x100_0000;

struct T {
    sim: Sim,
    ka: u32,
    kb: u32,
}

fn cfg(pmtu: u32, dest: u32, sq: u32, rq: u32) -> QpConfig {
    QpConfig { pmtu, dest_qpn: dest, sq_psn: sq, rq_psn: rq, timeout: 10, ..QpConfig::default() }
}

fn setup_with(pmtu: u32, psn_ab: u32, psn_ba: u32, f: impl Fn(&mut QpConfig, &mut QpConfig)) -> T {
    let mut a = Node::new();
    let mut b = Node::new();
    let ka = a.reg_mr(1, BASE, MRLEN, MrAccess::ALL).unwrap().lkey;
    assert_eq!(ka, 1);
    let kb = b.reg_mr(1, BASE, MRLEN, MrAccess::ALL).unwrap().lkey;
    let mut ca = cfg(pmtu, QB, psn_ab, psn_ba);
    let mut cb = cfg(pmtu, QA, psn_ba, psn_ab);
    cb.av = ca.av.reversed();
    f(&mut ca, &mut cb);
    a.create_qp(QA, ca).unwrap();
    b.create_qp(QB, cb).unwrap();
    let mut sim = Sim::new(a, b, 1, FaultConfig::default());
    sim.record_frames(true);
    T { sim, ka, kb }
}

fn setup(pmtu: u32) -> T {
    setup_with(pmtu, 100, 5000, |_, _| {})
}

fn pattern(seed: u64, len: usize) -> Vec<u8> {
    common::xorshift_bytes(seed, len, 0)
}

impl T {
    fn a(&mut self) -> &mut Node {
        &mut self.sim.nodes[0]
    }
    fn b(&mut self) -> &mut Node {
        &mut self.sim.nodes[1]
    }
    fn run(&mut self) {
        assert!(self.sim.run_until_idle(u64::MAX / 2), "did not go idle");
        assert_eq!(self.sim.frame_errors(), 0);
    }
    fn recs(&self) -> Vec<HdrRecord> {
        self.sim.frames().iter().map(|f| classify(f).rec).collect()
    }
}

/// SGE in the big MR every node registers first (key = index 0, tag 1).
fn sa(addr: u64, len: u32) -> Sge {
    Sge { addr, len, lkey: 1 }
}

fn ok(wr_id: u64, opcode: WcOpcode, len: u32) -> Cqe {
    Cqe { wr_id, status: WcStatus::Success, opcode, byte_len: len, imm: None, invalidated_rkey: None, qpn: QA }
}

const PMTUS: [u32; 3] = [256, 1024, 4096];
const LENS: [usize; 9] = [0, 1, 255, 256, 257, 1024, 1025, 4097, 20000];

#[test]
fn send_sizes_and_opcodes() {
    for pmtu in PMTUS {
        for (i, &len) in LENS.iter().enumerate() {
            let mut t = setup(pmtu);
            let data = pattern(i as u64, len);
            let src = BASE + 0x1000;
            t.a().mem.write(src, &data);
            let dst = BASE + 0x8_0000;
            let r = sa(dst, 30000);
            t.b().post_recv(QB, RecvWr { wr_id: 7, sgl: vec![r] }).unwrap();
            let s = sa(src, len as u32);
            t.a().post_send(QA, SendWr::new(1, SendOp::Send, vec![s])).unwrap();
            t.run();
            assert_eq!(t.a().poll_send_cq(QA), vec![ok(1, WcOpcode::Send, len as u32)]);
            let rc = t.b().poll_recv_cq(QB);
            assert_eq!(rc.len(), 1);
            assert_eq!((rc[0].wr_id, rc[0].status, rc[0].opcode, rc[0].byte_len), (7, WcStatus::Success, WcOpcode::Recv, len as u32));
            assert_eq!(t.b().mem.read(dst, len), data);
            let reqs: Vec<HdrRecord> = t.recs().into_iter().filter(|r| r.dest_qp == QB).collect();
            let n = len.div_ceil(pmtu as usize).max(1);
            assert_eq!(reqs.len(), n);
            for (k, r) in reqs.iter().enumerate() {
                let want = if n == 1 { 0x04 } else if k == 0 { 0x00 } else if k == n - 1 { 0x02 } else { 0x01 };
                assert_eq!(r.opcode, want);
                assert_eq!(r.psn, 100 + k as u32);
                assert_eq!(r.ackreq, k == n - 1 || k % 64 == 63);
                assert_eq!(r.payload_len as usize, if k < n - 1 { pmtu as usize } else { len - k * pmtu as usize });
            }
            // coalesced: one ACK per AckReq packet, the last one acks the whole message
            let acks: Vec<HdrRecord> = t.recs().into_iter().filter(|r| r.dest_qp == QA).collect();
            assert_eq!(acks.len(), reqs.iter().filter(|r| r.ackreq).count());
            let l = acks.last().unwrap();
            assert_eq!((l.opcode, l.syndrome, l.psn, l.msn), (0x11, SYN_ACK, 100 + n as u32 - 1, 1));
        }
    }
}

fn st(c: &[Cqe]) -> Vec<(u64, WcStatus)> {
    c.iter().map(|c| (c.wr_id, c.status)).collect()
}

#[test]
fn write_read_atomics_psn_wrap() {
    for pmtu in PMTUS {
        let mut t = setup_with(pmtu, 0xFF_FFFE, 0xFF_FFFF, |_, _| {});
        let data = pattern(9, 9000);
        t.a().mem.write(BASE, &data);
        t.b().mem.write(BASE + 0x10_0000, &pattern(3, 9000));
        t.b().mem.write_u64(BASE + 0x20_0000, 40);
        let kb = t.kb;
        let w = SendWr::new(1, SendOp::Write { remote_addr: BASE + 0x1000, rkey: kb }, vec![sa(BASE, 100), sa(BASE + 100, 8900)]);
        let r = SendWr::new(2, SendOp::Read { remote_addr: BASE + 0x10_0000, rkey: kb }, vec![sa(BASE + 0x3_0000, 5000), sa(BASE + 0x4_0000, 4000)]);
        let c = SendWr::new(3, SendOp::CmpSwap { remote_addr: BASE + 0x20_0000, rkey: kb, compare: 40, swap: 7 }, vec![sa(BASE + 0x5_0000, 8)]);
        let f = SendWr::new(4, SendOp::FetchAdd { remote_addr: BASE + 0x20_0000, rkey: kb, add: 5 }, vec![sa(BASE + 0x5_0008, 8)]);
        let z = SendWr::new(5, SendOp::Write { remote_addr: 0, rkey: 0 }, vec![]);
        for wr in [w, r, c, f, z] {
            t.a().post_send(QA, wr).unwrap();
        }
        t.run();
        assert_eq!(st(&t.a().poll_send_cq(QA)), (1..=5).map(|i| (i, WcStatus::Success)).collect::<Vec<_>>());
        assert_eq!(t.b().mem.read(BASE + 0x1000, 9000), data);
        let rd = pattern(3, 9000);
        assert_eq!(t.a().mem.read(BASE + 0x3_0000, 5000), rd[..5000]);
        assert_eq!(t.a().mem.read(BASE + 0x4_0000, 4000), rd[5000..]);
        assert_eq!(t.a().mem.read_u64(BASE + 0x5_0000), 40);
        assert_eq!(t.a().mem.read_u64(BASE + 0x5_0008), 7);
        assert_eq!(t.b().mem.read_u64(BASE + 0x20_0000), 12);
        // PSNs crossed 0xFFFFFF -> 0
        assert!(t.recs().iter().any(|r| r.dest_qp == QB && r.psn == 0xFF_FFFF));
        assert!(t.recs().iter().any(|r| r.dest_qp == QB && r.psn == 1));
        let wpk = 9000u32.div_ceil(pmtu);
        let rpk = 9000u32.div_ceil(pmtu);
        assert_eq!(t.a().qp(QA).unwrap().next_psn(), (0xFF_FFFE + wpk + rpk + 3) & 0xFF_FFFF);
    }
}

#[test]
fn remote_access_errors() {
    // (op builder, expected status)
    for case in 0..6 {
        let mut t = setup_with(1024, 10, 10, |_, cb| {
            if case == 5 {
                cb.access.remote_write = false;
            }
        });
        let kb = t.kb;
        let ro = t.b().reg_mr(1, BASE + MRLEN, 4096, MrAccess { local_write: true, ..MrAccess::NONE }).unwrap().rkey;
        let op = match case {
            0 => SendOp::Write { remote_addr: BASE, rkey: kb ^ 1 },              // bad key (tag)
            1 => SendOp::Write { remote_addr: BASE + MRLEN - 4, rkey: kb },      // bounds
            2 => SendOp::Write { remote_addr: BASE + MRLEN, rkey: ro },          // no remote_write
            3 => SendOp::Read { remote_addr: BASE + MRLEN, rkey: ro },           // no remote_read
            4 => SendOp::FetchAdd { remote_addr: BASE + MRLEN, rkey: ro, add: 1 }, // no remote_atomic
            _ => SendOp::Write { remote_addr: BASE, rkey: kb },                  // QP access flags
        };
        t.b().mem.write(BASE + MRLEN, &[0xAA; 8]);
        let len = if case == 4 { 8 } else { 16 };
        t.a().mem.write(BASE, &[0x55; 16]);
        t.a().post_send(QA, SendWr::new(1, op, vec![sa(BASE, len)])).unwrap();
        t.a().post_send(QA, SendWr::new(2, SendOp::Send, vec![])).unwrap();
        t.run();
        let want = if case == 5 { WcStatus::RemInvReqErr } else { WcStatus::RemAccessErr };
        assert_eq!(st(&t.a().poll_send_cq(QA)), vec![(1, want), (2, WcStatus::WrFlushErr)], "case {case}");
        assert_eq!(t.a().qp(QA).unwrap().state(), QpState::Err);
        assert_eq!(t.b().qp(QB).unwrap().state(), QpState::Err);
        assert_eq!(t.b().mem.read(BASE + MRLEN, 8), vec![0xAA; 8], "nothing written");
        assert_eq!(t.b().mem.read(BASE, 16), vec![0; 16]);
        let nak = t.recs().into_iter().find(|r| r.dest_qp == QA).unwrap();
        assert_eq!(nak.syndrome, if case == 5 { SYN_NAK_INV_REQ } else { SYN_NAK_REM_ACCESS });
    }
}

#[test]
fn local_errors_and_flush() {
    let mut t = setup(1024);
    let ka = t.ka;
    let bad = Sge { addr: BASE, len: 4, lkey: ka + 0x100 };
    t.b().post_recv(QB, RecvWr { wr_id: 9, sgl: vec![sa(BASE, 64)] }).unwrap();
    t.a().post_send(QA, SendWr::new(1, SendOp::Send, vec![sa(BASE, 8)])).unwrap();
    t.a().post_send(QA, SendWr::new(2, SendOp::Send, vec![bad])).unwrap();
    t.a().post_send(QA, SendWr::new(3, SendOp::Send, vec![])).unwrap();
    t.run();
    assert_eq!(st(&t.a().poll_send_cq(QA)), vec![(1, WcStatus::Success), (2, WcStatus::LocProtErr), (3, WcStatus::WrFlushErr)]);
    assert_eq!(t.a().qp(QA).unwrap().state(), QpState::Err);
    // posting in ERR flushes at once
    t.a().post_send(QA, SendWr::new(4, SendOp::Send, vec![])).unwrap();
    t.a().post_recv(QA, RecvWr { wr_id: 5, sgl: vec![] }).unwrap();
    assert_eq!(st(&t.a().poll_send_cq(QA)), vec![(4, WcStatus::WrFlushErr)]);
    assert_eq!(st(&t.a().poll_recv_cq(QA)), vec![(5, WcStatus::WrFlushErr)]);

    // READ into an MR without local write; misaligned atomic
    for (op, sge_ro, want) in [
        (SendOp::Read { remote_addr: BASE, rkey: 0 }, true, WcStatus::LocProtErr),
        (SendOp::FetchAdd { remote_addr: BASE + 4, rkey: 0, add: 1 }, false, WcStatus::LocQpOpErr),
    ] {
        let mut t = setup(1024);
        let ro = t.a().reg_mr(1, BASE + MRLEN, 64, MrAccess::NONE).unwrap().lkey;
        let sge = if sge_ro { Sge { addr: BASE + MRLEN, len: 8, lkey: ro } } else { sa(BASE, 8) };
        t.a().post_send(QA, SendWr::new(1, op, vec![sge])).unwrap();
        t.run();
        assert_eq!(st(&t.a().poll_send_cq(QA)), vec![(1, want)]);
    }

    // explicit ERR flushes queued send and receive WQEs
    let mut t = setup(1024);
    t.a().post_recv(QA, RecvWr { wr_id: 7, sgl: vec![] }).unwrap();
    t.a().post_send(QA, SendWr::new(8, SendOp::Send, vec![])).unwrap();
    t.a().modify_qp_state(QA, QpState::Err).unwrap();
    assert_eq!(st(&t.a().poll_send_cq(QA)), vec![(8, WcStatus::WrFlushErr)]);
    assert_eq!(st(&t.a().poll_recv_cq(QA)), vec![(7, WcStatus::WrFlushErr)]);
    t.run();
}

/// The model shares hematite-abi's QP-state encoding (ibverbs values); RC never enters SQE, so a
/// transition to it is refused from every state and the QP stays where it was.
#[test]
fn sqe_is_refused_and_states_carry_ibverbs_values() {
    assert_eq!(QpState::Err as u8, 6);
    assert_eq!(QpState::Sqe.engine_code(), hematite_abi::desc::HM_QPS_ERR);
    let mut t = setup(1024);
    assert_eq!(t.a().modify_qp_state(QA, QpState::Sqe), Err(PostError::InvalidState));
    t.a().post_send(QA, SendWr::new(1, SendOp::Send, vec![])).unwrap();
    t.b().post_recv(QB, RecvWr { wr_id: 2, sgl: vec![] }).unwrap();
    t.run();
    assert_eq!(st(&t.a().poll_send_cq(QA)), vec![(1, WcStatus::Success)]);
}

#[test]
fn recv_too_short_is_len_error() {
    let mut t = setup(256);
    t.b().post_recv(QB, RecvWr { wr_id: 9, sgl: vec![sa(BASE, 100)] }).unwrap();
    t.a().post_send(QA, SendWr::new(1, SendOp::Send, vec![sa(BASE, 600)])).unwrap();
    t.run();
    assert_eq!(st(&t.b().poll_recv_cq(QB)), vec![(9, WcStatus::LocLenErr)]);
    assert_eq!(st(&t.a().poll_send_cq(QA)), vec![(1, WcStatus::RemInvReqErr)]);
}

#[test]
fn rnr_exhaustion_and_infinite() {
    let mut t = setup_with(1024, 0, 0, |ca, cb| {
        ca.rnr_retry = 2;
        cb.min_rnr_timer = 3;
    });
    t.a().post_send(QA, SendWr::new(1, SendOp::Send, vec![sa(BASE, 10)])).unwrap();
    t.run();
    assert_eq!(st(&t.a().poll_send_cq(QA)), vec![(1, WcStatus::RnrRetryExcErr)]);
    let rnrs: Vec<_> = t.recs().into_iter().filter(|r| r.dest_qp == QA).collect();
    assert_eq!(rnrs.len(), 3);
    assert!(rnrs.iter().all(|r| r.syndrome == SYN_RNR | 3 && r.psn == 0));
    assert_eq!(t.b().qp(QB).unwrap().state(), QpState::Rts);

    // infinite RNR retry (7): succeeds once a receive is posted
    let mut t = setup_with(1024, 0, 0, |ca, _| ca.rnr_retry = 7);
    let kb = t.kb;
    t.a().post_send(QA, SendWr::new(1, SendOp::WriteImm { remote_addr: BASE, rkey: kb, imm: 0xABCD }, vec![sa(BASE, 3000)])).unwrap();
    assert!(!t.sim.run_until_idle(10_000_000));
    assert!(t.a().qp(QA).unwrap().stats().rnr_rcvd > 100);
    t.b().post_recv(QB, RecvWr { wr_id: 3, sgl: vec![] }).unwrap();
    t.run();
    assert_eq!(st(&t.a().poll_send_cq(QA)), vec![(1, WcStatus::Success)]);
    let rc = t.b().poll_recv_cq(QB);
    assert_eq!((rc[0].opcode, rc[0].imm, rc[0].byte_len), (WcOpcode::RecvRdmaWithImm, Some(0xABCD), 3000));
    // the retry resumed mid-message with WRITE LAST w/ IMM (no RETH)
    let execs = t.b().exec_log();
    assert_eq!(execs.len(), 3);
}

#[test]
fn retry_exhaustion_dead_link() {
    let mut t = setup_with(1024, 0, 0, |ca, _| ca.retry_cnt = 3);
    t.sim.wire.set_link_up(false);
    t.a().post_send(QA, SendWr::new(1, SendOp::Send, vec![])).unwrap();
    t.a().post_send(QA, SendWr::new(2, SendOp::Send, vec![])).unwrap();
    t.run();
    assert_eq!(st(&t.a().poll_send_cq(QA)), vec![(1, WcStatus::RetryExcErr), (2, WcStatus::WrFlushErr)]);
    let s = *t.a().qp(QA).unwrap().stats();
    assert_eq!((s.timeouts, s.retries), (4, 3));
    // 4 timeouts of 4.096us * 2^10 each
    assert_eq!(t.sim.now, 4 * (4096 << 10));
}

#[test]
fn send_with_invalidate_and_imm() {
    let mut t = setup(256);
    let target = t.b().reg_mr(1, BASE + MRLEN, 4096, MrAccess::ALL).unwrap().rkey;
    for i in 0..2 {
        t.b().post_recv(QB, RecvWr { wr_id: 10 + i, sgl: vec![sa(BASE + 0x100 * i, 0x100)] }).unwrap();
    }
    t.a().post_send(QA, SendWr::new(1, SendOp::SendImm(0x1234), vec![sa(BASE, 3)])).unwrap();
    t.a().post_send(QA, SendWr::new(2, SendOp::SendInv(target), vec![sa(BASE, 0)])).unwrap();
    t.a().post_send(QA, SendWr::new(3, SendOp::Write { remote_addr: BASE + MRLEN, rkey: target }, vec![sa(BASE, 4)])).unwrap();
    t.run();
    let rc = t.b().poll_recv_cq(QB);
    assert_eq!((rc[0].imm, rc[0].byte_len), (Some(0x1234), 3));
    assert_eq!((rc[1].invalidated_rkey, rc[1].byte_len), (Some(target), 0));
    assert_eq!(st(&t.a().poll_send_cq(QA)), vec![(1, WcStatus::Success), (2, WcStatus::Success), (3, WcStatus::RemAccessErr)]);
    assert!(t.b().mrs.get(target).is_none());
}

/// Manual packet pump: deliver everything except packets the filter rejects.
fn pump(t: &mut T, now: u64, mut keep: impl FnMut(&HdrRecord) -> bool) -> Vec<HdrRecord> {
    let mut seen = Vec::new();
    for _ in 0..50 {
        let pa = t.sim.nodes[0].poll_tx(now);
        let pb = t.sim.nodes[1].poll_tx(now);
        if pa.is_empty() && pb.is_empty() {
            break;
        }
        for (r, p) in pa {
            seen.push(r);
            if keep(&r) {
                t.sim.nodes[1].receive(now, &r, &p);
            }
        }
        for (r, p) in pb {
            seen.push(r);
            if keep(&r) {
                t.sim.nodes[0].receive(now, &r, &p);
            }
        }
    }
    seen
}

/// A [`pump`] filter that loses the first packet matching `lose` and keeps everything else.
fn lose_first(lose: impl Fn(&HdrRecord) -> bool) -> impl FnMut(&HdrRecord) -> bool {
    let mut lost = false;
    move |r| {
        if !lost && lose(r) {
            lost = true;
            return false;
        }
        true
    }
}

#[test]
fn atomic_replayed_not_reexecuted() {
    let mut t = setup(1024);
    let kb = t.kb;
    t.b().mem.write_u64(BASE, 100);
    t.a().post_send(QA, SendWr::new(1, SendOp::FetchAdd { remote_addr: BASE, rkey: kb, add: 1 }, vec![sa(BASE + 8, 8)])).unwrap();
    pump(&mut t, 0, |r| r.opcode != 0x12); // lose the atomic ACK
    assert_eq!(t.b().mem.read_u64(BASE), 101);
    t.sim.nodes[0].tick(1 << 30); // local ACK timeout
    let seen = pump(&mut t, 1 << 30, |_| true);
    assert!(seen.iter().any(|r| r.opcode == 0x14) && seen.iter().any(|r| r.opcode == 0x12 && r.atomic_orig == 100));
    assert_eq!(t.b().mem.read_u64(BASE), 101);
    assert_eq!(t.a().mem.read_u64(BASE + 8), 100);
    assert_eq!(st(&t.a().poll_send_cq(QA)), vec![(1, WcStatus::Success)]);
    let kinds: Vec<ExecKind> = t.b().exec_log().iter().map(|e| e.kind).collect();
    assert_eq!(kinds, vec![ExecKind::Atomic, ExecKind::AtomicReplay]);
}

#[test]
fn read_gap_rerequest_mid_range() {
    let mut t = setup(256);
    let kb = t.kb;
    let src = pattern(5, 256 * 5);
    t.b().mem.write(BASE, &src);
    t.a().post_send(QA, SendWr::new(1, SendOp::Read { remote_addr: BASE, rkey: kb }, vec![sa(BASE + 0x1000, 256 * 5)])).unwrap();
    let seen = pump(&mut t, 0, lose_first(|r| r.opcode == 0x0E && r.psn == 102));
    // re-request from the missing PSN with adjusted VA / length, answered FIRST..LAST
    let rr: Vec<&HdrRecord> = seen.iter().filter(|r| r.opcode == 0x0C).collect();
    assert_eq!(rr.len(), 2);
    assert_eq!((rr[1].psn, rr[1].va, rr[1].dma_len), (102, BASE + 512, 768));
    let resp: Vec<(u32, u8)> = seen.iter().filter(|r| r.dest_qp == QA).map(|r| (r.psn, r.opcode)).collect();
    assert_eq!(resp, vec![(100, 0x0D), (101, 0x0E), (102, 0x0E), (103, 0x0E), (104, 0x0F), (102, 0x0D), (103, 0x0E), (104, 0x0F)]);
    assert_eq!(t.a().mem.read(BASE + 0x1000, 256 * 5), src);
    assert_eq!(st(&t.a().poll_send_cq(QA)), vec![(1, WcStatus::Success)]);
    let kinds: Vec<ExecKind> = t.b().exec_log().iter().map(|e| e.kind).collect();
    assert_eq!(kinds, vec![ExecKind::Read, ExecKind::ReadReplay]);
}

#[test]
fn nak_seq_once_and_mid_message_restart() {
    let mut t = setup(256);
    let kb = t.kb;
    t.a().post_send(QA, SendWr::new(1, SendOp::Write { remote_addr: BASE, rkey: kb }, vec![sa(BASE, 256 * 5)])).unwrap();
    let seen = pump(&mut t, 0, lose_first(|r| r.psn == 102 && r.dest_qp == QB));
    let naks: Vec<&HdrRecord> = seen.iter().filter(|r| r.syndrome == SYN_NAK_SEQ && r.opcode == 0x11).collect();
    assert_eq!(naks.len(), 1);
    assert_eq!(naks[0].psn, 102);
    let reqs: Vec<(u32, u8, u64)> = seen.iter().filter(|r| r.dest_qp == QB).map(|r| (r.psn, r.opcode, r.va)).collect();
    assert_eq!(&reqs[5..], &[(102, 0x07, 0), (103, 0x07, 0), (104, 0x08, 0)]);
    assert_eq!(st(&t.a().poll_send_cq(QA)), vec![(1, WcStatus::Success)]);
}

#[test]
fn duplicate_send_reacked_not_reexecuted() {
    let mut t = setup(1024);
    t.b().post_recv(QB, RecvWr { wr_id: 1, sgl: vec![sa(BASE, 64)] }).unwrap();
    t.b().post_recv(QB, RecvWr { wr_id: 2, sgl: vec![sa(BASE, 64)] }).unwrap();
    t.a().post_send(QA, SendWr::new(1, SendOp::Send, vec![sa(BASE, 8)])).unwrap();
    let pa = t.sim.nodes[0].poll_tx(0);
    let (r, p) = pa[0].clone();
    t.sim.nodes[1].receive(0, &r, &p);
    t.sim.nodes[1].receive(0, &r, &p);
    let acks = t.sim.nodes[1].poll_tx(0);
    assert_eq!(acks.len(), 2);
    assert_eq!((acks[1].0.psn, acks[1].0.msn), (100, 1));
    assert_eq!(t.b().qp(QB).unwrap().rq_len(), 1);
    assert_eq!(t.b().exec_log().len(), 1);
}

#[test]
fn invalid_opcode_sequence_naks() {
    let mut t = setup(256);
    let r = HdrRecord { opcode: 0x01, dest_qp: QB, psn: 100, payload_len: 256, ..HdrRecord::default() };
    t.sim.nodes[1].receive(0, &r, &[0u8; 256]);
    let out = t.sim.nodes[1].poll_tx(0);
    assert_eq!((out[0].0.opcode, out[0].0.syndrome, out[0].0.psn), (0x11, SYN_NAK_INV_REQ, 100));
    assert_eq!(t.b().qp(QB).unwrap().state(), QpState::Err);
}

#[test]
fn pcap_roundtrip() {
    let mut t = setup_with(512, 0xFF_FFFD, 0, |ca, cb| {
        ca.av.ipv6 = true;
        ca.av.ip_src = 0xFE80_0000_0000_0000_0000_0000_0000_0001;
        ca.av.ip_dst = 0xFE80_0000_0000_0000_0000_0000_0000_0002;
        cb.av = ca.av.reversed();
    });
    t.sim.wire.set_faults(FaultConfig { drop_ppm: 100_000, dup_ppm: 100_000, reorder_ppm: 100_000, ..FaultConfig::default() });
    let kb = t.kb;
    for i in 0..10 {
        t.a().post_send(QA, SendWr::new(i, SendOp::Write { remote_addr: BASE, rkey: kb }, vec![sa(BASE, 3000)])).unwrap();
    }
    t.run();
    assert_eq!(t.a().poll_send_cq(QA).len(), 10);
    // the faults really happened and were recovered by retransmission
    let ws = t.sim.wire.stats;
    assert!(ws.dropped > 0 && ws.duplicated > 0, "{ws:?}");
    let st = *t.a().qp(QA).unwrap().stats();
    assert!(st.retries > 0, "{st:?}");
    assert_eq!(t.b().mem.read(BASE, 3000), t.a().mem.read(BASE, 3000));
    let p = std::env::temp_dir().join(format!("hematite_transport_{}.pcap", std::process::id()));
    hematite_model::capture::write_pcap(&p, t.sim.frames()).unwrap();
    let back = hematite_model::capture::read_frames(&p).unwrap();
    assert_eq!(back.len(), t.sim.frames().len());
    let _ = std::fs::remove_file(&p);
}

/// The window: a requester with nothing acknowledged sends WIN_MAX PSNs and stops, the last
/// packet before the limit asking for an ACK; the ACK moves the limit.
#[test]
fn the_window_bounds_packets_in_flight() {
    let mut t = setup(1024);
    let kb = t.kb;
    // 10 packets, then 1024: the limit falls inside the second message, off its 64-packet
    // AckReq grid
    t.a().post_send(QA, SendWr::new(1, SendOp::Write { remote_addr: BASE, rkey: kb }, vec![sa(BASE, 10 << 10)])).unwrap();
    t.a().post_send(QA, SendWr::new(2, SendOp::Write { remote_addr: BASE, rkey: kb }, vec![sa(BASE, 1 << 20)])).unwrap();
    let first = t.sim.nodes[0].poll_tx(0);
    assert_eq!(first.len(), WIN_MAX as usize, "WIN_MAX packets, no more");
    assert!(t.sim.nodes[0].poll_tx(0).is_empty(), "stopped at the limit");
    let k = |i: usize| i as u32 - 10; // packet index in the second message
    assert!((WIN_MAX - 1 - 10) % 64 != 63);
    for (i, (r, _)) in first.iter().enumerate().skip(10) {
        let want = k(i) % 64 == 63 || i == WIN_MAX as usize - 1;
        assert_eq!(r.ackreq, want, "packet {i}");
    }
    for (r, p) in &first {
        t.sim.nodes[1].receive(0, r, p);
    }
    for (r, p) in t.sim.nodes[1].poll_tx(0) {
        t.sim.nodes[0].receive(0, &r, &p);
    }
    let next = t.sim.nodes[0].poll_tx(0);
    assert_eq!(next.len(), WIN_MAX as usize, "a full window again");
    assert_eq!(next[0].0.psn, 100 + WIN_MAX);
    assert!(next.last().unwrap().0.ackreq);
}

/// Go-back-N that does not collapse: ten 1 MiB WRITEs over a wire that loses 3 % of the
/// frames both ways complete, with at most 4 request frames sent per frame of the messages
/// (without the window a lost NAK or a lost retransmission resent everything posted).
#[test]
fn three_percent_loss_completes_within_four_times_the_frames() {
    let mut t = setup(1024);
    t.sim.wire.set_faults(FaultConfig { drop_ppm: 30_000, latency_ns: 2_000, ..FaultConfig::default() });
    let data = pattern(11, 1 << 20);
    t.a().mem.write(BASE, &data);
    let kb = t.kb;
    for i in 0..10 {
        t.a().post_send(QA, SendWr::new(i, SendOp::Write { remote_addr: BASE + 0x20_0000, rkey: kb }, vec![sa(BASE, 1 << 20)])).unwrap();
    }
    t.run();
    let cq = t.a().poll_send_cq(QA);
    assert_eq!(cq.len(), 10);
    assert!(cq.iter().all(|c| c.status == WcStatus::Success), "{cq:?}");
    assert_eq!(t.b().mem.read(BASE + 0x20_0000, 1 << 20), data);
    let sent = t.a().qp(QA).unwrap().stats().req_pkts;
    let lost = t.sim.wire.stats.dropped;
    println!("3 % loss, 10 x 1 MiB WRITEs: {sent} request frames for 10240 ({:.2}x), {lost} frames lost", sent as f64 / 10240.0);
    assert!(lost > 300, "the wire lost frames: {lost}");
    assert!(sent <= 4 * 10240, "{sent} request frames for 10240");
}

/// Adaptive retransmission, step by step: one round trip of 2 µs timed (SRTT 2 µs, RTTVAR
/// 1 µs), then a message whose last packet is lost. The QP has nothing more to start, so the
/// early timer is the tail-loss probe: 2 SRTT (4 µs, `PTO_MIN_NS`), not the standard 4.19 ms.
/// The probe resends from the oldest unacknowledged PSN, the responder takes the missing
/// packet and the WRITE completes, with no retry used. With `std_timer` the same loss waits for
/// the standard timeout.
#[test]
fn a_lost_tail_costs_a_probe_time_not_a_timeout() {
    for std_timer in [false, true] {
        let mut t = setup_with(1024, 100, 5000, |a, _| a.std_timer = std_timer);
        let kb = t.kb;
        let w = |i, len| SendWr::new(i, SendOp::Write { remote_addr: BASE, rkey: kb }, vec![sa(BASE, len)]);
        // 1: four packets sent at 0, delivered at 1 µs, the ACK back at 2 µs
        t.a().post_send(QA, w(1, 4 << 10)).unwrap();
        let pk = t.sim.nodes[0].poll_tx(0);
        assert_eq!(pk.len(), 4);
        for (r, p) in &pk {
            t.sim.nodes[1].receive(1_000, r, p);
        }
        for (r, p) in t.sim.nodes[1].poll_tx(1_000) {
            t.sim.nodes[0].receive(2_000, &r, &p);
        }
        assert_eq!(t.a().poll_send_cq(QA).iter().map(|c| (c.wr_id, c.status)).collect::<Vec<_>>(), vec![(1, WcStatus::Success)]);
        // timed with the standard timer too (it only goes unused)
        assert_eq!(t.a().qp(QA).unwrap().rtt(), Some((2_000, 1_000)));
        // 2: four packets at 10 µs, the last one lost
        t.a().post_send(QA, w(2, 4 << 10)).unwrap();
        let pk = t.sim.nodes[0].poll_tx(10_000);
        assert_eq!(pk.len(), 4);
        for (r, p) in &pk[..3] {
            t.sim.nodes[1].receive(11_000, r, p);
        }
        assert!(t.sim.nodes[1].poll_tx(11_000).is_empty(), "no AckReq yet: no ACK");
        let std = 10_000 + ack_timeout_ns(10).unwrap();
        let due = t.a().next_deadline().unwrap();
        assert_eq!(due, if std_timer { std } else { 10_000 + PTO_MIN_NS });
        t.a().tick(due);
        let again = t.sim.nodes[0].poll_tx(due);
        assert_eq!(again.len(), 4, "resent from the oldest unacknowledged PSN");
        assert_eq!(again[0].0.psn, pk[0].0.psn);
        for (r, p) in &again {
            t.sim.nodes[1].receive(due + 1_000, r, p);
        }
        for (r, p) in t.sim.nodes[1].poll_tx(due + 1_000) {
            t.sim.nodes[0].receive(due + 2_000, &r, &p);
        }
        let cq = t.a().poll_send_cq(QA);
        assert_eq!(cq.iter().map(|c| (c.wr_id, c.status)).collect::<Vec<_>>(), vec![(2, WcStatus::Success)]);
        let s = t.a().qp(QA).unwrap().stats().clone();
        assert_eq!((s.early_retx, s.timeouts, s.retries), if std_timer { (0, 1, 1) } else { (1, 0, 0) });
    }
}

/// A peer that stops answering: the early retransmissions back off (each interval doubles, at
/// most `RTO_BACKOFF` of them) and use no retry, so the QP fails with RETRY_EXC_ERR exactly as
/// late as with the standard timer alone: `retry_cnt` + 1 standard timeouts after the last
/// progress.
#[test]
fn early_retransmissions_back_off_and_never_fail_a_qp_sooner() {
    let mut t = setup_with(1024, 100, 5000, |a, _| {
        a.timeout = 4; // 65.5 µs
        a.retry_cnt = 2;
    });
    let kb = t.kb;
    let w = |i| SendWr::new(i, SendOp::Write { remote_addr: BASE, rkey: kb }, vec![sa(BASE, 1024)]);
    t.a().post_send(QA, w(1)).unwrap();
    for (r, p) in t.sim.nodes[0].poll_tx(0) {
        t.sim.nodes[1].receive(1_000, &r, &p);
    }
    for (r, p) in t.sim.nodes[1].poll_tx(1_000) {
        t.sim.nodes[0].receive(2_000, &r, &p);
    }
    assert_eq!(t.a().poll_send_cq(QA)[0].status, WcStatus::Success);
    // the peer is gone from here on
    t.a().post_send(QA, w(2)).unwrap();
    let t0 = 10_000;
    assert_eq!(t.sim.nodes[0].poll_tx(t0).len(), 1);
    let mut early_at = Vec::new();
    let mut now = t0;
    while t.a().poll_send_cq(QA).is_empty() {
        now = t.a().next_deadline().expect("a deadline while the WRITE is outstanding");
        let before = t.a().qp(QA).unwrap().stats().early_retx;
        t.a().tick(now);
        if t.a().qp(QA).unwrap().stats().early_retx > before {
            early_at.push(now);
        }
        t.sim.nodes[0].poll_tx(now);
        assert!(now < 10_000_000, "no end");
    }
    let to = ack_timeout_ns(4).unwrap();
    // a probe at 4 µs, then rto (8 µs floor) doubled: 16, 32 µs; the next would pass the
    // standard deadline at 65.5 µs; after each standard timeout the early timer starts over
    // with its backoff where it was
    let s = t.a().qp(QA).unwrap().stats().clone();
    assert_eq!(early_at[..3], [t0 + 4_000, t0 + 4_000 + 16_000, t0 + 4_000 + 16_000 + 32_000]);
    assert!(s.early_retx as u32 <= RTO_BACKOFF, "{s:?}");
    assert_eq!((s.timeouts, s.retries), (3, 2));
    assert_eq!(now, t0 + 3 * to, "failed exactly when the standard timer alone fails it");
    assert_eq!(t.a().qp(QA).unwrap().state(), QpState::Err);
}

// ------------------------------------------------------------------------------------------
// UC (the module docs of `transport`, "UC")

fn setup_uc(pmtu: u32) -> T {
    setup_with(pmtu, 100, 5000, |a, b| {
        a.uc = true;
        b.uc = true;
    })
}

fn uc_stats(t: &mut T) -> (u64, u64) {
    let s = *t.b().qp(QB).unwrap().stats();
    (s.seq_drops, s.uc_drops)
}

#[test]
fn uc_sends_and_writes_without_responses() {
    for pmtu in [256u32, 1024] {
        for (i, &len) in [0usize, 1, 256, 257, 1025].iter().enumerate() {
            for op in 0..4 {
                let mut t = setup_uc(pmtu);
                let kb = t.kb;
                let data = pattern(i as u64 * 4 + op, len);
                let src = BASE + 0x1000;
                t.a().mem.write(src, &data);
                let dst = BASE + 0x8_0000;
                t.b().post_recv(QB, RecvWr { wr_id: 7, sgl: vec![sa(dst, 30000)] }).unwrap();
                let sop = match op {
                    0 => SendOp::Send,
                    1 => SendOp::SendImm(0x1234_5678),
                    2 => SendOp::Write { remote_addr: dst, rkey: kb },
                    _ => SendOp::WriteImm { remote_addr: dst, rkey: kb, imm: 9 },
                };
                t.a().post_send(QA, SendWr::new(1, sop, vec![sa(src, len as u32)])).unwrap();
                t.run();
                let want = if op < 2 { WcOpcode::Send } else { WcOpcode::RdmaWrite };
                assert_eq!(t.a().poll_send_cq(QA), vec![ok(1, want, len as u32)]);
                assert_eq!(t.b().mem.read(dst, len), data);
                let rc = t.b().poll_recv_cq(QB);
                if op == 2 {
                    assert!(rc.is_empty());
                } else {
                    let opc = if op < 2 { WcOpcode::Recv } else { WcOpcode::RecvRdmaWithImm };
                    assert_eq!((rc[0].wr_id, rc[0].status, rc[0].opcode, rc[0].byte_len), (7, WcStatus::Success, opc, len as u32));
                    assert_eq!(rc[0].imm, [None, Some(0x1234_5678), None, Some(9)][op as usize]);
                }
                // UC opcodes, no AckReq, PSNs in order, and not one packet back
                let recs = t.recs();
                assert!(recs.iter().all(|r| r.dest_qp == QB), "a UC responder answered");
                let n = len.div_ceil(pmtu as usize).max(1);
                assert_eq!(recs.len(), n);
                for (k, r) in recs.iter().enumerate() {
                    let (only, first, mid, last) = match op {
                        0 => (0x24, 0x20, 0x21, 0x22),
                        1 => (0x25, 0x20, 0x21, 0x23),
                        2 => (0x2A, 0x26, 0x27, 0x28),
                        _ => (0x2B, 0x26, 0x27, 0x29),
                    };
                    let want = if n == 1 { only } else if k == 0 { first } else if k == n - 1 { last } else { mid };
                    assert_eq!((r.opcode, r.psn, r.ackreq), (want, 100 + k as u32, false));
                }
                assert_eq!(t.a().qp(QA).unwrap().sq_len(), 0);
                assert_eq!(t.a().next_deadline(), None, "a UC requester armed a timer");
            }
        }
    }
}

#[test]
fn uc_a_lost_packet_drops_its_message_and_the_receive_wqe_serves_the_next() {
    let mut t = setup_uc(256);
    let src = pattern(40, 256 * 5);
    t.a().mem.write(BASE, &src);
    t.b().post_recv(QB, RecvWr { wr_id: 7, sgl: vec![sa(BASE + 0x10_0000, 4096)] }).unwrap();
    t.a().post_send(QA, SendWr::new(1, SendOp::Send, vec![sa(BASE, 256 * 5)])).unwrap();
    t.a().post_send(QA, SendWr::new(2, SendOp::Send, vec![sa(BASE + 7, 100)])).unwrap();
    let seen = pump(&mut t, 0, lose_first(|r| r.psn == 102 && r.dest_qp == QB));
    assert!(seen.iter().all(|r| r.dest_qp == QB));
    // both sent, both complete at the sender; only the second arrives, in the first WQE
    assert_eq!(st(&t.a().poll_send_cq(QA)), vec![(1, WcStatus::Success), (2, WcStatus::Success)]);
    let rc = t.b().poll_recv_cq(QB);
    assert_eq!(rc.len(), 1);
    assert_eq!((rc[0].wr_id, rc[0].status, rc[0].byte_len), (7, WcStatus::Success, 100));
    assert_eq!(t.b().mem.read(BASE + 0x10_0000, 100), src[7..107].to_vec());
    // 103 is the gap, 104 has lost its message, 105 (ONLY) is taken
    assert_eq!(uc_stats(&mut t), (1, 1));
    assert_eq!(t.b().qp(QB).unwrap().epsn(), 106);
    assert_eq!(t.b().qp(QB).unwrap().state(), QpState::Rts);
}

#[test]
fn uc_a_lost_first_packet_drops_the_rest_of_its_write() {
    let mut t = setup_uc(256);
    let kb = t.kb;
    let dst = BASE + 0x20_0000;
    t.a().mem.write(BASE, &pattern(41, 1024));
    t.a().post_send(QA, SendWr::new(1, SendOp::Write { remote_addr: dst, rkey: kb }, vec![sa(BASE, 1024)])).unwrap();
    t.a().post_send(QA, SendWr::new(2, SendOp::Write { remote_addr: dst + 4096, rkey: kb }, vec![sa(BASE, 300)])).unwrap();
    pump(&mut t, 0, lose_first(|r| r.opcode == 0x26));
    assert_eq!(st(&t.a().poll_send_cq(QA)), vec![(1, WcStatus::Success), (2, WcStatus::Success)]);
    assert_eq!(t.b().mem.read(dst, 1024), vec![0u8; 1024], "MIDDLE/LAST of a lost FIRST were placed");
    assert_eq!(t.b().mem.read(dst + 4096, 300), pattern(41, 1024)[..300].to_vec());
    // 101 is the gap, 102 and 103 have lost their FIRST, 104 (FIRST) is taken
    assert_eq!(uc_stats(&mut t), (1, 2));
}

#[test]
fn uc_errors_drop_the_message_silently_and_the_qp_goes_on() {
    let mut t = setup_uc(1024);
    let kb = t.kb;
    let dst = BASE + 0x30_0000;
    t.a().mem.write(BASE, &pattern(42, 64));
    // a bad R_Key, a SEND with no receive WQE, a WRITE with immediate with none either
    t.a().post_send(QA, SendWr::new(1, SendOp::Write { remote_addr: dst, rkey: kb ^ 0x100 }, vec![sa(BASE, 64)])).unwrap();
    t.a().post_send(QA, SendWr::new(2, SendOp::Send, vec![sa(BASE, 64)])).unwrap();
    t.a().post_send(QA, SendWr::new(3, SendOp::WriteImm { remote_addr: dst, rkey: kb, imm: 1 }, vec![sa(BASE, 64)])).unwrap();
    t.run();
    assert_eq!(st(&t.a().poll_send_cq(QA)), vec![(1, WcStatus::Success), (2, WcStatus::Success), (3, WcStatus::Success)]);
    assert_eq!(t.b().mem.read(dst, 64), vec![0u8; 64]);
    assert_eq!(uc_stats(&mut t), (0, 3));
    assert!(t.recs().iter().all(|r| r.dest_qp == QB));
    // the QP still works
    t.b().post_recv(QB, RecvWr { wr_id: 9, sgl: vec![sa(dst, 64)] }).unwrap();
    t.a().post_send(QA, SendWr::new(4, SendOp::Send, vec![sa(BASE, 64)])).unwrap();
    t.run();
    assert_eq!(st(&t.b().poll_recv_cq(QB)), vec![(9, WcStatus::Success)]);
    assert_eq!(t.b().mem.read(dst, 64), pattern(42, 64));
    assert_eq!(t.b().qp(QB).unwrap().state(), QpState::Rts);
}

#[test]
fn uc_without_remote_write_drops_writes() {
    let mut t = setup_with(1024, 100, 5000, |a, b| {
        a.uc = true;
        b.uc = true;
        b.access = QpAccess { remote_write: false, ..QpAccess::ALL };
    });
    let kb = t.kb;
    t.a().mem.write(BASE, &pattern(43, 8));
    t.a().post_send(QA, SendWr::new(1, SendOp::Write { remote_addr: BASE + 0x1000, rkey: kb }, vec![sa(BASE, 8)])).unwrap();
    t.run();
    assert_eq!(st(&t.a().poll_send_cq(QA)), vec![(1, WcStatus::Success)]);
    assert_eq!(t.b().mem.read(BASE + 0x1000, 8), vec![0u8; 8]);
    assert_eq!(uc_stats(&mut t), (0, 1));
}

#[test]
fn uc_refuses_read_atomics_and_send_with_invalidate() {
    let kinds = [
        SendOp::Read { remote_addr: BASE, rkey: 1 },
        SendOp::FetchAdd { remote_addr: BASE, rkey: 1, add: 1 },
        SendOp::CmpSwap { remote_addr: BASE, rkey: 1, compare: 0, swap: 1 },
        SendOp::SendInv(1),
    ];
    for op in kinds {
        let mut t = setup_uc(1024);
        t.a().post_send(QA, SendWr::new(1, op, vec![sa(BASE, 8)])).unwrap();
        t.a().post_send(QA, SendWr::new(2, SendOp::Send, vec![sa(BASE, 8)])).unwrap();
        t.run();
        assert_eq!(st(&t.a().poll_send_cq(QA)), vec![(1, WcStatus::LocQpOpErr), (2, WcStatus::WrFlushErr)]);
        assert_eq!(t.a().qp(QA).unwrap().state(), QpState::Err);
        assert!(t.recs().is_empty(), "{op:?} sent something");
    }
}

#[test]
fn uc_receive_errors_complete_the_wqe_and_fail_the_qp_without_a_nak() {
    let mut t = setup_uc(1024);
    t.b().post_recv(QB, RecvWr { wr_id: 5, sgl: vec![sa(BASE, 16)] }).unwrap();
    t.b().post_recv(QB, RecvWr { wr_id: 6, sgl: vec![sa(BASE, 64)] }).unwrap();
    t.a().post_send(QA, SendWr::new(1, SendOp::Send, vec![sa(BASE, 32)])).unwrap();
    t.run();
    assert_eq!(st(&t.a().poll_send_cq(QA)), vec![(1, WcStatus::Success)]);
    assert_eq!(st(&t.b().poll_recv_cq(QB)), vec![(5, WcStatus::LocLenErr), (6, WcStatus::WrFlushErr)]);
    assert_eq!(t.b().qp(QB).unwrap().state(), QpState::Err);
    assert!(t.recs().iter().all(|r| r.dest_qp == QB));
}

#[test]
fn rc_and_uc_do_not_take_each_others_packets() {
    // an RC SEND to a UC QP and a UC SEND to an RC QP are dropped unexecuted
    let mut t = setup_with(1024, 100, 5000, |_, b| b.uc = true);
    t.b().post_recv(QB, RecvWr { wr_id: 5, sgl: vec![sa(BASE, 64)] }).unwrap();
    t.a().post_send(QA, SendWr::new(1, SendOp::Send, vec![sa(BASE, 8)])).unwrap();
    pump(&mut t, 0, |_| true);
    assert!(t.b().poll_recv_cq(QB).is_empty());
    assert_eq!(t.b().exec_log().len(), 0);
    let mut t = setup_with(1024, 100, 5000, |a, _| a.uc = true);
    t.b().post_recv(QB, RecvWr { wr_id: 5, sgl: vec![sa(BASE, 64)] }).unwrap();
    t.a().post_send(QA, SendWr::new(1, SendOp::Send, vec![sa(BASE, 8)])).unwrap();
    t.run();
    assert_eq!(st(&t.a().poll_send_cq(QA)), vec![(1, WcStatus::Success)]);
    assert!(t.b().poll_recv_cq(QB).is_empty());
    assert_eq!(t.b().exec_log().len(), 0);
}

/// The kernel's state table has no RESET -> ERR: refused; any other state -> ERR flushes.
#[test]
fn rc_reset_to_err_is_refused() {
    let mut t = setup(1024);
    t.a().modify_qp_state(QA, QpState::Reset).unwrap();
    assert_eq!(t.a().modify_qp_state(QA, QpState::Err), Err(PostError::InvalidState));
    assert_eq!(t.a().qp(QA).unwrap().state(), QpState::Reset);
    t.a().modify_qp_state(QA, QpState::Init).unwrap();
    t.a().modify_qp_state(QA, QpState::Err).unwrap();
    assert_eq!(t.a().qp(QA).unwrap().state(), QpState::Err);
}
