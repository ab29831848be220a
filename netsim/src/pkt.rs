//! Frame helpers: the minimum of Ethernet / 802.1Q / IPv4 / IPv6 / UDP 4791 / BTH parsing the
//! switch and the experiment harness need (class selection, ECN reading and CE marking, telling
//! CNPs apart), and building / parsing IEEE 802.1Qbb PFC frames.
//!
//! Frames are Ethernet frames **without FCS** (as the Hematite engine's AXI-Stream ports and
//! `hematite_model` carry them). Nothing here panics on any input.

use hematite_model::{build_frame, BuildError, HdrRecord};

/// EtherType IPv4.
pub const ETHERTYPE_IPV4: u16 = 0x0800;
/// EtherType IPv6.
pub const ETHERTYPE_IPV6: u16 = 0x86DD;
/// 802.1Q tag protocol identifier.
pub const ETHERTYPE_VLAN: u16 = 0x8100;
/// MAC control (PAUSE, PFC).
pub const ETHERTYPE_MAC_CONTROL: u16 = 0x8808;
/// MAC control opcode of a priority-based flow control (802.1Qbb) frame.
pub const PFC_OPCODE: u16 = 0x0101;
/// MAC control opcode of a classic 802.3x PAUSE frame (not supported by the switch).
pub const PAUSE_OPCODE: u16 = 0x0001;
/// Destination MAC of PAUSE / PFC frames.
pub const PFC_DST: [u8; 6] = [0x01, 0x80, 0xC2, 0x00, 0x00, 0x01];
/// Length of a PFC frame as built by [`build_pfc`] (minimum Ethernet frame without FCS).
pub const PFC_FRAME_LEN: usize = 60;
/// RoCEv2 UDP destination port.
pub const ROCE_UDP_PORT: u16 = 4791;
/// BTH opcode of a RoCEv2 CNP.
pub const OPCODE_CNP: u8 = 0x81;
/// Bits of one pause quantum (802.3 / 802.1Qbb): the pause time unit is 512 bit times at the
/// link's rate.
pub const QUANTUM_BITS: u64 = 512;

/// ECN codepoint Not-ECT.
pub const ECN_NOT_ECT: u8 = 0b00;
/// ECN codepoint ECT(1).
pub const ECN_ECT1: u8 = 0b01;
/// ECN codepoint ECT(0).
pub const ECN_ECT0: u8 = 0b10;
/// ECN codepoint CE (congestion experienced).
pub const ECN_CE: u8 = 0b11;

fn be16(f: &[u8], i: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*f.get(i)?, *f.get(i + 1)?]))
}

/// Layer-2 view of a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct L2 {
    /// Destination MAC.
    pub dst: [u8; 6],
    /// Source MAC.
    pub src: [u8; 6],
    /// 802.1Q priority code point when the frame carries a tag (TPID 0x8100).
    pub pcp: Option<u8>,
    /// EtherType after the optional tag.
    pub ethertype: u16,
    /// Offset of the layer-3 header (14, or 18 with a tag).
    pub l3: usize,
}

/// Parses the Ethernet header and an optional single 802.1Q tag. `None` if the frame is shorter
/// than the header it announces.
pub fn parse_l2(f: &[u8]) -> Option<L2> {
    let dst: [u8; 6] = f.get(0..6)?.try_into().ok()?;
    let src: [u8; 6] = f.get(6..12)?.try_into().ok()?;
    let et = be16(f, 12)?;
    if et == ETHERTYPE_VLAN {
        let tci = be16(f, 14)?;
        let et2 = be16(f, 16)?;
        Some(L2 { dst, src, pcp: Some((tci >> 13) as u8), ethertype: et2, l3: 18 })
    } else {
        Some(L2 { dst, src, pcp: None, ethertype: et, l3: 14 })
    }
}

/// Layer-3 view of an IPv4 / IPv6 frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct L3 {
    /// IPv6 (true) or IPv4.
    pub ipv6: bool,
    /// Offset of the IP header in the frame.
    pub off: usize,
    /// Traffic class / TOS byte: DSCP << 2 | ECN.
    pub tc: u8,
    /// IPv4 protocol / IPv6 next header.
    pub proto: u8,
    /// Offset of the layer-4 header (IPv4: after IHL·4 bytes; IPv6: after the fixed 40-byte
    /// header, extension headers are not walked).
    pub l4: usize,
}

