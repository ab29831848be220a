//! The VFIO backend's system-call layer: the only module of the backend with `unsafe` code.
//!
//! [`VfioSys`] lists every kernel operation the backend needs (open/close, the VFIO ioctls,
//! mmap/munmap, pread/pwrite on the device fd, sysfs links and the page size) as safe, typed
//! methods. [`LinuxSys`] performs them with `libc`; [`super::twin::TwinSys`] emulates them in
//! memory so the backend is unit-tested without root or hardware.
//!
//! [`MmioRegion`] is a mapped BAR: bounds- and alignment-checked 32-bit volatile accesses.
//!
//! Kernel ABI: the structures and constants come from `vfio-bindings` (the rust-vmm ABI crate,
//! Linux 5.0 uapi). The bindings carry no ioctl request numbers: VFIO defines all of them with
//! `_IO(VFIO_TYPE, VFIO_BASE + n)` (type `';'` = 59, base 100, no direction and no size bits,
//! because every argument structure starts with its own `argsz`), which [`vfio_io`] computes.

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::RawFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::sync::atomic::{fence, AtomicU32, Ordering};
use std::sync::Arc;
use vfio_bindings::bindings::vfio::{
    vfio_device_info, vfio_group_status, vfio_iommu_type1_dma_map, vfio_iommu_type1_dma_unmap, vfio_irq_info,
    vfio_irq_set, vfio_region_info, _IOC_DIRSHIFT, _IOC_NONE, _IOC_NRSHIFT, _IOC_TYPESHIFT, VFIO_BASE,
    VFIO_IRQ_SET_ACTION_TRIGGER, VFIO_IRQ_SET_DATA_EVENTFD, VFIO_IRQ_SET_DATA_NONE, VFIO_TYPE,
};

/// The request number of VFIO ioctl `n`: `_IO(VFIO_TYPE, VFIO_BASE + n)` from `<linux/vfio.h>`
/// (direction none, size 0; e.g. `vfio_io(0)` = `0x3b64` = `VFIO_GET_API_VERSION`).
pub const fn vfio_io(n: u32) -> u32 {
    (_IOC_NONE << _IOC_DIRSHIFT) | (VFIO_TYPE << _IOC_TYPESHIFT) | ((VFIO_BASE + n) << _IOC_NRSHIFT)
}

/// Container: returns `VFIO_API_VERSION` (0).
pub const VFIO_GET_API_VERSION: u32 = vfio_io(0);
/// Container: returns > 0 when the extension (IOMMU type) given as the argument is supported.
pub const VFIO_CHECK_EXTENSION: u32 = vfio_io(1);
/// Container: selects the IOMMU model (argument: `VFIO_TYPE1v2_IOMMU`, ...).
pub const VFIO_SET_IOMMU: u32 = vfio_io(2);
/// Group: fills a `vfio_group_status`.
pub const VFIO_GROUP_GET_STATUS: u32 = vfio_io(3);
/// Group: attaches the group to the container whose fd the argument points to.
pub const VFIO_GROUP_SET_CONTAINER: u32 = vfio_io(4);
/// Group: detaches the group from its container.
pub const VFIO_GROUP_UNSET_CONTAINER: u32 = vfio_io(5);
/// Group: returns a new device fd for the device named by the (C string) argument.
pub const VFIO_GROUP_GET_DEVICE_FD: u32 = vfio_io(6);
/// Device: fills a `vfio_device_info`.
pub const VFIO_DEVICE_GET_INFO: u32 = vfio_io(7);
/// Device: fills a `vfio_region_info` for the region whose `index` the caller set.
pub const VFIO_DEVICE_GET_REGION_INFO: u32 = vfio_io(8);
/// Device: fills a `vfio_irq_info` for the interrupt index the caller set.
pub const VFIO_DEVICE_GET_IRQ_INFO: u32 = vfio_io(9);
/// Device: configures interrupts from a `vfio_irq_set` and its trailing data.
pub const VFIO_DEVICE_SET_IRQS: u32 = vfio_io(10);
/// Device: function-level reset.
pub const VFIO_DEVICE_RESET: u32 = vfio_io(11);
/// Container (type-1 IOMMU): maps a range from a `vfio_iommu_type1_dma_map`.
pub const VFIO_IOMMU_MAP_DMA: u32 = vfio_io(13);
/// Container (type-1 IOMMU): unmaps a range; writes the number of bytes unmapped back.
pub const VFIO_IOMMU_UNMAP_DMA: u32 = vfio_io(14);

