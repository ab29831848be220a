//! Send queue doorbells at the completer (hm_rc_compl): a doorbell only moves its QP's
//! producer index, without a turn of the completer's FSM, unless its QP is in ERR (its WQEs
//! must then be flushed). These tests ring a doorbell per WQE on many QPs while the completer
//! is busy with their ACKs and start records, and while some of the QPs go to ERR, and check
//! what must hold: every WQE completes exactly once, in order, with the status the transport
//! rules give it (success, the error, WR_FLUSH_ERR after it), and the host's doorbells are
//! not held back by the completer.
mod common;

use common::pairs::{by_qp, qpn, BUF, DST, LEN};
use hematite_model::transport::{SendOp, SendWr, Sge, WcStatus};
use hematite_sim::dma::MemCfg;
use hematite_sim::duo::{DuoBench, WireFaults};
use std::collections::BTreeMap;

fn bench(qps: u32, faults: WireFaults) -> (DuoBench, u32, u32) {
    let mem = MemCfg { latency: 100, seed: 9, ..Default::default() };
    common::pairs::bench(mem, faults, qps, |i| (i * 13 + 7) as u8)
}

/// `qps` QPs, `rounds` rounds of one signaled WRITE per QP, each with its own doorbell and a
/// pseudo-random pause of 0..`pause` cycles after it, so doorbells reach the completer in every
/// state of its work on the same and other QPs. Every fourth QP (index 1, 5, ...) has its
/// WRITE of round `bad_round` aimed past the end of the peer's region: the peer answers with
/// a remote access error NAK, the QP goes to ERR, and every later WRITE, posted before and
/// after that, completes with WR_FLUSH_ERR (the later ones through doorbells of a QP in ERR).
fn run_rounds(qps: u32, rounds: u64, bad_round: u64, pause: u32, faults: WireFaults) {
    let (mut d, k0, k1) = bench(qps, faults);
    let mut want: BTreeMap<u32, Vec<(u64, WcStatus)>> = BTreeMap::new();
    let mut good = Vec::new();
    let mut lcg = 0x2545_F491u32;
    for j in 0..rounds {
        for q in 0..qps {
            let id = j * qps as u64 + q as u64;
            let failing = q % 4 == 1;
            let (raddr, st) = if failing && j == bad_round {
                (BUF + LEN - 8, WcStatus::RemAccessErr)
            } else if failing && j > bad_round {
                (DST + id * 0x1000, WcStatus::WrFlushErr)
            } else {
                (DST + id * 0x1000, WcStatus::Success)
            };
            let len = [64u32, 200, 8, 1500][(id % 4) as usize];
            let wr = SendWr::new(id, SendOp::Write { remote_addr: raddr, rkey: k1 }, vec![Sge { addr: BUF + (id % 64) * 0x1000, len, lkey: k0 }]);
            d.h[0].post_send(qpn(q), &wr, true).unwrap();
            want.entry(qpn(q)).or_default().push((id, st));
            if st == WcStatus::Success {
                good.push((id, len));
            }
            lcg = lcg.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            for _ in 0..(lcg >> 16) % pause {
                d.tick().unwrap();
            }
        }
    }
    let n = (qps as u64 * rounds) as usize;
    if let Err(e) = d.run(3_000_000, |d| d.h[0].cqes.len() >= n) {
        panic!("waiting for {n} CQEs: {e}: {:?}", by_qp(&d));
    }
    // one more WRITE on every QP, rung when all is quiet: the failing QPs' are flushed by
    // their doorbell's own turn (nothing else is left to do it)
    for q in 0..qps {
        let id = rounds * qps as u64 + q as u64;
        let wr = SendWr::new(id, SendOp::Write { remote_addr: DST + id * 0x1000, rkey: k1 }, vec![Sge { addr: BUF, len: 64, lkey: k0 }]);
        d.h[0].post_send(qpn(q), &wr, true).unwrap();
        let st = if q % 4 == 1 { WcStatus::WrFlushErr } else { WcStatus::Success };
        want.entry(qpn(q)).or_default().push((id, st));
        if st == WcStatus::Success {
            good.push((id, 64));
        }
    }
    let n = n + qps as usize;
    if let Err(e) = d.run(3_000_000, |d| d.h[0].cqes.len() >= n) {
        panic!("waiting for {n} CQEs: {e}: {:?}", by_qp(&d));
    }
    // nothing more comes (no WQE completes twice)
    for _ in 0..20_000 {
        d.tick().unwrap();
    }
    assert_eq!(by_qp(&d), want);
    for (id, len) in good {
        let src = d.h[0].eng.mem.mem.read(BUF + (id % 64) * 0x1000, len as usize);
        assert_eq!(d.h[1].eng.mem.mem.read(DST + id * 0x1000, len as usize), src, "WRITE {id} ({len} bytes)");
    }
    assert!(d.h[0].eng.violations().is_empty(), "AXI: {:?}", d.h[0].eng.violations());
}

