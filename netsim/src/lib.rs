//! `hematite-netsim`: a cycle-stepped switch model for DCQCN experiments (issue 7).
//!
//! [`Switch`] is an output-queued Ethernet switch with N ports, a shared buffer, 8 traffic
//! classes served in strict priority, RED-style ECN marking on the instantaneous egress queue
//! (the DCQCN congestion point), optional IEEE 802.1Qbb PFC in both directions, tail drop,
//! per-port counters, bounded queue-depth traces (CSV) and per-port pcapng captures. It runs in
//! lockstep with Verilated engines: one [`Switch::step`] per clock cycle of the engines' clock.
//! All per-cycle arithmetic is integer (no floats); the only randomness is a seeded SplitMix64
//! ([`rng`]), so the same inputs and seed give the same run.
//!
//! ## Cycle convention
//!
//! In cycle t (= [`Switch::now`]):
//! 1. the harness calls [`Switch::rx`] for every frame whose **last byte** arrived at a switch
//!    port in cycle t (whole frames, without FCS);
//! 2. it calls [`Switch::step`] once: PFC decisions, then each output serialises for one cycle;
//!    a frame whose last byte leaves in cycle t is appended to that port's output;
//! 3. it drains [`Switch::poll_tx`] for every port and hands those frames to the link toward the
//!    peer (they are due at the peer no earlier than cycle t + 1).
//!
//! A frame of W wire bytes ([`WireFormat`]: frame + FCS + preamble/SFD + IFG, padded to the
//! Ethernet minimum) that finds its output idle in cycle t leaves in cycle
//! t + `latency_cycles` + ⌈W·8·clk_MHz / rate_Mb/s⌉ − 1; back-to-back frames leave exactly at the
//! link rate ([`rate`]).
//!
//! ```
//! use hematite_netsim::{pkt, Switch, SwitchConfig, RxVerdict};
//!
//! let mut sw = Switch::new(SwitchConfig::new(3, 100, 250)).unwrap(); // 3 × 100G at 250 MHz
//! let (a, b) = ([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]);
//! sw.add_route(b, 2);
//! let f = pkt::build_roce(&pkt::RoceSpec::data(b, a, 1024)).unwrap();
//! assert!(matches!(sw.rx(0, f), RxVerdict::Queued { out: 2, class: 3, marked: false }));
//! let mut t = 0;
//! let out = loop {
//!     sw.step();
//!     if let Some(f) = sw.poll_tx(2) { break f; }
//!     t += 1;
//! };
//! // 1024 B payload + 58 B headers + 24 B overhead = 1106 wire bytes at 50 B/cycle: 23 cycles.
//! assert_eq!((out.len(), t), (1082, 22));
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod experiment;
pub mod incast;
pub mod link;
pub mod pcap;
pub mod pkt;
pub mod progress;
pub mod rate;
pub mod red;
pub mod rng;
pub mod switch;
pub mod trace;

pub use link::Link;
pub use pkt::Pfc;
pub use rate::{LinkRate, Serializer, WireFormat};
pub use red::EcnConfig;
pub use switch::{
    default_dscp_class, pfc_headroom_bytes, ConfigError, DropReason, PfcConfig, PortCounters, RxVerdict, Switch,
    SwitchConfig, CLASSES,
};
pub use trace::{DepthTrace, TraceConfig};
