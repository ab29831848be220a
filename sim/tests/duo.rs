//! Two engines back to back through a faulty frame-level wire (hematite_sim::duo): random
//! operation mixes on several QPs in both directions; every CQE of both hosts and every byte of
//! both memories must equal what the transport model predicts on a lossless link. One run
//! writes its pcap and checks that tshark decodes every frame as RoCEv2 (InfiniBand BTH).
use hematite_model::transport::mem::MrAccess;
use hematite_model::transport::{QpConfig, RecvWr, SendOp, SendWr, Sge};
use hematite_sim::dma::MemCfg;
use hematite_sim::duo::{DuoBench, WireFaults};
use hematite_sim::Rng;
use proptest::prelude::*;

const BUF: u64 = 0x10_0000;
const LEN: u64 = 0x20_0000;
// Per host: [0, 0x2_0000) SEND/WRITE sources and [0x4_0000, 0x5_0000) READ sources, never
// written; then per QP k a region at 0x10_0000 + k * 0x4_0000 for what that QP writes: the
// peer's WRITE targets (+0), READ targets (+0x1_8000), receive buffers (+0x2_8000), atomic
// results (+0x3_8000) and atomic targets (+0x3_C000). Accesses of one QP are ordered; two QPs
// touching the same bytes would have no defined result, so they never do.
fn qreg(k: u64) -> u64 {
    BUF + 0x10_0000 + k * 0x4_0000
}

struct Duo {
    d: DuoBench,
    key: [u32; 2],
    qps: Vec<(u32, u32)>,
}

fn setup(seed: u64, faults: WireFaults, pmtu: u32, nqp: u32) -> Duo {
    let mut d = DuoBench::new(MemCfg { latency: 80, seed, ..Default::default() }, faults).unwrap();
    let mut rng = Rng::new(seed);
    let mut key = [0; 2];
    for h in 0..2 {
        let data: Vec<u8> = (0..LEN).map(|_| rng.next() as u8).collect();
        d.h[h].fill(BUF, &data);
        key[h] = d.h[h].reg_mr(1, BUF, LEN, MrAccess::ALL).unwrap().lkey;
    }
    let mut qps = Vec::new();
    for k in 0..nqp {
        let cfg = QpConfig { pmtu, sq_psn: (seed as u32).wrapping_mul(k + 1) & 0xFF_FFFF, rq_psn: (k * 0x1111) & 0xFF_FFFF, timeout: 3, ..Default::default() };
        let (q0, q1) = (10 + k, 200 + k);
        d.connect(q0, q1, cfg, 0).unwrap();
        qps.push((q0, q1));
    }
    Duo { d, key, qps }
}

/// A random work request from host `h` on its QP pair number `k` (buffers laid out as above).
fn random_wr(rng: &mut Rng, key: [u32; 2], h: usize, k: u64, n: u64, recv_slot: &mut [[u64; 4]; 2], d: &mut DuoBench, peer_q: u32) -> SendWr {
    let (l, r) = (key[h], key[1 - h]);
    let a = rng.next() % 0x1_0000;
    let b = rng.next() % 0x1_0000;
    let len = (rng.next() % 9000) as u32;
    let id = (h as u64) << 32 | k << 16 | n;
    let q = qreg(k);
    match rng.next() % 7 {
        0 | 1 => SendWr::new(id, SendOp::Write { remote_addr: q + b, rkey: r }, vec![Sge::new(BUF + a, len, l)]),
        2 => {
            let slot = recv_slot[1 - h][k as usize] % 16;
            recv_slot[1 - h][k as usize] += 1;
            d.h[1 - h].post_recv(peer_q, &RecvWr { wr_id: 7000 + slot, sgl: vec![Sge::new(q + 0x2_8000 + slot * 0x1000, 0x1000, r)] }).unwrap();
            SendWr::new(id, SendOp::SendImm(n as u32), vec![Sge::new(BUF + a, len % 0x1000, l)])
        }
        3 => SendWr::new(id, SendOp::Read { remote_addr: BUF + 0x4_0000 + (b & 0x7FFF), rkey: r }, vec![Sge::new(q + 0x1_8000 + (a & 0x7FFF), len.min(0x8000), l)]),
        4 => SendWr::new(id, SendOp::FetchAdd { remote_addr: q + 0x3_C000 + (b & 0x7F8), rkey: r, add: n }, vec![Sge::new(q + 0x3_8000 + (a & 0x3FF8), 8, l)]),
        5 => SendWr::new(id, SendOp::CmpSwap { remote_addr: q + 0x3_C800 + (b & 0x7F8), rkey: r, compare: 0, swap: n }, vec![Sge::new(q + 0x3_8000 + (a & 0x3FF8), 8, l)]),
        _ => {
            let slot = recv_slot[1 - h][k as usize] % 16;
            recv_slot[1 - h][k as usize] += 1;
            d.h[1 - h].post_recv(peer_q, &RecvWr { wr_id: 8000 + slot, sgl: vec![Sge::new(q + 0x2_8000 + slot * 0x1000, 0x800, r), Sge::new(q + 0x2_8800 + slot * 0x1000, 0x800, r)] }).unwrap();
            // the message fits the 4 KiB receive WQE: a responder error here would race with
            // the other direction's requests, whose outcome then depends on timing (the error
            // paths have their own tests in rc_resp.rs and rc_peer.rs)
            SendWr::new(id, SendOp::Send, vec![Sge::new(BUF + a, len % (0x1000 - 7), l), Sge::new(BUF + b, 7, l)])
        }
    }
}

