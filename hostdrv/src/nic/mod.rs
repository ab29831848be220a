//! The safe driver API on any [`Device`]: query the device and port, protection domains,
//! memory regions, completion queues, RC queue pairs through the verbs state machine, posting
//! and polling, waiting for completions (blocking or async on tokio), asynchronous events.
//!
//! Objects are reference counted so that memory the device may still write is never freed
//! first: a QP keeps its PD and CQs alive, an MR its PD; dropping an object destroys it on the
//! device (firmware command) before its rings are unpinned and freed. `destroy_*` do the same
//! and return the error, if any.
//!
//! Layouts come from their single sources of truth: descriptors and rings from
//! `hematite_model::desc` (generated from `rtl/pkg/hm_desc_pkg.sv`), registers from
//! [`crate::regs`] (generated from `rtl/pkg/hm_regs_pkg.sv`), mailbox commands from
//! `hematite_abi::mbox` and the attribute block from `hematite_abi::qp`.
//!
//! The files: `attr.rs` (attributes and plain values), `shared.rs` (the state all objects
//! share and the firmware mailbox), `objects.rs` (PD, MR, CQ, QP), `control.rs` (queries
//! and the objects' life cycle), `post_poll.rs` (posting, polling, waiting, events) and
//! `fastpath.rs` (the allocation-free posting and polling of the verbs provider). This file
//! has the [`Nic`] itself: opening, closing and what it tells about the device.

mod attr;
pub mod boot;
mod control;
mod fastpath;
mod objects;
mod post_poll;
mod shared;

pub use attr::{
    access, gid_from_ipv4, gid_link_local, mac_of_link_local, mask, AsyncEvent, DeviceAttr, Gid, PortAttr, QpAttr, QpCaps,
    QpState, RcPeer,
};
pub use control::CcPreset;
pub use fastpath::SqPost;
pub use hematite_model::transport::{Cqe, RecvWr, SendOp, SendWr, Sge, WcOpcode, WcStatus};
pub use objects::{Cq, Mr, Pd, Qp};
pub use shared::{FW_CMD_IN, FW_CMD_OUT, FW_CORE_CTRL, FW_MBOX_DB, FW_MBOX_STATUS, FW_PORT};

use crate::device::Device;
use crate::mem::Pins;
use crate::regs;
use crate::{Error, Result};
use hematite_abi::mbox;
use shared::Shared;
use std::collections::HashMap;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

/// An opened Hematite device.
pub struct Nic {
    sh: Arc<Shared>,
    attr: DeviceAttr,
    eq: Option<Cq>,
    irq: Mutex<HashMap<u32, Arc<OwnedFd>>>,
    mac: Option<u64>,
    ipv4: Option<u32>,
}

/// Options for [`Nic::open_with`].
#[derive(Debug, Clone)]
pub struct OpenOptions {
    /// How long a firmware command may take (the simulated device runs ~1000x slower than
    /// hardware; its first command also waits for the firmware's start-up).
    pub cmd_timeout: Duration,
    /// Set up the event queue (a 256-entry CQ on vector 0).
    pub events: bool,
    /// Program GID 0 from the device's MAC and IPv4 address when the backend knows them.
    pub set_gid: bool,
    /// Post single send WQEs through the MMIO path too (pushed whole before the doorbell,
    /// [`Device::push64`]) when the backend can and the WQE uses at most the push's 64 bytes
    /// (`fast::wqe_fits_push`, whatever the ring's stride). None: as the
    /// environment says, `HEMATITE_PUSH=0` or `off` turns it off (`1` / `on` / unset: on;
    /// anything else: the open fails with EINVAL).
    pub push: Option<bool>,
}

impl Default for OpenOptions {
    fn default() -> Self {
        let secs = std::env::var("HM_CMD_TIMEOUT_S").ok().and_then(|s| s.parse().ok()).unwrap_or(120);
        OpenOptions { cmd_timeout: Duration::from_secs(secs), events: true, set_gid: true, push: None }
    }
}

impl Drop for Nic {
    fn drop(&mut self) {
        // the event queue's ring may only go once the engine no longer writes it
        if let Some(eq) = self.eq.take() {
            if self.sh.cmd(mbox::OP_SET_EQ, &[eq.cqn(), 0]).is_err() {
                // The firmware did not turn events off (it hangs, e.g. after a command timed
                // out, or the device is gone). A function reset stops the engine; then the
                // ring may go, and with it the last hold on the device. Only when the reset
                // fails too on a device not known to be dead is the ring kept (leaked): the
                // device may still write events into it.
                if self.sh.check_fatal() || self.sh.dev.reset().is_ok() {
                    *eq.0.live.lock().unwrap() = false;
                    drop(eq);
                } else {
                    std::mem::forget(eq);
                }
            }
        }
    }
}

