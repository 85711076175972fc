//! Comparisons and logic giving bool tensors: eq/ne/lt/le/gt/ge, logical and/or/xor/not,
//! isnan/isinf/isfinite, `where`, isclose/allclose.

use super::derivatives::check_out;
use super::{map1, map2, map3, Out};
use crate::autograd::record::{needs_grad, paused, record1, Save};
use crate::dtype::Scalar;
use crate::ops::binary::{result_type, scalar_tensor};
use crate::shape::broadcast_shapes;
use crate::{bail, dispatch_all, DType, Element, Result, Tensor};

#[derive(Clone, Copy)]
enum Cmp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

fn compare(a: &Tensor, b: &Tensor, op: Cmp, name: &str, out: Out<'_>) -> Result<Tensor> {
    let shape = broadcast_shapes(a.dims(), b.dims(), name)?;
    let dt = result_type(a, b);
    if a.device().is_cuda() || b.device().is_cuda() {
        return crate::cuda::binary(a, b, name, dt, out);
    }
    let (a, b) = (a.to_dtype(dt)?, b.to_dtype(dt)?);
    dispatch_all!(dt, T => match op {
        Cmp::Eq => map2::<T, T, bool>(&a, &b, &shape, out, name, |x, y| x == y),
        Cmp::Ne => map2::<T, T, bool>(&a, &b, &shape, out, name, |x, y| x != y),
        Cmp::Lt => map2::<T, T, bool>(&a, &b, &shape, out, name, |x, y| x < y),
        Cmp::Le => map2::<T, T, bool>(&a, &b, &shape, out, name, |x, y| x <= y),
        Cmp::Gt => map2::<T, T, bool>(&a, &b, &shape, out, name, |x, y| x > y),
        Cmp::Ge => map2::<T, T, bool>(&a, &b, &shape, out, name, |x, y| x >= y),
    })
}

macro_rules! cmp_methods {
    ($($name:ident, $scalar:ident, $out:ident, $op:ident, $sym:literal;)*) => {
        impl Tensor {$(
            #[doc = concat!("`torch.", stringify!($name), "`: `self ", $sym, " other` elementwise, as a bool tensor.")]
            pub fn $name(&self, other: &Tensor) -> Result<Tensor> {
                compare(self, other, Cmp::$op, stringify!($name), Out::New)
            }
            #[doc = concat!("`self ", $sym, " scalar` elementwise, as a bool tensor.")]
            pub fn $scalar(&self, other: impl Into<Scalar>) -> Result<Tensor> {
                compare(self, &scalar_tensor(other.into(), self.dtype())?, Cmp::$op, stringify!($name), Out::New)
            }
            #[doc = concat!("`torch.", stringify!($name), "(self, other, out=out)`: into a bool tensor of the broadcast shape.")]
            pub fn $out(&self, other: &Tensor, out: &Tensor) -> Result<Tensor> {
                check_out(stringify!($name), &[self, other, out])?;
                compare(self, other, Cmp::$op, stringify!($name), Out::Into(out))
            }
        )*}
    };
}

cmp_methods! {
    eq, eq_scalar, eq_out, Eq, "==";
    ne, ne_scalar, ne_out, Ne, "!=";
    lt, lt_scalar, lt_out, Lt, "<";
    le, le_scalar, le_out, Le, "<=";
    gt, gt_scalar, gt_out, Gt, ">";
    ge, ge_scalar, ge_out, Ge, ">=";
}

fn truthy(t: &Tensor) -> Result<Tensor> {
    t.to_dtype(DType::Bool)
}

fn logical(a: &Tensor, b: &Tensor, name: &str, out: Out<'_>, f: fn(bool, bool) -> bool) -> Result<Tensor> {
    let shape = broadcast_shapes(a.dims(), b.dims(), name)?;
    let (a, b) = (truthy(a)?, truthy(b)?);
    if a.device().is_cuda() || b.device().is_cuda() {
        return crate::cuda::binary(&a, &b, name, DType::Bool, out);
    }
    map2::<bool, bool, bool>(&a, &b, &shape, out, name, f)
}

