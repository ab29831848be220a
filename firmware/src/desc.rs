//! Descriptor and context layouts of `rtl/pkg/hm_desc_pkg.sv` (generated in hematite-abi,
//! re-exported here) and no_std encoders of the QP / CQ / MR context entries
//! that the firmware writes through the engine's control bus. Equivalent to
//! `hematite_model::desc::encode_*` (cross-checked by the host tests); fields are looked up by
//! name in the generated tables, so a layout change in the package needs no change here.
#![allow(missing_docs, dead_code)]

pub use hematite_abi::desc::*;

/// An encoding error (a programming error or an unchecked value; the callers range-check).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EncError {
    /// The layout has no such field.
    NoField,
    /// The value does not fit the field.
    Range,
}

/// Sets field `$name` of layout `$l` (a generated `*_FIELDS` constant) in `$w` to `$v`.
macro_rules! setf {
    ($w:expr, $l:expr, $name:literal, $v:expr) => {
        set_bits_at::<{ fpos($l, $name).0 }, { fpos($l, $name).1 }>(&mut $w, $v)
    };
}

/// Field `$name` of layout `$l` in `$w`.
macro_rules! getf {
    ($w:expr, $l:expr, $name:literal) => {
        get_bits(&$w, const { fpos($l, $name).0 }, const { fpos($l, $name).1 })
    };
}

/// (lsb, width) of `name` in `layout`.
pub fn field(layout: Layout, name: &str) -> Option<(usize, usize)> {
    layout.iter().find(|f| f.0 == name).map(|f| (f.1, f.2))
}

/// Sets bits `[lsb, lsb + width)` of the little-endian word array to `v` (must fit).
pub fn set_bits(w: &mut [u32], lsb: usize, width: usize, v: u128) -> Result<(), EncError> {
    set_bits_inline(w, lsb, width, v)
}

/// [`set_bits`] at a field position known when compiling, inlined: the shifts and masks fold
/// into a few instructions per field. Called through a function per field, a context of 37
/// fields took 28,000 cycles of the control core (most of a MODIFY_QP); inlined, a few
/// hundred.
#[inline(always)]
pub fn set_bits_at<const LSB: usize, const WIDTH: usize>(w: &mut [u32], v: u128) -> Result<(), EncError> {
    set_bits_inline(w, LSB, WIDTH, v)
}

#[inline(always)]
fn set_bits_inline(w: &mut [u32], lsb: usize, width: usize, v: u128) -> Result<(), EncError> {
    if width < 128 && v >> width != 0 {
        return Err(EncError::Range);
    }
    if width == 0 || width > 128 || (lsb + width).div_ceil(32) > w.len() {
        return Err(EncError::Range);
    }
    let mut done = 0;
    while done < width {
        let (i, off, n, ones) = piece(lsb, width, done);
        let chunk = ((v >> done) as u32) & ones;
        let word = w.get_mut(i).ok_or(EncError::Range)?;
        *word = (*word & !(ones << off)) | (chunk << off);
        done += n;
    }
    Ok(())
}

pub fn get_bits(w: &[u32], lsb: usize, width: usize) -> u128 {
    let width = width.min(128);
    let mut v = 0u128;
    let mut done = 0;
    while done < width {
        let (i, off, n, ones) = piece(lsb, width, done);
        if let Some(word) = w.get(i) {
            v |= (((word >> off) & ones) as u128) << done;
        }
        done += n;
    }
    v
}

/// The next part of bits `[lsb, lsb + width)` once `done` of them are handled, up to the end
/// of its word: `(word index, bit offset in the word, bits, their mask at bit 0)`. The fields
/// are set and read word by word (bit by bit with 128-bit shifts costs thousands of cycles on
/// rv32).
#[inline(always)]
fn piece(lsb: usize, width: usize, done: usize) -> (usize, usize, usize, u32) {
    let b = lsb + done;
    let off = b % 32;
    let n = (32 - off).min(width - done);
    let ones = if n == 32 { u32::MAX } else { (1u32 << n) - 1 };
    (b / 32, off, n, ones)
}

pub fn put(w: &mut [u32], layout: Layout, name: &str, v: u128) -> Result<(), EncError> {
    let (lsb, width) = field(layout, name).ok_or(EncError::NoField)?;
    set_bits(w, lsb, width, v)
}

/// Reads field `name` of `layout` (0 if the layout has no such field).
pub fn get(w: &[u32], layout: Layout, name: &str) -> u128 {
    match field(layout, name) {
        Some((lsb, width)) => get_bits(w, lsb, width),
        None => 0,
    }
}

