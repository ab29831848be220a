//! UD in the transport reference model (`hematite_model::transport::ud`): datagrams between two
//! nodes over the model's wire (every frame built, re-parsed by the receive spec and compared),
//! the GRH area, Q_Keys, the drops, the local checks and the states.

use hematite_model::transport::mem::MrAccess;
use hematite_model::transport::sim::{FaultConfig, Sim};
use hematite_model::transport::ud::*;
use hematite_model::transport::*;
use hematite_model::{classify, HdrRecord};

const UA: u32 = 0x40;
const UB: u32 = 0x51;
const BASE: u64 = 0x10_0000;
const MRLEN: u64 = 0x10_0000;
const QKEY_B: u32 = 0x1234_5678;
const QKEY_A: u32 = 0x0BAD_F00D;

fn src(ipv6: bool, mac: u64, ip4: u32) -> UdSource {
    let ip = if ipv6 { 0xfe80_0000_0000_0000_0000_0000_0000_0000u128 | ip4 as u128 } else { ip4 as u128 };
    UdSource { eth_src: mac, ipv6, ip_src: ip, udp_sport: 0xC123 }
}

struct T {
    sim: Sim,
    v6: bool,
}

fn setup(v6: bool, pmtu: u32) -> T {
    let mut a = Node::new();
    let mut b = Node::new();
    assert_eq!(a.reg_mr(1, BASE, MRLEN, MrAccess::ALL).unwrap().lkey, 1);
    assert_eq!(b.reg_mr(1, BASE, MRLEN, MrAccess::ALL).unwrap().lkey, 1);
    let ca = UdConfig { pd: 1, pmtu, qkey: QKEY_A, pkey: 0xFFFF, sq_psn: 0xFF_FFFE, src: src(v6, 0x02_00_00_00_00_0A, 0x0A00_0001) };
    let cb = UdConfig { pd: 1, pmtu, qkey: QKEY_B, pkey: 0xFFFF, sq_psn: 7, src: src(v6, 0x02_00_00_00_00_0B, 0x0A00_0002) };
    a.create_ud_qp(UA, ca).unwrap();
    b.create_ud_qp(UB, cb).unwrap();
    let mut sim = Sim::new(a, b, 1, FaultConfig::default());
    sim.record_frames(true);
    T { sim, v6 }
}

impl T {
    fn to_b(&self, qkey: u32) -> UdDest {
        let ip = if self.v6 { 0xfe80_0000_0000_0000_0000_0000_0000_0000u128 | 0x0A00_0002 } else { 0x0A00_0002 };
        UdDest { ah: Ah { eth_dst: 0x02_00_00_00_00_0B, ip_dst: ip, dscp: 26, ecn: 2, ttl: 33, flow_label: 0x12345 }, qpn: UB, qkey }
    }
    fn run(&mut self) {
        assert!(self.sim.run_until_idle(u64::MAX / 2), "did not go idle");
        assert_eq!(self.sim.frame_errors(), 0, "a frame the receive spec does not decode to its record");
    }
    fn recs(&self) -> Vec<HdrRecord> {
        self.sim.frames().iter().map(|f| classify(f).rec).collect()
    }
    fn fill(&mut self, node: usize, addr: u64, data: &[u8]) {
        self.sim.nodes[node].mem.write(addr, data);
    }
}

fn sge(addr: u64, len: u32) -> Sge {
    Sge { addr, len, lkey: 1 }
}

fn pattern(seed: u8, n: usize) -> Vec<u8> {
    (0..n).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
}

