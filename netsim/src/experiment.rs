//! The experiment command line (`hematite-experiment`), as a library function so that another
//! crate's binary can reuse it with extra congestion-control backends (e.g. a Verilated RTL
//! backend): `cli_main(&args, &[("rtl", &my_factory)])`.

use crate::incast::{self, BackendFactory, IncastConfig, ModelBackend, Summary};
use hematite_model::dcqcn::{CC_NAMES, CC_RANGES};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Usage text of [`cli_main`].
pub const USAGE: &str = "\
usage: hematite-experiment dcqcn [options]

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
    delay_ns: u64,
    payload: u16,
    buffer_kb: u64,
    seed: u64,
    backend: String,
    out: PathBuf,
    quiet: bool,
    pmax_comp: bool,
    cc_set: Vec<(usize, u32)>,
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
        delay_ns: 1000,
        payload: 1024,
        buffer_kb: 4_000,
        seed: 1,
        backend: String::from("model"),
        out: PathBuf::from("build/experiment/dcqcn"),
        quiet: false,
        pmax_comp: true,
        cc_set: Vec::new(),
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
            _ => return Err(format!("unknown option {a:?}")),
        }
    }
    Ok(Some(o))
}

/// File name of a run's time series: `dcqcn_<preset>_n<N>_<on|off>.csv` (with `_pfcoff` before
/// `.csv` when PFC is off).
pub fn run_file_name(preset: &str, n: usize, cc_on: bool, pfc: bool) -> String {
    format!("dcqcn_{preset}_n{n}_{}{}.csv", if cc_on { "on" } else { "off" }, if pfc { "" } else { "_pfcoff" })
}

/// The printed summary table's header lines.
pub fn table_header() -> String {
    format!(
        "{:<7} {:>3} {:>3} {:>3} {:>8} {:>12} {:>6} {:>10} {:>10} {:>10} {:>7} {:>7} {:>7} {:>5}\n{}",
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
        "drops",
        "CNPs",
        "scale",
        "-".repeat(109)
    )
}

/// One line of the printed summary table (queues in real KB = simulated × scale).
pub fn table_row(s: &Summary) -> String {
    format!(
        "{:<7} {:>3} {:>3} {:>3} {:>8.4} {:>12} {:>6.3} {:>10.1} {:>10.1} {:>10.1} {:>7} {:>7} {:>7} {:>5}",
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
        s.drops,
        s.cnps_sent,
        s.scale
    )
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
                    cfg.link_delay_ns = o.delay_ns;
                    cfg.payload_bytes = o.payload;
                    cfg.buffer_bytes = o.buffer_kb * 1000;
                    cfg.seed = o.seed;
                    cfg.pmax_compensation = o.pmax_comp;
                    for &(i, x) in &o.cc_set {
                        cfg.cc_params[i] = x;
                    }
                    let t = Instant::now();
                    let r = match incast::run(cfg, backend) {
                        Ok(r) => r,
                        Err(e) => {
                            eprintln!("hematite-experiment: {preset} n={n} cc={}: {e}", if cc { "on" } else { "off" });
                            return 1;
                        }
                    };
                    let file = o.out.join(run_file_name(preset, n, cc, pfc));
                    if let Err(e) = write(&file, &r.timeseries_csv()) {
                        eprintln!("hematite-experiment: {e}");
                        return 1;
                    }
                    if !o.quiet {
                        eprintln!(
                            "  {preset} n={n} cc={} pfc={}: {} cycles in {:.1} s -> {}",
                            if cc { "on" } else { "off" },
                            if pfc { "on" } else { "off" },
                            r.summary.cycles,
                            t.elapsed().as_secs_f64(),
                            file.display()
                        );
                    }
                    csv.push_str(&r.summary.csv_row());
                    csv.push('\n');
                    rows.push(r.summary);
                }
            }
        }
    }
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
        "{} runs in {:.1} s; fairness = Jain's index over the last half of each run; converge_us = real µs after the last flow's start from which every {} µs window has Jain >= 0.95 and utilisation >= 0.9 (not conv.: not so from the start of the last half on); queues in real KB (simulated x {}); summary: {}",
        rows.len(),
        t0.elapsed().as_secs_f64(),
        o.conv_window_us,
        o.scale,
        sfile.display()
    );
    0
}
