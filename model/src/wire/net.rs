//! The headers below the BTH: Ethernet II with an optional 802.1Q tag, IPv4 (no options), the
//! IPv6 fixed header, and UDP.

use super::{arr, be16, be32, ipv4_header_checksum, need, HeaderKind, WireError};
use crate::ETHERTYPE_VLAN;

/// 802.1Q tag control information.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Vlan {
    /// Priority code point (3 bits).
    pub pcp: u8,
    /// Drop eligible indicator.
    pub dei: bool,
    /// VLAN identifier (12 bits).
    pub vid: u16,
}

impl Vlan {
    /// Decodes a TCI.
    pub fn from_tci(tci: u16) -> Vlan {
        Vlan { pcp: (tci >> 13) as u8, dei: tci & 0x1000 != 0, vid: tci & 0x0FFF }
    }
    /// Encodes the TCI (fields masked to their widths).
    pub fn tci(&self) -> u16 {
        ((self.pcp as u16 & 7) << 13) | ((self.dei as u16) << 12) | (self.vid & 0x0FFF)
    }
}

/// Ethernet II header with an optional single 802.1Q tag (TPID 0x8100).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Eth {
    /// Destination MAC.
    pub dst: [u8; 6],
    /// Source MAC.
    pub src: [u8; 6],
    /// 802.1Q tag, present when bytes 12-13 are 0x8100.
    pub vlan: Option<Vlan>,
    /// EtherType after the optional tag.
    pub ethertype: u16,
}

impl Eth {
    /// Header length: 14, or 18 with a VLAN tag.
    pub fn len(&self) -> usize {
        if self.vlan.is_some() {
            18
        } else {
            14
        }
    }
    /// Always false (an Ethernet header is never empty); for API symmetry with `len`.
    pub fn is_empty(&self) -> bool {
        false
    }
    /// Parses the header (one 802.1Q tag at most; a second TPID is left in `ethertype`).
    pub fn parse(b: &[u8]) -> Result<(Eth, &[u8]), WireError> {
        need(b, 14, HeaderKind::Eth)?;
        let dst = arr::<6>(b, 0);
        let src = arr::<6>(b, 6);
        let t = be16(b, 12);
        if t == ETHERTYPE_VLAN {
            need(b, 18, HeaderKind::Vlan)?;
            let vlan = Vlan::from_tci(be16(b, 14));
            Ok((Eth { dst, src, vlan: Some(vlan), ethertype: be16(b, 16) }, &b[18..]))
        } else {
            Ok((Eth { dst, src, vlan: None, ethertype: t }, &b[14..]))
        }
    }
    /// Appends the header.
    pub fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.dst);
        out.extend_from_slice(&self.src);
        if let Some(v) = self.vlan {
            out.extend_from_slice(&ETHERTYPE_VLAN.to_be_bytes());
            out.extend_from_slice(&v.tci().to_be_bytes());
        }
        out.extend_from_slice(&self.ethertype.to_be_bytes());
    }
}

/// IPv4 header without options (IHL 5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Ipv4 {
    /// Type of service (DSCP << 2 | ECN).
    pub tos: u8,
    /// Total length.
    pub total_len: u16,
    /// Identification.
    pub id: u16,
    /// Reserved (evil) flag bit.
    pub flag_rsv: bool,
    /// Don't fragment.
    pub df: bool,
    /// More fragments.
    pub mf: bool,
    /// Fragment offset (13 bits, 8-byte units).
    pub frag_off: u16,
    /// Time to live.
    pub ttl: u8,
    /// Protocol (17 = UDP).
    pub protocol: u8,
    /// Header checksum as stored.
    pub checksum: u16,
    /// Source address.
    pub src: [u8; 4],
    /// Destination address.
    pub dst: [u8; 4],
}

