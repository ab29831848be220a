//! Engine fuzzing (`hematite-fuzz engine`, `./hematite fuzz engine`): hostile frames with a
//! valid ICRC, aimed at live QPs of two Verilated engines while real traffic runs between them.
//!
//! An episode is two engines back to back ([`DuoBench`]) with 1-3 connected RC QP pairs that
//! carry verified real traffic (WRITE, WRITE with immediate, SEND, SEND with immediate, READ,
//! atomics, posted in waves for the whole episode), one more connected "victim" QP pair that
//! carries none, and these memory regions on each host:
//!
//! | region | registered | who may touch it |
//! |---|---|---|
//! | `BUF` (2 MiB) | PD 1, all rights | the real traffic; compared byte for byte with the transport model |
//! | `VREG` (64 KiB) | PD 2, all rights | the victim QPs' (PD 2) fuzz requests |
//! | `BAIT` (64 KiB) | PD 2, no remote rights | nobody: must never change, never be read by DMA |
//! | `UNREG` (64 KiB) | not registered | nobody |
//! | `PREG` (64 KiB) | PD 1, all rights | the liveness probes at the end |
//!
//! The injected frames (the cases) are, by kind ([`Kind`]): requests and responses to the live
//! QPs with PSNs far outside their windows (a NAK sequence error, a duplicate or a ghost: never a
//! legitimate request, so the real traffic's outcome is fixed), requests and responses inside
//! the victim QPs' windows (executed: every R_Key, address, length and opcode combination,
//! including the BAIT and UNREG ranges and other hosts' keys), UC, UD and CNP frames to live
//! QPs, frames to QPs that do not exist, and mutated copies of delivered real frames
//! ([`crate::fuzz::case`]: bit flips, truncation, length fields, opcode/QPN/PSN, header stacking;
//! a copy the receive path would accept for a live QP gets a PSN outside the window).
//!
//! Every episode checks:
//! - **no DMA outside the registered regions**: the memory model reports any read beat outside
//!   `BUF`, `VREG` and the SQ/RQ rings and any byte written outside `BUF`, `VREG` and the CQ
//!   ring; `BAIT` and `UNREG` are unchanged; no AXI protocol violation;
//! - **no corrupted real traffic**: every real completion (per QP, in order) and every byte of
//!   `BUF` on both hosts equal what the transport model predicts for the real traffic alone;
//! - **no stuck QP**: the real traffic completes within a cycle bound, and afterwards an RDMA
//!   WRITE probe in each direction of every live QP pair completes and lands;
//! - **the counters explain every frame**: for each engine, the receive path's accepted and
//!   dropped counters equal the spec's verdicts ([`hematite_model::classify`]) over every frame
//!   that reached it (real, duplicated and injected), and of the accepted ones the responder's
//!   request counter, the completer's ACK counter, the CNP counter and the "not RC" counter
//!   equal the counts of their opcodes.
//!
//! A finding is written to `OUT/engine-finding-N.txt` with the episode's seed;
//! `hematite-fuzz engine --replay SEED` runs that one episode again.

use crate::dma::MemCfg;
use crate::duo::{DuoBench, WireFaults};
use crate::host::{CQ_BASE, CQ_LOG, RQ_BASE, SQ_BASE};
use crate::Rng;
use hematite_model::record::DropReason;
use hematite_model::transport::mem::MrAccess;
use hematite_model::transport::{Cqe, QpConfig, RecvWr, SendOp, SendWr, Sge, WcStatus};
use hematite_model::{build_frame, classify, HdrRecord};
use std::collections::BTreeMap;
use std::path::Path;

const BUF: u64 = 0x10_0000;
const LEN: u64 = 0x20_0000;
const VREG: u64 = 0x40_0000;
const VLEN: u64 = 0x1_0000;
const BAIT: u64 = 0x50_0000;
const BLEN: u64 = 0x1_0000;
const UNREG: u64 = 0x60_0000;
const ULEN: u64 = 0x1_0000;
const PREG: u64 = 0x70_0000;
const PLEN: u64 = 0x1_0000;
/// The victim QP of each host.
const VQ: [u32; 2] = [100, 300];
/// More PSNs than a live QP uses in one episode: injected frames stay this far (and more)
/// from a live QP's PSN range.
const PSN_SPAN: u32 = 8192;
/// Engine counters (rtl/eng/hm_rc_engine.sv).
use hematite_abi::pkt as k;
const CNT_REQS: u16 = k::HM_CNT_REQS_RX as u16;
const CNT_RX_OK: u16 = k::HM_CNT_RX_ACCEPTED as u16;
const CNT_RX_DROP: u16 = k::HM_CNT_RX_DROPPED as u16;
const CNT_RX_OTHER: u16 = k::HM_CNT_RX_NOT_RC as u16;
const CNT_ACKS: u16 = k::HM_CNT_ACKS_RX as u16;
const CNT_CNP_RX: u16 = k::HM_CNT_CNP_RX as u16;

/// QP number of live pair `k` on host `h`.
fn live_q(h: usize, k: u32) -> u32 {
    if h == 0 {
        10 + k
    } else {
        200 + k
    }
}

/// Per QP k (on each host), what that QP's work writes: the peer's WRITE targets (+0), READ
/// targets (+0x1_8000), receive buffers (+0x2_8000), atomic results (+0x3_8000) and atomic
/// targets (+0x3_C000). SEND/WRITE sources are [BUF, BUF + 0x2_0000) and READ sources
/// [BUF + 0x4_0000, BUF + 0x5_0000): never written.
fn qreg(k: u64) -> u64 {
    BUF + 0x10_0000 + k * 0x4_0000
}

