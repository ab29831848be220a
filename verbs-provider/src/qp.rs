//! Queue pairs: creating, modifying (with the address resolution RoCE needs: the peer's MAC
//! from its GID), querying and destroying them (posting is in `fastpath.rs`).

use crate::abi::*;
use crate::context::{Ctx, RsCq, RsPd, RsQp};
use crate::{errno_of, warn};
use hostdrv::fast;
use hostdrv::nic::{gid_link_local, mac_of_link_local, mask, QpAttr, QpCaps, QpState};
use std::ffi::{c_int, c_void};
use std::sync::Arc;

/// `$ty { .. }` with the attribute fields that `HmQpAttr` (the C side) and `QpAttr` (the
/// driver's) have in common copied from `$src` as they are, listed once for both directions
/// (modify: C to driver; query: driver to C); the fields one side lacks or converts are given.
macro_rules! qp_attr_from {
    ($src:ident => $ty:ident { $($field:ident: $val:expr),* $(,)? }) => {
        $ty {
            $($field: $val,)*
            qp_access_flags: $src.qp_access_flags,
            pkey_index: $src.pkey_index,
            port_num: $src.port_num,
            path_mtu: $src.path_mtu,
            timeout: $src.timeout,
            retry_cnt: $src.retry_cnt,
            rnr_retry: $src.rnr_retry,
            rq_psn: $src.rq_psn,
            sq_psn: $src.sq_psn,
            max_rd_atomic: $src.max_rd_atomic,
            max_dest_rd_atomic: $src.max_dest_rd_atomic,
            min_rnr_timer: $src.min_rnr_timer,
            dest_qp_num: $src.dest_qp_num,
            sgid_index: $src.sgid_index,
            dgid: $src.dgid,
            hop_limit: $src.hop_limit,
            traffic_class: $src.traffic_class,
            flow_label: $src.flow_label,
        }
    };
}

/// # Safety
/// All handles came from this library; `ibqp` is the QP libibverbs will see; `caps` and the
/// out pointers are valid.
#[no_mangle]
pub unsafe extern "C" fn hm_rs_create_qp(
    ctx: *mut c_void,
    pd: *mut c_void,
    scq: *mut c_void,
    rcq: *mut c_void,
    ibqp: *mut c_void,
    qp_type: u32,
    sq_sig_all: u32,
    caps: *mut HmQpCaps,
    qp: *mut *mut c_void,
    qpn: *mut u32,
) -> c_int {
    // SAFETY: the caller's guarantee.
    let (ctx, p, s, r, c) = unsafe {
        (&*(ctx as *const Ctx), &*(pd as *const RsPd), &*(scq as *const RsCq), &*(rcq as *const RsCq), &mut *caps)
    };
    if ctx.sh.nic.check_fatal() {
        return libc::EIO;
    }
    // a CQ of another context (another open of the device) is not this context's handle
    if !Arc::ptr_eq(&s.sh, &ctx.sh) || !Arc::ptr_eq(&r.sh, &ctx.sh) {
        return libc::EINVAL;
    }
    let want = QpCaps {
        max_send_wr: c.max_send_wr,
        max_recv_wr: c.max_recv_wr,
        max_send_sge: c.max_send_sge,
        max_recv_sge: c.max_recv_sge,
        max_inline_data: c.max_inline_data,
    };
    let Some(qpt) = hematite_abi::qp::QpType::from_u32(qp_type) else { return libc::EOPNOTSUPP };
    match ctx.sh.nic.create_qp_of(qpt, &p.pd, &s.cq, &r.cq, want) {
        Ok(q) => {
            let g = q.caps();
            *c = caps_out(&g);
            ctx.sh.qps.lock().unwrap().insert(q.qpn(), ibqp as usize);
            let rq = RsQp {
                sh: ctx.sh.clone(),
                sig_flag: if sq_sig_all != 0 { fast::F_SIGNALED } else { 0 },
                max_inline: g.max_inline_data,
                max_send_sge: g.max_send_sge,
                max_recv_sge: g.max_recv_sge,
                wr_op: crate::fastpath::wr_ops(qpt),
                qp: q,
            };
            // SAFETY: the caller's guarantee.
            unsafe {
                *qpn = rq.qp.qpn();
                *qp = Box::into_raw(Box::new(rq)) as *mut c_void;
                ctx.sh.live.lock().unwrap().qps.insert(*qp as usize);
            }
            0
        }
        Err(e) => errno_of(&e),
    }
}

