//! [`TwinSys`]: an in-memory emulation of the kernel's VFIO interface for one PCI function, so
//! the VFIO backend (and crates built on it) can be tested without root or hardware.
//!
//! What it emulates (the rules follow Linux's `vfio.c`, `vfio_iommu_type1.c` and `vfio-pci`):
//!
//! * `/dev/vfio/vfio` opens a new container; `/dev/vfio/<group>` opens the function's group,
//!   once at a time (a second open is `EBUSY`); the node exists only while the function is
//!   bound to a vfio driver. Other paths are `ENOENT`.
//! * sysfs links `/sys/bus/pci/devices/<bdf>`, `.../iommu_group` and `.../driver`.
//! * Container: API version, `CHECK_EXTENSION` (type-1 v1/v2 as configured), `SET_IOMMU`
//!   (`EINVAL` without a group or when already set, `ENODEV` for an unsupported type).
//! * Group: status (viable, container set), `SET_CONTAINER` (`EINVAL` when already set, `EPERM`
//!   when not viable, `EINVAL` when the fd is not a container), `UNSET_CONTAINER` (`EINVAL` when
//!   not set, `EBUSY` while device fds are open), `GET_DEVICE_FD` (`EINVAL` before the
//!   container has an IOMMU or when not viable, `ENODEV` for another name).
//! * Type-1 IOMMU: `MAP_DMA` before `SET_IOMMU` is `EINVAL`; misaligned, empty or wrapping
//!   ranges `EINVAL`; no READ/WRITE flag `EINVAL`; overlapping a mapping `EEXIST`; vaddr 0
//!   `EFAULT`; over the configured memlock limit `ENOMEM`. `UNMAP_DMA` follows type-1 v2: a
//!   range that cuts a mapping is `EINVAL`; every mapping inside the range is removed and the
//!   bytes removed are written back to `size`, so **unmapping an unknown range succeeds with
//!   `size` = 0**, as the kernel does. The last group leaving a container drops its IOMMU and
//!   mappings.
//! * Device: `GET_INFO` (PCI, RESET when configured, 9 regions, 5 irq indexes);
//!   `GET_REGION_INFO` (BAR0 of the configured size, READ|WRITE and MMAP when configured,
//!   other BARs empty, a 256-byte config space at region 7); `GET_IRQ_INFO` (INTx 1, MSI 0,
//!   MSI-X N vectors with NORESIZE, ERR 1, REQ 1); `SET_IRQS` with the kernel's header
//!   validation and MSI-X trigger semantics: the first eventfd call enables the index with
//!   `start + count` vectors and later calls may not go past that (NORESIZE, as before Linux
//!   6.5); fd -1 disconnects; `DATA_NONE` with count 0 disables; `DATA_NONE`/`DATA_BOOL` fire
//!   routed vectors (counted, see [`TwinSys::msix_fired`]); MASK/UNMASK are `ENOTTY`; other
//!   indexes are validated and then answer `ENOTTY` (not emulated). `RESET` (`EINVAL` without
//!   the reset flag) restores BAR0 to its initial contents. The first device fd sets the
//!   config command register's memory-enable bit (like `pci_enable_device`); closing the last
//!   one clears bus mastering and disables MSI-X (like `vfio_pci_core_disable`).
//! * `mmap` of the device fd maps BAR0 from region offset 0 (memory shared with
//!   [`TwinSys::bar_read32`]); `pread`/`pwrite` reach config space (any size) and BAR0
//!   (aligned dwords).
//!
//! Failures can be injected per operation ([`TwinSys::fail`], [`TwinSys::fail_once`]) or per
//! path ([`TwinSys::fail_open`]), and the configuration ([`TwinConfig`]) covers a non-viable
//! group, a missing sysfs link, another driver, a BAR without MMAP, no reset, etc. Every call
//! is logged ([`TwinSys::calls`]). Eventfds are not checked: any fd >= 0 is accepted.

use super::sys::{
    MmioRegion, VfioSys, IRQ_SET_HEADER_BYTES, PCI_COMMAND, PCI_COMMAND_MASTER, PCI_COMMAND_MEMORY,
    VFIO_PCI_OFFSET_SHIFT,
};
use std::collections::{BTreeMap, HashMap};
use std::ffi::CStr;
use std::io;
use std::os::fd::RawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use vfio_bindings::bindings::vfio::{
    vfio_device_info, vfio_group_status, vfio_iommu_type1_dma_map, vfio_iommu_type1_dma_unmap, vfio_irq_info,
    vfio_region_info, VFIO_TYPE1v2_IOMMU, VFIO_API_VERSION, VFIO_DEVICE_FLAGS_PCI, VFIO_DEVICE_FLAGS_RESET,
    VFIO_DMA_MAP_FLAG_READ, VFIO_DMA_MAP_FLAG_WRITE, VFIO_GROUP_FLAGS_CONTAINER_SET, VFIO_GROUP_FLAGS_VIABLE,
    VFIO_IRQ_INFO_AUTOMASKED, VFIO_IRQ_INFO_EVENTFD, VFIO_IRQ_INFO_MASKABLE, VFIO_IRQ_INFO_NORESIZE,
    VFIO_IRQ_SET_ACTION_TRIGGER, VFIO_IRQ_SET_ACTION_TYPE_MASK, VFIO_IRQ_SET_DATA_BOOL, VFIO_IRQ_SET_DATA_EVENTFD,
    VFIO_IRQ_SET_DATA_NONE, VFIO_IRQ_SET_DATA_TYPE_MASK, VFIO_PCI_BAR0_REGION_INDEX, VFIO_PCI_CONFIG_REGION_INDEX,
    VFIO_PCI_ERR_IRQ_INDEX, VFIO_PCI_INTX_IRQ_INDEX, VFIO_PCI_MSIX_IRQ_INDEX, VFIO_PCI_MSI_IRQ_INDEX,
    VFIO_PCI_NUM_IRQS, VFIO_PCI_NUM_REGIONS, VFIO_PCI_REQ_IRQ_INDEX, VFIO_REGION_INFO_FLAG_MMAP,
    VFIO_REGION_INFO_FLAG_READ, VFIO_REGION_INFO_FLAG_WRITE, VFIO_TYPE1_IOMMU,
};

