"""cocotb test of rtl/shell/hm_card.sv, the card's logic (engine, control core, PCIe side,
Ethernet port, shell registers) as one design, behind cocotbext-pcie's model of the UltraScale+
PCIe block and its root complex on the core clock, with cocotbext-axi's AXI-Stream models for
the MAC on its own clock (322 MHz). Every block is tested on its own elsewhere; this checks that
they are wired to each other as the register map says: each window of BAR 0 reaches its block,
the shell's registers hold the port's settings and count the completer's and the receive
side's events, the MAC's frames reach the engine, the link status crosses, and an FLR resets
what it should. Without firmware or QPs the engine does no DMA, raises no interrupt and sends
nothing, so the DMA, MSI-X and transmit counters are only seen at 0 here.

The register offsets come from the generated register package (rtl/pkg/hm_regs_pkg.sv, from
regs/hematite.rdl): the test reads them there, as the RTL does.
tests/shell/run.py builds hm_card with 256 QPs, MRs and CQs (the engine's other sizes as on a
card) and the control core held (no firmware: the CPU stays in reset until CORE_CTRL.run).
"""
import os
import re
import shutil
import sys
import time
from pathlib import Path

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, RisingEdge, with_timeout
from cocotbext.axi import AxiStreamFrame, AxiStreamSink, AxiStreamSource

from shell_common import BAR0, NUM_VEC, bus, flr, inject_np, posted_write, quiet, read_fails, shell_endpoint, wait_reset

NUM_QPS = 256
RX_DEPTH = 512
ROOT = Path(__file__).resolve().parents[2]
# messages per operation and bytes per message of the demo through the card: 6000 bytes are two
# packets at the 4096-byte MTU, split over several read requests and write requests by the DMA
# bridge; `./hematite demo-card --count N --size S` picks others ($HM_CARD_DEMO)
DEMO_COUNT, DEMO_SIZE = 4, 6000


def regs():
    """{name: value} of the generated register package's constants."""
    text = (Path(__file__).resolve().parents[2] / "rtl/pkg/hm_regs_pkg.sv").read_text()
    out = {}
    for name, h, d in re.findall(r"localparam\s+logic\s*\[\d+:0\]\s+(HM_\w+)\s*=\s*\d+'(?:h([0-9A-Fa-f_]+)|d(\d+))", text):
        out[name] = int(h.replace("_", ""), 16) if h else int(d)
    return out


R = regs()
SHELL = R["HM_BAR_SHELL"]
CTRL = R["HM_BAR_CTRL"]
MSIX = R["HM_BAR_MSIX"]


def sh(name):
    return SHELL + R[f"HM_SHELL_{name}"]


class Card:
    def __init__(self, dut):
        self.dut = dut
        self.rc, self.dev = shell_endpoint(dut)
        cocotb.start_soon(Clock(dut.mac_clk, 3104, units="ps").start())
        self.mac_rx = AxiStreamSource(bus(dut, "mac_rx"), dut.mac_clk, dut.mac_rst)
        self.mac_tx = AxiStreamSink(bus(dut, "mac_tx"), dut.mac_clk, dut.mac_rst)
        quiet(self.mac_rx, self.mac_tx)
        self.bar0 = None

    async def start(self):
        d = self.dut
        d.cfg_flr_in_process.value = 0
        d.mac_rx_aligned.value = 0
        d.mac_rst.value = 1
        await RisingEdge(d.clk)
        await wait_reset(d)
        await ClockCycles(d.mac_clk, 10)
        d.mac_rst.value = 0
        await self.rc.enumerate()
        pci = self.rc.find_device(self.dev.functions[0].pcie_id)
        await pci.enable_device()
        await pci.set_master()
        self.bar0 = pci.bar_window[0]
        self.bar2 = pci.bar_window[2]
        self.base0 = pci.bar_addr[0]

    async def rd(self, addr):
        return await with_timeout(self.bar0.read_dword(addr), 50, "us")

    async def fails(self, addr):
        """True when a read of addr completes with an error (Completer Abort)."""
        return await read_fails(self.bar0, addr)


