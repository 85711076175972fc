//! Pooling: `torch.nn.functional.max_pool1d/2d/3d` (with indices), `avg_pool1d/2d/3d`,
//! `adaptive_avg_pool1d/2d/3d`, `adaptive_max_pool1d/2d/3d` and `max_unpool1d/2d/3d`, for
//! batched inputs `[N, C, *spatial]` with one to three spatial dims, f32 and f64 (f16 and bf16
//! through f32 casts).
//!
//! Every op is described by one window per output position and spatial dim (start, end, step
//! and the size its average divides by), tabulated once per call; the kernels walk the
//! `N * C` planes in parallel. Max pooling keeps the argmax of each window (an index into the
//! flattened input plane, as PyTorch returns it) for its backward pass.
//!
//! # Autograd
//!
//! The backward passes are ops of their own that record themselves, so double backward works:
//! max pooling's (and adaptive max pooling's) gradient adds the output gradient onto the
//! argmax positions, an op whose own gradient gathers at the same indices; average pooling's
//! gradient spreads the output gradient over each window, an op whose own gradient is the
//! average pooling again (it is its adjoint); the same for adaptive average pooling.
//! `max_unpool`'s gradient gathers at the indices.

use super::conv::{expand_param, float_kernel, pad3};
use super::reduce::Real;
use super::SendPtr;
use crate::alloc::CpuBuffer;
use crate::autograd::record::{needs_grad, record1};
use crate::shape::Shape;
use crate::{bail, DType, Element, Result, Tensor};

/// Elements of work per thread below which pooling stays on one thread.
const GRAIN: usize = 16 * 1024;
/// Largest kernel, stride, padding or dilation accepted (keeps index arithmetic in range).
const MAX_PARAM: usize = 1 << 40;

/// The window of one output position along one dim: input positions `lo..hi` by `step`, and
/// the count an average divides by along this dim.
#[derive(Clone, Copy, Debug)]
struct Win {
    lo: usize,
    hi: usize,
    /// Window length including padding (avg_pool with count_include_pad).
    padded: usize,
}

/// How windows are placed.
#[derive(Clone, Copy, Debug)]
enum Kind {
    /// Max pooling: windows of `k` taps `d` apart.
    Max,
    /// Average pooling; divides by the padded window (`count_include_pad`), the valid part,
    /// or `divisor_override`.
    Avg { count_include_pad: bool, divisor: Option<usize> },
    /// Adaptive pooling: `floor(o * in / out) .. ceil((o + 1) * in / out)`.
    Adaptive,
}

/// The geometry of one pooling op, padded to three spatial dims (real dims last).
#[derive(Clone, Copy, Debug)]
struct PoolGeo {
    nd: usize,
    n: usize,
    c: usize,
    inp: [usize; 3],
    out: [usize; 3],
    k: [usize; 3],
    s: [usize; 3],
    p: [usize; 3],
    d: [usize; 3],
    kind: Kind,
}

impl PoolGeo {
    fn planes(&self) -> usize {
        self.n * self.c
    }
    fn l_in(&self) -> usize {
        self.inp.iter().product()
    }
    fn l_out(&self) -> usize {
        self.out.iter().product()
    }
    /// Elements read per plane, about (window size times outputs; saturating).
    fn work(&self) -> usize {
        let win = (0..3).fold(1usize, |a, i| a.saturating_mul(self.k[i].min(self.inp[i]).max(1)));
        win.saturating_mul(self.l_out())
    }
    fn step(&self, dim: usize) -> usize {
        if matches!(self.kind, Kind::Max) {
            self.d[dim]
        } else {
            1
        }
    }
    /// The window of output position `o` along dim `dim` (of three).
    fn win(&self, dim: usize, o: usize) -> Win {
        let (i, k, s, p, d) = (self.inp[dim], self.k[dim], self.s[dim], self.p[dim], self.d[dim]);
        match self.kind {
            Kind::Max => {
                let start = (o * s) as i64 - p as i64;
                let end = (start + ((k - 1) * d) as i64 + 1).min(i as i64);
                // the first tap inside the input: start + ceil(-start / d) * d
                let lo = if start < 0 {
                    start + ((-start) as u64).div_ceil(d as u64) as i64 * d as i64
                } else {
                    start
                };
                let hi = end.max(lo);
                Win { lo: lo as usize, hi: hi as usize, padded: 0 }
            }
            Kind::Avg { .. } => {
                let start = (o * s) as i64 - p as i64;
                let end = (start + k as i64).min((i + p) as i64);
                let padded = (end - start) as usize;
                let lo = start.max(0);
                let hi = end.min(i as i64).max(lo);
                Win { lo: lo as usize, hi: hi as usize, padded }
            }
            Kind::Adaptive => {
                // in u128: `o * i` of a huge output size and input size would wrap
                let (n, o, i) = (self.out[dim] as u128, o as u128, i as u128);
                let lo = (o * i / n) as usize;
                let hi = ((o + 1) * i).div_ceil(n) as usize;
                Win { lo, hi, padded: hi - lo }
            }
        }
    }
    /// The geometry as the CUDA kernels take it: the windows tabulated.
    fn on_cuda(&self) -> Result<crate::cuda::PoolShape> {
        let mut windows = Vec::new();
        for t in self.tables()? {
            windows.extend(t.iter().flat_map(|w| [w.lo as i64, w.hi as i64, w.padded as i64]));
        }
        let (div_mode, divisor) = match self.kind {
            Kind::Avg { divisor: Some(d), .. } => (2, d as i64),
            Kind::Avg { count_include_pad: true, .. } | Kind::Adaptive => (1, 0),
            _ => (0, 0),
        };
        Ok(crate::cuda::PoolShape {
            inp: self.inp,
            out: self.out,
            step: [self.step(0), self.step(1), self.step(2)],
            windows,
            div_mode,
            divisor,
        })
    }

    /// Every window, per dim.
    /// Empty when there is no output (a table sized by a huge output dim of an empty result
    /// is never built); allocated fallibly otherwise.
    fn tables(&self) -> Result<[Vec<Win>; 3]> {
        let empty = self.planes() == 0 || self.out.contains(&0);
        let mut t: [Vec<Win>; 3] = Default::default();
        for (dim, v) in t.iter_mut().enumerate() {
            if !empty {
                *v = crate::alloc::try_with_capacity(self.out[dim], "pooling")?;
                v.extend((0..self.out[dim]).map(|o| self.win(dim, o)));
            }
        }
        Ok(t)
    }
}

