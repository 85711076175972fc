//! Cumulative ops along a dim: `cumsum`, `cumprod`, `cummax`, `cummin`.
//!
//! The input is made contiguous and seen as `(outer, k, inner)` with the scanned dim in the
//! middle; each line `(o, i)` is walked in order, many lines side by side when `inner > 1`
//! (so the loop vectorises across them). Lines are independent, so results do not depend on the
//! number of threads. Accumulation follows PyTorch: integers and bool in int64, f16 and bf16
//! in f32, f32 and f64 in f64.

use super::reduce::{dispatch_int, grain_for, line_width, simd, Bounded, Real};
use super::SendPtr;
use crate::alloc::CpuBuffer;
use crate::autograd::record::{needs_grad, paused, record1, Save};
use crate::cuda::Scan;
use crate::shape::wrap_dim;
use crate::threads::parallel_for;
use crate::{dispatch_all, DType, Element, Result, Tensor};
use half::{bf16, f16};

/// A contiguous copy of `x` and its `(outer, k, inner)` sizes around `dim`.
fn scan_layout(x: &Tensor, dim: isize) -> Result<(Tensor, usize, usize, usize)> {
    let d = wrap_dim(dim, x.rank())?;
    let x = x.contiguous()?;
    if x.rank() == 0 {
        return Ok((x, 1, 1, 1));
    }
    let dims = x.dims();
    if x.numel() == 0 {
        // nothing to walk, however large the other sizes (their product may not even fit)
        return Ok((x, 0, 0, 0));
    }
    let o = dims[..d].iter().product();
    let i = dims[d + 1..].iter().product();
    let k = dims[d];
    Ok((x, o, k, i))
}

/// Walks every line of a contiguous `(outer, k, inner)` block in order: `acc = step(acc, x,
/// j)` for the `j`-th element of each line. `emit(start, accs)` receives the accumulators of
/// consecutive output elements `start..start + accs.len()` (up to 8 whole rows when
/// `inner == 1`, else a group of lines at one position `j`).
fn scan_drive<T: Element, A: Copy + Send + Sync>(
    src: &[T],
    (outer, k, inner): (usize, usize, usize),
    init: A,
    step: impl Fn(A, T, usize) -> A + Sync,
    emit: impl Fn(usize, &[A]) + Sync,
) {
    if inner == 1 {
        // Rows are walked 8 at a time: their running values are independent, which hides the
        // latency of each sequential step. Results go through a small buffer that stays in L1.
        const G: usize = 8;
        const J: usize = 64;
        parallel_for(outer, grain_for(k), |a, b| {
            simd(
                #[inline(always)]
                || {
                    let mut buf = [[init; J]; G];
                    let mut r = a;
                    while r < b {
                        let g = G.min(b - r);
                        let mut acc = [init; G];
                        for j0 in (0..k).step_by(J) {
                            let jn = J.min(k - j0);
                            if g == G {
                                for j in 0..jn {
                                    for l in 0..G {
                                        acc[l] = step(acc[l], src[(r + l) * k + j0 + j], j0 + j);
                                        buf[l][j] = acc[l];
                                    }
                                }
                            } else {
                                for l in 0..g {
                                    for j in 0..jn {
                                        acc[l] = step(acc[l], src[(r + l) * k + j0 + j], j0 + j);
                                        buf[l][j] = acc[l];
                                    }
                                }
                            }
                            for (l, row) in buf[..g].iter().enumerate() {
                                emit((r + l) * k + j0, &row[..jn]);
                            }
                        }
                        r += g;
                    }
                },
            )
        });
        return;
    }
    let cw = line_width(outer, inner);
    let nch = inner.div_ceil(cw);
    parallel_for(outer * nch, grain_for(k * cw), |a, b| {
        simd(
            #[inline(always)]
            || {
                let mut acc = vec![init; cw];
                for item in a..b {
                    let (o, i0) = (item / nch, (item % nch) * cw);
                    let n = cw.min(inner - i0);
                    let acc = &mut acc[..n];
                    acc.fill(init);
                    for j in 0..k {
                        let base = (o * k + j) * inner + i0;
                        for (a, &x) in acc.iter_mut().zip(&src[base..base + n]) {
                            *a = step(*a, x, j);
                        }
                        emit(base, acc);
                    }
                }
            },
        )
    });
}

