//! hematite-run end to end, with a stand-in for `hematite-sim device` (a shell script that
//! creates the socket file and sleeps), so no simulator is needed. The /dev/infiniband links go
//! to a temporary directory (HEMATITE_RUN_DEV_DIR), so the host's /dev is not touched.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

mod common {
    pub mod fakepci;
}
use common::fakepci::fake_pci;

const EXE: &str = env!("CARGO_BIN_EXE_hematite-run");

const FAKE_SIM: &str = r#"#!/bin/sh
# stand-in for `hematite-sim device`: record the arguments, create the socket file, wait
sock=
for a in "$@"; do
    [ "$prev" = "--socket" ] && sock="$a"
    prev="$a"
done
echo "$@" > "$sock.args"
: > "$sock"
sleep 1000 &
p=$!
trap 'rm -f "$sock"; kill $p; exit 0' TERM
wait $p
"#;

/// The host must pass the checks that do not depend on hematite-run (libibverbs1 of a supported
/// version, no ib_core): the suite installs libibverbs1 and runs as root, so a host without them
/// fails these tests with the reason rather than passing them unrun.
fn require_host() {
    assert!(host_ok(), "the launch tests need Debian's libibverbs1 (36..=56) installed and no ib_core module loaded");
}

fn host_ok() -> bool {
    let v = Command::new("dpkg-query").args(["-W", "-f", "${Version}", "libibverbs1"]).output();
    let major: Option<u32> = v.ok().filter(|o| o.status.success()).and_then(|o| {
        String::from_utf8_lossy(&o.stdout).chars().take_while(|c| c.is_ascii_digit()).collect::<String>().parse().ok()
    });
    let ok = major.is_some_and(|m| (36..=56).contains(&m)) && !Path::new("/sys/module/ib_core").exists();
    if !ok {
        eprintln!("libibverbs1 36..=56 is not installed or ib_core is loaded");
    }
    ok
}

/// A shared library that is harmless to preload: the C library this test runs with.
fn some_shared_library() -> PathBuf {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    maps.lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .find(|p| p.contains("/libc.so"))
        .map(PathBuf::from)
        .expect("libc in /proc/self/maps")
}

struct Env {
    dir: PathBuf,
    state: PathBuf,
}