impl Tensor {
    /// `torch.logical_and`: both nonzero.
    pub fn logical_and(&self, other: &Tensor) -> Result<Tensor> {
        logical(self, other, "logical_and", Out::New, |x, y| x & y)
    }
    /// `torch.logical_or`: either nonzero.
    pub fn logical_or(&self, other: &Tensor) -> Result<Tensor> {
        logical(self, other, "logical_or", Out::New, |x, y| x | y)
    }
    /// `torch.logical_xor`: exactly one nonzero.
    pub fn logical_xor(&self, other: &Tensor) -> Result<Tensor> {
        logical(self, other, "logical_xor", Out::New, |x, y| x ^ y)
    }
    /// `torch.logical_not`: zero elements become true.
    pub fn logical_not(&self) -> Result<Tensor> {
        if self.device().is_cuda() {
            return crate::cuda::unary(&truthy(self)?, "logical_not", Out::New, [0.0; 2]);
        }
        map1::<bool, bool>(&truthy(self)?, &self.shape().clone(), Out::New, "logical_not", |x| !x)
    }
    /// `torch.logical_and(self, other, out=out)` into a bool tensor.
    pub fn logical_and_out(&self, other: &Tensor, out: &Tensor) -> Result<Tensor> {
        check_out("logical_and", &[self, other, out])?;
        logical(self, other, "logical_and", Out::Into(out), |x, y| x & y)
    }
    /// `torch.logical_or(self, other, out=out)` into a bool tensor.
    pub fn logical_or_out(&self, other: &Tensor, out: &Tensor) -> Result<Tensor> {
        check_out("logical_or", &[self, other, out])?;
        logical(self, other, "logical_or", Out::Into(out), |x, y| x | y)
    }
    /// `torch.logical_xor(self, other, out=out)` into a bool tensor.
    pub fn logical_xor_out(&self, other: &Tensor, out: &Tensor) -> Result<Tensor> {
        check_out("logical_xor", &[self, other, out])?;
        logical(self, other, "logical_xor", Out::Into(out), |x, y| x ^ y)
    }
    /// `torch.logical_not(self, out=out)` into a bool tensor.
    pub fn logical_not_out(&self, out: &Tensor) -> Result<Tensor> {
        check_out("logical_not", &[self, out])?;
        map1::<bool, bool>(&truthy(self)?, &self.shape().clone(), Out::Into(out), "logical_not", |x| !x)
    }

    /// `torch.isnan`.
    pub fn isnan(&self) -> Result<Tensor> {
        self.float_test("isnan", |f| f.is_nan())
    }
    /// `torch.isinf`.
    pub fn isinf(&self) -> Result<Tensor> {
        self.float_test("isinf", |f| f.is_infinite())
    }
    /// `torch.isfinite`.
    pub fn isfinite(&self) -> Result<Tensor> {
        self.float_test("isfinite", |f| f.is_finite())
    }

    fn float_test(&self, name: &str, f: impl Fn(f64) -> bool + Sync + Send + Copy) -> Result<Tensor> {
        let shape = self.shape().clone();
        if self.device().is_cuda() {
            if self.dtype().is_floating_point() {
                return crate::cuda::unary(self, name, Out::New, [0.0; 2]);
            }
            // Integers are never NaN nor infinite.
            return Tensor::full_on(shape, name == "isfinite", DType::Bool, self.device());
        }
        dispatch_all!(self.dtype(), T => map1::<T, bool>(self, &shape, Out::New, name, move |v: T| f(v.to_f64())))
    }

    /// `torch.where(condition, self, other)`: elements of `self` where `condition` is true, of
    /// `other` elsewhere, broadcasting all three.
    ///
    /// ```
    /// use pyrite_core::Tensor;
    /// let c = Tensor::new([true, false]).unwrap();
    /// let a = Tensor::new([1f32, 2.]).unwrap();
    /// let b = Tensor::new([9f32]).unwrap();
    /// assert_eq!(a.where_(&c, &b).unwrap().to_vec::<f32>().unwrap(), vec![1., 9.]);
    /// ```
    pub fn where_(&self, condition: &Tensor, other: &Tensor) -> Result<Tensor> {
        where_impl(condition, self, other)
    }

