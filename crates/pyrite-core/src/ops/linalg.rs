//! Matrix products: [`Tensor::matmul`] with PyTorch's full broadcasting rules, `mm`, `bmm`,
//! `addmm`, `baddbmm`, `mv`, `dot`, `outer`, and `_out` forms.
//!
//! Every product ends in one strided kernel: `f32`/`f64` go to the `gemm` crate, which takes
//! arbitrary row and column strides (so transposed, sliced and broadcast operands are never
//! copied), except that on AVX-512 machines the whole tiles of large f32 products with unit
//! column strides run on our own register kernel (`ops/sgemm.rs`); `u8`/`i32`/`i64` use a
//! simple row kernel with wrapping arithmetic (as PyTorch's integer matmul wraps);
//! `f16`/`bf16` are converted to `f32`, multiplied with `f32` accumulation and rounded once,
//! as PyTorch does on the CPU. Bool products are errors, as in PyTorch.
//!
//! Batches are folded into one large product when the strides allow it (an `(b, n, k)` tensor
//! times a matrix is one `(b*n, k) @ (k, m)` product). Large products run on the intra-op
//! thread pool ([`crate::set_num_threads`]); small batched products split the batch instead.
//! Results do not depend on the thread count.

use super::SendPtr;
use crate::layout::Layout;
use crate::shape::{broadcast_shapes, DimVec, Shape};
use crate::storage::StorageCell;
use crate::{alloc::CpuBuffer, bail, DType, Element, Result, Scalar, Tensor};

/// Multiply-adds per product above which a single product uses every intra-op thread.
const PAR_WORK: usize = 64 * 64 * 64;
/// Multiply-adds a thread should get at least when a batch is split across threads.
const BATCH_GRAIN_WORK: usize = 32 * 1024;

// ------------------------------------------------------------------------------------------
// Kernels

/// A strided matrix inside a storage: element offset, row stride, column stride.
#[derive(Clone, Copy, Debug)]
struct Mat {
    off: usize,
    rs: usize,
    cs: usize,
}

/// Element types with a native matrix kernel.
trait MatElem: Element {
    /// Whether large products are split into column panels (see [`panels`]).
    const PANELS: bool;
    /// `beta * o + v`, with the kernel's arithmetic.
    fn scale_add(beta: Self, o: Self, v: Self) -> Self;
    /// `dst = beta * dst + alpha * lhs @ rhs` for one `m x n` product over `k`, on the calling
    /// thread; `beta == None` means `dst` is write-only (never read, so NaNs in it do not
    /// propagate). The drivers below split large products across threads.
    ///
    /// # Safety
    /// The pointers with the given strides must address valid elements for every index in
    /// range, and `dst` must not overlap `lhs` or `rhs`.
    #[allow(clippy::too_many_arguments)]
    unsafe fn kernel(
        m: usize,
        n: usize,
        k: usize,
        dst: *mut Self,
        d: (usize, usize),
        lhs: *const Self,
        l: (usize, usize),
        rhs: *const Self,
        r: (usize, usize),
        alpha: Self,
        beta: Option<Self>,
    );
}

/// Multiply-adds up to which a float product is a plain loop instead of a `gemm` call.
const TINY_WORK: usize = 512;

macro_rules! gemm_elem {
    ($t:ty) => {
        impl MatElem for $t {
            const PANELS: bool = true;
            fn scale_add(beta: $t, o: $t, v: $t) -> $t {
                beta * o + v
            }
            unsafe fn kernel(
                m: usize,
                n: usize,
                k: usize,
                dst: *mut $t,
                d: (usize, usize),
                lhs: *const $t,
                l: (usize, usize),
                rhs: *const $t,
                r: (usize, usize),
                alpha: $t,
                beta: Option<$t>,
            ) {
                unsafe {
                    if m * n * k <= TINY_WORK {
                        // A tiny product (a linear layer on one sample): gemm's dispatch and
                        // packing would cost more than the arithmetic.
                        for i in 0..m {
                            for j in 0..n {
                                let mut acc: $t = 0.0;
                                for p in 0..k {
                                    acc += *lhs.add(i * l.0 + p * l.1) * *rhs.add(p * r.0 + j * r.1);
                                }
                                let o = dst.add(i * d.0 + j * d.1);
                                *o = match beta {
                                    Some(b) => b * *o + alpha * acc,
                                    None => alpha * acc,
                                };
                            }
                        }
                        return;
                    }
                    // gemm computes dst = a * dst + b * lhs @ rhs (its alpha scales dst).
                    gemm::gemm(
                        m,
                        n,
                        k,
                        dst,
                        d.1 as isize,
                        d.0 as isize,
                        beta.is_some(),
                        lhs,
                        l.1 as isize,
                        l.0 as isize,
                        rhs,
                        r.1 as isize,
                        r.0 as isize,
                        beta.unwrap_or(0.0),
                        alpha,
                        false,
                        false,
                        false,
                        gemm::Parallelism::None,
                    );
                }
            }
        }
    };
}
gemm_elem!(f32);
gemm_elem!(f64);

/// Wrapping integer arithmetic for the integer kernel.
trait WrapInt: Element {
    const ZERO: Self;
    fn wadd(self, o: Self) -> Self;
    fn wmul(self, o: Self) -> Self;
}

macro_rules! int_elem {
    ($t:ty) => {
        impl WrapInt for $t {
            const ZERO: $t = 0;
            #[inline(always)]
            fn wadd(self, o: $t) -> $t {
                self.wrapping_add(o)
            }
            #[inline(always)]
            fn wmul(self, o: $t) -> $t {
                self.wrapping_mul(o)
            }
        }
        impl MatElem for $t {
            const PANELS: bool = false;
            fn scale_add(beta: $t, o: $t, v: $t) -> $t {
                beta.wmul(o).wadd(v)
            }
            unsafe fn kernel(
                m: usize,
                n: usize,
                k: usize,
                dst: *mut $t,
                d: (usize, usize),
                lhs: *const $t,
                l: (usize, usize),
                rhs: *const $t,
                r: (usize, usize),
                alpha: $t,
                beta: Option<$t>,
            ) {
                unsafe { int_kernel::<$t>(m, n, k, dst, d, lhs, l, rhs, r, alpha, beta) }
            }
        }
    };
}
int_elem!(u8);
int_elem!(i32);
int_elem!(i64);

/// Integer product: the right operand is packed row-major once, then each output row is
/// accumulated as a sum of scaled right rows (vectorisable, wrapping like PyTorch's kernel).
#[allow(clippy::too_many_arguments)]
unsafe fn int_kernel<T: WrapInt>(
    m: usize,
    n: usize,
    k: usize,
    dst: *mut T,
    d: (usize, usize),
    lhs: *const T,
    l: (usize, usize),
    rhs: *const T,
    r: (usize, usize),
    alpha: T,
    beta: Option<T>,
) {
    if m == 0 || n == 0 {
        return;
    }
    let packed: Vec<T>;
    let b: *const T = if r.1 == 1 && (r.0 == n || k <= 1) {
        rhs
    } else {
        let mut v = Vec::with_capacity(k * n);
        for p in 0..k {
            for j in 0..n {
                // SAFETY: within the right operand's extent (caller's contract).
                v.push(unsafe { *rhs.add(p * r.0 + j * r.1) });
            }
        }
        packed = v;
        packed.as_ptr()
    };
    let (dp, lp, bp) = (dst, lhs, b);
    let rows = |i0: usize, i1: usize| {
        let mut acc = vec![T::ZERO; n];
        for i in i0..i1 {
            acc.fill(T::ZERO);
            for p in 0..k {
                // SAFETY: indices are within the operands' extents (caller's contract).
                let a = unsafe { *lp.add(i * l.0 + p * l.1) };
                if a == T::ZERO {
                    continue;
                }
                let brow = unsafe { std::slice::from_raw_parts(bp.add(p * n), n) };
                for (x, &y) in acc.iter_mut().zip(brow) {
                    *x = x.wadd(a.wmul(y));
                }
            }
            for (j, &v) in acc.iter().enumerate() {
                // SAFETY: as above.
                unsafe {
                    let o = dp.add(i * d.0 + j * d.1);
                    let v = alpha.wmul(v);
                    *o = match beta {
                        Some(bt) => bt.wmul(*o).wadd(v),
                        None => v,
                    };
                }
            }
        }
    };
    rows(0, m);
}

// ------------------------------------------------------------------------------------------
// Batched driver

/// Merges dims of sizes `sizes` into one dim when, in every operand, each dim steps over
/// exactly the span of the dims inside it; returns the merged size and each operand's stride.
fn merge_dims(sizes: &[usize], strides: &[&[usize]]) -> Option<(usize, DimVec)> {
    let mut total = 1usize;
    let mut inner: Option<usize> = None;
    for i in (0..sizes.len()).rev() {
        if sizes[i] == 1 {
            continue;
        }
        match inner {
            None => inner = Some(i),
            Some(j) => {
                if strides.iter().any(|st| st[i] != st[j] * total) {
                    return None;
                }
            }
        }
        total *= sizes[i];
    }
    let st = match inner {
        Some(j) => strides.iter().map(|s| s[j]).collect(),
        None => strides.iter().map(|_| 1).collect(),
    };
    Some((total, st))
}

