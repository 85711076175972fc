//! The sampling ops: `rand`, `randn`, `randint`, `normal`, `bernoulli`, `multinomial`,
//! `randperm`, the in-place `uniform_`, `normal_`, `bernoulli_`, `random_`, and the `_like`
//! forms. They draw from a [`Generator`] (the generator itself lives in [`crate::random`]);
//! autograd records the in-place fills.
//!
//! Consumption per element: 32-bit uniforms (f32, f16, bf16, random integers with a range of at
//! most 2^32) use one word, so four elements per counter; 64-bit draws (f64 uniforms, wide integer
//! ranges, bernoulli, multinomial, randperm) use two words, two elements per counter. Normals
//! come in Box-Muller pairs from the same words.
//!
//! # Calling convention
//!
//! Factories have a plain form using the global generator and a `_with` form taking an
//! `Option<&Generator>` (`None` is the global generator): [`Tensor::rand`] /
//! [`Tensor::rand_with`]. Ops with more arguments (in-place fills, `bernoulli`, `multinomial`)
//! take the `Option<&Generator>` as their last argument, like PyTorch's `generator=` keyword.

use crate::dtype::Element;
use crate::random::{block_words, default_generator, Generator};
use crate::shape::Shape;
use crate::{bail, dispatch_all, DType, Result, Tensor};

fn gen_or_default(g: Option<&Generator>) -> &Generator {
    g.unwrap_or_else(|| default_generator())
}

// ------------------------------------------------------------------------------ sampling core

/// A 32-bit word as a uniform in [0, 1) with `digits` bits (PyTorch's `uniform_real`).
#[inline(always)]
fn u32_unit(w: u32, digits: u32) -> f32 {
    (w & ((1u32 << digits) - 1)) as f32 * (1.0 / (1u32 << digits) as f32)
}

