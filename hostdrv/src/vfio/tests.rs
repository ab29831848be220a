//! Tests of the VFIO backend against the twin, of the twin's kernel rules, and of LinuxSys where
//! no root or hardware is needed.

use super::sys::*;
use super::twin::*;
use super::*;
use crate::device::Device;
use std::sync::atomic::AtomicU32;
use std::sync::Arc;
use vfio_bindings::bindings::vfio::*;

const BDF: &str = "0000:03:00.0";

fn twin() -> TwinSys {
    TwinSys::default()
}

fn twin_with(f: impl FnOnce(&mut TwinConfig)) -> TwinSys {
    let mut c = TwinConfig::default();
    f(&mut c);
    TwinSys::new(c)
}

fn open(t: &TwinSys) -> VfioDevice<TwinSys> {
    match VfioDevice::open_with(t.clone(), BDF) {
        Ok(d) => d,
        Err(e) => panic!("open failed: {e}"),
    }
}

/// An open device with one DMA mapping (4 pages, IOVA 0x10_0000), the call log cleared.
fn open_with_mapping() -> (TwinSys, VfioDevice<TwinSys>) {
    let t = twin();
    let d = open(&t);
    d.dma_map(0x10_0000, 0x5000_0000, 4 * PAGE, true).unwrap_or_else(|e| panic!("{e}"));
    t.clear_calls();
    (t, d)
}

fn open_err(t: &TwinSys) -> Error {
    match VfioDevice::open_with(t.clone(), BDF) {
        Ok(_) => panic!("open unexpectedly succeeded"),
        Err(e) => e,
    }
}

/// Nothing left behind by a failed open or a closed device.
fn assert_clean(t: &TwinSys) {
    assert_eq!(t.open_fds(), 0, "descriptors left open");
    assert_eq!(t.live_mmaps(), 0, "BAR still mapped");
    assert!(!t.group_open());
    assert!(!t.group_container_set());
    assert!(t.dma_mappings().is_empty());
    assert!(!t.msix_enabled());
}

fn sys_errno(e: &Error) -> Option<i32> {
    match e {
        Error::Sys { err, .. } => err.raw_os_error(),
        _ => None,
    }
}

fn pos(calls: &[SysOp], op: SysOp) -> usize {
    calls.iter().position(|&c| c == op).unwrap_or_else(|| panic!("{op:?} not called: {calls:?}"))
}

fn rpos(calls: &[SysOp], op: SysOp) -> usize {
    calls.iter().rposition(|&c| c == op).unwrap_or_else(|| panic!("{op:?} not called: {calls:?}"))
}

const PAGE: u64 = 4096;

// ---- ioctl numbers, addresses ----

#[test]
fn vfio_ioctl_numbers_match_linux_uapi() {
    // Values from <linux/vfio.h>: _IO(';', 100 + n).
    assert_eq!(VFIO_GET_API_VERSION, 0x3b64);
    assert_eq!(VFIO_CHECK_EXTENSION, 0x3b65);
    assert_eq!(VFIO_SET_IOMMU, 0x3b66);
    assert_eq!(VFIO_GROUP_GET_STATUS, 0x3b67);
    assert_eq!(VFIO_GROUP_SET_CONTAINER, 0x3b68);
    assert_eq!(VFIO_GROUP_UNSET_CONTAINER, 0x3b69);
    assert_eq!(VFIO_GROUP_GET_DEVICE_FD, 0x3b6a);
    assert_eq!(VFIO_DEVICE_GET_INFO, 0x3b6b);
    assert_eq!(VFIO_DEVICE_GET_REGION_INFO, 0x3b6c);
    assert_eq!(VFIO_DEVICE_GET_IRQ_INFO, 0x3b6d);
    assert_eq!(VFIO_DEVICE_SET_IRQS, 0x3b6e);
    assert_eq!(VFIO_DEVICE_RESET, 0x3b6f);
    assert_eq!(VFIO_IOMMU_MAP_DMA, 0x3b71);
    assert_eq!(VFIO_IOMMU_UNMAP_DMA, 0x3b72);
    assert_eq!(IRQ_SET_HEADER_BYTES, 20);
}

#[test]
fn vfio_irq_set_words_layout() {
    let w = irq_set_eventfds(VFIO_PCI_MSIX_IRQ_INDEX, 3, &[10, -1]);
    assert_eq!(w, vec![28, VFIO_IRQ_SET_DATA_EVENTFD | VFIO_IRQ_SET_ACTION_TRIGGER, 2, 3, 2, 10, u32::MAX]);
    let w = irq_set_none(VFIO_PCI_MSIX_IRQ_INDEX, 0, 0);
    assert_eq!(w, vec![20, VFIO_IRQ_SET_DATA_NONE | VFIO_IRQ_SET_ACTION_TRIGGER, 2, 0, 0]);
}

#[test]
fn vfio_bdf_normalization() {
    assert_eq!(normalize_bdf("0000:03:00.0").ok().as_deref(), Some("0000:03:00.0"));
    assert_eq!(normalize_bdf("03:00.1").ok().as_deref(), Some("0000:03:00.1"));
    assert_eq!(normalize_bdf("ABCD:EF:1f.7").ok().as_deref(), Some("abcd:ef:1f.7"));
    for bad in [
        "",
        "0000:03:00",
        "0000:03:00.8",
        "0000:03:20.0",
        "0000-03:00.0",
        "../../../etc",
        "0000:03:00.0/..",
        "0000:g3:00.0",
        "0000:03:00.0 ",
        "éé:03:00.0",
        "0000:03:0é.0",
    ] {
        assert!(matches!(normalize_bdf(bad), Err(Error::InvalidArgument(_))), "{bad:?} accepted");
    }
}

// ---- open: the container/group sequence ----

/// Order of the kernel interface in an open: container, API, extension, group, status, set
/// container, set IOMMU, device fd, device info, BAR0, mmap, config space, MSI-X.
const OPEN_ORDER: [SysOp; 12] = [
    SysOp::Open,
    SysOp::GetApiVersion,
    SysOp::CheckExtension,
    SysOp::GroupGetStatus,
    SysOp::GroupSetContainer,
    SysOp::SetIommu,
    SysOp::GroupGetDeviceFd,
    SysOp::DeviceGetInfo,
    SysOp::DeviceGetRegionInfo,
    SysOp::Mmap,
    SysOp::Pread,
    SysOp::DeviceGetIrqInfo,
];

