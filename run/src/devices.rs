//! The device processes (`hematite-sim device`): which run, starting the missing ones,
//! stopping them.
//!
//! A NIC counts as running when its pid file names a live process whose command line carries
//! the NIC's socket path, and the socket file exists. The socket is never connected to for a
//! probe: the device serves one client at a time and resets (a firmware reboot of seconds)
//! whenever a client goes away.

use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::tree::{Layout, Nic};

/// How long a starting device may take to create its socket.
pub const START_TIMEOUT: Duration = Duration::from_secs(30);
/// How long `--stop` waits after SIGTERM before SIGKILL.
pub const STOP_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum State {
    /// Live and serving.
    Running(i32),
    /// Live, socket not there yet (just started, or it removed it while stopping).
    Starting(i32),
    /// No live device process; the pid of a stale pid file, if any.
    Stopped(Option<i32>),
}

fn read_pid(p: &Path) -> Option<i32> {
    std::fs::read_to_string(p).ok()?.trim().parse().ok().filter(|&p: &i32| p > 0)
}

/// Whether `pid` is a live (not zombie) process whose arguments include `socket`.
pub fn is_our_device(pid: i32, socket: &Path) -> bool {
    let stat = match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => s,
        Err(_) => return false,
    };
    // state is the first field after the parenthesised command name
    let st = stat.rsplit_once(')').and_then(|(_, r)| r.split_whitespace().next()).unwrap_or("?");
    if st == "Z" || st == "X" {
        return false;
    }
    let cmdline = match std::fs::read(format!("/proc/{pid}/cmdline")) {
        Ok(c) => c,
        Err(_) => return false,
    };
    let want = socket.as_os_str().as_encoded_bytes();
    cmdline.split(|&b| b == 0).any(|a| a == want)
}

pub fn state(layout: &Layout, n: usize) -> State {
    match read_pid(&layout.pid_file(n)) {
        Some(pid) if is_our_device(pid, &layout.socket(n)) => {
            if layout.socket(n).exists() {
                State::Running(pid)
            } else {
                State::Starting(pid)
            }
        }
        other => State::Stopped(other),
    }
}

/// The device's command line (without the program).
pub fn device_args(layout: &Layout, nic: Nic, fw: &Path, loss: Option<&str>) -> Vec<String> {
    let mut a = vec![
        "device".to_string(),
        "--socket".into(),
        layout.socket(nic.n).display().to_string(),
        "--wire-local".into(),
        match crate::tree::LINK.get() {
            Some(l) if nic.n == 0 => l.local.clone(),
            _ => format!("unix:{}", layout.wire(nic.n).display()),
        },
        "--wire-peer".into(),
        match crate::tree::LINK.get() {
            Some(l) if nic.n == 0 => l.peer.clone(),
            _ => format!("unix:{}", layout.wire(nic.peer()).display()),
        },
        "--mac".into(),
        nic.mac_str(),
        "--ip".into(),
        nic.ip().to_string(),
        "--pcap".into(),
        layout.pcap(nic.n).display().to_string(),
        "--counters".into(),
        layout.counters(nic.n).display().to_string(),
        "--fw".into(),
        fw.display().to_string(),
    ];
    if let Some(l) = loss {
        a.push("--loss".into());
        a.push(l.into());
        // NIC 0 alone on an external wire stands for the whole link: frames toward it are
        // lost too (between two of our NICs, each one's transmit loss covers a direction)
        if crate::tree::LINK.get().is_some() && nic.n == 0 {
            a.push("--rx-loss".into());
            a.push(l.into());
        }
    }
    a
}

/// Extra device options from `HEMATITE_SIM_ARGS` (split at white space), appended to every
/// device's command line: the wire faults of a soak (`--dup P --reorder P --corrupt P
/// --seed S`), or `--pcap /dev/null` for a long run (a later option wins).
pub fn extra_args(v: Option<&str>) -> Vec<String> {
    v.map(|s| s.split_whitespace().map(String::from).collect()).unwrap_or_default()
}

