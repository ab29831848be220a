//! RC testbench: the RTL engine (host "A") against a model peer (host "B") over a wire, next
//! to a reference run of the same work entirely in the transport model (A' and B'). Every
//! setup step (memory contents, MRs, QPs, posted work requests) is applied to both worlds,
//! so after a run the engine's completions and both hosts' memories can be compared with
//! what the model predicts.

use crate::dma::MemCfg;
use crate::eng::Engine;
use hematite_model::desc::{self, QpCtxFields};
use hematite_model::transport::mem::{Mr, MrAccess};
use hematite_model::transport::{Cqe, Node, Pkt, QpConfig, RecvWr, SendWr};
use hematite_model::{build_frame, classify, HdrRecord};
use std::collections::HashMap;

/// Simulated nanoseconds per engine clock cycle (250 MHz).
pub const NS_PER_CYCLE: u64 = 4;
/// Send queue rings: QP q's ring at SQ_BASE + q * 64 KiB.
pub const SQ_BASE: u64 = 0x4000_0000;
/// Completion queue ring (CQ 0) of the engine.
pub const CQ_BASE: u64 = 0x3000_0000;
/// log2 of the CQ size.
pub const CQ_LOG: u8 = 10;
/// log2 of the send queue size.
pub const SQ_LOG: u8 = 8;
/// Receive queue rings: QP q's ring at RQ_BASE + q * 64 KiB (64-byte WQEs).
pub const RQ_BASE: u64 = 0x5000_0000;
/// log2 of the receive queue size.
pub const RQ_LOG: u8 = 6;

/// A completion as the engine wrote it, with its ring slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EngCqe {
    pub cqe: Cqe,
    pub wqe_index: u16,
}

pub struct RcBench {
    pub eng: Engine,
    pub peer: Node,
    pub ref_a: Node,
    pub ref_b: Node,
    pi: HashMap<u32, u16>,
    rpi: HashMap<u32, u16>,
    stride: HashMap<u32, usize>,
    cq_seen: u32,
    /// CQEs read from the engine's CQ ring, in ring order.
    pub cqes: Vec<EngCqe>,
    /// Every frame on the wire: (cycle, from engine?, bytes).
    pub wire: Vec<(u64, bool, Vec<u8>)>,
    tx_seen: usize,
    /// Frames lost on the wire, per million, in each direction.
    pub drop_ppm: u32,
    /// Frames dropped so far.
    pub dropped: u64,
    /// Indices (in send order) of engine frames / peer frames to lose, besides drop_ppm.
    pub drop_tx: Vec<usize>,
    pub drop_rx: Vec<usize>,
    peer_sent: usize,
    rng: crate::Rng,
}

fn ctl(op: u8, table: u8, flags: u8, index: u16) -> u32 {
    desc::encode_ctl_cmd(op, table, flags, index).expect("command fields in range")
}

/// Header record and payload of a frame the model accepts (None if it would drop it).
pub fn decode(frame: &[u8]) -> Option<Pkt> {
    let o = classify(frame);
    if o.reason.is_some() {
        return None;
    }
    let off = o.rec.payload_off as usize;
    let len = o.rec.payload_len as usize;
    let payload = frame.get(off..off + len)?.to_vec();
    Some((o.rec, payload))
}

impl RcBench {
    /// Fresh engine and models; CQ 0 of the engine is created.
    pub fn new(mem: MemCfg) -> Result<RcBench, String> {
        let seed = mem.seed;
        let mut eng = Engine::new(mem);
        let words = desc::encode_cq_ctx(CQ_BASE, CQ_LOG, 0, true).map_err(|e| e.to_string())?;
        let st = eng.ctl_cmd(ctl(desc::HM_CTL_OP_WRITE, desc::HM_CTL_TBL_CQ, desc::HM_CTL_F_LOAD_CQ, 0), &words)?;
        if st != desc::HM_CTL_ST_OK {
            return Err(format!("CQ create: status {st}"));
        }
        Ok(RcBench {
            eng,
            peer: Node::new(),
            ref_a: Node::new(),
            ref_b: Node::new(),
            pi: HashMap::new(),
            rpi: HashMap::new(),
            stride: HashMap::new(),
            cq_seen: 0,
            cqes: Vec::new(),
            wire: Vec::new(),
            tx_seen: 0,
            drop_ppm: 0,
            dropped: 0,
            drop_tx: Vec::new(),
            drop_rx: Vec::new(),
            peer_sent: 0,
            rng: crate::Rng::new(seed ^ 0x5EED),
        })
    }

