//! `hematite-sim`: run Hematite's RTL in Verilator from the command line.
//!
//!   hematite-sim replay --pcap FILE [--json] [--width 256|512] [--only accept|drop] [--limit N]
//!       Feed every frame of a pcap/pcapng (optionally .xz) through the RTL receive path and
//!       print, per frame, what the hardware decoded and its verdict, then a summary line.
//!   hematite-sim build --json FILE --pcap OUT [--width 256|512] [--allow-rejects]
//!       Build frames through the RTL transmit path from JSON header records, check each
//!       against the reference model, and write a pcap.
//!   hematite-sim device --socket PATH --wire-local ADDR --wire-peer ADDR [--mac M] [--ip A]
//!       [--pcap FILE] [--loss P] [--fw HEX] [--max-cycles N] [-v]
//!       Run the simulated NIC (engine + control core + firmware) as a device process that
//!       drivers open (hostdrv's simulation backend), its MAC on a datagram wire.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

use hematite_model::{build_frame, capture, opcode, DropReason, HdrRecord};
use hematite_sim::layout::{set_bits, HDR_FIELDS};
use hematite_sim::{pack_hdr, run_rx, run_tx, unpack_hdr, Flow, PktSim, RxStatus, TxJob};
use serde_json::{json, Map, Value};

const USAGE: &str = "usage:
  hematite-sim replay --pcap FILE [--json] [--width 256|512] [--only accept|drop] [--limit N]
      feed each frame through the RTL receive path; print one line per frame (key=value, or
      one JSON object per line with --json) and a summary on stderr
  hematite-sim build --json FILE --pcap OUT [--width 256|512] [--allow-rejects]
      build frames through the RTL transmit path from JSON header records (field names of
      hm_roce_hdr_t, plus payload_hex or payload_len), check them against the reference
      model and write a pcap; records the hardware must reject are an error unless
      --allow-rejects
  hematite-sim device --socket PATH --wire-local ADDR --wire-peer ADDR [--mac 02:00:00:00:00:01]
      [--ip 10.0.0.1] [--pcap FILE] [--counters DIR] [--loss P] [--rx-loss P] [--dup P] [--reorder P]
      [--corrupt P] [--seed S] [--fw HEX] [--max-cycles N]
      [--idle-after N] [--trace FILE.fst [--trace-from CYCLE] [--trace-cycles N]
      | --trace FILE.fst --trace-on EVENT [--trace-before B] [--trace-after A]] [-v]
      run the simulated NIC (transport engine, control core and firmware) as a device that
      drivers open over the Unix socket PATH (hostdrv's simulation backend); its Ethernet port
      exchanges one frame per datagram with the peer (qemu -netdev dgram framing). ADDR is a
      Unix datagram socket path (unix:PATH or PATH) or udp:HOST:PORT. --loss drops that
      fraction of transmitted RoCE frames, --rx-loss of received ones (after the pcap); --pcap writes every frame with simulated-time
      stamps (4 ns per cycle); --counters keeps the port's counters as files in DIR/counters
      and DIR/hw_counters (docs/counters.md), sampled every second; the firmware image defaults to build/fw/firmware.hex; after
      --idle-after cycles without activity (default 2000000) the process sleeps between
      short slices of cycles, so its timers keep running at a few percent of a core;
      --trace writes an FST waveform of the whole NIC for the cycles CYCLE .. CYCLE+N
      (defaults 0 and 100000; the pcap's time axis), or with --trace-on EVENT (error-cqe,
      drop, drop:REASON, retransmit) for the B cycles before the first EVENT and A after it
      (--trace-before B, default 10000; --trace-after A, default 1000); it needs the waveform
      build (./hematite trace-build)
  hematite-sim demo [--size BYTES] [--count N] [--loss P] [--qps N] [--dir DIR] [--fw HEX]
      [--trace FILE.fst [--trace-from CYCLE] [--trace-cycles N] [--trace-on EVENT ...]]
      start two device processes joined by the datagram wire and run SEND, RDMA WRITE,
      RDMA READ and atomics between them through the host driver, verifying the data;
      prints throughput and latency in simulated time (250 MHz) and in wall time; --trace
      is NIC a's device --trace (the waveform build only)
  hematite-sim demo --attach DIR [--size BYTES] [--count N] [--qps N]
      the same operations between two devices already serving DIR/a.sock and DIR/b.sock
      (started by the caller: device processes, or tests/shell/card_host.py, which serves
      the card's logic behind the PCIe model); starts nothing and stops nothing";

struct Args {
    cmd: String,
    opts: BTreeMap<String, String>,
    flags: Vec<String>,
}

fn parse_args() -> Result<Args, String> {
    let mut it = std::env::args().skip(1);
    let cmd = it.next().ok_or("missing command")?;
    if cmd == "-h" || cmd == "--help" || cmd == "help" {
        return Err("help".into());
    }
    let mut opts = BTreeMap::new();
    let mut flags = Vec::new();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--json" if cmd == "replay" => flags.push("json".into()),
            "--allow-rejects" if cmd == "build" => flags.push("allow-rejects".into()),
            "--pcap" | "--json" | "--width" | "--only" | "--limit" => {
                let v = it.next().ok_or(format!("{a} needs a value"))?;
                opts.insert(a.trim_start_matches("--").to_string(), v);
            }
            "-h" | "--help" => return Err("help".into()),
            _ => return Err(format!("unknown argument `{a}`")),
        }
    }
    Ok(Args { cmd, opts, flags })
}

