//! Resampling and patches: `interpolate`, `unfold` / `fold` (im2col / col2im), `affine_grid`
//! and `grid_sample`.
//!
//! Everything is composed of recorded core ops (`index_select`, `gather`, `index_add`,
//! elementwise arithmetic), so autograd gives the gradients with respect to the input (and to
//! the grid or theta) and double backward works. The source indices and interpolation weights
//! are computed exactly as PyTorch's CPU kernels compute them (in the input's "opmath" type:
//! f32 for f32, f64 for f64), so that floor decisions agree bit for bit.

use super::pad;
use pyrite_core::alloc::try_with_capacity;
use pyrite_core::{bail, DType, Result, Scalar, Tensor};
use std::ops::{Add, Div, Mul, Sub};

// ============================================================================ interpolate

/// `mode=` of [`interpolate`] and `nn.Upsample`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum InterpolateMode {
    /// `'nearest'`: `floor(dst * scale)` (PyTorch's legacy rule, kept for compatibility).
    #[default]
    Nearest,
    /// `'nearest-exact'`: `floor((dst + 0.5) * scale)` (Pillow, scikit-image).
    NearestExact,
    /// `'linear'` (3-D input).
    Linear,
    /// `'bilinear'` (4-D input).
    Bilinear,
    /// `'bicubic'` (4-D input; cubic convolution with `A = -0.75`).
    Bicubic,
    /// `'trilinear'` (5-D input).
    Trilinear,
    /// `'area'`: adaptive average pooling to the output size.
    Area,
}

impl InterpolateMode {
    /// PyTorch's name of the mode (`"bilinear"`, `"nearest-exact"`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            InterpolateMode::Nearest => "nearest",
            InterpolateMode::NearestExact => "nearest-exact",
            InterpolateMode::Linear => "linear",
            InterpolateMode::Bilinear => "bilinear",
            InterpolateMode::Bicubic => "bicubic",
            InterpolateMode::Trilinear => "trilinear",
            InterpolateMode::Area => "area",
        }
    }

    /// The mode named as in PyTorch.
    pub fn parse(s: &str) -> Result<InterpolateMode> {
        Ok(match s {
            "nearest" => InterpolateMode::Nearest,
            "nearest-exact" => InterpolateMode::NearestExact,
            "linear" => InterpolateMode::Linear,
            "bilinear" => InterpolateMode::Bilinear,
            "bicubic" => InterpolateMode::Bicubic,
            "trilinear" => InterpolateMode::Trilinear,
            "area" => InterpolateMode::Area,
            other => bail!(
                NotImplemented,
                "Input Error: unknown interpolation mode '{other}' (expected nearest | linear | bilinear | bicubic | trilinear | area | nearest-exact)"
            ),
        })
    }

    fn is_nearest(self) -> bool {
        matches!(self, InterpolateMode::Nearest | InterpolateMode::NearestExact)
    }

    fn interpolating(self) -> bool {
        matches!(
            self,
            InterpolateMode::Linear
                | InterpolateMode::Bilinear
                | InterpolateMode::Bicubic
                | InterpolateMode::Trilinear
        )
    }

    /// The input rank a mode needs (`None`: any of 3, 4, 5).
    fn rank(self) -> Option<usize> {
        match self {
            InterpolateMode::Linear => Some(3),
            InterpolateMode::Bilinear | InterpolateMode::Bicubic => Some(4),
            InterpolateMode::Trilinear => Some(5),
            _ => None,
        }
    }
}

impl std::fmt::Display for InterpolateMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The arithmetic type PyTorch's kernels compute source coordinates in (`opmath_t`: f32 for
/// f32/f16/bf16 inputs, f64 for f64), so that floors and weights come out bit for bit.
trait Real:
    Copy + PartialOrd + Add<Output = Self> + Sub<Output = Self> + Mul<Output = Self> + Div<Output = Self>
{
    fn of(v: f64) -> Self;
    fn int(v: i64) -> Self;
    fn f64(self) -> f64;
}

impl Real for f32 {
    fn of(v: f64) -> f32 {
        v as f32
    }
    fn int(v: i64) -> f32 {
        v as f32
    }
    fn f64(self) -> f64 {
        self as f64
    }
}

impl Real for f64 {
    fn of(v: f64) -> f64 {
        v
    }
    fn int(v: i64) -> f64 {
        v as f64
    }
    fn f64(self) -> f64 {
        self
    }
}

/// C's `(int64_t)floorf(v)`: the value goes through f32 first, whatever its type.
fn floorf(v: f64) -> i64 {
    (v as f32).floor() as i64
}

/// `area_pixel_compute_scale` (UpSample.h).
fn area_scale<T: Real>(inp: usize, out: usize, align: bool, scale: Option<f64>) -> T {
    if align {
        if out > 1 {
            T::int(inp as i64 - 1) / T::int(out as i64 - 1)
        } else {
            T::of(0.0)
        }
    } else {
        match scale {
            Some(s) if s > 0.0 => T::of(1.0 / s),
            _ => T::int(inp as i64) / T::int(out as i64),
        }
    }
}

/// `area_pixel_compute_source_index` (UpSample.h).
fn source_index<T: Real>(scale: T, i: usize, align: bool, cubic: bool) -> T {
    if align {
        scale * T::int(i as i64)
    } else {
        let s = scale * (T::int(i as i64) + T::of(0.5)) - T::of(0.5);
        if !cubic && s < T::of(0.0) {
            T::of(0.0)
        } else {
            s
        }
    }
}

/// How one spatial dim is resampled: indices into the input along that dim and, for the
/// interpolating modes, a weight per output position and tap.
enum DimPlan {
    Identity,
    Gather(Vec<i64>),
    Weighted { taps: Vec<(Vec<i64>, Vec<f64>)>, div: Option<Vec<f64>> },
}

fn clamp_weight<T: Real>(v: T) -> T {
    let (zero, one) = (T::of(0.0), T::of(1.0));
    let v = if v > zero { v } else { zero };
    if v < one {
        v
    } else {
        one
    }
}

/// `get_cubic_upsample_coefficients` (UpSample.h), A = -0.75.
fn cubic_coeffs<T: Real>(t: T) -> [T; 4] {
    let a = T::of(-0.75);
    let c1 = |x: T| ((a + T::of(2.0)) * x - (a + T::of(3.0))) * x * x + T::of(1.0);
    let c2 = |x: T| ((a * x - T::of(5.0) * a) * x + T::of(8.0) * a) * x - T::of(4.0) * a;
    let x2 = T::of(1.0) - t;
    [c2(t + T::of(1.0)), c1(t), c1(x2), c2(x2 + T::of(1.0))]
}

