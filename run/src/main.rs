//! `hematite-run`: run an unmodified ibverbs program on simulated Hematite NICs.
//!
//! It starts the device processes (`hematite-sim device`, in pairs joined by a datagram wire)
//! when they are not running, writes the fake sysfs tree libibverbs discovers them by, makes
//! the /dev/infiniband links, points libibverbs at the provider, checks all of it, and runs
//! the program (optionally with /sys/class overlaid in a private mount namespace).
//! docs/hematite-run.md describes what and why.

mod cards;
mod checks;
mod devices;
mod locate;
mod overlay;
mod stat;
mod tree;

use std::ffi::OsString;
use std::os::unix::io::AsRawFd;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::sync::atomic::{AtomicI32, Ordering};

use checks::{Check, Level};
use tree::{Layout, View};

const USAGE: &str = "usage:
  hematite-run [--nic N] [--nics K] [--state DIR] [--loss P] [--no-overlay] [--no-preload]
      [--trace FILE.fst [--trace-from C] [--trace-cycles N] [--trace-on EVENT [--trace-before B]
      [--trace-after A]] [--trace-nic K]] [-v] -- PROGRAM ARGS...
      start the simulated NICs if they are not running, set up what libibverbs needs to see them,
      check it, and run PROGRAM; exits with PROGRAM's status (128 + signal if it was killed)
  hematite-run --check [--nic N] [--nics K] [--state DIR]
      set up and run the pre-flight checks only (plus `ibv_devices`), one line per check
  hematite-run --stop [--state DIR]
      stop the device processes hematite-run started (SIGTERM, then wait)
  hematite-run --status [--state DIR]
      which NICs run: pids, sockets, pcaps
  hematite-run --stat [--nic N] [--qp Q] [--watch] [--state DIR]
      the running NICs' counters (docs/counters.md), a column per NIC; --qp Q: QP Q's own
      counters (the NICs sample it from then on); --watch: every second, with the change since
      the last print; exits 1 when no NIC runs
  hematite-run --cards [--config FILE] [--state DIR]
      on a host with Hematite cards: publish the PCI functions FILE configures (default
      /etc/hematite/cards.conf) that are bound to vfio-pci as hematite0, hematite1, ... (the
      sysfs tree, /dev/infiniband links, the provider link); later runs in DIR then run programs
      on the cards instead of simulated NICs; --stop withdraws them (docs/cards.md)

  --nic N       PROGRAM sees only NIC N (HEMATITE_NIC=N); default: all NICs
  --nics K      K NICs (even; NIC 2k is wired to NIC 2k+1), default 2
  --state DIR   state directory; default $HEMATITE_RUN_DIR, else /run/hematite
  --loss P      devices started now drop this fraction of transmitted RoCE frames (with
                --link: of the received ones too)
  --link LOCAL,PEER,IP
                NIC 0 alone, on an external datagram wire (receive at LOCAL, send to
                PEER: unix:PATH or udp:HOST:PORT) with address IP, e.g. a Soft-RoCE VM;
                remembered in the state directory
  --no-overlay  do not overlay /sys/class in a private mount namespace (default: overlay when root)
  --no-preload  do not LD_PRELOAD the provider (completion channels then fail)
  --trace FILE.fst [--trace-from C] [--trace-cycles N] [--trace-nic K]
                an FST waveform of NIC K (default: --nic N, else 0) for its cycles C .. C+N (defaults 0 and
                100000; the pcap's time axis), or with --trace-on EVENT [--trace-before B]
                [--trace-after A] around the first EVENT (error-cqe, drop, drop:REASON, retransmit); the
                NICs must not be running yet (--stop first), and they run the waveform build
                of the simulator
                (<checkout>/target/trace/release/hematite-sim, from ./hematite trace-build, or
                $HEMATITE_SIM)
  -v            say what is done

environment: HEMATITE_SIM (simulator), HEMATITE_FW (firmware image), HEMATITE_PROVIDER
(libhematite_verbs.so), HEMATITE_RUN_DIR (state directory)";

/// Exit status for anything hematite-run itself could not do.
const EXIT_SETUP: u8 = 2;

#[derive(Debug, PartialEq, Eq)]
enum Mode {
    Run,
    Check,
    Stop,
    Status,
    Stat,
    Cards,
}

#[derive(Debug)]
struct Opts {
    mode: Mode,
    nic: Option<usize>,
    nics: usize,
    state: Option<PathBuf>,
    loss: Option<String>,
    link: Option<String>,
    overlay: bool,
    preload: bool,
    verbose: bool,
    /// `--trace FILE` and its `--trace-from` / `--trace-cycles`, as the device takes them
    trace: Vec<String>,
    trace_nic: Option<usize>,
    watch: bool,
    qp: Option<u16>,
    /// `--config FILE` of `--cards`
    config: Option<PathBuf>,
    program: Vec<OsString>,
}

fn parse_args(args: Vec<OsString>) -> Result<Opts, String> {
    let mut o = Opts {
        mode: Mode::Run,
        nic: None,
        nics: 2,
        state: None,
        loss: None,
        link: None,
        overlay: true,
        preload: true,
        verbose: false,
        trace: Vec::new(),
        trace_nic: None,
        watch: false,
        qp: None,
        config: None,
        program: Vec::new(),
    };
    let mut it = args.into_iter();
    let set_mode = |o: &mut Opts, m: Mode| {
        if o.mode != Mode::Run {
            return Err("--check, --stop, --status, --stat and --cards exclude each other".to_string());
        }
        o.mode = m;
        Ok(())
    };
    while let Some(a) = it.next() {
        let s = a.to_string_lossy().into_owned();
        let mut val = || it.next().map(|v| v.to_string_lossy().into_owned()).ok_or(format!("{s} needs a value"));
        match s.as_str() {
            "--" => {
                o.program = it.collect();
                break;
            }
            "-h" | "--help" => return Err("help".into()),
            "--nic" => o.nic = Some(val()?.parse().map_err(|_| "--nic wants a NIC number".to_string())?),
            "--nics" => o.nics = val()?.parse().map_err(|_| "--nics wants a number".to_string())?,
            "--state" => o.state = Some(PathBuf::from(val()?)),
            "--loss" => {
                let v = val()?;
                match v.parse::<f64>() {
                    Ok(p) if (0.0..1.0).contains(&p) => o.loss = Some(v),
                    _ => return Err(format!("--loss wants a fraction in [0, 1), not `{v}`")),
                }
            }
            "--link" => o.link = Some(val()?),
            "--no-overlay" => o.overlay = false,
            "--no-preload" => o.preload = false,
            "--trace" | "--trace-from" | "--trace-cycles" | "--trace-on" | "--trace-before" | "--trace-after" => {
                let v = val()?;
                // the numbers are checked here, before any device starts (the device checks
                // the rest: the event's name, the file)
                if s != "--trace" && s != "--trace-on" {
                    match v.parse::<u64>() {
                        Ok(0) if s == "--trace-cycles" || s == "--trace-before" => return Err(format!("{s} must be at least 1")),
                        Ok(_) => {}
                        Err(_) => return Err(format!("{s} wants a number of cycles, not `{v}`")),
                    }
                }
                o.trace.extend([s.clone(), v]);
            }
            "--trace-nic" => o.trace_nic = Some(val()?.parse().map_err(|_| "--trace-nic wants a NIC number".to_string())?),
            "-v" | "--verbose" => o.verbose = true,
            "--check" => set_mode(&mut o, Mode::Check)?,
            "--stop" => set_mode(&mut o, Mode::Stop)?,
            "--status" => set_mode(&mut o, Mode::Status)?,
            "--stat" => set_mode(&mut o, Mode::Stat)?,
            "--cards" => set_mode(&mut o, Mode::Cards)?,
            "--config" => o.config = Some(PathBuf::from(val()?)),
            "--watch" => o.watch = true,
            "--qp" => o.qp = Some(val()?.parse().map_err(|_| "--qp wants a QP number (0..65535)".to_string())?),
            _ if s.starts_with('-') => return Err(format!("unknown option `{s}`")),
            _ => {
                o.program = std::iter::once(a).chain(it).collect();
                break;
            }
        }
    }
    if (o.trace_nic.is_some() || !o.trace.is_empty()) && !o.trace.iter().any(|a| a == "--trace") {
        return Err("--trace-from, --trace-cycles, --trace-on, --trace-before, --trace-after and --trace-nic need --trace FILE.fst".into());
    }
    if (o.watch || o.qp.is_some()) && o.mode != Mode::Stat {
        return Err("--watch and --qp go with --stat".into());
    }
    if o.config.is_some() && o.mode != Mode::Cards {
        return Err("--config goes with --cards".into());
    }
    if !o.trace.is_empty() && o.mode != Mode::Run {
        return Err("--trace goes with a program run".into());
    }
    match o.mode {
        Mode::Run if o.program.is_empty() => Err("no program given (hematite-run [options] -- PROGRAM ARGS...)".into()),
        Mode::Run => Ok(o),
        _ if !o.program.is_empty() => Err("--check, --stop, --status, --stat and --cards take no program".into()),
        _ => Ok(o),
    }
}

fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Where the /dev/infiniband links live. Only tests move it (libibverbs looks in
/// /dev/infiniband, whatever this says).
fn dev_dir() -> PathBuf {
    std::env::var_os("HEMATITE_RUN_DEV_DIR").filter(|v| !v.is_empty()).map(PathBuf::from).unwrap_or_else(|| PathBuf::from("/dev/infiniband"))
}

fn state_dir(o: &Opts) -> Result<PathBuf, String> {
    let d = o
        .state
        .clone()
        .or_else(|| std::env::var_os("HEMATITE_RUN_DIR").filter(|v| !v.is_empty()).map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("/run/hematite"));
    std::fs::create_dir_all(&d).map_err(|e| {
        let hint = if e.kind() == std::io::ErrorKind::PermissionDenied { " (run as root, or choose --state DIR)" } else { "" };
        format!("cannot create the state directory {}: {e}{hint}", d.display())
    })?;
    d.canonicalize().map_err(|e| format!("{}: {e}", d.display()))
}

/// An exclusive lock on the state directory for setting it up (trees, device start), so that
/// concurrent launches do not start the same NIC twice.
struct Lock {
    _file: std::fs::File,
}

fn lock(layout: &Layout) -> Result<Lock, String> {
    let p = layout.lock_file();
    // Read-only suffices for flock: another user may share a state directory root set up.
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&p)
        .or_else(|_| std::fs::File::open(&p))
        .map_err(|e| format!("{}: {e}", p.display()))?;
    // SAFETY: flock on a descriptor we own.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) } != 0 {
        return Err(format!("{}: {}", p.display(), std::io::Error::last_os_error()));
    }
    Ok(Lock { _file: f })
}

