//! The simulation backend: a [`Device`] whose function is the simulated device process
//! (`hematite-sim device --socket PATH`), reached over the protocol in [`crate::simproto`].
//!
//! BAR writes are posted (no round trip); reads, DMA (un)mapping, interrupt routing and reset
//! wait for the device's answer. DMA: the device reads and writes this process's memory inside
//! the mapped windows only, through the descriptor of this process's memory it opens at HELLO;
//! [`SimDevice::open`] allows that device process (`PR_SET_PTRACER` with its pid) for the
//! duration of HELLO only.

use crate::device::{Device, DeviceInfo};
use crate::simproto::{self as p, Recv, Rep, Req};
use crate::{Error, Result};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Held while a device is being opened: Yama's single ptracer exception of this process names
/// that device for the HELLO round trip.
static PTRACER: Mutex<()> = Mutex::new(());

struct Conn {
    fd: OwnedFd,
    seq: u32,
    dead: bool,
    /// How long a request waits for its reply ([`SimDevice::set_reply_timeout`]).
    reply_timeout: Duration,
}

/// The default of [`SimDevice::set_reply_timeout`]: `HM_SIM_REPLY_TIMEOUT_S`, else 60 s. The
/// device process answers within milliseconds while it runs (replies are sent between batches
/// of a few dozen cycles); a process that is stopped or wedged never does.
fn default_reply_timeout() -> Duration {
    let s = std::env::var("HM_SIM_REPLY_TIMEOUT_S").ok().and_then(|v| v.parse::<u64>().ok()).filter(|&s| s > 0).unwrap_or(60);
    Duration::from_secs(s)
}

/// A connection to a simulated Hematite device.
pub struct SimDevice {
    conn: Mutex<Conn>,
    info: DeviceInfo,
    server_pid: u32,
    /// The connection is gone (a copy of `Conn::dead` that [`Device::failed`] reads without
    /// the lock).
    dead: AtomicBool,
}

/// Device statistics the simulation keeps (not part of [`Device`]: hardware has no such thing).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SimStats {
    /// Clock cycles simulated since the device process started.
    pub cycles: u64,
    /// Frames the MAC sent / received.
    pub frames_tx: u64,
    pub frames_rx: u64,
    /// DMA accesses refused because they fell outside the mapped windows.
    pub dma_faults: u64,
}

impl SimDevice {
    /// Connects to the device process listening on `socket`. Fails with `Busy` when another
    /// process has the device open.
    pub fn open(socket: &Path) -> Result<SimDevice> {
        let fd = p::connect(socket)?;
        let server_pid = p::peer_pid(fd.as_raw_fd())?;
        let mut conn = Conn { fd, seq: 0, dead: false, reply_timeout: default_reply_timeout() };
        // The device opens this process's memory (/proc/PID/mem) while it handles HELLO, and
        // needs ptrace-attach rights for that moment only. Yama keeps one allowed ptracer per
        // process, so the exception names this device's pid just for the HELLO round trip and
        // is withdrawn after it; opens are serialised so that two devices opened from two
        // threads do not overwrite each other's exception.
        let r = {
            let _g = PTRACER.lock().unwrap_or_else(|e| e.into_inner());
            p::allow_ptracer(Some(server_pid))?;
            let r = Self::call_on(&mut conn, p::CMD_HELLO, [p::PROTO_VERSION, std::process::id() as u64, 0, 0], None);
            let _ = p::allow_ptracer(None);
            r
        }
        .map_err(|e| match e {
            Error::Sys { err, .. } if err.raw_os_error() == Some(libc::EBUSY) => {
                Error::Busy(format!("{} is in use by another process", socket.display()))
            }
            Error::Sys { err, .. } if err.raw_os_error() == Some(libc::EACCES) => Error::Device(format!(
                "{}: the device process may not access this process's memory (ptrace rights: same user, dumpable, Yama)",
                socket.display()
            )),
            e => e,
        })?;
        let info = DeviceInfo {
            name: socket.display().to_string(),
            bar0_size: r.a,
            num_irqs: r.b as u32,
            mac: Some(r.c),
            ipv4: Some(r.d as u32),
        };
        Ok(SimDevice { conn: Mutex::new(conn), info, server_pid, dead: AtomicBool::new(false) })
    }

    /// The device process's pid.
    pub fn server_pid(&self) -> u32 {
        self.server_pid
    }

    /// How long a request (a register read, a DMA (un)mapping, ...) waits for the device
    /// process's reply. A reply that does not come in time means the process is stopped or
    /// wedged: the request fails with `Error::Timeout` and the connection counts as dead
    /// ([`Device::failed`]; the driver then reports a fatal device error), as a PCIe device
    /// that stops answering reads is lost to its driver.
    pub fn set_reply_timeout(&self, t: Duration) {
        if let Ok(mut c) = self.conn.lock() {
            c.reply_timeout = t;
        }
    }

