//! The NICs hematite-run manages, where their files live, and the fake sysfs tree that makes
//! libibverbs see them.
//!
//! libibverbs (no ib_core, so no netlink) finds devices by scanning `$SYSFS_PATH/class/
//! infiniband_verbs` and `class/infiniband`; the GID table, the pkey and the node GUID come
//! from files there too. The tree is written into a temporary directory and swapped into place
//! in one rename, so a concurrent reader sees the old tree or the new one, never half of one.

use std::collections::BTreeMap;
use std::ffi::CString;
use std::io;
use std::net::Ipv4Addr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

/// Entries of each port's GID table: what the firmware's QUERY_PORT reports as `gid_tbl_len`
/// (`GID_TBL_LEN` in firmware/src/res.rs; a test keeps the two equal). libibverbs and NCCL
/// query every index below it, so one file per index must exist.
pub const GID_TBL_LEN: usize = 4;

/// At most this many NICs: the last byte of the MAC and of the IPv4 address is n + 1.
pub const MAX_NICS: usize = 254;

/// The longest path a Unix socket can be bound at (`sun_path` holds 108 bytes with the NUL).
pub const MAX_SOCKET_PATH: usize = 107;

/// The value of `class/infiniband_verbs/abi_version` (libibverbs accepts 3 to 6).
pub const UVERBS_ABI: u32 = 6;

/// The per-device `abi_version` (the provider's match range includes it).
pub const DEVICE_ABI: u32 = 1;

/// An external link for NIC 0 (`hematite-run --link`): its own datagram-wire endpoints and
/// IPv4 address instead of a partner NIC (e.g. a VM running Linux Soft-RoCE as the peer).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    /// Where the device receives (`unix:PATH` or `udp:HOST:PORT`, as `hematite-sim device
    /// --wire-local` reads it).
    pub local: String,
    /// Where it sends.
    pub peer: String,
    pub ip: Ipv4Addr,
}

impl Link {
    /// `LOCAL,PEER,IP`.
    pub fn parse(s: &str) -> Result<Link, String> {
        let p: Vec<&str> = s.trim().split(',').collect();
        let [local, peer, ip] = p.as_slice() else { return Err(format!("--link wants LOCAL,PEER,IP, not `{s}`")) };
        let ip = ip.parse().map_err(|_| format!("--link: `{ip}` is not an IPv4 address"))?;
        Ok(Link { local: local.to_string(), peer: peer.to_string(), ip })
    }

    pub fn to_line(&self) -> String {
        format!("{},{},{}", self.local, self.peer, self.ip)
    }
}

/// The external link of this run, when the state directory has one (set once at start-up).
pub static LINK: std::sync::OnceLock<Link> = std::sync::OnceLock::new();

/// One simulated NIC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Nic {
    pub n: usize,
}

impl Nic {
    pub fn new(n: usize) -> Result<Nic, String> {
        if n >= MAX_NICS {
            return Err(format!("NIC {n}: at most {MAX_NICS} NICs (0..={})", MAX_NICS - 1));
        }
        Ok(Nic { n })
    }

    /// `hematite{n}`: the verbs device name.
    pub fn name(&self) -> String {
        format!("hematite{}", self.n)
    }

    /// `uverbs{n}`: the name of its (fake) character device.
    pub fn uverbs(&self) -> String {
        format!("uverbs{}", self.n)
    }

    /// The NIC's pair partner on the wire (2k <-> 2k+1).
    pub fn peer(&self) -> usize {
        self.n ^ 1
    }

    pub fn mac(&self) -> [u8; 6] {
        [0x02, 0x48, 0x4d, 0x00, 0x00, (self.n + 1) as u8]
    }

    /// `02:48:4d:00:00:01`, the form `hematite-sim device --mac` reads.
    pub fn mac_str(&self) -> String {
        self.mac().iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":")
    }

    pub fn ip(&self) -> Ipv4Addr {
        match LINK.get() {
            Some(l) if self.n == 0 => l.ip,
            _ => Ipv4Addr::new(10, 77, 0, (self.n + 1) as u8),
        }
    }

    /// The EUI-64 made from the MAC (ff:fe in the middle, the universal/local bit flipped),
    /// as `xxxx:xxxx:xxxx:xxxx`; unique per NIC. Used for node_guid and sys_image_guid.
    pub fn guid(&self) -> String {
        let m = self.mac();
        let e = [m[0] ^ 0x02, m[1], m[2], 0xff, 0xfe, m[3], m[4], m[5]];
        e.chunks(2).map(|c| format!("{:02x}{:02x}", c[0], c[1])).collect::<Vec<_>>().join(":")
    }

    /// GID index 0: the IPv4-mapped IPv6 address of the NIC's IPv4 address (RoCE v2).
    pub fn gid0(&self) -> [u8; 16] {
        self.ip().to_ipv6_mapped().octets()
    }

    /// GID index 1: the IPv6 link-local address with the MAC's modified EUI-64 identifier
    /// (RoCE v2 over IPv6; the device process answers neighbour solicitations for it).
    pub fn gid1(&self) -> [u8; 16] {
        let m = self.mac();
        [0xfe, 0x80, 0, 0, 0, 0, 0, 0, m[0] ^ 0x02, m[1], m[2], 0xff, 0xfe, m[3], m[4], m[5]]
    }
}

