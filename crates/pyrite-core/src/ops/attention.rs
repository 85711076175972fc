//! Fused attention on the CPU ("flash attention"): `softmax(q k^T * scale + mask) v` computed
//! block by block with an online softmax, so the `L x S` score matrix is never written to
//! memory, and its backward, which recomputes each block of scores from the saved row
//! log-sum-exp instead of keeping the probabilities.
//!
//! These are kernels, not recorded ops: `nn::functional::scaled_dot_product_attention` wraps
//! them in an autograd function (and falls back to composed ops where they do not apply).
//!
//! Layout: `q` is `[B, H, L, E]`, `k` `[B, Hk, S, E]`, `v` `[B, Hk, S, Ev]`, with `H` a
//! multiple of `Hk` (grouped-query attention: query head `h` reads key/value head
//! `h / (H / Hk)`). Any strides are accepted (expanded batch dims, the column slices of a
//! packed projection); a last dim whose stride is not 1 is copied first. The optional float
//! mask is added to the scores and may be any broadcast view of `[B, H, L, S]`. `is_causal`
//! masks key `j` from query `i` when `j > i` (the top-left aligned lower triangle, as
//! PyTorch's `is_causal`). A query row whose keys are all masked gets output 0 and
//! log-sum-exp `-inf` (PyTorch's behaviour for fully masked rows), and zero gradients.
//!
//! The work is split into tasks on the intra-op pool: a task per (batch, head, block of 64
//! query rows) in the forward pass; a task per (batch, key/value head) in the backward pass,
//! which owns that head's `dk`/`dv` and the `dq` of its query heads, so that no two tasks
//! write the same element. Each block product runs on one thread through `gemm_raw`.
//!
//! ```
//! use pyrite_core::ops::attention::FlashAttention;
//! use pyrite_core::{DType, Tensor};
//! let q = Tensor::randn([2, 4, 5, 8], DType::F32)?;
//! let k = Tensor::randn([2, 4, 7, 8], DType::F32)?;
//! let v = Tensor::randn([2, 4, 7, 3], DType::F32)?;
//! let attn = FlashAttention { q: &q, k: &k, v: &v, mask: None, scale: 8f64.powf(-0.5), is_causal: false };
//! let (out, lse) = attn.forward()?;
//! let want = q.matmul(&k.transpose(-2, -1)?)?.mul_scalar(8f64.powf(-0.5))?.softmax(-1)?.matmul(&v)?;
//! assert!(out.allclose(&want, 1e-5, 1e-6, false)?);
//! assert_eq!(lse.dims(), &[2, 4, 5]);
//! # Ok::<(), pyrite_core::Error>(())
//! ```

use super::linalg::gemm_raw;
use super::reduce::{simd, Real};
use super::softmax::exp_nonpos;
use super::{Guard, SendPtr};
use crate::alloc::CpuBuffer;
use crate::storage::StorageCell;
use crate::threads::run_tasks;
use crate::{bail, DType, Element, Result, Shape, Tensor};

/// Query rows per block.
const BQ: usize = 64;
/// Keys per block.
const BK: usize = 128;

/// Lanes of the row reductions (independent accumulators, so that they vectorise).
const LANES: usize = 16;

/// The maximum of a row (NaN is skipped here; it reaches the result through `exp`).
#[inline(always)]
fn row_max<T: Flash>(row: &[T]) -> T {
    let mut m = [T::NEG_INF; LANES];
    let mut chunks = row.chunks_exact(LANES);
    for c in &mut chunks {
        for l in 0..LANES {
            m[l] = if c[l] > m[l] { c[l] } else { m[l] };
        }
    }
    let mut r = T::NEG_INF;
    for &x in m.iter().chain(chunks.remainder()) {
        r = if x > r { x } else { r };
    }
    r
}

