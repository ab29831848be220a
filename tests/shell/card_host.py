"""The card's logic served to the host driver: a device process for `hostdrv`'s simulation
backend whose NIC is hm_card behind cocotbext-pcie's root complex and UltraScale+ PCIe block
model, with the MAC on its own clock, so that the driver, and every program on it, runs through
the shell (issue 21, "end to end through the shell").

It speaks the protocol of hostdrv/src/simproto.rs (its constants are read from that file, the
one source) on an AF_UNIX SOCK_SEQPACKET socket, as `hematite-sim device` does:

* MMIO: a register read is a memory read TLP to BAR 0 through the root complex, a write a
  posted memory write, a push (CMD_PUSH64) one 64-byte write into BAR 2, a wait (CMD_WAIT32)
  reads every WAIT_GAP_CYCLES clocks. A read the card answers with an error is EFAULT.
* DMA: the card's requests reach the root complex's memory space, where the client's DMA
  windows (CMD_DMA_MAP: IOVA -> its virtual address) are one region read and written through
  /proc/PID/mem. A request outside every window, or a write to a read-only one, is refused
  like an IOMMU fault: the read gets a Completer Abort, the write is dropped; both counted.
* Interrupts: the MSI-X table is programmed through the root complex (as the kernel's vfio-pci
  does) and each vector's message signals the eventfd the client attached (CMD_SET_IRQ).
* Function reset (CMD_RESET, or a client that goes away): FLR and the MSI-X table restored,
  as vfio-pci does; the control core is held after it, until a driver opens the function
  and loads the firmware again (the device process boots its own image at once).
* A second client while one is attached gets EBUSY; a client that goes loses what it left
  queued, its windows and its eventfds, and the function is reset.
* The wire: the MAC's frames go out as datagrams on the same datagram wire as the device
  processes' (one frame per datagram), so a `hematite-sim device` can be the peer. ARP for our
  address is answered here, and CMD_ARP_RESOLVE asks the wire, as the device process does
  (the firmware does not do ARP yet: issue 22). Frames from the wire reach the MAC's receive
  side padded to 60 bytes, as a MAC delivers them.

The firmware: the card's control core comes up held with an empty IMEM, as on a card, and the
driver loads the image through BAR 0 when it opens the function (hostdrv/src/nic/boot.rs,
`$HEMATITE_FW`), every word a TLP through the model.
"""
import errno
import os
import re
import socket
import struct
from pathlib import Path

from cocotb.triggers import ClockCycles
from cocotb.utils import get_sim_time
from cocotbext.axi import AxiStreamFrame
from cocotbext.axi.address_space import Region

from shell_common import flr

ROOT = Path(__file__).resolve().parents[2]


def proto():
    """{name: value} of simproto.rs's integer constants (`pub const NAME: T = EXPR;` where EXPR
    is a number, a shift, or a sum of names already read)."""
    text = (ROOT / "hostdrv/src/simproto.rs").read_text()
    # (PUSH_BYTES is the RTL package's HM_PUSH_BYTES, as in the Rust source)
    m = re.search(r"localparam int HM_PUSH_BYTES = (\d+);", (ROOT / "rtl/pkg/hm_pkg.sv").read_text())
    out = {"HM_PUSH_BYTES": int(m.group(1))}
    for name, expr in re.findall(r"pub const (\w+): (?:u16|u64|usize|u32) = ([^;]+);", text):
        expr = expr.replace("hematite_abi::pkt::HM_PUSH_BYTES as usize", "HM_PUSH_BYTES")
        if re.fullmatch(r"[\w\s<+()]+", expr):
            out[name] = eval(expr, {}, dict(out))   # numbers, <<, + and names read above
    return out


P = proto()
REQ = struct.Struct("<IHHQQQQ")
REP = struct.Struct("<IHHiIQQQQ")
assert REQ.size == P["REQ_BYTES"] and REP.size == P["REP_BYTES"]
CYCLE_NS = 4            # the core clock (250 MHz)
LO, HI = 1 << 32, 1 << 47   # IOVAs the server maps: user addresses (the root complex's own
                            # regions, BARs and MSI, are below 4 GiB or at 2^63)