/// Kinds of injected frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// A request to a live QP, PSN outside its window.
    LiveRequest,
    /// A response (ACK/NAK, READ response, atomic ACK) to a live QP, PSN outside its window.
    LiveResponse,
    /// A request inside the victim QP's window.
    VictimRequest,
    /// A response to the victim QP (which has nothing outstanding).
    VictimResponse,
    /// UC, UD or CNP to a live QP.
    OtherService,
    /// Any opcode to a QP number that does not exist.
    NoQp,
    /// A mutated copy of a delivered real frame.
    Mutant,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::LiveRequest => "request to a live QP, PSN outside its window",
            Kind::LiveResponse => "response to a live QP, PSN outside its window",
            Kind::VictimRequest => "request inside the victim QP's window",
            Kind::VictimResponse => "response to the victim QP",
            Kind::OtherService => "UC / UD / CNP to a live QP",
            Kind::NoQp => "to a QP that does not exist",
            Kind::Mutant => "mutated copy of a delivered frame",
        }
    }
}

/// What a campaign did and found.
#[derive(Debug, Default)]
pub struct EngineReport {
    /// Injected frames.
    pub cases: u64,
    pub findings: u64,
    pub episodes: u64,
    /// Simulated cycles (one engine's clock).
    pub cycles: u64,
    /// Real work requests completed and verified.
    pub real_wrs: u64,
    /// Injected frames per kind.
    pub kinds: BTreeMap<Kind, u64>,
    /// Injected frames per receive verdict (the spec's drop reason, or "accepted").
    pub verdicts: BTreeMap<&'static str, u64>,
    /// Sums over both engines and every episode: NAKs and duplicates the responders saw, what
    /// the responders and completers dropped.
    pub engine: BTreeMap<&'static str, u64>,
}

/// Options of a campaign.
#[derive(Debug, Clone)]
pub struct EngineFuzzOpts {
    /// Frames to inject in all.
    pub count: u64,
    pub seed: u64,
    /// Injected frames per episode.
    pub per_episode: u64,
    /// Wire faults on the real traffic too (loss, corruption, duplication, reordering).
    pub wire_faults: bool,
    /// Breaks the campaign's own premise on purpose, to show that its checks catch it (tests).
    pub self_test: Option<SelfTest>,
}

/// Deliberate faults of the harness: a campaign run with one must report findings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SelfTest {
    /// Requests to live QPs carry PSNs inside the window (legitimate-looking forgeries: the
    /// real traffic's completions and memory no longer match the model's).
    InWindowRequests,
    /// BAIT is registered with remote rights in the engines (but not in the model): fuzz
    /// requests write it.
    BaitWritable,
}

struct Episode {
    d: DuoBench,
    key: [u32; 2],
    vkey: [u32; 2],
    bkey: [u32; 2],
    pkey: [u32; 2],
    nqp: u32,
    /// (sq_psn, rq_psn) of live pair k on host h: psn[k][h].
    psn: Vec<[(u32, u32); 2]>,
    vpsn: [(u32, u32); 2],
    /// Requests injected into each victim's window so far.
    vsent: [u32; 2],
    /// The victims' configurations (for their recovery after a fatal NAK).
    vcfg: [QpConfig; 2],
    /// Victim recoveries.
    vreloads: u64,
    /// A harness error met while making a frame.
    fail: Option<String>,
    /// Wire frames scanned for the victims' answers, and the expected PSN they tell.
    vscan: [usize; 2],
    vepsn: [Option<u32>; 2],
    pmtu: u32,
    self_test: Option<SelfTest>,
    /// A header record of a real frame toward each host (addresses, ports, P_Key).
    templ: [Option<HdrRecord>; 2],
    /// Receive buffer slot counters per (host, pair).
    slots: Vec<[u64; 2]>,
    /// Real work requests posted.
    posted: u64,
}

fn sge(addr: u64, len: u32, lkey: u32) -> Sge {
    Sge { addr, len, lkey }
}

fn psn_add(p: u32, d: i64) -> u32 {
    ((p as i64 + d).rem_euclid(1 << 24)) as u32
}

