//! Shared helpers for the switch tests.
#![allow(dead_code)]

use hematite_netsim::pkt::{self, RoceSpec};
use hematite_netsim::{Switch, SwitchConfig};

/// MAC of host i.
pub fn host(i: usize) -> [u8; 6] {
    [0x02, 0, 0, 0, 0x10, i as u8]
}

/// RoCEv2 RC SEND ONLY, IPv4, of exactly `len` bytes (len ≥ 58, len − 58 a multiple of 4;
/// `build_frame` pads 58 to the 60-byte Ethernet minimum).
pub fn data(dst: usize, src: usize, len: usize, dscp: u8, ecn: u8, psn: u32) -> Vec<u8> {
    assert!(len >= 58 && (len - 58) % 4 == 0, "len {len}");
    let s = RoceSpec { dscp, ecn, psn, ..RoceSpec::data(host(dst), host(src), (len - 58) as u16) };
    let f = pkt::build_roce(&s).unwrap();
    assert_eq!(f.len(), len.max(60));
    f
}

/// A switch with `n` ports at `gbps`, host i behind port i, ECN off unless set later.
pub fn switch(cfg: SwitchConfig) -> Switch {
    let n = cfg.ports();
    let mut sw = Switch::new(cfg).unwrap();
    for i in 0..n {
        sw.add_route(host(i), i);
    }
    sw
}

pub fn cfg(n: usize, gbps: u64, clk: u64) -> SwitchConfig {
    SwitchConfig { ecn: None, ..SwitchConfig::new(n, gbps, clk) }
}

/// Small deterministic generator for test schedules.
pub struct Gen(pub u64);
impl Gen {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}
