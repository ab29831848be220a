//! Attributes and plain values: what QUERY_DEVICE / QUERY_PORT report, QP capacities and
//! attributes (with their MODIFY_QP / QUERY_QP word block), the access and attribute-mask
//! bits, GIDs and the peer description of an RC connection. Nothing here talks to the device.

use crate::{Error, Result};
use hematite_abi::qp as fq;

/// `ibv_access_flags` bits the device supports.
pub mod access {
    pub use hematite_abi::qp::access::{LOCAL_WRITE, REMOTE_ATOMIC, REMOTE_READ, REMOTE_WRITE};
}

/// `ibv_qp_attr_mask` bits (the firmware's MODIFY_QP mask).
pub mod mask {
    pub use hematite_abi::qp::{
        M_ACCESS_FLAGS as ACCESS_FLAGS, M_AV as AV, M_CUR_STATE as CUR_STATE, M_DEST_QPN as DEST_QPN,
        M_MAX_DEST_RD_ATOMIC as MAX_DEST_RD_ATOMIC, M_MAX_QP_RD_ATOMIC as MAX_QP_RD_ATOMIC,
        M_MIN_RNR_TIMER as MIN_RNR_TIMER, M_PATH_MTU as PATH_MTU, M_PKEY_INDEX as PKEY_INDEX, M_PORT as PORT,
        M_RETRY_CNT as RETRY_CNT, M_RNR_RETRY as RNR_RETRY, M_RQ_PSN as RQ_PSN, M_SQ_PSN as SQ_PSN, M_STATE as STATE,
        M_STD_TIMER as STD_TIMER, M_TIMEOUT as TIMEOUT,
    };
}

/// QP states (ibverbs numbering), as the firmware's state machine defines them.
pub use hematite_abi::qp::QpState;

fn qp_state(v: u32) -> Result<QpState> {
    QpState::from_u32(v).ok_or_else(|| Error::Device(format!("QP state {v}")))
}

/// What QUERY_DEVICE / QUERY_PORT report (`ibv_device_attr` / `ibv_port_attr`'s fields), in
/// hematite-abi's one word layout.
pub use hematite_abi::reply::{DeviceAttr, PortAttr};

/// An asynchronous event from the device's event queue.
pub use hematite_model::desc::Event as AsyncEvent;

/// A 16-byte GID.
pub type Gid = [u8; 16];

/// The IPv4-mapped GID of `ip` (`::ffff:a.b.c.d`), as RoCEv2 uses for IPv4.
pub fn gid_from_ipv4(ip: u32) -> Gid {
    let mut g = [0u8; 16];
    g[10] = 0xFF;
    g[11] = 0xFF;
    g[12..16].copy_from_slice(&ip.to_be_bytes());
    g
}

/// The IPv6 link-local GID of a port with MAC `mac`: fe80::/64 with the modified EUI-64
/// interface identifier (RFC 4291 appendix A), the address RoCEv2 over IPv6 uses by default.
pub fn gid_link_local(mac: u64) -> Gid {
    let m = mac.to_be_bytes();
    [0xfe, 0x80, 0, 0, 0, 0, 0, 0, m[2] ^ 0x02, m[3], m[4], 0xff, 0xfe, m[5], m[6], m[7]]
}

/// The MAC address inside an IPv6 link-local GID with a modified EUI-64 interface identifier
/// (`fe80::xxxx:xxff:fexx:xxxx`); None for any other GID (those need neighbour discovery).
pub fn mac_of_link_local(g: &Gid) -> Option<u64> {
    if g[..8] != [0xfe, 0x80, 0, 0, 0, 0, 0, 0] || g[11] != 0xff || g[12] != 0xfe {
        return None;
    }
    Some(u64::from_be_bytes([0, 0, g[8] ^ 0x02, g[9], g[10], g[13], g[14], g[15]]))
}

