//! `libhematite-rdmav34.so`: the rdma-core verbs provider for Hematite.
//!
//! Debian's stock libibverbs (rdma-core 44; the provider ABI of 36..56) loads this library,
//! and its C glue (`shim.c`) registers the provider and fills libibverbs' objects. Everything
//! that talks to the device is here, on top of [`hostdrv`]: the control path through the
//! firmware's mailbox, and the fast path (`hm_rs_post_send`, `hm_rs_post_recv`,
//! `hm_rs_poll_cq`), which writes WQEs straight into the ring and reads CQEs straight out of
//! it, allocating nothing and taking only the queue's own lock.
//!
//! The device is found through the file `hematite_backend` in the device's sysfs directory
//! (`$SYSFS_PATH/class/infiniband/hematiteN/`), which `hematite-run` (or a boot-time generator
//! on a host with a card) writes: `sim:<socket>` for a simulated device process, `vfio:<BDF>`
//! for a PCI function bound to vfio-pci.
//!
//! A background thread per context turns device interrupts into completion-channel events
//! (an armed CQ writes its `ibv_cq` pointer into the channel's pipe, which is what
//! `ibv_get_cq_event` reads) and event-queue entries into libibverbs' asynchronous events
//! (16-byte records on the context's async pipe).
//!
//! Every function here is `extern "C"`, called by `shim.c` with handles this file created;
//! none may unwind (the crate is built with `panic = "abort"` semantics through
//! `catch_unwind`-free code: nothing on these paths panics on caller input).

use hostdrv::fast::{self, CqeRaw, SendHdr};
use hostdrv::nic::{gid_link_local, mac_of_link_local, mask, Cq, Mr, Pd, Qp, QpAttr, QpCaps, QpState};
use hostdrv::simdev::SimDevice;
use hostdrv::{Error, Nic};
use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

#[allow(dead_code)] // the ABI's constants are listed whole
mod abi;
use abi::*;

extern "C" {
    fn hm_c_create_comp_channel(context: *mut c_void) -> *mut c_void;
    fn hm_c_destroy_comp_channel(channel: *mut c_void) -> c_int;
    fn hm_c_rs_of(context: *mut c_void) -> *mut c_void;
}

/// Hematite extension, not a verb (programs find it with `dlsym`): the PDs, CQs, MRs and QPs
/// in use on the device of `context`, from the firmware's tables (QUERY_RESOURCES), into
/// `out[0..4]`. 0, or an errno (EINVAL for a context of another device).
///
/// # Safety
/// `context` is a context libibverbs opened; `out` has room for 4 values.
#[no_mangle]
pub unsafe extern "C" fn hematite_query_resources(context: *mut c_void, out: *mut u32) -> c_int {
    // SAFETY: the caller's guarantee.
    let rs = unsafe { hm_c_rs_of(context) };
    if rs.is_null() || out.is_null() {
        return libc::EINVAL;
    }
    // SAFETY: a Hematite context's `rs` is the Ctx hm_rs_open made.
    let ctx = unsafe { &*(rs as *const Ctx) };
    match ctx.sh.nic.resources() {
        Ok(r) => {
            // SAFETY: the caller's guarantee (4 values).
            unsafe { std::ptr::copy_nonoverlapping(r.as_ptr(), out, 4) };
            0
        }
        Err(e) => errno_of(&e),
    }
}

/// Hematite extension, not a verb: the firmware's QUERY_COUNTERS answer (commands, answers per
/// status, the number of engine counters n at word 12, then the engine's counters,
/// docs/transport-engine.md) into `out[0..max]`; `*n` = the words answered. 0 or an errno.
///
/// # Safety
/// `context` is a context libibverbs opened; `out` has room for `max` values, `n` is valid.
#[no_mangle]
pub unsafe extern "C" fn hematite_query_counters(context: *mut c_void, out: *mut u32, max: u32, n: *mut u32) -> c_int {
    // SAFETY: the caller's guarantee.
    let rs = unsafe { hm_c_rs_of(context) };
    if rs.is_null() || out.is_null() || n.is_null() {
        return libc::EINVAL;
    }
    // SAFETY: a Hematite context's `rs` is the Ctx hm_rs_open made.
    let ctx = unsafe { &*(rs as *const Ctx) };
    match ctx.sh.nic.counters() {
        Ok(w) => {
            let k = w.len().min(max as usize);
            // SAFETY: the caller's guarantee (max values), k <= max.
            unsafe {
                std::ptr::copy_nonoverlapping(w.as_ptr(), out, k);
                *n = k as u32;
            }
            0
        }
        Err(e) => errno_of(&e),
    }
}

/// `ibv_create_comp_channel`, exported so that a preloaded provider answers it: libibverbs'
/// own version asks the kernel, which is not there. Other devices' contexts are forwarded to
/// libibverbs.
///
/// # Safety
/// `context` is a context libibverbs opened.
#[no_mangle]
pub unsafe extern "C" fn ibv_create_comp_channel(context: *mut c_void) -> *mut c_void {
    // SAFETY: forwarded as is.
    unsafe { hm_c_create_comp_channel(context) }
}

/// `ibv_destroy_comp_channel`, the twin of [`ibv_create_comp_channel`].
///
/// # Safety
/// `channel` came from `ibv_create_comp_channel`.
#[no_mangle]
pub unsafe extern "C" fn ibv_destroy_comp_channel(channel: *mut c_void) -> c_int {
    // SAFETY: forwarded as is.
    unsafe { hm_c_destroy_comp_channel(channel) }
}

fn warn(msg: std::fmt::Arguments) {
    eprintln!("hematite: {msg}");
}

// ------------------------------------------------------------------------ objects

struct Shared {
    nic: Nic,
    sim: Option<Arc<SimDevice>>,
    node_guid: u64,
    /// CQs with a completion channel (the event thread watches them).
    cqs: Mutex<Vec<Arc<RsCq>>>,
    /// QP number -> `struct ibv_qp *`, for asynchronous events.
    qps: Mutex<HashMap<u32, usize>>,
    /// CQ number -> `struct ibv_cq *`, for asynchronous events.
    cq_ptrs: Mutex<HashMap<u32, usize>>,
    /// Co-simulation only: an empty poll sleeps briefly (`HM_POLL_BACKOFF_US`, default 50 µs),
    /// so that programs that spin on `ibv_poll_cq` leave the CPU to the simulated device
    /// (which runs ~1000x slower than hardware; 50 µs is a handful of simulated cycles).
    poll_backoff: Option<std::time::Duration>,
}

