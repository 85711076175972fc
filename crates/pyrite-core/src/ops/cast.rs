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
    if src.device().is_cuda() || matches!(out, Out::Into(o) if o.device().is_cuda()) {
        return crate::cuda::convert(src, dst, out);
    }
    let shape = match out {
        Out::Into(t) => t.shape().clone(),
        Out::New => src.shape().clone(),
    };
    use half::{bf16, f16};
    // The conversions autocast makes all the time, on the bits (the same results as through
    // f64, several times faster: they vectorize).
    match (src.dtype(), dst) {
        (a, b) if a == b => dispatch_all!(a, T => map1::<T, T>(src, &shape, out, op, |x| x)),
        (DType::F32, DType::BF16) => {
            map1::<f32, bf16>(src, &shape, out, op, |x| bf16::from_bits(f32_to_bf16_bits(x)))
        }
        (DType::BF16, DType::F32) => map1::<bf16, f32>(src, &shape, out, op, |x| bf16_to_f32(x.to_bits())),
        (DType::F32, DType::F16) => map1::<f32, f16>(src, &shape, out, op, f16::from_f32),
        (DType::F16, DType::F32) => map1::<f16, f32>(src, &shape, out, op, f16::to_f32),
        _ => {
            dispatch_all!(src.dtype(), A => dispatch_all!(dst, R => map1::<A, R>(src, &shape, out, op, cast::<A, R>)))
        }
    }
}

/// `x` rounded to bf16 (to nearest, ties to even; a NaN stays a quiet NaN of the same sign),
/// as its bits: the value that `bf16::from_f32` and PyTorch give.
#[inline(always)]
pub(crate) fn f32_to_bf16_bits(x: f32) -> u16 {
    let b = x.to_bits();
    if b & 0x7fff_ffff > 0x7f80_0000 {
        ((b >> 16) | 0x40) as u16
    } else {
        ((b + 0x7fff + ((b >> 16) & 1)) >> 16) as u16
    }
}

