//! The per-QP counters (`rtl/eng/hm_qp_counters.sv`, built by sim/build.rs with 16 QPs,
//! 3 event sources, 4 counters and event FIFOs of 4) in co-simulation: [`qpc_model`] gives
//! one, held in reset for three cycles; `tick` clocks it and returns the outputs sampled
//! before the edge.

pub const QPC_QPS: usize = 16;
pub const QPC_SRC: usize = 3;
pub const QPC_CNT: usize = 4;

include!(concat!(env!("OUT_DIR"), "/shim_qpc.rs"));

/// The Verilated per-QP counters, just out of reset (the rows are then cleared, one a cycle).
pub fn qpc_model() -> HmQpcModel {
    let mut m = HmQpcModel::new();
    m.hold(&HmQpcIn { rst: 1, ..HmQpcIn::default() }, 3);
    m
}
