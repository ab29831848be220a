//! Fuzzing campaigns against the Verilated RTL and the reference model.
//!
//! usage: hematite-fuzz rx [--count N] [--seed S] [--width 256|512|both] [--out DIR] [--seeds DIR]...
//!
//! `rx`: N mutated frames (default 100,000) through the receive path, each compared with the
//! receive spec; seeds are every frame of the repository's vectors and captures
//! (tests/data/vectors, tests/data/captures) and ../shared's when present, or the --seeds
//! folders. Exits 0 only when nothing was found; the last line is
//! `fuzz rx: N cases, F findings`. Findings go to --out (default build/fuzz) as
//! rx-finding-K.txt.
//!
//! usage: hematite-fuzz engine [--count N] [--seed S] [--per-episode P] [--wire-faults] [--out DIR]
//!        hematite-fuzz engine --replay EPISODE_SEED [--per-episode P] [--wire-faults]
//!
//! `engine`: N frames (default 20,000) with a valid ICRC injected toward live QPs of two
//! Verilated engines while verified real traffic runs between them, P per episode (default
//! 200); see sim/src/fuzz_engine.rs for the kinds and the checks. Exits 0 only when nothing was
//! found; the last line is `fuzz engine: N cases, F findings`. Findings go to --out (default
//! build/fuzz) as engine-finding-K.txt, each with its --replay line.
//!
//! usage: hematite-fuzz socket [--count N] [--seed S] [--sim PATH] [--fw HEX] [--dir DIR]
//!                             [--nic-every K]
//!
//! `socket`: N messages (default 100,000) sent to a device process (`hematite-sim device`,
//! the executable beside this one unless --sim) as a client: malformed, truncated, oversized,
//! out-of-order and random valid-looking requests, bad DMA windows, descriptors, floods,
//! half-closed sockets, many connections (sim/src/fuzz_socket.rs). Exits 0 only when nothing
//! was found; the last line is `fuzz socket: N cases, F findings`.

#[path = "../fuzz_socket.rs"]
mod fuzz_socket;

use hematite_sim::fuzz::{load_seeds, rx_campaign};
use std::path::PathBuf;
use std::time::Instant;

