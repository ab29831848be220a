//! The context and the handle types every other file works with: [`Ctx`] (what `hm_rs_open`
//! returns) with what its objects share, and the PD, MR, CQ and QP handles handed to
//! `shim.c`. Opening the backend named in sysfs, closing, and the device and port queries.

use crate::abi::*;
use crate::{errno_of, warn};
use hostdrv::nic::{Cq, Mr, Pd, Qp};
use hostdrv::simdev::SimDevice;
use hostdrv::{Error, Nic};
use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::os::fd::{OwnedFd, RawFd};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// The device as this process holds it: opened once, by the first context, and shared by
/// every context the process opens on it (`ibv_open_device` as often as the program likes, up
/// to [`MAX_CONTEXTS`]). The last context to close closes it, which resets the function.
pub(crate) struct Dev {
    pub(crate) nic: Nic,
    pub(crate) sim: Option<Arc<SimDevice>>,
    pub(crate) node_guid: u64,
    /// Co-simulation only: an empty poll sleeps briefly (`HM_POLL_BACKOFF_US`, default 50 µs),
    /// so that programs that spin on `ibv_poll_cq` leave the CPU to the simulated device
    /// (which runs ~1000x slower than hardware; 50 µs is a handful of simulated cycles).
    pub(crate) poll_backoff: Option<std::time::Duration>,
    /// The backend (`hematite_backend`'s text): the key under which [`DEVICES`] finds it.
    spec: String,
    /// The process that opened it. A child made by `fork` inherits the parent's list but not
    /// its device: its own open opens the device again (and gets EBUSY where the parent
    /// holds a simulated NIC, as a second process does).
    pid: u32,
    /// The contexts open on the device. The event thread serves them while holding this
    /// lock, so a context removed from it gets no event afterwards (its pipes may close).
    pub(crate) ctxs: Mutex<Vec<Arc<Shared>>>,
    /// The device's event thread and the write end of its stop pipe, while contexts are open.
    pub(crate) events: Mutex<Option<(JoinHandle<()>, OwnedFd)>>,
}

/// Contexts one process may have open on one device at a time (each costs an async pipe and
/// a little of the event thread's work); one more fails with ENOMEM, as when a NIC has no
/// free doorbell page for a context.
pub(crate) const MAX_CONTEXTS: usize = 256;

/// The devices this process has open, by backend. An entry whose device has gone (every
/// context closed) no longer upgrades.
static DEVICES: Mutex<Vec<std::sync::Weak<Dev>>> = Mutex::new(Vec::new());

/// One context and what its objects share: the device, the maps the event thread needs to
/// send an event to this context, and the objects the program has not destroyed.
pub(crate) struct Shared {
    pub(crate) dev: Arc<Dev>,
    /// CQs with a completion channel (the event thread watches them).
    pub(crate) cqs: Mutex<Vec<Arc<RsCq>>>,
    /// QP number -> `struct ibv_qp *`, for asynchronous events.
    pub(crate) qps: Mutex<HashMap<u32, usize>>,
    /// CQ number -> `struct ibv_cq *`, for asynchronous events.
    pub(crate) cq_ptrs: Mutex<HashMap<u32, usize>>,
    /// Where this context's asynchronous events go, once `hm_rs_start_events` gave its pipe.
    pub(crate) async_out: Mutex<Option<crate::events::AsyncOut>>,
    /// The objects made through this context and not destroyed yet: closing the context
    /// destroys them, as the kernel does for a user context.
    pub(crate) live: Mutex<Live>,
}

impl std::ops::Deref for Shared {
    type Target = Dev;
    fn deref(&self) -> &Dev {
        &self.dev
    }
}

/// The handles (`Box` / `Arc` raw pointers) of a context's live objects.
#[derive(Default)]
pub(crate) struct Live {
    pub(crate) pds: std::collections::HashSet<usize>,
    pub(crate) mrs: std::collections::HashSet<usize>,
    pub(crate) cqs: std::collections::HashSet<usize>,
    pub(crate) qps: std::collections::HashSet<usize>,
}

/// The context: what `hm_rs_open` returns.
pub struct Ctx {
    pub(crate) sh: Arc<Shared>,
}

pub struct RsPd {
    pub(crate) pd: Pd,
}

pub struct RsMr {
    pub(crate) mr: Mr,
    /// What it was registered with (the access flags and the PD): `ibv_rereg_mr` keeps what
    /// it is not asked to change.
    pub(crate) access: u32,
    pub(crate) pd: Pd,
}

pub struct RsCq {
    pub(crate) sh: Arc<Shared>,
    pub(crate) cq: Cq,
    pub(crate) ibcq: usize,
    pub(crate) chan_wfd: RawFd,
    pub(crate) armed: AtomicBool,
}

