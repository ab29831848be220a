//! The simulated device process as an attacker sees it (docs/sim-device.md, "Threat model"):
//! who may connect, whose memory it may reach and for how long, and regressions for the bugs
//! the socket fuzzer found (a reset that left register reads unanswered, a departed client's
//! backlog or a race at close that refused the next client, a client that does not read its
//! replies, descriptors that are not eventfds).

use hostdrv::simdev::SimDevice;
use hostdrv::simproto::{self as p, Recv, Rep, Req};
use hostdrv::Device;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;

fn start(name: &str) -> common::DevProc {
    common::DevProc::start("hm-sec", name, &["--idle-after", "20000"])
}

fn conn(sock: &Path) -> OwnedFd {
    let fd = p::connect(sock).unwrap();
    p::set_nonblocking(fd.as_raw_fd(), true).unwrap();
    fd
}

fn send(fd: &OwnedFd, seq: u32, cmd: u16, a: u64, b: u64) -> bool {
    try_send(fd, seq, cmd, a, b).expect("sendmsg")
}

/// Some(false) when the socket is full, None when the device closed the connection.
fn try_send(fd: &OwnedFd, seq: u32, cmd: u16, a: u64, b: u64) -> Option<bool> {
    let r = Req { seq, cmd, a, b, ..Default::default() };
    p::send_fds(fd.as_raw_fd(), &r.encode(), &[]).ok()
}

/// The next reply, None when the connection closed or nothing came within `secs`.
fn reply(fd: &OwnedFd, secs: u64) -> Option<Rep> {
    let t = Instant::now();
    let mut buf = [0u8; 128];
    while t.elapsed() < Duration::from_secs(secs) {
        p::wait_fd(fd.as_raw_fd(), libc::POLLIN, 200).unwrap();
        match p::recv(fd.as_raw_fd(), &mut buf) {
            Ok(Recv::Msg(n, _)) => return Rep::decode(&buf[..n]),
            Ok(Recv::Empty) => {}
            _ => return None,
        }
    }
    None
}

fn hello(fd: &OwnedFd) -> Rep {
    assert!(send(fd, 1, p::CMD_HELLO, p::PROTO_VERSION, 0));
    reply(fd, 10).expect("HELLO answered")
}

/// Opens the device as a well-behaved client, waiting up to `secs` while it is busy.
fn open_ok(sock: &Path, secs: u64) -> SimDevice {
    let t = Instant::now();
    loop {
        match SimDevice::open(sock) {
            Ok(d) => {
                d.read32(0).expect("register read");
                return d;
            }
            Err(hostdrv::Error::Busy(_)) if t.elapsed() < Duration::from_secs(secs) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => panic!("open: {e}"),
        }
    }
}

/// Run as a child under another uid (see `other_uids_are_refused`): tries to open the device
/// named by HM_SEC_CHILD and prints the outcome.
#[test]
fn child_open() {
    let Some(sock) = std::env::var_os("HM_SEC_CHILD") else { return };
    match SimDevice::open(Path::new(&sock)) {
        Ok(_) => println!("CHILD: opened"),
        Err(e) => println!("CHILD: {e}"),
    }
}

fn open_as(uid: u32, sock: &Path) -> String {
    let out = Command::new("setpriv")
        .arg(format!("--reuid={uid}"))
        .arg(format!("--regid={uid}"))
        .arg("--clear-groups")
        .arg(std::env::current_exe().unwrap())
        .args(["--exact", "child_open", "--nocapture", "--test-threads", "1"])
        .env("HM_SEC_CHILD", sock)
        .output()
        .expect("setpriv (util-linux)");
    let s = String::from_utf8_lossy(&out.stdout).to_string();
    s.lines().find(|l| l.starts_with("CHILD: ")).map(str::to_string).unwrap_or_else(|| format!("no CHILD line: {:?} {s} // {}", out.status, String::from_utf8_lossy(&out.stderr)))
}

#[test]
fn socket_is_owner_only_and_other_uids_are_refused() {
    let d = start("uid");
    let mode = std::fs::metadata(&d.sock).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "socket file mode");
    if p::euid() != 0 {
        eprintln!("not root: the other-uid half of this test needs root to start a client as another uid");
        return;
    }
    // the file mode keeps other users out
    let r = open_as(65534, &d.sock);
    assert!(r.contains("Permission denied"), "uid 65534 through the 0600 socket: {r}");
    // and SO_PEERCRED does, should the file be opened up
    std::fs::set_permissions(&d.sock, std::fs::Permissions::from_mode(0o666)).unwrap();
    let r = open_as(65534, &d.sock);
    assert!(r.contains("closed the connection"), "uid 65534 through a 0666 socket: {r}");
    // the owner still gets in
    let dev = open_ok(&d.sock, 10);
    dev.stats().unwrap();
}

