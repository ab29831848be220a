//! The transmit-path specification: [`build_frame`] turns a [`HdrRecord`] and a payload into the
//! exact bytes the RTL must emit (Ethernet frame without FCS).
//!
//! Taken verbatim from the record: `eth_dst/src`, `vlan_valid/pcp/dei/vid` (TPID 0x8100),
//! `ipv6`, `ip_src/dst`, `dscp`, `ecn`, `ttl`, `ip_id`, `ip_df` (IPv4), `flow_label` (IPv6),
//! `udp_sport`, `udp_csum`, `opcode`, `se`, `migreq`, `pkey`, `fecn`, `becn`, `dest_qp`, `ackreq`,
//! `psn` and the extension header fields the opcode carries (`imm` goes to ImmDt or IETH; a CNP
//! gets 16 zero bytes).
//!
//! Computed: IPv4 header (IHL 5, DF per `ip_df`, MF 0, offset 0, protocol 17, total length,
//! checksum) or IPv6 header (version 6, TC = `dscp << 2 | ecn`, payload length, next header 17,
//! hop limit = `ttl`); UDP destination port 4791 and length; BTH PadCnt = `(4 − len % 4) % 4`,
//! TVer 0, Resv6 0, Resv7 0; zero pad bytes; the ICRC; zero bytes up to a 60-byte frame.
//!
//! Fields the record marks "TX: computed" (`udp_dport`, `udp_len`, `padcnt`, `tver`, `resv6`,
//! `resv7`, `payload_off`) and fields the opcode / IP version does not carry are ignored.

use crate::icrc;
use crate::opcode::{self, OpInfo};
use crate::record::HdrRecord;
use crate::wire::{
    mac_from_u64, Aeth, AtomicAckEth, AtomicEth, Bth, Deth, Eth, Ieth, ImmDt, Ip, Ipv4, Ipv6, Packet,
    Reth, Udp, Vlan,
};
use crate::{ETHERTYPE_IPV4, ETHERTYPE_IPV6, ETH_MIN_FRAME, ROCEV2_UDP_PORT};
use core::fmt;

/// Why [`build_frame`] refused a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BuildError {
    /// The opcode is not in the supported set.
    UnknownOpcode(u8),
    /// `rec.payload_len` differs from the payload slice length.
    PayloadLenMismatch {
        /// `rec.payload_len`.
        record: u16,
        /// `payload.len()`.
        actual: usize,
    },
    /// A no-payload opcode was given payload bytes.
    PayloadOnNoPayloadOpcode {
        /// Opcode.
        opcode: u8,
        /// Payload length.
        len: usize,
    },
    /// The payload does not fit in one UDP datagram / IP packet.
    PayloadTooLarge {
        /// Payload length.
        len: usize,
        /// Largest payload for this opcode and IP version.
        max: usize,
    },
    /// A field that goes on the wire has bits set above its width.
    FieldRange {
        /// Field name.
        field: &'static str,
        /// Value given.
        value: u128,
        /// Field width in bits.
        bits: u32,
    },
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::UnknownOpcode(o) => write!(f, "unsupported opcode {o:#04x}"),
            BuildError::PayloadLenMismatch { record, actual } => {
                write!(f, "record payload_len {record} but {actual} payload bytes given")
            }
            BuildError::PayloadOnNoPayloadOpcode { opcode, len } => {
                write!(f, "opcode {opcode:#04x} carries no payload, {len} bytes given")
            }
            BuildError::PayloadTooLarge { len, max } => write!(f, "payload of {len} bytes exceeds {max}"),
            BuildError::FieldRange { field, value, bits } => {
                write!(f, "field {field} = {value:#x} does not fit in {bits} bits")
            }
        }
    }
}

impl std::error::Error for BuildError {}

/// Fixed bytes around the payload for `info` and IP version: IP + UDP + hdr_len + ICRC.
fn overhead(info: &OpInfo, ipv6: bool) -> usize {
    let ip = if ipv6 { 0 } else { Ipv4::LEN }; // the IPv6 header is not counted in its length field
    ip + Udp::LEN + info.hdr_len + opcode::ICRC_LEN
}

/// Largest payload `build_frame` accepts for `opcode` over IPv4 (`ipv6 = false`) or IPv6
/// (`None` for unknown opcodes; 0 for no-payload opcodes). Pad bytes are accounted for.
pub fn max_payload(op: u8, ipv6: bool) -> Option<usize> {
    let info = opcode::wire_info(op)?;
    if info.no_payload {
        return Some(0);
    }
    let room = 65535 - overhead(&info, ipv6);
    Some(room & !3) // payload + pad must fit; the largest multiple of 4 leaves pad 0
}

fn check_width(field: &'static str, value: u128, bits: u32) -> Result<(), BuildError> {
    if bits < 128 && value >> bits != 0 {
        Err(BuildError::FieldRange { field, value, bits })
    } else {
        Ok(())
    }
}