pub struct RsQp {
    pub(crate) sh: Arc<Shared>,
    pub(crate) qp: Qp,
    /// `F_SIGNALED` when the QP signals every WR (sq_sig_all), else 0.
    pub(crate) sig_flag: u8,
    pub(crate) max_inline: u32,
    pub(crate) max_send_sge: u32,
    pub(crate) max_recv_sge: u32,
    /// The send operations of its type (`fastpath::wr_ops`).
    pub(crate) wr_op: &'static crate::fastpath::WrOps,
}

/// Reads a small text file.
pub(crate) fn read_text(path: &std::path::Path) -> Option<String> {
    std::fs::read_to_string(path).ok().map(|s| s.trim().to_string())
}

fn parse_guid(s: &str) -> Option<u64> {
    let hex: String = s.chars().filter(|c| *c != ':').collect();
    if hex.len() != 16 {
        return None;
    }
    u64::from_str_radix(&hex, 16).ok()
}

/// The card's port addresses, from configuration (a card has no address register): the part
/// of `vfio:<BDF>[,mac=XX:XX:XX:XX:XX:XX][,ipv4=A.B.C.D]` after `vfio:` (what `hematite-run
/// --cards` writes). Returns the BDF, the MAC and the IPv4 address (host order).
pub(crate) fn parse_vfio_spec(s: &str) -> Result<(&str, Option<u64>, Option<u32>), String> {
    let mut it = s.split(',');
    let bdf = it.next().filter(|b| !b.is_empty()).ok_or("vfio: names no PCI function")?;
    let (mut mac, mut ip) = (None, None);
    for kv in it {
        match kv.split_once('=') {
            Some(("mac", v)) if mac.is_none() => {
                let p: Vec<&str> = v.split(':').collect();
                let ok = p.len() == 6 && p.iter().all(|b| b.len() == 2 && b.bytes().all(|c| c.is_ascii_hexdigit()));
                if !ok {
                    return Err(format!("`{v}` is not a MAC address"));
                }
                mac = Some(u64::from_str_radix(&p.concat(), 16).map_err(|e| e.to_string())?);
            }
            Some(("ipv4", v)) if ip.is_none() => {
                let a: std::net::Ipv4Addr = v.parse().map_err(|_| format!("`{v}` is not an IPv4 address"))?;
                ip = Some(u32::from(a));
            }
            _ => return Err(format!("`{kv}`: expected mac=.. and ipv4=.., once each")),
        }
    }
    if ip.is_some() && mac.is_none() {
        return Err("ipv4= without mac=: the GID needs both".into());
    }
    Ok((bdf, mac, ip))
}

/// Opens the device `spec` names (the text of `hematite_backend` in `dir`).
fn open_dev(dir: &std::path::Path, file: &std::path::Path, spec: String) -> Result<Dev, c_int> {
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
    } else if let Some(rest) = spec.strip_prefix("vfio:") {
        let (bdf, mac, ipv4) = parse_vfio_spec(rest).map_err(|e| {
            warn(format_args!("{}: {e}", file.display()));
            libc::EINVAL
        })?;
        let dev = hostdrv::vfio::VfioDevice::open(bdf).map_err(|e| {
            warn(format_args!("opening the PCI function {bdf} through VFIO: {e}"));
            errno_of(&e)
        })?;
        let dev = dev.with_addresses(mac, ipv4);
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
    Ok(Dev {
        nic,
        sim,
        node_guid,
        poll_backoff: if is_sim {
            let us = std::env::var("HM_POLL_BACKOFF_US").ok().and_then(|v| v.parse().ok()).unwrap_or(50u64);
            (us > 0).then(|| std::time::Duration::from_micros(us))
        } else {
            None
        },
        spec,
        pid: std::process::id(),
        ctxs: Mutex::new(Vec::new()),
        events: Mutex::new(None),
    })
}

