//! Every opcode's success path, what the engine sees, ranges, exhaustion, churn, in-use
//! refusals, engine failures and malformed commands.
use super::*;
use crate::res::FIRST_QPN;
use hematite_model::desc as md;
use hematite_model::transport::{AddrVec, Mr as MMr, MrAccess, QpAccess, QpConfig};
use proptest::prelude::*;

#[test]
fn query_device_port_counters() {
    let mut f = fw();
    let d = ok(&mut f, OP_QUERY_DEVICE, &[]);
    assert_eq!(d.len(), 21);
    assert_eq!(d[4], crate::res::FW_MAX_QP.min(64) as u32, "max_qp = min(FW, 2^6): every entry, QPNs 0 and 1 reserved");
    assert_eq!(d[7], 64, "max_cq");
    assert_eq!(d[9], crate::res::FW_MAX_MR.min(4096) as u32, "max_mr = min(FW, 2^12)");
    assert!(d[8] >= 512, "max_cqe >= 512 (PROVIDER.md)");
    assert_eq!((d[15], d[16], d[17]), (4, 4, 1));
    let p = ok(&mut f, OP_QUERY_PORT, &[1]);
    assert_eq!(p, vec![1, 5, 5, 4, 1 << 26, 1 << 31, 1, 2, 32, 2, 2], "no link seen yet: DOWN, Polling");
    f.link(true);
    let p = ok(&mut f, OP_QUERY_PORT, &[1]);
    assert_eq!(p, vec![4, 5, 5, 4, 1 << 26, 1 << 31, 1, 2, 32, 2, 5]);
    assert_eq!(cmd(&mut f, OP_QUERY_PORT, &[2]).0, Status::BadParam as u8);
    let c = ok(&mut f, OP_QUERY_COUNTERS, &[]);
    assert_eq!(c.len(), 13 + 32, "firmware counters, then CAPS' 32 engine counters");
    assert_eq!(c[12], 32);
    assert_eq!(&c[13..], &(0..32).map(|i| 0xC000 + i).collect::<Vec<u32>>()[..], "engine counters from HM_CTL_CNT");
    assert_eq!(c[0], 4, "commands before this one");
    assert_eq!(c[1], 3, "OK");
    assert_eq!(c[1 + Status::BadParam as usize], 1);
}

#[test]
fn pd_mr_cq_paths_and_engine_writes() {
    let mut f = fw();
    let pd = ok(&mut f, OP_ALLOC_PD, &[])[0];
    assert_eq!(pd, 1);
    let keys = ok(&mut f, OP_REG_MR, &[pd, 0x1000, 0x1, 0x2000, 0, 0xF | 1 << 20]);
    assert_eq!(keys[0], keys[1]);
    let key = keys[0];
    let w = f.eng.bus.log.last().unwrap().clone();
    assert_eq!((w.table, w.flags, w.index), (desc::HM_CTL_TBL_MR, 0, (key >> 8) as u16));
    let m = MMr { lkey: key, rkey: key, base: 0x1_0000_1000, len: 0x2000, access: MrAccess::ALL, pd };
    assert_eq!(w.words, md::encode_mr_ctx(&m, true).unwrap());
    assert_eq!(cmd(&mut f, OP_DEALLOC_PD, &[pd]).0, Status::InUse as u8);
    ok(&mut f, OP_DEREG_MR, &[key]);
    let (mm, valid) = md::decode_mr_ctx(&f.eng.bus.log.last().unwrap().words, key >> 8).unwrap();
    assert!(!valid);
    assert_eq!(mm.lkey, key);
    assert_eq!(cmd(&mut f, OP_DEREG_MR, &[key]).0, Status::BadHandle as u8, "stale key");
    ok(&mut f, OP_DEALLOC_PD, &[pd]);
    assert_eq!(cmd(&mut f, OP_DEALLOC_PD, &[pd]).0, Status::BadHandle as u8);

    let cq = ok(&mut f, OP_CREATE_CQ, &[9, 0x4000, 0x2, 3]);
    assert_eq!(cq, vec![0, 512]);
    let w = f.eng.bus.log.last().unwrap().clone();
    assert_eq!((w.table, w.flags, w.index), (desc::HM_CTL_TBL_CQ, desc::HM_CTL_F_LOAD_CQ, 0));
    assert_eq!(w.words, md::encode_cq_ctx(0x2_0000_4000, 9, 3, true).unwrap());
    assert_eq!(ok(&mut f, OP_QUERY_CQ, &[0]), vec![9, 0x4000, 2, 3, 0]);
    ok(&mut f, OP_DESTROY_CQ, &[0]);
    assert_eq!(f.eng.bus.tables[&(desc::HM_CTL_TBL_CQ, 0)], [0; CTX_WORDS]);
    assert_eq!(cmd(&mut f, OP_QUERY_CQ, &[0]).0, Status::BadHandle as u8);
}

#[test]
fn rereg_mr_in_place() {
    let mut f = fw();
    let pd = ok(&mut f, OP_ALLOC_PD, &[])[0];
    let pd2 = ok(&mut f, OP_ALLOC_PD, &[])[0];
    let key = ok(&mut f, OP_REG_MR, &[pd, 0x1000, 0, 0x2000, 0, 1])[0];
    // refusals change nothing: a stale key, an unknown PD, the REG_MR parameter checks
    let before = snap(&f);
    for (args, st) in [
        ([key ^ 0x80, pd, 0, 0, 64, 0, 1], Status::BadHandle),
        ([key, pd2 + 7, 0, 0, 64, 0, 1], Status::BadHandle),
        ([key, pd, 0, 0, 0, 0, 1], Status::BadParam),
        ([key, pd, 0, 0, 64, 0, 2], Status::BadParam),
        ([key, pd, 0xFFFF_F000, u32::MAX, 0x2000, 0, 1], Status::BadParam),
        ([key, pd, 0, 0, 64, 0, 32 | 1], Status::NotSupported),
    ] {
        assert_eq!(cmd(&mut f, OP_REREG_MR, &args).0, st as u8, "{args:?}");
        assert_eq!(snap(&f), before, "{args:?}");
    }
    // new PD, memory and access; the same key, one entry write with the same tag
    assert_eq!(ok(&mut f, OP_REREG_MR, &[key, pd2, 0x8000, 0x2, 0x3000, 0, 0x7]), vec![key]);
    let w = f.eng.bus.log.last().unwrap().clone();
    assert_eq!((w.table, w.index), (desc::HM_CTL_TBL_MR, (key >> 8) as u16));
    let access = MrAccess { local_write: true, remote_write: true, remote_read: true, remote_atomic: false };
    let m = MMr { lkey: key, rkey: key, base: 0x2_0000_8000, len: 0x3000, access, pd: pd2 };
    assert_eq!(w.words, md::encode_mr_ctx(&m, true).unwrap());
    // the PD references moved with it
    ok(&mut f, OP_DEALLOC_PD, &[pd]);
    assert_eq!(cmd(&mut f, OP_DEALLOC_PD, &[pd2]).0, Status::InUse as u8);
    ok(&mut f, OP_DEREG_MR, &[key]);
    assert_eq!(cmd(&mut f, OP_REREG_MR, &[key, pd2, 0, 0, 64, 0, 1]).0, Status::BadHandle as u8, "after DEREG_MR");
    ok(&mut f, OP_DEALLOC_PD, &[pd2]);
}

