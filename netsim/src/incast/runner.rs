//! The incast runner ([`Incast`]): builds the switch, the links and the NICs from an
//! [`IncastConfig`] (time-compressed), steps everything one clock at a time in the order of the
//! cycle convention, measures per window, per convergence window and over the steady state, and
//! evaluates the run into an [`IncastResult`].

use super::*;
use crate::pkt::{self, RoceSpec, ECN_CE, ECN_ECT0, OPCODE_CNP};
use crate::{pfc_headroom_bytes, DepthTrace, Link, LinkRate, Switch, SwitchConfig, WireFormat};
use hematite_model::dcqcn::HwParams;
use std::collections::VecDeque;

struct SenderNic {
    cc: Box<dyn SenderCc>,
    qpn: u32,
    spec: RoceSpec,
    psn: u32,
    start: u64,
    paused_until: [u64; 8],
    cnp_in: VecDeque<u32>,
    cnps_rx: u64,
    paused_cycles: u64,
}

struct ReceiverNic {
    cc: Box<dyn ReceiverCc>,
    ce_in: VecDeque<u32>,
    cnps_sent: u64,
}

/// A running incast experiment. [`Incast::run`] runs it to the end; [`Incast::step`] and
/// [`Incast::switch`] let tests look inside.
pub struct Incast {
    cfg: IncastConfig,
    params: HwParams,
    backend: String,
    sw: Switch,
    up: Vec<Link>,
    down: Vec<Link>,
    snd: Vec<SenderNic>,
    rcv: ReceiverNic,
    now: u64,
    end: u64,
    window: u64,
    steady_from: u64,
    data_class: u8,
    wire: WireFormat,
    // measurement
    win_bytes: Vec<u64>,
    win_wire: u64,
    win_qmax: u64,
    steady_bytes: Vec<u64>,
    steady_wire: u64,
    steady_qsum: u128,
    steady_qmax: u64,
    at_steady: (u64, u64, u64),
    samples: Vec<Sample>,
    base_rtt: u64,
    last_start: u64,
    conv_window: u64,
    conv_bytes: Vec<u64>,
    conv_wire: u64,
    conv: Vec<ConvWindow>,
}

fn cycles_of_us(us: u64, scale: u32) -> u64 {
    (us * CLK_MHZ + scale as u64 / 2) / scale as u64
}

