//! Every frame of the RoCEv2 test vectors through the RTL receive path (decoded fields, ICRC
//! verdict and overall verdict against the vectors' JSON and the reference model) and, for the
//! positive frames, through the RTL transmit path (bytes equal to the vectors). The repository's
//! own set (`tests/data/vectors`, from `tests/vectors/gen_vectors.py`) always runs; the shared
//! reference set (`../shared/vectors` or `$HEMATITE_SHARED/vectors`, which also holds the
//! hardware-captured CNP of `reference_hw`) runs as an extra cross-check when present.
mod common;
use common::*;
use hematite_model::{classify, DropReason};
use hematite_sim::{run_rx, run_tx, Flow, PktSim, TxJob, WIDTHS};
use serde_json::Value;
use std::path::PathBuf;

/// One vector set: label, directory, and the number of negative frames it must have.
struct VectorSet {
    label: &'static str,
    dir: PathBuf,
    positive_and_reference: usize,
    negative: usize,
}

/// The repository set (missing data fails), then the shared set when it exists; prints whether
/// the shared cross-check runs.
fn sets(test: &str) -> Vec<VectorSet> {
    let mut v = vec![VectorSet { label: "repo", dir: repo_vectors_dir(), positive_and_reference: 108, negative: 1253 }];
    match shared_opt() {
        Ok(s) => {
            println!("{test}: shared cross-check ran over {}", s.join("vectors").display());
            v.push(VectorSet { label: "shared", dir: s.join("vectors"), positive_and_reference: 48 + 2, negative: 508 });
        }
        Err(s) => println!("{test}: shared cross-check not run: {} absent", s.join("vectors").display()),
    }
    v
}

fn vectors(set: &VectorSet) -> Value {
    let p = set.dir.join("rocev2_vectors.json");
    serde_json::from_str(&std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))).unwrap()
}

#[test]
fn positive_and_reference_vectors_rx_and_tx() {
    for set in sets("positive_and_reference_vectors_rx_and_tx") {
        positive_set(&set);
    }
}

fn positive_set(set: &VectorSet) {
    let v = vectors(set);
    let pos: Vec<&Value> = v["positive"].as_array().unwrap().iter().chain(v["reference_hw"].as_array().unwrap()).collect();
    let frames: Vec<Vec<u8>> = pos.iter().map(|p| unhex(p["hex"].as_str().unwrap())).collect();
    assert_eq!(frames.len(), set.positive_and_reference, "{} set", set.label);
    for w in WIDTHS {
        let mut sim = PktSim::new(w).unwrap();
        let run = run_rx(&mut sim, &frames, &Flow::default()).unwrap();
        let acc = check_rx_run(&frames, &run).unwrap();
        assert_eq!(acc, frames.len(), "all positive vectors accepted at {w}");
        for (p, s) in pos.iter().zip(&run.status) {
            let name = p["name"].as_str().unwrap();
            let f = &p["fields"];
            assert!(s.icrc_ok, "{name}: ICRC");
            let bth = &f["BTH"];
            assert_eq!(s.hdr.opcode as u64, bth["opcode"].as_u64().unwrap(), "{name}");
            assert_eq!(s.hdr.dest_qp as u64, bth["dqpn"].as_u64().unwrap(), "{name}");
            assert_eq!(s.hdr.psn as u64, bth["psn"].as_u64().unwrap(), "{name}");
            assert_eq!(s.hdr.padcnt as u64, bth["padcount"].as_u64().unwrap(), "{name}");
            assert_eq!(s.hdr.becn as u64, bth["becn"].as_u64().unwrap(), "{name}");
            assert_eq!(s.hdr.ackreq as u64, bth["ackreq"].as_u64().unwrap(), "{name}");
            assert_eq!(s.hdr.se as u64, bth["solicited"].as_u64().unwrap(), "{name}");
            assert_eq!(s.hdr.migreq as u64, bth["migreq"].as_u64().unwrap(), "{name}");
            assert_eq!(s.hdr.pkey as u64, bth["pkey"].as_u64().unwrap(), "{name}");
            assert_eq!(s.hdr.udp_sport as u64, f["UDP"]["sport"].as_u64().unwrap(), "{name}");
            assert_eq!(s.hdr.udp_len as u64, f["UDP"]["len"].as_u64().unwrap(), "{name}");
            assert_eq!(s.hdr.udp_csum as u64, f["UDP"]["chksum"].as_u64().unwrap(), "{name}");
            if let Some(ip) = f.get("IP") {
                assert!(!s.hdr.ipv6);
                assert_eq!(((s.hdr.dscp as u64) << 2) | s.hdr.ecn as u64, ip["tos"].as_u64().unwrap(), "{name}");
                assert_eq!(s.hdr.ttl as u64, ip["ttl"].as_u64().unwrap(), "{name}");
                assert_eq!(s.hdr.ip_id as u64, ip["id"].as_u64().unwrap(), "{name}");
                let src: std::net::Ipv4Addr = ip["src"].as_str().unwrap().parse().unwrap();
                assert_eq!(s.hdr.ip_src, u32::from(src) as u128, "{name}");
                assert!(s.ipv4_csum_ok, "{name}");
            } else {
                let ip = &f["IPv6"];
                assert!(s.hdr.ipv6);
                assert_eq!(((s.hdr.dscp as u64) << 2) | s.hdr.ecn as u64, ip["tc"].as_u64().unwrap(), "{name}");
                assert_eq!(s.hdr.flow_label as u64, ip["fl"].as_u64().unwrap(), "{name}");
                assert_eq!(s.hdr.ttl as u64, ip["hlim"].as_u64().unwrap(), "{name}");
                let dst: std::net::Ipv6Addr = ip["dst"].as_str().unwrap().parse().unwrap();
                assert_eq!(s.hdr.ip_dst, u128::from(dst), "{name}");
            }
            if let Some(vl) = f.get("802.1Q") {
                assert!(s.hdr.vlan_valid, "{name}");
                assert_eq!(s.hdr.vlan_vid as u64, vl["vlan"].as_u64().unwrap(), "{name}");
                assert_eq!(s.hdr.vlan_pcp as u64, vl["prio"].as_u64().unwrap(), "{name}");
            }
        }
        // TX: the model's decoded record plus payload, built by the RTL, gives the same bytes.
        let jobs: Vec<TxJob> = frames
            .iter()
            .map(|f| {
                let m = classify(f);
                let off = m.rec.payload_off as usize;
                TxJob { rec: m.rec, payload: f[off..off + m.rec.payload_len as usize].to_vec() }
            })
            .collect();
        let mut sim = PktSim::new(w).unwrap();
        let tx = run_tx(&mut sim, &jobs, jobs.len(), &Flow::default()).unwrap();
        assert_eq!(tx.frames.len(), frames.len());
        for ((p, f), t) in pos.iter().zip(&frames).zip(&tx.frames) {
            assert!(!t.bad);
            assert_eq!(hexs(&t.bytes), hexs(f), "TX bytes for {} at {w}", p["name"]);
        }
        println!("{} set, width {w}: {} vectors RX-decoded and TX-rebuilt bit-exactly", set.label, frames.len());
    }
}

