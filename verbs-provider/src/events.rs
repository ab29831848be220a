//! The event thread of a context: device interrupts become completion-channel events,
//! event-queue entries become libibverbs' asynchronous events, and a device that failed for
//! good is reported (`IBV_EVENT_DEVICE_FATAL`).

use crate::abi::*;
use crate::context::{Ctx, Shared};
use crate::{errno_of, warn};
use std::ffi::{c_int, c_void};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Starts the event thread; asynchronous events go to `async_wfd` (the write end of the
/// context's async pipe, which the C side owns).
///
/// # Safety
/// `ctx` came from `hm_rs_open`.
#[no_mangle]
pub unsafe extern "C" fn hm_rs_start_events(ctx: *mut c_void, async_wfd: c_int) -> c_int {
    // SAFETY: the caller's guarantee.
    let ctx = unsafe { &*(ctx as *const Ctx) };
    let n = ctx.sh.nic.device().info().num_irqs.min(32);
    let mut fds = Vec::new();
    for v in 0..n {
        match ctx.sh.nic.irq_fd(v) {
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
    let sh = ctx.sh.clone();
    let h = std::thread::Builder::new()
        .name("hematite-events".into())
        .spawn(move || event_loop(sh, stop_r, fds, async_wfd));
    match h {
        Ok(h) => {
            *ctx.events.lock().unwrap_or_else(|e| e.into_inner()) = Some((h, stop_w));
            0
        }
        Err(e) => e.raw_os_error().unwrap_or(libc::EAGAIN),
    }
}

fn write_all(fd: RawFd, b: &[u8]) {
    // SAFETY: writing a valid buffer; a pipe takes records this small atomically.
    let _ = unsafe { libc::write(fd, b.as_ptr() as *const c_void, b.len()) };
}

/// The event thread: sleeps on the device's interrupt eventfds (and at most 100 ms, so that
/// event-queue entries and armed CQs are looked at even without an interrupt), then
/// * once the device has failed for good ([`Nic::check_fatal`](hostdrv::Nic::check_fatal): the simulated device process
///   died), reports `IBV_EVENT_DEVICE_FATAL` (once) and wakes every armed CQ that has work
///   requests to flush;
/// * keeps the device awake while sends are outstanding ([`Nic::keepalive`](hostdrv::Nic::keepalive));
/// * forwards event-queue entries as libibverbs asynchronous events;
/// * for every armed CQ with a completion waiting, writes one event into its channel;
/// * re-arms armed CQs on an interrupting vector whose completion was already polled (the
///   arm was used up by a completion the program took itself).
fn event_loop(sh: Arc<Shared>, stop: OwnedFd, irqs: Vec<RawFd>, async_wfd: RawFd) {
    let mut pfds: Vec<libc::pollfd> = std::iter::once(stop.as_raw_fd())
        .chain(irqs.iter().copied())
        .map(|fd| libc::pollfd { fd, events: libc::POLLIN, revents: 0 })
        .collect();
    let mut fatal_sent = false;
    loop {
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
        if !fatal_sent && sh.nic.check_fatal() {
            fatal_sent = true;
            warn(format_args!("the device has failed (fatal error); outstanding work requests are flushed, further calls fail with EIO"));
            let mut rec = [0u8; 16];
            rec[..8].copy_from_slice(&1u64.to_ne_bytes()); // element: the port
            rec[8..12].copy_from_slice(&IBV_EVENT_DEVICE_FATAL.to_ne_bytes());
            write_all(async_wfd, &rec);
        }
        // A requester waiting for its peer keeps a co-simulated device at full speed, so
        // that its ACK timeout (e.g. after a lost last packet) fires in seconds, not hours.
        if !fatal_sent && sh.nic.sends_outstanding() {
            let _ = sh.nic.keepalive();
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
        if let Ok(evs) = sh.nic.poll_events() {
            for ev in evs {
                let (elem, ty) = match ev {
                    hostdrv::nic::AsyncEvent::QpFatal(n) => match sh.qps.lock().unwrap().get(&n) {
                        Some(p) => (*p as u64, IBV_EVENT_QP_FATAL),
                        None => continue,
                    },
                    hostdrv::nic::AsyncEvent::CqOverrun(n) => match sh.cq_ptrs.lock().unwrap().get(&n) {
                        Some(p) => (*p as u64, IBV_EVENT_CQ_ERR),
                        None => continue,
                    },
                    hostdrv::nic::AsyncEvent::PortActive(p) => (p as u64, IBV_EVENT_PORT_ACTIVE),
                    hostdrv::nic::AsyncEvent::PortErr(p) => (p as u64, IBV_EVENT_PORT_ERR),
                };
                let mut rec = [0u8; 16];
                rec[..8].copy_from_slice(&elem.to_ne_bytes());
                rec[8..12].copy_from_slice(&ty.to_ne_bytes());
                write_all(async_wfd, &rec);
            }
        }
        let cqs = sh.cqs.lock().unwrap_or_else(|e| e.into_inner());
        for c in cqs.iter() {
            if !c.armed.load(Ordering::Acquire) {
                continue;
            }
            if sh.nic.cq_pending(&c.cq) {
                if c.armed.swap(false, Ordering::AcqRel) {
                    write_all(c.chan_wfd, &(c.ibcq as u64).to_ne_bytes());
                }
            } else if interrupted {
                let _ = sh.nic.req_notify_cq(&c.cq, false);
            }
        }
    }
}
