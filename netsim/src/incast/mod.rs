//! The DCQCN N:1 incast experiment (issue 7): N sender NICs, one receiver NIC and the
//! [`Switch`], stepped in lockstep one clock at a time, with the congestion control of every
//! NIC behind a trait so that a Verilated RTL backend can replace the reference model.
//!
//! ```text
//!  sender 0 ──up[0]──▶ ┌────────┐
//!  sender 1 ──up[1]──▶ │ switch │ ──down[N]──▶ receiver (port N)
//!     …                │        │ ◀──up[N]──── CNPs (class 6)
//!  sender N-1 ───────▶ └────────┘ ──down[i]──▶ CNPs, PFC frames back to sender i
//! ```
//!
//! * **Senders**: one QP each doing a backlogged RDMA WRITE (RC RDMA WRITE MIDDLE frames with
//!   `payload_bytes` of payload, DSCP 26 → the lossless class 3, ECT(0)). A sender starts a frame
//!   in a cycle when its flow has started, its MAC is ready (the uplink holds no frame behind
//!   the one being serialised), the data class is not paused by a PFC frame from the switch,
//!   and [`SenderCc::may_send`] allows it; it then reports `(qp, frame bytes)` to
//!   [`SenderCc::step`] in the same cycle. A CNP for its QP is fed to [`SenderCc::step`] in the
//!   cycle it arrives.
//! * **Receiver**: for every data frame that arrives with IP ECN = CE it passes the local QP to
//!   [`ReceiverCc::step`]; when that asks for a CNP for a QP it builds a RoCEv2 CNP (BTH opcode
//!   0x81, BECN, DestQP = the sender's QP, DSCP `cnp_dscp` = 48 → class 6, ECT(0): what the
//!   engine sends, [`cnp_spec`]) and sends it through the switch. ACKs are not modelled (an RC
//!   WRITE stream's ACKs are small frames in the uncongested reverse direction; they carry no
//!   congestion signal in DCQCN).
//! * **Time compression** by `scale` = s: the DCQCN registers come from
//!   [`HwParams::from_cc`] with `time_scale` = s (timers and the byte counter ÷ s), the switch
//!   from [`SwitchConfig::scaled`] (buffer, Kmin/Kmax, XOFF/XON, pause time ÷ s; the PFC
//!   headroom is recomputed for the scaled round trip), link delays, the flow stagger and the
//!   sample window are ÷ s. Rates (bytes per cycle) and the frame size are not scaled. All
//!   reported times are real (× s) µs; queue depths are given as simulated bytes and × s.
//!   Because the frame size is not compressed, a flow sends s times fewer frames per real µs
//!   than it would uncompressed, and RED marks per frame: the marks (hence CNPs) per real µs
//!   would drop s-fold. The runner therefore multiplies Pmax by s (`pmax_compensation`), which
//!   keeps the marking probability per byte, and refuses a scale where that exceeds 100 %.
//!
//! See `docs/experiments.md` for the definitions of the reported figures.
//!
//! This module holds the fixed identities of the run (clock, line rate, QP numbers, addresses,
//! the CNP) and [`run`]; the rest is split by role:
//!
//! * `backend`: the congestion-control interface ([`SenderCc`], [`ReceiverCc`],
//!   [`BackendFactory`]) and its two built-in backends, the reference model ([`ModelBackend`])
//!   and DCQCN off ([`OffBackend`]).
//! * `config`: [`IncastConfig`], the experiment's defaults and the DCQCN presets.
//! * `results`: what a run reports ([`Sample`], [`ConvWindow`], [`Summary`], [`IncastResult`]),
//!   its CSV forms, and the figures' helpers ([`jain`], [`ru_to_gbps`]).
//! * `runner`: [`Incast`], which builds the topology and steps NICs, links and switch one clock
//!   at a time while it measures.
//!
//! [`Switch`]: crate::Switch
//! [`HwParams::from_cc`]: hematite_model::dcqcn::HwParams::from_cc
//! [`SwitchConfig::scaled`]: crate::SwitchConfig::scaled

mod backend;
mod config;
mod results;
mod runner;

pub use backend::{
    BackendFactory, ModelBackend, ModelReceiver, ModelSender, NicSpec, OffBackend, OffReceiver, OffSender, ReceiverCc,
    SenderCc,
};
pub use config::{
    preset_params, IncastConfig, CONV_JAIN, CONV_UTIL, DEFAULT_CONV_WINDOW_US, DEFAULT_DURATION_NVIDIA_US,
    DEFAULT_DURATION_PAPER_US, DEFAULT_ECN, DEFAULT_SCALE, DEFAULT_STAGGER_US, DEFAULT_WINDOW_US, DEPTH_TRACE,
};
pub use results::{jain, ru_to_gbps, ConvWindow, IncastResult, Sample, Summary};
pub use runner::Incast;

use crate::pkt::{RoceSpec, ECN_ECT0};

/// Clock of every NIC and the switch (MHz): 100 Gb/s = 50 bytes per cycle.
pub const CLK_MHZ: u64 = 250;
/// Line rate of every link (Gb/s).
pub const LINE_GBPS: u64 = 100;
/// BTH opcode of the data frames: RC RDMA WRITE MIDDLE (no RETH, so every frame of the long
/// WRITE has the same size).
pub const OPCODE_WRITE_MIDDLE: u8 = 0x07;
/// Data DSCP (Hematite's default; the switch's default map puts it in the lossless class 3).
pub const DATA_DSCP: u8 = 26;
/// QP number of sender i's QP: `SENDER_QPN_BASE + i`.
pub const SENDER_QPN_BASE: u32 = 2;
/// QP number of the receiver's QP of flow i: `RECEIVER_QPN_BASE + i`.
pub const RECEIVER_QPN_BASE: u32 = 2;

/// MAC of sender i.
pub fn sender_mac(i: usize) -> [u8; 6] {
    [0x02, 0x48, 0x4D, 0x01, 0x00, i as u8]
}
/// MAC of the receiver.
pub const RECEIVER_MAC: [u8; 6] = [0x02, 0x48, 0x4D, 0x02, 0x00, 0x00];
/// IPv4 address of sender i (10.0.1.i+1).
pub fn sender_ip(i: usize) -> u128 {
    0x0A00_0101 + i as u128
}
/// IPv4 address of the receiver (10.0.2.1).
pub const RECEIVER_IP: u128 = 0x0A00_0201;

/// The CNP the receiver sends for flow i, as the engine sends it (`docs/dcqcn.md` §11): BTH
/// opcode 0x81, BECN, DestQP = sender i's QP, P_Key 0xFFFF, PSN 0, 16 reserved bytes, DSCP
/// `dscp` (`cnp_dscp`, 48 by default), ECT(0), untagged IPv4; 74 bytes without FCS.
pub fn cnp_spec(flow: usize, dscp: u8) -> RoceSpec {
    RoceSpec {
        dscp,
        ecn: ECN_ECT0,
        psn: 0,
        ip_src: RECEIVER_IP,
        ip_dst: sender_ip(flow),
        ..RoceSpec::cnp(sender_mac(flow), RECEIVER_MAC, SENDER_QPN_BASE + flow as u32)
    }
}

/// Runs one experiment to the end.
pub fn run(cfg: IncastConfig, backend: &dyn BackendFactory) -> Result<IncastResult, String> {
    Ok(Incast::new(cfg, backend)?.run())
}
