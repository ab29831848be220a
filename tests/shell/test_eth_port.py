"""cocotb tests of rtl/shell/hm_eth_port.sv: the shell's Ethernet side for one port (the MAC <->
core frame FIFOs and PFC from the receive FIFO's level), with the MAC on its own clock
(322 MHz) and the core on 250 MHz. tests/shell/run.py builds it with RX_DEPTH = TX_DEPTH = 64
beats.

The MAC side is cocotbext-axi's AXI-Stream source (receive, never paused beyond the 100 GbE
rate) and sink (transmit, always ready); the core side is a source with DMA jitter and a sink
that stalls. Every frame on the MAC's transmit side is either a data frame from the core,
intact and in order, or a PFC frame, checked byte for byte.
"""
import itertools
import random
import struct

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, RisingEdge
from cocotbext.axi import AxiStreamFrame, AxiStreamSink, AxiStreamSource

from shell_common import BEAT, CORE_PS, MAC_100G, MAC_PS, bus, quiet

SRC_MAC = 0x02484D000001
XOFF, XON, QUANTA, REFRESH, PRIO = 40, 8, 0xFFFF, 300, 0x08


def pfc_frame(quanta):
    body = bytes.fromhex("0180c2000001") + SRC_MAC.to_bytes(6, "big") + struct.pack(">HHH", 0x8808, 0x0101, PRIO)
    body += b"".join(struct.pack(">H", quanta if PRIO >> p & 1 else 0) for p in range(8))
    return body + bytes(60 - len(body))


async def start(dut, enable):
    cocotb.start_soon(Clock(dut.mac_clk, MAC_PS, units="ps").start())
    cocotb.start_soon(Clock(dut.core_clk, CORE_PS, units="ps").start())
    dut.cfg_pfc_enable.value = 0
    dut.cfg_pfc_prio_mask.value = PRIO
    dut.cfg_pfc_xoff_level.value = XOFF
    dut.cfg_pfc_xon_level.value = XON
    dut.cfg_pfc_quanta.value = QUANTA
    dut.cfg_pfc_refresh.value = REFRESH
    dut.cfg_src_mac.value = SRC_MAC
    dut.mac_rst.value = 1
    dut.core_rst.value = 1
    await ClockCycles(dut.mac_clk, 8)
    await ClockCycles(dut.core_clk, 8)
    dut.mac_rst.value = 0
    dut.core_rst.value = 0
    await ClockCycles(dut.core_clk, 4)
    dut.cfg_pfc_enable.value = int(enable)
    await ClockCycles(dut.core_clk, 8)


class Port:
    def __init__(self, dut, seed):
        self.dut = dut
        self.rng = random.Random(seed)
        self.mac_rx = AxiStreamSource(bus(dut, "mac_rx"), dut.mac_clk, dut.mac_rst)
        self.mac_rx.set_pause_generator(itertools.cycle(MAC_100G))
        self.mac_tx = AxiStreamSink(bus(dut, "mac_tx"), dut.mac_clk, dut.mac_rst)
        self.core_tx = AxiStreamSource(bus(dut, "core_tx"), dut.core_clk, dut.core_rst)
        self.core_tx.set_pause_generator(itertools.cycle((False, True, False, False, True, True)))
        self.core_rx = AxiStreamSink(bus(dut, "core_rx"), dut.core_clk, dut.core_rst)
        self.stalled = True
        self.core_rx.set_pause_generator(iter(lambda: self.stalled, None))
        quiet(self.mac_rx, self.mac_tx, self.core_tx, self.core_rx)
        self.tx_sent = []
        self.rx_sent = []

    def payload(self, beats):
        return bytes(self.rng.getrandbits(8) for _ in range((beats - 1) * BEAT + self.rng.randint(1, BEAT)))

    async def send_rx(self, n):
        for _ in range(n):
            d = self.payload(self.rng.randint(1, 8))
            self.rx_sent.append(d)
            await self.mac_rx.send(AxiStreamFrame(d))

    async def send_tx(self, n):
        for _ in range(n):
            d = self.payload(self.rng.randint(1, 12))
            # (a data frame is never a MAC control frame: keep the EtherType off 0x8808)
            d = d[:12] + b"\x08\x00" + d[14:] if len(d) >= 14 else d
            self.tx_sent.append(d)
            await self.core_tx.send(AxiStreamFrame(d))

    async def mac_tx_frames(self):
        """The frames on the MAC's transmit side: (data frames, [(start time in ps, quanta)]);
        self.data_end: when the last data frame ended (ps)."""
        data, pfc = [], []
        self.data_end = 0
        while not self.mac_tx.empty():
            f = await self.mac_tx.recv()
            b = bytes(f.tdata)
            if len(b) >= 14 and b[12:14] == b"\x88\x08":
                q = struct.unpack(">H", b[18 + 2 * 3:20 + 2 * 3])[0]
                assert b == pfc_frame(q), f"PFC frame: {b.hex()}"
                assert q in (0, QUANTA), q
                pfc.append((f.sim_time_start, q))
            else:
                data.append(b)
                self.data_end = max(self.data_end, f.sim_time_end or 0)
        return data, pfc