/// A GID as sysfs prints it: 8 groups of 4 hex digits, `:`-separated, no shortening.
pub fn format_gid(g: &[u8; 16]) -> String {
    g.chunks(2).map(|c| format!("{:02x}{:02x}", c[0], c[1])).collect::<Vec<_>>().join(":")
}

/// The reverse of [`format_gid`]; None unless exactly 8 groups of 4 hex digits.
pub fn parse_gid(s: &str) -> Option<[u8; 16]> {
    let groups: Vec<&str> = s.trim_end_matches('\n').split(':').collect();
    if groups.len() != 8 {
        return None;
    }
    let mut g = [0u8; 16];
    for (i, grp) in groups.iter().enumerate() {
        if grp.len() != 4 || !grp.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        let v = u16::from_str_radix(grp, 16).ok()?;
        g[2 * i..2 * i + 2].copy_from_slice(&v.to_be_bytes());
    }
    Some(g)
}

/// Which devices a tree shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    /// Every NIC.
    All,
    /// Only this one (so that a program taking "the first device" gets it).
    Nic(usize),
}

impl View {
    pub fn name(&self) -> String {
        match self {
            View::All => "all".into(),
            View::Nic(n) => format!("nic{n}"),
        }
    }
}

/// Where hematite-run keeps everything for one state directory with `nics` NICs.
#[derive(Debug, Clone)]
pub struct Layout {
    pub state: PathBuf,
    pub nics: usize,
}

impl Layout {
    /// `state` must be absolute (it ends up in the tree and in environment variables); `nics`
    /// must be even (NICs come in pairs) and at most [`MAX_NICS`].
    pub fn new(state: PathBuf, nics: usize) -> Result<Layout, String> {
        if !state.is_absolute() {
            return Err(format!("state directory {} is not an absolute path", state.display()));
        }
        if LINK.get().is_some() {
            if nics != 1 {
                return Err(format!("a state directory with an external link (--link) has one NIC, not {nics}"));
            }
        } else if nics == 0 || nics % 2 != 0 {
            return Err(format!("--nics must be a positive even number (NICs come in pairs), not {nics}"));
        }
        if nics > MAX_NICS {
            return Err(format!("--nics: at most {MAX_NICS}"));
        }
        let l = Layout { state, nics };
        let longest = l.socket(nics - 1);
        if longest.as_os_str().len() > MAX_SOCKET_PATH {
            return Err(format!(
                "{} is longer than a Unix socket path may be ({MAX_SOCKET_PATH} bytes); choose a shorter --state",
                longest.display()
            ));
        }
        Ok(l)
    }

    pub fn all(&self) -> Vec<Nic> {
        (0..self.nics).map(|n| Nic { n }).collect()
    }

    pub fn nic(&self, n: usize) -> Result<Nic, String> {
        if n >= self.nics {
            return Err(format!("--nic {n}: only NICs 0..={} exist (--nics {})", self.nics - 1, self.nics));
        }
        Nic::new(n)
    }

