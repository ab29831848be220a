//! 24-bit packet sequence number arithmetic (ROCEV2.md §6).
//!
//! PSNs wrap 0xFFFFFF → 0. Ordering uses the signed 24-bit difference: `d = (a − b) mod 2^24`,
//! `d ≥ 2^23` is negative. All inputs are masked to 24 bits first.

/// Mask of the 24 PSN bits.
pub const MASK: u32 = 0x00FF_FFFF;
/// Half the PSN space (2^23): differences at or above this are negative.
pub const HALF: u32 = 0x0080_0000;

/// `psn + n` modulo 2^24.
pub fn add(psn: u32, n: u32) -> u32 {
    psn.wrapping_add(n) & MASK
}

/// `psn − n` modulo 2^24.
pub fn sub(psn: u32, n: u32) -> u32 {
    psn.wrapping_sub(n) & MASK
}

/// Signed 24-bit difference `a − b` in `-2^23 ..= 2^23 − 1`.
pub fn diff(a: u32, b: u32) -> i32 {
    let d = a.wrapping_sub(b) & MASK;
    if d >= HALF {
        d as i32 - (1 << 24)
    } else {
        d as i32
    }
}

/// `a` is before `b` (serial-number order).
pub fn lt(a: u32, b: u32) -> bool {
    diff(a, b) < 0
}

/// `a` is before or equal to `b`.
pub fn le(a: u32, b: u32) -> bool {
    diff(a, b) <= 0
}

/// `a` is after `b`.
pub fn gt(a: u32, b: u32) -> bool {
    diff(a, b) > 0
}

/// `a` is after or equal to `b`.
pub fn ge(a: u32, b: u32) -> bool {
    diff(a, b) >= 0
}

/// Responder view: a packet with PSN `psn` is a duplicate (behind the expected PSN `epsn`).
pub fn is_dup(psn: u32, epsn: u32) -> bool {
    lt(psn, epsn)
}

/// Responder view: a packet with PSN `psn` is ahead of the expected PSN `epsn` (sequence error,
/// packets lost).
pub fn is_future(psn: u32, epsn: u32) -> bool {
    gt(psn, epsn)
}

/// Responder view: the packet is the expected one (`psn == epsn` modulo 2^24).
pub fn is_expected(psn: u32, epsn: u32) -> bool {
    diff(psn, epsn) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn add_wraps() {
        assert_eq!(add(0xFF_FFFF, 1), 0);
        assert_eq!(add(0xFF_FFFE, 5), 3);
        assert_eq!(add(5, 0), 5);
        assert_eq!(add(0, MASK), MASK);
        assert_eq!(sub(0, 1), 0xFF_FFFF);
        assert_eq!(sub(3, 5), 0xFF_FFFE);
    }

    #[test]
    fn diff_signed() {
        assert_eq!(diff(0, 0xFF_FFFF), 1);
        assert_eq!(diff(0xFF_FFFF, 0), -1);
        assert_eq!(diff(10, 3), 7);
        assert_eq!(diff(3, 10), -7);
        assert_eq!(diff(HALF - 1, 0), (HALF - 1) as i32);
        assert_eq!(diff(HALF, 0), -(HALF as i32));
        assert_eq!(diff(0, HALF), -(HALF as i32));
        // upper bits ignored
        assert_eq!(diff(0xFF00_0001, 0x0000_0000), 1);
    }

    #[test]
    fn ordering_across_wrap() {
        assert!(lt(0xFF_FFFF, 0));
        assert!(gt(0, 0xFF_FFFF));
        assert!(le(0xFF_FFFF, 0xFF_FFFF));
        assert!(ge(2, 0xFF_FFF0));
        assert!(!lt(5, 5));
        assert!(is_dup(0xFF_FFFE, 1));
        assert!(is_future(1, 0xFF_FFFE));
        assert!(is_expected(0x1_000_000, 0));
        assert!(!is_dup(0, 0) && !is_future(0, 0));
    }

    #[test]
    fn diff_is_antisymmetric_except_half() {
        for &(a, b) in &[(0u32, 1u32), (0xFF_FFFF, 7), (123_456, 0xABCDEF), (0, HALF - 1)] {
            assert_eq!(diff(a, b), -diff(b, a));
            assert_eq!(add(b, diff(a, b) as u32), a & MASK);
        }
    }
}