fn width(a: &Args) -> Result<usize, String> {
    match a.opts.get("width").map(|s| s.as_str()).unwrap_or("512") {
        "256" => Ok(256),
        "512" => Ok(512),
        w => Err(format!("--width must be 256 or 512, not {w}")),
    }
}

fn fmt_mac(v: u64) -> String {
    (0..6).rev().map(|i| format!("{:02x}", (v >> (8 * i)) & 0xff)).collect::<Vec<_>>().join(":")
}

fn fmt_ip(v: u128, v6: bool) -> String {
    if v6 {
        std::net::Ipv6Addr::from(v).to_string()
    } else {
        std::net::Ipv4Addr::from(v as u32).to_string()
    }
}

fn reason_name(code: u8) -> &'static str {
    DropReason::from_code(code).map(|r| r.name()).unwrap_or("?")
}

/// The decoded fields worth printing for a frame, in order, as (key, JSON value). Fields the
/// hardware could not have decoded meaningfully (BTH of a non-RoCE frame, IP of a non-IP
/// frame) are null in JSON and `-` in text.
fn frame_fields(n: usize, s: &RxStatus) -> Vec<(&'static str, Value)> {
    let h = &s.hdr;
    // how far the frame got: 0 = not even IP, 1 = IP but not RoCE, 2 = RoCE headers decoded
    let depth = match DropReason::from_code(s.reason) {
        Some(DropReason::Truncated) | Some(DropReason::NotIp) => 0,
        Some(DropReason::Ipv4OptFrag) | Some(DropReason::NotRoce) => 1,
        _ => 2,
    };
    let mut v: Vec<(&'static str, Value)> = vec![
        ("frame", json!(n)),
        ("verdict", json!(if s.reason == 0 { "accept" } else { "drop" })),
    ];
    if s.reason != 0 {
        v.push(("reason", json!(reason_name(s.reason))));
    }
    let info = opcode::info(h.opcode);
    if depth == 2 {
        v.push(("opcode", json!(format!("0x{:02x}", h.opcode))));
        v.push(("op", json!(info.map(|i| i.name).unwrap_or("unknown"))));
        v.push(("dest_qp", json!(format!("0x{:06x}", h.dest_qp))));
        v.push(("psn", json!(h.psn)));
    } else {
        v.push(("opcode", Value::Null));
        v.push(("dest_qp", Value::Null));
        v.push(("psn", Value::Null));
    }
    v.push(("icrc_ok", json!(s.icrc_ok)));
    v.push(("frame_len", json!(s.frame_len)));
    v.push(("eth_src", json!(fmt_mac(h.eth_src))));
    v.push(("eth_dst", json!(fmt_mac(h.eth_dst))));
    if h.vlan_valid {
        v.push(("vlan_vid", json!(h.vlan_vid)));
        v.push(("vlan_pcp", json!(h.vlan_pcp)));
    }
    if depth == 0 {
        return v;
    }
    v.push(("ip", json!(if h.ipv6 { 6 } else { 4 })));
    v.push(("ip_src", json!(fmt_ip(h.ip_src, h.ipv6))));
    v.push(("ip_dst", json!(fmt_ip(h.ip_dst, h.ipv6))));
    v.push(("dscp", json!(h.dscp)));
    v.push(("ecn", json!(h.ecn)));
    v.push(("ttl", json!(h.ttl)));
    if !h.ipv6 {
        v.push(("ipv4_csum_ok", json!(s.ipv4_csum_ok)));
    } else {
        v.push(("flow_label", json!(h.flow_label)));
    }
    if depth == 1 {
        return v;
    }
    v.push(("udp_sport", json!(h.udp_sport)));
    v.push(("se", json!(h.se as u8)));
    v.push(("migreq", json!(h.migreq as u8)));
    v.push(("padcnt", json!(h.padcnt)));
    v.push(("pkey", json!(format!("0x{:04x}", h.pkey))));
    v.push(("fecn", json!(h.fecn as u8)));
    v.push(("becn", json!(h.becn as u8)));
    v.push(("ackreq", json!(h.ackreq as u8)));
    if let Some(i) = info {
        if i.reth || i.atomic_eth {
            v.push(("va", json!(format!("0x{:016x}", h.va))));
            v.push(("rkey", json!(format!("0x{:08x}", h.rkey))));
        }
        if i.reth {
            v.push(("dma_len", json!(h.dma_len)));
        }
        if i.atomic_eth {
            v.push(("swap_add", json!(format!("0x{:016x}", h.swap_add))));
            v.push(("compare", json!(format!("0x{:016x}", h.compare))));
        }
        if i.aeth {
            v.push(("syndrome", json!(format!("0x{:02x}", h.syndrome))));
            v.push(("msn", json!(h.msn)));
        }
        if i.atomic_ack {
            v.push(("atomic_orig", json!(format!("0x{:016x}", h.atomic_orig))));
        }
        if i.deth {
            v.push(("qkey", json!(format!("0x{:08x}", h.qkey))));
            v.push(("src_qp", json!(format!("0x{:06x}", h.src_qp))));
        }
        if i.imm {
            v.push(("imm", json!(format!("0x{:08x}", h.imm))));
        }
        if i.ieth {
            v.push(("inv_rkey", json!(format!("0x{:08x}", h.imm))));
        }
    }
    if s.reason == 0 {
        v.push(("payload_off", json!(h.payload_off)));
        v.push(("payload_len", json!(h.payload_len)));
    }
    v
}