def frame(n, ethertype=b"\x08\x00"):
    """An Ethernet frame of n bytes to our MAC address (not RoCE: the engine drops it)."""
    return bytes.fromhex("02484d010001") + bytes.fromhex("02484d010002") + ethertype + bytes(i & 0xff for i in range(n - 14))


@cocotb.test()
async def card_windows_registers_mac_and_flr(dut):
    """Each BAR 0 window reaches its block; the shell's registers: reset values, read/write,
    errors; the completer's counters (MMIO reads and writes, register errors, a push, an
    Unsupported Request, a dropped write) and the receive side's (frames, bad frames) move as
    their events happen; the MAC's frames reach the engine; the link status crosses from the
    MAC clock; an FLR resets the settings and the receive side's count, keeps the completer's,
    and counts itself."""
    c = Card(dut)
    await c.start()

    # the engine's register block, the control core's host port, the MSI-X table
    assert await c.rd(R["HM_REG_ID"]) == 0x484D5445                     # "HMTE"
    assert await c.rd(R["HM_REG_VERSION"]) == R["HM_REG_VERSION_RESET"]
    caps = await c.rd(R["HM_REG_CAPS"])
    assert caps >> 24 == NUM_QPS.bit_length() - 1 and caps >> 8 & 0xff == 512 // 64, hex(caps)
    status = await c.rd(CTRL + R["HM_HOST_MBOX_STATUS"])
    assert await c.rd(CTRL + R["HM_HOST_CORE_CTRL"]) & 1 == 0, "the CPU runs without firmware"
    for v in (0, 5, NUM_VEC - 1):
        assert await c.rd(MSIX + 16 * v + 12) == 1                      # every vector masked
    dut._log.info("engine caps %#x, mailbox status %#x", caps, status)

    # the shell's registers: reset values, read/write, an offset without a register, a
    # read-only one written
    assert await c.rd(sh("RX_FIFO_BEATS")) == RX_DEPTH
    assert await c.rd(sh("PFC_XOFF")) == R["HM_SHELL_PFC_XOFF_RESET"]
    assert await c.rd(sh("PFC_XON")) == R["HM_SHELL_PFC_XON_RESET"]
    assert await c.rd(sh("PFC_CTRL")) == R["HM_SHELL_PFC_CTRL_RESET"]   # PFC off
    await c.bar0.write_dword(sh("PFC_QUANTA"), 0x1234)
    await c.bar0.write_dword(sh("MAC_LO"), 0x4d010001)
    assert await c.rd(sh("PFC_QUANTA")) == 0x1234
    assert await c.rd(sh("MAC_LO")) == 0x4d010001
    err0 = await c.rd(sh("PCIE_AXIL_ERR"))
    assert await c.fails(SHELL + 0xffc), "a read of an offset without a register completed"
    await c.bar0.write_dword(sh("ETH_RX_FRAMES"), 7)                    # read-only: refused
    assert await c.rd(sh("ETH_RX_FRAMES")) == 0
    assert await c.rd(sh("PCIE_AXIL_ERR")) == err0 + 2
    assert await c.rd(sh("PCIE_MMIO_RD")) > 10 and await c.rd(sh("PCIE_MMIO_WR")) == 3

    # the completer's other counters: a push (64 bytes into QP 5's window of BAR 2, taken by
    # the engine), a BAR 0 read of 32 DWORDs (Unsupported Request), a BAR 0 write of 32 DWORDs
    # (dropped)
    from cocotbext.pcie.core.tlp import CplStatus, TlpType
    await c.bar2.write(5 * 64, bytes(range(64)))
    cpl = await inject_np(c.rc, c.dev, TlpType.MEM_READ, c.base0 + 0x100, 128)
    assert cpl.status == CplStatus.UR, cpl
    await posted_write(c.rc, c.base0 + 0x100, b"\x55" * 128)
    assert await c.rd(sh("PCIE_PUSH")) == 1
    assert await c.rd(sh("PCIE_UR")) == 1
    assert await c.rd(sh("PCIE_DROPPED")) == 1
    # (no firmware and no QPs: nothing makes the engine DMA, raise an interrupt or send, so
    # those counters are only seen at 0 here; their blocks' own tests make them move)
    for n in ("MSIX_SENT", "MSIX_FAIL", "DMA_RD_REQ", "DMA_WR_REQ", "DMA_CPL", "DMA_TIMEOUT",
              "ETH_TX_FRAMES", "ETH_TX_DROP_BAD"):
        assert await c.rd(sh(n)) == 0, n

    # the link: the MAC's aligned line, through the synchroniser into STATUS
    assert await c.rd(sh("STATUS")) & 1 == 0
    dut.mac_rx_aligned.value = 1
    await ClockCycles(dut.clk, 20)
    assert await c.rd(sh("STATUS")) & 1 == 1

    # frames from the MAC: three good ones reach the engine (which takes them), a bad one is
    # dropped whole by the receive FIFO
    for n in (64, 100, 300):
        await c.mac_rx.send(AxiStreamFrame(frame(n)))
    await c.mac_rx.send(AxiStreamFrame(frame(80), tuser=1))
    await c.mac_rx.wait()
    await ClockCycles(dut.clk, 200)
    assert await c.rd(sh("ETH_RX_FRAMES")) == 3
    assert await c.rd(sh("ETH_RX_DROP_BAD")) == 1
    assert await c.rd(sh("ETH_RX_DROP_FULL")) == 0
    assert int(dut.u_eng.s_rx_tready.value) == 1, "the engine holds its receive side"
    assert c.mac_tx.empty(), "the card sent a frame of its own"

    # an FLR: the core and the shell's registers reset (PFC settings back), the FLR counted,
    # the completer's counters go on
    wr = await c.rd(sh("PCIE_MMIO_WR"))
    await flr(dut, 2000)
    assert await c.rd(sh("FLR_COUNT")) == 1
    assert await c.rd(sh("PFC_QUANTA")) == R["HM_SHELL_PFC_QUANTA_RESET"]
    assert await c.rd(sh("MAC_LO")) == 0
    assert await c.rd(sh("PCIE_MMIO_WR")) == wr
    assert await c.rd(sh("PCIE_PUSH")) == 1 and await c.rd(sh("PCIE_UR")) == 1   # (the completer's)
    assert await c.rd(R["HM_REG_ID"]) == 0x484D5445
    assert await c.rd(sh("ETH_RX_FRAMES")) == 0, "the core side's frame count survived the FLR"


