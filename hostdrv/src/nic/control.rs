//! The control path: the [`Nic`]'s firmware commands for queries, congestion-control
//! parameters and the GID table, and creating, modifying and destroying PDs, MRs, CQs and
//! QPs (QPs through the firmware's verbs state machine).

use super::attr::gid_words;
use super::objects::{CqInner, CqState, MrInner, MrMem, PdInner, QpInner, WqTrack};
use super::shared::need;
use super::{mask, Cq, DeviceAttr, Gid, Mr, Nic, Pd, PortAttr, Qp, QpAttr, QpCaps, QpState, RcPeer};
use crate::lock::SpinLock;
use crate::mem::DmaBuf;
use crate::{Error, Result};
use hematite_abi::qp::QpType;
use hematite_abi::{mbox, reply};
use hematite_model::desc;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

/// DCQCN parameter sets ([`Nic::set_cc_preset`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CcPreset {
    /// NVIDIA's published defaults (the engine's reset values).
    Nvidia,
    /// The DCQCN paper's parameters (docs/dcqcn.md).
    Paper,
}

fn cc_index(name: &str) -> Result<usize> {
    use hematite_model::dcqcn::CC_NAMES;
    CC_NAMES
        .iter()
        .position(|n| *n == name)
        .ok_or_else(|| Error::InvalidArgument(format!("no DCQCN parameter {name:?} (known: {})", CC_NAMES.join(", "))))
}

/// Smallest `s` in 0..=3 with `64 << s` bytes holding `need` bytes.
fn stride_log(need: usize) -> Option<u8> {
    (0u8..=3).find(|s| (64usize << s) >= need)
}

fn log2_ceil(n: u32) -> u8 {
    (32 - n.max(1).saturating_sub(1).leading_zeros()) as u8
}

impl Nic {
    /// QUERY_ABI, the version handshake (hematite_abi::version): the firmware must speak this
    /// driver's mailbox protocol, and the engine the interface the firmware was built for.
    /// Returns (mailbox version, interface the firmware was built for, the engine's).
    pub fn check_firmware_abi(&self) -> Result<(u32, u32, u32)> {
        use hematite_abi::version::{major, minor, speaks, MAILBOX};
        let v = |x: u32| format!("{}.{}", major(x), minor(x));
        let w = match self.sh.cmd(mbox::OP_QUERY_ABI, &[]) {
            Err(Error::Firmware { status, .. }) if status == mbox::Status::BadOpcode as u8 => {
                return Err(Error::Device(
                    "the firmware does not answer QUERY_ABI: it predates the version handshake; load the firmware built with this driver (./hematite fw)".into(),
                ))
            }
            r => r?,
        };
        need(&w, 3, "QUERY_ABI")?;
        let (mb, built, engine) = (w[0], w[1], w[2]);
        if !speaks(mb, MAILBOX) {
            return Err(Error::Device(format!(
                "the firmware speaks mailbox protocol {}; this driver speaks {} (same major, minor {} or newer): driver and firmware do not match",
                v(mb),
                v(MAILBOX),
                minor(MAILBOX)
            )));
        }
        if !speaks(engine, built) {
            return Err(Error::Device(format!(
                "the firmware was built for interface {} but the engine reports {}: firmware and RTL (bitstream) do not match; the firmware refuses every command",
                v(built),
                v(engine)
            )));
        }
        Ok((mb, built, engine))
    }

    /// QUERY_DEVICE.
    pub fn query_device(&self) -> Result<DeviceAttr> {
        let w = self.sh.cmd(mbox::OP_QUERY_DEVICE, &[])?;
        need(&w, reply::DEVICE_ATTR_WORDS, "QUERY_DEVICE")?;
        DeviceAttr::from_words(&w).ok_or_else(|| Error::Device("QUERY_DEVICE: short answer".into()))
    }