#[test]
fn ud_sends_land_behind_a_grh_area_with_the_source_qp() {
    for v6 in [false, true] {
        let mut t = setup(v6, 1024);
        let (p1, p2) = (pattern(1, 100), pattern(2, 1024));
        t.fill(0, BASE, &p1);
        t.fill(0, BASE + 0x1000, &p2);
        for i in 0..2u64 {
            t.sim.nodes[1].post_recv(UB, RecvWr { wr_id: 10 + i, sgl: vec![sge(BASE + 0x8000 + i * 0x2000, 40 + 1024)] }).unwrap();
        }
        let d = t.to_b(QKEY_B);
        t.sim.nodes[0].post_send_ud(UA, SendWr::new(1, SendOp::Send, vec![sge(BASE, 100)]), d).unwrap();
        t.sim.nodes[0].post_send_ud(UA, SendWr::new(2, SendOp::SendImm(0xCAFE_0001), vec![sge(BASE + 0x1000, 1024)]), d).unwrap();
        t.run();
        // the wire: UD SEND ONLY, then with immediate; DETH; PSNs from sq_psn across the wrap
        let r = t.recs();
        assert_eq!(r.len(), 2, "v6 {v6}");
        assert_eq!((r[0].opcode, r[1].opcode), (OP_UD_SEND, OP_UD_SEND_IMM));
        assert_eq!((r[0].psn, r[1].psn), (0xFF_FFFE, 0xFF_FFFF));
        for x in &r {
            assert_eq!((x.dest_qp, x.qkey, x.src_qp, x.ackreq, x.ttl, x.dscp, x.ecn), (UB, QKEY_B, UA, false, 33, 26, 2));
            assert_eq!((x.eth_dst, x.eth_src, x.ipv6), (0x02_00_00_00_00_0B, 0x02_00_00_00_00_0A, v6));
        }
        assert_eq!(r[1].imm, 0xCAFE_0001);
        // the sender: both complete once sent
        let s = t.sim.nodes[0].poll_send_cq(UA);
        assert_eq!(s.iter().map(|c| (c.wr_id, c.status, c.byte_len)).collect::<Vec<_>>(), vec![(1, WcStatus::Success, 100), (2, WcStatus::Success, 1024)]);
        // the receiver: byte_len counts the GRH area; the source QP; the immediate
        let rc = t.sim.nodes[1].poll_ud_recv_cq(UB);
        assert_eq!(rc.len(), 2);
        assert_eq!((rc[0].cqe.wr_id, rc[0].cqe.status, rc[0].cqe.byte_len, rc[0].cqe.imm, rc[0].src_qp, rc[0].grh), (10, WcStatus::Success, 140, None, UA, true));
        assert_eq!((rc[1].cqe.wr_id, rc[1].cqe.byte_len, rc[1].cqe.imm, rc[1].cqe.opcode), (11, 1064, Some(0xCAFE_0001), WcOpcode::Recv));
        // the GRH area: IPv6 header / 20 zero bytes + IPv4 header, as on the wire
        let frame = &t.sim.frames()[0];
        let g = t.sim.nodes[1].mem.read(BASE + 0x8000, 40);
        if v6 {
            assert_eq!(&g[..], &frame[14..54]);
            assert_eq!((g[0] >> 4, g[6], g[7]), (6, 17, 33), "version 6, next header UDP, hop limit");
        } else {
            assert_eq!(&g[..20], &[0u8; 20]);
            assert_eq!(&g[20..], &frame[14..34]);
            assert_eq!((g[20], g[29], g[28]), (0x45, 17, 33), "IPv4, UDP, TTL");
            assert_eq!(&g[32..36], &[10, 0, 0, 1], "source address");
        }
        assert_eq!(t.sim.nodes[1].mem.read(BASE + 0x8000 + 40, 100), p1);
        assert_eq!(t.sim.nodes[1].mem.read(BASE + 0xA000 + 40, 1024), p2);
        assert_eq!(t.sim.nodes[1].ud_qp(UB).unwrap().stats().received, 2);
    }
}

