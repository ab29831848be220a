//! Reading and writing packet captures.
//!
//! [`read_frames`] reads classic pcap (both byte orders, microsecond and nanosecond magic) and
//! pcapng (section header blocks of either byte order, interface description, enhanced and simple
//! packet blocks; other blocks are skipped), decompressing `.xz` input transparently (detected by
//! the xz magic bytes). Only link type 1 (Ethernet) is accepted. [`write_pcap`] writes classic
//! pcap (µs timestamps, link type 1, snaplen 65535).

use core::fmt;
use std::io::Write;
use std::path::Path;

/// Capture read / write errors.
#[derive(Debug)]
pub enum CaptureError {
    /// Underlying I/O error.
    Io(std::io::Error),
    /// The `.xz` stream could not be decompressed.
    Xz(String),
    /// Neither a pcap nor a pcapng file (first 4 bytes).
    UnknownFormat(u32),
    /// The file ended inside a header, block or record.
    Truncated {
        /// Byte offset of the incomplete structure.
        offset: usize,
    },
    /// A structurally invalid pcapng block.
    BadBlock {
        /// Byte offset of the block.
        offset: usize,
        /// What is wrong.
        what: &'static str,
    },
    /// Link type other than 1 (Ethernet).
    LinkType(u32),
    /// A packet block references an interface that was not described.
    UnknownInterface(u32),
    /// A frame longer than the pcap snaplen (65535) was given to the writer.
    FrameTooLong(usize),
}

impl fmt::Display for CaptureError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CaptureError::Io(e) => write!(f, "I/O error: {e}"),
            CaptureError::Xz(e) => write!(f, "xz decompression failed: {e}"),
            CaptureError::UnknownFormat(m) => write!(f, "not a pcap/pcapng file (magic {m:#010x})"),
            CaptureError::Truncated { offset } => write!(f, "capture truncated at offset {offset}"),
            CaptureError::BadBlock { offset, what } => write!(f, "bad pcapng block at {offset}: {what}"),
            CaptureError::LinkType(l) => write!(f, "link type {l} is not Ethernet (1)"),
            CaptureError::UnknownInterface(i) => write!(f, "packet references undefined interface {i}"),
            CaptureError::FrameTooLong(n) => write!(f, "frame of {n} bytes exceeds snaplen 65535"),
        }
    }
}

impl std::error::Error for CaptureError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CaptureError::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl From<std::io::Error> for CaptureError {
    fn from(e: std::io::Error) -> Self {
        CaptureError::Io(e)
    }
}

const XZ_MAGIC: [u8; 6] = [0xFD, b'7', b'z', b'X', b'Z', 0x00];
const PCAP_US: u32 = 0xA1B2_C3D4;
const PCAP_NS: u32 = 0xA1B2_3C4D;
const PCAPNG_SHB: u32 = 0x0A0D_0D0A;
const PCAPNG_BOM: u32 = 0x1A2B_3C4D;
const LINKTYPE_ETHERNET: u32 = 1;
/// Snap length written by [`write_pcap`].
pub const SNAPLEN: u32 = 65535;

/// Reads every frame of a pcap / pcapng file (optionally xz-compressed).
pub fn read_frames(path: &Path) -> Result<Vec<Vec<u8>>, CaptureError> {
    let data = std::fs::read(path)?;
    read_frames_from_bytes(&data)
}

/// In-memory variant of [`read_frames`].
pub fn read_frames_from_bytes(data: &[u8]) -> Result<Vec<Vec<u8>>, CaptureError> {
    if data.starts_with(&XZ_MAGIC) {
        let mut out = Vec::new();
        let mut rd = std::io::BufReader::new(data);
        lzma_rs::xz_decompress(&mut rd, &mut out).map_err(|e| CaptureError::Xz(format!("{e:?}")))?;
        return parse_capture(&out);
    }
    parse_capture(data)
}

#[derive(Clone, Copy)]
struct End(bool); // true = big endian

impl End {
    fn u16(self, d: &[u8], i: usize) -> Option<u16> {
        let b: [u8; 2] = d.get(i..i + 2)?.try_into().ok()?;
        Some(if self.0 { u16::from_be_bytes(b) } else { u16::from_le_bytes(b) })
    }
    fn u32(self, d: &[u8], i: usize) -> Option<u32> {
        let b: [u8; 4] = d.get(i..i + 4)?.try_into().ok()?;
        Some(if self.0 { u32::from_be_bytes(b) } else { u32::from_le_bytes(b) })
    }
}

fn parse_capture(d: &[u8]) -> Result<Vec<Vec<u8>>, CaptureError> {
    let m = End(false).u32(d, 0).ok_or(CaptureError::Truncated { offset: 0 })?;
    match m {
        PCAP_US | PCAP_NS => parse_pcap(d, End(false)),
        _ if m.swap_bytes() == PCAP_US || m.swap_bytes() == PCAP_NS => parse_pcap(d, End(true)),
        PCAPNG_SHB => parse_pcapng(d),
        _ => Err(CaptureError::UnknownFormat(u32::from_be_bytes([d[0], d[1], d[2], d[3]]))),
    }
}