    /// QUERY_PORT (port 1 is the only port).
    pub fn query_port(&self, port: u32) -> Result<PortAttr> {
        let w = self.sh.cmd(mbox::OP_QUERY_PORT, &[port])?;
        need(&w, reply::PORT_ATTR_WORDS, "QUERY_PORT")?;
        PortAttr::from_words(&w).ok_or_else(|| Error::Device("QUERY_PORT: short answer".into()))
    }

    /// QUERY_COUNTERS: firmware counters (commands, answers per status), then the engine's.
    pub fn counters(&self) -> Result<Vec<u32>> {
        self.sh.cmd(mbox::OP_QUERY_COUNTERS, &[])
    }

    /// QUERY_RESOURCES: the PDs, CQs, MRs and QPs in use on the device (the firmware's tables),
    /// in that order.
    pub fn resources(&self) -> Result<[u32; 4]> {
        let w = self.sh.cmd(mbox::OP_QUERY_RESOURCES, &[])?;
        match w[..] {
            [pd, cq, mr, qp, ..] => Ok([pd, cq, mr, qp]),
            _ => Err(Error::Device(format!("QUERY_RESOURCES answered {} words, not 4", w.len()))),
        }
    }

    /// GET_CC_PARAMS: the 19 DCQCN parameters of the device (the firmware's `CC_TABLE` order
    /// and units: Mb/s, µs, bytes; docs/dcqcn.md).
    pub fn cc_params(&self) -> Result<Vec<u32>> {
        self.sh.cmd(mbox::OP_GET_CC_PARAMS, &[])
    }

    /// SET_CC_PARAMS: sets the parameters whose bit is set in `mask` to `values[i]`, all or
    /// nothing (an out-of-range value is refused with BAD_PARAM and changes nothing); the
    /// firmware then rewrites the engine's congestion-control registers.
    pub fn set_cc_params(&self, mask: u32, values: &[u32; 19]) -> Result<()> {
        let mut a = Vec::with_capacity(20);
        a.push(mask);
        a.extend_from_slice(values);
        self.sh.cmd(mbox::OP_SET_CC_PARAMS, &a).map(|_| ())
    }

    /// Loads a whole DCQCN parameter set ([`CcPreset`]) with one SET_CC_PARAMS.
    pub fn set_cc_preset(&self, preset: CcPreset) -> Result<()> {
        use hematite_model::dcqcn::{CC_PARAMS, NVIDIA_DEFAULTS, PAPER};
        let v = match preset {
            CcPreset::Nvidia => NVIDIA_DEFAULTS,
            CcPreset::Paper => PAPER,
        };
        self.set_cc_params((1u32 << CC_PARAMS) - 1, &v)
    }

    /// One DCQCN parameter by its firmware name (`rpg_time_reset`, `min_time_between_cnps`,
    /// ...; [`hematite_model::dcqcn::CC_NAMES`], units as there).
    pub fn cc_param(&self, name: &str) -> Result<u32> {
        let i = cc_index(name)?;
        let v = self.cc_params()?;
        v.get(i).copied().ok_or_else(|| Error::Device(format!("GET_CC_PARAMS answered {} words", v.len())))
    }

    /// Sets one DCQCN parameter by its firmware name; an out-of-range value is refused by the
    /// firmware (BAD_PARAM) and changes nothing.
    pub fn set_cc_param(&self, name: &str, value: u32) -> Result<()> {
        let i = cc_index(name)?;
        let mut v = [0u32; hematite_model::dcqcn::CC_PARAMS];
        v[i] = value;
        self.set_cc_params(1 << i, &v)
    }

    /// Sets GID table entry `index` (and the MAC the port sends from).
    pub fn set_gid(&self, index: u32, gid: &Gid, mac: u64) -> Result<()> {
        let g = gid_words(gid);
        self.sh.cmd(mbox::OP_SET_GID, &[index, g[0], g[1], g[2], g[3], mac as u32, (mac >> 32) as u32]).map(|_| ())
    }

    /// Allocates a protection domain.
    pub fn alloc_pd(&self) -> Result<Pd> {
        let w = self.sh.cmd(mbox::OP_ALLOC_PD, &[])?;
        need(&w, 1, "ALLOC_PD")?;
        Ok(Pd(Arc::new(PdInner { sh: self.sh.clone(), id: w[0], live: Mutex::new(true) })))
    }

