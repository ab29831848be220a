//! A fully parsed, accepted RoCEv2 frame ([`Packet`]): its serialisation and the header record
//! the receive path reports for it.

use super::{mac_to_u64, Aeth, AtomicAckEth, AtomicEth, Bth, Deth, Eth, Ieth, ImmDt, Ip, Reth, Udp};
use crate::icrc;
use crate::opcode;
use crate::record::HdrRecord;

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