# handshakes at hm_card's block boundaries, shown when the demo through the card stalls
STALL_SIGNALS = [f"{p}_{s}" for p in ("push", "irq") for s in ("valid", "ready")] + [
    f"axi_{c}{s}" for c in ("ar", "r", "aw", "w", "b") for s in ("valid", "ready")] + [
    f"shl_{c}{s}" for c in ("ar", "r", "aw", "w", "b") for s in ("valid", "ready")] + [
    f"{b}_tvalid" for b in ("m_axis_rq", "s_axis_rc", "s_axis_cq", "m_axis_cc", "rx", "tx")] + [
    f"{b}_tready" for b in ("m_axis_rq", "s_axis_rc", "s_axis_cq", "m_axis_cc", "rx", "tx")] + [
    "bar_req", "bar_rsp", "host_req", "host_rsp", "ctl_req", "ctl_rsp", "cfg_interrupt_msix_int",
    "cfg_interrupt_msix_sent", "cfg_interrupt_msix_fail"]


async def bad_requests(dut, host, d):
    """Bad requests to the card's server, each with its defined answer, as the device process
    gives them (hostdrv/src/simproto.rs); then the client goes and the function is reset."""
    import errno
    import socket
    from card_host import LO, P, REP, REQ

    seq = [0]

    async def call(s, cmd, a=0, b=0, c=0, dd=0):
        seq[0] += 1
        s.send(REQ.pack(seq[0], cmd, 0, a, b, c, dd))
        for _ in range(2000):
            await ClockCycles(dut.clk, 20)
            try:
                r = REP.unpack(s.recv(REP.size))
            except BlockingIOError:
                continue
            assert r[0] == seq[0] and r[1] == cmd and r[2] == P["F_REPLY"], r
            return r[3], r[5:]
        raise AssertionError(f"no reply to command {cmd}")

    def client():
        s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        s.connect(str(d / "a.sock"))
        s.setblocking(False)
        return s

    s = client()
    assert (await call(s, P["CMD_READ32"], R["HM_REG_ID"]))[0] == -errno.EPROTO          # before HELLO
    assert (await call(s, P["CMD_HELLO"], P["PROTO_VERSION"] + 1))[0] == -errno.EPROTO   # another version
    st, (bar, nvec, mac, ip) = await call(s, P["CMD_HELLO"], P["PROTO_VERSION"])
    assert (st, bar, nvec, mac, ip) == (0, BAR0, NUM_VEC, 0x02000000000A, 0x0A000001)
    other = client()
    assert (await call(other, P["CMD_HELLO"], P["PROTO_VERSION"]))[0] == -errno.EBUSY    # a second client
    other.close()
    assert await call(s, P["CMD_READ32"], R["HM_REG_ID"]) == (0, (0x484D5445, 0, 0, 0))
    for off in (BAR0, 2):                                                                # beyond BAR 0, unaligned
        assert (await call(s, P["CMD_READ32"], off))[0] == -errno.EFAULT
    assert (await call(s, P["CMD_WAIT32"], 0, 1, 0, P["WAIT_MAX_CYCLES"] + 1))[0] == -errno.EINVAL
    win = LO + (1 << 30)
    assert (await call(s, P["CMD_DMA_MAP"], win + 8, 0x7000_0000_0000, 4096, 1))[0] == -errno.EINVAL  # unaligned
    assert (await call(s, P["CMD_DMA_MAP"], 0x1000, 0x7000_0000_0000, 4096, 1))[0] == -errno.EINVAL   # below LO
    assert (await call(s, P["CMD_DMA_MAP"], win, 0x7000_0000_0000, 8192, 1))[0] == 0
    assert (await call(s, P["CMD_DMA_MAP"], win + 4096, 0x7000_0000_0000, 4096, 0))[0] == -errno.EEXIST
    assert (await call(s, P["CMD_DMA_UNMAP"], win, 4096))[0] == -errno.ENOENT                       # wrong length
    assert (await call(s, P["CMD_DMA_UNMAP"], win, 8192))[0] == 0
    assert (await call(s, P["CMD_SET_IRQ"], NUM_VEC, 0))[0] == -errno.EINVAL
    assert (await call(s, P["CMD_SET_IRQ"], 1, 1))[0] == -errno.EBADF                   # no eventfd passed
    assert (await call(s, P["CMD_PUSH64"]))[0] == -errno.EINVAL                         # a push without its data
    assert (await call(s, 99))[0] == -errno.ENOSYS
    s.close()
    t0 = time.monotonic()
    while host.resets < 1:
        assert time.monotonic() - t0 < 60, "no function reset after the probing client went"
        await ClockCycles(dut.clk, 100)
    assert not host.dma.windows and host.refused == 0


