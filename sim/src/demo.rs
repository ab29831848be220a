//! `hematite-sim demo`: two simulated NICs (two device processes) joined by the datagram wire,
//! driven through the host driver: SEND, RDMA WRITE, RDMA READ and atomics with data
//! verification, throughput and latency in simulated time (at the nominal 250 MHz clock) and
//! in wall time.

use crate::device::CLOCK_HZ;
use hostdrv::nic::{access, Cq, Mr, Nic, Qp, QpCaps, RcPeer, RecvWr, SendOp, SendWr, WcOpcode, WcStatus};
use hostdrv::simdev::SimDevice;
use hostdrv::{Device, Error};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Demo options.
#[derive(Debug, Clone)]
pub struct DemoOpts {
    /// Message size in bytes (SEND, WRITE, READ).
    pub size: usize,
    /// Messages per operation.
    pub count: usize,
    /// Fraction of RoCE frames each NIC drops on transmit.
    pub loss: f64,
    /// QP pairs the messages are spread over.
    pub qps: usize,
    /// Working directory (sockets, pcaps); a fresh one under /tmp when None.
    pub dir: Option<PathBuf>,
    /// The `hematite-sim` binary that runs the devices.
    pub exe: PathBuf,
    /// Firmware image (passed to the devices).
    pub fw: Option<PathBuf>,
    /// Print progress.
    pub verbose: bool,
    /// `--trace FILE.fst [--trace-from C] [--trace-cycles N]` for NIC a's device process (a
    /// waveform; the waveform build only).
    pub trace_a: Vec<String>,
    /// Use the devices already serving `dir`/a.sock and `dir`/b.sock (`--attach DIR`) instead
    /// of starting two: the caller runs them (tests/shell/card_host.py serves the card's logic
    /// as NIC a) and they stay up afterwards.
    pub attach: bool,
}

/// One operation's figures.
#[derive(Debug, Clone)]
pub struct OpResult {
    pub name: &'static str,
    pub messages: usize,
    pub bytes: u64,
    /// Simulated cycles for the whole batch, and per-message latency (one message alone).
    pub cycles: u64,
    pub lat_cycles: u64,
    pub wall: Duration,
    pub lat_wall: Duration,
    pub verified: bool,
}

impl OpResult {
    /// Goodput in Gb/s of simulated time.
    pub fn sim_gbps(&self) -> f64 {
        self.bytes as f64 * 8.0 / (self.cycles as f64 / CLOCK_HZ as f64) / 1e9
    }
    /// Goodput in MB/s of wall time.
    pub fn wall_mbps(&self) -> f64 {
        self.bytes as f64 / self.wall.as_secs_f64() / 1e6
    }
}

/// The two devices of a demo run.
pub struct Pair {
    children: Vec<Child>,
    pub dir: PathBuf,
    pub pcaps: [PathBuf; 2],
}