/// `row[i] = exp(row[i] - sub)` for every element, returning their sum.
#[inline(always)]
fn exp_row<T: Flash>(row: &mut [T], sub: T) -> T {
    let mut s = [T::ZERO; LANES];
    let mut chunks = row.chunks_exact_mut(LANES);
    for c in &mut chunks {
        for l in 0..LANES {
            c[l] = (c[l] - sub).exp_le0();
            s[l] = s[l] + c[l];
        }
    }
    let mut r = T::ZERO;
    for x in chunks.into_remainder() {
        *x = (*x - sub).exp_le0();
        r = r + *x;
    }
    s.iter().fold(r, |a, &x| a + x)
}

/// The dot product of `n` elements from `a` and `b`.
///
/// # Safety
/// Both pointers must address `n` elements.
#[inline(always)]
unsafe fn dot<T: Flash>(a: *const T, b: *const T, n: usize) -> T {
    unsafe {
        let (a, b) = (std::slice::from_raw_parts(a, n), std::slice::from_raw_parts(b, n));
        let mut s = [T::ZERO; LANES];
        let (ca, cb) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
        let (ra, rb) = (ca.remainder(), cb.remainder());
        for (x, y) in ca.zip(cb) {
            for l in 0..LANES {
                s[l] = s[l] + x[l] * y[l];
            }
        }
        let r = ra.iter().zip(rb).fold(T::ZERO, |acc, (&x, &y)| acc + x * y);
        s.iter().fold(r, |a, &x| a + x)
    }
}

/// The element types the kernels run on, with an `exp` for non-positive arguments (f32 uses
/// softmax's FMA polynomial).
trait Flash: Element + Real {
    fn exp_le0(self) -> Self;
}

impl Flash for f32 {
    #[inline(always)]
    fn exp_le0(self) -> f32 {
        exp_nonpos(self)
    }
}

impl Flash for f64 {
    #[inline(always)]
    fn exp_le0(self) -> f64 {
        self.exp()
    }
}

/// One attention computation: its operands and options. See the module docs for shapes.
#[derive(Clone, Copy)]
pub struct FlashAttention<'a> {
    pub q: &'a Tensor,
    pub k: &'a Tensor,
    pub v: &'a Tensor,
    /// Added to the scores; any broadcast view of `[B, H, L, S]` in the dtype of `q`.
    pub mask: Option<&'a Tensor>,
    pub scale: f64,
    pub is_causal: bool,
}

/// The sizes of one computation.
#[derive(Clone, Copy, Debug)]
struct Dims {
    b: usize,
    h: usize,
    hk: usize,
    l: usize,
    s: usize,
    e: usize,
    ev: usize,
}

/// A 4-D strided operand: a pointer to element `[0, 0, 0, 0]` and strides in elements.
#[derive(Clone, Copy)]
struct Op4<T> {
    p: SendPtr<T>,
    st: [usize; 4],
}

impl<T> Op4<T> {
    /// The row `[b, h, i, ..]`.
    #[inline(always)]
    fn row(&self, b: usize, h: usize, i: usize) -> *mut T {
        self.p.0.wrapping_add(b * self.st[0] + h * self.st[1] + i * self.st[2])
    }
}

fn strides4(t: &Tensor) -> [usize; 4] {
    let s = t.stride();
    [s[0], s[1], s[2], s[3]]
}

/// `t` with a unit stride on its last dim (a copy only when it has another one).
fn unit_last(t: &Tensor) -> Result<Tensor> {
    if t.dims()[3] <= 1 || t.stride()[3] == 1 {
        Ok(t.clone())
    } else {
        t.contiguous()
    }
}