fn plan_dim<T: Real>(
    mode: InterpolateMode,
    rank: usize,
    inp: usize,
    out: usize,
    align: bool,
    scale: Option<f64>,
) -> Result<DimPlan> {
    let last = inp as i64 - 1;
    Ok(match mode {
        // 4-D inputs go through `nearest_idx` (copies for equal sizes, halves for doubled
        // sizes, an f32 scale otherwise); 3-D and 5-D through the generic kernel, which
        // computes `floor(dst * scale)` in opmath for every size.
        InterpolateMode::Nearest if rank == 4 => DimPlan::Gather(table(out, |i| {
            if out == inp {
                i as i64
            } else if out == 2 * inp {
                (i >> 1) as i64
            } else {
                let s: f32 = area_scale(inp, out, false, scale);
                floorf(((i as f32) * s) as f64).min(last)
            }
        })?),
        InterpolateMode::Nearest => {
            let s: T = area_scale(inp, out, false, scale);
            DimPlan::Gather(table(out, |i| floorf((s * T::int(i as i64)).f64()).min(last))?)
        }
        InterpolateMode::NearestExact => {
            let s: T = area_scale(inp, out, false, scale);
            DimPlan::Gather(table(out, |i| floorf(source_index(s, i, false, false).f64() + 0.5).min(last))?)
        }
        InterpolateMode::Linear | InterpolateMode::Bilinear | InterpolateMode::Trilinear => {
            if inp == out {
                // `compute_source_index_and_lambda`: equal sizes copy, whatever the scale
                return Ok(DimPlan::Identity);
            }
            let s: T = area_scale(inp, out, align, scale);
            let (mut i0, mut i1, mut w0, mut w1) = (
                try_with_capacity::<i64>(out, "interpolate")?,
                try_with_capacity::<i64>(out, "interpolate")?,
                try_with_capacity::<f64>(out, "interpolate")?,
                try_with_capacity::<f64>(out, "interpolate")?,
            );
            for i in 0..out {
                let real = source_index(s, i, align, false);
                let idx = floorf(real.f64()).min(last);
                let l1 = clamp_weight(real - T::int(idx));
                i0.push(idx);
                i1.push(idx + i64::from(idx < last));
                w0.push((T::of(1.0) - l1).f64());
                w1.push(l1.f64());
            }
            DimPlan::Weighted { taps: vec![(i0, w0), (i1, w1)], div: None }
        }
        InterpolateMode::Bicubic => {
            let s: T = area_scale(inp, out, align, scale);
            let mut taps: Vec<(Vec<i64>, Vec<f64>)> = Vec::with_capacity(4);
            for _ in 0..4 {
                taps.push((try_with_capacity(out, "interpolate")?, try_with_capacity(out, "interpolate")?));
            }
            for i in 0..out {
                let real = source_index(s, i, align, true);
                let idx = floorf(real.f64()).min(last);
                let t = clamp_weight(real - T::int(idx));
                let w = cubic_coeffs(t);
                for (j, tap) in taps.iter_mut().enumerate() {
                    tap.0.push((idx - 1 + j as i64).clamp(0, last));
                    tap.1.push(w[j].f64());
                }
            }
            DimPlan::Weighted { taps, div: None }
        }
        InterpolateMode::Area => {
            // adaptive average pooling: window [floor(i * in / out), ceil((i + 1) * in / out))
            // in u128: `i * inp` of huge sizes would wrap
            let (o, n) = (out as u128, inp as u128);
            let win: Vec<(usize, usize)> =
                table(out, |i| ((i as u128 * n / o) as usize, ((i as u128 + 1) * n).div_ceil(o) as usize))?;
            let k = win.iter().map(|(s, e)| e - s).max().unwrap_or(1);
            let taps = (0..k)
                .map(|j| {
                    let idx = win.iter().map(|&(s, e)| (s + j).min(e - 1) as i64).collect();
                    let w = win.iter().map(|&(s, e)| if s + j < e { 1.0 } else { 0.0 }).collect();
                    (idx, w)
                })
                .collect();
            DimPlan::Weighted { taps, div: Some(win.iter().map(|(s, e)| (e - s) as f64).collect()) }
        }
    })
}

/// `(0..n).map(f).collect()` into a fallibly allocated `Vec`: the size comes from the user's
/// output size, so a huge one is an out-of-memory error, never an abort.
fn table<T>(n: usize, f: impl FnMut(usize) -> T) -> Result<Vec<T>> {
    let mut v = try_with_capacity(n, "interpolate")?;
    v.extend((0..n).map(f));
    Ok(v)
}

fn index_tensor(idx: &[i64]) -> Result<Tensor> {
    Tensor::from_vec(idx.to_vec(), [idx.len()])
}

/// A per-position vector along `dim` of a rank-`rank` tensor, shaped to broadcast.
fn along(v: &[f64], dim: usize, rank: usize, dtype: DType) -> Result<Tensor> {
    let mut shape = vec![1usize; rank - dim];
    shape[0] = v.len();
    Tensor::from_vec(v.to_vec(), shape)?.to_dtype(dtype)
}

fn apply_plan(y: &Tensor, dim: usize, plan: &DimPlan) -> Result<Tensor> {
    match plan {
        DimPlan::Identity => Ok(y.clone()),
        DimPlan::Gather(idx) => y.index_select(dim as isize, &index_tensor(idx)?.to_device(y.device())?),
        DimPlan::Weighted { taps, div } => {
            // The plan's indices and weights join the input where it is (a GPU's input too).
            let on = |t: Tensor| t.to_device(y.device());
            let mut acc: Option<Tensor> = None;
            for (idx, w) in taps {
                let t = y.index_select(dim as isize, &on(index_tensor(idx)?)?)?;
                let t = t.mul(&on(along(w, dim, y.rank(), y.dtype())?)?)?;
                acc = Some(match acc {
                    None => t,
                    Some(a) => a.add(&t)?,
                });
            }
            let acc = acc.expect("at least one tap");
            match div {
                Some(d) => acc.div(&on(along(d, dim, y.rank(), y.dtype())?)?),
                None => Ok(acc),
            }
        }
    }
}

fn fmt_list<T: std::fmt::Debug>(v: &[T]) -> String {
    format!("{v:?}")
}

/// Options of [`interpolate`] (`F.interpolate`'s keywords and defaults; `antialias` is not
/// supported).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct InterpolateOptions {
    /// The output's spatial size: one value per spatial dim, or one for all of them.
    pub size: Option<Vec<usize>>,
    /// The multiplier of the spatial size: one value per spatial dim, or one for all of them.
    pub scale_factor: Option<Vec<f64>>,
    pub mode: InterpolateMode,
    /// Interpolating modes only (`None`: false); the other modes reject any value.
    pub align_corners: Option<bool>,
    /// With `scale_factor`, computes the source coordinates from the output size (`None`:
    /// false).
    pub recompute_scale_factor: Option<bool>,
}

