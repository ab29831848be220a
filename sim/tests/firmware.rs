//! The firmware image (./hematite fw -> build/fw/firmware.hex) on the Verilated control core
//! (picorv32 in hm_ctrl_core) inside the NIC model, driving the engine's real control bus:
//! commands posted through the mailbox the way a driver does, answers and latencies checked,
//! malformed commands answered without a hang, and a connection set up entirely by firmware
//! commands carrying an RDMA WRITE between two NICs.
use hematite_model::desc;
use hematite_model::transport::{SendOp, SendWr, Sge};
use hematite_sim::dma::MemCfg;
use hematite_sim::duo::{DuoBench, WireFaults};
use hematite_sim::eng::Engine;
use hematite_sim::fw::{self, FwAnswer};
use hematite_sim::host::{CQ_BASE, CQ_LOG, RQ_BASE, RQ_LOG, SQ_BASE, SQ_LOG};

const MAX: u64 = 2_000_000;

fn image() -> Vec<u32> {
    let p = fw::image_path();
    fw::read_hex(&p).unwrap_or_else(|e| panic!("firmware image: {e}"))
}

fn cmd(e: &mut Engine, op: u16, token: u8, args: &[u32]) -> FwAnswer {
    fw::call(e, op, token, args, MAX).unwrap_or_else(|err| panic!("command {op:#x}: {err}"))
}

fn status(a: &FwAnswer) -> u32 {
    a.words[0] & 0xFF
}

fn ok(e: &mut Engine, op: u16, args: &[u32]) -> FwAnswer {
    let a = cmd(e, op, 0x5A, args);
    assert_eq!(status(&a), 0, "command {op:#x} failed: answer {:x?}", a.words);
    assert_eq!(a.words[0] >> 24, 0x5A, "token echoed");
    a
}

#[test]
fn firmware_boots_and_answers_queries_on_the_core() {
    let mut e = Engine::new(MemCfg::default());
    fw::boot(&mut e, &image()).unwrap();
    let a = ok(&mut e, 0x01, &[]);
    assert_eq!((a.words[0] >> 8) & 0xFF, 21, "QUERY_DEVICE answers 21 words");
    // fw_ver, vendor, part, hw_ver, max_qp: the engine's CAPS (4096 QPs) capped by the
    // firmware's tables
    assert_eq!(a.words[1], 0x000100);
    assert_eq!(a.words[5], 4096, "max_qp: every entry of the 4096-entry table");
    let p = ok(&mut e, 0x02, &[1]);
    assert_eq!(p.words[1], 4, "port ACTIVE");
    let a2 = ok(&mut e, 0x01, &[]);
    assert_eq!(a2.words, a.words, "the same answer again");
    println!("first command after start (includes the firmware's boot: .bss clear, table init) {} cycles; \
              QUERY_DEVICE {} cycles, QUERY_PORT {} cycles", a.cycles, a2.cycles, p.cycles);
    let (st, _) = e.fw_read(fw::FW_MBOX_STATUS).unwrap();
    assert_eq!(st & 0b1110, 0b0010, "running, no fault, no trap: {st:#x}");
    assert_eq!(st >> 16, 3, "three commands completed");
}

/// The firmware reads a command's header and the words it announces, and writes back the
/// answer's words and zeroes over what a longer answer before left: every CMD_OUT word past an
/// answer's length reads 0, and the commands cost a fraction of copying the whole mailbox.
#[test]
fn cmd_out_past_an_answer_reads_zero_and_small_commands_are_cheap() {
    let mut e = Engine::new(MemCfg::default());
    fw::boot(&mut e, &image()).unwrap();
    let out = |e: &mut Engine| -> Vec<u32> { (0..64u16).map(|i| e.fw_read(fw::FW_CMD_OUT + 4 * i).unwrap().0).collect() };
    let q = ok(&mut e, 0x01, &[]);
    let n = ((q.words[0] >> 8) & 0xFF) as usize;
    assert_eq!(out(&mut e)[..=n], q.words[..], "QUERY_DEVICE's answer in CMD_OUT");
    assert!(out(&mut e)[n + 1..].iter().all(|&w| w == 0), "after the first answer: {:x?}", out(&mut e));
    let pd = ok(&mut e, 0x10, &[]);
    assert_eq!((pd.words[0] >> 8) & 0xFF, 1, "ALLOC_PD answers the handle");
    let o = out(&mut e);
    assert_eq!(o[..2], pd.words[..]);
    assert!(o[2..].iter().all(|&w| w == 0), "QUERY_DEVICE's words past ALLOC_PD's answer are cleared: {o:x?}");
    // a command with a bad length, then one without outputs: only the header is left
    let bad = fw::command(&mut e, &[hematite_abi::mbox::Header::word(0x10, 5, 1), 1, 2, 3, 4, 5], MAX).unwrap();
    assert_eq!(bad.words[0] & 0xFF, 2, "BAD_LENGTH");
    assert!(out(&mut e)[1..].iter().all(|&w| w == 0));
    // the small commands (regression ceilings: 6,064 / 6,014 cycles when the whole mailbox
    // was copied both ways)
    let again = ok(&mut e, 0x10, &[]);
    let free = ok(&mut e, 0x11, &[again.words[1]]);
    println!("ALLOC_PD {} cycles, DEALLOC_PD {} cycles", again.cycles, free.cycles);
    assert!(again.cycles < 3_000 && free.cycles < 3_000, "ALLOC_PD {} DEALLOC_PD {}", again.cycles, free.cycles);
}

