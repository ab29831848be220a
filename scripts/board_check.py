#!/usr/bin/env python3
"""Checks a board's Vivado flow without Vivado (issue 21): what can be checked on a machine
that has none.

  scripts/board_check.py u55c              check boards/u55c/
  scripts/board_check.py u55c --self-test  also break the flow in known ways, each of which the
                                           check must catch

1. The flow runs in tclsh: boards/<card>/build.tcl (which sources ip.tcl) and the XDC are
   sourced with a stub for every Vivado command they may call (scripts/vivado_stub.tcl), so a
   syntax error, an unknown command or option, a missing source file fails. The calls are
   recorded, and the steps checked in order: a project for the card's part, both IPs created,
   configured and synthesised, every source of hematite.core's vivado_<card> target read in
   the manifest's order, the constraints read after the IPs with PROCESSING_ORDER LATE,
   synth_design of the top, opt / place / phys_opt / route, the reports and the bitstream.
2. The IPs' configuration agrees with the RTL and with the host side: the PCIe link and
   interface width, alignment and straddling as hm_pcie_dma / hm_pcie_cq expect them, BAR 0's
   size against hm_pcie_ep's decode and the register map, the push BAR against hm_card's
   push window, the MSI-X table size against the top's NUM_VEC and its offsets against the
   register map and hm_pcie_ep, the PCI IDs against the host driver's placeholder IDs, the
   CMAC's interface, reference clock and frame length against the shell.
3. The constraints agree with the top: the managed XDC holds plain commands only (Vivado
   skips loops and conditions there), every port it names exists, every port that is not a
   transceiver lane has a pin and an I/O standard, and the reference clocks' periods are the
   IPs' frequencies; the crossings' constraints (unmanaged Tcl) name instances, registers and
   pins that exist in the RTL and the IP stubs, bound both directions by the faster clock's
   period and give each frame FIFO's crossing buses a bus-skew bound.
Prints one line per group and exits non-zero on the first group that fails.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import manifest  # noqa: E402

CARDS = {
    "u55c": {
        "part": "xcu55c-fsvh2892-2L-e",
        "top": "hm_u55c_top",
        "ips": {"hm_u55c_pcie": "pcie4c_uscale_plus", "hm_u55c_cmac": "cmac_usplus"},
        "xdc": "u55c.xdc",
        "cdc": "cdc.tcl",
        # the instances the constraints reach into: top -> ... -> the frame FIFOs
        "fifo_path": [("hm_u55c_top", "hm_card", "u_card"), ("hm_card", "hm_eth_port", "u_eth")],
        "fifos": ("hm_eth_port", "hm_axis_async_frame_fifo", ("u_rx", "u_tx")),
        # ports placed by the IPs (transceiver lanes)
        "lanes": r"(pcie|qsfp\d)_(rx|tx)_[pn]",
    },
}


class Fail(Exception):
    pass


# the board folder being checked (boards/<card>, or its broken copy in --self-test): a path
# under boards/<card>/ is read from there
BOARD = {}


def read(rel):
    for card, d in BOARD.items():
        pre = f"boards/{card}/"
        if rel.startswith(pre):
            with open(os.path.join(d, rel[len(pre):])) as f:
                return f.read()
    with open(os.path.join(ROOT, rel)) as f:
        return f.read()


def sv_param(rel, name):
    """The default of `parameter int NAME = value` or `localparam int NAME = value` in a file."""
    m = re.search(rf"(?:parameter|localparam)\s+int\s+{name}\s*=\s*(\d+)", read(rel))
    if not m:
        raise Fail(f"{rel}: no integer parameter {name}")
    return int(m.group(1))


def pkg_const(name):
    """A constant of the generated register package (rtl/pkg/hm_regs_pkg.sv), or hm_pkg's."""
    for rel in ("rtl/pkg/hm_regs_pkg.sv", "rtl/pkg/hm_pkg.sv"):
        m = re.search(rf"localparam\s+(?:logic\s*\[[^\]]*\]|int)\s+{name}\s*=\s*(?:\d+'h([0-9A-Fa-f_]+)|\d+'d(\d+)|(\d+))\s*;", read(rel))
        if m:
            h, d, n = m.groups()
            return int(h.replace("_", ""), 16) if h else int(d or n)
    raise Fail(f"no constant {name} in the RTL packages")