/// A fresh output of `n` elements of `R` and a pointer for `emit` closures.
fn out_buf<R: Element>(n: usize) -> Result<(CpuBuffer, SendPtr<R>)> {
    let mut buf = CpuBuffer::for_elems(n, std::mem::size_of::<R>())?;
    let p = SendPtr(buf.as_mut_ptr() as *mut R);
    Ok((buf, p))
}

/// The part `start..start + len` of an output buffer.
///
/// # Safety
/// The range must lie within the buffer and no other thread may touch it meanwhile.
#[allow(clippy::mut_from_ref)]
unsafe fn out_slice<R>(p: &SendPtr<R>, start: usize, len: usize) -> &mut [R] {
    unsafe { std::slice::from_raw_parts_mut(p.0.add(start), len) }
}

/// cumsum (`prod == false`) or cumprod along `dim`.
fn cum_arith(x: &Tensor, dim: isize, prod: bool) -> Result<Tensor> {
    if x.device().is_cuda() {
        let (x, o, k, i) = scan_layout(x, dim)?;
        return Ok(crate::cuda::scan(&x, (o, k, i), if prod { Scan::Prod } else { Scan::Sum })?.0);
    }
    fn float<T: Element, A: Real>(x: &Tensor, dim: isize, prod: bool) -> Result<Tensor> {
        let (x, o, k, i) = scan_layout(x, dim)?;
        let (buf, p) = out_buf::<T>(x.numel())?;
        let emit = |start: usize, accs: &[A]| {
            // SAFETY: each output range is emitted once, by one thread, within the buffer.
            for (o, &a) in unsafe { out_slice(&p, start, accs.len()) }.iter_mut().zip(accs) {
                *o = T::from_f64(a.to_f64());
            }
        };
        x.with_slice::<T, _>(|s| {
            if prod {
                scan_drive(s, (o, k, i), A::ONE, |a, v: T, _| a * A::from_f64(v.to_f64()), emit)
            } else {
                scan_drive(s, (o, k, i), A::ZERO, |a, v: T, _| a + A::from_f64(v.to_f64()), emit)
            }
        });
        Ok(Tensor::from_cpu_buffer(buf, x.shape().clone(), T::DTYPE))
    }
    fn int<T: Element>(x: &Tensor, dim: isize, prod: bool) -> Result<Tensor> {
        let (x, o, k, i) = scan_layout(x, dim)?;
        let (buf, p) = out_buf::<i64>(x.numel())?;
        let emit = |start: usize, accs: &[i64]| {
            // SAFETY: each output range is emitted once, by one thread, within the buffer.
            unsafe { out_slice(&p, start, accs.len()) }.copy_from_slice(accs);
        };
        x.with_slice::<T, _>(|s| {
            if prod {
                scan_drive(s, (o, k, i), 1i64, |a, v: T, _| a.wrapping_mul(v.to_i64()), emit)
            } else {
                scan_drive(s, (o, k, i), 0i64, |a, v: T, _| a.wrapping_add(v.to_i64()), emit)
            }
        });
        Ok(Tensor::from_cpu_buffer(buf, x.shape().clone(), DType::I64))
    }
    match x.dtype() {
        DType::F16 => float::<f16, f32>(x, dim, prod),
        DType::BF16 => float::<bf16, f32>(x, dim, prod),
        DType::F32 => float::<f32, f64>(x, dim, prod),
        DType::F64 => float::<f64, f64>(x, dim, prod),
        dt => dispatch_int!(dt, T => int::<T>(x, dim, prod), _ => unreachable!()),
    }
}

