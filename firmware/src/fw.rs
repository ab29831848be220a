//! The firmware proper: [`Firmware::handle`] decodes one mailbox command, checks it completely
//! (nothing changes on failure), updates the resource tables and writes the engine's context
//! entries through the control bus. Used by the riscv32 main loop and by the host tests.

use crate::cc::{CcParams, CC_PARAMS};
use crate::desc::{self, QpCtx};
use crate::regs;
use crate::hw::{Bus, Engine};
use crate::mbox::*;
use crate::qp::*;
use crate::res::*;
use hematite_abi::reply::{DeviceAttr, PortAttr};

/// Firmware version reported by QUERY_DEVICE: major << 16 | minor << 8 | patch.
pub const FW_VERSION: u32 = 0x00_01_00;
/// Vendor ID and vendor part ID (hematite_abi::reply, shared with hematite-run's sysfs tree).
pub use hematite_abi::reply::{VENDOR_ID, VENDOR_PART_ID};
/// Hardware version.
pub const HW_VER: u32 = 1;
/// Largest send / receive queue: 2^15 slots (16-bit WQE indices in CQEs).
pub const MAX_Q_LOG: u32 = 15;
/// Largest CQ: 2^16 entries.
pub const MAX_CQ_LOG: u32 = 16;
/// Largest WQE stride code: 64 << 2 = 256 bytes, the largest WQE the engine holds
/// (`WQE_MAX` of rtl/eng/hm_rc_req.sv and hm_rc_resp.sv; the requester refuses every WQE of a
/// larger stride).
pub const MAX_STRIDE_LOG: u32 = 2;
/// SGEs in the largest send WQE ((256 - 32) / 16; a receive WQE of that size would hold 15).
pub const MAX_SGE: u32 = 14;
/// Inline bytes in the largest send WQE (256 - 32).
pub const MAX_INLINE: u32 = 224;
/// Requester READ/atomic depth and responder resources per QP.
pub const MAX_RD_ATOM: u32 = 4;
/// Completion vectors (CQ irq_vec must be below this).
pub const NUM_COMP_VECTORS: u32 = 16;
/// Largest message.
pub const MAX_MSG_SZ: u32 = 1 << 31;
/// ibverbs `IBV_QPT_RC`.
pub const QPT_RC: u32 = QpType::Rc as u32;
/// ibverbs `IBV_QPT_UC`.
pub const QPT_UC: u32 = QpType::Uc as u32;
/// ibverbs `IBV_ATOMIC_HCA`.
pub const ATOMIC_HCA: u32 = 1;
/// Page sizes: every power of two from 4 KiB.
pub const PAGE_SIZE_CAP: u64 = 0xFFFF_FFFF_FFFF_F000;

// ibverbs IBV_ACCESS_* (MR registration); the optional bits are ignored.
pub use hematite_abi::qp::access::{
    HUGETLB as ACC_HUGETLB, LOCAL_WRITE as ACC_LOCAL_WRITE, MW_BIND as ACC_MW_BIND, ON_DEMAND as ACC_ON_DEMAND,
    OPTIONAL as ACC_OPTIONAL, REMOTE_ATOMIC as ACC_REMOTE_ATOMIC, REMOTE_READ as ACC_REMOTE_READ,
    REMOTE_WRITE as ACC_REMOTE_WRITE, ZERO_BASED as ACC_ZERO_BASED,
};

/// Firmware counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counters {
    pub commands: u32,
    pub by_status: [u32; COUNTED_STATUS],
}

/// The control-plane firmware over an engine bus `B`.
pub struct Firmware<B: Bus> {
    pub eng: Engine<B>,
    pub t: Tables,
    pub cc: CcParams,
    pub counters: Counters,
    /// The CQ serving as event queue (SET_EQ), if any.
    pub eq: Option<u16>,
    /// The Ethernet link as last seen (LINK register); QUERY_PORT reports it.
    pub link_up: bool,
    /// Engine counters (CAPS [7:0], at most MAX_ENGINE_COUNTERS).
    pub n_counters: u32,
    /// The engine's interface version (mailbox VERSION). While it is not one this firmware
    /// speaks (`version::speaks(hw_iface, version::INTERFACE)`), every command but QUERY_ABI is
    /// refused with ABI_MISMATCH and the engine is never touched.
    pub hw_iface: u32,
}

/// Engine counters QUERY_COUNTERS returns at most (it answers 13 + n words of 63).
pub const MAX_ENGINE_COUNTERS: u32 = 50;

type R = Result<usize, Status>;

/// Output words after the header.
struct Out<'a> {
    w: &'a mut [u32],
    n: usize,
}

impl Out<'_> {
    fn push(&mut self, v: u32) {
        if let Some(d) = self.w.get_mut(self.n) {
            *d = v;
            self.n += 1;
        }
    }
    fn push64(&mut self, v: u64) {
        self.push(v as u32);
        self.push((v >> 32) as u32);
    }
    fn push_all(&mut self, v: &[u32]) {
        for &x in v {
            self.push(x);
        }
    }
}

fn lo_hi(a: &[u32], i: usize) -> u64 {
    u64::from(arg(a, i)) | u64::from(arg(a, i + 1)) << 32
}

fn arg(a: &[u32], i: usize) -> u32 {
    a.get(i).copied().unwrap_or(0)
}

fn gid_u128(g: &[u32; 4]) -> u128 {
    g.iter().fold(0u128, |acc, w| acc << 32 | u128::from(*w))
}

