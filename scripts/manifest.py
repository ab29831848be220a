#!/usr/bin/env python3
"""Reads hematite.core, the one manifest of RTL sources (a FuseSoC CAPI2 core), for
./hematite lint and scripts/synth.py. (sim/build.rs has its own small reader of the same file.)

usage: scripts/manifest.py files TARGET [--type sv|vlt|all]
           the target's files in compile order (sv: Verilog/SystemVerilog sources, the default;
           vlt: Verilator configuration files; all: both, configuration files first)
       scripts/manifest.py options TARGET TOOL
           the target's tools.TOOL.verilator_options, one per line
       scripts/manifest.py lint-tops
           one line per module file under rtl/ or build/gen/rtl/ in the lint target:
           `module widths`, widths `256,512` for a module with a DATA_WIDTH parameter, `-`
           otherwise
       scripts/manifest.py check
           every .sv under rtl/ and sim/hw/ is in the manifest exactly once, every listed file
           exists, every file under rtl/ and build/gen/rtl/ declares one module (or package)
           named as the file
"""
import os
import re
import sys

import yaml  # PyYAML: a dependency of fusesoc, which ./hematite deps installs pinned

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORE = os.path.join(ROOT, "hematite.core")
SV_TYPES = ("systemVerilogSource", "verilogSource")
# Our RTL: what is linted module by module and declares one module or package named as its
# file (rtl/, and the RTL scripts/regs.py generates into build/gen/rtl/)
OWN = ("rtl/", "build/gen/rtl/")


def load():
    with open(CORE) as f:
        return yaml.safe_load(f)


def fileset_files(core, name):
    """[(path, file_type)] of one fileset, in order."""
    fs = core["filesets"][name]
    default = fs.get("file_type")
    out = []
    for item in fs.get("files", []):
        if isinstance(item, dict):
            ((path, attrs),) = item.items()
            out.append((path, (attrs or {}).get("file_type", default)))
        else:
            out.append((item, default))
    return out


def target_files(target):
    """[(path, file_type)] of a target, its filesets in the order the target lists them."""
    core = load()
    if target not in core["targets"]:
        sys.exit(f"manifest.py: hematite.core has no target {target!r}")
    out = []
    for fs in core["targets"][target]["filesets"]:
        out += fileset_files(core, fs)
    return out


_generated = False


def generate(files):
    """The files generated at build time (build/gen/rtl/, scripts/regs.py --rtl) brought up to
    date first, so that lint and synthesis never read a missing or stale one; once a process
    (scripts/synth.py asks for the sources once per block)."""
    global _generated
    if not _generated and any(p.startswith("build/gen/") for p, _ in files):
        _generated = True
        import subprocess
        r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "regs.py"), "--rtl"],
                           stdout=sys.stderr)
        if r.returncode != 0:
            sys.exit("manifest.py: scripts/regs.py --rtl failed (./hematite deps installs what it needs)")


def sources(target, kind="sv"):
    """Paths (relative to the repository root) of a target's files of one kind, the generated
    ones regenerated first."""
    files = target_files(target)
    generate(files)
    vlt = [p for p, t in files if t == "vlt"]
    sv = [p for p, t in files if t in SV_TYPES]
    return {"sv": sv, "vlt": vlt, "all": vlt + sv}[kind]


def declared(path):
    """(kind, name) of each `module X` / `package X` declared in a file."""
    text = open(os.path.join(ROOT, path)).read()
    text = re.sub(r"//[^\n]*|/\*.*?\*/", "", text, flags=re.S)
    return re.findall(r"^\s*(module|package)\s+(\w+)", text, flags=re.M)


def has_width_param(path):
    text = open(os.path.join(ROOT, path)).read()
    return re.search(r"parameter\s+int\s+DATA_WIDTH\b", text) is not None


def lint_tops():
    out = []
    for p in sources("lint"):
        if not p.startswith(OWN):
            continue
        for kind, name in declared(p):
            if kind == "module":
                out.append((name, "256,512" if has_width_param(p) else "-"))
    return out


def check():
    core = load()
    problems = []
    seen = {}
    for name in core["filesets"]:
        for p, t in fileset_files(core, name):
            if p in seen:
                problems.append(f"{p} is in filesets {seen[p]} and {name}")
            seen[p] = name
            if t not in SV_TYPES + ("vlt",):
                problems.append(f"{p}: unexpected file_type {t!r}")
            if not os.path.exists(os.path.join(ROOT, p)):
                problems.append(f"{p} (fileset {name}) does not exist"
                                + (" (run ./hematite deps)" if p.startswith("build/") else ""))
            elif p.startswith(OWN) and t in SV_TYPES:
                d = declared(p)
                stem = os.path.splitext(os.path.basename(p))[0]
                if len(d) != 1 or d[0][1] != stem:
                    problems.append(f"{p}: expected one module or package named {stem}, found {d}")
    for top in ("rtl", "sim/hw"):
        for dirpath, _, files in os.walk(os.path.join(ROOT, top)):
            for f in files:
                if f.endswith((".sv", ".v")):
                    rel = os.path.relpath(os.path.join(dirpath, f), ROOT)
                    if rel not in seen:
                        problems.append(f"{rel} is not in hematite.core (add it to a fileset)")
    for t, body in core["targets"].items():
        for fs in body.get("filesets", []):
            if fs not in core["filesets"]:
                problems.append(f"target {t}: unknown fileset {fs}")
    for p in problems:
        print(f"hematite.core: {p}", file=sys.stderr)
    return not problems


def main(argv):
    if len(argv) >= 2 and argv[0] == "files":
        kind = "sv"
        if len(argv) == 4 and argv[2] == "--type":
            kind = argv[3]
        elif len(argv) != 2:
            sys.exit(__doc__)
        print("\n".join(sources(argv[1], kind)))
    elif len(argv) == 3 and argv[0] == "options":
        core = load()
        opts = core["targets"][argv[1]].get("tools", {}).get(argv[2], {})
        print("\n".join(str(o) for o in opts.get("verilator_options", [])))
    elif argv == ["lint-tops"]:
        for name, widths in lint_tops():
            print(name, widths)
    elif argv == ["check"]:
        if not check():
            sys.exit(1)
        print("hematite.core: every RTL file listed once, every listed file present")
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