fn setup(seed: u64, faults: bool, st: Option<SelfTest>) -> Result<Episode, String> {
    let mut rng = Rng::new(seed);
    let wf = if faults {
        WireFaults { drop_ppm: 5_000, corrupt_ppm: 3_000, dup_ppm: 5_000, delay_ppm: 5_000, max_extra: 2_000, latency: 100 }
    } else {
        WireFaults { latency: 60 + rng.next() % 150, ..WireFaults::default() }
    };
    let mut d = DuoBench::new(MemCfg { latency: 40 + rng.next() % 80, stall_pct: (rng.next() % 3) as u32 * 5, seed, ..Default::default() }, wf)?;
    d.record_delivered = true;
    let (mut key, mut vkey, mut bkey, mut pkey) = ([0; 2], [0; 2], [0; 2], [0; 2]);
    for h in 0..2 {
        for (base, len) in [(BUF, LEN), (VREG, VLEN), (BAIT, BLEN), (UNREG, ULEN), (PREG, PLEN)] {
            let data: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
            d.h[h].fill(base, &data);
        }
        key[h] = d.h[h].reg_mr(1, BUF, LEN, MrAccess::ALL)?.lkey;
        vkey[h] = d.h[h].reg_mr(2, VREG, VLEN, MrAccess::ALL)?.lkey;
        pkey[h] = d.h[h].reg_mr(1, PREG, PLEN, MrAccess::ALL)?.lkey;
        bkey[h] = d.h[h].reg_mr(2, BAIT, BLEN, MrAccess { local_write: true, ..MrAccess::NONE })?.lkey;
        if st == Some(SelfTest::BaitWritable) {
            // the engine's entry alone: the model (the oracle) keeps BAIT without remote rights
            let mr = d.h[h].refn.mrs.get(bkey[h]).ok_or("BAIT MR")?;
            let words = hematite_model::desc::encode_mr_ctx(&hematite_model::transport::mem::Mr { access: MrAccess::ALL, ..mr }, true).map_err(|e| e.to_string())?;
            let cmd = hematite_model::desc::encode_ctl_cmd(hematite_model::desc::HM_CTL_OP_WRITE, hematite_model::desc::HM_CTL_TBL_MR, 0, (bkey[h] >> 8) as u16).map_err(|e| e.to_string())?;
            d.h[h].eng.ctl_cmd(cmd, &words)?;
        }
        let m = &mut d.h[h].eng.mem;
        m.read_windows = Some(vec![(BUF, BUF + LEN), (VREG, VREG + VLEN), (PREG, PREG + PLEN), (SQ_BASE, SQ_BASE + 0x200_0000), (RQ_BASE, RQ_BASE + 0x200_0000)]);
        m.write_windows = Some(vec![(BUF, BUF + LEN), (VREG, VREG + VLEN), (PREG, PREG + PLEN), (CQ_BASE, CQ_BASE + (32u64 << CQ_LOG))]);
    }
    let pmtu = 256 << (rng.next() % 5);
    let nqp = 1 + (rng.next() % 3) as u32;
    let mut psn = Vec::new();
    for k in 0..nqp {
        let cfg = QpConfig { pmtu, sq_psn: (rng.next() as u32) & 0xFF_FFFF, rq_psn: (rng.next() as u32) & 0xFF_FFFF, timeout: 3, ..Default::default() };
        d.connect(live_q(0, k), live_q(1, k), cfg, 0)?;
        psn.push([(cfg.sq_psn, cfg.rq_psn), (cfg.rq_psn, cfg.sq_psn)]);
    }
    // the victims are in PD 2: the real traffic's keys (PD 1) are not theirs
    let vcfg = QpConfig { pd: 2, pmtu, sq_psn: (rng.next() as u32) & 0xFF_FFFF, rq_psn: (rng.next() as u32) & 0xFF_FFFF, timeout: 3, ..Default::default() };
    d.connect(VQ[0], VQ[1], vcfg, 0)?;
    Ok(Episode {
        d,
        key,
        vkey,
        bkey,
        pkey,
        nqp,
        psn,
        vpsn: [(vcfg.sq_psn, vcfg.rq_psn), (vcfg.rq_psn, vcfg.sq_psn)],
        vsent: [0; 2],
        vcfg: [QpConfig { dest_qpn: VQ[1], ..vcfg }, QpConfig { dest_qpn: VQ[0], av: vcfg.av.reversed(), sq_psn: vcfg.rq_psn, rq_psn: vcfg.sq_psn, ..vcfg }],
        vreloads: 0,
        fail: None,
        vscan: [0; 2],
        vepsn: [None; 2],
        pmtu,
        self_test: st,
        templ: [None, None],
        slots: vec![[0; 2]; nqp as usize],
        posted: 0,
    })
}

/// Posts one random real work request from host `h` on live pair `k` (receives first on the
/// peer for SENDs and WRITEs with immediate, so that the responder never answers RNR).
fn post_real(ep: &mut Episode, rng: &mut Rng, h: usize, k: u32) -> Result<(), String> {
    let (l, r) = (ep.key[h], ep.key[1 - h]);
    let a = rng.next() % 0x1_0000;
    let b = rng.next() % 0x1_0000;
    let len = (rng.next() % 9000) as u32;
    let n = ep.posted;
    let id = (h as u64) << 40 | (k as u64) << 32 | n;
    let q = qreg(k as u64);
    let peer_q = live_q(1 - h, k);
    let recv = |ep: &mut Episode, sgl: Vec<Sge>| -> Result<(), String> {
        let slot = ep.slots[k as usize][1 - h] % 16;
        ep.slots[k as usize][1 - h] += 1;
        ep.d.h[1 - h].post_recv(peer_q, &RecvWr { wr_id: 9000 + slot, sgl: sgl.iter().map(|s| Sge { addr: s.addr + slot * 0x1000, ..*s }).collect() })
    };
    let wr = match rng.next() % 8 {
        0 | 1 => SendWr::new(id, SendOp::Write { remote_addr: q + b, rkey: r }, vec![sge(BUF + a, len, l)]),
        2 => {
            recv(ep, vec![sge(q + 0x2_8000, 0x1000, r)])?;
            SendWr::new(id, SendOp::SendImm(n as u32), vec![sge(BUF + a, len % 0x1000, l)])
        }
        3 => {
            recv(ep, vec![sge(q + 0x2_8000, 0x1000, r)])?;
            SendWr::new(id, SendOp::WriteImm { remote_addr: q + b, rkey: r, imm: n as u32 }, vec![sge(BUF + a, len, l)])
        }
        4 => SendWr::new(id, SendOp::Read { remote_addr: BUF + 0x4_0000 + (b & 0x7FFF), rkey: r }, vec![sge(q + 0x1_8000 + (a & 0x7FFF), len.min(0x8000), l)]),
        5 => SendWr::new(id, SendOp::FetchAdd { remote_addr: q + 0x3_C000 + (b & 0x7F8), rkey: r, add: n }, vec![sge(q + 0x3_8000 + (a & 0x3FF8), 8, l)]),
        6 => SendWr::new(id, SendOp::CmpSwap { remote_addr: q + 0x3_C800 + (b & 0x7F8), rkey: r, compare: 0, swap: n }, vec![sge(q + 0x3_8000 + (a & 0x3FF8), 8, l)]),
        _ => {
            recv(ep, vec![sge(q + 0x2_8000, 0x800, r), sge(q + 0x2_8800, 0x800, r)])?;
            SendWr::new(id, SendOp::Send, vec![sge(BUF + a, len % (0x1000 - 7), l), sge(BUF + b, 7, l)])
        }
    };
    ep.posted += 1;
    ep.d.h[h].post_send(live_q(h, k), &wr, true)
}