impl Incast {
    /// Sets up a run with `backend` for the congestion control (used when `cfg.cc_on`; DCQCN off
    /// uses [`OffBackend`]).
    pub fn new(cfg: IncastConfig, backend: &dyn BackendFactory) -> Result<Incast, String> {
        let s = cfg.scale;
        if s == 0 {
            return Err(String::from("scale must be >= 1"));
        }
        if cfg.n == 0 || cfg.n > 250 {
            return Err(String::from("n must be 1..=250"));
        }
        if cfg.payload_bytes == 0 || cfg.payload_bytes % 4 != 0 || cfg.payload_bytes > 4096 {
            return Err(String::from("payload must be a multiple of 4 in 4..=4096"));
        }
        let frame = cfg.frame_bytes() as u64;
        let params = HwParams::from_cc(&cfg.cc_params, CLK_MHZ as u32, (LINE_GBPS * 1000) as u32, s);
        // Switch: 100G ports, the receiver on port n.
        let mut base = SwitchConfig::new(cfg.n + 1, LINE_GBPS, CLK_MHZ);
        base.buffer_bytes = cfg.buffer_bytes;
        base.ecn = cfg.ecn;
        base.seed = cfg.seed;
        base.pfc = cfg.pfc.then_some(cfg.pfc_cfg);
        base.trace = DEPTH_TRACE;
        let mut swc = base.scaled(s as u64);
        let delay = (cfg.link_delay_ns * CLK_MHZ + 500 * s as u64) / (1000 * s as u64);
        let rate = LinkRate { rate_mbps: LINE_GBPS * 1000, clk_mhz: CLK_MHZ };
        let wire = WireFormat::default();
        let frame_cycles = rate.cycles_for(wire.wire_bytes(frame as usize));
        if let Some(p) = &mut swc.pfc {
            // The headroom does not scale (its frame terms do not shrink): recompute it for the
            // scaled round trip. The sender reacts at once but has one frame on the wire and one
            // queued in its MAC.
            let rtt = 2 * delay + frame_cycles + 2;
            p.headroom_bytes = pfc_headroom_bytes(rate.rate_mbps, CLK_MHZ, rtt, frame as usize, wire) + frame;
            if p.xoff_bytes < p.xon_bytes + 2 * frame {
                return Err(format!(
                    "scale {s}: XOFF − XON = {} B after scaling is below two frames ({} B)",
                    p.xoff_bytes - p.xon_bytes,
                    2 * frame
                ));
            }
        }
        if let Some(e) = &mut swc.ecn {
            if cfg.pmax_compensation {
                let p = e.pmax_ppm as u64 * s as u64;
                if p > 1_000_000 {
                    return Err(format!(
                        "scale {s}: Pmax × scale = {:.0} % exceeds 100 % (use a smaller scale, or no Pmax compensation)",
                        p as f64 / 1e4
                    ));
                }
                e.pmax_ppm = p as u32;
            }
            if e.kmax_bytes < e.kmin_bytes + 4 * frame {
                return Err(format!("scale {s}: Kmax − Kmin after scaling is below four frames"));
            }
        }
        if swc.buffer_bytes < 8 * frame {
            return Err(format!("scale {s}: the scaled buffer holds fewer than 8 frames"));
        }
        if cfg.cc_on && (params.byte_reset as u64) < frame {
            return Err(format!(
                "scale {s}: the scaled byte counter B = {} B is below one frame ({frame} B)",
                params.byte_reset
            ));
        }
        let end = cycles_of_us(cfg.duration_us, s);
        let window = cycles_of_us(cfg.window_us, s).max(1);
        let conv_window = cycles_of_us(cfg.conv_window_us, s).max(1);
        let stagger = cycles_of_us(cfg.stagger_us, s);
        let last_start = stagger * (cfg.n as u64 - 1);
        let steady_from = (end / 2).div_ceil(window) * window;
        if steady_from < last_start || end < steady_from + window {
            return Err(format!(
                "duration {} µs too short: the steady-state window (the last half) must begin after the last flow starts ({} µs) and hold a sample window",
                cfg.duration_us,
                cfg.stagger_us * (cfg.n as u64 - 1)
            ));
        }
        let mut sw = Switch::new(swc).map_err(|e| e.to_string())?;
        for i in 0..cfg.n {
            sw.add_route(sender_mac(i), i);
        }
        sw.add_route(RECEIVER_MAC, cfg.n);
        if let Some(snap) = cfg.capture_snaplen {
            for p in 0..=cfg.n {
                sw.enable_capture(p, snap);
            }
        }
        let fallback = OffBackend;
        let be: &dyn BackendFactory = if cfg.cc_on { backend } else { &fallback };
        let nqp_s = SENDER_QPN_BASE as usize + cfg.n;
        let nqp_r = RECEIVER_QPN_BASE as usize + cfg.n;
        let mut snd = Vec::with_capacity(cfg.n);
        for i in 0..cfg.n {
            let nic = NicSpec { params, nqp: nqp_s, index: i, time_scale: s, max_frame: frame as u32 };
            let spec = RoceSpec {
                dst: RECEIVER_MAC,
                src: sender_mac(i),
                vlan_pcp: None,
                ipv6: false,
                ip_src: sender_ip(i),
                ip_dst: RECEIVER_IP,
                dscp: DATA_DSCP,
                ecn: ECN_ECT0,
                opcode: OPCODE_WRITE_MIDDLE,
                dest_qp: RECEIVER_QPN_BASE + i as u32,
                psn: 0,
                payload_len: cfg.payload_bytes,
            };
            pkt::build_roce(&spec).map_err(|e| format!("data frame: {e:?}"))?;
            snd.push(SenderNic {
                cc: be.sender(&nic)?,
                qpn: SENDER_QPN_BASE + i as u32,
                spec,
                psn: 0,
                start: stagger * i as u64,
                paused_until: [0; 8],
                cnp_in: VecDeque::new(),
                cnps_rx: 0,
                paused_cycles: 0,
            });
        }
        let nic = NicSpec { params, nqp: nqp_r, index: cfg.n, time_scale: s, max_frame: 74 };
        let rcv = ReceiverNic { cc: be.receiver(&nic)?, ce_in: VecDeque::new(), cnps_sent: 0 };
        let data_class = sw.class_of(&pkt::build_roce(&snd[0].spec).map_err(|e| format!("{e:?}"))?);
        // CNPs must overtake data (strict priority: a higher class is served first).
        let cnp = pkt::build_roce(&cnp_spec(0, params.cnp_dscp)).map_err(|e| format!("CNP: {e:?}"))?;
        if sw.class_of(&cnp) <= data_class {
            return Err(format!(
                "CNP DSCP {} maps to class {}, not above the data class {data_class}",
                params.cnp_dscp,
                sw.class_of(&cnp)
            ));
        }
        let up = (0..=cfg.n).map(|_| Link::new(rate.rate_mbps, CLK_MHZ, delay)).collect();
        let down = (0..=cfg.n).map(|_| Link::new(0, CLK_MHZ, delay)).collect();
        // Base RTT: a data frame serialised by the sender, the delay, serialised by the switch, the
        // delay; the CNP serialised by the receiver, the delay, by the switch, the delay (plus the
        // one-cycle hand-offs of the cycle convention, 4).
        let cnp_cycles = rate.cycles_for(wire.wire_bytes(74));
        let base_rtt = 2 * frame_cycles + 2 * cnp_cycles + 4 * delay + 4;
        let backend = if cfg.cc_on { backend.describe() } else { fallback.describe() };
        Ok(Incast {
            params,
            backend,
            sw,
            up,
            down,
            snd,
            rcv,
            now: 0,
            end,
            window,
            steady_from,
            data_class,
            wire,
            win_bytes: vec![0; cfg.n],
            win_wire: 0,
            win_qmax: 0,
            steady_bytes: vec![0; cfg.n],
            steady_wire: 0,
            steady_qsum: 0,
            steady_qmax: 0,
            at_steady: (0, 0, 0),
            samples: Vec::new(),
            base_rtt,
            last_start,
            conv_window,
            conv_bytes: vec![0; cfg.n],
            conv_wire: 0,
            conv: Vec::new(),
            cfg,
        })
    }

