//! Build script of hematite-abi. Generates `$OUT_DIR/desc_gen.rs` from `rtl/pkg/hm_desc_pkg.sv`,
//! the single source of truth of Hematite's descriptor and context formats (included as
//! `hematite_abi::desc`), and `$OUT_DIR/regs_gen.rs` from `rtl/pkg/hm_regs_pkg.sv`, the register
//! maps generated from `regs/hematite.rdl` (included as `hematite_abi::regs`), by the same rules:
//!
//! * every `localparam logic [N-1:0] NAME = N'hX;` (also `'d`, `'b`) becomes
//!   `pub const NAME: uN = X;` (`u8` up to 8 bits, `u16` up to 16, `u32` up to 32, else `u64`);
//! * every `typedef struct packed { ... } NAME;` becomes `NAME_UPPER_BITS` (total width) and
//!   `NAME_UPPER_FIELDS`, a table of `(field, lsb, width)` in declaration order. The first
//!   declared field is the most significant one; the last one has lsb 0.
//!
//! Fields must be `logic [msb:lsb] name;`, `logic name;` or `<earlier struct> name;`, one per
//! line. Anything else in a localparam or typedef stops the build with the offending line.
//! Only std is used.

use std::collections::BTreeSet;
use std::env;
use std::fmt::Write as _;
use std::fs;
use std::path::PathBuf;

const SRC: &str = "rtl/pkg/hm_desc_pkg.sv";
const REGS_SRC: &str = "rtl/pkg/hm_regs_pkg.sv";
const PKT_SRC: &str = "rtl/pkg/hm_pkg.sv";

/// One source line: number (1-based), code without comments, and the `//` comment text.
struct Line {
    no: usize,
    code: String,
    comment: String,
}

/// Splits the source into lines with `/* */` and `//` comments removed from the code.
fn lines(src: &str) -> Vec<Line> {
    let mut out = Vec::new();
    let mut in_block = false;
    for (i, raw) in src.lines().enumerate() {
        let mut code = String::new();
        let mut comment = String::new();
        let mut rest = raw;
        loop {
            if in_block {
                match rest.find("*/") {
                    Some(p) => {
                        rest = &rest[p + 2..];
                        in_block = false;
                    }
                    None => break,
                }
            } else {
                let block = rest.find("/*");
                let line = rest.find("//");
                match (block, line) {
                    (Some(b), l) if l.is_none_or(|l| b < l) => {
                        code.push_str(&rest[..b]);
                        code.push(' ');
                        rest = &rest[b + 2..];
                        in_block = true;
                    }
                    (_, Some(l)) => {
                        code.push_str(&rest[..l]);
                        comment = rest[l + 2..].trim().to_string();
                        break;
                    }
                    _ => {
                        code.push_str(rest);
                        break;
                    }
                }
            }
        }
        out.push(Line { no: i + 1, code: code.trim().to_string(), comment });
    }
    assert!(!in_block, "{SRC}: unterminated /* comment");
    out
}

fn fail(l: &Line, what: &str) -> ! {
    panic!("rtl/pkg (the package being read: hm_desc_pkg.sv, hm_regs_pkg.sv or hm_pkg.sv), line {}: {what}: `{}`", l.no, l.code)
}

fn is_ident(s: &str) -> bool {
    let mut c = s.chars();
    matches!(c.next(), Some(ch) if ch.is_ascii_alphabetic() || ch == '_')
        && c.all(|ch| ch.is_ascii_alphanumeric() || ch == '_')
}

/// Parses `[msb:lsb]` (numbers only) at the start of `s`; returns the width and the rest.
fn parse_range<'a>(l: &Line, s: &'a str) -> (usize, &'a str) {
    let Some(s) = s.strip_prefix('[') else { fail(l, "expected `[msb:lsb]`") };
    let Some((range, rest)) = s.split_once(']') else { fail(l, "unterminated range") };
    let Some((hi, lo)) = range.split_once(':') else { fail(l, "range without `:`") };
    let hi: usize = hi.trim().parse().unwrap_or_else(|_| fail(l, "range msb is not a number"));
    let lo: usize = lo.trim().parse().unwrap_or_else(|_| fail(l, "range lsb is not a number"));
    if hi < lo {
        fail(l, "descending ranges only ([msb:lsb] with msb >= lsb)");
    }
    (hi - lo + 1, rest.trim_start())
}