/// Region offsets inside the device fd: region `i` starts at `i << VFIO_PCI_OFFSET_SHIFT`
/// (vfio-pci's layout; the kernel reports it in `vfio_region_info::offset`, which is what the
/// backend uses; the twin follows the same layout).
pub const VFIO_PCI_OFFSET_SHIFT: u32 = 40;

/// The PCI command register's byte offset in config space.
pub const PCI_COMMAND: u64 = 4;
/// Memory space enable (PCI command register bit 1).
pub const PCI_COMMAND_MEMORY: u16 = 0x2;
/// Bus master enable (PCI command register bit 2).
pub const PCI_COMMAND_MASTER: u16 = 0x4;
/// The PCI status register's byte offset in config space.
pub const PCI_STATUS: u64 = 6;
/// Status bit 4: the function has a capability list.
pub const PCI_STATUS_CAP_LIST: u16 = 0x10;
/// Byte offset of the pointer to the first capability.
pub const PCI_CAPABILITY_LIST: u64 = 0x34;
/// Capability ID of the PCI Express capability.
pub const PCI_CAP_ID_EXP: u8 = 0x10;
/// Device Control's byte offset in the PCI Express capability.
pub const PCI_EXP_DEVCTL: u64 = 8;
/// Device Control bits 14:12: Max_Read_Request_Size, 128 << value bytes.
pub const PCI_EXP_DEVCTL_READRQ: u16 = 0x7000;
/// Max_Read_Request_Size 4096 bytes (value 5).
pub const PCI_EXP_DEVCTL_READRQ_4096: u16 = 0x5000;

/// Size in bytes of `struct vfio_irq_set` without its data.
pub const IRQ_SET_HEADER_BYTES: usize = std::mem::size_of::<vfio_irq_set>();

/// A `VFIO_DEVICE_SET_IRQS` argument, as the 32-bit words the kernel reads: `argsz, flags,
/// index, start, count`, then the data. `DATA_EVENTFD | ACTION_TRIGGER` for vectors
/// `start..start + fds.len()` of interrupt index `index`; an fd of -1 disconnects a vector.
pub fn irq_set_eventfds(index: u32, start: u32, fds: &[RawFd]) -> Vec<u32> {
    let mut w = Vec::with_capacity(IRQ_SET_HEADER_BYTES / 4 + fds.len());
    w.push((IRQ_SET_HEADER_BYTES + 4 * fds.len()) as u32);
    w.push(VFIO_IRQ_SET_DATA_EVENTFD | VFIO_IRQ_SET_ACTION_TRIGGER);
    w.push(index);
    w.push(start);
    w.push(fds.len() as u32);
    w.extend(fds.iter().map(|&fd| fd as u32));
    w
}

/// A `VFIO_DEVICE_SET_IRQS` argument with `DATA_NONE | ACTION_TRIGGER`: with `count` 0 it
/// disables the whole interrupt index; otherwise it fires vectors `start..start + count`
/// (loopback test).
pub fn irq_set_none(index: u32, start: u32, count: u32) -> Vec<u32> {
    vec![IRQ_SET_HEADER_BYTES as u32, VFIO_IRQ_SET_DATA_NONE | VFIO_IRQ_SET_ACTION_TRIGGER, index, start, count]
}

