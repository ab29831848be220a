//! The fast path's descriptor access: send / receive WQEs written straight into their ring slot
//! and CQEs read straight from the ring, with no allocation and no per-field name lookup.
//!
//! The byte offsets are not written here: they are computed at compile time from the field
//! tables that `hematite_model::desc` generates from `rtl/pkg/hm_desc_pkg.sv`, so the layouts
//! keep one source of truth. A field that is not byte aligned, or not 8/16/32/64 bits wide,
//! fails the build. The tests check every writer against the model's reference encoder.

use hematite_model::desc::{
    self, Layout, HM_ATOMIC_ARGS_T_FIELDS, HM_CQE_T_FIELDS, HM_RQ_WQE_HDR_T_FIELDS, HM_SGE_T_FIELDS,
    HM_SQ_WQE_HDR_T_FIELDS,
};

use hematite_abi::desc::str_eq;

/// Byte offset of `name` in `fields`; `width` is the width the fast path stores it with.
const fn off(fields: Layout, name: &str, width: usize) -> usize {
    let mut i = 0;
    while i < fields.len() {
        if str_eq(fields[i].0, name) {
            assert!(fields[i].1 % 8 == 0, "field not byte aligned");
            assert!(fields[i].2 == width, "field width differs from the fast path's");
            return fields[i].1 / 8;
        }
        i += 1;
    }
    panic!("field missing from the layout");
}

// Send WQE header.
const S_OPCODE: usize = off(HM_SQ_WQE_HDR_T_FIELDS, "opcode", 8);
const S_FLAGS: usize = off(HM_SQ_WQE_HDR_T_FIELDS, "flags", 8);
const S_NUM_SGE: usize = off(HM_SQ_WQE_HDR_T_FIELDS, "num_sge", 8);
const S_RSVD: usize = off(HM_SQ_WQE_HDR_T_FIELDS, "rsvd", 8);
const S_IMM: usize = off(HM_SQ_WQE_HDR_T_FIELDS, "imm", 32);
const S_WR_ID: usize = off(HM_SQ_WQE_HDR_T_FIELDS, "wr_id", 64);
const S_RADDR: usize = off(HM_SQ_WQE_HDR_T_FIELDS, "remote_addr", 64);
const S_RKEY: usize = off(HM_SQ_WQE_HDR_T_FIELDS, "rkey", 32);
const S_LENGTH: usize = off(HM_SQ_WQE_HDR_T_FIELDS, "length", 32);
// Atomic operands, after the header.
const A_COMPARE: usize = desc::SQ_HDR_BYTES + off(HM_ATOMIC_ARGS_T_FIELDS, "compare", 64);
const A_SWAP_ADD: usize = desc::SQ_HDR_BYTES + off(HM_ATOMIC_ARGS_T_FIELDS, "swap_add", 64);
// SGE.
const G_ADDR: usize = off(HM_SGE_T_FIELDS, "addr", 64);
const G_LEN: usize = off(HM_SGE_T_FIELDS, "len", 32);
const G_LKEY: usize = off(HM_SGE_T_FIELDS, "lkey", 32);
// Receive WQE header (its reserved bytes are the rest of the 16).
const R_WR_ID: usize = off(HM_RQ_WQE_HDR_T_FIELDS, "wr_id", 64);
const R_NUM_SGE: usize = off(HM_RQ_WQE_HDR_T_FIELDS, "num_sge", 8);
// CQE.
const C_WR_ID: usize = off(HM_CQE_T_FIELDS, "wr_id", 64);
const C_BYTE_LEN: usize = off(HM_CQE_T_FIELDS, "byte_len", 32);
const C_IMM: usize = off(HM_CQE_T_FIELDS, "imm", 32);
const C_QPN: usize = off(HM_CQE_T_FIELDS, "qpn", 32);
const C_OPCODE: usize = off(HM_CQE_T_FIELDS, "opcode", 8);
const C_STATUS: usize = off(HM_CQE_T_FIELDS, "status", 8);
const C_WQE_INDEX: usize = off(HM_CQE_T_FIELDS, "wqe_index", 16);
const C_FLAGS: usize = off(HM_CQE_T_FIELDS, "flags", 8);