#[test]
fn mr_and_cq_ranges() {
    let mut f = fw();
    let pd = ok(&mut f, OP_ALLOC_PD, &[])[0];
    let before = snap(&f);
    for (args, st) in [
        ([pd + 1, 0, 0, 64, 0, 1], Status::BadHandle),
        ([pd, 0, 0, 0, 0, 1], Status::BadParam),                  // zero length
        ([pd, 0xFFFF_F000, u32::MAX, 0x2000, 0, 1], Status::BadParam), // wraps
        ([pd, 0, 0, 64, 0, 2], Status::BadParam),                 // REMOTE_WRITE w/o LOCAL_WRITE
        ([pd, 0, 0, 64, 0, 8], Status::BadParam),                 // REMOTE_ATOMIC w/o LOCAL_WRITE
        ([pd, 0, 0, 64, 0, 1 << 12], Status::BadParam),           // unknown bit
        ([pd, 0, 0, 64, 0, 16 | 1], Status::NotSupported),        // MW_BIND
        ([pd, 0, 0, 64, 0, 64 | 1], Status::NotSupported),        // ON_DEMAND
    ] {
        assert_eq!(cmd(&mut f, OP_REG_MR, &args).0, st as u8, "{args:?}");
        assert_eq!(snap(&f), before);
    }
    for (args, st) in [
        ([0, 0, 0, 0], Status::BadParam),
        ([17, 0, 0, 0], Status::BadParam),
        ([4, 0x10, 0, 0], Status::BadParam),
        ([4, 0, 0, 16], Status::BadParam),
    ] {
        assert_eq!(cmd(&mut f, OP_CREATE_CQ, &args).0, st as u8, "{args:?}");
        assert_eq!(snap(&f), before);
    }
}

#[test]
fn qp_lifecycle_and_context_matches_model() {
    let mut f = fw();
    let (pd, cq, q) = setup_qp(&mut f);
    assert_eq!(q, FIRST_QPN as u32);
    assert_eq!(ok(&mut f, OP_QUERY_CQ, &[cq])[4], 2, "send + recv CQ references");
    drive(&mut f, q, QpState::Rts);
    let w = f.eng.bus.log.last().unwrap().clone();
    assert_eq!((w.table, w.flags, w.index), (desc::HM_CTL_TBL_QP, desc::HM_CTL_F_LOAD_SQ, q as u16));
    let a = attrs(QpState::Rts);
    let cfg = QpConfig {
        pd,
        pmtu: 4096,
        dest_qpn: a[A_DEST_QPN],
        sq_psn: a[A_SQ_PSN],
        rq_psn: a[A_RQ_PSN],
        timeout: 14,
        retry_cnt: 7,
        rnr_retry: 7,
        min_rnr_timer: 12,
        max_rd_atomic: 4,
        max_dest_rd_atomic: 4,
        access: QpAccess::ALL,
        av: AddrVec {
            eth_src: 0x0011_2233_4455,
            eth_dst: 0xAABB_6677_8899,
            ipv6: false,
            ip_src: 0x0A00_0001,
            ip_dst: 0x0A00_0002,
            dscp: 106 >> 2,
            ecn: 2,
            ttl: 64,
            udp_sport: 0xC000 | q as u16,
            flow_label: 0x12345,
            pkey: 0xFFFF,
        },
        std_timer: false,
        uc: false,
        sr: false,
    };
    let want = md::QpCtxFields {
        cfg,
        state: desc::HM_QPS_RTS,
        sq_base: 0x20_0000,
        sq_log_size: 7,
        sq_log_stride: 1,
        rq_base: 0x30_0000,
        rq_log_size: 7,
        rq_log_stride: 0,
        sq_cqn: cq as u16,
        rq_cqn: cq as u16,
    };
    assert_eq!(w.words, md::encode_qp_ctx(&want).unwrap());
    // QUERY_QP returns what was set.
    let o = ok(&mut f, OP_QUERY_QP, &[q]);
    assert_eq!(o.len(), ATTR_WORDS + 8);
    assert_eq!(o[A_QP_STATE], QpState::Rts as u32);
    for i in [A_ACCESS_FLAGS, A_PATH_MTU, A_TIMEOUT, A_RQ_PSN, A_SQ_PSN, A_DEST_QPN, A_DMAC_LO, A_DMAC_HI, A_FLOW_LABEL] {
        assert_eq!(o[i], a[i], "attribute word {i}");
    }
    assert_eq!(&o[ATTR_WORDS..], &[128, 128, 6, 3, 96, pd, cq, cq]);
    assert_eq!(o[A_STD_TIMER], 0, "adaptive retransmission by default");
    // Hematite's own STD_TIMER (RTS -> RTS): 2 is refused and changes nothing; 1 is written to
    // the context's std_timer bit (only that bit differs) and QUERY_QP reports it.
    let before = snap(&f);
    let mut t = [0u32; ATTR_WORDS];
    t[A_STD_TIMER] = 2;
    assert_eq!(modify(&mut f, q, M_STD_TIMER, &t), Status::BadParam as u8);
    assert_eq!(snap(&f), before);
    t[A_STD_TIMER] = 1;
    assert_eq!(modify(&mut f, q, M_STD_TIMER, &t), 0);
    let w = f.eng.bus.log.last().unwrap().clone();
    let mut std = want;
    std.cfg.std_timer = true;
    assert_eq!(w.words, md::encode_qp_ctx(&std).unwrap());
    assert_eq!(ok(&mut f, OP_QUERY_QP, &[q])[A_STD_TIMER], 1);
    // In use.
    assert_eq!(cmd(&mut f, OP_DESTROY_CQ, &[cq]).0, Status::InUse as u8);
    assert_eq!(cmd(&mut f, OP_DEALLOC_PD, &[pd]).0, Status::InUse as u8);
    // IPv6 AV with an IPv4 source GID is refused.
    let mut b = attrs(QpState::Rts);
    b[A_DGID..A_DGID + 4].copy_from_slice(&[0xFE80_0000, 0, 0, 1]);
    let before = snap(&f);
    assert_eq!(modify(&mut f, q, M_STATE | M_AV, &{ let mut x = b; x[A_QP_STATE] = QpState::Sqd as u32; x }), Status::BadAttrMask as u8);
    assert_eq!(snap(&f), before);
    // Destroy in RTS: ERR then a zero context; references dropped.
    let n = f.eng.bus.log.len();
    ok(&mut f, OP_DESTROY_QP, &[q]);
    let log = &f.eng.bus.log[n..];
    assert_eq!(log.len(), 2);
    assert_eq!(desc::get(&log[0].words, desc::HM_QP_CTX_T_FIELDS, "state") as u8, desc::HM_QPS_ERR);
    assert_eq!(log[1].words, [0; CTX_WORDS]);
    assert_eq!(cmd(&mut f, OP_QUERY_QP, &[q]).0, Status::BadHandle as u8);
    ok(&mut f, OP_DESTROY_CQ, &[cq]);
    ok(&mut f, OP_DEALLOC_PD, &[pd]);
}

