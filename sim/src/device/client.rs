//! The driver client: one connection at a time on the device's socket (the protocol of
//! `hostdrv::simproto`), admitted by uid and named by a pidfd; its requests (BAR0 reads and
//! writes queued as AXI4-Lite transactions, DMA windows, interrupt eventfds, function reset,
//! `ARP_RESOLVE`, statistics); connections refused with EBUSY while a client is attached; and
//! client loss (disconnect, exit, malformed request, unread replies), which revokes the DMA
//! windows and resets the function. Interrupts go to the client's eventfds from here.

use super::{SimNic, BAR0_SIZE, FW_PORT_BASE, NUM_IRQS};
use crate::eng::{LiteOp, Port};
use hostdrv::simproto::{self as p, Recv, Rep, Req};
use std::fs::File;
use std::io::Write;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A BAR0 access waiting for (or in) its AXI4-Lite transaction.
pub(super) struct Mmio {
    pub(super) port: Port,
    pub(super) op: LiteOp,
    /// The request to answer (None: posted write).
    pub(super) reply_to: Option<Req>,
    /// A read for the counter files (stats.rs), not a client's.
    pub(super) counter: Option<super::stats::Tag>,
    /// A `WAIT32`: read again until the value changes or the wait runs out.
    pub(super) wait: Option<Wait>,
    /// A `PUSH64` (QP, the WQE): handed to the engine's push port in its turn, so that it
    /// stays ordered with the client's other accesses (`op` is not used).
    pub(super) push: Option<(u16, Box<[u8; p::PUSH_BYTES]>)>,
}

/// What a `WAIT32` waits for ([`p::CMD_WAIT32`]).
pub(super) struct Wait {
    pub(super) mask: u32,
    pub(super) cmp: u32,
    /// The cycle the wait runs out at.
    pub(super) deadline: u64,
    /// The next read starts no earlier than this cycle.
    pub(super) not_before: u64,
}

/// The attached client.
pub(super) struct Client {
    pub(super) fd: OwnedFd,
    pid: u32,
    /// Names the process that connected (`SO_PEERPIDFD`) for as long as the connection lasts.
    pub(super) pidfd: OwnedFd,
    /// HELLO answered: other requests are refused (EPROTO) before it.
    hello: bool,
    /// Interrupts go to this client's eventfds through its own writer thread, so that an
    /// eventfd that would block (its counter full, `O_NONBLOCK` cleared by the client) can
    /// never stall the clock loop.
    irq_tx: Option<std::sync::mpsc::SyncSender<Arc<File>>>,
}

/// A connection made while a client was attached, waiting for its first request.
pub(super) struct Refused {
    fd: OwnedFd,
    pid: u32,
    pidfd: OwnedFd,
    since: Instant,
}

/// Connections refused while a client is attached that are kept waiting for their HELLO (to
/// answer it with EBUSY); beyond this they are closed at once.
const MAX_REFUSED: usize = 16;

impl SimNic {
    /// Sends a reply without waiting: a client whose socket is full (it does not read its
    /// replies) or gone loses its connection, so a client can never stall the clock loop.
    pub(super) fn reply(&mut self, r: Rep) {
        if let Some(c) = &self.client {
            match p::send_fds(c.fd.as_raw_fd(), &r.encode(), &[]) {
                Ok(true) => {}
                Ok(false) => self.drop_client("reply socket full (the client does not read its replies)"),
                Err(e) => self.drop_client(&format!("reply failed: {e}")),
            }
        }
    }

    /// Client loss: the DMA windows are revoked and the function is reset.
    pub(super) fn drop_client(&mut self, why: &str) {
        if self.client.take().is_some() {
            self.log(&format!("client gone ({why}): DMA windows revoked, function reset"));
            self.iommu.lock().unwrap().revoke();
            self.irq_fds.clear();
            self.arp_wait.clear();
            if let Err(e) = self.reset() {
                eprintln!("hematite-sim device: reset after client loss failed: {e}");
            }
            // the old engine is gone: from now on a refused access is a fault again
            self.iommu.lock().unwrap().gone = false;
        }
    }