impl L3 {
    /// DSCP (6 bits).
    pub fn dscp(&self) -> u8 {
        self.tc >> 2
    }
    /// ECN (2 bits).
    pub fn ecn(&self) -> u8 {
        self.tc & 3
    }
}

/// Parses L2 and the IPv4 / IPv6 header. `None` for non-IP frames, a version field that
/// disagrees with the EtherType, an IPv4 IHL below 5, or a header cut short.
pub fn parse_ip(f: &[u8]) -> Option<(L2, L3)> {
    let l2 = parse_l2(f)?;
    let o = l2.l3;
    match l2.ethertype {
        ETHERTYPE_IPV4 => {
            let b0 = *f.get(o)?;
            let ihl = (b0 & 0x0F) as usize * 4;
            if b0 >> 4 != 4 || ihl < 20 || f.len() < o + ihl {
                return None;
            }
            Some((l2, L3 { ipv6: false, off: o, tc: f[o + 1], proto: f[o + 9], l4: o + ihl }))
        }
        ETHERTYPE_IPV6 => {
            if f.len() < o + 40 || f[o] >> 4 != 6 {
                return None;
            }
            let tc = (f[o] << 4) | (f[o + 1] >> 4);
            Some((l2, L3 { ipv6: true, off: o, tc, proto: f[o + 6], l4: o + 40 }))
        }
        _ => None,
    }
}

/// The IP ECN field (0..=3) of an IPv4 / IPv6 frame, `None` for other frames.
pub fn ecn(f: &[u8]) -> Option<u8> {
    parse_ip(f).map(|(_, l3)| l3.ecn())
}

/// The IP DSCP of an IPv4 / IPv6 frame, `None` for other frames.
pub fn dscp(f: &[u8]) -> Option<u8> {
    parse_ip(f).map(|(_, l3)| l3.dscp())
}

/// What [`mark_ce`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MarkOutcome {
    /// ECT(0) or ECT(1) rewritten to CE.
    Marked,
    /// Already CE: unchanged.
    AlreadyCe,
    /// Not-ECT: unchanged (never marked).
    NotEct,
    /// Not an IPv4 / IPv6 frame: unchanged.
    NotIp,
}

/// One's-complement checksum update for a 16-bit word changing from `old` to `new`
/// (RFC 1624 equation 3: HC' = ~(~HC + ~m + m')), which equals a full recomputation.
fn csum_update(hc: u16, old: u16, new: u16) -> u16 {
    let mut s = (!hc) as u32 + (!old) as u32 + new as u32;
    s = (s & 0xFFFF) + (s >> 16);
    s = (s & 0xFFFF) + (s >> 16);
    !(s as u16)
}

/// Sets the IP ECN field of an ECT(0) / ECT(1) frame to CE. IPv4: the TOS byte and the header
/// checksum are updated incrementally (a valid checksum stays valid, an invalid one stays
/// invalid by the same amount); IPv6: the traffic class ECN bits. No other byte changes, so the
/// RoCEv2 ICRC (which masks the TOS / traffic class and the IPv4 checksum) stays valid.
pub fn mark_ce(f: &mut [u8]) -> MarkOutcome {
    let Some((_, l3)) = parse_ip(f) else {
        return MarkOutcome::NotIp;
    };
    match l3.ecn() {
        ECN_CE => return MarkOutcome::AlreadyCe,
        ECN_NOT_ECT => return MarkOutcome::NotEct,
        _ => {}
    }
    let o = l3.off;
    if l3.ipv6 {
        f[o + 1] |= 0x30;
    } else {
        let old = u16::from_be_bytes([f[o], f[o + 1]]);
        f[o + 1] |= ECN_CE;
        let new = u16::from_be_bytes([f[o], f[o + 1]]);
        let hc = u16::from_be_bytes([f[o + 10], f[o + 11]]);
        let hc2 = csum_update(hc, old, new);
        f[o + 10..o + 12].copy_from_slice(&hc2.to_be_bytes());
    }
    MarkOutcome::Marked
}

