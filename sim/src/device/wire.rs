//! The device's Ethernet port: the datagram wire (one frame per datagram, qemu `-netdev dgram`
//! framing, over AF_UNIX datagram sockets or UDP), the port's receive buffer (`RX_BUF_BYTES`)
//! and transmit backlog (a full peer socket holds the engine's MAC), the frames looped back to
//! the port's own MAC, and the wire faults applied to transmitted RoCE frames (`--loss`,
//! `--dup`, `--reorder`, `--corrupt`; `--rx-loss` on received ones). Frames go to the pcap
//! here; ARP and IPv6 neighbour discovery frames are handed to [`super::neigh`].

use super::SimNic;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixDatagram;
use std::path::PathBuf;

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

pub(super) enum Wire {
    Unix(UnixDatagram, PathBuf),
    Udp(UdpSocket, SocketAddr),
}

enum SendResult {
    Sent,
    Full,
    Dropped,
}

impl Wire {
    pub(super) fn open(local: &WireAddr, peer: &WireAddr) -> Result<Wire, String> {
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
    pub(super) fn fd(&self) -> RawFd {
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

/// Bytes of received frames the port buffers ahead of the MAC (a NIC's receive packet
/// buffer); beyond it frames are dropped and counted (`rx_buf_drops`).
pub const RX_BUF_BYTES: usize = 4 << 20;

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

/// A RoCEv2 frame: Ethernet (optionally one 802.1Q tag) / IPv4 or IPv6 / UDP to port 4791.
pub(super) fn is_roce(f: &[u8]) -> bool {
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

impl SimNic {
    /// Drains the wire into the port's receive buffer and feeds the engine from it.
    pub(super) fn service_wire_rx(&mut self) {
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
            if self.arp_rx(&f) {
                self.counters.slow_rx += 1;
                continue;
            }
            if self.cfg.rx_loss > 0.0 && is_roce(&f) && (self.rng.next() % 1_000_000) < (self.cfg.rx_loss * 1e6) as u64 {
                self.counters.frames_lost_rx += 1;
                continue;
            }
            if self.nd_rx(&f) {
                self.counters.slow_rx += 1;
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

    /// Sends a frame: the engine's (`may_lose`: wire faults apply; already captured) or the
    /// process's own (ARP, ND: captured here, never lost).
    pub(super) fn send_frame(&mut self, f: Vec<u8>, may_lose: bool) {
        if !may_lose {
            // frames of the device process itself (ARP); the engine's were captured already
            self.counters.slow_tx += 1;
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

    /// Sends the backlog, then the frames the engine transmitted in the last batch.
    pub(super) fn service_wire_tx(&mut self) {
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
}

#[cfg(test)]
mod tests {
    use super::super::neigh::arp_frame;
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