/// Write one line; false when the reader went away (e.g. `| head`), which ends output quietly.
fn emit(out: &mut impl std::io::Write, line: &str) -> bool {
    writeln!(out, "{line}").is_ok()
}

fn replay(a: &Args) -> Result<(), String> {
    let path = PathBuf::from(a.opts.get("pcap").ok_or("replay needs --pcap FILE")?);
    let frames = capture::read_frames(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut sim = PktSim::new(width(a)?)?;
    let run = run_rx(&mut sim, &frames, &Flow::default())?;
    if run.status.len() != frames.len() {
        return Err(format!("RTL reported {} statuses for {} frames", run.status.len(), frames.len()));
    }
    let json_out = a.flags.iter().any(|f| f == "json");
    let only = a.opts.get("only").map(|s| s.as_str());
    if let Some(o) = only {
        if o != "accept" && o != "drop" {
            return Err(format!("--only must be accept or drop, not {o}"));
        }
    }
    let limit: usize = match a.opts.get("limit") {
        Some(l) => l.parse().map_err(|_| format!("--limit needs a number, not {l}"))?,
        None => usize::MAX,
    };
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut printed = 0;
    for (i, s) in run.status.iter().enumerate() {
        let verdict = if s.reason == 0 { "accept" } else { "drop" };
        if only.is_some_and(|o| o != verdict) || printed >= limit {
            continue;
        }
        printed += 1;
        let fields = frame_fields(i + 1, s);
        if json_out {
            let m: Map<String, Value> = fields.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
            if !emit(&mut out, &Value::Object(m).to_string()) {
                return Ok(());
            }
        } else {
            let line: Vec<String> = fields
                .into_iter()
                .map(|(k, v)| match v {
                    Value::String(s) => format!("{k}={s}"),
                    Value::Null => format!("{k}=-"),
                    other => format!("{k}={other}"),
                })
                .collect();
            if !emit(&mut out, &line.join(" ")) {
                return Ok(());
            }
        }
    }
    let mut summary = format!(
        "# {} frames, {} accepted; {} input beats in {} cycles at {} bits (the cycles include the 6-cycle pipeline fill)",
        frames.len(),
        run.counters[0],
        run.in_beats,
        run.cycles,
        sim.width()
    );
    for r in DropReason::ALL {
        let c = run.counters[r as usize];
        if c != 0 {
            summary.push_str(&format!("; {}={}", r.name(), c));
        }
    }
    eprintln!("{summary}");
    Ok(())
}

/// A JSON value as the bits of a record field.
fn json_bits(key: &str, v: &Value) -> Result<u128, String> {
    match v {
        Value::Bool(b) => Ok(*b as u128),
        Value::Number(n) => n.as_u64().map(|x| x as u128).ok_or(format!("{key}: not an unsigned integer")),
        Value::String(s) => {
            let s = s.trim();
            if let Some(h) = s.strip_prefix("0x") {
                u128::from_str_radix(h, 16).map_err(|e| format!("{key}: {e}"))
            } else if s.len() == 17 && s.matches(':').count() == 5 {
                u64::from_str_radix(&s.replace(':', ""), 16).map(|x| x as u128).map_err(|e| format!("{key}: {e}"))
            } else if let Ok(ip) = s.parse::<std::net::Ipv4Addr>() {
                Ok(u32::from(ip) as u128)
            } else if let Ok(ip) = s.parse::<std::net::Ipv6Addr>() {
                Ok(u128::from(ip))
            } else {
                s.parse::<u128>().map_err(|_| format!("{key}: cannot read `{s}`"))
            }
        }
        _ => Err(format!("{key}: unsupported JSON value")),
    }
}

fn parse_jobs(text: &str) -> Result<Vec<(HdrRecord, Vec<u8>)>, String> {
    let v: Value = serde_json::from_str(text).map_err(|e| format!("JSON: {e}"))?;
    let items = match v {
        Value::Array(a) => a,
        o @ Value::Object(_) => vec![o],
        _ => return Err("JSON must be an object or an array of objects".into()),
    };
    let mut jobs = Vec::new();
    for (idx, it) in items.iter().enumerate() {
        let obj = it.as_object().ok_or(format!("record {}: not an object", idx + 1))?;
        let mut words = [0u32; hematite_sim::ffi::HDR_WORDS];
        let mut d = HdrRecord { ttl: 64, pkey: 0xFFFF, ..Default::default() };
        pack_hdr(&d, &mut words);
        for (k, val) in obj {
            if k == "payload_hex" || k == "payload_len" {
                continue;
            }
            let (_, lsb, w) = HDR_FIELDS
                .iter()
                .find(|(n, _, _)| n == k)
                .ok_or(format!("record {}: unknown field `{k}`", idx + 1))?;
            let bits = json_bits(k, val).map_err(|e| format!("record {}: {e}", idx + 1))?;
            if *w < 128 && bits >> w != 0 {
                return Err(format!("record {}: {k} does not fit in {w} bits", idx + 1));
            }
            set_bits(&mut words, *lsb, *w, bits);
        }
        d = unpack_hdr(&words);
        let payload = if let Some(h) = obj.get("payload_hex") {
            let h = h.as_str().ok_or("payload_hex must be a string")?;
            if h.len() % 2 != 0 || !h.bytes().all(|c| c.is_ascii_hexdigit()) {
                return Err(format!("record {}: payload_hex must be an even number of hex digits", idx + 1));
            }
            (0..h.len() / 2)
                .map(|i| u8::from_str_radix(&h[2 * i..2 * i + 2], 16))
                .collect::<Result<Vec<u8>, _>>()
                .map_err(|e| format!("record {}: payload_hex: {e}", idx + 1))?
        } else if let Some(n) = obj.get("payload_len") {
            let n = n.as_u64().ok_or("payload_len must be a number")? as usize;
            if n > 65535 {
                return Err(format!("record {}: payload_len {n} is over 65535", idx + 1));
            }
            (0..n).map(|i| i as u8).collect()
        } else {
            Vec::new()
        };
        if payload.len() > 65535 {
            return Err(format!("record {}: payload over 65535 bytes", idx + 1));
        }
        d.payload_len = payload.len() as u16;
        jobs.push((d, payload));
    }
    Ok(jobs)
}

fn build(a: &Args) -> Result<(), String> {
    let jpath = a.opts.get("json").ok_or("build needs --json FILE")?;
    let out = PathBuf::from(a.opts.get("pcap").ok_or("build needs --pcap OUT")?);
    let text = std::fs::read_to_string(jpath).map_err(|e| format!("{jpath}: {e}"))?;
    let jobs = parse_jobs(&text)?;
    // Records the hardware rejects (unknown opcode, payload on an opcode without payload,
    // datagram over 64 KiB) send no frame: an error unless --allow-rejects. Field values out of
    // range for their header field are always an error.
    let allow = a.flags.iter().any(|f| f == "allow-rejects");
    let mut expect = 0;
    let mut rejected = 0;
    for (i, (r, p)) in jobs.iter().enumerate() {
        match build_frame(r, p) {
            Ok(_) => expect += 1,
            Err(e @ hematite_model::BuildError::FieldRange { .. }) => {
                return Err(format!("record {}: {e}", i + 1));
            }
            Err(e) => {
                rejected += 1;
                eprintln!("record {}: rejected by the hardware (as it must be): {e}", i + 1);
            }
        }
    }
    if rejected != 0 && !allow {
        return Err(format!("{rejected} record(s) cannot be sent (use --allow-rejects to send the rest)"));
    }
    let mut sim = PktSim::new(width(a)?)?;
    let tj: Vec<TxJob> = jobs.iter().map(|(r, p)| TxJob { rec: *r, payload: p.clone() }).collect();
    let run = run_tx(&mut sim, &tj, expect, &Flow::default())?;
    if run.frames.len() != expect || run.counters[2] as usize != rejected {
        return Err(format!(
            "the RTL sent {} frames and rejected {} records; the model expects {expect} and {rejected}",
            run.frames.len(),
            run.counters[2]
        ));
    }
    let mut frames = Vec::new();
    let mut k = 0;
    let mut mismatches = 0;
    for (i, (r, p)) in jobs.iter().enumerate() {
        let Ok(model) = build_frame(r, p) else { continue };
        let f = run.frames.get(k).ok_or("RTL produced fewer frames than expected")?;
        k += 1;
        let same = f.bytes == model;
        if !same {
            mismatches += 1;
        }
        let line = format!(
            "frame={} record={} len={} opcode=0x{:02x} psn={} bad={} model={}",
            k,
            i + 1,
            f.bytes.len(),
            r.opcode,
            r.psn,
            f.bad,
            if same { "match" } else { "DIFFERENT" }
        );
        if !emit(&mut std::io::stdout().lock(), &line) {
            break;
        }
        frames.push(f.bytes.clone());
    }
    capture::write_pcap(&out, &frames).map_err(|e| format!("{}: {e}", out.display()))?;
    eprintln!(
        "# wrote {} frames to {} ({} beats in {} cycles, rejected records {})",
        frames.len(),
        out.display(),
        run.out_beats,
        run.cycles,
        run.counters[2]
    );
    if mismatches != 0 {
        return Err(format!("{mismatches} frames differ from the reference model"));
    }
    Ok(())
}

fn parse_mac(s: &str) -> Result<u64, String> {
    let parts: Vec<&str> = s.split(':').collect();
    if parts.len() != 6 {
        return Err(format!("bad MAC `{s}` (want aa:bb:cc:dd:ee:ff)"));
    }
    parts.iter().try_fold(0u64, |a, p| u8::from_str_radix(p, 16).map(|b| a << 8 | b as u64).map_err(|_| format!("bad MAC `{s}`")))
}

fn device_main(args: &[String]) -> Result<(), String> {
    use hematite_sim::device::{DevConfig, SimNic, WireAddr};
    let mut socket = None;
    let mut local = None;
    let mut peer = None;
    let mut mac = 0x02_00_00_00_00_01u64;
    let mut ip: std::net::Ipv4Addr = "10.0.0.1".parse().unwrap();
    let mut pcap = None;
    let mut counters = None;
    let mut loss = 0.0f64;
    let mut rx_loss = 0.0f64;
    let (mut dup, mut reorder, mut corrupt, mut seed) = (0.0f64, 0.0f64, 0.0f64, 1u64);
    let mut fw = hematite_sim::fw::image_path();
    let mut max_cycles = 0u64;
    let mut verbose = false;
    let mut idle_after = None;
    let (mut trace, mut trace_from, mut trace_cycles) = (None, None, None);
    let (mut trace_on, mut trace_before, mut trace_after) = (None, None, None);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut val = || it.next().cloned().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--socket" => socket = Some(PathBuf::from(val()?)),
            "--wire-local" => local = Some(WireAddr::parse(&val()?)?),
            "--wire-peer" => peer = Some(WireAddr::parse(&val()?)?),
            "--mac" => mac = parse_mac(&val()?)?,
            "--ip" => ip = val()?.parse().map_err(|e| format!("--ip: {e}"))?,
            "--pcap" => pcap = Some(PathBuf::from(val()?)),
            "--counters" => counters = Some(PathBuf::from(val()?)),
            "--loss" => {
                loss = val()?.parse().map_err(|e| format!("--loss: {e}"))?;
                if !(0.0..1.0).contains(&loss) {
                    return Err("--loss wants a fraction in [0, 1)".into());
                }
            }
            "--rx-loss" => {
                rx_loss = val()?.parse().map_err(|e| format!("--rx-loss: {e}"))?;
                if !(0.0..1.0).contains(&rx_loss) {
                    return Err("--rx-loss wants a fraction in [0, 1)".into());
                }
            }
            "--dup" | "--reorder" | "--corrupt" => {
                let p: f64 = val()?.parse().map_err(|e| format!("{a}: {e}"))?;
                if !(0.0..1.0).contains(&p) {
                    return Err(format!("{a} wants a fraction in [0, 1)"));
                }
                *match a.as_str() {
                    "--dup" => &mut dup,
                    "--reorder" => &mut reorder,
                    _ => &mut corrupt,
                } = p;
            }
            "--seed" => seed = val()?.parse().map_err(|e| format!("--seed: {e}"))?,
            "--fw" => fw = PathBuf::from(val()?),
            "--max-cycles" => max_cycles = val()?.parse().map_err(|e| format!("--max-cycles: {e}"))?,
            "--idle-after" => idle_after = Some(val()?.parse().map_err(|e| format!("--idle-after: {e}"))?),
            "--trace" => trace = Some(PathBuf::from(val()?)),
            "--trace-from" => trace_from = Some(val()?.parse().map_err(|e| format!("--trace-from: {e}"))?),
            "--trace-cycles" => trace_cycles = Some(val()?.parse().map_err(|e| format!("--trace-cycles: {e}"))?),
            "--trace-on" => trace_on = Some(hematite_sim::device::TraceTrigger::parse(&val()?)?),
            "--trace-before" => trace_before = Some(val()?.parse().map_err(|e| format!("--trace-before: {e}"))?),
            "--trace-after" => trace_after = Some(val()?.parse().map_err(|e| format!("--trace-after: {e}"))?),
            "-v" | "--verbose" => verbose = true,
            _ => return Err(format!("device: unknown argument `{a}`")),
        }
    }
    let socket = socket.ok_or("device needs --socket PATH")?;
    let local = local.ok_or("device needs --wire-local ADDR")?;
    let peer = peer.ok_or("device needs --wire-peer ADDR")?;
    let image = hematite_sim::fw::read_hex(&fw)?;
    let mut cfg = DevConfig::new(socket, local, peer, mac, u32::from(ip), image);
    cfg.pcap = pcap;
    cfg.counters = counters;
    cfg.trace = trace_window(trace, (trace_from, trace_cycles), (trace_on, trace_before, trace_after))?;
    cfg.loss = loss;
    cfg.rx_loss = rx_loss;
    if loss + dup + reorder + corrupt >= 1.0 {
        return Err("--loss, --dup, --reorder and --corrupt together must stay below 1".into());
    }
    cfg.dup = dup;
    cfg.reorder = reorder;
    cfg.corrupt = corrupt;
    cfg.seed = seed;
    cfg.max_cycles = max_cycles;
    cfg.verbose = verbose;
    if let Some(n) = idle_after {
        cfg.idle_after = n;
    }
    hematite_sim::device::install_stop_handler();
    let mut nic = SimNic::new(cfg)?;
    if verbose {
        eprintln!("hematite-sim device: ready");
    }
    nic.run()
}

