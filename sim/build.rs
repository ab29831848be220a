//! Builds the Verilated models (MODELS, one per tested data width), generates the Rust bit
//! packing of the header record from the SystemVerilog struct in rtl/pkg/hm_pkg.sv, which is
//! the single source of truth for that layout, and generates the co-simulation shim of every
//! model (GEN_SHIMS: the C++ and the Rust twin of its structures) from the Verilated model's
//! port list: nothing is mirrored by hand.
//!
//! Verilator runs only when an RTL file changes (cargo's rerun-if-changed); its output lives in
//! OUT_DIR. `-O3`, single-threaded, as measured best on these machines (docs/toolchain.md).

use std::env;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

const WIDTHS: [u32; 2] = [256, 512];
/// (prefix, top module, file under sim/hw or "" for an rtl/ module, widths, parameters): the
/// Verilated models. Each is built from hematite.core's `sim` target: its files (of the
/// `sim_tops` fileset only the model's own top) with its verilator options. Width 0: a block
/// without a DATA_WIDTH parameter. An rtl/ module is the model's top itself, its parameters
/// set with `-G` (the widths and sizes the cycle-for-cycle tests use).
const MODELS: [(&str, &str, &str, &[u32], &[&str]); 15] = [
    ("Vrx", "hm_rx_path", "", &WIDTHS, &[]),
    ("Vtx", "hm_tx_path", "", &WIDTHS, &[]),
    ("Vdmard", "hm_dma_rd", "", &WIDTHS, &[]),
    ("Vdmawr", "hm_dma_wr", "", &WIDTHS, &[]),
    ("Vcsr", "hm_csr", "", &[512], &[]),
    ("Vmr", "hm_mr_table", "", &[0], &[]),
    ("Vrc", "hm_sim_nic_top", "hm_sim_nic_top.sv", &[512], &[]),
    // 13 QPs (not a power of two: the scrub pointer's wrap is exercised), 8-bit QPNs (13..255
    // out of range), a 12-bit time counter from 0xE00 (it wraps within 512 cycles)
    ("Vnp", "hm_dcqcn_np", "", &[0], &["NUM_QPS=13", "QPN_W=8", "TIME_W=12", "NOW_INIT=12'hE00"]),
    // the DCQCN blocks of one NIC as the cycle-for-cycle tests and the incast experiment use
    // them: 13 QPs, 8-bit QPNs, a 32-bit time counter from 0xFFFF_F000 (it wraps after 4096
    // cycles)
    ("Vrp", "hm_dcqcn_rp", "", &[0], &["NUM_QPS=13", "QPN_W=8", "TIME_W=32", "CNP_FIFO_DEPTH=2", "TX_FIFO_DEPTH=4", "NOW_INIT=32'hFFFF_F000"]),
    ("Vpacer", "hm_dcqcn_pacer", "", &[0], &["NUM_QPS=13", "QPN_W=8", "TIME_W=32"]),
    ("Vccnp", "hm_dcqcn_np", "", &[0], &["NUM_QPS=13", "QPN_W=8", "TIME_W=32", "NOW_INIT=32'hFFFF_F000"]),
    // 4 slots, 8-bit QPNs, 5-bit keys (QPNs 32..255 out of range)
    ("Vslots", "hm_dcqcn_slots", "", &[0], &["NUM_SLOTS=4", "QPN_W=8", "KEY_W=5"]),
    // per-QP counters: 16 QPs (QPNs 16.. out of range), 3 sources, 4 counters, FIFOs of 4
    ("Vqpc", "hm_qp_counters", "", &[0], &["NUM_QPS=16", "NUM_SRC=3", "NUM_CNT=4", "EV_DEPTH=4"]),
    // a per-QP bit table of 200 entries (4 rows of 64, the last one partly used), 2 read ports
    ("Vqpb", "hm_qp_bits", "", &[0], &["NUM=200", "RD=2"]),
    // ... and the same with the clear hidden (TRANSPARENT, as the notification point uses it)
    ("Vqpbt", "hm_qp_bits", "", &[0], &["NUM=200", "RD=2", "TRANSPARENT=1"]),
];

/// picorv32.v: build/ext/picorv32.v (copied there by ./hematite deps), else the installed
/// pythondata-cpu-picorv32 package.
fn picorv32(root: &Path) -> PathBuf {
    let local = root.join("build/ext/picorv32.v");
    if local.exists() {
        return local;
    }
    let out = Command::new("python3")
        .args(["-c", "import pythondata_cpu_picorv32 as p; print(p.data_location)"])
        .output();
    if let Ok(o) = out {
        let p = PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()).join("picorv32.v");
        if o.status.success() && p.exists() {
            return p;
        }
    }
    panic!("picorv32.v not found: run ./hematite deps (it installs pythondata-cpu-picorv32 pinned and copies the core to build/ext/)")
}

/// The RTL generated at build time (hematite.core's `regs_gen` fileset, build/gen/rtl/): the
/// congestion-control register block PeakRDL-regblock generates from regs/hematite.rdl.
/// `scripts/regs.py --rtl` rewrites only the files whose text changed, so this costs no
/// Verilator rebuild when the description did not change.
fn gen_rtl(root: &Path) {
    for f in ["regs/hematite.rdl", "scripts/regs.py"] {
        println!("cargo:rerun-if-changed={}", root.join(f).display());
    }
    let st = Command::new("python3").arg(root.join("scripts/regs.py")).arg("--rtl").current_dir(root).status();
    match st {
        Ok(s) if s.success() => {}
        _ => panic!(
            "scripts/regs.py --rtl failed: the register block is generated from regs/hematite.rdl with the pinned \
             systemrdl-compiler and peakrdl-regblock (run ./hematite deps, which installs them)"
        ),
    }
}

/// hematite.core, the one manifest of RTL sources (a FuseSoC CAPI2 core, read here without
/// FuseSoC, so that the build needs no FuseSoC). A small reader of the subset the file
/// keeps to (its header says which): each fileset's `file_type:` and `files:` list (one path a
/// line, `- path` or `- path: {file_type: T}`), each target's `filesets: [a, b]` and
/// `tools: verilator: verilator_options: [..]`. Anything else inside a fileset, or a target's
/// filesets/options not written as a one-line list, panics: the reader never guesses.
struct Manifest {
    /// (fileset, default file_type, [(path relative to the repository root, file_type)])
    filesets: Vec<(String, Option<String>, Vec<(String, Option<String>)>)>,
    /// (target, filesets, verilator_options)
    targets: Vec<(String, Vec<String>, Vec<String>)>,
}

