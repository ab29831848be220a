//! The InfiniBand transport headers of a RoCEv2 packet: the base transport header (BTH) and the
//! extension headers (DETH, RETH, AtomicETH, AETH, AtomicAckETH, ImmDt, IETH).

use super::{be16, be24, be32, need, put24, HeaderKind, WireError};

/// Whether an RC opcode is a request (SEND, RDMA WRITE, RDMA READ request, the atomics,
/// SEND with invalidate) rather than a response (RDMA READ response, ACK, atomic ACK).
pub fn is_rc_request(op: u8) -> bool {
    matches!(op, 0x00..=0x0C | 0x13 | 0x14 | 0x16 | 0x17)
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

/// A big-endian field of an extension header made of whole fields.
trait BeField {
    /// Takes the field off the front of `b`.
    fn take(b: &mut &[u8]) -> Self;
}

macro_rules! be_field {
    ($($t:ty),*) => {$(
        impl BeField for $t {
            fn take(b: &mut &[u8]) -> $t {
                let (field, rest) = b.split_at(std::mem::size_of::<$t>());
                *b = rest;
                <$t>::from_be_bytes(field.try_into().unwrap())
            }
        }
    )*};
}
be_field!(u32, u64);

/// An extension header made of whole big-endian fields, in wire order: the struct, its
/// length, `parse` (errors name the header as [`HeaderKind`]`::$name`) and `write`.
macro_rules! be_header {
    ($(#[$doc:meta])* $name:ident { $($(#[$fdoc:meta])* $field:ident: $t:ty,)* }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
        pub struct $name {
            $($(#[$fdoc])* pub $field: $t,)*
        }

        impl $name {
            /// Header length.
            pub const LEN: usize = 0 $(+ std::mem::size_of::<$t>())*;
            /// Parses the header.
            pub fn parse(b: &[u8]) -> Result<($name, &[u8]), WireError> {
                need(b, Self::LEN, HeaderKind::$name)?;
                let mut rest = b;
                let h = $name { $($field: BeField::take(&mut rest),)* };
                Ok((h, rest))
            }
            /// Appends the header.
            pub fn write(&self, out: &mut Vec<u8>) {
                $(out.extend_from_slice(&self.$field.to_be_bytes());)*
            }
        }
    };
}

be_header!(
    /// RDMA extended transport header.
    Reth {
        /// Virtual address.
        va: u64,
        /// Remote key.
        rkey: u32,
        /// DMA length.
        dma_len: u32,
    }
);

be_header!(
    /// Atomic extended transport header.
    AtomicEth {
        /// Virtual address.
        va: u64,
        /// Remote key.
        rkey: u32,
        /// Swap (CmpSwap) or add (FetchAdd) data.
        swap_add: u64,
        /// Compare data.
        compare: u64,
    }
);

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

be_header!(
    /// Atomic acknowledge extended transport header.
    AtomicAckEth {
        /// Original remote data.
        orig: u64,
    }
);

be_header!(
    /// Immediate data.
    ImmDt {
        /// Immediate data (network order value).
        imm: u32,
    }
);

be_header!(
    /// Invalidate extended transport header.
    Ieth {
        /// R_Key to invalidate.
        rkey: u32,
    }
);