/// Size of the twin's PCI config space.
pub const TWIN_CONFIG_SIZE: usize = 256;
/// The largest BAR0 the twin backs with memory (1 GiB); a larger one is reported by
/// `GET_REGION_INFO` but `mmap` fails with `ENOMEM`.
pub const TWIN_MAX_BAR_BYTES: u64 = 1 << 30;

/// One operation of [`VfioSys`], for the call log and failure injection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SysOp {
    /// [`VfioSys::open`].
    Open,
    /// [`VfioSys::close`].
    Close,
    /// [`VfioSys::read_link`].
    ReadLink,
    /// [`VfioSys::get_api_version`].
    GetApiVersion,
    /// [`VfioSys::check_extension`].
    CheckExtension,
    /// [`VfioSys::set_iommu`].
    SetIommu,
    /// [`VfioSys::group_get_status`].
    GroupGetStatus,
    /// [`VfioSys::group_set_container`].
    GroupSetContainer,
    /// [`VfioSys::group_unset_container`].
    GroupUnsetContainer,
    /// [`VfioSys::group_get_device_fd`].
    GroupGetDeviceFd,
    /// [`VfioSys::device_get_info`].
    DeviceGetInfo,
    /// [`VfioSys::device_get_region_info`].
    DeviceGetRegionInfo,
    /// [`VfioSys::device_get_irq_info`].
    DeviceGetIrqInfo,
    /// [`VfioSys::device_set_irqs`].
    DeviceSetIrqs,
    /// [`VfioSys::device_reset`].
    DeviceReset,
    /// [`VfioSys::iommu_map_dma`].
    IommuMapDma,
    /// [`VfioSys::iommu_unmap_dma`].
    IommuUnmapDma,
    /// [`VfioSys::mmap`].
    Mmap,
    /// [`VfioSys::munmap`].
    Munmap,
    /// [`VfioSys::pread`].
    Pread,
    /// [`VfioSys::pwrite`].
    Pwrite,
}

/// The emulated function and host. [`Default`] is a Hematite-like function at `0000:03:00.0`
/// in IOMMU group 7, bound to vfio-pci, with a 64 KiB mappable BAR0 whose identity register
/// reads "HMTE", 8 MSI-X vectors and function reset.
#[derive(Debug, Clone)]
pub struct TwinConfig {
    /// The function's PCI address.
    pub bdf: String,
    /// Its IOMMU group number (`/dev/vfio/<group>`).
    pub group: u32,
    /// What `VFIO_GET_API_VERSION` returns.
    pub api_version: i32,
    /// Whether the type-1 v2 IOMMU is supported.
    pub type1v2: bool,
    /// Whether the type-1 (v1) IOMMU is supported.
    pub type1: bool,
    /// Whether the group is viable (every device in it bound to vfio or to nothing).
    pub viable: bool,
    /// Whether `/sys/bus/pci/devices/<bdf>` exists.
    pub sysfs_device: bool,
    /// Whether the function's `iommu_group` sysfs link exists (no IOMMU when not).
    pub iommu_group_link: bool,
    /// The driver the function is bound to (`driver` link), `None` when unbound. The group's
    /// `/dev/vfio` node exists only when the name contains "vfio".
    pub driver: Option<String>,
    /// BAR0 size in bytes (0: BAR not implemented).
    pub bar0_size: u64,
    /// Whether BAR0 has the MMAP flag.
    pub bar0_mmap: bool,
    /// BAR0 contents after creation and after each reset: (byte offset, value) pairs.
    pub bar0_init: Vec<(u64, u32)>,
    /// MSI-X vectors.
    pub msix_vectors: u32,
    /// Whether the device reports `VFIO_DEVICE_FLAGS_RESET`.
    pub reset: bool,
    /// Page size (CPU and IOMMU).
    pub page_size: u64,
    /// Bytes of DMA mappings allowed in all (RLIMIT_MEMLOCK), `None` for no limit.
    pub memlock_limit: Option<u64>,
    /// Config space vendor ID (placeholder: Hematite has no assigned ID).
    pub vendor_id: u16,
    /// Config space device ID (placeholder).
    pub device_id: u16,
    /// A PCI Express capability at 0x40 with this Device Control value; `None`: no capability
    /// list at all.
    pub pcie_devctl: Option<u16>,
}

impl Default for TwinConfig {
    fn default() -> Self {
        TwinConfig {
            bdf: "0000:03:00.0".into(),
            group: 7,
            api_version: VFIO_API_VERSION as i32,
            type1v2: true,
            type1: true,
            viable: true,
            sysfs_device: true,
            iommu_group_link: true,
            driver: Some("vfio-pci".into()),
            bar0_size: 64 * 1024,
            bar0_mmap: true,
            bar0_init: vec![(0x0, 0x484D_5445), (0x4, 0x0000_0001)],
            msix_vectors: 8,
            reset: true,
            page_size: 4096,
            memlock_limit: None,
            vendor_id: 0x1234,
            device_id: 0x484D,
            pcie_devctl: None,
        }
    }
}

/// A DMA mapping as the twin's IOMMU holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TwinDma {
    /// First IOVA.
    pub iova: u64,
    /// Process virtual address it translates to.
    pub vaddr: u64,
    /// Length in bytes.
    pub size: u64,
    /// Device may read.
    pub read: bool,
    /// Device may write.
    pub write: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Obj {
    Container(u32),
    Group,
    Device,
}