# the shell's counters kept before each reset (a test reads what the traffic moved)
COUNTERS = ("ETH_RX_FRAMES", "ETH_TX_FRAMES", "ETH_TX_DROP_BAD", "PCIE_MMIO_RD", "PCIE_MMIO_WR",
            "PCIE_PUSH", "PCIE_AXIL_ERR", "MSIX_SENT", "DMA_RD_REQ", "DMA_WR_REQ", "DMA_CPL",
            "DMA_CPL_ERR", "DMA_TIMEOUT")


class ClientMemory(Region):
    """The client's DMA windows in the root complex's memory space (registered at LO)."""

    def __init__(self, host):
        super().__init__(HI - LO)
        self.host = host
        self.windows = {}   # iova -> (va, length, writable)

    def find(self, iova, length, write):
        for base, (va, n, w) in self.windows.items():
            if base <= iova and iova + length <= base + n:
                if write and not w:
                    break
                return va + iova - base
        if self.host.conn is None:
            self.host.lost += 1     # the client is gone (its windows with it): not a fault
        else:
            self.host.refused += 1
        raise Exception(f"DMA {'write' if write else 'read'} of {length} B at IOVA {iova:#x}: outside the client's windows")

    async def _read(self, address, length, **kwargs):
        va = self.find(LO + address, length, False)
        if self.host.trace:
            self.host.trace.write(f"{self.host.cycles()} dma-rd {LO + address:#x} {length}\n")
        return os.pread(self.host.mem, length, va)

    async def _write(self, address, data, **kwargs):
        va = self.find(LO + address, len(data), True)
        if self.host.trace:
            self.host.trace.write(f"{self.host.cycles()} dma-wr {LO + address:#x} {bytes(data).hex()}\n")
        os.pwrite(self.host.mem, bytes(data), va)