    /// The firmware command that destroys an object; on success its `Drop` does nothing more.
    /// After a fatal device error the object went with the device: destroying it succeeds
    /// (as with mlx5, so that a program can tear down and close the device).
    fn destroy(&self, op: u16, id: u32, live: &Mutex<bool>) -> Result<()> {
        match self.sh.cmd(op, &[id]) {
            Ok(_) => {}
            Err(_) if self.sh.check_fatal() => {}
            Err(e) => return Err(e),
        }
        *live.lock().unwrap() = false;
        Ok(())
    }

    /// Deallocates `pd` (fails with Busy while MRs or QPs use it; a clone elsewhere counts).
    pub fn dealloc_pd(&self, pd: Pd) -> Result<()> {
        let inner = Arc::try_unwrap(pd.0).map_err(|_| Error::Busy("PD still referenced (MRs, QPs or clones)".into()))?;
        self.destroy(mbox::OP_DEALLOC_PD, inner.id, &inner.live)
    }

    /// Allocates a zeroed DMA buffer of `len` bytes (pinned; not registered).
    pub fn alloc_buf(&self, len: usize) -> Result<DmaBuf> {
        self.sh.buf(len)
    }

    /// Allocates a buffer of `len` bytes and registers it as an MR.
    pub fn alloc_mr(&self, pd: &Pd, len: usize, access_flags: u32) -> Result<Mr> {
        if len == 0 {
            return Err(Error::inval("MR of 0 bytes"));
        }
        let buf = self.sh.buf(len)?;
        let addr = buf.addr();
        self.reg(pd, addr, len as u64, access_flags, MrMem::Owned(buf))
    }

    /// Registers caller-owned memory `[addr, addr + len)`.
    ///
    /// # Safety
    /// The memory must stay allocated (and not be handed to anyone who would be hurt by the
    /// device writing it, within the access flags) until the returned MR and every clone of it
    /// are dropped: the device reads and writes it by address.
    pub unsafe fn reg_mr_raw(&self, pd: &Pd, addr: u64, len: u64, access_flags: u32) -> Result<Mr> {
        // SAFETY: the caller's guarantee.
        let mem = unsafe { self.mr_mem(addr, len, addr) }?;
        self.reg(pd, addr, len, access_flags, mem)
    }

    /// Registers caller-owned memory `[addr, addr + len)` that the device (and remote peers)
    /// address as `[iova, iova + len)` (`ibv_reg_mr_iova`). The memory gets a DMA window of its
    /// own from `iova`'s page to the memory's pages, so `iova` and `addr` must have the same
    /// offset in their 4 KiB page, and the IOVA range must not overlap other windows (which
    /// sit at the process's own addresses).
    ///
    /// # Safety
    /// As [`Nic::reg_mr_raw`].
    pub unsafe fn reg_mr_iova(&self, pd: &Pd, addr: u64, len: u64, iova: u64, access_flags: u32) -> Result<Mr> {
        // SAFETY: the caller's guarantee.
        let mem = unsafe { self.mr_mem(addr, len, iova) }?;
        self.reg(pd, iova, len, access_flags, mem)
    }

    /// Makes caller-owned memory `[addr, addr + len)` reachable by the device at `iova`: its
    /// pages pinned where `iova == addr`, or a DMA window of its own from `iova`'s page to the
    /// memory's pages (same offset in their 4 KiB page, not overlapping other windows).
    ///
    /// # Safety
    /// As [`Nic::reg_mr_raw`].
    unsafe fn mr_mem(&self, addr: u64, len: u64, iova: u64) -> Result<MrMem> {
        if iova == addr {
            if len == 0 || addr.checked_add(len).is_none() {
                return Err(Error::inval(format!("MR {addr:#x}+{len:#x}")));
            }
            self.sh.pins.lock().unwrap().pin(self.sh.dev.as_ref(), addr, len)?;
            return Ok(MrMem::Raw(addr, len));
        }
        if len == 0 || addr.checked_add(len + 4095).is_none() || iova.checked_add(len + 4095).is_none() {
            return Err(Error::inval(format!("MR {addr:#x}+{len:#x} at IOVA {iova:#x}")));
        }
        if (iova ^ addr) & 4095 != 0 {
            return Err(Error::inval(format!("IOVA {iova:#x} and address {addr:#x} have different offsets in their 4 KiB page")));
        }
        let vp = addr & !4095;
        let ip = iova & !4095;
        let l = ((addr + len + 4095) & !4095) - vp;
        self.sh.dev.dma_map(ip, vp, l, true)?;
        Ok(MrMem::Translated(ip, l))
    }