#[test]
fn a_doorbell_per_wqe_on_many_qps_some_failing_completes_every_wqe_once_in_order() {
    run_rounds(32, 8, 2, 8, WireFaults::default());
    // spread over the time the failing QPs' NAKs come back
    run_rounds(16, 8, 1, 64, WireFaults::default());
}

#[test]
fn the_same_with_loss_and_the_error_in_the_first_round() {
    // rewinds and timeouts on the way; the failing QPs fail at their first WQE, while the
    // doorbells of their later WQEs arrive
    run_rounds(24, 6, 0, 32, WireFaults { drop_ppm: 20_000, ..WireFaults::default() });
}

#[test]
fn doorbells_rung_back_to_back_are_taken_one_per_cycle_or_so() {
    // 256 QPs with one WRITE posted each, the doorbells rung as fast as the host can, while
    // the completer is busy with nothing else: before the fast path each took a turn of the
    // completer's FSM (about 32 cycles apiece once its FIFO was full)
    let qps = 256u32;
    let (mut d, k0, k1) = bench(qps, WireFaults::default());
    for q in 0..qps {
        let id = q as u64;
        let wr = SendWr::new(id, SendOp::Write { remote_addr: DST + id * 0x1000, rkey: k1 }, vec![Sge { addr: BUF, len: 64, lkey: k0 }]);
        d.h[0].post_send(qpn(q), &wr, false).unwrap();
    }
    let t0 = d.h[0].eng.cycle();
    for q in 0..qps {
        d.h[0].doorbell(qpn(q)).unwrap();
    }
    let took = d.h[0].eng.cycle() - t0;
    eprintln!("{qps} doorbells: {took} cycles");
    assert!(took <= 4 * qps as u64, "{qps} doorbells took {took} cycles");
    d.run(2_000_000, |d| d.h[0].cqes.len() >= qps as usize).unwrap();
    assert!(d.h[0].cqes.iter().all(|c| c.cqe.status == WcStatus::Success));
}

/// One QP: a WRITE the peer refuses (remote access error), then a second WRITE rung `delay`
/// cycles after the first. Returns the QP's completions and the cycle of the first CQE.
fn fail_then_post(delay: u64) -> (Vec<(u64, WcStatus)>, u64) {
    let (mut d, k0, k1) = bench(1, WireFaults::default());
    let bad = SendWr::new(1, SendOp::Write { remote_addr: BUF + LEN - 8, rkey: k1 }, vec![Sge { addr: BUF, len: 64, lkey: k0 }]);
    d.h[0].post_send(qpn(0), &bad, true).unwrap();
    let t0 = d.h[0].eng.cycle();
    if delay != u64::MAX {
        while d.h[0].eng.cycle() < t0 + delay {
            d.tick().unwrap();
        }
        let late = SendWr::new(2, SendOp::Write { remote_addr: DST, rkey: k1 }, vec![Sge { addr: BUF, len: 64, lkey: k0 }]);
        d.h[0].post_send(qpn(0), &late, true).unwrap();
    }
    let want = if delay == u64::MAX { 1 } else { 2 };
    d.run(200_000, |d| d.h[0].cqes.len() >= want).unwrap_or_else(|e| panic!("delay {delay}: {e}: {:?}", by_qp(&d)));
    let first = d.h[0].cqes[0].cycle - t0;
    (by_qp(&d).remove(&qpn(0)).unwrap_or_default(), first)
}

