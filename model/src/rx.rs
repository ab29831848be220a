//! The receive-path specification: [`classify`] runs the RTL parser's check sequence on a raw
//! Ethernet frame (no FCS), byte offset by byte offset.
//!
//! Check sequence (the first failing check wins):
//! 1. `frame_len < 14`, or tagged (bytes 12-13 = 0x8100) and `frame_len < 18` → `Truncated`.
//! 2. EtherType (bytes 12-13, or 16-17 after one 802.1Q tag; `l3off` = 14 / 18) not 0x0800 /
//!    0x86DD → `NotIp` (a second tag, e.g. QinQ 0x88A8 or 0x8100, is `NotIp`).
//! 3. `frame_len < l3off + 20` (IPv4) / `40` (IPv6) → `Truncated`.
//! 4. IP version nibble ≠ 4 / 6 → `NotIp`.
//! 5. IPv4: IHL ≠ 5, MF set, or fragment offset ≠ 0 → `Ipv4OptFrag`.
//! 6. Protocol / next header ≠ 17 → `NotRoce`.
//! 7. `frame_len < l3off + iphdr + 8` → `Truncated`; UDP destination port ≠ 4791 → `NotRoce`.
//! 8. `E` = `l3off + total_length` (IPv4) / `l3off + 40 + payload_length` (IPv6);
//!    `E > frame_len` → `Truncated`.
//! 9. IPv4 `total_length ≠ 20 + udp_len`, IPv6 `payload_length ≠ udp_len`, `udp_len < 8+12+4`,
//!    or (`frame_len > E` and `frame_len > 64`) → `Length`.
//! 10. ICRC over the masked `l3off..E-4` ≠ stored little-endian bytes `E-4..E` → `BadIcrc`.
//! 11. IPv4 header checksum invalid → `BadIpv4Csum`.
//! 12. BTH TVer ≠ 0 → `TVer`.
//! 13. Opcode unsupported → `UnknownOpcode` (the selective-repeat WRITE opcodes 0xC7-0xC9
//!     too: the engine does not implement selective repeat yet).
//! 14. `udp_len − 12 < hdr_len + padcnt`, or a no-payload opcode with
//!     `udp_len − 12 − hdr_len ≠ 0` → `Length`.
//! 15. `udp_len` not a multiple of 4 (payload + pad between the last transport header and the
//!     ICRC not a whole number of 4-byte words) → `Misaligned`.
//! 16. PadCnt ≠ 0 on a packet that does not end its message (FIRST / MIDDLE) → `PadNotLast`.
//! 17. Payload (`udp_len − 12 − hdr_len − padcnt`) > 4096, the largest PMTU → `TooLong`.
//! 18. BTH P_Key not matching the port's ([`PORT_PKEY`]: low 15 bits equal and at least one
//!     of the two a full member) → `BadPkey`.
//!
//! Checks 15-18 and the per-QP PMTU rules (first / middle packets exactly one PMTU, last /
//! only 1..PMTU, or 0 for zero-length messages: at the responder, a NAK invalid request) are
//! listed with their IBTA sources in `docs/packet-path.md`.

use crate::icrc;
use crate::opcode;
use crate::record::{DropReason, HdrRecord};
use crate::wire::ipv4_checksum_valid;
use crate::{ETHERTYPE_IPV4, ETHERTYPE_IPV6, ETHERTYPE_VLAN, ETH_PAD_LIMIT, MAX_FRAME, ROCEV2_UDP_PORT};

/// The port's P_Key (the only entry of its P_Key table: the default partition, full member).
/// The RTL's `hm_rx_path` has the same value as its `PORT_PKEY` parameter.
pub const PORT_PKEY: u16 = 0xFFFF;

/// Largest payload of one packet: the largest path MTU.
pub const MAX_PAYLOAD: usize = 4096;

/// Whether a BTH P_Key matches `port`'s: the same partition (low 15 bits), and not both
/// limited members (bit 15 clear).
pub fn pkey_matches(pkt: u16, port: u16) -> bool {
    pkt & 0x7FFF == port & 0x7FFF && (pkt | port) & 0x8000 != 0
}