/// Whether the IPv4 header checksum of `f` is valid (over the IHL·4 header bytes);
/// `None` for frames that are not IPv4.
pub fn ipv4_checksum_ok(f: &[u8]) -> Option<bool> {
    let (_, l3) = parse_ip(f)?;
    if l3.ipv6 {
        return None;
    }
    let mut s: u32 = 0;
    for c in f[l3.off..l3.l4].chunks(2) {
        s += u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]) as u32;
    }
    while s > 0xFFFF {
        s = (s & 0xFFFF) + (s >> 16);
    }
    Some(s == 0xFFFF)
}

/// The BTH fields the experiments look at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bth {
    /// BTH opcode (0x81 = CNP).
    pub opcode: u8,
    /// FECN bit.
    pub fecn: bool,
    /// BECN bit (set in CNPs).
    pub becn: bool,
    /// Partition key.
    pub pkey: u16,
    /// Destination QP (24 bits).
    pub dest_qp: u32,
    /// AckReq bit.
    pub ackreq: bool,
    /// PSN (24 bits).
    pub psn: u32,
}

/// A RoCEv2 frame's IP and BTH view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Roce {
    /// Layer 2.
    pub l2: L2,
    /// Layer 3.
    pub l3: L3,
    /// UDP source port.
    pub udp_sport: u16,
    /// Base transport header.
    pub bth: Bth,
}

/// Parses IPv4 / IPv6 + UDP with destination port 4791 + the 12-byte BTH. Checks nothing else
/// (no lengths, checksums or ICRC): this is for classification, not validation.
pub fn parse_roce(f: &[u8]) -> Option<Roce> {
    let (l2, l3) = parse_ip(f)?;
    if l3.proto != 17 {
        return None;
    }
    let u = l3.l4;
    if be16(f, u + 2)? != ROCE_UDP_PORT {
        return None;
    }
    let b = f.get(u + 8..u + 20)?;
    let bth = Bth {
        opcode: b[0],
        fecn: b[4] & 0x80 != 0,
        becn: b[4] & 0x40 != 0,
        pkey: u16::from_be_bytes([b[2], b[3]]),
        dest_qp: u32::from_be_bytes([0, b[5], b[6], b[7]]),
        ackreq: b[8] & 0x80 != 0,
        psn: u32::from_be_bytes([0, b[9], b[10], b[11]]),
    };
    Some(Roce { l2, l3, udp_sport: be16(f, u)?, bth })
}

/// True for a RoCEv2 CNP (BTH opcode 0x81).
pub fn is_cnp(f: &[u8]) -> bool {
    parse_roce(f).is_some_and(|r| r.bth.opcode == OPCODE_CNP)
}

/// The addressing and header fields of a RoCEv2 test / harness frame (see [`build_roce`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoceSpec {
    /// Destination MAC.
    pub dst: [u8; 6],
    /// Source MAC.
    pub src: [u8; 6],
    /// Add an 802.1Q tag (VID 0) with this PCP.
    pub vlan_pcp: Option<u8>,
    /// IPv6 (true) or IPv4.
    pub ipv6: bool,
    /// Source IP (IPv4 in the low 32 bits).
    pub ip_src: u128,
    /// Destination IP.
    pub ip_dst: u128,
    /// DSCP.
    pub dscp: u8,
    /// ECN codepoint.
    pub ecn: u8,
    /// BTH opcode (must be one `hematite_model` supports; 0x81 = CNP, 0x04 = RC SEND ONLY).
    pub opcode: u8,
    /// BTH destination QP.
    pub dest_qp: u32,
    /// BTH PSN.
    pub psn: u32,
    /// Payload bytes (zero-filled; must be 0 for CNP).
    pub payload_len: u16,
}