/// Computes `dst = beta * dst + alpha * a @ b` for `a: (batch..., m, k)`, `b: (batch..., k,
/// n)` whose batch dims are already broadcast to the same sizes. `dst` is an existing tensor of
/// shape `(batch..., m, n)` (out=, in-place, or pre-filled with the input of `addmm`); with
/// `None` a fresh contiguous result is allocated (`beta` must then be `None`).
fn bmm_native<T: MatElem>(
    a: &Tensor,
    b: &Tensor,
    alpha: T,
    beta: Option<T>,
    dst: Option<&Tensor>,
) -> Result<Tensor> {
    let r = a.rank();
    debug_assert!(r >= 2 && b.rank() == r);
    let batch: DimVec = a.dims()[..r - 2].iter().copied().collect();
    let (m, k, n) = (a.dims()[r - 2], a.dims()[r - 1], b.dims()[r - 1]);
    let mut out_dims = batch.clone();
    out_dims.push(m);
    out_dims.push(n);
    let out_shape = Shape(out_dims);
    // A zero alpha drops the product entirely (PyTorch ignores NaNs in the operands then).
    let k_eff = if alpha == T::from_i64(0) { 0 } else { k };

    let mut fresh = None;
    let lo = match dst {
        Some(t) => {
            t.check_inplace_allowed()?;
            t.layout().clone()
        }
        None => {
            fresh = Some(CpuBuffer::for_shape(&out_shape, std::mem::size_of::<T>())?);
            Layout::contiguous(out_shape.clone())
        }
    };
    let (la, lb) = (a.layout(), b.layout());
    {
        let out_cell: Option<&StorageCell> = dst.map(|t| &**t.storage());
        let (_g, optr, [pa, pb]) = super::lock_all(out_cell, [&**a.storage(), &**b.storage()]);
        let po = match (&mut fresh, optr) {
            (Some(buf), _) => buf.as_mut_ptr() as *mut T,
            (None, Some(p)) => p as *mut T,
            _ => unreachable!(),
        };
        let (pa, pb) = (pa as *const T, pb as *const T);
        let nb: usize = batch.iter().product();
        if out_shape.numel() == 0 {
            // nothing to write
        } else {
            let ds = lo.strides();
            let (ast, bst) = (la.strides(), lb.strides());
            let dm = Mat { off: lo.offset(), rs: ds[r - 2], cs: ds[r - 1] };
            let am = Mat { off: la.offset(), rs: ast[r - 2], cs: ast[r - 1] };
            let bm = Mat { off: lb.offset(), rs: bst[r - 2], cs: bst[r - 1] };
            let threads = crate::get_num_threads();
            // Fold the batch into the rows (b broadcast over the batch) or the columns (a
            // broadcast) when the strides allow: one large product instead of many small.
            let mut folded = None;
            if nb > 1 && bst[..r - 2].iter().zip(&batch).all(|(&s, &d)| s == 0 || d == 1) {
                let sizes: DimVec = a.dims()[..r - 1].iter().copied().collect();
                if let Some((mm, st)) = merge_dims(&sizes, &[&ds[..r - 1], &ast[..r - 1]]) {
                    folded = Some((mm, n, Mat { rs: st[0], ..dm }, Mat { rs: st[1], ..am }, bm));
                }
            }
            if folded.is_none() && nb > 1 && ast[..r - 2].iter().zip(&batch).all(|(&s, &d)| s == 0 || d == 1)
            {
                let mut sizes: DimVec = batch.clone();
                sizes.push(n);
                let dcs: DimVec = ds[..r - 2].iter().chain(std::iter::once(&ds[r - 1])).copied().collect();
                let bcs: DimVec = bst[..r - 2].iter().chain(std::iter::once(&bst[r - 1])).copied().collect();
                if let Some((nn, st)) = merge_dims(&sizes, &[&dcs, &bcs]) {
                    folded = Some((m, nn, Mat { cs: st[0], ..dm }, am, Mat { cs: st[1], ..bm }));
                }
            }
            if nb == 1 || folded.is_some() {
                let (mm, nn, dm, am, bm) = folded.unwrap_or((m, n, dm, am, bm));
                run_one(mm, nn, k_eff, po, dm, pa, am, pb, bm, alpha, beta, threads);
            } else {
                run_batch(
                    &batch,
                    m,
                    n,
                    k_eff,
                    po,
                    dm,
                    &ds[..r - 2],
                    pa,
                    am,
                    &ast[..r - 2],
                    pb,
                    bm,
                    &bst[..r - 2],
                    alpha,
                    beta,
                    threads,
                );
            }
        }
    }
    Ok(match fresh {
        Some(buf) => Tensor::from_cpu_buffer(buf, out_shape, T::DTYPE),
        None => dst.unwrap().clone(),
    })
}

/// One strided product `dst = beta * dst + alpha * lhs @ rhs` (`m x k` times `k x n`) on raw
/// f32 or f64 matrices, each given as a pointer to its first element and its (row, column)
/// strides, on up to `threads` threads: the entry point for other kernels that build their
/// operands themselves (convolution's im2col buffers). `beta == None` means `dst` is
/// write-only. With `k == 0` the caller fills `dst` itself.
///
/// # Safety
/// The pointers with the given strides must address valid elements for every index in range,
/// and `dst` must not overlap `lhs` or `rhs`.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn gemm_raw<T: Element>(
    (m, n, k): (usize, usize, usize),
    dst: *mut T,
    d: (usize, usize),
    lhs: *const T,
    l: (usize, usize),
    rhs: *const T,
    r: (usize, usize),
    alpha: T,
    beta: Option<T>,
    threads: usize,
) {
    if m == 0 || n == 0 || k == 0 {
        return;
    }
    let mat = |x: (usize, usize)| Mat { off: 0, rs: x.0, cs: x.1 };
    match T::DTYPE {
        DType::F32 => run_one::<f32>(
            m,
            n,
            k,
            dst as *mut f32,
            mat(d),
            lhs as *const f32,
            mat(l),
            rhs as *const f32,
            mat(r),
            alpha.to_f64() as f32,
            beta.map(|b| b.to_f64() as f32),
            threads,
        ),
        DType::F64 => run_one::<f64>(
            m,
            n,
            k,
            dst as *mut f64,
            mat(d),
            lhs as *const f64,
            mat(l),
            rhs as *const f64,
            mat(r),
            alpha.to_f64(),
            beta.map(|b| b.to_f64()),
            threads,
        ),
        d => unreachable!("gemm_raw on {d}"),
    }
}

/// Normalises the strides of size-1 dims (any value is legal there) so that the kernel's
/// layout detection sees a plain row- or column-major matrix.
fn norm(rows: usize, cols: usize, x: Mat) -> (usize, usize) {
    let (mut rs, mut cs) = (x.rs, x.cs);
    if cols <= 1 {
        cs = rows.max(1) * rs.max(1);
    }
    if rows <= 1 {
        rs = cols.max(1) * cs.max(1);
    }
    (rs, cs)
}

/// One strided product `dst = beta * dst + alpha * lhs @ rhs` (`m x k` times `k x n`), each
/// operand a pointer to its first element and its (row, column) strides.
struct Product<T> {
    m: usize,
    n: usize,
    k: usize,
    dst: SendPtr<T>,
    d: (usize, usize),
    lhs: SendPtr<T>,
    l: (usize, usize),
    rhs: SendPtr<T>,
    r: (usize, usize),
    alpha: T,
    beta: Option<T>,
}

impl<T: Copy> Clone for Product<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T: Copy> Copy for Product<T> {}

impl<T: MatElem> Product<T> {
    /// Runs the product on the calling thread.
    ///
    /// # Safety
    /// The pointers and strides must address valid elements for every index in range, and
    /// `dst` must not overlap the operands.
    unsafe fn run(self) {
        unsafe {
            let p = self;
            T::kernel(p.m, p.n, p.k, p.dst.0, p.d, p.lhs.0, p.l, p.rhs.0, p.r, p.alpha, p.beta)
        }
    }

    /// The same product transposed: `C^T = B^T A^T`.
    fn transposed(self) -> Self {
        let t = |x: (usize, usize)| (x.1, x.0);
        Product {
            m: self.n,
            n: self.m,
            d: t(self.d),
            lhs: self.rhs,
            l: t(self.r),
            rhs: self.lhs,
            r: t(self.l),
            ..self
        }
    }

    /// Columns `j..j + w` of the output.
    ///
    /// # Safety
    /// `j + w <= n`.
    unsafe fn columns(self, j: usize, w: usize) -> Self {
        unsafe {
            Product {
                n: w,
                dst: SendPtr(self.dst.0.add(j * self.d.1)),
                rhs: SendPtr(self.rhs.0.add(j * self.r.1)),
                ..self
            }
        }
    }

    /// Rows `i..i + h` of the output.
    ///
    /// # Safety
    /// `i + h <= m`.
    unsafe fn rows(self, i: usize, h: usize) -> Self {
        unsafe {
            Product {
                m: h,
                dst: SendPtr(self.dst.0.add(i * self.d.0)),
                lhs: SendPtr(self.lhs.0.add(i * self.l.0)),
                ..self
            }
        }
    }

    /// The part of the sum over depth `q..q + kd`, accumulated into `dst` unless `q == 0`.
    ///
    /// # Safety
    /// `q + kd <= k`.
    unsafe fn depth(self, q: usize, kd: usize) -> Self {
        unsafe {
            Product {
                k: kd,
                lhs: SendPtr(self.lhs.0.add(q * self.l.1)),
                rhs: SendPtr(self.rhs.0.add(q * self.r.0)),
                beta: if q == 0 { self.beta } else { Some(T::from_i64(1)) },
                ..self
            }
        }
    }
}

