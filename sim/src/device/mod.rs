//! The simulated device process (`hematite-sim device`): the Verilated NIC (transport engine +
//! control core running the firmware image) served to one driver client at a time over the
//! protocol of `hostdrv::simproto`, with its Ethernet port on a datagram wire.
//!
//! * BAR0 (128 KiB): the engine's register block at 0x0_0000, the control core's host port
//!   (mailbox, core control, IMEM window) at 0x1_0000. MMIO requests become AXI4-Lite accesses,
//!   one at a time, in arrival order.
//! * DMA: the engine's AXI4 master reaches the client's memory inside the windows the client
//!   mapped (IOVA -> client VA), through the client's `/proc/PID/mem`. Anything outside is
//!   refused (SLVERR to the engine, counted) like an IOMMU fault.
//! * Interrupts: the engine's interrupt messages (vector 0..15) signal the client's eventfds.
//! * Wire: one Ethernet frame per datagram (qemu `-netdev dgram` framing), over AF_UNIX
//!   datagram sockets (back-pressured: a full peer stalls our MAC, nothing is dropped) or UDP.
//!   ARP requests and IPv6 Neighbor Solicitations for our addresses are answered here; every
//!   frame can go to a pcap with simulated-time stamps (4 ns per cycle, the nominal 250 MHz
//!   clock).
//! * A client that disconnects (or dies) loses its DMA windows at once and the function is reset
//!   (as vfio-pci does when a device is released): every QP, CQ, MR and PD is gone and the
//!   firmware restarts, so the next client finds a clean device.
//! * Idle: after `idle_after` cycles without any activity the process sleeps in poll(2) and
//!   simulates `idle_slice` cycles per wakeup, so timers keep running at a low cost.
//!
//! This file holds the configuration, the counters, the process's state ([`SimNic`]), function
//! reset and the clock loop ([`SimNic::run`]); the roles it drives are in
//!
//! * `client`: the driver connection and its requests, client loss, interrupts;
//! * `iommu`: the DMA windows and the client's memory behind the engine's AXI4 master;
//! * `wire`: the Ethernet port (socket, receive buffer, transmit backlog, loopback) and the
//!   wire faults;
//! * `neigh`: ARP and IPv6 neighbour discovery answered by the process;
//! * `pcap`: the `--pcap` capture (the model crate's pcap writer, simulated-time stamps);
//! * `trace`: the `--trace` waveform window (FST, same time axis as the pcap).

mod client;
mod iommu;
mod neigh;
mod pcap;
pub mod stats;
mod trace;
mod wire;

pub use trace::{TraceTrigger, TraceWhen, TraceWindow};

pub use wire::{after_bth_span, WireAddr, REORDER_HOLD_CYCLES, RX_BUF_BYTES};

use client::{Client, Mmio, Refused};
use iommu::{ClientMem, Iommu};
use neigh::ArpWait;
use pcap::Pcap;
use trace::Trace;
use wire::Wire;

use crate::dma::MemCfg;
use crate::eng::Engine;
use crate::Rng;
use hostdrv::simproto::{self as p, Rep, Req};
use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// BAR0 size (map hm_bar of regs/hematite.rdl: the engine's block, then the core's port).
pub const BAR0_SIZE: u64 = hematite_abi::regs::HM_BAR_CTRL as u64 + hematite_abi::regs::HM_BAR_CTRL_BYTES as u64;
/// Offset of the control core's host port in BAR0.
pub const FW_PORT_BASE: u64 = hematite_abi::regs::HM_BAR_CTRL as u64;
/// Interrupt vectors (the engine's CQ contexts take vectors 0..15).
pub const NUM_IRQS: u32 = 16;
/// Nominal core clock (Hz): simulated time = cycles / this.
pub const CLOCK_HZ: u64 = 250_000_000;

