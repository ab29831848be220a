"""cocotb tests of rtl/shell/hm_pcie_ep.sv, the shell's PCIe side (the completer hm_pcie_cq, the
BAR 0 decode, MSI-X and the DMA bridge), against cocotbext-pcie's model of the UltraScale+ PCIe
block behind its root complex: the host enumerates the function, sizes and maps its BARs,
reaches the register blocks through BAR 0 (here cocotbext-axi AXI4-Lite RAMs stand for the
engine's and the control core's), pushes through the push window (BAR 2), sets up MSI-X and
takes the interrupts, and the core side's DMA reaches host memory.
tests/shell/run.py builds it with 32 vectors, a 64-clock MSI-X answer timeout and a 256-clock
DMA timeout tick.
"""
import cocotb
from cocotb.triggers import ClockCycles, Event, RisingEdge, with_timeout
from cocotbext.axi import AxiLiteBus, AxiLiteRam
from cocotbext.pcie.core.caps import PciCapId

from shell_common import (BAR0, BAR2, DEVICE, MSIX_PBA, MSIX_TABLE, NUM_VEC, VENDOR, dma_master, inject_np,
                          posted_write, quiet, read_fails, shell_endpoint, sideband_monitor, wait_reset)



class Tb:
    def __init__(self, dut):
        self.dut = dut
        self.rc, self.dev = shell_endpoint(dut)
        # (the register blocks: in reset with the core, by an FLR too)
        self.eng = AxiLiteRam(AxiLiteBus.from_prefix(dut, "m_eng_axil", case_insensitive=False), dut.clk,
                              dut.core_rst, size=1 << 16)
        self.ctl = AxiLiteRam(AxiLiteBus.from_prefix(dut, "m_ctl_axil", case_insensitive=False), dut.clk,
                              dut.core_rst, size=1 << 16)
        self.shl = AxiLiteRam(AxiLiteBus.from_prefix(dut, "m_shl_axil", case_insensitive=False), dut.clk,
                              dut.core_rst, size=1 << 12)
        # (the engine's DMA master: reset with the core, by an FLR too)
        self.axi = dma_master(dut, dut.core_rst)
        quiet(self.eng.write_if, self.eng.read_if, self.ctl.write_if, self.ctl.read_if,
              self.shl.write_if, self.shl.read_if)
        self.pushes = []
        self.pci = None
        self.sb_errors = []            # sideband mismatches on RQ/CC (sideband_monitor)

    async def start(self):
        d = self.dut
        d.s_irq_valid.value = 0
        d.s_irq_vec.value = 0
        d.m_push_ready.value = 0
        d.cfg_flr_in_process.value = 0
        await RisingEdge(d.clk)
        await wait_reset(d)
        await self.rc.enumerate()
        self.pci = self.rc.find_device(self.dev.functions[0].pcie_id)
        cocotb.start_soon(sideband_monitor(d, "m_axis_rq", 20, 26, 28, self.sb_errors))
        cocotb.start_soon(sideband_monitor(d, "m_axis_cc", 0, 6, 8, self.sb_errors))
        cocotb.start_soon(self._push_sink())

    async def _push_sink(self):
        d = self.dut
        while True:
            d.m_push_ready.value = 1
            await RisingEdge(d.clk)
            if int(d.m_push_valid.value) and int(d.m_push_ready.value):
                self.pushes.append((int(d.m_push_qpn.value), int(d.m_push_data.value).to_bytes(64, "little")))

    async def irq(self, vec):
        d = self.dut
        d.s_irq_vec.value = vec
        d.s_irq_valid.value = 1
        await RisingEdge(d.clk)
        while not int(d.s_irq_ready.value):
            await RisingEdge(d.clk)
        d.s_irq_valid.value = 0

    def cq(self, name):
        return int(getattr(self.dut.u_cq, "stat_" + name).value)