/// A Q_Key that is not the QP's drops the datagram; a WR Q_Key with the high bit set sends the
/// sender QP's own Q_Key; a datagram with no receive WQE is dropped (no RNR), the next lands.
#[test]
fn ud_qkeys_and_missing_receives_drop_datagrams() {
    let mut t = setup(false, 1024);
    t.fill(0, BASE, &pattern(3, 64));
    let send = |t: &mut T, id: u64, qkey: u32| {
        let d = t.to_b(qkey);
        t.sim.nodes[0].post_send_ud(UA, SendWr::new(id, SendOp::Send, vec![sge(BASE, 64)]), d).unwrap();
        t.run();
    };
    // nothing posted: dropped
    send(&mut t, 1, QKEY_B);
    t.sim.nodes[1].post_recv(UB, RecvWr { wr_id: 20, sgl: vec![sge(BASE + 0x8000, 4096)] }).unwrap();
    // wrong Q_Key, then the sender's own (QKEY_USE_QP: QKEY_A), then the right one
    send(&mut t, 2, QKEY_B ^ 1);
    send(&mut t, 3, QKEY_USE_QP | 0x55);
    assert_eq!(t.recs()[2].qkey, QKEY_A, "QKEY_USE_QP sends the QP's own Q_Key");
    send(&mut t, 4, QKEY_B);
    let st = t.sim.nodes[1].ud_qp(UB).unwrap().stats();
    assert_eq!((st.no_wqe_drops, st.qkey_drops, st.received), (1, 2, 1));
    let rc = t.sim.nodes[1].poll_ud_recv_cq(UB);
    assert_eq!(rc.iter().map(|c| (c.cqe.wr_id, c.cqe.byte_len)).collect::<Vec<_>>(), vec![(20, 104)]);
    // every send completed, successful whatever became of its datagram
    assert_eq!(t.sim.nodes[0].poll_send_cq(UA).iter().filter(|c| c.status == WcStatus::Success).count(), 4);
}

/// A receive SGL shorter than 40 + payload completes LOC_LEN_ERR and the QP goes to ERR: the
/// other receive flushes, and so does one posted afterwards.
#[test]
fn ud_a_receive_too_short_for_the_grh_and_payload_stops_the_qp() {
    let mut t = setup(false, 1024);
    t.fill(0, BASE, &pattern(4, 100));
    t.sim.nodes[1].post_recv(UB, RecvWr { wr_id: 30, sgl: vec![sge(BASE + 0x8000, 139)] }).unwrap();
    t.sim.nodes[1].post_recv(UB, RecvWr { wr_id: 31, sgl: vec![sge(BASE + 0x9000, 4096)] }).unwrap();
    let d = t.to_b(QKEY_B);
    t.sim.nodes[0].post_send_ud(UA, SendWr::new(1, SendOp::Send, vec![sge(BASE, 100)]), d).unwrap();
    t.run();
    t.sim.nodes[1].post_recv(UB, RecvWr { wr_id: 32, sgl: vec![sge(BASE + 0xA000, 4096)] }).unwrap();
    let rc = t.sim.nodes[1].poll_ud_recv_cq(UB);
    assert_eq!(
        rc.iter().map(|c| (c.cqe.wr_id, c.cqe.status)).collect::<Vec<_>>(),
        vec![(30, WcStatus::LocLenErr), (31, WcStatus::WrFlushErr), (32, WcStatus::WrFlushErr)]
    );
    assert_eq!(t.sim.nodes[1].ud_qp(UB).unwrap().state(), QpState::Err);
    assert_eq!(t.sim.nodes[1].mem.read(BASE + 0x8000, 139), vec![0; 139], "nothing placed");
}

