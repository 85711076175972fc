//! Creation: zeros, ones, empty, full and their `_like` forms, arange, linspace, logspace, eye,
//! tril/triu, one_hot.

use crate::autograd::record::{needs_grad, paused, record1};
use crate::dtype::Scalar;
use crate::shape::Shape;
use crate::{bail, dispatch_all, DType, Device, Element, Result, Tensor};

impl Tensor {
    /// A tensor of `shape` filled with `value` (`torch.full`).
    ///
    /// ```
    /// use pyrite_core::{DType, Tensor};
    /// let t = Tensor::full([2, 2], 1.5, DType::F64).unwrap();
    /// assert_eq!(t.to_vec::<f64>().unwrap(), vec![1.5; 4]);
    /// ```
    pub fn full(shape: impl Into<Shape>, value: impl Into<Scalar>, dtype: DType) -> Result<Tensor> {
        crate::profiler_record::profiled!("aten::full", [], {
            let v = value.into();
            dispatch_all!(dtype, T => {
                let x = T::from_scalar(v);
                Tensor::build::<T>(shape.into(), |o| o.fill(x))
            })
        })
    }

    /// `torch.full(shape, value, dtype=dtype, device=device)`: a filled tensor made on `device`
    /// (on a GPU without passing through host memory).
    ///
    /// ```
    /// use pyrite_core::{DType, Device, Tensor};
    /// let t = Tensor::full_on([3], 2, DType::I64, Device::Cpu)?;
    /// assert_eq!(t.to_vec::<i64>()?, vec![2; 3]);
    /// // Without a GPU (or without the `cuda` feature), CUDA is an error, not a panic.
    /// if !pyrite_core::cuda_is_available() {
    ///     assert!(Tensor::full_on([3], 2, DType::I64, Device::Cuda(0)).is_err());
    /// }
    /// # Ok::<(), pyrite_core::Error>(())
    /// ```
    pub fn full_on(
        shape: impl Into<Shape>,
        value: impl Into<Scalar>,
        dtype: DType,
        device: Device,
    ) -> Result<Tensor> {
        match device {
            Device::Cpu => Tensor::full(shape, value, dtype),
            Device::Cuda(i) => {
                device.check_available()?;
                crate::cuda::full(&shape.into(), value.into(), dtype, i)
            }
        }
    }
    /// `torch.zeros(shape, dtype=dtype, device=device)`.
    pub fn zeros_on(shape: impl Into<Shape>, dtype: DType, device: Device) -> Result<Tensor> {
        Tensor::full_on(shape, 0, dtype, device)
    }
    /// `torch.ones(shape, dtype=dtype, device=device)`.
    pub fn ones_on(shape: impl Into<Shape>, dtype: DType, device: Device) -> Result<Tensor> {
        Tensor::full_on(shape, 1, dtype, device)
    }

    /// A tensor of zeros (`torch.zeros`).
    pub fn zeros(shape: impl Into<Shape>, dtype: DType) -> Result<Tensor> {
        crate::profiler_record::profiled!("aten::zeros", [], Tensor::full(shape, 0, dtype))
    }

    /// A tensor of ones (`torch.ones`).
    pub fn ones(shape: impl Into<Shape>, dtype: DType) -> Result<Tensor> {
        crate::profiler_record::profiled!("aten::ones", [], Tensor::full(shape, 1, dtype))
    }

    /// A tensor whose contents are unspecified (`torch.empty`): reused memory is not cleared.
    pub fn empty(shape: impl Into<Shape>, dtype: DType) -> Result<Tensor> {
        crate::profiler_record::profiled!("aten::empty", [], {
            let shape = shape.into();
            if dtype == DType::Bool {
                return Tensor::zeros(shape, dtype);
            }
            let buf = crate::alloc::CpuBuffer::for_shape(&shape, dtype.size_in_bytes())?;
            Ok(Tensor::from_cpu_buffer(buf, shape, dtype))
        })
    }