/// QUERY_ABI on the core: the firmware's mailbox protocol, the interface it was built for, and
/// the interface the RTL reports at the mailbox VERSION register (hm_ctrl_sys), which the
/// firmware read at start; all from the one description.
#[test]
fn query_abi_reports_the_rtls_interface_version() {
    use hematite_abi::version::{INTERFACE, MAILBOX};
    let mut e = Engine::new(MemCfg::default());
    fw::boot(&mut e, &image()).unwrap();
    let a = ok(&mut e, hematite_abi::mbox::OP_QUERY_ABI, &[]);
    assert_eq!(&a.words[1..], &[MAILBOX, INTERFACE, INTERFACE], "answer {:x?}", a.words);
    assert_eq!(INTERFACE, hematite_abi::regs::HM_MBOX_VERSION_RESET, "BAR0 and mailbox VERSION are one register type");
}

#[test]
fn malformed_commands_get_a_status_and_the_core_keeps_serving() {
    let mut e = Engine::new(MemCfg::default());
    fw::boot(&mut e, &image()).unwrap();
    assert_eq!(status(&cmd(&mut e, 0x7F, 1, &[])), 1, "unknown opcode: BAD_OPCODE");
    assert_eq!(status(&cmd(&mut e, 0x01, 2, &[7, 7])), 2, "QUERY_DEVICE with arguments: BAD_LENGTH");
    assert_eq!(status(&cmd(&mut e, 0x11, 3, &[999])), 6, "unknown PD: BAD_HANDLE");
    assert_eq!(status(&cmd(&mut e, 0x30, 4, &[17, 0, 0, 0])), 3, "CQ of 2^17 entries: BAD_PARAM");
    assert_eq!(status(&cmd(&mut e, 0x43, 5, &[4000])), 6, "destroy of a QP never created: BAD_HANDLE");
    // a header claiming more words than the mailbox holds
    let a = fw::command(&mut e, &[0x01 | 0xFF << 16], MAX).unwrap();
    assert_eq!(a.words[0] & 0xFF, 2);
    // while a command is pending, CMD_IN and the doorbell are refused: never queued twice
    assert!(e.fw_write(fw::FW_CMD_IN, 0x01).unwrap());
    assert!(e.fw_write(fw::FW_MBOX_DB, 1).unwrap());
    assert!(!e.fw_write(fw::FW_MBOX_DB, 1).unwrap(), "second doorbell while pending");
    assert!(!e.fw_write(fw::FW_CMD_IN, 0x7F).unwrap(), "CMD_IN write while pending");
    e.run_until(MAX, |e| e.fw_done_cycles.len() == 7).unwrap();
    assert_eq!(e.fw_read(fw::FW_CMD_OUT).unwrap().0 & 0xFF, 0, "the first QUERY_DEVICE answered OK");
    // the host port refuses what it does not map: IMEM while the core runs, IMEM reads,
    // CMD_OUT writes, unmapped offsets
    assert!(!e.fw_write(fw::FW_IMEM, 0).unwrap(), "IMEM write while running");
    assert!(!e.fw_read(fw::FW_IMEM).unwrap().1, "IMEM is write-only");
    assert!(!e.fw_write(fw::FW_CMD_OUT, 0).unwrap(), "CMD_OUT is read-only");
    assert!(!e.fw_read(0x0300).unwrap().1, "unmapped");
    assert!(!e.fw_write(fw::FW_MBOX_STATUS, 0).unwrap(), "MBOX_STATUS is read-only");
    ok(&mut e, 0x01, &[]);
    let (st, _) = e.fw_read(fw::FW_MBOX_STATUS).unwrap();
    assert_eq!(st & 0b1100, 0, "no fault, no trap after malformed commands: {st:#x}");
}

