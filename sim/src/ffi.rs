//! The packet-path models: `hm_rx_path` and `hm_tx_path`, each Verilated as its own top at 256
//! and 512 bits, through their generated extern "C" shims (structs and the owning
//! [`HmRxModel`] / [`HmTxModel`] generated on both sides from the models' port lists).

/// 32-bit words of a header record (`hm_roce_hdr_t`).
pub const HDR_WORDS: usize = crate::layout::HDR_BITS.div_ceil(32);

// HmRxIn / HmRxOut / HmRxModel and HmTxIn / HmTxOut / HmTxModel: one field per port (the
// direction prefix kept where a block has both an s_axis_* and an m_axis_* stream); data
// words of the 512-bit model, a 256-bit model uses the low half. Outputs are sampled after the
// clock edge.
include!(concat!(env!("OUT_DIR"), "/shim_rx.rs"));
include!(concat!(env!("OUT_DIR"), "/shim_tx.rs"));

impl HmRxIn {
    /// No frame offered, both outputs ready.
    pub fn idle() -> HmRxIn {
        HmRxIn { hdr_ready: 1, m_axis_tready: 1, ..Default::default() }
    }
}

impl HmTxIn {
    /// No record or payload offered, the MAC ready.
    pub fn idle() -> HmTxIn {
        HmTxIn { m_axis_tready: 1, ..Default::default() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn rejects_unsupported_width() {
        assert!(HmRxModel::new(128).is_none());
        assert!(HmTxModel::new(128).is_none());
    }
    #[test]
    fn reset_state_is_idle() {
        let mut rx = HmRxModel::new(512).unwrap();
        let mut tx = HmTxModel::new(512).unwrap();
        let o = rx.hold(&HmRxIn { rst: 1, ..Default::default() }, 2);
        assert_eq!((o.m_axis_tvalid, o.mon_valid, o.hdr_valid), (0, 0, 0));
        assert_eq!(tx.hold(&HmTxIn { rst: 1, ..Default::default() }, 2).m_axis_tvalid, 0);
    }
}
