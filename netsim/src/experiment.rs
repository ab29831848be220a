//! The experiment command line, as a library function: `hematite-experiment-model` (this crate,
//! the reference model only) calls `cli_main(&args, &[])`; the sim crate's
//! `hematite-experiment` adds its Verilated RTL backend with
//! `cli_main(&args, &[("rtl", &backend)])`.

use crate::incast::{self, BackendFactory, Incast, IncastConfig, ModelBackend, Summary};
use hematite_model::dcqcn::{CC_NAMES, CC_RANGES};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Usage text of [`cli_main`].
pub const USAGE: &str = "\
usage: hematite-experiment dcqcn [options]    (or hematite-experiment-model: model backend only)

N:1 incast through the switch model with DCQCN (issue 7); writes one time-series CSV per run,
summary.csv, and prints a summary table. Times are real (uncompressed) µs; queues are given in
real KB (simulated bytes × scale) unless marked _sim.

options (lists are comma separated):
  --n LIST            senders per run                          (default 2,4,8)
  --preset LIST       DCQCN parameter sets: nvidia, paper      (default nvidia,paper)
  --cc LIST           on, off                                  (default on,off)
  --pfc LIST          on, off                                  (default on)
  --scale S           time compression factor                  (default 2)
  --duration-us T     run length, real µs                      (default 150000)
  --stagger-us T      flow i starts at i*T real µs             (default 100)
  --window-us T       sample window, real µs                   (default 100)
  --conv-window-us T  convergence window, real µs              (default 1000)
  --delay-ns D        one-way link propagation delay, real ns  (default 1000)
  --payload B         RDMA payload per frame, bytes            (default 1024)
  --buffer-kb K       switch shared buffer, real KB            (default 4000)
  --xoff-kb K         PFC XOFF per ingress, real KB; XON = XOFF - 32 KB (default 256)
  --seed X            switch RED seed                          (default 1)
  --backend NAME      congestion-control backend for cc=on     (default model)
  --out DIR           output directory                         (default build/experiment/dcqcn)
  --cc-param NAME=V   override one of the 19 DCQCN words of every preset (firmware names and
                      units, e.g. rpg_byte_reset=2097088); repeatable; stated in the CSV headers
  --no-pmax-compensation
                      keep the ECN Pmax as is under time compression (by default it is
                      multiplied by the scale: frames are not compressed, see docs)
  --kmin-kb K, --kmax-kb K, --pmax-pct P
                      ECN marking at the switch, real KB and percent (default 12.5, 500, 20)
  --pcap DIR          write switch port captures (both directions; first 128 bytes of each
                      frame; timestamps in simulated time) to DIR/<run>_p<N>.pcapng
  --pcap-ports P      which ports --pcap captures: bottleneck (the receiver's port: data to
                      it, CNPs from it; default), all, or a list such as 0,1,4
  --pcap-frames K     frames kept per capture, the first from --pcap-from-us on (default 100000)
  --pcap-from-us T    start capturing at real time T                (default 0)
  --depth-csv DIR     write the switch's depth traces (the bottleneck egress, every egress
                      port, the buffer) to DIR/<run>_depth.csv (real µs and KB)
  --quiet             no per-run progress lines
";

struct Opts {
    ns: Vec<usize>,
    presets: Vec<String>,
    ccs: Vec<bool>,
    pfcs: Vec<bool>,
    scale: u32,
    duration_us: Option<u64>,
    stagger_us: u64,
    window_us: u64,
    conv_window_us: u64,
    xoff_kb: u64,
    kmin_kb: Option<f64>,
    kmax_kb: Option<f64>,
    pmax_pct: Option<f64>,
    delay_ns: u64,
    payload: u16,
    buffer_kb: u64,
    seed: u64,
    backend: String,
    out: PathBuf,
    quiet: bool,
    pmax_comp: bool,
    cc_set: Vec<(usize, u32)>,
    pcap: Option<PathBuf>,
    pcap_frames: usize,
    pcap_from_us: u64,
    depth: Option<PathBuf>,
    /// `--pcap-ports`: None = the bottleneck, Some(empty) = all, else these ports
    pcap_ports: Option<Vec<usize>>,
}

