//! The DCQCN notification point inside the engine: the model peer WRITEs to the engine over a
//! "congested" wire that marks every ECN-capable frame toward the engine CE. The engine must
//! answer with CNPs (ConnectX format: BTH opcode 0x81, BECN, P_Key 0xFFFF, PSN 0, 16 reserved
//! bytes, DSCP and priority from the registers, ECT(0)) to the peer's QP, at most one per
//! interval (HM_CTL_CC registers), and none when CNP generation is off; the transfers
//! still complete exactly as the reference says. A CNP received by the engine is counted.
use hematite_model::build::build_frame;
use hematite_model::desc;
use hematite_abi::regs;
use hematite_model::record::HdrRecord;
use hematite_model::transport::mem::MrAccess;
use hematite_model::transport::{QpConfig, SendOp, SendWr, Sge};
use hematite_sim::dma::MemCfg;
use hematite_sim::rc::{decode, RcBench, A_BUF, B_BUF, REGION_LEN as LEN};

const QA: u32 = 2;
const QB: u32 = 0x33;
const CNT_CE: u16 = 26;
const CNT_CNP_TX: u16 = 27;
const CNT_CNP_RX: u16 = 28;
const CNT_NP_SUPP: u16 = 29;

struct Run {
    /// (cycle, frame) of every CNP the engine sent
    cnps: Vec<(u64, Vec<u8>)>,
    ce: u32,
    cnp_tx: u32,
    supp: u32,
    first_req: u64,
    last_req: u64,
}

/// The peer WRITEs `n` messages of `len` bytes into the engine's memory, every peer frame
/// marked CE; `ctrl` / `interval` are written to the CC registers first (None: reset values).
fn run(n: u64, len: u32, ctrl: Option<u32>, interval: Option<u32>) -> Run {
    let mut b = RcBench::new(MemCfg { latency: 40, seed: 5, ..Default::default() }).unwrap();
    let ma = b.reg_mr(true, 1, A_BUF, LEN, MrAccess::ALL).unwrap();
    let mb = b.reg_mr(false, 1, B_BUF, LEN, MrAccess::ALL).unwrap();
    let data: Vec<u8> = (0..LEN).map(|i| (i * 7 + 3) as u8).collect();
    b.fill(false, B_BUF, &data);
    let cfg = QpConfig { pmtu: 1024, ..QpConfig::default() };
    b.connect(QA, QB, cfg, cfg, 0).unwrap();
    let base = regs::HM_CTL_CC;
    let (c0, ok) = b.a.eng.ctl_read(base).unwrap();
    assert!(ok && c0 == regs::HM_CC_CTRL_RESET, "CC control register after reset: {c0:#x}");
    assert_eq!(b.a.eng.ctl_read(base + 4).unwrap(), (regs::HM_CC_CNP_INTERVAL_RESET, true));
    assert!(!b.a.eng.ctl_read(base + 4 * regs::HM_CTL_CC_WORDS).unwrap().1, "beyond the CC registers");
    if let Some(c) = ctrl {
        assert!(b.a.eng.ctl_write(base, c).unwrap());
        assert_eq!(b.a.eng.ctl_read(base).unwrap(), (c, true));
    }
    if let Some(i) = interval {
        assert!(b.a.eng.ctl_write(base + 4, i).unwrap());
    }
    b.ce_rx = true;
    for k in 0..n {
        let off = (k * u64::from(len)) % (LEN - u64::from(len));
        let wr = SendWr::new(
            k,
            SendOp::Write { remote_addr: A_BUF + off, rkey: ma.lkey },
            vec![Sge { addr: B_BUF + off, len, lkey: mb.lkey }],
        );
        b.post_send_b(QB, &wr).unwrap();
    }
    b.run(0, 3_000_000).expect("the peer's WRITEs complete");
    // every WRITE was executed as in the reference
    b.run_reference();
    assert_eq!(b.peer.poll_send_cq(QB), b.ref_b.poll_send_cq(QB), "peer send CQEs");
    let got = b.a.eng.mem.mem.read(A_BUF, LEN as usize);
    let want = b.a.refn.mem.read(A_BUF, LEN as usize);
    assert!(got == want, "engine memory differs from the reference");
    let cnps: Vec<(u64, Vec<u8>)> = b
        .wire
        .iter()
        .filter(|(_, from_engine, f)| *from_engine && decode(f).is_some_and(|(r, _)| r.opcode == 0x81))
        .map(|(t, _, f)| (*t, f.clone()))
        .collect();
    // the engine's frames (ACKs and CNPs) span the time it was receiving marked requests (the
    // model peer hands its frames over in bursts)
    let reqs: Vec<u64> = b.wire.iter().filter(|(_, e, _)| *e).map(|(t, _, _)| *t).collect();
    Run {
        ce: b.a.eng.counter(CNT_CE).unwrap(),
        cnp_tx: b.a.eng.counter(CNT_CNP_TX).unwrap(),
        supp: b.a.eng.counter(CNT_NP_SUPP).unwrap(),
        first_req: reqs[0],
        last_req: *reqs.last().unwrap(),
        cnps,
    }
}