fn flow_list(v: &str, what: &str) -> Vec<String> {
    let inner = v
        .strip_prefix('[')
        .and_then(|x| x.strip_suffix(']'))
        .unwrap_or_else(|| panic!("hematite.core: {what} must be a one-line list [a, b, ...], found {v:?}"));
    assert!(!inner.contains(['"', '\'', '[', '{']), "hematite.core: {what}: quotes or nesting in {v:?}");
    inner.split(',').map(|x| x.trim().to_string()).filter(|x| !x.is_empty()).collect()
}

impl Manifest {
    fn read(path: &Path) -> Manifest {
        let text = fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
        let mut m = Manifest { filesets: Vec::new(), targets: Vec::new() };
        // keys of the enclosing mappings, by indentation
        let mut stack: Vec<(usize, String)> = Vec::new();
        let mut in_files = false;
        for (n, raw) in text.lines().enumerate() {
            let ln = n + 1;
            let line = raw.trim_end();
            let body = line.trim_start();
            if body.is_empty() || body.starts_with('#') {
                continue;
            }
            assert!(!line.contains('\t'), "hematite.core:{ln}: tab");
            assert!(!body.contains(" #"), "hematite.core:{ln}: keep comments on their own lines");
            let indent = line.len() - body.len();
            while stack.last().is_some_and(|(i, _)| *i >= indent) {
                stack.pop();
            }
            let path: Vec<&str> = stack.iter().map(|(_, k)| k.as_str()).collect();
            if let Some(item) = body.strip_prefix("- ") {
                assert!(
                    in_files && path.len() == 3 && path[0] == "filesets" && path[2] == "files",
                    "hematite.core:{ln}: a list item outside a fileset's files:"
                );
                let (file, ty) = match item.split_once(": {") {
                    None => (item.trim().to_string(), None),
                    Some((f, attrs)) => {
                        let t = attrs
                            .strip_suffix('}')
                            .and_then(|a| a.trim().strip_prefix("file_type:"))
                            .unwrap_or_else(|| panic!("hematite.core:{ln}: expected `- path: {{file_type: T}}`"));
                        (f.trim().to_string(), Some(t.trim().to_string()))
                    }
                };
                assert!(!file.contains(['"', '\'', ':', '*']), "hematite.core:{ln}: unexpected path {file:?}");
                m.filesets.last_mut().unwrap().2.push((file, ty));
                continue;
            }
            let (key, value) = body
                .split_once(':')
                .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                .unwrap_or_else(|| panic!("hematite.core:{ln}: expected `key: value`"));
            in_files = false;
            match path.as_slice() {
                ["filesets"] => m.filesets.push((key.clone(), None, Vec::new())),
                ["filesets", _] => match key.as_str() {
                    "file_type" => m.filesets.last_mut().unwrap().1 = Some(value.clone()),
                    "files" => {
                        assert!(value.is_empty(), "hematite.core:{ln}: files: must be a block list");
                        in_files = true;
                    }
                    _ => panic!("hematite.core:{ln}: fileset key {key:?} not understood by sim/build.rs"),
                },
                ["targets"] => m.targets.push((key.clone(), Vec::new(), Vec::new())),
                ["targets", t] if key == "filesets" => {
                    m.targets.last_mut().unwrap().1 = flow_list(&value, &format!("target {t} filesets"))
                }
                ["targets", t, "tools", "verilator"] if key == "verilator_options" => {
                    m.targets.last_mut().unwrap().2 = flow_list(&value, &format!("target {t} verilator_options"))
                }
                _ => {}
            }
            stack.push((indent, key));
        }
        m
    }

    /// (path, file_type, fileset) of a target's files, its filesets in the order it lists them.
    fn target_files(&self, target: &str) -> Vec<(String, String, String)> {
        let (_, sets, _) = self
            .targets
            .iter()
            .find(|t| t.0 == target)
            .unwrap_or_else(|| panic!("hematite.core has no target {target}"));
        let mut out = Vec::new();
        for s in sets {
            let (_, default, files) = self
                .filesets
                .iter()
                .find(|f| &f.0 == s)
                .unwrap_or_else(|| panic!("hematite.core: target {target}: no fileset {s}"));
            for (p, t) in files {
                let t = t.as_ref().or(default.as_ref()).unwrap_or_else(|| panic!("hematite.core: {p} has no file_type"));
                out.push((p.clone(), t.clone(), s.clone()));
            }
        }
        out
    }

    fn verilator_options(&self, target: &str) -> Vec<String> {
        self.targets.iter().find(|t| t.0 == target).map(|t| t.2.clone()).unwrap_or_default()
    }
}

/// The SV package reader of hematite-abi's build script (one parser for every package).
#[path = "../abi/build.rs"]
#[allow(dead_code)]
mod abigen;

/// (name, width) of each field of the packed struct `name` of hm_pkg.sv, in declaration order.
fn struct_fields(structs: &[abigen::Struct], name: &str) -> Vec<(String, usize)> {
    let s = structs.iter().find(|s| s.name == name).unwrap_or_else(|| panic!("struct {name} not found in hm_pkg.sv"));
    s.fields.iter().map(|f| (f.0.clone(), f.1)).collect()
}

