//! The transport engine's requester (rtl/eng/hm_rc_engine.sv) against the reference model:
//! WQEs written into a send-queue ring in simulated host memory, a doorbell through the BAR,
//! and every frame the engine transmits compared byte for byte with the frame the model's
//! requester produces for the same work requests (built by `build_frame`). Completions are
//! checked against a model peer in rc_peer.rs.
use hematite_model::desc::{self, QpCtxFields};
use hematite_abi::regs;
use hematite_model::transport::mem::{Mr, MrAccess};
use hematite_model::transport::{Node, QpConfig, SendOp, SendWr, Sge};
use hematite_model::build_frame;
use hematite_sim::dma::MemCfg;
use hematite_sim::eng::Engine;
use hematite_sim::Rng;
use proptest::prelude::*;

const SQ_BASE: u64 = 0x1_0000;
const SQ_LOG: u8 = 6;
const BUF: u64 = 0x10_0000;
const BUF_LEN: u64 = 0x10_0000;

struct Tb {
    eng: Engine,
    node: Node,
    mr: Mr,
    stride: usize,
    pi: std::collections::HashMap<u32, u16>,
    cfgs: std::collections::HashMap<u32, QpConfig>,
}

fn ctl_cmd_word(op: u8, table: u8, flags: u8, index: u16) -> u32 {
    desc::encode_ctl_cmd(op, table, flags, index).unwrap()
}

impl Tb {
    fn new(seed: u64, latency: u64) -> Tb {
        let mut eng = Engine::new(MemCfg { latency, seed, ..Default::default() });
        let mut node = Node::new();
        let mr = node.reg_mr(1, BUF, BUF_LEN, MrAccess::ALL).unwrap();
        let st = eng
            .ctl_cmd(ctl_cmd_word(desc::HM_CTL_OP_WRITE, desc::HM_CTL_TBL_MR, 0, (mr.lkey >> 8) as u16), &desc::encode_mr_ctx(&mr, true).unwrap())
            .unwrap();
        assert_eq!(st, desc::HM_CTL_ST_OK);
        // the same random bytes in both memories
        let mut rng = Rng::new(seed);
        let data: Vec<u8> = (0..BUF_LEN).map(|_| rng.next() as u8).collect();
        eng.mem.mem.write(BUF, &data);
        node.mem.write(BUF, &data);
        Tb { eng, node, mr, stride: 64, pi: Default::default(), cfgs: Default::default() }
    }

    fn sq_base(qpn: u32) -> u64 {
        SQ_BASE + qpn as u64 * 0x1_0000
    }

    fn add_qp(&mut self, qpn: u32, pmtu: u32, sq_psn: u32, stride_log: u8) {
        let cfg = QpConfig { pmtu, dest_qpn: 0x300 + qpn, sq_psn, max_rd_atomic: 15, ..Default::default() };
        self.node.create_qp(qpn, cfg).unwrap();
        self.stride = 64 << stride_log;
        let f = QpCtxFields {
            cfg,
            state: desc::HM_QPS_RTS,
            sq_base: Self::sq_base(qpn),
            sq_log_size: SQ_LOG,
            sq_log_stride: stride_log,
            rq_base: 0x8000_0000,
            rq_log_size: 4,
            rq_log_stride: 0,
            sq_cqn: 0,
            rq_cqn: 0,
        };
        let st = self
            .eng
            .ctl_cmd(
                ctl_cmd_word(desc::HM_CTL_OP_WRITE, desc::HM_CTL_TBL_QP, desc::HM_CTL_F_LOAD_SQ | desc::HM_CTL_F_LOAD_RQ, qpn as u16),
                &desc::encode_qp_ctx(&f).unwrap(),
            )
            .unwrap();
        assert_eq!(st, desc::HM_CTL_ST_OK);
        self.pi.insert(qpn, 0);
        self.cfgs.insert(qpn, cfg);
    }