fn exercise(seed: u64, faults: WireFaults, pmtu: u32, nqp: u32, per_qp: u64) -> Duo {
    let mut u = setup(seed, faults, pmtu, nqp);
    let mut rng = Rng::new(seed ^ 0x1234);
    let mut slots = [[0u64; 4]; 2];
    for n in 0..per_qp {
        for (k, &(q0, q1)) in u.qps.clone().iter().enumerate() {
            for h in 0..2 {
                let (mine, peer) = if h == 0 { (q0, q1) } else { (q1, q0) };
                let wr = random_wr(&mut rng, u.key, h, k as u64, n, &mut slots, &mut u.d, peer);
                u.d.h[h].post_send(mine, &wr, true).unwrap();
            }
        }
    }
    u.d.run_reference();
    let want: Vec<_> = (0..2).map(|h| {
        let mut s = Vec::new();
        let mut r = Vec::new();
        for &(q0, q1) in &u.qps {
            let q = if h == 0 { q0 } else { q1 };
            s.extend(u.d.h[h].refn.poll_send_cq(q));
            r.extend(u.d.h[h].refn.poll_recv_cq(q));
        }
        (s.len() + r.len(), s, r)
    }).collect();
    let (n0, n1) = (want[0].0, want[1].0);
    let res = u.d.run(1_500_000, |d| d.h[0].cqes.len() >= n0 && d.h[1].cqes.len() >= n1);
    assert!(res.is_ok(), "seed {seed}: {res:?}");
    for h in 0..2 {
        let (got_r, got_s) = u.d.h[h].split_cqes();
        // per QP order is defined; across QPs the engine may interleave differently
        for &(q0, q1) in &u.qps {
            let q = if h == 0 { q0 } else { q1 };
            let gs: Vec<_> = got_s.iter().filter(|c| c.qpn == q).copied().collect();
            let ws: Vec<_> = want[h].1.iter().filter(|c| c.qpn == q).copied().collect();
            assert_eq!(gs, ws, "seed {seed}: host {h} QP {q} send CQEs (wire {:?})", u.d.count);
            let gr: Vec<_> = got_r.iter().filter(|c| c.qpn == q).copied().collect();
            let wr: Vec<_> = want[h].2.iter().filter(|c| c.qpn == q).copied().collect();
            assert_eq!(gr, wr, "seed {seed}: host {h} QP {q} receive CQEs");
        }
        if let Some(a) = u.d.h[h].mem_diff(BUF, LEN as usize) {
            panic!("seed {seed}: host {h} memory differs first at {a:#x} (wire {:?})", u.d.count);
        }
        assert!(u.d.h[h].eng.violations().is_empty(), "AXI: {:?}", u.d.h[h].eng.violations());
        per_qp_counters_add_up(&mut u, h, seed);
    }
    u
}