/// The `--trace` window from its options: a window of cycles (`--trace-from`,
/// `--trace-cycles`) or a triggered one (`--trace-on`, `--trace-before`, `--trace-after`), not
/// both; any of them without `--trace` is an error, not ignored.
type CycleOpts = (Option<u64>, Option<u64>);
type TriggerOpts = (Option<hematite_sim::device::TraceTrigger>, Option<u64>, Option<u64>);
fn trace_window(path: Option<PathBuf>, (from, cycles): CycleOpts, (on, before, after): TriggerOpts) -> Result<Option<hematite_sim::device::TraceWindow>, String> {
    use hematite_sim::device::{TraceWhen, TraceWindow};
    let cyc = from.is_some() || cycles.is_some();
    let trig = before.is_some() || after.is_some();
    let Some(path) = path else {
        return if cyc || trig || on.is_some() { Err("--trace-from, --trace-cycles, --trace-on, --trace-before and --trace-after need --trace FILE.fst".into()) } else { Ok(None) };
    };
    let when = match on {
        Some(on) if !cyc => TraceWhen::Trigger { on, before: before.unwrap_or(10_000), after: after.unwrap_or(1_000) },
        Some(_) => return Err("--trace-on goes with --trace-before / --trace-after, not --trace-from / --trace-cycles".into()),
        None if trig => return Err("--trace-before and --trace-after need --trace-on EVENT".into()),
        None => TraceWhen::Cycles { from: from.unwrap_or(0), cycles: cycles.unwrap_or(100_000) },
    };
    Ok(Some(TraceWindow { path, when }))
}