def sim_exe():
    """The hematite-sim binary: $HM_SIM_EXE (relative to the repository), else the suite's build
    (target/debug), else the release build."""
    if os.environ.get("HM_SIM_EXE"):
        return ROOT / os.environ["HM_SIM_EXE"]
    for p in (ROOT / "target/debug/hematite-sim", ROOT / "target/release/hematite-sim"):
        if p.exists():
            return p
    raise AssertionError("no hematite-sim: cargo build -p hematite-sim --bin hematite-sim (./hematite test-shell builds it)")


@cocotb.test()
async def card_serves_the_host_driver(dut):
    """End to end through the shell: the card's logic, with the MSI-X table programmed through
    the root complex, is served to the host driver as a device process (card_host.py); the
    driver finds the control core held and loads the firmware through BAR 0; `hematite-sim demo --attach` runs SEND, RDMA WRITE, RDMA
    READ and atomics through the driver between it (NIC a, the requester) and a simulated NIC
    (`hematite-sim device`, NIC b) on the datagram wire, verifying every byte. Every BAR access
    is a TLP through the PCIe model, every DMA a request through the DMA bridge to the
    client's memory, every frame crosses the MAC's clock both ways. Then the client goes away
    and the function is reset as vfio-pci does (FLR; the CPU held until the next driver)."""
    import subprocess
    import tempfile
    from card_host import CardHost

    sim = sim_exe()
    fw = Path(os.environ.get("HM_FW_HEX", ROOT / "build/fw/firmware.hex"))
    assert fw.exists(), f"{fw}: build the firmware image with ./hematite fw"
    c = Card(dut)
    await c.start()
    dut.mac_rx_aligned.value = 1
    pci = c.rc.find_device(c.dev.functions[0].pcie_id)
    d = Path(tempfile.mkdtemp(prefix="hm-card-"))
    host = CardHost(c, R, d / "a.sock", d / "a.wire", d / "b.wire", 0x02000000000A, 0x0A000001, BAR0, NUM_VEC)
    await host.msix_setup(pci)
    assert await c.rd(CTRL + R["HM_HOST_CORE_CTRL"]) & 1 == 0, "the CPU runs before the driver loaded firmware"
    cocotb.start_soon(host.wire_rx())
    cocotb.start_soon(host.wire_tx())
    host.listen()
    stop = []
    server = cocotb.start_soon(host.serve(lambda: not stop))
    await bad_requests(dut, host, d)
    logs = {n: open(d / f"{n}.log", "w") for n in ("peer", "demo")}
    peer = subprocess.Popen([str(sim), "device", "--socket", str(d / "b.sock"), "--wire-local", str(d / "b.wire"),
                             "--wire-peer", str(d / "a.wire"), "--mac", "02:00:00:00:00:0b", "--ip", "10.0.0.2",
                             "--fw", str(fw), "--pcap", str(d / "b.pcap")], stdin=subprocess.DEVNULL, stdout=logs["peer"], stderr=subprocess.STDOUT)
    demo = None
    try:
        t0 = time.monotonic()
        while not (d / "b.sock").exists():
            assert peer.poll() is None and time.monotonic() - t0 < 60, "the peer device did not come up"
            await ClockCycles(dut.clk, 100)
        # (the driver loads the card's firmware from HEMATITE_FW when it opens it)
        env = dict(os.environ, HM_SIM_REPLY_TIMEOUT_S="900", HEMATITE_FW=str(fw))
        args = os.environ.get("HM_CARD_DEMO", f"--count {DEMO_COUNT} --size {DEMO_SIZE}").split()
        demo = subprocess.Popen([str(sim), "demo", "--attach", str(d)] + args,
                                stdin=subprocess.DEVNULL, stdout=logs["demo"], stderr=subprocess.STDOUT, env=env)
        t0 = time.monotonic()
        limit = float(os.environ.get("HM_CARD_DEMO_LIMIT_S", "600"))
        while demo.poll() is None:
            if time.monotonic() - t0 > limit:
                # (the handshakes at the card's block boundaries, read from the model: a
                # register read could wait behind whatever is stuck)
                counters = {n: int(getattr(dut, n).value) for n in STALL_SIGNALS}
                raise AssertionError(f"the demo did not finish within {limit:.0f} s: card {counters}, wire out / in "
                                     f"{host.frames_tx} / {host.frames_rx}, DMA refused {host.refused}, MSI-X messages "
                                     f"{host.irqs}; demo:\n"
                                     + (d / "demo.log").read_text())
            await ClockCycles(dut.clk, 200)
        # a demo that failed says why at once (it may never have reached the card)
        assert demo.returncode == 0, (f"the demo failed (exit {demo.returncode}):\n{(d / 'demo.log').read_text()}"
                                      f"\npeer:\n{(d / 'peer.log').read_text()}")
        # the client is gone: the server resets the function; then it stops
        t0 = time.monotonic()
        while host.resets < 2:
            assert time.monotonic() - t0 < 120, "no function reset after the client went"
            await ClockCycles(dut.clk, 200)
    finally:
        stop.append(1)
        for p in (demo, peer):
            if p is not None and p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        for f in logs.values():
            f.close()
    t0 = time.monotonic()
    while not server.done():
        assert time.monotonic() - t0 < 120, "the server did not stop"
        await ClockCycles(dut.clk, 200)
    host.close()
    out = (d / "demo.log").read_text()
    dut._log.info("hematite-sim demo --attach, through the card:\n%s", out)
    assert demo.returncode == 0, f"the demo failed:\n{out}\npeer:\n{(d / 'peer.log').read_text()}"
    rows = {m.group(1): m.group(2) for m in re.finditer(r"^(SEND|RDMA WRITE|RDMA READ|ATOMICS)\s.*\s(verified|MISMATCH)$", out, re.M)}
    assert rows == {k: "verified" for k in ("SEND", "RDMA WRITE", "RDMA READ", "ATOMICS")}, rows

    # every frame the card sent, as the peer captured it, through the independent ICRC checker
    icrc = subprocess.run([sys.executable, str(ROOT / "tests/tools/roce_icrc.py"), str(d / "b.pcap")],
                          capture_output=True, text=True)
    dut._log.info("the peer's capture: %s", icrc.stdout.strip().splitlines()[-1:])
    assert icrc.returncode == 0, icrc.stdout + icrc.stderr

    # what the shell counted while the driver ran (read just before the reset)
    n = host.before_reset[-1]
    dut._log.info("card counters: %s; frames to / from the wire %d / %d; requests %d (CQ doorbells coalesced %d); "
                  "MSI-X messages per vector %s; DMA refused %d (after the client went: %d)", n, host.frames_tx,
                  host.frames_rx, host.requests, host.coalesced, host.irqs, host.refused, host.lost)
    assert host.refused == 0, "DMA outside the client's windows"
    assert n["ETH_TX_FRAMES"] == host.frames_tx > 0 and n["ETH_TX_DROP_BAD"] == 0
    assert n["ETH_RX_FRAMES"] == host.frames_rx > 0
    assert n["DMA_RD_REQ"] > 0 and n["DMA_WR_REQ"] > 0 and n["DMA_CPL"] >= n["DMA_RD_REQ"]
    assert n["DMA_CPL_ERR"] == 0 and n["DMA_TIMEOUT"] == 0
    assert n["PCIE_AXIL_ERR"] == 0
    assert n["MSIX_SENT"] == sum(host.irqs.values()) > 0, "MSI-X messages counted and received differ"
    assert n["PCIE_PUSH"] == host.pushes > 0
    # after the reset: the CPU held until the next driver loads the firmware, the DMA
    # counters started over, the engine answering
    assert await c.rd(CTRL + R["HM_HOST_CORE_CTRL"]) & 1 == 0
    assert await c.rd(sh("DMA_RD_REQ")) == 0 and await c.rd(sh("FLR_COUNT")) == 2   # (the probe's, the demo's)
    assert await c.rd(R["HM_REG_ID"]) == 0x484D5445
    shutil.rmtree(d, ignore_errors=True)     # (kept when the test fails: the logs and the capture)