/// One product, threaded when large.
#[allow(clippy::too_many_arguments)]
fn run_one<T: MatElem>(
    m: usize,
    n: usize,
    k: usize,
    po: *mut T,
    d: Mat,
    pa: *const T,
    a: Mat,
    pb: *const T,
    b: Mat,
    alpha: T,
    beta: Option<T>,
    threads: usize,
) {
    // SAFETY (all pointer offsets below): layouts were validated against their storages;
    // `dst` never overlaps an input (callers copy inputs that share the output's storage).
    let p = unsafe {
        Product {
            m,
            n,
            k,
            dst: SendPtr(po.add(d.off)),
            d: norm(m, n, d),
            lhs: SendPtr(pa.add(a.off) as *mut T),
            l: norm(m, k, a),
            rhs: SendPtr(pb.add(b.off) as *mut T),
            r: norm(k, n, b),
            alpha,
            beta,
        }
    };
    // Shallow products (k < 256, e.g. a weight gradient over a batch of 128) gain nothing from
    // panels: every panel would re-pack the whole of `a` for little work (measured: 1024x128 @
    // 128x1024 in 1.8 ms whole, 2.3 ms in panels).
    if T::PANELS
        && p.d.1 == 1
        && p.l.1 == 1
        && p.r.0 == 1
        && m * n * k >= PANEL_WORK
        && n >= 256
        && m <= 256
        && k >= 512
    {
        return via_column_major(p, threads);
    }
    if T::PANELS && k >= 256 && m * n * k >= PANEL_WORK {
        // Split along the output's unit-stride dim: C's columns when row-major, else its rows
        // (the same split on the transposed product C^T = B^T A^T).
        if p.d.1 <= p.d.0 {
            if m >= 64 && n >= 256 {
                return panels(p, threads);
            }
        } else if n >= 64 && m >= 256 {
            return panels(p.transposed(), threads);
        }
    }
    split(p, if m * n * k >= PAR_WORK { threads } else { 1 });
}

/// A row-major product whose operands both run along the depth (`x @ w.t()`, the layout of a
/// linear layer's forward pass), computed into a column-major buffer and then copied over:
/// `gemm` runs this layout 25-35% faster into a column-major output for short, deep products
/// (measured: 128x1024 @ 1024x1024 in 2.0-2.6 ms against 3.3-3.7 ms on one thread), and the
/// copy of `m x n` elements costs a few percent of that. For tall or shallow products the
/// direct product wins (paired runs, 2 threads, direct/via time: 2048x256 @ 256x768 0.67,
/// 512x1024 @ 1024x1024 0.94, 256x1024 @ 1024x1024 1.03, 128x1024 @ 1024x1024 1.25,
/// 128x784 @ 784x1024 1.07), hence the `m <= 256 && k >= 512` in `run_one`.
fn via_column_major<T: MatElem>(p: Product<T>, threads: usize) {
    let (m, n) = (p.m, p.n);
    // From the caching allocator: a fresh `Vec` of this size is mapped and zeroed by the OS
    // on every call (page faults cost as much as the copy).
    let Ok(mut tmp) = CpuBuffer::for_elems(m.saturating_mul(n), std::mem::size_of::<T>()) else {
        split(p, threads);
        return;
    };
    let t = SendPtr(tmp.as_mut_ptr() as *mut T);
    // `beta: None`: the buffer is written, never read, by the product.
    split(Product { dst: t, d: (1, m), beta: None, ..p }, threads);
    let (dst, ld, beta) = (p.dst, p.d.0, p.beta);
    let rows = |i0: usize, i1: usize| {
        let (t, dst) = (t, dst);
        // SAFETY: `tmp` holds m * n written elements; rows i0..i1 of the output are this
        // call's alone.
        unsafe { transpose_rows(t.0.add(i0), m, dst.0.add(i0 * ld), ld, i1 - i0, n, beta) }
    };
    if threads > 1 {
        crate::threads::parallel_for(m.div_ceil(TILE), 4, |a, b| rows(a * TILE, (b * TILE).min(m)));
    } else {
        rows(0, m);
    }
}

/// Side of the square tiles [`transpose_rows`] copies.
const TILE: usize = 8;

/// `dst[i, j] = src[j, i]` (or `beta * dst[i, j] + src[j, i]`) for `rows x cols` elements:
/// `src` column-major with leading dimension `lds`, `dst` row-major with `ldd`. The copy walks
/// 8 x 8 tiles, so that both sides touch whole runs of cache lines.
///
/// # Safety
/// Both pointers must address every element in range, and not overlap.
#[inline(never)]
unsafe fn transpose_rows<T: MatElem>(
    src: *const T,
    lds: usize,
    dst: *mut T,
    ldd: usize,
    rows: usize,
    cols: usize,
    beta: Option<T>,
) {
    unsafe {
        let mut i0 = 0;
        while i0 < rows {
            let h = TILE.min(rows - i0);
            let mut j0 = 0;
            while j0 < cols {
                let w = TILE.min(cols - j0);
                for i in i0..i0 + h {
                    let d = dst.add(i * ldd);
                    for j in j0..j0 + w {
                        let v = *src.add(j * lds + i);
                        let o = d.add(j);
                        *o = match beta {
                            None => v,
                            Some(b) => T::scale_add(b, *o, v),
                        };
                    }
                }
                j0 += w;
            }
            i0 += h;
        }
    }
}

/// One product on up to `threads` threads: the output is cut into blocks of whole columns
/// (or whole rows), one kernel call per block. Columns are cut when the output is row-major
/// (each thread then packs only its part of `b`), rows when it is column-major, unless that
/// dim is too short to share.
fn split<T: MatElem>(p: Product<T>, threads: usize) {
    const MIN_BLOCK: usize = 32;
    let (m, n) = (p.m, p.n);
    let cols =
        if p.d.1 <= p.d.0 { n >= MIN_BLOCK * threads || n >= m } else { m < MIN_BLOCK * threads && n > m };
    let len = if cols { n } else { m };
    let tasks = threads.min(len / MIN_BLOCK).max(1);
    // SAFETY (both arms): sub-blocks of a validated product; blocks write disjoint parts of
    // the output.
    if tasks == 1 {
        unsafe { p.run() };
        return;
    }
    // Blocks in multiples of 16 (the kernels' register tile) where possible.
    let chunk = len.div_ceil(tasks).next_multiple_of(16).min(len);
    crate::threads::run_tasks(len.div_ceil(chunk), |t| {
        let s = t * chunk;
        let w = chunk.min(len - s);
        unsafe {
            if cols {
                p.columns(s, w).run()
            } else {
                p.rows(s, w).run()
            }
        }
    });
}

/// Products of at least this many multiply-adds (with enough columns) are split into panels.
const PANEL_WORK: usize = 128 * 128 * 128;
/// Depth of one panel step.
const PANEL_K: usize = 512;

/// A large product as column panels of the output (128 or 256 wide, chosen from `n` alone),
/// accumulated over depth steps of [`PANEL_K`] ([`KERNEL_K`] at most on our kernel): smaller
/// working sets than one big call (10-20% faster for n >= 512 on the AVX-512 benchmark
/// machine), and the panels are the unit of multi-threading, so threads only meet once per
/// depth step. Every output element is computed in the same order whatever the thread count.
fn panels<T: MatElem>(p: Product<T>, threads: usize) {
    let width = if p.n < 512 { 128 } else { 256 };
    let np = p.n.div_ceil(width);
    // Our register kernel takes deeper steps, as even as they can be (k = 2048 as 3 x 683:
    // 2-7% faster than 4 x 512 at n = 2048, measured in one process; k = 1024 stays 2 x 512).
    let depth = if register_kernel(&p) { p.k.div_ceil(p.k.div_ceil(KERNEL_K)) } else { PANEL_K };
    // SAFETY: sub-blocks of a validated product; panels write disjoint columns.
    let step = |q: usize, i: usize| unsafe {
        let j = i * width;
        run_step(p.columns(j, width.min(p.n - j)).depth(q, depth.min(p.k - q)))
    };
    // Depth steps outermost (a step's slice of `a` is reused by every panel while it is in
    // cache), panels within a step in parallel.
    for q in (0..p.k).step_by(depth) {
        if threads > 1 {
            crate::threads::run_tasks(np, |i| step(q, i));
        } else {
            (0..np).for_each(|i| step(q, i));
        }
    }
}

/// The deepest panel step for our register kernel.
const KERNEL_K: usize = 768;

/// Whether `p` (or a panel of it) runs on our AVX-512 register kernel (`ops/sgemm.rs`): f32,
/// unit column strides in all three matrices, and a machine with AVX-512F.
fn register_kernel<T: MatElem>(p: &Product<T>) -> bool {
    #[cfg(target_arch = "x86_64")]
    if T::DTYPE == DType::F32 && p.d.1 == 1 && p.l.1 == 1 && p.r.1 == 1 {
        return super::sgemm::available();
    }
    false
}