/// Every per-QP counter, summed over the QPs, equals its port counter: each event was
/// counted once, for some QP, also when events for one QP come back to back.
fn per_qp_counters_add_up(u: &mut Duo, h: usize, seed: u64) {
    use hematite_abi::pkt as k;
    let e = &mut u.d.h[h].eng;
    let mut sum = vec![0u64; k::HM_QPC_COUNT as usize];
    for &(q0, q1) in &u.qps {
        let q = if h == 0 { q0 } else { q1 };
        for (i, v) in e.qp_counters(q as u16).unwrap().into_iter().enumerate() {
            sum[i] += v as u64;
        }
    }
    let port = |e: &mut hematite_sim::eng::Engine, i: u32| e.counter(i as u16).unwrap() as u64;
    let cqe_err: u64 = (0..k::HM_CQE_ERR_STATUSES).map(|s| port(e, k::HM_CNT_CQE_ERR_BASE + s)).sum();
    let want = [
        (k::HM_QPC_REQ_PKTS_TX, port(e, k::HM_CNT_REQ_PKTS)),
        (k::HM_QPC_REQS_RX, port(e, k::HM_CNT_REQS_RX)),
        (k::HM_QPC_RETRIES, port(e, k::HM_CNT_RETRIES)),
        (k::HM_QPC_ACK_TIMEOUTS, port(e, k::HM_CNT_ACK_TIMEOUTS)),
        (k::HM_QPC_SEQ_NAKS_RX, port(e, k::HM_CNT_SEQ_NAKS_RX)),
        (k::HM_QPC_RNR_NAKS_RX, port(e, k::HM_CNT_RNR_NAKS_RX)),
        (k::HM_QPC_OOS_RX, port(e, k::HM_CNT_OOS_RX)),
        (k::HM_QPC_DUP_REQS, port(e, k::HM_CNT_DUP_REQS)),
        (k::HM_QPC_CQE_ERR, cqe_err),
        (k::HM_QPC_CNP_RX, port(e, k::HM_CNT_CNP_RX)),
    ];
    for (i, w) in want {
        assert_eq!(sum[i as usize], w, "seed {seed}: host {h}: per-QP counter {i} summed over the QPs vs the port's");
    }
    assert!(sum.iter().sum::<u64>() > 0, "traffic was counted");
    assert_eq!(port(e, k::HM_CNT_QPC_LOST), 0, "no per-QP event lost");
}

#[test]
fn two_engines_lossless_with_pcap() {
    let u = exercise(7, WireFaults::default(), 1024, 2, 6);
    // build/engine_duo.pcap at the repository root: the test command checks its ICRCs with
    // the independent checker afterwards
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../build");
    std::fs::create_dir_all(&dir).unwrap();
    let pcap = dir.join("engine_duo.pcap");
    u.d.write_pcap(&pcap).unwrap();
    assert!(u.d.wire.len() > 50, "a real exchange: {} frames", u.d.wire.len());
    // every frame decodes in tshark as RoCEv2 (UDP 4791 -> InfiniBand BTH); the test command
    // installs tshark, and its absence is a failure, not a pass
    let out = std::process::Command::new("tshark")
        .args(["-r"])
        .arg(&pcap)
        .args(["-T", "fields", "-e", "infiniband.bth.opcode"])
        .output()
        .unwrap_or_else(|e| panic!("tshark cannot run ({e}): apt-get install tshark (./hematite test installs it)"));
    let text = String::from_utf8_lossy(&out.stdout);
    let decoded = text.lines().filter(|l| !l.trim().is_empty()).count();
    assert!(out.status.success(), "tshark failed: {}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(decoded, u.d.wire.len(), "tshark decoded {decoded} of {} frames as InfiniBand", u.d.wire.len());
}

#[test]
fn two_engines_under_loss_corruption_duplication_and_reordering() {
    let f = WireFaults { drop_ppm: 10_000, corrupt_ppm: 5_000, dup_ppm: 10_000, delay_ppm: 10_000, max_extra: 3_000, latency: 100 };
    let u = exercise(11, f, 1024, 3, 5);
    assert!(u.d.count.dropped + u.d.count.corrupted > 0, "faults happened: {:?}", u.d.count);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: hematite_sim::proptest_cases(24), failure_persistence: None, ..ProptestConfig::default() })]
    #[test]
    fn random_mixes_and_fault_schedules(
        seed in any::<u64>(),
        pmtu_code in 1u32..6,
        drop in 0u32..30_000, corrupt in 0u32..10_000, dup in 0u32..20_000, delay in 0u32..20_000,
        nqp in 1u32..5,
    ) {
        let f = WireFaults { drop_ppm: drop, corrupt_ppm: corrupt, dup_ppm: dup, delay_ppm: delay, max_extra: 4_000, latency: 50 + seed % 200 };
        let _ = exercise(seed, f, 128 << pmtu_code, nqp, 4);
    }
}


