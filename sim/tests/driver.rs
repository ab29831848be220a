//! The host driver (hostdrv) against the simulated device process (`hematite-sim device`):
//! every verb of the API, bad arguments, two processes over the datagram wire, and a client
//! killed in the middle of a transfer.

use hematite_sim::demo::{self, Kind};
use hostdrv::nic::{access, mask, AsyncEvent, QpAttr, QpCaps, QpState, RcPeer, RecvWr, SendOp, SendWr, WcOpcode, WcStatus};
use hostdrv::simdev::SimDevice;
use hostdrv::{Device, Error};
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

fn exe() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_hematite-sim"))
}

fn fw() -> PathBuf {
    hematite_sim::fw::image_path()
}

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("hm-drv-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn fw_status(e: &Error) -> Option<u8> {
    match e {
        Error::Firmware { status, .. } => Some(*status),
        _ => None,
    }
}

#[test]
fn every_verb_and_bad_arguments() {
    let d = dir("verbs");
    let pair = demo::start_pair(&exe(), &d, Some(&fw()), 0.0).expect("devices");
    let a = demo::open_side(&d.join("a.sock"), 2, 1 << 16).expect("open a");
    let b = demo::open_side(&d.join("b.sock"), 2, 1 << 16).expect("open b");

    // a second process (here: a second connection) cannot open a device in use
    match SimDevice::open(&d.join("a.sock")) {
        Err(Error::Busy(_)) => {}
        Err(e) => panic!("second open: {e}"),
        Ok(_) => panic!("second open of a device in use succeeded"),
    }

    // query
    let at = a.nic.query_device().unwrap();
    assert_eq!(at.vendor_id, 0x484D);
    assert_eq!((at.max_qp, at.max_cq, at.max_mr, at.max_sge, at.max_inline_data), (4096, 4096, 4096, 14, 224));
    let port = a.nic.query_port(1).unwrap();
    assert_eq!((port.state, port.active_mtu, port.link_layer), (4, 5, 2));
    assert_eq!(fw_status(&a.nic.query_port(2).unwrap_err()), Some(3), "port 2: BAD_PARAM");
    assert!(a.nic.counters().unwrap().len() >= 13);
    // DCQCN parameters: NVIDIA defaults; a set; an out-of-range set changes nothing
    let cc = a.nic.cc_params().unwrap();
    assert_eq!((cc.len(), cc[2], cc[16]), (19, 300, 4), "rpg_time_reset 300 us, min_time_between_cnps 4 us");
    let mut v = [0u32; 19];
    v[16] = 8;
    a.nic.set_cc_params(1 << 16, &v).unwrap();
    assert_eq!(a.nic.cc_params().unwrap()[16], 8);
    v[4] = 40; // rpg_threshold > 31
    assert_eq!(fw_status(&a.nic.set_cc_params(1 << 16 | 1 << 4, &v).unwrap_err()), Some(3), "BAD_PARAM");
    assert_eq!(a.nic.cc_params().unwrap()[4], 1);
    // presets and parameters by name
    a.nic.set_cc_preset(hostdrv::CcPreset::Paper).unwrap();
    assert_eq!(a.nic.cc_params().unwrap(), hematite_model::dcqcn::PAPER.to_vec());
    assert_eq!(a.nic.cc_param("rpg_byte_reset").unwrap(), 10_000_000);
    a.nic.set_cc_param("min_time_between_cnps", 20).unwrap();
    assert_eq!(a.nic.cc_param("min_time_between_cnps").unwrap(), 20);
    assert!(matches!(a.nic.set_cc_param("no_such_param", 1), Err(hostdrv::Error::InvalidArgument(_))));
    assert_eq!(fw_status(&a.nic.set_cc_param("rpg_threshold", 32).unwrap_err()), Some(3), "BAD_PARAM");
    a.nic.set_cc_preset(hostdrv::CcPreset::Nvidia).unwrap();
    assert_eq!(a.nic.cc_params().unwrap(), hematite_model::dcqcn::NVIDIA_DEFAULTS.to_vec());

    // PD / MR / CQ lifecycle
    let pd = a.nic.alloc_pd().unwrap();
    let mr = a.nic.alloc_mr(&pd, 8192, access::LOCAL_WRITE).unwrap();
    assert_ne!(mr.lkey(), 0);
    assert!(matches!(a.nic.dealloc_pd(pd.clone()), Err(Error::Busy(_))), "PD used by an MR");
    let mut raw = vec![0u8; 3 * 4096];
    // SAFETY: `raw` outlives the MR (dropped below, before raw).
    let rmr = unsafe { a.nic.reg_mr_raw(&pd, raw.as_mut_ptr() as u64 + 100, 5000, access::LOCAL_WRITE | access::REMOTE_READ) }.unwrap();
    assert_ne!(rmr.lkey(), mr.lkey());
    let windows = a.nic.dma_windows().len();
    a.nic.dereg_mr(rmr).unwrap();
    assert!(a.nic.dma_windows().len() <= windows);
    drop(raw);
    a.nic.dereg_mr(mr).unwrap();
    let cq = a.nic.create_cq(100, Some(3)).unwrap();
    assert_eq!(cq.entries(), 128);
    let qp = a.nic.create_qp(&pd, &cq, &cq, QpCaps::default()).unwrap();
    assert!(matches!(a.nic.destroy_cq(cq.clone()), Err(Error::Busy(_))), "CQ used by a QP");
    assert_eq!(a.nic.query_qp(&qp).unwrap().qp_state, QpState::Reset);
    // illegal transition RESET -> RTR: BAD_STATE; missing attributes: BAD_ATTR_MASK
    let e = a.nic.modify_qp(&qp, &QpAttr { qp_state: QpState::Rtr, ..Default::default() }, mask::STATE).unwrap_err();
    assert_eq!(fw_status(&e), Some(4), "{e}");
    let e = a.nic.modify_qp(&qp, &QpAttr { qp_state: QpState::Init, ..Default::default() }, mask::STATE).unwrap_err();
    assert_eq!(fw_status(&e), Some(8), "{e}");
    a.nic.modify_qp(&qp, &QpAttr { qp_state: QpState::Init, ..Default::default() }, mask::STATE | mask::PKEY_INDEX | mask::PORT | mask::ACCESS_FLAGS).unwrap();
    assert_eq!(a.nic.query_qp(&qp).unwrap().qp_state, QpState::Init);
    a.nic.destroy_qp(qp).unwrap();
    a.nic.destroy_cq(cq).unwrap();
    a.nic.dealloc_pd(pd).unwrap();

    // bad arguments: errors, not panics
    assert!(matches!(a.nic.create_cq(0, None), Err(Error::InvalidArgument(_))));
    assert!(matches!(a.nic.create_cq(16, Some(99)), Err(Error::InvalidArgument(_))));
    let pd = a.nic.alloc_pd().unwrap();
    let cq = a.nic.create_cq(16, None).unwrap();
    let big = QpCaps { max_send_sge: 15, ..QpCaps::default() };
    assert!(matches!(a.nic.create_qp(&pd, &cq, &cq, big), Err(Error::InvalidArgument(_))));
    let big = QpCaps { max_inline_data: 225, ..QpCaps::default() };
    assert!(matches!(a.nic.create_qp(&pd, &cq, &cq, big), Err(Error::InvalidArgument(_))));
    assert!(matches!(a.nic.alloc_mr(&pd, 0, 0), Err(Error::InvalidArgument(_))));
    let e = a.nic.alloc_mr(&pd, 4096, access::REMOTE_WRITE).unwrap_err();
    assert_eq!(fw_status(&e), Some(3), "REMOTE_WRITE without LOCAL_WRITE: {e}");
    assert!(matches!(a.dev.read32(2), Err(Error::InvalidArgument(_))));
    assert!(matches!(a.dev.read32(1 << 20), Err(Error::InvalidArgument(_))));
    assert!(matches!(a.dev.set_irq(16, None), Err(Error::InvalidArgument(_))));
    assert!(matches!(a.dev.dma_map(1, 4096, 4096, true), Err(Error::InvalidArgument(_))));
    assert!(a.dev.dma_unmap(0x7000_0000, 4096).is_err(), "unmapping what is not mapped");
    drop(cq);
    drop(pd);

    // traffic: every operation, verified
    demo::connect(&a, &b, 14).unwrap();
    for k in [Kind::Send, Kind::Write, Kind::Read] {
        let r = demo::transfer(&a, &b, k, 3000, 12, false).unwrap_or_else(|e| panic!("{k:?}: {e}"));
        assert!(r.verified);
    }
    assert!(demo::atomics(&a, &b, 10).unwrap().verified);

    // inline SEND, SEND with immediate, WRITE with immediate; blocking and async waits
    let qa = &a.qps[1];
    let qb = &b.qps[1];
    let half = b.mr.len() / 2;
    b.nic.post_recv(qb, &[RecvWr { wr_id: 7, sgl: vec![b.mr.sge(half, 64)] }, RecvWr { wr_id: 8, sgl: vec![b.mr.sge(half + 64, 64)] }]).unwrap();
    a.mr.buf().unwrap().write(0, b"inline hello").unwrap();
    let mut w = SendWr::new(1, SendOp::SendImm(0xABCD), vec![a.mr.sge(0, 12)]);
    w.inline = true;
    a.nic.post_send(qa, &[w]).unwrap();
    let c = demo::drain(&a.nic, &a.cq, 1, Duration::from_secs(120)).unwrap();
    assert_eq!((c[0].opcode, c[0].wr_id), (WcOpcode::Send, 1));
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let r = rt.block_on(async { tokio::time::timeout(Duration::from_secs(120), b.nic.wait_cq_async(&b.cq, 4)).await }).expect("async wait").unwrap();
    assert_eq!((r[0].opcode, r[0].wr_id, r[0].byte_len, r[0].imm), (WcOpcode::Recv, 7, 12, Some(0xABCD)));
    assert_eq!(b.mr.buf().unwrap().to_vec(half as usize, 12).unwrap(), b"inline hello");
    a.nic.post_send(qa, &[SendWr::new(2, SendOp::WriteImm { remote_addr: b.mr.addr() + half + 1000, rkey: b.mr.rkey(), imm: 5 }, vec![a.mr.sge(0, 12)])]).unwrap();
    demo::drain(&a.nic, &a.cq, 1, Duration::from_secs(120)).unwrap();
    let r = b.nic.wait_cq(&b.cq, 4, Duration::from_secs(120)).unwrap();
    assert_eq!((r[0].opcode, r[0].imm), (WcOpcode::RecvRdmaWithImm, Some(5)));

    // too many SGEs, inline data outside any MR: refused before anything is posted
    let sg = vec![a.mr.sge(0, 8); qa.caps().max_send_sge as usize + 1];
    assert!(matches!(a.nic.post_send(qa, &[SendWr::new(3, SendOp::Send, sg)]), Err(Error::InvalidArgument(_))));
    let mut w = SendWr::new(4, SendOp::Send, vec![hostdrv::nic::Sge { addr: 0x10, len: 8, lkey: a.mr.lkey() }]);
    w.inline = true;
    assert!(matches!(a.nic.post_send(qa, &[w]), Err(Error::InvalidArgument(_))));
    // a batch whose second WR is refused: the first is posted (and its doorbell rung), the
    // error names the second
    let sg = vec![a.mr.sge(0, 8); qa.caps().max_send_sge as usize + 1];
    let batch = [
        SendWr::new(30, SendOp::Write { remote_addr: b.mr.addr() + half + 2000, rkey: b.mr.rkey() }, vec![a.mr.sge(0, 12)]),
        SendWr::new(31, SendOp::Send, sg),
    ];
    assert!(matches!(a.nic.post_send(qa, &batch), Err(Error::InvalidArgument(_))));
    let c = demo::drain(&a.nic, &a.cq, 1, Duration::from_secs(120)).unwrap();
    assert_eq!((c.len(), c[0].wr_id, c[0].status), (1, 30, WcStatus::Success));
    assert_eq!(b.mr.buf().unwrap().to_vec((half + 2000) as usize, 12).unwrap(), b"inline hello");

    // a bad rkey: the peer NAKs, the WR completes with REM_ACCESS_ERR, the QP goes to ERR and
    // the event queue reports it
    a.nic.post_send(qa, &[SendWr::new(5, SendOp::Write { remote_addr: b.mr.addr(), rkey: b.mr.rkey() ^ 0x100 }, vec![a.mr.sge(0, 8)])]).unwrap();
    let c = a.nic.wait_cq(&a.cq, 1, Duration::from_secs(120)).unwrap();
    assert_eq!((c[0].wr_id, c[0].status), (5, WcStatus::RemAccessErr));
    let t0 = Instant::now();
    let mut evs = Vec::new();
    while evs.is_empty() && t0.elapsed() < Duration::from_secs(30) {
        evs = a.nic.poll_events().unwrap();
    }
    assert!(evs.contains(&AsyncEvent::QpFatal(qa.qpn())), "events {evs:?}");
    assert_eq!(a.nic.query_qp(qa).unwrap().qp_state, QpState::Err);
    // posting to a QP in ERR completes with a flush error
    a.nic.post_send(qa, &[SendWr::new(6, SendOp::Send, vec![a.mr.sge(0, 8)])]).unwrap();
    let c = a.nic.wait_cq(&a.cq, 1, Duration::from_secs(120)).unwrap();
    assert_eq!((c[0].wr_id, c[0].status), (6, WcStatus::WrFlushErr));
    let st = a.dev.stats().unwrap();
    assert_eq!(st.dma_faults, 0, "no DMA outside the mapped windows");
    drop(a);
    drop(b);
    drop(pair);
}

