//! The switch: output-queued, shared buffer, strict priority, RED/ECN, PFC.

use crate::pcap::{write_pcapng, CapRecord, Dir};
use crate::pkt::{self, Pfc, ETHERTYPE_MAC_CONTROL};
use crate::rate::{LinkRate, Serializer, WireFormat};
use crate::red::EcnConfig;
use crate::rng::SplitMix64;
use crate::trace::{DepthTrace, TraceConfig};
use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::io::Write;
use std::path::Path;

/// Number of traffic classes (802.1Q priorities).
pub const CLASSES: usize = 8;

/// Priority-based flow control parameters (IEEE 802.1Qbb).
///
/// Per ingress port and lossless class the switch counts the bytes it holds that arrived on
/// that port in that class. Above `xoff_bytes` the class enters XOFF: a PFC frame with
/// `pause_quanta` for the class goes out of that ingress port toward the sender, and is
/// refreshed every `refresh_cycles` while the class stays in XOFF; when the count falls to
/// `xon_bytes` or below, a PFC frame with pause time 0 (resume) is sent. Lossless classes may use
/// `headroom_bytes` per (ingress, class) beyond the shared buffer when the shared buffer is full,
/// to absorb the bytes in flight until the sender stops (see [`pfc_headroom_bytes`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PfcConfig {
    /// Lossless classes (bit c = class c). Default: class 3.
    pub class_mask: u8,
    /// XOFF threshold in bytes per (ingress port, class). Default 256,000.
    pub xoff_bytes: u64,
    /// XON threshold in bytes (≤ `xoff_bytes`). Default 224,000.
    pub xon_bytes: u64,
    /// Headroom per (ingress port, lossless class) beyond the shared buffer. Default 64,000.
    pub headroom_bytes: u64,
    /// Pause time sent with XOFF, in quanta of 512 bit times at the port's rate. Default 0xFFFF.
    pub pause_quanta: u16,
    /// Refresh period of an XOFF in cycles; `None`: half the pause time at the port's rate.
    pub refresh_cycles: Option<u64>,
}

impl Default for PfcConfig {
    fn default() -> Self {
        PfcConfig {
            class_mask: 1 << 3,
            xoff_bytes: 256_000,
            xon_bytes: 224_000,
            headroom_bytes: 64_000,
            pause_quanta: 0xFFFF,
            refresh_cycles: None,
        }
    }
}

/// Headroom needed per (ingress, lossless class) so that PFC never drops: the bytes a sender at
/// `rate_mbps` can still put on the wire between the switch deciding XOFF and the sender
/// stopping. `round_trip_cycles` = 2 × one-way link delay + the sender's reaction time (from the
/// pause frame's arrival to its last frame started); `max_frame` = the largest frame (without
/// FCS). Counts: the round trip at line rate, one maximum frame the pause waits behind at the
/// switch's egress, one maximum frame the sender has started when it reacts, and the pause frame
/// itself, all in wire bytes (so it over-counts the buffered bytes slightly).
pub fn pfc_headroom_bytes(
    rate_mbps: u64,
    clk_mhz: u64,
    round_trip_cycles: u64,
    max_frame: usize,
    wire: WireFormat,
) -> u64 {
    let r = LinkRate { rate_mbps, clk_mhz };
    r.bytes_in(round_trip_cycles) + 1 + 2 * wire.wire_bytes(max_frame) + wire.wire_bytes(pkt::PFC_FRAME_LEN)
}

/// Switch parameters. [`SwitchConfig::new`] gives the defaults documented in
/// `docs/switch-model.md`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SwitchConfig {
    /// Clock in MHz: one [`Switch::step`] is one cycle of this clock.
    pub clk_mhz: u64,
    /// Link rate of each port in Mb/s; the length is the number of ports.
    pub port_rate_mbps: Vec<u64>,
    /// Per-frame wire cost (FCS, preamble, IFG, minimum size).
    pub wire: WireFormat,
    /// Shared buffer in bytes (frame bytes without FCS), across all output queues.
    pub buffer_bytes: u64,
    /// Optional static limit per output queue (port, class) in bytes.
    pub queue_limit_bytes: Option<u64>,
    /// Cycles from a frame's arrival until it may start leaving (0: the arrival cycle).
    pub latency_cycles: u64,
    /// Class of untagged IP frames by DSCP (values 0..=7). Default: DSCP 26 → 3 (Hematite's
    /// default data DSCP, the lossless class), DSCP 48 → 6 (CNPs), all others 0.
    pub dscp_class: [u8; 64],
    /// ECN marking; `None` disables it.
    pub ecn: Option<EcnConfig>,
    /// PFC; `None`: off (every class tail-drops).
    pub pfc: Option<PfcConfig>,
    /// PRNG seed (RED decisions).
    pub seed: u64,
    /// Queue-depth trace sampling.
    pub trace: TraceConfig,
    /// MAC of port p (source of its PFC frames) = `mac_base` + p.
    pub mac_base: u64,
}