/// Every kernel operation the VFIO backend performs. Errors are the kernel's errno as an
/// [`io::Error`]; argument structures are the `vfio-bindings` ones, with `argsz` set by the
/// caller (implementations pass them through unchanged, as the kernel sees them).
pub trait VfioSys: Send + Sync {
    /// `open(path, O_RDWR | O_CLOEXEC)`.
    fn open(&self, path: &Path) -> io::Result<RawFd>;
    /// `close(fd)`.
    fn close(&self, fd: RawFd) -> io::Result<()>;
    /// `readlink(path)` (sysfs: `/sys/bus/pci/devices/<bdf>`, its `iommu_group` and `driver`).
    fn read_link(&self, path: &Path) -> io::Result<PathBuf>;
    /// The CPU page size in bytes (DMA mappings are made of whole pages).
    fn page_size(&self) -> u64;

    /// `VFIO_GET_API_VERSION` on a container.
    fn get_api_version(&self, container: RawFd) -> io::Result<i32>;
    /// `VFIO_CHECK_EXTENSION(ext)` on a container: > 0 when supported, 0 when not.
    fn check_extension(&self, container: RawFd, ext: u32) -> io::Result<i32>;
    /// `VFIO_SET_IOMMU(iommu_type)` on a container.
    fn set_iommu(&self, container: RawFd, iommu_type: u32) -> io::Result<()>;
    /// `VFIO_GROUP_GET_STATUS` on a group.
    fn group_get_status(&self, group: RawFd, status: &mut vfio_group_status) -> io::Result<()>;
    /// `VFIO_GROUP_SET_CONTAINER(&container)` on a group.
    fn group_set_container(&self, group: RawFd, container: RawFd) -> io::Result<()>;
    /// `VFIO_GROUP_UNSET_CONTAINER` on a group.
    fn group_unset_container(&self, group: RawFd) -> io::Result<()>;
    /// `VFIO_GROUP_GET_DEVICE_FD(name)` on a group: a new device fd.
    fn group_get_device_fd(&self, group: RawFd, name: &CStr) -> io::Result<RawFd>;
    /// `VFIO_DEVICE_GET_INFO` on a device.
    fn device_get_info(&self, device: RawFd, info: &mut vfio_device_info) -> io::Result<()>;
    /// `VFIO_DEVICE_GET_REGION_INFO` on a device (`info.index` selects the region).
    fn device_get_region_info(&self, device: RawFd, info: &mut vfio_region_info) -> io::Result<()>;
    /// `VFIO_DEVICE_GET_IRQ_INFO` on a device (`info.index` selects the interrupt index).
    fn device_get_irq_info(&self, device: RawFd, info: &mut vfio_irq_info) -> io::Result<()>;
    /// `VFIO_DEVICE_SET_IRQS` on a device; `irq_set` is the whole argument as 32-bit words
    /// (see [`irq_set_eventfds`] and [`irq_set_none`]).
    fn device_set_irqs(&self, device: RawFd, irq_set: &[u32]) -> io::Result<()>;
    /// `VFIO_DEVICE_RESET` on a device.
    fn device_reset(&self, device: RawFd) -> io::Result<()>;
    /// `VFIO_IOMMU_MAP_DMA` on a container.
    fn iommu_map_dma(&self, container: RawFd, map: &vfio_iommu_type1_dma_map) -> io::Result<()>;
    /// `VFIO_IOMMU_UNMAP_DMA` on a container; the kernel writes the bytes unmapped to
    /// `unmap.size`.
    fn iommu_unmap_dma(&self, container: RawFd, unmap: &mut vfio_iommu_type1_dma_unmap) -> io::Result<()>;
    /// `mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, offset)`.
    fn mmap(&self, fd: RawFd, len: usize, offset: u64) -> io::Result<MmioRegion>;
    /// `munmap` of a region this implementation's [`VfioSys::mmap`] returned.
    fn munmap(&self, region: MmioRegion) -> io::Result<()>;
    /// `pread(fd, buf, offset)`: bytes read.
    fn pread(&self, fd: RawFd, buf: &mut [u8], offset: u64) -> io::Result<usize>;
    /// `pwrite(fd, buf, offset)`: bytes written.
    fn pwrite(&self, fd: RawFd, buf: &[u8], offset: u64) -> io::Result<usize>;
}

