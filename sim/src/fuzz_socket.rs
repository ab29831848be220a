//! Fuzzing the simulated device's client socket (`hematite-fuzz socket`).
//!
//! A device process (`hematite-sim device`) is started and attacked as a client: sessions of
//! random valid-looking requests checked against a model of the protocol (statuses, which
//! requests reply, HELLO first, DMA window bookkeeping), wrong opcodes and flags, requests
//! before HELLO, truncated / oversized / empty messages, descriptors on any request (eventfds,
//! pipes, /dev/null, many at once), DMA windows with bad addresses and sizes or over memory that
//! is not mapped, random register writes anywhere in BAR0 (doorbells, the control core's IMEM
//! and control register), floods of requests whose replies are not read, half-closed sockets,
//! messages after the device closed the connection, and many connections at once.
//!
//! Findings: the device process exits or stops answering (no reply within the timeout, or a
//! well-behaved client cannot open the device afterwards), a reply that is malformed, for
//! another request, unexpected, or with a status the protocol does not give for that request,
//! or a malformed request that does not end its connection. After every few sessions, and at
//! the end, a well-behaved client opens the device through `hostdrv` and runs firmware commands
//! (PD, CQ, QP, MR: DMA into its memory) to show the device still works.

use hematite_sim::Rng;
use hostdrv::simproto::{self as p, Rep, Req};
use std::collections::BTreeMap;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Campaign settings.
#[derive(Debug, Clone)]
pub struct SocketFuzzOpts {
    /// Messages to send (every request, malformed or not, counts as one case).
    pub count: u64,
    pub seed: u64,
    /// The `hematite-sim` executable.
    pub sim: PathBuf,
    /// Firmware image (None: the device's default).
    pub fw: Option<PathBuf>,
    /// Work folder (socket, wire, the device's log, findings).
    pub dir: PathBuf,
    /// A full check through `hostdrv::Nic` every this many sessions (0: only at the start and end).
    pub nic_check_every: u64,
}

/// What a campaign found.
#[derive(Debug, Default, Clone)]
pub struct SocketFuzzReport {
    pub cases: u64,
    pub findings: u64,
    pub sessions: u64,
    pub nic_checks: u64,
    /// Replies seen, by status.
    pub statuses: BTreeMap<i32, u64>,
    /// Connections the device closed (malformed requests, floods, refusals).
    pub closed_by_device: u64,
    /// The findings, one line each.
    pub notes: Vec<String>,
}

const TIMEOUT: Duration = Duration::from_secs(10);
const BAR0: u64 = hematite_sim::device::BAR0_SIZE;
const NUM_IRQS: u64 = 16;

struct Device {
    child: Child,
    sock: PathBuf,
    log: PathBuf,
}

