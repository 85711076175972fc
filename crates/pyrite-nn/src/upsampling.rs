//! `Upsample`, `UpsamplingNearest2d`, `UpsamplingBilinear2d` (PyTorch's
//! `torch/nn/modules/upsampling.py`), each [`crate::functional::interpolate`] with fixed
//! arguments.

use crate::functional::{self as F, InterpolateMode};
use crate::module::{py_float, Module, ModuleBase};
use pyrite_core::{Result, Tensor};

/// What the three layers share: the arguments of `F.interpolate`.
#[derive(Clone, Debug, Default)]
struct Resize {
    size: Option<Vec<usize>>,
    scale_factor: Option<Vec<f64>>,
    mode: InterpolateMode,
    align_corners: Option<bool>,
    recompute_scale_factor: Option<bool>,
}

/// One value as Python prints a number, several as a tuple.
fn py_values<T>(v: &[T], f: impl Fn(&T) -> String) -> String {
    match v.len() {
        1 => f(&v[0]),
        _ => format!("({})", v.iter().map(f).collect::<Vec<_>>().join(", ")),
    }
}

impl Resize {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let opts = F::InterpolateOptions {
            size: self.size.clone(),
            scale_factor: self.scale_factor.clone(),
            mode: self.mode,
            align_corners: self.align_corners,
            recompute_scale_factor: self.recompute_scale_factor,
        };
        F::interpolate(x, &opts)
    }

    /// `Upsample.extra_repr`: `scale_factor=2.0, mode='bilinear'` or `size=(5, 7), mode=...`.
    fn repr(&self) -> String {
        let what = match (&self.scale_factor, &self.size) {
            (Some(s), _) => format!("scale_factor={}", py_values(s, |v| py_float(*v))),
            (None, Some(s)) => format!("size={}", py_values(s, |v| v.to_string())),
            (None, None) => "size=None".to_string(),
        };
        format!("{what}, mode='{}'", self.mode)
    }
}

/// `nn.Upsample(size=None, scale_factor=None, mode='nearest', align_corners=None,
/// recompute_scale_factor=None)`: resamples `[N, C, *spatial]` inputs (3-D, 4-D or 5-D).
/// `size` / `scale_factor`: one value for every spatial dim, or one per dim.
///
/// ```
/// use pyrite::nn::functional::InterpolateMode;
/// use pyrite::nn::{Module, Upsample};
/// use pyrite::{DType, Tensor};
/// let up = Upsample::new(None, Some(&[2.0]), InterpolateMode::Bilinear);
/// assert_eq!(up.to_string(), "Upsample(scale_factor=2.0, mode='bilinear')");
/// assert_eq!(up.call(&Tensor::ones([1, 3, 4, 5], DType::F32)?)?.dims(), &[1, 3, 8, 10]);
/// # Ok::<(), pyrite::Error>(())
/// ```
#[derive(crate::Module)]
pub struct Upsample {
    base: ModuleBase,
    #[module(skip)]
    cfg: Resize,
}

impl Upsample {
    /// Exactly one of `size` and `scale_factor` must be given (checked at the call, as in
    /// PyTorch).
    pub fn new(size: Option<&[usize]>, scale_factor: Option<&[f64]>, mode: InterpolateMode) -> Upsample {
        Upsample {
            base: ModuleBase::new(),
            cfg: Resize {
                size: size.map(<[usize]>::to_vec),
                scale_factor: scale_factor.map(<[f64]>::to_vec),
                mode,
                ..Default::default()
            },
        }
    }

    /// `align_corners=` (the interpolating modes only).
    pub fn align_corners(mut self, align_corners: bool) -> Upsample {
        self.cfg.align_corners = Some(align_corners);
        self
    }

    /// `recompute_scale_factor=`: compute the coordinates from the output size instead of
    /// the scale factor.
    pub fn recompute_scale_factor(mut self, recompute: bool) -> Upsample {
        self.cfg.recompute_scale_factor = Some(recompute);
        self
    }

    pub fn size(&self) -> Option<&[usize]> {
        self.cfg.size.as_deref()
    }

    pub fn scale_factor(&self) -> Option<&[f64]> {
        self.cfg.scale_factor.as_deref()
    }

    pub fn mode(&self) -> InterpolateMode {
        self.cfg.mode
    }
}

impl Module for Upsample {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        self.cfg.forward(x)
    }

    fn extra_repr(&self) -> String {
        self.cfg.repr()
    }
}

macro_rules! fixed_upsampling {
    ($($name:ident, $mode:expr, $align:expr, $doc:literal;)*) => {$(
        #[doc = $doc]
        #[derive(crate::Module)]
        pub struct $name {
            base: ModuleBase,
            #[module(skip)]
            cfg: Resize,
        }

        impl $name {
            /// Exactly one of `size` and `scale_factor` must be given (checked at the call).
            pub fn new(size: Option<&[usize]>, scale_factor: Option<&[f64]>) -> $name {
                $name {
                    base: ModuleBase::new(),
                    cfg: Resize {
                        size: size.map(<[usize]>::to_vec),
                        scale_factor: scale_factor.map(<[f64]>::to_vec),
                        mode: $mode,
                        align_corners: $align,
                        recompute_scale_factor: None,
                    },
                }
            }
        }

        impl Module for $name {
            fn forward(&self, x: &Tensor) -> Result<Tensor> {
                self.cfg.forward(x)
            }

            fn extra_repr(&self) -> String {
                self.cfg.repr()
            }
        }
    )*};
}

fixed_upsampling! {
    UpsamplingNearest2d, InterpolateMode::Nearest, None,
        "`nn.UpsamplingNearest2d(size=None, scale_factor=None)`: `Upsample` with mode `'nearest'`.";
    UpsamplingBilinear2d, InterpolateMode::Bilinear, Some(true),
        "`nn.UpsamplingBilinear2d(size=None, scale_factor=None)`: `Upsample` with mode `'bilinear'` and `align_corners=True`.";
}
