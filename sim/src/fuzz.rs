//! Fuzzing campaigns (`hematite-fuzz`, `./hematite fuzz TARGET`).
//!
//! `rx`: mutated frames through the Verilated receive path, compared frame by frame with the
//! receive spec ([`hematite_model::classify`]) by [`crate::rxcheck::check_rx_run`]; the
//! per-reason counters must explain every frame, and the path must report every frame (a
//! missing report within the run's cycle bound is a hang, and a finding).
//!
//! Seeds are real frames (the repository's vectors and captures, and ../shared's when present);
//! each case applies one to four mutations ([`Mutation`]) and, half of the time, repairs the
//! IPv4 header checksum and the ICRC afterwards so that the checks behind them are reached.

use crate::rxcheck::{check_rx_run, hexs};
use crate::{run_rx, Flow, PktSim, Rng};
use hematite_model::record::DropReason;
use hematite_model::{classify, icrc, wire};
use std::path::{Path, PathBuf};

/// One mutation of a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mutation {
    /// Flip one bit anywhere.
    BitFlip,
    /// Overwrite one byte anywhere.
    ByteSet,
    /// Cut the frame at a random length (at least one byte is left).
    Truncate,
    /// Append 1-64 random bytes.
    Extend,
    /// Rewrite a length field: IPv4 total length, IPv6 payload length or UDP length (random, or
    /// moved by a few bytes).
    LengthField,
    /// A random opcode.
    Opcode,
    /// A random destination QPN.
    Qpn,
    /// A random PSN.
    Psn,
    /// Random BTH byte 1 (SE, M, PadCnt, TVer) or P_Key.
    BthFlags,
    /// An extra 802.1Q tag inserted after the MAC addresses (header stacking: tagged, QinQ).
    StackVlan,
    /// 4, 8 or 16 bytes inserted right after the BTH (an extension header that should not be
    /// there), with the IP and UDP lengths moved to match.
    StackExt,
    /// Bytes added or removed before the ICRC, lengths moved to match.
    Resize,
}

impl Mutation {
    pub const ALL: [Mutation; 12] = [
        Mutation::BitFlip,
        Mutation::ByteSet,
        Mutation::Truncate,
        Mutation::Extend,
        Mutation::LengthField,
        Mutation::Opcode,
        Mutation::Qpn,
        Mutation::Psn,
        Mutation::BthFlags,
        Mutation::StackVlan,
        Mutation::StackExt,
        Mutation::Resize,
    ];
}

/// Offsets of a frame as far as they can be read: (L3 offset, IPv6, UDP offset).
fn layers(f: &[u8]) -> Option<(usize, bool, usize)> {
    if f.len() < 14 {
        return None;
    }
    let mut l3 = 14;
    let mut et = u16::from_be_bytes([f[12], f[13]]);
    while et == 0x8100 && f.len() >= l3 + 4 {
        et = u16::from_be_bytes([f[l3 + 2], f[l3 + 3]]);
        l3 += 4;
    }
    match et {
        0x0800 => Some((l3, false, l3 + 20)),
        0x86DD => Some((l3, true, l3 + 40)),
        _ => None,
    }
}

fn get16(f: &[u8], i: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*f.get(i)?, *f.get(i + 1)?]))
}

fn put16(f: &mut [u8], i: usize, v: u16) {
    if i + 2 <= f.len() {
        f[i..i + 2].copy_from_slice(&v.to_be_bytes());
    }
}

/// Moves the IP and UDP length fields by `d` bytes (wrapping at 16 bits).
fn move_lengths(f: &mut [u8], l3: usize, v6: bool, udp: usize, d: i64) {
    let li = if v6 { l3 + 4 } else { l3 + 2 };
    for i in [li, udp + 4] {
        if let Some(v) = get16(f, i) {
            put16(f, i, (v as i64 + d) as u16);
        }
    }
}

/// End of the IP datagram by its length field, when it lies within the frame.
fn ip_end(f: &[u8], l3: usize, v6: bool) -> Option<usize> {
    let e = if v6 { l3 + 40 + get16(f, l3 + 4)? as usize } else { l3 + get16(f, l3 + 2)? as usize };
    (e <= f.len()).then_some(e)
}

/// Recomputes the IPv4 header checksum and the ICRC where the frame's geometry allows.
pub fn repair(f: &mut [u8]) {
    let Some((l3, v6, udp)) = layers(f) else { return };
    if !v6 && f.len() >= l3 + 20 {
        put16(f, l3 + 10, 0);
        let c = wire::ipv4_header_checksum(&f[l3..l3 + 20]);
        put16(f, l3 + 10, c);
    }
    if let Some(e) = ip_end(f, l3, v6) {
        if e >= udp + 8 + 12 + 4 {
            let v = icrc::icrc_masked(&f[l3..e - 4], v6);
            f[e - 4..e].copy_from_slice(&icrc::icrc_wire_bytes(v));
        }
    }
}

