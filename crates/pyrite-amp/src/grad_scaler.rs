//! `torch.amp.GradScaler`: dynamic loss scaling.
//!
//! In 16-bit training, small gradients underflow to zero. The scaler multiplies the loss by a
//! large factor before backward, so the gradients are computed scaled up; `unscale_` divides
//! them back (checking them for inf/NaN on the way), `step` skips the optimizer step when any
//! was not finite, and `update` adapts the factor: it halves it (`backoff_factor`) after a step
//! with an overflow and doubles it (`growth_factor`) after `growth_interval` clean steps in a
//! row. The semantics, defaults and error messages are PyTorch's, and
//! `tests/grad_scaler.rs` follows PyTorch's own trajectories with injected overflows exactly.
//!
//! ```
//! use pyrite::amp::{GradScaler, GradScalerOptions};
//! use pyrite::nn::{Linear, Module};
//! use pyrite::optim::{Optimizer, SGD, SGDOptions};
//! use pyrite::{DType, Tensor};
//! let model = Linear::new(4, 1)?;
//! let mut opt = SGD::new(model.parameters(), SGDOptions { lr: 0.1, ..Default::default() })?;
//! let mut scaler = GradScaler::new(GradScalerOptions::default())?;
//! let x = Tensor::randn([8, 4], DType::F32)?;
//! for _ in 0..3 {
//!     opt.zero_grad()?;
//!     let loss = model.call(&x)?.square()?.mean()?;
//!     scaler.scale(&loss)?.backward()?;
//!     scaler.unscale_(&opt)?; // optional: the gradients as they really are, e.g. to clip them
//!     scaler.step(&mut opt)?; // skipped if a gradient is inf or NaN
//!     scaler.update()?;
//! }
//! assert_eq!(scaler.get_scale(), 65536.0); // no overflow: grows only after 2000 clean steps
//! # Ok::<(), pyrite::Error>(())
//! ```

use pyrite_core::{autograd, bail, DType, Result, Tensor};
use pyrite_optim::Optimizer;
use pyrite_serialization::{Dict, Object};
use std::collections::HashMap;

/// The options of [`GradScaler`], with PyTorch's defaults.
#[derive(Clone, Debug)]
pub struct GradScalerOptions {
    /// The first scale factor (default `2^16`).
    pub init_scale: f64,
    /// The factor the scale grows by after `growth_interval` steps without inf/NaN (default 2).
    pub growth_factor: f64,
    /// The factor the scale shrinks by after a step with inf/NaN gradients (default 0.5).
    pub backoff_factor: f64,
    /// How many consecutive clean steps make the scale grow (default 2000).
    pub growth_interval: u64,
    /// `false` makes every method a pass-through (default `true`).
    pub enabled: bool,
}

impl Default for GradScalerOptions {
    fn default() -> Self {
        GradScalerOptions {
            init_scale: 65536.0,
            growth_factor: 2.0,
            backoff_factor: 0.5,
            growth_interval: 2000,
            enabled: true,
        }
    }
}

/// `scaler.state_dict()`: PyTorch's keys (`scale`, `growth_factor`, `backoff_factor`,
/// `growth_interval`, `_growth_tracker`).
#[derive(Clone, Debug, PartialEq)]
pub struct GradScalerStateDict {
    pub scale: f64,
    pub growth_factor: f64,
    pub backoff_factor: f64,
    pub growth_interval: u64,
    /// Clean steps in a row since the scale last changed (PyTorch's `_growth_tracker`).
    pub growth_tracker: u64,
}

impl GradScalerStateDict {
    /// The state as PyTorch's dict (`{"scale": float, "growth_factor": float,
    /// "backoff_factor": float, "growth_interval": int, "_growth_tracker": int}`), for a `.pt`
    /// checkpoint (`pyrite::save`), which `torch.load` reads as `scaler.state_dict()`.
    pub fn to_object(&self) -> Object {
        let mut d = Dict::new();
        d.insert("scale", Object::Float(self.scale));
        d.insert("growth_factor", Object::Float(self.growth_factor));
        d.insert("backoff_factor", Object::Float(self.backoff_factor));
        d.insert("growth_interval", Object::Int(self.growth_interval as i64));
        d.insert("_growth_tracker", Object::Int(self.growth_tracker as i64));
        Object::Dict(d)
    }

