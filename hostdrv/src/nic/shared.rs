//! What every object of one opened device shares ([`Shared`]): the device, the pinned
//! memory, the registered MRs and QPs the fast path looks up, the fatal-error flag, and the
//! firmware mailbox through which every control command goes (docs/control-core.md).

use super::objects::{CqInner, QpInner, WqTrack};
use crate::device::Device;
use crate::mem::{DmaBuf, Pins, Unpin};
use crate::{regs, Error, Result};
use hematite_abi::desc::get32;
use hematite_abi::mbox;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

/// Offset of the control core's host port in BAR0 (map hm_bar of regs/hematite.rdl).
pub const FW_PORT: u64 = regs::HM_BAR_CTRL as u64;
/// Mailbox registers of the control core's host port (map hm_ctrl_host; docs/registers.md),
/// BAR0-relative.
pub const FW_CMD_IN: u64 = FW_PORT + regs::HM_HOST_CMD_IN as u64;
pub const FW_CMD_OUT: u64 = FW_PORT + regs::HM_HOST_CMD_OUT as u64;
pub const FW_MBOX_DB: u64 = FW_PORT + regs::HM_HOST_MBOX_DB as u64;
pub const FW_MBOX_STATUS: u64 = FW_PORT + regs::HM_HOST_MBOX_STATUS as u64;
pub const FW_CORE_CTRL: u64 = FW_PORT + regs::HM_HOST_CORE_CTRL as u64;

/// Fields of MBOX_STATUS (`hm_mbox_status_t`): a command is pending, the CPU runs, a fault or a
/// trap (both sticky), commands completed.
pub(crate) mod mbox_status {
    use hematite_abi::desc::{fpos, mask32};
    use hematite_abi::regs::HM_MBOX_STATUS_T_FIELDS as F;
    pub const PENDING: u32 = mask32(fpos(F, "pending"));
    pub const RUNNING: u32 = mask32(fpos(F, "running"));
    pub const STOPPED: u32 = mask32(fpos(F, "fault")) | mask32(fpos(F, "trap"));
    pub const DONE_COUNT: (usize, usize) = fpos(F, "done_count");
    /// The bits that change when a command completes or the core stops.
    pub const WATCH: u32 = PENDING | STOPPED | mask32(DONE_COUNT);
}

/// Most clock cycles one wait for a firmware command takes on the simulated device
/// ([`Device::wait32`]): about 20 ms of its time, so that other threads' register accesses
/// are not held back for long (they queue behind the wait).
const CMD_WAIT_CYCLES: u64 = 4096;

/// Doorbell words: `hm_db_qp_t` (SQ and RQ) and `hm_db_cq_t`.
pub(crate) mod db {
    use hematite_abi::desc::{fpos, put32};
    use hematite_abi::regs::{HM_DB_CQ_T_FIELDS as C, HM_DB_QP_T_FIELDS as Q};
    const PI: (usize, usize) = fpos(Q, "pi");
    const QPN: (usize, usize) = fpos(Q, "qpn");
    const CI: (usize, usize) = fpos(C, "ci");
    const ARM: (usize, usize) = fpos(C, "arm");
    const CQN: (usize, usize) = fpos(C, "cqn");
    /// A send or receive queue's new producer index.
    #[inline]
    pub const fn qp(pi: u32, qpn: u32) -> u32 {
        put32(PI, pi) | put32(QPN, qpn)
    }
    /// A CQ's consumer index, and its arm request (0 none, 1 next, 2 next solicited).
    #[inline]
    pub const fn cq(ci: u32, arm: u32, cqn: u32) -> u32 {
        put32(CI, ci) | put32(ARM, arm) | put32(CQN, cqn)
    }
}

pub(super) struct Shared {
    pub(super) dev: Box<dyn Device>,
    pub(super) pins: Mutex<Pins>,
    pub(super) mbox: Mutex<u8>,
    pub(super) cmd_timeout: Duration,
    /// Registered MRs by lkey: (addr, len) for inline-data gathering.
    pub(super) mrs: Mutex<HashMap<u32, (u64, u64)>>,
    /// QPs by number, for completion bookkeeping.
    pub(super) qps: Mutex<HashMap<u32, Weak<QpInner>>>,
    /// Every QP's work-queue tracking, for [`Nic::sends_outstanding`](super::Nic::sends_outstanding) (upgrading one of
    /// these never runs a QP's destructor, unlike upgrading a `QpInner`).
    pub(super) trks: Mutex<Vec<Weak<WqTrack>>>,
    /// The device failed for good ([`Device::failed`]): commands fail at once with EIO,
    /// destroying objects succeeds (they went with the device), and polling a CQ completes
    /// every outstanding work request with WR_FLUSH_ERR.
    pub(super) fatal: AtomicBool,
    /// The event queue, once made (for a destroyed QP's count of its events still in it).
    pub(super) eq: OnceLock<Weak<CqInner>>,
    /// QP-fatal events of destroyed QPs still in the event queue when they were destroyed, by
    /// QP number: taken by the event thread, they must not mark a later QP of the same number
    /// as failed (they come before any event of that QP).
    pub(super) dead_fatal: Mutex<HashMap<u32, u32>>,
    /// Send WQEs posted alone that fit 64 bytes also go through the push window (the MMIO path).
    pub(super) push: bool,
}

