#!/usr/bin/env python3
"""Hematite's own RoCEv2 test vectors.

Builds RoCEv2 frames with scapy (the ICRC is filled in by scapy.contrib.roce), checks every
frame against a second ICRC implementation in this file (bitwise, MSB-first formulation of the
CRC-32, headers located and masked from the raw bytes, no scapy and no zlib) and against
zlib.crc32 over the same masked stream (and, when present, with tests/tools/roce_icrc.py),
and writes

    <out>/rocev2_ipv4.pcap      positive IPv4 frames
    <out>/rocev2_ipv6.pcap      positive IPv6 frames
    <out>/rocev2_negative.pcap  single-bit flips of a subset of the positives
    <out>/rocev2_rules.pcap     one frame per receive rule (payload alignment, pad placement,
                                payload size, P_Key, TVer, header and length rules), each
                                with a valid ICRC and failing exactly that rule
    <out>/rocev2_vectors.json   every frame as hex + decoded fields + ICRC + labels

The JSON layout is the one model/tests/vectors.rs and sim/tests/vectors.rs read (the same as
../shared/vectors uses); `reference_hw` is present and empty (hardware captures cannot be
regenerated).

Any disagreement between the ICRC implementations, a wrong label, or an internal consistency
check that fails makes the script exit non-zero and write nothing.

Usage:
    python3 tests/vectors/gen_vectors.py                  # writes tests/data/vectors/
    python3 tests/vectors/gen_vectors.py --out DIR        # writes DIR
    python3 tests/vectors/gen_vectors.py --check          # regenerate into a temp dir and
                                                          # compare with tests/data/vectors/
The output is deterministic: fixed payload seed, fixed pcap timestamps, sorted iteration.
Needs scapy == SCAPY_PIN (python3 -m pip install -r tests/vectors/requirements.txt).
"""
import argparse
import filecmp
import json
import os
import struct
import sys
import tempfile
import zlib

SCAPY_PIN = "2.6.1"
SEED = 0x48454D41  # "HEMA"
PMTU = 256          # path MTU of the multi-packet examples (FIRST / MIDDLE carry exactly PMTU)
PCAP_EPOCH = 1767225600  # 2026-01-01T00:00:00Z; frame i of a pcap is stamped EPOCH + i seconds

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_OUT = os.path.join(REPO, "tests", "data", "vectors")


class GenError(Exception):
    pass


def need(cond, msg):
    if not cond:
        raise GenError(msg)


# ----------------------------------------------------------------------------------------------
# Part 1: an ICRC written from the RoCEv2 description (ROCEV2.md section 5 / IBTA Annex A17),
# independent of scapy, of zlib and of the Rust model (hematite_model::icrc).
# ----------------------------------------------------------------------------------------------
POLY_NORMAL = 0x04C11DB7


def reflect(value, width):
    out = 0
    for i in range(width):
        if value >> i & 1:
            out |= 1 << (width - 1 - i)
    return out


def crc32_msb_first(data):
    """CRC-32/IEEE computed in the non-reflected (MSB-first) form: every input byte is bit
    reversed, the register shifts left with the normal polynomial, and the result is reversed
    and inverted. Mathematically equal to the usual reflected CRC-32, but a separate code path."""
    reg = 0xFFFFFFFF
    for byte in data:
        reg ^= reflect(byte, 8) << 24
        for _ in range(8):
            if reg & 0x80000000:
                reg = ((reg << 1) ^ POLY_NORMAL) & 0xFFFFFFFF
            else:
                reg = (reg << 1) & 0xFFFFFFFF
    return reflect(reg, 32) ^ 0xFFFFFFFF


class Geometry:
    """Header positions read from the frame bytes (no scapy)."""

    def __init__(self, frame):
        need(len(frame) >= 14, "frame shorter than an Ethernet header")
        ethertype = struct.unpack_from(">H", frame, 12)[0]
        self.l3 = 14
        if ethertype == 0x8100:
            ethertype = struct.unpack_from(">H", frame, 16)[0]
            self.l3 = 18
        if ethertype == 0x0800:
            self.v6 = False
            ihl = frame[self.l3] & 0x0F
            need(ihl == 5, "IPv4 options are not generated")
            self.udp = self.l3 + 20
            self.end = self.l3 + struct.unpack_from(">H", frame, self.l3 + 2)[0]
        elif ethertype == 0x86DD:
            self.v6 = True
            self.udp = self.l3 + 40
            self.end = self.udp + struct.unpack_from(">H", frame, self.l3 + 4)[0]
        else:
            raise GenError("EtherType %#06x is not IP" % ethertype)
        self.bth = self.udp + 8
        self.icrc = self.end - 4
        need(self.bth + 12 <= self.icrc <= len(frame) - 4, "lengths do not fit the frame")

    def key(self):
        return (self.l3, self.v6, self.udp, self.end)


def invariant_mask(geo):
    """{offset from the IP header: OR mask} for the variant fields (set to ones in the CRC input)."""
    m = {}
    if geo.v6:
        m[0] = 0x0F          # traffic class, upper nibble (low nibble of byte 0)
        m[1] = 0xFF          # traffic class, lower nibble + flow label bits 19:16
        m[2] = 0xFF          # flow label
        m[3] = 0xFF          # flow label
        m[7] = 0xFF          # hop limit
    else:
        m[1] = 0xFF          # TOS (DSCP + ECN)
        m[8] = 0xFF          # TTL
        m[10] = 0xFF         # header checksum
        m[11] = 0xFF
    u = geo.udp - geo.l3
    m[u + 6] = 0xFF          # UDP checksum
    m[u + 7] = 0xFF
    m[u + 8 + 4] = 0xFF      # BTH byte 4: FECN, BECN, Resv6
    return m


def masked_stream(frame, geo):
    covered = bytearray(frame[geo.l3:geo.icrc])
    for off, bits in invariant_mask(geo).items():
        covered[off] |= bits
    return b"\xff" * 8 + bytes(covered)


def icrc_bitwise(frame):
    geo = Geometry(frame)
    return struct.pack("<I", crc32_msb_first(masked_stream(frame, geo)))


def icrc_zlib(frame):
    geo = Geometry(frame)
    return struct.pack("<I", zlib.crc32(masked_stream(frame, geo)) & 0xFFFFFFFF)


def residue_ok(frame):
    """CRC over the masked stream including the stored ICRC gives the CRC-32 residue."""
    geo = Geometry(frame)
    return zlib.crc32(masked_stream(frame, geo) + frame[geo.icrc:geo.end]) == 0x2144DF1C