#[test]
fn ce_marked_requests_get_paced_cnps() {
    let interval = 400u32;
    let r = run(24, 4096, None, Some(interval));
    eprintln!("CE requests {}, CNPs {}, suppressed {}, over {} cycles", r.ce, r.cnps.len(), r.supp, r.last_req - r.first_req);
    assert!(r.ce >= 24 * 4, "every marked request counted: {}", r.ce);
    assert!(!r.cnps.is_empty(), "no CNP was sent");
    assert_eq!(r.cnp_tx as usize, r.cnps.len(), "CNP counter");
    assert_eq!(r.ce, r.cnp_tx + r.supp, "each CE request either triggered a CNP or was suppressed");
    // at most one per interval (their transmission may be delayed behind a frame, never early)
    let span = r.last_req - r.first_req;
    assert!(r.cnps.len() as u64 <= span / u64::from(interval) + 2, "{} CNPs in {span} cycles", r.cnps.len());
    assert!(r.cnps.len() as u64 * u64::from(interval) * 2 >= span, "too few CNPs: {} in {span} cycles", r.cnps.len());
    for w in r.cnps.windows(2) {
        assert!(w[1].0 - w[0].0 >= u64::from(interval) - 40, "CNPs {} and {} cycles apart", w[0].0, w[1].0);
    }
    // ConnectX format
    for (_, f) in &r.cnps {
        let (rec, pay): (HdrRecord, Vec<u8>) = decode(f).expect("valid frame, good ICRC");
        assert_eq!(f.len(), 74, "IPv4 CNP frame length");
        assert!(pay.is_empty());
        assert_eq!((rec.dest_qp, rec.becn, rec.fecn, rec.pkey, rec.psn), (QB, true, false, 0xFFFF, 0));
        assert_eq!((rec.dscp, rec.ecn), (48, 2), "CNP DSCP / ECN");
        assert!(f[58..74 - 4].iter().all(|&b| b == 0), "16 reserved bytes");
    }
}

#[test]
fn cnp_generation_off_and_other_dscp() {
    // off: CE requests are counted, no CNP
    let r = run(8, 2048, Some(0), None);
    assert!(r.ce >= 16 && r.cnps.is_empty() && r.cnp_tx == 0, "ce {} cnps {}", r.ce, r.cnps.len());
    // on with DSCP 40, interval 0: one CNP per CE request
    let r = run(6, 1024, Some(1 | 40 << 8 | 5 << 16), Some(0));
    assert_eq!(r.cnps.len() as u32, r.ce, "interval 0: a CNP for every CE request");
    assert!(r.cnps.iter().all(|(_, f)| decode(f).is_some_and(|(rec, _)| rec.dscp == 40)));
}

#[test]
fn received_cnps_are_counted() {
    let mut b = RcBench::new(MemCfg::default()).unwrap();
    let cfg = QpConfig::default();
    b.connect(QA, QB, cfg, cfg, 0).unwrap();
    let other0 = b.a.eng.counter(11).unwrap();
    for _ in 0..3 {
        let rec = HdrRecord { becn: true, dscp: 48, ecn: 2, ..cnp_template() };
        let f = build_frame(&rec, &[]).unwrap();
        assert_eq!(f.len(), 74);
        b.a.eng.rx_q.push_back(f);
    }
    b.run(0, 20_000).unwrap();
    assert_eq!(b.a.eng.counter(CNT_CNP_RX).unwrap(), 3);
    assert_eq!(b.a.eng.counter(11).unwrap(), other0, "a CNP is not an unhandled packet");
}

