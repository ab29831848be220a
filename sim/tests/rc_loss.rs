//! Go-back-N in the engine: the wire between the engine and the model peer loses frames (in
//! both directions, seeded), and every transfer must still complete exactly as the lossless
//! reference says: same CQEs, same bytes in both hosts' memories. Also: retry exhaustion when
//! the peer disappears, and RNR retry exhaustion.
use hematite_model::transport::{QpConfig, RecvWr, SendOp, SendWr, Sge, WcStatus};
use hematite_sim::dma::MemCfg;
use hematite_sim::rc::{RcBench, RcSetup as Setup, A_BUF, B_BUF};
use hematite_sim::Rng;
use hematite_abi::{desc as d, pkt as k};
use proptest::prelude::*;

const QA: u32 = 2;
const QB: u32 = 0x33;

fn setup(seed: u64, pmtu: u32, cfg: QpConfig) -> Setup {
    let mut s = RcBench::with_regions(MemCfg { latency: 60, seed, ..Default::default() }, seed ^ 0x77).unwrap();
    let cfg = QpConfig { pmtu, sq_psn: 0xFF_FFF0, rq_psn: 0x10, timeout: 3, ..cfg };
    s.b.connect(QA, QB, cfg, cfg, 0).unwrap();
    s
}

fn compare(s: &mut Setup) {
    let (recv, send) = s.b.split_cqes();
    assert_eq!(send, s.b.a.refn.poll_send_cq(QA), "engine send CQEs");
    assert_eq!(recv, s.b.a.refn.poll_recv_cq(QA), "engine receive CQEs");
    assert_eq!(s.b.peer.poll_send_cq(QB), s.b.ref_b.poll_send_cq(QB), "peer send CQEs");
    assert_eq!(s.b.peer.poll_recv_cq(QB), s.b.ref_b.poll_recv_cq(QB), "peer receive CQEs");
    s.b.compare_memories().unwrap_or_else(|e| panic!("{e}"));
    assert!(s.b.a.eng.violations().is_empty(), "AXI: {:?}", s.b.a.eng.violations());
}

