//! The event thread of a device (one per device and process, whatever the number of contexts
//! open on it): device interrupts become completion-channel events, event-queue entries
//! become libibverbs' asynchronous events of the context that owns the object, and a device
//! that failed for good is reported to every context (`IBV_EVENT_DEVICE_FATAL`).

use crate::abi::*;
use crate::context::{Ctx, Dev};
use crate::{errno_of, warn};
use std::ffi::{c_int, c_void};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Gives the context its async pipe (`async_wfd`, the write end, which the C side owns) and
/// starts the device's event thread when it is not running yet.
///
/// # Safety
/// `ctx` came from `hm_rs_open`.
#[no_mangle]
pub unsafe extern "C" fn hm_rs_start_events(ctx: *mut c_void, async_wfd: c_int) -> c_int {
    // SAFETY: the caller's guarantee.
    let ctx = unsafe { &*(ctx as *const Ctx) };
    *ctx.sh.async_out.lock().unwrap_or_else(|e| e.into_inner()) = Some(AsyncOut::new(async_wfd));
    let mut ev = ctx.sh.dev.events.lock().unwrap_or_else(|e| e.into_inner());
    if ev.is_some() {
        return 0;
    }
    let dev = ctx.sh.dev.clone();
    let n = dev.nic.device().info().num_irqs.min(32);
    let mut fds = Vec::new();
    for v in 0..n {
        match dev.nic.irq_fd(v) {
            Ok(fd) => fds.push(fd),
            Err(e) => return errno_of(&e),
        }
    }
    let mut p = [0 as c_int; 2];
    // SAFETY: a valid two-int array.
    if unsafe { libc::pipe2(p.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO);
    }
    // SAFETY: fresh descriptors owned from here on.
    let (stop_r, stop_w) = unsafe { (OwnedFd::from_raw_fd(p[0]), OwnedFd::from_raw_fd(p[1])) };
    let h = std::thread::Builder::new()
        .name("hematite-events".into())
        .spawn(move || event_loop(dev, stop_r, fds));
    match h {
        Ok(h) => {
            *ev = Some((h, stop_w));
            0
        }
        Err(e) => e.raw_os_error().unwrap_or(libc::EAGAIN),
    }
}

/// Most asynchronous events kept while the program does not read them (16 bytes each).
pub(crate) const ASYNC_BACKLOG: usize = 65_536;

/// What one non-blocking write of a record did.
enum Wrote {
    Done,
    /// The pipe is full (the program has not read it): try again later.
    Full,
    /// Any other failure (the read end is closed): the record is dropped.
    Failed,
}

fn write_rec(fd: RawFd, b: &[u8]) -> Wrote {
    // SAFETY: writing a valid buffer; a pipe takes records this small whole or not at all.
    let n = unsafe { libc::write(fd, b.as_ptr() as *const c_void, b.len()) };
    if n == b.len() as isize {
        Wrote::Done
    } else if n < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EAGAIN) {
        Wrote::Full
    } else {
        Wrote::Failed
    }
}

/// The asynchronous events on their way to the program's async pipe (non-blocking, set up by
/// the C side). A program that never calls `ibv_get_async_event` (most do not) fills the pipe
/// after 4,096 events; the rest wait here, up to [`ASYNC_BACKLOG`], and only the ones beyond
/// are dropped (counted, one warning). The event thread itself never blocks on the pipe: it
/// also keeps the device awake and signals completion channels.
pub(crate) struct AsyncOut {
    fd: RawFd,
    q: std::collections::VecDeque<[u8; 16]>,
    /// Events dropped because the backlog was full.
    pub(crate) dropped: u64,
}

impl AsyncOut {
    pub(crate) fn new(fd: RawFd) -> Self {
        AsyncOut { fd, q: std::collections::VecDeque::new(), dropped: 0 }
    }

    /// Queues one event (element, type) and writes what the pipe takes.
    pub(crate) fn push(&mut self, elem: u64, ty: u32) {
        let mut rec = [0u8; 16];
        rec[..8].copy_from_slice(&elem.to_ne_bytes());
        rec[8..12].copy_from_slice(&ty.to_ne_bytes());
        if self.q.len() >= ASYNC_BACKLOG {
            if self.dropped == 0 {
                warn(format_args!(
                    "{ASYNC_BACKLOG} asynchronous events are waiting to be read (ibv_get_async_event); further ones are dropped"
                ));
            }
            self.dropped += 1;
        } else {
            self.q.push_back(rec);
        }
        self.flush();
    }

