//! The control core in co-simulation (hm_sim_nic_top's hm_ctrl_core): load a firmware image
//! through the core's IMEM window, start it, and post commands through its host mailbox the
//! way a driver does (docs/firmware.md). Offsets are the core block's (rtl/ctrl/hm_ctrl_sys.sv).
use crate::eng::Engine;
use std::path::PathBuf;

// The core's host port (port-relative offsets, map hm_ctrl_host of regs/hematite.rdl).
use hematite_abi::regs;
pub const FW_CMD_IN: u16 = regs::HM_HOST_CMD_IN;
pub const FW_CMD_OUT: u16 = regs::HM_HOST_CMD_OUT;
pub const FW_MBOX_DB: u16 = regs::HM_HOST_MBOX_DB;
pub const FW_MBOX_STATUS: u16 = regs::HM_HOST_MBOX_STATUS;
/// MBOX_STATUS.pending (`hm_mbox_status_t`).
const ST_PENDING: u32 = hematite_abi::desc::mask32(hematite_abi::desc::fpos(regs::HM_MBOX_STATUS_T_FIELDS, "pending"));
pub const FW_CORE_CTRL: u16 = regs::HM_HOST_CORE_CTRL;
pub const FW_IMEM: u16 = regs::HM_HOST_IMEM;
pub const FW_IMEM_BYTES: usize = regs::HM_HOST_IMEM_BYTES as usize;

/// The firmware image built by `./hematite fw`: `$HM_FW_HEX`, else build/fw/firmware.hex.
pub fn image_path() -> PathBuf {
    match std::env::var("HM_FW_HEX") {
        Ok(p) => PathBuf::from(p),
        Err(_) => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../build/fw/firmware.hex"),
    }
}

/// Reads a `$readmemh` file of 32-bit words (`@addr` lines move the word address).
pub fn read_hex(path: &std::path::Path) -> Result<Vec<u32>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("{}: {e} (build the firmware image with ./hematite fw)", path.display()))?;
    // the driver's parser: the one the host uses to load a card's control core
    hostdrv::nic::boot::parse_hex(&text, &path.display().to_string())
}

/// Holds the core, writes `image` into IMEM, hands the engine's control bus to the core and
/// starts it.
pub fn boot(e: &mut Engine, image: &[u32]) -> Result<(), String> {
    if !e.fw_write(FW_CORE_CTRL, 0)? {
        return Err("CORE_CTRL write refused".into());
    }
    for (i, w) in image.iter().enumerate() {
        if !e.fw_write(FW_IMEM + 4 * i as u16, *w)? {
            return Err(format!("IMEM word {i} refused"));
        }
    }
    e.set_ctl_from_core(true);
    if !e.fw_write(FW_CORE_CTRL, 1)? {
        return Err("CORE_CTRL run refused".into());
    }
    Ok(())
}

/// A command's answer and its latency: cycles from the doorbell write's response to the
/// core's done pulse.
#[derive(Clone, Debug)]
pub struct FwAnswer {
    pub words: Vec<u32>,
    pub cycles: u64,
}

/// Posts command `op` with `args` (the header word built here: in_words, `token`) and waits
/// for the answer.
pub fn call(e: &mut Engine, op: u16, token: u8, args: &[u32], max_cycles: u64) -> Result<FwAnswer, String> {
    let mut c = Vec::with_capacity(1 + args.len());
    c.push(u32::from(op) | (args.len() as u32) << 16 | u32::from(token) << 24);
    c.extend_from_slice(args);
    command(e, &c, max_cycles)
}

/// Posts `cmd` (header word first) and waits for the answer (at most `max_cycles`).
pub fn command(e: &mut Engine, cmd: &[u32], max_cycles: u64) -> Result<FwAnswer, String> {
    if cmd.len() > 64 {
        return Err("a command has at most 64 words".into());
    }
    for (i, w) in cmd.iter().enumerate() {
        if !e.fw_write(FW_CMD_IN + 4 * i as u16, *w)? {
            return Err(format!("CMD_IN word {i} refused (a command still pending?)"));
        }
    }
    let done_before = e.fw_done_cycles.len();
    if !e.fw_write(FW_MBOX_DB, 1)? {
        return Err("doorbell refused (a command still pending?)".into());
    }
    let t0 = e.cycle();
    e.run_until(max_cycles, |e| e.fw_done_cycles.len() > done_before || e.fw_out.2)
        .map_err(|_| format!("no answer within {max_cycles} cycles"))?;
    if e.fw_out.2 {
        return Err("the control core trapped".into());
    }
    let cycles = e.fw_done_cycles[done_before] - t0;
    let (st, ok) = e.fw_read(FW_MBOX_STATUS)?;
    if !ok || st & ST_PENDING != 0 {
        return Err(format!("mailbox still pending after the done pulse (status {st:#x})"));
    }
    let (h, _) = e.fw_read(FW_CMD_OUT)?;
    let n = ((h >> 8) & 0xFF) as usize;
    if n > 63 {
        return Err(format!("answer header {h:#x} claims {n} words"));
    }
    let mut words = vec![h];
    for i in 1..=n {
        words.push(e.fw_read(FW_CMD_OUT + 4 * i as u16)?.0);
    }
    Ok(FwAnswer { words, cycles })
}
