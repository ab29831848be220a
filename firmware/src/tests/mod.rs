//! Host tests: a mock engine control bus, every opcode's success path, the QP transition
//! matrix, ranges, exhaustion and churn, malformed commands (proptest), and the encoder
//! cross-check against hematite-model.
use crate::desc::{self, CTX_WORDS};
use crate::regs;
use crate::hw::Bus;
use crate::mbox::*;
use crate::qp::*;
use crate::Firmware;
use std::collections::HashMap;

mod encoders;
mod matrix;
mod ops;

/// One control-bus table write as the engine saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CtlWrite {
    pub table: u8,
    pub flags: u8,
    pub index: u16,
    pub words: [u32; CTX_WORDS],
}

/// Emulates the engine's control bus: staging window, command register, status register.
#[derive(Debug, Default)]
pub struct MockBus {
    stage: [u32; CTX_WORDS],
    busy_left: u32,
    status: u8,
    /// Status polls that answer busy after each command.
    pub busy_polls: u32,
    /// If set, the next command answers this status (and is not applied).
    pub fail_next: Option<u8>,
    /// Every applied write, in order.
    pub log: Vec<CtlWrite>,
    /// Current table contents.
    pub tables: HashMap<(u8, u16), [u32; CTX_WORDS]>,
    /// Writes of HM_CTL_EQ and HM_CTL_POST (register, value), in order.
    pub regs: Vec<(u16, u32)>,
    /// The CC registers (HM_CTL_CC), as last written (None: never written).
    pub cc: [Option<u32>; 16],
}

impl Bus for MockBus {
    fn read32(&mut self, addr: u32) -> u32 {
        let cnt = u32::from(regs::HM_CTL_CNT);
        if addr >= cnt && addr < cnt + 4 * 64 {
            return 0xC000 + (addr - cnt) / 4; // engine counter i reads 0xC000 + i
        }
        assert_eq!(addr, u32::from(regs::HM_CTL_STATUS), "firmware read an unexpected register");
        if self.busy_left > 0 {
            self.busy_left -= 1;
            return 1 << 31 | u32::from(self.status);
        }
        u32::from(self.status)
    }
    fn write32(&mut self, addr: u32, v: u32) {
        let stage = u32::from(regs::HM_CTL_STAGE);
        if addr >= stage && addr < stage + 4 * CTX_WORDS as u32 {
            assert_eq!(addr % 4, 0);
            self.stage[((addr - stage) / 4) as usize] = v;
        } else if addr == u32::from(regs::HM_CTL_CMD) {
            let (op, table, flags, index) = hematite_model::desc::decode_ctl_cmd(v);
            assert_eq!(op, desc::HM_CTL_OP_WRITE);
            self.busy_left = self.busy_polls;
            if let Some(st) = self.fail_next.take() {
                self.status = st;
                return;
            }
            self.status = desc::HM_CTL_ST_OK;
            // the engine takes the entry's struct from the low bits of the stage: the words
            // above it (left from earlier writes of larger entries) are not part of the entry
            let n = match table {
                desc::HM_CTL_TBL_QP => desc::QP_WORDS,
                desc::HM_CTL_TBL_CQ => desc::CQ_WORDS,
                desc::HM_CTL_TBL_MR => desc::MR_WORDS,
                t => panic!("write to unknown table {t}"),
            };
            let mut words = [0u32; CTX_WORDS];
            words[..n].copy_from_slice(&self.stage[..n]);
            self.log.push(CtlWrite { table, flags, index, words });
            self.tables.insert((table, index), words);
        } else if addr >= u32::from(regs::HM_CTL_CC) && addr < u32::from(regs::HM_CTL_CC) + 4 * u32::from(regs::HM_CTL_CC_WORDS) {
            assert_eq!(addr % 4, 0);
            self.cc[((addr - u32::from(regs::HM_CTL_CC)) / 4) as usize] = Some(v);
        } else if addr == u32::from(regs::HM_CTL_EQ) || addr == u32::from(regs::HM_CTL_POST) {
            self.busy_left = self.busy_polls;
            self.regs.push((addr as u16, v));
        } else {
            panic!("firmware wrote unexpected register {addr:#x}");
        }
    }
}

/// CAPS: 2^6 QPs, 2^6 CQs, datapath 64 bytes, 32 counters.
pub const CAPS: u32 = 6 << 24 | 6 << 16 | 8 << 8 | 32;

pub fn fw() -> Firmware<MockBus> {
    fw_caps(CAPS, 12)
}

pub fn fw_caps(caps: u32, mr_log: u32) -> Firmware<MockBus> {
    let mut f = Firmware::new(MockBus { busy_polls: 2, ..Default::default() });
    f.init(caps, mr_log, crate::version::INTERFACE);
    f
}

/// Sends a command; returns (status, outputs).
pub fn cmd(f: &mut Firmware<MockBus>, op: u16, args: &[u32]) -> (u8, Vec<u32>) {
    let mut c = vec![Header::word(op, args.len() as u8, 0x5A)];
    c.extend_from_slice(args);
    let mut out = [0u32; 64];
    let n = f.handle(&c, &mut out);
    let h = out[0];
    assert_eq!(h >> 24, 0x5A, "token echoed");
    assert_eq!((h >> 16) & 0xFF, 0, "reserved answer bits");
    let k = ((h >> 8) & 0xFF) as usize;
    assert_eq!(n, 1 + k);
    assert!(out[1 + k..].iter().all(|&w| w == 0));
    (h as u8, out[1..1 + k].to_vec())
}

