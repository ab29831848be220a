//! The VFIO backend: a Hematite PCI function bound to `vfio-pci`, driven from user space.
//!
//! [`VfioDevice::open`] takes the function's PCI address (`0000:03:00.0`) and goes through the
//! legacy container interface: `/dev/vfio/vfio` (API version, type-1 IOMMU), the function's
//! IOMMU group `/dev/vfio/<N>` (viable, attached to the container), the type-1 IOMMU, then the
//! device fd; BAR0 is mmapped, bus mastering is enabled through config space (and the max read
//! request size raised to 4096 bytes), and the MSI-X vector count read. See `docs/vfio.md` for setup (binding, permissions, memlock) and details.
//!
//! Every system call goes through [`sys::VfioSys`] ([`sys`] holds the backend's only `unsafe`
//! code): [`sys::LinuxSys`] is the kernel, [`twin::TwinSys`] an in-memory emulation of it used
//! by the tests (and usable by other crates' tests: [`VfioDevice::open_with`]).

pub mod sys;
pub mod twin;

#[cfg(test)]
mod tests;

pub use sys::{LinuxSys, MmioRegion, VfioSys};
pub use twin::{SysOp, TwinConfig, TwinDma, TwinSys};

use crate::device::{Device, DeviceInfo};
use crate::{Error, Result};
use std::collections::BTreeMap;
use std::ffi::CString;
use std::io;
use std::os::fd::RawFd;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use sys::{
    irq_set_eventfds, irq_set_none, PCI_CAPABILITY_LIST, PCI_CAP_ID_EXP, PCI_COMMAND, PCI_COMMAND_MASTER,
    PCI_COMMAND_MEMORY, PCI_EXP_DEVCTL, PCI_EXP_DEVCTL_READRQ, PCI_EXP_DEVCTL_READRQ_4096, PCI_STATUS,
    PCI_STATUS_CAP_LIST,
};
use vfio_bindings::bindings::vfio::{
    vfio_device_info, vfio_group_status, vfio_iommu_type1_dma_map, vfio_iommu_type1_dma_unmap, vfio_irq_info,
    vfio_region_info, VFIO_TYPE1v2_IOMMU, VFIO_API_VERSION, VFIO_DEVICE_FLAGS_PCI, VFIO_DEVICE_FLAGS_RESET,
    VFIO_DMA_MAP_FLAG_READ, VFIO_DMA_MAP_FLAG_WRITE, VFIO_GROUP_FLAGS_VIABLE, VFIO_IRQ_INFO_EVENTFD,
    VFIO_PCI_BAR0_REGION_INDEX, VFIO_PCI_CONFIG_REGION_INDEX, VFIO_PCI_MSIX_IRQ_INDEX, VFIO_REGION_INFO_FLAG_MMAP,
    VFIO_REGION_INFO_FLAG_READ, VFIO_REGION_INFO_FLAG_WRITE, VFIO_TYPE1_IOMMU,
};

/// The container device node.
pub const VFIO_CONTAINER_PATH: &str = "/dev/vfio/vfio";
/// Where PCI functions appear in sysfs.
pub const SYSFS_PCI_DEVICES: &str = "/sys/bus/pci/devices";

/// One DMA mapping the backend made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DmaMapping {
    /// First IOVA (what the device uses).
    pub iova: u64,
    /// The process virtual address it translates to.
    pub vaddr: u64,
    /// Length in bytes.
    pub len: u64,
    /// Whether the device may write (it may always read).
    pub writable: bool,
}

struct IrqState {
    /// Whether MSI-X is enabled in the kernel (it then has `routes.len()` vectors).
    enabled: bool,
    /// The eventfd each vector signals.
    routes: Vec<Option<RawFd>>,
}

/// Descriptors and mapping, taken (set to `None`) as they are released.
#[derive(Default)]
struct Handles {
    container: Option<RawFd>,
    group: Option<RawFd>,
    attached: bool,
    device: Option<RawFd>,
    bar: Option<MmioRegion>,
}