/// IPv4-mapped GID (::ffff:a.b.c.d)?
fn gid_is_v4(g: &[u32; 4]) -> bool {
    g[0] | g[1] == 0 && g[2] == 0x0000_FFFF
}

fn hw(_: crate::hw::HwError) -> Status {
    Status::HwError
}

impl<B: Bus> Firmware<B> {
    /// All-zero firmware (a `static` of it lives in .bss); call [`Firmware::init`] first.
    pub const fn new(bus: B) -> Self {
        Firmware {
            eng: Engine::new(bus),
            t: Tables::ZERO,
            cc: CcParams::ZERO,
            counters: Counters { commands: 0, by_status: [0; COUNTED_STATUS] },
            eq: None,
            link_up: false,
            n_counters: 0,
            hw_iface: 0,
        }
    }

    /// Whether the engine speaks the interface this firmware was built for.
    pub fn engine_matches(&self) -> bool {
        crate::version::speaks(self.hw_iface, crate::version::INTERFACE)
    }

    /// The link as the hardware reports it now: on a change, QUERY_PORT follows and an
    /// HM_EV_PORT_ACTIVE / HM_EV_PORT_ERR event for port 1 goes to the event queue (the engine
    /// drops it while no event queue is set). Returns whether it changed.
    pub fn link(&mut self, up: bool) -> bool {
        if up == self.link_up {
            return false;
        }
        self.link_up = up;
        if !self.engine_matches() {
            return true;
        }
        let code = if up { desc::HM_EV_PORT_ACTIVE } else { desc::HM_EV_PORT_ERR };
        // an engine that refuses the post loses only the event; the state is kept
        let _ = self.eng.post(desc::HM_CTL_POST_EVENT, code, 1);
        true
    }

    /// Sets the limits from the mailbox CAPS and MR_LOG words and the DCQCN defaults, and
    /// records the engine's interface version (mailbox VERSION). Called once, on a firmware
    /// fresh from [`Firmware::new`]: its DMEM tables are already empty (on the control core, the
    /// startup code's .bss clear made them so); the QP and CQ records get their XMEM storage,
    /// which is not cleared: their in-use bitmaps (in .bss) say that every entry is free.
    pub fn init(&mut self, caps: u32, mr_log: u32, hw_iface: u32) {
        self.hw_iface = hw_iface;
        self.t.attach_storage();
        self.t.set_limits(caps, mr_log);
        self.cc = CcParams::defaults();
        self.counters = Counters { commands: 0, by_status: [0; COUNTED_STATUS] };
        self.eq = None;
        self.n_counters = (caps & 0xFF).min(MAX_ENGINE_COUNTERS);
    }

    /// Handles one command (`cmd[0]` is the header, then the `in_words` it announces) and writes
    /// the answer into `out`: word 0 the answer header, then the outputs. Returns the answer's
    /// word count; words past it are not written (the caller zeroes what an earlier answer left
    /// there: on the core, `out` is the mailbox's CMD_OUT itself).
    pub fn handle(&mut self, cmd: &[u32], out: &mut [u32; 64]) -> usize {
        let h = Header::parse(cmd.first().copied().unwrap_or(0));
        let (first, rest) = out.split_at_mut(1);
        let mut o = Out { w: rest, n: 0 };
        let r = if cmd.is_empty() { Err(Status::BadLength) } else { self.dispatch(h, cmd, &mut o) };
        let (st, n) = match r {
            Ok(n) => (Status::Ok, n),
            Err(s) => {
                // outputs pushed before the error are not part of the answer
                for w in o.w.iter_mut().take(o.n) {
                    *w = 0;
                }
                (s, 0)
            }
        };
        if let Some(w) = first.first_mut() {
            *w = answer_word(st as u8, n as u8, h.token);
        }
        self.counters.commands = self.counters.commands.wrapping_add(1);
        if let Some(c) = self.counters.by_status.get_mut(st as usize) {
            *c = c.wrapping_add(1);
        }
        1 + n
    }

    fn dispatch(&mut self, h: Header, cmd: &[u32], o: &mut Out) -> R {
        let want = in_words(h.opcode).ok_or(Status::BadOpcode)?;
        if h.in_words != want || usize::from(want) > MAX_ARGS {
            return Err(Status::BadLength);
        }
        let a = cmd.get(1..1 + usize::from(want)).ok_or(Status::BadLength)?;
        if h.opcode == OP_QUERY_ABI {
            o.push(crate::version::MAILBOX);
            o.push(crate::version::INTERFACE);
            o.push(self.hw_iface);
            return Ok(o.n);
        }
        if !self.engine_matches() {
            return Err(Status::AbiMismatch);
        }
        match h.opcode {
            OP_QUERY_DEVICE => self.query_device(o),
            OP_QUERY_PORT => self.query_port(a, o),
            OP_QUERY_COUNTERS => self.query_counters(o),
            OP_QUERY_RESOURCES => self.query_resources(o),
            OP_SET_GID => self.set_gid(a),
            OP_SET_EQ => self.set_eq(a),
            OP_ALLOC_PD => self.alloc_pd(o),
            OP_DEALLOC_PD => self.dealloc_pd(a),
            OP_REG_MR => self.reg_mr(a, o),
            OP_DEREG_MR => self.dereg_mr(a),
            OP_REREG_MR => self.rereg_mr(a, o),
            OP_CREATE_CQ => self.create_cq(a, o),
            OP_DESTROY_CQ => self.destroy_cq(a),
            OP_QUERY_CQ => self.query_cq(a, o),
            OP_CREATE_QP => self.create_qp(a, o),
            OP_MODIFY_QP => self.modify_qp(a),
            OP_QUERY_QP => self.query_qp(a, o),
            OP_DESTROY_QP => self.destroy_qp(a),
            OP_SET_CC_PARAMS => self.set_cc(a),
            OP_GET_CC_PARAMS => self.get_cc(o),
            _ => Err(Status::BadOpcode),
        }
    }

