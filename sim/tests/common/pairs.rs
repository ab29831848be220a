//! Two engines back to back with QP pairs i <-> i (QPNs 2, 3, ...) and one region per host,
//! for the tests of many QPs (next_turn, sq_doorbells).
use hematite_model::transport::mem::MrAccess;
use hematite_model::transport::{QpConfig, WcStatus};
use hematite_sim::dma::MemCfg;
use hematite_sim::duo::{DuoBench, WireFaults};
use std::collections::BTreeMap;

/// Each host's region: [BUF, BUF + LEN), every right.
pub const BUF: u64 = 0x10_0000;
pub const LEN: u64 = 0x40_0000;
/// Where the tests' WRITEs land in host 1's region.
pub const DST: u64 = BUF + 0x10_0000;

/// The QPN of pair `k`.
pub fn qpn(k: u32) -> u32 {
    2 + k
}

/// `qps` pairs (PMTU 1024, timeout 3) over `faults`, host memory `mem`; host 0's region holds
/// `data(i)` at byte i of its first 512 KiB. Returns the bench, host 0's lkey and host 1's rkey.
pub fn bench(mem: MemCfg, faults: WireFaults, qps: u32, data: impl Fn(u64) -> u8) -> (DuoBench, u32, u32) {
    let mut d = DuoBench::new(mem, faults).unwrap();
    let bytes: Vec<u8> = (0..0x8_0000u64).map(data).collect();
    d.h[0].fill(BUF, &bytes);
    let k0 = d.h[0].reg_mr(1, BUF, LEN, MrAccess::ALL).unwrap().lkey;
    let k1 = d.h[1].reg_mr(1, BUF, LEN, MrAccess::ALL).unwrap().rkey;
    let cfg = QpConfig { pmtu: 1024, timeout: 3, ..QpConfig::default() };
    for q in 0..qps {
        d.connect(qpn(q), qpn(q), cfg, 0).unwrap();
    }
    (d, k0, k1)
}

/// Host 0's CQEs by QP: (wr_id, status) in completion order.
pub fn by_qp(d: &DuoBench) -> BTreeMap<u32, Vec<(u64, WcStatus)>> {
    let mut m: BTreeMap<u32, Vec<(u64, WcStatus)>> = BTreeMap::new();
    for c in &d.h[0].cqes {
        m.entry(c.cqe.qpn).or_default().push((c.cqe.wr_id, c.cqe.status));
    }
    m
}
