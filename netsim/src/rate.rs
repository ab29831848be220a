//! Exact link-rate arithmetic and frame serialisation.
//!
//! A link of `rate_mbps` Mb/s driven by a `clk_mhz` MHz clock moves rate_mbps / (8·clk_mhz)
//! bytes per cycle. Instead of rounding that to a fixed-point fraction, credit is counted in
//! units of 1/(8·clk_mhz) byte: the link earns exactly `rate_mbps` units per cycle and a byte
//! costs `8·clk_mhz` units. Everything is `u64` integer arithmetic, there is no drift, and a
//! saturated link moves exactly ⌊cycles·rate_mbps / (8·clk_mhz)⌋ bytes (to within the frame in
//! flight) over any run.

/// What a frame costs on the wire.
///
/// Frames are handed around **without FCS**. A frame of `len` bytes occupies the link for
/// `max(len, min_frame) + overhead` byte times; the defaults (`min_frame` 60, `overhead` 24)
/// count the 4-byte FCS, the 7-byte preamble + 1-byte SFD and the 12-byte inter-frame gap,
/// and pad short frames to the 64-byte Ethernet minimum (60 + FCS).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WireFormat {
    /// Minimum frame length without FCS (short frames are padded on the wire).
    pub min_frame: u32,
    /// Per-frame bytes besides the frame itself (FCS + preamble/SFD + IFG).
    pub overhead: u32,
}

impl Default for WireFormat {
    fn default() -> Self {
        WireFormat { min_frame: 60, overhead: 24 }
    }
}

impl WireFormat {
    /// Byte times on the wire for a frame of `len` bytes (without FCS).
    pub fn wire_bytes(&self, len: usize) -> u64 {
        (len as u64).max(self.min_frame as u64) + self.overhead as u64
    }
}

/// A link rate at a clock frequency.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkRate {
    /// Link rate in Mb/s (> 0).
    pub rate_mbps: u64,
    /// Clock in MHz (> 0).
    pub clk_mhz: u64,
}

impl LinkRate {
    /// Credit units one byte costs (8·clk_mhz).
    pub fn units_per_byte(&self) -> u64 {
        8 * self.clk_mhz
    }
    /// Credit units the link earns per cycle (= `rate_mbps`).
    pub fn units_per_cycle(&self) -> u64 {
        self.rate_mbps
    }
    /// Cycles to serialise `bytes` byte times, rounded up.
    pub fn cycles_for(&self, bytes: u64) -> u64 {
        (bytes * self.units_per_byte()).div_ceil(self.rate_mbps)
    }
    /// Bytes the link moves in `cycles` cycles, rounded down.
    pub fn bytes_in(&self, cycles: u64) -> u64 {
        ((cycles as u128 * self.rate_mbps as u128) / self.units_per_byte() as u128) as u64
    }
    /// Nanoseconds of `cycles` cycles, rounded down.
    pub fn ns(&self, cycles: u64) -> u64 {
        ((cycles as u128 * 1000) / self.clk_mhz as u128) as u64
    }
}

/// Serialises one frame after another at a link rate.
///
/// Per cycle: if idle, the owner starts the next frame ([`start`](Self::start)) or calls
/// [`idle`](Self::idle); then [`credit`](Self::credit) once; then, while
/// [`finish`](Self::finish) returns true, the current frame's last byte has left in this cycle
/// and the owner may start the next one, which inherits the credit left over. A frame of W
/// wire bytes started in cycle t on an idle link therefore finishes in cycle
/// t + ⌈W·8·clk/rate⌉ − 1; back-to-back frames finish exactly when their cumulative cost is
/// covered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Serializer {
    rate: LinkRate,
    need: u64,
    progress: u64,
}

impl Serializer {
    /// An idle serialiser.
    pub fn new(rate: LinkRate) -> Serializer {
        Serializer { rate, need: 0, progress: 0 }
    }
    /// The rate.
    pub fn rate(&self) -> LinkRate {
        self.rate
    }
    /// A frame is being serialised.
    pub fn is_busy(&self) -> bool {
        self.need != 0
    }
    /// Starts a frame of `wire_bytes` byte times (> 0). Must be idle.
    pub fn start(&mut self, wire_bytes: u64) {
        debug_assert!(!self.is_busy());
        self.need = wire_bytes.max(1) * self.rate.units_per_byte();
    }
    /// Nothing to send this cycle: the partial-cycle credit is lost.
    pub fn idle(&mut self) {
        self.progress = 0;
    }
    /// One cycle of link time.
    pub fn credit(&mut self) {
        if self.is_busy() {
            self.progress += self.rate.units_per_cycle();
        }
    }
    /// If the current frame's cost is covered: consume it, become idle, and return true.
    pub fn finish(&mut self) -> bool {
        if self.need != 0 && self.progress >= self.need {
            self.progress -= self.need;
            self.need = 0;
            true
        } else {
            false
        }
    }
}