/// The capacities the device granted a QP, as `shim.h` passes them.
fn caps_out(g: &QpCaps) -> HmQpCaps {
    HmQpCaps {
        max_send_wr: g.max_send_wr,
        max_recv_wr: g.max_recv_wr,
        max_send_sge: g.max_send_sge,
        max_recv_sge: g.max_recv_sge,
        max_inline_data: g.max_inline_data,
        _pad: 0,
    }
}

const IPV4_MAPPED: [u8; 12] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF];

fn state_of(v: u32) -> Result<QpState, c_int> {
    QpState::from_u32(v).ok_or(libc::EINVAL)
}

/// # Safety
/// Handles came from this library; `a` is valid.
#[no_mangle]
pub unsafe extern "C" fn hm_rs_modify_qp(ctx: *mut c_void, qp: *mut c_void, a: *const HmQpAttr, m: u32, from: u32) -> c_int {
    // SAFETY: the caller's guarantee.
    let (ctx, q, a) = unsafe { (&*(ctx as *const Ctx), &*(qp as *const RsQp), &*a) };
    let run = || -> Result<(), c_int> {
        // An illegal transition or attribute mask is refused before anything is resolved
        // (the firmware judges again, from the QP's real state).
        if m & mask::STATE != 0 {
            let to = state_of(a.qp_state)?;
            let from = if m & mask::CUR_STATE != 0 { state_of(a.cur_qp_state)? } else { state_of(from)? };
            if hematite_abi::qp::check_mask_of(q.qp.qp_type(), from, to, m).is_err() {
                return Err(libc::EINVAL);
            }
        }
        let mut attr = qp_attr_from!(a => QpAttr {
            qp_state: if m & mask::STATE != 0 { state_of(a.qp_state)? } else { QpState::Reset },
            cur_qp_state: if m & mask::CUR_STATE != 0 { state_of(a.cur_qp_state)? } else { QpState::Reset },
            dmac: 0,
            udp_sport: 0,
            std_timer: 0,
        });
        // HEMATITE_ACK_TIMER=standard: every QP this process moves to RTS uses the standard
        // ACK timeout alone (4.096 us x 2^timeout), no adaptive early retransmission
        // (docs/transport-engine.md); "adaptive" or unset: the default
        let mut m = m;
        if m & mask::TIMEOUT != 0 {
            if let Some(std) = ack_timer_env()? {
                attr.std_timer = std.into();
                m |= mask::STD_TIMER;
            }
        }
        if m & mask::MAX_QP_RD_ATOMIC != 0 {
            // Our initiator depth: more than the device can keep outstanding is clamped (we
            // then issue fewer READs / atomics at a time than the responder allows, which is
            // always safe; perftest asks for the peer's responder resources, e.g. rxe's 128).
            // The responder side (max_dest_rd_atomic) is not clamped: the firmware refuses it.
            attr.max_rd_atomic = attr.max_rd_atomic.min(ctx.sh.nic.attr().max_qp_init_rd_atom.max(1));
        }
        if m & mask::AV != 0 {
            if a.is_global == 0 {
                warn(format_args!("QP {}: RoCE needs a GRH (ah_attr.is_global = 1 with the peer's GID)", q.qp.qpn()));
                return Err(libc::EINVAL);
            }
            if a.dgid == [0; 16] {
                // no destination at all: an invalid attribute, not an unsupported one
                warn(format_args!("QP {}: the destination GID is zero", q.qp.qpn()));
                return Err(libc::EINVAL);
            }
            if a.dgid[..12] != IPV4_MAPPED {
                // RoCEv2 over IPv6: the peer's MAC is the EUI-64 identifier of its link-local
                // GID (as the kernel's rdma_get_ll_mac does); our own link-local GID is this
                // port (looped back). Other IPv6 destinations would need neighbour discovery.
                let own_ll = ctx.sh.nic.mac().filter(|&m| gid_link_local(m) == a.dgid);
                attr.dmac = match own_ll.or_else(|| mac_of_link_local(&a.dgid)) {
                    Some(mac) => mac,
                    None => {
                        warn(format_args!(
                            "QP {}: IPv6 destination {} is not an EUI-64 link-local GID; other IPv6 destinations need neighbour discovery, which this provider does not do",
                            q.qp.qpn(),
                            std::net::Ipv6Addr::from(a.dgid)
                        ));
                        return Err(libc::EOPNOTSUPP);
                    }
                };
            } else {
                let ip = u32::from_be_bytes([a.dgid[12], a.dgid[13], a.dgid[14], a.dgid[15]]);
                let own = (ctx.sh.nic.ipv4() == Some(ip)).then(|| ctx.sh.nic.mac()).flatten();
                let Some(sim) = &ctx.sh.sim else {
                    warn(format_args!("QP {}: no neighbour resolution on this backend", q.qp.qpn()));
                    return Err(libc::EOPNOTSUPP);
                };
                // a QP connected to one on this NIC: its own MAC (the port loops such frames back)
                attr.dmac = if let Some(mac) = own { mac } else { sim.arp_resolve(ip).map_err(|e| {
                    warn(format_args!("QP {}: resolving {}: {e}", q.qp.qpn(), std::net::Ipv4Addr::from(ip)));
                    libc::EHOSTUNREACH
                })? };
            }
        }
        ctx.sh.nic.modify_qp(&q.qp, &attr, m).map_err(|e| errno_of(&e))
    };
    match run() {
        Ok(()) => 0,
        Err(e) => e,
    }
}

