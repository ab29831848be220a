"""cocotb tests of rtl/shell/hm_pcie_dma.sv, the DMA bridge from the engine's AXI4 master to the
UltraScale+ PCIe block's RQ/RC interfaces, against cocotbext-pcie: its model of the block
(UltraScalePlusPcieDevice, 512 bits, DWORD aligned, client tags) behind its root complex, whose
host memory the bridge reads and writes. The AXI side is cocotbext-axi's AXI4 master, with
bursts of at most 64 beats as the engine's DMA issues.

The root complex's completions can be held and released out of order (per tag, in order, as
PCIe requires of one request's completions), split at every 64-byte boundary, or dropped for a
"black hole" range of addresses, to test reordering, reassembly and completion timeouts.
tests/shell/run.py builds the bridge with TIMEOUT_TICK = 1024 (a request times out 2,048 to
3,072 clocks after its last completion or its issue: 32 KiB in flight, the reorder buffer's
worth, split at every 64 bytes, takes 1,024 clocks to arrive).
"""
import random

import cocotb
from cocotb.triggers import ClockCycles, RisingEdge, Timer, with_timeout
from cocotbext.pcie.core.tlp import TlpType

from shell_common import dma_master, pcie_endpoint, sideband_monitor, wait_reset

SLVERR = 2


class Tb:
    def __init__(self, dut, axi=True):
        self.dut = dut
        self.rc, self.dev = pcie_endpoint(dut)
        self.rc.max_payload_size = 3          # the root port's: 1024 B (completions up to this)
        if axi:
            self.axi = dma_master(dut, dut.rst)
        else:
            # bursts driven by hand (raw_write, raw_read): strobe patterns and burst kinds the
            # AXI master model does not make
            for n in ("awvalid", "wvalid", "arvalid"):
                getattr(dut, "s_axi_" + n).value = 0
            dut.s_axi_bready.value = 1
            dut.s_axi_rready.value = 1
        self.pci = None
        self.sb_errors = []            # sideband mismatches on RQ/CC (sideband_monitor)
        self.max_rd = 0                # the largest read request and write seen since set_sizes
        self.max_wr = 0
        self.mem_base = None
        self.mem = None
        # completion control
        self.shuffle = False
        self.held = []                 # completions held for shuffling
        self.reordered = 0             # completions sent ahead of one that arrived before them
        self.black_hole = None         # (lo, hi): completions for reads there are dropped
        self.dropped = []              # the dropped completions
        self.held_order = []
        self.rng = random.Random(21)
        self._send = self.rc.send
        self.rc.send = self._rc_send

    async def _rc_send(self, tlp):
        if tlp.fmt_type in (TlpType.CPL, TlpType.CPL_DATA):
            if self.black_hole and self.black_hole[0] <= self._req_addr.get(tlp.tag, -1) < self.black_hole[1]:
                self.dropped.append(tlp)
                return
            if self.shuffle:
                self.held.append(tlp)
                self.held_order.append(tlp)
                return
        await self._send(tlp)

    async def release(self):
        """Sends the held completions in a random order that keeps each tag's in order."""
        while True:
            await Timer(200, "ns")
            if not self.held:
                continue
            by_tag = {}
            for t in self.held:
                by_tag.setdefault(t.tag, []).append(t)
            self.held = []
            queues = list(by_tag.values())
            order = list(self.held_order)
            self.held_order = []
            while queues:
                q = self.rng.choice(queues)
                t = q.pop(0)
                if t is not order[0]:
                    self.reordered += 1
                order.remove(t)
                await self._send(t)
                if not q:
                    queues.remove(q)

    async def start(self):
        d = self.dut
        d.cfg_bus_master_en.value = 0
        d.rq_hold.value = 0
        # the read requests' addresses by tag, for the black hole (seen on the RQ interface)
        self._req_addr = {}
        orig = self.rc.handle_mem_read_tlp

        async def note_read(tlp):
            self._req_addr[tlp.tag] = tlp.address
            self.max_rd = max(self.max_rd, tlp.length * 4)
            await orig(tlp)
        self.rc.register_rx_tlp_handler(TlpType.MEM_READ, note_read)
        self.rc.register_rx_tlp_handler(TlpType.MEM_READ_64, note_read)
        origw = self.rc.handle_mem_write_tlp

        async def note_write(tlp):
            self.max_wr = max(self.max_wr, tlp.length * 4)
            await origw(tlp)
        self.rc.register_rx_tlp_handler(TlpType.MEM_WRITE, note_write)
        self.rc.register_rx_tlp_handler(TlpType.MEM_WRITE_64, note_write)
        await RisingEdge(d.clk)
        await with_timeout(wait_reset(d), 10, "us")
        await self.rc.enumerate()
        self.pci = self.rc.find_device(self.dev.functions[0].pcie_id)
        await self.pci.set_master()
        cocotb.start_soon(sideband_monitor(d, "m_axis_rq", 20, 26, 28, self.sb_errors))
        cocotb.start_soon(self._bme())
        cocotb.start_soon(self.release())
        self.mem_base, self.mem = self.rc.alloc_region(1 << 20)
        await ClockCycles(d.clk, 10)

    async def _bme(self):
        """The block's cfg_function_status bit 2 (bus master enable) of function 0."""
        while True:
            await RisingEdge(self.dut.clk)
            self.dut.cfg_bus_master_en.value = int(self.dev.functions[0].bus_master_enable)

    async def set_sizes(self, mps, mrrs):
        await self.pci.set_mps({128: 0, 256: 1, 512: 2, 1024: 3}[mps])
        await self.pci.set_readrq({128: 0, 256: 1, 512: 2, 1024: 3, 2048: 4, 4096: 5}[mrrs])
        await ClockCycles(self.dut.clk, 4)
        assert int(self.dut.cfg_max_payload.value) == {128: 0, 256: 1, 512: 2, 1024: 3}[mps]
        self.mps, self.mrrs = mps, mrrs
        self.max_rd = self.max_wr = 0

    def stats(self):
        d = self.dut
        return {n: int(getattr(d, "stat_" + n).value) for n in
                ("rd_req", "wr_req", "cpl", "cpl_err", "cpl_unexpected", "timeout", "bad_burst")}


