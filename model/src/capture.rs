//! Reading and writing packet captures.
//!
//! [`read_frames`] reads classic pcap (both byte orders, microsecond and nanosecond magic) and
//! pcapng (section header blocks of either byte order, interface description, enhanced and simple
//! packet blocks; other blocks are skipped), decompressing `.xz` input transparently (detected by
//! the xz magic bytes). Only link type 1 (Ethernet) is accepted.
//!
//! This is also the project's only capture writer, for every crate: [`PcapWriter`] writes classic
//! pcap (little-endian, link type 1, snaplen 65535) with microsecond or nanosecond timestamps,
//! all at once or frame by frame as they happen (the simulated device's `--pcap`);
//! [`write_pcap`] is the common case (µs stamps 0, 1, 2, … one per frame);
//! [`write_pcapng_to_vec`] / [`write_pcapng`] write pcapng with one named interface, nanosecond
//! timestamps, a snap length and a direction per frame (the switch model's port captures).

use core::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};

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
/// Snap length of the classic pcap files written by [`PcapWriter`] (and [`write_pcap`]).
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

// ---------------------------------------------------------------- writing

/// Timestamp unit of a classic pcap file, named by its magic number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TsUnit {
    /// Microseconds (magic `0xA1B2C3D4`).
    Micro,
    /// Nanoseconds (magic `0xA1B23C4D`).
    Nano,
}

impl TsUnit {
    fn magic(self) -> u32 {
        match self {
            TsUnit::Micro => PCAP_US,
            TsUnit::Nano => PCAP_NS,
        }
    }
    fn per_second(self) -> u64 {
        match self {
            TsUnit::Micro => 1_000_000,
            TsUnit::Nano => 1_000_000_000,
        }
    }
}

/// The project's classic pcap writer: little-endian, version 2.4, this-zone and sigfigs 0, snap
/// length [`SNAPLEN`], link type 1 (Ethernet), each frame written whole (captured length =
/// original length). [`PcapWriter::new`] writes the file header, [`PcapWriter::frame`] one
/// record; the stream can be written to as frames happen (the simulated device's `--pcap`) or
/// all at once ([`write_pcap`]).
pub struct PcapWriter<W: Write> {
    out: W,
    unit: TsUnit,
}

impl<W: Write> PcapWriter<W> {
    /// Writes the file header to `out`; timestamps are in `unit`.
    pub fn new(mut out: W, unit: TsUnit) -> Result<Self, CaptureError> {
        let mut h = [0u8; 24];
        h[0..4].copy_from_slice(&unit.magic().to_le_bytes());
        h[4..6].copy_from_slice(&2u16.to_le_bytes());
        h[6..8].copy_from_slice(&4u16.to_le_bytes());
        // 8..16: this-zone and sigfigs, 0
        h[16..20].copy_from_slice(&SNAPLEN.to_le_bytes());
        h[20..24].copy_from_slice(&LINKTYPE_ETHERNET.to_le_bytes());
        out.write_all(&h)?;
        Ok(PcapWriter { out, unit })
    }

    /// Appends `f` stamped `ts` (in the writer's unit; seconds and fraction split from it).
    /// A frame longer than [`SNAPLEN`] is refused (nothing is written).
    pub fn frame(&mut self, ts: u64, f: &[u8]) -> Result<(), CaptureError> {
        if f.len() > SNAPLEN as usize {
            return Err(CaptureError::FrameTooLong(f.len()));
        }
        let per = self.unit.per_second();
        let mut h = [0u8; 16];
        h[0..4].copy_from_slice(&((ts / per) as u32).to_le_bytes());
        h[4..8].copy_from_slice(&((ts % per) as u32).to_le_bytes());
        h[8..12].copy_from_slice(&(f.len() as u32).to_le_bytes());
        h[12..16].copy_from_slice(&(f.len() as u32).to_le_bytes());
        self.out.write_all(&h)?;
        self.out.write_all(f)?;
        Ok(())
    }

    /// Flushes the underlying writer.
    pub fn flush(&mut self) -> Result<(), CaptureError> {
        Ok(self.out.flush()?)
    }

    /// The underlying writer.
    pub fn into_inner(self) -> W {
        self.out
    }
}

/// Serialises `frames` as a classic pcap file (µs timestamps 0.000000, 0.000001, …; link type 1;
/// snaplen 65535; little-endian).
pub fn write_pcap_to_vec(frames: &[Vec<u8>]) -> Result<Vec<u8>, CaptureError> {
    let v = Vec::with_capacity(24 + frames.iter().map(|f| f.len() + 16).sum::<usize>());
    let mut w = PcapWriter::new(v, TsUnit::Micro)?;
    for (i, f) in frames.iter().enumerate() {
        w.frame(i as u64, f)?;
    }
    Ok(w.into_inner())
}

