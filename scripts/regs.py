#!/usr/bin/env python3
"""Generates the register outputs from regs/hematite.rdl (the one description of the register
maps), with systemrdl-compiler and PeakRDL-cheader:

  rtl/pkg/hm_regs_pkg.sv          SV package: offsets, reset values, field structs
                                  (abi/build.rs reads it for the Rust constants)
  include/hematite/hm_bar.h       C headers (PeakRDL-cheader): the function's BAR0 (the engine's
  include/hematite/hm_ctrl_cpu.h  block and the control core's host port) and the control core's
                                  address space (with the engine's control bus)
  docs/registers.md               the reference
  firmware/memory.x               the firmware's MEMORY regions (IMEM, DMEM, XMEM), for link.x

and, at build time (not checked in: build/ is ignored), the congestion-control register block
with PeakRDL-regblock:

  build/gen/rtl/hm_cc_regs_pkg.sv the block's hwif types (PeakRDL-regblock)
  build/gen/rtl/hm_cc_regs.sv     the register block itself (PeakRDL-regblock, passthrough CPU
                                  interface) of the addrmap hm_cc_regs
  build/gen/rtl/hm_cc_rf.sv       its wrapper for rtl/csr/hm_ctl.sv: word-indexed access with
                                  byte strobes, and the registers as HM_CC_* words
  build/gen/rtl/hm_shell_regs_pkg.sv, hm_shell_regs.sv
                                  the card shell's register block (PeakRDL-regblock, AXI4-Lite
                                  CPU interface, flattened ports) of the addrmap hm_shell_regs

  scripts/regs.py           write them all
  scripts/regs.py --check   regenerate the checked-in outputs into a temporary directory and
                            fail (exit 1) when one differs (the suite runs this)
  scripts/regs.py --rtl     write only the build-time RTL, and only the files whose text
                            changed (./hematite deps and sim/build.rs run this; hematite.core
                            lists the files)

Naming rules: see the head of regs/hematite.rdl.
"""
import argparse
import difflib
import os
import sys
import tempfile

from systemrdl import RDLCompiler
from systemrdl.node import AddrmapNode, MemNode, RegfileNode, RegNode
from peakrdl_cheader.exporter import CHeaderExporter
from peakrdl_regblock import RegblockExporter
from peakrdl_regblock.cpuif.axi4lite import AXI4Lite_Cpuif_flattened
from peakrdl_regblock.cpuif.passthrough import PassthroughCpuif
from peakrdl_regblock.udps import ALL_UDPS

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RDL = "regs/hematite.rdl"
MAPS = ["hm_bar0", "hm_ctl_bus", "hm_ctrl_host", "hm_shell_regs", "hm_bar", "hm_ctrl_cpu"]
C_MAPS = ["hm_bar", "hm_ctrl_cpu"]    # they contain the other four
SV_OUT = "rtl/pkg/hm_regs_pkg.sv"
MD_OUT = "docs/registers.md"
MEM_OUT = "firmware/memory.x"
C_DIR = "include/hematite"
RTL_DIR = "build/gen/rtl"
CC_MAP = "hm_cc_regs"        # the addrmap PeakRDL-regblock generates a register block for
CC_WRAP = "hm_cc_rf"         # the hand-off to hm_ctl, generated here
SHELL_MAP = "hm_shell_regs"  # the card shell's register block (AXI4-Lite), rtl/shell/hm_card.sv


def mem_bytes(m):
    return m.get_property("mementries") * m.get_property("memwidth") // 8


def clog2(n):
    return max(1, (n - 1).bit_length())


def first_sentence(text):
    if not text:
        return ""
    text = " ".join(text.split())
    cut = text.find(". ")
    return text if cut < 0 else text[: cut + 1]


def hexlit(bits, v):
    digits = (bits + 3) // 4
    h = f"{v:0{digits}X}"
    if digits > 4:
        # 32'h0116_3003
        parts = []
        while h:
            parts.insert(0, h[-4:])
            h = h[:-4]
        h = "_".join(parts)
    return f"{bits}'h{h}"


def reg_reset(reg):
    v = 0
    for f in reg.fields():
        r = f.get_property("reset")
        if isinstance(r, int):
            v |= r << f.low
    return v