/// How the device process is set up.
#[derive(Debug, Clone)]
pub struct DevConfig {
    /// Where drivers connect.
    pub socket: PathBuf,
    /// Our end of the wire and the peer's.
    pub wire_local: WireAddr,
    pub wire_peer: WireAddr,
    /// The port's MAC address and IPv4 address (host order).
    pub mac: u64,
    pub ipv4: u32,
    /// Write every frame here.
    pub pcap: Option<PathBuf>,
    /// Write a waveform of these cycles (the waveform build only).
    pub trace: Option<TraceWindow>,
    /// Keep the port's counters as files here (`--counters`, stats.rs).
    pub counters: Option<PathBuf>,
    /// Firmware image (32-bit words).
    pub image: Vec<u32>,
    /// Probability of dropping each transmitted RoCE frame (`--loss`).
    pub loss: f64,
    /// Probability of dropping each received RoCE frame before the engine sees it
    /// (`--rx-loss`; it is still written to the pcap).
    pub rx_loss: f64,
    /// Wire faults on transmitted RoCE frames, each a probability per frame and exclusive of
    /// the others and of `loss` (one draw decides): `dup` sends the frame twice, `reorder`
    /// holds it back until 1 to 3 later frames went out (or `REORDER_HOLD_CYCLES` passed),
    /// `corrupt` flips one bit after the BTH (covered by the ICRC, so the receiver's RX path
    /// drops the frame on its ICRC check).
    pub dup: f64,
    pub reorder: f64,
    pub corrupt: f64,
    /// Seed of the fault generator (`--seed`).
    pub seed: u64,
    /// Cycles without activity before the process sleeps between slices.
    pub idle_after: u64,
    /// Cycles simulated per wakeup while idle.
    pub idle_slice: u64,
    /// Milliseconds slept per wakeup while idle.
    pub idle_sleep_ms: i32,
    /// Stop after this many cycles (tests, benchmarks); 0 = run until killed.
    pub max_cycles: u64,
    /// Print a line per client event on stderr.
    pub verbose: bool,
}

impl DevConfig {
    /// Defaults for everything but the addresses.
    pub fn new(socket: PathBuf, wire_local: WireAddr, wire_peer: WireAddr, mac: u64, ipv4: u32, image: Vec<u32>) -> DevConfig {
        DevConfig {
            socket,
            wire_local,
            wire_peer,
            mac,
            ipv4,
            pcap: None,
            trace: None,
            counters: None,
            image,
            loss: 0.0,
            rx_loss: 0.0,
            dup: 0.0,
            reorder: 0.0,
            corrupt: 0.0,
            seed: 1,
            idle_after: 2_000_000,
            idle_slice: 100,
            idle_sleep_ms: 50,
            max_cycles: 0,
            verbose: false,
        }
    }
}

static STOP: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

extern "C" fn on_term(_: libc::c_int) {
    STOP.store(true, std::sync::atomic::Ordering::SeqCst);
}

/// SIGTERM / SIGINT end [`SimNic::run`] cleanly (pcap flushed, socket files removed).
pub fn install_stop_handler() {
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGTERM, on_term as *const () as libc::sighandler_t);
        libc::signal(libc::SIGINT, on_term as *const () as libc::sighandler_t);
    }
}

/// Counters the device process keeps.
#[derive(Debug, Default, Clone)]
pub struct DevCounters {
    pub frames_tx: u64,
    pub frames_rx: u64,
    pub frames_lost: u64,
    /// Received RoCE frames dropped by `rx_loss`.
    pub frames_lost_rx: u64,
    /// Received frames dropped because the port's receive buffer (`RX_BUF_BYTES`) was full.
    pub rx_buf_drops: u64,
    /// Transmitted RoCE frames dropped by `loss` (also in `frames_lost`).
    pub fault_lost: u64,
    /// Transmitted RoCE frames sent twice by `dup`.
    pub fault_dup: u64,
    /// Transmitted RoCE frames held back and sent after later ones by `reorder`.
    pub fault_reordered: u64,
    /// Transmitted RoCE frames sent with one bit flipped by `corrupt`.
    pub fault_corrupted: u64,
    /// Frames to the port's own MAC, looped back into its receive path.
    pub frames_looped: u64,
    pub arp_replies: u64,
    /// Neighbor Advertisements sent for the port's IPv6 link-local address.
    pub nd_replies: u64,
    /// Frames the slow path (ARP, ND) took off the wire, and those it sent.
    pub slow_rx: u64,
    pub slow_tx: u64,
    pub mmio_errors: u64,
    pub clients: u64,
    pub resets: u64,
    /// Connections closed at once because the peer's uid is not the device process's.
    pub refused_uid: u64,
    /// Interrupts not delivered because the client's eventfd (or its writer) was full.
    pub irqs_lost: u64,
    /// Control-core traps (each ends the client's session and resets the function).
    pub traps: u64,
}

