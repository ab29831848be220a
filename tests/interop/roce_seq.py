#!/usr/bin/env python3
"""roce_seq.py - PSN and opcode sequence checker for RoCEv2 Reliable (and Unreliable) Connection traffic.

Reads a capture of a RoCEv2 link (classic pcap in either byte order with µs or ns stamps, or
pcapng with SHB/IDB/EPB/SPB blocks; link type Ethernet; .xz/.gz are opened directly) and checks
that every RC frame sent by ONE chosen endpoint is legal. Frames: Ethernet II, optional 802.1Q
tags, IPv4 or IPv6 (no extension headers), UDP destination port 4791, BTH. UC requests
(0x20-0x2B) are checked as the RC requests of the same operation, with UC's own rules: AckReq
never set, no PSN ever repeated (UC does not retransmit), no RC opcode on a UC connection nor UC
on an RC one. UD, CNP and other frames are counted, not checked; non-RoCE frames are skipped. The other direction is
parsed too: the responder checks need the peer's requests. Nothing requires that a frame was
answered (a loss injector may drop a frame after it was captured). ICRC is not checked here.

Connections are keyed (src IP, dst IP, BTH destination QPN). A PSN jump of 2^16 or more (2^10
with a new UDP source port) within one side's requests or responses is taken as a new connection
reusing the QPN, and reported as such. The two halves of a QP pair (requests one way, responses
the other) are matched by their PSNs, then by closeness in the capture, then by UDP source port.

As requester (SEND, RDMA WRITE, RDMA READ request, atomics), per connection:
  * messages are First, Middle*, Last of one operation, or Only; no Middle/Last without a First;
    no new message before the Last unless the PSN went back (a retransmission);
  * payload: First/Middle exactly PMTU, Last 1..PMTU, Only 0..PMTU, none on READ/atomics;
    PadCnt consistent; the frame long enough for its RETH / ImmDt / IETH / AtomicETH;
    WRITE RETH DMA length = sum of the message's payload (when seen whole and in order);
  * PSN: each new packet takes highest+1 (mod 2^24); a READ of length L takes
    max(1, ceil(L/PMTU)) PSNs. A PSN behind the next one (within 2^23) is a retransmission and
    must repeat what was sent at that PSN (same opcode and payload length), or be a READ
    re-issued from inside an earlier READ's range (VA advanced by (psn-first)*PMTU, length
    reduced to match). After a go-back the stream continues sequentially. A PSN ahead is a gap.
As responder (ACK/NAK, READ responses, atomic ACK), against the peer's requests seen so far:
  * an ACK/NAK PSN must be one the peer has sent (<= its highest request PSN, within 2^23);
    the AETH syndrome must decode (ACK, RNR NAK, NAK 0..4); the MSN never goes backwards
    (except back to 0/1 after the peer started over at its very first PSN: a new connection
    with the same QPNs and PSNs, counted as a restart);
  * READ responses for each READ request (duplicates and re-issued ones included) use PSNs
    psn..psn+n-1, First/Middle of PMTU bytes, Last/Only the rest, total = L; a response PSN
    that belongs to no READ request is illegal; a response stream may stop early only if the
    peer re-issued that READ (or the capture ends). A READ re-issued from inside an earlier
    READ may be answered as a new message (First..Last) or as the rest of the original one
    (Middle..Last, as Linux rxe does; either way PSNs and sizes match the original's);
  * an atomic ACK answers an atomic request PSN and carries its AtomicAckETH.
PMTU: --pmtu, else per QP pair the largest First/Middle payload of either direction (requests
or READ responses; an IB MTU size preferred), else guessed from READ request PSN spacing, else
unknown (4096 assumed).

Usage:
  roce_seq.py --src-ip 192.0.2.2 FILE.pcap          (or --src-mac 02:48:4d:00:00:01)
  roce_seq.py --src-ip 192.0.2.1 --pmtu 1024 FILE.pcapng.xz
  roce_seq.py --self-test
Exit status: 0 no violations, 1 violations, 2 unreadable input or no frame from the endpoint.
The last line reads: roce_seq: FILE: checked N frames from SRC in K connections, V violations
"""
import argparse
import gzip
import ipaddress
import lzma
import struct
import sys
from collections import defaultdict

ROCE_PORT = 4791
MASK = 0xFFFFFF
PMTUS = (256, 512, 1024, 2048, 4096)
MAX_PRINT = 20

# opcode: (name, kind, position, bytes of extension headers after the BTH)
OPS = {
    0x00: ('SEND_FIRST', 'SEND', 'F', 0), 0x01: ('SEND_MIDDLE', 'SEND', 'M', 0),
    0x02: ('SEND_LAST', 'SEND', 'L', 0), 0x03: ('SEND_LAST_IMM', 'SEND', 'L', 4),
    0x04: ('SEND_ONLY', 'SEND', 'O', 0), 0x05: ('SEND_ONLY_IMM', 'SEND', 'O', 4),
    0x06: ('WRITE_FIRST', 'WRITE', 'F', 16), 0x07: ('WRITE_MIDDLE', 'WRITE', 'M', 0),
    0x08: ('WRITE_LAST', 'WRITE', 'L', 0), 0x09: ('WRITE_LAST_IMM', 'WRITE', 'L', 4),
    0x0A: ('WRITE_ONLY', 'WRITE', 'O', 16), 0x0B: ('WRITE_ONLY_IMM', 'WRITE', 'O', 20),
    0x0C: ('READ_REQUEST', 'READ', 'O', 16),
    0x0D: ('READ_RESP_FIRST', 'RRESP', 'F', 4), 0x0E: ('READ_RESP_MIDDLE', 'RRESP', 'M', 0),
    0x0F: ('READ_RESP_LAST', 'RRESP', 'L', 4), 0x10: ('READ_RESP_ONLY', 'RRESP', 'O', 4),
    0x11: ('ACK', 'ACK', 'O', 4), 0x12: ('ATOMIC_ACK', 'AACK', 'O', 12),
    0x13: ('CMP_SWAP', 'ATOMIC', 'O', 28), 0x14: ('FETCH_ADD', 'ATOMIC', 'O', 28),
    0x16: ('SEND_LAST_INV', 'SEND', 'L', 4), 0x17: ('SEND_ONLY_INV', 'SEND', 'O', 4),
    0x1C: ('FLUSH', 'FLUSH', 'O', 20), 0x1D: ('ATOMIC_WRITE', 'AWRITE', 'O', 16),
}
REQUEST_KINDS = {'SEND', 'WRITE', 'READ', 'ATOMIC', 'FLUSH', 'AWRITE'}
RETH_AT0 = {0x06, 0x0A, 0x0B, 0x0C}
AETH_OPS = {0x0D, 0x0F, 0x10, 0x11, 0x12}
NAK_CODES = {0: 'PSN sequence error', 1: 'invalid request', 2: 'remote access error',
             3: 'remote operational error', 4: 'invalid RD request'}


