//! Resource tables: protection domains, CQs, MRs (with their rotating key tags), QPs and the
//! GID table; fixed capacity (no heap), effective limits from the engine's CAPS / MR_LOG
//! words, allocation, and reference counts (a CQ is used by QPs, a PD by MRs and QPs).

use crate::qp::QpState;

/// Firmware table capacities (DMEM is 16 KiB; the engine's tables may be larger).
pub const FW_MAX_QP: usize = 256;
pub const FW_MAX_CQ: usize = 256;
pub const FW_MAX_MR: usize = 4096;
pub const FW_MAX_PD: usize = 256;
/// QPNs 0 and 1 (the IB special QPs) are never allocated.
pub const FIRST_QPN: usize = 2;
/// GID table entries.
pub const GID_TBL_LEN: usize = 4;

/// A protection domain (handle = index + 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pd {
    pub used: bool,
    /// MRs and QPs in this PD.
    pub refs: u16,
}

/// A completion queue (CQN = index).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cq {
    pub used: bool,
    pub log_size: u8,
    pub irq_vec: u8,
    pub base: u64,
    /// QPs using it (send or receive; a QP using it for both counts twice).
    pub refs: u16,
}

/// An MR (key = index << 8 | tag).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mr {
    pub used: bool,
    /// Tag of the current (or last) key of this index; the next one is `tag + 1` (skipping 0).
    pub tag: u8,
    /// PD handle.
    pub pd: u16,
}

/// A GID table entry: our address and its MAC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gid {
    pub valid: bool,
    /// GID bytes as 4 big-endian words.
    pub gid: [u32; 4],
    /// MAC as a 48-bit number.
    pub mac: u64,
}

/// Address vector as set by MODIFY_QP (with the source resolved from the GID table then).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Av {
    pub sgid_index: u8,
    pub dgid: [u32; 4],
    pub dmac: u64,
    pub hop_limit: u8,
    pub traffic_class: u8,
    pub flow_label: u32,
    /// As requested (0 = derived from the QPN).
    pub udp_sport: u16,
    pub ipv6: bool,
    /// Source GID (from the GID table when the AV was set).
    pub sgid: [u32; 4],
    pub smac: u64,
}

/// QP attributes set by MODIFY_QP (ibverbs values).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpAttr {
    pub access: u32,
    pub pkey_index: u16,
    pub port: u8,
    pub path_mtu: u8,
    pub timeout: u8,
    pub retry_cnt: u8,
    pub rnr_retry: u8,
    pub min_rnr_timer: u8,
    pub max_rd_atomic: u8,
    pub max_dest_rd_atomic: u8,
    pub en_sqd_async_notify: u8,
    pub rq_psn: u32,
    pub sq_psn: u32,
    pub dest_qpn: u32,
    pub av: Av,
    /// The standard ACK timeout alone (no adaptive early retransmission).
    pub std_timer: bool,
}

/// Queue capacities of a QP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpCap {
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
    pub max_send_sge: u32,
    pub max_recv_sge: u32,
    pub max_inline: u32,
}

/// A QP (QPN = index).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Qp {
    pub used: bool,
    pub state: QpState,
    pub pd: u16,
    pub send_cq: u16,
    pub recv_cq: u16,
    pub sq_base: u64,
    pub rq_base: u64,
    pub sq_log_size: u8,
    pub sq_log_stride: u8,
    pub rq_log_size: u8,
    pub rq_log_stride: u8,
    /// UC (else RC). A bool, not `QpType`, so that an unused entry is all zero bits and the
    /// tables stay in .bss (an initialised static would be a 60 KB load image in IMEM).
    pub uc: bool,
    pub cap: QpCap,
    pub attr: QpAttr,
}

impl Av {
    pub const ZERO: Av = Av {
        sgid_index: 0,
        dgid: [0; 4],
        dmac: 0,
        hop_limit: 0,
        traffic_class: 0,
        flow_label: 0,
        udp_sport: 0,
        ipv6: false,
        sgid: [0; 4],
        smac: 0,
    };
}

impl QpAttr {
    pub const ZERO: QpAttr = QpAttr {
        access: 0,
        pkey_index: 0,
        port: 0,
        path_mtu: 0,
        timeout: 0,
        retry_cnt: 0,
        rnr_retry: 0,
        min_rnr_timer: 0,
        max_rd_atomic: 0,
        max_dest_rd_atomic: 0,
        en_sqd_async_notify: 0,
        rq_psn: 0,
        sq_psn: 0,
        dest_qpn: 0,
        av: Av::ZERO,
        std_timer: false,
    };
}

impl Qp {
    /// RC or UC.
    pub fn qpt(&self) -> hematite_abi::qp::QpType {
        if self.uc {
            hematite_abi::qp::QpType::Uc
        } else {
            hematite_abi::qp::QpType::Rc
        }
    }

