//! Deterministic two-node harness: two [`Node`]s joined by a [`Wire`] with a seeded fault
//! schedule and a virtual clock in nanoseconds.

use super::node::Node;
use super::Pkt;
use crate::{build_frame, classify};
use std::collections::BTreeMap;

/// Fault probabilities in parts per million, applied per packet (in this order: corrupt, drop,
/// then duplicate / reorder of what survives).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FaultConfig {
    /// Packet silently lost.
    pub drop_ppm: u32,
    /// Packet corrupted: the receiver's ICRC check would drop it, so it is dropped (counted
    /// separately).
    pub corrupt_ppm: u32,
    /// Packet delivered twice (the copy 1..=`max_reorder_ns` later).
    pub dup_ppm: u32,
    /// Packet delayed by 1..=`max_reorder_ns` extra (overtaken by later packets).
    pub reorder_ppm: u32,
    /// Bound of the extra reorder / duplicate delay.
    pub max_reorder_ns: u64,
    /// One-way latency of every packet.
    pub latency_ns: u64,
}

impl Default for FaultConfig {
    fn default() -> Self {
        FaultConfig { drop_ppm: 0, corrupt_ppm: 0, dup_ppm: 0, reorder_ppm: 0, max_reorder_ns: 2_000, latency_ns: 1_000 }
    }
}

/// Wire counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WireStats {
    /// Packets offered.
    pub sent: u64,
    /// Lost.
    pub dropped: u64,
    /// Lost, by the node they were going to.
    pub dropped_to: [u64; 2],
    /// Corrupted (and dropped).
    pub corrupted: u64,
    /// Extra copies made.
    pub duplicated: u64,
    /// Extra-delayed.
    pub reordered: u64,
    /// Delivered (copies included).
    pub delivered: u64,
}

/// splitmix64.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// Seeded generator.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }
    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// True with probability `ppm` / 10^6.
    pub fn chance(&mut self, ppm: u32) -> bool {
        ppm > 0 && (self.next_u64() % 1_000_000) < ppm as u64
    }
    /// Uniform in `1..=max` (1 if `max` is 0).
    pub fn delay(&mut self, max: u64) -> u64 {
        1 + self.next_u64() % max.max(1)
    }
}

/// The faulty link: packets in flight keyed by (delivery time, sequence).
#[derive(Debug, Clone)]
pub struct Wire {
    cfg: FaultConfig,
    rng: Rng,
    queue: BTreeMap<(u64, u64), (usize, Pkt)>,
    seq: u64,
    link_up: bool,
    /// Counters.
    pub stats: WireStats,
}

impl Wire {
    /// A wire with the given faults, seeded.
    pub fn new(seed: u64, cfg: FaultConfig) -> Wire {
        Wire { cfg, rng: Rng::new(seed), queue: BTreeMap::new(), seq: 0, link_up: true, stats: WireStats::default() }
    }

    /// Changes the fault schedule.
    pub fn set_faults(&mut self, cfg: FaultConfig) {
        self.cfg = cfg;
    }

    /// Link down: every packet is lost.
    pub fn set_link_up(&mut self, up: bool) {
        self.link_up = up;
    }

    fn enqueue(&mut self, t: u64, dst: usize, pkt: Pkt) {
        self.seq += 1;
        self.queue.insert((t, self.seq), (dst, pkt));
    }

    /// Sends `pkt` towards node `dst` at time `now`.
    pub fn send(&mut self, now: u64, dst: usize, pkt: Pkt) {
        self.stats.sent += 1;
        if !self.link_up {
            self.stats.dropped += 1;
            return;
        }
        if self.rng.chance(self.cfg.corrupt_ppm) {
            self.stats.corrupted += 1;
            return;
        }
        if self.rng.chance(self.cfg.drop_ppm) {
            self.stats.dropped += 1;
            if let Some(n) = self.stats.dropped_to.get_mut(dst) {
                *n += 1;
            }
            return;
        }
        let mut t = now.saturating_add(self.cfg.latency_ns);
        if self.rng.chance(self.cfg.dup_ppm) {
            self.stats.duplicated += 1;
            let t2 = t.saturating_add(self.rng.delay(self.cfg.max_reorder_ns));
            self.enqueue(t2, dst, pkt.clone());
        }
        if self.rng.chance(self.cfg.reorder_ppm) {
            self.stats.reordered += 1;
            t = t.saturating_add(self.rng.delay(self.cfg.max_reorder_ns));
        }
        self.enqueue(t, dst, pkt);
    }