/// One panel step: on our register kernel when [`register_kernel`] says so (whole groups of
/// 64 columns there, the leftover columns here, on `gemm`), else on `gemm`.
///
/// # Safety
/// As for [`Product::run`].
unsafe fn run_step<T: MatElem>(p: Product<T>) {
    unsafe {
        #[cfg(target_arch = "x86_64")]
        if register_kernel(&p) {
            let f = |x: T| x.to_f64() as f32; // exact: T is f32
            let cols = super::sgemm::bulk(
                p.m,
                p.n,
                p.k,
                p.dst.0 as *mut f32,
                p.d.0,
                p.lhs.0 as *const f32,
                p.l.0,
                p.rhs.0 as *const f32,
                p.r.0,
                f(p.alpha),
                p.beta.map(f),
            );
            if cols < p.n {
                p.columns(cols, p.n - cols).run();
            }
            return;
        }
        p.run()
    }
}

/// A batch of products with arbitrary (possibly zero) batch strides.
#[allow(clippy::too_many_arguments)]
fn run_batch<T: MatElem>(
    batch: &[usize],
    m: usize,
    n: usize,
    k: usize,
    po: *mut T,
    d: Mat,
    dbs: &[usize],
    pa: *const T,
    a: Mat,
    abs: &[usize],
    pb: *const T,
    b: Mat,
    bbs: &[usize],
    alpha: T,
    beta: Option<T>,
    threads: usize,
) {
    let nb: usize = batch.iter().product();
    let per = m * n * k.max(1);
    let (d2, a2, b2) = (norm(m, n, d), norm(m, k, a), norm(k, n, b));
    let offsets = |mut idx: usize| {
        let (mut od, mut oa, mut ob) = (d.off, a.off, b.off);
        for i in (0..batch.len()).rev() {
            let j = idx % batch[i];
            idx /= batch[i];
            od += j * dbs[i];
            oa += j * abs[i];
            ob += j * bbs[i];
        }
        (od, oa, ob)
    };
    let (po, pa, pb) = (SendPtr(po), SendPtr(pa as *mut T), SendPtr(pb as *mut T));
    let one = |i: usize, t: usize| {
        let (po, pa, pb) = (po, pa, pb);
        let (od, oa, ob) = offsets(i);
        // SAFETY: as in `run_one`; distinct batch entries write disjoint output matrices.
        let (dst, lhs, rhs) =
            unsafe { (SendPtr(po.0.add(od)), SendPtr(pa.0.add(oa)), SendPtr(pb.0.add(ob))) };
        split(Product { m, n, k, dst, d: d2, lhs, l: a2, rhs, r: b2, alpha, beta }, t);
    };
    if threads > 1 && per >= PAR_WORK {
        (0..nb).for_each(|i| one(i, threads));
    } else if threads > 1 && nb * per >= PAR_WORK {
        let grain = BATCH_GRAIN_WORK.div_ceil(per).max(1);
        crate::threads::parallel_for(nb, grain, |s, e| (s..e).for_each(|i| one(i, 1)));
    } else {
        (0..nb).for_each(|i| one(i, 1));
    }
}

// ------------------------------------------------------------------------------------------
// Dtype dispatch

/// A view of `t` with its broadcast (stride-0) dims cut to size 1, converted to `dtype`, then
/// expanded back: converts broadcast operands without materialising the broadcast.
fn convert_compact(t: &Tensor, dtype: DType) -> Result<Tensor> {
    if t.dtype() == dtype {
        return Ok(t.clone());
    }
    let l = t.layout();
    if !l.strides().iter().zip(l.dims()).any(|(&s, &d)| s == 0 && d > 1) {
        return t.to_dtype(dtype);
    }
    let mut small = l.clone();
    for i in 0..small.strides.len() {
        if small.strides[i] == 0 && small.shape.0[i] > 1 {
            small.shape.0[i] = 1;
        }
    }
    t.with_layout(small).to_dtype(dtype)?.broadcast_to(t.dims())
}

/// Copies `x` when it shares storage with the output (a kernel must never read what it
/// writes).
fn detach(x: &Tensor, out: Option<&Tensor>) -> Result<Tensor> {
    match out {
        Some(o) if x.same_storage(o) => x.deep_clone(),
        _ => Ok(x.clone()),
    }
}

/// Checks an `out=` tensor: exact shape, dtype, no internal overlap.
pub(crate) fn check_out(out: &Tensor, shape: &[usize], dtype: DType, op: &str) -> Result<()> {
    if out.dtype() != dtype {
        bail!(
            DType,
            "{op}: Expected out tensor to have dtype {}, but got {} instead",
            dtype.cpp_name(),
            out.dtype().cpp_name()
        );
    }
    if out.dims() != shape {
        bail!(
            Shape,
            "{op}: the out tensor has shape {} but the result has shape {} (Pyrite does not resize out tensors)",
            out.shape(),
            Shape::from(shape)
        );
    }
    super::check_no_internal_overlap(out, op)
}

/// The common core of every product: `beta * input + alpha * (a @ b)` for `a: (batch..., m,
/// k)` and `b: (batch..., k, n)` with equal batch dims, into `out` (shape `(batch..., m, n)`)
/// or a fresh tensor. `input` (broadcastable to the result) is ignored when `beta == 0`.
/// Dtypes are already checked equal and not bool.
fn addbmm_core(
    a: &Tensor,
    b: &Tensor,
    input: Option<&Tensor>,
    beta: Scalar,
    alpha: Scalar,
    out: Option<&Tensor>,
    op: &str,
) -> Result<Tensor> {
    if a.device().is_cuda() || b.device().is_cuda() {
        return crate::cuda::addbmm(a, b, input, beta, alpha, out);
    }
    let dtype = a.dtype();
    let r = a.rank();
    let mut shape: Vec<usize> = a.dims()[..r - 1].to_vec();
    shape.push(b.dims()[r - 1]);
    // A zero beta drops the input (integer products truncate a float beta first).
    let zero_beta = if dtype.is_integral() { beta.to_i64() == 0 } else { beta.to_f64() == 0.0 };
    let input = if zero_beta { None } else { input };
    match dtype {
        DType::BF16 if super::bf16gemm::available() => {
            // bf16 x bf16 -> f32 on the AVX512-BF16 kernel, then alpha, beta and the input in
            // f32, rounded to bf16 once. The common `input + a @ b` (linear's bias) sums onto
            // the input converted to f32.
            let plain = alpha.to_f64() == 1.0 && (input.is_none() || beta.to_f64() == 1.0);
            let init = match input {
                Some(i) if plain => {
                    let t = Tensor::empty(shape.clone(), DType::F32)?;
                    t.copy_(i)?;
                    Some(t)
                }
                _ => None,
            };
            let mut r32 = bf16_product(a, b, init)?;
            if !plain {
                if alpha.to_f64() != 1.0 {
                    r32 = r32.mul_scalar(alpha)?;
                }
                if let Some(i) = input {
                    let i32_ = convert_compact(i, DType::F32)?;
                    r32 = r32.add(&i32_.mul_scalar(beta)?)?;
                }
            }
            match out {
                Some(o) => {
                    o.copy_(&r32)?;
                    Ok(o.clone())
                }
                None => r32.to_dtype(dtype),
            }
        }
        DType::F16 | DType::BF16 => {
            let a32 = convert_compact(a, DType::F32)?;
            let b32 = convert_compact(b, DType::F32)?;
            let i32_ = match input {
                Some(i) => Some(convert_compact(i, DType::F32)?),
                None => None,
            };
            let r32 = addbmm_core(&a32, &b32, i32_.as_ref(), beta, alpha, None, op)?;
            match out {
                Some(o) => {
                    o.copy_(&r32)?;
                    Ok(o.clone())
                }
                None => r32.to_dtype(dtype),
            }
        }
        DType::Bool => bail!(NotImplemented, "\"{op}\" not implemented for 'Bool'"),
        _ => {
            // Inputs sharing the output's storage are copied first.
            let a = detach(a, out)?;
            let b = detach(b, out)?;
            // Pre-fill the destination with the input when it is added.
            let (dst, beta_t): (Option<Tensor>, bool) = match (input, out) {
                (None, o) => (o.cloned(), false),
                (Some(i), Some(o)) => {
                    let same = i.same_storage(o) && i.layout() == o.layout();
                    if !same {
                        if i.same_storage(o) {
                            o.copy_(&i.deep_clone()?)?;
                        } else {
                            o.copy_(i)?;
                        }
                    }
                    (Some(o.clone()), true)
                }
                (Some(i), None) => {
                    let t = Tensor::empty(shape.clone(), dtype)?;
                    t.copy_(i)?;
                    (Some(t), true)
                }
            };
            crate::dispatch_all!(dtype, T => dispatch_native::<T>(&a, &b, dst.as_ref(), beta_t, beta, alpha))
        }
    }
}