/// Request opcodes (the responder's) and response opcodes (the completer's), RC.
const RC_REQ: [u8; 17] = [0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0A, 0x0B, 0x0C, 0x13, 0x14, 0x16, 0x17];
const RC_RSP: [u8; 6] = [0x0D, 0x0E, 0x0F, 0x10, 0x11, 0x12];
const OTHER: [u8; 15] = [0x20, 0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x27, 0x28, 0x29, 0x2A, 0x2B, 0x64, 0x65, 0x81];

fn pick<T: Copy>(rng: &mut Rng, v: &[T]) -> T {
    v[(rng.next() % v.len() as u64) as usize]
}

fn is_req(op: u8) -> bool {
    RC_REQ.contains(&op)
}

fn is_rsp(op: u8) -> bool {
    RC_RSP.contains(&op)
}

/// A PSN far outside the window of a live QP whose PSNs run from `base`.
fn far_psn(rng: &mut Rng, base: u32) -> u32 {
    let off = 1000 + (rng.next() % (1 << 21)) as i64;
    if rng.next() % 2 == 0 {
        psn_add(base, PSN_SPAN as i64 + off)
    } else {
        psn_add(base, -off)
    }
}

/// The PSN range a frame to live QP `k` of host `dst` must avoid: requests are judged against
/// the responder's window (the peer requester's PSNs: `dst`'s rq_psn), responses against the
/// requester's (`dst`'s sq_psn).
fn live_base(ep: &Episode, dst: usize, k: u32, op: u8) -> u32 {
    if is_rsp(op) {
        ep.psn[k as usize][dst].0
    } else {
        ep.psn[k as usize][dst].1
    }
}

/// Random RETH / AtomicETH / AETH fields and payload for `rec` (toward host `dst`).
fn fill_fields(ep: &Episode, rng: &mut Rng, rec: &mut HdrRecord, dst: usize) -> Vec<u8> {
    let info = hematite_model::opcode::info(rec.opcode);
    // a region and its key together most of the time (the access checks), else any mix
    let (va, rkey) = match rng.next() % 10 {
        0 | 1 => (BUF + rng.next() % LEN, ep.key[dst]),
        2 | 3 | 4 => (VREG + rng.next() % VLEN, ep.vkey[dst]),
        5 => (BAIT + rng.next() % BLEN, ep.bkey[dst]),
        6 => (UNREG + rng.next() % ULEN, ep.vkey[dst]),
        7 => (VREG + VLEN - rng.next() % 64, ep.vkey[dst]),
        _ => {
            let va = match rng.next() % 7 {
                0 => BUF + rng.next() % LEN,
                1 => VREG + rng.next() % VLEN,
                2 => BAIT + rng.next() % BLEN,
                3 => UNREG + rng.next() % ULEN,
                4 => BUF.wrapping_sub(rng.next() % 64),
                5 => 0,
                _ => rng.next(),
            };
            let rkey = match rng.next() % 6 {
                0 => ep.key[dst],
                1 => ep.vkey[dst],
                2 => ep.bkey[dst],
                3 => if rng.next() % 2 == 0 { ep.key[1 - dst] } else { ep.pkey[dst] },
                4 => ep.vkey[dst] ^ (1 + rng.next() as u32 % 255),
                _ => rng.next() as u32,
            };
            (va, rkey)
        }
    };
    rec.va = va;
    rec.rkey = rkey;
    if ep.self_test == Some(SelfTest::BaitWritable) && rec.dest_qp == VQ[dst] {
        rec.va = BAIT + rng.next() % (BLEN / 2);
        rec.rkey = ep.bkey[dst];
    }
    if rec.opcode == 0x13 || rec.opcode == 0x14 || rng.next() % 4 == 0 {
        rec.va &= !7;
    }
    let plen = match info {
        Some(i) if i.no_payload => 0,
        _ => match rng.next() % 8 {
            0 => 0,
            1 => 1 + rng.next() as usize % 8,
            2 => ep.pmtu as usize,
            3 => ep.pmtu as usize - 1 - rng.next() as usize % 3,
            4 => ep.pmtu as usize + 1 + rng.next() as usize % 8,
            5 => 4096,
            6 if rng.next() % 3 == 0 => 4097 + rng.next() as usize % 64,
            _ => rng.next() as usize % 4097,
        },
    };
    let plen = match info {
        Some(i) if !i.end && rng.next() % 5 != 0 => plen & !3,
        _ => plen,
    };
    rec.dma_len = match rng.next() % 6 {
        0 => plen as u32,
        1 => 0,
        2 => ep.pmtu * (1 + rng.next() as u32 % 4),
        3 => rng.next() as u32 % 0x2_0000,
        4 => 0x8000_0000 | rng.next() as u32,
        _ => rng.next() as u32 % 64,
    };
    rec.swap_add = rng.next();
    rec.compare = if rng.next() % 2 == 0 { 0 } else { rng.next() };
    rec.syndrome = match rng.next() % 6 {
        0 => 0x1F,
        1 => (rng.next() % 32) as u8,
        2 => 0x20 | (rng.next() % 32) as u8,
        3 => 0x60 | (rng.next() % 5) as u8,
        _ => rng.next() as u8,
    };
    rec.msn = rng.next() as u32 & 0xFF_FFFF;
    rec.atomic_orig = rng.next();
    rec.ackreq = rng.next() % 2 == 0;
    rec.se = rng.next() % 4 == 0;
    rec.ecn = if rng.next() % 8 == 0 { 3 } else { rec.ecn };
    (0..plen).map(|_| rng.next() as u8).collect()
}

