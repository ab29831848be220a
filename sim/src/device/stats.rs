//! The port's counters as files, where RDMA tools look for them (docs/counters.md).
//!
//! The device process samples the engine's counters (BAR0 `CNT`, `HM_CNT_*` of
//! `rtl/pkg/hm_pkg.sv`) through the register BAR, as a driver does: every second of wall time,
//! and at least every [`POLL_CYCLES`] simulated cycles, so that no 32-bit counter wraps
//! unseen. It keeps 64-bit totals (across function resets, which clear the hardware
//! counters) and writes them as one file per counter into `--counters DIR`:
//!
//! * `DIR/counters/`: the InfiniBand port counters (`port_xmit_data`, ... in the units of
//!   the PortCounters attribute: `*_data` in 4-octet words);
//! * `DIR/hw_counters/`: the transport's counters, with mlx5's name wherever the meaning is
//!   the same (`out_of_sequence`, `np_cnp_sent`, ...), otherwise the engine's own name (the
//!   `HM_CNT_*` constant in lower case, `rx_drop_<reason>`, `cqe_<status>`);
//! * `DIR/snapshot`: `cycle C` (simulated cycle of the last sample) and `samples N`.
//!
//! `hematite-run` links `ports/1/counters` and `ports/1/hw_counters` of its sysfs tree to
//! these directories, and `hematite stat` prints them.

use hematite_abi::desc as d;
use hematite_abi::pkt as k;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A sample at least this often (simulated cycles): each counter grows by at most 64 a
/// cycle (the byte counters, at 512 bits), so it cannot wrap between two samples.
pub const POLL_CYCLES: u64 = 1 << 24;
/// A sample this often in wall time, so that the files follow a running program.
pub const POLL_WALL: Duration = Duration::from_millis(1000);

/// Which directory a file is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dir {
    /// `counters/`: InfiniBand port counters.
    Port,
    /// `hw_counters/`: transport counters.
    Hw,
}

impl Dir {
    pub fn name(self) -> &'static str {
        match self {
            Dir::Port => "counters",
            Dir::Hw => "hw_counters",
        }
    }
}

/// One file: the sum of the engine counters `plus` less those in `minus`, divided by `div`.
#[derive(Debug, Clone)]
pub struct FileDef {
    pub name: String,
    pub dir: Dir,
    pub plus: Vec<usize>,
    pub minus: Vec<usize>,
    pub div: u64,
    /// The name and meaning are mlx5's (or the InfiniBand port counter's).
    pub standard: bool,
}

impl FileDef {
    /// The file's value from the engine's 64-bit totals.
    pub fn value(&self, t: &[u64]) -> u64 {
        let p: u64 = self.plus.iter().map(|&i| t[i]).sum();
        let m: u64 = self.minus.iter().map(|&i| t[i]).sum();
        p.saturating_sub(m) / self.div
    }
}

/// The engine counters by name: `HM_CNT_X` → (`x`, index), in index order, the two ranges
/// spelled out (`rx_drop_<reason>` from `HM_RSN_*`, `cqe_<status>` from `HM_CQE_ST_*`).
pub fn engine_names() -> Vec<(String, usize)> {
    let mut v: Vec<(String, usize)> = Vec::new();
    for (n, i) in k::LOCALPARAMS {
        if let Some(s) = n.strip_prefix("HM_CNT_") {
            if !s.ends_with("_BASE") && s != "COUNT" {
                v.push((s.to_ascii_lowercase(), *i as usize));
            }
        }
    }
    for (n, r) in k::LOCALPARAMS {
        if let Some(s) = n.strip_prefix("HM_RSN_") {
            if *r >= 1 && (*r as usize) < k::HM_RSN_COUNT as usize {
                v.push((format!("rx_drop_{}", s.to_ascii_lowercase()), k::HM_CNT_RX_DROP_BASE as usize + *r as usize - 1));
            }
        }
    }
    for (n, s) in d::LOCALPARAMS {
        if let Some(x) = n.strip_prefix("HM_CQE_ST_") {
            if *s >= 1 && *s <= k::HM_CQE_ERR_STATUSES as u64 {
                v.push((format!("cqe_{}", x.to_ascii_lowercase()), k::HM_CNT_CQE_ERR_BASE as usize + *s as usize - 1));
            }
        }
    }
    v.sort_by_key(|e| e.1);
    v
}