    /// The switch.
    pub fn switch(&self) -> &Switch {
        &self.sw
    }

    /// The current cycle.
    pub fn now(&self) -> u64 {
        self.now
    }

    /// The last cycle + 1 of the run.
    pub fn end(&self) -> u64 {
        self.end
    }

    /// The DCQCN registers in use.
    pub fn params(&self) -> &HwParams {
        &self.params
    }

    /// Current pacing rate of sender i (rate units, limited).
    pub fn sender_rate(&self, i: usize) -> (u32, bool) {
        self.snd[i].cc.rate(self.snd[i].qpn)
    }

    /// The switch, mutable (e.g. to start a capture part way through a run).
    pub fn switch_mut(&mut self) -> &mut Switch {
        &mut self.sw
    }

    /// The configuration.
    pub fn config(&self) -> &IncastConfig {
        &self.cfg
    }

    /// Writes the bottleneck egress's queue-depth trace and the switch's buffer-use trace (see
    /// [`DEPTH_TRACE`]) as CSV: `#` lines, then `series,cycle,time_us,bytes_sim,kb` with
    /// `series` = `queue` (the bottleneck egress, all classes), `p<i>` (egress port i, every
    /// port including the bottleneck's) or `buffer` (shared + headroom),
    /// `time_us` real (cycle × s / 250), `kb` real (simulated bytes × s / 1000).
    pub fn write_depth_csv(&self, path: &std::path::Path) -> std::io::Result<()> {
        use std::io::Write;
        let s = self.cfg.scale as f64;
        let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
        let q = self.sw.depth_trace(self.cfg.n);
        let b = self.sw.buffer_trace();
        writeln!(
            f,
            "# switch depth trace: preset={} n={} cc={} pfc={} scale={} port={} (the bottleneck egress); a sample when the depth moved by >= {} B simulated or reached/left 0, else at most one per {} cycles; truncated: queue={} buffer={}",
            self.cfg.preset,
            self.cfg.n,
            if self.cfg.cc_on { "on" } else { "off" },
            if self.cfg.pfc { "on" } else { "off" },
            self.cfg.scale,
            self.cfg.n,
            self.sw.config().trace.step_bytes,
            self.sw.config().trace.interval_cycles,
            q.truncated(),
            b.truncated()
        )?;
        writeln!(f, "series,cycle,time_us,bytes_sim,kb")?;
        let mut series: Vec<(String, &DepthTrace)> = vec![("queue".into(), q)];
        for p in 0..self.sw.ports() {
            series.push((format!("p{p}"), self.sw.depth_trace(p)));
        }
        series.push(("buffer".into(), b));
        for (name, t) in series {
            for &(c, v) in t.samples() {
                writeln!(f, "{name},{c},{:.3},{v},{:.3}", c as f64 * s / CLK_MHZ as f64, v as f64 * s / 1000.0)?;
            }
        }
        f.flush()
    }

