//! Transport engine benchmark, in simulated clock cycles (512-bit datapath: 64 bytes per
//! cycle is the datapath rate). Two Verilated engines back to back (hematite_sim::duo), each
//! with a host memory model of `--mem-latency` cycles; every figure comes from this run and is
//! printed next to its baseline:
//!
//!  * WRITE goodput: 64 KiB RDMA WRITEs at 4 KiB path MTU, one QP, payload bytes per cycle at
//!    steady state (first to last frame of the sender) as a fraction of 64 B/cycle, and of
//!    the wire ceiling (payload share of the frames that carry it).
//!  * Message rate: 64-byte WRITEs posted in one batch, cycles per WQE at steady state.
//!  * Latency: one message of each kind (8-byte inline WRITE, 64-byte WRITE, SEND, READ),
//!    stage by stage: doorbell to the first byte on the wire; last byte of the request into
//!    the responder to its data write issued on the DMA port; last byte of the ACK (or
//!    response) into the requester to the CQE write issued; and the RDMA WRITE half round
//!    trip (ib_write_lat's) under a fixed model of the host and the link (`--latency` alone
//!    prints this part).
//!  * Goodput with 1% of the frames lost on the wire.
//!  * Many active QPs: the same WRITEs on one QP and spread round-robin over 1024 QPs (goodput
//!    of large WRITEs, cycles per WQE of 64-byte ones), as ratios.
//!  * Simulated cycles per second of wall time.
//!
//! usage: hematite-bench [--mem-latency CYCLES] [--quick] [--latency] [--json] | --fw
//!
//! With --json, stdout holds one JSON object and nothing else.
//!
//! Debug runs (not part of the figures): HM_BENCH_ONLY=1 (the 64 KiB goodput run, HM_BENCH_BIG
//! messages), 2 (the message-rate run, HM_BENCH_SMALL WRITEs of HM_BENCH_SIZE bytes), 3 (the
//! 1 % loss run), 4 (the many-QP run: HM_BENCH_QPS QPs x HM_BENCH_PER_QP WRITEs of
//! HM_BENCH_SIZE bytes against one QP, at most HM_BENCH_MAX cycles); HM_BENCH_DEBUG=1 prints
//! counters and frame gaps. In the waveform build (HEMATITE_TRACE=1, its own target folder),
//! HM_BENCH_TRACE=FILE.fst traces engine HM_BENCH_TRACE_NIC (0 or 1) of the many-QP run from
//! doorbell HM_BENCH_TRACE_AT on.

use hematite_model::transport::mem::MrAccess;
use hematite_model::transport::{QpConfig, SendOp, SendWr, Sge};
use hematite_sim::dma::MemCfg;
use hematite_sim::duo::{DuoBench, WireFaults};
use std::time::Instant;

const BUF: u64 = 0x100_0000;
const LEN: u64 = 0x100_0000; // 16 MiB per host
const KW: f64 = 64.0;
/// QPs of the many-QP rows (issue 20: 1024 active QPs)
const MANY_QPS: u32 = 1024;

struct Opts {
    latency: u64,
    quick: bool,
    json: bool,
    /// the latency part alone
    lat_only: bool,
}

fn setup(o: &Opts, faults: WireFaults, pmtu: u32) -> Result<(DuoBench, u32, u32), String> {
    setup_timer(o, faults, pmtu, 3, false)
}

/// QPN of the sending QP of the one-QP runs: table entry 1 (QPNs 0 and 1 are reserved; entries
/// 0 and 1 answer to the QPNs above the 4096-entry table, `hematite_abi::qp::qpn_swap`), which
/// these runs have always used, so the figures before and after the alias compare.
const QA: u32 = 4097;

/// As setup, with the ACK timeout code `timeout`; `std_timer`: the QPs use the standard ACK
/// timeout alone (no adaptive early retransmission).
fn setup_timer(o: &Opts, faults: WireFaults, pmtu: u32, timeout: u8, std_timer: bool) -> Result<(DuoBench, u32, u32), String> {
    let mut d = DuoBench::new(MemCfg { latency: o.latency, seed: 1, ..Default::default() }, faults)?;
    let data: Vec<u8> = (0..0x20_0000u64).map(|i| (i * 7 + 3) as u8).collect();
    d.h[0].fill(BUF, &data);
    let k0 = d.h[0].reg_mr(1, BUF, LEN, MrAccess::ALL)?.lkey;
    let k1 = d.h[1].reg_mr(1, BUF, LEN, MrAccess::ALL)?.rkey;
    let cfg = QpConfig { pmtu, timeout, std_timer, ..QpConfig::default() };
    d.connect(QA, 2, cfg, 0)?;
    Ok((d, k0, k1))
}

/// A lost tail: one 64 KiB WRITE at PMTU 4096 completes (the QP times its round trip), then
/// a second one whose last frame (host 0's frame 31) the wire loses, or not (`lose`). Returns
/// the second WRITE's doorbell to CQE in cycles and the early retransmissions counted.
fn tail_loss(o: &Opts, timeout: u8, std_timer: bool, lose: bool) -> Result<(u64, u32), String> {
    let (mut d, k0, k1) = setup_timer(o, WireFaults::default(), 4096, timeout, std_timer)?;
    let mut t = 0;
    for i in 0..2u64 {
        if i == 1 && lose {
            d.drop_from[0] = vec![31];
        }
        let wr = SendWr::new(i, SendOp::Write { remote_addr: BUF + i * 0x1_0000, rkey: k1 }, vec![Sge { addr: BUF, len: 65536, lkey: k0 }]);
        d.h[0].post_send(QA, &wr, true)?;
        let t0 = d.h[0].eng.cycle();
        d.run(200_000, |d| d.h[0].cqes.len() > i as usize)?;
        let c = &d.h[0].cqes[i as usize];
        if c.cqe.status != hematite_model::transport::WcStatus::Success {
            return Err(format!("WRITE failed: {:?}", c.cqe));
        }
        t = c.cycle - t0;
    }
    if d.h[0].eng.tx.len() != 32 + lose as usize * 16 {
        return Err(format!("{} frames sent: expected the lost tail to cost one resent message", d.h[0].eng.tx.len()));
    }
    Ok((t, d.h[0].eng.counter(hematite_abi::pkt::HM_CNT_EARLY_RETX as u16)?))
}

struct Goodput {
    bytes: u64,
    cycles: u64,
    frames: usize,
    wire_bytes: u64,
    total_cycles: u64,
    lost: u64,
    /// cycles per frame over the last three quarters of the sender's frames
    steady: f64,
    /// beats of the largest frame sent
    frame_beats: u64,
    /// cycles per request of the receiving engine: its first to its last response frame over
    /// the requests (its ACKs are coalesced, so frames are fewer than requests)
    peer_steady: f64,
    /// doorbell to the (last, signaled) CQE in host memory
    db_to_cqe: u64,
}

/// `n` WRITEs of `size` bytes from host 0 to host 1, all posted before one doorbell, the last
/// signaled. Steady state: first to last frame the sender transmitted.
fn write_goodput(o: &Opts, n: u64, size: u32, faults: WireFaults, max_cycles: u64) -> Result<Goodput, String> {
    write_run(o, n, size, false, faults, max_cycles)
}

