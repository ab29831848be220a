//! The fast path: `hm_rs_post_send` and `hm_rs_post_recv` write WQEs straight into the ring
//! and `hm_rs_poll_cq` reads CQEs straight out of it, allocating nothing and taking only the
//! queue's own lock.

use crate::abi::*;
use crate::context::{RsCq, RsQp};
use hostdrv::fast::{self, CqeRaw, SendHdr};
use std::ffi::{c_int, c_void};

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

/// Per `ibv_wr_opcode` (0..=9): the WQE opcode, the operation's class (0: not offered,
/// 1: SEND family, 2: RDMA WRITE / READ, 3: atomic) and the mask for the imm / R_Key field.
pub(crate) type WrOps = [(u8, u8, u32); 10];
/// RC's operations.
const WR_OP: WrOps = [
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
/// UC's: SEND and WRITE, with or without immediate (no READ, atomics or SEND with
/// invalidate: EINVAL, as the engine would refuse the WQE).
const WR_OP_UC: WrOps = {
    let mut t = WR_OP;
    t[IBV_WR_RDMA_READ as usize] = (0, 0, 0);
    t[IBV_WR_ATOMIC_CMP_AND_SWP as usize] = (0, 0, 0);
    t[IBV_WR_ATOMIC_FETCH_AND_ADD as usize] = (0, 0, 0);
    t[IBV_WR_SEND_WITH_INV as usize] = (0, 0, 0);
    t
};

/// The send operations of a QP type.
pub(crate) fn wr_ops(t: hematite_abi::qp::QpType) -> &'static WrOps {
    match t {
        hematite_abi::qp::QpType::Rc => &WR_OP,
        hematite_abi::qp::QpType::Uc => &WR_OP_UC,
    }
}
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
    let Some(&(opcode, class, imm_mask)) = q.wr_op.get(w.opcode as usize) else { return libc::EINVAL };
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
pub unsafe extern "C" fn hm_rs_post_send(qp: *mut c_void, wr: *mut IbvSendWr, bad: *mut *mut IbvSendWr) -> c_int {
    // SAFETY: the caller's guarantee.
    let q = unsafe { &*(qp as *const RsQp) };
    // SAFETY: the caller's guarantee.
    unsafe { post_list(q.sh.nic.sq_post(&q.qp), wr, bad, false, |p, w| post_one(p, q, w)) }
}

/// All or nothing (`ibv_wr_complete`): the list is posted whole, or, at the first refused WR,
/// nothing is (`*bad` that WR, its errno returned).
///
/// # Safety
/// `qp` came from `hm_rs_create_qp`; `wr` is a valid list; `bad` is valid.
#[no_mangle]
pub unsafe extern "C" fn hm_rs_post_send_all(qp: *mut c_void, wr: *mut IbvSendWr, bad: *mut *mut IbvSendWr) -> c_int {
    // SAFETY: the caller's guarantee.
    let q = unsafe { &*(qp as *const RsQp) };
    // SAFETY: the caller's guarantee.
    unsafe { post_list(q.sh.nic.sq_post(&q.qp), wr, bad, true, |p, w| post_one(p, q, w)) }
}

/// `ibv_post_recv` (zero-SGE receives are allowed: they take messages without payload, such
/// as RDMA WRITE with immediate).
///
/// # Safety
/// `qp` came from `hm_rs_create_qp`; `wr` is a valid list; `bad` is valid.
#[no_mangle]
pub unsafe extern "C" fn hm_rs_post_recv(qp: *mut c_void, wr: *mut IbvRecvWr, bad: *mut *mut IbvRecvWr) -> c_int {
    // SAFETY: the caller's guarantee.
    let q = unsafe { &*(qp as *const RsQp) };
    // SAFETY: the caller's guarantee.
    unsafe { post_list(q.sh.nic.rq_post(&q.qp), wr, bad, false, |p, w| post_recv_one(p, q, w)) }
}

/// Writes one receive WR into the next slot; 0 or the errno for `*bad_wr`.
#[inline(always)]
fn post_recv_one(p: &mut hostdrv::nic::SqPost<'_>, q: &RsQp, w: &IbvRecvWr) -> c_int {
    let n = w.num_sge;
    if n < 0 || n as u32 > q.max_recv_sge {
        return libc::EINVAL;
    }
    let Some(slot) = p.slot() else { return libc::ENOMEM };
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
}

/// A libibverbs work-request list, linked by `next`.
trait WrList {
    fn next(&self) -> *mut Self;
}

impl WrList for IbvSendWr {
    fn next(&self) -> *mut Self {
        self.next
    }
}

impl WrList for IbvRecvWr {
    fn next(&self) -> *mut Self {
        self.next
    }
}

/// Posts the list `wr` through `p`, `one` writing each WR (0 or its errno). At the first
/// refused WR, `*bad` is that WR, the WRs before it are posted (their doorbell rung), or with
/// `all` none of them is, and its errno is returned. An error of the doorbell itself, the device gone, leaves the whole list
/// unposted (`*bad` the first WR); a device that has failed for good (IBV_EVENT_DEVICE_FATAL)
/// posts nothing: EIO.
///
/// # Safety
/// `wr` is a valid list; `bad` is valid.
#[inline(always)]
unsafe fn post_list<W: WrList>(
    mut p: hostdrv::nic::SqPost<'_>,
    mut wr: *mut W,
    bad: *mut *mut W,
    all: bool,
    mut one: impl FnMut(&mut hostdrv::nic::SqPost<'_>, &W) -> c_int,
) -> c_int {
    // SAFETY: the caller's guarantee.
    unsafe { *bad = wr };
    if p.fatal() {
        return libc::EIO;
    }
    while !wr.is_null() {
        // SAFETY: the caller's guarantee.
        let w = unsafe { &*wr };
        let r = one(&mut p, w);
        if r != 0 {
            // SAFETY: the caller's guarantee.
            unsafe { *bad = wr };
            if all {
                p.abandon();
            } else {
                p.finish_errno(); // rings the doorbell for the WRs before this one
            }
            return r;
        }
        wr = w.next();
    }
    p.finish_errno()
}