/// PyTorch's `pooling_output_shape`: floor (or ceil) division, and with `ceil_mode` the last
/// window must start inside the input or the left padding.
fn pool_out_size(i: usize, k: usize, p: usize, s: usize, d: usize, ceil: bool) -> i128 {
    let (i, k, p, s, d) = (i as i128, k as i128, p as i128, s as i128, d as i128);
    let num = i + 2 * p - d * (k - 1) - 1 + if ceil { s - 1 } else { 0 };
    let mut o = num.div_euclid(s) + 1;
    if ceil && (o - 1) * s >= i + p {
        o -= 1;
    }
    o
}

fn pool_name(base: &str, nd: usize) -> String {
    format!("{base}{nd}d")
}

/// Rank and dtype checks shared by the pooling ops; returns the number of spatial dims.
fn check_input(input: &Tensor, nd: Option<usize>, op: &str) -> Result<usize> {
    let nd = match nd {
        Some(nd) => nd,
        None => {
            let r = input.rank();
            if !(3..=5).contains(&r) {
                bail!(
                    Shape,
                    "{op}: expected a 3-, 4- or 5-dimensional input [N, C, *spatial] (batched, 1 to 3 spatial dims), but got input of size {}",
                    input.shape()
                );
            }
            r - 2
        }
    };
    if input.rank() != nd + 2 {
        bail!(
            Shape,
            "{}: Expected {}D (batch mode) tensor with optional 0 dim batch size for input, but got: {} (Pyrite takes batched input only: unsqueeze(0) an unbatched one)",
            pool_name(op, nd),
            nd + 2,
            input.shape()
        );
    }
    if !input.dtype().is_floating_point() {
        bail!(
            NotImplemented,
            "\"{}\" not implemented for '{}' (Pyrite's pooling takes float tensors)",
            pool_name(op, nd),
            input.dtype().type_name()
        );
    }
    Ok(nd)
}

/// Fails unless every non-batch dim has elements.
fn check_non_empty(input: &Tensor, op: &str, adaptive: bool) -> Result<()> {
    if let Some(d) = (1..input.rank()).find(|&d| input.dims()[d] == 0) {
        if adaptive {
            bail!(
                Shape,
                "{op}(): Expected input to have non-zero size for non-batch dimensions, but input has sizes {} with dimension {d} being empty",
                input.shape()
            );
        }
        bail!(
            Shape,
            "{op}: Expected {}D (batch mode) tensor with optional 0 dim batch size for input, but got: {}",
            input.rank(),
            input.shape()
        );
    }
    Ok(())
}

/// Validates kernel/stride/padding/dilation of a windowed pooling op and returns its geometry.
#[allow(clippy::too_many_arguments)]
fn check_windows(
    input: &Tensor,
    nd: usize,
    op: &str,
    kernel: &[usize],
    stride: &[usize],
    padding: &[usize],
    dilation: &[usize],
    ceil_mode: bool,
    kind: Kind,
) -> Result<PoolGeo> {
    let k = expand_param("kernel_size", kernel, nd)?;
    let s = if stride.is_empty() { k.clone() } else { expand_param("stride", stride, nd)? };
    let p = expand_param("padding", padding, nd)?;
    let d = expand_param("dilation", dilation, nd)?;
    if k.contains(&0) {
        bail!(Value, "{op}: kernel_size should be greater than zero, but got kernel_size={k:?}");
    }
    if s.contains(&0) {
        bail!(Value, "stride should not be zero");
    }
    if d.contains(&0) {
        bail!(Value, "dilation should be greater than zero, but got dilation={d:?}");
    }
    for (name, v) in [("kernel_size", &k), ("stride", &s), ("padding", &p), ("dilation", &d)] {
        if v.iter().any(|&x| x > MAX_PARAM) {
            bail!(Value, "{op}: {name}={v:?} is too large");
        }
    }
    check_non_empty(input, op, false)?;
    for i in 0..nd {
        let eff = (k[i] - 1) * d[i] + 1;
        if matches!(kind, Kind::Max) && p[i] > eff / 2 {
            bail!(
                    Value,
                    "pad should be at most half of effective kernel size, but got pad={}, kernel_size={} and dilation={}",
                    p[i],
                    k[i],
                    d[i]
                );
        }
        if p[i] > k[i] / 2 {
            bail!(
                Value,
                "pad should be smaller than or equal to half of kernel size, but got pad={}, kernel_size={}",
                p[i],
                k[i]
            );
        }
    }
    let sp = &input.dims()[2..];
    let outs: Vec<i128> = (0..nd).map(|i| pool_out_size(sp[i], k[i], p[i], s[i], d[i], ceil_mode)).collect();
    if outs.iter().any(|&o| o < 1) {
        let c = input.dims()[1];
        let ins: Vec<String> = std::iter::once(c).chain(sp.iter().copied()).map(|v| v.to_string()).collect();
        let os: Vec<String> =
            std::iter::once(c as i128).chain(outs.iter().copied()).map(|v| v.to_string()).collect();
        bail!(
            Shape,
            "Given input size: ({}). Calculated output size: ({}). Output size is too small",
            ins.join("x"),
            os.join("x")
        );
    }
    let out: Vec<usize> = outs.iter().map(|&o| o as usize).collect();
    Ok(PoolGeo {
        nd,
        n: input.dims()[0],
        c: input.dims()[1],
        inp: pad3(sp, 1),
        out: pad3(&out, 1),
        k: pad3(&k, 1),
        s: pad3(&s, 1),
        p: pad3(&p, 0),
        d: pad3(&d, 1),
        kind,
    })
}

fn shape_nc(g: &PoolGeo, sp: &[usize; 3]) -> Shape {
    let mut v = vec![g.n, g.c];
    v.extend_from_slice(&sp[3 - g.nd..]);
    Shape::from(v)
}

fn contig(t: &Tensor) -> Result<Tensor> {
    if t.is_contiguous() {
        Ok(t.clone())
    } else {
        let _g = crate::autograd::no_grad();
        t.contiguous()
    }
}

/// Runs `f(plane)` for every plane, in parallel when the work is large.
fn over_planes(planes: usize, work_per_plane: usize, f: impl Fn(usize) + Sync) {
    over_plane_ranges(planes, work_per_plane, |a, b| (a..b).for_each(&f));
}

/// Runs `f(first, end)` over ranges of planes, in parallel when the work is large.
fn over_plane_ranges(planes: usize, work_per_plane: usize, f: impl Fn(usize, usize) + Sync) {
    let grain = GRAIN.div_ceil(work_per_plane.max(1)).max(1);
    crate::threads::parallel_for(planes, grain, f);
}