fn demo_main(args: &[String]) -> Result<(), String> {
    let mut o = hematite_sim::demo::DemoOpts {
        size: 4096,
        count: 64,
        loss: 0.0,
        qps: 1,
        dir: None,
        exe: std::env::current_exe().map_err(|e| e.to_string())?,
        fw: None,
        verbose: true,
        trace_a: Vec::new(),
        attach: false,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut val = || it.next().cloned().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--size" => o.size = val()?.parse().map_err(|e| format!("--size: {e}"))?,
            "--count" => o.count = val()?.parse().map_err(|e| format!("--count: {e}"))?,
            "--loss" => o.loss = val()?.parse().map_err(|e| format!("--loss: {e}"))?,
            "--qps" => o.qps = val()?.parse().map_err(|e| format!("--qps: {e}"))?,
            "--dir" if o.attach => return Err("demo: --attach DIR and --dir DIR name the same folder: give one".into()),
            "--dir" => o.dir = Some(PathBuf::from(val()?)),
            "--attach" => {
                if o.dir.is_some() {
                    return Err("demo: --attach DIR and --dir DIR name the same folder: give one".into());
                }
                o.dir = Some(PathBuf::from(val()?));
                o.attach = true;
            }
            "--fw" => o.fw = Some(PathBuf::from(val()?)),
            "--trace" | "--trace-from" | "--trace-cycles" | "--trace-on" | "--trace-before" | "--trace-after" => {
                let v = val()?;
                o.trace_a.extend([a.clone(), v]);
            }
            _ => return Err(format!("demo: unknown argument `{a}`")),
        }
    }
    if o.attach && (!o.trace_a.is_empty() || o.fw.is_some() || o.loss != 0.0) {
        return Err("demo: --attach starts no device, so --trace, --fw and --loss do not apply".into());
    }
    if !o.trace_a.is_empty() && !o.trace_a.iter().any(|a| a == "--trace") {
        return Err("demo: --trace-from, --trace-cycles, --trace-on, --trace-before and --trace-after need --trace FILE.fst".into());
    }
    if o.size == 0 || o.size > 1 << 20 || o.count < 2 || o.count > 1_000_000 || o.qps == 0 || o.qps > 64 || !(0.0..0.5).contains(&o.loss) {
        return Err("demo: --size 1..1048576, --count 2..1000000, --qps 1..64, --loss 0..0.5".into());
    }
    let t0 = std::time::Instant::now();
    hematite_sim::demo::run(&o)?;
    println!("demo finished in {:.1} s of wall time", t0.elapsed().as_secs_f64());
    Ok(())
}

