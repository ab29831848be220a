//! Protection domains and memory regions: allocation, registration (with the checks the
//! kernel would make: access flags, mapped memory, RLIMIT_MEMLOCK) and their release.

use crate::context::{read_text, Ctx, RsMr, RsPd};
use crate::{errno_of, status};
use hostdrv::nic::{Mr, Pd};
use std::ffi::{c_int, c_void};

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
                ctx.sh.live.lock().unwrap().pds.insert(*pd as usize);
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
    ctx.sh.live.lock().unwrap().pds.remove(&(pd as usize));
    status(ctx.sh.nic.dealloc_pd(p.pd))
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

/// The checks the kernel makes on access flags; an errno on refusal.
fn check_access(access: u32) -> Result<(), c_int> {
    if access & !ACCESS_KNOWN != 0 {
        // ZERO_BASED, ON_DEMAND, HUGETLB, ... are not offered
        return Err(if access & (0x20 | 0x40 | 0x80) != 0 { libc::EOPNOTSUPP } else { libc::EINVAL });
    }
    // remote write or atomic access needs local write (as the verbs specification says)
    if access & (0x2 | 0x8) != 0 && access & 0x1 == 0 {
        return Err(libc::EINVAL);
    }
    Ok(())
}

/// The checks the kernel makes before it pins `[addr, addr + len)`; an errno on refusal.
fn check_memory(ctx: &Ctx, addr: u64, len: u64) -> Result<(), c_int> {
    if len == 0 || addr.checked_add(len).is_none() {
        return Err(libc::EINVAL);
    }
    // memory that is not mapped cannot be registered (the kernel's ib_umem_get fails to pin
    // it: EFAULT); the simulated device would otherwise take it, and read or write nothing
    if !mapped(addr, len) {
        return Err(libc::EFAULT);
    }
    // RLIMIT_MEMLOCK bounds what is pinned, as the kernel applies it, unless the program has
    // CAP_IPC_LOCK (looked up now: a program may drop it after opening the device)
    if !cap_ipc_lock() {
        let mut rl = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        // SAFETY: a valid rlimit out pointer.
        if unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut rl) } == 0 && rl.rlim_cur != libc::RLIM_INFINITY {
            let pages = (addr + len).div_ceil(4096) - addr / 4096;
            if ctx.sh.nic.pinned_bytes() + pages * 4096 > rl.rlim_cur {
                return Err(libc::ENOMEM);
            }
        }
    }
    Ok(())
}

/// Registers `[addr, addr + len)`, seen by the device at `iova`, with the checks the kernel
/// makes before it pins memory; an errno on refusal.
///
/// # Safety
/// `[addr, addr+len)` is the caller's memory and stays mapped until deregistration.
unsafe fn register(ctx: &Ctx, pd: &Pd, addr: u64, len: u64, iova: u64, access: u32) -> Result<Mr, c_int> {
    if ctx.sh.nic.check_fatal() {
        return Err(libc::EIO);
    }
    check_access(access)?;
    check_memory(ctx, addr, len)?;
    // SAFETY: the memory is the caller's and stays registered until dereg (libibverbs' contract).
    unsafe { ctx.sh.nic.reg_mr_iova(pd, addr, len, iova, access & 0xF) }.map_err(|e| errno_of(&e))
}

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
    // SAFETY: the caller's guarantee.
    match unsafe { register(ctx, &p.pd, addr, len, iova, access) } {
        Ok(m) => {
            // SAFETY: the caller's guarantee.
            unsafe {
                *lkey = m.lkey();
                *rkey = m.rkey();
                let r = RsMr { mr: m, access, pd: p.pd.clone() };
                *mr = Box::into_raw(Box::new(r)) as *mut c_void;
                ctx.sh.live.lock().unwrap().mrs.insert(*mr as usize);
            }
            0
        }
        Err(e) => e,
    }
}

/// `ibv_rereg_mr`'s flags (`IBV_REREG_MR_CHANGE_*`).
const REREG_TRANSLATION: u32 = 1;
const REREG_PD: u32 = 2;
const REREG_ACCESS: u32 = 4;

/// `ibv_rereg_mr`: moves `mr` to new memory (`addr`, `len`: the device then sees it at
/// `addr`), another PD of this context, or other access flags, or any of these together, in
/// place: the keys stay (as on the NICs whose firmware changes an MR in place), so a peer that
/// holds the rkey keeps using it. The checks are `reg_mr`'s; on refusal the MR is left as it
/// was. WRs posted earlier are checked against the MR as it is when the device reaches them.
/// EBUSY while the MR is referenced elsewhere.
///
/// # Safety
/// `ctx`, `mr` came from this library; `pd` is null or came from this library; the out
/// pointers are valid; the new memory is the caller's, as for `hm_rs_reg_mr`.
#[no_mangle]
pub unsafe extern "C" fn hm_rs_rereg_mr(
    ctx: *mut c_void,
    mr: *mut c_void,
    flags: u32,
    pd: *mut c_void,
    addr: u64,
    len: u64,
    access: u32,
    lkey: *mut u32,
    rkey: *mut u32,
) -> c_int {
    // SAFETY: the caller's guarantee.
    let ctx = unsafe { &*(ctx as *const Ctx) };
    // SAFETY: the caller's guarantee (the MR is this library's; no other call uses it now).
    let m = unsafe { &mut *(mr as *mut RsMr) };
    if flags & !(REREG_TRANSLATION | REREG_PD | REREG_ACCESS) != 0 || flags == 0 {
        return libc::EINVAL;
    }
    if ctx.sh.nic.check_fatal() {
        return libc::EIO;
    }
    let new_pd = if flags & REREG_PD != 0 {
        // a PD of this context only (another context's is not this process's to name here)
        if pd.is_null() || !ctx.sh.live.lock().unwrap().pds.contains(&(pd as usize)) {
            return libc::EINVAL;
        }
        // SAFETY: a live PD of this context.
        unsafe { &*(pd as *const RsPd) }.pd.clone()
    } else {
        m.pd.clone()
    };
    // the optional bits (IBV_ACCESS_OPTIONAL_RANGE, 20..29: RELAXED_ORDERING) are hints, which
    // libibverbs strips at reg_mr for a device without them, but passes here: ignored
    let access = if flags & REREG_ACCESS != 0 { access & !0x3FF0_0000 } else { m.access };
    if let Err(e) = check_access(access) {
        return e;
    }
    let mem = if flags & REREG_TRANSLATION != 0 {
        if let Err(e) = check_memory(ctx, addr, len) {
            return e;
        }
        Some((addr, len, addr))
    } else {
        None
    };
    // SAFETY: the caller's guarantee for the new memory.
    if let Err(e) = unsafe { ctx.sh.nic.rereg_mr(&mut m.mr, &new_pd, mem, access & 0xF) } {
        return errno_of(&e);
    }
    m.access = access;
    m.pd = new_pd;
    // SAFETY: the caller's guarantee.
    unsafe {
        *lkey = m.mr.lkey();
        *rkey = m.mr.rkey();
    }
    0
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
    ctx.sh.live.lock().unwrap().mrs.remove(&(mr as usize));
    status(ctx.sh.nic.dereg_mr(m.mr))
}

pub(crate) fn cap_ipc_lock() -> bool {
    let Some(st) = read_text(std::path::Path::new("/proc/self/status")) else { return false };
    st.lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .is_some_and(|caps| caps & (1 << 14) != 0) // CAP_IPC_LOCK
}