def struct_of(reg):
    """(type name, [(field, msb, lsb, desc)]) most significant first, gaps as rsvdN."""
    tname = reg.get_property("hm_type")
    if not tname:
        return None
    fields = sorted(reg.fields(), key=lambda f: f.low)
    out, nxt, gap = [], 0, 0
    for f in fields:
        if f.low > nxt:
            out.append((f"rsvd{gap}", f.low - 1, nxt, ""))
            gap += 1
        out.append((f.inst_name, f.high, f.low, f.get_property("desc") or ""))
        nxt = f.high + 1
    width = reg.get_property("regwidth")
    if nxt < width:
        out.append((f"rsvd{gap}", width - 1, nxt, ""))
    return tname, list(reversed(out))


def sv_reg(w, structs, name, abits, c, cmt, base=0):
    """A register (or register array) at `base` + its offset: offset, _WORDS, _RESET, struct."""
    w(f"  localparam logic [{abits - 1}:0] {name:<22} = {hexlit(abits, base + c.raw_address_offset)};  // {cmt}")
    if c.is_array:
        n = c.array_dimensions[0]
        w(f"  localparam logic [{abits - 1}:0] {name + '_WORDS':<22} = {abits}'d{n};")
    rv = reg_reset(c)
    if rv and not c.is_array:
        w(f"  localparam logic [31:0] {name + '_RESET':<22} = {hexlit(32, rv)};")
    s = struct_of(c)
    if s:
        structs.append(s)


def gen_memory_x(cpu):
    """The firmware's MEMORY regions from the control core's map."""
    mems = {c.inst_name: c for c in cpu.children() if isinstance(c, MemNode)}
    L = ["/* GENERATED by scripts/regs.py from regs/hematite.rdl (hm_ctrl_cpu): do not edit. */",
         "/* The control core's memories, for firmware/link.x (INCLUDE memory.x). */",
         "MEMORY", "{"]
    for n, attr in (("IMEM", "rx"), ("DMEM", "rw"), ("XMEM", "rw")):
        m = mems[n]
        nbytes = mem_bytes(m)
        L.append(f"  {n} ({attr}) : ORIGIN = {m.raw_address_offset:#010x}, LENGTH = {nbytes // 1024}K")
    L.append("}")
    return "\n".join(L) + "\n"


def gen_sv(tops):
    L = []
    w = L.append
    w("// GENERATED by scripts/regs.py from regs/hematite.rdl: do not edit; edit the RDL and run")
    w("// `./hematite regs` (the suite fails when this file is stale). The register maps (BAR0, the")
    w("// engine's control bus, the control core's host port and address space): offsets, reset")
    w("// values and field layouts. One declaration per line (abi/build.rs reads it for")
    w("// hematite_abi::regs; scripts/elf2hex.py reads the HM_CPU_ lines).")
    w("package hm_regs_pkg;")
    structs = []
    for top in tops:
        pfx = top.get_property("hm_prefix")
        abits = top.get_property("hm_addr_bits")
        w("")
        w(f"  // {top.get_property('name')}: {first_sentence(top.get_property('desc'))}")
        for c in top.children():
            name = pfx + c.inst_name
            cmt = first_sentence(c.get_property("desc")) or c.get_property("name")
            if isinstance(c, RegNode):
                sv_reg(w, structs, name, abits, c, cmt)
            elif isinstance(c, RegfileNode) and c.get_property("hm_indexed"):
                words = c.size // 4
                rpfx = c.get_property("hm_prefix")
                w(f"  localparam logic [{abits - 1}:0] {name:<22} = {hexlit(abits, c.raw_address_offset)};  // {cmt}")
                w(f"  localparam logic [{abits - 1}:0] {name + '_WORDS':<22} = {abits}'d{words};")
                ib = clog2(words)
                for r in c.children():
                    rn = rpfx + r.inst_name
                    rc = first_sentence(r.get_property("desc")) or r.get_property("name")
                    w(f"  localparam logic [{ib - 1}:0]  {rn:<22} = {ib}'d{r.raw_address_offset // 4};  // {rc}")
                for r in c.children():
                    rn = rpfx + r.inst_name + "_RESET"
                    w(f"  localparam logic [31:0] {rn:<22} = {hexlit(32, reg_reset(r))};")
                    s = struct_of(r)
                    if s:
                        structs.append(s)
            elif isinstance(c, RegfileNode):
                # registers at their absolute offsets in this map, named with the file's prefix
                rpfx = c.get_property("hm_prefix")
                w(f"  localparam logic [{abits - 1}:0] {name:<22} = {hexlit(abits, c.raw_address_offset)};  // {cmt}")
                for r in c.children():
                    rc = first_sentence(r.get_property("desc")) or r.get_property("name")
                    sv_reg(w, structs, rpfx + r.inst_name, abits, r, rc, base=c.raw_address_offset)
            elif isinstance(c, MemNode):
                nbytes = mem_bytes(c)
                w(f"  localparam logic [{abits - 1}:0] {name:<22} = {hexlit(abits, c.raw_address_offset)};  // {cmt}")
                w(f"  localparam logic [{abits - 1}:0] {name + '_BYTES':<22} = {abits}'d{nbytes};")
            elif isinstance(c, AddrmapNode):
                nbytes = 1 << c.get_property("hm_addr_bits")
                w(f"  localparam logic [{abits - 1}:0] {name:<22} = {hexlit(abits, c.raw_address_offset)};  // {c.get_property('name')} ({c.inst_name}, {c.get_property('hm_prefix')}*)")
                w(f"  localparam logic [{abits - 1}:0] {name + '_BYTES':<22} = {abits}'d{nbytes};")
            else:
                raise SystemExit(f"{RDL}: {c.get_path()}: not supported by scripts/regs.py")
    seen = {}
    for tname, fields in structs:
        if tname in seen:
            if seen[tname] != fields:
                raise SystemExit(f"{RDL}: two layouts named {tname}")
            continue
        seen[tname] = fields
        w("")
        w("  typedef struct packed {")
        for fname, msb, lsb, desc in fields:
            ty = "logic" if msb == lsb else f"logic [{msb - lsb}:0]"
            line = f"    {ty:<12} {fname};"
            if desc:
                line = f"{line:<34}// {' '.join(desc.split())}"
            w(line.rstrip())
        w(f"  }} {tname};")
    w("endpackage")
    return "\n".join(L) + "\n"


