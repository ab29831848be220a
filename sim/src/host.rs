//! One simulated host with a Hematite engine: the Verilated engine and its memory, plus the
//! same host in the transport model (`refn`) that every setup step is mirrored into, so that
//! a run can be compared with what the model predicts. The driver side is done the way a
//! driver does it: MR and QP contexts through the control bus, WQEs written into the rings in
//! host memory, doorbells through the BAR, CQEs read from the CQ ring by their owner bit.

use crate::dma::MemCfg;
use crate::eng::Engine;
use hematite_model::desc::{self, QpCtxFields};
use hematite_model::transport::mem::{Mr, MrAccess};
use hematite_model::transport::{Cqe, Node, QpConfig, RecvWr, SendWr, WcOpcode};
use std::collections::HashMap;

/// Send queue rings: the ring of QP q (table entry e) at SQ_BASE + e * 64 KiB.
pub const SQ_BASE: u64 = 0x4000_0000;
/// log2 of the send queue size.
pub const SQ_LOG: u8 = 8;
/// Receive queue rings: the ring of QP q (table entry e) at RQ_BASE + e * 64 KiB (64-byte WQEs).
pub const RQ_BASE: u64 = 0x5000_0000;
/// log2 of the receive queue size.
pub const RQ_LOG: u8 = 6;
/// Completion queue ring (CQ 0, shared by every QP of the host).
pub const CQ_BASE: u64 = 0x3000_0000;
/// log2 of the CQ size.
pub const CQ_LOG: u8 = 12;

/// A completion as the engine wrote it, with its ring slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EngCqe {
    pub cqe: Cqe,
    pub wqe_index: u16,
    /// Cycle at which the testbench found it.
    pub cycle: u64,
}

fn ctl(op: u8, table: u8, flags: u8, index: u16) -> u32 {
    desc::encode_ctl_cmd(op, table, flags, index).expect("command fields in range")
}

pub struct EngHost {
    pub eng: Engine,
    /// The same host in the transport model.
    pub refn: Node,
    pi: HashMap<u32, u16>,
    rpi: HashMap<u32, u16>,
    stride: HashMap<u32, usize>,
    cq_seen: u32,
    /// CQEs read from the CQ ring, in ring order.
    pub cqes: Vec<EngCqe>,
}

impl EngHost {
    /// A fresh engine (CQ 0 created) and an empty model host.
    pub fn new(mem: MemCfg) -> Result<EngHost, String> {
        let mut eng = Engine::new(mem);
        let words = desc::encode_cq_ctx(CQ_BASE, CQ_LOG, 0, true).map_err(|e| e.to_string())?;
        let st = eng.ctl_cmd(ctl(desc::HM_CTL_OP_WRITE, desc::HM_CTL_TBL_CQ, desc::HM_CTL_F_LOAD_CQ, 0), &words)?;
        if st != desc::HM_CTL_ST_OK {
            return Err(format!("CQ create: status {st}"));
        }
        Ok(EngHost {
            eng,
            refn: Node::new(),
            pi: HashMap::new(),
            rpi: HashMap::new(),
            stride: HashMap::new(),
            cq_seen: 0,
            cqes: Vec::new(),
        })
    }

    /// The same bytes into both memories.
    pub fn fill(&mut self, addr: u64, data: &[u8]) {
        self.eng.mem.mem.write(addr, data);
        self.refn.mem.write(addr, data);
    }

    /// Registers an MR in the model (which picks the key) and writes it into the engine.
    pub fn reg_mr(&mut self, pd: u32, base: u64, len: u64, access: MrAccess) -> Result<Mr, String> {
        let mr = self.refn.reg_mr(pd, base, len, access).ok_or("model MR table full")?;
        let words = desc::encode_mr_ctx(&mr, true).map_err(|e| e.to_string())?;
        let st = self.eng.ctl_cmd(ctl(desc::HM_CTL_OP_WRITE, desc::HM_CTL_TBL_MR, 0, (mr.lkey >> 8) as u16), &words)?;
        if st != desc::HM_CTL_ST_OK {
            return Err(format!("MR write: status {st}"));
        }
        Ok(mr)
    }

    /// Deregisters the MR named by `key` (model, and the engine entry written invalid).
    pub fn dereg_mr(&mut self, key: u32) -> Result<(), String> {
        let mr = self.refn.mrs.get(key).ok_or("no such MR")?;
        if !self.refn.dereg_mr(key) {
            return Err("model refused the deregistration".into());
        }
        let words = desc::encode_mr_ctx(&mr, false).map_err(|e| e.to_string())?;
        let st = self.eng.ctl_cmd(ctl(desc::HM_CTL_OP_WRITE, desc::HM_CTL_TBL_MR, 0, (key >> 8) as u16), &words)?;
        if st != desc::HM_CTL_ST_OK {
            return Err(format!("MR write: status {st}"));
        }
        Ok(())
    }

