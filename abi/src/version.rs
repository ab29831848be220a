//! Interface versions, each `major << 16 | minor`. A peer speaks version `ours` of an interface
//! when it reports the same major and a minor no older than ours: a newer minor only adds.
//!
//! * [`INTERFACE`]: the register maps and descriptor layouts, i.e. the RTL. It is the reset
//!   value of BAR0 `VERSION` and of the control core's `MBOX.VERSION`, both defined in
//!   `regs/hematite.rdl`. The driver checks BAR0 `VERSION` when it opens a function; the
//!   firmware checks `MBOX.VERSION` when it starts and refuses every command but QUERY_ABI while
//!   they disagree.
//! * [`MAILBOX`]: the mailbox command protocol between the driver and the firmware
//!   ([`crate::mbox`]). The firmware reports it in the answer to QUERY_ABI, whose format never
//!   changes; the driver sends QUERY_ABI first and refuses a firmware it does not speak.

/// The register-map and descriptor interface (from `regs/hematite.rdl`).
pub const INTERFACE: u32 = crate::regs::HM_REG_VERSION_RESET;

/// The mailbox protocol: 2.1 (1.0's MODIFY_QP / QUERY_QP attribute block had 29 words; 2.0
/// adds `qp::A_STD_TIMER`, so a 1.0 peer's MODIFY_QP has the wrong length; 2.1 adds REREG_MR).
pub const MAILBOX: u32 = 2 << 16 | 1;

/// Major number of a version word.
pub const fn major(v: u32) -> u32 {
    v >> 16
}

/// Minor number of a version word.
pub const fn minor(v: u32) -> u32 {
    v & 0xFFFF
}

/// Does a peer reporting version `theirs` speak version `ours` of the same interface?
pub const fn speaks(theirs: u32, ours: u32) -> bool {
    major(theirs) == major(ours) && minor(theirs) >= minor(ours)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compatibility_rule() {
        assert!(speaks(0x0001_0000, 0x0001_0000));
        assert!(speaks(0x0001_0003, 0x0001_0002)); // newer minor only adds
        assert!(!speaks(0x0001_0001, 0x0001_0002)); // older minor lacks what we use
        assert!(!speaks(0x0002_0000, 0x0001_0000)); // another major
        assert!(!speaks(0x0000_0005, 0x0001_0000));
        assert_eq!((major(INTERFACE), minor(INTERFACE)), (INTERFACE >> 16, INTERFACE & 0xFFFF));
        assert_ne!(major(MAILBOX), 0);
    }
}