/// The expected PSN of host `dst`'s victim responder, from its latest answer on the wire (an
/// ACK or READ response for PSN p: p + 1; a NAK: p), or its initial PSN.
fn victim_epsn(ep: &mut Episode, dst: usize) -> Result<u32, String> {
    let mut fatal = false;
    while ep.vscan[dst] < ep.d.wire.len() {
        let (_, from, f) = &ep.d.wire[ep.vscan[dst]];
        ep.vscan[dst] += 1;
        if *from != dst {
            continue;
        }
        let o = classify(f);
        if o.reason.is_some() || o.rec.dest_qp != VQ[1 - dst] || !is_rsp(o.rec.opcode) {
            continue;
        }
        let syn = o.rec.syndrome;
        let nak = o.rec.opcode == 0x11 && syn >> 5 != 0;
        fatal = o.rec.opcode == 0x11 && (0x61..=0x64).contains(&syn);
        ep.vepsn[dst] = Some(if nak { o.rec.psn } else { psn_add(o.rec.psn, 1) });
    }
    if fatal {
        // a NAK that put the victim into the error state: bring it back, as a driver would
        ep.d.h[dst].reload_qp(VQ[dst], ep.vcfg[dst], 0)?;
        ep.vepsn[dst] = None;
        ep.vreloads += 1;
    }
    Ok(ep.vepsn[dst].unwrap_or(ep.vpsn[dst].1))
}

/// One injected frame toward host `dst`, or None when this draw cannot be built (the caller
/// draws again).
fn gen_frame(ep: &mut Episode, rng: &mut Rng, dst: usize, now: u64) -> Option<(Kind, Vec<u8>)> {
    let templ = ep.templ[dst]?;
    let mut rec = templ;
    let k = (rng.next() % ep.nqp as u64) as u32;
    let kind = match rng.next() % 100 {
        0..=24 => Kind::LiveRequest,
        25..=44 => Kind::LiveResponse,
        45..=69 => Kind::VictimRequest,
        70..=74 => Kind::VictimResponse,
        75..=79 => Kind::OtherService,
        80..=84 => Kind::NoQp,
        _ => Kind::Mutant,
    };
    match kind {
        Kind::LiveRequest | Kind::LiveResponse => {
            rec.opcode = if kind == Kind::LiveRequest { pick(rng, &RC_REQ) } else { pick(rng, &RC_RSP) };
            rec.dest_qp = live_q(dst, k);
            rec.psn = far_psn(rng, live_base(ep, dst, k, rec.opcode));
            if ep.self_test == Some(SelfTest::InWindowRequests) && kind == Kind::LiveRequest {
                rec.opcode = pick(rng, &[0x0A, 0x04]);
                rec.psn = psn_add(live_base(ep, dst, k, rec.opcode), (rng.next() % 8) as i64);
            }
        }
        Kind::VictimRequest => {
            // mostly opcodes that start a message (the others are mostly sequence errors)
            rec.opcode = if rng.next() % 10 < 7 { pick(rng, &[0x04, 0x05, 0x06, 0x0A, 0x0B, 0x0C, 0x13, 0x14, 0x17]) } else { pick(rng, &RC_REQ) };
            rec.dest_qp = VQ[dst];
            // the victim responder's expected PSN, as its last answer on the wire tells
            let e = match victim_epsn(ep, dst) {
                Ok(e) => e,
                Err(e) => {
                    ep.fail = Some(e);
                    return None;
                }
            };
            rec.psn = psn_add(e, (rng.next() % 4) as i64 - (rng.next() % 8 == 0) as i64);
            ep.vsent[dst] += 1;
        }
        Kind::VictimResponse => {
            rec.opcode = pick(rng, &RC_RSP);
            rec.dest_qp = VQ[dst];
            rec.psn = psn_add(ep.vpsn[dst].0, (rng.next() % 12) as i64 - 4);
        }
        Kind::OtherService => {
            rec.opcode = pick(rng, &OTHER);
            rec.dest_qp = live_q(dst, k);
            rec.psn = rng.next() as u32 & 0xFF_FFFF;
        }
        Kind::NoQp => {
            rec.opcode = pick(rng, &[&RC_REQ[..], &RC_RSP[..]].concat());
            rec.dest_qp = match rng.next() % 4 {
                0 => 0,
                1 => 1,
                2 => 2 + (rng.next() % 8) as u32,
                _ => rng.next() as u32 & 0xFF_FFFF,
            };
            if (10..10 + ep.nqp).contains(&rec.dest_qp) || (200..200 + ep.nqp).contains(&rec.dest_qp) || VQ.contains(&rec.dest_qp) {
                rec.dest_qp |= 0x80_0000;
            }
            rec.psn = rng.next() as u32 & 0xFF_FFFF;
        }
        Kind::Mutant => {
            // a real frame toward dst that has certainly arrived already
            let lat = ep.d.faults.latency + ep.d.faults.max_extra + 500;
            let cands: Vec<usize> = (0..ep.d.wire.len()).filter(|&i| ep.d.wire[i].1 != dst && ep.d.wire[i].0 + lat < now).collect();
            if cands.is_empty() {
                return None;
            }
            let seed = ep.d.wire[pick(rng, &cands)].2.clone();
            let f = crate::fuzz::case(&seed, rng);
            let o = classify(&f);
            if o.reason.is_some() || hematite_model::opcode::info(o.rec.opcode).map(|i| i.class) != Some(hematite_model::opcode::Transport::Rc) {
                return Some((kind, f));
            }
            let live = (0..ep.nqp).find(|&k| live_q(dst, k) == o.rec.dest_qp);
            let Some(k) = live else { return Some((kind, f)) };
            // accepted for a live QP: outside its window, like every other injected frame
            let mut r = o.rec;
            r.psn = far_psn(rng, live_base(ep, dst, k, r.opcode));
            let off = r.payload_off as usize;
            let payload = f.get(off..off + r.payload_len as usize)?.to_vec();
            return build_frame(&r, &payload).ok().map(|f| (kind, f));
        }
    }
    let payload = fill_fields(ep, rng, &mut rec, dst);
    rec.payload_len = payload.len() as u16;
    build_frame(&rec, &payload).ok().map(|f| (kind, f))
}

