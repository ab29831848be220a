//! The safe driver API on any [`Device`]: query the device and port, protection domains,
//! memory regions, completion queues, RC queue pairs through the verbs state machine, posting
//! and polling, waiting for completions (blocking or async on tokio), asynchronous events.
//!
//! Objects are reference counted so that memory the device may still write is never freed
//! first: a QP keeps its PD and CQs alive, an MR its PD; dropping an object destroys it on the
//! device (firmware command) before its rings are unpinned and freed. `destroy_*` do the same
//! and return the error, if any.
//!
//! Layouts come from their single sources of truth: descriptors and rings from
//! `hematite_model::desc` (generated from `rtl/pkg/hm_desc_pkg.sv`), registers from
//! [`crate::regs`] (generated from `rtl/pkg/hm_regs_pkg.sv`), mailbox commands from
//! `hematite_firmware::mbox` and the attribute block from `hematite_firmware::qp`.

use crate::device::Device;
use crate::lock::SpinLock;
use crate::mem::{DmaBuf, Pins, Unpin};
use crate::regs;
use crate::{Error, Result};
use hematite_firmware::mbox;
use hematite_firmware::qp as fq;
use hematite_model::desc;
pub use hematite_model::transport::{Cqe, RecvWr, SendOp, SendWr, Sge, WcOpcode, WcStatus};
use std::collections::HashMap;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{fence, AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

/// Offset of the control core's host port in BAR0.
pub const FW_PORT: u64 = 0x1_0000;
/// Mailbox registers of the control core's host port (docs/control-core.md).
pub const FW_CMD_IN: u64 = FW_PORT;
pub const FW_CMD_OUT: u64 = FW_PORT + 0x100;
pub const FW_MBOX_DB: u64 = FW_PORT + 0x200;
pub const FW_MBOX_STATUS: u64 = FW_PORT + 0x204;
pub const FW_CORE_CTRL: u64 = FW_PORT + 0x208;

/// `ibv_access_flags` bits the device supports.
pub mod access {
    pub const LOCAL_WRITE: u32 = 1;
    pub const REMOTE_WRITE: u32 = 2;
    pub const REMOTE_READ: u32 = 4;
    pub const REMOTE_ATOMIC: u32 = 8;
}

/// `ibv_qp_attr_mask` bits (the firmware's MODIFY_QP mask).
pub mod mask {
    pub use hematite_firmware::qp::{
        M_ACCESS_FLAGS as ACCESS_FLAGS, M_AV as AV, M_CUR_STATE as CUR_STATE, M_DEST_QPN as DEST_QPN,
        M_MAX_DEST_RD_ATOMIC as MAX_DEST_RD_ATOMIC, M_MAX_QP_RD_ATOMIC as MAX_QP_RD_ATOMIC,
        M_MIN_RNR_TIMER as MIN_RNR_TIMER, M_PATH_MTU as PATH_MTU, M_PKEY_INDEX as PKEY_INDEX, M_PORT as PORT,
        M_RETRY_CNT as RETRY_CNT, M_RNR_RETRY as RNR_RETRY, M_RQ_PSN as RQ_PSN, M_SQ_PSN as SQ_PSN, M_STATE as STATE,
        M_TIMEOUT as TIMEOUT,
    };
}

/// QP states (ibverbs numbering), as the firmware's state machine defines them.
pub use hematite_firmware::qp::QpState;

fn qp_state(v: u32) -> Result<QpState> {
    QpState::from_u32(v).ok_or_else(|| Error::Device(format!("QP state {v}")))
}

/// What QUERY_DEVICE reports (ibv_device_attr's fields).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeviceAttr {
    pub fw_ver: u32,
    pub vendor_id: u32,
    pub vendor_part_id: u32,
    pub hw_ver: u32,
    pub max_qp: u32,
    pub max_qp_wr: u32,
    pub max_sge: u32,
    pub max_cq: u32,
    pub max_cqe: u32,
    pub max_mr: u32,
    pub max_pd: u32,
    pub max_mr_size: u64,
    pub page_size_cap: u64,
    pub max_qp_rd_atom: u32,
    pub max_qp_init_rd_atom: u32,
    pub atomic_cap: u32,
    pub max_inline_data: u32,
    pub phys_port_cnt: u32,
    pub num_comp_vectors: u32,
}

/// What QUERY_PORT reports (ibv_port_attr's fields).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PortAttr {
    pub state: u32,
    pub max_mtu: u32,
    pub active_mtu: u32,
    pub gid_tbl_len: u32,
    pub port_cap_flags: u32,
    pub max_msg_sz: u32,
    pub pkey_tbl_len: u32,
    pub link_layer: u32,
    pub active_speed: u32,
    pub active_width: u32,
    pub phys_state: u32,
}

/// An asynchronous event from the device's event queue.
pub use hematite_model::desc::Event as AsyncEvent;

/// A 16-byte GID.
pub type Gid = [u8; 16];

/// The IPv4-mapped GID of `ip` (`::ffff:a.b.c.d`), as RoCEv2 uses for IPv4.
pub fn gid_from_ipv4(ip: u32) -> Gid {
    let mut g = [0u8; 16];
    g[10] = 0xFF;
    g[11] = 0xFF;
    g[12..16].copy_from_slice(&ip.to_be_bytes());
    g
}

/// The IPv6 link-local GID of a port with MAC `mac`: fe80::/64 with the modified EUI-64
/// interface identifier (RFC 4291 appendix A), the address RoCEv2 over IPv6 uses by default.
pub fn gid_link_local(mac: u64) -> Gid {
    let m = mac.to_be_bytes();
    [0xfe, 0x80, 0, 0, 0, 0, 0, 0, m[2] ^ 0x02, m[3], m[4], 0xff, 0xfe, m[5], m[6], m[7]]
}

/// The MAC address inside an IPv6 link-local GID with a modified EUI-64 interface identifier
/// (`fe80::xxxx:xxff:fexx:xxxx`); None for any other GID (those need neighbour discovery).
pub fn mac_of_link_local(g: &Gid) -> Option<u64> {
    if g[..8] != [0xfe, 0x80, 0, 0, 0, 0, 0, 0] || g[11] != 0xff || g[12] != 0xfe {
        return None;
    }
    Some(u64::from_be_bytes([0, 0, g[8] ^ 0x02, g[9], g[10], g[13], g[14], g[15]]))
}

fn gid_words(g: &Gid) -> [u32; 4] {
    let mut w = [0u32; 4];
    for (i, x) in w.iter_mut().enumerate() {
        *x = u32::from_be_bytes(g[4 * i..4 * i + 4].try_into().unwrap());
    }
    w
}

/// Queue sizes asked for at QP creation (the device may round up; see [`Qp::caps`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpCaps {
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
    pub max_send_sge: u32,
    pub max_recv_sge: u32,
    pub max_inline_data: u32,
}

impl Default for QpCaps {
    fn default() -> Self {
        QpCaps { max_send_wr: 64, max_recv_wr: 64, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 64 }
    }
}

/// Attributes for [`Nic::modify_qp`] (the fields `mask` selects are used).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpAttr {
    pub qp_state: QpState,
    pub cur_qp_state: QpState,
    pub qp_access_flags: u32,
    pub pkey_index: u32,
    pub port_num: u32,
    pub path_mtu: u32,
    pub timeout: u32,
    pub retry_cnt: u32,
    pub rnr_retry: u32,
    pub rq_psn: u32,
    pub sq_psn: u32,
    pub max_rd_atomic: u32,
    pub max_dest_rd_atomic: u32,
    pub min_rnr_timer: u32,
    pub dest_qp_num: u32,
    pub sgid_index: u32,
    pub dgid: Gid,
    pub dmac: u64,
    pub hop_limit: u32,
    pub traffic_class: u32,
    pub flow_label: u32,
    pub udp_sport: u32,
}

impl Default for QpAttr {
    fn default() -> Self {
        QpAttr {
            qp_state: QpState::Reset,
            cur_qp_state: QpState::Reset,
            qp_access_flags: 0,
            pkey_index: 0,
            port_num: 1,
            path_mtu: 5,
            timeout: 14,
            retry_cnt: 7,
            rnr_retry: 7,
            rq_psn: 0,
            sq_psn: 0,
            max_rd_atomic: 4,
            max_dest_rd_atomic: 4,
            min_rnr_timer: 12,
            dest_qp_num: 0,
            sgid_index: 0,
            dgid: [0; 16],
            dmac: 0,
            hop_limit: 64,
            traffic_class: 0,
            flow_label: 0,
            udp_sport: 0,
        }
    }
}

impl QpAttr {
    fn words(&self) -> [u32; fq::ATTR_WORDS] {
        let mut w = [0u32; fq::ATTR_WORDS];
        w[fq::A_QP_STATE] = self.qp_state as u32;
        w[fq::A_CUR_QP_STATE] = self.cur_qp_state as u32;
        w[fq::A_ACCESS_FLAGS] = self.qp_access_flags;
        w[fq::A_PKEY_INDEX] = self.pkey_index;
        w[fq::A_PORT_NUM] = self.port_num;
        w[fq::A_PATH_MTU] = self.path_mtu;
        w[fq::A_TIMEOUT] = self.timeout;
        w[fq::A_RETRY_CNT] = self.retry_cnt;
        w[fq::A_RNR_RETRY] = self.rnr_retry;
        w[fq::A_RQ_PSN] = self.rq_psn;
        w[fq::A_SQ_PSN] = self.sq_psn;
        w[fq::A_MAX_RD_ATOMIC] = self.max_rd_atomic;
        w[fq::A_MAX_DEST_RD_ATOMIC] = self.max_dest_rd_atomic;
        w[fq::A_MIN_RNR_TIMER] = self.min_rnr_timer;
        w[fq::A_DEST_QPN] = self.dest_qp_num;
        w[fq::A_SGID_INDEX] = self.sgid_index;
        w[fq::A_DGID..fq::A_DGID + 4].copy_from_slice(&gid_words(&self.dgid));
        w[fq::A_DMAC_LO] = self.dmac as u32;
        w[fq::A_DMAC_HI] = (self.dmac >> 32) as u32;
        w[fq::A_HOP_LIMIT] = self.hop_limit;
        w[fq::A_TRAFFIC_CLASS] = self.traffic_class;
        w[fq::A_FLOW_LABEL] = self.flow_label;
        w[fq::A_UDP_SPORT] = self.udp_sport;
        w
    }

