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
    for bad in ("hm_a:x", "hm_a:", "", "hm_a,,hm_b", "hm-a"):
        try:
            synth.parse_tops(bad, 11)
            fails.append(f"parse_tops accepted {bad!r}")
        except ValueError:
            pass
    for f in fails:
        print(f"progress: FAILED {f}")
    print("progress: all passed" if not fails else f"progress: {len(fails)} failed")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
