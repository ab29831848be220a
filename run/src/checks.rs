//! Pre-flight checks: what must hold before libibverbs can see and load the simulated NICs.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::fmt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::tree::{self, parse_gid};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Ok,
    Warn,
    Fail,
}

#[derive(Debug, Clone)]
pub struct Check {
    pub name: String,
    pub level: Level,
    pub msg: String,
}

impl Check {
    pub fn ok(name: &str, msg: impl Into<String>) -> Check {
        Check { name: name.into(), level: Level::Ok, msg: msg.into() }
    }
    pub fn warn(name: &str, msg: impl Into<String>) -> Check {
        Check { name: name.into(), level: Level::Warn, msg: msg.into() }
    }
    pub fn fail(name: &str, msg: impl Into<String>) -> Check {
        Check { name: name.into(), level: Level::Fail, msg: msg.into() }
    }
    pub fn from_result(name: &str, r: Result<String, String>) -> Check {
        match r {
            Ok(m) => Check::ok(name, m),
            Err(m) => Check::fail(name, m),
        }
    }
}

impl fmt::Display for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.level {
            Level::Ok if self.msg.is_empty() => write!(f, "{}: ok", self.name),
            Level::Ok => write!(f, "{}: ok ({})", self.name, self.msg),
            Level::Warn => write!(f, "{}: WARN: {}", self.name, self.msg),
            Level::Fail => write!(f, "{}: FAIL: {}", self.name, self.msg),
        }
    }
}

/// The rdma-core releases whose provider ABI (PABI 34, the v44 layout of the private
/// structures) the provider mirrors.
pub const IBVERBS_MIN: u32 = 36;
pub const IBVERBS_MAX: u32 = 56;

/// The upstream major number of a Debian version string such as `44.0-2` or `1:50.0-1`.
pub fn ibverbs_major(ver: &str) -> Option<u32> {
    let v = ver.trim();
    let v = v.split_once(':').map(|(_, r)| r).unwrap_or(v);
    let digits: String = v.chars().take_while(|c| c.is_ascii_digit()).collect();
    digits.parse().ok()
}

pub fn check_ibverbs_version(ver: Option<&str>) -> Check {
    const N: &str = "libibverbs1";
    let Some(ver) = ver.filter(|v| !v.trim().is_empty()) else {
        return Check::fail(N, "libibverbs1 is not installed (apt-get install libibverbs1 ibverbs-utils)");
    };
    match ibverbs_major(ver) {
        Some(m) if (IBVERBS_MIN..=IBVERBS_MAX).contains(&m) => Check::ok(N, ver.trim()),
        Some(m) => Check::fail(
            N,
            format!(
                "version {} (rdma-core {m}): the provider mirrors libibverbs' private driver structures \
                 as rdma-core {IBVERBS_MIN}..={IBVERBS_MAX} lay them out; outside that range it would not load \
                 or would crash. Install a libibverbs1 of rdma-core {IBVERBS_MIN}..={IBVERBS_MAX} (Debian 12 ships 44)",
                ver.trim()
            ),
        ),
        None => Check::fail(N, format!("cannot read the version `{}`", ver.trim())),
    }
}

/// Asks dpkg for the installed libibverbs1.
pub fn dpkg_ibverbs_version() -> Option<String> {
    let o = Command::new("dpkg-query").args(["-W", "-f", "${Version}", "libibverbs1"]).output().ok()?;
    o.status.success().then(|| String::from_utf8_lossy(&o.stdout).trim().to_string())
}