/// The identity register says Hematite, and the interface version (register map and descriptor
/// formats, `regs/hematite.rdl`) is one this driver speaks: the same major, and a minor no
/// older than the driver's (a newer device minor only adds).
pub(crate) fn check_identity(dev: &dyn Device) -> Result<()> {
    let id = dev.read32(regs::HM_REG_ID as u64)?;
    if id != regs::HM_REG_ID_RESET {
        return Err(Error::Device(format!("BAR0 identity {id:#010x}, expected {:#010x} (not a Hematite function?)", regs::HM_REG_ID_RESET)));
    }
    use hematite_abi::version::{major, minor, speaks, INTERFACE};
    let v = dev.read32(regs::HM_REG_VERSION as u64)?;
    let (major, minor, want_major, want_minor) = (major(v), minor(v), major(INTERFACE), minor(INTERFACE));
    if !speaks(v, INTERFACE) {
        return Err(Error::Device(format!(
            "the device's interface version is {major}.{minor}; this driver speaks {want_major}.{want_minor} (same major, minor {want_minor} or newer): driver and device (bitstream) do not match"
        )));
    }
    Ok(())
}

impl Nic {
    /// Opens `dev` with the default options.
    pub fn open(dev: Box<dyn Device>) -> Result<Nic> {
        Nic::open_with(dev, OpenOptions::default())
    }

    /// Checks the identity register and the interface version, starts the control core when
    /// it is held (a card after power-up or a function reset: the firmware image loaded
    /// through BAR0 from `$HEMATITE_FW` or the installed one, [`boot`]), checks that the firmware runs
    /// and speaks this driver's mailbox protocol on the engine it was built for (QUERY_ABI),
    /// reads the device attributes, programs GID 0 and the event queue.
    pub fn open_with(dev: Box<dyn Device>, o: OpenOptions) -> Result<Nic> {
        check_identity(dev.as_ref())?;
        let push = match o.push {
            Some(p) => p,
            None => match std::env::var("HEMATITE_PUSH").as_deref() {
                Err(_) | Ok("1") | Ok("on") => true,
                Ok("0") | Ok("off") => false,
                Ok(v) => return Err(Error::inval(format!("HEMATITE_PUSH={v:?}: 1 / on or 0 / off"))),
            },
        } && dev.can_push();
        boot::start_if_held(dev.as_ref(), boot::image_path().as_deref())?;
        let st = dev.read32(FW_MBOX_STATUS)?;
        if st & shared::mbox_status::RUNNING == 0 {
            return Err(Error::Device(format!("the control core is not running (mailbox status {st:#x})")));
        }
        let mac = dev.info().mac;
        let ipv4 = dev.info().ipv4;
        let sh = Arc::new(Shared {
            dev,
            pins: Mutex::new(Pins::default()),
            mbox: Mutex::new(0),
            cmd_timeout: o.cmd_timeout,
            mrs: Mutex::new(HashMap::new()),
            qps: Mutex::new(HashMap::new()),
            trks: Mutex::new(Vec::new()),
            fatal: AtomicBool::new(false),
            eq: std::sync::OnceLock::new(),
            dead_fatal: Mutex::new(HashMap::new()),
            push,
        });
        let mut nic = Nic { sh, attr: DeviceAttr::default(), eq: None, irq: Mutex::new(HashMap::new()), mac, ipv4 };
        nic.check_firmware_abi()?;
        nic.attr = nic.query_device()?;
        if o.set_gid {
            if let (Some(m), Some(ip)) = (mac, ipv4) {
                nic.set_gid(0, &gid_from_ipv4(ip), m)?;
            }
            if let Some(m) = mac {
                nic.set_gid(1, &gid_link_local(m), m)?;
            }
        }
        if o.events {
            let eq = nic.create_cq(256, None)?;
            nic.sh.cmd(mbox::OP_SET_EQ, &[eq.cqn(), 1])?;
            let _ = nic.sh.eq.set(Arc::downgrade(&eq.0));
            nic.eq = Some(eq);
        }
        Ok(nic)
    }

    /// The device underneath.
    pub fn device(&self) -> &dyn Device {
        self.sh.dev.as_ref()
    }

    /// Attributes read at open.
    pub fn attr(&self) -> &DeviceAttr {
        &self.attr
    }

    /// Whether the driver set up the event queue (it takes one of the device's CQs).
    pub fn has_event_queue(&self) -> bool {
        self.eq.is_some()
    }

    /// The port's MAC and IPv4 address, when the backend knows them.
    pub fn mac(&self) -> Option<u64> {
        self.mac
    }
    pub fn ipv4(&self) -> Option<u32> {
        self.ipv4
    }

