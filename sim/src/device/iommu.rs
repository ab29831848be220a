//! The IOMMU model: the client's DMA windows (IOVA -> client virtual address, writable or
//! not) and the client's memory (`/proc/PID/mem`), behind the engine's AXI4 master
//! ([`ClientMem`], the `ExtMem` of the engine's memory model). An access with any byte outside
//! the windows, or one that fails, is refused as a whole and counted (the engine sees SLVERR).

use crate::dma::ExtMem;
use std::fs::File;
use std::sync::{Arc, Mutex};


/// One DMA window.
#[derive(Debug, Clone, Copy)]
struct Window {
    iova: u64,
    vaddr: u64,
    len: u64,
    writable: bool,
}

/// The IOMMU: the client's DMA windows, and the client's memory.
#[derive(Default)]
pub(super) struct Iommu {
    /// `/proc/PID/mem` of the client, opened at HELLO while the client's pidfd showed it alive.
    /// The descriptor holds that process's address space itself, not its pid: once the process
    /// has exited every access fails, and a later process given the same pid (or the client's
    /// own next program after an `execve`) is never reached through it.
    pub(super) mem: Option<File>,
    maps: Vec<Window>,
    /// Refused accesses, over the process's lifetime (`STATS` d): the engine's DMA outside the
    /// client's windows, or to memory the living client does not have.
    pub(super) faults: u64,
    /// Accesses discarded because the client had gone: its process exited before the device
    /// noticed (its memory reads as empty), or the engine was finishing a register access
    /// after the windows were revoked (`gone`). Not the engine's fault: not counted in `faults`.
    pub(super) lost: u64,
    /// Set by `revoke` until the function reset that follows it is done.
    pub(super) gone: bool,
}

impl Iommu {
    /// `DMA_MAP`: 0, or minus EINVAL (empty, not 4 KiB aligned, wrapping) or EEXIST (overlaps
    /// a window).
    pub(super) fn map(&mut self, iova: u64, vaddr: u64, len: u64, wr: bool) -> i32 {
        if len == 0 || iova % 4096 != 0 || vaddr % 4096 != 0 || len % 4096 != 0 || iova.checked_add(len).is_none() {
            -libc::EINVAL
        } else if self.maps.iter().any(|w| iova < w.iova + w.len && w.iova < iova + len) {
            -libc::EEXIST
        } else {
            self.maps.push(Window { iova, vaddr, len, writable: wr });
            0
        }
    }

    /// `DMA_UNMAP` of the window (iova, len): 0, or minus ENOENT.
    pub(super) fn unmap(&mut self, iova: u64, len: u64) -> i32 {
        let before = self.maps.len();
        self.maps.retain(|w| !(w.iova == iova && w.len == len));
        if self.maps.len() == before {
            -libc::ENOENT
        } else {
            0
        }
    }

    /// Client loss: every window and the client's memory go (`gone` until the reset is done).
    pub(super) fn revoke(&mut self) {
        self.maps.clear();
        self.mem = None;
        self.gone = true;
    }

    /// A refused access: a fault, or lost when the client had gone (`exited`: its memory read
    /// or wrote nothing, which is what /proc/PID/mem does once the process has exited).
    fn refuse(&mut self, exited: bool) {
        if self.gone || exited {
            self.lost += 1;
        } else {
            self.faults += 1;
        }
    }

    /// Client VA pieces for [addr, addr + len), or None if any byte is not mapped (with write
    /// permission when `write`).
    fn translate(&self, addr: u64, len: u64, write: bool) -> Option<Vec<(u64, u64)>> {
        let mut out = Vec::new();
        let mut a = addr;
        let end = addr.checked_add(len)?;
        while a < end {
            let w = self.maps.iter().find(|w| a >= w.iova && a < w.iova + w.len && (!write || w.writable))?;
            let n = (w.iova + w.len).min(end) - a;
            out.push((w.vaddr + (a - w.iova), n));
            a += n;
        }
        Some(out)
    }
}

/// The client's memory as the engine's AXI4 master sees it.
pub(super) struct ClientMem(pub(super) Arc<Mutex<Iommu>>);

