//! Waveforms on demand: an FST of the whole NIC model (engine and control core, every signal)
//! on the same time axis as the pcap (4 ns a cycle, the device process's cycles). Only the
//! waveform build of the simulator can write one (`./hematite trace-build`: the NIC model
//! compiled with `--trace-fst --savable`, in its own target folder); the ordinary build refuses
//! the options, and carries no tracing code, so tracing off costs nothing.
//!
//! * A window of cycles (`--trace FILE.fst --trace-from C --trace-cycles N`): the model writes
//!   the cycles C .. C+N as they run. The reset and the firmware load (about 9,000 cycles,
//!   before the clock loop) cannot be traced: a window that starts in them starts at the first
//!   traceable cycle instead, N cycles long, and the device says so. A window never reached
//!   (the process ended first) writes no file and says so.
//! * A triggered window (`--trace FILE.fst --trace-on EVENT --trace-before B --trace-after A`):
//!   the B cycles before the first EVENT and the A after it. The future is not known when those
//!   cycles run, so the engine has a shadow: a second model clocked with the same inputs B + 1
//!   cycles later, from power-on. A Verilated model is deterministic, so the shadow is the
//!   engine B + 1 cycles ago, cycle for cycle (the test checks that the event shows at the same
//!   cycle). When the event happens at cycle T, the shadow is at T - B: its waveform opens
//!   there, and once the engine has run A more cycles the shadow catches up and the waveform
//!   closes at T + A + 1. Armed, the device runs two models (docs/waveforms.md: measured at
//!   0.76 of the unarmed waveform build's speed).

use crate::eng::Engine;
use hematite_model::record::DropReason;
use std::path::PathBuf;

/// What starts a triggered window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TraceTrigger {
    /// The first CQE the engine issues with a status other than success.
    ErrorCqe,
    /// The first frame the RX path drops: for any reason, or for this one (`HM_RSN_*`).
    Drop(Option<DropReason>),
    /// The first RC request the port sends again (go-back-N after a NAK or a timeout): a PSN
    /// at or before one it already sent to that QP.
    Retransmit,
}

impl TraceTrigger {
    /// `error-cqe`, `drop`, `drop:REASON` (a receive-spec reason name: `bad_icrc`, `not_roce`,
    /// ...) or `retransmit`.
    pub fn parse(s: &str) -> Result<TraceTrigger, String> {
        match s {
            "error-cqe" => Ok(TraceTrigger::ErrorCqe),
            "drop" => Ok(TraceTrigger::Drop(None)),
            "retransmit" => Ok(TraceTrigger::Retransmit),
            _ => match s.strip_prefix("drop:") {
                Some(r) => DropReason::ALL.iter().find(|d| d.name() == r).map(|d| TraceTrigger::Drop(Some(*d))).ok_or_else(|| {
                    format!("--trace-on drop:{r}: no such drop reason (one of {})", DropReason::ALL.map(|d| d.name()).join(", "))
                }),
                None => Err(format!("--trace-on {s}: one of error-cqe, drop, drop:REASON, retransmit")),
            },
        }
    }

    /// What the last clock's taps show of this trigger, if it fired.
    fn fired(self, eng: &Engine) -> Option<String> {
        match self {
            TraceTrigger::ErrorCqe => match eng.tap_cqe {
                Some(st) if st != hematite_abi::desc::HM_CQE_ST_SUCCESS => Some(match hematite_model::desc::wc_status_from_code(st) {
                    Some(s) => format!("a CQE with status {s:?}"),
                    None => format!("a CQE with status code {st}"),
                }),
                _ => None,
            },
            TraceTrigger::Drop(want) => match eng.tap_rx.and_then(DropReason::from_code) {
                Some(r) if want.is_none_or(|w| w == r) => Some(format!("a frame dropped by the RX path ({})", r.name())),
                _ => None,
            },
            TraceTrigger::Retransmit => eng.tap_retx.map(|(qp, psn)| format!("a retransmitted request (QP {qp:#x}, PSN {psn:#x})")),
        }
    }
}

