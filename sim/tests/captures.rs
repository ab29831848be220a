//! Every frame of every capture in ../shared/captures (real Linux Soft-RoCE traffic) through
//! the RTL receive path, compared frame by frame with the reference model.
mod common;
use common::*;
use hematite_model::capture::read_frames;
use hematite_sim::{run_rx, Flow, PktSim, WIDTHS};

#[test]
fn captures_parse_identically_in_rtl_and_model() {
    let dir = shared().join("captures");
    let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).filter(|p| {
        let n = p.file_name().unwrap().to_string_lossy().to_string();
        n.ends_with(".pcapng") || n.ends_with(".pcapng.xz") || n.ends_with(".pcap")
    }).collect();
    files.sort();
    assert!(files.len() >= 15, "expected the shared captures, found {}", files.len());
    let mut total = 0;
    for (i, f) in files.iter().enumerate() {
        let frames = read_frames(f).unwrap();
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
        if f.file_name().unwrap() == "host_peer_demo.pcapng" {
            assert_eq!(bad_icrc, 1, "the one corrupted frame of host_peer_demo");
        }
    }
    println!("{total} capture frames: RTL == model");
}
