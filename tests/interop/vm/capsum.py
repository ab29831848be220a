#!/usr/bin/env python3
"""One summary line of a relay.py capture, for tests/interop/record-captures.sh.

    capsum.py FILE.pcapng ICRC_CHECKER

Prints `frames | RoCEv2 frames | BTH opcodes | dropped | CE marked | ICRC verdict icrc_rc=N`,
where the opcodes are `NAME xCOUNT` (with AETH NAKs and CNPs named), dropped and CE marked count
the relay's frame comments, and the verdict is the last line of ICRC_CHECKER (run on FILE) with
its exit status.
"""
import collections
import struct
import subprocess
import sys

OPS = {0x00: "SEND_FIRST", 0x01: "SEND_MIDDLE", 0x02: "SEND_LAST", 0x03: "SEND_LAST_IMM",
       0x04: "SEND_ONLY", 0x05: "SEND_ONLY_IMM", 0x06: "WRITE_FIRST", 0x07: "WRITE_MIDDLE",
       0x08: "WRITE_LAST", 0x09: "WRITE_LAST_IMM", 0x0A: "WRITE_ONLY", 0x0B: "WRITE_ONLY_IMM",
       0x0C: "READ_REQ", 0x0D: "READ_RESP_FIRST", 0x0E: "READ_RESP_MIDDLE",
       0x0F: "READ_RESP_LAST", 0x10: "READ_RESP_ONLY", 0x11: "ACK", 0x12: "ATOMIC_ACK",
       0x13: "CMP_SWAP", 0x14: "FETCH_ADD", 0x16: "SEND_LAST_INV", 0x17: "SEND_ONLY_INV",
       0x81: "CNP"}
PREFIX = {0x00: "RC_", 0x20: "UC_", 0x60: "UD_", 0x80: ""}


def blocks(data):
    o = 0
    while o + 12 <= len(data):
        t, n = struct.unpack_from("<II", data, o)
        yield t, data[o + 8:o + n - 4]
        o += n


def main():
    path, checker = sys.argv[1], sys.argv[2]
    data = open(path, "rb").read()
    frames = rocev2 = dropped = marked = 0
    ops = collections.Counter()
    for t, body in blocks(data):
        if t != 6:
            continue
        frames += 1
        caplen = struct.unpack_from("<I", body, 12)[0]
        f = body[20:20 + caplen]
        opts = body[20 + caplen + (-caplen) % 4:]
        if b"relay: dropped" in opts:
            dropped += 1
        if b"relay: CE marked" in opts:
            marked += 1
        et = struct.unpack_from(">H", f, 12)[0] if len(f) >= 14 else 0
        if et == 0x0800 and len(f) >= 34 and f[23] == 17:
            udp = 14 + (f[14] & 15) * 4
        elif et == 0x86DD and len(f) >= 62 and f[20] == 17:
            udp = 54
        else:
            continue
        if struct.unpack_from(">H", f, udp + 2)[0] != 4791 or len(f) < udp + 20:
            continue
        rocev2 += 1
        op = f[udp + 8]
        name = PREFIX.get(op & 0xE0, "x%02x_" % (op & 0xE0)) + OPS.get(op & 0x1F if op != 0x81 else op, "op%02x" % op)
        if op in (0x11, 0x12) or (op & 0xE0 == 0 and op & 0x1F in (0x0D, 0x0F, 0x10)):
            syn = f[udp + 20]
            if syn >> 5 == 3:
                name += "(NAK %s)" % {0: "PSN seq err", 1: "invalid req", 2: "remote access err",
                                      3: "remote op err", 4: "invalid RD req"}.get(syn & 31, syn & 31)
            elif syn >> 5 == 1:
                name += "(RNR NAK)"
        ops[name] += 1
    r = subprocess.run([sys.executable, checker, path], capture_output=True, text=True)
    verdict = [l for l in r.stdout.splitlines() if "ICRC good" in l]
    verdict = verdict[-1].split(": ", 1)[-1] if verdict else (r.stdout + r.stderr).strip().splitlines()[-1:]
    print("%d | %d | %s | %d | %d | %s icrc_rc=%d" % (
        frames, rocev2, ", ".join("%s x%d" % kv for kv in sorted(ops.items(), key=lambda kv: -kv[1])),
        dropped, marked, verdict, r.returncode))


if __name__ == "__main__":
    main()
