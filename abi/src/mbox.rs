//! The mailbox command protocol: header words, opcodes and status codes (see docs/firmware.md
//! for every opcode's input and output words).

/// Command header (CMD_IN word 0): opcode [15:0], in_words [23:16], token [31:24].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Opcode (`OP_*`).
    pub opcode: u16,
    /// Words following word 0.
    pub in_words: u8,
    /// Echoed in the answer.
    pub token: u8,
}

impl Header {
    /// Splits word 0 of a command.
    pub const fn parse(w: u32) -> Header {
        Header { opcode: w as u16, in_words: (w >> 16) as u8, token: (w >> 24) as u8 }
    }
    /// Builds word 0 of a command.
    pub const fn word(opcode: u16, in_words: u8, token: u8) -> u32 {
        opcode as u32 | (in_words as u32) << 16 | (token as u32) << 24
    }
}

/// Answer word 0: status [7:0], out_words [15:8], reserved [23:16] (0), token [31:24].
pub const fn answer_word(status: u8, out_words: u8, token: u8) -> u32 {
    status as u32 | (out_words as u32) << 8 | (token as u32) << 24
}

/// Most words that may follow the header (CMD_IN / CMD_OUT are 64 words).
pub const MAX_ARGS: usize = 63;

/// DCQCN parameters carried by SET_CC_PARAMS and GET_CC_PARAMS, one word each (their order,
/// defaults and ranges: `hematite_firmware::cc::CC_TABLE`, docs/firmware.md).
pub const CC_PARAMS: usize = 19;

// Opcodes.
pub const OP_QUERY_DEVICE: u16 = 0x01;
pub const OP_QUERY_PORT: u16 = 0x02;
pub const OP_QUERY_COUNTERS: u16 = 0x03;
pub const OP_SET_GID: u16 = 0x04;
pub const OP_SET_EQ: u16 = 0x05;
pub const OP_QUERY_RESOURCES: u16 = 0x06;
/// The version handshake (crate::version): no input; answers the firmware's mailbox protocol
/// version, the interface version it was built for and the one the engine reports. Its format
/// never changes, and the firmware answers it even when it refuses everything else.
pub const OP_QUERY_ABI: u16 = 0x07;
pub const OP_ALLOC_PD: u16 = 0x10;
pub const OP_DEALLOC_PD: u16 = 0x11;
pub const OP_REG_MR: u16 = 0x20;
pub const OP_DEREG_MR: u16 = 0x21;
/// Changes a registered MR in place (PD, iova, length, access): its keys stay (mailbox 2.1).
pub const OP_REREG_MR: u16 = 0x22;
pub const OP_CREATE_CQ: u16 = 0x30;
pub const OP_DESTROY_CQ: u16 = 0x31;
pub const OP_QUERY_CQ: u16 = 0x32;
pub const OP_CREATE_QP: u16 = 0x40;
pub const OP_MODIFY_QP: u16 = 0x41;
pub const OP_QUERY_QP: u16 = 0x42;
pub const OP_DESTROY_QP: u16 = 0x43;
pub const OP_SET_CC_PARAMS: u16 = 0x50;
pub const OP_GET_CC_PARAMS: u16 = 0x51;

/// Every opcode with its exact number of input words.
pub const OPCODES: [(u16, u8); 21] = [
    (OP_QUERY_DEVICE, 0),
    (OP_QUERY_ABI, 0),
    (OP_QUERY_PORT, 1),
    (OP_QUERY_COUNTERS, 0),
    (OP_QUERY_RESOURCES, 0),
    (OP_SET_GID, 7),
    (OP_ALLOC_PD, 0),
    (OP_SET_EQ, 2),
    (OP_DEALLOC_PD, 1),
    (OP_REG_MR, 6),
    (OP_DEREG_MR, 1),
    (OP_REREG_MR, 7),
    (OP_CREATE_CQ, 4),
    (OP_DESTROY_CQ, 1),
    (OP_QUERY_CQ, 1),
    (OP_CREATE_QP, 17),
    (OP_MODIFY_QP, 2 + crate::qp::ATTR_WORDS as u8),
    (OP_QUERY_QP, 1),
    (OP_DESTROY_QP, 1),
    (OP_SET_CC_PARAMS, 1 + CC_PARAMS as u8),
    (OP_GET_CC_PARAMS, 0),
];

/// Input words of `opcode`, or None for an unknown opcode.
pub fn in_words(opcode: u16) -> Option<u8> {
    OPCODES.iter().find(|o| o.0 == opcode).map(|o| o.1)
}

/// Answer status codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Status {
    Ok = 0,
    BadOpcode = 1,
    BadLength = 2,
    BadParam = 3,
    BadState = 4,
    NoResources = 5,
    BadHandle = 6,
    InUse = 7,
    BadAttrMask = 8,
    NotSupported = 9,
    HwError = 10,
    /// The engine's interface version is not one the firmware was built for (QUERY_ABI tells
    /// which); every command but QUERY_ABI gets this answer.
    AbiMismatch = 11,
}

/// Number of status codes (0..=11).
pub const N_STATUS: usize = 12;

/// Status codes QUERY_COUNTERS counts answers of: 0..=10, one word each after the command count
/// (words 1..=11; word 12 is the engine's counter count). ABI_MISMATCH answers are not counted:
/// while they are given, QUERY_COUNTERS itself is refused.
pub const COUNTED_STATUS: usize = 11;

/// The status codes by name, indexed by code (docs/firmware.md).
pub const STATUS_NAMES: [&str; N_STATUS] = [
    "OK", "BAD_OPCODE", "BAD_LENGTH", "BAD_PARAM", "BAD_STATE", "NO_RESOURCES", "BAD_HANDLE", "IN_USE",
    "BAD_ATTR_MASK", "NOT_SUPPORTED", "HW_ERROR", "ABI_MISMATCH",
];