def placeholder_ids():
    m = re.search(r"PLACEHOLDER_IDS:\s*\[\(u16, u16\);\s*\d+\]\s*=\s*\[\(0x([0-9a-fA-F]+),\s*0x([0-9a-fA-F]+)\)", read("run/src/cards.rs"))
    if not m:
        raise Fail("run/src/cards.rs: no PLACEHOLDER_IDS")
    return int(m.group(1), 16), int(m.group(2), 16)


def top_ports(rel, top):
    """{name: (direction, width)} of the top's ANSI port list."""
    text = re.sub(r"//[^\n]*", "", read(rel))
    m = re.search(rf"\bmodule\s+{top}\b.*?\)\s*\((.*?)\);", text, flags=re.S)
    if not m:
        raise Fail(f"{rel}: no port list of {top}")
    ports = {}
    for d, hi, lo, name in re.findall(r"(input|output)\s+logic\s*(?:\[(\d+):(\d+)\])?\s*(\w+)", m.group(1)):
        ports[name] = (d, int(hi) - int(lo) + 1 if hi else 1)
    return ports


def run_flow(board_dir, card, work):
    """Sources build.tcl (with ip.tcl) and the XDC in tclsh with the stubs; returns the log as
    a list of Tcl lists (each a list of words)."""
    c = CARDS[card]
    srcs = manifest.sources(f"vivado_{card}", "sv")
    missing = [s for s in srcs if not os.path.exists(os.path.join(ROOT, s))]
    if missing:
        raise Fail(f"hematite.core vivado_{card}: missing sources {missing}")
    sf = os.path.join(work, "sources.f")
    with open(sf, "w") as f:
        f.write("\n".join(os.path.join(ROOT, x) for x in srcs) + "\n")
    logs = []
    for what, scripts in (("flow", ["build.tcl"]), ("xdc", [c["xdc"], c["cdc"]])):
        log = os.path.join(work, f"{what}.log")
        drv = os.path.join(work, f"{what}.tcl")
        with open(drv, "w") as f:
            f.write(f"set ::stub_log {{{log}}}\n")
            f.write(f"source {{{os.path.join(ROOT, 'scripts', 'vivado_stub.tcl')}}}\n")
            if what == "flow":
                f.write(f"set argv [list {{{os.path.join(work, 'out')}}} {{{sf}}}]\nset argc 2\n")
            for script in scripts:
                f.write(f"stub_log source {{{script}}}\nsource {{{os.path.join(board_dir, script)}}}\n")
            f.write("close $::stub_fh\n")
        r = subprocess.run(["tclsh", drv], capture_output=True, text=True, cwd=ROOT)
        if r.returncode != 0:
            raise Fail(f"{' + '.join(scripts)} in tclsh with the Vivado stubs: {r.stderr.strip() or r.stdout.strip()}")
        # each log line is a Tcl list; tclsh splits it for us
        conv = os.path.join(work, f"{what}_py.tcl")
        with open(conv, "w") as f:
            f.write(f"set fh [open {{{log}}}]\nwhile {{[gets $fh line] >= 0}} {{ puts [join $line \"\\x1f\"] }}\n")
        r = subprocess.run(["tclsh", conv], capture_output=True, text=True)
        logs.append([ln.split("\x1f") for ln in r.stdout.splitlines()])
    return srcs, logs[0], logs[1]