    fn query_device(&mut self, o: &mut Out) -> R {
        let l = self.t.limits;
        let d = DeviceAttr {
            fw_ver: FW_VERSION,
            vendor_id: VENDOR_ID,
            vendor_part_id: VENDOR_PART_ID,
            hw_ver: HW_VER,
            max_qp: self.t.max_qp() as u32,
            max_qp_wr: 1 << MAX_Q_LOG,
            max_sge: MAX_SGE,
            max_cq: l.cqs as u32,
            max_cqe: 1 << MAX_CQ_LOG,
            max_mr: l.mrs as u32,
            max_pd: l.pds as u32,
            max_mr_size: u64::MAX,
            page_size_cap: PAGE_SIZE_CAP,
            max_qp_rd_atom: MAX_RD_ATOM,
            max_qp_init_rd_atom: MAX_RD_ATOM,
            atomic_cap: ATOMIC_HCA,
            max_inline_data: MAX_INLINE,
            phys_port_cnt: 1,
            num_comp_vectors: NUM_COMP_VECTORS,
        };
        o.push_all(&d.to_words());
        Ok(o.n)
    }

    /// SET_EQ (CQN, enable): the CQ that receives event entries; enable 0 turns events off.
    fn set_eq(&mut self, a: &[u32]) -> R {
        let en = arg(a, 1);
        if en > 1 {
            return Err(Status::BadParam);
        }
        let cqn = if en == 1 { self.t.cq(arg(a, 0)).ok_or(Status::BadHandle)? as u16 } else { 0 };
        let w = desc::encode_ctl_eq(en == 1, cqn).map_err(|_| Status::BadParam)?;
        self.eng.write_reg(regs::HM_CTL_EQ, w).map_err(hw)?;
        self.eq = if en == 1 { Some(cqn) } else { None };
        Ok(0)
    }

    fn query_port(&mut self, a: &[u32], o: &mut Out) -> R {
        if arg(a, 0) != 1 {
            return Err(Status::BadParam);
        }
        let p = PortAttr {
            state: if self.link_up { 4 } else { 1 }, // IBV_PORT_ACTIVE / IBV_PORT_DOWN
            max_mtu: 5,                               // IBV_MTU_4096
            active_mtu: 5,
            gid_tbl_len: GID_TBL_LEN as u32,
            port_cap_flags: 1 << 26, // IBV_PORT_IP_BASED_GIDS
            max_msg_sz: MAX_MSG_SZ,
            pkey_tbl_len: 1,
            link_layer: 2,   // IBV_LINK_LAYER_ETHERNET
            active_speed: 32, // EDR (25 Gb/s per lane)
            active_width: 2, // 4X
            phys_state: if self.link_up { 5 } else { 2 }, // LinkUp / Polling
        };
        o.push_all(&p.to_words());
        Ok(o.n)
    }

    fn query_counters(&mut self, o: &mut Out) -> R {
        o.push(self.counters.commands);
        for c in self.counters.by_status {
            o.push(c);
        }
        // then the engine's counters, as the BAR shows them (docs/transport-engine.md)
        o.push(self.n_counters);
        for i in 0..self.n_counters {
            let v = self.eng.counter(i);
            o.push(v);
        }
        Ok(o.n)
    }

    /// QUERY_RESOURCES: PDs, CQs, MRs and QPs in use (allocated and not yet freed).
    fn query_resources(&mut self, o: &mut Out) -> R {
        let t = &self.t;
        o.push(t.pds.iter().filter(|p| p.used).count() as u32);
        o.push(t.cqs.count() as u32);
        o.push(t.mrs.iter().filter(|m| m.used).count() as u32);
        o.push(t.qps.count() as u32);
        Ok(o.n)
    }

    fn set_gid(&mut self, a: &[u32]) -> R {
        let i = arg(a, 0) as usize;
        let gid = [arg(a, 1), arg(a, 2), arg(a, 3), arg(a, 4)];
        let hi = arg(a, 6);
        if hi > 0xFFFF {
            return Err(Status::BadParam);
        }
        let e = self.t.gids.get_mut(i).ok_or(Status::BadParam)?;
        *e = Gid { valid: gid != [0; 4], gid, mac: u64::from(arg(a, 5)) | u64::from(hi) << 32 };
        Ok(0)
    }

    fn alloc_pd(&mut self, o: &mut Out) -> R {
        let i = self.t.free_pd().ok_or(Status::NoResources)?;
        if let Some(p) = self.t.pds.get_mut(i) {
            *p = Pd { used: true, refs: 0 };
        }
        o.push(i as u32 + 1);
        Ok(o.n)
    }

    fn dealloc_pd(&mut self, a: &[u32]) -> R {
        let i = self.t.pd(arg(a, 0)).ok_or(Status::BadHandle)?;
        let p = self.t.pds.get_mut(i).ok_or(Status::BadHandle)?;
        if p.refs != 0 {
            return Err(Status::InUse);
        }
        *p = Pd { used: false, refs: 0 };
        Ok(0)
    }

