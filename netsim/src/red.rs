//! RED-style ECN marking on the instantaneous egress queue depth (DCQCN congestion point).

/// ECN marking parameters (DCQCN.md §1).
///
/// At enqueue, with q = the bytes already held in the packet's egress queue (the queue of its
/// traffic class at its output port, including a frame being serialised, excluding the
/// arriving packet): q ≤ `kmin` → never mark; `kmin` < q ≤ `kmax` → mark with probability
/// `pmax`·(q − `kmin`)/(`kmax` − `kmin`); q > `kmax` → always mark. Only ECT(0)/ECT(1) packets
/// are marked; one 32-bit random draw is taken only for an ECT packet in the probabilistic band.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EcnConfig {
    /// Kmin in bytes.
    pub kmin_bytes: u64,
    /// Kmax in bytes (≥ `kmin_bytes`).
    pub kmax_bytes: u64,
    /// Pmax in parts per million (0..=1,000,000).
    pub pmax_ppm: u32,
    /// Traffic classes subject to marking (bit c = class c); default all.
    pub class_mask: u8,
}

/// One million (the `pmax_ppm` scale).
pub const PPM: u64 = 1_000_000;

impl EcnConfig {
    /// The DCQCN paper's values as commonly quoted (at 40 GbE): Kmin 5 KB, Kmax 200 KB,
    /// Pmax 1 %.
    pub const fn dcqcn_paper() -> EcnConfig {
        EcnConfig { kmin_bytes: 5_000, kmax_bytes: 200_000, pmax_ppm: 10_000, class_mask: 0xFF }
    }

    /// The HPCC repository's `run.py` DCQCN preset: Kmin = 100 KB·(bw/25G),
    /// Kmax = 400 KB·(bw/25G), Pmax 20 % (KB = 1000 bytes). At 100 Gb/s: 400 KB / 1600 KB.
    pub const fn hpcc(rate_gbps: u64) -> EcnConfig {
        EcnConfig {
            kmin_bytes: 100_000 * rate_gbps / 25,
            kmax_bytes: 400_000 * rate_gbps / 25,
            pmax_ppm: 200_000,
            class_mask: 0xFF,
        }
    }

    /// The marking threshold for a 32-bit uniform draw at depth `q`: mark iff `r < threshold`.
    /// 0 at or below Kmin, 2^32 above Kmax, ⌊2^32·pmax·(q − Kmin)/(Kmax − Kmin)⌋ between
    /// (exact integer arithmetic; the probability is exact to 2^−32).
    pub fn threshold(&self, q: u64) -> u64 {
        if q <= self.kmin_bytes {
            0
        } else if q > self.kmax_bytes {
            1 << 32
        } else {
            let num = ((self.pmax_ppm.min(PPM as u32) as u128) * (q - self.kmin_bytes) as u128) << 32;
            let den = PPM as u128 * (self.kmax_bytes - self.kmin_bytes) as u128;
            (num / den) as u64
        }
    }

    /// Whether a packet at depth `q` is marked, given the uniform 32-bit draw `r`.
    pub fn decide(&self, q: u64, r: u32) -> bool {
        (r as u64) < self.threshold(q)
    }

    /// Whether depth `q` is in the probabilistic band (a draw is needed).
    pub fn needs_draw(&self, q: u64) -> bool {
        q > self.kmin_bytes && q <= self.kmax_bytes
    }

    /// The configuration with byte quantities divided by `s` (time compression).
    pub fn scaled(&self, s: u64) -> EcnConfig {
        let s = s.max(1);
        EcnConfig { kmin_bytes: self.kmin_bytes / s, kmax_bytes: self.kmax_bytes / s, ..*self }
    }
}