fn gen_layout(pkg: &str) -> String {
    let (_, structs) = abigen::parse(pkg);
    let hdr = struct_fields(&structs, "hm_roce_hdr_t");
    let hdr_bits: usize = hdr.iter().map(|f| f.1).sum();
    let st = struct_fields(&structs, "hm_rx_status_t");
    let st_bits: usize = st.iter().map(|f| f.1).sum();
    let mut s = String::new();
    writeln!(s, "// Generated by build.rs from rtl/pkg/hm_pkg.sv. Do not edit.").unwrap();
    writeln!(s, "pub const HDR_BITS: usize = {hdr_bits};").unwrap();
    writeln!(s, "pub const STATUS_BITS: usize = {st_bits};").unwrap();
    writeln!(s, "/// (field, lsb, width) of hm_roce_hdr_t.").unwrap();
    writeln!(s, "pub const HDR_FIELDS: &[(&str, usize, usize)] = &[").unwrap();
    let mut lsb = hdr_bits;
    let mut offs = Vec::new();
    for (n, w) in &hdr {
        lsb -= w;
        writeln!(s, "    (\"{n}\", {lsb}, {w}),").unwrap();
        offs.push((n.clone(), lsb, *w));
    }
    writeln!(s, "];").unwrap();
    writeln!(s, "pub fn unpack_hdr(w: &[u32]) -> HdrRecord {{\n    let mut r = HdrRecord::default();").unwrap();
    for (n, l, wd) in &offs {
        writeln!(s, "    r.{n} = FromBits::from_bits(get_bits(w, {l}, {wd}));").unwrap();
    }
    writeln!(s, "    r\n}}").unwrap();
    writeln!(s, "pub fn pack_hdr(r: &HdrRecord, w: &mut [u32]) {{").unwrap();
    for (n, l, wd) in &offs {
        writeln!(s, "    set_bits(w, {l}, {wd}, ToBits::to_bits(r.{n}));").unwrap();
    }
    writeln!(s, "}}").unwrap();
    // status: hdr at the top, then the scalar fields
    let mut lsb = st_bits;
    writeln!(s, "pub fn unpack_status(w: &[u32]) -> RxStatus {{").unwrap();
    let mut body = String::new();
    for (n, wd) in &st {
        lsb -= wd;
        if n == "hdr" {
            writeln!(body, "        hdr: unpack_hdr(&shift_words(w, {lsb}, {wd})),").unwrap();
        } else {
            writeln!(body, "        {n}: FromBits::from_bits(get_bits(w, {lsb}, {wd})),").unwrap();
        }
    }
    writeln!(s, "    RxStatus {{\n{body}    }}\n}}").unwrap();
    s
}

/// The models whose co-simulation shim is generated whole from the Verilated models' port
/// lists (`obj_<model>/<model>.h`, the `VL_IN*` / `VL_OUT*` declarations, widths resolved by
/// Verilator): (shim name, model prefix, widths; see `gen_shim`). One call per clock: inputs
/// applied, outputs sampled before the rising edge, then the edge. A port wider than 64 bits
/// is an array of 32-bit words.
struct Shim {
    /// `hm_<name>_*` functions, `Hm<Name>In` / `Hm<Name>Out` structs, `shim_<name>.{cpp,rs}`.
    name: &'static str,
    /// The model prefix in MODELS, and the widths built of it.
    prefix: &'static str,
    widths: &'static [u32],
    /// Outputs sampled after the rising edge (the registered state it produced) instead of
    /// before it.
    after_edge: bool,
    /// The NIC model: instrumented in the coverage build (its counts written when freed)
    /// and in the waveform build (an FST trace opened and closed on demand).
    nic: bool,
}
const GEN_SHIMS: [Shim; 15] = [
    Shim { name: "rx", prefix: "Vrx", widths: &WIDTHS, after_edge: true, nic: false },
    Shim { name: "tx", prefix: "Vtx", widths: &WIDTHS, after_edge: true, nic: false },
    Shim { name: "dmard", prefix: "Vdmard", widths: &WIDTHS, after_edge: false, nic: false },
    Shim { name: "dmawr", prefix: "Vdmawr", widths: &WIDTHS, after_edge: false, nic: false },
    Shim { name: "csr", prefix: "Vcsr", widths: &[512], after_edge: false, nic: false },
    Shim { name: "mr", prefix: "Vmr", widths: &[0], after_edge: false, nic: false },
    Shim { name: "eng", prefix: "Vrc", widths: &[512], after_edge: false, nic: true },
    Shim { name: "np", prefix: "Vnp", widths: &[0], after_edge: false, nic: false },
    Shim { name: "rp", prefix: "Vrp", widths: &[0], after_edge: false, nic: false },
    Shim { name: "pacer", prefix: "Vpacer", widths: &[0], after_edge: false, nic: false },
    Shim { name: "ccnp", prefix: "Vccnp", widths: &[0], after_edge: false, nic: false },
    Shim { name: "slots", prefix: "Vslots", widths: &[0], after_edge: false, nic: false },
    Shim { name: "qpc", prefix: "Vqpc", widths: &[0], after_edge: false, nic: false },
    Shim { name: "qpb", prefix: "Vqpb", widths: &[0], after_edge: false, nic: false },
    Shim { name: "qpbt", prefix: "Vqpbt", widths: &[0], after_edge: false, nic: false },
];

/// (is_input, name, bits) of every port of a Verilated model header but `clk`.
fn model_ports(hdr: &str, model: &str) -> Vec<(bool, String, u32)> {
    let mut v = Vec::new();
    for l in hdr.lines().map(str::trim) {
        let Some((mac, rest)) = l.split_once("(&") else { continue };
        let input = match mac {
            "VL_IN8" | "VL_IN16" | "VL_IN" | "VL_IN64" | "VL_INW" => true,
            "VL_OUT8" | "VL_OUT16" | "VL_OUT" | "VL_OUT64" | "VL_OUTW" => false,
            _ => continue,
        };
        let mut f = rest.trim_end_matches(");").split(',');
        let (name, msb) = (f.next().unwrap().to_string(), f.next().unwrap().parse::<u32>().unwrap());
        if name != "clk" {
            v.push((input, name, msb + 1));
        }
    }
    assert!(!v.is_empty(), "{model}.h: no ports found");
    v
}

