//! Property test: random operation mixes on several QPs (both directions) under random fault
//! schedules must leave memory equal to a fault-free expectation computed by applying the
//! operations directly, complete every WQE exactly once with success, and never execute a
//! SEND/WRITE packet or an atomic twice; with go-back-N and with selective repeat.

mod common;

use hematite_model::transport::mem::MrAccess;
use hematite_model::transport::qp::ExecKind;
use hematite_model::transport::sim::{FaultConfig, Sim};
use hematite_model::transport::*;
use proptest::prelude::*;
use std::collections::{BTreeMap, HashSet};

const BASE: u64 = 0x100_0000;
const BLOCK: u64 = 0x10_0000; // per (qp, direction)
const SRC: u64 = 0; // requester: random source bytes (64 KiB)
const WTGT: u64 = 0x1_0000; // responder: WRITE target (64 KiB)
const RECV: u64 = 0x2_0000; // responder: receive buffers, 16 KiB each
const RSRC: u64 = 0x6_0000; // responder: READ source (64 KiB)
const RTGT: u64 = 0x7_0000; // requester: READ targets, 16 KiB each
const ATOM: u64 = 0xB_0000; // responder: 4 atomic slots
const ARES: u64 = 0xB_1000; // requester: atomic results
const SLOT: u64 = 0x4000;
const MAXLEN: usize = 9000;

#[derive(Debug, Clone)]
enum Op {
    Send { off: u16, len: usize, imm: Option<u32> },
    Write { off: u16, roff: u16, len: usize, imm: Option<u32> },
    Read { roff: u16, len: usize },
    Cas { slot: u8, hit: bool, swap: u64 },
    Faa { slot: u8, add: u64 },
}

fn op() -> impl Strategy<Value = Op> {
    let len = prop_oneof![Just(0usize), 1usize..300, 1usize..MAXLEN];
    prop_oneof![
        (any::<u16>(), len.clone(), proptest::option::of(any::<u32>())).prop_map(|(off, len, imm)| Op::Send { off, len, imm }),
        (any::<u16>(), any::<u16>(), len.clone(), proptest::option::of(any::<u32>()))
            .prop_map(|(off, roff, len, imm)| Op::Write { off, roff, len, imm }),
        (any::<u16>(), len).prop_map(|(roff, len)| Op::Read { roff, len }),
        (0u8..4, any::<bool>(), any::<u64>()).prop_map(|(slot, hit, swap)| Op::Cas { slot, hit, swap }),
        (0u8..4, any::<u64>()).prop_map(|(slot, add)| Op::Faa { slot, add }),
    ]
}

fn fill(seed: u64, len: usize) -> Vec<u8> {
    common::xorshift_bytes(seed, len, 11)
}

/// Flat reference memory.
#[derive(Default)]
struct RefMem(BTreeMap<u64, u8>);
impl RefMem {
    fn write(&mut self, a: u64, d: &[u8]) {
        for (i, b) in d.iter().enumerate() {
            self.0.insert(a + i as u64, *b);
        }
    }
    fn read(&self, a: u64, n: usize) -> Vec<u8> {
        (0..n).map(|i| *self.0.get(&(a + i as u64)).unwrap_or(&0)).collect()
    }
}