/// An IPv4 CNP record with the engine's addresses (as `RcBench::connect` sets them up).
fn cnp_template() -> HdrRecord {
    let av = QpConfig::default().av.reversed();
    HdrRecord {
        eth_dst: av.eth_dst,
        eth_src: av.eth_src,
        ip_src: av.ip_src,
        ip_dst: av.ip_dst,
        ipv6: av.ipv6,
        ttl: 64,
        udp_sport: 0xC000,
        udp_dport: 4791,
        opcode: 0x81,
        pkey: 0xFFFF,
        dest_qp: QA,
        ..HdrRecord::default()
    }
}

const CNT_RP_CUTS: u16 = 30;
const CNT_RP_ACT: u16 = 31;
const CNT_RP_REL: u16 = 32;
const CNT_RP_BAD: u16 = 33;

/// The CC registers come out of reset with NVIDIA's defaults converted for 250 MHz and
/// 100 Gb/s by the reference model's `HwParams::from_cc` (the firmware's conversion).
#[test]
fn cc_register_reset_values_are_the_nvidia_defaults() {
    use hematite_model::dcqcn::{HwParams, NVIDIA_DEFAULTS};
    let p = HwParams::from_cc(&NVIDIA_DEFAULTS, 250, 100_000, 1);
    let mut b = RcBench::new(MemCfg::default()).unwrap();
    let mut rd = |i: u16| {
        let (v, ok) = b.a.eng.ctl_read(regs::HM_CTL_CC + 4 * i).unwrap();
        assert!(ok);
        v
    };
    let ctrl = rd(0);
    assert_eq!(ctrl & 3, 3, "CNP generation and rate limiting on");
    assert_eq!((ctrl >> 8 & 63, ctrl >> 16 & 7), (u32::from(p.cnp_dscp), u32::from(p.cnp_prio)));
    assert_eq!((ctrl >> 19 & 1 != 0, ctrl >> 20 & 1 != 0), (p.clamp_tgt_rate, p.clamp_after_inc));
    assert_eq!(ctrl >> 24 & 31, u32::from(p.threshold));
    for (i, w) in p.reg_words().iter().enumerate() {
        assert_eq!(rd(i as u16 + 1), *w, "CC register {}", i + 1);
    }
    assert_eq!(rd(14), 16_384, "pacer burst");
    assert_eq!(rd(15), 328 << 16 | 0xFF << 8 | 1, "PFC honoured, every priority ECT, 1.28 cycles per 512-bit quantum");
}

/// The mask of a CC register's fields, from its generated field table (reserved bits
/// `rsvdN` left out).
fn field_mask(fields: &[(&str, usize, usize)]) -> u32 {
    fields.iter().filter(|f| !f.0.starts_with("rsvd")).fold(0, |m, &(_, lsb, w)| m | (((1u64 << w) - 1) << lsb) as u32)
}

