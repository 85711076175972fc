//! Errors: every fallible op returns [`Result`], never panics on user input.
//!
//! Messages follow PyTorch's: they name the op and the shapes, dtypes or devices involved.

use std::fmt;

/// What went wrong, in PyTorch's terms (which Python exception it would raise).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// Shapes that do not fit together (PyTorch's `RuntimeError` for size mismatches).
    Shape,
    /// A dtype the op does not support, or dtypes that do not mix.
    DType,
    /// A device that is not available, or tensors on different devices.
    Device,
    /// An index or dim out of range (PyTorch's `IndexError`).
    Index,
    /// A bad argument value (PyTorch's `ValueError` / `RuntimeError`).
    Value,
    /// An allocation failed; recoverable.
    OutOfMemory,
    /// Reading or writing a file failed.
    Io,
    /// Not implemented for this device or dtype yet.
    NotImplemented,
    /// Autograd misuse: a second backward through a freed graph, a saved tensor modified in
    /// place, an in-place op on a leaf that requires grad, ...
    Autograd,
}

/// Pyrite's error: a kind and a message as clear as PyTorch's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    kind: ErrorKind,
    msg: String,
}

impl Error {
    /// Makes an error of `kind` with message `msg`.
    pub fn new(kind: ErrorKind, msg: impl Into<String>) -> Self {
        Error { kind, msg: msg.into() }
    }
    /// The kind of error.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }
    /// The message, without the kind.
    pub fn message(&self) -> &str {
        &self.msg
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.msg)
    }
}

impl std::error::Error for Error {}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Error::new(ErrorKind::Io, e.to_string())
    }
}

/// Pyrite's result type.
pub type Result<T> = std::result::Result<T, Error>;

/// Returns early with an error: `bail!(Shape, "op: {}", x)`.
#[macro_export]
#[doc(hidden)]
macro_rules! bail {
    ($kind:ident, $($arg:tt)*) => {
        return Err($crate::Error::new($crate::ErrorKind::$kind, format!($($arg)*)))
    };
}

/// Makes an error value: `err!(Shape, "op: {}", x)`.
#[macro_export]
#[doc(hidden)]
macro_rules! err {
    ($kind:ident, $($arg:tt)*) => {
        $crate::Error::new($crate::ErrorKind::$kind, format!($($arg)*))
    };
}