    /// A WQE push ([`p::CMD_PUSH64`]): queued behind the client's earlier accesses. Refused
    /// (counted as an MMIO error) before HELLO, when not posted, or for a window beyond the
    /// push port's 16-bit QP numbers or not aligned to a window (a push for a QP beyond the
    /// engine's table is taken, never bound, and counted by the engine as dropped).
    fn handle_push(&mut self, r: Req, data: [u8; p::PUSH_BYTES]) {
        let hello = self.client.as_ref().is_some_and(|c| c.hello);
        let posted = r.flags & p::F_POSTED != 0;
        let qpn = r.a / p::PUSH_BYTES as u64;
        if !hello || !posted || r.a % p::PUSH_BYTES as u64 != 0 || qpn > u16::MAX as u64 {
            self.counters.mmio_errors += 1;
            if !posted {
                self.reply(Rep::to(&r, if hello { -libc::EINVAL } else { -libc::EPROTO }));
            }
            return;
        }
        self.last_activity = self.cycles();
        self.mmio.push_back(Mmio { port: Port::Bar, op: LiteOp::Read { addr: 0 }, reply_to: None, counter: None, wait: None,
                                   push: Some((qpn as u16, Box::new(data))) });
    }

    fn handle(&mut self, r: Req, fd: Option<OwnedFd>) {
        let posted = r.flags & p::F_POSTED != 0;
        let hello = self.client.as_ref().is_some_and(|c| c.hello);
        if !hello && r.cmd != p::CMD_HELLO {
            // nothing reaches the device before the client said who it is
            self.counters.mmio_errors += 1;
            if !posted {
                self.reply(Rep::to(&r, -libc::EPROTO));
            }
            return;
        }
        if r.cmd != p::CMD_STATS {
            // a statistics read is not device activity: it must not keep an idle device awake
            self.last_activity = self.cycles();
        }
        match r.cmd {
            p::CMD_HELLO => {
                let mut st = if r.a != p::PROTO_VERSION { -libc::EPROTO } else { 0 };
                if st == 0 {
                    match self.open_client_mem() {
                        Ok(f) => self.iommu.lock().unwrap().mem = Some(f),
                        Err(e) => {
                            self.log(&format!("HELLO refused: {e}"));
                            if self.client.is_none() {
                                return; // the client is gone
                            }
                            st = -libc::EACCES;
                        }
                    }
                }
                let mut rep = Rep::to(&r, st);
                if st == 0 {
                    rep.a = BAR0_SIZE;
                    rep.b = NUM_IRQS as u64;
                    rep.c = self.cfg.mac;
                    rep.d = self.cfg.ipv4 as u64;
                    if let Some(c) = &mut self.client {
                        c.hello = true;
                    }
                }
                self.reply(rep);
            }
            p::CMD_READ32 | p::CMD_WRITE32 | p::CMD_WAIT32 => {
                if r.cmd == p::CMD_WAIT32 && (posted || r.d > p::WAIT_MAX_CYCLES || r.b > u32::MAX as u64 || r.c > u32::MAX as u64) {
                    if !posted {
                        self.reply(Rep::to(&r, -libc::EINVAL));
                    }
                    return;
                }
                let off = r.a;
                let (port, addr) = if off < FW_PORT_BASE {
                    (Port::Bar, off as u16)
                } else if off < BAR0_SIZE {
                    (Port::Fw, (off - FW_PORT_BASE) as u16)
                } else {
                    self.counters.mmio_errors += 1;
                    if !posted {
                        self.reply(Rep::to(&r, -libc::EFAULT));
                    }
                    return;
                };
                let op = if r.cmd == p::CMD_WRITE32 {
                    LiteOp::Write { addr, data: r.b as u32, strb: 0xF }
                } else {
                    LiteOp::Read { addr }
                };
                let wait = (r.cmd == p::CMD_WAIT32).then(|| Wait { mask: r.b as u32, cmp: r.c as u32, deadline: self.cycles() + r.d, not_before: 0 });
                self.mmio.push_back(Mmio { port, op, reply_to: if posted { None } else { Some(r) }, counter: None, wait, push: None });
            }
            p::CMD_DMA_MAP => {
                let st = self.iommu.lock().unwrap().map(r.a, r.b, r.c, r.d != 0);
                if !posted {
                    self.reply(Rep::to(&r, st));
                }
            }
            p::CMD_DMA_UNMAP => {
                let st = self.iommu.lock().unwrap().unmap(r.a, r.b);
                if !posted {
                    self.reply(Rep::to(&r, st));
                }
            }
            p::CMD_SET_IRQ => {
                let st = if r.a >= NUM_IRQS as u64 {
                    -libc::EINVAL
                } else if r.b != 0 {
                    match fd {
                        // only an eventfd: anything else (a pipe, a socket, a FIFO) could block
                        // the writer or make the device write into a file of the client's choosing
                        Some(f) if p::is_eventfd(f.as_raw_fd()) => {
                            let _ = p::set_nonblocking(f.as_raw_fd(), true);
                            self.irq_fds.insert(r.a as u8, Arc::new(File::from(f)));
                            0
                        }
                        Some(_) => -libc::EINVAL,
                        None => -libc::EBADF,
                    }
                } else {
                    self.irq_fds.remove(&(r.a as u8));
                    0
                };
                self.reply(Rep::to(&r, st));
            }
            p::CMD_RESET => {
                let st = match self.reset() {
                    Ok(()) => 0,
                    Err(e) => {
                        eprintln!("hematite-sim device: reset failed: {e}");
                        -libc::EIO
                    }
                };
                self.reply(Rep::to(&r, st));
            }
            p::CMD_ARP_RESOLVE => self.arp_resolve(r),
            p::CMD_STATS => {
                let mut rep = Rep::to(&r, 0);
                rep.a = self.cycles();
                rep.b = self.counters.frames_tx;
                rep.c = self.counters.frames_rx;
                rep.d = self.iommu.lock().unwrap().faults;
                self.reply(rep);
            }
            _ => {
                if !posted {
                    self.reply(Rep::to(&r, -libc::ENOSYS));
                }
            }
        }
    }

