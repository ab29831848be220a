//! One hand-made malformed frame per `ParseError` variant; `classify` must agree on the reason.

mod common;

use common::refix;
use hematite_model::wire::ParseError as E;
use hematite_model::{build_frame, classify, parse_frame, DropReason, HdrRecord, ParseError};

fn rec(opcode: u8, ipv6: bool, vlan: bool, len: usize) -> HdrRecord {
    HdrRecord {
        eth_dst: 0x0200_0000_000b,
        eth_src: 0x0200_0000_000a,
        vlan_valid: vlan,
        vlan_pcp: 3,
        vlan_vid: 100,
        ipv6,
        ip_src: if ipv6 { 0xfd00_0010 << 96 | 1 } else { 0xc0a8_0a01 },
        ip_dst: if ipv6 { 0xfd00_0010 << 96 | 2 } else { 0xc0a8_0a02 },
        dscp: 26,
        ecn: 2,
        ttl: 64,
        ip_id: 0x1c46,
        ip_df: true,
        flow_label: 0x12345,
        udp_sport: 0xc123,
        opcode,
        pkey: 0xffff,
        dest_qp: 0x11,
        ackreq: true,
        psn: 0x100,
        payload_len: len as u16,
        ..HdrRecord::default()
    }
}

/// IPv4 RC SEND ONLY with `len` payload bytes (the frame is 58 + len + pad bytes, min 60).
fn v4(len: usize) -> Vec<u8> {
    let p: Vec<u8> = (0..len as u8).collect();
    build_frame(&rec(0x04, false, false, len), &p).unwrap()
}

fn v6(len: usize) -> Vec<u8> {
    let p: Vec<u8> = (0..len as u8).collect();
    build_frame(&rec(0x04, true, false, len), &p).unwrap()
}

fn vlan4(len: usize) -> Vec<u8> {
    let p: Vec<u8> = (0..len as u8).collect();
    build_frame(&rec(0x04, false, true, len), &p).unwrap()
}

/// Asserts `parse_frame` fails with a variant matching `pred` and `classify` agrees.
#[track_caller]
fn expect(f: &[u8], pred: impl Fn(&ParseError) -> bool, reason: DropReason) {
    let e = parse_frame(f).expect_err("frame unexpectedly parsed");
    assert!(pred(&e), "unexpected variant {e:?}");
    assert_eq!(e.reason(), reason, "{e}");
    assert!(!e.to_string().is_empty());
    assert_eq!(classify(f).reason, Some(reason), "classify disagrees for {e:?}");
}

#[test]
fn baseline_frames_parse() {
    for f in [v4(0), v4(40), v6(3), vlan4(7)] {
        assert!(parse_frame(&f).is_ok());
        assert_eq!(classify(&f).reason, None);
    }
    assert_eq!(v4(0).len(), 60, "padded to the Ethernet minimum");
}

#[test]
fn short_ethernet() {
    expect(&v4(40)[..13], |e| matches!(e, E::ShortEthernet { len: 13 }), DropReason::Truncated);
    expect(&[], |e| matches!(e, E::ShortEthernet { len: 0 }), DropReason::Truncated);
}

#[test]
fn short_vlan() {
    expect(&vlan4(40)[..17], |e| matches!(e, E::ShortVlan { len: 17 }), DropReason::Truncated);
}

