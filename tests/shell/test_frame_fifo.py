"""cocotb tests of rtl/shell/hm_axis_async_frame_fifo.sv, the shell's MAC <-> core crossing,
on two real clocks: the CMAC's 322.265625 MHz and the core's 250 MHz (tests/shell/run.py builds
it with Verilator, once per direction, and picks the tests of that direction).

The MAC side is cocotbext-axi's AXI-Stream source / sink on the MAC clock, as the CMAC drives
it: the receive source never pauses (a MAC cannot be held back), the transmit sink is always
ready. The core side pauses at random (a stalled engine, DMA jitter).
"""
import itertools
import os
import random

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, RisingEdge, Timer
from cocotbext.axi import AxiStreamFrame, AxiStreamSink, AxiStreamSource

from shell_common import BEAT, CORE_PS, MAC_100G, MAC_PS, bus, quiet


def depth(dut):
    return int(os.environ["HM_FIFO_DEPTH"])


async def start(dut, s_ps, m_ps):
    cocotb.start_soon(Clock(dut.s_clk, s_ps, units="ps").start())
    cocotb.start_soon(Clock(dut.m_clk, m_ps, units="ps").start())
    dut.s_rst.value = 1
    dut.m_rst.value = 1
    await ClockCycles(dut.s_clk, 8)
    await ClockCycles(dut.m_clk, 8)
    dut.s_rst.value = 0
    dut.m_rst.value = 0
    await ClockCycles(dut.s_clk, 4)


def counters(dut, side):
    return {k: int(getattr(dut, f"{side}_cnt_{k}").value) for k in ("frames", "bad", "oversize", "full")}


def pause_gen(rng, p_stall, max_run):
    """Cycles paused (True) or not, in runs: a stalled core or a DMA that lags."""
    while True:
        if rng.random() < p_stall:
            for _ in range(rng.randint(1, max_run)):
                yield True
        else:
            for _ in range(rng.randint(1, max_run)):
                yield False


def payload(rng, nbytes):
    return bytes(rng.getrandbits(8) for _ in range(nbytes))


async def settle(dut, sink, want_frames, m_cycles=4000):
    for _ in range(m_cycles):
        await RisingEdge(dut.m_clk)
        if sink.count() >= want_frames and int(dut.m_axis_tvalid.value) == 0:
            break
    await ClockCycles(dut.m_clk, 20)     # counters cross: a few clocks


