//! Per-port packet capture records, written as pcapng with cycle-derived timestamps.
//!
//! `hematite_model::capture::write_pcap` numbers frames 0 µs, 1 µs, …; the switch needs real
//! simulated times and both directions of a port in one file, so its captures are written with
//! the model's pcapng writer (`hematite_model::capture::write_pcapng`, which
//! `hematite_model::capture::read_frames` and Wireshark read): one section, one Ethernet
//! interface named after the port with nanosecond resolution (`if_tsresol` = 9), one enhanced
//! packet block per frame with `epb_flags` inbound (frames the switch received on the port) or
//! outbound (frames it sent), captured length ≤ the snap length, original length kept. This
//! module holds the switch's records and the cycle-to-time conversion; the file format is the
//! model's.

use hematite_model::capture::{self, CaptureError, Direction, PcapngPacket};
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

/// The records as the model's pcapng packets; timestamps are ⌊cycle·1000/clk_mhz⌋ ns.
fn packets(clk_mhz: u64, recs: &[CapRecord]) -> impl Iterator<Item = PcapngPacket<'_>> {
    recs.iter().map(move |r| PcapngPacket {
        ts_ns: ((r.cycle as u128 * 1000) / clk_mhz.max(1) as u128) as u64,
        dir: Some(match r.dir {
            Dir::In => Direction::Inbound,
            Dir::Out => Direction::Outbound,
        }),
        orig_len: r.orig_len,
        data: &r.data,
    })
}

/// Serialises `recs` as pcapng (little-endian); timestamps are ⌊cycle·1000/clk_mhz⌋ ns.
pub fn pcapng_bytes(if_name: &str, clk_mhz: u64, snaplen: u32, recs: &[CapRecord]) -> Vec<u8> {
    capture::write_pcapng_to_vec(if_name, snaplen, packets(clk_mhz, recs))
}

/// Writes [`pcapng_bytes`] to `path`.
pub fn write_pcapng(path: &Path, if_name: &str, clk_mhz: u64, snaplen: u32, recs: &[CapRecord]) -> std::io::Result<()> {
    capture::write_pcapng(path, if_name, snaplen, packets(clk_mhz, recs)).map_err(|e| match e {
        CaptureError::Io(e) => e,
        e => std::io::Error::other(e),
    })
}
