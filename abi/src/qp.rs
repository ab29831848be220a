//! The verbs QP state machine for RC and UC: states, `IBV_QP_*` attribute-mask bits, the tables
//! of legal transitions with their required and optional attributes (the facts of the kernel's
//! `ib_modify_qp_is_ok` table for IB_QPT_RC and IB_QPT_UC, restated), and the attribute word
//! block of MODIFY_QP / QUERY_QP.

/// QPN <-> context-table entry, for a table of `2^log_entries` QPs (the rule of the engine's
/// `hm_pkg::hm_qpn_swap`, which applies it to DestQPs from the wire, doorbells, pushes, and to
/// the QPN of CQEs and events). QPNs 0 and 1 are reserved (QP0, QP1), so entries 0 and 1
/// answer to the two QPNs above the table, `2^log_entries` and `2^log_entries + 1`, and every
/// entry of the table is a usable QP. The swap flips bit `log_entries` when the bits below it,
/// bit 0 aside, are all zero: it is its own inverse, and it leaves QPNs 2 .. 2^log_entries - 1
/// as they are.
pub const fn qpn_swap(x: u32, log_entries: u32) -> u32 {
    let bit = 1u32 << log_entries;
    if x & (bit - 2) == 0 {
        x ^ bit
    } else {
        x
    }
}

/// The table entry that QPN `qpn` names in a table of `2^log_entries` QPs, if any (QPNs 0 and 1
/// and QPNs beyond the table's name none).
pub const fn qp_entry(qpn: u32, log_entries: u32) -> Option<u32> {
    let e = qpn_swap(qpn, log_entries);
    if e >> log_entries == 0 {
        Some(e)
    } else {
        None
    }
}

/// The QPN of table entry `entry` (`entry < 2^log_entries`).
pub const fn qpn_of_entry(entry: u32, log_entries: u32) -> u32 {
    qpn_swap(entry, log_entries)
}

/// ibverbs QP states (`enum ibv_qp_state` values).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(u8)]
pub enum QpState {
    #[default]
    Reset = 0,
    Init = 1,
    Rtr = 2,
    Rts = 3,
    Sqd = 4,
    Sqe = 5,
    Err = 6,
}

impl QpState {
    /// Every state, in value order.
    pub const ALL: [QpState; 7] =
        [QpState::Reset, QpState::Init, QpState::Rtr, QpState::Rts, QpState::Sqd, QpState::Sqe, QpState::Err];
    /// From the ibverbs value.
    pub fn from_u32(v: u32) -> Option<QpState> {
        QpState::ALL.get(usize::try_from(v).ok()?).copied()
    }
    /// The engine's `HM_QPS_*` code (the engine has no SQE; RC never enters it).
    pub fn engine_code(self) -> u8 {
        use crate::desc::*;
        match self {
            QpState::Reset => HM_QPS_RESET,
            QpState::Init => HM_QPS_INIT,
            QpState::Rtr => HM_QPS_RTR,
            QpState::Rts => HM_QPS_RTS,
            QpState::Sqd => HM_QPS_SQD,
            QpState::Sqe | QpState::Err => HM_QPS_ERR,
        }
    }
}

// ibverbs `enum ibv_qp_attr_mask` bits.
pub const M_STATE: u32 = 1 << 0;
pub const M_CUR_STATE: u32 = 1 << 1;
pub const M_EN_SQD_ASYNC_NOTIFY: u32 = 1 << 2;
pub const M_ACCESS_FLAGS: u32 = 1 << 3;
pub const M_PKEY_INDEX: u32 = 1 << 4;
pub const M_PORT: u32 = 1 << 5;
pub const M_QKEY: u32 = 1 << 6;
pub const M_AV: u32 = 1 << 7;
pub const M_PATH_MTU: u32 = 1 << 8;
pub const M_TIMEOUT: u32 = 1 << 9;
pub const M_RETRY_CNT: u32 = 1 << 10;
pub const M_RNR_RETRY: u32 = 1 << 11;
pub const M_RQ_PSN: u32 = 1 << 12;
pub const M_MAX_QP_RD_ATOMIC: u32 = 1 << 13;
pub const M_ALT_PATH: u32 = 1 << 14;
pub const M_MIN_RNR_TIMER: u32 = 1 << 15;
pub const M_SQ_PSN: u32 = 1 << 16;
pub const M_MAX_DEST_RD_ATOMIC: u32 = 1 << 17;
pub const M_PATH_MIG_STATE: u32 = 1 << 18;
pub const M_CAP: u32 = 1 << 19;
pub const M_DEST_QPN: u32 = 1 << 20;
/// Hematite's own attribute (no ibverbs bit; bit 30 is beyond every `IBV_QP_*`): the QP uses
/// the standard ACK timeout alone, without adaptive early retransmission (`A_STD_TIMER`, 0 or
/// 1). Allowed wherever the timeout is (RTR -> RTS, SQD -> SQD) and RTS -> RTS / SQD -> RTS.
pub const M_STD_TIMER: u32 = 1 << 30;
/// Every mask bit this firmware knows (bits 0..=20 and `M_STD_TIMER`).
pub const M_ALL: u32 = ((1 << 21) - 1) | M_STD_TIMER;