enum Backing {
    /// A live `mmap` of `len` bytes (device memory on hardware).
    Mapped(NonNull<u8>),
    /// Plain memory standing in for the BAR (the test twin); at least `len` bytes.
    Memory(Arc<[AtomicU32]>),
}

/// A mapped BAR (or memory standing in for one): 32-bit register accesses, checked.
///
/// Not `Clone`: the mapping is released by handing the region back to
/// [`VfioSys::munmap`]; dropping it without doing so leaks the mapping (never unsound).
pub struct MmioRegion {
    backing: Backing,
    len: usize,
}

// SAFETY: a `Mapped` region is a process-wide mapping that stays valid until `munmap` consumes
// the region, and every access to it is a single aligned volatile load or store, which any
// thread may perform (registers do not care which CPU writes them). `Memory` is an
// `Arc<[AtomicU32]>`, which is itself Send + Sync.
unsafe impl Send for MmioRegion {}
// SAFETY: see `Send` above; `&MmioRegion` only allows those same single-word accesses.
unsafe impl Sync for MmioRegion {}

impl std::fmt::Debug for MmioRegion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self.backing {
            Backing::Mapped(_) => "mapped",
            Backing::Memory(_) => "memory",
        };
        f.debug_struct("MmioRegion").field("kind", &kind).field("addr", &self.addr()).field("len", &self.len).finish()
    }
}

impl MmioRegion {
    /// Wraps a live mapping. `None` when `ptr` is null or not 4-byte aligned.
    ///
    /// # Safety
    /// `ptr` must be the start of a mapping of at least `len` readable and writable bytes that
    /// stays mapped, and that nothing else unmaps or reuses, until the region is handed to
    /// [`VfioSys::munmap`] (or leaked).
    pub unsafe fn from_raw(ptr: *mut u8, len: usize) -> Option<MmioRegion> {
        let p = NonNull::new(ptr)?;
        if (p.as_ptr() as usize) % 4 != 0 {
            return None;
        }
        Some(MmioRegion { backing: Backing::Mapped(p), len })
    }

    /// A region backed by plain memory (the test twin's BAR): `len` bytes, at most the words'
    /// size; registers are the words, accessed atomically.
    pub fn from_memory(words: Arc<[AtomicU32]>, len: usize) -> MmioRegion {
        let len = len.min(words.len() * 4);
        MmioRegion { backing: Backing::Memory(words), len }
    }

    /// Size in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the region is zero bytes long.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The address of the first byte (identifies the mapping; for memory-backed regions, the
    /// address of the first word).
    pub fn addr(&self) -> usize {
        match &self.backing {
            Backing::Mapped(p) => p.as_ptr() as usize,
            Backing::Memory(w) => w.as_ptr() as usize,
        }
    }

    /// The byte offset as an index, when `offset` is 4-byte aligned and the word inside.
    fn word_offset(&self, offset: u64) -> Option<usize> {
        let off = usize::try_from(offset).ok()?;
        if off % 4 != 0 || off.checked_add(4)? > self.len {
            return None;
        }
        Some(off)
    }

    /// Reads the little-endian 32-bit register at byte `offset`: one volatile load (then an
    /// acquire fence, so that memory reads after it are not hoisted above it). `None` when
    /// `offset` is misaligned or outside the region.
    pub fn read32(&self, offset: u64) -> Option<u32> {
        let off = self.word_offset(offset)?;
        let v = match &self.backing {
            Backing::Mapped(p) => {
                // SAFETY: `off + 4 <= len` (word_offset), the mapping is live for `len` bytes
                // (from_raw's contract, and munmap consumes the region), and `p + off` is
                // 4-byte aligned (p aligned, off a multiple of 4).
                let raw = unsafe { p.as_ptr().add(off).cast::<u32>().read_volatile() };
                u32::from_le(raw)
            }
            Backing::Memory(w) => w[off / 4].load(Ordering::SeqCst),
        };
        fence(Ordering::Acquire);
        Some(v)
    }