    pub fn socket(&self, n: usize) -> PathBuf {
        self.state.join(format!("nic{n}.sock"))
    }
    pub fn wire(&self, n: usize) -> PathBuf {
        self.state.join(format!("wire{n}"))
    }
    pub fn pcap(&self, n: usize) -> PathBuf {
        self.state.join(format!("nic{n}.pcap"))
    }
    pub fn log(&self, n: usize) -> PathBuf {
        self.state.join(format!("nic{n}.log"))
    }
    pub fn pid_file(&self, n: usize) -> PathBuf {
        self.state.join(format!("nic{n}.pid"))
    }
    /// Where NIC n's device process keeps its counter files (`--counters`; docs/counters.md).
    pub fn counters(&self, n: usize) -> PathBuf {
        let mut p = self.state.clone();
        p.push(format!("nic{n}.counters"));
        p
    }
    pub fn sys(&self) -> PathBuf {
        self.state.join("sys")
    }
    pub fn view_dir(&self, v: View) -> PathBuf {
        self.sys().join(v.name())
    }
    pub fn lib(&self) -> PathBuf {
        self.state.join("lib")
    }
    /// What `RDMAV_DRIVERS` names: libibverbs appends `-rdmav34.so`.
    pub fn driver_prefix(&self) -> PathBuf {
        self.lib().join("libhematite")
    }
    /// The provider's link: `lib/libhematite-rdmav34.so`.
    pub fn provider_link(&self) -> PathBuf {
        self.lib().join("libhematite-rdmav34.so")
    }
    /// An empty directory the overlay binds the real /sys/class to, inside its own namespace.
    pub fn aside(&self) -> PathBuf {
        self.state.join("aside")
    }
    pub fn lock_file(&self) -> PathBuf {
        self.state.join("lock")
    }

    /// The NICs a view shows.
    pub fn view_nics(&self, v: View) -> Result<Vec<Nic>, String> {
        match v {
            View::All => Ok(self.all()),
            View::Nic(n) => Ok(vec![self.nic(n)?]),
        }
    }

    /// Every view: `all` and one per NIC.
    pub fn views(&self) -> Vec<View> {
        std::iter::once(View::All).chain((0..self.nics).map(View::Nic)).collect()
    }
}

/// One node of a tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    Dir,
    File(Vec<u8>),
    Link(PathBuf),
}

/// A tree: paths relative to its root, each with what is there. Parents come before children
/// (BTreeMap order of paths).
pub type Tree = BTreeMap<PathBuf, Entry>;

fn add_file(t: &mut Tree, path: &str, content: String) {
    let p = PathBuf::from(path);
    let mut anc: Vec<PathBuf> = p.ancestors().skip(1).filter(|a| !a.as_os_str().is_empty()).map(Path::to_path_buf).collect();
    anc.reverse();
    for a in anc {
        t.entry(a).or_insert(Entry::Dir);
    }
    t.insert(p, Entry::File(content.into_bytes()));
}

/// What one device's directories hold (`class/infiniband_verbs/<uverbs>` and
/// `class/infiniband/<name>`).
pub struct DevFiles {
    /// `hematiteN`.
    pub name: String,
    /// `uverbsN`.
    pub uverbs: String,
    /// node_guid and sys_image_guid, `xxxx:xxxx:xxxx:xxxx`.
    pub guid: String,
    /// The `hematite_backend` line the provider opens (`sim:<socket>`, `vfio:<BDF>[,...]`).
    pub backend: String,
    /// GIDs 0 and 1 (zero when the port has no such address); the others are zero.
    pub gids: [[u8; 16]; 2],
    /// Where the device's live `counters/` and `hw_counters/` are, if anything keeps them.
    pub counters: Option<PathBuf>,
    /// `device`: a link to the PCI function's sysfs directory (a card's, or a simulated
    /// NIC's in the tree itself).
    pub device: PathBuf,
}

/// The PCI domain of the simulated NICs' functions: one no host has (0x4d48, "HM"), so that
/// `/sys/class/pci_bus/4d48:NN` never names a real bus.
pub const SIM_PCI_DOMAIN: u16 = 0x4d48;

/// Simulated NIC n's PCI address: bus n + 1 of [`SIM_PCI_DOMAIN`], device 0, function 0.
pub fn sim_bdf(n: usize) -> String {
    format!("{SIM_PCI_DOMAIN:04x}:{:02x}:00.0", n + 1)
}

/// The host's online CPUs as sysfs lists them (`0-7`), for the functions' `local_cpulist`.
fn online_cpus() -> String {
    std::fs::read_to_string("/sys/devices/system/cpu/online").map(|s| s.trim().to_string()).unwrap_or_else(|_| "0".into())
}

/// `local_cpus` from a CPU list: the kernel's mask format, 32-bit hex groups, most significant
/// first, comma-separated.
fn cpu_mask(list: &str) -> String {
    let mut cpus = Vec::new();
    for part in list.split(',').filter(|p| !p.is_empty()) {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        if let (Ok(a), Ok(b)) = (a.parse::<usize>(), b.parse::<usize>()) {
            cpus.extend(a..=b.min(a + 4095));
        }
    }
    let words = cpus.iter().max().map_or(1, |m| m / 32 + 1);
    let mut w = vec![0u32; words];
    for c in cpus {
        w[c / 32] |= 1 << (c % 32);
    }
    w.iter().rev().map(|x| format!("{x:08x}")).collect::<Vec<_>>().join(",")
}