fn parse_pcap(d: &[u8], e: End) -> Result<Vec<Vec<u8>>, CaptureError> {
    let trunc = |offset| CaptureError::Truncated { offset };
    let network = e.u32(d, 20).ok_or(trunc(0))?;
    if network & 0xFFFF != LINKTYPE_ETHERNET {
        return Err(CaptureError::LinkType(network & 0xFFFF));
    }
    let mut frames = Vec::new();
    let mut off = 24;
    while off < d.len() {
        let incl = e.u32(d, off + 8).ok_or(trunc(off))? as usize;
        let start = off + 16;
        let data = d.get(start..start.saturating_add(incl)).ok_or(trunc(off))?;
        frames.push(data.to_vec());
        off = start + incl;
    }
    Ok(frames)
}

fn parse_pcapng(d: &[u8]) -> Result<Vec<Vec<u8>>, CaptureError> {
    let mut frames = Vec::new();
    let mut off = 0usize;
    let mut e = End(false);
    // Link types of the current section's interfaces.
    let mut ifaces: Vec<u32> = Vec::new();
    let bad = |offset, what| CaptureError::BadBlock { offset, what };
    while off < d.len() {
        let raw_type = End(false).u32(d, off).ok_or(CaptureError::Truncated { offset: off })?;
        if raw_type == PCAPNG_SHB {
            // The byte-order magic decides the endianness of this section.
            let bom = End(false).u32(d, off + 8).ok_or(CaptureError::Truncated { offset: off })?;
            e = if bom == PCAPNG_BOM {
                End(false)
            } else if bom.swap_bytes() == PCAPNG_BOM {
                End(true)
            } else {
                return Err(bad(off, "bad byte-order magic"));
            };
            ifaces.clear();
        }
        let btype = e.u32(d, off).ok_or(CaptureError::Truncated { offset: off })?;
        let blen = e.u32(d, off + 4).ok_or(CaptureError::Truncated { offset: off })? as usize;
        if blen < 12 || blen % 4 != 0 {
            return Err(bad(off, "block length not a multiple of 4 or below 12"));
        }
        let block = d.get(off..off.saturating_add(blen)).ok_or(CaptureError::Truncated { offset: off })?;
        if e.u32(block, blen - 4) != Some(blen as u32) {
            return Err(bad(off, "trailing block length mismatch"));
        }
        let body = &block[8..blen - 4];
        match btype {
            1 => {
                // Interface description block.
                let lt = e.u16(body, 0).ok_or(bad(off, "short IDB"))? as u32;
                if lt != LINKTYPE_ETHERNET {
                    return Err(CaptureError::LinkType(lt));
                }
                ifaces.push(lt);
            }
            6 => {
                // Enhanced packet block.
                let ifc = e.u32(body, 0).ok_or(bad(off, "short EPB"))?;
                if ifc as usize >= ifaces.len() {
                    return Err(CaptureError::UnknownInterface(ifc));
                }
                let cap = e.u32(body, 12).ok_or(bad(off, "short EPB"))? as usize;
                let data = body.get(20..20usize.saturating_add(cap)).ok_or(bad(off, "EPB data beyond block"))?;
                frames.push(data.to_vec());
            }
            3 => {
                // Simple packet block: captured length = min(original length, room in block).
                if ifaces.is_empty() {
                    return Err(CaptureError::UnknownInterface(0));
                }
                let orig = e.u32(body, 0).ok_or(bad(off, "short SPB"))? as usize;
                let room = body.len() - 4;
                frames.push(body[4..4 + orig.min(room)].to_vec());
            }
            _ => {}
        }
        off += blen;
    }
    Ok(frames)
}

/// Serialises `frames` as a classic pcap file (µs timestamps 0.000000, 0.000001, …; link type 1;
/// snaplen 65535; little-endian).
pub fn write_pcap_to_vec(frames: &[Vec<u8>]) -> Result<Vec<u8>, CaptureError> {
    let mut v = Vec::with_capacity(24 + frames.iter().map(|f| f.len() + 16).sum::<usize>());
    v.extend_from_slice(&PCAP_US.to_le_bytes());
    v.extend_from_slice(&2u16.to_le_bytes());
    v.extend_from_slice(&4u16.to_le_bytes());
    v.extend_from_slice(&0i32.to_le_bytes());
    v.extend_from_slice(&0u32.to_le_bytes());
    v.extend_from_slice(&SNAPLEN.to_le_bytes());
    v.extend_from_slice(&LINKTYPE_ETHERNET.to_le_bytes());
    for (i, f) in frames.iter().enumerate() {
        if f.len() > SNAPLEN as usize {
            return Err(CaptureError::FrameTooLong(f.len()));
        }
        let ts = i as u64;
        v.extend_from_slice(&((ts / 1_000_000) as u32).to_le_bytes());
        v.extend_from_slice(&((ts % 1_000_000) as u32).to_le_bytes());
        v.extend_from_slice(&(f.len() as u32).to_le_bytes());
        v.extend_from_slice(&(f.len() as u32).to_le_bytes());
        v.extend_from_slice(f);
    }
    Ok(v)
}