impl SwitchConfig {
    /// `ports` ports at `rate_gbps` each, `clk_mhz` clock, defaults: 16 MB shared buffer, no
    /// queue limit, latency 0, default DSCP map, ECN per the HPCC DCQCN preset at this rate
    /// ([`EcnConfig::hpcc`]), PFC off, seed 1, default trace.
    pub fn new(ports: usize, rate_gbps: u64, clk_mhz: u64) -> SwitchConfig {
        SwitchConfig {
            clk_mhz,
            port_rate_mbps: vec![rate_gbps * 1000; ports],
            wire: WireFormat::default(),
            buffer_bytes: 16_000_000,
            queue_limit_bytes: None,
            latency_cycles: 0,
            dscp_class: default_dscp_class(),
            ecn: Some(EcnConfig::hpcc(rate_gbps)),
            pfc: None,
            seed: 1,
            trace: TraceConfig::default(),
            mac_base: 0x02_48_4D_53_00_00,
        }
    }

    /// Number of ports.
    pub fn ports(&self) -> usize {
        self.port_rate_mbps.len()
    }

    /// Time compression by `s`: every byte quantity (buffer, queue limit, Kmin, Kmax, XOFF, XON,
    /// headroom, trace step) and every time constant (latency, pause quanta sent, refresh
    /// period, trace interval) divided by `s` (times rounded down but kept ≥ 1 where 0 would
    /// change the meaning). Link rates are unchanged (bytes per cycle stay the same).
    pub fn scaled(&self, s: u64) -> SwitchConfig {
        let s = s.max(1);
        SwitchConfig {
            buffer_bytes: self.buffer_bytes / s,
            queue_limit_bytes: self.queue_limit_bytes.map(|q| q / s),
            latency_cycles: self.latency_cycles / s,
            ecn: self.ecn.map(|e| e.scaled(s)),
            pfc: self.pfc.map(|p| PfcConfig {
                xoff_bytes: p.xoff_bytes / s,
                xon_bytes: p.xon_bytes / s,
                headroom_bytes: p.headroom_bytes / s,
                pause_quanta: (p.pause_quanta as u64 / s).max(1) as u16,
                refresh_cycles: p.refresh_cycles.map(|r| (r / s).max(1)),
                ..p
            }),
            trace: TraceConfig {
                step_bytes: (self.trace.step_bytes / s).max(1),
                interval_cycles: (self.trace.interval_cycles / s).max(1),
                ..self.trace
            },
            ..self.clone()
        }
    }

    fn validate(&self) -> Result<(), ConfigError> {
        let bad = |s: &str| Err(ConfigError(s.to_string()));
        if self.ports() == 0 || self.ports() > 0xFFFF {
            return bad("ports must be 1..=65535");
        }
        if self.clk_mhz == 0 || self.clk_mhz > 1_000_000 {
            return bad("clk_mhz must be 1..=1,000,000");
        }
        if self.port_rate_mbps.iter().any(|&r| r == 0 || r > 100_000_000) {
            return bad("port rates must be 1..=100,000,000 Mb/s");
        }
        if self.buffer_bytes == 0 {
            return bad("buffer_bytes must be > 0");
        }
        if self.dscp_class.iter().any(|&c| c as usize >= CLASSES) {
            return bad("dscp_class entries must be 0..=7");
        }
        if let Some(e) = self.ecn {
            if e.kmin_bytes > e.kmax_bytes || e.pmax_ppm > 1_000_000 {
                return bad("ECN needs kmin <= kmax and pmax_ppm <= 1,000,000");
            }
        }
        if let Some(p) = self.pfc {
            if p.xon_bytes > p.xoff_bytes || p.pause_quanta == 0 || p.refresh_cycles == Some(0) {
                return bad("PFC needs xon <= xoff, pause_quanta > 0, refresh_cycles > 0");
            }
        }
        Ok(())
    }
}