@cocotb.test()
async def enumeration_bars_and_mmio(dut):
    """Enumeration: the IDs, BAR 0 (256 KiB) and the 64-bit prefetchable push BAR (4 MiB) sized
    and mapped, the MSI-X capability (32 vectors, table and PBA in BAR 0). MMIO: 32- and 64-bit
    and byte writes and reads reach the engine's or the control core's block by address; a
    64-byte read is 16 accesses in one completion; reserved space reads as an error; 64-byte
    writes to the push window are pushes, anything else there is dropped and counted."""
    tb = Tb(dut)
    await tb.start()
    pci = tb.pci
    assert await pci.config_read_word(0x00) == VENDOR and await pci.config_read_word(0x02) == DEVICE
    assert pci.bar_size[0] == BAR0 and pci.bar_size[2] == BAR2, pci.bar_size
    assert pci.get_capability_offset(PciCapId.MSIX), "no MSI-X capability"
    assert await pci.msix_vec_count() == NUM_VEC
    table = await pci.capability_read_dword(PciCapId.MSIX, 4)
    pba = await pci.capability_read_dword(PciCapId.MSIX, 8)
    assert (table & 7, table & ~7, pba & 7, pba & ~7) == (0, MSIX_TABLE, 0, MSIX_PBA)
    await pci.enable_device()
    bar0, bar2 = pci.bar_window[0], pci.bar_window[2]

    # 32-bit: the engine below 0x10000, the control core above
    await bar0.write_dword(0x0010, 0x11223344)
    await bar0.write_dword(0x10020, 0x55667788)
    assert await bar0.read_dword(0x0010) == 0x11223344
    assert await bar0.read_dword(0x10020) == 0x55667788
    assert tb.eng.read(0x10, 4) == (0x11223344).to_bytes(4, "little")
    assert tb.ctl.read(0x20, 4) == (0x55667788).to_bytes(4, "little")
    assert tb.eng.read(0x20, 4) == b"\0" * 4
    # 64-bit, a byte, 64 bytes
    await bar0.write_qword(0x0100, 0x0123456789abcdef)
    assert await bar0.read_qword(0x0100) == 0x0123456789abcdef
    assert tb.eng.read(0x100, 8) == (0x0123456789abcdef).to_bytes(8, "little")
    await bar0.write_byte(0x0102, 0xee)
    assert await bar0.read_dword(0x0100) == 0x89eecdef          # (after the posted write)
    assert tb.eng.read(0x100, 4) == bytes([0xef, 0xcd, 0xee, 0x89])
    tb.eng.write(0x400, bytes(range(64)))
    assert await bar0.read(0x400, 64) == bytes(range(64))
    assert await bar0.read(0x403, 6) == bytes(range(3, 9))
    assert tb.cq("mmio_rd") >= 5 and tb.cq("axil_err") == 0
    # the shell's register window (0x30000..0x30fff)
    await bar0.write_dword(0x30004, 0x01020304)
    assert await bar0.read_dword(0x30004) == 0x01020304    # (after the posted write)
    assert tb.shl.read(0x004, 4) == bytes([4, 3, 2, 1])
    tb.shl.write(0xffc, bytes([9, 8, 7, 6]))
    assert await bar0.read_dword(0x30ffc) == 0x06070809
    assert tb.eng.read(0x004, 4) != bytes([4, 3, 2, 1]) and tb.ctl.read(0x004, 4) != bytes([4, 3, 2, 1])
    # reserved space (here 0x31000, past the shell's window): a read answers an error
    # (Completer Abort), a write is dropped
    before = tb.cq("axil_err")
    assert await read_fails(bar0, 0x31000, 20), "a read of reserved space completed normally"
    await bar0.write_dword(0x31000, 1)
    await bar0.read_dword(0x0010)   # (after the posted write)
    assert tb.cq("axil_err") == before + 2
    assert int(dut.stat_axil_err.value) == before + 2 and int(dut.stat_mmio_rd.value) == tb.cq("mmio_rd")

    # pushes: 64 bytes at a QP's window
    await bar2.write(5 * 64, bytes(range(64)))
    await bar2.write(4095 * 64, bytes(range(100, 164)))
    await bar2.write(7 * 64, bytes(32))            # not a whole push: dropped
    await bar2.write(8 * 64 + 4, bytes(64))        # not at a window: dropped
    assert await bar2.read_dword(5 * 64) == 0      # reads complete with zeros
    await ClockCycles(dut.clk, 20)
    assert tb.pushes == [(5, bytes(range(64))), (4095, bytes(range(100, 164)))], tb.pushes
    assert tb.cq("push") == 2 and tb.cq("dropped") >= 2, (tb.cq("push"), tb.cq("dropped"))
    assert int(dut.stat_push.value) == 2 and int(dut.stat_dropped.value) == tb.cq("dropped")
    assert not tb.sb_errors, tb.sb_errors[:5]


