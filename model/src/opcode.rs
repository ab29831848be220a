//! BTH opcode table (ROCEV2.md §4) restricted to the set Hematite supports.
//!
//! Supported: RC 0x00-0x14, 0x16, 0x17; UC 0x20-0x2B (same layouts as RC 0x00-0x0B);
//! UD 0x64, 0x65; CNP 0x81. Everything else (RD, XRC, FLUSH 0x1C, ATOMIC WRITE 0x1D, reserved
//! 0x15, manufacturer-specific opcodes) is unknown: [`info`] returns `None`.
//!
//! Selective repeat adds three manufacturer-specific opcodes (IBTA reserves 0xC0-0xFF for them),
//! used only between QPs that agreed on it (see the module docs of `transport`): RDMA WRITE
//! MIDDLE, LAST and LAST with immediate carrying a RETH, so that every packet of a WRITE can be
//! placed on its own. [`wire_info`] knows them (building and parsing frames); [`info`], the
//! set the engine's receive and transmit paths take, does not yet.
//!
//! Extension header order after the BTH:
//! `[DETH] [RETH | AtomicETH] [AETH] [AtomicAckETH] [ImmDt | IETH]`.

/// Transport service class of an opcode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Transport {
    /// Reliable connection (0x00-0x1F).
    Rc,
    /// Unreliable connection (0x20-0x3F).
    Uc,
    /// Unreliable datagram (0x60-0x7F).
    Ud,
    /// RoCEv2 congestion notification packet (0x81).
    Cnp,
}

/// Static description of one supported opcode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpInfo {
    /// Upper-case name, e.g. `"RC_SEND_ONLY"`.
    pub name: &'static str,
    /// Bytes from BTH start to payload: BTH (12) + extension headers (CNP: + 16 reserved bytes).
    pub hdr_len: usize,
    /// Carries a RETH (16 bytes).
    pub reth: bool,
    /// Carries an AETH (4 bytes).
    pub aeth: bool,
    /// Carries an AtomicETH (28 bytes).
    pub atomic_eth: bool,
    /// Carries an AtomicAckETH (8 bytes).
    pub atomic_ack: bool,
    /// Carries ImmDt (4 bytes).
    pub imm: bool,
    /// Carries IETH (4 bytes).
    pub ieth: bool,
    /// Carries a DETH (8 bytes).
    pub deth: bool,
    /// Is the CNP (16 reserved bytes after the BTH).
    pub cnp: bool,
    /// Must carry neither payload nor pad (READ REQUEST, ACK, ATOMIC ACK, CmpSwap, FetchAdd, CNP).
    pub no_payload: bool,
    /// First packet of a message (FIRST / ONLY / single-packet operations).
    pub start: bool,
    /// Last packet of a message (LAST / ONLY / single-packet operations).
    pub end: bool,
    /// Transport class.
    pub class: Transport,
}

/// Length of the BTH.
pub const BTH_LEN: usize = 12;
/// Length of a DETH.
pub const DETH_LEN: usize = 8;
/// Length of a RETH.
pub const RETH_LEN: usize = 16;
/// Length of an AtomicETH.
pub const ATOMIC_ETH_LEN: usize = 28;
/// Length of an AETH.
pub const AETH_LEN: usize = 4;
/// Length of an AtomicAckETH.
pub const ATOMIC_ACK_ETH_LEN: usize = 8;
/// Length of ImmDt / IETH.
pub const IMM_LEN: usize = 4;
/// Reserved bytes after the BTH of a CNP.
pub const CNP_RESERVED_LEN: usize = 16;
/// Length of the ICRC.
pub const ICRC_LEN: usize = 4;

/// The CNP opcode.
pub const CNP: u8 = 0x81;

/// Every supported opcode in ascending order.
pub const SUPPORTED: [u8; 38] = [
    0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x0E,
    0x0F, 0x10, 0x11, 0x12, 0x13, 0x14, 0x16, 0x17, // RC
    0x20, 0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x27, 0x28, 0x29, 0x2A, 0x2B, // UC
    0x64, 0x65, // UD
    0x81, // CNP
];

#[derive(Clone, Copy, Default)]
struct Flags {
    reth: bool,
    aeth: bool,
    atomic_eth: bool,
    atomic_ack: bool,
    imm: bool,
    ieth: bool,
    deth: bool,
    no_payload: bool,
    start: bool,
    end: bool,
}

const fn f() -> Flags {
    Flags {
        reth: false,
        aeth: false,
        atomic_eth: false,
        atomic_ack: false,
        imm: false,
        ieth: false,
        deth: false,
        no_payload: false,
        start: false,
        end: false,
    }
}