/// A UC QP: created with IBV_QPT_UC, moved to RTS with UC's attribute masks (RC's
/// reliability attributes refused, as the kernel's table refuses them), its context has the
/// uc bit, an infinite ACK timeout and no adaptive retransmission.
#[test]
fn uc_qp_masks_and_context() {
    let mut f = fw();
    let (pd, cq, _) = setup_qp(&mut f);
    let mut args = create_qp_args(pd, cq);
    args[3] = crate::fw::QPT_UC;
    let q = ok(&mut f, OP_CREATE_QP, &args)[0];
    let a = attrs(QpState::Init);
    assert_eq!(modify(&mut f, q, INIT_MASK, &a), 0);
    let uc_rtr = M_STATE | M_AV | M_PATH_MTU | M_DEST_QPN | M_RQ_PSN;
    let uc_rts = M_STATE | M_SQ_PSN;
    let rtr = attrs(QpState::Rtr);
    // RC's INIT -> RTR mask carries responder resources and the RNR timer: not UC attributes
    let before = snap(&f);
    assert_eq!(modify(&mut f, q, RTR_MASK, &rtr), Status::BadAttrMask as u8);
    assert_eq!(modify(&mut f, q, uc_rtr | M_MIN_RNR_TIMER, &rtr), Status::BadAttrMask as u8);
    assert_eq!(modify(&mut f, q, M_STATE | M_AV | M_PATH_MTU | M_DEST_QPN, &rtr), Status::BadAttrMask as u8);
    assert_eq!(snap(&f), before);
    assert_eq!(modify(&mut f, q, uc_rtr, &rtr), 0);
    let rts = attrs(QpState::Rts);
    for extra in [M_TIMEOUT, M_RETRY_CNT, M_RNR_RETRY, M_MAX_QP_RD_ATOMIC, M_STD_TIMER] {
        assert_eq!(modify(&mut f, q, uc_rts | extra, &rts), Status::BadAttrMask as u8, "mask bit {extra:#x}");
    }
    assert_eq!(modify(&mut f, q, RTS_MASK, &rts), Status::BadAttrMask as u8);
    assert_eq!(modify(&mut f, q, uc_rts | M_ACCESS_FLAGS, &rts), 0);
    let w = f.eng.bus.log.last().unwrap().clone();
    let c = md::decode_qp_ctx(&w.words).unwrap();
    assert!(c.cfg.uc, "the context's uc bit");
    assert_eq!((c.state, c.cfg.timeout, c.cfg.std_timer), (desc::HM_QPS_RTS, 0, true));
    assert_eq!((c.cfg.sq_psn, c.cfg.rq_psn, c.cfg.dest_qpn), (rts[A_SQ_PSN], rtr[A_RQ_PSN], rtr[A_DEST_QPN]));
    // RTS -> RTS with a timeout: refused; to ERR and RESET as any QP
    assert_eq!(modify(&mut f, q, M_TIMEOUT, &rts), Status::BadAttrMask as u8);
    assert_eq!(modify(&mut f, q, M_STATE, &attrs(QpState::Err)), 0);
    assert_eq!(modify(&mut f, q, M_STATE, &attrs(QpState::Reset)), 0);
    // an RC QP's context never has the bit
    let r = ok(&mut f, OP_CREATE_QP, &create_qp_args(pd, cq))[0];
    drive(&mut f, r, QpState::Rts);
    let c = md::decode_qp_ctx(&f.eng.bus.log.last().unwrap().words).unwrap();
    assert!(!c.cfg.uc);
    ok(&mut f, OP_DESTROY_QP, &[q]);
    ok(&mut f, OP_DESTROY_QP, &[r]);
}

