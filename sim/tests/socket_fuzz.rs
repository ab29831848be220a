//! A short run of the socket fuzzing campaign (`hematite-fuzz socket`): a few thousand
//! malformed, truncated, oversized, out-of-order and random valid-looking messages to a device
//! process, which must answer or close each connection cleanly, never crash or hang, and still
//! serve a well-behaved hostdrv client afterwards.

use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

#[test]
fn socket_fuzz_short_run() {
    let dir = std::env::temp_dir().join(format!("hm-sockfuzz-{}", std::process::id()));
    let t = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_hematite-fuzz"))
        .args(["socket", "--count", "3000", "--seed", "11", "--nic-every", "0", "--sim"])
        .arg(PathBuf::from(env!("CARGO_BIN_EXE_hematite-sim")))
        .arg("--dir")
        .arg(&dir)
        .output()
        .expect("hematite-fuzz runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let last = stdout.lines().last().unwrap_or("");
    assert!(out.status.success(), "hematite-fuzz socket failed ({:?}):\n{stdout}\n{stderr}", out.status);
    assert!(last.starts_with("fuzz socket: ") && last.ends_with(" cases, 0 findings"), "last line: {last}");
    let cases: u64 = last["fuzz socket: ".len()..].split(' ').next().unwrap().parse().unwrap();
    assert!(cases >= 3000, "{last}");
    eprintln!("{last} in {:.1} s", t.elapsed().as_secs_f64());
    let _ = std::fs::remove_dir_all(&dir);
}