def check_steps(card, srcs, flow):
    c = CARDS[card]
    cmds = [e[0] for e in flow]

    def at(cmd, pred=lambda e: True):
        for i, e in enumerate(flow):
            if e[0] == cmd and pred(e):
                return i
        raise Fail(f"build.tcl never calls {cmd}" + ("" if pred is None else " as required"))

    p = at("create_project")
    if c["part"] not in flow[p]:
        raise Fail(f"build.tcl: the project is not for {c['part']}: {flow[p]}")
    for name, ipdef in c["ips"].items():
        i = at("create_ip", lambda e: e[1] == name)
        if flow[i][2] != ipdef:
            raise Fail(f"ip.tcl: {name} is a {flow[i][2]}, not a {ipdef}")
        at("generate_target", lambda e: name in e[-1])
        at("synth_ip", lambda e: name in e[-1])
    read = [os.path.relpath(e[1], ROOT) for e in flow if e[0] == "read_verilog"]
    if read != srcs:
        raise Fail(f"build.tcl reads {len(read)} sources, not hematite.core vivado_{card}'s {len(srcs)} in order")
    x = at("read_xdc", lambda e: e[-1].endswith(c["xdc"]) and "-unmanaged" not in e)
    at("read_xdc", lambda e: e[-1].endswith(c["cdc"]) and "-unmanaged" in e)
    at("set_property", lambda e: e[1] == "PROCESSING_ORDER" and e[2] == "LATE" and c["cdc"] in e[3])
    at("set_property", lambda e: e[1] == "USED_IN_SYNTHESIS" and e[2] == "false" and c["cdc"] in e[3])
    s = at("synth_design")
    if ["-top", c["top"]] != flow[s][1:3] and f"-top {c['top']}" not in " ".join(flow[s]):
        raise Fail(f"build.tcl: synth_design is not of {c['top']}: {flow[s]}")
    if c["part"] not in flow[s]:
        raise Fail(f"build.tcl: synth_design not for {c['part']}")
    order = [x, s] + [at(k) for k in ("opt_design", "place_design", "route_design", "report_timing_summary", "write_bitstream")]
    if order != sorted(order) or max(i for i, k in enumerate(cmds) if k == "synth_ip") > x:
        raise Fail("build.tcl: the steps are not in order (IPs, sources, constraints, synthesis, "
                   "opt, place, route, timing report, bitstream)")
    return f"flow: tclsh with Vivado stubs: {len(flow)} calls, {len(srcs)} sources in manifest order, steps in order"


def ip_cfg(flow, name):
    return {e[2].replace("CONFIG.", ""): e[3] for e in flow if e[0] == "ip_cfg" and e[1] == name}


def need(cfg, key, want, why):
    got = cfg.get(key)
    if got is None or str(got).lower() != str(want).lower():
        raise Fail(f"ip.tcl: {key} is {got!r}, the RTL needs {want!r} ({why})")


def size_bytes(cfg, bar):
    scale = {"Bytes": 1, "Kilobytes": 1 << 10, "Megabytes": 1 << 20, "Gigabytes": 1 << 30}[cfg[f"pf0_bar{bar}_scale"]]
    return int(cfg[f"pf0_bar{bar}_size"]) * scale


