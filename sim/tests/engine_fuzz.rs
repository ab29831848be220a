//! The engine fuzzer (sim/src/fuzz_engine.rs): a short campaign finds nothing, and each of its
//! checks fires when the harness breaks its own premise on purpose (so a clean run means
//! something). The long runs are `./hematite fuzz engine --count N` (docs/verification.md).
use hematite_sim::fuzz_engine::{engine_campaign, EngineFuzzOpts, Kind, SelfTest};
use std::path::PathBuf;

fn out(name: &str) -> PathBuf {
    let d = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../build/fuzz-test").join(name);
    let _ = std::fs::remove_dir_all(&d);
    d
}

#[test]
fn a_short_campaign_finds_nothing() {
    let o = EngineFuzzOpts { count: 1_200, seed: 7, per_episode: 200, wire_faults: false, self_test: None };
    let rep = engine_campaign(&o, &out("short"), |_| {}).unwrap();
    assert_eq!(rep.findings, 0, "findings in build/fuzz-test/short: {rep:?}");
    assert_eq!(rep.cases, 1_200);
    // every kind of frame was sent, and the engines answered: NAKs, duplicates, drops
    for k in [Kind::LiveRequest, Kind::LiveResponse, Kind::VictimRequest, Kind::VictimResponse, Kind::OtherService, Kind::NoQp, Kind::Mutant] {
        assert!(rep.kinds.get(&k).copied().unwrap_or(0) > 0, "no {k:?} frame: {:?}", rep.kinds);
    }
    assert!(rep.verdicts.get("accepted").copied().unwrap_or(0) > 600, "{:?}", rep.verdicts);
    for what in ["NAKs error sent", "NAKs sequence/RNR sent", "duplicate requests", "responder drops", "completer drops"] {
        assert!(rep.engine.get(what).copied().unwrap_or(0) > 0, "no {what}: {:?}", rep.engine);
    }
    assert!(rep.real_wrs > 50, "real traffic ran: {}", rep.real_wrs);
}

#[test]
fn with_wire_faults_on_the_real_traffic_it_finds_nothing() {
    let o = EngineFuzzOpts { count: 400, seed: 3, per_episode: 200, wire_faults: true, self_test: None };
    let rep = engine_campaign(&o, &out("faults"), |_| {}).unwrap();
    assert_eq!(rep.findings, 0, "findings in build/fuzz-test/faults: {rep:?}");
}

#[test]
fn forged_requests_inside_a_live_window_are_caught() {
    let o = EngineFuzzOpts { count: 400, seed: 5, per_episode: 200, wire_faults: false, self_test: Some(SelfTest::InWindowRequests) };
    let rep = engine_campaign(&o, &out("self-window"), |_| {}).unwrap();
    assert!(rep.findings > 0, "in-window forgeries went unnoticed: {rep:?}");
}

#[test]
fn a_remotely_writable_bait_region_is_caught() {
    let o = EngineFuzzOpts { count: 400, seed: 5, per_episode: 200, wire_faults: false, self_test: Some(SelfTest::BaitWritable) };
    let rep = engine_campaign(&o, &out("self-bait"), |_| {}).unwrap();
    assert!(rep.findings > 0, "writes into BAIT went unnoticed: {rep:?}");
    let text = std::fs::read_to_string(out_dir("self-bait").join("engine-finding-1.txt")).unwrap();
    assert!(text.contains("BAIT") || text.contains("outside the registered regions"), "{text}");
}

fn out_dir(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../build/fuzz-test").join(name)
}