/// A new context on the device behind `ibdev_path`: the process's open device when it has one
/// for the same backend, else the device opened now.
fn open_backend(ibdev_path: &str) -> Result<Ctx, c_int> {
    let dir = std::path::Path::new(ibdev_path);
    let file = dir.join("hematite_backend");
    let Some(spec) = read_text(&file) else {
        warn(format_args!("{} is missing: the device tree was not made by hematite-run (or the deployment's generator)", file.display()));
        return Err(libc::ENODEV);
    };
    // held while opening, so that two threads opening the same device share one, and while
    // the last context closes (hm_rs_close), so that a new open never races the old close
    let mut devs = DEVICES.lock().unwrap_or_else(|e| e.into_inner());
    devs.retain(|w| w.upgrade().is_some_and(|d| d.pid == std::process::id()));
    let me = std::process::id();
    let dev = match devs.iter().filter_map(|w| w.upgrade()).find(|d| d.spec == spec && d.pid == me) {
        Some(d) => d,
        None => {
            let d = Arc::new(open_dev(dir, &file, spec)?);
            devs.push(Arc::downgrade(&d));
            d
        }
    };
    let mut ctxs = dev.ctxs.lock().unwrap_or_else(|e| e.into_inner());
    if ctxs.len() >= MAX_CONTEXTS {
        warn(format_args!("{MAX_CONTEXTS} contexts are open on this device in this process: no more"));
        return Err(libc::ENOMEM);
    }
    let sh = Arc::new(Shared {
        dev: dev.clone(),
        cqs: Mutex::new(Vec::new()),
        qps: Mutex::new(HashMap::new()),
        cq_ptrs: Mutex::new(HashMap::new()),
        async_out: Mutex::new(None),
        live: Mutex::new(Live::default()),
    });
    ctxs.push(sh.clone());
    Ok(Ctx { sh })
}

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

/// Closes a context: destroys the objects the program left (QPs, then MRs, CQs and PDs), stops
/// its events, and, for the last context of the device, stops the event thread and closes
/// the device (the device resets, freeing everything).
///
/// # Safety
/// `ctx` came from `hm_rs_open` and is not used afterwards, nor are its objects.
#[no_mangle]
pub unsafe extern "C" fn hm_rs_close(ctx: *mut c_void) {
    if ctx.is_null() {
        return;
    }
    // SAFETY: the caller's guarantee.
    let ctx = unsafe { Box::from_raw(ctx as *mut Ctx) };
    let sh = ctx.sh;
    let devs = DEVICES.lock().unwrap_or_else(|e| e.into_inner());
    // out of the event thread's list first: from here on it sends this context nothing
    let last = {
        let mut ctxs = sh.dev.ctxs.lock().unwrap_or_else(|e| e.into_inner());
        ctxs.retain(|c| !Arc::ptr_eq(c, &sh));
        ctxs.is_empty()
    };
    *sh.async_out.lock().unwrap_or_else(|e| e.into_inner()) = None;
    sh.cqs.lock().unwrap_or_else(|e| e.into_inner()).clear();
    let live = std::mem::take(&mut *sh.live.lock().unwrap_or_else(|e| e.into_inner()));
    // SAFETY (all four): each pointer is a live handle this context made (registered at
    // creation, removed at destruction); the caller does not use them again. Dropping the
    // last handle of an object destroys it on the device.
    for q in live.qps {
        drop(unsafe { Box::from_raw(q as *mut RsQp) });
    }
    for m in live.mrs {
        drop(unsafe { Box::from_raw(m as *mut RsMr) });
    }
    for c in live.cqs {
        drop(unsafe { Arc::from_raw(c as *const RsCq) });
    }
    for p in live.pds {
        drop(unsafe { Box::from_raw(p as *mut RsPd) });
    }
    if last {
        if let Some((h, stop)) = sh.dev.events.lock().unwrap_or_else(|e| e.into_inner()).take() {
            drop(stop); // the thread sees the pipe's write end close
            let _ = h.join();
        }
    }
    // the last handle on the device (when this was its last context) goes here, under the
    // lock, so that an open in another thread finds either this device or none
    drop(sh);
    drop(devs);
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

#[cfg(test)]
mod tests {
    use super::parse_vfio_spec;

    #[test]
    fn vfio_spec() {
        assert_eq!(parse_vfio_spec("0000:03:00.0"), Ok(("0000:03:00.0", None, None)));
        assert_eq!(
            parse_vfio_spec("0000:03:00.0,mac=02:48:4d:01:00:01,ipv4=10.1.0.1"),
            Ok(("0000:03:00.0", Some(0x0248_4d01_0001), Some(0x0a01_0001)))
        );
        assert_eq!(parse_vfio_spec("03:00.1,mac=02:48:4D:01:00:0a"), Ok(("03:00.1", Some(0x0248_4d01_000a), None)));
        for bad in [
            "",
            ",mac=02:48:4d:01:00:01",
            "0000:03:00.0,mac=02:48:4d:01:00",
            "0000:03:00.0,mac=zz:48:4d:01:00:01",
            "0000:03:00.0,mac=02:48:4d:01:00:01,ipv4=10.1.0",
            "0000:03:00.0,ipv4=10.1.0.1",
            "0000:03:00.0,speed=100",
            "0000:03:00.0,mac=02:48:4d:01:00:01,mac=02:48:4d:01:00:02",
            "0000:03:00.0,mac=+2:48:4d:01:00:01",
        ] {
            assert!(parse_vfio_spec(bad).is_err(), "{bad}");
        }
    }
}
