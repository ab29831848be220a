#!/usr/bin/env python3
"""Independent RoCEv2 ICRC checker (no code shared with the Rust model).

For every frame carrying UDP to port 4791 in a pcap or pcapng file (optionally xz-compressed),
recompute the invariant CRC and compare it with the 4 bytes before the end of the UDP payload.

The ICRC (IBTA Annex A17.3.3) is the ordinary CRC-32 (zlib's) of
    8 bytes of 0xFF  (the masked LRH stand-in)
  + the IP header, with IPv4 TOS, TTL and header checksum set to all ones
    (IPv6: traffic class, flow label and hop limit set to all ones)
  + the UDP header, with its checksum set to all ones
  + the BTH, with its byte 4 (FECN, BECN, reserved bits) set to all ones
  + everything after the BTH up to the ICRC,
and goes on the wire as the little-endian bytes of that value.

    roce_icrc.py [-v] FILE [FILE ...]   exit 0 when every RoCEv2 frame's ICRC is good, 1 when
                                        any is bad or a file has no RoCEv2 frame, 2 on bad input
    --allow-bad N                       exactly N bad ICRCs are expected (negative tests)

Import: icrc_of(frame) -> (computed_wire_bytes, stored_wire_bytes) or None for non-RoCE frames.
"""
import lzma
import struct
import sys
import zlib

ROCEV2_PORT = 4791


def _load(path):
    with open(path, "rb") as f:
        data = f.read()
    if data[:6] == b"\xfd7zXZ\x00":
        data = lzma.decompress(data)
    return data


def read_frames(path):
    """Every Ethernet frame of a classic pcap (either byte order, us or ns) or a pcapng file."""
    d = _load(path)
    out = []
    if d[:4] == b"\x0a\x0d\x0d\x0a":
        o, end = 0, "<"
        while o + 12 <= len(d):
            btype = struct.unpack_from(end + "I", d, o)[0]
            if btype == 0x0A0D0D0A:
                bom = d[o + 8:o + 12]
                end = "<" if bom == b"\x4d\x3c\x2b\x1a" else ">"
            blen = struct.unpack_from(end + "I", d, o + 4)[0]
            if blen < 12 or o + blen > len(d):
                raise ValueError(f"{path}: truncated pcapng block at offset {o}")
            if btype == 6:  # enhanced packet block
                caplen = struct.unpack_from(end + "I", d, o + 20)[0]
                out.append(d[o + 28:o + 28 + caplen])
            elif btype == 3:  # simple packet block
                orig = struct.unpack_from(end + "I", d, o + 8)[0]
                out.append(d[o + 12:o + 12 + min(orig, blen - 16)])
            o += blen
        return out
    magics = {b"\xd4\xc3\xb2\xa1": "<", b"\x4d\x3c\xb2\xa1": "<",
              b"\xa1\xb2\xc3\xd4": ">", b"\xa1\xb2\x3c\x4d": ">"}
    if d[:4] not in magics:
        raise ValueError(f"{path}: neither pcap nor pcapng")
    end = magics[d[:4]]
    linktype = struct.unpack_from(end + "I", d, 20)[0]
    if linktype != 1:
        raise ValueError(f"{path}: link type {linktype}, not Ethernet")
    o = 24
    while o + 16 <= len(d):
        caplen = struct.unpack_from(end + "I", d, o + 8)[0]
        if o + 16 + caplen > len(d):
            raise ValueError(f"{path}: truncated record at offset {o}")
        out.append(d[o + 16:o + 16 + caplen])
        o += 16 + caplen
    return out


def icrc_of(f):
    """(computed, stored) ICRC wire bytes of a RoCEv2 frame, or None when it is not one."""
    if len(f) < 14:
        return None
    l3 = 14
    etype = struct.unpack_from(">H", f, 12)[0]
    while etype in (0x8100, 0x88A8) and len(f) >= l3 + 4:
        etype = struct.unpack_from(">H", f, l3 + 2)[0]
        l3 += 4
    if etype == 0x0800:
        if len(f) < l3 + 20:
            return None
        ihl = (f[l3] & 0x0F) * 4
        if f[l3 + 9] != 17 or ihl < 20:
            return None
        ip_end = l3 + struct.unpack_from(">H", f, l3 + 2)[0]
        ip = bytearray(f[l3:l3 + ihl])
        ip[1] = 0xFF               # TOS (DSCP + ECN)
        ip[8] = 0xFF               # TTL
        ip[10:12] = b"\xff\xff"    # header checksum
        l4 = l3 + ihl
    elif etype == 0x86DD:
        if len(f) < l3 + 40 or f[l3 + 6] != 17:
            return None
        ip_end = l3 + 40 + struct.unpack_from(">H", f, l3 + 4)[0]
        ip = bytearray(f[l3:l3 + 40])
        ip[0] |= 0x0F              # low nibble of the first byte: traffic class high bits
        ip[1:4] = b"\xff\xff\xff"  # rest of traffic class + flow label
        ip[7] = 0xFF               # hop limit
        l4 = l3 + 40
    else:
        return None
    if len(f) < l4 + 8 or struct.unpack_from(">H", f, l4 + 2)[0] != ROCEV2_PORT:
        return None
    if ip_end > len(f) or ip_end < l4 + 8 + 12 + 4:
        return None
    udp = bytearray(f[l4:l4 + 8])
    udp[6:8] = b"\xff\xff"
    bth = bytearray(f[l4 + 8:l4 + 20])
    bth[4] = 0xFF
    rest = f[l4 + 20:ip_end - 4]
    crc = zlib.crc32(b"\xff" * 8 + bytes(ip) + bytes(udp) + bytes(bth) + rest) & 0xFFFFFFFF
    return struct.pack("<I", crc), bytes(f[ip_end - 4:ip_end])


def main(argv):
    verbose = "-v" in argv
    args = [a for a in argv if a != "-v"]
    allow_bad = 0
    if "--allow-bad" in args:
        i = args.index("--allow-bad")
        try:
            allow_bad = int(args[i + 1])
        except (IndexError, ValueError):
            print("usage: roce_icrc.py [-v] [--allow-bad N] FILE...", file=sys.stderr)
            return 2
        del args[i:i + 2]
    if not args:
        print("usage: roce_icrc.py [-v] [--allow-bad N] FILE...", file=sys.stderr)
        return 2
    total_good = total_bad = 0
    rc = 0
    for path in args:
        try:
            frames = read_frames(path)
        except (OSError, ValueError, lzma.LZMAError) as e:
            print(f"{path}: {e}", file=sys.stderr)
            return 2
        good = bad = 0
        for n, f in enumerate(frames, 1):
            r = icrc_of(f)
            if r is None:
                continue
            ok = r[0] == r[1]
            good += ok
            bad += not ok
            if verbose or not ok:
                print(f"{path} frame {n}: ICRC {'good' if ok else 'BAD'} "
                      f"(stored {r[1].hex()}, computed {r[0].hex()})")
        print(f"{path}: {len(frames)} frames, {good + bad} RoCEv2, ICRC good {good}, bad {bad}")
        if good + bad == 0:
            print(f"{path}: no RoCEv2 frame to check")
            rc = 1
        total_good += good
        total_bad += bad
    print(f"ICRC: {total_good + total_bad} RoCEv2 frames checked, {total_good} good, {total_bad} bad"
          + (f" ({allow_bad} expected)" if allow_bad else ""))
    if total_bad != allow_bad:
        rc = 1
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