def check_ips(card, flow):
    top_rel = f"boards/{card}/hm_{card}_top.sv"
    pcie = ip_cfg(flow, f"hm_{card}_pcie")
    cmac = ip_cfg(flow, f"hm_{card}_cmac")
    # the PCIe block's interfaces as hm_pcie_ep's blocks expect them
    need(pcie, "axisten_if_width", "512_bit", "hm_pcie_ep's interfaces are 512 bits")
    need(pcie, "axisten_freq", "250", "the core clock is the user clock, 250 MHz")
    for i in ("CQ", "CC", "RQ", "RC"):
        need(pcie, f"AXISTEN_IF_{i}_ALIGNMENT_MODE", "DWORD_Aligned", "hm_pcie_cq and hm_pcie_dma are DWORD-aligned")
    for k in ("AXISTEN_IF_EXT_512_CQ_STRADDLE", "AXISTEN_IF_EXT_512_CC_STRADDLE",
              "AXISTEN_IF_EXT_512_RQ_STRADDLE", "AXISTEN_IF_EXT_512_RC_4TLP_STRADDLE"):
        need(pcie, k, "false", "one TLP per beat")
    need(pcie, "axisten_if_enable_client_tag", "true", "hm_pcie_dma picks its own tags")
    # IDs: the host driver finds the function by them
    ven, dev = placeholder_ids()
    need(pcie, "vendor_id", f"{ven:04X}", "run/src/cards.rs PLACEHOLDER_IDS")
    need(pcie, "PF0_DEVICE_ID", f"{dev:04X}", "run/src/cards.rs PLACEHOLDER_IDS")
    # BAR 0: hm_pcie_ep's decode (AW address bits) holds the register map (hm_bar)
    aw = sv_param("rtl/shell/hm_pcie_ep.sv", "AW")
    need(pcie, "pf0_bar0_enabled", "true", "BAR 0 is the register window")
    if size_bytes(pcie, 0) != 1 << aw:
        raise Fail(f"ip.tcl: BAR 0 is {size_bytes(pcie, 0)} bytes, hm_pcie_ep decodes {1 << aw}")
    end = max(pkg_const(f"HM_BAR_{b}") + pkg_const(f"HM_BAR_{b}_BYTES") for b in ("ENGINE", "CTRL", "MSIX", "SHELL"))
    if end > 1 << aw:
        raise Fail(f"the register map (hm_bar) ends at {end:#x}, beyond BAR 0's {1 << aw:#x}")
    # the push window: 64 bytes per QP, PUSH_QW bits of QP number, in BAR PUSH_BAR
    pb = sv_param(top_rel, "PUSH_BAR")
    qw = int(re.search(r"\.PUSH_QW\((\d+)\)", read("rtl/shell/hm_card.sv")).group(1))
    push = pkg_const("HM_PUSH_BYTES")
    need(pcie, f"pf0_bar{pb}_enabled", "true", f"the push window is BAR {pb}")
    if size_bytes(pcie, pb) != push << qw:
        raise Fail(f"ip.tcl: BAR {pb} is {size_bytes(pcie, pb)} bytes, the push window is {push << qw}")
    # MSI-X: the table in the design (hm_msix) where the register map puts it
    nvec = sv_param(top_rel, "NUM_VEC")
    need(pcie, "pf0_msix_enabled", "true", "MSI-X")
    need(pcie, "MSI_X_OPTIONS", "MSI-X_External", "the table is hm_msix's")
    if int(pcie.get("PF0_MSIX_CAP_TABLE_SIZE", "-1"), 16) + 1 != nvec:
        raise Fail(f"ip.tcl: PF0_MSIX_CAP_TABLE_SIZE {pcie.get('PF0_MSIX_CAP_TABLE_SIZE')} is not NUM_VEC - 1 = {nvec - 1:03X} ({top_rel})")
    msix = pkg_const("HM_BAR_MSIX")
    pba = int(re.search(r"\.PBA_OFFSET\('h([0-9a-fA-F]+)\)", read("rtl/shell/hm_pcie_ep.sv")).group(1), 16)
    need(pcie, "PF0_MSIX_CAP_TABLE_BIR", "BAR_0", "the table is in BAR 0")
    need(pcie, "PF0_MSIX_CAP_PBA_BIR", "BAR_0", "the PBA is in BAR 0")
    need(pcie, "PF0_MSIX_CAP_TABLE_OFFSET", f"{msix:08X}", "hm_bar MSIX")
    need(pcie, "PF0_MSIX_CAP_PBA_OFFSET", f"{msix + pba:08X}", "hm_bar MSIX + hm_pcie_ep's PBA_OFFSET")
    if nvec * 16 > pba or pba + (nvec + 63) // 64 * 8 > pkg_const("HM_BAR_MSIX_BYTES"):
        raise Fail(f"{nvec} MSI-X vectors do not fit the table and PBA of hm_bar MSIX")
    # the CMAC: what hm_eth_port expects of it
    need(cmac, "USER_INTERFACE", "AXIS", "hm_eth_port takes a 512-bit AXI4-Stream")
    need(cmac, "NUM_LANES", "4x25", "100GBASE-R4")
    need(cmac, "TX_FLOW_CONTROL", "0", "PFC is sent by hm_pfc_gen")
    need(cmac, "RX_FLOW_CONTROL", "0", "PFC is honoured by the engine (hm_pfc_rx)")
    need(cmac, "RX_FORWARD_CONTROL_FRAMES", "1", "the engine reads PFC frames")
    rx_bytes = sv_param("rtl/shell/hm_card.sv", "RX_DEPTH") * 64
    if int(cmac.get("RX_MAX_PACKET_LEN", 0)) > rx_bytes or int(cmac.get("RX_MAX_PACKET_LEN", 0)) < 1522:
        raise Fail(f"ip.tcl: RX_MAX_PACKET_LEN {cmac.get('RX_MAX_PACKET_LEN')}: not 1522..{rx_bytes} (hm_card's receive FIFO)")
    return (f"IPs: PCIe {pcie.get('PL_LINK_CAP_MAX_LINK_WIDTH')} {pcie.get('PL_LINK_CAP_MAX_LINK_SPEED')} "
            f"512-bit, BAR 0 {1 << aw >> 10} KiB, BAR {pb} {push << qw >> 20} MiB, {nvec} MSI-X vectors at "
            f"{msix:#x}/{msix + pba:#x}, IDs {ven:04x}:{dev:04x}; CMAC AXIS 4x25 at {cmac.get('GT_REF_CLK_FREQ')} MHz: "
            "agree with the RTL, the register map and the host side")


