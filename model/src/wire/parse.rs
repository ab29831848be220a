//! The structured frame parser: [`parse_frame`] builds a [`Packet`] from the typed headers and
//! checks the receive rules in the order of [`crate::rx::classify`]; a rejected frame gets a
//! [`ParseError`], which maps to the receive path's [`DropReason`].

use super::{
    arr, ipv4_checksum_valid, need, Aeth, AtomicAckEth, AtomicEth, Bth, Deth, Eth, HeaderKind, Ieth, ImmDt, Ip, Ipv4,
    Ipv6, Packet, Reth, Udp, WireError,
};
use crate::icrc;
use crate::opcode::{self, OpInfo};
use crate::record::DropReason;
use crate::{ETHERTYPE_IPV4, ETHERTYPE_IPV6, ETH_PAD_LIMIT, MAX_FRAME, ROCEV2_UDP_PORT};
use core::fmt;

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

/// Takes the header `parse` reads off the front of `b` when it is `present`.
fn ext<'a, H>(present: bool, b: &mut &'a [u8], parse: fn(&'a [u8]) -> Result<(H, &'a [u8]), WireError>) -> Result<Option<H>, WireError> {
    if !present {
        return Ok(None);
    }
    let (h, rest) = parse(b)?;
    *b = rest;
    Ok(Some(h))
}

/// Parses the extension headers `info` announces from `b` (which holds at least `hdr_len − 12`
/// bytes), filling them into `p`; returns the remaining bytes.
fn parse_ext<'a>(p: &mut Packet, info: &OpInfo, mut b: &'a [u8]) -> Result<&'a [u8], WireError> {
    p.deth = ext(info.deth, &mut b, Deth::parse)?;
    p.reth = ext(info.reth, &mut b, Reth::parse)?;
    p.atomic_eth = ext(info.atomic_eth, &mut b, AtomicEth::parse)?;
    p.aeth = ext(info.aeth, &mut b, Aeth::parse)?;
    p.atomic_ack = ext(info.atomic_ack, &mut b, AtomicAckEth::parse)?;
    p.imm = ext(info.imm, &mut b, ImmDt::parse)?;
    p.ieth = ext(info.ieth, &mut b, Ieth::parse)?;
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
    let info = opcode::wire_info(bth.opcode).ok_or(ParseError::UnknownOpcode(bth.opcode))?;
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
