//! The simulated device process (`hematite-sim device`): the Verilated NIC (transport engine +
//! control core running the firmware image) served to one driver client at a time over the
//! protocol of `hostdrv::simproto`, with its Ethernet port on a datagram wire.
//!
//! * BAR0 (128 KiB): the engine's register block at 0x0_0000, the control core's host port
//!   (mailbox, core control, IMEM window) at 0x1_0000. MMIO requests become AXI4-Lite accesses,
//!   one at a time, in arrival order.
//! * DMA: the engine's AXI4 master reaches the client's memory inside the windows the client
//!   mapped (IOVA -> client VA), with process_vm_readv / process_vm_writev. Anything outside is
//!   refused (SLVERR to the engine, counted) like an IOMMU fault.
//! * Interrupts: the engine's interrupt messages (vector 0..15) signal the client's eventfds.
//! * Wire: one Ethernet frame per datagram (qemu `-netdev dgram` framing), over AF_UNIX
//!   datagram sockets (back-pressured: a full peer stalls our MAC, nothing is dropped) or UDP.
//!   ARP requests for our address are answered here; every frame can go to a pcap with
//!   simulated-time stamps (4 ns per cycle, the nominal 250 MHz clock).
//! * A client that disconnects (or dies) loses its DMA windows at once and the function is reset
//!   (as vfio-pci does when a device is released): every QP, CQ, MR and PD is gone and the
//!   firmware restarts, so the next client finds a clean device.
//! * Idle: after `idle_after` cycles without any activity the process sleeps in poll(2) and
//!   simulates `idle_slice` cycles per wakeup, so timers keep running at a low cost.

use crate::dma::{ExtMem, MemCfg};
use crate::eng::{Engine, LiteOp, Port};
use crate::Rng;
use hostdrv::simproto::{self as p, Recv, Rep, Req};
use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::io::Write;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// BAR0 size.
pub const BAR0_SIZE: u64 = 0x2_0000;
/// Offset of the control core's host port in BAR0.
pub const FW_PORT_BASE: u64 = hostdrv::nic::FW_PORT;
/// Interrupt vectors (the engine's CQ contexts take vectors 0..15).
pub const NUM_IRQS: u32 = 16;
/// Nominal core clock (Hz): simulated time = cycles / this.
pub const CLOCK_HZ: u64 = 250_000_000;

/// One end of the datagram wire.
#[derive(Debug, Clone)]
pub enum WireAddr {
    /// An AF_UNIX datagram socket path.
    Unix(PathBuf),
    /// A UDP address.
    Udp(SocketAddr),
}

impl WireAddr {
    /// `unix:PATH`, `udp:HOST:PORT`, or a bare path.
    pub fn parse(s: &str) -> Result<WireAddr, String> {
        if let Some(a) = s.strip_prefix("udp:") {
            a.parse().map(WireAddr::Udp).map_err(|e| format!("bad UDP address `{a}`: {e}"))
        } else {
            Ok(WireAddr::Unix(PathBuf::from(s.strip_prefix("unix:").unwrap_or(s))))
        }
    }
}

/// How the device process is set up.
#[derive(Debug, Clone)]
pub struct DevConfig {
    /// Where drivers connect.
    pub socket: PathBuf,
    /// Our end of the wire and the peer's.
    pub wire_local: WireAddr,
    pub wire_peer: WireAddr,
    /// The port's MAC address and IPv4 address (host order).
    pub mac: u64,
    pub ipv4: u32,
    /// Write every frame here.
    pub pcap: Option<PathBuf>,
    /// Firmware image (32-bit words).
    pub image: Vec<u32>,
    /// Probability of dropping each transmitted RoCE frame (`--loss`).
    pub loss: f64,
    /// Probability of dropping each received RoCE frame before the engine sees it
    /// (`--rx-loss`; it is still written to the pcap).
    pub rx_loss: f64,
    /// Wire faults on transmitted RoCE frames, each a probability per frame and exclusive of
    /// the others and of `loss` (one draw decides): `dup` sends the frame twice, `reorder`
    /// holds it back until 1 to 3 later frames went out (or `REORDER_HOLD_CYCLES` passed),
    /// `corrupt` flips one bit after the BTH (covered by the ICRC, so the receiver's RX path
    /// drops the frame on its ICRC check).
    pub dup: f64,
    pub reorder: f64,
    pub corrupt: f64,
    /// Seed of the fault generator (`--seed`).
    pub seed: u64,
    /// Cycles without activity before the process sleeps between slices.
    pub idle_after: u64,
    /// Cycles simulated per wakeup while idle.
    pub idle_slice: u64,
    /// Milliseconds slept per wakeup while idle.
    pub idle_sleep_ms: i32,
    /// Stop after this many cycles (tests, benchmarks); 0 = run until killed.
    pub max_cycles: u64,
    /// Print a line per client event on stderr.
    pub verbose: bool,
}

impl DevConfig {
    /// Defaults for everything but the addresses.
    pub fn new(socket: PathBuf, wire_local: WireAddr, wire_peer: WireAddr, mac: u64, ipv4: u32, image: Vec<u32>) -> DevConfig {
        DevConfig {
            socket,
            wire_local,
            wire_peer,
            mac,
            ipv4,
            pcap: None,
            image,
            loss: 0.0,
            rx_loss: 0.0,
            dup: 0.0,
            reorder: 0.0,
            corrupt: 0.0,
            seed: 1,
            idle_after: 2_000_000,
            idle_slice: 100,
            idle_sleep_ms: 50,
            max_cycles: 0,
            verbose: false,
        }
    }
}

// ---------------------------------------------------------------- DMA into the client

#[derive(Debug, Clone, Copy)]
struct Window {
    iova: u64,
    vaddr: u64,
    len: u64,
    writable: bool,
}

/// The IOMMU: the client's DMA windows, and the client's memory.
#[derive(Default)]
struct Iommu {
    /// `/proc/PID/mem` of the client, opened at HELLO while the client's pidfd showed it alive.
    /// The descriptor holds that process's address space itself, not its pid: once the process
    /// has exited every access fails, and a later process given the same pid (or the client's
    /// own next program after an `execve`) is never reached through it.
    mem: Option<File>,
    maps: Vec<Window>,
    faults: u64,
}

impl Iommu {
    /// Client VA pieces for [addr, addr + len), or None if any byte is not mapped (with write
    /// permission when `write`).
    fn translate(&self, addr: u64, len: u64, write: bool) -> Option<Vec<(u64, u64)>> {
        let mut out = Vec::new();
        let mut a = addr;
        let end = addr.checked_add(len)?;
        while a < end {
            let w = self.maps.iter().find(|w| a >= w.iova && a < w.iova + w.len && (!write || w.writable))?;
            let n = (w.iova + w.len).min(end) - a;
            out.push((w.vaddr + (a - w.iova), n));
            a += n;
        }
        Some(out)
    }
}

struct ClientMem(Arc<Mutex<Iommu>>);

impl ExtMem for ClientMem {
    fn read(&mut self, addr: u64, buf: &mut [u8]) -> bool {
        use std::os::unix::fs::FileExt;
        let mut m = self.0.lock().unwrap();
        let Some(pieces) = m.translate(addr, buf.len() as u64, false) else {
            m.faults += 1;
            return false;
        };
        let mut off = 0;
        let mut ok = m.mem.is_some();
        for (va, n) in pieces {
            let n = n as usize;
            if !ok || m.mem.as_ref().unwrap().read_exact_at(&mut buf[off..off + n], va).is_err() {
                ok = false;
                break;
            }
            off += n;
        }
        if !ok {
            m.faults += 1;
        }
        ok
    }