@cocotb.test()
async def pfc_xoff_refresh_xon(dut):
    """The core stops taking frames: the receive FIFO fills past XOFF and a PFC XOFF goes out
    (pause time QUANTA for the configured priority), repeated every REFRESH MAC clocks while the
    FIFO stays full; the core drains it and an XON (pause time 0) follows. Data frames from the
    core keep flowing to the MAC meanwhile, intact, with PFC frames only between them."""
    await start(dut, enable=True)
    p = Port(dut, 11)
    cocotb.start_soon(p.send_tx(25))
    await p.send_rx(80)                     # far more than the 64-beat FIFO holds
    await p.mac_rx.wait()
    await ClockCycles(dut.mac_clk, 3 * REFRESH + 50)
    assert int(dut.pfc_paused.value) == 1
    xoff_before_drain = int(dut.pfc_xoff_sent.value)
    p.stalled = False                       # the core drains the FIFO
    for _ in range(5000):
        await RisingEdge(dut.mac_clk)
        if int(dut.pfc_xon_sent.value) >= 1 and p.core_tx.empty() and not p.core_tx.active:
            break
    await ClockCycles(dut.mac_clk, 300)
    data, pfc = await p.mac_tx_frames()
    assert data == p.tx_sent, f"data frames: {len(data)} of {len(p.tx_sent)} intact and in order"
    kinds = [q for _, q in pfc]
    assert kinds[0] == QUANTA and kinds[-1] == 0 and kinds.count(0) == 1, kinds
    assert xoff_before_drain >= 4, f"XOFF and at least 3 refreshes while full: {xoff_before_drain}"
    assert int(dut.pfc_xoff_sent.value) == kinds.count(QUANTA)
    assert int(dut.pfc_xon_sent.value) == 1
    assert int(dut.pfc_paused.value) == 0
    # the receive side dropped what did not fit, whole, and delivered the rest intact
    got = []
    while not p.core_rx.empty():
        got.append(bytes((await p.core_rx.recv()).tdata))
    it = iter(p.rx_sent)
    assert all(any(g == x for x in it) for g in got), "receive frames intact and in order"
    assert int(dut.rx_frames.value) == len(got)
    assert int(dut.rx_frames.value) + int(dut.rx_drop_full.value) == len(p.rx_sent)
    assert int(dut.rx_drop_full.value) > 0
    # XOFF to XOFF: REFRESH clocks from one decision to the next. A PFC frame waits for the
    # end of the data frame on the wire (up to 12 x 64 bytes: 12 beats at 512 bits, 24 at 256),
    # so while data flows the gap varies by that much; once it has stopped, it is exact.
    beats = 12 * 64 * 8 // len(dut.mac_tx_tdata)
    pairs = [(a, b) for (a, qa), (b, qb) in zip(pfc, pfc[1:]) if qa == QUANTA and qb == QUANTA]
    refresh = [(b - a) / MAC_PS for a, b in pairs]
    quiet_gaps = [(b - a) / MAC_PS for a, b in pairs if a > p.data_end]
    dut._log.info("PFC frames %s, XOFF to XOFF %s MAC clocks (%s with no data); rx %d delivered, %d dropped",
                  kinds, refresh, quiet_gaps, len(got), int(dut.rx_drop_full.value))
    assert refresh and all(REFRESH - beats - 2 <= g <= REFRESH + beats + 2 for g in refresh), refresh
    assert quiet_gaps and all(g == REFRESH for g in quiet_gaps), quiet_gaps


