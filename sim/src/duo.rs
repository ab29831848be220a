//! Two Hematite engines back to back: each engine is a host (EngHost: the Verilated engine,
//! its memory, and the same host in the transport model), and a frame-level wire between the
//! MAC ports applies a seeded fault schedule (loss, corruption, duplication, extra delay that
//! reorders) and records every frame with its cycle for a pcap. The reference is the same
//! work run by the two model hosts over a lossless link.

use crate::dma::MemCfg;
use crate::host::EngHost;
use hematite_model::capture::write_pcap;
use hematite_model::transport::QpConfig;
use std::collections::BTreeMap;
use std::path::Path;

/// Fault schedule of the wire (parts per million per frame; delays in cycles).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WireFaults {
    pub drop_ppm: u32,
    /// One byte of the frame flipped: the receiving RX path must drop it (bad ICRC).
    pub corrupt_ppm: u32,
    /// Delivered twice, the copy up to `max_extra` cycles later.
    pub dup_ppm: u32,
    /// Delayed by up to `max_extra` extra cycles (later frames overtake it).
    pub delay_ppm: u32,
    pub max_extra: u64,
    /// Wire latency in cycles.
    pub latency: u64,
}

impl Default for WireFaults {
    fn default() -> Self {
        WireFaults { drop_ppm: 0, corrupt_ppm: 0, dup_ppm: 0, delay_ppm: 0, max_extra: 2_000, latency: 100 }
    }
}

/// Wire counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WireCount {
    pub sent: u64,
    pub dropped: u64,
    pub corrupted: u64,
    pub duplicated: u64,
    pub delayed: u64,
}

pub struct DuoBench {
    pub h: [EngHost; 2],
    pub faults: WireFaults,
    pub count: WireCount,
    /// Every frame as sent: (cycle, from host, bytes).
    pub wire: Vec<(u64, usize, Vec<u8>)>,
    seen: [usize; 2],
    queue: BTreeMap<(u64, u64), (usize, Vec<u8>)>,
    seq: u64,
    rng: crate::Rng,
    /// Keep a copy of every frame handed to each host's MAC (wire and injected frames) in
    /// `delivered` (the engine fuzzer explains the engines' counters with them).
    pub record_delivered: bool,
    pub delivered: [Vec<Vec<u8>>; 2],
    /// Frames put on the wire by [`DuoBench::inject`].
    pub injected: u64,
    /// What the fault schedule did to each frame of `wire` (same index): "" (delivered as
    /// sent), "drop", or a list of "corrupt", "dup", "delay".
    pub fates: Vec<String>,
    /// Every injected frame: (arrival cycle, destination host, bytes).
    pub injected_log: Vec<(u64, usize, Vec<u8>)>,
    /// Frames to lose besides the fault schedule: indices in each host's own send order.
    pub drop_from: [Vec<usize>; 2],
    sent_by: [usize; 2],
    quiet: u64,
}

impl DuoBench {
    pub fn new(mem: MemCfg, faults: WireFaults) -> Result<DuoBench, String> {
        let seed = mem.seed;
        let m2 = MemCfg { seed: seed ^ 0xB, ..mem.clone() };
        Ok(DuoBench {
            h: [EngHost::new(mem)?, EngHost::new(m2)?],
            faults,
            count: WireCount::default(),
            wire: Vec::new(),
            seen: [0, 0],
            queue: BTreeMap::new(),
            seq: 0,
            rng: crate::Rng::new(seed ^ 0xD0),
            record_delivered: false,
            delivered: [Vec::new(), Vec::new()],
            injected: 0,
            fates: Vec::new(),
            injected_log: Vec::new(),
            drop_from: [Vec::new(), Vec::new()],
            sent_by: [0, 0],
            quiet: 0,
        })
    }

    /// Connects QP `q0` of host 0 and QP `q1` of host 1 (address vectors mirrored, PSNs
    /// crossed).
    pub fn connect(&mut self, q0: u32, q1: u32, cfg: QpConfig, stride_log: u8) -> Result<(), String> {
        let c0 = QpConfig { dest_qpn: q1, ..cfg };
        let c1 = QpConfig { dest_qpn: q0, av: cfg.av.reversed(), sq_psn: cfg.rq_psn, rq_psn: cfg.sq_psn, ..cfg };
        self.h[0].create_qp(q0, c0, stride_log)?;
        self.h[1].create_qp(q1, c1, stride_log)
    }

    fn chance(&mut self, ppm: u32) -> bool {
        ppm > 0 && self.rng.next() % 1_000_000 < ppm as u64
    }

