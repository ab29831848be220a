//! Waveforms on demand.
//!
//! In the waveform build (HEMATITE_TRACE=1: `./hematite trace-build`, and the suite's own
//! step for this test) the NIC model writes an FST of a window of cycles. This test reads it
//! back with fst-native, an FST reader independent of Verilator's writer, and checks its time
//! axis against the bench: the file spans exactly the traced cycles (4 ns a cycle, the clock
//! low 2 ns into each), and the RDMA WRITE frames the engine put on the wire show on its
//! transmit port (the first beat, valid and ready before the edge, after a last beat) at the
//! cycles the bench took their first beats, and nowhere else. In the ordinary build, which carries no tracing code, the same call
//! is refused with the way to the waveform build; that is what this test checks there.

use fst_native::{FstFilter, FstHierarchyEntry, FstReader, FstSignalValue};
use hematite_model::transport::mem::MrAccess;
use hematite_model::transport::{QpConfig, SendOp, SendWr, Sge};
use hematite_sim::dma::MemCfg;
use hematite_sim::eng::Engine;
use hematite_sim::rc::{with_keys, RcBench, A_BUF, B_BUF, REGION_LEN as LEN};
use std::collections::HashMap;

const QA: u32 = 3;
const QB: u32 = 0x44;

/// QP QA (on A) connected to QB (on B) with a 1 KiB path MTU; a WRITE of `len` bytes from A's
/// region to B's, with the keys of the regions registered here.
struct Writes {
    keys: (u32, u32),
}

impl Writes {
    fn connect(b: &mut RcBench) -> Writes {
        let ma = b.reg_mr(true, 1, A_BUF, LEN, MrAccess::ALL).unwrap();
        let mb = b.reg_mr(false, 1, B_BUF, LEN, MrAccess::ALL).unwrap();
        let cfg = QpConfig { pmtu: 1024, ..QpConfig::default() };
        b.connect(QA, QB, cfg, cfg, 0).unwrap();
        Writes { keys: (ma.lkey, mb.rkey) }
    }

    fn post(&self, b: &mut RcBench, id: u64, len: u32) {
        let wr = SendWr::new(id, SendOp::Write { remote_addr: B_BUF, rkey: 0 }, vec![Sge { addr: A_BUF, len, lkey: 0 }]);
        b.post_send(QA, &with_keys(wr, self.keys.0, self.keys.1), true).unwrap();
    }
}

/// Every top-level signal of the FST by name: (handle index, width).
fn top_signals(r: &mut FstReader<std::io::BufReader<std::fs::File>>) -> HashMap<String, (fst_native::FstSignalHandle, u32)> {
    let mut depth = 0;
    let mut out = HashMap::new();
    r.read_hierarchy(|e| match e {
        FstHierarchyEntry::Scope { .. } => depth += 1,
        FstHierarchyEntry::UpScope => depth -= 1,
        FstHierarchyEntry::Var { name, handle, length, .. } if depth == 1 => {
            // a vector's name carries its range after a space ("s_rx_tkeep [63:0]"), which
            // GTKWave drops ("TOP.s_rx_tkeep[63:0]")
            let base = name.split(' ').next().unwrap_or(&name).to_string();
            out.insert(base, (handle, length));
        }
        _ => {}
    })
    .expect("the FST's hierarchy");
    out
}