/// The context: what `hm_rs_open` returns.
pub struct Ctx {
    sh: Arc<Shared>,
    events: Mutex<Option<(JoinHandle<()>, OwnedFd)>>,
}

pub struct RsPd {
    pd: Pd,
}

pub struct RsMr {
    mr: Mr,
}

pub struct RsCq {
    sh: Arc<Shared>,
    cq: Cq,
    ibcq: usize,
    chan_wfd: RawFd,
    armed: AtomicBool,
}

pub struct RsQp {
    sh: Arc<Shared>,
    qp: Qp,
    /// `F_SIGNALED` when the QP signals every WR (sq_sig_all), else 0.
    sig_flag: u8,
    max_inline: u32,
    max_send_sge: u32,
    max_recv_sge: u32,
}

fn errno_of(e: &Error) -> c_int {
    e.errno()
}

/// Reads a small text file.
fn read_text(path: &std::path::Path) -> Option<String> {
    std::fs::read_to_string(path).ok().map(|s| s.trim().to_string())
}

fn parse_guid(s: &str) -> Option<u64> {
    let hex: String = s.chars().filter(|c| *c != ':').collect();
    if hex.len() != 16 {
        return None;
    }
    u64::from_str_radix(&hex, 16).ok()
}

fn cap_ipc_lock() -> bool {
    let Some(st) = read_text(std::path::Path::new("/proc/self/status")) else { return false };
    st.lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .is_some_and(|caps| caps & (1 << 14) != 0) // CAP_IPC_LOCK
}

fn open_backend(ibdev_path: &str) -> Result<Ctx, c_int> {
    let dir = std::path::Path::new(ibdev_path);
    let file = dir.join("hematite_backend");
    let Some(spec) = read_text(&file) else {
        warn(format_args!("{} is missing: the device tree was not made by hematite-run (or the deployment's generator)", file.display()));
        return Err(libc::ENODEV);
    };
    let (nic, sim) = if let Some(sock) = spec.strip_prefix("sim:") {
        let dev = Arc::new(SimDevice::open(std::path::Path::new(sock)).map_err(|e| {
            if !matches!(e, Error::Busy(_)) {
                warn(format_args!("opening the simulated device {sock}: {e} (is it running? `hematite-run --status`)"));
            }
            errno_of(&e)
        })?);
        let nic = Nic::open(Box::new(dev.clone())).map_err(|e| {
            warn(format_args!("starting the simulated device {sock}: {e}"));
            errno_of(&e)
        })?;
        (nic, Some(dev))
    } else if let Some(bdf) = spec.strip_prefix("vfio:") {
        let dev = hostdrv::vfio::VfioDevice::open(bdf).map_err(|e| {
            warn(format_args!("opening the PCI function {bdf} through VFIO: {e}"));
            errno_of(&e)
        })?;
        let nic = Nic::open(Box::new(dev)).map_err(|e| {
            warn(format_args!("starting {bdf}: {e}"));
            errno_of(&e)
        })?;
        (nic, None)
    } else {
        warn(format_args!("{}: unknown backend {spec:?} (expected sim:<socket> or vfio:<BDF>)", file.display()));
        return Err(libc::EINVAL);
    };
    let is_sim = sim.is_some();
    let node_guid = read_text(&dir.join("node_guid")).and_then(|s| parse_guid(&s)).unwrap_or_else(|| {
        let m = nic.mac().unwrap_or(0);
        (m >> 24 ^ 0x02_0000) << 40 | 0xFF_FE << 24 | (m & 0xFF_FFFF)
    });
    let sh = Arc::new(Shared {
        nic,
        sim,
        node_guid,
        cqs: Mutex::new(Vec::new()),
        qps: Mutex::new(HashMap::new()),
        cq_ptrs: Mutex::new(HashMap::new()),
        poll_backoff: if is_sim {
            let us = std::env::var("HM_POLL_BACKOFF_US").ok().and_then(|v| v.parse().ok()).unwrap_or(50u64);
            (us > 0).then(|| std::time::Duration::from_micros(us))
        } else {
            None
        },
    });
    Ok(Ctx { sh, events: Mutex::new(None) })
}

// ------------------------------------------------------------------------ context

/// Opens the device behind `ibdev_path`; NULL with `*err` set on failure.
///
/// # Safety
/// `ibdev_path` is a NUL-terminated string, `err` a valid pointer.
#[no_mangle]
pub unsafe extern "C" fn hm_rs_open(ibdev_path: *const c_char, err: *mut c_int) -> *mut c_void {
    // SAFETY: the caller's guarantee.
    let path = unsafe { CStr::from_ptr(ibdev_path) }.to_string_lossy().into_owned();
    match open_backend(&path) {
        Ok(ctx) => Box::into_raw(Box::new(ctx)) as *mut c_void,
        Err(e) => {
            // SAFETY: the caller's guarantee.
            unsafe { *err = e };
            std::ptr::null_mut()
        }
    }
}

/// Stops the event thread and closes the device (the device resets, freeing everything).
///
/// # Safety
/// `ctx` came from `hm_rs_open` and is not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn hm_rs_close(ctx: *mut c_void) {
    if ctx.is_null() {
        return;
    }
    // SAFETY: the caller's guarantee.
    let ctx = unsafe { Box::from_raw(ctx as *mut Ctx) };
    if let Some((h, stop)) = ctx.events.lock().unwrap_or_else(|e| e.into_inner()).take() {
        drop(stop); // the thread sees the pipe's write end close
        let _ = h.join();
    }
    ctx.sh.cqs.lock().unwrap_or_else(|e| e.into_inner()).clear();
}

