//! The per-QP bit table (`rtl/common/hm_qp_bits.sv`, built by sim/build.rs with 200 entries,
//! rows of 64 and two read ports; once as is and once with TRANSPARENT) in co-simulation:
//! [`qpb_model`] and [`qpbt_model`] give one, held in reset for three cycles; `tick` clocks it
//! and returns the outputs sampled before the edge.

pub const QPB_NUM: usize = 200;
/// Rows of 64 bits the clear after reset sweeps, one a cycle.
pub const QPB_ROWS: usize = QPB_NUM.div_ceil(64);

include!(concat!(env!("OUT_DIR"), "/shim_qpb.rs"));

/// The Verilated bit table, just out of reset (its rows are then cleared, one a cycle).
pub fn qpb_model() -> HmQpbModel {
    let mut m = HmQpbModel::new();
    m.hold(&HmQpbIn { rst: 1, ..HmQpbIn::default() }, 3);
    m
}

include!(concat!(env!("OUT_DIR"), "/shim_qpbt.rs"));

/// The same table with TRANSPARENT = 1, just out of reset.
pub fn qpbt_model() -> HmQpbtModel {
    let mut m = HmQpbtModel::new();
    m.hold(&HmQpbtIn { rst: 1, ..HmQpbtIn::default() }, 3);
    m
}
