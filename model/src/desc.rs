//! Descriptor formats shared by the host and the engine: send / receive WQEs and CQEs in host
//! memory, and the QP / CQ / MR context entries and command words of the control bus.
//!
//! The layouts are not written here: hematite-abi's build script generates the constants
//! (`HM_*`) and the field tables (`HM_*_T_BITS`, `HM_*_T_FIELDS`) from `rtl/pkg/hm_desc_pkg.sv`,
//! the single source of truth, and this module re-exports them. The codecs below only look
//! fields up by name, so a layout change in the package needs no change here, and a renamed or
//! removed field fails the tests.
//!
//! Bit numbering: bit `b` of a struct is bit `b % 8` of byte `b / 8` (host-memory descriptors,
//! multi-byte fields are little-endian integers) and, equivalently, bit `b % 32` of the 32-bit
//! control-bus word `b / 32` (contexts). [`get_bits`] / [`set_bits`] work on that little-endian
//! bit array; [`bytes_to_words`] / [`words_to_bytes`] convert between the two views.
//!
//! Conventions this module fixes where the package leaves a choice:
//! * Immediate data (WQE `imm` of SEND_IMM / WRITE_IMM, CQE `imm` with `HM_CQE_F_IMM`) is kept
//!   in wire byte order (bytes 4..7 of the WQE are the ImmDt bytes as sent, as verbs'
//!   `imm_data` is big-endian); the model's `u32` is the numeric value of the big-endian field,
//!   so the stored little-endian field is `imm.swap_bytes()`. R_Keys (SEND_INV, CQE with
//!   `HM_CQE_F_INV`) are plain little-endian integers.
//! * An inline send WQE has `num_sge = 0`, `length` = the inline byte count and the data at
//!   byte 32; its SGL is not stored (decoding yields an empty SGL).
//! * Encoders never truncate: a value that does not fit its field is [`DescError::FieldRange`].
//!   Decoders reject unknown codes and flag bits and non-zero reserved fields.
//!
//! Nothing here panics on any input except [`field`] on a name the layout does not have (a
//! programming error, caught by the tests).

use crate::transport::{
    AddrVec, Cqe, Mr, MrAccess, QpAccess, QpConfig, RecvWr, SendOp, SendWr, Sge, WcOpcode, WcStatus,
    MAX_MSG_LEN,
};
use core::fmt;

// The constants and field tables generated from the package, and `Layout` (hematite-abi).
pub use hematite_abi::desc::*;

/// Bytes of a scatter/gather element (`hm_sge_t`).
pub const SGE_BYTES: usize = HM_SGE_T_BITS / 8;
/// Bytes of the send WQE header (`hm_sq_wqe_hdr_t`); the SGL / inline data / atomic operands
/// start here.
pub const SQ_HDR_BYTES: usize = HM_SQ_WQE_HDR_T_BITS / 8;
/// Bytes of the atomic operands (`hm_atomic_args_t`); the atomic's SGE follows them.
pub const ATOMIC_ARGS_BYTES: usize = HM_ATOMIC_ARGS_T_BITS / 8;
/// Bytes of the receive WQE header (`hm_rq_wqe_hdr_t`); the SGL starts here.
pub const RQ_HDR_BYTES: usize = HM_RQ_WQE_HDR_T_BITS / 8;
/// Bytes of a completion queue entry (`hm_cqe_t`).
pub const CQE_BYTES: usize = HM_CQE_T_BITS / 8;
/// 32-bit words of the control-bus staging window (one context entry).
pub const CTX_WORDS: usize = crate::regs::HM_CTL_STAGE_WORDS as usize;
/// Smallest WQE slot (stride `64 << 0`).
pub const MIN_STRIDE: usize = 64;


const _: () = {
    assert!(HM_SGE_T_BITS % 8 == 0 && HM_SQ_WQE_HDR_T_BITS % 8 == 0);
    assert!(HM_ATOMIC_ARGS_T_BITS % 8 == 0 && HM_RQ_WQE_HDR_T_BITS % 8 == 0);
    assert!(HM_CQE_T_BITS % 8 == 0);
    assert!(SQ_HDR_BYTES + ATOMIC_ARGS_BYTES + SGE_BYTES <= MIN_STRIDE);
    assert!(RQ_HDR_BYTES + SGE_BYTES <= MIN_STRIDE);
    assert!(HM_QP_CTX_T_BITS <= CTX_WORDS * 32);
    assert!(HM_CQ_CTX_T_BITS <= CTX_WORDS * 32);
    assert!(HM_MR_CTX_T_BITS <= CTX_WORDS * 32);
    assert!(HM_CTL_CMD_T_BITS == 32 && HM_CTL_STATUS_T_BITS == 32);
};

/// Why a descriptor could not be encoded or decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DescError {
    /// WQE slot size (or the length of the slice to decode) is not `64 << n` for a `n` the
    /// context's log-stride field can hold.
    BadStride(usize),
    /// Input shorter than the descriptor (`need` / `got` in bytes for byte slices, in words for
    /// word slices).
    ShortBuffer {
        /// Required length.
        need: usize,
        /// Given length.
        got: usize,
    },
    /// More SGEs than fit in the slot after the header.
    TooManySges {
        /// SGEs asked for.
        count: usize,
        /// SGEs that fit.
        max: usize,
    },
    /// Inline data longer than the slot after the header.
    InlineTooLong {
        /// Inline bytes.
        len: usize,
        /// Bytes that fit.
        max: usize,
    },
    /// `wr.inline` and the inline bytes disagree: the flag without bytes or bytes without the
    /// flag, inline on a READ or atomic, or bytes whose length is not the SGL's total length.
    InlineMismatch,
    /// Atomic without exactly one SGE (the count found).
    AtomicSgl(usize),
    /// Message length above 2^31 bytes (the sum found).
    LengthOverflow(u64),
    /// Path MTU (bytes) not one of 256, 512, 1024, 2048, 4096.
    InvalidPmtu(u32),
    /// Value does not fit its field.
    FieldRange {
        /// Field name.
        field: &'static str,
        /// Value given.
        value: u128,
    },
    /// Unknown code (opcode, status, QP state, PMTU code) or flag bits.
    UnknownCode {
        /// Field name.
        field: &'static str,
        /// Value found.
        value: u8,
    },
    /// Fields contradict each other or a reserved field is not zero (the rule broken).
    Inconsistent(&'static str),
}