/// Simulated NIC n's PCI function, as sysfs lays one out under `/sys/devices` (what NCCL's
/// topology detection and libibverbs read): `devices/pci4d48:00/4d48:NN:00.0/` with its IDs,
/// class (Ethernet controller), NUMA node, local CPUs, PCIe link (a Gen4 x16 card), and the
/// `modalias` the provider matches; its bus `devices/pci4d48:00/pci_bus/4d48:NN`, which
/// `class/pci_bus/4d48:NN` links to (absolutely: the overlay binds these class directories
/// elsewhere). Returns the function directory's absolute path. `root`: where the tree will be.
fn add_sim_pci(t: &mut Tree, root: &Path, n: usize, modalias: &str) -> PathBuf {
    use hematite_abi::reply::{VENDOR_ID, VENDOR_PART_ID};
    let bdf = sim_bdf(n);
    let bus = &bdf[..7];
    let fdir = format!("devices/pci{SIM_PCI_DOMAIN:04x}:00/{bdf}");
    let cpus = online_cpus();
    let numa = if Path::new("/sys/devices/system/node/node0").is_dir() { "0" } else { "-1" };
    for (f, v) in [
        ("modalias", modalias.to_string()),
        ("vendor", format!("{VENDOR_ID:#06x}")),
        ("device", format!("{VENDOR_PART_ID:#06x}")),
        ("subsystem_vendor", format!("{VENDOR_ID:#06x}")),
        ("subsystem_device", format!("{VENDOR_PART_ID:#06x}")),
        ("class", "0x020000".into()),
        ("numa_node", numa.into()),
        ("local_cpulist", cpus.clone()),
        ("local_cpus", cpu_mask(&cpus)),
        ("max_link_speed", "16.0 GT/s PCIe".into()),
        ("max_link_width", "16".into()),
        ("current_link_speed", "16.0 GT/s PCIe".into()),
        ("current_link_width", "16".into()),
    ] {
        add_file(t, &format!("{fdir}/{f}"), format!("{v}\n"));
    }
    let bus_dir = format!("devices/pci{SIM_PCI_DOMAIN:04x}:00/pci_bus/{bus}");
    t.entry(PathBuf::from(&bus_dir)).or_insert(Entry::Dir);
    add_file(t, &format!("{bus_dir}/cpulistaffinity"), format!("{cpus}\n"));
    t.entry(PathBuf::from("class/pci_bus")).or_insert(Entry::Dir);
    t.insert(PathBuf::from(format!("class/pci_bus/{bus}")), Entry::Link(root.join(&bus_dir)));
    root.join(fdir)
}

/// Adds one device's files. `full` is (major, minor) of /dev/full, which every
/// /dev/infiniband/uverbsN links to; libibverbs checks that `dev` matches the node's rdev.
pub fn add_device(t: &mut Tree, d: &DevFiles, full: (u32, u32)) {
    let uv = format!("class/infiniband_verbs/{}", d.uverbs);
    add_file(t, &format!("{uv}/ibdev"), format!("{}\n", d.name));
    add_file(t, &format!("{uv}/dev"), format!("{}:{}\n", full.0, full.1));
    add_file(t, &format!("{uv}/abi_version"), format!("{DEVICE_ABI}\n"));
    let ib = format!("class/infiniband/{}", d.name);
    add_file(t, &format!("{ib}/node_type"), "1: CA\n".into());
    add_file(t, &format!("{ib}/node_guid"), format!("{}\n", d.guid));
    add_file(t, &format!("{ib}/sys_image_guid"), format!("{}\n", d.guid));
    add_file(t, &format!("{ib}/hematite_backend"), format!("{}\n", d.backend));
    t.insert(PathBuf::from(format!("{ib}/device")), Entry::Link(d.device.clone()));
    for i in 0..GID_TBL_LEN {
        let gid = if i < 2 { d.gids[i] } else { [0; 16] };
        add_file(t, &format!("{ib}/ports/1/gids/{i}"), format!("{}\n", format_gid(&gid)));
        add_file(t, &format!("{ib}/ports/1/gid_attrs/types/{i}"), "RoCE v2\n".into());
    }
    add_file(t, &format!("{ib}/ports/1/pkeys/0"), "0xffff\n".into());
    if let Some(c) = &d.counters {
        // the counters, kept live by the device process (docs/counters.md)
        for sub in ["counters", "hw_counters"] {
            t.insert(PathBuf::from(format!("{ib}/ports/1/{sub}")), Entry::Link(c.join(sub)));
        }
    }
}

