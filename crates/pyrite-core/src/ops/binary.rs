//! Binary arithmetic with broadcasting and PyTorch's type promotion: add, sub, mul, div (true,
//! floor, trunc), remainder, fmod, pow, maximum, minimum, atan2; scalar forms; `out=` forms;
//! and the `+ - * /` operators.

use super::derivatives::{binary_ad, check_out};
use super::{map2, Out};
use crate::dtype::Scalar;
use crate::shape::broadcast_shapes;
use crate::{bail, dispatch_all, get_default_dtype, promote_types, DType, Element, Result, Tensor};
use half::{bf16, f16};

/// The binary arithmetic ops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinaryOp {
    /// `a + b`
    Add,
    /// `a - b`
    Sub,
    /// `a * b`
    Mul,
    /// `a / b`, true division (integers promote to float).
    Div,
    /// `torch.div(a, b, rounding_mode='floor')` (`//`).
    FloorDiv,
    /// `torch.div(a, b, rounding_mode='trunc')`.
    TruncDiv,
    /// `torch.remainder`: Python's `%`, sign of the divisor.
    Remainder,
    /// `torch.fmod`: C's fmod, sign of the dividend.
    Fmod,
    /// `torch.pow`
    Pow,
    /// `torch.maximum` (NaN propagates).
    Maximum,
    /// `torch.minimum` (NaN propagates).
    Minimum,
    /// `torch.atan2(a, b)` (integers promote to float).
    Atan2,
}

impl BinaryOp {
    fn name(self) -> &'static str {
        match self {
            BinaryOp::Add => "add",
            BinaryOp::Sub => "sub",
            BinaryOp::Mul => "mul",
            BinaryOp::Div => "div",
            BinaryOp::FloorDiv => "floor_divide",
            BinaryOp::TruncDiv => "div",
            BinaryOp::Remainder => "remainder",
            BinaryOp::Fmod => "fmod",
            BinaryOp::Pow => "pow",
            BinaryOp::Maximum => "maximum",
            BinaryOp::Minimum => "minimum",
            BinaryOp::Atan2 => "atan2",
        }
    }
}

/// Element arithmetic with PyTorch's semantics per dtype (integers wrap, half types compute
/// in f32, bool add/mul are or/and).
pub(crate) trait Arith: Element {
    fn op_add(a: Self, b: Self) -> Self;
    fn op_sub(a: Self, b: Self) -> Self;
    fn op_mul(a: Self, b: Self) -> Self;
    fn op_div(a: Self, b: Self) -> Self;
    fn op_floor_div(a: Self, b: Self) -> Self;
    fn op_trunc_div(a: Self, b: Self) -> Self;
    fn op_rem(a: Self, b: Self) -> Self;
    fn op_fmod(a: Self, b: Self) -> Self;
    fn op_pow(a: Self, b: Self) -> Self;
    fn op_maximum(a: Self, b: Self) -> Self;
    fn op_minimum(a: Self, b: Self) -> Self;
    fn op_atan2(a: Self, b: Self) -> Self;
}