#[derive(Default)]
struct ContainerState {
    iommu: Option<u32>,
    groups: u32,
    fds: u32,
    dma: BTreeMap<u64, TwinDma>,
}

#[derive(Default)]
struct Msix {
    enabled: bool,
    nvec: u32,
    routes: Vec<Option<RawFd>>,
    fired: Vec<u64>,
}

struct State {
    cfg: TwinConfig,
    log: Vec<SysOp>,
    fail_always: HashMap<SysOp, i32>,
    fail_once: HashMap<SysOp, i32>,
    fail_paths: HashMap<PathBuf, i32>,
    links: HashMap<PathBuf, PathBuf>,
    next_fd: RawFd,
    fds: HashMap<RawFd, Obj>,
    next_container: u32,
    containers: HashMap<u32, ContainerState>,
    group_open: bool,
    group_container: Option<u32>,
    devices_open: u32,
    bar: Arc<[AtomicU32]>,
    config: [u8; TWIN_CONFIG_SIZE],
    mmaps: usize,
    msix: Msix,
    resets: u32,
}

fn err(errno: i32) -> io::Error {
    io::Error::from_raw_os_error(errno)
}

/// An ioctl argument's `argsz` covers the structure `T` (the kernel answers EINVAL otherwise).
fn argsz_fits<T>(argsz: u32) -> bool {
    argsz as usize >= std::mem::size_of::<T>()
}

fn region_offset(index: u32) -> u64 {
    (index as u64) << VFIO_PCI_OFFSET_SHIFT
}

/// A handle on an emulated VFIO host; clones share the same state (give one to the
/// [`super::VfioDevice`] and keep one to inspect and inject failures).
#[derive(Clone)]
pub struct TwinSys {
    st: Arc<Mutex<State>>,
}

impl Default for TwinSys {
    fn default() -> Self {
        TwinSys::new(TwinConfig::default())
    }
}

impl std::fmt::Debug for TwinSys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = self.lock();
        f.debug_struct("TwinSys").field("bdf", &s.cfg.bdf).field("open_fds", &s.fds.len()).finish()
    }
}