impl fmt::Display for DescError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DescError::BadStride(s) => write!(f, "WQE stride {s} is not 64 << n"),
            DescError::ShortBuffer { need, got } => write!(f, "descriptor needs {need}, got {got}"),
            DescError::TooManySges { count, max } => write!(f, "{count} SGEs, at most {max} fit"),
            DescError::InlineTooLong { len, max } => write!(f, "{len} inline bytes, at most {max} fit"),
            DescError::InlineMismatch => f.write_str("inline flag and inline data disagree"),
            DescError::AtomicSgl(n) => write!(f, "atomic needs exactly one SGE, got {n}"),
            DescError::LengthOverflow(n) => write!(f, "message length {n} above 2^31"),
            DescError::InvalidPmtu(p) => write!(f, "invalid path MTU {p}"),
            DescError::FieldRange { field, value } => write!(f, "{value:#x} does not fit field {field}"),
            DescError::UnknownCode { field, value } => write!(f, "unknown {field} {value:#x}"),
            DescError::Inconsistent(what) => write!(f, "inconsistent descriptor: {what}"),
        }
    }
}

impl std::error::Error for DescError {}

// ---------------------------------------------------------------------------------------------
// Bit access
// ---------------------------------------------------------------------------------------------

/// Reads `width` bits (at most 128) from bit `lsb` of the little-endian bit array `buf`; bits
/// past the end of `buf` read as zero.
pub fn get_bits(buf: &[u8], lsb: usize, width: usize) -> u128 {
    let mut v = 0u128;
    for i in 0..width.min(128) {
        let Some(b) = lsb.checked_add(i) else { break };
        if let Some(byte) = buf.get(b / 8) {
            v |= u128::from((byte >> (b % 8)) & 1) << i;
        }
    }
    v
}

/// Writes the low `width` bits (at most 128) of `v` at bit `lsb` of the little-endian bit array
/// `buf`; bits past the end of `buf` are dropped, bits of `v` above `width` ignored.
pub fn set_bits(buf: &mut [u8], lsb: usize, width: usize, v: u128) {
    for i in 0..width.min(128) {
        let Some(b) = lsb.checked_add(i) else { break };
        if let Some(byte) = buf.get_mut(b / 8) {
            let m = 1u8 << (b % 8);
            if (v >> i) & 1 == 1 {
                *byte |= m;
            } else {
                *byte &= !m;
            }
        }
    }
}

/// `(lsb, width)` of field `name` of a generated layout.
///
/// # Panics
/// If the layout has no such field (a typo or a field renamed in the SV package).
pub fn field(fields: &[(&str, usize, usize)], name: &str) -> (usize, usize) {
    match fields.iter().find(|f| f.0 == name) {
        Some(&(_, lsb, width)) => (lsb, width),
        None => panic!("descriptor layout has no field `{name}`"),
    }
}

/// Little-endian bytes → 32-bit words (a trailing partial word is zero-extended).
pub fn bytes_to_words(bytes: &[u8]) -> Vec<u32> {
    bytes
        .chunks(4)
        .map(|c| {
            let mut w = [0u8; 4];
            for (d, s) in w.iter_mut().zip(c) {
                *d = *s;
            }
            u32::from_le_bytes(w)
        })
        .collect()
}

/// 32-bit words → little-endian bytes.
pub fn words_to_bytes(words: &[u32]) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}

/// Writes `v` into field `name` of the struct starting at byte `off`.
fn put(buf: &mut [u8], off: usize, fields: Layout, name: &'static str, v: u128) -> Result<(), DescError> {
    let (lsb, w) = field(fields, name);
    if w < 128 && v >> w != 0 {
        return Err(DescError::FieldRange { field: name, value: v });
    }
    set_bits(buf, off * 8 + lsb, w, v);
    Ok(())
}

/// Reads field `name` of the struct starting at byte `off`.
fn get(buf: &[u8], off: usize, fields: Layout, name: &str) -> u128 {
    let (lsb, w) = field(fields, name);
    get_bits(buf, off * 8 + lsb, w)
}

/// `Inconsistent` unless field `name` is zero.
fn reserved(buf: &[u8], off: usize, fields: Layout, name: &str, what: &'static str) -> Result<(), DescError> {
    if get(buf, off, fields, name) != 0 {
        return Err(DescError::Inconsistent(what));
    }
    Ok(())
}

fn need(buf_len: usize, need: usize) -> Result<(), DescError> {
    if buf_len < need {
        return Err(DescError::ShortBuffer { need, got: buf_len });
    }
    Ok(())
}

/// `n` with `stride == 64 << n`, for the `n` a context log-stride field can hold (0..=3).
pub fn log_stride(stride: usize) -> Option<u8> {
    let (_, w) = field(HM_QP_CTX_T_FIELDS, "sq_log_stride");
    (0..(1u8 << w)).find(|&n| MIN_STRIDE.checked_shl(n.into()) == Some(stride))
}

fn check_stride(stride: usize) -> Result<(), DescError> {
    log_stride(stride).map(|_| ()).ok_or(DescError::BadStride(stride))
}

/// Immediate data → the stored field value (wire byte order; see the module docs).
fn imm_to_field(imm: u32) -> u128 {
    u128::from(imm.swap_bytes())
}

/// Stored field value → immediate data.
fn imm_from_field(v: u128) -> u32 {
    (v as u32).swap_bytes()
}

fn put_sge(buf: &mut [u8], off: usize, sge: &Sge) -> Result<(), DescError> {
    put(buf, off, HM_SGE_T_FIELDS, "addr", sge.addr.into())?;
    put(buf, off, HM_SGE_T_FIELDS, "len", sge.len.into())?;
    put(buf, off, HM_SGE_T_FIELDS, "lkey", sge.lkey.into())
}

fn get_sge(buf: &[u8], off: usize) -> Sge {
    Sge {
        addr: get(buf, off, HM_SGE_T_FIELDS, "addr") as u64,
        len: get(buf, off, HM_SGE_T_FIELDS, "len") as u32,
        lkey: get(buf, off, HM_SGE_T_FIELDS, "lkey") as u32,
    }
}

