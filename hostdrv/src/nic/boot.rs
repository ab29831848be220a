//! Starting the control core when the function comes up with it held: a card's control core
//! starts from reset with its CPU held and its instruction memory empty (the bitstream holds
//! no firmware; `rtl/ctrl/hm_ctrl_sys.sv`), and after a function-level reset the CPU is held
//! again. The driver then loads the firmware image through the core's IMEM window in BAR0
//! (map hm_ctrl_host of regs/hematite.rdl) and starts the CPU. MBOX_STATUS.running is the
//! run bit itself, not a word from the firmware: the handshake that the firmware runs is the
//! first mailbox command, QUERY_ABI, which `Nic::open` sends next (it waits for its answer).
//! The simulated device boots its own image, so there the core is found running and nothing
//! is loaded.
//!
//! The image is `./hematite fw`'s `$readmemh` file of 32-bit words: `$HEMATITE_FW`, else the
//! installed one (`/usr/share/hematite/firmware.hex`, from the package).

use super::shared::{mbox_status, FW_CORE_CTRL, FW_MBOX_STATUS, FW_PORT};
use crate::device::Device;
use crate::{regs, Error, Result};
use std::path::{Path, PathBuf};

/// Where the package installs the firmware image.
pub const INSTALLED_FW: &str = "/usr/share/hematite/firmware.hex";
/// Bytes of the control core's instruction memory.
pub const IMEM_BYTES: usize = regs::HM_HOST_IMEM_BYTES as usize;
const FW_IMEM: u64 = FW_PORT + regs::HM_HOST_IMEM as u64;

/// Parses a `$readmemh` file of 32-bit words (`@addr` lines move the word address; `//`
/// comments). `name` names the file in errors. An image larger than IMEM is refused.
pub fn parse_hex(text: &str, name: &str) -> std::result::Result<Vec<u32>, String> {
    let mut words = Vec::new();
    let mut at = 0usize;
    for (n, line) in text.lines().enumerate() {
        let line = line.split("//").next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        if let Some(a) = line.strip_prefix('@') {
            at = usize::from_str_radix(a, 16).map_err(|e| format!("{name}:{}: {e}", n + 1))?;
            if at >= IMEM_BYTES / 4 {
                return Err(format!("{name}:{}: address @{a} beyond the {IMEM_BYTES}-byte IMEM", n + 1));
            }
            continue;
        }
        for tok in line.split_whitespace() {
            let w = u32::from_str_radix(tok, 16).map_err(|e| format!("{name}:{}: {e}", n + 1))?;
            if at >= IMEM_BYTES / 4 {
                return Err(format!("{name}: image larger than the {IMEM_BYTES}-byte IMEM"));
            }
            if words.len() <= at {
                words.resize(at + 1, 0);
            }
            words[at] = w;
            at += 1;
        }
    }
    Ok(words)
}

/// The firmware image's path: `$HEMATITE_FW`, else the installed one when it exists.
pub fn image_path() -> Option<PathBuf> {
    match std::env::var_os("HEMATITE_FW") {
        Some(p) => Some(PathBuf::from(p)),
        None => Path::new(INSTALLED_FW).exists().then(|| PathBuf::from(INSTALLED_FW)),
    }
}

