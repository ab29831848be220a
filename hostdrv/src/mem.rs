//! Host memory the device reaches by DMA: page-aligned buffers, and the page pins that turn
//! registrations into IOMMU windows (IOVA = virtual address).
//!
//! VFIO type-1 unmaps only whole mappings, and two registrations may share pages, so the driver
//! counts references per page and keeps its own list of windows: a page is mapped while any
//! registration uses it; unpinning a page that others still use splits the window around it.

use crate::device::Device;
use crate::{Error, Result};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// Page size of the IOMMU windows.
pub const PAGE: u64 = 4096;

/// Page reference counts and the windows currently mapped.
#[derive(Default)]
pub struct Pins {
    refs: HashMap<u64, u32>,
    /// Mapped windows: first page -> pages.
    windows: BTreeMap<u64, u64>,
}

impl Pins {
    /// Pages [first, first + n) of `[addr, addr + len)`.
    fn pages(addr: u64, len: u64) -> Result<(u64, u64)> {
        if len == 0 {
            return Err(Error::inval("empty DMA range"));
        }
        let end = addr.checked_add(len).ok_or_else(|| Error::inval("DMA range wraps"))?;
        let first = addr / PAGE;
        let last = (end - 1) / PAGE;
        Ok((first, last - first + 1))
    }

    fn mapped(&self, p: u64) -> bool {
        self.windows.range(..=p).next_back().is_some_and(|(s, c)| p < s + c)
    }

    /// Makes `[addr, addr + len)` reachable by the device (writable).
    pub fn pin(&mut self, dev: &dyn Device, addr: u64, len: u64) -> Result<()> {
        let (first, n) = Self::pages(addr, len)?;
        // runs of pages not mapped yet
        let mut runs: Vec<(u64, u64)> = Vec::new();
        for p in first..first + n {
            if !self.refs.contains_key(&p) && !self.mapped(p) {
                match runs.last_mut() {
                    Some((s, c)) if *s + *c == p => *c += 1,
                    _ => runs.push((p, 1)),
                }
            }
        }
        let mut done: Vec<(u64, u64)> = Vec::new();
        for (s, c) in &runs {
            if let Err(e) = dev.dma_map(s * PAGE, s * PAGE, c * PAGE, true) {
                for (s2, c2) in done {
                    let _ = dev.dma_unmap(s2 * PAGE, c2 * PAGE);
                    self.windows.remove(&s2);
                }
                return Err(e);
            }
            self.windows.insert(*s, *c);
            done.push((*s, *c));
        }
        for p in first..first + n {
            *self.refs.entry(p).or_insert(0) += 1;
        }
        Ok(())
    }