/// Makes `lib/libhematite-rdmav34.so` a link to the provider (replaced in one rename when it
/// points elsewhere).
fn link_provider(layout: &Layout, provider: &Path) -> Result<(), String> {
    let lib = layout.lib();
    std::fs::create_dir_all(&lib).map_err(|e| format!("{}: {e}", lib.display()))?;
    let target = provider.canonicalize().map_err(|e| format!("{}: {e}", provider.display()))?;
    let link = layout.provider_link();
    if std::fs::read_link(&link).map(|t| t == target).unwrap_or(false) {
        return Ok(());
    }
    let tmp = lib.join(format!(".link-{}", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(&target, &tmp).map_err(|e| format!("{}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, &link).map_err(|e| format!("{}: {e}", link.display()))
}

/// What setting up found: the checks so far and the program's environment.
struct Setup {
    checks: Vec<Check>,
    env: Vec<(String, OsString)>,
    /// The devices of the chosen view.
    devices: Vec<String>,
}

/// Writes the trees, makes the links, and runs the checks that need no program. Problems
/// become failed checks rather than errors, so that `--check` can list them all.
fn setup(o: &Opts, layout: &Layout, view: View) -> Setup {
    let mut c = vec![checks::check_ibverbs_version(checks::dpkg_ibverbs_version().as_deref()), checks::check_ib_core_here()];
    let mut devices = Vec::new();
    match tree::char_rdev(Path::new("/dev/full")) {
        Err(e) => c.push(Check::fail("/dev/full", format!("{e}; the uverbs links need a /dev/full character device"))),
        Ok(full) => {
            let mut wrote = Ok(());
            for v in layout.views() {
                let r = tree::build_tree(layout, v, full).and_then(|t| tree::install_tree(&layout.sys(), &v.name(), &t));
                if let Err(e) = r {
                    wrote = Err(e);
                    break;
                }
            }
            let vdir = layout.view_dir(view);
            c.push(match wrote.and_then(|_| checks::verify_tree(&vdir, full)) {
                Ok(names) => {
                    devices = names;
                    Check::ok("sysfs tree", format!("{} ({})", vdir.display(), devices.join(", ")))
                }
                Err(e) => Check::fail("sysfs tree", e),
            });
            let uverbs: Vec<String> = layout.all().iter().map(|n| n.uverbs()).collect();
            match checks::ensure_dev_links(&dev_dir(), &uverbs) {
                Ok(()) => c.push(checks::check_dev_nodes(&dev_dir(), &uverbs, full)),
                Err(e) => c.push(Check::fail("device nodes", e)),
            }
        }
    }
    let provider = locate::provider();
    c.push(checks::check_provider(&provider));
    if let Ok(p) = &provider {
        if let Err(e) = link_provider(layout, p) {
            c.push(Check::fail("provider link", e));
        }
    }
    c.push(checks::check_memlock());

    let env = program_env(o, layout, view);
    Setup { checks: c, env, devices }
}

/// The program's environment: where libibverbs finds the tree and the provider.
fn program_env(o: &Opts, layout: &Layout, view: View) -> Vec<(String, OsString)> {
    let mut env: Vec<(String, OsString)> = vec![
        ("SYSFS_PATH".into(), layout.view_dir(view).into_os_string()),
        ("RDMAV_DRIVERS".into(), layout.driver_prefix().into_os_string()),
        ("HEMATITE_RUN_DIR".into(), layout.state.clone().into_os_string()),
    ];
    if o.preload {
        let me = layout.provider_link().into_os_string();
        let pre = match std::env::var_os("LD_PRELOAD").filter(|v| !v.is_empty()) {
            Some(old) if old.to_string_lossy().split([':', ' ']).any(|e| Path::new(e) == Path::new(&me)) => old,
            Some(old) => {
                let mut s = me;
                s.push(":");
                s.push(old);
                s
            }
            None => me,
        };
        env.push(("LD_PRELOAD".into(), pre));
    }
    if let Some(n) = o.nic {
        env.push(("HEMATITE_NIC".into(), n.to_string().into()));
    }
    env
}

fn nic_checks(layout: &Layout) -> Vec<Check> {
    let mut c = Vec::new();
    let mut need_start = false;
    for nic in layout.all() {
        let name = format!("nic{}", nic.n);
        c.push(match devices::state(layout, nic.n) {
            devices::State::Running(pid) => Check::ok(&name, format!("running, pid {pid}, socket {}", layout.socket(nic.n).display())),
            devices::State::Starting(pid) => Check::ok(&name, format!("starting, pid {pid}")),
            devices::State::Stopped(_) => {
                need_start = true;
                Check::ok(&name, "not running; a launch starts it")
            }
        });
    }
    if need_start {
        c.push(Check::from_result("simulator", locate::sim().map(|p| p.display().to_string())));
        c.push(Check::from_result("firmware", locate::firmware().map(|p| p.display().to_string())));
    }
    c
}

fn print_checks(cs: &[Check], all: bool) {
    for ch in cs {
        if all || ch.level != Level::Ok {
            eprintln!("hematite-run: {ch}");
        }
    }
}

static CHILD: AtomicI32 = AtomicI32::new(0);
static PENDING: AtomicI32 = AtomicI32::new(0);

extern "C" fn forward(sig: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    // A signal from the terminal (si_code SI_KERNEL) went to the whole foreground process
    // group, the program included: forwarding it would deliver it twice.
    // SAFETY: the kernel passes a valid siginfo with SA_SIGINFO.
    if !info.is_null() && unsafe { (*info).si_code } == libc::SI_KERNEL {
        return;
    }
    let pid = CHILD.load(Ordering::SeqCst);
    if pid > 0 {
        // SAFETY: kill is async-signal-safe.
        unsafe { libc::kill(pid, sig) };
    } else {
        PENDING.store(sig, Ordering::SeqCst);
    }
}

fn install_forwarding() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: a zeroed sigaction with a valid handler and flags.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = forward as *const () as usize;
            sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

fn run(mut o: Opts) -> Result<u8, String> {
    let state = state_dir(&o)?;
    // An external link is remembered in the state directory, so that later runs (and
    // --status / --stop) use it too; it makes the state directory a one-NIC one.
    let link_file = state.join("link");
    if let Some(l) = &o.link {
        let l = tree::Link::parse(l)?;
        std::fs::create_dir_all(&state).map_err(|e| format!("{}: {e}", state.display()))?;
        std::fs::write(&link_file, l.to_line() + "\n").map_err(|e| format!("{}: {e}", link_file.display()))?;
    }
    if let Ok(l) = std::fs::read_to_string(&link_file) {
        let l = tree::Link::parse(&l)?;
        let _ = tree::LINK.set(l);
        o.nics = 1;
    }
    if o.mode == Mode::Cards {
        return setup_cards(&o, state);
    }
    if let Ok(text) = std::fs::read_to_string(state.join(cards::CARDS_FILE)) {
        return run_cards(o, state, &text);
    }
    if o.mode == Mode::Stat {
        let layout = Layout::new(state, o.nics.max(if tree::LINK.get().is_some() { 1 } else { 2 }))?;
        return Ok(match o.qp {
            Some(q) => stat::run_qp(&layout, o.nic, q, o.watch),
            None => stat::run(&layout, o.nic, o.watch),
        });
    }
    if o.mode == Mode::Status || o.mode == Mode::Stop {
        // any even count: these look at the pid files present
        let layout = Layout::new(state, o.nics.max(if tree::LINK.get().is_some() { 1 } else { 2 }))?;
        let _guard = if o.mode == Mode::Stop { Some(lock(&layout)?) } else { None };
        let lines = if o.mode == Mode::Status { devices::status(&layout) } else { devices::stop(&layout) };
        for l in lines {
            println!("{l}");
        }
        return Ok(0);
    }
    let layout = Layout::new(state, o.nics)?;
    let view = match o.nic {
        Some(n) => {
            layout.nic(n)?;
            View::Nic(n)
        }
        None => View::All,
    };
    let guard = lock(&layout)?;
    let mut s = setup(&o, &layout, view);

    if o.mode == Mode::Check {
        s.checks.extend(nic_checks(&layout));
        drop(guard);
        s.checks.push(Check::ok(
            "overlay",
            match (o.overlay, is_root()) {
                (false, _) => "off (--no-overlay): only SYSFS_PATH users (libibverbs) see the NICs; NCCL then needs NCCL_IB_GID_INDEX=0",
                (true, false) => "off (not root): only SYSFS_PATH users (libibverbs) see the NICs; NCCL then needs NCCL_IB_GID_INDEX=0",
                (true, true) => "on: programs get /sys/class/infiniband in a private mount namespace",
            },
        ));
        s.checks.push(Check::ok(
            "preload",
            if o.preload { "the provider is LD_PRELOADed, so completion channels work" } else { "off (--no-preload): ibv_create_comp_channel will fail" },
        ));
        s.checks.push(checks::check_ibv_devices(&s.env, &s.devices));
        for ch in &s.checks {
            println!("{ch}");
        }
        let failed = s.checks.iter().any(|c| c.level == Level::Fail);
        return Ok(if failed { EXIT_SETUP } else { 0 });
    }

    s.checks.push(checks::check_program(&o.program[0], std::env::var_os("PATH").as_deref()));
    print_checks(&s.checks, o.verbose);
    if s.checks.iter().any(|c| c.level == Level::Fail) {
        eprintln!("hematite-run: pre-flight checks failed; `hematite-run --check` lists them all");
        return Ok(EXIT_SETUP);
    }
    let trace = if o.trace.is_empty() {
        None
    } else {
        let k = o.trace_nic.or(o.nic).unwrap_or(0);
        layout.nic(k)?;
        if !matches!(devices::state(&layout, k), devices::State::Stopped(_)) {
            return Err(format!("--trace: nic{k} runs already; a waveform needs a device this run starts (hematite-run --stop first)"));
        }
        Some((k, o.trace.clone()))
    };
    let sim = if trace.is_some() { locate::sim_traced } else { locate::sim };
    devices::ensure_running(&layout, o.loss.as_deref(), trace.as_ref(), o.verbose, || Ok((sim()?, locate::firmware()?)))?;
    drop(guard);

    spawn_program(&o, &layout, view, &s.env)
}

/// Runs the program with `env`, in a private mount namespace with the view's tree over
/// /sys/class when root (unless --no-overlay); returns its exit status.
fn spawn_program(o: &Opts, layout: &Layout, view: View, env: &[(String, OsString)]) -> Result<u8, String> {
    let mut cmd = Command::new(&o.program[0]);
    cmd.args(&o.program[1..]);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let overlay = if !o.overlay {
        if o.verbose {
            eprintln!("hematite-run: overlay of /sys/class: off (--no-overlay)");
        }
        None
    } else if !is_root() {
        if o.verbose {
            eprintln!("hematite-run: overlay of /sys/class: off (not root); programs reading /sys/class/infiniband themselves will not see the NICs");
        }
        None
    } else {
        let ov = overlay::Overlay::prepare(&layout.aside(), &layout.view_dir(view))?;
        if o.verbose {
            eprintln!("hematite-run: overlay of /sys/class: on (private mount namespace)");
        }
        Some(ov)
    };
    if o.verbose {
        for (k, v) in env {
            eprintln!("hematite-run: {k}={}", v.to_string_lossy());
        }
        if !o.preload {
            eprintln!("hematite-run: provider not preloaded: ibv_create_comp_channel will fail");
        }
    }
    if let Some(ov) = overlay {
        // SAFETY: apply only makes system calls (see Overlay::apply).
        unsafe {
            cmd.pre_exec(move || ov.apply());
        }
    }
    install_forwarding();
    let mut child = cmd.spawn().map_err(|e| {
        let hint = if o.overlay && is_root() { " (if the overlay failed, --no-overlay runs without it)" } else { "" };
        format!("cannot run {}: {e}{hint}", o.program[0].to_string_lossy())
    })?;
    CHILD.store(child.id() as i32, Ordering::SeqCst);
    let pending = PENDING.swap(0, Ordering::SeqCst);
    if pending != 0 {
        // SAFETY: plain kill(2).
        unsafe { libc::kill(child.id() as i32, pending) };
    }
    let st = child.wait().map_err(|e| e.to_string())?;
    Ok(match (st.code(), st.signal()) {
        (Some(c), _) => c as u8,
        (None, Some(sig)) => (128 + sig) as u8,
        _ => 1,
    })
}

/// The root of sysfs that `--cards` scans (only tests move it).
fn sys_root() -> PathBuf {
    std::env::var_os("HEMATITE_RUN_SYS_ROOT").filter(|v| !v.is_empty()).map(PathBuf::from).unwrap_or_else(|| PathBuf::from("/sys"))
}

/// Writes a file whole: beside it, then renamed over it.
fn write_whole(p: &Path, text: &str) -> Result<(), String> {
    let tmp = p.with_extension(format!("tmp-{}", std::process::id()));
    std::fs::write(&tmp, text).and_then(|_| std::fs::rename(&tmp, p)).map_err(|e| format!("{}: {e}", p.display()))
}

/// `--cards`: publishes the configured cards (module `cards`).
fn setup_cards(o: &Opts, state: PathBuf) -> Result<u8, String> {
    if o.link.is_some() || o.loss.is_some() || o.nic.is_some() {
        return Err("--cards takes --config and --state only".into());
    }
    let cfg = o.config.clone().unwrap_or_else(|| PathBuf::from(cards::DEFAULT_CONFIG));
    let text = std::fs::read_to_string(&cfg).map_err(|e| format!("{}: {e} (docs/cards.md says what it holds)", cfg.display()))?;
    let conf = cards::parse_config(&text).map_err(|e| format!("{}: {e}", cfg.display()))?;
    let plan = cards::plan(&conf, &sys_root());
    for s in &plan.skipped {
        eprintln!("hematite-run: not published: {s}");
    }
    if plan.cards.is_empty() {
        return Err(format!("no card to publish ({} configures {} function(s); see above)", cfg.display(), conf.functions.len()));
    }
    let layout = Layout { state: state.clone(), nics: plan.cards.len() };
    let _guard = lock(&layout)?;
    let running: Vec<usize> = devices::known_nics(&state)
        .into_iter()
        .filter(|&n| matches!(devices::state(&layout, n), devices::State::Running(_)))
        .collect();
    if !running.is_empty() {
        return Err(format!("simulated NICs run in {} (nic{running:?}); stop them (--stop) or choose another --state", state.display()));
    }
    let full = tree::char_rdev(Path::new("/dev/full"))?;
    let mut views = vec![(View::All, None)];
    views.extend(plan.cards.iter().map(|c| (View::Nic(c.n), Some(c.n))));
    for (v, one) in &views {
        tree::install_tree(&layout.sys(), &v.name(), &cards::build_tree(&plan.cards, *one, full))?;
    }
    // views of cards no longer published
    if let Ok(rd) = std::fs::read_dir(layout.sys()) {
        for e in rd.filter_map(|e| e.ok()) {
            let name = e.file_name().to_string_lossy().into_owned();
            let stale = name.strip_prefix("nic").and_then(|n| n.parse::<usize>().ok()).is_some_and(|n| n >= plan.cards.len());
            if stale {
                let old = layout.sys().join(".old");
                std::fs::create_dir_all(&old).map_err(|e| format!("{}: {e}", old.display()))?;
                std::fs::rename(e.path(), old.join(format!("{name}-{}", std::process::id()))).map_err(|e| format!("{name}: {e}"))?;
            }
        }
    }
    let names = checks::verify_tree(&layout.view_dir(View::All), full)?;
    let uverbs: Vec<String> = plan.cards.iter().map(|c| format!("uverbs{}", c.n)).collect();
    checks::ensure_dev_links(&dev_dir(), &uverbs)?;
    let provider = locate::provider()?;
    link_provider(&layout, &provider)?;
    write_whole(&state.join(cards::CARDS_FILE), &cards::cards_file(&plan.cards))?;
    for c in &plan.cards {
        println!("hematite{}: {} ({})", c.n, c.backend(), c.path.display());
    }
    println!(
        "published {} card(s) ({}); run programs with `hematite-run --state {} -- PROGRAM`, or with SYSFS_PATH={} when the provider is installed",
        names.len(),
        names.join(", "),
        state.display(),
        layout.view_dir(View::All).display()
    );
    Ok(0)
}

/// A run, --check, --status, --stop or --stat in a state directory that holds cards.
fn run_cards(o: Opts, state: PathBuf, text: &str) -> Result<u8, String> {
    let cards = cards::read_cards_file(text)
        .ok_or_else(|| format!("{}: malformed; run hematite-run --cards again", state.join(cards::CARDS_FILE).display()))?;
    let layout = Layout { state: state.clone(), nics: cards.len() };
    match o.mode {
        Mode::Status => {
            for (n, b) in &cards {
                println!("hematite{n}: card {b}");
            }
            return Ok(0);
        }
        Mode::Stop => {
            let _guard = lock(&layout)?;
            std::fs::remove_file(state.join(cards::CARDS_FILE)).map_err(|e| format!("{}: {e}", state.display()))?;
            // moved aside, not deleted: programs started with the overlay have them bound
            let old = layout.sys().join(".old");
            std::fs::create_dir_all(&old).map_err(|e| format!("{}: {e}", old.display()))?;
            for v in std::iter::once(View::All).chain(cards.iter().map(|c| View::Nic(c.0))) {
                let _ = std::fs::rename(layout.view_dir(v), old.join(format!("{}-{}", v.name(), std::process::id())));
            }
            println!("withdrew {} card(s) from {}", cards.len(), state.display());
            return Ok(0);
        }
        Mode::Stat => {
            eprintln!("hematite-run: {} holds cards; their counters are not sampled yet (docs/cards.md)", state.display());
            return Ok(1);
        }
        Mode::Cards => unreachable!("handled before"),
        Mode::Run | Mode::Check => {}
    }
    if o.loss.is_some() || o.link.is_some() || !o.trace.is_empty() {
        return Err(format!("--loss, --link and --trace are for simulated NICs; {} holds cards (hematite-run --cards)", state.display()));
    }
    let view = match o.nic {
        Some(n) if cards.iter().any(|c| c.0 == n) => View::Nic(n),
        Some(n) => return Err(format!("--nic {n}: {} holds cards {:?}", state.display(), cards.iter().map(|c| c.0).collect::<Vec<_>>())),
        None => View::All,
    };
    let mut c = vec![checks::check_ibverbs_version(checks::dpkg_ibverbs_version().as_deref()), checks::check_ib_core_here()];
    let mut devices = Vec::new();
    match tree::char_rdev(Path::new("/dev/full")) {
        Err(e) => c.push(Check::fail("/dev/full", e)),
        Ok(full) => {
            let vdir = layout.view_dir(view);
            c.push(match checks::verify_tree(&vdir, full) {
                Ok(names) => {
                    devices = names;
                    Check::ok("sysfs tree", format!("{} (cards: {})", vdir.display(), devices.join(", ")))
                }
                Err(e) => Check::fail("sysfs tree", format!("{e} (hematite-run --cards writes it)")),
            });
            let uverbs: Vec<String> = cards.iter().map(|c| format!("uverbs{}", c.0)).collect();
            c.push(checks::check_dev_nodes(&dev_dir(), &uverbs, full));
        }
    }
    c.push(checks::check_provider(&locate::provider()));
    c.push(checks::check_memlock());
    let env = program_env(&o, &layout, view);
    if o.mode == Mode::Check {
        c.push(checks::check_ibv_devices(&env, &devices));
        for ch in &c {
            println!("{ch}");
        }
        return Ok(if c.iter().any(|c| c.level == Level::Fail) { EXIT_SETUP } else { 0 });
    }
    c.push(checks::check_program(&o.program[0], std::env::var_os("PATH").as_deref()));
    print_checks(&c, o.verbose);
    if c.iter().any(|c| c.level == Level::Fail) {
        eprintln!("hematite-run: pre-flight checks failed; `hematite-run --check` lists them all");
        return Ok(EXIT_SETUP);
    }
    spawn_program(&o, &layout, view, &env)
}

fn main() -> ExitCode {
    let o = match parse_args(std::env::args_os().skip(1).collect()) {
        Ok(o) => o,
        Err(e) if e == "help" => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("hematite-run: {e}\n{USAGE}");
            return ExitCode::from(EXIT_SETUP);
        }
    };
    match run(o) {
        Ok(c) => ExitCode::from(c),
        Err(e) => {
            eprintln!("hematite-run: {e}");
            ExitCode::from(EXIT_SETUP)
        }
    }
}

/// A fresh, empty directory for a unit test (`/tmp/hm-run-<tag>-<pid>`).
#[cfg(test)]
fn test_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("hm-run-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &[&str]) -> Vec<OsString> {
        s.iter().map(OsString::from).collect()
    }

    #[test]
    fn cli() {
        let o = parse_args(args(&["--nic", "1", "--nics", "4", "-v", "--", "ls", "-l"])).unwrap();
        assert_eq!((o.nic, o.nics, o.verbose, o.mode), (Some(1), 4, true, Mode::Run));
        assert_eq!(o.program, args(&["ls", "-l"]));
        let o = parse_args(args(&["ls", "--nic", "3"])).unwrap();
        assert_eq!(o.program, args(&["ls", "--nic", "3"]));
        assert_eq!(o.nic, None);
        assert_eq!(parse_args(args(&["--check", "--state", "/x"])).unwrap().mode, Mode::Check);
        assert!(parse_args(args(&["--check", "--stop"])).is_err());
        // --stat's options: --watch and --qp only with it, a QP number that fits 16 bits
        let o = parse_args(args(&["--stat", "--qp", "7", "--watch"])).unwrap();
        assert_eq!((o.mode, o.qp, o.watch), (Mode::Stat, Some(7), true));
        assert!(parse_args(args(&["--watch"])).is_err());
        assert!(parse_args(args(&["--qp", "7", "--", "ls"])).is_err());
        assert!(parse_args(args(&["--stat", "--qp", "70000"])).is_err());
        assert!(parse_args(args(&["--stat", "--", "ls"])).is_err());
        assert!(parse_args(args(&["--stop", "--", "ls"])).is_err());
        assert!(parse_args(args(&["-v"])).is_err());
        assert!(parse_args(args(&["--loss", "1.5", "--", "ls"])).is_err());
        assert_eq!(parse_args(args(&["--loss", "0.01", "--", "ls"])).unwrap().loss.as_deref(), Some("0.01"));
        assert!(parse_args(args(&["--bogus", "--", "ls"])).is_err());
        let o = parse_args(args(&["--no-overlay", "--no-preload", "--", "x"])).unwrap();
        assert!(!o.overlay && !o.preload);
        let o = parse_args(args(&["--trace", "w.fst", "--trace-from", "5", "--trace-nic", "1", "--", "x"])).unwrap();
        assert_eq!((o.trace.join(" "), o.trace_nic), ("--trace w.fst --trace-from 5".to_string(), Some(1)));
        assert!(parse_args(args(&["--trace-cycles", "10", "--", "x"])).is_err(), "a window without --trace");
        assert!(parse_args(args(&["--trace-nic", "1", "--", "x"])).is_err());
        assert!(parse_args(args(&["--check", "--trace", "w.fst"])).is_err(), "--trace only with a program");
        assert!(parse_args(args(&["--trace-nic", "x", "--trace", "w.fst", "--", "x"])).is_err());
        assert!(parse_args(args(&["--trace", "w.fst", "--trace-cycles", "0", "--", "x"])).is_err());
        assert!(parse_args(args(&["--trace", "w.fst", "--trace-before", "many", "--", "x"])).is_err());
        assert!(parse_args(args(&["--trace", "w.fst", "--trace-on", "drop", "--trace-after", "0", "--", "x"])).is_ok());
    }
}