/// The default DSCP → class map (26 → 3, 48 → 6, others 0).
pub fn default_dscp_class() -> [u8; 64] {
    let mut m = [0u8; 64];
    m[26] = 3;
    m[48] = 6;
    m
}

/// An invalid [`SwitchConfig`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError(pub String);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid switch configuration: {}", self.0)
    }
}

impl std::error::Error for ConfigError {}

/// Why the switch dropped a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropReason {
    /// Shorter than an Ethernet header (counted at the ingress port).
    Malformed,
    /// A MAC control frame other than PFC, e.g. 802.3x PAUSE (ingress).
    UnsupportedControl,
    /// Destination MAC not in the table (ingress).
    NoRoute,
    /// Shared buffer (and, for a lossless class, its headroom) full (egress).
    BufferFull,
    /// The output queue's static limit reached (egress).
    QueueLimit,
}

/// What [`Switch::rx`] did with a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RxVerdict {
    /// Queued at output `out` in `class`; `marked`: this switch set CE.
    Queued {
        /// Output port.
        out: usize,
        /// Traffic class.
        class: u8,
        /// ECN CE set by the switch.
        marked: bool,
    },
    /// A PFC frame, consumed: the port's output obeys it.
    Pfc(Pfc),
    /// Dropped.
    Dropped(DropReason),
}

/// Per-port counters. Ingress-side events count at the port the frame came in on, egress-side
/// ones at the output port.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PortCounters {
    /// Frames received on the port (everything, including PFC frames and drops).
    pub rx_frames: u64,
    /// Bytes received (frame bytes without FCS).
    pub rx_bytes: u64,
    /// Frames sent out of the port (data and the switch's own PFC frames).
    pub tx_frames: u64,
    /// Bytes sent (without FCS).
    pub tx_bytes: u64,
    /// Wire byte times sent (with FCS, preamble, IFG, padding).
    pub tx_wire_bytes: u64,
    /// Data frames sent per class.
    pub tx_class_frames: [u64; CLASSES],
    /// Data bytes sent per class.
    pub tx_class_bytes: [u64; CLASSES],
    /// Ingress: frames shorter than an Ethernet header.
    pub drop_malformed: u64,
    /// Ingress: unsupported MAC control frames.
    pub drop_unsupported_ctrl: u64,
    /// Ingress: unknown destination MAC.
    pub drop_no_route: u64,
    /// Egress: frames dropped because the buffer was full.
    pub drop_buffer: u64,
    /// Egress: frames dropped at the queue limit.
    pub drop_queue_limit: u64,
    /// Egress: bytes of the frames dropped for buffer or queue limit.
    pub drop_bytes: u64,
    /// Egress: frames this switch marked CE.
    pub ecn_marked: u64,
    /// Egress: queued frames that arrived already CE.
    pub ecn_ce_in: u64,
    /// PFC frames received on the port.
    pub pfc_rx: u64,
    /// PFC frames sent out of the port.
    pub pfc_tx: u64,
    /// Ingress: XOFF transitions per class (a PFC frame with a non-zero time was generated
    /// because the class crossed XOFF).
    pub xoff_sent: [u64; CLASSES],
    /// Ingress: XON transitions per class (a PFC frame with time 0 was generated).
    pub xon_sent: [u64; CLASSES],
    /// Ingress: XOFF refresh frames generated.
    pub pfc_refresh: u64,
    /// Egress: cycles each class of this output was paused by received PFC.
    pub paused_cycles: [u64; CLASSES],
    /// Ingress: cycles each class of this port was in XOFF state.
    pub xoff_cycles: [u64; CLASSES],
    /// Egress: peak bytes queued at this output (all classes).
    pub max_queue_bytes: u64,
    /// Ingress: peak bytes held per class that arrived on this port.
    pub max_ingress_bytes: [u64; CLASSES],
    /// Ingress: frames admitted into this port's PFC headroom.
    pub headroom_frames: u64,
}