#[test]
fn a_wqe_rung_while_its_qp_fails_is_flushed_whatever_the_cycle() {
    // the doorbell of WQE 2 is swept across the completer's handling of WQE 1's error NAK
    // (the turn that moves the QP to ERR and flushes what is posted): before it (the turn
    // flushes WQE 2), inside it (the turn must learn of the new producer index), in the
    // cycles the ERR bit is saved (the doorbell must still get its own turn), and after it
    let (alone, t_err) = fail_then_post(u64::MAX);
    assert_eq!(alone, vec![(1, WcStatus::RemAccessErr)]);
    for delay in t_err.saturating_sub(90)..t_err + 12 {
        let (got, _) = fail_then_post(delay);
        assert_eq!(got, vec![(1, WcStatus::RemAccessErr), (2, WcStatus::WrFlushErr)], "WQE 2 rung {delay} cycles after WQE 1 (its CQE at {t_err})");
    }
}

/// One QP with nothing outstanding is moved to ERR by the control plane (`HM_CTL_POST`
/// QP_ERR, which reaches the requester, the responder and the completer at once; the
/// completer's ERR event turn flushes what is posted) and a WRITE's doorbell is written
/// `offset` cycles from that post (negative: before it); both writes start without waiting.
/// Returns the QP's completions.
fn event_and_post(offset: i64) -> Vec<(u64, WcStatus)> {
    use hematite_sim::eng::{LiteOp, Port};
    let (mut d, k0, k1) = bench(1, WireFaults::default());
    let q = qpn(0);
    let wr = SendWr::new(7, SendOp::Write { remote_addr: DST, rkey: k1 }, vec![Sge { addr: BUF, len: 64, lkey: k0 }]);
    d.h[0].post_send(q, &wr, false).unwrap();
    let db = LiteOp::Write { addr: hematite_sim::csr::regs::HM_REG_DB_SQ, data: d.h[0].sq_doorbell_word(q).unwrap(), strb: 0xF };
    let post = LiteOp::Write { addr: hematite_abi::regs::HM_CTL_POST, data: 1u32 << 28 | q, strb: 0xF };
    let (first, second, gap) = if offset < 0 { ((Port::Bar, db), (Port::Ctl, post), -offset) } else { ((Port::Ctl, post), (Port::Bar, db), offset) };
    d.h[0].eng.lite_start(first.0, first.1);
    for _ in 0..gap {
        d.tick().unwrap();
    }
    d.h[0].eng.lite_start(second.0, second.1);
    let _ = d.run(100_000, |d| !d.h[0].cqes.is_empty());
    for _ in 0..5_000 {
        d.tick().unwrap();
    }
    by_qp(&d).remove(&q).unwrap_or_default()
}

#[test]
fn a_wqe_rung_around_a_control_plane_err_completes_once() {
    // swept cycle by cycle across the ERR event's turn: a doorbell that leaves the stage while
    // the turn holds the QP with its ERR bit set but not yet saved (the last cycle of the
    // flush, or the save) must still get a turn of its own, or the WQE never completes.
    // Rung before the event, the WQE may also have been sent and acknowledged: then it
    // completes with success.
    for offset in -24i64..24 {
        let got = event_and_post(offset);
        assert!(
            got == vec![(7, WcStatus::WrFlushErr)] || (offset < 0 && got == vec![(7, WcStatus::Success)]),
            "WRITE rung {offset} cycles from the QP_ERR post: {got:?}"
        );
    }
}