struct PinOwner(Weak<Shared>);

impl Unpin for PinOwner {
    fn unpin(&self, addr: u64, len: u64) {
        if let Some(sh) = self.0.upgrade() {
            let mut p = sh.pins.lock().unwrap();
            if let Err(e) = p.unpin(sh.dev.as_ref(), addr, len) {
                if !sh.fatal.load(Ordering::Acquire) {
                    eprintln!("hostdrv: unpinning {addr:#x}+{len:#x}: {e}");
                }
            }
        }
    }
}

fn fatal_error() -> Error {
    Error::Device("the device has failed (fatal error): close it and open it again".into())
}

impl Shared {
    /// Whether the device failed for good; looks at the backend once more while it has not.
    pub(super) fn check_fatal(&self) -> bool {
        if self.fatal.load(Ordering::Acquire) {
            return true;
        }
        if self.dev.failed() {
            self.fatal.store(true, Ordering::Release);
            for t in self.trks.lock().unwrap_or_else(|e| e.into_inner()).iter().filter_map(Weak::upgrade) {
                t.fatal.store(true, Ordering::Release);
            }
            return true;
        }
        false
    }

    pub(super) fn cmd(&self, op: u16, args: &[u32]) -> Result<Vec<u32>> {
        if self.fatal.load(Ordering::Acquire) {
            return Err(fatal_error());
        }
        match self.cmd_once(op, args) {
            Err(_) if self.check_fatal() => Err(fatal_error()),
            r => r,
        }
    }

    fn cmd_once(&self, op: u16, args: &[u32]) -> Result<Vec<u32>> {
        if args.len() > mbox::MAX_ARGS {
            return Err(Error::inval("firmware command too long"));
        }
        let mut tok = self.mbox.lock().map_err(|_| Error::Device("mailbox lock poisoned".into()))?;
        *tok = tok.wrapping_add(1);
        let token = *tok;
        let dev = self.dev.as_ref();
        let st0 = dev.read32(FW_MBOX_STATUS)?;
        if st0 & mbox_status::STOPPED != 0 {
            return Err(Error::Device(format!("control core stopped (mailbox status {st0:#x}: fault/trap)")));
        }
        if st0 & mbox_status::PENDING != 0 {
            return Err(Error::Busy("a firmware command is still pending".into()));
        }
        dev.write32(FW_CMD_IN, mbox::Header::word(op, args.len() as u8, token))?;
        for (i, a) in args.iter().enumerate() {
            dev.write32(FW_CMD_IN + 4 * (i as u64 + 1), *a)?;
        }
        dev.write32(FW_MBOX_DB, 1)?;
        let t0 = Instant::now();
        let mut polls = 0u32;
        // until the done count, PENDING or STOPPED changes from what the doorbell left: one
        // WAIT32 on the simulated device (a few thousand cycles each, so that other threads'
        // accesses get their turn), one read on hardware
        let mut last = st0 | mbox_status::PENDING;
        loop {
            let (st, _) = dev.wait32(FW_MBOX_STATUS, mbox_status::WATCH, last, CMD_WAIT_CYCLES)?;
            last = st;
            if st & mbox_status::STOPPED != 0 {
                return Err(Error::Device(format!("control core fault/trap during command {op:#x} (status {st:#x})")));
            }
            if get32(mbox_status::DONE_COUNT, st) != get32(mbox_status::DONE_COUNT, st0) && st & mbox_status::PENDING == 0 {
                break;
            }
            if t0.elapsed() > self.cmd_timeout {
                return Err(Error::Timeout(format!("firmware command {op:#04x} not answered in {:?}", self.cmd_timeout)));
            }
            polls += 1;
            if polls > 64 {
                std::thread::sleep(Duration::from_micros(200));
            }
        }
        let h = dev.read32(FW_CMD_OUT)?;
        let status = h as u8;
        let n = ((h >> 8) & 0xFF) as usize;
        if (h >> 24) as u8 != token {
            return Err(Error::Device(format!("answer token {} for command token {token}", h >> 24)));
        }
        if status != 0 {
            return Err(Error::Firmware { opcode: op, status });
        }
        if n > mbox::MAX_ARGS {
            return Err(Error::Device(format!("answer claims {n} words")));
        }
        let mut out = Vec::with_capacity(n);
        for i in 0..n {
            out.push(dev.read32(FW_CMD_OUT + 4 * (i as u64 + 1))?);
        }
        Ok(out)
    }

    pub(super) fn buf(self: &Arc<Shared>, len: usize) -> Result<DmaBuf> {
        let owner: Arc<dyn Unpin> = Arc::new(PinOwner(Arc::downgrade(self)));
        DmaBuf::new(len, owner, |a, l| self.pins.lock().unwrap().pin(self.dev.as_ref(), a, l))
    }
}

pub(super) fn need(out: &[u32], n: usize, what: &str) -> Result<()> {
    if out.len() < n {
        return Err(Error::Device(format!("{what}: {} answer words, expected {n}", out.len())));
    }
    Ok(())
}
