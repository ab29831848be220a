#!/usr/bin/env python3
"""Summarise Verilator line and toggle coverage of the RTL (./hematite coverage).

    coverage.py MERGED.dat [--root DIR] [--list N]

Reads a coverage file written by `verilator_coverage -write` (the merge of every model's
counts), and prints, per RTL folder and per file of rtl/eng, rtl/cc and rtl/rx, the line and
toggle points covered out of all. --list N also prints the N files with the most uncovered
line points and their uncovered lines. The last line is `coverage: line L%, toggle T%` for
the transport engine's folders (rtl/eng, rtl/cc, rtl/rx, rtl/tx, rtl/dma, rtl/ctx).

A coverage point of Verilator's data file is `C '<key/value list>' <count>`, where the list
separates entries with \\x01 and key from value with \\x02; the keys used here are `f` (file),
`l` (line) and `page` (`v_line/...`, `v_toggle/...`, `v_branch/...`).
"""
import argparse
import collections
import os
import sys

ENGINE_DIRS = ("rtl/eng", "rtl/cc", "rtl/rx", "rtl/tx", "rtl/dma", "rtl/ctx")


def points(path):
    with open(path, "rb") as fh:
        for raw in fh:
            if not raw.startswith(b"C '"):
                continue
            end = raw.rfind(b"'")
            keys = raw[3:end].decode("utf-8", "replace")
            count = int(raw[end + 1:].strip() or b"0")
            kv = {}
            for item in keys.split("\x01"):
                if "\x02" in item:
                    k, v = item.split("\x02", 1)
                    kv[k] = v
            yield kv, count


def rel(path, root):
    p = os.path.normpath(path)
    r = os.path.normpath(root)
    if p.startswith(r + os.sep):
        p = p[len(r) + 1:]
    i = p.find("build/gen/rtl/")     # the RTL generated at build time (scripts/regs.py --rtl)
    if i < 0:
        i = p.find("rtl/")
    return p[i:] if i >= 0 else p


def pct(c, t):
    return 100.0 * c / t if t else 100.0


def main(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("dat")
    ap.add_argument("--root", default=os.getcwd())
    ap.add_argument("--list", type=int, default=0)
    a = ap.parse_args(argv)
    # (file, kind) -> [covered, total]; uncovered line numbers per file
    per = collections.defaultdict(lambda: [0, 0])
    uncovered = collections.defaultdict(set)
    n = 0
    for kv, count in points(a.dat):
        n += 1
        kind = kv.get("page", "").split("/")[0]
        if kind not in ("v_line", "v_toggle"):
            continue
        f = rel(kv.get("f", "?"), a.root)
        if not f.startswith("rtl/"):
            continue
        e = per[(f, kind)]
        e[1] += 1
        if count > 0:
            e[0] += 1
        elif kind == "v_line":
            uncovered[f].add(int(kv.get("l", "0")))
    if n == 0:
        print("coverage: no coverage points in %s" % a.dat)
        return 1
    dirs = collections.defaultdict(lambda: {"v_line": [0, 0], "v_toggle": [0, 0]})
    for (f, kind), (c, t) in per.items():
        d = os.path.dirname(f)
        dirs[d][kind][0] += c
        dirs[d][kind][1] += t
    print("%-16s %18s %20s" % ("folder", "line", "toggle"))
    for d in sorted(dirs):
        l, t = dirs[d]["v_line"], dirs[d]["v_toggle"]
        print("%-16s %7d/%-7d %5.1f%% %8d/%-8d %5.1f%%" % (d, l[0], l[1], pct(*l), t[0], t[1], pct(*t)))
    print()
    print("%-36s %18s %20s" % ("file", "line", "toggle"))
    files = sorted({f for f, _ in per})
    for f in files:
        if not f.startswith(("rtl/eng/", "rtl/cc/", "rtl/rx/")):
            continue
        l, t = per.get((f, "v_line"), [0, 0]), per.get((f, "v_toggle"), [0, 0])
        print("%-36s %7d/%-7d %5.1f%% %8d/%-8d %5.1f%%" % (f, l[0], l[1], pct(*l), t[0], t[1], pct(*t)))
    if a.list:
        print()
        worst = sorted(uncovered.items(), key=lambda kv: -len(kv[1]))[:a.list]
        for f, lines in worst:
            ls = sorted(lines)
            print("%s: %d uncovered line points, lines %s" % (f, len(ls), ", ".join(map(str, ls[:60])) + (" ..." if len(ls) > 60 else "")))
    tot = {"v_line": [0, 0], "v_toggle": [0, 0]}
    for d, v in dirs.items():
        if d in ENGINE_DIRS:
            for k in tot:
                tot[k][0] += v[k][0]
                tot[k][1] += v[k][1]
    print("coverage: line %.1f%%, toggle %.1f%% (%s)" % (pct(*tot["v_line"]), pct(*tot["v_toggle"]), ", ".join(ENGINE_DIRS)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
