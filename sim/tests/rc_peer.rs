//! The engine as RC requester against the transport model as responder (hematite_sim::rc):
//! every send CQE the engine writes into its CQ ring, and every byte of both hosts' memory,
//! must equal what the model predicts when it runs both sides itself.
use hematite_model::desc;
use hematite_abi::regs;
use hematite_model::transport::mem::MrAccess;
use hematite_model::transport::{Cqe, QpConfig, RecvWr, SendOp, SendWr, Sge, WcStatus};
use hematite_sim::dma::MemCfg;
use hematite_sim::rc::{with_keys, RcBench, RcSetup as Setup, A_BUF, B_BUF, REGION_LEN as LEN};
use proptest::prelude::*;

fn setup(seed: u64, pmtu: u32, latency: u64) -> Setup {
    let mut s = RcBench::with_regions(MemCfg { latency, seed, ..Default::default() }, seed).unwrap();
    let cfg = QpConfig { pmtu, sq_psn: 0xFF_FF00, rq_psn: 77, max_rd_atomic: 15, max_dest_rd_atomic: 15, ..Default::default() };
    s.b.connect(3, 0x44, cfg, cfg, 1).unwrap();
    s
}

/// Runs both worlds and compares completions and memories.
fn check(s: &mut Setup, n_cqes: usize) {
    let cyc = s.b.run(n_cqes, 400_000).unwrap_or_else(|e| panic!("{e}"));
    s.b.run_reference();
    let want: Vec<Cqe> = s.b.ref_send_cqes(3);
    let got: Vec<Cqe> = s.b.a.cqes.iter().map(|c| c.cqe).collect();
    assert_eq!(got, want, "send CQEs (engine vs model) after {cyc} cycles");
    s.b.compare_memories().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(s.b.peer.poll_recv_cq(0x44), s.b.ref_b.poll_recv_cq(0x44), "peer receive CQEs");
    assert!(s.b.a.eng.violations().is_empty(), "AXI: {:?}", s.b.a.eng.violations());
}

#[test]
fn every_operation_completes_like_the_model() {
    let mut s = setup(1, 1024, 100);
    let (l, r) = (s.ka, s.kb);
    for k in 0..3 {
        s.b.post_recv_b(0x44, &RecvWr { wr_id: 900 + k, sgl: vec![Sge::new(B_BUF + 0x3_0000 + k * 0x2000, 0x2000, s.kb)] }).unwrap();
    }
    let wrs = vec![
        SendWr::new(1, SendOp::Send, vec![Sge::new(A_BUF + 5, 3000, l)]),
        SendWr::new(2, SendOp::Write { remote_addr: B_BUF + 0x100, rkey: r }, vec![Sge::new(A_BUF + 0x1000, 5000, l)]),
        SendWr::new(3, SendOp::Read { remote_addr: B_BUF + 0x8003, rkey: r }, vec![Sge::new(A_BUF + 0x8000, 3000, l), Sge::new(A_BUF + 0x9101, 1100, l)]),
        SendWr::new(4, SendOp::CmpSwap { remote_addr: B_BUF + 0x10, rkey: r, compare: 0, swap: 5 }, vec![Sge::new(A_BUF + 0xA000, 8, l)]),
        SendWr::new(5, SendOp::FetchAdd { remote_addr: B_BUF + 0x18, rkey: r, add: 0x1111 }, vec![Sge::new(A_BUF + 0xA008, 8, l)]),
        SendWr::new(6, SendOp::WriteImm { remote_addr: B_BUF + 0x2_0000, rkey: r, imm: 0xABCD }, vec![Sge::new(A_BUF + 0x2_0000, 100, l)]),
        SendWr::new(7, SendOp::SendImm(0x1234), vec![]),
        SendWr::new(8, SendOp::Read { remote_addr: B_BUF + 0x1_0000, rkey: r }, vec![Sge::new(A_BUF + 0x1_0000, 0, l)]),
    ];
    for wr in &wrs {
        s.b.post_send(3, wr, false).unwrap();
    }
    s.b.doorbell(3).unwrap();
    check(&mut s, wrs.len());
}