impl FlashAttention<'_> {
    fn dims(&self) -> Result<Dims> {
        let (q, k, v) = (self.q, self.k, self.v);
        for (n, t) in [("query", q), ("key", k), ("value", v)] {
            if t.rank() != 4 {
                bail!(Shape, "flash attention: expected a 4-D {n} [B, H, L, E], got shape {}", t.shape());
            }
            if t.dtype() != q.dtype() {
                bail!(
                    DType,
                    "flash attention: query, key and value must have one dtype, got {}, {} and {}",
                    q.dtype(),
                    k.dtype(),
                    v.dtype()
                );
            }
        }
        if !matches!(q.dtype(), DType::F32 | DType::F64) {
            bail!(DType, "flash attention: expected f32 or f64 operands, got {}", q.dtype());
        }
        let (qd, kd, vd) = (q.dims(), k.dims(), v.dims());
        let d = Dims { b: qd[0], h: qd[1], hk: kd[1], l: qd[2], s: kd[2], e: qd[3], ev: vd[3] };
        if kd[0] != d.b || vd[0] != d.b || vd[1] != d.hk || vd[2] != d.s || kd[3] != d.e {
            bail!(
                Shape,
                "flash attention: shapes do not fit: query {}, key {}, value {}",
                q.shape(),
                k.shape(),
                v.shape()
            );
        }
        if d.hk == 0 || !d.h.is_multiple_of(d.hk) {
            bail!(Shape, "flash attention: key/value heads ({}) must divide query heads ({})", d.hk, d.h);
        }
        if let Some(m) = self.mask
            && (m.dims() != [d.b, d.h, d.l, d.s] || m.dtype() != q.dtype())
        {
            bail!(
                Shape,
                "flash attention: the mask must be a {} view of shape [{}, {}, {}, {}], got {} {}",
                q.dtype(),
                d.b,
                d.h,
                d.l,
                d.s,
                m.dtype(),
                m.shape()
            );
        }
        Ok(d)
    }

    /// The attention output `[B, H, L, Ev]` (a view of a `[B, L, H, Ev]` buffer, so that
    /// merging the heads back is free) and the log-sum-exp of each score row `[B, H, L]`.
    pub fn forward(&self) -> Result<(Tensor, Tensor)> {
        let d = self.dims()?;
        let (q, k, v) = (unit_last(self.q)?, unit_last(self.k)?, unit_last(self.v)?);
        let dtype = q.dtype();
        let out_shape = Shape::from(vec![d.b, d.l, d.h, d.ev]);
        let mut out = CpuBuffer::for_shape(&out_shape, dtype.size_in_bytes())?;
        let lse_shape = Shape::from(vec![d.b, d.h, d.l]);
        let mut lse = CpuBuffer::for_shape(&lse_shape, dtype.size_in_bytes())?;
        let mut ins = vec![&q, &k, &v];
        ins.extend(self.mask);
        with_ptrs(&[], &ins, |_, p| {
            let (o, l) = (out.as_mut_ptr(), lse.as_mut_ptr());
            match dtype {
                DType::F32 => forward_t::<f32>(self, d, &ins, p, o as *mut f32, l as *mut f32),
                _ => forward_t::<f64>(self, d, &ins, p, o as *mut f64, l as *mut f64),
            }
        })?;
        let out = Tensor::from_cpu_buffer(out, out_shape, dtype).permute(&[0, 2, 1, 3])?;
        Ok((out, Tensor::from_cpu_buffer(lse, lse_shape, dtype)))
    }

    /// The gradients `(dq, dk, dv)` from the output's gradient, the output and the
    /// log-sum-exp that [`FlashAttention::forward`] returned, as fresh contiguous tensors.
    pub fn backward(
        &self,
        grad_out: &Tensor,
        out: &Tensor,
        lse: &Tensor,
    ) -> Result<(Tensor, Tensor, Tensor)> {
        let dtype = self.q.dtype();
        let dq = Tensor::empty(self.q.dims(), dtype)?;
        let dk = Tensor::empty(self.k.dims(), dtype)?;
        let dv = Tensor::empty(self.v.dims(), dtype)?;
        self.backward_into(grad_out, out, lse, &dq, &dk, &dv)?;
        Ok((dq, dk, dv))
    }

    /// [`FlashAttention::backward`] into existing tensors of the shapes of `q`, `k` and `v`
    /// (each with a unit last stride; they may be views of one buffer, e.g. the columns of a
    /// packed projection's gradient). Every element of them is written.
    pub fn backward_into(
        &self,
        grad_out: &Tensor,
        out: &Tensor,
        lse: &Tensor,
        dq: &Tensor,
        dk: &Tensor,
        dv: &Tensor,
    ) -> Result<()> {
        let d = self.dims()?;
        let dtype = self.q.dtype();
        let want_o = [d.b, d.h, d.l, d.ev];
        for (n, t, want) in
            [("grad_out", grad_out, &want_o[..]), ("out", out, &want_o[..]), ("lse", lse, &want_o[..3])]
        {
            if t.dims() != want || t.dtype() != dtype {
                bail!(
                    Shape,
                    "flash attention backward: {n} must be {dtype} {want:?}, got {} {}",
                    t.dtype(),
                    t.shape()
                );
            }
        }
        for (n, g, t) in [("dq", dq, self.q), ("dk", dk, self.k), ("dv", dv, self.v)] {
            if g.dims() != t.dims() || g.dtype() != dtype || (g.dims()[3] > 1 && g.stride()[3] != 1) {
                bail!(
                    Shape,
                    "flash attention backward: {n} must be a {dtype} {} with unit last stride, got {} {}",
                    t.shape(),
                    g.dtype(),
                    g.shape()
                );
            }
        }
        let (q, k, v) = (unit_last(self.q)?, unit_last(self.k)?, unit_last(self.v)?);
        let (go, o, lse) = (unit_last(grad_out)?, unit_last(out)?, lse.contiguous()?);
        let mut ins = vec![&q, &k, &v, &go, &o, &lse];
        ins.extend(self.mask);
        with_ptrs(&[dq, dk, dv], &ins, |w, p| match dtype {
            DType::F32 => backward_t::<f32>(self, d, &ins, p, [dq, dk, dv], w),
            _ => backward_t::<f64>(self, d, &ins, p, [dq, dk, dv], w),
        })
    }
}

