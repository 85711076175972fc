//! Runtime element types ([`DType`]), PyTorch's type promotion, and the [`Element`] trait that
//! connects each dtype to its Rust type.

use crate::{bail, Result};
use half::{bf16, f16};
use std::fmt;
use std::sync::atomic::{AtomicU8, Ordering};

/// The element type of a tensor, chosen at run time as in PyTorch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    /// `torch.bool`
    Bool,
    /// `torch.uint8`
    U8,
    /// `torch.int32`
    I32,
    /// `torch.int64`
    I64,
    /// `torch.float16`
    F16,
    /// `torch.bfloat16`
    BF16,
    /// `torch.float32` (the default)
    F32,
    /// `torch.float64`
    F64,
}

impl DType {
    /// Every dtype, smallest category first.
    pub const ALL: [DType; 8] =
        [DType::Bool, DType::U8, DType::I32, DType::I64, DType::F16, DType::BF16, DType::F32, DType::F64];

    /// Bytes per element.
    pub fn size_in_bytes(self) -> usize {
        match self {
            DType::Bool | DType::U8 => 1,
            DType::F16 | DType::BF16 => 2,
            DType::I32 | DType::F32 => 4,
            DType::I64 | DType::F64 => 8,
        }
    }

    /// True for f16, bf16, f32, f64 (`torch.is_floating_point`).
    pub fn is_floating_point(self) -> bool {
        matches!(self, DType::F16 | DType::BF16 | DType::F32 | DType::F64)
    }

    /// True for u8, i32, i64 (not bool).
    pub fn is_integral(self) -> bool {
        matches!(self, DType::U8 | DType::I32 | DType::I64)
    }

    /// PyTorch's name without the `torch.` prefix: `float32`, `int64`, `bool`, ...
    pub fn as_str(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::U8 => "uint8",
            DType::I32 => "int32",
            DType::I64 => "int64",
            DType::F16 => "float16",
            DType::BF16 => "bfloat16",
            DType::F32 => "float32",
            DType::F64 => "float64",
        }
    }

    /// PyTorch's C++ scalar-type name, used in "not implemented for 'Long'" messages.
    pub fn type_name(self) -> &'static str {
        match self {
            DType::Bool => "Bool",
            DType::U8 => "Byte",
            DType::I32 => "Int",
            DType::I64 => "Long",
            DType::F16 => "Half",
            DType::BF16 => "BFloat16",
            DType::F32 => "Float",
            DType::F64 => "Double",
        }
    }

    /// PyTorch's C++ spelling (`"float"`, `"long int"`, `"c10::BFloat16"`), as in "expected m1
    /// and m2 to have the same dtype, but got: float != double" and in profiler traces' `Input
    /// type`.
    pub fn cpp_name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::U8 => "unsigned char",
            DType::I32 => "int",
            DType::I64 => "long int",
            DType::F16 => "c10::Half",
            DType::BF16 => "c10::BFloat16",
            DType::F32 => "float",
            DType::F64 => "double",
        }
    }

    /// Parses PyTorch's name (`"float32"`, `"torch.float32"`, `"float"`, `"long"`, ...).
    pub fn from_name(name: &str) -> Result<DType> {
        let n = name.strip_prefix("torch.").unwrap_or(name);
        Ok(match n {
            "bool" => DType::Bool,
            "uint8" => DType::U8,
            "int32" | "int" => DType::I32,
            "int64" | "long" => DType::I64,
            "float16" | "half" => DType::F16,
            "bfloat16" => DType::BF16,
            "float32" | "float" => DType::F32,
            "float64" | "double" => DType::F64,
            _ => bail!(DType, "unknown dtype name '{name}'"),
        })
    }

    /// 0 for bool, 1 for integers, 2 for floating point: the categories of type promotion.
    pub(crate) fn category(self) -> u8 {
        match self {
            DType::Bool => 0,
            DType::U8 | DType::I32 | DType::I64 => 1,
            _ => 2,
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "torch.{}", self.as_str())
    }
}

/// PyTorch's `torch.promote_types`: the smallest dtype that holds both.
///
/// ```
/// use pyrite_core::{promote_types, DType};
/// assert_eq!(promote_types(DType::U8, DType::I32), DType::I32);
/// assert_eq!(promote_types(DType::F16, DType::BF16), DType::F32);
/// assert_eq!(promote_types(DType::I64, DType::F16), DType::F16);
/// ```
pub fn promote_types(a: DType, b: DType) -> DType {
    use DType::*;
    if a == b {
        return a;
    }
    match (a, b) {
        (F16, BF16) | (BF16, F16) => F32,
        _ => {
            let (ca, cb) = (a.category(), b.category());
            if ca != cb {
                if ca > cb {
                    a
                } else {
                    b
                }
            } else {
                a.max(b)
            }
        }
    }
}