fn die(m: &str) -> ! {
    eprintln!("hematite-fuzz: {m}");
    std::process::exit(2)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(target) = args.first().cloned() else {
        die("usage: hematite-fuzz rx [--count N] [--seed S] [--width 256|512|both] [--out DIR] [--seeds DIR]...")
    };
    if target == "-h" || target == "--help" {
        println!("usage: hematite-fuzz rx [--count N] [--seed S] [--width 256|512|both] [--out DIR] [--seeds DIR]...");
        return;
    }
    if target == "socket" {
        socket_main(&args[1..]);
    }
    if target == "engine" {
        engine_main(&args[1..]);
    }
    if target != "rx" {
        die(&format!("unknown target {target}: this binary fuzzes `rx`, `engine` and `socket` (see ./hematite fuzz --help)"));
    }
    let root = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.."));
    let (mut count, mut seed, mut widths, mut out, mut seed_dirs) = (100_000u64, 1u64, vec![256usize, 512], root.join("build/fuzz"), Vec::new());
    let mut i = 1;
    let val = |i: usize| args.get(i).cloned().unwrap_or_else(|| die(&format!("{} needs a value", args[i - 1])));
    while i < args.len() {
        match args[i].as_str() {
            "--count" => count = val(i + 1).replace('_', "").parse().unwrap_or_else(|_| die("--count needs a number")),
            "--seed" => seed = val(i + 1).parse().unwrap_or_else(|_| die("--seed needs a number")),
            "--width" => {
                widths = match val(i + 1).as_str() {
                    "256" => vec![256],
                    "512" => vec![512],
                    "both" => vec![256, 512],
                    w => die(&format!("--width {w}: 256, 512 or both")),
                }
            }
            "--out" => out = PathBuf::from(val(i + 1)),
            "--seeds" => seed_dirs.push(PathBuf::from(val(i + 1))),
            a => die(&format!("unknown argument {a}")),
        }
        i += 2;
    }
    if seed_dirs.is_empty() {
        seed_dirs = vec![root.join("tests/data/vectors"), root.join("tests/data/captures")];
        let shared = std::env::var_os("HEMATITE_SHARED").map(PathBuf::from).unwrap_or_else(|| root.join("../shared"));
        for d in ["vectors", "captures"] {
            if shared.join(d).is_dir() {
                seed_dirs.push(shared.join(d));
            }
        }
    }
    for d in &seed_dirs {
        if !d.is_dir() {
            die(&format!("seed folder {} not found", d.display()));
        }
    }
    let seeds = load_seeds(&seed_dirs).unwrap_or_else(|e| die(&e));
    println!("fuzz rx: {} seed frames from {}", seeds.len(), seed_dirs.iter().map(|d| d.display().to_string()).collect::<Vec<_>>().join(", "));
    let t0 = Instant::now();
    let pb = hematite_netsim::progress::bar(count, "cases");
    let rep = rx_campaign(&seeds, count, seed, &widths, &out, |r| {
        pb.set_position(r.cases);
        pb.set_message(format!("{} findings", r.findings));
    })
    .unwrap_or_else(|e| die(&e));
    pb.finish_and_clear();
    let secs = t0.elapsed().as_secs_f64();
    println!("verdicts: {:?}", rep.verdicts);
    println!(
        "{} simulated cycles in {:.1} s ({:.0} frames/s, widths {:?}, seed {seed})",
        rep.cycles,
        secs,
        rep.cases as f64 / secs,
        widths
    );
    println!("fuzz rx: {} cases, {} findings", rep.cases, rep.findings);
    std::process::exit(if rep.findings == 0 { 0 } else { 1 });
}

fn socket_main(args: &[String]) -> ! {
    use fuzz_socket::{default_dir, socket_campaign, SocketFuzzOpts};
    let exe = std::env::current_exe().unwrap_or_else(|e| die(&format!("current_exe: {e}")));
    let mut o = SocketFuzzOpts {
        count: 100_000,
        seed: 1,
        sim: exe.with_file_name("hematite-sim"),
        fw: None,
        dir: default_dir(),
        nic_check_every: 256,
    };
    let mut i = 0;
    let val = |i: usize| args.get(i).cloned().unwrap_or_else(|| die(&format!("{} needs a value", args[i - 1])));
    while i < args.len() {
        match args[i].as_str() {
            "--count" => o.count = val(i + 1).replace('_', "").parse().unwrap_or_else(|_| die("--count needs a number")),
            "--seed" => o.seed = val(i + 1).parse().unwrap_or_else(|_| die("--seed needs a number")),
            "--sim" => o.sim = PathBuf::from(val(i + 1)),
            "--fw" => o.fw = Some(PathBuf::from(val(i + 1))),
            "--dir" => o.dir = PathBuf::from(val(i + 1)),
            "--nic-every" => o.nic_check_every = val(i + 1).parse().unwrap_or_else(|_| die("--nic-every needs a number")),
            a => die(&format!("socket: unknown argument {a}")),
        }
        i += 2;
    }
    if !o.sim.is_file() {
        die(&format!("{} not found (build hematite-sim, or pass --sim PATH)", o.sim.display()));
    }
    let _ = std::fs::remove_dir_all(&o.dir);
    println!("fuzz socket: {} messages to {} device (seed {}), work folder {}", o.count, o.sim.display(), o.seed, o.dir.display());
    let t0 = Instant::now();
    let pb = hematite_netsim::progress::bar(o.count, "messages");
    let rep = socket_campaign(&o, |r| {
        pb.set_position(r.cases);
        pb.set_message(format!("{} sessions, {} findings", r.sessions, r.findings));
    })
    .unwrap_or_else(|e| die(&e));
    pb.finish_and_clear();
    let secs = t0.elapsed().as_secs_f64();
    for n in &rep.notes {
        println!("finding: {n}");
    }
    println!("reply statuses: {:?}", rep.statuses);
    println!(
        "{} sessions, {} closed by the device, {} hostdrv checks, {:.1} s ({:.0} messages/s)",
        rep.sessions,
        rep.closed_by_device,
        rep.nic_checks,
        secs,
        rep.cases as f64 / secs
    );
    if rep.findings == 0 {
        let _ = std::fs::remove_dir_all(&o.dir);
    } else {
        println!("device log: {}", o.dir.join("device.log").display());
    }
    println!("fuzz socket: {} cases, {} findings", rep.cases, rep.findings);
    std::process::exit(if rep.findings == 0 { 0 } else { 1 })
}