macro_rules! int_arith {
    ($t:ty) => {
        #[allow(unused_comparisons)]
        impl Arith for $t {
            #[inline(always)]
            fn op_add(a: Self, b: Self) -> Self {
                a.wrapping_add(b)
            }
            #[inline(always)]
            fn op_sub(a: Self, b: Self) -> Self {
                a.wrapping_sub(b)
            }
            #[inline(always)]
            fn op_mul(a: Self, b: Self) -> Self {
                a.wrapping_mul(b)
            }
            #[inline(always)]
            fn op_div(a: Self, b: Self) -> Self {
                Self::op_trunc_div(a, b)
            }
            #[inline(always)]
            fn op_floor_div(a: Self, b: Self) -> Self {
                if b == 0 {
                    return 0;
                }
                let q = a.wrapping_div(b);
                if a.wrapping_rem(b) != 0 && ((a < 0) != (b < 0)) {
                    q.wrapping_sub(1)
                } else {
                    q
                }
            }
            #[inline(always)]
            fn op_trunc_div(a: Self, b: Self) -> Self {
                if b == 0 {
                    0
                } else {
                    a.wrapping_div(b)
                }
            }
            #[inline(always)]
            fn op_rem(a: Self, b: Self) -> Self {
                if b == 0 {
                    return 0;
                }
                let r = a.wrapping_rem(b);
                if r != 0 && ((r < 0) != (b < 0)) {
                    r.wrapping_add(b)
                } else {
                    r
                }
            }
            #[inline(always)]
            fn op_fmod(a: Self, b: Self) -> Self {
                if b == 0 {
                    0
                } else {
                    a.wrapping_rem(b)
                }
            }
            #[inline(always)]
            #[allow(unused_comparisons)]
            fn op_pow(a: Self, b: Self) -> Self {
                if b < 0 {
                    // Integer to a negative power: only 1 and -1 survive truncation.
                    return if a == 1 {
                        1
                    } else if a as i64 == -1 {
                        if (b as i64) % 2 == 0 {
                            1
                        } else {
                            a
                        }
                    } else {
                        0
                    };
                }
                a.wrapping_pow(b.to_i64().min(u32::MAX as i64) as u32)
            }
            #[inline(always)]
            fn op_maximum(a: Self, b: Self) -> Self {
                if a > b {
                    a
                } else {
                    b
                }
            }
            #[inline(always)]
            fn op_minimum(a: Self, b: Self) -> Self {
                if a < b {
                    a
                } else {
                    b
                }
            }
            #[inline(always)]
            fn op_atan2(a: Self, b: Self) -> Self {
                (a as f64).atan2(b as f64) as Self
            }
        }
    };
}
int_arith!(u8);
int_arith!(i32);
int_arith!(i64);

impl Arith for bool {
    fn op_add(a: Self, b: Self) -> Self {
        a | b
    }
    fn op_sub(a: Self, b: Self) -> Self {
        a ^ b
    }
    fn op_mul(a: Self, b: Self) -> Self {
        a & b
    }
    fn op_div(a: Self, b: Self) -> Self {
        a & b
    }
    fn op_floor_div(a: Self, b: Self) -> Self {
        a & b
    }
    fn op_trunc_div(a: Self, b: Self) -> Self {
        a & b
    }
    fn op_rem(_: Self, _: Self) -> Self {
        false
    }
    fn op_fmod(_: Self, _: Self) -> Self {
        false
    }
    fn op_pow(a: Self, b: Self) -> Self {
        a | !b
    }
    fn op_maximum(a: Self, b: Self) -> Self {
        a | b
    }
    fn op_minimum(a: Self, b: Self) -> Self {
        a & b
    }
    fn op_atan2(a: Self, b: Self) -> Self {
        (a as u8 as f64).atan2(b as u8 as f64) != 0.0
    }
}

macro_rules! float_fns {
    ($f:ty) => {
        #[inline(always)]
        pub(super) fn py_floor_div(a: $f, b: $f) -> $f {
            if b == 0.0 {
                return a / b;
            }
            let m = a % b;
            let mut div = (a - m) / b;
            if m != 0.0 && ((b < 0.0) != (m < 0.0)) {
                div -= 1.0;
            }
            if div == 0.0 {
                return (0.0 as $f).copysign(a / b);
            }
            let fl = div.floor();
            if div - fl > 0.5 {
                fl + 1.0
            } else {
                fl
            }
        }
        #[inline(always)]
        pub(super) fn py_rem(a: $f, b: $f) -> $f {
            let m = a % b;
            if m != 0.0 && ((b < 0.0) != (m < 0.0)) {
                m + b
            } else {
                m
            }
        }
        #[inline(always)]
        pub(super) fn nan_max(a: $f, b: $f) -> $f {
            if a.is_nan() || b.is_nan() {
                <$f>::NAN
            } else if a > b {
                a
            } else {
                b
            }
        }
        #[inline(always)]
        pub(super) fn nan_min(a: $f, b: $f) -> $f {
            if a.is_nan() || b.is_nan() {
                <$f>::NAN
            } else if a < b {
                a
            } else {
                b
            }
        }
    };
}

mod f32fns {
    float_fns!(f32);
}
mod f64fns {
    float_fns!(f64);
}

