//! Proptest strategies (cargo feature `proptest`).
//!
//! [`hdr_record`] generates random valid TX inputs: a [`HdrRecord`] plus payload that
//! [`crate::build_frame`] accepts, over every supported opcode, IPv4 / IPv6, with and without a
//! VLAN tag. All fields are random within their widths, including the fields the builder ignores
//! (computed fields, extension fields the opcode does not carry), so consumers also check that
//! they are ignored; `payload_len` always equals `payload.len()`.

use crate::opcode;
use crate::record::HdrRecord;
use proptest::prelude::*;

/// Payload length distribution: mostly small, sometimes up to one 4096-byte PMTU.
fn payload_len() -> impl Strategy<Value = usize> {
    prop_oneof![
        6 => 0usize..=64,
        3 => 65usize..=1024,
        1 => 1025usize..=4096,
    ]
}

/// Random header fields (everything except opcode, payload geometry).
fn fields() -> impl Strategy<Value = HdrRecord> {
    (
        proptest::collection::vec(any::<u64>(), 16),
        any::<u128>(),
        any::<u128>(),
        any::<[bool; 10]>(),
    )
        .prop_map(|(w, src, dst, b)| {
            let ipv6 = b[0];
            HdrRecord {
                eth_dst: w[0] & 0xFFFF_FFFF_FFFF,
                eth_src: w[1] & 0xFFFF_FFFF_FFFF,
                vlan_valid: b[1],
                vlan_pcp: (w[2] & 7) as u8,
                vlan_dei: b[2],
                vlan_vid: (w[2] >> 8) as u16 & 0xFFF,
                ipv6,
                ip_src: if ipv6 { src } else { src & 0xFFFF_FFFF },
                ip_dst: if ipv6 { dst } else { dst & 0xFFFF_FFFF },
                dscp: (w[3] & 0x3F) as u8,
                ecn: (w[3] >> 8) as u8 & 3,
                ttl: (w[3] >> 16) as u8,
                ip_id: (w[3] >> 24) as u16,
                ip_df: b[3],
                flow_label: (w[3] >> 40) as u32 & 0xF_FFFF,
                udp_sport: w[4] as u16,
                udp_dport: (w[4] >> 16) as u16,
                udp_len: (w[4] >> 32) as u16,
                udp_csum: (w[4] >> 48) as u16,
                opcode: 0,
                se: b[4],
                migreq: b[5],
                padcnt: (w[5] & 3) as u8,
                tver: (w[5] >> 8) as u8 & 0xF,
                pkey: (w[5] >> 16) as u16,
                fecn: b[6],
                becn: b[7],
                resv6: (w[5] >> 32) as u8 & 0x3F,
                dest_qp: (w[6] & 0xFF_FFFF) as u32,
                ackreq: b[8],
                resv7: (w[6] >> 24) as u8 & 0x7F,
                psn: (w[6] >> 32) as u32 & 0xFF_FFFF,
                va: w[7],
                rkey: w[8] as u32,
                dma_len: (w[8] >> 32) as u32,
                swap_add: w[9],
                compare: w[10],
                syndrome: w[11] as u8,
                msn: (w[11] >> 8) as u32 & 0xFF_FFFF,
                atomic_orig: w[12],
                imm: w[13] as u32,
                qkey: (w[13] >> 32) as u32,
                src_qp: (w[14] & 0xFF_FFFF) as u32,
                payload_off: (w[14] >> 32) as u16,
                payload_len: 0,
            }
        })
}

/// Random valid TX input: `(record, payload)` with `record.payload_len == payload.len()`,
/// an opcode from [`opcode::SUPPORTED`], no payload for no-payload opcodes, no pad on packets
/// that do not end a message, and a P_Key of the port's partition (the last two are receive
/// checks: `DropReason::PadNotLast`, `DropReason::BadPkey`).
pub fn hdr_record() -> impl Strategy<Value = (HdrRecord, Vec<u8>)> {
    (proptest::sample::select(opcode::SUPPORTED.to_vec()), fields())
        .prop_flat_map(|(op, rec)| {
            let np = opcode::info(op).is_some_and(|i| i.no_payload);
            let len = if np { Just(0usize).boxed() } else { payload_len().boxed() };
            (Just(op), Just(rec), len.prop_flat_map(|n| proptest::collection::vec(any::<u8>(), n)))
        })
        .prop_map(|(op, mut rec, mut payload)| {
            rec.opcode = op;
            // A packet that does not end its message carries no pad: its payload is a whole
            // number of 4-byte words (on the wire: exactly one PMTU).
            if opcode::info(op).is_some_and(|i| !i.end) {
                payload.truncate(payload.len() & !3);
            }
            // the port's partition (PORT_PKEY 0xFFFF), as full or limited member
            rec.pkey = 0x7FFF | (rec.pkey & 0x8000);
            rec.payload_len = payload.len() as u16;
            (rec, payload)
        })
}
