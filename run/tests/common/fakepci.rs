//! A stand-in sysfs holding PCI functions, for the tests of `hematite-run --cards` (included
//! by `src/cards.rs`'s unit tests and by `tests/launch.rs`).

use std::path::{Path, PathBuf};

/// Creates `<dir>/sysroot` with the functions `(bdf, vendor, device, driver)` laid out as the
/// kernel does: the function's directory under `devices/pci0000:00`, a link to it in
/// `bus/pci/devices`, its `driver` a link into `bus/pci/drivers`. Returns the root.
pub fn fake_pci(dir: &Path, fns: &[(&str, u16, u16, Option<&str>)]) -> PathBuf {
    let sys = dir.join("sysroot");
    std::fs::create_dir_all(sys.join("bus/pci/devices")).unwrap();
    for (bdf, vendor, device, drv) in fns {
        let d = sys.join("devices/pci0000:00").join(bdf);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("vendor"), format!("0x{vendor:04x}\n")).unwrap();
        std::fs::write(d.join("device"), format!("0x{device:04x}\n")).unwrap();
        if let Some(drv) = drv {
            std::fs::create_dir_all(sys.join("bus/pci/drivers").join(drv)).unwrap();
            std::os::unix::fs::symlink(format!("../../../bus/pci/drivers/{drv}"), d.join("driver"))
                .unwrap();
        }
        std::os::unix::fs::symlink(
            format!("../../../devices/pci0000:00/{bdf}"),
            sys.join("bus/pci/devices").join(bdf),
        )
        .unwrap();
    }
    sys
}