/// Every field of `hm_qp_ctx_t`, as raw field values (VLAN fields are always written 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct QpCtx {
    pub uc: bool,
    pub std_timer: bool,
    pub max_dest_rd_atomic: u8,
    pub max_rd_atomic: u8,
    pub min_rnr_timer: u8,
    pub rnr_retry: u8,
    pub retry_cnt: u8,
    pub timeout: u8,
    pub rq_log_stride: u8,
    pub rq_log_size: u8,
    pub sq_log_stride: u8,
    pub sq_log_size: u8,
    /// `HM_QPA_*` bits.
    pub access: u8,
    /// Path MTU code: 128 << pmtu (= the ibverbs `IBV_MTU_*` value).
    pub pmtu: u8,
    /// `HM_QPS_*`.
    pub state: u8,
    pub rq_cqn: u16,
    pub sq_cqn: u16,
    pub rq_psn: u32,
    pub sq_psn: u32,
    pub dest_qpn: u32,
    pub pd: u32,
    pub rq_base: u64,
    pub sq_base: u64,
    pub pkey: u16,
    pub flow_label: u32,
    pub udp_sport: u16,
    pub ttl: u8,
    pub ecn: u8,
    pub dscp: u8,
    pub ip_dst: u128,
    pub ip_src: u128,
    pub ipv6: bool,
    pub eth_src: u64,
    pub eth_dst: u64,
}

/// Control-bus words that hold a QP context (`hm_qp_ctx_t`); the firmware writes only these
/// staging words for a QP entry (the engine takes the struct from the low bits of the stage).
pub const QP_WORDS: usize = HM_QP_CTX_T_BITS.div_ceil(32);
/// Words of a CQ context (`hm_cq_ctx_t`).
pub const CQ_WORDS: usize = HM_CQ_CTX_T_BITS.div_ceil(32);
/// Words of an MR entry (`hm_mr_ctx_t`).
pub const MR_WORDS: usize = HM_MR_CTX_T_BITS.div_ceil(32);
const _: () = assert!(QP_WORDS <= CTX_WORDS && CQ_WORDS <= CTX_WORDS && MR_WORDS <= CTX_WORDS);

/// Encodes a QP context entry (the struct's words; bits above it are zero).
#[inline(always)]
pub fn encode_qp_ctx(c: &QpCtx) -> Result<[u32; QP_WORDS], EncError> {
    let mut w = [0u32; QP_WORDS];
    setf!(w, HM_QP_CTX_T_FIELDS, "uc", c.uc.into())?;
    setf!(w, HM_QP_CTX_T_FIELDS, "std_timer", c.std_timer.into())?;
    setf!(w, HM_QP_CTX_T_FIELDS, "max_dest_rd_atomic", c.max_dest_rd_atomic.into())?;
    setf!(w, HM_QP_CTX_T_FIELDS, "max_rd_atomic", c.max_rd_atomic.into())?;
    setf!(w, HM_QP_CTX_T_FIELDS, "min_rnr_timer", c.min_rnr_timer.into())?;
    setf!(w, HM_QP_CTX_T_FIELDS, "rnr_retry", c.rnr_retry.into())?;
    setf!(w, HM_QP_CTX_T_FIELDS, "retry_cnt", c.retry_cnt.into())?;
    setf!(w, HM_QP_CTX_T_FIELDS, "timeout", c.timeout.into())?;
    setf!(w, HM_QP_CTX_T_FIELDS, "rq_log_stride", c.rq_log_stride.into())?;
    setf!(w, HM_QP_CTX_T_FIELDS, "rq_log_size", c.rq_log_size.into())?;
    setf!(w, HM_QP_CTX_T_FIELDS, "sq_log_stride", c.sq_log_stride.into())?;
    setf!(w, HM_QP_CTX_T_FIELDS, "sq_log_size", c.sq_log_size.into())?;
    setf!(w, HM_QP_CTX_T_FIELDS, "access", c.access.into())?;
    setf!(w, HM_QP_CTX_T_FIELDS, "pmtu", c.pmtu.into())?;
    setf!(w, HM_QP_CTX_T_FIELDS, "state", c.state.into())?;
    setf!(w, HM_QP_CTX_T_FIELDS, "rq_cqn", c.rq_cqn.into())?;
    setf!(w, HM_QP_CTX_T_FIELDS, "sq_cqn", c.sq_cqn.into())?;
    setf!(w, HM_QP_CTX_T_FIELDS, "rq_psn", c.rq_psn.into())?;
    setf!(w, HM_QP_CTX_T_FIELDS, "sq_psn", c.sq_psn.into())?;
    setf!(w, HM_QP_CTX_T_FIELDS, "dest_qpn", c.dest_qpn.into())?;
    setf!(w, HM_QP_CTX_T_FIELDS, "pd", c.pd.into())?;
    setf!(w, HM_QP_CTX_T_FIELDS, "rq_base", c.rq_base.into())?;
    setf!(w, HM_QP_CTX_T_FIELDS, "sq_base", c.sq_base.into())?;
    setf!(w, HM_QP_CTX_T_FIELDS, "pkey", c.pkey.into())?;
    setf!(w, HM_QP_CTX_T_FIELDS, "flow_label", c.flow_label.into())?;
    setf!(w, HM_QP_CTX_T_FIELDS, "udp_sport", c.udp_sport.into())?;
    setf!(w, HM_QP_CTX_T_FIELDS, "ttl", c.ttl.into())?;
    setf!(w, HM_QP_CTX_T_FIELDS, "ecn", c.ecn.into())?;
    setf!(w, HM_QP_CTX_T_FIELDS, "dscp", c.dscp.into())?;
    setf!(w, HM_QP_CTX_T_FIELDS, "ip_dst", c.ip_dst)?;
    setf!(w, HM_QP_CTX_T_FIELDS, "ip_src", c.ip_src)?;
    setf!(w, HM_QP_CTX_T_FIELDS, "ipv6", c.ipv6.into())?;
    setf!(w, HM_QP_CTX_T_FIELDS, "vlan_vid", 0)?;
    setf!(w, HM_QP_CTX_T_FIELDS, "vlan_pcp", 0)?;
    setf!(w, HM_QP_CTX_T_FIELDS, "vlan_valid", 0)?;
    setf!(w, HM_QP_CTX_T_FIELDS, "eth_src", c.eth_src.into())?;
    setf!(w, HM_QP_CTX_T_FIELDS, "eth_dst", c.eth_dst.into())?;
    Ok(w)
}