/// Pointer to the first element of a contiguous tensor, under its read lock.
fn with_read<T: Element, R>(t: &Tensor, f: impl FnOnce(SendPtr<T>) -> R) -> R {
    debug_assert!(t.is_contiguous());
    if t.numel() == 0 {
        return f(SendPtr(std::ptr::NonNull::<T>::dangling().as_ptr()));
    }
    let g = t.storage().read();
    // SAFETY: a contiguous non-empty layout lies inside its storage.
    let p = unsafe { (g.cpu().as_ptr() as *mut T).add(t.storage_offset()) };
    f(SendPtr(p))
}

/// A float with a branch-free select (max pooling's comparisons are unpredictable).
trait Select: Real + Element {
    /// `a` where `mask` is all ones, `b` where it is zero.
    fn select(mask: usize, a: Self, b: Self) -> Self;
}

impl Select for f32 {
    #[inline(always)]
    fn select(mask: usize, a: f32, b: f32) -> f32 {
        let m = mask as u32;
        f32::from_bits((a.to_bits() & m) | (b.to_bits() & !m))
    }
}

impl Select for f64 {
    #[inline(always)]
    fn select(mask: usize, a: f64, b: f64) -> f64 {
        let m = mask as u64;
        f64::from_bits((a.to_bits() & m) | (b.to_bits() & !m))
    }
}

/// Max over each window: values and flat argmax indices (NaN wins, the first maximum
/// otherwise, as in PyTorch's CPU kernel).
#[allow(clippy::needless_range_loop)] // oz and oy also address the output rows
/// Whether a max pool is the 2-d 2x2 window with stride 2, no padding and no dilation.
fn is_2x2(g: &PoolGeo) -> bool {
    let ([_, ih, iw], [od, oh, ow]) = (g.inp, g.out);
    matches!(g.kind, Kind::Max)
        && g.k == [1, 2, 2]
        && g.s == [1, 2, 2]
        && g.p == [0; 3]
        && g.d == [1; 3]
        && od == 1
        && 2 * oh <= ih
        && 2 * ow <= iw
}

/// Max pooling of one plane (`iw` columns) with 2x2 windows and stride 2: the values and flat
/// indices of `oh x ow` outputs. Each window's taps are taken in PyTorch's order, a later tap
/// winning when greater or NaN; the selects are branch-free, and the columns of a row are
/// independent, so the loop vectorizes. (bf16 pools through f32: a bf16 version of this
/// kernel, measured, was slower than the two vectorized casts around the f32 one.)
fn max_2x2<T: Select>(src: &[T], vals: &mut [T], idx: &mut [i64], iw: usize, oh: usize, ow: usize) {
    for oy in 0..oh {
        let (r0, r1) = (2 * oy * iw, (2 * oy + 1) * iw);
        let (a, b) = (&src[r0..r0 + 2 * ow], &src[r1..r1 + 2 * ow]);
        let (v, ix) = (&mut vals[oy * ow..(oy + 1) * ow], &mut idx[oy * ow..(oy + 1) * ow]);
        for ox in 0..ow {
            let c = 2 * ox;
            let (mut m, mut i) = (a[c], (r0 + c) as i64);
            for (t, at) in [(a[c + 1], r0 + c + 1), (b[c], r1 + c), (b[c + 1], r1 + c + 1)] {
                let take = (t > m) | t.is_nan_();
                m = if take { t } else { m };
                i = if take { at as i64 } else { i };
            }
            v[ox] = m;
            ix[ox] = i;
        }
    }
}

fn max_kernel<T: Select>(x: &Tensor, g: &PoolGeo) -> Result<(Tensor, Tensor)> {
    let shape = shape_nc(g, &g.out);
    let mut vb = CpuBuffer::for_shape(&shape, std::mem::size_of::<T>())?;
    let mut ib = CpuBuffer::for_shape(&shape, 8)?;
    if shape.numel() == 0 {
        return Ok((
            Tensor::from_cpu_buffer(vb, shape.clone(), T::DTYPE),
            Tensor::from_cpu_buffer(ib, shape, DType::I64),
        ));
    }
    let (vp, ip) = (SendPtr(vb.as_mut_ptr() as *mut T), SendPtr(ib.as_mut_ptr() as *mut i64));
    let [tz, ty, tx] = g.tables()?;
    let (li, lo) = (g.l_in(), g.l_out());
    let [_, ih, iw] = g.inp;
    let (sz, sy) = (g.step(0), g.step(1));
    let fixed = matches!(g.kind, Kind::Max);
    let (sx, dx, px) = (g.s[2], g.d[2], g.p[2]);
    let [_, oh, ow] = g.out;
    // Per kernel tap along x: the output columns whose input column is inside the input.
    let mut xr: Vec<(usize, usize)> = crate::alloc::try_with_capacity(g.k[2], "max_pool")?;
    xr.extend((0..g.k[2]).map(|e| super::conv::valid_range(ow, iw, g.s[2], e * g.d[2], g.p[2])));
    // The common 2x2 window with stride 2 (no padding, no dilation) of a 2-d pool.
    let two_by_two = is_2x2(g);
    with_read::<T, _>(x, |xp| {
        over_plane_ranges(g.planes(), g.work(), |p0, p1| {
            let (xp, vp, ip) = (xp, vp, ip);
            let mut best = vec![T::NEG_INF; ow];
            let mut at = vec![0usize; ow];
            for pl in p0..p1 {
                // SAFETY: plane `pl` of the input and outputs, within their checked sizes.
                let (src, vals, idx) = unsafe {
                    (
                        std::slice::from_raw_parts(xp.0.add(pl * li), li),
                        std::slice::from_raw_parts_mut(vp.0.add(pl * lo), lo),
                        std::slice::from_raw_parts_mut(ip.0.add(pl * lo), lo),
                    )
                };
                if two_by_two {
                    max_2x2(src, vals, idx, iw, oh, ow);
                    continue;
                }
                if fixed {
                    // Kernel taps outermost, a row of outputs innermost: the outputs of a row
                    // are independent, so their compare-and-select chains overlap (one window
                    // at a time is a chain of unpredictable comparisons). Each output still
                    // sees its window's taps in PyTorch's order.
                    for (oz, &wz) in tz.iter().enumerate() {
                        for (oy, &wy) in ty.iter().enumerate() {
                            best.fill(T::NEG_INF);
                            for (a, w) in at.iter_mut().zip(&tx) {
                                *a = (wz.lo * ih + wy.lo) * iw + w.lo;
                            }
                            let mut z = wz.lo;
                            while z < wz.hi {
                                let mut y = wy.lo;
                                while y < wy.hi {
                                    let row = (z * ih + y) * iw;
                                    for (e, &(x0, x1)) in xr.iter().enumerate() {
                                        if x0 >= x1 {
                                            continue;
                                        }
                                        let base = row + e * dx + x0 * sx - px;
                                        let r = &src[base..base + (x1 - x0 - 1) * sx + 1];
                                        let lanes = best[x0..x1].iter_mut().zip(&mut at[x0..x1]);
                                        for (j, (b, a)) in lanes.enumerate() {
                                            let v = r[j * sx];
                                            // The mask goes through `black_box` so that LLVM
                                            // cannot turn the bit select back into a branch
                                            // (it did: 2.4x slower on random data).
                                            let m = std::hint::black_box(((v > *b) | v.is_nan_()) as usize)
                                                .wrapping_neg();
                                            *b = T::select(m, v, *b);
                                            *a = ((base + j * sx) & m) | (*a & !m);
                                        }
                                    }
                                    y += sy;
                                }
                                z += sz;
                            }
                            let o = (oz * oh + oy) * ow;
                            vals[o..o + ow].copy_from_slice(&best);
                            for (d, &a) in idx[o..o + ow].iter_mut().zip(&at) {
                                *d = a as i64;
                            }
                        }
                    }
                    continue;
                }
                let mut o = 0;
                for wz in &tz {
                    for wy in &ty {
                        for wx in &tx {
                            let mut best = T::NEG_INF;
                            let mut at = (wz.lo * ih + wy.lo) * iw + wx.lo;
                            for z in wz.lo..wz.hi {
                                for y in wy.lo..wy.hi {
                                    let row = (z * ih + y) * iw;
                                    for xx in wx.lo..wx.hi {
                                        let v = src[row + xx];
                                        let take = (v > best) | v.is_nan_();
                                        best = if take { v } else { best };
                                        at = if take { row + xx } else { at };
                                    }
                                }
                            }
                            vals[o] = best;
                            idx[o] = at as i64;
                            o += 1;
                        }
                    }
                }
            }
        });
    });
    Ok((Tensor::from_cpu_buffer(vb, shape.clone(), T::DTYPE), Tensor::from_cpu_buffer(ib, shape, DType::I64)))
}

