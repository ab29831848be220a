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


def pcie_endpoint(dut, **extra):
    """cocotbext-pcie's UltraScale+ PCIe block model as the shell configures the block (Gen3 x16,
    250 MHz user clock, 512 bits DWORD-aligned, client tags, no extended tags, max payload
    1024), its requester interfaces on the DUT's m_axis_rq / s_axis_rc and its configuration
    status on cfg_max_payload / cfg_max_read_req, behind a root complex; `extra` adds to the
    model's arguments (the completer interfaces, MSI-X). Returns (root complex, model), with
    their logs quiet."""
    from cocotbext.pcie.core import RootComplex
    from cocotbext.pcie.xilinx.us import UltraScalePlusPcieDevice
    rc = RootComplex()
    dev = UltraScalePlusPcieDevice(
        pcie_generation=3, pcie_link_width=16, user_clk_frequency=250e6, alignment="dword",
        max_payload_size=1024, enable_client_tag=True, enable_extended_tag=False,
        user_clk=dut.clk, user_reset=dut.rst,
        rq_bus=bus(dut, "m_axis_rq"), rc_bus=bus(dut, "s_axis_rc"),
        cfg_max_payload=dut.cfg_max_payload, cfg_max_read_req=dut.cfg_max_read_req, **extra)
    for x in (rc, dev, dev.functions[0], dev.rq_sink, dev.rc_source, dev.cq_source, dev.cc_sink):
        if x is not None:
            x.log.setLevel(logging.WARNING)
    rc.make_port().connect(dev)
    return rc, dev


# The function as the shell presents it (hm_pcie_ep, boards/u55c/ip.tcl): the placeholder PCI
# IDs the host side discovers (run/src/cards.rs PLACEHOLDER_IDS), BAR 0 (engine, control core,
# MSI-X, shell registers), BAR 2 (the push window: 64 B per QP, 65,536 QPs), 32 MSI-X vectors
# with the table and PBA in BAR 0.
VENDOR, DEVICE = 0x10ee, 0x903f
BAR0 = 1 << 18
BAR2 = 1 << 22
NUM_VEC = 32
MSIX_TABLE, MSIX_PBA = 0x20000, 0x20800


def shell_endpoint(dut):
    """pcie_endpoint with the shell's completer interfaces, MSI-X (external table) and function
    (IDs, BAR 0, BAR 2) on the DUT's ports, as hm_pcie_ep and hm_card have them."""
    rc, dev = pcie_endpoint(
        dut, pf0_msix_enable=True, pf0_msix_table_size=NUM_VEC - 1, pf0_msix_table_bir=0,
        pf0_msix_table_offset=MSIX_TABLE, pf0_msix_pba_bir=0, pf0_msix_pba_offset=MSIX_PBA,
        cq_bus=bus(dut, "s_axis_cq"), cc_bus=bus(dut, "m_axis_cc"),
        cfg_function_status=dut.cfg_function_status,
        cfg_interrupt_msix_enable=dut.cfg_interrupt_msix_enable,
        cfg_interrupt_msix_mask=dut.cfg_interrupt_msix_mask,
        cfg_interrupt_msix_address=dut.cfg_interrupt_msix_address,
        cfg_interrupt_msix_data=dut.cfg_interrupt_msix_data,
        cfg_interrupt_msix_int=dut.cfg_interrupt_msix_int,
        cfg_interrupt_msix_sent=dut.cfg_interrupt_msix_sent,
        cfg_interrupt_msix_fail=dut.cfg_interrupt_msix_fail)
    f = dev.functions[0]
    f.vendor_id, f.device_id = VENDOR, DEVICE
    f.configure_bar(0, BAR0)
    f.configure_bar(2, BAR2, ext=True, prefetch=True)
    return rc, dev


async def flr(dut, limit=4000):
    """A function-level reset as the PCIe block signals it: cfg_flr_in_process until the
    function answers cfg_flr_done (at most `limit` clocks), then 10 clocks."""
    from cocotb.triggers import ClockCycles, RisingEdge
    dut.cfg_flr_in_process.value = 1
    for _ in range(limit):
        await RisingEdge(dut.clk)
        if int(dut.cfg_flr_done.value) & 1:
            break
    else:
        raise AssertionError("no cfg_flr_done")
    dut.cfg_flr_in_process.value = 0
    await ClockCycles(dut.clk, 10)


async def read_fails(bar, addr, us=50):
    """True when a read of addr in the BAR window completes with an error (the root complex's
    model raises on an unsuccessful completion, or returns all ones)."""
    from cocotb.triggers import with_timeout
    try:
        return await with_timeout(bar.read_dword(addr), us, "us") == 0xffffffff
    except Exception as e:
        return "Unsuccessful" in str(e)


def dma_master(dut, reset):
    """cocotbext-axi's AXI4 master on the DUT's s_axi, standing for the engine's DMA: bursts of
    at most 64 beats, as hm_dma_rd / hm_dma_wr issue them."""
    from cocotbext.axi import AxiBus, AxiMaster
    m = AxiMaster(AxiBus.from_prefix(dut, "s_axi", case_insensitive=False), dut.clk, reset, max_burst_len=64)
    quiet(m.write_if, m.read_if)
    return m


async def wait_reset(dut):
    """Until the model's user reset has gone up and come down again."""
    from cocotb.triggers import RisingEdge
    while not int(dut.rst.value):
        await RisingEdge(dut.clk)
    while int(dut.rst.value):
        await RisingEdge(dut.clk)


async def inject_np(rc, dev, tt, addr, length=None, data=None, bar=0, aperture=18):
    """One non-posted request of type tt (cocotbext-pcie's TlpType) to `addr` (length bytes, or
    data), and its one completion. The root complex model routes memory reads and writes only
    (its switch and function models stop at a locked read or an AtomicOp), so the request goes
    into the block model's completer queue as the block would pass it (BAR `bar` of `aperture`
    address bits), and its completion comes back to the root complex as usual."""
    from cocotbext.pcie.core.tlp import Tlp
    from cocotbext.pcie.core.utils import PcieId
    from cocotbext.pcie.xilinx.us.tlp import Tlp_us
    t = Tlp()
    t.fmt_type = tt
    t.requester_id = PcieId(0, 0, 0)
    if data is not None:
        t.set_addr_be_data(addr, data)
    else:
        t.set_addr_be(addr, length)
    t.tag = await rc.alloc_tag()
    u = Tlp_us(t)
    u.bar_id = bar
    u.bar_aperture = aperture
    u.completer_id = dev.functions[0].pcie_id
    dev.cq_queue.put_nowait(u)
    cpl = await rc.recv_cpl(t.tag, 50, "us")
    rc.release_tag(t.tag)
    assert cpl is not None, f"no completion for {tt}"
    return cpl


async def posted_write(rc, addr, data):
    """A memory write TLP of `data` at `addr` as it is, whatever its length (the root complex's
    own writes are cut at the max payload size)."""
    from cocotbext.pcie.core.tlp import Tlp, TlpType
    from cocotbext.pcie.core.utils import PcieId
    t = Tlp()
    t.fmt_type = TlpType.MEM_WRITE
    t.requester_id = PcieId(0, 0, 0)
    t.set_addr_be_data(addr, data)
    await rc.perform_posted_operation(t)