async def check_rw(tb, rng, count, max_len, concurrent=4):
    """Random writes then reads (several in flight at once) at random addresses and lengths; the
    bytes around each write must be untouched."""
    mem = tb.mem
    size = len(mem)
    for i in range(0, size, 4096):
        mem[i:i + 4096] = bytes(rng.getrandbits(8) for _ in range(4096)) if i < 65536 else b"\x5a" * 4096
    ref = bytearray(mem[0:size])
    for _ in range(count):
        jobs = []
        for _ in range(concurrent):
            n = rng.randint(1, max_len)
            off = rng.randrange(0, size - n)
            data = bytes(rng.getrandbits(8) for _ in range(n))
            ref[off:off + n] = data
            jobs.append(cocotb.start_soon(tb.axi.write(tb.mem_base + off, data)))
        for j in jobs:
            r = await with_timeout(j, 200, "us")
            assert r.resp == 0, f"write answered {r.resp}"
        # a posted write is in the model's memory once the root complex has taken it
        await ClockCycles(tb.dut.clk, 200)
        reads = []
        for _ in range(concurrent):
            n = rng.randint(1, max_len)
            off = rng.randrange(0, size - n)
            reads.append((off, n, cocotb.start_soon(tb.axi.read(tb.mem_base + off, n))))
        for off, n, j in reads:
            r = await with_timeout(j, 200, "us")
            assert r.resp == 0, f"read of {n} at {off:#x} answered {r.resp}"
            assert bytes(r.data) == bytes(ref[off:off + n]), f"read of {n} at {off:#x}: data differs"
    assert tb.max_rd <= tb.mrrs and tb.max_wr <= tb.mps, (tb.max_rd, tb.mrrs, tb.max_wr, tb.mps)
    got = bytes(mem[0:size])
    if got != bytes(ref):
        bad = next(i for i in range(size) if got[i] != ref[i])
        raise AssertionError(f"host memory differs from the writes at offset {bad:#x}")