    fn write(&mut self, addr: u64, data: &[u8], mask: &[bool]) -> bool {
        let mut m = self.0.lock().unwrap();
        // runs of enabled bytes
        let mut runs = Vec::new();
        let mut i = 0;
        while i < data.len() {
            if !mask[i] {
                i += 1;
                continue;
            }
            let s = i;
            while i < data.len() && mask[i] {
                i += 1;
            }
            runs.push((s, i - s));
        }
        // every piece is translated before anything is written: the burst is refused as a whole
        let mut pieces = Vec::new();
        for (s, n) in runs {
            let Some(tr) = m.translate(addr + s as u64, n as u64, true) else {
                m.faults += 1;
                return false;
            };
            let mut off = s;
            for (va, len) in tr {
                pieces.push((off, va, len as usize));
                off += len as usize;
            }
        }
        if pieces.is_empty() {
            return true;
        }
        use std::os::unix::fs::FileExt;
        let ok = match &m.mem {
            Some(f) => pieces.iter().all(|&(off, va, len)| f.write_all_at(&data[off..off + len], va).is_ok()),
            None => false,
        };
        if !ok {
            m.faults += 1;
        }
        ok
    }
}

// ---------------------------------------------------------------- the wire

enum Wire {
    Unix(UnixDatagram, PathBuf),
    Udp(UdpSocket, SocketAddr),
}

enum SendResult {
    Sent,
    Full,
    Dropped,
}

impl Wire {
    fn open(local: &WireAddr, peer: &WireAddr) -> Result<Wire, String> {
        match (local, peer) {
            (WireAddr::Unix(l), WireAddr::Unix(pr)) => {
                let _ = std::fs::remove_file(l);
                let s = UnixDatagram::bind(l).map_err(|e| format!("wire: bind {}: {e}", l.display()))?;
                s.set_nonblocking(true).map_err(|e| format!("wire: {e}"))?;
                Ok(Wire::Unix(s, pr.clone()))
            }
            (WireAddr::Udp(l), WireAddr::Udp(pr)) => {
                let s = UdpSocket::bind(l).map_err(|e| format!("wire: bind {l}: {e}"))?;
                s.set_nonblocking(true).map_err(|e| format!("wire: {e}"))?;
                Ok(Wire::Udp(s, *pr))
            }
            _ => Err("wire: both ends must be unix paths or both UDP addresses".into()),
        }
    }
    fn fd(&self) -> RawFd {
        match self {
            Wire::Unix(s, _) => s.as_raw_fd(),
            Wire::Udp(s, _) => s.as_raw_fd(),
        }
    }
    fn send(&self, f: &[u8]) -> SendResult {
        let r = match self {
            Wire::Unix(s, p) => s.send_to(f, p),
            Wire::Udp(s, p) => s.send_to(f, p),
        };
        match r {
            Ok(_) => SendResult::Sent,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => SendResult::Full,
            // the peer is not there (not started yet, or gone): the frame is lost on the cable
            Err(_) => SendResult::Dropped,
        }
    }
    fn recv(&self, buf: &mut [u8]) -> Option<usize> {
        let r = match self {
            Wire::Unix(s, _) => s.recv(buf),
            Wire::Udp(s, _) => s.recv(buf),
        };
        r.ok()
    }
}

// ---------------------------------------------------------------- pcap

struct Pcap(std::io::BufWriter<File>);

impl Pcap {
    fn create(path: &Path) -> Result<Pcap, String> {
        let f = File::create(path).map_err(|e| format!("pcap {}: {e}", path.display()))?;
        let mut w = std::io::BufWriter::new(f);
        let mut h = Vec::new();
        h.extend_from_slice(&0xA1B2_3C4Du32.to_le_bytes()); // nanosecond timestamps
        h.extend_from_slice(&2u16.to_le_bytes());
        h.extend_from_slice(&4u16.to_le_bytes());
        h.extend_from_slice(&0u32.to_le_bytes());
        h.extend_from_slice(&0u32.to_le_bytes());
        h.extend_from_slice(&65535u32.to_le_bytes());
        h.extend_from_slice(&1u32.to_le_bytes()); // Ethernet
        w.write_all(&h).map_err(|e| e.to_string())?;
        Ok(Pcap(w))
    }
    fn frame(&mut self, cycle: u64, f: &[u8]) {
        let ns = cycle * (1_000_000_000 / CLOCK_HZ);
        let mut h = [0u8; 16];
        h[0..4].copy_from_slice(&((ns / 1_000_000_000) as u32).to_le_bytes());
        h[4..8].copy_from_slice(&((ns % 1_000_000_000) as u32).to_le_bytes());
        h[8..12].copy_from_slice(&(f.len() as u32).to_le_bytes());
        h[12..16].copy_from_slice(&(f.len() as u32).to_le_bytes());
        let _ = self.0.write_all(&h);
        let _ = self.0.write_all(f);
    }
    fn flush(&mut self) {
        let _ = self.0.flush();
    }
}

// ---------------------------------------------------------------- ARP

const ETH_ARP: u16 = 0x0806;

fn mac_bytes(m: u64) -> [u8; 6] {
    let b = m.to_be_bytes();
    [b[2], b[3], b[4], b[5], b[6], b[7]]
}

fn mac_of(b: &[u8]) -> u64 {
    b.iter().fold(0u64, |a, x| a << 8 | *x as u64)
}

/// An ARP frame: `op` 1 request (target MAC 0), 2 reply; `dst` the Ethernet destination.
fn arp_frame(op: u16, smac: u64, sip: u32, tmac: u64, tip: u32, dst: u64) -> Vec<u8> {
    let mut f = Vec::with_capacity(60);
    f.extend_from_slice(&mac_bytes(dst));
    f.extend_from_slice(&mac_bytes(smac));
    f.extend_from_slice(&ETH_ARP.to_be_bytes());
    f.extend_from_slice(&[0, 1, 8, 0, 6, 4]);
    f.extend_from_slice(&op.to_be_bytes());
    f.extend_from_slice(&mac_bytes(smac));
    f.extend_from_slice(&sip.to_be_bytes());
    f.extend_from_slice(&mac_bytes(tmac));
    f.extend_from_slice(&tip.to_be_bytes());
    f.resize(60, 0);
    f
}

/// (op, sender MAC, sender IP, target IP) of an Ethernet/IPv4 ARP frame.
fn parse_arp(f: &[u8]) -> Option<(u16, u64, u32, u32)> {
    if f.len() < 42 || u16::from_be_bytes([f[12], f[13]]) != ETH_ARP || f[14..20] != [0, 1, 8, 0, 6, 4] {
        return None;
    }
    let op = u16::from_be_bytes([f[20], f[21]]);
    let smac = mac_of(&f[22..28]);
    let sip = u32::from_be_bytes(f[28..32].try_into().unwrap());
    let tip = u32::from_be_bytes(f[38..42].try_into().unwrap());
    Some((op, smac, sip, tip))
}