/// # Safety
/// `ctx` came from `hm_rs_open`; `out` is valid.
#[no_mangle]
pub unsafe extern "C" fn hm_rs_query_device(ctx: *mut c_void, out: *mut HmDevAttr) -> c_int {
    // SAFETY: the caller's guarantee.
    let (ctx, out) = unsafe { (&*(ctx as *const Ctx), &mut *out) };
    let a = ctx.sh.nic.attr();
    *out = HmDevAttr {
        max_mr_size: a.max_mr_size,
        page_size_cap: a.page_size_cap,
        node_guid: ctx.sh.node_guid.to_be(),
        fw_ver: a.fw_ver,
        vendor_id: a.vendor_id,
        vendor_part_id: a.vendor_part_id,
        hw_ver: a.hw_ver,
        max_qp: a.max_qp,
        max_qp_wr: a.max_qp_wr,
        max_sge: a.max_sge,
        // the driver's event queue is one of the device's CQs
        max_cq: a.max_cq.saturating_sub(ctx.sh.nic.has_event_queue() as u32),
        max_cqe: a.max_cqe.min(1 << 16),
        max_mr: a.max_mr,
        max_pd: a.max_pd,
        max_qp_rd_atom: a.max_qp_rd_atom,
        max_qp_init_rd_atom: a.max_qp_init_rd_atom,
        atomic_cap: a.atomic_cap,
        max_inline_data: a.max_inline_data,
        phys_port_cnt: a.phys_port_cnt,
        num_comp_vectors: a.num_comp_vectors.min(ctx.sh.nic.device().info().num_irqs).max(1),
        _pad: 0,
    };
    0
}

/// # Safety
/// `ctx` came from `hm_rs_open`; `out` is valid.
#[no_mangle]
pub unsafe extern "C" fn hm_rs_query_port(ctx: *mut c_void, port: u32, out: *mut HmPortAttr) -> c_int {
    // SAFETY: the caller's guarantee.
    let (ctx, out) = unsafe { (&*(ctx as *const Ctx), &mut *out) };
    match ctx.sh.nic.query_port(port) {
        Ok(p) => {
            *out = HmPortAttr {
                state: p.state,
                max_mtu: p.max_mtu,
                active_mtu: p.active_mtu,
                gid_tbl_len: p.gid_tbl_len,
                port_cap_flags: p.port_cap_flags,
                max_msg_sz: p.max_msg_sz,
                pkey_tbl_len: p.pkey_tbl_len,
                link_layer: p.link_layer,
                active_speed: p.active_speed,
                active_width: p.active_width,
                phys_state: p.phys_state,
                _pad: 0,
            };
            0
        }
        Err(e) => errno_of(&e),
    }
}

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
/// * once the device has failed for good ([`Nic::check_fatal`]: the simulated device process
///   died), reports `IBV_EVENT_DEVICE_FATAL` (once) and wakes every armed CQ that has work
///   requests to flush;
/// * keeps the device awake while sends are outstanding ([`Nic::keepalive`]);
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

// ------------------------------------------------------------------------ PD, MR

/// # Safety
/// `ctx` came from `hm_rs_open`; the out pointers are valid.
#[no_mangle]
pub unsafe extern "C" fn hm_rs_alloc_pd(ctx: *mut c_void, pd: *mut *mut c_void, handle: *mut u32) -> c_int {
    // SAFETY: the caller's guarantee.
    let ctx = unsafe { &*(ctx as *const Ctx) };
    if ctx.sh.nic.check_fatal() {
        return libc::EIO;
    }
    match ctx.sh.nic.alloc_pd() {
        Ok(p) => {
            // SAFETY: the caller's guarantee.
            unsafe {
                *handle = p.id();
                *pd = Box::into_raw(Box::new(RsPd { pd: p })) as *mut c_void;
            }
            0
        }
        Err(e) => errno_of(&e),
    }
}

/// Fails with EBUSY while MRs or QPs use the PD.
///
/// # Safety
/// `ctx` and `pd` came from this library; `pd` is not used after success.
#[no_mangle]
pub unsafe extern "C" fn hm_rs_dealloc_pd(ctx: *mut c_void, pd: *mut c_void) -> c_int {
    // SAFETY: the caller's guarantee.
    let (ctx, p) = unsafe { (&*(ctx as *const Ctx), &*(pd as *const RsPd)) };
    if p.pd.users() > 1 {
        return libc::EBUSY;
    }
    // SAFETY: the caller's guarantee (and not used again on success).
    let p = unsafe { Box::from_raw(pd as *mut RsPd) };
    match ctx.sh.nic.dealloc_pd(p.pd) {
        Ok(()) => 0,
        Err(e) => errno_of(&e),
    }
}

/// Whether every page of `[addr, addr + len)` is mapped in this process (`mincore` fails with
/// ENOMEM on a range with an unmapped page), looked at 16 MiB at a time, so that a range that
/// runs off the mapped memory fails at its first unmapped piece, whatever its length.
fn mapped(addr: u64, len: u64) -> bool {
    const CHUNK: u64 = 16 << 20;
    let mut vec = [0u8; (CHUNK / 4096) as usize];
    let Some(end) = addr.checked_add(len) else { return false };
    let mut p = addr & !4095;
    while p < end {
        let n = (end - p).min(CHUNK);
        // SAFETY: mincore only reads the page tables; `vec` holds one byte per page of `n`
        // (at most CHUNK / 4096 pages).
        if unsafe { libc::mincore(p as *mut c_void, n as usize, vec.as_mut_ptr()) } != 0 {
            return false;
        }
        p += n;
    }
    true
}

/// `ibv_access_flags` the device knows (MW_BIND is accepted and means nothing: there are no
/// memory windows).
const ACCESS_KNOWN: u32 = 0x1 | 0x2 | 0x4 | 0x8 | 0x10;