    fn from_words(w: &[u32]) -> Result<QpAttr> {
        if w.len() < fq::ATTR_WORDS {
            return Err(Error::Device("short QP attribute block".into()));
        }
        let mut g = [0u8; 16];
        for i in 0..4 {
            g[4 * i..4 * i + 4].copy_from_slice(&w[fq::A_DGID + i].to_be_bytes());
        }
        Ok(QpAttr {
            qp_state: qp_state(w[fq::A_QP_STATE])?,
            cur_qp_state: qp_state(w[fq::A_QP_STATE])?,
            qp_access_flags: w[fq::A_ACCESS_FLAGS],
            pkey_index: w[fq::A_PKEY_INDEX],
            port_num: w[fq::A_PORT_NUM],
            path_mtu: w[fq::A_PATH_MTU],
            timeout: w[fq::A_TIMEOUT],
            retry_cnt: w[fq::A_RETRY_CNT],
            rnr_retry: w[fq::A_RNR_RETRY],
            rq_psn: w[fq::A_RQ_PSN],
            sq_psn: w[fq::A_SQ_PSN],
            max_rd_atomic: w[fq::A_MAX_RD_ATOMIC],
            max_dest_rd_atomic: w[fq::A_MAX_DEST_RD_ATOMIC],
            min_rnr_timer: w[fq::A_MIN_RNR_TIMER],
            dest_qp_num: w[fq::A_DEST_QPN],
            sgid_index: w[fq::A_SGID_INDEX],
            dgid: g,
            dmac: w[fq::A_DMAC_LO] as u64 | (w[fq::A_DMAC_HI] as u64) << 32,
            hop_limit: w[fq::A_HOP_LIMIT],
            traffic_class: w[fq::A_TRAFFIC_CLASS],
            flow_label: w[fq::A_FLOW_LABEL],
            udp_sport: w[fq::A_UDP_SPORT],
        })
    }
}

/// What the other side of an RC connection tells us (exchanged out of band).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RcPeer {
    pub qpn: u32,
    /// The first PSN the peer sends with (our rq_psn).
    pub psn: u32,
    pub gid: Gid,
    pub mac: u64,
}

// ------------------------------------------------------------------------ shared state

struct Shared {
    dev: Box<dyn Device>,
    pins: Mutex<Pins>,
    mbox: Mutex<u8>,
    cmd_timeout: Duration,
    /// Registered MRs by lkey: (addr, len) for inline-data gathering.
    mrs: Mutex<HashMap<u32, (u64, u64)>>,
    /// QPs by number, for completion bookkeeping.
    qps: Mutex<HashMap<u32, Weak<QpInner>>>,
    /// Every QP's work-queue tracking, for [`Nic::sends_outstanding`] (upgrading one of
    /// these never runs a QP's destructor, unlike upgrading a `QpInner`).
    trks: Mutex<Vec<Weak<WqTrack>>>,
    /// The device failed for good ([`Device::failed`]): commands fail at once with EIO,
    /// destroying objects succeeds (they went with the device), and polling a CQ completes
    /// every outstanding work request with WR_FLUSH_ERR.
    fatal: AtomicBool,
}

struct PinOwner(Weak<Shared>);

impl Unpin for PinOwner {
    fn unpin(&self, addr: u64, len: u64) {
        if let Some(sh) = self.0.upgrade() {
            let mut p = sh.pins.lock().unwrap();
            if let Err(e) = p.unpin(sh.dev.as_ref(), addr, len) {
                if !sh.fatal.load(Ordering::Acquire) {
                    eprintln!("hostdrv: unpinning {addr:#x}+{len:#x}: {e}");
                }
            }
        }
    }
}

fn fatal_error() -> Error {
    Error::Device("the device has failed (fatal error): close it and open it again".into())
}

impl Shared {
    /// Whether the device failed for good; looks at the backend once more while it has not.
    fn check_fatal(&self) -> bool {
        if self.fatal.load(Ordering::Acquire) {
            return true;
        }
        if self.dev.failed() {
            self.fatal.store(true, Ordering::Release);
            for t in self.trks.lock().unwrap_or_else(|e| e.into_inner()).iter().filter_map(Weak::upgrade) {
                t.fatal.store(true, Ordering::Release);
            }
            return true;
        }
        false
    }

    fn cmd(&self, op: u16, args: &[u32]) -> Result<Vec<u32>> {
        if self.fatal.load(Ordering::Acquire) {
            return Err(fatal_error());
        }
        match self.cmd_once(op, args) {
            Err(_) if self.check_fatal() => Err(fatal_error()),
            r => r,
        }
    }

    fn cmd_once(&self, op: u16, args: &[u32]) -> Result<Vec<u32>> {
        if args.len() > mbox::MAX_ARGS {
            return Err(Error::inval("firmware command too long"));
        }
        let mut tok = self.mbox.lock().map_err(|_| Error::Device("mailbox lock poisoned".into()))?;
        *tok = tok.wrapping_add(1);
        let token = *tok;
        let dev = self.dev.as_ref();
        let st0 = dev.read32(FW_MBOX_STATUS)?;
        if st0 & 0b1100 != 0 {
            return Err(Error::Device(format!("control core stopped (mailbox status {st0:#x}: fault/trap)")));
        }
        if st0 & 1 != 0 {
            return Err(Error::Busy("a firmware command is still pending".into()));
        }
        dev.write32(FW_CMD_IN, mbox::Header::word(op, args.len() as u8, token))?;
        for (i, a) in args.iter().enumerate() {
            dev.write32(FW_CMD_IN + 4 * (i as u64 + 1), *a)?;
        }
        dev.write32(FW_MBOX_DB, 1)?;
        let t0 = Instant::now();
        let mut polls = 0u32;
        loop {
            let st = dev.read32(FW_MBOX_STATUS)?;
            if st & 0b1100 != 0 {
                return Err(Error::Device(format!("control core fault/trap during command {op:#x} (status {st:#x})")));
            }
            if st >> 16 != st0 >> 16 && st & 1 == 0 {
                break;
            }
            if t0.elapsed() > self.cmd_timeout {
                return Err(Error::Timeout(format!("firmware command {op:#04x} not answered in {:?}", self.cmd_timeout)));
            }
            polls += 1;
            if polls > 64 {
                std::thread::sleep(Duration::from_micros(200));
            }
        }
        let h = dev.read32(FW_CMD_OUT)?;
        let status = h as u8;
        let n = ((h >> 8) & 0xFF) as usize;
        if (h >> 24) as u8 != token {
            return Err(Error::Device(format!("answer token {} for command token {token}", h >> 24)));
        }
        if status != 0 {
            return Err(Error::Firmware { opcode: op, status });
        }
        if n > mbox::MAX_ARGS {
            return Err(Error::Device(format!("answer claims {n} words")));
        }
        let mut out = Vec::with_capacity(n);
        for i in 0..n {
            out.push(dev.read32(FW_CMD_OUT + 4 * (i as u64 + 1))?);
        }
        Ok(out)
    }

    fn buf(self: &Arc<Shared>, len: usize) -> Result<DmaBuf> {
        let owner: Arc<dyn Unpin> = Arc::new(PinOwner(Arc::downgrade(self)));
        DmaBuf::new(len, owner, |a, l| self.pins.lock().unwrap().pin(self.dev.as_ref(), a, l))
    }
}

fn need(out: &[u32], n: usize, what: &str) -> Result<()> {
    if out.len() < n {
        return Err(Error::Device(format!("{what}: {} answer words, expected {n}", out.len())));
    }
    Ok(())
}

// ------------------------------------------------------------------------ objects

struct PdInner {
    sh: Arc<Shared>,
    id: u32,
    live: Mutex<bool>,
}

impl Drop for PdInner {
    fn drop(&mut self) {
        if *self.live.lock().unwrap() {
            let _ = self.sh.cmd(mbox::OP_DEALLOC_PD, &[self.id]);
        }
    }
}

/// A protection domain.
#[derive(Clone)]
pub struct Pd(Arc<PdInner>);

impl Pd {
    /// Handles to this object alive (clones, and the QPs / MRs that use it).
    pub fn users(&self) -> usize {
        Arc::strong_count(&self.0)
    }
    /// The PD handle.
    pub fn id(&self) -> u32 {
        self.0.id
    }
}

enum MrMem {
    Owned(DmaBuf),
    /// Memory the caller owns; pinned pages [addr, addr+len).
    Raw(u64, u64),
    /// Memory the caller owns, seen by the device at another address: a DMA window of its own
    /// (IOVA of the first page, length), mapped to the memory's pages.
    Translated(u64, u64),
}

struct MrInner {
    sh: Arc<Shared>,
    _pd: Pd,
    key: u32,
    addr: u64,
    len: u64,
    mem: MrMem,
    live: Mutex<bool>,
}

impl Drop for MrInner {
    fn drop(&mut self) {
        if *self.live.lock().unwrap() {
            let _ = self.sh.cmd(mbox::OP_DEREG_MR, &[self.key]);
        }
        self.sh.mrs.lock().unwrap().remove(&self.key);
        match self.mem {
            MrMem::Raw(a, l) => {
                let _ = self.sh.pins.lock().unwrap().unpin(self.sh.dev.as_ref(), a, l);
            }
            MrMem::Translated(iova, l) => {
                let _ = self.sh.dev.dma_unmap(iova, l);
            }
            MrMem::Owned(_) => {}
        }
    }
}

/// A registered memory region.
#[derive(Clone)]
pub struct Mr(Arc<MrInner>);

impl Mr {
    /// Handles to this object alive (clones, and the QPs / MRs that use it).
    pub fn users(&self) -> usize {
        Arc::strong_count(&self.0)
    }
    pub fn lkey(&self) -> u32 {
        self.0.key
    }
    pub fn rkey(&self) -> u32 {
        self.0.key
    }
    /// First address (= IOVA).
    pub fn addr(&self) -> u64 {
        self.0.addr
    }
    pub fn len(&self) -> u64 {
        self.0.len
    }
    pub fn is_empty(&self) -> bool {
        self.0.len == 0
    }
    /// The buffer behind an MR made by [`Nic::alloc_mr`].
    pub fn buf(&self) -> Option<&DmaBuf> {
        match &self.0.mem {
            MrMem::Owned(b) => Some(b),
            MrMem::Raw(..) | MrMem::Translated(..) => None,
        }
    }
    /// An SGE covering `off..off + len` of the region.
    pub fn sge(&self, off: u64, len: u32) -> Sge {
        Sge { addr: self.0.addr + off, len, lkey: self.0.key }
    }
}