/// Result of running the receive path on one frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RxOutcome {
    /// `None`: accepted; otherwise the drop reason.
    pub reason: Option<DropReason>,
    /// ICRC verdict, computed whenever the EtherType is IPv4/IPv6 and
    /// `l3off + iphdr + 8 + 12 + 4 <= E <= frame_len` (independently of the other checks; IPv4
    /// masks at the IHL = 5 positions); false otherwise.
    pub icrc_ok: bool,
    /// IPv4 with its 20-byte header present and a valid header checksum; false otherwise.
    pub ipv4_csum_ok: bool,
    /// Decoded header record: exact for accepted frames, best effort (fields beyond the frame
    /// read as 0) for dropped ones.
    pub rec: HdrRecord,
    /// Frame length in bytes.
    pub frame_len: usize,
}

impl RxOutcome {
    /// True when the frame was accepted.
    pub fn accepted(&self) -> bool {
        self.reason.is_none()
    }
    /// The 4-bit reason code the RTL reports (0 = accepted).
    pub fn reason_code(&self) -> u8 {
        self.reason.map_or(0, |r| r as u8)
    }
}

/// Bounds-safe big-endian reader: bytes beyond the frame read as 0.
#[derive(Clone, Copy)]
struct Rd<'a>(&'a [u8]);

impl Rd<'_> {
    fn u8(&self, i: usize) -> u8 {
        self.0.get(i).copied().unwrap_or(0)
    }
    fn be(&self, i: usize, n: usize) -> u128 {
        (0..n).fold(0u128, |a, k| a << 8 | self.u8(i.saturating_add(k)) as u128)
    }
    fn be16(&self, i: usize) -> u16 {
        self.be(i, 2) as u16
    }
    fn be24(&self, i: usize) -> u32 {
        self.be(i, 3) as u32
    }
    fn be32(&self, i: usize) -> u32 {
        self.be(i, 4) as u32
    }
    fn be64(&self, i: usize) -> u64 {
        self.be(i, 8) as u64
    }
}

/// Frame geometry shared by the checks and the record decoder.
struct Geo {
    l3off: usize,
    ipv6: bool,
    iphdr: usize,
}

