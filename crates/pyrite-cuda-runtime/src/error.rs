//! The runtime's error: a kind that pyrite-core maps onto its own `ErrorKind`, and a message
//! written as PyTorch words it.

use std::fmt;

/// What went wrong, in the terms pyrite-core reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// No driver, no library, no device, or a device ordinal out of range.
    Unavailable,
    /// The allocator could not find memory even after freeing its cache.
    OutOfMemory,
    /// A CUDA driver, NVRTC or cuBLAS call failed.
    Driver,
    /// A kernel's source did not compile (a bug in Pyrite: the log is in the message).
    Compile,
    /// A bad argument (a fraction out of range, too many dimensions).
    Value,
}

/// An error from the CUDA runtime.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    /// The kind.
    pub kind: ErrorKind,
    /// The message.
    pub message: String,
}

impl Error {
    /// An error of `kind` with `message`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Error {
        Error { kind, message: message.into() }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

/// The runtime's result.
pub type Result<T> = std::result::Result<T, Error>;

/// Returns early with an [`Error`] of the given kind and a formatted message.
#[macro_export]
macro_rules! cuda_bail {
    ($kind:ident, $($arg:tt)*) => {
        return Err($crate::Error::new($crate::ErrorKind::$kind, format!($($arg)*)))
    };
}