#[test]
fn vfio_open_follows_the_container_sequence() {
    let t = twin();
    let d = open(&t);
    let c = t.calls();
    use SysOp::*;
    let p: Vec<usize> = OPEN_ORDER.iter().map(|&o| pos(&c, o)).collect();
    assert!(p.windows(2).all(|w| w[0] < w[1]), "order {p:?} in {c:?}");
    assert_eq!(t.count(Open), 2, "container and group");
    assert_eq!(t.count(CheckExtension), 1, "type-1 v2 found first");
    assert_eq!(d.iommu_type(), VFIO_TYPE1v2_IOMMU);
    assert_eq!(t.iommu_type(), Some(VFIO_TYPE1v2_IOMMU));
    assert_eq!(d.iommu_group(), 7);
    assert_eq!(d.bdf(), BDF);
    assert!(d.can_reset());
    let i = d.info();
    assert_eq!(i.name, BDF);
    assert_eq!(i.bar0_size, 64 * 1024);
    assert_eq!(i.num_irqs, 8);
    assert_eq!((i.mac, i.ipv4), (None, None));
    assert_eq!(t.open_fds(), 3);
    assert_eq!(t.live_mmaps(), 1);
    assert!(t.group_container_set());
}

#[test]
fn vfio_open_short_address_and_addresses() {
    let t = twin();
    let d = VfioDevice::open_with(t.clone(), "03:00.0")
        .map(|d| d.with_addresses(Some(0x0011_2233_4455), Some(0x0a00_0001)));
    let d = d.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(d.info().name, BDF);
    assert_eq!(d.info().mac, Some(0x0011_2233_4455));
    assert_eq!(d.info().ipv4, Some(0x0a00_0001));
}

#[test]
fn vfio_open_falls_back_to_type1() {
    let t = twin_with(|c| c.type1v2 = false);
    let d = open(&t);
    assert_eq!(d.iommu_type(), VFIO_TYPE1_IOMMU);
    assert_eq!(t.iommu_type(), Some(VFIO_TYPE1_IOMMU));
    assert_eq!(t.count(SysOp::CheckExtension), 2);
}

#[test]
fn vfio_open_enables_bus_master() {
    let t = twin();
    assert_eq!(t.config_read16(PCI_COMMAND), Some(0));
    let _d = open(&t);
    let cmd = t.config_read16(PCI_COMMAND).unwrap_or(0);
    assert_eq!(cmd & (PCI_COMMAND_MASTER | PCI_COMMAND_MEMORY), 0x6, "command {cmd:#x}");
    assert_eq!(t.count(SysOp::Pwrite), 1);
    drop(_d);
    // vfio-pci clears bus mastering when the device is released.
    assert_eq!(t.config_read16(PCI_COMMAND).unwrap_or(0) & PCI_COMMAND_MASTER, 0);
}

#[test]
fn vfio_open_raises_the_max_read_request_size() {
    // Device Control: relaxed ordering on, max payload 128, max read request 512
    let t = twin_with(|c| c.pcie_devctl = Some(0x2010));
    let d = open(&t);
    assert_eq!(t.config_read16(0x48), Some(0x5010), "max read request not 4096, other bits kept");
    // after a reset the kernel restores config space as it saved it: raised again
    assert_eq!(t.config_write16(0x48, 0x2010), Some(()));
    d.reset().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(t.config_read16(0x48), Some(0x5010));
}

#[test]
fn vfio_open_with_max_read_request_already_4096_writes_nothing_more() {
    let t = twin_with(|c| c.pcie_devctl = Some(0x5010));
    let _d = open(&t);
    assert_eq!(t.count(SysOp::Pwrite), 1, "only the command register");
    assert_eq!(t.config_read16(0x48), Some(0x5010));
}

#[test]
fn vfio_open_survives_a_capability_list_that_loops() {
    // a capability that is not PCI Express and points at itself: the search ends, nothing written
    let t = twin_with(|c| c.pcie_devctl = Some(0x2010));
    assert_eq!(t.config_write16(0x40, 0x4005), Some(())); // id 5 (MSI), next 0x40
    let _d = open(&t);
    assert_eq!(t.config_read16(0x48), Some(0x2010));
    assert_eq!(t.count(SysOp::Pwrite), 1);
}

#[test]
fn vfio_open_leaves_command_register_alone_when_already_set() {
    let t = twin();
    assert_eq!(t.config_write16(PCI_COMMAND, 0x0006), Some(()));
    let _d = open(&t);
    assert_eq!(t.count(SysOp::Pwrite), 0);
}

#[test]
fn vfio_open_twice_is_busy_and_second_open_after_close_works() {
    let t = twin();
    let d = open(&t);
    let e = open_err(&t);
    assert!(matches!(e, Error::Busy(ref s) if s.contains("another process")), "{e}");
    assert_eq!(e.errno(), libc::EBUSY);
    // The failed open released its own container and nothing of the first device.
    assert_eq!(t.open_fds(), 3);
    drop(d);
    assert_clean(&t);
    let d2 = open(&t);
    assert_eq!(d2.info().bar0_size, 64 * 1024);
}

// ---- open: error paths ----

#[test]
fn vfio_open_rejects_bad_address_without_syscalls() {
    let t = twin();
    let e = VfioDevice::open_with(t.clone(), "../../../../dev/mem").err();
    assert!(matches!(e, Some(Error::InvalidArgument(_))));
    assert!(t.calls().is_empty());
}

#[test]
fn vfio_open_missing_function() {
    let t = twin_with(|c| c.sysfs_device = false);
    let e = open_err(&t);
    assert_eq!(sys_errno(&e), Some(libc::ENOENT));
    assert!(e.to_string().contains("no PCI function 0000:03:00.0"), "{e}");
    assert_clean(&t);
}

#[test]
fn vfio_open_missing_iommu_group_link() {
    let t = twin_with(|c| c.iommu_group_link = false);
    let e = open_err(&t);
    assert_eq!(sys_errno(&e), Some(libc::ENOENT));
    assert!(e.to_string().contains("no IOMMU group"), "{e}");
    assert_eq!(t.count(SysOp::Open), 0);
    assert_clean(&t);
}

#[test]
fn vfio_open_function_bound_elsewhere_or_unbound() {
    let t = twin_with(|c| c.driver = Some("hematite".into()));
    let e = open_err(&t);
    assert!(matches!(e, Error::Busy(ref s) if s.contains("\"hematite\"")), "{e}");
    assert_clean(&t);

    let t = twin_with(|c| c.driver = None);
    let e = open_err(&t);
    assert!(matches!(e, Error::Device(ref s) if s.contains("not bound")), "{e}");
    assert_clean(&t);
}

#[test]
fn vfio_open_no_vfio_module() {
    let t = twin();
    t.fail_open(VFIO_CONTAINER_PATH, libc::ENOENT);
    let e = open_err(&t);
    assert_eq!(sys_errno(&e), Some(libc::ENOENT));
    assert!(e.to_string().contains("modprobe vfio-pci"), "{e}");
    assert_clean(&t);
}