/// cummax (`is_max`) or cummin along `dim`: running extreme and the index where it was
/// reached. Ties move the index forward and NaN, once seen, stays (as in PyTorch).
fn cum_extreme(x: &Tensor, dim: isize, is_max: bool) -> Result<(Tensor, Tensor)> {
    if x.device().is_cuda() {
        let (x, o, k, i) = scan_layout(x, dim)?;
        let (v, idx) = crate::cuda::scan(&x, (o, k, i), if is_max { Scan::Max } else { Scan::Min })?;
        return Ok((v, idx.expect("indices of cummax/cummin")));
    }
    #[allow(clippy::eq_op)]
    fn go<T: Bounded>(x: &Tensor, dim: isize, is_max: bool) -> Result<(Tensor, Tensor)> {
        let (x, o, k, i) = scan_layout(x, dim)?;
        let n = x.numel();
        let (vbuf, pv) = out_buf::<T>(n)?;
        let (ibuf, pi) = out_buf::<i64>(n)?;
        let emit = |start: usize, accs: &[(T, i64)]| {
            // SAFETY: each output range is emitted once, by one thread, within the buffers.
            let (vs, is) = unsafe { (out_slice(&pv, start, accs.len()), out_slice(&pi, start, accs.len())) };
            for ((v, i), &(a, j)) in vs.iter_mut().zip(is.iter_mut()).zip(accs) {
                *v = a;
                *i = j;
            }
        };
        x.with_slice::<T, _>(|s| {
            if is_max {
                let step = |(b, bi): (T, i64), v: T, j: usize| {
                    if v != v || (b == b && v >= b) {
                        (v, j as i64)
                    } else {
                        (b, bi)
                    }
                };
                scan_drive(s, (o, k, i), (T::LOWEST, 0i64), step, emit)
            } else {
                let step = |(b, bi): (T, i64), v: T, j: usize| {
                    if v != v || (b == b && v <= b) {
                        (v, j as i64)
                    } else {
                        (b, bi)
                    }
                };
                scan_drive(s, (o, k, i), (T::HIGHEST, 0i64), step, emit)
            }
        });
        let shape = x.shape().clone();
        Ok((
            Tensor::from_cpu_buffer(vbuf, shape.clone(), T::DTYPE),
            Tensor::from_cpu_buffer(ibuf, shape, DType::I64),
        ))
    }
    dispatch_all!(x.dtype(), T => go::<T>(x, dim, is_max))
}

impl Tensor {
    /// `torch.cumsum(x, dim)`: running sums along `dim`. Integer and bool inputs give int64,
    /// as in PyTorch.
    ///
    /// ```
    /// use pyrite_core::Tensor;
    /// let x = Tensor::new([[1i32, 2, 3], [4, 5, 6]])?;
    /// assert_eq!(x.cumsum(1)?.to_vec2::<i64>()?, vec![vec![1, 3, 6], vec![4, 9, 15]]);
    /// # Ok::<(), pyrite_core::Error>(())
    /// ```
    pub fn cumsum(&self, dim: isize) -> Result<Tensor> {
        if let Some(r) = crate::autocast::dispatch("cumsum", &[Some(self)], |t| t.at(0).cumsum(dim)) {
            return r;
        }
        let rec = needs_grad(&[self]);
        let y = {
            let _g = paused(rec);
            cum_arith(self, dim, false)?
        };
        if !rec {
            return Ok(y);
        }
        // d cumsum: the gradient summed from each position to the end of the line.
        let d = wrap_dim(dim, self.rank())? as isize;
        let rank = self.rank();
        record1("CumsumBackward0", &[self], y, &[], move |_, g| {
            Ok(vec![Some(reverse_cumsum(&g[0], d, rank)?)])
        })
    }

    /// `torch.cumprod(x, dim)`: running products along `dim` (int64 for integer and bool
    /// inputs).
    ///
    /// Its gradient is `reverse_cumsum(grad * out) / x` when `x` has no zero; with zeros,
    /// PyTorch's zero-safe formulas (see [`cumprod_backward`]).
    pub fn cumprod(&self, dim: isize) -> Result<Tensor> {
        if let Some(r) = crate::autocast::dispatch("cumprod", &[Some(self)], |t| t.at(0).cumprod(dim)) {
            return r;
        }
        let rec = needs_grad(&[self]);
        let y = {
            let _g = paused(rec);
            cum_arith(self, dim, true)?
        };
        if !rec {
            return Ok(y);
        }
        let d = wrap_dim(dim, self.rank())? as isize;
        record1("CumprodBackward0", &[self], y, &[Save::Input(self), Save::Output(0)], move |ctx, g| {
            Ok(vec![Some(cumprod_backward(&g[0], &ctx.saved(0)?, d, &ctx.saved(1)?)?)])
        })
    }

    /// `torch.cummax(x, dim)`: `(values, indices)` of the running maximum along `dim`. On ties
    /// the index moves to the latest occurrence; a NaN, once reached, stays the maximum.
    ///
    /// ```
    /// use pyrite_core::Tensor;
    /// let (v, i) = Tensor::new([3i64, 1, 3, 5])?.cummax(0)?;
    /// assert_eq!(v.to_vec::<i64>()?, vec![3, 3, 3, 5]);
    /// assert_eq!(i.to_vec::<i64>()?, vec![0, 0, 2, 3]);
    /// # Ok::<(), pyrite_core::Error>(())
    /// ```
    pub fn cummax(&self, dim: isize) -> Result<(Tensor, Tensor)> {
        self.cum_extreme_ad("CummaxBackward0", dim, true)
    }