/// Decodes every record field from the frame at the given geometry (best effort; exact when the
/// frame passed all checks).
fn decode(r: Rd<'_>, g: &Geo) -> HdrRecord {
    let mut rec = HdrRecord {
        eth_dst: r.be(0, 6) as u64,
        eth_src: r.be(6, 6) as u64,
        ..HdrRecord::default()
    };
    if g.l3off == 18 {
        let tci = r.be16(14);
        rec.vlan_valid = true;
        rec.vlan_pcp = (tci >> 13) as u8;
        rec.vlan_dei = tci & 0x1000 != 0;
        rec.vlan_vid = tci & 0xFFF;
    }
    let ip = g.l3off;
    rec.ipv6 = g.ipv6;
    if g.ipv6 {
        let w = r.be32(ip);
        let tc = (w >> 20) as u8;
        rec.dscp = tc >> 2;
        rec.ecn = tc & 3;
        rec.flow_label = w & 0xF_FFFF;
        rec.ttl = r.u8(ip + 7);
        rec.ip_src = r.be(ip + 8, 16);
        rec.ip_dst = r.be(ip + 24, 16);
    } else {
        let tos = r.u8(ip + 1);
        rec.dscp = tos >> 2;
        rec.ecn = tos & 3;
        rec.ip_id = r.be16(ip + 4);
        rec.ip_df = r.u8(ip + 6) & 0x40 != 0;
        rec.ttl = r.u8(ip + 8);
        rec.ip_src = r.be32(ip + 12) as u128;
        rec.ip_dst = r.be32(ip + 16) as u128;
    }
    let udp = ip + g.iphdr;
    rec.udp_sport = r.be16(udp);
    rec.udp_dport = r.be16(udp + 2);
    rec.udp_len = r.be16(udp + 4);
    rec.udp_csum = r.be16(udp + 6);
    let bth = udp + 8;
    rec.opcode = r.u8(bth);
    let b1 = r.u8(bth + 1);
    rec.se = b1 & 0x80 != 0;
    rec.migreq = b1 & 0x40 != 0;
    rec.padcnt = (b1 >> 4) & 3;
    rec.tver = b1 & 0xF;
    rec.pkey = r.be16(bth + 2);
    let b4 = r.u8(bth + 4);
    rec.fecn = b4 & 0x80 != 0;
    rec.becn = b4 & 0x40 != 0;
    rec.resv6 = b4 & 0x3F;
    rec.dest_qp = r.be24(bth + 5);
    let b8 = r.u8(bth + 8);
    rec.ackreq = b8 & 0x80 != 0;
    rec.resv7 = b8 & 0x7F;
    rec.psn = r.be24(bth + 9);
    let mut hdr_len = opcode::BTH_LEN;
    if let Some(info) = opcode::info(rec.opcode) {
        let mut o = bth + opcode::BTH_LEN;
        if info.deth {
            rec.qkey = r.be32(o);
            rec.src_qp = r.be24(o + 5);
            o += opcode::DETH_LEN;
        }
        if info.reth {
            rec.va = r.be64(o);
            rec.rkey = r.be32(o + 8);
            rec.dma_len = r.be32(o + 12);
            o += opcode::RETH_LEN;
        }
        if info.atomic_eth {
            rec.va = r.be64(o);
            rec.rkey = r.be32(o + 8);
            rec.swap_add = r.be64(o + 12);
            rec.compare = r.be64(o + 20);
            o += opcode::ATOMIC_ETH_LEN;
        }
        if info.aeth {
            rec.syndrome = r.u8(o);
            rec.msn = r.be24(o + 1);
            o += opcode::AETH_LEN;
        }
        if info.atomic_ack {
            rec.atomic_orig = r.be64(o);
            o += opcode::ATOMIC_ACK_ETH_LEN;
        }
        if info.imm || info.ieth {
            rec.imm = r.be32(o);
        }
        hdr_len = info.hdr_len;
    }
    rec.payload_off = (bth + hdr_len) as u16;
    rec.payload_len = (rec.udp_len as usize)
        .saturating_sub(8 + opcode::ICRC_LEN + hdr_len + rec.padcnt as usize)
        .min(u16::MAX as usize) as u16;
    rec
}

/// Runs the receive-path checks on `frame` (Ethernet frame without FCS).
pub fn classify(frame: &[u8]) -> RxOutcome {
    let flen = frame.len();
    let r = Rd(frame);
    let mut out = RxOutcome {
        reason: None,
        icrc_ok: false,
        ipv4_csum_ok: false,
        rec: HdrRecord::default(),
        frame_len: flen,
    };
    // Step 1: L2 length.
    let tagged = r.be16(12) == ETHERTYPE_VLAN;
    if flen < 14 || (tagged && flen < 18) {
        out.rec = decode(r, &Geo { l3off: 14, ipv6: false, iphdr: 20 });
        out.reason = Some(DropReason::Truncated);
        return out;
    }
    let l3off = if tagged { 18 } else { 14 };
    let ethertype = r.be16(l3off - 2);
    let ipv6 = ethertype == ETHERTYPE_IPV6;
    let iphdr = if ipv6 { 40 } else { 20 };
    let geo = Geo { l3off, ipv6, iphdr };
    out.rec = decode(r, &geo);
    let is_ip = ethertype == ETHERTYPE_IPV4 || ipv6;

    // Side verdicts, independent of the check sequence.
    let ip_end = if ipv6 {
        l3off + 40 + r.be16(l3off + 4) as usize
    } else {
        l3off + r.be16(l3off + 2) as usize
    };
    if is_ip && flen >= l3off + iphdr && l3off + iphdr + 8 + 12 + 4 <= ip_end && ip_end <= flen {
        let stored = icrc::icrc_from_wire([r.u8(ip_end - 4), r.u8(ip_end - 3), r.u8(ip_end - 2), r.u8(ip_end - 1)]);
        out.icrc_ok = icrc::icrc_masked(&frame[l3off..ip_end - 4], ipv6) == stored;
    }
    if ethertype == ETHERTYPE_IPV4 && flen >= l3off + 20 {
        out.ipv4_csum_ok = ipv4_checksum_valid(&frame[l3off..]);
    }

    out.reason = checks(r, &geo, ethertype, ip_end, out.icrc_ok, out.ipv4_csum_ok);
    out
}