/// `a @ b` for bf16 `a: (batch..., m, k)` and `b: (batch..., k, n)` (batch dims already
/// broadcast to the same sizes, any strides) as a contiguous f32 tensor, on the AVX512-BF16
/// kernel ([`super::bf16gemm`]): a fresh one, or `init + a @ b` in `init` (a fresh contiguous
/// f32 tensor of the result's shape). A batch that `b` is broadcast over is folded into the
/// rows of one product when `a`'s strides allow.
fn bf16_product(a: &Tensor, b: &Tensor, init: Option<Tensor>) -> Result<Tensor> {
    let r = a.rank();
    let batch: DimVec = a.dims()[..r - 2].iter().copied().collect();
    let (m, k, n) = (a.dims()[r - 2], a.dims()[r - 1], b.dims()[r - 1]);
    let mut dims = batch.clone();
    dims.push(m);
    dims.push(n);
    let shape = Shape(dims);
    let acc = init.is_some();
    let out = match init {
        Some(t) => t,
        None => Tensor::empty(shape.clone(), DType::F32)?,
    };
    debug_assert!(out.is_contiguous() && out.dims() == shape.dims());
    if shape.numel() == 0 {
        return Ok(out);
    }
    let nb: usize = batch.iter().product();
    let (la, lb) = (a.layout(), b.layout());
    let (ast, bst) = (la.strides(), lb.strides());
    let threads = crate::get_num_threads();
    {
        let (_g, po, [pa, pb]) = super::lock_all(Some(&**out.storage()), [&**a.storage(), &**b.storage()]);
        // SAFETY: the layouts' offsets lie inside their storages.
        let (pa, pb) = unsafe { ((pa as *const u16).add(la.offset()), (pb as *const u16).add(lb.offset())) };
        let pc = po.expect("the output is locked for writing") as *mut f32;
        // Rows of all batch entries as one product when b is the same matrix for every entry.
        if bst[..r - 2].iter().zip(&batch).all(|(&s, &d)| s == 0 || d == 1) {
            let sizes: DimVec = a.dims()[..r - 1].iter().copied().collect();
            // The output's (contiguous) strides over the batch dims and the rows.
            let out_layout = Layout::contiguous(shape.clone());
            let out_st = &out_layout.strides()[..r - 1];
            if let Some((rows, st)) = merge_dims(&sizes, &[out_st, &ast[..r - 1]]) {
                // SAFETY: operands of the checked shapes; the output is a fresh buffer.
                unsafe {
                    super::bf16gemm::gemm(
                        (rows, n, k),
                        pc,
                        n,
                        pa,
                        (st[1], ast[r - 1]),
                        pb,
                        (bst[r - 2], bst[r - 1]),
                        acc,
                        threads,
                    )
                };
                drop(_g);
                return Ok(out);
            }
        }
        let offsets = |mut idx: usize| {
            let (mut oa, mut ob) = (0, 0);
            for i in (0..batch.len()).rev() {
                let j = idx % batch[i];
                idx /= batch[i];
                oa += j * ast[i];
                ob += j * bst[i];
            }
            (oa, ob)
        };
        let (pa, pb, pc) = (SendPtr(pa as *mut u16), SendPtr(pb as *mut u16), SendPtr(pc));
        let one = |i: usize, t: usize| {
            let (pa, pb, pc) = (pa, pb, pc);
            let (oa, ob) = offsets(i);
            // SAFETY: entry i of the checked operands; entries write disjoint output matrices.
            unsafe {
                super::bf16gemm::gemm(
                    (m, n, k),
                    pc.0.add(i * m * n),
                    n,
                    pa.0.add(oa),
                    (ast[r - 2], ast[r - 1]),
                    pb.0.add(ob),
                    (bst[r - 2], bst[r - 1]),
                    acc,
                    t,
                )
            };
        };
        let per = m * n * k.max(1);
        if threads > 1 && per >= PAR_WORK {
            (0..nb).for_each(|i| one(i, threads));
        } else if threads > 1 && nb * per >= PAR_WORK {
            let grain = BATCH_GRAIN_WORK.div_ceil(per).max(1);
            crate::threads::parallel_for(nb, grain, |s, e| (s..e).for_each(|i| one(i, 1)));
        } else {
            (0..nb).for_each(|i| one(i, 1));
        }
    }
    Ok(out)
}

/// Monomorphic entry: routes `T` to its kernel (only called for native dtypes).
fn dispatch_native<T: Element>(
    a: &Tensor,
    b: &Tensor,
    dst: Option<&Tensor>,
    read_dst: bool,
    beta: Scalar,
    alpha: Scalar,
) -> Result<Tensor> {
    macro_rules! go {
        ($t:ty) => {{
            let be = if read_dst { Some(<$t>::from_scalar(beta)) } else { None };
            bmm_native::<$t>(a, b, <$t>::from_scalar(alpha), be, dst)
        }};
    }
    match T::DTYPE {
        DType::F32 => go!(f32),
        DType::F64 => go!(f64),
        DType::U8 => go!(u8),
        DType::I32 => go!(i32),
        DType::I64 => go!(i64),
        d => bail!(NotImplemented, "matmul: no native kernel for {d}"),
    }
}

// ------------------------------------------------------------------------------------------
// Argument checks shared by the public ops

fn check_same_dtype_mm(a: &Tensor, b: &Tensor) -> Result<()> {
    if a.dtype() != b.dtype() {
        bail!(
            DType,
            "expected m1 and m2 to have the same dtype, but got: {} != {}",
            a.dtype().cpp_name(),
            b.dtype().cpp_name()
        );
    }
    if a.dtype() == DType::Bool {
        bail!(NotImplemented, "\"addmm_impl_cpu_\" not implemented for 'Bool'");
    }
    Ok(())
}

fn check_mm_shapes(a: &Tensor, b: &Tensor, op: &str) -> Result<()> {
    if a.rank() != 2 {
        bail!(Shape, "{op}: self must be a matrix, got {}-D tensor", a.rank());
    }
    if b.rank() != 2 {
        bail!(Shape, "{op}: mat2 must be a matrix, got {}-D tensor", b.rank());
    }
    if a.dims()[1] != b.dims()[0] {
        bail!(
            Shape,
            "{op}: mat1 and mat2 shapes cannot be multiplied ({}x{} and {}x{})",
            a.dims()[0],
            a.dims()[1],
            b.dims()[0],
            b.dims()[1]
        );
    }
    Ok(())
}

fn check_bmm(a: &Tensor, b: &Tensor, op: &str) -> Result<()> {
    if a.rank() != 3 {
        bail!(Shape, "{op}: batch1 must be a 3D tensor");
    }
    if b.rank() != 3 {
        bail!(Shape, "{op}: batch2 must be a 3D tensor");
    }
    if a.dtype() != b.dtype() {
        bail!(DType, "expected scalar type {} but found {}", a.dtype().type_name(), b.dtype().type_name());
    }
    if a.dtype() == DType::Bool {
        bail!(NotImplemented, "\"bmm\" not implemented for 'Bool'");
    }
    let (bs, k) = (a.dims()[0], a.dims()[2]);
    if b.dims()[0] != bs || b.dims()[1] != k {
        bail!(
            Shape,
            "Expected size for first two dimensions of batch2 tensor to be: [{bs}, {k}] but got: [{}, {}].",
            b.dims()[0],
            b.dims()[1]
        );
    }
    Ok(())
}

/// Checks that `input` broadcasts to `shape` (PyTorch's expand message) and its dtype.
fn check_input(input: &Tensor, shape: &[usize], dtype: DType, other: &str, op: &str) -> Result<()> {
    input.layout().expand(shape, op)?;
    if input.dtype() != dtype {
        bail!(
            DType,
            "self and {other} must have the same dtype, but got {} and {}",
            input.dtype().type_name(),
            dtype.type_name()
        );
    }
    Ok(())
}

/// Validates the integer-vs-float scalar rule (PyTorch truncates float alpha/beta for integer
/// products, so nothing to reject) and returns the scalars unchanged.
fn scalars(beta: impl Into<Scalar>, alpha: impl Into<Scalar>) -> (Scalar, Scalar) {
    (beta.into(), alpha.into())
}

// ------------------------------------------------------------------------------------------
// matmul planning

/// How `matmul` maps its operands onto a batched product.
struct Plan {
    a: Tensor,
    b: Tensor,
    /// Shape of the user-visible result.
    result: Vec<usize>,
    /// Dims to unsqueeze (in order) to view the result as `(batch..., m, n)`.
    inserted: &'static [isize],
}