const _: () = {
    // the header is written as four 8-byte words: every field must sit in those 32 bytes
    assert!(desc::SQ_HDR_BYTES == 32 && desc::RQ_HDR_BYTES == 16 && desc::SGE_BYTES == 16);
    assert!(S_RSVD < 32 && S_LENGTH + 4 <= 32 && S_RKEY + 4 <= 32 && S_RADDR + 8 <= 32);
    assert!(R_NUM_SGE < 16 && R_WR_ID + 8 <= 16);
    assert!(desc::CQE_BYTES == 32 && C_FLAGS == 31);
};

/// Send WQE opcodes (`HM_WQE_OP_*`).
pub use desc::{
    HM_WQE_OP_CMP_SWAP as OP_CMP_SWAP, HM_WQE_OP_FETCH_ADD as OP_FETCH_ADD, HM_WQE_OP_READ as OP_READ,
    HM_WQE_OP_SEND as OP_SEND, HM_WQE_OP_SEND_IMM as OP_SEND_IMM, HM_WQE_OP_SEND_INV as OP_SEND_INV,
    HM_WQE_OP_WRITE as OP_WRITE, HM_WQE_OP_WRITE_IMM as OP_WRITE_IMM,
};
/// Send WQE flags (`HM_WQE_F_*`).
pub use desc::{
    HM_WQE_F_FENCE as F_FENCE, HM_WQE_F_INLINE as F_INLINE, HM_WQE_F_SIGNALED as F_SIGNALED,
    HM_WQE_F_SOLICITED as F_SOLICITED,
};
/// CQE opcodes, status codes and flags (`HM_CQE_*`).
pub use desc::{
    HM_CQE_F_IMM as CQE_F_IMM, HM_CQE_F_INV as CQE_F_INV, HM_CQE_F_OWNER as CQE_F_OWNER, HM_CQE_F_RQ as CQE_F_RQ,
    HM_CQE_OP_CMP_SWAP as CQE_OP_CMP_SWAP, HM_CQE_OP_FETCH_ADD as CQE_OP_FETCH_ADD,
    HM_CQE_OP_RDMA_READ as CQE_OP_RDMA_READ, HM_CQE_OP_RDMA_WRITE as CQE_OP_RDMA_WRITE, HM_CQE_OP_RECV as CQE_OP_RECV,
    HM_CQE_OP_RECV_RDMA_IMM as CQE_OP_RECV_RDMA_IMM, HM_CQE_OP_SEND as CQE_OP_SEND,
};

/// Bytes after the send header: SGEs, inline data, or atomic operands + one SGE.
pub const SQ_HDR: usize = desc::SQ_HDR_BYTES;
/// Bytes of the receive header.
pub const RQ_HDR: usize = desc::RQ_HDR_BYTES;
/// Bytes of an SGE.
pub const SGE: usize = desc::SGE_BYTES;
/// Where an atomic's SGE goes.
pub const ATOMIC_SGE: usize = desc::SQ_HDR_BYTES + desc::ATOMIC_ARGS_BYTES;

/// The header fields of a send WQE.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SendHdr {
    pub opcode: u8,
    pub flags: u8,
    pub num_sge: u8,
    /// Stored as given: immediate data in wire byte order (the big-endian value's bytes), or a
    /// little-endian R_Key for SEND_INV.
    pub imm_field: u32,
    pub wr_id: u64,
    pub remote_addr: u64,
    pub rkey: u32,
    pub length: u32,
}

#[inline(always)]
unsafe fn w8(p: *mut u8, o: usize, v: u8) {
    // SAFETY (all writers): the caller guarantees p..p+slot is a writable slot.
    unsafe { std::ptr::write_volatile(p.add(o), v) }
}
#[inline(always)]
unsafe fn w32(p: *mut u8, o: usize, v: u32) {
    unsafe { std::ptr::write_unaligned(p.add(o) as *mut u32, v.to_le()) }
}
#[inline(always)]
unsafe fn w64(p: *mut u8, o: usize, v: u64) {
    unsafe { std::ptr::write_unaligned(p.add(o) as *mut u64, v.to_le()) }
}
#[inline(always)]
unsafe fn r32(p: *const u8, o: usize) -> u32 {
    unsafe { u32::from_le(std::ptr::read_unaligned(p.add(o) as *const u32)) }
}
#[inline(always)]
unsafe fn r64(p: *const u8, o: usize) -> u64 {
    unsafe { u64::from_le(std::ptr::read_unaligned(p.add(o) as *const u64)) }
}

