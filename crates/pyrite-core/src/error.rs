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
    /// A collective or point-to-point operation failed: a rank that never arrived (a
    /// timeout), ranks that called different collectives, a missing or failed backend
    /// (PyTorch's `torch.distributed.DistBackendError`).
    Distributed,
}

/// Pyrite's error: a kind, a message as clear as PyTorch's, and, for an error raised inside a
/// sub-module's `forward`, where in the model it happened (the module path and type, as a
/// Python traceback would show).
///
/// `Display` prints the message with that context (`in features.3 (Conv2d): expected ...`);
/// `Debug`, which `fn main() -> pyrite::Result<()>` prints, adds the kind in Python's terms
/// (`ShapeError: in features.3 (Conv2d): expected ...`).
///
/// ```
/// use pyrite_core::{DType, ErrorKind, Tensor};
/// let e = Tensor::zeros([2, 3], DType::F32).unwrap().view([4]).unwrap_err();
/// assert_eq!(e.kind(), ErrorKind::Shape);
/// assert_eq!(format!("{e:?}"), format!("ShapeError: {e}"));
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct Error {
    kind: ErrorKind,
    msg: String,
    /// The module calls the error passed through, innermost first (see [`ModuleFrame`]);
    /// boxed so that `Result<T>` stays small on the success path.
    trace: Option<Box<[ModuleFrame]>>,
}

/// One module call an error passed through on its way out (`pyrite::nn` records them): the
/// module's address (to find it among its parent's children), its type, and its name in its
/// parent, once the parent's call has resolved it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModuleFrame {
    /// The address of the module value, as an identity only.
    pub addr: usize,
    /// The module's type name (`Conv2d`).
    pub type_name: String,
    /// The module's name in its parent (`3`, `features`); `None` for the outermost call, or
    /// for a module that is not a registered child of the module that called it.
    pub name: Option<String>,
}

impl Error {
    /// Makes an error of `kind` with message `msg`.
    pub fn new(kind: ErrorKind, msg: impl Into<String>) -> Self {
        Error { kind, msg: msg.into(), trace: None }
    }
    /// The kind of error.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }
    /// The message, without the kind and without the module context.
    pub fn message(&self) -> &str {
        &self.msg
    }
    /// The module calls this error passed through, innermost first (empty for an error raised
    /// outside any module call).
    pub fn module_frames(&self) -> &[ModuleFrame] {
        self.trace.as_deref().unwrap_or(&[])
    }
    /// Records that the error left the call of a module (at `addr`, of type `type_name`),
    /// naming the frame below it `child_name` (the name of the failing child in this module).
    /// Called by `pyrite::nn`'s module calls on their error path only.
    #[doc(hidden)]
    pub fn push_module_frame(mut self, child_name: Option<String>, addr: usize, type_name: &str) -> Self {
        let mut frames = self.trace.take().map(Vec::from).unwrap_or_default();
        if let Some(last) = frames.last_mut() {
            last.name = child_name;
        }
        frames.push(ModuleFrame { addr, type_name: type_name.to_string(), name: None });
        self.trace = Some(frames.into_boxed_slice());
        self
    }
    /// Where in the model the error was raised: the dotted path of the innermost module below
    /// the outermost call (`features.3`), as `named_modules` names it, and that module's type.
    /// `None` when the error did not come from a sub-module. A module that is not a registered
    /// child of its caller shows as `<Type>`.
    pub fn module_context(&self) -> Option<(String, &str)> {
        let frames = self.module_frames();
        if frames.len() < 2 {
            return None;
        }
        let path: Vec<String> = frames[..frames.len() - 1]
            .iter()
            .rev()
            .map(|f| f.name.clone().unwrap_or_else(|| format!("<{}>", f.type_name)))
            .collect();
        Some((path.join("."), &frames[0].type_name))
    }
    /// The kind as the Python exception PyTorch raises for it would be named.
    fn kind_name(&self) -> &'static str {
        match self.kind {
            ErrorKind::Shape => "ShapeError",
            ErrorKind::DType => "DTypeError",
            ErrorKind::Device => "DeviceError",
            ErrorKind::Index => "IndexError",
            ErrorKind::Value => "ValueError",
            ErrorKind::OutOfMemory => "OutOfMemoryError",
            ErrorKind::Io => "IoError",
            ErrorKind::NotImplemented => "NotImplementedError",
            ErrorKind::Autograd => "AutogradError",
            ErrorKind::Distributed => "DistBackendError",
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some((path, ty)) = self.module_context() {
            write!(f, "in {path} ({ty}): ")?;
        }
        f.write_str(&self.msg)
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {self}", self.kind_name())
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