#[test]
fn two_processes_and_a_client_killed_mid_transfer() {
    let d = dir("procs");
    let pair = demo::start_pair(&exe(), &d, Some(&fw()), 0.0).expect("devices");
    let a = demo::open_side(&d.join("a.sock"), 1, 1 << 16).expect("open a");
    let ip_a = a.dev.info().ipv4.unwrap();
    let mac_a = a.dev.info().mac.unwrap();

    // 1. another process drives NIC b and echoes our SENDs
    let (out, inp) = (d.join("echo.info"), d.join("me.info"));
    let mut child = Command::new(exe())
        .args(["rc-echo", d.join("b.sock").to_str().unwrap(), out.to_str().unwrap(), inp.to_str().unwrap(), "16", "2048"])
        .spawn()
        .unwrap();
    let (pq, ppsn, pip, pmac) = demo::read_info(&out, Duration::from_secs(120)).unwrap();
    assert_eq!(pmac, a.dev.arp_resolve(pip).unwrap(), "the peer's MAC by ARP");
    let qp = &a.qps[0];
    let acc = access::LOCAL_WRITE | access::REMOTE_WRITE | access::REMOTE_READ;
    a.nic.connect_rc(qp, &RcPeer { qpn: pq, psn: ppsn, gid: hostdrv::nic::gid_from_ipv4(pip), mac: pmac }, 0x777, acc, 5, 14, 7).unwrap();
    demo::write_info(&inp, qp.qpn(), 0x777, ip_a, mac_a).unwrap();
    demo::read_info(&out.with_extension("ready"), Duration::from_secs(120)).unwrap();
    let half = a.mr.len() / 2;
    let data: Vec<u8> = (0..16 * 2048).map(|i| (i * 7 + i / 2048) as u8).collect();
    a.mr.buf().unwrap().write(0, &data).unwrap();
    let recvs: Vec<RecvWr> = (0..16).map(|i| RecvWr { wr_id: 100 + i, sgl: vec![a.mr.sge(half + i * 2048, 2048)] }).collect();
    a.nic.post_recv(qp, &recvs).unwrap();
    let sends: Vec<SendWr> = (0..16).map(|i| SendWr::new(i, SendOp::Send, vec![a.mr.sge(i * 2048, 2048)])).collect();
    a.nic.post_send(qp, &sends).unwrap();
    let c = demo::drain(&a.nic, &a.cq, 32, Duration::from_secs(300)).unwrap();
    assert_eq!(c.iter().filter(|c| c.opcode == WcOpcode::Recv).count(), 16);
    assert_eq!(a.mr.buf().unwrap().to_vec(half as usize, 16 * 2048).unwrap(), data, "echoed bytes");
    assert!(child.wait().unwrap().success(), "the echo process");

    // 2. its device was reset when it left: a new client opens it, the old QP is gone
    let b2 = hostdrv::Nic::open(Box::new(SimDevice::open(&d.join("b.sock")).expect("reopen b"))).expect("reopen b");
    let e = b2.fw_command(hematite_abi::mbox::OP_QUERY_QP, &[pq]).unwrap_err();
    assert_eq!(fw_status(&e), Some(6), "the dead client's QP: {e}");
    drop(b2);

    // 3. a client killed mid-transfer: our QP retries, then completes with RETRY_EXC_ERR
    let _ = std::fs::remove_file(&out);
    let _ = std::fs::remove_file(&inp);
    let _ = std::fs::remove_file(out.with_extension("ready"));
    let pd = a.nic.alloc_pd().unwrap();
    let qp2 = a.nic.create_qp(&pd, &a.cq, &a.cq, QpCaps::default()).unwrap();
    let mr = a.nic.alloc_mr(&pd, 1 << 16, access::LOCAL_WRITE).unwrap();
    let mut child = Command::new(exe())
        .args(["rc-echo", d.join("b.sock").to_str().unwrap(), out.to_str().unwrap(), inp.to_str().unwrap(), "1000000", "2048"])
        .spawn()
        .unwrap();
    let (pq, ppsn, pip, pmac) = demo::read_info(&out, Duration::from_secs(120)).unwrap();
    // timeout code 8 (1 ms = 262k cycles), 2 retries: the failure shows within seconds
    a.nic.connect_rc(&qp2, &RcPeer { qpn: pq, psn: ppsn, gid: hostdrv::nic::gid_from_ipv4(pip), mac: pmac }, 0x99, acc, 5, 8, 2).unwrap();
    demo::write_info(&inp, qp2.qpn(), 0x99, ip_a, mac_a).unwrap();
    demo::read_info(&out.with_extension("ready"), Duration::from_secs(120)).unwrap();
    let mut sent = 0u64;
    let mut killed = false;
    let mut failed = None;
    let t0 = Instant::now();
    while failed.is_none() && t0.elapsed() < Duration::from_secs(240) {
        if sent < 60 {
            let burst: Vec<SendWr> = (0..4).map(|k| SendWr::new(sent + k, SendOp::Send, vec![mr.sge(0, 2048)])).collect();
            if a.nic.post_send(&qp2, &burst).is_ok() {
                sent += 4;
            }
        }
        if sent >= 8 && !killed {
            child.kill().unwrap();
            child.wait().unwrap();
            killed = true;
        }
        for c in a.nic.poll_cq(&a.cq, 64).unwrap() {
            if c.status != WcStatus::Success && c.status != WcStatus::WrFlushErr {
                failed = Some(c.status);
            }
        }
    }
    assert!(killed);
    assert_eq!(failed, Some(WcStatus::RetryExcErr), "the survivor sees RETRY_EXC_ERR, not a hang");
    assert_eq!(a.nic.query_qp(&qp2).unwrap().qp_state, QpState::Err);
    // and the dead client's device serves the next one
    let b3 = demo::open_side(&d.join("b.sock"), 1, 1 << 16).expect("reopen b after the kill");
    assert_eq!(b3.dev.stats().unwrap().dma_faults, 0);
    drop(b3);
    // a raw connection that skips HELLO gets EPROTO for anything else
    {
        use hostdrv::simproto as p;
        use std::os::fd::AsRawFd;
        std::thread::sleep(Duration::from_millis(500));
        let fd = p::connect(&d.join("b.sock")).unwrap();
        let q = p::Req { seq: 1, cmd: p::CMD_READ32, ..Default::default() };
        p::send(fd.as_raw_fd(), &q.encode(), None).unwrap();
        let mut buf = [0u8; 64];
        match p::recv(fd.as_raw_fd(), &mut buf).unwrap() {
            p::Recv::Msg(n, _) => assert_eq!(p::Rep::decode(&buf[..n]).unwrap().status, -libc::EPROTO),
            _ => panic!("no answer to a request before HELLO"),
        }
    }
    drop(a);
    drop(pair);
}