macro_rules! float_arith {
    ($t:ty, $c:ty, $m:ident, $to:expr, $from:expr) => {
        impl Arith for $t {
            #[inline(always)]
            fn op_add(a: Self, b: Self) -> Self {
                $from($to(a) + $to(b))
            }
            #[inline(always)]
            fn op_sub(a: Self, b: Self) -> Self {
                $from($to(a) - $to(b))
            }
            #[inline(always)]
            fn op_mul(a: Self, b: Self) -> Self {
                $from($to(a) * $to(b))
            }
            #[inline(always)]
            fn op_div(a: Self, b: Self) -> Self {
                $from($to(a) / $to(b))
            }
            #[inline(always)]
            fn op_floor_div(a: Self, b: Self) -> Self {
                $from($m::py_floor_div($to(a), $to(b)))
            }
            #[inline(always)]
            fn op_trunc_div(a: Self, b: Self) -> Self {
                $from(($to(a) / $to(b)).trunc())
            }
            #[inline(always)]
            fn op_rem(a: Self, b: Self) -> Self {
                $from($m::py_rem($to(a), $to(b)))
            }
            #[inline(always)]
            fn op_fmod(a: Self, b: Self) -> Self {
                $from($to(a) % $to(b))
            }
            #[inline(always)]
            fn op_pow(a: Self, b: Self) -> Self {
                $from(<$c>::powf($to(a), $to(b)))
            }
            #[inline(always)]
            fn op_maximum(a: Self, b: Self) -> Self {
                $from($m::nan_max($to(a), $to(b)))
            }
            #[inline(always)]
            fn op_minimum(a: Self, b: Self) -> Self {
                $from($m::nan_min($to(a), $to(b)))
            }
            #[inline(always)]
            fn op_atan2(a: Self, b: Self) -> Self {
                $from(<$c>::atan2($to(a), $to(b)))
            }
        }
    };
}
float_arith!(f32, f32, f32fns, |x| x, |x| x);
float_arith!(f64, f64, f64fns, |x| x, |x| x);
float_arith!(f16, f32, f32fns, f16::to_f32, f16::from_f32);
float_arith!(bf16, f32, f32fns, bf16::to_f32, bf16::from_f32);

/// PyTorch's `torch.result_type` for two tensors: dimensioned tensors decide, and a 0-d tensor
/// only raises the result when it is of a higher category (bool < integer < float).
///
/// ```
/// use pyrite_core::{result_type, DType, Tensor};
/// let a = Tensor::new([1i32, 2]).unwrap();
/// let b = Tensor::new(1.5f64).unwrap(); // 0-d
/// assert_eq!(result_type(&a, &b), DType::F64);
/// let c = Tensor::new([1.5f32]).unwrap();
/// assert_eq!(result_type(&c, &b), DType::F32);
/// ```
pub fn result_type(a: &Tensor, b: &Tensor) -> DType {
    let (za, zb) = (a.rank() == 0, b.rank() == 0);
    if za == zb {
        return promote_types(a.dtype(), b.dtype());
    }
    let (dim, zero) = if za { (b.dtype(), a.dtype()) } else { (a.dtype(), b.dtype()) };
    combine_categories(dim, zero)
}

/// PyTorch's rule for mixing a dimensioned dtype with a lower-priority (0-d or scalar) one.
pub(crate) fn combine_categories(higher: DType, lower: DType) -> DType {
    if higher.is_floating_point() {
        higher
    } else if higher == DType::Bool || lower.is_floating_point() {
        promote_types(higher, lower)
    } else {
        higher
    }
}

/// PyTorch's `can_cast`: no float to integer, no non-bool to bool.
pub(crate) fn can_cast(from: DType, to: DType) -> bool {
    let float_to_int = from.is_floating_point() && !to.is_floating_point();
    let to_bool = from != DType::Bool && to == DType::Bool;
    !(float_to_int || to_bool)
}

fn check_devices(a: &Tensor, b: &Tensor, op: &str) -> Result<()> {
    if a.device() != b.device() {
        bail!(
            Device,
            "{op}: Expected all tensors to be on the same device, but found at least two devices, {} and {}!",
            a.device(),
            b.device()
        );
    }
    a.device().check_available()
}