    /// Write the WQE into the ring (and post it to the model); no doorbell.
    fn post(&mut self, qpn: u32, wr: &SendWr) {
        let inline = if wr.inline {
            let mut d = Vec::new();
            for s in &wr.sgl {
                d.extend(self.node.mem.read(s.addr, s.len as usize));
            }
            Some(d)
        } else {
            None
        };
        let bytes = desc::encode_send_wqe(wr, self.stride, inline.as_deref()).unwrap();
        let pi = self.pi[&qpn];
        let slot = pi as u64 & ((1 << SQ_LOG) - 1);
        self.eng.mem.mem.write(Self::sq_base(qpn) + slot * self.stride as u64, &bytes);
        self.node.post_send(qpn, wr.clone()).unwrap();
        self.pi.insert(qpn, pi.wrapping_add(1));
    }

    /// Rings the doorbell of table entry `qpn` (this bench names QPs by entry; entries 0 and 1
    /// are QPNs 4096 and 4097 on the BAR: `hematite_abi::qp::qpn_of_entry`).
    fn doorbell(&mut self, qpn: u32) {
        let pi = self.pi[&qpn] as u32;
        let q = hematite_abi::qp::qpn_of_entry(qpn, 12);
        assert!(self.eng.bar_write(hematite_sim::csr::regs::HM_REG_DB_SQ, pi << 16 | q).unwrap());
    }

    /// Model frames per destination QP, in order.
    fn model_frames(&mut self) -> Vec<Vec<u8>> {
        self.node.poll_tx(0).iter().map(|(r, p)| build_frame(r, p).unwrap()).collect()
    }

    fn run_frames(&mut self, n: usize) {
        let r = self.eng.run_until(200_000, |e| e.tx.len() >= n);
        r.unwrap_or_else(|m| panic!("{m}"));
        // nothing more may come
        let _ = self.eng.run_until(3_000, |_| false);
        assert_eq!(self.eng.tx.len(), n, "extra frames");
        assert!(self.eng.violations().is_empty(), "AXI violations: {:?}", self.eng.violations());
    }

    /// Rings QP `qpn`'s doorbell and checks that the engine sends what the model sends for the
    /// work posted; returns the number of frames.
    fn send_and_compare(&mut self, qpn: u32) -> usize {
        self.doorbell(qpn);
        let model = self.model_frames();
        self.run_frames(model.len());
        compare(&self.eng.tx, &model);
        model.len()
    }
}

/// `wr` with its data inline in the WQE.
fn inline(mut wr: SendWr) -> SendWr {
    wr.inline = true;
    wr
}

fn compare(rtl: &[(Vec<u8>, bool)], model: &[Vec<u8>]) {
    assert_eq!(rtl.len(), model.len(), "frame count");
    for (k, ((f, aborted), m)) in rtl.iter().zip(model).enumerate() {
        assert!(!aborted, "frame {k} aborted");
        if f != m {
            let p = hematite_model::parse_frame(f);
            let q = hematite_model::parse_frame(m);
            panic!("frame {k} differs:\n rtl   {p:?}\n model {q:?}\n rtl bytes {:02x?}\n model bytes {:02x?}", &f[..f.len().min(96)], &m[..m.len().min(96)]);
        }
    }
}