/// When the CPU is held (CORE_CTRL.run clear): loads the image at `image` through the IMEM
/// window and starts the CPU. Returns whether it did. With the CPU running already, nothing is
/// touched. A core held with a fault or trap recorded (sticky until the core's reset) is not
/// loaded: a function reset clears it.
pub(crate) fn start_if_held(dev: &dyn Device, image: Option<&Path>) -> Result<bool> {
    if dev.read32(FW_CORE_CTRL)? & 1 != 0 {
        return Ok(false);
    }
    let st = dev.read32(FW_MBOX_STATUS)?;
    if st & mbox_status::STOPPED != 0 {
        return Err(Error::Device(format!(
            "the control core is held after a fault or trap (mailbox status {st:#x}): a function reset clears it"
        )));
    }
    let path = image.ok_or_else(|| {
        Error::Device(format!(
            "the control core is held and holds no firmware: set HEMATITE_FW to the image (./hematite fw builds build/fw/firmware.hex; the package installs {INSTALLED_FW})"
        ))
    })?;
    let text = std::fs::read_to_string(path).map_err(|e| Error::sys(format!("reading the firmware image {}", path.display()), e))?;
    let words = parse_hex(&text, &path.display().to_string()).map_err(Error::inval)?;
    if words.is_empty() {
        return Err(Error::inval(format!("{}: an empty firmware image", path.display())));
    }
    dev.write32(FW_CORE_CTRL, 0)?;
    for (i, w) in words.iter().enumerate() {
        dev.write32(FW_IMEM + 4 * i as u64, *w)?;
    }
    dev.write32(FW_CORE_CTRL, 1)?;
    // (the read completes after the writes before it: the CPU runs from here on)
    let st = dev.read32(FW_MBOX_STATUS)?;
    if st & mbox_status::STOPPED != 0 {
        return Err(Error::Device(format!("the firmware from {} stopped at boot (mailbox status {st:#x})", path.display())));
    }
    if st & mbox_status::RUNNING == 0 {
        return Err(Error::Device(format!("the control core did not start (mailbox status {st:#x})")));
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::DeviceInfo;
    use std::sync::Mutex;

    /// A control core's host port as hm_ctrl_sys has it: CORE_CTRL; MBOX_STATUS with RUNNING
    /// the run bit and the sticky trap bit (set when `traps` once the CPU runs, or from the
    /// start when `trapped`); IMEM written word by word while held.
    struct Core {
        info: DeviceInfo,
        st: Mutex<(u32, Vec<u32>, bool)>, // run, IMEM, trap recorded
        traps: bool,
        writes: Mutex<Vec<(u64, u32)>>,
    }
    fn core(run: u32, traps: bool) -> Core {
        let info = DeviceInfo { name: "core".into(), bar0_size: 1 << 18, num_irqs: 1, mac: None, ipv4: None };
        Core { info, st: Mutex::new((run, vec![0; IMEM_BYTES / 4], false)), traps, writes: Mutex::new(Vec::new()) }
    }
    impl Device for Core {
        fn info(&self) -> &DeviceInfo {
            &self.info
        }
        fn read32(&self, off: u64) -> Result<u32> {
            let mut s = self.st.lock().unwrap();
            Ok(match off {
                o if o == FW_CORE_CTRL => s.0,
                o if o == FW_MBOX_STATUS => {
                    if s.0 == 1 && self.traps {
                        s.2 = true;
                    }
                    (if s.0 == 1 { mbox_status::RUNNING } else { 0 }) | (if s.2 { mbox_status::STOPPED } else { 0 })
                }
                _ => 0,
            })
        }
        fn write32(&self, off: u64, v: u32) -> Result<()> {
            self.writes.lock().unwrap().push((off, v));
            let mut s = self.st.lock().unwrap();
            if off == FW_CORE_CTRL {
                s.0 = v & 1;
            } else if (FW_IMEM..FW_IMEM + IMEM_BYTES as u64).contains(&off) {
                assert_eq!(s.0, 0, "IMEM written while the CPU runs");
                s.1[((off - FW_IMEM) / 4) as usize] = v;
            }
            Ok(())
        }
        fn dma_map(&self, _: u64, _: u64, _: u64, _: bool) -> Result<()> {
            Ok(())
        }
        fn dma_unmap(&self, _: u64, _: u64) -> Result<()> {
            Ok(())
        }
        fn set_irq(&self, _: u32, _: Option<std::os::fd::RawFd>) -> Result<()> {
            Ok(())
        }
        fn reset(&self) -> Result<()> {
            Ok(())
        }
    }

    fn image(text: &str) -> tempfile_path::TempImage {
        tempfile_path::TempImage::new(text)
    }

    mod tempfile_path {
        pub struct TempImage(pub std::path::PathBuf);
        impl TempImage {
            pub fn new(text: &str) -> TempImage {
                use std::sync::atomic::{AtomicU32, Ordering};
                static N: AtomicU32 = AtomicU32::new(0);
                let p = std::env::temp_dir().join(format!("hm-boot-{}-{}.hex", std::process::id(), N.fetch_add(1, Ordering::Relaxed)));
                std::fs::write(&p, text).unwrap();
                TempImage(p)
            }
        }
        impl Drop for TempImage {
            fn drop(&mut self) {
                let _ = std::fs::remove_file(&self.0);
            }
        }
    }

    #[test]
    fn the_image_format_and_its_bad_forms() {
        assert_eq!(parse_hex("00000013 // nop\n@4\n deadbeef 1\n", "x").unwrap(), vec![0x13, 0, 0, 0, 0xdead_beef, 1]);
        assert!(parse_hex("xyz\n", "f").unwrap_err().starts_with("f:1:"));
        assert!(parse_hex("@zz\n", "f").is_err());
        assert!(parse_hex(&format!("@{:x}\n", IMEM_BYTES / 4), "f").unwrap_err().contains("beyond"));
        let big = "0\n".repeat(IMEM_BYTES / 4 + 1);
        assert!(parse_hex(&big, "f").unwrap_err().contains("larger than"));
    }

    #[test]
    fn a_held_core_is_loaded_started_and_waited_for() {
        let img = image("00000013\n@2\n12345678\n");
        let d = core(0, false);
        assert!(start_if_held(&d, Some(&img.0)).unwrap());
        let s = d.st.lock().unwrap();
        assert_eq!((s.0, &s.1[..3]), (1, &[0x13, 0, 0x1234_5678][..]));
        let w = d.writes.lock().unwrap();
        assert_eq!(w.first(), Some(&(FW_CORE_CTRL, 0)), "the CPU held first");
        assert_eq!(w.last(), Some(&(FW_CORE_CTRL, 1)), "started last");
    }

    #[test]
    fn a_running_core_is_left_alone() {
        let d = core(1, false);
        assert!(!start_if_held(&d, None).unwrap());
        assert!(d.writes.lock().unwrap().is_empty());
    }

    #[test]
    fn no_image_a_missing_one_and_a_trap_at_boot_are_errors() {
        let e = start_if_held(&core(0, false), None).unwrap_err().to_string();
        assert!(e.contains("HEMATITE_FW"), "{e}");
        let e = start_if_held(&core(0, false), Some(Path::new("/nonexistent/fw.hex"))).unwrap_err().to_string();
        assert!(e.contains("/nonexistent/fw.hex"), "{e}");
        let img = image("");
        assert!(start_if_held(&core(0, false), Some(&img.0)).unwrap_err().to_string().contains("empty"));
        let img = image("00000013\n");
        let e = start_if_held(&core(0, true), Some(&img.0)).unwrap_err().to_string();
        assert!(e.contains("stopped at boot"), "{e}");
        // held with a trap recorded: nothing loaded, a reset named
        let d = core(0, false);
        d.st.lock().unwrap().2 = true;
        let e = start_if_held(&d, Some(&img.0)).unwrap_err().to_string();
        assert!(e.contains("function reset"), "{e}");
        assert!(d.writes.lock().unwrap().is_empty());
    }
}