/// A PCI function opened through VFIO. `S` is the system-call layer: [`LinuxSys`] (the
/// default) or a twin.
///
/// Dropping it releases everything in order: MSI-X off, BAR0 unmapped, every DMA mapping
/// removed, device fd closed, group detached from the container, group fd closed, container
/// fd closed. [`VfioDevice::close`] does the same and reports the first failure.
pub struct VfioDevice<S: VfioSys = LinuxSys> {
    sys: S,
    info: DeviceInfo,
    group_id: u32,
    iommu_type: u32,
    page_size: u64,
    config_offset: u64,
    has_reset: bool,
    h: Handles,
    dma: Mutex<BTreeMap<u64, DmaMapping>>,
    irqs: Mutex<IrqState>,
}

impl<S: VfioSys> std::fmt::Debug for VfioDevice<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VfioDevice")
            .field("info", &self.info)
            .field("group", &self.group_id)
            .field("iommu_type", &self.iommu_type)
            .finish()
    }
}

/// Checks and normalizes a PCI address: `DDDD:BB:DD.F` (hex; the domain may be left out and
/// is then `0000`), lower case. Anything else is `InvalidArgument` (this also keeps the
/// address from naming another sysfs path).
pub fn normalize_bdf(bdf: &str) -> Result<String> {
    let bad = || Error::inval(format!("{bdf:?} is not a PCI address (expected DDDD:BB:DD.F, e.g. 0000:03:00.0)"));
    let full = match bdf.len() {
        7 => format!("0000:{bdf}"),
        12 => bdf.to_string(),
        _ => return Err(bad()),
    };
    let b = full.as_bytes();
    let hex = |r: std::ops::Range<usize>| b[r].iter().all(|c| c.is_ascii_hexdigit());
    if !(hex(0..4) && b[4] == b':' && hex(5..7) && b[7] == b':' && hex(8..10) && b[10] == b'.') {
        return Err(bad());
    }
    // Device 0..=0x1f, function 0..=7.
    let dev = u8::from_str_radix(&full[8..10], 16).map_err(|_| bad())?;
    if dev > 0x1f || !(b'0'..=b'7').contains(&b[11]) {
        return Err(bad());
    }
    Ok(full.to_ascii_lowercase())
}

/// The last component of a sysfs link's target, as text.
fn link_name(p: &Path) -> Option<String> {
    p.file_name().and_then(|n| n.to_str()).map(str::to_string)
}

fn errno(e: &io::Error) -> i32 {
    e.raw_os_error().unwrap_or(0)
}

impl VfioDevice<LinuxSys> {
    /// Opens the PCI function at `bdf` (e.g. `"0000:03:00.0"`), which must be bound to
    /// vfio-pci, through the kernel. See [`VfioDevice::open_with`] for the errors.
    pub fn open(bdf: &str) -> Result<VfioDevice<LinuxSys>> {
        VfioDevice::open_with(LinuxSys, bdf)
    }
}

impl<S: VfioSys> VfioDevice<S> {
    /// Opens the PCI function at `bdf` through `sys`.
    ///
    /// Errors: `InvalidArgument` for a malformed address; `Sys` (with ENOENT) when the function
    /// or its IOMMU group link does not exist; `Busy` when the function is bound to another
    /// driver or its group is already open (by another process); `Device` when the function is
    /// unbound, the group is not viable, or the device reports something unusable;
    /// `NotSupported` for an unknown VFIO API version, no type-1 IOMMU, or a BAR0 that cannot
    /// be mmapped; `Sys` for any failing system call, naming it. Whatever was set up before the
    /// failure is released.
    pub fn open_with(sys: S, bdf: &str) -> Result<VfioDevice<S>> {
        let bdf = normalize_bdf(bdf)?;
        let mut h = Handles::default();
        match Self::setup(&sys, &bdf, &mut h) {
            Ok(s) => {
                let num_irqs = s.num_irqs;
                let page_size = sys.page_size().max(1);
                Ok(VfioDevice {
                    sys,
                    info: DeviceInfo { name: bdf, bar0_size: s.bar0_size, num_irqs, mac: None, ipv4: None },
                    group_id: s.group_id,
                    iommu_type: s.iommu_type,
                    page_size,
                    config_offset: s.config_offset,
                    has_reset: s.has_reset,
                    h,
                    dma: Mutex::new(BTreeMap::new()),
                    irqs: Mutex::new(IrqState { enabled: false, routes: vec![None; num_irqs as usize] }),
                })
            }
            Err(e) => {
                let _ = release(&sys, &mut h, false, &[]);
                Err(e)
            }
        }
    }

