"""cocotb tests of rtl/shell/hm_msix.sv: the MSI-X table and PBA in a BAR window (programmed
through cocotbext-axi's AXI4-Lite master, as the host writes them through the BAR), events from
the core, and the messages to the PCIe block's MSI-X interface, whose side (sent after a few
clocks, a failure, or no answer at all when the test asks for one) is modelled here.
tests/shell/run.py builds it with 20 vectors (the PBA is one dword, the next reads 0), a 4 KiB
window and a 64-clock answer timeout.
"""
import logging
import random

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, RisingEdge
from cocotb.utils import get_sim_time
from cocotbext.axi import AxiLiteBus, AxiLiteMaster

NUM_VEC = 20
PBA = 0x800


class Msix:
    def __init__(self, dut):
        self.dut = dut
        self.axil = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axil", case_insensitive=False), dut.clk, dut.rst)
        for part in (self.axil.write_if, self.axil.read_if):
            part.log.setLevel(logging.WARNING)
        self.msgs = []            # (address, data) delivered
        self.fail_next = 0        # refuse this many requests
        self.requests = 0
        self.sent_total = 0       # messages answered "sent", over the whole test
        self.ignore_next = 0      # leave this many requests unanswered
        self.launches = []        # (sim time of the request, data) of every request

    async def start(self):
        cocotb.start_soon(Clock(self.dut.clk, 4000, units="ps").start())
        d = self.dut
        d.rst.value = 1
        d.s_irq_valid.value = 0
        d.s_irq_vec.value = 0
        d.cfg_interrupt_msix_enable.value = 1
        d.cfg_interrupt_msix_mask.value = 0
        d.cfg_interrupt_msix_sent.value = 0
        d.cfg_interrupt_msix_fail.value = 0
        await ClockCycles(d.clk, 5)
        d.rst.value = 0
        await ClockCycles(d.clk, 2)
        cocotb.start_soon(self.pcie())

    async def pcie(self):
        """The PCIe block: a request (one-clock pulse) is answered with sent or fail 3-6
        clocks later; the address and data are taken with the request."""
        d = self.dut
        rng = random.Random(5)
        while True:
            await RisingEdge(d.clk)
            if int(d.cfg_interrupt_msix_int.value):
                self.requests += 1
                msg = (int(d.cfg_interrupt_msix_address.value), int(d.cfg_interrupt_msix_data.value))
                self.launches.append((get_sim_time(), msg[1]))
                if self.ignore_next:
                    self.ignore_next -= 1
                    continue
                # (one request at a time: another one before the answer is a fault)
                for _ in range(rng.randint(3, 6)):
                    await RisingEdge(d.clk)
                    assert not int(d.cfg_interrupt_msix_int.value), "a second request before the answer"
                if self.fail_next:
                    self.fail_next -= 1
                    d.cfg_interrupt_msix_fail.value = 1
                else:
                    self.msgs.append(msg)
                    self.sent_total += 1
                    d.cfg_interrupt_msix_sent.value = 1
                await RisingEdge(d.clk)
                d.cfg_interrupt_msix_fail.value = 0
                d.cfg_interrupt_msix_sent.value = 0

    async def entry(self, v, addr, data, masked):
        await self.axil.write_dword(16 * v, addr & 0xFFFFFFFF)
        await self.axil.write_dword(16 * v + 4, addr >> 32)
        await self.axil.write_dword(16 * v + 8, data)
        await self.axil.write_dword(16 * v + 12, int(masked))

    async def mask(self, v, masked):
        await self.axil.write_dword(16 * v + 12, int(masked))

    async def event(self, *vecs):
        d = self.dut
        for v in vecs:
            await RisingEdge(d.clk)
            d.s_irq_vec.value = v
            d.s_irq_valid.value = 1
        await RisingEdge(d.clk)
        d.s_irq_valid.value = 0

    async def pba(self):
        lo = await self.axil.read_dword(PBA)
        hi = await self.axil.read_dword(PBA + 4)
        return lo | hi << 32

    async def settle(self, n=3 * NUM_VEC + 20):
        await ClockCycles(self.dut.clk, n)


def addr_of(v):
    return 0xFEE0_0000_0000_1000 + 0x10 * v


@cocotb.test()
async def table_reads_back_and_resets_masked(dut):
    """After reset every vector control word reads 1 (masked); entries read back as written,
    byte writes merge into the word; the PBA is read only; reserved space reads 0."""
    m = Msix(dut)
    await m.start()
    for v in range(NUM_VEC):
        assert await m.axil.read_dword(16 * v + 12) == 1, f"vector {v} masked after reset"
    for v in range(NUM_VEC):
        await m.entry(v, addr_of(v), 0x4000 + v, masked=True)
    for v in range(NUM_VEC):
        assert await m.axil.read_dword(16 * v) == addr_of(v) & 0xFFFFFFFF
        assert await m.axil.read_dword(16 * v + 4) == addr_of(v) >> 32
        assert await m.axil.read_dword(16 * v + 8) == 0x4000 + v
    await m.axil.write(16 * 3 + 8 + 1, b"\xab")                  # one byte of vector 3's data
    assert await m.axil.read_dword(16 * 3 + 8) == 0x4000 + 3 + (0xab - 0x40) * 0x100
    await m.axil.write_dword(PBA, 0xFFFFFFFF)                     # ignored
    assert await m.pba() == 0
    assert await m.axil.read_dword(16 * NUM_VEC) == 0             # past the table
    assert await m.axil.read_dword(0x7F0) == 0
    assert await m.axil.read_dword(PBA + 8) == 0                  # past the PBA


