#!/usr/bin/env python3
"""A two-port Ethernet relay between two qemu guests, with a pcapng of every frame.

    relay.py serve --a LISTEN,PEER --b LISTEN,PEER --ctl CTLSOCK [--pcap FILE]
    relay.py ctl CTLSOCK '{"cmd": ...}'

Each guest's NIC is a qemu `-netdev dgram` on AF_UNIX datagram sockets: one raw Ethernet frame
per datagram (no FCS), qemu bound to PEER and sending to LISTEN, which the relay binds. A frame
that arrives on A's socket goes to B's peer and the other way round; the relay blocks while a
guest's socket is full (AF_UNIX datagrams are flow-controlled), so it never loses a frame on its
own.

Impairments apply to RoCEv2 frames only (UDP destination port 4791, IPv4 or IPv6), so ARP,
neighbour discovery and the TCP of the tools' QP exchange always get through:
  drop   the probability of dropping a frame;
  ce     the probability of setting ECN to CE (11) in a frame that is ECN-capable
         (ECT(0) or ECT(1)), as a congested switch would (the IPv4 header checksum is
         rewritten; the ICRC does not cover the ECN bits);
  dir    "both", "a2b" or "b2a": the direction the impairments apply to;
  seed   the seed of the pseudo-random choices (the same seed and the same frames give the
         same choices); every "set" restarts the generator.

The pcapng has two interfaces, 0 "a2b" and 1 "b2a" (the frame's direction), microsecond
timestamps, and every frame the relay received, including the dropped ones; a dropped frame
carries the comment "relay: dropped" (it never reached the other guest), a marked one "relay:
CE marked" (the capture holds it as forwarded, with CE set).

Control (CTLSOCK, a UNIX stream socket, one JSON request per connection, one JSON answer):
  {"cmd": "pcap", "path": FILE}    close the current capture, start FILE ("" closes only)
  {"cmd": "set", "drop": 0.01, "ce": 0, "dir": "both", "seed": 1}
  {"cmd": "stats"}                 frame counters since the last "pcap"
  {"cmd": "quit"}
"""
import json
import os
import random
import selectors
import socket
import struct
import sys
import time

ROCEV2_PORT = 4791


class Pcapng:
    def __init__(self, path):
        self.f = open(path, "wb")
        shb_body = struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1) + self._opt(4, b"hematite relay.py") + self._end()
        self._block(0x0A0D0D0A, shb_body)
        for name in (b"a2b", b"b2a"):
            # LINKTYPE_ETHERNET, snaplen 0 (no limit); if_name; if_tsresol 6 (microseconds)
            self._block(1, struct.pack("<HHI", 1, 0, 0) + self._opt(2, name) + self._opt(9, b"\x06") + self._end())

    @staticmethod
    def _opt(code, value):
        pad = (-len(value)) % 4
        return struct.pack("<HH", code, len(value)) + value + b"\0" * pad

    @staticmethod
    def _end():
        return b"\0\0\0\0"

    def _block(self, btype, body):
        n = 12 + len(body)
        self.f.write(struct.pack("<II", btype, n) + body + struct.pack("<I", n))

    def frame(self, iface, data, comment=None):
        t = int(time.time() * 1e6)
        body = struct.pack("<IIIII", iface, t >> 32, t & 0xFFFFFFFF, len(data), len(data))
        body += data + b"\0" * ((-len(data)) % 4)
        if comment:
            body += self._opt(1, comment.encode()) + self._end()
        self._block(6, body)

    def close(self):
        self.f.close()


def rocev2_ecn(frame):
    """(offset of the ECN byte, IP version) when the frame is RoCEv2, else None."""
    if len(frame) < 14:
        return None
    o, et = 12, struct.unpack_from(">H", frame, 12)[0]
    while et in (0x8100, 0x88A8) and len(frame) >= o + 6:
        o += 4
        et = struct.unpack_from(">H", frame, o)[0]
    ip = o + 2
    if et == 0x0800 and len(frame) >= ip + 20:
        ihl = (frame[ip] & 0x0F) * 4
        if frame[ip + 9] == 17 and len(frame) >= ip + ihl + 4:
            if struct.unpack_from(">H", frame, ip + ihl + 2)[0] == ROCEV2_PORT:
                return ip + 1, 4
    elif et == 0x86DD and len(frame) >= ip + 44:
        if frame[ip + 6] == 17 and struct.unpack_from(">H", frame, ip + 42)[0] == ROCEV2_PORT:
            return ip, 6
    return None