@cocotb.test()
async def dma_across_mps_mrrs(dut):
    """Reads and writes of 1 B to 8 KiB, four at a time, for max payload sizes 128 to 1024 and
    max read request sizes 128 to 4096, with the completions split as the root port does (max
    payload) and at every 64 bytes."""
    tb = Tb(dut)
    await tb.start()
    rng = random.Random(1)
    for mps, mrrs, rcb_split in ((128, 128, False), (256, 512, True), (512, 512, False),
                                 (512, 4096, True), (1024, 1024, False), (128, 2048, True)):
        tb.rc.split_on_all_rcb = rcb_split
        await tb.set_sizes(mps, mrrs)
        before = tb.stats()
        await check_rw(tb, rng, 6, 8192)
        s = tb.stats()
        assert s["cpl_err"] == 0 and s["cpl_unexpected"] == 0 and s["timeout"] == 0, s
        assert s["bad_burst"] == 0, s
        assert s["rd_req"] > before["rd_req"] and s["wr_req"] > before["wr_req"], s
        # (the largest request and write are the limits: the cut uses the whole size)
        assert tb.max_rd == mrrs and tb.max_wr == mps, (tb.max_rd, mrrs, tb.max_wr, mps)
        dut._log.info("MPS %d MRRS %d split at 64 B %s: %d reads, %d writes, %d completions",
                      mps, mrrs, rcb_split, s["rd_req"] - before["rd_req"], s["wr_req"] - before["wr_req"],
                      s["cpl"] - before["cpl"])
    assert not tb.sb_errors, tb.sb_errors[:5]


@cocotb.test()
async def completions_out_of_order(dut):
    """Completions of different requests released in a random order, split at every 64 bytes:
    the bursts still come back whole and in order."""
    tb = Tb(dut)
    await tb.start()
    await tb.set_sizes(256, 256)
    tb.rc.split_on_all_rcb = True
    tb.shuffle = True
    rng = random.Random(2)
    await check_rw(tb, rng, 8, 4096, concurrent=6)
    s = tb.stats()
    assert s["cpl_err"] == 0 and s["cpl_unexpected"] == 0 and s["timeout"] == 0, s
    assert s["cpl"] > 3 * s["rd_req"], s      # split: several completions per request
    assert tb.reordered > s["cpl"] // 4, (tb.reordered, s)
    dut._log.info("%d completions for %d requests, %d of them sent ahead of an older one",
                  s["cpl"], s["rd_req"], tb.reordered)
    assert not tb.sb_errors, tb.sb_errors[:5]


@cocotb.test()
async def completion_never_arrives(dut):
    """Reads whose completions never come: SLVERR on every beat of their bursts within the
    timeout, no hang; the tags are retired; a completion that turns up late is dropped and
    counted; reads elsewhere go on working."""
    tb = Tb(dut)
    await tb.start()
    await tb.set_sizes(256, 512)
    rng = random.Random(3)
    hole = tb.mem_base + 0x80000
    tb.black_hole = (hole, hole + 0x10000)
    tb.mem[0x80000:0x90000] = b"\xa5" * 0x10000
    r = await with_timeout(tb.axi.read(hole + 0x40, 1500), 100, "us")
    assert r.resp == SLVERR, f"read with no completion answered {r.resp}"
    s = tb.stats()
    assert s["timeout"] == 3 and int(dut.tags_retired.value) == 3, (s, int(dut.tags_retired.value))
    # the other reads still work, around the retired tags
    await check_rw(tb, rng, 4, 4096)
    # the late completions: dropped and counted
    late = list(tb.dropped)
    tb.black_hole = None
    for t in late:
        await tb._send(t)
    await ClockCycles(dut.clk, 200)
    s = tb.stats()
    assert s["cpl_unexpected"] == len(late), (s, len(late))
    assert s["timeout"] == 3, s
    await check_rw(tb, rng, 2, 4096)
    assert not tb.sb_errors, tb.sb_errors[:5]


