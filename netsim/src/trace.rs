//! Bounded-memory queue-depth traces.

/// How a depth trace samples.
///
/// A sample (cycle, bytes) is recorded when the depth differs from the last recorded sample by
/// at least `step_bytes`, when it becomes or stops being 0, and at least every
/// `interval_cycles` cycles while it differs from the last sample at all. Several changes in
/// one cycle leave one sample (the cycle's last value). At most `max_samples` are kept (then
/// the trace stops and reports [`DepthTrace::truncated`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceConfig {
    /// Record a change of at least this many bytes at once (1 = every change).
    pub step_bytes: u64,
    /// Record a pending smaller change after this many cycles.
    pub interval_cycles: u64,
    /// Bound on samples kept per trace.
    pub max_samples: usize,
}

impl Default for TraceConfig {
    fn default() -> Self {
        TraceConfig { step_bytes: 1_000, interval_cycles: 1_000, max_samples: 1 << 20 }
    }
}

/// A sampled (cycle, bytes) series.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DepthTrace {
    cfg: TraceConfig,
    samples: Vec<(u64, u64)>,
    last_val: u64,
    last_cycle: u64,
    truncated: bool,
}

impl DepthTrace {
    /// A trace starting with the sample (0, 0).
    pub fn new(cfg: TraceConfig) -> DepthTrace {
        DepthTrace { cfg, samples: vec![(0, 0)], last_val: 0, last_cycle: 0, truncated: false }
    }

    fn record(&mut self, now: u64, v: u64) {
        if let Some(last) = self.samples.last_mut() {
            if last.0 == now {
                last.1 = v;
                self.last_val = v;
                return;
            }
        }
        if self.samples.len() >= self.cfg.max_samples {
            self.truncated = true;
            return;
        }
        self.samples.push((now, v));
        self.last_val = v;
        self.last_cycle = now;
    }

    /// The depth changed to `v` in cycle `now`.
    pub fn observe(&mut self, now: u64, v: u64) {
        if v == self.last_val {
            return;
        }
        if v.abs_diff(self.last_val) >= self.cfg.step_bytes || v == 0 || self.last_val == 0 || self.last_cycle == now {
            self.record(now, v);
        }
    }

    /// Periodic check (once per cycle) with the current depth `v`.
    pub fn tick(&mut self, now: u64, v: u64) {
        if v != self.last_val && now.saturating_sub(self.last_cycle) >= self.cfg.interval_cycles {
            self.record(now, v);
        }
    }

    /// The samples, in cycle order.
    pub fn samples(&self) -> &[(u64, u64)] {
        &self.samples
    }

    /// Samples were dropped because `max_samples` was reached.
    pub fn truncated(&self) -> bool {
        self.truncated
    }
}