/// `localparam logic [N-1:0] NAME = N'hX;` → (name, width, value); also
/// `localparam int NAME = D;` (a non-negative decimal) → (name, 32, value).
fn parse_localparam(l: &Line) -> (String, usize, u64) {
    let Some(rest) = l.code.strip_prefix("localparam") else { unreachable!() };
    if let Some(rest) = rest.trim_start().strip_prefix("int ") {
        let Some(rest) = rest.trim_end().strip_suffix(';') else { fail(l, "missing `;`") };
        let Some((name, value)) = rest.split_once('=') else { fail(l, "missing `=`") };
        let (name, value) = (name.trim(), value.trim());
        if !is_ident(name) {
            fail(l, "bad localparam name");
        }
        let v: u32 = value.parse().unwrap_or_else(|_| fail(l, "`localparam int` must be a non-negative decimal"));
        return (name.to_string(), 32, v.into());
    }
    let Some(rest) = rest.trim_start().strip_prefix("logic") else {
        fail(l, "localparam must be `localparam logic [N-1:0] NAME = N'hX;` or `localparam int NAME = D;`")
    };
    let (bits, rest) = parse_range(l, rest.trim_start());
    if bits > 64 {
        fail(l, "localparam wider than 64 bits");
    }
    let Some(rest) = rest.trim_end().strip_suffix(';') else { fail(l, "missing `;`") };
    let Some((name, value)) = rest.split_once('=') else { fail(l, "missing `=`") };
    let (name, value) = (name.trim(), value.trim());
    if !is_ident(name) {
        fail(l, "bad localparam name");
    }
    let Some((size, lit)) = value.split_once('\'') else { fail(l, "expected a sized literal N'hX / N'dX") };
    let size: usize = size.trim().parse().unwrap_or_else(|_| fail(l, "literal size is not a number"));
    if size != bits {
        fail(l, "literal size differs from the declared width");
    }
    let (radix, digits) = match lit.chars().next() {
        Some('h' | 'H') => (16, &lit[1..]),
        Some('d' | 'D') => (10, &lit[1..]),
        Some('b' | 'B') => (2, &lit[1..]),
        _ => fail(l, "unsupported literal base (h, d or b)"),
    };
    let digits: String = digits.chars().filter(|&c| c != '_').collect();
    let v = u64::from_str_radix(&digits, radix).unwrap_or_else(|_| fail(l, "bad literal digits"));
    if bits < 64 && v >> bits != 0 {
        fail(l, "value does not fit the declared width");
    }
    (name.to_string(), bits, v)
}

/// A parsed localparam: name, width, value, comment.
pub type Param = (String, usize, u64, String);

/// A parsed struct: name and fields (name, width, comment) in declaration order.
pub struct Struct {
    pub name: String,
    pub fields: Vec<(String, usize, String)>,
}

impl Struct {
    fn bits(&self) -> usize {
        self.fields.iter().map(|f| f.1).sum()
    }
}

fn parse_field(l: &Line, known: &[Struct]) -> (String, usize) {
    let Some(decl) = l.code.strip_suffix(';') else { fail(l, "field must end with `;`") };
    let decl = decl.trim();
    let (width, name) = if let Some(rest) = decl.strip_prefix("logic") {
        let rest = rest.trim_start();
        if rest.starts_with('[') {
            parse_range(l, rest)
        } else {
            (1, rest)
        }
    } else {
        let Some((ty, name)) = decl.split_once(char::is_whitespace) else {
            fail(l, "expected `logic [msb:lsb] name;` or `logic name;`")
        };
        match known.iter().find(|s| s.name == ty) {
            Some(s) => (s.bits(), name.trim()),
            None => fail(l, "unknown field type (use logic or an earlier packed struct)"),
        }
    };
    if !is_ident(name) {
        fail(l, "expected one field name per line");
    }
    (name.to_string(), width)
}

