//! Typed RoCEv2 headers and a structured frame parser.
//!
//! Every header has `parse(&[u8]) -> Result<(Self, &[u8]), WireError>` (the header and the bytes
//! after it) and `write(&self, &mut Vec<u8>)` (appends exactly the parsed bytes). [`parse_frame`]
//! is the structured counterpart of [`crate::rx::classify`]: it is written independently (on the
//! typed headers) but must reach the same verdict on every input; each [`ParseError`] variant
//! maps to a [`DropReason`] via [`ParseError::reason`].

use crate::icrc;
use crate::opcode::{self, OpInfo};
use crate::record::{DropReason, HdrRecord};
use crate::{ETHERTYPE_IPV4, ETHERTYPE_IPV6, ETHERTYPE_VLAN, ETH_PAD_LIMIT, MAX_FRAME, ROCEV2_UDP_PORT};
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
fn be64(b: &[u8], i: usize) -> u64 {
    (be32(b, i) as u64) << 32 | be32(b, i + 4) as u64
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

/// Base transport header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Bth {
    /// Opcode.
    pub opcode: u8,
    /// Solicited event.
    pub se: bool,
    /// Migration request.
    pub migreq: bool,
    /// Pad count (2 bits).
    pub padcnt: u8,
    /// Transport header version (4 bits, must be 0).
    pub tver: u8,
    /// Partition key.
    pub pkey: u16,
    /// Forward ECN (byte 4 bit 7).
    pub fecn: bool,
    /// Backward ECN (byte 4 bit 6).
    pub becn: bool,
    /// Reserved (6 bits).
    pub resv6: u8,
    /// Destination QP (24 bits).
    pub dest_qp: u32,
    /// Acknowledge request.
    pub ackreq: bool,
    /// Reserved (7 bits).
    pub resv7: u8,
    /// Packet sequence number (24 bits).
    pub psn: u32,
}

impl Bth {
    /// Header length.
    pub const LEN: usize = 12;
    /// Parses the header.
    pub fn parse(b: &[u8]) -> Result<(Bth, &[u8]), WireError> {
        need(b, 12, HeaderKind::Bth)?;
        let h = Bth {
            opcode: b[0],
            se: b[1] & 0x80 != 0,
            migreq: b[1] & 0x40 != 0,
            padcnt: (b[1] >> 4) & 3,
            tver: b[1] & 0xF,
            pkey: be16(b, 2),
            fecn: b[4] & 0x80 != 0,
            becn: b[4] & 0x40 != 0,
            resv6: b[4] & 0x3F,
            dest_qp: be24(b, 5),
            ackreq: b[8] & 0x80 != 0,
            resv7: b[8] & 0x7F,
            psn: be24(b, 9),
        };
        Ok((h, &b[12..]))
    }
    /// Appends the header (fields masked to their widths).
    pub fn write(&self, out: &mut Vec<u8>) {
        out.push(self.opcode);
        out.push(
            (self.se as u8) << 7 | (self.migreq as u8) << 6 | (self.padcnt & 3) << 4 | (self.tver & 0xF),
        );
        out.extend_from_slice(&self.pkey.to_be_bytes());
        out.push((self.fecn as u8) << 7 | (self.becn as u8) << 6 | (self.resv6 & 0x3F));
        put24(out, self.dest_qp);
        out.push((self.ackreq as u8) << 7 | (self.resv7 & 0x7F));
        put24(out, self.psn);
    }
}

/// Datagram extended transport header (UD).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Deth {
    /// Queue key.
    pub qkey: u32,
    /// Reserved byte.
    pub resv8: u8,
    /// Source QP (24 bits).
    pub src_qp: u32,
}

impl Deth {
    /// Header length.
    pub const LEN: usize = 8;
    /// Parses the header.
    pub fn parse(b: &[u8]) -> Result<(Deth, &[u8]), WireError> {
        need(b, 8, HeaderKind::Deth)?;
        Ok((Deth { qkey: be32(b, 0), resv8: b[4], src_qp: be24(b, 5) }, &b[8..]))
    }
    /// Appends the header.
    pub fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.qkey.to_be_bytes());
        out.push(self.resv8);
        put24(out, self.src_qp);
    }
}

/// RDMA extended transport header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Reth {
    /// Virtual address.
    pub va: u64,
    /// Remote key.
    pub rkey: u32,
    /// DMA length.
    pub dma_len: u32,
}