/// The client's process exits while a child it forked keeps the connection open: the device
/// must drop it at once (pidfd), revoking its DMA windows, instead of holding on to a pid that
/// could be reused.
#[test]
fn client_exit_ends_the_session_even_with_its_socket_open() {
    let d = start("pidfd");
    let script = r#"
import os, socket, struct, sys, time, mmap
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.connect(sys.argv[1])
def call(seq, cmd, a=0, b=0, c=0, d=0):
    s.send(struct.pack('<IHHQQQQ', seq, cmd, 0, a, b, c, d))
    r = s.recv(64)
    return struct.unpack('<IHHiI', r[:16])[3]
assert call(1, 1, int(sys.argv[2]), os.getpid()) == 0
buf = mmap.mmap(-1, 8192)
import ctypes
addr = ctypes.addressof(ctypes.c_char.from_buffer(buf))
assert call(2, 4, addr, addr, 8192, 1) == 0
pid = os.fork()
if pid == 0:
    time.sleep(60)   # the grandchild keeps the connection open
    os._exit(0)
print('ready', pid, flush=True)
os._exit(0)
"#;
    let mut py = Command::new("python3").arg("-c").arg(script).arg(&d.sock).arg(hostdrv::simproto::PROTO_VERSION.to_string()).stdout(Stdio::piped()).spawn().expect("python3");
    // one line: the grandchild holds the pipe open too, so reading to its end would wait
    // for the grandchild's 60 s
    let mut out = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(py.stdout.take().unwrap()), &mut out).unwrap();
    assert!(py.wait().unwrap().success() && out.contains("ready"), "python client: {out}");
    // its socket is still open in the grandchild, yet the device takes a new client
    let dev = open_ok(&d.sock, 5);
    dev.stats().unwrap();
    let grandchild = out.split_whitespace().nth(1).unwrap();
    let _ = Command::new("kill").arg(grandchild).status();
}

#[test]
fn reads_queued_before_a_reset_are_answered() {
    let d = start("reset");
    let c = conn(&d.sock);
    assert_eq!(hello(&c).status, 0);
    for i in 0..6 {
        assert!(send(&c, 10 + i, p::CMD_READ32, 0, 0));
    }
    assert!(send(&c, 20, p::CMD_RESET, 0, 0));
    let mut seen = Vec::new();
    for _ in 0..7 {
        let r = reply(&c, 20).expect("every request answered");
        assert!(r.status == 0 || (r.cmd == p::CMD_READ32 && r.status == -libc::ECANCELED), "{r:?}");
        seen.push(r.seq);
    }
    seen.sort();
    assert_eq!(seen, vec![10, 11, 12, 13, 14, 15, 20]);
}

#[test]
fn descriptors_other_than_eventfds_are_refused() {
    let d = start("irq");
    let c = conn(&d.sock);
    assert_eq!(hello(&c).status, 0);
    let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
    let q = Req { seq: 2, cmd: p::CMD_SET_IRQ, a: 1, b: 1, ..Default::default() };
    assert!(p::send_fds(c.as_raw_fd(), &q.encode(), &[a.as_raw_fd()]).unwrap());
    assert_eq!(reply(&c, 10).unwrap().status, -libc::EINVAL, "a socket as the interrupt descriptor");
    let devnull = std::fs::File::open("/dev/null").unwrap();
    assert!(p::send_fds(c.as_raw_fd(), &q.encode(), &[devnull.as_raw_fd()]).unwrap());
    assert_eq!(reply(&c, 10).unwrap().status, -libc::EINVAL, "/dev/null as the interrupt descriptor");
    let e = p::eventfd().unwrap();
    assert!(p::send_fds(c.as_raw_fd(), &q.encode(), &[e.as_raw_fd()]).unwrap());
    assert_eq!(reply(&c, 10).unwrap().status, 0, "an eventfd");
}