impl TwinSys {
    /// A host with the function `cfg` describes.
    pub fn new(cfg: TwinConfig) -> TwinSys {
        let words = if cfg.bar0_size <= TWIN_MAX_BAR_BYTES { cfg.bar0_size.div_ceil(4) as usize } else { 0 };
        let bar: Arc<[AtomicU32]> = (0..words).map(|_| AtomicU32::new(0)).collect();
        let mut links = HashMap::new();
        let dev = PathBuf::from(format!("/sys/bus/pci/devices/{}", cfg.bdf));
        if cfg.sysfs_device {
            links.insert(dev.clone(), PathBuf::from(format!("../../../devices/pci0000:00/0000:00:01.0/{}", cfg.bdf)));
            if cfg.iommu_group_link {
                links.insert(
                    dev.join("iommu_group"),
                    PathBuf::from(format!("../../../../kernel/iommu_groups/{}", cfg.group)),
                );
            }
            if let Some(d) = &cfg.driver {
                links.insert(dev.join("driver"), PathBuf::from(format!("../../../../bus/pci/drivers/{d}")));
            }
        }
        let mut config = [0u8; TWIN_CONFIG_SIZE];
        config[0..2].copy_from_slice(&cfg.vendor_id.to_le_bytes());
        config[2..4].copy_from_slice(&cfg.device_id.to_le_bytes());
        config[0x0a] = 0x00; // subclass: Ethernet
        config[0x0b] = 0x02; // class: network controller
        if let Some(ctl) = cfg.pcie_devctl {
            config[0x06] |= 0x10; // status: capability list
            config[0x34] = 0x40; // first capability
            config[0x40] = 0x10; // PCI Express, the last capability
            config[0x42] = 0x02; // capability version 2, endpoint
            config[0x48..0x4a].copy_from_slice(&ctl.to_le_bytes());
        }
        let mut st = State {
            cfg,
            log: Vec::new(),
            fail_always: HashMap::new(),
            fail_once: HashMap::new(),
            fail_paths: HashMap::new(),
            links,
            next_fd: 1000,
            fds: HashMap::new(),
            next_container: 1,
            containers: HashMap::new(),
            group_open: false,
            group_container: None,
            devices_open: 0,
            bar,
            config,
            mmaps: 0,
            msix: Msix::default(),
            resets: 0,
        };
        st.init_bar();
        TwinSys { st: Arc::new(Mutex::new(st)) }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.st.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The state for call `op` on descriptor `device`: the call logged (and failed where the
    /// test says so), ENOTTY when the descriptor is not the device's.
    fn device_call(&self, op: SysOp, device: RawFd) -> io::Result<MutexGuard<'_, State>> {
        let mut s = self.lock();
        s.enter(op)?;
        s.device(device)?;
        Ok(s)
    }

    /// The configuration the twin was made with.
    pub fn config(&self) -> TwinConfig {
        self.lock().cfg.clone()
    }

    /// Makes every later call of `op` fail with `errno` (until [`TwinSys::clear_failures`]).
    pub fn fail(&self, op: SysOp, errno: i32) {
        self.lock().fail_always.insert(op, errno);
    }

    /// Makes the next call of `op` fail with `errno`.
    pub fn fail_once(&self, op: SysOp, errno: i32) {
        self.lock().fail_once.insert(op, errno);
    }

    /// Makes every later `open` of `path` fail with `errno`.
    pub fn fail_open(&self, path: impl AsRef<Path>, errno: i32) {
        self.lock().fail_paths.insert(path.as_ref().to_path_buf(), errno);
    }

    /// Removes every injected failure.
    pub fn clear_failures(&self) {
        let mut s = self.lock();
        s.fail_always.clear();
        s.fail_once.clear();
        s.fail_paths.clear();
    }

    /// Every call made so far, in order (failed ones included).
    pub fn calls(&self) -> Vec<SysOp> {
        self.lock().log.clone()
    }

    /// Empties the call log.
    pub fn clear_calls(&self) {
        self.lock().log.clear();
    }

    /// How many times `op` was called.
    pub fn count(&self, op: SysOp) -> usize {
        self.lock().log.iter().filter(|&&o| o == op).count()
    }

    /// Descriptors currently open (containers, groups, devices).
    pub fn open_fds(&self) -> usize {
        self.lock().fds.len()
    }

    /// Live mappings of BAR0.
    pub fn live_mmaps(&self) -> usize {
        self.lock().mmaps
    }

    /// Whether the group fd is open.
    pub fn group_open(&self) -> bool {
        self.lock().group_open
    }

    /// Whether the group is attached to a container.
    pub fn group_container_set(&self) -> bool {
        self.lock().group_container.is_some()
    }

    /// The IOMMU type of the group's container, if the group has one and it is set.
    pub fn iommu_type(&self) -> Option<u32> {
        let s = self.lock();
        s.group_container.and_then(|c| s.containers.get(&c)).and_then(|c| c.iommu)
    }

    /// The DMA mappings of every container, by IOVA.
    pub fn dma_mappings(&self) -> Vec<TwinDma> {
        let s = self.lock();
        let mut v: Vec<TwinDma> = s.containers.values().flat_map(|c| c.dma.values().copied()).collect();
        v.sort_by_key(|d| d.iova);
        v
    }

    /// Whether MSI-X is enabled.
    pub fn msix_enabled(&self) -> bool {
        self.lock().msix.enabled
    }

    /// The vectors MSI-X was enabled with (0 when disabled).
    pub fn msix_nvec(&self) -> u32 {
        let s = self.lock();
        if s.msix.enabled {
            s.msix.nvec
        } else {
            0
        }
    }

    /// The eventfd each MSI-X vector signals (all `None` when disabled), one entry per vector
    /// of the function.
    pub fn msix_routes(&self) -> Vec<Option<RawFd>> {
        let s = self.lock();
        let mut v = vec![None; s.cfg.msix_vectors as usize];
        if s.msix.enabled {
            for (i, r) in s.msix.routes.iter().enumerate() {
                if let Some(slot) = v.get_mut(i) {
                    *slot = *r;
                }
            }
        }
        v
    }

    /// How many times each MSI-X vector was fired by a loopback `SET_IRQS` (`DATA_NONE` /
    /// `DATA_BOOL` with `ACTION_TRIGGER`) while routed.
    pub fn msix_fired(&self) -> Vec<u64> {
        let s = self.lock();
        let mut v = vec![0; s.cfg.msix_vectors as usize];
        for (i, n) in s.msix.fired.iter().enumerate() {
            if let Some(slot) = v.get_mut(i) {
                *slot = *n;
            }
        }
        v
    }

    /// Function resets performed.
    pub fn resets(&self) -> u32 {
        self.lock().resets
    }

    /// Reads BAR0's 32-bit word at byte `offset` (the device's view); `None` when misaligned
    /// or outside.
    pub fn bar_read32(&self, offset: u64) -> Option<u32> {
        let s = self.lock();
        let i = s.bar_index(offset)?;
        Some(s.bar[i].load(Ordering::SeqCst))
    }

    /// Writes BAR0's 32-bit word at byte `offset` (as the device would change a register);
    /// `None` when misaligned or outside.
    pub fn bar_write32(&self, offset: u64, value: u32) -> Option<()> {
        let s = self.lock();
        let i = s.bar_index(offset)?;
        s.bar[i].store(value, Ordering::SeqCst);
        Some(())
    }

    /// Reads the 16-bit config space word at byte `offset`.
    pub fn config_read16(&self, offset: u64) -> Option<u16> {
        let s = self.lock();
        let o = usize::try_from(offset).ok()?;
        let b = s.config.get(o..o.checked_add(2)?)?;
        Some(u16::from_le_bytes([b[0], b[1]]))
    }

    /// Writes the 16-bit config space word at byte `offset` (as the kernel or the device would).
    pub fn config_write16(&self, offset: u64, value: u16) -> Option<()> {
        let mut s = self.lock();
        let o = usize::try_from(offset).ok()?;
        let b = s.config.get_mut(o..o.checked_add(2)?)?;
        b.copy_from_slice(&value.to_le_bytes());
        Some(())
    }
}

/// What a device pread / pwrite reaches.
enum DeviceRw {
    /// `n` bytes of config space from byte `off`.
    Config { off: usize, n: usize },
    /// BAR0 word `i` (a 4-byte access).
    Bar(usize),
}

impl State {
    fn enter(&mut self, op: SysOp) -> io::Result<()> {
        self.log.push(op);
        if let Some(e) = self.fail_once.remove(&op) {
            return Err(err(e));
        }
        match self.fail_always.get(&op) {
            Some(&e) => Err(err(e)),
            None => Ok(()),
        }
    }

    fn obj(&self, fd: RawFd) -> io::Result<Obj> {
        self.fds.get(&fd).copied().ok_or_else(|| err(libc::EBADF))
    }

    fn container(&self, fd: RawFd) -> io::Result<u32> {
        match self.obj(fd)? {
            Obj::Container(id) => Ok(id),
            _ => Err(err(libc::ENOTTY)),
        }
    }

    fn group(&self, fd: RawFd) -> io::Result<()> {
        match self.obj(fd)? {
            Obj::Group => Ok(()),
            _ => Err(err(libc::ENOTTY)),
        }
    }