/// # Safety
/// `ctx`, `pd` came from this library; the out pointers are valid; `[addr, addr+len)` is the
/// caller's memory (libibverbs' contract: it stays mapped until deregistration).
#[no_mangle]
pub unsafe extern "C" fn hm_rs_reg_mr(
    ctx: *mut c_void,
    pd: *mut c_void,
    addr: u64,
    len: u64,
    iova: u64,
    access: u32,
    mr: *mut *mut c_void,
    lkey: *mut u32,
    rkey: *mut u32,
) -> c_int {
    // SAFETY: the caller's guarantee.
    let (ctx, p) = unsafe { (&*(ctx as *const Ctx), &*(pd as *const RsPd)) };
    if ctx.sh.nic.check_fatal() {
        return libc::EIO;
    }
    if access & !ACCESS_KNOWN != 0 {
        // ZERO_BASED, ON_DEMAND, HUGETLB, ... are not offered
        return if access & (0x20 | 0x40 | 0x80) != 0 { libc::EOPNOTSUPP } else { libc::EINVAL };
    }
    // remote write or atomic access needs local write (as the verbs specification says)
    if access & (0x2 | 0x8) != 0 && access & 0x1 == 0 {
        return libc::EINVAL;
    }
    if len == 0 || addr.checked_add(len).is_none() {
        return libc::EINVAL;
    }
    // memory that is not mapped cannot be registered (the kernel's ib_umem_get fails to pin
    // it: EFAULT); the simulated device would otherwise take it, and read or write nothing
    if !mapped(addr, len) {
        return libc::EFAULT;
    }
    // RLIMIT_MEMLOCK bounds what is pinned, as the kernel applies it, unless the program has
    // CAP_IPC_LOCK (looked up now: a program may drop it after opening the device)
    if !cap_ipc_lock() {
        let mut rl = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        // SAFETY: a valid rlimit out pointer.
        if unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut rl) } == 0 && rl.rlim_cur != libc::RLIM_INFINITY {
            let pages = (addr + len).div_ceil(4096) - addr / 4096;
            if ctx.sh.nic.pinned_bytes() + pages * 4096 > rl.rlim_cur {
                return libc::ENOMEM;
            }
        }
    }
    // SAFETY: the memory is the caller's and stays registered until dereg (libibverbs' contract).
    match unsafe { ctx.sh.nic.reg_mr_iova(&p.pd, addr, len, iova, access & 0xF) } {
        Ok(m) => {
            // SAFETY: the caller's guarantee.
            unsafe {
                *lkey = m.lkey();
                *rkey = m.rkey();
                *mr = Box::into_raw(Box::new(RsMr { mr: m })) as *mut c_void;
            }
            0
        }
        Err(e) => errno_of(&e),
    }
}

/// # Safety
/// `ctx`, `mr` came from this library; `mr` is not used after success.
#[no_mangle]
pub unsafe extern "C" fn hm_rs_dereg_mr(ctx: *mut c_void, mr: *mut c_void) -> c_int {
    // SAFETY: the caller's guarantee.
    let (ctx, m) = unsafe { (&*(ctx as *const Ctx), &*(mr as *const RsMr)) };
    if m.mr.users() > 1 {
        return libc::EBUSY;
    }
    // SAFETY: the caller's guarantee.
    let m = unsafe { Box::from_raw(mr as *mut RsMr) };
    match ctx.sh.nic.dereg_mr(m.mr) {
        Ok(()) => 0,
        Err(e) => errno_of(&e),
    }
}

// ------------------------------------------------------------------------ CQ

/// # Safety
/// `ctx` came from `hm_rs_open`; `ibcq` is the CQ libibverbs will see; the out pointers are
/// valid; `chan_wfd` is -1 or the write end of a channel that outlives the CQ.
#[no_mangle]
pub unsafe extern "C" fn hm_rs_create_cq(
    ctx: *mut c_void,
    cqe: i32,
    vector: i32,
    ibcq: *mut c_void,
    chan_wfd: c_int,
    cq: *mut *mut c_void,
    entries: *mut u32,
    cqn: *mut u32,
) -> c_int {
    // SAFETY: the caller's guarantee.
    let ctx = unsafe { &*(ctx as *const Ctx) };
    if ctx.sh.nic.check_fatal() {
        return libc::EIO;
    }
    if cqe < 1 || vector < 0 {
        return libc::EINVAL;
    }
    match ctx.sh.nic.create_cq(cqe as u32, Some(vector as u32)) {
        Ok(c) => {
            let rc = Arc::new(RsCq { sh: ctx.sh.clone(), cq: c, ibcq: ibcq as usize, chan_wfd, armed: AtomicBool::new(false) });
            ctx.sh.cq_ptrs.lock().unwrap().insert(rc.cq.cqn(), ibcq as usize);
            if chan_wfd >= 0 {
                ctx.sh.cqs.lock().unwrap().push(rc.clone());
            }
            // SAFETY: the caller's guarantee.
            unsafe {
                *entries = rc.cq.entries();
                *cqn = rc.cq.cqn();
                *cq = Arc::into_raw(rc) as *mut c_void;
            }
            0
        }
        Err(e) => errno_of(&e),
    }
}

/// Fails with EBUSY while QPs use the CQ.
///
/// # Safety
/// `ctx`, `cq` came from this library; `cq` is not used after success.
#[no_mangle]
pub unsafe extern "C" fn hm_rs_destroy_cq(ctx: *mut c_void, cq: *mut c_void) -> c_int {
    // SAFETY: the caller's guarantee.
    let (ctx, c) = unsafe { (&*(ctx as *const Ctx), &*(cq as *const RsCq)) };
    // our own handle, plus the event thread's list entry when it has a channel
    if c.cq.users() > 1 {
        return libc::EBUSY;
    }
    ctx.sh.cqs.lock().unwrap().retain(|x| !std::ptr::eq(Arc::as_ptr(x), c));
    ctx.sh.cq_ptrs.lock().unwrap().remove(&c.cq.cqn());
    // SAFETY: the caller's guarantee; the list entry is gone, so this is the last Arc.
    let rc = unsafe { Arc::from_raw(cq as *const RsCq) };
    match Arc::try_unwrap(rc) {
        Ok(rc) => match ctx.sh.nic.destroy_cq(rc.cq) {
            Ok(()) => 0,
            Err(e) => errno_of(&e),
        },
        Err(rc) => {
            // the event thread holds it for a moment: keep the handle valid
            std::mem::forget(rc);
            libc::EBUSY
        }
    }
}