/// A RoCEv2 frame: Ethernet (optionally one 802.1Q tag) / IPv4 or IPv6 / UDP to port 4791.
/// The byte range of a RoCEv2 frame after its BTH up to the end of the IP packet (payload,
/// extension headers, ICRC): every bit there is covered by the ICRC and by no other receive
/// check, so flipping one makes the receiver drop the frame on its ICRC alone.
pub fn after_bth_span(f: &[u8]) -> Option<(usize, usize)> {
    if !is_roce(f) {
        return None;
    }
    let (et, l3) = match f.get(12..14) {
        Some([0x81, 0x00]) => (f.get(16..18)?, 18),
        e => (e?, 14),
    };
    let (l4, end) = if et == [0x08, 0x00] {
        let ihl = usize::from(f[l3] & 0xF) * 4;
        (l3 + ihl, l3 + usize::from(u16::from_be_bytes([*f.get(l3 + 2)?, *f.get(l3 + 3)?])))
    } else {
        (l3 + 40, l3 + 40 + usize::from(u16::from_be_bytes([*f.get(l3 + 4)?, *f.get(l3 + 5)?])))
    };
    let start = l4 + 8 + 12;
    (start < end && end <= f.len()).then_some((start, end))
}

/// How long a frame held back by `--reorder` waits at most for later frames.
pub const REORDER_HOLD_CYCLES: u64 = 2000;

fn is_roce(f: &[u8]) -> bool {
    let (et, l3) = match f.get(12..14) {
        Some([0x81, 0x00]) => (f.get(16..18), 18),
        e => (e, 14),
    };
    let l4 = match et {
        Some([0x08, 0x00]) if f.get(l3 + 9) == Some(&17) => l3 + usize::from(f.get(l3).map_or(5, |b| b & 0xF)) * 4,
        Some([0x86, 0xDD]) if f.get(l3 + 6) == Some(&17) => l3 + 40,
        _ => return false,
    };
    f.get(l4 + 2..l4 + 4) == Some(&[0x12, 0xB7])
}

// ---------------------------------------------------------------- IPv6 neighbour discovery

const ETH_IPV6: u16 = 0x86DD;

/// The port's IPv6 link-local address (the host driver's GID index 1: fe80::/64 with the MAC's
/// modified EUI-64 interface identifier).
use hostdrv::nic::gid_link_local as link_local_of;

/// The ICMPv6 checksum of `msg` (checksum field zero) between `src` and `dst` (RFC 4443 2.3).
fn icmpv6_csum(src: &[u8; 16], dst: &[u8; 16], msg: &[u8]) -> u16 {
    let mut sum: u64 = 0;
    let mut add = |b: &[u8]| {
        for c in b.chunks(2) {
            sum += u64::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]));
        }
    };
    add(src);
    add(dst);
    add(&(msg.len() as u32).to_be_bytes());
    add(&[0, 0, 0, 58]);
    add(msg);
    while sum >> 16 != 0 {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    !(sum as u16)
}

/// An Ethernet/IPv6/ICMPv6 frame carrying `msg` (its checksum is filled in).
fn icmpv6_frame(smac: u64, dmac: u64, src: &[u8; 16], dst: &[u8; 16], mut msg: Vec<u8>) -> Vec<u8> {
    let c = icmpv6_csum(src, dst, &msg);
    msg[2..4].copy_from_slice(&c.to_be_bytes());
    let mut f = Vec::with_capacity(54 + msg.len());
    f.extend_from_slice(&mac_bytes(dmac));
    f.extend_from_slice(&mac_bytes(smac));
    f.extend_from_slice(&ETH_IPV6.to_be_bytes());
    f.extend_from_slice(&[0x60, 0, 0, 0]);
    f.extend_from_slice(&(msg.len() as u16).to_be_bytes());
    f.extend_from_slice(&[58, 255]);
    f.extend_from_slice(src);
    f.extend_from_slice(dst);
    f.extend_from_slice(&msg);
    f
}

/// A Neighbor Solicitation (RFC 4861 4.3) in `f`, checked as a node must (hop limit 255,
/// code 0, valid checksum, no multicast target): (sender MAC, IPv6 source, target).
fn parse_ns(f: &[u8]) -> Option<(u64, [u8; 16], [u8; 16])> {
    if f.len() < 54 + 24 || u16::from_be_bytes([f[12], f[13]]) != ETH_IPV6 || f[14] >> 4 != 6 {
        return None;
    }
    let plen = usize::from(u16::from_be_bytes([f[18], f[19]]));
    if f[20] != 58 || f[21] != 255 || plen < 24 || 54 + plen > f.len() {
        return None;
    }
    let src: [u8; 16] = f[22..38].try_into().ok()?;
    let dst: [u8; 16] = f[38..54].try_into().ok()?;
    let msg = &f[54..54 + plen];
    if msg[0] != 135 || msg[1] != 0 || icmpv6_csum(&src, &dst, msg) != 0 {
        return None;
    }
    let target: [u8; 16] = msg[8..24].try_into().ok()?;
    if target[0] == 0xff {
        return None;
    }
    Some((mac_of(&f[6..12]), src, target))
}

/// The Neighbor Advertisement answering a solicitation from (`smac`, `src`) for our `target`:
/// solicited and override set, with our link-layer address; to all nodes when the
/// solicitation came from the unspecified address (duplicate address detection).
fn na_frame(mac: u64, target: &[u8; 16], smac: u64, src: &[u8; 16]) -> Vec<u8> {
    let dad = *src == [0u8; 16];
    let all_nodes = [0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
    let (dst, dmac) = if dad { (all_nodes, 0x3333_0000_0001) } else { (*src, smac) };
    let mut m = vec![136, 0, 0, 0, if dad { 0x20 } else { 0x60 }, 0, 0, 0];
    m.extend_from_slice(target);
    m.extend_from_slice(&[2, 1]);
    m.extend_from_slice(&mac_bytes(mac));
    icmpv6_frame(mac, dmac, target, &dst, m)
}

// ---------------------------------------------------------------- the device

static STOP: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

extern "C" fn on_term(_: libc::c_int) {
    STOP.store(true, std::sync::atomic::Ordering::SeqCst);
}

/// SIGTERM / SIGINT end [`SimNic::run`] cleanly (pcap flushed, socket files removed).
pub fn install_stop_handler() {
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGTERM, on_term as *const () as libc::sighandler_t);
        libc::signal(libc::SIGINT, on_term as *const () as libc::sighandler_t);
    }
}

struct Mmio {
    port: Port,
    op: LiteOp,
    /// The request to answer (None: posted write).
    reply_to: Option<Req>,
}

struct ArpWait {
    req: Req,
    ip: u32,
    tries: u32,
    next: Instant,
}

struct Client {
    fd: OwnedFd,
    pid: u32,
    /// Names the process that connected (`SO_PEERPIDFD`) for as long as the connection lasts.
    pidfd: OwnedFd,
    /// HELLO answered: other requests are refused (EPROTO) before it.
    hello: bool,
    /// Interrupts go to this client's eventfds through its own writer thread, so that an
    /// eventfd that would block (its counter full, `O_NONBLOCK` cleared by the client) can
    /// never stall the clock loop.
    irq_tx: Option<std::sync::mpsc::SyncSender<Arc<File>>>,
}

/// A connection made while a client was attached, waiting for its first request.
struct Refused {
    fd: OwnedFd,
    pid: u32,
    pidfd: OwnedFd,
    since: Instant,
}

/// Connections refused while a client is attached that are kept waiting for their HELLO (to
/// answer it with EBUSY); beyond this they are closed at once.
const MAX_REFUSED: usize = 16;

/// Bytes of received frames the port buffers ahead of the MAC (a NIC's receive packet
/// buffer); beyond it frames are dropped and counted (`rx_buf_drops`).
pub const RX_BUF_BYTES: usize = 4 << 20;