fn all_ops(lkey: u32) -> Vec<SendWr> {
    let rk = 0x1234_5601;
    vec![
        SendWr::new(1, SendOp::Send, vec![]),
        SendWr::new(2, SendOp::Send, vec![Sge::new(BUF + 3, 100, lkey)]),
        SendWr::new(3, SendOp::SendImm(0xCAFE_BABE), vec![Sge::new(BUF + 0x1000, 3000, lkey)]),
        SendWr::new(4, SendOp::SendInv(0x4242_0042), vec![Sge::new(BUF + 0x2001, 1024, lkey)]),
        SendWr::new(5, SendOp::Write { remote_addr: 0xAB_0000_1000, rkey: rk }, vec![Sge::new(BUF + 0x3005, 4500, lkey)]),
        SendWr::new(6, SendOp::WriteImm { remote_addr: 0x77_0000, rkey: rk, imm: 7 }, vec![Sge::new(BUF + 0x100, 1, lkey)]),
        SendWr::new(7, SendOp::Read { remote_addr: 0x5000, rkey: rk }, vec![Sge::new(BUF + 0x8000, 10_000, lkey)]),
        SendWr::new(8, SendOp::CmpSwap { remote_addr: 0x6008, rkey: rk, compare: 1, swap: 2 }, vec![Sge::new(BUF + 0x9000, 8, lkey)]),
        SendWr::new(9, SendOp::FetchAdd { remote_addr: 0x6010, rkey: rk, add: 0x55 }, vec![Sge::new(BUF + 0x9008, 8, lkey)]),
        SendWr::new(10, SendOp::Write { remote_addr: 0x10, rkey: rk }, vec![]),
    ]
}

#[test]
fn every_request_kind_matches_the_model() {
    let mut tb = Tb::new(1, 100);
    tb.add_qp(5, 1024, 0xFF_FFF0, 0); // PSNs wrap during the run
    let lkey = tb.mr.lkey;
    let wrs = all_ops(lkey);
    for wr in &wrs {
        tb.post(5, wr);
    }
    let mut solicited = SendWr::new(11, SendOp::SendImm(9), vec![Sge::new(BUF + 0x40, 64, lkey)]);
    solicited.solicited = true;
    tb.post(5, &solicited);
    let frames = tb.send_and_compare(5);
    assert_eq!(tb.eng.counter(1).unwrap(), 11, "WQEs started");
    assert_eq!(tb.eng.counter(2).unwrap() as usize, frames, "packets");
}

#[test]
fn scatter_gather_inline_and_every_pmtu() {
    for (k, &pmtu) in [256u32, 512, 1024, 2048, 4096].iter().enumerate() {
        let mut tb = Tb::new(10 + k as u64, 60);
        tb.add_qp(1, pmtu, 100, 1); // 128-byte WQEs: up to 6 SGEs
        let lkey = tb.mr.lkey;
        // SGL with odd lengths and a zero-length element, spanning packet boundaries
        let sgl = vec![Sge::new(BUF + 1, 77, lkey), Sge::new(BUF + 0x500, 0, lkey), Sge::new(BUF + 0x903, 1000, lkey), Sge::new(BUF + 0x2002, 3333, lkey), Sge::new(BUF + 0x7000, 64, lkey), Sge::new(BUF + 0x8001, 5, lkey)];
        tb.post(1, &SendWr::new(1, SendOp::Send, sgl.clone()));
        tb.post(1, &SendWr::new(2, SendOp::Write { remote_addr: 0x1000, rkey: 9 }, sgl));
        tb.post(1, &inline(SendWr::new(3, SendOp::Send, vec![Sge::new(BUF + 0x11, 40, lkey), Sge::new(BUF + 0x300, 56, lkey)])));
        tb.post(1, &inline(SendWr::new(4, SendOp::WriteImm { remote_addr: 0x40, rkey: 9, imm: 1 }, vec![Sge::new(BUF + 0x21, 96, lkey)])));
        tb.send_and_compare(1);
    }
}

#[test]
fn large_wqes_many_sges_and_tx_backpressure() {
    let mut tb = Tb::new(20, 150);
    tb.add_qp(2, 1024, 0, 2); // 256-byte WQEs: 14 SGEs
    tb.eng.tx_stall_pct = 30;
    let lkey = tb.mr.lkey;
    let sgl: Vec<Sge> = (0..14).map(|i| Sge::new(BUF + 0x1000 * i + i * 7, 100 + 37 * i as u32, lkey)).collect();
    for r in 0..5 {
        tb.post(2, &SendWr::new(r, SendOp::Send, sgl[..(r as usize * 3 + 2).min(14)].to_vec()));
    }
    tb.post(2, &inline(SendWr::new(9, SendOp::Send, vec![Sge::new(BUF + 0x99, 224, lkey)])));
    tb.send_and_compare(2);
}