/// The device process's state.
pub struct SimNic {
    cfg: DevConfig,
    eng: Engine,
    iommu: Arc<Mutex<Iommu>>,
    listener: OwnedFd,
    client: Option<Client>,
    /// Connections refused while a client is attached, waiting for their HELLO.
    refused: Vec<Refused>,
    wire: Wire,
    pcap: Option<Pcap>,
    trace: Trace,
    mmio: VecDeque<Mmio>,
    /// The counter sampling's register accesses (stats.rs): they go only when no client
    /// access waits, so a sample never delays a doorbell by more than one read.
    stat_mmio: VecDeque<Mmio>,
    in_flight: Option<Mmio>,
    irq_fds: HashMap<u8, Arc<File>>,
    tx_backlog: VecDeque<Vec<u8>>,
    /// The port's receive buffer: frames read from the wire that the MAC has not taken yet,
    /// and their bytes.
    rx_buf: VecDeque<Vec<u8>>,
    rx_buf_bytes: usize,
    /// Frames held back by `reorder`: (frame, later frames still to send before it, cycle
    /// it was held at).
    held: VecDeque<(Vec<u8>, u32, u64)>,
    arp: HashMap<u32, u64>,
    arp_wait: Vec<ArpWait>,
    rng: Rng,
    /// Cycles of earlier engine instances (before resets).
    cycle_base: u64,
    last_activity: u64,
    last_beats: u64,
    pub counters: DevCounters,
    /// The engine's counters, sampled into files.
    pub stats: stats::Stats,
}

/// The engine, booted; with a shadow model `shadow` cycles behind for a triggered waveform.
fn new_engine(image: &[u32], iommu: &Arc<Mutex<Iommu>>, shadow: Option<usize>) -> Result<Engine, String> {
    let cfg = MemCfg { latency: 100, ..MemCfg::default() };
    let mut eng = match shadow {
        Some(d) => Engine::with_shadow(cfg, d),
        None => Engine::new(cfg),
    };
    eng.mem.ext = Some(Box::new(ClientMem(iommu.clone())));
    crate::fw::boot(&mut eng, image)?;
    Ok(eng)
}

impl SimNic {
    /// Builds the NIC, boots the firmware, opens the socket and the wire.
    pub fn new(cfg: DevConfig) -> Result<SimNic, String> {
        // the waveform window first: a refused one leaves no socket behind
        let trace = Trace::new(cfg.trace.clone())?;
        let iommu = Arc::new(Mutex::new(Iommu::default()));
        let eng = new_engine(&cfg.image, &iommu, trace.shadow_delay())?;
        let _ = std::fs::remove_file(&cfg.socket);
        let listener = p::listen(&cfg.socket).map_err(|e| e.to_string())?;
        let wire = Wire::open(&cfg.wire_local, &cfg.wire_peer)?;
        let pcap = match &cfg.pcap {
            Some(pth) => Some(Pcap::create(pth)?),
            None => None,
        };
        let rng = Rng::new(cfg.seed);
        let stats = stats::Stats::new(cfg.counters.clone())?;
        Ok(SimNic {
            cfg,
            eng,
            iommu,
            listener,
            client: None,
            refused: Vec::new(),
            wire,
            pcap,
            trace,
            mmio: VecDeque::new(),
            stat_mmio: VecDeque::new(),
            in_flight: None,
            irq_fds: HashMap::new(),
            tx_backlog: VecDeque::new(),
            rx_buf: VecDeque::new(),
            rx_buf_bytes: 0,
            held: VecDeque::new(),
            arp: HashMap::new(),
            arp_wait: Vec::new(),
            rng,
            cycle_base: 0,
            last_activity: 0,
            last_beats: 0,
            counters: DevCounters::default(),
            stats,
        })
    }

    /// Cycles simulated since the process started.
    pub fn cycles(&self) -> u64 {
        self.cycle_base + self.eng.cycle()
    }

    fn log(&self, s: &str) {
        if self.cfg.verbose {
            eprintln!("hematite-sim device {}: {s}", self.cfg.socket.display());
        }
    }