#[test]
fn qp_ranges() {
    let mut f = fw();
    let (pd, cq, q) = setup_qp(&mut f);
    // CREATE_QP limits.
    let before = snap(&f);
    let base = create_qp_args(pd, cq);
    for (i, v, st) in [
        (0, pd + 1, Status::BadHandle),
        (1, 99, Status::BadHandle),
        (3, 4, Status::NotSupported), // UD
        (3, 8, Status::NotSupported), // raw packet
        (8, 16, Status::BadParam),    // sq log size
        (9, 4, Status::BadParam),     // stride
        (12, 129, Status::BadParam),  // max_send_wr > 2^7
        (13, 129, Status::BadParam),
        (14, 7, Status::BadParam),    // 128-byte send WQE holds 6 SGEs
        (15, 4, Status::BadParam),    // 64-byte receive WQE holds 3
        (16, 97, Status::BadParam),   // inline
        (4, 0x20_0010, Status::BadParam),
    ] {
        let mut a = base.clone();
        a[i] = v;
        assert_eq!(cmd(&mut f, OP_CREATE_QP, &a).0, st as u8, "word {i} = {v}");
        assert_eq!(snap(&f), before);
    }
    // MODIFY_QP ranges.
    drive(&mut f, q, QpState::Init);
    let before = snap(&f);
    for (i, v) in [
        (A_PATH_MTU, 0),
        (A_PATH_MTU, 6),
        (A_RQ_PSN, 1 << 24),
        (A_DEST_QPN, 1 << 24),
        (A_MAX_DEST_RD_ATOMIC, 5),
        (A_MIN_RNR_TIMER, 32),
        (A_SGID_INDEX, 1), // not set
        (A_SGID_INDEX, 9),
        (A_DMAC_HI, 0x1_0000),
        (A_FLOW_LABEL, 1 << 20),
        (A_HOP_LIMIT, 256),
        (A_UDP_SPORT, 0x1_0000),
        (A_ACCESS_FLAGS, 0x10),
        (A_PKEY_INDEX, 1),
    ] {
        let mut a = attrs(QpState::Rtr);
        a[i] = v;
        assert_eq!(modify(&mut f, q, RTR_MASK | M_ACCESS_FLAGS | M_PKEY_INDEX, &a), Status::BadParam as u8, "attr {i} = {v}");
        assert_eq!(snap(&f), before);
    }
    let mut a = attrs(QpState::Rtr);
    a[A_DGID..A_DGID + 4].copy_from_slice(&[0; 4]);
    assert_eq!(modify(&mut f, q, RTR_MASK, &a), Status::BadParam as u8);
    assert_eq!(modify(&mut f, q, M_PORT, &{ let mut x = attrs(QpState::Init); x[A_PORT_NUM] = 2; x }), Status::BadParam as u8);
    assert_eq!(snap(&f), before);
    assert_eq!(modify(&mut f, q, RTR_MASK, &attrs(QpState::Rtr)), 0);
    let before = snap(&f);
    for (i, v) in [(A_TIMEOUT, 32), (A_RETRY_CNT, 8), (A_RNR_RETRY, 8), (A_SQ_PSN, 1 << 24), (A_MAX_RD_ATOMIC, 5)] {
        let mut a = attrs(QpState::Rts);
        a[i] = v;
        assert_eq!(modify(&mut f, q, RTS_MASK, &a), Status::BadParam as u8, "attr {i} = {v}");
        assert_eq!(snap(&f), before);
    }
    let mut a = attrs(QpState::Rts);
    a[A_PATH_MIG_STATE] = 1;
    assert_eq!(modify(&mut f, q, RTS_MASK | M_PATH_MIG_STATE, &a), Status::NotSupported as u8);
    a[A_PATH_MIG_STATE] = 3;
    assert_eq!(modify(&mut f, q, RTS_MASK | M_PATH_MIG_STATE, &a), Status::BadParam as u8);
    assert_eq!(snap(&f), before);
    assert_eq!(modify(&mut f, 99, RTS_MASK, &attrs(QpState::Rts)), Status::BadHandle as u8);
    // IPv6 path works.
    let mut f = fw();
    let (_, _, q) = setup_qp(&mut f);
    ok(&mut f, OP_SET_GID, &[1, 0xFE80_0000, 0, 0x0211_22FF, 0xFE33_4455, 0x2233_4455, 0x0011]);
    drive(&mut f, q, QpState::Init);
    let mut a = attrs(QpState::Rtr);
    a[A_SGID_INDEX] = 1;
    a[A_DGID..A_DGID + 4].copy_from_slice(&[0xFE80_0000, 0, 0x0211_22FF, 0xFE33_9999]);
    assert_eq!(modify(&mut f, q, RTR_MASK, &a), 0);
    let w = &f.eng.bus.log.last().unwrap().words;
    assert_eq!(desc::get(w, desc::HM_QP_CTX_T_FIELDS, "ipv6"), 1);
    assert_eq!(desc::get(w, desc::HM_QP_CTX_T_FIELDS, "ip_dst"), 0xFE80_0000_0000_0000_0211_22FF_FE33_9999);
}

#[test]
fn exhaustion() {
    let mut f = fw();
    let mut pds = vec![];
    loop {
        let (st, o) = cmd(&mut f, OP_ALLOC_PD, &[]);
        if st != 0 {
            assert_eq!(st, Status::NoResources as u8);
            break;
        }
        pds.push(o[0]);
    }
    assert_eq!(pds.len(), crate::res::FW_MAX_PD);
    let pd = pds[0];
    let mut cqs = vec![];
    loop {
        let (st, o) = cmd(&mut f, OP_CREATE_CQ, &[4, 0, 0, 0]);
        if st != 0 {
            assert_eq!(st, Status::NoResources as u8);
            break;
        }
        cqs.push(o[0]);
    }
    assert_eq!(cqs.len(), 64);
    let mut qps = vec![];
    loop {
        let (st, o) = cmd(&mut f, OP_CREATE_QP, &create_qp_args(pd, cqs[0]));
        if st != 0 {
            assert_eq!(st, Status::NoResources as u8);
            break;
        }
        qps.push(o[0]);
    }
    // every entry: QPNs 2..=63, then entries 0 and 1 as QPNs 64 and 65
    assert_eq!(qps.len(), crate::res::FW_MAX_QP.min(64));
    assert_eq!(qps[..62], (2..64).collect::<Vec<u32>>()[..]);
    assert_eq!(qps[62..], [64, 65]);
    let mut mrs = 0;
    loop {
        let (st, _) = cmd(&mut f, OP_REG_MR, &[pd, 0, 0, 4096, 0, 1]);
        if st != 0 {
            assert_eq!(st, Status::NoResources as u8);
            break;
        }
        mrs += 1;
    }
    assert_eq!(mrs, crate::res::FW_MAX_MR.min(4096));
    // Smaller engine tables from CAPS / MR_LOG.
    let mut f = fw_caps(3 << 24 | 2 << 16, 3);
    let pd = ok(&mut f, OP_ALLOC_PD, &[])[0];
    for _ in 0..4 {
        ok(&mut f, OP_CREATE_CQ, &[4, 0, 0, 0]);
    }
    assert_eq!(cmd(&mut f, OP_CREATE_CQ, &[4, 0, 0, 0]).0, Status::NoResources as u8);
    let qs: Vec<u32> = (0..8).map(|_| ok(&mut f, OP_CREATE_QP, &create_qp_args(pd, 0))[0]).collect();
    assert_eq!(qs, [2, 3, 4, 5, 6, 7, 8, 9], "an 8-entry table: entries 0 and 1 are QPNs 8 and 9");
    assert_eq!(cmd(&mut f, OP_CREATE_QP, &create_qp_args(pd, 0)).0, Status::NoResources as u8);
    for _ in 0..8 {
        ok(&mut f, OP_REG_MR, &[pd, 0, 0, 1, 0, 0]);
    }
    assert_eq!(cmd(&mut f, OP_REG_MR, &[pd, 0, 0, 1, 0, 0]).0, Status::NoResources as u8);
    assert_eq!(ok(&mut f, OP_QUERY_DEVICE, &[])[4], 8);
}