    /// Whether some QP has send work requests whose completions have not been polled yet
    /// (a requester that may be waiting for ACKs, responses or its retransmission timer).
    pub fn sends_outstanding(&self) -> bool {
        self.sh.trks.lock().unwrap().iter().filter_map(Weak::upgrade).any(|t| {
            !t.errored.load(Ordering::Acquire) && t.sq_pi.load(Ordering::Acquire) != t.sq_done.load(Ordering::Acquire)
        })
    }

    /// Tells the device that its host is waiting on it: one register read. A co-simulated
    /// device process slows its clock down when nothing has happened for a while (see
    /// docs/sim-device.md); a host with work outstanding calls this periodically, so that
    /// timers such as the ACK timeout expire at full simulation speed. On hardware it is a
    /// harmless read.
    pub fn keepalive(&self) -> Result<()> {
        self.sh.dev.read32(regs::HM_REG_ID as u64).map(|_| ())
    }

    /// Whether the device has failed for good (the flag only; see [`Nic::check_fatal`]).
    #[inline(always)]
    pub fn is_fatal(&self) -> bool {
        self.sh.fatal.load(Ordering::Relaxed)
    }

    /// Whether the device has failed for good, asking the backend ([`Device::failed`]) while
    /// the flag is not set: the simulated device process died or closed the connection. From
    /// then on commands fail with EIO (`Error::Device`), destroying objects succeeds, and
    /// polling completes every outstanding work request with WR_FLUSH_ERR. The verbs
    /// provider's event thread calls this every 100 ms and reports `IBV_EVENT_DEVICE_FATAL`.
    pub fn check_fatal(&self) -> bool {
        self.sh.check_fatal()
    }

    /// Raw firmware command (opcode, argument words) -> answer words.
    pub fn fw_command(&self, op: u16, args: &[u32]) -> Result<Vec<u32>> {
        self.sh.cmd(op, args)
    }

    /// The eventfd of interrupt `vector` (made and handed to the device on first use).
    fn vector_fd(&self, vector: u32) -> Result<Arc<OwnedFd>> {
        let mut m = self.irq.lock().unwrap();
        if let Some(f) = m.get(&vector) {
            return Ok(f.clone());
        }
        // SAFETY: eventfd(2) with valid flags; the result is checked and owned below.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if fd < 0 {
            return Err(Error::last_os("eventfd"));
        }
        // SAFETY: a new descriptor nobody else owns.
        let fd = Arc::new(unsafe { OwnedFd::from_raw_fd(fd) });
        self.sh.dev.set_irq(vector, Some(fd.as_raw_fd()))?;
        m.insert(vector, fd.clone());
        Ok(fd)
    }

    /// The eventfd interrupt `vector` signals (created and handed to the device on first use).
    pub fn irq_fd(&self, vector: u32) -> Result<std::os::fd::RawFd> {
        if vector >= self.sh.dev.info().num_irqs {
            return Err(Error::inval(format!("interrupt vector {vector}")));
        }
        Ok(self.vector_fd(vector)?.as_raw_fd())
    }

    /// Bytes of host memory the driver keeps mapped for the device (rings, MRs), in pages.
    pub fn pinned_bytes(&self) -> u64 {
        self.sh.pins.lock().unwrap().pinned_pages() as u64 * 4096
    }

    /// DMA windows the driver has mapped now: (IOVA, length).
    pub fn dma_windows(&self) -> Vec<(u64, u64)> {
        self.sh.pins.lock().unwrap().windows()
    }
}

#[cfg(test)]
mod identity_tests {
    use super::*;
    use crate::device::DeviceInfo;
    use std::os::fd::RawFd;

    fn check(id: u32, ver: u32) -> Result<()> {
        check_identity(&fake(id, ver, |_| (0, vec![])))
    }

    #[test]
    fn a_device_of_another_interface_version_is_refused_with_both_versions_named() {
        let v = regs::HM_REG_VERSION_RESET;
        assert!(check(regs::HM_REG_ID_RESET, v).is_ok());
        assert!(check(regs::HM_REG_ID_RESET, v + 1).is_ok(), "a newer minor only adds");
        let e = check(regs::HM_REG_ID_RESET, v + 0x1_0000).unwrap_err().to_string();
        assert!(e.contains("interface version is 1.") && e.contains("do not match"), "{e}");
        if v & 0xFFFF > 0 {
            assert!(check(regs::HM_REG_ID_RESET, v - 1).is_err(), "an older minor");
        }
        let e = check(0x1234_5678, v).unwrap_err().to_string();
        assert!(e.contains("not a Hematite function"), "{e}");
    }

