//! The protocol between the driver's simulation backend and the simulated device process
//! (`hematite-sim device`), and the socket helpers both sides use.
//!
//! Why not vfio-user: see docs/sim-device.md. In short, vfio-user shares DMA memory by file
//! descriptor (or serves it by messages the client must answer), while verbs programs register
//! arbitrary heap memory; here the device reaches the client's memory the way an IOMMU-backed
//! device does, by address, inside the windows the client mapped (process_vm_readv/writev,
//! permitted by the client with `PR_SET_PTRACER`).
//!
//! Transport: an `AF_UNIX` `SOCK_SEQPACKET` socket, one message per packet, little-endian.
//! A request is [`REQ_BYTES`] bytes: `seq u32, cmd u16, flags u16, a u64, b u64, c u64, d u64`.
//! A reply is [`REP_BYTES`] bytes: `seq u32, cmd u16, flags u16, status i32 (0 or -errno),
//! 0 u32, a u64, b u64, c u64, d u64`. Requests are handled in order; a request with
//! [`F_POSTED`] gets no reply (MMIO writes, like PCIe posted writes). File descriptors travel as
//! `SCM_RIGHTS`. One request carries data: [`CMD_PUSH64`], a whole 64-byte write into a push
//! window, is the request followed by the 64 bytes ([`PUSH_REQ_BYTES`] in all).

use crate::{Error, Result};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::Path;

/// Protocol version; HELLO fails with EPROTO when the two sides differ.
pub const PROTO_VERSION: u64 = 2;
/// Request size in bytes.
pub const REQ_BYTES: usize = 40;
/// Reply size in bytes.
pub const REP_BYTES: usize = 48;

/// a = PROTO_VERSION, b = client pid. Reply: a = BAR0 size, b = interrupt vectors, c = MAC,
/// d = IPv4 address. EBUSY when another client is attached.
pub const CMD_HELLO: u16 = 1;
/// a = BAR0 offset. Reply: a = value. EFAULT when the device answered with a bus error.
pub const CMD_READ32: u16 = 2;
/// a = BAR0 offset, b = value (usually posted).
pub const CMD_WRITE32: u16 = 3;
/// a = IOVA, b = client virtual address, c = length, d = 1 if the device may write.
pub const CMD_DMA_MAP: u16 = 4;
/// a = IOVA, b = length.
pub const CMD_DMA_UNMAP: u16 = 5;
/// a = vector, b = 1 when an eventfd is attached (SCM_RIGHTS), 0 to disconnect.
pub const CMD_SET_IRQ: u16 = 6;
/// Function reset; replies once the function is back: the device process's firmware runs
/// again (a card served through its PCIe model, tests/shell/card_host.py, leaves its control
/// core held, as after a card's reset, until the driver loads the firmware).
pub const CMD_RESET: u16 = 7;
/// a = IPv4 address (host order). Reply: a = MAC. The device ARPs on its wire;
/// EHOSTUNREACH when nobody answers.
pub const CMD_ARP_RESOLVE: u16 = 8;
/// Reply: a = clock cycles simulated, b = frames sent, c = frames received, d = DMA accesses
/// refused by the IOMMU check.
pub const CMD_STATS: u16 = 9;
/// a = BAR0 offset, b = mask, c = value, d = most clock cycles to wait (at most
/// [`WAIT_MAX_CYCLES`]). The device reads the register every [`WAIT_GAP_CYCLES`] cycles, its
/// clock running between the reads, until `(register & mask) != (value & mask)` or the cycles
/// are spent. Reply: a = the last value read, b = 1 when it differs, 0 when the wait ran out.
/// EFAULT on a bus error, EINVAL for d above the limit. One request instead of a read round
/// trip per poll: the driver waits for its firmware commands this way.
pub const CMD_WAIT32: u16 = 10;
/// Posted, with 64 bytes of data after the request: a = push window offset (QP number x
/// [`PUSH_BYTES`]). A WQE pushed whole through the MMIO path (the transport engine's push
/// port; docs/transport-engine.md, "Latency"), ahead of the doorbell that binds it. On a card
/// this is one write-combined 64-byte write into BAR2. A push for a QP beyond the table, or
/// one not posted, is refused (counted as an MMIO error; EINVAL when a reply was asked for).
pub const CMD_PUSH64: u16 = 11;
/// Bytes of a push (one send WQE of the 64-byte stride).
pub const PUSH_BYTES: usize = hematite_abi::pkt::HM_PUSH_BYTES as usize;
/// Size of a [`CMD_PUSH64`] message.
pub const PUSH_REQ_BYTES: usize = REQ_BYTES + PUSH_BYTES;
/// Most cycles one [`CMD_WAIT32`] may wait.
pub const WAIT_MAX_CYCLES: u64 = 1 << 20;
/// Cycles between the register reads of a [`CMD_WAIT32`].
pub const WAIT_GAP_CYCLES: u64 = 32;