/// As write_goodput; `inline` puts the payload into the WQE. Zero-length WRITEs carry no SGE.
fn write_run(o: &Opts, n: u64, size: u32, inline: bool, faults: WireFaults, max_cycles: u64) -> Result<Goodput, String> {
    let (mut d, k0, k1) = setup(o, faults, 4096)?;
    for i in 0..n {
        let sgl = if size == 0 { vec![] } else { vec![Sge { addr: BUF + (i % 16) * 0x1000, len: size, lkey: k0 }] };
        let mut wr = SendWr::new(i, SendOp::Write { remote_addr: BUF + (i % 64) * size.max(64) as u64, rkey: k1 }, sgl);
        wr.signaled = i == n - 1;
        wr.inline = inline;
        d.h[0].post_send(QA, &wr, false)?;
    }
    d.h[0].doorbell(QA)?;
    let t0 = d.h[0].eng.cycle();
    let total = d.run(max_cycles, |d| !d.h[0].cqes.is_empty())?;
    let debug = std::env::var("HM_BENCH_DEBUG").is_ok();
    if debug {
        let names = ["tx frames", "wqes", "req pkts", "", "", "", "", "requests rx", "", "rx ok", "rx dropped", "", "acks rx",
                     "resp dropped", "implied", "", "cqes", "", "", "dups", "nak seq", "nak err", "req dropped", "resp sent", "retries", "timeouts"];
        for (k, h) in d.h.iter_mut().enumerate() {
            let mut line = String::new();
            for (i, n) in names.iter().enumerate() {
                if !n.is_empty() {
                    line += &format!("{n}={} ", h.eng.counter(i as u16).unwrap_or(0));
                }
            }
            eprintln!("engine {k}: {line}");
        }
    }
    let e = &d.h[0].eng;
    let first = *e.tx_start.first().ok_or("nothing sent")?;
    let last = *e.tx_cycle.last().ok_or("nothing sent")?;
    let wire_bytes: u64 = e.tx.iter().map(|f| f.0.len() as u64).sum();
    if debug {
        let mut gaps = std::collections::BTreeMap::new();
        for w in e.tx_start.windows(2) {
            *gaps.entry(w[1] - w[0]).or_insert(0u32) += 1;
        }
        eprintln!("frame start gaps (cycles: count): {gaps:?}; first frames at {:?}", &e.tx_start[..e.tx_start.len().min(6)]);
        let p = &d.h[1].eng;
        let mut gaps = std::collections::BTreeMap::new();
        for w in p.tx_start.windows(2) {
            *gaps.entry(w[1] - w[0]).or_insert(0u32) += 1;
        }
        eprintln!("peer frame gaps: {gaps:?}; first at {:?}, last at {:?}; total {total}", p.tx_start.first(), p.tx_start.last());
    }
    if d.h[0].cqes[0].cqe.status != hematite_model::transport::WcStatus::Success {
        return Err(format!("WRITEs failed: {:?}", d.h[0].cqes[0].cqe));
    }
    let db_to_cqe = d.h[0].cqes.last().map(|c| c.cycle - t0).ok_or("no CQE")?;
    let steady_of = |v: &[u64]| {
        let q = v.len() / 4;
        if v.len() > q + 1 { (v[v.len() - 1] - v[q]) as f64 / (v.len() - 1 - q) as f64 } else { 0.0 }
    };
    let steady = steady_of(&e.tx_start);
    let pt = &d.h[1].eng.tx_start;
    let peer_steady = if n > 1 && pt.len() > 1 { (pt[pt.len() - 1] - pt[0]) as f64 / (n - 1) as f64 } else { 0.0 };
    let frame_beats = e.tx.iter().map(|f| (f.0.len() as u64).div_ceil(KW as u64)).max().unwrap_or(0);
    Ok(Goodput { bytes: n * size as u64, cycles: last - first + 1, frames: e.tx.len(), wire_bytes, total_cycles: total,
                 lost: d.count.dropped, steady, frame_beats, peer_steady, db_to_cqe })
}

fn env_u64(k: &str, d: u64) -> u64 {
    std::env::var(k).ok().and_then(|v| v.parse().ok()).unwrap_or(d)
}

/// What a stream spread over many QPs did (`many_qps`).
struct Spread {
    /// payload bytes per cycle, first to last frame the sender transmitted
    goodput: f64,
    /// sender cycles per frame over the last three quarters of its frames
    steady: f64,
    /// first doorbell rung to the last CQE in host memory
    db_to_cqe: u64,
    frames: usize,
    /// cycles the doorbells took to ring, first to last accepted
    doorbells: u64,
}

/// `per_qp` RDMA WRITEs of `size` bytes on each of `qps` QPs (QPNs 2.., connected pairwise),
/// posted round-robin (WQE j of every QP before WQE j + 1 of any), the last of each QP
/// signaled; then one doorbell per QP, rung back to back through the register BAR (one
/// AXI4-Lite write in flight at a time, both engines running), as a host with one thread per
/// connection would. Every QP's CQE must arrive with success. `qps` = 1 is the same stream on
/// one QP: the baseline of the many-QP rows, run the same way.
fn many_qps(o: &Opts, qps: u32, per_qp: u64, size: u32, max_cycles: u64) -> Result<Spread, String> {
    use hematite_sim::eng::{LiteOp, Port};
    let mut d = DuoBench::new(MemCfg { latency: o.latency, seed: 1, ..Default::default() }, WireFaults::default())?;
    let data: Vec<u8> = (0..0x20_0000u64).map(|i| (i * 7 + 3) as u8).collect();
    d.h[0].fill(BUF, &data);
    let k0 = d.h[0].reg_mr(1, BUF, LEN, MrAccess::ALL)?.lkey;
    let k1 = d.h[1].reg_mr(1, BUF, LEN, MrAccess::ALL)?.rkey;
    let cfg = QpConfig { pmtu: 4096, ..QpConfig::default() };
    let qpn = |k: u32| 2 + k;
    for k in 0..qps {
        d.connect(qpn(k), qpn(k), cfg, 0)?;
    }
    for j in 0..per_qp {
        for k in 0..qps {
            let i = j * qps as u64 + k as u64;
            let sgl = vec![Sge { addr: BUF + (i % 16) * 0x1000, len: size, lkey: k0 }];
            let mut wr = SendWr::new(i, SendOp::Write { remote_addr: BUF + (i % 64) * size.max(64) as u64, rkey: k1 }, sgl);
            wr.signaled = j == per_qp - 1;
            d.h[0].post_send(qpn(k), &wr, false)?;
        }
    }
    let t0 = d.h[0].eng.cycle();
    let (mut next, mut busy, mut last_db) = (0u32, false, t0);
    while next < qps || busy {
        if busy {
            if let Some((_, ok)) = d.h[0].eng.lite_take(Port::Bar) {
                if !ok {
                    return Err(format!("doorbell of QP {} refused", qpn(next - 1)));
                }
                busy = false;
                last_db = d.h[0].eng.cycle();
            }
        }
        if !busy && next < qps {
            if let Ok(path) = std::env::var("HM_BENCH_TRACE") {
                if u64::from(next) == env_u64("HM_BENCH_TRACE_AT", 0) {
                    let side = env_u64("HM_BENCH_TRACE_NIC", 0).min(1) as usize;
                    let c = d.h[side].eng.cycle();
                    d.h[side].eng.trace_open(std::path::Path::new(&path), c)?;
                }
            }
            let w = d.h[0].sq_doorbell_word(qpn(next)).ok_or("no such QP")?;
            d.h[0].eng.lite_start(Port::Bar, LiteOp::Write { addr: hematite_sim::csr::regs::HM_REG_DB_SQ, data: w, strb: 0xF });
            next += 1;
            busy = true;
        }
        d.tick()?;
        if d.h[0].eng.cycle() - t0 > max_cycles {
            d.h[0].eng.trace_close();
            d.h[1].eng.trace_close();
            return Err(format!("doorbell {next} of {qps} not taken after {max_cycles} cycles ({} frames sent, {} received, {} CQEs)",
                               d.h[0].eng.tx.len(), d.h[1].eng.tx.len(), d.h[0].cqes.len()));
        }
    }
    d.run(max_cycles, |d| d.h[0].cqes.len() >= qps as usize)?;
    d.h[0].eng.trace_close();
    d.h[1].eng.trace_close();
    if d.h[0].cqes.len() != qps as usize {
        return Err(format!("{} CQEs for {qps} signaled WRITEs", d.h[0].cqes.len()));
    }
    if let Some(c) = d.h[0].cqes.iter().find(|c| c.cqe.status != hematite_model::transport::WcStatus::Success) {
        return Err(format!("WRITE failed: {:?}", c.cqe));
    }
    let e = &d.h[0].eng;
    let (first, last) = (*e.tx_start.first().ok_or("nothing sent")?, *e.tx_cycle.last().ok_or("nothing sent")?);
    let q = e.tx_start.len() / 4;
    let steady = if e.tx_start.len() > q + 1 {
        (e.tx_start[e.tx_start.len() - 1] - e.tx_start[q]) as f64 / (e.tx_start.len() - 1 - q) as f64
    } else {
        0.0
    };
    let db_to_cqe = d.h[0].cqes.iter().map(|c| c.cycle).max().unwrap_or(t0) - t0;
    Ok(Spread {
        goodput: (qps as u64 * per_qp * size as u64) as f64 / (last - first + 1) as f64,
        steady,
        db_to_cqe,
        frames: e.tx.len(),
        doorbells: last_db - t0,
    })
}

