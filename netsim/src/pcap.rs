//! Per-port packet capture, written as pcapng with cycle-derived timestamps.
//!
//! `hematite_model::capture::write_pcap` numbers frames 0 µs, 1 µs, …; the switch needs real
//! simulated times and both directions of a port in one file, so this writes pcapng (which
//! `hematite_model::capture::read_frames` and Wireshark read): one section, one Ethernet
//! interface named after the port with nanosecond resolution (`if_tsresol` = 9), one enhanced
//! packet block per frame with `epb_flags` inbound (frames the switch received on the port) or
//! outbound (frames it sent), captured length ≤ the snap length, original length kept.

use std::io::Write;
use std::path::Path;

/// Direction of a captured frame, seen from the switch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dir {
    /// Received by the switch on this port.
    In,
    /// Sent by the switch out of this port.
    Out,
}

/// One captured frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapRecord {
    /// Cycle of the frame's last byte (receive: the `rx` call's cycle; send: the cycle its
    /// serialisation finished).
    pub cycle: u64,
    /// Direction.
    pub dir: Dir,
    /// Frame length without FCS.
    pub orig_len: u32,
    /// The first ≤ snaplen bytes.
    pub data: Vec<u8>,
}

fn block(out: &mut Vec<u8>, btype: u32, body: &[u8]) {
    let pad = (4 - body.len() % 4) % 4;
    let len = (12 + body.len() + pad) as u32;
    out.extend_from_slice(&btype.to_le_bytes());
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(body);
    out.extend(std::iter::repeat_n(0u8, pad));
    out.extend_from_slice(&len.to_le_bytes());
}

fn option(out: &mut Vec<u8>, code: u16, val: &[u8]) {
    out.extend_from_slice(&code.to_le_bytes());
    out.extend_from_slice(&(val.len() as u16).to_le_bytes());
    out.extend_from_slice(val);
    out.extend(std::iter::repeat_n(0u8, (4 - val.len() % 4) % 4));
}

/// Serialises `recs` as pcapng (little-endian); timestamps are ⌊cycle·1000/clk_mhz⌋ ns.
pub fn pcapng_bytes(if_name: &str, clk_mhz: u64, snaplen: u32, recs: &[CapRecord]) -> Vec<u8> {
    let mut v = Vec::new();
    // Section header: byte-order magic, version 1.0, section length unknown (-1).
    let mut shb = 0x1A2B_3C4Du32.to_le_bytes().to_vec();
    shb.extend_from_slice(&1u16.to_le_bytes());
    shb.extend_from_slice(&0u16.to_le_bytes());
    shb.extend_from_slice(&(-1i64).to_le_bytes());
    block(&mut v, 0x0A0D_0D0A, &shb);
    // Interface description: link type 1, snaplen, if_name, if_tsresol = 10^-9.
    let mut idb = 1u16.to_le_bytes().to_vec();
    idb.extend_from_slice(&0u16.to_le_bytes());
    idb.extend_from_slice(&snaplen.to_le_bytes());
    option(&mut idb, 2, if_name.as_bytes());
    option(&mut idb, 9, &[9]);
    option(&mut idb, 0, &[]);
    block(&mut v, 1, &idb);
    for r in recs {
        let ns = ((r.cycle as u128 * 1000) / clk_mhz.max(1) as u128) as u64;
        let mut epb = 0u32.to_le_bytes().to_vec();
        epb.extend_from_slice(&((ns >> 32) as u32).to_le_bytes());
        epb.extend_from_slice(&(ns as u32).to_le_bytes());
        epb.extend_from_slice(&(r.data.len() as u32).to_le_bytes());
        epb.extend_from_slice(&r.orig_len.to_le_bytes());
        epb.extend_from_slice(&r.data);
        epb.extend(std::iter::repeat_n(0u8, (4 - r.data.len() % 4) % 4));
        let flags: u32 = match r.dir {
            Dir::In => 1,
            Dir::Out => 2,
        };
        option(&mut epb, 2, &flags.to_le_bytes());
        option(&mut epb, 0, &[]);
        block(&mut v, 6, &epb);
    }
    v
}

/// Writes [`pcapng_bytes`] to `path`.
pub fn write_pcapng(path: &Path, if_name: &str, clk_mhz: u64, snaplen: u32, recs: &[CapRecord]) -> std::io::Result<()> {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
    f.write_all(&pcapng_bytes(if_name, clk_mhz, snaplen, recs))?;
    f.flush()
}
