//! Waveforms on demand (`hematite-sim device --trace FILE.fst --trace-from C --trace-cycles N`):
//! an FST of the whole NIC model (engine and control core, every signal) for the cycles
//! C .. C+N of the device process, on the same time axis as the pcap (4 ns a cycle). The
//! reset and the firmware load (about 9,000 cycles, before the clock loop) cannot be traced: a
//! window that starts in them starts at the first traceable cycle instead, N cycles long, and
//! the device says so. Only the
//! waveform build of the simulator can write one (`./hematite trace-build`: the NIC model
//! compiled with `--trace-fst`, in its own target folder); the ordinary build refuses the
//! option, and carries no tracing code, so tracing off costs nothing.

use crate::eng::Engine;
use std::path::PathBuf;

/// Which cycles to trace, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceWindow {
    pub path: PathBuf,
    /// First cycle of the device process traced.
    pub from: u64,
    /// Cycles traced (at least 1).
    pub cycles: u64,
}

/// Where the window stands.
#[derive(Debug)]
pub(super) enum Trace {
    Off,
    Waiting(TraceWindow),
    /// The window, and the cycle it opened at.
    Open(TraceWindow, u64),
    Done,
}

impl Trace {
    /// Checks the window before the device starts: the build must be the waveform build, and
    /// the file must be creatable (it is created empty now, so a bad path fails at once).
    pub(super) fn new(w: Option<TraceWindow>) -> Result<Trace, String> {
        let Some(w) = w else { return Ok(Trace::Off) };
        if !Engine::traced() {
            return Err("--trace needs the waveform build of hematite-sim: ./hematite trace-build (or build with HEMATITE_TRACE=1); this build has no tracing code".into());
        }
        if w.cycles == 0 {
            return Err("--trace-cycles must be at least 1".into());
        }
        std::fs::File::create(&w.path).map_err(|e| format!("--trace {}: {e}", w.path.display()))?;
        Ok(Trace::Waiting(w))
    }

    /// After each clock: opens the waveform when the process reaches the window's first
    /// cycle, and closes it after its last. `now` is the number of the next clock.
    pub(super) fn after_clock(&mut self, eng: &mut Engine, now: u64) -> Result<(), String> {
        match std::mem::replace(self, Trace::Off) {
            Trace::Waiting(w) if now >= w.from => {
                eng.trace_open(&w.path, now)?;
                let late = if now > w.from {
                    format!(" (cycle {} falls in the reset and the firmware load, which come before the first traceable cycle)", w.from)
                } else {
                    String::new()
                };
                eprintln!("hematite-sim device: waveform from cycle {now}{late} -> {}", w.path.display());
                *self = Trace::Open(w, now);
            }
            Trace::Open(w, at) if now >= at + w.cycles => {
                eng.trace_close();
                eprintln!("hematite-sim device: waveform of cycles {at}..{now} written to {}", w.path.display());
                *self = Trace::Done;
            }
            t => *self = t,
        }
        Ok(())
    }

    /// The engine is about to be replaced (a function reset) or the process ends at cycle
    /// `now`: an open waveform ends here, shorter than asked, and says so.
    pub(super) fn cut(&mut self, eng: &mut Engine, now: u64, why: &str) {
        match std::mem::replace(self, Trace::Off) {
            Trace::Open(w, at) => {
                eng.trace_close();
                eprintln!(
                    "hematite-sim device: waveform of cycles {at}..{now} written to {} (cut short: {why}; {} cycles were asked)",
                    w.path.display(),
                    w.cycles
                );
                *self = Trace::Done;
            }
            // a window not reached yet stays waiting across a function reset
            t => *self = t,
        }
    }
}