/// Locks the storages of `writes` for writing and of `reads` for reading (each once, in
/// address order, as every kernel takes them) and calls `f` with a pointer to element 0 of
/// each tensor. Fails when an output shares storage with an input.
fn with_ptrs<R>(
    writes: &[&Tensor],
    reads: &[&Tensor],
    f: impl FnOnce(&[*mut u8], &[*mut u8]) -> R,
) -> Result<R> {
    for w in writes {
        w.check_inplace_allowed()?;
        if reads.iter().any(|r| r.same_storage(w)) {
            bail!(Value, "flash attention: an output shares memory with an input");
        }
    }
    let mut cells: Vec<(&StorageCell, bool)> = Vec::new();
    for (t, write) in writes.iter().map(|t| (t, true)).chain(reads.iter().map(|t| (t, false))) {
        let c = &**t.storage();
        if !cells.iter().any(|(x, _)| std::ptr::eq(*x, c)) {
            cells.push((c, write));
        }
    }
    cells.sort_by_key(|(c, _)| *c as *const StorageCell as usize);
    let mut guards = Vec::new();
    let mut bases: Vec<(usize, *mut u8)> = Vec::new();
    for (c, write) in cells {
        let key = c as *const StorageCell as usize;
        if write {
            let mut g = c.write();
            bases.push((key, g.cpu_mut().as_mut_ptr()));
            guards.push(Guard::W(g));
        } else {
            let g = c.read();
            bases.push((key, g.cpu().as_ptr() as *mut u8));
            guards.push(Guard::R(g));
        }
    }
    let ptr = |t: &Tensor| {
        let base = bases.iter().find(|(k, _)| *k == &**t.storage() as *const StorageCell as usize).unwrap().1;
        base.wrapping_add(t.storage_offset() * t.dtype().size_in_bytes())
    };
    let w: Vec<*mut u8> = writes.iter().map(|t| ptr(t)).collect();
    let r: Vec<*mut u8> = reads.iter().map(|t| ptr(t)).collect();
    let res = f(&w, &r);
    drop(guards);
    Ok(res)
}