/// Applies `op` elementwise with broadcasting and type promotion, into `out` if given.
pub(crate) fn binary(a: &Tensor, b: &Tensor, op: BinaryOp, out: Out<'_>) -> Result<Tensor> {
    let name = op.name();
    let cuda = a.device().is_cuda() || b.device().is_cuda();
    if !cuda {
        check_devices(a, b, name)?;
    }
    let shape = broadcast_shapes(a.dims(), b.dims(), name)?;
    let mut dt = result_type(a, b);
    if matches!(op, BinaryOp::Div | BinaryOp::Atan2) && !dt.is_floating_point() {
        dt = get_default_dtype();
    }
    if dt == DType::Bool {
        match op {
            BinaryOp::Sub => bail!(
                DType,
                "Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` or `logical_xor()` operator instead."
            ),
            BinaryOp::Pow | BinaryOp::Remainder | BinaryOp::Fmod | BinaryOp::FloorDiv | BinaryOp::TruncDiv => {
                dt = DType::I64;
                if op == BinaryOp::Pow {
                    bail!(DType, "\"pow\" not implemented for 'Bool'");
                }
            }
            _ => {}
        }
    }
    if cuda {
        // Integer division by zero gives an unspecified value on CUDA, as in PyTorch.
        let kernel_op = match op {
            BinaryOp::TruncDiv => "trunc_divide",
            _ => name,
        };
        return crate::cuda::binary(a, b, kernel_op, dt, out);
    }
    if !dt.is_floating_point()
        && matches!(op, BinaryOp::FloorDiv | BinaryOp::TruncDiv | BinaryOp::Remainder | BinaryOp::Fmod)
        && b.to_dtype(DType::I64)?.with_slice::<i64, bool>(|s| s.contains(&0))
    {
        bail!(Value, "ZeroDivisionError: integer division or modulo by zero in {name}");
    }
    if let Out::Into(o) = out
        && o.dtype() != dt
    {
        if !can_cast(dt, o.dtype()) {
            bail!(DType, "{name}: result type {dt} can't be cast to the desired output type {}", o.dtype());
        }
        let r = binary(a, b, op, Out::New)?;
        o.copy_(&r)?;
        return Ok(o.clone());
    }
    // Convert only what needs converting (no handle clones on the hot path).
    let (ca, cb);
    let a = if a.dtype() == dt {
        a
    } else {
        ca = a.to_dtype(dt)?;
        &ca
    };
    let b = if b.dtype() == dt {
        b
    } else {
        cb = b.to_dtype(dt)?;
        &cb
    };
    dispatch_all!(dt, T => {
        let f: fn(T, T) -> T = match op {
            BinaryOp::Add => return map2::<T, T, T>(a, b, &shape, out, name, T::op_add),
            BinaryOp::Sub => return map2::<T, T, T>(a, b, &shape, out, name, T::op_sub),
            BinaryOp::Mul => return map2::<T, T, T>(a, b, &shape, out, name, T::op_mul),
            BinaryOp::Div => T::op_div,
            BinaryOp::FloorDiv => T::op_floor_div,
            BinaryOp::TruncDiv => T::op_trunc_div,
            BinaryOp::Remainder => T::op_rem,
            BinaryOp::Fmod => T::op_fmod,
            BinaryOp::Pow => T::op_pow,
            BinaryOp::Maximum => T::op_maximum,
            BinaryOp::Minimum => T::op_minimum,
            BinaryOp::Atan2 => T::op_atan2,
        };
        // Less common ops share one instantiation through a function pointer.
        map2::<T, T, T>(a, b, &shape, out, name, f)
    })
}

/// A 0-d tensor for scalar `s` combined with a tensor of `dtype`.
pub(crate) fn scalar_tensor(s: Scalar, dtype: DType) -> Result<Tensor> {
    let dt = s.promote_with(dtype);
    dispatch_all!(dt, T => Tensor::scalar::<T>(T::from_scalar(s)))
}

/// Division rounding modes (`torch.div(..., rounding_mode=...)`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RoundingMode {
    /// True division (the default).
    None,
    /// Round toward negative infinity, Python's `//`.
    Floor,
    /// Round toward zero, C's integer division.
    Trunc,
}

macro_rules! binary_methods {
    ($($name:ident, $scalar:ident, $out:ident, $op:ident, $doc:literal;)*) => {
        impl Tensor {$(
            #[doc = concat!("`torch.", stringify!($name), "(self, other)`: ", $doc, " with broadcasting and type promotion.")]
            pub fn $name(&self, other: &Tensor) -> Result<Tensor> {
                if let Some(r) = crate::autocast::dispatch(stringify!($name), &[Some(self), Some(other)], |t| t.at(0).$name(t.at(1))) {
                    return r;
                }
                crate::profiler_record::profiled!(concat!("aten::", stringify!($name)), [self, other], binary_ad(self, other, BinaryOp::$op))
            }
            #[doc = concat!("`torch.", stringify!($name), "(self, scalar)`: ", $doc, " with a Python-style scalar.")]
            pub fn $scalar(&self, other: impl Into<Scalar>) -> Result<Tensor> {
                let other = other.into();
                if let Some(r) = crate::autocast::dispatch(stringify!($name), &[Some(self)], |t| t.at(0).$scalar(other)) {
                    return r;
                }
                crate::profiler_record::profiled!(concat!("aten::", stringify!($name)), [self], binary_ad(self, &scalar_tensor(other, self.dtype())?, BinaryOp::$op))
            }
            #[doc = concat!("`torch.", stringify!($name), "(self, other, out=out)`: writes into `out`, which must have the broadcast shape.")]
            pub fn $out(&self, other: &Tensor, out: &Tensor) -> Result<Tensor> {
                check_out(stringify!($name), &[self, other])?;
                binary(self, other, BinaryOp::$op, Out::Into(out))
            }
        )*}
    };
}

