//! Descriptor and context layouts of `rtl/pkg/hm_desc_pkg.sv`, the one source of the formats
//! shared by the host and the engine (send / receive WQEs and CQEs in host memory, the QP / CQ /
//! MR context entries and the command words of the control bus): the constants (`HM_*`) and the
//! `(field, lsb, width)` tables (`HM_*_T_BITS`, `HM_*_T_FIELDS`) that `build.rs` generates from
//! the package. The codecs that use them live with their users (`hematite_model::desc` for the
//! host and the model, `hematite_firmware::desc` for the context entries the firmware writes).
#![allow(missing_docs)]

include!(concat!(env!("OUT_DIR"), "/desc_gen.rs"));

/// A packed-struct layout as generated: (field, lsb, width), most significant field first.
pub type Layout = &'static [(&'static str, usize, usize)];

/// Words of a context entry (the control bus's staging window).
pub const CTX_WORDS: usize = crate::regs::HM_CTL_STAGE_WORDS as usize;

/// Byte-wise string equality usable in constant expressions (field lookups by name).
pub const fn str_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}