    fn pd_ref(&mut self, i: usize, up: bool) {
        if let Some(p) = self.t.pds.get_mut(i) {
            p.refs = if up { p.refs.saturating_add(1) } else { p.refs.saturating_sub(1) };
        }
    }

    fn cq_ref(&mut self, i: usize, up: bool) {
        if let Some(c) = self.t.cqs.get_mut(i) {
            c.refs = if up { c.refs.saturating_add(1) } else { c.refs.saturating_sub(1) };
        }
    }

    /// An MR's iova, length and engine access bits from REG_MR's words 1..=5 (REREG_MR's 2..=6).
    fn mr_attrs(a: &[u32]) -> Result<(u64, u64, u8), Status> {
        let iova = lo_hi(a, 0);
        let len = lo_hi(a, 2);
        let acc = arg(a, 4) & !ACC_OPTIONAL & !ACC_HUGETLB;
        if acc & (ACC_MW_BIND | ACC_ZERO_BASED | ACC_ON_DEMAND) != 0 {
            return Err(Status::NotSupported);
        }
        if acc & !0xF != 0
            || (acc & (ACC_REMOTE_WRITE | ACC_REMOTE_ATOMIC) != 0 && acc & ACC_LOCAL_WRITE == 0)
            || len == 0
            || iova.checked_add(len - 1).is_none()
        {
            return Err(Status::BadParam);
        }
        let mut hm = 0u8;
        for (bit, m) in [
            (ACC_LOCAL_WRITE, desc::HM_MRA_LOCAL_WRITE),
            (ACC_REMOTE_READ, desc::HM_MRA_REMOTE_READ),
            (ACC_REMOTE_WRITE, desc::HM_MRA_REMOTE_WRITE),
            (ACC_REMOTE_ATOMIC, desc::HM_MRA_REMOTE_ATOMIC),
        ] {
            if acc & bit != 0 {
                hm |= m;
            }
        }
        Ok((iova, len, hm))
    }

    fn reg_mr(&mut self, a: &[u32], o: &mut Out) -> R {
        let pd = self.t.pd(arg(a, 0)).ok_or(Status::BadHandle)?;
        let (iova, len, hm) = Self::mr_attrs(a.get(1..).unwrap_or(&[]))?;
        let i = self.t.free_mr().ok_or(Status::NoResources)?;
        let old = self.t.mrs.get(i).ok_or(Status::NoResources)?.tag;
        let tag = if old == 0xFF { 1 } else { old + 1 };
        let pd_handle = pd as u32 + 1;
        let w = desc::encode_mr_ctx(iova, len, pd_handle, hm, tag, true).map_err(|_| Status::BadParam)?;
        self.eng.write_entry(desc::HM_CTL_TBL_MR, 0, i as u16, &w).map_err(hw)?;
        if let Some(m) = self.t.mrs.get_mut(i) {
            *m = Mr { used: true, tag, pd: pd_handle as u16 };
        }
        self.pd_ref(pd, true);
        self.t.next_mr = i + 1;
        let key = (i as u32) << 8 | u32::from(tag);
        o.push(key);
        o.push(key);
        Ok(o.n)
    }

    /// REREG_MR: the MR `key` gets a new PD, iova, length and access in one entry write; its
    /// keys (index and tag) stay, so a peer holding the rkey keeps using it.
    fn rereg_mr(&mut self, a: &[u32], o: &mut Out) -> R {
        let key = arg(a, 0);
        let i = self.t.mr(key).ok_or(Status::BadHandle)?;
        let m = *self.t.mrs.get(i).ok_or(Status::BadHandle)?;
        let pd = self.t.pd(arg(a, 1)).ok_or(Status::BadHandle)?;
        let (iova, len, hm) = Self::mr_attrs(a.get(2..).unwrap_or(&[]))?;
        let pd_handle = pd as u32 + 1;
        let w = desc::encode_mr_ctx(iova, len, pd_handle, hm, m.tag, true).map_err(|_| Status::BadParam)?;
        self.eng.write_entry(desc::HM_CTL_TBL_MR, 0, i as u16, &w).map_err(hw)?;
        if pd_handle != u32::from(m.pd) {
            self.pd_ref(pd, true);
            if let Some(p) = self.t.pd(u32::from(m.pd)) {
                self.pd_ref(p, false);
            }
            if let Some(e) = self.t.mrs.get_mut(i) {
                e.pd = pd_handle as u16;
            }
        }
        o.push(key);
        Ok(o.n)
    }

    fn dereg_mr(&mut self, a: &[u32]) -> R {
        let key = arg(a, 0);
        let i = self.t.mr(key).ok_or(Status::BadHandle)?;
        let m = *self.t.mrs.get(i).ok_or(Status::BadHandle)?;
        let w = desc::encode_mr_ctx(0, 0, 0, 0, m.tag, false).map_err(|_| Status::BadParam)?;
        self.eng.write_entry(desc::HM_CTL_TBL_MR, 0, i as u16, &w).map_err(hw)?;
        if let Some(e) = self.t.mrs.get_mut(i) {
            e.used = false;
            e.pd = 0;
        }
        if let Some(p) = self.t.pd(u32::from(m.pd)) {
            self.pd_ref(p, false);
        }
        Ok(0)
    }