/// Real CQEs of host h (send and receive completions, per QP) and the model's prediction.
fn compare_cqes(ep: &Episode, model: &[Vec<(u32, Vec<Cqe>, Vec<Cqe>)>]) -> Result<(), String> {
    for h in 0..2 {
        let (got_r, got_s) = ep.d.h[h].split_cqes();
        for (q, ws, wr) in &model[h] {
            let gs: Vec<Cqe> = got_s.iter().filter(|c| c.qpn == *q).copied().collect();
            let gr: Vec<Cqe> = got_r.iter().filter(|c| c.qpn == *q).copied().collect();
            if gs != *ws {
                return Err(format!("host {h} QP {q}: send completions differ from the model's\n  engine {gs:?}\n  model  {ws:?}"));
            }
            if gr != *wr {
                return Err(format!("host {h} QP {q}: receive completions differ from the model's\n  engine {gr:?}\n  model  {wr:?}"));
            }
        }
        let other: Vec<_> = ep.d.h[h].cqes.iter().filter(|c| !(0..ep.nqp).any(|k| live_q(h, k) == c.cqe.qpn)).collect();
        if !other.is_empty() {
            return Err(format!("host {h}: completions on QPs without work: {other:?}"));
        }
    }
    Ok(())
}

/// `probed`: after the probes, which wrote PREG.
fn check_memory(ep: &Episode, probed: bool) -> Result<(), String> {
    for h in 0..2 {
        for (name, base, len) in [("real traffic (BUF)", BUF, LEN), ("BAIT (no remote rights)", BAIT, BLEN), ("UNREG (not registered)", UNREG, ULEN), ("PREG (probes only)", PREG, PLEN)] {
            if probed && base == PREG {
                continue;
            }
            if let Some(a) = ep.d.h[h].mem_diff(base, len as usize) {
                return Err(format!("host {h}: {name} memory differs from the model's first at {a:#x}"));
            }
        }
        let v = ep.d.h[h].eng.violations();
        if !v.is_empty() {
            let n = v.len();
            return Err(format!("host {h}: {n} DMA violations, first: {}", v[..n.min(5)].join("; ")));
        }
    }
    Ok(())
}

/// The counters of each engine explain every frame that reached it.
fn check_counters(ep: &mut Episode) -> Result<(), String> {
    for h in 0..2 {
        let (mut ok, mut drop, mut req, mut ack, mut cnp, mut other) = (0u32, 0u32, 0u32, 0u32, 0u32, 0u32);
        for f in &ep.d.delivered[h] {
            let o = classify(f);
            if o.reason.is_some() {
                drop += 1;
                continue;
            }
            ok += 1;
            let op = o.rec.opcode;
            // (UC packets, 0x20-0x2B, are the responder's too: dropped there for an RC QP)
            if is_req(op) || (0x20..=0x2B).contains(&op) {
                req += 1;
            } else if is_rsp(op) {
                ack += (op == 0x11) as u32;
            } else if op == 0x81 {
                cnp += 1;
            } else {
                other += 1;
            }
        }
        let e = &mut ep.d.h[h].eng;
        for (name, i, want) in [
            ("receive path accepted", CNT_RX_OK, ok),
            ("receive path dropped", CNT_RX_DROP, drop),
            ("responder requests", CNT_REQS, req),
            ("completer ACKs", CNT_ACKS, ack),
            ("CNPs received", CNT_CNP_RX, cnp),
            ("neither RC nor UC (UD)", CNT_RX_OTHER, other),
        ] {
            let got = e.counter(i)?;
            if got != want {
                return Err(format!("host {h}: counter {i} ({name}) is {got}, the frames that reached the engine say {want}"));
            }
        }
    }
    Ok(())
}

/// After everything: one RDMA WRITE each way on every live pair must complete and land.
fn probe(ep: &mut Episode, rng: &mut Rng) -> Result<(), String> {
    let before = [ep.d.h[0].cqes.len(), ep.d.h[1].cqes.len()];
    let mut want = Vec::new();
    for k in 0..ep.nqp {
        for h in 0..2 {
            let data: Vec<u8> = (0..256).map(|_| rng.next() as u8).collect();
            let src = BUF + 0x3_0000 + (k as u64 * 2 + h as u64) * 0x100;
            // the probe's source lies in BUF's never-written part; the model memory gets it too
            ep.d.h[h].fill(src, &data);
            let dst = PREG + (k as u64 * 2 + h as u64) * 0x400;
            let wr = SendWr::new(0xBEEF_0000 | (k as u64) << 4 | h as u64, SendOp::Write { remote_addr: dst, rkey: ep.pkey[1 - h] }, vec![sge(src, 256, ep.key[h])]);
            ep.d.h[h].post_send(live_q(h, k), &wr, true)?;
            want.push((h, dst, data));
        }
    }
    let n = ep.nqp as usize;
    ep.d.run(400_000, |d| d.h[0].cqes.len() >= before[0] + n && d.h[1].cqes.len() >= before[1] + n)
        .map_err(|e| format!("a live QP is stuck: the WRITE probes did not complete: {e}"))?;
    for h in 0..2 {
        for c in &ep.d.h[h].cqes[before[h]..] {
            if c.cqe.status != WcStatus::Success {
                return Err(format!("host {h}: probe WRITE on QP {} completed {:?}", c.cqe.qpn, c.cqe.status));
            }
        }
    }
    for (h, dst, data) in want {
        if ep.d.h[1 - h].eng.mem.mem.read(dst, data.len()) != data {
            return Err(format!("probe WRITE from host {h} did not land at {dst:#x} on host {}", 1 - h));
        }
    }
    Ok(())
}