/// The standard files: directory, name, and the engine counters (by their names, see
/// [`engine_names`]) added and subtracted; `/4` at the end: in 4-octet words. Port counters
/// as InfiniBand's PortCounters name them; transport counters as mlx5 does (docs/counters.md
/// gives each one's meaning).
const STANDARD: &str = "
counters port_xmit_data tx_bytes/4
counters port_rcv_data rx_bytes/4
counters port_xmit_packets tx_frames
counters port_rcv_packets rx_accepted+rx_dropped
counters port_rcv_errors rx_drop_truncated+rx_drop_length+rx_drop_bad_icrc+rx_drop_bad_ipv4_csum+rx_drop_tver+rx_drop_unknown_opcode+rx_drop_mac_error+rx_drop_misaligned+rx_drop_pad_not_last+rx_drop_too_long
counters port_rcv_constraint_errors rx_drop_bad_pkey
counters port_xmit_discards tx_aborted+tx_bad_hdr
hw_counters out_of_sequence oos_rx
hw_counters packet_seq_err seq_naks_rx
hw_counters implied_nak_seq_err implied_naks
hw_counters local_ack_timeout_err ack_timeouts
hw_counters roce_adp_retrans early_retx
hw_counters rnr_nak_retry_err rnr_naks_rx
hw_counters duplicate_request dup_reqs
hw_counters rx_write_requests write_reqs_rx
hw_counters rx_read_requests read_reqs_rx
hw_counters rx_atomic_requests atomic_reqs_rx
hw_counters rx_icrc_encapsulated rx_drop_bad_icrc
hw_counters np_cnp_sent cnp_tx
hw_counters np_ecn_marked_roce_packets ecn_ce_rx
hw_counters rp_cnp_handled cnp_rx-cnp_no_slot
hw_counters rp_cnp_ignored cnp_no_slot
hw_counters req_cqe_error cqe_loc_len_err+cqe_loc_prot_err+cqe_loc_qp_op_err+cqe_rem_access_err+cqe_rem_inv_req_err+cqe_rem_op_err+cqe_retry_exc_err+cqe_rnr_retry_exc_err+cqe_flush_rq-cqe_err_rq
hw_counters resp_cqe_error cqe_err_rq-cqe_flush_rq
hw_counters req_cqe_flush_error cqe_wr_flush_err-cqe_flush_rq
hw_counters resp_cqe_flush_error cqe_flush_rq
hw_counters req_remote_access_errors cqe_rem_access_err
hw_counters req_remote_invalid_request cqe_rem_inv_req_err
hw_counters req_transport_retries_exceeded cqe_retry_exc_err
hw_counters req_rnr_retries_exceeded cqe_rnr_retry_exc_err
";

/// One line of [`STANDARD`]. Panics on a name that is no engine counter (the unit tests
/// build every file).
fn standard_file(line: &str, names: &[(String, usize)]) -> FileDef {
    let w: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(w.len(), 3, "STANDARD: `{line}`");
    let dir = if w[0] == "counters" { Dir::Port } else { Dir::Hw };
    let (formula, div) = match w[2].strip_suffix("/4") {
        Some(f) => (f, 4),
        None => (w[2], 1),
    };
    let index = |n: &str| names.iter().find(|e| e.0 == n).unwrap_or_else(|| panic!("STANDARD: no engine counter `{n}`")).1;
    let (mut plus, mut minus) = (Vec::new(), Vec::new());
    let mut sign = true;
    let mut term = String::new();
    for ch in formula.chars().chain(std::iter::once('+')) {
        if ch == '+' || ch == '-' {
            let i = index(&term);
            if sign { plus.push(i) } else { minus.push(i) }
            term.clear();
            sign = ch == '+';
        } else {
            term.push(ch);
        }
    }
    FileDef { name: w[1].to_string(), dir, plus, minus, div, standard: true }
}

/// Every file: the standard ones (port counters, mlx5 names), then each engine counter that
/// no standard file gives exactly, under its own name.
pub fn files() -> Vec<FileDef> {
    let names = engine_names();
    let mut v: Vec<FileDef> = STANDARD.lines().filter(|l| !l.trim().is_empty()).map(|l| standard_file(l, &names)).collect();
    let exact: Vec<usize> = v.iter().filter(|f| f.plus.len() == 1 && f.minus.is_empty() && f.div == 1).map(|f| f.plus[0]).collect();
    for (n, i) in names {
        if !exact.contains(&i) {
            v.push(FileDef { name: n, dir: Dir::Hw, plus: vec![i], minus: vec![], div: 1, standard: false });
        }
    }
    v
}