#[derive(Debug, Clone)]
struct Entry {
    frame: Vec<u8>,
    ingress: usize,
    class: u8,
    ready_at: u64,
    headroom: bool,
}

#[derive(Debug, Clone)]
enum Cur {
    Data(Entry),
    Ctrl(Vec<u8>),
}

#[derive(Debug, Clone)]
struct Capture {
    snaplen: u32,
    max_frames: usize,
    missed: u64,
    recs: Vec<CapRecord>,
}

#[derive(Debug, Clone)]
struct Port {
    rate: LinkRate,
    ser: Serializer,
    mac: [u8; 6],
    // Egress.
    queues: [VecDeque<Entry>; CLASSES],
    qbytes: [u64; CLASSES],
    qtotal: u64,
    cur: Option<Cur>,
    ctrl: Option<Vec<u8>>,
    paused_until: [u64; CLASSES],
    tx_out: VecDeque<Vec<u8>>,
    trace: DepthTrace,
    // Ingress.
    ing_bytes: [u64; CLASSES],
    hdrm_bytes: [u64; CLASSES],
    xoff: u8,
    last_pause: u64,
    refresh: u64,
    cnt: PortCounters,
    cap: Option<Capture>,
}

/// The switch. See the crate documentation for the cycle convention.
#[derive(Debug, Clone)]
pub struct Switch {
    cfg: SwitchConfig,
    now: u64,
    ports: Vec<Port>,
    routes: HashMap<[u8; 6], usize>,
    rng: SplitMix64,
    shared_used: u64,
    headroom_used: u64,
    max_shared_used: u64,
    max_total_used: u64,
    buf_trace: DepthTrace,
}