binary_methods! {
    add, add_scalar, add_out, Add, "elementwise sum";
    sub, sub_scalar, sub_out, Sub, "elementwise difference";
    mul, mul_scalar, mul_out, Mul, "elementwise product";
    div, div_scalar, div_out, Div, "true division";
    floor_divide, floor_divide_scalar, floor_divide_out, FloorDiv, "division rounded toward negative infinity";
    remainder, remainder_scalar, remainder_out, Remainder, "Python-style modulus (sign of the divisor)";
    fmod, fmod_scalar, fmod_out, Fmod, "C-style modulus (sign of the dividend)";
    pow, pow_scalar, pow_out, Pow, "elementwise power";
    maximum, maximum_scalar, maximum_out, Maximum, "elementwise maximum, NaN-propagating";
    minimum, minimum_scalar, minimum_out, Minimum, "elementwise minimum, NaN-propagating";
    atan2, atan2_scalar, atan2_out, Atan2, "elementwise arc tangent of self/other";
}

impl Tensor {
    /// `torch.div(self, other, rounding_mode=mode)`.
    ///
    /// ```
    /// use pyrite_core::{RoundingMode, Tensor};
    /// let a = Tensor::new([-7i64, 7]).unwrap();
    /// let b = Tensor::new([2i64, 2]).unwrap();
    /// assert_eq!(a.div_mode(&b, RoundingMode::Floor).unwrap().to_vec::<i64>().unwrap(), vec![-4, 3]);
    /// assert_eq!(a.div_mode(&b, RoundingMode::Trunc).unwrap().to_vec::<i64>().unwrap(), vec![-3, 3]);
    /// ```
    pub fn div_mode(&self, other: &Tensor, mode: RoundingMode) -> Result<Tensor> {
        let op = match mode {
            RoundingMode::None => BinaryOp::Div,
            RoundingMode::Floor => BinaryOp::FloorDiv,
            RoundingMode::Trunc => BinaryOp::TruncDiv,
        };
        binary_ad(self, other, op)
    }

    /// `torch.add(self, other, alpha=alpha)`: `self + alpha * other`.
    pub fn add_alpha(&self, other: &Tensor, alpha: impl Into<Scalar>) -> Result<Tensor> {
        self.add(&other.mul_scalar(alpha)?)
    }

    /// `self.add_(other, alpha=alpha)`: `self += alpha * other`, in place.
    pub fn add_alpha_(&self, other: &Tensor, alpha: impl Into<Scalar>) -> Result<&Tensor> {
        self.add_(&other.mul_scalar(alpha)?)
    }

    /// `torch.sub(self, other, alpha=alpha)`: `self - alpha * other`.
    pub fn sub_alpha(&self, other: &Tensor, alpha: impl Into<Scalar>) -> Result<Tensor> {
        self.sub(&other.mul_scalar(alpha)?)
    }

    /// `self.sub_(other, alpha=alpha)`: `self -= alpha * other`, in place.
    pub fn sub_alpha_(&self, other: &Tensor, alpha: impl Into<Scalar>) -> Result<&Tensor> {
        self.sub_(&other.mul_scalar(alpha)?)
    }

    /// `scalar - self` (`torch.rsub`).
    pub fn rsub_scalar(&self, s: impl Into<Scalar>) -> Result<Tensor> {
        scalar_tensor(s.into(), self.dtype())?.sub(self)
    }

    /// `scalar / self`.
    pub fn rdiv_scalar(&self, s: impl Into<Scalar>) -> Result<Tensor> {
        scalar_tensor(s.into(), self.dtype())?.div(self)
    }