/// A tree holding only the ABI version file and the empty class directories.
pub fn empty_tree() -> Tree {
    let mut t = Tree::new();
    add_file(&mut t, "class/infiniband_verbs/abi_version", format!("{UVERBS_ABI}\n"));
    t.insert(PathBuf::from("class/infiniband"), Entry::Dir);
    t
}

/// The tree of one view. `full` is (major, minor) of /dev/full (see [`add_device`]).
pub fn build_tree(layout: &Layout, view: View, full: (u32, u32)) -> Result<Tree, String> {
    let mut t = empty_tree();
    let root = layout.view_dir(view);
    for nic in layout.view_nics(view)? {
        let sock = layout.socket(nic.n);
        if !sock.is_absolute() {
            return Err(format!("{}: the backend socket path must be absolute", sock.display()));
        }
        let pci = add_sim_pci(&mut t, &root, nic.n, &format!("hematite:n{}", nic.n));
        let d = DevFiles {
            name: nic.name(),
            uverbs: nic.uverbs(),
            guid: nic.guid(),
            backend: format!("sim:{}", sock.display()),
            gids: [nic.gid0(), nic.gid1()],
            counters: Some(layout.counters(nic.n)),
            device: pci,
        };
        add_device(&mut t, &d, full);
    }
    Ok(t)
}

fn ctx(p: &Path) -> impl Fn(io::Error) -> String + '_ {
    move |e| format!("{}: {e}", p.display())
}

/// Creates `root` (which must not exist) holding `tree`.
pub fn write_tree(root: &Path, tree: &Tree) -> Result<(), String> {
    std::fs::create_dir(root).map_err(ctx(root))?;
    for (rel, e) in tree {
        let p = root.join(rel);
        match e {
            Entry::Dir => std::fs::create_dir(&p).map_err(ctx(&p))?,
            Entry::File(b) => std::fs::write(&p, b).map_err(ctx(&p))?,
            Entry::Link(to) => std::os::unix::fs::symlink(to, &p).map_err(ctx(&p))?,
        }
    }
    Ok(())
}

/// Reads a tree back (links are not followed).
pub fn read_tree(root: &Path) -> io::Result<Tree> {
    fn walk(root: &Path, rel: &Path, t: &mut Tree) -> io::Result<()> {
        let mut names: Vec<_> = std::fs::read_dir(root.join(rel))?.collect::<Result<_, _>>()?;
        names.sort_by_key(|d| d.file_name());
        for d in names {
            let r = rel.join(d.file_name());
            let ft = d.file_type()?;
            if ft.is_symlink() {
                t.insert(r, Entry::Link(std::fs::read_link(d.path())?));
            } else if ft.is_dir() {
                t.insert(r.clone(), Entry::Dir);
                walk(root, &r, t)?;
            } else {
                t.insert(r, Entry::File(std::fs::read(d.path())?));
            }
        }
        Ok(())
    }
    let mut t = Tree::new();
    walk(root, Path::new(""), &mut t)?;
    Ok(t)
}

fn cpath(p: &Path) -> CString {
    CString::new(p.as_os_str().as_bytes()).expect("paths hold no NUL")
}

static TMP_SEQ: AtomicU32 = AtomicU32::new(0);

fn unique(prefix: &str) -> String {
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    format!("{prefix}-{}-{}-{t}", std::process::id(), TMP_SEQ.fetch_add(1, Ordering::Relaxed))
}

/// Installs `tree` as `sys/<name>`: written to a temporary directory next to it, then
/// renamed into place (an existing tree is exchanged with it in one `renameat2`). An identical
/// existing tree is kept as it is. A replaced tree is moved to `sys/.old/` rather than deleted,
/// because programs started earlier with the mount-namespace overlay have its directories
/// bound; `--stop` removes them. Returns whether anything changed.
pub fn install_tree(sys: &Path, name: &str, tree: &Tree) -> Result<bool, String> {
    std::fs::create_dir_all(sys).map_err(ctx(sys))?;
    let target = sys.join(name);
    match std::fs::symlink_metadata(&target) {
        Ok(m) if !m.is_dir() => {
            return Err(format!(
                "{} exists and is not a directory (a link or a file hematite-run did not write); remove it",
                target.display()
            ))
        }
        Ok(_) => {
            if read_tree(&target).map(|old| old == *tree).unwrap_or(false) {
                return Ok(false);
            }
        }
        Err(_) => {}
    }
    let tmp = sys.join(unique(&format!(".tmp-{name}")));
    if let Err(e) = write_tree(&tmp, tree) {
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(e);
    }
    // Fresh install: a plain rename (fails if someone else created the target meanwhile).
    if !target.exists() && std::fs::rename(&tmp, &target).is_ok() {
        return Ok(true);
    }
    let old = sys.join(".old");
    std::fs::create_dir_all(&old).map_err(ctx(&old))?;
    let (ct, cn) = (cpath(&tmp), cpath(&target));
    // SAFETY: both are valid NUL-terminated paths.
    let r = unsafe { libc::renameat2(libc::AT_FDCWD, ct.as_ptr(), libc::AT_FDCWD, cn.as_ptr(), libc::RENAME_EXCHANGE) };
    if r == 0 {
        // tmp now holds the previous tree.
        std::fs::rename(&tmp, old.join(unique(name))).map_err(ctx(&tmp))?;
        return Ok(true);
    }
    // No exchange on this file system: retire the old tree, then rename (a short window
    // without a tree).
    std::fs::rename(&target, old.join(unique(name))).map_err(ctx(&target))?;
    std::fs::rename(&tmp, &target).map_err(ctx(&target))?;
    Ok(true)
}