struct CqState {
    /// Entries consumed (the consumer index, not wrapped).
    ci: u32,
    /// Consumer index last told to the device.
    ci_told: u32,
    /// The work-queue trackers of the QPs completing into this CQ (a short list: usually one
    /// or two QPs), so that retiring a completion needs no global lookup.
    qps: Vec<(u32, Arc<WqTrack>)>,
}

struct CqInner {
    sh: Arc<Shared>,
    cqn: u32,
    log: u8,
    vector: u32,
    ring: DmaBuf,
    st: SpinLock<CqState>,
    live: Mutex<bool>,
}

impl Drop for CqInner {
    fn drop(&mut self) {
        if *self.live.lock().unwrap() {
            let _ = self.sh.cmd(mbox::OP_DESTROY_CQ, &[self.cqn]);
        }
    }
}

/// A completion queue.
#[derive(Clone)]
pub struct Cq(Arc<CqInner>);

impl Cq {
    /// Handles to this object alive (clones, and the QPs / MRs that use it).
    pub fn users(&self) -> usize {
        Arc::strong_count(&self.0)
    }
    pub fn cqn(&self) -> u32 {
        self.0.cqn
    }
    /// Entries in the ring.
    pub fn entries(&self) -> u32 {
        1 << self.0.log
    }
    /// The interrupt vector the CQ raises when armed.
    pub fn vector(&self) -> u32 {
        self.0.vector
    }
}

/// Ring occupancy of a QP's two work queues. The producer indices are written by the posting
/// thread (under the queue's lock), the done counters by whoever polls the queue's CQ (under
/// the CQ's lock): one writer each, so plain atomics suffice and polling takes no QP lock.
#[derive(Default)]
struct WqTrack {
    /// Send queue producer index (not wrapped).
    sq_pi: AtomicU32,
    /// Send queue slots the device finished with (not wrapped).
    sq_done: AtomicU32,
    rq_pi: AtomicU32,
    rq_done: AtomicU32,
    /// The engine moved the QP to ERR (an error completion or a QP-fatal event); the firmware
    /// learns it at the next query.
    errored: AtomicBool,
    /// Completions of the send / receive queue from before the last transition to RESET that
    /// were still in the CQ then: they are skipped when polled, since their indices name
    /// slots of the queue as it was (a flushed WQE's completion would otherwise free a slot
    /// of the new queue that still holds a posted WQE, which the next post overwrites).
    stale_sq: AtomicU32,
    stale_rq: AtomicU32,
    /// The rings (address, log2 of the slots, stride) and the CQs, for the flush completions
    /// the driver makes itself after a fatal device error ([`Nic::poll_cq_raw`]).
    sq_ring: (usize, u8, usize),
    rq_ring: (usize, u8, usize),
    scqn: u32,
    rcqn: u32,
    /// The device failed for good (a copy of `Shared::fatal` where the posting fast path
    /// already looks: [`SqPost::fatal`]).
    fatal: AtomicBool,
}

impl WqTrack {
    fn reset(&self) {
        for a in [&self.sq_pi, &self.sq_done, &self.rq_pi, &self.rq_done] {
            a.store(0, Ordering::Release);
        }
    }
}

struct QpInner {
    sh: Arc<Shared>,
    qpn: u32,
    _pd: Pd,
    _scq: Cq,
    _rcq: Cq,
    sq: DmaBuf,
    rq: DmaBuf,
    sq_log: u8,
    sq_stride: usize,
    rq_log: u8,
    rq_stride: usize,
    caps: QpCaps,
    /// Held while posting to the send / receive queue.
    sq_lock: SpinLock<()>,
    rq_lock: SpinLock<()>,
    trk: Arc<WqTrack>,
    live: Mutex<bool>,
}

impl Drop for QpInner {
    fn drop(&mut self) {
        if *self.live.lock().unwrap() {
            if let Err(e) = self.sh.cmd(mbox::OP_DESTROY_QP, &[self.qpn]) {
                eprintln!("hostdrv: destroying QP {}: {e}", self.qpn);
            }
        }
        self.sh.qps.lock().unwrap().remove(&self.qpn);
        for cq in [&self._scq, &self._rcq] {
            cq.0.st.lock().qps.retain(|(n, _)| *n != self.qpn);
        }
    }
}

/// An RC queue pair.
#[derive(Clone)]
pub struct Qp(Arc<QpInner>);

impl Qp {
    /// Handles to this object alive (clones, and the QPs / MRs that use it).
    pub fn users(&self) -> usize {
        Arc::strong_count(&self.0)
    }
    pub fn qpn(&self) -> u32 {
        self.0.qpn
    }
    /// The capacities the device granted.
    pub fn caps(&self) -> QpCaps {
        self.0.caps
    }
}

/// Smallest `s` in 0..=3 with `64 << s` bytes holding `need` bytes.
fn stride_log(need: usize) -> Option<u8> {
    (0u8..=3).find(|s| (64usize << s) >= need)
}

/// Send/receive ring slots up to a completion's (`idx`, the 16-bit slot counter of the
/// completed WQE) are free again; everything before it completed too (unsignaled WQEs are
/// retired by a later signaled one). A stale or duplicate index changes nothing.
#[inline(always)]
fn retire(qps: &[(u32, Arc<WqTrack>)], qpn: u32, idx: u16, rq: bool, ok: bool) {
    let Some((_, t)) = qps.iter().find(|(n, _)| *n == qpn) else { return };
    let stale = if rq { &t.stale_rq } else { &t.stale_sq };
    if stale.load(Ordering::Relaxed) != 0 {
        // a completion from before the QP's last RESET (see WqTrack::stale_sq)
        stale.fetch_sub(1, Ordering::Relaxed);
        return;
    }
    if !ok {
        t.errored.store(true, Ordering::Release);
    }
    let (pi, done) = if rq { (&t.rq_pi, &t.rq_done) } else { (&t.sq_pi, &t.sq_done) };
    let d = done.load(Ordering::Relaxed);
    let outstanding = pi.load(Ordering::Acquire).wrapping_sub(d);
    let ahead = (idx as u32).wrapping_sub(d) & 0xFFFF;
    if ahead < outstanding {
        done.store(d.wrapping_add(ahead + 1), Ordering::Release);
    }
}

fn log2_ceil(n: u32) -> u8 {
    (32 - n.max(1).saturating_sub(1).leading_zeros()) as u8
}

// ------------------------------------------------------------------------ the NIC

/// An opened Hematite device.
pub struct Nic {
    sh: Arc<Shared>,
    attr: DeviceAttr,
    eq: Option<Cq>,
    irq: Mutex<HashMap<u32, Arc<OwnedFd>>>,
    mac: Option<u64>,
    ipv4: Option<u32>,
}

/// Options for [`Nic::open_with`].
#[derive(Debug, Clone)]
pub struct OpenOptions {
    /// How long a firmware command may take (the simulated device runs ~1000x slower than
    /// hardware; its first command also waits for the firmware's start-up).
    pub cmd_timeout: Duration,
    /// Set up the event queue (a 256-entry CQ on vector 0).
    pub events: bool,
    /// Program GID 0 from the device's MAC and IPv4 address when the backend knows them.
    pub set_gid: bool,
}

impl Default for OpenOptions {
    fn default() -> Self {
        let secs = std::env::var("HM_CMD_TIMEOUT_S").ok().and_then(|s| s.parse().ok()).unwrap_or(120);
        OpenOptions { cmd_timeout: Duration::from_secs(secs), events: true, set_gid: true }
    }
}

impl Drop for Nic {
    fn drop(&mut self) {
        // the event queue's ring may only go once the engine no longer writes it
        if let Some(eq) = self.eq.take() {
            if self.sh.cmd(mbox::OP_SET_EQ, &[eq.cqn(), 0]).is_err() {
                // The firmware did not turn events off (it hangs, e.g. after a command timed
                // out, or the device is gone). A function reset stops the engine; then the
                // ring may go, and with it the last hold on the device. Only when the reset
                // fails too on a device not known to be dead is the ring kept (leaked): the
                // device may still write events into it.
                if self.sh.check_fatal() || self.sh.dev.reset().is_ok() {
                    *eq.0.live.lock().unwrap() = false;
                    drop(eq);
                } else {
                    std::mem::forget(eq);
                }
            }
        }
    }
}

/// DCQCN parameter sets ([`Nic::set_cc_preset`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CcPreset {
    /// NVIDIA's published defaults (the engine's reset values).
    Nvidia,
    /// The DCQCN paper's parameters (docs/dcqcn.md).
    Paper,
}

fn cc_index(name: &str) -> Result<usize> {
    use hematite_model::dcqcn::CC_NAMES;
    CC_NAMES
        .iter()
        .position(|n| *n == name)
        .ok_or_else(|| Error::InvalidArgument(format!("no DCQCN parameter {name:?} (known: {})", CC_NAMES.join(", "))))
}

impl Nic {
    /// Opens `dev` with the default options.
    pub fn open(dev: Box<dyn Device>) -> Result<Nic> {
        Nic::open_with(dev, OpenOptions::default())
    }

    /// Checks the identity register, waits for the firmware, reads the device attributes,
    /// programs GID 0 and the event queue.
    pub fn open_with(dev: Box<dyn Device>, o: OpenOptions) -> Result<Nic> {
        let id = dev.read32(regs::HM_REG_ID as u64)?;
        if id != regs::HM_ID_VALUE {
            return Err(Error::Device(format!("BAR0 identity {id:#010x}, expected {:#010x} (not a Hematite function?)", regs::HM_ID_VALUE)));
        }
        let st = dev.read32(FW_MBOX_STATUS)?;
        if st & 2 == 0 {
            return Err(Error::Device(format!("the control core is not running (mailbox status {st:#x})")));
        }
        let mac = dev.info().mac;
        let ipv4 = dev.info().ipv4;
        let sh = Arc::new(Shared {
            dev,
            pins: Mutex::new(Pins::default()),
            mbox: Mutex::new(0),
            cmd_timeout: o.cmd_timeout,
            mrs: Mutex::new(HashMap::new()),
            qps: Mutex::new(HashMap::new()),
            trks: Mutex::new(Vec::new()),
            fatal: AtomicBool::new(false),
        });
        let mut nic = Nic { sh, attr: DeviceAttr::default(), eq: None, irq: Mutex::new(HashMap::new()), mac, ipv4 };
        nic.attr = nic.query_device()?;
        if o.set_gid {
            if let (Some(m), Some(ip)) = (mac, ipv4) {
                nic.set_gid(0, &gid_from_ipv4(ip), m)?;
            }
            if let Some(m) = mac {
                nic.set_gid(1, &gid_link_local(m), m)?;
            }
        }
        if o.events {
            let eq = nic.create_cq(256, None)?;
            nic.sh.cmd(mbox::OP_SET_EQ, &[eq.cqn(), 1])?;
            nic.eq = Some(eq);
        }
        Ok(nic)
    }