#[test]
fn vfio_open_group_permission_denied_and_busy() {
    let t = twin();
    t.fail_open("/dev/vfio/7", libc::EACCES);
    let e = open_err(&t);
    assert_eq!(sys_errno(&e), Some(libc::EACCES));
    assert!(e.to_string().contains("/dev/vfio/7") && e.to_string().contains("permission"), "{e}");
    assert_clean(&t);

    let t = twin();
    t.fail_open("/dev/vfio/7", libc::EBUSY);
    assert!(matches!(open_err(&t), Error::Busy(_)));
    assert_clean(&t);
}

#[test]
fn vfio_open_wrong_api_version() {
    let t = twin_with(|c| c.api_version = 1);
    let e = open_err(&t);
    assert!(matches!(e, Error::NotSupported(ref s) if s.contains("version 1")), "{e}");
    assert_clean(&t);
}

#[test]
fn vfio_open_without_type1_iommu() {
    let t = twin_with(|c| {
        c.type1 = false;
        c.type1v2 = false;
    });
    let e = open_err(&t);
    assert!(matches!(e, Error::NotSupported(ref s) if s.contains("type-1")), "{e}");
    assert_eq!(t.count(SysOp::CheckExtension), 2);
    assert_clean(&t);
}

#[test]
fn vfio_open_non_viable_group() {
    let t = twin_with(|c| c.viable = false);
    let e = open_err(&t);
    assert!(matches!(e, Error::Device(ref s) if s.contains("not viable")), "{e}");
    assert_eq!(t.count(SysOp::GroupSetContainer), 0);
    assert_clean(&t);
}

#[test]
fn vfio_open_bar_not_mappable_or_missing() {
    let t = twin_with(|c| c.bar0_mmap = false);
    let e = open_err(&t);
    assert!(matches!(e, Error::NotSupported(ref s) if s.contains("mmap")), "{e}");
    assert_clean(&t);

    let t = twin_with(|c| c.bar0_size = 0);
    let e = open_err(&t);
    assert!(matches!(e, Error::Device(ref s) if s.contains("no BAR0")), "{e}");
    assert_clean(&t);

    // Reported but too large for the twin to back: mmap fails with ENOMEM.
    let t = twin_with(|c| c.bar0_size = 1 << 31);
    let e = open_err(&t);
    assert_eq!(sys_errno(&e), Some(libc::ENOMEM));
    assert_clean(&t);
}

#[test]
fn vfio_open_every_failing_call_is_reported_and_cleaned_up() {
    // the ordered calls, and the group link and config-space write whose place is not pinned
    for op in [SysOp::ReadLink, SysOp::Pwrite].into_iter().chain(OPEN_ORDER) {
        let t = twin();
        t.fail(op, libc::EIO);
        let e = open_err(&t);
        assert_eq!(sys_errno(&e), Some(libc::EIO), "{op:?}: {e}");
        t.clear_failures();
        assert_clean(&t);
    }
}

#[test]
fn vfio_open_failure_cleanup_order() {
    let t = twin();
    t.fail(SysOp::DeviceGetIrqInfo, libc::EIO);
    let _ = open_err(&t);
    let c = t.calls();
    use SysOp::*;
    let munmap = pos(&c, Munmap);
    let unset = pos(&c, GroupUnsetContainer);
    assert!(munmap > pos(&c, DeviceGetIrqInfo));
    // device fd closed before the group is detached; group fd then container fd last.
    let closes: Vec<usize> = c.iter().enumerate().filter(|(_, &o)| o == Close).map(|(i, _)| i).collect();
    assert_eq!(closes.len(), 3);
    assert!(munmap < closes[0] && closes[0] < unset && unset < closes[1]);
}

#[test]
fn vfio_teardown_failures_do_not_leak_the_rest() {
    let t = twin();
    let d = open(&t);
    t.fail(SysOp::Munmap, libc::EINVAL);
    let e = d.close().err();
    assert_eq!(e.as_ref().and_then(sys_errno), Some(libc::EINVAL));
    // Everything else was still released.
    assert_eq!(t.open_fds(), 0);
    assert!(!t.group_container_set());
}

// ---- MMIO ----

#[test]
fn vfio_mmio_through_the_mapping() {
    let t = twin();
    let d = open(&t);
    assert_eq!(d.read32(0).ok(), Some(0x484D_5445), "identity register");
    assert_eq!(d.read32(4).ok(), Some(1));
    d.write32(0xc, 0xdead_beef).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(t.bar_read32(0xc), Some(0xdead_beef), "the device sees the store");
    assert_eq!(d.read32(0xc).ok(), Some(0xdead_beef));
    // A register the device changes.
    assert_eq!(t.bar_write32(0x110, 42), Some(()));
    assert_eq!(d.read32(0x110).ok(), Some(42));
    let last = 64 * 1024 - 4;
    d.write32(last, 7).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(d.read32(last).ok(), Some(7));
    // No syscalls for MMIO.
    t.clear_calls();
    let _ = d.read32(0);
    assert!(t.calls().is_empty());
}

#[test]
fn vfio_mmio_bad_offsets_are_invalid_arguments() {
    let t = twin();
    let d = open(&t);
    for off in [1, 2, 3, 0x1002, 64 * 1024, 64 * 1024 - 2, 64 * 1024 + 4, u64::MAX, u64::MAX - 3, 1 << 40] {
        assert!(matches!(d.read32(off), Err(Error::InvalidArgument(_))), "read {off:#x}");
        assert!(matches!(d.write32(off, 1), Err(Error::InvalidArgument(_))), "write {off:#x}");
    }
}

#[test]
fn vfio_mmio_from_several_threads() {
    let t = twin();
    let d: Arc<dyn Device> = Arc::new(open(&t));
    let hs: Vec<_> = (0..4u32)
        .map(|i| {
            let d = d.clone();
            std::thread::spawn(move || {
                for k in 0..1000u32 {
                    let off = 0x2000 + 4 * u64::from(i);
                    d.write32(off, k).map_err(|e| e.to_string())?;
                    if d.read32(off).map_err(|e| e.to_string())? != k {
                        return Err("lost write".to_string());
                    }
                }
                Ok(())
            })
        })
        .collect();
    for h in hs {
        assert_eq!(h.join().ok(), Some(Ok(())));
    }
}

// ---- DMA ----