    /// A function with the given identity and version words whose firmware answers every
    /// command with `answer(opcode)` = (status, words), through the real mailbox protocol.
    struct FakeFw {
        id: u32,
        ver: u32,
        info: DeviceInfo,
        answer: fn(u16) -> (u8, Vec<u32>),
        st: std::sync::Mutex<(u32, [u32; 64], [u32; 64])>, // done count, CMD_IN, CMD_OUT
    }
    impl Device for FakeFw {
        fn info(&self) -> &DeviceInfo {
            &self.info
        }
        fn read32(&self, off: u64) -> Result<u32> {
            let st = self.st.lock().unwrap();
            Ok(match off {
                o if o == regs::HM_REG_ID as u64 => self.id,
                o if o == regs::HM_REG_VERSION as u64 => self.ver,
                o if o == FW_MBOX_STATUS => {
                    hematite_abi::desc::put32(shared::mbox_status::DONE_COUNT, st.0) | shared::mbox_status::RUNNING
                }
                o if (FW_CMD_OUT..FW_CMD_OUT + 256).contains(&o) => st.2[((o - FW_CMD_OUT) / 4) as usize],
                o if o == FW_CORE_CTRL => 1, // the CPU runs (its firmware booted)
                _ => 0,
            })
        }
        fn write32(&self, off: u64, v: u32) -> Result<()> {
            let mut st = self.st.lock().unwrap();
            if (FW_CMD_IN..FW_CMD_IN + 256).contains(&off) {
                st.1[((off - FW_CMD_IN) / 4) as usize] = v;
            } else if off == FW_MBOX_DB {
                let h = hematite_abi::mbox::Header::parse(st.1[0]);
                let (status, words) = (self.answer)(h.opcode);
                st.2 = [0; 64];
                st.2[0] = hematite_abi::mbox::answer_word(status, words.len() as u8, h.token);
                st.2[1..1 + words.len()].copy_from_slice(&words);
                st.0 += 1;
            }
            Ok(())
        }
        fn dma_map(&self, _: u64, _: u64, _: u64, _: bool) -> Result<()> {
            Ok(())
        }
        fn dma_unmap(&self, _: u64, _: u64) -> Result<()> {
            Ok(())
        }
        fn set_irq(&self, _: u32, _: Option<RawFd>) -> Result<()> {
            Ok(())
        }
        fn reset(&self) -> Result<()> {
            Ok(())
        }
    }

    fn fake(id: u32, ver: u32, answer: fn(u16) -> (u8, Vec<u32>)) -> FakeFw {
        let info = DeviceInfo { name: "t".into(), bar0_size: 0x1_0000, num_irqs: 0, mac: None, ipv4: None };
        FakeFw { id, ver, info, answer, st: std::sync::Mutex::new((0, [0; 64], [0; 64])) }
    }

    fn open_fake(answer: fn(u16) -> (u8, Vec<u32>)) -> String {
        match Nic::open(Box::new(fake(regs::HM_REG_ID_RESET, regs::HM_REG_VERSION_RESET, answer))) {
            Ok(_) => "opened".into(),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn a_firmware_of_another_abi_is_refused_at_open_with_both_versions_named() {
        use hematite_abi::mbox::{Status, OP_QUERY_ABI, OP_QUERY_DEVICE};
        use hematite_abi::version::{INTERFACE, MAILBOX};
        // a firmware from before the handshake
        let e = open_fake(|_| (Status::BadOpcode as u8, vec![]));
        assert!(e.contains("predates the version handshake"), "{e}");
        // another mailbox major
        let e = open_fake(|op| if op == OP_QUERY_ABI { (0, vec![MAILBOX + (1 << 16), INTERFACE, INTERFACE]) } else { (0, vec![]) });
        assert!(e.contains("mailbox protocol") && e.contains("driver and firmware do not match"), "{e}");
        // a firmware built for another interface than the engine's: it refuses everything else
        let e = open_fake(|op| {
            if op == OP_QUERY_ABI {
                (0, vec![MAILBOX, INTERFACE, INTERFACE + (1 << 16)])
            } else {
                (Status::AbiMismatch as u8, vec![])
            }
        });
        assert!(e.contains("firmware and RTL") && e.contains("do not match"), "{e}");
        // a short answer
        let e = open_fake(|op| if op == OP_QUERY_ABI { (0, vec![MAILBOX]) } else { (0, vec![]) });
        assert!(e.contains("QUERY_ABI"), "{e}");
        // a matching firmware gets as far as QUERY_DEVICE (answered short here)
        let e = open_fake(|op| match op {
            OP_QUERY_ABI => (0, vec![MAILBOX + 3, INTERFACE, INTERFACE]),
            OP_QUERY_DEVICE => (0, vec![]),
            _ => (Status::BadOpcode as u8, vec![]),
        });
        assert!(e.contains("QUERY_DEVICE"), "{e}");
    }
}