/// The device process's own counters (the slow path the simulator plays; docs/counters.md).
pub fn device_names() -> [&'static str; 3] {
    ["slow_path_rx_frames", "slow_path_tx_frames", "rx_buffer_full_drops"]
}

/// What a read of the counter sampling is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tag {
    /// Engine counter i (BAR0 CNT).
    Cnt(u16),
    /// QPC_SEL after selecting QP q (busy while the engine copies).
    QpSel(u16),
    /// Per-QP counter k of QP q (BAR0 QPC).
    Qp(u16, u16),
}

/// Most QPs sampled at once (`qp/watch`; more are ignored).
pub const MAX_WATCHED: usize = 64;

/// The per-QP counters' file names, `HM_QPC_*` in lower case, or mlx5's name where the
/// meaning is the same.
pub fn qp_names() -> Vec<String> {
    let mut v: Vec<(String, usize)> = k::LOCALPARAMS
        .iter()
        .filter_map(|(n, i)| n.strip_prefix("HM_QPC_").filter(|s| *s != "COUNT").map(|s| (s.to_ascii_lowercase(), *i as usize)))
        .collect();
    v.sort_by_key(|e| e.1);
    let mlx5 = [
        ("ack_timeouts", "local_ack_timeout_err"),
        ("seq_naks_rx", "packet_seq_err"),
        ("rnr_naks_rx", "rnr_nak_retry_err"),
        ("oos_rx", "out_of_sequence"),
        ("dup_reqs", "duplicate_request"),
    ];
    v.into_iter().map(|(n, _)| mlx5.iter().find(|m| m.0 == n).map(|m| m.1.to_string()).unwrap_or(n)).collect()
}

/// Samples, totals and the files.
pub struct Stats {
    dir: Option<PathBuf>,
    files: Vec<FileDef>,
    last_raw: Vec<u32>,
    /// 64-bit totals of the engine counters.
    pub totals: Vec<u64>,
    /// The sample being read: one value per counter, and how many arrived.
    cur: Vec<u32>,
    arrived: usize,
    pub in_progress: bool,
    pub samples: u64,
    last_cycle: u64,
    last_wall: Instant,
    /// Per-QP counters being read: QP → its values so far.
    qp_cur: Vec<(u16, Vec<Option<u32>>)>,
}

impl Stats {
    /// Creates `dir`'s two directories and writes zeros, so that links to them resolve at once.
    pub fn new(dir: Option<PathBuf>) -> Result<Stats, String> {
        let n = k::HM_CNT_COUNT as usize;
        let s = Stats {
            dir,
            files: files(),
            last_raw: vec![0; n],
            totals: vec![0; n],
            cur: vec![0; n],
            arrived: 0,
            in_progress: false,
            samples: 0,
            last_cycle: 0,
            last_wall: Instant::now(),
            qp_cur: Vec::new(),
        };
        if let Some(d) = &s.dir {
            // a new device process watches no QP yet
            let _ = std::fs::remove_dir_all(d.join("qp"));
            for sub in [Dir::Port, Dir::Hw] {
                std::fs::create_dir_all(d.join(sub.name())).map_err(|e| format!("--counters {}: {e}", d.display()))?;
            }
            s.write(0, [0; 3]).map_err(|e| format!("--counters {}: {e}", d.display()))?;
        }
        Ok(s)
    }

    /// Whether a sample is due at `cycle` (never without a directory to write).
    pub fn due(&self, cycle: u64) -> bool {
        self.dir.is_some() &&
            !self.in_progress && (cycle.saturating_sub(self.last_cycle) >= POLL_CYCLES || self.last_wall.elapsed() >= POLL_WALL)
    }

    /// A sample starts: its reads are queued by the caller.
    pub fn start(&mut self, cycle: u64) {
        self.in_progress = true;
        self.arrived = 0;
        self.last_cycle = cycle;
        self.last_wall = Instant::now();
    }