impl Reth {
    /// Header length.
    pub const LEN: usize = 16;
    /// Parses the header.
    pub fn parse(b: &[u8]) -> Result<(Reth, &[u8]), WireError> {
        need(b, 16, HeaderKind::Reth)?;
        Ok((Reth { va: be64(b, 0), rkey: be32(b, 8), dma_len: be32(b, 12) }, &b[16..]))
    }
    /// Appends the header.
    pub fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.va.to_be_bytes());
        out.extend_from_slice(&self.rkey.to_be_bytes());
        out.extend_from_slice(&self.dma_len.to_be_bytes());
    }
}

/// Atomic extended transport header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AtomicEth {
    /// Virtual address.
    pub va: u64,
    /// Remote key.
    pub rkey: u32,
    /// Swap (CmpSwap) or add (FetchAdd) data.
    pub swap_add: u64,
    /// Compare data.
    pub compare: u64,
}

impl AtomicEth {
    /// Header length.
    pub const LEN: usize = 28;
    /// Parses the header.
    pub fn parse(b: &[u8]) -> Result<(AtomicEth, &[u8]), WireError> {
        need(b, 28, HeaderKind::AtomicEth)?;
        let h = AtomicEth { va: be64(b, 0), rkey: be32(b, 8), swap_add: be64(b, 12), compare: be64(b, 20) };
        Ok((h, &b[28..]))
    }
    /// Appends the header.
    pub fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.va.to_be_bytes());
        out.extend_from_slice(&self.rkey.to_be_bytes());
        out.extend_from_slice(&self.swap_add.to_be_bytes());
        out.extend_from_slice(&self.compare.to_be_bytes());
    }
}

/// ACK extended transport header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Aeth {
    /// Syndrome.
    pub syndrome: u8,
    /// Message sequence number (24 bits).
    pub msn: u32,
}

impl Aeth {
    /// Header length.
    pub const LEN: usize = 4;
    /// Parses the header.
    pub fn parse(b: &[u8]) -> Result<(Aeth, &[u8]), WireError> {
        need(b, 4, HeaderKind::Aeth)?;
        Ok((Aeth { syndrome: b[0], msn: be24(b, 1) }, &b[4..]))
    }
    /// Appends the header.
    pub fn write(&self, out: &mut Vec<u8>) {
        out.push(self.syndrome);
        put24(out, self.msn);
    }
}

/// Atomic acknowledge extended transport header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AtomicAckEth {
    /// Original remote data.
    pub orig: u64,
}

impl AtomicAckEth {
    /// Header length.
    pub const LEN: usize = 8;
    /// Parses the header.
    pub fn parse(b: &[u8]) -> Result<(AtomicAckEth, &[u8]), WireError> {
        need(b, 8, HeaderKind::AtomicAckEth)?;
        Ok((AtomicAckEth { orig: be64(b, 0) }, &b[8..]))
    }
    /// Appends the header.
    pub fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.orig.to_be_bytes());
    }
}

/// Immediate data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ImmDt {
    /// Immediate data (network order value).
    pub imm: u32,
}

impl ImmDt {
    /// Header length.
    pub const LEN: usize = 4;
    /// Parses the header.
    pub fn parse(b: &[u8]) -> Result<(ImmDt, &[u8]), WireError> {
        need(b, 4, HeaderKind::ImmDt)?;
        Ok((ImmDt { imm: be32(b, 0) }, &b[4..]))
    }
    /// Appends the header.
    pub fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.imm.to_be_bytes());
    }
}

/// Invalidate extended transport header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Ieth {
    /// R_Key to invalidate.
    pub rkey: u32,
}

impl Ieth {
    /// Header length.
    pub const LEN: usize = 4;
    /// Parses the header.
    pub fn parse(b: &[u8]) -> Result<(Ieth, &[u8]), WireError> {
        need(b, 4, HeaderKind::Ieth)?;
        Ok((Ieth { rkey: be32(b, 0) }, &b[4..]))
    }
    /// Appends the header.
    pub fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.rkey.to_be_bytes());
    }
}

