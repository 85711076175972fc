//! `torch.amp.custom_fwd` / `custom_bwd` for custom autograd Functions under autocast.
//!
//! A [`Function`]'s forward runs whatever ops it likes, so autocast would cast inside it op by
//! op; a Function that must run in one precision wraps itself:
//! - [`CustomFwd`] with `cast_inputs: Some(dtype)`: inside an autocast region, the
//!   floating-point inputs (not float64) are cast to `dtype` and the forward runs with
//!   autocast off; outside a region it runs as written. With `cast_inputs: None` the forward
//!   runs in the region as it is.
//! - [`CustomBwd`]: the backward runs under the autocast state the forward saw (on or off,
//!   and its dtype), as PyTorch's `custom_bwd` does; it needs the state `CustomFwd` records.
//!
//! ```
//! use pyrite_amp::{autocast, AutocastOptions, CustomBwd, CustomFwd, CustomFwdOptions};
//! use pyrite_core::autograd::{self, Function, FunctionCtx};
//! use pyrite_core::{DType, Result, Tensor};
//!
//! /// `x @ w` with its own backward.
//! struct MatMul;
//! impl Function for MatMul {
//!     fn forward(&self, ctx: &mut FunctionCtx, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
//!         ctx.save_for_backward(inputs);
//!         Ok(vec![inputs[0].matmul(inputs[1])?])
//!     }
//!     fn backward(&self, ctx: &FunctionCtx, g: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
//!         let (x, w) = (&ctx.saved_tensors()[0], &ctx.saved_tensors()[1]);
//!         Ok(vec![Some(g[0].matmul(&w.t()?)?), Some(x.t()?.matmul(&g[0])?)])
//!     }
//! }
//!
//! let x = Tensor::randn([4, 3], DType::F32)?;
//! let w = Tensor::randn([3, 2], DType::F32)?.requires_grad_(true)?;
//! let f = CustomBwd(CustomFwd::new(MatMul, CustomFwdOptions { cast_inputs: Some(DType::F32), ..Default::default() }));
//! let y = {
//!     let _ac = autocast(AutocastOptions::default())?;
//!     autograd::apply(f, &[&x, &w])?.remove(0)
//! };
//! assert_eq!(y.dtype(), DType::F32); // run in float32 despite the bf16 region
//! y.sum()?.backward()?;
//! assert_eq!(w.grad().unwrap().dtype(), DType::F32);
//! # Ok::<(), pyrite_core::Error>(())
//! ```

use pyrite_core::autocast::{autocast, get_autocast_dtype, is_autocast_enabled, AutocastOptions};
use pyrite_core::autograd::{Function, FunctionCtx};
use pyrite_core::{bail, DType, Device, Result, Tensor};

/// The keywords of `torch.amp.custom_fwd(device_type=..., cast_inputs=None)`.
#[derive(Clone, Debug)]
pub struct CustomFwdOptions {
    /// The autocast device whose state matters (the CPU until a CUDA backend lands).
    pub device_type: Device,
    /// Cast floating-point inputs to this dtype and run the forward with autocast off, inside
    /// an autocast region (`None`: run as written).
    pub cast_inputs: Option<DType>,
}

impl Default for CustomFwdOptions {
    fn default() -> Self {
        CustomFwdOptions { device_type: Device::Cpu, cast_inputs: None }
    }
}

/// `@torch.amp.custom_fwd` around a [`Function`]'s forward.
pub struct CustomFwd<F> {
    inner: F,
    options: CustomFwdOptions,
}

impl<F: Function> CustomFwd<F> {
    pub fn new(inner: F, options: CustomFwdOptions) -> CustomFwd<F> {
        CustomFwd { inner, options }
    }
}

/// The `ctx` keys under which [`CustomFwd`] leaves the forward's autocast state.
const USED: &str = "_fwd_used_autocast";
const DTYPE: &str = "_dtype";
const DEVICE: &str = "_device_type";

impl<F: Function> Function for CustomFwd<F> {
    fn forward(&self, ctx: &mut FunctionCtx, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        let dev = self.options.device_type;
        ctx.save_value(DTYPE, get_autocast_dtype(dev));
        ctx.save_value(DEVICE, dev);
        let on = is_autocast_enabled(dev);
        match self.options.cast_inputs {
            Some(dtype) if on => {
                ctx.save_value(USED, false);
                let cast: Vec<Tensor> = inputs
                    .iter()
                    .map(|t| {
                        // Floating tensors of the autocast's device type, as PyTorch's `_cast`.
                        if t.dtype().is_floating_point()
                            && t.dtype() != DType::F64
                            && t.device().is_cuda() == dev.is_cuda()
                        {
                            t.to_dtype(dtype)
                        } else {
                            Ok((*t).clone())
                        }
                    })
                    .collect::<Result<_>>()?;
                let refs: Vec<&Tensor> = cast.iter().collect();
                let _off =
                    autocast(AutocastOptions { device_type: dev, enabled: false, ..Default::default() })?;
                self.inner.forward(ctx, &refs)
            }
            _ => {
                ctx.save_value(USED, on);
                self.inner.forward(ctx, inputs)
            }
        }
    }

    fn backward(&self, ctx: &FunctionCtx, grad_outputs: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        self.inner.backward(ctx, grad_outputs)
    }

    fn name(&self) -> String {
        self.inner.name()
    }
}

/// `@torch.amp.custom_bwd` around a [`Function`]'s backward: it runs under the autocast state
/// of its forward, which must be a [`CustomFwd`].
pub struct CustomBwd<F>(pub F);

impl<F: Function> Function for CustomBwd<F> {
    fn forward(&self, ctx: &mut FunctionCtx, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        self.0.forward(ctx, inputs)
    }

    fn backward(&self, ctx: &FunctionCtx, grad_outputs: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        let (Ok(&used), Ok(&dtype), Ok(&device_type)) =
            (ctx.value::<bool>(USED), ctx.value::<DType>(DTYPE), ctx.value::<Device>(DEVICE))
        else {
            bail!(
                Value,
                "custom_bwd: the forward of {} did not record its autocast state; wrap the function in CustomFwd as well (custom_fwd and custom_bwd go together)",
                self.0.name()
            );
        };
        let _state = autocast(AutocastOptions {
            device_type,
            enabled: used,
            dtype: Some(dtype),
            ..Default::default()
        })?;
        self.0.backward(ctx, grad_outputs)
    }

    fn name(&self) -> String {
        self.0.name()
    }
}