    fn device(&self, fd: RawFd) -> io::Result<()> {
        match self.obj(fd)? {
            Obj::Device => Ok(()),
            _ => Err(err(libc::ENOTTY)),
        }
    }

    fn alloc_fd(&mut self, o: Obj) -> RawFd {
        let fd = self.next_fd;
        self.next_fd += 1;
        self.fds.insert(fd, o);
        fd
    }

    fn init_bar(&mut self) {
        for w in self.bar.iter() {
            w.store(0, Ordering::SeqCst);
        }
        for (off, v) in self.cfg.bar0_init.clone() {
            if let Some(i) = self.bar_index(off) {
                self.bar[i].store(v, Ordering::SeqCst);
            }
        }
    }

    /// Where a pread / pwrite of `len` bytes at `offset` of device `fd` lands (EBADF for an
    /// unknown descriptor, EINVAL for another object or a place the twin does not back).
    fn device_rw(&self, fd: RawFd, offset: u64, len: usize) -> io::Result<DeviceRw> {
        if self.obj(fd)? != Obj::Device {
            return Err(err(libc::EINVAL));
        }
        let index = offset >> VFIO_PCI_OFFSET_SHIFT;
        let local = offset & ((1u64 << VFIO_PCI_OFFSET_SHIFT) - 1);
        if index == VFIO_PCI_CONFIG_REGION_INDEX as u64 {
            let off = local as usize;
            if off >= TWIN_CONFIG_SIZE {
                return Err(err(libc::EINVAL));
            }
            return Ok(DeviceRw::Config { off, n: len.min(TWIN_CONFIG_SIZE - off) });
        }
        if index == VFIO_PCI_BAR0_REGION_INDEX as u64 && len == 4 {
            return self.bar_index(local).map(DeviceRw::Bar).ok_or_else(|| err(libc::EINVAL));
        }
        Err(err(libc::EINVAL))
    }

    fn bar_index(&self, offset: u64) -> Option<usize> {
        if offset % 4 != 0 || offset.checked_add(4)? > self.cfg.bar0_size {
            return None;
        }
        let i = usize::try_from(offset / 4).ok()?;
        (i < self.bar.len()).then_some(i)
    }

    /// Whether the host supports IOMMU model `t`.
    fn supports(&self, t: u32) -> bool {
        (t == VFIO_TYPE1v2_IOMMU && self.cfg.type1v2) || (t == VFIO_TYPE1_IOMMU && self.cfg.type1)
    }

    fn group_node_exists(&self) -> bool {
        self.cfg.driver.as_deref().is_some_and(|d| d.contains("vfio"))
    }

    /// Drops the group's container attachment; the last group leaving a container releases
    /// its IOMMU and mappings; a container with no fd and no group goes away.
    fn detach_group(&mut self) {
        if let Some(id) = self.group_container.take() {
            if let Some(c) = self.containers.get_mut(&id) {
                c.groups = c.groups.saturating_sub(1);
                if c.groups == 0 {
                    c.iommu = None;
                    c.dma.clear();
                    if c.fds == 0 {
                        self.containers.remove(&id);
                    }
                }
            }
        }
    }

    fn dma_total(&self) -> u64 {
        self.containers.values().flat_map(|c| c.dma.values()).map(|d| d.size).sum()
    }

    fn irq_count(&self, index: u32) -> u32 {
        match index {
            VFIO_PCI_INTX_IRQ_INDEX => 1,
            VFIO_PCI_MSI_IRQ_INDEX => 0,
            VFIO_PCI_MSIX_IRQ_INDEX => self.cfg.msix_vectors,
            VFIO_PCI_ERR_IRQ_INDEX | VFIO_PCI_REQ_IRQ_INDEX => 1,
            _ => 0,
        }
    }

