//! RC testbench: the RTL engine (host "A") against a model peer (host "B") over a wire, next
//! to a reference run of the same work entirely in the transport model (A' and B'). Every
//! setup step (memory contents, MRs, QPs, posted work requests) is applied to both worlds,
//! so after a run the engine's completions and both hosts' memories can be compared with
//! what the model predicts.

use crate::dma::MemCfg;
use crate::host::EngHost;
use hematite_model::transport::mem::{Mr, MrAccess};
use hematite_model::transport::{Cqe, Node, Pkt, QpConfig, RecvWr, SendWr};
use hematite_model::{build_frame, classify, HdrRecord};

/// Simulated nanoseconds per engine clock cycle (250 MHz).
pub const NS_PER_CYCLE: u64 = 4;

pub use crate::host::{EngCqe, CQ_BASE, CQ_LOG, RQ_BASE, RQ_LOG, SQ_BASE, SQ_LOG};

/// The memory of an RC test ([`RcBench::with_regions`]): host A's region starts at `A_BUF`,
/// host B's at `B_BUF`, `REGION_LEN` bytes each.
pub const A_BUF: u64 = 0x10_0000;
pub const B_BUF: u64 = 0x20_0000;
pub const REGION_LEN: u64 = 0x4_0000;

/// A bench from [`RcBench::with_regions`] and the keys of its two regions (an MR's lkey is
/// also its rkey).
pub struct RcSetup {
    pub b: RcBench,
    /// Host A's region (at `A_BUF`).
    pub ka: u32,
    /// Host B's region (at `B_BUF`).
    pub kb: u32,
}

pub struct RcBench {
    /// Host A: the engine (and its model twin).
    pub a: EngHost,
    /// Host B: the model peer the engine talks to.
    pub peer: Node,
    /// Host B in the reference run.
    pub ref_b: Node,
    /// Every frame on the wire: (cycle, from engine?, bytes).
    pub wire: Vec<(u64, bool, Vec<u8>)>,
    tx_seen: usize,
    /// Frames lost on the wire, per million, in each direction.
    pub drop_ppm: u32,
    /// Mark every ECN-capable frame from the peer to the engine CE (a congested switch).
    pub ce_rx: bool,
    /// Frames dropped so far.
    pub dropped: u64,
    /// Indices (in send order) of engine frames / peer frames to lose, besides drop_ppm.
    pub drop_tx: Vec<usize>,
    pub drop_rx: Vec<usize>,
    /// A misbehaving peer: called with the index (in send order) of every peer frame, its
    /// header record and payload, before it is built; the reference run applies it to the
    /// same frames of B', so the model's requester sees what the engine sees.
    pub tamper_rx: Option<fn(usize, &mut HdrRecord, &mut Vec<u8>)>,
    /// Peer frames (by index in send order) delivered this many cycles late (reordering).
    pub delay_rx: Vec<(usize, u64)>,
    delayed: Vec<(u64, Vec<u8>)>,
    peer_sent: usize,
    rng: crate::Rng,
}