impl Switch {
    /// A switch with empty queues and an empty MAC table at cycle 0.
    pub fn new(cfg: SwitchConfig) -> Result<Switch, ConfigError> {
        cfg.validate()?;
        let ports = (0..cfg.ports())
            .map(|p| {
                let rate = LinkRate { rate_mbps: cfg.port_rate_mbps[p], clk_mhz: cfg.clk_mhz };
                let refresh = cfg.pfc.map_or(1, |pf| {
                    pf.refresh_cycles
                        .unwrap_or((pkt::pause_cycles(pf.pause_quanta, rate.rate_mbps, rate.clk_mhz) / 2).max(1))
                });
                Port {
                    rate,
                    ser: Serializer::new(rate),
                    mac: pkt::mac(cfg.mac_base.wrapping_add(p as u64)),
                    queues: Default::default(),
                    qbytes: [0; CLASSES],
                    qtotal: 0,
                    cur: None,
                    ctrl: None,
                    paused_until: [0; CLASSES],
                    tx_out: VecDeque::new(),
                    trace: DepthTrace::new(cfg.trace),
                    ing_bytes: [0; CLASSES],
                    hdrm_bytes: [0; CLASSES],
                    xoff: 0,
                    last_pause: 0,
                    refresh,
                    cnt: PortCounters::default(),
                    cap: None,
                }
            })
            .collect();
        Ok(Switch {
            rng: SplitMix64::new(cfg.seed),
            buf_trace: DepthTrace::new(cfg.trace),
            cfg,
            now: 0,
            ports,
            routes: HashMap::new(),
            shared_used: 0,
            headroom_used: 0,
            max_shared_used: 0,
            max_total_used: 0,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &SwitchConfig {
        &self.cfg
    }

    /// Number of ports.
    pub fn ports(&self) -> usize {
        self.ports.len()
    }

    /// The current cycle (frames given to [`rx`](Self::rx) now arrive in this cycle).
    pub fn now(&self) -> u64 {
        self.now
    }

    /// Forward frames for destination `mac` to `port` (replaces an earlier entry).
    pub fn add_route(&mut self, mac: [u8; 6], port: usize) {
        assert!(port < self.ports.len(), "port {port} out of range");
        self.routes.insert(mac, port);
    }

    /// [`add_route`](Self::add_route) with the MAC as a `u64` (as in `hematite_model`).
    pub fn add_route_u64(&mut self, mac: u64, port: usize) {
        self.add_route(pkt::mac(mac), port)
    }

    /// The MAC address of `port` (source of its PFC frames).
    pub fn port_mac(&self, port: usize) -> [u8; 6] {
        self.ports[port].mac
    }

    /// The link rate of `port`.
    pub fn port_rate(&self, port: usize) -> LinkRate {
        self.ports[port].rate
    }

    /// Starts capturing frames of `port` in both directions (the first `snaplen` bytes of
    /// each, kept in memory until written).
    pub fn enable_capture(&mut self, port: usize, snaplen: u32) {
        self.enable_capture_bounded(port, snaplen, usize::MAX);
    }

    /// [`enable_capture`](Self::enable_capture) that keeps at most `max_frames` frames (the
    /// first ones); later frames are only counted ([`capture_missed`](Self::capture_missed)).
    pub fn enable_capture_bounded(&mut self, port: usize, snaplen: u32, max_frames: usize) {
        self.ports[port].cap = Some(Capture { snaplen: snaplen.max(1), max_frames, missed: 0, recs: Vec::new() });
    }

    /// Frames `port` did not capture because its capture was full.
    pub fn capture_missed(&self, port: usize) -> u64 {
        self.ports[port].cap.as_ref().map_or(0, |c| c.missed)
    }

    /// The frames captured on `port` so far.
    pub fn captured(&self, port: usize) -> &[CapRecord] {
        self.ports[port].cap.as_ref().map_or(&[], |c| &c.recs)
    }

    /// Writes the capture of `port` as pcapng (see [`crate::pcap`]); an empty capture if
    /// capturing was not enabled.
    pub fn write_pcap(&self, port: usize, path: &Path) -> std::io::Result<()> {
        let snap = self.ports[port].cap.as_ref().map_or(65535, |c| c.snaplen);
        write_pcapng(path, &format!("sw-p{port}"), self.cfg.clk_mhz, snap, self.captured(port))
    }

    fn capture(&mut self, port: usize, dir: Dir, frame: &[u8]) {
        let now = self.now;
        if let Some(c) = &mut self.ports[port].cap {
            if c.recs.len() >= c.max_frames {
                c.missed += 1;
                return;
            }
            let n = frame.len().min(c.snaplen as usize);
            c.recs.push(CapRecord { cycle: now, dir, orig_len: frame.len() as u32, data: frame[..n].to_vec() });
        }
    }

    /// Class of a frame: the 802.1Q PCP if tagged, else the DSCP map for IP, else 0.
    pub fn class_of(&self, frame: &[u8]) -> u8 {
        match pkt::parse_l2(frame) {
            Some(l2) => match l2.pcp {
                Some(p) => p & 7,
                None => pkt::dscp(frame).map_or(0, |d| self.cfg.dscp_class[d as usize & 63]),
            },
            None => 0,
        }
    }

    fn lossless(&self, class: u8) -> bool {
        self.cfg.pfc.is_some_and(|p| p.class_mask >> class & 1 != 0)
    }

    /// A whole frame (without FCS) whose last byte arrived on `port` in the current cycle.
    ///
    /// PFC frames are consumed and pause the port's output; other MAC control frames and runts
    /// are dropped; a frame for a MAC in the table is admitted to the output queue of its class
    /// (or tail-dropped), ECN-marked per RED on the queue depth it found, and may start leaving
    /// in cycle now + `latency_cycles`. Panics if `port` is out of range.
    pub fn rx(&mut self, port: usize, mut frame: Vec<u8>) -> RxVerdict {
        assert!(port < self.ports.len(), "port {port} out of range");
        let now = self.now;
        let len = frame.len() as u64;
        {
            let c = &mut self.ports[port].cnt;
            c.rx_frames += 1;
            c.rx_bytes += len;
        }
        self.capture(port, Dir::In, &frame);
        let Some(l2) = pkt::parse_l2(&frame) else {
            self.ports[port].cnt.drop_malformed += 1;
            return RxVerdict::Dropped(DropReason::Malformed);
        };
        if l2.ethertype == ETHERTYPE_MAC_CONTROL {
            let pfc = pkt::parse_pfc(&frame).filter(|_| l2.pcp.is_none());
            let Some(pfc) = pfc else {
                self.ports[port].cnt.drop_unsupported_ctrl += 1;
                return RxVerdict::Dropped(DropReason::UnsupportedControl);
            };
            let p = &mut self.ports[port];
            p.cnt.pfc_rx += 1;
            for c in 0..CLASSES {
                if pfc.class_enable >> c & 1 != 0 {
                    p.paused_until[c] = now + pkt::pause_cycles(pfc.quanta[c], p.rate.rate_mbps, p.rate.clk_mhz);
                }
            }
            return RxVerdict::Pfc(pfc);
        }
        let Some(&out) = self.routes.get(&l2.dst) else {
            self.ports[port].cnt.drop_no_route += 1;
            return RxVerdict::Dropped(DropReason::NoRoute);
        };
        let class = self.class_of(&frame);
        let ci = class as usize;
        // Admission.
        let q = self.ports[out].qbytes[ci];
        if self.cfg.queue_limit_bytes.is_some_and(|lim| q + len > lim) {
            let c = &mut self.ports[out].cnt;
            c.drop_queue_limit += 1;
            c.drop_bytes += len;
            return RxVerdict::Dropped(DropReason::QueueLimit);
        }
        let headroom = if self.shared_used + len <= self.cfg.buffer_bytes {
            false
        } else if self.lossless(class)
            && self.ports[port].hdrm_bytes[ci] + len <= self.cfg.pfc.map_or(0, |p| p.headroom_bytes)
        {
            true
        } else {
            let c = &mut self.ports[out].cnt;
            c.drop_buffer += 1;
            c.drop_bytes += len;
            return RxVerdict::Dropped(DropReason::BufferFull);
        };
        // ECN marking on the depth the frame finds.
        let mut marked = false;
        if let Some(e) = self.cfg.ecn.filter(|e| e.class_mask >> class & 1 != 0) {
            match pkt::ecn(&frame) {
                Some(pkt::ECN_ECT0) | Some(pkt::ECN_ECT1) => {
                    let mark = if e.needs_draw(q) { e.decide(q, self.rng.next_u32()) } else { q > e.kmax_bytes };
                    if mark {
                        marked = pkt::mark_ce(&mut frame) == pkt::MarkOutcome::Marked;
                    }
                }
                Some(pkt::ECN_CE) => self.ports[out].cnt.ecn_ce_in += 1,
                _ => {}
            }
        }
        if marked {
            self.ports[out].cnt.ecn_marked += 1;
        }
        // Enqueue.
        if headroom {
            self.headroom_used += len;
            let p = &mut self.ports[port];
            p.hdrm_bytes[ci] += len;
            p.cnt.headroom_frames += 1;
        } else {
            self.shared_used += len;
        }
        self.max_shared_used = self.max_shared_used.max(self.shared_used);
        let total = self.shared_used + self.headroom_used;
        self.max_total_used = self.max_total_used.max(total);
        self.buf_trace.observe(now, total);
        {
            let p = &mut self.ports[port];
            p.ing_bytes[ci] += len;
            p.cnt.max_ingress_bytes[ci] = p.cnt.max_ingress_bytes[ci].max(p.ing_bytes[ci]);
        }
        let ready_at = now + self.cfg.latency_cycles;
        let o = &mut self.ports[out];
        o.qbytes[ci] += len;
        o.qtotal += len;
        o.cnt.max_queue_bytes = o.cnt.max_queue_bytes.max(o.qtotal);
        o.trace.observe(now, o.qtotal);
        o.queues[ci].push_back(Entry { frame, ingress: port, class, ready_at, headroom });
        RxVerdict::Queued { out, class, marked }
    }

    /// [`rx`](Self::rx) of a borrowed frame (copies it).
    pub fn rx_slice(&mut self, port: usize, frame: &[u8]) -> RxVerdict {
        self.rx(port, frame.to_vec())
    }

    /// The next frame whose last byte left `port` (in an earlier [`step`](Self::step)).
    pub fn poll_tx(&mut self, port: usize) -> Option<Vec<u8>> {
        self.ports[port].tx_out.pop_front()
    }

    /// Ends the current cycle: PFC decisions, then serialisation on every output (frames that
    /// finish in this cycle become available from [`poll_tx`](Self::poll_tx)), then per-cycle
    /// accounting; the cycle counter advances.
    pub fn step(&mut self) {
        let now = self.now;
        if self.cfg.pfc.is_some() {
            for p in 0..self.ports.len() {
                self.pfc_decide(p);
            }
        }
        for p in 0..self.ports.len() {
            self.egress(p);
        }
        for port in &mut self.ports {
            for c in 0..CLASSES {
                if port.paused_until[c] > now {
                    port.cnt.paused_cycles[c] += 1;
                }
                if port.xoff >> c & 1 != 0 {
                    port.cnt.xoff_cycles[c] += 1;
                }
            }
            port.trace.tick(now, port.qtotal);
        }
        self.buf_trace.tick(now, self.shared_used + self.headroom_used);
        self.now += 1;
    }

    fn pfc_decide(&mut self, p: usize) {
        let Some(cfg) = self.cfg.pfc else { return };
        let now = self.now;
        let port = &mut self.ports[p];
        let (mut on, mut off) = (0u8, 0u8);
        for c in 0..CLASSES {
            let bit = 1u8 << c;
            if cfg.class_mask & bit == 0 {
                continue;
            }
            if port.xoff & bit != 0 {
                if port.ing_bytes[c] <= cfg.xon_bytes {
                    off |= bit;
                }
            } else if port.ing_bytes[c] > cfg.xoff_bytes {
                on |= bit;
            }
        }
        let refresh = port.xoff & !off != 0 && now >= port.last_pause + port.refresh;
        if on | off == 0 && !refresh {
            return;
        }
        if on | off == 0 {
            port.cnt.pfc_refresh += 1;
        }
        port.xoff = (port.xoff | on) & !off;
        let mut pfc = Pfc { class_enable: port.xoff | off, quanta: [0; 8] };
        for c in 0..CLASSES {
            if port.xoff >> c & 1 != 0 {
                pfc.quanta[c] = cfg.pause_quanta;
            }
            if on >> c & 1 != 0 {
                port.cnt.xoff_sent[c] += 1;
            }
            if off >> c & 1 != 0 {
                port.cnt.xon_sent[c] += 1;
            }
        }
        // A newer decision replaces a PFC frame that has not started yet.
        port.ctrl = Some(pkt::build_pfc(port.mac, &pfc));
        port.last_pause = now;
    }

    /// Starts the next frame on output `p`: a pending PFC frame first, then the highest class
    /// that is not paused and whose head is ready.
    fn start_next(&mut self, p: usize) -> bool {
        let now = self.now;
        let wire = self.cfg.wire;
        let port = &mut self.ports[p];
        if let Some(f) = port.ctrl.take() {
            port.ser.start(wire.wire_bytes(f.len()));
            port.cur = Some(Cur::Ctrl(f));
            return true;
        }
        for c in (0..CLASSES).rev() {
            if port.paused_until[c] > now {
                continue;
            }
            if port.queues[c].front().is_some_and(|e| e.ready_at <= now) {
                let e = port.queues[c].pop_front().expect("front exists");
                port.ser.start(wire.wire_bytes(e.frame.len()));
                port.cur = Some(Cur::Data(e));
                return true;
            }
        }
        false
    }

    fn egress(&mut self, p: usize) {
        if self.ports[p].cur.is_none() && !self.start_next(p) {
            self.ports[p].ser.idle();
            return;
        }
        self.ports[p].ser.credit();
        while self.ports[p].ser.finish() {
            self.depart(p);
            if !self.start_next(p) {
                self.ports[p].ser.idle();
                break;
            }
        }
    }

    fn depart(&mut self, p: usize) {
        let now = self.now;
        let wire = self.cfg.wire;
        let Some(cur) = self.ports[p].cur.take() else { return };
        let frame = match cur {
            Cur::Ctrl(f) => {
                self.ports[p].cnt.pfc_tx += 1;
                f
            }
            Cur::Data(e) => {
                let len = e.frame.len() as u64;
                let ci = e.class as usize;
                if e.headroom {
                    self.headroom_used -= len;
                    self.ports[e.ingress].hdrm_bytes[ci] -= len;
                } else {
                    self.shared_used -= len;
                }
                self.ports[e.ingress].ing_bytes[ci] -= len;
                self.buf_trace.observe(now, self.shared_used + self.headroom_used);
                let port = &mut self.ports[p];
                port.qbytes[ci] -= len;
                port.qtotal -= len;
                port.trace.observe(now, port.qtotal);
                port.cnt.tx_class_frames[ci] += 1;
                port.cnt.tx_class_bytes[ci] += len;
                e.frame
            }
        };
        let c = &mut self.ports[p].cnt;
        c.tx_frames += 1;
        c.tx_bytes += frame.len() as u64;
        c.tx_wire_bytes += wire.wire_bytes(frame.len());
        self.capture(p, Dir::Out, &frame);
        self.ports[p].tx_out.push_back(frame);
    }

    /// Counters of `port`.
    pub fn counters(&self, port: usize) -> &PortCounters {
        &self.ports[port].cnt
    }

    /// Bytes queued at output `port` in `class` (including a frame being serialised).
    pub fn queue_bytes(&self, port: usize, class: u8) -> u64 {
        self.ports[port].qbytes[class as usize & 7]
    }

    /// Frames queued at output `port` in `class` (excluding a frame being serialised).
    pub fn queue_frames(&self, port: usize, class: u8) -> usize {
        self.ports[port].queues[class as usize & 7].len()
    }

    /// Bytes queued at output `port`, all classes.
    pub fn port_queue_bytes(&self, port: usize) -> u64 {
        self.ports[port].qtotal
    }

    /// Bytes held that arrived on `port` in `class` (the PFC count).
    pub fn ingress_bytes(&self, port: usize, class: u8) -> u64 {
        self.ports[port].ing_bytes[class as usize & 7]
    }

    /// Classes of ingress `port` in XOFF state (bit c = class c).
    pub fn xoff_state(&self, port: usize) -> u8 {
        self.ports[port].xoff
    }

    /// Whether output `port` is paused for `class` by a received PFC frame in the current cycle.
    pub fn is_paused(&self, port: usize, class: u8) -> bool {
        self.ports[port].paused_until[class as usize & 7] > self.now
    }

    /// Shared-buffer bytes in use.
    pub fn shared_used(&self) -> u64 {
        self.shared_used
    }

    /// Headroom bytes in use (all ports).
    pub fn headroom_used(&self) -> u64 {
        self.headroom_used
    }

    /// Peak shared-buffer use, and peak total (shared + headroom) use.
    pub fn max_buffer_used(&self) -> (u64, u64) {
        (self.max_shared_used, self.max_total_used)
    }

    /// Nothing queued, nothing being sent, no PFC frame pending, nothing left to poll.
    pub fn is_idle(&self) -> bool {
        self.shared_used + self.headroom_used == 0
            && self.ports.iter().all(|p| p.cur.is_none() && p.ctrl.is_none() && p.tx_out.is_empty())
    }

    /// Queue-depth trace of output `port` (bytes, all classes).
    pub fn depth_trace(&self, port: usize) -> &DepthTrace {
        &self.ports[port].trace
    }

    /// Trace of the total buffer use (shared + headroom).
    pub fn buffer_trace(&self) -> &DepthTrace {
        &self.buf_trace
    }

    /// Writes every port's depth trace and the buffer trace as CSV:
    /// `queue,cycle,time_ns,bytes` with `queue` = `p0`, `p1`, … or `buffer`.
    pub fn write_depth_csv<W: Write>(&self, mut w: W) -> std::io::Result<()> {
        writeln!(w, "queue,cycle,time_ns,bytes")?;
        let ns = |c: u64| ((c as u128 * 1000) / self.cfg.clk_mhz as u128) as u64;
        for (i, p) in self.ports.iter().enumerate() {
            for &(c, b) in p.trace.samples() {
                writeln!(w, "p{i},{c},{},{b}", ns(c))?;
            }
        }
        for &(c, b) in self.buf_trace.samples() {
            writeln!(w, "buffer,{c},{},{b}", ns(c))?;
        }
        Ok(())
    }

    /// [`write_depth_csv`](Self::write_depth_csv) to a file.
    pub fn write_depth_csv_file(&self, path: &Path) -> std::io::Result<()> {
        let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
        self.write_depth_csv(&mut f)?;
        f.flush()
    }
}