    /// Function reset: a new engine (power-on state), the firmware booted again. DMA windows
    /// stay (they belong to the IOMMU, not the function).
    /// Register reads (and non-posted writes) still queued or in flight are answered with
    /// ECANCELED: their transactions are discarded with the old engine.
    fn reset(&mut self) -> Result<(), String> {
        let now = self.cycles();
        self.trace.cut(&mut self.eng, now, "function reset", false);
        let cancelled: Vec<Req> = self.in_flight.take().into_iter().chain(self.mmio.drain(..)).filter_map(|m| m.reply_to).collect();
        self.stat_mmio.clear();
        for q in cancelled {
            self.reply(Rep::to(&q, -libc::ECANCELED));
        }
        // the counters as they stand, before the reset clears them (a sample under way was
        // among the cancelled accesses): an access already on the BAR finishes first
        for _ in 0..1000 {
            if self.eng.lite_idle(crate::eng::Port::Bar) {
                break;
            }
            self.clock();
        }
        let idle = self.eng.lite_idle(crate::eng::Port::Bar);
        let _ = self.eng.lite_take(crate::eng::Port::Bar);
        self.stats.in_progress = false;
        if idle {
            self.final_sample();
        } else {
            eprintln!("hematite-sim device: the register BAR stayed busy; the counters are not sampled before the reset");
        }
        self.cycle_base += self.eng.cycle();
        let r = new_engine(&self.cfg.image, &self.iommu, self.trace.shadow_delay());
        self.eng = r?;
        self.tx_backlog.clear();
        self.rx_buf.clear();
        self.rx_buf_bytes = 0;
        self.held.clear();
        self.stats.reset();
        self.counters.resets += 1;
        Ok(())
    }

    /// One clock, with the MMIO queue advanced.
    fn clock(&mut self) {
        if let Some(m) = &self.in_flight {
            if let Some((v, ok)) = self.eng.lite_take(m.port) {
                let mut m = self.in_flight.take().unwrap();
                let now = self.cycles();
                // a WAIT32 whose register has not changed reads again after a gap, ahead of every
                // later access (they are ordered after it)
                let again = match &mut m.wait {
                    Some(w) if ok && (v ^ w.cmp) & w.mask == 0 && now < w.deadline => {
                        w.not_before = now + hostdrv::simproto::WAIT_GAP_CYCLES;
                        true
                    }
                    _ => false,
                };
                if again {
                    self.mmio.push_front(m);
                } else {
                    match m.reply_to {
                        Some(r) => {
                            let mut rep = Rep::to(&r, if ok { 0 } else { -libc::EFAULT });
                            rep.a = v as u64;
                            if let Some(w) = &m.wait {
                                rep.b = ((v ^ w.cmp) & w.mask != 0) as u64;
                            }
                            self.reply(rep);
                        }
                        None => match m.counter {
                            Some(stats::Tag::Cnt(i)) => {
                                if self.stats.arrived(i as usize, ok.then_some(v)) {
                                    self.write_stats();
                                }
                            }
                            Some(stats::Tag::QpSel(q)) => {
                                // still copying: ask again before the QPC reads queued behind
                                if ok && v >> 31 != 0 {
                                    self.stat_mmio.push_front(Mmio { port: crate::eng::Port::Bar, op: crate::eng::LiteOp::Read { addr: hematite_abi::regs::HM_REG_QPC_SEL as u16 }, reply_to: None, counter: Some(stats::Tag::QpSel(q)), wait: None, push: None });
                                }
                            }
                            Some(stats::Tag::Qp(q, k)) => {
                                let now = self.cycles();
                                if let Err(e) = self.stats.qp_arrived(q, k, if ok { v } else { 0 }, now) {
                                    eprintln!("hematite-sim device: counter files: {e}");
                                }
                            }
                            None => {
                                if !ok {
                                    self.counters.mmio_errors += 1;
                                }
                            }
                        },
                    }
                }
            }
        }
        if self.in_flight.is_none() {
            // the client's next access, unless it is a WAIT32 between two reads (then the
            // counter reads may go)
            let now = self.cycles();
            let client = self.mmio.front().is_some_and(|m| m.wait.as_ref().is_none_or(|w| w.not_before <= now));
            let next = if client { self.mmio.pop_front() } else { self.stat_mmio.pop_front() };
            if let Some(m) = next {
                if let Some((q, wqe)) = m.push {
                    // taken by the push port in the next cycle (it is always ready), ahead of
                    // the accesses behind it, which start one cycle later at the earliest
                    self.eng.push_wqe(q, *wqe);
                } else {
                    self.eng.lite_start(m.port, m.op);
                    self.in_flight = Some(m);
                }
            }
        }
        if !matches!(self.trace, Trace::Off | Trace::Done) {
            let now = self.cycles();
            if let Err(e) = self.trace.before_clock(&mut self.eng, now) {
                eprintln!("hematite-sim device: waveform: {e}; no waveform is written");
            }
        }
        self.eng.step();
    }