/// The bf16 with bits `b` as an f32 (exact).
#[inline(always)]
pub(crate) fn bf16_to_f32(b: u16) -> f32 {
    f32::from_bits((b as u32) << 16)
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

    /// This tensor on `device` (`t.to(device)`): `self` when it is already there, else a copy
    /// (contiguous), differentiable. CUDA devices need the `cuda` feature, a driver and a GPU;
    /// otherwise the error says which is missing.
    pub fn to_device(&self, device: Device) -> Result<Tensor> {
        self.to_device_with(device, false)
    }

    /// `t.to(device=..., dtype=..., non_blocking=..., copy=...)`: the dtype conversion and the
    /// move in one call; `self` when nothing changes, unless `copy`.
    ///
    /// `non_blocking`: a copy from pinned memory ([`Tensor::pin_memory`]) to a GPU is queued
    /// on the current stream and returns at once, so the host goes on while it runs (the
    /// source's memory is kept until the copy is done). Unlike PyTorch, a copy to the CPU
    /// always completes before it returns: a CPU tensor is never handed out half-written.
    ///
    /// ```
    /// use pyrite_core::{DType, Device, Tensor, ToOptions};
    /// let t = Tensor::new([1.5f32, 2.5])?;
    /// let y = t.to(ToOptions { dtype: Some(DType::F64), device: Some(Device::Cpu), ..Default::default() })?;
    /// assert_eq!(y.to_vec::<f64>()?, vec![1.5, 2.5]);
    /// let same = t.to(ToOptions::default())?; // nothing to do: the same tensor
    /// let copied = t.to(ToOptions { copy: true, ..Default::default() })?; // a new one
    /// assert!(same.same_storage(&t) && !copied.same_storage(&t));
    /// # Ok::<(), pyrite_core::Error>(())
    /// ```
    pub fn to(&self, options: ToOptions) -> Result<Tensor> {
        let dtype = options.dtype.unwrap_or(self.dtype());
        let device = options.device.unwrap_or(self.device());
        let mut y = self.to_device_with(device, options.non_blocking)?;
        y = y.to_dtype(dtype)?;
        if options.copy && y.same_storage(self) {
            y = y.deep_clone()?;
        }
        Ok(y)
    }

    fn to_device_with(&self, device: Device, non_blocking: bool) -> Result<Tensor> {
        device.check_available()?;
        if device == self.device() {
            return Ok(self.clone());
        }
        let from = self.device();
        let y = {
            let _g = crate::autograd::record::paused(needs_grad(&[self]));
            crate::cuda::to_device(self, device, non_blocking)?
        };
        if !needs_grad(&[self]) {
            return Ok(y);
        }
        record1("ToCopyBackward0", &[self], y, &[], move |_, g| Ok(vec![Some(g[0].to_device(from)?)]))
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

    /// `t.pin_memory()`: a copy of this CPU tensor in page-locked memory, whose copies to a
    /// GPU run at full bandwidth (the DataLoader's `pin_memory`); the tensor itself when it is
    /// pinned already. Needs a CUDA device, as in PyTorch.
    pub fn pin_memory(&self) -> Result<Tensor> {
        if self.device().is_cuda() {
            crate::bail!(
                Value,
                "cannot pin 'torch.cuda.{}Tensor' only dense CPU tensors can be pinned",
                self.dtype().type_name()
            );
        }
        if !crate::device::cuda_is_available() {
            crate::bail!(Device, "Cannot access accelerator device when none is available.");
        }
        if self.is_pinned() {
            return Ok(self.clone());
        }
        let out = self.deep_clone()?;
        out.storage().write().cpu_mut().pin()?;
        Ok(out)
    }

    /// `t.is_pinned()`: whether this tensor's memory is page-locked ([`Tensor::pin_memory`]).
    pub fn is_pinned(&self) -> bool {
        !self.device().is_cuda() && self.storage().read().cpu().is_pinned()
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

#[cfg(test)]
mod tests {
    use super::*;
    use half::bf16;

    /// The bit-level rounding agrees with `half`'s `from_f32` (and PyTorch's) on every class of
    /// value: ties both ways, the largest finite values (which round to infinity), subnormals,
    /// infinities and NaNs. (`half`'s `from_f64`, which `to_dtype` went through before, rounds
    /// some f32 values down where PyTorch rounds up: 1.6609282e19, bits 0x5f668006, is 0x5f67
    /// in PyTorch and here.)
    #[test]
    fn bf16_rounding_on_the_bits_matches_half() {
        let mut xs =
            vec![0.0f32, -0.0, 1.0, 1.00390625, 1.01171875, 3.4028235e38, -3.4028235e38, 1e-40, -1e-42];
        xs.extend([f32::INFINITY, f32::NEG_INFINITY, f32::NAN, -f32::NAN, f32::MIN_POSITIVE]);
        let mut r = 0x1234_5678u32;
        for _ in 0..100_000 {
            r ^= r << 13;
            r ^= r >> 17;
            r ^= r << 5;
            xs.push(f32::from_bits(r));
        }
        assert_eq!(f32_to_bf16_bits(f32::from_bits(0x5f66_8006)), 0x5f67);
        for x in xs {
            let want = bf16::from_f32(x);
            let got = f32_to_bf16_bits(x);
            if x.is_nan() {
                assert!(bf16::from_bits(got).is_nan() && (got >> 15) == (want.to_bits() >> 15), "{x}");
            } else {
                assert_eq!(got, want.to_bits(), "{x:e}");
                assert_eq!(bf16_to_f32(got), want.to_f32());
            }
        }
    }
}

/// The options of [`Tensor::to`] (`t.to(device, dtype, non_blocking, copy)`), with PyTorch's
/// defaults: nothing changes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ToOptions {
    /// The device to move to (`None`: where it is).
    pub device: Option<Device>,
    /// The dtype to convert to (`None`: its own).
    pub dtype: Option<DType>,
    /// Return before a copy from pinned memory to a GPU is done (see [`Tensor::to`]).
    pub non_blocking: bool,
    /// A new tensor even when nothing changes.
    pub copy: bool,
}