/// A legal transition: (from, to, required, optional), besides `M_STATE`.
pub type Transition = (QpState, QpState, u32, u32);

use QpState::*;

/// Legal RC transitions other than "any state -> RESET" and "any state -> ERR" (which need
/// only `M_STATE` and allow nothing else).
pub const TRANSITIONS: [Transition; 9] = [
    (Reset, Init, M_PKEY_INDEX | M_PORT | M_ACCESS_FLAGS, 0),
    (Init, Init, 0, M_PKEY_INDEX | M_PORT | M_ACCESS_FLAGS),
    (
        Init,
        Rtr,
        M_AV | M_PATH_MTU | M_DEST_QPN | M_RQ_PSN | M_MAX_DEST_RD_ATOMIC | M_MIN_RNR_TIMER,
        M_ALT_PATH | M_ACCESS_FLAGS | M_PKEY_INDEX,
    ),
    (
        Rtr,
        Rts,
        M_TIMEOUT | M_RETRY_CNT | M_RNR_RETRY | M_SQ_PSN | M_MAX_QP_RD_ATOMIC,
        M_CUR_STATE | M_ALT_PATH | M_ACCESS_FLAGS | M_MIN_RNR_TIMER | M_PATH_MIG_STATE | M_STD_TIMER,
    ),
    (Rts, Rts, 0, M_CUR_STATE | M_ACCESS_FLAGS | M_ALT_PATH | M_PATH_MIG_STATE | M_MIN_RNR_TIMER | M_STD_TIMER),
    (Rts, Sqd, 0, M_EN_SQD_ASYNC_NOTIFY),
    (Sqd, Rts, 0, M_CUR_STATE | M_ALT_PATH | M_ACCESS_FLAGS | M_MIN_RNR_TIMER | M_PATH_MIG_STATE | M_STD_TIMER),
    (
        Sqd,
        Sqd,
        0,
        M_PORT
            | M_AV
            | M_TIMEOUT
            | M_RETRY_CNT
            | M_RNR_RETRY
            | M_MAX_QP_RD_ATOMIC
            | M_MAX_DEST_RD_ATOMIC
            | M_ALT_PATH
            | M_ACCESS_FLAGS
            | M_PKEY_INDEX
            | M_MIN_RNR_TIMER
            | M_PATH_MIG_STATE
            | M_STD_TIMER,
    ),
    // SQE -> RTS is legal for RC but allows no attribute (RC QPs never enter SQE).
    (Sqe, Rts, 0, 0),
];

