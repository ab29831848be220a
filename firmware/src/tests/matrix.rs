//! The full RC transition matrix: every from-state x to-state with the minimal mask, each
//! required attribute missing, each optional one added, each disallowed one added.
use super::*;
use QpState::*;

/// The expected table (ibverbs mask values written out independently of `qp::TRANSITIONS`).
fn expected(from: QpState, to: QpState) -> Option<(u32, u32)> {
    // (checked against the kernel's qp_state_table: RESET has no transition to ERR)
    if to == Reset || (to == Err && from != Reset) {
        return Some((0, 0));
    }
    Some(match (from, to) {
        (Reset, Init) => (0x10 | 0x20 | 0x08, 0),
        (Init, Init) => (0, 0x10 | 0x20 | 0x08),
        (Init, Rtr) => (0x80 | 0x100 | 0x10_0000 | 0x1000 | 0x2_0000 | 0x8000, 0x4000 | 0x08 | 0x10),
        (Rtr, Rts) => (0x200 | 0x400 | 0x800 | 0x1_0000 | 0x2000, 0x02 | 0x4000 | 0x08 | 0x8000 | 0x4_0000),
        (Rts, Rts) => (0, 0x02 | 0x08 | 0x4000 | 0x4_0000 | 0x8000),
        (Rts, Sqd) => (0, 0x04),
        (Sqd, Rts) => (0, 0x02 | 0x4000 | 0x08 | 0x8000 | 0x4_0000),
        (Sqd, Sqd) => (0, 0x20 | 0x80 | 0x200 | 0x400 | 0x800 | 0x2000 | 0x2_0000 | 0x4000 | 0x08 | 0x10 | 0x8000 | 0x4_0000),
        (Sqe, Rts) => (0, 0),
        _ => return None,
    })
}

fn attempt(from: QpState, to: QpState, mask: u32) -> (Firmware<MockBus>, u32, u8, (crate::res::Tables, crate::cc::CcParams, usize)) {
    attempt_claiming(from, from, to, mask)
}

/// As [`attempt`], with `cur` as the request's current state (the QP is in `from`).
fn attempt_claiming(from: QpState, cur: QpState, to: QpState, mask: u32) -> (Firmware<MockBus>, u32, u8, (crate::res::Tables, crate::cc::CcParams, usize)) {
    let mut f = fw();
    let (_, _, q) = setup_qp(&mut f);
    drive(&mut f, q, from);
    let before = snap(&f);
    let mut a = attrs(to);
    a[A_CUR_QP_STATE] = cur as u32;
    let st = modify(&mut f, q, mask, &a);
    (f, q, st, before)
}

fn expect_fail(from: QpState, to: QpState, mask: u32, want: Status) {
    let (f, _, st, before) = attempt(from, to, mask);
    assert_eq!(st, want as u8, "{from:?} -> {to:?} mask {mask:#x}");
    assert_eq!(snap(&f), before, "{from:?} -> {to:?} mask {mask:#x}: failure changed state");
}

fn expect_ok(from: QpState, to: QpState, mask: u32) {
    let (f, q, st, before) = attempt(from, to, mask);
    assert_eq!(st, 0, "{from:?} -> {to:?} mask {mask:#x}");
    assert_eq!(f.t.qps.get(q as usize).unwrap().state, to);
    let log = &f.eng.bus.log;
    assert_eq!(log.len(), before.2 + 1, "exactly one engine write");
    let w = log.last().unwrap();
    assert_eq!((w.table, w.index), (desc::HM_CTL_TBL_QP, q as u16));
    let flags = match (from, to) {
        (Reset, Init) => desc::HM_CTL_F_LOAD_SQ | desc::HM_CTL_F_LOAD_RQ,
        (Init, Rtr) => desc::HM_CTL_F_LOAD_RQ_PSN,
        (Rtr, Rts) => desc::HM_CTL_F_LOAD_SQ,
        _ => 0,
    };
    assert_eq!(w.flags, flags, "{from:?} -> {to:?}");
    if to == Reset {
        assert_eq!(w.words, [0; CTX_WORDS]);
    } else {
        let st = desc::get(&w.words, desc::HM_QP_CTX_T_FIELDS, "state") as u8;
        assert_eq!(st, to.engine_code());
    }
}

#[test]
fn transition_matrix() {
    let mut legal = 0;
    for from in QpState::ALL {
        for to in QpState::ALL {
            match expected(from, to) {
                None => {
                    expect_fail(from, to, M_STATE, Status::BadState);
                    expect_fail(from, to, M_ALL, Status::BadState);
                }
                Some((req, opt)) => {
                    legal += 1;
                    expect_ok(from, to, M_STATE | req);
                    if from == to {
                        // No IBV_QP_STATE: a same-state modify.
                        expect_ok(from, to, req | if req == 0 { opt & M_ACCESS_FLAGS } else { 0 });
                    }
                    for b in 0..21 {
                        let bit = 1u32 << b;
                        if bit == M_STATE {
                            continue;
                        }
                        if req & bit != 0 {
                            expect_fail(from, to, (M_STATE | req) & !bit, Status::BadAttrMask);
                        } else if opt & bit != 0 {
                            if bit == M_ALT_PATH {
                                expect_fail(from, to, M_STATE | req | bit, Status::NotSupported);
                            } else {
                                expect_ok(from, to, M_STATE | req | bit);
                            }
                        } else {
                            expect_fail(from, to, M_STATE | req | bit, Status::BadAttrMask);
                        }
                    }
                    expect_fail(from, to, M_STATE | req | 1 << 25, Status::BadAttrMask);
                }
            }
        }
    }
    assert_eq!(legal, 22); // 7 to RESET + 6 to ERR (not from RESET) + 9 others
}

#[test]
fn cur_state_mismatch_and_bad_state_values() {
    let (f, _, st, before) = attempt_claiming(Rtr, Init, Rts, RTS_MASK | M_CUR_STATE);
    assert_eq!(st, Status::BadState as u8);
    assert_eq!(snap(&f), before);
    let mut f = fw();
    let (_, _, q) = setup_qp(&mut f);
    let before = snap(&f);
    let mut a = attrs(Init);
    a[A_QP_STATE] = 7;
    assert_eq!(modify(&mut f, q, INIT_MASK, &a), Status::BadParam as u8);
    assert_eq!(snap(&f), before);
}
