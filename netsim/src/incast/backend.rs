//! The congestion control of the incast's NICs behind two traits, so that a Verilated RTL
//! backend can replace the reference model: [`SenderCc`] (reaction point + pacer) and
//! [`ReceiverCc`] (notification point), built per NIC by a [`BackendFactory`]. Two backends
//! live here: the reference model ([`ModelBackend`]) and DCQCN off ([`OffBackend`]).

use hematite_model::dcqcn::{HwParams, Np, NpCfg, NpIn, Pacer, PacerCfg, Rp, RpCfg, RpIn};

/// Sender-side DCQCN of one NIC (reaction point + pacer), one `step` per clock.
pub trait SenderCc {
    /// May QP `qp` start a frame in this cycle? Called before `step` of the same cycle.
    fn may_send(&mut self, qp: u32) -> bool;
    /// One clock: a CNP for `cnp` arrived this cycle; `tx` = (qp, frame bytes without FCS) of a frame started this cycle.
    fn step(&mut self, cnp: Option<u32>, tx: Option<(u32, u32)>);
    /// Current pacing rate of `qp` in rate units (2^-20 bytes/cycle) and whether it is limited.
    fn rate(&self, qp: u32) -> (u32, bool);
}

/// Receiver-side DCQCN (notification point), one `step` per clock; returns the QP to send a CNP for.
pub trait ReceiverCc {
    /// One clock: `ce` = the local QP of a data frame that arrived with ECN = CE this cycle.
    fn step(&mut self, ce: Option<u32>) -> Option<u32>;
}

/// What the runner asks a backend to build for one NIC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NicSpec {
    /// The DCQCN registers in use (already time-compressed by `time_scale`).
    pub params: HwParams,
    /// Smallest QP table that covers every QP number this NIC uses (a backend may have more).
    pub nqp: usize,
    /// Which NIC: sender 0..N−1, or N for the receiver.
    pub index: usize,
    /// The time compression factor the parameters were made with (for backends that size
    /// byte quantities of their own, e.g. a pacer burst).
    pub time_scale: u32,
    /// The largest frame the NIC sends (bytes without FCS).
    pub max_frame: u32,
}

/// Builds the congestion control of each NIC of a run. The runner calls [`sender`](Self::sender)
/// once per sender NIC and [`receiver`](Self::receiver) once for the receiver NIC, before cycle 0;
/// every returned object is then stepped once per clock from cycle 0 on.
pub trait BackendFactory {
    /// A short description for the output headers (e.g. "reference model").
    fn describe(&self) -> String {
        String::from("unnamed backend")
    }
    /// The sender-side congestion control of sender NIC `nic.index`.
    fn sender(&self, nic: &NicSpec) -> Result<Box<dyn SenderCc>, String>;
    /// The receiver-side congestion control of the receiver NIC.
    fn receiver(&self, nic: &NicSpec) -> Result<Box<dyn ReceiverCc>, String>;
}

/// The reference model (`hematite_model::dcqcn`): [`Rp`] + [`Pacer`] on the sender, [`Np`] on
/// the receiver.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ModelBackend {
    /// Pacer bucket depth in bytes; `None`: max(16 KiB / time_scale, 2 × max_frame) (the
    /// model's default burst, time-compressed like every byte quantity, but never below the two
    /// maximum frames the pacer specification requires).
    pub burst_bytes: Option<u32>,
}

/// [`SenderCc`] of the reference model: an [`Rp`] and a [`Pacer`] sharing one time counter.
#[derive(Debug, Clone)]
pub struct ModelSender {
    /// The reaction point.
    pub rp: Rp,
    /// The pacer.
    pub pacer: Pacer,
}

impl SenderCc for ModelSender {
    fn may_send(&mut self, qp: u32) -> bool {
        self.pacer.may_send(qp, self.rp.now())
    }
    fn step(&mut self, cnp: Option<u32>, tx: Option<(u32, u32)>) {
        // The pacer takes every frame at the time it starts (limited or not); the RP gets the
        // same report this clock; a rate update of this clock goes to the pacer.
        if let Some((q, b)) = tx {
            self.pacer.sent(q, b, self.rp.now());
        }
        let out = self.rp.step(&RpIn { cnp, tx });
        if let Some(u) = out.rate {
            self.pacer.update(&u);
        }
    }
    fn rate(&self, qp: u32) -> (u32, bool) {
        match self.pacer.qp(qp) {
            Some(e) => (e.rate, e.limited),
            None => self.rp.rate(qp),
        }
    }
}

/// [`ReceiverCc`] of the reference model: an [`Np`] (its CNP requests are always accepted).
#[derive(Debug, Clone)]
pub struct ModelReceiver {
    /// The notification point.
    pub np: Np,
}

impl ReceiverCc for ModelReceiver {
    fn step(&mut self, ce: Option<u32>) -> Option<u32> {
        self.np.step(&NpIn { ce, cnp_full: false }).cnp
    }
}

impl BackendFactory for ModelBackend {
    fn describe(&self) -> String {
        String::from("reference model (hematite_model::dcqcn Rp + Pacer, Np)")
    }
    fn sender(&self, nic: &NicSpec) -> Result<Box<dyn SenderCc>, String> {
        let burst = self
            .burst_bytes
            .unwrap_or_else(|| (16_384 / nic.time_scale.max(1)).max(2 * nic.max_frame))
            .clamp(1, hematite_model::dcqcn::PACER_BURST_MAX);
        let rp = Rp::new(nic.params, RpCfg { nqp: nic.nqp, ..RpCfg::default() });
        let pacer = Pacer::new(PacerCfg { nqp: nic.nqp, burst_bytes: burst, time_bits: 32 }, nic.params.line_rate, 0);
        Ok(Box::new(ModelSender { rp, pacer }))
    }
    fn receiver(&self, nic: &NicSpec) -> Result<Box<dyn ReceiverCc>, String> {
        Ok(Box::new(ModelReceiver { np: Np::new(&nic.params, NpCfg { nqp: nic.nqp, time_bits: 32 }) }))
    }
}

/// "DCQCN off": never limits a QP, never asks for a CNP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OffBackend;

/// [`SenderCc`] of [`OffBackend`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OffSender {
    line_rate: u32,
}

impl SenderCc for OffSender {
    fn may_send(&mut self, _qp: u32) -> bool {
        true
    }
    fn step(&mut self, _cnp: Option<u32>, _tx: Option<(u32, u32)>) {}
    fn rate(&self, _qp: u32) -> (u32, bool) {
        (self.line_rate, false)
    }
}

/// [`ReceiverCc`] of [`OffBackend`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OffReceiver;

impl ReceiverCc for OffReceiver {
    fn step(&mut self, _ce: Option<u32>) -> Option<u32> {
        None
    }
}

impl BackendFactory for OffBackend {
    fn describe(&self) -> String {
        String::from("DCQCN off (no rate limiting, no CNPs)")
    }
    fn sender(&self, nic: &NicSpec) -> Result<Box<dyn SenderCc>, String> {
        Ok(Box::new(OffSender { line_rate: nic.params.line_rate }))
    }
    fn receiver(&self, _nic: &NicSpec) -> Result<Box<dyn ReceiverCc>, String> {
        Ok(Box::new(OffReceiver))
    }
}