    fn call_on(c: &mut Conn, cmd: u16, args: [u64; 4], pass: Option<RawFd>) -> Result<Rep> {
        if c.dead {
            return Err(Error::Device("the simulated device process has gone away".into()));
        }
        c.seq = c.seq.wrapping_add(1);
        let q = Req { seq: c.seq, cmd, flags: 0, a: args[0], b: args[1], c: args[2], d: args[3] };
        if let Err(e) = p::send(c.fd.as_raw_fd(), &q.encode(), pass) {
            c.dead = true;
            // the device closed its end before the request went out (EPIPE, ECONNRESET): the
            // same outcome as finding the connection closed while waiting for the reply (a
            // refused client sees one or the other, depending on which comes first)
            return Err(match e {
                Error::Sys { ref err, .. }
                    if matches!(err.kind(), std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::ConnectionReset) =>
                {
                    Error::Device("the simulated device process closed the connection".into())
                }
                e => e,
            });
        }
        let mut buf = [0u8; p::REP_BYTES + 16];
        let t0 = Instant::now();
        loop {
            let left = c.reply_timeout.saturating_sub(t0.elapsed());
            if left.is_zero() {
                c.dead = true;
                return Err(Error::Timeout(format!(
                    "the simulated device process did not answer request {cmd} within {:?} (stopped or wedged)",
                    c.reply_timeout
                )));
            }
            // poll(2) counts whole milliseconds and may wake a little early: round up, and time
            // out only once the whole reply timeout has passed (checked above)
            let ms = left.as_nanos().div_ceil(1_000_000).clamp(1, i32::MAX as u128) as i32;
            if !p::wait_fd(c.fd.as_raw_fd(), libc::POLLIN, ms)? {
                continue;
            }
            match p::recv(c.fd.as_raw_fd(), &mut buf)? {
                Recv::Msg(n, _) => {
                    let r = Rep::decode(&buf[..n]).ok_or_else(|| Error::Device(format!("malformed reply of {n} bytes")))?;
                    if r.seq != q.seq || r.cmd != cmd {
                        c.dead = true;
                        return Err(Error::Device(format!("reply {} / cmd {} to request {} / cmd {cmd}", r.seq, r.cmd, q.seq)));
                    }
                    if r.status != 0 {
                        return Err(Error::sys(format!("simulated device, command {cmd}"), std::io::Error::from_raw_os_error(-r.status)));
                    }
                    return Ok(r);
                }
                Recv::Empty => continue, // blocking socket: only after EINTR-like wakeups
                Recv::Closed => {
                    c.dead = true;
                    return Err(Error::Device("the simulated device process closed the connection".into()));
                }
            }
        }
    }

    fn call(&self, cmd: u16, args: [u64; 4], pass: Option<RawFd>) -> Result<Rep> {
        let mut c = self.conn.lock().map_err(|_| Error::Device("connection lock poisoned".into()))?;
        let r = Self::call_on(&mut c, cmd, args, pass);
        if c.dead {
            self.dead.store(true, Ordering::Release);
        }
        r
    }

    /// Simulation statistics (cycles simulated, frames, IOMMU faults).
    pub fn stats(&self) -> Result<SimStats> {
        let r = self.call(p::CMD_STATS, [0; 4], None)?;
        Ok(SimStats { cycles: r.a, frames_tx: r.b, frames_rx: r.c, dma_faults: r.d })
    }

    /// Resolves the MAC of `ipv4` by ARP on the simulated wire.
    pub fn arp_resolve(&self, ipv4: u32) -> Result<u64> {
        Ok(self.call(p::CMD_ARP_RESOLVE, [ipv4 as u64, 0, 0, 0], None)?.a)
    }

    fn check_off(&self, offset: u64) -> Result<()> {
        if offset % 4 != 0 || offset.checked_add(4).is_none_or(|e| e > self.info.bar0_size) {
            return Err(Error::inval(format!("BAR0 offset {offset:#x} (size {:#x}, 4-byte aligned)", self.info.bar0_size)));
        }
        Ok(())
    }
}

impl Device for SimDevice {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn read32(&self, offset: u64) -> Result<u32> {
        self.check_off(offset)?;
        match self.call(p::CMD_READ32, [offset, 0, 0, 0], None) {
            Ok(r) => Ok(r.a as u32),
            Err(Error::Sys { err, .. }) if err.raw_os_error() == Some(libc::EFAULT) => {
                Err(Error::Device(format!("bus error reading BAR0 + {offset:#x}")))
            }
            Err(e) => Err(e),
        }
    }