    /// Reads PyTorch's dict (from `torch.save(scaler.state_dict())` or [`to_object`]); `None`
    /// for the empty dict of a disabled scaler. A missing key or a value of the wrong kind is an
    /// error naming the key.
    ///
    /// [`to_object`]: GradScalerStateDict::to_object
    pub fn from_object(obj: &Object) -> Result<Option<GradScalerStateDict>> {
        let Some(d) = obj.as_dict() else {
            bail!(Value, "GradScaler state_dict: expected a dict, got {}", obj.type_name());
        };
        if d.is_empty() {
            return Ok(None);
        }
        let get = |key: &str| match d.get(key) {
            Some(v) => Ok(v),
            None => bail!(Value, "GradScaler state_dict: the key '{key}' is missing"),
        };
        let float = |key: &str| -> Result<f64> {
            match get(key)?.as_float() {
                Some(v) => Ok(v),
                None => bail!(
                    Value,
                    "GradScaler state_dict: '{key}' should be a float, got {}",
                    get(key)?.type_name()
                ),
            }
        };
        let count = |key: &str| -> Result<u64> {
            match get(key)?.as_int() {
                Some(v) if v >= 0 => Ok(v as u64),
                _ => bail!(Value, "GradScaler state_dict: '{key}' should be a non-negative int"),
            }
        };
        Ok(Some(GradScalerStateDict {
            scale: float("scale")?,
            growth_factor: float("growth_factor")?,
            backoff_factor: float("backoff_factor")?,
            growth_interval: count("growth_interval")?,
            growth_tracker: count("_growth_tracker")?,
        }))
    }
}

/// Where an optimizer is in the current iteration (PyTorch's `OptState`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    Ready,
    Unscaled,
    Stepped,
}

#[derive(Clone, Copy, Debug)]
struct PerOptimizer {
    stage: Stage,
    /// Whether `unscale_` found an inf or NaN gradient (PyTorch's `found_inf_per_device`);
    /// `None` until it ran.
    found_inf: Option<bool>,
}

/// Dynamic loss scaling for mixed-precision training (`torch.amp.GradScaler`); see the module
/// docs for the loop.
#[derive(Debug)]
pub struct GradScaler {
    enabled: bool,
    /// The scale in float32, as PyTorch keeps it (a one-element float32 tensor); `None` until
    /// the first `scale` (then `get_scale` is `init_scale`).
    scale: Option<f32>,
    init_scale: f64,
    growth_factor: f64,
    backoff_factor: f64,
    growth_interval: u64,
    growth_tracker: u64,
    /// Per optimizer (by address), since the last `update`.
    per_optimizer: HashMap<usize, PerOptimizer>,
}

fn key(optimizer: &dyn Optimizer) -> usize {
    optimizer.base() as *const _ as *const () as usize
}

impl GradScaler {
    /// `GradScaler(init_scale, growth_factor, backoff_factor, growth_interval, enabled)`.
    /// PyTorch's checks: the growth factor must be above 1 and the backoff factor below 1.
    pub fn new(options: GradScalerOptions) -> Result<GradScaler> {
        if options.enabled {
            if options.growth_factor.is_nan() || options.growth_factor <= 1.0 {
                bail!(Value, "The growth factor must be > 1.0.");
            }
            if options.backoff_factor.is_nan() || options.backoff_factor >= 1.0 {
                bail!(Value, "The backoff factor must be < 1.0.");
            }
            if options.growth_interval == 0 {
                bail!(Value, "The growth interval must be at least 1.");
            }
            if !(options.init_scale.is_finite() && options.init_scale > 0.0) {
                bail!(
                    Value,
                    "The initial scale must be a positive finite number, got {}.",
                    options.init_scale
                );
            }
        }
        Ok(GradScaler {
            enabled: options.enabled,
            scale: None,
            init_scale: options.init_scale,
            growth_factor: options.growth_factor,
            backoff_factor: options.backoff_factor,
            growth_interval: options.growth_interval,
            growth_tracker: 0,
            per_optimizer: HashMap::new(),
        })
    }

