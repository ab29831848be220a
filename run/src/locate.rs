//! Finding the simulator, the firmware image and the provider library.

use std::path::{Path, PathBuf};

/// The provider's file name as cargo builds it.
pub const PROVIDER_FILE: &str = "libhematite_verbs.so";

/// Where the packages put the firmware image and the provider, relative to the directory of
/// `hematite-run` (`/usr/bin`; `./hematite package`, docs/packages.md).
pub const INSTALLED_FW: &str = "../share/hematite/firmware.hex";
pub const INSTALLED_PROVIDER: &str = "../lib/x86_64-linux-gnu/libibverbs/libhematite-rdmav34.so";

fn exe_dir() -> Option<PathBuf> {
    std::env::current_exe().ok()?.canonicalize().ok()?.parent().map(Path::to_path_buf)
}

fn is_repo(d: &Path) -> bool {
    d.join("hematite").is_file() && d.join("Cargo.toml").is_file()
}

/// The Hematite checkout: the first directory above the executable holding `hematite` and
/// `Cargo.toml`; failing that (a target directory outside the checkout), the checkout this
/// binary was built from, if it is still there.
pub fn repo() -> Option<PathBuf> {
    if let Some(d) = exe_dir() {
        if let Some(r) = d.ancestors().find(|a| is_repo(a)) {
            return Some(r.to_path_buf());
        }
    }
    let built = Path::new(env!("CARGO_MANIFEST_DIR")).parent()?;
    is_repo(built).then(|| built.to_path_buf())
}

fn from_env(var: &str) -> Result<Option<PathBuf>, String> {
    match std::env::var_os(var) {
        Some(v) if !v.is_empty() => {
            let p = PathBuf::from(v);
            if p.is_file() {
                Ok(Some(p))
            } else {
                Err(format!("{var}={} does not exist (or is not a file)", p.display()))
            }
        }
        _ => Ok(None),
    }
}

/// Looks in `$var`, then at `beside_exe` (relative to the executable's directory: beside it, or
/// where the packages install it), then under the checkout; the error lists
/// where it looked and how to build the thing.
fn find(var: &str, beside_exe: &[&str], in_repo: &str, what: &str, build: &str) -> Result<PathBuf, String> {
    if let Some(p) = from_env(var)? {
        return Ok(p);
    }
    let mut looked = Vec::new();
    if let Some(d) = exe_dir() {
        for name in beside_exe {
            let p = d.join(name);
            if p.is_file() {
                return Ok(p);
            }
            looked.push(p);
        }
    }
    match repo() {
        Some(r) => {
            let p = r.join(in_repo);
            if p.is_file() {
                return Ok(p);
            }
            looked.push(p);
        }
        None => looked.push(PathBuf::from(format!("<checkout>/{in_repo} (no checkout found above the executable)"))),
    }
    let looked: Vec<String> = looked.iter().map(|p| p.display().to_string()).collect();
    Err(format!("{what} not found (looked at {}); build it with `{build}` in the checkout, or set {var}", looked.join(", ")))
}

/// `hematite-sim`: $HEMATITE_SIM, next to hematite-run, <checkout>/target/release/.
pub fn sim() -> Result<PathBuf, String> {
    find("HEMATITE_SIM", &["hematite-sim"], "target/release/hematite-sim", "hematite-sim", "cargo build --release -p hematite-sim")
}

/// The waveform build of `hematite-sim` (for `--trace`): $HEMATITE_SIM, else
/// <checkout>/target/trace/release/ (`./hematite trace-build`).
pub fn sim_traced() -> Result<PathBuf, String> {
    find("HEMATITE_SIM", &[], "target/trace/release/hematite-sim", "the waveform build of hematite-sim", "./hematite trace-build")
}