async def rx_case(dut, seed, n, p_stall, max_run, bad_every, long_every):
    rng = random.Random(seed)
    await start(dut, MAC_PS, CORE_PS)
    src = AxiStreamSource(bus(dut, "s_axis"), dut.s_clk, dut.s_rst)
    src.set_pause_generator(itertools.cycle(MAC_100G))
    sink = AxiStreamSink(bus(dut, "m_axis"), dut.m_clk, dut.m_rst)
    sink.set_pause_generator(pause_gen(rng, p_stall, max_run))
    quiet(src, sink)
    not_ready = []

    async def watch_ready():
        while True:
            await RisingEdge(dut.s_clk)
            if int(dut.s_axis_tready.value) == 0:
                not_ready.append(1)
    cocotb.start_soon(watch_ready())

    d = depth(dut)
    sent = []                              # (payload, bad, oversize)
    for i in range(n):
        beats = rng.randint(d + 1, d + 8) if long_every and i % long_every == long_every - 1 else rng.randint(1, d // 2)
        data = payload(rng, (beats - 1) * BEAT + rng.randint(1, BEAT))
        bad = bool(bad_every) and i % bad_every == bad_every - 1
        sent.append((data, bad, beats > d))
        await src.send(AxiStreamFrame(data, tuser=int(bad)))
    await src.wait()
    good = [s for s in sent if not s[1] and not s[2]]
    await settle(dut, sink, len(good))

    got = []
    while not sink.empty():
        got.append(bytes((await sink.recv()).tdata))
    # every frame delivered is a whole good frame, in order (a subsequence of the good ones)
    it = iter([s[0] for s in good])
    for k, g in enumerate(got):
        assert any(g == x for x in it), f"frame {k} delivered ({len(g)} B) is not the next good frame sent: corrupted, cut or reordered"
    assert not not_ready, "the receive side held the MAC back"
    c = counters(dut, "s")
    # every frame sent is delivered or counted as dropped once; a bad or oversize frame can
    # also be dropped as full, when the FIFO fills before its end
    assert c["frames"] == len(got), (c, len(got))
    assert c["frames"] + c["bad"] + c["oversize"] + c["full"] == n, (c, n)
    assert c["bad"] <= sum(1 for s in sent if s[1] and not s[2]), c
    assert c["oversize"] <= sum(1 for s in sent if s[2]), c
    assert c["full"] >= len(good) - len(got), c
    assert counters(dut, "m") == c, "the counters crossed to the core clock"
    return c


@cocotb.test()
async def rx_line_rate_core_stalled(dut):
    """RX at line rate (100 GbE, frames back to back, never held back) while the core stalls
    for long stretches: frames are dropped whole and counted, the MAC is never held back, and
    every frame delivered is intact and in order."""
    c = await rx_case(dut, seed=1, n=300, p_stall=0.7, max_run=60, bad_every=0, long_every=0)
    assert c["full"] > 50, f"the stalls should overflow the FIFO: {c}"
    assert c["frames"] > 20, c
    dut._log.info("rx stalled: %s", c)


@cocotb.test()
async def rx_bad_and_oversize(dut):
    """Frames with tuser on the last beat (the MAC's FCS error) and frames longer than the FIFO
    are dropped whole and counted; the frames around them pass intact."""
    c = await rx_case(dut, seed=2, n=120, p_stall=0.0, max_run=1, bad_every=5, long_every=7)
    assert c == {"frames": 120 - 24 - 17 + 3, "bad": 24 - 3, "oversize": 17, "full": 0}, c
    dut._log.info("rx bad/oversize: %s", c)


@cocotb.test()
async def rx_core_keeps_up(dut):
    """A core that keeps up (250 MHz x 64 B is faster than 100 GbE) loses nothing."""
    c = await rx_case(dut, seed=3, n=200, p_stall=0.0, max_run=1, bad_every=0, long_every=0)
    assert c["full"] == 0 and c["frames"] == 200, c


@cocotb.test()
async def tx_no_underflow(dut):
    """TX: the core writes frames with DMA jitter (random pauses); the MAC side, always ready,
    sees every frame from first to last beat without a gap (store-and-forward), frames intact
    and in order, bad frames dropped and counted, oversize frames dropped without a deadlock."""
    rng = random.Random(4)
    await start(dut, CORE_PS, MAC_PS)
    src = AxiStreamSource(bus(dut, "s_axis"), dut.s_clk, dut.s_rst)
    src.set_pause_generator(pause_gen(rng, 0.5, 6))
    sink = AxiStreamSink(bus(dut, "m_axis"), dut.m_clk, dut.m_rst)
    quiet(src, sink)
    gaps = []

    async def watch_gaps():
        in_frame = False
        while True:
            await RisingEdge(dut.m_clk)
            v = int(dut.m_axis_tvalid.value)
            if in_frame and not v:
                gaps.append(1)
            if v and int(dut.m_axis_tready.value):
                in_frame = not int(dut.m_axis_tlast.value)
    cocotb.start_soon(watch_gaps())

    d = depth(dut)
    sent = []
    for i in range(150):
        over = i % 25 == 24
        beats = rng.randint(d + 1, d + 5) if over else rng.randint(1, d)
        data = payload(rng, (beats - 1) * BEAT + rng.randint(1, BEAT))
        bad = i % 10 == 9 and not over
        sent.append((data, bad, over))
        await src.send(AxiStreamFrame(data, tuser=int(bad)))
    await src.wait()
    good = [s[0] for s in sent if not s[1] and not s[2]]
    await settle(dut, sink, len(good))
    got = []
    while not sink.empty():
        got.append(bytes((await sink.recv()).tdata))
    assert len(got) == len(good), (len(got), len(good))
    for k, (g, w) in enumerate(zip(got, good)):
        assert g == w, f"frame {k}: {len(g)} B delivered, {len(w)} B sent"
    assert not gaps, f"{len(gaps)} clocks with the MAC waiting inside a frame (underflow)"
    c = counters(dut, "s")
    assert c == {"frames": len(good), "bad": sum(s[1] for s in sent), "oversize": sum(s[2] for s in sent), "full": 0}, c
    assert counters(dut, "m") == c
    dut._log.info("tx: %s", c)


@cocotb.test()
async def tx_mac_backpressure(dut):
    """TX with the MAC holding tready low at random (as the CMAC does while it inserts pause
    frames or idles): every frame arrives intact and in order, none is dropped, and the MAC side
    never waits inside a frame while it is ready."""
    rng = random.Random(6)
    await start(dut, CORE_PS, MAC_PS)
    src = AxiStreamSource(bus(dut, "s_axis"), dut.s_clk, dut.s_rst)
    src.set_pause_generator(pause_gen(rng, 0.3, 4))
    sink = AxiStreamSink(bus(dut, "m_axis"), dut.m_clk, dut.m_rst)
    sink.set_pause_generator(pause_gen(rng, 0.4, 5))
    quiet(src, sink)
    gaps = []

    async def watch_gaps():
        in_frame = False
        while True:
            await RisingEdge(dut.m_clk)
            if in_frame and int(dut.m_axis_tready.value) and not int(dut.m_axis_tvalid.value):
                gaps.append(1)
            if int(dut.m_axis_tvalid.value) and int(dut.m_axis_tready.value):
                in_frame = not int(dut.m_axis_tlast.value)
    cocotb.start_soon(watch_gaps())

    d = depth(dut)
    sent = [payload(rng, (rng.randint(1, d) - 1) * BEAT + rng.randint(1, BEAT)) for _ in range(100)]
    for data in sent:
        await src.send(AxiStreamFrame(data))
    await src.wait()
    await settle(dut, sink, len(sent), m_cycles=20000)
    got = []
    while not sink.empty():
        got.append(bytes((await sink.recv()).tdata))
    assert got == sent, f"{len(got)} of {len(sent)} frames intact and in order"
    assert not gaps, f"{len(gaps)} clocks with the MAC ready and waiting inside a frame"
    assert counters(dut, "s") == {"frames": len(sent), "bad": 0, "oversize": 0, "full": 0}
