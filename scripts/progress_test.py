#!/usr/bin/env python3
"""Checks scripts/synth.py's progress line (run_with_progress): on a terminal, a status line
with the elapsed time and, once a run of the block has left its duration, the time left; not
on a terminal, nothing on stderr; a successful run leaves <base>.time, a failed one does not.
Yosys is stood in for by `sleep` and `false`. Also --top's NAME:LEVELS parsing. Prints `progress: all passed`, exits 1 on a
failure."""
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import synth  # noqa: E402


def run(cmd, base, tty):
    """(exit status, what stderr received)."""
    if tty:
        master, slave = os.openpty()
        err = os.fdopen(slave, "w")
    else:
        rd, wr = os.pipe()
        master, err = rd, os.fdopen(wr, "w")
    saved, sys.stderr = sys.stderr, err
    try:
        with open(os.devnull, "w") as log:
            rc = synth.run_with_progress(cmd, log, base, "blk at 512 bits")
    finally:
        sys.stderr = saved
        err.close()
    out = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    return rc, out.decode(errors="replace")


def main():
    fails = []
    with tempfile.TemporaryDirectory() as d:
        base = os.path.join(d, "blk_512")
        rc, out = run(["sleep", "2.5"], base, tty=True)
        if rc != 0 or "synth.py: blk at 512 bits: 0:0" not in out or "elapsed" not in out or "left" in out:
            fails.append(f"first run on a terminal: rc {rc}, {out!r}")
        if not os.path.exists(base + ".time"):
            fails.append("no .time after a successful run")
        rc, out = run(["sleep", "2.5"], base, tty=True)
        if "left (the last run took 0:02)" not in out:
            fails.append(f"second run on a terminal: no estimate: {out!r}")
        rc, out = run(["sleep", "1.5"], base, tty=False)
        if rc != 0 or out:
            fails.append(f"not a terminal: rc {rc}, stderr {out!r}")
        os.remove(base + ".time")
        rc, out = run(["false"], base, tty=False)
        if rc == 0 or os.path.exists(base + ".time"):
            fails.append(f"a failed run: rc {rc}, .time {'written' if os.path.exists(base + '.time') else 'absent'}")
    # --top's per-block bounds
    tops, bound = synth.parse_tops("hm_a:44,hm_b,hm_c:0", 11)
    if tops != ["hm_a", "hm_b", "hm_c"] or bound != {"hm_a": 44, "hm_b": 11, "hm_c": 0}:
        fails.append(f"parse_tops: {tops} {bound}")
    tops, bound = synth.parse_tops("hm_a:8.25,hm_b:9.5", 8)
    if bound != {"hm_a": 8.25, "hm_b": 9.5}:
        fails.append(f"parse_tops with quarter levels: {bound}")
    for bad in ("hm_a:x", "hm_a:", "", "hm_a,,hm_b", "hm-a", "hm_a:8.3", "hm_a:8."):
        try:
            synth.parse_tops(bad, 11)
            fails.append(f"parse_tops accepted {bad!r}")
        except ValueError:
            pass
    # --paths: the deepest chain of a small netlist (FD -> LUT -> CARRY -> LUT -> FD, and a
    # shorter FD -> LUT -> FD beside it) is the one logic_depth measures, start point first
    cell = lambda t, ins, outs: {"type": t, "attributes": {"src": "x.sv:1.1-1.2|/share/xilinx/lut_map.v:1"},
                                 "port_directions": {**{k: "input" for k in ins}, **{k: "output" for k in outs}},
                                 "connections": {**ins, **outs}}
    net = {"modules": {"t": {"ports": {}, "netnames": {"q1": {"bits": [2]}, "a": {"bits": [3]}, "c": {"bits": [4]}, "d": {"bits": [5]}},
        "cells": {"r1": cell("FDRE", {"D": [9]}, {"Q": [2]}), "l1": cell("LUT2", {"I0": [2]}, {"O": [3]}),
                  "k1": cell("CARRY8", {"S": [3]}, {"O": [4]}), "l2": cell("LUT3", {"I0": [4]}, {"O": [5]}),
                  "r2": cell("FDRE", {"D": [5]}, {"Q": [6]}), "l3": cell("LUT1", {"I0": [2]}, {"O": [7]}),
                  "r3": cell("FDRE", {"D": [7]}, {"Q": [8]})}}}}
    paths = synth.deepest_paths(net, "t", 2)
    want = [("start", "q1[0]", ""), ("LUT2", "a[0]", "x.sv:1.1-1.2"), ("CARRY8", "c[0]", "x.sv:1.1-1.2"), ("LUT3", "d[0]", "x.sv:1.1-1.2")]
    if len(paths) != 2 or paths[0][0] != 2.25 or paths[0][0] != synth.logic_depth(net, "t", 0.25) or paths[0][2] != want \
            or "r2" not in paths[0][1] or paths[1][0] != 1:
        fails.append(f"deepest_paths: {paths}")
    for f in fails:
        print(f"progress: FAILED {f}")
    print("progress: all passed" if not fails else f"progress: {len(fails)} failed")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