    /// Delivery time of the next packet in flight.
    pub fn next_time(&self) -> Option<u64> {
        self.queue.keys().next().map(|k| k.0)
    }

    /// Pops the next packet due at or before `now`.
    pub fn pop_due(&mut self, now: u64) -> Option<(usize, Pkt)> {
        let (&k, _) = self.queue.iter().next()?;
        if k.0 > now {
            return None;
        }
        let v = self.queue.remove(&k)?;
        self.stats.delivered += 1;
        Some(v)
    }

    /// Packets in flight.
    pub fn in_flight(&self) -> usize {
        self.queue.len()
    }
}

/// Two nodes (index 0 and 1) and the wire between them.
#[derive(Debug, Clone)]
pub struct Sim {
    /// The hosts.
    pub nodes: [Node; 2],
    /// The link.
    pub wire: Wire,
    /// Virtual time (ns).
    pub now: u64,
    record: bool,
    frames: Vec<Vec<u8>>,
    frame_errors: u64,
    steps: u64,
}

/// Safety bound on loop iterations of one [`Sim::run_until_idle`] call.
pub const MAX_STEPS: u64 = 50_000_000;

impl Sim {
    /// A harness over two nodes.
    pub fn new(a: Node, b: Node, seed: u64, faults: FaultConfig) -> Sim {
        Sim { nodes: [a, b], wire: Wire::new(seed, faults), now: 0, record: false, frames: Vec::new(), frame_errors: 0, steps: 0 }
    }

    /// Record every transmitted packet as an Ethernet frame (via [`build_frame`]); each frame is
    /// also re-parsed with [`classify`] and must decode to the same record (mismatches counted
    /// in [`Sim::frame_errors`]).
    pub fn record_frames(&mut self, on: bool) {
        self.record = on;
    }

    /// Recorded frames (in transmit order).
    pub fn frames(&self) -> &[Vec<u8>] {
        &self.frames
    }

    /// Packets that did not build or did not round-trip while recording.
    pub fn frame_errors(&self) -> u64 {
        self.frame_errors
    }

    /// Loop iterations so far.
    pub fn steps(&self) -> u64 {
        self.steps
    }

    fn transmit(&mut self) {
        for i in 0..2 {
            let pkts = self.nodes[i].poll_tx(self.now);
            for p in pkts {
                if self.record {
                    match build_frame(&p.0, &p.1) {
                        Ok(f) => {
                            if crate::opcode::is_sr_write(p.0.opcode) {
                                // (not the engine's yet: the wire parser's view)
                                let ok = crate::parse_frame(&f).is_ok_and(|k| k.bth.opcode == p.0.opcode && k.bth.psn == p.0.psn);
                                if !ok {
                                    self.frame_errors += 1;
                                }
                            } else {
                                let out = classify(&f);
                                if out.reason.is_some() || !out.icrc_ok || out.rec != p.0 {
                                    self.frame_errors += 1;
                                }
                            }
                            self.frames.push(f);
                        }
                        Err(_) => self.frame_errors += 1,
                    }
                }
                self.wire.send(self.now, 1 - i, p);
            }
        }
    }

    /// Runs until nothing is in flight, nothing is queued and no timer is armed (true), or
    /// until the next event would be after `max_ns` (false; the clock stops at the last event).
    pub fn run_until_idle(&mut self, max_ns: u64) -> bool {
        let mut steps = 0u64;
        loop {
            steps += 1;
            self.steps += 1;
            if steps > MAX_STEPS {
                return false;
            }
            self.transmit();
            let t = [self.wire.next_time(), self.nodes[0].next_deadline(), self.nodes[1].next_deadline()]
                .into_iter()
                .flatten()
                .min();
            let Some(t) = t else { return true };
            if t > max_ns {
                return false;
            }
            self.now = self.now.max(t);
            while let Some((dst, (rec, payload))) = self.wire.pop_due(self.now) {
                if let Some(n) = self.nodes.get_mut(dst) {
                    n.receive(self.now, &rec, &payload);
                }
            }
            for n in self.nodes.iter_mut() {
                n.tick(self.now);
            }
        }
    }
}
