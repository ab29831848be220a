//! RoCEv2 invariant CRC (ICRC), ROCEV2.md §5.
//!
//! The ICRC is a standard CRC-32 (IEEE 802.3, reflected polynomial 0xEDB88320, initial register
//! 0xFFFFFFFF, final XOR 0xFFFFFFFF) over `0xFF × 8 ‖ IP header ‖ UDP ‖ BTH ‖ ext headers ‖
//! payload ‖ pad`, with the variant fields replaced by all-ones in the CRC input. The 8 leading
//! 0xFF bytes leave the register at [`SEED`], so the computation starts there at the IP header.
//! The value is transmitted least-significant byte first ([`icrc_wire_bytes`]).

/// CRC register after the 8 bytes of 0xFF that stand in for the InfiniBand LRH.
pub const SEED: u32 = 0xDEBB_20E3;

/// Raw CRC register (no final XOR) after running over a good packet's masked stream *including*
/// its 4 ICRC bytes, starting from [`SEED`]. (Numerically equal to [`SEED`].)
pub const RESIDUE: u32 = 0xDEBB_20E3;

/// Reflected CRC-32 polynomial.
pub const POLY: u32 = 0xEDB8_8320;

const fn make_table() -> [u32; 256] {
    let mut t = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 { (c >> 1) ^ POLY } else { c >> 1 };
            k += 1;
        }
        t[i] = c;
        i += 1;
    }
    t
}

static TABLE: [u32; 256] = make_table();

/// Advances a raw CRC-32 register (reflected, poly 0xEDB88320, no final XOR) over `data`.
///
/// `crc32_update(0xFFFF_FFFF, data) ^ 0xFFFF_FFFF` is the usual zlib CRC-32 of `data`.
pub fn crc32_update(reg: u32, data: &[u8]) -> u32 {
    data.iter().fold(reg, |r, &b| TABLE[((r ^ b as u32) & 0xFF) as usize] ^ (r >> 8))
}

/// Byte positions (relative to the IP header) and masks OR-ed into the CRC input.
/// Positions beyond the slice are ignored.
fn mask_table(ipv6: bool) -> &'static [(usize, u8)] {
    const V4: [(usize, u8); 7] = [
        (1, 0xFF),  // TOS
        (8, 0xFF),  // TTL
        (10, 0xFF), // header checksum
        (11, 0xFF),
        (20 + 6, 0xFF), // UDP checksum
        (20 + 7, 0xFF),
        (28 + 4, 0xFF), // BTH byte 4: FECN, BECN, Resv6
    ];
    const V6: [(usize, u8); 8] = [
        (0, 0x0F), // traffic class high nibble (byte 0 low nibble)
        (1, 0xFF), // traffic class low nibble + flow label
        (2, 0xFF),
        (3, 0xFF),
        (7, 0xFF), // hop limit
        (40 + 6, 0xFF),
        (40 + 7, 0xFF),
        (48 + 4, 0xFF),
    ];
    if ipv6 {
        &V6
    } else {
        &V4
    }
}

/// Returns the ICRC mask byte for offset `i` from the IP header start (0x00 = fully covered,
/// 0xFF = fully masked; IPv6 byte 0 has 0x0F). IPv4 positions assume a 20-byte header.
pub fn mask_at(i: usize, ipv6: bool) -> u8 {
    mask_table(ipv6)
        .iter()
        .find(|(p, _)| *p == i)
        .map_or(0, |(_, m)| *m)
}

/// Raw register after the masked stream `l3_bytes` starting from `reg`.
fn masked_update(reg: u32, l3_bytes: &[u8], ipv6: bool) -> u32 {
    // All masked positions lie within the first 53 bytes; copy those, mask, run the rest directly.
    let mut head = [0u8; 56];
    let n = l3_bytes.len().min(head.len());
    head[..n].copy_from_slice(&l3_bytes[..n]);
    for &(p, m) in mask_table(ipv6) {
        if p < n {
            head[p] |= m;
        }
    }
    let r = crc32_update(reg, &head[..n]);
    crc32_update(r, l3_bytes.get(n..).unwrap_or(&[]))
}