/// `v` shifted into its place in the header's 8-byte word `off / 8` (`off` a field offset,
/// constant after inlining, so this folds to one shift).
#[inline(always)]
const fn at(off: usize, v: u64) -> u64 {
    v << ((off % 8) * 8)
}

const _: () = {
    // every header field lies inside one 8-byte word (the header is stored as four words)
    assert!(S_OPCODE / 8 == 0 && S_FLAGS / 8 == 0 && S_NUM_SGE / 8 == 0 && S_RSVD / 8 == 0 && S_IMM / 8 == 0);
    assert!(S_IMM % 8 <= 4 && S_WR_ID == 8 && S_RADDR == 16 && S_RKEY / 8 == 3 && S_LENGTH / 8 == 3);
    assert!(S_RKEY % 8 <= 4 && S_LENGTH % 8 <= 4);
};

/// Writes a send WQE header at `slot` (four 8-byte stores; the reserved byte is zero).
///
/// # Safety
/// `slot` points to a writable, 8-byte aligned WQE slot of at least 32 bytes that the device is
/// not reading.
#[inline(always)]
pub unsafe fn write_send_hdr(slot: *mut u8, h: &SendHdr) {
    let w0 = at(S_OPCODE, h.opcode as u64) | at(S_FLAGS, h.flags as u64) | at(S_NUM_SGE, h.num_sge as u64) | at(S_IMM, h.imm_field as u64);
    let w3 = at(S_RKEY, h.rkey as u64) | at(S_LENGTH, h.length as u64);
    // SAFETY: the caller's guarantee.
    unsafe {
        w64(slot, 0, w0);
        w64(slot, S_WR_ID, h.wr_id);
        w64(slot, S_RADDR, h.remote_addr);
        w64(slot, 24, w3);
    }
}

/// Writes an SGE at byte `at` of a slot.
///
/// # Safety
/// `slot + at .. + 16` is writable slot memory.
#[inline(always)]
pub unsafe fn write_sge(slot: *mut u8, at: usize, addr: u64, len: u32, lkey: u32) {
    // SAFETY: the caller's guarantee.
    unsafe {
        w64(slot, at + G_ADDR, addr);
        w32(slot, at + G_LEN, len);
        w32(slot, at + G_LKEY, lkey);
    }
}

/// Writes an atomic's operands (after the header).
///
/// # Safety
/// `slot` is a writable slot of at least 64 bytes.
#[inline(always)]
pub unsafe fn write_atomic_args(slot: *mut u8, compare: u64, swap_add: u64) {
    // SAFETY: the caller's guarantee.
    unsafe {
        w64(slot, A_COMPARE, compare);
        w64(slot, A_SWAP_ADD, swap_add);
    }
}

/// Writes a receive WQE header (wr_id, SGE count, zeroed reserved bytes).
///
/// # Safety
/// `slot` is a writable slot of at least 16 bytes.
#[inline(always)]
pub unsafe fn write_recv_hdr(slot: *mut u8, wr_id: u64, num_sge: u8) {
    // SAFETY: the caller's guarantee; the two 8-byte words are the whole header.
    unsafe {
        w64(slot, 8, 0);
        w64(slot, R_WR_ID, wr_id);
        w8(slot, R_NUM_SGE, num_sge);
    }
}

/// The `wr_id` and WQE opcode of the send WQE at `slot` (for completions the driver makes
/// itself: the flushes after a fatal device error).
///
/// # Safety
/// `slot` points to a send WQE slot of at least 32 bytes.
#[inline]
pub unsafe fn read_send_wr_id_op(slot: *const u8) -> (u64, u8) {
    // SAFETY: the caller's guarantee.
    unsafe { (r64(slot, S_WR_ID), *slot.add(S_OPCODE)) }
}