/// Writes `frames` to `path` as a classic pcap file (see [`write_pcap_to_vec`]).
pub fn write_pcap(path: &Path, frames: &[Vec<u8>]) -> Result<(), CaptureError> {
    let v = write_pcap_to_vec(frames)?;
    let mut f = std::fs::File::create(path)?;
    f.write_all(&v)?;
    Ok(())
}

/// Direction of a frame in a pcapng enhanced packet block (`epb_flags` bits 0-1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Received on the interface (`epb_flags` = 1).
    Inbound,
    /// Sent out of the interface (`epb_flags` = 2).
    Outbound,
}

/// One frame for [`write_pcapng_to_vec`].
#[derive(Debug, Clone, Copy)]
pub struct PcapngPacket<'a> {
    /// Timestamp in nanoseconds.
    pub ts_ns: u64,
    /// Written as the `epb_flags` option when given.
    pub dir: Option<Direction>,
    /// Length of the frame on the wire.
    pub orig_len: u32,
    /// The captured bytes (cut to the snap length when longer).
    pub data: &'a [u8],
}

fn ng_block(out: &mut Vec<u8>, btype: u32, body: &[u8]) {
    let pad = (4 - body.len() % 4) % 4;
    let len = (12 + body.len() + pad) as u32;
    out.extend_from_slice(&btype.to_le_bytes());
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(body);
    out.extend(std::iter::repeat_n(0u8, pad));
    out.extend_from_slice(&len.to_le_bytes());
}

fn ng_option(out: &mut Vec<u8>, code: u16, val: &[u8]) {
    out.extend_from_slice(&code.to_le_bytes());
    out.extend_from_slice(&(val.len() as u16).to_le_bytes());
    out.extend_from_slice(val);
    out.extend(std::iter::repeat_n(0u8, (4 - val.len() % 4) % 4));
}

/// Serialises `packets` as pcapng (little-endian): one section (version 1.0, length unknown),
/// one Ethernet interface named `if_name` with snap length `snaplen` and nanosecond timestamps
/// (`if_tsresol` = 9), one enhanced packet block per packet (captured length ≤ `snaplen`,
/// original length kept, `epb_flags` when the packet has a direction).
pub fn write_pcapng_to_vec<'a>(if_name: &str, snaplen: u32, packets: impl IntoIterator<Item = PcapngPacket<'a>>) -> Vec<u8> {
    let mut v = Vec::new();
    // Section header: byte-order magic, version 1.0, section length unknown (-1).
    let mut shb = PCAPNG_BOM.to_le_bytes().to_vec();
    shb.extend_from_slice(&1u16.to_le_bytes());
    shb.extend_from_slice(&0u16.to_le_bytes());
    shb.extend_from_slice(&(-1i64).to_le_bytes());
    ng_block(&mut v, PCAPNG_SHB, &shb);
    // Interface description: link type 1, snaplen, if_name, if_tsresol = 10^-9.
    let mut idb = (LINKTYPE_ETHERNET as u16).to_le_bytes().to_vec();
    idb.extend_from_slice(&0u16.to_le_bytes());
    idb.extend_from_slice(&snaplen.to_le_bytes());
    ng_option(&mut idb, 2, if_name.as_bytes());
    ng_option(&mut idb, 9, &[9]);
    ng_option(&mut idb, 0, &[]);
    ng_block(&mut v, 1, &idb);
    for p in packets {
        let data = &p.data[..p.data.len().min(snaplen as usize)];
        let mut epb = 0u32.to_le_bytes().to_vec();
        epb.extend_from_slice(&((p.ts_ns >> 32) as u32).to_le_bytes());
        epb.extend_from_slice(&(p.ts_ns as u32).to_le_bytes());
        epb.extend_from_slice(&(data.len() as u32).to_le_bytes());
        epb.extend_from_slice(&p.orig_len.to_le_bytes());
        epb.extend_from_slice(data);
        epb.extend(std::iter::repeat_n(0u8, (4 - data.len() % 4) % 4));
        if let Some(d) = p.dir {
            let flags: u32 = match d {
                Direction::Inbound => 1,
                Direction::Outbound => 2,
            };
            ng_option(&mut epb, 2, &flags.to_le_bytes());
            ng_option(&mut epb, 0, &[]);
        }
        ng_block(&mut v, 6, &epb);
    }
    v
}

/// Writes [`write_pcapng_to_vec`] to `path`.
pub fn write_pcapng<'a>(path: &Path, if_name: &str, snaplen: u32, packets: impl IntoIterator<Item = PcapngPacket<'a>>) -> Result<(), CaptureError> {
    let v = write_pcapng_to_vec(if_name, snaplen, packets);
    let mut f = std::fs::File::create(path)?;
    f.write_all(&v)?;
    Ok(())
}