fn on_off(s: &str) -> Result<bool, String> {
    match s {
        "on" => Ok(true),
        "off" => Ok(false),
        _ => Err(format!("expected on or off, got {s:?}")),
    }
}

fn list<T>(v: &str, f: impl Fn(&str) -> Result<T, String>) -> Result<Vec<T>, String> {
    let r: Result<Vec<T>, String> = v.split(',').filter(|x| !x.is_empty()).map(|x| f(x.trim())).collect();
    let r = r?;
    if r.is_empty() {
        return Err(String::from("empty list"));
    }
    Ok(r)
}

fn num<T: std::str::FromStr>(s: &str) -> Result<T, String> {
    s.parse::<T>().map_err(|_| format!("not a number: {s:?}"))
}

fn parse(args: &[String]) -> Result<Option<Opts>, String> {
    let mut o = Opts {
        ns: vec![2, 4, 8],
        presets: vec![String::from("nvidia"), String::from("paper")],
        ccs: vec![true, false],
        pfcs: vec![true],
        scale: incast::DEFAULT_SCALE,
        duration_us: None,
        stagger_us: incast::DEFAULT_STAGGER_US,
        window_us: incast::DEFAULT_WINDOW_US,
        conv_window_us: incast::DEFAULT_CONV_WINDOW_US,
        xoff_kb: 256,
        kmin_kb: None,
        kmax_kb: None,
        pmax_pct: None,
        delay_ns: 1000,
        payload: 1024,
        buffer_kb: 4_000,
        seed: 1,
        backend: String::from("model"),
        out: PathBuf::from("build/experiment/dcqcn"),
        quiet: false,
        pmax_comp: true,
        cc_set: Vec::new(),
        pcap: None,
        pcap_frames: DEFAULT_PCAP_FRAMES,
        pcap_from_us: 0,
        depth: None,
        pcap_ports: None,
    };
    let mut it = args.iter();
    match it.next().map(String::as_str) {
        Some("dcqcn") => {}
        Some("-h") | Some("--help") | Some("help") => return Ok(None),
        Some(x) => return Err(format!("unknown experiment {x:?} (only: dcqcn)")),
        None => return Err(String::from("missing experiment name (dcqcn)")),
    }
    while let Some(a) = it.next() {
        let (key, inline) = match a.split_once('=') {
            Some((k, v)) if k.starts_with("--") => (k.to_string(), Some(v.to_string())),
            _ => (a.clone(), None),
        };
        let mut val = || -> Result<String, String> {
            match &inline {
                Some(v) => Ok(v.clone()),
                None => it.next().cloned().ok_or_else(|| format!("{key} needs a value")),
            }
        };
        match key.as_str() {
            "-h" | "--help" => return Ok(None),
            "--quiet" => o.quiet = true,
            "--no-pmax-compensation" => o.pmax_comp = false,
            "--n" => {
                o.ns = list(&val()?, num::<usize>)?;
                if o.ns.iter().any(|&n| n == 0 || n > 250) {
                    return Err(String::from("--n: senders must be 1..=250"));
                }
            }
            "--preset" => {
                o.presets = list(&val()?, |p| incast::preset_params(p).map(|_| p.to_string()))?;
            }
            "--cc" => o.ccs = list(&val()?, on_off)?,
            "--pfc" => o.pfcs = list(&val()?, on_off)?,
            "--scale" => {
                o.scale = num(&val()?)?;
                if o.scale == 0 {
                    return Err(String::from("--scale must be >= 1"));
                }
            }
            "--duration-us" => o.duration_us = Some(num(&val()?)?),
            "--stagger-us" => o.stagger_us = num(&val()?)?,
            "--window-us" => o.window_us = num(&val()?)?,
            "--conv-window-us" => o.conv_window_us = num(&val()?)?,
            "--xoff-kb" => {
                o.xoff_kb = num(&val()?)?;
                if o.xoff_kb < 64 {
                    return Err(String::from("--xoff-kb must be >= 64"));
                }
            }
            "--kmin-kb" => o.kmin_kb = Some(num(&val()?)?),
            "--kmax-kb" => o.kmax_kb = Some(num(&val()?)?),
            "--pmax-pct" => {
                let p: f64 = num(&val()?)?;
                if !(0.0..=100.0).contains(&p) {
                    return Err(String::from("--pmax-pct must be 0..=100"));
                }
                o.pmax_pct = Some(p);
            }
            "--delay-ns" => o.delay_ns = num(&val()?)?,
            "--payload" => o.payload = num(&val()?)?,
            "--buffer-kb" => o.buffer_kb = num(&val()?)?,
            "--seed" => o.seed = num(&val()?)?,
            "--backend" => o.backend = val()?,
            "--cc-param" => {
                let v = val()?;
                let (name, x) = v.split_once('=').ok_or_else(|| format!("--cc-param {v:?}: expected NAME=VALUE"))?;
                let i = CC_NAMES.iter().position(|n| *n == name).ok_or_else(|| {
                    format!("--cc-param: unknown parameter {name:?} (one of {})", CC_NAMES.join(", "))
                })?;
                let x: u32 = num(x)?;
                let (lo, hi) = CC_RANGES[i];
                if x < lo || x > hi {
                    return Err(format!("--cc-param {name}: {x} outside {lo}..={hi}"));
                }
                o.cc_set.push((i, x));
            }
            "--out" => o.out = PathBuf::from(val()?),
            "--pcap" => o.pcap = Some(PathBuf::from(val()?)),
            "--pcap-frames" => {
                o.pcap_frames = num(&val()?)?;
                if o.pcap_frames == 0 || o.pcap_frames > MAX_PCAP_FRAMES {
                    return Err(format!("--pcap-frames must be 1..={MAX_PCAP_FRAMES}"));
                }
            }
            "--pcap-from-us" => o.pcap_from_us = num(&val()?)?,
            "--depth-csv" => o.depth = Some(PathBuf::from(val()?)),
            "--pcap-ports" => {
                let v = val()?;
                o.pcap_ports = match v.as_str() {
                    "bottleneck" => None,
                    "all" => Some(Vec::new()),
                    _ => {
                        let mut l = Vec::new();
                        for p in v.split(',') {
                            l.push(num::<usize>(p).map_err(|_| format!("--pcap-ports: bad port {p:?} (bottleneck, all or a list like 0,1,4)"))?);
                        }
                        Some(l)
                    }
                }
            }
            _ => return Err(format!("unknown option {a:?}")),
        }
    }
    Ok(Some(o))
}

