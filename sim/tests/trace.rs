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
    let ma = b.reg_mr(true, 1, A_BUF, LEN, MrAccess::ALL).unwrap();
    let mb = b.reg_mr(false, 1, B_BUF, LEN, MrAccess::ALL).unwrap();
    let cfg = QpConfig { pmtu: 1024, ..QpConfig::default() };
    b.connect(QA, QB, cfg, cfg, 0).unwrap();
    b.run_for(50);
    assert_eq!(b.a.eng.tx_start.len(), b.a.eng.tx.len(), "no frame under way when the window opens");
    let from = b.a.eng.cycle();
    b.a.eng.trace_open(&path, from).unwrap();
    assert!(b.a.eng.trace_open(&path, from).unwrap_err().contains("open already"));
    // one 3 KiB WRITE: three frames of 1 KiB
    let wr = SendWr::new(1, SendOp::Write { remote_addr: B_BUF, rkey: 0 }, vec![Sge { addr: A_BUF, len: 3072, lkey: 0 }]);
    b.post_send(QA, &with_keys(wr, ma.lkey, mb.rkey), true).unwrap();
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

/// The device process's `--trace` window: in the waveform build, a window after the firmware
/// load is traced exactly (the FST spans its cycles) and one that starts inside the load
/// starts at the first traceable cycle, N cycles long, and says so; in the ordinary build the
/// option is refused before the device creates its socket.
#[test]
fn the_device_traces_its_window_or_refuses() {
    let dir = std::env::temp_dir().join(format!("hm-trace-dev-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let fw = concat!(env!("CARGO_MANIFEST_DIR"), "/../build/fw/firmware.hex");
    let run = |fst: &std::path::Path, from: u64, cycles: u64| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_hematite-sim"))
            .args(["device", "--max-cycles", "30000", "--fw", fw])
            .arg("--socket")
            .arg(dir.join("d.sock"))
            .arg("--wire-local")
            .arg(dir.join("d.wire"))
            .arg("--wire-peer")
            .arg(dir.join("peer.wire"))
            .arg("--trace")
            .arg(fst)
            .args(["--trace-from", &from.to_string(), "--trace-cycles", &cycles.to_string()])
            .output()
            .expect("run hematite-sim device");
        (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
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
    let (t0, t1) = span(&fst);
    assert!(t0 > 100 * 4000 && t1 - (t0 - 2000) == 50 * 4000, "{t0}..{t1}");
    // the process ends inside the window: written, cut short, and said so
    let (ok, err) = run(&fst, 29_900, 1_000);
    assert!(ok && err.contains("(cut short: the device process ended; 1000 cycles were asked)"), "{err}");
    assert_eq!(span(&fst).0, 29_900 * 4000 + 2000);
    std::fs::remove_dir_all(&dir).unwrap();
}