/// ib_core loaded: libibverbs then lists devices over netlink and never reads the fake tree.
/// Not loaded but loadable: the first netlink RDMA socket can load it (a warning).
pub fn check_ib_core(sys_module: &Path, modules_dep: Option<&Path>, modprobe_d: &[PathBuf]) -> Check {
    const N: &str = "ib_core";
    if sys_module.join("ib_core").exists() {
        return Check::fail(
            N,
            "the kernel module ib_core is loaded: libibverbs then enumerates RDMA devices over netlink, \
             which knows nothing of the simulated NICs, and never reads the fake sysfs tree (the NICs \
             vanish). Unload it with its users (`modprobe -r ib_uverbs rdma_ucm ib_core`, or rmmod the \
             RDMA drivers first) and keep it out with `echo 'install ib_core /bin/false' > \
             /etc/modprobe.d/hematite.conf`; in a container, ask the host to do it",
        );
    }
    let present = modules_dep
        .and_then(|p| std::fs::read_to_string(p).ok())
        .map(|s| s.lines().any(|l| l.split(':').next().is_some_and(|m| m.ends_with("/ib_core.ko") || m.contains("/ib_core.ko."))))
        .unwrap_or(false);
    if !present {
        return Check::ok(N, "not loaded, and not installed for this kernel");
    }
    let blocked = modprobe_d.iter().any(|d| {
        std::fs::read_dir(d)
            .map(|rd| {
                rd.filter_map(|e| e.ok())
                    .filter(|e| e.file_name().to_string_lossy().ends_with(".conf"))
                    .filter_map(|e| std::fs::read_to_string(e.path()).ok())
                    .any(|s| {
                        s.lines().any(|l| {
                            let w: Vec<&str> = l.split_whitespace().collect();
                            matches!(w.as_slice(), ["blacklist", "ib_core", ..] | ["install", "ib_core", ..])
                        })
                    })
            })
            .unwrap_or(false)
    });
    if blocked {
        Check::ok(N, "not loaded; autoloading blocked in modprobe.d")
    } else {
        Check::warn(
            N,
            "not loaded, but installed and not blocked: a program opening a netlink RDMA socket can make the \
             kernel load it, after which the simulated NICs vanish; block it with `echo 'install ib_core \
             /bin/false' > /etc/modprobe.d/hematite.conf`",
        )
    }
}

/// NETLINK_RDMA: the netlink family libibverbs tries before sysfs.
const NETLINK_RDMA: libc::c_int = 20;

/// The same check on this machine. When ib_core is neither loaded nor loadable, a
/// NETLINK_RDMA socket is also tried: it must fail (else the kernel has RDMA netlink, e.g. a
/// built-in ib_core, and libibverbs never reads the tree). Only then, because opening one can
/// make the kernel load ib_core.
pub fn check_ib_core_here() -> Check {
    let rel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let dep = PathBuf::from(format!("/lib/modules/{}/modules.dep", rel.trim()));
    let c = check_ib_core(
        Path::new("/sys/module"),
        Some(&dep),
        &[PathBuf::from("/etc/modprobe.d"), PathBuf::from("/lib/modprobe.d"), PathBuf::from("/run/modprobe.d")],
    );
    if c.level != Level::Ok {
        return c;
    }
    // SAFETY: socket(2); the descriptor is closed at once.
    let fd = unsafe { libc::socket(libc::AF_NETLINK, libc::SOCK_RAW | libc::SOCK_CLOEXEC, NETLINK_RDMA) };
    if fd >= 0 {
        // SAFETY: fd is ours.
        unsafe { libc::close(fd) };
        return Check::fail(
            "ib_core",
            "a NETLINK_RDMA socket opens: this kernel has RDMA netlink (ib_core built in, or loaded under \
             another name), so libibverbs lists devices over netlink and never reads the fake tree; use a \
             kernel without it, or keep the programs from opening that socket",
        );
    }
    let e = std::io::Error::last_os_error().to_string();
    Check::ok("ib_core", format!("{}; a NETLINK_RDMA socket is refused: {}", c.msg, e.split(" (os error").next().unwrap_or(&e)))
}

fn read_trim(p: &Path) -> Result<String, String> {
    std::fs::read_to_string(p).map(|s| s.trim_end_matches('\n').to_string()).map_err(|e| format!("{}: {e}", p.display()))
}