/// The engine's full 4096-entry QP and CQ tables (CAPS log2 12): every entry is handed out,
/// QPNs 2..=4095 first, then entries 0 and 1 as QPNs 4096 and 4097 (QUERY_DEVICE: max_qp 4096,
/// max_cq 4096), and CQNs 0..=4095; the next create of each is NO_RESOURCES; QPNs 0, 1 and
/// 4098 name no QP; a freed QPN in the middle, and then QPN 4096, are the only ones left; and
/// every QP's engine context was written at its own entry.
#[test]
fn full_engine_tables() {
    let mut f = fw_caps(12 << 24 | 12 << 16 | 8 << 8 | 32, 12);
    let d = ok(&mut f, OP_QUERY_DEVICE, &[]);
    assert_eq!((d[4], d[7]), (4096, 4096), "max_qp, max_cq");
    let pd = ok(&mut f, OP_ALLOC_PD, &[])[0];
    let mut cqs = vec![];
    while let (0, o) = cmd(&mut f, OP_CREATE_CQ, &[4, 0, 0, 0]) {
        cqs.push(o[0]);
    }
    assert_eq!(cqs, (0..4096).collect::<Vec<u32>>());
    assert_eq!(cmd(&mut f, OP_CREATE_CQ, &[4, 0, 0, 0]).0, Status::NoResources as u8);
    let mut qps = vec![];
    while let (0, o) = cmd(&mut f, OP_CREATE_QP, &create_qp_args(pd, cqs[4095])) {
        qps.push(o[0]);
    }
    assert_eq!(qps, (2..4098).collect::<Vec<u32>>());
    assert_eq!(cmd(&mut f, OP_CREATE_QP, &create_qp_args(pd, 0)).0, Status::NoResources as u8);
    for bad in [0, 1, 4098, 8192] {
        assert_eq!(cmd(&mut f, OP_QUERY_QP, &[bad]).0, Status::BadHandle as u8, "QPN {bad}");
    }
    // every QP reaches INIT; its context lands at its own entry (QPN 4096 and 4097: 0 and 1)
    for &q in &qps {
        let mut a = vec![q, M_STATE | M_ACCESS_FLAGS | M_PKEY_INDEX | M_PORT];
        let mut blk = [0u32; ATTR_WORDS];
        blk[A_QP_STATE] = 1;
        blk[A_PORT_NUM] = 1;
        a.extend_from_slice(&blk);
        ok(&mut f, OP_MODIFY_QP, &a);
    }
    for &q in &qps {
        let w = &f.eng.bus.tables[&(desc::HM_CTL_TBL_QP, (q % 4096) as u16)];
        let g = |n| desc::get(w, desc::HM_QP_CTX_T_FIELDS, n);
        assert_eq!((g("state"), g("sq_cqn"), g("rq_cqn")), (desc::HM_QPS_INIT.into(), 4095, 4095), "QP {q}");
    }
    assert_eq!(ok(&mut f, OP_QUERY_RESOURCES, &[])[1..4], [4096, 0, 4096]);
    ok(&mut f, OP_DESTROY_QP, &[2000]);
    assert_eq!(ok(&mut f, OP_CREATE_QP, &create_qp_args(pd, 7))[0], 2000);
    assert_eq!(cmd(&mut f, OP_CREATE_QP, &create_qp_args(pd, 0)).0, Status::NoResources as u8);
    ok(&mut f, OP_DESTROY_QP, &[4096]);
    assert_eq!(cmd(&mut f, OP_QUERY_QP, &[4096]).0, Status::BadHandle as u8);
    assert_eq!(ok(&mut f, OP_CREATE_QP, &create_qp_args(pd, 7))[0], 4096);
}

#[test]
fn churn() {
    let mut f = fw();
    let (pd, cq, _) = setup_qp(&mut f);
    let mut stale = vec![];
    let mut seen_qpns = std::collections::HashSet::new();
    for i in 0..3000u32 {
        let q = ok(&mut f, OP_CREATE_QP, &create_qp_args(pd, cq))[0];
        seen_qpns.insert(q);
        if i % 3 == 0 {
            drive(&mut f, q, QpState::Rts);
        }
        let key = ok(&mut f, OP_REG_MR, &[pd, i * 4096, 0, 4096, 0, 7])[0];
        ok(&mut f, OP_DESTROY_QP, &[q]);
        ok(&mut f, OP_DEREG_MR, &[key]);
        stale.push(key);
        assert_eq!(f.eng.bus.tables[&(desc::HM_CTL_TBL_QP, q as u16)], [0; CTX_WORDS]);
    }
    assert!(seen_qpns.len() > 40, "QPNs rotate");
    // The most recent 255 * 512 keys of each index are distinct: all recent stale keys fail.
    for k in stale.iter().rev().take(1000) {
        assert_eq!(cmd(&mut f, OP_DEREG_MR, &[*k]).0, Status::BadHandle as u8);
    }
    assert_eq!(ok(&mut f, OP_QUERY_CQ, &[cq])[4], 2, "only the setup QP still references the CQ");
    assert_eq!(f.t.pds[0].refs, 1);
}