MANAGED_OK = {"set_property", "create_clock", "set_false_path", "set_max_delay", "set_bus_skew",
              "set_clock_groups", "set_input_delay", "set_output_delay", "create_generated_clock"}


def declares(rel, name):
    """True when the SV file declares a signal `name` (a logic, possibly an array)."""
    return re.search(rf"\blogic\b[^;]*\b{name}\b", re.sub(r"//[^\n]*", "", read(rel))) is not None


def instance_of(rel, module, inst):
    return re.search(rf"\b{module}\b\s*(?:#\s*\(.*?\)\s*)?\b{inst}\s*\(", read(rel), flags=re.S) is not None


def check_cdc(card, xdc):
    """The crossing constraints' names against the RTL; returns (max-delay values, bus skews)."""
    c = CARDS[card]
    top_rel = f"boards/{card}/hm_{card}_top.sv"
    files = {m: f for m in ("hm_card", "hm_eth_port", "hm_axis_async_frame_fifo", "hm_sync")
             for f in [f"rtl/shell/{m}.sv"]}
    files[c["top"]] = top_rel
    # pins: an instance of the top, and a port of its IP's stub
    for e in xdc:
        if e[0] == "get_pins":
            inst, pin = e[1].split("/")
            m = re.search(rf"\b(\w+)\s+{inst}\s*\(", read(top_rel))
            if not m:
                raise Fail(f"{c['cdc']}: no instance {inst} in the top")
            stub = f"boards/{card}/stubs/{m.group(1)}.sv"
            if not os.path.exists(os.path.join(BOARD[card], "stubs", f"{m.group(1)}.sv")) or not re.search(rf"\b(input|output)\b[^,;]*\b{pin}\b", read(stub)):
                raise Fail(f"{c['cdc']}: {inst} ({m.group(1)}) has no port {pin}")
    # the frame FIFOs: the instances on the way to them, and what the constraints name inside
    for parent, child, inst in c["fifo_path"]:
        if not instance_of(files[parent], child, inst):
            raise Fail(f"{c['cdc']}: no {child} {inst} in {parent}")
    host, fifo_mod, insts = c["fifos"]
    for i in insts:
        if not instance_of(files[host], fifo_mod, i):
            raise Fail(f"{c['cdc']}: no {fifo_mod} {i} in {host}")
    filters = [e[1] for e in xdc if e[0] == "get_cells_filter"]
    if not filters or any(fifo_mod not in f for f in filters):
        raise Fail(f"{c['cdc']}: the frame FIFOs are not found by their module name {fifo_mod}: {filters}")
    fifo_rel = files[fifo_mod]
    fifo_txt = re.sub(r"//[^\n]*", "", read(fifo_rel))
    # each bus skew from a register to what takes it: a synchroniser whose d_i it is, or a
    # register assigned from it
    named = [e[1] for e in xdc if e[0] == "get_cells"]
    for src, dst in zip(named[0::2], named[1::2]):
        s_reg = src.split("/")[-1].split("_reg")[0]
        d = dst.split("/")[3:]
        if len(d) == 2:
            m = re.search(rf"hm_sync\b[^;]*?\b{d[0]}\s*\((.*?)\);", fifo_txt, flags=re.S)
            if not m or not re.search(rf"\.d_i\(\s*{s_reg}\s*\)", m.group(1)):
                raise Fail(f"{c['cdc']}: {d[0]} does not synchronise {s_reg}")
        elif not re.search(rf"\b{d[0].split('_reg')[0]}\s*<=\s*{s_reg}\b", fifo_txt):
            raise Fail(f"{c['cdc']}: {d[0].split('_reg')[0]} is not taken from {s_reg}")
    for e in xdc:
        if e[0] != "get_cells":
            continue
        parts = e[1].split("/")[3:]           # (after u_card/u_eth/u_rx)
        reg = parts[-1]
        m = re.fullmatch(r"(\w+)_reg(\[[^\]]*\])*", reg)
        if not m:
            raise Fail(f"{c['cdc']}: {e[1]}: not a register name")
        if len(parts) == 1:
            if not declares(fifo_rel, m.group(1)):
                raise Fail(f"{c['cdc']}: {fifo_mod} has no register {m.group(1)}")
        else:
            if not instance_of(fifo_rel, "hm_sync", parts[0]):
                raise Fail(f"{c['cdc']}: {fifo_mod} has no hm_sync {parts[0]}")
            if not declares(files["hm_sync"], m.group(1)) or not reg.startswith(f"{m.group(1)}_reg[0]"):
                raise Fail(f"{c['cdc']}: {e[1]}: not the first stage of hm_sync's registers")
    periods = {"u_pcie/user_clk": 4.0, "u_cmac/gt_txusrclk2": 3.103}
    maxd = [float(e[-1]) for e in xdc if e[0] == "set_max_delay"]
    if len(maxd) != 2 or any(abs(v - min(periods.values())) > 1e-6 for v in maxd):
        raise Fail(f"{c['cdc']}: the crossings are not bounded both ways by the faster clock's period: {maxd}")
    skews = [e for e in xdc if e[0] == "set_bus_skew"]
    if len(skews) != 3 * len(insts) - 1:
        raise Fail(f"{c['cdc']}: {len(skews)} bus-skew constraints, not 3 per frame FIFO but the "
                   "transmit FIFO's trimmed counter crossing")
    return maxd, skews


