//! A point-to-point link for the harness: serialisation at a link rate plus a propagation
//! delay, stepped in lockstep with the switch.

use crate::rate::{LinkRate, Serializer, WireFormat};
use std::collections::VecDeque;

/// One direction of a cable.
///
/// Frames handed to [`send`](Self::send) are serialised one after another at the link rate
/// (same cost model as the switch: [`WireFormat`]), or not at all for a pure delay line
/// (`rate_mbps` = 0), and come out of [`recv`](Self::recv) `delay_cycles` cycles after their
/// last byte left. Cycle convention: frames sent before [`step`](Self::step) in cycle t take
/// part in cycle t; a frame whose serialisation finishes in cycle t (at once for a delay line)
/// arrives in cycle t + `delay_cycles` and can be received after that cycle's `step`, i.e. it
/// is handed to the far end in cycle t + `delay_cycles` + 1.
#[derive(Debug, Clone)]
pub struct Link {
    ser: Option<Serializer>,
    wire: WireFormat,
    delay: u64,
    queue: VecDeque<Vec<u8>>,
    cur: Option<Vec<u8>>,
    flight: VecDeque<(u64, Vec<u8>)>,
    now: u64,
    sent_frames: u64,
    sent_wire_bytes: u64,
}

impl Link {
    /// A link of `rate_mbps` (0 = no serialisation, a pure delay line) at `clk_mhz` with
    /// `delay_cycles` propagation delay and the default [`WireFormat`].
    pub fn new(rate_mbps: u64, clk_mhz: u64, delay_cycles: u64) -> Link {
        let ser = (rate_mbps > 0).then(|| Serializer::new(LinkRate { rate_mbps, clk_mhz: clk_mhz.max(1) }));
        Link {
            ser,
            wire: WireFormat::default(),
            delay: delay_cycles,
            queue: VecDeque::new(),
            cur: None,
            flight: VecDeque::new(),
            now: 0,
            sent_frames: 0,
            sent_wire_bytes: 0,
        }
    }

    /// The same link with another wire format.
    pub fn with_wire(mut self, wire: WireFormat) -> Link {
        self.wire = wire;
        self
    }

    /// Current cycle (incremented by [`step`](Self::step)).
    pub fn now(&self) -> u64 {
        self.now
    }

    /// No frame is waiting behind the one being serialised: a sender that only sends when
    /// `ready()` keeps the link saturated with at most one frame of its own buffered here.
    pub fn ready(&self) -> bool {
        self.queue.is_empty()
    }

    /// Frames waiting to be serialised (not counting the one on the wire).
    pub fn queued(&self) -> usize {
        self.queue.len()
    }

    /// Hands a frame to the link (queued without limit).
    pub fn send(&mut self, frame: Vec<u8>) {
        self.queue.push_back(frame);
    }

    /// One cycle.
    pub fn step(&mut self) {
        let now = self.now;
        match &mut self.ser {
            None => {
                while let Some(f) = self.queue.pop_front() {
                    self.sent_frames += 1;
                    self.sent_wire_bytes += self.wire.wire_bytes(f.len());
                    self.flight.push_back((now + self.delay, f));
                }
            }
            Some(ser) => {
                if self.cur.is_none() {
                    match self.queue.pop_front() {
                        Some(f) => {
                            ser.start(self.wire.wire_bytes(f.len()));
                            self.cur = Some(f);
                        }
                        None => ser.idle(),
                    }
                }
                ser.credit();
                while ser.finish() {
                    if let Some(f) = self.cur.take() {
                        self.sent_frames += 1;
                        self.sent_wire_bytes += self.wire.wire_bytes(f.len());
                        self.flight.push_back((now + self.delay, f));
                    }
                    match self.queue.pop_front() {
                        Some(f) => {
                            ser.start(self.wire.wire_bytes(f.len()));
                            self.cur = Some(f);
                        }
                        None => {
                            ser.idle();
                            break;
                        }
                    }
                }
            }
        }
        self.now += 1;
    }

    /// The next frame that has arrived at the far end (arrival cycle < [`now`](Self::now)).
    pub fn recv(&mut self) -> Option<Vec<u8>> {
        if self.flight.front().is_some_and(|(t, _)| *t < self.now) {
            self.flight.pop_front().map(|(_, f)| f)
        } else {
            None
        }
    }

    /// Frames whose serialisation finished, and their wire bytes (with overhead).
    pub fn sent(&self) -> (u64, u64) {
        (self.sent_frames, self.sent_wire_bytes)
    }

    /// Frames on the wire or queued (not yet received at the far end).
    pub fn in_flight(&self) -> usize {
        self.queue.len() + self.cur.is_some() as usize + self.flight.len()
    }
}