/// Why [`parse_frame`] rejected a frame. Each variant maps to one [`DropReason`] via
/// [`ParseError::reason`]; the variants are checked in the order of [`crate::rx::classify`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParseError {
    /// Frame shorter than the 14-byte Ethernet header.
    ShortEthernet {
        /// Frame length.
        len: usize,
    },
    /// 802.1Q-tagged frame shorter than 18 bytes.
    ShortVlan {
        /// Frame length.
        len: usize,
    },
    /// EtherType (after at most one 802.1Q tag) is neither IPv4 nor IPv6.
    EtherType(u16),
    /// Frame too short for the IP header.
    ShortIpHeader {
        /// Bytes needed after the L2 header.
        need: usize,
        /// Bytes available after the L2 header.
        have: usize,
    },
    /// IP version nibble disagrees with the EtherType.
    IpVersion(u8),
    /// IPv4 IHL ≠ 5.
    Ipv4Options(u8),
    /// IPv4 MF set or fragment offset ≠ 0.
    Ipv4Fragment {
        /// More-fragments flag.
        mf: bool,
        /// Fragment offset.
        offset: u16,
    },
    /// IP protocol / next header is not UDP.
    NotUdp(u8),
    /// Frame too short for the UDP header.
    ShortUdp {
        /// Bytes available after the IP header.
        have: usize,
    },
    /// UDP destination port is not 4791.
    UdpPort(u16),
    /// The IP datagram extends past the end of the frame.
    IpBeyondFrame {
        /// Frame offset where the IP datagram ends.
        ip_end: usize,
        /// Frame length.
        frame_len: usize,
    },
    /// IP total length / payload length disagrees with the UDP length.
    LengthMismatch {
        /// IPv4 total length or IPv6 payload length.
        ip_len: u16,
        /// UDP length.
        udp_len: u16,
    },
    /// UDP length below 8 + 12 (BTH) + 4 (ICRC).
    UdpTooShort(u16),
    /// Frame longer than [`crate::MAX_FRAME`].
    Oversize(usize),
    /// Bytes after the IP datagram in a frame longer than 64 bytes.
    TrailingBytes {
        /// Number of bytes after the datagram.
        extra: usize,
    },
    /// ICRC mismatch.
    BadIcrc {
        /// ICRC value stored in the frame (little-endian read of the wire bytes).
        stored: u32,
        /// ICRC value computed over the masked datagram.
        computed: u32,
    },
    /// IPv4 header checksum invalid.
    BadIpv4Checksum {
        /// Stored checksum.
        stored: u16,
        /// Correct checksum.
        computed: u16,
    },
    /// BTH TVer ≠ 0.
    TVer(u8),
    /// Opcode not supported.
    UnknownOpcode(u8),
    /// UDP payload too short for the opcode's headers + pad + ICRC.
    OpcodeLength {
        /// Opcode.
        opcode: u8,
        /// Bytes from BTH start to the ICRC.
        avail: usize,
        /// Header length + pad count required.
        need: usize,
    },
    /// A no-payload opcode carries payload or pad bytes.
    PayloadOnNoPayloadOpcode {
        /// Opcode.
        opcode: u8,
        /// Payload + pad bytes found.
        bytes: usize,
    },
    /// Payload + pad (the bytes between the last transport header and the ICRC) not a
    /// multiple of 4 bytes.
    Misaligned {
        /// UDP length.
        udp_len: u16,
    },
    /// A non-zero PadCnt on a packet that does not end its message (FIRST / MIDDLE).
    PadNotLast {
        /// Opcode.
        opcode: u8,
        /// PadCnt.
        padcnt: u8,
    },
    /// Payload larger than [`crate::rx::MAX_PAYLOAD`] (4096 bytes, the largest PMTU).
    PayloadTooLong(usize),
    /// The BTH P_Key does not match the port's ([`crate::rx::PORT_PKEY`]).
    PkeyMismatch(u16),
}