#[test]
fn a_full_batch_of_small_writes() {
    // 200 WRITEs posted before one doorbell: several 4 KiB WQE batches, the last signaled
    let mut u = setup(3, WireFaults::default(), 4096, 1);
    let (q0, _) = u.qps[0];
    for i in 0..200u64 {
        let mut wr = SendWr::new(i, SendOp::Write { remote_addr: qreg(0) + i * 64, rkey: u.key[1] }, vec![Sge::new(BUF + (i % 16) * 0x1000, 64, u.key[0])]);
        wr.signaled = i == 199;
        u.d.h[0].post_send(q0, &wr, false).unwrap();
    }
    u.d.h[0].doorbell(q0).unwrap();
    let r = u.d.run(200_000, |d| !d.h[0].cqes.is_empty());
    assert!(r.is_ok(), "{r:?}: frames sent {}", u.d.h[0].eng.tx.len());
    u.d.run_reference();
    assert_eq!(u.d.h[0].split_cqes().1, u.d.h[0].refn.poll_send_cq(q0));
    assert_eq!(u.d.h[1].mem_diff(BUF, LEN as usize), None);
}

#[test]
fn back_to_back_small_writes_get_coalesced_acks_and_fast_retirement() {
    // 192 8-byte WRITEs, every 16th signaled, with a READ every 64: the responder chains the
    // in-order WRITE Onlys of the QP and leaves an ACK to the next waiting request; the
    // completer retires the unsignaled ones from its WQE window and the signaled ones and
    // READs through its general path. CQEs and memory must still equal the model's.
    let mut u = setup(5, WireFaults::default(), 4096, 1);
    let (q0, _) = u.qps[0];
    let n = 192u64;
    for i in 0..n {
        let op = if i % 64 == 63 {
            SendOp::Read { remote_addr: BUF + 0x4_0000 + i * 8, rkey: u.key[1] }
        } else {
            SendOp::Write { remote_addr: qreg(0) + i * 8, rkey: u.key[1] }
        };
        let dst = if i % 64 == 63 { qreg(0) + 0x1_8000 + i * 8 } else { BUF + i * 8 };
        let mut wr = SendWr::new(i, op, vec![Sge::new(dst, 8, u.key[0])]);
        wr.signaled = i % 16 == 15;
        u.d.h[0].post_send(q0, &wr, false).unwrap();
    }
    u.d.h[0].doorbell(q0).unwrap();
    let r = u.d.run(400_000, |d| d.h[0].cqes.len() == (n / 16) as usize);
    assert!(r.is_ok(), "{r:?}: CQEs {}", u.d.h[0].cqes.len());
    u.d.run_reference();
    assert_eq!(u.d.h[0].split_cqes().1, u.d.h[0].refn.poll_send_cq(q0));
    assert_eq!(u.d.h[1].mem_diff(BUF, LEN as usize), None);
    assert_eq!(u.d.h[0].mem_diff(BUF, LEN as usize), None);
    // counters: requests received, responses sent (ACKs and READ responses)
    let reqs = u.d.h[1].eng.counter(hematite_abi::pkt::HM_CNT_REQS_RX as u16).unwrap();
    let sent = u.d.h[1].eng.counter(hematite_abi::pkt::HM_CNT_RESP_PKTS as u16).unwrap();
    assert_eq!(reqs, n as u32, "requests the responder executed");
    assert!(sent < n as u32 && sent >= 3, "responses sent: {sent} for {n} requests (ACKs coalesced, 3 READ responses)");
    // per-QP counters, with events for one QP a few cycles apart: every one counted
    use hematite_abi::pkt as k;
    let q1 = u.qps[0].1;
    assert_eq!(u.d.h[0].eng.qp_counters(q0 as u16).unwrap()[k::HM_QPC_REQ_PKTS_TX as usize], n as u32, "requests sent by QP {q0}");
    assert_eq!(u.d.h[1].eng.qp_counters(q1 as u16).unwrap()[k::HM_QPC_REQS_RX as usize], n as u32, "requests received by QP {q1}");
    for h in 0..2 {
        per_qp_counters_add_up(&mut u, h, 5);
    }
}