/// `F.interpolate(x, size=None, scale_factor=None, mode='nearest', align_corners=None,
/// recompute_scale_factor=None)`: resamples the spatial dims of `[N, C, *spatial]` (3-D, 4-D or 5-D).
///
/// `size` and `scale_factor` take one value per spatial dim, or one value for all of them
/// (Python's int / float form); exactly one of them must be given. With `scale_factor` (and
/// `recompute_scale_factor` not true) the output size is `floor(in * scale)` and, as in
/// PyTorch, the source coordinates use `1 / scale_factor`, not `in / out`. `align_corners`
/// is for the interpolating modes only (default false).
///
/// ```
/// use pyrite::nn::functional::{self as F, InterpolateMode};
/// use pyrite::Tensor;
/// let x = Tensor::new([[[1f32, 3.]]])?;
/// let opts = F::InterpolateOptions {
///     scale_factor: Some(vec![2.0]),
///     mode: InterpolateMode::Linear,
///     ..Default::default()
/// };
/// let y = F::interpolate(&x, &opts)?;
/// assert_eq!(y.to_vec3::<f32>()?[0][0], vec![1., 1.5, 2.5, 3.]);
/// # Ok::<(), pyrite::Error>(())
/// ```
pub fn interpolate(x: &Tensor, opts: &InterpolateOptions) -> Result<Tensor> {
    // Autocast's float32 list (CUDA): the upsample op of the mode and rank.
    let aten = match (opts.mode, x.rank()) {
        (InterpolateMode::Nearest, 3) => Some("upsample_nearest1d"),
        (InterpolateMode::Nearest, 4) => Some("upsample_nearest2d"),
        (InterpolateMode::Nearest, 5) => Some("upsample_nearest3d"),
        (InterpolateMode::NearestExact, 3) => Some("_upsample_nearest_exact1d"),
        (InterpolateMode::NearestExact, 4) => Some("_upsample_nearest_exact2d"),
        (InterpolateMode::NearestExact, 5) => Some("_upsample_nearest_exact3d"),
        (InterpolateMode::Linear, 3) => Some("upsample_linear1d"),
        (InterpolateMode::Bilinear, 4) => Some("upsample_bilinear2d"),
        (InterpolateMode::Bicubic, 4) => Some("upsample_bicubic2d"),
        (InterpolateMode::Trilinear, 5) => Some("upsample_trilinear3d"),
        _ => None,
    };
    if let Some(op) = aten
        && let Some(r) = pyrite_core::autocast::dispatch(op, &[Some(x)], |t| interpolate(t.at(0), opts))
    {
        return r;
    }
    let (size, scale_factor) = (opts.size.as_deref(), opts.scale_factor.as_deref());
    let (mode, align_corners, recompute_scale_factor) =
        (opts.mode, opts.align_corners, opts.recompute_scale_factor);
    let align = if mode.interpolating() {
        align_corners.unwrap_or(false)
    } else {
        if align_corners.is_some() {
            bail!(
                Value,
                "align_corners option can only be set with the interpolating modes: linear | bilinear | bicubic | trilinear"
            );
        }
        false
    };
    let rank = x.rank();
    if rank < 3 {
        bail!(
            NotImplemented,
            "Input Error: Only 3D, 4D and 5D input Tensors supported (got {rank}D) for the modes: nearest | linear | bilinear | bicubic | trilinear | area | nearest-exact (got {mode})"
        );
    }
    let sp = rank - 2;
    let in_sizes = x.dims()[2..].to_vec();
    let (mut out_sizes, mut scales): (Option<Vec<usize>>, Option<Vec<f64>>) = match (size, scale_factor) {
        (Some(_), Some(_)) => bail!(Value, "only one of size or scale_factor should be defined"),
        (None, None) => bail!(Value, "either size or scale_factor should be defined"),
        (Some(s), None) => {
            if s.len() != 1 && s.len() != sp {
                bail!(
                    Value,
                    "Input and output must have the same number of spatial dimensions, but got input with spatial dimensions of {} and output size of {}. Please provide input tensor in (N, C, d1, d2, ...,dK) format and output size in (o1, o2, ...,oK) format.",
                    fmt_list(&in_sizes),
                    fmt_list(s)
                );
            }
            (Some(if s.len() == 1 { vec![s[0]; sp] } else { s.to_vec() }), None)
        }
        (None, Some(f)) => {
            if f.len() != 1 && f.len() != sp {
                bail!(
                    Value,
                    "Input and scale_factor must have the same number of spatial dimensions, but got input with spatial dimensions of {} and scale_factor of shape {}. Please provide input tensor in (N, C, d1, d2, ...,dK) format and scale_factor in (s1, s2, ...,sK) format.",
                    fmt_list(&in_sizes),
                    fmt_list(f)
                );
            }
            (None, Some(if f.len() == 1 { vec![f[0]; sp] } else { f.to_vec() }))
        }
    };
    let mut recompute = recompute_scale_factor == Some(true);
    if recompute && size.is_some() {
        bail!(Value, "recompute_scale_factor is not meaningful with an explicit size.");
    }
    if mode == InterpolateMode::Area && out_sizes.is_none() {
        recompute = true;
    }
    if recompute {
        // Python: math.floor(float(input.size(i + 2)) * scale_factors[i])
        let f = scales.take().expect("scale factors");
        let mut o = Vec::with_capacity(sp);
        for (i, &s) in f.iter().enumerate() {
            let v = (in_sizes[i] as f64 * s).floor();
            if !v.is_finite() {
                bail!(Value, "interpolate: cannot convert float {v} to integer");
            }
            o.push(v.max(0.0) as usize);
        }
        out_sizes = Some(o);
    }
    if let Some(r) = mode.rank() {
        if r != rank {
            bail!(NotImplemented, "Got {rank}D input, but {mode} mode needs {r}D input");
        }
    } else if rank > 5 {
        bail!(
            NotImplemented,
            "Input Error: Only 3D, 4D and 5D input Tensors supported (got {rank}D) for the modes: nearest | linear | bilinear | bicubic | trilinear | area | nearest-exact (got {mode})"
        );
    }
    // the output size (C++ `compute_output_size`: the scaled size truncated)
    let outs: Vec<usize> = match (&out_sizes, &scales) {
        (Some(o), _) => o.clone(),
        (None, Some(f)) => {
            let mut o = Vec::with_capacity(sp);
            for (i, &s) in f.iter().enumerate() {
                let v = in_sizes[i] as f64 * s;
                o.push(if v >= 1.0 && v.is_finite() { v as usize } else { 0 });
            }
            o
        }
        (None, None) => unreachable!("size or scale_factor is set"),
    };
    if in_sizes.iter().chain(&outs).any(|&d| d == 0) || x.dims()[1] == 0 {
        bail!(
            Value,
            "Input and output sizes should be greater than 0, but got input {} output {} (input shape {})",
            fmt_list(&in_sizes),
            fmt_list(&outs),
            x.shape()
        );
    }
    let dt = x.dtype();
    let nearest_u8 = mode.is_nearest() && dt == DType::U8;
    if !dt.is_floating_point() && !nearest_u8 {
        bail!(
            DType,
            "\"upsample_{}\" not implemented for '{}'",
            mode.as_str().replace('-', "_"),
            dt.type_name()
        );
    }
    if x.dims()[0] == 0 {
        // an empty batch: nothing to plan, whatever the output size
        let mut shape = x.dims()[..2].to_vec();
        shape.extend(&outs);
        return Tensor::zeros(shape, dt);
    }
    let plans: Vec<DimPlan> = (0..sp)
        .map(|d| {
            let s = scales.as_ref().map(|f| f[d]);
            if dt == DType::F64 {
                plan_dim::<f64>(mode, rank, in_sizes[d], outs[d], align, s)
            } else {
                plan_dim::<f32>(mode, rank, in_sizes[d], outs[d], align, s)
            }
        })
        .collect::<Result<_>>()?;
    // the last dim first: PyTorch's kernels interpolate the innermost dim first
    if plans.iter().all(|p| matches!(p, DimPlan::Identity)) {
        // a new tensor all the same, as in PyTorch
        return x.deep_clone();
    }
    let mut y = x.clone();
    for d in (0..sp).rev() {
        y = apply_plan(&y, d + 2, &plans[d])?;
    }
    Ok(y)
}