/// Both directions at once: the engine requests (WRITE / READ / SEND / atomics) while the
/// peer sends to the engine, over a wire that loses `ppm` per million frames.
fn lossy_mix(seed: u64, pmtu: u32, ppm: u32, n: usize) -> u64 {
    let mut s = setup(seed, pmtu, QpConfig::default());
    s.b.drop_ppm = ppm;
    let (ka, kb) = (s.ka, s.kb);
    let mut rng = Rng::new(seed);
    for k in 0..n as u64 {
        let a = rng.next() % 0x8000;
        let bo = rng.next() % 0x8000;
        let len = (rng.next() % 6000) as u32;
        let wr = match k % 6 {
            0 | 1 => SendWr::new(k, SendOp::Write { remote_addr: B_BUF + bo, rkey: kb }, vec![Sge::new(A_BUF + a, len, ka)]),
            2 => SendWr::new(k, SendOp::Read { remote_addr: B_BUF + 0x1_0000 + bo, rkey: kb }, vec![Sge::new(A_BUF + 0x1_0000 + a, len, ka)]),
            3 => SendWr::new(k, SendOp::FetchAdd { remote_addr: B_BUF + 0x3_0000 + (bo & !7), rkey: kb, add: k }, vec![Sge::new(A_BUF + 0x3_0000 + (a & !7), 8, ka)]),
            4 => {
                s.b.post_recv_b(QB, &RecvWr { wr_id: 100 + k, sgl: vec![Sge::new(B_BUF + 0x2_0000 + (k % 8) * 0x2000, 0x2000, kb)] }).unwrap();
                SendWr::new(k, SendOp::Send, vec![Sge::new(A_BUF + a, len.min(0x2000), ka)])
            }
            _ => SendWr::new(k, SendOp::CmpSwap { remote_addr: B_BUF + 0x3_8000 + (bo & 0x7F8), rkey: kb, compare: 0, swap: k }, vec![Sge::new(A_BUF + 0x3_8000 + (a & 0x7F8), 8, ka)]),
        };
        s.b.post_send(QA, &wr, true).unwrap();
        // the peer writes into A's second half and reads from it
        // (its source is B memory nobody writes: the engine's WRITEs into B race with it)
        let pw = SendWr::new(1000 + k, SendOp::Write { remote_addr: A_BUF + 0x2_0000 + bo, rkey: ka }, vec![Sge::new(B_BUF + 0x1_0000 + a, len, kb)]);
        s.b.post_send_b(QB, &pw).unwrap();
    }
    s.b.run_reference();
    let want = s.b.a.refn.poll_send_cq(QA);
    let r = s.b.run(want.len(), 3_000_000);
    let cnt = |s: &mut Setup| (24..26).map(|i| s.b.a.eng.counter(i).unwrap()).collect::<Vec<_>>();
    let c = cnt(&mut s);
    assert!(r.is_ok(), "seed {seed} ppm {ppm}: {r:?} (dropped {}, retries/timeouts {c:?})", s.b.dropped);
    let (_, send) = s.b.split_cqes();
    if send != want && std::env::var_os("DBG_WIRE").is_some() {
        for (t, from_eng, f) in &s.b.wire {
            if let Some((r, _)) = hematite_sim::rc::decode(f) {
                eprintln!("W {t} {} op {:#04x} psn {:#x} syn {:#x} len {}", if *from_eng { "A>" } else { "<B" }, r.opcode, r.psn, r.syndrome, r.payload_len);
            }
        }
    }
    assert_eq!(send, want, "seed {seed}: engine send CQEs (dropped {}, retries/timeouts {c:?})", s.b.dropped);
    let (got_r, _) = s.b.split_cqes();
    assert_eq!(got_r, s.b.a.refn.poll_recv_cq(QA));
    assert_eq!(s.b.peer.poll_send_cq(QB), s.b.ref_b.poll_send_cq(QB), "seed {seed}: peer send CQEs");
    assert_eq!(s.b.peer.poll_recv_cq(QB), s.b.ref_b.poll_recv_cq(QB), "seed {seed}: peer receive CQEs");
    if let Err(e) = s.b.compare_memories() {
        panic!("seed {seed}: {e} (dropped {})", s.b.dropped);
    }
    s.b.dropped
}

#[test]
fn one_percent_loss_both_directions() {
    let lost = lossy_mix(1, 1024, 10_000, 24);
    assert!(lost > 0, "this seed loses frames");
}

#[test]
fn five_percent_loss_small_mtu() {
    let lost = lossy_mix(2, 256, 50_000, 18);
    assert!(lost > 10, "this seed loses frames: {lost}");
}

