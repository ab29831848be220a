//! Hematite's userspace driver.
//!
//! * [`device::Device`]: BAR access, DMA mapping, interrupts as eventfds, reset; implemented by
//!   [`vfio::VfioDevice`] (a PCI function bound to vfio-pci) and [`simdev::SimDevice`] (the
//!   simulated device process, `hematite-sim device`).
//! * [`nic::Nic`]: the safe API on top of any device (query, PD, MR, CQ, QP, post, poll, wait).

pub mod device;
pub mod error;
pub mod vfio;

pub use device::{Device, DeviceInfo};
pub use error::{Error, Result};
pub mod simdev;
pub mod simproto;
pub mod mem;
pub mod fast;
pub mod lock;
pub mod nic;
/// BAR0 register map, generated from `rtl/pkg/hm_regs_pkg.sv` (via hematite-model).
pub use hematite_model::regs;
pub use nic::{CcPreset, Nic};
/// The firmware's mailbox command set (opcodes, header words), from the firmware crate.
pub use hematite_firmware::mbox as fwcmd;