    fn set_irqs(&mut self, words: &[u32]) -> io::Result<()> {
        // The header, as the kernel copies it (minsz = 20 bytes).
        if words.len() * 4 < IRQ_SET_HEADER_BYTES {
            return Err(err(libc::EFAULT));
        }
        let (argsz, flags, index, start, count) = (words[0], words[1], words[2], words[3], words[4]);
        if (argsz as usize) < IRQ_SET_HEADER_BYTES {
            return Err(err(libc::EINVAL));
        }
        if argsz as usize > words.len() * 4 {
            return Err(err(libc::EFAULT));
        }
        if flags & !(VFIO_IRQ_SET_DATA_TYPE_MASK | VFIO_IRQ_SET_ACTION_TYPE_MASK) != 0 {
            return Err(err(libc::EINVAL));
        }
        let data_type = flags & VFIO_IRQ_SET_DATA_TYPE_MASK;
        let elem = match data_type {
            VFIO_IRQ_SET_DATA_NONE => 0u64,
            VFIO_IRQ_SET_DATA_BOOL => 1,
            VFIO_IRQ_SET_DATA_EVENTFD => 4,
            _ => return Err(err(libc::EINVAL)),
        };
        let action = flags & VFIO_IRQ_SET_ACTION_TYPE_MASK;
        if !action.is_power_of_two() {
            return Err(err(libc::EINVAL));
        }
        if index >= VFIO_PCI_NUM_IRQS {
            return Err(err(libc::EINVAL));
        }
        let max = self.irq_count(index);
        if count >= u32::MAX - start || start >= max || start + count > max {
            return Err(err(libc::EINVAL));
        }
        let data_len = count as u64 * elem;
        if ((argsz as usize - IRQ_SET_HEADER_BYTES) as u64) < data_len {
            return Err(err(libc::EINVAL));
        }
        let data: Vec<u8> = words[IRQ_SET_HEADER_BYTES / 4..].iter().flat_map(|w| w.to_le_bytes()).collect();
        if index != VFIO_PCI_MSIX_IRQ_INDEX || action != VFIO_IRQ_SET_ACTION_TRIGGER {
            return Err(err(libc::ENOTTY));
        }
        let m = &mut self.msix;
        if m.enabled && count == 0 && data_type == VFIO_IRQ_SET_DATA_NONE {
            *m = Msix::default();
            return Ok(());
        }
        if data_type == VFIO_IRQ_SET_DATA_EVENTFD {
            let fds: Vec<RawFd> = (0..count as usize)
                .map(|i| i32::from_le_bytes([data[4 * i], data[4 * i + 1], data[4 * i + 2], data[4 * i + 3]]))
                .collect();
            if !m.enabled {
                if count == 0 {
                    return Err(err(libc::EINVAL));
                }
                let nvec = start + count;
                *m = Msix { enabled: true, nvec, routes: vec![None; nvec as usize], fired: vec![0; nvec as usize] };
            } else if start + count > m.nvec {
                return Err(err(libc::EINVAL));
            }
            for (i, fd) in fds.into_iter().enumerate() {
                m.routes[start as usize + i] = (fd >= 0).then_some(fd);
            }
            return Ok(());
        }
        // DATA_NONE / DATA_BOOL with a count: loopback trigger of routed vectors.
        if !m.enabled || start + count > m.nvec {
            return Err(err(libc::EINVAL));
        }
        for v in start as usize..(start + count) as usize {
            let on = data_type == VFIO_IRQ_SET_DATA_NONE || data[v - start as usize] != 0;
            if on && m.routes[v].is_some() {
                m.fired[v] += 1;
            }
        }
        Ok(())
    }
}

impl VfioSys for TwinSys {
    fn open(&self, path: &Path) -> io::Result<RawFd> {
        let mut s = self.lock();
        s.enter(SysOp::Open)?;
        if let Some(&e) = s.fail_paths.get(path) {
            return Err(err(e));
        }
        if path == Path::new("/dev/vfio/vfio") {
            let id = s.next_container;
            s.next_container += 1;
            s.containers.insert(id, ContainerState { fds: 1, ..Default::default() });
            return Ok(s.alloc_fd(Obj::Container(id)));
        }
        if path == Path::new(&format!("/dev/vfio/{}", s.cfg.group)) && s.group_node_exists() {
            if s.group_open {
                return Err(err(libc::EBUSY));
            }
            s.group_open = true;
            return Ok(s.alloc_fd(Obj::Group));
        }
        Err(err(libc::ENOENT))
    }

    fn close(&self, fd: RawFd) -> io::Result<()> {
        let mut s = self.lock();
        s.enter(SysOp::Close)?;
        let o = s.fds.remove(&fd).ok_or_else(|| err(libc::EBADF))?;
        match o {
            Obj::Container(id) => {
                if let Some(c) = s.containers.get_mut(&id) {
                    c.fds = c.fds.saturating_sub(1);
                    if c.fds == 0 && c.groups == 0 {
                        s.containers.remove(&id);
                    }
                }
            }
            Obj::Group => {
                s.group_open = false;
                if s.devices_open == 0 {
                    s.detach_group();
                }
            }
            Obj::Device => {
                s.devices_open = s.devices_open.saturating_sub(1);
                if s.devices_open == 0 {
                    // vfio_pci_core_disable: interrupts off, bus mastering off.
                    s.msix = Msix::default();
                    s.config[PCI_COMMAND as usize] &= !(PCI_COMMAND_MASTER as u8);
                    if !s.group_open {
                        s.detach_group();
                    }
                }
            }
        }
        Ok(())
    }

    fn read_link(&self, path: &Path) -> io::Result<PathBuf> {
        let mut s = self.lock();
        s.enter(SysOp::ReadLink)?;
        s.links.get(path).cloned().ok_or_else(|| err(libc::ENOENT))
    }

    fn page_size(&self) -> u64 {
        self.lock().cfg.page_size
    }

    fn get_api_version(&self, container: RawFd) -> io::Result<i32> {
        let mut s = self.lock();
        s.enter(SysOp::GetApiVersion)?;
        s.container(container)?;
        Ok(s.cfg.api_version)
    }

    fn check_extension(&self, container: RawFd, ext: u32) -> io::Result<i32> {
        let mut s = self.lock();
        s.enter(SysOp::CheckExtension)?;
        s.container(container)?;
        Ok(s.supports(ext) as i32)
    }

    fn set_iommu(&self, container: RawFd, iommu_type: u32) -> io::Result<()> {
        let mut s = self.lock();
        s.enter(SysOp::SetIommu)?;
        let id = s.container(container)?;
        let supported = s.supports(iommu_type);
        let c = s.containers.get_mut(&id).ok_or_else(|| err(libc::EBADF))?;
        if c.groups == 0 || c.iommu.is_some() {
            return Err(err(libc::EINVAL));
        }
        if !supported {
            return Err(err(libc::ENODEV));
        }
        c.iommu = Some(iommu_type);
        Ok(())
    }

    fn group_get_status(&self, group: RawFd, status: &mut vfio_group_status) -> io::Result<()> {
        let mut s = self.lock();
        s.enter(SysOp::GroupGetStatus)?;
        s.group(group)?;
        if !argsz_fits::<vfio_group_status>(status.argsz) {
            return Err(err(libc::EINVAL));
        }
        status.flags = 0;
        if s.cfg.viable {
            status.flags |= VFIO_GROUP_FLAGS_VIABLE;
        }
        if s.group_container.is_some() {
            status.flags |= VFIO_GROUP_FLAGS_CONTAINER_SET;
        }
        Ok(())
    }