/// The firmware image: $HEMATITE_FW, ../share/hematite/ (packages), <checkout>/build/fw/firmware.hex.
pub fn firmware() -> Result<PathBuf, String> {
    find("HEMATITE_FW", &[INSTALLED_FW], "build/fw/firmware.hex", "the firmware image", "./hematite fw")
}

/// The provider: $HEMATITE_PROVIDER, next to hematite-run, libibverbs' provider directory
/// (packages), <checkout>/target/release/.
pub fn provider() -> Result<PathBuf, String> {
    find(
        "HEMATITE_PROVIDER",
        &[PROVIDER_FILE, INSTALLED_PROVIDER],
        &format!("target/release/{PROVIDER_FILE}"),
        "the verbs provider",
        "cargo build --release -p hematite-verbs",
    )
}

/// What an ELF header says about a file: Ok for a 64-bit shared object (ET_DYN).
pub fn check_elf_shared(p: &Path) -> Result<(), String> {
    use std::io::Read;
    let mut h = [0u8; 18];
    let mut f = std::fs::File::open(p).map_err(|e| format!("{}: {e}", p.display()))?;
    f.read_exact(&mut h).map_err(|_| format!("{} is too short to be an ELF file", p.display()))?;
    if &h[..4] != b"\x7fELF" {
        return Err(format!("{} is not an ELF file", p.display()));
    }
    if h[4] != 2 {
        return Err(format!("{} is not a 64-bit ELF file", p.display()));
    }
    let ty = if h[5] == 1 { u16::from_le_bytes([h[16], h[17]]) } else { u16::from_be_bytes([h[16], h[17]]) };
    if ty != 3 {
        return Err(format!("{} is an ELF file but not a shared object (e_type {ty})", p.display()));
    }
    Ok(())
}

/// A program as `execvp` would find it.
pub fn which(prog: &std::ffi::OsStr, path_var: Option<&std::ffi::OsStr>) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let p = Path::new(prog);
    if p.components().count() > 1 || prog.to_string_lossy().contains('/') {
        return p.is_file().then(|| p.to_path_buf());
    }
    let path = path_var.map(|s| s.to_os_string()).unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    std::env::split_paths(&path).map(|d| d.join(p)).find(|c| {
        std::fs::metadata(c).map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0).unwrap_or(false)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elf_check() {
        let d = std::env::temp_dir().join(format!("hm-run-elf-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let txt = d.join("notelf.so");
        std::fs::write(&txt, "#!/bin/sh\n#padding padding\n").unwrap();
        assert!(check_elf_shared(&txt).unwrap_err().contains("not an ELF"));
        let short = d.join("short.so");
        std::fs::write(&short, "\x7fELF").unwrap();
        assert!(check_elf_shared(&short).is_err());
        let mut hdr = vec![0x7f, b'E', b'L', b'F', 2, 1, 1, 0];
        hdr.resize(16, 0);
        hdr.extend_from_slice(&2u16.to_le_bytes()); // ET_EXEC
        let exe = d.join("exec.so");
        std::fs::write(&exe, &hdr).unwrap();
        assert!(check_elf_shared(&exe).unwrap_err().contains("not a shared object"));
        hdr[16] = 3; // ET_DYN
        let so = d.join("ok.so");
        std::fs::write(&so, &hdr).unwrap();
        check_elf_shared(&so).unwrap();
        assert!(check_elf_shared(&d.join("missing.so")).is_err());
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn which_finds_sh() {
        let p = which("sh".as_ref(), Some("/nonexistent:/usr/bin:/bin".as_ref())).unwrap();
        assert!(p.ends_with("sh"));
        assert_eq!(which("/bin/sh".as_ref(), None), Some(PathBuf::from("/bin/sh")));
        assert_eq!(which("no-such-program-hm".as_ref(), Some("/bin".as_ref())), None);
    }

    #[test]
    fn repo_found() {
        // built inside the checkout, so the fallback finds it even with an outside target dir
        let r = repo().unwrap();
        assert!(r.join("firmware").is_dir());
    }
}