/// Counters the device process keeps.
#[derive(Debug, Default, Clone)]
pub struct DevCounters {
    pub frames_tx: u64,
    pub frames_rx: u64,
    pub frames_lost: u64,
    /// Received RoCE frames dropped by `rx_loss`.
    pub frames_lost_rx: u64,
    /// Received frames dropped because the port's receive buffer (`RX_BUF_BYTES`) was full.
    pub rx_buf_drops: u64,
    /// Transmitted RoCE frames dropped by `loss` (also in `frames_lost`).
    pub fault_lost: u64,
    /// Transmitted RoCE frames sent twice by `dup`.
    pub fault_dup: u64,
    /// Transmitted RoCE frames held back and sent after later ones by `reorder`.
    pub fault_reordered: u64,
    /// Transmitted RoCE frames sent with one bit flipped by `corrupt`.
    pub fault_corrupted: u64,
    /// Frames to the port's own MAC, looped back into its receive path.
    pub frames_looped: u64,
    pub arp_replies: u64,
    /// Neighbor Advertisements sent for the port's IPv6 link-local address.
    pub nd_replies: u64,
    pub mmio_errors: u64,
    pub clients: u64,
    pub resets: u64,
    /// Connections closed at once because the peer's uid is not the device process's.
    pub refused_uid: u64,
    /// Interrupts not delivered because the client's eventfd (or its writer) was full.
    pub irqs_lost: u64,
    /// Control-core traps (each ends the client's session and resets the function).
    pub traps: u64,
}

/// The device process's state.
pub struct SimNic {
    cfg: DevConfig,
    eng: Engine,
    iommu: Arc<Mutex<Iommu>>,
    listener: OwnedFd,
    client: Option<Client>,
    /// Connections refused while a client is attached, waiting for their HELLO.
    refused: Vec<Refused>,
    wire: Wire,
    pcap: Option<Pcap>,
    mmio: VecDeque<Mmio>,
    in_flight: Option<Mmio>,
    irq_fds: HashMap<u8, Arc<File>>,
    tx_backlog: VecDeque<Vec<u8>>,
    /// The port's receive buffer: frames read from the wire that the MAC has not taken yet,
    /// and their bytes.
    rx_buf: VecDeque<Vec<u8>>,
    rx_buf_bytes: usize,
    /// Frames held back by `reorder`: (frame, later frames still to send before it, cycle
    /// it was held at).
    held: VecDeque<(Vec<u8>, u32, u64)>,
    arp: HashMap<u32, u64>,
    arp_wait: Vec<ArpWait>,
    rng: Rng,
    /// Cycles of earlier engine instances (before resets).
    cycle_base: u64,
    last_activity: u64,
    last_beats: u64,
    pub counters: DevCounters,
}

fn new_engine(image: &[u32], iommu: &Arc<Mutex<Iommu>>) -> Result<Engine, String> {
    let mut eng = Engine::new(MemCfg { latency: 100, ..MemCfg::default() });
    eng.mem.ext = Some(Box::new(ClientMem(iommu.clone())));
    crate::fw::boot(&mut eng, image)?;
    Ok(eng)
}

impl SimNic {
    /// Builds the NIC, boots the firmware, opens the socket and the wire.
    pub fn new(cfg: DevConfig) -> Result<SimNic, String> {
        let iommu = Arc::new(Mutex::new(Iommu::default()));
        let eng = new_engine(&cfg.image, &iommu)?;
        let _ = std::fs::remove_file(&cfg.socket);
        let listener = p::listen(&cfg.socket).map_err(|e| e.to_string())?;
        let wire = Wire::open(&cfg.wire_local, &cfg.wire_peer)?;
        let pcap = match &cfg.pcap {
            Some(pth) => Some(Pcap::create(pth)?),
            None => None,
        };
        let rng = Rng::new(cfg.seed);
        Ok(SimNic {
            cfg,
            eng,
            iommu,
            listener,
            client: None,
            refused: Vec::new(),
            wire,
            pcap,
            mmio: VecDeque::new(),
            in_flight: None,
            irq_fds: HashMap::new(),
            tx_backlog: VecDeque::new(),
            rx_buf: VecDeque::new(),
            rx_buf_bytes: 0,
            held: VecDeque::new(),
            arp: HashMap::new(),
            arp_wait: Vec::new(),
            rng,
            cycle_base: 0,
            last_activity: 0,
            last_beats: 0,
            counters: DevCounters::default(),
        })
    }

    /// Cycles simulated since the process started.
    pub fn cycles(&self) -> u64 {
        self.cycle_base + self.eng.cycle()
    }

    fn log(&self, s: &str) {
        if self.cfg.verbose {
            eprintln!("hematite-sim device {}: {s}", self.cfg.socket.display());
        }
    }

    /// Sends a reply without waiting: a client whose socket is full (it does not read its
    /// replies) or gone loses its connection, so a client can never stall the clock loop.
    fn reply(&mut self, r: Rep) {
        if let Some(c) = &self.client {
            match p::send_fds(c.fd.as_raw_fd(), &r.encode(), &[]) {
                Ok(true) => {}
                Ok(false) => self.drop_client("reply socket full (the client does not read its replies)"),
                Err(e) => self.drop_client(&format!("reply failed: {e}")),
            }
        }
    }

    /// Function reset: a new engine (power-on state), the firmware booted again. DMA windows
    /// stay (they belong to the IOMMU, not the function).
    /// Register reads (and non-posted writes) still queued or in flight are answered with
    /// ECANCELED: their transactions are discarded with the old engine.
    fn reset(&mut self) -> Result<(), String> {
        self.cycle_base += self.eng.cycle();
        let r = new_engine(&self.cfg.image, &self.iommu);
        let cancelled: Vec<Req> = self.in_flight.take().into_iter().chain(self.mmio.drain(..)).filter_map(|m| m.reply_to).collect();
        for q in cancelled {
            self.reply(Rep::to(&q, -libc::ECANCELED));
        }
        self.eng = r?;
        self.tx_backlog.clear();
        self.rx_buf.clear();
        self.rx_buf_bytes = 0;
        self.held.clear();
        self.counters.resets += 1;
        Ok(())
    }

    fn drop_client(&mut self, why: &str) {
        if self.client.take().is_some() {
            self.log(&format!("client gone ({why}): DMA windows revoked, function reset"));
            {
                let mut m = self.iommu.lock().unwrap();
                m.maps.clear();
                m.mem = None;
            }
            self.irq_fds.clear();
            self.arp_wait.clear();
            if let Err(e) = self.reset() {
                eprintln!("hematite-sim device: reset after client loss failed: {e}");
            }
        }
    }