#[test]
fn unsignaled_wqes_complete_silently() {
    let mut s = setup(2, 512, 60);
    let (l, r) = (s.ka, s.kb);
    for k in 0..6u64 {
        let mut wr = SendWr::new(k, SendOp::Write { remote_addr: B_BUF + k * 0x800, rkey: r }, vec![Sge::new(A_BUF + k * 0x900, 700, l)]);
        wr.signaled = k % 3 == 2;
        s.b.post_send(3, &wr, true).unwrap();
    }
    check(&mut s, 2);
    assert_eq!(s.b.a.cqes.iter().map(|c| c.wqe_index).collect::<Vec<_>>(), vec![2, 5]);
}

#[test]
fn remote_access_error_fails_the_wqe_and_flushes_the_rest() {
    let mut s = setup(3, 1024, 50);
    let (l, r) = (s.ka, s.kb);
    s.b.post_send(3, &SendWr::new(1, SendOp::Write { remote_addr: B_BUF, rkey: r }, vec![Sge::new(A_BUF, 64, l)]), false).unwrap();
    s.b.post_send(3, &SendWr::new(2, SendOp::Write { remote_addr: B_BUF + LEN - 8, rkey: r }, vec![Sge::new(A_BUF, 64, l)]), false).unwrap();
    s.b.post_send(3, &SendWr::new(3, SendOp::Read { remote_addr: B_BUF, rkey: r }, vec![Sge::new(A_BUF + 0x100, 64, l)]), false).unwrap();
    s.b.post_send(3, &SendWr::new(4, SendOp::Send, vec![Sge::new(A_BUF, 64, l)]), true).unwrap();
    check(&mut s, 4);
    let st: Vec<WcStatus> = s.b.a.cqes.iter().map(|c| c.cqe.status).collect();
    assert_eq!(st, vec![WcStatus::Success, WcStatus::RemAccessErr, WcStatus::WrFlushErr, WcStatus::WrFlushErr]);
    // posted after the error: flushed too
    s.b.post_send(3, &SendWr::new(5, SendOp::Send, vec![]), true).unwrap();
    s.b.run(5, 100_000).unwrap();
    assert_eq!(s.b.a.cqes[4].cqe.status, WcStatus::WrFlushErr);
    assert_eq!(s.b.a.cqes[4].cqe.wr_id, 5);
}