/// No reply wanted.
pub const F_POSTED: u16 = 1;
/// Set on replies.
pub const F_REPLY: u16 = 0x8000;

/// A request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Req {
    pub seq: u32,
    pub cmd: u16,
    pub flags: u16,
    pub a: u64,
    pub b: u64,
    pub c: u64,
    pub d: u64,
}

impl Req {
    /// Wire bytes.
    pub fn encode(&self) -> [u8; REQ_BYTES] {
        let mut o = [0u8; REQ_BYTES];
        put_header(&mut o, self.seq, self.cmd, self.flags);
        put_values(&mut o, 8, [self.a, self.b, self.c, self.d]);
        o
    }
    /// A [`CMD_PUSH64`] message: the request, then the data.
    pub fn encode_push(&self, data: &[u8; PUSH_BYTES]) -> [u8; PUSH_REQ_BYTES] {
        let mut o = [0u8; PUSH_REQ_BYTES];
        o[..REQ_BYTES].copy_from_slice(&self.encode());
        o[REQ_BYTES..].copy_from_slice(data);
        o
    }
    /// Parses a [`CMD_PUSH64`] message; None unless exactly PUSH_REQ_BYTES long with that command.
    pub fn decode_push(buf: &[u8]) -> Option<(Req, [u8; PUSH_BYTES])> {
        if buf.len() != PUSH_REQ_BYTES {
            return None;
        }
        let r = Req::decode(&buf[..REQ_BYTES])?;
        (r.cmd == CMD_PUSH64).then(|| (r, buf[REQ_BYTES..].try_into().expect("64 bytes")))
    }
    /// Parses a request; None unless exactly REQ_BYTES long.
    pub fn decode(buf: &[u8]) -> Option<Req> {
        if buf.len() != REQ_BYTES {
            return None;
        }
        let (seq, cmd, flags) = header(buf);
        let [a, b, c, d] = values(buf, 8);
        Some(Req { seq, cmd, flags, a, b, c, d })
    }
}

/// A reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Rep {
    pub seq: u32,
    pub cmd: u16,
    pub status: i32,
    pub a: u64,
    pub b: u64,
    pub c: u64,
    pub d: u64,
}

impl Rep {
    /// The reply to `r` with `status` and no values.
    pub fn to(r: &Req, status: i32) -> Rep {
        Rep { seq: r.seq, cmd: r.cmd, status, ..Default::default() }
    }
    /// Wire bytes.
    pub fn encode(&self) -> [u8; REP_BYTES] {
        let mut o = [0u8; REP_BYTES];
        put_header(&mut o, self.seq, self.cmd, F_REPLY);
        o[8..12].copy_from_slice(&self.status.to_le_bytes());
        put_values(&mut o, 16, [self.a, self.b, self.c, self.d]);
        o
    }
    /// Parses a reply; None unless exactly REP_BYTES long with the reply flag.
    pub fn decode(buf: &[u8]) -> Option<Rep> {
        if buf.len() != REP_BYTES {
            return None;
        }
        let (seq, cmd, flags) = header(buf);
        if flags & F_REPLY == 0 {
            return None;
        }
        let status = i32::from_le_bytes(buf[8..12].try_into().unwrap());
        let [a, b, c, d] = values(buf, 16);
        Some(Rep { seq, cmd, status, a, b, c, d })
    }
}

/// Writes the header requests and replies start with: sequence number, command, flags.
fn put_header(o: &mut [u8], seq: u32, cmd: u16, flags: u16) {
    o[0..4].copy_from_slice(&seq.to_le_bytes());
    o[4..6].copy_from_slice(&cmd.to_le_bytes());
    o[6..8].copy_from_slice(&flags.to_le_bytes());
}