/// Checks a sysfs view the way libibverbs reads it: the ABI versions, each uverbs device's
/// `ibdev` and `dev` (= `full`, the rdev of /dev/full), the GID files (one type per GID, each
/// `RoCE v2` or `IB/RoCE v1`, well formed), the GUID. Returns the device names.
pub fn verify_tree(view: &Path, full: (u32, u32)) -> Result<Vec<String>, String> {
    let cls = view.join("class");
    let abi: u32 = read_trim(&cls.join("infiniband_verbs/abi_version"))?
        .trim()
        .parse()
        .map_err(|_| format!("{}: not a number", cls.join("infiniband_verbs/abi_version").display()))?;
    if !(3..=6).contains(&abi) {
        return Err(format!("infiniband_verbs/abi_version is {abi}; libibverbs accepts 3..=6"));
    }
    let mut names = Vec::new();
    let uv_dir = cls.join("infiniband_verbs");
    let mut uvs: Vec<String> = std::fs::read_dir(&uv_dir)
        .map_err(|e| format!("{}: {e}", uv_dir.display()))?
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    uvs.sort();
    if uvs.is_empty() {
        return Err(format!("{} lists no devices", uv_dir.display()));
    }
    for uv in uvs {
        let d = uv_dir.join(&uv);
        let ibdev = read_trim(&d.join("ibdev"))?;
        let dev = read_trim(&d.join("dev"))?;
        let want = format!("{}:{}", full.0, full.1);
        if dev != want {
            return Err(format!("{uv}/dev is `{dev}`, but /dev/full is {want}: libibverbs would refuse the device node"));
        }
        let _: u32 = read_trim(&d.join("abi_version"))?.parse().map_err(|_| format!("{uv}/abi_version: not a number"))?;
        let ib = cls.join("infiniband").join(&ibdev);
        if !ib.is_dir() {
            return Err(format!("{uv}/ibdev names {ibdev}, but {} does not exist", ib.display()));
        }
        let guid = read_trim(&ib.join("node_guid"))?;
        let gp: Vec<&str> = guid.split(':').collect();
        if gp.len() != 4 || gp.iter().any(|g| g.len() != 4 || !g.bytes().all(|b| b.is_ascii_hexdigit())) {
            return Err(format!("{ibdev}/node_guid `{guid}` is not xxxx:xxxx:xxxx:xxxx"));
        }
        let port = ib.join("ports/1");
        let count = |sub: &str| -> Result<BTreeSet<u32>, String> {
            let p = port.join(sub);
            Ok(std::fs::read_dir(&p)
                .map_err(|e| format!("{}: {e}", p.display()))?
                .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect())
        };
        let gids = count("gids")?;
        let types = count("gid_attrs/types")?;
        if gids.is_empty() {
            return Err(format!("{ibdev}: no GIDs"));
        }
        if gids != types {
            return Err(format!("{ibdev}: {} gids but {} gid_attrs/types files; every GID needs its type", gids.len(), types.len()));
        }
        if gids.len() != tree::GID_TBL_LEN {
            return Err(format!(
                "{ibdev}: {} GID files, but the firmware reports gid_tbl_len {}; programs query every index below it",
                gids.len(),
                tree::GID_TBL_LEN
            ));
        }
        if gids.len() != *gids.iter().max().unwrap() as usize + 1 {
            return Err(format!("{ibdev}: GID indices are not 0..{}", gids.len()));
        }
        for i in &gids {
            let g = read_trim(&port.join(format!("gids/{i}")))?;
            if parse_gid(&g).is_none() {
                return Err(format!("{ibdev}: gids/{i} `{g}` is not 8 groups of 4 hex digits"));
            }
            let t = read_trim(&port.join(format!("gid_attrs/types/{i}")))?;
            if t != "RoCE v2" && t != "IB/RoCE v1" {
                return Err(format!("{ibdev}: gid_attrs/types/{i} is `{t}`; libibverbs wants `RoCE v2` or `IB/RoCE v1`"));
            }
        }
        read_trim(&port.join("pkeys/0"))?;
        let backend = read_trim(&ib.join("hematite_backend"))?;
        match backend.split_once(':') {
            Some(("sim", p)) if Path::new(p).is_absolute() => {}
            Some(("vfio", _)) => {}
            _ => return Err(format!("{ibdev}/hematite_backend `{backend}` is neither sim:<absolute socket> nor vfio:...")),
        }
        names.push(ibdev);
    }
    Ok(names)
}

