//! Every frame of every capture in `shared/captures` (Soft-RoCE traffic) through the RX spec.

mod common;

use common::{be16, shared_dir};
use hematite_model::capture::read_frames;
use hematite_model::{classify, DropReason};
use std::collections::BTreeMap;
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

/// Parses `summary.txt`: per capture the frame count and the RoCEv2 / ICRC good / bad counts.
fn summary(text: &str) -> BTreeMap<String, Summary> {
    let mut m = BTreeMap::new();
    let mut cur = None;
    let num = |s: &str| s.trim().trim_end_matches(',').parse::<usize>().unwrap();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("== ") {
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
    let dir = shared_dir().join("captures");
    let sum = summary(&std::fs::read_to_string(dir.join("summary.txt")).expect("summary.txt"));
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy();
            n.ends_with(".pcapng") || n.ends_with(".pcapng.xz") || n.ends_with(".pcap") || n.ends_with(".pcap.xz")
        })
        .collect();
    names.sort();
    assert!(names.len() >= 20, "expected the capture set, found {}", names.len());
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
                    Some(DropReason::BadIcrc) if stem == "host_peer_demo" => {
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
        let s = sum.get(&stem).unwrap_or_else(|| panic!("{stem} missing from summary.txt"));
        assert_eq!(frames.len(), s.frames, "{fname}: frame count vs summary.txt");
        assert_eq!(roce, s.roce, "{fname}: RoCEv2 count vs summary.txt");
        assert_eq!((accepted, bad_icrc), (s.good, s.bad), "{fname}: ICRC good/bad vs summary.txt");
        total += frames.len();
        total_bad += bad_icrc;
    }
    assert_eq!(total_bad, 1, "exactly one bad-ICRC frame (host_peer_demo)");
    println!("{} files, {total} frames in {:.2}s", names.len(), t0.elapsed().as_secs_f64());
}