/// Go-back-N under heavy loss: `n` WRITEs of 1 MiB at PMTU 1024 over a wire that loses
/// `drop_ppm` of the frames both ways. Returns the request frames sent, the frames the
/// messages are made of, the frames the wire lost, and the cycles doorbell to CQE.
fn loss_amplification(o: &Opts, n: u64, drop_ppm: u32, max_cycles: u64) -> Result<(usize, u64, u64, u64), String> {
    let (mut d, k0, k1) = setup(o, WireFaults { drop_ppm, ..WireFaults::default() }, 1024)?;
    for i in 0..n {
        let mut wr = SendWr::new(i, SendOp::Write { remote_addr: BUF + 0x20_0000, rkey: k1 }, vec![Sge { addr: BUF, len: 1 << 20, lkey: k0 }]);
        wr.signaled = i == n - 1;
        d.h[0].post_send(QA, &wr, false)?;
    }
    d.h[0].doorbell(QA)?;
    let t0 = d.h[0].eng.cycle();
    d.run(max_cycles, |d| !d.h[0].cqes.is_empty())?;
    let c = &d.h[0].cqes[0];
    if c.cqe.status != hematite_model::transport::WcStatus::Success {
        return Err(format!("WRITEs failed: {:?}", c.cqe));
    }
    Ok((d.h[0].eng.tx.len(), n * 1024, d.count.dropped, c.cycle - t0))
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut o = Opts { latency: 100, quick: false, json: false, lat_only: false };
    let mut i = 0;
    while i < args.len() {
        match args[i].as_str() {
            "--mem-latency" => {
                i += 1;
                o.latency = args.get(i).and_then(|v| v.parse().ok()).unwrap_or_else(|| die("--mem-latency needs a number"));
            }
            "--latency" => {
                if args.get(i + 1).is_some_and(|v| v.parse::<u64>().is_ok()) {
                    die("--latency takes no value (the host memory latency is --mem-latency CYCLES)");
                }
                o.lat_only = true;
            }
            "--quick" => o.quick = true,
            "--json" => o.json = true,
            "--fw" => {
                // the firmware command latency table alone, with its ceiling
                match fw_latency() {
                    Err(e) => die(&e),
                    Ok((rows, bringup)) => {
                        print_fw_latency(&rows, bringup);
                        let ok = bringup as f64 <= BRINGUP_CEILING;
                        println!("target (asserted): QP bring-up <= {BRINGUP_CEILING} cycles: {}", if ok { "met" } else { "MISSED" });
                        if !ok {
                            std::process::exit(1);
                        }
                    }
                }
                return;
            }
            "--help" | "-h" => {
                println!("usage: hematite-bench [--mem-latency CYCLES] [--quick] [--latency] [--json] | --fw");
                println!("  --mem-latency CYCLES  host memory: cycles from a DMA request to its first read beat (100 = 400 ns)");
                println!("  --latency             the latency part alone (one message of each kind, stage by stage)");
                println!("  --json                one JSON object on stdout, nothing else");
                println!("  --fw                  the control core's firmware command latency alone");
                return;
            }
            a => die(&format!("unknown argument {a} (try --help)")),
        }
        i += 1;
    }
    if let Err(e) = run(&o) {
        die(&e);
    }
}

fn die(m: &str) -> ! {
    eprintln!("hematite-bench: {m}");
    std::process::exit(1)
}

/// The fixed model of the half round trip (issue: "Latency"): the CPU's posted MMIO write
/// reaches the NIC in 150 ns; a DMA write is visible in host memory 150 ns after the NIC
/// issues it; MAC + PHY 60 ns per side and 10 ns of cable (no switch) are the wire's
/// 130 ns, rounded up to whole 4 ns cycles; host memory reads take 400 ns (--mem-latency 100).
const MMIO_NS: f64 = 150.0;
const VISIBLE_NS: f64 = 150.0;
const WIRE_NS: u64 = 60 + 10 + 60;
const NS_PER_CYCLE: f64 = 4.0;

/// The messages measured: each WQE is posted through the MMIO path (pushed, then the
/// doorbell) except WriteInline8Db, the same WQE with the doorbell alone (the engine fetches
/// it): the baseline of the MMIO path in the same run.
#[derive(Clone, Copy, PartialEq)]
enum MsgKind { WriteInline8, WriteInline8Db, Write64, WriteImm8, Send64, Read64, FetchAdd }

impl MsgKind {
    fn name(self) -> &'static str {
        match self {
            MsgKind::WriteInline8 => "WRITE 8 B inline",
            MsgKind::WriteInline8Db => "same, doorbell only",
            MsgKind::Write64 => "WRITE 64 B",
            MsgKind::Send64 => "SEND 64 B",
            MsgKind::Read64 => "READ 64 B",
            MsgKind::WriteImm8 => "WRITE_IMM 8 B inl",
            MsgKind::FetchAdd => "FETCH_ADD",
        }
    }
    fn key(self) -> &'static str {
        match self {
            MsgKind::WriteInline8 => "write_inline8",
            MsgKind::WriteInline8Db => "write_inline8_doorbell_only",
            MsgKind::Write64 => "write64",
            MsgKind::Send64 => "send64",
            MsgKind::Read64 => "read64",
            MsgKind::WriteImm8 => "write_imm_inline8",
            MsgKind::FetchAdd => "fetch_add",
        }
    }
}

/// One message's stages, in cycles (each measured on one engine's own clock, except `leg`).
struct Stages {
    /// doorbell write accepted by A's BAR -> first byte of the request on A's wire
    db_to_first: u64,
    /// last byte of the request into B -> B's data write issued on its DMA port (WRITE,
    /// SEND); READ: last byte of the response into A -> A's data write issued
    in_to_data: u64,
    /// last byte of the ACK (READ: of the response) into A -> A's CQE write issued
    ack_to_cqe_wr: u64,
    /// the same -> the CQE found in host memory by the polling testbench
    ack_to_cqe: u64,
    /// doorbell write started -> the CQE found in host memory
    db_to_cqe: u64,
    /// doorbell write started at A -> the data write issued at the target (B for WRITE and
    /// SEND, A for READ): a leg of the ping-pong, without the MMIO and visibility terms
    leg: u64,
    /// the leg's parts (WRITE and SEND): the push and doorbell writes until the doorbell is
    /// taken; the request frame from its first to its last byte on A's wire; its last byte
    /// out of A to its last byte into B (the wire and B's MAC interface)
    db_write: u64,
    frame: u64,
    wire: u64,
}