    /// Counter `i` of the sample arrived (None: the read was refused, the counter counts as
    /// unchanged). True when the sample is whole.
    pub fn arrived(&mut self, i: usize, v: Option<u32>) -> bool {
        self.cur[i] = v.unwrap_or(self.last_raw[i]);
        self.arrived += 1;
        if self.arrived == self.cur.len() {
            for j in 0..self.cur.len() {
                self.totals[j] += self.cur[j].wrapping_sub(self.last_raw[j]) as u64;
            }
            self.last_raw.copy_from_slice(&self.cur);
            self.in_progress = false;
            self.samples += 1;
            true
        } else {
            false
        }
    }

    /// The QPs listed in `DIR/qp/watch` (one QPN a line; at most [`MAX_WATCHED`]), which
    /// `hematite-run --stat --qp` writes.
    pub fn watched(&self) -> Vec<u16> {
        let Some(d) = &self.dir else { return Vec::new() };
        let text = std::fs::read_to_string(d.join("qp/watch")).unwrap_or_default();
        let mut v: Vec<u16> = Vec::new();
        for q in text.lines().filter_map(|l| l.trim().parse::<u16>().ok()) {
            if !v.contains(&q) && v.len() < MAX_WATCHED {
                v.push(q);
            }
        }
        v
    }

    /// Per-QP counter k of QP q arrived; with the last one, `DIR/qp/<q>/` is written (the
    /// values as the engine holds them: 32 bits, from the QP's creation).
    pub fn qp_arrived(&mut self, q: u16, k: u16, v: u32, cycle: u64) -> std::io::Result<()> {
        let n = k::HM_QPC_COUNT as usize;
        if !self.qp_cur.iter().any(|e| e.0 == q) {
            self.qp_cur.push((q, vec![None; n]));
        }
        let at = self.qp_cur.iter().position(|e| e.0 == q).unwrap();
        self.qp_cur[at].1[k as usize] = Some(v);
        if self.qp_cur[at].1.iter().any(|x| x.is_none()) {
            return Ok(());
        }
        let (_, vals) = self.qp_cur.remove(at);
        let Some(d) = &self.dir else { return Ok(()) };
        let qd = d.join("qp").join(q.to_string());
        std::fs::create_dir_all(&qd)?;
        for (name, v) in qp_names().iter().zip(vals) {
            put(&qd, name, &format!("{}\n", v.unwrap_or(0)))?;
        }
        put(&qd, "snapshot", &format!("cycle {cycle}\n"))
    }

    /// The function was reset: its counters start again from 0; a sample under way is lost.
    pub fn reset(&mut self) {
        self.qp_cur.clear();
        self.last_raw.iter_mut().for_each(|v| *v = 0);
        self.in_progress = false;
        self.arrived = 0;
    }

    /// Writes every file (each replaced whole, so a reader never sees half a number).
    pub fn write(&self, cycle: u64, dev: [u64; 3]) -> std::io::Result<()> {
        let Some(d) = &self.dir else { return Ok(()) };
        for f in &self.files {
            put(&d.join(f.dir.name()), &f.name, &format!("{}\n", f.value(&self.totals)))?;
        }
        for (n, v) in device_names().iter().zip(dev) {
            put(&d.join(Dir::Hw.name()), n, &format!("{v}\n"))?;
        }
        put(d, "snapshot", &format!("cycle {cycle}\nsamples {}\n", self.samples))
    }
}

