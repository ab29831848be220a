#!/usr/bin/env python3
"""Turns the control-core firmware ELF into a $readmemh file for IMEM.

Usage: elf2hex.py FIRMWARE.elf OUT.hex [--imem-bytes N]

Writes one 32-bit little-endian word per line (8 hex digits) from IMEM address 0 up to the end
of the last PT_LOAD segment whose physical (load) address lies in IMEM; gaps are zero-filled.
Prints the text (code + rodata), data (.data load image) and bss sizes. Fails loudly when the
file is not a little-endian ELF32 RISC-V executable, when a loaded segment does not fit IMEM,
or when .data + .bss do not fit DMEM (or .xmem XMEM, which is never loaded). Own program-header parser, Python standard library only.
"""
import struct
import sys

import os
import re


def _map_const(name):
    """A `localparam logic [31:0] NAME = 32'hX;` (or 'dX) of rtl/pkg/hm_regs_pkg.sv, the
    package generated from regs/hematite.rdl (map hm_ctrl_cpu)."""
    src = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "rtl", "pkg", "hm_regs_pkg.sv")).read()
    m = re.search(rf"localparam logic \[31:0\] {name} += 32'([hd])([0-9A-Fa-f_]+);", src)
    if not m:
        sys.exit(f"elf2hex: {name} not found in rtl/pkg/hm_regs_pkg.sv")
    return int(m.group(2).replace("_", ""), 16 if m.group(1) == "h" else 10)


IMEM_BASE, IMEM_BYTES = _map_const("HM_CPU_IMEM"), _map_const("HM_CPU_IMEM_BYTES")
DMEM_BASE, DMEM_BYTES = _map_const("HM_CPU_DMEM"), _map_const("HM_CPU_DMEM_BYTES")
XMEM_BASE, XMEM_BYTES = _map_const("HM_CPU_XMEM"), _map_const("HM_CPU_XMEM_BYTES")
PT_LOAD = 1
PF_X = 1
EM_RISCV = 243


def die(msg):
    sys.exit(f"elf2hex: error: {msg}")


def main(argv):
    args = [a for a in argv[1:]]
    imem = IMEM_BYTES
    if "--imem-bytes" in args:
        i = args.index("--imem-bytes")
        imem = int(args[i + 1], 0)
        del args[i : i + 2]
    if len(args) != 2:
        die("usage: elf2hex.py FIRMWARE.elf OUT.hex [--imem-bytes N]")
    elf_path, out_path = args
    data = open(elf_path, "rb").read()
    if len(data) < 52 or data[:4] != b"\x7fELF":
        die(f"{elf_path}: not an ELF file")
    if data[4] != 1 or data[5] != 1:
        die(f"{elf_path}: not ELF32 little-endian")
    (e_type, e_machine, _ver, e_entry, e_phoff, _shoff, _flags, _ehsize, e_phentsize, e_phnum) = struct.unpack_from(
        "<HHIIIIIHHH", data, 16
    )
    if e_type != 2 or e_machine != EM_RISCV:
        die(f"{elf_path}: not a RISC-V executable (type {e_type}, machine {e_machine})")
    if e_phentsize < 32 or e_phoff + e_phnum * e_phentsize > len(data):
        die(f"{elf_path}: bad program header table")
    if e_entry != IMEM_BASE:
        die(f"entry point {e_entry:#x} is not the IMEM base {IMEM_BASE:#x}")
    image = bytearray()
    text = data_sz = bss = xmem = 0
    for i in range(e_phnum):
        p_type, p_offset, p_vaddr, p_paddr, p_filesz, p_memsz, p_flags, _align = struct.unpack_from(
            "<IIIIIIII", data, e_phoff + i * e_phentsize
        )
        if p_type != PT_LOAD or p_memsz == 0:
            continue
        in_imem = IMEM_BASE <= p_paddr < IMEM_BASE + imem
        in_dmem = DMEM_BASE <= p_vaddr < DMEM_BASE + DMEM_BYTES
        in_xmem = XMEM_BASE <= p_vaddr < XMEM_BASE + XMEM_BYTES
        if in_xmem:
            # the XMEM tables: no contents (not loaded, not cleared)
            if p_filesz:
                die(f"segment {i} in XMEM has file data (XMEM is never loaded)")
            if p_vaddr + p_memsz > XMEM_BASE + XMEM_BYTES:
                die(f"segment {i} ({p_vaddr:#x}+{p_memsz:#x}) does not fit XMEM")
            xmem += p_memsz
            continue
        if p_filesz:
            if not in_imem:
                die(f"segment {i} with file data at load address {p_paddr:#x} is outside IMEM")
            end = p_paddr - IMEM_BASE + p_filesz
            if end > imem:
                die(f"segment {i} ends at {end:#x}, beyond IMEM ({imem} bytes)")
            if p_offset + p_filesz > len(data):
                die(f"segment {i} extends beyond the file")
            if len(image) < end:
                image.extend(b"\0" * (end - len(image)))
            image[p_paddr - IMEM_BASE : end] = data[p_offset : p_offset + p_filesz]
        if in_dmem:
            if p_vaddr + p_memsz > DMEM_BASE + DMEM_BYTES:
                die(f"segment {i} ({p_vaddr:#x}+{p_memsz:#x}) does not fit DMEM")
            data_sz += p_filesz
            bss += p_memsz - p_filesz
        elif in_imem and p_vaddr == p_paddr:
            if p_memsz != p_filesz:
                die(f"segment {i} in IMEM has memsz != filesz (IMEM is not writable)")
            text += p_filesz
        else:
            die(f"segment {i} at {p_vaddr:#x} (load {p_paddr:#x}) is neither in IMEM, DMEM nor XMEM")
    if not image:
        die("no loadable segment in IMEM")
    image.extend(b"\0" * (-len(image) % 4))
    with open(out_path, "w") as f:
        for off in range(0, len(image), 4):
            f.write(f"{struct.unpack_from('<I', image, off)[0]:08x}\n")
    print(f"text {text} data {data_sz} bss {bss} bytes; IMEM image {len(image)} of {imem} bytes "
          f"({len(image) // 4} words); DMEM static {data_sz + bss} of {DMEM_BYTES} bytes; XMEM {xmem} of {XMEM_BYTES} bytes "
          f"-> {out_path}")


if __name__ == "__main__":
    main(sys.argv)