    fn create_cq(&mut self, a: &[u32], o: &mut Out) -> R {
        let log = arg(a, 0);
        let base = lo_hi(a, 1);
        let irq = arg(a, 3);
        if !(1..=MAX_CQ_LOG).contains(&log) || base % 32 != 0 || irq >= NUM_COMP_VECTORS {
            return Err(Status::BadParam);
        }
        let i = self.t.free_cq().ok_or(Status::NoResources)?;
        let w = desc::encode_cq_ctx(base, log as u8, irq as u8, true).map_err(|_| Status::BadParam)?;
        if !self.t.cqs.insert(i, Cq { log_size: log as u8, irq_vec: irq as u8, base, refs: 0 }) {
            return Err(Status::NoResources);
        }
        if let Err(e) = self.eng.write_entry(desc::HM_CTL_TBL_CQ, desc::HM_CTL_F_LOAD_CQ, i as u16, &w) {
            self.t.cqs.remove(i);
            return Err(hw(e));
        }
        o.push(i as u32);
        o.push(1 << log);
        Ok(o.n)
    }

    fn destroy_cq(&mut self, a: &[u32]) -> R {
        let i = self.t.cq(arg(a, 0)).ok_or(Status::BadHandle)?;
        if self.t.cqs.get(i).ok_or(Status::BadHandle)?.refs != 0 || self.eq == Some(i as u16) {
            return Err(Status::InUse);
        }
        let w = [0u32; desc::CQ_WORDS];
        self.eng.write_entry(desc::HM_CTL_TBL_CQ, 0, i as u16, &w).map_err(hw)?;
        self.t.cqs.remove(i);
        Ok(0)
    }

    fn query_cq(&mut self, a: &[u32], o: &mut Out) -> R {
        let i = self.t.cq(arg(a, 0)).ok_or(Status::BadHandle)?;
        let c = *self.t.cqs.get(i).ok_or(Status::BadHandle)?;
        o.push(c.log_size.into());
        o.push64(c.base);
        o.push(c.irq_vec.into());
        o.push(c.refs.into());
        Ok(o.n)
    }

    fn create_qp(&mut self, a: &[u32], o: &mut Out) -> R {
        let pd = self.t.pd(arg(a, 0)).ok_or(Status::BadHandle)?;
        let scq = self.t.cq(arg(a, 1)).ok_or(Status::BadHandle)?;
        let rcq = self.t.cq(arg(a, 2)).ok_or(Status::BadHandle)?;
        let qpt = QpType::from_u32(arg(a, 3)).ok_or(Status::NotSupported)?;
        let (sq_base, rq_base) = (lo_hi(a, 4), lo_hi(a, 6));
        let (sql, sqs, rql, rqs) = (arg(a, 8), arg(a, 9), arg(a, 10), arg(a, 11));
        let cap = QpCap {
            max_send_wr: arg(a, 12),
            max_recv_wr: arg(a, 13),
            max_send_sge: arg(a, 14),
            max_recv_sge: arg(a, 15),
            max_inline: arg(a, 16),
        };
        if sql > MAX_Q_LOG || rql > MAX_Q_LOG || sqs > MAX_STRIDE_LOG || rqs > MAX_STRIDE_LOG {
            return Err(Status::BadParam);
        }
        let sq_bytes = 64u32 << sqs;
        let rq_bytes = 64u32 << rqs;
        if cap.max_send_wr > 1 << sql
            || cap.max_recv_wr > 1 << rql
            || cap.max_send_sge > ((sq_bytes - 32) / 16).min(MAX_SGE)
            || cap.max_recv_sge > ((rq_bytes - 16) / 16).min(MAX_SGE)
            || cap.max_inline > (sq_bytes - 32).min(MAX_INLINE)
            || sq_base % 64 != 0
            || rq_base % 64 != 0
        {
            return Err(Status::BadParam);
        }
        let i = self.t.free_qp().ok_or(Status::NoResources)?;
        let actual = QpCap {
            max_send_wr: 1 << sql,
            max_recv_wr: 1 << rql,
            max_send_sge: ((sq_bytes - 32) / 16).min(MAX_SGE),
            max_recv_sge: ((rq_bytes - 16) / 16).min(MAX_SGE),
            max_inline: (sq_bytes - 32).min(MAX_INLINE),
        };
        let taken = self.t.qps.insert(
            i,
            Qp {
                state: QpState::Reset,
                pd: pd as u16 + 1,
                send_cq: scq as u16,
                recv_cq: rcq as u16,
                sq_base,
                rq_base,
                sq_log_size: sql as u8,
                sq_log_stride: sqs as u8,
                rq_log_size: rql as u8,
                rq_log_stride: rqs as u8,
                uc: qpt == QpType::Uc,
                cap: actual,
                attr: QpAttr::ZERO,
            },
        );
        if !taken {
            return Err(Status::NoResources);
        }
        self.pd_ref(pd, true);
        self.cq_ref(scq, true);
        self.cq_ref(rcq, true);
        self.t.next_qp = i + 1;
        o.push(self.t.qpn_of(i));
        o.push(actual.max_send_wr);
        o.push(actual.max_recv_wr);
        o.push(actual.max_send_sge);
        o.push(actual.max_recv_sge);
        o.push(actual.max_inline);
        Ok(o.n)
    }