/// `HEMATITE_ACK_TIMER`: Some(true) for "standard", Some(false) for "adaptive", None when
/// unset; anything else is refused (EINVAL, with a message) rather than ignored.
fn ack_timer_env() -> Result<Option<bool>, c_int> {
    match std::env::var("HEMATITE_ACK_TIMER") {
        Err(std::env::VarError::NotPresent) => Ok(None),
        Ok(v) if v == "standard" => Ok(Some(true)),
        Ok(v) if v == "adaptive" => Ok(Some(false)),
        Ok(v) => {
            warn(format_args!("HEMATITE_ACK_TIMER={v:?}: use \"standard\" or \"adaptive\""));
            Err(libc::EINVAL)
        }
        Err(e) => {
            warn(format_args!("HEMATITE_ACK_TIMER: {e}"));
            Err(libc::EINVAL)
        }
    }
}

/// # Safety
/// Handles came from this library; the out pointers are valid.
#[no_mangle]
pub unsafe extern "C" fn hm_rs_query_qp(ctx: *mut c_void, qp: *mut c_void, out: *mut HmQpAttr, caps: *mut HmQpCaps) -> c_int {
    // SAFETY: the caller's guarantee.
    let (ctx, q) = unsafe { (&*(ctx as *const Ctx), &*(qp as *const RsQp)) };
    match ctx.sh.nic.query_qp(&q.qp) {
        Ok(a) => {
            let g = q.qp.caps();
            // SAFETY: the caller's guarantee.
            unsafe {
                *out = qp_attr_from!(a => HmQpAttr {
                    qp_state: a.qp_state as u32,
                    cur_qp_state: a.qp_state as u32,
                    is_global: 1,
                });
                *caps = caps_out(&g);
            }
            0
        }
        Err(e) => errno_of(&e),
    }
}

/// # Safety
/// Handles came from this library; `qp` is not used after success.
#[no_mangle]
pub unsafe extern "C" fn hm_rs_destroy_qp(ctx: *mut c_void, qp: *mut c_void) -> c_int {
    // SAFETY: the caller's guarantee.
    let ctx = unsafe { &*(ctx as *const Ctx) };
    // SAFETY: the caller's guarantee.
    let q = unsafe { Box::from_raw(qp as *mut RsQp) };
    ctx.sh.live.lock().unwrap().qps.remove(&(qp as usize));
    let n = q.qp.qpn();
    match ctx.sh.nic.destroy_qp(q.qp) {
        Ok(()) => {
            ctx.sh.qps.lock().unwrap().remove(&n);
            0
        }
        Err(e) => errno_of(&e),
    }
}