    /// The engine's table entry of QPN `q` (`hematite_abi::qp::qp_entry`: QPNs NUM_QPS and
    /// NUM_QPS + 1 are entries 0 and 1); a QPN that names no entry is returned as it is (the
    /// engine then refuses what uses it). Rings are placed by entry.
    pub fn entry(q: u32) -> u32 {
        hematite_abi::qp::qp_entry(q, crate::eng::NUM_QPS.trailing_zeros()).unwrap_or(q)
    }

    /// Refuses a QPN that names no table entry (QPNs 0 and 1 are reserved).
    fn named(q: u32) -> Result<(), String> {
        match hematite_abi::qp::qp_entry(q, crate::eng::NUM_QPS.trailing_zeros()) {
            Some(_) => Ok(()),
            None => Err(format!("QPN {q} names no QP table entry (QPNs 0 and 1 are reserved)")),
        }
    }

    /// Creates QP `q` in RTS (engine context and model).
    pub fn create_qp(&mut self, q: u32, cfg: QpConfig, stride_log: u8) -> Result<(), String> {
        Self::named(q)?;
        self.refn.create_qp(q, cfg).map_err(|e| format!("{e:?}"))?;
        self.reload_qp(q, cfg, stride_log)
    }

    /// Writes QP `q`'s engine context afresh (RTS, the given configuration, empty rings),
    /// as a driver recovering a QP from the error state does; the model is not told.
    pub fn reload_qp(&mut self, q: u32, cfg: QpConfig, stride_log: u8) -> Result<(), String> {
        Self::named(q)?;
        let f = QpCtxFields {
            cfg,
            state: desc::HM_QPS_RTS,
            sq_base: SQ_BASE + Self::entry(q) as u64 * 0x1_0000,
            sq_log_size: SQ_LOG,
            sq_log_stride: stride_log,
            rq_base: RQ_BASE + Self::entry(q) as u64 * 0x1_0000,
            rq_log_size: RQ_LOG,
            rq_log_stride: 0,
            sq_cqn: 0,
            rq_cqn: 0,
        };
        let words = desc::encode_qp_ctx(&f).map_err(|e| e.to_string())?;
        let st = self.eng.ctl_cmd(
            ctl(desc::HM_CTL_OP_WRITE, desc::HM_CTL_TBL_QP, desc::HM_CTL_F_LOAD_SQ | desc::HM_CTL_F_LOAD_RQ, Self::entry(q) as u16),
            &words,
        )?;
        if st != desc::HM_CTL_ST_OK {
            return Err(format!("QP reload: status {st}"));
        }
        self.pi.insert(q, 0);
        self.rpi.insert(q, 0);
        self.stride.insert(q, 64 << stride_log);
        Ok(())
    }

    /// Writes a send WQE into QP `q`'s ring (and posts it to the model); rings the doorbell
    /// when asked.
    pub fn post_send(&mut self, q: u32, wr: &SendWr, doorbell: bool) -> Result<(), String> {
        let inline = if wr.inline {
            let mut d = Vec::new();
            for s in &wr.sgl {
                d.extend(self.refn.mem.read(s.addr, s.len as usize));
            }
            Some(d)
        } else {
            None
        };
        let stride = *self.stride.get(&q).ok_or("no such QP")?;
        let bytes = desc::encode_send_wqe(wr, stride, inline.as_deref()).map_err(|e| e.to_string())?;
        let pi = self.pi[&q];
        let slot = pi as u64 & ((1 << SQ_LOG) - 1);
        self.eng.mem.mem.write(SQ_BASE + Self::entry(q) as u64 * 0x1_0000 + slot * stride as u64, &bytes);
        self.refn.post_send(q, wr.clone()).map_err(|e| format!("{e:?}"))?;
        self.pi.insert(q, pi.wrapping_add(1));
        if doorbell {
            self.doorbell(q)?;
        }
        Ok(())
    }

    /// As post_send, through the MMIO path: the slot's first 64 bytes also go to the engine's
    /// push port (a whole write into the QP's push window), then the doorbell. A WQE that uses
    /// more than those bytes is not pushed (`desc::wqe_fits_push`; the engine fetches it).
    pub fn post_send_push(&mut self, q: u32, wr: &SendWr) -> Result<(), String> {
        self.post_send(q, wr, false)?;
        let stride = self.stride[&q] as u64;
        let slot = self.pi[&q].wrapping_sub(1) as u64 & ((1 << SQ_LOG) - 1);
        let b = self.eng.mem.mem.read(SQ_BASE + Self::entry(q) as u64 * 0x1_0000 + slot * stride, desc::PUSH_BYTES);
        if desc::wqe_fits_push(&b) {
            self.eng.push_wqe(q as u16, desc::push_tagged(&b, self.pi[&q].wrapping_sub(1)));
        }
        self.doorbell(q)
    }