@cocotb.test()
async def events_masking_and_retry(dut):
    """Unmasked vectors send their entry's message; a masked vector's event stays pending in
    the PBA and is sent when unmasked; the function mask and MSI-X enable hold everything;
    events on a pending vector coalesce; a refused message is retried; vectors beyond the
    table are dropped and counted."""
    m = Msix(dut)
    await m.start()
    for v in range(NUM_VEC):
        await m.entry(v, addr_of(v), 0x100 + v, masked=v in (4, 19))

    await m.event(0, 7, 19, 4, 7)          # 7 twice in a row: one message or two, never lost
    await m.settle()
    sent = [d - 0x100 for _, d in m.msgs]
    assert set(sent) == {0, 7} and all(a == addr_of(d - 0x100) for a, d in m.msgs), m.msgs
    assert await m.pba() == (1 << 4) | (1 << 19), hex(await m.pba())

    m.msgs.clear()
    await m.mask(19, False)
    await m.settle()
    assert [d - 0x100 for _, d in m.msgs] == [19]
    assert await m.pba() == 1 << 4

    # function mask, then MSI-X disabled: events pend; released, they are sent once each
    m.msgs.clear()
    dut.cfg_interrupt_msix_mask.value = 1
    await m.event(1, 2, 1)
    await m.settle()
    assert not m.msgs and await m.pba() == (1 << 4) | (1 << 1) | (1 << 2)
    dut.cfg_interrupt_msix_mask.value = 0
    dut.cfg_interrupt_msix_enable.value = 0
    await m.settle()
    assert not m.msgs
    dut.cfg_interrupt_msix_enable.value = 1
    await m.settle()
    assert sorted(d - 0x100 for _, d in m.msgs) == [1, 2]
    assert await m.pba() == 1 << 4

    # two refusals: the message is retried until it is sent
    m.msgs.clear()
    m.fail_next = 2
    req0 = m.requests
    await m.event(9)
    await m.settle()
    assert [d - 0x100 for _, d in m.msgs] == [9] and m.requests - req0 == 3
    assert int(dut.stat_fail.value) == 2

    # beyond the table: dropped and counted, nothing sent
    m.msgs.clear()
    await m.event(NUM_VEC, 255)
    await m.settle()
    assert not m.msgs and int(dut.stat_bad_vec.value) == 2
    assert int(dut.stat_sent.value) == m.sent_total and m.requests == m.sent_total + 2
    dut._log.info("sent %d, refused %d, dropped %d", int(dut.stat_sent.value), int(dut.stat_fail.value),
                  int(dut.stat_bad_vec.value))


@cocotb.test()
async def unanswered_request_times_out(dut):
    """A request the PCIe block never answers (a link going down) is given up after the
    timeout, counted, and retried: the sender does not hang."""
    m = Msix(dut)
    await m.start()
    await m.entry(5, addr_of(5), 0x305, masked=False)
    m.ignore_next = 1
    await m.event(5)
    await ClockCycles(dut.clk, 40)
    assert not m.msgs and await m.pba() == 0, "waiting for the answer, launched"
    await ClockCycles(dut.clk, 100)
    assert [d for _, d in m.msgs] == [0x305] and m.requests == 2
    assert int(dut.stat_timeout.value) == 1 and int(dut.stat_sent.value) == 1
    assert await m.pba() == 0


@cocotb.test()
async def event_storm_loses_nothing(dut):
    """Random events on every vector, random masking: every event is followed by a message of
    its vector (a launch at or after the event: none is lost), and no vector gets more messages
    than it had events."""
    m = Msix(dut)
    await m.start()
    rng = random.Random(8)
    for v in range(NUM_VEC):
        await m.entry(v, addr_of(v), 0x200 + v, masked=False)
    evs = [0] * NUM_VEC
    last_ev = [None] * NUM_VEC
    for _ in range(300):
        v = rng.randrange(NUM_VEC)
        evs[v] += 1
        last_ev[v] = get_sim_time()
        await m.event(v)
        if rng.random() < 0.05:
            await m.mask(rng.randrange(NUM_VEC), rng.random() < 0.5)
    for v in range(NUM_VEC):
        await m.mask(v, False)
    await m.settle(10 * NUM_VEC + 100)
    got = [0] * NUM_VEC
    for _, d in m.msgs:
        got[d - 0x200] += 1
    for v in range(NUM_VEC):
        assert (evs[v] == 0) == (got[v] == 0), f"vector {v}: {evs[v]} events, {got[v]} messages"
        assert got[v] <= evs[v]
        if last_ev[v] is not None:
            # (the event is driven in the clock after last_ev: a launch after it took it)
            assert any(t > last_ev[v] and d == 0x200 + v for t, d in m.launches), f"vector {v}: its last event was lost"
    assert await m.pba() == 0