    /// The device underneath.
    pub fn device(&self) -> &dyn Device {
        self.sh.dev.as_ref()
    }

    /// Attributes read at open.
    pub fn attr(&self) -> &DeviceAttr {
        &self.attr
    }

    /// Whether the driver set up the event queue (it takes one of the device's CQs).
    pub fn has_event_queue(&self) -> bool {
        self.eq.is_some()
    }

    /// The port's MAC and IPv4 address, when the backend knows them.
    pub fn mac(&self) -> Option<u64> {
        self.mac
    }
    pub fn ipv4(&self) -> Option<u32> {
        self.ipv4
    }

    /// Whether some QP has send work requests whose completions have not been polled yet
    /// (a requester that may be waiting for ACKs, responses or its retransmission timer).
    pub fn sends_outstanding(&self) -> bool {
        self.sh.trks.lock().unwrap().iter().filter_map(Weak::upgrade).any(|t| {
            !t.errored.load(Ordering::Acquire) && t.sq_pi.load(Ordering::Acquire) != t.sq_done.load(Ordering::Acquire)
        })
    }

    /// Tells the device that its host is waiting on it: one register read. A co-simulated
    /// device process slows its clock down when nothing has happened for a while (see
    /// docs/sim-device.md); a host with work outstanding calls this periodically, so that
    /// timers such as the ACK timeout expire at full simulation speed. On hardware it is a
    /// harmless read.
    pub fn keepalive(&self) -> Result<()> {
        self.sh.dev.read32(regs::HM_REG_ID as u64).map(|_| ())
    }

    /// Whether the device has failed for good (the flag only; see [`Nic::check_fatal`]).
    #[inline(always)]
    pub fn is_fatal(&self) -> bool {
        self.sh.fatal.load(Ordering::Relaxed)
    }

    /// Whether the device has failed for good, asking the backend ([`Device::failed`]) while
    /// the flag is not set: the simulated device process died or closed the connection. From
    /// then on commands fail with EIO (`Error::Device`), destroying objects succeeds, and
    /// polling completes every outstanding work request with WR_FLUSH_ERR. The verbs
    /// provider's event thread calls this every 100 ms and reports `IBV_EVENT_DEVICE_FATAL`.
    pub fn check_fatal(&self) -> bool {
        self.sh.check_fatal()
    }

    /// Raw firmware command (opcode, argument words) -> answer words.
    pub fn fw_command(&self, op: u16, args: &[u32]) -> Result<Vec<u32>> {
        self.sh.cmd(op, args)
    }

    /// QUERY_DEVICE.
    pub fn query_device(&self) -> Result<DeviceAttr> {
        let w = self.sh.cmd(mbox::OP_QUERY_DEVICE, &[])?;
        need(&w, 21, "QUERY_DEVICE")?;
        Ok(DeviceAttr {
            fw_ver: w[0],
            vendor_id: w[1],
            vendor_part_id: w[2],
            hw_ver: w[3],
            max_qp: w[4],
            max_qp_wr: w[5],
            max_sge: w[6],
            max_cq: w[7],
            max_cqe: w[8],
            max_mr: w[9],
            max_pd: w[10],
            max_mr_size: w[11] as u64 | (w[12] as u64) << 32,
            page_size_cap: w[13] as u64 | (w[14] as u64) << 32,
            max_qp_rd_atom: w[15],
            max_qp_init_rd_atom: w[16],
            atomic_cap: w[17],
            max_inline_data: w[18],
            phys_port_cnt: w[19],
            num_comp_vectors: w[20],
        })
    }

    /// QUERY_PORT (port 1 is the only port).
    pub fn query_port(&self, port: u32) -> Result<PortAttr> {
        let w = self.sh.cmd(mbox::OP_QUERY_PORT, &[port])?;
        need(&w, 11, "QUERY_PORT")?;
        Ok(PortAttr {
            state: w[0],
            max_mtu: w[1],
            active_mtu: w[2],
            gid_tbl_len: w[3],
            port_cap_flags: w[4],
            max_msg_sz: w[5],
            pkey_tbl_len: w[6],
            link_layer: w[7],
            active_speed: w[8],
            active_width: w[9],
            phys_state: w[10],
        })
    }

    /// QUERY_COUNTERS: firmware counters (commands, answers per status), then the engine's.
    pub fn counters(&self) -> Result<Vec<u32>> {
        self.sh.cmd(mbox::OP_QUERY_COUNTERS, &[])
    }

    /// QUERY_RESOURCES: the PDs, CQs, MRs and QPs in use on the device (the firmware's tables),
    /// in that order.
    pub fn resources(&self) -> Result<[u32; 4]> {
        let w = self.sh.cmd(mbox::OP_QUERY_RESOURCES, &[])?;
        match w[..] {
            [pd, cq, mr, qp, ..] => Ok([pd, cq, mr, qp]),
            _ => Err(Error::Device(format!("QUERY_RESOURCES answered {} words, not 4", w.len()))),
        }
    }

    /// GET_CC_PARAMS: the 19 DCQCN parameters of the device (the firmware's `CC_TABLE` order
    /// and units: Mb/s, µs, bytes; docs/dcqcn.md).
    pub fn cc_params(&self) -> Result<Vec<u32>> {
        self.sh.cmd(mbox::OP_GET_CC_PARAMS, &[])
    }

    /// SET_CC_PARAMS: sets the parameters whose bit is set in `mask` to `values[i]`, all or
    /// nothing (an out-of-range value is refused with BAD_PARAM and changes nothing); the
    /// firmware then rewrites the engine's congestion-control registers.
    pub fn set_cc_params(&self, mask: u32, values: &[u32; 19]) -> Result<()> {
        let mut a = Vec::with_capacity(20);
        a.push(mask);
        a.extend_from_slice(values);
        self.sh.cmd(mbox::OP_SET_CC_PARAMS, &a).map(|_| ())
    }

    /// Loads a whole DCQCN parameter set ([`CcPreset`]) with one SET_CC_PARAMS.
    pub fn set_cc_preset(&self, preset: CcPreset) -> Result<()> {
        use hematite_model::dcqcn::{CC_PARAMS, NVIDIA_DEFAULTS, PAPER};
        let v = match preset {
            CcPreset::Nvidia => NVIDIA_DEFAULTS,
            CcPreset::Paper => PAPER,
        };
        self.set_cc_params((1u32 << CC_PARAMS) - 1, &v)
    }

    /// One DCQCN parameter by its firmware name (`rpg_time_reset`, `min_time_between_cnps`,
    /// ...; [`hematite_model::dcqcn::CC_NAMES`], units as there).
    pub fn cc_param(&self, name: &str) -> Result<u32> {
        let i = cc_index(name)?;
        let v = self.cc_params()?;
        v.get(i).copied().ok_or_else(|| Error::Device(format!("GET_CC_PARAMS answered {} words", v.len())))
    }

    /// Sets one DCQCN parameter by its firmware name; an out-of-range value is refused by the
    /// firmware (BAD_PARAM) and changes nothing.
    pub fn set_cc_param(&self, name: &str, value: u32) -> Result<()> {
        let i = cc_index(name)?;
        let mut v = [0u32; hematite_model::dcqcn::CC_PARAMS];
        v[i] = value;
        self.set_cc_params(1 << i, &v)
    }

    /// Sets GID table entry `index` (and the MAC the port sends from).
    pub fn set_gid(&self, index: u32, gid: &Gid, mac: u64) -> Result<()> {
        let g = gid_words(gid);
        self.sh.cmd(mbox::OP_SET_GID, &[index, g[0], g[1], g[2], g[3], mac as u32, (mac >> 32) as u32]).map(|_| ())
    }

    /// Allocates a protection domain.
    pub fn alloc_pd(&self) -> Result<Pd> {
        let w = self.sh.cmd(mbox::OP_ALLOC_PD, &[])?;
        need(&w, 1, "ALLOC_PD")?;
        Ok(Pd(Arc::new(PdInner { sh: self.sh.clone(), id: w[0], live: Mutex::new(true) })))
    }

    /// The firmware command that destroys an object; on success its `Drop` does nothing more.
    /// After a fatal device error the object went with the device: destroying it succeeds
    /// (as with mlx5, so that a program can tear down and close the device).
    fn destroy(&self, op: u16, id: u32, live: &Mutex<bool>) -> Result<()> {
        match self.sh.cmd(op, &[id]) {
            Ok(_) => {}
            Err(_) if self.sh.check_fatal() => {}
            Err(e) => return Err(e),
        }
        *live.lock().unwrap() = false;
        Ok(())
    }

    /// Deallocates `pd` (fails with Busy while MRs or QPs use it; a clone elsewhere counts).
    pub fn dealloc_pd(&self, pd: Pd) -> Result<()> {
        let inner = Arc::try_unwrap(pd.0).map_err(|_| Error::Busy("PD still referenced (MRs, QPs or clones)".into()))?;
        self.destroy(mbox::OP_DEALLOC_PD, inner.id, &inner.live)
    }

    /// Allocates a zeroed DMA buffer of `len` bytes (pinned; not registered).
    pub fn alloc_buf(&self, len: usize) -> Result<DmaBuf> {
        self.sh.buf(len)
    }

    /// Allocates a buffer of `len` bytes and registers it as an MR.
    pub fn alloc_mr(&self, pd: &Pd, len: usize, access_flags: u32) -> Result<Mr> {
        if len == 0 {
            return Err(Error::inval("MR of 0 bytes"));
        }
        let buf = self.sh.buf(len)?;
        let addr = buf.addr();
        self.reg(pd, addr, len as u64, access_flags, MrMem::Owned(buf))
    }

