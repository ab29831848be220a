//! Cycle-counted tests and benchmarks of the packet path: 10,000 back-to-back mixed-size
//! frames with and without random idle/back-pressure (output must equal input; without
//! back-pressure there must be no bubble), and minimum-size frames at one frame per beat.
//! Figures printed: cycles per packet, bytes per cycle, and the ratio to the ideal of one
//! beat per cycle (the baseline measured in the same run from the input's own beat count).
mod common;
use common::*;
use hematite_model::build_frame;
use hematite_sim::{run_rx, run_tx, Flow, PktSim, TxJob, TxRun, WIDTHS};

const N: usize = 10_000;

/// Random idle cycles (20 %) and back-pressure (30 %) on both sides of a mixed-frame run.
fn pressured(seed: u64) -> Flow {
    Flow { idle_pct: 20, stall_pct: 30, seed }
}

/// The figures of a mixed-frame run without back-pressure (`dir` "RX" or "TX"): `beats` on the
/// side that must not stall against the `ideal` of one beat per cycle; `tail` ends the line.
fn print_free_run(dir: &str, w: usize, bytes: usize, beats: u64, cycles: u64, ideal: u64, tail: &str) {
    println!(
        "{dir} {w:3}b mixed: {N} frames, {} bytes, {} beats in {} cycles: {:.2} cycles/frame, {:.2} bytes/cycle, {:.4} of ideal (latency incl.){tail}",
        bytes, beats, cycles, cycles as f64 / N as f64, bytes as f64 / cycles as f64,
        ideal as f64 / cycles as f64
    );
}

/// A mixed-frame run under [`pressured`] flow whose output equalled its input.
fn print_pressured_run(dir: &str, w: usize, cycles: u64) {
    println!("{dir} {w:3}b mixed, 20% idle / 30% back-pressure: output equals input, {cycles} cycles");
}

/// The TX run sent the `want` frames, good and in order (`at` says where, for the message).
fn assert_tx_frames(want: &[Vec<u8>], run: &TxRun, at: &str) {
    assert_eq!(run.frames.len(), N);
    for (i, (f, g)) in want.iter().zip(&run.frames).enumerate() {
        assert!(!g.bad && &g.bytes == f, "frame {i} differs at {at}");
    }
}

#[test]
fn rx_10k_mixed_frames() {
    let jobs = mixed_jobs(N, 0xB0B);
    let frames: Vec<Vec<u8>> = jobs.iter().map(|(r, p)| build_frame(r, p).unwrap()).collect();
    let bytes: usize = frames.iter().map(|f| f.len()).sum();
    for w in WIDTHS {
        let kw = w / 8;
        let ideal: u64 = frames.iter().map(|f| f.len().div_ceil(kw) as u64).sum();
        // no back-pressure: the input never stalls
        let mut sim = PktSim::new(w).unwrap();
        let run = run_rx(&mut sim, &frames, &Flow::default()).unwrap();
        assert_eq!(check_rx_run(&frames, &run).unwrap(), N);
        assert_eq!(run.in_beats, ideal);
        assert_eq!(run.in_stalls, 0, "RX stalled its input without back-pressure at {w} bits");
        print_free_run("RX", w, bytes, run.in_beats, run.cycles, ideal, "");
        assert!(run.cycles <= ideal + 64, "RX took {} cycles for {ideal} beats", run.cycles);
        // random idle cycles and back-pressure on both outputs
        let mut sim = PktSim::new(w).unwrap();
        let run = run_rx(&mut sim, &frames, &pressured(42)).unwrap();
        assert_eq!(check_rx_run(&frames, &run).unwrap(), N);
        print_pressured_run("RX", w, run.cycles);
    }
}

#[test]
fn tx_10k_mixed_frames() {
    let jobs = mixed_jobs(N, 0xCAFE);
    let want: Vec<Vec<u8>> = jobs.iter().map(|(r, p)| build_frame(r, p).unwrap()).collect();
    let tj: Vec<TxJob> = jobs.iter().map(|(r, p)| TxJob { rec: *r, payload: p.clone() }).collect();
    let bytes: usize = want.iter().map(|f| f.len()).sum();
    for w in WIDTHS {
        let kw = w / 8;
        let ideal: u64 = want.iter().map(|f| f.len().div_ceil(kw) as u64).sum();
        let mut sim = PktSim::new(w).unwrap();
        let run = run_tx(&mut sim, &tj, N, &Flow::default()).unwrap();
        assert_tx_frames(&want, &run, &format!("{w} bits"));
        assert_eq!(run.out_beats, ideal);
        assert_eq!(run.out_gaps, 0, "TX left bubbles between output beats at {w} bits");
        print_free_run("TX", w, bytes, run.out_beats, run.cycles, ideal, ", 0 bubbles");
        let mut sim = PktSim::new(w).unwrap();
        let run = run_tx(&mut sim, &tj, N, &pressured(43)).unwrap();
        assert_tx_frames(&want, &run, &format!("{w} bits under back-pressure"));
        print_pressured_run("TX", w, run.cycles);
    }
}