fn put(dir: &Path, name: &str, text: &str) -> std::io::Result<()> {
    let tmp = dir.join(format!(".{name}.tmp"));
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(text.as_bytes())?;
    drop(f);
    std::fs::rename(&tmp, dir.join(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cqe(s: u8) -> usize {
        k::HM_CNT_CQE_ERR_BASE as usize + s as usize - 1
    }

    #[test]
    fn every_engine_counter_has_one_name_and_files_are_unique() {
        let names = engine_names();
        assert_eq!(names.len(), k::HM_CNT_COUNT as usize, "one name per counter");
        for (j, (_, i)) in names.iter().enumerate() {
            assert_eq!(*i, j, "indices 0 .. HM_CNT_COUNT, each once");
        }
        let f = files();
        let mut seen: Vec<(Dir, &str)> = Vec::new();
        for x in &f {
            assert!(!seen.contains(&(x.dir, x.name.as_str())), "{} twice", x.name);
            seen.push((x.dir, &x.name));
            assert!(x.plus.iter().chain(&x.minus).all(|&i| i < k::HM_CNT_COUNT as usize));
        }
        // every engine counter is in some file
        for i in 0..k::HM_CNT_COUNT as usize {
            assert!(f.iter().any(|x| x.plus.contains(&i)), "counter {i} ({}) in no file", names[i].0);
        }
        assert!(names.iter().any(|(n, _)| n == "rx_drop_bad_icrc"));
        assert!(names.iter().any(|(n, _)| n == "cqe_retry_exc_err"));
    }

    #[test]
    fn every_file_is_in_the_document() {
        let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/counters.md")).unwrap();
        let names: Vec<String> =
            files().into_iter().map(|f| f.name).chain(device_names().iter().map(|s| s.to_string())).chain(qp_names()).collect();
        for n in &names {
            assert!(doc.contains(&format!("| `{n}` |")), "docs/counters.md has no row for `{n}`");
        }
        // and no row for a file that does not exist
        for l in doc.lines() {
            if let Some(r) = l.strip_prefix("| `") {
                let n = r.split('`').next().unwrap();
                let table_of_files = !n.contains(' ') && !n.contains('/') && !n.contains('.');
                if table_of_files {
                    assert!(names.iter().any(|x| x == n), "docs/counters.md lists `{n}`, which is no file");
                }
            }
        }
    }

    #[test]
    fn no_sampling_without_a_directory() {
        let s = Stats::new(None).unwrap();
        assert!(!s.due(u64::MAX), "nothing to write: no register reads for it");
        assert!(s.watched().is_empty());
    }

    #[test]
    fn completion_errors_split_between_the_queues() {
        // send queue: 2 REM_ACCESS_ERR, 1 flush; receive queue: 1 LOC_LEN_ERR, 3 flushes
        let mut t = vec![0u64; k::HM_CNT_COUNT as usize];
        t[cqe(d::HM_CQE_ST_REM_ACCESS_ERR)] = 2;
        t[cqe(d::HM_CQE_ST_LOC_LEN_ERR)] = 1;
        t[cqe(d::HM_CQE_ST_WR_FLUSH_ERR)] = 4;
        t[k::HM_CNT_CQE_ERR_RQ as usize] = 4;
        t[k::HM_CNT_CQE_FLUSH_RQ as usize] = 3;
        t[k::HM_CNT_TX_BYTES as usize] = 4099;
        let f = files();
        let v = |n: &str| f.iter().find(|x| x.name == n).unwrap().value(&t);
        assert_eq!(
            (v("req_cqe_error"), v("resp_cqe_error"), v("req_cqe_flush_error"), v("resp_cqe_flush_error")),
            (2, 1, 1, 3)
        );
        assert_eq!((v("req_remote_access_errors"), v("port_xmit_data"), v("tx_bytes")), (2, 1024, 4099));
    }

    #[test]
    fn totals_follow_wraps_and_resets_and_units_are_words() {
        let dir = std::env::temp_dir().join(format!("hm-stats-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut s = Stats::new(Some(dir.clone())).unwrap();
        assert_eq!(std::fs::read_to_string(dir.join("counters/port_xmit_data")).unwrap(), "0\n");
        let n = k::HM_CNT_COUNT as usize;
        let tb = k::HM_CNT_TX_BYTES as usize;
        let sample = |s: &mut Stats, v: u32| {
            s.start(0);
            let mut whole = false;
            for i in 0..n {
                whole = s.arrived(i, Some(if i == tb { v } else { 0 }));
            }
            assert!(whole);
        };
        sample(&mut s, 0xFFFF_FF00);
        sample(&mut s, 0x0000_0100); // wrapped: 0x200 more
        assert_eq!(s.totals[tb], 0x1_0000_0100);
        s.reset();
        sample(&mut s, 8);
        assert_eq!(s.totals[tb], 0x1_0000_0108);
        // a refused read counts as no change (not as a drop to 0 and back)
        s.start(0);
        for i in 0..n {
            s.arrived(i, if i == tb { None } else { Some(0) });
        }
        sample(&mut s, 12);
        assert_eq!(s.totals[tb], 0x1_0000_010C);
        s.write(5, [1, 2, 3]).unwrap();
        assert_eq!(std::fs::read_to_string(dir.join("counters/port_xmit_data")).unwrap(), format!("{}\n", 0x1_0000_010Cu64 / 4));
        assert_eq!(std::fs::read_to_string(dir.join("hw_counters/rx_buffer_full_drops")).unwrap(), "3\n");
        assert_eq!(std::fs::read_to_string(dir.join("snapshot")).unwrap(), "cycle 5\nsamples 5\n");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
