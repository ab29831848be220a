//! Hematite control-plane firmware for the NIC's embedded RISC-V control core (picorv32,
//! riscv32imc): a mailbox command interface (verbs-level control commands), the RC QP state
//! machine, resource tables, and the engine's context writes over the internal control bus.
//! `no_std`, no heap, fixed-capacity tables; the same code runs on the core (`src/main.rs`)
//! and in the host tests (with a mock control bus). See docs/firmware.md.
#![cfg_attr(not(test), no_std)]

// Host builds keep the XMEM tables (res::Slab) in a vector.
#[cfg(not(target_arch = "riscv32"))]
extern crate alloc;

pub mod cc;
pub mod desc;
pub mod fw;
pub mod hw;
pub mod map;
pub mod res;

// What the firmware shares with the driver and the engine (hematite-abi): the mailbox protocol,
// the QP state machine's facts, the register maps and the interface versions.
pub use hematite_abi::{mbox, qp, regs, version};

pub use fw::Firmware;
pub use hw::{Bus, Engine};

#[cfg(test)]
mod tests;