    fn group_set_container(&self, group: RawFd, container: RawFd) -> io::Result<()> {
        let mut s = self.lock();
        s.enter(SysOp::GroupSetContainer)?;
        s.group(group)?;
        let id = match s.obj(container)? {
            Obj::Container(id) => id,
            _ => return Err(err(libc::EINVAL)),
        };
        if s.group_container.is_some() {
            return Err(err(libc::EINVAL));
        }
        if !s.cfg.viable {
            return Err(err(libc::EPERM));
        }
        let c = s.containers.get_mut(&id).ok_or_else(|| err(libc::EBADF))?;
        c.groups += 1;
        s.group_container = Some(id);
        Ok(())
    }

    fn group_unset_container(&self, group: RawFd) -> io::Result<()> {
        let mut s = self.lock();
        s.enter(SysOp::GroupUnsetContainer)?;
        s.group(group)?;
        if s.group_container.is_none() {
            return Err(err(libc::EINVAL));
        }
        if s.devices_open > 0 {
            return Err(err(libc::EBUSY));
        }
        s.detach_group();
        Ok(())
    }

    fn group_get_device_fd(&self, group: RawFd, name: &CStr) -> io::Result<RawFd> {
        let mut s = self.lock();
        s.enter(SysOp::GroupGetDeviceFd)?;
        s.group(group)?;
        let iommu_set = s.group_container.and_then(|c| s.containers.get(&c)).is_some_and(|c| c.iommu.is_some());
        if !iommu_set || !s.cfg.viable {
            return Err(err(libc::EINVAL));
        }
        if name.to_bytes() != s.cfg.bdf.as_bytes() {
            return Err(err(libc::ENODEV));
        }
        if s.devices_open == 0 {
            // pci_enable_device: memory decoding on.
            s.config[PCI_COMMAND as usize] |= PCI_COMMAND_MEMORY as u8;
        }
        s.devices_open += 1;
        Ok(s.alloc_fd(Obj::Device))
    }

    fn device_get_info(&self, device: RawFd, info: &mut vfio_device_info) -> io::Result<()> {
        let s = self.device_call(SysOp::DeviceGetInfo, device)?;
        if !argsz_fits::<vfio_device_info>(info.argsz) {
            return Err(err(libc::EINVAL));
        }
        info.flags = VFIO_DEVICE_FLAGS_PCI | if s.cfg.reset { VFIO_DEVICE_FLAGS_RESET } else { 0 };
        info.num_regions = VFIO_PCI_NUM_REGIONS;
        info.num_irqs = VFIO_PCI_NUM_IRQS;
        Ok(())
    }

    fn device_get_region_info(&self, device: RawFd, info: &mut vfio_region_info) -> io::Result<()> {
        let s = self.device_call(SysOp::DeviceGetRegionInfo, device)?;
        if !argsz_fits::<vfio_region_info>(info.argsz) || info.index >= VFIO_PCI_NUM_REGIONS {
            return Err(err(libc::EINVAL));
        }
        info.offset = region_offset(info.index);
        info.cap_offset = 0;
        (info.flags, info.size) = match info.index {
            VFIO_PCI_BAR0_REGION_INDEX if s.cfg.bar0_size > 0 => {
                let mut f = VFIO_REGION_INFO_FLAG_READ | VFIO_REGION_INFO_FLAG_WRITE;
                if s.cfg.bar0_mmap {
                    f |= VFIO_REGION_INFO_FLAG_MMAP;
                }
                (f, s.cfg.bar0_size)
            }
            VFIO_PCI_CONFIG_REGION_INDEX => {
                (VFIO_REGION_INFO_FLAG_READ | VFIO_REGION_INFO_FLAG_WRITE, TWIN_CONFIG_SIZE as u64)
            }
            _ => (0, 0),
        };
        Ok(())
    }

    fn device_get_irq_info(&self, device: RawFd, info: &mut vfio_irq_info) -> io::Result<()> {
        let s = self.device_call(SysOp::DeviceGetIrqInfo, device)?;
        if !argsz_fits::<vfio_irq_info>(info.argsz) || info.index >= VFIO_PCI_NUM_IRQS {
            return Err(err(libc::EINVAL));
        }
        info.count = s.irq_count(info.index);
        info.flags = match info.index {
            VFIO_PCI_INTX_IRQ_INDEX => VFIO_IRQ_INFO_EVENTFD | VFIO_IRQ_INFO_MASKABLE | VFIO_IRQ_INFO_AUTOMASKED,
            VFIO_PCI_MSI_IRQ_INDEX | VFIO_PCI_MSIX_IRQ_INDEX => VFIO_IRQ_INFO_EVENTFD | VFIO_IRQ_INFO_NORESIZE,
            _ => VFIO_IRQ_INFO_EVENTFD,
        };
        Ok(())
    }

    fn device_set_irqs(&self, device: RawFd, irq_set: &[u32]) -> io::Result<()> {
        let mut s = self.device_call(SysOp::DeviceSetIrqs, device)?;
        s.set_irqs(irq_set)
    }

    fn device_reset(&self, device: RawFd) -> io::Result<()> {
        let mut s = self.device_call(SysOp::DeviceReset, device)?;
        if !s.cfg.reset {
            return Err(err(libc::EINVAL));
        }
        s.resets += 1;
        s.init_bar();
        Ok(())
    }