    /// `ibv_rereg_mr`: gives `mr` another PD, access flags and, with `mem` = (address, length,
    /// IOVA), other memory (set up as [`Nic::reg_mr_iova`] does), in one firmware command
    /// (REREG_MR) that keeps its keys. The new memory is made reachable before the command and
    /// the old released after it; on any error the MR is left as it was. Busy while a clone
    /// of the MR exists.
    ///
    /// # Safety
    /// As [`Nic::reg_mr_raw`] for the new memory.
    pub unsafe fn rereg_mr(&self, mr: &mut Mr, pd: &Pd, mem: Option<(u64, u64, u64)>, access_flags: u32) -> Result<()> {
        let inner = Arc::get_mut(&mut mr.0).ok_or_else(|| Error::Busy("MR still referenced (clones)".into()))?;
        let fresh = match mem {
            // SAFETY: the caller's guarantee.
            Some((addr, len, iova)) => Some((iova, len, unsafe { self.mr_mem(addr, len, iova) }?)),
            None => None,
        };
        let (iova, len) = fresh.as_ref().map_or((inner.addr, inner.len), |f| (f.0, f.1));
        let r = self.sh.cmd(
            mbox::OP_REREG_MR,
            &[inner.key, pd.id(), iova as u32, (iova >> 32) as u32, len as u32, (len >> 32) as u32, access_flags],
        );
        if let Err(e) = r {
            if let Some((_, _, m)) = fresh {
                m.release(&self.sh);
            }
            return Err(e);
        }
        inner._pd = pd.clone();
        if let Some((iova, len, m)) = fresh {
            let old = std::mem::replace(&mut inner.mem, m);
            old.release(&self.sh);
            inner.addr = iova;
            inner.len = len;
            let mut mrs = self.sh.mrs.lock().unwrap();
            mrs.remove(&inner.key);
            if !matches!(inner.mem, MrMem::Translated(..)) {
                mrs.insert(inner.key, (iova, len));
            }
        }
        Ok(())
    }

    fn reg(&self, pd: &Pd, addr: u64, len: u64, access_flags: u32, mem: MrMem) -> Result<Mr> {
        let r = self.sh.cmd(mbox::OP_REG_MR, &[pd.id(), addr as u32, (addr >> 32) as u32, len as u32, (len >> 32) as u32, access_flags]);
        let w = match r {
            Ok(w) => w,
            Err(e) => {
                mem.release(&self.sh);
                return Err(e);
            }
        };
        need(&w, 2, "REG_MR")?;
        if !matches!(mem, MrMem::Translated(..)) {
            // (inline gathering reads the memory by its address, which a translated MR's is not)
            self.sh.mrs.lock().unwrap().insert(w[0], (addr, len));
        }
        Ok(Mr(Arc::new(MrInner { sh: self.sh.clone(), _pd: pd.clone(), key: w[0], addr, len, mem, live: Mutex::new(true) })))
    }

    /// Deregisters `mr` (Busy while a clone exists).
    pub fn dereg_mr(&self, mr: Mr) -> Result<()> {
        let inner = Arc::try_unwrap(mr.0).map_err(|_| Error::Busy("MR still referenced (clones)".into()))?;
        self.destroy(mbox::OP_DEREG_MR, inner.key, &inner.live)
    }

