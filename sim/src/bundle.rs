//! Packed SystemVerilog structs as the Verilated models carry them: a port wider than 64 bits
//! is an array of 32-bit words (bit 0 in word 0), and each field sits at the position
//! hematite-abi generates from the RTL package (`(name, lsb, width)` tables, first field most
//! significant).

use hematite_abi::desc::Layout;

/// ORs `v` into field `f` = (lsb, width <= 64) of the zero-initialised words `w`.
#[inline]
pub fn put(w: &mut [u32], f: (usize, usize), v: u64) {
    let v = if f.1 == 64 { v } else { v & ((1u64 << f.1) - 1) };
    let x = u128::from(v) << (f.0 % 32);
    for (k, word) in w[f.0 / 32..].iter_mut().take((f.0 % 32 + f.1).div_ceil(32)).enumerate() {
        *word |= (x >> (32 * k)) as u32;
    }
}

/// Field `f` = (lsb, width <= 64) of the words `w`.
#[inline]
pub fn get(w: &[u32], f: (usize, usize)) -> u64 {
    let x = w[f.0 / 32..].iter().take((f.0 % 32 + f.1).div_ceil(32)).enumerate().fold(0u128, |x, (k, &word)| x | u128::from(word) << (32 * k));
    let v = (x >> (f.0 % 32)) as u64;
    if f.1 == 64 { v } else { v & ((1u64 << f.1) - 1) }
}

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
    fn fields_straddling_words_round_trip() {
        // (name, lsb, width): 3 bits at the top, 64 bits across three words, 29 bits at 0
        const L: Layout = &[("a", 93, 3), ("b", 29, 64), ("c", 0, 29)];
        let mut w = [0u32; 3];
        put(&mut w, (93, 3), 0b101);
        put(&mut w, (29, 64), 0xDEAD_BEEF_0123_4567);
        put(&mut w, (0, 29), 0x1FFF_FFFF);
        assert_eq!(get(&w, (93, 3)), 0b101);
        assert_eq!(get(&w, (29, 64)), 0xDEAD_BEEF_0123_4567);
        assert_eq!(get(&w, (0, 29)), 0x1FFF_FFFF);
        assert_eq!(L.len(), 3);
        // a value wider than its field is cut to the field
        let mut v = [0u32; 1];
        put(&mut v, (4, 4), 0x1F);
        assert_eq!(v[0], 0xF0);
    }

    #[test]
    fn counters_are_read_in_declaration_order() {
        // two counters, the first most significant
        const L: Layout = &[("hi", 32, 32), ("lo", 0, 32)];
        assert_eq!(counters::<2>(L, &[7, 9]), [9, 7]);
    }
}