/// The CC registers are the register block PeakRDL-regblock generates from
/// regs/hematite.rdl (scripts/regs.py --rtl): byte strobes write only their bytes, a
/// register keeps only its fields (reserved bits read 0 whatever was written), and a write
/// that meets a read of the window in the same cycle waits a cycle (the block takes one
/// access a cycle) rather than being lost or corrupting the read.
#[test]
fn cc_registers_strobes_reserved_bits_and_a_read_beside_a_write() {
    use hematite_sim::eng::{LiteOp, Port};
    let mut b = RcBench::new(MemCfg::default()).unwrap();
    let e = &mut b.a.eng;
    let cc = |i: u16| regs::HM_CTL_CC + 4 * i;
    assert!(e.ctl_write(cc(1), 0x1122_3344).unwrap());
    assert!(e.ctl_write_strb(cc(1), 0xAABB_CCDD, 0b0101).unwrap());
    assert_eq!(e.ctl_read(cc(1)).unwrap(), (0x11BB_33DD, true), "bytes 0 and 2 written");
    assert!(e.ctl_write_strb(cc(1), 0xAABB_CCDD, 0).unwrap());
    assert_eq!(e.ctl_read(cc(1)).unwrap(), (0x11BB_33DD, true), "no strobe: nothing written");
    for (i, fields) in [
        (regs::HM_CC_CTRL, regs::HM_CC_CTRL_T_FIELDS),
        (regs::HM_CC_ALPHA, regs::HM_CC_ALPHA_T_FIELDS),
        (regs::HM_CC_CUT, regs::HM_CC_CUT_T_FIELDS),
        (regs::HM_CC_PFC, regs::HM_CC_PFC_T_FIELDS),
    ] {
        let m = field_mask(fields);
        assert_ne!(m, u32::MAX, "register {i} has reserved bits");
        for v in [u32::MAX, 0x5A5A_A5A5] {
            assert!(e.ctl_write(cc(i.into()), v).unwrap());
            assert_eq!(e.ctl_read(cc(i.into())).unwrap(), (v & m, true), "register {i} after writing {v:#x}");
        }
    }
    // A write of CNP_INTERVAL and reads of it started 0..6 cycles later: at one offset the
    // read is taken in the cycle the write executes, and the write waits one cycle.
    let (wa, ra) = (cc(regs::HM_CC_CNP_INTERVAL.into()), cc(regs::HM_CC_INC_PERIOD.into()));
    let mut done = Vec::new();
    for (k, d) in (0..6).enumerate() {
        let v = 0x100 + k as u32;
        assert!(e.ctl_write(ra, 0x7700 + k as u32).unwrap());
        let t0 = e.cycle();
        e.lite_start(Port::Ctl, LiteOp::Write { addr: wa, data: v, strb: 0xF });
        let (mut w, mut r) = (None, None);
        for c in 0..100 {
            if c == d {
                e.lite_start(Port::CtlRead, LiteOp::Read { addr: ra });
            }
            e.step();
            if let Some(x) = e.lite_take(Port::Ctl) {
                w = Some((x, e.cycle() - t0));
            }
            if let Some(x) = e.lite_take(Port::CtlRead) {
                r = Some(x);
            }
            if w.is_some() && c >= d && r.is_some() {
                break;
            }
        }
        let ((_, w_ok), w_cycles) = w.expect("the write completed");
        assert!(w_ok, "the write answered OKAY (offset {d})");
        assert_eq!(r, Some((0x7700 + k as u32, true)), "the read beside the write (offset {d})");
        assert_eq!(e.ctl_read(wa).unwrap(), (v, true), "the write took effect (offset {d})");
        done.push(w_cycles);
    }
    let fastest = *done.iter().min().unwrap();
    let waited = done.iter().filter(|&&c| c == fastest + 1).count();
    assert!(waited == 1 && done.iter().all(|&c| c <= fastest + 1), "one offset makes the write wait one cycle for a read: {done:?}");
}

/// Writes CC register `i`.
fn cc_write(b: &mut RcBench, i: u16, v: u32) {
    assert!(b.a.eng.ctl_write(regs::HM_CTL_CC + 4 * i, v).unwrap());
}

/// A QP that gets a CNP is held at 10 B/cycle for the rest of the run: first rate 10 B/cycle,
/// no timer increase, no byte-counter increase.
fn hold_at_10(b: &mut RcBench) {
    cc_write(b, 10, 10 << 20);
    cc_write(b, 2, 1 << 30);
    cc_write(b, 5, 0xFF_FFFF);
}

/// A QP that gets a CNP recovers at once: first rate = maximum, initial alpha 0 (released at
/// the scan's next visit).
fn recover_at_once(b: &mut RcBench) {
    let max = b.a.eng.ctl_read(regs::HM_CTL_CC + 4 * 6).unwrap().0;
    let alpha = b.a.eng.ctl_read(regs::HM_CTL_CC + 4 * 12).unwrap().0;
    cc_write(b, 10, max);
    cc_write(b, 12, alpha & 0xFFFF);
}