/// The /dev/infiniband/uverbsN links, as hematite-run needs them: links to /dev/full.
/// Missing ones are created (root, or write access to `dev_dir`); a link elsewhere or a
/// real node is refused.
pub fn ensure_dev_links(dev_dir: &Path, names: &[String]) -> Result<(), String> {
    let mut missing = Vec::new();
    for uv in names {
        let p = dev_dir.join(uv);
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_symlink() => {
                let to = std::fs::read_link(&p).map_err(|e| format!("{}: {e}", p.display()))?;
                if to != Path::new("/dev/full") {
                    return Err(format!(
                        "{} points to {}, not /dev/full; hematite-run does not replace it. If it is a \
                         leftover, remove it (rm {}) and run again",
                        p.display(),
                        to.display(),
                        p.display()
                    ));
                }
            }
            Ok(_) => {
                return Err(format!(
                    "{} exists and is not a link to /dev/full (a kernel RDMA driver's device node?); \
                     hematite-run does not replace it: the kernel's RDMA stack and the simulated NICs \
                     cannot share device names",
                    p.display()
                ))
            }
            Err(_) => missing.push(p),
        }
    }
    for p in missing {
        let r = std::fs::create_dir_all(dev_dir).and_then(|_| std::os::unix::fs::symlink("/dev/full", &p));
        if let Err(e) = r {
            let hint = if e.kind() == std::io::ErrorKind::PermissionDenied {
                format!(
                    "run hematite-run once as root, or as root: mkdir -p {} && ln -s /dev/full {}",
                    dev_dir.display(),
                    p.display()
                )
            } else {
                "check that the directory is writable".to_string()
            };
            // A concurrent hematite-run may have made the same link.
            if std::fs::read_link(&p).map(|t| t == Path::new("/dev/full")).unwrap_or(false) {
                continue;
            }
            return Err(format!("cannot create {} -> /dev/full: {e}; {hint}", p.display()));
        }
    }
    Ok(())
}

/// Each uverbs node must reach a character device with /dev/full's rdev.
pub fn check_dev_nodes(dev_dir: &Path, names: &[String], full: (u32, u32)) -> Check {
    const N: &str = "device nodes";
    for uv in names {
        let p = dev_dir.join(uv);
        match tree::char_rdev(&p) {
            Ok(r) if r == full => {}
            Ok(r) => return Check::fail(N, format!("{} is {}:{}, not /dev/full ({}:{})", p.display(), r.0, r.1, full.0, full.1)),
            Err(e) => {
                return Check::fail(N, format!("{e}: libibverbs silently drops a device without its node; hematite-run creates the link when run as root"))
            }
        }
    }
    Check::ok(N, format!("{} -> /dev/full", names.iter().map(|n| dev_dir.join(n).display().to_string()).collect::<Vec<_>>().join(", ")))
}

/// libibverbs ignores SYSFS_PATH and RDMAV_DRIVERS in setuid/setgid programs.
pub fn check_program(prog: &std::ffi::OsStr, path_var: Option<&std::ffi::OsStr>) -> Check {
    const N: &str = "program";
    let Some(p) = crate::locate::which(prog, path_var) else {
        return Check::fail(N, format!("{} not found (not a file, or not in PATH)", prog.to_string_lossy()));
    };
    match std::fs::metadata(&p) {
        Ok(m) if m.permissions().mode() & 0o6000 != 0 => Check::fail(
            N,
            format!(
                "{} is setuid/setgid: libibverbs then ignores SYSFS_PATH and RDMAV_DRIVERS and the loader \
                 ignores LD_PRELOAD, so the simulated NICs would not appear; run a copy without the bit",
                p.display()
            ),
        ),
        Ok(_) => Check::ok(N, p.display().to_string()),
        Err(e) => Check::fail(N, format!("{}: {e}", p.display())),
    }
}