@cocotb.test()
async def error_completions_and_bus_master(dut):
    """A read the host answers with an error status (outside its memory): SLVERR, and the bridge goes on. With bus
    mastering disabled reads and writes are refused (SLVERR) and nothing reaches the link."""
    tb = Tb(dut)
    await tb.start()
    await tb.set_sizes(128, 512)
    rng = random.Random(4)
    # outside the host's memory regions: the root complex answers with an error status; more
    # of them than there are tags, and none retires its tag (the error status ends the request)
    for _ in range(40):
        r = await with_timeout(tb.axi.read(0x7000_0000, 256), 100, "us")
        assert r.resp == SLVERR and bytes(r.data) == bytes(256), r.resp
    s = tb.stats()
    assert s["cpl_err"] == 40 and s["timeout"] == 0, s
    assert int(dut.tags_retired.value) == 0
    await check_rw(tb, rng, 2, 2048)
    # bus mastering off
    await tb.pci.set_master(False)
    await ClockCycles(dut.clk, 4)
    before = tb.stats()
    w = await with_timeout(tb.axi.write(tb.mem_base + 0x100, b"\x11" * 300), 50, "us")
    r = await with_timeout(tb.axi.read(tb.mem_base + 0x100, 300), 50, "us")
    assert w.resp == SLVERR and r.resp == SLVERR, (w.resp, r.resp)
    s = tb.stats()
    assert s["rd_req"] == before["rd_req"] and s["wr_req"] == before["wr_req"], s
    assert s["bad_burst"] == before["bad_burst"] + 2, s
    assert bytes(tb.mem[0x100:0x100 + 300]) != b"\x11" * 300
    await tb.pci.set_master(True)
    await ClockCycles(dut.clk, 4)
    await check_rw(tb, rng, 2, 2048)
    assert not tb.sb_errors, tb.sb_errors[:5]


async def raw_write(tb, addr, beats, size=6, burst=1, awlen=None):
    """One AW burst and its W beats [(data, strobe mask)], driven by hand; returns bresp."""
    d = tb.dut
    d.s_axi_awid.value = 3
    d.s_axi_awaddr.value = addr
    d.s_axi_awlen.value = len(beats) - 1 if awlen is None else awlen
    d.s_axi_awsize.value = size
    d.s_axi_awburst.value = burst
    d.s_axi_awvalid.value = 1
    await RisingEdge(d.clk)
    while not int(d.s_axi_awready.value):
        await RisingEdge(d.clk)
    d.s_axi_awvalid.value = 0
    for i, (data, strb) in enumerate(beats):
        d.s_axi_wdata.value = int.from_bytes(data, "little")
        d.s_axi_wstrb.value = strb
        d.s_axi_wlast.value = int(i == len(beats) - 1)
        d.s_axi_wvalid.value = 1
        await RisingEdge(d.clk)
        while not int(d.s_axi_wready.value):
            await RisingEdge(d.clk)
    d.s_axi_wvalid.value = 0
    while not int(d.s_axi_bvalid.value):
        await RisingEdge(d.clk)
    assert int(d.s_axi_bid.value) == 3
    resp = int(d.s_axi_bresp.value)
    await RisingEdge(d.clk)
    return resp


async def raw_read(tb, addr, nbeats, size=6, burst=1):
    """One AR burst driven by hand; returns (data, every rresp)."""
    d = tb.dut
    d.s_axi_arid.value = 5
    d.s_axi_araddr.value = addr
    d.s_axi_arlen.value = nbeats - 1
    d.s_axi_arsize.value = size
    d.s_axi_arburst.value = burst
    d.s_axi_arvalid.value = 1
    await RisingEdge(d.clk)
    while not int(d.s_axi_arready.value):
        await RisingEdge(d.clk)
    d.s_axi_arvalid.value = 0
    data, resps = b"", []
    while True:
        await RisingEdge(d.clk)
        if int(d.s_axi_rvalid.value):
            assert int(d.s_axi_rid.value) == 5
            data += int(d.s_axi_rdata.value).to_bytes(64, "little")
            resps.append(int(d.s_axi_rresp.value))
            if int(d.s_axi_rlast.value):
                break
    assert len(resps) == nbeats, (len(resps), nbeats)
    return data, resps


def mask(lo, hi):
    """Strobes of bytes lo..hi-1 of a beat."""
    return ((1 << hi) - 1) & ~((1 << lo) - 1)


