//! `hematite-run --stat`: the counters of the running NICs as a table, one column per NIC,
//! like `ethtool -S`. The device processes keep them as files (`STATE/nic{n}.counters/`,
//! which the sysfs tree links as `ports/1/counters` and `ports/1/hw_counters`;
//! docs/counters.md); this reads those files.

use crate::devices::{self, State};
use crate::tree::Layout;
use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::Path;
use std::time::Duration;

/// Most QPs a device process samples (`qp/watch`; as `hematite_sim`'s stats.rs).
pub const MAX_WATCHED: usize = 64;

/// One NIC's counters: (directory, name) → value; and its snapshot line.
#[derive(Debug, Default, Clone)]
pub struct Sample {
    pub values: BTreeMap<(String, String), u64>,
    pub cycle: Option<u64>,
}

/// Adds every counter file of `d` (one number each; not `snapshot`, not the hidden
/// temporary files) to `s` under (`group`, file name).
fn read_files(d: &Path, group: &str, s: &mut Sample) -> Result<(), String> {
    let rd = std::fs::read_dir(d).map_err(|e| format!("{}: {e}", d.display()))?;
    for ent in rd.flatten() {
        let name = ent.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') || name == "snapshot" {
            continue;
        }
        let text = std::fs::read_to_string(ent.path()).map_err(|e| format!("{}: {e}", ent.path().display()))?;
        let v = text.trim().parse::<u64>().map_err(|_| format!("{}: not a number: {:?}", ent.path().display(), text.trim()))?;
        s.values.insert((group.to_string(), name), v);
    }
    Ok(())
}

/// The simulated cycle in a `snapshot` file (`cycle C`).
fn snapshot_cycle(dir: &Path) -> Option<u64> {
    let t = std::fs::read_to_string(dir.join("snapshot")).ok()?;
    t.lines().find_map(|l| l.strip_prefix("cycle ").and_then(|v| v.trim().parse().ok()))
}

/// Reads a counter directory as the device process writes it.
pub fn read_counters(dir: &Path) -> Result<Sample, String> {
    let mut s = Sample { cycle: snapshot_cycle(dir), ..Sample::default() };
    for sub in ["counters", "hw_counters"] {
        read_files(&dir.join(sub), sub, &mut s)?;
    }
    Ok(s)
}

/// The table: a row per counter, a column per NIC; with `prev`, each cell also gives the
/// change since then.
pub fn table(nics: &[(usize, Sample)], prev: Option<&[(usize, Sample)]>) -> String {
    let mut keys: Vec<(String, String)> = Vec::new();
    for (_, s) in nics {
        for k in s.values.keys() {
            if !keys.contains(k) {
                keys.push(k.clone());
            }
        }
    }
    keys.sort();
    let cell = |i: usize, k: &(String, String)| -> String {
        let v = nics[i].1.values.get(k).copied();
        let p = prev.and_then(|p| p.iter().find(|(n, _)| *n == nics[i].0)).and_then(|(_, s)| s.values.get(k).copied());
        match (v, p) {
            (None, _) => "-".into(),
            (Some(v), Some(p)) => format!("{v} (+{})", v.saturating_sub(p)),
            (Some(v), None) => v.to_string(),
        }
    };
    let mut rows: Vec<Vec<String>> = vec![std::iter::once("counter".to_string()).chain(nics.iter().map(|(n, _)| format!("hematite{n}"))).collect()];
    rows.push(std::iter::once("simulated cycle".to_string()).chain(nics.iter().map(|(_, s)| s.cycle.map(|c| c.to_string()).unwrap_or("-".into()))).collect());
    for k in &keys {
        rows.push(std::iter::once(format!("{}/{}", k.0, k.1)).chain((0..nics.len()).map(|i| cell(i, k))).collect());
    }
    let ncol = rows[0].len();
    let w: Vec<usize> = (0..ncol).map(|c| rows.iter().map(|r| r[c].len()).max().unwrap_or(0)).collect();
    let mut out = String::new();
    for r in rows {
        let mut line = format!("{:<w0$}", r[0], w0 = w[0]);
        for c in 1..ncol {
            line += &format!("  {:>wc$}", r[c], wc = w[c]);
        }
        out += line.trim_end();
        out.push('\n');
    }
    out
}

/// The running NICs' counters (only `nic` with `Some`). Err when none runs.
pub fn collect(layout: &Layout, nic: Option<usize>) -> Result<Vec<(usize, Sample)>, String> {
    let mut v = Vec::new();
    for n in devices::known_nics(&layout.state) {
        if nic.is_some_and(|x| x != n) || !matches!(devices::state(layout, n), State::Running(_)) {
            continue;
        }
        v.push((n, read_counters(&layout.counters(n))?));
    }
    if v.is_empty() {
        return Err(match nic {
            Some(n) => format!("NIC {n} is not running (hematite-run --status lists the NICs of {})", layout.state.display()),
            None => format!("no NIC is running in {} (hematite-run starts them)", layout.state.display()),
        });
    }
    Ok(v)
}

