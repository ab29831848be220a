//! Neighbour resolution on the port, answered by the device process (such frames never reach
//! the engine): ARP (requests for our IPv4 address answered, every sender learnt, `ARP_RESOLVE`
//! requests broadcast and retried for the client) and IPv6 neighbour discovery (Neighbor
//! Solicitations for the port's link-local address answered with an advertisement).

use super::SimNic;
use hostdrv::simproto::{Rep, Req};
use std::time::{Duration, Instant};

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
pub(super) fn arp_frame(op: u16, smac: u64, sip: u32, tmac: u64, tip: u32, dst: u64) -> Vec<u8> {
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

// ---------------------------------------------------------------- the device's side

/// A client's `ARP_RESOLVE` waiting for an answer from the wire.
pub(super) struct ArpWait {
    req: Req,
    ip: u32,
    tries: u32,
    next: Instant,
}

impl SimNic {
    /// `ARP_RESOLVE`: answered at once from what was learnt, otherwise the request waits (and is
    /// broadcast by [`SimNic::service_arp`]).
    pub(super) fn arp_resolve(&mut self, r: Req) {
        let ip = r.a as u32;
        if let Some(m) = self.arp.get(&ip) {
            let mut rep = Rep::to(&r, 0);
            rep.a = *m;
            self.reply(rep);
        } else {
            self.arp_wait.push(ArpWait { req: r, ip, tries: 0, next: Instant::now() });
        }
    }

    /// A received frame, if ARP: the sender is learnt, a request for our address answered,
    /// waiting `ARP_RESOLVE` requests for the sender answered. False if not ARP.
    pub(super) fn arp_rx(&mut self, f: &[u8]) -> bool {
        let Some((op, smac, sip, tip)) = parse_arp(f) else { return false };
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
        true
    }

    /// A received frame, if a Neighbor Solicitation: answered when it asks for the port's
    /// link-local address. False if not one.
    pub(super) fn nd_rx(&mut self, f: &[u8]) -> bool {
        let Some((smac, src, target)) = parse_ns(f) else { return false };
        if target == link_local_of(self.cfg.mac) {
            let rep = na_frame(self.cfg.mac, &target, smac, &src);
            self.counters.nd_replies += 1;
            self.send_frame(rep, false);
        }
        true
    }

    /// Broadcasts the waiting `ARP_RESOLVE` requests every 200 ms; after the fifth try, 200 ms
    /// later, the client gets EHOSTUNREACH.
    pub(super) fn service_arp(&mut self) {
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
}

#[cfg(test)]
mod tests {
    use super::super::wire::is_roce;
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