/// Frames kept per pcap by default (`--pcap-frames`): about 17 MB of pcapng at snaplen 128.
pub const DEFAULT_PCAP_FRAMES: usize = 100_000;
/// Upper bound of `--pcap-frames`.
pub const MAX_PCAP_FRAMES: usize = 10_000_000;
/// Bytes kept of each captured frame (every header of a data frame or a whole CNP).
pub const PCAP_SNAPLEN: u32 = 128;

/// File name of a run's time series: `dcqcn_<preset>_n<N>_<on|off>.csv` (with `_pfcoff` before
/// `.csv` when PFC is off).
pub fn run_file_name(preset: &str, n: usize, cc_on: bool, pfc: bool) -> String {
    format!("dcqcn_{preset}_n{n}_{}{}.csv", if cc_on { "on" } else { "off" }, if pfc { "" } else { "_pfcoff" })
}

/// The printed summary table's header lines.
pub fn table_header() -> String {
    format!(
        "{:<7} {:>3} {:>3} {:>3} {:>8} {:>12} {:>6} {:>10} {:>10} {:>10} {:>7} {:>7} {:>7} {:>7} {:>5}\n{}",
        "preset",
        "N",
        "cc",
        "pfc",
        "fairness",
        "converge_us",
        "util",
        "peakQ_KB",
        "steadyQ_KB",
        "steadyMaxQ",
        "PFC",
        "PFC_ss",
        "drops",
        "CNPs",
        "scale",
        "-".repeat(117)
    )
}