    /// `torch.cummin(x, dim)`: `(values, indices)` of the running minimum along `dim`.
    pub fn cummin(&self, dim: isize) -> Result<(Tensor, Tensor)> {
        self.cum_extreme_ad("CumminBackward0", dim, false)
    }

    /// cummax/cummin, recorded: each value's gradient goes to the element its index names
    /// (accumulating where several running values come from the same element).
    fn cum_extreme_ad(&self, name: &'static str, dim: isize, is_max: bool) -> Result<(Tensor, Tensor)> {
        let rec = needs_grad(&[self]);
        let (v, i) = {
            let _g = paused(rec);
            cum_extreme(self, dim, is_max)?
        };
        if !rec {
            return Ok((v, i));
        }
        let d = wrap_dim(dim, self.rank())? as isize;
        let shape = self.shape().clone();
        let v = record1(name, &[self], v, &[Save::Input(&i)], move |ctx, g| {
            if shape.rank() == 0 {
                return Ok(vec![Some(g[0].clone())]);
            }
            Ok(vec![Some(crate::ops::index::scatter_into_zeros(&g[0], d, &ctx.saved(0)?, &shape)?)])
        })?;
        Ok((v, i))
    }
}

/// `g` summed from each position to the end along `d` (flip, cumsum, flip): the gradient of
/// a cumsum, itself differentiable.
fn reverse_cumsum(g: &Tensor, d: isize, rank: usize) -> Result<Tensor> {
    if rank == 0 {
        return Ok(g.clone());
    }
    g.flip(&[d])?.cumsum(d)?.flip(&[d])
}

/// The gradient of `y = x.cumprod(d)` for upstream gradient `g` (PyTorch's
/// `cumprod_backward`): `dL/dx_k = sum_{j >= k} g_j prod_{i <= j, i != k} x_i`.
///
/// Without zeros it is `reverse_cumsum(g * y) / x`. With zeros and grad mode off (a first
/// derivative), an O(n) form per line: before the line's first zero the division is safe; at
/// the first zero the products skip it (the cumprod of `x` with that zero set to 1); after it
/// every product holds the zero. With grad mode on (`create_graph`), that form's derivative
/// would be wrong (the gradients after the first zero depend on its value), so the products
/// are built explicitly, position by position, from recorded ops: O(n) ops of O(n) work each.
fn cumprod_backward(g: &Tensor, x: &Tensor, d: isize, y: &Tensor) -> Result<Tensor> {
    if x.rank() == 0 || x.dims()[d as usize] <= 1 {
        return Ok(g.clone());
    }
    let rank = x.rank();
    let is_zero = x.eq_scalar(0)?;
    let has_zero = {
        let _g = crate::autograd::no_grad();
        is_zero.any()?.item::<bool>()?
    };
    if !has_zero {
        return reverse_cumsum(&g.mul(y)?, d, rank)?.div(x);
    }
    if !crate::autograd::is_grad_enabled() {
        let zeros_so_far = is_zero.cumsum(d)?;
        let before = zeros_so_far.eq_scalar(0)?;
        let first = is_zero.logical_and(&zeros_so_far.eq_scalar(1)?)?;
        let safe = reverse_cumsum(&g.mul(y)?, d, rank)?.div(x)?;
        let skip_first = x.masked_fill(&first, 1)?.cumprod(d)?;
        let at_first =
            reverse_cumsum(&g.mul(&skip_first)?, d, rank)?.masked_fill(&first.logical_not()?, 0)?;
        return safe.where_(&before, &at_first);
    }
    let n = x.dims()[d as usize];
    let mut ones_shape = x.dims().to_vec();
    ones_shape[d as usize] = 1;
    let ones = Tensor::ones_on(ones_shape.as_slice(), x.dtype(), x.device())?;
    let mut parts = Vec::with_capacity(n);
    for k in 0..n {
        // prod_{i <= j, i != k} x_i for j = k..n: the product before k times the running
        // product after it
        let after = x.narrow(d, k as isize + 1, n - k - 1)?.cumprod(d)?;
        let mut omitted = Tensor::cat(&[ones.clone(), after], d)?;
        if k > 0 {
            omitted = omitted.mul(&x.narrow(d, 0, k)?.prod_dims(&[d], true)?)?;
        }
        parts.push(g.narrow(d, k as isize, n - k)?.mul(&omitted)?.sum_dims(&[d], true)?);
    }
    Tensor::cat(&parts, d)
}