    /// Writes the little-endian 32-bit register at byte `offset`: a release fence (so that
    /// earlier memory writes, e.g. descriptors, are visible before a doorbell) then one
    /// volatile store. `None` when `offset` is misaligned or outside the region.
    pub fn write32(&self, offset: u64, value: u32) -> Option<()> {
        let off = self.word_offset(offset)?;
        fence(Ordering::Release);
        match &self.backing {
            Backing::Mapped(p) => {
                // SAFETY: as in read32: in bounds, aligned, and the mapping is live and
                // writable (mapped PROT_WRITE).
                unsafe { p.as_ptr().add(off).cast::<u32>().write_volatile(value.to_le()) };
            }
            Backing::Memory(w) => w[off / 4].store(value, Ordering::SeqCst),
        }
        Some(())
    }
}

/// The real system calls (Linux).
#[derive(Debug, Default, Clone, Copy)]
pub struct LinuxSys;

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn to_off(offset: u64) -> io::Result<libc::off_t> {
    libc::off_t::try_from(offset).map_err(|_| io::Error::from_raw_os_error(libc::EOVERFLOW))
}

/// [`cvt`] for the byte counts of read / write calls.
fn cvt_len(n: libc::ssize_t) -> io::Result<usize> {
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

fn inval() -> io::Error {
    io::Error::from_raw_os_error(libc::EINVAL)
}

/// EINVAL when a VFIO struct `T`'s `argsz` claims more bytes than a `T` holds: the kernel reads
/// or writes `argsz` bytes of the argument, and they must fit in the Rust object.
fn fits<T>(argsz: u32) -> io::Result<()> {
    if argsz as usize > std::mem::size_of::<T>() {
        return Err(inval());
    }
    Ok(())
}

/// The ioctl request in libc's parameter type (`c_ulong` on glibc, `c_int` on musl).
macro_rules! req {
    ($r:expr) => {
        $r as _
    };
}

impl VfioSys for LinuxSys {
    fn open(&self, path: &Path) -> io::Result<RawFd> {
        let c = CString::new(path.as_os_str().as_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains a NUL byte"))?;
        // SAFETY: `c` is a NUL-terminated string that outlives the call; open keeps no pointer.
        cvt(unsafe { libc::open(c.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) })
    }

    fn close(&self, fd: RawFd) -> io::Result<()> {
        // SAFETY: closing a descriptor touches no memory; the backend owns `fd` and forgets it
        // after this call (it is never closed twice by the backend).
        cvt(unsafe { libc::close(fd) }).map(|_| ())
    }

    fn read_link(&self, path: &Path) -> io::Result<PathBuf> {
        std::fs::read_link(path)
    }

    fn page_size(&self) -> u64 {
        // SAFETY: sysconf reads a system constant; no memory is passed.
        let r = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        if r > 0 {
            r as u64
        } else {
            4096
        }
    }

    fn get_api_version(&self, container: RawFd) -> io::Result<i32> {
        // SAFETY: this ioctl takes no argument and writes no memory.
        cvt(unsafe { libc::ioctl(container, req!(VFIO_GET_API_VERSION)) })
    }

    fn check_extension(&self, container: RawFd, ext: u32) -> io::Result<i32> {
        // SAFETY: the argument is an integer, not a pointer; no memory is touched.
        cvt(unsafe { libc::ioctl(container, req!(VFIO_CHECK_EXTENSION), ext as libc::c_ulong) })
    }

    fn set_iommu(&self, container: RawFd, iommu_type: u32) -> io::Result<()> {
        // SAFETY: the argument is an integer, not a pointer; no memory is touched.
        cvt(unsafe { libc::ioctl(container, req!(VFIO_SET_IOMMU), iommu_type as libc::c_ulong) }).map(|_| ())
    }

    fn group_get_status(&self, group: RawFd, status: &mut vfio_group_status) -> io::Result<()> {
        fits::<vfio_group_status>(status.argsz)?;
        // SAFETY: `status` is a valid, exclusively borrowed vfio_group_status; the kernel
        // writes at most `argsz` bytes, which fit in it (checked above).
        cvt(unsafe { libc::ioctl(group, req!(VFIO_GROUP_GET_STATUS), status as *mut vfio_group_status) }).map(|_| ())
    }

    fn group_set_container(&self, group: RawFd, container: RawFd) -> io::Result<()> {
        let fd: libc::c_int = container;
        // SAFETY: the kernel reads one int through the pointer, which points to `fd`, alive
        // for the call.
        cvt(unsafe { libc::ioctl(group, req!(VFIO_GROUP_SET_CONTAINER), &fd as *const libc::c_int) }).map(|_| ())
    }

    fn group_unset_container(&self, group: RawFd) -> io::Result<()> {
        // SAFETY: this ioctl takes no argument and writes no memory.
        cvt(unsafe { libc::ioctl(group, req!(VFIO_GROUP_UNSET_CONTAINER)) }).map(|_| ())
    }

    fn group_get_device_fd(&self, group: RawFd, name: &CStr) -> io::Result<RawFd> {
        // SAFETY: `name` is a NUL-terminated string alive for the call; the kernel only reads it.
        cvt(unsafe { libc::ioctl(group, req!(VFIO_GROUP_GET_DEVICE_FD), name.as_ptr()) })
    }

    fn device_get_info(&self, device: RawFd, info: &mut vfio_device_info) -> io::Result<()> {
        fits::<vfio_device_info>(info.argsz)?;
        // SAFETY: `info` is a valid, exclusively borrowed vfio_device_info; the kernel writes
        // at most `argsz` bytes, which fit in it (checked above).
        cvt(unsafe { libc::ioctl(device, req!(VFIO_DEVICE_GET_INFO), info as *mut vfio_device_info) }).map(|_| ())
    }

    fn device_get_region_info(&self, device: RawFd, info: &mut vfio_region_info) -> io::Result<()> {
        fits::<vfio_region_info>(info.argsz)?;
        // SAFETY: `info` is a valid, exclusively borrowed vfio_region_info; the kernel writes
        // at most `argsz` bytes (capabilities beyond it are not copied), which fit in it.
        cvt(unsafe { libc::ioctl(device, req!(VFIO_DEVICE_GET_REGION_INFO), info as *mut vfio_region_info) })
            .map(|_| ())
    }

    fn device_get_irq_info(&self, device: RawFd, info: &mut vfio_irq_info) -> io::Result<()> {
        fits::<vfio_irq_info>(info.argsz)?;
        // SAFETY: `info` is a valid, exclusively borrowed vfio_irq_info; the kernel writes at
        // most `argsz` bytes, which fit in it (checked above).
        cvt(unsafe { libc::ioctl(device, req!(VFIO_DEVICE_GET_IRQ_INFO), info as *mut vfio_irq_info) }).map(|_| ())
    }

    fn device_set_irqs(&self, device: RawFd, irq_set: &[u32]) -> io::Result<()> {
        // The kernel reads `argsz` bytes: they must all lie in the slice.
        match irq_set.first() {
            Some(&argsz) if irq_set.len() * 4 >= IRQ_SET_HEADER_BYTES && argsz as usize <= irq_set.len() * 4 => {}
            _ => return Err(inval()),
        }
        // SAFETY: the kernel only reads the argument, at most `argsz` bytes, all inside
        // `irq_set` (checked above), which is alive for the call; u32 alignment suffices for
        // struct vfio_irq_set (all its fields are u32).
        cvt(unsafe { libc::ioctl(device, req!(VFIO_DEVICE_SET_IRQS), irq_set.as_ptr()) }).map(|_| ())
    }

    fn device_reset(&self, device: RawFd) -> io::Result<()> {
        // SAFETY: this ioctl takes no argument and writes no memory.
        cvt(unsafe { libc::ioctl(device, req!(VFIO_DEVICE_RESET)) }).map(|_| ())
    }

    fn iommu_map_dma(&self, container: RawFd, map: &vfio_iommu_type1_dma_map) -> io::Result<()> {
        fits::<vfio_iommu_type1_dma_map>(map.argsz)?;
        // SAFETY: the kernel reads at most `argsz` bytes of `map` (checked to fit), alive for
        // the call. The memory it pins is named by `map.vaddr`; a bad address makes the
        // kernel fail with EFAULT, it cannot corrupt this process.
        cvt(unsafe { libc::ioctl(container, req!(VFIO_IOMMU_MAP_DMA), map as *const vfio_iommu_type1_dma_map) })
            .map(|_| ())
    }

    fn iommu_unmap_dma(&self, container: RawFd, unmap: &mut vfio_iommu_type1_dma_unmap) -> io::Result<()> {
        fits::<vfio_iommu_type1_dma_unmap>(unmap.argsz)?;
        // SAFETY: `unmap` is a valid, exclusively borrowed vfio_iommu_type1_dma_unmap; the
        // kernel reads it and writes back at most `argsz` bytes, which fit in it.
        cvt(unsafe { libc::ioctl(container, req!(VFIO_IOMMU_UNMAP_DMA), unmap as *mut vfio_iommu_type1_dma_unmap) })
            .map(|_| ())
    }

    fn mmap(&self, fd: RawFd, len: usize, offset: u64) -> io::Result<MmioRegion> {
        let off = to_off(offset)?;
        if len == 0 {
            return Err(inval());
        }
        // SAFETY: a new shared mapping at an address the kernel chooses (addr NULL, no
        // MAP_FIXED), so it replaces nothing and aliases no Rust object.
        let p = unsafe {
            libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd, off)
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `p` is the start of the live, page-aligned, readable and writable mapping of
        // `len` bytes just made; only the returned region refers to it, and it stays mapped
        // until that region is handed to munmap.
        match unsafe { MmioRegion::from_raw(p.cast::<u8>(), len) } {
            Some(r) => Ok(r),
            None => {
                // SAFETY: unmapping the mapping just made, which nothing refers to.
                unsafe { libc::munmap(p, len) };
                Err(inval())
            }
        }
    }

    fn munmap(&self, region: MmioRegion) -> io::Result<()> {
        match region.backing {
            Backing::Mapped(p) => {
                // SAFETY: `p`/`len` describe a mapping made by `mmap` above (only LinuxSys and
                // `from_raw`'s callers create Mapped regions, and the region is consumed
                // here, so no access can follow).
                cvt(unsafe { libc::munmap(p.as_ptr().cast::<libc::c_void>(), region.len) }).map(|_| ())
            }
            Backing::Memory(_) => Ok(()),
        }
    }

    fn pread(&self, fd: RawFd, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let off = to_off(offset)?;
        // SAFETY: `buf` is valid for writes of `buf.len()` bytes during the call.
        cvt_len(unsafe { libc::pread(fd, buf.as_mut_ptr().cast::<libc::c_void>(), buf.len(), off) })
    }

    fn pwrite(&self, fd: RawFd, buf: &[u8], offset: u64) -> io::Result<usize> {
        let off = to_off(offset)?;
        // SAFETY: `buf` is valid for reads of `buf.len()` bytes during the call.
        cvt_len(unsafe { libc::pwrite(fd, buf.as_ptr().cast::<libc::c_void>(), buf.len(), off) })
    }
}
