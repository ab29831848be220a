//! Completion queues: creating, destroying and arming them (polling is in `fastpath.rs`).

use crate::context::{Ctx, RsCq};
use crate::{errno_of, status};
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

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
                ctx.sh.live.lock().unwrap().cqs.insert(*cq as usize);
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
        Ok(rc) => {
            ctx.sh.live.lock().unwrap().cqs.remove(&(cq as usize));
            status(ctx.sh.nic.destroy_cq(rc.cq))
        }
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
    status(c.sh.nic.req_notify_cq(&c.cq, solicited_only != 0))
}