    fn setup(sys: &S, bdf: &str, h: &mut Handles) -> Result<Setup> {
        // 1. The function in sysfs, its driver and its IOMMU group.
        let dev_dir = PathBuf::from(SYSFS_PCI_DEVICES).join(bdf);
        sys.read_link(&dev_dir).map_err(|e| {
            let what = if errno(&e) == libc::ENOENT {
                format!("no PCI function {bdf} ({} does not exist)", dev_dir.display())
            } else {
                format!("reading {}", dev_dir.display())
            };
            Error::sys(what, e)
        })?;
        match sys.read_link(&dev_dir.join("driver")) {
            Ok(t) => {
                let d = link_name(&t).unwrap_or_default();
                if !d.contains("vfio") {
                    return Err(Error::Busy(format!(
                        "{bdf} is bound to the kernel driver {d:?}, not vfio-pci (see docs/vfio.md to rebind it)"
                    )));
                }
            }
            Err(e) if errno(&e) == libc::ENOENT => {
                return Err(Error::Device(format!(
                    "{bdf} is not bound to any driver; bind it to vfio-pci (docs/vfio.md)"
                )))
            }
            Err(e) => return Err(Error::sys(format!("reading {}/driver", dev_dir.display()), e)),
        }
        let group_link = dev_dir.join("iommu_group");
        let target = sys.read_link(&group_link).map_err(|e| {
            let what = if errno(&e) == libc::ENOENT {
                format!(
                    "{bdf} has no IOMMU group ({} missing): enable the IOMMU (intel_iommu=on / amd_iommu=on); \
                     no-IOMMU mode is not supported",
                    group_link.display()
                )
            } else {
                format!("reading {}", group_link.display())
            };
            Error::sys(what, e)
        })?;
        let group_id: u32 = link_name(&target).and_then(|n| n.parse().ok()).ok_or_else(|| {
            Error::Device(format!("{} points to {}, not an IOMMU group number", group_link.display(), target.display()))
        })?;

        // 2. The container: API version and IOMMU model.
        let container = sys.open(Path::new(VFIO_CONTAINER_PATH)).map_err(|e| {
            let hint = match errno(&e) {
                libc::ENOENT => " (is the vfio-pci module loaded? modprobe vfio-pci)",
                libc::EACCES | libc::EPERM => " (permission denied: see docs/vfio.md)",
                _ => "",
            };
            Error::sys(format!("opening {VFIO_CONTAINER_PATH}{hint}"), e)
        })?;
        h.container = Some(container);
        let version = sys.get_api_version(container).map_err(|e| Error::sys("VFIO_GET_API_VERSION", e))?;
        if version != VFIO_API_VERSION as i32 {
            return Err(Error::NotSupported(format!(
                "VFIO API version {version}, this driver speaks version {VFIO_API_VERSION}"
            )));
        }
        let iommu_type = if sys
            .check_extension(container, VFIO_TYPE1v2_IOMMU)
            .map_err(|e| Error::sys("VFIO_CHECK_EXTENSION(VFIO_TYPE1v2_IOMMU)", e))?
            > 0
        {
            VFIO_TYPE1v2_IOMMU
        } else if sys
            .check_extension(container, VFIO_TYPE1_IOMMU)
            .map_err(|e| Error::sys("VFIO_CHECK_EXTENSION(VFIO_TYPE1_IOMMU)", e))?
            > 0
        {
            VFIO_TYPE1_IOMMU
        } else {
            return Err(Error::NotSupported(
                "the VFIO container supports no type-1 IOMMU (neither VFIO_TYPE1v2_IOMMU nor VFIO_TYPE1_IOMMU)".into(),
            ));
        };

        // 3. The group: open, viable, into the container; then the IOMMU model.
        let group_path = PathBuf::from(format!("/dev/vfio/{group_id}"));
        let group = sys.open(&group_path).map_err(|e| match errno(&e) {
            libc::EBUSY => Error::Busy(format!(
                "IOMMU group {group_id} ({}) of {bdf} is already open: device already opened by another process",
                group_path.display()
            )),
            libc::ENOENT => Error::sys(
                format!("opening {}: no such VFIO group (is {bdf} bound to vfio-pci?)", group_path.display()),
                e,
            ),
            libc::EACCES | libc::EPERM => Error::sys(
                format!("opening {}: permission denied (group ownership, see docs/vfio.md)", group_path.display()),
                e,
            ),
            _ => Error::sys(format!("opening {}", group_path.display()), e),
        })?;
        h.group = Some(group);
        let mut status = vfio_group_status { argsz: std::mem::size_of::<vfio_group_status>() as u32, flags: 0 };
        sys.group_get_status(group, &mut status).map_err(|e| Error::sys("VFIO_GROUP_GET_STATUS", e))?;
        if status.flags & VFIO_GROUP_FLAGS_VIABLE == 0 {
            return Err(Error::Device(format!(
                "IOMMU group {group_id} is not viable: every device in /sys/kernel/iommu_groups/{group_id}/devices \
                 must be bound to vfio-pci or to no driver"
            )));
        }
        sys.group_set_container(group, container).map_err(|e| Error::sys("VFIO_GROUP_SET_CONTAINER", e))?;
        h.attached = true;
        sys.set_iommu(container, iommu_type).map_err(|e| Error::sys(format!("VFIO_SET_IOMMU({iommu_type})"), e))?;

        // 4. The device.
        let name = CString::new(bdf).map_err(|_| Error::inval("PCI address contains a NUL byte"))?;
        let device = sys
            .group_get_device_fd(group, &name)
            .map_err(|e| Error::sys(format!("VFIO_GROUP_GET_DEVICE_FD({bdf})"), e))?;
        h.device = Some(device);
        let mut dinfo =
            vfio_device_info { argsz: std::mem::size_of::<vfio_device_info>() as u32, ..Default::default() };
        sys.device_get_info(device, &mut dinfo).map_err(|e| Error::sys("VFIO_DEVICE_GET_INFO", e))?;
        if dinfo.flags & VFIO_DEVICE_FLAGS_PCI == 0 {
            return Err(Error::Device(format!("{bdf} is not a vfio-pci device (flags {:#x})", dinfo.flags)));
        }
        if dinfo.num_regions <= VFIO_PCI_CONFIG_REGION_INDEX || dinfo.num_irqs <= VFIO_PCI_MSIX_IRQ_INDEX {
            return Err(Error::Device(format!(
                "{bdf} reports {} regions and {} interrupt indexes, too few for a PCI function",
                dinfo.num_regions, dinfo.num_irqs
            )));
        }

        // 5. BAR0, mapped.
        let bar = region_info(sys, device, VFIO_PCI_BAR0_REGION_INDEX)?;
        if bar.size == 0 {
            return Err(Error::Device(format!("{bdf} has no BAR0")));
        }
        let rw = VFIO_REGION_INFO_FLAG_READ | VFIO_REGION_INFO_FLAG_WRITE;
        if bar.flags & rw != rw {
            return Err(Error::Device(format!("BAR0 of {bdf} is not readable and writable (flags {:#x})", bar.flags)));
        }
        if bar.flags & VFIO_REGION_INFO_FLAG_MMAP == 0 {
            return Err(Error::NotSupported(format!(
                "BAR0 of {bdf} cannot be mmapped (VFIO_REGION_INFO_FLAG_MMAP not set)"
            )));
        }
        let bar_len = usize::try_from(bar.size)
            .map_err(|_| Error::Device(format!("BAR0 of {bdf} is {} bytes, too large to map", bar.size)))?;
        let region =
            sys.mmap(device, bar_len, bar.offset).map_err(|e| Error::sys(format!("mmap of BAR0 of {bdf}"), e))?;
        h.bar = Some(region);

        // 6. Config space: memory decoding and bus mastering on.
        let cfg = region_info(sys, device, VFIO_PCI_CONFIG_REGION_INDEX)?;
        if cfg.size < PCI_COMMAND + 2 {
            return Err(Error::Device(format!("config space of {bdf} is {} bytes", cfg.size)));
        }
        enable_bus_master(sys, device, cfg.offset)?;
        raise_read_request(sys, device, cfg.offset)?;

        // 7. MSI-X.
        let mut irq = vfio_irq_info {
            argsz: std::mem::size_of::<vfio_irq_info>() as u32,
            index: VFIO_PCI_MSIX_IRQ_INDEX,
            ..Default::default()
        };
        sys.device_get_irq_info(device, &mut irq).map_err(|e| Error::sys("VFIO_DEVICE_GET_IRQ_INFO(MSI-X)", e))?;
        if irq.count > 0 && irq.flags & VFIO_IRQ_INFO_EVENTFD == 0 {
            return Err(Error::Device(format!("MSI-X of {bdf} cannot signal eventfds (flags {:#x})", irq.flags)));
        }

        Ok(Setup {
            group_id,
            iommu_type,
            bar0_size: bar.size,
            config_offset: cfg.offset,
            has_reset: dinfo.flags & VFIO_DEVICE_FLAGS_RESET != 0,
            num_irqs: irq.count,
        })
    }