#[test]
fn vfio_dma_map_and_unmap() {
    let t = twin();
    let d = open(&t);
    d.dma_map(0x10_0000, 0x7f00_0000_0000, 4 * PAGE, true).unwrap_or_else(|e| panic!("{e}"));
    d.dma_map(0x20_0000, 0x7f00_1000_0000, PAGE, false).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        t.dma_mappings(),
        vec![
            TwinDma { iova: 0x10_0000, vaddr: 0x7f00_0000_0000, size: 4 * PAGE, read: true, write: true },
            TwinDma { iova: 0x20_0000, vaddr: 0x7f00_1000_0000, size: PAGE, read: true, write: false },
        ]
    );
    assert_eq!(d.dma_mappings().len(), 2);
    d.dma_unmap(0x10_0000, 4 * PAGE).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(t.dma_mappings().len(), 1);
    assert_eq!(
        d.dma_mappings(),
        vec![DmaMapping { iova: 0x20_0000, vaddr: 0x7f00_1000_0000, len: PAGE, writable: false }]
    );
    // The range can be mapped again.
    d.dma_map(0x10_0000, 0x7f00_2000_0000, PAGE, true).unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn vfio_dma_misaligned_or_empty_is_rejected_before_the_kernel() {
    let t = twin();
    let d = open(&t);
    t.clear_calls();
    for (iova, vaddr, len) in [
        (0x1000 + 1, 0x10_0000, PAGE),
        (0x1000, 0x10_0000 + 8, PAGE),
        (0x1000, 0x10_0000, PAGE + 1),
        (0x1000, 0x10_0000, 0),
        (u64::MAX - PAGE + 1, 0x10_0000, 2 * PAGE),
        (0x1000, u64::MAX - PAGE + 1, 2 * PAGE),
    ] {
        let r = d.dma_map(iova, vaddr, len, true);
        assert!(matches!(r, Err(Error::InvalidArgument(_))), "{iova:#x} {vaddr:#x} {len:#x}: {r:?}");
    }
    assert_eq!(t.count(SysOp::IommuMapDma), 0);
}

#[test]
fn vfio_dma_overlaps_are_refused() {
    let (t, d) = open_with_mapping();
    for (iova, len) in [
        (0x10_0000, PAGE),
        (0x10_0000 + PAGE, PAGE),
        (0x10_0000 - PAGE, 2 * PAGE),
        (0x10_0000 + 3 * PAGE, 2 * PAGE),
        (0x0f_0000, 0x10_0000),
    ] {
        let r = d.dma_map(iova, 0x6000_0000, len, true);
        assert!(matches!(r, Err(Error::InvalidArgument(ref s)) if s.contains("overlaps")), "{iova:#x}+{len:#x}: {r:?}");
    }
    assert_eq!(t.count(SysOp::IommuMapDma), 0);
    // Adjacent on both sides is fine.
    d.dma_map(0x10_0000 - PAGE, 0x6000_0000, PAGE, true).unwrap_or_else(|e| panic!("{e}"));
    d.dma_map(0x10_0000 + 4 * PAGE, 0x6000_1000, PAGE, true).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(t.dma_mappings().len(), 3);
}

#[test]
fn vfio_dma_unknown_or_partial_unmap_is_refused() {
    let (t, d) = open_with_mapping();
    let r = d.dma_unmap(0x30_0000, PAGE);
    assert!(matches!(r, Err(Error::InvalidArgument(ref s)) if s.contains("no DMA mapping")), "{r:?}");
    let r = d.dma_unmap(0x10_0000 + PAGE, PAGE);
    assert!(matches!(r, Err(Error::InvalidArgument(_))), "{r:?}");
    let r = d.dma_unmap(0x10_0000, PAGE);
    assert!(matches!(r, Err(Error::InvalidArgument(ref s)) if s.contains("not 0x1000")), "{r:?}");
    let r = d.dma_unmap(0x10_0000, 0);
    assert!(matches!(r, Err(Error::InvalidArgument(_))), "{r:?}");
    assert_eq!(t.count(SysOp::IommuUnmapDma), 0);
    assert_eq!(t.dma_mappings().len(), 1);
}

#[test]
fn vfio_dma_kernel_failures() {
    let t = twin();
    let d = open(&t);
    t.fail_once(SysOp::IommuMapDma, libc::ENOMEM);
    let e = d.dma_map(0x10_0000, 0x5000_0000, PAGE, true).err();
    assert_eq!(e.as_ref().and_then(sys_errno), Some(libc::ENOMEM));
    assert!(e.map(|e| e.to_string()).unwrap_or_default().contains("ulimit -l"));
    assert!(d.dma_mappings().is_empty(), "a failed map is not recorded");
    d.dma_map(0x10_0000, 0x5000_0000, PAGE, true).unwrap_or_else(|e| panic!("retry: {e}"));

    t.fail_once(SysOp::IommuUnmapDma, libc::EIO);
    let e = d.dma_unmap(0x10_0000, PAGE).err();
    assert_eq!(e.as_ref().and_then(sys_errno), Some(libc::EIO));
    assert_eq!(d.dma_mappings().len(), 1, "still mapped after a failed unmap");
    d.dma_unmap(0x10_0000, PAGE).unwrap_or_else(|e| panic!("retry: {e}"));
    assert!(t.dma_mappings().is_empty());

    // The kernel's own checks: vaddr 0 (EFAULT) and the memlock limit (ENOMEM).
    let e = d.dma_map(0x10_0000, 0, PAGE, true).err();
    assert_eq!(e.as_ref().and_then(sys_errno), Some(libc::EFAULT));
    let t = twin_with(|c| c.memlock_limit = Some(2 * PAGE));
    let d = open(&t);
    d.dma_map(0, 0x5000_0000, 2 * PAGE, true).unwrap_or_else(|e| panic!("{e}"));
    let e = d.dma_map(0x10_0000, 0x6000_0000, PAGE, true).err();
    assert_eq!(e.as_ref().and_then(sys_errno), Some(libc::ENOMEM));
}

#[test]
fn vfio_dma_unmap_reporting_fewer_bytes_is_a_device_error() {
    // A twin whose IOMMU lost the mapping (e.g. another user of the container unmapped it):
    // simulate by unmapping behind the backend's back.
    let t = twin();
    let d = open(&t);
    d.dma_map(0x10_0000, 0x5000_0000, PAGE, true).unwrap_or_else(|e| panic!("{e}"));
    let c = d.h.container.unwrap_or(-1);
    let mut u = vfio_iommu_type1_dma_unmap { argsz: 24, flags: 0, iova: 0x10_0000, size: PAGE };
    assert!(t.iommu_unmap_dma(c, &mut u).is_ok());
    let r = d.dma_unmap(0x10_0000, PAGE);
    assert!(matches!(r, Err(Error::Device(ref s)) if s.contains("removed 0x0 bytes")), "{r:?}");
    assert!(d.dma_mappings().is_empty());
}