/// PyTorch's `matmul` rules: 1-D operands get a dim prepended (left) or appended (right)
/// that is removed from the result; batch dims broadcast.
fn plan_matmul(a: &Tensor, b: &Tensor) -> Result<Plan> {
    let (ra, rb) = (a.rank(), b.rank());
    if ra == 0 || rb == 0 {
        bail!(Shape, "both arguments to matmul need to be at least 1D, but they are {ra}D and {rb}D");
    }
    match (ra, rb) {
        (1, 1) => {
            if a.dims()[0] != b.dims()[0] {
                bail!(
                    Shape,
                    "inconsistent tensor size, expected tensor [{}] and src [{}] to have the same number of elements, but got {} and {} elements respectively",
                    a.dims()[0],
                    b.dims()[0],
                    a.dims()[0],
                    b.dims()[0]
                );
            }
            if a.dtype() != b.dtype() {
                bail!(
                    DType,
                    "dot : expected both vectors to have same dtype, but found {} and {}",
                    a.dtype().type_name(),
                    b.dtype().type_name()
                );
            }
            if a.dtype() == DType::Bool {
                bail!(NotImplemented, "\"dot\" not implemented for 'Bool'");
            }
            Ok(Plan { a: a.unsqueeze(0)?, b: b.unsqueeze(1)?, result: vec![], inserted: &[0, 1] })
        }
        (_, 1) => {
            // (batch..., m, k) @ (k): a matrix-vector product per batch.
            let k = a.dims()[ra - 1];
            if k != b.dims()[0] {
                let m: usize = a.dims()[..ra - 1].iter().product();
                bail!(Shape, "size mismatch, got input ({m}), mat ({m}x{k}), vec ({})", b.dims()[0]);
            }
            check_same_dtype_mm(a, b)?;
            let mut bd: Vec<usize> = a.dims()[..ra - 2].to_vec();
            bd.extend([k, 1]);
            let bv = b.unsqueeze(1)?.broadcast_to(&bd)?;
            Ok(Plan { a: a.clone(), b: bv, result: a.dims()[..ra - 1].to_vec(), inserted: &[-1] })
        }
        (1, _) => {
            let k = a.dims()[0];
            let batch = &b.dims()[..rb - 2];
            if rb == 2 {
                if b.dims()[0] != k {
                    bail!(
                        Shape,
                        "mm: mat1 and mat2 shapes cannot be multiplied (1x{k} and {}x{})",
                        b.dims()[0],
                        b.dims()[1]
                    );
                }
            } else if b.dims()[rb - 2] != k {
                bail!(
                    Shape,
                    "Expected size for first two dimensions of batch2 tensor to be: [{}, {k}] but got: [{}, {}].",
                    batch.iter().product::<usize>(),
                    batch.iter().product::<usize>(),
                    b.dims()[rb - 2]
                );
            }
            check_same_dtype_mm(a, b)?;
            let mut ad: Vec<usize> = batch.to_vec();
            ad.extend([1, k]);
            let av = a.unsqueeze(0)?.broadcast_to(&ad)?;
            let mut result = batch.to_vec();
            result.push(b.dims()[rb - 1]);
            Ok(Plan { a: av, b: b.clone(), result, inserted: &[-2] })
        }
        _ => {
            let (m, k1) = (a.dims()[ra - 2], a.dims()[ra - 1]);
            let (k2, n) = (b.dims()[rb - 2], b.dims()[rb - 1]);
            let batch = broadcast_shapes(&a.dims()[..ra - 2], &b.dims()[..rb - 2], "matmul")
                .map_err(|e| crate::err!(Shape, "{}", e.message().trim_start_matches("matmul: ")))?;
            if k1 != k2 {
                if rb == 2 {
                    let rows: usize = a.dims()[..ra - 1].iter().product();
                    bail!(Shape, "mm: mat1 and mat2 shapes cannot be multiplied ({rows}x{k1} and {k2}x{n})");
                }
                let nb = batch.numel();
                bail!(
                    Shape,
                    "Expected size for first two dimensions of batch2 tensor to be: [{nb}, {k1}] but got: [{nb}, {k2}]."
                );
            }
            check_same_dtype_mm(a, b)?;
            let mut ad: Vec<usize> = batch.dims().to_vec();
            ad.extend([m, k1]);
            let mut bd: Vec<usize> = batch.dims().to_vec();
            bd.extend([k2, n]);
            let mut result = batch.dims().to_vec();
            result.extend([m, n]);
            Ok(Plan { a: a.broadcast_to(&ad)?, b: b.broadcast_to(&bd)?, result, inserted: &[] })
        }
    }
}

/// `out` (of the planned result's shape) viewed as `(batch..., m, n)`.
fn batched_view_of(out: &Tensor, plan: &Plan) -> Result<Tensor> {
    let mut v = out.clone();
    for &d in plan.inserted {
        v = v.unsqueeze(d)?;
    }
    Ok(v)
}

// ------------------------------------------------------------------------------------------
// Public API

impl Tensor {
    /// Matrix product with PyTorch's rules (`torch.matmul`, `a @ b`): 1-D·1-D is a dot
    /// product, 2-D·1-D a matrix-vector product, 1-D·2-D a vector-matrix product, 2-D·2-D a
    /// matrix product, and anything with more dims a batched product whose batch dims
    /// broadcast. Both operands must have the same dtype (float or integer; bool is an error).
    ///
    /// ```
    /// use pyrite_core::Tensor;
    /// let a = Tensor::new([[1f32, 2.], [3., 4.]])?;
    /// let b = Tensor::new([[5f32, 6.], [7., 8.]])?;
    /// assert_eq!(a.matmul(&b)?.to_vec2::<f32>()?, vec![vec![19., 22.], vec![43., 50.]]);
    /// let v = Tensor::new([1f32, 1.])?;
    /// assert_eq!(a.matmul(&v)?.to_vec::<f32>()?, vec![3., 7.]);
    /// // A batch of 4 matrices times one matrix: the batch dims broadcast.
    /// let x = Tensor::ones([4, 3, 2], pyrite_core::DType::F32)?;
    /// assert_eq!(x.matmul(&a)?.dims(), &[4, 3, 2]);
    /// # Ok::<(), pyrite_core::Error>(())
    /// ```
    pub fn matmul(&self, other: &Tensor) -> Result<Tensor> {
        crate::profiler_record::profiled!("aten::matmul", [self, other], {
            if let Some(r) = crate::autocast::dispatch("matmul", &[Some(self), Some(other)], |t| {
                let (a, b) = (t.at(0), t.at(1));
                a.matmul(b)
            }) {
                return r;
            }
            let plan = plan_matmul(self, other)?;
            let r =
                addbmm_core(&plan.a, &plan.b, None, Scalar::Int(0), Scalar::Int(1), None, "addmm_impl_cpu_")?;
            let r = product_ad(
                if plan.a.rank() == 2 { "MmBackward0" } else { "BmmBackward0" },
                &plan.a,
                &plan.b,
                r,
            )?;
            if r.dims() == plan.result.as_slice() {
                Ok(r)
            } else {
                r.view(plan.result)
            }
        })
    }

    /// `torch.matmul(a, b, out=out)`: writes the product into `out`, which must already have
    /// the result's shape and dtype (any strides); returns `out`.
    ///
    /// ```
    /// use pyrite_core::{DType, Tensor};
    /// let a = Tensor::new([[1f32, 2.], [3., 4.]])?;
    /// let out = Tensor::zeros([2, 2], DType::F32)?;
    /// a.matmul_out(&a, &out)?;
    /// assert_eq!(out.to_vec2::<f32>()?, vec![vec![7., 10.], vec![15., 22.]]);
    /// # Ok::<(), pyrite_core::Error>(())
    /// ```
    pub fn matmul_out(&self, other: &Tensor, out: &Tensor) -> Result<Tensor> {
        let plan = plan_matmul(self, other)?;
        check_out(out, &plan.result, self.dtype(), "matmul")?;
        let view = batched_view_of(out, &plan)?;
        addbmm_core(&plan.a, &plan.b, None, Scalar::Int(0), Scalar::Int(1), Some(&view), "addmm_impl_cpu_")?;
        Ok(out.clone())
    }

    /// Matrix product of two 2-D tensors (`torch.mm`).
    ///
    /// ```
    /// use pyrite_core::Tensor;
    /// let a = Tensor::new([[1i64, 2, 3]])?;
    /// let b = Tensor::new([[1i64], [1], [1]])?;
    /// assert_eq!(a.mm(&b)?.to_vec2::<i64>()?, vec![vec![6]]);
    /// assert!(a.mm(&a).is_err()); // 1x3 and 1x3 cannot be multiplied
    /// # Ok::<(), pyrite_core::Error>(())
    /// ```
    pub fn mm(&self, mat2: &Tensor) -> Result<Tensor> {
        crate::profiler_record::profiled!("aten::mm", [self, mat2], {
            if let Some(r) = crate::autocast::dispatch("mm", &[Some(self), Some(mat2)], |t| {
                let (a, b) = (t.at(0), t.at(1));
                a.mm(b)
            }) {
                return r;
            }
            check_mm_shapes(self, mat2, "mm")?;
            check_same_dtype_mm(self, mat2)?;
            let r = addbmm_core(self, mat2, None, Scalar::Int(0), Scalar::Int(1), None, "addmm_impl_cpu_")?;
            product_ad("MmBackward0", self, mat2, r)
        })
    }

    /// `torch.mm(a, b, out=out)`; returns `out`.
    pub fn mm_out(&self, mat2: &Tensor, out: &Tensor) -> Result<Tensor> {
        check_mm_shapes(self, mat2, "mm")?;
        check_same_dtype_mm(self, mat2)?;
        check_out(out, &[self.dims()[0], mat2.dims()[1]], self.dtype(), "mm")?;
        addbmm_core(self, mat2, None, Scalar::Int(0), Scalar::Int(1), Some(out), "addmm_impl_cpu_")
    }

    /// Batched matrix product of two 3-D tensors with equal batch sizes (`torch.bmm`; no
    /// broadcasting, use [`Tensor::matmul`] for that).
    ///
    /// ```
    /// use pyrite_core::{DType, Tensor};
    /// let a = Tensor::ones([5, 2, 3], DType::F64)?;
    /// let b = Tensor::ones([5, 3, 4], DType::F64)?;
    /// let c = a.bmm(&b)?;
    /// assert_eq!(c.dims(), &[5, 2, 4]);
    /// assert_eq!(c.to_vec::<f64>()?[0], 3.0);
    /// # Ok::<(), pyrite_core::Error>(())
    /// ```
    pub fn bmm(&self, mat2: &Tensor) -> Result<Tensor> {
        crate::profiler_record::profiled!("aten::bmm", [self, mat2], {
            if let Some(r) = crate::autocast::dispatch("bmm", &[Some(self), Some(mat2)], |t| {
                let (a, b) = (t.at(0), t.at(1));
                a.bmm(b)
            }) {
                return r;
            }
            check_bmm(self, mat2, "bmm")?;
            let r = addbmm_core(self, mat2, None, Scalar::Int(0), Scalar::Int(1), None, "bmm")?;
            product_ad("BmmBackward0", self, mat2, r)
        })
    }