/// Two words as a 53-bit uniform in [0, 1).
#[inline(always)]
fn u53(lo: u32, hi: u32) -> f64 {
    let x = (lo as u64) | ((hi as u64) << 32);
    (x >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// Two words as a 64-bit integer.
#[inline(always)]
fn u64_of(lo: u32, hi: u32) -> u64 {
    (lo as u64) | ((hi as u64) << 32)
}

/// Uniform bits of each float dtype: its mantissa digits (as `std::numeric_limits<T>::digits`).
fn float_digits(dtype: DType) -> u32 {
    match dtype {
        DType::F16 => 11,
        DType::BF16 => 8,
        DType::F32 => 24,
        _ => 53,
    }
}

#[derive(Clone, Copy, Debug)]
enum Dist {
    /// `from + (to - from) * U[0, 1)`.
    Uniform { from: f64, to: f64 },
    /// `mean + std * N(0, 1)`.
    Normal { mean: f64, std: f64 },
    /// 1 with probability `p`.
    Bernoulli { p: f64 },
    /// An integer in `low .. low + range` (`range` up to 2^64).
    Int { low: i64, range: u128 },
}

/// Elements drawn per Philox block for `dist` into `dtype`.
fn per_block(dist: Dist, dtype: DType) -> usize {
    match dist {
        Dist::Uniform { .. } | Dist::Normal { .. } if dtype == DType::F64 => 2,
        Dist::Uniform { .. } | Dist::Normal { .. } => 4,
        Dist::Bernoulli { .. } => 2,
        Dist::Int { range, .. } if range <= 1 << 32 => 4,
        Dist::Int { .. } => 2,
    }
}

#[derive(Clone, Copy)]
struct SendPtr<T>(*mut T);
// SAFETY: the fill writes disjoint element ranges from different threads.
unsafe impl<T> Send for SendPtr<T> {}
unsafe impl<T> Sync for SendPtr<T> {}

/// Counter blocks per parallel chunk's minimum (below it, fills stay on one thread).
const BLOCK_GRAIN: usize = 8 * 1024;

/// Fills `out` so that element `i` is `f(words of block base + i / K)[i % K]`. Parallel over
/// blocks; the values do not depend on how the blocks are split.
fn fill_blocks<T: Send + Copy, const K: usize>(
    out: &mut [T],
    seed: u64,
    base: u64,
    f: impl Fn([u32; 4]) -> [T; K] + Sync,
) {
    let n = out.len();
    let nblocks = n.div_ceil(K);
    let ptr = SendPtr(out.as_mut_ptr());
    crate::threads::parallel_for(nblocks, BLOCK_GRAIN, |a, b| {
        let p = ptr;
        for blk in a..b {
            let vals = f(block_words(seed, base.wrapping_add(blk as u64)));
            let start = blk * K;
            let m = K.min(n - start);
            // SAFETY: `start + m <= n`; each block index is written by exactly one chunk.
            unsafe {
                for (j, v) in vals.iter().take(m).enumerate() {
                    *p.0.add(start + j) = *v;
                }
            }
        }
    });
}

/// Box-Muller in f32: two 24-bit uniforms make two standard normals.
#[inline(always)]
fn box_muller_f32(w0: u32, w1: u32) -> (f32, f32) {
    let u1 = ((w0 >> 8) + 1) as f32 * (1.0 / (1u32 << 24) as f32); // (0, 1]
    let u2 = (w1 >> 8) as f32 * (1.0 / (1u32 << 24) as f32);
    let r = (-2.0 * u1.ln()).sqrt();
    let (s, c) = (std::f32::consts::TAU * u2).sin_cos();
    (r * c, r * s)
}

/// Box-Muller in f64 from four words (two 53-bit uniforms).
#[inline(always)]
fn box_muller_f64(w: [u32; 4]) -> (f64, f64) {
    let u1 = ((u64_of(w[0], w[1]) >> 11) + 1) as f64 * (1.0 / (1u64 << 53) as f64); // (0, 1]
    let u2 = u53(w[2], w[3]);
    let r = (-2.0 * u1.ln()).sqrt();
    let (s, c) = (std::f64::consts::TAU * u2).sin_cos();
    (r * c, r * s)
}

/// An integer `low + floor(x * range / 2^bits)` from a `bits`-bit draw `x`.
#[inline(always)]
fn bounded(x: u64, bits: u32, low: i64, range: u128) -> i64 {
    let off = ((x as u128 * range) >> bits) as u64;
    low.wrapping_add(off as i64)
}

/// Fills a contiguous slice with samples of `dist` from blocks `base..` of stream `seed`.
fn fill_slice<T: Element>(out: &mut [T], dist: Dist, seed: u64, base: u64) {
    let dtype = T::DTYPE;
    match dist {
        Dist::Uniform { from, to } if dtype == DType::F64 => {
            let span = to - from;
            fill_blocks::<T, 2>(out, seed, base, |w| {
                [T::from_f64(u53(w[0], w[1]) * span + from), T::from_f64(u53(w[2], w[3]) * span + from)]
            })
        }
        Dist::Uniform { from, to } => {
            let digits = float_digits(dtype);
            let (from, span) = (from as f32, (to - from) as f32);
            fill_blocks::<T, 4>(out, seed, base, |w| {
                w.map(|x| T::from_f64((u32_unit(x, digits) * span + from) as f64))
            })
        }
        Dist::Normal { mean, std } if dtype == DType::F64 => fill_blocks::<T, 2>(out, seed, base, |w| {
            let (a, b) = box_muller_f64(w);
            [T::from_f64(a * std + mean), T::from_f64(b * std + mean)]
        }),
        Dist::Normal { mean, std } => {
            let (mean, std) = (mean as f32, std as f32);
            fill_blocks::<T, 4>(out, seed, base, |w| {
                let (a, b) = box_muller_f32(w[0], w[1]);
                let (c, d) = box_muller_f32(w[2], w[3]);
                [a, b, c, d].map(|z| T::from_f64((z * std + mean) as f64))
            })
        }
        Dist::Bernoulli { p } => {
            let (one, zero) = (T::from_i64(1), T::from_i64(0));
            fill_blocks::<T, 2>(out, seed, base, |w| {
                [if u53(w[0], w[1]) < p { one } else { zero }, if u53(w[2], w[3]) < p { one } else { zero }]
            })
        }
        Dist::Int { low, range } if range <= 1 << 32 => fill_blocks::<T, 4>(out, seed, base, |w| {
            w.map(|x| T::from_i64(bounded(x as u64, 32, low, range)))
        }),
        Dist::Int { low, range } => fill_blocks::<T, 2>(out, seed, base, |w| {
            [
                T::from_i64(bounded(u64_of(w[0], w[1]), 64, low, range)),
                T::from_i64(bounded(u64_of(w[2], w[3]), 64, low, range)),
            ]
        }),
    }
}

/// Fills `t` in place (any layout) with samples of `dist`; row-major element `i` gets the
/// `i`-th sample. Arguments must already be validated.
/// An in-place random fill, recorded under autograd as PyTorch records it: the new values do
/// not depend on the old ones, so the node (`NormalBackward0`, ...) passes a zero gradient back.
fn fill_inplace(t: &Tensor, node: &'static str, dist: Dist, generator: Option<&Generator>) -> Result<()> {
    crate::autograd::record::inplace_ad(
        t,
        &[],
        |s| {
            let fresh = {
                let _g = crate::autograd::no_grad();
                let f = s.detach().deep_clone()?;
                fill_tensor(&f, dist, generator)?;
                f
            };
            crate::autograd::record::record1(node, &[s], fresh, &[], |_, g| {
                Ok(vec![Some(g[0].zeros_like()?)])
            })
        },
        || fill_tensor(t, dist, generator),
    )
}

fn fill_tensor(t: &Tensor, dist: Dist, generator: Option<&Generator>) -> Result<()> {
    let n = t.numel();
    if n == 0 {
        return Ok(());
    }
    let k = per_block(dist, t.dtype());
    let (seed, base) = gen_or_default(generator).reserve(n.div_ceil(k) as u64);
    if t.device().is_cuda() {
        // The same blocks of the same generator, drawn by the device: a seed gives the CPU's
        // values (PyTorch's CUDA generator promises no particular stream).
        use crate::cuda::{Draw, DrawKind};
        let draw = match dist {
            Dist::Uniform { from, to } => {
                Draw { kind: DrawKind::Uniform, f: [from, to - from], low: 0, range: 0 }
            }
            Dist::Normal { mean, std } => Draw { kind: DrawKind::Normal, f: [mean, std], low: 0, range: 0 },
            Dist::Bernoulli { p } => Draw { kind: DrawKind::Bernoulli, f: [p, 0.0], low: 0, range: 0 },
            Dist::Int { low, range } => {
                let kind = if range <= 1 << 32 { DrawKind::Int32 } else { DrawKind::Int64 };
                Draw { kind, f: [0.0; 2], low, range }
            }
        };
        if t.is_contiguous() {
            return crate::cuda::random_fill(t, draw, seed, base);
        }
        let tmp = Tensor::zeros_on(t.shape().clone(), t.dtype(), t.device())?;
        crate::cuda::random_fill(&tmp, draw, seed, base)?;
        crate::ops::cast::convert(&tmp, t.dtype(), super::Out::Into(t), "copy_")?;
        return Ok(());
    }
    if t.is_contiguous() {
        dispatch_all!(t.dtype(), T => t.with_storage_mut::<T, _>(|buf, l| {
            fill_slice::<T>(&mut buf[l.offset()..l.offset() + n], dist, seed, base)
        })?);
    } else {
        let tmp = dispatch_all!(t.dtype(), T => Tensor::build::<T>(t.shape().clone(), |o| {
            fill_slice::<T>(o, dist, seed, base)
        })?);
        t.copy_(&tmp)?;
    }
    Ok(())
}

/// A fresh tensor of `shape` and `dtype` filled with samples of `dist`.
fn sample(shape: Shape, dtype: DType, dist: Dist, generator: Option<&Generator>) -> Result<Tensor> {
    let t = Tensor::empty(shape, dtype)?;
    fill_tensor(&t, dist, generator)?;
    Ok(t)
}

fn check_float(op: &str, dtype: DType) -> Result<()> {
    if !dtype.is_floating_point() {
        bail!(
            DType,
            "{op}: expected a floating-point dtype, got {dtype} (\"{}\" not implemented for '{}')",
            if op.contains("norm") || op.contains("randn") {
                "normal_kernel_cpu"
            } else {
                "check_uniform_bounds"
            },
            dtype.type_name()
        );
    }
    Ok(())
}

/// C++ type names PyTorch uses in "out of bounds" messages.
fn cpp_name(dtype: DType) -> &'static str {
    match dtype {
        DType::Bool => "bool",
        DType::U8 => "unsigned char",
        DType::I32 => "int",
        DType::I64 => "long",
        DType::F16 => "c10::Half",
        DType::BF16 => "c10::BFloat16",
        DType::F32 => "float",
        DType::F64 => "double",
    }
}

fn float_max(dtype: DType) -> f64 {
    match dtype {
        DType::F16 => 65504.0,
        DType::BF16 => half::bf16::MAX.to_f64(),
        DType::F32 => f32::MAX as f64,
        _ => f64::MAX,
    }
}

fn check_uniform(op: &str, from: f64, to: f64, dtype: DType) -> Result<Dist> {
    check_float(op, dtype)?;
    let max = float_max(dtype);
    if from.is_nan() || from.abs() > max {
        bail!(Value, "{op}: from is out of bounds for {} (from={from})", cpp_name(dtype));
    }
    if to.is_nan() || to.abs() > max {
        bail!(Value, "{op}: to is out of bounds for {} (to={to})", cpp_name(dtype));
    }
    if from > to {
        bail!(Value, "{op} expects to return a [from, to) range, but found from={from} > to={to}");
    }
    if to - from > max {
        bail!(
            Value,
            "{op} expects to-from <= std::numeric_limits<{}>::max(), but found to={to} and from={from} which result in to-from to exceed the limit",
            cpp_name(dtype)
        );
    }
    Ok(Dist::Uniform { from, to })
}

fn check_normal(op: &str, mean: f64, std: f64, dtype: DType) -> Result<Dist> {
    check_float(op, dtype)?;
    if std.is_nan() || std < 0.0 {
        bail!(Value, "{op}: normal expects std >= 0.0, but found std {std}");
    }
    Ok(Dist::Normal { mean, std })
}

fn check_p(op: &str, p: f64) -> Result<Dist> {
    if !(0.0..=1.0).contains(&p) {
        bail!(Value, "{op} expects p to be in [0, 1], but got p={p}");
    }
    Ok(Dist::Bernoulli { p })
}

/// The inclusive integer range a dtype can hold exactly (`[-2^digits, 2^digits]` for floats).
fn int_bounds(dtype: DType) -> (i128, i128) {
    match dtype {
        DType::Bool => (0, 1),
        DType::U8 => (0, 255),
        DType::I32 => (i32::MIN as i128, i32::MAX as i128),
        DType::I64 => (i64::MIN as i128, i64::MAX as i128),
        f => {
            let m = 1i128 << float_digits(f);
            (-m, m)
        }
    }
}

/// Integers in `[low, high]` (inclusive), checked against `dtype`.
fn check_int_range(op: &str, low: i128, high: i128, dtype: DType) -> Result<Dist> {
    let (lo, hi) = int_bounds(dtype);
    if low < lo || low > hi {
        bail!(Value, "{op}: from is out of bounds for {} (from={low})", cpp_name(dtype));
    }
    if high < lo || high > hi {
        bail!(Value, "{op}: to - 1 is out of bounds for {} (to - 1={high})", cpp_name(dtype));
    }
    Ok(Dist::Int { low: low as i64, range: (high - low + 1) as u128 })
}

fn check_randint(op: &str, low: i64, high: i64, dtype: DType) -> Result<Dist> {
    if low >= high {
        bail!(Value, "{op}: random_ expects 'from' to be less than 'to', but got from={low} >= to={high}");
    }
    check_int_range(op, low as i128, high as i128 - 1, dtype)
}

// ----------------------------------------------------------------------------------- the ops

impl Tensor {
    /// Uniform samples in `[0, 1)` (`torch.rand(shape, dtype=dtype)`); floating dtypes only.
    ///
    /// ```
    /// use pyrite_core::{DType, Tensor};
    /// let t = Tensor::rand([2, 3], DType::F32)?;
    /// assert!(t.to_vec::<f32>()?.iter().all(|&x| (0.0..1.0).contains(&x)));
    /// # Ok::<(), pyrite_core::Error>(())
    /// ```
    pub fn rand(shape: impl Into<Shape>, dtype: DType) -> Result<Tensor> {
        Tensor::rand_with(shape, dtype, None)
    }

    /// [`Tensor::rand`] drawing from `gen` (`torch.rand(shape, generator=gen)`).
    pub fn rand_with(shape: impl Into<Shape>, dtype: DType, generator: Option<&Generator>) -> Result<Tensor> {
        let d = check_uniform("rand", 0.0, 1.0, dtype)?;
        sample(shape.into(), dtype, d, generator)
    }

    /// Standard normal samples (`torch.randn(shape, dtype=dtype)`); floating dtypes only.
    ///
    /// ```
    /// use pyrite_core::{DType, Tensor};
    /// let t = Tensor::randn([10_000], DType::F64)?;
    /// let mean = t.to_vec::<f64>()?.iter().sum::<f64>() / 10_000.0;
    /// assert!(mean.abs() < 0.05);
    /// # Ok::<(), pyrite_core::Error>(())
    /// ```
    pub fn randn(shape: impl Into<Shape>, dtype: DType) -> Result<Tensor> {
        Tensor::randn_with(shape, dtype, None)
    }

    /// [`Tensor::randn`] drawing from `gen`.
    pub fn randn_with(
        shape: impl Into<Shape>,
        dtype: DType,
        generator: Option<&Generator>,
    ) -> Result<Tensor> {
        let d = check_normal("randn", 0.0, 1.0, dtype)?;
        sample(shape.into(), dtype, d, generator)
    }

    /// Integers uniform in `[low, high)` (`torch.randint(low, high, shape, dtype=dtype)`; PyTorch's
    /// default dtype is int64). Any dtype whose range holds `low` and `high - 1`.
    ///
    /// ```
    /// use pyrite_core::{DType, Tensor};
    /// let t = Tensor::randint(-2, 3, [100], DType::I64)?;
    /// assert!(t.to_vec::<i64>()?.iter().all(|&x| (-2..3).contains(&x)));
    /// # Ok::<(), pyrite_core::Error>(())
    /// ```
    pub fn randint(low: i64, high: i64, shape: impl Into<Shape>, dtype: DType) -> Result<Tensor> {
        Tensor::randint_with(low, high, shape, dtype, None)
    }

    /// [`Tensor::randint`] drawing from `gen`.
    pub fn randint_with(
        low: i64,
        high: i64,
        shape: impl Into<Shape>,
        dtype: DType,
        generator: Option<&Generator>,
    ) -> Result<Tensor> {
        let d = check_randint("randint", low, high, dtype)?;
        sample(shape.into(), dtype, d, generator)
    }

    /// Normal samples with scalar `mean` and `std` (`torch.normal(mean, std, size)`).
    pub fn normal(mean: f64, std: f64, shape: impl Into<Shape>, dtype: DType) -> Result<Tensor> {
        Tensor::normal_with(mean, std, shape, dtype, None)
    }

    /// [`Tensor::normal`] drawing from `gen`.
    pub fn normal_with(
        mean: f64,
        std: f64,
        shape: impl Into<Shape>,
        dtype: DType,
        generator: Option<&Generator>,
    ) -> Result<Tensor> {
        let d = check_normal("normal", mean, std, dtype)?;
        sample(shape.into(), dtype, d, generator)
    }

    /// Normal samples with elementwise `mean` and `std` tensors, broadcast together
    /// (`torch.normal(mean, std)`). The dtype is their promoted (floating) dtype.
    ///
    /// ```
    /// use pyrite_core::{DType, Tensor};
    /// let mean = Tensor::new([0f32, 100.0])?;
    /// let std = Tensor::new([0f32])?;
    /// let t = Tensor::normal_tensors(&mean, &std, None)?;
    /// assert_eq!(t.to_vec::<f32>()?, vec![0.0, 100.0]);
    /// # Ok::<(), pyrite_core::Error>(())
    /// ```
    pub fn normal_tensors(mean: &Tensor, std: &Tensor, generator: Option<&Generator>) -> Result<Tensor> {
        let dtype = crate::result_type(mean, std);
        check_float("normal", dtype)?;
        let shape = crate::broadcast_shapes(mean.dims(), std.dims(), "normal")?;
        if std.to_dtype(DType::F64)?.with_slice::<f64, bool>(|s| s.iter().any(|&x| x.is_nan() || x < 0.0)) {
            bail!(Value, "normal expects all elements of std >= 0.0");
        }
        let z = Tensor::randn_with(shape, dtype, generator)?;
        z.mul(std)?.add(mean)
    }

    /// Uniform samples in `[0, 1)` with this tensor's shape and dtype (`torch.rand_like`).
    pub fn rand_like(&self) -> Result<Tensor> {
        Tensor::rand(self.shape(), self.dtype())?.to_device(self.device())
    }

    /// Standard normal samples with this tensor's shape and dtype (`torch.randn_like`).
    pub fn randn_like(&self) -> Result<Tensor> {
        Tensor::randn(self.shape(), self.dtype())?.to_device(self.device())
    }

    /// Integers in `[low, high)` with this tensor's shape and dtype (`torch.randint_like`).
    pub fn randint_like(&self, low: i64, high: i64) -> Result<Tensor> {
        Tensor::randint(low, high, self.shape(), self.dtype())?.to_device(self.device())
    }

    /// A random permutation of `0..n` as int64 (`torch.randperm(n)`).
    ///
    /// ```
    /// use pyrite_core::Tensor;
    /// let mut p = Tensor::randperm(5)?.to_vec::<i64>()?;
    /// p.sort();
    /// assert_eq!(p, vec![0, 1, 2, 3, 4]);
    /// # Ok::<(), pyrite_core::Error>(())
    /// ```
    pub fn randperm(n: usize) -> Result<Tensor> {
        Tensor::randperm_with(n, None)
    }

    /// [`Tensor::randperm`] drawing from `gen` (a Fisher-Yates shuffle).
    pub fn randperm_with(n: usize, generator: Option<&Generator>) -> Result<Tensor> {
        if n as u128 > i64::MAX as u128 {
            bail!(Value, "randperm: n={n} is too large for int64");
        }
        let draws = n.saturating_sub(1);
        let mut r = crate::alloc::try_vec(draws, 0u64, "randperm")?;
        if draws > 0 {
            let (seed, base) = gen_or_default(generator).reserve(draws.div_ceil(2) as u64);
            fill_blocks::<u64, 2>(&mut r, seed, base, |w| [u64_of(w[0], w[1]), u64_of(w[2], w[3])]);
        }
        Tensor::build::<i64>(Shape::from(n), |o| {
            for (i, x) in o.iter_mut().enumerate() {
                *x = i as i64;
            }
            // Step k swaps position i = n-1-k with a uniform j in 0..=i.
            for (k, &x) in r.iter().enumerate() {
                let i = n - 1 - k;
                let j = ((x as u128 * (i as u128 + 1)) >> 64) as usize;
                o.swap(i, j);
            }
        })
    }

    /// Fills this tensor in place with uniform samples in `[from, to)`
    /// (`t.uniform_(from, to, generator=gen)`); floating dtypes only.
    ///
    /// ```
    /// use pyrite_core::{DType, Tensor};
    /// let t = Tensor::zeros([4, 4], DType::F32)?;
    /// t.uniform_(-2.0, 2.0, None)?;
    /// assert!(t.to_vec::<f32>()?.iter().all(|&x| (-2.0..2.0).contains(&x)));
    /// # Ok::<(), pyrite_core::Error>(())
    /// ```
    pub fn uniform_(&self, from: f64, to: f64, generator: Option<&Generator>) -> Result<&Tensor> {
        let d = check_uniform("uniform_", from, to, self.dtype())?;
        fill_inplace(self, "UniformBackward0", d, generator)?;
        Ok(self)
    }

    /// Fills this tensor in place with normal samples (`t.normal_(mean, std, generator=gen)`);
    /// floating dtypes only.
    pub fn normal_(&self, mean: f64, std: f64, generator: Option<&Generator>) -> Result<&Tensor> {
        let d = check_normal("normal_", mean, std, self.dtype())?;
        fill_inplace(self, "NormalBackward0", d, generator)?;
        Ok(self)
    }

    /// Fills this tensor in place with 1 (true) with probability `p`, else 0 (false)
    /// (`t.bernoulli_(p, generator=gen)`); any dtype.
    pub fn bernoulli_(&self, p: f64, generator: Option<&Generator>) -> Result<&Tensor> {
        let d = check_p("bernoulli_", p)?;
        fill_inplace(self, "BernoulliBackward2", d, generator)?;
        Ok(self)
    }

    /// Fills this tensor in place with integers uniform in `[from, to)`, or in `[from, max]`
    /// when `to` is None, where `max` is the dtype's largest value (`2^digits` for floats, as
    /// PyTorch's `t.random_(from, to)`). `t.random_()` is `random_(0, None, None)`.
    pub fn random_(&self, from: i64, to: Option<i64>, generator: Option<&Generator>) -> Result<&Tensor> {
        let d = match to {
            Some(to) => check_randint("random_", from, to, self.dtype())?,
            None => check_int_range("random_", from as i128, int_bounds(self.dtype()).1, self.dtype())?,
        };
        // PyTorch's node for random_(from, to) / random_().
        let node = if to.is_some() || from != 0 { "RandomBackward0" } else { "RandomBackward2" };
        fill_inplace(self, node, d, generator)?;
        Ok(self)
    }

    /// Draws 0 or 1 for each element with that element's probability (`torch.bernoulli(p)`):
    /// the result has this tensor's shape and (floating) dtype; probabilities must lie in
    /// `[0, 1]`.
    ///
    /// ```
    /// use pyrite_core::Tensor;
    /// let p = Tensor::new([0.0f32, 1.0, 0.0])?;
    /// assert_eq!(p.bernoulli(None)?.to_vec::<f32>()?, vec![0.0, 1.0, 0.0]);
    /// # Ok::<(), pyrite_core::Error>(())
    /// ```
    pub fn bernoulli(&self, generator: Option<&Generator>) -> Result<Tensor> {
        if !self.dtype().is_floating_point() {
            bail!(
                DType,
                "bernoulli: expected a floating-point probability tensor, got {} (\"bernoulli_tensor_cpu_p_\" not implemented for '{}')",
                self.dtype(),
                self.dtype().type_name()
            );
        }
        let p = self.to_dtype(DType::F64)?.to_vec::<f64>()?;
        if p.iter().any(|x| !(0.0..=1.0).contains(x)) {
            bail!(Value, "bernoulli: Expected p_in >= 0 && p_in <= 1 to be true, but got false (all probabilities must lie in [0, 1])");
        }
        let u = sample(self.shape().clone(), DType::F64, Dist::Uniform { from: 0.0, to: 1.0 }, generator)?;
        let u = u.to_vec::<f64>()?;
        dispatch_all!(self.dtype(), T => Tensor::build::<T>(self.shape().clone(), |o| {
            for ((o, &u), &p) in o.iter_mut().zip(&u).zip(&p) {
                *o = T::from_i64((u < p) as i64);
            }
        }))
    }

    /// Samples `num_samples` category indices per row of a 1-d or 2-d tensor of non-negative
    /// weights (`torch.multinomial(probs, num_samples, replacement, generator=gen)`); int64
    /// result of shape `[num_samples]` or `[rows, num_samples]`.
    ///
    /// Weights need not sum to one. Zero-weight categories are never drawn. Without
    /// replacement no category is drawn twice in a row, so every row needs at least
    /// `num_samples` positive weights: a row with fewer is an error. That is what PyTorch's
    /// documentation says; its CPU kernel instead fills the rest with zero-weight categories,
    /// which would break masking by zero weights (top-k sampling, excluded classes).
    ///
    /// ```
    /// use pyrite_core::Tensor;
    /// let w = Tensor::new([0.0f32, 3.0, 1.0, 0.0])?;
    /// let mut s = w.multinomial(2, false, None)?.to_vec::<i64>()?;
    /// s.sort();
    /// assert_eq!(s, vec![1, 2]);
    /// # Ok::<(), pyrite_core::Error>(())
    /// ```
    pub fn multinomial(
        &self,
        num_samples: usize,
        replacement: bool,
        generator: Option<&Generator>,
    ) -> Result<Tensor> {
        if !self.dtype().is_floating_point() {
            bail!(
                DType,
                "multinomial only supports floating-point dtypes for input, got: {}",
                self.dtype().type_name()
            );
        }
        if self.rank() != 1 && self.rank() != 2 {
            bail!(Shape, "multinomial: prob_dist must be 1 or 2 dim, got shape {}", self.shape());
        }
        if num_samples == 0 {
            bail!(Value, "multinomial: cannot sample n_sample <= 0 samples");
        }
        let ncat = self.dims()[self.rank() - 1];
        if !replacement && num_samples > ncat {
            bail!(
                Value,
                "multinomial: cannot sample n_sample > prob_dist.size(-1) samples without replacement (n_sample={num_samples}, categories={ncat})"
            );
        }
        if ncat as u64 > 1 << 24 {
            bail!(Value, "multinomial: number of categories cannot exceed 2^24, got {ncat}");
        }
        let rows = if self.rank() == 2 { self.dims()[0] } else { 1 };
        let out_shape: Shape =
            if self.rank() == 2 { Shape::from((rows, num_samples)) } else { Shape::from(num_samples) };
        if rows == 0 {
            return Tensor::zeros(out_shape, DType::I64);
        }
        // The output is allocated before any random numbers are reserved: a sample count too
        // large for memory fails here, with the generator untouched.
        let mut out = crate::alloc::CpuBuffer::for_shape(&out_shape, 8)?;
        let mut w = self.to_dtype(DType::F64)?.to_vec::<f64>()?;
        if w.iter().any(|x| !(x.is_finite() && *x >= 0.0)) {
            bail!(Value, "multinomial: probability tensor contains either `inf`, `nan` or element < 0");
        }
        for r in 0..rows {
            let row = &mut w[r * ncat..(r + 1) * ncat];
            let max = row.iter().copied().fold(0.0, f64::max);
            if max <= 0.0 {
                bail!(
                    Value,
                    "multinomial: invalid multinomial distribution (sum of probabilities <= 0) in row {r}"
                );
            }
            if !replacement {
                let nonzero = row.iter().filter(|&&x| x > 0.0).count();
                if nonzero < num_samples {
                    bail!(
                        Value,
                        "multinomial: invalid multinomial distribution (with replacement=False, not enough non-zero categories to sample): row {r} has {nonzero} non-zero probabilities but num_samples={num_samples}"
                    );
                }
            }
            // Scale each row to a largest weight of 1 so that sums cannot overflow.
            row.iter_mut().for_each(|x| *x /= max);
        }
        // One 53-bit uniform per draw; each row owns its own run of counter blocks.
        let per_row = if replacement { num_samples } else { ncat };
        let blocks_per_row = per_row.div_ceil(2);
        let (seed, base) = gen_or_default(generator).reserve((rows * blocks_per_row) as u64);
        let row_uniforms = |r: usize| {
            let mut u = vec![0f64; per_row];
            let row_base = base.wrapping_add((r * blocks_per_row) as u64);
            fill_blocks::<f64, 2>(&mut u, seed, row_base, |w| [u53(w[0], w[1]), u53(w[2], w[3])]);
            u
        };
        {
            let optr = SendPtr(out.as_mut_slice::<i64>().as_mut_ptr());
            let grain = (BLOCK_GRAIN / per_row.max(1)).max(1);
            crate::threads::parallel_for(rows, grain, |ra, rb| {
                let p = optr;
                for r in ra..rb {
                    let wr = &w[r * ncat..(r + 1) * ncat];
                    let u = row_uniforms(r);
                    // SAFETY: row r owns output elements r*num_samples .. (r+1)*num_samples.
                    let out =
                        unsafe { std::slice::from_raw_parts_mut(p.0.add(r * num_samples), num_samples) };
                    if replacement {
                        sample_with_replacement(wr, &u, out);
                    } else {
                        sample_without_replacement(wr, &u, out);
                    }
                }
            });
        }
        Ok(Tensor::from_cpu_buffer(out, out_shape, DType::I64))
    }
}

/// Inverse-CDF sampling: for each uniform, the first category whose cumulative weight exceeds
/// `u * total`. Zero-weight categories never win (their cumulative weight equals the previous).
fn sample_with_replacement(w: &[f64], u: &[f64], out: &mut [i64]) {
    let mut cdf = Vec::with_capacity(w.len());
    let mut acc = 0.0;
    for &x in w {
        acc += x;
        cdf.push(acc);
    }
    let total = acc;
    let last_positive = w.iter().rposition(|&x| x > 0.0).unwrap_or(0);
    for (o, &u) in out.iter_mut().zip(u) {
        let target = u * total;
        let i = cdf.partition_point(|&c| c <= target);
        *o = i.min(last_positive) as i64;
    }
}

/// Sampling without replacement by exponential keys (`E_i / w_i`, smallest first), which is
/// equivalent to drawing one by one proportionally to the remaining weights. Zero weights get
/// an infinite key and so are never among the first `out.len()` (the caller checked that the
/// row has that many positive weights).
fn sample_without_replacement(w: &[f64], u: &[f64], out: &mut [i64]) {
    let mut keys: Vec<(f64, usize)> = w
        .iter()
        .zip(u)
        .enumerate()
        .map(|(i, (&w, &u))| {
            let e = -(1.0 - u).ln(); // Exp(1); 1 - u lies in (0, 1]
            (if w > 0.0 { e / w } else { f64::INFINITY }, i)
        })
        .collect();
    let k = out.len();
    let cmp = |a: &(f64, usize), b: &(f64, usize)| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1));
    if k < keys.len() {
        keys.select_nth_unstable_by(k - 1, cmp);
        keys.truncate(k);
    }
    keys.sort_unstable_by(cmp);
    for (o, (_, i)) in out.iter_mut().zip(keys) {
        *o = i as i64;
    }
}