#[test]
fn a_waveform_window_shows_the_frames_at_their_cycles() {
    let path = std::env::temp_dir().join(format!("hm-trace-test-{}.fst", std::process::id()));
    let mut b = RcBench::new(MemCfg::default()).unwrap();
    if !Engine::traced() {
        let e = b.a.eng.trace_open(&path, 0).unwrap_err();
        assert!(e.contains("HEMATITE_TRACE=1") && e.contains("./hematite trace-build"), "{e}");
        assert!(!path.exists(), "nothing written by the ordinary build");
        return;
    }
    let w = Writes::connect(&mut b);
    // the MAC withholds tready on 30 % of the cycles, so a beat needs both valid and ready
    b.a.eng.tx_stall_pct = 30;
    b.run_for(50);
    assert_eq!(b.a.eng.tx_start.len(), b.a.eng.tx.len(), "no frame under way when the window opens");
    let from = b.a.eng.cycle();
    b.a.eng.trace_open(&path, from).unwrap();
    assert!(b.a.eng.trace_open(&path, from).unwrap_err().contains("open already"));
    // one 3 KiB WRITE: three frames of 1 KiB
    w.post(&mut b, 1, 3072);
    b.run(1, 50_000).unwrap();
    let to = b.a.eng.cycle();
    b.a.eng.trace_close();
    let starts: Vec<u64> = b.a.eng.tx_start.iter().copied().filter(|&c| c >= from).collect();
    assert_eq!(starts.len(), 3, "three WRITE frames in the window");

    let f = std::io::BufReader::new(std::fs::File::open(&path).unwrap());
    let mut r = FstReader::open_and_read_time_table(f).expect("an FST file");
    let h = r.get_header();
    assert_eq!(h.timescale_exponent, -12, "picoseconds");
    assert_eq!((h.start_time, h.end_time), (from * 4000 + 2000, to * 4000), "the traced cycles {from}..{to}");
    let sig = top_signals(&mut r);
    let names = ["clk", "m_tx_tvalid", "m_tx_tready", "m_tx_tlast"];
    for n in names {
        assert_eq!(sig.get(n).map(|s| s.1), Some(1), "a 1-bit top-level {n}");
    }
    // the GTKWave save file of docs/ names signals of this file, with their widths
    let gtkw = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/waveforms.gtkw")).unwrap();
    let mut listed = 0;
    for l in gtkw.lines().filter_map(|l| l.strip_prefix("TOP.")) {
        let (name, width) = match l.split_once('[') {
            Some((n, r)) => (n, r.trim_end_matches(']').split_once(':').map(|(m, _)| m.parse::<u32>().unwrap() + 1).unwrap()),
            None => (l, 1),
        };
        assert_eq!(sig.get(name).map(|s| s.1), Some(width), "docs/waveforms.gtkw: TOP.{l}");
        listed += 1;
    }
    assert!(listed >= 30, "docs/waveforms.gtkw lists the main interfaces ({listed} signals)");
    let idx: Vec<usize> = names.iter().map(|n| sig[*n].0.get_index()).collect();
    let handles: Vec<_> = idx.iter().map(|&i| fst_native::FstSignalHandle::from_index(i)).collect();
    let mut changes: HashMap<usize, Vec<(u64, bool)>> = HashMap::new();
    r.read_signals(&FstFilter::filter_signals(handles), |t, hd, v| {
        if let FstSignalValue::String(s) = v {
            changes.entry(hd.get_index()).or_default().push((t, s == b"1"));
        }
    })
    .expect("the FST's signals");
    // the clock: low at 2 ns into each cycle, high at its end
    let clk = &changes[&idx[0]];
    assert_eq!(clk.len() as u64, 2 * (to - from), "a clock edge every 2 ns");
    for (k, &(t, v)) in clk.iter().enumerate() {
        assert_eq!((t, v), (from * 4000 + 2000 * (k as u64 + 1), k % 2 == 1), "clock change {k}");
    }
    // the value of a signal at time t (its last change at or before t)
    let at = |i: usize, t: u64| changes[&idx[i]].iter().take_while(|c| c.0 <= t).last().map(|c| c.1).unwrap_or(false);
    // a beat: valid and ready before the edge; a frame's first: the first beat after a last
    // one (no frame was under way when the window opened)
    let beat = |c: u64| at(1, c * 4000 + 2000) && at(2, c * 4000 + 2000);
    let mut firsts = Vec::new();
    let mut in_frame = false;
    for c in from..to {
        if beat(c) {
            if !in_frame {
                firsts.push(c);
            }
            in_frame = !at(3, c * 4000 + 2000);
        }
    }
    assert_eq!(firsts, starts, "the frames' first beats in the waveform and in the bench");
    std::fs::remove_file(&path).unwrap();
}

/// `hematite-sim device` in `dir` (socket d.sock, wire d.wire) for `max` cycles, with the
/// firmware image and the waveform options `trace` (its stderr piped).
fn device(dir: &std::path::Path, max: u64, trace: &[&str]) -> std::process::Child {
    let path = |f: &str| dir.join(f).into_os_string();
    let mut args: Vec<std::ffi::OsString> = ["device", "--max-cycles", &max.to_string(), "--fw"].map(Into::into).into();
    args.push(hematite_sim::fw::image_path().into_os_string());
    for (opt, file) in [("--socket", "d.sock"), ("--wire-local", "d.wire"), ("--wire-peer", "peer.wire")] {
        args.extend([opt.into(), path(file)]);
    }
    args.extend(trace.iter().map(Into::into));
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_hematite-sim"));
    c.args(args).stderr(std::process::Stdio::piped());
    c.spawn().expect("run hematite-sim device")
}