/// Whether the send WQE whose slot starts with `w` may go through the MMIO path: the fast
/// twin of `desc::wqe_fits_push` (the tests compare the two).
#[inline]
pub fn wqe_fits_push(w: &[u8; desc::PUSH_BYTES]) -> bool {
    let (op, flags, nsge) = (w[S_OPCODE], w[S_FLAGS], w[S_NUM_SGE] as usize);
    let len = u32::from_le_bytes([w[S_LENGTH], w[S_LENGTH + 1], w[S_LENGTH + 2], w[S_LENGTH + 3]]) as usize;
    if flags & desc::HM_WQE_F_INLINE != 0 && matches!(op, OP_SEND | OP_SEND_IMM | OP_SEND_INV | OP_WRITE | OP_WRITE_IMM) {
        len <= desc::PUSH_BYTES - SQ_HDR
    } else if op == OP_CMP_SWAP || op == OP_FETCH_ADD {
        desc::PUSH_BYTES >= 64
    } else {
        nsge <= (desc::PUSH_BYTES - SQ_HDR) / 16
    }
}

/// Byte of a push that carries the low byte of its WQE's index (the header's reserved byte;
/// `desc::push_tagged`).
pub const PUSH_TAG: usize = S_RSVD;

/// The `wr_id` of the receive WQE at `slot`.
///
/// # Safety
/// `slot` points to a receive WQE slot of at least 16 bytes.
#[inline]
pub unsafe fn read_recv_wr_id(slot: *const u8) -> u64 {
    // SAFETY: the caller's guarantee.
    unsafe { r64(slot, R_WR_ID) }
}

/// A CQE as the fast path reads it (raw codes; see [`CqeRaw::from_slot`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CqeRaw {
    pub wr_id: u64,
    pub byte_len: u32,
    /// The `imm` field as stored (immediate data in wire byte order, or an R_Key).
    pub imm_field: u32,
    pub qpn: u32,
    pub opcode: u8,
    pub status: u8,
    pub wqe_index: u16,
    pub flags: u8,
}

impl CqeRaw {
    /// Owner bit of the entry at `slot` (read volatile: the device writes it last).
    ///
    /// # Safety
    /// `slot` points to a 32-byte CQE in a live ring.
    #[inline(always)]
    pub unsafe fn owner(slot: *const u8) -> bool {
        // SAFETY: the caller's guarantee.
        unsafe { std::ptr::read_volatile(slot.add(C_FLAGS)) & CQE_F_OWNER != 0 }
    }

    /// Reads the entry at `slot` (call after [`CqeRaw::owner`] matched and an acquire fence).
    ///
    /// # Safety
    /// `slot` points to a 32-byte CQE in a live ring.
    #[inline(always)]
    pub unsafe fn from_slot(slot: *const u8) -> CqeRaw {
        // SAFETY: the caller's guarantee.
        unsafe {
            CqeRaw {
                wr_id: r64(slot, C_WR_ID),
                byte_len: r32(slot, C_BYTE_LEN),
                imm_field: r32(slot, C_IMM),
                qpn: r32(slot, C_QPN),
                opcode: *slot.add(C_OPCODE),
                status: *slot.add(C_STATUS),
                wqe_index: u16::from_le(std::ptr::read_unaligned(slot.add(C_WQE_INDEX) as *const u16)),
                flags: *slot.add(C_FLAGS),
            }
        }
    }