@cocotb.test()
async def pfc_disable_while_paused(dut):
    """PFC disabled while the partner is paused (and the priorities changed at the same time):
    the XON goes out at once, for the priorities that were paused, and no XOFF follows."""
    await start(dut, enable=True)
    p = Port(dut, 13)
    await p.send_rx(80)
    await p.mac_rx.wait()
    await ClockCycles(dut.mac_clk, 50)
    assert int(dut.pfc_paused.value) == 1 and int(dut.pfc_xoff_sent.value) >= 1
    dut.cfg_pfc_enable.value = 0
    dut.cfg_pfc_prio_mask.value = 0x81          # (must not reach the XON of this pause)
    await ClockCycles(dut.mac_clk, 30)
    assert int(dut.pfc_xon_sent.value) == 1 and int(dut.pfc_paused.value) == 0
    xoff = int(dut.pfc_xoff_sent.value)
    await ClockCycles(dut.mac_clk, 2 * REFRESH)
    assert int(dut.pfc_xoff_sent.value) == xoff, "no XOFF once disabled, though the FIFO is full"
    data, pfc = await p.mac_tx_frames()        # (each PFC frame checked byte for byte there)
    assert [q for _, q in pfc] == [QUANTA] * xoff + [0]


@cocotb.test()
async def pfc_disabled(dut):
    """With PFC disabled the same overload sends no PFC frame: the FIFO drops and counts."""
    await start(dut, enable=False)
    p = Port(dut, 12)
    await p.send_rx(80)
    await p.mac_rx.wait()
    await ClockCycles(dut.mac_clk, 2 * REFRESH)
    assert int(dut.pfc_xoff_sent.value) == 0 and int(dut.pfc_xon_sent.value) == 0
    data, pfc = await p.mac_tx_frames()
    assert not pfc and not data
    assert int(dut.rx_drop_full.value) > 0
    # a frame the core marks bad (tuser on its last beat: its payload's DMA failed) is dropped
    # whole by the transmit FIFO and counted; the frames around it go out intact
    good = [p.payload(3), p.payload(1)]
    good = [g[:12] + b"\x08\x00" + g[14:] for g in good]
    await p.core_tx.send(AxiStreamFrame(good[0]))
    await p.core_tx.send(AxiStreamFrame(p.payload(5), tuser=1))
    await p.core_tx.send(AxiStreamFrame(good[1]))
    await p.core_tx.wait()
    await ClockCycles(dut.mac_clk, 200)
    data, pfc = await p.mac_tx_frames()
    assert data == good and not pfc, [len(d) for d in data]
    assert int(dut.tx_drop_bad.value) == 1 and int(dut.tx_frames.value) == 2


@cocotb.test()
async def mac_reset_alone(dut):
    """The MAC's reset pulses on its own (a link going down) after traffic has moved both FIFOs'
    pointers: the port resets both sides of its FIFOs, so the frames after it arrive intact and
    in order both ways (a FIFO with only its MAC side reset would read stale slots)."""
    await start(dut, enable=False)
    p = Port(dut, 14)
    p.stalled = False
    cocotb.start_soon(p.send_tx(10))
    await p.send_rx(10)
    await p.mac_rx.wait()
    await ClockCycles(dut.mac_clk, 400)
    assert int(dut.rx_frames.value) == 10
    data, _ = await p.mac_tx_frames()
    assert data == p.tx_sent
    while not p.core_rx.empty():
        await p.core_rx.recv()
    # the MAC's reset alone, for 8 MAC clocks
    await RisingEdge(dut.mac_clk)
    dut.mac_rst.value = 1
    await ClockCycles(dut.mac_clk, 8)
    dut.mac_rst.value = 0
    await ClockCycles(dut.core_clk, 20)
    p.rx_sent.clear()
    p.tx_sent.clear()
    cocotb.start_soon(p.send_tx(10))
    await p.send_rx(10)
    await p.mac_rx.wait()
    await ClockCycles(dut.mac_clk, 400)
    got = []
    while not p.core_rx.empty():
        got.append(bytes((await p.core_rx.recv()).tdata))
    assert got == p.rx_sent, f"receive after the MAC's reset: {len(got)} of {len(p.rx_sent)} intact"
    data, _ = await p.mac_tx_frames()
    assert data == p.tx_sent, f"transmit after the MAC's reset: {len(data)} of {len(p.tx_sent)} intact"