impl ParseError {
    /// The receive-path drop reason this error corresponds to.
    pub fn reason(&self) -> DropReason {
        use ParseError::*;
        match self {
            ShortEthernet { .. } | ShortVlan { .. } | ShortIpHeader { .. } | ShortUdp { .. } | IpBeyondFrame { .. } => {
                DropReason::Truncated
            }
            EtherType(_) | IpVersion(_) => DropReason::NotIp,
            Ipv4Options(_) | Ipv4Fragment { .. } => DropReason::Ipv4OptFrag,
            NotUdp(_) | UdpPort(_) => DropReason::NotRoce,
            LengthMismatch { .. } | UdpTooShort(_) | TrailingBytes { .. } | Oversize(_) | OpcodeLength { .. } | PayloadOnNoPayloadOpcode { .. } => {
                DropReason::Length
            }
            BadIcrc { .. } => DropReason::BadIcrc,
            BadIpv4Checksum { .. } => DropReason::BadIpv4Csum,
            TVer(_) => DropReason::TVer,
            UnknownOpcode(_) => DropReason::UnknownOpcode,
            Misaligned { .. } => DropReason::Misaligned,
            PadNotLast { .. } => DropReason::PadNotLast,
            PayloadTooLong(_) => DropReason::TooLong,
            PkeyMismatch(_) => DropReason::BadPkey,
        }
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use ParseError::*;
        match self {
            ShortEthernet { len } => write!(f, "frame of {len} bytes is shorter than an Ethernet header"),
            ShortVlan { len } => write!(f, "VLAN-tagged frame of {len} bytes is shorter than 18 bytes"),
            EtherType(t) => write!(f, "EtherType {t:#06x} is not IPv4/IPv6"),
            ShortIpHeader { need, have } => write!(f, "IP header needs {need} bytes, {have} available"),
            IpVersion(v) => write!(f, "IP version {v} disagrees with the EtherType"),
            Ipv4Options(ihl) => write!(f, "IPv4 IHL {ihl} (options not supported)"),
            Ipv4Fragment { mf, offset } => write!(f, "IPv4 fragment (MF {mf}, offset {offset})"),
            NotUdp(p) => write!(f, "IP protocol {p} is not UDP"),
            ShortUdp { have } => write!(f, "UDP header needs 8 bytes, {have} available"),
            UdpPort(p) => write!(f, "UDP destination port {p} is not 4791"),
            IpBeyondFrame { ip_end, frame_len } => {
                write!(f, "IP datagram ends at {ip_end}, beyond the {frame_len}-byte frame")
            }
            LengthMismatch { ip_len, udp_len } => {
                write!(f, "IP length {ip_len} disagrees with UDP length {udp_len}")
            }
            UdpTooShort(l) => write!(f, "UDP length {l} too short for BTH + ICRC"),
            TrailingBytes { extra } => write!(f, "{extra} bytes after the IP datagram"),
            Oversize(n) => write!(f, "{n}-byte frame is longer than {}", crate::MAX_FRAME),
            BadIcrc { stored, computed } => write!(f, "ICRC mismatch: stored {stored:#010x}, computed {computed:#010x}"),
            BadIpv4Checksum { stored, computed } => {
                write!(f, "IPv4 header checksum {stored:#06x}, expected {computed:#06x}")
            }
            TVer(v) => write!(f, "BTH TVer {v} != 0"),
            UnknownOpcode(o) => write!(f, "unsupported opcode {o:#04x}"),
            OpcodeLength { opcode, avail, need } => {
                write!(f, "opcode {opcode:#04x} needs {need} bytes of headers + pad, {avail} available")
            }
            PayloadOnNoPayloadOpcode { opcode, bytes } => {
                write!(f, "opcode {opcode:#04x} carries no payload but has {bytes} payload/pad bytes")
            }
            Misaligned { udp_len } => {
                write!(f, "UDP length {udp_len}: payload + pad is not a whole number of 4-byte words")
            }
            PadNotLast { opcode, padcnt } => {
                write!(f, "opcode {opcode:#04x} does not end a message but has PadCnt {padcnt}")
            }
            PayloadTooLong(n) => write!(f, "{n}-byte payload is larger than {}", crate::rx::MAX_PAYLOAD),
            PkeyMismatch(k) => write!(f, "P_Key {k:#06x} does not match the port's {:#06x}", crate::rx::PORT_PKEY),
        }
    }
}

impl std::error::Error for ParseError {}

/// A fully parsed, accepted RoCEv2 frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet {
    /// Ethernet header (+ VLAN).
    pub eth: Eth,
    /// IP header.
    pub ip: Ip,
    /// UDP header.
    pub udp: Udp,
    /// Base transport header.
    pub bth: Bth,
    /// DETH (UD).
    pub deth: Option<Deth>,
    /// RETH.
    pub reth: Option<Reth>,
    /// AtomicETH.
    pub atomic_eth: Option<AtomicEth>,
    /// AETH.
    pub aeth: Option<Aeth>,
    /// AtomicAckETH.
    pub atomic_ack: Option<AtomicAckEth>,
    /// Immediate data.
    pub imm: Option<ImmDt>,
    /// IETH.
    pub ieth: Option<Ieth>,
    /// The 16 reserved bytes of a CNP.
    pub cnp_reserved: Option<[u8; 16]>,
    /// Payload (without pad).
    pub payload: Vec<u8>,
    /// Pad bytes as received (`bth.padcnt` of them).
    pub pad: Vec<u8>,
    /// Stored ICRC value (little-endian read of the 4 wire bytes).
    pub icrc: u32,
    /// Ethernet minimum-size padding bytes after the IP datagram.
    pub eth_pad: usize,
}