/// # Safety
/// `cq` came from `hm_rs_create_cq`.
#[no_mangle]
pub unsafe extern "C" fn hm_rs_req_notify_cq(cq: *mut c_void, solicited_only: c_int) -> c_int {
    // SAFETY: the caller's guarantee.
    let c = unsafe { &*(cq as *const RsCq) };
    c.armed.store(true, Ordering::Release);
    match c.sh.nic.req_notify_cq(&c.cq, solicited_only != 0) {
        Ok(()) => 0,
        Err(e) => errno_of(&e),
    }
}

const WC_STATUS: [u32; 10] = [
    IBV_WC_SUCCESS,
    IBV_WC_LOC_LEN_ERR,
    IBV_WC_LOC_PROT_ERR,
    IBV_WC_LOC_QP_OP_ERR,
    IBV_WC_WR_FLUSH_ERR,
    IBV_WC_REM_ACCESS_ERR,
    IBV_WC_REM_INV_REQ_ERR,
    IBV_WC_REM_OP_ERR,
    IBV_WC_RETRY_EXC_ERR,
    IBV_WC_RNR_RETRY_EXC_ERR,
];
const _: () = {
    use hematite_model::desc as d;
    assert!(d::HM_CQE_ST_SUCCESS == 0 && d::HM_CQE_ST_LOC_LEN_ERR == 1 && d::HM_CQE_ST_LOC_PROT_ERR == 2);
    assert!(d::HM_CQE_ST_LOC_QP_OP_ERR == 3 && d::HM_CQE_ST_WR_FLUSH_ERR == 4 && d::HM_CQE_ST_REM_ACCESS_ERR == 5);
    assert!(d::HM_CQE_ST_REM_INV_REQ_ERR == 6 && d::HM_CQE_ST_REM_OP_ERR == 7 && d::HM_CQE_ST_RETRY_EXC_ERR == 8);
    assert!(d::HM_CQE_ST_RNR_RETRY_EXC_ERR == 9);
    assert!(d::HM_CQE_OP_SEND == 0 && d::HM_CQE_OP_RDMA_WRITE == 1 && d::HM_CQE_OP_RDMA_READ == 2);
    assert!(d::HM_CQE_OP_CMP_SWAP == 3 && d::HM_CQE_OP_FETCH_ADD == 4 && d::HM_CQE_OP_RECV == 5);
    assert!(d::HM_CQE_OP_RECV_RDMA_IMM == 6);
};
const WC_OPCODE: [u32; 8] = [
    IBV_WC_SEND,
    IBV_WC_RDMA_WRITE,
    IBV_WC_RDMA_READ,
    IBV_WC_COMP_SWAP,
    IBV_WC_FETCH_ADD,
    IBV_WC_RECV,
    IBV_WC_RECV_RDMA_WITH_IMM,
    IBV_WC_RECV, // (event entries never reach a completion CQ)
];

/// CQE flags (IMM, INV) -> `ibv_wc_flags`.
const WC_FLAGS: [u32; 4] = [0, IBV_WC_WITH_IMM, IBV_WC_WITH_INV, IBV_WC_WITH_IMM | IBV_WC_WITH_INV];
const _: () = assert!(fast::CQE_F_IMM == 1 && fast::CQE_F_INV == 2);

#[inline(always)]
fn fill_wc(w: &mut IbvWc, e: &CqeRaw) {
    let status = if (e.status as usize) < WC_STATUS.len() { WC_STATUS[e.status as usize] } else { IBV_WC_GENERAL_ERR };
    w.wr_id = e.wr_id;
    w.status = status;
    w.opcode = WC_OPCODE[(e.opcode & 7) as usize];
    w.vendor_err = e.status as u32;
    w.byte_len = e.byte_len;
    w.imm = e.imm_field;
    w.qp_num = e.qpn;
    w.src_qp = 0;
    w.wc_flags = WC_FLAGS[(e.flags & 3) as usize];
    // pkey_index, slid, sl, dlid_path_bits: all zero (RoCE RC)
    // SAFETY: the 8 bytes from pkey_index to the end of the 48-byte entry.
    unsafe { std::ptr::write_unaligned(&mut w.pkey_index as *mut u16 as *mut u64, 0) };
}

/// `ibv_poll_cq`: up to `n` completions into `wc`; the count, or -1 when the device failed.
///
/// # Safety
/// `cq` came from `hm_rs_create_cq`; `wc` holds `n` entries.
#[no_mangle]
pub unsafe extern "C" fn hm_rs_poll_cq(cq: *mut c_void, n: c_int, wc: *mut IbvWc) -> c_int {
    // SAFETY: the caller's guarantee.
    let c = unsafe { &*(cq as *const RsCq) };
    if n <= 0 {
        return if n == 0 { 0 } else { -1 };
    }
    let mut i = 0usize;
    let r = c.sh.nic.poll_cq_raw(&c.cq, n as usize, |e| {
        // SAFETY: i < n entries of the caller's array (poll_cq_raw calls at most n times).
        fill_wc(unsafe { &mut *wc.add(i) }, e);
        i += 1;
    });
    match r {
        Ok(0) => {
            if c.sh.nic.is_fatal() {
                // the device failed for good: the outstanding WRs complete with WR_FLUSH_ERR
                let mut i = 0usize;
                return c.sh.nic.poll_cq_flushed(&c.cq, n as usize, |e| {
                    // SAFETY: i < n entries of the caller's array (at most n calls).
                    fill_wc(unsafe { &mut *wc.add(i) }, e);
                    i += 1;
                }) as c_int;
            }
            if let Some(d) = c.sh.poll_backoff {
                std::thread::sleep(d);
            }
            0
        }
        Ok(k) => k as c_int,
        Err(_) => -1,
    }
}

// ------------------------------------------------------------------------ QP