    /// The switch port of the receiver (the bottleneck egress).
    pub fn receiver_port(&self) -> usize {
        self.cfg.n
    }

    /// One clock of everything.
    pub fn step(&mut self) {
        let t = self.now;
        let n = self.cfg.n;
        if t == self.steady_from {
            self.at_steady = self.totals();
        }
        // 1. NICs take the frames that arrived from the switch.
        for (i, sd) in self.snd.iter_mut().enumerate() {
            while let Some(f) = self.down[i].recv() {
                if let Some(p) = pkt::parse_pfc(&f) {
                    for c in 0..8 {
                        if p.class_enable >> c & 1 != 0 {
                            sd.paused_until[c] = t + pkt::pause_cycles(p.quanta[c], LINE_GBPS * 1000, CLK_MHZ);
                        }
                    }
                } else if let Some(r) = pkt::parse_roce(&f) {
                    if r.bth.opcode == OPCODE_CNP && r.bth.dest_qp == sd.qpn {
                        sd.cnp_in.push_back(sd.qpn);
                        sd.cnps_rx += 1;
                    }
                }
            }
        }
        while let Some(f) = self.down[n].recv() {
            if let Some(r) = pkt::parse_roce(&f) {
                let q = r.bth.dest_qp;
                if r.bth.opcode != OPCODE_CNP && q >= RECEIVER_QPN_BASE && ((q - RECEIVER_QPN_BASE) as usize) < n {
                    let flow = (q - RECEIVER_QPN_BASE) as usize;
                    self.win_bytes[flow] += f.len() as u64;
                    self.win_wire += self.wire.wire_bytes(f.len());
                    if t >= self.last_start {
                        self.conv_bytes[flow] += f.len() as u64;
                        self.conv_wire += self.wire.wire_bytes(f.len());
                    }
                    if t >= self.steady_from {
                        self.steady_bytes[flow] += f.len() as u64;
                        self.steady_wire += self.wire.wire_bytes(f.len());
                    }
                    if r.l3.ecn() == ECN_CE {
                        self.rcv.ce_in.push_back(q);
                    }
                }
            }
        }
        // 2. Senders.
        let dc = self.data_class as usize;
        for (i, sd) in self.snd.iter_mut().enumerate() {
            let paused = sd.paused_until[dc] > t;
            if paused {
                sd.paused_cycles += 1;
            }
            let mut tx = None;
            if t >= sd.start && self.up[i].ready() && !paused && sd.cc.may_send(sd.qpn) {
                let spec = RoceSpec { psn: sd.psn, ..sd.spec };
                sd.psn = (sd.psn + 1) & 0xFF_FFFF;
                let f = pkt::build_roce(&spec).expect("validated in new()");
                tx = Some((sd.qpn, f.len() as u32));
                self.up[i].send(f);
            }
            let cnp = sd.cnp_in.pop_front();
            sd.cc.step(cnp, tx);
        }
        // 3. Receiver: notification point and CNPs.
        let ce = self.rcv.ce_in.pop_front();
        if let Some(q) = self.rcv.cc.step(ce) {
            if q >= RECEIVER_QPN_BASE && ((q - RECEIVER_QPN_BASE) as usize) < n {
                let flow = (q - RECEIVER_QPN_BASE) as usize;
                let f = pkt::build_roce(&cnp_spec(flow, self.params.cnp_dscp)).expect("CNP builds");
                self.up[n].send(f);
                self.rcv.cnps_sent += 1;
            }
        }
        // 4. Uplinks into the switch.
        for p in 0..=n {
            self.up[p].step();
            while let Some(f) = self.up[p].recv() {
                self.sw.rx(p, f);
            }
        }
        // 5. The switch, then the downlinks.
        self.sw.step();
        for p in 0..=n {
            while let Some(f) = self.sw.poll_tx(p) {
                self.down[p].send(f);
            }
            self.down[p].step();
        }
        // Measurement.
        let q = self.sw.port_queue_bytes(n);
        self.win_qmax = self.win_qmax.max(q);
        if t >= self.steady_from {
            self.steady_qsum += q as u128;
            self.steady_qmax = self.steady_qmax.max(q);
        }
        self.now += 1;
        if self.now % self.window == 0 {
            self.sample();
        }
        if self.now > self.last_start && (self.now - self.last_start) % self.conv_window == 0 {
            let g: Vec<f64> = self.conv_bytes.iter().map(|&b| b as f64).collect();
            let cap = LinkRate { rate_mbps: LINE_GBPS * 1000, clk_mhz: CLK_MHZ }.bytes_in(self.conv_window);
            self.conv.push(ConvWindow {
                start: self.now - self.conv_window,
                jain: jain(&g),
                util: self.conv_wire as f64 / cap as f64,
            });
            self.conv_bytes.iter_mut().for_each(|b| *b = 0);
            self.conv_wire = 0;
        }
    }