    /// Creates a CQ of at least `entries` entries; `vector` is the interrupt vector it raises
    /// when armed (None: vector 0).
    pub fn create_cq(&self, entries: u32, vector: Option<u32>) -> Result<Cq> {
        if entries == 0 || entries > self.attr.max_cqe.min(1 << 16) {
            return Err(Error::inval(format!("CQ of {entries} entries (max {})", self.attr.max_cqe)));
        }
        let vector = vector.unwrap_or(0);
        if vector >= self.sh.dev.info().num_irqs {
            return Err(Error::inval(format!("interrupt vector {vector} (the device has {})", self.sh.dev.info().num_irqs)));
        }
        let log = log2_ceil(entries).max(1);
        let ring = self.sh.buf((1usize << log) * desc::CQE_BYTES)?;
        let base = ring.addr();
        let w = self.sh.cmd(mbox::OP_CREATE_CQ, &[log as u32, base as u32, (base >> 32) as u32, vector])?;
        need(&w, 1, "CREATE_CQ")?;
        Ok(Cq(Arc::new(CqInner {
            sh: self.sh.clone(),
            cqn: w[0],
            log,
            vector,
            ring,
            st: SpinLock::new(CqState::new(0)),
            live: Mutex::new(true),
        })))
    }

    /// Destroys `cq` (Busy while QPs use it).
    pub fn destroy_cq(&self, cq: Cq) -> Result<()> {
        let inner = Arc::try_unwrap(cq.0).map_err(|_| Error::Busy("CQ still referenced (QPs or clones)".into()))?;
        self.destroy(mbox::OP_DESTROY_CQ, inner.cqn, &inner.live)
    }

    /// Creates an RC QP in RESET.
    pub fn create_qp(&self, pd: &Pd, send_cq: &Cq, recv_cq: &Cq, caps: QpCaps) -> Result<Qp> {
        self.create_qp_of(QpType::Rc, pd, send_cq, recv_cq, caps)
    }

    /// Creates a QP of type `qpt` (RC or UC) in RESET.
    pub fn create_qp_of(&self, qpt: QpType, pd: &Pd, send_cq: &Cq, recv_cq: &Cq, caps: QpCaps) -> Result<Qp> {
        let a = &self.attr;
        if caps.max_send_wr == 0 || caps.max_send_wr > a.max_qp_wr || caps.max_recv_wr > a.max_qp_wr {
            return Err(Error::inval(format!("queue sizes {} / {} (max {})", caps.max_send_wr, caps.max_recv_wr, a.max_qp_wr)));
        }
        if caps.max_send_sge > a.max_sge || caps.max_recv_sge > a.max_sge || caps.max_inline_data > a.max_inline_data {
            return Err(Error::inval(format!(
                "SGEs {} / {}, inline {} (max {} SGEs, {} inline bytes)",
                caps.max_send_sge, caps.max_recv_sge, caps.max_inline_data, a.max_sge, a.max_inline_data
            )));
        }
        let s_need = (32 + 16 * caps.max_send_sge.max(2) as usize).max(32 + caps.max_inline_data as usize);
        let ss = stride_log(s_need).ok_or_else(|| Error::inval("send WQE larger than 512 bytes"))?;
        let rs = stride_log(16 + 16 * caps.max_recv_sge.max(1) as usize).ok_or_else(|| Error::inval("receive WQE too large"))?;
        let sl = log2_ceil(caps.max_send_wr).max(1);
        let rl = log2_ceil(caps.max_recv_wr.max(1)).max(1);
        let sq = self.sh.buf((1usize << sl) * (64 << ss))?;
        let rq = self.sh.buf((1usize << rl) * (64 << rs))?;
        let (sb, rb) = (sq.addr(), rq.addr());
        let w = self.sh.cmd(
            mbox::OP_CREATE_QP,
            &[
                pd.id(),
                send_cq.cqn(),
                recv_cq.cqn(),
                qpt as u32,
                sb as u32,
                (sb >> 32) as u32,
                rb as u32,
                (rb >> 32) as u32,
                sl as u32,
                ss as u32,
                rl as u32,
                rs as u32,
                caps.max_send_wr,
                caps.max_recv_wr,
                caps.max_send_sge,
                caps.max_recv_sge,
                caps.max_inline_data,
            ],
        )?;
        need(&w, 6, "CREATE_QP")?;
        let got = QpCaps { max_send_wr: w[1], max_recv_wr: w[2], max_send_sge: w[3], max_recv_sge: w[4], max_inline_data: w[5] };
        let inner = Arc::new(QpInner {
            sh: self.sh.clone(),
            qpn: w[0],
            qpt,
            _pd: pd.clone(),
            _scq: send_cq.clone(),
            _rcq: recv_cq.clone(),
            sq,
            rq,
            sq_log: sl,
            sq_stride: 64 << ss,
            rq_log: rl,
            rq_stride: 64 << rs,
            caps: got,
            sq_lock: SpinLock::new(()),
            rq_lock: SpinLock::new(()),
            trk: Arc::new(WqTrack {
                sq_ring: (sb as usize, sl, 64 << ss),
                rq_ring: (rb as usize, rl, 64 << rs),
                scqn: send_cq.cqn(),
                rcqn: recv_cq.cqn(),
                ..WqTrack::default()
            }),
            live: Mutex::new(true),
        });
        self.sh.qps.lock().unwrap().insert(w[0], Arc::downgrade(&inner));
        {
            let mut t = self.sh.trks.lock().unwrap();
            t.retain(|w| w.strong_count() > 0);
            t.push(Arc::downgrade(&inner.trk));
        }
        send_cq.0.st.lock().qps.push((w[0], inner.trk.clone()));
        if !Arc::ptr_eq(&send_cq.0, &recv_cq.0) {
            recv_cq.0.st.lock().qps.push((w[0], inner.trk.clone()));
        }
        Ok(Qp(inner))
    }