impl RoceSpec {
    /// An RC SEND ONLY data packet, IPv4, DSCP 26, ECT(0).
    pub fn data(dst: [u8; 6], src: [u8; 6], payload_len: u16) -> RoceSpec {
        RoceSpec {
            dst,
            src,
            vlan_pcp: None,
            ipv6: false,
            ip_src: 0x0A00_0001,
            ip_dst: 0x0A00_0002,
            dscp: 26,
            ecn: ECN_ECT0,
            opcode: 0x04,
            dest_qp: 0x11,
            psn: 0,
            payload_len,
        }
    }
    /// A CNP (BECN set), IPv4, DSCP 48, ECT(0) (what ConnectX sends).
    pub fn cnp(dst: [u8; 6], src: [u8; 6], dest_qp: u32) -> RoceSpec {
        RoceSpec { dscp: 48, opcode: OPCODE_CNP, dest_qp, payload_len: 0, ..RoceSpec::data(dst, src, 0) }
    }
}

/// Builds a valid RoCEv2 frame (correct lengths, IPv4 checksum and ICRC) with
/// `hematite_model::build_frame`.
pub fn build_roce(s: &RoceSpec) -> Result<Vec<u8>, BuildError> {
    let rec = HdrRecord {
        eth_dst: hematite_model::wire::mac_to_u64(s.dst),
        eth_src: hematite_model::wire::mac_to_u64(s.src),
        vlan_valid: s.vlan_pcp.is_some(),
        vlan_pcp: s.vlan_pcp.unwrap_or(0) & 7,
        ipv6: s.ipv6,
        ip_src: s.ip_src,
        ip_dst: s.ip_dst,
        dscp: s.dscp & 0x3F,
        ecn: s.ecn & 3,
        ttl: 64,
        udp_sport: 0xC000,
        opcode: s.opcode,
        pkey: 0xFFFF,
        becn: s.opcode == OPCODE_CNP,
        dest_qp: s.dest_qp & 0xFF_FFFF,
        psn: s.psn & 0xFF_FFFF,
        payload_len: s.payload_len,
        ..HdrRecord::default()
    };
    build_frame(&rec, &vec![0u8; s.payload_len as usize])
}

/// Contents of an 802.1Qbb PFC frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Pfc {
    /// Class-enable vector: bit c set = `quanta[c]` applies to priority c.
    pub class_enable: u8,
    /// Pause time per priority in quanta of 512 bit times (0 = resume).
    pub quanta: [u16; 8],
}

/// Builds a PFC frame: destination 01:80:C2:00:00:01, source `src`, EtherType 0x8808, opcode
/// 0x0101, class-enable vector (16 bits, priorities in the low 8), eight 16-bit pause times,
/// zero padding to 60 bytes (no FCS).
pub fn build_pfc(src: [u8; 6], p: &Pfc) -> Vec<u8> {
    let mut f = Vec::with_capacity(PFC_FRAME_LEN);
    f.extend_from_slice(&PFC_DST);
    f.extend_from_slice(&src);
    f.extend_from_slice(&ETHERTYPE_MAC_CONTROL.to_be_bytes());
    f.extend_from_slice(&PFC_OPCODE.to_be_bytes());
    f.extend_from_slice(&(p.class_enable as u16).to_be_bytes());
    for q in p.quanta {
        f.extend_from_slice(&q.to_be_bytes());
    }
    f.resize(PFC_FRAME_LEN, 0);
    f
}

/// Parses a PFC frame (EtherType 0x8808, opcode 0x0101, at least 34 bytes; the destination MAC
/// is not checked). Pause times of priorities whose class-enable bit is clear are returned as
/// 0 (they must be ignored).
pub fn parse_pfc(f: &[u8]) -> Option<Pfc> {
    let l2 = parse_l2(f)?;
    if l2.ethertype != ETHERTYPE_MAC_CONTROL || be16(f, l2.l3)? != PFC_OPCODE {
        return None;
    }
    let o = l2.l3 + 2;
    let class_enable = (be16(f, o)? & 0xFF) as u8;
    let mut quanta = [0u16; 8];
    for (c, q) in quanta.iter_mut().enumerate() {
        let v = be16(f, o + 2 + 2 * c)?;
        if class_enable >> c & 1 != 0 {
            *q = v;
        }
    }
    Some(Pfc { class_enable, quanta })
}