    fn totals(&self) -> (u64, u64, u64) {
        let mut pfc = 0;
        let mut drops = 0;
        let mut xoff = 0;
        for p in 0..self.sw.ports() {
            let c = self.sw.counters(p);
            pfc += c.pfc_tx;
            drops += c.drop_buffer + c.drop_queue_limit + c.drop_malformed + c.drop_no_route + c.drop_unsupported_ctrl;
            xoff += c.xoff_sent.iter().sum::<u64>();
        }
        (pfc, drops, xoff)
    }

    fn sample(&mut self) {
        let w = self.window as f64;
        let to_gbps = |b: u64| b as f64 * 8.0 * CLK_MHZ as f64 / w / 1000.0;
        let win_start = self.now - self.window;
        let active = self.snd.iter().filter(|s| s.start <= win_start).count();
        let gbps: Vec<f64> = self.win_bytes.iter().map(|&b| to_gbps(b)).collect();
        let (rates, limited): (Vec<f64>, Vec<bool>) = self
            .snd
            .iter()
            .map(|s| {
                let (r, l) = s.cc.rate(s.qpn);
                (ru_to_gbps(r), l)
            })
            .unzip();
        let act: Vec<f64> = self.snd.iter().zip(&gbps).filter(|(s, _)| s.start <= win_start).map(|(_, g)| *g).collect();
        let (pfc_frames, drops, _) = self.totals();
        let cap = LinkRate { rate_mbps: LINE_GBPS * 1000, clk_mhz: CLK_MHZ }.bytes_in(self.window);
        self.samples.push(Sample {
            cycle: self.now,
            time_us: self.now as f64 * self.cfg.scale as f64 / CLK_MHZ as f64,
            gbps,
            rate_gbps: rates,
            limited,
            queue: self.sw.port_queue_bytes(self.cfg.n),
            queue_max: self.win_qmax,
            util: self.win_wire as f64 / cap as f64,
            jain: jain(&act),
            active,
            pfc_frames,
            cnps: self.rcv.cnps_sent,
            drops,
        });
        self.win_bytes.iter_mut().for_each(|b| *b = 0);
        self.win_wire = 0;
        self.win_qmax = 0;
    }

