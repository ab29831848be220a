//! Cross-check of the no_std context encoders with hematite-model's (random inputs).
use super::*;
use hematite_model::desc as md;
use hematite_model::transport::{AddrVec, Mr as MMr, MrAccess, QpAccess, QpConfig};
use proptest::prelude::*;

fn bits(b: u32) -> impl Strategy<Value = u64> {
    0u64..(1u64 << b)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, .. ProptestConfig::default() })]
    #[test]
    fn qp_ctx_matches_model(
        small in prop::collection::vec(0u8..8, 12),
        pmtu in 1u8..=5, state in 0u8..=5,
        psns in prop::collection::vec(bits(24), 3),
        pd in any::<u32>(), cqs in (any::<u16>(), any::<u16>()),
        bases in (any::<u64>(), any::<u64>()),
        macs in (bits(48), bits(48)), ips in (any::<u128>(), any::<u128>()), ipv6 in any::<bool>(),
        misc in (bits(20), any::<u16>(), any::<u8>(), 0u8..4, 0u8..64, any::<u16>()),
        logs in (0u8..32, 0u8..4, 0u8..32, 0u8..4),
    ) {
        let access = QpAccess { remote_write: small[0] & 1 != 0, remote_read: small[0] & 2 != 0, remote_atomic: small[0] & 4 != 0 };
        let (ip_src, ip_dst) = if ipv6 { ips } else { (ips.0 & 0xFFFF_FFFF, ips.1 & 0xFFFF_FFFF) };
        let cfg = QpConfig {
            pd, pmtu: 128 << pmtu, dest_qpn: psns[2] as u32, sq_psn: psns[0] as u32, rq_psn: psns[1] as u32,
            timeout: small[1] * 4 + (small[2] & 3), retry_cnt: small[3], rnr_retry: small[4],
            min_rnr_timer: small[5] * 4 + (small[6] & 3), max_rd_atomic: small[7] * 2, max_dest_rd_atomic: small[8] * 2,
            access,
            av: AddrVec { eth_src: macs.0, eth_dst: macs.1, ipv6, ip_src, ip_dst, dscp: misc.4, ecn: misc.3, ttl: misc.2,
                          udp_sport: misc.1, flow_label: misc.0 as u32, pkey: misc.5 },
            std_timer: small[11] & 1 != 0,
            uc: small[11] & 2 != 0,
            sr: false, // (no selective-repeat bit in the engine's context)
        };
        let m = md::QpCtxFields { cfg, state, sq_base: bases.0, sq_log_size: logs.0, sq_log_stride: logs.1,
            rq_base: bases.1, rq_log_size: logs.2, rq_log_stride: logs.3, sq_cqn: cqs.0, rq_cqn: cqs.1 };
        let mut acc = 0;
        if access.remote_write { acc |= desc::HM_QPA_REMOTE_WRITE; }
        if access.remote_read { acc |= desc::HM_QPA_REMOTE_READ; }
        if access.remote_atomic { acc |= desc::HM_QPA_REMOTE_ATOMIC; }
        let c = desc::QpCtx {
            uc: cfg.uc,
            std_timer: cfg.std_timer,
            max_dest_rd_atomic: cfg.max_dest_rd_atomic, max_rd_atomic: cfg.max_rd_atomic, min_rnr_timer: cfg.min_rnr_timer,
            rnr_retry: cfg.rnr_retry, retry_cnt: cfg.retry_cnt, timeout: cfg.timeout,
            rq_log_stride: logs.3, rq_log_size: logs.2, sq_log_stride: logs.1, sq_log_size: logs.0,
            access: acc, pmtu, state, rq_cqn: cqs.1, sq_cqn: cqs.0, rq_psn: cfg.rq_psn, sq_psn: cfg.sq_psn,
            dest_qpn: cfg.dest_qpn, pd, rq_base: bases.1, sq_base: bases.0, pkey: misc.5, flow_label: cfg.av.flow_label,
            udp_sport: misc.1, ttl: misc.2, ecn: misc.3, dscp: misc.4, ip_dst, ip_src, ipv6, eth_src: macs.0, eth_dst: macs.1,
        };
        prop_assert_eq!(pad(desc::encode_qp_ctx(&c).unwrap()), md::encode_qp_ctx(&m).unwrap());
    }

    #[test]
    fn cq_ctx_matches_model(base in any::<u64>(), log in 0u8..32, irq in any::<u8>(), valid in any::<bool>()) {
        prop_assert_eq!(pad(desc::encode_cq_ctx(base, log, irq, valid).unwrap()), md::encode_cq_ctx(base, log, irq, valid).unwrap());
    }

    #[test]
    fn mr_ctx_matches_model(base in any::<u64>(), len in any::<u64>(), pd in any::<u32>(), acc in 0u8..16,
                            key in any::<u32>(), valid in any::<bool>()) {
        let access = MrAccess { local_write: acc & 1 != 0, remote_read: acc & 2 != 0, remote_write: acc & 4 != 0, remote_atomic: acc & 8 != 0 };
        let m = MMr { lkey: key, rkey: key, base, len, access, pd };
        prop_assert_eq!(pad(desc::encode_mr_ctx(base, len, pd, acc, key as u8, valid).unwrap()), md::encode_mr_ctx(&m, valid).unwrap());
    }

    #[test]
    fn ctl_cmd_matches_model(op in 0u8..16, t in 0u8..16, fl in any::<u8>(), idx in any::<u16>()) {
        prop_assert_eq!(desc::encode_ctl_cmd(op, t, fl, idx).unwrap(), md::encode_ctl_cmd(op, t, fl, idx).unwrap());
        let s = (idx as u32) & 0xFF | if fl & 1 != 0 { 1 << 31 } else { 0 };
        prop_assert_eq!(desc::decode_ctl_status(s), md::decode_ctl_status(s).unwrap());
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4000, .. ProptestConfig::default() })]
    /// The word-wise field access of the encoders against the model's byte-wise one, at every
    /// offset and width: a value that fits lands where the model puts it and nothing else
    /// changes; one bit too wide is refused and leaves the words as they were.
    #[test]
    fn field_bits_match_the_model(
        lsb in 0usize..160, width in 1usize..=128, v in any::<u128>(), fill in prop::collection::vec(any::<u32>(), 10),
    ) {
        let mut w: Vec<u32> = fill.clone();
        let v = if width == 128 { v } else { v & ((1u128 << width) - 1) };
        let mut bytes: Vec<u8> = fill.iter().flat_map(|x| x.to_le_bytes()).collect();
        let r = desc::set_bits(&mut w, lsb, width, v);
        if lsb + width > 320 {
            prop_assert!(r.is_err());
            prop_assert_eq!(&w, &fill);
        } else {
            prop_assert!(r.is_ok());
            md::set_bits(&mut bytes, lsb, width, v);
            let want: Vec<u32> = bytes.chunks(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
            prop_assert_eq!(&w, &want);
            prop_assert_eq!(desc::get_bits(&w, lsb, width), v);
            prop_assert_eq!(desc::get_bits(&w, lsb, width), md::get_bits(&bytes, lsb, width));
            if width < 128 {
                let before = w.clone();
                prop_assert!(desc::set_bits(&mut w, lsb, width, v | (1u128 << width)).is_err());
                prop_assert_eq!(&w, &before);
            }
        }
    }
}

/// The firmware encodes only a struct's words (QP_WORDS, CQ_WORDS, MR_WORDS); the model's
/// encoders give the whole staging window, whose words above the struct must then be zero.
fn pad<const N: usize>(w: [u32; N]) -> [u32; crate::desc::CTX_WORDS] {
    let mut o = [0u32; crate::desc::CTX_WORDS];
    o[..N].copy_from_slice(&w);
    o
}