// ============================================================================ unfold / fold

/// A 2-element parameter from one value (both dims) or two.
fn pair(name: &str, op: &str, v: &[usize]) -> Result<[usize; 2]> {
    match v.len() {
        1 => Ok([v[0], v[0]]),
        2 => Ok([v[0], v[1]]),
        n => bail!(Value, "{op}: {name} must be an int or a pair of ints, got {n} values"),
    }
}

struct Patches {
    k: [usize; 2],
    d: [usize; 2],
    p: [usize; 2],
    s: [usize; 2],
}

impl Patches {
    fn new(
        op: &str,
        kernel_size: &[usize],
        dilation: &[usize],
        padding: &[usize],
        stride: &[usize],
    ) -> Result<Patches> {
        let k = pair("kernel_size", op, kernel_size)?;
        let d = pair("dilation", op, dilation)?;
        let p = pair("padding", op, padding)?;
        let s = pair("stride", op, stride)?;
        if k[0] == 0 || k[1] == 0 {
            bail!(
                Value,
                "kernel size should be greater than zero, but got kernel_height: {} kernel_width: {}",
                k[0],
                k[1]
            );
        }
        if d[0] == 0 || d[1] == 0 {
            bail!(
                Value,
                "dilation should be greater than zero, but got dilation_height: {} dilation_width: {}",
                d[0],
                d[1]
            );
        }
        if s[0] == 0 || s[1] == 0 {
            bail!(
                Value,
                "stride should be greater than zero, but got stride_height: {} stride_width: {}",
                s[0],
                s[1]
            );
        }
        Ok(Patches { k, d, p, s })
    }

    /// The number of blocks along dim `i` of a (unpadded) extent `n`; PyTorch's `div_rtn`.
    /// Computed in i128, where no product of sizes wraps; saturated into i64.
    fn blocks(&self, i: usize, n: usize) -> i64 {
        let (n, p, d, k, s) =
            (n as i128, self.p[i] as i128, self.d[i] as i128, self.k[i] as i128, self.s[i] as i128);
        let span = n + 2 * p - (d * (k - 1) + 1);
        (span.div_euclid(s) + 1).clamp(i64::MIN as i128, i64::MAX as i128) as i64
    }

    /// Flat positions in the padded `[hp, wp]` plane, in `(ki, kj, oh, ow)` order.
    fn positions(&self, oh: usize, ow: usize, wp: usize) -> Result<Vec<i64>> {
        let n = [self.k[1], oh, ow].iter().try_fold(self.k[0], |a, &b| a.checked_mul(b));
        let Some(n) = n else {
            bail!(
                OutOfMemory,
                "fold: {}*{} x {oh}*{ow} block positions are more than memory can hold",
                self.k[0],
                self.k[1]
            );
        };
        let mut v = try_with_capacity(n, "fold")?;
        for ki in 0..self.k[0] {
            for kj in 0..self.k[1] {
                for a in 0..oh {
                    for b in 0..ow {
                        let r = ki * self.d[0] + a * self.s[0];
                        let c = kj * self.d[1] + b * self.s[1];
                        v.push((r * wp + c) as i64);
                    }
                }
            }
        }
        Ok(v)
    }
}

/// Options of [`unfold`] and [`fold`] (their keywords and defaults, the same for both): each
/// one value for both spatial dims, or two.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FoldOptions {
    pub dilation: Vec<usize>,
    pub padding: Vec<usize>,
    pub stride: Vec<usize>,
}

impl Default for FoldOptions {
    fn default() -> Self {
        FoldOptions { dilation: vec![1], padding: vec![0], stride: vec![1] }
    }
}