    /// Sets the port's MAC and IPv4 addresses reported by [`Device::info`] (a VFIO function has
    /// no standard way to tell them; they come from configuration).
    pub fn with_addresses(mut self, mac: Option<u64>, ipv4: Option<u32>) -> Self {
        self.info.mac = mac;
        self.info.ipv4 = ipv4;
        self
    }

    /// The function's PCI address, normalized (`0000:03:00.0`).
    pub fn bdf(&self) -> &str {
        &self.info.name
    }

    /// The function's IOMMU group number.
    pub fn iommu_group(&self) -> u32 {
        self.group_id
    }

    /// The IOMMU model in use (`VFIO_TYPE1v2_IOMMU` or `VFIO_TYPE1_IOMMU`).
    pub fn iommu_type(&self) -> u32 {
        self.iommu_type
    }

    /// Whether the function supports [`Device::reset`].
    pub fn can_reset(&self) -> bool {
        self.has_reset
    }

    /// The system-call layer (for tests: the twin).
    pub fn sys(&self) -> &S {
        &self.sys
    }

    /// The current DMA mappings, by IOVA.
    pub fn dma_mappings(&self) -> Vec<DmaMapping> {
        lock(&self.dma).values().copied().collect()
    }

    /// The eventfd each interrupt vector is routed to.
    pub fn irq_routes(&self) -> Vec<Option<RawFd>> {
        lock(&self.irqs).routes.clone()
    }