fn engine_main(args: &[String]) -> ! {
    use hematite_sim::fuzz_engine::{engine_campaign, replay, EngineFuzzOpts, EngineReport};
    let root = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.."));
    let mut o = EngineFuzzOpts { count: 20_000, seed: 1, per_episode: 200, wire_faults: false, self_test: None };
    let (mut out, mut replay_seed) = (root.join("build/fuzz"), None);
    let mut i = 0;
    let val = |i: usize| args.get(i).cloned().unwrap_or_else(|| die(&format!("{} needs a value", args[i - 1])));
    let num = |v: String, what: &str| v.replace('_', "").parse::<u64>().unwrap_or_else(|_| die(&format!("{what} needs a number")));
    while i < args.len() {
        match args[i].as_str() {
            "--count" => o.count = num(val(i + 1), "--count"),
            "--seed" => o.seed = num(val(i + 1), "--seed"),
            "--per-episode" => o.per_episode = num(val(i + 1), "--per-episode").max(1),
            "--replay" => replay_seed = Some(num(val(i + 1), "--replay")),
            "--out" => out = PathBuf::from(val(i + 1)),
            "--wire-faults" => {
                o.wire_faults = true;
                i += 1;
                continue;
            }
            a => die(&format!("unknown argument {a}")),
        }
        i += 2;
    }
    let print = |rep: &EngineReport, secs: f64| {
        for (k, n) in &rep.kinds {
            println!("  {n:>8}  {}", k.name());
        }
        println!("verdicts of the injected frames: {:?}", rep.verdicts);
        println!("engines: {:?}", rep.engine);
        println!(
            "{} episodes, {} real work requests verified, {} simulated cycles in {:.1} s ({:.0} frames/s)",
            rep.episodes,
            rep.real_wrs,
            rep.cycles,
            secs,
            rep.cases as f64 / secs
        );
    };
    let t0 = Instant::now();
    if let Some(s) = replay_seed {
        let (rep, r) = replay(s, o.per_episode, o.wire_faults);
        print(&rep, t0.elapsed().as_secs_f64());
        let f = match &r {
            Ok(()) => 0,
            Err(e) => {
                println!("finding: {e}");
                1
            }
        };
        println!("fuzz engine: {} cases, {f} findings", rep.cases);
        std::process::exit(f as i32);
    }
    let pb = hematite_netsim::progress::bar(o.count, "cases");
    let rep = engine_campaign(&o, &out, |r| {
        pb.set_position(r.cases);
        pb.set_message(format!("{} findings, {} episodes", r.findings, r.episodes));
    })
    .unwrap_or_else(|e| die(&e));
    pb.finish_and_clear();
    print(&rep, t0.elapsed().as_secs_f64());
    println!("seed {}, {} frames per episode{}", o.seed, o.per_episode, if o.wire_faults { ", wire faults on the real traffic" } else { "" });
    println!("fuzz engine: {} cases, {} findings", rep.cases, rep.findings);
    std::process::exit(if rep.findings == 0 { 0 } else { 1 });
}