/// When to trace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TraceWhen {
    /// The cycles from .. from + cycles.
    Cycles { from: u64, cycles: u64 },
    /// `before` cycles before the trigger's cycle, that cycle and `after` cycles after it.
    Trigger { on: TraceTrigger, before: u64, after: u64 },
}

/// A waveform the device is asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceWindow {
    pub path: PathBuf,
    pub when: TraceWhen,
}

/// Where the window stands.
pub(super) enum Trace {
    Off,
    Waiting(TraceWindow),
    /// The window, and the cycle it opened at.
    Open(TraceWindow, u64),
    /// Watching for the trigger (the engine has its shadow).
    Armed(TraceWindow),
    /// The trigger fired at cycle `.1` (what: `.2`); the shadow's waveform opened at cycle
    /// `.3` and closes at `.4`.
    Fired(TraceWindow, u64, String, u64, u64),
    Done,
}

impl Trace {
    /// Checks the window before the device starts: the build must be the waveform build, and
    /// the file must be creatable (checked now, so a bad path fails at once).
    pub(super) fn new(w: Option<TraceWindow>) -> Result<Trace, String> {
        let Some(w) = w else { return Ok(Trace::Off) };
        if !Engine::traced() {
            return Err("--trace needs the waveform build of hematite-sim: ./hematite trace-build (or build with HEMATITE_TRACE=1); this build has no tracing code".into());
        }
        match w.when {
            TraceWhen::Cycles { cycles: 0, .. } => return Err("--trace-cycles must be at least 1".into()),
            TraceWhen::Trigger { before: 0, .. } => return Err("--trace-before must be at least 1".into()),
            _ => {}
        }
        // the path is checked now (a bad one fails at once), the file written when the window opens
        std::fs::File::create(&w.path).map_err(|e| format!("--trace {}: {e}", w.path.display()))?;
        let _ = std::fs::remove_file(&w.path);
        Ok(match w.when {
            TraceWhen::Cycles { .. } => Trace::Waiting(w),
            TraceWhen::Trigger { .. } => Trace::Armed(w),
        })
    }

    /// Before each clock of the device's loop. `now` is the number of that clock; the engine's
    /// trigger taps show the last one (`now - 1`).
    pub(super) fn before_clock(&mut self, eng: &mut Engine, now: u64) -> Result<(), String> {
        match std::mem::replace(self, Trace::Off) {
            Trace::Waiting(w) => match w.when {
                TraceWhen::Cycles { from, .. } if now >= from => {
                    eng.trace_open(&w.path, now)?;
                    let late = if now > from && from > 0 {
                        format!(" (cycle {from} falls in the reset and the firmware load, which come before the first traceable cycle)")
                    } else {
                        String::new()
                    };
                    eprintln!("hematite-sim device: waveform from cycle {now}{late} -> {}", w.path.display());
                    *self = Trace::Open(w, now);
                }
                _ => *self = Trace::Waiting(w),
            },
            Trace::Open(w, at) => match w.when {
                TraceWhen::Cycles { cycles, .. } if now - at >= cycles => {
                    eng.trace_close();
                    eprintln!("hematite-sim device: waveform of cycles {at}..{now} written to {}", w.path.display());
                    *self = Trace::Done;
                }
                _ => *self = Trace::Open(w, at),
            },
            Trace::Armed(w) => {
                let TraceWhen::Trigger { on, after, .. } = w.when else { unreachable!("an armed window has a trigger") };
                match on.fired(eng) {
                    Some(what) => {
                        let t = now - 1;
                        let from = now - eng.shadow_lag().ok_or("waveform: the engine has no shadow model")?;
                        eng.shadow_trace_open(&w.path, from)?;
                        let until = t.saturating_add(after).saturating_add(1);
                        eprintln!("hematite-sim device: waveform trigger at cycle {t}: {what}; the waveform runs from cycle {from} to {until}");
                        *self = Trace::Fired(w, t, what, from, until);
                        return self.before_clock(eng, now);
                    }
                    None => *self = Trace::Armed(w),
                }
            }
            Trace::Fired(w, t, what, from, until) if now >= until => {
                finish(eng, &w, t, &what, from, now, None);
                *self = Trace::Done;
            }
            t => *self = t,
        }
        Ok(())
    }