/// Reads the header written by [`put_header`]: `(seq, cmd, flags)`.
fn header(b: &[u8]) -> (u32, u16, u16) {
    (
        u32::from_le_bytes(b[0..4].try_into().unwrap()),
        u16::from_le_bytes(b[4..6].try_into().unwrap()),
        u16::from_le_bytes(b[6..8].try_into().unwrap()),
    )
}

/// Writes a message's four values from byte `at` on (little-endian u64s).
fn put_values(o: &mut [u8], at: usize, v: [u64; 4]) {
    for (i, v) in v.iter().enumerate() {
        o[at + 8 * i..at + 8 * (i + 1)].copy_from_slice(&v.to_le_bytes());
    }
}

/// Reads the four values written by [`put_values`].
fn values(b: &[u8], at: usize) -> [u64; 4] {
    core::array::from_fn(|i| u64::from_le_bytes(b[at + 8 * i..at + 8 * (i + 1)].try_into().unwrap()))
}

// ---- socket helpers (the only unsafe code of the simulation transport) ----

fn cvt(r: libc::c_int, what: &str) -> Result<libc::c_int> {
    if r < 0 {
        Err(Error::last_os(what))
    } else {
        Ok(r)
    }
}

fn sockaddr(path: &Path) -> Result<(libc::sockaddr_un, libc::socklen_t)> {
    use std::os::unix::ffi::OsStrExt;
    let bytes = path.as_os_str().as_bytes();
    // SAFETY: sockaddr_un is plain old data; all-zero is a valid value.
    let mut a: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    if bytes.len() >= a.sun_path.len() {
        return Err(Error::inval(format!("socket path {} is longer than {} bytes", path.display(), a.sun_path.len() - 1)));
    }
    a.sun_family = libc::AF_UNIX as libc::sa_family_t;
    for (d, s) in a.sun_path.iter_mut().zip(bytes) {
        *d = *s as libc::c_char;
    }
    let len = (std::mem::size_of::<libc::sa_family_t>() + bytes.len() + 1) as libc::socklen_t;
    Ok((a, len))
}

fn seqpacket() -> Result<OwnedFd> {
    // SAFETY: plain socket(2) call; the result is checked and owned below.
    let fd = cvt(unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC, 0) }, "socket")?;
    // SAFETY: fd was just returned by socket(2) and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Connects to the device socket at `path`.
pub fn connect(path: &Path) -> Result<OwnedFd> {
    let fd = seqpacket()?;
    let (a, len) = sockaddr(path)?;
    // SAFETY: `a` is a valid sockaddr_un of `len` bytes; fd is a live socket.
    cvt(unsafe { libc::connect(fd.as_raw_fd(), &a as *const _ as *const libc::sockaddr, len) }, &format!("connect {}", path.display()))?;
    Ok(fd)
}

/// Binds and listens on `path` (non-blocking listener). The socket file is created with mode
/// 0600 (owner only: connecting needs write permission on it): the umask is narrowed to 0177
/// around `bind`, so the file never exists with a wider mode, and the mode is set again after.
pub fn listen(path: &Path) -> Result<OwnedFd> {
    use std::os::unix::fs::PermissionsExt;
    // The socket is bound, restricted and listening under a temporary name first and then
    // renamed into place, so a client that sees `path` exist can connect at once (binding
    // at `path` itself left a moment where the file existed but connect was refused).
    // (A path too long for a temporary name beside it is bound in place, as before.)
    sockaddr(path)?;
    let tmp = path.with_file_name(format!(".hm{}.sock", std::process::id()));
    let tmp = if sockaddr(&tmp).is_ok() { tmp } else { path.to_path_buf() };
    if tmp != path {
        let _ = std::fs::remove_file(&tmp);
    }
    let fd = seqpacket()?;
    let (a, len) = sockaddr(&tmp)?;
    // SAFETY: umask(2) only changes this process's file creation mask; the old one is restored
    // right after bind.
    let old = unsafe { libc::umask(0o177) };
    // SAFETY: `a` is a valid sockaddr_un of `len` bytes; fd is a live socket.
    let r = unsafe { libc::bind(fd.as_raw_fd(), &a as *const _ as *const libc::sockaddr, len) };
    // SAFETY: as above, restores the previous mask.
    unsafe { libc::umask(old) };
    cvt(r, &format!("bind {}", tmp.display()))?;
    let placed = (|| {
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600)).map_err(|e| Error::sys(format!("chmod {}", tmp.display()), e))?;
        // SAFETY: fd is a bound socket.
        cvt(unsafe { libc::listen(fd.as_raw_fd(), 4) }, "listen")?;
        set_nonblocking(fd.as_raw_fd(), true)?;
        if tmp == path {
            return Ok(());
        }
        std::fs::rename(&tmp, path).map_err(|e| Error::sys(format!("rename {} to {}", tmp.display(), path.display()), e))
    })();
    if let Err(e) = placed {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    Ok(fd)
}

