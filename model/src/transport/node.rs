//! A host: memory, MR table and RC / UC / UD QPs.

use super::mem::{HostMem, Mr, MrAccess, MrTable};
use super::qp::{Ctx, Exec, Qp};
use super::ud::{UdConfig, UdDest, UdQp, UdRecv};
use super::{Cqe, Pkt, PostError, QpConfig, QpState, RecvWr, SendWr};
use crate::opcode;
use crate::HdrRecord;
use std::collections::BTreeMap;

/// One host with its QPs. Packets addressed to unknown QPs are dropped.
#[derive(Debug, Clone, Default)]
pub struct Node {
    /// Host memory.
    pub mem: HostMem,
    /// Memory regions.
    pub mrs: MrTable,
    qps: BTreeMap<u32, Qp>,
    uds: BTreeMap<u32, UdQp>,
    unknown_qp_drops: u64,
}

impl Node {
    /// Empty host.
    pub fn new() -> Node {
        Node::default()
    }

    /// Registers an MR (`None` if the range wraps or the table is full).
    pub fn reg_mr(&mut self, pd: u32, base: u64, len: u64, access: MrAccess) -> Option<Mr> {
        self.mrs.register(pd, base, len, access)
    }

    /// Deregisters an MR by key.
    pub fn dereg_mr(&mut self, key: u32) -> bool {
        self.mrs.deregister(key)
    }

    /// Creates a UD QP in RTS (QP numbers are shared with the connected QPs).
    pub fn create_ud_qp(&mut self, qpn: u32, cfg: UdConfig) -> Result<(), PostError> {
        if self.qps.contains_key(&qpn) || self.uds.contains_key(&qpn) {
            return Err(PostError::InvalidAttr);
        }
        self.uds.insert(qpn, UdQp::new(qpn, cfg)?);
        Ok(())
    }

    /// The UD QP `qpn`.
    pub fn ud_qp(&self, qpn: u32) -> Option<&UdQp> {
        self.uds.get(&qpn)
    }

    /// State transition of UD QP `qpn` (see [`UdQp::modify_state`]).
    pub fn modify_ud_state(&mut self, qpn: u32, to: QpState) -> Result<(), PostError> {
        self.uds.get_mut(&qpn).ok_or(PostError::NoQp)?.modify_state(to)
    }

    /// Posts a send WR on UD QP `qpn` towards `dest`.
    pub fn post_send_ud(&mut self, qpn: u32, wr: SendWr, dest: UdDest) -> Result<(), PostError> {
        let qp = self.uds.get_mut(&qpn).ok_or(PostError::NoQp)?;
        qp.post_send(wr, dest, &mut Ctx { mem: &mut self.mem, mrs: &mut self.mrs })
    }

    /// Drains the receive completions of UD QP `qpn`.
    pub fn poll_ud_recv_cq(&mut self, qpn: u32) -> Vec<UdRecv> {
        self.uds.get_mut(&qpn).map(|q| q.poll_recv_cq()).unwrap_or_default()
    }

    /// Creates a connected QP in RTS.
    pub fn create_qp(&mut self, qpn: u32, cfg: QpConfig) -> Result<(), PostError> {
        if self.qps.contains_key(&qpn) || self.uds.contains_key(&qpn) {
            return Err(PostError::InvalidAttr);
        }
        self.qps.insert(qpn, Qp::new(qpn, cfg)?);
        Ok(())
    }

    /// The QP `qpn`.
    pub fn qp(&self, qpn: u32) -> Option<&Qp> {
        self.qps.get(&qpn)
    }

    /// All QP numbers.
    pub fn qpns(&self) -> Vec<u32> {
        self.qps.keys().copied().collect()
    }

    /// State transition of QP `qpn` (see [`Qp::modify_state`]).
    pub fn modify_qp_state(&mut self, qpn: u32, to: QpState) -> Result<(), PostError> {
        self.qps.get_mut(&qpn).ok_or(PostError::NoQp)?.modify_state(to)
    }