impl Packet {
    /// Offset of the IP header in the frame (14 or 18).
    pub fn l3_offset(&self) -> usize {
        self.eth.len()
    }
    /// Bytes from BTH start to payload (BTH + extension headers).
    pub fn hdr_len(&self) -> usize {
        Bth::LEN
            + self.deth.map_or(0, |_| Deth::LEN)
            + self.reth.map_or(0, |_| Reth::LEN)
            + self.atomic_eth.map_or(0, |_| AtomicEth::LEN)
            + self.aeth.map_or(0, |_| Aeth::LEN)
            + self.atomic_ack.map_or(0, |_| AtomicAckEth::LEN)
            + self.imm.map_or(0, |_| ImmDt::LEN)
            + self.ieth.map_or(0, |_| Ieth::LEN)
            + self.cnp_reserved.map_or(0, |_| opcode::CNP_RESERVED_LEN)
    }
    /// Offset of the payload in the frame.
    pub fn payload_offset(&self) -> usize {
        self.l3_offset() + self.ip.len() + Udp::LEN + self.hdr_len()
    }

    /// Serialises the frame exactly as stored (stored checksums and ICRC, `eth_pad` zero bytes).
    pub fn write(&self, out: &mut Vec<u8>) {
        self.eth.write(out);
        self.ip.write(out);
        self.udp.write(out);
        self.bth.write(out);
        if let Some(h) = self.deth {
            h.write(out);
        }
        if let Some(h) = self.reth {
            h.write(out);
        }
        if let Some(h) = self.atomic_eth {
            h.write(out);
        }
        if let Some(h) = self.aeth {
            h.write(out);
        }
        if let Some(h) = self.atomic_ack {
            h.write(out);
        }
        if let Some(h) = self.imm {
            h.write(out);
        }
        if let Some(h) = self.ieth {
            h.write(out);
        }
        if let Some(r) = self.cnp_reserved {
            out.extend_from_slice(&r);
        }
        out.extend_from_slice(&self.payload);
        out.extend_from_slice(&self.pad);
        out.extend_from_slice(&icrc::icrc_wire_bytes(self.icrc));
        out.resize(out.len() + self.eth_pad, 0);
    }

    /// [`Packet::write`] into a new vector.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.payload_offset() + self.payload.len() + 8 + self.eth_pad);
        self.write(&mut v);
        v
    }

    /// The header record the receive path reports for this packet.
    pub fn to_record(&self) -> HdrRecord {
        let mut r = HdrRecord {
            eth_dst: mac_to_u64(self.eth.dst),
            eth_src: mac_to_u64(self.eth.src),
            ..HdrRecord::default()
        };
        if let Some(v) = self.eth.vlan {
            r.vlan_valid = true;
            r.vlan_pcp = v.pcp;
            r.vlan_dei = v.dei;
            r.vlan_vid = v.vid;
        }
        match &self.ip {
            Ip::V4(h) => {
                r.ip_src = u32::from_be_bytes(h.src) as u128;
                r.ip_dst = u32::from_be_bytes(h.dst) as u128;
                r.dscp = h.tos >> 2;
                r.ecn = h.tos & 3;
                r.ttl = h.ttl;
                r.ip_id = h.id;
                r.ip_df = h.df;
            }
            Ip::V6(h) => {
                r.ipv6 = true;
                r.ip_src = u128::from_be_bytes(h.src);
                r.ip_dst = u128::from_be_bytes(h.dst);
                r.dscp = h.tc >> 2;
                r.ecn = h.tc & 3;
                r.ttl = h.hop_limit;
                r.flow_label = h.flow_label;
            }
        }
        r.udp_sport = self.udp.sport;
        r.udp_dport = self.udp.dport;
        r.udp_len = self.udp.len;
        r.udp_csum = self.udp.checksum;
        let b = &self.bth;
        r.opcode = b.opcode;
        r.se = b.se;
        r.migreq = b.migreq;
        r.padcnt = b.padcnt;
        r.tver = b.tver;
        r.pkey = b.pkey;
        r.fecn = b.fecn;
        r.becn = b.becn;
        r.resv6 = b.resv6;
        r.dest_qp = b.dest_qp;
        r.ackreq = b.ackreq;
        r.resv7 = b.resv7;
        r.psn = b.psn;
        if let Some(h) = self.deth {
            r.qkey = h.qkey;
            r.src_qp = h.src_qp;
        }
        if let Some(h) = self.reth {
            r.va = h.va;
            r.rkey = h.rkey;
            r.dma_len = h.dma_len;
        }
        if let Some(h) = self.atomic_eth {
            r.va = h.va;
            r.rkey = h.rkey;
            r.swap_add = h.swap_add;
            r.compare = h.compare;
        }
        if let Some(h) = self.aeth {
            r.syndrome = h.syndrome;
            r.msn = h.msn;
        }
        if let Some(h) = self.atomic_ack {
            r.atomic_orig = h.orig;
        }
        if let Some(h) = self.imm {
            r.imm = h.imm;
        }
        if let Some(h) = self.ieth {
            r.imm = h.rkey;
        }
        r.payload_off = self.payload_offset() as u16;
        r.payload_len = self.payload.len() as u16;
        r
    }
}