/// Accepts a pending connection (None when there is none; the new socket is non-blocking).
pub fn accept(listener: RawFd) -> Result<Option<OwnedFd>> {
    // SAFETY: accept4 with null address pointers is allowed; the result is checked.
    let r = unsafe { libc::accept4(listener, std::ptr::null_mut(), std::ptr::null_mut(), libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK) };
    if r < 0 {
        let e = std::io::Error::last_os_error();
        if e.kind() == std::io::ErrorKind::WouldBlock {
            return Ok(None);
        }
        return Err(Error::sys("accept", e));
    }
    // SAFETY: r is a new descriptor owned by nobody else.
    Ok(Some(unsafe { OwnedFd::from_raw_fd(r) }))
}

/// Sets or clears O_NONBLOCK.
pub fn set_nonblocking(fd: RawFd, on: bool) -> Result<()> {
    // SAFETY: F_GETFL / F_SETFL on a descriptor the caller owns.
    let fl = cvt(unsafe { libc::fcntl(fd, libc::F_GETFL) }, "fcntl")?;
    let fl = if on { fl | libc::O_NONBLOCK } else { fl & !libc::O_NONBLOCK };
    // SAFETY: as above.
    cvt(unsafe { libc::fcntl(fd, libc::F_SETFL, fl) }, "fcntl")?;
    Ok(())
}

/// The pid of the process at the other end of a connected Unix socket.
pub fn peer_pid(fd: RawFd) -> Result<u32> {
    Ok(peer_cred(fd)?.pid)
}

/// Credentials of the process at the other end of a connected Unix socket, as the kernel
/// recorded them at `connect` (or `listen`) time (`SO_PEERCRED`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerCred {
    pub pid: u32,
    pub uid: u32,
    pub gid: u32,
}

/// [`PeerCred`] of a connected Unix socket.
pub fn peer_cred(fd: RawFd) -> Result<PeerCred> {
    // SAFETY: ucred is plain old data.
    let mut c: libc::ucred = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `c` is a ucred of `len` bytes; the kernel fills it.
    cvt(unsafe { libc::getsockopt(fd, libc::SOL_SOCKET, libc::SO_PEERCRED, &mut c as *mut _ as *mut libc::c_void, &mut len) }, "SO_PEERCRED")?;
    Ok(PeerCred { pid: c.pid as u32, uid: c.uid, gid: c.gid })
}

/// This process's effective uid.
pub fn euid() -> u32 {
    // SAFETY: geteuid(2) cannot fail and has no side effects.
    unsafe { libc::geteuid() }
}

/// `SO_PEERPIDFD` (Linux 6.5, the same number on every architecture).
const SO_PEERPIDFD: libc::c_int = 77;

/// A pidfd for the process at the other end of a connected Unix socket: `SO_PEERPIDFD`, which
/// names exactly the process that connected (the kernel keeps a reference to it in the socket,
/// so there is no window for pid reuse), or, on kernels before 6.5, `pidfd_open` of the
/// `SO_PEERCRED` pid. In the fallback the pid could have been reused if the client died before
/// this call; the caller then also checks that the connection is still open and the process
/// alive (see [`pidfd_exited`]).
pub fn peer_pidfd(fd: RawFd) -> Result<OwnedFd> {
    let mut pfd: libc::c_int = -1;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `pfd` is an int of `len` bytes; on success the kernel stores a new descriptor.
    let r = unsafe { libc::getsockopt(fd, libc::SOL_SOCKET, SO_PEERPIDFD, &mut pfd as *mut _ as *mut libc::c_void, &mut len) };
    if r == 0 && pfd >= 0 {
        // SAFETY: pfd is a new descriptor owned by nobody else.
        return Ok(unsafe { OwnedFd::from_raw_fd(pfd) });
    }
    let e = std::io::Error::last_os_error();
    if r == 0 || e.raw_os_error() == Some(libc::ENOPROTOOPT) {
        return pidfd_open(peer_pid(fd)?);
    }
    Err(Error::sys("SO_PEERPIDFD", e))
}