pub fn ok(f: &mut Firmware<MockBus>, op: u16, args: &[u32]) -> Vec<u32> {
    let (st, o) = cmd(f, op, args);
    assert_eq!(st, 0, "opcode {op:#x} args {args:?}");
    o
}

/// A snapshot of everything a failing command must leave alone.
pub fn snap(f: &Firmware<MockBus>) -> (crate::res::Tables, crate::cc::CcParams, usize) {
    (f.t.clone(), f.cc, f.eng.bus.log.len())
}

pub const SGID_V4: [u32; 4] = [0, 0, 0xFFFF, 0x0A00_0001];
pub const DGID_V4: [u32; 4] = [0, 0, 0xFFFF, 0x0A00_0002];

/// PD, CQ and an RC QP in RESET; the GID table entry 0 set. Returns (pd, cqn, qpn).
pub fn setup_qp(f: &mut Firmware<MockBus>) -> (u32, u32, u32) {
    ok(f, OP_SET_GID, &[0, SGID_V4[0], SGID_V4[1], SGID_V4[2], SGID_V4[3], 0x2233_4455, 0x0011]);
    let pd = ok(f, OP_ALLOC_PD, &[])[0];
    let cq = ok(f, OP_CREATE_CQ, &[8, 0x10_0000, 0, 0])[0];
    let qp = ok(f, OP_CREATE_QP, &create_qp_args(pd, cq))[0];
    (pd, cq, qp)
}

pub fn create_qp_args(pd: u32, cq: u32) -> Vec<u32> {
    vec![pd, cq, cq, 2, 0x20_0000, 0, 0x30_0000, 0, 7, 1, 7, 0, 128, 128, 2, 2, 64]
}

/// An attribute block with valid values for every attribute.
pub fn attrs(state: QpState) -> [u32; ATTR_WORDS] {
    let mut v = [0u32; ATTR_WORDS];
    v[A_QP_STATE] = state as u32;
    v[A_ACCESS_FLAGS] = 0xE;
    v[A_PKEY_INDEX] = 0;
    v[A_PORT_NUM] = 1;
    v[A_PATH_MTU] = 5;
    v[A_TIMEOUT] = 14;
    v[A_RETRY_CNT] = 7;
    v[A_RNR_RETRY] = 7;
    v[A_RQ_PSN] = 0x123456;
    v[A_SQ_PSN] = 0x654321;
    v[A_MAX_RD_ATOMIC] = 4;
    v[A_MAX_DEST_RD_ATOMIC] = 4;
    v[A_MIN_RNR_TIMER] = 12;
    v[A_DEST_QPN] = 0x77;
    v[A_SGID_INDEX] = 0;
    v[A_DGID..A_DGID + 4].copy_from_slice(&DGID_V4);
    v[A_DMAC_LO] = 0x6677_8899;
    v[A_DMAC_HI] = 0xAABB;
    v[A_HOP_LIMIT] = 64;
    v[A_TRAFFIC_CLASS] = 106;
    v[A_FLOW_LABEL] = 0x12345;
    v[A_UDP_SPORT] = 0;
    v
}

pub fn modify(f: &mut Firmware<MockBus>, qpn: u32, mask: u32, a: &[u32; ATTR_WORDS]) -> u8 {
    let mut args = vec![qpn, mask];
    args.extend_from_slice(a);
    cmd(f, OP_MODIFY_QP, &args).0
}

/// Drives QP `qpn` from RESET to `to` through legal transitions.
pub fn drive(f: &mut Firmware<MockBus>, qpn: u32, to: QpState) {
    use QpState::*;
    let path: &[(QpState, u32)] = match to {
        Reset => &[],
        Init => &[(Init, INIT_MASK)],
        Rtr => &[(Init, INIT_MASK), (Rtr, RTR_MASK)],
        Rts => &[(Init, INIT_MASK), (Rtr, RTR_MASK), (Rts, RTS_MASK)],
        Sqd => &[(Init, INIT_MASK), (Rtr, RTR_MASK), (Rts, RTS_MASK), (Sqd, M_STATE)],
        Err => &[(Init, INIT_MASK), (Err, M_STATE)],
        Sqe => {
            // Unreachable through verbs for RC; forced for the matrix test.
            f.t.qps.get_mut(qpn as usize).unwrap().state = Sqe;
            return;
        }
    };
    for &(s, m) in path {
        assert_eq!(modify(f, qpn, m, &attrs(s)), 0, "drive to {s:?}");
    }
}

pub const INIT_MASK: u32 = M_STATE | M_PKEY_INDEX | M_PORT | M_ACCESS_FLAGS;
pub const RTR_MASK: u32 = M_STATE | M_AV | M_PATH_MTU | M_DEST_QPN | M_RQ_PSN | M_MAX_DEST_RD_ATOMIC | M_MIN_RNR_TIMER;
pub const RTS_MASK: u32 = M_STATE | M_TIMEOUT | M_RETRY_CNT | M_RNR_RETRY | M_SQ_PSN | M_MAX_QP_RD_ATOMIC;