fn op4<T>(t: &Tensor, p: *mut u8) -> Op4<T> {
    Op4 { p: SendPtr(p as *mut T), st: strides4(t) }
}

/// `s[r, c] = scale * q[i0 + r] . k[j0 + c]`, then the causal mask and the additive mask, for
/// a `bq x bk` block (row stride `bk`).
///
/// # Safety
/// The row pointers address `bq` query rows and `bk` key rows of `e` elements with the given
/// row strides; the mask row pointer (if any) the block's mask elements.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn scores<T: Flash>(
    s: &mut [T],
    (bq, bk, e): (usize, usize, usize),
    q: (*const T, usize),
    k: (*const T, usize),
    scale: T,
    causal: Option<(usize, usize)>,
    mask: Option<(*const T, usize, usize)>,
) {
    unsafe {
        if e == 0 {
            s[..bq * bk].fill(T::ZERO);
        } else {
            gemm_raw((bq, bk, e), s.as_mut_ptr(), (bk, 1), q.0, (q.1, 1), k.0, (1, k.1), scale, None, 1);
        }
        if let Some((m, ms2, ms3)) = mask {
            for r in 0..bq {
                let mr = m.wrapping_add(r * ms2);
                for (c, x) in s[r * bk..(r + 1) * bk].iter_mut().enumerate() {
                    *x = *x + *mr.add(c * ms3);
                }
            }
        }
        if let Some((i0, j0)) = causal {
            for r in 0..bq {
                // keys j > i are masked: columns c > i0 + r - j0
                let first = (i0 + r + 1).saturating_sub(j0).min(bk);
                s[r * bk + first..(r + 1) * bk].fill(T::NEG_INF);
            }
        }
    }
}

fn forward_t<T: Flash>(
    a: &FlashAttention<'_>,
    d: Dims,
    ins: &[&Tensor],
    p: &[*mut u8],
    out: *mut T,
    lse: *mut T,
) {
    let (q, k, v) = (op4::<T>(ins[0], p[0]), op4::<T>(ins[1], p[1]), op4::<T>(ins[2], p[2]));
    let mask = a.mask.map(|m| op4::<T>(m, p[3]));
    let (out, lse) = (SendPtr(out), SendPtr(lse));
    let scale = <T as Real>::from_f64(a.scale);
    let group = d.h / d.hk;
    let (bqs, bks) = (BQ, BK);
    let nqb = d.l.div_ceil(bqs);
    run_tasks(d.b * d.h * nqb, |t| {
        let (out, lse) = (out, lse);
        simd(
            #[inline(always)]
            || {
                let (bh, qb) = (t / nqb, t % nqb);
                let (bi, hi) = (bh / d.h, bh % d.h);
                let hk = hi / group;
                let i0 = qb * bqs;
                let bq = bqs.min(d.l - i0);
                let mut s = vec![T::ZERO; bq * bks];
                let mut acc = vec![T::ZERO; bq * d.ev];
                let mut m = vec![T::NEG_INF; bq];
                let mut sum = vec![T::ZERO; bq];
                let kend = if a.is_causal { d.s.min(i0 + bq) } else { d.s };
                let mut j0 = 0;
                while j0 < kend {
                    let bk = bks.min(kend - j0);
                    // SAFETY: rows i0..i0+bq of q and j0..j0+bk of k/v exist; the mask is a
                    // [B, H, L, S] view.
                    unsafe {
                        scores(
                            &mut s,
                            (bq, bk, d.e),
                            (q.row(bi, hi, i0), q.st[2]),
                            (k.row(bi, hk, j0), k.st[2]),
                            scale,
                            a.is_causal.then_some((i0, j0)),
                            mask.map(|mk| {
                                (
                                    mk.row(bi, hi, i0).wrapping_add(j0 * mk.st[3]) as *const T,
                                    mk.st[2],
                                    mk.st[3],
                                )
                            }),
                        );
                    }
                    for r in 0..bq {
                        let row = &mut s[r * bk..(r + 1) * bk];
                        let mx = row_max(row);
                        let mnew = if mx > m[r] { mx } else { m[r] };
                        if mnew == T::NEG_INF {
                            row.fill(T::ZERO);
                            continue;
                        }
                        let alpha = (m[r] - mnew).exp_le0();
                        let rs = exp_row(row, mnew);
                        sum[r] = sum[r] * alpha + rs;
                        if alpha != T::ONE {
                            for y in &mut acc[r * d.ev..(r + 1) * d.ev] {
                                *y = *y * alpha;
                            }
                        }
                        m[r] = mnew;
                    }
                    // SAFETY: as above; acc is bq x ev.
                    unsafe {
                        gemm_raw(
                            (bq, d.ev, bk),
                            acc.as_mut_ptr(),
                            (d.ev, 1),
                            s.as_ptr(),
                            (bk, 1),
                            v.row(bi, hk, j0),
                            (v.st[2], 1),
                            T::ONE,
                            Some(T::ONE),
                            1,
                        );
                    }
                    j0 += bk;
                }
                for r in 0..bq {
                    let i = i0 + r;
                    let (inv, l) = if sum[r] > T::ZERO {
                        (T::ONE / sum[r], m[r] + sum[r].ln_())
                    } else {
                        (T::ZERO, T::NEG_INF)
                    };
                    // SAFETY: out is [B, L, H, Ev] and lse [B, H, L]; this task owns these rows.
                    unsafe {
                        let o = out.0.add(((bi * d.l + i) * d.h + hi) * d.ev);
                        for c in 0..d.ev {
                            *o.add(c) = acc[r * d.ev + c] * inv;
                        }
                        *lse.0.add((bi * d.h + hi) * d.l + i) = l;
                    }
                }
            },
        )
    });
}