def check_xdc(card, flow, xdc):
    c = CARDS[card]
    # a managed XDC: plain commands (Vivado skips loops, conditions and queries there)
    for n, line in enumerate(read(f"boards/{card}/{c['xdc']}").splitlines(), 1):
        w = line.split("#")[0].split()
        if w and w[0] not in MANAGED_OK:
            raise Fail(f"{c['xdc']}:{n}: {w[0]} in a managed XDC (plain constraints only; Tcl goes in {c['cdc']})")
    maxd_v, skew_l = check_cdc(card, xdc)
    ports = top_ports(f"boards/{card}/hm_{card}_top.sv", c["top"])
    named = {e[1] for e in xdc if e[0] == "get_ports"}
    unknown = sorted(named - set(ports))
    if unknown:
        raise Fail(f"{c['xdc']} names ports the top does not have: {unknown}")
    props = {}
    for e in xdc:
        if e[0] == "set_property" and e[3].startswith("port "):
            for p in e[3].split()[1:]:
                props.setdefault(p, {})[e[1]] = e[2]
    lanes = re.compile(c["lanes"])
    for p in ports:
        if lanes.fullmatch(p):
            continue
        if "PACKAGE_PIN" not in props.get(p, {}):
            raise Fail(f"{c['xdc']}: port {p} has no PACKAGE_PIN")
        if not p.endswith("refclk_p") and not p.endswith("refclk_n") and "IOSTANDARD" not in props[p]:
            raise Fail(f"{c['xdc']}: port {p} has no IOSTANDARD")
    clocks = {e[3].split()[-1]: float(e[2]) for e in xdc if e[0] == "create_clock"}
    pcie = ip_cfg(flow, f"hm_{card}_pcie")
    cmac = ip_cfg(flow, f"hm_{card}_cmac")
    for port, mhz, what in (("pcie_refclk_p", 100.0, "the PCIe reference clock (100 MHz)"),
                            ("qsfp0_refclk_p", float(cmac.get("GT_REF_CLK_FREQ", 0)), "the CMAC's GT_REF_CLK_FREQ"),
                            ("sysclk_100_p", float(cmac.get("GT_DRP_CLK", 0)), "the CMAC's GT_DRP_CLK (its init clock)")):
        if port not in clocks or abs(clocks[port] - 1000.0 / mhz) > 0.001:
            raise Fail(f"{c['xdc']}: the clock on {port} is {clocks.get(port)} ns, not {1000.0 / mhz:.3f} ns ({what})")
    if pcie.get("pcie_blk_locn") is None:
        raise Fail("ip.tcl: the PCIe block's location is not set")
    return (f"constraints: {len(named)} ports named, all in the top; {len(ports)} top ports, every "
            f"non-lane port pinned; {len(clocks)} reference clocks agree with the IPs; crossings: "
            f"{len(maxd_v)} max-delay ({maxd_v[0]:g} ns) and {len(skew_l)} bus-skew constraints, every "
            "instance, register and pin they name found in the RTL")