    /// A receive-queue completion.
    #[inline(always)]
    pub fn is_rq(&self) -> bool {
        self.flags & CQE_F_RQ != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn push_fit_matches_the_model() {
        let mut n = 0;
        for op in 0..9u8 {
            for flags in [0u8, desc::HM_WQE_F_INLINE, desc::HM_WQE_F_SIGNALED | desc::HM_WQE_F_INLINE, desc::HM_WQE_F_SIGNALED] {
                for nsge in 0..5u8 {
                    for len in [0u32, 1, 31, 32, 33, 64, 1 << 20, u32::MAX] {
                        let mut w = [0u8; desc::PUSH_BYTES];
                        w[S_OPCODE] = op;
                        w[S_FLAGS] = flags;
                        w[S_NUM_SGE] = nsge;
                        w[S_LENGTH..S_LENGTH + 4].copy_from_slice(&len.to_le_bytes());
                        assert_eq!(wqe_fits_push(&w), desc::wqe_fits_push(&w), "op {op} flags {flags:#x} num_sge {nsge} length {len}");
                        n += wqe_fits_push(&w) as u32;
                    }
                }
            }
        }
        assert!(n > 0);
    }
    use hematite_model::transport::{Cqe, RecvWr, SendOp, SendWr, Sge, WcOpcode, WcStatus};

    fn hdr_of(wr: &SendWr, inline_len: Option<u32>) -> SendHdr {
        let (opcode, imm, ra, rk) = match wr.op {
            SendOp::Send => (OP_SEND, 0, 0, 0),
            SendOp::SendImm(i) => (OP_SEND_IMM, i.swap_bytes(), 0, 0),
            SendOp::SendInv(k) => (OP_SEND_INV, k, 0, 0),
            SendOp::Write { remote_addr, rkey } => (OP_WRITE, 0, remote_addr, rkey),
            SendOp::WriteImm { remote_addr, rkey, imm } => (OP_WRITE_IMM, imm.swap_bytes(), remote_addr, rkey),
            SendOp::Read { remote_addr, rkey } => (OP_READ, 0, remote_addr, rkey),
            SendOp::CmpSwap { remote_addr, rkey, .. } => (OP_CMP_SWAP, 0, remote_addr, rkey),
            SendOp::FetchAdd { remote_addr, rkey, .. } => (OP_FETCH_ADD, 0, remote_addr, rkey),
        };
        SendHdr {
            opcode,
            flags: desc::send_wqe_flags(wr),
            num_sge: if wr.inline { 0 } else { wr.sgl.len() as u8 },
            imm_field: imm,
            wr_id: wr.wr_id,
            remote_addr: ra,
            rkey: rk,
            length: inline_len.unwrap_or(wr.sgl.iter().map(|s| s.len).sum()),
        }
    }

    /// Tiny deterministic generator (no extra dev-dependency).
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
    }

    #[test]
    fn send_writer_matches_the_reference_encoder() {
        let mut r = Rng(0x9E37_79B9_7F4A_7C15);
        for n in 0..4000 {
            let k = r.next();
            let sgl: Vec<Sge> = (0..(k % 4))
                .map(|_| Sge { addr: r.next(), len: (r.next() % 65536) as u32, lkey: r.next() as u32 })
                .collect();
            let (ra, rk) = (r.next(), r.next() as u32);
            let op = match (k >> 8) % 8 {
                0 => SendOp::Send,
                1 => SendOp::SendImm(r.next() as u32),
                2 => SendOp::SendInv(r.next() as u32),
                3 => SendOp::Write { remote_addr: ra, rkey: rk },
                4 => SendOp::WriteImm { remote_addr: ra, rkey: rk, imm: r.next() as u32 },
                5 => SendOp::Read { remote_addr: ra, rkey: rk },
                6 => SendOp::CmpSwap { remote_addr: ra, rkey: rk, compare: r.next(), swap: r.next() },
                _ => SendOp::FetchAdd { remote_addr: ra, rkey: rk, add: r.next() },
            };
            let atomic = op.is_atomic();
            let sgl = if atomic { vec![Sge { addr: r.next(), len: 8, lkey: 7 }] } else { sgl };
            let inline = !atomic && !op.is_rd_atomic() && (k >> 16) % 4 == 0;
            let wr = SendWr { wr_id: r.next(), op, sgl, signaled: k & 1 << 20 != 0, solicited: k & 1 << 21 != 0, inline };
            let stride = 128;
            let data: Vec<u8> = if inline { (0..(k >> 24) % 90).map(|i| (i as u8) ^ (n as u8)).collect() } else { vec![] };
            let wr = if inline { SendWr { sgl: vec![], ..wr } } else { wr };
            let want = desc::encode_send_wqe(&wr, stride, if inline { Some(&data) } else { None }).unwrap();
            let mut slot = vec![0xA5u8; stride];
            let p = slot.as_mut_ptr();
            // SAFETY: a local buffer of `stride` bytes.
            unsafe {
                write_send_hdr(p, &hdr_of(&wr, if inline { Some(data.len() as u32) } else { None }));
                match wr.op {
                    SendOp::CmpSwap { compare, swap, .. } => write_atomic_args(p, compare, swap),
                    SendOp::FetchAdd { add, .. } => write_atomic_args(p, 0, add),
                    _ => {}
                }
                if atomic {
                    let s = wr.sgl[0];
                    write_sge(p, ATOMIC_SGE, s.addr, s.len, s.lkey);
                } else if inline {
                    std::ptr::copy_nonoverlapping(data.as_ptr(), p.add(SQ_HDR), data.len());
                } else {
                    for (i, s) in wr.sgl.iter().enumerate() {
                        write_sge(p, SQ_HDR + i * SGE, s.addr, s.len, s.lkey);
                    }
                }
            }
            // the bytes the device reads (header + what num_sge / length / atomics cover) agree
            let used = if atomic { ATOMIC_SGE + SGE } else if inline { SQ_HDR + data.len() } else { SQ_HDR + SGE * wr.sgl.len() };
            assert_eq!(slot[..used], want[..used], "WR {n}: {wr:?}");
            let (back, back_inline) = desc::decode_send_wqe(&{
                let mut s = slot.clone();
                s[used..].fill(0);
                s
            })
            .unwrap();
            assert_eq!(back.wr_id, wr.wr_id);
            assert_eq!(back_inline.unwrap_or_default(), data);
        }
    }