    /// Opens the client's memory for DMA (at HELLO). The pidfd taken at connect names the
    /// process that connected; `/proc/PID/mem` is opened by pid and then the pidfd is checked
    /// again: if that process is still alive after the open, the pid could not have been reused
    /// in between, so the descriptor is that process's memory. A client found dead is dropped.
    fn open_client_mem(&mut self) -> Result<File, String> {
        let Some(c) = &self.client else { return Err("no client".into()) };
        let (pid, pidfd) = (c.pid, c.pidfd.as_raw_fd());
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(format!("/proc/{pid}/mem"))
            .map_err(|e| format!("/proc/{pid}/mem: {e}"));
        let same = p::pidfd_pid(pidfd).ok().flatten() == Some(pid);
        if p::pidfd_exited(pidfd).unwrap_or(true) || !same {
            self.drop_client("client process exited");
            return Err(format!("client pid {pid} exited"));
        }
        f
    }

    /// Drops the client as soon as its process has exited, even while its socket stays open
    /// (inherited by a child): its memory and its pid are no longer the client's.
    fn check_client_alive(&mut self) {
        if let Some(c) = &self.client {
            if p::pidfd_exited(c.pidfd.as_raw_fd()).unwrap_or(true) {
                self.drop_client("client process exited");
            }
        }
    }

    /// Admits a new connection: the peer must run as the device process's uid (the socket file
    /// is 0600 as well), and a pidfd must name it. Otherwise the connection is closed at once,
    /// without a reply.
    fn admit(&mut self, fd: &OwnedFd) -> Option<(u32, OwnedFd)> {
        let cred = p::peer_cred(fd.as_raw_fd()).ok()?;
        if cred.uid != p::euid() {
            self.counters.refused_uid += 1;
            self.log(&format!("connection from pid {} uid {} refused (not uid {})", cred.pid, cred.uid, p::euid()));
            return None;
        }
        let pidfd = p::peer_pidfd(fd.as_raw_fd()).ok()?;
        if p::pidfd_exited(pidfd.as_raw_fd()).unwrap_or(true) {
            return None;
        }
        Some((cred.pid, pidfd))
    }

    /// Drops the client as soon as its end of the connection is closed (or shut down for
    /// writing): requests it left unread are discarded with it, so a departed client's backlog
    /// never delays the next client.
    fn check_client_hangup(&mut self) {
        if let Some(c) = &self.client {
            if p::hung_up(c.fd.as_raw_fd()) {
                self.drop_client("disconnected");
            }
        }
    }