/// Engine QP `qa` WRITEs 192 KiB to the peer; a CNP for QPN `cnp_qpn` arrives first. With
/// `rate_to_set_on_first_cnp` at 10 bytes per cycle (and no increase for the run) the QP is
/// paced at that rate when the CNP is its own; with rate limiting off it runs at full speed.
/// Returns (bytes per cycle of the WRITE frames after the first 32 KiB, cuts, activations).
fn paced_write(rp_on: bool, qa: u32, cnp_qpn: u32) -> (f64, u32, u32) {
    let mut b = RcBench::new(MemCfg { latency: 40, seed: 9, ..Default::default() }).unwrap();
    let ma = b.reg_mr(true, 1, A_BUF, LEN, MrAccess::ALL).unwrap();
    let mb = b.reg_mr(false, 1, B_BUF, LEN, MrAccess::ALL).unwrap();
    let cfg = QpConfig { pmtu: 4096, ..QpConfig::default() };
    b.connect(qa, QB, cfg, cfg, 0).unwrap();
    cc_write(&mut b, 0, regs::HM_CC_CTRL_RESET & !2 | u32::from(rp_on) << 1);
    hold_at_10(&mut b);
    let rec = HdrRecord { becn: true, dscp: 48, ecn: 2, dest_qp: cnp_qpn, ..cnp_template() };
    b.a.eng.rx_q.push_back(build_frame(&rec, &[]).unwrap());
    for k in 0..6u64 {
        let wr = SendWr::new(
            k,
            SendOp::Write { remote_addr: B_BUF + k * 0x8000, rkey: mb.lkey },
            vec![Sge { addr: A_BUF + k * 0x8000, len: 0x8000, lkey: ma.lkey }],
        );
        b.post_send(qa, &wr, k == 5).unwrap();
    }
    b.run(6, 2_000_000).expect("the WRITEs complete");
    let frames: Vec<(u64, usize)> = b
        .wire
        .iter()
        .filter(|(_, e, f)| *e && decode(f).is_some_and(|(r, _)| (0x06..=0x0A).contains(&r.opcode)))
        .map(|(t, _, f)| (*t, f.len()))
        .collect();
    let mut acc = 0usize;
    let start = frames.iter().position(|&(_, l)| {
        acc += l;
        acc >= 32 * 1024
    });
    let s = start.unwrap();
    let bytes: usize = frames[s + 1..].iter().map(|&(_, l)| l).sum();
    let cycles = frames.last().unwrap().0 - frames[s].0;
    (
        bytes as f64 / cycles as f64,
        b.a.eng.counter(CNT_RP_CUTS).unwrap(),
        b.a.eng.counter(CNT_RP_ACT).unwrap(),
    )
}

#[test]
fn a_cnp_paces_the_requester() {
    let (limited, cuts, act) = paced_write(true, QA, QA);
    let (free, _, act_off) = paced_write(false, QA, QA);
    eprintln!("paced: {limited:.2} B/cycle (target 10), unpaced {free:.2} B/cycle");
    assert_eq!((act, cuts), (1, 0), "one activation, no cut (the first rate is set)");
    assert_eq!(act_off, 0, "rate limiting off: the CNP is not applied");
    assert!((limited - 10.0).abs() < 0.5, "paced at {limited:.2} B/cycle, want 10");
    assert!(free > 3.0 * limited, "unpaced {free:.2} B/cycle is not much faster than paced");
    // any QPN gets a rate limiter (slots are allocated on the first CNP) ...
    let (high, _, act_high) = paced_write(true, 3000, 3000);
    eprintln!("QP 3000 paced: {high:.2} B/cycle");
    assert_eq!(act_high, 1);
    assert!((high - 10.0).abs() < 0.5, "QP 3000 paced at {high:.2} B/cycle, want 10");
    // ... and a CNP for another QP does not slow this one down
    let (other, _, act_other) = paced_write(true, QA, 3000);
    eprintln!("CNP for another QP: {other:.2} B/cycle");
    assert_eq!(act_other, 1);
    assert!(other > 3.0 * limited, "a CNP for QP 3000 slowed QP {QA} to {other:.2} B/cycle");
    // no bubbles for an unthrottled QP: as fast with rate limiting on as with it off
    assert!((other - free).abs() < 0.01, "unthrottled QP: {other:.2} B/cycle with rate limiting on, {free:.2} off");
    // a CNP for a QPN beyond the QP table is counted and changes nothing
    let mut b = RcBench::new(MemCfg::default()).unwrap();
    let rec = HdrRecord { becn: true, dscp: 48, ecn: 2, dest_qp: 5000, ..cnp_template() };
    b.a.eng.rx_q.push_back(build_frame(&rec, &[]).unwrap());
    b.run(0, 20_000).unwrap();
    assert_eq!((b.a.eng.counter(CNT_RP_BAD).unwrap(), b.a.eng.counter(CNT_RP_ACT).unwrap()), (1, 0));
}