/// A client that floods requests and never reads the replies loses its connection; the device
/// keeps serving (a second connection is answered EBUSY meanwhile, then opens once it left).
#[test]
fn a_client_that_does_not_read_cannot_stall_the_device() {
    let d = start("flood");
    let c = conn(&d.sock);
    assert_eq!(hello(&c).status, 0);
    let mut n = 0;
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(5) && n < 20_000 {
        match try_send(&c, n, p::CMD_STATS, 0, 0) {
            Some(true) => {}
            Some(false) => std::thread::sleep(Duration::from_millis(5)),
            None => break, // dropped by the device: the expected outcome
        }
        n += 1;
    }
    let other = conn(&d.sock);
    assert!(send(&other, 1, p::CMD_HELLO, p::PROTO_VERSION, 0));
    let r = reply(&other, 10);
    assert!(r.is_none_or(|r| r.status == -libc::EBUSY || r.status == 0), "{r:?}");
    drop(other);
    drop(c);
    open_ok(&d.sock, 10);
}

/// A client that leaves with requests still unread, immediately followed by the next one: the
/// next one is never refused.
#[test]
fn the_next_client_is_not_refused_after_a_close() {
    let d = start("next");
    for round in 0..5 {
        let c = conn(&d.sock);
        assert_eq!(hello(&c).status, 0, "round {round}");
        for i in 0..400 {
            if try_send(&c, i, p::CMD_READ32, 0, 0) != Some(true) {
                break;
            }
        }
        drop(c);
        let n = conn(&d.sock);
        let r = hello(&n);
        assert_eq!(r.status, 0, "round {round}: HELLO right after the previous client closed: {r:?}");
    }
}