/// Average over each window (zero for a window with no input position).
fn avg_kernel<T: Real + Element>(x: &Tensor, g: &PoolGeo) -> Result<Tensor> {
    let shape = shape_nc(g, &g.out);
    let mut buf = CpuBuffer::for_shape(&shape, std::mem::size_of::<T>())?;
    let yp = SendPtr(buf.as_mut_ptr() as *mut T);
    let [tz, ty, tx] = g.tables()?;
    let (li, lo) = (g.l_in(), g.l_out());
    let [_, ih, iw] = g.inp;
    let kind = g.kind;
    with_read::<T, _>(x, |xp| {
        over_planes(g.planes(), g.work(), |pl| {
            let (xp, yp) = (xp, yp);
            // SAFETY: plane `pl` of the input and output.
            let (src, dst) = unsafe {
                (
                    std::slice::from_raw_parts(xp.0.add(pl * li), li),
                    std::slice::from_raw_parts_mut(yp.0.add(pl * lo), lo),
                )
            };
            let mut o = 0;
            for wz in &tz {
                for wy in &ty {
                    for wx in &tx {
                        let mut sum = T::ZERO;
                        for z in wz.lo..wz.hi {
                            for y in wy.lo..wy.hi {
                                let row = (z * ih + y) * iw;
                                for v in &src[row + wx.lo..row + wx.hi] {
                                    sum = sum + *v;
                                }
                            }
                        }
                        dst[o] = if wz.lo >= wz.hi || wy.lo >= wy.hi || wx.lo >= wx.hi {
                            T::ZERO
                        } else {
                            sum / divisor::<T>(kind, wz, wy, wx)
                        };
                        o += 1;
                    }
                }
            }
        });
    });
    Ok(Tensor::from_cpu_buffer(buf, shape, T::DTYPE))
}

/// What a window's sum is divided by.
#[inline]
fn divisor<T: Real>(kind: Kind, wz: &Win, wy: &Win, wx: &Win) -> T {
    let n = match kind {
        Kind::Avg { divisor: Some(d), .. } => d,
        Kind::Avg { count_include_pad: true, .. } => wz.padded * wy.padded * wx.padded,
        _ => (wz.hi - wz.lo) * (wy.hi - wy.lo) * (wx.hi - wx.lo),
    };
    T::from_f64(n as f64)
}

/// The adjoint of [`avg_kernel`]: each output gradient spread evenly over its window.
fn avg_backward_kernel<T: Real + Element>(gy: &Tensor, g: &PoolGeo) -> Result<Tensor> {
    let shape = shape_nc(g, &g.inp);
    let mut buf = CpuBuffer::for_shape(&shape, std::mem::size_of::<T>())?;
    let xp = SendPtr(buf.as_mut_ptr() as *mut T);
    let [tz, ty, tx] = g.tables()?;
    let (li, lo) = (g.l_in(), g.l_out());
    let [_, ih, iw] = g.inp;
    let kind = g.kind;
    with_read::<T, _>(gy, |yp| {
        over_planes(g.planes(), g.work().saturating_add(li), |pl| {
            let (xp, yp) = (xp, yp);
            // SAFETY: plane `pl` of the gradient and the result.
            let (src, dst) = unsafe {
                (
                    std::slice::from_raw_parts(yp.0.add(pl * lo), lo),
                    std::slice::from_raw_parts_mut(xp.0.add(pl * li), li),
                )
            };
            dst.fill(T::ZERO);
            let mut o = 0;
            for wz in &tz {
                for wy in &ty {
                    for wx in &tx {
                        if wz.lo < wz.hi && wy.lo < wy.hi && wx.lo < wx.hi {
                            let v = src[o] / divisor::<T>(kind, wz, wy, wx);
                            for z in wz.lo..wz.hi {
                                for y in wy.lo..wy.hi {
                                    let row = (z * ih + y) * iw;
                                    for d in &mut dst[row + wx.lo..row + wx.hi] {
                                        *d = *d + v;
                                    }
                                }
                            }
                        }
                        o += 1;
                    }
                }
            }
        });
    });
    Ok(Tensor::from_cpu_buffer(buf, shape, T::DTYPE))
}