    /// Whether scaling is on (`is_enabled()`).
    pub fn is_enabled(&self) -> bool {
        self.enabled
    }

    fn current_scale(&mut self) -> f32 {
        *self.scale.get_or_insert(self.init_scale as f32)
    }

    /// `scale(outputs)`: the loss (or any output) multiplied by the scale factor, in its own
    /// dtype. A pass-through when disabled.
    pub fn scale(&mut self, outputs: &Tensor) -> Result<Tensor> {
        if !self.enabled {
            return Ok(outputs.clone());
        }
        let s = self.current_scale();
        outputs.mul(&Tensor::full([], s as f64, DType::F32)?)
    }

    /// `unscale_(optimizer)`: divides the gradients of `optimizer`'s parameters by the scale, in
    /// place, and records whether any is inf or NaN. Call it once per iteration at most, before
    /// `step` (for instance to clip the true gradients); `step` calls it otherwise.
    pub fn unscale_(&mut self, optimizer: &dyn Optimizer) -> Result<()> {
        if !self.enabled {
            return Ok(());
        }
        let state = self
            .per_optimizer
            .entry(key(optimizer))
            .or_insert(PerOptimizer { stage: Stage::Ready, found_inf: None });
        match state.stage {
            Stage::Unscaled => {
                bail!(Value, "unscale_() has already been called on this optimizer since the last update().")
            }
            Stage::Stepped => bail!(Value, "unscale_() is being called after step()."),
            Stage::Ready => {}
        }
        let scale = self.scale.unwrap_or(self.init_scale as f32);
        // PyTorch: inv_scale = scale.double().reciprocal().float().
        let inv_scale = (1.0 / scale as f64) as f32;
        let mut grads = Vec::new();
        for g in optimizer.base().groups() {
            for p in &g.params {
                if let Some(grad) = p.grad() {
                    if grad.dtype() == DType::F16 {
                        bail!(Value, "Attempting to unscale FP16 gradients.");
                    }
                    grads.push(grad);
                }
            }
        }
        let _ng = autograd::no_grad();
        let mut found_inf = false;
        for grad in &grads {
            // As PyTorch's `_amp_foreach_non_finite_check_and_unscale_`: every gradient is
            // multiplied, and any non-finite value is noted.
            if !found_inf && !grad.isfinite()?.all()?.item::<bool>()? {
                found_inf = true;
            }
            grad.mul_(&Tensor::full([], inv_scale as f64, DType::F32)?.to_dtype(grad.dtype())?)?;
        }
        let state = self.per_optimizer.get_mut(&key(optimizer)).unwrap();
        state.found_inf = Some(found_inf);
        state.stage = Stage::Unscaled;
        Ok(())
    }

    /// `step(optimizer)`: unscales the gradients if `unscale_` was not called, then runs
    /// `optimizer.step()` unless a gradient was inf or NaN. Returns whether the optimizer
    /// stepped. Once per optimizer per iteration.
    pub fn step(&mut self, optimizer: &mut dyn Optimizer) -> Result<bool> {
        if !self.enabled {
            optimizer.step()?;
            return Ok(true);
        }
        let stage = self.per_optimizer.get(&key(optimizer)).map_or(Stage::Ready, |s| s.stage);
        if stage == Stage::Stepped {
            bail!(Value, "step() has already been called since the last update().");
        }
        if stage == Stage::Ready {
            self.unscale_(optimizer)?;
        }
        let state = self.per_optimizer.get_mut(&key(optimizer)).unwrap();
        let Some(found_inf) = state.found_inf else {
            bail!(Value, "No inf checks were recorded for this optimizer.");
        };
        let stepped = if found_inf {
            false
        } else {
            optimizer.step()?;
            true
        };
        self.per_optimizer.get_mut(&key(optimizer)).unwrap().stage = Stage::Stepped;
        Ok(stepped)
    }