/// QP `q`'s counters on the running NICs (only `nic` with `Some`): the QP is added to each
/// NIC's `qp/watch`, and its files are waited for (up to 5 s after the request) unless a
/// sample newer than `since` (a simulated cycle) is already there.
pub fn collect_qp(layout: &Layout, nic: Option<usize>, q: u16, since: &mut BTreeMap<usize, u64>) -> Result<Vec<(usize, Sample)>, String> {
    let nics: Vec<usize> = collect(layout, nic)?.into_iter().map(|(n, _)| n).collect();
    for &n in &nics {
        let qd = layout.counters(n).join("qp");
        std::fs::create_dir_all(&qd).map_err(|e| format!("{}: {e}", qd.display()))?;
        let w = qd.join("watch");
        let text = std::fs::read_to_string(&w).unwrap_or_default();
        if !text.lines().any(|l| l.trim() == q.to_string()) {
            if text.lines().filter(|l| !l.trim().is_empty()).count() >= MAX_WATCHED {
                return Err(format!("{}: {MAX_WATCHED} QPs are watched already (the most); remove some lines", w.display()));
            }
            // replaced whole: the device process never reads half a list
            let tmp = qd.join(".watch.tmp");
            std::fs::write(&tmp, format!("{text}{q}\n")).map_err(|e| format!("{}: {e}", tmp.display()))?;
            std::fs::rename(&tmp, &w).map_err(|e| format!("{}: {e}", w.display()))?;
        }
    }
    let t0 = std::time::Instant::now();
    loop {
        let mut out = Vec::new();
        for &n in &nics {
            let d = layout.counters(n).join("qp").join(q.to_string());
            // a sample other than the last one shown (a restarted device counts its cycles
            // from 0 again)
            match snapshot_cycle(&d) {
                Some(c) if since.get(&n) != Some(&c) => {
                    let mut s = Sample { cycle: Some(c), ..Sample::default() };
                    read_files(&d, "qp", &mut s)?;
                    out.push((n, s));
                }
                _ => {}
            }
        }
        if out.len() == nics.len() {
            for (n, s) in &out {
                since.insert(*n, s.cycle.unwrap_or(0));
            }
            return Ok(out);
        }
        if t0.elapsed() > Duration::from_secs(5) {
            return Err(format!("QP {q}: no counters from the device process within 5 s (is it running the current hematite-sim?)"));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `--stat --qp Q`: as [`run`], for one QP's counters.
pub fn run_qp(layout: &Layout, nic: Option<usize>, q: u16, watch: bool) -> u8 {
    let mut since = BTreeMap::new();
    show(watch, &format!("QP {q}\n"), || collect_qp(layout, nic, q, &mut since))
}

/// `--stat`: prints the table once, or with `watch` every second (the change since the last
/// print beside each value) until interrupted. Returns the exit status.
pub fn run(layout: &Layout, nic: Option<usize>, watch: bool) -> u8 {
    show(watch, "", || collect(layout, nic))
}

/// Prints `title` and the table of what `get` returns, once or (`watch`) every second.
fn show(watch: bool, title: &str, mut get: impl FnMut() -> Result<Vec<(usize, Sample)>, String>) -> u8 {
    let mut prev: Option<Vec<(usize, Sample)>> = None;
    loop {
        let cur = match get() {
            Ok(c) => c,
            Err(e) => {
                eprintln!("hematite-run --stat: {e}");
                return 1;
            }
        };
        if watch && std::io::stdout().is_terminal() {
            print!("\x1b[H\x1b[2J");
        }
        print!("{title}{}", table(&cur, prev.as_deref()));
        if !watch {
            return 0;
        }
        println!();
        prev = Some(cur);
        std::thread::sleep(Duration::from_secs(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_files_and_formats_columns_with_changes() {
        let d = std::env::temp_dir().join(format!("hm-stat-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(d.join("counters")).unwrap();
        std::fs::create_dir_all(d.join("hw_counters")).unwrap();
        std::fs::write(d.join("counters/port_xmit_data"), "40\n").unwrap();
        std::fs::write(d.join("hw_counters/np_cnp_sent"), "3\n").unwrap();
        std::fs::write(d.join("hw_counters/.np_cnp_sent.tmp"), "junk").unwrap();
        std::fs::write(d.join("snapshot"), "cycle 77\nsamples 2\n").unwrap();
        let a = read_counters(&d).unwrap();
        assert_eq!(a.cycle, Some(77));
        assert_eq!(a.values.len(), 2, "temporary files are not counters");
        let mut b = a.clone();
        b.values.insert(("counters".into(), "port_xmit_data".into()), 50);
        let t = table(&[(0, a.clone()), (1, b.clone())], None);
        assert!(t.lines().next().unwrap().contains("hematite0") && t.contains("hematite1"), "{t}");
        assert!(t.contains("counters/port_xmit_data") && t.contains("40") && t.contains("50"), "{t}");
        let t = table(&[(0, b)], Some(&[(0, a)]));
        assert!(t.contains("50 (+10)") && t.contains("3 (+0)"), "{t}");
        std::fs::write(d.join("hw_counters/np_cnp_sent"), "x\n").unwrap();
        assert!(read_counters(&d).unwrap_err().contains("not a number"));
        let _ = std::fs::remove_dir_all(&d);
    }
}
