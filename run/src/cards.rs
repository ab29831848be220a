//! Cards: Hematite PCI functions on this host, bound to `vfio-pci`, published as verbs devices.
//!
//! `hematite-run --cards` (run at boot by `hematite-cards.service`) reads the card
//! configuration, finds the functions in sysfs, and writes the same tree, device links and
//! provider link that simulated NICs get, with `hematite_backend` = `vfio:<BDF>,mac=..,ipv4=..`
//! so that the provider opens the function through VFIO and programs the port's GIDs. The
//! state directory then holds a `cards` file, and `hematite-run -- PROGRAM` in it runs
//! programs on the cards instead of starting simulated devices. docs/cards.md says how.
//!
//! The configuration (`/etc/hematite/cards.conf`), one statement per line, `#` comments:
//!
//! ```text
//! ids 10ee:903f [VENDOR:DEVICE ...]      # which PCI IDs are Hematite functions (discovery)
//! function 0000:03:00.0 mac 02:48:4d:01:00:01 [ipv4 10.1.0.1]
//! ```
//!
//! A function is published when it has a `function` line, exists, and is bound to vfio-pci.
//! There is no netdev and no address register on the card (the deployment issue adds the
//! port configuration to the firmware), so the MAC and the IPv4 address come from here.

use crate::tree::{self, DevFiles, Tree};
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

/// Where the boot-time unit reads the configuration.
pub const DEFAULT_CONFIG: &str = "/etc/hematite/cards.conf";

/// The PCI IDs taken when the configuration names none: a placeholder (Hematite has no
/// assigned IDs; AMD/Xilinx's vendor ID and the PCIe IP's default Gen3 x16 device ID, which an
/// FPGA shell reports unless it is given others). docs/vfio.md shows how to bind them.
pub const PLACEHOLDER_IDS: [(u16, u16); 1] = [(0x10ee, 0x903f)];

/// The file in the state directory that makes it a card one: a line per card, `N BDF`.
pub const CARDS_FILE: &str = "cards";

/// One `function` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FnConf {
    pub bdf: String,
    pub mac: [u8; 6],
    pub ipv4: Option<Ipv4Addr>,
}

/// The configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    pub ids: Vec<(u16, u16)>,
    pub functions: Vec<FnConf>,
}

/// `DDDD:BB:DD.F` (or `BB:DD.F`, domain 0) in the form sysfs names functions; None unless
/// well formed (which also keeps it from naming any other sysfs path).
pub fn normalize_bdf(s: &str) -> Option<String> {
    let full = if s.matches(':').count() == 1 {
        format!("0000:{s}")
    } else {
        s.to_string()
    };
    let (dom, rest) = full.split_once(':')?;
    let (bus, rest) = rest.split_once(':')?;
    let (dev, func) = rest.split_once('.')?;
    let hex = |x: &str, n: usize| x.len() == n && x.bytes().all(|b| b.is_ascii_hexdigit());
    if !(hex(dom, 4) && hex(bus, 2) && hex(dev, 2) && func.len() == 1) {
        return None;
    }
    let (d, f) = (u8::from_str_radix(dev, 16).ok()?, func.parse::<u8>().ok()?);
    if d > 0x1f || f > 7 {
        return None;
    }
    Some(full.to_ascii_lowercase())
}

pub fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let p: Vec<&str> = s.split(':').collect();
    if p.len() != 6 {
        return None;
    }
    let mut m = [0u8; 6];
    for (i, b) in p.iter().enumerate() {
        if b.len() != 2 {
            return None;
        }
        m[i] = u8::from_str_radix(b, 16).ok()?;
    }
    // a port's own address: unicast and not all zero
    if m[0] & 1 != 0 || m == [0; 6] {
        return None;
    }
    Some(m)
}

fn parse_id(s: &str) -> Option<(u16, u16)> {
    let (v, d) = s.split_once(':')?;
    let h = |x: &str| {
        (x.len() == 4)
            .then(|| u16::from_str_radix(x, 16).ok())
            .flatten()
    };
    Some((h(v)?, h(d)?))
}

