//! The crate's one error type. Every failure maps to an errno (for the verbs provider).

use std::fmt;
use std::io;

use hematite_abi::mbox::STATUS_NAMES as FW_STATUS_NAMES;

/// Everything that can go wrong in the driver.
#[derive(Debug)]
pub enum Error {
    /// A system call failed (open, ioctl, mmap, socket I/O, ...), with what was being done.
    Sys { what: String, err: io::Error },
    /// A caller's argument is out of range or inconsistent; the string says which.
    InvalidArgument(String),
    /// The firmware refused a command: opcode and status code.
    Firmware { opcode: u16, status: u8 },
    /// The device did not answer in time (firmware command, reset, ...).
    Timeout(String),
    /// The device or the backend behaved against its contract (bad identity register, malformed
    /// answer, a bus error on an MMIO access, a dead simulated device process).
    Device(String),
    /// A queue is full (post_send / post_recv beyond the ring's capacity).
    QueueFull,
    /// Not implemented by this device or backend.
    NotSupported(String),
    /// The resource is busy (a device already opened by another process, an object in use).
    Busy(String),
}

impl Error {
    /// The errno a verbs call would return for this error.
    pub fn errno(&self) -> i32 {
        match self {
            Error::Sys { err, .. } => err.raw_os_error().unwrap_or(libc::EIO),
            Error::InvalidArgument(_) => libc::EINVAL,
            Error::Firmware { status, .. } => match status {
                3 | 4 | 8 => libc::EINVAL,
                5 => libc::ENOMEM,
                6 => libc::ENOENT,
                7 => libc::EBUSY,
                9 => libc::EOPNOTSUPP,
                _ => libc::EIO,
            },
            Error::Timeout(_) => libc::ETIMEDOUT,
            Error::Device(_) => libc::EIO,
            Error::QueueFull => libc::ENOMEM,
            Error::NotSupported(_) => libc::EOPNOTSUPP,
            Error::Busy(_) => libc::EBUSY,
        }
    }

    /// A `Sys` error from the last OS error.
    pub fn last_os(what: impl Into<String>) -> Error {
        Error::Sys { what: what.into(), err: io::Error::last_os_error() }
    }

    pub(crate) fn sys(what: impl Into<String>, err: io::Error) -> Error {
        Error::Sys { what: what.into(), err }
    }

    pub(crate) fn inval(what: impl Into<String>) -> Error {
        Error::InvalidArgument(what.into())
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Sys { what, err } => write!(f, "{what}: {err}"),
            Error::InvalidArgument(s) => write!(f, "invalid argument: {s}"),
            Error::Firmware { opcode, status } => {
                let name = FW_STATUS_NAMES.get(*status as usize).copied().unwrap_or("unknown status");
                write!(f, "firmware refused command {opcode:#04x}: {name} ({status})")
            }
            Error::Timeout(s) => write!(f, "timed out: {s}"),
            Error::Device(s) => write!(f, "device error: {s}"),
            Error::QueueFull => write!(f, "queue full"),
            Error::NotSupported(s) => write!(f, "not supported: {s}"),
            Error::Busy(s) => write!(f, "busy: {s}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Sys { err, .. } => Some(err),
            _ => None,
        }
    }
}

/// The crate's result type.
pub type Result<T> = std::result::Result<T, Error>;