/// Parses the extension headers `info` announces from `b` (which holds at least `hdr_len − 12`
/// bytes), filling them into `p`; returns the remaining bytes.
fn parse_ext<'a>(p: &mut Packet, info: &OpInfo, mut b: &'a [u8]) -> Result<&'a [u8], WireError> {
    if info.deth {
        let (h, r) = Deth::parse(b)?;
        p.deth = Some(h);
        b = r;
    }
    if info.reth {
        let (h, r) = Reth::parse(b)?;
        p.reth = Some(h);
        b = r;
    }
    if info.atomic_eth {
        let (h, r) = AtomicEth::parse(b)?;
        p.atomic_eth = Some(h);
        b = r;
    }
    if info.aeth {
        let (h, r) = Aeth::parse(b)?;
        p.aeth = Some(h);
        b = r;
    }
    if info.atomic_ack {
        let (h, r) = AtomicAckEth::parse(b)?;
        p.atomic_ack = Some(h);
        b = r;
    }
    if info.imm {
        let (h, r) = ImmDt::parse(b)?;
        p.imm = Some(h);
        b = r;
    }
    if info.ieth {
        let (h, r) = Ieth::parse(b)?;
        p.ieth = Some(h);
        b = r;
    }
    if info.cnp {
        need(b, 16, HeaderKind::CnpReserved)?;
        p.cnp_reserved = Some(arr::<16>(b, 0));
        b = &b[16..];
    }
    Ok(b)
}