fn sgl_len(sgl: &[Sge]) -> u64 {
    sgl.iter().fold(0u64, |a, s| a.saturating_add(s.len.into()))
}

// ---------------------------------------------------------------------------------------------
// Send WQE
// ---------------------------------------------------------------------------------------------

/// The header flags (`HM_WQE_F_*`) of a send WR: signaled, solicited, inline.
pub fn send_wqe_flags(wr: &SendWr) -> u8 {
    let mut flags = 0u8;
    if wr.signaled {
        flags |= HM_WQE_F_SIGNALED;
    }
    if wr.solicited {
        flags |= HM_WQE_F_SOLICITED;
    }
    if wr.inline {
        flags |= HM_WQE_F_INLINE;
    }
    flags
}

/// Encodes a send WR as one send-queue slot of `stride` bytes (`64 << n`, n in 0..=3).
///
/// `inline` carries the message bytes of an inline WR (`wr.inline`; the caller gathers them
/// from the SGL) and must be `None` otherwise. Layout: header at byte 0, then the SGL (16 bytes
/// per SGE), or the inline data, or for atomics the operands at 32 and the single SGE at 48.
pub fn encode_send_wqe(wr: &SendWr, stride: usize, inline: Option<&[u8]>) -> Result<Vec<u8>, DescError> {
    check_stride(stride)?;
    let total = sgl_len(&wr.sgl);
    if total > MAX_MSG_LEN {
        return Err(DescError::LengthOverflow(total));
    }
    let (opcode, imm, remote_addr, rkey, args) = match wr.op {
        SendOp::Send => (HM_WQE_OP_SEND, 0, 0, 0, None),
        SendOp::SendImm(imm) => (HM_WQE_OP_SEND_IMM, imm_to_field(imm), 0, 0, None),
        SendOp::SendInv(rkey) => (HM_WQE_OP_SEND_INV, rkey.into(), 0, 0, None),
        SendOp::Write { remote_addr, rkey } => (HM_WQE_OP_WRITE, 0, remote_addr, rkey, None),
        SendOp::WriteImm { remote_addr, rkey, imm } => {
            (HM_WQE_OP_WRITE_IMM, imm_to_field(imm), remote_addr, rkey, None)
        }
        SendOp::Read { remote_addr, rkey } => (HM_WQE_OP_READ, 0, remote_addr, rkey, None),
        SendOp::CmpSwap { remote_addr, rkey, compare, swap } => {
            (HM_WQE_OP_CMP_SWAP, 0, remote_addr, rkey, Some((compare, swap)))
        }
        SendOp::FetchAdd { remote_addr, rkey, add } => {
            (HM_WQE_OP_FETCH_ADD, 0, remote_addr, rkey, Some((0, add)))
        }
    };
    let mut buf = vec![0u8; stride];
    let room = stride - SQ_HDR_BYTES;
    let (num_sge, length) = match (wr.inline, inline) {
        (false, None) => {
            if let Some((compare, swap_add)) = args {
                let [sge] = wr.sgl.as_slice() else { return Err(DescError::AtomicSgl(wr.sgl.len())) };
                put(&mut buf, SQ_HDR_BYTES, HM_ATOMIC_ARGS_T_FIELDS, "compare", compare.into())?;
                put(&mut buf, SQ_HDR_BYTES, HM_ATOMIC_ARGS_T_FIELDS, "swap_add", swap_add.into())?;
                put_sge(&mut buf, SQ_HDR_BYTES + ATOMIC_ARGS_BYTES, sge)?;
            } else {
                let max = room / SGE_BYTES;
                if wr.sgl.len() > max {
                    return Err(DescError::TooManySges { count: wr.sgl.len(), max });
                }
                for (i, sge) in wr.sgl.iter().enumerate() {
                    put_sge(&mut buf, SQ_HDR_BYTES + i * SGE_BYTES, sge)?;
                }
            }
            (wr.sgl.len(), total)
        }
        (true, Some(data)) => {
            if wr.op.is_rd_atomic() || (!wr.sgl.is_empty() && data.len() as u64 != total) {
                return Err(DescError::InlineMismatch);
            }
            if data.len() > room {
                return Err(DescError::InlineTooLong { len: data.len(), max: room });
            }
            if let Some(dst) = buf.get_mut(SQ_HDR_BYTES..SQ_HDR_BYTES + data.len()) {
                dst.copy_from_slice(data);
            }
            (0, data.len() as u64)
        }
        _ => return Err(DescError::InlineMismatch),
    };
    let flags = send_wqe_flags(wr);
    let h = HM_SQ_WQE_HDR_T_FIELDS;
    put(&mut buf, 0, h, "opcode", opcode.into())?;
    put(&mut buf, 0, h, "flags", flags.into())?;
    put(&mut buf, 0, h, "num_sge", num_sge as u128)?;
    put(&mut buf, 0, h, "imm", imm)?;
    put(&mut buf, 0, h, "wr_id", wr.wr_id.into())?;
    put(&mut buf, 0, h, "remote_addr", remote_addr.into())?;
    put(&mut buf, 0, h, "rkey", rkey.into())?;
    put(&mut buf, 0, h, "length", length.into())?;
    Ok(buf)
}

/// Bytes of a push: what the MMIO path carries of a send WQE (its slot's first bytes).
pub const PUSH_BYTES: usize = hematite_abi::pkt::HM_PUSH_BYTES as usize;

/// A push as the engine takes it: the slot's first [`PUSH_BYTES`] with the low byte of the
/// WQE's index in the header's reserved byte (zero in the ring), which binds the push to its
/// WQE (rtl/eng/hm_wqe_push.sv).
pub fn push_tagged(w: &[u8], index: u16) -> [u8; PUSH_BYTES] {
    let mut p = [0u8; PUSH_BYTES];
    p.copy_from_slice(&w[..PUSH_BYTES]);
    let (lsb, _) = field(HM_SQ_WQE_HDR_T_FIELDS, "rsvd");
    p[lsb / 8] = index as u8;
    p
}