    /// The same bytes into host A (engine memory and reference) or host B.
    pub fn fill(&mut self, on_a: bool, addr: u64, data: &[u8]) {
        if on_a {
            self.eng.mem.mem.write(addr, data);
            self.ref_a.mem.write(addr, data);
        } else {
            self.peer.mem.write(addr, data);
            self.ref_b.mem.write(addr, data);
        }
    }

    /// Registers an MR on host A (engine table and reference) or B.
    pub fn reg_mr(&mut self, on_a: bool, pd: u32, base: u64, len: u64, access: MrAccess) -> Result<Mr, String> {
        if on_a {
            let mr = self.ref_a.reg_mr(pd, base, len, access).ok_or("model MR table full")?;
            let words = desc::encode_mr_ctx(&mr, true).map_err(|e| e.to_string())?;
            let st = self.eng.ctl_cmd(ctl(desc::HM_CTL_OP_WRITE, desc::HM_CTL_TBL_MR, 0, (mr.lkey >> 8) as u16), &words)?;
            if st != desc::HM_CTL_ST_OK {
                return Err(format!("MR write: status {st}"));
            }
            Ok(mr)
        } else {
            let mr = self.peer.reg_mr(pd, base, len, access).ok_or("model MR table full")?;
            let m2 = self.ref_b.reg_mr(pd, base, len, access).ok_or("model MR table full")?;
            assert_eq!(mr, m2);
            Ok(mr)
        }
    }

    /// A connected pair: engine QP `qa` (host A) and model QP `qb` (host B).
    pub fn connect(&mut self, qa: u32, qb: u32, cfg_a: QpConfig, cfg_b: QpConfig, stride_log: u8) -> Result<(), String> {
        let cfg_a = QpConfig { dest_qpn: qb, ..cfg_a };
        let cfg_b = QpConfig { dest_qpn: qa, av: cfg_a.av.reversed(), sq_psn: cfg_a.rq_psn, rq_psn: cfg_a.sq_psn, ..cfg_b };
        self.ref_a.create_qp(qa, cfg_a).map_err(|e| format!("{e:?}"))?;
        self.ref_b.create_qp(qb, cfg_b).map_err(|e| format!("{e:?}"))?;
        self.peer.create_qp(qb, cfg_b).map_err(|e| format!("{e:?}"))?;
        let f = QpCtxFields {
            cfg: cfg_a,
            state: desc::HM_QPS_RTS,
            sq_base: SQ_BASE + qa as u64 * 0x1_0000,
            sq_log_size: SQ_LOG,
            sq_log_stride: stride_log,
            rq_base: RQ_BASE + qa as u64 * 0x1_0000,
            rq_log_size: RQ_LOG,
            rq_log_stride: 0,
            sq_cqn: 0,
            rq_cqn: 0,
        };
        let words = desc::encode_qp_ctx(&f).map_err(|e| e.to_string())?;
        let st = self.eng.ctl_cmd(
            ctl(desc::HM_CTL_OP_WRITE, desc::HM_CTL_TBL_QP, desc::HM_CTL_F_LOAD_SQ | desc::HM_CTL_F_LOAD_RQ, qa as u16),
            &words,
        )?;
        if st != desc::HM_CTL_ST_OK {
            return Err(format!("QP write: status {st}"));
        }
        self.pi.insert(qa, 0);
        self.rpi.insert(qa, 0);
        self.stride.insert(qa, 64 << stride_log);
        Ok(())
    }