/// `F.unfold(x, kernel_size, dilation=1, padding=0, stride=1)` (im2col): `[N, C, H, W] -> [N, C kh
/// kw, L]` (or `[C, H, W] -> [C kh kw, L]`), the sliding blocks as columns, `L` blocks in
/// row-major order. Each of the four parameters is one value for both dims or two.
///
/// ```
/// use pyrite::nn::functional as F;
/// use pyrite::{DType, Tensor};
/// let x = Tensor::arange(0.0, 16.0, 1.0, DType::F32)?.reshape([1, 1, 4, 4])?;
/// let cols = F::unfold(&x, &[2], &F::FoldOptions { stride: vec![2], ..Default::default() })?;
/// assert_eq!(cols.dims(), &[1, 4, 4]);
/// assert_eq!(cols.to_vec3::<f32>()?[0][0], vec![0., 2., 8., 10.]);
/// # Ok::<(), pyrite::Error>(())
/// ```
pub fn unfold(x: &Tensor, kernel_size: &[usize], opts: &FoldOptions) -> Result<Tensor> {
    let pp = Patches::new("unfold", kernel_size, &opts.dilation, &opts.padding, &opts.stride)?;
    let r = x.rank();
    let dims = x.dims();
    let valid = match r {
        3 => dims.iter().all(|&d| d != 0),
        4 => dims[1..].iter().all(|&d| d != 0),
        _ => false,
    };
    if !valid {
        bail!(
            Shape,
            "Expected 3D or 4D (batch mode) tensor input with possible 0 batch size and non-zero dimensions, but got: {}",
            x.shape()
        );
    }
    let xb = if r == 3 { x.unsqueeze(0)? } else { x.clone() };
    let (n, c, h, w) = (xb.dims()[0], xb.dims()[1], xb.dims()[2], xb.dims()[3]);
    let (oh, ow) = (pp.blocks(0, h), pp.blocks(1, w));
    if oh < 1 || ow < 1 {
        bail!(
            Value,
            "Given input with spatial size ({h}, {w}), kernel_size=({}, {}), dilation=({}, {}), padding=({}, {}), calculated shape of the array of sliding blocks as ({oh}, {ow}), but its components must be at least one.",
            pp.k[0], pp.k[1], pp.d[0], pp.d[1], pp.p[0], pp.p[1]
        );
    }
    let (oh, ow) = (oh as usize, ow as usize);
    // the output and the gather tables, checked before anything is allocated
    let rows_len = pp.k[0].checked_mul(oh);
    let cols_len = pp.k[1].checked_mul(ow);
    let planes = pp.k[0].checked_mul(pp.k[1]).and_then(|kk| kk.checked_mul(c));
    let out_numel = planes.and_then(|p| p.checked_mul(oh)).and_then(|p| p.checked_mul(ow));
    if rows_len.is_none() || cols_len.is_none() || out_numel.and_then(|m| m.checked_mul(n)).is_none() {
        bail!(
            OutOfMemory,
            "unfold: the output of {n} x {c} x {}*{} x {oh}*{ow} elements is larger than memory can hold",
            pp.k[0],
            pp.k[1]
        );
    }
    let xp = if pp.p[0] > 0 || pp.p[1] > 0 {
        let (ph, pw) = (pp.p[0] as isize, pp.p[1] as isize);
        pad(&xb, &[pw, pw, ph, ph], &Default::default())?
    } else {
        xb
    };
    // rows (ki, oh) then columns (kj, ow)
    let mut rows: Vec<i64> = try_with_capacity(pp.k[0] * oh, "unfold")?;
    rows.extend((0..pp.k[0]).flat_map(|ki| (0..oh).map(move |a| (ki * pp.d[0] + a * pp.s[0]) as i64)));
    let mut cols: Vec<i64> = try_with_capacity(pp.k[1] * ow, "unfold")?;
    cols.extend((0..pp.k[1]).flat_map(|kj| (0..ow).map(move |b| (kj * pp.d[1] + b * pp.s[1]) as i64)));
    let y = xp.index_select(2, &index_tensor(&rows)?)?.index_select(3, &index_tensor(&cols)?)?;
    let y = y.reshape([n, c, pp.k[0], oh, pp.k[1], ow])?.permute(&[0, 1, 2, 4, 3, 5])?.reshape([
        n,
        c * pp.k[0] * pp.k[1],
        oh * ow,
    ])?;
    if r == 3 {
        y.squeeze_dim(0)
    } else {
        Ok(y)
    }
}

/// `F.fold(x, output_size, kernel_size, dilation=1, padding=0, stride=1)` (col2im): the inverse
/// layout of [`unfold`], `[N, C kh kw, L] -> [N, C, H, W]` (or unbatched `[C kh kw, L]`),
/// summing where blocks overlap. It is unfold's adjoint.
///
/// ```
/// use pyrite::nn::functional as F;
/// use pyrite::{DType, Tensor};
/// let x = Tensor::ones([1, 1, 3, 3], DType::F32)?;
/// let cols = F::unfold(&x, &[2], &Default::default())?;
/// let back = F::fold(&cols, &[3, 3], &[2], &Default::default())?;
/// assert_eq!(back.to_vec::<f32>()?, vec![1., 2., 1., 2., 4., 2., 1., 2., 1.]);
/// # Ok::<(), pyrite::Error>(())
/// ```
pub fn fold(x: &Tensor, output_size: &[usize], kernel_size: &[usize], opts: &FoldOptions) -> Result<Tensor> {
    let [h, w] = pair("output_size", "fold", output_size)?;
    let pp = Patches::new("fold", kernel_size, &opts.dilation, &opts.padding, &opts.stride)?;
    let r = x.rank();
    let dims = x.dims();
    let valid = (r == 2 && dims[0] != 0 && dims[1] != 0) || (r == 3 && dims[1] != 0 && dims[2] != 0);
    if !valid {
        bail!(
            Shape,
            "Expected 2D or 3D (batch mode) tensor for input with possibly 0 batch size and non-zero dimensions for input, but got: {}",
            x.shape()
        );
    }
    let xb = if r == 2 { x.unsqueeze(0)? } else { x.clone() };
    let (n, planes, l) = (xb.dims()[0], xb.dims()[1], xb.dims()[2]);
    let kk = pp.k[0] * pp.k[1];
    if planes % kk != 0 {
        bail!(
            Value,
            "Expected size of input's dimension 1 to be divisible by the product of kernel_size, but got input.size(1)={planes} and kernel_size=({}, {})",
            pp.k[0],
            pp.k[1]
        );
    }
    let (bh, bw) = (pp.blocks(0, h), pp.blocks(1, w));
    let params = format!(
        "output_size=({h}, {w}), kernel_size=({}, {}), dilation=({}, {}), padding=({}, {}), stride=({}, {})",
        pp.k[0], pp.k[1], pp.d[0], pp.d[1], pp.p[0], pp.p[1], pp.s[0], pp.s[1]
    );
    if l as i64 != bh * bw {
        bail!(
            Value,
            "Given {params}, expected size of input's dimension 2 to match the calculated number of sliding blocks {bh} * {bw} = {}, but got input.size(2)={l}.",
            bh * bw
        );
    }
    if bh < 1 || bw < 1 {
        bail!(Value, "Given {params}, calculated shape of the array of sliding blocks as ({bh}, {bw}), which is too small (non-positive)");
    }
    if h == 0 || w == 0 {
        bail!(Value, "Expected output spatial size to be positive, but got: output_size=({h}, {w})");
    }
    let c = planes / kk;
    let (Some(hp), Some(wp)) = (
        pp.p[0].checked_mul(2).and_then(|p| p.checked_add(h)),
        pp.p[1].checked_mul(2).and_then(|p| p.checked_add(w)),
    ) else {
        bail!(OutOfMemory, "fold: the padded output of {params} is larger than memory can hold");
    };
    let pos = pp.positions(bh as usize, bw as usize, wp)?;
    let src = xb.reshape([n, c, kk * l])?;
    let y = Tensor::zeros([n, c, hp.saturating_mul(wp)], x.dtype())?.index_add(
        2,
        &index_tensor(&pos)?,
        &src,
        1,
    )?;
    let mut y = y.reshape([n, c, hp, wp])?;
    if pp.p[0] > 0 || pp.p[1] > 0 {
        y = y.narrow(2, pp.p[0] as isize, h)?.narrow(3, pp.p[1] as isize, w)?;
    }
    if r == 2 {
        y.squeeze_dim(0)
    } else {
        Ok(y)
    }
}

// ============================================================================ affine_grid

/// `linspace_from_neg_one` (AffineGridGenerator.cpp): the normalised pixel coordinates.
fn base_coords(n: usize, align: bool, dtype: DType) -> Result<Tensor> {
    if n <= 1 {
        return Tensor::zeros([1], dtype);
    }
    let r = Tensor::linspace(-1.0, 1.0, n, dtype)?;
    if align {
        Ok(r)
    } else {
        r.mul_scalar((n - 1) as i64)?.div_scalar(n as i64)
    }
}