/// SET_GID, PD, MR over the test buffer, CQ 0 at the host's CQ ring, one RC QP with the host's
/// ring layout, moved RESET -> INIT -> RTR -> RTS towards `peer_qpn`. Returns (QPN, key) and
/// prints the latencies.
fn bring_up(e: &mut Engine, me: u32, peer: u32, peer_qpn: u32, sq_psn: u32, rq_psn: u32) -> (u32, u32) {
    bring_up_with(e, me, peer, peer_qpn, sq_psn, rq_psn, &mut |_, _, _| {})
}

/// As bring_up, calling `at_init(engine, qpn, key)` while the QP is in INIT.
fn bring_up_with(e: &mut Engine, me: u32, peer: u32, peer_qpn: u32, sq_psn: u32, rq_psn: u32,
                 at_init: &mut dyn FnMut(&mut Engine, u32, u32)) -> (u32, u32) {
    let mac = |h: u32| 0x02_00_00_00_00_00u64 | h as u64;
    let ip = |h: u32| 0x0A00_0000u32 | h;
    ok(e, 0x04, &[0, 0, 0, 0x0000_FFFF, ip(me), mac(me) as u32, (mac(me) >> 32) as u32]);
    let pd = ok(e, 0x10, &[]).words[1];
    let (base, len) = (0x100_0000u64, 0x100_0000u64);
    let key = ok(e, 0x20, &[pd, base as u32, (base >> 32) as u32, len as u32, (len >> 32) as u32, 0xF]).words[1];
    let cq = ok(e, 0x30, &[CQ_LOG as u32, CQ_BASE as u32, (CQ_BASE >> 32) as u32, 0]);
    assert_eq!(cq.words[1], 0, "the first CQ is CQ 0 (the host polls CQ 0's ring)");
    let q = 2u64;
    let (sq, rq) = (SQ_BASE + q * 0x1_0000, RQ_BASE + q * 0x1_0000);
    let c = ok(e, 0x40, &[pd, 0, 0, 2, sq as u32, (sq >> 32) as u32, rq as u32, (rq >> 32) as u32,
                          SQ_LOG as u32, 0, RQ_LOG as u32, 0, 16, 16, 1, 1, 0]);
    let qpn = c.words[1];
    assert_eq!(qpn as u64, q, "the first QPN");
    let mut blk = [0u32; hematite_abi::qp::ATTR_WORDS];
    // RESET -> INIT: STATE, ACCESS_FLAGS, PKEY_INDEX, PORT
    blk[0] = 1;
    blk[2] = 0xF;
    blk[4] = 1;
    let init = ok(e, 0x41, &[&[qpn, 1 | 1 << 3 | 1 << 4 | 1 << 5][..], &blk[..]].concat());
    at_init(e, qpn, key);
    // INIT -> RTR: AV, PATH_MTU, DEST_QPN, RQ_PSN, MAX_DEST_RD_ATOMIC, MIN_RNR_TIMER
    blk[0] = 2;
    blk[6] = 5;
    blk[10] = rq_psn;
    blk[13] = 4;
    blk[14] = 12;
    blk[15] = peer_qpn;
    blk[18] = 0;
    blk[19..23].copy_from_slice(&[0, 0, 0x0000_FFFF, ip(peer)]);
    blk[23] = mac(peer) as u32;
    blk[24] = (mac(peer) >> 32) as u32;
    blk[25] = 64;
    let rtr = ok(e, 0x41, &[&[qpn, 1 | 1 << 7 | 1 << 8 | 1 << 20 | 1 << 12 | 1 << 17 | 1 << 15][..], &blk[..]].concat());
    // RTR -> RTS: TIMEOUT, RETRY_CNT, RNR_RETRY, SQ_PSN, MAX_QP_RD_ATOMIC
    blk[0] = 3;
    blk[7] = 14;
    blk[8] = 7;
    blk[9] = 7;
    blk[11] = sq_psn;
    blk[12] = 4;
    let rts = ok(e, 0x41, &[&[qpn, 1 | 1 << 9 | 1 << 10 | 1 << 11 | 1 << 16 | 1 << 13][..], &blk[..]].concat());
    // an illegal request changes nothing: RTS -> INIT
    blk[0] = 1;
    let bad = cmd(e, 0x41, 9, &[&[qpn, 1][..], &blk[..]].concat());
    assert_eq!(status(&bad), 4, "RTS -> INIT: BAD_STATE");
    let qq = ok(e, 0x42, &[qpn]);
    assert_eq!(qq.words[1], 3, "still RTS");
    println!("host {me}: CREATE_QP {} cycles, INIT {} RTR {} RTS {} cycles (doorbell to done)", c.cycles, init.cycles, rtr.cycles, rts.cycles);
    (qpn, key)
}