    /// `F.linear(self, weight, bias)` for a matrix input: `self @ weight.T + bias`, with
    /// `weight` `[out, in]` as PyTorch stores it. One product and, under autograd, one node
    /// (`AddmmBackward0`, or `MmBackward0` without a bias) whose formulas read the weight
    /// in place (no transposed view is recorded): the per-call cost of a small linear layer.
    ///
    /// ```
    /// use pyrite_core::Tensor;
    /// let x = Tensor::new([[1f32, 2.]])?;
    /// let w = Tensor::new([[1f32, 0.], [0., 1.], [1., 1.]])?;
    /// let b = Tensor::new([0.5f32, 0.5, 0.5])?;
    /// assert_eq!(x.linear(&w, Some(&b))?.to_vec2::<f32>()?, vec![vec![1.5, 2.5, 3.5]]);
    /// # Ok::<(), pyrite_core::Error>(())
    /// ```
    pub fn linear(&self, weight: &Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
        crate::profiler_record::profiled!("aten::linear", [self, weight], {
            if let Some(r) = crate::autocast::dispatch("linear", &[Some(self), Some(weight), bias], |t| {
                let (x, w, b) = (t.at(0), t.at(1), t.opt(2));
                x.linear(w, b)
            }) {
                return r;
            }
            if self.rank() != 2 || weight.rank() != 2 || self.dims()[1] != weight.dims()[1] {
                let (m, k) =
                    if self.rank() == 2 { (self.dims()[0], self.dims()[1]) } else { (1, self.numel()) };
                let (wo, wi) = if weight.rank() == 2 {
                    (weight.dims()[0], weight.dims()[1])
                } else {
                    (weight.numel(), 1)
                };
                bail!(Shape, "linear: mat1 and mat2 shapes cannot be multiplied ({m}x{k} and {wi}x{wo})");
            }
            check_same_dtype_mm(self, weight)?;
            let out = [self.dims()[0], weight.dims()[0]];
            if let Some(b) = bias {
                check_input(b, &out, self.dtype(), "mat2", "addmm")?;
            }
            let rec = crate::autograd::record::needs_grad(&[self, weight])
                || bias.is_some_and(|b| b.requires_grad());
            // The profiler's inner op, kept open while the node is recorded (as in PyTorch, the
            // backward node links to aten::addmm / aten::mm).
            let _mm;
            let y = {
                let _g = crate::autograd::no_grad();
                let wt = weight.t()?;
                _mm = match bias {
                    Some(b) => crate::profiler_record::op("aten::addmm", &[b, self, &wt]),
                    None => crate::profiler_record::op("aten::mm", &[self, &wt]),
                };
                match bias {
                    Some(b) => addbmm_core(
                        self,
                        &wt,
                        Some(b),
                        Scalar::Int(1),
                        Scalar::Int(1),
                        None,
                        "addmm_impl_cpu_",
                    )?,
                    None => {
                        addbmm_core(self, &wt, None, Scalar::Int(0), Scalar::Int(1), None, "addmm_impl_cpu_")?
                    }
                }
            };
            if !rec || !crate::autograd::is_grad_enabled() {
                return Ok(y);
            }
            use crate::autograd::record::{record1, Save};
            let x_and_w = [Save::Input(self), Save::Input(weight)];
            match bias {
                Some(b) => {
                    let bshape = b.shape().clone();
                    record1("AddmmBackward0", &[b, self, weight], y, &x_and_w, move |ctx, g| {
                        let g = &g[0];
                        let gb =
                            if ctx.needs_input_grad(0) { Some(g.sum_to_size(bshape.clone())?) } else { None };
                        let gx = if ctx.needs_input_grad(1) { Some(g.matmul(&ctx.saved(1)?)?) } else { None };
                        let gw =
                            if ctx.needs_input_grad(2) { Some(g.t()?.matmul(&ctx.saved(0)?)?) } else { None };
                        Ok(vec![gb, gx, gw])
                    })
                }
                None => record1("MmBackward0", &[self, weight], y, &x_and_w, move |ctx, g| {
                    let g = &g[0];
                    let gx = if ctx.needs_input_grad(0) { Some(g.matmul(&ctx.saved(1)?)?) } else { None };
                    let gw =
                        if ctx.needs_input_grad(1) { Some(g.t()?.matmul(&ctx.saved(0)?)?) } else { None };
                    Ok(vec![gx, gw])
                }),
            }
        })
    }

    /// `torch.bmm(a, b, out=out)`; returns `out`.
    pub fn bmm_out(&self, mat2: &Tensor, out: &Tensor) -> Result<Tensor> {
        check_bmm(self, mat2, "bmm")?;
        check_out(out, &[self.dims()[0], self.dims()[1], mat2.dims()[2]], self.dtype(), "bmm")?;
        addbmm_core(self, mat2, None, Scalar::Int(0), Scalar::Int(1), Some(out), "bmm")
    }

    /// `torch.addmm(input, mat1, mat2, beta=beta, alpha=alpha)`: `beta * input + alpha *
    /// (mat1 @ mat2)`, with `input` (this tensor) broadcast to the product's shape. With
    /// `beta == 0` the input is ignored (NaNs in it do not propagate). For integer tensors
    /// float scalars are truncated, as in PyTorch.
    ///
    /// ```
    /// use pyrite_core::Tensor;
    /// let bias = Tensor::new([1f32, 2.])?;
    /// let x = Tensor::new([[1f32, 0.], [0., 1.]])?;
    /// let w = Tensor::new([[2f32, 3.], [4., 5.]])?;
    /// let y = bias.addmm(&x, &w, 1, 0.5)?;
    /// assert_eq!(y.to_vec2::<f32>()?, vec![vec![2., 3.5], vec![3., 4.5]]);
    /// # Ok::<(), pyrite_core::Error>(())
    /// ```
    pub fn addmm(
        &self,
        mat1: &Tensor,
        mat2: &Tensor,
        beta: impl Into<Scalar>,
        alpha: impl Into<Scalar>,
    ) -> Result<Tensor> {
        crate::profiler_record::profiled!("aten::addmm", [self, mat1, mat2], {
            let (beta, alpha) = scalars(beta, alpha);
            if let Some(r) = crate::autocast::dispatch("addmm", &[Some(mat1), Some(mat2), Some(self)], |t| {
                let (m1, m2, s) = (t.at(0), t.at(1), t.opt(2));
                {
                    s.unwrap().addmm(m1, m2, beta, alpha)
                }
            }) {
                return r;
            }
            check_mm_shapes(mat1, mat2, "addmm")?;
            check_same_dtype_mm(mat1, mat2)?;
            check_input(self, &[mat1.dims()[0], mat2.dims()[1]], mat1.dtype(), "mat2", "addmm")?;
            if crate::autograd::record::needs_grad(&[self, mat1, mat2]) {
                return scaled_product_ad("AddmmBackward0", self, mat1, mat2, beta, alpha, "addmm_impl_cpu_");
            }
            addbmm_core(mat1, mat2, Some(self), beta, alpha, None, "addmm_impl_cpu_")
        })
    }

    /// `torch.addmm(input, mat1, mat2, beta=beta, alpha=alpha, out=out)`; returns `out`.
    /// `out` may be `input` itself (then it must have the full result shape).
    pub fn addmm_out(
        &self,
        mat1: &Tensor,
        mat2: &Tensor,
        beta: impl Into<Scalar>,
        alpha: impl Into<Scalar>,
        out: &Tensor,
    ) -> Result<Tensor> {
        let (beta, alpha) = scalars(beta, alpha);
        check_mm_shapes(mat1, mat2, "addmm")?;
        check_same_dtype_mm(mat1, mat2)?;
        let shape = [mat1.dims()[0], mat2.dims()[1]];
        check_input(self, &shape, mat1.dtype(), "mat2", "addmm")?;
        check_out(out, &shape, mat1.dtype(), "addmm")?;
        addbmm_core(mat1, mat2, Some(self), beta, alpha, Some(out), "addmm_impl_cpu_")
    }

    /// In-place `input.addmm_(mat1, mat2, beta=beta, alpha=alpha)`; returns `self`.
    pub fn addmm_(
        &self,
        mat1: &Tensor,
        mat2: &Tensor,
        beta: impl Into<Scalar>,
        alpha: impl Into<Scalar>,
    ) -> Result<Tensor> {
        let (beta, alpha) = (beta.into(), alpha.into());
        crate::autograd::record::inplace_ad(
            self,
            &[mat1, mat2],
            |s| s.addmm(mat1, mat2, beta, alpha),
            || self.addmm_out(mat1, mat2, beta, alpha, self).map(drop),
        )?;
        Ok(self.clone())
    }