/// Applies `m` to `f` with randomness from `rng`.
pub fn mutate(f: &mut Vec<u8>, m: Mutation, rng: &mut Rng) {
    let n = f.len();
    let lay = layers(f);
    let bth = lay.map(|(_, _, udp)| udp + 8);
    match m {
        Mutation::BitFlip if n > 0 => {
            let i = (rng.next() % n as u64) as usize;
            f[i] ^= 1 << (rng.next() % 8);
        }
        Mutation::ByteSet if n > 0 => {
            let i = (rng.next() % n as u64) as usize;
            f[i] = rng.next() as u8;
        }
        Mutation::Truncate if n > 1 => f.truncate(1 + (rng.next() % (n as u64 - 1)) as usize),
        Mutation::Extend => {
            let k = 1 + rng.next() % 64;
            f.extend((0..k).map(|_| rng.next() as u8));
        }
        Mutation::LengthField => {
            if let Some((l3, v6, udp)) = lay {
                let i = match rng.next() % 2 {
                    0 => {
                        if v6 {
                            l3 + 4
                        } else {
                            l3 + 2
                        }
                    }
                    _ => udp + 4,
                };
                if let Some(v) = get16(f, i) {
                    let nv = if rng.next() % 2 == 0 { rng.next() as u16 } else { (v as i64 + (rng.next() % 17) as i64 - 8) as u16 };
                    put16(f, i, nv);
                }
            }
        }
        Mutation::Opcode => {
            if let Some(b) = bth.filter(|b| *b < n) {
                f[b] = rng.next() as u8;
            }
        }
        Mutation::Qpn => {
            if let Some(b) = bth.filter(|b| b + 8 <= n) {
                let v = rng.next();
                f[b + 5..b + 8].copy_from_slice(&[(v >> 16) as u8, (v >> 8) as u8, v as u8]);
            }
        }
        Mutation::Psn => {
            if let Some(b) = bth.filter(|b| b + 12 <= n) {
                let v = rng.next();
                f[b + 9..b + 12].copy_from_slice(&[(v >> 16) as u8, (v >> 8) as u8, v as u8]);
            }
        }
        Mutation::BthFlags => {
            if let Some(b) = bth.filter(|b| b + 4 <= n) {
                if rng.next() % 2 == 0 {
                    f[b + 1] = rng.next() as u8;
                } else {
                    let k = [0xFFFFu16, 0x7FFF, 0x8001, 0x0000, rng.next() as u16][(rng.next() % 5) as usize];
                    put16(f, b + 2, k);
                }
            }
        }
        Mutation::StackVlan if n >= 14 => {
            let tag = [0x81, 0x00, (rng.next() & 0xEF) as u8, rng.next() as u8];
            f.splice(12..12, tag);
        }
        Mutation::StackExt => {
            if let (Some((l3, v6, udp)), Some(b)) = (lay, bth) {
                if b + 12 <= n {
                    let k = [4usize, 8, 16][(rng.next() % 3) as usize];
                    let bytes: Vec<u8> = (0..k).map(|_| rng.next() as u8).collect();
                    f.splice(b + 12..b + 12, bytes);
                    move_lengths(f, l3, v6, udp, k as i64);
                }
            }
        }
        Mutation::Resize => {
            if let Some((l3, v6, udp)) = lay {
                if let Some(e) = ip_end(f, l3, v6).filter(|e| *e >= udp + 8 + 4) {
                    let d = [1i64, 2, 3, 4, -1, -2, -4, 4096][(rng.next() % 8) as usize];
                    let at = e - 4;
                    if d > 0 {
                        let bytes: Vec<u8> = (0..d).map(|_| rng.next() as u8).collect();
                        f.splice(at..at, bytes);
                    } else {
                        let k = ((-d) as usize).min(at - (udp + 8));
                        f.drain(at - k..at);
                    }
                    move_lengths(f, l3, v6, udp, d);
                }
            }
        }
        _ => {}
    }
}

/// One fuzz case from a seed: 1-4 mutations, then a repair half of the time.
pub fn case(seed: &[u8], rng: &mut Rng) -> Vec<u8> {
    let mut f = seed.to_vec();
    for _ in 0..1 + rng.next() % 4 {
        let m = Mutation::ALL[(rng.next() % Mutation::ALL.len() as u64) as usize];
        mutate(&mut f, m, rng);
    }
    if rng.next() % 2 == 0 {
        repair(&mut f);
    }
    if f.is_empty() {
        f.push(0);
    }
    f
}