/// Places `src` (`[N, C, *small]`) at flat `indices` of planes of `big` spatial sizes, zeros
/// elsewhere: added (`accumulate`, max pooling's backward) or written (`max_unpool`, where
/// the last write wins). An index outside the plane is PyTorch's "invalid max index" error.
fn scatter_kernel<T: Real + Element>(
    src: &Tensor,
    idx: &Tensor,
    nd: usize,
    big: &[usize; 3],
    accumulate: bool,
) -> Result<Tensor> {
    let (n, c) = (src.dims()[0], src.dims()[1]);
    let mut v = vec![n, c];
    v.extend_from_slice(&big[3 - nd..]);
    let shape = Shape::from(v);
    let li: usize = big.iter().product();
    let lo: usize = src.dims()[2..].iter().product();
    let mut buf = CpuBuffer::for_shape(&shape, std::mem::size_of::<T>())?;
    let xp = SendPtr(buf.as_mut_ptr() as *mut T);
    let bad = std::sync::atomic::AtomicI64::new(-1);
    let has_bad = std::sync::atomic::AtomicBool::new(false);
    if n * c * li > 0 {
        let (_g, _, [sb, ib]) = super::lock_all(None, [&**src.storage(), &**idx.storage()]);
        // SAFETY: contiguous non-empty layouts lie inside their storages (an empty source has
        // nothing to read: its planes have no elements).
        let (sp, ip) = if lo == 0 {
            (
                SendPtr(std::ptr::NonNull::<T>::dangling().as_ptr()),
                SendPtr(std::ptr::NonNull::<i64>::dangling().as_ptr()),
            )
        } else {
            unsafe {
                (
                    SendPtr((sb as *mut T).add(src.storage_offset())),
                    SendPtr((ib as *mut i64).add(idx.storage_offset())),
                )
            }
        };
        over_planes(n * c, lo + li, |pl| {
            let (xp, sp, ip) = (xp, sp, ip);
            // SAFETY: plane `pl` of the inputs (same shape) and of the result.
            let (s, ix, dst) = unsafe {
                (
                    std::slice::from_raw_parts(sp.0.add(pl * lo), lo),
                    std::slice::from_raw_parts(ip.0.add(pl * lo), lo),
                    std::slice::from_raw_parts_mut(xp.0.add(pl * li), li),
                )
            };
            dst.fill(T::ZERO);
            for (&v, &i) in s.iter().zip(ix) {
                if i < 0 || i as u64 >= li as u64 {
                    if !has_bad.swap(true, std::sync::atomic::Ordering::Relaxed) {
                        bad.store(i, std::sync::atomic::Ordering::Relaxed);
                    }
                    continue;
                }
                let d = &mut dst[i as usize];
                *d = if accumulate { *d + v } else { v };
            }
        });
    }
    if has_bad.load(std::sync::atomic::Ordering::Relaxed) {
        let sizes: Vec<String> = big[3 - nd..].iter().map(|v| v.to_string()).collect();
        bail!(
            Index,
            "Found an invalid max index: {} (output volumes are of size {})",
            bad.load(std::sync::atomic::Ordering::Relaxed),
            sizes.join("x")
        );
    }
    Ok(Tensor::from_cpu_buffer(buf, shape, T::DTYPE))
}

/// `src` gathered at flat `indices` of its planes: `[N, C, *indices spatial]` (recorded:
/// flatten and gather).
fn gather_at(src: &Tensor, indices: &Tensor) -> Result<Tensor> {
    let f = src.flatten(2, -1)?;
    let i = indices.flatten(2, -1)?;
    f.gather(2, &i)?.view(indices.dims().to_vec())
}

/// Adds `g` onto flat `indices` of planes of `big` spatial sizes (max pooling's backward),
/// recorded as `name` with the gather at the same indices as its own gradient.
fn scatter_add_at(g: &Tensor, indices: &Tensor, nd: usize, big: [usize; 3], name: String) -> Result<Tensor> {
    let gc = contig(g)?;
    let ic = contig(indices)?;
    let r = if gc.device().is_cuda() {
        // The indexing kernels' scatter_add over the flattened planes.
        let mut dims = gc.dims()[..2].to_vec();
        dims.push(big.iter().product());
        let flat = Tensor::zeros_on(dims, gc.dtype(), gc.device())?;
        let src = gc.flatten(2, -1)?;
        let _ng = crate::autograd::no_grad();
        let r = flat.scatter_add(2, &ic.flatten(2, -1)?, &src)?;
        let mut shape = gc.dims()[..2].to_vec();
        shape.extend_from_slice(&big[3 - nd..]);
        r.reshape(shape)?
    } else {
        float_kernel!(g.dtype(), T => scatter_kernel::<T>(&gc, &ic, nd, &big, true))?
    };
    if !needs_grad(&[g]) {
        return Ok(r);
    }
    record1(name, &[g], r, &[], move |_, gg| Ok(vec![Some(gather_at(&gg[0], &ic)?)]))
}

/// f16/bf16 through f32 (the casts are recorded); `None` for f32/f64.
fn via_f32<R>(x: &Tensor, f: impl FnOnce(&Tensor) -> Result<R>) -> Result<Option<R>> {
    // The CUDA kernels take the half types as they are (computing in f32).
    if matches!(x.dtype(), DType::F16 | DType::BF16) && !x.device().is_cuda() {
        return Ok(Some(f(&x.to_dtype(DType::F32)?)?));
    }
    Ok(None)
}

/// The profiler's name of a pooling op on a `nd`-d input (PyTorch's aten op names).
fn prof_name(kind: &str, input: &Tensor, nd: Option<usize>) -> &'static str {
    let nd = nd.unwrap_or(input.rank().saturating_sub(2)).clamp(1, 3);
    match (kind, nd) {
        ("max", 1) => "aten::max_pool1d_with_indices",
        ("max", 2) => "aten::max_pool2d_with_indices",
        ("max", _) => "aten::max_pool3d_with_indices",
        ("avg", 1) => "aten::avg_pool1d",
        ("avg", 2) => "aten::avg_pool2d",
        ("avg", _) => "aten::avg_pool3d",
        ("aavg", 1) => "aten::adaptive_avg_pool1d",
        ("aavg", 2) => "aten::adaptive_avg_pool2d",
        ("aavg", _) => "aten::adaptive_avg_pool3d",
        (_, 1) => "aten::adaptive_max_pool1d",
        (_, 2) => "aten::adaptive_max_pool2d",
        _ => "aten::adaptive_max_pool3d",
    }
}

// ------------------------------------------------------------------------------------------
// Max pooling

fn max_pool_nd(
    input: &Tensor,
    kernel_size: &[usize],
    stride: &[usize],
    padding: &[usize],
    dilation: &[usize],
    ceil_mode: bool,
    nd: Option<usize>,
) -> Result<(Tensor, Tensor)> {
    let _prof = crate::profiler_record::op(prof_name("max", input, nd), &[input]);
    let nd = check_input(input, nd, "max_pool")?;
    if nd == 3
        && let Some(r) = crate::autocast::dispatch("max_pool3d", &[Some(input)], |t| {
            max_pool_nd(t.at(0), kernel_size, stride, padding, dilation, ceil_mode, Some(3))
        })
    {
        return r;
    }
    let op = pool_name("max_pool", nd);
    let g = check_windows(input, nd, &op, kernel_size, stride, padding, dilation, ceil_mode, Kind::Max)?;
    let dt = input.dtype();
    if let Some((v, i)) = via_f32(input, |x| max_pool_core(x, &g))? {
        return Ok((v.to_dtype(dt)?, i));
    }
    max_pool_core(input, &g)
}

