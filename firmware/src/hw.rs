//! Hardware access: the [`Bus`] trait (32-bit accesses at engine control-bus offsets; MMIO at
//! `map::CTL_BASE + offset` on the core, a mock in the host tests) and the [`Engine`] layer that
//! executes control-bus table commands (stage the words, write `HM_CTL_CMD`, poll
//! `HM_CTL_STATUS` a bounded number of times, map a refusal to an error).

use crate::desc::{self, CTX_WORDS};
use crate::regs;

/// 32-bit accesses to the engine's control bus; `addr` is the control-bus offset.
pub trait Bus {
    /// Reads the register at `addr`.
    fn read32(&mut self, addr: u32) -> u32;
    /// Writes `v` to the register at `addr`.
    fn write32(&mut self, addr: u32, v: u32);
}

/// Status-register polls before a command counts as hung.
pub const POLL_LIMIT: u32 = 100_000;

/// Why a control-bus command failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HwError {
    /// Still busy after [`POLL_LIMIT`] polls.
    Timeout,
    /// The engine answered this `HM_CTL_ST_*` status.
    Status(u8),
    /// The command word could not be encoded.
    Encode,
}

/// The engine's control-bus command layer.
pub struct Engine<B: Bus> {
    /// The bus.
    pub bus: B,
}

impl<B: Bus> Engine<B> {
    /// Wraps a bus.
    pub const fn new(bus: B) -> Self {
        Engine { bus }
    }

    fn wait_idle(&mut self) -> Result<u8, HwError> {
        for _ in 0..POLL_LIMIT {
            let (busy, st) = desc::decode_ctl_status(self.bus.read32(regs::HM_CTL_STATUS.into()));
            if !busy {
                return Ok(st);
            }
        }
        Err(HwError::Timeout)
    }

    /// Writes a control-bus register other than the command window (`HM_CTL_EQ`), when the
    /// engine is idle.
    pub fn write_reg(&mut self, addr: u16, v: u32) -> Result<(), HwError> {
        self.wait_idle()?;
        self.bus.write32(addr.into(), v);
        Ok(())
    }

    /// The engine's counter `i` (`HM_CTL_CNT`, the same values as the BAR's).
    pub fn counter(&mut self, i: u32) -> u32 {
        self.bus.read32(u32::from(regs::HM_CTL_CNT) + 4 * i)
    }

    /// Posts `HM_CTL_POST` (`op` = `HM_CTL_POST_*`) and waits until the engine took it.
    pub fn post(&mut self, op: u8, code: u8, id: u16) -> Result<(), HwError> {
        let v = desc::encode_ctl_post(op, code, id).map_err(|_| HwError::Encode)?;
        self.wait_idle()?;
        self.bus.write32(regs::HM_CTL_POST.into(), v);
        self.wait_idle().map(|_| ())
    }

    /// Writes `words` into entry `index` of table `table` (`HM_CTL_TBL_*`) with `HM_CTL_F_*`
    /// `flags`: the first `words.len()` staging words (at most `CTX_WORDS`; the entry's struct
    /// is in the low bits, so the words above it need no write).
    pub fn write_entry(&mut self, table: u8, flags: u8, index: u16, words: &[u32]) -> Result<(), HwError> {
        if words.len() > CTX_WORDS {
            return Err(HwError::Encode);
        }
        let cmd = desc::encode_ctl_cmd(desc::HM_CTL_OP_WRITE, table, flags, index).map_err(|_| HwError::Encode)?;
        self.wait_idle()?;
        let stage = u32::from(regs::HM_CTL_STAGE);
        for (i, w) in words.iter().enumerate() {
            self.bus.write32(stage + 4 * i as u32, *w);
        }
        self.bus.write32(regs::HM_CTL_CMD.into(), cmd);
        match self.wait_idle()? {
            desc::HM_CTL_ST_OK => Ok(()),
            s => Err(HwError::Status(s)),
        }
    }
}