@cocotb.test()
async def msix_delivered_and_masked(dut):
    """MSI-X set up by the host through BAR 0 (the table in hm_msix): nothing is sent before
    the host enables bus mastering (an MSI-X message is a memory write), the event waits until
    then; every vector's event arrives at the host as that vector's interrupt; a masked
    vector's event waits in the PBA and arrives when the host unmasks it; nothing arrives
    while the function is masked."""
    tb = Tb(dut)
    await tb.start()
    pci = tb.pci
    await pci.enable_device()
    assert await pci.alloc_irq_vectors(NUM_VEC, NUM_VEC) == NUM_VEC
    got = []
    events = [Event() for _ in range(NUM_VEC)]

    def handler(v):
        async def h():
            got.append(v)
            events[v].set()
        return h
    for v in range(NUM_VEC):
        pci.request_irq(v, handler(v))
    await tb.irq(5)
    await ClockCycles(dut.clk, 200)
    assert got == [] and int(dut.u_msix.stat_sent.value) == 0
    await pci.set_master()
    await with_timeout(events[5].wait(), 20, "us")
    got.clear()
    for v in (0, 7, 31, 12):
        await tb.irq(v)
        await with_timeout(events[v].wait(), 20, "us")
    assert got == [0, 7, 31, 12], got
    bar0 = pci.bar_window[0]
    # mask vector 9: its event waits in the PBA
    await bar0.write_dword(MSIX_TABLE + 16 * 9 + 12, 1)
    await tb.irq(9)
    await ClockCycles(dut.clk, 200)
    assert 9 not in got
    assert (await bar0.read_dword(MSIX_PBA)) & (1 << 9), "vector 9 not pending in the PBA"
    await bar0.write_dword(MSIX_TABLE + 16 * 9 + 12, 0)
    await with_timeout(events[9].wait(), 20, "us")
    assert (await bar0.read_dword(MSIX_PBA)) & (1 << 9) == 0
    # the function mask (MSI-X message control bit 14)
    ctrl = await pci.capability_read_word(PciCapId.MSIX, 2)
    await pci.capability_write_word(PciCapId.MSIX, 2, ctrl | 0x4000)
    await ClockCycles(dut.clk, 10)
    await tb.irq(3)
    await ClockCycles(dut.clk, 200)
    assert 3 not in got
    await pci.capability_write_word(PciCapId.MSIX, 2, ctrl)
    await with_timeout(events[3].wait(), 20, "us")
    assert got == [0, 7, 31, 12, 9, 3], got
    assert int(dut.u_msix.stat_sent.value) == 7 and int(dut.stat_msix_sent.value) == 7
    assert not tb.sb_errors, tb.sb_errors[:5]


@cocotb.test()
async def dma_through_the_endpoint(dut):
    """The core side's DMA reaches host memory through the endpoint only once the host enables
    bus mastering (before that: SLVERR, nothing on the link)."""
    tb = Tb(dut)
    await tb.start()
    base, mem = tb.rc.alloc_region(1 << 16)
    mem[0:4096] = bytes(i & 0xff for i in range(4096))
    r = await with_timeout(tb.axi.read(base, 256), 20, "us")
    assert r.resp == 2, "a read before bus mastering was enabled did not fail"
    await tb.pci.enable_device()
    await tb.pci.set_master()
    await ClockCycles(dut.clk, 4)
    r = await with_timeout(tb.axi.read(base + 100, 3000), 50, "us")
    assert r.resp == 0 and bytes(r.data) == bytes(mem[100:3100])
    w = await with_timeout(tb.axi.write(base + 8000, b"\x5a" * 1000), 50, "us")
    assert w.resp == 0
    await ClockCycles(dut.clk, 100)
    assert bytes(mem[8000:9000]) == b"\x5a" * 1000 and mem[7999] == 0 and mem[9000] == 0
    assert not tb.sb_errors, tb.sb_errors[:5]


