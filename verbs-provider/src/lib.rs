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
//! A process opens each device once; every context it opens on the device shares it (up to
//! 256, `context.rs`). A background thread per device turns device interrupts into
//! completion-channel events (an armed CQ writes its `ibv_cq` pointer into the channel's pipe,
//! which is what `ibv_get_cq_event` reads) and event-queue entries into libibverbs'
//! asynchronous events (16-byte records on the async pipe of the context that owns the
//! object).
//!
//! Every exported function is `extern "C"`, called by `shim.c` with handles this library
//! created; none may unwind (the crate is built with `panic = "abort"` semantics through
//! `catch_unwind`-free code: nothing on these paths panics on caller input).
//!
//! The files, one role each: `context.rs` (the context and the handle types: opening the
//! backend, device and port queries), `events.rs` (the event thread), `mr.rs` (PDs and MRs),
//! `cq.rs` (creating, destroying and arming CQs), `qp.rs` (creating, modifying, querying and
//! destroying QPs), `fastpath.rs` (posting and polling), `ext.rs` (Hematite's extensions and
//! the exported completion-channel verbs) and `abi.rs` (the C structures the Rust core
//! touches: libibverbs' fast-path structures and those of `shim.h`).

use hostdrv::Error;
use std::ffi::c_int;

#[allow(dead_code)] // the ABI's constants are listed whole
mod abi;
mod context;
mod cq;
mod events;
mod ext;
mod fastpath;
mod mr;
mod qp;

fn warn(msg: std::fmt::Arguments) {
    eprintln!("hematite: {msg}");
}

fn errno_of(e: &Error) -> c_int {
    e.errno()
}

/// The C status of a driver call that returns nothing: 0 or its errno.
fn status(r: Result<(), Error>) -> c_int {
    r.err().map_or(0, |e| errno_of(&e))
}