/// What a UD send WQE may not be: a WRITE (LOC_QP_OP_ERR), longer than the path MTU
/// (LOC_LEN_ERR), an SGE outside its MR (LOC_PROT_ERR). Nothing is sent for it, the WQEs before
/// it go, and the QP goes to ERR (the later WQE flushes).
#[test]
fn ud_local_checks_refuse_writes_long_messages_and_bad_sges() {
    let bad = [
        (SendOp::Write { remote_addr: 0, rkey: 1 }, sge(BASE, 8), WcStatus::LocQpOpErr),
        (SendOp::Send, sge(BASE, 1025), WcStatus::LocLenErr),
        (SendOp::Send, sge(BASE + MRLEN - 4, 8), WcStatus::LocProtErr),
        (SendOp::Read { remote_addr: 0, rkey: 1 }, sge(BASE, 8), WcStatus::LocQpOpErr),
    ];
    for (op, g, want) in bad {
        let mut t = setup(false, 1024);
        t.sim.nodes[1].post_recv(UB, RecvWr { wr_id: 40, sgl: vec![sge(BASE + 0x8000, 4096)] }).unwrap();
        let d = t.to_b(QKEY_B);
        t.sim.nodes[0].post_send_ud(UA, SendWr::new(1, SendOp::Send, vec![sge(BASE, 16)]), d).unwrap();
        t.sim.nodes[0].post_send_ud(UA, SendWr::new(2, op, vec![g]), d).unwrap();
        t.sim.nodes[0].post_send_ud(UA, SendWr::new(3, SendOp::Send, vec![sge(BASE, 16)]), d).unwrap();
        t.run();
        let s = t.sim.nodes[0].poll_send_cq(UA);
        assert_eq!(
            s.iter().map(|c| (c.wr_id, c.status)).collect::<Vec<_>>(),
            vec![(1, WcStatus::Success), (2, want), (3, WcStatus::WrFlushErr)],
            "{op:?}"
        );
        assert_eq!(t.recs().len(), 1, "{op:?}: only the first WQE is sent");
        assert_eq!(t.sim.nodes[0].ud_qp(UA).unwrap().state(), QpState::Err);
    }
}

/// States: RTR receives and sends nothing; INIT drops; a UD packet for a connected QP and an
/// RC packet for a UD QP are dropped.
#[test]
fn ud_states_and_classes() {
    let mut t = setup(false, 1024);
    t.fill(0, BASE, &pattern(5, 32));
    let d = t.to_b(QKEY_B);
    // B in INIT: drops; A in RTR: sends nothing
    t.sim.nodes[1].modify_ud_state(UB, QpState::Reset).unwrap();
    t.sim.nodes[1].modify_ud_state(UB, QpState::Init).unwrap();
    t.sim.nodes[1].post_recv(UB, RecvWr { wr_id: 50, sgl: vec![sge(BASE + 0x8000, 4096)] }).unwrap();
    t.sim.nodes[0].post_send_ud(UA, SendWr::new(1, SendOp::Send, vec![sge(BASE, 32)]), d).unwrap();
    t.run();
    assert_eq!(t.sim.nodes[1].ud_qp(UB).unwrap().stats().other_drops, 1, "INIT takes no packet");
    t.sim.nodes[1].modify_ud_state(UB, QpState::Rtr).unwrap();
    t.sim.nodes[0].modify_ud_state(UA, QpState::Reset).unwrap();
    assert_eq!(t.sim.nodes[0].post_send_ud(UA, SendWr::new(2, SendOp::Send, vec![sge(BASE, 32)]), d), Err(PostError::InvalidState));
    for s in [QpState::Init, QpState::Rtr] {
        t.sim.nodes[0].modify_ud_state(UA, s).unwrap();
    }
    assert_eq!(t.sim.nodes[0].post_send_ud(UA, SendWr::new(3, SendOp::Send, vec![sge(BASE, 32)]), d), Err(PostError::InvalidState), "RTR sends nothing");
    t.sim.nodes[0].modify_ud_state(UA, QpState::Rts).unwrap();
    assert_eq!(t.sim.nodes[0].ud_qp(UA).unwrap().next_psn(), 0xFF_FFFE, "RESET started the PSNs again");
    t.sim.nodes[0].post_send_ud(UA, SendWr::new(4, SendOp::Send, vec![sge(BASE, 32)]), d).unwrap();
    t.run();
    let rc = t.sim.nodes[1].poll_ud_recv_cq(UB);
    assert_eq!(rc.iter().map(|c| (c.cqe.wr_id, c.cqe.byte_len, c.src_qp)).collect::<Vec<_>>(), vec![(50, 72, UA)], "RTR receives");
    assert!(matches!(t.sim.nodes[1].modify_ud_state(UB, QpState::Sqe), Err(PostError::InvalidState)), "no SQE");
    // an RC packet for the UD QP, and a UD packet for a connected QP
    let mut b = t.sim.nodes.into_iter().nth(1).unwrap();
    b.create_qp(0x77, QpConfig::default()).unwrap();
    let before = b.unknown_qp_drops();
    let mut rec = HdrRecord { opcode: 0x04, dest_qp: UB, payload_len: 4, ..HdrRecord::default() };
    b.receive(0, &rec, &[1, 2, 3, 4]);
    rec.opcode = OP_UD_SEND;
    rec.dest_qp = 0x77;
    b.receive(0, &rec, &[1, 2, 3, 4]);
    assert_eq!(b.unknown_qp_drops(), before + 2, "each class reaches only QPs of its own");
    assert_eq!(b.ud_qp(UB).unwrap().stats().other_drops, 1);
    assert!(b.poll_ud_recv_cq(UB).is_empty() && b.poll_recv_cq(0x77).is_empty());
}