def access(node):
    sw = node.get_property("sw").name
    return {"r": "RO", "w": "WO", "rw": "RW"}.get(sw, sw.upper())


def reg_access(reg):
    acc = {access(f) for f in reg.fields()}
    return acc.pop() if len(acc) == 1 else "mixed"


def md_fields(reg):
    rows = []
    for f in sorted(reg.fields(), key=lambda f: -f.high):
        if len(list(reg.fields())) == 1 and f.high - f.low + 1 == reg.get_property("regwidth"):
            return []
        bits = f"[{f.high}]" if f.high == f.low else f"[{f.high}:{f.low}]"
        r = f.get_property("reset")
        rs = "" if r is None else f"{r:#x}"
        rows.append(f"| | `{bits}` {f.inst_name} | {access(f)} | {rs} | {' '.join((f.get_property('desc') or '').split())} |")
    return rows


def md_span(reg, base):
    """(offset or offset range, name or name[N]) of a register or register array at base."""
    off = base + reg.raw_address_offset
    if not reg.is_array:
        return f"{off:#06x}", reg.inst_name
    n = reg.array_dimensions[0]
    return f"{off:#06x}..{off + 4 * n - 1:#06x}", f"{reg.inst_name}[{n}]"


def gen_md(tops):
    L = []
    w = L.append
    w("# Register maps")
    w("")
    w("GENERATED by `scripts/regs.py` from `regs/hematite.rdl` (the one description; edit it and")
    w("run `./hematite regs`; the suite fails when this file is stale). The same description")
    w("generates `rtl/pkg/hm_regs_pkg.sv` (from which `hematite_abi::regs` is generated) and the C")
    w(f"headers in `{C_DIR}/`. All registers are 32 bits wide and 32-bit aligned.")
    for top in tops:
        pfx = top.get_property("hm_prefix")
        w("")
        w(f"## {top.get_property('name')} (`{top.inst_name}`, constants `{pfx}*`)")
        w("")
        w(" ".join(top.get_property("desc").split()))
        w("")
        w("| Offset | Register | Access | Reset | Description |")
        w("|---|---|---|---|---|")
        for c in top.children():
            if isinstance(c, RegNode):
                off, nm = md_span(c, 0)
                rv = reg_reset(c)
                desc = " ".join((c.get_property("desc") or c.get_property("name")).split())
                w(f"| `{off}` | **{nm}** | {reg_access(c)} | {rv:#x} | {c.get_property('name')}: {desc} |")
                L.extend(md_fields(c))
            elif isinstance(c, RegfileNode):
                base = c.raw_address_offset
                desc = " ".join(c.get_property("desc").split())
                w(f"| `{base:#06x}..{base + c.size - 1:#06x}` | **{c.inst_name}** | | | {c.get_property('name')}: {desc} |")
                for r in c.children():
                    rdesc = " ".join((r.get_property("desc") or "").split())
                    off, nm = md_span(r, base)
                    w(f"| `{off}` | {c.inst_name}.**{nm}** | {reg_access(r)} | {reg_reset(r):#x} | {r.get_property('name')}{': ' + rdesc if rdesc else ''} |")
                    L.extend(md_fields(r))
            elif isinstance(c, MemNode):
                base = c.raw_address_offset
                nbytes = mem_bytes(c)
                desc = " ".join((c.get_property("desc") or "").split())
                w(f"| `{base:#06x}..{base + nbytes - 1:#06x}` | **{c.inst_name}** | {access(c)} | | {c.get_property('name')} ({nbytes // 1024} KiB): {desc} |")
            elif isinstance(c, AddrmapNode):
                base = c.raw_address_offset
                nbytes = 1 << c.get_property("hm_addr_bits")
                w(f"| `{base:#06x}..{base + nbytes - 1:#06x}` | **{c.inst_name}** | | | {c.get_property('name')}: the map `{c.type_name}` above |")
    return "\n".join(L) + "\n"


