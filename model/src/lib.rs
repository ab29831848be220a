//! `hematite-model`: the executable specification (oracle) of Hematite's RoCEv2 packet path.
//!
//! The RTL receive and transmit paths are checked against this crate:
//!
//! * [`rx::classify`] is the receive spec: it runs the exact check sequence of the RTL parser on a
//!   raw Ethernet frame (no FCS) and yields the drop reason (or acceptance) plus the decoded
//!   [`HdrRecord`].
//! * [`build::build_frame`] is the transmit spec: it turns a [`HdrRecord`] plus payload into the
//!   exact frame bytes the RTL must emit.
//! * [`wire::parse_frame`] is a second, independently written, structured parser whose error
//!   classification must agree with [`rx::classify`] on every input.
//! * [`icrc`], [`psn`], [`opcode`] hold the protocol arithmetic and tables, [`capture`] reads and
//!   writes pcap / pcapng files (optionally `.xz` compressed), and `arb` (cargo feature
//!   `proptest`) provides random valid TX inputs for property tests.
//! * [`dcqcn`] is the cycle-level DCQCN specification: notification point, reaction point and
//!   transmit pacer, with the conversion of the firmware's CC parameters to hardware units.
//!   [`dcqcn_slots`] is the engine's rate-limiter slot map (any QPN to one of the RP's entries).
//! * [`desc`] holds the host descriptor and context formats, generated at build time from
//!   `rtl/pkg/hm_desc_pkg.sv`, with typed encoders and decoders.
//!
//! Nothing in this crate panics on any input and there is no `unsafe` code.
//!
//! ```
//! use hematite_model::{build_frame, classify, normalize_for_tx, HdrRecord};
//!
//! let rec = HdrRecord { opcode: 0x04 /* RC SEND ONLY */, pkey: 0xFFFF, dest_qp: 0x11,
//!                       ttl: 64, payload_len: 5, ..HdrRecord::default() };
//! let frame = build_frame(&rec, b"hello").unwrap();
//! let out = classify(&frame);
//! assert_eq!(out.reason, None);
//! assert!(out.icrc_ok);
//! assert_eq!(out.rec, normalize_for_tx(&rec));
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod build;
pub mod capture;
pub mod dcqcn;
pub mod dcqcn_slots;
pub mod desc;
pub mod icrc;
pub mod opcode;
pub mod psn;
#[allow(missing_docs, clippy::doc_lazy_continuation)]
pub mod record;
/// The register maps (BAR0 `HM_REG_*`, the control bus `HM_CTL_*`, the congestion control
/// registers `HM_CC_*`): hematite-abi's, generated from `rtl/pkg/hm_regs_pkg.sv` (itself
/// generated from `regs/hematite.rdl`, the one description; docs/registers.md).
pub use hematite_abi::regs;
pub mod rx;
pub mod transport;
pub mod wire;

#[cfg(feature = "proptest")]
pub mod arb;

pub use build::{build_frame, normalize_for_tx, BuildError};
pub use record::{DropReason, HdrRecord};
pub use rx::{classify, RxOutcome};
pub use wire::{parse_frame, Packet, ParseError};

/// UDP destination port that identifies RoCEv2 (0x12B7).
pub const ROCEV2_UDP_PORT: u16 = 4791;
/// EtherType of IPv4.
pub const ETHERTYPE_IPV4: u16 = 0x0800;
/// EtherType of IPv6.
pub const ETHERTYPE_IPV6: u16 = 0x86DD;
/// Tag protocol identifier of an IEEE 802.1Q VLAN tag.
pub const ETHERTYPE_VLAN: u16 = 0x8100;
/// Minimum Ethernet frame length without FCS (60 bytes); shorter frames are zero padded on TX.
pub const ETH_MIN_FRAME: usize = 60;
/// Frames of at most this many bytes may carry Ethernet minimum-size padding after the IP
/// datagram (64 = minimum frame with FCS; the RTL's rule).
pub const ETH_PAD_LIMIT: usize = 64;
/// Largest frame (bytes, without FCS) the receive path accepts: a 9000-byte jumbo MTU plus
/// headers. Longer frames are dropped as `Length` (the RTL's `MAX_FRAME_BYTES`).
pub const MAX_FRAME: usize = 9216;

impl core::fmt::Display for DropReason {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}