/// Two engines back to back (host memory 40 cycles away, a fault-free wire), the firmware
/// booted on both cores.
fn booted_duo(seed: u64) -> DuoBench {
    let mut d = DuoBench::new(MemCfg { latency: 40, seed, ..Default::default() }, WireFaults::default()).unwrap();
    let img = image();
    for h in 0..2 {
        fw::boot(&mut d.h[h].eng, &img).unwrap();
    }
    d
}

#[test]
fn a_connection_made_by_firmware_commands_carries_an_rdma_write() {
    let mut d = booted_duo(3);
    let (q0, k0) = bring_up(&mut d.h[0].eng, 1, 2, 2, 0x1234, 0x777);
    let (_q1, k1) = bring_up(&mut d.h[1].eng, 2, 1, 2, 0x777, 0x1234);
    // 3000 bytes from host 0 to host 1 with a WQE written straight into QP 2's send ring
    let src = 0x100_0000u64;
    let dst = 0x180_0000u64;
    let data: Vec<u8> = (0..3000u32).map(|i| (i * 13 + 7) as u8).collect();
    d.h[0].fill(src, &data);
    let mut wr = SendWr::new(0xBEEF, SendOp::Write { remote_addr: dst, rkey: k1 }, vec![Sge { addr: src, len: 3000, lkey: k0 }]);
    wr.signaled = true;
    let bytes = desc::encode_send_wqe(&wr, 64, None).unwrap();
    d.h[0].eng.mem.mem.write(SQ_BASE + q0 as u64 * 0x1_0000, &bytes);
    assert!(d.h[0].eng.bar_write(hematite_sim::csr::regs::HM_REG_DB_SQ, 1 << 16 | q0).unwrap());
    d.run(200_000, |d| !d.h[0].cqes.is_empty()).unwrap();
    let c = d.h[0].cqes[0];
    assert_eq!(c.cqe.wr_id, 0xBEEF);
    assert_eq!(c.cqe.status, hematite_model::transport::WcStatus::Success, "{c:?}");
    assert_eq!(d.h[1].eng.mem.mem.read(dst, 3000), data, "the WRITE's bytes at the peer");
}