#[test]
fn qps_share_the_link_round_robin() {
    // QP 1 posts a 64-packet WRITE, QP 2 then posts ten small SENDs: QP 2 must not wait for
    // the whole WRITE (the scheduler moves on after a quantum of 16 packets).
    let mut tb = Tb::new(30, 100);
    tb.add_qp(1, 1024, 0, 0);
    tb.add_qp(2, 1024, 500, 0);
    let lkey = tb.mr.lkey;
    tb.post(1, &SendWr::new(1, SendOp::Write { remote_addr: 0, rkey: 1 }, vec![Sge::new(BUF, 65536, lkey)]));
    for r in 0..10 {
        tb.post(2, &SendWr::new(100 + r, SendOp::Send, vec![Sge::new(BUF + 64 * r, 64, lkey)]));
    }
    tb.doorbell(1);
    tb.doorbell(2);
    let mut model = tb.model_frames();
    tb.run_frames(model.len());
    // per-QP order must match the model exactly; the interleaving is the engine's
    let dest = |f: &Vec<u8>| hematite_model::parse_frame(f).unwrap().bth.dest_qp;
    let rtl: Vec<Vec<u8>> = tb.eng.tx.iter().map(|f| f.0.clone()).collect();
    for qp in [0x301u32, 0x302] {
        let a: Vec<_> = rtl.iter().filter(|f| dest(f) == qp).cloned().collect();
        let b: Vec<_> = model.iter().filter(|f| dest(f) == qp).cloned().collect();
        assert_eq!(a.len(), b.len());
        assert!(a == b, "QP {qp:#x} frames differ from the model");
    }
    let first_small = rtl.iter().position(|f| dest(f) == 0x302).unwrap();
    assert!(first_small <= 16, "QP 2 waited for {first_small} frames of QP 1");
    model.clear();
}

#[test]
fn rate_limit_input_holds_a_qp() {
    let mut tb = Tb::new(40, 50);
    tb.add_qp(3, 1024, 0, 0);
    tb.add_qp(4, 1024, 0, 0);
    let lkey = tb.mr.lkey;
    tb.eng.set_pause(3, true);
    for r in 0..4 {
        tb.post(3, &SendWr::new(r, SendOp::Send, vec![Sge::new(BUF, 10, lkey)]));
        tb.post(4, &SendWr::new(r, SendOp::Send, vec![Sge::new(BUF, 10, lkey)]));
    }
    tb.doorbell(3);
    tb.doorbell(4);
    let model = tb.model_frames();
    tb.eng.run_until(20_000, |e| e.tx.len() >= 4).unwrap();
    let _ = tb.eng.run_until(5_000, |_| false);
    assert_eq!(tb.eng.tx.len(), 4, "only the unpaused QP sends");
    tb.eng.set_pause(3, false);
    tb.run_frames(8);
    let dest = |f: &Vec<u8>| hematite_model::parse_frame(f).unwrap().bth.dest_qp;
    let rtl3: Vec<_> = tb.eng.tx.iter().map(|f| f.0.clone()).filter(|f| dest(f) == 0x303).collect();
    let m3: Vec<_> = model.iter().filter(|f| dest(f) == 0x303).cloned().collect();
    assert_eq!(rtl3, m3);
}