/// One line of the printed summary table (queues in real KB = simulated × scale).
pub fn table_row(s: &Summary) -> String {
    format!(
        "{:<7} {:>3} {:>3} {:>3} {:>8.4} {:>12} {:>6.3} {:>10.1} {:>10.1} {:>10.1} {:>7} {:>7} {:>7} {:>7} {:>5}",
        s.preset,
        s.n,
        s.cc_str(),
        if s.pfc { "on" } else { "off" },
        s.fairness,
        s.converge_us.map_or(String::from("not conv."), |c| format!("{c:.0}")),
        s.util,
        s.real_kb(s.peak_queue as f64),
        s.real_kb(s.steady_queue_mean),
        s.real_kb(s.steady_queue_max as f64),
        s.pfc_frames,
        s.pfc_frames_steady,
        s.drops,
        s.cnps_sent,
        s.scale
    )
}

/// One run, with the optional bottleneck capture (`--pcap`) and depth trace (`--depth-csv`).
fn run_one(
    cfg: IncastConfig,
    backend: &dyn BackendFactory,
    o: &Opts,
    stem: &str,
) -> Result<incast::IncastResult, String> {
    let mut inc = Incast::new(cfg, backend)?;
    let nports = inc.switch().ports();
    let ports: Vec<usize> = match &o.pcap_ports {
        None => vec![inc.receiver_port()],
        Some(l) if l.is_empty() => (0..nports).collect(),
        Some(l) => {
            if let Some(&bad) = l.iter().find(|&&p| p >= nports) {
                return Err(format!("--pcap-ports: port {bad} does not exist (this run's switch has ports 0..{})", nports - 1));
            }
            l.clone()
        }
    };
    let s = inc.config().scale as u64;
    let from = (o.pcap_from_us * incast::CLK_MHZ + s / 2) / s;
    while inc.now() < inc.end() {
        if o.pcap.is_some() && inc.now() == from {
            for &p in &ports {
                inc.switch_mut().enable_capture_bounded(p, PCAP_SNAPLEN, o.pcap_frames);
            }
        }
        inc.step();
    }
    if let Some(dir) = &o.pcap {
        std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        for &p in &ports {
            let path = dir.join(format!("{stem}_p{p}.pcapng"));
            inc.switch().write_pcap(p, &path).map_err(|e| format!("writing {}: {e}", path.display()))?;
        }
    }
    if let Some(dir) = &o.depth {
        std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        let path = dir.join(format!("{stem}_depth.csv"));
        inc.write_depth_csv(&path).map_err(|e| format!("writing {}: {e}", path.display()))?;
    }
    Ok(inc.finish())
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("writing {}: {e}", path.display()))
}