/// Whether the send WQE whose slot starts with `w` uses nothing beyond its first [`PUSH_BYTES`]
/// bytes, so that it may go through the MMIO path (the engine's rule, rtl/eng/hm_wqe_push.sv):
/// a SEND's or WRITE's inline data up to `PUSH_BYTES - 32` bytes, or SGEs ending within the
/// push (an atomic's operands and SGE end at byte 64). False for a slice shorter than the push.
pub fn wqe_fits_push(w: &[u8]) -> bool {
    if w.len() < PUSH_BYTES {
        return false;
    }
    let h = HM_SQ_WQE_HDR_T_FIELDS;
    let g = |name: &str| get(w, 0, h, name);
    let (opcode, flags, num_sge, length) = (g("opcode") as u8, g("flags") as u8, g("num_sge") as usize, g("length") as usize);
    let inline_op = matches!(opcode, HM_WQE_OP_SEND | HM_WQE_OP_SEND_IMM | HM_WQE_OP_SEND_INV | HM_WQE_OP_WRITE | HM_WQE_OP_WRITE_IMM);
    if flags & HM_WQE_F_INLINE != 0 && inline_op {
        SQ_HDR_BYTES + length <= PUSH_BYTES
    } else if opcode == HM_WQE_OP_CMP_SWAP || opcode == HM_WQE_OP_FETCH_ADD {
        PUSH_BYTES >= 64
    } else {
        SQ_HDR_BYTES + 16 * num_sge <= PUSH_BYTES
    }
}

/// Decodes one send-queue slot (the slice is the whole slot, `64 << n` bytes). Returns the WR
/// and, for an inline WQE, its data (the WR's SGL is then empty).
pub fn decode_send_wqe(buf: &[u8]) -> Result<(SendWr, Option<Vec<u8>>), DescError> {
    check_stride(buf.len())?;
    let h = HM_SQ_WQE_HDR_T_FIELDS;
    let g = |name: &str| get(buf, 0, h, name);
    let opcode = g("opcode") as u8;
    let flags = g("flags") as u8;
    let known = HM_WQE_F_SIGNALED | HM_WQE_F_SOLICITED | HM_WQE_F_INLINE;
    if flags & !known != 0 {
        return Err(DescError::UnknownCode { field: "flags", value: flags });
    }
    reserved(buf, 0, h, "rsvd", "send WQE rsvd is not zero")?;
    let imm = g("imm");
    let remote_addr = g("remote_addr") as u64;
    let rkey = g("rkey") as u32;
    let length = g("length") as u64;
    let num_sge = g("num_sge") as usize;
    let arg = |name: &str| get(buf, SQ_HDR_BYTES, HM_ATOMIC_ARGS_T_FIELDS, name) as u64;
    let op = match opcode {
        HM_WQE_OP_SEND => SendOp::Send,
        HM_WQE_OP_SEND_IMM => SendOp::SendImm(imm_from_field(imm)),
        HM_WQE_OP_SEND_INV => SendOp::SendInv(imm as u32),
        HM_WQE_OP_WRITE => SendOp::Write { remote_addr, rkey },
        HM_WQE_OP_WRITE_IMM => SendOp::WriteImm { remote_addr, rkey, imm: imm_from_field(imm) },
        HM_WQE_OP_READ => SendOp::Read { remote_addr, rkey },
        HM_WQE_OP_CMP_SWAP => {
            SendOp::CmpSwap { remote_addr, rkey, compare: arg("compare"), swap: arg("swap_add") }
        }
        HM_WQE_OP_FETCH_ADD => SendOp::FetchAdd { remote_addr, rkey, add: arg("swap_add") },
        _ => return Err(DescError::UnknownCode { field: "opcode", value: opcode }),
    };
    let inline = flags & HM_WQE_F_INLINE != 0;
    let room = buf.len() - SQ_HDR_BYTES;
    let mut sgl = Vec::new();
    let mut data = None;
    if inline {
        if op.is_rd_atomic() {
            return Err(DescError::InlineMismatch);
        }
        if num_sge != 0 {
            return Err(DescError::Inconsistent("inline send WQE with num_sge != 0"));
        }
        let len = length as usize;
        if len > room {
            return Err(DescError::InlineTooLong { len, max: room });
        }
        data = buf.get(SQ_HDR_BYTES..SQ_HDR_BYTES + len).map(<[u8]>::to_vec);
    } else {
        if op.is_atomic() {
            if num_sge != 1 {
                return Err(DescError::AtomicSgl(num_sge));
            }
            sgl.push(get_sge(buf, SQ_HDR_BYTES + ATOMIC_ARGS_BYTES));
        } else {
            let max = room / SGE_BYTES;
            if num_sge > max {
                return Err(DescError::TooManySges { count: num_sge, max });
            }
            sgl.extend((0..num_sge).map(|i| get_sge(buf, SQ_HDR_BYTES + i * SGE_BYTES)));
        }
        let total = sgl_len(&sgl);
        if total > MAX_MSG_LEN {
            return Err(DescError::LengthOverflow(total));
        }
        if total != length {
            return Err(DescError::Inconsistent("send WQE length is not the SGL total"));
        }
    }
    let wr = SendWr {
        wr_id: g("wr_id") as u64,
        op,
        sgl,
        signaled: flags & HM_WQE_F_SIGNALED != 0,
        solicited: flags & HM_WQE_F_SOLICITED != 0,
        inline,
    };
    Ok((wr, data))
}

// ---------------------------------------------------------------------------------------------
// Receive WQE
// ---------------------------------------------------------------------------------------------

/// Encodes a receive WR as one receive-queue slot of `stride` bytes (`64 << n`): the 16-byte
/// header, then the SGL.
pub fn encode_recv_wqe(wr: &RecvWr, stride: usize) -> Result<Vec<u8>, DescError> {
    check_stride(stride)?;
    let max = (stride - RQ_HDR_BYTES) / SGE_BYTES;
    if wr.sgl.len() > max {
        return Err(DescError::TooManySges { count: wr.sgl.len(), max });
    }
    let mut buf = vec![0u8; stride];
    put(&mut buf, 0, HM_RQ_WQE_HDR_T_FIELDS, "wr_id", wr.wr_id.into())?;
    put(&mut buf, 0, HM_RQ_WQE_HDR_T_FIELDS, "num_sge", wr.sgl.len() as u128)?;
    for (i, sge) in wr.sgl.iter().enumerate() {
        put_sge(&mut buf, RQ_HDR_BYTES + i * SGE_BYTES, sge)?;
    }
    Ok(buf)
}

