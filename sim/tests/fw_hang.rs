//! A control-core firmware command that never completes (docs/sim-device.md, "Fault tests").
//!
//! The client hangs the firmware the way any client may (docs/control-core.md: hold the core,
//! write IMEM, run it): IMEM word 0 becomes `jal x0, 0`, a loop on the reset vector. The core
//! then runs (MBOX_STATUS says running, no fault, no trap) and never answers the mailbox. No
//! special firmware build or device option is needed.
//!
//! The driver's command must fail with `Error::Timeout` (ETIMEDOUT, what the verbs provider
//! returns for it) after its `cmd_timeout`, not earlier and not much later; the next command
//! must fail at once (the mailbox still holds the unanswered one: EBUSY); dropping the NIC must
//! not hang; and a new session (the device resets the function when its client goes) must work.
//!
//! Second case: the device process itself stops answering (SIGSTOP). A request waits for its
//! reply at most `SimDevice::set_reply_timeout`, then the NIC counts as failed (EIO, as after
//! the process died).

use hostdrv::nic::{OpenOptions, FW_PORT};
use hostdrv::simdev::SimDevice;
use hostdrv::{Device, Error, Nic};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod common;

fn start(name: &str) -> common::DevProc {
    common::DevProc::start("hm-fwhang", name, &[])
}

const MBOX_STATUS: u64 = FW_PORT + 0x204;
const CORE_CTRL: u64 = FW_PORT + 0x208;
const IMEM: u64 = FW_PORT + 0x8000;
/// `jal x0, 0`: jump to itself.
const LOOP: u32 = 0x0000_006f;


/// ALLOC_PD on `nic` and how long it took, in a thread, so that a driver that waits forever
/// fails the test instead of hanging it: after `limit`, `on_hang` runs and the process exits.
fn alloc_pd_within(nic: &Nic, limit: Duration, on_hang: impl FnOnce()) -> (hostdrv::Result<hostdrv::nic::Pd>, Duration) {
    std::thread::scope(|s| {
        let (tx, rx) = std::sync::mpsc::channel();
        s.spawn(move || {
            let t = Instant::now();
            let r = nic.alloc_pd();
            let _ = tx.send((r, t.elapsed()));
        });
        rx.recv_timeout(limit).unwrap_or_else(|_| {
            on_hang();
            std::process::exit(1)
        })
    })
}
#[test]
fn a_firmware_command_that_never_completes_times_out() {
    let mut d = start("cmd");
    let long = OpenOptions { cmd_timeout: Duration::from_secs(120), ..Default::default() };
    let dev = Arc::new(SimDevice::open(&d.sock).expect("open"));
    // the first session waits for the firmware's start-up, then the one under test gets a
    // short timeout
    drop(Nic::open_with(Box::new(dev.clone()), long.clone()).expect("first open"));
    let tmo = Duration::from_secs(5);
    let nic = Nic::open_with(Box::new(dev.clone()), OpenOptions { cmd_timeout: tmo, ..long.clone() }).expect("open with a 5 s timeout");
    let _pd = nic.alloc_pd().expect("a command before the hang");

    // hang the firmware: a loop at the reset vector
    dev.write32(CORE_CTRL, 0).unwrap();
    dev.write32(IMEM, LOOP).unwrap();
    dev.write32(CORE_CTRL, 1).unwrap();
    let st = dev.read32(MBOX_STATUS).unwrap();
    assert_eq!(st & 0b1111, 0b0010, "core running, nothing pending, no fault or trap: status {st:#x}");

    let (r, took) = alloc_pd_within(&nic, tmo + Duration::from_secs(60), || {
        eprintln!("ALLOC_PD to a hung firmware did not return within {:?}", tmo + Duration::from_secs(60));
    });
    match &r {
        Err(e @ Error::Timeout(_)) => assert_eq!(e.errno(), libc::ETIMEDOUT),
        other => panic!("ALLOC_PD to a hung firmware: {other:?}, expected a timeout"),
    }
    assert!(took >= tmo && took < tmo + Duration::from_secs(5), "the timeout came after {took:?} (cmd_timeout {tmo:?})");
    let st = dev.read32(MBOX_STATUS).unwrap();
    assert_eq!(st & 0b1111, 0b0011, "the command is still pending on a running core: status {st:#x}");
    eprintln!("ALLOC_PD to a hung firmware: {} after {:.2} s", r.as_ref().unwrap_err(), took.as_secs_f64());

    // the next command fails at once: the mailbox still holds the unanswered one
    let t = Instant::now();
    match nic.create_cq(16, None) {
        Err(e @ Error::Busy(_)) => assert_eq!(e.errno(), libc::EBUSY),
        other => panic!("a command behind the hung one: {other:?}, expected Busy"),
    }
    assert!(t.elapsed() < Duration::from_secs(2), "the second command took {:?}", t.elapsed());
    // a register read still works: the device process itself is fine
    assert_eq!(dev.read32(hematite_abi::regs::HM_REG_ID as u64).unwrap(), hematite_abi::regs::HM_REG_ID_RESET);

    // closing does not hang (the driver's destroy commands fail at once)
    let t = Instant::now();
    drop(_pd);
    drop(nic);
    drop(dev);
    assert!(t.elapsed() < Duration::from_secs(5), "closing took {:?}", t.elapsed());

    // the device resets the function when its client goes: a new session works
    let dev = Arc::new(SimDevice::open(&d.sock).expect("reopen"));
    let nic = Nic::open_with(Box::new(dev.clone()), long).expect("open after the hang");
    nic.alloc_pd().expect("a command after the reset");
    assert!(d.child.try_wait().unwrap().is_none(), "the device process ended");
}