/// Legal UC transitions besides "-> RESET" and "-> ERR": RC's without the attributes of
/// reliability (ACK timeout, retry counts, RNR timer, READ/atomic resources) and without
/// Hematite's `M_STD_TIMER`.
pub const UC_TRANSITIONS: [Transition; 9] = [
    (Reset, Init, M_PKEY_INDEX | M_PORT | M_ACCESS_FLAGS, 0),
    (Init, Init, 0, M_PKEY_INDEX | M_PORT | M_ACCESS_FLAGS),
    (Init, Rtr, M_AV | M_PATH_MTU | M_DEST_QPN | M_RQ_PSN, M_ALT_PATH | M_ACCESS_FLAGS | M_PKEY_INDEX),
    (Rtr, Rts, M_SQ_PSN, M_CUR_STATE | M_ALT_PATH | M_ACCESS_FLAGS | M_PATH_MIG_STATE),
    (Rts, Rts, 0, M_CUR_STATE | M_ACCESS_FLAGS | M_ALT_PATH | M_PATH_MIG_STATE),
    (Rts, Sqd, 0, M_EN_SQD_ASYNC_NOTIFY),
    (Sqd, Rts, 0, M_CUR_STATE | M_ALT_PATH | M_ACCESS_FLAGS | M_PATH_MIG_STATE),
    (Sqd, Sqd, 0, M_AV | M_ALT_PATH | M_ACCESS_FLAGS | M_PKEY_INDEX | M_PATH_MIG_STATE),
    // (a Hematite UC QP never enters SQE: a send error moves it to ERR)
    (Sqe, Rts, 0, M_CUR_STATE | M_ACCESS_FLAGS),
];

/// The QP types Hematite offers (ibverbs `enum ibv_qp_type` values).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(u8)]
pub enum QpType {
    /// `IBV_QPT_RC`.
    #[default]
    Rc = 2,
    /// `IBV_QPT_UC`.
    Uc = 3,
}

impl QpType {
    /// From the ibverbs value (None for a type Hematite does not offer).
    pub fn from_u32(v: u32) -> Option<QpType> {
        match v {
            2 => Some(QpType::Rc),
            3 => Some(QpType::Uc),
            _ => None,
        }
    }
    /// Its transition table.
    pub fn transitions(self) -> &'static [Transition] {
        match self {
            QpType::Rc => &TRANSITIONS,
            QpType::Uc => &UC_TRANSITIONS,
        }
    }
}

/// Required and optional attributes of `from -> to` of an RC QP (besides `M_STATE`), or None if
/// the transition is illegal.
pub fn transition(from: QpState, to: QpState) -> Option<(u32, u32)> {
    transition_of(QpType::Rc, from, to)
}

/// `transition` for a QP of type `t`.
pub fn transition_of(t: QpType, from: QpState, to: QpState) -> Option<(u32, u32)> {
    // any state -> RESET; any state but RESET -> ERR (the kernel's table has no RESET -> ERR)
    if to == Reset || (to == Err && from != Reset) {
        return Some((0, 0));
    }
    t.transitions().iter().find(|t| t.0 == from && t.1 == to).map(|t| (t.2, t.3))
}

/// Why a modify request's mask is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MaskError {
    /// Illegal transition.
    BadState,
    /// A required attribute missing, or one not allowed (including unknown bits).
    BadMask,
}

/// Checks `mask` (with or without `M_STATE`) for `from -> to` of an RC QP as
/// `ib_modify_qp_is_ok` does.
pub fn check_mask(from: QpState, to: QpState, mask: u32) -> Result<(), MaskError> {
    check_mask_of(QpType::Rc, from, to, mask)
}

/// `check_mask` for a QP of type `t`.
pub fn check_mask_of(t: QpType, from: QpState, to: QpState, mask: u32) -> Result<(), MaskError> {
    let (req, opt) = transition_of(t, from, to).ok_or(MaskError::BadState)?;
    if mask & req != req || mask & !(req | opt | M_STATE) != 0 {
        return core::result::Result::Err(MaskError::BadMask);
    }
    Ok(())
}

