//! Hematite control-plane firmware for the NIC's embedded RISC-V control core (picorv32,
//! riscv32imc): a mailbox command interface (verbs-level control commands), the RC QP state
//! machine, resource tables, and the engine's context writes over the internal control bus.
//! `no_std`, no heap, fixed-capacity tables; the same code runs on the core (`src/main.rs`)
//! and in the host tests (with a mock control bus). See docs/firmware.md.
#![cfg_attr(not(test), no_std)]

pub mod cc;
pub mod desc;
pub mod fw;
pub mod hw;
pub mod map;
pub mod mbox;
pub mod qp;
pub mod res;

/// The register maps (control bus `HM_CTL_*`, congestion control `HM_CC_*`, BAR0), generated
/// from `rtl/pkg/hm_regs_pkg.sv` (itself generated from `regs/hematite.rdl`) by
/// hematite-model's build script.
#[allow(missing_docs, dead_code)]
pub mod regs {
    include!(concat!(env!("OUT_DIR"), "/regs_gen.rs"));
}

pub use fw::Firmware;
pub use hw::{Bus, Engine};

#[cfg(test)]
mod tests;
