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
// The register maps and the mailbox protocol come from hematite-abi (users import them from
// there, not from the driver).
pub(crate) use hematite_abi::regs;
pub use nic::{CcPreset, Nic};