/// `pidfd_open(pid, 0)`: a descriptor that names process `pid` for as long as it is held.
pub fn pidfd_open(pid: u32) -> Result<OwnedFd> {
    // SAFETY: pidfd_open(2) takes a pid and flags and returns a new descriptor or -1.
    let r = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0 as libc::c_uint) };
    if r < 0 {
        return Err(Error::last_os("pidfd_open"));
    }
    // SAFETY: r is a new descriptor owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(r as RawFd) })
}

/// True when the process a pidfd names has exited (the pidfd polls readable then; a zombie
/// counts as exited: its pid becomes reusable as soon as its parent reaps it).
pub fn pidfd_exited(pidfd: RawFd) -> Result<bool> {
    wait_fd(pidfd, libc::POLLIN, 0)
}

/// The pid a pidfd names (`Pid:` of its fdinfo), None once the process is reaped.
pub fn pidfd_pid(pidfd: RawFd) -> Result<Option<u32>> {
    let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{pidfd}")).map_err(|e| Error::sys("pidfd fdinfo", e))?;
    let pid = info.lines().find_map(|l| l.strip_prefix("Pid:")).and_then(|v| v.trim().parse::<i64>().ok());
    Ok(pid.filter(|&p| p > 0).map(|p| p as u32))
}

/// True when the peer of a connected socket has closed it or shut it down for writing
/// (`POLLRDHUP` / `POLLHUP`), even while messages it sent before are still unread.
pub fn hung_up(fd: RawFd) -> bool {
    let mut p = libc::pollfd { fd, events: libc::POLLRDHUP, revents: 0 };
    // SAFETY: one valid pollfd, no waiting.
    let r = unsafe { libc::poll(&mut p, 1, 0) };
    r > 0 && p.revents & (libc::POLLRDHUP | libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0
}

/// A new non-blocking eventfd.
pub fn eventfd() -> Result<OwnedFd> {
    // SAFETY: eventfd(2) returns a new descriptor or -1.
    let fd = cvt(unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) }, "eventfd")?;
    // SAFETY: fd is a new descriptor owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// True when `fd` is an eventfd.
pub fn is_eventfd(fd: RawFd) -> bool {
    std::fs::read_link(format!("/proc/self/fd/{fd}")).is_ok_and(|l| l.as_os_str() == "anon_inode:[eventfd]")
}

/// Connects to the device socket at `path` without blocking: None when the listener's backlog
/// is full (`EAGAIN`). The socket is non-blocking.
pub fn connect_nonblocking(path: &Path) -> Result<Option<OwnedFd>> {
    let fd = seqpacket()?;
    set_nonblocking(fd.as_raw_fd(), true)?;
    let (a, len) = sockaddr(path)?;
    // SAFETY: `a` is a valid sockaddr_un of `len` bytes; fd is a live socket.
    let r = unsafe { libc::connect(fd.as_raw_fd(), &a as *const _ as *const libc::sockaddr, len) };
    if r < 0 {
        let e = std::io::Error::last_os_error();
        if e.kind() == std::io::ErrorKind::WouldBlock {
            return Ok(None);
        }
        return Err(Error::sys(format!("connect {}", path.display()), e));
    }
    Ok(Some(fd))
}

/// `shutdown(2)`: `how` is `libc::SHUT_RD`, `SHUT_WR` or `SHUT_RDWR`.
pub fn shutdown(fd: RawFd, how: libc::c_int) -> Result<()> {
    // SAFETY: shutdown(2) on a descriptor the caller owns.
    cvt(unsafe { libc::shutdown(fd, how) }, "shutdown")?;
    Ok(())
}