def set_ce(frame, pos, ver):
    """Set CE in an ECN-capable RoCEv2 frame; returns the new frame or None if not ECT."""
    b = bytearray(frame)
    if ver == 4:
        if b[pos] & 0x3 == 0:
            return None
        b[pos] |= 0x3
        ip = pos - 1
        ihl = (b[ip] & 0x0F) * 4
        b[ip + 10:ip + 12] = b"\0\0"
        s = sum(struct.unpack_from(">%dH" % (ihl // 2), b, ip))
        while s >> 16:
            s = (s & 0xFFFF) + (s >> 16)
        struct.pack_into(">H", b, ip + 10, ~s & 0xFFFF)
    else:
        # IPv6: traffic class = low nibble of byte 0 and high nibble of byte 1; ECN = its low 2 bits
        if (b[pos + 1] >> 4) & 0x3 == 0:
            return None
        b[pos + 1] |= 0x30
    return bytes(b)


def recv_line(sock):
    """Bytes from a control connection up to a newline (or the peer's close): one JSON message."""
    got = b""
    while not got.endswith(b"\n"):
        d = sock.recv(65536)
        if not d:
            break
        got += d
    return got


def unix_path(spec):
    return spec[5:] if spec.startswith("unix:") else spec


def serve(args):
    def opt(name):
        i = args.index(name)
        return args[i + 1]
    a_listen, a_peer = [unix_path(x) for x in opt("--a").split(",")]
    b_listen, b_peer = [unix_path(x) for x in opt("--b").split(",")]
    ctl_path = opt("--ctl")
    ports = []
    for listen, peer in ((a_listen, b_peer), (b_listen, a_peer)):
        if os.path.exists(listen):
            os.unlink(listen)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        s.bind(listen)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
        ports.append((s, peer))
    if os.path.exists(ctl_path):
        os.unlink(ctl_path)
    ctl = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    ctl.bind(ctl_path)
    ctl.listen(4)

    st = {"pcap": None, "drop": 0.0, "ce": 0.0, "dir": "both", "rng": random.Random(0)}
    zero = {"a2b": 0, "b2a": 0, "rocev2": 0, "dropped": 0, "ce_marked": 0, "undeliverable": 0}
    stats = dict(zero)
    if "--pcap" in args:
        st["pcap"] = Pcapng(opt("--pcap"))
    out = [socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) for _ in range(2)]

    sel = selectors.DefaultSelector()
    for i, (s, _) in enumerate(ports):
        sel.register(s, selectors.EVENT_READ, i)
    sel.register(ctl, selectors.EVENT_READ, "ctl")
    sys.stdout.write("relay: a %s -> %s, b %s -> %s, control %s\n" % (a_listen, b_peer, b_listen, a_peer, ctl_path))
    sys.stdout.flush()
    while True:
        for key, _ in sel.select():
            if key.data == "ctl":
                conn, _ = ctl.accept()
                with conn:
                    conn.settimeout(5)
                    req = recv_line(conn)
                    try:
                        r = json.loads(req.decode() or "{}")
                    except ValueError as e:
                        conn.sendall((json.dumps({"error": str(e)}) + "\n").encode())
                        continue
                    cmd = r.get("cmd")
                    ans = {"ok": True}
                    if cmd == "pcap":
                        if st["pcap"]:
                            st["pcap"].close()
                            st["pcap"] = None
                        ans["stats"] = stats
                        stats = dict(zero)
                        if r.get("path"):
                            st["pcap"] = Pcapng(r["path"])
                    elif cmd == "set":
                        st["drop"] = float(r.get("drop", 0))
                        st["ce"] = float(r.get("ce", 0))
                        st["dir"] = r.get("dir", "both")
                        st["rng"] = random.Random(int(r.get("seed", 0)))
                    elif cmd == "stats":
                        ans["stats"] = stats
                    elif cmd == "quit":
                        if st["pcap"]:
                            st["pcap"].close()
                        conn.sendall((json.dumps(ans) + "\n").encode())
                        return 0
                    else:
                        ans = {"error": "unknown cmd %r" % cmd}
                    conn.sendall((json.dumps(ans) + "\n").encode())
                continue
            i = key.data
            s, peer = ports[i]
            frame = s.recv(65536)
            d = "a2b" if i == 0 else "b2a"
            stats[d] += 1
            comment = None
            roce = rocev2_ecn(frame)
            if roce:
                stats["rocev2"] += 1
                if st["dir"] in ("both", d):
                    rng = st["rng"]
                    if st["drop"] and rng.random() < st["drop"]:
                        comment = "relay: dropped"
                    elif st["ce"] and rng.random() < st["ce"]:
                        m = set_ce(frame, *roce)
                        if m is not None:
                            frame = m
                            comment = "relay: CE marked"
                            stats["ce_marked"] += 1
            if st["pcap"]:
                st["pcap"].frame(i, frame, comment)
            if comment == "relay: dropped":
                stats["dropped"] += 1
                continue
            try:
                out[i].sendto(frame, peer)
            except OSError:
                stats["undeliverable"] += 1     # the other guest is not (yet) there


def ctl_request(path, req):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    s.connect(path)
    s.sendall((req.strip() + "\n").encode())
    ans = recv_line(s)
    s.close()
    print(ans.decode().strip())
    return 0 if b'"error"' not in ans else 1


def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "serve":
        return serve(sys.argv[2:])
    if len(sys.argv) == 4 and sys.argv[1] == "ctl":
        return ctl_request(sys.argv[2], sys.argv[3])
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main())