def sdiff(a, b):
    """Signed 24-bit PSN difference a - b."""
    d = (a - b) & MASK
    return d - 0x1000000 if d & 0x800000 else d


def opname(op):
    return OPS[op][0] if op in OPS else '0x%02x' % op


class CaptureError(Exception):
    pass


# ------------------------------------------------------------------------- capture readers
def read_packets(data):
    """Yields (frame number, link type, frame bytes) from pcap or pcapng bytes; link type -1
    (and no bytes) when the file ends inside a record."""
    if len(data) < 12:
        raise CaptureError('file too short for a capture header')
    if data[:4] == b'\x0a\x0d\x0d\x0a':
        yield from _read_pcapng(data)
        return
    for e in '<>':
        magic = struct.unpack_from(e + 'I', data)[0]
        if magic in (0xA1B2C3D4, 0xA1B23C4D):
            break
    else:
        raise CaptureError('not a pcap or pcapng file (magic %s)' % data[:4].hex())
    if len(data) < 24:
        raise CaptureError('truncated pcap header')
    linktype = struct.unpack_from(e + 'I', data, 20)[0] & 0xFFFF
    off, no = 24, 0
    while off + 16 <= len(data):
        incl = struct.unpack_from(e + 'I', data, off + 8)[0]
        if off + 16 + incl > len(data):
            yield no + 1, -1, None              # truncated last record
            break
        no += 1
        yield no, linktype, data[off + 16:off + 16 + incl]
        off += 16 + incl


def _read_pcapng(data):
    off, no, e, ifaces = 0, 0, '<', []
    while off + 12 <= len(data):
        if data[off:off + 4] == b'\x0a\x0d\x0d\x0a':          # section header: byte order
            bom = data[off + 8:off + 12]
            e = '<' if bom == b'\x4d\x3c\x2b\x1a' else '>' if bom == b'\x1a\x2b\x3c\x4d' else None
            if e is None:
                raise CaptureError('bad pcapng byte-order magic at offset %d' % off)
            ifaces = []
        btype, blen = struct.unpack_from(e + 'II', data, off)
        if blen < 12 or off + blen > len(data):
            yield no + 1, -1, None              # truncated last block
            break
        body = data[off + 8:off + blen - 4]
        if btype == 1:                          # interface description
            ifaces.append(struct.unpack_from(e + 'H', body)[0])
        elif btype in (6, 2):                   # enhanced / obsolete packet block
            if btype == 6:
                iface, _, _, cap = struct.unpack_from(e + 'IIII', body)
            else:
                iface, _, _, _, cap = struct.unpack_from(e + 'HHIII', body)
            no += 1
            lt = ifaces[iface] if iface < len(ifaces) else 1
            yield no, lt, body[20:20 + cap]
        elif btype == 3:                        # simple packet block
            orig = struct.unpack_from(e + 'I', body)[0]
            no += 1
            yield no, (ifaces[0] if ifaces else 1), body[4:4 + min(orig, len(body) - 4)]
        off += blen


def load(path):
    opener = lzma.open if path.endswith('.xz') else gzip.open if path.endswith('.gz') else open
    with opener(path, 'rb') as f:
        return f.read()


# ------------------------------------------------------------------------- frame parsing
class Pkt:
    __slots__ = ('key', 'no', 'smac', 'sip', 'dip', 'sport', 'op', 'pad', 'tver', 'qpn', 'psn',
                 'plen', 'reth', 'aeth', 'va_atomic', 'short', 'uc', 'ackreq')

    def kind(self):
        return OPS[self.op][1]

    def pos(self):
        return OPS[self.op][2]


def parse_frame(no, buf):
    """Returns a Pkt for RC and UC (`op` the RC operation's code, `uc` set), (category, src
    MAC, src IP) for other RoCE frames, else None."""
    if len(buf) < 14:
        return None
    et, off = struct.unpack_from('>H', buf, 12)[0], 14
    while et in (0x8100, 0x88A8) and len(buf) >= off + 4:
        et, off = struct.unpack_from('>H', buf, off + 2)[0], off + 4
    if et == 0x0800 and len(buf) >= off + 20:
        ihl = (buf[off] & 0x0F) * 4
        if buf[off] >> 4 != 4 or ihl < 20 or buf[off + 9] != 17:
            return None
        if struct.unpack_from('>H', buf, off + 6)[0] & 0x3FFF:
            return None                         # fragment
        sip, dip, off = bytes(buf[off + 12:off + 16]), bytes(buf[off + 16:off + 20]), off + ihl
    elif et == 0x86DD and len(buf) >= off + 40:
        if buf[off + 6] != 17:
            return None
        sip, dip, off = bytes(buf[off + 8:off + 24]), bytes(buf[off + 24:off + 40]), off + 40
    else:
        return None
    if len(buf) < off + 8:
        return None
    sport, dport, ulen = struct.unpack_from('>HHH', buf, off)
    if dport != ROCE_PORT:
        return None
    b, smac = off + 8, bytes(buf[6:12])
    if len(buf) < b + 12 or ulen < 8 + 12 + 4:
        return 'malformed', smac, sip
    op, uc = buf[b], buf[b] >> 5 == 1 and buf[b] & 0x1F <= 0x0B
    if op >> 5 and not uc:
        return {0x81: 'CNP'}.get(op, {1: 'UC', 3: 'UD'}.get(op >> 5, 'other')), smac, sip
    op &= 0x1F if uc else 0xFF
    p = Pkt()
    p.no, p.smac, p.sip, p.dip, p.sport, p.op = no, smac, sip, dip, sport, op
    p.uc, p.ackreq = uc, buf[b + 8] >> 7
    p.pad, p.tver = (buf[b + 1] >> 4) & 3, buf[b + 1] & 0x0F
    p.qpn = struct.unpack_from('>I', buf, b + 4)[0] & MASK
    p.psn = struct.unpack_from('>I', buf, b + 8)[0] & MASK
    p.reth = p.aeth = p.va_atomic = None
    hl = OPS[op][3] if op in OPS else 0
    p.plen = ulen - 8 - 12 - hl - p.pad - 4
    p.short = p.plen < 0
    x = b + 12
    if not p.short and len(buf) >= x + hl:
        if op in RETH_AT0:
            p.reth = struct.unpack_from('>QII', buf, x)
        elif op in AETH_OPS:
            v = struct.unpack_from('>I', buf, x)[0]
            p.aeth = (v >> 24, v & MASK)
        elif op in (0x13, 0x14):
            p.va_atomic = struct.unpack_from('>Q', buf, x)[0]
    return p