/// Parses the configuration; errors name the line.
pub fn parse_config(text: &str) -> Result<Config, String> {
    let mut ids = Vec::new();
    let mut functions: Vec<FnConf> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let ln = i + 1;
        let line = raw.split('#').next().unwrap_or("").trim();
        let w: Vec<&str> = line.split_whitespace().collect();
        match w.first() {
            None => continue,
            Some(&"ids") => {
                if w.len() < 2 {
                    return Err(format!(
                        "line {ln}: `ids` wants VENDOR:DEVICE pairs (e.g. 10ee:903f)"
                    ));
                }
                for x in &w[1..] {
                    ids.push(parse_id(x).ok_or_else(|| {
                        format!("line {ln}: `{x}` is not VENDOR:DEVICE (4 hex digits each)")
                    })?);
                }
            }
            Some(&"function") => {
                let bdf = w
                    .get(1)
                    .ok_or_else(|| format!("line {ln}: `function` wants a PCI address"))?;
                let bdf = normalize_bdf(bdf).ok_or_else(|| {
                    format!("line {ln}: `{bdf}` is not a PCI address (DDDD:BB:DD.F)")
                })?;
                if functions.iter().any(|f| f.bdf == bdf) {
                    return Err(format!("line {ln}: {bdf} is configured twice"));
                }
                let (mut mac, mut ipv4) = (None, None);
                let mut kv = w[2..].chunks(2);
                for pair in kv.by_ref() {
                    let [k, v] = pair else {
                        return Err(format!("line {ln}: `{}` has no value", pair[0]));
                    };
                    match *k {
                        "mac" => {
                            mac = Some(parse_mac(v).ok_or_else(|| {
                                format!("line {ln}: `{v}` is not a unicast MAC address")
                            })?)
                        }
                        "ipv4" => {
                            let a: Ipv4Addr = v
                                .parse()
                                .map_err(|_| format!("line {ln}: `{v}` is not an IPv4 address"))?;
                            if a.is_unspecified() || a.is_multicast() || a.is_broadcast() {
                                return Err(format!("line {ln}: {a} cannot be a port's address"));
                            }
                            ipv4 = Some(a)
                        }
                        other => {
                            return Err(format!("line {ln}: unknown key `{other}` (mac, ipv4)"))
                        }
                    }
                }
                let mac = mac.ok_or_else(|| {
                    format!("line {ln}: {bdf} needs `mac` (the card has no address register)")
                })?;
                if let Some(f) = functions.iter().find(|f| f.mac == mac) {
                    return Err(format!("line {ln}: {bdf} has the MAC of {}", f.bdf));
                }
                if let Some(f) = functions.iter().find(|f| ipv4.is_some() && f.ipv4 == ipv4) {
                    return Err(format!(
                        "line {ln}: {bdf} has the IPv4 address of {}",
                        f.bdf
                    ));
                }
                functions.push(FnConf { bdf, mac, ipv4 });
            }
            Some(other) => {
                return Err(format!(
                    "line {ln}: unknown statement `{other}` (ids, function)"
                ))
            }
        }
    }
    if functions.len() > tree::MAX_NICS {
        return Err(format!(
            "{} functions: at most {}",
            functions.len(),
            tree::MAX_NICS
        ));
    }
    if ids.is_empty() {
        ids = PLACEHOLDER_IDS.to_vec();
    }
    Ok(Config { ids, functions })
}

/// A PCI function as sysfs shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PciFn {
    pub bdf: String,
    pub id: (u16, u16),
    /// The bound driver's name, if any.
    pub driver: Option<String>,
    /// The function's real sysfs directory (`/sys/devices/pci0000:00/.../0000:03:00.0`).
    pub path: PathBuf,
}

fn read_hex16(p: &Path) -> Option<u16> {
    let s = std::fs::read_to_string(p).ok()?;
    u16::from_str_radix(s.trim().trim_start_matches("0x"), 16).ok()
}

/// Reads one function from `<sys>/bus/pci/devices/<bdf>`; None if it is not there.
pub fn read_fn(sys: &Path, bdf: &str) -> Option<PciFn> {
    let link = sys.join("bus/pci/devices").join(bdf);
    let path = link.canonicalize().ok()?;
    let id = (
        read_hex16(&path.join("vendor"))?,
        read_hex16(&path.join("device"))?,
    );
    let driver = std::fs::read_link(path.join("driver"))
        .ok()
        .and_then(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()));
    Some(PciFn {
        bdf: bdf.to_string(),
        id,
        driver,
        path,
    })
}