#[test]
fn retry_exhaustion_when_the_peer_is_gone() {
    let cfg = QpConfig { retry_cnt: 2, ..QpConfig::default() };
    let mut s = setup(3, 1024, cfg);
    s.b.drop_ppm = 1_000_000;
    let (ka, kb) = (s.ka, s.kb);
    s.b.post_send(QA, &SendWr::new(1, SendOp::Write { remote_addr: B_BUF, rkey: kb }, vec![Sge::new(A_BUF, 100, ka)]), false).unwrap();
    s.b.post_send(QA, &SendWr::new(2, SendOp::Send, vec![]), true).unwrap();
    s.b.run(2, 1_000_000).unwrap();
    let st: Vec<(u64, WcStatus)> = s.b.a.cqes.iter().map(|c| (c.cqe.wr_id, c.cqe.status)).collect();
    assert_eq!(st, vec![(1, WcStatus::RetryExcErr), (2, WcStatus::WrFlushErr)]);
    // the first transmission plus retry_cnt retransmissions, then nothing
    let writes = s.b.wire.iter().filter(|w| w.0 > 0 && w.1).count();
    assert_eq!(writes, 2 * 3, "frames sent: {writes}");
    assert_eq!(s.b.a.eng.counter(25).unwrap(), 3, "timeouts");
    // the counters (docs/counters.md) against the wire log and the CQEs
    let c = |s: &mut Setup, i: u32| s.b.a.eng.counter(i as u16).unwrap();
    let sent: Vec<usize> = s.b.wire.iter().filter(|w| w.1).map(|w| w.2.len()).collect();
    assert_eq!(c(&mut s, k::HM_CNT_TX_FRAMES) as usize, sent.len(), "frames transmitted");
    assert_eq!(c(&mut s, k::HM_CNT_TX_BYTES) as usize, sent.iter().sum::<usize>(), "bytes transmitted");
    assert_eq!(c(&mut s, k::HM_CNT_RX_BYTES), 0, "every frame was lost");
    assert_eq!(c(&mut s, k::HM_CNT_CQE_ERR_BASE + d::HM_CQE_ST_RETRY_EXC_ERR as u32 - 1), 1, "RETRY_EXC_ERR CQEs");
    assert_eq!(c(&mut s, k::HM_CNT_CQE_ERR_BASE + d::HM_CQE_ST_WR_FLUSH_ERR as u32 - 1), 1, "WR_FLUSH_ERR CQEs");
    assert_eq!(c(&mut s, k::HM_CNT_CQE_ERR_RQ), 0, "no receive queue error CQE");
    // the QP's own counters: 6 packets, 3 timeouts, 2 retries, 2 error CQEs; another QP's
    // are zero, and a QPN beyond the table reads zeros
    let q = s.b.a.eng.qp_counters(QA as u16).unwrap();
    let at = |i: u32| q[i as usize];
    assert_eq!(
        (at(k::HM_QPC_REQ_PKTS_TX), at(k::HM_QPC_ACK_TIMEOUTS), at(k::HM_QPC_RETRIES), at(k::HM_QPC_CQE_ERR), at(k::HM_QPC_REQS_RX)),
        (6, 3, 2, 2, 0),
        "QP {QA}: {q:?}"
    );
    assert!(s.b.a.eng.qp_counters(QA as u16 + 1).unwrap().iter().all(|&v| v == 0));
    assert!(s.b.a.eng.qp_counters(0xFFFF).unwrap().iter().all(|&v| v == 0));
}

#[test]
fn rnr_retry_exhaustion() {
    let cfg = QpConfig { rnr_retry: 2, min_rnr_timer: 1, ..QpConfig::default() };
    let mut s = setup(4, 1024, cfg);
    let (ka, _kb) = (s.ka, s.kb);
    // the peer never posts a receive
    s.b.post_send(QA, &SendWr::new(1, SendOp::Send, vec![Sge::new(A_BUF, 100, ka)]), true).unwrap();
    s.b.run_reference();
    s.b.run(1, 1_000_000).unwrap();
    compare(&mut s);
    let st: Vec<WcStatus> = s.b.a.cqes.iter().map(|c| c.cqe.status).collect();
    assert_eq!(st, vec![WcStatus::RnrRetryExcErr]);
    // RNR NAKs on the wire (none is lost here) against the counters
    let rnr = s.b.wire.iter().filter(|w| !w.1).filter_map(|w| hematite_sim::rc::decode(&w.2)).filter(|p| p.0.opcode == 0x11 && p.0.syndrome >> 5 == 1).count();
    assert_eq!(rnr, 3, "the first try and rnr_retry 2 retries are RNR NAKed");
    let c = |s: &mut Setup, i: u32| s.b.a.eng.counter(i as u16).unwrap();
    assert_eq!(c(&mut s, k::HM_CNT_RNR_NAKS_RX) as usize, rnr, "RNR NAKs received");
    assert_eq!(c(&mut s, k::HM_CNT_SEQ_NAKS_RX), 0, "no sequence NAK");
    assert_eq!(c(&mut s, k::HM_CNT_CQE_ERR_BASE + d::HM_CQE_ST_RNR_RETRY_EXC_ERR as u32 - 1), 1, "RNR_RETRY_EXC_ERR CQEs");
    let rx: usize = s.b.wire.iter().filter(|w| !w.1).map(|w| w.2.len()).sum();
    assert_eq!(c(&mut s, k::HM_CNT_RX_BYTES) as usize, rx, "bytes received");
}