def fmt_ip(raw):
    return str(ipaddress.ip_address(raw))


# ------------------------------------------------------------------------- checkers
class Conn:
    """One connection of the checked endpoint: its requests and/or responses on one QPN."""

    def __init__(self, key, nth, first):
        self.key, self.nth, self.first, self.viol, self.jumps = key, nth, first, [], []
        self.req = self.rsp = None

    def bad(self, p, why, psn=None):
        self.viol.append((p.no, p.psn if psn is None else psn, opname(p.op), why))

    def frame_ok(self, p):
        """Checks every packet of the endpoint has: headers present, PadCnt, TVer."""
        if p.short:
            self.bad(p, 'frame too short for the %s headers' % opname(p.op))
            return False
        if (p.plen + p.pad) % 4:
            self.bad(p, 'PadCnt %d inconsistent with payload %d' % (p.pad, p.plen))
        if p.tver:
            self.bad(p, 'BTH TVer %d != 0' % p.tver)
        return True


def span_of(p, pmtu):
    if p.op == 0x0C and p.reth:
        return max(1, -(-p.reth[2] // pmtu))
    return 1


class Role:
    def __init__(self, conn, pmtu, how, peer):
        self.c, self.pmtu, self.how, self.peer_qpn = conn, pmtu, how, peer


class Requester(Role):
    """The checked endpoint's requests on one connection."""

    def __init__(self, *a):
        super().__init__(*a)
        self.front = self.cur = None    # next new PSN; next PSN of the current run
        self.hist = {}                  # psn -> (op, plen, reth) or ('part', first psn of READ)
        self.msg = None                 # [kind, first psn, first frame, payload, dma len, broken]
        self.pkts = self.msgs = self.retx = self.gobacks = 0
        self.uc = None                  # UC (True) or RC (False), from the first packet

    def packet(self, p):
        self.pkts += 1
        if self.uc is None:
            self.uc = p.uc
        elif p.uc != self.uc:
            self.c.bad(p, '%s opcode on a %s connection' % (('RC', 'UC')[p.uc], ('RC', 'UC')[self.uc]))
        if p.uc:
            if p.ackreq:
                self.c.bad(p, 'UC packet with AckReq set')
            if self.front is not None and sdiff(p.psn, self.front) < 0:
                self.c.bad(p, 'UC PSN 0x%06x repeated or behind 0x%06x (UC never retransmits)'
                           % (p.psn, self.front))
                return
        span = span_of(p, self.pmtu)
        if self.front is None:
            self.front = p.psn
        d = sdiff(p.psn, self.front)
        if d > 0:
            self.c.bad(p, 'PSN gap: expected 0x%06x, %d PSN(s) skipped' % (self.front, d))
            if self.msg:
                self.msg[5] = True
        if d >= 0:
            self.new(p, span)
        else:
            self.retransmission(p, span)

    def new(self, p, span):
        c, pmtu = self.c, self.pmtu
        self.hist[p.psn] = (p.op, p.plen, p.reth)
        for k in range(1, span):
            self.hist[(p.psn + k) & MASK] = ('part', p.psn)
        self.front = self.cur = (p.psn + span) & MASK
        kind, pos = p.kind(), p.pos()
        if self.msg and (kind != self.msg[0] or pos not in 'ML'):
            c.bad(p, 'new message before the Last of the %s begun at PSN 0x%06x (frame %d)'
                  % (self.msg[0], self.msg[1], self.msg[2]))
            self.msg = None
        if self.msg is None and pos in 'ML':
            c.bad(p, '%s without a First' % pos.replace('M', 'Middle').replace('L', 'Last'))
        self.sizes(p, pos, pmtu)
        if pos == 'F':
            self.msg = [kind, p.psn, p.no, p.plen, p.reth[2] if p.reth else None, p.short]
        elif self.msg and pos in 'ML':
            self.msg[3] += max(p.plen, 0)
            if pos == 'L':
                m = self.msg
                if kind == 'WRITE' and not m[5] and m[4] is not None and m[4] != m[3]:
                    c.bad(p, 'RETH DMA length %d (PSN 0x%06x) != %d bytes written'
                          % (m[4], m[1], m[3]))
                self.msg, self.msgs = None, self.msgs + 1
        elif pos == 'O':
            self.msgs += 1
            if kind == 'WRITE' and p.reth and p.reth[2] != p.plen:
                c.bad(p, 'RETH DMA length %d != payload %d' % (p.reth[2], p.plen))
        if p.op in (0x13, 0x14) and p.va_atomic is not None and p.va_atomic & 7:
            c.bad(p, 'AtomicETH VA 0x%x not 8-byte aligned' % p.va_atomic)

    def sizes(self, p, pos, pmtu):
        c, n = self.c, p.plen
        if not c.frame_ok(p):
            return
        if p.kind() in ('READ', 'ATOMIC', 'FLUSH'):
            if n:
                c.bad(p, 'request carries %d payload bytes' % n)
        elif p.kind() == 'AWRITE':
            if n != 8:
                c.bad(p, 'ATOMIC WRITE payload %d != 8' % n)
        elif pos in 'FM' and n != pmtu:
            c.bad(p, '%s payload %d != PMTU %d' % (opname(p.op), n, pmtu))
        elif pos == 'L' and not 1 <= n <= pmtu:
            c.bad(p, 'Last payload %d not in 1..PMTU %d' % (n, pmtu))
        elif pos == 'O' and n > pmtu:
            c.bad(p, 'Only payload %d > PMTU %d' % (n, pmtu))

    def retransmission(self, p, span):
        c = self.c
        self.retx += 1
        if self.cur is not None and sdiff(p.psn, self.cur) < 0:
            self.gobacks += 1
        self.cur = (p.psn + span) & MASK
        rec = self.hist.get(p.psn)
        if rec is None:
            c.bad(p, 'PSN behind 0x%06x but nothing was sent at this PSN' % self.front)
        elif rec[0] == 'part':
            first = self.hist.get(rec[1])
            k = sdiff(p.psn, rec[1])
            va, rkey, ln = first[2] if first and first[2] else (0, 0, 0)
            want = (va + k * self.pmtu, rkey, ln - k * self.pmtu)
            if p.op != 0x0C or p.reth != want:
                c.bad(p, 'PSN inside the READ at 0x%06x: expected a re-issued READ with VA 0x%x '
                      'R_Key 0x%x length %d' % (rec[1], want[0], want[1], want[2]))
        elif rec[0] != p.op or rec[1] != p.plen:
            c.bad(p, 'retransmission differs: originally %s with %d bytes'
                  % (opname(rec[0]), rec[1]))
        elif p.op == 0x0C and rec[2] != p.reth:
            c.bad(p, 'retransmitted READ has a different RETH')


class PeerRequests:
    """The peer's requests to one of the checked endpoint's QPs, as they appear."""

    def __init__(self):
        self.high = self.first = None           # highest / first PSN the peer has occupied
        self.first_again = 0                    # times the peer sent its first PSN again
        self.jobs = []                          # READ requests (dicts), in order
        self.by_first = defaultdict(list)
        self.atomics = set()

    def packet(self, p, pmtu):
        span = span_of(p, pmtu)
        last = (p.psn + span - 1) & MASK
        if self.first is None:
            self.first = p.psn
        elif p.psn == self.first:
            self.first_again += 1
        if self.high is None or sdiff(last, self.high) > 0:
            self.high = last
        if p.op == 0x0C and p.reth:
            old = self.covering(p.psn)         # re-issued from inside an earlier READ?
            job = {'first': p.psn, 'n': span, 'len': p.reth[2], 'frame': p.no,
                   'idx': len(self.jobs), 'next': None,
                   'cont': bool(old and old['first'] != p.psn)}
            self.jobs.append(job)
            self.by_first[p.psn].append(job)
        elif p.kind() == 'ATOMIC':
            self.atomics.add(p.psn)

    def covering(self, psn, after=-1):
        """The latest READ (after job index 'after', among the last 1024) whose PSNs hold psn."""
        for j in reversed(self.jobs[max(after + 1, len(self.jobs) - 1024):]):
            if 0 <= sdiff(psn, j['first']) < j['n']:
                return j
        return None


class Responder(Role):
    """The checked endpoint's responses on one connection."""

    def __init__(self, *a):
        super().__init__(*a)
        self.msn = None
        self.restarts = self.first_again = 0
        self.open = []                          # READ response streams under way
        self.pkts = self.acks = self.naks = self.rresp = self.aacks = 0

    def packet(self, p, peer):
        c = self.c
        self.pkts += 1
        kind = p.kind()
        self.acks += kind == 'ACK'
        self.rresp += kind == 'RRESP'
        self.aacks += kind == 'AACK'
        if not c.frame_ok(p):
            return
        if peer is None or peer.high is None:
            return c.bad(p, 'response, but the peer sent no request to this QP before it')
        if p.aeth:
            self.aeth(p, peer)
        if kind in ('ACK', 'AACK'):
            if p.plen:
                c.bad(p, '%s carries %d payload bytes' % (opname(p.op), p.plen))
            d = sdiff(p.psn, peer.high)
            if d > 0:
                c.bad(p, 'PSN beyond the highest PSN 0x%06x the peer has sent' % peer.high)
            if kind == 'AACK' and p.psn not in peer.atomics:
                c.bad(p, 'atomic ACK PSN is no atomic request of the peer')
        else:
            self.read_response(p, peer)

    def aeth(self, p, peer):
        c, (syn, msn) = self.c, p.aeth
        t, v = (syn >> 5) & 3, syn & 0x1F
        if syn & 0x80 or t == 2 or (t == 3 and v not in NAK_CODES):
            c.bad(p, 'unknown AETH syndrome 0x%02x' % syn)
        if t in (1, 3):
            self.naks += 1
            if p.op != 0x11:
                c.bad(p, 'NAK syndrome 0x%02x on a %s' % (syn, opname(p.op)))
        back = self.msn is not None and sdiff(msn, self.msn) < 0
        if back and msn <= 1 and peer.first_again > self.first_again:
            self.restarts += 1                  # the peer started over from its first PSN and
            self.msn = msn                      # the MSN from 0: a new QP on the same QPN/PSNs
        elif back:
            c.bad(p, 'MSN went backwards: 0x%06x after 0x%06x' % (msn, self.msn))
        elif self.msn is None or sdiff(msn, self.msn) > 0:
            self.msn = msn
        self.first_again = peer.first_again

    def read_response(self, p, peer):
        c, pmtu, pos, psn = self.c, self.pmtu, p.pos(), p.psn
        job = next((o for o in self.open if o['next'] == psn), None) if pos in 'ML' else None
        if job is None and pos in 'ML':         # PSNs skipped inside a response stream?
            job = next((o for o in self.open if 0 < sdiff(psn, o['next'])
                        and sdiff(psn, o['first']) < o['n']), None)
            if job:
                c.bad(p, 'READ response skipped PSN 0x%06x (READ at 0x%06x)'
                      % (job['next'], job['first']))
        if job is None:                         # the start of the answer to a READ request
            fresh = [j for j in peer.by_first.get(psn, ())
                     if j['next'] is None and (pos in 'FO' or j['cont'])]
            if not fresh:
                j = peer.covering(psn)
                if pos in 'ML':
                    why = ('%s out of order in the READ at 0x%06x' % (opname(p.op), j['first'])
                           if j else 'READ response PSN belongs to no READ request of the peer')
                elif peer.by_first.get(psn):
                    why = 'READ response restarts at 0x%06x without a new READ request' % psn
                elif j:
                    why = '%s inside the READ at 0x%06x, not at its start' % (
                        opname(p.op), j['first'])
                else:
                    why = 'READ response PSN belongs to no READ request of the peer'
                return c.bad(p, why)
            job, still = fresh[0], []
            for o in self.open:                 # streams left unfinished: re-issued?
                if peer.covering(o['next'], o['idx']):
                    still.append(o)             # (its answer may still go on)
                else:
                    c.viol.append((p.no, o['next'], opname(p.op), 'READ response stream of the '
                                   'READ at 0x%06x (frame %d) stopped before this PSN, and the '
                                   'peer did not re-issue it' % (o['first'], o['frame'])))
            self.open = still[-15:] + [job]
        k, n, ln = sdiff(psn, job['first']), job['n'], job['len']
        last = k == n - 1
        want = ln - (n - 1) * pmtu if last else pmtu
        if pos == 'O' and n != 1 or pos == 'F' and n == 1:
            c.bad(p, '%s for a READ of %d bytes (%d packets)' % (opname(p.op), ln, n))
        elif pos == 'M' and last:
            c.bad(p, 'Middle where the Last of the READ at 0x%06x (%d bytes) was due'
                  % (job['first'], ln))
        elif pos == 'L' and not last:
            c.bad(p, 'Last at packet %d of %d of the READ at 0x%06x' % (k + 1, n, job['first']))
        elif p.plen != want:
            c.bad(p, 'payload %d, expected %d (READ at 0x%06x of %d bytes, PMTU %d)'
                  % (p.plen, want, job['first'], ln, pmtu))
        job['next'] = (psn + 1) & MASK
        if last or pos in 'LO':
            self.open.remove(job)


# ------------------------------------------------------------------------- analysis
class Stream:
    """Pass-1 facts about one sub-stream: one side's requests (or responses) on one QPN."""

    def __init__(self, first):
        self.first = self.last = first
        self.psns, self.sports, self.partner, self.jump = set(), set(), None, None
        self.fm = [0, 0]            # largest First/Middle payload: [not an IB MTU, an IB MTU]
        self.read_ev, self.pending_read = [], None


def infer_pmtu(streams, keys):
    fm = max(streams[k].fm[1] for k in keys) or max(streams[k].fm[0] for k in keys)
    if fm:
        return fm, 'inferred' if fm in PMTUS else 'inferred, not an IB MTU'
    ok = set(PMTUS)
    ev = [e for k in keys for e in streams[k].read_ev]
    for ln, span in ev:
        ok &= {m for m in PMTUS if max(1, -(-ln // m)) == span}
    if ev and ok and len(ok) < len(PMTUS):
        return max(ok), 'guessed from READ PSN spacing'
    return 4096, 'unknown, 4096 assumed'


def pair_streams(streams):
    """Finds, for each sub-stream, the other direction's sub-stream of the opposite role that
    belongs to the same QP pair: response PSNs that match request PSNs, then the responses
    starting closest to the requests' frame range, then more matches, then the UDP port."""
    for k, st in streams.items():
        cands = []
        for o, ot in streams.items():
            if o[:2] == (k[1], k[0]) and o[3] != k[3]:
                req, rsp = (st, ot) if k[3] == 'req' else (ot, st)
                n = len(req.psns & rsp.psns)
                apart = max(0, rsp.first - req.last, req.first - rsp.first)
                cands.append(((n > 0, -apart, n, bool(st.sports & ot.sports)), o))
        if cands:
            score, o = max(cands)
            if score[0] or len(cands) == 1:
                st.partner = o


def analyze(data, src_mac=None, src_ip=None, pmtu=None):
    counts = defaultdict(int)
    pkts, streams, incs = [], {}, {}
    for no, lt, buf in read_packets(data):
        if lt == -1:
            counts['truncated record at the end'] += 1
            continue
        counts['frames'] += 1
        if lt != 1:
            counts['not Ethernet'] += 1
            continue
        p = parse_frame(no, buf)
        if p is None:
            counts['non-RoCE'] += 1
            continue
        if isinstance(p, tuple):
            counts[p[0]] += 1
            counts['mine_other'] += (p[1] == src_mac) if src_mac else (p[2] == src_ip)
            continue
        mine = (p.smac == src_mac) if src_mac else (p.sip == src_ip)
        if p.op not in OPS:
            counts['unknown RC opcode'] += 1
        role = 'req' if p.op not in OPS or p.kind() in REQUEST_KINDS else 'rsp'
        # A QPN may be reused by a later connection: a PSN jump of 2^16 or more (2^10 with a
        # new UDP source port) starts a new sub-stream.
        inc = incs.setdefault((p.sip, p.dip, p.qpn, role), [0, p.sport, p.psn])
        d, jump = abs(sdiff(p.psn, inc[2])), None
        if d >= 1 << 16 or (d >= 1 << 10 and p.sport != inc[1]):
            inc[0], jump = inc[0] + 1, (inc[2], p.psn, p.sport != inc[1])
        inc[1:] = p.sport, p.psn
        p.key = (p.sip, p.dip, p.qpn, role, inc[0])
        pkts.append((p, mine))
        counts['mine_rc'] += mine
        st = streams.get(p.key) or streams.setdefault(p.key, Stream(no))
        st.jump = st.jump or jump
        st.last = no
        st.sports.add(p.sport)
        if role == 'req':
            st.psns.add(p.psn)
            if st.pending_read and sdiff(p.psn, st.pending_read[0]) > 0:
                st.read_ev.append((st.pending_read[1], sdiff(p.psn, st.pending_read[0])))
                st.pending_read = None
            if p.op == 0x0C and p.reth and len(st.read_ev) < 64:
                st.pending_read = (p.psn, p.reth[2])
        elif len(st.psns) < 256:
            st.psns.add(p.psn)
        if p.op in (0x00, 0x01, 0x06, 0x07, 0x0D, 0x0E):
            st.fm[p.plen in PMTUS] = max(st.fm[p.plen in PMTUS], p.plen)
    pair_streams(streams)

    def pmtu_of(key):
        partner = streams[key].partner
        if pmtu:
            return pmtu, 'given'
        return infer_pmtu(streams, [key] + ([partner] if partner else []))

    # The checked endpoint's sub-streams, grouped into connections: per QPN, a requester and a
    # responder sub-stream with the same local QPN whose frame ranges overlap (give or take 64).
    roles, conns = {}, []
    mine_keys = sorted({p.key for p, mine in pkts if mine}, key=lambda k: streams[k].first)
    for key in mine_keys:
        st = streams[key]
        local = st.partner[2] if st.partner else None
        c = next((c for c in reversed(conns) if c.key == key[:3]), None)
        if not (c and getattr(c, key[3]) is None and (None in (local, c.local) or local == c.local)
                and c.first - 64 <= st.last and st.first <= c.last + 64):
            c = Conn(key[:3], 1 + sum(o.key == key[:3] for o in conns), st.first)
            c.last, c.local = st.last, local
            conns.append(c)
        c.first, c.last, c.local = min(c.first, st.first), max(c.last, st.last), c.local or local
        if st.jump:
            c.jumps.append('%s PSN 0x%06x -> 0x%06x%s at frame %d' % (
                'request' if key[3] == 'req' else 'response', st.jump[0], st.jump[1],
                ', new UDP port' if st.jump[2] else '', st.first))
        args = (c,) + pmtu_of(key) + (local,)
        roles[key] = Requester(*args) if key[3] == 'req' else Responder(*args)
        setattr(c, key[3], roles[key])
    peers = {}
    for p, mine in pkts:
        key = p.key
        if not mine:
            if key[3] == 'req' and p.op in OPS:
                if key not in peers:
                    peers[key] = PeerRequests()
                peers[key].packet(p, pmtu_of(key)[0])
        elif p.op not in OPS:
            roles[key].c.bad(p, 'reserved RC opcode')
        elif key[3] == 'req':
            roles[key].packet(p)
        else:
            roles[key].packet(p, peers.get(streams[key].partner))
    return conns, counts


def report(name, srcname, conns, counts, out=sys.stdout, max_print=MAX_PRINT):
    total = 0
    for c in conns:
        again = ' (QPN reused: connection %d on it; %s)' % (c.nth, '; '.join(c.jumps)) \
            if c.nth > 1 else ''
        print('connection %s -> %s QPN 0x%06x%s, frames %d-%d:' % (
            fmt_ip(c.key[0]), fmt_ip(c.key[1]), c.key[2], again, c.first, c.last), file=out)
        for r in (c.req, c.rsp):
            if r is None:
                continue
            peer = ' (peer QPN 0x%06x)' % r.peer_qpn if r.peer_qpn is not None else ''
            if r is c.req and r.uc:
                what = 'UC, %d messages' % r.msgs
            elif r is c.req:
                what = '%d messages, %d retransmitted packets, %d go-back events' % (
                    r.msgs, r.retx, r.gobacks)
            else:
                what = '%d ACK/NAK, %d READ response, %d atomic ACK; %d NAKs sent' % (
                    r.acks, r.rresp, r.aacks, r.naks)
                if r.restarts:
                    what += '; %d restarts (peer back at its first PSN, MSN back to 0/1: taken ' \
                            'as new connections on the same QPN and PSNs)' % r.restarts
            print('  %s%s: %d packets, %s; PMTU %d (%s)' % (
                'requester' if r is c.req else 'responder', peer, r.pkts, what, r.pmtu, r.how),
                file=out)
        print('  violations: %d' % len(c.viol), file=out)
        for no, psn, op, why in sorted(c.viol)[:max_print]:
            print('    frame %d PSN 0x%06x %s: %s' % (no, psn, op, why), file=out)
        if len(c.viol) > max_print:
            print('    ... %d more (%d in total)' % (len(c.viol) - max_print, len(c.viol)),
                  file=out)
        total += len(c.viol)
    other = ', '.join('%s %d' % (k, counts[k]) for k in
                      ('UC', 'UD', 'CNP', 'other', 'malformed', 'unknown RC opcode', 'non-RoCE',
                       'not Ethernet', 'truncated record at the end')
                      if counts[k])
    print('%d frames; not checked: %s' % (counts['frames'], other or 'none'), file=out)
    n = sum(r.pkts for c in conns for r in (c.req, c.rsp) if r)
    print('roce_seq: %s: checked %d frames from %s in %d connections, %d violations'
          % (name, n, srcname, len(conns), total), file=out)
    return total


# ------------------------------------------------------------------------- self-test
A_MAC, B_MAC = bytes.fromhex('02484d000001'), bytes.fromhex('02484d000002')
ADDR = {(4, 'A'): bytes([192, 0, 2, 2]), (4, 'B'): bytes([192, 0, 2, 1]),
        (6, 'A'): ipaddress.ip_address('2001:db8::2').packed,
        (6, 'B'): ipaddress.ip_address('2001:db8::1').packed}


def frame(src, op, psn, plen=0, reth=None, aeth=None, va=0x1000, v6=False, vlan=None, uc=False,
          ackreq=False):
    """One RC frame (UC with `uc`: op is the RC operation's code) from endpoint 'A' (the checked
    one, QPN 0x11 on B) or 'B' (QPN 0x22 on A). The ICRC is zero: it is not checked here."""
    dst = 'B' if src == 'A' else 'A'
    ext = b''
    if op in RETH_AT0:
        ext += struct.pack('>QII', *(reth or (va, 0x77, plen)))
    if op in (0x13, 0x14):
        ext += struct.pack('>QIQQ', va, 0x77, 1, 0)
    if op in AETH_OPS:
        syn, msn = aeth or (0x1F, 0)
        ext += struct.pack('>I', syn << 24 | msn)
    if op == 0x12:
        ext += struct.pack('>Q', 5)
    if op in (0x03, 0x05, 0x09, 0x0B, 0x16, 0x17):
        ext += b'\xab\xcd\xef\x01'
    pad = -plen & 3
    bth = struct.pack('>BBHII', op | (0x20 if uc else 0), pad << 4, 0xFFFF, 0x11 if src == 'A' else 0x22,
                      (psn & MASK) | (ackreq << 31))
    roce = bth + ext + bytes(plen + pad) + bytes(4)
    udp = struct.pack('>HHHH', 0xC001, ROCE_PORT, 8 + len(roce), 0) + roce
    ips = ADDR[6 if v6 else 4, src] + ADDR[6 if v6 else 4, dst]
    if v6:
        ip, et = struct.pack('>IHBB', 0x60000000, len(udp), 17, 64) + ips, 0x86DD
    else:
        ip, et = struct.pack('>BBHHHBBH', 0x45, 2, 20 + len(udp), 1, 0x4000, 64, 17, 0) + ips, 0x800
    tag = struct.pack('>HH', 0x8100, vlan) if vlan is not None else b''
    macs = (A_MAC + B_MAC) if dst == 'A' else (B_MAC + A_MAC)
    return macs + tag + struct.pack('>H', et) + ip + udp


def pcap(frames, endian='<', ns=False):
    out = [struct.pack(endian + 'IHHiIII', 0xA1B23C4D if ns else 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)]
    out += [struct.pack(endian + 'IIII', i, 0, len(f), len(f)) + f for i, f in enumerate(frames)]
    return b''.join(out)


def pcapng(frames, e='<'):
    def block(t, body):
        body += bytes(-len(body) & 3)
        n = struct.pack(e + 'I', len(body) + 12)
        return struct.pack(e + 'I', t) + n + body + n
    out = [block(0x0A0D0D0A, struct.pack(e + 'IHHq', 0x1A2B3C4D, 1, 0, -1)),
           block(1, struct.pack(e + 'HHI', 1, 0, 65535))]
    for i, f in enumerate(frames):              # alternately enhanced and simple packet blocks
        out.append(block(3, struct.pack(e + 'I', len(f)) + f) if i % 2 else
                   block(6, struct.pack(e + 'IIIII', 0, 0, i, len(f), len(f)) + f))
    return b''.join(out)


def message(src, first, psn, length, last=None, only=None, pmtu=1024, **kw):
    """The frames of one SEND (first=0x00) or WRITE (0x06) message, or of a READ response
    (first=0x0D), of 'length' bytes from 'psn'."""
    last, only = last or first + 2, only or {0x00: 0x04, 0x06: 0x0A, 0x0D: 0x10}[first]
    reth = (0x1000, 0x77, length) if first == 0x06 else None
    aeth = (0x1F, kw.pop('msn', 1)) if first == 0x0D else None
    n = max(1, -(-length // pmtu))
    if n == 1:
        return [frame(src, only, psn, length, reth=reth, aeth=aeth, **kw)]
    return ([frame(src, first, psn, pmtu, reth=reth, aeth=aeth, **kw)]
            + [frame(src, first + 1, psn + k, pmtu, **kw) for k in range(1, n - 1)]
            + [frame(src, last, psn + n - 1, length - (n - 1) * pmtu, aeth=aeth, **kw)])


def self_test():
    F, M = frame, message
    S = lambda src, psn, ln, **kw: M(src, 0x00, psn, ln, **kw)                 # SEND
    W = lambda src, psn, ln, **kw: M(src, 0x06, psn, ln, **kw)                 # WRITE
    RR = lambda src, psn, ln, **kw: M(src, 0x0D, psn, ln, **kw)                # READ response
    R = lambda src, psn, ln, va=0x1000, **kw: F(src, 0x0C, psn, reth=(va, 0x77, ln), **kw)
    ack = lambda src, psn, msn, syn=0x1F, **kw: F(src, 0x11, psn, aeth=(syn, msn), **kw)
    wrap = 0xFFFFFE
    legal = [  # (name, frames[, check on each connection])
        ('multi-packet WRITE', W('A', 100, 3000) + [ack('B', 102, 1)] + W('A', 103, 10)),
        ('SEND with imm/inv, IPv6', S('A', 7, 2500, last=0x03, v6=True)
         + S('A', 10, 20, only=0x05, v6=True) + S('A', 11, 0, only=0x17, v6=True)
         + S('A', 12, 1500, last=0x16, v6=True) + [ack('B', 13, 4, v6=True)]),
        ('READ + responses, both roles', [R('A', 500, 2500)] + RR('B', 500, 2500)
         + W('A', 503, 1024) + [R('B', 900, 3000)] + RR('A', 900, 3000)
         + [F('B', 0x0A, 903, 8, reth=(0, 1, 8)), ack('A', 903, 2), R('B', 904, 100)]
         + RR('A', 904, 100, msn=3)),
        ('atomics + atomic ACK', [F('A', 0x13, 10, va=0x2000), F('B', 0x12, 10, aeth=(0x1F, 1)),
                                  F('B', 0x14, 77), F('A', 0x12, 77, aeth=(0x1F, 1))]),
        ('go-back-N', W('A', 200, 4096) + S('A', 204, 8) + [ack('B', 202, 0, 0x60)]
         + W('A', 200, 4096)[2:] + S('A', 204, 8) + S('A', 205, 8) + [ack('B', 205, 2)],
         lambda c: (c.req.gobacks, c.req.retx) == (1, 3)),
        ('re-issued READ from the middle', [R('A', 300, 4096, va=0x10000)]
         + RR('B', 300, 4096)[:2] + [R('A', 302, 2048, va=0x10800)] + RR('B', 302, 2048)
         + S('A', 304, 4) + [R('B', 600, 4096, va=0x8000)] + RR('A', 600, 4096)[:2]
         + [R('B', 602, 2048, va=0x8800)] + RR('A', 602, 2048)),
        ('re-issued READ answered rxe-style (Middle..Last)', [R('B', 600, 4096, va=0x8000)]
         + RR('A', 600, 4096)[:2] + [R('B', 602, 2048, va=0x8800)] + RR('A', 600, 4096)[2:]),
        ('duplicate READ answered twice', [R('B', 40, 3072)] * 2 + RR('A', 40, 3072) * 2),
        ('24-bit PSN wrap, VLAN', W('A', wrap, 3072, vlan=5) + W('A', 1, 9, vlan=5)
         + [ack('B', 1, 2, vlan=5), R('A', 2, 3000, vlan=5)] + RR('B', 2, 3000, vlan=5)
         + [R('B', wrap, 3000)] + RR('A', wrap, 3000)),
        ('a new connection on the same QPN and PSNs', S('B', 0, 8) + S('B', 1, 8)
         + [ack('A', 1, 2)] + S('B', 0, 8) + [ack('A', 0, 1)]),
        ('UC SEND and WRITE, no responses', S('A', 30, 3000, uc=True) + W('A', 33, 2048, uc=True)
         + S('A', 35, 4, only=0x05, uc=True) + S('B', 7, 2000, uc=True),
         lambda c: c.req.uc and c.req.msgs == 3),
    ]
    illegal = [  # (name, frames, part of the expected reason[, PMTU given])
        ('skipped PSN', S('A', 10, 8) + S('A', 12, 8), 'PSN gap'),
        ('Middle without First', S('A', 9, 8) + [F('A', 0x07, 10, 1024)], 'without a First'),
        ('First with a short payload', [F('A', 0, 5, 1000), F('A', 2, 6, 10)], '!= PMTU', 1024),
        ('new message before Last', [F('A', 0x06, 70, 1024, reth=(0, 1, 2048)),
                                     F('A', 0x04, 71, 4)], 'before the Last'),
        ('retransmission with another length', S('A', 80, 8) + S('A', 81, 8) + S('A', 80, 12),
         'differs'),
        ('WRITE DMA length mismatch', [F('A', 0x06, 3, 1024, reth=(0, 1, 4096)),
                                       F('A', 0x08, 4, 5)], 'DMA length'),
        ('re-issued READ with a wrong VA', [R('A', 300, 4096), R('A', 302, 2048)],
         're-issued READ', 1024),
        ('READ response longer than requested', [R('B', 40, 100), F('A', 0x10, 40, 200)],
         'expected 100'),
        ('READ response past the READ range', [R('B', 40, 2048)] + RR('A', 40, 3000),
         'Middle where the Last', 1024),
        ('READ response beginning with Middle', [R('B', 40, 3072), F('A', 0x0E, 40, 1024)],
         'out of order'),
        ('READ response for no READ', S('B', 5, 8) + RR('A', 5, 8), 'no READ request'),
        ('READ response stream cut short', [R('B', 40, 4096), R('B', 44, 10)]
         + RR('A', 40, 4096)[:2] + RR('A', 44, 10), 'stopped', 1024),
        ('ACK of a never-sent PSN', S('B', 50, 8) + [ack('A', 51, 1)], 'beyond the highest'),
        ('MSN going backwards', S('B', 60, 8) + S('B', 61, 8) + [ack('A', 60, 5), ack('A', 61, 4)],
         'MSN went backwards'),
        ('MSN and PSN going backwards', S('B', 60, 8) + S('B', 61, 8)
         + [ack('A', 61, 5), ack('A', 60, 4)], 'MSN went backwards'),
        ('unknown AETH syndrome', S('B', 5, 8) + [ack('A', 5, 1, 0x65)], 'unknown AETH'),
        ('UC with AckReq', [F('A', 0x04, 9, 8, uc=True, ackreq=True)], 'AckReq'),
        ('UC resent', S('A', 9, 8, uc=True) + S('A', 9, 8, uc=True), 'never retransmits'),
        ('UC Middle without First', [F('A', 0x01, 9, 1024, uc=True)], 'without a First', 1024),
        ('UC and RC on one connection', S('A', 9, 8, uc=True) + S('A', 10, 8), 'RC opcode on a UC'),
    ]
    failed = []
    for name, frames, *more in legal + illegal:
        conns, _ = analyze(pcap(frames), src_ip=ADDR[6 if 'IPv6' in name else 4, 'A'],
                           pmtu=more[1] if len(more) > 1 else None)
        viol = [v for c in conns for v in c.viol]
        if more and isinstance(more[0], str):
            ok = any(more[0] in v[3] for v in viol)
        else:
            ok = not viol and all(more[0](c) for c in conns if more)
        if not ok:
            failed.append(name)
            print('FAIL %s: %s' % (name, viol or 'accepted'))
    # the readers: one legal case in every container variant, selected by MAC
    for i, blob in enumerate((pcap(legal[4][1], '>'), pcap(legal[4][1], '<', True),
                              pcap(legal[4][1], '>', True), pcapng(legal[4][1]),
                              pcapng(legal[4][1], '>'))):
        conns, counts = analyze(blob, src_mac=A_MAC)
        if counts['mine_rc'] != 9 or len(conns) != 1 or conns[0].viol:
            failed.append('container %d' % i)
            print('FAIL container variant %d: %d frames' % (i, counts['mine_rc']))
    n = len(legal) + len(illegal) + 5
    print('roce_seq self-test: %d cases passed' % n if not failed else
          'roce_seq self-test: %d of %d cases FAILED' % (len(failed), n))
    return 1 if failed else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('capture', nargs='?')
    g = ap.add_mutually_exclusive_group()
    g.add_argument('--src-mac', help='check frames sent from this MAC address')
    g.add_argument('--src-ip', help='check frames sent from this IPv4/IPv6 address')
    ap.add_argument('--pmtu', type=int, choices=PMTUS, help='path MTU (default: inferred)')
    ap.add_argument('--max-print', type=int, default=MAX_PRINT,
                    help='violations shown per connection (default %d)' % MAX_PRINT)
    ap.add_argument('--self-test', action='store_true', help='run the built-in cases and exit')
    a = ap.parse_args()
    if a.self_test:
        return self_test()
    if not a.capture or not (a.src_mac or a.src_ip):
        ap.error('a capture file and --src-mac or --src-ip are required')
    try:
        mac = bytes.fromhex(a.src_mac.replace(':', '').replace('-', '')) if a.src_mac else None
        ip = ipaddress.ip_address(a.src_ip).packed if a.src_ip else None
        if mac is not None and len(mac) != 6:
            raise ValueError(a.src_mac)
    except ValueError as e:
        ap.error('bad address: %s' % e)
    src = a.src_mac or a.src_ip
    try:
        conns, counts = analyze(load(a.capture), mac, ip, a.pmtu)
    except (OSError, CaptureError, EOFError, lzma.LZMAError, struct.error) as e:
        print('roce_seq: %s: unreadable: %s' % (a.capture, e))
        return 2
    if not counts['mine_rc'] and not counts['mine_other']:
        print('%d frames (%d not Ethernet), none from %s' % (counts['frames'],
                                                             counts['not Ethernet'], src))
        print('roce_seq: %s: no RoCE frame from %s found' % (a.capture, src))
        print('roce_seq: %s: checked 0 frames from %s in 0 connections, 0 violations'
              % (a.capture, src))
        return 2
    if not counts['mine_rc']:
        print('%d RoCE frames from %s, none of them RC' % (counts['mine_other'], src))
    return 1 if report(a.capture, src, conns, counts, max_print=a.max_print) else 0


if __name__ == '__main__':
    sys.exit(main())