def compiler():
    rdlc = RDLCompiler()
    for u in ALL_UDPS:           # PeakRDL-regblock's own properties, declared for the compiler
        rdlc.register_udp(u)
    rdlc.compile_file(os.path.join(ROOT, RDL))
    return rdlc


# What hm_ctl relies on in the generated block, checked on its text: it never stalls, it
# answers a write and a read in the cycle of the request (no retiming), and a write is never
# refused. A PeakRDL-regblock version or option that changes any of these fails here.
CC_TIMING = [
    "assign cpuif_req_stall_rd = '0;",
    "assign cpuif_req_stall_wr = '0;",
    "assign cpuif_wr_ack = decoded_req & decoded_req_is_wr;",
    "assign cpuif_wr_err = '0;",
    "assign cpuif_rd_ack = readback_done;",
    "assign cpuif_rd_data = readback_data;",
    "readback_done = decoded_req & ~decoded_req_is_wr;",
    "assign decoded_req = cpuif_req_masked;",
    "assign decoded_addr = cpuif_addr;",
    "assign decoded_req_is_wr = cpuif_req_is_wr;",
]


def gen_cc_wrap(top):
    """The wrapper of the regblock for hm_ctl: one access a cycle by word index, answered in
    the same cycle, and every register as a word of its HM_CC_* index with its fields in
    place (reserved bits 0)."""
    (rf,) = [c for c in top.children() if isinstance(c, RegfileNode)]
    regs = list(rf.children())
    n = len(regs)
    assert rf.raw_address_offset == 0, "the CC regfile at offset 0 of its addrmap"
    assert all(r.raw_address_offset == 4 * i and r.get_property("regwidth") == 32 for i, r in enumerate(regs)), \
        "CC registers: one 32-bit word each, in order"
    assert n & (n - 1) == 0, "CC registers: a power of two of words"
    ib = clog2(n)
    L = []
    w = L.append
    w(f"// GENERATED by scripts/regs.py from {RDL} ({CC_MAP}): do not edit.")
    w("// The congestion-control register file for rtl/csr/hm_ctl.sv: the register block that")
    w(f"// PeakRDL-regblock generates for the addrmap {CC_MAP} (module {CC_MAP}, passthrough CPU")
    w("// interface, no retiming, no stalls: scripts/regs.py checks that an access is answered in")
    w("// its own cycle), addressed by word index with byte strobes, and its fields put back into")
    w("// words at their HM_CC_* indices.")
    w(f"module {CC_WRAP} (")
    w("  input  logic                clk,")
    w("  input  logic                rst,")
    w("")
    w("  // One access a cycle, a write (byte strobes) or a read, done in its cycle: rd_data and")
    w("  // err (the access refused) answer it combinationally")
    w("  input  logic                req,")
    w("  input  logic                req_wr,")
    w(f"  input  logic [{ib - 1}:0]          word,")
    w("  input  logic [31:0]         wr_data,")
    w("  input  logic [3:0]          wr_strb,")
    w("  output logic [31:0]         rd_data,")
    w("  output logic                err,")
    w("")
    w("  // The registers, word i = HM_CC_* index i (reserved bits 0)")
    w(f"  output logic [{n - 1}:0][31:0]  words")
    w(");")
    w(f"  {CC_MAP}_pkg::{CC_MAP}__out_t hwif_out;")
    w("  logic rd_ack, rd_err, wr_ack, wr_err, stall_rd, stall_wr;")
    w("")
    w(f"  {CC_MAP} u_regs (")
    w("    .clk, .rst,")
    w("    .s_cpuif_req(req), .s_cpuif_req_is_wr(req_wr), .s_cpuif_addr({word, 2'b00}),")
    w("    .s_cpuif_wr_data(wr_data),")
    w("    .s_cpuif_wr_biten({{8{wr_strb[3]}}, {8{wr_strb[2]}}, {8{wr_strb[1]}}, {8{wr_strb[0]}}}),")
    w("    .s_cpuif_req_stall_wr(stall_wr), .s_cpuif_req_stall_rd(stall_rd),")
    w("    .s_cpuif_rd_ack(rd_ack), .s_cpuif_rd_err(rd_err), .s_cpuif_rd_data(rd_data),")
    w("    .s_cpuif_wr_ack(wr_ack), .s_cpuif_wr_err(wr_err),")
    w("    .hwif_out")
    w("  );")
    w("  assign err = rd_err || wr_err;")
    w("")
    w("  // the acknowledgements equal the request and the stalls are 0 (checked by the generator)")
    w("  logic unused_ok;")
    w("  assign unused_ok = ^{rd_ack, wr_ack, stall_rd, stall_wr};")
    w("")
    w("  always_comb begin")
    w("    words = '0;")
    for i, r in enumerate(regs):
        for f in sorted(r.fields(), key=lambda f: f.low):
            sl = f"[{f.high}:{f.low}]" if f.high != f.low else f"[{f.low}]"
            w(f"    words[{i}]{sl} = hwif_out.{rf.inst_name}.{r.inst_name}.{f.inst_name}.value;  // {r.inst_name}.{f.inst_name}")
    w("  end")
    w("endmodule")
    return "\n".join(L) + "\n"