/// Sends one message with any number of descriptors attached (up to the kernel's limit of
/// 253), without waiting: false when the socket is full.
pub fn send_fds(fd: RawFd, data: &[u8], pass: &[RawFd]) -> Result<bool> {
    let mut iov = libc::iovec { iov_base: data.as_ptr() as *mut libc::c_void, iov_len: data.len() };
    // SAFETY: CMSG_SPACE only computes a size.
    let space = unsafe { libc::CMSG_SPACE(std::mem::size_of_val(pass) as u32) } as usize;
    let mut cbuf = vec![0u64; space.div_ceil(8)];
    // SAFETY: msghdr is plain old data.
    let mut m: libc::msghdr = unsafe { std::mem::zeroed() };
    m.msg_iov = &mut iov;
    m.msg_iovlen = 1;
    if !pass.is_empty() {
        m.msg_control = cbuf.as_mut_ptr() as *mut libc::c_void;
        m.msg_controllen = space;
        // SAFETY: msg_control points at `space` bytes, enough for one cmsghdr whose data area
        // holds `pass.len()` ints.
        unsafe {
            let c = libc::CMSG_FIRSTHDR(&m);
            (*c).cmsg_level = libc::SOL_SOCKET;
            (*c).cmsg_type = libc::SCM_RIGHTS;
            (*c).cmsg_len = libc::CMSG_LEN(std::mem::size_of_val(pass) as u32) as usize;
            std::ptr::copy_nonoverlapping(pass.as_ptr(), libc::CMSG_DATA(c) as *mut RawFd, pass.len());
        }
    }
    loop {
        // SAFETY: m describes valid buffers for the duration of the call.
        let r = unsafe { libc::sendmsg(fd, &m, libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT) };
        if r >= 0 {
            return Ok(true);
        }
        let e = std::io::Error::last_os_error();
        match e.kind() {
            std::io::ErrorKind::Interrupted => continue,
            std::io::ErrorKind::WouldBlock => return Ok(false),
            _ => return Err(Error::sys("sendmsg", e)),
        }
    }
}

/// Sends one message, with a descriptor attached when `pass` is set, waiting while the socket
/// is full.
pub fn send(fd: RawFd, data: &[u8], pass: Option<RawFd>) -> Result<()> {
    while !send_fds(fd, data, pass.as_slice())? {
        wait_fd(fd, libc::POLLOUT, 1000)?;
    }
    Ok(())
}

/// What [`recv`] found.
pub enum Recv {
    /// A message of this many bytes, and a descriptor if one came with it.
    Msg(usize, Option<OwnedFd>),
    /// Nothing waiting (non-blocking socket).
    Empty,
    /// The peer closed the connection.
    Closed,
}

/// Receives one message into `buf`.
pub fn recv(fd: RawFd, buf: &mut [u8]) -> Result<Recv> {
    let mut iov = libc::iovec { iov_base: buf.as_mut_ptr() as *mut libc::c_void, iov_len: buf.len() };
    let mut cbuf = [0u64; 8];
    // SAFETY: msghdr is plain old data.
    let mut m: libc::msghdr = unsafe { std::mem::zeroed() };
    m.msg_iov = &mut iov;
    m.msg_iovlen = 1;
    m.msg_control = cbuf.as_mut_ptr() as *mut libc::c_void;
    m.msg_controllen = std::mem::size_of_val(&cbuf);
    let n = loop {
        // SAFETY: m describes valid buffers for the duration of the call.
        let r = unsafe { libc::recvmsg(fd, &mut m, libc::MSG_CMSG_CLOEXEC) };
        if r >= 0 {
            break r as usize;
        }
        let e = std::io::Error::last_os_error();
        match e.kind() {
            std::io::ErrorKind::Interrupted => continue,
            std::io::ErrorKind::WouldBlock => return Ok(Recv::Empty),
            std::io::ErrorKind::ConnectionReset => return Ok(Recv::Closed),
            _ => return Err(Error::sys("recvmsg", e)),
        }
    };
    let mut got = None;
    // SAFETY: the kernel filled msg_control/msg_controllen; CMSG_FIRSTHDR/NXTHDR walk it within
    // those bounds, and SCM_RIGHTS data holds ints that are new descriptors owned by us.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&m);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(c) as *const RawFd;
                let count = ((*c).cmsg_len as usize - libc::CMSG_LEN(0) as usize) / std::mem::size_of::<RawFd>();
                for k in 0..count {
                    let f = OwnedFd::from_raw_fd(std::ptr::read_unaligned(data.add(k)));
                    if got.is_none() {
                        got = Some(f);
                    } // extra descriptors are closed by dropping them
                }
            }
            c = libc::CMSG_NXTHDR(&m, c);
        }
    }
    if n == 0 && got.is_none() {
        return Ok(Recv::Closed);
    }
    Ok(Recv::Msg(n, got))
}