/// MODIFY_QP to ERR by firmware flushes the QP's outstanding WQEs at once (no doorbell), with
/// no QP-fatal event; the link seen by the core turns into port events in the event queue
/// that SET_EQ names.
#[test]
fn firmware_err_flushes_at_once_and_link_changes_become_events() {
    let mut d = booted_duo(5);
    let (q0, k0) = bring_up(&mut d.h[0].eng, 1, 2, 2, 0x10, 0x20);
    let (q1, k1) = bring_up(&mut d.h[1].eng, 2, 1, 2, 0x20, 0x10);
    // event queue: a second CQ of host 0
    const EQ_BASE: u64 = 0x3100_0000;
    let e = &mut d.h[0].eng;
    let eq = ok(e, 0x30, &[6, EQ_BASE as u32, (EQ_BASE >> 32) as u32, 1]).words[1];
    ok(e, 0x05, &[eq, 1]);
    // the link goes down and comes back
    e.inp.fw_link = 0;
    e.run_until(200_000, |e| e.mem.mem.read(EQ_BASE, 32) != vec![0u8; 32]).unwrap();
    e.inp.fw_link = 1;
    e.run_until(200_000, |e| e.mem.mem.read(EQ_BASE + 32, 32) != vec![0u8; 32]).unwrap();
    let ev = |e: &Engine, k: u64| desc::decode_event(&e.mem.mem.read(EQ_BASE + 32 * k, 32)).map(|x| x.0);
    assert_eq!(ev(e, 0), Ok(desc::Event::PortErr(1)));
    assert_eq!(ev(e, 1), Ok(desc::Event::PortActive(1)));
    assert_eq!(ok(e, 0x02, &[1]).words[1], 4, "ACTIVE again");
    // the peer's QP goes to ERR: it answers nothing, so host 0's WRITEs stay outstanding
    let mut blk = vec![0u32; hematite_abi::qp::ATTR_WORDS];
    blk[0] = 6;
    ok(&mut d.h[1].eng, 0x41, &[&[q1, 1][..], &blk[..]].concat());
    let src = 0x100_0000u64;
    for i in 0..3u64 {
        let mut wr = SendWr::new(100 + i, SendOp::Write { remote_addr: 0x180_0000 + i * 64, rkey: k1 }, vec![Sge { addr: src, len: 64, lkey: k0 }]);
        wr.signaled = true;
        let bytes = desc::encode_send_wqe(&wr, 64, None).unwrap();
        d.h[0].eng.mem.mem.write(SQ_BASE + q0 as u64 * 0x1_0000 + i * 64, &bytes);
    }
    assert!(d.h[0].eng.bar_write(hematite_sim::csr::regs::HM_REG_DB_SQ, 3 << 16 | q0).unwrap());
    d.run(20_000, |_| true).unwrap();
    assert!(d.h[0].cqes.is_empty(), "no completion while the peer is silent: {:?}", d.h[0].cqes);
    // host 0's QP to ERR: the three WQEs complete with WR_FLUSH_ERR, no doorbell needed
    ok(&mut d.h[0].eng, 0x41, &[&[q0, 1][..], &blk[..]].concat());
    d.run(400_000, |d| d.h[0].cqes.len() >= 3).unwrap();
    let ids: Vec<(u64, hematite_model::transport::WcStatus)> = d.h[0].cqes.iter().map(|c| (c.cqe.wr_id, c.cqe.status)).collect();
    use hematite_model::transport::WcStatus::WrFlushErr;
    assert_eq!(ids, vec![(100, WrFlushErr), (101, WrFlushErr), (102, WrFlushErr)]);
    // no QP-fatal event: the control plane asked for ERR
    assert_eq!(d.h[0].eng.mem.mem.read(EQ_BASE + 64, 32), vec![0u8; 32], "third event-queue slot empty");
}

/// QUERY_COUNTERS on the core: the firmware's own counters and the engine's, read over the
/// control bus, equal to what the BAR shows.
#[test]
fn query_counters_returns_the_engines_counters() {
    let mut e = Engine::new(MemCfg::default());
    fw::boot(&mut e, &image()).unwrap();
    ok(&mut e, 0x01, &[]);
    assert_eq!(status(&cmd(&mut e, 0x7F, 1, &[])), 1);
    let c = ok(&mut e, 0x03, &[]);
    assert_eq!(c.words[1], 2, "two commands before this one");
    assert_eq!(c.words[2], 1, "one OK");
    assert_eq!(c.words[2 + 1], 1, "one BAD_OPCODE");
    let n = c.words[13] as usize;
    assert_eq!(n, 50, "the engine's first 50 counters (CAPS says 70; the answer holds 50)");
    for i in 0..n {
        let (bar, ok) = e.bar_read(0x1000 + 4 * i as u16).unwrap();
        assert!(ok);
        assert_eq!(c.words[14 + i], bar, "counter {i}");
    }
}

