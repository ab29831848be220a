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