    /// Registers caller-owned memory `[addr, addr + len)`.
    ///
    /// # Safety
    /// The memory must stay allocated (and not be handed to anyone who would be hurt by the
    /// device writing it, within the access flags) until the returned MR and every clone of it
    /// are dropped: the device reads and writes it by address.
    pub unsafe fn reg_mr_raw(&self, pd: &Pd, addr: u64, len: u64, access_flags: u32) -> Result<Mr> {
        if len == 0 || addr.checked_add(len).is_none() {
            return Err(Error::inval(format!("MR {addr:#x}+{len:#x}")));
        }
        self.sh.pins.lock().unwrap().pin(self.sh.dev.as_ref(), addr, len)?;
        self.reg(pd, addr, len, access_flags, MrMem::Raw(addr, len))
    }

    /// Registers caller-owned memory `[addr, addr + len)` that the device (and remote peers)
    /// address as `[iova, iova + len)` (`ibv_reg_mr_iova`). The memory gets a DMA window of its
    /// own from `iova`'s page to the memory's pages, so `iova` and `addr` must have the same
    /// offset in their 4 KiB page, and the IOVA range must not overlap other windows (which
    /// sit at the process's own addresses).
    ///
    /// # Safety
    /// As [`Nic::reg_mr_raw`].
    pub unsafe fn reg_mr_iova(&self, pd: &Pd, addr: u64, len: u64, iova: u64, access_flags: u32) -> Result<Mr> {
        if iova == addr {
            // SAFETY: the caller's guarantee.
            return unsafe { self.reg_mr_raw(pd, addr, len, access_flags) };
        }
        if len == 0 || addr.checked_add(len + 4095).is_none() || iova.checked_add(len + 4095).is_none() {
            return Err(Error::inval(format!("MR {addr:#x}+{len:#x} at IOVA {iova:#x}")));
        }
        if (iova ^ addr) & 4095 != 0 {
            return Err(Error::inval(format!("IOVA {iova:#x} and address {addr:#x} have different offsets in their 4 KiB page")));
        }
        let vp = addr & !4095;
        let ip = iova & !4095;
        let l = ((addr + len + 4095) & !4095) - vp;
        self.sh.dev.dma_map(ip, vp, l, true)?;
        self.reg(pd, iova, len, access_flags, MrMem::Translated(ip, l))
    }

    fn reg(&self, pd: &Pd, addr: u64, len: u64, access_flags: u32, mem: MrMem) -> Result<Mr> {
        let r = self.sh.cmd(mbox::OP_REG_MR, &[pd.id(), addr as u32, (addr >> 32) as u32, len as u32, (len >> 32) as u32, access_flags]);
        let w = match r {
            Ok(w) => w,
            Err(e) => {
                match mem {
                    MrMem::Raw(a, l) => {
                        let _ = self.sh.pins.lock().unwrap().unpin(self.sh.dev.as_ref(), a, l);
                    }
                    MrMem::Translated(iova, l) => {
                        let _ = self.sh.dev.dma_unmap(iova, l);
                    }
                    MrMem::Owned(_) => {}
                }
                return Err(e);
            }
        };
        need(&w, 2, "REG_MR")?;
        if !matches!(mem, MrMem::Translated(..)) {
            // (inline gathering reads the memory by its address, which a translated MR's is not)
            self.sh.mrs.lock().unwrap().insert(w[0], (addr, len));
        }
        Ok(Mr(Arc::new(MrInner { sh: self.sh.clone(), _pd: pd.clone(), key: w[0], addr, len, mem, live: Mutex::new(true) })))
    }

    /// Deregisters `mr` (Busy while a clone exists).
    pub fn dereg_mr(&self, mr: Mr) -> Result<()> {
        let inner = Arc::try_unwrap(mr.0).map_err(|_| Error::Busy("MR still referenced (clones)".into()))?;
        self.destroy(mbox::OP_DEREG_MR, inner.key, &inner.live)
    }