/// `F.affine_grid(theta, size, align_corners)`: the sampling grid of a batch of affine maps,
/// for [`grid_sample`]. 2-D: theta `[N, 2, 3]`, size `[N, C, H, W]`, grid `[N, H, W, 2]`;
/// 3-D: theta `[N, 3, 4]`, size `[N, C, D, H, W]`, grid `[N, D, H, W, 3]`. Differentiable
/// with respect to theta.
///
/// ```
/// use pyrite::nn::functional as F;
/// use pyrite::Tensor;
/// let theta = Tensor::new([[[1f32, 0., 0.], [0., 1., 0.]]])?;
/// let grid = F::affine_grid(&theta, &[1, 1, 2, 2], true)?;
/// assert_eq!(grid.to_vec::<f32>()?, vec![-1., -1., 1., -1., -1., 1., 1., 1.]);
/// # Ok::<(), pyrite::Error>(())
/// ```
pub fn affine_grid(theta: &Tensor, size: &[usize], align_corners: bool) -> Result<Tensor> {
    if !theta.dtype().is_floating_point() {
        bail!(DType, "Expected theta to have floating point type, but got {}", theta.dtype().type_name());
    }
    let sp = match size.len() {
        4 => 2,
        5 => 3,
        _ => bail!(
            NotImplemented,
            "affine_grid only supports 4D and 5D sizes, for 2D and 3D affine transforms, respectively. Got size {}.",
            fmt_list(size)
        ),
    };
    let td = theta.dims();
    if theta.rank() != 3 || td[1] != sp || td[2] != sp + 1 {
        bail!(
            Value,
            "Expected a batch of {sp}D affine matrices of shape Nx{sp}x{} for size {}. Got {}.",
            sp + 1,
            fmt_list(size),
            theta.shape()
        );
    }
    let spatial = &size[2..];
    let unit_align = align_corners && spatial.iter().min() == Some(&1);
    if !unit_align && size.contains(&0) {
        bail!(Value, "Expected non-zero, positive output size. Got {}", fmt_list(size));
    }
    let n = size[0];
    if td[0] != n {
        bail!(
            Shape,
            "affine_grid: theta has batch size {} but size asks for {n} ({})",
            td[0],
            fmt_list(size)
        );
    }
    let dt = theta.dtype();
    // base grid [*spatial, sp + 1]: (x, y[, z], 1), x along the last spatial dim
    let numel: usize = spatial.iter().product();
    let mut cols = Vec::with_capacity(sp + 1);
    for k in 0..sp {
        let d = sp - 1 - k; // coordinate k runs along spatial dim d
        let mut shape = vec![1usize; sp];
        shape[d] = spatial[d];
        let c = base_coords(spatial[d], align_corners, dt)?.reshape(shape)?.expand(spatial)?;
        cols.push(c.reshape([numel, 1])?);
    }
    cols.push(Tensor::ones([numel, 1], dt)?);
    let base = Tensor::cat(&cols, 1)?; // [numel, sp + 1]
    let grid = base.unsqueeze(0)?.expand([n, numel, sp + 1])?.bmm(&theta.transpose(1, 2)?)?;
    let mut out: Vec<usize> = vec![n];
    out.extend_from_slice(spatial);
    out.push(sp);
    grid.reshape(out)
}

// ============================================================================ grid_sample

/// `mode=` of [`grid_sample`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum GridSampleMode {
    #[default]
    Bilinear,
    Nearest,
    /// 4-D input only.
    Bicubic,
}

/// `padding_mode=` of [`grid_sample`]: what a location outside the input reads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum GridSamplePadding {
    /// Zeros.
    #[default]
    Zeros,
    /// The nearest border value.
    Border,
    /// The value reflected by the borders.
    Reflection,
}

impl GridSampleMode {
    /// The mode named as in PyTorch (`"bilinear"`, `"nearest"`, `"bicubic"`).
    pub fn parse(s: &str) -> Result<GridSampleMode> {
        Ok(match s {
            "bilinear" => GridSampleMode::Bilinear,
            "nearest" => GridSampleMode::Nearest,
            "bicubic" => GridSampleMode::Bicubic,
            other => bail!(
                Value,
                "nn.functional.grid_sample(): expected mode to be 'bilinear', 'nearest' or 'bicubic', but got: '{other}'"
            ),
        })
    }
}

impl GridSamplePadding {
    /// The padding mode named as in PyTorch (`"zeros"`, `"border"`, `"reflection"`).
    pub fn parse(s: &str) -> Result<GridSamplePadding> {
        Ok(match s {
            "zeros" => GridSamplePadding::Zeros,
            "border" => GridSamplePadding::Border,
            "reflection" => GridSamplePadding::Reflection,
            other => bail!(
                Value,
                "nn.functional.grid_sample(): expected padding_mode to be 'zeros', 'border', or 'reflection', but got: '{other}'"
            ),
        })
    }
}

/// How one grid coordinate maps to pixel space along a dim of `size` pixels. The 2-D
/// kernel (vectorised in PyTorch) and the 3-D one (scalar) round differently; each is
/// followed so that floors agree with PyTorch.
struct Axis {
    size: usize,
    align: bool,
    vectorized: bool,
}

fn sc(v: f64) -> Scalar {
    Scalar::from(v)
}

impl Axis {
    /// Normalised `[-1, 1]` to pixel coordinates.
    fn unnormalize(&self, g: &Tensor) -> Result<Tensor> {
        let n = self.size as f64;
        match (self.align, self.vectorized) {
            (true, true) => g.add_scalar(1.0)?.mul_scalar((n - 1.0) / 2.0),
            (false, true) => g.add_scalar(1.0)?.mul_scalar(n / 2.0)?.sub_scalar(0.5),
            (true, false) => g.add_scalar(1.0)?.div_scalar(2.0)?.mul_scalar(n - 1.0),
            (false, false) => g.add_scalar(1.0)?.mul_scalar(n)?.sub_scalar(1.0)?.div_scalar(2.0),
        }
    }

    /// Clips to `[0, size - 1]`; the gradient is zero on and beyond the borders, as in
    /// PyTorch ("borders are considered out of bounds").
    fn clip(&self, x: &Tensor) -> Result<Tensor> {
        let max = (self.size - 1) as f64;
        let inside = x.detach().gt_scalar(0.0)?.logical_and(&x.detach().lt_scalar(max)?)?;
        // NaN clips to 0, as PyTorch's clamp_min(0, x) does
        let clamped = x.detach().nan_to_num(0.0, None, None)?.clamp(Some(sc(0.0)), Some(sc(max)))?;
        x.where_(&inside, &clamped)
    }