    /// The engine context of the QP whose QPN is `qpn` (record `q`; the QPN only seeds the
    /// default UDP source port) with attributes `at` and state `state`.
    /// Inlined with [`desc::encode_qp_ctx`] into its callers, so that the context is never built
    /// in memory (a copy of it costs more than its encoding).
    #[inline(always)]
    pub fn qp_ctx(qpn: usize, q: &Qp, at: &QpAttr, state: QpState) -> QpCtx {
        let av = &at.av;
        let ip_mask = if av.ipv6 { u128::MAX } else { 0xFFFF_FFFF };
        let mut access = 0u8;
        for (bit, m) in [
            (ACC_REMOTE_WRITE, desc::HM_QPA_REMOTE_WRITE),
            (ACC_REMOTE_READ, desc::HM_QPA_REMOTE_READ),
            (ACC_REMOTE_ATOMIC, desc::HM_QPA_REMOTE_ATOMIC),
        ] {
            if at.access & bit != 0 {
                access |= m;
            }
        }
        // (UC: no ACK timeout, no adaptive retransmission; the engine keeps none either)
        let uc = q.uc;
        QpCtx {
            uc,
            std_timer: at.std_timer || uc,
            max_dest_rd_atomic: at.max_dest_rd_atomic.max(1),
            max_rd_atomic: at.max_rd_atomic.max(1),
            min_rnr_timer: at.min_rnr_timer,
            rnr_retry: at.rnr_retry,
            retry_cnt: at.retry_cnt,
            timeout: if uc { 0 } else { at.timeout },
            rq_log_stride: q.rq_log_stride,
            rq_log_size: q.rq_log_size,
            sq_log_stride: q.sq_log_stride,
            sq_log_size: q.sq_log_size,
            access,
            pmtu: at.path_mtu,
            state: state.engine_code(),
            rq_cqn: q.recv_cq,
            sq_cqn: q.send_cq,
            rq_psn: at.rq_psn,
            sq_psn: at.sq_psn,
            dest_qpn: at.dest_qpn,
            pd: q.pd.into(),
            rq_base: q.rq_base,
            sq_base: q.sq_base,
            pkey: 0xFFFF,
            flow_label: av.flow_label,
            udp_sport: if av.udp_sport != 0 { av.udp_sport } else { 0xC000 | (qpn as u16 & 0x3FFF) },
            ttl: av.hop_limit,
            ecn: 0b10, // ECT(0) on data packets (DCQCN needs ECN-capable traffic)
            dscp: av.traffic_class >> 2,
            ip_dst: gid_u128(&av.dgid) & ip_mask,
            ip_src: gid_u128(&av.sgid) & ip_mask,
            ipv6: av.ipv6,
            eth_src: av.smac,
            eth_dst: av.dmac,
        }
    }

    fn write_qp(&mut self, qpn: usize, words: &[u32; desc::QP_WORDS], flags: u8) -> Result<(), Status> {
        self.eng.write_entry(desc::HM_CTL_TBL_QP, flags, qpn as u16, words).map_err(hw)
    }

    fn modify_qp(&mut self, a: &[u32]) -> R {
        let qpn = self.t.qp(arg(a, 0)).ok_or(Status::BadHandle)?;
        // the record is read in place (a copy of it costs more than the rest of the command)
        let q = self.t.qps.get(qpn).ok_or(Status::BadHandle)?;
        let mask = arg(a, 1);
        let v = |i: usize| arg(a, 2 + i);
        if mask & !M_ALL != 0 {
            return Err(Status::BadAttrMask);
        }
        let cur = q.state;
        if mask & M_CUR_STATE != 0 {
            let c = QpState::from_u32(v(A_CUR_QP_STATE)).ok_or(Status::BadParam)?;
            if c != cur {
                return Err(Status::BadState);
            }
        }
        let next = if mask & M_STATE != 0 {
            QpState::from_u32(v(A_QP_STATE)).ok_or(Status::BadParam)?
        } else {
            cur
        };
        check_mask_of(q.qpt(), cur, next, mask).map_err(|e| match e {
            MaskError::BadState => Status::BadState,
            MaskError::BadMask => Status::BadAttrMask,
        })?;
        if mask & M_ALT_PATH != 0 {
            return Err(Status::NotSupported);
        }
        if mask & M_PATH_MIG_STATE != 0 {
            match v(A_PATH_MIG_STATE) {
                MIG_MIGRATED => {}
                1 | 2 => return Err(Status::NotSupported),
                _ => return Err(Status::BadParam),
            }
        }
        let bad = Status::BadParam;
        let wire_qpn = self.t.qpn_of(qpn) as usize;
        let Tables { qps, gids, .. } = &mut self.t;
        let e = qps.get_mut(qpn).ok_or(Status::BadHandle)?;
        // The attributes change in place (copying them in and out costs more than the rest of
        // the command); `old` (and `old_av` when the command sets the address vector) puts them
        // back when the command fails.
        let old = QpAttrUndo::of(&e.attr);
        let old_av = if mask & M_AV != 0 { Some(e.attr.av) } else { None };
        if let Err(s) = Self::apply_attrs(&mut e.attr, gids, mask, a) {
            old.put(&mut e.attr);
            if let Some(av) = old_av {
                e.attr.av = av;
            }
            return Err(s);
        }
        let r = if next == QpState::Reset {
            self.eng.write_entry(desc::HM_CTL_TBL_QP, 0, qpn as u16, &[0; desc::QP_WORDS]).map_err(hw)
        } else {
            let flags = match (cur, next) {
                (QpState::Reset, QpState::Init) => desc::HM_CTL_F_LOAD_SQ | desc::HM_CTL_F_LOAD_RQ,
                // ePSN only: receives posted while in INIT stay posted
                (QpState::Init, QpState::Rtr) => desc::HM_CTL_F_LOAD_RQ_PSN,
                (QpState::Rtr, QpState::Rts) => desc::HM_CTL_F_LOAD_SQ,
                _ => 0,
            };
            let q: &Qp = e;
            match desc::encode_qp_ctx(&Self::qp_ctx(wire_qpn, q, &q.attr, next)) {
                Err(_) => Err(bad),
                Ok(w) => self.eng.write_entry(desc::HM_CTL_TBL_QP, flags, qpn as u16, &w).map_err(hw).and_then(|()| {
                    if next == QpState::Err && cur != QpState::Err {
                        // every block of the engine moves the QP to ERR now: posted WQEs
                        // complete with WR_FLUSH_ERR without waiting for a doorbell (no QP-fatal
                        // event)
                        self.eng.post(desc::HM_CTL_POST_QP_ERR, 0, qpn as u16).map_err(hw)
                    } else {
                        Ok(())
                    }
                }),
            }
        };
        if let Err(s) = r {
            old.put(&mut e.attr);
            if let Some(av) = old_av {
                e.attr.av = av;
            }
            return Err(s);
        }
        if next == QpState::Reset {
            e.attr = QpAttr::ZERO;
        }
        e.state = next;
        Ok(0)
    }