/// First write burst of `log` at or after cycle `t` that touches [lo, hi).
fn first_write(log: &[(u64, u64, u64)], t: u64, lo: u64, hi: u64) -> Option<u64> {
    log.iter().find(|(c, a, n)| *c >= t && *a < hi && a + n * KW as u64 > lo).map(|(c, ..)| *c)
}

/// One message of `kind` from host 0 to host 1 on an otherwise idle pair, polled every cycle;
/// the wire takes `wire` cycles from a frame's last byte out to its arrival.
fn one_message(o: &Opts, kind: MsgKind, wire: u64) -> Result<Stages, String> {
    use hematite_model::transport::RecvWr;
    use hematite_sim::host::{CQ_BASE, CQ_LOG};
    let (mut d, k0, k1) = setup(o, WireFaults { latency: wire, ..WireFaults::default() }, 4096)?;
    let lk1 = k1;
    for h in 0..2 {
        d.h[h].eng.mem.write_log = Some(Vec::new());
    }
    let (a_dst, b_dst) = (BUF + 0x8_0000, BUF + 0x9_0000);
    let (wr, len) = match kind {
        MsgKind::WriteInline8 | MsgKind::WriteInline8Db => {
            let mut w = SendWr::new(1, SendOp::Write { remote_addr: b_dst, rkey: k1 }, vec![Sge { addr: BUF, len: 8, lkey: k0 }]);
            w.inline = true;
            (w, 8)
        }
        MsgKind::Write64 => (SendWr::new(1, SendOp::Write { remote_addr: b_dst, rkey: k1 }, vec![Sge { addr: BUF, len: 64, lkey: k0 }]), 64),
        MsgKind::Send64 => {
            d.h[1].post_recv(2, &RecvWr { wr_id: 9, sgl: vec![Sge { addr: b_dst, len: 64, lkey: lk1 }] })?;
            (SendWr::new(1, SendOp::Send, vec![Sge { addr: BUF, len: 64, lkey: k0 }]), 64)
        }
        MsgKind::Read64 => (SendWr::new(1, SendOp::Read { remote_addr: BUF, rkey: k1 }, vec![Sge { addr: a_dst, len: 64, lkey: k0 }]), 64),
        MsgKind::WriteImm8 => {
            d.h[1].post_recv(2, &RecvWr { wr_id: 9, sgl: vec![] })?;
            let mut w = SendWr::new(1, SendOp::WriteImm { remote_addr: b_dst, rkey: k1, imm: 0x1234 }, vec![Sge { addr: BUF, len: 8, lkey: k0 }]);
            w.inline = true;
            (w, 8)
        }
        MsgKind::FetchAdd => (SendWr::new(1, SendOp::FetchAdd { remote_addr: BUF + 0x100, rkey: k1, add: 5 }, vec![Sge { addr: a_dst, len: 8, lkey: k0 }]), 8),
    };
    // a receive is posted well ahead, as a ping-pong program posts it (its read ahead done)
    if matches!(kind, MsgKind::Send64 | MsgKind::WriteImm8) {
        d.run(4 * o.latency + 200, |_| false).ok();
    }
    let db_start = d.h[0].eng.cycle();
    if kind == MsgKind::WriteInline8Db {
        d.h[0].post_send(QA, &wr, true)?;
    } else {
        d.h[0].post_send_push(QA, &wr)?;
    }
    let db_done = d.h[0].eng.cycle();
    // B's clock: A's minus `off` (the BAR writes above stepped one engine alone)
    let off = d.h[0].eng.cycle() as i64 - d.h[1].eng.cycle() as i64;
    for _ in 0..200_000 {
        d.run(1, |_| true).ok();
        if !d.h[0].cqes.is_empty() && (!matches!(kind, MsgKind::Send64 | MsgKind::WriteImm8) || !d.h[1].cqes.is_empty()) {
            break;
        }
    }
    let (a, b) = (&d.h[0], &d.h[1]);
    let cqe = a.cqes.first().ok_or(format!("{}: no CQE", kind.name()))?;
    if cqe.cqe.status != hematite_model::transport::WcStatus::Success {
        return Err(format!("{}: {:?}", kind.name(), cqe.cqe));
    }
    let (aw, bw) = (a.eng.mem.write_log.as_deref().unwrap_or(&[]), b.eng.mem.write_log.as_deref().unwrap_or(&[]));
    let first = *a.eng.tx_start.first().ok_or("no request frame")?;
    let req_in = *b.eng.rx_cycle.first().ok_or("nothing reached B")?;
    let resp_in = *a.eng.rx_cycle.first().ok_or("nothing came back to A")?;
    let cq = (CQ_BASE, CQ_BASE + (32u64 << CQ_LOG));
    let a_cqe = first_write(aw, resp_in, cq.0, cq.1).ok_or("no CQE write at A")?;
    let (in_to_data, leg) = if matches!(kind, MsgKind::Read64 | MsgKind::FetchAdd) {
        let t = first_write(aw, resp_in, a_dst, a_dst + len).ok_or("no READ data write at A")?;
        (t - resp_in, t - db_start)
    } else {
        let t = first_write(bw, req_in, b_dst, b_dst + len).ok_or("no data write at B")?;
        (t - req_in, (t as i64 + off) as u64 - db_start)
    };
    let last_out = *a.eng.tx_cycle.first().ok_or("no request frame")?;
    Ok(Stages { db_to_first: first - db_done, in_to_data, ack_to_cqe_wr: a_cqe - resp_in, ack_to_cqe: cqe.cycle - resp_in,
                db_to_cqe: cqe.cycle - db_start, leg, db_write: db_done - db_start, frame: last_out - first,
                wire: (req_in as i64 + off) as u64 - last_out })
}

/// The latency part: one message of each kind under the fixed model.
struct Latency {
    rows: Vec<(MsgKind, Stages)>,
    wire: u64,
    /// ib_write_lat's half round trip, ns: MMIO + the 8-byte inline WRITE's leg + visibility
    write_half_rtt_ns: f64,
}

fn latency(o: &Opts) -> Result<Latency, String> {
    let wire = (WIRE_NS as f64 / NS_PER_CYCLE).ceil() as u64;
    let mut rows = Vec::new();
    for k in [MsgKind::WriteInline8, MsgKind::WriteInline8Db, MsgKind::Write64, MsgKind::WriteImm8, MsgKind::Send64, MsgKind::Read64, MsgKind::FetchAdd] {
        rows.push((k, one_message(o, k, wire).map_err(|e| format!("latency, {}: {e}", k.name()))?));
    }
    let leg = rows[0].1.leg as f64;
    Ok(Latency { rows, wire, write_half_rtt_ns: MMIO_NS + leg * NS_PER_CYCLE + VISIBLE_NS })
}

fn half_rtt_ns(st: &Stages) -> f64 {
    MMIO_NS + st.leg as f64 * NS_PER_CYCLE + VISIBLE_NS
}

fn latency_json(l: &Latency) -> String {
    let rows: Vec<String> = l.rows.iter().map(|(k, s)| format!(
        "\"{}\":{{\"doorbell_to_first_byte\":{},\"last_byte_in_to_data_write\":{},\"ack_in_to_cqe_write\":{},\"ack_in_to_cqe_in_memory\":{},\"doorbell_to_cqe\":{},\"leg_cycles\":{},\"leg_doorbell_write\":{},\"leg_frame\":{},\"leg_wire\":{},\"half_rtt_ns\":{:.0}}}",
        k.key(), s.db_to_first, s.in_to_data, s.ack_to_cqe_wr, s.ack_to_cqe, s.db_to_cqe, s.leg, s.db_write, s.frame, s.wire, half_rtt_ns(s))).collect();
    format!("\"latency\":{{\"wire_cycles\":{},{}}},\"write_half_rtt_ns\":{:.0}", l.wire, rows.join(","), l.write_half_rtt_ns)
}