impl Env {
    fn new(tag: &str) -> Env {
        let dir = std::env::temp_dir().join(format!("hm-run-it-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let sim = dir.join("fake-sim");
        std::fs::write(&sim, FAKE_SIM).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&sim, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::write(dir.join("fw.hex"), "00000013\n").unwrap();
        Env { state: dir.join("state"), dir }
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(EXE);
        c.env("HEMATITE_SIM", self.dir.join("fake-sim"))
            .env("HEMATITE_FW", self.dir.join("fw.hex"))
            .env("HEMATITE_PROVIDER", some_shared_library())
            .env("HEMATITE_RUN_DEV_DIR", self.dir.join("dev"))
            .env_remove("HEMATITE_RUN_DIR")
            .env_remove("LD_PRELOAD")
            .arg("--state")
            .arg(&self.state)
            .args(args);
        c
    }

    fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).output().unwrap()
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        let _ = self.run(&["--stop"]);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn pid_of(state: &Path, n: usize) -> i32 {
    std::fs::read_to_string(state.join(format!("nic{n}.pid"))).unwrap().trim().parse().unwrap()
}

#[test]
fn launch_with_fake_devices() {
    require_host();
    let e = Env::new("launch");
    let o = e.run(&[
        "--no-overlay",
        "--",
        "/bin/sh",
        "-c",
        "echo $SYSFS_PATH; cat $SYSFS_PATH/class/infiniband/hematite0/hematite_backend; echo $RDMAV_DRIVERS; echo $LD_PRELOAD; echo nic=$HEMATITE_NIC; exit 3",
    ]);
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(3), "stdout {out} stderr {}", text(&o.stderr));
    let st = e.state.canonicalize().unwrap();
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], st.join("sys/all").display().to_string());
    assert_eq!(lines[1], format!("sim:{}", st.join("nic0.sock").display()));
    assert_eq!(lines[2], st.join("lib/libhematite").display().to_string());
    assert_eq!(lines[3], st.join("lib/libhematite-rdmav34.so").display().to_string());
    assert_eq!(lines[4], "nic=");
    assert_eq!(std::fs::read_link(st.join("lib/libhematite-rdmav34.so")).unwrap(), some_shared_library().canonicalize().unwrap());
    assert_eq!(std::fs::read_link(e.dir.join("dev/uverbs1")).unwrap(), Path::new("/dev/full"));

    // both devices got their identity and the wire to each other
    let a0 = std::fs::read_to_string(st.join("nic0.sock.args")).unwrap();
    let a1 = std::fs::read_to_string(st.join("nic1.sock.args")).unwrap();
    for (a, want) in [
        (&a0, "--mac 02:48:4d:00:00:01 --ip 10.77.0.1"),
        (&a1, "--mac 02:48:4d:00:00:02 --ip 10.77.0.2"),
        (&a0, &format!("--wire-local unix:{0}/wire0 --wire-peer unix:{0}/wire1", st.display())),
        (&a1, &format!("--wire-local unix:{0}/wire1 --wire-peer unix:{0}/wire0", st.display())),
        (&a0, &format!("--pcap {}/nic0.pcap", st.display())),
    ] {
        assert!(a.contains(want), "{a} lacks {want}");
    }
    assert!(!a0.contains("--loss"));
    let (p0, p1) = (pid_of(&st, 0), pid_of(&st, 1));

    // status
    let s = text(&e.run(&["--status"]).stdout);
    assert!(s.contains(&format!("nic0: running, pid {p0}")), "{s}");
    assert!(s.contains(&format!("nic1: running, pid {p1}")), "{s}");

    // a second launch, one NIC only: the running devices are kept
    let o = e.run(&["--nic", "1", "--no-overlay", "--", "/bin/sh", "-c", "echo $SYSFS_PATH; ls $SYSFS_PATH/class/infiniband; echo nic=$HEMATITE_NIC"]);
    let out = text(&o.stdout);
    assert!(o.status.success(), "{out} {}", text(&o.stderr));
    assert_eq!(out, format!("{}\nhematite1\nnic=1\n", st.join("sys/nic1").display()));
    assert_eq!((pid_of(&st, 0), pid_of(&st, 1)), (p0, p1));

    // a program killed by a signal: 128 + signal
    let o = e.run(&["--no-overlay", "--", "/bin/sh", "-c", "kill -TERM $$"]);
    assert_eq!(o.status.code(), Some(128 + 15));

    // SIGTERM to hematite-run reaches the program, whose status comes back
    let ready = e.dir.join("ready");
    let script = format!("sleep 30 & trap 'kill $!; exit 7' TERM; : > {}; wait", ready.display());
    let mut ch = e.cmd(&["--no-overlay", "--", "/bin/sh", "-c", &script]).stderr(std::process::Stdio::null()).spawn().unwrap();
    let t0 = std::time::Instant::now();
    while !ready.exists() {
        assert!(t0.elapsed().as_secs() < 20, "the program did not start");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    // SAFETY: plain kill(2) of our child.
    unsafe { libc::kill(ch.id() as i32, libc::SIGTERM) };
    assert_eq!(ch.wait().unwrap().code(), Some(7));

    // a failing check stops the launch with status 2 and says why
    let o = e.cmd(&["--no-overlay", "--", "/bin/true"]).env("HEMATITE_PROVIDER", e.dir.join("fw.hex")).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("provider: FAIL"), "{}", text(&o.stderr));
    let o = e.run(&["--nic", "2", "--", "/bin/true"]);
    assert_eq!(o.status.code(), Some(2));

    // stop
    let s = text(&e.run(&["--stop"]).stdout);
    assert!(s.contains(&format!("nic0: stopped (pid {p0})")) && s.contains(&format!("nic1: stopped (pid {p1})")), "{s}");
    assert!(!st.join("nic0.pid").exists() && !st.join("nic0.sock").exists());
    assert!(!Path::new(&format!("/proc/{p0}")).exists() || std::fs::read_to_string(format!("/proc/{p0}/stat")).unwrap().contains(") Z"));
    assert!(text(&e.run(&["--status"]).stdout).contains("no NICs started"));
}