    /// MODIFY_QP's attribute words `a` (after the QPN and the mask) that `mask` selects, checked
    /// and stored into `at`; on an error `at` may be partly changed (the caller restores it).
    fn apply_attrs(at: &mut QpAttr, gids: &[Gid], mask: u32, a: &[u32]) -> Result<(), Status> {
        let bad = Status::BadParam;
        // (dispatch checked the length; as an array, the attribute reads need no bounds checks)
        let a: &[u32; 2 + ATTR_WORDS] = a.try_into().map_err(|_| Status::BadLength)?;
        let v = |i: usize| a[2 + i];
        let chk = |m: u32, idx: usize, max: u32| -> Result<Option<u32>, Status> {
            if mask & m == 0 {
                return Ok(None);
            }
            let x = v(idx);
            if x > max {
                return Err(bad);
            }
            Ok(Some(x))
        };
        if let Some(x) = chk(M_ACCESS_FLAGS, A_ACCESS_FLAGS, QP_ACCESS_VALID)? {
            if x & !QP_ACCESS_VALID != 0 {
                return Err(bad);
            }
            at.access = x;
        }
        if let Some(x) = chk(M_PKEY_INDEX, A_PKEY_INDEX, 0)? {
            at.pkey_index = x as u16;
        }
        if mask & M_PORT != 0 {
            if v(A_PORT_NUM) != 1 {
                return Err(bad);
            }
            at.port = 1;
        }
        if let Some(x) = chk(M_PATH_MTU, A_PATH_MTU, 5)? {
            if x == 0 {
                return Err(bad);
            }
            at.path_mtu = x as u8;
        }
        if let Some(x) = chk(M_TIMEOUT, A_TIMEOUT, 31)? {
            at.timeout = x as u8;
        }
        if let Some(x) = chk(M_RETRY_CNT, A_RETRY_CNT, 7)? {
            at.retry_cnt = x as u8;
        }
        if let Some(x) = chk(M_RNR_RETRY, A_RNR_RETRY, 7)? {
            at.rnr_retry = x as u8;
        }
        if let Some(x) = chk(M_RQ_PSN, A_RQ_PSN, 0xFF_FFFF)? {
            at.rq_psn = x;
        }
        if let Some(x) = chk(M_SQ_PSN, A_SQ_PSN, 0xFF_FFFF)? {
            at.sq_psn = x;
        }
        if let Some(x) = chk(M_MAX_QP_RD_ATOMIC, A_MAX_RD_ATOMIC, MAX_RD_ATOM)? {
            at.max_rd_atomic = x as u8;
        }
        if let Some(x) = chk(M_MAX_DEST_RD_ATOMIC, A_MAX_DEST_RD_ATOMIC, MAX_RD_ATOM)? {
            at.max_dest_rd_atomic = x as u8;
        }
        if let Some(x) = chk(M_MIN_RNR_TIMER, A_MIN_RNR_TIMER, 31)? {
            at.min_rnr_timer = x as u8;
        }
        if let Some(x) = chk(M_DEST_QPN, A_DEST_QPN, 0xFF_FFFF)? {
            at.dest_qpn = x;
        }
        if let Some(x) = chk(M_EN_SQD_ASYNC_NOTIFY, A_EN_SQD_ASYNC_NOTIFY, 1)? {
            at.en_sqd_async_notify = x as u8;
        }
        if let Some(x) = chk(M_STD_TIMER, A_STD_TIMER, 1)? {
            at.std_timer = x != 0;
        }
        if mask & M_AV != 0 {
            Self::parse_av_into(gids, &a[2..], &mut at.av)?;
        }
        Ok(())
    }

    /// The address vector from the attribute block `v`, checked against the GID table, into
    /// `av` (unchanged on an error).
    fn parse_av_into(gids: &[Gid], v: &[u32], av: &mut Av) -> Result<(), Status> {
        let bad = Status::BadParam;
        let sgid = arg(v, A_SGID_INDEX) as usize;
        let g = gids.get(sgid).filter(|g| g.valid).ok_or(bad)?;
        let dgid = [arg(v, A_DGID), arg(v, A_DGID + 1), arg(v, A_DGID + 2), arg(v, A_DGID + 3)];
        let ipv6 = !gid_is_v4(&dgid);
        if dgid[0] | dgid[1] | dgid[2] | dgid[3] == 0 || ipv6 == gid_is_v4(&g.gid) {
            return Err(bad);
        }
        let (hi, hop, tc, fl, sport) =
            (arg(v, A_DMAC_HI), arg(v, A_HOP_LIMIT), arg(v, A_TRAFFIC_CLASS), arg(v, A_FLOW_LABEL), arg(v, A_UDP_SPORT));
        if hi > 0xFFFF || hop > 0xFF || tc > 0xFF || fl >> 20 != 0 || sport > 0xFFFF {
            return Err(bad);
        }
        av.sgid_index = sgid as u8;
        av.dgid = dgid;
        av.dmac = u64::from(arg(v, A_DMAC_LO)) | u64::from(hi) << 32;
        av.hop_limit = hop as u8;
        av.traffic_class = tc as u8;
        av.flow_label = fl;
        av.udp_sport = sport as u16;
        av.ipv6 = ipv6;
        av.sgid = g.gid;
        av.smac = g.mac;
        Ok(())
    }