impl ExtMem for ClientMem {
    fn read(&mut self, addr: u64, buf: &mut [u8]) -> bool {
        use std::os::unix::fs::FileExt;
        let mut m = self.0.lock().unwrap();
        let Some(pieces) = m.translate(addr, buf.len() as u64, false) else {
            m.refuse(false);
            return false;
        };
        let mut off = 0;
        let mut ok = m.mem.is_some();
        let mut exited = false;
        for (va, n) in pieces {
            let n = n as usize;
            if !ok {
                break;
            }
            if let Err(e) = m.mem.as_ref().unwrap().read_exact_at(&mut buf[off..off + n], va) {
                ok = false;
                exited = e.kind() == std::io::ErrorKind::UnexpectedEof;
                break;
            }
            off += n;
        }
        if !ok {
            m.refuse(exited);
        }
        ok
    }

    fn write(&mut self, addr: u64, data: &[u8], mask: &[bool]) -> bool {
        let mut m = self.0.lock().unwrap();
        // runs of enabled bytes
        let mut runs = Vec::new();
        let mut i = 0;
        while i < data.len() {
            if !mask[i] {
                i += 1;
                continue;
            }
            let s = i;
            while i < data.len() && mask[i] {
                i += 1;
            }
            runs.push((s, i - s));
        }
        // every piece is translated before anything is written: the burst is refused as a whole
        let mut pieces = Vec::new();
        for (s, n) in runs {
            let Some(tr) = m.translate(addr + s as u64, n as u64, true) else {
                m.refuse(false);
                return false;
            };
            let mut off = s;
            for (va, len) in tr {
                pieces.push((off, va, len as usize));
                off += len as usize;
            }
        }
        if pieces.is_empty() {
            return true;
        }
        use std::os::unix::fs::FileExt;
        let r = match &m.mem {
            Some(f) => pieces.iter().try_for_each(|&(off, va, len)| f.write_all_at(&data[off..off + len], va)),
            None => Err(std::io::ErrorKind::NotFound.into()),
        };
        if let Err(e) = &r {
            m.refuse(e.kind() == std::io::ErrorKind::WriteZero);
        }
        r.is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(io: &Arc<Mutex<Iommu>>) -> (u64, u64) {
        let m = io.lock().unwrap();
        (m.faults, m.lost)
    }

    /// A refused access is a fault while the client lives, and lost once it has gone: after a
    /// revoke (until `gone` is cleared), or when its memory reads as empty (an exited process).
    #[test]
    fn refused_accesses_are_faults_unless_the_client_has_gone() {
        let buf = vec![0u8; 8192];
        let va = (buf.as_ptr() as u64 + 4095) & !4095;
        let io = Arc::new(Mutex::new(Iommu::default()));
        io.lock().unwrap().mem = Some(File::options().read(true).write(true).open("/proc/self/mem").unwrap());
        assert_eq!(io.lock().unwrap().map(0x10_0000, va, 4096, true), 0);
        let mut m = ClientMem(io.clone());
        let mut b = [0u8; 8];
        assert!(m.write(0x10_0000, &[7; 8], &[true; 8]));
        assert!(m.read(0x10_0000, &mut b) && b == [7; 8]);
        assert!(!m.write(0x20_0000, &[1; 8], &[true; 8]), "outside the windows");
        assert!(!m.read(0x20_0000, &mut b));
        assert_eq!(counts(&io), (2, 0));
        // the client has gone: the revoke, and the reset's drain after it
        io.lock().unwrap().revoke();
        assert!(!m.write(0x10_0000, &[1; 8], &[true; 8]));
        assert!(!m.read(0x10_0000, &mut b));
        assert_eq!(counts(&io), (2, 2));
        // the reset is done: a refused access is a fault again
        io.lock().unwrap().gone = false;
        assert!(!m.read(0x10_0000, &mut b));
        assert_eq!(counts(&io), (3, 2));
        // a mapped window whose memory reads as empty (what /proc/PID/mem of an exited process
        // does) is lost, not a fault
        let empty = std::env::temp_dir().join(format!("hm-iommu-empty-{}", std::process::id()));
        std::fs::write(&empty, b"").unwrap();
        io.lock().unwrap().mem = Some(File::open(&empty).unwrap());
        assert_eq!(io.lock().unwrap().map(0x10_0000, va, 4096, true), 0);
        assert!(!m.read(0x10_0000, &mut b));
        assert_eq!(counts(&io), (3, 3));
        let _ = std::fs::remove_file(&empty);
        drop(buf);
    }
}