    /// Runs to the end and evaluates.
    pub fn run(mut self) -> IncastResult {
        while self.now < self.end {
            self.step();
        }
        self.finish()
    }

    /// Evaluates the run so far (normally called by [`run`](Self::run) at the end).
    pub fn finish(self) -> IncastResult {
        let s = self.cfg.scale as f64;
        let us = |c: u64| c as f64 * s / CLK_MHZ as f64;
        let steady_cycles = self.now.saturating_sub(self.steady_from).max(1);
        let flow_gbps: Vec<f64> = self
            .steady_bytes
            .iter()
            .map(|&b| b as f64 * 8.0 * CLK_MHZ as f64 / steady_cycles as f64 / 1000.0)
            .collect();
        let cap = LinkRate { rate_mbps: LINE_GBPS * 1000, clk_mhz: CLK_MHZ }.bytes_in(steady_cycles);
        let last_start = self.last_start;
        // Convergence: the first convergence window (they tile the run from the last flow's
        // start) from which every window to the end has Jain ≥ 0.95 and utilisation ≥ 0.9;
        // converged only if that stretch begins no later than the steady-state window.
        let mut from: Option<u64> = None;
        for w in self.conv.iter().rev() {
            if w.jain < CONV_JAIN || w.util < CONV_UTIL {
                break;
            }
            from = Some(w.start);
        }
        let converge_cycles = from.filter(|&c| c <= self.steady_from).map(|c| c - last_start);
        let converge_us = converge_cycles.map(us);
        let (lo, hi) = flow_gbps.iter().fold((f64::MAX, 0.0f64), |(l, h), &g| (l.min(g), h.max(g)));
        let min_max_ratio = if hi > 0.0 { lo / hi } else { 1.0 };
        let (pfc_frames, drops, xoff) = self.totals();
        let (pfc0, drops0, xoff0) =
            if self.now > self.steady_from { self.at_steady } else { (pfc_frames, drops, xoff) };
        let rp = self.cfg.n;
        let c = self.sw.counters(rp);
        let swc = self.sw.config().clone();
        let summary = Summary {
            preset: self.cfg.preset.clone(),
            n: self.cfg.n,
            cc_on: self.cfg.cc_on,
            pfc: self.cfg.pfc,
            scale: self.cfg.scale,
            backend: self.backend.clone(),
            duration_us: us(self.now),
            steady_from_us: us(self.steady_from),
            last_start_us: us(last_start),
            fairness: jain(&flow_gbps),
            flow_gbps,
            util: self.steady_wire as f64 / cap as f64,
            converge_us,
            converge_cycles,
            min_max_ratio,
            peak_queue: c.max_queue_bytes,
            steady_queue_max: self.steady_qmax,
            steady_queue_mean: self.steady_qsum as f64 / steady_cycles as f64,
            pfc_frames,
            xoff,
            pfc_frames_steady: pfc_frames - pfc0,
            xoff_steady: xoff - xoff0,
            drops_steady: drops - drops0,
            paused_cycles: self.snd.iter().map(|x| x.paused_cycles).sum(),
            drops,
            ecn_marked: c.ecn_marked,
            cnps_sent: self.rcv.cnps_sent,
            cnps_rx: self.snd.iter().map(|x| x.cnps_rx).sum(),
            base_rtt_cycles: self.base_rtt,
            bdp_bytes: LinkRate { rate_mbps: LINE_GBPS * 1000, clk_mhz: CLK_MHZ }.bytes_in(self.base_rtt),
            kmin: swc.ecn.map_or(0, |e| e.kmin_bytes),
            kmax: swc.ecn.map_or(0, |e| e.kmax_bytes),
            cycles: self.now,
        };
        IncastResult {
            cfg: self.cfg,
            params: self.params,
            switch_cfg: swc,
            samples: self.samples,
            conv: self.conv,
            summary,
        }
    }
}