@cocotb.test()
async def strobes_and_refused_bursts(dut):
    """Bursts the AXI master model does not make: beats with no byte enabled before and after
    the written bytes (they are dropped, and the write starts at the first enabled byte), a
    burst with nothing enabled (nothing written, OKAY), and bursts the bridge does not carry
    (not 64-byte beats, FIXED, crossing 4 KiB): SLVERR, nothing sent. Then reads of each kind."""
    tb = Tb(dut, axi=False)
    await tb.start()
    rng = random.Random(6)
    for mps in (128, 256, 512):
        await tb.set_sizes(mps, 512)
        for _ in range(12):
            tb.mem[0:8192] = b"\x00" * 8192
            ref = bytearray(8192)
            nb = rng.randint(2, 12)
            page = rng.randrange(0, 2) * 4096
            start = page + 64 * rng.randrange(0, 64 - nb)
            lead = rng.randint(0, nb - 1)
            tail = rng.randint(0, nb - 1 - lead)
            first = rng.randrange(0, 64)
            last = rng.randrange(0 if nb - lead - tail > 1 else first, 64)
            beats = []
            for i in range(nb):
                data = bytes(rng.getrandbits(8) for _ in range(64))
                if i < lead or i >= nb - tail:
                    m = 0
                else:
                    lo = first if i == lead else 0
                    hi = last + 1 if i == nb - tail - 1 else 64
                    m = mask(lo, hi)
                    a = start + 64 * i
                    ref[a + lo:a + hi] = data[lo:hi]
                beats.append((data, m))
            resp = await with_timeout(raw_write(tb, tb.mem_base + start, beats), 50, "us")
            assert resp == 0, resp
            await ClockCycles(dut.clk, 100)
            assert bytes(tb.mem[0:8192]) == bytes(ref), (mps, nb, lead, tail, first, last)
    # nothing enabled: nothing written, no request sent
    before = tb.stats()
    tb.mem[0:8192] = b"\x77" * 8192
    resp = await raw_write(tb, tb.mem_base, [(b"\x01" * 64, 0)] * 4)
    await ClockCycles(dut.clk, 50)
    assert resp == 0 and tb.stats()["wr_req"] == before["wr_req"] and bytes(tb.mem[0:4096]) == b"\x77" * 4096
    # refused: 32-byte beats, FIXED, crossing 4 KiB
    for kw, nbeats, off in (({"size": 5}, 2, 0), ({"burst": 0}, 2, 0), ({}, 3, 4096 - 128)):
        before = tb.stats()
        resp = await with_timeout(raw_write(tb, tb.mem_base + off, [(b"\x01" * 64, (1 << 64) - 1)] * nbeats, **kw),
                                  20, "us")
        data, resps = await with_timeout(raw_read(tb, tb.mem_base + off, nbeats, **kw), 20, "us")
        s = tb.stats()
        assert resp == SLVERR and resps == [SLVERR] * nbeats, (kw, resp, resps)
        assert s["wr_req"] == before["wr_req"] and s["rd_req"] == before["rd_req"], (kw, s)
        assert s["bad_burst"] == before["bad_burst"] + 2, (kw, s)
        assert bytes(tb.mem[off:off + 64 * nbeats]) == b"\x77" * (64 * nbeats)
    # and a good read after all that
    tb.mem[0:256] = bytes(range(256))
    data, resps = await raw_read(tb, tb.mem_base, 4)
    assert resps == [0] * 4 and data == bytes(range(256))
    assert not tb.sb_errors, tb.sb_errors[:5]


@cocotb.test()
async def b_waits_for_the_link(dut):
    """B answers a write burst only once its last beat is on its way to the link (in the RQ
    output register): with the block not taking RQ, a two-beat write is not answered; it is
    once the block takes it. (A read the engine issues after B goes behind the write.)"""
    tb = Tb(dut)
    await tb.start()
    await tb.set_sizes(512, 512)
    tb.mem[0:4096] = bytes(4096)
    tb.dev.rq_sink.pause = True
    job = cocotb.start_soon(tb.axi.write(tb.mem_base + 0x200, b"\x33" * 100))
    for _ in range(200):
        await RisingEdge(dut.clk)
        assert not int(dut.s_axi_bvalid.value), "B before the write left for the link"
    tb.dev.rq_sink.pause = False
    w = await with_timeout(job, 20, "us")
    assert w.resp == 0
    r = await with_timeout(tb.axi.read(tb.mem_base + 0x200, 100), 20, "us")
    assert bytes(r.data) == b"\x33" * 100
    assert not tb.sb_errors, tb.sb_errors[:5]