/// The seed corpus: every frame of the pcap/pcapng(.xz) files in `dirs` (missing folders are
/// reported by the caller, not here). Files are read in name order.
pub fn load_seeds(dirs: &[PathBuf]) -> Result<Vec<Vec<u8>>, String> {
    let mut seeds = Vec::new();
    for d in dirs {
        let files = hematite_model::capture::capture_files(d).map_err(|e| format!("{}: {e}", d.display()))?;
        for f in files {
            let frames = hematite_model::capture::read_frames(&f).map_err(|e| format!("{}: {e}", f.display()))?;
            seeds.extend(frames.into_iter().filter(|x| !x.is_empty()));
        }
    }
    Ok(seeds)
}

/// What an RX campaign found.
#[derive(Debug, Default)]
pub struct RxReport {
    pub cases: u64,
    pub findings: u64,
    /// Frames per verdict (model's reason name, or "accepted").
    pub verdicts: std::collections::BTreeMap<&'static str, u64>,
    /// Simulated cycles.
    pub cycles: u64,
}

/// Runs `count` mutated frames from `seeds` through the RX path at `widths` (alternating
/// batches), writing each finding (a frame where the RTL and the spec differ, counters that do
/// not explain the batch, or a hang) to `out` as `rx-finding-N.hex` (one line of hex) with its
/// description. `progress` is called after each batch.
pub fn rx_campaign(
    seeds: &[Vec<u8>],
    count: u64,
    seed: u64,
    widths: &[usize],
    out: &Path,
    mut progress: impl FnMut(&RxReport),
) -> Result<RxReport, String> {
    if seeds.is_empty() {
        return Err("no seed frames".into());
    }
    const BATCH: u64 = 4096;
    let mut rng = Rng::new(seed);
    let mut rep = RxReport::default();
    let mut sims: Vec<PktSim> = widths.iter().map(|w| PktSim::new(*w)).collect::<Result<_, _>>()?;
    let mut counters: Vec<[u32; 15]> = vec![[0; 15]; widths.len()];
    let mut batch_no = 0u64;
    while rep.cases < count {
        let n = BATCH.min(count - rep.cases);
        let frames: Vec<Vec<u8>> = (0..n).map(|_| case(&seeds[(rng.next() % seeds.len() as u64) as usize], &mut rng)).collect();
        let wi = (batch_no % widths.len() as u64) as usize;
        let flow = Flow { idle_pct: (batch_no % 3) as u32 * 5, stall_pct: (batch_no % 4) as u32 * 5, seed: rng.next() };
        let finding = |what: String, frame: Option<&[u8]>, rep: &mut RxReport| -> Result<(), String> {
            rep.findings += 1;
            std::fs::create_dir_all(out).map_err(|e| format!("{}: {e}", out.display()))?;
            let p = out.join(format!("rx-finding-{}.txt", rep.findings));
            let text = format!("width {}: {what}\n{}\n", widths[wi], frame.map(hexs).unwrap_or_default());
            std::fs::write(&p, text).map_err(|e| format!("{}: {e}", p.display()))?;
            eprintln!("fuzz rx: finding {} at width {}: {what} ({})", rep.findings, widths[wi], p.display());
            Ok(())
        };
        let c0 = sims[wi].rx_cycles();
        match run_rx(&mut sims[wi], &frames, &flow) {
            Err(e) => {
                finding(format!("RX path did not report every frame: {e}"), None, &mut rep)?;
                // a hung model is not reused
                sims[wi] = PktSim::new(widths[wi])?;
                counters[wi] = [0; 15];
            }
            Ok(run) => {
                rep.cycles += sims[wi].rx_cycles() - c0;
                if let Err(e) = check_rx_run(&frames, &run) {
                    // locate the frame named in the message for the record
                    let idx = e.strip_prefix("frame ").and_then(|r| r.split(':').next()).and_then(|k| k.parse::<usize>().ok());
                    finding(e.clone(), idx.and_then(|i| frames.get(i - 1)).map(|v| v.as_slice()), &mut rep)?;
                }
                // the counters explain the batch: their increase equals the spec's verdicts
                let mut want = [0u32; 15];
                for f in &frames {
                    let r = classify(f).reason;
                    *rep.verdicts.entry(r.map_or("accepted", DropReason::name)).or_default() += 1;
                    want[r.map_or(0, |r| r as usize)] += 1;
                }
                for (i, w) in want.iter().enumerate() {
                    let got = run.counters[i].wrapping_sub(counters[wi][i]);
                    if got != *w {
                        finding(format!("counter {i}: +{got}, the spec says +{w}"), None, &mut rep)?;
                    }
                }
                counters[wi] = run.counters;
            }
        }
        rep.cases += n;
        batch_no += 1;
        progress(&rep);
    }
    Ok(rep)
}