pub(super) fn gid_words(g: &Gid) -> [u32; 4] {
    let mut w = [0u32; 4];
    for (i, x) in w.iter_mut().enumerate() {
        *x = u32::from_be_bytes(g[4 * i..4 * i + 4].try_into().unwrap());
    }
    w
}

/// Queue sizes asked for at QP creation (the device may round up; see [`Qp::caps`](super::Qp::caps)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpCaps {
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
    pub max_send_sge: u32,
    pub max_recv_sge: u32,
    pub max_inline_data: u32,
}

impl Default for QpCaps {
    fn default() -> Self {
        QpCaps { max_send_wr: 64, max_recv_wr: 64, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 64 }
    }
}

/// Attributes for [`Nic::modify_qp`](super::Nic::modify_qp) (the fields `mask` selects are used).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpAttr {
    pub qp_state: QpState,
    pub cur_qp_state: QpState,
    pub qp_access_flags: u32,
    pub pkey_index: u32,
    pub port_num: u32,
    pub path_mtu: u32,
    pub timeout: u32,
    pub retry_cnt: u32,
    pub rnr_retry: u32,
    pub rq_psn: u32,
    pub sq_psn: u32,
    pub max_rd_atomic: u32,
    pub max_dest_rd_atomic: u32,
    pub min_rnr_timer: u32,
    pub dest_qp_num: u32,
    pub sgid_index: u32,
    pub dgid: Gid,
    pub dmac: u64,
    pub hop_limit: u32,
    pub traffic_class: u32,
    pub flow_label: u32,
    pub udp_sport: u32,
    /// 1: the standard ACK timeout alone, no adaptive early retransmission (mask bit
    /// `M_STD_TIMER`, Hematite's own; docs/transport-engine.md).
    pub std_timer: u32,
}

impl Default for QpAttr {
    fn default() -> Self {
        QpAttr {
            qp_state: QpState::Reset,
            cur_qp_state: QpState::Reset,
            qp_access_flags: 0,
            pkey_index: 0,
            port_num: 1,
            path_mtu: 5,
            timeout: 14,
            retry_cnt: 7,
            rnr_retry: 7,
            rq_psn: 0,
            sq_psn: 0,
            max_rd_atomic: 4,
            max_dest_rd_atomic: 4,
            min_rnr_timer: 12,
            dest_qp_num: 0,
            sgid_index: 0,
            dgid: [0; 16],
            dmac: 0,
            hop_limit: 64,
            traffic_class: 0,
            flow_label: 0,
            udp_sport: 0,
            std_timer: 0,
        }
    }
}

impl QpAttr {
    pub(super) fn words(&self) -> [u32; fq::ATTR_WORDS] {
        let mut w = [0u32; fq::ATTR_WORDS];
        w[fq::A_QP_STATE] = self.qp_state as u32;
        w[fq::A_CUR_QP_STATE] = self.cur_qp_state as u32;
        w[fq::A_ACCESS_FLAGS] = self.qp_access_flags;
        w[fq::A_PKEY_INDEX] = self.pkey_index;
        w[fq::A_PORT_NUM] = self.port_num;
        w[fq::A_PATH_MTU] = self.path_mtu;
        w[fq::A_TIMEOUT] = self.timeout;
        w[fq::A_RETRY_CNT] = self.retry_cnt;
        w[fq::A_RNR_RETRY] = self.rnr_retry;
        w[fq::A_RQ_PSN] = self.rq_psn;
        w[fq::A_SQ_PSN] = self.sq_psn;
        w[fq::A_MAX_RD_ATOMIC] = self.max_rd_atomic;
        w[fq::A_MAX_DEST_RD_ATOMIC] = self.max_dest_rd_atomic;
        w[fq::A_MIN_RNR_TIMER] = self.min_rnr_timer;
        w[fq::A_DEST_QPN] = self.dest_qp_num;
        w[fq::A_SGID_INDEX] = self.sgid_index;
        w[fq::A_DGID..fq::A_DGID + 4].copy_from_slice(&gid_words(&self.dgid));
        w[fq::A_DMAC_LO] = self.dmac as u32;
        w[fq::A_DMAC_HI] = (self.dmac >> 32) as u32;
        w[fq::A_HOP_LIMIT] = self.hop_limit;
        w[fq::A_TRAFFIC_CLASS] = self.traffic_class;
        w[fq::A_FLOW_LABEL] = self.flow_label;
        w[fq::A_UDP_SPORT] = self.udp_sport;
        w[fq::A_STD_TIMER] = self.std_timer;
        w
    }