/// Encodes a CQ context entry.
pub fn encode_cq_ctx(base: u64, log_size: u8, irq_vec: u8, valid: bool) -> Result<[u32; CQ_WORDS], EncError> {
    let mut w = [0u32; CQ_WORDS];
    setf!(w, HM_CQ_CTX_T_FIELDS, "base", base.into())?;
    setf!(w, HM_CQ_CTX_T_FIELDS, "log_size", log_size.into())?;
    setf!(w, HM_CQ_CTX_T_FIELDS, "irq_vec", irq_vec.into())?;
    setf!(w, HM_CQ_CTX_T_FIELDS, "valid", valid.into())?;
    Ok(w)
}

/// Encodes an MR table entry (`access` = `HM_MRA_*` bits, `tag` = key & 0xFF).
pub fn encode_mr_ctx(
    base: u64,
    len: u64,
    pd: u32,
    access: u8,
    tag: u8,
    valid: bool,
) -> Result<[u32; MR_WORDS], EncError> {
    let mut w = [0u32; MR_WORDS];
    setf!(w, HM_MR_CTX_T_FIELDS, "access", access.into())?;
    setf!(w, HM_MR_CTX_T_FIELDS, "len", len.into())?;
    setf!(w, HM_MR_CTX_T_FIELDS, "base", base.into())?;
    setf!(w, HM_MR_CTX_T_FIELDS, "pd", pd.into())?;
    setf!(w, HM_MR_CTX_T_FIELDS, "tag", tag.into())?;
    setf!(w, HM_MR_CTX_T_FIELDS, "valid", valid.into())?;
    Ok(w)
}

/// Encodes a control command word (`hm_ctl_cmd_t`).
pub fn encode_ctl_cmd(op: u8, table: u8, flags: u8, index: u16) -> Result<u32, EncError> {
    let mut w = [0u32; 1];
    setf!(w, HM_CTL_CMD_T_FIELDS, "op", op.into())?;
    setf!(w, HM_CTL_CMD_T_FIELDS, "table_sel", table.into())?;
    setf!(w, HM_CTL_CMD_T_FIELDS, "flags", flags.into())?;
    setf!(w, HM_CTL_CMD_T_FIELDS, "index", index.into())?;
    Ok(w[0])
}

/// Encodes an `HM_CTL_POST` word (`hm_ctl_post_t`).
pub fn encode_ctl_post(op: u8, code: u8, id: u16) -> Result<u32, EncError> {
    let mut w = [0u32; 1];
    setf!(w, HM_CTL_POST_T_FIELDS, "op", op.into())?;
    setf!(w, HM_CTL_POST_T_FIELDS, "code", code.into())?;
    setf!(w, HM_CTL_POST_T_FIELDS, "id", id.into())?;
    Ok(w[0])
}

/// Encodes `HM_CTL_EQ` (`hm_ctl_eq_t`).
pub fn encode_ctl_eq(enable: bool, cqn: u16) -> Result<u32, EncError> {
    let mut w = [0u32; 1];
    setf!(w, HM_CTL_EQ_T_FIELDS, "enable", enable.into())?;
    setf!(w, HM_CTL_EQ_T_FIELDS, "cqn", cqn.into())?;
    Ok(w[0])
}

/// Decodes the control status register: `(busy, HM_CTL_ST_*)`.
pub fn decode_ctl_status(word: u32) -> (bool, u8) {
    let w = [word];
    (getf!(w, HM_CTL_STATUS_T_FIELDS, "busy") != 0, getf!(w, HM_CTL_STATUS_T_FIELDS, "status") as u8)
}