/// Writes `frames` to `path` as a classic pcap file (see [`write_pcap_to_vec`]).
pub fn write_pcap(path: &Path, frames: &[Vec<u8>]) -> Result<(), CaptureError> {
    let v = write_pcap_to_vec(frames)?;
    let mut f = std::fs::File::create(path)?;
    f.write_all(&v)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames() -> Vec<Vec<u8>> {
        vec![vec![1, 2, 3], vec![], (0..200u8).collect()]
    }

    #[test]
    fn pcap_roundtrip_and_byte_orders() {
        let v = write_pcap_to_vec(&frames()).unwrap();
        assert_eq!(read_frames_from_bytes(&v).unwrap(), frames());
        // Big-endian, nanosecond variant.
        let mut be = Vec::new();
        be.extend_from_slice(&PCAP_NS.to_be_bytes());
        be.extend_from_slice(&[0, 2, 0, 4]);
        be.extend_from_slice(&[0; 8]);
        be.extend_from_slice(&SNAPLEN.to_be_bytes());
        be.extend_from_slice(&1u32.to_be_bytes());
        for f in frames() {
            be.extend_from_slice(&[0; 8]);
            be.extend_from_slice(&(f.len() as u32).to_be_bytes());
            be.extend_from_slice(&(f.len() as u32).to_be_bytes());
            be.extend_from_slice(&f);
        }
        assert_eq!(read_frames_from_bytes(&be).unwrap(), frames());
        // Truncation is an error, not a panic.
        for cut in 0..v.len() - 1 {
            let _ = read_frames_from_bytes(&v[..cut]);
        }
        assert!(read_frames_from_bytes(&v[..v.len() - 1]).is_err());
    }

    #[test]
    fn pcap_linktype() {
        let mut v = write_pcap_to_vec(&frames()).unwrap();
        v[20] = 113; // Linux cooked
        assert!(matches!(read_frames_from_bytes(&v), Err(CaptureError::LinkType(113))));
    }

    fn block(be: bool, t: u32, body: &[u8]) -> Vec<u8> {
        let mut body = body.to_vec();
        while body.len() % 4 != 0 {
            body.push(0);
        }
        let len = (body.len() + 12) as u32;
        let w = |x: u32| if be { x.to_be_bytes() } else { x.to_le_bytes() };
        let mut b = w(t).to_vec();
        b.extend_from_slice(&w(len));
        b.extend_from_slice(&body);
        b.extend_from_slice(&w(len));
        b
    }

    fn pcapng(be: bool, linktype: u16) -> Vec<u8> {
        let w32 = |x: u32| if be { x.to_be_bytes() } else { x.to_le_bytes() };
        let w16 = |x: u16| if be { x.to_be_bytes() } else { x.to_le_bytes() };
        let mut shb = w32(PCAPNG_BOM).to_vec();
        shb.extend_from_slice(&w16(1));
        shb.extend_from_slice(&w16(0));
        shb.extend_from_slice(&[0xFF; 8]);
        let mut v = block(be, PCAPNG_SHB, &shb);
        let mut idb = w16(linktype).to_vec();
        idb.extend_from_slice(&[0, 0]);
        idb.extend_from_slice(&w32(65535));
        v.extend(block(be, 1, &idb));
        v.extend(block(be, 5, &[1, 2, 3, 4])); // interface statistics: skipped
        for f in frames() {
            let mut epb = w32(0).to_vec();
            epb.extend_from_slice(&[0; 8]);
            epb.extend_from_slice(&w32(f.len() as u32));
            epb.extend_from_slice(&w32(f.len() as u32));
            epb.extend_from_slice(&f);
            v.extend(block(be, 6, &epb));
        }
        let mut spb = w32(5).to_vec();
        spb.extend_from_slice(&[9, 8, 7, 6, 5]);
        v.extend(block(be, 3, &spb));
        v
    }

    #[test]
    fn pcapng_both_orders() {
        let mut want = frames();
        want.push(vec![9, 8, 7, 6, 5]);
        for be in [false, true] {
            let v = pcapng(be, 1);
            assert_eq!(read_frames_from_bytes(&v).unwrap(), want, "be {be}");
            for cut in 0..v.len() {
                let _ = read_frames_from_bytes(&v[..cut]);
            }
            assert!(matches!(read_frames_from_bytes(&pcapng(be, 105)), Err(CaptureError::LinkType(105))));
        }
    }

    #[test]
    fn garbage_is_an_error() {
        assert!(read_frames_from_bytes(b"hello world").is_err());
        assert!(read_frames_from_bytes(&[]).is_err());
        assert!(read_frames_from_bytes(&XZ_MAGIC).is_err());
    }
}