#[test]
fn control_bus_and_doorbell_errors() {
    let mut tb = Tb::new(60, 20);
    // out-of-range QP index, unknown table, read op (not supported yet)
    let st = tb.eng.ctl_cmd(ctl_cmd_word(desc::HM_CTL_OP_WRITE, desc::HM_CTL_TBL_QP, 0, 0xFFFF), &[0; 4]).unwrap();
    assert_eq!(st, desc::HM_CTL_ST_RANGE);
    let st = tb.eng.ctl_cmd(ctl_cmd_word(desc::HM_CTL_OP_WRITE, 9, 0, 0), &[]).unwrap();
    assert_eq!(st, desc::HM_CTL_ST_BAD_CMD);
    let st = tb.eng.ctl_cmd(ctl_cmd_word(desc::HM_CTL_OP_WRITE, desc::HM_CTL_TBL_CQ, 0, 0x1000), &[]).unwrap();
    assert_eq!(st, desc::HM_CTL_ST_RANGE);
    let st = tb.eng.ctl_cmd(ctl_cmd_word(desc::HM_CTL_OP_READ, desc::HM_CTL_TBL_QP, 0, 1), &[]).unwrap();
    assert_eq!(st, desc::HM_CTL_ST_BAD_CMD);
    // bad control-bus accesses answer SLVERR
    assert!(!tb.eng.ctl_write(0x200, 1).unwrap());
    assert!(!tb.eng.ctl_read(0x10C).unwrap().1);
    assert!(!tb.eng.ctl_write(regs::HM_CTL_EQ as u16 + 2, 1).unwrap(), "unaligned");
    // HM_CTL_POST: an unknown op is refused; QP_ERR for a QPN beyond the table and an event
    // while the event queue is off are taken and dropped (STATUS is not left busy)
    let post = regs::HM_CTL_POST as u16;
    assert!(!tb.eng.ctl_write(post, 7 << 28 | 5).unwrap(), "unknown post op");
    assert!(tb.eng.ctl_write(post, (desc::HM_CTL_POST_QP_ERR as u32) << 28 | 0xFFFF).unwrap());
    assert!(tb.eng.ctl_write(post, (desc::HM_CTL_POST_EVENT as u32) << 28 | (desc::HM_EV_PORT_ERR as u32) << 16 | 1).unwrap());
    let (st, ok) = tb.eng.ctl_read(regs::HM_CTL_STATUS as u16).unwrap();
    assert!(ok && st >> 31 == 0, "posts taken: status {st:#x}");
    // the counter window: the engine's counters (as many as CAPS says), as the BAR shows them;
    // nothing beyond
    // (the control bus shows the first 64 of them)
    let n = (tb.eng.bar_read(hematite_sim::csr::regs::HM_REG_CAPS).unwrap().0 & 0xFF) as u16;
    assert_eq!(n, hematite_abi::pkt::HM_CNT_COUNT as u16, "CAPS: every HM_CNT_* counter");
    let m = n.min(64);
    let cnt = regs::HM_CTL_CNT as u16;
    let (v, ok) = tb.eng.ctl_read(cnt + 4 * (m - 1)).unwrap();
    assert!(ok);
    assert_eq!(v, tb.eng.counter(m - 1).unwrap());
    if m < 64 {
        assert!(!tb.eng.ctl_read(cnt + 4 * m).unwrap().1, "beyond the control bus's last counter");
    } // (else the window is full: the CC registers follow it)
    assert!(tb.eng.counter(n - 1).is_ok(), "the BAR's last counter");
    assert!(tb.eng.counter(n).is_err(), "beyond the BAR's last counter");
    assert!(!tb.eng.ctl_read(cnt + 2).unwrap().1, "unaligned counter read");
    assert!(!tb.eng.ctl_write(cnt, 1).unwrap(), "counters are read-only");
    // doorbells for a QPN beyond the table (4098: 4096 and 4097 are entries 0 and 1) and for
    // the reserved QPNs 0 and 1 are counted and ignored
    for q in [0x1002u32, 0, 1] {
        assert!(tb.eng.bar_write(hematite_sim::csr::regs::HM_REG_DB_SQ, 1 << 16 | q).unwrap());
        let _ = tb.eng.run_until(100, |_| false);
    }
    assert_eq!(tb.eng.counter(4).unwrap(), 3);
    // a doorbell for a QP in RESET sends nothing
    assert!(tb.eng.bar_write(hematite_sim::csr::regs::HM_REG_DB_SQ, 1 << 16 | 3).unwrap());
    let _ = tb.eng.run_until(2_000, |_| false);
    assert!(tb.eng.tx.is_empty());
}

