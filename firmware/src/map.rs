//! Memory map of the control core (the one place it is written down; `link.x` repeats the
//! IMEM/DMEM sizes for the linker and `rtl/ctrl/hm_ctrl_sys.sv` implements it).

/// Instruction memory: code, rodata and the `.data` load image (readable by loads).
pub const IMEM_BASE: u32 = 0x0000_0000;
/// IMEM size in bytes.
pub const IMEM_BYTES: u32 = 32 * 1024;
/// Data memory: `.data`, `.bss`, stack.
pub const DMEM_BASE: u32 = 0x1000_0000;
/// DMEM size in bytes.
pub const DMEM_BYTES: u32 = 64 * 1024;

/// Mailbox block.
pub const MBOX_BASE: u32 = 0x2000_0000;
/// Command words written by the host (64 words, read-only for the firmware).
pub const MBOX_CMD_IN: u32 = MBOX_BASE;
/// Answer words written by the firmware (64 words).
pub const MBOX_CMD_OUT: u32 = MBOX_BASE + 0x100;
/// Words in CMD_IN and in CMD_OUT.
pub const MBOX_WORDS: usize = 64;
/// Read: bit 0 = a command is pending (the host rang the doorbell).
pub const MBOX_CTRL: u32 = MBOX_BASE + 0x200;
/// Bit of MBOX_CTRL: command pending.
pub const MBOX_CTRL_PENDING: u32 = 1;
/// Write 1: CMD_OUT holds the answer (clears pending, tells the host).
pub const MBOX_DONE: u32 = MBOX_BASE + 0x204;
/// Read-only `hm_caps_t` of the engine: [31:24] log2 QPs, [23:16] log2 CQs,
/// [15:8] datapath bytes / 8, [7:0] counters.
pub const MBOX_CAPS: u32 = MBOX_BASE + 0x300;
/// Read-only: log2 of the number of MR table entries.
pub const MBOX_MR_LOG: u32 = MBOX_BASE + 0x304;
/// LINK, read-only: bit 0 = the Ethernet link is up.
pub const MBOX_LINK: u32 = MBOX_BASE + 0x308;

/// Engine control bus window: engine control offset X is at `CTL_BASE + X`.
pub const CTL_BASE: u32 = 0x3000_0000;

/// Free-running cycle counter, low word.
pub const TIMER_LO: u32 = 0x4000_0000;
/// Free-running cycle counter, high word.
pub const TIMER_HI: u32 = 0x4000_0004;