/// Whether this process has CAP_IPC_LOCK in its effective set (then, as for the kernel's
/// pinning, the provider does not apply RLIMIT_MEMLOCK).
fn has_cap_ipc_lock() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find_map(|l| l.strip_prefix("CapEff:")).and_then(|v| u64::from_str_radix(v.trim(), 16).ok()))
        .is_some_and(|c| c & (1 << 14) != 0)
}

/// The locked-memory limit: a warning below 64 MiB unless the process has CAP_IPC_LOCK. The
/// provider applies the limit to what programs register (as the kernel does to pinned memory,
/// in simulation too), unless the program has CAP_IPC_LOCK.
pub fn check_memlock() -> Check {
    const N: &str = "RLIMIT_MEMLOCK";
    let mut r = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: r is a valid rlimit for the call.
    if unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut r) } != 0 {
        return Check::warn(N, "cannot read the limit");
    }
    let show = |v: libc::rlim_t| if v == libc::RLIM_INFINITY { "unlimited".to_string() } else { format!("{} KiB", v / 1024) };
    let msg = format!("soft {}, hard {}", show(r.rlim_cur), show(r.rlim_max));
    if has_cap_ipc_lock() {
        Check::ok(N, format!("{msg} (not applied: CAP_IPC_LOCK)"))
    } else if r.rlim_cur != libc::RLIM_INFINITY && r.rlim_cur < 64 << 20 {
        Check::warn(
            N,
            format!(
                "{msg}: below 64 MiB; programs registering large buffers may fail. Raise it with `ulimit -l unlimited` \
                 (root), LimitMEMLOCK= in a systemd unit, or /etc/security/limits.conf"
            ),
        )
    } else {
        Check::ok(N, msg)
    }
}

/// The provider library: found, and a 64-bit ELF shared object.
pub fn check_provider(found: &Result<PathBuf, String>) -> Check {
    const N: &str = "provider";
    match found {
        Ok(p) => match crate::locate::check_elf_shared(p) {
            Ok(()) => Check::ok(N, p.display().to_string()),
            Err(e) => Check::fail(N, format!("{e}; rebuild it with `cargo build --release -p hematite-verbs`")),
        },
        Err(e) => Check::fail(N, e.clone()),
    }
}