/// The capture files of `dir` (`.pcap`, `.pcapng`, either `.xz`-compressed), in name order.
pub fn capture_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let n = p.file_name().unwrap_or_default().to_string_lossy();
            [".pcap", ".pcapng", ".pcap.xz", ".pcapng.xz"].iter().any(|x| n.ends_with(x))
        })
        .collect();
    files.sort();
    Ok(files)
}

/// The capture sets the tests check, as (folder, least number of captures expected): the
/// repository's own (`tests/data/captures`, recorded by `tests/interop/record-captures.sh`, at
/// least 10), always; `../shared/captures` (or `$HEMATITE_SHARED/captures`, at least
/// `shared_min`) as an extra cross-check when that folder exists. Panics when the
/// repository's captures are missing.
pub fn test_capture_dirs(shared_min: usize) -> Vec<(PathBuf, usize)> {
    let own = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/data/captures"));
    assert!(own.join("SUMMARY.md").is_file(), "the repository's captures are missing at {}", own.display());
    let mut v = vec![(own, 10)];
    let shared = std::env::var_os("HEMATITE_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared")));
    if shared.join("captures/summary.txt").is_file() {
        println!("extra cross-check: {}/captures", shared.display());
        v.push((shared.join("captures"), shared_min));
    } else {
        println!("no ../shared/captures beside the repository: only the repository's captures are checked");
    }
    v
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
    fn nanosecond_stream_layout() {
        let mut w = PcapWriter::new(Vec::new(), TsUnit::Nano).unwrap();
        w.frame(1_000_000_004, &[0xAA; 3]).unwrap();
        w.frame(7, &[]).unwrap();
        assert!(matches!(w.frame(0, &vec![0; SNAPLEN as usize + 1]), Err(CaptureError::FrameTooLong(_))));
        let v = w.into_inner();
        let mut want = Vec::new();
        for x in [PCAP_NS, 0x0004_0002, 0, 0, SNAPLEN, 1, 1, 4, 3, 3] {
            want.extend_from_slice(&x.to_le_bytes());
        }
        want.extend_from_slice(&[0xAA; 3]);
        for x in [0u32, 7, 0, 0] {
            want.extend_from_slice(&x.to_le_bytes());
        }
        assert_eq!(v, want);
        assert_eq!(read_frames_from_bytes(&v).unwrap(), vec![vec![0xAA; 3], vec![]]);
    }

    #[test]
    fn pcapng_writer_layout_and_roundtrip() {
        let fr = frames();
        let dirs = [Some(Direction::Inbound), Some(Direction::Outbound), None];
        let pk = fr.iter().zip(dirs).enumerate().map(|(i, (f, dir))| PcapngPacket {
            ts_ns: (i as u64) << 33 | 5,
            dir,
            orig_len: f.len() as u32 + 1,
            data: f,
        });
        let v = write_pcapng_to_vec("sw-p1", 100, pk);
        // the 200-byte frame is cut to the snap length
        let mut want = frames();
        want[2].truncate(100);
        assert_eq!(read_frames_from_bytes(&v).unwrap(), want);
        // SHB (28 bytes), then the IDB: link type 1, snaplen, if_name, if_tsresol 9, end
        assert_eq!(&v[..12], &[0x0A, 0x0D, 0x0D, 0x0A, 28, 0, 0, 0, 0x4D, 0x3C, 0x2B, 0x1A]);
        let idb = &v[28..];
        assert_eq!(&idb[..8], &[1, 0, 0, 0, 44, 0, 0, 0]);
        assert_eq!(&idb[8..16], &[1, 0, 0, 0, 100, 0, 0, 0]);
        assert_eq!(&idb[16..28], b"\x02\x00\x05\x00sw-p1\0\0\0");
        assert_eq!(&idb[28..36], &[9, 0, 1, 0, 9, 0, 0, 0]);
        // first EPB: timestamp halves, lengths, 3 bytes padded to 4, epb_flags inbound, end
        let epb = &v[72..];
        assert_eq!(&epb[..4], &6u32.to_le_bytes());
        assert_eq!(&epb[8..28], &[0, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0]);
        assert_eq!(&epb[28..32], &[1, 2, 3, 0]);
        assert_eq!(&epb[32..44], &[2, 0, 4, 0, 1, 0, 0, 0, 0, 0, 0, 0]);
    }

    #[test]
    fn garbage_is_an_error() {
        assert!(read_frames_from_bytes(b"hello world").is_err());
        assert!(read_frames_from_bytes(&[]).is_err());
        assert!(read_frames_from_bytes(&XZ_MAGIC).is_err());
    }
}