fn arb_wr(lkey: u32) -> impl Strategy<Value = SendWr> {
    let sgl = prop::collection::vec((0u64..0xF_0000, 0u32..3000), 0..3)
        .prop_map(move |v| v.into_iter().map(|(a, l)| Sge::new(BUF + a, l, lkey)).collect::<Vec<_>>());
    (0u8..8, sgl, any::<u32>(), any::<u64>(), any::<bool>(), any::<bool>()).prop_map(move |(op, sgl, imm, x, sol, inl)| {
        let raddr = x & !7;
        let op = match op {
            0 => SendOp::Send,
            1 => SendOp::SendImm(imm),
            2 => SendOp::SendInv(imm),
            3 => SendOp::Write { remote_addr: x, rkey: imm },
            4 => SendOp::WriteImm { remote_addr: x, rkey: imm, imm: imm ^ 1 },
            5 => SendOp::Read { remote_addr: x, rkey: imm },
            6 => SendOp::CmpSwap { remote_addr: raddr, rkey: imm, compare: x, swap: !x },
            _ => SendOp::FetchAdd { remote_addr: raddr, rkey: imm, add: x },
        };
        let sgl = if op.is_atomic() { vec![Sge::new(BUF + (x & 0xFFF8), 8, lkey)] } else { sgl };
        let total: u32 = sgl.iter().map(|s| s.len).sum();
        let mut wr = SendWr::new(x, op, sgl);
        wr.solicited = sol;
        wr.inline = inl && total <= 32 && !op.is_rd_atomic();
        wr
    })
}

/// The window (HM_WIN_MAX): with nothing acknowledged the requester sends the first
/// HM_WIN_MAX PSNs and stops; the last packet before the limit asks for an ACK. Here the limit
/// falls inside a 1 MiB WRITE, off its 64-packet AckReq grid (a 10-packet WRITE goes first).
#[test]
fn the_window_stops_the_requester_at_its_limit() {
    let win = hematite_model::transport::WIN_MAX as usize;
    let mut tb = Tb::new(31, 100);
    tb.add_qp(1, 1024, 0xFF_FF00, 0); // the limit lies beyond a PSN wrap
    let lkey = tb.mr.lkey;
    tb.post(1, &SendWr::new(1, SendOp::Write { remote_addr: 0, rkey: 1 }, vec![Sge::new(BUF, 10 << 10, lkey)]));
    tb.post(1, &SendWr::new(2, SendOp::Write { remote_addr: 0, rkey: 1 }, vec![Sge::new(BUF, 1 << 20, lkey)]));
    assert_eq!(tb.send_and_compare(1), win, "HM_WIN_MAX frames, then nothing");
    let last = hematite_model::parse_frame(&tb.eng.tx[win - 1].0).unwrap();
    assert!(last.bth.ackreq && (win - 1 - 10) % 64 != 63, "the edge asks for an ACK");
    assert_eq!(last.bth.psn, (0xFF_FF00 + win as u32 - 1) & 0xFF_FFFF);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: hematite_sim::proptest_cases(24), failure_persistence: None, ..ProptestConfig::default() })]
    #[test]
    fn random_work_requests_match_the_model(
        wrs in prop::collection::vec(arb_wr(0), 1..10),
        pmtu_code in 1u32..6,
        psn in 0u32..0x100_0000,
        seed in any::<u64>(),
    ) {
        let mut tb = Tb::new(seed, 20 + seed % 200);
        tb.add_qp(9, 128 << pmtu_code, psn, 0);
        let lkey = tb.mr.lkey;
        for wr in &wrs {
            let mut w = wr.clone();
            for s in &mut w.sgl { s.lkey = lkey; }
            tb.post(9, &w);
        }
        tb.send_and_compare(9);
    }
}