/// Sends CNPs for `qpns` (one frame each) and runs until the wire is quiet.
fn cnps_for(b: &mut RcBench, qpns: impl Iterator<Item = u32>) {
    for q in qpns {
        let rec = HdrRecord { becn: true, dscp: 48, ecn: 2, dest_qp: q, ..cnp_template() };
        b.a.eng.rx_q.push_back(build_frame(&rec, &[]).unwrap());
    }
    b.run(0, 200_000).unwrap();
}

/// The engine has 64 rate limiters: while 64 QPs are limited (first rate 10 B/cycle, no
/// increase, so none recovers) a CNP for a 65th QP is counted (counter 33) and not applied; a
/// further CNP for a limited QP still is. Resetting a limited QP (a QP write with state RESET)
/// detaches its limiter: a CNP for that QPN no longer reaches it, and with every limiter still
/// in use it is counted too.
#[test]
fn rate_limiter_slots_run_out_and_detach_on_qp_reset() {
    let mut b = RcBench::new(MemCfg::default()).unwrap();
    hold_at_10(&mut b);
    cnps_for(&mut b, 200..264);
    let c = |b: &mut RcBench| (b.a.eng.counter(CNT_RP_ACT).unwrap(), b.a.eng.counter(CNT_RP_BAD).unwrap());
    assert_eq!(c(&mut b), (64, 0), "64 QPs get a rate limiter");
    cnps_for(&mut b, [300, 201, 263].into_iter());
    assert_eq!(c(&mut b), (64, 1), "the 65th QP finds none; QPs 201 and 263 keep theirs");
    assert_eq!(b.a.eng.counter(CNT_CNP_RX).unwrap(), 67);
    // QP 201 is reset: its limiter is detached (and freed once it has recovered)
    let words = [0u32; desc::CTX_WORDS];
    let cmd = desc::encode_ctl_cmd(desc::HM_CTL_OP_WRITE, desc::HM_CTL_TBL_QP, 0, 201).unwrap();
    assert_eq!(b.a.eng.ctl_cmd(cmd, &words).unwrap(), desc::HM_CTL_ST_OK);
    cnps_for(&mut b, [201].into_iter());
    assert_eq!(c(&mut b), (64, 2), "a CNP for the reset QP 201 no longer reaches its old limiter");
}

/// Limiters are freed when the reaction point releases them: with the first rate at the
/// maximum and initial alpha 0 a QP is released at the scan's next visit, so 200 CNPs for
/// 200 different QPs all find a limiter, one after the other.
#[test]
fn released_rate_limiters_are_reused() {
    let mut b = RcBench::new(MemCfg::default()).unwrap();
    recover_at_once(&mut b);
    for k in 0..4u32 {
        cnps_for(&mut b, (1000 + 50 * k..1050 + 50 * k).into_iter());
    }
    let (act, bad, rel) = (
        b.a.eng.counter(CNT_RP_ACT).unwrap(),
        b.a.eng.counter(CNT_RP_BAD).unwrap(),
        b.a.eng.counter(CNT_RP_REL).unwrap(),
    );
    eprintln!("200 CNPs: {act} activations, {rel} releases, {bad} without a limiter");
    assert_eq!((act, rel, bad), (200, 200, 0));
}

const CNT_PFC_RX: u16 = 34;

/// A PFC frame (802.1Qbb) pausing the priorities in `cev` for `quanta`.
fn pfc_frame(cev: u8, quanta: u16) -> Vec<u8> {
    let mut f = vec![0x01, 0x80, 0xC2, 0x00, 0x00, 0x01, 0x02, 0, 0, 0, 0, 0x99, 0x88, 0x08, 0x01, 0x01, 0, cev];
    for i in 0..8 {
        f.extend_from_slice(&(if cev >> i & 1 != 0 { quanta } else { 0 }).to_be_bytes());
    }
    f.resize(60, 0);
    f
}