    /// `update()`: adapts the scale to this iteration's inf checks (backs off after an
    /// overflow, grows after `growth_interval` clean steps) and starts the next iteration. Call
    /// it once per iteration, after the `step`s; it fails when no `step` or `unscale_` ran.
    pub fn update(&mut self) -> Result<()> {
        if !self.enabled {
            return Ok(());
        }
        let checks: Vec<bool> = self.per_optimizer.values().filter_map(|s| s.found_inf).collect();
        if checks.is_empty() {
            bail!(Value, "No inf checks were recorded prior to update.");
        }
        let found_inf = checks.iter().any(|&f| f);
        let scale = self.current_scale();
        // PyTorch's `_amp_update_scale_`, in float32.
        if found_inf {
            self.scale = Some(scale * self.backoff_factor as f32);
            self.growth_tracker = 0;
        } else {
            let successful = self.growth_tracker + 1;
            if successful == self.growth_interval {
                let grown = scale * self.growth_factor as f32;
                if grown.is_finite() {
                    self.scale = Some(grown);
                }
                self.growth_tracker = 0;
            } else {
                self.growth_tracker = successful;
            }
        }
        self.per_optimizer.clear();
        Ok(())
    }

    /// `update(new_scale)`: sets the scale to `new_scale` (the growth tracker is kept) and
    /// starts the next iteration.
    pub fn update_to(&mut self, new_scale: f64) -> Result<()> {
        if !self.enabled {
            return Ok(());
        }
        if !(new_scale.is_finite() && new_scale > 0.0) {
            bail!(Value, "new_scale must be a positive finite number, got {new_scale}");
        }
        self.scale = Some(new_scale as f32);
        self.per_optimizer.clear();
        Ok(())
    }

    /// `get_scale()`: the current scale (`init_scale` before the first `scale`), or 1.0 when
    /// disabled.
    pub fn get_scale(&self) -> f64 {
        if !self.enabled {
            return 1.0;
        }
        self.scale.map_or(self.init_scale, |s| s as f64)
    }

    pub fn get_growth_factor(&self) -> f64 {
        self.growth_factor
    }
    pub fn set_growth_factor(&mut self, v: f64) {
        self.growth_factor = v;
    }
    pub fn get_backoff_factor(&self) -> f64 {
        self.backoff_factor
    }
    pub fn set_backoff_factor(&mut self, v: f64) {
        self.backoff_factor = v;
    }
    pub fn get_growth_interval(&self) -> u64 {
        self.growth_interval
    }
    pub fn set_growth_interval(&mut self, v: u64) {
        self.growth_interval = v;
    }

    /// `state_dict()`: `None` when disabled (PyTorch's empty dict).
    pub fn state_dict(&self) -> Option<GradScalerStateDict> {
        self.enabled.then(|| GradScalerStateDict {
            scale: self.get_scale(),
            growth_factor: self.growth_factor,
            backoff_factor: self.backoff_factor,
            growth_interval: self.growth_interval,
            growth_tracker: self.growth_tracker,
        })
    }

    /// `load_state_dict(state_dict)`: nothing when disabled; PyTorch's error for the empty
    /// state of a disabled scaler.
    pub fn load_state_dict(&mut self, state_dict: Option<&GradScalerStateDict>) -> Result<()> {
        if !self.enabled {
            return Ok(());
        }
        let Some(sd) = state_dict else {
            bail!(
                Value,
                "The source state dict is empty, possibly because it was saved from a disabled instance of GradScaler."
            );
        };
        self.init_scale = sd.scale;
        if self.scale.is_some() {
            self.scale = Some(sd.scale as f32);
        }
        self.growth_factor = sd.growth_factor;
        self.backoff_factor = sd.backoff_factor;
        self.growth_interval = sd.growth_interval;
        self.growth_tracker = sd.growth_tracker;
        Ok(())
    }
}