/// RESET -> ERR is refused (the kernel's table has none); RESET drops the completions not yet
/// polled; P_Keys follow the partition rule (a limited member is taken by a full one, two
/// limited members or another partition are dropped).
#[test]
fn ud_reset_and_pkeys() {
    let mut t = setup(false, 1024);
    t.sim.nodes[1].post_recv(UB, RecvWr { wr_id: 60, sgl: vec![sge(BASE + 0x8000, 4096)] }).unwrap();
    t.sim.nodes[1].modify_ud_state(UB, QpState::Err).unwrap();
    t.sim.nodes[1].modify_ud_state(UB, QpState::Reset).unwrap();
    assert!(t.sim.nodes[1].poll_ud_recv_cq(UB).is_empty(), "RESET dropped the flush completion");
    assert_eq!(t.sim.nodes[1].modify_ud_state(UB, QpState::Err), Err(PostError::InvalidState), "RESET -> ERR");
    for s in [QpState::Init, QpState::Rtr] {
        t.sim.nodes[1].modify_ud_state(UB, s).unwrap();
    }
    let mut b = t.sim.nodes.into_iter().nth(1).unwrap();
    let rec = |pkey: u16| HdrRecord { opcode: OP_UD_SEND, dest_qp: UB, pkey, qkey: QKEY_B, src_qp: UA, payload_len: 4, ..HdrRecord::default() };
    for id in 0..4 {
        b.post_recv(UB, RecvWr { wr_id: 70 + id, sgl: vec![sge(BASE + 0x8000 + id * 0x100, 256)] }).unwrap();
    }
    // the QP's P_Key is 0xFFFF (full member of the default partition)
    for pk in [0x7FFF, 0xFFFF, 0x8001, 0x0001] {
        b.receive(0, &rec(pk), &[1, 2, 3, 4]);
    }
    let st = b.ud_qp(UB).unwrap().stats();
    assert_eq!((st.received, st.pkey_drops), (2, 2), "0x7FFF and 0xFFFF taken, 0x8001 and 0x0001 (other partition) dropped");
    assert_eq!(b.poll_ud_recv_cq(UB).iter().map(|c| (c.cqe.wr_id, c.cqe.byte_len)).collect::<Vec<_>>(), vec![(70, 44), (71, 44)]);
}