#[test]
fn rnr_wait_then_success() {
    let mut s = setup(5, 1024, QpConfig { min_rnr_timer: 1, ..QpConfig::default() });
    let (ka, kb) = (s.ka, s.kb);
    s.b.post_send(QA, &SendWr::new(1, SendOp::Send, vec![Sge::new(A_BUF, 100, ka)]), true).unwrap();
    let _ = s.b.run(1, 4_000);
    s.b.post_recv_b(QB, &RecvWr { wr_id: 9, sgl: vec![Sge::new(B_BUF, 0x1000, kb)] }).unwrap();
    s.b.run(1, 400_000).unwrap();
    let st: Vec<WcStatus> = s.b.a.cqes.iter().map(|c| c.cqe.status).collect();
    assert_eq!(st, vec![WcStatus::Success]);
    assert_eq!(s.b.peer.mem.read(B_BUF, 100), s.b.a.eng.mem.mem.read(A_BUF, 100));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: hematite_sim::proptest_cases(16), failure_persistence: None, ..ProptestConfig::default() })]
    #[test]
    fn random_loss_schedules(seed in any::<u64>(), pmtu_code in 1u32..6, ppm in 0u32..60_000) {
        let _ = lossy_mix(seed, 128 << pmtu_code, ppm, 12);
    }
}



/// Adaptive retransmission in the engine (hm_pkg HM_RTO_*): one WRITE completes (its round
/// trip is timed), then a second WRITE loses its last packet. With nothing more to start, the
/// early timer is the tail-loss probe (2 SRTT, at least HM_PTO_MIN_US = 1,000 cycles): the
/// engine resends from the oldest unacknowledged PSN and the WRITE completes long before the
/// standard timeout (262 us = 65,536 cycles at timeout 6), with no retry used. With the QP's
/// std_timer bit the same loss waits for the standard timeout. Both end as the lossless
/// reference says.
#[test]
fn a_lost_tail_is_resent_after_the_probe_time() {
    let mut took = Vec::new();
    for std_timer in [false, true] {
        let cfg = QpConfig { timeout: 6, std_timer, ..QpConfig::default() };
        let mut s = RcBench::with_regions(MemCfg { latency: 60, seed: 5, ..Default::default() }, 5).unwrap();
        let cfg = QpConfig { pmtu: 1024, sq_psn: 0x10, rq_psn: 0x20, ..cfg };
        s.b.connect(QA, QB, cfg, cfg, 0).unwrap();
        let (ka, kb) = (s.ka, s.kb);
        let w = |i: u64| SendWr::new(i, SendOp::Write { remote_addr: B_BUF + i * 0x1000, rkey: kb }, vec![Sge::new(A_BUF + i * 0x1000, 4096, ka)]);
        s.b.post_send(QA, &w(1), true).unwrap();
        s.b.run(1, 100_000).unwrap();
        // the second WRITE's four frames are engine frames 4..7: the last one is lost
        s.b.drop_tx = vec![7];
        let t0 = s.b.a.eng.cycle();
        s.b.post_send(QA, &w(2), true).unwrap();
        s.b.run(2, 200_000).unwrap();
        let done = s.b.a.cqes[1].cycle - t0;
        s.b.run_reference();
        compare(&mut s);
        let c = |s: &mut Setup, i: u32| s.b.a.eng.counter(i as u16).unwrap();
        let got = (c(&mut s, k::HM_CNT_EARLY_RETX), c(&mut s, k::HM_CNT_RETRIES), c(&mut s, k::HM_CNT_ACK_TIMEOUTS));
        assert_eq!(got, if std_timer { (0, 1, 1) } else { (1, 0, 0) }, "std_timer {std_timer}: early, retries, timeouts");
        took.push(done);
    }
    assert!(took[0] < 10_000, "adaptive: the tail resent after {} cycles", took[0]);
    assert!(took[1] >= 65_536, "standard: {} cycles", took[1]);
    println!("a lost tail packet: {} cycles doorbell to CQE with the adaptive timer, {} with the standard one", took[0], took[1]);
}