/// The experiment command line. `args` are the arguments after the program name (first the
/// experiment, `dcqcn`, then options; see [`USAGE`]). `extra` adds named congestion-control
/// backends selectable with `--backend NAME` besides the built-in `model`. Returns the process
/// exit code: 0 on success, 1 on a run or I/O error, 2 on a usage error.
pub fn cli_main(args: &[String], extra: &[(&str, &dyn BackendFactory)]) -> i32 {
    let o = match parse(args) {
        Ok(Some(o)) => o,
        Ok(None) => {
            print!("{USAGE}");
            let names: Vec<&str> = extra.iter().map(|(n, _)| *n).collect();
            println!("backends: model{}", names.iter().map(|n| format!(", {n}")).collect::<String>());
            return 0;
        }
        Err(e) => {
            eprintln!("hematite-experiment: {e}\n\n{USAGE}");
            return 2;
        }
    };
    let model = ModelBackend::default();
    let backend: &dyn BackendFactory = if o.backend == "model" {
        &model
    } else if let Some((_, b)) = extra.iter().find(|(n, _)| *n == o.backend) {
        *b
    } else {
        let names: Vec<&str> = extra.iter().map(|(n, _)| *n).collect();
        eprintln!(
            "hematite-experiment: unknown backend {:?} (model{})",
            o.backend,
            names.iter().map(|n| format!(", {n}")).collect::<String>()
        );
        return 2;
    };
    if let Err(e) = std::fs::create_dir_all(&o.out) {
        eprintln!("hematite-experiment: creating {}: {e}", o.out.display());
        return 1;
    }
    println!(
        "DCQCN incast: backend {} for cc=on, time compression s = {} (times real µs = simulated × {}, queues real KB = simulated × {}), output {}",
        o.backend,
        o.scale,
        o.scale,
        o.scale,
        o.out.display()
    );
    let t0 = Instant::now();
    let pb = crate::progress::bar((o.presets.len() * o.ns.len() * o.ccs.len() * o.pfcs.len()) as u64, "runs");
    let mut rows = Vec::new();
    let mut csv = String::from(Summary::CSV_HEADER);
    csv.push('\n');
    for preset in &o.presets {
        for &n in &o.ns {
            for &cc in &o.ccs {
                for &pfc in &o.pfcs {
                    let mut cfg = match IncastConfig::new(n, preset, cc) {
                        Ok(c) => c,
                        Err(e) => {
                            eprintln!("hematite-experiment: {e}");
                            return 2;
                        }
                    };
                    cfg.pfc = pfc;
                    cfg.scale = o.scale;
                    if let Some(d) = o.duration_us {
                        cfg.duration_us = d;
                    }
                    cfg.stagger_us = o.stagger_us;
                    cfg.window_us = o.window_us;
                    cfg.conv_window_us = o.conv_window_us;
                    cfg.pfc_cfg.xoff_bytes = o.xoff_kb * 1000;
                    cfg.pfc_cfg.xon_bytes = (o.xoff_kb - 32) * 1000;
                    if let Some(e) = &mut cfg.ecn {
                        if let Some(k) = o.kmin_kb {
                            e.kmin_bytes = (k * 1000.0).round() as u64;
                        }
                        if let Some(k) = o.kmax_kb {
                            e.kmax_bytes = (k * 1000.0).round() as u64;
                        }
                        if let Some(p) = o.pmax_pct {
                            e.pmax_ppm = (p * 1e4).round() as u32;
                        }
                        if e.kmin_bytes > e.kmax_bytes {
                            eprintln!("hematite-experiment: Kmin above Kmax");
                            return 2;
                        }
                    }
                    cfg.link_delay_ns = o.delay_ns;
                    cfg.payload_bytes = o.payload;
                    cfg.buffer_bytes = o.buffer_kb * 1000;
                    cfg.seed = o.seed;
                    cfg.pmax_compensation = o.pmax_comp;
                    for &(i, x) in &o.cc_set {
                        cfg.cc_params[i] = x;
                    }
                    let t = Instant::now();
                    pb.set_message(format!("{preset} n={n} cc={} pfc={}", if cc { "on" } else { "off" }, if pfc { "on" } else { "off" }));
                    let name = run_file_name(preset, n, cc, pfc);
                    let stem = name.trim_end_matches(".csv");
                    let r = match run_one(cfg, backend, &o, stem) {
                        Ok(r) => r,
                        Err(e) => {
                            eprintln!("hematite-experiment: {preset} n={n} cc={}: {e}", if cc { "on" } else { "off" });
                            return 1;
                        }
                    };
                    let file = o.out.join(&name);
                    if let Err(e) = write(&file, &r.timeseries_csv()) {
                        eprintln!("hematite-experiment: {e}");
                        return 1;
                    }
                    if !o.quiet {
                        pb.suspend(|| {
                            eprintln!(
                                "  {preset} n={n} cc={} pfc={}: {} cycles in {:.1} s -> {}",
                                if cc { "on" } else { "off" },
                                if pfc { "on" } else { "off" },
                                r.summary.cycles,
                                t.elapsed().as_secs_f64(),
                                file.display()
                            )
                        });
                    }
                    pb.inc(1);
                    csv.push_str(&r.summary.csv_row());
                    csv.push('\n');
                    rows.push(r.summary);
                }
            }
        }
    }
    pb.finish_and_clear();
    let sfile = o.out.join("summary.csv");
    if let Err(e) = write(&sfile, &csv) {
        eprintln!("hematite-experiment: {e}");
        return 1;
    }
    println!("{}", table_header());
    for s in &rows {
        println!("{}", table_row(s));
    }
    println!(
        "{} runs in {:.1} s; fairness = Jain's index over the last half of each run; converge_us = real µs after the last flow's start from which every {} µs window has Jain >= 0.95 and utilisation >= 0.9 (not conv.: not so from the start of the last half on); queues in real KB (simulated x {}); PFC = PFC frames the switch sent, PFC_ss = those in the last half; summary: {}",
        rows.len(),
        t0.elapsed().as_secs_f64(),
        o.conv_window_us,
        o.scale,
        sfile.display()
    );
    0
}