/// Max pooling (or adaptive max pooling) on f32/f64, recorded.
fn max_pool_core(input: &Tensor, g: &PoolGeo) -> Result<(Tensor, Tensor)> {
    let xc = contig(input)?;
    let (v, i) = if xc.device().is_cuda() {
        let (v, i) = crate::cuda::pool(&xc, &g.on_cuda()?, &shape_nc(g, &g.out), true)?;
        (v, i.expect("max pooling's indices"))
    } else {
        float_kernel!(input.dtype(), T => max_kernel::<T>(&xc, g))?
    };
    if !needs_grad(&[input]) {
        return Ok((v, i));
    }
    let (nd, big) = (g.nd, g.inp);
    let (name, back) = match g.kind {
        Kind::Adaptive => {
            (format!("AdaptiveMaxPool{nd}DBackward0"), format!("AdaptiveMaxPool{nd}DBackwardBackward0"))
        }
        _ => {
            (format!("MaxPool{nd}DWithIndicesBackward0"), format!("MaxPool{nd}DWithIndicesBackwardBackward0"))
        }
    };
    let ic = i.clone();
    let v = record1(name, &[input], v, &[], move |_, gr| {
        Ok(vec![Some(scatter_add_at(&gr[0], &ic, nd, big, back.clone())?)])
    })?;
    Ok((v, i))
}

/// `torch.nn.functional.max_pool1d/2d/3d(input, kernel_size, stride, padding, dilation,
/// ceil_mode, return_indices=True)` for batched `input: [N, C, *spatial]` (one to three
/// spatial dims, from its rank): the maximum of each window and its flat index into the
/// input plane (int64; NaN counts as the maximum). `stride` empty means the kernel size;
/// every argument holds one value per spatial dim or one for all. Padding may be at most half
/// the effective kernel; with `ceil_mode` the output rounds up, but the last window must start
/// inside the input or the left padding. Recorded as `MaxPool{1,2,3}DWithIndicesBackward0`.
///
/// ```
/// use pyrite_core::ops::pool::max_pool;
/// use pyrite_core::Tensor;
/// let x = Tensor::new([[[[1f32, 2., 3., 4.], [5., 6., 7., 8.]]]])?;
/// let (v, i) = max_pool(&x, &[2], &[], &[0], &[1], false)?;
/// assert_eq!(v.to_vec::<f32>()?, vec![6., 8.]);
/// assert_eq!(i.to_vec::<i64>()?, vec![5, 7]);
/// # Ok::<(), pyrite_core::Error>(())
/// ```
pub fn max_pool(
    input: &Tensor,
    kernel_size: &[usize],
    stride: &[usize],
    padding: &[usize],
    dilation: &[usize],
    ceil_mode: bool,
) -> Result<(Tensor, Tensor)> {
    max_pool_nd(input, kernel_size, stride, padding, dilation, ceil_mode, None)
}

// ------------------------------------------------------------------------------------------
// Average pooling

fn avg_pool_nd(
    input: &Tensor,
    kernel_size: &[usize],
    stride: &[usize],
    padding: &[usize],
    ceil_mode: bool,
    count_include_pad: bool,
    divisor_override: Option<usize>,
    nd: Option<usize>,
) -> Result<Tensor> {
    let _prof = crate::profiler_record::op(prof_name("avg", input, nd), &[input]);
    let nd = check_input(input, nd, "avg_pool")?;
    if nd == 3
        && let Some(r) = crate::autocast::dispatch("avg_pool3d", &[Some(input)], |t| {
            let x = t.at(0);
            avg_pool_nd(
                x,
                kernel_size,
                stride,
                padding,
                ceil_mode,
                count_include_pad,
                divisor_override,
                Some(3),
            )
        })
    {
        return r;
    }
    let op = pool_name("avg_pool", nd);
    if divisor_override == Some(0) {
        bail!(Value, "divisor must be not zero");
    }
    let kind = Kind::Avg { count_include_pad, divisor: divisor_override };
    let g = check_windows(input, nd, &op, kernel_size, stride, padding, &[1], ceil_mode, kind)?;
    let dt = input.dtype();
    if let Some(r) = via_f32(input, |x| avg_core(x, g))? {
        return r.to_dtype(dt);
    }
    avg_core(input, g)
}

/// Average (or adaptive average) pooling on f32/f64, recorded with [`avg_backward`] as its
/// formula.
fn avg_core(input: &Tensor, g: PoolGeo) -> Result<Tensor> {
    let xc = contig(input)?;
    let y = if xc.device().is_cuda() {
        crate::cuda::pool(&xc, &g.on_cuda()?, &shape_nc(&g, &g.out), false)?.0
    } else {
        float_kernel!(input.dtype(), T => avg_kernel::<T>(&xc, &g))?
    };
    if !needs_grad(&[input]) {
        return Ok(y);
    }
    let nd = g.nd;
    let name = match g.kind {
        Kind::Adaptive => format!("AdaptiveAvgPool{nd}DBackward0"),
        _ => format!("AvgPool{nd}DBackward0"),
    };
    record1(name, &[input], y, &[], move |_, gr| Ok(vec![Some(avg_backward(&gr[0], g)?)]))
}

/// The gradient of average pooling, recorded with the pooling itself as its own gradient (the
/// two are adjoint linear maps).
fn avg_backward(gy: &Tensor, g: PoolGeo) -> Result<Tensor> {
    let gc = contig(gy)?;
    let g = PoolGeo { n: gy.dims()[0], ..g };
    let r = if gc.device().is_cuda() {
        crate::cuda::avg_pool_backward(&gc, &g.on_cuda()?, &shape_nc(&g, &g.inp))?
    } else {
        float_kernel!(gy.dtype(), T => avg_backward_kernel::<T>(&gc, &g))?
    };
    if !needs_grad(&[gy]) {
        return Ok(r);
    }
    let nd = g.nd;
    let name = match g.kind {
        Kind::Adaptive => format!("AdaptiveAvgPool{nd}DBackwardBackward0"),
        _ => format!("AvgPool{nd}DBackwardBackward0"),
    };
    record1(name, &[gy], r, &[], move |_, gg| {
        Ok(vec![Some(avg_core(&gg[0], PoolGeo { n: gg[0].dims()[0], ..g })?)])
    })
}