fn spawn(sim: &Path, layout: &Layout, nic: Nic, fw: &Path, loss: Option<&str>, trace: Option<&(usize, Vec<String>)>) -> Result<Child, String> {
    let log_path = layout.log(nic.n);
    let mut args = device_args(layout, nic, fw, loss);
    args.extend(extra_args(std::env::var("HEMATITE_SIM_ARGS").ok().as_deref()));
    if let Some((k, t)) = trace {
        if *k == nic.n {
            args.extend(t.iter().cloned());
        }
    }
    let mut log = File::create(&log_path).map_err(|e| format!("{}: {e}", log_path.display()))?;
    {
        use std::io::Write;
        let _ = writeln!(log, "# hematite-run: {} {}", sim.display(), args.join(" "));
    }
    let log2 = log.try_clone().map_err(|e| e.to_string())?;
    // A stale socket file would look like a ready device.
    let _ = std::fs::remove_file(layout.socket(nic.n));
    let mut c = Command::new(sim);
    c.args(&args).stdin(Stdio::null()).stdout(log).stderr(log2);
    // SAFETY: setsid is async-signal-safe; it detaches the device from our terminal and
    // session, so it outlives hematite-run and does not get the terminal's signals.
    unsafe {
        c.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    let child = c.spawn().map_err(|e| format!("starting {}: {e}", sim.display()))?;
    let pid_file = layout.pid_file(nic.n);
    std::fs::write(&pid_file, format!("{}\n", child.id())).map_err(|e| format!("{}: {e}", pid_file.display()))?;
    Ok(child)
}

fn log_tail(p: &Path) -> String {
    let s = std::fs::read_to_string(p).unwrap_or_default();
    let lines: Vec<&str> = s.lines().collect();
    let tail = &lines[lines.len().saturating_sub(15)..];
    if tail.is_empty() {
        "(the log is empty)".into()
    } else {
        tail.iter().map(|l| format!("    {l}")).collect::<Vec<_>>().join("\n")
    }
}

/// Starts every NIC of `layout` that does not run, and waits until all have their socket.
/// The started processes stay children of this process until it ends (a thread reaps each),
/// then belong to init; they keep running. `find` returns (simulator, firmware) and is called
/// only when something must be started.
pub fn ensure_running(
    layout: &Layout,
    loss: Option<&str>,
    trace: Option<&(usize, Vec<String>)>,
    verbose: bool,
    find: impl FnOnce() -> Result<(PathBuf, PathBuf), String>,
) -> Result<(), String> {
    let mut to_start = Vec::new();
    let mut waiting = Vec::new();
    for nic in layout.all() {
        match state(layout, nic.n) {
            State::Running(pid) => {
                if verbose {
                    eprintln!("hematite-run: nic{}: running (pid {pid})", nic.n);
                }
                if loss.is_some() && verbose {
                    eprintln!("hematite-run: nic{}: --loss not applied to a running device (use --stop first)", nic.n);
                }
            }
            State::Starting(pid) => waiting.push((nic, pid, None)),
            State::Stopped(_) => to_start.push(nic),
        }
    }
    if !to_start.is_empty() {
        let (sim, fw) = find()?;
        for nic in to_start {
            let child = spawn(&sim, layout, nic, &fw, loss, trace)?;
            let pid = child.id() as i32;
            if verbose {
                eprintln!("hematite-run: nic{}: started {} (pid {pid}, log {})", nic.n, sim.display(), layout.log(nic.n).display());
            }
            waiting.push((nic, pid, Some(child)));
        }
    }
    let t0 = Instant::now();
    for (nic, pid, mut child) in waiting {
        let sock = layout.socket(nic.n);
        loop {
            if sock.exists() {
                break;
            }
            let exited = match child.as_mut() {
                Some(c) => c.try_wait().ok().flatten().map(|s| s.to_string()),
                None => (!is_our_device(pid, &sock)).then(|| "exited".to_string()),
            };
            if let Some(how) = exited {
                let _ = std::fs::remove_file(layout.pid_file(nic.n));
                return Err(format!(
                    "nic{}: the device process (pid {pid}) {how} before creating {}; its log {}:\n{}",
                    nic.n,
                    sock.display(),
                    layout.log(nic.n).display(),
                    log_tail(&layout.log(nic.n))
                ));
            }
            if t0.elapsed() > START_TIMEOUT {
                return Err(format!(
                    "nic{}: the device process (pid {pid}) did not create {} within {} s; see its log {}:\n{}",
                    nic.n,
                    sock.display(),
                    START_TIMEOUT.as_secs(),
                    layout.log(nic.n).display(),
                    log_tail(&layout.log(nic.n))
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        if let Some(mut c) = child {
            std::thread::spawn(move || {
                let _ = c.wait();
            });
        }
    }
    Ok(())
}

/// NIC numbers with a pid file in the state directory, ascending.
pub fn known_nics(state: &Path) -> Vec<usize> {
    let mut v: Vec<usize> = std::fs::read_dir(state)
        .map(|rd| {
            rd.filter_map(|e| {
                let name = e.ok()?.file_name().into_string().ok()?;
                name.strip_prefix("nic")?.strip_suffix(".pid")?.parse().ok()
            })
            .collect()
        })
        .unwrap_or_default();
    v.sort_unstable();
    v
}

/// SIGTERM every device process with a pid file, wait for each (SIGKILL after
/// [`STOP_TIMEOUT`]), remove the pid files and what the processes leave behind. Returns one
/// line per NIC.
pub fn stop(layout: &Layout) -> Vec<String> {
    let mut out = Vec::new();
    let nics = known_nics(&layout.state);
    let mut term = Vec::new();
    for &n in &nics {
        let sock = layout.socket(n);
        match read_pid(&layout.pid_file(n)) {
            Some(pid) if is_our_device(pid, &sock) => {
                // SAFETY: plain kill(2).
                unsafe { libc::kill(pid, libc::SIGTERM) };
                term.push((n, pid));
            }
            Some(pid) => out.push(format!("nic{n}: was not running (stale pid file, pid {pid})")),
            None => out.push(format!("nic{n}: was not running (unreadable pid file)")),
        }
    }
    let t0 = Instant::now();
    for (n, pid) in term {
        let sock = layout.socket(n);
        while is_our_device(pid, &sock) && t0.elapsed() < STOP_TIMEOUT {
            std::thread::sleep(Duration::from_millis(20));
        }
        if is_our_device(pid, &sock) {
            // SAFETY: plain kill(2).
            unsafe { libc::kill(pid, libc::SIGKILL) };
            out.push(format!("nic{n}: pid {pid} ignored SIGTERM for {} s, killed", STOP_TIMEOUT.as_secs()));
        } else {
            out.push(format!("nic{n}: stopped (pid {pid})"));
        }
    }
    for &n in &nics {
        let _ = std::fs::remove_file(layout.pid_file(n));
        let _ = std::fs::remove_file(layout.socket(n));
        let _ = std::fs::remove_file(layout.wire(n));
    }
    let _ = std::fs::remove_dir_all(layout.sys().join(".old"));
    if nics.is_empty() {
        out.push(format!("no device processes recorded in {}", layout.state.display()));
    }
    out
}

/// One line per NIC with a pid file.
pub fn status(layout: &Layout) -> Vec<String> {
    let nics = known_nics(&layout.state);
    if nics.is_empty() {
        return vec![format!("no NICs started in {}", layout.state.display())];
    }
    nics.iter()
        .map(|&n| {
            let pcap = layout.pcap(n);
            let pcap_s = match std::fs::metadata(&pcap) {
                Ok(m) => format!("{} ({} bytes)", pcap.display(), m.len()),
                Err(_) => format!("{} (none yet)", pcap.display()),
            };
            match state(layout, n) {
                State::Running(pid) => format!(
                    "nic{n}: running, pid {pid}, socket {}, pcap {pcap_s}, log {}",
                    layout.socket(n).display(),
                    layout.log(n).display()
                ),
                State::Starting(pid) => format!(
                    "nic{n}: starting (pid {pid}, no socket yet at {}), log {}",
                    layout.socket(n).display(),
                    layout.log(n).display()
                ),
                State::Stopped(p) => format!(
                    "nic{n}: not running{}, last pcap {pcap_s}, log {}",
                    p.map(|p| format!(" (stale pid file: pid {p})")).unwrap_or_default(),
                    layout.log(n).display()
                ),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn args_for_a_pair() {
        let l = Layout::new(PathBuf::from("/run/h"), 2).unwrap();
        let a = device_args(&l, Nic::new(1).unwrap(), Path::new("/fw.hex"), Some("0.01")).join(" ");
        assert_eq!(
            a,
            "device --socket /run/h/nic1.sock --wire-local unix:/run/h/wire1 --wire-peer unix:/run/h/wire0 \
             --mac 02:48:4d:00:00:02 --ip 10.77.0.2 --pcap /run/h/nic1.pcap --counters /run/h/nic1.counters --fw /fw.hex --loss 0.01"
        );
        let a = device_args(&l, Nic::new(0).unwrap(), Path::new("/fw.hex"), None);
        assert!(!a.contains(&"--loss".to_string()));
    }

    #[test]
    fn extra_device_args() {
        assert!(extra_args(None).is_empty());
        assert!(extra_args(Some("  ")).is_empty());
        assert_eq!(extra_args(Some(" --dup 0.01\t--seed  7 ")), vec!["--dup", "0.01", "--seed", "7"]);
    }

    #[test]
    fn liveness() {
        let me = std::process::id() as i32;
        // our own command line does not name a NIC socket
        assert!(!is_our_device(me, Path::new("/run/hematite/nic0.sock")));
        let exe = std::fs::read(format!("/proc/{me}/cmdline")).unwrap();
        let arg0 = String::from_utf8_lossy(exe.split(|&b| b == 0).next().unwrap()).into_owned();
        assert!(is_our_device(me, Path::new(&arg0)));
        assert!(!is_our_device(i32::MAX, Path::new(&arg0)));
    }

    #[test]
    fn pid_files() {
        let d = std::env::temp_dir().join(format!("hm-run-pids-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        for f in ["nic3.pid", "nic0.pid", "nicx.pid", "nic1.sock"] {
            std::fs::write(d.join(f), "999999999\n").unwrap();
        }
        assert_eq!(known_nics(&d), vec![0, 3]);
        let l = Layout::new(d.clone(), 4).unwrap();
        assert_eq!(state(&l, 0), State::Stopped(Some(999999999)));
        assert_eq!(state(&l, 1), State::Stopped(None));
        let st = status(&l).join("\n");
        assert!(st.contains("nic0: not running (stale pid file"), "{st}");
        let out = stop(&l).join("\n");
        assert!(out.contains("nic3: was not running"), "{out}");
        assert!(known_nics(&d).is_empty());
        std::fs::remove_dir_all(&d).unwrap();
    }
}