#[test]
fn vfio_drop_unmaps_everything_in_order() {
    let t = twin();
    let d = open(&t);
    for i in 0..5u64 {
        d.dma_map(i * 0x10_0000, 0x5000_0000 + i * 0x10_0000, 2 * PAGE, i % 2 == 0).unwrap_or_else(|e| panic!("{e}"));
    }
    d.set_irq(1, Some(40)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(t.dma_mappings().len(), 5);
    t.clear_calls();
    drop(d);
    assert_clean(&t);
    let c = t.calls();
    use SysOp::*;
    assert_eq!(t.count(IommuUnmapDma), 5);
    let irq_off = pos(&c, DeviceSetIrqs);
    let munmap = pos(&c, Munmap);
    let first_unmap = pos(&c, IommuUnmapDma);
    let last_unmap = rpos(&c, IommuUnmapDma);
    let closes: Vec<usize> = c.iter().enumerate().filter(|(_, &o)| o == Close).map(|(i, _)| i).collect();
    let unset = pos(&c, GroupUnsetContainer);
    assert!(irq_off < munmap && munmap < first_unmap && last_unmap < closes[0], "{c:?}");
    assert!(closes[0] < unset && unset < closes[1] && closes[1] < closes[2], "{c:?}");
}

#[test]
fn vfio_close_reports_ok_and_releases() {
    let t = twin();
    let d = open(&t);
    d.dma_map(0, 0x5000_0000, PAGE, true).unwrap_or_else(|e| panic!("{e}"));
    assert!(d.close().is_ok());
    assert_clean(&t);
}

// ---- interrupts ----

#[test]
fn vfio_irq_routing() {
    let t = twin();
    let d = open(&t);
    assert_eq!(d.info().num_irqs, 8);
    // First route enables MSI-X with every vector.
    d.set_irq(3, Some(50)).unwrap_or_else(|e| panic!("{e}"));
    assert!(t.msix_enabled());
    assert_eq!(t.msix_nvec(), 8);
    let mut want = vec![None; 8];
    want[3] = Some(50);
    assert_eq!(t.msix_routes(), want);
    // Later vectors, above the first one, still work (NORESIZE kernels).
    d.set_irq(7, Some(51)).unwrap_or_else(|e| panic!("{e}"));
    d.set_irq(0, Some(52)).unwrap_or_else(|e| panic!("{e}"));
    want[7] = Some(51);
    want[0] = Some(52);
    assert_eq!(t.msix_routes(), want);
    assert_eq!(d.irq_routes(), want);
    // Rerouting a vector.
    d.set_irq(3, Some(53)).unwrap_or_else(|e| panic!("{e}"));
    want[3] = Some(53);
    assert_eq!(t.msix_routes(), want);
    // Loopback: the kernel fires the routed vectors.
    let dev = d.h.device.unwrap_or(-1);
    assert!(t.device_set_irqs(dev, &irq_set_none(VFIO_PCI_MSIX_IRQ_INDEX, 0, 8)).is_ok());
    assert_eq!(t.msix_fired(), vec![1, 0, 0, 1, 0, 0, 0, 1]);
}

#[test]
fn vfio_irq_disconnect() {
    let t = twin();
    let d = open(&t);
    // Disconnecting while MSI-X is off needs no kernel call.
    d.set_irq(2, None).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(t.count(SysOp::DeviceSetIrqs), 0);
    d.set_irq(2, Some(60)).unwrap_or_else(|e| panic!("{e}"));
    d.set_irq(5, Some(61)).unwrap_or_else(|e| panic!("{e}"));
    d.set_irq(2, None).unwrap_or_else(|e| panic!("{e}"));
    assert!(t.msix_enabled());
    assert_eq!(t.msix_routes()[2], None);
    assert_eq!(t.msix_routes()[5], Some(61));
    // The last route going disables MSI-X.
    d.set_irq(5, None).unwrap_or_else(|e| panic!("{e}"));
    assert!(!t.msix_enabled());
    assert!(d.irq_routes().iter().all(Option::is_none));
    // And it can be enabled again.
    d.set_irq(6, Some(62)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(t.msix_routes()[6], Some(62));
}

#[test]
fn vfio_irq_bad_arguments() {
    let t = twin();
    let d = open(&t);
    for v in [8, 9, u32::MAX] {
        let r = d.set_irq(v, Some(50));
        assert!(matches!(r, Err(Error::InvalidArgument(ref s)) if s.contains("out of range")), "{v}: {r:?}");
        assert!(matches!(d.set_irq(v, None), Err(Error::InvalidArgument(_))));
    }
    assert!(matches!(d.set_irq(0, Some(-1)), Err(Error::InvalidArgument(_))));
    assert!(matches!(d.set_irq(0, Some(-7)), Err(Error::InvalidArgument(_))));
    assert_eq!(t.count(SysOp::DeviceSetIrqs), 0);
}

#[test]
fn vfio_irq_kernel_failure_keeps_state() {
    let t = twin();
    let d = open(&t);
    t.fail_once(SysOp::DeviceSetIrqs, libc::EINVAL);
    let e = d.set_irq(1, Some(50)).err();
    assert_eq!(e.as_ref().and_then(sys_errno), Some(libc::EINVAL));
    assert!(d.irq_routes().iter().all(Option::is_none));
    assert!(!t.msix_enabled());
    d.set_irq(1, Some(50)).unwrap_or_else(|e| panic!("{e}"));
    t.fail_once(SysOp::DeviceSetIrqs, libc::EBADF);
    assert!(d.set_irq(1, None).is_err());
    assert_eq!(d.irq_routes()[1], Some(50));
}

#[test]
fn vfio_irq_function_without_msix() {
    let t = twin_with(|c| c.msix_vectors = 0);
    let d = open(&t);
    assert_eq!(d.info().num_irqs, 0);
    assert!(matches!(d.set_irq(0, Some(50)), Err(Error::InvalidArgument(_))));
}

// ---- reset ----

#[test]
fn vfio_reset() {
    let t = twin();
    let d = open(&t);
    d.write32(0xc, 0x1234).unwrap_or_else(|e| panic!("{e}"));
    d.dma_map(0, 0x5000_0000, PAGE, true).unwrap_or_else(|e| panic!("{e}"));
    // Something cleared bus mastering: reset puts it back.
    assert_eq!(t.config_write16(PCI_COMMAND, PCI_COMMAND_MEMORY), Some(()));
    d.reset().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(t.resets(), 1);
    assert_eq!(d.read32(0xc).ok(), Some(0), "registers back to reset values");
    assert_eq!(d.read32(0).ok(), Some(0x484D_5445));
    assert_eq!(t.config_read16(PCI_COMMAND).unwrap_or(0) & PCI_COMMAND_MASTER, PCI_COMMAND_MASTER);
    assert_eq!(t.dma_mappings().len(), 1, "DMA mappings stay");
}

#[test]
fn vfio_reset_unsupported_or_failing() {
    let t = twin_with(|c| c.reset = false);
    let d = open(&t);
    assert!(!d.can_reset());
    assert!(matches!(d.reset(), Err(Error::NotSupported(_))));
    assert_eq!(t.count(SysOp::DeviceReset), 0);

    let t = twin();
    let d = open(&t);
    t.fail_once(SysOp::DeviceReset, libc::EAGAIN);
    assert_eq!(d.reset().err().as_ref().and_then(sys_errno), Some(libc::EAGAIN));
    assert_eq!(t.resets(), 0);
}

#[test]
fn vfio_device_is_a_send_sync_trait_object() {
    fn is_send_sync<T: Send + Sync>() {}
    is_send_sync::<VfioDevice<TwinSys>>();
    is_send_sync::<VfioDevice<LinuxSys>>();
    let t = twin();
    let d: Box<dyn Device> = Box::new(open(&t));
    assert_eq!(d.info().num_irqs, 8);
    drop(d);
    assert_clean(&t);
}

// ---- the twin's kernel rules, directly ----

struct Raw {
    t: TwinSys,
    container: RawFd,
    group: RawFd,
}

fn raw() -> Raw {
    let t = twin();
    let container = t.open(Path::new("/dev/vfio/vfio")).unwrap_or(-1);
    let group = t.open(Path::new("/dev/vfio/7")).unwrap_or(-1);
    assert!(container >= 0 && group >= 0);
    Raw { t, container, group }
}

fn errno_of<T: std::fmt::Debug>(r: io::Result<T>) -> i32 {
    match r {
        Ok(v) => panic!("expected an error, got {v:?}"),
        Err(e) => e.raw_os_error().unwrap_or(0),
    }
}

fn map(iova: u64, vaddr: u64, size: u64) -> vfio_iommu_type1_dma_map {
    vfio_iommu_type1_dma_map { argsz: 32, flags: VFIO_DMA_MAP_FLAG_READ | VFIO_DMA_MAP_FLAG_WRITE, vaddr, iova, size }
}

fn unmap(iova: u64, size: u64) -> vfio_iommu_type1_dma_unmap {
    vfio_iommu_type1_dma_unmap { argsz: 24, flags: 0, iova, size }
}

#[test]
fn vfio_twin_ordering_rules() {
    let r = raw();
    let (t, c, g) = (&r.t, r.container, r.group);
    // MAP_DMA before SET_IOMMU.
    assert_eq!(errno_of(t.iommu_map_dma(c, &map(0, 0x1000, PAGE))), libc::EINVAL);
    // SET_IOMMU before a group is attached.
    assert_eq!(errno_of(t.set_iommu(c, VFIO_TYPE1v2_IOMMU)), libc::EINVAL);
    // GET_DEVICE_FD before the container has an IOMMU.
    let name = CString::new(BDF).unwrap_or_default();
    assert_eq!(errno_of(t.group_get_device_fd(g, &name)), libc::EINVAL);
    assert!(t.group_set_container(g, c).is_ok());
    assert_eq!(errno_of(t.group_set_container(g, c)), libc::EINVAL, "already set");
    assert_eq!(errno_of(t.group_get_device_fd(g, &name)), libc::EINVAL);
    assert_eq!(errno_of(t.set_iommu(c, VFIO_SPAPR_TCE_IOMMU)), libc::ENODEV);
    assert!(t.set_iommu(c, VFIO_TYPE1v2_IOMMU).is_ok());
    assert_eq!(errno_of(t.set_iommu(c, VFIO_TYPE1v2_IOMMU)), libc::EINVAL, "already set");
    let other = CString::new("0000:04:00.0").unwrap_or_default();
    assert_eq!(errno_of(t.group_get_device_fd(g, &other)), libc::ENODEV);
    let dev = t.group_get_device_fd(g, &name).unwrap_or(-1);
    assert!(dev >= 0);
    // Wrong kinds of descriptor.
    assert_eq!(errno_of(t.get_api_version(g)), libc::ENOTTY);
    assert_eq!(errno_of(t.group_set_container(g, dev)), libc::EINVAL);
    assert_eq!(errno_of(t.device_reset(c)), libc::ENOTTY);
    assert_eq!(errno_of(t.close(12345)), libc::EBADF);
    // The group cannot leave the container while the device is open.
    assert_eq!(errno_of(t.group_unset_container(g)), libc::EBUSY);
    assert!(t.close(dev).is_ok());
    assert!(t.group_unset_container(g).is_ok());
    assert_eq!(errno_of(t.group_unset_container(g)), libc::EINVAL);
    assert_eq!(t.iommu_type(), None);
    // A second open of the group.
    assert_eq!(errno_of(t.open(Path::new("/dev/vfio/7"))), libc::EBUSY);
    assert_eq!(errno_of(t.open(Path::new("/dev/vfio/8"))), libc::ENOENT);
    assert!(t.close(g).is_ok() && t.close(c).is_ok());
    assert_eq!(t.open_fds(), 0);
}

fn raw_ready() -> (Raw, RawFd) {
    let r = raw();
    assert!(r.t.group_set_container(r.group, r.container).is_ok());
    assert!(r.t.set_iommu(r.container, VFIO_TYPE1v2_IOMMU).is_ok());
    let name = CString::new(BDF).unwrap_or_default();
    let dev = r.t.group_get_device_fd(r.group, &name).unwrap_or(-1);
    assert!(dev >= 0);
    (r, dev)
}

#[test]
fn vfio_twin_dma_rules() {
    let (r, _dev) = raw_ready();
    let (t, c) = (&r.t, r.container);
    assert!(t.iommu_map_dma(c, &map(0x10_0000, 0x5000_0000, 4 * PAGE)).is_ok());
    assert_eq!(errno_of(t.iommu_map_dma(c, &map(0x10_2000, 0x6000_0000, 4 * PAGE))), libc::EEXIST);
    assert_eq!(errno_of(t.iommu_map_dma(c, &map(0x0f_f000, 0x6000_0000, 2 * PAGE))), libc::EEXIST);
    assert_eq!(errno_of(t.iommu_map_dma(c, &map(0x20_0001, 0x6000_0000, PAGE))), libc::EINVAL);
    assert_eq!(errno_of(t.iommu_map_dma(c, &map(0x20_0000, 0x6000_0000, 0))), libc::EINVAL);
    assert_eq!(errno_of(t.iommu_map_dma(c, &map(u64::MAX - 0xfff, 0x6000_0000, 2 * PAGE))), libc::EINVAL);
    let mut m = map(0x20_0000, 0x6000_0000, PAGE);
    m.flags = 0;
    assert_eq!(errno_of(t.iommu_map_dma(c, &m)), libc::EINVAL, "no READ/WRITE");
    m.flags = 0x100 | VFIO_DMA_MAP_FLAG_READ;
    assert_eq!(errno_of(t.iommu_map_dma(c, &m)), libc::EINVAL, "unknown flag");
    let mut m = map(0x20_0000, 0x6000_0000, PAGE);
    m.argsz = 16;
    assert_eq!(errno_of(t.iommu_map_dma(c, &m)), libc::EINVAL, "short argsz");

    // Unmapping an unknown range succeeds and unmaps 0 bytes, as the kernel does.
    let mut u = unmap(0x40_0000, PAGE);
    assert!(t.iommu_unmap_dma(c, &mut u).is_ok());
    assert_eq!(u.size, 0);
    // Type-1 v2: cutting a mapping is refused.
    assert_eq!(errno_of(t.iommu_unmap_dma(c, &mut unmap(0x10_1000, PAGE))), libc::EINVAL);
    assert_eq!(errno_of(t.iommu_unmap_dma(c, &mut unmap(0x10_0000, PAGE))), libc::EINVAL);
    assert_eq!(errno_of(t.iommu_unmap_dma(c, &mut unmap(0x10_0000, 0))), libc::EINVAL);
    assert_eq!(errno_of(t.iommu_unmap_dma(c, &mut unmap(0x10_0800, PAGE))), libc::EINVAL);
    // A covering range removes every mapping inside it.
    assert!(t.iommu_map_dma(c, &map(0x20_0000, 0x6000_0000, PAGE)).is_ok());
    let mut u = unmap(0, 0x100_0000);
    assert!(t.iommu_unmap_dma(c, &mut u).is_ok());
    assert_eq!(u.size, 5 * PAGE);
    assert!(t.dma_mappings().is_empty());
}

#[test]
fn vfio_twin_last_group_leaving_drops_mappings() {
    let (r, dev) = raw_ready();
    let t = &r.t;
    assert!(t.iommu_map_dma(r.container, &map(0, 0x5000_0000, PAGE)).is_ok());
    // Closing the group with the device open keeps the container attached...
    assert!(t.close(r.group).is_ok());
    assert!(t.group_container_set());
    assert_eq!(t.dma_mappings().len(), 1);
    // ... until the device goes.
    assert!(t.close(dev).is_ok());
    assert!(!t.group_container_set());
    assert!(t.dma_mappings().is_empty());
    assert!(t.close(r.container).is_ok());
    assert_eq!(t.open_fds(), 0);
}

#[test]
fn vfio_twin_set_irqs_validation() {
    let (r, dev) = raw_ready();
    let t = &r.t;
    let msix = VFIO_PCI_MSIX_IRQ_INDEX;
    let trig = VFIO_IRQ_SET_DATA_EVENTFD | VFIO_IRQ_SET_ACTION_TRIGGER;
    // Malformed headers.
    assert_eq!(errno_of(t.device_set_irqs(dev, &[20, trig, msix])), libc::EFAULT);
    assert_eq!(errno_of(t.device_set_irqs(dev, &[16, trig, msix, 0, 0])), libc::EINVAL);
    assert_eq!(errno_of(t.device_set_irqs(dev, &[40, trig, msix, 0, 1, 5])), libc::EFAULT);
    assert_eq!(errno_of(t.device_set_irqs(dev, &[24, trig | 0x100, msix, 0, 1, 5])), libc::EINVAL);
    let two_types = VFIO_IRQ_SET_DATA_EVENTFD | VFIO_IRQ_SET_DATA_BOOL | VFIO_IRQ_SET_ACTION_TRIGGER;
    assert_eq!(errno_of(t.device_set_irqs(dev, &[24, two_types, msix, 0, 1, 5])), libc::EINVAL);
    let two_actions = VFIO_IRQ_SET_DATA_EVENTFD | VFIO_IRQ_SET_ACTION_MASK | VFIO_IRQ_SET_ACTION_TRIGGER;
    assert_eq!(errno_of(t.device_set_irqs(dev, &[24, two_actions, msix, 0, 1, 5])), libc::EINVAL);
    assert_eq!(errno_of(t.device_set_irqs(dev, &[24, trig, 5, 0, 1, 5])), libc::EINVAL, "index");
    // Range and data size.
    assert_eq!(errno_of(t.device_set_irqs(dev, &irq_set_eventfds(msix, 8, &[5]))), libc::EINVAL);
    assert_eq!(errno_of(t.device_set_irqs(dev, &irq_set_eventfds(msix, 7, &[5, 6]))), libc::EINVAL);
    assert_eq!(errno_of(t.device_set_irqs(dev, &[24, trig, msix, 0, 2, 5])), libc::EINVAL, "data too short");
    // Disabling, or firing, while disabled.
    assert_eq!(errno_of(t.device_set_irqs(dev, &irq_set_none(msix, 0, 0))), libc::EINVAL);
    assert_eq!(errno_of(t.device_set_irqs(dev, &irq_set_none(msix, 0, 1))), libc::EINVAL);
    // MASK is not supported for MSI-X; other indexes are not emulated.
    let mask = VFIO_IRQ_SET_DATA_NONE | VFIO_IRQ_SET_ACTION_MASK;
    assert_eq!(errno_of(t.device_set_irqs(dev, &[20, mask, msix, 0, 1])), libc::ENOTTY);
    assert_eq!(errno_of(t.device_set_irqs(dev, &irq_set_eventfds(VFIO_PCI_INTX_IRQ_INDEX, 0, &[5]))), libc::ENOTTY);
    // NORESIZE: enabled with 2 vectors, vector 5 cannot be added.
    assert!(t.device_set_irqs(dev, &irq_set_eventfds(msix, 0, &[5, 6])).is_ok());
    assert_eq!(t.msix_nvec(), 2);
    assert_eq!(errno_of(t.device_set_irqs(dev, &irq_set_eventfds(msix, 5, &[7]))), libc::EINVAL);
    assert!(t.device_set_irqs(dev, &irq_set_eventfds(msix, 1, &[-1])).is_ok());
    assert_eq!(&t.msix_routes()[..2], &[Some(5), None]);
    // DATA_BOOL loopback fires only the selected, routed vectors.
    let b = VFIO_IRQ_SET_DATA_BOOL | VFIO_IRQ_SET_ACTION_TRIGGER;
    assert!(t.device_set_irqs(dev, &[24, b, msix, 0, 2, 0x0101]).is_ok());
    assert_eq!(&t.msix_fired()[..2], &[1, 0]);
    assert!(t.device_set_irqs(dev, &irq_set_none(msix, 0, 0)).is_ok());
    assert!(!t.msix_enabled());
}

#[test]
fn vfio_twin_device_queries() {
    let (r, dev) = raw_ready();
    let t = &r.t;
    let mut i = vfio_device_info { argsz: 8, ..Default::default() };
    assert_eq!(errno_of(t.device_get_info(dev, &mut i)), libc::EINVAL);
    let mut ri = vfio_region_info { argsz: 32, index: VFIO_PCI_NUM_REGIONS, ..Default::default() };
    assert_eq!(errno_of(t.device_get_region_info(dev, &mut ri)), libc::EINVAL);
    ri.index = VFIO_PCI_CONFIG_REGION_INDEX;
    assert!(t.device_get_region_info(dev, &mut ri).is_ok());
    assert_eq!((ri.size, ri.offset), (256, 7u64 << 40));
    ri.index = 1;
    assert!(t.device_get_region_info(dev, &mut ri).is_ok());
    assert_eq!((ri.size, ri.flags), (0, 0));
    let mut ii = vfio_irq_info { argsz: 16, index: VFIO_PCI_NUM_IRQS, ..Default::default() };
    assert_eq!(errno_of(t.device_get_irq_info(dev, &mut ii)), libc::EINVAL);
    // Config space: IDs read-only, reads clipped at the end.
    let mut b = [0u8; 4];
    assert_eq!(t.pread(dev, &mut b, 7u64 << 40).ok(), Some(4));
    assert_eq!(b, [0x34, 0x12, 0x4d, 0x48]);
    assert_eq!(t.pwrite(dev, &[0, 0], 7u64 << 40).ok(), Some(2));
    assert_eq!(t.config_read16(0), Some(0x1234));
    assert_eq!(t.pread(dev, &mut b, (7u64 << 40) + 254).ok(), Some(2));
    assert_eq!(errno_of(t.pread(dev, &mut b, (7u64 << 40) + 256)), libc::EINVAL);
    // BAR0 through pread/pwrite.
    assert_eq!(t.pwrite(dev, &9u32.to_le_bytes(), 0xc).ok(), Some(4));
    assert_eq!(t.bar_read32(0xc), Some(9));
    assert_eq!(errno_of(t.pread(dev, &mut b, 0xe)), libc::EINVAL);
    // mmap rules.
    assert_eq!(errno_of(t.mmap(dev, 4096, 7u64 << 40)), libc::EINVAL);
    assert_eq!(errno_of(t.mmap(dev, 128 * 1024, 0)), libc::EINVAL);
    assert_eq!(errno_of(t.mmap(r.group, 4096, 0)), libc::ENODEV);
    let reg = t.mmap(dev, 4096, 0);
    assert!(reg.is_ok());
    if let Ok(reg) = reg {
        assert_eq!(reg.len(), 4096);
        assert_eq!(reg.read32(0xc), Some(9));
        assert!(t.munmap(reg).is_ok());
    }
    let foreign = MmioRegion::from_memory(Arc::from(vec![AtomicU32::new(0)]), 4);
    assert_eq!(errno_of(t.munmap(foreign)), libc::EINVAL);
}

#[test]
fn vfio_twin_failure_injection() {
    let t = twin();
    t.fail_once(SysOp::Open, libc::EMFILE);
    assert_eq!(errno_of(t.open(Path::new("/dev/vfio/vfio"))), libc::EMFILE);
    assert!(t.open(Path::new("/dev/vfio/vfio")).is_ok());
    t.fail(SysOp::ReadLink, libc::EACCES);
    assert_eq!(errno_of(t.read_link(Path::new("/sys/bus/pci/devices/0000:03:00.0"))), libc::EACCES);
    assert_eq!(errno_of(t.read_link(Path::new("/sys/bus/pci/devices/0000:03:00.0"))), libc::EACCES);
    t.clear_failures();
    assert!(t.read_link(Path::new("/sys/bus/pci/devices/0000:03:00.0/iommu_group")).is_ok());
    assert_eq!(t.calls().first(), Some(&SysOp::Open));
}

#[test]
fn vfio_twin_huge_bar_does_not_allocate() {
    let t = twin_with(|c| c.bar0_size = u64::MAX);
    assert_eq!(t.bar_read32(0), None);
    assert_eq!(t.bar_write32(0, 1), None);
}

// ---- LinuxSys (no root, no hardware) ----

#[test]
fn vfio_linux_open_of_a_nonexistent_function_fails_clearly() {
    let e = VfioDevice::open("0000:ff:1f.7").err();
    let Some(e) = e else { panic!("opened a nonexistent PCI function") };
    assert_eq!(sys_errno(&e), Some(libc::ENOENT), "{e}");
    let s = e.to_string();
    assert!(s.contains("no PCI function 0000:ff:1f.7") && s.contains("/sys/bus/pci/devices/0000:ff:1f.7"), "{s}");
    assert!(matches!(VfioDevice::open("not-an-address"), Err(Error::InvalidArgument(_))));
}

#[test]
fn vfio_linux_sys_basic_calls() {
    let s = LinuxSys;
    assert!(s.page_size() >= 4096 && s.page_size().is_power_of_two());
    assert_eq!(errno_of(s.open(Path::new("/nonexistent/vfio/thing"))), libc::ENOENT);
    assert_eq!(errno_of(s.close(-1)), libc::EBADF);
    assert_eq!(errno_of(s.get_api_version(-1)), libc::EBADF);
    assert_eq!(errno_of(s.device_set_irqs(-1, &[20, 0, 0])), libc::EINVAL, "short buffer refused before the kernel");
    assert_eq!(errno_of(s.device_set_irqs(-1, &[24, 0, 0, 0, 0])), libc::EINVAL, "argsz past the buffer");
    assert_eq!(errno_of(s.mmap(-1, 4096, u64::MAX)), libc::EOVERFLOW);
    assert!(s.read_link(Path::new("/nonexistent-link")).is_err());
}

#[test]
fn vfio_linux_sys_mmap_and_pread_on_a_file() {
    // A regular file stands in for the device fd: pread/pwrite and a shared mapping through
    // which MmioRegion's volatile accesses go.
    let path = std::env::temp_dir().join(format!("hm-vfio-test-{}", std::process::id()));
    let f = std::fs::File::create(&path).and_then(|f| f.set_len(8192));
    assert!(f.is_ok(), "{f:?}");
    let s = LinuxSys;
    let fd = s.open(&path).unwrap_or(-1);
    assert!(fd >= 0);
    assert_eq!(s.pwrite(fd, &0xa5a5_0001u32.to_le_bytes(), 4096 + 8).ok(), Some(4));
    let reg = s.mmap(fd, 4096, 4096);
    assert!(reg.is_ok(), "{reg:?}");
    if let Ok(reg) = reg {
        assert_eq!(reg.len(), 4096);
        assert_eq!(reg.read32(8), Some(0xa5a5_0001));
        assert_eq!(reg.write32(12, 0x0102_0304), Some(()));
        assert_eq!(reg.read32(4096), None);
        assert_eq!(reg.read32(2), None);
        assert_eq!(reg.write32(u64::MAX, 0), None);
        assert!(s.munmap(reg).is_ok());
    }
    let mut b = [0u8; 4];
    assert_eq!(s.pread(fd, &mut b, 4096 + 12).ok(), Some(4));
    assert_eq!(u32::from_le_bytes(b), 0x0102_0304);
    assert!(s.close(fd).is_ok());
    let _ = std::fs::remove_file(&path);
}