/// `torch.nn.functional.avg_pool1d/2d/3d(input, kernel_size, stride, padding, ceil_mode,
/// count_include_pad, divisor_override)` for batched `input: [N, C, *spatial]`: the mean of
/// each window, divided by `divisor_override` when given, else by the window's size counting
/// the padding (`count_include_pad`) or not. A window that `ceil_mode` places wholly in the
/// padding gives 0. Output sizes and checks as [`max_pool`] (no dilation). Recorded as
/// `AvgPool{1,2,3}DBackward0`.
///
/// ```
/// use pyrite_core::ops::pool::avg_pool;
/// use pyrite_core::Tensor;
/// let x = Tensor::new([[[1f32, 2., 3., 4.]]])?;
/// let y = avg_pool(&x, &[2], &[], &[1], false, true, None)?;
/// assert_eq!(y.to_vec::<f32>()?, vec![0.5, 2.5, 2.]);
/// let y = avg_pool(&x, &[2], &[], &[1], false, false, None)?;
/// assert_eq!(y.to_vec::<f32>()?, vec![1., 2.5, 4.]);
/// # Ok::<(), pyrite_core::Error>(())
/// ```
pub fn avg_pool(
    input: &Tensor,
    kernel_size: &[usize],
    stride: &[usize],
    padding: &[usize],
    ceil_mode: bool,
    count_include_pad: bool,
    divisor_override: Option<usize>,
) -> Result<Tensor> {
    avg_pool_nd(input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, None)
}

// ------------------------------------------------------------------------------------------
// Adaptive pooling

fn check_adaptive(input: &Tensor, output_size: &[usize], nd: Option<usize>, op: &str) -> Result<PoolGeo> {
    let nd = check_input(input, nd, op)?;
    let name = pool_name(op, nd);
    let out = expand_param("output_size", output_size, nd)?;
    check_non_empty(input, &name, true)?;
    if out.iter().any(|&o| o > MAX_PARAM) {
        bail!(Value, "{name}: output_size={out:?} is too large");
    }
    Ok(PoolGeo {
        nd,
        n: input.dims()[0],
        c: input.dims()[1],
        inp: pad3(&input.dims()[2..], 1),
        out: pad3(&out, 1),
        k: [1; 3],
        s: [1; 3],
        p: [0; 3],
        d: [1; 3],
        kind: Kind::Adaptive,
    })
}

/// `torch.nn.functional.adaptive_avg_pool1d/2d/3d(input, output_size)` for batched
/// `input: [N, C, *spatial]`: output position `o` of a dim averages the input positions
/// `floor(o * in / out) .. ceil((o + 1) * in / out)`. `output_size` holds one size per
/// spatial dim (or one for all; 0 gives an empty result). Recorded as
/// `AdaptiveAvgPool{1,2,3}DBackward0`.
///
/// ```
/// use pyrite_core::ops::pool::adaptive_avg_pool;
/// use pyrite_core::Tensor;
/// let x = Tensor::new([[[1f32, 2., 3., 4., 5.]]])?;
/// assert_eq!(adaptive_avg_pool(&x, &[2])?.to_vec::<f32>()?, vec![2., 4.]);
/// # Ok::<(), pyrite_core::Error>(())
/// ```
pub fn adaptive_avg_pool(input: &Tensor, output_size: &[usize]) -> Result<Tensor> {
    adaptive_avg_pool_nd(input, output_size, None)
}

fn adaptive_avg_pool_nd(input: &Tensor, output_size: &[usize], nd: Option<usize>) -> Result<Tensor> {
    let _prof = crate::profiler_record::op(prof_name("aavg", input, nd), &[input]);
    let g = check_adaptive(input, output_size, nd, "adaptive_avg_pool")?;
    if g.nd == 3
        && let Some(r) = crate::autocast::dispatch("adaptive_avg_pool3d", &[Some(input)], |t| {
            adaptive_avg_pool_nd(t.at(0), output_size, Some(3))
        })
    {
        return r;
    }
    let dt = input.dtype();
    if let Some(r) = via_f32(input, |x| avg_core(x, g))? {
        return r.to_dtype(dt);
    }
    avg_core(input, g)
}

/// `torch.nn.functional.adaptive_max_pool1d/2d/3d(input, output_size, return_indices=True)`:
/// the windows of [`adaptive_avg_pool`], their maxima and flat argmax indices. Recorded as
/// `AdaptiveMaxPool{1,2,3}DBackward0`.
///
/// ```
/// use pyrite_core::ops::pool::adaptive_max_pool;
/// use pyrite_core::Tensor;
/// let x = Tensor::new([[[1f32, 5., 3., 4., 2.]]])?;
/// let (v, i) = adaptive_max_pool(&x, &[2])?;
/// assert_eq!(v.to_vec::<f32>()?, vec![5., 4.]);
/// assert_eq!(i.to_vec::<i64>()?, vec![1, 3]);
/// # Ok::<(), pyrite_core::Error>(())
/// ```
pub fn adaptive_max_pool(input: &Tensor, output_size: &[usize]) -> Result<(Tensor, Tensor)> {
    adaptive_max_pool_nd(input, output_size, None)
}

fn adaptive_max_pool_nd(
    input: &Tensor,
    output_size: &[usize],
    nd: Option<usize>,
) -> Result<(Tensor, Tensor)> {
    let _prof = crate::profiler_record::op(prof_name("amax", input, nd), &[input]);
    let g = check_adaptive(input, output_size, nd, "adaptive_max_pool")?;
    let dt = input.dtype();
    if let Some((v, i)) = via_f32(input, |x| max_pool_core(x, &g))? {
        return Ok((v.to_dtype(dt)?, i));
    }
    max_pool_core(input, &g)
}

// ------------------------------------------------------------------------------------------
// Max unpooling

/// `torch.nn.functional.max_unpool1d/2d/3d(input, indices, ..., output_size)` for batched
/// `input: [N, C, *spatial]` and int64 `indices` of the same shape (as [`max_pool`] returns
/// them): a zero tensor `[N, C, *output_size]` with each input value written at its flat index
/// in its plane. `output_size` holds the spatial sizes (the nn layer works out the default
/// from kernel, stride and padding). An index outside the output plane is an error. Recorded
/// as `MaxUnpool{1,2,3}DBackward0`.
///
/// ```
/// use pyrite_core::ops::pool::{max_pool, max_unpool};
/// use pyrite_core::Tensor;
/// let x = Tensor::new([[[1f32, 3., 2., 0.]]])?;
/// let (v, i) = max_pool(&x, &[2], &[], &[0], &[1], false)?;
/// assert_eq!(max_unpool(&v, &i, &[4])?.to_vec::<f32>()?, vec![0., 3., 2., 0.]);
/// # Ok::<(), pyrite_core::Error>(())
/// ```
pub fn max_unpool(input: &Tensor, indices: &Tensor, output_size: &[usize]) -> Result<Tensor> {
    max_unpool_nd(input, indices, output_size, None)
}