/// Engine A WRITEs 64 KiB to the peer; `frames` reach A's MAC first (at cycle 0, with
/// `later` after `delay` cycles). Returns (cycle of A's first WRITE frame, PFC frames honoured).
fn write_after(ctrl_pfc: Option<u32>, frames: &[Vec<u8>], later: Option<(u64, Vec<u8>)>) -> (u64, u32) {
    let mut b = RcBench::new(MemCfg { latency: 40, seed: 3, ..Default::default() }).unwrap();
    let ma = b.reg_mr(true, 1, A_BUF, LEN, MrAccess::ALL).unwrap();
    let mb = b.reg_mr(false, 1, B_BUF, LEN, MrAccess::ALL).unwrap();
    let cfg = QpConfig { pmtu: 4096, ..QpConfig::default() };
    b.connect(QA, QB, cfg, cfg, 0).unwrap();
    if let Some(v) = ctrl_pfc {
        assert!(b.a.eng.ctl_write(regs::HM_CTL_CC + 4 * 15, v).unwrap());
    }
    for f in frames {
        b.a.eng.rx_q.push_back(f.clone());
    }
    let t0 = b.a.eng.cycle();
    if let Some((d, f)) = later {
        while b.a.eng.cycle() < t0 + d {
            b.a.eng.step();
        }
        b.a.eng.rx_q.push_back(f);
    }
    let wr = SendWr::new(1, SendOp::Write { remote_addr: B_BUF, rkey: mb.lkey }, vec![Sge { addr: A_BUF, len: 0x1_0000, lkey: ma.lkey }]);
    b.post_send(QA, &wr, true).unwrap();
    b.run(1, 1_000_000).expect("the WRITE completes");
    let first = b
        .wire
        .iter()
        .find(|(_, e, f)| *e && decode(f).is_some_and(|(r, _)| (0x06..=0x0A).contains(&r.opcode)))
        .map(|(t, _, _)| *t)
        .expect("a WRITE frame");
    (first - t0, b.a.eng.counter(CNT_PFC_RX).unwrap())
}

#[test]
fn pfc_pauses_the_data_priority() {
    // 20,000 quanta at 1.28 cycles each (100G, 250 MHz: the reset value) = 25,600 cycles
    let (free, n0) = write_after(None, &[], None);
    let (paused, n1) = write_after(None, &[pfc_frame(1 << 3, 20_000)], None);
    let (other, n2) = write_after(None, &[pfc_frame(1 << 5, 20_000)], None);
    let (xon, n3) = write_after(None, &[pfc_frame(1 << 3, 20_000)], Some((5_000, pfc_frame(1 << 3, 0))));
    let (off, n4) = write_after(Some(328 << 16 | 0xFF << 8), &[pfc_frame(1 << 3, 20_000)], None);
    eprintln!("first WRITE frame at: free {free}, paused {paused}, other priority {other}, XON at 5000 {xon}, PFC off {off}");
    assert!(free < 3_000, "unpaused start {free}");
    assert!((25_600..25_600 + 3_000).contains(&paused), "priority 3 (DSCP 26) paused until {paused}");
    assert!(other < 3_000, "a pause of priority 5 held the data: {other}");
    assert!((5_000..5_000 + 3_000).contains(&xon), "XON released at {xon}");
    assert!(off < 3_000, "PFC not honoured when off: {off}");
    assert_eq!((n0, n1, n2, n3, n4), (0, 1, 1, 2, 0), "PFC frames honoured");
}