pub fn parse(src: &str) -> (Vec<Param>, Vec<Struct>) {
    let mut params = Vec::new();
    let mut structs: Vec<Struct> = Vec::new();
    let mut open: Option<Vec<(String, usize, String)>> = None;
    for l in lines(src) {
        let code = l.code.as_str();
        if let Some(fields) = open.as_mut() {
            if code.is_empty() {
                continue;
            }
            if let Some(rest) = code.strip_prefix('}') {
                let Some(name) = rest.trim().strip_suffix(';') else { fail(&l, "expected `} name;`") };
                let name = name.trim();
                if !is_ident(name) {
                    fail(&l, "bad struct name");
                }
                let fields = open.take().unwrap_or_default();
                if fields.is_empty() {
                    fail(&l, "empty struct");
                }
                structs.push(Struct { name: name.to_string(), fields });
            } else {
                let (n, w) = parse_field(&l, &structs);
                if fields.iter().any(|f| f.0 == n) {
                    fail(&l, "duplicate field name");
                }
                fields.push((n, w, l.comment.clone()));
            }
        } else if code.starts_with("typedef") {
            let norm: Vec<&str> = code.split_whitespace().collect();
            if norm != ["typedef", "struct", "packed", "{"] {
                fail(&l, "only `typedef struct packed {` (with the brace on the same line) is supported");
            }
            open = Some(Vec::new());
        } else if code.starts_with("localparam") {
            let (n, w, v) = parse_localparam(&l);
            params.push((n, w, v, l.comment.clone()));
        }
    }
    assert!(open.is_none(), "{SRC}: unterminated typedef struct");
    let mut names = BTreeSet::new();
    for n in params.iter().map(|p| p.0.clone()).chain(structs.iter().map(|s| s.name.to_uppercase())) {
        assert!(names.insert(n.clone()), "{SRC}: duplicate name {n}");
    }
    (params, structs)
}

fn generate(src: &str, what: &str) -> String {
    let (params, structs) = parse(src);
    assert!(!structs.is_empty(), "{SRC}: no packed structs found");
    let mut s = format!("// Generated by abi/build.rs from {what}. Do not edit.\n\n");
    for (name, bits, v, comment) in &params {
        let ty = match bits {
            0..=8 => "u8",
            9..=16 => "u16",
            17..=32 => "u32",
            _ => "u64",
        };
        let doc = if comment.is_empty() { format!("`{name}`") } else { format!("`{name}`: {comment}") };
        writeln!(s, "/// {doc} ({bits} bits in the SV package).").unwrap();
        writeln!(s, "pub const {name}: {ty} = {v:#x};").unwrap();
    }
    writeln!(s, "\n/// Every localparam above as (name, value), in declaration order.").unwrap();
    writeln!(s, "pub const LOCALPARAMS: &[(&str, u64)] = &[").unwrap();
    for (name, _, v, _) in &params {
        writeln!(s, "    (\"{name}\", {v:#x}),").unwrap();
    }
    writeln!(s, "];").unwrap();
    for st in &structs {
        let up = st.name.to_uppercase();
        let total = st.bits();
        writeln!(s, "\n/// Width in bits of `{}`.", st.name).unwrap();
        writeln!(s, "pub const {up}_BITS: usize = {total};").unwrap();
        writeln!(
            s,
            "/// Fields of `{}` as (name, lsb, width), in declaration order (most significant first).",
            st.name
        )
        .unwrap();
        writeln!(s, "pub const {up}_FIELDS: &[(&str, usize, usize)] = &[").unwrap();
        let mut lsb = total;
        for (n, w, c) in &st.fields {
            lsb -= w;
            if c.is_empty() {
                writeln!(s, "    (\"{n}\", {lsb}, {w}),").unwrap();
            } else {
                writeln!(s, "    (\"{n}\", {lsb}, {w}), // {c}").unwrap();
            }
        }
        writeln!(s, "];").unwrap();
    }
    s
}

fn main() {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let path = manifest.join("..").join(SRC);
    println!("cargo:rerun-if-changed={}", path.display());
    println!("cargo:rerun-if-changed=build.rs");
    let src = fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    let out = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR")).join("desc_gen.rs");
    fs::write(&out, generate(&src, SRC)).unwrap_or_else(|e| panic!("write {}: {e}", out.display()));
    // The BAR0 register map (offsets, identity, capability and doorbell layouts), same rules.
    let rpath = manifest.join("..").join(REGS_SRC);
    println!("cargo:rerun-if-changed={}", rpath.display());
    let rsrc = fs::read_to_string(&rpath).unwrap_or_else(|e| panic!("read {}: {e}", rpath.display()));
    let rout = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR")).join("regs_gen.rs");
    fs::write(&rout, generate(&rsrc, REGS_SRC)).unwrap_or_else(|e| panic!("write {}: {e}", rout.display()));
    // The packet path's package (BTH opcodes, AETH syndromes, drop reasons, the header record).
    let ppath = manifest.join("..").join(PKT_SRC);
    println!("cargo:rerun-if-changed={}", ppath.display());
    let psrc = fs::read_to_string(&ppath).unwrap_or_else(|e| panic!("read {}: {e}", ppath.display()));
    let pout = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR")).join("pkt_gen.rs");
    fs::write(&pout, generate(&psrc, PKT_SRC)).unwrap_or_else(|e| panic!("write {}: {e}", pout.display()));
}