/// DCQCN parameters through the core: defaults, an all-or-nothing SET, and the teardown
/// commands (QP, MR, CQ, PD) that the connection tests do not use.
#[test]
fn cc_parameters_and_teardown_on_the_core() {
    let mut e = Engine::new(MemCfg::default());
    fw::boot(&mut e, &image()).unwrap();
    let g = ok(&mut e, 0x51, &[]);
    assert_eq!(g.words.len(), 20, "19 parameters");
    assert_eq!((g.words[1 + 2], g.words[1 + 8]), (300, 11), "rpg_time_reset 300, rpg_gd 11 (NVIDIA defaults)");
    let mut set = vec![0u32; 20];
    set[0] = 1 << 8;
    set[1 + 8] = 9;
    ok(&mut e, 0x50, &set);
    assert_eq!(ok(&mut e, 0x51, &[]).words[1 + 8], 9);
    // the firmware wrote the engine's CC registers: rpg_gd 9 in HM_CC_CUT, the rest the
    // converted defaults (as the engine's reset values)
    let cc = |e: &mut Engine, i: u16| {
        e.set_ctl_from_core(false); // the testbench reads the control bus for a moment
        let v = e.ctl_read(hematite_abi::regs::HM_CTL_CC + 4 * i).unwrap().0;
        e.set_ctl_from_core(true);
        v
    };
    assert_eq!(cc(&mut e, 13), 0x0200_0009, "HM_CC_CUT: min_dec 512/1024, gd 9");
    assert_eq!((cc(&mut e, 2), cc(&mut e, 0)), (75_000, hematite_abi::regs::HM_CC_CTRL_RESET));
    set[0] = 1 << 8 | 1 << 4;
    set[1 + 4] = 99; // rpg_threshold beyond 31: nothing changes
    assert_eq!(status(&cmd(&mut e, 0x50, 2, &set)), 3);
    assert_eq!(ok(&mut e, 0x51, &[]).words[1 + 8], 9);
    // objects, then their teardown; a PD with an MR cannot go first
    let pd = ok(&mut e, 0x10, &[]).words[1];
    let key = ok(&mut e, 0x20, &[pd, 0x100_0000, 0, 0x1000, 0, 1]).words[1];
    assert_eq!(status(&cmd(&mut e, 0x11, 3, &[pd])), 7, "PD in use: IN_USE");
    ok(&mut e, 0x21, &[key]);
    assert_eq!(status(&cmd(&mut e, 0x21, 4, &[key])), 6, "stale key: BAD_HANDLE");
    let cq = ok(&mut e, 0x30, &[6, 0x3200_0000, 0, 0]).words[1];
    ok(&mut e, 0x31, &[cq]);
    ok(&mut e, 0x11, &[pd]);
}

/// Receives posted while the QP is in INIT (rc_pingpong posts them before RTR) survive the
/// INIT -> RTR context write (HM_CTL_F_LOAD_RQ_PSN keeps the receive queue) and take a SEND.
#[test]
fn receives_posted_in_init_survive_rtr() {
    let mut d = booted_duo(7);
    let (q0, k0) = bring_up(&mut d.h[0].eng, 1, 2, 2, 0x55, 0x66);
    let rbuf = 0x1A0_0000u64;
    let (_q1, _k1) = bring_up_with(&mut d.h[1].eng, 2, 1, 2, 0x66, 0x55, &mut |e, q, key| {
        let wr = hematite_model::transport::RecvWr { wr_id: 0x77, sgl: vec![Sge { addr: rbuf, len: 256, lkey: key }] };
        let bytes = desc::encode_recv_wqe(&wr, 64).unwrap();
        e.mem.mem.write(RQ_BASE + q as u64 * 0x1_0000, &bytes);
        assert!(e.bar_write(hematite_sim::csr::regs::HM_REG_DB_RQ, 1 << 16 | q).unwrap());
    });
    let data: Vec<u8> = (0..100u32).map(|i| (i * 3 + 1) as u8).collect();
    d.h[0].fill(0x100_0000, &data);
    let mut wr = SendWr::new(0x99, SendOp::Send, vec![Sge { addr: 0x100_0000, len: 100, lkey: k0 }]);
    wr.signaled = true;
    let bytes = desc::encode_send_wqe(&wr, 64, None).unwrap();
    d.h[0].eng.mem.mem.write(SQ_BASE + q0 as u64 * 0x1_0000, &bytes);
    assert!(d.h[0].eng.bar_write(hematite_sim::csr::regs::HM_REG_DB_SQ, 1 << 16 | q0).unwrap());
    d.run(200_000, |d| !d.h[0].cqes.is_empty() && !d.h[1].cqes.is_empty()).unwrap();
    assert_eq!(d.h[0].cqes[0].cqe.status, hematite_model::transport::WcStatus::Success, "{:?}", d.h[0].cqes[0]);
    let r = d.h[1].cqes[0].cqe;
    assert_eq!((r.wr_id, r.status, r.byte_len), (0x77, hematite_model::transport::WcStatus::Success, 100), "{r:?}");
    assert_eq!(d.h[1].eng.mem.mem.read(rbuf, 100), data);
}