/// Data packets are ECN-capable (ECT(0), the QP context's ECN) when their priority's bit of the
/// ECN mask is set (the reset value: all), Not-ECT otherwise; the peer's WRITEs marked CE on a
/// Not-ECT priority are impossible, so only the engine's own frames are checked here.
#[test]
fn ecn_capable_per_priority() {
    for (mask, want) in [(0xFFu32, 2u8), (0xF7, 0), (0x08, 2)] {
        let mut b = RcBench::new(MemCfg { latency: 40, seed: 4, ..Default::default() }).unwrap();
        let ma = b.reg_mr(true, 1, A_BUF, LEN, MrAccess::ALL).unwrap();
        let mb = b.reg_mr(false, 1, B_BUF, LEN, MrAccess::ALL).unwrap();
        b.connect(QA, QB, QpConfig::default(), QpConfig::default(), 0).unwrap();
        assert!(b.a.eng.ctl_write(regs::HM_CTL_CC + 4 * 15, 328 << 16 | mask << 8 | 1).unwrap());
        let wr = SendWr::new(1, SendOp::Write { remote_addr: B_BUF, rkey: mb.lkey }, vec![Sge { addr: A_BUF, len: 8192, lkey: ma.lkey }]);
        b.post_send(QA, &wr, true).unwrap();
        b.run(1, 200_000).unwrap();
        let ecn: Vec<u8> = b.wire.iter().filter(|(_, e, _)| *e).filter_map(|(_, _, f)| decode(f)).map(|(r, _)| r.ecn).collect();
        assert!(!ecn.is_empty());
        assert!(ecn.iter().all(|&e| e == want), "mask {mask:#x} (data priority 3): ECN {ecn:?}, want {want}");
    }
}

/// No rate limiter leaks: a flood of CNPs for random QPNs (repeats, QPNs 0 and 1 and QPNs
/// beyond the table, which name no entry)
/// with QP resets racing them, under registers that release a limiter soon after its first
/// CNP (first rate = maximum, initial alpha 0); afterwards every activation has been released,
/// only the out-of-table CNPs were refused, and 64 new QPs held at a low rate still find all 64
/// limiters free (a 65th does not).
#[test]
fn no_rate_limiter_leaks_under_random_cnps_and_resets() {
    for seed in [1u64, 2, 3] {
        let mut b = RcBench::new(MemCfg::default()).unwrap();
        recover_at_once(&mut b);
        let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut rnd = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut beyond = 0u32;
        let mut sent = 0u32;
        for _round in 0..6 {
            for _ in 0..80 {
                let q = match rnd() % 10 {
                    0 => 4096 + (rnd() % 1000) as u32,
                    1..=4 => 100 + (rnd() % 8) as u32, // a few hot QPs
                    _ => (rnd() % 4096) as u32,
                };
                // (QPNs 4096 and 4097 are entries 0 and 1; QPNs 0 and 1 name no entry)
                if hematite_abi::qp::qp_entry(q, 12).is_none() {
                    beyond += 1;
                }
                let rec = HdrRecord { becn: true, dscp: 48, ecn: 2, dest_qp: q, ..cnp_template() };
                b.a.eng.rx_q.push_back(build_frame(&rec, &[]).unwrap());
                sent += 1;
            }
            // resets of hot QPs while the CNPs are arriving
            for k in 0..3 {
                let q = 100 + ((rnd() + k) % 8) as u16;
                let cmd = desc::encode_ctl_cmd(desc::HM_CTL_OP_WRITE, desc::HM_CTL_TBL_QP, 0, q).unwrap();
                assert_eq!(b.a.eng.ctl_cmd(cmd, &[0u32; desc::CTX_WORDS]).unwrap(), desc::HM_CTL_ST_OK);
            }
        }
        b.run(0, 2_000_000).unwrap();
        let cnt = |b: &mut RcBench, i| b.a.eng.counter(i).unwrap();
        let (act, rel, bad) = (cnt(&mut b, CNT_RP_ACT), cnt(&mut b, CNT_RP_REL), cnt(&mut b, CNT_RP_BAD));
        eprintln!("seed {seed}: {sent} CNPs ({beyond} beyond the table): {act} activations, {rel} releases, {bad} refused");
        assert_eq!(cnt(&mut b, CNT_CNP_RX), sent);
        assert_eq!(bad, beyond, "only CNPs for QPNs that name no entry are refused");
        assert_eq!(act, rel, "every limiter was released");
        assert!(act > 64, "more QPs were limited over the run than there are limiters");
        // now hold 64 fresh QPs: every limiter must be free
        hold_at_10(&mut b);
        cnps_for(&mut b, 3000..3064);
        assert_eq!((cnt(&mut b, CNT_RP_ACT), cnt(&mut b, CNT_RP_BAD)), (act + 64, bad), "64 limiters free");
        cnps_for(&mut b, [3064].into_iter());
        assert_eq!(cnt(&mut b, CNT_RP_BAD), bad + 1, "and no more");
    }
}
