//! The one device abstraction every backend implements: BAR0 access (32-bit MMIO), DMA mapping
//! of IOVA ranges (IOVA = the process's virtual address, as with VFIO's type-1 IOMMU), MSI-X
//! style interrupts delivered to eventfds, and function reset.
//!
//! Backends: [`crate::vfio::VfioDevice`] (a PCI function bound to vfio-pci) and
//! [`crate::simdev::SimDevice`] (the simulated device process, `hematite-sim device`).

use crate::Result;
use std::os::fd::RawFd;

/// What a backend reports about the function it opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceInfo {
    /// Human-readable name: the PCI address (`0000:03:00.0`) or the simulated device's socket.
    pub name: String,
    /// BAR0 size in bytes.
    pub bar0_size: u64,
    /// Interrupt vectors available (MSI-X table size).
    pub num_irqs: u32,
    /// The port's MAC address (48 bits, `00:11:22:33:44:55` is `0x001122334455`), when the
    /// backend knows it (the simulated device does; a VFIO function has no standard way to
    /// say, so it comes from configuration).
    pub mac: Option<u64>,
    /// The port's IPv4 address (host order), when the backend knows it.
    pub ipv4: Option<u32>,
}

/// A Hematite PCI function, whatever it runs on.
///
/// Every method takes `&self`: MMIO is a plain store on hardware, so backends do their own
/// locking where they need it and the driver can ring doorbells from several threads.
pub trait Device: Send + Sync {
    /// What was opened.
    fn info(&self) -> &DeviceInfo;

    /// Reads the 32-bit register at `offset` of BAR0 (`offset` 4-byte aligned, inside the BAR).
    fn read32(&self, offset: u64) -> Result<u32>;

    /// Reads the register at `offset` until `(value & mask) != (cmp & mask)`, for a while: the
    /// last value read and whether it differs. A backend without a better way reads once (the
    /// caller loops); the simulated device waits on its side for up to `cycles` clock cycles,
    /// with no round trip per read.
    fn wait32(&self, offset: u64, mask: u32, cmp: u32, cycles: u64) -> Result<(u32, bool)> {
        let _ = cycles;
        let v = self.read32(offset)?;
        Ok((v, (v ^ cmp) & mask != 0))
    }

    /// Writes the 32-bit register at `offset` of BAR0. Posted: it returns before the device
    /// has acted on it, like a PCIe memory write; a later [`Device::read32`] is ordered after it.
    fn write32(&self, offset: u64, value: u32) -> Result<()>;

    /// Whether [`Device::push64`] reaches the device: the MMIO path for send WQEs.
    fn can_push(&self) -> bool {
        false
    }

    /// Writes the first 64 bytes of send WQE `index`'s slot (`wqe`, as in the ring) into QP
    /// `qpn`'s push window: the MMIO path, which spares the engine the WQE fetch (on a card,
    /// one write-combined 64-byte store into the push BAR, then a store fence;
    /// docs/transport-engine.md, "Latency"). The push carries `index`'s low byte in the
    /// header's reserved byte (`desc::push_tagged`), which the backend writes there. Posted,
    /// like [`Device::write32`]; the doorbell that posts the WQE must follow. Backends without
    /// push windows answer EOPNOTSUPP (the driver asks [`Device::can_push`] first).
    fn push64(&self, qpn: u32, index: u16, wqe: &[u8; 64]) -> Result<()> {
        let _ = (qpn, index, wqe);
        Err(crate::Error::NotSupported("push windows (the MMIO path for send WQEs)".into()))
    }

    /// Lets the device read (and, when `writable`, write) `len` bytes of this process's memory
    /// at virtual address `vaddr`, as IOVA `iova`. Ranges must be page aligned and must not
    /// overlap a mapped one.
    fn dma_map(&self, iova: u64, vaddr: u64, len: u64, writable: bool) -> Result<()>;

    /// Removes the mapping that starts at `iova` and is `len` bytes long. After it returns the
    /// device can no longer reach that memory.
    fn dma_unmap(&self, iova: u64, len: u64) -> Result<()>;

    /// Routes interrupt vector `vector` to `eventfd` (which the backend duplicates; the caller
    /// keeps its own descriptor), or disconnects it when `eventfd` is `None`.
    fn set_irq(&self, vector: u32, eventfd: Option<RawFd>) -> Result<()>;

    /// Function-level reset: every queue, context and table of the device is cleared and the
    /// control core restarts its firmware. DMA mappings stay.
    fn reset(&self) -> Result<()>;

    /// Whether the function has failed for good (the simulated device process died or closed
    /// the connection): every later access fails, and the driver reports a fatal device error
    /// (`IBV_EVENT_DEVICE_FATAL`). Must not block. Backends that cannot tell answer false.
    fn failed(&self) -> bool {
        false
    }
}

impl<T: Device + ?Sized> Device for std::sync::Arc<T> {
    fn info(&self) -> &DeviceInfo {
        (**self).info()
    }
    fn read32(&self, offset: u64) -> Result<u32> {
        (**self).read32(offset)
    }
    fn wait32(&self, offset: u64, mask: u32, cmp: u32, cycles: u64) -> Result<(u32, bool)> {
        (**self).wait32(offset, mask, cmp, cycles)
    }
    fn write32(&self, offset: u64, value: u32) -> Result<()> {
        (**self).write32(offset, value)
    }
    fn can_push(&self) -> bool {
        (**self).can_push()
    }
    fn push64(&self, qpn: u32, index: u16, wqe: &[u8; 64]) -> Result<()> {
        (**self).push64(qpn, index, wqe)
    }
    fn dma_map(&self, iova: u64, vaddr: u64, len: u64, writable: bool) -> Result<()> {
        (**self).dma_map(iova, vaddr, len, writable)
    }
    fn dma_unmap(&self, iova: u64, len: u64) -> Result<()> {
        (**self).dma_unmap(iova, len)
    }
    fn set_irq(&self, vector: u32, eventfd: Option<RawFd>) -> Result<()> {
        (**self).set_irq(vector, eventfd)
    }
    fn reset(&self) -> Result<()> {
        (**self).reset()
    }
    fn failed(&self) -> bool {
        (**self).failed()
    }
}