fn validate(rec: &HdrRecord, info: &OpInfo) -> Result<(), BuildError> {
    check_width("eth_dst", rec.eth_dst as u128, 48)?;
    check_width("eth_src", rec.eth_src as u128, 48)?;
    if rec.vlan_valid {
        check_width("vlan_pcp", rec.vlan_pcp as u128, 3)?;
        check_width("vlan_vid", rec.vlan_vid as u128, 12)?;
    }
    if rec.ipv6 {
        check_width("flow_label", rec.flow_label as u128, 20)?;
    } else {
        check_width("ip_src", rec.ip_src, 32)?;
        check_width("ip_dst", rec.ip_dst, 32)?;
    }
    check_width("dscp", rec.dscp as u128, 6)?;
    check_width("ecn", rec.ecn as u128, 2)?;
    check_width("dest_qp", rec.dest_qp as u128, 24)?;
    check_width("psn", rec.psn as u128, 24)?;
    if info.aeth {
        check_width("msn", rec.msn as u128, 24)?;
    }
    if info.deth {
        check_width("src_qp", rec.src_qp as u128, 24)?;
    }
    Ok(())
}

/// What the receive path decodes from `build_frame(rec, payload)` (for a record that builds):
/// `rec` with the computed fields filled in (`udp_dport` 4791, `udp_len`, `padcnt`, `tver`,
/// `resv6`, `resv7` 0, `payload_off`), the fields the opcode does not carry zeroed, the VLAN
/// fields zeroed without a tag, `flow_label` zeroed for IPv4 and `ip_id` / `ip_df` for IPv6.
/// Fields are also masked to their widths. For an unknown opcode no extension fields are kept
/// and the geometry assumes a bare BTH.
pub fn normalize_for_tx(rec: &HdrRecord) -> HdrRecord {
    let info = opcode::wire_info(rec.opcode);
    let mut n = HdrRecord {
        eth_dst: rec.eth_dst & 0xFFFF_FFFF_FFFF,
        eth_src: rec.eth_src & 0xFFFF_FFFF_FFFF,
        ipv6: rec.ipv6,
        dscp: rec.dscp & 0x3F,
        ecn: rec.ecn & 3,
        ttl: rec.ttl,
        udp_sport: rec.udp_sport,
        udp_dport: ROCEV2_UDP_PORT,
        udp_csum: rec.udp_csum,
        opcode: rec.opcode,
        se: rec.se,
        migreq: rec.migreq,
        pkey: rec.pkey,
        fecn: rec.fecn,
        becn: rec.becn,
        dest_qp: rec.dest_qp & 0xFF_FFFF,
        ackreq: rec.ackreq,
        psn: rec.psn & 0xFF_FFFF,
        payload_len: rec.payload_len,
        ..HdrRecord::default()
    };
    if rec.vlan_valid {
        n.vlan_valid = true;
        n.vlan_pcp = rec.vlan_pcp & 7;
        n.vlan_dei = rec.vlan_dei;
        n.vlan_vid = rec.vlan_vid & 0xFFF;
    }
    if rec.ipv6 {
        n.ip_src = rec.ip_src;
        n.ip_dst = rec.ip_dst;
        n.flow_label = rec.flow_label & 0xF_FFFF;
    } else {
        n.ip_src = rec.ip_src & 0xFFFF_FFFF;
        n.ip_dst = rec.ip_dst & 0xFFFF_FFFF;
        n.ip_id = rec.ip_id;
        n.ip_df = rec.ip_df;
    }
    let hdr_len = info.map_or(opcode::BTH_LEN, |i| i.hdr_len);
    if let Some(i) = info {
        if i.deth {
            n.qkey = rec.qkey;
            n.src_qp = rec.src_qp & 0xFF_FFFF;
        }
        if i.reth {
            n.va = rec.va;
            n.rkey = rec.rkey;
            n.dma_len = rec.dma_len;
        }
        if i.atomic_eth {
            n.va = rec.va;
            n.rkey = rec.rkey;
            n.swap_add = rec.swap_add;
            n.compare = rec.compare;
        }
        if i.aeth {
            n.syndrome = rec.syndrome;
            n.msn = rec.msn & 0xFF_FFFF;
        }
        if i.atomic_ack {
            n.atomic_orig = rec.atomic_orig;
        }
        if i.imm || i.ieth {
            n.imm = rec.imm;
        }
    }
    let len = rec.payload_len as usize;
    n.padcnt = opcode::padcnt(len);
    let udp_len = Udp::LEN + hdr_len + len + n.padcnt as usize + opcode::ICRC_LEN;
    n.udp_len = udp_len.min(u16::MAX as usize) as u16;
    let l3off = if rec.vlan_valid { 18 } else { 14 };
    let iphdr = if rec.ipv6 { Ipv6::LEN } else { Ipv4::LEN };
    n.payload_off = (l3off + iphdr + Udp::LEN + hdr_len) as u16;
    n
}