#[test]
fn engine_failure_changes_nothing() {
    let mut f = fw();
    let (pd, cq, q) = setup_qp(&mut f);
    let before = snap(&f);
    f.eng.bus.fail_next = Some(desc::HM_CTL_ST_RANGE);
    assert_eq!(modify(&mut f, q, INIT_MASK, &attrs(QpState::Init)), Status::HwError as u8);
    assert_eq!(snap(&f), before);
    f.eng.bus.fail_next = Some(desc::HM_CTL_ST_BAD_CMD);
    assert_eq!(cmd(&mut f, OP_REG_MR, &[pd, 0, 0, 1, 0, 0]).0, Status::HwError as u8);
    assert_eq!(snap(&f), before);
    f.eng.bus.fail_next = Some(desc::HM_CTL_ST_RANGE);
    assert_eq!(cmd(&mut f, OP_CREATE_CQ, &[4, 0, 0, 0]).0, Status::HwError as u8);
    f.eng.bus.fail_next = Some(desc::HM_CTL_ST_RANGE);
    assert_eq!(cmd(&mut f, OP_DESTROY_QP, &[q]).0, Status::HwError as u8);
    assert_eq!(snap(&f), before);
    // A hung engine (always busy) times out with HW_ERROR.
    f.eng.bus.busy_polls = u32::MAX;
    assert_eq!(cmd(&mut f, OP_DESTROY_CQ, &[cq + 1]).0, Status::BadHandle as u8);
    let key = { f.eng.bus.busy_polls = 0; ok(&mut f, OP_REG_MR, &[pd, 0, 0, 1, 0, 0])[0] };
    f.eng.bus.busy_polls = u32::MAX;
    let before = snap(&f);
    assert_eq!(cmd(&mut f, OP_DEREG_MR, &[key]).0, Status::HwError as u8);
    assert_eq!(snap(&f).0, before.0);
}

#[test]
fn cc_params() {
    let mut f = fw();
    let d = ok(&mut f, OP_GET_CC_PARAMS, &[]);
    assert_eq!(d.len(), crate::cc::CC_PARAMS);
    assert_eq!(&d[..5], &[0, 1, 300, 32767, 1]);
    assert_eq!(d[12], 1019);
    let mut a = vec![0u32; 1 + crate::cc::CC_PARAMS];
    a[0] = 1 << 8 | 1 << 17;
    a[1 + 8] = 7;
    a[1 + 17] = 26;
    ok(&mut f, OP_SET_CC_PARAMS, &a);
    let d2 = ok(&mut f, OP_GET_CC_PARAMS, &[]);
    assert_eq!((d2[8], d2[17]), (7, 26));
    // the engine's CC registers now hold the model's conversion of the new parameter set
    let mut want = hematite_model::dcqcn::NVIDIA_DEFAULTS;
    want[8] = 7;
    want[17] = 26;
    let h = hematite_model::dcqcn::HwParams::from_cc(&want, 250, 100_000, 1);
    let cc: Vec<u32> = f.eng.bus.cc.iter().map(|w| w.expect("every CC register written")).collect();
    assert_eq!(cc[0], 3 | 26 << 8 | 6 << 16 | 1 << 20 | 1 << 24, "control: on, DSCP 26, prio 6, clamp after inc, F = 1");
    assert_eq!(&cc[1..12], &[h.cnp_interval, h.inc_period, h.alpha_period, h.dec_period, h.byte_reset, h.max_rate,
                            h.ai_rate, h.hai_rate, h.min_rate, h.first_rate, h.line_rate]);
    assert_eq!((cc[12], cc[13] & 0xF, cc[14]), (u32::from(h.initial_alpha) << 16 | u32::from(h.g), 7, 16_384));
    assert_eq!(cc[15], crate::regs::HM_CC_PFC_RESET, "PFC honoured, 1.28 cycles per quantum (the reset value)");
    f.eng.bus.cc = [None; 16];
    let before = snap(&f);
    a[1 + 17] = 64; // cnp_dscp out of range: nothing set
    a[1 + 8] = 9;
    assert_eq!(cmd(&mut f, OP_SET_CC_PARAMS, &a).0, Status::BadParam as u8);
    assert!(f.eng.bus.cc.iter().all(|w| w.is_none()), "a refused SET_CC_PARAMS writes no register");
    a[0] = 1 << 19;
    assert_eq!(cmd(&mut f, OP_SET_CC_PARAMS, &a).0, Status::BadParam as u8);
    assert_eq!(snap(&f), before);
}

#[test]
fn malformed_headers() {
    let mut f = fw();
    let before = snap(&f);
    assert_eq!(cmd(&mut f, 0x7777, &[]).0, Status::BadOpcode as u8);
    assert_eq!(cmd(&mut f, OP_ALLOC_PD, &[0]).0, Status::BadLength as u8);
    assert_eq!(cmd(&mut f, OP_REG_MR, &[1, 2, 3]).0, Status::BadLength as u8);
    // in_words larger than the words present.
    let mut out = [0u32; 64];
    f.handle(&[Header::word(OP_DEALLOC_PD, 1, 9)], &mut out);
    assert_eq!(out[0], answer_word(Status::BadLength as u8, 0, 9));
    f.handle(&[], &mut out);
    assert_eq!(out[0] as u8, Status::BadLength as u8);
    assert_eq!(snap(&f), before);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, .. ProptestConfig::default() })]
    /// Random commands against a firmware with some resources: never panics, always answers
    /// with a known status, and a failing command changes nothing.
    #[test]
    fn random_commands(op_sel in 0usize..20, n in 0usize..66, in_w in prop::option::of(0u8..=255),
                       words in prop::collection::vec(prop_oneof![0u32..8, any::<u32>(), 0u32..0x40], 65)) {
        let mut f = fw();
        let (_, _, q) = setup_qp(&mut f);
        drive(&mut f, q, QpState::Init);
        let op = OPCODES.get(op_sel).map(|o| o.0).unwrap_or(op_sel as u16 * 0x101);
        let want = in_words(op).unwrap_or(0);
        let k = n.min(words.len());
        let hdr = Header::word(op, in_w.unwrap_or(want), words[0] as u8);
        let mut c = vec![hdr];
        c.extend_from_slice(&words[1..k.max(1)]);
        let before = snap(&f);
        let mut out = [0u32; 64];
        let used = f.handle(&c, &mut out);
        let st = out[0] as u8;
        prop_assert!(usize::from(st) < N_STATUS);
        prop_assert_eq!(used, 1 + ((out[0] >> 8) & 0xFF) as usize);
        prop_assert_eq!(out[0] >> 24, words[0] & 0xFF);
        if st != 0 {
            prop_assert_eq!(snap(&f), before);
            prop_assert!(out[1..].iter().all(|&w| w == 0));
        }
    }
}