    fn vector_fd(&self, vector: u32) -> Result<Arc<OwnedFd>> {
        let mut m = self.irq.lock().unwrap();
        if let Some(f) = m.get(&vector) {
            return Ok(f.clone());
        }
        // SAFETY: eventfd(2) with valid flags; the result is checked and owned below.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if fd < 0 {
            return Err(Error::last_os("eventfd"));
        }
        // SAFETY: a new descriptor nobody else owns.
        let fd = Arc::new(unsafe { OwnedFd::from_raw_fd(fd) });
        self.sh.dev.set_irq(vector, Some(fd.as_raw_fd()))?;
        m.insert(vector, fd.clone());
        Ok(fd)
    }

    /// Creates a CQ of at least `entries` entries; `vector` is the interrupt vector it raises
    /// when armed (None: vector 0).
    pub fn create_cq(&self, entries: u32, vector: Option<u32>) -> Result<Cq> {
        if entries == 0 || entries > self.attr.max_cqe.min(1 << 16) {
            return Err(Error::inval(format!("CQ of {entries} entries (max {})", self.attr.max_cqe)));
        }
        let vector = vector.unwrap_or(0);
        if vector >= self.sh.dev.info().num_irqs {
            return Err(Error::inval(format!("interrupt vector {vector} (the device has {})", self.sh.dev.info().num_irqs)));
        }
        let log = log2_ceil(entries).max(1);
        let ring = self.sh.buf((1usize << log) * desc::CQE_BYTES)?;
        let base = ring.addr();
        let w = self.sh.cmd(mbox::OP_CREATE_CQ, &[log as u32, base as u32, (base >> 32) as u32, vector])?;
        need(&w, 1, "CREATE_CQ")?;
        Ok(Cq(Arc::new(CqInner {
            sh: self.sh.clone(),
            cqn: w[0],
            log,
            vector,
            ring,
            st: SpinLock::new(CqState { ci: 0, ci_told: 0, qps: Vec::new() }),
            live: Mutex::new(true),
        })))
    }

    /// Destroys `cq` (Busy while QPs use it).
    pub fn destroy_cq(&self, cq: Cq) -> Result<()> {
        let inner = Arc::try_unwrap(cq.0).map_err(|_| Error::Busy("CQ still referenced (QPs or clones)".into()))?;
        self.destroy(mbox::OP_DESTROY_CQ, inner.cqn, &inner.live)
    }

    /// Creates an RC QP in RESET.
    pub fn create_qp(&self, pd: &Pd, send_cq: &Cq, recv_cq: &Cq, caps: QpCaps) -> Result<Qp> {
        let a = &self.attr;
        if caps.max_send_wr == 0 || caps.max_send_wr > a.max_qp_wr || caps.max_recv_wr > a.max_qp_wr {
            return Err(Error::inval(format!("queue sizes {} / {} (max {})", caps.max_send_wr, caps.max_recv_wr, a.max_qp_wr)));
        }
        if caps.max_send_sge > a.max_sge || caps.max_recv_sge > a.max_sge || caps.max_inline_data > a.max_inline_data {
            return Err(Error::inval(format!(
                "SGEs {} / {}, inline {} (max {} SGEs, {} inline bytes)",
                caps.max_send_sge, caps.max_recv_sge, caps.max_inline_data, a.max_sge, a.max_inline_data
            )));
        }
        let s_need = (32 + 16 * caps.max_send_sge.max(2) as usize).max(32 + caps.max_inline_data as usize);
        let ss = stride_log(s_need).ok_or_else(|| Error::inval("send WQE larger than 512 bytes"))?;
        let rs = stride_log(16 + 16 * caps.max_recv_sge.max(1) as usize).ok_or_else(|| Error::inval("receive WQE too large"))?;
        let sl = log2_ceil(caps.max_send_wr).max(1);
        let rl = log2_ceil(caps.max_recv_wr.max(1)).max(1);
        let sq = self.sh.buf((1usize << sl) * (64 << ss))?;
        let rq = self.sh.buf((1usize << rl) * (64 << rs))?;
        let (sb, rb) = (sq.addr(), rq.addr());
        let w = self.sh.cmd(
            mbox::OP_CREATE_QP,
            &[
                pd.id(),
                send_cq.cqn(),
                recv_cq.cqn(),
                2,
                sb as u32,
                (sb >> 32) as u32,
                rb as u32,
                (rb >> 32) as u32,
                sl as u32,
                ss as u32,
                rl as u32,
                rs as u32,
                caps.max_send_wr,
                caps.max_recv_wr,
                caps.max_send_sge,
                caps.max_recv_sge,
                caps.max_inline_data,
            ],
        )?;
        need(&w, 6, "CREATE_QP")?;
        let got = QpCaps { max_send_wr: w[1], max_recv_wr: w[2], max_send_sge: w[3], max_recv_sge: w[4], max_inline_data: w[5] };
        let inner = Arc::new(QpInner {
            sh: self.sh.clone(),
            qpn: w[0],
            _pd: pd.clone(),
            _scq: send_cq.clone(),
            _rcq: recv_cq.clone(),
            sq,
            rq,
            sq_log: sl,
            sq_stride: 64 << ss,
            rq_log: rl,
            rq_stride: 64 << rs,
            caps: got,
            sq_lock: SpinLock::new(()),
            rq_lock: SpinLock::new(()),
            trk: Arc::new(WqTrack {
                sq_ring: (sb as usize, sl, 64 << ss),
                rq_ring: (rb as usize, rl, 64 << rs),
                scqn: send_cq.cqn(),
                rcqn: recv_cq.cqn(),
                ..WqTrack::default()
            }),
            live: Mutex::new(true),
        });
        self.sh.qps.lock().unwrap().insert(w[0], Arc::downgrade(&inner));
        {
            let mut t = self.sh.trks.lock().unwrap();
            t.retain(|w| w.strong_count() > 0);
            t.push(Arc::downgrade(&inner.trk));
        }
        send_cq.0.st.lock().qps.push((w[0], inner.trk.clone()));
        if !Arc::ptr_eq(&send_cq.0, &recv_cq.0) {
            recv_cq.0.st.lock().qps.push((w[0], inner.trk.clone()));
        }
        Ok(Qp(inner))
    }

    /// MODIFY_QP with the attributes `mask` selects.
    pub fn modify_qp(&self, qp: &Qp, attr: &QpAttr, attr_mask: u32) -> Result<()> {
        let to = if attr_mask & mask::STATE != 0 { Some(attr.qp_state) } else { None };
        if qp.0.trk.errored.swap(false, Ordering::AcqRel) && !matches!(to, Some(QpState::Reset | QpState::Err)) {
            // the engine put the QP into ERR: tell the firmware first, so that the requested
            // transition is judged from ERR (and refused unless it leads to RESET)
            let mut a = vec![qp.qpn(), mask::STATE];
            a.extend_from_slice(&QpAttr { qp_state: QpState::Err, ..Default::default() }.words());
            self.sh.cmd(mbox::OP_MODIFY_QP, &a)?;
        }
        let mut args = vec![qp.qpn(), attr_mask];
        args.extend_from_slice(&attr.words());
        self.sh.cmd(mbox::OP_MODIFY_QP, &args)?;
        if attr_mask & mask::STATE != 0 && matches!(attr.qp_state, QpState::Reset | QpState::Init) {
            qp.0.trk.errored.store(false, Ordering::Release);
        }
        if attr_mask & mask::STATE != 0 && attr.qp_state == QpState::Reset {
            // back to RESET: the rings start over
            {
                let _s = qp.0.sq_lock.lock();
                let _r = qp.0.rq_lock.lock();
                qp.0.trk.reset();
            }
            Self::mark_stale(qp);
        }
        Ok(())
    }

    /// Counts the completions of `qp` still in its CQs (not polled yet) as stale: their
    /// indices are those of the queues before RESET. Counted and stored under each CQ's lock,
    /// so that a concurrent poll takes each either as stale or before the count.
    fn mark_stale(qp: &Qp) {
        let q = &*qp.0;
        let same = Arc::ptr_eq(&q._scq.0, &q._rcq.0);
        for (cq, sq, rq) in [(&q._scq, true, same), (&q._rcq, false, true)] {
            if !sq && same {
                break;
            }
            let c = &*cq.0;
            let st = c.st.lock();
            let log = c.log as u32;
            let mask = (1u32 << log) - 1;
            let base = c.ring.as_ptr() as *const u8;
            let (mut ns, mut nr) = (0u32, 0u32);
            for k in 0..=mask {
                let ci = st.ci.wrapping_add(k);
                let slot = (ci & mask) as usize * desc::CQE_BYTES;
                // SAFETY: slot + 32 lies inside the ring (ci is masked to the ring's size).
                if unsafe { crate::fast::CqeRaw::owner(base.add(slot)) } == ((ci >> log) & 1 != 0) {
                    break;
                }
                fence(Ordering::Acquire);
                // SAFETY: as above; the owner bit says the device finished writing the entry.
                let e = unsafe { crate::fast::CqeRaw::from_slot(base.add(slot)) };
                if e.qpn == q.qpn {
                    if e.is_rq() {
                        nr += 1;
                    } else {
                        ns += 1;
                    }
                }
            }
            if sq {
                q.trk.stale_sq.store(ns, Ordering::Relaxed);
            }
            if rq {
                q.trk.stale_rq.store(nr, Ordering::Relaxed);
            }
        }
    }

    /// QUERY_QP: the attributes and the QP's state. A QP the engine put into ERR (error
    /// completion, QP-fatal event) is moved to ERR in the firmware first, so that the state
    /// read back and later transitions agree with the hardware.
    pub fn query_qp(&self, qp: &Qp) -> Result<QpAttr> {
        let w = self.sh.cmd(mbox::OP_QUERY_QP, &[qp.qpn()])?;
        let a = QpAttr::from_words(&w)?;
        if qp.0.trk.errored.load(Ordering::Acquire) && !matches!(a.qp_state, QpState::Err | QpState::Reset) {
            self.modify_qp(qp, &QpAttr { qp_state: QpState::Err, ..Default::default() }, mask::STATE)?;
            let w = self.sh.cmd(mbox::OP_QUERY_QP, &[qp.qpn()])?;
            return QpAttr::from_words(&w);
        }
        Ok(a)
    }

    /// Destroys `qp` (Busy while a clone exists).
    pub fn destroy_qp(&self, qp: Qp) -> Result<()> {
        let inner = Arc::try_unwrap(qp.0).map_err(|_| Error::Busy("QP still referenced (clones)".into()))?;
        self.destroy(mbox::OP_DESTROY_QP, inner.qpn, &inner.live)
    }

    /// RESET -> INIT -> RTR -> RTS towards `peer`, with the given access flags, path MTU code
    /// (1..5 = 256..4096), timeout code and retry count.
    pub fn connect_rc(&self, qp: &Qp, peer: &RcPeer, my_psn: u32, access_flags: u32, path_mtu: u32, timeout: u32, retry_cnt: u32) -> Result<()> {
        let a = QpAttr { qp_state: QpState::Init, qp_access_flags: access_flags, ..Default::default() };
        self.modify_qp(qp, &a, mask::STATE | mask::PKEY_INDEX | mask::PORT | mask::ACCESS_FLAGS)?;
        let a = QpAttr {
            qp_state: QpState::Rtr,
            path_mtu,
            dest_qp_num: peer.qpn,
            rq_psn: peer.psn,
            max_dest_rd_atomic: 4,
            min_rnr_timer: 12,
            dgid: peer.gid,
            dmac: peer.mac,
            ..Default::default()
        };
        self.modify_qp(
            qp,
            &a,
            mask::STATE | mask::AV | mask::PATH_MTU | mask::DEST_QPN | mask::RQ_PSN | mask::MAX_DEST_RD_ATOMIC | mask::MIN_RNR_TIMER,
        )?;
        let a = QpAttr { qp_state: QpState::Rts, timeout, retry_cnt, rnr_retry: 7, sq_psn: my_psn, max_rd_atomic: 4, ..Default::default() };
        self.modify_qp(qp, &a, mask::STATE | mask::TIMEOUT | mask::RETRY_CNT | mask::RNR_RETRY | mask::SQ_PSN | mask::MAX_QP_RD_ATOMIC)
    }

    /// Posts send WRs (one doorbell for the batch). Nothing of a WR that fails validation is
    /// posted, nor anything after it; the WRs before it are (and the doorbell rung for them).
    pub fn post_send(&self, qp: &Qp, wrs: &[SendWr]) -> Result<()> {
        let q = &qp.0;
        let _g = q.sq_lock.lock();
        let mut pi = q.trk.sq_pi.load(Ordering::Relaxed);
        let slots = 1u32 << q.sq_log;
        let mut posted = 0;
        let mut err = None;
        for wr in wrs {
            if pi.wrapping_sub(q.trk.sq_done.load(Ordering::Acquire)) >= slots {
                err = Some(Error::QueueFull);
                break;
            }
            if wr.sgl.len() > q.caps.max_send_sge as usize && !wr.inline {
                err = Some(Error::inval(format!("{} SGEs (QP allows {})", wr.sgl.len(), q.caps.max_send_sge)));
                break;
            }
            let inline = if wr.inline {
                match self.gather_inline(wr, q.caps.max_inline_data) {
                    Ok(d) => Some(d),
                    Err(e) => {
                        err = Some(e);
                        break;
                    }
                }
            } else {
                None
            };
            let bytes = match desc::encode_send_wqe(wr, q.sq_stride, inline.as_deref()) {
                Ok(b) => b,
                Err(e) => {
                    err = Some(Error::inval(format!("send WR: {e}")));
                    break;
                }
            };
            let slot = (pi & (slots - 1)) as usize;
            q.sq.write(slot * q.sq_stride, &bytes)?;
            pi = pi.wrapping_add(1);
            posted += 1;
        }
        if posted > 0 {
            q.trk.sq_pi.store(pi, Ordering::Release);
            fence(Ordering::SeqCst);
            self.sh.dev.write32(regs::HM_REG_DB_SQ as u64, (pi & 0xFFFF) << 16 | q.qpn)?;
        }
        match err {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    fn gather_inline(&self, wr: &SendWr, max: u32) -> Result<Vec<u8>> {
        let total: u64 = wr.sgl.iter().map(|s| s.len as u64).sum();
        if total > max as u64 {
            return Err(Error::inval(format!("{total} inline bytes (QP allows {max})")));
        }
        let mrs = self.sh.mrs.lock().unwrap();
        let mut d = Vec::with_capacity(total as usize);
        for s in &wr.sgl {
            let (base, len) = *mrs.get(&s.lkey).ok_or_else(|| Error::inval(format!("inline SGE lkey {:#x} is not a registered MR", s.lkey)))?;
            if s.addr < base || s.addr.checked_add(s.len as u64).is_none_or(|e| e > base + len) {
                return Err(Error::inval(format!("inline SGE {:#x}+{} outside its MR", s.addr, s.len)));
            }
            let start = d.len();
            d.resize(start + s.len as usize, 0);
            // SAFETY: the range lies inside an MR registered through this driver, whose memory
            // is owned by the MR (alloc_mr) or promised live by the caller of reg_mr_raw.
            unsafe { std::ptr::copy_nonoverlapping(s.addr as *const u8, d[start..].as_mut_ptr(), s.len as usize) };
        }
        Ok(d)
    }

    /// Posts receive WRs (one doorbell per WR batch).
    pub fn post_recv(&self, qp: &Qp, wrs: &[RecvWr]) -> Result<()> {
        let q = &qp.0;
        let _g = q.rq_lock.lock();
        let mut pi = q.trk.rq_pi.load(Ordering::Relaxed);
        let slots = 1u32 << q.rq_log;
        let mut posted = 0;
        let mut err = None;
        for wr in wrs {
            if pi.wrapping_sub(q.trk.rq_done.load(Ordering::Acquire)) >= slots {
                err = Some(Error::QueueFull);
                break;
            }
            if wr.sgl.len() > q.caps.max_recv_sge as usize {
                err = Some(Error::inval(format!("{} receive SGEs (QP allows {})", wr.sgl.len(), q.caps.max_recv_sge)));
                break;
            }
            let bytes = match desc::encode_recv_wqe(wr, q.rq_stride) {
                Ok(b) => b,
                Err(e) => {
                    err = Some(Error::inval(format!("receive WR: {e}")));
                    break;
                }
            };
            let slot = (pi & (slots - 1)) as usize;
            q.rq.write(slot * q.rq_stride, &bytes)?;
            pi = pi.wrapping_add(1);
            posted += 1;
        }
        if posted > 0 {
            q.trk.rq_pi.store(pi, Ordering::Release);
            fence(Ordering::SeqCst);
            self.sh.dev.write32(regs::HM_REG_DB_RQ as u64, (pi & 0xFFFF) << 16 | q.qpn)?;
        }
        match err {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// (After a fatal device error the doorbell goes nowhere, and that is no error: the CQ's
    /// entries are still read, and its flushes made, by the host.)
    #[inline(never)]
    fn cq_doorbell(&self, cq: &CqInner, ci: u32, arm: u32) -> Result<()> {
        match self.sh.dev.write32(regs::HM_REG_DB_CQ as u64, (ci & 0xFFFF) << 16 | arm << 14 | cq.cqn) {
            Err(_) if self.sh.check_fatal() => Ok(()),
            r => r,
        }
    }

    /// The entry at the consumer index if the device has written it (its owner bit matches the
    /// pass over the ring); the consumer index is not advanced.
    fn peek_entry(c: &CqInner, st: &CqState) -> Result<Option<[u8; desc::CQE_BYTES]>> {
        let size = 1u32 << c.log;
        let off = (st.ci & (size - 1)) as usize * desc::CQE_BYTES;
        let phase = (st.ci >> c.log) & 1 == 0;
        // the owner bit is the entry's last byte, which the device writes last
        if (c.ring.read_u64(off + desc::CQE_BYTES - 8)? >> 63 == 1) != phase {
            return Ok(None);
        }
        fence(Ordering::Acquire);
        let mut e = [0u8; desc::CQE_BYTES];
        c.ring.read(off, &mut e)?;
        Ok(Some(e))
    }

    /// Tells the device the consumer index once `every` entries were consumed since last time.
    fn ack_entries(&self, c: &CqInner, st: &mut CqState, every: u32) -> Result<()> {
        if st.ci.wrapping_sub(st.ci_told) >= every {
            self.cq_doorbell(c, st.ci, 0)?;
            st.ci_told = st.ci;
        }
        Ok(())
    }

    /// Takes up to `max` completions from `cq`.
    pub fn poll_cq(&self, cq: &Cq, max: usize) -> Result<Vec<Cqe>> {
        let c = &cq.0;
        let mut st = c.st.lock();
        let mut out = Vec::new();
        while out.len() < max {
            let Some(bytes) = Self::peek_entry(c, &st)? else { break };
            let (cqe, idx, _) = desc::decode_cqe(&bytes).map_err(|e| Error::Device(format!("CQ {} entry {}: {e}", c.cqn, st.ci)))?;
            st.ci = st.ci.wrapping_add(1);
            retire(&st.qps, cqe.qpn, idx, matches!(cqe.opcode, WcOpcode::Recv | WcOpcode::RecvRdmaWithImm), cqe.status == WcStatus::Success || cqe.status == WcStatus::WrFlushErr);
            out.push(cqe);
        }
        self.ack_entries(c, &mut st, ((1u32 << c.log) / 4).max(1))?;
        Ok(out)
    }

    /// Arms `cq`: the next completion (or next solicited one) raises its interrupt vector.
    pub fn req_notify_cq(&self, cq: &Cq, solicited_only: bool) -> Result<()> {
        let st = cq.0.st.lock();
        self.cq_doorbell(&cq.0, st.ci, if solicited_only { 2 } else { 1 })
    }

    /// Blocks until `cq` has a completion or `timeout` passes (arms the CQ and sleeps on its
    /// interrupt's eventfd). Returns what was polled (empty on timeout).
    pub fn wait_cq(&self, cq: &Cq, max: usize, timeout: Duration) -> Result<Vec<Cqe>> {
        let fd = self.vector_fd(cq.vector())?;
        let t0 = Instant::now();
        loop {
            let got = self.poll_cq(cq, max)?;
            if !got.is_empty() {
                return Ok(got);
            }
            self.req_notify_cq(cq, false)?;
            // a completion that landed before the arm raised nothing: poll once more
            let got = self.poll_cq(cq, max)?;
            if !got.is_empty() {
                return Ok(got);
            }
            let left = timeout.saturating_sub(t0.elapsed());
            if left.is_zero() {
                return Ok(Vec::new());
            }
            let mut p = libc::pollfd { fd: fd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
            // CQs on one vector share its eventfd, and another waiter may consume the wake-up:
            // sleep in slices of at most 50 ms and poll again.
            // SAFETY: one valid pollfd.
            unsafe { libc::poll(&mut p, 1, left.as_millis().min(50) as i32) };
            let mut v = 0u64;
            // SAFETY: reading 8 bytes into a u64 from a non-blocking eventfd.
            unsafe { libc::read(fd.as_raw_fd(), &mut v as *mut u64 as *mut libc::c_void, 8) };
        }
    }

    /// Async twin of [`Nic::wait_cq`] (tokio): waits for the CQ's interrupt without blocking
    /// the runtime's thread.
    pub async fn wait_cq_async(&self, cq: &Cq, max: usize) -> Result<Vec<Cqe>> {
        let fd = self.vector_fd(cq.vector())?;
        // A duplicate per wait, so that concurrent waits on one vector register distinct
        // descriptors with the runtime.
        // SAFETY: dup(2) of a descriptor we hold; the result is checked and owned below.
        let d = unsafe { libc::dup(fd.as_raw_fd()) };
        if d < 0 {
            return Err(Error::last_os("dup"));
        }
        // SAFETY: a new descriptor nobody else owns.
        let dup = unsafe { OwnedFd::from_raw_fd(d) };
        // SAFETY: the AsyncFd owns the duplicate, so it stays open while registered.
        let afd = unsafe { tokio::io::unix::AsyncFd::register_with_interest(dup, tokio::io::Interest::READABLE) }
            .map_err(|e| Error::sys("AsyncFd", e.into()))?;
        loop {
            let got = self.poll_cq(cq, max)?;
            if !got.is_empty() {
                return Ok(got);
            }
            self.req_notify_cq(cq, false)?;
            let got = self.poll_cq(cq, max)?;
            if !got.is_empty() {
                return Ok(got);
            }
            // bounded, like wait_cq: another waiter on the vector may take the wake-up
            if let Ok(g) = tokio::time::timeout(Duration::from_millis(50), afd.readable()).await {
                let mut g = g.map_err(|e| Error::sys("eventfd wait", e))?;
                let mut v = 0u64;
                // SAFETY: reading 8 bytes into a u64 from a non-blocking eventfd.
                unsafe { libc::read(fd.as_raw_fd(), &mut v as *mut u64 as *mut libc::c_void, 8) };
                g.clear_ready();
            }
        }
    }

    /// Asynchronous events waiting in the event queue.
    pub fn poll_events(&self) -> Result<Vec<AsyncEvent>> {
        let Some(eq) = &self.eq else { return Err(Error::NotSupported("opened without an event queue".into())) };
        let c = &eq.0;
        let mut st = c.st.lock();
        let mut out = Vec::new();
        while let Some(bytes) = Self::peek_entry(c, &st)? {
            let (ev, _) = desc::decode_event(&bytes).map_err(|e| Error::Device(format!("event entry {}: {e}", st.ci)))?;
            if let AsyncEvent::QpFatal(n) = ev {
                if let Some(q) = self.sh.qps.lock().unwrap().get(&n).and_then(|w| w.upgrade()) {
                    q.trk.errored.store(true, Ordering::Release);
                }
            }
            out.push(ev);
            st.ci = st.ci.wrapping_add(1);
        }
        self.ack_entries(c, &mut st, 1)?;
        Ok(out)
    }

    // -------------------------------------------------------------------- the fast path

    /// Starts posting to `qp`'s send queue: takes the queue's lock (nothing else), and rings
    /// the doorbell once for everything committed when [`SqPost::finish`] is called (or the
    /// poster is dropped). For the verbs provider, whose callers hand it WRs that have to be
    /// written into the ring without building intermediate values.
    #[inline]
    pub fn sq_post<'a>(&'a self, qp: &'a Qp) -> SqPost<'a> {
        let q = &*qp.0;
        let guard = q.sq_lock.lock();
        let pi = q.trk.sq_pi.load(Ordering::Relaxed);
        SqPost { nic: self, q, _guard: guard, pi, start: pi, rq: false }
    }

    /// The receive-queue twin of [`Nic::sq_post`].
    #[inline]
    pub fn rq_post<'a>(&'a self, qp: &'a Qp) -> SqPost<'a> {
        let q = &*qp.0;
        let guard = q.rq_lock.lock();
        let pi = q.trk.rq_pi.load(Ordering::Relaxed);
        SqPost { nic: self, q, _guard: guard, pi, start: pi, rq: true }
    }

    /// Takes up to `max` completions from `cq` without allocating: `f` gets each raw entry
    /// (codes as `hematite_model::desc` defines them); returns how many were taken. Retires
    /// the work-queue slots the completions free, like [`Nic::poll_cq`].
    #[inline]
    pub fn poll_cq_raw(&self, cq: &Cq, max: usize, mut f: impl FnMut(&crate::fast::CqeRaw)) -> Result<usize> {
        let c = &*cq.0;
        let mut st = c.st.lock();
        let log = c.log as u32;
        let mask = (1u32 << log) - 1;
        let base = c.ring.as_ptr() as *const u8;
        let mut n = 0;
        let mut ci = st.ci;
        while n < max {
            let slot = (ci & mask) as usize * desc::CQE_BYTES;
            // SAFETY: slot + 32 lies inside the ring (ci is masked to the ring's size).
            if unsafe { crate::fast::CqeRaw::owner(base.add(slot)) } == ((ci >> log) & 1 != 0) {
                break;
            }
            fence(Ordering::Acquire);
            // SAFETY: as above; the owner bit says the device finished writing the entry.
            let e = unsafe { crate::fast::CqeRaw::from_slot(base.add(slot)) };
            ci = ci.wrapping_add(1);
            retire(&st.qps, e.qpn, e.wqe_index, e.is_rq(), e.status == desc::HM_CQE_ST_SUCCESS || e.status == desc::HM_CQE_ST_WR_FLUSH_ERR);
            f(&e);
            n += 1;
        }
        st.ci = ci;
        if ci.wrapping_sub(st.ci_told) > mask >> 2 {
            st.ci_told = ci;
            self.cq_doorbell(c, ci, 0)?;
        }
        Ok(n)
    }

    /// After a fatal device error ([`Nic::is_fatal`]): up to `max` WR_FLUSH_ERR completions
    /// for the work requests still outstanding on the queues completing into `cq` (see
    /// `flush_fatal`); 0 while the device is fine. Call it when [`Nic::poll_cq_raw`] found
    /// nothing more (the entries the device wrote come first).
    #[inline(never)]
    pub fn poll_cq_flushed(&self, cq: &Cq, max: usize, mut f: impl FnMut(&crate::fast::CqeRaw)) -> usize {
        if !self.sh.fatal.load(Ordering::Acquire) {
            return 0;
        }
        let c = &*cq.0;
        let st = c.st.lock();
        Self::flush_fatal(&st, c.cqn, max, &mut f)
    }

    /// After a fatal device error (the CQ's own entries all taken): up to `max` completions
    /// with WR_FLUSH_ERR for the work requests still outstanding on the queues completing
    /// into this CQ, oldest first, send queues before receive queues, as the device would
    /// have flushed them (every WR, signaled or not). Returns how many were made.
    #[cold]
    #[inline(never)]
    fn flush_fatal(st: &CqState, cqn: u32, max: usize, f: &mut impl FnMut(&crate::fast::CqeRaw)) -> usize {
        let mut n = 0;
        for (qpn, t) in &st.qps {
            for rq in [false, true] {
                let (ring, pi, done, cq) =
                    if rq { (t.rq_ring, &t.rq_pi, &t.rq_done, t.rcqn) } else { (t.sq_ring, &t.sq_pi, &t.sq_done, t.scqn) };
                if cq != cqn {
                    continue;
                }
                let end = pi.load(Ordering::Acquire);
                let mut d = done.load(Ordering::Relaxed);
                while d != end && n < max {
                    let (base, log, stride) = ring;
                    let slot = (base + (d & ((1u32 << log) - 1)) as usize * stride) as *const u8;
                    let mut e = crate::fast::CqeRaw { qpn: *qpn, status: desc::HM_CQE_ST_WR_FLUSH_ERR, wqe_index: d as u16, ..Default::default() };
                    if rq {
                        // SAFETY: a slot of the QP's receive ring, which lives while the QP is
                        // on this CQ's list (its destructor takes it off under the CQ's lock).
                        e.wr_id = unsafe { crate::fast::read_recv_wr_id(slot) };
                        e.opcode = desc::HM_CQE_OP_RECV;
                        e.flags = crate::fast::CQE_F_RQ;
                    } else {
                        // SAFETY: as above, the send ring.
                        let (id, op) = unsafe { crate::fast::read_send_wr_id_op(slot) };
                        e.wr_id = id;
                        e.opcode = match op {
                            desc::HM_WQE_OP_WRITE | desc::HM_WQE_OP_WRITE_IMM => desc::HM_CQE_OP_RDMA_WRITE,
                            desc::HM_WQE_OP_READ => desc::HM_CQE_OP_RDMA_READ,
                            desc::HM_WQE_OP_CMP_SWAP => desc::HM_CQE_OP_CMP_SWAP,
                            desc::HM_WQE_OP_FETCH_ADD => desc::HM_CQE_OP_FETCH_ADD,
                            _ => desc::HM_CQE_OP_SEND,
                        };
                    }
                    t.errored.store(true, Ordering::Release);
                    d = d.wrapping_add(1);
                    done.store(d, Ordering::Release);
                    f(&e);
                    n += 1;
                }
            }
        }
        n
    }

    /// Whether `cq` holds an entry not polled yet (does not consume it).
    /// After a fatal device error, work requests still to be flushed count as entries.
    pub fn cq_pending(&self, cq: &Cq) -> bool {
        let c = &*cq.0;
        let st = c.st.lock();
        if matches!(Self::peek_entry(c, &st), Ok(Some(_))) {
            return true;
        }
        self.sh.fatal.load(Ordering::Acquire)
            && st.qps.iter().any(|(_, t)| {
                (t.scqn == c.cqn && t.sq_pi.load(Ordering::Acquire) != t.sq_done.load(Ordering::Acquire))
                    || (t.rcqn == c.cqn && t.rq_pi.load(Ordering::Acquire) != t.rq_done.load(Ordering::Acquire))
            })
    }

    /// The eventfd interrupt `vector` signals (created and handed to the device on first use).
    pub fn irq_fd(&self, vector: u32) -> Result<std::os::fd::RawFd> {
        if vector >= self.sh.dev.info().num_irqs {
            return Err(Error::inval(format!("interrupt vector {vector}")));
        }
        Ok(self.vector_fd(vector)?.as_raw_fd())
    }

    /// Bytes of host memory the driver keeps mapped for the device (rings, MRs), in pages.
    pub fn pinned_bytes(&self) -> u64 {
        self.sh.pins.lock().unwrap().pinned_pages() as u64 * 4096
    }

    /// DMA windows the driver has mapped now: (IOVA, length).
    pub fn dma_windows(&self) -> Vec<(u64, u64)> {
        self.sh.pins.lock().unwrap().windows()
    }
}

#[cold]
#[inline(never)]
fn cold_errno(e: Error) -> i32 {
    e.errno()
}

/// A posting session on one work queue (see [`Nic::sq_post`]): holds the queue's lock.
pub struct SqPost<'a> {
    nic: &'a Nic,
    q: &'a QpInner,
    _guard: crate::lock::SpinGuard<'a, ()>,
    pi: u32,
    start: u32,
    rq: bool,
}

impl SqPost<'_> {
    /// Bytes per slot.
    #[inline(always)]
    pub fn stride(&self) -> usize {
        if self.rq { self.q.rq_stride } else { self.q.sq_stride }
    }

    /// The capacities the device granted the QP.
    #[inline(always)]
    pub fn caps(&self) -> &QpCaps {
        &self.q.caps
    }

    /// The device has failed for good ([`Nic::check_fatal`]): nothing posted can reach it.
    /// The verbs provider refuses the post then (EIO).
    #[inline(always)]
    pub fn fatal(&self) -> bool {
        self.q.trk.fatal.load(Ordering::Relaxed)
    }

    /// The next free slot, or None when the ring is full. Write it completely (header and what
    /// the header says follows), then [`SqPost::commit`].
    #[inline(always)]
    pub fn slot(&mut self) -> Option<*mut u8> {
        let (log, done, buf, stride) = if self.rq {
            (self.q.rq_log, &self.q.trk.rq_done, &self.q.rq, self.q.rq_stride)
        } else {
            (self.q.sq_log, &self.q.trk.sq_done, &self.q.sq, self.q.sq_stride)
        };
        if self.pi.wrapping_sub(done.load(Ordering::Acquire)) >= 1u32 << log {
            return None;
        }
        let i = (self.pi & ((1u32 << log) - 1)) as usize;
        // SAFETY: i < 2^log slots of `stride` bytes: inside the ring buffer.
        Some(unsafe { buf.as_ptr().add(i * stride) })
    }

    /// The slot returned by the last [`SqPost::slot`] is complete.
    #[inline(always)]
    pub fn commit(&mut self) {
        self.pi = self.pi.wrapping_add(1);
    }

    /// Publishes what was committed and rings the doorbell once (nothing when nothing was).
    #[inline]
    pub fn finish(mut self) -> Result<()> {
        match self.ring() {
            Ok(()) => {
                self.start = self.pi;
                Ok(())
            }
            Err(e) => Err(self.unpost(e)),
        }
    }

    /// [`SqPost::finish`] for C callers: 0, or the errno of a failed doorbell write.
    #[inline(always)]
    pub fn finish_errno(mut self) -> i32 {
        match self.ring() {
            Ok(()) => {
                self.start = self.pi;
                0
            }
            Err(e) => cold_errno(self.unpost(e)),
        }
    }

    /// The doorbell did not reach the device (it is gone): the WRs of this session were not
    /// posted, and do not count as outstanding (no flush completion is made for them).
    #[cold]
    #[inline(never)]
    fn unpost(&mut self, e: Error) -> Error {
        let pi = if self.rq { &self.q.trk.rq_pi } else { &self.q.trk.sq_pi };
        pi.store(self.start, Ordering::Release);
        self.pi = self.start;
        e
    }

    /// Publishes the producer index and rings the doorbell; `start` is moved up by the caller
    /// once that succeeded.
    #[inline(always)]
    fn ring(&mut self) -> Result<()> {
        if self.pi == self.start {
            return Ok(());
        }
        let (pi, reg) = if self.rq { (&self.q.trk.rq_pi, regs::HM_REG_DB_RQ) } else { (&self.q.trk.sq_pi, regs::HM_REG_DB_SQ) };
        pi.store(self.pi, Ordering::Release);
        fence(Ordering::SeqCst);
        self.nic.sh.dev.write32(reg as u64, (self.pi & 0xFFFF) << 16 | self.q.qpn)
    }
}

impl SqPost<'_> {
    /// A poster dropped with WRs committed but not published ([`SqPost::finish`] not called).
    #[cold]
    #[inline(never)]
    fn ring_on_drop(&mut self) {
        match self.ring() {
            Ok(()) => self.start = self.pi,
            Err(e) => drop(self.unpost(e)),
        }
    }
}

impl Drop for SqPost<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        if self.pi != self.start {
            self.ring_on_drop();
        }
    }
}