    /// `torch.zeros_like`.
    pub fn zeros_like(&self) -> Result<Tensor> {
        Tensor::zeros_on(self.shape(), self.dtype(), self.device())
    }
    /// `torch.ones_like`.
    pub fn ones_like(&self) -> Result<Tensor> {
        Tensor::ones_on(self.shape(), self.dtype(), self.device())
    }
    /// `torch.empty_like`.
    pub fn empty_like(&self) -> Result<Tensor> {
        if self.device().is_cuda() {
            return Tensor::zeros_on(self.shape(), self.dtype(), self.device());
        }
        Tensor::empty(self.shape(), self.dtype())
    }
    /// `torch.full_like`.
    pub fn full_like(&self, value: impl Into<Scalar>) -> Result<Tensor> {
        Tensor::full_on(self.shape(), value, self.dtype(), self.device())
    }

    /// `t.new_zeros(size)`: zeros of another shape with this tensor's dtype and device.
    ///
    /// ```
    /// use pyrite_core::{DType, Tensor};
    /// let t = Tensor::ones([2], DType::F64).unwrap();
    /// let z = t.new_zeros([3, 1]).unwrap();
    /// assert_eq!((z.dims(), z.dtype()), (&[3usize, 1][..], DType::F64));
    /// assert_eq!(t.new_full([2], 7).unwrap().to_vec::<f64>().unwrap(), vec![7.0, 7.0]);
    /// ```
    pub fn new_zeros(&self, shape: impl Into<Shape>) -> Result<Tensor> {
        Tensor::zeros_on(shape, self.dtype(), self.device())
    }
    /// `t.new_ones(size)`.
    pub fn new_ones(&self, shape: impl Into<Shape>) -> Result<Tensor> {
        Tensor::ones_on(shape, self.dtype(), self.device())
    }
    /// `t.new_empty(size)`.
    pub fn new_empty(&self, shape: impl Into<Shape>) -> Result<Tensor> {
        if self.device().is_cuda() {
            return Tensor::zeros_on(shape, self.dtype(), self.device());
        }
        Tensor::empty(shape, self.dtype())
    }
    /// `t.new_full(size, fill_value)`.
    pub fn new_full(&self, shape: impl Into<Shape>, value: impl Into<Scalar>) -> Result<Tensor> {
        Tensor::full_on(shape, value, self.dtype(), self.device())
    }

    /// Values `start, start + step, ...` below `end` (`torch.arange`).
    ///
    /// ```
    /// use pyrite_core::{DType, Tensor};
    /// let t = Tensor::arange(0.0, 5.0, 2.0, DType::I64).unwrap();
    /// assert_eq!(t.to_vec::<i64>().unwrap(), vec![0, 2, 4]);
    /// ```
    pub fn arange(start: f64, end: f64, step: f64, dtype: DType) -> Result<Tensor> {
        if step == 0.0 {
            bail!(Value, "arange: step must be nonzero");
        }
        if !start.is_finite() || !end.is_finite() {
            bail!(Value, "arange: unsupported range: {start} -> {end}");
        }
        if (step > 0.0 && end < start) || (step < 0.0 && end > start) {
            bail!(Value, "arange: upper bound and larger bound inconsistent with step sign");
        }
        let n = ((end - start) / step).ceil().max(0.0) as usize;
        dispatch_all!(dtype, T => Tensor::build::<T>(Shape::from(n), |o| {
            for (i, x) in o.iter_mut().enumerate() {
                *x = T::from_f64(start + i as f64 * step);
            }
        }))
    }

    /// `steps` evenly spaced values from `start` to `end` inclusive (`torch.linspace`).
    pub fn linspace(start: f64, end: f64, steps: usize, dtype: DType) -> Result<Tensor> {
        let step = if steps > 1 { (end - start) / (steps - 1) as f64 } else { 0.0 };
        let half = if steps == 1 { 1 } else { steps / 2 };
        dispatch_all!(dtype, T => Tensor::build::<T>(Shape::from(steps), |o| {
            for (i, x) in o.iter_mut().enumerate() {
                let v = if i < half { start + step * i as f64 } else { end - step * (steps - 1 - i) as f64 };
                *x = T::from_f64(v);
            }
        }))
    }

    /// `base ** linspace(start, end, steps)` (`torch.logspace`).
    pub fn logspace(start: f64, end: f64, steps: usize, base: f64, dtype: DType) -> Result<Tensor> {
        let e = Tensor::linspace(start, end, steps, DType::F64)?;
        let v: Vec<f64> = e.to_vec::<f64>()?.into_iter().map(|x| base.powf(x)).collect();
        Tensor::from_vec(v, steps)?.to_dtype(dtype)
    }

