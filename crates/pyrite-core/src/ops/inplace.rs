//! In-place ops (`add_`, `mul_`, `fill_`, `masked_fill_`, ...). They write through the
//! tensor's storage, so every view of it sees the change, and bump its version counter.

use super::binary::{binary, scalar_tensor, BinaryOp};
use super::derivatives::binary_ad;
use super::{map2, Out};
use crate::autograd::record::{inplace_ad, needs_grad, paused, record1, Save};
use crate::dtype::Scalar;
use crate::shape::broadcast_shapes;
use crate::{bail, dispatch_all, DType, Element, Result, Tensor};

macro_rules! inplace_binary {
    ($($name:ident, $scalar:ident, $op:ident;)*) => {
        impl Tensor {$(
            #[doc = concat!("In-place `", stringify!($op), "`: `other` broadcasts to this tensor's shape and the result must be castable to its dtype.")]
            pub fn $name(&self, other: &Tensor) -> Result<&Tensor> {
                let _prof = crate::profiler_record::op(concat!("aten::", stringify!($name)), &[self, other]);
                inplace_ad(
                    self,
                    &[other],
                    |old| binary_ad(old, other, BinaryOp::$op),
                    || binary(self, other, BinaryOp::$op, Out::Into(self)).map(drop),
                )?;
                Ok(self)
            }
            #[doc = concat!("In-place `", stringify!($op), "` with a scalar.")]
            pub fn $scalar(&self, other: impl Into<Scalar>) -> Result<&Tensor> {
                self.$name(&scalar_tensor(other.into(), self.dtype())?)
            }
        )*}
    };
}

inplace_binary! {
    add_, add_scalar_, Add;
    sub_, sub_scalar_, Sub;
    mul_, mul_scalar_, Mul;
    div_, div_scalar_, Div;
    pow_, pow_scalar_, Pow;
}

impl Tensor {
    /// Sets every element to `value` (`t.fill_(value)`).
    ///
    /// ```
    /// use pyrite_core::{DType, Tensor};
    /// let t = Tensor::zeros([2, 3], DType::F32).unwrap();
    /// t.narrow(1, 1, 2).unwrap().fill_(7.0).unwrap(); // writes through the view
    /// assert_eq!(t.to_vec::<f32>().unwrap(), vec![0., 7., 7., 0., 7., 7.]);
    /// ```
    pub fn fill_(&self, value: impl Into<Scalar>) -> Result<&Tensor> {
        crate::profiler_record::profiled!("aten::fill_", [self], {
            let v = value.into();
            let s = dispatch_all!(self.dtype(), T => Tensor::scalar::<T>(T::from_scalar(v))?);
            self.copy_(&s)
        })
    }

    /// Sets every element to zero (`t.zero_()`).
    pub fn zero_(&self) -> Result<&Tensor> {
        crate::profiler_record::profiled!("aten::zero_", [self], self.fill_(0))
    }

    /// In-place clamp (`t.clamp_(min, max)`).
    pub fn clamp_(&self, min: Option<Scalar>, max: Option<Scalar>) -> Result<&Tensor> {
        inplace_ad(
            self,
            &[],
            |old| old.clamp(min, max),
            || self.clamp_impl(min, max, Out::Into(self)).map(drop),
        )?;
        Ok(self)
    }

    /// In-place ReLU (`t.relu_()`).
    pub fn relu_(&self) -> Result<&Tensor> {
        self.clamp_(Some(Scalar::Int(0)), None)
    }

    /// Sets elements where `mask` (bool, broadcast to this shape) is true to `value`
    /// (`t.masked_fill_(mask, value)`).
    pub fn masked_fill_(&self, mask: &Tensor, value: impl Into<Scalar>) -> Result<&Tensor> {
        if mask.dtype() != DType::Bool {
            bail!(
                DType,
                "masked_fill_ only supports boolean masks, but got mask with dtype {}",
                mask.dtype()
            );
        }
        let shape = broadcast_shapes(self.dims(), mask.dims(), "masked_fill_")?;
        if shape.dims() != self.dims() {
            bail!(
                Shape,
                "masked_fill_: the mask of shape {} cannot be broadcast to the tensor's shape {}",
                mask.shape(),
                self.shape()
            );
        }
        let v = value.into();
        if self.dtype().is_integral() && matches!(v, Scalar::Float(f) if f.fract() != 0.0) {
            bail!(DType, "masked_fill_: value cannot be converted to type {} without overflow", self.dtype());
        }
        inplace_ad(
            self,
            &[],
            |old| old.masked_fill(mask, v),
            || {
                if self.device().is_cuda() {
                    crate::cuda::map(
                        "masked_fill",
                        "(b ? s0 : a)",
                        &[self, mask],
                        self.dtype(),
                        self.dtype(),
                        Out::Into(self),
                        [v.to_f64(); 2],
                        [v.to_i64(); 2],
                    )?;
                    return Ok(());
                }
                dispatch_all!(self.dtype(), T => {
                    let fill = T::from_scalar(v);
                    map2::<T, bool, T>(self, mask, &shape, Out::Into(self), "masked_fill_", move |x, m| if m { fill } else { x })?;
                });
                Ok(())
            },
        )?;
        Ok(self)
    }

    /// `torch.masked_fill`: a copy with elements where `mask` is true set to `value`.
    pub fn masked_fill(&self, mask: &Tensor, value: impl Into<Scalar>) -> Result<Tensor> {
        let rec = needs_grad(&[self]);
        let out = {
            let _g = paused(rec);
            let shape = broadcast_shapes(self.dims(), mask.dims(), "masked_fill")?;
            let out = self.broadcast_to(shape.dims())?.deep_clone()?;
            out.masked_fill_(mask, value)?;
            out
        };
        if !rec {
            return Ok(out);
        }
        record1("MaskedFillBackward0", &[self], out, &[Save::Input(mask)], |ctx, g| {
            Ok(vec![Some(g[0].masked_fill(&ctx.saved(0)?, 0.0)?)])
        })
    }
}