/// ICRC value (after the final XOR) over `l3_to_pad` = IP header .. pad (everything covered by
/// the ICRC, without the ICRC itself), masking the variant fields of ROCEV2.md §5.
///
/// IPv4 masks assume a 20-byte header (bytes 1, 8, 10, 11; UDP checksum at 26, 27; BTH byte 4 at
/// 32); IPv6: byte 0 low nibble, bytes 1..3, 7; UDP checksum at 46, 47; BTH byte 4 at 52.
/// Works on any slice length (masks beyond the end are ignored).
pub fn icrc_masked(l3_to_pad: &[u8], ipv6: bool) -> u32 {
    !masked_update(SEED, l3_to_pad, ipv6)
}

/// Receive-side residue check: runs the CRC over the masked stream `l3_to_icrc_end` (IP header ..
/// ICRC inclusive) from [`SEED`] and reports whether the raw register ends at [`RESIDUE`].
pub fn residue_ok(l3_to_icrc_end: &[u8], ipv6: bool) -> bool {
    masked_update(SEED, l3_to_icrc_end, ipv6) == RESIDUE
}

/// The ICRC as it appears on the wire: least-significant byte first.
pub fn icrc_wire_bytes(v: u32) -> [u8; 4] {
    v.to_le_bytes()
}

/// Reads a stored ICRC from its 4 wire bytes (inverse of [`icrc_wire_bytes`]).
pub fn icrc_from_wire(b: [u8; 4]) -> u32 {
    u32::from_le_bytes(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unhex(s: &str) -> Vec<u8> {
        (0..s.len() / 2)
            .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn seed_is_register_after_eight_ff() {
        assert_eq!(crc32_update(0xFFFF_FFFF, &[0xFF; 8]), SEED);
    }

    #[test]
    fn zlib_check_value() {
        assert_eq!(!crc32_update(0xFFFF_FFFF, b"123456789"), 0xCBF4_3926);
    }

    /// ConnectX-4 Lx hardware CNP (ROCEV2.md §4/§5): CRC value 0x2A00FD82, wire `82 fd 00 2a`.
    #[test]
    fn hardware_cnp_vector() {
        let f = unhex("e41d2dab2bc27cfe90643b32080045c2003c718c4000401191610a0011010a001201000012b7002800008100ffff40000118000000000000000000000000000000000000000082fd002a");
        let l3 = &f[14..];
        let v = icrc_masked(&l3[..l3.len() - 4], false);
        assert_eq!(v, 0x2A00_FD82);
        assert_eq!(icrc_wire_bytes(v), [0x82, 0xfd, 0x00, 0x2a]);
        assert!(residue_ok(l3, false));
        // Residue property: raw register over stream incl. ICRC = 0xDEBB20E3 (0x2144DF1C after xor).
        assert_eq!(!masked_update(SEED, l3, false), 0x2144_DF1C);
    }

    #[test]
    fn residue_property_holds_for_any_data() {
        // Any length where the ICRC lands after the last masked byte (every real packet: IP + UDP
        // + BTH is at least 40 / 60 bytes).
        for len in [53usize, 60, 61, 62, 63, 100, 1000] {
            for v6 in [false, true] {
                let data: Vec<u8> = (0..len).map(|i| (i * 37 + 11) as u8).collect();
                let mut s = data.clone();
                s.extend_from_slice(&icrc_wire_bytes(icrc_masked(&data, v6)));
                assert!(residue_ok(&s, v6), "len {len} v6 {v6}");
            }
        }
    }

    #[test]
    fn masked_bytes_do_not_matter() {
        let base: Vec<u8> = (0..80u8).collect();
        for v6 in [false, true] {
            let c = icrc_masked(&base, v6);
            for i in 0..base.len() {
                for bit in 0..8 {
                    let mut d = base.clone();
                    d[i] ^= 1 << bit;
                    let masked = mask_at(i, v6) & (1 << bit) != 0;
                    assert_eq!(icrc_masked(&d, v6) == c, masked, "v6 {v6} byte {i} bit {bit}");
                }
            }
        }
    }
}