impl Ipv4 {
    /// Header length.
    pub const LEN: usize = 20;
    /// Parses a 20-byte header: short → `Short`, version ≠ 4 → `Version`, IHL ≠ 5 →
    /// `Ipv4Options` (checked in this order).
    pub fn parse(b: &[u8]) -> Result<(Ipv4, &[u8]), WireError> {
        need(b, 20, HeaderKind::Ipv4)?;
        if b[0] >> 4 != 4 {
            return Err(WireError::Version { header: HeaderKind::Ipv4, found: b[0] >> 4 });
        }
        if b[0] & 0xF != 5 {
            return Err(WireError::Ipv4Options(b[0] & 0xF));
        }
        let ff = be16(b, 6);
        let h = Ipv4 {
            tos: b[1],
            total_len: be16(b, 2),
            id: be16(b, 4),
            flag_rsv: ff & 0x8000 != 0,
            df: ff & 0x4000 != 0,
            mf: ff & 0x2000 != 0,
            frag_off: ff & 0x1FFF,
            ttl: b[8],
            protocol: b[9],
            checksum: be16(b, 10),
            src: arr::<4>(b, 12),
            dst: arr::<4>(b, 16),
        };
        Ok((h, &b[20..]))
    }
    /// Appends the header (with the stored checksum).
    pub fn write(&self, out: &mut Vec<u8>) {
        out.push(0x45);
        out.push(self.tos);
        out.extend_from_slice(&self.total_len.to_be_bytes());
        out.extend_from_slice(&self.id.to_be_bytes());
        let ff = (self.flag_rsv as u16) << 15
            | (self.df as u16) << 14
            | (self.mf as u16) << 13
            | (self.frag_off & 0x1FFF);
        out.extend_from_slice(&ff.to_be_bytes());
        out.push(self.ttl);
        out.push(self.protocol);
        out.extend_from_slice(&self.checksum.to_be_bytes());
        out.extend_from_slice(&self.src);
        out.extend_from_slice(&self.dst);
    }
    /// The correct header checksum for the other fields.
    pub fn compute_checksum(&self) -> u16 {
        let mut v = Vec::with_capacity(20);
        self.write(&mut v);
        ipv4_header_checksum(&v)
    }
}

/// IPv6 fixed header (no extension headers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Ipv6 {
    /// Traffic class (DSCP << 2 | ECN).
    pub tc: u8,
    /// Flow label (20 bits).
    pub flow_label: u32,
    /// Payload length.
    pub payload_len: u16,
    /// Next header (17 = UDP).
    pub next_header: u8,
    /// Hop limit.
    pub hop_limit: u8,
    /// Source address.
    pub src: [u8; 16],
    /// Destination address.
    pub dst: [u8; 16],
}

impl Ipv6 {
    /// Header length.
    pub const LEN: usize = 40;
    /// Parses the 40-byte header: short → `Short`, version ≠ 6 → `Version`.
    pub fn parse(b: &[u8]) -> Result<(Ipv6, &[u8]), WireError> {
        need(b, 40, HeaderKind::Ipv6)?;
        if b[0] >> 4 != 6 {
            return Err(WireError::Version { header: HeaderKind::Ipv6, found: b[0] >> 4 });
        }
        let w = be32(b, 0);
        let h = Ipv6 {
            tc: (w >> 20) as u8,
            flow_label: w & 0xF_FFFF,
            payload_len: be16(b, 4),
            next_header: b[6],
            hop_limit: b[7],
            src: arr::<16>(b, 8),
            dst: arr::<16>(b, 24),
        };
        Ok((h, &b[40..]))
    }
    /// Appends the header.
    pub fn write(&self, out: &mut Vec<u8>) {
        let w = 6u32 << 28 | (self.tc as u32) << 20 | (self.flow_label & 0xF_FFFF);
        out.extend_from_slice(&w.to_be_bytes());
        out.extend_from_slice(&self.payload_len.to_be_bytes());
        out.push(self.next_header);
        out.push(self.hop_limit);
        out.extend_from_slice(&self.src);
        out.extend_from_slice(&self.dst);
    }
}

/// IPv4 or IPv6 header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ip {
    /// IPv4 (IHL 5).
    V4(Ipv4),
    /// IPv6.
    V6(Ipv6),
}

impl Ip {
    /// Header length (20 or 40).
    pub fn len(&self) -> usize {
        match self {
            Ip::V4(_) => Ipv4::LEN,
            Ip::V6(_) => Ipv6::LEN,
        }
    }
    /// Always false; for API symmetry with `len`.
    pub fn is_empty(&self) -> bool {
        false
    }
    /// True for IPv6.
    pub fn is_v6(&self) -> bool {
        matches!(self, Ip::V6(_))
    }
    /// Appends the header.
    pub fn write(&self, out: &mut Vec<u8>) {
        match self {
            Ip::V4(h) => h.write(out),
            Ip::V6(h) => h.write(out),
        }
    }
}

/// UDP header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Udp {
    /// Source port.
    pub sport: u16,
    /// Destination port.
    pub dport: u16,
    /// Length (header + data).
    pub len: u16,
    /// Checksum as stored.
    pub checksum: u16,
}

impl Udp {
    /// Header length.
    pub const LEN: usize = 8;
    /// Parses the header.
    pub fn parse(b: &[u8]) -> Result<(Udp, &[u8]), WireError> {
        need(b, 8, HeaderKind::Udp)?;
        let h = Udp { sport: be16(b, 0), dport: be16(b, 2), len: be16(b, 4), checksum: be16(b, 6) };
        Ok((h, &b[8..]))
    }
    /// Appends the header.
    pub fn write(&self, out: &mut Vec<u8>) {
        for v in [self.sport, self.dport, self.len, self.checksum] {
            out.extend_from_slice(&v.to_be_bytes());
        }
    }
}