/// `IBV_SHOW_WARNINGS=1 ibv_devices` under the program's environment: every expected device
/// listed, nothing printed on stderr.
pub fn check_ibv_devices(env: &[(String, OsString)], expected: &[String]) -> Check {
    const N: &str = "ibv_devices";
    let Some(exe) = crate::locate::which("ibv_devices".as_ref(), std::env::var_os("PATH").as_deref()) else {
        return Check::fail(N, "ibv_devices is not installed, so the device list cannot be checked (apt-get install ibverbs-utils)");
    };
    let mut c = Command::new(&exe);
    for (k, v) in env {
        c.env(k, v);
    }
    c.env("IBV_SHOW_WARNINGS", "1");
    let o = match c.output() {
        Ok(o) => o,
        Err(e) => return Check::fail(N, format!("{}: {e}", exe.display())),
    };
    let out = String::from_utf8_lossy(&o.stdout);
    let err = String::from_utf8_lossy(&o.stderr);
    let listed: BTreeSet<&str> = out.lines().filter_map(|l| l.split_whitespace().next()).collect();
    let missing: Vec<&String> = expected.iter().filter(|d| !listed.contains(d.as_str())).collect();
    if !err.trim().is_empty() || !missing.is_empty() || !o.status.success() {
        let mut m = String::new();
        if !missing.is_empty() {
            m.push_str(&format!("not listed: {}. ", missing.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")));
        }
        if !err.trim().is_empty() {
            m.push_str(&format!("it printed: {}. ", err.trim().replace('\n', " | ")));
        }
        if err.contains("no userspace device-specific driver") {
            m.push_str("The provider did not load or did not claim the device: check the provider line above and that it is a current build. ");
        }
        if !o.status.success() {
            m.push_str(&format!("exit status {}. ", o.status));
        }
        return Check::fail(N, m.trim_end().to_string());
    }
    Check::ok(N, format!("lists {}", expected.join(", ")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::{build_tree, install_tree, Layout, View};

    fn tmpdir(tag: &str) -> PathBuf {
        crate::test_dir(&format!("chk-{tag}"))
    }

    #[test]
    fn versions() {
        assert_eq!(ibverbs_major("44.0-2"), Some(44));
        assert_eq!(ibverbs_major("1:50.0-1ubuntu1"), Some(50));
        assert_eq!(ibverbs_major("x"), None);
        assert_eq!(check_ibverbs_version(Some("44.0-2")).level, Level::Ok);
        assert_eq!(check_ibverbs_version(Some("36.0-1")).level, Level::Ok);
        assert_eq!(check_ibverbs_version(Some("56.1-1")).level, Level::Ok);
        assert_eq!(check_ibverbs_version(Some("35.0-1")).level, Level::Fail);
        assert_eq!(check_ibverbs_version(Some("57.0-1")).level, Level::Fail);
        assert_eq!(check_ibverbs_version(None).level, Level::Fail);
        assert_eq!(check_ibverbs_version(Some("")).level, Level::Fail);
        let c = check_ibverbs_version(Some("60.0-1")).to_string();
        assert!(c.starts_with("libibverbs1: FAIL: version 60.0-1"), "{c}");
    }

    #[test]
    fn ib_core() {
        let d = tmpdir("ibcore");
        let module = d.join("module");
        std::fs::create_dir_all(&module).unwrap();
        let dep = d.join("modules.dep");
        std::fs::write(&dep, "kernel/drivers/net/dummy.ko:\n").unwrap();
        assert_eq!(check_ib_core(&module, Some(&dep), &[]).level, Level::Ok);
        std::fs::write(&dep, "kernel/drivers/infiniband/core/ib_core.ko.xz:\n").unwrap();
        assert_eq!(check_ib_core(&module, Some(&dep), &[]).level, Level::Warn);
        let mp = d.join("modprobe.d");
        std::fs::create_dir_all(&mp).unwrap();
        std::fs::write(mp.join("hematite.conf"), "# x\ninstall ib_core /bin/false\n").unwrap();
        assert_eq!(check_ib_core(&module, Some(&dep), std::slice::from_ref(&mp)).level, Level::Ok);
        std::fs::create_dir_all(module.join("ib_core")).unwrap();
        let c = check_ib_core(&module, Some(&dep), &[mp]);
        assert_eq!(c.level, Level::Fail);
        assert!(c.msg.contains("netlink"));
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn tree_verification() {
        let d = tmpdir("tree");
        let l = Layout::new(d.clone(), 2).unwrap();
        let t = build_tree(&l, View::All, (1, 7)).unwrap();
        install_tree(&l.sys(), "all", &t).unwrap();
        let v = l.view_dir(View::All);
        assert_eq!(verify_tree(&v, (1, 7)).unwrap(), ["hematite0", "hematite1"]);
        // wrong /dev/full numbers
        assert!(verify_tree(&v, (1, 8)).unwrap_err().contains("/dev/full"));
        // a missing type file
        let types = v.join("class/infiniband/hematite1/ports/1/gid_attrs/types");
        std::fs::remove_file(types.join("3")).unwrap();
        assert!(verify_tree(&v, (1, 7)).unwrap_err().contains("types"));
        std::fs::write(types.join("3"), "RoCE v3\n").unwrap();
        assert!(verify_tree(&v, (1, 7)).unwrap_err().contains("RoCE v3"));
        std::fs::write(types.join("3"), "RoCE v2\n").unwrap();
        verify_tree(&v, (1, 7)).unwrap();
        std::fs::write(v.join("class/infiniband_verbs/abi_version"), "7\n").unwrap();
        assert!(verify_tree(&v, (1, 7)).unwrap_err().contains("abi_version"));
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn dev_links() {
        let d = tmpdir("dev");
        let dev = d.join("infiniband");
        let names = vec!["uverbs0".to_string(), "uverbs1".to_string()];
        ensure_dev_links(&dev, &names).unwrap();
        assert_eq!(std::fs::read_link(dev.join("uverbs0")).unwrap(), Path::new("/dev/full"));
        ensure_dev_links(&dev, &names).unwrap(); // idempotent
        assert_eq!(check_dev_nodes(&dev, &names, tree::char_rdev(Path::new("/dev/full")).unwrap()).level, Level::Ok);
        assert_eq!(check_dev_nodes(&dev, &["uverbs9".to_string()], (1, 7)).level, Level::Fail);
        // refusals: a link elsewhere, something that is not a link
        std::fs::remove_file(dev.join("uverbs1")).unwrap();
        std::os::unix::fs::symlink("/dev/null", dev.join("uverbs1")).unwrap();
        let e = ensure_dev_links(&dev, &names).unwrap_err();
        assert!(e.contains("points to /dev/null"), "{e}");
        assert_eq!(std::fs::read_link(dev.join("uverbs1")).unwrap(), Path::new("/dev/null"), "left alone");
        std::fs::remove_file(dev.join("uverbs1")).unwrap();
        std::fs::write(dev.join("uverbs1"), "").unwrap();
        assert!(ensure_dev_links(&dev, &names).unwrap_err().contains("not a link"));
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn programs() {
        assert_eq!(check_program("sh".as_ref(), Some("/usr/bin:/bin".as_ref())).level, Level::Ok);
        assert_eq!(check_program("no-such-hm-program".as_ref(), Some("/bin".as_ref())).level, Level::Fail);
        let d = tmpdir("suid");
        let p = d.join("prog");
        std::fs::write(&p, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o4755)).unwrap();
        let c = check_program(p.as_os_str(), None);
        assert_eq!(c.level, Level::Fail);
        assert!(c.msg.contains("setuid"));
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn ibv_devices_without_provider() {
        if crate::locate::which("ibv_devices".as_ref(), std::env::var_os("PATH").as_deref()).is_none() {
            return;
        }
        let d = tmpdir("ibvdev");
        let l = Layout::new(d.clone(), 2).unwrap();
        let t = build_tree(&l, View::All, tree::char_rdev(Path::new("/dev/full")).unwrap()).unwrap();
        install_tree(&l.sys(), "all", &t).unwrap();
        let env = vec![
            ("SYSFS_PATH".to_string(), l.view_dir(View::All).into_os_string()),
            ("RDMAV_DRIVERS".to_string(), d.join("lib/libnothing").into_os_string()),
        ];
        let c = check_ibv_devices(&env, &["hematite0".to_string()]);
        assert_eq!(c.level, Level::Fail, "{c}");
        assert!(c.msg.contains("not listed: hematite0"), "{c}");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn display() {
        assert_eq!(Check::ok("a", "").to_string(), "a: ok");
        assert_eq!(Check::ok("a", "x").to_string(), "a: ok (x)");
        assert_eq!(Check::warn("a", "x").to_string(), "a: WARN: x");
        assert_eq!(Check::fail("a", "x").to_string(), "a: FAIL: x");
        let _ = check_memlock().to_string();
    }
}
