//! Every frame of every Soft-RoCE capture (the repository's `tests/data/captures`, and
//! `../shared/captures` when present) through the RX spec.

mod common;

use common::be16;
use hematite_model::capture::read_frames;
use hematite_model::{classify, DropReason};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

/// Independent check: is this a UDP datagram to port 4791 (any validity otherwise)?
fn is_udp_4791(f: &[u8]) -> bool {
    if f.len() < 14 {
        return false;
    }
    let l3 = if be16(f, 12) == 0x8100 { 18 } else { 14 };
    if f.len() < l3 {
        return false;
    }
    let (proto, l4) = match be16(f, l3 - 2) {
        0x0800 if f.len() >= l3 + 20 => (f[l3 + 9], l3 + 4 * (f[l3] & 0xF) as usize),
        0x86DD if f.len() >= l3 + 40 => (f[l3 + 6], l3 + 40),
        _ => return false,
    };
    proto == 17 && f.len() >= l4 + 4 && be16(f, l4 + 2) == 4791
}

#[derive(Debug, Default)]
struct Summary {
    frames: usize,
    roce: usize,
    good: usize,
    bad: usize,
}

/// Parses a capture summary: per capture the frame count and the RoCEv2 / ICRC good / bad counts.
/// Formats: the repository's `SUMMARY.md` (written by `tests/interop/record-captures.sh`: a
/// table row per capture whose last cell is `tests/tools/roce_icrc.py`'s "N frames, R RoCEv2,
/// ICRC good G, bad B"), the checker's own per-file lines ("NAME.pcapng.xz: N frames, ..."),
/// and ../shared's `summary.txt` ("== NAME (size, N frames)" ... "-- ICRC: R RoCEv2 frames,
/// ICRC good G, bad B").
fn summary(text: &str) -> BTreeMap<String, Summary> {
    let mut m = BTreeMap::new();
    let mut cur = None;
    let num = |s: &str| s.trim().trim_end_matches(',').parse::<usize>().unwrap();
    for line in text.lines() {
        // the repository's SUMMARY.md: a table row per capture, its first cell the file, its
        // last the checker's "N frames, R RoCEv2, ICRC good G, bad B"
        let cells: Vec<&str> = line.split('|').map(str::trim).filter(|c| !c.is_empty()).collect();
        if line.starts_with('|') && cells.len() >= 2 && cells[cells.len() - 1].contains(" RoCEv2, ICRC good ") {
            let w: Vec<&str> = cells[cells.len() - 1].split_whitespace().collect();
            let name = cells[0].split('.').next().unwrap().to_string();
            m.insert(name, Summary { frames: num(w[0]), roce: num(w[2]), good: num(w[6]), bad: num(w[8]) });
        } else if let Some((file, rest)) = line.split_once(": ").filter(|(_, r)| r.contains(" RoCEv2, ICRC good ")) {
            // "N frames, R RoCEv2, ICRC good G, bad B"
            let w: Vec<&str> = rest.split_whitespace().collect();
            let name = file.rsplit('/').next().unwrap().split('.').next().unwrap().to_string();
            m.insert(name, Summary { frames: num(w[0]), roce: num(w[2]), good: num(w[6]), bad: num(w[8]) });
        } else if let Some(rest) = line.strip_prefix("== ") {
            let name = rest.split_whitespace().next().unwrap().to_string();
            let frames = rest.split(',').nth(1).unwrap().split_whitespace().next().unwrap();
            m.insert(name.clone(), Summary { frames: num(frames), ..Summary::default() });
            cur = Some(name);
        } else if let Some(rest) = line.strip_prefix("-- ICRC: ") {
            // "N RoCEv2 frames, ICRC good G, bad B"
            let w: Vec<&str> = rest.split_whitespace().collect();
            let s = m.get_mut(cur.as_ref().unwrap()).unwrap();
            s.roce = num(w[0]);
            s.good = num(w[5]);
            s.bad = num(w[7]);
        }
    }
    m
}

#[test]
fn all_captures() {
    let dirs = hematite_model::capture::test_capture_dirs(20);
    let mut total_bad = 0;
    for (dir, min_files) in &dirs {
        total_bad += check_dir(dir, *min_files);
    }
    // the one corrupted frame the shared set has (host_peer_demo); the repository's set has none
    let expect_bad = if dirs.len() > 1 { 1 } else { 0 };
    assert_eq!(total_bad, expect_bad, "bad-ICRC frames over all capture sets");
}

/// Every frame of every capture in `dir` through the RX spec, checked against its
/// `summary.txt` (written by an independent tool). Returns the number of bad-ICRC frames.
fn check_dir(dir: &Path, min_files: usize) -> usize {
    let file = if dir.join("SUMMARY.md").is_file() { "SUMMARY.md" } else { "summary.txt" };
    let sum = summary(&std::fs::read_to_string(dir.join(file)).unwrap_or_else(|e| panic!("{file}: {e}")));
    let names = hematite_model::capture::capture_files(dir).unwrap();
    assert!(names.len() >= min_files, "{}: expected at least {min_files} captures, found {}", dir.display(), names.len());
    let t0 = Instant::now();
    let (mut total, mut total_bad) = (0usize, 0usize);
    for path in &names {
        let t = Instant::now();
        let frames = read_frames(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let fname = path.file_name().unwrap().to_string_lossy().to_string();
        let stem = fname.split('.').next().unwrap().to_string();
        let mut reasons: BTreeMap<&'static str, usize> = BTreeMap::new();
        let (mut roce, mut accepted, mut bad_icrc) = (0, 0, 0);
        for (i, f) in frames.iter().enumerate() {
            let out = classify(f);
            *reasons.entry(out.reason.map_or("accepted", |r| r.name())).or_default() += 1;
            if is_udp_4791(f) {
                roce += 1;
                match out.reason {
                    None => {
                        accepted += 1;
                        assert!(out.icrc_ok);
                    }
                    Some(DropReason::BadIcrc) => {
                        bad_icrc += 1;
                        assert!(!out.icrc_ok);
                    }
                    Some(r) => panic!("{fname} frame {}: RoCEv2 frame dropped: {r}", i + 1),
                }
            } else {
                assert!(
                    matches!(out.reason, Some(DropReason::NotIp | DropReason::NotRoce)),
                    "{fname} frame {}: non-RoCE frame classified {:?}",
                    i + 1,
                    out.reason
                );
            }
        }
        println!(
            "{fname:36} {:6} frames {:6} RoCEv2 {:6} accepted {bad_icrc} bad ICRC  {reasons:?}  ({:.2}s)",
            frames.len(),
            roce,
            accepted,
            t.elapsed().as_secs_f64()
        );
        let s = sum.get(&stem).unwrap_or_else(|| panic!("{stem} missing from {}/summary.txt", dir.display()));
        assert_eq!(frames.len(), s.frames, "{fname}: frame count vs summary.txt");
        assert_eq!(roce, s.roce, "{fname}: RoCEv2 count vs summary.txt");
        assert_eq!((accepted, bad_icrc), (s.good, s.bad), "{fname}: ICRC good/bad vs summary.txt");
        total += frames.len();
        total_bad += bad_icrc;
    }
    println!("{}: {} files, {total} frames in {:.2}s", dir.display(), names.len(), t0.elapsed().as_secs_f64());
    total_bad
}
