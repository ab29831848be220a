#![allow(dead_code)]
pub mod pairs;
use std::path::PathBuf;

/// ../shared (or $HEMATITE_SHARED). Missing data is a hard failure, never a skip.
pub fn shared() -> PathBuf {
    let p = std::env::var("HEMATITE_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared")));
    assert!(p.join("vectors/rocev2_vectors.json").exists(), "shared data not found at {} (set HEMATITE_SHARED)", p.display());
    p
}

/// The repository's own generated RoCEv2 vectors, `<repo>/tests/data/vectors` (made by
/// `tests/vectors/gen_vectors.py`). Missing data is a hard failure.
pub fn repo_vectors_dir() -> PathBuf {
    let p = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/data/vectors"));
    assert!(p.join("rocev2_vectors.json").is_file(), "repository vectors not found at {} (run tests/vectors/gen_vectors.py)", p.display());
    p
}

/// ../shared (or $HEMATITE_SHARED) when it holds `vectors/rocev2_vectors.json`; `Err` with the
/// path looked at otherwise. For optional cross-checks; [`shared`] fails when the data is absent.
pub fn shared_opt() -> Result<PathBuf, PathBuf> {
    let p = std::env::var("HEMATITE_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared")));
    if p.join("vectors/rocev2_vectors.json").is_file() {
        Ok(p.canonicalize().unwrap_or(p))
    } else {
        Err(p)
    }
}

pub fn unhex(s: &str) -> Vec<u8> {
    (0..s.len() / 2).map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap()).collect()
}

#[allow(unused_imports)]
pub use hematite_sim::rxcheck::{check_rx_run, compare_status, hexs};

/// Random valid TX inputs with a mix of sizes: a third small (0..64 B payload), a third
/// medium (64..1024), a third large (1024..4096), over every supported opcode.
pub fn mixed_jobs(n: usize, seed: u64) -> Vec<(hematite_model::HdrRecord, Vec<u8>)> {
    use hematite_model::opcode;
    let mut rng = hematite_sim::Rng::new(seed);
    let ops: Vec<u8> = (0u16..=255).map(|o| o as u8).filter(|o| opcode::info(*o).is_some()).collect();
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let op = ops[(rng.next() % ops.len() as u64) as usize];
        let info = opcode::info(op).unwrap();
        let len = if info.no_payload {
            0
        } else {
            (match rng.next() % 3 {
                0 => rng.next() % 64,
                1 => 64 + rng.next() % 960,
                _ => 1024 + rng.next() % 3072,
            }) as usize
        };
        // a packet that does not end its message carries no pad (the RX path drops it as
        // pad_not_last): its payload is a whole number of 4-byte words
        let len = if info.end { len } else { len & !3 };
        let ipv6 = rng.next() % 2 == 1;
        let rec = hematite_model::HdrRecord {
            eth_dst: rng.next() & 0xFFFF_FFFF_FFFF,
            eth_src: rng.next() & 0xFFFF_FFFF_FFFF,
            vlan_valid: rng.next() % 4 == 0,
            vlan_pcp: (rng.next() % 8) as u8,
            vlan_vid: (rng.next() % 4096) as u16,
            ipv6,
            ip_src: if ipv6 { (rng.next() as u128) << 64 | rng.next() as u128 } else { rng.next() as u32 as u128 },
            ip_dst: if ipv6 { (rng.next() as u128) << 64 | rng.next() as u128 } else { rng.next() as u32 as u128 },
            dscp: (rng.next() % 64) as u8,
            ecn: (rng.next() % 4) as u8,
            ttl: rng.next() as u8,
            ip_id: if ipv6 { 0 } else { rng.next() as u16 },
            ip_df: !ipv6,
            flow_label: if ipv6 { (rng.next() % (1 << 20)) as u32 } else { 0 },
            udp_sport: 0xC000 | (rng.next() as u16 & 0x3FFF),
            opcode: op,
            se: rng.next() % 2 == 1,
            ackreq: rng.next() % 2 == 1,
            pkey: 0xFFFF,
            dest_qp: (rng.next() % (1 << 24)) as u32,
            psn: (rng.next() % (1 << 24)) as u32,
            va: rng.next(),
            rkey: rng.next() as u32,
            dma_len: rng.next() as u32,
            swap_add: rng.next(),
            compare: rng.next(),
            syndrome: rng.next() as u8 & 0x7F,
            msn: (rng.next() % (1 << 24)) as u32,
            atomic_orig: rng.next(),
            imm: rng.next() as u32,
            qkey: rng.next() as u32,
            src_qp: (rng.next() % (1 << 24)) as u32,
            payload_len: len as u16,
            ..Default::default()
        };
        let payload: Vec<u8> = (0..len).map(|k| (k as u64 ^ i as u64 ^ seed) as u8).collect();
        out.push((rec, payload));
    }
    out
}

/// A `hematite-sim device` process on a private socket and wire (owner-only folder), killed and
/// cleaned up on drop. `extra` goes on its command line.
pub struct DevProc {
    pub child: std::process::Child,
    pub dir: PathBuf,
    pub sock: PathBuf,
}

impl DevProc {
    pub fn start(prefix: &str, name: &str, extra: &[&str]) -> DevProc {
        use std::os::unix::fs::PermissionsExt;
        use std::time::{Duration, Instant};
        let dir = std::env::temp_dir().join(format!("{prefix}-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let sock = dir.join("d.sock");
        let child = std::process::Command::new(env!("CARGO_BIN_EXE_hematite-sim"))
            .arg("device")
            .arg("--socket")
            .arg(&sock)
            .arg("--wire-local")
            .arg(dir.join("d.wire"))
            .arg("--wire-peer")
            .arg(dir.join("peer.wire"))
            .args(extra)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let t = Instant::now();
        while !sock.exists() {
            assert!(t.elapsed() < Duration::from_secs(120), "device did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        DevProc { child, dir, sock }
    }
}

impl Drop for DevProc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
