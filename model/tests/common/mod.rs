//! Helpers shared by the integration tests.
#![allow(dead_code)]

use hematite_model::icrc;
use hematite_model::wire::ipv4_header_checksum;
use std::path::PathBuf;

/// The shared reference directory: `$HEMATITE_SHARED`, else `<repo>/../shared`. Panics (fails
/// the test loudly) when it does not exist.
pub fn shared_dir() -> PathBuf {
    let p = match std::env::var_os("HEMATITE_SHARED") {
        Some(v) => PathBuf::from(v),
        None => PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared")),
    };
    assert!(
        p.join("vectors").is_dir() && p.join("captures").is_dir(),
        "shared reference data not found at {} (set HEMATITE_SHARED)",
        p.display()
    );
    p
}

/// The repository's own generated RoCEv2 vectors, `<repo>/tests/data/vectors` (made by
/// `tests/vectors/gen_vectors.py`). Panics when the JSON is missing: the repository data is
/// required, never skipped.
pub fn repo_vectors_dir() -> PathBuf {
    let p = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/data/vectors"));
    assert!(
        p.join("rocev2_vectors.json").is_file(),
        "repository vectors not found at {} (run tests/vectors/gen_vectors.py)",
        p.display()
    );
    p
}

/// The shared reference directory (`$HEMATITE_SHARED`, else `<repo>/../shared`) when it holds
/// `vectors/rocev2_vectors.json`; `Err` with the path looked at when it does not. For optional
/// cross-checks; [`shared_dir`] is the variant that fails when the data is absent.
pub fn shared_opt() -> Result<PathBuf, PathBuf> {
    let p = match std::env::var_os("HEMATITE_SHARED") {
        Some(v) => PathBuf::from(v),
        None => PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared")),
    };
    if p.join("vectors/rocev2_vectors.json").is_file() {
        Ok(p.canonicalize().unwrap_or(p))
    } else {
        Err(p)
    }
}

pub fn unhex(s: &str) -> Vec<u8> {
    assert!(s.len() % 2 == 0, "odd hex length");
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).expect("bad hex"))
        .collect()
}

pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

pub fn be16(f: &[u8], i: usize) -> u16 {
    u16::from_be_bytes([f[i], f[i + 1]])
}

/// Geometry of a frame as far as it can be read: (l3off, ipv6, ip_end) when the EtherType is IP
/// and the IP length field is present.
pub fn geometry(f: &[u8]) -> Option<(usize, bool, usize)> {
    if f.len() < 14 {
        return None;
    }
    let l3 = if be16(f, 12) == 0x8100 { 18 } else { 14 };
    if f.len() < l3 {
        return None;
    }
    let et = be16(f, l3 - 2);
    let v6 = match et {
        0x0800 => false,
        0x86DD => true,
        _ => return None,
    };
    if f.len() < l3 + 6 {
        return None;
    }
    let e = if v6 { l3 + 40 + be16(f, l3 + 4) as usize } else { l3 + be16(f, l3 + 2) as usize };
    Some((l3, v6, e))
}

/// Recomputes the IPv4 header checksum and the ICRC (where computable) after a mutation.
pub fn refix(f: &mut [u8]) {
    let Some((l3, v6, e)) = geometry(f) else { return };
    if !v6 && f.len() >= l3 + 20 {
        f[l3 + 10] = 0;
        f[l3 + 11] = 0;
        let c = ipv4_header_checksum(&f[l3..l3 + 20]);
        f[l3 + 10..l3 + 12].copy_from_slice(&c.to_be_bytes());
    }
    if e >= l3 + 4 && e <= f.len() {
        let v = icrc::icrc_masked(&f[l3..e - 4], v6);
        f[e - 4..e].copy_from_slice(&icrc::icrc_wire_bytes(v));
    }
}

/// `len` pseudo-random bytes from `seed`: xorshift64 from a seed-derived state, each byte the
/// state shifted right by `shift` (the same seed gives the same bytes, so a test can
/// regenerate what it wrote).
pub fn xorshift_bytes(seed: u64, len: usize, shift: u32) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> shift) as u8
        })
        .collect()
}
