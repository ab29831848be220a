#!/usr/bin/env python3
"""Where the control core spends its cycles, per firmware command.

Usage: fw-profile.py [--bench PATH] [--elf PATH] [--cmd SUBSTRING] [--top N]

Runs the engine benchmark's firmware latency table (`hematite-bench --fw`) with HM_FW_PROFILE
set: the co-simulation then counts every control-core cycle against the instruction word that
the core fetched last (hm_ctrl_core's fetch trace port). The addresses are mapped to the
firmware's functions with the ELF's symbol table (llvm-objdump -t, or binutils' objdump), and
each command prints its functions by cycles. The figures include the mailbox polling loop
while the host writes the command (fw_main). Build first: ./hematite fw and
`cargo build --profile test -p hematite-sim --bin hematite-bench`.
"""
import argparse
import collections
import os
import re
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def symbols(elf):
    tool = shutil.which("llvm-objdump") or shutil.which("objdump")
    if not tool:
        sys.exit("fw-profile: needs llvm-objdump or objdump")
    out = subprocess.run([tool, "-t", elf], capture_output=True, text=True, check=True).stdout
    syms = []
    # "ADDR flags F SECTION SIZE [.hidden] NAME"
    pat = re.compile(r"^([0-9a-f]+)\s.*\sF\s+\S+\s+([0-9a-f]+)\s+(?:\.hidden\s+)?(\S+)$")
    for line in out.splitlines():
        m = pat.match(line)
        if m:
            syms.append((int(m.group(1), 16), int(m.group(2), 16), m.group(3)))
    syms.sort()
    return syms


def demangle(names):
    cf = shutil.which("rustfilt") or shutil.which("c++filt")
    if not cf or not names:
        return {n: n for n in names}
    out = subprocess.run([cf], input="\n".join(names), capture_output=True, text=True).stdout.splitlines()
    return dict(zip(names, out)) if len(out) == len(names) else {n: n for n in names}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bench", default=os.path.join(ROOT, "target/debug/hematite-bench"))
    ap.add_argument("--elf", default=os.path.join(ROOT, "target/riscv32imc-unknown-none-elf/release/hematite-firmware"))
    ap.add_argument("--cmd", default="", help="only commands whose name contains this")
    ap.add_argument("--top", type=int, default=8)
    ap.add_argument("--lines", action="store_true", help="by source line (the innermost inlined one) instead of by function")
    a = ap.parse_args()
    for p in (a.bench, a.elf):
        if not os.path.exists(p):
            sys.exit(f"fw-profile: {p} not found (build it first)")
    env = dict(os.environ, HM_FW_PROFILE="1")
    r = subprocess.run([a.bench, "--fw"], capture_output=True, text=True, env=env, cwd=ROOT)
    if r.returncode != 0:
        sys.exit(f"fw-profile: {a.bench} --fw failed:\n{r.stdout}{r.stderr}")
    syms = symbols(a.elf)
    starts = [s[0] for s in syms]
    import bisect

    def func(pc):
        i = bisect.bisect_right(starts, pc) - 1
        # the fetch is word-aligned: a compressed function may start 2 bytes into the word
        for j in (i, i + 1):
            if 0 <= j < len(syms) and syms[j][0] <= pc + 2 < syms[j][0] + max(syms[j][1], 1) + 2:
                return syms[j][2]
        return f"?{pc:#x}"

    rows = []
    for line in r.stderr.splitlines():
        f = line.split("\t")
        if len(f) == 4 and f[0] == "prof" and a.cmd in f[1]:
            rows.append((f[1], int(f[2], 16), int(f[3])))
    where = func
    if a.lines:
        tool = shutil.which("llvm-addr2line") or shutil.which("addr2line")
        if not tool:
            sys.exit("fw-profile: --lines needs llvm-addr2line or addr2line (binutils)")
        pcs = sorted({pc for _, pc, _ in rows})
        out = subprocess.run([tool, "-e", a.elf] + [hex(p) for p in pcs], capture_output=True, text=True).stdout.split()
        loc = {p: os.path.relpath(l, ROOT) if l.startswith("/") else l for p, l in zip(pcs, out)}
        where = lambda pc: loc.get(pc, hex(pc))
    per = collections.OrderedDict()
    for name, pc, c in rows:
        per.setdefault(name, collections.Counter())[where(pc)] += c
    names = demangle(sorted({n for c in per.values() for n in c}))
    for cmd, c in per.items():
        total = sum(c.values())
        print(f"{cmd}: {total} cycles")
        for fn, n in c.most_common(a.top):
            print(f"  {n:>8} {100 * n / total:5.1f}%  {names.get(fn, fn)}")


if __name__ == "__main__":
    main()