    /// Drops one reference to each page of `[addr, addr + len)`; pages nobody uses any more
    /// are unmapped before this returns.
    pub fn unpin(&mut self, dev: &dyn Device, addr: u64, len: u64) -> Result<()> {
        let (first, n) = Self::pages(addr, len)?;
        if (first..first + n).any(|p| !self.refs.contains_key(&p)) {
            return Err(Error::inval(format!("unpin of {addr:#x}+{len:#x}: not pinned")));
        }
        let mut freed = Vec::new();
        for p in first..first + n {
            let r = self.refs.get_mut(&p).unwrap();
            *r -= 1;
            if *r == 0 {
                self.refs.remove(&p);
                freed.push(p);
            }
        }
        // A window is unmapped once none of its pages is used. Splitting a window around pages
        // still in use would leave them unmapped for a moment (VFIO type-1 unmaps whole
        // mappings only, and mappings may not overlap), so a partly used window stays mapped;
        // its free pages are reachable only through MRs and rings, which no longer name them.
        let mut first_err = None;
        let mut done: Vec<u64> = Vec::new();
        for p in &freed {
            if let Some((s, c)) = self.windows.range(..=p).next_back().map(|(s, c)| (*s, *c)) {
                if *p < s + c && !done.contains(&s) && (s..s + c).all(|q| !self.refs.contains_key(&q)) {
                    done.push(s);
                    match dev.dma_unmap(s * PAGE, c * PAGE) {
                        Ok(()) => {
                            self.windows.remove(&s);
                        }
                        Err(e) => {
                            first_err.get_or_insert(e);
                        }
                    }
                }
            }
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Windows mapped now: (IOVA, length).
    pub fn windows(&self) -> Vec<(u64, u64)> {
        self.windows.iter().map(|(s, c)| (s * PAGE, c * PAGE)).collect()
    }

    /// Pages with at least one reference.
    pub fn pinned_pages(&self) -> usize {
        self.refs.len()
    }
}

/// Something that can unpin a range when a buffer goes away.
pub(crate) trait Unpin: Send + Sync {
    fn unpin(&self, addr: u64, len: u64);
}

/// A zeroed, page-aligned buffer the device can read and write (pinned while it lives).
pub struct DmaBuf {
    ptr: *mut u8,
    len: usize,
    owner: Arc<dyn Unpin>,
}

// SAFETY: the buffer is plain memory owned by this value; access goes through &self / &mut self
// methods or raw pointers the caller is responsible for.
unsafe impl Send for DmaBuf {}
// SAFETY: shared access only reads or writes through volatile copies of caller-checked ranges.
unsafe impl Sync for DmaBuf {}

impl DmaBuf {
    /// Allocates `len` bytes (rounded up to whole pages) and pins them through `owner`.
    pub(crate) fn new(len: usize, owner: Arc<dyn Unpin>, pin: impl FnOnce(u64, u64) -> Result<()>) -> Result<DmaBuf> {
        if len == 0 || len > (1 << 40) {
            return Err(Error::inval(format!("buffer of {len} bytes")));
        }
        let size = len.div_ceil(PAGE as usize) * PAGE as usize;
        let layout = std::alloc::Layout::from_size_align(size, PAGE as usize).map_err(|e| Error::inval(e.to_string()))?;
        // SAFETY: layout has a non-zero size.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        if ptr.is_null() {
            return Err(Error::Sys { what: format!("allocating {size} bytes"), err: std::io::Error::from_raw_os_error(libc::ENOMEM) });
        }
        if let Err(e) = pin(ptr as u64, size as u64) {
            // SAFETY: allocated above with this layout, not pinned.
            unsafe { std::alloc::dealloc(ptr, layout) };
            return Err(e);
        }
        Ok(DmaBuf { ptr, len: size, owner })
    }

    /// The buffer's address (= its IOVA).
    pub fn addr(&self) -> u64 {
        self.ptr as u64
    }

    /// Its length in bytes (whole pages).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Never empty; for clippy's sake.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn check(&self, off: usize, n: usize) -> Result<()> {
        if off.checked_add(n).is_none_or(|e| e > self.len) {
            return Err(Error::inval(format!("range {off}+{n} outside a {}-byte buffer", self.len)));
        }
        Ok(())
    }

    /// Copies `data` into the buffer at `off`.
    pub fn write(&self, off: usize, data: &[u8]) -> Result<()> {
        self.check(off, data.len())?;
        // SAFETY: the range is inside the allocation (checked); the device may access the same
        // bytes concurrently, which is the nature of DMA memory and is why the copy is byte-wise
        // and the bytes are never referenced as a Rust slice while shared.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.ptr.add(off), data.len()) };
        Ok(())
    }

    /// Copies bytes at `off` out of the buffer.
    pub fn read(&self, off: usize, out: &mut [u8]) -> Result<()> {
        self.check(off, out.len())?;
        // SAFETY: as in `write`.
        unsafe { std::ptr::copy_nonoverlapping(self.ptr.add(off), out.as_mut_ptr(), out.len()) };
        Ok(())
    }

    /// The bytes at `off..off + n`, as a new vector.
    pub fn to_vec(&self, off: usize, n: usize) -> Result<Vec<u8>> {
        let mut v = vec![0u8; n];
        self.read(off, &mut v)?;
        Ok(v)
    }

    /// Volatile 64-bit little-endian read at `off` (8-byte aligned): for words the device
    /// updates (CQE owner bits, atomics' results).
    pub fn read_u64(&self, off: usize) -> Result<u64> {
        self.check(off, 8)?;
        if off % 8 != 0 {
            return Err(Error::inval("unaligned u64 read"));
        }
        // SAFETY: in range and 8-byte aligned (the base is page aligned).
        Ok(u64::from_le(unsafe { std::ptr::read_volatile(self.ptr.add(off) as *const u64) }))
    }

    /// Raw pointer to the start (for code that hands the memory to others, e.g. a verbs user).
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr
    }
}