/// Every function under `<sys>/bus/pci/devices` with one of `ids`, by address.
pub fn scan(sys: &Path, ids: &[(u16, u16)]) -> Vec<PciFn> {
    let Ok(rd) = std::fs::read_dir(sys.join("bus/pci/devices")) else {
        return Vec::new();
    };
    let mut v: Vec<PciFn> = rd
        .filter_map(|e| e.ok())
        .filter_map(|e| normalize_bdf(&e.file_name().to_string_lossy()))
        .filter_map(|b| read_fn(sys, &b))
        .filter(|f| ids.contains(&f.id))
        .collect();
    v.sort_by(|a, b| a.bdf.cmp(&b.bdf));
    v
}

/// A published card: verbs device `hematite{n}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Card {
    pub n: usize,
    pub conf: FnConf,
    pub path: PathBuf,
}

impl Card {
    /// What the provider opens (context.rs parses it).
    pub fn backend(&self) -> String {
        let m = self
            .conf
            .mac
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<Vec<_>>()
            .join(":");
        let mut s = format!("vfio:{},mac={m}", self.conf.bdf);
        if let Some(a) = self.conf.ipv4 {
            s.push_str(&format!(",ipv4={a}"));
        }
        s
    }

    pub fn files(&self) -> DevFiles {
        let m = self.conf.mac;
        let e = [m[0] ^ 0x02, m[1], m[2], 0xff, 0xfe, m[3], m[4], m[5]];
        let guid = e
            .chunks(2)
            .map(|c| format!("{:02x}{:02x}", c[0], c[1]))
            .collect::<Vec<_>>()
            .join(":");
        let gid0 = self
            .conf
            .ipv4
            .map(|a| a.to_ipv6_mapped().octets())
            .unwrap_or([0; 16]);
        let gid1 = [
            0xfe, 0x80, 0, 0, 0, 0, 0, 0, e[0], e[1], e[2], e[3], e[4], e[5], e[6], e[7],
        ];
        DevFiles {
            name: format!("hematite{}", self.n),
            uverbs: format!("uverbs{}", self.n),
            guid,
            backend: self.backend(),
            gids: [gid0, gid1],
            counters: None,
            device: self.path.clone(),
        }
    }
}

/// What [`plan`] decided: the cards, and a line for everything configured or found that is
/// not published, with why.
#[derive(Debug, Default)]
pub struct Plan {
    pub cards: Vec<Card>,
    pub skipped: Vec<String>,
}

/// Matches the configuration with what sysfs under `sys` shows. Cards are numbered in the
/// order of their addresses, so the names stay the same from boot to boot while the same
/// functions are configured.
pub fn plan(conf: &Config, sys: &Path) -> Plan {
    let mut p = Plan::default();
    let mut fns = conf.functions.clone();
    fns.sort_by(|a, b| a.bdf.cmp(&b.bdf));
    for f in fns {
        match read_fn(sys, &f.bdf) {
            None => p.skipped.push(format!(
                "{}: configured, but there is no such PCI function",
                f.bdf
            )),
            Some(pf) if pf.driver.as_deref() != Some("vfio-pci") => p.skipped.push(format!(
                "{}: bound to {}, not vfio-pci (docs/vfio.md: binding a Hematite function)",
                f.bdf,
                pf.driver.as_deref().unwrap_or("no driver")
            )),
            Some(pf) => p.cards.push(Card {
                n: p.cards.len(),
                conf: f,
                path: pf.path,
            }),
        }
    }
    for pf in scan(sys, &conf.ids) {
        if !conf.functions.iter().any(|f| f.bdf == pf.bdf) {
            p.skipped.push(format!(
                "{}: a Hematite function ({:04x}:{:04x}, driver {}) with no `function` line in the configuration",
                pf.bdf,
                pf.id.0,
                pf.id.1,
                pf.driver.as_deref().unwrap_or("none")
            ));
        }
    }
    p
}

/// The tree of one view: every card, or card `one` alone.
pub fn build_tree(cards: &[Card], one: Option<usize>, full: (u32, u32)) -> Tree {
    let mut t = tree::empty_tree();
    for c in cards.iter().filter(|c| one.is_none_or(|n| n == c.n)) {
        tree::add_device(&mut t, &c.files(), full);
    }
    t
}

/// The `cards` file's text.
pub fn cards_file(cards: &[Card]) -> String {
    cards
        .iter()
        .map(|c| format!("{} {}\n", c.n, c.backend()))
        .collect()
}