    /// Reflects by the borders (`reflect_coordinates`).
    fn reflect(&self, x: &Tensor) -> Result<Tensor> {
        let n = self.size as f64;
        let xd = x.detach();
        if self.vectorized {
            // ComputeLocationBase: low, twice_span; reflect with trunc and a min
            let (low, twice_span) = if self.align { (0.0, (n - 1.0) * 2.0) } else { (-0.5, n * 2.0) };
            if self.align && self.size <= 1 {
                return x.mul_scalar(0.0);
            }
            let rel = x.sub_scalar(low)?;
            let neg = xd.sub_scalar(low)?.lt_scalar(0.0)?;
            let sign = Tensor::full_on([1], 1.0, x.dtype(), x.device())?
                .where_(&neg.logical_not()?, &Tensor::full_on([1], -1.0, x.dtype(), x.device())?)?;
            let abs_in = rel.mul(&sign)?;
            let flips = abs_in.detach().div_scalar(twice_span)?.trunc()?;
            let extra = abs_in.sub(&flips.mul_scalar(twice_span)?)?;
            let reflected = extra.rsub_scalar(twice_span)?;
            let more = extra.detach().gt(&reflected.detach())?;
            reflected.where_(&more, &extra)?.add_scalar(low)
        } else {
            // the scalar kernel: twice_low, twice_high; fmod and the parity of the flips
            let (tl, th) = if self.align { (0.0, 2.0 * (n - 1.0)) } else { (-1.0, 2.0 * n - 1.0) };
            if tl == th {
                return x.mul_scalar(0.0);
            }
            let min = tl / 2.0;
            let span = (th - tl) / 2.0;
            let rel = x.sub_scalar(min)?;
            let neg = xd.sub_scalar(min)?.lt_scalar(0.0)?;
            let sign = Tensor::full_on([1], 1.0, x.dtype(), x.device())?
                .where_(&neg.logical_not()?, &Tensor::full_on([1], -1.0, x.dtype(), x.device())?)?;
            let a = rel.mul(&sign)?;
            let extra = a.fmod_scalar(span)?;
            let flips = a.detach().div_scalar(span)?.floor()?;
            let odd = flips.fmod_scalar(2.0)?.ne_scalar(0.0)?;
            extra.rsub_scalar(span)?.where_(&odd, &extra)?.add_scalar(min)
        }
    }

    /// `compute_coordinates`: the padding mode applied to pixel coordinates.
    fn pad(&self, x: &Tensor, padding: GridSamplePadding) -> Result<Tensor> {
        match padding {
            GridSamplePadding::Zeros => Ok(x.clone()),
            GridSamplePadding::Border => self.clip(x),
            GridSamplePadding::Reflection => self.clip(&self.reflect(x)?),
        }
    }
}

/// Integer indices of `[N, L]` float coordinates that are whole numbers, with the in-bounds
/// mask (NaN is out of bounds); out-of-bounds indices are set to 0.
fn int_index(x: &Tensor, size: usize) -> Result<(Tensor, Tensor)> {
    let i = x.detach().to_dtype(DType::I64)?;
    let ok =
        i.ge_scalar(0)?.logical_and(&i.lt_scalar(size as i64)?)?.logical_and(&x.isnan()?.logical_not()?)?;
    let i = i.where_(&ok, &Tensor::zeros_on([1], DType::I64, i.device())?)?;
    Ok((i, ok))
}

/// Options of [`grid_sample`] (`F.grid_sample`'s keywords and defaults; PyTorch's
/// `align_corners=None` is false).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GridSampleOptions {
    pub mode: GridSampleMode,
    pub padding_mode: GridSamplePadding,
    /// -1 and 1 are the centres of the corner pixels (not their outer edges).
    pub align_corners: bool,
}