/// For a finding where the real traffic did not complete: per incomplete QP, the completions
/// it lacks and the last 30 frames of its pair (cycle, direction, opcode, PSN, syndrome), and
/// the engine's go-back-N counters.
fn stuck_detail(ep: &mut Episode, model: &[Vec<(u32, Vec<Cqe>, Vec<Cqe>)>]) -> String {
    let mut detail = String::new();
    for h in 0..2 {
        for (q, ws, wr) in &model[h] {
            let got: Vec<u64> = ep.d.h[h].cqes.iter().filter(|c| c.cqe.qpn == *q).map(|c| c.cqe.wr_id).collect();
            if got.len() == ws.len() + wr.len() {
                continue;
            }
            let missing: Vec<String> = ws.iter().chain(wr.iter()).skip(got.len().min(ws.len() + wr.len())).map(|c| format!("{:#x} {:?}", c.wr_id, c.opcode)).collect();
            detail += &format!("\n  host {h} QP {q}: {} of {} completions (model's later ones: {missing:?})", got.len(), ws.len() + wr.len());
            let k = if h == 0 { *q - 10 } else { *q - 200 };
            let peer = live_q(1 - h, k);
            let fr: Vec<String> = ep
                .d
                .wire
                .iter()
                .filter_map(|(t, from, f)| {
                    let o = classify(f);
                    let mine = (*from != h && o.rec.dest_qp == *q) || (*from == h && o.rec.dest_qp == peer);
                    (o.reason.is_none() && mine).then(|| format!("{t}:{from}>{:#04x}/{:#x}/{:#x}", o.rec.opcode, o.rec.psn, o.rec.syndrome))
                })
                .collect();
            let keep = std::env::var("HEMATITE_FUZZ_FRAMES").ok().and_then(|v| v.parse().ok()).unwrap_or(30usize);
            detail += &format!("\n  frames: {}", fr[fr.len().saturating_sub(keep)..].join(" "));
            if std::env::var_os("HEMATITE_FUZZ_TRACE").is_some() {
                // every frame of the pair, fault-schedule fates and injected frames included
                let mut all: Vec<(u64, String)> = Vec::new();
                for (i, (t, from, f)) in ep.d.wire.iter().enumerate() {
                    let o = classify(f);
                    if o.reason.is_none() && ((*from != h && o.rec.dest_qp == *q) || (*from == h && o.rec.dest_qp == peer)) {
                        all.push((*t, format!("{t} {from}>{} op {:#04x} psn {:#x} syn {:#x} msn {:#x} len {} {}", 1 - from, o.rec.opcode, o.rec.psn, o.rec.syndrome, o.rec.msn, o.rec.payload_len, ep.d.fates[i])));
                    }
                }
                for (t, dst, f) in &ep.d.injected_log {
                    let o = classify(f);
                    if o.rec.dest_qp == *q && *dst == h || o.rec.dest_qp == peer && *dst != h {
                        all.push((*t, format!("{t} inj>{dst} op {:#04x} psn {:#x} syn {:#x} {:?}", o.rec.opcode, o.rec.psn, o.rec.syndrome, o.reason.map(DropReason::name))));
                    }
                }
                for c in ep.d.h[h].cqes.iter().filter(|c| c.cqe.qpn == *q) {
                    all.push((c.cycle, format!("{} cqe h{h} {:#x} {:?} {:?}", c.cycle, c.cqe.wr_id, c.cqe.opcode, c.cqe.status)));
                }
                for c in ep.d.h[1 - h].cqes.iter().filter(|c| c.cqe.qpn == peer) {
                    all.push((c.cycle, format!("{} cqe h{} {:#x} {:?} {:?}", c.cycle, 1 - h, c.cqe.wr_id, c.cqe.opcode, c.cqe.status)));
                }
                all.sort_by_key(|a| a.0);
                for (_, l) in all {
                    eprintln!("{l}");
                }
            }
        }
        let e = &mut ep.d.h[h].eng;
        detail += &format!(
            "\n  host {h}: retries {:?}, timeouts {:?}, NAK seq sent {:?}, RNR sent {:?}",
            e.counter(k::HM_CNT_RETRIES as u16).unwrap_or(0),
            e.counter(k::HM_CNT_ACK_TIMEOUTS as u16).unwrap_or(0),
            e.counter(k::HM_CNT_SEQ_NAKS_TX as u16).unwrap_or(0),
            e.counter(k::HM_CNT_RNR_NAKS_TX as u16).unwrap_or(0)
        );
    }
    detail
}