#[test]
fn local_errors_complete_in_order_with_the_model_status() {
    type Case = (&'static str, fn(u32, u32) -> SendWr);
    let cases: Vec<Case> = vec![
        ("bad lkey", |l, _| SendWr::new(50, SendOp::Send, vec![Sge::new(A_BUF, 10, l ^ 0x100)])),
        ("stale tag", |l, _| SendWr::new(50, SendOp::Send, vec![Sge::new(A_BUF, 10, l ^ 1)])),
        ("out of bounds", |l, r| SendWr::new(50, SendOp::Write { remote_addr: B_BUF, rkey: r }, vec![Sge::new(A_BUF + LEN - 4, 10, l)])),
        ("misaligned atomic", |l, r| SendWr::new(50, SendOp::FetchAdd { remote_addr: B_BUF + 4, rkey: r, add: 1 }, vec![Sge::new(A_BUF, 8, l)])),
        ("atomic SGE of 4 bytes", |l, r| SendWr::new(50, SendOp::CmpSwap { remote_addr: B_BUF, rkey: r, compare: 0, swap: 0 }, vec![Sge::new(A_BUF, 4, l)])),
    ];
    for (name, mk) in cases {
        let mut s = setup(4, 1024, 40);
        let (l, r) = (s.ka, s.kb);
        s.b.post_send(3, &SendWr::new(1, SendOp::Write { remote_addr: B_BUF, rkey: r }, vec![Sge::new(A_BUF, 3000, l)]), false).unwrap();
        s.b.post_send(3, &mk(l, r), false).unwrap();
        s.b.post_send(3, &SendWr::new(2, SendOp::Send, vec![Sge::new(A_BUF, 10, l)]), true).unwrap();
        let cyc = s.b.run(3, 100_000);
        assert!(cyc.is_ok(), "{name}: {cyc:?}");
        s.b.run_reference();
        let want = s.b.ref_send_cqes(3);
        let got: Vec<Cqe> = s.b.a.cqes.iter().map(|c| c.cqe).collect();
        assert_eq!(got, want, "{name}");
        assert_eq!(s.b.a.eng.counter(3).unwrap(), 1, "{name}: local error counter");
    }
}

#[test]
fn a_deregistered_region_is_not_used_again() {
    // the requester caches the region of its last successful check; a deregistration must
    // make the same key fail at once
    let mut s = setup(6, 1024, 60);
    let (l, r) = (s.ka, s.kb);
    s.b.post_send(3, &SendWr::new(1, SendOp::Write { remote_addr: B_BUF, rkey: r }, vec![Sge::new(A_BUF, 64, l)]), true).unwrap();
    s.b.run(1, 100_000).unwrap();
    s.b.a.dereg_mr(l).unwrap();
    s.b.post_send(3, &SendWr::new(2, SendOp::Write { remote_addr: B_BUF, rkey: r }, vec![Sge::new(A_BUF, 64, l)]), true).unwrap();
    s.b.run(2, 100_000).unwrap();
    let st: Vec<WcStatus> = s.b.a.cqes.iter().map(|c| c.cqe.status).collect();
    assert_eq!(st, vec![WcStatus::Success, WcStatus::LocProtErr]);
}

#[test]
fn a_wqe_fetch_bus_error_stops_the_qp_and_sends_nothing_of_that_read() {
    // WQE slot 2 of QP 3 (128-byte WQEs) answers SLVERR: its read is marked failed as a whole
    // (the error is reported on the read's last beat), so WQEs 2 and 3, posted together, send
    // nothing; WQEs 0 and 1, read earlier, completed; the QP stops with one local error
    let slot2 = hematite_sim::host::SQ_BASE + 3 * 0x1_0000 + 2 * 128;
    let mut b = RcBench::new(MemCfg { latency: 50, seed: 9, err_ranges: vec![(slot2, slot2 + 128)], ..Default::default() }).unwrap();
    let data: Vec<u8> = (0..LEN).map(|i| (i * 13) as u8).collect();
    b.fill(true, A_BUF, &data);
    let ma = b.reg_mr(true, 1, A_BUF, LEN, MrAccess::ALL).unwrap();
    let mb = b.reg_mr(false, 1, B_BUF, LEN, MrAccess::ALL).unwrap();
    let cfg = QpConfig { pmtu: 1024, ..Default::default() };
    b.connect(3, 0x44, cfg, cfg, 1).unwrap();
    let wr = |id: u64| SendWr::new(id, SendOp::Write { remote_addr: B_BUF + id * 0x100, rkey: mb.rkey }, vec![Sge::new(A_BUF, 64, ma.lkey)]);
    b.post_send(3, &wr(0), false).unwrap();
    b.post_send(3, &wr(1), true).unwrap();
    b.run(2, 100_000).unwrap();
    let frames = b.a.eng.tx.len();
    b.post_send(3, &wr(2), false).unwrap();
    b.post_send(3, &wr(3), true).unwrap();
    let _ = b.run(3, 30_000); // no CQE can come for a WQE that could not be read
    let st: Vec<WcStatus> = b.a.cqes.iter().map(|c| c.cqe.status).collect();
    assert_eq!(st, vec![WcStatus::Success, WcStatus::Success], "only the WQEs read without error complete");
    assert_eq!(b.a.eng.tx.len(), frames, "nothing of the failed read is sent");
    assert_eq!(b.a.eng.counter(3).unwrap(), 1, "one WQE refused (fetch error)");
    assert_eq!(b.a.eng.counter(1).unwrap(), 2, "two WQEs started");
    assert!(b.a.eng.violations().is_empty(), "AXI: {:?}", b.a.eng.violations());
}

const EQ_BASE: u64 = 0x3800_0000;

/// CQ `cqn` (2^log entries at `base`) made the event queue.
fn event_queue(eng: &mut hematite_sim::eng::Engine, cqn: u16, base: u64, log: u8) {
    let words = desc::encode_cq_ctx(base, log, 5, true).unwrap();
    let cmd = desc::encode_ctl_cmd(desc::HM_CTL_OP_WRITE, desc::HM_CTL_TBL_CQ, desc::HM_CTL_F_LOAD_CQ, cqn).unwrap();
    assert_eq!(eng.ctl_cmd(cmd, &words).unwrap(), desc::HM_CTL_ST_OK);
    assert!(eng.ctl_write(regs::HM_CTL_EQ as u16, 1 << 31 | cqn as u32).unwrap());
    assert_eq!(eng.ctl_read(regs::HM_CTL_EQ as u16).unwrap(), (1 << 31 | cqn as u32, true), "HM_CTL_EQ reads back");
}

/// The event-queue entries software owns (first pass: owner bit 1).
fn events(eng: &hematite_sim::eng::Engine, base: u64, log: u8) -> Vec<desc::Event> {
    let mut out = Vec::new();
    for i in 0..1u64 << log {
        let b = eng.mem.mem.read(base + 32 * i, 32);
        if b[31] & 0x80 == 0 {
            break;
        }
        out.push(desc::decode_event(&b).unwrap_or_else(|e| panic!("event {i}: {e}")).0);
    }
    out
}

#[test]
fn a_qp_that_fails_is_reported_on_the_event_queue() {
    let mut s = setup(3, 1024, 50);
    event_queue(&mut s.b.a.eng, 1, EQ_BASE, 4);
    let (l, r) = (s.ka, s.kb);
    s.b.post_send(3, &SendWr::new(1, SendOp::Write { remote_addr: B_BUF, rkey: r }, vec![Sge::new(A_BUF, 64, l)]), false).unwrap();
    s.b.post_send(3, &SendWr::new(2, SendOp::Write { remote_addr: B_BUF + LEN - 8, rkey: r }, vec![Sge::new(A_BUF, 64, l)]), true).unwrap();
    s.b.run(2, 100_000).unwrap();
    let st: Vec<WcStatus> = s.b.a.cqes.iter().map(|c| c.cqe.status).collect();
    assert_eq!(st, vec![WcStatus::Success, WcStatus::RemAccessErr]);
    assert_eq!(events(&s.b.a.eng, EQ_BASE, 4), vec![desc::Event::QpFatal(3)]);
    // and an armed event queue interrupts with its vector
    let irqs_before = s.b.a.eng.irqs.len();
    // CQ doorbell {ci 0, arm 1 (next completion), CQ 1}: it holds an entry, so at once
    assert!(s.b.a.eng.bar_write(hematite_sim::csr::regs::HM_REG_DB_CQ, 1 << 14 | 1).unwrap());
    s.b.run(2, 2_000).unwrap();
    assert!(s.b.a.eng.irqs[irqs_before..].iter().any(|&(_, v)| v == 5), "event queue vector 5 after arming: {:?}", s.b.a.eng.irqs);
}

#[test]
fn a_full_cq_is_reported_once_on_the_event_queue() {
    // CQ 0 made 2 entries deep and never consumed: the third completion finds it full, and
    // the CQ stays in overrun
    let mut s = setup(8, 1024, 50);
    let words = desc::encode_cq_ctx(hematite_sim::host::CQ_BASE, 1, 0, true).unwrap();
    let cmd = desc::encode_ctl_cmd(desc::HM_CTL_OP_WRITE, desc::HM_CTL_TBL_CQ, desc::HM_CTL_F_LOAD_CQ, 0).unwrap();
    assert_eq!(s.b.a.eng.ctl_cmd(cmd, &words).unwrap(), desc::HM_CTL_ST_OK);
    event_queue(&mut s.b.a.eng, 1, EQ_BASE, 4);
    let (l, r) = (s.ka, s.kb);
    for i in 0..5u64 {
        s.b.post_send(3, &SendWr::new(i, SendOp::Write { remote_addr: B_BUF + i * 64, rkey: r }, vec![Sge::new(A_BUF, 64, l)]), true).unwrap();
    }
    let _ = s.b.run(5, 20_000); // only two CQEs fit
    // started, CQEs written (two completions and the event), overruns, CQEs dropped (the CQ
    // is in overrun from then on)
    let c: Vec<u32> = [1, 16, 17, 18].iter().map(|&i| s.b.a.eng.counter(i).unwrap()).collect();
    assert_eq!(c, vec![5, 3, 1, 2]);
    assert_eq!(events(&s.b.a.eng, EQ_BASE, 4), vec![desc::Event::CqOverrun(0)], "reported once");
    // and the two CQEs in the full CQ were not overwritten (a refused CQE once left its DMA
    // write request behind, and the event's data went to that address)
    let st: Vec<(u64, WcStatus)> = s.b.a.cqes.iter().map(|c| (c.cqe.wr_id, c.cqe.status)).collect();
    assert_eq!(st, vec![(0, WcStatus::Success), (1, WcStatus::Success)]);
    for i in 0..2u64 {
        let b = s.b.a.eng.mem.mem.read(hematite_sim::host::CQ_BASE + 32 * i, 32);
        assert_eq!(desc::decode_cqe(&b).unwrap().0.wr_id, i, "CQ entry {i} intact");
    }
}

#[test]
fn armed_cq_interrupts_after_the_cqe() {
    let mut s = setup(5, 1024, 80);
    let (l, r) = (s.ka, s.kb);
    // arm CQ 0 for the next completion
    assert!(s.b.a.eng.bar_write(hematite_sim::csr::regs::HM_REG_DB_CQ, 1 << 14).unwrap());
    s.b.post_send(3, &SendWr::new(1, SendOp::Write { remote_addr: B_BUF, rkey: r }, vec![Sge::new(A_BUF, 64, l)]), true).unwrap();
    check(&mut s, 1);
    assert_eq!(s.b.a.eng.irqs.len(), 1, "one interrupt: {:?}", s.b.a.eng.irqs);
    // not re-armed: the next completion raises nothing
    s.b.post_send(3, &SendWr::new(2, SendOp::Write { remote_addr: B_BUF, rkey: r }, vec![Sge::new(A_BUF, 64, l)]), true).unwrap();
    s.b.run(2, 100_000).unwrap();
    assert_eq!(s.b.a.eng.irqs.len(), 1);
    // arming while an unconsumed CQE exists (consumer index 0) signals at once
    assert!(s.b.a.eng.bar_write(hematite_sim::csr::regs::HM_REG_DB_CQ, 1 << 14).unwrap());
    s.b.a.eng.run_until(200, |_| false).ok();
    assert_eq!(s.b.a.eng.irqs.len(), 2);
    assert_eq!(desc::HM_CQE_ST_SUCCESS, 0);
}

fn arb_op(l: u32, r: u32) -> impl Strategy<Value = SendWr> {
    (0u8..8, 0u64..0x2_0000, 0u64..0x2_0000, 0u32..6000, 0u32..3, any::<u64>(), any::<bool>()).prop_map(
        move |(op, a, bo, len, nsge, x, sig)| {
            // READ / atomic targets live in [A_BUF + 0x2_0000, A_BUF + 0x4_0000), SEND / WRITE
            // sources below: without a fence the order of a later WRITE's payload fetch and an
            // earlier READ's placement is not defined, so they must not overlap
            let base = if op == 3 || op == 4 { A_BUF + 0x2_0000 } else { A_BUF };
            let sgl: Vec<Sge> = (0..nsge).map(|k| Sge::new(base + (a & 0xFFFF) + k as u64 * 0x3000, len / (nsge + 1), l)).collect();
            let raddr = B_BUF + (bo & !7);
            let op = match op {
                0 | 1 => SendOp::Write { remote_addr: B_BUF + bo, rkey: r },
                2 => SendOp::WriteImm { remote_addr: B_BUF + bo, rkey: r, imm: x as u32 },
                3 | 4 => SendOp::Read { remote_addr: B_BUF + bo, rkey: r },
                5 => SendOp::CmpSwap { remote_addr: raddr, rkey: r, compare: x & 1, swap: x },
                6 => SendOp::FetchAdd { remote_addr: raddr, rkey: r, add: x },
                _ => SendOp::Send,
            };
            let sgl = if op.is_atomic() { vec![Sge::new(A_BUF + 0x3_8000 + (a & 0x7FF8), 8, l)] } else { sgl };
            let mut wr = SendWr::new(x, op, sgl);
            wr.signaled = sig || op.is_rd_atomic();
            wr
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: hematite_sim::proptest_cases(32), failure_persistence: None, ..ProptestConfig::default() })]
    #[test]
    fn random_operation_mixes_match_the_model(
        ops in prop::collection::vec(arb_op(0, 0), 1..12),
        pmtu_code in 1u32..6,
        seed in any::<u64>(),
    ) {
        let mut s = setup(seed, 128 << pmtu_code, 30 + seed % 150);
        let (l, r) = (s.ka, s.kb);
        let mut n = 0;
        let mut sends = 0u64;
        for w in &ops {
            let w = with_keys(w.clone(), l, r);
            if matches!(w.op, SendOp::Send | SendOp::WriteImm { .. }) {
                let bl = s.kb;
                s.b.post_recv_b(0x44, &RecvWr { wr_id: 1000 + sends, sgl: vec![Sge::new(B_BUF + 0x3_0000 + sends * 0x1000, 0x1000, bl)] }).unwrap();
                sends += 1;
            }
            if w.signaled { n += 1; }
            s.b.post_send(3, &w, true).unwrap();
        }
        check(&mut s, n);
    }
}


