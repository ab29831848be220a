//! Typed RoCEv2 headers and a structured frame parser.
//!
//! Every header has `parse(&[u8]) -> Result<(Self, &[u8]), WireError>` (the header and the bytes
//! after it) and `write(&self, &mut Vec<u8>)` (appends exactly the parsed bytes). [`parse_frame`]
//! is the structured counterpart of [`crate::rx::classify`]: it is written independently (on the
//! typed headers) but must reach the same verdict on every input; each [`ParseError`] variant
//! maps to a [`DropReason`](crate::DropReason) via [`ParseError::reason`].
//!
//! This module holds the header parsers' error type, the byte-order helpers they share, MAC
//! conversions and the ones'-complement checksums; the rest is split by role:
//!
//! * `net`: the headers below the BTH ([`Eth`] with its optional [`Vlan`] tag, [`Ipv4`],
//!   [`Ipv6`], [`Ip`], [`Udp`]).
//! * `bth`: the InfiniBand transport headers ([`Bth`] and the extension headers [`Deth`],
//!   [`Reth`], [`AtomicEth`], [`Aeth`], [`AtomicAckEth`], [`ImmDt`], [`Ieth`]).
//! * `packet`: a whole accepted frame ([`Packet`]), its serialisation and its header record.
//! * `parse`: [`parse_frame`] and its [`ParseError`].

mod bth;
mod net;
mod packet;
mod parse;

pub use bth::{is_rc_request, Aeth, AtomicAckEth, AtomicEth, Bth, Deth, Ieth, ImmDt, Reth};
pub use net::{Eth, Ip, Ipv4, Ipv6, Udp, Vlan};
pub use packet::Packet;
pub use parse::{parse_frame, ParseError};

use core::fmt;

/// Which header a [`WireError`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HeaderKind {
    /// Ethernet II header (14 bytes).
    Eth,
    /// 802.1Q tag (4 more bytes).
    Vlan,
    /// IPv4 header (20 bytes).
    Ipv4,
    /// IPv6 header (40 bytes).
    Ipv6,
    /// UDP header (8 bytes).
    Udp,
    /// Base transport header (12 bytes).
    Bth,
    /// Datagram extended transport header.
    Deth,
    /// RDMA extended transport header.
    Reth,
    /// Atomic extended transport header.
    AtomicEth,
    /// ACK extended transport header.
    Aeth,
    /// Atomic acknowledge extended transport header.
    AtomicAckEth,
    /// Immediate data.
    ImmDt,
    /// Invalidate extended transport header.
    Ieth,
    /// The 16 reserved bytes of a CNP.
    CnpReserved,
}

/// Error of a single header parser.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireError {
    /// Fewer bytes than the header needs.
    Short {
        /// The header being parsed.
        header: HeaderKind,
        /// Bytes needed.
        need: usize,
        /// Bytes available.
        have: usize,
    },
    /// IP version nibble disagrees with the header type.
    Version {
        /// The header being parsed.
        header: HeaderKind,
        /// Version nibble found.
        found: u8,
    },
    /// IPv4 IHL other than 5 (options are not supported).
    Ipv4Options(u8),
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WireError::Short { header, need, have } => {
                write!(f, "{header:?} header needs {need} bytes, {have} available")
            }
            WireError::Version { header, found } => {
                write!(f, "{header:?} header has IP version {found}")
            }
            WireError::Ipv4Options(ihl) => write!(f, "IPv4 IHL {ihl} (options not supported)"),
        }
    }
}

impl std::error::Error for WireError {}

fn need(b: &[u8], n: usize, header: HeaderKind) -> Result<(), WireError> {
    if b.len() < n {
        Err(WireError::Short { header, need: n, have: b.len() })
    } else {
        Ok(())
    }
}

fn be16(b: &[u8], i: usize) -> u16 {
    u16::from_be_bytes([b[i], b[i + 1]])
}
fn be24(b: &[u8], i: usize) -> u32 {
    u32::from_be_bytes([0, b[i], b[i + 1], b[i + 2]])
}
fn be32(b: &[u8], i: usize) -> u32 {
    u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]])
}
fn arr<const N: usize>(b: &[u8], i: usize) -> [u8; N] {
    let mut a = [0u8; N];
    a.copy_from_slice(&b[i..i + N]);
    a
}
fn put24(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_be_bytes()[1..]);
}

/// 48-bit MAC address as a `u64` (first wire byte most significant).
pub fn mac_to_u64(m: [u8; 6]) -> u64 {
    m.iter().fold(0u64, |a, &b| a << 8 | b as u64)
}

/// Inverse of [`mac_to_u64`] (bits above 48 are ignored).
pub fn mac_from_u64(v: u64) -> [u8; 6] {
    let b = v.to_be_bytes();
    [b[2], b[3], b[4], b[5], b[6], b[7]]
}

/// Ones'-complement sum (RFC 1071), folded to 16 bits, not inverted. An odd trailing byte is
/// padded with zero.
pub fn ones_complement_sum(data: &[u8]) -> u16 {
    let mut s: u32 = 0;
    for c in data.chunks(2) {
        let w = if c.len() == 2 { u16::from_be_bytes([c[0], c[1]]) } else { (c[0] as u16) << 8 };
        s += w as u32;
        s = (s & 0xFFFF) + (s >> 16);
    }
    s as u16
}

/// IPv4 header checksum of a 20-byte header (the stored checksum bytes 10-11 are treated as
/// zero). Returns 0 if `hdr` is shorter than 20 bytes.
pub fn ipv4_header_checksum(hdr: &[u8]) -> u16 {
    if hdr.len() < 20 {
        return 0;
    }
    let mut h = [0u8; 20];
    h.copy_from_slice(&hdr[..20]);
    h[10] = 0;
    h[11] = 0;
    !ones_complement_sum(&h)
}

/// True when the first 20 bytes of `hdr` carry a valid IPv4 header checksum (their ones'-
/// complement sum is 0xFFFF). False if fewer than 20 bytes.
pub fn ipv4_checksum_valid(hdr: &[u8]) -> bool {
    hdr.len() >= 20 && ones_complement_sum(&hdr[..20]) == 0xFFFF
}