fn max_unpool_nd(
    input: &Tensor,
    indices: &Tensor,
    output_size: &[usize],
    nd: Option<usize>,
) -> Result<Tensor> {
    let nd = check_input(input, nd, "max_unpool")?;
    let name = pool_name("max_unpooling", nd);
    if indices.dtype() != DType::I64 {
        bail!(DType, "elements in indices should be type int64 but got: {}", indices.dtype().type_name());
    }
    if indices.dims() != input.dims() {
        bail!(
            Shape,
            "Expected shape of indices to be same as that of the input tensor ({}) but got indices tensor with shape: {}",
            input.shape(),
            indices.shape()
        );
    }
    if output_size.len() != nd {
        bail!(
            Shape,
            "{name}: There should be exactly {nd} elements (the spatial output sizes) in output_size, but got {} elements",
            output_size.len()
        );
    }
    if let Some(d) = (1..input.rank()).find(|&d| input.dims()[d] == 0) {
        bail!(
            Shape,
            "{name}_forward_out(): Expected input to have non-zero size for non-batch dimensions, but got {} with dimension {d} being empty",
            input.shape()
        );
    }
    let big = pad3(output_size, 1);
    let dt = input.dtype();
    if let Some(r) = via_f32(input, |x| unpool_core(x, indices, nd, big))? {
        return r.to_dtype(dt);
    }
    unpool_core(input, indices, nd, big)
}

fn unpool_core(input: &Tensor, indices: &Tensor, nd: usize, big: [usize; 3]) -> Result<Tensor> {
    let xc = contig(input)?;
    let ic = contig(indices)?;
    let y = if xc.device().is_cuda() {
        unpool_on_cuda(&xc, &ic, nd, big)?
    } else {
        float_kernel!(input.dtype(), T => scatter_kernel::<T>(&xc, &ic, nd, &big, false))?
    };
    if !needs_grad(&[input]) {
        return Ok(y);
    }
    record1(format!("MaxUnpool{nd}DBackward0"), &[input], y, &[], move |_, gr| {
        Ok(vec![Some(gather_at(&gr[0], &ic)?)])
    })
}

/// `max_unpool` on CUDA: the indices checked on the host (PyTorch's message), then the
/// indexing kernels' `scatter` into zero planes.
fn unpool_on_cuda(x: &Tensor, indices: &Tensor, nd: usize, big: [usize; 3]) -> Result<Tensor> {
    let _ng = crate::autograd::no_grad();
    let li: usize = big.iter().product();
    let flat_idx = indices.flatten(2, -1)?;
    if let Some(&bad) = flat_idx
        .to_device(crate::Device::Cpu)?
        .to_vec::<i64>()?
        .iter()
        .find(|&&i| i < 0 || i as u64 >= li as u64)
    {
        let sizes: Vec<String> = big[3 - nd..].iter().map(|v| v.to_string()).collect();
        bail!(Index, "Found an invalid max index: {bad} (output volumes are of size {})", sizes.join("x"));
    }
    let mut dims = x.dims()[..2].to_vec();
    dims.push(li);
    let planes = Tensor::zeros_on(dims, x.dtype(), x.device())?;
    planes.scatter_(2, &flat_idx, &x.flatten(2, -1)?)?;
    let mut shape = x.dims()[..2].to_vec();
    shape.extend_from_slice(&big[3 - nd..]);
    planes.reshape(shape)
}

// ------------------------------------------------------------------------------------------
// Fixed-rank forms

macro_rules! pool_fixed {
    ($nd:expr, $max:ident, $avg:ident, $aavg:ident, $amax:ident, $unpool:ident) => {
        #[doc = concat!("`torch.nn.functional.", stringify!($max), "(..., return_indices=True)`: [`max_pool`] on a batched ", stringify!($nd), "-d input (rank ", stringify!($nd), " + 2).")]
        pub fn $max(
            input: &Tensor,
            kernel_size: &[usize],
            stride: &[usize],
            padding: &[usize],
            dilation: &[usize],
            ceil_mode: bool,
        ) -> Result<(Tensor, Tensor)> {
            max_pool_nd(input, kernel_size, stride, padding, dilation, ceil_mode, Some($nd))
        }

        #[doc = concat!("`torch.nn.functional.", stringify!($avg), "`: [`avg_pool`] on a batched ", stringify!($nd), "-d input.")]
        pub fn $avg(
            input: &Tensor,
            kernel_size: &[usize],
            stride: &[usize],
            padding: &[usize],
            ceil_mode: bool,
            count_include_pad: bool,
            divisor_override: Option<usize>,
        ) -> Result<Tensor> {
            avg_pool_nd(input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, Some($nd))
        }

        #[doc = concat!("`torch.nn.functional.", stringify!($aavg), "`: [`adaptive_avg_pool`] on a batched ", stringify!($nd), "-d input.")]
        pub fn $aavg(input: &Tensor, output_size: &[usize]) -> Result<Tensor> {
            adaptive_avg_pool_nd(input, output_size, Some($nd))
        }

        #[doc = concat!("`torch.nn.functional.", stringify!($amax), "(..., return_indices=True)`: [`adaptive_max_pool`] on a batched ", stringify!($nd), "-d input.")]
        pub fn $amax(input: &Tensor, output_size: &[usize]) -> Result<(Tensor, Tensor)> {
            adaptive_max_pool_nd(input, output_size, Some($nd))
        }

        #[doc = concat!("`torch.nn.functional.", stringify!($unpool), "` with explicit spatial `output_size`: [`max_unpool`] on a batched ", stringify!($nd), "-d input.")]
        pub fn $unpool(input: &Tensor, indices: &Tensor, output_size: &[usize]) -> Result<Tensor> {
            max_unpool_nd(input, indices, output_size, Some($nd))
        }
    };
}
pool_fixed!(1, max_pool1d, avg_pool1d, adaptive_avg_pool1d, adaptive_max_pool1d, max_unpool1d);
pool_fixed!(2, max_pool2d, avg_pool2d, adaptive_avg_pool2d, adaptive_max_pool2d, max_unpool2d);
pool_fixed!(3, max_pool3d, avg_pool3d, adaptive_avg_pool3d, adaptive_max_pool3d, max_unpool3d);