#[test]
fn ether_type() {
    let mut f = v4(40);
    f[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
    expect(&f, |e| matches!(e, E::EtherType(0x0806)), DropReason::NotIp);
    let mut f = v4(40);
    f[12..14].copy_from_slice(&0x88A8u16.to_be_bytes()); // QinQ outer tag
    expect(&f, |e| matches!(e, E::EtherType(0x88A8)), DropReason::NotIp);
    let mut f = vlan4(40);
    f[16..18].copy_from_slice(&0x8100u16.to_be_bytes()); // second 802.1Q tag
    expect(&f, |e| matches!(e, E::EtherType(0x8100)), DropReason::NotIp);
}

#[test]
fn short_ip_header() {
    expect(&v4(40)[..33], |e| matches!(e, E::ShortIpHeader { need: 20, have: 19 }), DropReason::Truncated);
    expect(&v6(40)[..53], |e| matches!(e, E::ShortIpHeader { need: 40, have: 39 }), DropReason::Truncated);
}

#[test]
fn ip_version() {
    let mut f = v4(40);
    f[14] = 0x65;
    refix(&mut f);
    expect(&f, |e| matches!(e, E::IpVersion(6)), DropReason::NotIp);
    let mut f = v6(40);
    f[14] = 0x46 | (f[14] & 0x0F);
    refix(&mut f);
    expect(&f, |e| matches!(e, E::IpVersion(4)), DropReason::NotIp);
}

#[test]
fn ipv4_options() {
    let mut f = v4(40);
    f[14] = 0x46;
    refix(&mut f);
    expect(&f, |e| matches!(e, E::Ipv4Options(6)), DropReason::Ipv4OptFrag);
}

#[test]
fn ipv4_fragment() {
    let mut f = v4(40);
    f[20] |= 0x20; // MF
    refix(&mut f);
    expect(&f, |e| matches!(e, E::Ipv4Fragment { mf: true, offset: 0 }), DropReason::Ipv4OptFrag);
    let mut f = v4(40);
    f[21] = 0x01; // offset 1
    refix(&mut f);
    expect(&f, |e| matches!(e, E::Ipv4Fragment { mf: false, offset: 1 }), DropReason::Ipv4OptFrag);
}

#[test]
fn not_udp() {
    let mut f = v4(40);
    f[14 + 9] = 6;
    refix(&mut f);
    expect(&f, |e| matches!(e, E::NotUdp(6)), DropReason::NotRoce);
    let mut f = v6(40);
    f[14 + 6] = 58;
    refix(&mut f);
    expect(&f, |e| matches!(e, E::NotUdp(58)), DropReason::NotRoce);
}

#[test]
fn short_udp() {
    expect(&v4(40)[..14 + 20 + 7], |e| matches!(e, E::ShortUdp { have: 7 }), DropReason::Truncated);
}

#[test]
fn udp_port() {
    let mut f = v4(40);
    f[36..38].copy_from_slice(&4792u16.to_be_bytes());
    refix(&mut f);
    expect(&f, |e| matches!(e, E::UdpPort(4792)), DropReason::NotRoce);
}

#[test]
fn ip_beyond_frame() {
    let f = v4(40);
    let n = f.len();
    expect(&f[..n - 1], |e| matches!(e, E::IpBeyondFrame { ip_end, frame_len } if *ip_end == n && *frame_len == n - 1), DropReason::Truncated);
}

#[test]
fn length_mismatch() {
    let mut f = v4(40);
    let ul = u16::from_be_bytes([f[38], f[39]]);
    f[38..40].copy_from_slice(&(ul - 4).to_be_bytes());
    refix(&mut f);
    expect(&f, |e| matches!(e, E::LengthMismatch { .. }), DropReason::Length);
    let mut f = v6(40);
    f[18..20].copy_from_slice(&(ul - 4).to_be_bytes()); // IPv6 payload length
    f.truncate(f.len() - 4);
    refix(&mut f);
    expect(&f, |e| matches!(e, E::LengthMismatch { .. }), DropReason::Length);
}

#[test]
fn udp_too_short() {
    // IPv4 total 40 = 20 + UDP 20 (< 24): consistent lengths, frame 54 bytes (padding allowed).
    let mut f = v4(0)[..54].to_vec();
    f[16..18].copy_from_slice(&40u16.to_be_bytes());
    f[38..40].copy_from_slice(&20u16.to_be_bytes());
    refix(&mut f);
    expect(&f, |e| matches!(e, E::UdpTooShort(20)), DropReason::Length);
}

#[test]
fn trailing_bytes() {
    let mut f = v4(40);
    f.push(0);
    expect(&f, |e| matches!(e, E::TrailingBytes { extra: 1 }), DropReason::Length);
    // ... but up to a 64-byte frame, bytes after the datagram are Ethernet padding.
    let mut f = v4(0);
    f.extend_from_slice(&[0xAA; 4]);
    assert_eq!(f.len(), 64);
    assert!(parse_frame(&f).is_ok());
    assert_eq!(parse_frame(&f).unwrap().eth_pad, 6);
    assert_eq!(classify(&f).reason, None);
}

#[test]
fn oversize() {
    // a valid datagram whose frame is longer than MAX_FRAME (jumbo limit)
    let big = |n: usize| build_frame(&rec(0x04, false, false, n), &vec![0x5A; n]).unwrap();
    let f = big(hematite_model::MAX_FRAME);
    assert!(f.len() > hematite_model::MAX_FRAME);
    expect(&f, |e| matches!(e, E::Oversize(_)), DropReason::Length);
    assert!(classify(&f).icrc_ok, "the ICRC itself is fine");
    // within MAX_FRAME but a payload beyond the largest PMTU: too_long
    let f = big(hematite_model::MAX_FRAME - 100);
    expect(&f, |e| matches!(e, E::PayloadTooLong(n) if *n == hematite_model::MAX_FRAME - 100), DropReason::TooLong);
    let f = big(4097);
    expect(&f, |e| matches!(e, E::PayloadTooLong(4097)), DropReason::TooLong);
    // exactly 4096: accepted
    let f = big(4096);
    assert_eq!(classify(&f).reason, None);
}

#[test]
fn bad_icrc() {
    let mut f = v4(40);
    f[70] ^= 1;
    expect(&f, |e| matches!(e, E::BadIcrc { .. }), DropReason::BadIcrc);
    assert!(!classify(&f).icrc_ok);
}

#[test]
fn bad_ipv4_checksum() {
    let mut f = v4(40);
    f[14 + 8] -= 1; // TTL: masked in the ICRC, covered by the IPv4 checksum
    expect(&f, |e| matches!(e, E::BadIpv4Checksum { .. }), DropReason::BadIpv4Csum);
    let out = classify(&f);
    assert!(out.icrc_ok && !out.ipv4_csum_ok);
}

#[test]
fn tver() {
    let mut f = v4(40);
    f[43] |= 0x01;
    refix(&mut f);
    expect(&f, |e| matches!(e, E::TVer(1)), DropReason::TVer);
}

#[test]
fn unknown_opcode() {
    for op in [0x15u8, 0x1C, 0x1D, 0x2C, 0x40, 0x64 + 2, 0xA0, 0xE0] {
        let mut f = v4(40);
        f[42] = op;
        refix(&mut f);
        expect(&f, |e| matches!(e, E::UnknownOpcode(o) if *o == op), DropReason::UnknownOpcode);
    }
}

#[test]
fn opcode_length() {
    let mut f = v4(0); // avail = 12
    f[42] = 0x06; // WRITE FIRST needs 28
    refix(&mut f);
    expect(&f, |e| matches!(e, E::OpcodeLength { opcode: 6, avail: 12, need: 28 }), DropReason::Length);
    let mut f = v4(0);
    f[43] |= 0x30; // padcnt 3 with no payload bytes
    refix(&mut f);
    expect(&f, |e| matches!(e, E::OpcodeLength { opcode: 4, avail: 12, need: 15 }), DropReason::Length);
}

#[test]
fn payload_on_no_payload_opcode() {
    let mut f = v4(20); // avail = 32
    f[42] = 0x0C; // READ REQUEST: 28
    refix(&mut f);
    expect(&f, |e| matches!(e, E::PayloadOnNoPayloadOpcode { opcode: 0x0C, bytes: 4 }), DropReason::Length);
    let mut f = v4(4); // avail 16 = ACK header
    f[42] = 0x11;
    f[43] |= 0x10; // ... plus a pad count
    refix(&mut f);
    expect(&f, |e| matches!(e, E::PayloadOnNoPayloadOpcode { opcode: 0x11, .. } | E::OpcodeLength { .. }), DropReason::Length);
}

#[test]
fn drop_reason_codes() {
    for r in DropReason::ALL {
        assert_eq!(DropReason::from_code(r as u8), Some(r));
        assert_eq!(r.to_string(), r.name());
    }
    assert_eq!(DropReason::from_code(0), None);
}

/// Offsets of an untagged IPv4 frame: IP at 14, UDP at 34, BTH at 42.
const V4_UDP: usize = 34;
const V4_BTH: usize = 42;

#[test]
fn misaligned_payload() {
    // SEND ONLY with 40 payload bytes; two more bytes before the ICRC, IP and UDP lengths
    // raised to match: consistent lengths, but payload + pad is not a multiple of 4
    let mut f = v4(40);
    let e = 14 + u16::from_be_bytes([f[16], f[17]]) as usize;
    f.splice(e - 4..e - 4, [0xAB, 0xCD]);
    for i in [16, V4_UDP + 4] {
        let v = u16::from_be_bytes([f[i], f[i + 1]]) + 2;
        f[i..i + 2].copy_from_slice(&v.to_be_bytes());
    }
    refix(&mut f);
    expect(&f, |e| matches!(e, E::Misaligned { udp_len } if udp_len % 4 == 2), DropReason::Misaligned);
    // four bytes more instead: aligned, accepted (the payload is 44 bytes)
    let mut f = v4(40);
    f.splice(e - 4..e - 4, [1, 2, 3, 4]);
    for i in [16, V4_UDP + 4] {
        let v = u16::from_be_bytes([f[i], f[i + 1]]) + 4;
        f[i..i + 2].copy_from_slice(&v.to_be_bytes());
    }
    refix(&mut f);
    assert_eq!(classify(&f).reason, None);
    assert_eq!(classify(&f).rec.payload_len, 44);
}

#[test]
fn pad_only_on_the_last_packet() {
    let build = |op: u8, len: usize| {
        let p: Vec<u8> = (0..len).map(|i| i as u8).collect();
        build_frame(&rec(op, false, false, len), &p).unwrap()
    };
    // FIRST / MIDDLE of SEND and WRITE, and READ response FIRST / MIDDLE: PadCnt set -> dropped
    for op in [0x00u8, 0x01, 0x06, 0x07, 0x0D, 0x0E, 0x20, 0x21, 0x26, 0x27] {
        let mut f = build(op, 256);
        assert_eq!(classify(&f).reason, None, "op {op:#04x} without pad");
        f[V4_BTH + 1] |= 2 << 4; // PadCnt 2 (the last two payload bytes become pad)
        refix(&mut f);
        expect(&f, |e| matches!(e, E::PadNotLast { opcode, padcnt: 2 } if *opcode == op), DropReason::PadNotLast);
    }
    // LAST / ONLY packets may carry pad
    for op in [0x02u8, 0x03, 0x04, 0x08, 0x09, 0x0A, 0x0F, 0x10, 0x16, 0x17, 0x64] {
        let f = build(op, 253);
        assert_eq!(f[V4_BTH + 1] >> 4 & 3, 3, "op {op:#04x}: 253 bytes + 3 pad");
        assert_eq!(classify(&f).reason, None, "op {op:#04x}");
    }
}

#[test]
fn pkey_of_another_partition() {
    let mut f = v4(40);
    f[V4_BTH + 2..V4_BTH + 4].copy_from_slice(&0x8001u16.to_be_bytes());
    refix(&mut f);
    expect(&f, |e| matches!(e, E::PkeyMismatch(0x8001)), DropReason::BadPkey);
    // the default partition as a limited member matches the port's full-member key
    let mut f = v4(40);
    f[V4_BTH + 2..V4_BTH + 4].copy_from_slice(&0x7FFFu16.to_be_bytes());
    refix(&mut f);
    assert_eq!(classify(&f).reason, None);
    // the matching rule itself: same partition, at least one full member
    use hematite_model::rx::pkey_matches;
    assert!(pkey_matches(0xFFFF, 0xFFFF) && pkey_matches(0x7FFF, 0xFFFF) && pkey_matches(0xFFFF, 0x7FFF));
    assert!(!pkey_matches(0x7FFF, 0x7FFF), "two limited members do not communicate");
    assert!(!pkey_matches(0x8001, 0xFFFF) && !pkey_matches(0x0000, 0xFFFF));
}