    fn handle(&mut self, r: Req, fd: Option<OwnedFd>) {
        let posted = r.flags & p::F_POSTED != 0;
        let hello = self.client.as_ref().is_some_and(|c| c.hello);
        if !hello && r.cmd != p::CMD_HELLO {
            // nothing reaches the device before the client said who it is
            self.counters.mmio_errors += 1;
            if !posted {
                self.reply(Rep::to(&r, -libc::EPROTO));
            }
            return;
        }
        if r.cmd != p::CMD_STATS {
            // a statistics read is not device activity: it must not keep an idle device awake
            self.last_activity = self.cycles();
        }
        match r.cmd {
            p::CMD_HELLO => {
                let mut st = if r.a != p::PROTO_VERSION { -libc::EPROTO } else { 0 };
                if st == 0 {
                    match self.open_client_mem() {
                        Ok(f) => self.iommu.lock().unwrap().mem = Some(f),
                        Err(e) => {
                            self.log(&format!("HELLO refused: {e}"));
                            if self.client.is_none() {
                                return; // the client is gone
                            }
                            st = -libc::EACCES;
                        }
                    }
                }
                let mut rep = Rep::to(&r, st);
                if st == 0 {
                    rep.a = BAR0_SIZE;
                    rep.b = NUM_IRQS as u64;
                    rep.c = self.cfg.mac;
                    rep.d = self.cfg.ipv4 as u64;
                    if let Some(c) = &mut self.client {
                        c.hello = true;
                    }
                }
                self.reply(rep);
            }
            p::CMD_READ32 | p::CMD_WRITE32 => {
                let off = r.a;
                let (port, addr) = if off < FW_PORT_BASE {
                    (Port::Bar, off as u16)
                } else if off < BAR0_SIZE {
                    (Port::Fw, (off - FW_PORT_BASE) as u16)
                } else {
                    self.counters.mmio_errors += 1;
                    if !posted {
                        self.reply(Rep::to(&r, -libc::EFAULT));
                    }
                    return;
                };
                let op = if r.cmd == p::CMD_READ32 {
                    LiteOp::Read { addr }
                } else {
                    LiteOp::Write { addr, data: r.b as u32 }
                };
                self.mmio.push_back(Mmio { port, op, reply_to: if posted { None } else { Some(r) } });
            }
            p::CMD_DMA_MAP => {
                let (iova, vaddr, len, wr) = (r.a, r.b, r.c, r.d != 0);
                let mut m = self.iommu.lock().unwrap();
                let st = if len == 0 || iova % 4096 != 0 || vaddr % 4096 != 0 || len % 4096 != 0 || iova.checked_add(len).is_none() {
                    -libc::EINVAL
                } else if m.maps.iter().any(|w| iova < w.iova + w.len && w.iova < iova + len) {
                    -libc::EEXIST
                } else {
                    m.maps.push(Window { iova, vaddr, len, writable: wr });
                    0
                };
                drop(m);
                if !posted {
                    self.reply(Rep::to(&r, st));
                }
            }
            p::CMD_DMA_UNMAP => {
                let mut m = self.iommu.lock().unwrap();
                let before = m.maps.len();
                m.maps.retain(|w| !(w.iova == r.a && w.len == r.b));
                let st = if m.maps.len() == before { -libc::ENOENT } else { 0 };
                drop(m);
                if !posted {
                    self.reply(Rep::to(&r, st));
                }
            }
            p::CMD_SET_IRQ => {
                let st = if r.a >= NUM_IRQS as u64 {
                    -libc::EINVAL
                } else if r.b != 0 {
                    match fd {
                        // only an eventfd: anything else (a pipe, a socket, a FIFO) could block
                        // the writer or make the device write into a file of the client's choosing
                        Some(f) if p::is_eventfd(f.as_raw_fd()) => {
                            let _ = p::set_nonblocking(f.as_raw_fd(), true);
                            self.irq_fds.insert(r.a as u8, Arc::new(File::from(f)));
                            0
                        }
                        Some(_) => -libc::EINVAL,
                        None => -libc::EBADF,
                    }
                } else {
                    self.irq_fds.remove(&(r.a as u8));
                    0
                };
                self.reply(Rep::to(&r, st));
            }
            p::CMD_RESET => {
                let st = match self.reset() {
                    Ok(()) => 0,
                    Err(e) => {
                        eprintln!("hematite-sim device: reset failed: {e}");
                        -libc::EIO
                    }
                };
                self.reply(Rep::to(&r, st));
            }
            p::CMD_ARP_RESOLVE => {
                let ip = r.a as u32;
                if let Some(m) = self.arp.get(&ip) {
                    let mut rep = Rep::to(&r, 0);
                    rep.a = *m;
                    self.reply(rep);
                } else {
                    self.arp_wait.push(ArpWait { req: r, ip, tries: 0, next: Instant::now() });
                }
            }
            p::CMD_STATS => {
                let mut rep = Rep::to(&r, 0);
                rep.a = self.cycles();
                rep.b = self.counters.frames_tx;
                rep.c = self.counters.frames_rx;
                rep.d = self.iommu.lock().unwrap().faults;
                self.reply(rep);
            }
            _ => {
                if !posted {
                    self.reply(Rep::to(&r, -libc::ENOSYS));
                }
            }
        }
    }

    /// Opens the client's memory for DMA (at HELLO). The pidfd taken at connect names the
    /// process that connected; `/proc/PID/mem` is opened by pid and then the pidfd is checked
    /// again: if that process is still alive after the open, the pid could not have been reused
    /// in between, so the descriptor is that process's memory. A client found dead is dropped.
    fn open_client_mem(&mut self) -> Result<File, String> {
        let Some(c) = &self.client else { return Err("no client".into()) };
        let (pid, pidfd) = (c.pid, c.pidfd.as_raw_fd());
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(format!("/proc/{pid}/mem"))
            .map_err(|e| format!("/proc/{pid}/mem: {e}"));
        let same = p::pidfd_pid(pidfd).ok().flatten() == Some(pid);
        if p::pidfd_exited(pidfd).unwrap_or(true) || !same {
            self.drop_client("client process exited");
            return Err(format!("client pid {pid} exited"));
        }
        f
    }

    /// Drops the client as soon as its process has exited, even while its socket stays open
    /// (inherited by a child): its memory and its pid are no longer the client's.
    fn check_client_alive(&mut self) {
        if let Some(c) = &self.client {
            if p::pidfd_exited(c.pidfd.as_raw_fd()).unwrap_or(true) {
                self.drop_client("client process exited");
            }
        }
    }

    /// Admits a new connection: the peer must run as the device process's uid (the socket file
    /// is 0600 as well), and a pidfd must name it. Otherwise the connection is closed at once,
    /// without a reply.
    fn admit(&mut self, fd: &OwnedFd) -> Option<(u32, OwnedFd)> {
        let cred = p::peer_cred(fd.as_raw_fd()).ok()?;
        if cred.uid != p::euid() {
            self.counters.refused_uid += 1;
            self.log(&format!("connection from pid {} uid {} refused (not uid {})", cred.pid, cred.uid, p::euid()));
            return None;
        }
        let pidfd = p::peer_pidfd(fd.as_raw_fd()).ok()?;
        if p::pidfd_exited(pidfd.as_raw_fd()).unwrap_or(true) {
            return None;
        }
        Some((cred.pid, pidfd))
    }

    /// Drops the client as soon as its end of the connection is closed (or shut down for
    /// writing): requests it left unread are discarded with it, so a departed client's backlog
    /// never delays the next client.
    fn check_client_hangup(&mut self) {
        if let Some(c) = &self.client {
            if p::hung_up(c.fd.as_raw_fd()) {
                self.drop_client("disconnected");
            }
        }
    }

    /// Reads the client's requests (noticing a disconnect first), then accepts a new client.
    fn service_socket(&mut self) {
        self.check_client_alive();
        self.check_client_hangup();
        if !self.refused.is_empty() {
            self.service_refused();
        }
        self.service_requests();
        if let Ok(Some(fd)) = p::accept(self.listener.as_raw_fd()) {
            let Some((pid, pidfd)) = self.admit(&fd) else { return };
            if self.client.is_some() {
                // one client at a time, like a VFIO group: its HELLO is answered with EBUSY
                // (below, without holding up the clock); past MAX_REFUSED waiting ones it is
                // closed at once
                self.log(&format!("connection from pid {pid} refused: a client is attached"));
                if self.refused.len() < MAX_REFUSED {
                    self.refused.push(Refused { fd, pid, pidfd, since: Instant::now() });
                }
            } else {
                self.attach(fd, pid, pidfd);
            }
        }
    }

