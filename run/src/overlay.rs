//! The mount-namespace overlay of /sys/class: some programs (NCCL, the pyverbs tests, perftest
//! -W) read /sys/class/infiniband themselves and ignore SYSFS_PATH. In the program's own mount
//! namespace /sys/class becomes a tmpfs holding the real class directories (bound back one by
//! one) plus the fake `infiniband` and `infiniband_verbs`, and `pci_bus` holds the host's buses
//! and the simulated NICs' (NCCL finds a device's PCI path through it). Nothing of it is visible
//! outside the program's namespace: / is made private first, so no mount propagates back.
//!
//! Everything is prepared (paths as C strings, the list of class directories) before the fork;
//! [`Overlay::apply`] runs between fork and exec and only makes system calls.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

pub const SYS_CLASS: &str = "/sys/class";

/// The fake directories a view provides.
pub const FAKE_CLASSES: [&str; 2] = ["infiniband", "infiniband_verbs"];

/// The class whose entries are merged: the host's links and the view's (simulated buses).
pub const MERGED_CLASS: &str = "pci_bus";

pub struct Overlay {
    sys_class: CString,
    aside: CString,
    /// (source under `aside`, target under /sys/class) for each real class directory.
    real: Vec<(CString, CString)>,
    /// (fake directory of the view, target under /sys/class).
    fake: Vec<(CString, CString)>,
    /// The merged class directory under /sys/class and its entries: (link, target) for the
    /// host's links and then the view's (a view name the host has is left to the host).
    merged: Option<(CString, Vec<(CString, CString)>)>,
}

fn c(p: &Path) -> Result<CString, String> {
    CString::new(p.as_os_str().as_bytes()).map_err(|_| format!("{}: path holds a NUL byte", p.display()))
}

impl Overlay {
    /// `aside`: an existing empty directory (the real /sys/class is bound there for a moment,
    /// inside the namespace only); `view`: the fake tree's root (holding `class/`).
    pub fn prepare(aside: &Path, view: &Path) -> Result<Overlay, String> {
        std::fs::create_dir_all(aside).map_err(|e| format!("{}: {e}", aside.display()))?;
        let sys_class = Path::new(SYS_CLASS);
        let mut names: Vec<_> = std::fs::read_dir(sys_class)
            .map_err(|e| format!("{SYS_CLASS}: {e}"))?
            .filter_map(|e| e.ok())
            .filter(|e| e.file_type().map(|t| t.is_dir()).unwrap_or(false))
            .map(|e| e.file_name())
            .filter(|n| !FAKE_CLASSES.iter().any(|f| n == *f))
            .collect();
        let view_merged = view.join("class").join(MERGED_CLASS);
        let merged = if view_merged.is_dir() {
            names.retain(|n| n != MERGED_CLASS);
            let dst = sys_class.join(MERGED_CLASS);
            let mut links = Vec::new();
            let mut seen = std::collections::BTreeSet::new();
            for dir in [dst.clone(), view_merged] {
                let mut ents: Vec<_> = match std::fs::read_dir(&dir) {
                    Ok(r) => r.filter_map(|e| e.ok()).collect(),
                    Err(e) if dir == dst && e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
                    Err(e) => return Err(format!("{}: {e}", dir.display())),
                };
                ents.sort_by_key(|e| e.file_name());
                for e in ents {
                    let Ok(to) = std::fs::read_link(e.path()) else { continue };
                    if seen.insert(e.file_name()) {
                        links.push((c(&dst.join(e.file_name()))?, c(&to)?));
                    }
                }
            }
            Some((c(&dst)?, links))
        } else {
            None
        };
        names.sort();
        let mut real = Vec::new();
        for n in names {
            real.push((c(&aside.join(&n))?, c(&sys_class.join(&n))?));
        }
        let mut fake = Vec::new();
        for f in FAKE_CLASSES {
            let src = view.join("class").join(f);
            if !src.is_dir() {
                return Err(format!("{} is missing", src.display()));
            }
            fake.push((c(&src)?, c(&sys_class.join(f))?));
        }
        Ok(Overlay { sys_class: c(sys_class)?, aside: c(aside)?, real, fake, merged })
    }

    /// Performs the overlay in the calling process (between fork and exec): new mount
    /// namespace, / private, the real /sys/class aside, a tmpfs on /sys/class with the real
    /// class directories bound back and the fake ones bound read-only, the aside mount
    /// detached, the tmpfs made read-only.
    ///
    /// # Safety
    /// Meant for `pre_exec`: it allocates nothing and only makes system calls; it changes the
    /// calling process's mount namespace for good.
    pub unsafe fn apply(&self) -> io::Result<()> {
        use libc::{mount, umount2, MNT_DETACH, MS_BIND, MS_NODEV, MS_NOEXEC, MS_NOSUID, MS_PRIVATE, MS_RDONLY, MS_REC, MS_REMOUNT};
        let null = std::ptr::null();
        let fail = |what: &[u8]| -> io::Error {
            let e = io::Error::last_os_error();
            let _ = libc::write(2, b"hematite-run: overlay: ".as_ptr().cast(), 23);
            let _ = libc::write(2, what.as_ptr().cast(), what.len());
            let _ = libc::write(2, b" failed\n".as_ptr().cast(), 8);
            e
        };
        if libc::unshare(libc::CLONE_NEWNS) != 0 {
            return Err(fail(b"unshare(CLONE_NEWNS)"));
        }
        if mount(null, c"/".as_ptr(), null, MS_REC | MS_PRIVATE, null.cast()) != 0 {
            return Err(fail(b"making / private"));
        }
        if mount(self.sys_class.as_ptr(), self.aside.as_ptr(), null, MS_BIND | MS_REC, null.cast()) != 0 {
            return Err(fail(b"binding /sys/class aside"));
        }
        if mount(c"hematite".as_ptr(), self.sys_class.as_ptr(), c"tmpfs".as_ptr(), MS_NOSUID | MS_NODEV | MS_NOEXEC, c"mode=755".as_ptr().cast()) != 0 {
            return Err(fail(b"mounting a tmpfs on /sys/class"));
        }
        for (src, dst) in self.real.iter().chain(self.fake.iter()) {
            if libc::mkdir(dst.as_ptr(), 0o755) != 0 && *libc::__errno_location() != libc::EEXIST {
                return Err(fail(b"mkdir under /sys/class"));
            }
            if mount(src.as_ptr(), dst.as_ptr(), null, MS_BIND | MS_REC, null.cast()) != 0 {
                return Err(fail(b"binding a class directory"));
            }
        }
        for (_, dst) in &self.fake {
            if mount(null, dst.as_ptr(), null, MS_REMOUNT | MS_BIND | MS_RDONLY, null.cast()) != 0 {
                return Err(fail(b"making the fake tree read-only"));
            }
        }
        if let Some((dir, links)) = &self.merged {
            if libc::mkdir(dir.as_ptr(), 0o755) != 0 && *libc::__errno_location() != libc::EEXIST {
                return Err(fail(b"mkdir of the merged class"));
            }
            for (link, to) in links {
                if libc::symlink(to.as_ptr(), link.as_ptr()) != 0 {
                    return Err(fail(b"a link in the merged class"));
                }
            }
        }
        if umount2(self.aside.as_ptr(), MNT_DETACH) != 0 {
            return Err(fail(b"detaching the aside copy"));
        }
        if mount(null, self.sys_class.as_ptr(), null, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, null.cast()) != 0 {
            return Err(fail(b"making /sys/class read-only"));
        }
        Ok(())
    }
}
