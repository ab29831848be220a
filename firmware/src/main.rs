//! The firmware image for the control core (riscv32): startup code (stack, .data copy, .bss
//! clear) and the main loop (poll the mailbox, handle the command, write the answer, ring
//! MBOX_DONE). On other targets this binary is empty so the workspace builds on the host.
#![cfg_attr(target_arch = "riscv32", no_std, no_main)]

#[cfg(not(target_arch = "riscv32"))]
fn main() {}

#[cfg(target_arch = "riscv32")]
mod core_main {
    use core::ptr::{addr_of_mut, read_volatile, write_volatile};
    use core::sync::atomic::{compiler_fence, Ordering};
    use hematite_firmware::map::*;
    use hematite_firmware::{mbox::Header, Bus, Firmware};

    core::arch::global_asm!(
        ".section .text.start, \"ax\"",
        ".global _start",
        "_start:",
        "  la sp, _stack_top",
        "  la t0, _sidata",
        "  la t1, _sdata",
        "  la t2, _edata",
        "10:",
        "  bgeu t1, t2, 20f",
        "  lw t3, 0(t0)",
        "  sw t3, 0(t1)",
        "  addi t0, t0, 4",
        "  addi t1, t1, 4",
        "  j 10b",
        // .bss cleared 8 words per turn, then word by word for the last up to 7: the tables
        // are most of the 64 KiB of DMEM, and the clear is most of the boot
        "20:",
        "  la t1, _sbss",
        "  la t2, _ebss",
        "  addi t3, t2, -28",
        "30:",
        "  bgeu t1, t3, 35f",
        "  sw zero, 0(t1)",
        "  sw zero, 4(t1)",
        "  sw zero, 8(t1)",
        "  sw zero, 12(t1)",
        "  sw zero, 16(t1)",
        "  sw zero, 20(t1)",
        "  sw zero, 24(t1)",
        "  sw zero, 28(t1)",
        "  addi t1, t1, 32",
        "  j 30b",
        "35:",
        "  bgeu t1, t2, 40f",
        "  sw zero, 0(t1)",
        "  addi t1, t1, 4",
        "  j 35b",
        "40:",
        "  call fw_main",
        "50:",
        "  j 50b",
    );

    /// The engine control bus at `CTL_BASE`.
    struct Mmio;

    impl Bus for Mmio {
        fn read32(&mut self, addr: u32) -> u32 {
            // SAFETY: CTL_BASE + addr is the engine control-bus window of hm_ctrl_sys, a
            // device region (never RAM the compiler knows of); every access completes.
            unsafe { read_volatile((CTL_BASE + addr) as *const u32) }
        }
        fn write32(&mut self, addr: u32, v: u32) {
            // SAFETY: as read32.
            unsafe { write_volatile((CTL_BASE + addr) as *mut u32, v) }
        }
    }

    fn rd(addr: u32) -> u32 {
        // SAFETY: called with mailbox / timer register addresses of hm_ctrl_sys only.
        unsafe { read_volatile(addr as *const u32) }
    }

    fn wr(addr: u32, v: u32) {
        // SAFETY: as rd.
        unsafe { write_volatile(addr as *mut u32, v) }
    }

    // All-zero, so it lives in .bss.
    static mut FW: Firmware<Mmio> = Firmware::new(Mmio);

    #[no_mangle]
    extern "C" fn fw_main() -> ! {
        // SAFETY: single-threaded, no interrupts; the only reference to this static.
        let fw = unsafe { &mut *addr_of_mut!(FW) };
        fw.init(rd(MBOX_CAPS), rd(MBOX_MR_LOG), rd(MBOX_VERSION));
        // CMD_OUT words the last answer wrote: the next answer also zeroes those it does not
        // use, so that words past an answer's length are always zero (all of them at first:
        // nothing of a client before the function reset stays readable)
        let mut dirty = MBOX_WORDS;
        loop {
            fw.link(rd(MBOX_LINK) & 1 != 0);
            if rd(MBOX_CTRL) & MBOX_CTRL_PENDING == 0 {
                continue;
            }
            // The command is read and the answer written in place, in the mailbox's own
            // memories (a copy costs a bus access per word):
            // SAFETY: CMD_IN is a RAM window that the host cannot write while a command is
            // pending (hm_ctrl_sys refuses those writes until MBOX_DONE), so it does not change
            // while `cmd` lives; its header announces at most MBOX_WORDS - 1 words (clamped).
            // CMD_OUT is a RAM window that only the core writes (with word stores: every
            // field of the answer is a u32) and that the host reads after MBOX_DONE. Both are
            // MBOX_WORDS words, 4-byte aligned, and nothing else refers to them.
            let n = 1 + usize::from(Header::parse(rd(MBOX_CMD_IN)).in_words).min(MBOX_WORDS - 1);
            let cmd = unsafe { core::slice::from_raw_parts(MBOX_CMD_IN as *const u32, n) };
            let ans = unsafe { &mut *(MBOX_CMD_OUT as *mut [u32; MBOX_WORDS]) };
            let used = fw.handle(cmd, ans);
            for i in used..dirty {
                wr(MBOX_CMD_OUT + 4 * i as u32, 0);
            }
            dirty = used;
            // the answer's plain stores before the (volatile) DONE write
            compiler_fence(Ordering::SeqCst);
            wr(MBOX_DONE, 1);
        }
    }

    #[panic_handler]
    fn panic(_: &core::panic::PanicInfo) -> ! {
        loop {}
    }
}
