//! The InfiniBand transport headers of a RoCEv2 packet: the base transport header (BTH) and the
//! extension headers (DETH, RETH, AtomicETH, AETH, AtomicAckETH, ImmDt, IETH).

use super::{be16, be24, be32, be64, need, put24, HeaderKind, WireError};

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