#[test]
fn negative_vectors_icrc_verdicts() {
    for set in sets("negative_vectors_icrc_verdicts") {
        negative_set(&set);
    }
}

fn negative_set(set: &VectorSet) {
    let v = vectors(set);
    let neg = v["negative"].as_array().unwrap();
    let frames: Vec<Vec<u8>> = neg.iter().map(|n| unhex(n["hex"].as_str().unwrap())).collect();
    for w in WIDTHS {
        let mut sim = PktSim::new(w).unwrap();
        let run = run_rx(&mut sim, &frames, &Flow { idle_pct: 10, stall_pct: 10, seed: 7 }).unwrap();
        check_rx_run(&frames, &run).unwrap();
        let (mut covered, mut kept, mut icrc_counted) = (0, 0, 0);
        for (n, s) in neg.iter().zip(&run.status) {
            let name = n["name"].as_str().unwrap();
            assert_eq!(s.icrc_ok, n["expect_icrc_valid"].as_bool().unwrap(), "{name}: ICRC verdict");
            match n["category"].as_str().unwrap() {
                "covered" => {
                    covered += 1;
                    assert_ne!(s.reason, 0, "{name}: covered flip must be dropped");
                    if s.reason == DropReason::BadIcrc as u8 {
                        icrc_counted += 1;
                    }
                }
                _ => {
                    kept += 1;
                    let field = n["field"].as_str().unwrap();
                    let v4hdr = field.starts_with("ipv4.tos") || field.starts_with("ipv4.ttl") || field.starts_with("ipv4.header_checksum");
                    if v4hdr {
                        assert_eq!(s.reason, DropReason::BadIpv4Csum as u8, "{name}");
                    } else {
                        assert_eq!(s.reason, 0, "{name}: masked/not-covered flip must be accepted");
                    }
                }
            }
        }
        println!("{} set, width {w}: {covered} covered flips dropped ({icrc_counted} as bad_icrc, rest by an earlier check), {kept} masked/uncovered with valid ICRC", set.label);
        assert_eq!(covered + kept, set.negative, "{} set", set.label);
        assert_eq!(run.counters[DropReason::BadIcrc as usize] as usize, icrc_counted);
    }
}

/// The repository's receive-rule frames (one broken rule each, valid ICRC) through the RTL
/// receive path at both widths: dropped with the rule's reason, counted, equal to the model.
#[test]
fn receive_rule_vectors_rtl() {
    let set = &sets("receive_rule_vectors_rtl")[0];
    let v = vectors(set);
    let rules = v["rules"].as_array().expect("rules[] in the repository's vectors");
    let frames: Vec<Vec<u8>> = rules.iter().map(|r| unhex(r["hex"].as_str().unwrap())).collect();
    let want: Vec<u8> = rules
        .iter()
        .map(|r| {
            let n = r["rule"].as_str().unwrap();
            *DropReason::ALL.iter().find(|d| d.name() == n).unwrap_or_else(|| panic!("unknown rule {n}")) as u8
        })
        .collect();
    for w in WIDTHS {
        let mut sim = PktSim::new(w).unwrap();
        let run = run_rx(&mut sim, &frames, &Flow { idle_pct: 5, stall_pct: 5, seed: 11 }).unwrap();
        assert_eq!(check_rx_run(&frames, &run).unwrap(), 0, "no rule frame is accepted");
        for ((r, s), w) in rules.iter().zip(&run.status).zip(&want) {
            assert!(s.icrc_ok, "{}: ICRC valid", r["name"]);
            assert_eq!(s.reason, *w, "{}", r["name"]);
        }
        for d in DropReason::ALL {
            let n = want.iter().filter(|x| **x == d as u8).count();
            assert_eq!(run.counters[d as usize] as usize, n, "counter {}", d.name());
        }
        println!("width {w}: {} receive-rule frames dropped with their reasons, counters agree", frames.len());
    }
}