    pub const ZERO: Qp = Qp {
        used: false,
        state: QpState::Reset,
        pd: 0,
        send_cq: 0,
        recv_cq: 0,
        sq_base: 0,
        rq_base: 0,
        sq_log_size: 0,
        sq_log_stride: 0,
        rq_log_size: 0,
        rq_log_stride: 0,
        uc: false,
        cap: QpCap { max_send_wr: 0, max_recv_wr: 0, max_send_sge: 0, max_recv_sge: 0, max_inline: 0 },
        attr: QpAttr::ZERO,
    };
}

/// Effective numbers of table entries (firmware capacity and engine size, whichever is less).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// QP entries usable (QPNs FIRST_QPN..qps).
    pub qps: usize,
    pub cqs: usize,
    pub mrs: usize,
    pub pds: usize,
}

/// All resource tables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tables {
    pub pds: [Pd; FW_MAX_PD],
    pub cqs: [Cq; FW_MAX_CQ],
    pub mrs: [Mr; FW_MAX_MR],
    pub qps: [Qp; FW_MAX_QP],
    pub gids: [Gid; GID_TBL_LEN],
    pub limits: Limits,
    /// Where the next QPN / MR index search starts (round robin, so numbers are not reused
    /// at once).
    pub next_qp: usize,
    pub next_mr: usize,
}

/// Entries of a table of 2^log entries capped at `cap` (a log of 16 or more means "at least
/// 65536"; control-bus indices are 16 bits).
pub fn entries(log: u32, cap: usize) -> usize {
    if log >= 16 {
        cap.min(1 << 16)
    } else {
        cap.min(1usize << log)
    }
}

impl Tables {
    pub const ZERO: Tables = Tables {
        pds: [Pd { used: false, refs: 0 }; FW_MAX_PD],
        cqs: [Cq { used: false, log_size: 0, irq_vec: 0, base: 0, refs: 0 }; FW_MAX_CQ],
        mrs: [Mr { used: false, tag: 0, pd: 0 }; FW_MAX_MR],
        qps: [Qp::ZERO; FW_MAX_QP],
        gids: [Gid { valid: false, gid: [0; 4], mac: 0 }; GID_TBL_LEN],
        limits: Limits { qps: 0, cqs: 0, mrs: 0, pds: 0 },
        next_qp: 0,
        next_mr: 0,
    };

    /// Sets the limits from the CAPS word and the MR_LOG word.
    pub fn set_limits(&mut self, caps: u32, mr_log: u32) {
        self.limits = Limits {
            qps: entries(caps >> 24, FW_MAX_QP),
            cqs: entries((caps >> 16) & 0xFF, FW_MAX_CQ),
            mrs: entries(mr_log, FW_MAX_MR),
            pds: FW_MAX_PD,
        };
    }

    /// Reported maximum number of QPs.
    pub fn max_qp(&self) -> usize {
        self.limits.qps.saturating_sub(FIRST_QPN)
    }

    /// A used PD by handle.
    pub fn pd(&self, handle: u32) -> Option<usize> {
        let i = usize::try_from(handle).ok()?.checked_sub(1)?;
        (i < self.limits.pds && self.pds.get(i)?.used).then_some(i)
    }

    /// A used CQ by CQN.
    pub fn cq(&self, cqn: u32) -> Option<usize> {
        let i = usize::try_from(cqn).ok()?;
        (i < self.limits.cqs && self.cqs.get(i)?.used).then_some(i)
    }

    /// A used QP by QPN.
    pub fn qp(&self, qpn: u32) -> Option<usize> {
        let i = usize::try_from(qpn).ok()?;
        (i >= FIRST_QPN && i < self.limits.qps && self.qps.get(i)?.used).then_some(i)
    }

    /// A used MR by key (index and tag must match).
    pub fn mr(&self, key: u32) -> Option<usize> {
        let i = (key >> 8) as usize;
        let m = self.mrs.get(i)?;
        (i < self.limits.mrs && m.used && m.tag == key as u8).then_some(i)
    }

    /// A free PD index.
    pub fn free_pd(&self) -> Option<usize> {
        (0..self.limits.pds).find(|&i| self.pds.get(i).is_some_and(|p| !p.used))
    }

    /// A free CQ index.
    pub fn free_cq(&self) -> Option<usize> {
        (0..self.limits.cqs).find(|&i| self.cqs.get(i).is_some_and(|c| !c.used))
    }

    /// A free QPN, searching round robin from `next_qp`.
    pub fn free_qp(&self) -> Option<usize> {
        let n = self.limits.qps;
        if n <= FIRST_QPN {
            return None;
        }
        let span = n - FIRST_QPN;
        let start = self.next_qp % span;
        (0..span)
            .map(|k| FIRST_QPN + (start + k) % span)
            .find(|&i| self.qps.get(i).is_some_and(|q| !q.used))
    }

    /// A free MR index, searching round robin from `next_mr`.
    pub fn free_mr(&self) -> Option<usize> {
        let n = self.limits.mrs;
        if n == 0 {
            return None;
        }
        let start = self.next_mr % n;
        (0..n).map(|k| (start + k) % n).find(|&i| self.mrs.get(i).is_some_and(|m| !m.used))
    }
}