/// (major, minor) of the character device behind `path` (links followed).
pub fn char_rdev(path: &Path) -> Result<(u32, u32), String> {
    use std::os::unix::fs::FileTypeExt;
    let m = std::fs::metadata(path).map_err(ctx(path))?;
    if !m.file_type().is_char_device() {
        return Err(format!("{} is not a character device", path.display()));
    }
    let rdev = m.rdev();
    Ok((libc::major(rdev), libc::minor(rdev)))
}

/// The text of a tree's file, if it is one.
#[cfg(test)]
pub fn file_text<'a>(t: &'a Tree, path: &str) -> Option<&'a str> {
    match t.get(Path::new(path)) {
        Some(Entry::File(b)) => std::str::from_utf8(b).ok(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmpdir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(unique(&format!("hm-run-test-{tag}")));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn layout(nics: usize) -> Layout {
        Layout::new(PathBuf::from("/run/hematite-test"), nics).unwrap()
    }

    #[test]
    fn nic_identity() {
        let n0 = Nic::new(0).unwrap();
        assert_eq!(n0.mac_str(), "02:48:4d:00:00:01");
        assert_eq!(n0.ip(), Ipv4Addr::new(10, 77, 0, 1));
        assert_eq!(n0.guid(), "0048:4dff:fe00:0001");
        let n11 = Nic::new(11).unwrap();
        assert_eq!(n11.mac_str(), "02:48:4d:00:00:0c");
        assert_eq!(n11.ip(), Ipv4Addr::new(10, 77, 0, 12));
        assert_eq!(n11.peer(), 10);
        assert_eq!(Nic::new(10).unwrap().peer(), 11);
        assert!(Nic::new(MAX_NICS).is_err());
        let guids: std::collections::BTreeSet<String> = (0..MAX_NICS).map(|n| Nic::new(n).unwrap().guid()).collect();
        assert_eq!(guids.len(), MAX_NICS);
    }

    #[test]
    fn gid_format() {
        let n0 = Nic::new(0).unwrap();
        assert_eq!(format_gid(&n0.gid0()), "0000:0000:0000:0000:0000:ffff:0a4d:0001");
        assert_eq!(format_gid(&Nic::new(254 - 1).unwrap().gid0()), "0000:0000:0000:0000:0000:ffff:0a4d:00fe");
        assert_eq!(format_gid(&[0; 16]), "0000:0000:0000:0000:0000:0000:0000:0000");
        let g = [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0];
        assert_eq!(parse_gid(&format_gid(&g)), Some(g));
        assert_eq!(parse_gid("0000:0000:0000:0000:0000:ffff:0a4d:0001\n"), Some(n0.gid0()));
        for bad in ["", "::ffff:10.77.0.1", "0:0:0:0:0:0:0:0", "0000:0000:0000:0000:0000:ffff:0a4d", "0000:0000:0000:0000:0000:ffff:0a4d:00g1"] {
            assert_eq!(parse_gid(bad), None, "{bad}");
        }
    }

    #[test]
    fn gid_table_matches_firmware() {
        let res = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../firmware/src/res.rs")).unwrap();
        let line = res.lines().find(|l| l.contains("const GID_TBL_LEN")).expect("GID_TBL_LEN in firmware/src/res.rs");
        let v: usize = line.split('=').nth(1).unwrap().trim().trim_end_matches(';').parse().unwrap();
        assert_eq!(v, GID_TBL_LEN, "the firmware reports gid_tbl_len {v}; the tree must have as many gids files");
    }

    #[test]
    fn layout_refusals() {
        assert!(Layout::new(PathBuf::from("relative/dir"), 2).is_err());
        assert!(Layout::new(PathBuf::from("/x"), 0).is_err());
        assert!(Layout::new(PathBuf::from("/x"), 3).is_err());
        assert!(Layout::new(PathBuf::from("/x"), 256).is_err());
        let long = PathBuf::from(format!("/{}", "d".repeat(100)));
        assert!(Layout::new(long, 2).unwrap_err().contains("Unix socket"));
        let l = layout(2);
        assert!(l.nic(2).is_err());
        assert!(build_tree(&l, View::Nic(2), (1, 7)).is_err());
        assert_eq!(l.views(), vec![View::All, View::Nic(0), View::Nic(1)]);
    }

    #[test]
    fn cpu_masks() {
        assert_eq!(cpu_mask("0"), "00000001");
        assert_eq!(cpu_mask("0-1"), "00000003");
        assert_eq!(cpu_mask("0-3,8"), "0000010f");
        assert_eq!(cpu_mask("0-32"), "00000001,ffffffff");
        assert_eq!(cpu_mask("garbage"), "00000000");
    }

    #[test]
    fn tree_contents() {
        let l = layout(4);
        let t = build_tree(&l, View::All, (1, 7)).unwrap();
        assert_eq!(file_text(&t, "class/infiniband_verbs/abi_version"), Some("6\n"));
        for n in 0..4 {
            let uv = format!("class/infiniband_verbs/uverbs{n}");
            let ib = format!("class/infiniband/hematite{n}");
            assert_eq!(file_text(&t, &format!("{uv}/ibdev")), Some(format!("hematite{n}\n").as_str()));
            assert_eq!(file_text(&t, &format!("{uv}/dev")), Some("1:7\n"));
            assert_eq!(file_text(&t, &format!("{uv}/abi_version")), Some("1\n"));
            assert_eq!(file_text(&t, &format!("{ib}/node_type")), Some("1: CA\n"));
            let guid = Nic::new(n).unwrap().guid();
            assert_eq!(file_text(&t, &format!("{ib}/node_guid")).unwrap().trim_end(), guid);
            assert_eq!(file_text(&t, &format!("{ib}/sys_image_guid")).unwrap().trim_end(), guid);
            assert_eq!(
                file_text(&t, &format!("{ib}/hematite_backend")),
                Some(format!("sim:/run/hematite-test/nic{n}.sock\n").as_str())
            );
            // the device is a PCI function of domain 4d48 (bus n + 1) in the tree itself, its
            // bus listed in class/pci_bus as NCCL looks it up
            let bdf = format!("4d48:{:02x}:00.0", n + 1);
            let fdir = format!("devices/pci4d48:00/{bdf}");
            let root = l.view_dir(View::All);
            assert_eq!(t.get(Path::new(&format!("{ib}/device"))), Some(&Entry::Link(root.join(&fdir))));
            assert_eq!(file_text(&t, &format!("{fdir}/modalias")), Some(format!("hematite:n{n}\n").as_str()));
            assert_eq!(file_text(&t, &format!("{fdir}/vendor")), Some("0x484d\n"));
            assert_eq!(file_text(&t, &format!("{fdir}/device")), Some("0x0001\n"));
            assert_eq!(file_text(&t, &format!("{fdir}/class")), Some("0x020000\n"));
            assert!(matches!(file_text(&t, &format!("{fdir}/numa_node")), Some("0\n" | "-1\n")));
            assert_eq!(file_text(&t, &format!("{fdir}/max_link_width")), Some("16\n"));
            let bus = &bdf[..7];
            let bus_dir = root.join(format!("devices/pci4d48:00/pci_bus/{bus}"));
            assert_eq!(t.get(Path::new(&format!("class/pci_bus/{bus}"))), Some(&Entry::Link(bus_dir.clone())));
            // NCCL's lookup: /sys/class/pci_bus/<bus>/../../<bdf> is the function
            let mut p = PathBuf::new();
            for c in bus_dir.join("../..").join(&bdf).components() {
                match c {
                    std::path::Component::ParentDir => {
                        p.pop();
                    }
                    c => p.push(c),
                }
            }
            assert_eq!(p, root.join(&fdir));
            assert_eq!(file_text(&t, &format!("{ib}/ports/1/pkeys/0")), Some("0xffff\n"));
            for i in 0..GID_TBL_LEN {
                let g = parse_gid(file_text(&t, &format!("{ib}/ports/1/gids/{i}")).unwrap()).unwrap();
                if i == 0 {
                    assert_eq!(g, Nic::new(n).unwrap().gid0());
                    assert_eq!(Ipv4Addr::new(g[12], g[13], g[14], g[15]), Ipv4Addr::new(10, 77, 0, n as u8 + 1));
                } else if i == 1 {
                    assert_eq!(g, Nic::new(n).unwrap().gid1());
                    assert_eq!(
                        format_gid(&g),
                        format!("fe80:0000:0000:0000:0048:4dff:fe00:{:04x}", n + 1),
                        "link-local, modified EUI-64 of 02:48:4d:00:00:{:02x}",
                        n + 1
                    );
                } else {
                    assert_eq!(g, [0; 16]);
                }
                assert_eq!(file_text(&t, &format!("{ib}/ports/1/gid_attrs/types/{i}")), Some("RoCE v2\n"));
            }
            assert!(!t.contains_key(Path::new(&format!("{ib}/ports/1/gids/{GID_TBL_LEN}"))));
        }
        // every parent directory is present
        for p in t.keys() {
            if let Some(par) = p.parent().filter(|p| !p.as_os_str().is_empty()) {
                assert_eq!(t.get(par), Some(&Entry::Dir), "{}", par.display());
            }
        }
    }

    #[test]
    fn views_differ() {
        let l = layout(2);
        let all = build_tree(&l, View::All, (1, 7)).unwrap();
        let one = build_tree(&l, View::Nic(1), (1, 7)).unwrap();
        let names = |t: &Tree, dir: &str| -> Vec<String> {
            t.keys()
                .filter(|p| p.parent() == Some(Path::new(dir)))
                .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
                .collect()
        };
        assert_eq!(names(&all, "class/infiniband"), ["hematite0", "hematite1"]);
        assert_eq!(names(&one, "class/infiniband"), ["hematite1"]);
        assert_eq!(names(&one, "class/infiniband_verbs"), ["abi_version", "uverbs1"]);
        // the single view's files are the same as the full view's for that NIC; links into
        // the tree point into each view's own copy
        let (ra, r1) = (l.view_dir(View::All), l.view_dir(View::Nic(1)));
        for (p, e) in &one {
            let want = match e {
                Entry::Link(to) if to.starts_with(&r1) => Entry::Link(ra.join(to.strip_prefix(&r1).unwrap())),
                e => e.clone(),
            };
            assert_eq!(all.get(p), Some(&want), "{}", p.display());
        }
    }

    #[test]
    fn write_read_install() {
        let d = tmpdir("install");
        let sys = d.join("sys");
        let l = Layout::new(d.clone(), 2).unwrap();
        let t = build_tree(&l, View::All, (1, 7)).unwrap();
        assert!(install_tree(&sys, "all", &t).unwrap());
        assert_eq!(read_tree(&sys.join("all")).unwrap(), t);
        // the same tree again: nothing replaced
        let ino = std::fs::metadata(sys.join("all")).unwrap().ino();
        assert!(!install_tree(&sys, "all", &t).unwrap());
        assert_eq!(std::fs::metadata(sys.join("all")).unwrap().ino(), ino);
        // a different tree: exchanged, the old one retired to .old
        let t4 = build_tree(&Layout::new(d.clone(), 4).unwrap(), View::All, (1, 7)).unwrap();
        assert!(install_tree(&sys, "all", &t4).unwrap());
        assert_eq!(read_tree(&sys.join("all")).unwrap(), t4);
        let old: Vec<_> = std::fs::read_dir(sys.join(".old")).unwrap().collect();
        assert_eq!(old.len(), 1);
        assert_eq!(read_tree(&old[0].as_ref().unwrap().path()).unwrap(), t);
        // no temporary directories left behind
        let left: Vec<String> = std::fs::read_dir(&sys)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(".tmp"))
            .collect();
        assert!(left.is_empty(), "{left:?}");
        // refusal: the view path is a link or a file
        std::os::unix::fs::symlink("/sys", sys.join("nic0")).unwrap();
        let e = install_tree(&sys, "nic0", &t).unwrap_err();
        assert!(e.contains("not a directory"), "{e}");
        std::fs::write(sys.join("nic1"), "x").unwrap();
        assert!(install_tree(&sys, "nic1", &t).is_err());
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn full_is_char_device() {
        let (ma, mi) = char_rdev(Path::new("/dev/full")).unwrap();
        assert_eq!((ma, mi), (1, 7), "Linux's /dev/full is 1:7");
        assert!(char_rdev(Path::new("/")).is_err());
    }
}