/// Waits until `fd` is ready for `events` (POLLIN / POLLOUT) or `timeout_ms` passed; true when
/// ready.
pub fn wait_fd(fd: RawFd, events: i16, timeout_ms: i32) -> Result<bool> {
    let mut p = libc::pollfd { fd, events, revents: 0 };
    loop {
        // SAFETY: one valid pollfd.
        let r = unsafe { libc::poll(&mut p, 1, timeout_ms) };
        if r >= 0 {
            return Ok(r > 0);
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(Error::sys("poll", e));
        }
    }
}

/// Allows process `pid` to read and write this process's memory (Yama's ptrace scope 1
/// otherwise allows it only for ancestors); None withdraws the exception (`PR_SET_PTRACER` 0).
/// Yama keeps a single allowed pid per process. `PR_SET_PTRACER_ANY` is never used: it would
/// let every process of this user attach. Harmless where Yama is absent.
pub fn allow_ptracer(pid: Option<u32>) -> Result<()> {
    let who = pid.unwrap_or(0) as libc::c_ulong;
    // SAFETY: prctl(PR_SET_PTRACER) takes a pid and changes only this process's Yama policy.
    let r = unsafe { libc::prctl(libc::PR_SET_PTRACER, who, 0, 0, 0) };
    if r < 0 {
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EINVAL) {
            return Ok(()); // no Yama: ptrace access follows the usual uid rules
        }
        return Err(Error::sys("prctl(PR_SET_PTRACER)", e));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn req_rep_round_trip() {
        let r = Req { seq: 7, cmd: CMD_DMA_MAP, flags: F_POSTED, a: 1, b: u64::MAX, c: 3, d: 4 };
        assert_eq!(Req::decode(&r.encode()), Some(r));
        assert_eq!(Req::decode(&r.encode()[..REQ_BYTES - 1]), None);
        let p = Rep { seq: 9, cmd: CMD_READ32, status: -libc::EFAULT, a: 5, b: 6, c: 7, d: 8 };
        assert_eq!(Rep::decode(&p.encode()), Some(p));
        assert_eq!(Rep::decode(&r.encode()), None, "a request is not a reply");
    }

    #[test]
    fn wire_layout() {
        let r = Req { seq: 0x0403_0201, cmd: 0x0605, flags: 0x0807, a: 9, b: 10, c: 11, d: 12 };
        let w = r.encode();
        assert_eq!(w[..8], [1, 2, 3, 4, 5, 6, 7, 8]);
        for (i, v) in [9u8, 10, 11, 12].into_iter().enumerate() {
            assert_eq!(w[8 + 8 * i..16 + 8 * i], [v, 0, 0, 0, 0, 0, 0, 0]);
        }
        let p = Rep { seq: 0x0403_0201, cmd: 0x0605, status: -2, a: 9, b: 10, c: 11, d: 12 };
        let w = p.encode();
        assert_eq!(w[..16], [1, 2, 3, 4, 5, 6, F_REPLY as u8, (F_REPLY >> 8) as u8, 0xFE, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0]);
        for (i, v) in [9u8, 10, 11, 12].into_iter().enumerate() {
            assert_eq!(w[16 + 8 * i..24 + 8 * i], [v, 0, 0, 0, 0, 0, 0, 0]);
        }
    }

    #[test]
    fn pidfd_sees_a_child_exit() {
        let mut ch = std::process::Command::new("sleep").arg("0.2").spawn().unwrap();
        let fd = pidfd_open(ch.id()).unwrap();
        assert!(!pidfd_exited(fd.as_raw_fd()).unwrap());
        assert!(wait_fd(fd.as_raw_fd(), libc::POLLIN, 5000).unwrap(), "exit seen while a zombie");
        assert!(pidfd_exited(fd.as_raw_fd()).unwrap());
        ch.wait().unwrap();
        assert_eq!(pidfd_pid(fd.as_raw_fd()).unwrap(), None, "reaped");
    }

    #[test]
    fn ptracer_exception_names_one_pid_and_is_withdrawn() {
        // Yama may be absent (then both are no-ops); PR_SET_PTRACER_ANY is never used
        allow_ptracer(Some(std::process::id())).unwrap();
        allow_ptracer(None).unwrap();
    }

    #[test]
    fn socket_pair_passes_messages_and_fds() {
        let dir = std::env::temp_dir().join(format!("hm-proto-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let path = dir.join("s");
        let _ = std::fs::remove_file(&path);
        let l = listen(&path).unwrap();
        assert!(accept(l.as_raw_fd()).unwrap().is_none());
        let c = connect(&path).unwrap();
        let s = accept(l.as_raw_fd()).unwrap().expect("pending connection");
        assert_eq!(peer_pid(s.as_raw_fd()).unwrap(), std::process::id());
        let devnull = std::fs::File::open("/dev/null").unwrap();
        send(c.as_raw_fd(), b"hello", Some(devnull.as_raw_fd())).unwrap();
        let mut buf = [0u8; 64];
        match recv(s.as_raw_fd(), &mut buf).unwrap() {
            Recv::Msg(5, Some(_fd)) => {}
            _ => panic!("expected a 5-byte message with a descriptor"),
        }
        assert!(matches!(recv(s.as_raw_fd(), &mut buf).unwrap(), Recv::Empty));
        drop(c);
        assert!(matches!(recv(s.as_raw_fd(), &mut buf).unwrap(), Recv::Closed));
        assert!(connect(&dir.join("nobody")).is_err());
        // hang-up is seen while unread messages wait, and for a connection closed before accept
        let c = connect(&path).unwrap();
        let s = accept(l.as_raw_fd()).unwrap().unwrap();
        assert!(!hung_up(s.as_raw_fd()));
        send(c.as_raw_fd(), &[0u8; REQ_BYTES], None).unwrap();
        drop(c);
        assert!(hung_up(s.as_raw_fd()), "closed with a message unread");
        let c = connect(&path).unwrap();
        send(c.as_raw_fd(), &[0u8; REQ_BYTES], None).unwrap();
        drop(c);
        let s = accept(l.as_raw_fd()).unwrap().unwrap();
        assert!(hung_up(s.as_raw_fd()), "closed before accept");
        let c = connect(&path).unwrap();
        let s = accept(l.as_raw_fd()).unwrap().unwrap();
        shutdown(c.as_raw_fd(), libc::SHUT_WR).unwrap();
        assert!(hung_up(s.as_raw_fd()), "shut down for writing");
        // the pidfd names the process that connected (here: this one), and it is alive
        let pidfd = peer_pidfd(s.as_raw_fd()).unwrap();
        assert_eq!(pidfd_pid(pidfd.as_raw_fd()).unwrap(), Some(std::process::id()));
        assert!(!pidfd_exited(pidfd.as_raw_fd()).unwrap());
        let me = pidfd_open(std::process::id()).unwrap();
        assert_eq!(pidfd_pid(me.as_raw_fd()).unwrap(), Some(std::process::id()));
        // eventfds are recognised
        assert!(is_eventfd(eventfd().unwrap().as_raw_fd()));
        assert!(!is_eventfd(devnull.as_raw_fd()));
        // the socket file is the owner's only
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        let long = dir.join("x".repeat(200));
        assert!(matches!(listen(&long), Err(Error::InvalidArgument(_))));
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A client that sees the socket file can connect at once (the file used to appear at
    /// bind, before listen), the file is the owner's only, and no temporary name is left.
    #[test]
    fn the_socket_file_appears_only_when_it_accepts_connections() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("hm-proto-ready-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        for i in 0..200 {
            let path = dir.join(format!("s{i}"));
            let watch = path.clone();
            let t = std::thread::spawn(move || loop {
                if watch.exists() {
                    return connect(&watch).is_ok();
                }
                std::hint::spin_loop();
            });
            let l = listen(&path).unwrap();
            assert!(t.join().unwrap(), "round {i}: the socket file existed but connect failed");
            assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
            drop(l);
            std::fs::remove_file(&path).unwrap();
        }
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0, "a temporary name was left behind");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