def ones_sum(data):
    if len(data) % 2:
        data += b"\x00"
    s = sum(struct.unpack(">%dH" % (len(data) // 2), data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return s


def ipv4_header_ok(frame, geo):
    return ones_sum(frame[geo.l3:geo.l3 + 20]) == 0xFFFF


def udp_checksum_ok(frame, geo):
    """True when the UDP checksum is 0 (not used) or verifies over the pseudo header."""
    if struct.unpack_from(">H", frame, geo.udp + 6)[0] == 0:
        return True
    udp = frame[geo.udp:geo.end]
    if geo.v6:
        pseudo = frame[geo.l3 + 8:geo.l3 + 40] + struct.pack(">IxxxB", len(udp), 17)
    else:
        pseudo = frame[geo.l3 + 12:geo.l3 + 20] + struct.pack(">xBH", 17, len(udp))
    return ones_sum(pseudo + udp) == 0xFFFF


def load_project_checker():
    """tests/tools/roce_icrc.py (the project's ICRC checker, written separately again) when it
    is there: its icrc_of(frame) -> (computed, stored) or None is a further cross-check. It does
    not change the output."""
    path = os.path.join(REPO, "tests", "tools", "roce_icrc.py")
    if not os.path.isfile(path):
        return None
    import importlib.util
    spec = importlib.util.spec_from_file_location("hematite_roce_icrc", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return getattr(mod, "icrc_of", None)


PROJECT_CHECKER = load_project_checker()
CHECKER_STATS = {"agree": 0, "not_roce": 0}


def project_checker_agrees(name, frame, expect):
    """Compare tests/tools/roce_icrc.py's recomputed ICRC with `expect` (None: skipped)."""
    if PROJECT_CHECKER is None:
        return
    r = PROJECT_CHECKER(frame)
    if r is None:
        CHECKER_STATS["not_roce"] += 1
        return
    need(r[0] == expect, "%s: tests/tools/roce_icrc.py computes %s, generator %s"
         % (name, r[0].hex(), expect.hex()))
    CHECKER_STATS["agree"] += 1


# ----------------------------------------------------------------------------------------------
# Part 2: frames built with scapy.
# ----------------------------------------------------------------------------------------------
def import_scapy():
    import scapy
    if scapy.VERSION != SCAPY_PIN:
        raise GenError("scapy %s found, %s required (pip install scapy==%s): other versions may "
                       "decode fields differently, so the output would not compare byte for byte"
                       % (scapy.VERSION, SCAPY_PIN, SCAPY_PIN))
    from scapy.config import conf
    conf.verb = 0
    return scapy


try:
    scapy = import_scapy()
except (GenError, ImportError) as _e:
    print("gen_vectors: FAILED: %s" % _e, file=sys.stderr)
    sys.exit(2)
from scapy.compat import raw  # noqa: E402
from scapy.contrib.roce import BTH, CNPPadding  # noqa: E402,F401  (importing binds UDP 4791 -> BTH)
from scapy.fields import IntField, XBitField, XByteField, XIntField, XLongField  # noqa: E402
from scapy.layers.inet import IP, UDP  # noqa: E402
from scapy.layers.inet6 import IPv6  # noqa: E402
from scapy.layers.l2 import Dot1Q, Ether  # noqa: E402
from scapy.packet import NoPayload, Packet, Raw  # noqa: E402
from scapy.utils import PcapWriter, rdpcap  # noqa: E402


# Extension headers scapy.contrib.roce lacks. They are used to build frames only and are not
# bound for dissection, so the decoded "fields" keep scapy's own view (bytes after the BTH, or
# after the AETH of an ACKNOWLEDGE, are "payload_hex").
class RETH(Packet):
    name = "RETH"
    fields_desc = [XLongField("va", 0), XIntField("rkey", 0), IntField("dma_len", 0)]


class AtomicETH(Packet):
    name = "AtomicETH"
    fields_desc = [XLongField("va", 0), XIntField("rkey", 0), XLongField("swap_add", 0),
                   XLongField("compare", 0)]


class AETHx(Packet):
    name = "AETHx"
    fields_desc = [XByteField("syndrome", 0), XBitField("msn", 0, 24)]


class AtomicAckETH(Packet):
    name = "AtomicAckETH"
    fields_desc = [XLongField("orig", 0)]


class DETH(Packet):
    name = "DETH"
    fields_desc = [XIntField("qkey", 0), XByteField("resv", 0), XBitField("src_qp", 0, 24)]


class Word(Packet):
    """ImmDt or IETH: one 32-bit word."""
    name = "Word"
    fields_desc = [XIntField("value", 0)]


class Rng:
    """xorshift64* with a fixed seed: payload bytes that do not depend on Python's random."""

    def __init__(self, seed):
        self.s = seed or 1

    def next(self):
        x = self.s
        x ^= (x >> 12)
        x ^= (x << 25) & 0xFFFFFFFFFFFFFFFF
        x ^= (x >> 27)
        self.s = x
        return (x * 0x2545F4914F6CDD1D) & 0xFFFFFFFFFFFFFFFF

    def bytes(self, n):
        return bytes(self.next() >> 56 for _ in range(n))


RNG = Rng(SEED)

MAC_A, MAC_B = "02:48:4d:00:00:01", "02:48:4d:00:00:02"
IP4_A, IP4_B = "10.20.0.1", "10.20.0.2"
IP6_A, IP6_B = "fd48:4d00:20::1", "fd48:4d00:20::2"


class V:
    """One positive vector: opcode, BTH fields, extension headers, payload, and the outer
    headers' variations. build(v6) returns the scapy packet."""

    def __init__(self, name, desc, op, payload=b"", ext=(), se=0, migreq=0, ackreq=0,
                 pkey=0xFFFF, becn=0, dqpn=0x000101, psn=0, dscp=26, ecn=2, ttl=64,
                 ip_id=0x4D01, df=True, fl=0x4D2A1, sport=0xC0DE, udp_csum=False, vlan=None,
                 cnp=False):
        self.__dict__.update(locals())
        del self.__dict__["self"]

    def build(self, v6):
        pad = (-len(self.payload)) & 3
        tos = self.dscp << 2 | self.ecn
        pkt = Ether(src=MAC_A, dst=MAC_B)
        if self.vlan is not None:
            prio, dei, vid = self.vlan
            pkt = pkt / Dot1Q(prio=prio, dei=dei, vlan=vid)
        if v6:
            pkt = pkt / IPv6(src=IP6_A, dst=IP6_B, tc=tos, fl=self.fl, hlim=self.ttl)
        else:
            pkt = pkt / IP(src=IP4_A, dst=IP4_B, tos=tos, ttl=self.ttl, id=self.ip_id,
                           flags="DF" if self.df else 0)
        pkt = pkt / UDP(sport=self.sport, dport=4791, chksum=None if self.udp_csum else 0)
        bth = BTH(opcode=self.op, solicited=self.se, migreq=self.migreq, padcount=pad,
                  pkey=self.pkey, becn=self.becn, dqpn=self.dqpn, ackreq=self.ackreq,
                  psn=self.psn)
        stack = bth
        if self.cnp:
            stack = stack / CNPPadding()
        for h in self.ext:
            stack = stack / h
        data = self.payload + b"\x00" * pad
        if data:
            stack = stack / Raw(data)
        return pkt / stack


def p(n):
    return RNG.bytes(n)


def aeth(syn, msn):
    return AETHx(syndrome=syn, msn=msn)


def vectors():
    """The positive set (built once for IPv4 and once for IPv6)."""
    ACK_A = dict(dqpn=0x000202)
    return [
        # ---- RC SEND (0x00-0x05) -------------------------------------------------------------
        V("rc_send_first", "RC SEND_FIRST, PMTU payload", 0x00, p(PMTU), psn=0x000500),
        V("rc_send_middle", "RC SEND_MIDDLE, PMTU payload", 0x01, p(PMTU), psn=0x000501),
        V("rc_send_last", "RC SEND_LAST, 37 B + 3 B pad, SE and AckReq", 0x02, p(37),
          se=1, ackreq=1, psn=0x000502),
        V("rc_send_last_imm", "RC SEND_LAST_WITH_IMMEDIATE, 2 B + 2 B pad", 0x03, p(2),
          ext=[Word(value=0xA5A55A5A)], se=1, ackreq=1, psn=0x000503),
        V("rc_send_only", "RC SEND_ONLY, 29 B + 3 B pad, SE and AckReq", 0x04,
          b"Hematite RoCEv2 SEND_ONLY 29B", se=1, ackreq=1, psn=0x000100),
        V("rc_send_only_1b", "RC SEND_ONLY, 1 B + 3 B pad", 0x04, b"\x7e", ackreq=1,
          psn=0x000101),
        V("rc_send_only_2b", "RC SEND_ONLY, 2 B + 2 B pad", 0x04, p(2), ackreq=1, psn=0x000102),
        V("rc_send_only_3b", "RC SEND_ONLY, 3 B + 1 B pad", 0x04, p(3), ackreq=1, psn=0x000103),
        V("rc_send_only_4b", "RC SEND_ONLY, 4 B, no pad", 0x04, p(4), ackreq=1, psn=0x000104),
        V("rc_send_only_imm", "RC SEND_ONLY_WITH_IMMEDIATE, 12 B", 0x05, p(12),
          ext=[Word(value=0xDEADBEEF)], se=1, ackreq=1, psn=0x000105),
        V("rc_send_only_imm_empty", "RC SEND_ONLY_WITH_IMMEDIATE, zero-length message", 0x05,
          ext=[Word(value=0x00000001)], ackreq=1, psn=0x000106),
        # ---- RC RDMA WRITE (0x06-0x0B) -------------------------------------------------------
        V("rc_write_first", "RC RDMA_WRITE_FIRST (RETH), PMTU payload", 0x06, p(PMTU),
          ext=[RETH(va=0x00007F4D00010000, rkey=0x4D0000A1, dma_len=2 * PMTU + 255)],
          dqpn=0x000303, psn=0x000200),
        V("rc_write_middle", "RC RDMA_WRITE_MIDDLE, PMTU payload", 0x07, p(PMTU),
          dqpn=0x000303, psn=0x000201),
        V("rc_write_last", "RC RDMA_WRITE_LAST, 255 B + 1 B pad", 0x08, p(255),
          dqpn=0x000303, ackreq=1, psn=0x000202),
        V("rc_write_last_imm", "RC RDMA_WRITE_LAST_WITH_IMMEDIATE, 200 B", 0x09, p(200),
          ext=[Word(value=0x01020304)], se=1, dqpn=0x000303, ackreq=1, psn=0x000203),
        V("rc_write_only_psn_wrap", "RC RDMA_WRITE_ONLY (RETH), 6 B + 2 B pad, PSN 0xFFFFFF",
          0x0A, p(6), ext=[RETH(va=0x1000, rkey=0x00000101, dma_len=6)], dqpn=0x000303,
          ackreq=1, psn=0xFFFFFF),
        V("rc_write_only_empty", "RC RDMA_WRITE_ONLY (RETH), zero-length write", 0x0A,
          ext=[RETH(va=0, rkey=0x00000102, dma_len=0)], dqpn=0x000303, ackreq=1, psn=0x000000),
        V("rc_write_only_imm", "RC RDMA_WRITE_ONLY_WITH_IMMEDIATE (RETH+ImmDt), 33 B + 3 B pad",
          0x0B, p(33), ext=[RETH(va=0x00007F4D00020008, rkey=0x4D0000A2, dma_len=33),
                            Word(value=0xCAFEF00D)], se=1, dqpn=0x000303, ackreq=1,
          psn=0x000204),
        V("rc_write_only_imm_1023", "RC RDMA_WRITE_ONLY_WITH_IMMEDIATE, 1023 B + 1 B pad "
          "(PMTU 1024)", 0x0B, p(1023), ext=[RETH(va=0x00007F4D00030000, rkey=0x4D0000A3,
                                                    dma_len=1023), Word(value=0x0000FFFF)],
          dqpn=0x000303, ackreq=1, psn=0x000205),
        # ---- RC RDMA READ (0x0C-0x10) --------------------------------------------------------
        V("rc_read_req", "RC RDMA_READ_REQUEST (RETH), 612 B = 3 response packets", 0x0C,
          ext=[RETH(va=0x00007F4D00040000, rkey=0x4D0000B1, dma_len=2 * PMTU + 100)],
          dqpn=0x000404, ackreq=1, psn=0x000300),
        V("rc_read_resp_first", "RC RDMA_READ_RESPONSE_FIRST (AETH), PMTU payload", 0x0D,
          p(PMTU), ext=[aeth(0x1F, 0x000011)], psn=0x000300, **ACK_A),
        V("rc_read_resp_middle", "RC RDMA_READ_RESPONSE_MIDDLE, PMTU payload", 0x0E, p(PMTU),
          psn=0x000301, **ACK_A),
        V("rc_read_resp_last", "RC RDMA_READ_RESPONSE_LAST (AETH), 100 B", 0x0F, p(100),
          ext=[aeth(0x1F, 0x000011)], psn=0x000302, **ACK_A),
        V("rc_read_resp_only", "RC RDMA_READ_RESPONSE_ONLY (AETH), 5 B + 3 B pad", 0x10, p(5),
          ext=[aeth(0x1F, 0x000012)], psn=0x000303, **ACK_A),
        V("rc_read_resp_only_empty", "RC RDMA_READ_RESPONSE_ONLY (AETH), zero-length read",
          0x10, ext=[aeth(0x1F, 0x000013)], psn=0x000304, **ACK_A),
        # ---- RC ACKNOWLEDGE (0x11) -----------------------------------------------------------
        V("rc_ack", "RC ACKNOWLEDGE, AETH 0x1F (ACK, credits not reported)", 0x11,
          ext=[aeth(0x1F, 0x000005)], psn=0x000100, **ACK_A),
        V("rc_ack_credits", "RC ACKNOWLEDGE, AETH 0x0A (ACK, 32 credits)", 0x11,
          ext=[aeth(0x0A, 0x000006)], psn=0x000101, **ACK_A),
        V("rc_nak_psn_seq", "RC ACKNOWLEDGE, AETH 0x60 (NAK PSN sequence error)", 0x11,
          ext=[aeth(0x60, 0x000006)], psn=0x000201, **ACK_A),
        V("rc_rnr_nak", "RC ACKNOWLEDGE, AETH 0x2E (RNR NAK, timer code 14)", 0x11,
          ext=[aeth(0x2E, 0x000006)], psn=0x000102, **ACK_A),
        V("rc_nak_invalid_req", "RC ACKNOWLEDGE, AETH 0x61 (NAK invalid request)", 0x11,
          ext=[aeth(0x61, 0x000006)], psn=0x000103, **ACK_A),
        V("rc_nak_remote_access", "RC ACKNOWLEDGE, AETH 0x62 (NAK remote access error)", 0x11,
          ext=[aeth(0x62, 0x000006)], psn=0x000300, **ACK_A),
        V("rc_nak_remote_op", "RC ACKNOWLEDGE, AETH 0x63 (NAK remote operational error)", 0x11,
          ext=[aeth(0x63, 0xFFFFFF)], psn=0xFFFFFF, **ACK_A),
        # ---- RC atomics (0x12-0x14) ----------------------------------------------------------
        V("rc_atomic_ack", "RC ATOMIC_ACKNOWLEDGE (AETH+AtomicAckETH)", 0x12,
          ext=[aeth(0x1F, 0x000009), AtomicAckETH(orig=0x5555666677778888)], psn=0x000400,
          **ACK_A),
        V("rc_cmp_swap", "RC COMPARE_SWAP (AtomicETH)", 0x13,
          ext=[AtomicETH(va=0x00007F4D00050008, rkey=0x4D0000C1, swap_add=0x1111222233334444,
                         compare=0x5555666677778888)], dqpn=0x000505, ackreq=1, psn=0x000400),
        V("rc_fetch_add", "RC FETCH_ADD (AtomicETH), add 1, compare unused", 0x14,
          ext=[AtomicETH(va=0x00007F4D00050010, rkey=0x4D0000C1, swap_add=1, compare=0)],
          dqpn=0x000505, ackreq=1, psn=0x000401),
        # ---- RC SEND with invalidate (0x16, 0x17) --------------------------------------------
        V("rc_send_last_inv", "RC SEND_LAST_WITH_INVALIDATE (IETH), 10 B + 2 B pad", 0x16,
          p(10), ext=[Word(value=0x4D0000D1)], se=1, ackreq=1, psn=0x000504),
        V("rc_send_only_inv", "RC SEND_ONLY_WITH_INVALIDATE (IETH), 3 B + 1 B pad", 0x17,
          p(3), ext=[Word(value=0x4D0000D2)], ackreq=1, psn=0x000107),
        # ---- UC ------------------------------------------------------------------------------
        V("uc_send_first", "UC SEND_FIRST, PMTU payload", 0x20, p(PMTU), dqpn=0x000606,
          psn=0x000010),
        V("uc_send_last_imm", "UC SEND_LAST_WITH_IMMEDIATE, 7 B + 1 B pad", 0x23, p(7),
          ext=[Word(value=0x00C0FFEE)], se=1, dqpn=0x000606, psn=0x000011),
        V("uc_send_only_migreq", "UC SEND_ONLY, MigReq=1, 20 B", 0x24, p(20), migreq=1,
          dqpn=0x000606, psn=0xCF1610),
        V("uc_write_only_imm", "UC RDMA_WRITE_ONLY_WITH_IMMEDIATE (RETH+ImmDt), 64 B", 0x2B,
          p(64), ext=[RETH(va=0x00007F4D00060000, rkey=0x4D0000E1, dma_len=64),
                      Word(value=0x12345678)], dqpn=0x000606, psn=0x000012),
        # ---- UD ------------------------------------------------------------------------------
        V("ud_send_only", "UD SEND_ONLY (DETH), 11 B + 1 B pad", 0x64, p(11),
          ext=[DETH(qkey=0x11111111, src_qp=0x000707)], dqpn=0x000708, psn=0x000020),
        V("ud_send_only_imm_gsi", "UD SEND_ONLY_WITH_IMMEDIATE (DETH+ImmDt) to QP1, GSI Q_Key, "
          "PMTU payload", 0x65, p(PMTU), ext=[DETH(qkey=0x80010000, src_qp=0x000001),
                                              Word(value=0xFEEDFACE)], dqpn=0x000001,
          psn=0x000021),
        # ---- CNP -----------------------------------------------------------------------------
        V("cnp", "CNP (opcode 0x81, BECN=1, 16 reserved bytes), DSCP 48 not-ECT", 0x81,
          cnp=True, becn=1, dqpn=0x000303, dscp=48, ecn=0, sport=0xC0DE),
        V("cnp_sport0_ect0", "CNP with UDP source port 0 and ECT(0) (as some NICs send it)",
          0x81, cnp=True, becn=1, dqpn=0x000505, dscp=48, ecn=2, sport=0),
        # ---- outer-header variations ---------------------------------------------------------
        V("rc_send_only_vlan", "RC SEND_ONLY over 802.1Q VID 100 PCP 3 (tag not in the ICRC)",
          0x04, p(11), ackreq=1, psn=0x000108, vlan=(3, 0, 100)),
        V("rc_write_first_vlan_dei", "RC RDMA_WRITE_FIRST over 802.1Q VID 4094 PCP 7 DEI 1",
          0x06, p(PMTU), ext=[RETH(va=0x00007F4D00070000, rkey=0x4D0000A4, dma_len=PMTU * 2)],
          dqpn=0x000303, psn=0x000210, vlan=(7, 1, 4094)),
        V("cnp_vlan", "CNP over 802.1Q VID 1 PCP 6", 0x81, cnp=True, becn=1, dqpn=0x000101,
          dscp=48, ecn=0, vlan=(6, 0, 1)),
        V("rc_send_only_udp_csum", "RC SEND_ONLY with a computed (non-zero) UDP checksum",
          0x04, p(20), ackreq=1, psn=0x000109, udp_csum=True),
        V("rc_ack_udp_csum", "RC ACKNOWLEDGE with a computed (non-zero) UDP checksum", 0x11,
          ext=[aeth(0x1F, 0x000007)], psn=0x00010A, udp_csum=True, **ACK_A),
        V("rc_send_only_ecn_ce", "RC SEND_ONLY marked CE (ECN 11) by a switch", 0x04, p(50),
          ackreq=1, psn=0x00010B, ecn=3),
        V("rc_send_only_misc_hdr", "RC SEND_ONLY, DSCP 0 not-ECT, TTL/hop limit 1, IPv4 DF=0 "
          "and ID 0, flow label 0, P_Key 0x7FFF, sport 0xFFFF", 0x04, p(9), ackreq=1,
          psn=0x00010C, dscp=0, ecn=0, ttl=1, ip_id=0, df=False, fl=0, pkey=0x7FFF,
          sport=0xFFFF),
        V("rc_send_only_ttl255", "RC SEND_ONLY, TTL/hop limit 255, DSCP 63, flow label 0xFFFFF",
          0x04, p(30), ackreq=1, psn=0x00010D, dscp=63, ecn=1, ttl=255, ip_id=0xFFFF,
          fl=0xFFFFF, dqpn=0xFFFFFF),
        V("rc_send_only_pmtu4096", "RC SEND_ONLY with a 4096 B payload (PMTU 4096, jumbo frame)",
          0x04, p(4096), se=1, ackreq=1, psn=0x00010E),
    ]


# ----------------------------------------------------------------------------------------------
# Part 2b: one frame per receive rule (docs/packet-path.md, "Receive checks"): each is built by
# scapy, then edited in its raw bytes so that exactly that rule fails; the IPv4 header checksum
# and the ICRC are then recomputed (the ICRC by the bitwise implementation above, cross-checked
# with zlib and tests/tools/roce_icrc.py), so that no earlier check drops it first.
# `rule` is the receive path's drop reason (hematite_model::DropReason::name()).
# ----------------------------------------------------------------------------------------------
def set16(f, off, v):
    f[off:off + 2] = struct.pack(">H", v & 0xFFFF)


def get16(f, off):
    return struct.unpack_from(">H", f, off)[0]


def resize(f, delta):
    """Insert (delta > 0: bytes 0xA5..) or remove (delta < 0) bytes just before the ICRC and
    move the IP and UDP lengths with them."""
    g = Geometry(bytes(f))
    if delta > 0:
        f[g.icrc:g.icrc] = bytes((0xA5 + i) & 0xFF for i in range(delta))
    else:
        del f[g.icrc + delta:g.icrc]
    set16(f, g.l3 + (4 if g.v6 else 2), get16(f, g.l3 + (4 if g.v6 else 2)) + delta)
    set16(f, g.udp + 4, get16(f, g.udp + 4) + delta)


def refix(f, name):
    """IPv4 header checksum and ICRC recomputed after an edit; the ICRC three ways."""
    g = Geometry(bytes(f))
    if not g.v6:
        set16(f, g.l3 + 10, 0)
        set16(f, g.l3 + 10, 0xFFFF - ones_sum(bytes(f[g.l3:g.l3 + 20])))
    b = icrc_bitwise(bytes(f))
    need(b == icrc_zlib(bytes(f)), name + ": bitwise and zlib ICRC disagree")
    f[g.icrc:g.end] = b
    need(residue_ok(bytes(f)), name + ": CRC residue after the fix")
    project_checker_agrees(name, bytes(f), b)


def rule_cases():
    """(name, rule, description, source, edit(frame) -> frame, base vector)"""
    def bth_byte(i, fn):
        def edit(f):
            g = Geometry(bytes(f))
            f[g.bth + i] = fn(f[g.bth + i])
            return f
        return edit

    def pkey(v):
        def edit(f):
            g = Geometry(bytes(f))
            set16(f, g.bth + 2, v)
            return f
        return edit

    def grow(d):
        def edit(f):
            resize(f, d)
            return f
        return edit

    def strip_pad(f):
        g = Geometry(bytes(f))
        pad = f[g.bth + 1] >> 4 & 3
        f[g.bth + 1] &= 0xCF
        resize(f, -pad)
        return f

    def udp_len(d):
        def edit(f):
            g = Geometry(bytes(f))
            set16(f, g.udp + 4, get16(f, g.udp + 4) + d)
            return f
        return edit

    src_pad = "IBTA Vol 1 9.2 / 9.3.1.5 (PadCnt: pad bytes align the payload to 4 bytes)"
    src_pmtu = "IBTA Vol 1 9.6.1.1 (packet length checks), ROCEV2.md 2"
    send_only = lambda n: V("x", "", 0x04, p(n), ackreq=1, psn=0x000700)
    return [
        ("misaligned_send_only", "misaligned", "RC SEND_ONLY, 5 B payload without its 3 pad "
         "bytes: payload + pad is not a multiple of 4", src_pad, strip_pad, send_only(5)),
        ("misaligned_write_last", "misaligned", "RC RDMA_WRITE_LAST, 2 B payload + 2 pad, then "
         "one byte more before the ICRC", src_pad, grow(1),
         V("x", "", 0x08, p(2), dqpn=0x000303, ackreq=1, psn=0x000701)),
        ("pad_send_first", "pad_not_last", "RC SEND_FIRST with PadCnt 1 (only the last or only "
         "packet of a message may carry pad)", src_pad, bth_byte(1, lambda b: b | 0x10),
         V("x", "", 0x00, p(PMTU), psn=0x000702)),
        ("pad_write_middle", "pad_not_last", "RC RDMA_WRITE_MIDDLE with PadCnt 2", src_pad,
         bth_byte(1, lambda b: b | 0x20), V("x", "", 0x07, p(PMTU), dqpn=0x000303, psn=0x000703)),
        ("pad_read_resp_middle", "pad_not_last", "RC RDMA_READ_RESPONSE_MIDDLE with PadCnt 3",
         src_pad, bth_byte(1, lambda b: b | 0x30), V("x", "", 0x0E, p(PMTU), dqpn=0x000202,
                                                     psn=0x000704)),
        ("pad_uc_send_middle", "pad_not_last", "UC SEND_MIDDLE with PadCnt 1", src_pad,
         bth_byte(1, lambda b: b | 0x10), V("x", "", 0x21, p(PMTU), dqpn=0x000606, psn=0x000705)),
        ("too_long_send_only", "too_long", "RC SEND_ONLY with a 4100 B payload (the largest "
         "PMTU is 4096)", src_pmtu, lambda f: f, send_only(4100)),
        ("too_long_write_only", "too_long", "RC RDMA_WRITE_ONLY with an 8192 B payload",
         src_pmtu, lambda f: f, V("x", "", 0x0A, p(8192), ext=[RETH(va=0x1000, rkey=0x101,
                                                                    dma_len=8192)],
                                  dqpn=0x000303, ackreq=1, psn=0x000706)),
        ("pkey_other_partition", "bad_pkey", "RC SEND_ONLY with P_Key 0x8001 (the port's is "
         "0xFFFF)", "IBTA Vol 1 9.6.1.4 / 10.9 (P_Key check)", pkey(0x8001), send_only(16)),
        ("pkey_zero", "bad_pkey", "RC ACKNOWLEDGE with P_Key 0x0000 (invalid partition)",
         "IBTA Vol 1 10.9.1 (P_Key 0 is invalid)", pkey(0x0000),
         V("x", "", 0x11, ext=[aeth(0x1F, 0x000001)], dqpn=0x000202, psn=0x000707)),
        ("tver_1", "tver", "RC SEND_ONLY with TVer 1", "IBTA Vol 1 9.2 / 9.6.1.1 (TVer must be "
         "0)", bth_byte(1, lambda b: b | 0x01), send_only(16)),
        ("ack_with_payload", "length", "RC ACKNOWLEDGE followed by 4 payload bytes (no-payload "
         "opcode)", src_pmtu, grow(4),
         V("x", "", 0x11, ext=[aeth(0x1F, 0x000002)], dqpn=0x000202, psn=0x000708)),
        ("read_req_with_payload", "length", "RC RDMA_READ_REQUEST followed by 8 payload bytes",
         src_pmtu, grow(8), V("x", "", 0x0C, ext=[RETH(va=0x2000, rkey=0x102, dma_len=64)],
                              dqpn=0x000404, ackreq=1, psn=0x000709)),
        ("fetch_add_with_payload", "length", "RC FETCH_ADD followed by 4 payload bytes",
         src_pmtu, grow(4), V("x", "", 0x14, ext=[AtomicETH(va=0x3000, rkey=0x103, swap_add=1,
                                                            compare=0)],
                              dqpn=0x000505, ackreq=1, psn=0x00070A)),
        ("atomic_ack_with_payload", "length", "RC ATOMIC_ACKNOWLEDGE followed by 4 bytes",
         src_pmtu, grow(4), V("x", "", 0x12, ext=[aeth(0x1F, 0x3), AtomicAckETH(orig=7)],
                              dqpn=0x000202, psn=0x00070B)),
        ("cnp_short", "length", "CNP with 12 of its 16 reserved bytes", src_pmtu, grow(-4),
         V("x", "", 0x81, cnp=True, becn=1, dqpn=0x000303, dscp=48, ecn=0)),
        ("reth_truncated", "length", "RC RDMA_WRITE_ONLY whose RETH is cut to 8 bytes", src_pmtu,
         grow(-8), V("x", "", 0x0A, ext=[RETH(va=0x4000, rkey=0x104, dma_len=0)],
                     dqpn=0x000303, ackreq=1, psn=0x00070C)),
        ("atomic_eth_truncated", "length", "RC COMPARE_SWAP whose AtomicETH is cut to 24 bytes",
         src_pmtu, grow(-4), V("x", "", 0x13, ext=[AtomicETH(va=0x5000, rkey=0x105, swap_add=2,
                                                             compare=3)],
                               dqpn=0x000505, ackreq=1, psn=0x00070D)),
        ("udp_len_short", "length", "RC SEND_ONLY whose UDP length is 4 less than the IP "
         "length implies", src_pmtu, udp_len(-4), send_only(16)),
        ("udp_len_long", "length", "RC SEND_ONLY whose UDP length is 4 more than the IP length "
         "implies", src_pmtu, udp_len(4), send_only(16)),
    ]


def rule_records(v6, start):
    fam = "ipv6" if v6 else "ipv4"
    frames, recs = [], []
    for name, rule, desc, source, edit, base in rule_cases():
        full = "%s_rule_%s" % (fam, name)
        f = edit(bytearray(raw(base.build(v6))))
        refix(f, full)
        f = bytes(f)
        need(len(f) >= 60, full + ": shorter than 60 bytes")
        frames.append(f)
        recs.append({"name": full, "family": fam, "rule": rule, "description": desc,
                     "source": source, "pcap": "rocev2_rules.pcap",
                     "frame": start + len(frames), "length": len(f), "hex": f.hex()})
    return frames, recs


# ----------------------------------------------------------------------------------------------
# Part 3: JSON records.
# ----------------------------------------------------------------------------------------------
def jsonable(v):
    if isinstance(v, (bytes, bytearray)):
        return bytes(v).hex()
    if isinstance(v, bool) or v is None or isinstance(v, (int, str)):
        return v
    return str(v)


def decoded_fields(frame):
    """scapy's dissection of the frame: {layer name: {field: value}}, Raw bytes as payload_hex."""
    out = {}
    layer = Ether(frame)
    while layer is not None and not isinstance(layer, NoPayload):
        if isinstance(layer, Raw):
            out["payload_hex"] = bytes(layer.load).hex()
        else:
            need(layer.name not in out, "layer %s twice" % layer.name)
            out[layer.name] = {f.name: jsonable(layer.getfieldval(f.name))
                               for f in layer.fields_desc}
        layer = layer.payload
    need("BTH" in out, "scapy does not dissect a BTH")
    return out


def icrc_views(wire):
    return {"wire_hex": wire.hex(),
            "crc32_value": "0x%08x" % struct.unpack("<I", wire)[0],
            "wireshark_uint": "0x%08x" % struct.unpack(">I", wire)[0]}


def scapy_recompute(frame):
    """Dissect with scapy, clear the ICRC, rebuild: scapy's ICRC for these bytes, or None where
    scapy does not dissect a BTH (a flip moved the frame off UDP port 4791 / protocol 17) or the
    rebuild changes other bytes."""
    try:
        pkt = Ether(frame)
        if BTH not in pkt:
            return None
        pkt[BTH].icrc = None
        out = raw(pkt)
    except Exception:  # noqa: BLE001 - a flipped frame scapy cannot rebuild has no scapy verdict
        return None
    if len(out) != len(frame) or out[:-4] != frame[:-4]:
        return None
    return out[-4:]


def positive_record(v, v6, idx):
    fam = "ipv6" if v6 else "ipv4"
    pkt = v.build(v6)
    frame = raw(pkt)
    geo = Geometry(frame)
    name = "%s_%s" % (fam, v.name)
    need(geo.end == len(frame), name + ": frame has bytes after the IP datagram")
    need(len(frame) >= 60, name + ": shorter than the 60-byte Ethernet minimum (would need padding)")
    need(frame[geo.bth] == v.op, name + ": opcode")
    need(frame[geo.bth + 1] >> 4 & 3 == (-len(v.payload)) & 3, name + ": PadCnt")
    built = frame[geo.icrc:geo.end]
    bitwise = icrc_bitwise(frame)
    viaz = icrc_zlib(frame)
    reparse = scapy_recompute(frame)
    agree = built == bitwise == viaz == reparse
    need(agree, "%s: ICRC disagreement: scapy build %s, bitwise %s, zlib %s, scapy reparse %s"
         % (name, built.hex(), bitwise.hex(), viaz.hex(), reparse and reparse.hex()))
    need(residue_ok(frame), name + ": CRC residue")
    project_checker_agrees(name, frame, built)
    need(PROJECT_CHECKER is None or PROJECT_CHECKER(frame) is not None, name + ": not RoCEv2 to roce_icrc.py")
    need(v6 or ipv4_header_ok(frame, geo), name + ": IPv4 header checksum")
    need(udp_checksum_ok(frame, geo), name + ": UDP checksum")
    need((struct.unpack_from(">H", frame, geo.udp + 6)[0] != 0) == v.udp_csum,
         name + ": UDP checksum presence")
    return frame, {
        "name": name, "description": v.desc,
        "family": fam, "pcap": "rocev2_%s.pcap" % fam, "frame": idx + 1,
        "length": len(frame), "hex": frame.hex(), "fields": decoded_fields(frame),
        "icrc": icrc_views(built),
        "icrc_crosscheck": {"scapy_build": built.hex(), "scapy_reparse": reparse.hex(),
                            "bitwise_msb_first": bitwise.hex(), "zlib_masked": viaz.hex(),
                            "all_agree": agree},
    }


def flip_cases(frame):
    """(category, field, byte offset, bit) for one base frame. Every flip keeps the frame's
    geometry (EtherType, IP version/IHL, lengths), so the ICRC verdict is defined by the same
    byte ranges before and after the flip."""
    g = Geometry(frame)
    l3, u, b, e = g.l3, g.udp, g.bth, g.end
    c = []
    # Covered: the ICRC must fail.
    if g.v6:
        c += [("covered", "ipv6.next_header_lsb", l3 + 6, 0),
              ("covered", "ipv6.src_msb", l3 + 8, 7),
              ("covered", "ipv6.src_lsb", l3 + 23, 0),
              ("covered", "ipv6.dst_lsb", l3 + 39, 0)]
    else:
        c += [("covered", "ipv4.id_lsb", l3 + 5, 0),
              ("covered", "ipv4.flags_df", l3 + 6, 6),
              ("covered", "ipv4.protocol_lsb", l3 + 9, 0),
              ("covered", "ipv4.src_lsb", l3 + 15, 0),
              ("covered", "ipv4.dst_msb", l3 + 16, 7)]
    c += [("covered", "udp.sport_msb", u, 7),
          ("covered", "udp.sport_lsb", u + 1, 0),
          ("covered", "udp.dport_lsb", u + 3, 0),
          ("covered", "bth.opcode_msb", b, 7),
          ("covered", "bth.se", b + 1, 7),
          ("covered", "bth.migreq", b + 1, 6),
          ("covered", "bth.padcnt_lsb", b + 1, 4),
          ("covered", "bth.tver_lsb", b + 1, 0),
          ("covered", "bth.pkey_lsb", b + 3, 0),
          ("covered", "bth.destqp_msb", b + 5, 7),
          ("covered", "bth.destqp_lsb", b + 7, 0),
          ("covered", "bth.ackreq", b + 8, 7),
          ("covered", "bth.resv7_lsb", b + 8, 0),
          ("covered", "bth.psn_msb", b + 9, 7),
          ("covered", "bth.psn_lsb", b + 11, 0)]
    if g.icrc > b + 12:
        c += [("covered", "after_bth.first_byte_msb", b + 12, 7),
              ("covered", "before_icrc.last_byte_lsb", g.icrc - 1, 0)]
    c += [("covered", "icrc.first_wire_byte_lsb", g.icrc, 0),
          ("covered", "icrc.last_wire_byte_msb", e - 1, 7)]
    # Masked: the ICRC must still verify.
    if g.v6:
        c += [("masked", "ipv6.traffic_class_dscp_msb", l3, 3),
              ("masked", "ipv6.traffic_class_dscp_lsb", l3 + 1, 6),
              ("masked", "ipv6.traffic_class_ecn_msb", l3 + 1, 5),
              ("masked", "ipv6.traffic_class_ecn_lsb", l3 + 1, 4),
              ("masked", "ipv6.flow_label_msb", l3 + 1, 3),
              ("masked", "ipv6.flow_label_lsb", l3 + 3, 0),
              ("masked", "ipv6.hop_limit_msb", l3 + 7, 7),
              ("masked", "ipv6.hop_limit_lsb", l3 + 7, 0)]
    else:
        c += [("masked", "ipv4.tos_dscp_msb", l3 + 1, 7),
              ("masked", "ipv4.tos_dscp_lsb", l3 + 1, 2),
              ("masked", "ipv4.tos_ecn_msb", l3 + 1, 1),
              ("masked", "ipv4.tos_ecn_lsb", l3 + 1, 0),
              ("masked", "ipv4.ttl_msb", l3 + 8, 7),
              ("masked", "ipv4.ttl_lsb", l3 + 8, 0),
              ("masked", "ipv4.header_checksum_msb", l3 + 10, 7),
              ("masked", "ipv4.header_checksum_lsb", l3 + 11, 0)]
    c += [("masked", "udp.checksum_msb", u + 6, 7),
          ("masked", "udp.checksum_lsb", u + 7, 0),
          ("masked", "bth.fecn", b + 4, 7),
          ("masked", "bth.becn", b + 4, 6),
          ("masked", "bth.resv6_msb", b + 4, 5),
          ("masked", "bth.resv6_lsb", b + 4, 0)]
    # Not covered: outside IP..ICRC.
    c += [("not_covered", "eth.dst_msb", 0, 7),
          ("not_covered", "eth.dst_lsb", 5, 0),
          ("not_covered", "eth.src_msb", 6, 7),
          ("not_covered", "eth.src_lsb", 11, 0)]
    if l3 == 18:
        c += [("not_covered", "vlan.pcp_msb", 14, 7),
              ("not_covered", "vlan.dei", 14, 4),
              ("not_covered", "vlan.vid_msb", 14, 3),
              ("not_covered", "vlan.vid_lsb", 15, 0)]
    return c


NEGATIVE_BASES = ["rc_send_only", "rc_send_last_imm", "rc_write_first", "rc_write_only_imm",
                  "rc_read_req", "rc_read_resp_only", "rc_ack", "rc_atomic_ack", "rc_cmp_swap",
                  "rc_send_only_inv", "uc_send_only_migreq", "ud_send_only", "cnp",
                  "rc_send_only_vlan", "rc_send_only_udp_csum"]


def negative_record(base, cat, field, off, bit, idx):
    frame = bytearray(bytes.fromhex(base["hex"]))
    frame[off] ^= 1 << bit
    frame = bytes(frame)
    before = Geometry(bytes.fromhex(base["hex"]))
    geo = Geometry(frame)
    name = "%s__%s" % (base["name"], field.replace(".", "_"))
    need(geo.key() == before.key(), name + ": flip changed the geometry")
    stored = frame[geo.icrc:geo.end]
    bitwise = icrc_bitwise(frame)
    viaz = icrc_zlib(frame)
    sc = scapy_recompute(frame)
    valid = bitwise == stored
    expect = cat != "covered"
    agree = bitwise == viaz and (sc is None or sc == bitwise)
    need(agree, "%s: recomputed ICRCs disagree: bitwise %s zlib %s scapy %s"
         % (name, bitwise.hex(), viaz.hex(), sc and sc.hex()))
    need(valid == expect, "%s: labelled %s but ICRC valid=%s" % (name, cat, valid))
    need(residue_ok(frame) == valid, name + ": residue check disagrees")
    project_checker_agrees(name, frame, bitwise)
    return frame, {
        "name": name, "base": base["name"], "category": cat, "field": field,
        "byte_offset": off, "bit": bit, "pcap": "rocev2_negative.pcap", "frame": idx + 1,
        "hex": frame.hex(), "stored_icrc": stored.hex(),
        "recomputed_icrc_bitwise": bitwise.hex(), "recomputed_icrc_zlib": viaz.hex(),
        "recomputed_icrc_scapy": sc.hex() if sc is not None else None,
        "expect_icrc_valid": expect, "icrc_valid": valid, "pass": valid == expect and agree,
    }


def write_pcap(path, frames):
    w = PcapWriter(path, linktype=1, sync=True)
    try:
        for i, f in enumerate(frames):
            pkt = Ether(f)
            pkt.time = PCAP_EPOCH + i
            w.write(pkt)
    finally:
        w.close()
    back = [bytes(x) for x in rdpcap(path)]
    need(back == list(frames), path + ": pcap does not read back identically")


README = """\
# Hematite RoCEv2 test vectors (generated)

Generated by `tests/vectors/gen_vectors.py` with scapy {scapy}; do not edit by hand. Regenerate
with `python3 tests/vectors/gen_vectors.py`, check that the committed files are current with
`tests/vectors/check.sh`.

| File | What it holds |
|---|---|
| rocev2_ipv4.pcap | {n4} valid IPv4 frames |
| rocev2_ipv6.pcap | {n6} valid IPv6 frames (the same list over IPv6) |
| rocev2_negative.pcap | {nneg} single-bit flips of {nbase} of the valid frames |
| rocev2_rules.pcap | {nrules} frames, each failing exactly one receive rule (JSON `rules[]`: `rule` is the drop reason, `source` the rule's origin) |
| rocev2_vectors.json | every frame as hex with its decoded fields, ICRC and labels |

Valid frames: every RC opcode the engine supports, 0x00-0x14, 0x16, 0x17 (SEND first/middle/last/only, with immediate and with
invalidate, RDMA WRITE first/middle/last/only with and without immediate, READ request and the
four response kinds, ACK / NAK / RNR NAK, atomic ACK, compare-and-swap, fetch-and-add), UC SEND
and WRITE examples, UD SEND with and without immediate, CNPs, payloads from 0 to 4096 bytes with
every PadCnt, 802.1Q tags (with DEI), non-zero UDP checksums, ECN CE, edge values of TTL, DSCP,
flow label, P_Key, PSN and QPN. Multi-packet examples use a path MTU of {pmtu} bytes.

Every ICRC was filled in by scapy (`scapy.contrib.roce`) and agrees with a CRC-32 written
separately in the generator (bitwise, from the raw bytes) and with zlib over the same masked
stream; scapy re-dissecting the frame gives the same value again, and so does the project's
checker `tests/tools/roce_icrc.py` when it is present. The generator stops on any disagreement.

Negative frames carry one flipped bit and a `category` that is about the ICRC only:
`covered` (the ICRC no longer verifies), `masked` (a variant field: IPv4 TOS/TTL/header checksum,
IPv6 traffic class/flow label/hop limit, UDP checksum, BTH FECN/BECN/Resv6; the ICRC still
verifies) and `not_covered` (Ethernet addresses and the VLAN tag; the ICRC still verifies).
A receiver may still drop a masked frame for another reason: the IPv4 TOS, TTL and checksum
flips leave a wrong IPv4 header checksum ({nv4hdr} frames), and the UDP checksum flips leave a
wrong non-zero UDP checksum (RoCEv2 receivers need not check it). Flips of the UDP destination
port, IP protocol / next header and the opcode are covered flips that also stop the frame from
being RoCEv2 or supported; the `recomputed_icrc_scapy` of such frames is null (scapy no longer
dissects a BTH).

JSON layout: `meta` (generator, scapy version, ICRC conventions, counts), `positive[]` (`name`,
`description`, `family`, `pcap`, `frame` 1-based, `length`, `hex` = Ethernet frame without FCS,
`fields` = scapy's dissection with bytes after the BTH in `payload_hex` (pad included; scapy
dissects the AETH of an ACKNOWLEDGE and the CNP padding, other extension headers are part of
`payload_hex`), `icrc` (`wire_hex` = bytes on the wire, `crc32_value` = CRC-32 value, which is
the wire bytes read little-endian, `wireshark_uint` = wire bytes read big-endian), and
`icrc_crosscheck`), `reference_hw[]` (empty: hardware captures cannot be generated) and
`negative[]` (`base`, `category`, `field`, `byte_offset` from the frame start, `bit` 0 = LSB,
`hex`, `stored_icrc`, recomputed ICRCs, `expect_icrc_valid`, `icrc_valid`, `pass`).
"""


def generate(out):
    doc = {"meta": {
        "generator": "tests/vectors/gen_vectors.py (scapy %s, scapy.contrib.roce BTH ICRC)"
                     % scapy.VERSION,
        "scapy_version": scapy.VERSION,
        "payload_seed": "0x%08x" % SEED,
        "icrc_conventions": {
            "wire_hex": "the 4 ICRC bytes as transmitted (last 4 bytes of the UDP payload)",
            "crc32_value": "CRC-32/IEEE (reflected, init 0xFFFFFFFF, final xor 0xFFFFFFFF) of "
                           "8 x 0xFF followed by IP header..pad with the variant fields set to "
                           "ones; the wire bytes are this value least-significant byte first",
            "wireshark_uint": "the wire bytes read big-endian (what Wireshark prints)",
        },
        "pmtu_used": PMTU,
        "files": {},
    }, "positive": [], "reference_hw": [], "negative": []}

    pos_by_name = {}
    for fam, v6 in (("ipv4", False), ("ipv6", True)):
        frames = []
        for i, v in enumerate(vectors()):
            f, rec = positive_record(v, v6, i)
            frames.append(f)
            doc["positive"].append(rec)
            pos_by_name[rec["name"]] = rec
        write_pcap(os.path.join(out, "rocev2_%s.pcap" % fam), frames)
        doc["meta"]["files"]["rocev2_%s.pcap" % fam] = "%d positive %s frames" % (len(frames), fam)
    ops = {r["fields"]["BTH"]["opcode"] for r in doc["positive"]}
    rc_ops = set(range(0x00, 0x15)) | {0x16, 0x17}
    need(rc_ops <= ops, "RC opcodes without a vector: %s" % sorted(rc_ops - ops))
    need({0x64, 0x65, 0x81} <= ops, "UD / CNP opcodes missing")
    pads = {r["fields"]["BTH"]["padcount"] for r in doc["positive"]}
    need(pads == {0, 1, 2, 3}, "PadCnt values covered: %s" % sorted(pads))
    names = [r["name"] for r in doc["positive"]]
    need(len(set(names)) == len(names), "duplicate vector names")

    neg_frames = []
    for fam in ("ipv4", "ipv6"):
        for short in NEGATIVE_BASES:
            base = pos_by_name["%s_%s" % (fam, short)]
            for cat, field, off, bit in flip_cases(bytes.fromhex(base["hex"])):
                f, rec = negative_record(base, cat, field, off, bit, len(neg_frames))
                neg_frames.append(f)
                doc["negative"].append(rec)
    write_pcap(os.path.join(out, "rocev2_negative.pcap"), neg_frames)

    rule_frames = []
    doc["rules"] = []
    for v6 in (False, True):
        fr, recs = rule_records(v6, len(rule_frames))
        rule_frames += fr
        doc["rules"] += recs
    write_pcap(os.path.join(out, "rocev2_rules.pcap"), rule_frames)
    doc["meta"]["files"]["rocev2_rules.pcap"] = "%d frames, each failing one receive rule" % len(rule_frames)
    doc["meta"]["files"]["rocev2_negative.pcap"] = "%d single-bit-flip frames" % len(neg_frames)

    neg = doc["negative"]
    v4hdr = ("ipv4.tos", "ipv4.ttl", "ipv4.header_checksum")
    counts = {
        "positive": len(doc["positive"]),
        "positive_ipv4": sum(r["family"] == "ipv4" for r in doc["positive"]),
        "positive_ipv6": sum(r["family"] == "ipv6" for r in doc["positive"]),
        "reference_hw": 0,
        "negative": len(neg),
        "negative_bases": 2 * len(NEGATIVE_BASES),
        "covered": sum(n["category"] == "covered" for n in neg),
        "masked": sum(n["category"] == "masked" for n in neg),
        "not_covered": sum(n["category"] == "not_covered" for n in neg),
        "masked_ipv4_header": sum(n["category"] == "masked" and n["field"].startswith(v4hdr)
                                  for n in neg),
        "rules": len(doc["rules"]),
    }
    doc["meta"]["counts"] = counts
    ok = all(r["icrc_crosscheck"]["all_agree"] for r in doc["positive"]) and all(
        n["pass"] for n in neg)
    need(ok, "a check failed")
    doc["meta"]["all_checks_passed"] = ok

    with open(os.path.join(out, "rocev2_vectors.json"), "w", encoding="utf-8", newline="\n") as fh:
        json.dump(doc, fh, indent=1, sort_keys=False)
        fh.write("\n")
    with open(os.path.join(out, "README.md"), "w", encoding="utf-8", newline="\n") as fh:
        fh.write(README.format(scapy=scapy.VERSION, n4=counts["positive_ipv4"],
                               n6=counts["positive_ipv6"], nneg=counts["negative"],
                               nbase=counts["negative_bases"], pmtu=PMTU,
                               nrules=counts["rules"],
                               nv4hdr=counts["masked_ipv4_header"]))
    return counts


OUTPUTS = ["README.md", "rocev2_ipv4.pcap", "rocev2_ipv6.pcap", "rocev2_negative.pcap",
           "rocev2_rules.pcap", "rocev2_vectors.json"]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=DEFAULT_OUT, help="output directory (default %(default)s)")
    ap.add_argument("--check", action="store_true",
                    help="regenerate into a temporary directory and compare byte for byte with "
                         "--out; exit 1 on any difference")
    a = ap.parse_args(argv)
    try:
        if a.check:
            with tempfile.TemporaryDirectory(prefix="hematite-vectors-") as tmp:
                counts = generate(tmp)
                bad = []
                for name in OUTPUTS:
                    mine, theirs = os.path.join(tmp, name), os.path.join(a.out, name)
                    if not os.path.exists(theirs):
                        bad.append(name + " (missing)")
                    elif not filecmp.cmp(mine, theirs, shallow=False):
                        bad.append(name)
                extra = sorted(set(os.listdir(a.out)) - set(OUTPUTS)) if os.path.isdir(a.out) else []
            if bad:
                print("vectors in %s differ from a fresh generation: %s" % (a.out, ", ".join(bad)))
                return 1
            print("tests/tools/roce_icrc.py cross-check: %s" % (
                "not run (absent)" if PROJECT_CHECKER is None else
                "agrees on %d frames, %d not RoCEv2 to it" % (CHECKER_STATS["agree"], CHECKER_STATS["not_roce"])))
            print("vectors in %s are current (%d positive, %d negative; byte-identical)%s"
                  % (a.out, counts["positive"], counts["negative"],
                     "; untracked extra files: " + ", ".join(extra) if extra else ""))
            return 0
        os.makedirs(a.out, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="hematite-vectors-", dir=a.out) as tmp:
            counts = generate(tmp)
            for name in OUTPUTS:
                os.replace(os.path.join(tmp, name), os.path.join(a.out, name))
    except GenError as e:
        print("gen_vectors: FAILED: %s" % e, file=sys.stderr)
        return 2
    if PROJECT_CHECKER is None:
        print("tests/tools/roce_icrc.py absent: that cross-check was not run")
    else:
        print("tests/tools/roce_icrc.py agrees on %d frames (%d flipped frames are not RoCEv2 to it)"
              % (CHECKER_STATS["agree"], CHECKER_STATS["not_roce"]))
    print("wrote %s: positive=%d (ipv4 %d, ipv6 %d) negative=%d (covered %d, masked %d, "
          "not_covered %d; %d masked IPv4-header flips) all ICRC cross-checks agree"
          % (a.out, counts["positive"], counts["positive_ipv4"], counts["positive_ipv6"],
             counts["negative"], counts["covered"], counts["masked"], counts["not_covered"],
             counts["masked_ipv4_header"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