#[test]
fn device_that_dies_is_reported() {
    require_host();
    let e = Env::new("dies");
    std::fs::write(e.dir.join("fake-sim"), "#!/bin/sh\necho 'cannot open the firmware image' >&2\nexit 1\n").unwrap();
    let o = e.run(&["--no-overlay", "--", "/bin/true"]);
    assert_eq!(o.status.code(), Some(2));
    let err = text(&o.stderr);
    assert!(err.contains("before creating") && err.contains("nic0.log") && err.contains("cannot open the firmware image"), "{err}");
}

fn mounts() -> Vec<String> {
    // mount IDs and points of this namespace, without the per-mount counters
    std::fs::read_to_string("/proc/self/mountinfo").unwrap().lines().map(|l| l.split_whitespace().take(5).collect::<Vec<_>>().join(" ")).collect()
}

fn sys_class() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir("/sys/class").unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    v.sort();
    v
}

#[test]
fn overlay_as_root() {
    // SAFETY: geteuid cannot fail.
    assert_eq!(unsafe { libc::geteuid() }, 0, "the overlay test needs root (the suite runs as root)");
    require_host();
    let e = Env::new("overlay");
    let (m0, c0) = (mounts(), sys_class());
    let o = e.run(&[
        "--",
        "/bin/sh",
        "-c",
        "ls /sys/class/infiniband; cat /sys/class/infiniband/hematite0/ports/1/gids/0; readlink -f /sys/class/net/lo; \
         touch /sys/class/infiniband/x 2>/dev/null || echo read-only; ls /sys/class | wc -l; \
         a=$(readlink -f /sys/class/infiniband/hematite1/device); \
         b=$(readlink -f /sys/class/pci_bus/4d48:02/../../4d48:02:00.0); \
         [ -n \"$a\" ] && [ \"$a\" = \"$b\" ] && echo same-function; basename $a; cat $a/vendor $a/class; \
         ls /sys/class/pci_bus | wc -l",
    ]);
    let out = text(&o.stdout);
    assert!(o.status.success(), "{out} {}", text(&o.stderr));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(&lines[..5], ["hematite0", "hematite1", "0000:0000:0000:0000:0000:ffff:0a4d:0001", "/sys/devices/virtual/net/lo", "read-only"], "{out}");
    // inside: every real class plus the two fake ones (and pci_bus, if the host has none)
    let want = c0.len() + ["infiniband", "infiniband_verbs", "pci_bus"].iter().filter(|c| !c0.contains(&c.to_string())).count();
    assert_eq!(lines[5].trim(), want.to_string());
    // NCCL's PCI lookup (/sys/class/pci_bus/<bus>/../../<bdf>) finds the NIC's function, a
    // network controller of Hematite's vendor ID; pci_bus holds the host's buses and both NICs'
    let host_buses = std::fs::read_dir("/sys/class/pci_bus").map(|r| r.count()).unwrap_or(0);
    assert_eq!(&lines[6..10], ["same-function", "4d48:02:00.0", "0x484d", "0x020000"], "{out}");
    assert_eq!(lines[10].trim(), (host_buses + 2).to_string(), "{out}");
    // outside: nothing changed
    assert_eq!(mounts(), m0);
    assert_eq!(sys_class(), c0);
}