def generate_rtl(outdir):
    """The build-time RTL: PeakRDL-regblock's register blocks of hm_cc_regs (with its wrapper)
    and hm_shell_regs.
    Returns {relative path: text}."""
    rdlc = compiler()
    root = rdlc.elaborate(CC_MAP, CC_MAP)
    with tempfile.TemporaryDirectory() as tmp:
        RegblockExporter().export(root.top, tmp, cpuif_cls=PassthroughCpuif, module_name=CC_MAP,
                                  package_name=f"{CC_MAP}_pkg", default_reset_activelow=False,
                                  default_reset_async=False)
        outs = {}
        for f in (f"{CC_MAP}_pkg.sv", f"{CC_MAP}.sv"):
            with open(os.path.join(tmp, f)) as fh:
                outs[f"{RTL_DIR}/{f}"] = (f"// GENERATED by scripts/regs.py from {RDL} ({CC_MAP}, PeakRDL-regblock): "
                                          "do not edit\n" + fh.read())
    block = " ".join(outs[f"{RTL_DIR}/{CC_MAP}.sv"].split())
    # the wrapper's words put each field where the block's own readback puts it
    (rf,) = [c for c in root.top.children() if isinstance(c, RegfileNode)]
    fields = [f"readback_data_var[{f.high}:{f.low}] = field_storage.{rf.inst_name}.{r.inst_name}.{f.inst_name}.value;"
              if f.high != f.low else
              f"readback_data_var[{f.low}] = field_storage.{rf.inst_name}.{r.inst_name}.{f.inst_name}.value;"
              for r in rf.children() for f in r.fields()]
    missing = [t for t in CC_TIMING + fields if t not in block]
    if missing:
        sys.exit(f"regs.py: PeakRDL-regblock's {CC_MAP} no longer answers as hm_ctl expects (same cycle, "
                 f"no stall, writes never refused, fields where the wrapper puts them): not found: {missing}")
    outs[f"{RTL_DIR}/{CC_WRAP}.sv"] = gen_cc_wrap(root.top)
    # the shell's block, as PeakRDL-regblock writes it (AXI4-Lite; hm_card.sv instantiates it)
    sroot = rdlc.elaborate(SHELL_MAP, SHELL_MAP)
    with tempfile.TemporaryDirectory() as tmp:
        RegblockExporter().export(sroot.top, tmp, cpuif_cls=AXI4Lite_Cpuif_flattened, module_name=SHELL_MAP,
                                  package_name=f"{SHELL_MAP}_pkg", default_reset_activelow=False,
                                  default_reset_async=False, address_width=12,
                                  err_if_bad_addr=True, err_if_bad_rw=True)
        for f in (f"{SHELL_MAP}_pkg.sv", f"{SHELL_MAP}.sv"):
            with open(os.path.join(tmp, f)) as fh:
                outs[f"{RTL_DIR}/{f}"] = (f"// GENERATED by scripts/regs.py from {RDL} ({SHELL_MAP}, PeakRDL-regblock): "
                                          "do not edit\n" + fh.read())
    return outs