// The attribute block of MODIFY_QP (input words 3..) and QUERY_QP (output words 1..): one word
// per attribute, at these indices.
pub const A_QP_STATE: usize = 0;
pub const A_CUR_QP_STATE: usize = 1;
pub const A_ACCESS_FLAGS: usize = 2;
pub const A_PKEY_INDEX: usize = 3;
pub const A_PORT_NUM: usize = 4;
pub const A_QKEY: usize = 5;
pub const A_PATH_MTU: usize = 6;
pub const A_TIMEOUT: usize = 7;
pub const A_RETRY_CNT: usize = 8;
pub const A_RNR_RETRY: usize = 9;
pub const A_RQ_PSN: usize = 10;
pub const A_SQ_PSN: usize = 11;
pub const A_MAX_RD_ATOMIC: usize = 12;
pub const A_MAX_DEST_RD_ATOMIC: usize = 13;
pub const A_MIN_RNR_TIMER: usize = 14;
pub const A_DEST_QPN: usize = 15;
pub const A_EN_SQD_ASYNC_NOTIFY: usize = 16;
pub const A_PATH_MIG_STATE: usize = 17;
pub const A_SGID_INDEX: usize = 18;
/// Destination GID, 4 words, each the big-endian value of 4 GID bytes (word 19 = bytes 0..3).
pub const A_DGID: usize = 19;
/// Destination MAC bits [31:0] (the MAC as a 48-bit big-endian number).
pub const A_DMAC_LO: usize = 23;
/// Destination MAC bits [47:32].
pub const A_DMAC_HI: usize = 24;
pub const A_HOP_LIMIT: usize = 25;
pub const A_TRAFFIC_CLASS: usize = 26;
pub const A_FLOW_LABEL: usize = 27;
pub const A_UDP_SPORT: usize = 28;
/// 1: the standard ACK timeout alone (`M_STD_TIMER`); 0: adaptive early retransmission too.
pub const A_STD_TIMER: usize = 29;
/// Words in the attribute block.
pub const ATTR_WORDS: usize = 30;

/// `IBV_MIG_MIGRATED`, the only path-migration state supported.
pub const MIG_MIGRATED: u32 = 0;

/// ibverbs `enum ibv_access_flags` bits (memory registration and the QP's access flags).
pub mod access {
    pub const LOCAL_WRITE: u32 = 1;
    pub const REMOTE_WRITE: u32 = 2;
    pub const REMOTE_READ: u32 = 4;
    pub const REMOTE_ATOMIC: u32 = 8;
    pub const MW_BIND: u32 = 16;
    pub const ZERO_BASED: u32 = 32;
    pub const ON_DEMAND: u32 = 64;
    pub const HUGETLB: u32 = 128;
    /// IBV_ACCESS_RELAXED_ORDERING and the other optional bits (20..29).
    pub const OPTIONAL: u32 = 0x3FF0_0000;
}

/// Verbs QP access flags accepted by `IBV_QP_ACCESS_FLAGS`.
pub const QP_ACCESS_VALID: u32 = access::LOCAL_WRITE | access::REMOTE_WRITE | access::REMOTE_READ | access::REMOTE_ATOMIC;

#[cfg(test)]
mod qpn_tests {
    use super::*;

    #[test]
    fn entries_0_and_1_answer_to_the_qpns_above_the_table() {
        for log in 2..=15 {
            let n = 1u32 << log;
            assert_eq!(qpn_of_entry(0, log), n);
            assert_eq!(qpn_of_entry(1, log), n + 1);
            assert_eq!(qp_entry(n, log), Some(0));
            assert_eq!(qp_entry(n + 1, log), Some(1));
            // the reserved QPNs and everything outside the table name no entry
            for q in [0, 1, n + 2, n + 3, 2 * n, 2 * n + 1, 3 * n, 0xFF_FFFF] {
                assert_eq!(qp_entry(q, log), None, "log {log} qpn {q:#x}");
            }
            // the other entries keep their number
            for e in [2, 3, n / 2, n - 2, n - 1] {
                assert_eq!(qpn_of_entry(e, log), e);
                assert_eq!(qp_entry(e, log), Some(e));
            }
        }
    }

    #[test]
    fn the_mapping_is_one_to_one_over_the_whole_table() {
        let log = 12;
        // (no_std: a bitmap of the QPNs seen, which are below 2^13)
        let mut seen = [0u64; 128];
        for e in 0..1u32 << log {
            let q = qpn_of_entry(e, log);
            assert!((2..8192).contains(&q), "entry {e} got QPN {q}");
            assert_eq!(qp_entry(q, log), Some(e));
            assert_eq!(qpn_swap(qpn_swap(q, log), log), q);
            assert_eq!(seen[q as usize / 64] >> (q % 64) & 1, 0, "QPN {q} twice");
            seen[q as usize / 64] |= 1 << (q % 64);
        }
        // every 24-bit QPN names at most one entry, and a valid one maps back to itself
        for q in 0..1u32 << 14 {
            if let Some(e) = qp_entry(q, log) {
                assert_eq!(qpn_of_entry(e, log), q);
            }
        }
    }
}