/// Decodes one receive-queue slot (the slice is the whole slot, `64 << n` bytes).
pub fn decode_recv_wqe(buf: &[u8]) -> Result<RecvWr, DescError> {
    check_stride(buf.len())?;
    reserved(buf, 0, HM_RQ_WQE_HDR_T_FIELDS, "rsvd", "receive WQE rsvd is not zero")?;
    let num_sge = get(buf, 0, HM_RQ_WQE_HDR_T_FIELDS, "num_sge") as usize;
    let max = (buf.len() - RQ_HDR_BYTES) / SGE_BYTES;
    if num_sge > max {
        return Err(DescError::TooManySges { count: num_sge, max });
    }
    Ok(RecvWr {
        wr_id: get(buf, 0, HM_RQ_WQE_HDR_T_FIELDS, "wr_id") as u64,
        sgl: (0..num_sge).map(|i| get_sge(buf, RQ_HDR_BYTES + i * SGE_BYTES)).collect(),
    })
}

// ---------------------------------------------------------------------------------------------
// CQE
// ---------------------------------------------------------------------------------------------

/// `HM_CQE_ST_*` of a completion status.
pub fn wc_status_code(s: WcStatus) -> u8 {
    match s {
        WcStatus::Success => HM_CQE_ST_SUCCESS,
        WcStatus::LocLenErr => HM_CQE_ST_LOC_LEN_ERR,
        WcStatus::LocProtErr => HM_CQE_ST_LOC_PROT_ERR,
        WcStatus::LocQpOpErr => HM_CQE_ST_LOC_QP_OP_ERR,
        WcStatus::WrFlushErr => HM_CQE_ST_WR_FLUSH_ERR,
        WcStatus::RemAccessErr => HM_CQE_ST_REM_ACCESS_ERR,
        WcStatus::RemInvReqErr => HM_CQE_ST_REM_INV_REQ_ERR,
        WcStatus::RemOpErr => HM_CQE_ST_REM_OP_ERR,
        WcStatus::RetryExcErr => HM_CQE_ST_RETRY_EXC_ERR,
        WcStatus::RnrRetryExcErr => HM_CQE_ST_RNR_RETRY_EXC_ERR,
    }
}

/// Completion status of an `HM_CQE_ST_*` code.
pub fn wc_status_from_code(c: u8) -> Option<WcStatus> {
    Some(match c {
        HM_CQE_ST_SUCCESS => WcStatus::Success,
        HM_CQE_ST_LOC_LEN_ERR => WcStatus::LocLenErr,
        HM_CQE_ST_LOC_PROT_ERR => WcStatus::LocProtErr,
        HM_CQE_ST_LOC_QP_OP_ERR => WcStatus::LocQpOpErr,
        HM_CQE_ST_WR_FLUSH_ERR => WcStatus::WrFlushErr,
        HM_CQE_ST_REM_ACCESS_ERR => WcStatus::RemAccessErr,
        HM_CQE_ST_REM_INV_REQ_ERR => WcStatus::RemInvReqErr,
        HM_CQE_ST_REM_OP_ERR => WcStatus::RemOpErr,
        HM_CQE_ST_RETRY_EXC_ERR => WcStatus::RetryExcErr,
        HM_CQE_ST_RNR_RETRY_EXC_ERR => WcStatus::RnrRetryExcErr,
        _ => return None,
    })
}

/// `HM_CQE_OP_*` of a completion opcode.
pub fn wc_opcode_code(o: WcOpcode) -> u8 {
    match o {
        WcOpcode::Send => HM_CQE_OP_SEND,
        WcOpcode::RdmaWrite => HM_CQE_OP_RDMA_WRITE,
        WcOpcode::RdmaRead => HM_CQE_OP_RDMA_READ,
        WcOpcode::CmpSwap => HM_CQE_OP_CMP_SWAP,
        WcOpcode::FetchAdd => HM_CQE_OP_FETCH_ADD,
        WcOpcode::Recv => HM_CQE_OP_RECV,
        WcOpcode::RecvRdmaWithImm => HM_CQE_OP_RECV_RDMA_IMM,
    }
}

/// Completion opcode of an `HM_CQE_OP_*` code.
pub fn wc_opcode_from_code(c: u8) -> Option<WcOpcode> {
    Some(match c {
        HM_CQE_OP_SEND => WcOpcode::Send,
        HM_CQE_OP_RDMA_WRITE => WcOpcode::RdmaWrite,
        HM_CQE_OP_RDMA_READ => WcOpcode::RdmaRead,
        HM_CQE_OP_CMP_SWAP => WcOpcode::CmpSwap,
        HM_CQE_OP_FETCH_ADD => WcOpcode::FetchAdd,
        HM_CQE_OP_RECV => WcOpcode::Recv,
        HM_CQE_OP_RECV_RDMA_IMM => WcOpcode::RecvRdmaWithImm,
        _ => return None,
    })
}

fn is_rq(o: WcOpcode) -> bool {
    matches!(o, WcOpcode::Recv | WcOpcode::RecvRdmaWithImm)
}

