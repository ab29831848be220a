//! Every frame of every Soft-RoCE capture (the repository's `tests/data/captures`, and
//! `../shared/captures` when present) through the RTL receive path, compared frame by frame
//! with the reference model.
mod common;
use common::*;
use hematite_model::capture::read_frames;
use hematite_sim::{run_rx, Flow, PktSim, WIDTHS};
use std::path::Path;

/// Runs every capture of `dir` through the RTL; returns (frames, bad-ICRC frames).
fn check_dir(dir: &Path, min_files: usize) -> (usize, u64) {
    let files = hematite_model::capture::capture_files(dir).unwrap();
    assert!(files.len() >= min_files, "{}: expected at least {min_files} captures, found {}", dir.display(), files.len());
    let (mut total, mut total_bad) = (0, 0);
    for (i, f) in files.iter().enumerate() {
        let frames = read_frames(f).unwrap();
        assert!(!frames.is_empty(), "{}: no frames", f.display());
        // alternate widths and flow patterns across files to keep the run short
        let w = WIDTHS[i % 2];
        let flow = Flow { idle_pct: if i % 3 == 0 { 5 } else { 0 }, stall_pct: if i % 3 == 1 { 10 } else { 0 }, seed: i as u64 };
        let mut sim = PktSim::new(w).unwrap();
        let run = run_rx(&mut sim, &frames, &flow).unwrap();
        let acc = check_rx_run(&frames, &run).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        let bad_icrc = run.counters[6];
        println!(
            "{:40} width {w}: {:6} frames, {:6} accepted, {} bad ICRC, {} beats in {} cycles",
            f.file_name().unwrap().to_string_lossy(), frames.len(), acc, bad_icrc, run.in_beats, run.cycles
        );
        total += frames.len();
        total_bad += u64::from(bad_icrc);
        if f.file_name().unwrap() == "host_peer_demo.pcapng" {
            assert_eq!(bad_icrc, 1, "the one corrupted frame of host_peer_demo");
        }
    }
    (total, total_bad)
}

#[test]
fn captures_parse_identically_in_rtl_and_model() {
    let mut total = 0;
    for (i, (dir, min_files)) in hematite_model::capture::test_capture_dirs(15).into_iter().enumerate() {
        let (n, bad) = check_dir(&dir, min_files);
        let shared = i > 0;
        // the repository's captures are clean; the shared set has one corrupted frame
        assert_eq!(bad, u64::from(shared), "{}: bad-ICRC frames", dir.display());
        println!("{}: {n} capture frames: RTL == model", dir.display());
        total += n;
    }
    println!("{total} capture frames in all: RTL == model");
}