/// # Safety
/// All handles came from this library; `ibqp` is the QP libibverbs will see; `caps` and the
/// out pointers are valid.
#[no_mangle]
pub unsafe extern "C" fn hm_rs_create_qp(
    ctx: *mut c_void,
    pd: *mut c_void,
    scq: *mut c_void,
    rcq: *mut c_void,
    ibqp: *mut c_void,
    sq_sig_all: u32,
    caps: *mut HmQpCaps,
    qp: *mut *mut c_void,
    qpn: *mut u32,
) -> c_int {
    // SAFETY: the caller's guarantee.
    let (ctx, p, s, r, c) = unsafe {
        (&*(ctx as *const Ctx), &*(pd as *const RsPd), &*(scq as *const RsCq), &*(rcq as *const RsCq), &mut *caps)
    };
    if ctx.sh.nic.check_fatal() {
        return libc::EIO;
    }
    let want = QpCaps {
        max_send_wr: c.max_send_wr,
        max_recv_wr: c.max_recv_wr,
        max_send_sge: c.max_send_sge,
        max_recv_sge: c.max_recv_sge,
        max_inline_data: c.max_inline_data,
    };
    match ctx.sh.nic.create_qp(&p.pd, &s.cq, &r.cq, want) {
        Ok(q) => {
            let g = q.caps();
            *c = HmQpCaps {
                max_send_wr: g.max_send_wr,
                max_recv_wr: g.max_recv_wr,
                max_send_sge: g.max_send_sge,
                max_recv_sge: g.max_recv_sge,
                max_inline_data: g.max_inline_data,
                _pad: 0,
            };
            ctx.sh.qps.lock().unwrap().insert(q.qpn(), ibqp as usize);
            let rq = RsQp {
                sh: ctx.sh.clone(),
                sig_flag: if sq_sig_all != 0 { fast::F_SIGNALED } else { 0 },
                max_inline: g.max_inline_data,
                max_send_sge: g.max_send_sge,
                max_recv_sge: g.max_recv_sge,
                qp: q,
            };
            // SAFETY: the caller's guarantee.
            unsafe {
                *qpn = rq.qp.qpn();
                *qp = Box::into_raw(Box::new(rq)) as *mut c_void;
            }
            0
        }
        Err(e) => errno_of(&e),
    }
}

const IPV4_MAPPED: [u8; 12] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF];

fn state_of(v: u32) -> Result<QpState, c_int> {
    QpState::from_u32(v).ok_or(libc::EINVAL)
}

/// # Safety
/// Handles came from this library; `a` is valid.
#[no_mangle]
pub unsafe extern "C" fn hm_rs_modify_qp(ctx: *mut c_void, qp: *mut c_void, a: *const HmQpAttr, m: u32, from: u32) -> c_int {
    // SAFETY: the caller's guarantee.
    let (ctx, q, a) = unsafe { (&*(ctx as *const Ctx), &*(qp as *const RsQp), &*a) };
    let run = || -> Result<(), c_int> {
        // An illegal transition or attribute mask is refused before anything is resolved
        // (the firmware judges again, from the QP's real state).
        if m & mask::STATE != 0 {
            let to = state_of(a.qp_state)?;
            let from = if m & mask::CUR_STATE != 0 { state_of(a.cur_qp_state)? } else { state_of(from)? };
            if hematite_firmware::qp::check_mask(from, to, m).is_err() {
                return Err(libc::EINVAL);
            }
        }
        let mut attr = QpAttr {
            qp_state: if m & mask::STATE != 0 { state_of(a.qp_state)? } else { QpState::Reset },
            cur_qp_state: if m & mask::CUR_STATE != 0 { state_of(a.cur_qp_state)? } else { QpState::Reset },
            qp_access_flags: a.qp_access_flags,
            pkey_index: a.pkey_index,
            port_num: a.port_num,
            path_mtu: a.path_mtu,
            timeout: a.timeout,
            retry_cnt: a.retry_cnt,
            rnr_retry: a.rnr_retry,
            rq_psn: a.rq_psn,
            sq_psn: a.sq_psn,
            max_rd_atomic: a.max_rd_atomic,
            max_dest_rd_atomic: a.max_dest_rd_atomic,
            min_rnr_timer: a.min_rnr_timer,
            dest_qp_num: a.dest_qp_num,
            sgid_index: a.sgid_index,
            dgid: a.dgid,
            dmac: 0,
            hop_limit: a.hop_limit,
            traffic_class: a.traffic_class,
            flow_label: a.flow_label,
            udp_sport: 0,
        };
        if m & mask::MAX_QP_RD_ATOMIC != 0 {
            // Our initiator depth: more than the device can keep outstanding is clamped (we
            // then issue fewer READs / atomics at a time than the responder allows, which is
            // always safe; perftest asks for the peer's responder resources, e.g. rxe's 128).
            // The responder side (max_dest_rd_atomic) is not clamped: the firmware refuses it.
            attr.max_rd_atomic = attr.max_rd_atomic.min(ctx.sh.nic.attr().max_qp_init_rd_atom.max(1));
        }
        if m & mask::AV != 0 {
            if a.is_global == 0 {
                warn(format_args!("QP {}: RoCE needs a GRH (ah_attr.is_global = 1 with the peer's GID)", q.qp.qpn()));
                return Err(libc::EINVAL);
            }
            if a.dgid == [0; 16] {
                // no destination at all: an invalid attribute, not an unsupported one
                warn(format_args!("QP {}: the destination GID is zero", q.qp.qpn()));
                return Err(libc::EINVAL);
            }
            if a.dgid[..12] != IPV4_MAPPED {
                // RoCEv2 over IPv6: the peer's MAC is the EUI-64 identifier of its link-local
                // GID (as the kernel's rdma_get_ll_mac does); our own link-local GID is this
                // port (looped back). Other IPv6 destinations would need neighbour discovery.
                let own_ll = ctx.sh.nic.mac().filter(|&m| gid_link_local(m) == a.dgid);
                attr.dmac = match own_ll.or_else(|| mac_of_link_local(&a.dgid)) {
                    Some(mac) => mac,
                    None => {
                        warn(format_args!(
                            "QP {}: IPv6 destination {} is not an EUI-64 link-local GID; other IPv6 destinations need neighbour discovery, which this provider does not do",
                            q.qp.qpn(),
                            std::net::Ipv6Addr::from(a.dgid)
                        ));
                        return Err(libc::EOPNOTSUPP);
                    }
                };
            } else {
                let ip = u32::from_be_bytes([a.dgid[12], a.dgid[13], a.dgid[14], a.dgid[15]]);
                let own = (ctx.sh.nic.ipv4() == Some(ip)).then(|| ctx.sh.nic.mac()).flatten();
                let Some(sim) = &ctx.sh.sim else {
                    warn(format_args!("QP {}: no neighbour resolution on this backend", q.qp.qpn()));
                    return Err(libc::EOPNOTSUPP);
                };
                // a QP connected to one on this NIC: its own MAC (the port loops such frames back)
                attr.dmac = if let Some(mac) = own { mac } else { sim.arp_resolve(ip).map_err(|e| {
                    warn(format_args!("QP {}: resolving {}: {e}", q.qp.qpn(), std::net::Ipv4Addr::from(ip)));
                    libc::EHOSTUNREACH
                })? };
            }
        }
        ctx.sh.nic.modify_qp(&q.qp, &attr, m).map_err(|e| errno_of(&e))
    };
    match run() {
        Ok(()) => 0,
        Err(e) => e,
    }
}

