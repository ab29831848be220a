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
//! `SCM_RIGHTS`.

use crate::{Error, Result};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::Path;

/// Protocol version; HELLO fails with EPROTO when the two sides differ.
pub const PROTO_VERSION: u64 = 1;
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
/// Function reset; replies once the firmware runs again.
pub const CMD_RESET: u16 = 7;
/// a = IPv4 address (host order). Reply: a = MAC. The device ARPs on its wire;
/// EHOSTUNREACH when nobody answers.
pub const CMD_ARP_RESOLVE: u16 = 8;
/// Reply: a = clock cycles simulated, b = frames sent, c = frames received, d = DMA accesses
/// refused by the IOMMU check.
pub const CMD_STATS: u16 = 9;

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
        o[0..4].copy_from_slice(&self.seq.to_le_bytes());
        o[4..6].copy_from_slice(&self.cmd.to_le_bytes());
        o[6..8].copy_from_slice(&self.flags.to_le_bytes());
        for (i, v) in [self.a, self.b, self.c, self.d].iter().enumerate() {
            o[8 + 8 * i..16 + 8 * i].copy_from_slice(&v.to_le_bytes());
        }
        o
    }
    /// Parses a request; None unless exactly REQ_BYTES long.
    pub fn decode(b: &[u8]) -> Option<Req> {
        if b.len() != REQ_BYTES {
            return None;
        }
        let q = |i: usize| u64::from_le_bytes(b[8 + 8 * i..16 + 8 * i].try_into().unwrap());
        Some(Req {
            seq: u32::from_le_bytes(b[0..4].try_into().unwrap()),
            cmd: u16::from_le_bytes(b[4..6].try_into().unwrap()),
            flags: u16::from_le_bytes(b[6..8].try_into().unwrap()),
            a: q(0),
            b: q(1),
            c: q(2),
            d: q(3),
        })
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
        o[0..4].copy_from_slice(&self.seq.to_le_bytes());
        o[4..6].copy_from_slice(&self.cmd.to_le_bytes());
        o[6..8].copy_from_slice(&F_REPLY.to_le_bytes());
        o[8..12].copy_from_slice(&self.status.to_le_bytes());
        for (i, v) in [self.a, self.b, self.c, self.d].iter().enumerate() {
            o[16 + 8 * i..24 + 8 * i].copy_from_slice(&v.to_le_bytes());
        }
        o
    }
    /// Parses a reply; None unless exactly REP_BYTES long with the reply flag.
    pub fn decode(b: &[u8]) -> Option<Rep> {
        if b.len() != REP_BYTES || u16::from_le_bytes(b[6..8].try_into().unwrap()) & F_REPLY == 0 {
            return None;
        }
        let q = |i: usize| u64::from_le_bytes(b[16 + 8 * i..24 + 8 * i].try_into().unwrap());
        Some(Rep {
            seq: u32::from_le_bytes(b[0..4].try_into().unwrap()),
            cmd: u16::from_le_bytes(b[4..6].try_into().unwrap()),
            status: i32::from_le_bytes(b[8..12].try_into().unwrap()),
            a: q(0),
            b: q(1),
            c: q(2),
            d: q(3),
        })
    }
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

/// Binds and listens on `path` (non-blocking listener).
pub fn listen(path: &Path) -> Result<OwnedFd> {
    let fd = seqpacket()?;
    let (a, len) = sockaddr(path)?;
    // SAFETY: `a` is a valid sockaddr_un of `len` bytes; fd is a live socket.
    cvt(unsafe { libc::bind(fd.as_raw_fd(), &a as *const _ as *const libc::sockaddr, len) }, &format!("bind {}", path.display()))?;
    // SAFETY: fd is a bound socket.
    cvt(unsafe { libc::listen(fd.as_raw_fd(), 4) }, "listen")?;
    set_nonblocking(fd.as_raw_fd(), true)?;
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
    // SAFETY: ucred is plain old data.
    let mut c: libc::ucred = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `c` is a ucred of `len` bytes; the kernel fills it.
    cvt(unsafe { libc::getsockopt(fd, libc::SOL_SOCKET, libc::SO_PEERCRED, &mut c as *mut _ as *mut libc::c_void, &mut len) }, "SO_PEERCRED")?;
    Ok(c.pid as u32)
}

/// Sends one message, with a descriptor attached when `pass` is set.
pub fn send(fd: RawFd, data: &[u8], pass: Option<RawFd>) -> Result<()> {
    let mut iov = libc::iovec { iov_base: data.as_ptr() as *mut libc::c_void, iov_len: data.len() };
    let mut cbuf = [0u64; 4]; // room for one cmsghdr with one int, 8-byte aligned
    // SAFETY: msghdr is plain old data.
    let mut m: libc::msghdr = unsafe { std::mem::zeroed() };
    m.msg_iov = &mut iov;
    m.msg_iovlen = 1;
    if let Some(p) = pass {
        // SAFETY: CMSG_SPACE only computes a size.
        let space = unsafe { libc::CMSG_SPACE(std::mem::size_of::<RawFd>() as u32) } as usize;
        m.msg_control = cbuf.as_mut_ptr() as *mut libc::c_void;
        m.msg_controllen = space;
        // SAFETY: msg_control points at `space` bytes (cbuf is 32 bytes, space is 24), so
        // CMSG_FIRSTHDR is non-null and its data area holds one int.
        unsafe {
            let c = libc::CMSG_FIRSTHDR(&m);
            (*c).cmsg_level = libc::SOL_SOCKET;
            (*c).cmsg_type = libc::SCM_RIGHTS;
            (*c).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<RawFd>() as u32) as usize;
            std::ptr::write_unaligned(libc::CMSG_DATA(c) as *mut RawFd, p);
        }
    }
    loop {
        // SAFETY: m describes valid buffers for the duration of the call.
        let r = unsafe { libc::sendmsg(fd, &m, libc::MSG_NOSIGNAL) };
        if r >= 0 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        if e.kind() == std::io::ErrorKind::Interrupted {
            continue;
        }
        if e.kind() == std::io::ErrorKind::WouldBlock {
            wait_fd(fd, libc::POLLOUT, 1000)?;
            continue;
        }
        return Err(Error::sys("sendmsg", e));
    }
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

/// Allows process `pid` (None: any process of this user) to read and write this process's
/// memory (Yama's ptrace scope 1 otherwise allows it only for ancestors; Yama keeps a single
/// allowed pid, so a client of several devices must use None). Harmless where Yama is absent.
pub fn allow_ptracer(pid: Option<u32>) -> Result<()> {
    let who = match pid {
        Some(p) => p as libc::c_ulong,
        None => libc::PR_SET_PTRACER_ANY as libc::c_ulong,
    };
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
        let long = dir.join("x".repeat(200));
        assert!(matches!(listen(&long), Err(Error::InvalidArgument(_))));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
