//! The RTL congestion-control backend of the DCQCN incast experiments
//! (`hematite_netsim::incast`): every sender NIC's reaction point and pacer, and the receiver
//! NIC's notification point, are Verilated RTL ([`crate::cc`]: `CcSim` per sender, `CcNpSim` at
//! the receiver), stepped once per experiment clock.
//!
//! Timing against the reference-model backend: the RTL's outputs are registered, so a CNP
//! request leaves the NP one clock after the CE frame, and the pacer's may-send answer the
//! sender sees in clock t is the one it computed in clock t−2 (the query is made every clock for
//! the sender's QP; the answer is sampled before the edge). The deficit bucket absorbs this
//! (a packet may start at most two clocks after the tokens ran out).

use crate::cc::{CcIn, CcNpSim, CcOut, CcSim, HmCcCfg, CC_QPS};
use hematite_netsim::incast::{BackendFactory, NicSpec, ReceiverCc, SenderCc};

/// The RTL backend (`--backend rtl`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RtlBackend {
    /// Pacer bucket depth in bytes; `None`: the model backend's default
    /// (max(16 KiB / time_scale, 2 × the largest frame)).
    pub burst_bytes: Option<u32>,
}

fn check(nic: &NicSpec) -> Result<(), String> {
    if nic.nqp > CC_QPS {
        return Err(format!("the RTL backend has {CC_QPS} QPs per NIC; the run needs {}", nic.nqp));
    }
    Ok(())
}

/// A sender NIC: the RTL reaction point and pacer (the NP part of the instance idles).
pub struct RtlSender {
    sim: CcSim,
    last: CcOut,
    qp: Option<u32>,
}

impl SenderCc for RtlSender {
    fn may_send(&mut self, qp: u32) -> bool {
        // the answer to the query of two clocks ago; every clock queries the sender's QP (one
        // QP per sender NIC in the incast; before the first query the pacer holds nothing)
        self.qp = Some(qp);
        self.last.pacer.query_ok != 0
    }

    fn step(&mut self, cnp: Option<u32>, tx: Option<(u32, u32)>) {
        let q = self.qp.unwrap_or(0);
        let i = CcIn {
            cnp: cnp.map(|c| c.min(255) as u8),
            tx: tx.map(|t| (t.0.min(255) as u8, t.1.min(0xFFFF) as u16)),
            query_qpn: q.min(255) as u8,
            dbg_qpn: q.min(255) as u8,
        };
        self.last = self.sim.tick(&i);
    }

    fn rate(&self, _qp: u32) -> (u32, bool) {
        (self.last.pacer.dbg_rate, self.last.pacer.dbg_limited != 0)
    }
}

/// The receiver NIC: the RTL notification point (its CNP requests are always accepted).
pub struct RtlReceiver {
    sim: CcNpSim,
}

impl ReceiverCc for RtlReceiver {
    fn step(&mut self, ce: Option<u32>) -> Option<u32> {
        self.sim.tick(ce.map(|c| c.min(255) as u8)).map(u32::from)
    }
}

impl BackendFactory for RtlBackend {
    fn describe(&self) -> String {
        String::from("Verilated RTL (rtl/cc: hm_dcqcn_rp + hm_dcqcn_pacer per sender, hm_dcqcn_np at the receiver)")
    }

    fn sender(&self, nic: &NicSpec) -> Result<Box<dyn SenderCc>, String> {
        check(nic)?;
        let burst = self
            .burst_bytes
            .unwrap_or_else(|| (16_384 / nic.time_scale.max(1)).max(2 * nic.max_frame))
            .clamp(1, hematite_model::dcqcn::PACER_BURST_MAX);
        let mut sim = CcSim::new(HmCcCfg::from_params(&nic.params, burst));
        let last = sim.tick(&CcIn::default());
        Ok(Box::new(RtlSender { sim, last, qp: None }))
    }

    fn receiver(&self, nic: &NicSpec) -> Result<Box<dyn ReceiverCc>, String> {
        check(nic)?;
        Ok(Box::new(RtlReceiver { sim: CcNpSim::new(nic.params.cnp_interval) }))
    }
}