/// The struct field for a port: without its `s_` / `m_` / `i_` / `o_` direction prefix, unless
/// the model (`names`) has the port's bundle (the word after the prefix: `axis` of
/// `s_axis_tdata`) both as a slave (`s_`) and as a master (`m_`): a block with an `s_axis_*`
/// and an `m_axis_*` stream keeps the prefixes of both.
fn port_field<'a>(name: &'a str, names: &[&'a str]) -> &'a str {
    const PREFIXES: [&str; 4] = ["s_", "m_", "i_", "o_"];
    let split = |n: &'a str| PREFIXES.iter().find_map(|p| n.strip_prefix(p).map(|r| (*p, r)));
    let bundle = |r: &'a str| r.split('_').next().unwrap_or(r);
    match split(name) {
        Some((p, rest)) if !names.iter().filter_map(|n| split(n)).any(|(q, r)| ((p, q) == ("s_", "m_") || (p, q) == ("m_", "s_")) && bundle(r) == bundle(rest)) => rest,
        _ => name,
    }
}

/// The shim (C++) and its Rust twin for `sh` and its `models`: one model, or a family of the
/// same top at several DATA_WIDTHs ((width, model, ports), the widest last), whose
/// `hm_<shim>_new(width)` picks the model (null for another width). A family's structs have
/// the widest model's ports; a narrower model uses the low words / bits of each. An input
/// `clk_<x>` is a second clock, gated by the output `<x>_clk_en`: low with `clk` before the
/// edge, and raised with it only when the enable (sampled before the edge) is set.
fn gen_shim(sh: &Shim, models: &[(u32, &str, Vec<(bool, String, u32)>)]) -> (String, String) {
    let shim = sh.name;
    let camel = format!("Hm{}{}", shim[..1].to_uppercase(), &shim[1..]);
    let family = models.len() > 1;
    let (_, widest, ports) = models.last().expect("a model");
    let is_gclk = |n: &str| n.starts_with("clk_");
    let ports: Vec<&(bool, String, u32)> = ports.iter().filter(|p| !is_gclk(&p.1)).collect();
    let all: Vec<&str> = ports.iter().map(|p| p.1.as_str()).collect();
    let field = |n: &str| port_field(n, &all).to_string();
    let names = models.iter().map(|m| format!("{}.h", m.1)).collect::<Vec<_>>().join(", ");
    let ty = |b: u32| match b {
        0..=8 => ("uint8_t", "u8".to_string()),
        9..=16 => ("uint16_t", "u16".to_string()),
        17..=32 => ("uint32_t", "u32".to_string()),
        33..=64 => ("uint64_t", "u64".to_string()),
        _ => ("uint32_t", format!("[u32; {}]", b.div_ceil(32))),
    };
    let words = |b: u32| if b > 64 { format!("[{}]", b.div_ceil(32)) } else { String::new() };
    // widest first: no padding inside the structs
    let mut sorted: Vec<&(bool, String, u32)> = ports.clone();
    sorted.sort_by_key(|p| std::cmp::Reverse(p.2.next_power_of_two().clamp(8, 64)));
    let banner = format!("// Generated by sim/build.rs from {names} (the Verilated models' ports). Do not edit.\n");
    let mut c = banner.clone() + "#include <cstdint>\n#include \"verilated.h\"\n";
    if sh.nic {
        c += "#ifdef HM_TRACE\n#include \"verilated_fst_c.h\"\n#endif\n";
        c += "#ifdef HM_COVERAGE\n#include <atomic>\n#include <cstdio>\n#include <cstdlib>\n#include <string>\n#include <unistd.h>\n#include \"verilated_cov.h\"\n#endif\n";
    }
    for (_, m, _) in models {
        c += &format!("#include \"{m}.h\"\n");
    }
    c += "\nextern \"C\" {\n";
    let mut r = banner;
    for (dir, input) in [("In", true), ("Out", false)] {
        c += &format!("struct {camel}{dir} {{\n");
        r += &format!("\n/// The {} of the Verilated `{widest}` model (generated).\n#[repr(C)]\n#[derive(Clone, Copy, Debug)]\npub struct {camel}{dir} {{\n", if input { "inputs" } else { "outputs" });
        let mut zero = String::new();
        for p in sorted.iter().filter(|p| p.0 == input) {
            let (ct, rt) = ty(p.2);
            c += &format!("    {ct} {}{};\n", field(&p.1), words(p.2));
            r += &format!("    /// `{}` ({} bits)\n    pub {}: {rt},\n", p.1, p.2, field(&p.1));
            let z = if p.2 > 64 { format!("[0; {}]", p.2.div_ceil(32)) } else { "0".into() };
            zero += &format!("            {}: {z},\n", field(&p.1));
        }
        c += "};\n";
        r += "}\n";
        r += &format!("\nimpl Default for {camel}{dir} {{\n    /// Every port 0.\n    fn default() -> Self {{\n        {camel}{dir} {{\n{zero}        }}\n    }}\n}}\n");
    }
    c += "}  // extern \"C\"\n\n";
    if sh.nic {
        // Waveform build (HM_TRACE): the model's open FST trace and its cycle count; a dump
        // after each evaluation: the clock low 2 ns into the 4 ns cycle, the rising edge at its
        // end (times in ps, the models' --timescale precision).
        c += "struct HmTrace {\n#ifdef HM_TRACE\n    VerilatedFstC* fst;\n#endif\n    uint64_t cycle;\n};\n";
        c += "#ifdef HM_TRACE\n#define HM_DUMP(tr, at) do { if ((tr)->fst) (tr)->fst->dump(at); } while (0)\n#else\n#define HM_DUMP(tr, at) do { (void)(tr); } while (0)\n#endif\n\n";
    }
    let tr_arg = if sh.nic { ", HmTrace* tr" } else { "" };
    for (_, model, ports) in models {
        let gclks: Vec<&str> = ports.iter().filter(|p| p.0 && is_gclk(&p.1)).map(|p| &p.1[4..]).collect();
        assert!(!sh.after_edge || gclks.is_empty(), "{model}: a gated clock with outputs sampled after the edge is not supported");
        let ports: Vec<&(bool, String, u32)> = ports.iter().filter(|p| !is_gclk(&p.1)).collect();
        c += &format!("static void tick_{model}({model}* m, const {camel}In* in, {camel}Out* out{tr_arg}) {{\n");
        for p in ports.iter().filter(|p| p.0) {
            if p.2 > 64 {
                c += &format!("    for (int i = 0; i < {}; i++) m->{}[i] = in->{}[i];\n", p.2.div_ceil(32), p.1, field(&p.1));
            } else {
                c += &format!("    m->{} = in->{};\n", p.1, field(&p.1));
            }
        }
        let edge = |c: &mut String| {
            *c += "    m->clk = 1;\n";
            for g in &gclks {
                *c += &format!("    m->clk_{g} = m->{g}_clk_en;\n");
            }
            *c += "    m->eval();\n";
        };
        if sh.after_edge {
            // outputs sampled after the edge (then the clock returns low); the inputs settle
            // with the edge's own evaluation, so no evaluation before it
            edge(&mut c);
            c += "    m->clk = 0;\n    m->eval();\n";
        } else {
            c += "    m->clk = 0;\n";
            for g in &gclks {
                c += &format!("    m->clk_{g} = 0;\n");
            }
            c += "    m->eval();\n";
            if sh.nic {
                c += "    HM_DUMP(tr, tr->cycle * 4000 + 2000);\n";
            }
        }
        for p in ports.iter().filter(|p| !p.0) {
            if p.2 > 64 {
                c += &format!("    for (int i = 0; i < {}; i++) out->{}[i] = m->{}[i];\n", p.2.div_ceil(32), field(&p.1), p.1);
            } else {
                c += &format!("    out->{} = m->{};\n", field(&p.1), p.1);
            }
        }
        if !sh.after_edge {
            edge(&mut c);
        }
        if sh.nic {
            assert!(!sh.after_edge, "the NIC model samples its outputs before the edge");
            c += "    HM_DUMP(tr, tr->cycle * 4000 + 4000);\n    tr->cycle++;\n";
        }
        c += "}\n\n";
    }
    let members: String = models.iter().map(|(_, m, _)| format!(" {m}* m_{m};")).collect();
    let tr_member = if sh.nic { " HmTrace tr;" } else { "" };
    c += &format!("struct {camel} {{ VerilatedContext* ctx; int width;{members}{tr_member} }};\n\nextern \"C\" {{\n\n");
    let arg = if family { "int width" } else { "" };
    c += &format!("{camel}* hm_{shim}_new({arg}) {{\n");
    if family {
        let ok = models.iter().map(|m| format!("width != {}", m.0)).collect::<Vec<_>>().join(" && ");
        c += &format!("    if ({ok}) return nullptr;\n");
    } else {
        c += &format!("    int width = {};\n", models[0].0);
    }
    c += &format!("    {camel}* h = new {camel}();\n    h->ctx = new VerilatedContext();\n    h->width = width;\n");
    if sh.nic {
        c += "#ifdef HM_TRACE\n    h->ctx->traceEverOn(true);\n#endif\n";
    }
    for (w, m, _) in models {
        c += &format!("    h->m_{m} = width == {w} ? new {m}(h->ctx) : nullptr;\n");
    }
    c += "    return h;\n}\n\n";
    c += &format!("void hm_{shim}_tick({camel}* h, const {camel}In* in, {camel}Out* out) {{\n");
    for (_, m, _) in models {
        let tr = if sh.nic { ", &h->tr" } else { "" };
        c += &format!("    if (h->m_{m}) tick_{m}(h->m_{m}, in, out{tr});\n");
    }
    c += "}\n\n";
    if sh.nic {
        // hm_<shim>_trace_open: 0, or -1 (not a waveform build), -2 (a trace is open), -3 (the
        // file could not be opened); every signal of the model, from its next clock on
        let (_, m, _) = models.last().expect("a model");
        c += &format!("int hm_{shim}_traced(void) {{\n#ifdef HM_TRACE\n    return 1;\n#else\n    return 0;\n#endif\n}}\n\n");
        c += &format!("int hm_{shim}_trace_open({camel}* h, const char* path, uint64_t cycle) {{\n#ifdef HM_TRACE\n    if (h->tr.fst) return -2;\n    Verilated::threadContextp(h->ctx);\n    VerilatedFstC* f = new VerilatedFstC;\n    h->m_{m}->trace(f, 99);\n    f->open(path);\n    if (!f->isOpen()) {{ delete f; return -3; }}\n    h->tr.fst = f;\n    h->tr.cycle = cycle;\n    return 0;\n#else\n    (void)h; (void)path; (void)cycle;\n    return -1;\n#endif\n}}\n\n");
        c += &format!("void hm_{shim}_trace_close({camel}* h) {{\n#ifdef HM_TRACE\n    if (h->tr.fst) {{ h->tr.fst->close(); delete h->tr.fst; h->tr.fst = nullptr; }}\n#else\n    (void)h;\n#endif\n}}\n\n");
    }
    // Verilator 5.006 erases a model's scopes from the thread's current context, which may be
    // another (already deleted) model's: make it this model's own first (else a deadlock).
    c += &format!("void hm_{shim}_free({camel}* h) {{\n    if (!h) return;\n    Verilated::threadContextp(h->ctx);\n");
    for (_, m, _) in models {
        c += &format!("    if (h->m_{m}) h->m_{m}->final();\n");
    }
    if sh.nic {
        c += "#ifdef HM_TRACE\n    if (h->tr.fst) { h->tr.fst->close(); delete h->tr.fst; }\n#endif\n";
        // Coverage build (./hematite coverage, HM_COVERAGE): the model's line/toggle counts go
        // to $HEMATITE_COVERAGE/<shim>-PID-N.dat when it is freed.
        c += &format!("#ifdef HM_COVERAGE\n    if (const char* dir = std::getenv(\"HEMATITE_COVERAGE\")) {{\n        static std::atomic<unsigned> seq{{0}};\n        char name[64];\n        std::snprintf(name, sizeof name, \"/{shim}-%d-%u.dat\", (int)getpid(), seq++);\n        h->ctx->coveragep()->write((std::string(dir) + name).c_str());\n    }}\n#endif\n");
    }
    for (_, m, _) in models {
        c += &format!("    delete h->m_{m};\n");
    }
    c += "    delete h->ctx;\n    delete h;\n}\n\n}  // extern \"C\"\n";
    let rarg = if family { "width: std::os::raw::c_int" } else { "" };
    r += &format!("\n#[repr(C)]\nstruct {camel} {{\n    _private: [u8; 0],\n}}\n\nextern \"C\" {{\n    fn hm_{shim}_new({rarg}) -> *mut {camel};\n    fn hm_{shim}_tick(h: *mut {camel}, inp: *const {camel}In, out: *mut {camel}Out);\n    fn hm_{shim}_free(h: *mut {camel});\n}}\n");
    if sh.nic {
        r += &format!(r#"
extern "C" {{
    fn hm_{shim}_traced() -> std::os::raw::c_int;
    fn hm_{shim}_trace_open(h: *mut {camel}, path: *const std::os::raw::c_char, cycle: u64) -> std::os::raw::c_int;
    fn hm_{shim}_trace_close(h: *mut {camel});
}}

impl {camel}Model {{
    /// True when this is the waveform build (HEMATITE_TRACE=1 at build time: the model
    /// compiled with --trace-fst); the ordinary build carries no tracing code.
    pub fn traced() -> bool {{
        // SAFETY: no arguments, no state.
        unsafe {{ hm_{shim}_traced() != 0 }}
    }}

    /// Opens an FST waveform of every signal of the model at `path`; from the next clock on,
    /// each clock is dumped, 4 ns a cycle, the next clock numbered `cycle` (it ends at
    /// (cycle + 1) x 4 ns).
    pub fn trace_open(&mut self, path: &std::path::Path, cycle: u64) -> Result<(), String> {{
        use std::os::unix::ffi::OsStrExt;
        let c = std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(|_| format!("{{}}: a NUL in the path", path.display()))?;
        // SAFETY: self.h is live until drop; c is a NUL-terminated path the shim only reads.
        match unsafe {{ hm_{shim}_trace_open(self.h.as_ptr(), c.as_ptr(), cycle) }} {{
            0 => Ok(()),
            -1 => Err("this hematite-sim has no waveform support: build it with HEMATITE_TRACE=1 (./hematite trace-build)".into()),
            -2 => Err("a waveform is open already".into()),
            _ => Err(format!("{{}}: cannot create the waveform file", path.display())),
        }}
    }}

    /// Closes the waveform (written out in full); nothing when none is open.
    pub fn trace_close(&mut self) {{
        // SAFETY: self.h is live until drop.
        unsafe {{ hm_{shim}_trace_close(self.h.as_ptr()) }}
    }}
}}
"#);
    }
    // the one owner of the C handle: every unsafe call of the shim is here
    let sample = if sh.after_edge { "after" } else { "before" };
    let (new_sig, new_ret, new_call, new_wrap) = if family {
        ("width: usize", "Option<Self>", "width as std::os::raw::c_int", "std::ptr::NonNull::new(h).map(|h| Self { h, cycles: 0 })")
    } else {
        ("", "Self", "", "Self { h: std::ptr::NonNull::new(h).expect(\"the shim allocates or aborts\"), cycles: 0 }")
    };
    let new_doc = if family { "A fresh model of that DATA_WIDTH (None for a width not built)" } else { "A fresh model" };
    r += &format!(r#"
/// An owned Verilated `{widest}` model (generated): one [`{camel}Model::tick`] is one clock,
/// outputs sampled {sample} the rising edge; freed on drop.
pub struct {camel}Model {{
    h: std::ptr::NonNull<{camel}>,
    /// Clock cycles ticked since construction.
    pub cycles: u64,
}}

impl {camel}Model {{
    /// {new_doc}, its inputs not yet applied.
    pub fn new({new_sig}) -> {new_ret} {{
        // SAFETY: hm_{shim}_new has no preconditions; it returns an owned handle (or null for
        // a width that was not built).
        let h = unsafe {{ hm_{shim}_new({new_call}) }};
        {new_wrap}
    }}

    /// One clock with inputs `inp`; the outputs go to `out`.
    pub fn tick_into(&mut self, inp: &{camel}In, out: &mut {camel}Out) {{
        // SAFETY: self.h is live until drop; inp and out are #[repr(C)] twins of the C
        // structs, generated from the same port list, and the shim copies within them.
        unsafe {{ hm_{shim}_tick(self.h.as_ptr(), inp, out) }};
        self.cycles += 1;
    }}

    /// One clock with inputs `inp`; returns the outputs.
    pub fn tick(&mut self, inp: &{camel}In) -> {camel}Out {{
        let mut out = {camel}Out::default();
        self.tick_into(inp, &mut out);
        out
    }}

    /// `n` clocks with `inp` (a reset, for example); returns the last outputs.
    pub fn hold(&mut self, inp: &{camel}In, n: usize) -> {camel}Out {{
        let mut out = {camel}Out::default();
        for _ in 0..n {{
            self.tick_into(inp, &mut out);
        }}
        out
    }}
}}

impl Drop for {camel}Model {{
    fn drop(&mut self) {{
        // SAFETY: self.h came from hm_{shim}_new and is freed exactly once, here.
        unsafe {{ hm_{shim}_free(self.h.as_ptr()) }}
    }}
}}
"#);
    (c, r)
}

/// The make variables of every model's C++ build (Verilator's `-MAKEFLAGS`).
const MODEL_MAKEFLAGS: &str = "OPT_FAST=-O2 OPT_SLOW=-O1 OPT_GLOBAL=-O2";

/// FNV-1a, 64 bits: the model cache's key (stable across Rust releases, unlike std's hasher).
#[derive(Clone)]
struct Fnv(u64);

impl Fnv {
    fn new() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
    /// `b`, then its length (so that consecutive fields cannot run into each other)
    fn feed(&mut self, b: &[u8]) {
        for &x in b.iter().chain(&(b.len() as u64).to_le_bytes()) {
            self.0 = (self.0 ^ x as u64).wrapping_mul(0x0100_0000_01b3);
        }
    }
}

/// Every file under `dir`, sorted, appended to `v` (the RTL the models' hash covers, include
/// files too).
fn rtl_files(dir: &Path, v: &mut Vec<PathBuf>) {
    let mut es: Vec<PathBuf> = fs::read_dir(dir).map(|r| r.flatten().map(|e| e.path()).collect()).unwrap_or_default();
    es.sort();
    for p in es {
        if p.is_dir() {
            rtl_files(&p, v);
        } else {
            v.push(p);
        }
    }
}

fn main() {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let root = manifest.parent().unwrap().to_path_buf();
    let out = PathBuf::from(env::var("OUT_DIR").unwrap());

    // The RTL: hematite.core's `sim` target (configuration files, the CPU, the packages, the
    // modules in compile order, the simulator-only tops).
    let core = root.join("hematite.core");
    println!("cargo:rerun-if-changed={}", core.display());
    gen_rtl(&root);
    let m = Manifest::read(&core);
    let files = m.target_files("sim");
    let vopts = m.verilator_options("sim");
    assert!(!vopts.is_empty(), "hematite.core: target sim has no verilator_options");
    // HEMATITE_VERILATOR_EXTRA: more Verilator options (whitespace-separated) for experiments
    // and profiling (`--prof-cfuncs`, docs/sim-device.md); build such a model in its own
    // CARGO_TARGET_DIR.
    println!("cargo:rerun-if-env-changed=HEMATITE_VERILATOR_EXTRA");
    let mut vopts = vopts;
    if let Ok(extra) = env::var("HEMATITE_VERILATOR_EXTRA") {
        vopts.extend(extra.split_whitespace().map(String::from));
    }
    // picorv32.v: build/ext/picorv32.v when ./hematite deps put it there, else the installed
    // pythondata-cpu-picorv32 package (see picorv32()).
    let cpu = picorv32(&root);
    println!("cargo:rerun-if-changed={}", cpu.display());
    let path_of = |p: &str| if p == "build/ext/picorv32.v" { cpu.clone() } else { root.join(p) };
    for (p, _, _) in &files {
        println!("cargo:rerun-if-changed={}", path_of(p).display());
    }
    let vlts: Vec<PathBuf> = files.iter().filter(|f| f.1 == "vlt").map(|f| path_of(&f.0)).collect();
    let srcs: Vec<PathBuf> = files
        .iter()
        .filter(|f| (f.1 == "systemVerilogSource" || f.1 == "verilogSource") && f.2 != "sim_tops")
        .map(|f| path_of(&f.0))
        .collect();
    let tops: Vec<PathBuf> = files.iter().filter(|f| f.2 == "sim_tops").map(|f| path_of(&f.0)).collect();
    assert!(files.iter().all(|f| ["vlt", "systemVerilogSource", "verilogSource"].contains(&f.1.as_str())), "hematite.core: sim target: unexpected file_type");
    println!("cargo:rerun-if-changed={}", root.join("rtl").display());
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=../abi/build.rs");

    let pkg = fs::read_to_string(root.join("rtl/pkg/hm_pkg.sv")).expect("read hm_pkg.sv");
    fs::write(out.join("layout.rs"), gen_layout(&pkg)).unwrap();


    let verilator = env::var("VERILATOR").unwrap_or_else(|_| "verilator".into());
    let vroot = String::from_utf8(
        Command::new(&verilator)
            .arg("--getenv")
            .arg("VERILATOR_ROOT")
            .output()
            .unwrap_or_else(|e| {
                panic!("cannot run `{verilator}` ({e}): install Verilator 5 (apt-get install verilator) or run ./hematite test, which does")
            })
            .stdout,
    )
    .unwrap()
    .trim()
    .to_string();

    // Coverage build (./hematite coverage): the NIC model (engine + control core) with line and
    // toggle coverage; its shim writes the counts when a model is freed. Built into its own
    // target folder by that command, never mixed with the ordinary models.
    println!("cargo:rerun-if-env-changed=HEMATITE_COVERAGE");
    let coverage = env::var("HEMATITE_COVERAGE").map(|v| !v.is_empty()).unwrap_or(false);
    let jobs = env::var("NUM_JOBS").unwrap_or_else(|_| "2".into());
    let jobs_n: usize = jobs.parse().unwrap_or(2);
    let mut cfiles: Vec<PathBuf> = vec![];
    let mut build = cc::Build::new();
    build.cpp(true).flag_if_supported("-std=c++17").opt_level(2);
    build.include(format!("{vroot}/include")).include(format!("{vroot}/include/vltstd"));
    build.warnings(false);
    if coverage {
        build.define("HM_COVERAGE", None);
        cfiles.push(PathBuf::from(format!("{vroot}/include/verilated_cov.cpp")));
    }
    // Waveform build (HEMATITE_TRACE=1, ./hematite trace-build): the NIC model compiled with
    // --trace-fst, its shim able to open and close an FST on demand. Built into its own target
    // folder; the ordinary models carry no tracing code, so tracing off costs nothing.
    println!("cargo:rerun-if-env-changed=HEMATITE_TRACE");
    let trace = env::var("HEMATITE_TRACE").map(|v| !v.is_empty() && v != "0").unwrap_or(false);
    if trace {
        build.define("HM_TRACE", None);
        build.define("VM_TRACE", "1");
        build.define("VM_TRACE_FST", "1");
        cfiles.push(PathBuf::from(format!("{vroot}/include/verilated_fst_c.cpp")));
    }
    // The models' C++ flags. -march=native: the model runs where it is built (this
    // workspace's target folder); with -fno-semantic-interposition, +10 % measured
    // (docs/sim-device.md, "Co-simulation speed"). HEMATITE_MODEL_CFLAGS replaces them, for
    // experiments.
    println!("cargo:rerun-if-env-changed=HEMATITE_MODEL_CFLAGS");
    let model_cflags = env::var("HEMATITE_MODEL_CFLAGS")
        .unwrap_or_else(|_| "-O2 -fPIC -fno-semantic-interposition -march=native".into());
    // The models, Verilated and compiled into a cache shared by every target folder of this
    // checkout (target/vmodels): the waveform build (target/trace) and a release build reuse
    // every model whose inputs are the same, and build only the ones that differ. A model's
    // entry is named by a hash of all it is made from (Verilator's version, the options, the
    // C++ flags, every RTL file's bytes, its top, width and parameters, tracing and coverage),
    // built in a scratch folder and renamed into place once complete, so an interrupted or a
    // concurrent build never leaves a half-built entry. Two models build at once (NUM_JOBS),
    // the NIC first (the longest).
    let vversion = Command::new(&verilator).arg("--version").output().map(|o| o.stdout).unwrap_or_default();
    let mut common = Fnv::new();
    common.feed(&vversion);
    for o in vopts.iter().chain([&model_cflags]) {
        common.feed(o.as_bytes());
    }
    common.feed(MODEL_MAKEFLAGS.as_bytes());
    let mut rtl: Vec<PathBuf> = vlts.iter().chain(&srcs).chain(&tops).cloned().collect();
    rtl_files(&root.join("rtl"), &mut rtl);
    // (the manifest's RTL files are under rtl/ too: each once)
    rtl.sort();
    rtl.dedup();
    for f in &rtl {
        common.feed(f.to_string_lossy().as_bytes());
        common.feed(&fs::read(f).unwrap_or_else(|e| panic!("read {}: {e}", f.display())));
    }
    let cache = root.join("target").join("vmodels");
    fs::create_dir_all(&cache).expect("create target/vmodels");
    struct Job {
        name: String,
        topname: &'static str,
        top: Vec<PathBuf>,
        w: u32,
        params: &'static [&'static str],
        extra: Vec<&'static str>,
        dir: PathBuf,
    }
    let mut todo: Vec<Job> = vec![];
    let mut mdirs: std::collections::HashMap<String, PathBuf> = Default::default();
    for (prefix, topname, file, widths, params) in MODELS {
        // of the simulator-only tops, only this model's own
        let top: Vec<PathBuf> = if file.is_empty() {
            vec![]
        } else {
            let t = manifest.join("hw").join(file);
            assert!(tops.contains(&t), "{} is not in hematite.core's sim_tops", t.display());
            vec![t]
        };
        for &w in widths {
            let name = format!("{prefix}{w}");
            let mut extra = vec![];
            let mut variant = "";
            if coverage && topname == "hm_sim_nic_top" {
                extra = vec!["--coverage-line", "--coverage-toggle"];
                variant = "-cov";
            }
            if trace && topname == "hm_sim_nic_top" {
                extra = vec!["--trace-fst", "--trace-structs"];
                variant = "-trace";
            }
            let mut h = common.clone();
            for x in [name.as_str(), topname].iter().chain(params.iter()).chain(extra.iter()) {
                h.feed(x.as_bytes());
            }
            h.feed(&w.to_le_bytes());
            let stem = format!("{name}{variant}-");
            let dir = cache.join(format!("{stem}{:016x}", h.0));
            // the entries this one replaces (earlier RTL, other options)
            for e in fs::read_dir(&cache).unwrap().flatten() {
                let n = e.file_name().to_string_lossy().into_owned();
                let stale = n.len() == stem.len() + 16 && e.path() != dir;
                // a scratch folder of a build that was interrupted (its process is gone)
                let orphan = n.split_once(".tmp").is_some_and(|(_, pid)| !Path::new("/proc").join(pid).exists());
                if n.starts_with(&stem) && (stale || orphan) {
                    let _ = fs::remove_dir_all(e.path());
                }
            }
            mdirs.insert(name.clone(), dir.clone());
            if !dir.join(format!("{name}__ALL.a")).exists() {
                todo.push(Job { name, topname, top: top.clone(), w, params, extra, dir });
            }
        }
    }
    todo.sort_by_key(|j| j.topname != "hm_sim_nic_top");
    let queue = std::sync::Mutex::new(todo.into_iter().collect::<std::collections::VecDeque<Job>>());
    let workers: usize = jobs_n.max(1);
    std::thread::scope(|sc| {
        let mut hs = vec![];
        for _ in 0..workers {
            hs.push(sc.spawn(|| loop {
                let Some(j) = queue.lock().unwrap().pop_front() else { break };
                let tmp = j.dir.with_extension(format!("tmp{}", std::process::id()));
                let _ = fs::remove_dir_all(&tmp);
                let status = Command::new(&verilator)
                    .args(["--cc", "--build"])
                    .args(&vopts)
                    .args(if j.w == 0 { vec![] } else { vec![format!("-GDATA_WIDTH={}", j.w)] })
                    .args(j.params.iter().map(|p| format!("-G{p}")))
                    .args(["--prefix", &j.name, "--top-module", j.topname])
                    .args(["-CFLAGS", &model_cflags, "-MAKEFLAGS", MODEL_MAKEFLAGS])
                    .arg("-j")
                    .arg(&jobs)
                    .arg("--Mdir")
                    .arg(&tmp)
                    .args(&vlts)
                    .args(&srcs)
                    .args(&j.extra)
                    .args(&j.top)
                    .status()
                    .expect("run verilator");
                assert!(status.success(), "verilator failed for {} DATA_WIDTH={}", j.topname, j.w);
                // another build may have put the same entry in place meanwhile: keep that one
                if fs::rename(&tmp, &j.dir).is_err() {
                    assert!(j.dir.join(format!("{}__ALL.a", j.name)).exists(), "cannot move {} into {}", tmp.display(), j.dir.display());
                    let _ = fs::remove_dir_all(&tmp);
                }
            }));
        }
        for h in hs {
            h.join().expect("a model build failed");
        }
    });
    for d in mdirs.values() {
        build.include(d);
    }
    // The generated shims (GEN_SHIMS), from each model's port list.
    for sh in &GEN_SHIMS {
        let shim = sh.name;
        let names: Vec<String> = sh.widths.iter().map(|w| format!("{}{w}", sh.prefix)).collect();
        let models: Vec<(u32, &str, Vec<(bool, String, u32)>)> = sh
            .widths
            .iter()
            .zip(&names)
            .map(|(&w, m)| {
                let hdr = fs::read_to_string(mdirs[m.as_str()].join(format!("{m}.h"))).expect("read a model header");
                (w, m.as_str(), model_ports(&hdr, m))
            })
            .collect();
        let (c, r) = gen_shim(sh, &models);
        fs::write(out.join(format!("shim_{shim}.cpp")), c).unwrap();
        fs::write(out.join(format!("shim_{shim}.rs")), r).unwrap();
        cfiles.push(out.join(format!("shim_{shim}.cpp")));
    }
    // The Verilator runtime, compiled once for both models.
    cfiles.push(PathBuf::from(format!("{vroot}/include/verilated.cpp")));
    cfiles.push(PathBuf::from(format!("{vroot}/include/verilated_threads.cpp")));
    // compiled by NUM_JOBS threads (every other file each), archived together
    let objs: Vec<PathBuf> = std::thread::scope(|sc| {
        let hs: Vec<_> = (0..jobs_n.max(1))
            .map(|k| {
                let mut b = build.clone();
                b.files(cfiles.iter().skip(k).step_by(jobs_n.max(1)));
                sc.spawn(move || if b.get_files().next().is_some() { b.compile_intermediates() } else { vec![] })
            })
            .collect();
        hs.into_iter().flat_map(|h| h.join().expect("compiling the shims")).collect()
    });
    let mut build = cc::Build::new();
    build.objects(&objs);
    // Link order: the shim (with the runtime) first, then the models it calls.
    build.compile("hmshim");
    for (prefix, _, _, widths, _) in MODELS {
        for &w in widths {
            let a = mdirs[&format!("{prefix}{w}")].join(format!("{prefix}{w}__ALL.a"));
            fs::copy(&a, out.join(format!("lib{prefix}{w}__ALL.a"))).expect("copy model archive");
            println!("cargo:rustc-link-lib=static={prefix}{w}__ALL");
        }
    }
    println!("cargo:rustc-link-lib=static=hmshim");
    println!("cargo:rustc-link-search=native={}", out.display());
    println!("cargo:rustc-link-lib=dylib=stdc++");
    println!("cargo:rustc-link-lib=dylib=pthread");
    if trace {
        println!("cargo:rustc-link-lib=dylib=z");
    }
}