@cocotb.test()
async def flr_quiesces_and_resets(dut):
    """A function-level reset in the middle of DMA traffic both ways: the core's reset goes up
    at once, RQ is not cut inside a TLP, the block is told the FLR is done, BAR 0 accesses
    during it fail instead of hanging, MSI-X is back to its reset state (every vector masked),
    and after the FLR BAR 0 and the DMA work again."""
    tb = Tb(dut)
    await tb.start()
    pci = tb.pci
    await pci.enable_device()
    await pci.set_master()
    assert await pci.alloc_irq_vectors(NUM_VEC, NUM_VEC) == NUM_VEC
    bar0 = pci.bar_window[0]
    assert await bar0.read_dword(MSIX_TABLE + 12) == 0          # vector 0 unmasked by the host
    base, mem = tb.rc.alloc_region(1 << 20)
    mem[0:65536] = bytes(i & 0xff for i in range(65536))
    # RQ watched: a TLP once begun must end before anything else happens on RQ
    state = {"inside": False, "cut": 0, "beats": 0}

    async def watch():
        while True:
            await RisingEdge(dut.clk)
            v, r = int(dut.m_axis_rq_tvalid.value), int(dut.m_axis_rq_tready.value)
            if state["inside"] and not v:
                state["cut"] += 1
            if v and r:
                state["beats"] += 1
                state["inside"] = not int(dut.m_axis_rq_tlast.value)
    cocotb.start_soon(watch())
    for i in range(4):
        cocotb.start_soon(tb.axi.write(base + 0x10000 + i * 0x2000, b"\x6b" * 0x2000))
        cocotb.start_soon(tb.axi.read(base + i * 0x3000, 0x3000))
    await ClockCycles(dut.clk, 150)
    assert state["beats"] > 0
    dut.cfg_flr_in_process.value = 1
    await RisingEdge(dut.clk)
    await RisingEdge(dut.clk)
    assert int(dut.core_rst.value) == 1
    for n in range(2000):
        await RisingEdge(dut.clk)
        if int(dut.cfg_flr_done.value) & 1:
            break
    else:
        raise AssertionError("no cfg_flr_done")
    dut._log.info("FLR done %d clocks after it began, %d RQ beats so far", n + 2, state["beats"])
    assert int(dut.core_rst.value) == 1
    assert int(dut.stat_flr.value) == 1
    assert int(dut.stat_dma_rd_req.value) == 0 and int(dut.stat_dma_cpl.value) == 0, "the FLR left the DMA counters"
    # BAR 0 while the blocks behind it are in reset: answered as failed, never hung
    before = tb.cq("axil_err")
    await bar0.write_dword(0x0010, 0xdead)
    assert await read_fails(bar0, 0x0010, 20), "a BAR 0 read during the FLR did not fail"
    assert tb.cq("axil_err") == before + 2
    dut.cfg_flr_in_process.value = 0
    await ClockCycles(dut.clk, 4)
    assert int(dut.core_rst.value) == 0
    assert state["cut"] == 0, "RQ left inside a TLP"
    assert not state["inside"]
    # MSI-X back to its reset state; BAR 0 and the DMA work again
    assert await bar0.read_dword(MSIX_TABLE + 12) == 1
    await bar0.write_dword(0x0010, 0x600d)
    assert await bar0.read_dword(0x0010) == 0x600d
    await ClockCycles(dut.clk, 2000)       # (late completions of the old requests arrive and go)
    r = await with_timeout(tb.axi.read(base + 0x123, 2000), 50, "us")
    assert r.resp == 0 and bytes(r.data) == bytes(mem[0x123:0x123 + 2000])
    w = await with_timeout(tb.axi.write(base + 0x30000, b"\x99" * 700), 50, "us")
    assert w.resp == 0
    r = await with_timeout(tb.axi.read(base + 0x30000, 700), 50, "us")
    assert bytes(r.data) == b"\x99" * 700
    assert state["cut"] == 0
    assert int(dut.stat_flr.value) == 1 and int(dut.stat_dma_rd_req.value) >= 2 and int(dut.stat_dma_wr_req.value) >= 1
    assert not tb.sb_errors, tb.sb_errors[:5]


