//! Dtype conversion and copies: `to_dtype`, `contiguous`, `deep_clone` (PyTorch's `clone`),
//! `copy_`, `to_device`.

use super::{map1, Out};
use crate::autograd::record::{inplace_ad, needs_grad, record1};
use crate::{bail, dispatch_all, DType, Device, Element, Result, Tensor};

/// Converts one element between dtypes the way PyTorch does: through f64 when either side is
/// floating point (float to int truncates toward zero), through i64 otherwise.
#[inline(always)]
pub(crate) fn cast<A: Element, R: Element>(x: A) -> R {
    if A::DTYPE.is_floating_point() || R::DTYPE.is_floating_point() {
        R::from_f64(x.to_f64())
    } else {
        R::from_i64(x.to_i64())
    }
}

/// Copies `src` (broadcast to `shape`) into `out` or a fresh tensor of dtype `dst`.
pub(crate) fn convert(src: &Tensor, dst: DType, out: Out<'_>, op: &str) -> Result<Tensor> {
    let shape = match out {
        Out::Into(t) => t.shape().clone(),
        Out::New => src.shape().clone(),
    };
    dispatch_all!(src.dtype(), A => dispatch_all!(dst, R => map1::<A, R>(src, &shape, out, op, cast::<A, R>)))
}

impl Tensor {
    /// This tensor converted to `dtype` (`t.to(dtype)`); returns `self` when it already has it.
    ///
    /// ```
    /// use pyrite_core::{DType, Tensor};
    /// let t = Tensor::new([1.7f32, -1.7]).unwrap().to_dtype(DType::I64).unwrap();
    /// assert_eq!(t.to_vec::<i64>().unwrap(), vec![1, -1]);
    /// ```
    pub fn to_dtype(&self, dtype: DType) -> Result<Tensor> {
        crate::profiler_record::profiled!("aten::to", [self], {
            if dtype == self.dtype() {
                return Ok(self.clone());
            }
            let y = convert(self, dtype, Out::New, "to")?;
            if !needs_grad(&[self]) || !dtype.is_floating_point() {
                return Ok(y);
            }
            let from = self.dtype();
            record1("ToCopyBackward0", &[self], y, &[], move |_, g| Ok(vec![Some(g[0].to_dtype(from)?)]))
        })
    }

    /// This tensor on `device` (`t.to(device)`). Fails with a clear error for CUDA until a CUDA
    /// backend lands.
    pub fn to_device(&self, device: Device) -> Result<Tensor> {
        device.check_available()?;
        Ok(self.clone())
    }

    /// A contiguous tensor with the same values: `self` if already contiguous, else a copy.
    pub fn contiguous(&self) -> Result<Tensor> {
        crate::profiler_record::profiled!("aten::contiguous", [self], {
            if self.is_contiguous() {
                Ok(self.clone())
            } else {
                self.deep_clone()
            }
        })
    }

    /// A new tensor with its own copy of the data (PyTorch's `t.clone()`), contiguous.
    pub fn deep_clone(&self) -> Result<Tensor> {
        crate::profiler_record::profiled!("aten::clone", [self], {
            let y = convert(self, self.dtype(), Out::New, "clone")?;
            if !needs_grad(&[self]) {
                return Ok(y);
            }
            record1("CloneBackward0", &[self], y, &[], |_, g| Ok(vec![Some(g[0].clone())]))
        })
    }

    /// Copies `src` into this tensor in place, broadcasting and converting dtype
    /// (`t.copy_(src)`). Visible through every view of this tensor's storage.
    pub fn copy_(&self, src: &Tensor) -> Result<&Tensor> {
        crate::profiler_record::profiled!("aten::copy_", [self, src], {
            if src.device() != self.device() {
                src.device().check_available()?;
            }
            crate::shape::broadcast_shapes(self.dims(), src.dims(), "copy_")?;
            if src.layout().expand(self.dims(), "copy_").is_err() {
                bail!(
                    Shape,
                    "copy_: the size of the source {} must be broadcastable to the destination {}",
                    src.shape(),
                    self.shape()
                );
            }
            inplace_ad(
                self,
                &[src],
                |old| src.to_dtype(old.dtype())?.expand(old.dims()),
                || convert(src, self.dtype(), Out::Into(self), "copy_").map(drop),
            )?;
            Ok(self)
        })
    }
}