/// One episode: `n` injected frames; Err(description) is a finding.
fn episode(seed: u64, n: u64, faults: bool, st: Option<SelfTest>, rep: &mut EngineReport) -> Result<(), String> {
    let mut ep = setup(seed, faults, st)?;
    let mut rng = Rng::new(seed ^ 0xF022);
    for k in 0..ep.nqp {
        for h in 0..2 {
            for _ in 0..2 {
                post_real(&mut ep, &mut rng, h, k)?;
            }
        }
    }
    const SLICE: u64 = 512;
    let start = ep.d.h[0].eng.cycle();
    let mut injected = 0u64;
    while injected < n {
        for _ in 0..SLICE {
            ep.d.tick()?;
        }
        let now = ep.d.h[0].eng.cycle();
        if now - start > 200_000 + n * 2_000 {
            return Err(format!("only {injected} of {n} frames injected after {} cycles", now - start));
        }
        for dst in 0..2 {
            if ep.templ[dst].is_none() {
                ep.templ[dst] = ep.d.wire.iter().filter(|w| w.1 != dst).find_map(|w| {
                    let o = classify(&w.2);
                    o.reason.is_none().then_some(o.rec)
                });
            }
        }
        if ep.templ[0].is_none() || ep.templ[1].is_none() {
            continue;
        }
        // more real work while the injection goes on (a WR every other slice on average)
        if rng.next() % 2 == 0 && ep.posted < 40 * ep.nqp as u64 {
            let (h, k) = ((rng.next() % 2) as usize, (rng.next() % ep.nqp as u64) as u32);
            post_real(&mut ep, &mut rng, h, k)?;
        }
        let burst = (1 + rng.next() % 5).min(n - injected);
        let mut made = 0;
        for _ in 0..burst * 4 {
            if made == burst {
                break;
            }
            let dst = (rng.next() % 2) as usize;
            let g = gen_frame(&mut ep, &mut rng, dst, now);
            if let Some(e) = ep.fail.take() {
                return Err(e);
            }
            if let Some((kind, f)) = g {
                *rep.kinds.entry(kind).or_default() += 1;
                let v = classify(&f).reason.map_or("accepted", DropReason::name);
                *rep.verdicts.entry(v).or_default() += 1;
                ep.d.inject(now + rng.next() % SLICE, dst, f);
                made += 1;
            }
        }
        injected += made;
        rep.cases += made;
    }
    // the real traffic as the model runs it alone
    ep.d.run_reference();
    let mut model: Vec<Vec<(u32, Vec<Cqe>, Vec<Cqe>)>> = Vec::new();
    for h in 0..2 {
        let r = &mut ep.d.h[h].refn;
        model.push((0..ep.nqp).map(|k| {
            let q = live_q(h, k);
            (q, r.poll_send_cq(q), r.poll_recv_cq(q))
        }).collect());
    }
    let want: Vec<usize> = model.iter().map(|m| m.iter().map(|(_, s, r)| s.len() + r.len()).sum()).collect();
    let res = ep.d.run(3_000_000, |d| d.h[0].cqes.len() >= want[0] && d.h[1].cqes.len() >= want[1]);
    rep.cycles += ep.d.h[0].eng.cycle();
    if let Err(e) = res {
        return Err(format!("the real traffic did not complete: {e}{}", stuck_detail(&mut ep, &model)));
    }
    rep.real_wrs += ep.posted;
    compare_cqes(&ep, &model)?;
    check_memory(&ep, false)?;
    check_counters(&mut ep)?;
    for h in 0..2 {
        for (name, i) in [("NAKs sequence/RNR sent", 20u16), ("NAKs error sent", 21), ("duplicate requests", 19), ("responder drops", 22), ("completer drops", 13), ("retries", 24)] {
            *rep.engine.entry(name).or_default() += ep.d.h[h].eng.counter(i)? as u64;
        }
    }
    *rep.engine.entry("victim QPs recovered from the error state").or_default() += ep.vreloads;
    probe(&mut ep, &mut rng)?;
    check_memory(&ep, true)
}

/// Runs episodes of `per_episode` injected frames until `count` frames were injected. Each
/// finding is written to `out/engine-finding-N.txt`; `progress` is called after each episode.
pub fn engine_campaign(o: &EngineFuzzOpts, out: &Path, mut progress: impl FnMut(&EngineReport)) -> Result<EngineReport, String> {
    let mut rep = EngineReport::default();
    let mut rng = Rng::new(o.seed);
    while rep.cases < o.count {
        let s = rng.next();
        let n = o.per_episode.min(o.count - rep.cases);
        let before = rep.cases;
        if let Err(e) = episode(s, n, o.wire_faults, o.self_test, &mut rep) {
            rep.findings += 1;
            std::fs::create_dir_all(out).map_err(|e| format!("{}: {e}", out.display()))?;
            let p = out.join(format!("engine-finding-{}.txt", rep.findings));
            let text = format!(
                "episode seed {s} ({n} frames{}): {e}\nreplay: hematite-fuzz engine --replay {s} --per-episode {n}{}\n",
                if o.wire_faults { ", wire faults" } else { "" },
                if o.wire_faults { " --wire-faults" } else { "" }
            );
            std::fs::write(&p, &text).map_err(|e| format!("{}: {e}", p.display()))?;
            eprintln!("fuzz engine: finding {}: {text}", rep.findings);
            // an episode that ended early still counts the frames it injected; never loop
            rep.cases = rep.cases.max(before + 1);
        }
        rep.episodes += 1;
        progress(&rep);
    }
    Ok(rep)
}

/// Runs the single episode with seed `s` (a finding's replay).
pub fn replay(s: u64, per_episode: u64, wire_faults: bool) -> (EngineReport, Result<(), String>) {
    let mut rep = EngineReport::default();
    let r = episode(s, per_episode, wire_faults, None, &mut rep);
    rep.episodes = 1;
    (rep, r)
}