    #[test]
    fn recv_writer_and_cqe_reader_match_the_reference() {
        let mut r = Rng(42);
        for _ in 0..2000 {
            let sgl: Vec<Sge> =
                (0..r.next() % 4).map(|_| Sge { addr: r.next(), len: r.next() as u32, lkey: r.next() as u32 }).collect();
            let wr = RecvWr { wr_id: r.next(), sgl };
            let want = desc::encode_recv_wqe(&wr, 64).unwrap();
            let mut slot = vec![0x5Au8; 64];
            let p = slot.as_mut_ptr();
            // SAFETY: a local 64-byte buffer.
            unsafe {
                write_recv_hdr(p, wr.wr_id, wr.sgl.len() as u8);
                for (i, s) in wr.sgl.iter().enumerate() {
                    write_sge(p, RQ_HDR + i * SGE, s.addr, s.len, s.lkey);
                }
            }
            let used = RQ_HDR + SGE * wr.sgl.len();
            assert_eq!(slot[..used], want[..used]);

            let ops = [WcOpcode::Send, WcOpcode::RdmaWrite, WcOpcode::RdmaRead, WcOpcode::CmpSwap, WcOpcode::FetchAdd, WcOpcode::Recv, WcOpcode::RecvRdmaWithImm];
            let sts = [WcStatus::Success, WcStatus::LocLenErr, WcStatus::WrFlushErr, WcStatus::RemAccessErr, WcStatus::RetryExcErr];
            let k = r.next();
            let opcode = ops[(k % 7) as usize];
            let imm = if k & 1 << 8 != 0 { Some(r.next() as u32) } else { None };
            let cqe = Cqe {
                wr_id: r.next(),
                status: sts[((k >> 3) % 5) as usize],
                opcode,
                byte_len: r.next() as u32,
                imm,
                invalidated_rkey: if imm.is_none() && k & 1 << 9 != 0 { Some(r.next() as u32) } else { None },
                qpn: (r.next() as u32) & 0xFF_FFFF,
            };
            let idx = r.next() as u16;
            let owner = k & 1 << 10 != 0;
            let bytes = desc::encode_cqe(&cqe, idx, owner).unwrap();
            // SAFETY: a 32-byte local CQE.
            let (raw, own) = unsafe { (CqeRaw::from_slot(bytes.as_ptr()), CqeRaw::owner(bytes.as_ptr())) };
            assert_eq!(own, owner);
            assert_eq!((raw.wr_id, raw.byte_len, raw.qpn, raw.wqe_index), (cqe.wr_id, cqe.byte_len, cqe.qpn, idx));
            assert_eq!(raw.opcode, desc::wc_opcode_code(cqe.opcode));
            assert_eq!(raw.status, desc::wc_status_code(cqe.status));
            assert_eq!(raw.is_rq(), matches!(opcode, WcOpcode::Recv | WcOpcode::RecvRdmaWithImm));
            if let Some(i) = cqe.imm {
                assert!(raw.flags & CQE_F_IMM != 0);
                assert_eq!(raw.imm_field.swap_bytes(), i);
            }
            if let Some(k) = cqe.invalidated_rkey {
                assert!(raw.flags & CQE_F_INV != 0);
                assert_eq!(raw.imm_field, k);
            }
        }
    }
}