impl std::fmt::Debug for Pd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Pd({})", self.0.id)
    }
}
impl std::fmt::Debug for Mr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Mr(key {:#x}, {:#x}+{:#x})", self.0.key, self.0.addr, self.0.len)
    }
}
impl std::fmt::Debug for Cq {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Cq({})", self.0.cqn)
    }
}
impl std::fmt::Debug for Qp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Qp({})", self.0.qpn)
    }
}

#[cfg(test)]
mod gid_tests {
    use super::*;

    #[test]
    fn link_local_gid_round_trip() {
        let mac = 0x0248_4d00_0001;
        let g = gid_link_local(mac);
        assert_eq!(g, [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x00, 0x48, 0x4d, 0xff, 0xfe, 0x00, 0x00, 0x01]);
        assert_eq!(mac_of_link_local(&g), Some(mac));
        // rxe's link-local GID on qemu's first NIC (fe80::5054:ff:fe00:1)
        let rxe = [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x50, 0x54, 0x00, 0xff, 0xfe, 0x00, 0x00, 0x01];
        assert_eq!(mac_of_link_local(&rxe), Some(0x5254_0000_0001));
        // not link-local, or not an EUI-64 identifier, or IPv4-mapped: no MAC
        let mut global = g;
        global[0] = 0x20;
        assert_eq!(mac_of_link_local(&global), None);
        let mut privacy = g;
        privacy[11] = 0x12;
        assert_eq!(mac_of_link_local(&privacy), None);
        assert_eq!(mac_of_link_local(&gid_from_ipv4(0x0a4d_0001)), None);
    }
}