fn print_latency(o: &Opts, l: &Latency) {
    println!("latency, one message on an idle pair (host memory {} cycles; wire {} cycles = MAC + PHY + cable, {} ns; 4 ns cycles):", o.latency, l.wire, WIRE_NS);
    println!("  {:<17} {:>10} {:>12} {:>12} {:>12} {:>11} {:>9}", "", "doorbell", "last byte in", "ACK in", "ACK in", "doorbell", "half");
    println!("  {:<17} {:>10} {:>12} {:>12} {:>12} {:>11} {:>9}", "", "-> 1st byte", "-> data wr", "-> CQE wr", "-> CQE seen", "-> CQE", "RTT, ns");
    for (k, s) in &l.rows {
        println!("  {:<17} {:>10} {:>12} {:>12} {:>12} {:>11} {:>9.0}", k.name(), s.db_to_first, s.in_to_data, s.ack_to_cqe_wr, s.ack_to_cqe, s.db_to_cqe, half_rtt_ns(s));
    }
    println!("  (cycles; every WQE is pushed through the MMIO path before its doorbell, except 'doorbell only', whose");
    println!("   WQE the engine fetches from the ring; 'last byte in -> data wr': the request's last byte into the responder to its data write issued");
    println!("   on the DMA port (READ, FETCH_ADD: the response into the requester to its data write); 'ACK in': the last byte of");
    println!("   the ACK (READ, FETCH_ADD: of the response) into the requester; 'CQE wr': the CQE write issued on the DMA port;");
    println!("   half RTT: {MMIO_NS} ns MMIO + doorbell write to the data write at the target + {VISIBLE_NS} ns until visible)");
    println!("  RDMA WRITE half round trip, 8 B inline (ib_write_lat's definition, this model): {:.0} ns", l.write_half_rtt_ns);
    let s = &l.rows[0].1;
    println!("    = {MMIO_NS} ns MMIO + {} cycles x {NS_PER_CYCLE} ns + {VISIBLE_NS} ns; the {} cycles: push and doorbell writes {} + doorbell -> first byte {}",
             s.leg, s.leg, s.db_write, s.db_to_first);
    println!("      + the frame on A's wire {} + wire and B's MAC interface {} + B: last byte in -> data write {}",
             s.frame, s.wire, s.in_to_data);
}

/// Latency ceilings: regression guards at today's figures (issue 24's targets, and how far
/// the engine is from them, are in docs/transport-engine.md). Per kind: (last byte in -> data
/// write, ACK in -> CQE write), cycles; they do not depend on the host memory latency except
/// a READ's CQE (it waits for the data write's response). (A SEND's receive WQE is read ahead
/// when its receive is posted.)
fn lat_ceilings(o: &Opts, k: MsgKind) -> (f64, f64) {
    let m = o.latency as f64;
    match k {
        MsgKind::WriteInline8 | MsgKind::WriteInline8Db | MsgKind::Write64 => (31.0, 27.0),
        MsgKind::Send64 => (32.0, 27.0),
        MsgKind::Read64 => (35.0, 49.0 + m),
        MsgKind::WriteImm8 => (31.0, 27.0),
        MsgKind::FetchAdd => (35.0, 49.0 + m),
    }
}
/// ib_write_lat's half round trip under the fixed model (host memory 100 cycles), ns: issue
/// 24's target.
const LAT_HALF_RTT_TARGET: f64 = 900.0;
/// Doorbell accepted -> first byte on the wire through the MMIO path (the WQE pushed), cycles:
/// regression ceilings at today's figures (issue 24's target for the 8-byte inline WRITE is
/// 20); the WQE fetched, 40 + the host memory latency.
fn first_byte_ceiling(o: &Opts, k: MsgKind) -> Option<f64> {
    match k {
        MsgKind::WriteInline8 => Some(25.0),
        MsgKind::Read64 => Some(32.0),
        MsgKind::WriteInline8Db => Some(40.0 + o.latency as f64),
        _ => None,
    }
}