    /// `torch.where(condition, self, other, out=out)`.
    pub fn where_out(&self, condition: &Tensor, other: &Tensor, out: &Tensor) -> Result<Tensor> {
        check_out("where", &[self, other, out])?;
        let shape = where_shape(condition, self, other)?;
        let dt = result_type(self, other);
        let (x, y) = (self.to_dtype(dt)?, other.to_dtype(dt)?);
        dispatch_all!(dt, T => map3::<bool, T, T, T>(condition, &x, &y, &shape, Out::Into(out), "where", |c, a, b| if c { a } else { b }))
    }

    /// `torch.isclose(self, other, rtol, atol, equal_nan)`: `|a - b| <= atol + rtol * |b|`.
    pub fn isclose(&self, other: &Tensor, rtol: f64, atol: f64, equal_nan: bool) -> Result<Tensor> {
        if self.dtype() != other.dtype() {
            bail!(DType, "isclose: {} did not match {}", self.dtype(), other.dtype());
        }
        let shape = broadcast_shapes(self.dims(), other.dims(), "isclose")?;
        dispatch_all!(self.dtype(), T => map2::<T, T, bool>(self, other, &shape, Out::New, "isclose", move |x: T, y: T| {
            if x == y {
                return true;
            }
            let (a, b) = (x.to_f64(), y.to_f64());
            if a.is_nan() || b.is_nan() {
                return equal_nan && a.is_nan() && b.is_nan();
            }
            if a.is_infinite() || b.is_infinite() {
                return false;
            }
            (a - b).abs() <= atol + rtol * b.abs()
        }))
    }

    /// `torch.allclose(self, other, rtol, atol, equal_nan)`.
    ///
    /// ```
    /// use pyrite_core::Tensor;
    /// let a = Tensor::new([1f64, 2.]).unwrap();
    /// let b = Tensor::new([1f64, 2.0 + 1e-9]).unwrap();
    /// assert!(a.allclose(&b, 1e-5, 1e-8, false).unwrap());
    /// ```
    pub fn allclose(&self, other: &Tensor, rtol: f64, atol: f64, equal_nan: bool) -> Result<bool> {
        let c = self.isclose(other, rtol, atol, equal_nan)?;
        Ok(c.with_slice::<bool, bool>(|s| s.iter().all(|&v| v)))
    }
}

/// Checks `where`'s condition and broadcasts the three shapes.
fn where_shape(condition: &Tensor, x: &Tensor, y: &Tensor) -> Result<crate::Shape> {
    if condition.dtype() != DType::Bool {
        bail!(
            DType,
            "where expected condition to be a boolean tensor, but got a tensor with dtype {}",
            condition.dtype()
        );
    }
    broadcast_shapes(broadcast_shapes(condition.dims(), x.dims(), "where")?.dims(), y.dims(), "where")
}

/// `torch.where(condition, x, y)`.
pub fn where_impl(condition: &Tensor, x: &Tensor, y: &Tensor) -> Result<Tensor> {
    let shape = where_shape(condition, x, y)?;
    let dt = result_type(x, y);
    let rec = needs_grad(&[x, y]);
    let out = {
        let _g = paused(rec);
        let (x, y) = (x.to_dtype(dt)?, y.to_dtype(dt)?);
        if condition.device().is_cuda() || x.device().is_cuda() || y.device().is_cuda() {
            if condition.dtype() != DType::Bool {
                bail!(
                    DType,
                    "where expected condition to be a boolean tensor, but got a tensor with dtype {}",
                    condition.dtype()
                );
            }
            crate::cuda::map(
                "where",
                "(a ? b : c)",
                &[condition, &x, &y],
                dt,
                dt,
                Out::New,
                [0.0; 2],
                [0; 2],
            )?
        } else {
            dispatch_all!(dt, T => map3::<bool, T, T, T>(condition, &x, &y, &shape, Out::New, "where", |c, a, b| if c { a } else { b }))?
        }
    };
    if !rec || !dt.is_floating_point() {
        return Ok(out);
    }
    // Each branch gets the gradient where it was chosen.
    record1("WhereBackward0", &[x, y], out, &[Save::Input(condition)], |ctx, g| {
        let (c, g) = (ctx.saved(0)?, &g[0]);
        let zero = g.zeros_like()?;
        Ok(vec![
            ctx.needs_input_grad(0).then(|| g.where_(&c, &zero)).transpose()?,
            ctx.needs_input_grad(1).then(|| zero.where_(&c, g)).transpose()?,
        ])
    })
}