    /// `torch.baddbmm(input, batch1, batch2, beta=beta, alpha=alpha)`: `beta * input + alpha
    /// * bmm(batch1, batch2)`, with `input` broadcast to the result's shape.
    ///
    /// ```
    /// use pyrite_core::{DType, Tensor};
    /// let a = Tensor::ones([2, 1, 3], DType::F32)?;
    /// let b = Tensor::ones([2, 3, 1], DType::F32)?;
    /// let c = Tensor::new([10f32])?.baddbmm(&a, &b, 1, 2)?;
    /// assert_eq!(c.to_vec::<f32>()?, vec![16., 16.]);
    /// # Ok::<(), pyrite_core::Error>(())
    /// ```
    pub fn baddbmm(
        &self,
        batch1: &Tensor,
        batch2: &Tensor,
        beta: impl Into<Scalar>,
        alpha: impl Into<Scalar>,
    ) -> Result<Tensor> {
        crate::profiler_record::profiled!("aten::baddbmm", [self, batch1, batch2], {
            let (beta, alpha) = scalars(beta, alpha);
            if let Some(r) =
                crate::autocast::dispatch("baddbmm", &[Some(batch1), Some(batch2), Some(self)], |t| {
                    let (b1, b2, s) = (t.at(0), t.at(1), t.opt(2));
                    {
                        s.unwrap().baddbmm(b1, b2, beta, alpha)
                    }
                })
            {
                return r;
            }
            check_bmm(batch1, batch2, "baddbmm")?;
            let shape = [batch1.dims()[0], batch1.dims()[1], batch2.dims()[2]];
            check_input(self, &shape, batch1.dtype(), "batch2", "baddbmm")?;
            if crate::autograd::record::needs_grad(&[self, batch1, batch2]) {
                return scaled_product_ad("BaddbmmBackward0", self, batch1, batch2, beta, alpha, "baddbmm");
            }
            addbmm_core(batch1, batch2, Some(self), beta, alpha, None, "baddbmm")
        })
    }

    /// `torch.baddbmm(..., out=out)`; returns `out` (which may be `input` itself).
    pub fn baddbmm_out(
        &self,
        batch1: &Tensor,
        batch2: &Tensor,
        beta: impl Into<Scalar>,
        alpha: impl Into<Scalar>,
        out: &Tensor,
    ) -> Result<Tensor> {
        let (beta, alpha) = scalars(beta, alpha);
        check_bmm(batch1, batch2, "baddbmm")?;
        let shape = [batch1.dims()[0], batch1.dims()[1], batch2.dims()[2]];
        check_input(self, &shape, batch1.dtype(), "batch2", "baddbmm")?;
        check_out(out, &shape, batch1.dtype(), "baddbmm")?;
        addbmm_core(batch1, batch2, Some(self), beta, alpha, Some(out), "baddbmm")
    }

    /// Matrix-vector product of a 2-D and a 1-D tensor (`torch.mv`).
    ///
    /// ```
    /// use pyrite_core::Tensor;
    /// let m = Tensor::new([[1f32, 2.], [3., 4.], [5., 6.]])?;
    /// let v = Tensor::new([1f32, -1.])?;
    /// assert_eq!(m.mv(&v)?.to_vec::<f32>()?, vec![-1., -1., -1.]);
    /// # Ok::<(), pyrite_core::Error>(())
    /// ```
    pub fn mv(&self, vec: &Tensor) -> Result<Tensor> {
        if let Some(r) = crate::autocast::dispatch("mv", &[Some(self), Some(vec)], |t| t.at(0).mv(t.at(1))) {
            return r;
        }
        if self.rank() != 2 || vec.rank() != 1 {
            bail!(Shape, "vector + matrix @ vector expected, got 1, {}, {}", self.rank(), vec.rank());
        }
        if self.dims()[1] != vec.dims()[0] {
            bail!(
                Shape,
                "size mismatch, got input ({}), mat ({}x{}), vec ({})",
                self.dims()[0],
                self.dims()[0],
                self.dims()[1],
                vec.dims()[0]
            );
        }
        if self.dtype() != vec.dtype() {
            bail!(
                DType,
                "addmv input tensors must have the same dtype, but got {} and {}",
                self.dtype().type_name(),
                vec.dtype().type_name()
            );
        }
        if self.dtype() == DType::Bool {
            bail!(NotImplemented, "\"addmv_impl_cpu\" not implemented for 'Bool'");
        }
        self.matmul(vec)
    }

    /// Dot product of two 1-D tensors of the same size and dtype (`torch.dot`); a 0-d result.
    ///
    /// ```
    /// use pyrite_core::Tensor;
    /// let a = Tensor::new([1i32, 2, 3])?;
    /// assert_eq!(a.dot(&a)?.item::<i32>()?, 14);
    /// # Ok::<(), pyrite_core::Error>(())
    /// ```
    pub fn dot(&self, other: &Tensor) -> Result<Tensor> {
        if let Some(r) =
            crate::autocast::dispatch("dot", &[Some(self), Some(other)], |t| t.at(0).dot(t.at(1)))
        {
            return r;
        }
        if self.rank() != 1 || other.rank() != 1 {
            bail!(Shape, "1D tensors expected, but got {}D and {}D tensors", self.rank(), other.rank());
        }
        self.matmul(other)
    }

    /// Outer product of two 1-D tensors (`torch.outer`): `out[i, j] = a[i] * b[j]`, with
    /// type promotion like `*` (bool inputs give a bool result).
    ///
    /// ```
    /// use pyrite_core::Tensor;
    /// let a = Tensor::new([1f32, 2.])?;
    /// let b = Tensor::new([1f32, 10., 100.])?;
    /// assert_eq!(a.outer(&b)?.to_vec2::<f32>()?, vec![vec![1., 10., 100.], vec![2., 20., 200.]]);
    /// # Ok::<(), pyrite_core::Error>(())
    /// ```
    pub fn outer(&self, other: &Tensor) -> Result<Tensor> {
        if self.rank() != 1 {
            bail!(Shape, "outer: Expected 1-D argument self, but got {}-D", self.rank());
        }
        if other.rank() != 1 {
            bail!(Shape, "outer: Expected 1-D argument vec2, but got {}-D", other.rank());
        }
        self.unsqueeze(1)?.mul(other)
    }

    /// Alias of [`Tensor::outer`] (`torch.ger`).
    pub fn ger(&self, other: &Tensor) -> Result<Tensor> {
        self.outer(other)
    }
}

/// Records `r = a @ b` for matrices or equally batched stacks of them:
/// `grad_a = g @ b^T`, `grad_b = a^T @ g`.
fn product_ad(name: &'static str, a: &Tensor, b: &Tensor, r: Tensor) -> Result<Tensor> {
    if !crate::autograd::record::needs_grad(&[a, b]) || !r.dtype().is_floating_point() {
        return Ok(r);
    }
    use crate::autograd::record::{record1, Save};
    // Each gradient is computed in its operand's memory order: for an operand that is a
    // transposed contiguous matrix (`x @ w.t()`, as in a linear layer), `(B^T A)^T` rather than
    // `A B^T`, so that the gradient reaching the contiguous leaf is contiguous and needs no copy
    // (PyTorch's `mm_mat2_backward` does the same).
    let (a_t, b_t) = (is_transposed(a), is_transposed(b));
    record1(name, &[a, b], r, &[Save::Input(a), Save::Input(b)], move |ctx, g| {
        let g = &g[0];
        let tr = |t: &Tensor| t.transpose(-1, -2);
        let ga = ctx
            .needs_input_grad(0)
            .then(|| {
                let b = ctx.saved(1)?;
                if a_t {
                    tr(&b.matmul(&tr(g)?)?)
                } else {
                    g.matmul(&tr(&b)?)
                }
            })
            .transpose()?;
        let gb = ctx
            .needs_input_grad(1)
            .then(|| {
                let a = ctx.saved(0)?;
                if b_t {
                    tr(&tr(g)?.matmul(&a)?)
                } else {
                    tr(&a)?.matmul(g)
                }
            })
            .transpose()?;
        Ok(vec![ga, gb])
    })
}

/// Whether the last two dims of `t` are laid out column-major (a transposed matrix).
fn is_transposed(t: &Tensor) -> bool {
    let r = t.rank();
    r >= 2 && t.stride()[r - 2] == 1 && t.stride()[r - 1] >= t.dims()[r - 2].max(1) && t.dims()[r - 1] > 1
}

/// `beta * input + alpha * (a @ b)` recorded as one node (`AddmmBackward0` /
/// `BaddbmmBackward0`), computed by the same kernel as without autograd: the input's gradient
/// is `beta * g` summed back to its (broadcast) shape, `a`'s is `alpha * g @ b^T`, `b`'s is
/// `alpha * a^T @ g`; all of them recorded ops, so double backward works.
fn scaled_product_ad(
    name: &'static str,
    input: &Tensor,
    a: &Tensor,
    b: &Tensor,
    beta: Scalar,
    alpha: Scalar,
    core: &str,
) -> Result<Tensor> {
    let y = {
        let _g = crate::autograd::no_grad();
        addbmm_core(a, b, Some(input), beta, alpha, None, core)?
    };
    let ishape = input.shape().clone();
    crate::autograd::record::record1(
        name,
        &[input, a, b],
        y,
        &[crate::autograd::record::Save::Input(a), crate::autograd::record::Save::Input(b)],
        move |ctx, g| {
            let g = &g[0];
            let gi = if ctx.needs_input_grad(0) {
                Some(g.mul_scalar(beta)?.sum_to_size(ishape.clone())?)
            } else {
                None
            };
            let ga = if ctx.needs_input_grad(1) {
                Some(g.matmul(&ctx.saved(1)?.transpose(-2, -1)?)?.mul_scalar(alpha)?)
            } else {
                None
            };
            let gb = if ctx.needs_input_grad(2) {
                Some(ctx.saved(0)?.transpose(-2, -1)?.matmul(g)?.mul_scalar(alpha)?)
            } else {
                None
            };
            Ok(vec![gi, ga, gb])
        },
    )
}