/// The device process itself stops answering (SIGSTOP): a request waits for its reply at most
/// the reply timeout (3 s here), then fails, and the NIC is marked failed for good: later
/// commands fail at once with a device error (EIO), destroys succeed, nothing hangs.
#[test]
fn a_device_process_that_stops_answering_is_a_fatal_error() {
    let d = start("stop");
    let dev = Arc::new(SimDevice::open(&d.sock).expect("open"));
    let nic = Nic::open_with(Box::new(dev.clone()), OpenOptions { cmd_timeout: Duration::from_secs(120), ..Default::default() })
        .expect("open");
    let pd = nic.alloc_pd().expect("a command while the device runs");
    dev.set_reply_timeout(Duration::from_secs(3));
    let pid = d.child.id() as i32;
    // SAFETY: signalling our own child.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGSTOP) }, 0);
    let (r, took) = alloc_pd_within(&nic, Duration::from_secs(60), || {
        // SAFETY: as above.
        unsafe { libc::kill(pid, libc::SIGCONT) };
        eprintln!("ALLOC_PD to a stopped device process did not return within 60 s");
    });
    // SAFETY: as above.
    unsafe { libc::kill(pid, libc::SIGCONT) };
    eprintln!("ALLOC_PD to a stopped device process: {:?} after {:.2} s", r.as_ref().err(), took.as_secs_f64());
    match &r {
        Err(e @ Error::Device(_)) => assert_eq!(e.errno(), libc::EIO),
        other => panic!("ALLOC_PD to a stopped device process: {other:?}, expected a device error"),
    }
    assert!(took >= Duration::from_secs(3) && took < Duration::from_secs(10), "the error came after {took:?}");
    assert!(nic.check_fatal() && dev.failed(), "the NIC is not marked failed");
    let t = Instant::now();
    assert!(matches!(nic.create_cq(16, None), Err(Error::Device(_))), "a command after the failure");
    nic.dealloc_pd(pd).expect("destroying after the failure succeeds");
    drop(nic);
    drop(dev);
    assert!(t.elapsed() < Duration::from_secs(2), "commands and close after the failure took {:?}", t.elapsed());
    // the device process, running again, serves a new client
    let dev = Arc::new(SimDevice::open(&d.sock).expect("reopen"));
    Nic::open_with(Box::new(dev), OpenOptions { cmd_timeout: Duration::from_secs(120), ..Default::default() })
        .expect("open after the stop")
        .alloc_pd()
        .expect("a command after the stop");
}