/// RC/UC operation (low 5 bits) → (RC name, UC name, flags). UC only uses 0x00-0x0B.
fn rc_op(op: u8) -> Option<(&'static str, &'static str, Flags)> {
    let first = Flags { start: true, ..f() };
    let last = Flags { end: true, ..f() };
    let only = Flags { start: true, end: true, ..f() };
    let single_np = Flags { start: true, end: true, no_payload: true, ..f() };
    Some(match op {
        0x00 => ("RC_SEND_FIRST", "UC_SEND_FIRST", first),
        0x01 => ("RC_SEND_MIDDLE", "UC_SEND_MIDDLE", f()),
        0x02 => ("RC_SEND_LAST", "UC_SEND_LAST", last),
        0x03 => ("RC_SEND_LAST_WITH_IMMEDIATE", "UC_SEND_LAST_WITH_IMMEDIATE", Flags { imm: true, ..last }),
        0x04 => ("RC_SEND_ONLY", "UC_SEND_ONLY", only),
        0x05 => ("RC_SEND_ONLY_WITH_IMMEDIATE", "UC_SEND_ONLY_WITH_IMMEDIATE", Flags { imm: true, ..only }),
        0x06 => ("RC_RDMA_WRITE_FIRST", "UC_RDMA_WRITE_FIRST", Flags { reth: true, ..first }),
        0x07 => ("RC_RDMA_WRITE_MIDDLE", "UC_RDMA_WRITE_MIDDLE", f()),
        0x08 => ("RC_RDMA_WRITE_LAST", "UC_RDMA_WRITE_LAST", last),
        0x09 => ("RC_RDMA_WRITE_LAST_WITH_IMMEDIATE", "UC_RDMA_WRITE_LAST_WITH_IMMEDIATE", Flags { imm: true, ..last }),
        0x0A => ("RC_RDMA_WRITE_ONLY", "UC_RDMA_WRITE_ONLY", Flags { reth: true, ..only }),
        0x0B => ("RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE", "UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE", Flags { reth: true, imm: true, ..only }),
        0x0C => ("RC_RDMA_READ_REQUEST", "", Flags { reth: true, ..single_np }),
        0x0D => ("RC_RDMA_READ_RESPONSE_FIRST", "", Flags { aeth: true, ..first }),
        0x0E => ("RC_RDMA_READ_RESPONSE_MIDDLE", "", f()),
        0x0F => ("RC_RDMA_READ_RESPONSE_LAST", "", Flags { aeth: true, ..last }),
        0x10 => ("RC_RDMA_READ_RESPONSE_ONLY", "", Flags { aeth: true, ..only }),
        0x11 => ("RC_ACKNOWLEDGE", "", Flags { aeth: true, ..single_np }),
        0x12 => ("RC_ATOMIC_ACKNOWLEDGE", "", Flags { aeth: true, atomic_ack: true, ..single_np }),
        0x13 => ("RC_COMPARE_SWAP", "", Flags { atomic_eth: true, ..single_np }),
        0x14 => ("RC_FETCH_ADD", "", Flags { atomic_eth: true, ..single_np }),
        0x16 => ("RC_SEND_LAST_WITH_INVALIDATE", "", Flags { ieth: true, ..last }),
        0x17 => ("RC_SEND_ONLY_WITH_INVALIDATE", "", Flags { ieth: true, ..only }),
        _ => return None,
    })
}

fn make(name: &'static str, class: Transport, fl: Flags, cnp: bool) -> OpInfo {
    let hdr_len = BTH_LEN
        + if fl.deth { DETH_LEN } else { 0 }
        + if fl.reth { RETH_LEN } else { 0 }
        + if fl.atomic_eth { ATOMIC_ETH_LEN } else { 0 }
        + if fl.aeth { AETH_LEN } else { 0 }
        + if fl.atomic_ack { ATOMIC_ACK_ETH_LEN } else { 0 }
        + if fl.imm || fl.ieth { IMM_LEN } else { 0 }
        + if cnp { CNP_RESERVED_LEN } else { 0 };
    OpInfo {
        name,
        hdr_len,
        reth: fl.reth,
        aeth: fl.aeth,
        atomic_eth: fl.atomic_eth,
        atomic_ack: fl.atomic_ack,
        imm: fl.imm,
        ieth: fl.ieth,
        deth: fl.deth,
        cnp,
        no_payload: fl.no_payload,
        start: fl.start,
        end: fl.end,
        class,
    }
}

/// Looks up a supported opcode; `None` for every unsupported / unknown opcode.
pub fn info(op: u8) -> Option<OpInfo> {
    match op {
        0x00..=0x1F => rc_op(op).map(|(n, _, fl)| make(n, Transport::Rc, fl, false)),
        0x20..=0x2B => rc_op(op & 0x1F).map(|(_, n, fl)| make(n, Transport::Uc, fl, false)),
        0x64 => Some(make(
            "UD_SEND_ONLY",
            Transport::Ud,
            Flags { deth: true, start: true, end: true, ..f() },
            false,
        )),
        0x65 => Some(make(
            "UD_SEND_ONLY_WITH_IMMEDIATE",
            Transport::Ud,
            Flags { deth: true, imm: true, start: true, end: true, ..f() },
            false,
        )),
        CNP => Some(make(
            "CNP",
            Transport::Cnp,
            Flags { no_payload: true, start: true, end: true, ..f() },
            true,
        )),
        _ => None,
    }
}