    /// The engine is about to be replaced (a function reset, `why`) or the process ends at
    /// cycle `now` (`ending`): an open or fired window ends here, shorter than asked, and says
    /// so; an armed one goes on with the next engine's shadow, or at the end says that it
    /// never fired and leaves no file; a window not reached yet stays waiting.
    pub(super) fn cut(&mut self, eng: &mut Engine, now: u64, why: &str, ending: bool) {
        match std::mem::replace(self, Trace::Off) {
            Trace::Open(w, at) => {
                eng.trace_close();
                let TraceWhen::Cycles { cycles: asked, .. } = w.when else { unreachable!("an open window is a window of cycles") };
                eprintln!("hematite-sim device: waveform of cycles {at}..{now} written to {} (cut short: {why}; {asked} cycles were asked)", w.path.display());
                *self = Trace::Done;
            }
            Trace::Fired(w, t, what, from, _) => {
                finish(eng, &w, t, &what, from, now, Some(why));
                *self = Trace::Done;
            }
            Trace::Waiting(w) if ending => {
                eprintln!("hematite-sim device: the waveform window was never reached ({why}); {} not written", w.path.display());
                *self = Trace::Done;
            }
            Trace::Armed(w) if ending => {
                eng.shadow_end();
                let _ = std::fs::remove_file(&w.path);
                eprintln!("hematite-sim device: the waveform trigger never fired ({why}); {} not written", w.path.display());
                *self = Trace::Done;
            }
            t => *self = t,
        }
    }

    /// The shadow lag a new engine needs for this window (B + 1 cycles), while armed.
    pub(super) fn shadow_delay(&self) -> Option<usize> {
        match self {
            Trace::Armed(TraceWindow { when: TraceWhen::Trigger { before, .. }, .. }) => Some(*before as usize + 1),
            _ => None,
        }
    }
}

/// Ends a fired window at cycle `now`: the shadow catches up with the engine and its waveform
/// closes.
fn finish(eng: &mut Engine, w: &TraceWindow, t: u64, what: &str, from: u64, now: u64, cut: Option<&str>) {
    let TraceWhen::Trigger { before, after, .. } = w.when else { unreachable!("a fired window has a trigger") };
    eng.shadow_catch_up();
    eng.shadow_end();
    let mut notes = Vec::new();
    if from > t.saturating_sub(before) {
        notes.push(format!("{before} cycles before the trigger were asked; this engine started at cycle {from}"));
    }
    if let Some(why) = cut {
        notes.push(format!("cut short: {why}; {after} cycles after the trigger were asked"));
    }
    let notes = if notes.is_empty() { String::new() } else { format!(" ({})", notes.join("; ")) };
    eprintln!("hematite-sim device: waveform of cycles {from}..{now} around the trigger at cycle {t} ({what}) written to {}{notes}", w.path.display());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trigger_names() {
        assert_eq!(TraceTrigger::parse("error-cqe"), Ok(TraceTrigger::ErrorCqe));
        assert_eq!(TraceTrigger::parse("drop"), Ok(TraceTrigger::Drop(None)));
        assert_eq!(TraceTrigger::parse("drop:bad_icrc"), Ok(TraceTrigger::Drop(Some(DropReason::BadIcrc))));
        for r in DropReason::ALL {
            assert_eq!(TraceTrigger::parse(&format!("drop:{}", r.name())), Ok(TraceTrigger::Drop(Some(r))));
        }
        let e = TraceTrigger::parse("drop:nonsense").unwrap_err();
        assert!(e.contains("no such drop reason") && e.contains("bad_icrc"), "{e}");
        assert_eq!(TraceTrigger::parse("retransmit"), Ok(TraceTrigger::Retransmit));
        assert!(TraceTrigger::parse("drops").unwrap_err().contains("one of error-cqe, drop, drop:REASON, retransmit"));
        assert!(TraceTrigger::parse("").is_err());
    }
}