    /// Answers the HELLO of connections refused while a client is attached (EBUSY), and drops
    /// them after it or after 5 s.
    ///
    /// Before refusing, the attached client is checked again: if it has gone (it closed its
    /// connection before this one was made, but after the last check), the waiting connection
    /// becomes the client instead, in arrival order, so a client that connects right after the
    /// previous one closed is never refused.
    fn service_refused(&mut self) {
        let mut keep = Vec::new();
        let mut waiting = std::mem::take(&mut self.refused).into_iter();
        while let Some(w) = waiting.next() {
            if self.client.is_none() {
                self.attach(w.fd, w.pid, w.pidfd);
                keep.extend(waiting);
                break;
            }
            let mut buf = [0u8; 128];
            if !p::wait_fd(w.fd.as_raw_fd(), libc::POLLIN, 0).unwrap_or(true) {
                if w.since.elapsed() < Duration::from_secs(5) {
                    keep.push(w);
                }
                continue;
            }
            self.check_client_alive();
            self.check_client_hangup();
            if self.client.is_none() {
                self.attach(w.fd, w.pid, w.pidfd);
                keep.extend(waiting);
                break;
            }
            if let Ok(Recv::Msg(n, _)) = p::recv(w.fd.as_raw_fd(), &mut buf) {
                if let Some(r) = Req::decode(&buf[..n]) {
                    let _ = p::send_fds(w.fd.as_raw_fd(), &Rep::to(&r, -libc::EBUSY).encode(), &[]);
                }
            }
        }
        self.refused = keep;
    }

    fn attach(&mut self, fd: OwnedFd, pid: u32, pidfd: OwnedFd) {
        self.counters.clients += 1;
        self.client = Some(Client { fd, pid, pidfd, hello: false, irq_tx: None });
        self.log(&format!("client pid {pid} attached"));
        self.last_activity = self.cycles();
    }

    fn service_requests(&mut self) {
        for _ in 0..256 {
            let Some(c) = &self.client else { return };
            let mut buf = [0u8; 128];
            match p::recv(c.fd.as_raw_fd(), &mut buf) {
                Ok(Recv::Msg(n, fd)) => match Req::decode(&buf[..n]) {
                    Some(r) => self.handle(r, fd),
                    None => {
                        self.drop_client("malformed request");
                        return;
                    }
                },
                Ok(Recv::Empty) => return,
                Ok(Recv::Closed) | Err(_) => {
                    self.drop_client("disconnected");
                    return;
                }
            }
        }
    }

    fn service_wire_rx(&mut self) {
        let mut buf = vec![0u8; 16384];
        // The socket is always drained into the port's receive buffer: a wire never holds
        // the sender back. (It did once: with both engines' receive paths waiting for their
        // own transmit side, two NICs each waiting for the other to read stopped for good.)
        // The MAC takes frames from the buffer while fewer than 8 wait for the engine; a
        // frame the full buffer cannot hold is dropped and counted, as a NIC without PFC does.
        loop {
            while self.eng.rx_q.len() < 8 {
                let Some(f) = self.rx_buf.pop_front() else { break };
                self.rx_buf_bytes -= f.len();
                self.eng.rx_q.push_back(f);
            }
            let Some(n) = self.wire.recv(&mut buf) else { return };
            let f = buf[..n].to_vec();
            let now = self.cycles();
            self.last_activity = now;
            self.counters.frames_rx += 1;
            if let Some(pc) = &mut self.pcap {
                pc.frame(now, &f);
            }
            if let Some((op, smac, sip, tip)) = parse_arp(&f) {
                self.arp.insert(sip, smac);
                if op == 1 && tip == self.cfg.ipv4 {
                    let rep = arp_frame(2, self.cfg.mac, self.cfg.ipv4, smac, sip, smac);
                    self.counters.arp_replies += 1;
                    self.send_frame(rep, false);
                }
                let done: Vec<usize> = (0..self.arp_wait.len()).filter(|&i| self.arp_wait[i].ip == sip).collect();
                for i in done.into_iter().rev() {
                    let w = self.arp_wait.remove(i);
                    let mut rep = Rep::to(&w.req, 0);
                    rep.a = smac;
                    self.reply(rep);
                }
                continue;
            }
            if self.cfg.rx_loss > 0.0 && is_roce(&f) && (self.rng.next() % 1_000_000) < (self.cfg.rx_loss * 1e6) as u64 {
                self.counters.frames_lost_rx += 1;
                continue;
            }
            if let Some((smac, src, target)) = parse_ns(&f) {
                if target == link_local_of(self.cfg.mac) {
                    let rep = na_frame(self.cfg.mac, &target, smac, &src);
                    self.counters.nd_replies += 1;
                    self.send_frame(rep, false);
                }
                continue;
            }
            if self.rx_buf_bytes + f.len() > RX_BUF_BYTES {
                self.counters.rx_buf_drops += 1;
                continue;
            }
            self.rx_buf_bytes += f.len();
            self.rx_buf.push_back(f);
        }
    }

    fn send_frame(&mut self, f: Vec<u8>, may_lose: bool) {
        if !may_lose {
            // frames of the device process itself (ARP); the engine's were captured already
            let now = self.cycles();
            if let Some(pc) = &mut self.pcap {
                pc.frame(now, &f);
            }
        }
        let mut f = f;
        let mut copies = 1;
        if may_lose {
            let faults = self.cfg.loss + self.cfg.dup + self.cfg.reorder + self.cfg.corrupt;
            if faults > 0.0 {
                let r = (self.rng.next() % 1_000_000) as f64 / 1e6;
                if r < self.cfg.loss {
                    self.counters.frames_lost += 1;
                    self.counters.fault_lost += 1;
                    return;
                } else if r < self.cfg.loss + self.cfg.dup {
                    self.counters.fault_dup += 1;
                    copies = 2;
                } else if r < self.cfg.loss + self.cfg.dup + self.cfg.reorder {
                    self.counters.fault_reordered += 1;
                    let later = 1 + (self.rng.next() % 3) as u32;
                    let now = self.cycles();
                    self.held.push_back((f, later, now));
                    return;
                } else if r < faults {
                    if let Some((a, b)) = after_bth_span(&f) {
                        let bit = self.rng.next() as usize % ((b - a) * 8);
                        f[a + bit / 8] ^= 1 << (bit % 8);
                        self.counters.fault_corrupted += 1;
                    }
                }
            }
        }
        for _ in 1..copies {
            self.wire_out(f.clone());
        }
        self.wire_out(f);
        if may_lose {
            // frames held back go out once enough later frames did
            let mut k = 0;
            while k < self.held.len() {
                self.held[k].1 -= 1;
                if self.held[k].1 == 0 {
                    let (h, _, _) = self.held.remove(k).unwrap();
                    self.wire_out(h);
                } else {
                    k += 1;
                }
            }
        }
    }