#[test]
fn event_queue_link_events_and_err_posts() {
    let mut f = fw();
    // SET_EQ needs an existing CQ
    assert_eq!(cmd(&mut f, OP_SET_EQ, &[0, 1]).0, Status::BadHandle as u8);
    let cq = ok(&mut f, OP_CREATE_CQ, &[4, 0x1000, 0, 0])[0];
    ok(&mut f, OP_SET_EQ, &[cq, 1]);
    let eq = hematite_abi::regs::HM_CTL_EQ as u16;
    assert_eq!(f.eng.bus.regs.last(), Some(&(eq, 1 << 31 | cq)), "HM_CTL_EQ = {{enable, cqn}}");
    assert_eq!(cmd(&mut f, OP_SET_EQ, &[cq, 2]).0, Status::BadParam as u8);
    // the event queue's CQ cannot be destroyed while it is one
    assert_eq!(cmd(&mut f, OP_DESTROY_CQ, &[cq]).0, Status::InUse as u8);
    // link changes: one event each, QUERY_PORT follows
    let post = hematite_abi::regs::HM_CTL_POST as u16;
    let n = f.eng.bus.regs.len();
    assert!(f.link(true));
    assert!(!f.link(true), "no change, no event");
    assert_eq!(ok(&mut f, OP_QUERY_PORT, &[1])[0], 4, "ACTIVE");
    assert!(f.link(false));
    assert_eq!(ok(&mut f, OP_QUERY_PORT, &[1])[0], 1, "DOWN");
    let posts: Vec<u32> = f.eng.bus.regs[n..].iter().filter(|r| r.0 == post).map(|r| r.1).collect();
    let ev = |code: u8| u32::from(hematite_model::desc::HM_CTL_POST_EVENT) << 28 | u32::from(code) << 16 | 1;
    assert_eq!(posts, vec![ev(hematite_model::desc::HM_EV_PORT_ACTIVE), ev(hematite_model::desc::HM_EV_PORT_ERR)]);
    ok(&mut f, OP_SET_EQ, &[0, 0]);
    assert_eq!(f.eng.bus.regs.last(), Some(&(eq, 0)), "events off");
    ok(&mut f, OP_DESTROY_CQ, &[cq]);
}

#[test]
fn modify_to_err_moves_the_qp_in_the_engine_now() {
    let mut f = fw();
    let (_pd, _cq, qp) = setup_qp(&mut f);
    drive(&mut f, qp, QpState::Init);
    let mut a = vec![qp, M_STATE];
    let mut blk = vec![0u32; ATTR_WORDS];
    blk[A_QP_STATE] = QpState::Err as u32;
    a.extend(blk);
    let post = hematite_abi::regs::HM_CTL_POST as u16;
    let before = f.eng.bus.regs.iter().filter(|r| r.0 == post).count();
    ok(&mut f, OP_MODIFY_QP, &a);
    let posts: Vec<u32> = f.eng.bus.regs.iter().filter(|r| r.0 == post).map(|r| r.1).skip(before).collect();
    assert_eq!(posts, vec![u32::from(hematite_model::desc::HM_CTL_POST_QP_ERR) << 28 | qp], "QP_ERR posted after the ERR context");
    // ERR -> ERR posts nothing more
    ok(&mut f, OP_MODIFY_QP, &a);
    assert_eq!(f.eng.bus.regs.iter().filter(|r| r.0 == post).count(), before + 1);
}

#[test]
fn query_resources_counts_what_is_in_use() {
    let mut f = fw();
    assert_eq!(ok(&mut f, OP_QUERY_RESOURCES, &[]), vec![0, 0, 0, 0], "PDs, CQs, MRs, QPs of a fresh device");
    let (pd, cq, qpn) = setup_qp(&mut f);
    let key = ok(&mut f, OP_REG_MR, &[pd, 0x1000, 0x1, 0x2000, 0, 0xF | 1 << 20])[0];
    let pd2 = ok(&mut f, OP_ALLOC_PD, &[])[0];
    assert_eq!(ok(&mut f, OP_QUERY_RESOURCES, &[]), vec![2, 1, 1, 1]);
    assert_eq!(cmd(&mut f, OP_DEALLOC_PD, &[pd]).0, Status::InUse as u8, "a refused free counts nothing down");
    assert_eq!(ok(&mut f, OP_QUERY_RESOURCES, &[]), vec![2, 1, 1, 1]);
    ok(&mut f, OP_DESTROY_QP, &[qpn]);
    ok(&mut f, OP_DEREG_MR, &[key]);
    ok(&mut f, OP_DEALLOC_PD, &[pd2]);
    assert_eq!(ok(&mut f, OP_QUERY_RESOURCES, &[]), vec![1, 1, 0, 0]);
    ok(&mut f, OP_DESTROY_CQ, &[cq]);
    ok(&mut f, OP_DEALLOC_PD, &[pd]);
    assert_eq!(ok(&mut f, OP_QUERY_RESOURCES, &[]), vec![0, 0, 0, 0]);
    assert_eq!(cmd(&mut f, OP_QUERY_RESOURCES, &[1]).0, Status::BadLength as u8, "takes no argument");
}