    /// Writes queued events until the pipe is full.
    pub(crate) fn flush(&mut self) {
        while let Some(rec) = self.q.front() {
            match write_rec(self.fd, rec) {
                Wrote::Done | Wrote::Failed => {
                    self.q.pop_front();
                }
                Wrote::Full => break,
            }
        }
    }

    /// Events queued, not in the pipe yet.
    #[cfg(test)]
    pub(crate) fn queued(&self) -> usize {
        self.q.len()
    }
}

/// The event thread: sleeps on the device's interrupt eventfds (and at most 100 ms, so that
/// event-queue entries and armed CQs are looked at even without an interrupt), then
/// * once the device has failed for good ([`Nic::check_fatal`](hostdrv::Nic::check_fatal): the simulated device process
///   died), reports `IBV_EVENT_DEVICE_FATAL` (once) to every context and wakes every armed
///   CQ that has work requests to flush;
/// * keeps the device awake while sends are outstanding ([`Nic::keepalive`](hostdrv::Nic::keepalive));
/// * forwards event-queue entries as libibverbs asynchronous events ([`AsyncOut`]: never
///   blocking on a program that does not read them) to the context whose QP or CQ they
///   concern, port events to every context;
/// * for every armed CQ with a completion waiting, writes one event into its channel;
/// * re-arms armed CQs on an interrupting vector whose completion was already polled (the
///   arm was used up by a completion the program took itself).
///
/// It serves the contexts while holding the device's context list, so a context that
/// `hm_rs_close` has taken out of the list gets nothing more.
fn event_loop(dev: Arc<Dev>, stop: OwnedFd, irqs: Vec<RawFd>) {
    let mut pfds: Vec<libc::pollfd> = std::iter::once(stop.as_raw_fd())
        .chain(irqs.iter().copied())
        .map(|fd| libc::pollfd { fd, events: libc::POLLIN, revents: 0 })
        .collect();
    let mut fatal_sent = false;
    loop {
        for c in dev.ctxs.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            if let Some(out) = c.async_out.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
                out.flush();
            }
        }
        for p in pfds.iter_mut() {
            p.revents = 0;
        }
        // SAFETY: a valid array of pollfds.
        let n = unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, 100) };
        if n < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            warn(format_args!("event thread: poll: {}", std::io::Error::last_os_error()));
            return;
        }
        if pfds[0].revents != 0 {
            return;
        }
        let mut evs: Vec<(Option<u32>, Option<u32>, u64, u32)> = Vec::new(); // (qpn, cqn, element, type)
        if !fatal_sent && dev.nic.check_fatal() {
            fatal_sent = true;
            warn(format_args!("the device has failed (fatal error); outstanding work requests are flushed, further calls fail with EIO"));
            evs.push((None, None, 1, IBV_EVENT_DEVICE_FATAL)); // element: the port
        }
        // A requester waiting for its peer keeps a co-simulated device at full speed, so
        // that its ACK timeout (e.g. after a lost last packet) fires in seconds, not hours.
        if !fatal_sent && dev.nic.sends_outstanding() {
            let _ = dev.nic.keepalive();
        }
        let mut interrupted = false;
        for p in &pfds[1..] {
            if p.revents & libc::POLLIN != 0 {
                let mut v = 0u64;
                // SAFETY: reading 8 bytes into a u64 from a non-blocking eventfd.
                unsafe { libc::read(p.fd, &mut v as *mut u64 as *mut c_void, 8) };
                interrupted = true;
            }
        }
        if let Ok(list) = dev.nic.poll_events() {
            for ev in list {
                evs.push(match ev {
                    hostdrv::nic::AsyncEvent::QpFatal(n) => (Some(n), None, 0, IBV_EVENT_QP_FATAL),
                    hostdrv::nic::AsyncEvent::CqOverrun(n) => (None, Some(n), 0, IBV_EVENT_CQ_ERR),
                    hostdrv::nic::AsyncEvent::PortActive(p) => (None, None, p as u64, IBV_EVENT_PORT_ACTIVE),
                    hostdrv::nic::AsyncEvent::PortErr(p) => (None, None, p as u64, IBV_EVENT_PORT_ERR),
                });
            }
        }
        let ctxs = dev.ctxs.lock().unwrap_or_else(|e| e.into_inner());
        for (qpn, cqn, elem, ty) in evs {
            for c in ctxs.iter() {
                // an object's event goes to the context that has it (none: it was destroyed)
                let elem = match (qpn, cqn) {
                    (Some(n), _) => match c.qps.lock().unwrap().get(&n) {
                        Some(p) => *p as u64,
                        None => continue,
                    },
                    (_, Some(n)) => match c.cq_ptrs.lock().unwrap().get(&n) {
                        Some(p) => *p as u64,
                        None => continue,
                    },
                    _ => elem,
                };
                if let Some(out) = c.async_out.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
                    out.push(elem, ty);
                }
            }
        }
        for ctx in ctxs.iter() {
            let cqs = ctx.cqs.lock().unwrap_or_else(|e| e.into_inner());
            for c in cqs.iter() {
                if !c.armed.load(Ordering::Acquire) {
                    continue;
                }
                if dev.nic.cq_pending(&c.cq) {
                    // a full channel (the program arms without reading it): the CQ stays armed
                    // and its event is written on a later round
                    if c.armed.swap(false, Ordering::AcqRel) && matches!(write_rec(c.chan_wfd, &(c.ibcq as u64).to_ne_bytes()), Wrote::Full) {
                        c.armed.store(true, Ordering::Release);
                    }
                } else if interrupted {
                    let _ = dev.nic.req_notify_cq(&c.cq, false);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pipe with a non-blocking write end, as the C side makes the async pipe.
    fn pipe() -> (OwnedFd, OwnedFd) {
        let mut p = [0 as c_int; 2];
        // SAFETY: a valid two-int array.
        assert_eq!(unsafe { libc::pipe2(p.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
        // SAFETY: fresh descriptors, owned from here on; F_SETFL on our own write end.
        unsafe {
            assert_eq!(libc::fcntl(p[1], libc::F_SETFL, libc::O_NONBLOCK), 0);
            (OwnedFd::from_raw_fd(p[0]), OwnedFd::from_raw_fd(p[1]))
        }
    }

    fn read_recs(fd: &OwnedFd, max: usize) -> Vec<(u64, u32)> {
        let mut out = Vec::new();
        let mut rec = [0u8; 16];
        while out.len() < max {
            // SAFETY: reading into a 16-byte buffer.
            let n = unsafe { libc::read(fd.as_raw_fd(), rec.as_mut_ptr() as *mut c_void, 16) };
            assert_eq!(n, 16, "a whole record");
            out.push((u64::from_ne_bytes(rec[..8].try_into().unwrap()), u32::from_ne_bytes(rec[8..12].try_into().unwrap())));
        }
        out
    }

    /// A program that does not read its events: pushing never blocks (this test would hang
    /// on a blocking write), what the pipe does not take waits in order, and reaches the
    /// program once it reads.
    #[test]
    fn an_unread_async_pipe_never_blocks_the_event_thread_and_loses_nothing() {
        let (r, w) = pipe();
        let mut out = AsyncOut::new(w.as_raw_fd());
        let n = 10_000u64;
        for i in 0..n {
            out.push(i, (i % 7) as u32);
        }
        let in_pipe = n as usize - out.queued();
        assert!(out.queued() > 0 && in_pipe >= 1024, "{in_pipe} in the pipe, {} queued", out.queued());
        assert_eq!(out.dropped, 0);
        let mut got = read_recs(&r, in_pipe);
        while out.queued() > 0 {
            out.flush();
            let k = n as usize - got.len() - out.queued();
            got.extend(read_recs(&r, k));
        }
        let want: Vec<(u64, u32)> = (0..n).map(|i| (i, (i % 7) as u32)).collect();
        assert_eq!(got, want);
    }

    /// Beyond the backlog, events are dropped and counted (the oldest are kept).
    #[test]
    fn events_beyond_the_backlog_are_dropped_and_counted() {
        let (r, w) = pipe();
        let mut out = AsyncOut::new(w.as_raw_fd());
        let extra = 5;
        let mut pushed = 0u64;
        while out.queued() < ASYNC_BACKLOG {
            out.push(pushed, 1);
            pushed += 1;
        }
        for _ in 0..extra {
            out.push(pushed, 1);
            pushed += 1;
        }
        assert_eq!(out.dropped, extra);
        assert_eq!(out.queued(), ASYNC_BACKLOG);
        let first = read_recs(&r, 4);
        assert_eq!(first.iter().map(|e| e.0).collect::<Vec<_>>(), vec![0, 1, 2, 3]);
    }

    /// A closed read end: records are dropped, nothing blocks or spins.
    #[test]
    fn a_closed_async_pipe_drops_records() {
        let (r, w) = pipe();
        drop(r);
        // SAFETY: SIGPIPE ignored for this process (the libibverbs programs' EPIPE case).
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
        let mut out = AsyncOut::new(w.as_raw_fd());
        out.push(1, 1);
        assert_eq!(out.queued(), 0);
    }
}