    /// Reads the client's requests (noticing a disconnect first), then accepts a new client.
    pub(super) fn service_socket(&mut self) {
        self.check_client_alive();
        self.check_client_hangup();
        if !self.refused.is_empty() {
            self.service_refused();
        }
        self.service_requests();
        if let Ok(Some(fd)) = p::accept(self.listener.as_raw_fd()) {
            let Some((pid, pidfd)) = self.admit(&fd) else { return };
            if self.client.is_some() {
                // one client at a time, like a VFIO group: its HELLO is answered with EBUSY
                // (below, without holding up the clock); past MAX_REFUSED waiting ones it is
                // closed at once
                self.log(&format!("connection from pid {pid} refused: a client is attached"));
                if self.refused.len() < MAX_REFUSED {
                    self.refused.push(Refused { fd, pid, pidfd, since: Instant::now() });
                }
            } else {
                self.attach(fd, pid, pidfd);
            }
        }
    }

    /// Answers the HELLO of connections refused while a client is attached (EBUSY), and drops
    /// them after it or after 5 s.
    ///
    /// Before refusing, the attached client is checked again: if it has gone (it closed its
    /// connection before this one was made, but after the last check), the waiting connection
    /// becomes the client instead, in arrival order, so a client that connects right after the
    /// previous one closed is never refused.
    fn service_refused(&mut self) {
        let mut keep = Vec::new();
        let mut waiting = std::mem::take(&mut self.refused).into_iter();
        while let Some(w) = waiting.next() {
            if self.client.is_none() {
                self.attach(w.fd, w.pid, w.pidfd);
                keep.extend(waiting);
                break;
            }
            let mut buf = [0u8; 128];
            if !p::wait_fd(w.fd.as_raw_fd(), libc::POLLIN, 0).unwrap_or(true) {
                if w.since.elapsed() < Duration::from_secs(5) {
                    keep.push(w);
                }
                continue;
            }
            self.check_client_alive();
            self.check_client_hangup();
            if self.client.is_none() {
                self.attach(w.fd, w.pid, w.pidfd);
                keep.extend(waiting);
                break;
            }
            if let Ok(Recv::Msg(n, _)) = p::recv(w.fd.as_raw_fd(), &mut buf) {
                if let Some(r) = Req::decode(&buf[..n]) {
                    let _ = p::send_fds(w.fd.as_raw_fd(), &Rep::to(&r, -libc::EBUSY).encode(), &[]);
                }
            }
        }
        self.refused = keep;
    }

    fn attach(&mut self, fd: OwnedFd, pid: u32, pidfd: OwnedFd) {
        self.counters.clients += 1;
        self.client = Some(Client { fd, pid, pidfd, hello: false, irq_tx: None });
        self.log(&format!("client pid {pid} attached"));
        self.last_activity = self.cycles();
    }

    fn service_requests(&mut self) {
        for _ in 0..256 {
            let Some(c) = &self.client else { return };
            let mut buf = [0u8; 128];
            match p::recv(c.fd.as_raw_fd(), &mut buf) {
                Ok(Recv::Msg(n, _)) if n == p::PUSH_REQ_BYTES => match Req::decode_push(&buf[..n]) {
                    Some((r, data)) => self.handle_push(r, data),
                    None => {
                        self.drop_client("malformed request");
                        return;
                    }
                },
                Ok(Recv::Msg(n, fd)) => match Req::decode(&buf[..n]) {
                    Some(r) => self.handle(r, fd),
                    None => {
                        self.drop_client("malformed request");
                        return;
                    }
                },
                Ok(Recv::Empty) => return,
                Ok(Recv::Closed) | Err(_) => {
                    self.drop_client("disconnected");
                    return;
                }
            }
        }
    }

    /// Signals the eventfds of the interrupts the engine raised in the last batch.
    pub(super) fn service_irqs(&mut self) {
        for (_, v) in std::mem::take(&mut self.eng.irqs) {
            let Some(f) = self.irq_fds.get(&v).cloned() else { continue };
            let Some(c) = &mut self.client else { continue };
            let tx = c.irq_tx.get_or_insert_with(|| {
                let (tx, rx) = std::sync::mpsc::sync_channel::<Arc<File>>(256);
                // ends when the client is dropped (the sender with it); a write blocked on a
                // hostile client's eventfd holds only this thread, never the clock loop
                let _ = std::thread::Builder::new().name("hm-irq".into()).spawn(move || {
                    for f in rx {
                        let _ = (&*f).write(&1u64.to_le_bytes());
                    }
                });
                tx
            });
            if tx.try_send(f).is_err() {
                self.counters.irqs_lost += 1;
            }
        }
    }
}
