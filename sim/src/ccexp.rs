//! The RTL congestion-control backend of the DCQCN incast experiments
//! (`hematite_netsim::incast`): every sender NIC's reaction point and pacer, and the receiver
//! NIC's notification point, are Verilated RTL (`sim/hw/hm_sim_cc_top.sv`, one instance per
//! NIC, see [`crate::cc`]), stepped once per experiment clock.
//!
//! Timing against the reference-model backend: the RTL's outputs are registered, so a CNP
//! request leaves the NP one clock after the CE frame, and the pacer's may-send answer the
//! sender sees in clock t is the one it computed in clock t−2 (the query is made every clock for
//! the sender's QP; the answer is sampled before the edge). The deficit bucket absorbs this
//! (a packet may start at most two clocks after the tokens ran out).

use crate::cc::{CcSim, HmCcCfg, HmCcIn, HmCcOut, CC_QPS};
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
    last: HmCcOut,
    qp: Option<u32>,
}

impl SenderCc for RtlSender {
    fn may_send(&mut self, qp: u32) -> bool {
        // the answer to the query of two clocks ago; every clock queries the sender's QP (one
        // QP per sender NIC in the incast; before the first query the pacer holds nothing)
        self.qp = Some(qp);
        self.last.query_ok != 0
    }

    fn step(&mut self, cnp: Option<u32>, tx: Option<(u32, u32)>) {
        let q = self.qp.unwrap_or(0);
        let i = HmCcIn {
            s_cnp_valid: cnp.is_some() as u8,
            s_cnp_qpn: cnp.map_or(0, |c| c.min(255) as u8),
            tx_valid: tx.is_some() as u8,
            tx_qpn: tx.map_or(0, |t| t.0.min(255) as u8),
            tx_bytes: tx.map_or(0, |t| t.1.min(0xFFFF) as u16),
            query_qpn: q.min(255) as u8,
            dbg_qpn: q.min(255) as u8,
            ..Default::default()
        };
        self.last = self.sim.tick(&i);
    }

    fn rate(&self, _qp: u32) -> (u32, bool) {
        (self.last.dbg_rate, self.last.dbg_limited != 0)
    }
}

/// The receiver NIC: the RTL notification point (its CNP requests are always accepted).
pub struct RtlReceiver {
    sim: CcSim,
}

impl ReceiverCc for RtlReceiver {
    fn step(&mut self, ce: Option<u32>) -> Option<u32> {
        let i = HmCcIn { ce_valid: ce.is_some() as u8, ce_qpn: ce.map_or(0, |c| c.min(255) as u8), ..Default::default() };
        let o = self.sim.tick(&i);
        (o.m_cnp_valid != 0).then_some(u32::from(o.m_cnp_qpn))
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
        let last = sim.tick(&HmCcIn::default());
        Ok(Box::new(RtlSender { sim, last, qp: None }))
    }

    fn receiver(&self, nic: &NicSpec) -> Result<Box<dyn ReceiverCc>, String> {
        check(nic)?;
        Ok(Box::new(RtlReceiver { sim: CcSim::new(HmCcCfg::from_params(&nic.params, 16_384)) }))
    }
}