static DEFAULT_DTYPE: AtomicU8 = AtomicU8::new(0);

/// The dtype of new floating-point tensors (`torch.get_default_dtype`), f32 unless changed.
pub fn get_default_dtype() -> DType {
    if DEFAULT_DTYPE.load(Ordering::Relaxed) == 1 {
        DType::F64
    } else {
        DType::F32
    }
}

/// Sets the default floating-point dtype (`torch.set_default_dtype`); only f32 and f64 are allowed.
pub fn set_default_dtype(dtype: DType) -> Result<()> {
    match dtype {
        DType::F32 => DEFAULT_DTYPE.store(0, Ordering::Relaxed),
        DType::F64 => DEFAULT_DTYPE.store(1, Ordering::Relaxed),
        other => bail!(
            DType,
            "set_default_dtype: only floating-point types are supported as the default type, got {other}"
        ),
    }
    Ok(())
}

/// A Python-style number: what PyTorch accepts where a tensor op takes a scalar.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scalar {
    /// A Python bool.
    Bool(bool),
    /// A Python int.
    Int(i64),
    /// A Python float.
    Float(f64),
}

impl Scalar {
    /// The value as f64.
    pub fn to_f64(self) -> f64 {
        match self {
            Scalar::Bool(b) => b as u8 as f64,
            Scalar::Int(i) => i as f64,
            Scalar::Float(f) => f,
        }
    }
    /// The value as i64 (floats truncate toward zero).
    pub fn to_i64(self) -> i64 {
        match self {
            Scalar::Bool(b) => b as i64,
            Scalar::Int(i) => i,
            Scalar::Float(f) => f as i64,
        }
    }
    /// The dtype a lone scalar gets: bool, i64, or the default float dtype.
    pub fn dtype(self) -> DType {
        match self {
            Scalar::Bool(_) => DType::Bool,
            Scalar::Int(_) => DType::I64,
            Scalar::Float(_) => get_default_dtype(),
        }
    }
    /// The result dtype of a tensor of `dtype` combined with this scalar (the scalar only
    /// raises the dtype when it is of a higher category, as in PyTorch).
    pub fn promote_with(self, dtype: DType) -> DType {
        if self.dtype().category() > dtype.category() {
            self.dtype()
        } else {
            dtype
        }
    }
}

macro_rules! scalar_from {
    ($($t:ty => $v:ident),*) => {$(
        impl From<$t> for Scalar {
            fn from(x: $t) -> Self { Scalar::$v(x as _) }
        }
    )*};
}
scalar_from!(f64 => Float, f32 => Float, i64 => Int, i32 => Int, u8 => Int, usize => Int, isize => Int);
impl From<bool> for Scalar {
    fn from(x: bool) -> Self {
        Scalar::Bool(x)
    }
}

/// A Rust type that can be a tensor element: one per [`DType`].
///
/// Conversions go through f64 for floats and through i64 for integers, so casts behave like
/// PyTorch's (`as`-style truncation toward zero from float to int).
pub trait Element: Copy + Send + Sync + 'static + PartialEq + PartialOrd + fmt::Debug + Default {
    /// The dtype of this element type.
    const DTYPE: DType;
    /// Converts to f64.
    fn to_f64(self) -> f64;
    /// Converts from f64 (truncating toward zero for integers).
    fn from_f64(v: f64) -> Self;
    /// Converts to i64 (truncating toward zero for floats).
    fn to_i64(self) -> i64;
    /// Converts from i64 (wrapping for narrower integers, as PyTorch does).
    fn from_i64(v: i64) -> Self;
    /// Converts from a [`Scalar`].
    fn from_scalar(s: Scalar) -> Self {
        match s {
            Scalar::Float(f) => Self::from_f64(f),
            Scalar::Int(i) => Self::from_i64(i),
            Scalar::Bool(b) => Self::from_i64(b as i64),
        }
    }
}

macro_rules! int_element {
    ($t:ty, $d:ident) => {
        impl Element for $t {
            const DTYPE: DType = DType::$d;
            #[inline(always)]
            fn to_f64(self) -> f64 {
                self as f64
            }
            #[inline(always)]
            fn from_f64(v: f64) -> Self {
                v as i64 as $t
            }
            #[inline(always)]
            fn to_i64(self) -> i64 {
                self as i64
            }
            #[inline(always)]
            fn from_i64(v: i64) -> Self {
                v as $t
            }
        }
    };
}
int_element!(u8, U8);
int_element!(i32, I32);
int_element!(i64, I64);

impl Element for bool {
    const DTYPE: DType = DType::Bool;
    #[inline(always)]
    fn to_f64(self) -> f64 {
        self as u8 as f64
    }
    #[inline(always)]
    fn from_f64(v: f64) -> Self {
        v != 0.0
    }
    #[inline(always)]
    fn to_i64(self) -> i64 {
        self as i64
    }
    #[inline(always)]
    fn from_i64(v: i64) -> Self {
        v != 0
    }
}