#[test]
fn cards_publish_run_withdraw() {
    require_host();
    let e = Env::new("cards");
    let x = (0x10ee, 0x903f);
    let sys = fake_pci(
        &e.dir,
        &[
            ("0000:fe:00.0", x.0, x.1, Some("vfio-pci")),
            ("0000:fe:00.1", x.0, x.1, Some("vfio-pci")),
            ("0000:fe:01.0", x.0, x.1, Some("xdma")),
        ],
    );
    let conf = e.dir.join("cards.conf");
    let cfg = conf.to_str().unwrap();
    let cards = |args: &[&str]| {
        let mut c = e.cmd(args);
        c.env("HEMATITE_RUN_SYS_ROOT", &sys);
        c.output().unwrap()
    };
    // no configuration: an error naming the file
    let o = cards(&["--cards", "--config", cfg]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("cards.conf: No such file"), "{}", text(&o.stderr));
    // a malformed one: the line
    std::fs::write(&conf, "function fe:00.0 mac 02:48:4d:01:00:01\nfunction fe:00.1\n").unwrap();
    let o = cards(&["--cards", "--config", cfg]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("line 2: 0000:fe:00.1 needs `mac`"), "{}", text(&o.stderr));
    // nothing publishable
    std::fs::write(&conf, "function fe:01.0 mac 02:48:4d:01:00:03\n").unwrap();
    let o = cards(&["--cards", "--config", cfg]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("not published: 0000:fe:01.0: bound to xdma") && err.contains("no card to publish"), "{err}");
    assert!(!e.state.join("cards").exists());

    std::fs::write(&conf, "# two ports\nfunction fe:00.1 mac 02:48:4d:01:00:02 ipv4 10.1.0.2\nfunction fe:00.0 mac 02:48:4d:01:00:01 ipv4 10.1.0.1\n").unwrap();
    let o = cards(&["--cards", "--config", cfg]);
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert_eq!(o.status.code(), Some(0), "{out}{err}");
    assert!(out.contains("hematite0: vfio:0000:fe:00.0,mac=02:48:4d:01:00:01,ipv4=10.1.0.1"), "{out}");
    assert!(out.contains("published 2 card(s) (hematite0, hematite1)"), "{out}");
    // the xdma function is found by its IDs and reported, not published
    assert!(err.contains("0000:fe:01.0: a Hematite function (10ee:903f, driver xdma) with no `function` line"), "{err}");
    let st = e.state.canonicalize().unwrap();
    assert_eq!(std::fs::read_link(e.dir.join("dev/uverbs1")).unwrap(), Path::new("/dev/full"));
    let dev = std::fs::read_link(st.join("sys/all/class/infiniband/hematite1/device")).unwrap();
    assert_eq!(dev, sys.canonicalize().unwrap().join("devices/pci0000:00/0000:fe:00.1"));

    // a program sees the cards' tree; no device process is started
    let o = e.run(&["--no-overlay", "--nic", "1", "--", "/bin/sh", "-c", "ls $SYSFS_PATH/class/infiniband; cat $SYSFS_PATH/class/infiniband/hematite1/hematite_backend; echo nic=$HEMATITE_NIC"]);
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}{}", text(&o.stderr));
    assert_eq!(out, "hematite1\nvfio:0000:fe:00.1,mac=02:48:4d:01:00:02,ipv4=10.1.0.2\nnic=1\n");
    assert!(!st.join("nic0.pid").exists() && !st.join("nic0.sock").exists());
    let o = e.run(&["--status"]);
    assert_eq!(text(&o.stdout), "hematite0: card vfio:0000:fe:00.0,mac=02:48:4d:01:00:01,ipv4=10.1.0.1\nhematite1: card vfio:0000:fe:00.1,mac=02:48:4d:01:00:02,ipv4=10.1.0.2\n");
    // what does not apply to cards says so
    let o = e.run(&["--stat"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o.stderr).contains("holds cards; their counters are not sampled yet"));
    let o = e.run(&["--loss", "0.1", "--", "true"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("are for simulated NICs"));
    let o = e.run(&["--nic", "2", "--", "true"]);
    assert_eq!(o.status.code(), Some(2));

    // --stop withdraws them; the state directory is a simulated one again
    let o = e.run(&["--stop"]);
    assert_eq!(text(&o.stdout), format!("withdrew 2 card(s) from {}\n", st.display()));
    assert!(!st.join("cards").exists() && !st.join("sys/all").exists());
    let o = e.run(&["--no-overlay", "--", "/bin/sh", "-c", "cat $SYSFS_PATH/class/infiniband/hematite0/hematite_backend"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(text(&o.stdout).starts_with("sim:"), "{}", text(&o.stdout));
    // and --cards refuses while simulated NICs run there
    let o = cards(&["--cards", "--config", cfg]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("simulated NICs run in"), "{}", text(&o.stderr));
}