    /// The only access pending is a client's `WAIT32` between two of its reads.
    fn waiting_only(&self) -> bool {
        self.in_flight.is_none() && self.stat_mmio.is_empty() && self.mmio.len() == 1 && self.mmio.front().is_some_and(|m| m.wait.is_some())
    }

    /// Queues a read of every engine counter (they go when no client access waits).
    fn sample_counters(&mut self) {
        let now = self.cycles();
        self.stats.start(now);
        use crate::eng::{LiteOp, Port};
        use hematite_abi::regs::{HM_REG_CNT, HM_REG_QPC, HM_REG_QPC_SEL};
        let rd = |addr: u16, t: stats::Tag| Mmio { port: Port::Bar, op: LiteOp::Read { addr }, reply_to: None, counter: Some(t), wait: None, push: None };
        for i in 0..hematite_abi::pkt::HM_CNT_COUNT as u16 {
            self.stat_mmio.push_back(rd(HM_REG_CNT as u16 + 4 * i, stats::Tag::Cnt(i)));
        }
        // the QPs hematite-run --stat --qp asked for: select, wait for the copy, read
        for q in self.stats.watched() {
            let sel = LiteOp::Write { addr: HM_REG_QPC_SEL as u16, data: q as u32, strb: 0xF };
            self.stat_mmio.push_back(Mmio { port: Port::Bar, op: sel, reply_to: None, counter: None, wait: None, push: None });
            self.stat_mmio.push_back(rd(HM_REG_QPC_SEL as u16, stats::Tag::QpSel(q)));
            for k in 0..hematite_abi::pkt::HM_QPC_COUNT as u16 {
                self.stat_mmio.push_back(rd(HM_REG_QPC as u16 + 4 * k, stats::Tag::Qp(q, k)));
            }
        }
    }

    /// A last sample before the process ends: the files then hold the final counts.
    fn final_sample(&mut self) {
        if self.cfg.counters.is_none() {
            return;
        }
        // a sample under way completes first (its reads are queued)
        for _ in 0..100_000 {
            if !self.stats.in_progress && self.mmio.is_empty() && self.stat_mmio.is_empty() && self.in_flight.is_none() {
                break;
            }
            self.clock();
        }
        if self.stats.in_progress {
            return;
        }
        let n = self.stats.samples;
        self.sample_counters();
        for _ in 0..100_000 {
            if self.stats.samples != n && self.mmio.is_empty() && self.stat_mmio.is_empty() && self.in_flight.is_none() {
                return;
            }
            self.clock();
        }
    }

    fn write_stats(&mut self) {
        let c = &self.counters;
        if let Err(e) = self.stats.write(self.cycles(), [c.slow_rx, c.slow_tx, c.rx_buf_drops]) {
            eprintln!("hematite-sim device: counter files: {e}");
        }
    }

    fn busy(&self) -> bool {
        self.in_flight.is_some() || !self.mmio.is_empty() || !self.stat_mmio.is_empty() || !self.eng.rx_q.is_empty() || !self.rx_buf.is_empty() || !self.tx_backlog.is_empty() || !self.held.is_empty() || !self.eng.mem.idle()
    }

