//! Memory map of the control core, as the firmware names it. The values are generated from
//! `regs/hematite.rdl` (map `hm_ctrl_cpu`, via `rtl/pkg/hm_regs_pkg.sv`); `memory.x`, which
//! `link.x` includes, is generated from the same description, and `rtl/ctrl/hm_ctrl_sys.sv`
//! implements it.
use crate::regs;

/// Instruction memory: code, rodata and the `.data` load image (readable by loads).
pub const IMEM_BASE: u32 = regs::HM_CPU_IMEM;
/// IMEM size in bytes.
pub const IMEM_BYTES: u32 = regs::HM_CPU_IMEM_BYTES;
/// Data memory: `.data`, `.bss`, stack.
pub const DMEM_BASE: u32 = regs::HM_CPU_DMEM;
/// DMEM size in bytes.
pub const DMEM_BYTES: u32 = regs::HM_CPU_DMEM_BYTES;

/// Mailbox block.
pub const MBOX_BASE: u32 = regs::HM_CPU_MBOX;
/// Command words written by the host (64 words, read-only for the firmware).
pub const MBOX_CMD_IN: u32 = regs::HM_MBOX_CMD_IN;
/// Answer words written by the firmware (64 words).
pub const MBOX_CMD_OUT: u32 = regs::HM_MBOX_CMD_OUT;
/// Words in CMD_IN and in CMD_OUT.
pub const MBOX_WORDS: usize = regs::HM_MBOX_CMD_IN_WORDS as usize;
/// Read: bit 0 = a command is pending (the host rang the doorbell).
pub const MBOX_CTRL: u32 = regs::HM_MBOX_CTRL;
/// Bit of MBOX_CTRL: command pending.
pub const MBOX_CTRL_PENDING: u32 = 1;
/// Write 1: CMD_OUT holds the answer (clears pending, tells the host).
pub const MBOX_DONE: u32 = regs::HM_MBOX_DONE;
/// Read-only `hm_caps_t` of the engine (`regs::HM_CAPS_T_FIELDS`).
pub const MBOX_CAPS: u32 = regs::HM_MBOX_CAPS;
/// Read-only: log2 of the number of MR table entries.
pub const MBOX_MR_LOG: u32 = regs::HM_MBOX_MR_LOG;
/// LINK, read-only: bit 0 = the Ethernet link is up.
pub const MBOX_LINK: u32 = regs::HM_MBOX_LINK;
/// VERSION, read-only: the engine's interface version (`crate::version::INTERFACE` when the
/// firmware and the RTL were built from the same description).
pub const MBOX_VERSION: u32 = regs::HM_MBOX_VERSION;

/// Engine control bus window: engine control offset X is at `CTL_BASE + X`.
pub const CTL_BASE: u32 = regs::HM_CPU_CTL;

/// Free-running cycle counter, low word.
pub const TIMER_LO: u32 = regs::HM_TIMER_LO;
/// Free-running cycle counter, high word.
pub const TIMER_HI: u32 = regs::HM_TIMER_HI;