#[test]
fn minimum_size_frames_one_per_beat() {
    // ACKs (62 bytes) and zero-length SENDs (58 bytes + 2 bytes Ethernet padding)
    let mut jobs = mixed_jobs(N, 7);
    for (i, (r, p)) in jobs.iter_mut().enumerate() {
        r.opcode = if i % 2 == 0 { 0x11 } else { 0x04 };
        r.ipv6 = false;
        r.vlan_valid = false;
        r.ip_src &= 0xFFFF_FFFF;
        r.ip_dst &= 0xFFFF_FFFF;
        r.flow_label = 0;
        r.payload_len = 0;
        p.clear();
    }
    let frames: Vec<Vec<u8>> = jobs.iter().map(|(r, p)| build_frame(r, p).unwrap()).collect();
    assert!(frames.iter().all(|f| f.len() <= 64));
    for w in WIDTHS {
        let per = 64usize.div_ceil(w / 8) as u64;
        let mut sim = PktSim::new(w).unwrap();
        let run = run_rx(&mut sim, &frames, &Flow::default()).unwrap();
        assert_eq!(check_rx_run(&frames, &run).unwrap(), N);
        assert_eq!(run.in_stalls, 0);
        let cpf = run.cycles as f64 / N as f64;
        println!("RX {w:3}b minimum-size: {N} frames in {} cycles = {:.4} cycles/frame (baseline {per} beat(s)/frame: ratio {:.4})", run.cycles, cpf, per as f64 / cpf);
        assert!(run.cycles <= per * N as u64 + 16);
        let tj: Vec<TxJob> = jobs.iter().map(|(r, p)| TxJob { rec: *r, payload: p.clone() }).collect();
        let mut sim = PktSim::new(w).unwrap();
        let tx = run_tx(&mut sim, &tj, N, &Flow::default()).unwrap();
        assert_eq!(tx.frames.len(), N);
        assert_eq!(tx.out_gaps, 0);
        for (f, g) in frames.iter().zip(&tx.frames) {
            assert_eq!(&g.bytes, f);
        }
        let cpf = tx.cycles as f64 / N as f64;
        println!("TX {w:3}b minimum-size: {N} frames in {} cycles = {:.4} cycles/frame (baseline {per}: ratio {:.4})", tx.cycles, cpf, per as f64 / cpf);
        assert!(tx.cycles <= per * N as u64 + 32);
    }
}

#[test]
fn single_frame_latency() {
    // one 62-byte ACK and one 1 KiB WRITE: cycles from the first beat offered to the RX verdict
    // on the monitor port, and from the record offered to the TX frame's last beat out
    for len in [0usize, 1024] {
        let mut jobs = mixed_jobs(1, 11);
        let (r, p) = &mut jobs[0];
        r.opcode = if len == 0 { 0x11 } else { 0x0A };
        r.payload_len = len as u16;
        *p = (0..len).map(|i| i as u8).collect();
        let f = build_frame(r, p).unwrap();
        for w in WIDTHS {
            let mut sim = PktSim::new(w).unwrap();
            let run = run_rx(&mut sim, std::slice::from_ref(&f), &Flow::default()).unwrap();
            check_rx_run(std::slice::from_ref(&f), &run).unwrap();
            let beats = f.len().div_ceil(w / 8) as u64;
            let mut sim = PktSim::new(w).unwrap();
            let tx = run_tx(&mut sim, &[TxJob { rec: *r, payload: p.clone() }], 1, &Flow::default()).unwrap();
            assert_eq!(tx.frames[0].bytes, f);
            println!(
                "latency {w:3}b, {:4}-byte frame ({beats} beats): RX verdict after {} cycles ({} after the last beat); TX last beat after {} cycles",
                f.len(), run.cycles, run.cycles - beats, tx.cycles
            );
            assert!(run.cycles <= beats + 10 && tx.cycles <= beats + 20);
        }
    }
}