/// Steps 2-14 of the check sequence.
fn checks(r: Rd<'_>, g: &Geo, ethertype: u16, ip_end: usize, icrc_ok: bool, csum_ok: bool) -> Option<DropReason> {
    let flen = r.0.len();
    let (l3off, ipv6, iphdr) = (g.l3off, g.ipv6, g.iphdr);
    // Step 2.
    if ethertype != ETHERTYPE_IPV4 && ethertype != ETHERTYPE_IPV6 {
        return Some(DropReason::NotIp);
    }
    // Step 3.
    if flen < l3off + iphdr {
        return Some(DropReason::Truncated);
    }
    // Step 4.
    let ver = r.u8(l3off) >> 4;
    if ver != if ipv6 { 6 } else { 4 } {
        return Some(DropReason::NotIp);
    }
    // Step 5.
    if !ipv6 {
        let ihl = r.u8(l3off) & 0xF;
        let ff = r.be16(l3off + 6);
        if ihl != 5 || ff & 0x2000 != 0 || ff & 0x1FFF != 0 {
            return Some(DropReason::Ipv4OptFrag);
        }
    }
    // Step 6.
    let proto = if ipv6 { r.u8(l3off + 6) } else { r.u8(l3off + 9) };
    if proto != 17 {
        return Some(DropReason::NotRoce);
    }
    // Step 7.
    let udp = l3off + iphdr;
    if flen < udp + 8 {
        return Some(DropReason::Truncated);
    }
    if r.be16(udp + 2) != ROCEV2_UDP_PORT {
        return Some(DropReason::NotRoce);
    }
    // Step 8.
    if ip_end > flen {
        return Some(DropReason::Truncated);
    }
    // Step 9.
    let udp_len = r.be16(udp + 4) as usize;
    let len_ok = if ipv6 {
        r.be16(l3off + 4) as usize == udp_len
    } else {
        r.be16(l3off + 2) as usize == 20 + udp_len
    };
    if !len_ok || udp_len < 8 + 12 + 4 || (flen > ip_end && flen > ETH_PAD_LIMIT) || flen > MAX_FRAME {
        return Some(DropReason::Length);
    }
    // Step 10 (the side verdict was computed under exactly the conditions now established).
    if !icrc_ok {
        return Some(DropReason::BadIcrc);
    }
    // Step 11.
    if !ipv6 && !csum_ok {
        return Some(DropReason::BadIpv4Csum);
    }
    // Step 12.
    let bth = udp + 8;
    if r.u8(bth + 1) & 0xF != 0 {
        return Some(DropReason::TVer);
    }
    // Step 13.
    let Some(info) = opcode::info(r.u8(bth)) else {
        return Some(DropReason::UnknownOpcode);
    };
    // Step 14.
    let avail = udp_len - 8 - opcode::ICRC_LEN;
    let padcnt = ((r.u8(bth + 1) >> 4) & 3) as usize;
    if avail < info.hdr_len + padcnt || (info.no_payload && avail != info.hdr_len) {
        return Some(DropReason::Length);
    }
    // Step 15.
    if udp_len % 4 != 0 {
        return Some(DropReason::Misaligned);
    }
    // Step 16.
    if padcnt != 0 && !info.end {
        return Some(DropReason::PadNotLast);
    }
    // Step 17.
    if avail - info.hdr_len - padcnt > MAX_PAYLOAD {
        return Some(DropReason::TooLong);
    }
    // Step 18.
    if !pkey_matches(r.be16(bth + 2), PORT_PKEY) {
        return Some(DropReason::BadPkey);
    }
    None
}