#[test]
fn query_abi_reports_the_versions() {
    use crate::version::{INTERFACE, MAILBOX};
    let mut f = fw();
    assert_eq!(ok(&mut f, OP_QUERY_ABI, &[]), vec![MAILBOX, INTERFACE, INTERFACE]);
    // its one form: no input words
    assert_eq!(cmd(&mut f, OP_QUERY_ABI, &[0]).0, Status::BadLength as u8);
    // an engine of a newer minor only adds: the firmware serves it
    let mut f = fw();
    f.hw_iface = INTERFACE + 1;
    assert_eq!(ok(&mut f, OP_QUERY_ABI, &[])[2], INTERFACE + 1);
    assert_eq!(cmd(&mut f, OP_ALLOC_PD, &[]).0, Status::Ok as u8);
}

/// An engine whose interface version the firmware was not built for: every command but
/// QUERY_ABI answers ABI_MISMATCH, nothing reaches the engine (not even a link event), and
/// QUERY_ABI says why.
#[test]
fn engine_of_another_interface_is_refused() {
    use crate::version::{INTERFACE, MAILBOX};
    let older_minor = INTERFACE.wrapping_sub(1);
    for hw in [INTERFACE + (1 << 16), INTERFACE ^ (1 << 16), older_minor, 0xFFFF_FFFF] {
        if crate::version::speaks(hw, INTERFACE) {
            continue;
        }
        let mut f = Firmware::new(MockBus { busy_polls: 2, ..Default::default() });
        f.init(CAPS, 12, hw);
        assert!(!f.engine_matches());
        f.link(true);
        for &(op, n) in OPCODES.iter().filter(|o| o.0 != OP_QUERY_ABI) {
            let args = vec![0u32; n as usize];
            assert_eq!(cmd(&mut f, op, &args).0, Status::AbiMismatch as u8, "opcode {op:#x}, engine {hw:#x}");
        }
        assert_eq!(ok(&mut f, OP_QUERY_ABI, &[]), vec![MAILBOX, INTERFACE, hw]);
        assert!(f.eng.bus.log.is_empty(), "no table write");
        assert!(f.eng.bus.regs.is_empty(), "no register write or post");
    }
}

/// `Tables::qp` (the firmware's QPN lookup, written in a few instructions) names the entry of
/// `hematite_abi::qp::qp_entry` for every QPN around engine tables of 8, 64, 4096 and 8192
/// entries, all the firmware can hold in use (4096: with the 8192-entry engine, entries 0 and
/// 1 are still QPNs 8192 and 8193, as the engine maps them, and entries from 4096 up are none).
#[test]
fn qp_entry_matches_the_abi() {
    for log in [3u32, 6, 12, 13] {
        let mut f = fw_caps(log << 24 | 2 << 16, 3);
        let pd = ok(&mut f, OP_ALLOC_PD, &[])[0];
        ok(&mut f, OP_CREATE_CQ, &[4, 0, 0, 0]);
        let mut last = vec![];
        while let (0, o) = cmd(&mut f, OP_CREATE_QP, &create_qp_args(pd, 0)) {
            last.push(o[0]);
        }
        let n = 1u32 << log;
        let held = (n as usize).min(crate::res::FW_MAX_QP);
        assert_eq!(last.len(), held);
        assert_eq!(last[held - 2..], [n, n + 1], "entries 0 and 1 last, as QPNs {n} and {}", n + 1);
        for qpn in (0..3 * n + 4).chain([0xFF_FFFF, 0x100_0000, u32::MAX]) {
            let want = hematite_abi::qp::qp_entry(qpn, log).map(|e| e as usize).filter(|&e| e < held);
            assert_eq!(f.t.qp(qpn), want, "table of {n}: QPN {qpn:#x}");
        }
    }
}

/// `QpAttrUndo` puts back every field of a QP's attributes but the address vector (which
/// MODIFY_QP saves apart, only when it sets it): every field of `a` differs from `b`'s.
#[test]
fn attr_undo_restores_every_field_but_the_av() {
    use crate::res::{Av, QpAttr, QpAttrUndo};
    let av = |k: u32| Av {
        sgid_index: k as u8,
        dgid: [k, k + 1, k + 2, k + 3],
        dmac: k as u64 * 7,
        hop_limit: k as u8 + 1,
        traffic_class: k as u8 + 2,
        flow_label: k + 3,
        udp_sport: k as u16 + 4,
        ipv6: k % 2 == 1,
        sgid: [k + 5, k + 6, k + 7, k + 8],
        smac: k as u64 * 11,
    };
    let attr = |k: u32| QpAttr {
        access: k,
        pkey_index: k as u16 + 1,
        port: k as u8 + 2,
        path_mtu: k as u8 + 3,
        timeout: k as u8 + 4,
        retry_cnt: k as u8 + 5,
        rnr_retry: k as u8 + 6,
        min_rnr_timer: k as u8 + 7,
        max_rd_atomic: k as u8 + 8,
        max_dest_rd_atomic: k as u8 + 9,
        en_sqd_async_notify: k as u8 + 10,
        rq_psn: k + 11,
        sq_psn: k + 12,
        dest_qpn: k + 13,
        av: av(k),
        std_timer: k % 2 == 1,
    };
    let (a, b) = (attr(1), attr(40));
    let u = QpAttrUndo::of(&a);
    let mut c = b;
    u.put(&mut c);
    assert_eq!(c.av, b.av, "the AV is not touched");
    c.av = a.av;
    assert_eq!(c, a, "every other field is back");
}

/// The default UDP source port is seeded with the QPN, not the table entry: with an 8-entry
/// engine, entry 0 is QPN 8, whose context carries 0xC000 | 8 (its entry alone would give 0xC000).
#[test]
fn default_udp_source_port_is_seeded_with_the_qpn() {
    let mut f = fw_caps(3 << 24 | 2 << 16, 3);
    let (pd, cq, first) = setup_qp(&mut f);
    assert_eq!(first, 2);
    let mut q = first;
    while q != 8 {
        q = ok(&mut f, OP_CREATE_QP, &create_qp_args(pd, cq))[0];
    }
    drive(&mut f, q, QpState::Rts);
    let w = f.eng.bus.log.last().unwrap().clone();
    assert_eq!(w.index, 0, "QPN 8 is entry 0");
    let got = desc::get(&w.words, desc::HM_QP_CTX_T_FIELDS, "udp_sport");
    assert_eq!(got, 0xC000 | 8);
}