    /// `scalar ** self` (`torch.pow(scalar, self)`).
    pub fn rpow_scalar(&self, s: impl Into<Scalar>) -> Result<Tensor> {
        scalar_tensor(s.into(), self.dtype())?.pow(self)
    }
}

// ------------------------------------------------------------------------ operators

macro_rules! std_op {
    ($trait:ident, $method:ident, $fn:ident, $sfn:ident) => {
        impl std::ops::$trait<&Tensor> for &Tensor {
            type Output = Result<Tensor>;
            fn $method(self, rhs: &Tensor) -> Result<Tensor> {
                Tensor::$fn(&self, rhs)
            }
        }
        impl std::ops::$trait<Tensor> for &Tensor {
            type Output = Result<Tensor>;
            fn $method(self, rhs: Tensor) -> Result<Tensor> {
                Tensor::$fn(&self, &rhs)
            }
        }
        impl std::ops::$trait<&Tensor> for Tensor {
            type Output = Result<Tensor>;
            fn $method(self, rhs: &Tensor) -> Result<Tensor> {
                Tensor::$fn(&self, rhs)
            }
        }
        impl std::ops::$trait<Tensor> for Tensor {
            type Output = Result<Tensor>;
            fn $method(self, rhs: Tensor) -> Result<Tensor> {
                Tensor::$fn(&self, &rhs)
            }
        }
        impl std::ops::$trait<Result<Tensor>> for &Tensor {
            type Output = Result<Tensor>;
            fn $method(self, rhs: Result<Tensor>) -> Result<Tensor> {
                Tensor::$fn(&self, &rhs?)
            }
        }
        impl std::ops::$trait<Result<Tensor>> for Tensor {
            type Output = Result<Tensor>;
            fn $method(self, rhs: Result<Tensor>) -> Result<Tensor> {
                Tensor::$fn(&self, &rhs?)
            }
        }
        impl std::ops::$trait<&Tensor> for Result<Tensor> {
            type Output = Result<Tensor>;
            fn $method(self, rhs: &Tensor) -> Result<Tensor> {
                self?.$fn(rhs)
            }
        }
        impl std::ops::$trait<Tensor> for Result<Tensor> {
            type Output = Result<Tensor>;
            fn $method(self, rhs: Tensor) -> Result<Tensor> {
                self?.$fn(&rhs)
            }
        }
        impl std::ops::$trait<f64> for &Tensor {
            type Output = Result<Tensor>;
            fn $method(self, rhs: f64) -> Result<Tensor> {
                Tensor::$sfn(&self, rhs)
            }
        }
        impl std::ops::$trait<f64> for Tensor {
            type Output = Result<Tensor>;
            fn $method(self, rhs: f64) -> Result<Tensor> {
                Tensor::$sfn(&self, rhs)
            }
        }
    };
}
/// A number on the left, as Python's `2.0 * x` (`__rmul__`, `__rsub__`, ...).
macro_rules! scalar_lhs_op {
    ($trait:ident, $method:ident, |$s:ident, $t:ident| $body:expr) => {
        impl std::ops::$trait<&Tensor> for f64 {
            type Output = Result<Tensor>;
            fn $method(self, rhs: &Tensor) -> Result<Tensor> {
                let ($s, $t) = (self, rhs);
                $body
            }
        }
        impl std::ops::$trait<Tensor> for f64 {
            type Output = Result<Tensor>;
            fn $method(self, rhs: Tensor) -> Result<Tensor> {
                let ($s, $t) = (self, &rhs);
                $body
            }
        }
    };
}
scalar_lhs_op!(Add, add, |s, t| t.add_scalar(s));
scalar_lhs_op!(Sub, sub, |s, t| t.rsub_scalar(s));
scalar_lhs_op!(Mul, mul, |s, t| t.mul_scalar(s));
scalar_lhs_op!(Div, div, |s, t| t.rdiv_scalar(s));

std_op!(Add, add, add, add_scalar);
std_op!(Sub, sub, sub, sub_scalar);
std_op!(Mul, mul, mul, mul_scalar);
std_op!(Div, div, div, div_scalar);

impl std::ops::Neg for &Tensor {
    type Output = Result<Tensor>;
    fn neg(self) -> Result<Tensor> {
        self.neg()
    }
}
impl std::ops::Neg for Tensor {
    type Output = Result<Tensor>;
    fn neg(self) -> Result<Tensor> {
        Tensor::neg(&self)
    }
}
