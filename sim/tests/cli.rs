//! The `hematite-sim` command line as a user runs it: replay output per frame, JSON keys,
//! build through the RTL TX path, and clear non-zero exits on bad input.
use std::process::Command;

/// A capture of the repository's Soft-RoCE set (tests/data/captures).
fn own_capture(name: &str) -> std::path::PathBuf {
    let p = std::path::PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/data/captures")).join(name);
    assert!(p.is_file(), "{} missing", p.display());
    p
}

fn sim() -> Command {
    Command::new(env!("CARGO_BIN_EXE_hematite-sim"))
}

#[test]
fn replay_json_reports_every_frame() {
    let cap = own_capture("rc_send_small.pcapng.xz");
    let out = sim().args(["replay", "--json", "--pcap"]).arg(&cap).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let rows: Vec<serde_json::Value> =
        String::from_utf8(out.stdout).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let frames = hematite_model::capture::read_frames(&cap).unwrap();
    assert_eq!(rows.len(), frames.len());
    let mut accepted = 0;
    for (i, (r, f)) in rows.iter().zip(&frames).enumerate() {
        assert_eq!(r["frame"], i + 1);
        let m = hematite_model::classify(f);
        if m.reason.is_none() {
            accepted += 1;
            assert_eq!(r["verdict"], "accept");
            assert_eq!(r["opcode"], format!("0x{:02x}", m.rec.opcode));
            assert_eq!(r["dest_qp"], format!("0x{:06x}", m.rec.dest_qp));
            assert_eq!(r["psn"], m.rec.psn);
            assert_eq!(r["payload_len"], m.rec.payload_len);
            assert_eq!(r["icrc_ok"], true);
        } else {
            assert_eq!(r["verdict"], "drop");
            assert_eq!(r["reason"], m.reason.unwrap().name());
        }
    }
    assert_eq!(accepted, 100, "the capture's 100 RoCEv2 frames (tests/data/captures/SUMMARY.md)");
    // text mode: one line per frame with key=value pairs
    let out = sim().args(["replay", "--width", "256", "--pcap"]).arg(&cap).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text.lines().count(), frames.len());
    assert!(text.lines().all(|l| l.starts_with("frame=") && l.contains(" verdict=") && l.contains(" psn=")));
}

#[test]
fn build_writes_frames_equal_to_the_model() {
    let dir = std::env::temp_dir().join(format!("hm-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out_pcap = dir.join("out.pcap");
    let json = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/examples/demo_records.json");
    // record 10 has a reserved opcode: the hardware must reject it, which is an error...
    let out = sim().args(["build", "--json", json, "--pcap"]).arg(&out_pcap).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--allow-rejects"));
    // ... unless asked to send the rest
    let out = sim().args(["build", "--allow-rejects", "--json", json, "--pcap"]).arg(&out_pcap).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(stdout.lines().all(|l| l.ends_with("model=match")));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("record 10: rejected"), "the reserved-opcode record is reported");
    let frames = hematite_model::capture::read_frames(&out_pcap).unwrap();
    assert_eq!(frames.len(), 9);
    for f in &frames {
        assert_eq!(hematite_model::classify(f).reason, None);
    }
    // bad input: unknown field, value too wide, not JSON
    for (name, text) in [
        ("unknown.json", r#"[{"opcode": 4, "colour": 1}]"#),
        ("wide.json", r#"[{"opcode": 4, "dest_qp": 16777216}]"#),
        ("broken.json", "not json"),
        ("v6addr_on_v4.json", r#"[{"opcode": 4, "ip_src": "fd00::1"}]"#),
        ("huge.json", r#"[{"opcode": 4, "payload_len": 70000}]"#),
        ("nonhex.json", r#"[{"opcode": 4, "payload_hex": "zz"}]"#),
    ] {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        let out = sim().args(["build", "--json"]).arg(&p).arg("--pcap").arg(dir.join("x.pcap")).output().unwrap();
        assert!(!out.status.success(), "{name} must fail");
        assert!(!out.stderr.is_empty());
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn help_and_closed_pipes_are_not_errors() {
    let out = sim().arg("--help").output().unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("replay"));
    // a reader that stops early (`| head -n 1`) ends the output quietly
    let cap = own_capture("rc_send_bw.pcapng.xz");
    let mut child = sim()
        .args(["replay", "--pcap"])
        .arg(&cap)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    {
        use std::io::BufRead;
        let mut first = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut first).unwrap();
        assert!(first.starts_with("frame=1 "));
    } // stdout closed here
    assert!(child.wait().unwrap().success());
    // --only and --limit
    let out = sim().args(["replay", "--only", "accept", "--limit", "3", "--pcap"]).arg(&cap).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text.lines().count(), 3);
    assert!(text.lines().all(|l| l.contains("verdict=accept")));
}

#[test]
fn bad_arguments_fail_clearly() {
    for args in [
        vec!["replay"],
        vec!["replay", "--pcap", "/nonexistent.pcap"],
        vec!["replay", "--pcap", "/etc/hostname"],
        vec!["replay", "--width", "128", "--pcap", "/etc/hostname"],
        vec!["frobnicate"],
        vec!["replay", "--only", "maybe", "--pcap", "/etc/hostname"],
        vec![],
    ] {
        let out = sim().args(&args).output().unwrap();
        assert!(!out.status.success(), "{args:?} must fail");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("hematite-sim") || err.contains("usage"), "{args:?}: {err}");
    }
}

#[test]
fn demo_attach_refuses_what_it_cannot_do() {
    // --attach starts no device: options for the devices it would start are refused, a folder
    // given twice is refused, and a folder where nothing serves fails at once, naming the socket
    let dir = std::env::temp_dir().join(format!("hm-attach-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let d = dir.to_str().unwrap();
    for (args, says) in [
        (vec!["demo", "--attach", d, "--loss", "0.01"], "--attach starts no device"),
        (vec!["demo", "--attach", d, "--fw", "/x.hex"], "--attach starts no device"),
        (vec!["demo", "--attach", d, "--dir", d], "name the same folder"),
        (vec!["demo", "--dir", d, "--attach", d], "name the same folder"),
        (vec!["demo", "--attach", d, "--count", "2"], "no device serves"),
    ] {
        let out = sim().args(&args).output().unwrap();
        assert!(!out.status.success(), "{args:?} must fail");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