/// Encodes a completion for slot `wqe_index` with owner bit `owner` (the phase of the
/// engine's pass over the ring: 1 on the first pass, then alternating). A CQE cannot carry
/// both immediate data and an invalidated R_Key (they share the `imm` field).
pub fn encode_cqe(cqe: &Cqe, wqe_index: u16, owner: bool) -> Result<[u8; CQE_BYTES], DescError> {
    let (flags, imm) = match (cqe.imm, cqe.invalidated_rkey) {
        (None, None) => (0, 0),
        (Some(imm), None) => (HM_CQE_F_IMM, imm_to_field(imm)),
        (None, Some(rkey)) => (HM_CQE_F_INV, rkey.into()),
        (Some(_), Some(_)) => return Err(DescError::Inconsistent("CQE with both imm and invalidated_rkey")),
    };
    let mut flags = flags;
    if is_rq(cqe.opcode) {
        flags |= HM_CQE_F_RQ;
    }
    if owner {
        flags |= HM_CQE_F_OWNER;
    }
    let mut buf = [0u8; CQE_BYTES];
    let c = HM_CQE_T_FIELDS;
    put(&mut buf, 0, c, "wr_id", cqe.wr_id.into())?;
    put(&mut buf, 0, c, "byte_len", cqe.byte_len.into())?;
    put(&mut buf, 0, c, "imm", imm)?;
    put(&mut buf, 0, c, "qpn", cqe.qpn.into())?;
    put(&mut buf, 0, c, "opcode", wc_opcode_code(cqe.opcode).into())?;
    put(&mut buf, 0, c, "status", wc_status_code(cqe.status).into())?;
    put(&mut buf, 0, c, "wqe_index", wqe_index.into())?;
    put(&mut buf, 0, c, "flags", flags.into())?;
    Ok(buf)
}

/// Decodes a CQE (the first 32 bytes of `buf`): the completion, its `wqe_index` and its owner
/// bit.
pub fn decode_cqe(buf: &[u8]) -> Result<(Cqe, u16, bool), DescError> {
    need(buf.len(), CQE_BYTES)?;
    let c = HM_CQE_T_FIELDS;
    let g = |name: &str| get(buf, 0, c, name);
    let flags = g("flags") as u8;
    let known = HM_CQE_F_IMM | HM_CQE_F_INV | HM_CQE_F_RQ | HM_CQE_F_OWNER;
    if flags & !known != 0 {
        return Err(DescError::UnknownCode { field: "flags", value: flags });
    }
    reserved(buf, 0, c, "rsvd", "CQE rsvd is not zero")?;
    reserved(buf, 0, c, "rsvd2", "CQE rsvd2 is not zero")?;
    let op = g("opcode") as u8;
    let opcode = wc_opcode_from_code(op).ok_or(DescError::UnknownCode { field: "opcode", value: op })?;
    let st = g("status") as u8;
    let status = wc_status_from_code(st).ok_or(DescError::UnknownCode { field: "status", value: st })?;
    if (flags & HM_CQE_F_RQ != 0) != is_rq(opcode) {
        return Err(DescError::Inconsistent("CQE RQ flag does not match the opcode"));
    }
    let imm = g("imm");
    let (imm, invalidated_rkey) = match (flags & HM_CQE_F_IMM != 0, flags & HM_CQE_F_INV != 0) {
        (false, false) => (None, None),
        (true, false) => (Some(imm_from_field(imm)), None),
        (false, true) => (None, Some(imm as u32)),
        (true, true) => return Err(DescError::Inconsistent("CQE with both IMM and INV flags")),
    };
    let cqe = Cqe {
        wr_id: g("wr_id") as u64,
        status,
        opcode,
        byte_len: g("byte_len") as u32,
        imm,
        invalidated_rkey,
        qpn: g("qpn") as u32,
    };
    Ok((cqe, g("wqe_index") as u16, flags & HM_CQE_F_OWNER != 0))
}

/// An asynchronous event, as the engine writes it into the event-queue CQ (`HM_CTL_EQ`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// The QP moved to ERR (`HM_EV_QP_FATAL`).
    QpFatal(u32),
    /// A CQE found this CQ full (`HM_EV_CQ_OVERRUN`).
    CqOverrun(u32),
    /// The port came up (`HM_EV_PORT_ACTIVE`; the id is the port number).
    PortActive(u32),
    /// The port went down (`HM_EV_PORT_ERR`).
    PortErr(u32),
}

/// Decodes an event-queue entry (a CQE with opcode `HM_CQE_OP_EVENT`): the event and the owner
/// bit. Anything else (another opcode, an unknown event, non-zero fields) is an error.
pub fn decode_event(buf: &[u8]) -> Result<(Event, bool), DescError> {
    need(buf.len(), CQE_BYTES)?;
    let c = HM_CQE_T_FIELDS;
    let g = |name: &str| get(buf, 0, c, name);
    let op = g("opcode") as u8;
    if op != HM_CQE_OP_EVENT {
        return Err(DescError::UnknownCode { field: "opcode", value: op });
    }
    let flags = g("flags") as u8;
    if flags & !HM_CQE_F_OWNER != 0 {
        return Err(DescError::UnknownCode { field: "flags", value: flags });
    }
    for f in ["rsvd", "rsvd2", "wr_id", "byte_len", "imm", "wqe_index"] {
        reserved(buf, 0, c, f, "event entry field is not zero")?;
    }
    let id = g("qpn") as u32;
    let ev = match g("status") as u8 {
        HM_EV_QP_FATAL => Event::QpFatal(id),
        HM_EV_CQ_OVERRUN => Event::CqOverrun(id),
        HM_EV_PORT_ACTIVE => Event::PortActive(id),
        HM_EV_PORT_ERR => Event::PortErr(id),
        v => return Err(DescError::UnknownCode { field: "event", value: v }),
    };
    Ok((ev, flags & HM_CQE_F_OWNER != 0))
}

// ---------------------------------------------------------------------------------------------
// Control-bus contexts
// ---------------------------------------------------------------------------------------------

/// Everything in a QP context entry (`hm_qp_ctx_t`): the QP attributes plus the state, the
/// queue rings and the CQs. The VLAN fields are written as zero ([`AddrVec`] has no VLAN).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpCtxFields {
    /// Attributes (PD, PMTU, peer QPN, PSNs, timers, retries, access, address vector).
    pub cfg: QpConfig,
    /// `HM_QPS_*`.
    pub state: u8,
    /// Send queue ring address.
    pub sq_base: u64,
    /// Send queue slots: 2^n.
    pub sq_log_size: u8,
    /// Send WQE size: 64 << n.
    pub sq_log_stride: u8,
    /// Receive queue ring address.
    pub rq_base: u64,
    /// Receive queue slots: 2^n.
    pub rq_log_size: u8,
    /// Receive WQE size: 64 << n.
    pub rq_log_stride: u8,
    /// CQ of send completions.
    pub sq_cqn: u16,
    /// CQ of receive completions.
    pub rq_cqn: u16,
}