impl Element for f32 {
    const DTYPE: DType = DType::F32;
    #[inline(always)]
    fn to_f64(self) -> f64 {
        self as f64
    }
    #[inline(always)]
    fn from_f64(v: f64) -> Self {
        v as f32
    }
    #[inline(always)]
    fn to_i64(self) -> i64 {
        self as i64
    }
    #[inline(always)]
    fn from_i64(v: i64) -> Self {
        v as f32
    }
}

impl Element for f64 {
    const DTYPE: DType = DType::F64;
    #[inline(always)]
    fn to_f64(self) -> f64 {
        self
    }
    #[inline(always)]
    fn from_f64(v: f64) -> Self {
        v
    }
    #[inline(always)]
    fn to_i64(self) -> i64 {
        self as i64
    }
    #[inline(always)]
    fn from_i64(v: i64) -> Self {
        v as f64
    }
}

macro_rules! half_element {
    ($t:ty, $d:ident) => {
        impl Element for $t {
            const DTYPE: DType = DType::$d;
            #[inline(always)]
            fn to_f64(self) -> f64 {
                <$t>::to_f64(self)
            }
            /// Through f32, as PyTorch's `c10::BFloat16(double)` / `c10::Half(double)` do (and
            /// `half`'s direct `from_f64` rounds some values the other way).
            #[inline(always)]
            fn from_f64(v: f64) -> Self {
                <$t>::from_f32(v as f32)
            }
            #[inline(always)]
            fn to_i64(self) -> i64 {
                <$t>::to_f32(self) as i64
            }
            #[inline(always)]
            fn from_i64(v: i64) -> Self {
                <$t>::from_f32(v as f32)
            }
        }
    };
}
half_element!(f16, F16);
half_element!(bf16, BF16);

/// A floating-point element: computes in f32 (f16, bf16, f32) or f64.
pub trait FloatElement: Element {
    /// Converts to the compute type's f64 view.
    fn to_f32(self) -> f32;
    /// Converts from f32.
    fn from_f32(v: f32) -> Self;
}

impl FloatElement for f32 {
    #[inline(always)]
    fn to_f32(self) -> f32 {
        self
    }
    #[inline(always)]
    fn from_f32(v: f32) -> Self {
        v
    }
}
impl FloatElement for f64 {
    #[inline(always)]
    fn to_f32(self) -> f32 {
        self as f32
    }
    #[inline(always)]
    fn from_f32(v: f32) -> Self {
        v as f64
    }
}
impl FloatElement for f16 {
    #[inline(always)]
    fn to_f32(self) -> f32 {
        f16::to_f32(self)
    }
    #[inline(always)]
    fn from_f32(v: f32) -> Self {
        f16::from_f32(v)
    }
}
impl FloatElement for bf16 {
    #[inline(always)]
    fn to_f32(self) -> f32 {
        bf16::to_f32(self)
    }
    #[inline(always)]
    fn from_f32(v: f32) -> Self {
        bf16::from_f32(v)
    }
}

/// Runs `$body` with `$T` bound to the Rust type of `$dtype` (all eight dtypes).
#[macro_export]
#[doc(hidden)]
macro_rules! dispatch_all {
    ($dtype:expr, $T:ident => $body:expr) => {
        match $dtype {
            $crate::DType::Bool => {
                type $T = bool;
                $body
            }
            $crate::DType::U8 => {
                type $T = u8;
                $body
            }
            $crate::DType::I32 => {
                type $T = i32;
                $body
            }
            $crate::DType::I64 => {
                type $T = i64;
                $body
            }
            $crate::DType::F16 => {
                type $T = $crate::half::f16;
                $body
            }
            $crate::DType::BF16 => {
                type $T = $crate::half::bf16;
                $body
            }
            $crate::DType::F32 => {
                type $T = f32;
                $body
            }
            $crate::DType::F64 => {
                type $T = f64;
                $body
            }
        }
    };
}

/// Runs `$body` with `$T` bound to the Rust type of a floating `$dtype`; `$other` otherwise.
#[macro_export]
#[doc(hidden)]
macro_rules! dispatch_float {
    ($dtype:expr, $T:ident => $body:expr, _ => $other:expr) => {
        match $dtype {
            $crate::DType::F16 => {
                type $T = $crate::half::f16;
                $body
            }
            $crate::DType::BF16 => {
                type $T = $crate::half::bf16;
                $body
            }
            $crate::DType::F32 => {
                type $T = f32;
                $body
            }
            $crate::DType::F64 => {
                type $T = f64;
                $body
            }
            _ => $other,
        }
    };
}