impl Pair {
    /// The device processes' pids.
    pub fn pids(&self) -> Vec<u32> {
        self.children.iter().map(|c| c.id()).collect()
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        // SIGTERM first: the devices flush their pcaps and remove their socket files
        for c in &mut self.children {
            // SAFETY: kill(2) on our own child's pid.
            unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
        }
        let t0 = Instant::now();
        for c in &mut self.children {
            while t0.elapsed() < Duration::from_secs(3) {
                if let Ok(Some(_)) = c.try_wait() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Starts two device processes wired to each other; returns when both sockets exist.
pub fn start_pair(exe: &Path, dir: &Path, fw: Option<&Path>, loss: f64) -> Result<Pair, String> {
    start_pair_on(exe, dir, fw, loss, None, &[], &[])
}

/// As [`start_pair`]; `udp_base` = Some(port) puts the wire on UDP 127.0.0.1:port and port+1
/// instead of Unix datagram sockets; `extra` goes to both devices' command lines, `extra_a`
/// to NIC a's alone.
pub fn start_pair_on(exe: &Path, dir: &Path, fw: Option<&Path>, loss: f64, udp_base: Option<u16>, extra: &[&str], extra_a: &[String]) -> Result<Pair, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut children = Vec::new();
    let names = ["a", "b"];
    for (i, n) in names.iter().enumerate() {
        let peer = names[1 - i];
        let mut c = Command::new(exe);
        c.arg("device")
            .arg("--socket")
            .arg(dir.join(format!("{n}.sock")))
            .arg("--wire-local")
            .arg(match udp_base {
                Some(p) => format!("udp:127.0.0.1:{}", p + i as u16),
                None => dir.join(format!("{n}.wire")).display().to_string(),
            })
            .arg("--wire-peer")
            .arg(match udp_base {
                Some(p) => format!("udp:127.0.0.1:{}", p + 1 - i as u16),
                None => dir.join(format!("{peer}.wire")).display().to_string(),
            })
            .arg("--mac")
            .arg(format!("02:00:00:00:00:{:02x}", 0x0a + i))
            .arg("--ip")
            .arg(format!("10.0.0.{}", 1 + i))
            .arg("--pcap")
            .arg(dir.join(format!("{n}.pcap")))
            .arg("--loss")
            .arg(loss.to_string());
        if let Some(f) = fw {
            c.arg("--fw").arg(f);
        }
        c.args(extra);
        if i == 0 {
            c.args(extra_a);
        }
        c.stdin(Stdio::null());
        children.push(c.spawn().map_err(|e| format!("starting {}: {e}", exe.display()))?);
    }
    let mut pair = Pair { children, dir: dir.to_path_buf(), pcaps: [dir.join("a.pcap"), dir.join("b.pcap")] };
    let t0 = Instant::now();
    while !(dir.join("a.sock").exists() && dir.join("b.sock").exists()) {
        for (n, c) in names.iter().zip(pair.children.iter_mut()) {
            if let Ok(Some(st)) = c.try_wait() {
                return Err(format!("device {n} exited ({st}) before it came up; its messages are above"));
            }
        }
        if t0.elapsed() > Duration::from_secs(30) {
            return Err("the device processes did not come up within 30 s".into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(pair)
}

/// One side: the NIC and its objects.
pub struct Side {
    pub dev: Arc<SimDevice>,
    pub nic: Nic,
    pub cq: Cq,
    pub qps: Vec<Qp>,
    pub mr: Mr,
}

fn e2s(e: Error) -> String {
    e.to_string()
}

/// Opens the device at `sock` and creates a PD, a CQ, `nqp` QPs and one MR of `mr_len` bytes.
pub fn open_side(sock: &Path, nqp: usize, mr_len: usize) -> Result<Side, String> {
    let dev = Arc::new(SimDevice::open(sock).map_err(e2s)?);
    let nic = Nic::open(Box::new(dev.clone())).map_err(e2s)?;
    let pd = nic.alloc_pd().map_err(e2s)?;
    let cq = nic.create_cq(1024, Some(1)).map_err(e2s)?;
    let caps = QpCaps { max_send_wr: 128, max_recv_wr: 128, max_send_sge: 2, max_recv_sge: 2, max_inline_data: 64 };
    let mut qps = Vec::new();
    for _ in 0..nqp {
        qps.push(nic.create_qp(&pd, &cq, &cq, caps).map_err(e2s)?);
    }
    let mr = nic
        .alloc_mr(&pd, mr_len, access::LOCAL_WRITE | access::REMOTE_WRITE | access::REMOTE_READ | access::REMOTE_ATOMIC)
        .map_err(e2s)?;
    Ok(Side { dev, nic, cq, qps, mr })
}

/// Connects QP i of `a` with QP i of `b` (MACs learnt by ARP on the wire).
pub fn connect(a: &Side, b: &Side, timeout_code: u32) -> Result<(), String> {
    let (ia, ib) = (a.dev.info().ipv4.unwrap(), b.dev.info().ipv4.unwrap());
    let mac_b = a.dev.arp_resolve(ib).map_err(|e| format!("ARP for the peer: {e}"))?;
    let mac_a = b.dev.arp_resolve(ia).map_err(|e| format!("ARP for the peer: {e}"))?;
    let acc = access::LOCAL_WRITE | access::REMOTE_WRITE | access::REMOTE_READ | access::REMOTE_ATOMIC;
    for (i, (qa, qb)) in a.qps.iter().zip(&b.qps).enumerate() {
        let (pa, pb) = (0x1000 + i as u32 * 7, 0x2000 + i as u32 * 11);
        let peer_b = RcPeer { qpn: qb.qpn(), psn: pb, gid: hostdrv::nic::gid_from_ipv4(ib), mac: mac_b };
        let peer_a = RcPeer { qpn: qa.qpn(), psn: pa, gid: hostdrv::nic::gid_from_ipv4(ia), mac: mac_a };
        a.nic.connect_rc(qa, &peer_b, pa, acc, 5, timeout_code, 7).map_err(e2s)?;
        b.nic.connect_rc(qb, &peer_a, pb, acc, 5, timeout_code, 7).map_err(e2s)?;
    }
    Ok(())
}

fn pattern(seed: u64, n: usize) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Polls `cq` until `n` completions arrived (or `limit` passes); fails on any error status.
pub fn drain(nic: &Nic, cq: &Cq, n: usize, limit: Duration) -> Result<Vec<hostdrv::nic::Cqe>, String> {
    let t0 = Instant::now();
    let mut got = Vec::new();
    while got.len() < n {
        let c = nic.wait_cq(cq, n - got.len(), Duration::from_millis(200)).map_err(e2s)?;
        for e in &c {
            if e.status != WcStatus::Success {
                return Err(format!("completion with status {:?} ({:?}, wr_id {})", e.status, e.opcode, e.wr_id));
            }
        }
        got.extend(c);
        if got.len() < n && t0.elapsed() > limit {
            return Err(format!("only {} of {n} completions within {limit:?}", got.len()));
        }
    }
    Ok(got)
}

fn cycles(d: &SimDevice) -> Result<u64, String> {
    Ok(d.stats().map_err(e2s)?.cycles)
}

/// Kind of transfer.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kind {
    Send,
    Write,
    Read,
}

/// The bytes of message `i` of a transfer: distinct for every message, kind and size, so that
/// a message landing in the wrong place, twice, or not at all is seen by its own check.
fn message_data(kind: Kind, size: usize, i: usize) -> Vec<u8> {
    pattern((i as u64).wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (size as u64 * 31 + kind as u64), size)
}

/// Moves `count` messages of `size` bytes from a to b (SEND / WRITE) or b to a (READ, posted
/// by a), verifies the bytes, and measures. Layout of each MR: source area at 0, destination
/// area at half, each cut into `slots` buffers of `size` bytes.
///
/// Every message carries its own data (`message_data`) and is checked on its own: once its
/// completions are in (the requester's; for SEND also the receiver's), its destination buffer
/// must hold exactly its bytes. A buffer is reused for message `i + slots` only after message
/// `i` was checked, so no message can hide behind a later one.
pub fn transfer(a: &Side, b: &Side, kind: Kind, size: usize, count: usize, progress: bool) -> Result<OpResult, String> {
    let half = a.mr.len() as usize / 2;
    let slots = (half / size.max(1)).clamp(1, 64);
    let limit = Duration::from_secs(300);
    let name = match kind {
        Kind::Send => "SEND",
        Kind::Write => "RDMA WRITE",
        Kind::Read => "RDMA READ",
    };
    // the bytes: a's source area for SEND/WRITE, b's source area for READ
    let (src, dst) = match kind {
        Kind::Send | Kind::Write => (a, b),
        Kind::Read => (b, a),
    };
    let (sbuf, dbuf) = (src.mr.buf().unwrap(), dst.mr.buf().unwrap());
    dbuf.write(half, &vec![0u8; size * slots]).map_err(e2s)?;
    let nq = a.qps.len();
    let slot_off = |i: usize| (i % slots) * size;
    // message i: its data into its source buffer, its destination buffer cleared
    let stage = |i: usize, data: &[u8]| -> Result<(), String> {
        sbuf.write(slot_off(i), data).map_err(e2s)?;
        dbuf.write(half + slot_off(i), &vec![0u8; size]).map_err(e2s)
    };
    let check = |i: usize, data: &[u8]| -> Result<(), String> {
        let got = dbuf.to_vec(half + slot_off(i), size).map_err(e2s)?;
        match got.iter().zip(data).position(|(x, y)| x != y) {
            None => Ok(()),
            Some(at) => Err(format!("{name}: message {i} (buffer {}) differs at byte {at} of {size}", i % slots)),
        }
    };
    let wr_for = |i: usize| -> SendWr {
        let off = slot_off(i) as u64;
        match kind {
            Kind::Send => SendWr::new(i as u64, SendOp::Send, vec![a.mr.sge(off, size as u32)]),
            Kind::Write => SendWr::new(i as u64, SendOp::Write { remote_addr: b.mr.addr() + half as u64 + off, rkey: b.mr.rkey() }, vec![a.mr.sge(off, size as u32)]),
            Kind::Read => SendWr::new(i as u64, SendOp::Read { remote_addr: b.mr.addr() + off, rkey: b.mr.rkey() }, vec![a.mr.sge(half as u64 + off, size as u32)]),
        }
    };
    // receives for messages from..from+n, one doorbell per QP
    let post_recvs = |from: usize, n: usize| -> Result<(), String> {
        for q in 0..nq {
            let wrs: Vec<RecvWr> = (from..from + n)
                .filter(|i| i % nq == q)
                .map(|i| RecvWr { wr_id: i as u64, sgl: vec![b.mr.sge((half + slot_off(i)) as u64, size as u32)] })
                .collect();
            if !wrs.is_empty() {
                b.nic.post_recv(&b.qps[q], &wrs).map_err(e2s)?;
            }
        }
        Ok(())
    };
    // latency: one message alone (its own data, checked, not counted below)
    let lat_data = message_data(kind, size, usize::MAX);
    stage(0, &lat_data)?;
    if kind == Kind::Send {
        post_recvs(0, 1)?;
    }
    let c0 = cycles(&a.dev)?;
    let t0 = Instant::now();
    a.nic.post_send(&a.qps[0], &[wr_for(0)]).map_err(e2s)?;
    drain(&a.nic, &a.cq, 1, limit)?;
    if kind == Kind::Send {
        drain(&b.nic, &b.cq, 1, limit)?;
    }
    let lat_wall = t0.elapsed();
    let lat_cycles = cycles(&a.dev)? - c0;
    check(0, &lat_data).map_err(|e| format!("{e} (the latency message)"))?;
    // throughput: count messages, at most `slots` in flight (each in its own buffer)
    let want = match kind {
        Kind::Send => WcOpcode::Send,
        Kind::Write => WcOpcode::RdmaWrite,
        Kind::Read => WcOpcode::RdmaRead,
    };
    let mut data: Vec<Option<Vec<u8>>> = vec![None; slots];
    let mut req_done = vec![false; count];
    let mut rcv_done = vec![kind != Kind::Send; count];
    let mut checked = vec![false; count];
    let c0 = cycles(&a.dev)?;
    let t0 = Instant::now();
    let mut posted = 0usize;
    let mut done = 0usize;
    let mut recv_posted = 0usize;
    let mut recvd = 0usize;
    let mut nchecked = 0usize;
    let mut last_print = Instant::now();
    // checks message i once all its completions are in
    let try_check = |i: usize, req_done: &[bool], rcv_done: &[bool], checked: &mut [bool], data: &[Option<Vec<u8>>]| -> Result<bool, String> {
        if checked[i] || !req_done[i] || !rcv_done[i] {
            return Ok(false);
        }
        check(i, data[i % slots].as_deref().expect("staged"))?;
        checked[i] = true;
        Ok(true)
    };
    while nchecked < count {
        if kind == Kind::Send {
            // keep receives ahead of the sends (the RQ holds 128 per QP); a receive only names
            // a buffer, nothing lands in it before its SEND, which waits for the buffer's check
            let n = (count - recv_posted).min(recvd + 100 * nq - recv_posted);
            if n > 0 {
                post_recvs(recv_posted, n)?;
                recv_posted += n;
            }
        }
        let mut batch: Vec<Vec<SendWr>> = vec![Vec::new(); nq];
        while posted < count
            && (posted < slots || checked[posted - slots])
            && (kind != Kind::Send || posted < recv_posted)
        {
            let d = message_data(kind, size, posted);
            stage(posted, &d)?;
            data[posted % slots] = Some(d);
            batch[posted % nq].push(wr_for(posted));
            posted += 1;
        }
        for (q, wrs) in batch.iter().enumerate() {
            if !wrs.is_empty() {
                a.nic.post_send(&a.qps[q], wrs).map_err(e2s)?;
            }
        }
        let mut got = if done < posted { drain(&a.nic, &a.cq, 1, limit)? } else { Vec::new() };
        got.extend(a.nic.poll_cq(&a.cq, slots).map_err(e2s)?);
        let mut touched: Vec<usize> = Vec::new();
        for c in &got {
            if c.status != WcStatus::Success || c.opcode != want {
                return Err(format!("completion {c:?}, expected a successful {want:?}"));
            }
            let i = c.wr_id as usize;
            if i >= posted || req_done[i] {
                return Err(format!("{name}: completion for message {i}, which is not outstanding"));
            }
            req_done[i] = true;
            touched.push(i);
        }
        done += got.len();
        if kind == Kind::Send {
            // receive completions on b, one per message, in order per QP
            let r = b.nic.poll_cq(&b.cq, 1024).map_err(e2s)?;
            for c in &r {
                let i = c.wr_id as usize;
                if c.status != WcStatus::Success || c.byte_len as usize != size || i >= posted || rcv_done[i] {
                    return Err(format!("receive completion {c:?}"));
                }
                rcv_done[i] = true;
                touched.push(i);
            }
            recvd += r.len();
        }
        for i in touched {
            if try_check(i, &req_done, &rcv_done, &mut checked, &data)? {
                nchecked += 1;
            }
        }
        if kind == Kind::Send && done == posted && nchecked < posted {
            // every send completed; their receive completions may trail: wait for one
            let r = drain(&b.nic, &b.cq, 1, limit)?;
            for c in &r {
                let i = c.wr_id as usize;
                if c.byte_len as usize != size || i >= posted || rcv_done[i] {
                    return Err(format!("receive completion {c:?}"));
                }
                rcv_done[i] = true;
                if try_check(i, &req_done, &rcv_done, &mut checked, &data)? {
                    nchecked += 1;
                }
            }
            recvd += r.len();
        }
        if progress && last_print.elapsed() > Duration::from_secs(2) {
            eprintln!("  {kind:?}: {done}/{count} messages, {nchecked} checked");
            last_print = Instant::now();
        }
    }
    let wall = t0.elapsed();
    let cyc = cycles(&a.dev)? - c0;
    // nothing more may arrive: no stray completion on either side
    if kind == Kind::Send {
        let t = Instant::now();
        while t.elapsed() < Duration::from_millis(50) {
            if let Some(c) = b.nic.poll_cq(&b.cq, 16).map_err(e2s)?.first() {
                return Err(format!("{name}: receive completion beyond the {count} messages: {c:?}"));
            }
        }
    }
    let verified = nchecked == count && recvd == if kind == Kind::Send { count } else { 0 };
    if !verified {
        return Err(format!("{name}: {nchecked} of {count} messages checked, {recvd} receive completions"));
    }
    Ok(OpResult { name, messages: count, bytes: (size * count) as u64, cycles: cyc, lat_cycles, wall, lat_wall, verified })
}

/// Atomics: `count` FETCH_ADDs of 1 spread over the QPs on one remote counter, then a
/// CMP_SWAP that must see the final value; verifies both the returned values and the target.
pub fn atomics(a: &Side, b: &Side, count: usize) -> Result<OpResult, String> {
    let limit = Duration::from_secs(300);
    let bb = b.mr.buf().unwrap();
    let base: u64 = 0x1234_5678_0000_0000;
    bb.write(0, &base.to_le_bytes()).map_err(e2s)?;
    let ab = a.mr.buf().unwrap();
    let nq = a.qps.len();
    let c0 = cycles(&a.dev)?;
    let t0 = Instant::now();
    let fa = |i: usize| SendWr::new(i as u64, SendOp::FetchAdd { remote_addr: b.mr.addr(), rkey: b.mr.rkey(), add: 1 }, vec![a.mr.sge(8 * (i as u64 % 64), 8)]);
    a.nic.post_send(&a.qps[0], &[fa(0)]).map_err(e2s)?;
    drain(&a.nic, &a.cq, 1, limit)?;
    let lat_wall = t0.elapsed();
    let lat_cycles = cycles(&a.dev)? - c0;
    let first = ab.read_u64(0).map_err(e2s)?;
    if first != base {
        return Err(format!("FETCH_ADD returned {first:#x}, expected {base:#x}"));
    }
    let c0 = cycles(&a.dev)?;
    let t0 = Instant::now();
    let mut seen = Vec::new();
    let mut i = 1;
    while i < count {
        let n = (count - i).min(16);
        for k in 0..n {
            a.nic.post_send(&a.qps[(i + k) % nq], &[fa(i + k)]).map_err(e2s)?;
        }
        drain(&a.nic, &a.cq, n, limit)?;
        for k in 0..n {
            seen.push(ab.read_u64(8 * ((i + k) % 64)).map_err(e2s)?);
        }
        i += n;
    }
    // every value base+1 .. base+count-1 returned exactly once
    seen.sort();
    let want: Vec<u64> = (1..count as u64).map(|k| base + k).collect();
    if seen != want {
        return Err("FETCH_ADD results are not a permutation of the counter's values".into());
    }
    let fin = base + count as u64;
    let cs = SendWr::new(9999, SendOp::CmpSwap { remote_addr: b.mr.addr(), rkey: b.mr.rkey(), compare: fin, swap: 0xC0FFEE }, vec![a.mr.sge(8 * 100, 8)]);
    a.nic.post_send(&a.qps[0], &[cs]).map_err(e2s)?;
    drain(&a.nic, &a.cq, 1, limit)?;
    let old = ab.read_u64(800).map_err(e2s)?;
    let now = bb.read_u64(0).map_err(e2s)?;
    let wall = t0.elapsed();
    let cyc = cycles(&a.dev)? - c0;
    if old != fin || now != 0xC0FFEE {
        return Err(format!("CMP_SWAP: returned {old:#x} (expected {fin:#x}), target {now:#x} (expected 0xc0ffee)"));
    }
    Ok(OpResult { name: "ATOMICS", messages: count + 1, bytes: 8 * (count as u64 + 1), cycles: cyc, lat_cycles, wall, lat_wall, verified: true })
}

/// The whole demo; prints as it goes and returns the results.
pub fn run(o: &DemoOpts) -> Result<Vec<OpResult>, String> {
    let dir = o.dir.clone().unwrap_or_else(|| std::env::temp_dir().join(format!("hematite-demo-{}", std::process::id())));
    if o.attach {
        for n in ["a.sock", "b.sock"] {
            if !dir.join(n).exists() {
                return Err(format!("--attach: no device serves {}", dir.join(n).display()));
            }
        }
    } else {
        let _ = std::fs::remove_dir_all(&dir);
    }
    let say = |s: &str| {
        if o.verbose {
            println!("{s}");
        }
    };
    let pair = if o.attach {
        say(&format!("using the two NICs serving {}/a.sock and b.sock", dir.display()));
        None
    } else {
        say(&format!("starting two simulated NICs (engine + control core + firmware) in {}", dir.display()));
        Some(start_pair_on(&o.exe, &dir, o.fw.as_deref(), o.loss, None, &[], &o.trace_a)?)
    };
    let t0 = Instant::now();
    let mr_len = (2 * o.size * 64).max(8192);
    let a = open_side(&dir.join("a.sock"), o.qps, mr_len)?;
    let b = open_side(&dir.join("b.sock"), o.qps, mr_len)?;
    say(&format!("  both NICs open after {:.1} s (firmware booted, PD/CQ/{} QP(s)/MR created on each)", t0.elapsed().as_secs_f64(), o.qps));
    let port = a.nic.query_port(1).map_err(e2s)?;
    let at = a.nic.attr();
    say(&format!(
        "  device: fw {}.{}.{}, {} QPs, {} CQs, {} MRs; port state {} (4 = ACTIVE), MTU code {}",
        at.fw_ver >> 16,
        (at.fw_ver >> 8) & 0xFF,
        at.fw_ver & 0xFF,
        at.max_qp,
        at.max_cq,
        at.max_mr,
        port.state,
        port.active_mtu
    ));
    // a generous timeout code when frames are dropped: 4.096 us * 2^10 = 4.2 ms = 1M cycles
    let tcode = if o.loss > 0.0 { 10 } else { 14 };
    connect(&a, &b, tcode)?;
    say(&format!("  {} RC connection(s) up (peer MACs by ARP on the wire)", o.qps));
    let mut out = Vec::new();
    for k in [Kind::Send, Kind::Write, Kind::Read] {
        say(&format!("running {k:?}: {} x {} bytes ...", o.count, o.size));
        out.push(transfer(&a, &b, k, o.size, o.count, o.verbose)?);
    }
    say(&format!("running atomics: {} FETCH_ADD + 1 CMP_SWAP ...", o.count));
    out.push(atomics(&a, &b, o.count)?);
    let sa = a.dev.stats().map_err(e2s)?;
    let sb = b.dev.stats().map_err(e2s)?;
    drop(a);
    drop(b);
    drop(pair);
    if o.verbose {
        println!();
        println!(
            "{:<11} {:>6} {:>9} {:>11} {:>9} {:>8} {:>8} {:>9} {:>9} {:>9}  data",
            "operation", "msgs", "bytes", "sim cycles", "sim Gb/s", "lat cyc", "lat us", "wall s", "wall MB/s", "wall lat"
        );
        for r in &out {
            println!(
                "{:<11} {:>6} {:>9} {:>11} {:>9.2} {:>8} {:>8.2} {:>9.3} {:>9.2} {:>7.1}ms  {}",
                r.name,
                r.messages,
                r.bytes,
                r.cycles,
                r.sim_gbps(),
                r.lat_cycles,
                r.lat_cycles as f64 * 1e6 / CLOCK_HZ as f64,
                r.wall.as_secs_f64(),
                r.wall_mbps(),
                r.lat_wall.as_secs_f64() * 1e3,
                if r.verified { "verified" } else { "MISMATCH" }
            );
        }
        println!();
        println!(
            "sim: simulated time at the nominal {} MHz clock (the device's cycle counter); lat: one message alone, doorbell to CQE; wall: this process's clock",
            CLOCK_HZ / 1_000_000
        );
        println!("NIC a: {} cycles simulated, {} frames sent, {} received; NIC b: {} cycles, {} / {} frames", sa.cycles, sa.frames_tx, sa.frames_rx, sb.cycles, sb.frames_tx, sb.frames_rx);
        if let Some(w) = out.iter().find(|r| r.name == "RDMA WRITE") {
            println!(
                "co-simulation speed while busy (RDMA WRITE phase, NIC a): {:.0} cycles/s of wall time; verified WRITE payload {:.2} MB/s of wall time",
                w.cycles as f64 / w.wall.as_secs_f64(),
                w.wall_mbps()
            );
        }
        if !o.attach {
            println!("pcaps: {} and {}", dir.join("a.pcap").display(), dir.join("b.pcap").display());
        }
    }
    Ok(out)
}

/// What one side of a two-process test publishes: QPN, first PSN, IPv4 address, MAC.
pub fn write_info(path: &Path, qpn: u32, psn: u32, ip: u32, mac: u64) -> Result<(), String> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, format!("{qpn} {psn} {ip} {mac}\n")).map_err(|e| e.to_string())?;
    std::fs::rename(&tmp, path).map_err(|e| e.to_string())
}

/// Waits for the peer's [`write_info`] file (at most `limit`).
pub fn read_info(path: &Path, limit: Duration) -> Result<(u32, u32, u32, u64), String> {
    let t0 = Instant::now();
    loop {
        if let Ok(s) = std::fs::read_to_string(path) {
            let v: Vec<u64> = s.split_whitespace().filter_map(|x| x.parse().ok()).collect();
            if v.len() == 4 {
                return Ok((v[0] as u32, v[1] as u32, v[2] as u32, v[3]));
            }
        }
        if t0.elapsed() > limit {
            return Err(format!("no peer information in {} within {limit:?}", path.display()));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `hematite-sim rc-echo`: one RC QP on the device at `sock`; publishes its address in
/// `info_out`, connects to the peer named in `info_in`, then echoes every SEND it receives
/// (up to `count`, `size` bytes at most) back as a SEND. Used by the two-process tests.
pub fn rc_echo(sock: &Path, info_out: &Path, info_in: &Path, count: usize, size: usize) -> Result<(), String> {
    let s = open_side(sock, 1, (2 * size * 64).max(8192))?;
    let qp = &s.qps[0];
    let psn = 0x3333;
    write_info(info_out, qp.qpn(), psn, s.dev.info().ipv4.unwrap(), s.dev.info().mac.unwrap())?;
    let (pq, ppsn, pip, pmac) = read_info(info_in, Duration::from_secs(120))?;
    let acc = access::LOCAL_WRITE | access::REMOTE_WRITE | access::REMOTE_READ | access::REMOTE_ATOMIC;
    let peer = RcPeer { qpn: pq, psn: ppsn, gid: hostdrv::nic::gid_from_ipv4(pip), mac: pmac };
    // receives first, so that nothing the peer sends meets an empty queue
    let slots = 64usize;
    let recv = |i: usize| RecvWr { wr_id: i as u64, sgl: vec![s.mr.sge(((i % slots) * size) as u64, size as u32)] };
    let wrs: Vec<RecvWr> = (0..slots.min(count)).map(recv).collect();
    s.nic.modify_qp(qp, &hostdrv::nic::QpAttr { qp_state: hostdrv::nic::QpState::Init, qp_access_flags: acc, ..Default::default() }, hostdrv::nic::mask::STATE | hostdrv::nic::mask::PKEY_INDEX | hostdrv::nic::mask::PORT | hostdrv::nic::mask::ACCESS_FLAGS).map_err(e2s)?;
    s.nic.post_recv(qp, &wrs).map_err(e2s)?;
    // INIT -> RTR -> RTS (connect_rc would start from RESET)
    let a = hostdrv::nic::QpAttr {
        qp_state: hostdrv::nic::QpState::Rtr,
        path_mtu: 5,
        dest_qp_num: peer.qpn,
        rq_psn: peer.psn,
        dgid: peer.gid,
        dmac: peer.mac,
        ..Default::default()
    };
    use hostdrv::nic::mask as m;
    s.nic.modify_qp(qp, &a, m::STATE | m::AV | m::PATH_MTU | m::DEST_QPN | m::RQ_PSN | m::MAX_DEST_RD_ATOMIC | m::MIN_RNR_TIMER).map_err(e2s)?;
    let a = hostdrv::nic::QpAttr { qp_state: hostdrv::nic::QpState::Rts, timeout: 10, retry_cnt: 7, sq_psn: psn, ..Default::default() };
    s.nic.modify_qp(qp, &a, m::STATE | m::TIMEOUT | m::RETRY_CNT | m::RNR_RETRY | m::SQ_PSN | m::MAX_QP_RD_ATOMIC).map_err(e2s)?;
    write_info(&info_out.with_extension("ready"), 1, 1, 1, 1)?;
    let mut posted = slots.min(count);
    let mut echoed = 0;
    while echoed < count {
        let c = s.nic.wait_cq(&s.cq, 16, Duration::from_millis(500)).map_err(e2s)?;
        for e in c {
            if e.status != WcStatus::Success {
                return Err(format!("completion {e:?}"));
            }
            if e.opcode == WcOpcode::Recv {
                let i = e.wr_id as usize;
                let off = ((i % slots) * size) as u64;
                s.nic.post_send(qp, &[SendWr::new(1_000_000 + i as u64, SendOp::Send, vec![s.mr.sge(off, e.byte_len)])]).map_err(e2s)?;
                echoed += 1;
                if posted < count {
                    s.nic.post_recv(qp, &[recv(posted)]).map_err(e2s)?;
                    posted += 1;
                }
            }
        }
    }
    // let the last echoes complete
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(5) {
        if s.nic.wait_cq(&s.cq, 16, Duration::from_millis(200)).map_err(e2s)?.is_empty() {
            break;
        }
    }
    Ok(())
}