    /// Posts a send WR.
    pub fn post_send(&mut self, qpn: u32, wr: SendWr) -> Result<(), PostError> {
        let qp = self.qps.get_mut(&qpn).ok_or(PostError::NoQp)?;
        qp.post_send(wr, &mut Ctx { mem: &mut self.mem, mrs: &mut self.mrs })
    }

    /// Posts a receive WR (a connected or a UD QP).
    pub fn post_recv(&mut self, qpn: u32, wr: RecvWr) -> Result<(), PostError> {
        if let Some(u) = self.uds.get_mut(&qpn) {
            return u.post_recv(wr);
        }
        self.qps.get_mut(&qpn).ok_or(PostError::NoQp)?.post_recv(wr)
    }

    /// Drains the send CQ of `qpn` (a connected or a UD QP).
    pub fn poll_send_cq(&mut self, qpn: u32) -> Vec<Cqe> {
        if let Some(u) = self.uds.get_mut(&qpn) {
            return u.poll_send_cq();
        }
        self.qps.get_mut(&qpn).map(|q| q.poll_send_cq()).unwrap_or_default()
    }

    /// Drains the receive CQ of `qpn`.
    pub fn poll_recv_cq(&mut self, qpn: u32) -> Vec<Cqe> {
        self.qps.get_mut(&qpn).map(|q| q.poll_recv_cq()).unwrap_or_default()
    }

    /// Handles one received packet at time `now` (ns). UD packets go to a UD QP, RC and UC
    /// ones to a connected QP (which drops the other class of the two); anything else, and
    /// unknown QPs, are dropped here.
    pub fn receive(&mut self, now: u64, rec: &HdrRecord, payload: &[u8]) {
        let class = opcode::wire_info(rec.opcode).map(|i| i.class);
        if class == Some(opcode::Transport::Ud) {
            match self.uds.get_mut(&rec.dest_qp) {
                Some(u) => u.receive(rec, payload, &mut Ctx { mem: &mut self.mem, mrs: &mut self.mrs }),
                None => self.unknown_qp_drops += 1,
            }
            return;
        }
        let conn = matches!(class, Some(opcode::Transport::Rc | opcode::Transport::Uc));
        match self.qps.get_mut(&rec.dest_qp) {
            Some(qp) if conn => qp.receive(now, rec, payload, &mut Ctx { mem: &mut self.mem, mrs: &mut self.mrs }),
            _ => self.unknown_qp_drops += 1,
        }
    }

    /// Everything the node sends now, QPs in ascending QPN order.
    pub fn poll_tx(&mut self, now: u64) -> Vec<Pkt> {
        let mut out = Vec::new();
        for qp in self.qps.values_mut() {
            out.extend(qp.poll_tx(now, &mut Ctx { mem: &mut self.mem, mrs: &mut self.mrs }));
        }
        for u in self.uds.values_mut() {
            out.extend(u.poll_tx(&mut Ctx { mem: &mut self.mem, mrs: &mut self.mrs }));
        }
        out
    }

    /// Advances timers to `now`.
    pub fn tick(&mut self, now: u64) {
        for qp in self.qps.values_mut() {
            qp.tick(now, &mut Ctx { mem: &mut self.mem, mrs: &mut self.mrs });
        }
    }

    /// Earliest timer deadline of any QP.
    pub fn next_deadline(&self) -> Option<u64> {
        self.qps.values().filter_map(|q| q.next_deadline()).min()
    }

    /// Every responder execution of every QP.
    pub fn exec_log(&self) -> Vec<Exec> {
        self.qps.values().flat_map(|q| q.exec_log().iter().copied()).collect()
    }

    /// Packets dropped for an unknown QP, or an opcode neither RC, UC nor UD.
    pub fn unknown_qp_drops(&self) -> u64 {
        self.unknown_qp_drops
    }
}