class CardHost:
    """Serves `card` (test_card.Card, started) at `sock` with its Ethernet port on the datagram
    wire `wire_local` -> `wire_peer`."""

    def __init__(self, card, regs, sock, wire_local, wire_peer, mac, ipv4, bar0_size, num_vec):
        self.c, self.dut, self.R = card, card.dut, regs
        self.sock_path, self.wire_peer = str(sock), str(wire_peer)
        self.mac, self.ipv4 = mac, ipv4
        self.bar0_size, self.num_vec = bar0_size, num_vec
        self.conn = None
        self.hello = False
        self.mem = None
        self.before_reset = []   # the shell's counters read just before each function reset
        self.irq_fds = {}
        self.irqs = {}          # messages received per vector
        # $HM_CARD_TRACE: a file that gets every DMA access, MMIO request and MSI-X message
        self.trace = open(os.environ["HM_CARD_TRACE"], "w") if os.environ.get("HM_CARD_TRACE") else None
        self.refused = 0
        self.lost = 0           # DMA after the client went, before the reset
        self.busy = []          # connections refused with EBUSY (their HELLO not answered yet)
        self.frames_tx = self.frames_rx = 0
        self.arp = {}
        self.requests = 0
        self.pushes = 0
        self.coalesced = 0      # CQ doorbells superseded by a later one (superseded())
        self.resets = 0
        self.msix = None
        self.dma = ClientMemory(self)
        card.rc.mem_address_space.register_region(self.dma, LO, HI - LO)
        self.wire = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        Path(wire_local).unlink(missing_ok=True)
        self.wire.bind(str(wire_local))
        self.wire.setblocking(False)
        self.backlog = []
        self.closed = False

    def close(self):
        """The wire's socket and the trace file (the listener goes when serve() ends); the wire's
        coroutines end at their next step."""
        self.closed = True
        self.wire.close()
        if self.trace:
            self.trace.close()

    # -- the card -------------------------------------------------------------------------

    def cycles(self):
        return int(get_sim_time("ns")) // CYCLE_NS

    async def msix_setup(self, pci):
        """MSI-X vectors as vfio-pci sets them up: every vector's message to the root complex,
        each signalling the client's eventfd for it."""
        assert await pci.alloc_irq_vectors(self.num_vec, self.num_vec) == self.num_vec
        for v in range(self.num_vec):
            pci.request_irq(v, self.irq_handler(v))
        table = self.R["HM_BAR_MSIX"]
        self.msix = [await self.c.bar0.read(table + 16 * v, 16) for v in range(self.num_vec)]

    def irq_handler(self, v):
        async def handler():    # (the root complex starts it as a coroutine per message)
            self.irqs[v] = self.irqs.get(v, 0) + 1
            if self.trace:
                self.trace.write(f"{self.cycles()} msix {v}\n")
            fd = self.irq_fds.get(v)
            if fd is not None:
                try:
                    os.write(fd, (1).to_bytes(8, "little"))
                except OSError:
                    pass
        return handler

    async def reset(self):
        """FLR and the MSI-X table restored, as vfio-pci does."""
        self.resets += 1
        self.before_reset.append({n: await self.c.rd(self.R["HM_BAR_SHELL"] + self.R[f"HM_SHELL_{n}"])
                                  for n in COUNTERS})
        await flr(self.dut)
        table = self.R["HM_BAR_MSIX"]
        for v, entry in enumerate(self.msix):
            await self.c.bar0.write(table + 16 * v, entry)

    # -- the wire ---------------------------------------------------------------------------

    def arp_frame(self, op, dst_mac, dst_ip):
        return (dst_mac.to_bytes(6, "big") + self.mac.to_bytes(6, "big") + b"\x08\x06"
                + struct.pack(">HHBBH", 1, 0x0800, 6, 4, op) + self.mac.to_bytes(6, "big")
                + self.ipv4.to_bytes(4, "big") + (0 if op == 1 else dst_mac).to_bytes(6, "big")
                + dst_ip.to_bytes(4, "big")).ljust(60, b"\0")

    def send_wire(self, f):
        if self.closed:
            return True     # (the frame is lost, as on a cable pulled out)
        try:
            self.wire.sendto(f, self.wire_peer)
            return True
        except BlockingIOError:
            return False
        except OSError:
            return True     # no peer bound: the frame is lost, as on a cable with nothing at the end

    async def wire_rx(self):
        while not self.closed:
            await ClockCycles(self.dut.clk, 16)
            while not self.closed and self.backlog and self.send_wire(self.backlog[0]):
                self.backlog.pop(0)
            while not self.closed:
                try:
                    f = self.wire.recv(16384)
                except BlockingIOError:
                    break
                if len(f) >= 42 and f[12:14] == b"\x08\x06":
                    op = int.from_bytes(f[20:22], "big")
                    sha, spa, tpa = f[22:28], int.from_bytes(f[28:32], "big"), int.from_bytes(f[38:42], "big")
                    if spa:
                        self.arp[spa] = int.from_bytes(sha, "big")   # every sender is learnt
                    if op == 1 and tpa == self.ipv4:
                        self.backlog.append(self.arp_frame(2, int.from_bytes(sha, "big"), spa))
                    continue
                self.frames_rx += 1
                await self.c.mac_rx.send(AxiStreamFrame(f.ljust(60, b"\0"), tuser=0))

    async def wire_tx(self):
        while not self.closed:
            f = await self.c.mac_tx.recv()
            self.frames_tx += 1
            data = bytes(f.tdata)
            if self.backlog or not self.send_wire(data):
                self.backlog.append(data)

    # -- the client ---------------------------------------------------------------------------

    def listen(self):
        Path(self.sock_path).unlink(missing_ok=True)
        tmp = self.sock_path + ".tmp"
        Path(tmp).unlink(missing_ok=True)
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.listener.bind(tmp)
        os.chmod(tmp, 0o600)
        self.listener.listen(4)
        self.listener.setblocking(False)
        os.rename(tmp, self.sock_path)

    def reply(self, seq, cmd, status=0, a=0, b=0, c=0, d=0):
        try:
            self.conn.send(REP.pack(seq, cmd, P["F_REPLY"], status, 0, a, b, c, d))
        except OSError:
            pass

    async def drop_client(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None
        if self.mem is not None:
            os.close(self.mem)
            self.mem = None
        self.dma.windows.clear()
        for fd in self.irq_fds.values():
            os.close(fd)
        self.irq_fds.clear()
        await self.reset()   # the next client finds a clean device, as vfio-pci leaves it

    def refuse_others(self):
        """While a client is attached: another one's HELLO is answered EBUSY, and it is closed."""
        try:
            s, _ = self.listener.accept()
            s.setblocking(False)
            self.busy.append(s)
        except BlockingIOError:
            pass
        for s in list(self.busy):
            try:
                msg, anc, _, _ = s.recvmsg(P["PUSH_REQ_BYTES"], socket.CMSG_SPACE(4))
            except BlockingIOError:
                continue
            except OSError:
                msg, anc = b"", []
            for fd in self.fds_of(anc):
                os.close(fd)
            if len(msg) == REQ.size:
                seq, cmd, flags, *_ = REQ.unpack(msg)
                if not flags & P["F_POSTED"]:
                    try:
                        s.send(REP.pack(seq, cmd, P["F_REPLY"], -errno.EBUSY, 0, 0, 0, 0, 0))
                    except OSError:
                        pass
            s.close()
            self.busy.remove(s)

    @staticmethod
    def fds_of(anc):
        out = []
        for lvl, typ, data in anc:
            if lvl == socket.SOL_SOCKET and typ == socket.SCM_RIGHTS:
                out += [int.from_bytes(data[i:i + 4], "little") for i in range(0, len(data) - 3, 4)]
        return out

    async def serve(self, running):
        """Serves clients (after listen()) while running() is true."""
        while running():
            await ClockCycles(self.dut.clk, 8)
            if self.conn is None:
                try:
                    self.conn, _ = self.listener.accept()
                    self.conn.setblocking(False)
                    self.hello = False
                except BlockingIOError:
                    continue
            else:
                self.refuse_others()
            # every request waiting, then each in order
            batch, gone = [], False
            while self.conn is not None:
                try:
                    msg, anc, _, _ = self.conn.recvmsg(P["PUSH_REQ_BYTES"], socket.CMSG_SPACE(4))
                except BlockingIOError:
                    break
                except OSError:
                    msg = b""
                if not msg:
                    gone = True
                    break
                batch.append((msg, self.fds_of(anc)))
            if gone:
                # a client that went: what it left queued is discarded, as the device process
                # does, and the function reset
                for _, fds in batch:
                    for fd in fds:
                        os.close(fd)
                await self.drop_client()
                continue
            for i, (msg, fds) in enumerate(batch):
                if self.superseded(msg, batch[i + 1:]):
                    self.coalesced += 1
                    for fd in fds:
                        os.close(fd)
                    continue
                await self.request(msg, fds)
        self.listener.close()
        Path(self.sock_path).unlink(missing_ok=True)

    def superseded(self, msg, later):
        """True for a posted CQ doorbell when one of the CQ doorbells right after it (no other
        request in between) names the same CQ with the same arming: the later one carries the
        newer consumer index, and the earlier one would only arm the CQ for a moment; nothing
        else moves past it. This server moves each MMIO request as a TLP
        through the Python PCIe model, some 100,000 times slower than a card, while the
        driver re-arms on its own wall clock (every 50 ms while it waits): without this, arms
        queue up faster than the model takes them, each stale one (an older consumer index)
        raises an interrupt at once, each interrupt wakes the driver into another arm, and
        the queue never drains. On a card the posted writes land within a microsecond."""
        def db_cq(m):
            if len(m) != REQ.size:
                return None
            _, cmd, flags, a, b, _, _ = REQ.unpack(m)
            if cmd == P["CMD_WRITE32"] and flags & P["F_POSTED"] and a == self.R["HM_REG_DB_CQ"]:
                return b & 0xffff     # arm and CQ number (hm_db_cq_t: ci in the top half)
            return None
        key = db_cq(msg)
        if key is None:
            return False
        for m, _ in later:
            k = db_cq(m)
            if k is None:
                return False
            if k == key:
                return True
        return False

    async def request(self, msg, fds):
        """One request; every descriptor it carried is closed unless SET_IRQ keeps it."""
        self.kept = None
        try:
            await self.handle(msg, fds)
        finally:
            for fd in fds:
                if fd != self.kept:
                    os.close(fd)

    async def handle(self, msg, fds):
        self.requests += 1
        bar0, bar2 = self.c.bar0, self.c.bar2
        if len(msg) == P["PUSH_REQ_BYTES"]:
            seq, cmd, flags, a, b, c, d = REQ.unpack(msg[:REQ.size])
            data = msg[REQ.size:]
        elif len(msg) == REQ.size:
            seq, cmd, flags, a, b, c, d = REQ.unpack(msg)
            data = None
        else:
            return      # not a request: ignored (the device process counts it as an MMIO error)
        posted = flags & P["F_POSTED"]
        if data is not None and cmd != P["CMD_PUSH64"]:
            return      # a push-sized message that is not a push: ignored
        if self.trace:
            self.trace.write(f"{self.cycles()} req {cmd} {a:#x} {b:#x} {c:#x} {d:#x}\n")
        fd = fds[0] if fds else None

        def answer(status=0, *vals):
            if not posted:
                self.reply(seq, cmd, status, *vals)

        if not self.hello and cmd != P["CMD_HELLO"]:
            return answer(-errno.EPROTO)
        if cmd == P["CMD_HELLO"]:
            if a != P["PROTO_VERSION"]:
                return answer(-errno.EPROTO)
            pid = struct.unpack("3i", self.conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))[0]
            if self.mem is not None:
                os.close(self.mem)
                self.mem = None
            try:
                self.mem = os.open(f"/proc/{pid}/mem", os.O_RDWR)
            except OSError:
                return answer(-errno.EACCES)
            self.hello = True
            return answer(0, self.bar0_size, self.num_vec, self.mac, self.ipv4)
        if cmd == P["CMD_WAIT32"] and posted:
            return      # (a wait's answer is its point: refused, as the device process does)
        if cmd in (P["CMD_READ32"], P["CMD_WRITE32"], P["CMD_WAIT32"]) and (a >= self.bar0_size or a & 3):
            return answer(-errno.EFAULT)
        if cmd == P["CMD_READ32"]:
            try:
                v = await bar0.read_dword(a)
            except Exception:
                return answer(-errno.EFAULT)
            return answer(0, v)
        if cmd == P["CMD_WRITE32"]:
            await bar0.write_dword(a, b & 0xffffffff)
            return answer(0)
        if cmd == P["CMD_WAIT32"]:
            if d > P["WAIT_MAX_CYCLES"]:
                return answer(-errno.EINVAL)
            end = self.cycles() + d
            while True:
                try:
                    v = await bar0.read_dword(a)
                except Exception:
                    return answer(-errno.EFAULT)
                if (v ^ c) & b:
                    return answer(0, v, 1)
                if self.cycles() >= end:
                    return answer(0, v, 0)
                await ClockCycles(self.dut.clk, P["WAIT_GAP_CYCLES"])
        if cmd == P["CMD_PUSH64"]:
            if data is None or not posted or a % P["PUSH_BYTES"] or a + P["PUSH_BYTES"] > len(bar2):
                return answer(-errno.EINVAL)
            await bar2.write(a, data)
            self.pushes += 1
            return answer(0)
        if cmd == P["CMD_DMA_MAP"]:
            if c == 0 or (a | b | c) & 0xfff:
                return answer(-errno.EINVAL)
            if a < LO or a + c > HI:
                return answer(-errno.EINVAL)   # (the root complex's own regions lie outside)
            if any(a < w + n and w < a + c for w, (_, n, _) in self.dma.windows.items()):
                return answer(-errno.EEXIST)
            self.dma.windows[a] = (b, c, bool(d))
            return answer(0)
        if cmd == P["CMD_DMA_UNMAP"]:
            if self.dma.windows.get(a, (0, -1, 0))[1] != b:
                return answer(-errno.ENOENT)
            del self.dma.windows[a]
            return answer(0)
        if cmd == P["CMD_SET_IRQ"]:
            if a >= self.num_vec:
                return answer(-errno.EINVAL)
            if b and fd is None:
                return answer(-errno.EBADF)
            old = self.irq_fds.pop(a, None)
            if old is not None:
                os.close(old)
            if b:
                self.irq_fds[a] = fd
                self.kept = fd
            return answer(0)
        if cmd == P["CMD_RESET"]:
            await self.reset()
            return answer(0)
        if cmd == P["CMD_ARP_RESOLVE"]:
            if a in self.arp:
                return answer(0, self.arp[a])
            for _ in range(3):
                self.backlog.append(self.arp_frame(1, 0xffffffffffff, a))
                for _ in range(200):
                    await ClockCycles(self.dut.clk, 64)
                    if a in self.arp:
                        return answer(0, self.arp[a])
            return answer(-errno.EHOSTUNREACH)
        if cmd == P["CMD_STATS"]:
            return answer(0, self.cycles(), self.frames_tx, self.frames_rx, self.refused)
        return answer(-errno.ENOSYS)