/// CPU time (user + system, in clock ticks) of process `pid`.
fn cpu_ticks(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let rest = &s[s.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

#[test]
fn udp_wire_and_idle_devices_sleep_but_keep_time() {
    let d = dir("udp");
    let base = 20000 + (std::process::id() % 20000) as u16;
    let pair = demo::start_pair_on(&exe(), &d, Some(&fw()), 0.0, Some(base), &["--idle-after", "100000"], &[]).expect("devices");
    let a = demo::open_side(&d.join("a.sock"), 1, 1 << 16).expect("open a");
    let b = demo::open_side(&d.join("b.sock"), 1, 1 << 16).expect("open b");
    demo::connect(&a, &b, 14).unwrap();
    let r = demo::transfer(&a, &b, Kind::Write, 8192, 8, false).unwrap();
    assert!(r.verified);
    let r = demo::transfer(&a, &b, Kind::Send, 1000, 8, false).unwrap();
    assert!(r.verified);
    // idle: nothing to do for 300k cycles -> the device sleeps; its clock still advances
    let pid = pair.pids()[0];
    // wait until the device has gone idle, however loaded the machine: its clock must first
    // pass the 100,000 quiet cycles of --idle-after (a device starved of CPU runs them slowly,
    // so a slow clock alone does not mean idle), then slow down
    let t = Instant::now();
    let quiet_from = a.dev.stats().unwrap().cycles;
    loop {
        let c = a.dev.stats().unwrap().cycles;
        std::thread::sleep(Duration::from_secs(1));
        let c2 = a.dev.stats().unwrap().cycles;
        if (c2 - quiet_from > 150_000 && c2 - c < 20_000) || t.elapsed() > Duration::from_secs(120) {
            break;
        }
    }
    let (c0, t0) = (a.dev.stats().unwrap().cycles, cpu_ticks(pid));
    std::thread::sleep(Duration::from_secs(3));
    let (c1, t1) = (a.dev.stats().unwrap().cycles, cpu_ticks(pid));
    let hz = 100.0; // USER_HZ
    let cpu = (t1 - t0) as f64 / hz / 3.0;
    eprintln!("idle device: {:.1}% of a core, {} cycles in 3 s", cpu * 100.0, c1 - c0);
    assert!(cpu < 0.05, "idle device used {:.1}% of a core", cpu * 100.0);
    assert!(c1 > c0, "the idle device's clock stopped");
    // and it wakes up for work
    let r = demo::transfer(&a, &b, Kind::Read, 4096, 4, false).unwrap();
    assert!(r.verified);
    drop(a);
    drop(b);
    drop(pair);
}