/// `F.grid_sample(input, grid, mode='bilinear', padding_mode='zeros', align_corners=None)`:
/// samples `input` `[N, C,
/// H, W]` at the normalised locations of `grid` `[N, Ho, Wo, 2]` (x, y in `[-1, 1]`) to
/// `[N, C, Ho, Wo]`; 5-D (`[N, C, D, H, W]` with a `[N, Do, Ho, Wo, 3]` grid of x, y, z)
/// for bilinear (trilinear) and nearest. Differentiable with respect to input and grid
/// (nearest gives the grid no gradient; bicubic's grid gradient ignores the padding, as in
/// PyTorch).
///
/// ```
/// use pyrite::nn::functional::{self as F, GridSampleOptions};
/// use pyrite::Tensor;
/// let x = Tensor::new([[[[1f32, 2.], [3., 4.]]]])?;
/// let grid = Tensor::new([[[[0f32, 0.], [-1., -1.]]]])?; // the centre and the top-left corner
/// let y = F::grid_sample(&x, &grid, &GridSampleOptions { align_corners: true, ..Default::default() })?;
/// assert_eq!(y.to_vec::<f32>()?, vec![2.5, 1.]);
/// # Ok::<(), pyrite::Error>(())
/// ```
pub fn grid_sample(input: &Tensor, grid: &Tensor, opts: &GridSampleOptions) -> Result<Tensor> {
    // Autocast's float32 list (grid_sampler).
    if let Some(r) = pyrite_core::autocast::dispatch("grid_sampler", &[Some(input), Some(grid)], |t| {
        let (input, grid) = (t.at(0), t.at(1));
        grid_sample(input, grid, opts)
    }) {
        return r;
    }
    let GridSampleOptions { mode, padding_mode, align_corners } = *opts;
    let r = input.rank();
    if r != grid.rank() {
        bail!(
            Shape,
            "grid_sampler(): expected input and grid to have same dims, but got input with sizes {} and grid with sizes {}",
            input.shape(),
            grid.shape()
        );
    }
    if r != 4 && r != 5 {
        bail!(
            Shape,
            "grid_sampler(): expected 4D or 5D input and grid with same number of dimensions, but got input with sizes {} and grid with sizes {}",
            input.shape(),
            grid.shape()
        );
    }
    if input.dims()[0] != grid.dims()[0] {
        bail!(
            Shape,
            "grid_sampler(): expected grid and input to have same batch size, but got input with sizes {} and grid with sizes {}",
            input.shape(),
            grid.shape()
        );
    }
    let sp = r - 2;
    if grid.dims()[r - 1] != sp {
        bail!(
            Shape,
            "grid_sampler(): expected grid to have size {sp} in last dimension, but got grid with sizes {}",
            grid.shape()
        );
    }
    if input.dims()[2..].contains(&0) {
        bail!(
            Shape,
            "grid_sampler(): expected input to have non-empty spatial dimensions, but input has sizes {} with dimension {} being empty",
            input.shape(),
            2 + input.dims()[2..].iter().position(|&d| d == 0).unwrap_or(0)
        );
    }
    if input.dtype() != grid.dtype() {
        bail!(
            DType,
            "grid_sampler(): expected input and grid to have same dtype, but input has {} and grid has {}",
            input.dtype().type_name(),
            grid.dtype().type_name()
        );
    }
    if !input.dtype().is_floating_point() {
        bail!(DType, "\"grid_sampler_{sp}d_cpu\" not implemented for '{}'", input.dtype().type_name());
    }
    if mode == GridSampleMode::Bicubic && r == 5 {
        bail!(Value, "grid_sampler(): bicubic interpolation only supports 4D input");
    }
    let (n, c) = (input.dims()[0], input.dims()[1]);
    let spatial = input.dims()[2..].to_vec();
    let out_sp = grid.dims()[1..r - 1].to_vec();
    let l: usize = out_sp.iter().product();
    let plane: usize = spatial.iter().product();
    let mut out_shape = vec![n, c];
    out_shape.extend_from_slice(&out_sp);
    if n == 0 || c == 0 || l == 0 {
        return Tensor::zeros_on(out_shape, input.dtype(), input.device());
    }
    let flat_in = input.reshape([n, c, plane])?;
    let g = grid.reshape([n, l, sp])?;
    // axis k (grid coordinate k) runs along spatial dim sp - 1 - k
    let axes: Vec<Axis> = (0..sp)
        .map(|k| Axis { size: spatial[sp - 1 - k], align: align_corners, vectorized: sp == 2 })
        .collect();
    let strides: Vec<usize> = (0..sp).map(|k| spatial[sp - k..].iter().product()).collect();
    let coords: Vec<Tensor> =
        (0..sp).map(|k| axes[k].unnormalize(&g.select(2, k as isize)?)).collect::<Result<_>>()?;
    // the value at integer positions (one [N, L] index tensor per axis), zero out of bounds
    let zero = Tensor::zeros_on([1], input.dtype(), input.device())?;
    let fetch = |idx: &[(Tensor, Tensor)]| -> Result<Tensor> {
        let mut lin = idx[0].0.clone();
        let mut ok = idx[0].1.clone();
        for k in 1..sp {
            lin = lin.add(&idx[k].0.mul_scalar(strides[k] as i64)?)?;
            ok = ok.logical_and(&idx[k].1)?;
        }
        let v = flat_in.gather(2, &lin.unsqueeze(1)?.expand([n, c, l])?)?;
        // out of bounds reads zero (with border/reflection only bilinear's high corner can be)
        v.where_(&ok.unsqueeze(1)?, &zero)
    };
    let out = match mode {
        GridSampleMode::Bilinear => {
            let xs: Vec<Tensor> =
                coords.iter().zip(&axes).map(|(x, a)| a.pad(x, padding_mode)).collect::<Result<_>>()?;
            // per axis: the low corner, its weight (1 - frac) and the high corner's (frac)
            let mut lo = Vec::with_capacity(sp);
            let mut wts = Vec::with_capacity(sp);
            for (x, a) in xs.iter().zip(&axes) {
                let f = x.detach().floor()?;
                let frac = x.sub(&f)?;
                let hi = f.add_scalar(1.0)?;
                lo.push([int_index(&f, a.size)?, int_index(&hi, a.size)?]);
                wts.push([frac.rsub_scalar(1.0)?, frac]);
            }
            // corners in PyTorch's order: the last axis (x) fastest, e.g. nw, ne, sw, se
            let mut acc: Option<Tensor> = None;
            for corner in 0..(1usize << sp) {
                let bit = |k: usize| (corner >> k) & 1;
                let mut w: Option<Tensor> = None;
                for k in (0..sp).rev() {
                    let wk = &wts[k][bit(k)];
                    w = Some(match w {
                        None => wk.clone(),
                        Some(p) => p.mul(wk)?,
                    });
                }
                let idx: Vec<(Tensor, Tensor)> = (0..sp).map(|k| lo[k][bit(k)].clone()).collect();
                let t = fetch(&idx)?.mul(&w.expect("sp >= 2").unsqueeze(1)?)?;
                acc = Some(match acc {
                    None => t,
                    Some(a) => a.add(&t)?,
                });
            }
            acc.expect("corners")
        }
        GridSampleMode::Nearest => {
            let idx: Vec<(Tensor, Tensor)> = coords
                .iter()
                .zip(&axes)
                .map(|(x, a)| int_index(&a.pad(&x.detach(), padding_mode)?.round()?, a.size))
                .collect::<Result<_>>()?;
            fetch(&idx)?
        }
        GridSampleMode::Bicubic => {
            // 2-D only: 4 x 4 taps around floor(x), each tap coordinate padded on its own
            let mut taps = Vec::with_capacity(2);
            let mut coeff = Vec::with_capacity(2);
            for (x, a) in coords.iter().zip(&axes) {
                let f = x.detach().floor()?;
                let t = x.sub(&f)?;
                coeff.push(cubic_coeff_tensors(&t)?);
                let mut per = Vec::with_capacity(4);
                for j in 0..4 {
                    let p = a.pad(&f.add_scalar(j as f64 - 1.0)?, padding_mode)?;
                    per.push(int_index(&p.trunc()?, a.size)?);
                }
                taps.push(per);
            }
            let mut out: Option<Tensor> = None;
            for j in 0..4 {
                // interpolate along x at row j, then along y
                let mut row: Option<Tensor> = None;
                for i in 0..4 {
                    let v = fetch(&[taps[0][i].clone(), taps[1][j].clone()])?;
                    let t = coeff[0][i].unsqueeze(1)?.mul(&v)?;
                    row = Some(match row {
                        None => t,
                        Some(a) => a.add(&t)?,
                    });
                }
                let t = coeff[1][j].unsqueeze(1)?.mul(&row.expect("4 taps"))?;
                out = Some(match out {
                    None => t,
                    Some(a) => a.add(&t)?,
                });
            }
            out.expect("4 rows")
        }
    };
    out.reshape(out_shape)
}

/// The cubic convolution coefficients (A = -0.75) of the fractional offsets `t`, as
/// differentiable tensors (the grid's gradient flows through them).
fn cubic_coeff_tensors(t: &Tensor) -> Result<[Tensor; 4]> {
    let a = -0.75;
    // ((A + 2) x - (A + 3)) x x + 1, for |x| <= 1
    let c1 = |x: &Tensor| -> Result<Tensor> {
        x.mul_scalar(a + 2.0)?.sub_scalar(a + 3.0)?.mul(x)?.mul(x)?.add_scalar(1.0)
    };
    // ((A x - 5 A) x + 8 A) x - 4 A, for 1 < |x| < 2
    let c2 = |x: &Tensor| -> Result<Tensor> {
        x.mul_scalar(a)?.sub_scalar(5.0 * a)?.mul(x)?.add_scalar(8.0 * a)?.mul(x)?.sub_scalar(4.0 * a)
    };
    let one_minus = t.rsub_scalar(1.0)?;
    Ok([c2(&t.add_scalar(1.0)?)?, c1(t)?, c1(&one_minus)?, c2(&t.rsub_scalar(2.0)?)?])
}