    fn wait32(&self, offset: u64, mask: u32, cmp: u32, cycles: u64) -> Result<(u32, bool)> {
        self.check_off(offset)?;
        let cycles = cycles.min(p::WAIT_MAX_CYCLES);
        match self.call(p::CMD_WAIT32, [offset, mask as u64, cmp as u64, cycles], None) {
            Ok(r) => Ok((r.a as u32, r.b != 0)),
            Err(Error::Sys { err, .. }) if err.raw_os_error() == Some(libc::EFAULT) => {
                Err(Error::Device(format!("bus error reading BAR0 + {offset:#x}")))
            }
            Err(e) => Err(e),
        }
    }

    fn write32(&self, offset: u64, value: u32) -> Result<()> {
        self.check_off(offset)?;
        let mut c = self.conn.lock().map_err(|_| Error::Device("connection lock poisoned".into()))?;
        if c.dead {
            return Err(Error::Device("the simulated device process has gone away".into()));
        }
        c.seq = c.seq.wrapping_add(1);
        let q = Req { seq: c.seq, cmd: p::CMD_WRITE32, flags: p::F_POSTED, a: offset, b: value as u64, ..Default::default() };
        p::send(c.fd.as_raw_fd(), &q.encode(), None).map_err(|e| {
            c.dead = true;
            self.dead.store(true, Ordering::Release);
            Error::Device(format!("the simulated device process has gone away ({e})"))
        })
    }

    fn can_push(&self) -> bool {
        true
    }

    fn push64(&self, qpn: u32, index: u16, wqe: &[u8; 64]) -> Result<()> {
        let mut c = self.conn.lock().map_err(|_| Error::Device("connection lock poisoned".into()))?;
        if c.dead {
            return Err(Error::Device("the simulated device process has gone away".into()));
        }
        c.seq = c.seq.wrapping_add(1);
        let q = Req { seq: c.seq, cmd: p::CMD_PUSH64, flags: p::F_POSTED, a: qpn as u64 * p::PUSH_BYTES as u64, ..Default::default() };
        let mut m = q.encode_push(wqe);
        m[p::REQ_BYTES + crate::fast::PUSH_TAG] = index as u8;
        p::send(c.fd.as_raw_fd(), &m, None).map_err(|e| {
            c.dead = true;
            self.dead.store(true, Ordering::Release);
            Error::Device(format!("the simulated device process has gone away ({e})"))
        })
    }

    fn dma_map(&self, iova: u64, vaddr: u64, len: u64, writable: bool) -> Result<()> {
        if len == 0 || iova % 4096 != 0 || vaddr % 4096 != 0 || len % 4096 != 0 || iova.checked_add(len).is_none() {
            return Err(Error::inval(format!("DMA map iova {iova:#x} vaddr {vaddr:#x} len {len:#x}: page aligned, non-empty")));
        }
        self.call(p::CMD_DMA_MAP, [iova, vaddr, len, writable as u64], None).map(|_| ()).map_err(|e| match e {
            Error::Sys { err, .. } if err.raw_os_error() == Some(libc::EEXIST) => {
                Error::inval(format!("DMA map {iova:#x}+{len:#x} overlaps a mapped window"))
            }
            e => e,
        })
    }

    fn dma_unmap(&self, iova: u64, len: u64) -> Result<()> {
        self.call(p::CMD_DMA_UNMAP, [iova, len, 0, 0], None).map(|_| ()).map_err(|e| match e {
            Error::Sys { err, .. } if err.raw_os_error() == Some(libc::ENOENT) => {
                Error::inval(format!("DMA unmap {iova:#x}+{len:#x}: not a mapped window"))
            }
            e => e,
        })
    }

    fn set_irq(&self, vector: u32, eventfd: Option<RawFd>) -> Result<()> {
        if vector >= self.info.num_irqs {
            return Err(Error::inval(format!("interrupt vector {vector} (the device has {})", self.info.num_irqs)));
        }
        self.call(p::CMD_SET_IRQ, [vector as u64, eventfd.is_some() as u64, 0, 0], eventfd).map(|_| ())
    }

    fn reset(&self) -> Result<()> {
        self.call(p::CMD_RESET, [0; 4], None).map(|_| ())
    }

    /// The device process has closed the connection (it died, was killed, or dropped this
    /// client): seen from a failed request, or from a hang-up on the socket (a non-blocking
    /// `poll`). While another thread is inside a request the lock is not waited for: that
    /// request notices the close itself.
    fn failed(&self) -> bool {
        if self.dead.load(Ordering::Acquire) {
            return true;
        }
        let Ok(mut c) = self.conn.try_lock() else { return false };
        if c.dead || p::hung_up(c.fd.as_raw_fd()) {
            c.dead = true;
            self.dead.store(true, Ordering::Release);
            return true;
        }
        false
    }
}