fn clampl(off: u16, len: usize) -> (u64, usize) {
    let off = off as u64 % 0x8000;
    (off, len.min(0x1_0000 - off as usize))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, max_shrink_iters: 200, ..ProptestConfig::default() })]
    #[test]
    fn random_ops_under_faults(
        ops in proptest::collection::vec((0usize..3, any::<bool>(), any::<bool>(), op()), 1..24),
        pmtu_i in 0usize..3,
        wrap in any::<bool>(),
        drop in 0u32..50_000, dup in 0u32..50_000, reorder in 0u32..50_000, corrupt in 0u32..20_000,
        max_reorder in 1u64..20_000, seed in any::<u64>(), sr in any::<bool>(),
    ) {
        let pmtu = [256u32, 1024, 4096][pmtu_i];
        let mut nodes = [Node::new(), Node::new()];
        let mut refm = [RefMem::default(), RefMem::default()];
        let mut keys = [0u32; 2];
        for (n, node) in nodes.iter_mut().enumerate() {
            keys[n] = node.reg_mr(1, BASE, 6 * BLOCK, MrAccess::ALL).unwrap().lkey;
            for q in 0..3u64 {
                for dir in 0..2u64 {
                    let blk = BASE + (q * 2 + dir) * BLOCK;
                    for area in [SRC, RSRC] {
                        let d = fill(seed ^ (q << 8) ^ (dir << 4) ^ area ^ n as u64, 0x1_0000);
                        node.mem.write(blk + area, &d);
                        refm[n].write(blk + area, &d);
                    }
                }
            }
        }
        // QP pair q: node0 qpn 0x100+q <-> node1 qpn 0x200+q
        for q in 0..3u32 {
            let psn0 = if wrap { 0xFF_FFF0 - q * 7 } else { q * 1000 };
            let psn1 = if wrap { 0xFF_FFE0 + q } else { 77 + q };
            let base = QpConfig { pmtu, timeout: 10, retry_cnt: 7, rnr_retry: 7, sr, ..QpConfig::default() };
            let c0 = QpConfig { dest_qpn: 0x200 + q, sq_psn: psn0, rq_psn: psn1, ..base };
            let c1 = QpConfig { dest_qpn: 0x100 + q, sq_psn: psn1, rq_psn: psn0, av: base.av.reversed(), ..base };
            nodes[0].create_qp(0x100 + q, c0).unwrap();
            nodes[1].create_qp(0x200 + q, c1).unwrap();
        }
        let qpn = |n: usize, q: usize| if n == 0 { 0x100 + q as u32 } else { 0x200 + q as u32 };
        let mut want_send: BTreeMap<(usize, u32), Vec<Cqe>> = BTreeMap::new();
        let mut want_recv: BTreeMap<(usize, u32), Vec<Cqe>> = BTreeMap::new();
        let mut counters = [[0u64; 2]; 3]; // recv / read slots per (q,dir)
        let mut aslot = [[0u64; 2]; 3];
        for (i, (q, dir, signaled, op)) in ops.iter().enumerate() {
            let (r, s) = if *dir { (1usize, 0usize) } else { (0, 1) };
            let d = *dir as u64;
            let blk = BASE + (*q as u64 * 2 + d) * BLOCK;
            let rq = qpn(r, *q);
            let sq = qpn(s, *q);
            let (kr, ks) = (keys[r], keys[s]);
            let cnt = &mut counters[*q][*dir as usize];
            let id = i as u64 + 1;
            let (wr_op, sgl, wop, blen) = match op {
                Op::Send { off, len, imm } => {
                    let (o, l) = clampl(*off, *len);
                    let data = refm[r].read(blk + SRC + o, l);
                    let rb = blk + RECV + *cnt * SLOT;
                    *cnt += 1;
                    // receive SGL split in two
                    let h = (SLOT / 3) as u32;
                    nodes[s].post_recv(sq, RecvWr { wr_id: id, sgl: vec![
                        Sge { addr: rb, len: h, lkey: ks }, Sge { addr: rb + h as u64 + 16, len: SLOT as u32 - h - 16, lkey: ks }] }).unwrap();
                    let split = (h as usize).min(data.len());
                    refm[s].write(rb, &data[..split]);
                    refm[s].write(rb + h as u64 + 16, &data[split..]);
                    want_recv.entry((s, sq)).or_default().push(Cqe { wr_id: id, status: WcStatus::Success, opcode: WcOpcode::Recv,
                        byte_len: l as u32, imm: *imm, invalidated_rkey: None, qpn: sq });
                    let h2 = l / 2;
                    let sgl = vec![Sge { addr: blk + SRC + o, len: h2 as u32, lkey: kr }, Sge { addr: blk + SRC + o + h2 as u64, len: (l - h2) as u32, lkey: kr }];
                    (imm.map_or(SendOp::Send, SendOp::SendImm), sgl, WcOpcode::Send, l)
                }
                Op::Write { off, roff, len, imm } => {
                    let (o, l) = clampl(*off, *len);
                    let (ro, l) = clampl(*roff, l);
                    let data = refm[r].read(blk + SRC + o, l);
                    refm[s].write(blk + WTGT + ro, &data);
                    let ra = blk + WTGT + ro;
                    let op = match imm {
                        Some(v) => {
                            nodes[s].post_recv(sq, RecvWr { wr_id: id, sgl: vec![] }).unwrap();
                            want_recv.entry((s, sq)).or_default().push(Cqe { wr_id: id, status: WcStatus::Success,
                                opcode: WcOpcode::RecvRdmaWithImm, byte_len: l as u32, imm: Some(*v), invalidated_rkey: None, qpn: sq });
                            SendOp::WriteImm { remote_addr: ra, rkey: ks, imm: *v }
                        }
                        None => SendOp::Write { remote_addr: ra, rkey: ks },
                    };
                    (op, vec![Sge { addr: blk + SRC + o, len: l as u32, lkey: kr }], WcOpcode::RdmaWrite, l)
                }
                Op::Read { roff, len } => {
                    let (ro, l) = clampl(*roff, *len);
                    let l = l.min(SLOT as usize);
                    let data = refm[s].read(blk + RSRC + ro, l);
                    let la = blk + RTGT + *cnt * SLOT;
                    *cnt += 1;
                    refm[r].write(la, &data);
                    let h = l / 3;
                    let sgl = vec![Sge { addr: la, len: h as u32, lkey: kr }, Sge { addr: la + h as u64, len: (l - h) as u32, lkey: kr }];
                    (SendOp::Read { remote_addr: blk + RSRC + ro, rkey: ks }, sgl, WcOpcode::RdmaRead, l)
                }
                Op::Cas { slot, hit, swap } => {
                    let ra = blk + ATOM + *slot as u64 * 8;
                    let cur = u64::from_le_bytes(refm[s].read(ra, 8).try_into().unwrap());
                    let compare = if *hit { cur } else { cur ^ 1 };
                    if *hit { refm[s].write(ra, &swap.to_le_bytes()); }
                    let la = blk + ARES + aslot[*q][*dir as usize] * 8;
                    aslot[*q][*dir as usize] += 1;
                    refm[r].write(la, &cur.to_le_bytes());
                    (SendOp::CmpSwap { remote_addr: ra, rkey: ks, compare, swap: *swap }, vec![Sge { addr: la, len: 8, lkey: kr }], WcOpcode::CmpSwap, 8)
                }
                Op::Faa { slot, add } => {
                    let ra = blk + ATOM + *slot as u64 * 8;
                    let cur = u64::from_le_bytes(refm[s].read(ra, 8).try_into().unwrap());
                    refm[s].write(ra, &cur.wrapping_add(*add).to_le_bytes());
                    let la = blk + ARES + aslot[*q][*dir as usize] * 8;
                    aslot[*q][*dir as usize] += 1;
                    refm[r].write(la, &cur.to_le_bytes());
                    (SendOp::FetchAdd { remote_addr: ra, rkey: ks, add: *add }, vec![Sge { addr: la, len: 8, lkey: kr }], WcOpcode::FetchAdd, 8)
                }
            };
            let mut wr = SendWr::new(id, wr_op, sgl);
            wr.signaled = *signaled;
            nodes[r].post_send(rq, wr).unwrap();
            if *signaled {
                want_send.entry((r, rq)).or_default().push(Cqe { wr_id: id, status: WcStatus::Success, opcode: wop,
                    byte_len: blen as u32, imm: None, invalidated_rkey: None, qpn: rq });
            }
        }
        let faults = FaultConfig { drop_ppm: drop, dup_ppm: dup, reorder_ppm: reorder, corrupt_ppm: corrupt,
            max_reorder_ns: max_reorder, latency_ns: 1000 };
        let [a, b] = nodes;
        let mut sim = Sim::new(a, b, seed, faults);
        prop_assert!(sim.run_until_idle(60_000_000_000), "not idle");
        let empty: Vec<Cqe> = Vec::new();
        for n in 0..2 {
            for q in 0..3 {
                let qn = qpn(n, q);
                let qp = sim.nodes[n].qp(qn).unwrap().clone();
                if qp.state() != QpState::Rts {
                    let st = *qp.stats();
                    let sc = sim.nodes[n].poll_send_cq(qn);
                    let rc = sim.nodes[n].poll_recv_cq(qn);
                    prop_assert!(false, "node {} qp {:#x} in ERR: {:?}\nsend {:?}\nrecv {:?}", n, qn, st, sc, rc);
                }
                prop_assert_eq!(qp.sq_len(), 0);
                prop_assert_eq!(qp.rq_len(), 0);
                let sc = sim.nodes[n].poll_send_cq(qn);
                prop_assert_eq!(&sc, want_send.get(&(n, qn)).unwrap_or(&empty));
                let rc = sim.nodes[n].poll_recv_cq(qn);
                prop_assert_eq!(&rc, want_recv.get(&(n, qn)).unwrap_or(&empty));
            }
            let mut seen = HashSet::new();
            for e in sim.nodes[n].exec_log() {
                if matches!(e.kind, ExecKind::Send | ExecKind::Write | ExecKind::Atomic) {
                    prop_assert!(seen.insert((e.qpn, e.psn)), "executed twice: {:?}", e);
                }
            }
            for (&a, &v) in &refm[n].0 {
                if sim.nodes[n].mem.read(a, 1)[0] != v {
                    prop_assert!(false, "node {} mem mismatch at {:#x}", n, a);
                }
            }
        }
    }
}