/// # Safety
/// Handles came from this library; the out pointers are valid.
#[no_mangle]
pub unsafe extern "C" fn hm_rs_query_qp(ctx: *mut c_void, qp: *mut c_void, out: *mut HmQpAttr, caps: *mut HmQpCaps) -> c_int {
    // SAFETY: the caller's guarantee.
    let (ctx, q) = unsafe { (&*(ctx as *const Ctx), &*(qp as *const RsQp)) };
    match ctx.sh.nic.query_qp(&q.qp) {
        Ok(a) => {
            let g = q.qp.caps();
            // SAFETY: the caller's guarantee.
            unsafe {
                *out = HmQpAttr {
                    dgid: a.dgid,
                    qp_state: a.qp_state as u32,
                    cur_qp_state: a.qp_state as u32,
                    qp_access_flags: a.qp_access_flags,
                    pkey_index: a.pkey_index,
                    port_num: a.port_num,
                    path_mtu: a.path_mtu,
                    timeout: a.timeout,
                    retry_cnt: a.retry_cnt,
                    rnr_retry: a.rnr_retry,
                    rq_psn: a.rq_psn,
                    sq_psn: a.sq_psn,
                    max_rd_atomic: a.max_rd_atomic,
                    max_dest_rd_atomic: a.max_dest_rd_atomic,
                    min_rnr_timer: a.min_rnr_timer,
                    dest_qp_num: a.dest_qp_num,
                    sgid_index: a.sgid_index,
                    hop_limit: a.hop_limit,
                    traffic_class: a.traffic_class,
                    flow_label: a.flow_label,
                    is_global: 1,
                };
                *caps = HmQpCaps {
                    max_send_wr: g.max_send_wr,
                    max_recv_wr: g.max_recv_wr,
                    max_send_sge: g.max_send_sge,
                    max_recv_sge: g.max_recv_sge,
                    max_inline_data: g.max_inline_data,
                    _pad: 0,
                };
            }
            0
        }
        Err(e) => errno_of(&e),
    }
}

/// # Safety
/// Handles came from this library; `qp` is not used after success.
#[no_mangle]
pub unsafe extern "C" fn hm_rs_destroy_qp(ctx: *mut c_void, qp: *mut c_void) -> c_int {
    // SAFETY: the caller's guarantee.
    let ctx = unsafe { &*(ctx as *const Ctx) };
    // SAFETY: the caller's guarantee.
    let q = unsafe { Box::from_raw(qp as *mut RsQp) };
    let n = q.qp.qpn();
    match ctx.sh.nic.destroy_qp(q.qp) {
        Ok(()) => {
            ctx.sh.qps.lock().unwrap().remove(&n);
            0
        }
        Err(e) => errno_of(&e),
    }
}

// ------------------------------------------------------------------------ the fast path

/// Per `ibv_wr_opcode` (0..=9): the WQE opcode, the operation's class (0: not offered,
/// 1: SEND family, 2: RDMA WRITE / READ, 3: atomic) and the mask for the imm / R_Key field.
const WR_OP: [(u8, u8, u32); 10] = [
    (fast::OP_WRITE, 2, 0),
    (fast::OP_WRITE_IMM, 2, !0),
    (fast::OP_SEND, 1, 0),
    (fast::OP_SEND_IMM, 1, !0),
    (fast::OP_READ, 2, 0),
    (fast::OP_CMP_SWAP, 3, 0),
    (fast::OP_FETCH_ADD, 3, 0),
    (0, 0, 0), // LOCAL_INV
    (0, 0, 0), // BIND_MW
    (fast::OP_SEND_INV, 1, !0),
];
/// `send_flags & 7` (FENCE, SIGNALED, SOLICITED) -> WQE flags.
const WR_FLAGS: [u8; 8] = {
    let mut t = [0u8; 8];
    let mut i = 0;
    while i < 8 {
        let mut f = 0;
        if i as u32 & IBV_SEND_FENCE != 0 {
            f |= fast::F_FENCE;
        }
        if i as u32 & IBV_SEND_SIGNALED != 0 {
            f |= fast::F_SIGNALED;
        }
        if i as u32 & IBV_SEND_SOLICITED != 0 {
            f |= fast::F_SOLICITED;
        }
        t[i] = f;
        i += 1;
    }
    t
};
const _: () = assert!(IBV_WR_RDMA_WRITE == 0 && IBV_WR_SEND_WITH_INV == 9 && IBV_WR_ATOMIC_CMP_AND_SWP == 5);