impl Drop for DmaBuf {
    fn drop(&mut self) {
        self.owner.unpin(self.ptr as u64, self.len as u64);
        let layout = std::alloc::Layout::from_size_align(self.len, PAGE as usize).expect("layout was valid at allocation");
        // SAFETY: allocated in `new` with this layout; the device can no longer reach it
        // (unpinned above).
        unsafe { std::alloc::dealloc(self.ptr, layout) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::DeviceInfo;
    use std::os::fd::RawFd;
    use std::sync::Mutex;

    /// Records mappings and refuses overlaps and unknown unmaps, as VFIO type-1 does.
    struct Iommu {
        info: DeviceInfo,
        maps: Mutex<Vec<(u64, u64)>>,
    }

    impl Device for Iommu {
        fn info(&self) -> &DeviceInfo {
            &self.info
        }
        fn read32(&self, _: u64) -> Result<u32> {
            Ok(0)
        }
        fn write32(&self, _: u64, _: u32) -> Result<()> {
            Ok(())
        }
        fn dma_map(&self, iova: u64, vaddr: u64, len: u64, _: bool) -> Result<()> {
            assert_eq!(iova, vaddr);
            let mut m = self.maps.lock().unwrap();
            if m.iter().any(|(a, l)| iova < a + l && *a < iova + len) {
                return Err(Error::inval("overlap"));
            }
            m.push((iova, len));
            Ok(())
        }
        fn dma_unmap(&self, iova: u64, len: u64) -> Result<()> {
            let mut m = self.maps.lock().unwrap();
            let n = m.len();
            m.retain(|w| *w != (iova, len));
            if m.len() == n {
                return Err(Error::inval("unknown unmap"));
            }
            Ok(())
        }
        fn set_irq(&self, _: u32, _: Option<RawFd>) -> Result<()> {
            Ok(())
        }
        fn reset(&self) -> Result<()> {
            Ok(())
        }
    }

    fn dev() -> Iommu {
        Iommu { info: DeviceInfo { name: "t".into(), bar0_size: 0, num_irqs: 0, mac: None, ipv4: None }, maps: Mutex::new(Vec::new()) }
    }

    fn covered(d: &Iommu, a: u64, len: u64) -> bool {
        let m = d.maps.lock().unwrap();
        (a / PAGE..(a + len - 1) / PAGE + 1).all(|p| m.iter().any(|(s, l)| p * PAGE >= *s && p * PAGE < s + l))
    }

    #[test]
    fn shared_pages_stay_mapped_until_the_last_user_goes() {
        let d = dev();
        let mut p = Pins::default();
        p.pin(&d, 0x10_0100, 0x2000).unwrap(); // pages 0x100..0x102
        p.pin(&d, 0x10_2000, 0x3000).unwrap(); // pages 0x102..0x104, 0x102 shared
        assert!(covered(&d, 0x10_0000, 0x5000));
        assert_eq!(p.pinned_pages(), 5);
        p.unpin(&d, 0x10_0100, 0x2000).unwrap();
        assert!(covered(&d, 0x10_2000, 0x3000), "the second registration's pages stay mapped");
        p.unpin(&d, 0x10_2000, 0x3000).unwrap();
        assert_eq!(p.pinned_pages(), 0);
        assert!(d.maps.lock().unwrap().is_empty(), "everything unmapped at the end");
        assert!(p.windows().is_empty());
    }

    #[test]
    fn bad_ranges_are_errors() {
        let d = dev();
        let mut p = Pins::default();
        assert!(p.pin(&d, 0x1000, 0).is_err());
        assert!(p.pin(&d, u64::MAX - 10, 100).is_err());
        assert!(p.unpin(&d, 0x5000, 0x1000).is_err(), "not pinned");
        p.pin(&d, 0x5000, 0x1000).unwrap();
        p.pin(&d, 0x5000, 0x1000).unwrap();
        p.unpin(&d, 0x5000, 0x1000).unwrap();
        assert!(covered(&d, 0x5000, 0x1000), "one reference left");
        p.unpin(&d, 0x5000, 0x1000).unwrap();
        assert!(p.unpin(&d, 0x5000, 0x1000).is_err());
    }

    #[test]
    fn a_page_in_a_partly_used_window_is_pinned_again_without_a_new_mapping() {
        let d = dev();
        let mut p = Pins::default();
        p.pin(&d, 0x20_0000, 0x3000).unwrap();
        p.pin(&d, 0x20_2000, 0x1000).unwrap();
        p.unpin(&d, 0x20_0000, 0x3000).unwrap(); // pages 0x200, 0x201 free, window stays
        p.pin(&d, 0x20_0000, 0x1000).unwrap(); // must not map an overlapping window
        assert_eq!(d.maps.lock().unwrap().len(), 1);
        p.unpin(&d, 0x20_0000, 0x1000).unwrap();
        p.unpin(&d, 0x20_2000, 0x1000).unwrap();
        assert!(d.maps.lock().unwrap().is_empty());
    }
}