/// Builds the Ethernet frame (without FCS) for `rec` and `payload`; see the module docs for
/// which fields are verbatim and which are computed.
///
/// Errors: unknown opcode, `rec.payload_len != payload.len()`, payload on a no-payload opcode,
/// a payload too large for one datagram, or a wire field wider than its width.
pub fn build_frame(rec: &HdrRecord, payload: &[u8]) -> Result<Vec<u8>, BuildError> {
    let info = opcode::wire_info(rec.opcode).ok_or(BuildError::UnknownOpcode(rec.opcode))?;
    if payload.len() != rec.payload_len as usize {
        return Err(BuildError::PayloadLenMismatch { record: rec.payload_len, actual: payload.len() });
    }
    if info.no_payload && !payload.is_empty() {
        return Err(BuildError::PayloadOnNoPayloadOpcode { opcode: rec.opcode, len: payload.len() });
    }
    let max = max_payload(rec.opcode, rec.ipv6).unwrap_or(0);
    let padcnt = opcode::padcnt(payload.len());
    if payload.len() + padcnt as usize > 65535 - overhead(&info, rec.ipv6) {
        return Err(BuildError::PayloadTooLarge { len: payload.len(), max });
    }
    validate(rec, &info)?;

    let udp_len = (Udp::LEN + info.hdr_len + payload.len() + padcnt as usize + opcode::ICRC_LEN) as u16;
    let tc = (rec.dscp & 0x3F) << 2 | (rec.ecn & 3);
    let eth = Eth {
        dst: mac_from_u64(rec.eth_dst),
        src: mac_from_u64(rec.eth_src),
        vlan: rec.vlan_valid.then_some(Vlan { pcp: rec.vlan_pcp, dei: rec.vlan_dei, vid: rec.vlan_vid }),
        ethertype: if rec.ipv6 { ETHERTYPE_IPV6 } else { ETHERTYPE_IPV4 },
    };
    let ip = if rec.ipv6 {
        Ip::V6(Ipv6 {
            tc,
            flow_label: rec.flow_label,
            payload_len: udp_len,
            next_header: 17,
            hop_limit: rec.ttl,
            src: rec.ip_src.to_be_bytes(),
            dst: rec.ip_dst.to_be_bytes(),
        })
    } else {
        let mut h = Ipv4 {
            tos: tc,
            total_len: Ipv4::LEN as u16 + udp_len,
            id: rec.ip_id,
            flag_rsv: false,
            df: rec.ip_df,
            mf: false,
            frag_off: 0,
            ttl: rec.ttl,
            protocol: 17,
            checksum: 0,
            src: (rec.ip_src as u32).to_be_bytes(),
            dst: (rec.ip_dst as u32).to_be_bytes(),
        };
        h.checksum = h.compute_checksum();
        Ip::V4(h)
    };
    let pkt = Packet {
        eth,
        ip,
        udp: Udp { sport: rec.udp_sport, dport: ROCEV2_UDP_PORT, len: udp_len, checksum: rec.udp_csum },
        bth: Bth {
            opcode: rec.opcode,
            se: rec.se,
            migreq: rec.migreq,
            padcnt,
            tver: 0,
            pkey: rec.pkey,
            fecn: rec.fecn,
            becn: rec.becn,
            resv6: 0,
            dest_qp: rec.dest_qp,
            ackreq: rec.ackreq,
            resv7: 0,
            psn: rec.psn,
        },
        deth: info.deth.then_some(Deth { qkey: rec.qkey, resv8: 0, src_qp: rec.src_qp }),
        reth: info.reth.then_some(Reth { va: rec.va, rkey: rec.rkey, dma_len: rec.dma_len }),
        atomic_eth: info.atomic_eth.then_some(AtomicEth {
            va: rec.va,
            rkey: rec.rkey,
            swap_add: rec.swap_add,
            compare: rec.compare,
        }),
        aeth: info.aeth.then_some(Aeth { syndrome: rec.syndrome, msn: rec.msn }),
        atomic_ack: info.atomic_ack.then_some(AtomicAckEth { orig: rec.atomic_orig }),
        imm: info.imm.then_some(ImmDt { imm: rec.imm }),
        ieth: info.ieth.then_some(Ieth { rkey: rec.imm }),
        cnp_reserved: info.cnp.then_some([0u8; 16]),
        payload: payload.to_vec(),
        pad: vec![0u8; padcnt as usize],
        icrc: 0,
        eth_pad: 0,
    };
    let mut f = pkt.to_bytes();
    let l3off = pkt.l3_offset();
    let n = f.len();
    let v = icrc::icrc_masked(&f[l3off..n - opcode::ICRC_LEN], rec.ipv6);
    f[n - opcode::ICRC_LEN..].copy_from_slice(&icrc::icrc_wire_bytes(v));
    if f.len() < ETH_MIN_FRAME {
        f.resize(ETH_MIN_FRAME, 0);
    }
    Ok(f)
}