    /// MODIFY_QP with the attributes `mask` selects.
    pub fn modify_qp(&self, qp: &Qp, attr: &QpAttr, attr_mask: u32) -> Result<()> {
        let to = if attr_mask & mask::STATE != 0 { Some(attr.qp_state) } else { None };
        if qp.0.trk.errored.swap(false, Ordering::AcqRel) && !matches!(to, Some(QpState::Reset | QpState::Err)) {
            // the engine put the QP into ERR: tell the firmware first, so that the requested
            // transition is judged from ERR (and refused unless it leads to RESET). The one
            // move the firmware refuses is from RESET, where the engine holds no state of the
            // QP: the mark was older than the RESET (an event taken late), and is dropped.
            let mut a = vec![qp.qpn(), mask::STATE];
            a.extend_from_slice(&QpAttr { qp_state: QpState::Err, ..Default::default() }.words());
            match self.sh.cmd(mbox::OP_MODIFY_QP, &a) {
                Err(Error::Firmware { status, .. }) if status == mbox::Status::BadState as u8 => {}
                r => {
                    r?;
                }
            }
        }
        let mut args = vec![qp.qpn(), attr_mask];
        args.extend_from_slice(&attr.words());
        self.sh.cmd(mbox::OP_MODIFY_QP, &args)?;
        if attr_mask & mask::STATE != 0 && matches!(attr.qp_state, QpState::Reset | QpState::Init) {
            qp.0.trk.errored.store(false, Ordering::Release);
        }
        if attr_mask & mask::STATE != 0 && attr.qp_state == QpState::Reset {
            // back to RESET: the rings start over
            {
                let _s = qp.0.sq_lock.lock();
                let _r = qp.0.rq_lock.lock();
                qp.0.trk.reset();
            }
            Self::mark_stale(qp);
            self.mark_stale_events(qp);
        }
        Ok(())
    }

    /// Counts the QP-fatal events of `qp` still in the event queue (not taken by the event
    /// thread yet) as stale (`WqTrack::stale_fatal`), under the queue's lock, so that
    /// [`Nic::poll_events`] takes each either before the count or as stale.
    fn mark_stale_events(&self, qp: &Qp) {
        let Some(eq) = &self.eq else { return };
        let c = &*eq.0;
        let st = c.st.lock();
        qp.0.trk.stale_fatal.store(c.events_of(&st, qp.qpn()), Ordering::Relaxed);
    }


