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

/// `(lsb, width)` of field `name` of a generated layout (`*_FIELDS`), for use in `const` items:
/// a name missing from the layout (the SV package changed) stops the build instead of failing
/// at run time, and nothing searches a name at run time.
pub const fn fpos(layout: Layout, name: &str) -> (usize, usize) {
    let mut i = 0;
    while i < layout.len() {
        if str_eq(layout[i].0, name) {
            return (layout[i].1, layout[i].2);
        }
        i += 1;
    }
    panic!("field not in the layout generated from the SV package")
}

/// The mask of a field `(lsb, width)` of a 32-bit word, in place.
pub const fn mask32(f: (usize, usize)) -> u32 {
    (if f.1 >= 32 { u32::MAX } else { (1u32 << f.1) - 1 }) << f.0
}

/// `v` (truncated to the field's width) placed in field `f` of a 32-bit word.
#[inline]
pub const fn put32(f: (usize, usize), v: u32) -> u32 {
    (v << f.0) & mask32(f)
}

/// Field `f` of the 32-bit word `w`.
#[inline]
pub const fn get32(f: (usize, usize), w: u32) -> u32 {
    (w & mask32(f)) >> f.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn word_fields() {
        const L: Layout = &[("hi", 16, 16), ("mid", 14, 2), ("lo", 0, 14)];
        const HI: (usize, usize) = fpos(L, "hi");
        assert_eq!(HI, (16, 16));
        assert_eq!(mask32(fpos(L, "mid")), 0xC000);
        assert_eq!(put32(HI, 0x1_2345), 0x2345_0000, "truncated to the width");
        assert_eq!(put32(fpos(L, "lo"), 0x7FFF), 0x3FFF);
        assert_eq!(get32(fpos(L, "mid"), 0xFFFF_FFFF), 3);
        assert_eq!(mask32((0, 32)), u32::MAX);
    }
}