    /// Frames held back by `reorder` for `REORDER_HOLD_CYCLES` go out without waiting longer.
    fn release_held(&mut self) {
        let now = self.cycles();
        while self.held.front().is_some_and(|h| now.saturating_sub(h.2) >= REORDER_HOLD_CYCLES) {
            let (h, _, _) = self.held.pop_front().unwrap();
            self.wire_out(h);
        }
    }

    fn wire_out(&mut self, f: Vec<u8>) {
        if !self.tx_backlog.is_empty() {
            self.tx_backlog.push_back(f);
            return;
        }
        match self.wire.send(&f) {
            SendResult::Sent => {}
            SendResult::Full => self.tx_backlog.push_back(f),
            SendResult::Dropped => self.counters.frames_lost += 1,
        }
    }

    fn service_wire_tx(&mut self) {
        self.release_held();
        while let Some(f) = self.tx_backlog.front() {
            match self.wire.send(f) {
                SendResult::Sent => {
                    self.tx_backlog.pop_front();
                }
                SendResult::Full => break,
                SendResult::Dropped => {
                    self.counters.frames_lost += 1;
                    self.tx_backlog.pop_front();
                }
            }
        }
        let frames = std::mem::take(&mut self.eng.tx);
        let ends = std::mem::take(&mut self.eng.tx_cycle);
        self.eng.tx_start.clear();
        for ((f, aborted), end) in frames.into_iter().zip(ends) {
            if aborted {
                continue;
            }
            self.last_activity = self.cycles();
            self.counters.frames_tx += 1;
            if let Some(pc) = &mut self.pcap {
                pc.frame(self.cycle_base + end, &f);
            }
            if f.len() >= 6 && f[..6] == self.cfg.mac.to_be_bytes()[2..] {
                // addressed to this port's own MAC (a QP connected to one on the same NIC):
                // looped back into the receive path, as a NIC's internal switch does
                self.counters.frames_looped += 1;
                self.eng.rx_q.push_back(f);
                continue;
            }
            self.send_frame(f, true);
        }
        // a full wire holds our MAC
        self.eng.tx_stall_pct = if self.tx_backlog.len() > 16 { 100 } else { 0 };
    }

    fn service_arp(&mut self) {
        let now = Instant::now();
        let mut out = Vec::new();
        let mut failed = Vec::new();
        for (i, w) in self.arp_wait.iter_mut().enumerate() {
            if w.next <= now {
                if w.tries == 5 {
                    failed.push(i);
                    continue;
                }
                w.tries += 1;
                w.next = now + Duration::from_millis(200);
                out.push(arp_frame(1, self.cfg.mac, self.cfg.ipv4, 0, w.ip, 0xFFFF_FFFF_FFFF));
            }
        }
        for i in failed.into_iter().rev() {
            let w = self.arp_wait.remove(i);
            self.reply(Rep::to(&w.req, -libc::EHOSTUNREACH));
        }
        for f in out {
            self.send_frame(f, false);
        }
    }

    fn service_irqs(&mut self) {
        for (_, v) in std::mem::take(&mut self.eng.irqs) {
            let Some(f) = self.irq_fds.get(&v).cloned() else { continue };
            let Some(c) = &mut self.client else { continue };
            let tx = c.irq_tx.get_or_insert_with(|| {
                let (tx, rx) = std::sync::mpsc::sync_channel::<Arc<File>>(256);
                // ends when the client is dropped (the sender with it); a write blocked on a
                // hostile client's eventfd holds only this thread, never the clock loop
                let _ = std::thread::Builder::new().name("hm-irq".into()).spawn(move || {
                    for f in rx {
                        let _ = (&*f).write(&1u64.to_le_bytes());
                    }
                });
                tx
            });
            if tx.try_send(f).is_err() {
                self.counters.irqs_lost += 1;
            }
        }
    }

    /// One clock, with the MMIO queue advanced.
    fn clock(&mut self) {
        if let Some(m) = &self.in_flight {
            if let Some((v, ok)) = self.eng.lite_take(m.port) {
                let m = self.in_flight.take().unwrap();
                match m.reply_to {
                    Some(r) => {
                        let mut rep = Rep::to(&r, if ok { 0 } else { -libc::EFAULT });
                        rep.a = v as u64;
                        self.reply(rep);
                    }
                    None => {
                        if !ok {
                            self.counters.mmio_errors += 1;
                        }
                    }
                }
            }
        }
        if self.in_flight.is_none() {
            if let Some(m) = self.mmio.pop_front() {
                self.eng.lite_start(m.port, m.op);
                self.in_flight = Some(m);
            }
        }
        self.eng.step();
    }

    fn busy(&self) -> bool {
        self.in_flight.is_some() || !self.mmio.is_empty() || !self.eng.rx_q.is_empty() || !self.rx_buf.is_empty() || !self.tx_backlog.is_empty() || !self.held.is_empty() || !self.eng.mem.idle()
    }

    /// Runs until `max_cycles` (or forever).
    pub fn run(&mut self) -> Result<(), String> {
        let mut last_flush = Instant::now();
        let mut last_dbg = Instant::now();
        loop {
            self.service_socket();
            self.service_wire_rx();
            self.service_arp();
            let idle = !self.busy() && self.cycles() - self.last_activity > self.cfg.idle_after;
            if self.cfg.verbose && last_dbg.elapsed() > Duration::from_secs(1) {
                last_dbg = Instant::now();
                eprintln!(
                    "hematite-sim device: cycle {} idle {idle} (in flight {}, mmio {}, rx_q {}, tx backlog {}, mem idle {}, since activity {})",
                    self.cycles(),
                    self.in_flight.is_some(),
                    self.mmio.len(),
                    self.eng.rx_q.len(),
                    self.tx_backlog.len(),
                    self.eng.mem.idle(),
                    self.cycles() - self.last_activity
                );
            }
            let batch = if idle {
                let mut fds = vec![
                    libc::pollfd { fd: self.listener.as_raw_fd(), events: libc::POLLIN, revents: 0 },
                    libc::pollfd { fd: self.wire.fd(), events: libc::POLLIN, revents: 0 },
                ];
                if let Some(c) = &self.client {
                    fds.push(libc::pollfd { fd: c.fd.as_raw_fd(), events: libc::POLLIN, revents: 0 });
                    fds.push(libc::pollfd { fd: c.pidfd.as_raw_fd(), events: libc::POLLIN, revents: 0 });
                }
                // SAFETY: fds is a valid array of pollfd for the call's duration.
                unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, self.cfg.idle_sleep_ms) };
                self.cfg.idle_slice
            } else if self.in_flight.is_some() || !self.mmio.is_empty() {
                8
            } else {
                64
            };
            for _ in 0..batch {
                self.clock();
            }
            let beats = self.eng.mem.read_beats + self.eng.mem.write_beats;
            if beats != self.last_beats {
                self.last_beats = beats;
                self.last_activity = self.cycles();
            }
            if !self.eng.fw_done_cycles.is_empty() {
                self.eng.fw_done_cycles.clear();
            }
            self.service_wire_tx();
            self.service_irqs();
            if last_flush.elapsed() > Duration::from_millis(500) {
                if let Some(pc) = &mut self.pcap {
                    pc.flush();
                }
                last_flush = Instant::now();
            }
            if self.eng.fw_out.2 {
                // A client can load anything into the core (hold it, write IMEM, run it): a
                // trap ends that client's session and resets the function, like a device
                // error, but never the device process.
                self.counters.traps += 1;
                eprintln!("hematite-sim device: the control core trapped; the function is reset");
                if self.client.is_some() {
                    self.drop_client("the control core trapped");
                } else if let Err(e) = self.reset() {
                    return Err(format!("the control core trapped and the reset failed: {e}"));
                }
            }
            if STOP.load(std::sync::atomic::Ordering::SeqCst) {
                if let Some(pc) = &mut self.pcap {
                    pc.flush();
                }
                let c = &self.counters;
                eprintln!(
                    "hematite-sim device: stopped after {} cycles: frames tx {} rx {} lost {} lost-rx {} rx-buffer-full {} looped {}, ARP replies {}, ND replies {}",
                    self.cycles(),
                    c.frames_tx,
                    c.frames_rx,
                    c.frames_lost,
                    c.frames_lost_rx,
                    c.rx_buf_drops,
                    c.frames_looped,
                    c.arp_replies,
                    c.nd_replies
                );
                eprintln!(
                    "hematite-sim device: wire faults applied: lost {} duplicated {} reordered {} corrupted {}",
                    c.fault_lost, c.fault_dup, c.fault_reordered, c.fault_corrupted
                );
                return Ok(());
            }
            if self.cfg.max_cycles != 0 && self.cycles() >= self.cfg.max_cycles {
                if let Some(pc) = &mut self.pcap {
                    pc.flush();
                }
                return Ok(());
            }
        }
    }
}

