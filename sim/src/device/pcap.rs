//! The device's `--pcap`: every frame of the port, stamped with simulated time (cycles since
//! the process started × 4 ns, [`CLOCK_HZ`]), written as it happens through the project's pcap
//! writer (`hematite_model::capture::PcapWriter`, nanosecond timestamps, snap length 65535,
//! link type Ethernet) into a buffered file that the main loop flushes (every 500 ms, at
//! `--max-cycles`, on SIGTERM / SIGINT and on drop; docs/sim-device.md, "pcap").

use super::CLOCK_HZ;
use hematite_model::capture::{PcapWriter, TsUnit};
use std::fs::File;
use std::io::BufWriter;
use std::path::Path;

pub(super) struct Pcap(PcapWriter<BufWriter<File>>);

impl Pcap {
    pub(super) fn create(path: &Path) -> Result<Pcap, String> {
        let f = File::create(path).map_err(|e| format!("pcap {}: {e}", path.display()))?;
        PcapWriter::new(BufWriter::new(f), TsUnit::Nano).map(Pcap).map_err(|e| format!("pcap {}: {e}", path.display()))
    }

    /// Writes `f` stamped at `cycle` (write errors are ignored: the capture is best effort).
    pub(super) fn frame(&mut self, cycle: u64, f: &[u8]) {
        let _ = self.0.frame(cycle * (1_000_000_000 / CLOCK_HZ), f);
    }

    pub(super) fn flush(&mut self) {
        let _ = self.0.flush();
    }
}
