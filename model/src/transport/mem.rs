//! Sparse host memory and the memory-region (MR) table.
//!
//! Keys are `index << 8 | tag`: `index` (24 bits) selects the table slot, `tag` (8 bits) is
//! bumped every time the slot is re-registered so stale keys fail. L_Key and R_Key of an MR are
//! the same value.

use std::collections::BTreeMap;

const PAGE: u64 = 4096;

/// Sparse byte-addressable memory; never-written bytes read as zero. Addresses wrap at 2^64.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostMem {
    pages: BTreeMap<u64, Vec<u8>>,
}

impl HostMem {
    /// Empty memory.
    pub fn new() -> HostMem {
        HostMem::default()
    }

    /// Reads `len` bytes at `addr`.
    pub fn read(&self, addr: u64, len: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(len);
        let mut a = addr;
        while out.len() < len {
            let page = a / PAGE;
            let off = (a % PAGE) as usize;
            let n = (PAGE as usize - off).min(len - out.len());
            match self.pages.get(&page) {
                Some(p) => out.extend_from_slice(p.get(off..off + n).unwrap_or(&[])),
                None => out.resize(out.len() + n, 0),
            }
            a = a.wrapping_add(n as u64);
        }
        out
    }

    /// Writes `data` at `addr`.
    pub fn write(&mut self, addr: u64, data: &[u8]) {
        let mut a = addr;
        let mut rest = data;
        while !rest.is_empty() {
            let page = a / PAGE;
            let off = (a % PAGE) as usize;
            let n = (PAGE as usize - off).min(rest.len());
            let p = self.pages.entry(page).or_insert_with(|| vec![0; PAGE as usize]);
            if let Some(dst) = p.get_mut(off..off + n) {
                dst.copy_from_slice(&rest[..n]);
            }
            rest = &rest[n..];
            a = a.wrapping_add(n as u64);
        }
    }

    /// Reads a little-endian u64.
    pub fn read_u64(&self, addr: u64) -> u64 {
        let b = self.read(addr, 8);
        let mut a = [0u8; 8];
        a.copy_from_slice(&b[..8]);
        u64::from_le_bytes(a)
    }

    /// Writes a little-endian u64.
    pub fn write_u64(&mut self, addr: u64, v: u64) {
        self.write(addr, &v.to_le_bytes());
    }
}

/// Access rights of an MR.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MrAccess {
    /// Local writes (READ / atomic targets, receive buffers).
    pub local_write: bool,
    /// Remote RDMA READ.
    pub remote_read: bool,
    /// Remote RDMA WRITE.
    pub remote_write: bool,
    /// Remote atomics.
    pub remote_atomic: bool,
}

impl MrAccess {
    /// Every right.
    pub const ALL: MrAccess =
        MrAccess { local_write: true, remote_read: true, remote_write: true, remote_atomic: true };
    /// Local read only (no rights at all).
    pub const NONE: MrAccess =
        MrAccess { local_write: false, remote_read: false, remote_write: false, remote_atomic: false };
}

/// A registered memory region.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mr {
    /// Local key (`index << 8 | tag`).
    pub lkey: u32,
    /// Remote key (same value as `lkey`).
    pub rkey: u32,
    /// First address.
    pub base: u64,
    /// Length in bytes.
    pub len: u64,
    /// Rights.
    pub access: MrAccess,
    /// Protection domain.
    pub pd: u32,
}

/// What an access needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// Local read (always allowed).
    LocalRead,
    /// Local write.
    LocalWrite,
    /// Remote read.
    RemoteRead,
    /// Remote write.
    RemoteWrite,
    /// Remote atomic.
    RemoteAtomic,
}

/// Why an MR check failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemError {
    /// No valid MR for the key (unknown index, wrong tag, deregistered or invalidated).
    BadKey,
    /// MR belongs to another PD.
    Pd,
    /// Range outside the MR.
    Bounds,
    /// Access right missing.
    Access,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Slot {
    tag: u8,
    mr: Option<Mr>,
}

/// The MR table.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MrTable {
    slots: Vec<Slot>,
}

/// Most MRs per table (24-bit index).
pub const MAX_MRS: usize = 1 << 24;

impl MrTable {
    /// Empty table.
    pub fn new() -> MrTable {
        MrTable::default()
    }

    /// Registers `[base, base+len)`; `None` if the range wraps or the table is full.
    pub fn register(&mut self, pd: u32, base: u64, len: u64, access: MrAccess) -> Option<Mr> {
        base.checked_add(len)?;
        let idx = match self.slots.iter().position(|s| s.mr.is_none()) {
            Some(i) => i,
            None => {
                if self.slots.len() >= MAX_MRS {
                    return None;
                }
                self.slots.push(Slot { tag: 0, mr: None });
                self.slots.len() - 1
            }
        };
        let slot = self.slots.get_mut(idx)?;
        slot.tag = slot.tag.wrapping_add(1);
        let key = (idx as u32) << 8 | slot.tag as u32;
        let mr = Mr { lkey: key, rkey: key, base, len, access, pd };
        slot.mr = Some(mr);
        Some(mr)
    }

    fn slot(&self, key: u32) -> Option<&Mr> {
        let s = self.slots.get((key >> 8) as usize)?;
        if s.tag != (key & 0xFF) as u8 {
            return None;
        }
        s.mr.as_ref()
    }

    /// Looks up a valid MR by key.
    pub fn get(&self, key: u32) -> Option<Mr> {
        self.slot(key).copied()
    }

    /// Deregisters; false if the key names no valid MR.
    pub fn deregister(&mut self, key: u32) -> bool {
        if self.slot(key).is_none() {
            return false;
        }
        if let Some(s) = self.slots.get_mut((key >> 8) as usize) {
            s.mr = None;
        }
        true
    }

    /// Invalidates the MR named by `rkey` if it belongs to `pd` (SEND with invalidate).
    pub fn invalidate(&mut self, rkey: u32, pd: u32) -> Result<(), MemError> {
        let mr = self.slot(rkey).ok_or(MemError::BadKey)?;
        if mr.pd != pd {
            return Err(MemError::Pd);
        }
        self.deregister(rkey);
        Ok(())
    }

    /// Checks an access of `len` bytes at `addr` through `key` from PD `pd`.
    /// Check order: key, PD, access right, bounds.
    pub fn check(&self, key: u32, pd: u32, addr: u64, len: u64, need: Need) -> Result<Mr, MemError> {
        let mr = *self.slot(key).ok_or(MemError::BadKey)?;
        if mr.pd != pd {
            return Err(MemError::Pd);
        }
        let ok = match need {
            Need::LocalRead => true,
            Need::LocalWrite => mr.access.local_write,
            Need::RemoteRead => mr.access.remote_read,
            Need::RemoteWrite => mr.access.remote_write,
            Need::RemoteAtomic => mr.access.remote_atomic,
        };
        if !ok {
            return Err(MemError::Access);
        }
        let end = addr.checked_add(len).ok_or(MemError::Bounds)?;
        if addr < mr.base || end > mr.base.saturating_add(mr.len) {
            return Err(MemError::Bounds);
        }
        Ok(mr)
    }
}
