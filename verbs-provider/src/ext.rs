//! Hematite's extensions (not verbs; programs find them with `dlsym`) and the completion-
//! channel verbs this library exports itself, forwarded to `shim.c`.

use crate::context::Ctx;
use crate::errno_of;
use std::ffi::{c_int, c_void};

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