/// `wr` with a bench's keys: `lkey` in every SGE, `rkey` as the remote key of a WRITE, READ or
/// atomic (the tests draw their random work requests without keys).
pub fn with_keys(mut wr: SendWr, lkey: u32, rkey: u32) -> SendWr {
    use hematite_model::transport::SendOp;
    for g in &mut wr.sgl {
        g.lkey = lkey;
    }
    match &mut wr.op {
        SendOp::Write { rkey: k, .. }
        | SendOp::WriteImm { rkey: k, .. }
        | SendOp::Read { rkey: k, .. }
        | SendOp::CmpSwap { rkey: k, .. }
        | SendOp::FetchAdd { rkey: k, .. } => *k = rkey,
        _ => {}
    }
    wr
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
        Ok(RcBench {
            a: EngHost::new(mem)?,
            peer: Node::new(),
            ref_b: Node::new(),
            wire: Vec::new(),
            tx_seen: 0,
            drop_ppm: 0,
            ce_rx: false,
            dropped: 0,
            drop_tx: Vec::new(),
            drop_rx: Vec::new(),
            tamper_rx: None,
            delay_rx: Vec::new(),
            delayed: Vec::new(),
            peer_sent: 0,
            rng: crate::Rng::new(seed ^ 0x5EED),
        })
    }

    /// A fresh bench with the usual memory of an RC test: `REGION_LEN` random bytes (from
    /// `Rng::new(fill_seed)`) at `A_BUF` on host A and at `B_BUF` on host B, each registered
    /// with every right in PD 1.
    pub fn with_regions(mem: MemCfg, fill_seed: u64) -> Result<RcSetup, String> {
        let mut b = RcBench::new(mem)?;
        let mut rng = crate::Rng::new(fill_seed);
        let ka = b.random_region(true, A_BUF, REGION_LEN, &mut rng)?.lkey;
        let kb = b.random_region(false, B_BUF, REGION_LEN, &mut rng)?.lkey;
        Ok(RcSetup { b, ka, kb })
    }

    /// Both hosts' regions against the reference run: host A's engine memory against A', the
    /// peer's against B'. Err names the first byte that differs.
    pub fn compare_memories(&self) -> Result<(), String> {
        let n = REGION_LEN as usize;
        for (name, base, got, want) in [
            ("A", A_BUF, self.a.eng.mem.mem.read(A_BUF, n), self.a.refn.mem.read(A_BUF, n)),
            ("B", B_BUF, self.peer.mem.read(B_BUF, n), self.ref_b.mem.read(B_BUF, n)),
        ] {
            if let Some(i) = crate::host::first_diff(&got, &want) {
                return Err(format!("host {name} memory differs first at {:#x}: {:#04x}, the model {:#04x}", base + i as u64, got[i], want[i]));
            }
        }
        Ok(())
    }

    /// `len` random bytes (from `rng`) at `base` on host A or B, registered with every right in
    /// PD 1: the usual memory of an RC test.
    pub fn random_region(&mut self, on_a: bool, base: u64, len: u64, rng: &mut crate::Rng) -> Result<Mr, String> {
        let data: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        self.fill(on_a, base, &data);
        self.reg_mr(on_a, 1, base, len, MrAccess::ALL)
    }

    /// The same bytes into host A (engine memory and reference) or host B.
    pub fn fill(&mut self, on_a: bool, addr: u64, data: &[u8]) {
        if on_a {
            self.a.fill(addr, data);
        } else {
            self.peer.mem.write(addr, data);
            self.ref_b.mem.write(addr, data);
        }
    }

    /// Registers an MR on host A (engine table and reference) or B.
    pub fn reg_mr(&mut self, on_a: bool, pd: u32, base: u64, len: u64, access: MrAccess) -> Result<Mr, String> {
        if on_a {
            self.a.reg_mr(pd, base, len, access)
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
        self.ref_b.create_qp(qb, cfg_b).map_err(|e| format!("{e:?}"))?;
        self.peer.create_qp(qb, cfg_b).map_err(|e| format!("{e:?}"))?;
        self.a.create_qp(qa, cfg_a, stride_log)
    }

    /// Posts a send WR on engine QP `qa` (and on the reference); rings the doorbell when asked.
    pub fn post_send(&mut self, qa: u32, wr: &SendWr, doorbell: bool) -> Result<(), String> {
        self.a.post_send(qa, wr, doorbell)
    }

    pub fn doorbell(&mut self, qa: u32) -> Result<(), String> {
        self.a.doorbell(qa)
    }

    /// Posts a receive WR on engine QP `qa` (and the reference) and rings the RQ doorbell.
    pub fn post_recv_a(&mut self, qa: u32, wr: &RecvWr) -> Result<(), String> {
        self.a.post_recv(qa, wr)
    }

    /// Posts a send WR on the model peer's QP `qb` (and its reference).
    pub fn post_send_b(&mut self, qb: u32, wr: &SendWr) -> Result<(), String> {
        self.peer.post_send(qb, wr.clone()).map_err(|e| format!("{e:?}"))?;
        self.ref_b.post_send(qb, wr.clone()).map_err(|e| format!("{e:?}"))?;
        Ok(())
    }

    /// Posts a receive WR on the model peer (and its reference).
    pub fn post_recv_b(&mut self, qb: u32, wr: &RecvWr) -> Result<(), String> {
        self.peer.post_recv(qb, wr.clone()).map_err(|e| format!("{e:?}"))?;
        self.ref_b.post_recv(qb, wr.clone()).map_err(|e| format!("{e:?}"))?;
        Ok(())
    }

    /// Engine CQEs: (receive completions, send completions).
    pub fn split_cqes(&self) -> (Vec<Cqe>, Vec<Cqe>) {
        self.a.split_cqes()
    }

    /// Runs engine and peer until `want_cqes` engine CQEs have arrived and the wire has been
    /// quiet for a while, or `max_cycles` pass.
    pub fn run(&mut self, want_cqes: usize, max_cycles: u64) -> Result<u64, String> {
        let start = self.a.eng.cycle();
        let mut quiet = 0u64;
        loop {
            self.a.eng.step();
            let now = self.a.eng.cycle();
            let ns = now * NS_PER_CYCLE;
            let mut active = false;
            while self.tx_seen < self.a.eng.tx.len() {
                let (f, aborted) = self.a.eng.tx[self.tx_seen].clone();
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
                for (mut rec, mut pay) in self.peer.poll_tx(ns) {
                    if self.ce_rx && rec.ecn != 0 {
                        rec.ecn = 3;
                    }
                    if let Some(t) = self.tamper_rx {
                        t(self.peer_sent, &mut rec, &mut pay);
                        rec.payload_len = pay.len() as u16;
                    }
                    let f = build_frame(&rec, &pay).map_err(|e| format!("peer frame: {e:?}"))?;
                    self.wire.push((now, false, f.clone()));
                    self.peer_sent += 1;
                    if !self.lose() && !self.drop_rx.contains(&(self.peer_sent - 1)) {
                        match self.delay_rx.iter().find(|d| d.0 == self.peer_sent - 1) {
                            Some(&(_, late)) => self.delayed.push((now + late, f)),
                            None => self.a.eng.rx_q.push_back(f),
                        }
                    }
                    active = true;
                }
                if self.a.poll_cq()? != 0 {
                    active = true;
                }
            }
            while let Some(i) = self.delayed.iter().position(|d| d.0 <= now) {
                let (_, f) = self.delayed.remove(i);
                self.a.eng.rx_q.push_back(f);
            }
            if !self.a.eng.rx_q.is_empty() || !self.delayed.is_empty() {
                active = true;
            }
            quiet = if active { 0 } else { quiet + 1 };
            if self.a.cqes.len() >= want_cqes && quiet > 2_000 && self.peer.next_deadline().is_none() {
                return Ok(now - start);
            }
            if now - start > max_cycles {
                return Err(format!(
                    "run did not finish in {max_cycles} cycles: {} of {want_cqes} CQEs, {} frames on the wire",
                    self.a.cqes.len(),
                    self.wire.len()
                ));
            }
        }
    }

    /// Runs engine and peer for `cycles` cycles whatever arrives (to post more work mid-flight).
    pub fn run_for(&mut self, cycles: u64) {
        // `run` returns Err when its cycle budget is spent before usize::MAX CQEs: the point
        let _ = self.run(usize::MAX, cycles);
    }

    /// Frames the peer has sent so far.
    pub fn peer_sent(&self) -> usize {
        self.peer_sent
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
        let mut b_sent = 0usize;
        for _ in 0..1_000_000 {
            let pa = self.a.refn.poll_tx(now);
            let pb = self.ref_b.poll_tx(now);
            if pa.is_empty() && pb.is_empty() {
                let next = match (self.a.refn.next_deadline(), self.ref_b.next_deadline()) {
                    (Some(x), Some(y)) => Some(x.min(y)),
                    (x, y) => x.or(y),
                };
                match next {
                    Some(t) => {
                        now = now.max(t);
                        self.a.refn.tick(now);
                        self.ref_b.tick(now);
                        continue;
                    }
                    None => break,
                }
            }
            for (r, p) in pa {
                self.ref_b.receive(now, &r, &p);
            }
            for (mut r, mut p) in pb {
                if let Some(t) = self.tamper_rx {
                    t(b_sent, &mut r, &mut p);
                    r.payload_len = p.len() as u16;
                }
                b_sent += 1;
                self.a.refn.receive(now, &r, &p);
            }
            now += 1000;
        }
    }

    /// Reference completions of host A's send queue `qa`.
    pub fn ref_send_cqes(&mut self, qa: u32) -> Vec<Cqe> {
        self.a.refn.poll_send_cq(qa)
    }

    /// Header records the engine sent, decoded by the model (for checks on the wire).
    pub fn engine_records(&self) -> Vec<HdrRecord> {
        self.wire.iter().filter(|w| w.1).filter_map(|w| decode(&w.2)).map(|p| p.0).collect()
    }
}