fn latency_checks(o: &Opts, l: &Latency, checks: &mut Vec<(String, f64, &'static str, f64, bool)>) {
    let at_most = |c: &mut Vec<_>, name: String, v: f64, t: f64| c.push((name, v, "<=", t, v <= t + 1e-9));
    for (k, s) in &l.rows {
        let (data, cqe) = lat_ceilings(o, *k);
        if let Some(c) = first_byte_ceiling(o, *k) {
            at_most(checks, format!("{}: doorbell -> first byte (ceiling)", k.name()), s.db_to_first as f64, c);
        }
        at_most(checks, format!("{}: last byte in -> data write (ceiling)", k.name()), s.in_to_data as f64, data);
        at_most(checks, format!("{}: ACK in -> CQE write (ceiling)", k.name()), s.ack_to_cqe_wr as f64, cqe);
    }
    if o.latency == 100 {
        at_most(checks, "WRITE half round trip, 8 B inline, ns (target)".into(), l.write_half_rtt_ns, LAT_HALF_RTT_TARGET);
    }
}

fn run(o: &Opts) -> Result<(), String> {
    if o.lat_only {
        let l = latency(o)?;
        let mut checks = Vec::new();
        latency_checks(o, &l, &mut checks);
        let missed = checks.iter().filter(|c| !c.4).count();
        if o.json {
            println!("{{\"latency_cycles\":{},{},\"targets_missed\":{missed}}}", o.latency, latency_json(&l));
        } else {
            print_latency(o, &l);
            print_checks(&checks);
        }
        return if missed == 0 { Ok(()) } else { Err(format!("{missed} benchmark target(s) missed")) };
    }
    let wall = Instant::now();
    let mut sim_cycles = 0u64;
    let env = |k: &str, d: u64| std::env::var(k).ok().and_then(|v| v.parse().ok()).unwrap_or(d);
    let n_big = env("HM_BENCH_BIG", if o.quick { 8 } else { 32 });
    let n_small = env("HM_BENCH_SMALL", if o.quick { 64 } else { 256 });
    let only = env("HM_BENCH_ONLY", 0);
    if only == 1 {
        let g = write_goodput(o, n_big, 65536, WireFaults::default(), 20_000_000)?;
        println!("big: {} cycles", g.cycles);
        return Ok(());
    }
    if only == 3 {
        let lf = WireFaults { drop_ppm: 10_000, ..WireFaults::default() };
        let l = write_goodput(o, env("HM_BENCH_LOSSY", 8), 65536, lf, 5_000_000)?;
        println!("lossy: {} cycles doorbell..CQE, {} lost", l.db_to_cqe, l.lost);
        return Ok(());
    }
    if only == 4 {
        let qps = env("HM_BENCH_QPS", 1024) as u32;
        let per = env("HM_BENCH_PER_QP", 1);
        let size = env("HM_BENCH_SIZE", 65536) as u32;
        for n in [1, qps] {
            let s = many_qps(o, n, if n == 1 { (per * qps as u64).min(256) } else { per }, size, env("HM_BENCH_MAX", 50_000_000))?;
            println!("{n} QPs: {:.2} B/cycle, {:.2} cycles/frame, doorbell..last CQE {}, {} frames, doorbells {} cycles",
                     s.goodput, s.steady, s.db_to_cqe, s.frames, s.doorbells);
        }
        return Ok(());
    }
    if only == 2 {
        let size = env("HM_BENCH_SIZE", 64) as u32;
        let m = write_run(o, n_small, size, env("HM_BENCH_INLINE", 0) != 0, WireFaults::default(), 20_000_000)?;
        println!("small: {} cycles, {:.2} per WQE, responder {:.2} per request, doorbell..CQE {} = {:.2} per WQE",
                 m.cycles, m.steady, m.peer_steady, m.db_to_cqe, m.db_to_cqe as f64 / n_small as f64);
        return Ok(());
    }

    // 1. WRITE goodput, 64 KiB at 4 KiB PMTU
    let g = write_goodput(o, n_big, 65536, WireFaults::default(), 20_000_000)?;
    sim_cycles += 2 * g.total_cycles;
    let goodput = g.bytes as f64 / g.cycles as f64;
    let wire_rate = g.wire_bytes as f64 / g.cycles as f64;
    let ceiling = g.bytes as f64 / g.wire_bytes as f64;

    // 2. message rate: single-packet WRITEs of several sizes, all posted at once
    let kinds: [(&str, u32, bool); 4] = [("0 B", 0, false), ("8 B inline", 8, true), ("8 B", 8, false), ("64 B", 64, false)];
    let mut rates = Vec::new();
    for (name, size, inl) in kinds {
        let m = write_run(o, n_small, size, inl, WireFaults::default(), 20_000_000)?;
        sim_cycles += 2 * m.total_cycles;
        rates.push((name, m));
    }

    // 3. latency: one message of each kind, stage by stage (the 64-byte WRITE's figures are
    // the summary lines)
    let lat = latency(o)?;
    let w64 = &lat.rows.iter().find(|r| r.0 == MsgKind::Write64).ok_or("no 64-byte WRITE row")?.1;
    let (db_to_first, ack_to_cqe) = (w64.db_to_first, w64.ack_to_cqe);

    // 4. goodput under 1% loss (bounded: a recovery stall would be reported as an error)
    // (32 in the quick run too: with 8 messages one timeout more or less, a matter of which
    // frames the seeded wire happens to lose, moved the ratio by a third)
    let n_lossy = env("HM_BENCH_LOSSY", 32);
    let lf = WireFaults { drop_ppm: 10_000, ..WireFaults::default() };
    let l = write_goodput(o, n_lossy, 65536, lf, 5_000_000).map_err(|e| format!("1% loss run: {e}"))?;
    sim_cycles += 2 * l.total_cycles;
    let lossy = l.bytes as f64 / l.db_to_cqe as f64;
    let lossless_total = g.bytes as f64 / g.db_to_cqe as f64;

    // 5. go-back-N under 3 % loss: the window bounds what a loss costs
    let n_amp = env("HM_BENCH_AMP", if o.quick { 4 } else { 10 });
    let (amp_sent, amp_need, amp_lost, amp_cycles) =
        loss_amplification(o, n_amp, 30_000, 40_000_000).map_err(|e| format!("3% loss run: {e}"))?;
    sim_cycles += 2 * amp_cycles;
    let amp = amp_sent as f64 / amp_need as f64;

    // 6. a lost tail: the adaptive timer's tail-loss probe against the standard timer alone,
    // both at the bench's timeout 3 (4.096 us x 8 = 8,192 cycles at 250 MHz); and the probe at
    // timeout 14 (perftest's default, 67 ms: the standard timer alone is not simulated there)
    let cyc = |t: u8| hematite_model::transport::ack_timeout_ns(t).unwrap_or(0) / 4;
    let (tail_clean, _) = tail_loss(o, 3, false, false).map_err(|e| format!("tail loss, lossless: {e}"))?;
    let (tail_adp, tail_early) = tail_loss(o, 3, false, true).map_err(|e| format!("tail loss, adaptive: {e}"))?;
    let (tail_std, _) = tail_loss(o, 3, true, true).map_err(|e| format!("tail loss, standard: {e}"))?;
    let (tail_adp14, tail_early14) = tail_loss(o, 14, false, true).map_err(|e| format!("tail loss, adaptive, timeout 14: {e}"))?;
    sim_cycles += 2 * (tail_clean + tail_adp + tail_std + tail_adp14);
    let std_to = cyc(3);

    // 7. many active QPs (issue 20): the same streams spread round-robin over MANY_QPS QPs
    // against one QP, in this run: for goodput, 32 WRITEs on one QP as in 1. (one QP's
    // goodput falls as more large WRITEs are queued on it: 62.6 B/cycle with 32 x 64 KiB, 57.0
    // with 255), for the message rate as many as its ring holds
    let big = if o.quick { 16384 } else { 65536 };
    let g1 = many_qps(o, 1, 32, big, 20_000_000).map_err(|e| format!("one QP, {big}-byte WRITEs: {e}"))?;
    let gn = many_qps(o, MANY_QPS, 1, big, 50_000_000).map_err(|e| format!("{MANY_QPS} QPs, {big}-byte WRITEs: {e}"))?;
    let m1 = many_qps(o, 1, 256, 64, 20_000_000).map_err(|e| format!("one QP, 64-byte WRITEs: {e}"))?;
    let mn = many_qps(o, MANY_QPS, 2, 64, 20_000_000).map_err(|e| format!("{MANY_QPS} QPs, 64-byte WRITEs: {e}"))?;
    sim_cycles += 2 * (g1.db_to_cqe + gn.db_to_cqe + m1.db_to_cqe + mn.db_to_cqe);
    let many_goodput = gn.goodput / g1.goodput;
    let many_rate = m1.steady / mn.steady;

    let secs = wall.elapsed().as_secs_f64();
    let rate = sim_cycles as f64 / secs;

    // Every printed target is asserted: the run exits non-zero when one is missed. Targets are
    // the engine's claims (docs/transport-engine.md); "ceiling"/"floor" rows are regression
    // guards at today's figures where the engine does not meet the ideal yet (the responder
    // does not reach the wire floor for single-packet WRITEs; 1 % loss costs over a third of
    // the goodput with go-back-N; 1024 QPs with two small WRITEs each do not reach one QP's
    // message rate).
    // The two latency figures include one host memory round trip (--latency, 100 by default),
    // so their ceilings move with it.
    let mut checks: Vec<(String, f64, &str, f64, bool)> = Vec::new();
    let at_least = |c: &mut Vec<_>, name: String, v: f64, t: f64| c.push((name, v, ">=", t, v >= t));
    let at_most = |c: &mut Vec<_>, name: String, v: f64, t: f64| c.push((name, v, "<=", t, v <= t + 1e-9));
    at_least(&mut checks, "64 KiB WRITE goodput, % of the datapath rate (target)".into(), 100.0 * goodput / KW, 97.0);
    // (60: the lossless run's doorbell-to-CQE goodput rose by 12 % with the responder at the
    // wire rate, 2026-12-05; the lossy run's fell by 6 %: 75.1 % became 63.0 %)
    at_least(&mut checks, "1% loss goodput, % of lossless (regression floor)".into(), 100.0 * lossy / lossless_total, 60.0);
    at_most(&mut checks, "3% loss, request frames per message frame (target)".into(), amp, 4.0);
    // a lost last packet must not cost a full timeout: at timeout 14 the probe and the resent
    // message cost under 1 % of the standard timeout, with one early retransmission; at the
    // bench's short timeout 3 the probe still beats the standard timer (regression ceiling)
    at_most(&mut checks, "lost tail at timeout 14: extra, % of the timeout (target)".into(),
            100.0 * tail_adp14.saturating_sub(tail_clean) as f64 / cyc(14) as f64, 1.0);
    at_most(&mut checks, "lost tail: early retransmissions (target)".into(), tail_early.max(tail_early14) as f64, 1.0);
    at_most(&mut checks, "lost tail at timeout 3: extra, adaptive/standard (ceiling)".into(),
            tail_adp.saturating_sub(tail_clean) as f64 / tail_std.saturating_sub(tail_clean).max(1) as f64, 0.7);
    for (k, m) in &rates {
        // the sender reaches the wire floor, and 2 cycles per WQE for frames of 1-2 beats
        at_most(&mut checks, format!("sender cycles/WQE, {k} (target: wire floor)"), m.steady, (m.frame_beats as f64).max(2.0));
        // (frames of 1-2 beats: 2.25; before the dispatch routed a packet's first payload beat
        // in its header's cycle, an 8-byte WRITE took 2.92 in the quick run)
        at_most(&mut checks, format!("responder cycles/request, {k} (regression ceiling)"), m.peer_steady,
                (m.frame_beats as f64).max(2.0) + 0.25);
    }
    // the receiving engine places the 64 KiB WRITEs' 4 KiB frames (65 cycles each on the wire):
    // cycles per frame from its ACK every message (74.3 before its payload buffer, 2026-12-05)
    at_most(&mut checks, "responder, 64 KiB WRITE: cycles per 4 KiB frame (ceiling)".into(), g.peer_steady / 16.0, 67.0);
    latency_checks(o, &lat, &mut checks);
    // many active QPs: goodput meets issue 20's 90 %; the message rate of single-packet WRITEs
    // does not: a regression floor (2026-12-05: 31.6 % since the completer's doorbells skip its
    // FSM and its turns are shorter; 18.2 % before, with reads queued for up to 16 turns
    // ahead, 10.1 % with one; what limits it now is the completer's turns, one QP at a time:
    // a start record's and an ACK's per QP, 19 cycles)
    at_least(&mut checks, format!("{MANY_QPS} QPs: {} KiB WRITE goodput, % of one QP (target)", big / 1024), 100.0 * many_goodput, 90.0);
    at_least(&mut checks, format!("{MANY_QPS} QPs: 64 B WRITE rate, % of one QP (regression floor)"), 100.0 * many_rate, 30.0);
    // the firmware's QP bring-up (create + RESET->INIT->RTR->RTS), control-core cycles
    let (fw_rows, bringup) = fw_latency()?;
    at_most(&mut checks, "QP bring-up, control-core cycles (regression ceiling)".into(), bringup as f64, BRINGUP_CEILING);
    let missed = checks.iter().filter(|c| !c.4).count();
    if o.json {
        println!(
            "{{\"latency_cycles\":{},\"write64k\":{{\"bytes\":{},\"cycles\":{},\"frames\":{},\"bytes_per_cycle\":{:.3},\"fraction_of_datapath\":{:.4},\"wire_ceiling\":{:.4}}},\"small_write\":[{}],\"doorbell_to_first_byte\":{},\"ack_to_cqe\":{},\"loss_1pct\":{{\"bytes_per_cycle\":{:.3},\"vs_lossless\":{:.4},\"frames_lost\":{}}},\"loss_3pct\":{{\"request_frames\":{},\"message_frames\":{},\"amplification\":{:.3},\"frames_lost\":{},\"doorbell_to_cqe\":{}}},\"tail_loss\":{{\"lossless\":{},\"adaptive\":{},\"standard\":{},\"early_retransmissions\":{},\"standard_timeout\":{},\"adaptive_timeout14\":{}}},\"sim_cycles_per_second\":{:.0},\"qp_bringup_cycles\":{bringup},\"many_qps\":{{\"qps\":{MANY_QPS},\"write_bytes\":{big},\"goodput_one_qp\":{:.3},\"goodput_many\":{:.3},\"goodput_ratio\":{:.4},\"small_cycles_per_wqe_one_qp\":{:.2},\"small_cycles_per_wqe_many\":{:.2},\"small_rate_ratio\":{:.4}}},{},\"targets_missed\":{missed}}}",
            o.latency, g.bytes, g.cycles, g.frames, goodput, goodput / KW, ceiling, rates.iter().map(|(k, m)| format!(
                "{{\"kind\":\"{k}\",\"wqes\":{n_small},\"frame_beats\":{},\"steady_cycles_per_wqe\":{:.2},\"responder_cycles_per_request\":{:.2},\"first_to_last_frame\":{},\"doorbell_to_last_cqe\":{}}}",
                m.frame_beats, m.steady, m.peer_steady, m.cycles, m.db_to_cqe)).collect::<Vec<_>>().join(","),
            db_to_first, ack_to_cqe, lossy, lossy / lossless_total, l.lost, amp_sent, amp_need, amp, amp_lost, amp_cycles,
            tail_clean, tail_adp, tail_std, tail_early, std_to, tail_adp14, rate, g1.goodput, gn.goodput, many_goodput,
            m1.steady, mn.steady, many_rate, latency_json(&lat)
        );
        return if missed == 0 { Ok(()) } else { Err(format!("{missed} benchmark target(s) missed")) };
    }
    println!("Hematite transport engine benchmark (512-bit datapath = 64 B/cycle; host memory latency {} cycles)", o.latency);
    println!();
    println!("RDMA WRITE, {} x 64 KiB, PMTU 4096, one QP:", n_big);
    println!("  payload {} B in {} cycles (first to last frame), {} frames", g.bytes, g.cycles, g.frames);
    println!("  goodput {:.2} B/cycle = {:.1}% of the datapath rate (wire {:.2} B/cycle; headers limit goodput to {:.1}%)",
             goodput, 100.0 * goodput / KW, wire_rate, 100.0 * ceiling);
    println!("message rate: {} single-packet WRITEs posted at once, one doorbell (steady state = last 3/4 of the frames):", n_small);
    println!("  {:<11} {:>6} {:>11} {:>12} {:>12} {:>15}", "payload", "wire", "sender", "first..last", "responder", "doorbell..last");
    println!("  {:<11} {:>6} {:>11} {:>12} {:>12} {:>15}", "", "floor", "cycles/WQE", "frame", "cycles/req", "CQE, per WQE");
    for (k, m) in &rates {
        println!("  {:<11} {:>6} {:>11.2} {:>12} {:>12.2} {:>15.2}", k, m.frame_beats, m.steady, m.cycles, m.peer_steady, m.db_to_cqe as f64 / n_small as f64);
    }
    println!("  (wire floor: beats per frame, one 64-byte beat per cycle; sender: steady state; responder: first to");
    println!("   last response frame over the requests (ACKs are coalesced); last column: doorbell to the last WQE's");
    println!("   CQE in host memory, over the WQE count)");
    println!("latency (one 64-byte WRITE):");
    println!("  doorbell accepted -> first byte on the wire: {} cycles (the WQE pushed: the MMIO path)", db_to_first);
    println!("  ACK last byte into the engine -> CQE in host memory: {} cycles", ack_to_cqe);
    print_latency(o, &lat);
    println!("RDMA WRITE under 1% frame loss ({} x 64 KiB):", n_lossy);
    println!("  {:.2} B/cycle doorbell to CQE = {:.1}% of the lossless run's {:.2} B/cycle ({} frames lost)",
             lossy, 100.0 * lossy / lossless_total, lossless_total, l.lost);
    println!("RDMA WRITE under 3% frame loss both ways ({} x 1 MiB, PMTU 1024; go-back-N with the window):", n_amp);
    println!("  {} request frames for the {} of the messages = {:.2}x ({} frames lost; doorbell to CQE {} cycles)",
             amp_sent, amp_need, amp, amp_lost, amp_cycles);
    println!("a lost tail: a 64 KiB WRITE (PMTU 4096) losing its last frame, after one that completed (doorbell to CQE):");
    println!("  lossless {} cycles; adaptive timer (tail-loss probe) {} cycles (+{}, {} early retransmission);", tail_clean, tail_adp,
             tail_adp.saturating_sub(tail_clean), tail_early);
    println!("  standard timer alone (timeout 3 = {} cycles) {} cycles (+{})", std_to, tail_std, tail_std.saturating_sub(tail_clean));
    println!("  at timeout 14 ({} cycles): adaptive timer {} cycles (+{} = {:.3}% of the timeout)", cyc(14), tail_adp14,
             tail_adp14.saturating_sub(tail_clean), 100.0 * tail_adp14.saturating_sub(tail_clean) as f64 / cyc(14) as f64);
    println!("many active QPs: the same WRITEs on one QP (32 large ones; 256 small ones, its ring) and spread round-robin over {MANY_QPS} QPs");
    println!("  (QPNs 2.., posted round-robin, one doorbell per QP rung back to back; steady state = last 3/4 of the frames):");
    println!("  {:<34} {:>12} {:>12} {:>8}", "", "one QP", format!("{MANY_QPS} QPs"), "ratio");
    println!("  {:<34} {:>12.2} {:>12.2} {:>7.1}%", format!("{} KiB WRITEs, goodput B/cycle", big / 1024), g1.goodput, gn.goodput, 100.0 * many_goodput);
    println!("  {:<34} {:>12.2} {:>12.2} {:>7.1}%", "64 B WRITEs (2 per QP), cycles/WQE", m1.steady, mn.steady, 100.0 * many_rate);
    println!("  ({MANY_QPS} QPs: doorbells rung in {} and {} cycles; doorbell to last CQE {} and {} cycles)",
             gn.doorbells, mn.doorbells, gn.db_to_cqe, mn.db_to_cqe);
    println!("simulation speed: {:.2} M cycles/s of wall time ({} engine-cycles in {:.1} s)", rate / 1e6, sim_cycles, secs);
    print_fw_latency(&fw_rows, bringup);
    print_checks(&checks);
    if missed > 0 {
        return Err(format!("{missed} benchmark target(s) missed"));
    }
    Ok(())
}

fn print_checks(checks: &[(String, f64, &str, f64, bool)]) {
    println!("targets (asserted):");
    for (name, v, op, t, ok) in checks {
        println!("  {:<58} {:>8.2} {op} {:<7} {}", name, v, t, if *ok { "met" } else { "MISSED" });
    }
    if checks.iter().all(|c| c.4) {
        println!("every target met");
    }
}

/// Firmware command latency on the control core (picorv32 running build/fw/firmware.hex
/// inside the NIC model, driving the engine's control bus): cycles from the mailbox doorbell
/// to the core's done pulse, for the commands that set up and tear down one RC QP.
fn fw_latency() -> Result<(Vec<(&'static str, u64)>, u64), String> {
    use hematite_sim::eng::Engine;
    use hematite_sim::fw;
    let image = fw::read_hex(&fw::image_path())?;
    let mut e = Engine::new(MemCfg::default());
    fw::boot(&mut e, &image)?;
    if std::env::var_os("HM_FW_PROFILE").is_some() {
        e.fw_prof = Some(Default::default());
    }
    let mut rows: Vec<(&'static str, u64)> = Vec::new();
    let run = |e: &mut Engine, name: &'static str, op: u16, args: &[u32], rows: &mut Vec<(&str, u64)>| -> Result<Vec<u32>, String> {
        let a = fw::call(e, op, 0, args, 5_000_000)?;
        if a.words[0] & 0xFF != 0 {
            return Err(format!("{name}: status {}", a.words[0] & 0xFF));
        }
        rows.push((name, a.cycles));
        if let Some(p) = e.fw_prof.take() {
            // HM_FW_PROFILE: cycles by instruction address for this command (scripts/fw-profile.py)
            let mut v: Vec<(u32, u64)> = p.cycles.into_iter().collect();
            v.sort();
            for (pc, c) in v {
                eprintln!("prof\t{name}\t{pc:#x}\t{c}");
            }
            e.fw_prof = Some(Default::default());
        }
        Ok(a.words)
    };
    // the first command also waits for the firmware's start (stack, .bss, tables)
    run(&mut e, "first command after start (QUERY_DEVICE)", 0x01, &[], &mut rows)?;
    run(&mut e, "QUERY_DEVICE", 0x01, &[], &mut rows)?;
    run(&mut e, "SET_GID", 0x04, &[0, 0, 0, 0xFFFF, 0x0A00_0001, 0x0000_0001, 0x0200], &mut rows)?;
    let pd = run(&mut e, "ALLOC_PD", 0x10, &[], &mut rows)?[1];
    let key = run(&mut e, "REG_MR", 0x20, &[pd, 0x100_0000, 0, 0x10_0000, 0, 0xF], &mut rows)?[1];
    let cq = run(&mut e, "CREATE_CQ", 0x30, &[12, 0x3000_0000, 0, 0], &mut rows)?[1];
    let qp = run(&mut e, "CREATE_QP", 0x40, &[pd, cq, cq, 2, 0x4002_0000, 0, 0x5002_0000, 0, 8, 0, 6, 0, 16, 16, 1, 1, 0], &mut rows)?[1];
    let mut blk = [0u32; hematite_abi::qp::ATTR_WORDS];
    blk[0] = 1;
    blk[2] = 0xF;
    blk[4] = 1;
    run(&mut e, "MODIFY_QP RESET->INIT", 0x41, &[&[qp, 1 | 1 << 3 | 1 << 4 | 1 << 5][..], &blk[..]].concat(), &mut rows)?;
    blk[0] = 2;
    blk[6] = 5;
    blk[13] = 4;
    blk[14] = 12;
    blk[15] = 2;
    blk[19..23].copy_from_slice(&[0, 0, 0xFFFF, 0x0A00_0002]);
    blk[23] = 2;
    blk[24] = 0x0200;
    blk[25] = 64;
    run(&mut e, "MODIFY_QP INIT->RTR", 0x41, &[&[qp, 1 | 1 << 7 | 1 << 8 | 1 << 20 | 1 << 12 | 1 << 17 | 1 << 15][..], &blk[..]].concat(), &mut rows)?;
    blk[0] = 3;
    blk[7] = 14;
    blk[8] = 7;
    blk[9] = 7;
    blk[12] = 4;
    run(&mut e, "MODIFY_QP RTR->RTS", 0x41, &[&[qp, 1 | 1 << 9 | 1 << 10 | 1 << 11 | 1 << 16 | 1 << 13][..], &blk[..]].concat(), &mut rows)?;
    run(&mut e, "QUERY_QP", 0x42, &[qp], &mut rows)?;
    run(&mut e, "DESTROY_QP", 0x43, &[qp], &mut rows)?;
    run(&mut e, "DEREG_MR", 0x21, &[key], &mut rows)?;
    run(&mut e, "DESTROY_CQ", 0x31, &[cq], &mut rows)?;
    run(&mut e, "DEALLOC_PD", 0x11, &[pd], &mut rows)?;
    let bringup: u64 = rows.iter().filter(|r| r.0 == "CREATE_QP" || r.0.starts_with("MODIFY_QP")).map(|r| r.1).sum();
    Ok((rows, bringup))
}

/// Ceiling of the QP bring-up (CREATE_QP and MODIFY_QP RESET->INIT->RTR->RTS) in control-core
/// cycles: a regression guard at today's figure (13,372 on 2026-12-05) plus about 15 %. Issue 20
/// asks for 25 us (6,250 cycles at 250 MHz); docs/firmware.md tells what stands between.
const BRINGUP_CEILING: f64 = 15_200.0;

fn print_fw_latency(rows: &[(&str, u64)], bringup: u64) {
    println!("control core: firmware command latency, mailbox doorbell -> done (picorv32 RV32IMC, build/fw/firmware.hex):");
    for (name, c) in rows {
        println!("  {:<44} {:>8} cycles = {:>7.1} us at 250 MHz", name, c, *c as f64 / 250.0);
    }
    println!("  {:<44} {:>8} cycles = {:>7.1} us at 250 MHz", "QP bring-up (CREATE_QP + the three MODIFY_QP)", bringup, bringup as f64 / 250.0);
}