    fn iommu_map_dma(&self, container: RawFd, map: &vfio_iommu_type1_dma_map) -> io::Result<()> {
        let mut s = self.lock();
        s.enter(SysOp::IommuMapDma)?;
        let id = s.container(container)?;
        let mask = s.cfg.page_size.max(1) - 1;
        let limit = s.cfg.memlock_limit;
        let total = s.dma_total();
        let c = s.containers.get_mut(&id).ok_or_else(|| err(libc::EBADF))?;
        if c.iommu.is_none() {
            return Err(err(libc::EINVAL));
        }
        let rw = VFIO_DMA_MAP_FLAG_READ | VFIO_DMA_MAP_FLAG_WRITE;
        if !argsz_fits::<vfio_iommu_type1_dma_map>(map.argsz) || map.flags & !rw != 0 {
            return Err(err(libc::EINVAL));
        }
        if map.flags & rw == 0 || map.size == 0 || (map.size | map.iova | map.vaddr) & mask != 0 {
            return Err(err(libc::EINVAL));
        }
        if map.iova.checked_add(map.size - 1).is_none() || map.vaddr.checked_add(map.size - 1).is_none() {
            return Err(err(libc::EINVAL));
        }
        let end = map.iova + (map.size - 1);
        if c.dma.range(..=end).next_back().is_some_and(|(_, d)| d.iova + (d.size - 1) >= map.iova) {
            return Err(err(libc::EEXIST));
        }
        if map.vaddr == 0 {
            return Err(err(libc::EFAULT));
        }
        if limit.is_some_and(|l| total.saturating_add(map.size) > l) {
            return Err(err(libc::ENOMEM));
        }
        let d = TwinDma {
            iova: map.iova,
            vaddr: map.vaddr,
            size: map.size,
            read: map.flags & VFIO_DMA_MAP_FLAG_READ != 0,
            write: map.flags & VFIO_DMA_MAP_FLAG_WRITE != 0,
        };
        c.dma.insert(map.iova, d);
        Ok(())
    }

    fn iommu_unmap_dma(&self, container: RawFd, unmap: &mut vfio_iommu_type1_dma_unmap) -> io::Result<()> {
        let mut s = self.lock();
        s.enter(SysOp::IommuUnmapDma)?;
        let id = s.container(container)?;
        let mask = s.cfg.page_size.max(1) - 1;
        let c = s.containers.get_mut(&id).ok_or_else(|| err(libc::EBADF))?;
        if c.iommu.is_none() {
            return Err(err(libc::EINVAL));
        }
        if !argsz_fits::<vfio_iommu_type1_dma_unmap>(unmap.argsz) || unmap.flags != 0 {
            return Err(err(libc::EINVAL));
        }
        if unmap.iova & mask != 0 || unmap.size == 0 || unmap.size & mask != 0 {
            return Err(err(libc::EINVAL));
        }
        let last = unmap.iova.checked_add(unmap.size - 1).ok_or_else(|| err(libc::EINVAL))?;
        // Type-1 v2: the range may not cut a mapping at either end.
        let containing = |a: u64| c.dma.range(..=a).next_back().map(|(_, d)| *d).filter(|d| d.iova + (d.size - 1) >= a);
        if containing(unmap.iova).is_some_and(|d| d.iova != unmap.iova) {
            return Err(err(libc::EINVAL));
        }
        if containing(last).is_some_and(|d| d.iova + (d.size - 1) != last) {
            return Err(err(libc::EINVAL));
        }
        let inside: Vec<u64> = c.dma.range(unmap.iova..=last).map(|(&k, _)| k).collect();
        let mut removed = 0u64;
        for k in inside {
            if let Some(d) = c.dma.remove(&k) {
                removed += d.size;
            }
        }
        unmap.size = removed;
        Ok(())
    }

    fn mmap(&self, fd: RawFd, len: usize, offset: u64) -> io::Result<MmioRegion> {
        let mut s = self.lock();
        s.enter(SysOp::Mmap)?;
        if s.obj(fd)? != Obj::Device {
            return Err(err(libc::ENODEV));
        }
        let index = offset >> VFIO_PCI_OFFSET_SHIFT;
        let local = offset & ((1u64 << VFIO_PCI_OFFSET_SHIFT) - 1);
        if index != VFIO_PCI_BAR0_REGION_INDEX as u64 || !s.cfg.bar0_mmap || s.cfg.bar0_size == 0 {
            return Err(err(libc::EINVAL));
        }
        // Only whole-BAR mappings from the start are emulated.
        if len == 0 || local != 0 || len as u64 > s.cfg.bar0_size {
            return Err(err(libc::EINVAL));
        }
        if s.cfg.bar0_size > TWIN_MAX_BAR_BYTES {
            return Err(err(libc::ENOMEM));
        }
        s.mmaps += 1;
        Ok(MmioRegion::from_memory(s.bar.clone(), len))
    }

    fn munmap(&self, region: MmioRegion) -> io::Result<()> {
        let mut s = self.lock();
        s.enter(SysOp::Munmap)?;
        if region.addr() != s.bar.as_ptr() as usize || s.mmaps == 0 {
            return Err(err(libc::EINVAL));
        }
        s.mmaps -= 1;
        Ok(())
    }

    fn pread(&self, fd: RawFd, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let mut s = self.lock();
        s.enter(SysOp::Pread)?;
        match s.device_rw(fd, offset, buf.len())? {
            DeviceRw::Config { off, n } => {
                buf[..n].copy_from_slice(&s.config[off..off + n]);
                Ok(n)
            }
            DeviceRw::Bar(i) => {
                buf.copy_from_slice(&s.bar[i].load(Ordering::SeqCst).to_le_bytes());
                Ok(4)
            }
        }
    }

    fn pwrite(&self, fd: RawFd, buf: &[u8], offset: u64) -> io::Result<usize> {
        let mut s = self.lock();
        s.enter(SysOp::Pwrite)?;
        match s.device_rw(fd, offset, buf.len())? {
            DeviceRw::Config { off, n } => {
                for (i, b) in buf[..n].iter().enumerate() {
                    // Vendor and device IDs are read-only.
                    if off + i >= 4 {
                        s.config[off + i] = *b;
                    }
                }
                Ok(n)
            }
            DeviceRw::Bar(i) => {
                s.bar[i].store(u32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]), Ordering::SeqCst);
                Ok(4)
            }
        }
    }
}
