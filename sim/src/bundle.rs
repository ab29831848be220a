//! Counter bundles (packed structs of 32-bit counters) as the Verilated models carry them: a
//! port wider than 64 bits is an array of 32-bit words (bit 0 in word 0), and each counter sits
//! at the position hematite-abi generates from the RTL package. Other fields of a packed struct
//! are read and written with `layout::{get_bits, set_bits}`.

use hematite_abi::desc::Layout;

/// The counters of a counter bundle (a packed struct of 32-bit counters, e.g.
/// `hm_rp_stats_t`) as a Verilated model carries it (`words`), in declaration order; `layout`
/// is the bundle's field table.
pub fn counters<const N: usize>(layout: Layout, words: &[u32]) -> [u32; N] {
    assert_eq!(layout.len(), N, "a counter bundle of {N} counters");
    std::array::from_fn(|i| {
        let (name, lsb, width) = layout[i];
        assert!(width == 32 && lsb % 32 == 0, "{name}: not a word-aligned 32-bit counter");
        words[lsb / 32]
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_are_read_in_declaration_order() {
        // two counters, the first most significant
        const L: Layout = &[("hi", 32, 32), ("lo", 0, 32)];
        assert_eq!(counters::<2>(L, &[7, 9]), [9, 7]);
    }

    #[test]
    #[should_panic(expected = "not a word-aligned 32-bit counter")]
    fn a_field_that_is_not_a_counter_is_refused() {
        const L: Layout = &[("flag", 32, 1), ("lo", 0, 32)];
        let _ = counters::<2>(L, &[0, 0]);
    }

    #[test]
    #[should_panic(expected = "a counter bundle of 3 counters")]
    fn a_count_that_does_not_match_the_bundle_is_refused() {
        const L: Layout = &[("hi", 32, 32), ("lo", 0, 32)];
        let _ = counters::<3>(L, &[0, 0]);
    }
}
