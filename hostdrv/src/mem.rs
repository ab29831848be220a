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

    /// Makes `[addr, addr + len)` reachable by the device (writable).
    pub fn pin(&mut self, dev: &dyn Device, addr: u64, len: u64) -> Result<()> {
        let (first, n) = Self::pages(addr, len)?;
        // runs of pages not mapped yet
        let mut runs: Vec<(u64, u64)> = Vec::new();
        for p in first..first + n {
            if !self.refs.contains_key(&p) {
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
        // windows that contain freed pages: unmap, then map back what is still used
        let mut affected: Vec<(u64, u64)> = Vec::new();
        for p in &freed {
            if let Some((s, c)) = self.windows.range(..=p).next_back().map(|(s, c)| (*s, *c)) {
                if *p < s + c && !affected.contains(&(s, c)) {
                    affected.push((s, c));
                }
            }
        }
        let mut first_err = None;
        for (s, c) in affected {
            self.windows.remove(&s);
            if let Err(e) = dev.dma_unmap(s * PAGE, c * PAGE) {
                first_err.get_or_insert(e);
            }
            let mut run: Option<(u64, u64)> = None;
            for p in s..s + c {
                if self.refs.contains_key(&p) {
                    run = match run {
                        Some((rs, rc)) => Some((rs, rc + 1)),
                        None => Some((p, 1)),
                    };
                } else if let Some((rs, rc)) = run.take() {
                    if let Err(e) = dev.dma_map(rs * PAGE, rs * PAGE, rc * PAGE, true) {
                        first_err.get_or_insert(e);
                    } else {
                        self.windows.insert(rs, rc);
                    }
                }
            }
            if let Some((rs, rc)) = run {
                if let Err(e) = dev.dma_map(rs * PAGE, rs * PAGE, rc * PAGE, true) {
                    first_err.get_or_insert(e);
                } else {
                    self.windows.insert(rs, rc);
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