/// Writes one send WR into the next slot; 0 or the errno for `*bad_wr`.
#[inline(always)]
fn post_one(p: &mut hostdrv::nic::SqPost<'_>, q: &RsQp, w: &IbvSendWr) -> c_int {
    let Some(slot) = p.slot() else { return libc::ENOMEM };
    let Some(&(opcode, class, imm_mask)) = WR_OP.get(w.opcode as usize) else { return libc::EINVAL };
    if class == 0 {
        return libc::EINVAL;
    }
    let f = w.send_flags;
    let mut h = SendHdr { opcode, flags: WR_FLAGS[(f & 7) as usize] | q.sig_flag, wr_id: w.wr_id, imm_field: w.imm & imm_mask, ..Default::default() };
    let nsge = w.num_sge as u32;
    if class >= 2 {
        h.remote_addr = w.wr[0];
        h.rkey = w.wr[1] as u32;
    }
    if class == 3 {
        // atomics: one 8-byte SGE, an aligned target
        if nsge != 1 || w.sg_list.is_null() {
            return libc::EINVAL;
        }
        // SAFETY: one SGE (checked).
        let s = unsafe { &*w.sg_list };
        if s.length != 8 || h.remote_addr % 8 != 0 {
            return libc::EINVAL;
        }
        h.rkey = w.wr[3] as u32;
        h.num_sge = 1;
        h.length = 8;
        let (cmp, swap_add) = if opcode == fast::OP_CMP_SWAP { (w.wr[1], w.wr[2]) } else { (0, w.wr[1]) };
        // SAFETY: `slot` is a free slot of at least 64 bytes (the smallest stride).
        unsafe {
            fast::write_atomic_args(slot, cmp, swap_add);
            fast::write_sge(slot, fast::ATOMIC_SGE, s.addr, 8, s.lkey);
        }
    } else if f & IBV_SEND_INLINE == 0 {
        if nsge > q.max_send_sge {
            return libc::EINVAL;
        }
        let mut total = 0u64;
        for i in 0..nsge as usize {
            // SAFETY: libibverbs' contract: sg_list holds num_sge entries; i < max_send_sge
            // SGEs fit the slot (the stride was sized for them).
            unsafe {
                let s = &*w.sg_list.add(i);
                fast::write_sge(slot, fast::SQ_HDR + i * fast::SGE, s.addr, s.length, s.lkey);
                total += s.length as u64;
            }
        }
        if total > 1 << 31 {
            return libc::EINVAL;
        }
        h.num_sge = nsge as u8;
        h.length = total as u32;
    } else {
        if opcode == fast::OP_READ || nsge > q.max_send_sge.max(q.max_inline) {
            return libc::EINVAL;
        }
        let mut off = 0usize;
        for i in 0..nsge as usize {
            // SAFETY: libibverbs' contract: sg_list holds num_sge entries.
            let s = unsafe { &*w.sg_list.add(i) };
            let l = s.length as usize;
            if off + l > q.max_inline as usize {
                return libc::EINVAL;
            }
            // SAFETY: the WR's contract: addr..addr+length is readable (inline data need not
            // be registered); the slot holds SQ_HDR + max_inline bytes (the stride was sized
            // for it when the QP was created).
            unsafe { std::ptr::copy_nonoverlapping(s.addr as *const u8, slot.add(fast::SQ_HDR + off), l) };
            off += l;
        }
        h.flags |= fast::F_INLINE;
        h.length = off as u32;
    }
    // SAFETY: a free slot of the send ring.
    unsafe { fast::write_send_hdr(slot, &h) };
    p.commit();
    0
}

/// `ibv_post_send`.
///
/// # Safety
/// `qp` came from `hm_rs_create_qp`; `wr` is a valid list; `bad` is valid.
#[no_mangle]
pub unsafe extern "C" fn hm_rs_post_send(qp: *mut c_void, mut wr: *mut IbvSendWr, bad: *mut *mut IbvSendWr) -> c_int {
    // SAFETY: the caller's guarantee.
    let q = unsafe { &*(qp as *const RsQp) };
    // (an error of the doorbell itself, the device gone, leaves the whole list unposted)
    // SAFETY: the caller's guarantee.
    unsafe { *bad = wr };
    let mut p = q.sh.nic.sq_post(&q.qp);
    if p.fatal() {
        // the device has failed for good (IBV_EVENT_DEVICE_FATAL): nothing is posted
        return libc::EIO;
    }
    while !wr.is_null() {
        // SAFETY: the caller's guarantee.
        let w = unsafe { &*wr };
        let r = post_one(&mut p, q, w);
        if r != 0 {
            // SAFETY: the caller's guarantee.
            unsafe { *bad = wr };
            p.finish_errno(); // rings the doorbell for the WRs before this one
            return r;
        }
        wr = w.next;
    }
    p.finish_errno()
}

/// `ibv_post_recv` (zero-SGE receives are allowed: they take messages without payload, such
/// as RDMA WRITE with immediate).
///
/// # Safety
/// `qp` came from `hm_rs_create_qp`; `wr` is a valid list; `bad` is valid.
#[no_mangle]
pub unsafe extern "C" fn hm_rs_post_recv(qp: *mut c_void, mut wr: *mut IbvRecvWr, bad: *mut *mut IbvRecvWr) -> c_int {
    // SAFETY: the caller's guarantee.
    let q = unsafe { &*(qp as *const RsQp) };
    // (an error of the doorbell itself, the device gone, leaves the whole list unposted)
    // SAFETY: the caller's guarantee.
    unsafe { *bad = wr };
    let mut p = q.sh.nic.rq_post(&q.qp);
    if p.fatal() {
        // the device has failed for good (IBV_EVENT_DEVICE_FATAL): nothing is posted
        return libc::EIO;
    }
    while !wr.is_null() {
        // SAFETY: the caller's guarantee.
        let w = unsafe { &*wr };
        let n = w.num_sge;
        let r = if n < 0 || n as u32 > q.max_recv_sge {
            libc::EINVAL
        } else if let Some(slot) = p.slot() {
            let sgl: &[IbvSge] = if n == 0 || w.sg_list.is_null() {
                &[]
            } else {
                // SAFETY: libibverbs' contract.
                unsafe { std::slice::from_raw_parts(w.sg_list, n as usize) }
            };
            // SAFETY: a free receive slot sized for max_recv_sge SGEs.
            unsafe {
                fast::write_recv_hdr(slot, w.wr_id, sgl.len() as u8);
                for (i, s) in sgl.iter().enumerate() {
                    fast::write_sge(slot, fast::RQ_HDR + i * fast::SGE, s.addr, s.length, s.lkey);
                }
            }
            p.commit();
            0
        } else {
            libc::ENOMEM
        };
        if r != 0 {
            // SAFETY: the caller's guarantee.
            unsafe { *bad = wr };
            p.finish_errno();
            return r;
        }
        wr = w.next;
    }
    p.finish_errno()
}