    /// Releases everything (as dropping does) and reports the first failure.
    pub fn close(mut self) -> Result<()> {
        let enabled = std::mem::replace(&mut lock(&self.irqs).enabled, false);
        let dma: Vec<DmaMapping> = std::mem::take(&mut *lock(&self.dma)).into_values().collect();
        release(&self.sys, &mut self.h, enabled, &dma)
    }

    fn bar(&self) -> Result<&MmioRegion> {
        self.h.bar.as_ref().ok_or_else(|| Error::Device("BAR0 is not mapped".into()))
    }

    fn device_fd(&self) -> Result<RawFd> {
        self.h.device.ok_or_else(|| Error::Device("the device is closed".into()))
    }

    fn container_fd(&self) -> Result<RawFd> {
        self.h.container.ok_or_else(|| Error::Device("the device is closed".into()))
    }

    fn set_irqs(&self, words: &[u32], what: impl FnOnce() -> String) -> Result<()> {
        self.sys.device_set_irqs(self.device_fd()?, words).map_err(|e| Error::sys(what(), e))
    }
}

/// What `setup` learnt.
struct Setup {
    group_id: u32,
    iommu_type: u32,
    bar0_size: u64,
    config_offset: u64,
    has_reset: bool,
    num_irqs: u32,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn region_info<S: VfioSys>(sys: &S, device: RawFd, index: u32) -> Result<vfio_region_info> {
    let mut r = vfio_region_info { argsz: std::mem::size_of::<vfio_region_info>() as u32, index, ..Default::default() };
    sys.device_get_region_info(device, &mut r)
        .map_err(|e| Error::sys(format!("VFIO_DEVICE_GET_REGION_INFO({index})"), e))?;
    Ok(r)
}

/// Sets memory decoding and bus mastering in the PCI command register (config space through the
/// device fd). vfio-pci enables memory decoding when the device is opened but leaves bus
/// mastering to the user (and clears it when the device is closed), so without this the
/// function could not DMA. Does nothing when both are already set.
fn enable_bus_master<S: VfioSys>(sys: &S, device: RawFd, config_offset: u64) -> Result<()> {
    let at = config_offset + PCI_COMMAND;
    let cmd = u16::from_le_bytes(config_read::<S, 2>(sys, device, config_offset, PCI_COMMAND, "the PCI command register")?);
    let want = cmd | PCI_COMMAND_MEMORY | PCI_COMMAND_MASTER;
    if want != cmd {
        let n = sys
            .pwrite(device, &want.to_le_bytes(), at)
            .map_err(|e| Error::sys("writing the PCI command register (bus master enable)", e))?;
        if n != 2 {
            return Err(Error::Device(format!("short write of the PCI command register ({n} bytes)")));
        }
    }
    Ok(())
}

/// Reads `N` bytes of config space at byte `off` (the config region starts at `config_offset`).
fn config_read<S: VfioSys, const N: usize>(sys: &S, device: RawFd, config_offset: u64, off: u64, what: &str) -> Result<[u8; N]> {
    let mut b = [0u8; N];
    let n = sys.pread(device, &mut b, config_offset + off).map_err(|e| Error::sys(format!("reading {what}"), e))?;
    if n != N {
        return Err(Error::Device(format!("short read of {what} ({n} bytes)")));
    }
    Ok(b)
}

/// Raises the function's Max_Read_Request_Size to 4096 bytes (the PCI Express capability's
/// Device Control, which vfio-pci lets the user set: it applies it through the kernel's own
/// pcie_set_readrq, within the platform's policy), as NIC drivers do: the shell's DMA bridge
/// keeps 32 tags of reads in flight, and with 512-byte requests they hold 16 KiB, less than a
/// 100 GbE read stream needs at a microsecond and a half of host latency (docs/fpga.md,
/// "Throughput"). Returns the Device Control value now set, `None` when the function has no
/// PCI Express capability (nothing written). A capability list that loops or points into the
/// header ends the search.
fn raise_read_request<S: VfioSys>(sys: &S, device: RawFd, config_offset: u64) -> Result<Option<u16>> {
    let status = u16::from_le_bytes(config_read::<S, 2>(sys, device, config_offset, PCI_STATUS, "the PCI status register")?);
    if status & PCI_STATUS_CAP_LIST == 0 {
        return Ok(None);
    }
    let [mut ptr] = config_read::<S, 1>(sys, device, config_offset, PCI_CAPABILITY_LIST, "the capability pointer")?;
    // (at most 48 capabilities fit the 256-byte header's space after 0x40)
    for _ in 0..48 {
        let at = u64::from(ptr & 0xfc);
        if at < 0x40 {
            break;
        }
        let [id, next] = config_read::<S, 2>(sys, device, config_offset, at, "a capability header")?;
        if id == PCI_CAP_ID_EXP {
            let ctl_at = at + PCI_EXP_DEVCTL;
            let ctl = u16::from_le_bytes(config_read::<S, 2>(sys, device, config_offset, ctl_at, "Device Control")?);
            let want = (ctl & !PCI_EXP_DEVCTL_READRQ) | PCI_EXP_DEVCTL_READRQ_4096;
            if want != ctl {
                let n = sys
                    .pwrite(device, &want.to_le_bytes(), config_offset + ctl_at)
                    .map_err(|e| Error::sys("writing Device Control (max read request size)", e))?;
                if n != 2 {
                    return Err(Error::Device(format!("short write of Device Control ({n} bytes)")));
                }
            }
            return Ok(Some(want));
        }
        ptr = next;
    }
    Ok(None)
}

/// Releases in order: MSI-X off (when `irqs_enabled`), BAR0 unmapped, the DMA mappings in
/// `dma` removed, device fd closed, group detached, group fd closed, container fd closed.
/// Every step is attempted; the first failure is returned.
fn release<S: VfioSys>(sys: &S, h: &mut Handles, irqs_enabled: bool, dma: &[DmaMapping]) -> Result<()> {
    let mut first: Option<Error> = None;
    let mut note = |r: Result<()>| {
        if let Err(e) = r {
            first.get_or_insert(e);
        }
    };
    if let (true, Some(dev)) = (irqs_enabled, h.device) {
        note(
            sys.device_set_irqs(dev, &irq_set_none(VFIO_PCI_MSIX_IRQ_INDEX, 0, 0))
                .map_err(|e| Error::sys("VFIO_DEVICE_SET_IRQS (disable MSI-X)", e)),
        );
    }
    if let Some(bar) = h.bar.take() {
        note(sys.munmap(bar).map_err(|e| Error::sys("munmap of BAR0", e)));
    }
    if let Some(c) = h.container {
        for m in dma {
            let mut u = vfio_iommu_type1_dma_unmap {
                argsz: std::mem::size_of::<vfio_iommu_type1_dma_unmap>() as u32,
                flags: 0,
                iova: m.iova,
                size: m.len,
            };
            note(
                sys.iommu_unmap_dma(c, &mut u).map_err(|e| {
                    Error::sys(format!("VFIO_IOMMU_UNMAP_DMA(iova {:#x}, {:#x} bytes)", m.iova, m.len), e)
                }),
            );
        }
    }
    if let Some(dev) = h.device.take() {
        note(sys.close(dev).map_err(|e| Error::sys("closing the VFIO device fd", e)));
    }
    if let Some(g) = h.group {
        if std::mem::take(&mut h.attached) {
            note(sys.group_unset_container(g).map_err(|e| Error::sys("VFIO_GROUP_UNSET_CONTAINER", e)));
        }
    }
    if let Some(g) = h.group.take() {
        note(sys.close(g).map_err(|e| Error::sys("closing the VFIO group fd", e)));
    }
    if let Some(c) = h.container.take() {
        note(sys.close(c).map_err(|e| Error::sys("closing the VFIO container fd", e)));
    }
    match first {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

impl<S: VfioSys> Drop for VfioDevice<S> {
    fn drop(&mut self) {
        let enabled = std::mem::replace(&mut lock(&self.irqs).enabled, false);
        let dma: Vec<DmaMapping> = std::mem::take(&mut *lock(&self.dma)).into_values().collect();
        let _ = release(&self.sys, &mut self.h, enabled, &dma);
    }
}

impl<S: VfioSys> Device for VfioDevice<S> {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn read32(&self, offset: u64) -> Result<u32> {
        let bar = self.bar()?;
        bar.read32(offset).ok_or_else(|| {
            Error::inval(format!("BAR0 read at {offset:#x}: offset must be 4-byte aligned and below {:#x}", bar.len()))
        })
    }

    fn write32(&self, offset: u64, value: u32) -> Result<()> {
        let bar = self.bar()?;
        bar.write32(offset, value).ok_or_else(|| {
            Error::inval(format!("BAR0 write at {offset:#x}: offset must be 4-byte aligned and below {:#x}", bar.len()))
        })
    }

    fn dma_map(&self, iova: u64, vaddr: u64, len: u64, writable: bool) -> Result<()> {
        let page = self.page_size;
        if len == 0 {
            return Err(Error::inval("DMA mapping of 0 bytes"));
        }
        if iova % page != 0 || vaddr % page != 0 || len % page != 0 {
            return Err(Error::inval(format!(
                "DMA mapping iova {iova:#x} vaddr {vaddr:#x} len {len:#x}: all must be multiples of the page size {page:#x}"
            )));
        }
        let end = iova
            .checked_add(len)
            .ok_or_else(|| Error::inval(format!("DMA mapping iova {iova:#x} + len {len:#x} wraps around")))?;
        vaddr
            .checked_add(len)
            .ok_or_else(|| Error::inval(format!("DMA mapping vaddr {vaddr:#x} + len {len:#x} wraps around")))?;
        let container = self.container_fd()?;
        let mut table = lock(&self.dma);
        if let Some((_, m)) = table.range(..end).next_back() {
            if m.iova + m.len > iova {
                return Err(Error::inval(format!(
                    "DMA mapping [{iova:#x}, {end:#x}) overlaps the mapping [{:#x}, {:#x})",
                    m.iova,
                    m.iova + m.len
                )));
            }
        }
        let map = vfio_iommu_type1_dma_map {
            argsz: std::mem::size_of::<vfio_iommu_type1_dma_map>() as u32,
            flags: VFIO_DMA_MAP_FLAG_READ | if writable { VFIO_DMA_MAP_FLAG_WRITE } else { 0 },
            vaddr,
            iova,
            size: len,
        };
        self.sys.iommu_map_dma(container, &map).map_err(|e| {
            let hint = match errno(&e) {
                libc::ENOMEM => ": cannot pin the memory; raise the locked-memory limit (ulimit -l, docs/vfio.md)",
                libc::EEXIST => ": the kernel already has a mapping in that range",
                libc::EFAULT => ": vaddr is not mapped memory of this process",
                _ => "",
            };
            Error::sys(format!("VFIO_IOMMU_MAP_DMA(iova {iova:#x}, vaddr {vaddr:#x}, {len:#x} bytes){hint}"), e)
        })?;
        table.insert(iova, DmaMapping { iova, vaddr, len, writable });
        Ok(())
    }

    fn dma_unmap(&self, iova: u64, len: u64) -> Result<()> {
        let container = self.container_fd()?;
        let mut table = lock(&self.dma);
        match table.get(&iova) {
            None => return Err(Error::inval(format!("no DMA mapping starts at IOVA {iova:#x}"))),
            Some(m) if m.len != len => {
                return Err(Error::inval(format!(
                    "the DMA mapping at IOVA {iova:#x} is {:#x} bytes, not {len:#x}",
                    m.len
                )))
            }
            Some(_) => {}
        }
        let mut u = vfio_iommu_type1_dma_unmap {
            argsz: std::mem::size_of::<vfio_iommu_type1_dma_unmap>() as u32,
            flags: 0,
            iova,
            size: len,
        };
        self.sys
            .iommu_unmap_dma(container, &mut u)
            .map_err(|e| Error::sys(format!("VFIO_IOMMU_UNMAP_DMA(iova {iova:#x}, {len:#x} bytes)"), e))?;
        table.remove(&iova);
        if u.size != len {
            return Err(Error::Device(format!(
                "VFIO_IOMMU_UNMAP_DMA(iova {iova:#x}) removed {:#x} bytes, expected {len:#x}",
                u.size
            )));
        }
        Ok(())
    }

    fn set_irq(&self, vector: u32, eventfd: Option<RawFd>) -> Result<()> {
        let n = self.info.num_irqs;
        if vector >= n {
            return Err(Error::inval(format!(
                "interrupt vector {vector} out of range: the function has {n} MSI-X vectors"
            )));
        }
        if let Some(fd) = eventfd {
            if fd < 0 {
                return Err(Error::inval(format!("eventfd {fd} is not a descriptor")));
            }
        }
        let mut st = lock(&self.irqs);
        let v = vector as usize;
        match (eventfd, st.enabled) {
            (Some(fd), false) => {
                // First route: enable MSI-X with every vector (kernels before 6.5 cannot grow
                // the vector count later), only this one connected.
                let mut fds = vec![-1; n as usize];
                fds[v] = fd;
                self.set_irqs(&irq_set_eventfds(VFIO_PCI_MSIX_IRQ_INDEX, 0, &fds), || {
                    format!("VFIO_DEVICE_SET_IRQS (enable MSI-X, vector {vector} -> fd {fd})")
                })?;
                st.enabled = true;
                st.routes = vec![None; n as usize];
                st.routes[v] = Some(fd);
            }
            (Some(fd), true) => {
                self.set_irqs(&irq_set_eventfds(VFIO_PCI_MSIX_IRQ_INDEX, vector, &[fd]), || {
                    format!("VFIO_DEVICE_SET_IRQS (vector {vector} -> fd {fd})")
                })?;
                st.routes[v] = Some(fd);
            }
            (None, false) => st.routes[v] = None,
            (None, true) => {
                if st.routes.iter().enumerate().all(|(i, r)| i == v || r.is_none()) {
                    // The last route goes: MSI-X off altogether.
                    self.set_irqs(&irq_set_none(VFIO_PCI_MSIX_IRQ_INDEX, 0, 0), || {
                        "VFIO_DEVICE_SET_IRQS (disable MSI-X)".to_string()
                    })?;
                    st.enabled = false;
                } else {
                    self.set_irqs(&irq_set_eventfds(VFIO_PCI_MSIX_IRQ_INDEX, vector, &[-1]), || {
                        format!("VFIO_DEVICE_SET_IRQS (disconnect vector {vector})")
                    })?;
                }
                st.routes[v] = None;
            }
        }
        Ok(())
    }

    fn reset(&self) -> Result<()> {
        if !self.has_reset {
            return Err(Error::NotSupported(format!(
                "{} cannot be reset (the kernel does not report VFIO_DEVICE_FLAGS_RESET)",
                self.info.name
            )));
        }
        let dev = self.device_fd()?;
        self.sys.device_reset(dev).map_err(|e| Error::sys(format!("VFIO_DEVICE_RESET of {}", self.info.name), e))?;
        // The kernel restores config space after the reset; make sure DMA is still allowed, and
        // reads still as large.
        enable_bus_master(&self.sys, dev, self.config_offset)?;
        raise_read_request(&self.sys, dev, self.config_offset).map(|_| ())
    }
}
