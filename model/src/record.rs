//! The decoded header record: the Rust twin of `hm_roce_hdr_t` in `rtl/pkg/hm_pkg.sv`.
//!
//! Field names and widths here must equal the SystemVerilog struct: `hematite-sim`'s build script
//! parses the SV struct (the single source of truth for the layout) and generates the bit
//! packing code that fills this struct by field name, so a mismatch fails to compile.
//!
//! RX: every field is what the receive path decoded. TX: the fields marked "TX: computed" are
//! ignored on input and derived by the builder; everything else is put on the wire verbatim.

/// One RoCEv2 header record (L2..extension headers plus payload geometry).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HdrRecord {
    pub eth_dst: u64,        // 48 bits
    pub eth_src: u64,        // 48 bits
    pub vlan_valid: bool,
    pub vlan_pcp: u8,        // 3 bits
    pub vlan_dei: bool,
    pub vlan_vid: u16,       // 12 bits
    pub ipv6: bool,          // false: IPv4, true: IPv6
    pub ip_src: u128,        // IPv4: low 32 bits, rest zero
    pub ip_dst: u128,
    pub dscp: u8,            // 6 bits (IPv4 TOS[7:2] / IPv6 TC[7:2])
    pub ecn: u8,             // 2 bits
    pub ttl: u8,             // IPv4 TTL / IPv6 hop limit
    pub ip_id: u16,          // IPv4 identification (0 for IPv6)
    pub ip_df: bool,         // IPv4 don't-fragment flag
    pub flow_label: u32,     // 20 bits, IPv6 only
    pub udp_sport: u16,
    pub udp_dport: u16,      // TX: computed (always 4791)
    pub udp_len: u16,        // TX: computed
    pub udp_csum: u16,       // sent verbatim (0 normally; masked out of the ICRC)
    pub opcode: u8,
    pub se: bool,
    pub migreq: bool,
    pub padcnt: u8,          // 2 bits, TX: computed
    pub tver: u8,            // 4 bits, TX: always 0
    pub pkey: u16,
    pub fecn: bool,
    pub becn: bool,
    pub resv6: u8,           // 6 bits, TX: always 0
    pub dest_qp: u32,        // 24 bits
    pub ackreq: bool,
    pub resv7: u8,           // 7 bits, TX: always 0
    pub psn: u32,            // 24 bits
    pub va: u64,             // RETH / AtomicETH virtual address
    pub rkey: u32,           // RETH / AtomicETH R_Key
    pub dma_len: u32,        // RETH DMA length
    pub swap_add: u64,       // AtomicETH swap (CmpSwap) or add (FetchAdd) data
    pub compare: u64,        // AtomicETH compare data
    pub syndrome: u8,        // AETH
    pub msn: u32,            // AETH, 24 bits
    pub atomic_orig: u64,    // AtomicAckETH original remote data
    pub imm: u32,            // ImmDt, or the IETH R_Key for SEND_WITH_INVALIDATE
    pub qkey: u32,           // DETH Q_Key
    pub src_qp: u32,         // DETH source QP, 24 bits
    pub payload_off: u16,    // RX: byte offset of the payload from the frame start; TX: computed
    pub payload_len: u16,    // payload bytes (without pad); TX: input
}

/// Why the receive path dropped a frame. The discriminant is the 4-bit reason code the RTL
/// reports (`HM_RSN_*` in `hm_pkg.sv`); 0 means accepted.
///
/// When several checks fail, the reason is the first in this priority order (the order of the
/// discriminants is *not* the priority):
/// 1. `Truncated`   frame too short for the headers it announces, or shorter than the IP length says
/// 2. `NotIp`       EtherType (after an optional 802.1Q tag) not IPv4/IPv6, or IP version field disagrees
/// 3. `Ipv4OptFrag` IPv4 IHL != 5, or MF set, or fragment offset != 0
/// 4. `NotRoce`     IP protocol / next header != 17 (UDP), or UDP destination port != 4791
/// 5. `Length` (structural) IP/UDP lengths disagree, UDP too short for BTH+ICRC, or bytes after the
///    IP datagram in a frame longer than 64 bytes (only Ethernet minimum-size padding may follow)
/// 6. `BadIcrc`     ICRC mismatch
/// 7. `BadIpv4Csum` IPv4 header checksum wrong
/// 8. `TVer`        BTH TVer != 0
/// 9. `UnknownOpcode` opcode not in the supported set (RC 0x00-0x14,0x16,0x17; UC 0x20-0x2B;
///    UD 0x64,0x65; CNP 0x81)
/// 10. `Length` (opcode) UDP payload too short for the opcode's headers + pad + ICRC, or a
///    no-payload opcode (READ request, ACK, atomic ACK, atomics, CNP) with payload or pad bytes
/// 11. `Misaligned` the bytes between the last transport header and the ICRC (payload + pad)
///    are not a multiple of 4 (IBTA 9.2: packets are a whole number of 4-byte words; every
///    header is, so this is the UDP length not being a multiple of 4)
/// 12. `PadNotLast` a non-zero PadCnt on a packet that does not end its message (FIRST or
///    MIDDLE of SEND / WRITE / READ response): only the last or only packet may carry pad
/// 13. `TooLong`    a payload larger than 4096 bytes, the largest path MTU
/// 14. `BadPkey`    the BTH P_Key does not match the port's P_Key (low 15 bits differ, or both
///    are limited members)
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum DropReason {
    Truncated = 1,
    NotIp = 2,
    Ipv4OptFrag = 3,
    NotRoce = 4,
    Length = 5,
    BadIcrc = 6,
    BadIpv4Csum = 7,
    TVer = 8,
    UnknownOpcode = 9,
    /// The MAC flagged the frame as bad (FCS error, on `s_axis_tuser`). Highest priority. Never
    /// returned by [`crate::classify`], which sees only the frame bytes.
    MacError = 10,
    Misaligned = 11,
    PadNotLast = 12,
    TooLong = 13,
    BadPkey = 14,
}

impl DropReason {
    pub const ALL: [DropReason; 14] = [
        DropReason::Truncated,
        DropReason::NotIp,
        DropReason::Ipv4OptFrag,
        DropReason::NotRoce,
        DropReason::Length,
        DropReason::BadIcrc,
        DropReason::BadIpv4Csum,
        DropReason::TVer,
        DropReason::UnknownOpcode,
        DropReason::MacError,
        DropReason::Misaligned,
        DropReason::PadNotLast,
        DropReason::TooLong,
        DropReason::BadPkey,
    ];
    /// Short lowercase name used by tools and counters.
    pub fn name(self) -> &'static str {
        match self {
            DropReason::Truncated => "truncated",
            DropReason::NotIp => "not_ip",
            DropReason::Ipv4OptFrag => "ipv4_opt_frag",
            DropReason::NotRoce => "not_roce",
            DropReason::Length => "length",
            DropReason::BadIcrc => "bad_icrc",
            DropReason::BadIpv4Csum => "bad_ipv4_csum",
            DropReason::TVer => "tver",
            DropReason::UnknownOpcode => "unknown_opcode",
            DropReason::MacError => "mac_error",
            DropReason::Misaligned => "misaligned",
            DropReason::PadNotLast => "pad_not_last",
            DropReason::TooLong => "too_long",
            DropReason::BadPkey => "bad_pkey",
        }
    }
    pub fn from_code(c: u8) -> Option<DropReason> {
        DropReason::ALL.iter().copied().find(|r| *r as u8 == c)
    }
}