fn to_words(buf: &[u8]) -> [u32; CTX_WORDS] {
    let mut w = [0u32; CTX_WORDS];
    for (d, s) in w.iter_mut().zip(bytes_to_words(buf)) {
        *d = s;
    }
    w
}

fn ctx_bytes(words: &[u32], bits: usize) -> Result<Vec<u8>, DescError> {
    need(words.len(), bits.div_ceil(32))?;
    Ok(words_to_bytes(words))
}

/// PMTU in bytes → the context code (`128 << code`: 256 → 1 ... 4096 → 5).
pub fn pmtu_code(pmtu: u32) -> Result<u8, DescError> {
    match pmtu {
        256 | 512 | 1024 | 2048 | 4096 => Ok((pmtu.trailing_zeros() - 7) as u8),
        _ => Err(DescError::InvalidPmtu(pmtu)),
    }
}

/// Encodes a QP context entry (the staging window; words beyond the struct are zero).
pub fn encode_qp_ctx(f: &QpCtxFields) -> Result<[u32; CTX_WORDS], DescError> {
    if f.state > HM_QPS_ERR {
        return Err(DescError::UnknownCode { field: "state", value: f.state });
    }
    let cfg = &f.cfg;
    let av = &cfg.av;
    let mut access = 0u8;
    if cfg.access.remote_write {
        access |= HM_QPA_REMOTE_WRITE;
    }
    if cfg.access.remote_read {
        access |= HM_QPA_REMOTE_READ;
    }
    if cfg.access.remote_atomic {
        access |= HM_QPA_REMOTE_ATOMIC;
    }
    let mut buf = vec![0u8; CTX_WORDS * 4];
    let values: [(&'static str, u128); 37] = [
        ("uc", cfg.uc.into()),
        ("std_timer", cfg.std_timer.into()),
        ("max_dest_rd_atomic", cfg.max_dest_rd_atomic.into()),
        ("max_rd_atomic", cfg.max_rd_atomic.into()),
        ("min_rnr_timer", cfg.min_rnr_timer.into()),
        ("rnr_retry", cfg.rnr_retry.into()),
        ("retry_cnt", cfg.retry_cnt.into()),
        ("timeout", cfg.timeout.into()),
        ("rq_log_stride", f.rq_log_stride.into()),
        ("rq_log_size", f.rq_log_size.into()),
        ("sq_log_stride", f.sq_log_stride.into()),
        ("sq_log_size", f.sq_log_size.into()),
        ("access", access.into()),
        ("pmtu", pmtu_code(cfg.pmtu)?.into()),
        ("state", f.state.into()),
        ("rq_cqn", f.rq_cqn.into()),
        ("sq_cqn", f.sq_cqn.into()),
        ("rq_psn", cfg.rq_psn.into()),
        ("sq_psn", cfg.sq_psn.into()),
        ("dest_qpn", cfg.dest_qpn.into()),
        ("pd", cfg.pd.into()),
        ("rq_base", f.rq_base.into()),
        ("sq_base", f.sq_base.into()),
        ("pkey", av.pkey.into()),
        ("flow_label", av.flow_label.into()),
        ("udp_sport", av.udp_sport.into()),
        ("ttl", av.ttl.into()),
        ("ecn", av.ecn.into()),
        ("dscp", av.dscp.into()),
        ("ip_dst", av.ip_dst),
        ("ip_src", av.ip_src),
        ("ipv6", av.ipv6.into()),
        ("vlan_vid", 0),
        ("vlan_pcp", 0),
        ("vlan_valid", 0),
        ("eth_src", av.eth_src.into()),
        ("eth_dst", av.eth_dst.into()),
    ];
    for (name, v) in values {
        put(&mut buf, 0, HM_QP_CTX_T_FIELDS, name, v)?;
    }
    Ok(to_words(&buf))
}

/// Decodes a QP context entry (at least the words the struct occupies).
pub fn decode_qp_ctx(words: &[u32]) -> Result<QpCtxFields, DescError> {
    let buf = ctx_bytes(words, HM_QP_CTX_T_BITS)?;
    let g = |name: &str| get(&buf, 0, HM_QP_CTX_T_FIELDS, name);
    if g("vlan_valid") != 0 || g("vlan_pcp") != 0 || g("vlan_vid") != 0 {
        return Err(DescError::Inconsistent("QP context VLAN fields set (AddrVec has no VLAN)"));
    }
    let state = g("state") as u8;
    if state > HM_QPS_ERR {
        return Err(DescError::UnknownCode { field: "state", value: state });
    }
    let code = g("pmtu") as u8;
    if !(1..=5).contains(&code) {
        return Err(DescError::UnknownCode { field: "pmtu", value: code });
    }
    let access = g("access") as u8;
    let av = AddrVec {
        eth_src: g("eth_src") as u64,
        eth_dst: g("eth_dst") as u64,
        ipv6: g("ipv6") != 0,
        ip_src: g("ip_src"),
        ip_dst: g("ip_dst"),
        dscp: g("dscp") as u8,
        ecn: g("ecn") as u8,
        ttl: g("ttl") as u8,
        udp_sport: g("udp_sport") as u16,
        flow_label: g("flow_label") as u32,
        pkey: g("pkey") as u16,
    };
    let cfg = QpConfig {
        pd: g("pd") as u32,
        pmtu: 128 << code,
        dest_qpn: g("dest_qpn") as u32,
        sq_psn: g("sq_psn") as u32,
        rq_psn: g("rq_psn") as u32,
        timeout: g("timeout") as u8,
        retry_cnt: g("retry_cnt") as u8,
        rnr_retry: g("rnr_retry") as u8,
        min_rnr_timer: g("min_rnr_timer") as u8,
        max_rd_atomic: g("max_rd_atomic") as u8,
        max_dest_rd_atomic: g("max_dest_rd_atomic") as u8,
        access: QpAccess {
            remote_write: access & HM_QPA_REMOTE_WRITE != 0,
            remote_read: access & HM_QPA_REMOTE_READ != 0,
            remote_atomic: access & HM_QPA_REMOTE_ATOMIC != 0,
        },
        av,
        std_timer: g("std_timer") != 0,
        uc: g("uc") != 0,
        // (the engine's context has no selective-repeat bit yet)
        sr: false,
    };
    Ok(QpCtxFields {
        cfg,
        state,
        sq_base: g("sq_base") as u64,
        sq_log_size: g("sq_log_size") as u8,
        sq_log_stride: g("sq_log_stride") as u8,
        rq_base: g("rq_base") as u64,
        rq_log_size: g("rq_log_size") as u8,
        rq_log_stride: g("rq_log_stride") as u8,
        sq_cqn: g("sq_cqn") as u16,
        rq_cqn: g("rq_cqn") as u16,
    })
}

/// Encodes a CQ context entry: ring address, 2^`log_size` entries, interrupt vector, valid.
pub fn encode_cq_ctx(base: u64, log_size: u8, irq_vec: u8, valid: bool) -> Result<[u32; CTX_WORDS], DescError> {
    let mut buf = vec![0u8; CTX_WORDS * 4];
    let c = HM_CQ_CTX_T_FIELDS;
    put(&mut buf, 0, c, "base", base.into())?;
    put(&mut buf, 0, c, "log_size", log_size.into())?;
    put(&mut buf, 0, c, "irq_vec", irq_vec.into())?;
    put(&mut buf, 0, c, "valid", valid.into())?;
    Ok(to_words(&buf))
}

/// Decodes a CQ context entry: `(base, log_size, irq_vec, valid)`.
pub fn decode_cq_ctx(words: &[u32]) -> Result<(u64, u8, u8, bool), DescError> {
    let buf = ctx_bytes(words, HM_CQ_CTX_T_BITS)?;
    let g = |name: &str| get(&buf, 0, HM_CQ_CTX_T_FIELDS, name);
    Ok((g("base") as u64, g("log_size") as u8, g("irq_vec") as u8, g("valid") != 0))
}

/// Encodes an MR table entry for `mr` (its key is `index << 8 | tag`; the entry stores the tag,
/// the index is the command's). L_Key and R_Key must be equal.
pub fn encode_mr_ctx(mr: &Mr, valid: bool) -> Result<[u32; CTX_WORDS], DescError> {
    if mr.lkey != mr.rkey {
        return Err(DescError::Inconsistent("MR with lkey != rkey"));
    }
    let a = &mr.access;
    let mut access = 0u8;
    for (on, bit) in [
        (a.local_write, HM_MRA_LOCAL_WRITE),
        (a.remote_read, HM_MRA_REMOTE_READ),
        (a.remote_write, HM_MRA_REMOTE_WRITE),
        (a.remote_atomic, HM_MRA_REMOTE_ATOMIC),
    ] {
        if on {
            access |= bit;
        }
    }
    let mut buf = vec![0u8; CTX_WORDS * 4];
    let m = HM_MR_CTX_T_FIELDS;
    put(&mut buf, 0, m, "access", access.into())?;
    put(&mut buf, 0, m, "len", mr.len.into())?;
    put(&mut buf, 0, m, "base", mr.base.into())?;
    put(&mut buf, 0, m, "pd", mr.pd.into())?;
    put(&mut buf, 0, m, "tag", (mr.lkey & 0xFF).into())?;
    put(&mut buf, 0, m, "valid", valid.into())?;
    Ok(to_words(&buf))
}

/// Decodes the MR table entry at `index` (< 2^24): the MR (key `index << 8 | tag`) and the
/// valid bit.
pub fn decode_mr_ctx(words: &[u32], index: u32) -> Result<(Mr, bool), DescError> {
    if index >> 24 != 0 {
        return Err(DescError::FieldRange { field: "index", value: index.into() });
    }
    let buf = ctx_bytes(words, HM_MR_CTX_T_BITS)?;
    let g = |name: &str| get(&buf, 0, HM_MR_CTX_T_FIELDS, name);
    let access = g("access") as u8;
    let key = index << 8 | g("tag") as u32;
    let mr = Mr {
        lkey: key,
        rkey: key,
        base: g("base") as u64,
        len: g("len") as u64,
        access: MrAccess {
            local_write: access & HM_MRA_LOCAL_WRITE != 0,
            remote_read: access & HM_MRA_REMOTE_READ != 0,
            remote_write: access & HM_MRA_REMOTE_WRITE != 0,
            remote_atomic: access & HM_MRA_REMOTE_ATOMIC != 0,
        },
        pd: g("pd") as u32,
    };
    Ok((mr, g("valid") != 0))
}

/// Encodes a control command word (`hm_ctl_cmd_t`): `HM_CTL_OP_*`, `HM_CTL_TBL_*`,
/// `HM_CTL_F_*`, entry index. Codes are not checked against the known ones (the hardware
/// answers unknown ones with `HM_CTL_ST_BAD_CMD`), only against the field widths.
pub fn encode_ctl_cmd(op: u8, table: u8, flags: u8, index: u16) -> Result<u32, DescError> {
    let mut buf = [0u8; 4];
    let c = HM_CTL_CMD_T_FIELDS;
    put(&mut buf, 0, c, "op", op.into())?;
    put(&mut buf, 0, c, "table_sel", table.into())?;
    put(&mut buf, 0, c, "flags", flags.into())?;
    put(&mut buf, 0, c, "index", index.into())?;
    Ok(u32::from_le_bytes(buf))
}

/// Decodes a control command word: `(op, table, flags, index)`.
pub fn decode_ctl_cmd(word: u32) -> (u8, u8, u8, u16) {
    let buf = word.to_le_bytes();
    let g = |name: &str| get(&buf, 0, HM_CTL_CMD_T_FIELDS, name);
    (g("op") as u8, g("table_sel") as u8, g("flags") as u8, g("index") as u16)
}

/// Decodes the control status register: `(busy, HM_CTL_ST_*)`.
pub fn decode_ctl_status(word: u32) -> Result<(bool, u8), DescError> {
    let buf = word.to_le_bytes();
    reserved(&buf, 0, HM_CTL_STATUS_T_FIELDS, "rsvd", "control status rsvd is not zero")?;
    let g = |name: &str| get(&buf, 0, HM_CTL_STATUS_T_FIELDS, name);
    Ok((g("busy") != 0, g("status") as u8))
}