def check(card, board_dir):
    BOARD[card] = board_dir
    with tempfile.TemporaryDirectory() as work:
        srcs, flow, xdc = run_flow(board_dir, card, work)
        return [check_steps(card, srcs, flow), check_ips(card, flow), check_xdc(card, flow, xdc)]


# Ways to break the flow, each of which the check must catch (--self-test): file, text, the
# replacement
BREAKS = [
    ("build.tcl", "\nroute_design\n", "\n", "a missing step"),
    ("build.tcl", "\nopt_design\n", "\nopt_design -bogus\n", "an option the flow may not use"),
    ("build.tcl", "place_design\n", "place_desing\n", "an unknown command"),
    ("ip.tcl", "CONFIG.PF0_MSIX_CAP_TABLE_SIZE            {01F}", "CONFIG.PF0_MSIX_CAP_TABLE_SIZE {00F}", "an MSI-X table of the wrong size"),
    ("ip.tcl", "CONFIG.pf0_bar0_size                      {256}", "CONFIG.pf0_bar0_size {128}", "a BAR 0 smaller than the register map"),
    ("ip.tcl", "CONFIG.PF0_DEVICE_ID                      {903F}", "CONFIG.PF0_DEVICE_ID {9038}", "a device ID the host does not look for"),
    ("ip.tcl", "CONFIG.AXISTEN_IF_EXT_512_RQ_STRADDLE     {false}", "CONFIG.AXISTEN_IF_EXT_512_RQ_STRADDLE {true}", "straddling on RQ"),
    ("u55c.xdc", "[get_ports qsfp0_led_fault]\n", "[get_ports qsfp0_led_fail]\n", "a constraint on a port the top lacks"),
    ("u55c.xdc", "create_clock -period 6.206", "create_clock -period 6.400", "a reference clock period off the IP's"),
    ("u55c.xdc", "set_property -dict {PACKAGE_PIN BF41 IOSTANDARD LVCMOS18 PULLUP true} [get_ports pcie_perst_n]\n", "", "a port without a pin"),
    ("cdc.tcl", "{rd_g_q_reg[*]}  {u_rd_sync/s_q_reg[0][*]}", "{rd_g_reg[*]}  {u_rd_sync/s_q_reg[0][*]}", "a register the FIFO does not have"),
    ("cdc.tcl", "{cnt_g_q_reg[*]} {u_cnt_sync/s_q_reg[0][*]}", "{cnt_g_q_reg[*]} {u_cnt_sync/s_q_reg[*]}", "a bus skew to every synchroniser stage, not the first"),
    ("cdc.tcl", "[get_pins u_cmac/gt_txusrclk2]", "[get_pins u_cmac/gt_rxusrclk2]", "a clock pin the IP's stub does not have"),
    ("cdc.tcl", "min([get_property PERIOD $core_clk], [get_property PERIOD $mac_clk])", "[get_property PERIOD $core_clk]", "the crossings bounded by the slower clock"),
    ("cdc.tcl", "set_clock_groups -asynchronous -group $init_clk", "set_clock_groups -asynchronous -group $init_clk {", "a syntax error"),
    ("cdc.tcl", "{cnt_g_q_reg[*]} {u_cnt_sync/s_q_reg[0][*]}", "{cnt_g_q_reg[*]} {u_rd_sync/s_q_reg[0][*]}", "a bus skew into the wrong synchroniser"),
    ("build.tcl", "set_property USED_IN_SYNTHESIS false", "# set_property USED_IN_SYNTHESIS false", "the crossings applied in synthesis"),
    ("u55c.xdc", "set_property CONFIG_VOLTAGE 1.8 [current_design]", "foreach v {1.8} { set_property CONFIG_VOLTAGE $v [current_design] }", "a loop in the managed XDC"),
]