/// The card numbers a `cards` file lists; None if it is malformed.
pub fn read_cards_file(text: &str) -> Option<Vec<(usize, String)>> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let (n, b) = l.trim().split_once(' ')?;
            Some((n.parse().ok()?, b.to_string()))
        })
        .collect()
}

#[cfg(test)]
#[path = "../tests/common/fakepci.rs"]
mod fakepci;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::{file_text, Entry};

    fn fake_sys(tag: &str, fns: &[(&str, u16, u16, Option<&str>)]) -> PathBuf {
        super::fakepci::fake_pci(&crate::test_dir(&format!("cards-{tag}")), fns)
    }

    #[test]
    fn bdf_forms() {
        assert_eq!(normalize_bdf("03:00.0").as_deref(), Some("0000:03:00.0"));
        assert_eq!(
            normalize_bdf("0000:AF:1f.7").as_deref(),
            Some("0000:af:1f.7")
        );
        for bad in [
            "",
            "03:00",
            "0000:03:20.0",
            "0000:03:00.8",
            "../../x",
            "0000:03:00.0/..",
            "00000:03:00.0",
        ] {
            assert_eq!(normalize_bdf(bad), None, "{bad}");
        }
    }

    #[test]
    fn config_parsing() {
        let c = parse_config("# cards\nids 10ee:903f 1234:1001\nfunction 03:00.0 mac 02:48:4d:01:00:01 ipv4 10.1.0.1 # port 0\nfunction 0000:03:00.1 mac 02:48:4d:01:00:02\n").unwrap();
        assert_eq!(c.ids, vec![(0x10ee, 0x903f), (0x1234, 0x1001)]);
        assert_eq!(c.functions.len(), 2);
        assert_eq!(
            c.functions[0],
            FnConf {
                bdf: "0000:03:00.0".into(),
                mac: [2, 0x48, 0x4d, 1, 0, 1],
                ipv4: Some(Ipv4Addr::new(10, 1, 0, 1))
            }
        );
        assert_eq!(c.functions[1].ipv4, None);
        assert_eq!(parse_config("").unwrap().ids, PLACEHOLDER_IDS.to_vec());
        for (bad, why) in [
            ("frobnicate 1", "line 1: unknown statement"),
            ("ids", "wants VENDOR:DEVICE"),
            ("ids 10ee-903f", "not VENDOR:DEVICE"),
            ("function 03:00.0", "needs `mac`"),
            ("function 3:0.0 mac 02:00:00:00:00:01", "not a PCI address"),
            ("function 03:00.0 mac 01:00:00:00:00:01", "not a unicast MAC"),
            ("function 03:00.0 mac 02:00:00:00:00:01 ipv4 300.1.1.1", "not an IPv4"),
            ("function 03:00.0 mac 02:00:00:00:00:01 ipv4 224.0.0.1", "cannot be a port's address"),
            ("function 03:00.0 mac 02:00:00:00:00:01 ipv4", "has no value"),
            ("function 03:00.0 mac 02:00:00:00:00:01 speed 100", "unknown key"),
            ("function 03:00.0 mac 02:00:00:00:00:01\nfunction 0000:03:00.0 mac 02:00:00:00:00:02", "line 2: 0000:03:00.0 is configured twice"),
            ("function 03:00.0 mac 02:00:00:00:00:01\nfunction 03:00.1 mac 02:00:00:00:00:01", "has the MAC of"),
            ("function 03:00.0 mac 02:00:00:00:00:01 ipv4 10.0.0.1\nfunction 03:00.1 mac 02:00:00:00:00:02 ipv4 10.0.0.1", "IPv4 address of"),
        ] {
            let e = parse_config(bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }

    #[test]
    fn plan_publishes_only_configured_vfio_functions() {
        let sys = fake_sys(
            "plan",
            &[
                ("0000:03:00.0", 0x10ee, 0x903f, Some("vfio-pci")),
                ("0000:03:00.1", 0x10ee, 0x903f, Some("vfio-pci")),
                ("0000:04:00.0", 0x10ee, 0x903f, Some("xdma")),
                ("0000:05:00.0", 0x10ee, 0x903f, None),
                ("0000:06:00.0", 0x8086, 0x1572, Some("i40e")),
            ],
        );
        let conf = parse_config(
            "function 03:00.1 mac 02:48:4d:01:00:02 ipv4 10.1.0.2\nfunction 03:00.0 mac 02:48:4d:01:00:01 ipv4 10.1.0.1\nfunction 04:00.0 mac 02:48:4d:01:00:03\nfunction 07:00.0 mac 02:48:4d:01:00:04\n",
        )
        .unwrap();
        let p = plan(&conf, &sys);
        // numbered by address, not by line
        let got: Vec<(usize, &str)> = p.cards.iter().map(|c| (c.n, c.conf.bdf.as_str())).collect();
        assert_eq!(got, vec![(0, "0000:03:00.0"), (1, "0000:03:00.1")]);
        assert_eq!(
            p.cards[0].path,
            sys.canonicalize()
                .unwrap()
                .join("devices/pci0000:00/0000:03:00.0")
        );
        let sk = p.skipped.join("\n");
        assert!(
            sk.contains("0000:04:00.0: bound to xdma, not vfio-pci"),
            "{sk}"
        );
        assert!(
            sk.contains("0000:07:00.0: configured, but there is no such PCI function"),
            "{sk}"
        );
        assert!(sk.contains("0000:05:00.0: a Hematite function (10ee:903f, driver none) with no `function` line"), "{sk}");
        assert!(
            !sk.contains("0000:06:00.0"),
            "other vendors' functions are not ours: {sk}"
        );
        assert_eq!(p.skipped.len(), 3);
        std::fs::remove_dir_all(sys.parent().unwrap()).unwrap();
    }

    #[test]
    fn card_tree() {
        let vfio = |bdf| (bdf, 0x10ee, 0x903f, Some("vfio-pci"));
        let sys = fake_sys("tree", &[vfio("0000:03:00.0"), vfio("0000:03:00.1")]);
        let conf = parse_config("function 03:00.0 mac 02:48:4d:01:00:01 ipv4 10.1.0.1\nfunction 03:00.1 mac 02:48:4d:01:00:02\n").unwrap();
        let p = plan(&conf, &sys);
        let t = build_tree(&p.cards, None, (1, 7));
        let ib = "class/infiniband/hematite0";
        let want = [
            ("hematite0/hematite_backend", "vfio:0000:03:00.0,mac=02:48:4d:01:00:01,ipv4=10.1.0.1"),
            ("hematite1/hematite_backend", "vfio:0000:03:00.1,mac=02:48:4d:01:00:02"),
            ("hematite0/node_guid", "0048:4dff:fe01:0001"),
            ("hematite0/ports/1/gids/0", "0000:0000:0000:0000:0000:ffff:0a01:0001"),
            ("hematite0/ports/1/gids/1", "fe80:0000:0000:0000:0048:4dff:fe01:0001"),
            // no IPv4 address: GID 0 is empty
            ("hematite1/ports/1/gids/0", "0000:0000:0000:0000:0000:0000:0000:0000"),
            ("../infiniband_verbs/uverbs1/ibdev", "hematite1"),
        ];
        for (f, v) in want {
            let path = format!("class/infiniband/{f}").replace("infiniband/../", "");
            assert_eq!(file_text(&t, &path), Some(format!("{v}\n").as_str()), "{path}");
        }
        assert_eq!(
            t.get(Path::new(&format!("{ib}/device"))),
            Some(&Entry::Link(p.cards[0].path.clone()))
        );
        // no device process keeps counters for a card
        assert!(!t.keys().any(|k| k.to_string_lossy().contains("counters")));
        let one = build_tree(&p.cards, Some(1), (1, 7));
        assert!(one
            .keys()
            .all(|k| !k.to_string_lossy().contains("hematite0")));
        assert_eq!(
            file_text(&one, "class/infiniband_verbs/uverbs1/ibdev"),
            Some("hematite1\n")
        );
        // the tree passes the checks hematite-run makes of any tree
        let root = sys.join("view");
        tree::write_tree(&root, &t).unwrap();
        assert_eq!(
            crate::checks::verify_tree(&root, (1, 7)).unwrap(),
            vec!["hematite0", "hematite1"]
        );
        // the cards file reads back
        let cf = cards_file(&p.cards);
        assert_eq!(
            read_cards_file(&cf).unwrap(),
            vec![(0, p.cards[0].backend()), (1, p.cards[1].backend())]
        );
        assert_eq!(read_cards_file("x y\n"), None);
        std::fs::remove_dir_all(sys.parent().unwrap()).unwrap();
    }
}