    /// Counts the completions of `qp` still in its CQs (not polled yet) as stale: their
    /// indices are those of the queues before RESET. Counted and stored under each CQ's lock,
    /// so that a concurrent poll takes each either as stale or before the count.
    fn mark_stale(qp: &Qp) {
        let q = &*qp.0;
        let same = Arc::ptr_eq(&q._scq.0, &q._rcq.0);
        for (cq, sq, rq) in [(&q._scq, true, same), (&q._rcq, false, true)] {
            if !sq && same {
                break;
            }
            let c = &*cq.0;
            let st = c.st.lock();
            let (ns, nr) = c.pending_of(&st, q.qpn);
            if sq {
                q.trk.stale_sq.store(ns, Ordering::Relaxed);
            }
            if rq {
                q.trk.stale_rq.store(nr, Ordering::Relaxed);
            }
        }
    }

    /// QUERY_QP: the attributes and the QP's state. A QP the engine put into ERR (error
    /// completion, QP-fatal event) is moved to ERR in the firmware first, so that the state
    /// read back and later transitions agree with the hardware.
    pub fn query_qp(&self, qp: &Qp) -> Result<QpAttr> {
        let w = self.sh.cmd(mbox::OP_QUERY_QP, &[qp.qpn()])?;
        let a = QpAttr::from_words(&w)?;
        if qp.0.trk.errored.load(Ordering::Acquire) && !matches!(a.qp_state, QpState::Err | QpState::Reset) {
            self.modify_qp(qp, &QpAttr { qp_state: QpState::Err, ..Default::default() }, mask::STATE)?;
            let w = self.sh.cmd(mbox::OP_QUERY_QP, &[qp.qpn()])?;
            return QpAttr::from_words(&w);
        }
        Ok(a)
    }

    /// Destroys `qp` (Busy while a clone exists).
    pub fn destroy_qp(&self, qp: Qp) -> Result<()> {
        let inner = Arc::try_unwrap(qp.0).map_err(|_| Error::Busy("QP still referenced (clones)".into()))?;
        self.destroy(mbox::OP_DESTROY_QP, inner.qpn, &inner.live)
    }

    /// RESET -> INIT -> RTR -> RTS towards `peer`, with the given access flags, path MTU code
    /// (1..5 = 256..4096), timeout code and retry count.
    pub fn connect_rc(&self, qp: &Qp, peer: &RcPeer, my_psn: u32, access_flags: u32, path_mtu: u32, timeout: u32, retry_cnt: u32) -> Result<()> {
        let a = QpAttr { qp_state: QpState::Init, qp_access_flags: access_flags, ..Default::default() };
        self.modify_qp(qp, &a, mask::STATE | mask::PKEY_INDEX | mask::PORT | mask::ACCESS_FLAGS)?;
        let a = QpAttr {
            qp_state: QpState::Rtr,
            path_mtu,
            dest_qp_num: peer.qpn,
            rq_psn: peer.psn,
            max_dest_rd_atomic: 4,
            min_rnr_timer: 12,
            dgid: peer.gid,
            dmac: peer.mac,
            ..Default::default()
        };
        self.modify_qp(
            qp,
            &a,
            mask::STATE | mask::AV | mask::PATH_MTU | mask::DEST_QPN | mask::RQ_PSN | mask::MAX_DEST_RD_ATOMIC | mask::MIN_RNR_TIMER,
        )?;
        let a = QpAttr { qp_state: QpState::Rts, timeout, retry_cnt, rnr_retry: 7, sq_psn: my_psn, max_rd_atomic: 4, ..Default::default() };
        self.modify_qp(qp, &a, mask::STATE | mask::TIMEOUT | mask::RETRY_CNT | mask::RNR_RETRY | mask::SQ_PSN | mask::MAX_QP_RD_ATOMIC)
    }
}