    /// Runs until `max_cycles` (or forever).
    pub fn run(&mut self) -> Result<(), String> {
        let mut last_flush = Instant::now();
        let mut last_dbg = Instant::now();
        loop {
            self.service_socket();
            self.service_wire_rx();
            self.service_arp();
            let idle = !self.busy() && self.cycles() - self.last_activity > self.cfg.idle_after;
            if self.cfg.verbose && last_dbg.elapsed() > Duration::from_secs(1) {
                last_dbg = Instant::now();
                eprintln!(
                    "hematite-sim device: cycle {} idle {idle} (in flight {}, mmio {}, rx_q {}, tx backlog {}, mem idle {}, since activity {})",
                    self.cycles(),
                    self.in_flight.is_some(),
                    self.mmio.len(),
                    self.eng.rx_q.len(),
                    self.tx_backlog.len(),
                    self.eng.mem.idle(),
                    self.cycles() - self.last_activity
                );
            }
            let batch = if idle {
                let mut fds = vec![
                    libc::pollfd { fd: self.listener.as_raw_fd(), events: libc::POLLIN, revents: 0 },
                    libc::pollfd { fd: self.wire.fd(), events: libc::POLLIN, revents: 0 },
                ];
                if let Some(c) = &self.client {
                    fds.push(libc::pollfd { fd: c.fd.as_raw_fd(), events: libc::POLLIN, revents: 0 });
                    fds.push(libc::pollfd { fd: c.pidfd.as_raw_fd(), events: libc::POLLIN, revents: 0 });
                }
                // SAFETY: fds is a valid array of pollfd for the call's duration.
                unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, self.cfg.idle_sleep_ms) };
                self.cfg.idle_slice
            } else if self.waiting_only() {
                // nothing but a WAIT32 between its reads: run as when nothing is pending
                64
            } else if self.in_flight.is_some() || !self.mmio.is_empty() || !self.stat_mmio.is_empty() {
                8
            } else {
                64
            };
            for _ in 0..batch {
                self.clock();
            }
            let beats = self.eng.mem.read_beats + self.eng.mem.write_beats;
            if beats != self.last_beats {
                self.last_beats = beats;
                self.last_activity = self.cycles();
            }
            if !self.eng.fw_done_cycles.is_empty() {
                self.eng.fw_done_cycles.clear();
            }
            self.service_wire_tx();
            self.service_irqs();
            if self.stats.due(self.cycles()) {
                self.sample_counters();
            }
            if last_flush.elapsed() > Duration::from_millis(500) {
                if let Some(pc) = &mut self.pcap {
                    pc.flush();
                }
                last_flush = Instant::now();
            }
            if self.eng.fw_out.2 {
                // A client can load anything into the core (hold it, write IMEM, run it): a
                // trap ends that client's session and resets the function, like a device
                // error, but never the device process.
                self.counters.traps += 1;
                eprintln!("hematite-sim device: the control core trapped; the function is reset");
                if self.client.is_some() {
                    self.drop_client("the control core trapped");
                } else if let Err(e) = self.reset() {
                    return Err(format!("the control core trapped and the reset failed: {e}"));
                }
            }
            if STOP.load(std::sync::atomic::Ordering::SeqCst) {
                if let Some(pc) = &mut self.pcap {
                    pc.flush();
                }
                self.final_sample();
                let c = &self.counters;
                eprintln!(
                    "hematite-sim device: stopped after {} cycles: frames tx {} rx {} lost {} lost-rx {} rx-buffer-full {} looped {}, ARP replies {}, ND replies {}",
                    self.cycles(),
                    c.frames_tx,
                    c.frames_rx,
                    c.frames_lost,
                    c.frames_lost_rx,
                    c.rx_buf_drops,
                    c.frames_looped,
                    c.arp_replies,
                    c.nd_replies
                );
                eprintln!(
                    "hematite-sim device: wire faults applied: lost {} duplicated {} reordered {} corrupted {}",
                    c.fault_lost, c.fault_dup, c.fault_reordered, c.fault_corrupted
                );
                return Ok(());
            }
            if self.cfg.max_cycles != 0 && self.cycles() >= self.cfg.max_cycles {
                if let Some(pc) = &mut self.pcap {
                    pc.flush();
                }
                self.final_sample();
                return Ok(());
            }
        }
    }
}

impl Drop for SimNic {
    fn drop(&mut self) {
        let now = self.cycles();
        self.trace.cut(&mut self.eng, now, "the device process ended", true);
        if let Some(pc) = &mut self.pcap {
            pc.flush();
        }
        let _ = std::fs::remove_file(&self.cfg.socket);
        if let WireAddr::Unix(pth) = &self.cfg.wire_local {
            let _ = std::fs::remove_file(pth);
        }
    }
}