/// Selective repeat: RDMA WRITE MIDDLE with a RETH (the packet's own target address, the
/// R_Key, the message's DMA length).
pub const SR_WRITE_MIDDLE: u8 = 0xC7;
/// Selective repeat: RDMA WRITE LAST with a RETH.
pub const SR_WRITE_LAST: u8 = 0xC8;
/// Selective repeat: RDMA WRITE LAST with a RETH and ImmDt.
pub const SR_WRITE_LAST_IMM: u8 = 0xC9;

/// One of the selective-repeat WRITE opcodes.
pub fn is_sr_write(op: u8) -> bool {
    matches!(op, SR_WRITE_MIDDLE..=SR_WRITE_LAST_IMM)
}

/// [`info`], and the selective-repeat WRITE opcodes: what frames may carry on the wire.
pub fn wire_info(op: u8) -> Option<OpInfo> {
    let reth = Flags { reth: true, ..f() };
    match op {
        SR_WRITE_MIDDLE => Some(make("HM_SR_RDMA_WRITE_MIDDLE", Transport::Rc, reth, false)),
        SR_WRITE_LAST => Some(make("HM_SR_RDMA_WRITE_LAST", Transport::Rc, Flags { end: true, ..reth }, false)),
        SR_WRITE_LAST_IMM => Some(make(
            "HM_SR_RDMA_WRITE_LAST_WITH_IMMEDIATE",
            Transport::Rc,
            Flags { end: true, imm: true, ..reth },
            false,
        )),
        _ => info(op),
    }
}

/// Pad byte count for a payload of `len` bytes: `(4 − len % 4) % 4`.
pub fn padcnt(len: usize) -> u8 {
    ((4 - len % 4) % 4) as u8
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn supported_set_exact() {
        let known: Vec<u8> = (0..=255u8).filter(|&o| info(o).is_some()).collect();
        assert_eq!(known, SUPPORTED.to_vec());
        for o in [0x15u8, 0x18, 0x1C, 0x1D, 0x1F, 0x2C, 0x2F, 0x40, 0x4A, 0x60, 0x63, 0x66, 0x80, 0x82, 0xA0, 0xE0, 0xFF] {
            assert!(info(o).is_none(), "{o:#x}");
        }
    }

    #[test]
    fn header_lengths() {
        let expect: &[(u8, usize)] = &[
            (0x00, 12), (0x01, 12), (0x02, 12), (0x03, 16), (0x04, 12), (0x05, 16),
            (0x06, 28), (0x07, 12), (0x08, 12), (0x09, 16), (0x0A, 28), (0x0B, 32),
            (0x0C, 28), (0x0D, 16), (0x0E, 12), (0x0F, 16), (0x10, 16), (0x11, 16),
            (0x12, 24), (0x13, 40), (0x14, 40), (0x16, 16), (0x17, 16),
            (0x64, 20), (0x65, 24), (0x81, 28),
        ];
        for (op, n) in [(SR_WRITE_MIDDLE, 28), (SR_WRITE_LAST, 28), (SR_WRITE_LAST_IMM, 32)] {
            let i = wire_info(op).unwrap();
            assert_eq!((i.hdr_len, i.reth, i.start), (n, true, false), "{op:#x}");
            assert!(info(op).is_none(), "not the engine's yet");
        }
        for &(op, len) in expect {
            assert_eq!(info(op).unwrap().hdr_len, len, "{op:#x}");
        }
        for op in 0x20..=0x2Bu8 {
            let uc = info(op).unwrap();
            let rc = info(op & 0x1F).unwrap();
            assert_eq!(uc.hdr_len, rc.hdr_len);
            assert_eq!(uc.class, Transport::Uc);
            assert_eq!(rc.class, Transport::Rc);
            assert!(uc.name.starts_with("UC_") && uc.name[3..] == rc.name[3..]);
            assert!(!uc.no_payload);
        }
    }

    #[test]
    fn flags() {
        let np: Vec<u8> = SUPPORTED.iter().copied().filter(|&o| info(o).unwrap().no_payload).collect();
        assert_eq!(np, vec![0x0C, 0x11, 0x12, 0x13, 0x14, 0x81]);
        let w = info(0x0B).unwrap();
        assert!(w.reth && w.imm && !w.ieth && w.start && w.end);
        let ud = info(0x65).unwrap();
        assert!(ud.deth && ud.imm && ud.class == Transport::Ud);
        let cnp = info(0x81).unwrap();
        assert!(cnp.cnp && cnp.no_payload && cnp.class == Transport::Cnp);
        let aa = info(0x12).unwrap();
        assert!(aa.aeth && aa.atomic_ack);
        assert!(info(0x17).unwrap().ieth);
        assert!(info(0x13).unwrap().atomic_eth && info(0x14).unwrap().atomic_eth);
        let mid = info(0x01).unwrap();
        assert!(!mid.start && !mid.end);
        assert!(info(0x00).unwrap().start && !info(0x00).unwrap().end);
        assert!(info(0x02).unwrap().end && !info(0x02).unwrap().start);
    }

    #[test]
    fn pad() {
        assert_eq!([0, 1, 2, 3, 4, 5].map(padcnt), [0, 3, 2, 1, 0, 3]);
    }
}