/// Duration of a pause of `quanta` × 512 bit times at `rate_mbps`, in cycles of a `clk_mhz`
/// clock, rounded up: ⌈quanta · 512 · clk_mhz / rate_mbps⌉.
pub fn pause_cycles(quanta: u16, rate_mbps: u64, clk_mhz: u64) -> u64 {
    (quanta as u64 * QUANTUM_BITS * clk_mhz).div_ceil(rate_mbps.max(1))
}

/// The smallest pause (in quanta, saturating at 0xFFFF) that lasts at least `cycles` cycles at
/// `rate_mbps`: the smallest q with [`pause_cycles`]`(q) ≥ cycles`.
pub fn quanta_for_cycles(cycles: u64, rate_mbps: u64, clk_mhz: u64) -> u16 {
    if cycles == 0 {
        return 0;
    }
    // ⌈q·512·clk/rate⌉ ≥ c  ⟺  q·512·clk/rate > c − 1.
    let q = (cycles as u128 - 1) * rate_mbps as u128 / (QUANTUM_BITS as u128 * clk_mhz.max(1) as u128) + 1;
    q.min(0xFFFF) as u16
}

/// MAC address from a `u64` (low 48 bits, first wire byte most significant), the form
/// `hematite_model` uses.
pub fn mac(v: u64) -> [u8; 6] {
    hematite_model::wire::mac_from_u64(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csum_update_matches_recompute() {
        // Exhaustive over the TOS byte and a spread of other header words.
        let mut hdr = [0x45u8, 0, 0, 100, 0x12, 0x34, 0x40, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2];
        for other in 0..512u32 {
            hdr[4] = (other * 37) as u8;
            hdr[5] = (other >> 1) as u8;
            for tos in 0..=255u8 {
                hdr[1] = tos;
                let c = hematite_model::wire::ipv4_header_checksum(&hdr);
                hdr[10..12].copy_from_slice(&c.to_be_bytes());
                let old = u16::from_be_bytes([hdr[0], hdr[1]]);
                let new = old | 3;
                let c2 = csum_update(c, old, new);
                let mut h2 = hdr;
                h2[1] |= 3;
                assert_eq!(c2, hematite_model::wire::ipv4_header_checksum(&h2));
            }
        }
    }

    #[test]
    fn pfc_roundtrip() {
        let p = Pfc { class_enable: 0b1000_1000, quanta: [0, 0, 0, 0xFFFF, 0, 0, 0, 7] };
        let f = build_pfc([2, 0, 0, 0, 0, 9], &p);
        assert_eq!(f.len(), 60);
        assert_eq!(parse_pfc(&f), Some(p));
        assert_eq!(&f[12..16], &[0x88, 0x08, 0x01, 0x01]);
        assert_eq!(parse_pfc(&f[..33]), None);
        assert_eq!(pause_cycles(1, 100_000, 250), 2); // 512 bits at 100G = 5.12 ns = 1.28 cycles
        assert_eq!(pause_cycles(0xFFFF, 100_000, 250), 83_885);
        assert_eq!(quanta_for_cycles(83_885, 100_000, 250), 0xFFFF);
        for c in [1u64, 2, 999, 1000, 50_000] {
            let q = quanta_for_cycles(c, 100_000, 250);
            assert!(pause_cycles(q, 100_000, 250) >= c && pause_cycles(q - 1, 100_000, 250) < c, "{c}");
        }
    }

    #[test]
    fn garbage_never_panics() {
        let mut f = build_roce(&RoceSpec::data([0; 6], [1; 6], 10)).unwrap();
        for n in 0..f.len() {
            let mut g = f[..n].to_vec();
            let _ = (parse_roce(&g), ecn(&g), ipv4_checksum_ok(&g), parse_pfc(&g), mark_ce(&mut g));
        }
        assert_eq!(mark_ce(&mut f), MarkOutcome::Marked);
        assert_eq!(ecn(&f), Some(ECN_CE));
        assert_eq!(ipv4_checksum_ok(&f), Some(true));
    }
}