def write_rtl():
    """Writes the build-time RTL into the repository's build/gen/rtl, only what changed (so
    that a Verilator build that depends on it is not redone for nothing)."""
    for rel, text in generate_rtl(ROOT).items():
        p = os.path.join(ROOT, rel)
        if os.path.exists(p) and open(p).read() == text:
            continue
        os.makedirs(os.path.dirname(p), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(p), prefix=".regs-")
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.replace(tmp, p)
        print(f"regs: wrote {rel}")


def generate(outdir):
    rdlc = compiler()
    tops = []
    for m in MAPS:
        root = rdlc.elaborate(m, m)
        tops.append(root.top)
        if m not in C_MAPS:
            continue
        hdr = os.path.join(outdir, C_DIR, f"{m}.h")
        os.makedirs(os.path.dirname(hdr), exist_ok=True)
        CHeaderExporter().export(root.top, hdr, generate_bitfields=False, instantiate=False)
        # a generated marker after the exporter's own banner
        with open(hdr) as fh:
            txt = fh.read()
        with open(hdr, "w") as fh:
            fh.write(f"// GENERATED by scripts/regs.py from {RDL} (PeakRDL-cheader): do not edit\n" + txt)
    outs = {SV_OUT: gen_sv(tops), MD_OUT: gen_md(tops), MEM_OUT: gen_memory_x(tops[MAPS.index("hm_ctrl_cpu")])}
    for rel, text in outs.items():
        p = os.path.join(outdir, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w") as fh:
            fh.write(text)
    return [SV_OUT, MD_OUT, MEM_OUT] + [f"{C_DIR}/{m}.h" for m in C_MAPS]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="fail when a checked-in output is stale")
    ap.add_argument("--rtl", action="store_true", help="write only the build-time RTL (build/gen/rtl)")
    a = ap.parse_args()
    if a.rtl:
        write_rtl()
        return 0
    if not a.check:
        for rel in generate(ROOT):
            print(f"regs: wrote {rel}")
        write_rtl()
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        stale = 0
        for rel in generate(tmp):
            new = open(os.path.join(tmp, rel)).read().splitlines(keepends=True)
            path = os.path.join(ROOT, rel)
            old = open(path).read().splitlines(keepends=True) if os.path.exists(path) else []
            if new != old:
                stale += 1
                sys.stdout.writelines(difflib.unified_diff(old, new, f"a/{rel}", f"b/{rel}", n=1))
                print(f"regs: {rel} is stale: run ./hematite regs")
        extra = sorted(set(os.listdir(os.path.join(ROOT, C_DIR))) - {f"{m}.h" for m in C_MAPS})
        for f in extra:
            stale += 1
            print(f"regs: {C_DIR}/{f} is not generated from {RDL}: remove it")
        if stale:
            return 1
        print(f"regs: {RDL} -> {SV_OUT}, {MD_OUT}, {MEM_OUT}, {C_DIR}/*.h: up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