    /// Send queue doorbell with producer index `pi` (a test of doorbells that post part of
    /// what was written).
    pub fn doorbell_at(&mut self, q: u32, pi: u16) -> Result<(), String> {
        if !self.eng.bar_write(crate::csr::regs::HM_REG_DB_SQ, (pi as u32) << 16 | q)? {
            return Err("doorbell refused".into());
        }
        Ok(())
    }

    /// The send queue doorbell word of QP `q` with its current producer index (the BAR's
    /// `DB_SQ` value), for a caller that rings it without waiting (`Engine::lite_start`).
    pub fn sq_doorbell_word(&self, q: u32) -> Option<u32> {
        self.pi.get(&q).map(|pi| (*pi as u32) << 16 | q)
    }

    /// Send queue doorbell with the current producer index.
    pub fn doorbell(&mut self, q: u32) -> Result<(), String> {
        let v = (self.pi[&q] as u32) << 16 | q;
        if !self.eng.bar_write(crate::csr::regs::HM_REG_DB_SQ, v)? {
            return Err("doorbell refused".into());
        }
        Ok(())
    }

    /// Writes a receive WQE into QP `q`'s ring (and posts it to the model), rings the RQ
    /// doorbell.
    pub fn post_recv(&mut self, q: u32, wr: &RecvWr) -> Result<(), String> {
        let bytes = desc::encode_recv_wqe(wr, 64).map_err(|e| e.to_string())?;
        let pi = *self.rpi.get(&q).ok_or("no such QP")?;
        let slot = pi as u64 & ((1 << RQ_LOG) - 1);
        self.eng.mem.mem.write(RQ_BASE + Self::entry(q) as u64 * 0x1_0000 + slot * 64, &bytes);
        self.refn.post_recv(q, wr.clone()).map_err(|e| format!("{e:?}"))?;
        let pi = pi.wrapping_add(1);
        self.rpi.insert(q, pi);
        let v = (pi as u32) << 16 | q;
        if !self.eng.bar_write(crate::csr::regs::HM_REG_DB_RQ, v)? {
            return Err("RQ doorbell refused".into());
        }
        Ok(())
    }

    /// Reads new CQEs from the ring (owner bit = expected phase); returns how many.
    pub fn poll_cq(&mut self) -> Result<usize, String> {
        let size = 1u32 << CQ_LOG;
        let before = self.cqes.len();
        loop {
            let slot = self.cq_seen % size;
            let phase = (self.cq_seen / size) % 2 == 0;
            let bytes = self.eng.mem.mem.read(CQ_BASE + slot as u64 * 32, 32);
            let (cqe, idx, owner) = desc::decode_cqe(&bytes).map_err(|e| format!("CQE {}: {e}", self.cq_seen))?;
            if owner != phase {
                return Ok(self.cqes.len() - before);
            }
            self.cqes.push(EngCqe { cqe, wqe_index: idx, cycle: self.eng.cycle() });
            self.cq_seen += 1;
            // consumer index back to the engine every 64 entries
            if self.cq_seen % 64 == 0 {
                const CI: (usize, usize) = hematite_abi::desc::fpos(hematite_abi::regs::HM_DB_CQ_T_FIELDS, "ci");
                let v = hematite_abi::desc::put32(CI, self.cq_seen);
                self.eng.bar_write(crate::csr::regs::HM_REG_DB_CQ, v)?;
            }
        }
    }

    /// Engine CQEs: (receive completions, send completions), each in order.
    pub fn split_cqes(&self) -> (Vec<Cqe>, Vec<Cqe>) {
        let (r, s): (Vec<EngCqe>, Vec<EngCqe>) =
            self.cqes.iter().partition(|c| matches!(c.cqe.opcode, WcOpcode::Recv | WcOpcode::RecvRdmaWithImm));
        (r.iter().map(|c| c.cqe).collect(), s.iter().map(|c| c.cqe).collect())
    }

    /// First address where the engine's memory and the model's differ in [addr, addr+len).
    pub fn mem_diff(&self, addr: u64, len: usize) -> Option<u64> {
        first_diff(&self.eng.mem.mem.read(addr, len), &self.refn.mem.read(addr, len)).map(|i| addr + i as u64)
    }
}

/// The first index at which `a` and `b` differ (None when equal over the shorter).
pub(crate) fn first_diff(a: &[u8], b: &[u8]) -> Option<usize> {
    a.iter().zip(b).position(|(x, y)| x != y)
}