/// Success, or `who: error` on stderr and failure.
fn finish(who: &str, r: Result<(), String>) -> ExitCode {
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{who}: {e}");
            ExitCode::FAILURE
        }
    }
}

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().collect();
    if argv.get(1).map(|s| s.as_str()) == Some("rc-echo") {
        // hematite-sim rc-echo SOCKET INFO_OUT INFO_IN COUNT SIZE (two-process tests)
        let r = (|| -> Result<(), String> {
            if argv.len() != 7 {
                return Err("usage: hematite-sim rc-echo SOCKET INFO_OUT INFO_IN COUNT SIZE".into());
            }
            let count = argv[5].parse().map_err(|e| format!("COUNT: {e}"))?;
            let size = argv[6].parse().map_err(|e| format!("SIZE: {e}"))?;
            hematite_sim::demo::rc_echo(std::path::Path::new(&argv[2]), std::path::Path::new(&argv[3]), std::path::Path::new(&argv[4]), count, size)
        })();
        return finish("hematite-sim rc-echo", r);
    }
    let subcommands: [(&str, fn(&[String]) -> Result<(), String>); 2] = [("demo", demo_main), ("device", device_main)];
    for (name, sub_main) in subcommands {
        if argv.get(1).map(|s| s.as_str()) == Some(name) {
            if argv.iter().any(|a| a == "-h" || a == "--help") {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            return finish(&format!("hematite-sim {name}"), sub_main(&argv[2..]));
        }
    }
    let a = match parse_args() {
        Ok(a) => a,
        Err(e) if e == "help" => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("hematite-sim: {e}");
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    let r = match a.cmd.as_str() {
        "replay" => replay(&a),
        "build" => build(&a),
        c => Err(format!("unknown command `{c}`\n{USAGE}")),
    };
    finish("hematite-sim", r)
}