impl Drop for SimNic {
    fn drop(&mut self) {
        if let Some(pc) = &mut self.pcap {
            pc.flush();
        }
        let _ = std::fs::remove_file(&self.cfg.socket);
        if let WireAddr::Unix(pth) = &self.cfg.wire_local {
            let _ = std::fs::remove_file(pth);
        }
    }
}

#[cfg(test)]
mod nd_tests {
    use super::*;

    const MAC: u64 = 0x0248_4d00_0001;
    const PEER: u64 = 0x5254_0000_0001;

    fn ns(src: [u8; 16], target: [u8; 16], hop: u8) -> Vec<u8> {
        let mut m = vec![135, 0, 0, 0, 0, 0, 0, 0];
        m.extend_from_slice(&target);
        let sn = [0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, target[13], target[14], target[15]];
        let mut f = icmpv6_frame(PEER, 0x3333_ff00_0001, &src, &sn, m);
        f[21] = hop;
        f
    }

    #[test]
    fn link_local_is_modified_eui64() {
        assert_eq!(
            link_local_of(MAC),
            [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x00, 0x48, 0x4d, 0xff, 0xfe, 0x00, 0x00, 0x01]
        );
        // the same rule gives rxe's address for qemu's MAC (seen in the reference captures)
        assert_eq!(link_local_of(PEER)[8..], [0x50, 0x54, 0x00, 0xff, 0xfe, 0x00, 0x00, 0x01]);
    }

    #[test]
    fn solicitation_answered_with_valid_advertisement() {
        let peer_ll = link_local_of(PEER);
        let ours = link_local_of(MAC);
        let f = ns(peer_ll, ours, 255);
        let (smac, src, target) = parse_ns(&f).expect("a valid NS");
        assert_eq!((smac, src, target), (PEER, peer_ll, ours));
        let na = na_frame(MAC, &target, smac, &src);
        assert_eq!(mac_of(&na[0..6]), PEER);
        assert_eq!(mac_of(&na[6..12]), MAC);
        assert_eq!(&na[22..38], &ours);
        assert_eq!(&na[38..54], &peer_ll);
        let msg = &na[54..];
        assert_eq!((msg[0], msg[4]), (136, 0x60));
        assert_eq!(icmpv6_csum(&ours, &peer_ll, msg), 0, "checksum verifies");
        assert_eq!(&msg[8..24], &ours);
        assert_eq!(&msg[24..26], &[2, 1]);
        assert_eq!(mac_of(&msg[26..32]), MAC);
        // duplicate address detection: to all nodes, not solicited
        let na = na_frame(MAC, &target, smac, &[0; 16]);
        assert_eq!(mac_of(&na[0..6]), 0x3333_0000_0001);
        assert_eq!(na[54 + 4], 0x20);
    }

    #[test]
    fn malformed_solicitations_ignored() {
        let ours = link_local_of(MAC);
        assert!(parse_ns(&ns(link_local_of(PEER), ours, 64)).is_none(), "hop limit must be 255");
        let mut f = ns(link_local_of(PEER), ours, 255);
        f[60] ^= 1;
        assert!(parse_ns(&f).is_none(), "bad checksum");
        let f = ns(link_local_of(PEER), ours, 255);
        assert!(parse_ns(&f[..70]).is_none(), "truncated");
        let mut mc = ours;
        mc[0] = 0xff;
        assert!(parse_ns(&ns(link_local_of(PEER), mc, 255)).is_none(), "multicast target");
        assert!(parse_ns(&arp_frame(1, PEER, 1, 0, 2, 0xFFFF_FFFF_FFFF)).is_none());
    }

    #[test]
    fn roce_frames_recognised() {
        use hematite_model::{build_frame, HdrRecord};
        let rec = HdrRecord { opcode: 0x04, pkey: 0xFFFF, dest_qp: 0x11, ttl: 64, payload_len: 5, ..HdrRecord::default() };
        let v4 = build_frame(&rec, b"hello").unwrap();
        assert!(is_roce(&v4));
        let v6 = build_frame(&HdrRecord { ipv6: true, ..rec }, b"hello").unwrap();
        assert!(is_roce(&v6));
        let mut other = v4.clone();
        other[14 + 20 + 3] ^= 1; // another UDP port
        assert!(!is_roce(&other));
        assert!(!is_roce(&ns(link_local_of(PEER), link_local_of(MAC), 255)), "ICMPv6 is not RoCE");
        assert!(!is_roce(&arp_frame(1, PEER, 1, 0, 2, 0xFFFF_FFFF_FFFF)));
        assert!(!is_roce(&v4[..20]));
    }
}

#[cfg(test)]
mod fault_tests {
    use super::*;
    use hematite_model::record::DropReason;

    /// `--corrupt` flips a bit in `after_bth_span`: for every valid vector frame (IPv4, IPv6,
    /// VLAN-tagged), flipping any bit there (every 5th, to keep it short) must be a drop on
    /// the ICRC and on nothing else, and bits outside the span are not what the fault uses.
    #[test]
    fn a_bit_flipped_after_the_bth_fails_the_icrc_alone() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/vectors");
        let mut frames = 0;
        let mut flips = 0;
        for f in ["rocev2_ipv4.pcap", "rocev2_ipv6.pcap"] {
            for fr in hematite_model::capture::read_frames(&dir.join(f)).unwrap() {
                if hematite_model::rx::classify(&fr).reason.is_some() {
                    continue;
                }
                let (a, b) = after_bth_span(&fr).expect("a RoCEv2 frame has a span after its BTH");
                assert!(a < b && b <= fr.len());
                frames += 1;
                for bit in (0..(b - a) * 8).step_by(5) {
                    let mut g = fr.clone();
                    g[a + bit / 8] ^= 1 << (bit % 8);
                    assert_eq!(hematite_model::rx::classify(&g).reason, Some(DropReason::BadIcrc), "{f}: bit {bit} after the BTH");
                    flips += 1;
                }
            }
        }
        assert!(frames >= 100 && flips > 10_000, "{frames} frames, {flips} flips");
        assert!(after_bth_span(&arp_frame(1, 1, 2, 0, 3, 0xFFFF_FFFF_FFFF)).is_none(), "not RoCE");
    }
}