    /// The `n x m` identity matrix (`torch.eye(n, m)`).
    pub fn eye(n: usize, m: usize, dtype: DType) -> Result<Tensor> {
        dispatch_all!(dtype, T => Tensor::build::<T>(Shape::from((n, m)), |o| {
            o.fill(T::from_i64(0));
            for i in 0..n.min(m) {
                o[i * m + i] = T::from_i64(1);
            }
        }))
    }

    /// The lower triangle of the last two dims, zeroing above `diagonal` (`torch.tril`).
    pub fn tril(&self, diagonal: isize) -> Result<Tensor> {
        self.triangle_ad(diagonal, true)
    }

    /// The upper triangle of the last two dims, zeroing below `diagonal` (`torch.triu`).
    pub fn triu(&self, diagonal: isize) -> Result<Tensor> {
        self.triangle_ad(diagonal, false)
    }

    /// tril/triu, recorded: the gradient is the same triangle of the output's gradient.
    fn triangle_ad(&self, diagonal: isize, lower: bool) -> Result<Tensor> {
        let rec = needs_grad(&[self]);
        let y = {
            let _g = paused(rec);
            self.triangle(diagonal, lower)?
        };
        if !rec {
            return Ok(y);
        }
        let name = if lower { "TrilBackward0" } else { "TriuBackward0" };
        record1(name, &[self], y, &[], move |_, g| {
            Ok(vec![Some(if lower { g[0].tril(diagonal)? } else { g[0].triu(diagonal)? })])
        })
    }

    fn triangle(&self, diagonal: isize, lower: bool) -> Result<Tensor> {
        let name = if lower { "tril" } else { "triu" };
        if self.rank() < 2 {
            bail!(Shape, "{name}: input tensor must have at least 2 dimensions");
        }
        let (r, c) = (self.dims()[self.rank() - 2], self.dims()[self.rank() - 1]);
        if self.device().is_cuda() {
            // The kept triangle as a broadcast mask of column minus row offsets.
            let dev = self.device();
            let rows = Tensor::arange(0.0, r as f64, 1.0, DType::I64)?.to_device(dev)?.unsqueeze(1)?;
            let cols = Tensor::arange(0.0, c as f64, 1.0, DType::I64)?.to_device(dev)?.unsqueeze(0)?;
            let offset = cols.sub(&rows)?;
            let drop =
                if lower { offset.gt_scalar(diagonal as f64)? } else { offset.lt_scalar(diagonal as f64)? };
            return self.masked_fill(&drop, 0);
        }
        let out = self.contiguous()?.deep_clone()?;
        dispatch_all!(self.dtype(), T => out.with_storage_mut::<T, _>(|s, _| {
            for (k, x) in s.iter_mut().enumerate() {
                let j = (k % c) as isize;
                let i = ((k / c) % r) as isize;
                let keep = if lower { j - i <= diagonal } else { j - i >= diagonal };
                if !keep {
                    *x = T::from_i64(0);
                }
            }
        })?);
        Ok(out)
    }

    /// One-hot encoding of an int64 tensor (`F.one_hot(t, num_classes)`); `num_classes = None`
    /// uses `max + 1`. The result is int64 with a new last dim.
    pub fn one_hot(&self, num_classes: Option<usize>) -> Result<Tensor> {
        if self.dtype() != DType::I64 {
            bail!(
                DType,
                "one_hot is only applicable to index tensor of type LongTensor, got {}",
                self.dtype()
            );
        }
        let v = self.to_vec::<i64>()?;
        if v.iter().any(|&x| x < 0) {
            bail!(Value, "one_hot: Class values must be non-negative.");
        }
        let max = v.iter().copied().max().map_or(0, |m| m as usize + 1);
        let n = match num_classes {
            Some(n) if n < max => bail!(Value, "one_hot: Class values must be smaller than num_classes."),
            Some(n) => n,
            None if v.is_empty() => {
                bail!(Value, "one_hot: Can not infer total number of classes from empty tensor.")
            }
            None => max,
        };
        let mut dims = self.dims().to_vec();
        dims.push(n);
        // Built on the host (the classes were read there), placed where the input lives.
        Tensor::build::<i64>(Shape::from(dims), |o| {
            o.fill(0);
            for (i, &c) in v.iter().enumerate() {
                o[i * n + c as usize] = 1;
            }
        })?
        .to_device(self.device())
    }
}