use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Random datagrams (0..=PMTU bytes, right or wrong Q_Key, with or without immediate), each
    /// after 0 or 1 receive posted (large enough or one byte too short for the GRH area and the
    /// payload), against the rules written out here: a wrong Q_Key drops the datagram and
    /// leaves the receives queued; none queued drops it; the oldest receive takes it, or
    /// completes LOC_LEN_ERR when too short, which moves the QP to ERR (the queued receives
    /// flush, later ones flush at once, later datagrams are dropped). Every receive completion,
    /// every counter and every placed byte equal that; the sender completes every WR.
    #[test]
    fn ud_datagrams_follow_the_rules(
        v6 in any::<bool>(),
        msgs in prop::collection::vec((0usize..=1024, prop::bool::weighted(0.8), 0u8..4, any::<bool>()), 1..24),
    ) {
        let mut t = setup(v6, 1024);
        // (wr_id, buffer, its length) of the receives queued, oldest first
        let mut queued: std::collections::VecDeque<(u64, u64, u32)> = Default::default();
        let mut want = Vec::new(); // (wr_id, status, byte_len, imm)
        let mut placed = Vec::new(); // (buffer, data)
        let (mut qkey_drops, mut no_wqe, mut other) = (0u64, 0u64, 0u64);
        let mut stopped = false;
        for (i, &(len, good_qkey, recv, imm)) in msgs.iter().enumerate() {
            let i = i as u64;
            let data = pattern(i as u8, len);
            let src = BASE + i * 0x800;
            t.fill(0, src, &data);
            if recv != 0 {
                let (id, buf) = (100 + i, BASE + 0x8_0000 + i * 0x1000);
                let blen = if recv == 1 { 40 + len as u32 - 1 } else { 40 + 1024 };
                t.sim.nodes[1].post_recv(UB, RecvWr { wr_id: id, sgl: vec![sge(buf, blen)] }).unwrap();
                if stopped {
                    want.push((id, WcStatus::WrFlushErr, 0, None));
                } else {
                    queued.push_back((id, buf, blen));
                }
            }
            let d = t.to_b(if good_qkey { QKEY_B } else { QKEY_B ^ (1 + i as u32) });
            let op = if imm { SendOp::SendImm(0x1000 + i as u32) } else { SendOp::Send };
            t.sim.nodes[0].post_send_ud(UA, SendWr::new(i, op, vec![sge(src, len as u32)]), d).unwrap();
            t.run();
            if stopped {
                other += 1;
            } else if !good_qkey {
                qkey_drops += 1;
            } else if let Some((id, buf, blen)) = queued.pop_front() {
                if (blen as usize) < 40 + len {
                    want.push((id, WcStatus::LocLenErr, 0, None));
                    for (fid, _, _) in queued.drain(..) {
                        want.push((fid, WcStatus::WrFlushErr, 0, None));
                    }
                    stopped = true;
                } else {
                    want.push((id, WcStatus::Success, 40 + len as u32, imm.then_some(0x1000 + i as u32)));
                    placed.push((buf, data));
                }
            } else {
                no_wqe += 1;
            }
        }
        let got: Vec<_> = t.sim.nodes[1].poll_ud_recv_cq(UB).iter().map(|c| {
            if c.cqe.status == WcStatus::Success {
                assert!(c.grh && c.src_qp == UA, "GRH flag and source QP");
            }
            (c.cqe.wr_id, c.cqe.status, c.cqe.byte_len, c.cqe.imm)
        }).collect();
        prop_assert_eq!(got, want);
        let st = t.sim.nodes[1].ud_qp(UB).unwrap().stats();
        prop_assert_eq!((st.received, st.qkey_drops, st.no_wqe_drops, st.other_drops, st.pkey_drops),
                        (placed.len() as u64, qkey_drops, no_wqe, other, 0));
        for (buf, data) in &placed {
            prop_assert_eq!(&t.sim.nodes[1].mem.read(buf + 40, data.len()), data);
        }
        let s = t.sim.nodes[0].poll_send_cq(UA);
        prop_assert_eq!(s.len(), msgs.len());
        prop_assert!(s.iter().all(|c| c.status == WcStatus::Success));
    }
}
