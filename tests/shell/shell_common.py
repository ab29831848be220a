"""What the shell's cocotb tests share: the two clocks, the 100 GbE beat pattern, and the
AXI-Stream bus and log helpers for cocotbext-axi."""
import logging

from cocotbext.axi import AxiStreamBus

MAC_PS = 3104          # 322.265625 MHz is 3103.03 ps; cocotb needs an even number of ps
CORE_PS = 4000         # 250 MHz
BEAT = 64              # bytes per beat (512 bits)
# 100 GbE at the MAC clock: 3 beats in 5 clocks (193 M beats/s, 99 Gb/s of 64-byte beats), which
# is what the CMAC's 512-bit interface carries at line rate; the core reads up to 250 M beats/s
MAC_100G = (False, False, False, True, True)


def bus(dut, prefix):
    # (case_insensitive=False: the default case-insensitive lookup lists every object of the
    # design, and under cocotb 1.8 with Verilator that rebinds the port handles to the internal
    # copies of the ports, so that writes to them no longer reach the model)
    return AxiStreamBus.from_prefix(dut, prefix, case_insensitive=False)


def quiet(*ends):
    """cocotbext-axi logs every frame at INFO: keep the suite's log to the results."""
    for e in ends:
        e.log.setLevel(logging.WARNING)
    return ends


async def sideband_monitor(dut, prefix, sop_bit, eop_bit, ptr_lo, errors):
    """Checks the UltraScale+ PCIe interfaces' sideband on every beat taken on `prefix`: is_sop
    (bit sop_bit) on a TLP's first beat only, is_eop (eop_bit) on its last only, and is_eop0_ptr
    (4 bits at ptr_lo) the last DWORD that tkeep keeps. (cocotbext-pcie's sinks with one segment
    follow tkeep and tlast, so they would not notice.) Mismatches are appended to `errors`."""
    from cocotb.triggers import RisingEdge
    sig = {n: getattr(dut, f"{prefix}_{n}") for n in ("tvalid", "tready", "tuser", "tkeep", "tlast")}
    inside = False
    while True:
        await RisingEdge(dut.clk)
        if not (int(sig["tvalid"].value) and int(sig["tready"].value)):
            continue
        u, keep, last = int(sig["tuser"].value), int(sig["tkeep"].value), int(sig["tlast"].value)
        if bool(u >> sop_bit & 1) == inside:
            errors.append(f"{prefix}: is_sop {u >> sop_bit & 1} {'inside' if inside else 'at the start of'} a TLP")
        if bool(u >> eop_bit & 1) != bool(last):
            errors.append(f"{prefix}: is_eop {u >> eop_bit & 1} with tlast {last}")
        if last and (u >> ptr_lo & 0xf) != keep.bit_length() - 1:
            errors.append(f"{prefix}: eop pointer {u >> ptr_lo & 0xf}, tkeep {keep:#x}")
        inside = not last