/// A client loads an illegal instruction into the control core and starts it: the core traps,
/// which ends that client's session and resets the function, but not the device process.
#[test]
fn a_control_core_trap_does_not_end_the_device() {
    let mut d = start("trap");
    let c = conn(&d.sock);
    assert_eq!(hello(&c).status, 0);
    let post = |seq: u32, off: u64, v: u64| {
        let r = Req { seq, cmd: p::CMD_WRITE32, flags: p::F_POSTED, a: 0x1_0000 + off, b: v, ..Default::default() };
        assert!(p::send_fds(c.as_raw_fd(), &r.encode(), &[]).unwrap());
    };
    post(2, 0x208, 0); // hold the core
    post(3, 0x8000, 0); // IMEM word 0: an illegal instruction
    post(4, 0x208, 1); // run it
    let t = Instant::now();
    let mut trapped = false;
    let mut seq = 10;
    while t.elapsed() < Duration::from_secs(30) {
        match try_send(&c, seq, p::CMD_READ32, 0x1_0204, 0) {
            Some(true) => {}
            _ => {
                trapped = true;
                break;
            }
        }
        seq += 1;
        if reply(&c, 5).is_none() {
            trapped = true; // the device ended the session
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(trapped, "the session did not end after the trap");
    assert!(d.child.try_wait().unwrap().is_none(), "the device process ended");
    open_ok(&d.sock, 10).stats().unwrap();
}

/// `WAIT32` (the driver's wait for a firmware command): it answers when the register differs
/// from the value under the mask, or when its cycles ran out (b = 0), with the device's clock
/// running meanwhile; out-of-range cycles or masks are EINVAL, an offset outside the BAR
/// EFAULT, a posted one is dropped, and the requests behind a wait are answered after it, in
/// order.
#[test]
fn wait32_answers_on_a_change_or_when_its_cycles_run_out() {
    let d = start("wait32");
    let c = conn(&d.sock);
    assert_eq!(hello(&c).status, 0);
    let id = hematite_abi::regs::HM_REG_ID as u64;
    let req = |seq: u32, cmd: u16, a: u64, b: u64, cc: u64, dd: u64, flags: u16| {
        let r = Req { seq, cmd, flags, a, b, c: cc, d: dd };
        assert!(p::send_fds(c.as_raw_fd(), &r.encode(), &[]).unwrap());
    };
    let stats = |seq: u32| {
        req(seq, p::CMD_STATS, 0, 0, 0, 0, 0);
        reply(&c, 20).expect("STATS").a
    };
    // the identity register never changes: the wait runs its cycles out
    let c0 = stats(2);
    req(3, p::CMD_WAIT32, id, 0xFFFF_FFFF, hematite_abi::regs::HM_REG_ID_RESET as u64, 20_000, 0);
    let r = reply(&c, 60).expect("WAIT32 answered");
    assert_eq!((r.seq, r.status, r.a as u32, r.b), (3, 0, hematite_abi::regs::HM_REG_ID_RESET, 0), "{r:?}");
    let c1 = stats(4);
    assert!(c1 - c0 >= 20_000, "the clock ran through the wait: {c0} -> {c1}");
    // a value it differs from: answered at the first read
    req(5, p::CMD_WAIT32, id, 0xFFFF_FFFF, 0, 20_000, 0);
    let r = reply(&c, 60).expect("WAIT32 answered");
    assert_eq!((r.seq, r.status, r.a as u32, r.b), (5, 0, hematite_abi::regs::HM_REG_ID_RESET, 1), "{r:?}");
    assert!(stats(6) - c1 < 20_000, "no wait when the value differs");
    // refusals
    req(7, p::CMD_WAIT32, id, 1, 0, p::WAIT_MAX_CYCLES + 1, 0);
    assert_eq!(reply(&c, 20).unwrap().status, -libc::EINVAL, "too many cycles");
    req(8, p::CMD_WAIT32, id, 1 << 32, 0, 10, 0);
    assert_eq!(reply(&c, 20).unwrap().status, -libc::EINVAL, "a 33-bit mask");
    req(9, p::CMD_WAIT32, 1 << 40, 1, 0, 10, 0);
    assert_eq!(reply(&c, 20).unwrap().status, -libc::EFAULT, "outside BAR0");
    req(10, p::CMD_WAIT32, id, 0xFFFF_FFFF, hematite_abi::regs::HM_REG_ID_RESET as u64, 1000, p::F_POSTED);
    // behind a long wait, a read is answered after it, in order
    req(11, p::CMD_WAIT32, id, 0xFFFF_FFFF, hematite_abi::regs::HM_REG_ID_RESET as u64, 30_000, 0);
    req(12, p::CMD_READ32, id, 0, 0, 0, 0);
    let a = reply(&c, 60).expect("the wait");
    let b = reply(&c, 60).expect("the read");
    assert_eq!((a.seq, a.b, b.seq, b.a as u32), (11, 0, 12, hematite_abi::regs::HM_REG_ID_RESET), "{a:?} {b:?}");
    // and SimDevice's wait32 says the same
    drop(c);
    let dev = open_ok(&d.sock, 10);
    assert_eq!(dev.wait32(id, 0xFFFF_FFFF, 0, 1000).unwrap(), (hematite_abi::regs::HM_REG_ID_RESET, true));
    assert_eq!(dev.wait32(id, 0xFFFF_FFFF, hematite_abi::regs::HM_REG_ID_RESET, 1000).unwrap(), (hematite_abi::regs::HM_REG_ID_RESET, false));
}

/// WQE pushes (PUSH64, the MMIO path): one before HELLO or one asking for a reply is refused
/// (EPROTO, EINVAL), one at a window not aligned or beyond 16-bit QP numbers is dropped
/// without a word, one for a QP that never rings is taken and never used; the connection
/// carries on in order. A message of the push size with another command is malformed: the
/// connection ends.
#[test]
fn pushes_out_of_line_are_refused_and_the_connection_carries_on() {
    let d = start("push");
    let fd = conn(&d.sock);
    let push = |fd: &OwnedFd, seq: u32, cmd: u16, flags: u16, a: u64| {
        let r = Req { seq, cmd, flags, a, ..Default::default() };
        p::send_fds(fd.as_raw_fd(), &r.encode_push(&[0xEE; p::PUSH_BYTES]), &[]).expect("sendmsg")
    };
    assert!(push(&fd, 5, p::CMD_PUSH64, 0, 64));
    assert_eq!(reply(&fd, 10).map(|r| (r.seq, r.status)), Some((5, -libc::EPROTO)), "a push before HELLO");
    assert_eq!(hello(&fd).status, 0);
    assert!(push(&fd, 6, p::CMD_PUSH64, 0, 64));
    assert_eq!(reply(&fd, 10).map(|r| (r.seq, r.status)), Some((6, -libc::EINVAL)), "a push asking for a reply");
    assert!(push(&fd, 7, p::CMD_PUSH64, p::F_POSTED, 65));
    assert!(push(&fd, 8, p::CMD_PUSH64, p::F_POSTED, (p::PUSH_BYTES as u64) << 16));
    assert!(push(&fd, 9, p::CMD_PUSH64, p::F_POSTED, 3 * p::PUSH_BYTES as u64));
    assert!(send(&fd, 10, p::CMD_READ32, hematite_abi::regs::HM_REG_ID as u64, 0));
    let r = reply(&fd, 10).expect("the READ32 behind the pushes answered");
    assert_eq!((r.seq, r.status, r.a as u32), (10, 0, hematite_abi::regs::HM_REG_ID_RESET));
    assert!(push(&fd, 11, p::CMD_READ32, 0, 0));
    assert!(reply(&fd, 10).is_none(), "a push-sized READ32 ends the connection");
}