/// A fresh scratch folder for one test (the process id in its name).
fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// (exited with 0, stderr) of a device run.
fn finished(c: std::process::Child) -> (bool, String) {
    let out = c.wait_with_output().unwrap();
    (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// The device process's `--trace` window: in the waveform build, a window after the firmware
/// load is traced exactly (the FST spans its cycles) and one that starts inside the load
/// starts at the first traceable cycle, N cycles long, and says so; in the ordinary build the
/// option is refused before the device creates its socket.
#[test]
fn the_device_traces_its_window_or_refuses() {
    let dir = scratch("hm-trace-dev");
    let run = |fst: &std::path::Path, from: u64, cycles: u64| {
        finished(device(&dir, 30_000, &["--trace", fst.to_str().unwrap(), "--trace-from", &from.to_string(), "--trace-cycles", &cycles.to_string()]))
    };
    let span = |fst: &std::path::Path| {
        let r = FstReader::open(std::io::BufReader::new(std::fs::File::open(fst).unwrap())).expect("an FST file");
        let h = r.get_header();
        (h.start_time, h.end_time)
    };
    let fst = dir.join("w.fst");
    if !Engine::traced() {
        let (ok, err) = run(&fst, 20_000, 100);
        assert!(!ok && err.contains("./hematite trace-build"), "{err}");
        assert!(!dir.join("d.sock").exists(), "no socket left behind");
        std::fs::remove_dir_all(&dir).unwrap();
        return;
    }
    let (ok, err) = run(&fst, 20_000, 500);
    assert!(ok, "{err}");
    assert!(err.contains(&format!("waveform of cycles 20000..20500 written to {}", fst.display())), "{err}");
    assert_eq!(span(&fst), (20_000 * 4000 + 2000, 20_500 * 4000), "cycles 20000..20500");
    // a window inside the firmware load starts at the first traceable cycle, 50 cycles long
    let (ok, err) = run(&fst, 100, 50);
    assert!(ok && err.contains("(cycle 100 falls in the reset and the firmware load"), "{err}");
    let i = err.find("waveform from cycle ").unwrap() + "waveform from cycle ".len();
    let first: u64 = err[i..].split(' ').next().unwrap().parse().unwrap();
    assert!(first > 100 && err.contains(&format!("waveform of cycles {first}..{} written", first + 50)), "{err}");
    assert_eq!(span(&fst), (first * 4000 + 2000, (first + 50) * 4000), "50 cycles from the first traceable one");
    // the process ends inside the window: written, cut short, and said so
    let (ok, err) = run(&fst, 29_900, 1_000);
    assert!(ok && err.contains("(cut short: the device process ended; 1000 cycles were asked)"), "{err}");
    assert_eq!(span(&fst).0, 29_900 * 4000 + 2000);
    // a window the process never reaches: no file, and said so
    std::fs::remove_file(&fst).unwrap();
    let (ok, err) = run(&fst, 50_000, 10);
    assert!(ok && err.contains("the waveform window was never reached") && !fst.exists(), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A triggered window (`--trace-on drop:not_ip`): a frame that is not IP sent to the device's
/// wire is dropped by the RX path; the waveform covers the cycles before it and after it,
/// traced on the shadow model that runs behind the engine, and shows the drop at the very
/// cycle the live model reported it, with the frame arriving on the receive port before. A trigger that never fires leaves
/// no file. In the ordinary build, `--trace-on` is refused like `--trace`.
#[test]
fn a_triggered_window_replays_the_cycles_before_the_event() {
    let dir = scratch("hm-trace-trig");
    let fst = dir.join("t.fst");
    let trig = |max: u64, on: &str| device(&dir, max, &["--trace", fst.to_str().unwrap(), "--trace-on", on, "--trace-before", "3000", "--trace-after", "400"]);
    if !Engine::traced() {
        let (ok, err) = finished(trig(20_000, "error-cqe"));
        assert!(!ok && err.contains("./hematite trace-build"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
        return;
    }
    // never fired: nothing written
    let (ok, err) = finished(trig(20_000, "error-cqe"));
    assert!(ok && err.contains("the waveform trigger never fired"), "{err}");
    assert!(!fst.exists(), "no waveform when the trigger never fired");

    let child = trig(400_000, "drop:not_ip");
    for _ in 0..3000 {
        if dir.join("d.sock").exists() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(dir.join("d.sock").exists(), "the device came up");
    std::thread::sleep(std::time::Duration::from_millis(100));
    // to the port's MAC (02:00:00:00:00:01), EtherType 0x88B5 (local experimental): not IP
    let mut frame = vec![0x02, 0, 0, 0, 0, 0x01, 0x02, 0, 0, 0, 0, 0x99, 0x88, 0xB5];
    frame.resize(64, 0x5A);
    std::os::unix::net::UnixDatagram::unbound().unwrap().send_to(&frame, dir.join("d.wire")).unwrap();
    let (ok, err) = finished(child);
    assert!(ok, "{err}");
    let num = |after: &str, upto: char| -> u64 {
        let i = err.find(after).unwrap_or_else(|| panic!("`{after}` in {err}")) + after.len();
        err[i..].split(upto).next().unwrap().parse().unwrap()
    };
    let t = num("waveform trigger at cycle ", ':');
    assert!(err.contains(&format!("waveform trigger at cycle {t}: a frame dropped by the RX path (not_ip)")), "{err}");
    let (from, until) = (num("waveform of cycles ", '.'), num(&format!("waveform of cycles {}..", num("waveform of cycles ", '.')), ' '));
    assert_eq!(until, t + 401, "the trigger's cycle and 400 after it");
    assert!(from <= t && from >= t - 3000, "{from}..{until} around {t}");
    assert!(!dir.join("t.fst.state0").exists() && !dir.join("t.fst.state1").exists(), "the saved states are removed");

    let f = std::io::BufReader::new(std::fs::File::open(&fst).unwrap());
    let mut r = FstReader::open(f).expect("an FST file");
    let h = r.get_header();
    assert_eq!((h.start_time, h.end_time), (from * 4000 + 2000, until * 4000), "cycles {from}..{until}");
    let sig = top_signals(&mut r);
    let names = ["dbg_rx_valid", "dbg_rx_reason", "s_rx_tvalid"];
    let idx: Vec<usize> = names.iter().map(|n| sig.get(*n).unwrap_or_else(|| panic!("{n} in the FST")).0.get_index()).collect();
    let mut changes: HashMap<usize, Vec<(u64, u64)>> = HashMap::new();
    r.read_signals(&FstFilter::filter_signals(idx.iter().map(|&i| fst_native::FstSignalHandle::from_index(i)).collect()), |tm, hd, v| {
        if let FstSignalValue::String(s) = v {
            let v = u64::from_str_radix(std::str::from_utf8(s).unwrap(), 2).unwrap_or(u64::MAX);
            changes.entry(hd.get_index()).or_default().push((tm, v));
        }
    })
    .expect("the FST's signals");
    let at = |i: usize, c: u64| changes.get(&idx[i]).and_then(|v| v.iter().take_while(|x| x.0 <= c * 4000 + 2000).last()).map(|x| x.1).unwrap_or(0);
    let reports: Vec<u64> = (from..until).filter(|&c| at(0, c) == 1).collect();
    assert_eq!(reports, vec![t], "the replayed RX path reports one frame, at the live model's cycle");
    assert_eq!(at(1, t), 2, "reason not_ip (HM_RSN_NOT_IP)");
    assert!((from..t).any(|c| at(2, c) == 1), "the frame arrives on the receive port before it is dropped");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The waveform options' bad combinations are refused with a message, in either build,
/// before the device starts anything.
#[test]
fn bad_waveform_options_are_refused() {
    let dir = scratch("hm-trace-opts");
    let fst = dir.join("x.fst");
    let f = fst.to_str().unwrap();
    for (args, want) in [
        (vec!["--trace-on", "drop"], "need --trace FILE.fst"),
        (vec!["--trace-cycles", "10"], "need --trace FILE.fst"),
        (vec!["--trace", f, "--trace-on", "drop", "--trace-from", "5"], "--trace-on goes with"),
        (vec!["--trace", f, "--trace-before", "5"], "need --trace-on EVENT"),
        (vec!["--trace", f, "--trace-on", "drop:nonsense"], "no such drop reason"),
        (vec!["--trace", f, "--trace-on", "sometimes"], "one of error-cqe, drop, drop:REASON, retransmit"),
        (vec!["--trace", f, "--trace-cycles", "many"], "--trace-cycles:"),
        (vec!["--trace", dir.join("no/such/dir/x.fst").to_str().unwrap(), "--trace-cycles", "5"], if Engine::traced() { "No such file" } else { "./hematite trace-build" }),
    ] {
        let (ok, err) = finished(device(&dir, 1_000, &args));
        assert!(!ok && err.contains(want), "{args:?}: {err}");
        assert!(!dir.join("d.sock").exists() && !fst.exists(), "{args:?}: nothing left behind");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The `retransmit` trigger's test of a frame (`eng::retransmission`), on frames the RTL built:
/// a WRITE of three packets, then each sent again, then a later one; the responder's ACKs are
/// not requests.
#[test]
fn a_retransmission_is_a_request_that_goes_back() {
    use hematite_sim::eng::retransmission;
    let mut b = RcBench::new(MemCfg::default()).unwrap();
    let w = Writes::connect(&mut b);
    for _ in 0..2 {
        w.post(&mut b, 1, 3072);
        b.run(1, 50_000).unwrap();
    }
    let req: Vec<Vec<u8>> = b.a.eng.tx.iter().map(|f| f.0.clone()).collect();
    assert_eq!(req.len(), 6, "two WRITEs of three packets");
    let psn = |f: &[u8]| hematite_model::wire::parse_frame(f).unwrap().bth.psn;
    let mut top = HashMap::new();
    for f in &req[..3] {
        assert_eq!(retransmission(&mut top, f), None, "first transmissions");
    }
    // ACKs from the responder (the model peer) are not requests, wherever their PSN is
    let acks: Vec<&Vec<u8>> = b.wire.iter().filter(|w| !w.1).map(|w| &w.2).collect();
    assert!(!acks.is_empty());
    for f in acks {
        assert_eq!(retransmission(&mut top, f), None, "an ACK");
    }
    for f in &req[..3] {
        assert_eq!(retransmission(&mut top, f), Some((QB, psn(f))), "sent again");
    }
    // the next message's packets are new, and then the first message's are old again
    for f in &req[3..] {
        assert_eq!(retransmission(&mut top, f), None, "a later PSN");
    }
    assert_eq!(retransmission(&mut top, &req[2]), Some((QB, psn(&req[2]))));
    assert_eq!(retransmission(&mut top, &req[5]), Some((QB, psn(&req[5]))));
    // what does not parse is not a retransmission
    assert_eq!(retransmission(&mut top, &req[0][..20]), None);
}

/// The engine's `tap_retx` over a wire that loses two frames: it shows, at the clock a request
/// frame ends, each frame whose PSN goes back (checked against the engine's frame log), the
/// first of them the first lost one; `watch_retx` is off by default without a shadow model.
#[test]
fn the_engine_taps_its_retransmissions() {
    let mut b = RcBench::new(MemCfg::default()).unwrap();
    let w = Writes::connect(&mut b);
    assert!(!b.a.eng.watch_retx, "off without a shadow model");
    b.a.eng.watch_retx = true;
    // the wire loses the engine's 6th and 20th frames: the peer NAKs, the engine goes back
    b.drop_tx = vec![5, 19];
    for k in 0..8 {
        w.post(&mut b, k, 4096);
    }
    let mut taps = Vec::new();
    for _ in 0..2_000_000 {
        if b.a.cqes.len() >= 8 {
            break;
        }
        b.run_for(0); // one clock
        if let Some(t) = b.a.eng.tap_retx {
            taps.push((*b.a.eng.tx_cycle.last().unwrap(), t));
        }
    }
    // the engine's frames, in order, with the cycles they ended: the first PSN of each QP
    // and every later one that is not beyond the highest before it
    let mut top: Option<u32> = None;
    let mut want = Vec::new();
    for (f, c) in b.a.eng.tx.iter().zip(&b.a.eng.tx_cycle) {
        let p = hematite_model::wire::parse_frame(&f.0).unwrap();
        if !hematite_model::wire::is_rc_request(p.bth.opcode) {
            continue;
        }
        let back = |t: u32| hematite_model::psn::le(p.bth.psn, t);
        match top {
            Some(t) if back(t) => want.push((*c, (QB, p.bth.psn))),
            _ => top = Some(p.bth.psn),
        }
    }
    assert_eq!(b.a.cqes.len(), 8, "the WRITEs complete");
    assert!(taps.len() >= 2, "two losses, two retransmissions at least ({} frames sent)", b.a.eng.tx.len());
    assert_eq!(taps, want, "the taps are the frames that went back, at their cycles");
    let psn = |i: usize| hematite_model::wire::parse_frame(&b.a.eng.tx[i].0).unwrap().bth.psn;
    assert_eq!(taps[0].1, (QB, psn(5)), "the first goes back to the first lost frame");
}