/// Parses an Ethernet frame (without FCS) into a [`Packet`], or says why the receive path drops
/// it. `parse_frame(f).err().map(|e| e.reason()) == classify(f).reason` for every `f`.
pub fn parse_frame(frame: &[u8]) -> Result<Packet, ParseError> {
    let flen = frame.len();
    let (eth, l3) = Eth::parse(frame).map_err(|e| match e {
        WireError::Short { header: HeaderKind::Vlan, .. } => ParseError::ShortVlan { len: flen },
        _ => ParseError::ShortEthernet { len: flen },
    })?;
    let l3off = eth.len();
    let ip_err = |e: WireError| match e {
        WireError::Short { need, have, .. } => ParseError::ShortIpHeader { need, have },
        WireError::Version { found, .. } => ParseError::IpVersion(found),
        WireError::Ipv4Options(ihl) => ParseError::Ipv4Options(ihl),
    };
    let (ip, l4) = match eth.ethertype {
        ETHERTYPE_IPV4 => {
            let (h, rest) = Ipv4::parse(l3).map_err(ip_err)?;
            if h.mf || h.frag_off != 0 {
                return Err(ParseError::Ipv4Fragment { mf: h.mf, offset: h.frag_off });
            }
            (Ip::V4(h), rest)
        }
        ETHERTYPE_IPV6 => {
            let (h, rest) = Ipv6::parse(l3).map_err(ip_err)?;
            (Ip::V6(h), rest)
        }
        t => return Err(ParseError::EtherType(t)),
    };
    let proto = match &ip {
        Ip::V4(h) => h.protocol,
        Ip::V6(h) => h.next_header,
    };
    if proto != 17 {
        return Err(ParseError::NotUdp(proto));
    }
    let (udp, _) = Udp::parse(l4).map_err(|_| ParseError::ShortUdp { have: l4.len() })?;
    if udp.dport != ROCEV2_UDP_PORT {
        return Err(ParseError::UdpPort(udp.dport));
    }
    let (ip_len, ip_end) = match &ip {
        Ip::V4(h) => (h.total_len, l3off + h.total_len as usize),
        Ip::V6(h) => (h.payload_len, l3off + Ipv6::LEN + h.payload_len as usize),
    };
    if ip_end > flen {
        return Err(ParseError::IpBeyondFrame { ip_end, frame_len: flen });
    }
    let mismatch = match &ip {
        Ip::V4(_) => ip_len as u32 != Ipv4::LEN as u32 + udp.len as u32,
        Ip::V6(_) => ip_len != udp.len,
    };
    if mismatch {
        return Err(ParseError::LengthMismatch { ip_len, udp_len: udp.len });
    }
    if (udp.len as usize) < Udp::LEN + Bth::LEN + opcode::ICRC_LEN {
        return Err(ParseError::UdpTooShort(udp.len));
    }
    if flen > ip_end && flen > ETH_PAD_LIMIT {
        return Err(ParseError::TrailingBytes { extra: flen - ip_end });
    }
    if flen > MAX_FRAME {
        return Err(ParseError::Oversize(flen));
    }
    // From here on l3off + ip + 8 + 12 + 4 <= ip_end <= flen.
    let datagram = &frame[l3off..ip_end];
    let covered = &datagram[..datagram.len() - opcode::ICRC_LEN];
    let stored = icrc::icrc_from_wire(arr::<4>(datagram, datagram.len() - opcode::ICRC_LEN));
    let computed = icrc::icrc_masked(covered, ip.is_v6());
    if stored != computed {
        return Err(ParseError::BadIcrc { stored, computed });
    }
    if let Ip::V4(h) = &ip {
        if !ipv4_checksum_valid(datagram) {
            return Err(ParseError::BadIpv4Checksum { stored: h.checksum, computed: h.compute_checksum() });
        }
    }
    let bth_region = &covered[ip.len() + Udp::LEN..];
    let avail = bth_region.len();
    let (bth, after_bth) = Bth::parse(bth_region)
        .map_err(|_| ParseError::UdpTooShort(udp.len))?;
    if bth.tver != 0 {
        return Err(ParseError::TVer(bth.tver));
    }
    let info = opcode::info(bth.opcode).ok_or(ParseError::UnknownOpcode(bth.opcode))?;
    let padcnt = bth.padcnt as usize;
    if avail < info.hdr_len + padcnt {
        return Err(ParseError::OpcodeLength { opcode: bth.opcode, avail, need: info.hdr_len + padcnt });
    }
    if info.no_payload && avail != info.hdr_len {
        return Err(ParseError::PayloadOnNoPayloadOpcode { opcode: bth.opcode, bytes: avail - info.hdr_len });
    }
    if udp.len % 4 != 0 {
        return Err(ParseError::Misaligned { udp_len: udp.len });
    }
    if padcnt != 0 && !info.end {
        return Err(ParseError::PadNotLast { opcode: bth.opcode, padcnt: bth.padcnt });
    }
    if avail - info.hdr_len - padcnt > crate::rx::MAX_PAYLOAD {
        return Err(ParseError::PayloadTooLong(avail - info.hdr_len - padcnt));
    }
    if !crate::rx::pkey_matches(bth.pkey, crate::rx::PORT_PKEY) {
        return Err(ParseError::PkeyMismatch(bth.pkey));
    }
    let mut p = Packet {
        eth,
        ip,
        udp,
        bth,
        deth: None,
        reth: None,
        atomic_eth: None,
        aeth: None,
        atomic_ack: None,
        imm: None,
        ieth: None,
        cnp_reserved: None,
        payload: Vec::new(),
        pad: Vec::new(),
        icrc: stored,
        eth_pad: flen - ip_end,
    };
    let rest = parse_ext(&mut p, &info, after_bth).map_err(|_| ParseError::OpcodeLength {
        opcode: bth.opcode,
        avail,
        need: info.hdr_len + padcnt,
    })?;
    let plen = rest.len() - padcnt;
    p.payload = rest[..plen].to_vec();
    p.pad = rest[plen..].to_vec();
    Ok(p)
}