/// Zeroes `rows` rows of `n` elements from `p` (row stride `rs`).
///
/// # Safety
/// The rows must be valid for writes.
unsafe fn zero_rows<T: Flash>(p: *mut T, rows: usize, n: usize, rs: usize) {
    unsafe {
        for r in 0..rows {
            std::slice::from_raw_parts_mut(p.add(r * rs), n).fill(T::ZERO);
        }
    }
}

fn backward_t<T: Flash>(
    a: &FlashAttention<'_>,
    d: Dims,
    ins: &[&Tensor],
    p: &[*mut u8],
    outs: [&Tensor; 3],
    w: &[*mut u8],
) {
    let (q, k, v) = (op4::<T>(ins[0], p[0]), op4::<T>(ins[1], p[1]), op4::<T>(ins[2], p[2]));
    let (go, o, lse) = (op4::<T>(ins[3], p[3]), op4::<T>(ins[4], p[4]), SendPtr(p[5] as *mut T));
    let mask = a.mask.map(|m| op4::<T>(m, p[6]));
    let (dq, dk, dv) = (op4::<T>(outs[0], w[0]), op4::<T>(outs[1], w[1]), op4::<T>(outs[2], w[2]));
    let scale = <T as Real>::from_f64(a.scale);
    let group = d.h / d.hk;
    let (bqs, bks) = (BQ, BK);
    run_tasks(d.b * d.hk, |t| {
        let lse = lse;
        simd(
            #[inline(always)]
            || {
                let (bi, hk) = (t / d.hk, t % d.hk);
                // SAFETY: every pointer below addresses rows of [B, H, L, *] / [B, Hk, S, *]
                // views within their extents; this task alone writes dq[bi, its heads] and
                // dk/dv[bi, hk].
                unsafe {
                    zero_rows(dk.row(bi, hk, 0), d.s, d.e, dk.st[2]);
                    zero_rows(dv.row(bi, hk, 0), d.s, d.ev, dv.st[2]);
                    for g in 0..group {
                        zero_rows(dq.row(bi, hk * group + g, 0), d.l, d.e, dq.st[2]);
                    }
                    // D[g, i] = dO[i] . O[i]
                    let mut dd = vec![T::ZERO; group * d.l];
                    for g in 0..group {
                        for i in 0..d.l {
                            let (gr, or) = (go.row(bi, hk * group + g, i), o.row(bi, hk * group + g, i));
                            dd[g * d.l + i] = dot(gr, or, d.ev);
                        }
                    }
                    let mut s = vec![T::ZERO; bqs * bks];
                    let mut dp = vec![T::ZERO; bqs * bks];
                    let mut j0 = 0;
                    while j0 < d.s {
                        let bk = bks.min(d.s - j0);
                        for g in 0..group {
                            let hi = hk * group + g;
                            let mut i0 = if a.is_causal { j0 / bqs * bqs } else { 0 };
                            while i0 < d.l {
                                let bq = bqs.min(d.l - i0);
                                scores(
                                    &mut s,
                                    (bq, bk, d.e),
                                    (q.row(bi, hi, i0), q.st[2]),
                                    (k.row(bi, hk, j0), k.st[2]),
                                    scale,
                                    a.is_causal.then_some((i0, j0)),
                                    mask.map(|mk| {
                                        (
                                            mk.row(bi, hi, i0).wrapping_add(j0 * mk.st[3]) as *const T,
                                            mk.st[2],
                                            mk.st[3],
                                        )
                                    }),
                                );
                                for r in 0..bq {
                                    let ls = *lse.0.add((bi * d.h + hi) * d.l + i0 + r);
                                    let row = &mut s[r * bk..(r + 1) * bk];
                                    if ls == T::NEG_INF {
                                        row.fill(T::ZERO);
                                    } else {
                                        exp_row(row, ls);
                                    }
                                }
                                // dV_j += P^T dO_i
                                gemm_raw(
                                    (bk, d.ev, bq),
                                    dv.row(bi, hk, j0),
                                    (dv.st[2], 1),
                                    s.as_ptr(),
                                    (1, bk),
                                    go.row(bi, hi, i0),
                                    (go.st[2], 1),
                                    T::ONE,
                                    Some(T::ONE),
                                    1,
                                );
                                // dP = dO_i V_j^T
                                if d.ev == 0 {
                                    dp[..bq * bk].fill(T::ZERO);
                                } else {
                                    gemm_raw(
                                        (bq, bk, d.ev),
                                        dp.as_mut_ptr(),
                                        (bk, 1),
                                        go.row(bi, hi, i0),
                                        (go.st[2], 1),
                                        v.row(bi, hk, j0),
                                        (1, v.st[2]),
                                        T::ONE,
                                        None,
                                        1,
                                    );
                                }
                                // dS = P * (dP - D_i), in dp
                                for r in 0..bq {
                                    let di = dd[g * d.l + i0 + r];
                                    let (pr, dr) = (&s[r * bk..(r + 1) * bk], &mut dp[r * bk..(r + 1) * bk]);
                                    for (x, &pv) in dr.iter_mut().zip(pr) {
                                        *x = pv * (*x - di);
                                    }
                                }
                                // dQ_i += scale dS K_j;  dK_j += scale dS^T Q_i
                                gemm_raw(
                                    (bq, d.e, bk),
                                    dq.row(bi, hi, i0),
                                    (dq.st[2], 1),
                                    dp.as_ptr(),
                                    (bk, 1),
                                    k.row(bi, hk, j0),
                                    (k.st[2], 1),
                                    scale,
                                    Some(T::ONE),
                                    1,
                                );
                                gemm_raw(
                                    (bk, d.e, bq),
                                    dk.row(bi, hk, j0),
                                    (dk.st[2], 1),
                                    dp.as_ptr(),
                                    (1, bk),
                                    q.row(bi, hi, i0),
                                    (q.st[2], 1),
                                    scale,
                                    Some(T::ONE),
                                    1,
                                );
                                i0 += bq;
                            }
                        }
                        j0 += bk;
                    }
                }
            },
        )
    });
}