    fn query_qp(&mut self, a: &[u32], o: &mut Out) -> R {
        let qpn = self.t.qp(arg(a, 0)).ok_or(Status::BadHandle)?;
        let q = *self.t.qps.get(qpn).ok_or(Status::BadHandle)?;
        let at = &q.attr;
        let mut v = [0u32; ATTR_WORDS];
        v[A_QP_STATE] = q.state as u32;
        v[A_CUR_QP_STATE] = q.state as u32;
        v[A_ACCESS_FLAGS] = at.access;
        v[A_PKEY_INDEX] = at.pkey_index.into();
        v[A_PORT_NUM] = at.port.into();
        v[A_PATH_MTU] = at.path_mtu.into();
        v[A_TIMEOUT] = at.timeout.into();
        v[A_RETRY_CNT] = at.retry_cnt.into();
        v[A_RNR_RETRY] = at.rnr_retry.into();
        v[A_RQ_PSN] = at.rq_psn;
        v[A_SQ_PSN] = at.sq_psn;
        v[A_MAX_RD_ATOMIC] = at.max_rd_atomic.into();
        v[A_MAX_DEST_RD_ATOMIC] = at.max_dest_rd_atomic.into();
        v[A_MIN_RNR_TIMER] = at.min_rnr_timer.into();
        v[A_DEST_QPN] = at.dest_qpn;
        v[A_EN_SQD_ASYNC_NOTIFY] = at.en_sqd_async_notify.into();
        v[A_PATH_MIG_STATE] = MIG_MIGRATED;
        v[A_SGID_INDEX] = at.av.sgid_index.into();
        v[A_DGID..A_DGID + 4].copy_from_slice(&at.av.dgid);
        v[A_DMAC_LO] = at.av.dmac as u32;
        v[A_DMAC_HI] = (at.av.dmac >> 32) as u32;
        v[A_HOP_LIMIT] = at.av.hop_limit.into();
        v[A_TRAFFIC_CLASS] = at.av.traffic_class.into();
        v[A_FLOW_LABEL] = at.av.flow_label;
        v[A_UDP_SPORT] = at.av.udp_sport.into();
        v[A_STD_TIMER] = at.std_timer.into();
        for x in v {
            o.push(x);
        }
        for x in [q.cap.max_send_wr, q.cap.max_recv_wr, q.cap.max_send_sge, q.cap.max_recv_sge, q.cap.max_inline] {
            o.push(x);
        }
        o.push(q.pd.into());
        o.push(q.send_cq.into());
        o.push(q.recv_cq.into());
        Ok(o.n)
    }

    fn destroy_qp(&mut self, a: &[u32]) -> R {
        let qpn = self.t.qp(arg(a, 0)).ok_or(Status::BadHandle)?;
        let q = *self.t.qps.get(qpn).ok_or(Status::BadHandle)?;
        if q.state != QpState::Reset {
            let w = desc::encode_qp_ctx(&Self::qp_ctx(self.t.qpn_of(qpn) as usize, &q, &q.attr, QpState::Err)).map_err(|_| Status::BadParam)?;
            self.write_qp(qpn, &w, 0)?;
            if let Err(e) = self.write_qp(qpn, &[0; desc::QP_WORDS], 0) {
                if let Some(e) = self.t.qps.get_mut(qpn) {
                    e.state = QpState::Err;
                }
                return Err(e);
            }
        } else {
            self.write_qp(qpn, &[0; desc::QP_WORDS], 0)?;
        }
        self.t.qps.remove(qpn);
        if let Some(p) = self.t.pd(q.pd.into()) {
            self.pd_ref(p, false);
        }
        self.cq_ref(q.send_cq.into(), false);
        self.cq_ref(q.recv_cq.into(), false);
        Ok(0)
    }

    fn set_cc(&mut self, a: &[u32]) -> R {
        let mask = arg(a, 0);
        self.cc.set(mask, a.get(1..).unwrap_or(&[])).map_err(|_| Status::BadParam)?;
        self.write_cc()?;
        Ok(0)
    }

    /// Writes the stored CC parameters into the engine's CC registers (hardware units).
    fn write_cc(&mut self) -> Result<(), Status> {
        let words = crate::cc::engine_words(&self.cc);
        for (i, w) in words.iter().enumerate().take(regs::HM_CTL_CC_WORDS as usize) {
            self.eng.write_reg(regs::HM_CTL_CC + 4 * i as u16, *w).map_err(hw)?;
        }
        Ok(())
    }

    fn get_cc(&mut self, o: &mut Out) -> R {
        for i in 0..CC_PARAMS {
            o.push(self.cc.0.get(i).copied().unwrap_or(0));
        }
        Ok(o.n)
    }
}