@cocotb.test()
async def requests_the_completer_refuses(dut):
    """Requests the completer does not serve, made as raw TLPs: a BAR 0 read of more than 16
    DWORDs, a locked read, a 32-bit FetchAdd and a compare-and-swap to BAR 0, an I/O read and
    write (each answered Unsupported Request, with the byte count and lower address PCIe
    gives it, a locked read's as a locked completion), a zero-length read (completed with no
    register read) and write (nothing written), a write of more than 16 DWORDs (dropped,
    counted); no register block sees any of them, and a normal read works after."""
    from cocotbext.pcie.core.tlp import CplStatus, TlpType
    tb = Tb(dut)
    await tb.start()
    pci = tb.pci
    await pci.enable_device()
    await pci.set_master()
    bar0 = pci.bar_window[0]
    base = pci.bar_addr[0]
    tb.eng.write(0x200, bytes(range(256)))
    # every access the register blocks see, counted while the refused requests go in
    seen = {"aw": 0, "ar": 0}

    async def watch():
        while True:
            await RisingEdge(dut.clk)
            for b in ("eng", "ctl", "shl"):
                seen["aw"] += int(getattr(dut, f"m_{b}_axil_awvalid").value) & int(getattr(dut, f"m_{b}_axil_awready").value)
                seen["ar"] += int(getattr(dut, f"m_{b}_axil_arvalid").value) & int(getattr(dut, f"m_{b}_axil_arready").value)
    cocotb.start_soon(watch())

    async def nonposted(tt, addr, length=None, data=None):
        return await inject_np(tb.rc, tb.dev, tt, addr, length, data)

    ur0, drop0 = tb.cq("ur"), tb.cq("dropped")
    # a read of 32 DWORDs (128 bytes) from offset 0x204: UR, byte count 128, lower address 0x04
    c = await nonposted(TlpType.MEM_READ, base + 0x204, 128)
    assert c.status == CplStatus.UR and c.byte_count == 128 and c.lower_address == 0x04, c
    assert c.fmt_type == TlpType.CPL
    # a locked read: UR as a locked completion (byte count 4, lower address of its first byte)
    c = await nonposted(TlpType.MEM_READ_LOCKED, base + 0x208, 4)
    assert c.status == CplStatus.UR and c.fmt_type == TlpType.CPL_LOCKED and c.byte_count == 4, c
    assert c.lower_address == 0x08, c
    # AtomicOps: UR; byte count the operand size (FetchAdd 4, CAS half its 8 bytes), lower
    # address 0
    c = await nonposted(TlpType.FETCH_ADD, base + 0x210, data=(5).to_bytes(4, "little"))
    assert c.status == CplStatus.UR and c.byte_count == 4 and c.lower_address == 0, c
    c = await nonposted(TlpType.CAS, base + 0x218, data=(1).to_bytes(4, "little") + (2).to_bytes(4, "little"))
    assert c.status == CplStatus.UR and c.byte_count == 4 and c.lower_address == 0, c
    # I/O: the function has no I/O BAR, so a real block answers these itself and never passes
    # them on; should one reach the completer, it answers UR, byte count 4, lower address 0
    # (an I/O write is non-posted and answered too)
    c = await nonposted(TlpType.IO_READ, 0x1000, 4)
    assert c.status == CplStatus.UR and c.byte_count == 4 and c.lower_address == 0, c
    c = await nonposted(TlpType.IO_WRITE, 0x1004, data=(9).to_bytes(4, "little"))
    assert c.status == CplStatus.UR and c.byte_count == 4 and c.lower_address == 0, c
    assert tb.cq("ur") == ur0 + 6, (tb.cq("ur"), ur0)
    # a zero-length read (a flush): completed, one DWORD of zeros, no register read
    c = await nonposted(TlpType.MEM_READ, base + 0x220, 0)
    assert c.status == CplStatus.SC and c.byte_count == 1 and c.length == 1, c
    assert c.get_data() == b"\x00" * 4
    # a zero-length write, and a write of 32 DWORDs: nothing written, the long one counted
    await posted_write(tb.rc, base + 0x224, b"")
    await posted_write(tb.rc, base + 0x280, b"\xee" * 128)
    await ClockCycles(dut.clk, 100)
    assert seen == {"aw": 0, "ar": 0}, seen
    assert tb.eng.read(0x200, 256) == bytes(range(256)), "a refused request wrote a register"
    assert tb.cq("dropped") == drop0 + 1, (tb.cq("dropped"), drop0)
    assert tb.cq("ur") == ur0 + 6
    # and the completer goes on
    assert await bar0.read_dword(0x204) == int.from_bytes(bytes(range(4, 8)), "little")
    assert seen["ar"] == 1
    assert not tb.sb_errors, tb.sb_errors[:5]
