//! The C structures the Rust core touches: libibverbs' public fast-path structures (the
//! offsets are asserted here and, against the real header, in shim.c) and the flat structures
//! of `shim.h`.

use std::mem::{offset_of, size_of};

#[repr(C)]
pub struct IbvSge {
    pub addr: u64,
    pub length: u32,
    pub lkey: u32,
}

/// `struct ibv_send_wr` up to its `wr` union (the fields after it are never read).
#[repr(C)]
pub struct IbvSendWr {
    pub wr_id: u64,
    pub next: *mut IbvSendWr,
    pub sg_list: *mut IbvSge,
    pub num_sge: i32,
    pub opcode: u32,
    pub send_flags: u32,
    /// `imm_data` (big-endian) or `invalidate_rkey`.
    pub imm: u32,
    /// `wr.rdma`: remote_addr, rkey. `wr.atomic`: remote_addr, compare_add, swap, rkey.
    pub wr: [u64; 4],
}

#[repr(C)]
pub struct IbvRecvWr {
    pub wr_id: u64,
    pub next: *mut IbvRecvWr,
    pub sg_list: *mut IbvSge,
    pub num_sge: i32,
}

#[repr(C)]
pub struct IbvWc {
    pub wr_id: u64,
    pub status: u32,
    pub opcode: u32,
    pub vendor_err: u32,
    pub byte_len: u32,
    /// `imm_data` (big-endian) or `invalidated_rkey`.
    pub imm: u32,
    pub qp_num: u32,
    pub src_qp: u32,
    pub wc_flags: u32,
    pub pkey_index: u16,
    pub slid: u16,
    pub sl: u8,
    pub dlid_path_bits: u8,
    pub _pad: [u8; 2],
}

const _: () = {
    assert!(size_of::<IbvSge>() == 16 && offset_of!(IbvSge, lkey) == 12);
    assert!(offset_of!(IbvSendWr, next) == 8 && offset_of!(IbvSendWr, sg_list) == 16);
    assert!(offset_of!(IbvSendWr, num_sge) == 24 && offset_of!(IbvSendWr, opcode) == 28);
    assert!(offset_of!(IbvSendWr, send_flags) == 32 && offset_of!(IbvSendWr, imm) == 36);
    assert!(offset_of!(IbvSendWr, wr) == 40);
    assert!(offset_of!(IbvRecvWr, num_sge) == 24);
    assert!(size_of::<IbvWc>() == 48 && offset_of!(IbvWc, wc_flags) == 36 && offset_of!(IbvWc, dlid_path_bits) == 45);
    assert!(size_of::<HmDevAttr>() == 96 && size_of::<HmPortAttr>() == 48);
    assert!(size_of::<HmQpCaps>() == 24 && size_of::<HmQpAttr>() == 96);
};

// enum ibv_wr_opcode
pub const IBV_WR_RDMA_WRITE: u32 = 0;
pub const IBV_WR_RDMA_WRITE_WITH_IMM: u32 = 1;
pub const IBV_WR_SEND: u32 = 2;
pub const IBV_WR_SEND_WITH_IMM: u32 = 3;
pub const IBV_WR_RDMA_READ: u32 = 4;
pub const IBV_WR_ATOMIC_CMP_AND_SWP: u32 = 5;
pub const IBV_WR_ATOMIC_FETCH_AND_ADD: u32 = 6;
pub const IBV_WR_SEND_WITH_INV: u32 = 9;
// enum ibv_send_flags
pub const IBV_SEND_FENCE: u32 = 1;
pub const IBV_SEND_SIGNALED: u32 = 2;
pub const IBV_SEND_SOLICITED: u32 = 4;
pub const IBV_SEND_INLINE: u32 = 8;
// enum ibv_wc_opcode, ibv_wc_flags
pub const IBV_WC_SEND: u32 = 0;
pub const IBV_WC_RDMA_WRITE: u32 = 1;
pub const IBV_WC_RDMA_READ: u32 = 2;
pub const IBV_WC_COMP_SWAP: u32 = 3;
pub const IBV_WC_FETCH_ADD: u32 = 4;
pub const IBV_WC_RECV: u32 = 128;
pub const IBV_WC_RECV_RDMA_WITH_IMM: u32 = 129;
pub const IBV_WC_WITH_IMM: u32 = 2;
pub const IBV_WC_WITH_INV: u32 = 8;
// enum ibv_wc_status
pub const IBV_WC_SUCCESS: u32 = 0;
pub const IBV_WC_LOC_LEN_ERR: u32 = 1;
pub const IBV_WC_LOC_QP_OP_ERR: u32 = 2;
pub const IBV_WC_LOC_PROT_ERR: u32 = 4;
pub const IBV_WC_WR_FLUSH_ERR: u32 = 5;
pub const IBV_WC_REM_INV_REQ_ERR: u32 = 9;
pub const IBV_WC_REM_ACCESS_ERR: u32 = 10;
pub const IBV_WC_REM_OP_ERR: u32 = 11;
pub const IBV_WC_RETRY_EXC_ERR: u32 = 12;
pub const IBV_WC_RNR_RETRY_EXC_ERR: u32 = 13;
pub const IBV_WC_GENERAL_ERR: u32 = 21;
// enum ibv_event_type
pub const IBV_EVENT_CQ_ERR: u32 = 0;
pub const IBV_EVENT_QP_FATAL: u32 = 1;
pub const IBV_EVENT_PORT_ACTIVE: u32 = 9;
pub const IBV_EVENT_PORT_ERR: u32 = 10;
pub const IBV_EVENT_DEVICE_FATAL: u32 = 8;

// The flat structures of shim.h (HmDevAttr, HmPortAttr, HmQpCaps, HmQpAttr), generated from
// it by build.rs; the sizes are asserted above and, in shim.c, against the same header.
include!(concat!(env!("OUT_DIR"), "/shim_structs.rs"));