    /// Posts a receive WR on engine QP `qa` (and the reference) and rings the RQ doorbell.
    pub fn post_recv_a(&mut self, qa: u32, wr: &RecvWr) -> Result<(), String> {
        let bytes = desc::encode_recv_wqe(wr, 64).map_err(|e| e.to_string())?;
        let pi = self.rpi[&qa];
        let slot = pi as u64 & ((1 << RQ_LOG) - 1);
        self.eng.mem.mem.write(RQ_BASE + qa as u64 * 0x1_0000 + slot * 64, &bytes);
        self.ref_a.post_recv(qa, wr.clone()).map_err(|e| format!("{e:?}"))?;
        let pi = pi.wrapping_add(1);
        self.rpi.insert(qa, pi);
        let v = (pi as u32) << 16 | qa;
        if !self.eng.bar_write(crate::csr::regs::HM_REG_DB_RQ, v)? {
            return Err("RQ doorbell refused".into());
        }
        Ok(())
    }

    /// Posts a send WR on the model peer's QP `qb` (and its reference).
    pub fn post_send_b(&mut self, qb: u32, wr: &SendWr) -> Result<(), String> {
        self.peer.post_send(qb, wr.clone()).map_err(|e| format!("{e:?}"))?;
        self.ref_b.post_send(qb, wr.clone()).map_err(|e| format!("{e:?}"))?;
        Ok(())
    }

    /// Engine CQEs of receive completions (in order) and of send completions.
    pub fn split_cqes(&self) -> (Vec<Cqe>, Vec<Cqe>) {
        use hematite_model::transport::WcOpcode;
        let (r, s): (Vec<EngCqe>, Vec<EngCqe>) =
            self.cqes.iter().partition(|c| matches!(c.cqe.opcode, WcOpcode::Recv | WcOpcode::RecvRdmaWithImm));
        (r.iter().map(|c| c.cqe).collect(), s.iter().map(|c| c.cqe).collect())
    }

    /// Posts a send WR on engine QP `qa` (and on the reference); rings the doorbell when asked.
    pub fn post_send(&mut self, qa: u32, wr: &SendWr, doorbell: bool) -> Result<(), String> {
        let inline = if wr.inline {
            let mut d = Vec::new();
            for s in &wr.sgl {
                d.extend(self.ref_a.mem.read(s.addr, s.len as usize));
            }
            Some(d)
        } else {
            None
        };
        let stride = self.stride[&qa];
        let bytes = desc::encode_send_wqe(wr, stride, inline.as_deref()).map_err(|e| e.to_string())?;
        let pi = self.pi[&qa];
        let slot = pi as u64 & ((1 << SQ_LOG) - 1);
        self.eng.mem.mem.write(SQ_BASE + qa as u64 * 0x1_0000 + slot * stride as u64, &bytes);
        self.ref_a.post_send(qa, wr.clone()).map_err(|e| format!("{e:?}"))?;
        self.pi.insert(qa, pi.wrapping_add(1));
        if doorbell {
            self.doorbell(qa)?;
        }
        Ok(())
    }

    pub fn doorbell(&mut self, qa: u32) -> Result<(), String> {
        let v = (self.pi[&qa] as u32) << 16 | qa;
        if !self.eng.bar_write(crate::csr::regs::HM_REG_DB_SQ, v)? {
            return Err("doorbell refused".into());
        }
        Ok(())
    }

    /// Posts a receive WR on the model peer (and its reference).
    pub fn post_recv_b(&mut self, qb: u32, wr: &RecvWr) -> Result<(), String> {
        self.peer.post_recv(qb, wr.clone()).map_err(|e| format!("{e:?}"))?;
        self.ref_b.post_recv(qb, wr.clone()).map_err(|e| format!("{e:?}"))?;
        Ok(())
    }

    fn poll_cq(&mut self) -> Result<(), String> {
        let size = 1u32 << CQ_LOG;
        loop {
            let slot = self.cq_seen % size;
            let phase = (self.cq_seen / size) % 2 == 0;
            let bytes = self.eng.mem.mem.read(CQ_BASE + slot as u64 * 32, 32);
            let (cqe, idx, owner) = desc::decode_cqe(&bytes).map_err(|e| format!("CQE {}: {e}", self.cq_seen))?;
            if owner != phase {
                return Ok(());
            }
            self.cqes.push(EngCqe { cqe, wqe_index: idx });
            self.cq_seen += 1;
            // consumer index back to the engine every 64 entries
            if self.cq_seen % 64 == 0 {
                let v = (self.cq_seen & 0xFFFF) << 16;
                self.eng.bar_write(crate::csr::regs::HM_REG_DB_CQ, v)?;
            }
        }
    }