    fn offer(&mut self, now: u64, from: usize, mut f: Vec<u8>) {
        self.count.sent += 1;
        self.wire.push((now, from, f.clone()));
        let fl = self.faults;
        self.fates.push(String::new());
        let k = self.sent_by[from];
        self.sent_by[from] += 1;
        if self.chance(fl.drop_ppm) || self.drop_from[from].contains(&k) {
            self.count.dropped += 1;
            self.fate("drop");
            return;
        }
        if self.chance(fl.corrupt_ppm) && !f.is_empty() {
            self.count.corrupted += 1;
            self.fate("corrupt");
            let i = (self.rng.next() as usize) % f.len();
            f[i] ^= 1 << (self.rng.next() % 8);
        }
        let mut t = now + fl.latency;
        if self.chance(fl.dup_ppm) {
            self.count.duplicated += 1;
            self.fate("dup");
            let t2 = t + 1 + self.rng.next() % fl.max_extra.max(1);
            self.seq += 1;
            self.queue.insert((t2, self.seq), (1 - from, f.clone()));
        }
        if self.chance(fl.delay_ppm) {
            self.count.delayed += 1;
            self.fate("delay");
            t += 1 + self.rng.next() % fl.max_extra.max(1);
        }
        self.seq += 1;
        self.queue.insert((t, self.seq), (1 - from, f));
    }

    fn fate(&mut self, what: &str) {
        if let Some(f) = self.fates.last_mut() {
            if !f.is_empty() {
                f.push('+');
            }
            f.push_str(what);
        }
    }

    /// Puts a frame (not from either engine) on the wire toward host `dst`, arriving in cycle
    /// `at` (or the next cycle when `at` has passed). It is not subject to the fault schedule.
    pub fn inject(&mut self, at: u64, dst: usize, frame: Vec<u8>) {
        let t = at.max(self.h[0].eng.cycle() + 1);
        self.seq += 1;
        self.injected += 1;
        self.injected_log.push((t, dst, frame.clone()));
        self.queue.insert((t, self.seq), (dst, frame));
    }

    /// One cycle of both engines and the wire; the CQs are polled (so a CQE's cycle is when it
    /// reached host memory). Returns whether anything moved.
    pub fn tick(&mut self) -> Result<bool, String> {
        self.h[0].eng.step();
        self.h[1].eng.step();
        let now = self.h[0].eng.cycle();
        let mut active = false;
        for side in 0..2 {
            while self.seen[side] < self.h[side].eng.tx.len() {
                let (f, aborted) = self.h[side].eng.tx[self.seen[side]].clone();
                self.seen[side] += 1;
                active = true;
                if !aborted {
                    self.offer(now, side, f);
                }
            }
        }
        while let Some((&(t, s), _)) = self.queue.iter().next() {
            if t > now {
                break;
            }
            let (dst, f) = self.queue.remove(&(t, s)).expect("present");
            if self.record_delivered {
                self.delivered[dst].push(f.clone());
            }
            self.h[dst].eng.rx_q.push_back(f);
            active = true;
        }
        if !self.queue.is_empty() || !self.h[0].eng.rx_q.is_empty() || !self.h[1].eng.rx_q.is_empty() {
            active = true;
        }
        for side in 0..2 {
            if self.h[side].poll_cq()? != 0 {
                active = true;
            }
        }
        self.quiet = if active { 0 } else { self.quiet + 1 };
        Ok(active)
    }

    /// Cycles since anything moved on the wire or in the CQs.
    pub fn quiet_cycles(&self) -> u64 {
        self.quiet
    }

    /// Steps both engines until `done` holds (checked every 64 cycles, with the CQs polled
    /// and the wire quiet for a while) or `max_cycles` pass. Returns the cycles run.
    pub fn run(&mut self, max_cycles: u64, mut done: impl FnMut(&DuoBench) -> bool) -> Result<u64, String> {
        let start = self.h[0].eng.cycle();
        self.quiet = 0;
        loop {
            self.tick()?;
            let now = self.h[0].eng.cycle();
            if now % 64 == 0 && self.quiet > 3_000 && done(self) {
                return Ok(now - start);
            }
            if now - start > max_cycles {
                return Err(format!(
                    "not done after {max_cycles} cycles: CQEs {} / {}, wire {:?}",
                    self.h[0].cqes.len(),
                    self.h[1].cqes.len(),
                    self.count
                ));
            }
        }
    }

    /// The reference: the two model hosts over a lossless link, until nothing moves and no
    /// timer is pending.
    pub fn run_reference(&mut self) {
        let mut now = 0u64;
        for _ in 0..1_000_000 {
            let pa = self.h[0].refn.poll_tx(now);
            let pb = self.h[1].refn.poll_tx(now);
            if pa.is_empty() && pb.is_empty() {
                let next = match (self.h[0].refn.next_deadline(), self.h[1].refn.next_deadline()) {
                    (Some(x), Some(y)) => Some(x.min(y)),
                    (x, y) => x.or(y),
                };
                match next {
                    Some(t) => {
                        now = now.max(t);
                        self.h[0].refn.tick(now);
                        self.h[1].refn.tick(now);
                        continue;
                    }
                    None => break,
                }
            }
            for (r, p) in pa {
                self.h[1].refn.receive(now, &r, &p);
            }
            for (r, p) in pb {
                self.h[0].refn.receive(now, &r, &p);
            }
            now += 1000;
        }
    }

    /// Writes every frame of the wire (as sent) to a pcap.
    pub fn write_pcap(&self, path: &Path) -> Result<(), String> {
        let frames: Vec<Vec<u8>> = self.wire.iter().map(|w| w.2.clone()).collect();
        write_pcap(path, &frames).map_err(|e| format!("{e:?}"))
    }
}