def self_test(card):
    src = os.path.join(ROOT, "boards", card)
    caught = 0
    for fname, old, new, what in BREAKS:
        with tempfile.TemporaryDirectory() as tmp:
            bd = os.path.join(tmp, "boards", card)
            shutil.copytree(src, bd)
            p = os.path.join(bd, fname)
            text = open(p).read()
            if text.count(old) != 1:
                sys.exit(f"board_check.py --self-test: {fname} no longer has {old!r} once (update BREAKS)")
            with open(p, "w") as f:
                f.write(text.replace(old, new))
            try:
                check(card, bd)
            except Fail as e:
                caught += 1
                print(f"self-test: {what}: caught ({str(e).splitlines()[0][:100]})")
                continue
            sys.exit(f"board_check.py --self-test: {what} in {fname} was NOT caught")
    return f"self-test: {caught} of {len(BREAKS)} broken flows caught"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("card", choices=sorted(CARDS))
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args()
    if shutil.which("tclsh") is None:
        sys.exit("board_check.py: tclsh not found (apt install tcl; ./hematite deps installs it)")
    try:
        for line in check(a.card, os.path.join(ROOT, "boards", a.card)):
            print(line)
    except Fail as e:
        sys.exit(f"board_check.py {a.card}: {e}")
    if a.self_test:
        print(self_test(a.card))
    print(f"board {a.card}: ok")


if __name__ == "__main__":
    main()