    /// Runs engine and peer until `want_cqes` engine CQEs have arrived and the wire has been
    /// quiet for a while, or `max_cycles` pass.
    pub fn run(&mut self, want_cqes: usize, max_cycles: u64) -> Result<u64, String> {
        let start = self.eng.cycle();
        let mut quiet = 0u64;
        loop {
            self.eng.step();
            let now = self.eng.cycle();
            let ns = now * NS_PER_CYCLE;
            let mut active = false;
            while self.tx_seen < self.eng.tx.len() {
                let (f, aborted) = self.eng.tx[self.tx_seen].clone();
                self.tx_seen += 1;
                active = true;
                self.wire.push((now, true, f.clone()));
                if aborted || self.lose() || self.drop_tx.contains(&(self.tx_seen - 1)) {
                    continue;
                }
                if let Some((rec, pay)) = decode(&f) {
                    self.peer.receive(ns, &rec, &pay);
                }
            }
            if now % 8 == 0 {
                self.peer.tick(ns);
                for (rec, pay) in self.peer.poll_tx(ns) {
                    let f = build_frame(&rec, &pay).map_err(|e| format!("peer frame: {e:?}"))?;
                    self.wire.push((now, false, f.clone()));
                    self.peer_sent += 1;
                    if !self.lose() && !self.drop_rx.contains(&(self.peer_sent - 1)) {
                        self.eng.rx_q.push_back(f);
                    }
                    active = true;
                }
                let seen = self.cqes.len();
                self.poll_cq()?;
                if self.cqes.len() != seen {
                    active = true;
                }
            }
            if !self.eng.rx_q.is_empty() {
                active = true;
            }
            quiet = if active { 0 } else { quiet + 1 };
            if self.cqes.len() >= want_cqes && quiet > 2_000 && self.peer.next_deadline().is_none() {
                return Ok(now - start);
            }
            if now - start > max_cycles {
                return Err(format!(
                    "run did not finish in {max_cycles} cycles: {} of {want_cqes} CQEs, {} frames on the wire",
                    self.cqes.len(),
                    self.wire.len()
                ));
            }
        }
    }

    fn lose(&mut self) -> bool {
        let l = self.drop_ppm > 0 && (self.rng.next() % 1_000_000) < self.drop_ppm as u64;
        if l {
            self.dropped += 1;
        }
        l
    }

    /// The reference: A' and B' exchange packets in the model until nothing moves and no
    /// timer is pending (time jumps to the next deadline when the wire is idle).
    pub fn run_reference(&mut self) {
        let mut now = 0u64;
        for _ in 0..1_000_000 {
            let pa = self.ref_a.poll_tx(now);
            let pb = self.ref_b.poll_tx(now);
            if pa.is_empty() && pb.is_empty() {
                let next = match (self.ref_a.next_deadline(), self.ref_b.next_deadline()) {
                    (Some(x), Some(y)) => Some(x.min(y)),
                    (x, y) => x.or(y),
                };
                match next {
                    Some(t) => {
                        now = now.max(t);
                        self.ref_a.tick(now);
                        self.ref_b.tick(now);
                        continue;
                    }
                    None => break,
                }
            }
            for (r, p) in pa {
                self.ref_b.receive(now, &r, &p);
            }
            for (r, p) in pb {
                self.ref_a.receive(now, &r, &p);
            }
            now += 1000;
        }
    }

    /// Reference completions of host A's send queue `qa`.
    pub fn ref_send_cqes(&mut self, qa: u32) -> Vec<Cqe> {
        self.ref_a.poll_send_cq(qa)
    }

    /// Header records the engine sent, decoded by the model (for checks on the wire).
    pub fn engine_records(&self) -> Vec<HdrRecord> {
        self.wire.iter().filter(|w| w.1).filter_map(|w| decode(&w.2)).map(|p| p.0).collect()
    }
}