    pub(super) fn from_words(w: &[u32]) -> Result<QpAttr> {
        if w.len() < fq::ATTR_WORDS {
            return Err(Error::Device("short QP attribute block".into()));
        }
        let mut g = [0u8; 16];
        for i in 0..4 {
            g[4 * i..4 * i + 4].copy_from_slice(&w[fq::A_DGID + i].to_be_bytes());
        }
        Ok(QpAttr {
            qp_state: qp_state(w[fq::A_QP_STATE])?,
            cur_qp_state: qp_state(w[fq::A_QP_STATE])?,
            qp_access_flags: w[fq::A_ACCESS_FLAGS],
            pkey_index: w[fq::A_PKEY_INDEX],
            port_num: w[fq::A_PORT_NUM],
            path_mtu: w[fq::A_PATH_MTU],
            timeout: w[fq::A_TIMEOUT],
            retry_cnt: w[fq::A_RETRY_CNT],
            rnr_retry: w[fq::A_RNR_RETRY],
            rq_psn: w[fq::A_RQ_PSN],
            sq_psn: w[fq::A_SQ_PSN],
            max_rd_atomic: w[fq::A_MAX_RD_ATOMIC],
            max_dest_rd_atomic: w[fq::A_MAX_DEST_RD_ATOMIC],
            min_rnr_timer: w[fq::A_MIN_RNR_TIMER],
            dest_qp_num: w[fq::A_DEST_QPN],
            sgid_index: w[fq::A_SGID_INDEX],
            dgid: g,
            dmac: w[fq::A_DMAC_LO] as u64 | (w[fq::A_DMAC_HI] as u64) << 32,
            hop_limit: w[fq::A_HOP_LIMIT],
            traffic_class: w[fq::A_TRAFFIC_CLASS],
            flow_label: w[fq::A_FLOW_LABEL],
            udp_sport: w[fq::A_UDP_SPORT],
            std_timer: w[fq::A_STD_TIMER],
        })
    }
}

/// What the other side of an RC connection tells us (exchanged out of band).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RcPeer {
    pub qpn: u32,
    /// The first PSN the peer sends with (our rq_psn).
    pub psn: u32,
    pub gid: Gid,
    pub mac: u64,
}

#[cfg(test)]
mod gid_tests {
    use super::*;

    #[test]
    fn link_local_gid_round_trip() {
        let mac = 0x0248_4d00_0001;
        let g = gid_link_local(mac);
        assert_eq!(g, [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x00, 0x48, 0x4d, 0xff, 0xfe, 0x00, 0x00, 0x01]);
        assert_eq!(mac_of_link_local(&g), Some(mac));
        // rxe's link-local GID on qemu's first NIC (fe80::5054:ff:fe00:1)
        let rxe = [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x50, 0x54, 0x00, 0xff, 0xfe, 0x00, 0x00, 0x01];
        assert_eq!(mac_of_link_local(&rxe), Some(0x5254_0000_0001));
        // not link-local, or not an EUI-64 identifier, or IPv4-mapped: no MAC
        let mut global = g;
        global[0] = 0x20;
        assert_eq!(mac_of_link_local(&global), None);
        let mut privacy = g;
        privacy[11] = 0x12;
        assert_eq!(mac_of_link_local(&privacy), None);
        assert_eq!(mac_of_link_local(&gid_from_ipv4(0x0a4d_0001)), None);
    }
}