impl Device {
    fn start(o: &SocketFuzzOpts) -> Result<Device, String> {
        std::fs::create_dir_all(&o.dir).map_err(|e| format!("{}: {e}", o.dir.display()))?;
        let sock = o.dir.join("dev.sock");
        let _ = std::fs::remove_file(&sock);
        let log = o.dir.join("device.log");
        let logf = std::fs::File::create(&log).map_err(|e| format!("{}: {e}", log.display()))?;
        let mut c = Command::new(&o.sim);
        c.arg("device")
            .arg("--socket")
            .arg(&sock)
            .arg("--wire-local")
            .arg(o.dir.join("dev.wire"))
            .arg("--wire-peer")
            .arg(o.dir.join("nobody.wire"))
            .arg("--idle-after")
            .arg("20000")
            .arg("-v")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(logf);
        if let Some(f) = &o.fw {
            c.arg("--fw").arg(f);
        }
        let child = c.spawn().map_err(|e| format!("{}: {e}", o.sim.display()))?;
        let mut d = Device { child, sock, log };
        let t = Instant::now();
        while !d.sock.exists() {
            if let Some(e) = d.exited() {
                return Err(format!("the device process ended before listening: {e}"));
            }
            if t.elapsed() > Duration::from_secs(120) {
                return Err("the device process did not open its socket within 120 s".into());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(d)
    }

    /// Some(description) once the process has ended.
    fn exited(&mut self) -> Option<String> {
        match self.child.try_wait() {
            Ok(Some(st)) => Some(format!("{st}; log tail: {}", self.log_tail())),
            Ok(None) => None,
            Err(e) => Some(e.to_string()),
        }
    }

    fn log_tail(&self) -> String {
        let s = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = s.lines().filter(|l| !l.contains("idle")).collect();
        lines[lines.len().saturating_sub(3)..].join(" | ")
    }
}

impl Drop for Device {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One request and what the protocol says about its answer.
struct Sent {
    req: Req,
    /// Acceptable statuses (empty: any negative errno or 0).
    ok: Vec<i32>,
    /// ARP and RESET may take long.
    slow: bool,
}

/// A client connection with the model of its protocol state.
struct Conn {
    fd: OwnedFd,
    seq: u32,
    hello: bool,
    windows: Vec<(u64, u64)>,
    /// The device has closed (or must close) the connection.
    closed: bool,
    /// The device may close the connection (after a control-core trap the session ends).
    may_close: bool,
}

/// Memory the fuzzer may hand to the device as DMA windows (the engine may write anywhere in
/// it): 64 pages, page aligned.
struct Arena {
    buf: Vec<u8>,
}

impl Arena {
    fn new() -> Arena {
        Arena { buf: vec![0u8; 65 * 4096] }
    }
    fn base(&self) -> u64 {
        (self.buf.as_ptr() as u64 + 4095) & !4095
    }
}

struct Campaign<'a> {
    o: &'a SocketFuzzOpts,
    rng: Rng,
    rep: SocketFuzzReport,
    dev: Device,
    arena: Arena,
    eventfd: OwnedFd,
    pipe: (std::fs::File, std::fs::File),
    devnull: std::fs::File,
    /// How the previous session ended (for the findings' context).
    last_end: &'static str,
}

fn e2s(e: impl std::fmt::Display) -> String {
    e.to_string()
}

impl Campaign<'_> {
    fn finding(&mut self, what: String) {
        self.rep.findings += 1;
        let what = format!("session {} (after ending {}): {what}", self.rep.sessions, self.last_end);
        eprintln!("FINDING {}: {what}", self.rep.findings);
        self.rep.notes.push(what);
    }

    fn rnd(&mut self, n: u64) -> u64 {
        self.rng.next() % n.max(1)
    }

    fn chance(&mut self, per_mille: u64) -> bool {
        self.rnd(1000) < per_mille
    }

    fn connect(&mut self) -> Result<Conn, String> {
        let fd = p::connect(&self.dev.sock).map_err(e2s)?;
        p::set_nonblocking(fd.as_raw_fd(), true).map_err(e2s)?;
        Ok(Conn { fd, seq: 0, hello: false, windows: Vec::new(), closed: false, may_close: false })
    }

    /// A random value with a bias to boundaries.
    fn val(&mut self) -> u64 {
        match self.rnd(12) {
            0 => 0,
            1 => u64::MAX,
            2 => 1u64 << self.rnd(64),
            3 => (1u64 << self.rnd(64)).wrapping_sub(1),
            4 => self.rnd(BAR0 + 16),
            5 => self.rnd(NUM_IRQS + 4),
            6 => self.rnd(0x40) * 4096,
            7 => 0xffff_8000_0000_0000 + self.rnd(1 << 20) * 4096,
            _ => self.rng.next(),
        }
    }

    /// Statuses the protocol allows for `r` on `c` (updating the model), and whether a reply comes.
    fn expect(&mut self, c: &mut Conn, r: &Req, fd: Option<FdKind>) -> (bool, Vec<i32>, bool) {
        let posted = r.flags & p::F_POSTED != 0;
        let always = matches!(r.cmd, p::CMD_HELLO | p::CMD_SET_IRQ | p::CMD_RESET | p::CMD_ARP_RESOLVE | p::CMD_STATS);
        if !c.hello && r.cmd != p::CMD_HELLO {
            return (!posted, vec![-libc::EPROTO], false);
        }
        let reply = always || !posted;
        let ok = match r.cmd {
            p::CMD_HELLO => {
                if r.a == p::PROTO_VERSION {
                    c.hello = true;
                    vec![0]
                } else {
                    vec![-libc::EPROTO]
                }
            }
            p::CMD_WAIT32 => {
                if r.d > p::WAIT_MAX_CYCLES || r.b > u32::MAX as u64 || r.c > u32::MAX as u64 {
                    vec![-libc::EINVAL]
                } else if r.a >= BAR0 {
                    vec![-libc::EFAULT]
                } else {
                    vec![0, -libc::EFAULT, -libc::ECANCELED]
                }
            }
            p::CMD_READ32 | p::CMD_WRITE32 => {
                if r.a >= BAR0 {
                    vec![-libc::EFAULT]
                } else {
                    // ECANCELED: discarded by a RESET that came after it
                    vec![0, -libc::EFAULT, -libc::ECANCELED]
                }
            }
            p::CMD_DMA_MAP => {
                let (iova, va, len) = (r.a, r.b, r.c);
                if len == 0 || iova % 4096 != 0 || va % 4096 != 0 || len % 4096 != 0 || iova.checked_add(len).is_none() {
                    vec![-libc::EINVAL]
                } else if c.windows.iter().any(|&(i, l)| iova < i + l && i < iova + len) {
                    vec![-libc::EEXIST]
                } else {
                    c.windows.push((iova, len));
                    vec![0]
                }
            }
            p::CMD_DMA_UNMAP => {
                let before = c.windows.len();
                c.windows.retain(|&(i, l)| !(i == r.a && l == r.b));
                if c.windows.len() == before {
                    vec![-libc::ENOENT]
                } else {
                    vec![0]
                }
            }
            p::CMD_SET_IRQ => {
                if r.a >= NUM_IRQS {
                    vec![-libc::EINVAL]
                } else if r.b != 0 {
                    match fd {
                        Some(FdKind::Eventfd) => vec![0],
                        Some(_) => vec![-libc::EINVAL],
                        None => vec![-libc::EBADF],
                    }
                } else {
                    vec![0]
                }
            }
            p::CMD_RESET => vec![0, -libc::EIO],
            p::CMD_ARP_RESOLVE => vec![0, -libc::EHOSTUNREACH],
            p::CMD_STATS => vec![0],
            _ => vec![-libc::ENOSYS],
        };
        (reply, ok, matches!(r.cmd, p::CMD_ARP_RESOLVE | p::CMD_RESET))
    }

    fn fd_of(&self, k: FdKind) -> RawFd {
        match k {
            FdKind::Eventfd => self.eventfd.as_raw_fd(),
            FdKind::Pipe => self.pipe.1.as_raw_fd(),
            FdKind::DevNull => self.devnull.as_raw_fd(),
        }
    }

    /// Sends raw bytes (with descriptors); counts a case. False when the socket is full.
    fn send_raw(&mut self, c: &mut Conn, bytes: &[u8], fds: &[RawFd]) -> bool {
        self.rep.cases += 1;
        match p::send_fds(c.fd.as_raw_fd(), bytes, fds) {
            Ok(sent) => sent,
            Err(_) => {
                // EPIPE / ECONNRESET: the device closed the connection (a message after close)
                c.closed = true;
                false
            }
        }
    }

    /// A random request (mostly well formed), sent; returns what to expect.
    fn random_request(&mut self, c: &mut Conn, pending: &mut Vec<Sent>) {
        let cmd = match self.rnd(100) {
            0..=24 => p::CMD_READ32,
            25..=44 => p::CMD_WRITE32,
            45..=59 => p::CMD_DMA_MAP,
            60..=69 => p::CMD_DMA_UNMAP,
            70..=77 => p::CMD_SET_IRQ,
            78..=79 => p::CMD_RESET,
            80..=84 => p::CMD_STATS,
            85..=87 => p::CMD_HELLO,
            88 if self.chance(20) => p::CMD_ARP_RESOLVE,
            89..=91 => p::CMD_WAIT32,
            _ => match self.rnd(3) {
                0 => 0,
                1 => 11 + self.rnd(100) as u16,
                _ => self.rng.next() as u16,
            },
        };
        c.seq = c.seq.wrapping_add(1);
        let mut r = Req { seq: c.seq, cmd, flags: 0, a: self.val(), b: self.val(), c: self.val(), d: self.val() };
        if self.chance(50) {
            r.seq = self.rng.next() as u32; // sequence numbers are the client's business
        }
        r.flags = match self.rnd(10) {
            0..=5 => 0,
            6..=7 => p::F_POSTED,
            8 => self.rng.next() as u16 & !p::F_POSTED,
            _ => self.rng.next() as u16,
        };
        match cmd {
            p::CMD_HELLO => r.a = if self.chance(800) { p::PROTO_VERSION } else { self.val() },
            p::CMD_READ32 | p::CMD_WRITE32 => {
                r.a = match self.rnd(10) {
                    0..=5 => self.rnd(0x1_0000 / 4) * 4,  // engine registers (doorbells included)
                    6..=7 => 0x1_0000 + self.rnd(0x1_0000 / 4) * 4, // control core port, IMEM
                    8 => self.rnd(BAR0),
                    _ => self.val(),
                };
                if cmd == p::CMD_WRITE32 && self.chance(700) {
                    r.flags |= p::F_POSTED; // as SimDevice sends them
                }
            }
            p::CMD_DMA_MAP => {
                let base = self.arena.base();
                match self.rnd(6) {
                    0..=1 => {
                        // inside the arena (the engine may write there)
                        let pg = self.rnd(64);
                        let n = 1 + self.rnd(64 - pg);
                        r.a = self.rnd(0x400) * 4096;
                        r.b = base + pg * 4096;
                        r.c = n * 4096;
                    }
                    2 => {
                        // not mapped in this process, or kernel addresses
                        r.a = self.rnd(0x400) * 4096;
                        r.b = [0x1000, 0xffff_8000_0000_0000, 0x7fff_ffff_f000, 1 << 46][self.rnd(4) as usize];
                        r.c = (1 + self.rnd(16)) * 4096;
                    }
                    3 => {
                        // an existing window again (overlap), or a huge one
                        if let Some(&(i, l)) = c.windows.first() {
                            r.a = i;
                            r.c = l;
                        } else {
                            r.c = 1 << 40;
                        }
                        r.b = base;
                    }
                    _ => {}
                }
                // writable windows over the arena only: the engine must not scribble on the
                // fuzzer's own memory
                r.d = if r.b >= base && r.b.saturating_add(r.c) <= base + 64 * 4096 { self.rnd(2) } else { 0 };
            }
            p::CMD_DMA_UNMAP => {
                if let Some(&(i, l)) = c.windows.get(self.rnd(c.windows.len() as u64 + 1) as usize) {
                    r.a = i;
                    r.b = if self.chance(800) { l } else { self.val() };
                }
            }
            p::CMD_SET_IRQ => {
                r.a = self.rnd(NUM_IRQS + 2);
                r.b = self.rnd(2);
            }
            p::CMD_ARP_RESOLVE => r.a = 0x0a00_00fe,
            p::CMD_WAIT32 => {
                // mostly a register, a 32-bit mask and value and a short wait (a long one would
                // hold the connection for seconds); sometimes anything
                if self.chance(900) {
                    r.a = self.rnd(0x2_0000 / 4) * 4;
                    r.b &= 0xFFFF_FFFF;
                    r.c &= 0xFFFF_FFFF;
                    r.d = self.rnd(4096);
                }
            }
            _ => {}
        }
        // a descriptor on any request, sometimes several
        let kinds = [FdKind::Eventfd, FdKind::Pipe, FdKind::DevNull];
        let mut fds = Vec::new();
        let first = if cmd == p::CMD_SET_IRQ && r.b != 0 && self.chance(800) || self.chance(30) {
            let k = kinds[self.rnd(3) as usize];
            fds.push(self.fd_of(k));
            Some(k)
        } else {
            None
        };
        if first.is_some() && self.chance(50) {
            for _ in 0..self.rnd(40) {
                fds.push(self.devnull.as_raw_fd());
            }
        }
        let (reply, ok, slow) = self.expect(c, &r, first);
        if self.send_raw(c, &r.encode(), &fds) && reply {
            pending.push(Sent { req: r, ok, slow });
        }
    }

    /// Collects the replies to `pending` (in any order). Findings for wrong or missing replies.
    fn collect(&mut self, c: &mut Conn, pending: &mut Vec<Sent>) -> Result<(), String> {
        let mut buf = [0u8; 256];
        let mut deadline = Instant::now() + TIMEOUT;
        while !pending.is_empty() && !c.closed {
            if pending.iter().any(|s| s.slow) {
                deadline = deadline.max(Instant::now() + Duration::from_secs(3));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                let s = &pending[0];
                let what = format!("no reply within {TIMEOUT:?} to cmd {} seq {} ({} outstanding)", s.req.cmd, s.req.seq, pending.len());
                self.check_alive(&what)?;
                self.finding(what);
                c.closed = true;
                return Ok(());
            }
            p::wait_fd(c.fd.as_raw_fd(), libc::POLLIN, left.as_millis().min(1000) as i32).map_err(e2s)?;
            match p::recv(c.fd.as_raw_fd(), &mut buf) {
                Ok(p::Recv::Msg(n, fd)) => {
                    if fd.is_some() {
                        self.finding("the device sent a descriptor".into());
                    }
                    let Some(rep) = Rep::decode(&buf[..n]) else {
                        self.finding(format!("malformed reply of {n} bytes"));
                        continue;
                    };
                    let Some(i) = pending.iter().position(|s| s.req.seq == rep.seq && s.req.cmd == rep.cmd) else {
                        self.finding(format!("unexpected reply seq {} cmd {} status {}", rep.seq, rep.cmd, rep.status));
                        continue;
                    };
                    let s = pending.remove(i);
                    *self.rep.statuses.entry(rep.status).or_default() += 1;
                    if !s.ok.contains(&rep.status) {
                        self.finding(format!(
                            "cmd {} flags {:#x} a {:#x} b {:#x} c {:#x} d {:#x}: status {} (expected one of {:?})",
                            s.req.cmd, s.req.flags, s.req.a, s.req.b, s.req.c, s.req.d, rep.status, s.ok
                        ));
                    }
                }
                Ok(p::Recv::Empty) => {}
                Ok(p::Recv::Closed) | Err(_) => {
                    c.closed = true;
                    self.rep.closed_by_device += 1;
                    if c.may_close {
                        break;
                    }
                    let s = &pending[0];
                    let what = format!("the device closed the connection with {} well-formed requests unanswered (first: cmd {} seq {})", pending.len(), s.req.cmd, s.req.seq);
                    self.check_alive(&what)?;
                    self.finding(what);
                }
            }
        }
        pending.clear();
        Ok(())
    }

    /// Waits for the device to close `c` (after a malformed request); a finding if it does not.
    fn expect_close(&mut self, c: &mut Conn, why: &str) -> Result<(), String> {
        let mut buf = [0u8; 256];
        let t = Instant::now();
        while t.elapsed() < TIMEOUT {
            p::wait_fd(c.fd.as_raw_fd(), libc::POLLIN, 200).map_err(e2s)?;
            match p::recv(c.fd.as_raw_fd(), &mut buf) {
                Ok(p::Recv::Msg(..)) => {} // replies to earlier requests
                Ok(p::Recv::Empty) => {}
                _ => {
                    c.closed = true;
                    self.rep.closed_by_device += 1;
                    return Ok(());
                }
            }
        }
        let what = format!("the connection stayed open after {why}");
        self.check_alive(&what)?;
        self.finding(what);
        Ok(())
    }

    /// Err (ends the campaign) when the device process has ended.
    fn check_alive(&mut self, context: &str) -> Result<(), String> {
        if let Some(e) = self.dev.exited() {
            self.finding(format!("the device process ended ({context}): {e}"));
            return Err("the device process ended".into());
        }
        Ok(())
    }

    fn session(&mut self) -> Result<(), String> {
        self.rep.sessions += 1;
        let mut c = self.connect()?;
        let kind = self.rnd(100);
        let mut pending = Vec::new();
        if kind < 8 {
            // no HELLO: everything refused with EPROTO, nothing reaches the device
            for _ in 0..1 + self.rnd(30) {
                self.random_request(&mut c, &mut pending);
            }
            return self.collect(&mut c, &mut pending);
        }
        // HELLO first (mostly), then bursts of requests checked against the model
        if kind >= 12 {
            c.seq += 1;
            let r = Req { seq: c.seq, cmd: p::CMD_HELLO, a: p::PROTO_VERSION, b: self.val(), ..Default::default() };
            let (_, ok, _) = self.expect(&mut c, &r, None);
            if self.send_raw(&mut c, &r.encode(), &[]) {
                pending.push(Sent { req: r, ok, slow: false });
            }
            self.collect(&mut c, &mut pending)?;
        }
        let bursts = 1 + self.rnd(30);
        for _ in 0..bursts {
            if c.closed {
                break;
            }
            for _ in 0..1 + self.rnd(24) {
                self.random_request(&mut c, &mut pending);
            }
            self.collect(&mut c, &mut pending)?;
        }
        // how the session ends
        let end = self.rnd(20);
        self.last_end = ["malformed", "malformed", "flood", "half-close", "shut-rd", "many-connections", "core-reload"].get(end as usize).copied().unwrap_or("close");
        match end {
            0..=1 => {
                // a message of the wrong size: the device ends the connection
                let n = match self.rnd(4) {
                    0 => self.rnd(p::REQ_BYTES as u64) as usize,
                    1 => p::REQ_BYTES + 1 + self.rnd(100) as usize,
                    2 => 128 + self.rnd(65536) as usize,
                    _ => p::REQ_BYTES - 1,
                };
                let mut b = vec![0u8; n];
                for x in b.iter_mut() {
                    *x = self.rng.next() as u8;
                }
                if n >= 6 && self.chance(500) {
                    b[4..6].copy_from_slice(&p::CMD_READ32.to_le_bytes());
                }
                let fds = if n == 0 || self.chance(200) { vec![self.devnull.as_raw_fd()] } else { vec![] };
                if self.send_raw(&mut c, &b, &fds) && !c.closed {
                    self.expect_close(&mut c, &format!("a {n}-byte request"))?;
                }
                // messages after close
                for _ in 0..self.rnd(4) {
                    let r = Req { seq: 1, cmd: p::CMD_STATS, ..Default::default() };
                    self.send_raw(&mut c, &r.encode(), &[]);
                }
            }
            2 => {
                // a flood of reads whose replies are not read
                let n = 200 + self.rnd(3000);
                let mut sent = 0;
                for i in 0..n {
                    let r = Req { seq: i as u32, cmd: p::CMD_READ32, a: 0, ..Default::default() };
                    if !self.send_raw(&mut c, &r.encode(), &[]) {
                        break;
                    }
                    sent += 1;
                }
                let _ = sent;
                // the device must keep its clock loop (and other connections) going meanwhile
                self.many_connections()?;
            }
            3 => {
                // half-closed: requests, then no more writing (the device sees end of file)
                for _ in 0..self.rnd(4) {
                    self.random_request(&mut c, &mut pending);
                }
                let _ = p::shutdown(c.fd.as_raw_fd(), libc::SHUT_WR);
                pending.clear();
                self.expect_close(&mut c, "shutdown(SHUT_WR) by the client")?;
            }
            4 => {
                // the client stops reading, then sends more
                let _ = p::shutdown(c.fd.as_raw_fd(), libc::SHUT_RD);
                for _ in 0..1 + self.rnd(8) {
                    let mut pend = Vec::new();
                    self.random_request(&mut c, &mut pend);
                }
            }
            5 => self.many_connections()?,
            6 if c.hello && !c.closed => {
                // reload the control core with garbage: hold it, write random IMEM words
                // (word 0, where it starts, included), run it; the device must survive what the
                // core does then (traps included) and answer
                let w = |s: &mut Self, c: &mut Conn, off: u64, v: u64| {
                    c.seq = c.seq.wrapping_add(1);
                    let r = Req { seq: c.seq, cmd: p::CMD_WRITE32, flags: p::F_POSTED, a: 0x1_0000 + off, b: v, ..Default::default() };
                    s.send_raw(c, &r.encode(), &[]);
                };
                c.may_close = true;
                w(self, &mut c, 0x208, 0);
                for k in 0..1 + self.rnd(16) {
                    let off = if k == 0 { 0 } else { self.rnd(8192) * 4 };
                    let v = if self.chance(300) { 0 } else { self.rng.next() & 0xffff_ffff };
                    w(self, &mut c, 0x8000 + off, v);
                }
                w(self, &mut c, 0x208, 1);
                for _ in 0..4 {
                    if c.closed {
                        break;
                    }
                    c.seq = c.seq.wrapping_add(1);
                    let r = Req { seq: c.seq, cmd: p::CMD_READ32, a: 0x1_0204, ..Default::default() };
                    if self.send_raw(&mut c, &r.encode(), &[]) {
                        pending.push(Sent { req: r, ok: vec![0, -libc::EFAULT], slow: false });
                    }
                    self.collect(&mut c, &mut pending)?;
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Connections while a client is attached: each refused (EBUSY at its HELLO, or closed).
    fn many_connections(&mut self) -> Result<(), String> {
        let n = 2 + self.rnd(40);
        let mut conns = Vec::new();
        for _ in 0..n {
            match p::connect_nonblocking(&self.dev.sock) {
                Ok(Some(fd)) => conns.push(fd),
                Ok(None) => std::thread::sleep(Duration::from_millis(2)), // backlog full
                Err(e) => return Err(format!("connect: {e}")),
            }
        }
        let mut waiting = Vec::new();
        for (i, fd) in conns.iter().enumerate() {
            let r = Req { seq: i as u32, cmd: p::CMD_HELLO, a: p::PROTO_VERSION, ..Default::default() };
            let garbage = self.chance(200);
            let bytes = if garbage { vec![0u8; self.rnd(100) as usize] } else { r.encode().to_vec() };
            self.rep.cases += 1;
            if matches!(p::send_fds(fd.as_raw_fd(), &bytes, &[]), Ok(true)) && !garbage {
                waiting.push((i, r));
            }
        }
        let t = Instant::now();
        let mut buf = [0u8; 256];
        let mut promoted = false;
        for (i, r) in waiting {
            let fd = conns[i].as_raw_fd();
            loop {
                let left = Duration::from_secs(8).saturating_sub(t.elapsed());
                if left.is_zero() {
                    self.check_alive("refused connections")?;
                    self.finding(format!("a connection made while a client was attached got no answer to HELLO within 8 s ({n} connections)"));
                    return Ok(());
                }
                let _ = p::wait_fd(fd, libc::POLLIN, left.as_millis().min(500) as i32);
                match p::recv(fd, &mut buf) {
                    Ok(p::Recv::Msg(m, _)) => {
                        match Rep::decode(&buf[..m]) {
                            Some(rep) if rep.seq == r.seq && rep.cmd == p::CMD_HELLO && rep.status == -libc::EBUSY => {}
                            // the attached client was dropped meanwhile (a flood): the first
                            // waiting connection becomes the client
                            Some(rep) if rep.seq == r.seq && rep.cmd == p::CMD_HELLO && rep.status == 0 && !promoted => promoted = true,
                            _ => self.finding(format!("refused connection: reply {:?}", Rep::decode(&buf[..m]))),
                        }
                        break;
                    }
                    Ok(p::Recv::Empty) => continue,
                    _ => break, // closed (more than the device keeps waiting)
                }
            }
        }
        Ok(())
    }

    /// A well-behaved client: HELLO, a register read, statistics; with `nic`, also firmware
    /// commands through hostdrv (PD, CQ, QP, MR: DMA into this process).
    fn health(&mut self, nic: bool) -> Result<(), String> {
        use hostdrv::Device as _;
        let t = Instant::now();
        let dev = loop {
            match hostdrv::simdev::SimDevice::open(&self.dev.sock) {
                Ok(d) => break d,
                Err(hostdrv::Error::Busy(_)) if t.elapsed() < TIMEOUT => std::thread::sleep(Duration::from_millis(20)),
                Err(e) => {
                    let what = format!("a well-behaved client could not open the device: {e}");
                    self.check_alive(&what)?;
                    self.finding(what);
                    return Ok(());
                }
            }
        };
        if let Err(e) = dev.read32(0).and_then(|_| dev.stats().map(|_| ())) {
            self.finding(format!("a well-behaved client: {e}"));
            return Ok(());
        }
        drop(dev);
        if nic {
            self.rep.nic_checks += 1;
            let t = Instant::now();
            loop {
                match hematite_sim::demo::open_side(&self.dev.sock, 1, 8192) {
                    Ok(side) => {
                        drop(side);
                        break;
                    }
                    Err(e) if e.contains("in use") && t.elapsed() < TIMEOUT => std::thread::sleep(Duration::from_millis(20)),
                    Err(e) => {
                        let what = format!("a well-behaved hostdrv client failed: {e}");
                        self.check_alive(&what)?;
                        self.finding(what);
                        break;
                    }
                }
            }
        }
        self.check_alive("health check")
    }
}

#[derive(Clone, Copy, Debug)]
enum FdKind {
    Eventfd,
    Pipe,
    DevNull,
}

/// Runs a campaign of `o.count` messages against a device process it starts. `progress` is
/// called after every session.
pub fn socket_campaign(o: &SocketFuzzOpts, mut progress: impl FnMut(&SocketFuzzReport)) -> Result<SocketFuzzReport, String> {
    let dev = Device::start(o)?;
    let eventfd = hostdrv::simproto::eventfd().map_err(e2s)?;
    let (r, w) = std::os::unix::net::UnixStream::pair().map_err(e2s)?;
    let pipe = (std::fs::File::from(OwnedFd::from(r)), std::fs::File::from(OwnedFd::from(w)));
    let devnull = std::fs::File::open("/dev/null").map_err(e2s)?;
    let mut c = Campaign {
        o,
        rng: Rng::new(o.seed),
        rep: SocketFuzzReport::default(),
        dev,
        arena: Arena::new(),
        eventfd,
        pipe,
        devnull,
        last_end: "none",
    };
    let _ = c.o;
    let mut res = c.health(true);
    while res.is_ok() && c.rep.cases < o.count {
        res = c.session();
        if res.is_ok() && c.rep.sessions % 16 == 0 {
            let nic = o.nic_check_every != 0 && c.rep.sessions % o.nic_check_every == 0;
            res = c.health(nic);
        }
        if res.is_ok() {
            res = c.check_alive("between sessions");
        }
        progress(&c.rep);
    }
    if res.is_ok() {
        res = c.health(true);
    }
    if let Err(e) = res {
        if c.rep.findings == 0 {
            c.finding(e);
        }
    }
    Ok(c.rep)
}

/// The default work folder: `build/fuzz/socket-<pid>` in the source tree (used by the
/// `hematite-fuzz` binary, which includes this module).
pub fn default_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join("build/fuzz").join(format!("socket-{}", std::process::id()))
}
