//! Convolutions: `torch.nn.functional.conv1d/2d/3d` ([`conv`]) and
//! `conv_transpose1d/2d/3d` ([`conv_transpose`]), batched inputs `[N, C, *spatial]` with one,
//! two or three spatial dims, f32 and f64 (f16 and bf16 through f32 casts).
//!
//! # The scheme: im2col, then one GEMM per group per batch item
//!
//! Each batch item's input (one group's channels) is unfolded into a column buffer of
//! `C_in/groups * prod(kernel)` rows by `prod(output spatial)` columns (im2col, zeros where a
//! window reaches into the padding), and the output is one product `W_g @ col` of the group's
//! weight rows with it, written straight into the output. The backward pass for the input is
//! the transposed product `W_g^T @ grad_out` into the column buffer, folded back onto the
//! input positions (col2im); the weight's is `grad_out @ col^T`, accumulated over the batch.
//! A 1x1 convolution with stride 1 and no padding uses the input itself as the column matrix.
//! The products run on the crate's own GEMM (`linalg::gemm_raw`), single-threaded per
//! call. The work is cut into units that depend on the batch size and the geometry only (a
//! batch item; for batches under 8 an item's range of output rows), shared among the intra-op
//! threads, each thread with its own column buffer from the caching allocator. The weight
//! gradient is summed over at most eight chunks of units, the chunks' sums added in order. So
//! results never depend on the number of threads. See docs/ARCHITECTURE.md for measurements.
//!
//! # Autograd
//!
//! Both ops record PyTorch's `ConvolutionBackward0`. Its formula uses recording ops only: the
//! input's gradient is a transposed convolution of the output gradient ([`conv_transpose`]'s
//! kernel), the weight's gradient an internal op (`ConvolutionBackwardBackward0`) whose own
//! gradients are again a convolution and a transposed convolution, the bias's a sum. So double
//! (and higher) backward works for input, weight and bias.

use super::reduce::Real;
use super::SendPtr;
use crate::alloc::CpuBuffer;
use crate::autograd::record::{needs_grad, record1, Save};
use crate::shape::Shape;
use crate::{bail, DType, Element, Result, Tensor};

/// Multiply-adds below which a convolution stays on one thread.
const PAR_WORK: usize = 64 * 64 * 64;
/// Largest stride, padding, dilation or kernel size accepted (keeps index arithmetic in range).
const MAX_PARAM: usize = 1 << 40;

/// Stride, padding, dilation and groups of one convolution, padded to three spatial dims (the
/// real dims last; a 2-d convolution has a dummy first dim of size 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ConvParams {
    pub(crate) nd: usize,
    pub(crate) stride: [usize; 3],
    pub(crate) pad: [usize; 3],
    pub(crate) dil: [usize; 3],
    pub(crate) groups: usize,
}

/// PyTorch's name of the op for messages (`conv2d`, `conv_transpose1d`).
fn op_name(transposed: bool, nd: usize) -> String {
    if transposed {
        format!("conv_transpose{nd}d")
    } else {
        format!("conv{nd}d")
    }
}

/// A per-dim argument (`stride=`, ...) expanded to `nd` values: one value for every dim, or
/// one per dim (PyTorch's `expand_param_if_needed`).
pub(crate) fn expand_param(name: &str, v: &[usize], nd: usize) -> Result<Vec<usize>> {
    match v.len() {
        1 => Ok(vec![v[0]; nd]),
        n if n == nd => Ok(v.to_vec()),
        _ => bail!(
            Value,
            "expected {name} to be a single integer value or a list of {nd} values to match the convolution dimensions, but got {name}={v:?}"
        ),
    }
}

/// `v` (nd values) padded in front to three dims with `fill`.
pub(crate) fn pad3(v: &[usize], fill: usize) -> [usize; 3] {
    let mut r = [fill; 3];
    r[3 - v.len()..].copy_from_slice(v);
    r
}

/// PyTorch's C++ name of a float dtype, as in "Input type (float) and bias type (double)".
fn cpp_name(d: DType) -> &'static str {
    if d.is_floating_point() {
        d.cpp_name()
    } else {
        d.type_name()
    }
}

/// Sizes joined like PyTorch's messages: `2 x 3`.
fn join_x(v: &[i128]) -> String {
    v.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(" x ")
}

/// Where a convolution maps: a batch of `n` items, the conv's input side ("big": `big_c`
/// channels of `big` spatial sizes) and its output side ("small"), kernel `k`.
#[derive(Clone, Copy, Debug)]
struct Geo {
    n: usize,
    big_c: usize,
    small_c: usize,
    big: [usize; 3],
    small: [usize; 3],
    k: [usize; 3],
    p: ConvParams,
}

impl Geo {
    fn cin_g(&self) -> usize {
        self.big_c / self.p.groups
    }
    fn cout_g(&self) -> usize {
        self.small_c / self.p.groups
    }
    fn kk(&self) -> usize {
        self.k.iter().product()
    }
    /// Rows of the column matrix of one group: input channels of the group times kernel size.
    fn rows(&self) -> usize {
        self.cin_g() * self.kk()
    }
    fn l_big(&self) -> usize {
        self.big.iter().product()
    }
    fn l_small(&self) -> usize {
        self.small.iter().product()
    }
    /// A 1x1 kernel, stride 1, no padding: the input is its own column matrix.
    fn identity_cols(&self) -> bool {
        self.k == [1; 3] && self.p.stride == [1; 3] && self.p.pad == [0; 3]
    }
    /// Multiply-adds of one batch item, for every group.
    fn work_per_item(&self) -> usize {
        self.small_c.saturating_mul(self.rows()).saturating_mul(self.l_small())
    }
}

/// The output positions `o` in `0..o_len` whose input position `o * s + off - p` lies in
/// `0..in_len`, as a range.
#[inline]
pub(crate) fn valid_range(o_len: usize, in_len: usize, s: usize, off: usize, p: usize) -> (usize, usize) {
    let lo = if off >= p { 0 } else { (p - off).div_ceil(s) };
    let hi = if in_len + p <= off { 0 } else { (in_len + p - off).div_ceil(s) };
    let hi = hi.min(o_len);
    (lo.min(hi), hi)
}

/// Unfolds output rows `r0..r1` (a row: one `(z, y)` pair of the output) of one group of one
/// batch item (`cin_g` channels of `big` spatial sizes, contiguous) into `col`
/// (`rows x (r1 - r0) * ow`, row-major).
fn im2col<T: Copy + Default>(x: &[T], col: &mut [T], g: &Geo, r0: usize, r1: usize) {
    let [bd, bh, bw] = g.big;
    let [_, oh, ow] = g.small;
    let [kd, kh, kw] = g.k;
    let (s, p, d) = (g.p.stride, g.p.pad, g.p.dil);
    let l = (r1 - r0) * ow;
    let plane = bd * bh * bw;
    let mut row = 0;
    for c in 0..g.cin_g() {
        let xc = &x[c * plane..(c + 1) * plane];
        for a in 0..kd {
            for b in 0..kh {
                for e in 0..kw {
                    let dst = &mut col[row * l..(row + 1) * l];
                    row += 1;
                    let (d_lo, d_hi) = valid_range(g.small[0], bd, s[0], a * d[0], p[0]);
                    let (h_lo, h_hi) = valid_range(oh, bh, s[1], b * d[1], p[1]);
                    let (w_lo, w_hi) = valid_range(ow, bw, s[2], e * d[2], p[2]);
                    for r in r0..r1 {
                        let (z, y) = (r / oh, r % oh);
                        let out = &mut dst[(r - r0) * ow..(r - r0 + 1) * ow];
                        if z < d_lo || z >= d_hi || y < h_lo || y >= h_hi || w_lo >= w_hi {
                            out.fill(T::default());
                            continue;
                        }
                        let iz = z * s[0] + a * d[0] - p[0];
                        let iy = y * s[1] + b * d[1] - p[1];
                        let src = &xc[(iz * bh + iy) * bw..(iz * bh + iy + 1) * bw];
                        out[..w_lo].fill(T::default());
                        out[w_hi..].fill(T::default());
                        let base = w_lo * s[2] + e * d[2] - p[2];
                        let mid = &mut out[w_lo..w_hi];
                        if s[2] == 1 {
                            mid.copy_from_slice(&src[base..base + mid.len()]);
                        } else {
                            for (j, o) in mid.iter_mut().enumerate() {
                                *o = src[base + j * s[2]];
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The adjoint of [`im2col`] (all output rows) for channels `c0..c1` of a group: adds their
/// column rows onto their input positions in `x` (the group's planes, zeroed by the caller).
fn col2im<T: Real>(col: &[T], x: &mut [T], g: &Geo, c0: usize, c1: usize) {
    let [bd, bh, bw] = g.big;
    let [od, oh, ow] = g.small;
    let [kd, kh, kw] = g.k;
    let (s, p, d) = (g.p.stride, g.p.pad, g.p.dil);
    let l = od * oh * ow;
    let plane = bd * bh * bw;
    let mut row = c0 * g.kk();
    for c in c0..c1 {
        let xc = &mut x[c * plane..(c + 1) * plane];
        for a in 0..kd {
            for b in 0..kh {
                for e in 0..kw {
                    let src = &col[row * l..(row + 1) * l];
                    row += 1;
                    let (d_lo, d_hi) = valid_range(od, bd, s[0], a * d[0], p[0]);
                    let (h_lo, h_hi) = valid_range(oh, bh, s[1], b * d[1], p[1]);
                    let (w_lo, w_hi) = valid_range(ow, bw, s[2], e * d[2], p[2]);
                    if w_lo >= w_hi {
                        continue;
                    }
                    for z in d_lo..d_hi {
                        let iz = z * s[0] + a * d[0] - p[0];
                        for y in h_lo..h_hi {
                            let iy = y * s[1] + b * d[1] - p[1];
                            let dst = &mut xc[(iz * bh + iy) * bw..(iz * bh + iy + 1) * bw];
                            let r = &src[(z * oh + y) * ow + w_lo..(z * oh + y) * ow + w_hi];
                            let base = w_lo * s[2] + e * d[2] - p[2];
                            if s[2] == 1 {
                                for (o, &v) in dst[base..base + r.len()].iter_mut().zip(r) {
                                    *o = *o + v;
                                }
                            } else {
                                for (j, &v) in r.iter().enumerate() {
                                    let o = &mut dst[base + j * s[2]];
                                    *o = *o + v;
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// Batches at least this large are split by items alone; smaller ones also by output rows.
const ITEM_SPLIT: usize = 8;

/// How a convolution's work is cut into units: each batch item's output rows (`(z, y)` pairs
/// of the output side) in `pieces` ranges. A function of the batch size and the geometry
/// only, never of the thread count, so that every unit's products (single-threaded, on the
/// same operand blocks) round the same way whatever the number of threads.
#[derive(Clone, Copy)]
struct Units {
    pieces: usize,
    rows: usize,
    total: usize,
}

impl Units {
    fn of(g: &Geo) -> Units {
        let rows = g.small[0] * g.small[1];
        let pieces = if g.n >= ITEM_SPLIT {
            1
        } else {
            // enough units for eight threads, each piece at least 64 output positions
            ITEM_SPLIT.div_ceil(g.n.max(1)).min((g.l_small() / 64).max(1)).min(rows.max(1))
        };
        Units { pieces, rows, total: g.n * pieces }
    }
    /// Item and output rows of unit `u`.
    fn get(&self, u: usize) -> (usize, usize, usize) {
        let (i, p) = (u / self.pieces, u % self.pieces);
        (i, p * self.rows / self.pieces, (p + 1) * self.rows / self.pieces)
    }
}

/// Runs `f(first, end)` over `0..n` units: chunks of units in parallel on the intra-op
/// threads when the work is large enough, else all on the calling thread.
fn over_units(n: usize, work_per_unit: usize, f: impl Fn(usize, usize) + Sync) {
    let threads = crate::get_num_threads();
    if threads <= 1 || n < 2 || n.saturating_mul(work_per_unit) < PAR_WORK {
        return f(0, n);
    }
    let chunk = n.div_ceil(n.min(4 * threads));
    crate::threads::run_tasks(n.div_ceil(chunk), |t| f(t * chunk, ((t + 1) * chunk).min(n)));
}

/// Column buffers for the threads of a kernel, and the first allocation failure among them
/// (reported as the kernel's error once the threads are done, never a panic).
#[derive(Default)]
struct Scratch(std::sync::Mutex<Option<crate::Error>>);

impl Scratch {
    /// A buffer of `len` elements of `T` from the caching allocator; `None` after recording
    /// the failure.
    fn get<T: Element>(&self, len: usize) -> Option<CpuBuffer> {
        let bytes = len.saturating_mul(std::mem::size_of::<T>());
        match CpuBuffer::new(bytes) {
            Ok(b) => Some(b),
            Err(e) => {
                self.0.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert(e);
                None
            }
        }
    }
    fn result(self) -> Result<()> {
        match self.0.into_inner().unwrap_or_else(|p| p.into_inner()) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

/// Read access to contiguous tensors: a pointer to each one's first element, locks taken in
/// address order (as every kernel takes them).
fn read_all<const N: usize, T: Element, R>(ts: [&Tensor; N], f: impl FnOnce([SendPtr<T>; N]) -> R) -> R {
    let (_g, _, ptrs) = super::lock_all(None, ts.map(|t| &**t.storage()));
    let p = std::array::from_fn(|i| {
        debug_assert!(ts[i].is_contiguous());
        if ts[i].numel() == 0 {
            SendPtr(std::ptr::NonNull::<T>::dangling().as_ptr())
        } else {
            // SAFETY: a contiguous non-empty layout's offset lies inside its storage.
            SendPtr(unsafe { (ptrs[i] as *mut T).add(ts[i].storage_offset()) })
        }
    });
    f(p)
}

/// A fresh output tensor of `shape`, filled by `fill` through a raw pointer.
fn build_raw<T: Element>(shape: Vec<usize>, fill: impl FnOnce(SendPtr<T>)) -> Result<Tensor> {
    let shape = Shape::from(shape);
    let mut buf = CpuBuffer::for_shape(&shape, std::mem::size_of::<T>())?;
    fill(SendPtr(buf.as_mut_ptr() as *mut T));
    Ok(Tensor::from_cpu_buffer(buf, shape, T::DTYPE))
}

/// The shape `[n, c, *spatial]` for `nd` spatial dims of a padded-to-3 size.
fn nc_shape(n: usize, c: usize, sp: &[usize; 3], nd: usize) -> Vec<usize> {
    let mut v = vec![n, c];
    v.extend_from_slice(&sp[3 - nd..]);
    v
}

/// The element types of a convolution kernel: `In` for the tensors it reads (and the column
/// buffers that `im2col` fills), `Acc` for what its products add into and for its result.
/// f32 and f64 are both; bf16 reads bf16 and adds in f32 on the AVX512-BF16 kernel (the
/// caller rounds the f32 result to bf16 once).
trait Kernel {
    type In: Element + Default;
    type Acc: Real + Element;
    fn widen(x: Self::In) -> Self::Acc;
    /// `dst = lhs @ rhs` (or `+=` with `acc`) on the calling thread.
    ///
    /// # Safety
    /// As [`super::linalg::gemm_raw`]; `dst` has unit column stride.
    #[allow(clippy::too_many_arguments)]
    unsafe fn mm(
        mnk: (usize, usize, usize),
        dst: *mut Self::Acc,
        d: (usize, usize),
        lhs: *const Self::In,
        l: (usize, usize),
        rhs: *const Self::In,
        r: (usize, usize),
        acc: bool,
    );
}

/// A kernel that reads and adds in the same type (f32, f64).
struct Same<T>(std::marker::PhantomData<T>);

impl<T: Real + Element + Default> Kernel for Same<T> {
    type In = T;
    type Acc = T;
    fn widen(x: T) -> T {
        x
    }
    unsafe fn mm(
        mnk: (usize, usize, usize),
        dst: *mut T,
        d: (usize, usize),
        lhs: *const T,
        l: (usize, usize),
        rhs: *const T,
        r: (usize, usize),
        acc: bool,
    ) {
        unsafe { super::linalg::gemm_raw(mnk, dst, d, lhs, l, rhs, r, T::ONE, acc.then_some(T::ONE), 1) }
    }
}

/// bf16 operands, f32 sums ([`super::bf16gemm`]).
struct Bf16;

impl Kernel for Bf16 {
    type In = half::bf16;
    type Acc = f32;
    fn widen(x: half::bf16) -> f32 {
        x.to_f32()
    }
    unsafe fn mm(
        mnk: (usize, usize, usize),
        dst: *mut f32,
        d: (usize, usize),
        lhs: *const half::bf16,
        l: (usize, usize),
        rhs: *const half::bf16,
        r: (usize, usize),
        acc: bool,
    ) {
        unsafe {
            debug_assert_eq!(d.1, 1);
            super::bf16gemm::gemm(mnk, dst, d.0, lhs as *const u16, l, rhs as *const u16, r, acc, 1)
        }
    }
}

/// Forward kernel: `y = conv(x, w) + bias` (`x: [n, big_c, big]`, `w: [small_c, cin_g, k]`).
/// Unit by unit (an item's range of output rows): im2col of those rows, then per group one
/// product `W_g @ col` straight into the output's columns.
fn forward_kernel<K: Kernel>(x: &Tensor, w: &Tensor, bias: Option<&Tensor>, g: &Geo) -> Result<Tensor> {
    type T<K> = <K as Kernel>::In;
    type A<K> = <K as Kernel>::Acc;
    let shape = nc_shape(g.n, g.small_c, &g.small, g.p.nd);
    let b = bias.unwrap_or(w);
    let (rows, ls, lb, cin_g, cout_g) = (g.rows(), g.l_small(), g.l_big(), g.cin_g(), g.cout_g());
    let ow = g.small[2];
    let units = Units::of(g);
    let fail = Scratch::default();
    let t = build_raw::<A<K>>(shape, |yp| {
        if g.n * g.small_c * ls == 0 {
            return;
        }
        read_all::<3, T<K>, _>([x, w, b], |[xp, wp, bp]| {
            over_units(units.total, g.work_per_item() / units.pieces, |u0, u1| {
                let (xp, wp, bp, yp) = (xp, wp, bp, yp);
                let cols_max = units.rows.div_ceil(units.pieces) * ow;
                let mut col = if g.identity_cols() {
                    None
                } else {
                    match fail.get::<T<K>>(rows * cols_max) {
                        Some(b) => Some(b),
                        None => return,
                    }
                };
                for u in u0..u1 {
                    let (i, r0, r1) = units.get(u);
                    let (c0, nc) = (r0 * ow, (r1 - r0) * ow);
                    for gr in 0..g.p.groups {
                        // SAFETY: offsets inside the contiguous tensors of the checked shapes;
                        // every unit writes its own columns of its item's output.
                        unsafe {
                            let dst = yp.0.add((i * g.small_c + gr * cout_g) * ls + c0);
                            if rows == 0 {
                                for c in 0..cout_g {
                                    std::ptr::write_bytes(dst.add(c * ls), 0, nc);
                                }
                                continue;
                            }
                            let xg = xp.0.add((i * g.big_c + gr * cin_g) * lb);
                            let (cp, crs) = match &mut col {
                                None => (xg.add(c0) as *const T<K>, lb),
                                Some(buf) => {
                                    let xs = std::slice::from_raw_parts(xg, cin_g * lb);
                                    im2col(xs, &mut buf.as_mut_slice::<T<K>>()[..rows * nc], g, r0, r1);
                                    (buf.as_ptr() as *const T<K>, nc)
                                }
                            };
                            let wg = wp.0.add(gr * cout_g * rows);
                            K::mm((cout_g, nc, rows), dst, (ls, 1), wg, (rows, 1), cp, (crs, 1), false);
                        }
                    }
                    if bias.is_some() {
                        for c in 0..g.small_c {
                            // SAFETY: as above.
                            unsafe {
                                let bv = K::widen(*bp.0.add(c));
                                let row = std::slice::from_raw_parts_mut(
                                    yp.0.add((i * g.small_c + c) * ls + c0),
                                    nc,
                                );
                                row.iter_mut().for_each(|v| *v = *v + bv);
                            }
                        }
                    }
                }
            });
        });
    })?;
    fail.result()?;
    Ok(t)
}

/// Input-gradient kernel, also the transposed convolution's forward: `x = conv^T(y, w) + bias`
/// (`y: [n, small_c, small]` to `[n, big_c, big]`; bias has `big_c` elements). Per item: the
/// product `W_g^T @ y_g` into a column buffer, folded back by col2im. Large batches run item
/// by item on the threads; small ones compute an item's columns in units of output rows, then
/// fold back channel by channel in parallel.
fn backward_input_kernel<K: Kernel>(
    y: &Tensor,
    w: &Tensor,
    bias: Option<&Tensor>,
    g: &Geo,
) -> Result<Tensor> {
    type T<K> = <K as Kernel>::Acc;
    type I<K> = <K as Kernel>::In;
    let shape = nc_shape(g.n, g.big_c, &g.big, g.p.nd);
    let b = bias.unwrap_or(w);
    let (rows, ls, lb, cin_g, cout_g) = (g.rows(), g.l_small(), g.l_big(), g.cin_g(), g.cout_g());
    let ow = g.small[2];
    let identity = g.identity_cols() && cout_g > 0 && rows > 0;
    let units = Units::of(g);
    let groups = g.p.groups;
    let fail = Scratch::default();
    let t = build_raw::<T<K>>(shape, |xp| {
        if g.n * g.big_c * lb == 0 {
            return;
        }
        read_all::<3, I<K>, _>([y, w, b], |[yp, wp, bp]| {
            let add_bias = |i: usize| {
                let (xp, bp) = (xp, bp);
                if bias.is_some() {
                    for c in 0..g.big_c {
                        // SAFETY: item i's planes of the result; the bias has big_c elements.
                        unsafe {
                            let bv = K::widen(*bp.0.add(c));
                            let row = std::slice::from_raw_parts_mut(xp.0.add((i * g.big_c + c) * lb), lb);
                            row.iter_mut().for_each(|v| *v = *v + bv);
                        }
                    }
                }
            };
            // Columns of output rows r0..r1 of item i, group gr: into `dst` (row stride drs).
            // SAFETY (callers): dst holds rows x drs elements from column r0 * ow on.
            let columns = |i: usize, gr: usize, r0: usize, r1: usize, dst: *mut T<K>, drs: usize| unsafe {
                let (yp, wp) = (yp, wp);
                let (c0, nc) = (r0 * ow, (r1 - r0) * ow);
                let yg = yp.0.add((i * g.small_c + gr * cout_g) * ls + c0);
                let wg = wp.0.add(gr * cout_g * rows);
                // W_g^T: (rows x cout_g) with strides (1, rows).
                K::mm((rows, nc, cout_g), dst.add(c0), (drs, 1), wg, (1, rows), yg, (ls, 1), false);
            };
            if cout_g == 0 || rows == 0 {
                for i in 0..g.n {
                    // SAFETY: item i's part of the result.
                    unsafe { std::ptr::write_bytes(xp.0.add(i * g.big_c * lb), 0, g.big_c * lb) };
                    add_bias(i);
                }
                return;
            }
            if units.pieces == 1 {
                over_units(g.n, g.work_per_item(), |i0, i1| {
                    let xp = xp;
                    let mut col = if identity {
                        None
                    } else {
                        match fail.get::<T<K>>(rows * ls) {
                            Some(b) => Some(b),
                            None => return,
                        }
                    };
                    for i in i0..i1 {
                        for gr in 0..groups {
                            // SAFETY: item i, group gr's channels of the result.
                            let dst = unsafe { xp.0.add((i * g.big_c + gr * cin_g) * lb) };
                            match &mut col {
                                None => columns(i, gr, 0, units.rows, dst, lb),
                                Some(buf) => {
                                    columns(i, gr, 0, units.rows, buf.as_mut_ptr() as *mut T<K>, ls);
                                    // SAFETY: as above.
                                    let xs = unsafe {
                                        std::ptr::write_bytes(dst, 0, cin_g * lb);
                                        std::slice::from_raw_parts_mut(dst, cin_g * lb)
                                    };
                                    col2im(&buf.as_slice::<T<K>>()[..rows * ls], xs, g, 0, cin_g);
                                }
                            }
                        }
                        add_bias(i);
                    }
                });
                return;
            }
            // Few items: per item, units of (group, output rows), then col2im per channel.
            let mut col = if identity {
                None
            } else {
                match fail.get::<T<K>>(groups * rows * ls) {
                    Some(b) => Some(b),
                    None => return,
                }
            };
            let cp = col.as_mut().map(|b| SendPtr(b.as_mut_ptr() as *mut T<K>));
            for i in 0..g.n {
                let per = g.work_per_item() / (groups * units.pieces);
                over_units(groups * units.pieces, per, |u0, u1| {
                    let (xp, cp) = (xp, cp);
                    for u in u0..u1 {
                        let (gr, pc) = (u / units.pieces, u % units.pieces);
                        let (_, r0, r1) = units.get(pc);
                        match cp {
                            // SAFETY: group gr's channels of item i (columns r0..r1 only).
                            None => columns(
                                i,
                                gr,
                                r0,
                                r1,
                                unsafe { xp.0.add((i * g.big_c + gr * cin_g) * lb) },
                                lb,
                            ),
                            // SAFETY: group gr's part of the column buffer.
                            Some(c) => columns(i, gr, r0, r1, unsafe { c.0.add(gr * rows * ls) }, ls),
                        }
                    }
                });
                if let Some(c) = cp {
                    over_units(g.big_c, g.kk() * ls, |c0, c1| {
                        let (xp, c) = (xp, c);
                        for ch in c0..c1 {
                            let (gr, cg) = (ch / cin_g, ch % cin_g);
                            // SAFETY: channel ch of item i, written by this unit alone; the
                            // column buffer is complete (the products above have returned).
                            unsafe {
                                let base = xp.0.add((i * g.big_c + gr * cin_g) * lb);
                                std::ptr::write_bytes(base.add(cg * lb), 0, lb);
                                let xs = std::slice::from_raw_parts_mut(base, cin_g * lb);
                                let cs = std::slice::from_raw_parts(c.0.add(gr * rows * ls), rows * ls);
                                col2im(cs, xs, g, cg, cg + 1);
                            }
                        }
                    });
                }
                add_bias(i);
            }
            drop(col.take());
        });
    })?;
    fail.result()?;
    Ok(t)
}

/// Weight-gradient kernel: `gw[co, ci, k] = sum over items and output positions of
/// v[n, co, o] * x[n, ci, o * s + k * d - p]` (`x` the conv's input, `v` its output gradient),
/// of shape `[small_c, cin_g, *k]`. Summed per chunk of units (at most eight chunks; their
/// number depends on the batch size and geometry only), the chunks' sums added in order.
fn backward_weight_kernel<K: Kernel>(x: &Tensor, v: &Tensor, g: &Geo) -> Result<Tensor> {
    type T<K> = <K as Kernel>::Acc;
    type I<K> = <K as Kernel>::In;
    let mut shape = vec![g.small_c, g.cin_g()];
    shape.extend_from_slice(&g.k[3 - g.p.nd..]);
    let (rows, ls, lb, cin_g, cout_g) = (g.rows(), g.l_small(), g.l_big(), g.cin_g(), g.cout_g());
    let ow = g.small[2];
    let wlen = g.small_c * rows;
    let units = Units::of(g);
    let per_unit = g.work_per_item() / units.pieces;
    let chunks =
        if units.total.saturating_mul(per_unit) < PAR_WORK { 1 } else { units.total.min(ITEM_SPLIT) };
    let per_chunk = units.total.div_ceil(chunks.max(1));
    let chunks = if units.total == 0 { 1 } else { units.total.div_ceil(per_chunk) };
    // Partial sums of chunks 1.. (chunk 0 sums into the result itself).
    let mut partial =
        CpuBuffer::for_elems(wlen.saturating_mul(chunks.saturating_sub(1)), std::mem::size_of::<T<K>>())?;
    let pp = SendPtr(partial.as_mut_ptr() as *mut T<K>);
    let fail = Scratch::default();
    let t = build_raw::<T<K>>(shape, |gp| {
        if wlen == 0 {
            return;
        }
        read_all::<2, I<K>, _>([x, v], |[xp, vp]| {
            let run = |c: usize| {
                let (xp, vp, gp, pp) = (xp, vp, gp, pp);
                // SAFETY: chunk c owns its own buffer of wlen elements.
                let dst0 = unsafe {
                    if c == 0 {
                        gp.0
                    } else {
                        pp.0.add((c - 1) * wlen)
                    }
                };
                unsafe { std::ptr::write_bytes(dst0, 0, wlen) };
                if rows == 0 || ls == 0 {
                    return;
                }
                let cols_max = units.rows.div_ceil(units.pieces) * ow;
                let mut col = if g.identity_cols() {
                    None
                } else {
                    match fail.get::<I<K>>(rows * cols_max) {
                        Some(b) => Some(b),
                        None => return,
                    }
                };
                for u in c * per_chunk..((c + 1) * per_chunk).min(units.total) {
                    let (i, r0, r1) = units.get(u);
                    let (c0, nc) = (r0 * ow, (r1 - r0) * ow);
                    for gr in 0..g.p.groups {
                        // SAFETY: offsets inside the checked contiguous tensors; the chunk
                        // writes only its own buffer.
                        unsafe {
                            let xg = xp.0.add((i * g.big_c + gr * cin_g) * lb);
                            let (cp, crs) = match &mut col {
                                None => (xg.add(c0) as *const I<K>, lb),
                                Some(buf) => {
                                    let xs = std::slice::from_raw_parts(xg, cin_g * lb);
                                    im2col(xs, &mut buf.as_mut_slice::<I<K>>()[..rows * nc], g, r0, r1);
                                    (buf.as_ptr() as *const I<K>, nc)
                                }
                            };
                            let vg = vp.0.add((i * g.small_c + gr * cout_g) * ls + c0);
                            // (cout_g x nc) @ col^T (nc x rows, strides (1, crs))
                            let dst = dst0.add(gr * cout_g * rows);
                            K::mm((cout_g, rows, nc), dst, (rows, 1), vg, (ls, 1), cp, (1, crs), true);
                        }
                    }
                }
            };
            if chunks > 1 && crate::get_num_threads() > 1 {
                crate::threads::run_tasks(chunks, run);
            } else {
                (0..chunks).for_each(run);
            }
            // SAFETY: all chunks are done; the buffers hold wlen elements each.
            unsafe {
                let out = std::slice::from_raw_parts_mut(gp.0, wlen);
                for c in 1..chunks {
                    let part = std::slice::from_raw_parts(pp.0.add((c - 1) * wlen), wlen);
                    out.iter_mut().zip(part).for_each(|(o, &p)| *o = *o + p);
                }
            }
        });
    })?;
    fail.result()?;
    Ok(t)
}

// ------------------------------------------------------------------------------------------
// Argument checks

/// Validated arguments of a convolution or transposed convolution.
struct Checked {
    geo: Geo,
}

/// Checks a (transposed) convolution's arguments as PyTorch does and works out its geometry.
/// `output_padding` is `Some` for a transposed convolution.
#[allow(clippy::too_many_arguments)]
fn check_conv(
    input: &Tensor,
    weight: &Tensor,
    bias: Option<&Tensor>,
    stride: &[usize],
    padding: &[usize],
    dilation: &[usize],
    groups: usize,
    output_padding: Option<&[usize]>,
    expect_nd: Option<usize>,
) -> Result<Checked> {
    let transposed = output_padding.is_some();
    let wr = weight.rank();
    let nd = match expect_nd {
        Some(nd) => nd,
        None => {
            if !(3..=5).contains(&wr) {
                bail!(
                    Shape,
                    "{}: expected a 3-, 4- or 5-dimensional weight [out_channels, in_channels / groups, *kernel] for a 1-, 2- or 3-d convolution, but got weight of size {}",
                    if transposed { "conv_transpose" } else { "conv" },
                    weight.shape()
                );
            }
            wr - 2
        }
    };
    let op = op_name(transposed, nd);
    if expect_nd.is_some() && input.rank() != nd + 2 {
        bail!(
            Shape,
            "Expected {}D (batched) input to {op}, but got input of size: {} (Pyrite takes batched input only: unsqueeze(0) an unbatched one)",
            nd + 2,
            input.shape()
        );
    }
    if wr != input.rank() {
        bail!(
            Shape,
            "Expected {wr}-dimensional input for {wr}-dimensional weight {}, but got {}-dimensional input of size {} instead",
            weight.shape(),
            input.rank(),
            input.shape()
        );
    }
    for (what, t) in [("Input", input), ("weight", weight)] {
        if !t.dtype().is_floating_point() {
            bail!(
                NotImplemented,
                "\"{op}\" not implemented for '{}' ({what} dtype {}; Pyrite's convolutions take float tensors)",
                t.dtype().type_name(),
                t.dtype()
            );
        }
    }
    if weight.dtype() != input.dtype() {
        bail!(
            DType,
            "Input type ({}) and weight type ({}) should be the same",
            cpp_name(input.dtype()),
            cpp_name(weight.dtype())
        );
    }
    if let Some(b) = bias
        && b.dtype() != input.dtype()
    {
        bail!(
            DType,
            "Input type ({}) and bias type ({}) should be the same",
            cpp_name(input.dtype()),
            cpp_name(b.dtype())
        );
    }
    let stride = expand_param("stride", stride, nd)?;
    let padding = expand_param("padding", padding, nd)?;
    let dilation = expand_param("dilation", dilation, nd)?;
    let out_pad = match output_padding {
        Some(op) => expand_param("output_padding", op, nd)?,
        None => vec![0; nd],
    };
    if stride.contains(&0) {
        bail!(Value, "non-positive stride is not supported");
    }
    if dilation.contains(&0) {
        bail!(Value, "non-positive dilation is not supported");
    }
    if groups == 0 {
        bail!(Value, "non-positive groups is not supported");
    }
    for (name, v) in
        [("stride", &stride), ("padding", &padding), ("dilation", &dilation), ("output_padding", &out_pad)]
    {
        if v.iter().any(|&x| x > MAX_PARAM) {
            bail!(Value, "{op}: {name}={v:?} is too large");
        }
    }
    let (ws, xs) = (weight.dims(), input.dims());
    if ws[2..].iter().any(|&k| k > MAX_PARAM) {
        bail!(Value, "{op}: kernel size {:?} is too large", &ws[2..]);
    }
    let (n, cin) = (xs[0], xs[1]);
    let (big_c, small_c) = if transposed {
        // weight [C_in, C_out / groups, *k]
        if ws[0] != cin {
            bail!(
                Shape,
                "Given transposed=1, weight of size {}, expected input{} to have {} channels, but got {} channels instead",
                weight.shape(),
                input.shape(),
                ws[0],
                cin
            );
        }
        if ws[0] % groups != 0 {
            bail!(
                Shape,
                "Given groups={groups}, expected weight to be divisible by {groups} at dimension 0, but got weight of shape {} instead",
                weight.shape()
            );
        }
        (ws[1] * groups, cin)
    } else {
        if ws[0] == 0 {
            bail!(
                Shape,
                "Given groups={groups}, expected weight to be at least 1 at dimension 0, but got weight of size {} instead",
                weight.shape()
            );
        }
        if ws[0] % groups != 0 {
            bail!(
                Shape,
                "Given groups={groups}, expected weight to be divisible by {groups} at dimension 0, but got weight of shape {} instead",
                weight.shape()
            );
        }
        if ws[1].checked_mul(groups) != Some(cin) {
            bail!(
                Shape,
                "Given groups={groups}, weight of size {}, expected input{} to have {} channels, but got {cin} channels instead",
                weight.shape(),
                input.shape(),
                ws[1] as u128 * groups as u128
            );
        }
        (cin, ws[0])
    };
    if let Some(b) = bias {
        let want = if transposed { big_c } else { small_c };
        if b.rank() != 1 || b.dims()[0] != want {
            let t = if transposed { "transposed=1, " } else { "" };
            bail!(
                Shape,
                "Given {t}weight of size {}, expected bias to be 1-dimensional with {want} elements, but got bias of size {} instead",
                weight.shape(),
                b.shape()
            );
        }
    }
    if transposed {
        for i in 0..nd {
            if out_pad[i] >= stride[i] && out_pad[i] >= dilation[i] {
                let names = ["depth", "height", "width"];
                let nm = &names[3 - nd..];
                let list = |label: &str, v: &[usize]| {
                    (0..nd).map(|j| format!("{label}_{}: {}", nm[j], v[j])).collect::<Vec<_>>().join(" ")
                };
                bail!(
                    Value,
                    "output padding must be smaller than either stride or dilation, but got {} {} {}",
                    list("output_padding", &out_pad),
                    list("stride", &stride),
                    list("dilation", &dilation)
                );
            }
        }
    }
    let k: Vec<usize> = ws[2..].to_vec();
    let sp: Vec<usize> = xs[2..].to_vec();
    let p =
        ConvParams { nd, stride: pad3(&stride, 1), pad: pad3(&padding, 0), dil: pad3(&dilation, 1), groups };
    let other: Vec<usize> = if transposed {
        // out = (in - 1) * s - 2p + d (k - 1) + output_padding + 1
        let out: Vec<i128> = (0..nd)
            .map(|i| {
                (sp[i] as i128 - 1) * stride[i] as i128 - 2 * padding[i] as i128
                    + dilation[i] as i128 * (k[i] as i128 - 1)
                    + out_pad[i] as i128
                    + 1
            })
            .collect();
        if out.iter().any(|&o| o < 1) {
            let ins: Vec<i128> = sp.iter().map(|&v| v as i128).collect();
            bail!(
                Shape,
                "Given input size per channel: ({}). Calculated output size per channel: ({}). Output size is too small",
                join_x(&ins),
                join_x(&out)
            );
        }
        out.iter().map(|&o| o as usize).collect()
    } else {
        let padded: Vec<i128> = (0..nd).map(|i| sp[i] as i128 + 2 * padding[i] as i128).collect();
        let kd: Vec<i128> = (0..nd).map(|i| dilation[i] as i128 * (k[i] as i128 - 1) + 1).collect();
        if (0..nd).any(|i| padded[i] < kd[i]) {
            bail!(
                Shape,
                "Calculated padded input size per channel: ({}). Kernel size: ({}). Kernel size can't be greater than actual input size",
                join_x(&padded),
                join_x(&kd)
            );
        }
        (0..nd).map(|i| ((padded[i] - kd[i]) / stride[i] as i128 + 1) as usize).collect()
    };
    let (big, small) =
        if transposed { (pad3(&other, 1), pad3(&sp, 1)) } else { (pad3(&sp, 1), pad3(&other, 1)) };
    let geo = Geo { n, big_c, small_c, big, small, k: pad3(&k, 1), p };
    Ok(Checked { geo })
}

// ------------------------------------------------------------------------------------------
// The recorded ops

/// Runs `f` on the f32/f64 element type of `dtype`.
macro_rules! float_kernel {
    ($dtype:expr, $T:ident => $body:expr) => {
        match $dtype {
            DType::F32 => {
                type $T = f32;
                $body
            }
            DType::F64 => {
                type $T = f64;
                $body
            }
            d => bail!(NotImplemented, "convolution kernel for {d}"),
        }
    };
}
pub(crate) use float_kernel;

/// Runs a convolution kernel for `$dtype` with `$K` its [`Kernel`]: f32 and f64 as they are,
/// bf16 on the AVX512-BF16 kernel with its f32 result rounded to bf16.
macro_rules! conv_kernel {
    ($dtype:expr, $K:ident => $body:expr) => {
        match $dtype {
            DType::F32 => {
                type $K = Same<f32>;
                $body
            }
            DType::F64 => {
                type $K = Same<f64>;
                $body
            }
            DType::BF16 if super::bf16gemm::available() => {
                type $K = Bf16;
                $body.and_then(|t: Tensor| t.to_dtype(DType::BF16))
            }
            d => bail!(NotImplemented, "convolution kernel for {d}"),
        }
    };
}

/// Contiguous copies (or the tensors themselves) for the kernels.
fn contig(t: &Tensor) -> Result<Tensor> {
    if t.is_contiguous() {
        Ok(t.clone())
    } else {
        let _g = crate::autograd::no_grad();
        t.contiguous()
    }
}

/// The CUDA backend's convolution: the `im2col` / `col2im` kernels around one batched cuBLAS
/// GEMM over the groups, in every float dtype (cuBLAS computes f16 and bf16 in f32).
mod on_cuda {
    use super::{nc_shape, Geo};
    use crate::cuda::{col2im, im2col, ConvShape};
    use crate::{Result, Shape, Tensor};

    fn shape(g: &Geo) -> ConvShape {
        ConvShape {
            n: g.n,
            c: g.big_c,
            big: g.big,
            small: g.small,
            k: g.k,
            stride: g.p.stride,
            pad: g.p.pad,
            dil: g.p.dil,
        }
    }

    /// `[N, C_out, *small]` as the groups' matrices `[G, C_out/G, N * L]`.
    fn by_group(v: &Tensor, g: &Geo) -> Result<Tensor> {
        let (n, l, groups) = (g.n, g.l_small(), g.p.groups);
        v.reshape([n, g.small_c, l])?.permute(&[1, 0, 2])?.contiguous()?.reshape([groups, g.cout_g(), n * l])
    }

    fn plus_bias(y: Tensor, bias: Option<&Tensor>, g: &Geo) -> Result<Tensor> {
        let Some(b) = bias else { return Ok(y) };
        let mut dims = vec![1, b.numel()];
        dims.extend(std::iter::repeat_n(1, g.p.nd));
        y.add(&b.reshape(dims)?)
    }

    /// `conv(x, w) + bias` for contiguous `x` and `w`.
    pub(super) fn forward(x: &Tensor, w: &Tensor, bias: Option<&Tensor>, g: &Geo) -> Result<Tensor> {
        let _g = crate::autograd::no_grad();
        let groups = g.p.groups;
        let col = im2col(x, &shape(g))?.reshape([groups, g.rows(), g.n * g.l_small()])?;
        let y = w.reshape([groups, g.cout_g(), g.rows()])?.bmm(&col)?;
        let y = y.reshape([g.small_c, g.n, g.l_small()])?.permute(&[1, 0, 2])?.contiguous()?;
        plus_bias(y.reshape(nc_shape(g.n, g.small_c, &g.small, g.p.nd))?, bias, g)
    }

    /// The input-shaped `conv^T(v, w) + bias` for the output-shaped `v`.
    pub(super) fn backward_input(v: &Tensor, w: &Tensor, bias: Option<&Tensor>, g: &Geo) -> Result<Tensor> {
        let _g = crate::autograd::no_grad();
        let wt = w.reshape([g.p.groups, g.cout_g(), g.rows()])?.transpose(1, 2)?;
        let col = wt.bmm(&by_group(v, g)?)?.reshape([g.p.groups * g.rows(), g.n * g.l_small()])?;
        let x = col2im(&col, &shape(g), &Shape::from(nc_shape(g.n, g.big_c, &g.big, g.p.nd)))?;
        plus_bias(x, bias, g)
    }

    /// The weight gradient of `conv(x, w)` for the output gradient `v`.
    pub(super) fn backward_weight(x: &Tensor, v: &Tensor, g: &Geo) -> Result<Tensor> {
        let _g = crate::autograd::no_grad();
        let groups = g.p.groups;
        let col = im2col(x, &shape(g))?.reshape([groups, g.rows(), g.n * g.l_small()])?;
        let gw = by_group(v, g)?.bmm(&col.transpose(1, 2)?)?;
        let mut dims = vec![g.small_c, g.cin_g()];
        dims.extend_from_slice(&g.k[3 - g.p.nd..]);
        gw.reshape(dims)
    }
}

/// `conv(x, w) + bias` on f32/f64 with checked geometry, recorded as `ConvolutionBackward0`.
fn conv_core(x: &Tensor, w: &Tensor, bias: Option<&Tensor>, geo: Geo) -> Result<Tensor> {
    let (xc, wc) = (contig(x)?, contig(w)?);
    let bc = bias.map(contig).transpose()?;
    let y = if xc.device().is_cuda() {
        on_cuda::forward(&xc, &wc, bc.as_ref(), &geo)?
    } else {
        conv_kernel!(x.dtype(), K => forward_kernel::<K>(&xc, &wc, bc.as_ref(), &geo))?
    };
    let mut inputs = vec![x, w];
    inputs.extend(bias);
    if !needs_grad(&inputs) {
        return Ok(y);
    }
    record1("ConvolutionBackward0", &inputs, y, &[Save::Input(x), Save::Input(w)], move |ctx, g| {
        let g = &g[0];
        let gx = if ctx.needs_input_grad(0) {
            Some(conv_transpose_core(g, &ctx.saved(1)?, None, geo)?)
        } else {
            None
        };
        let gw = if ctx.needs_input_grad(1) { Some(weight_grad(&ctx.saved(0)?, g, geo)?) } else { None };
        let mut r = vec![gx, gw];
        if ctx.needs_input_grad(2) {
            r.push(Some(bias_grad(g)?));
        }
        Ok(r)
    })
}

/// The bias gradient: the output gradient summed over the batch and spatial dims.
fn bias_grad(g: &Tensor) -> Result<Tensor> {
    let dims: Vec<isize> = std::iter::once(0).chain(2..g.rank() as isize).collect();
    g.sum_dims(&dims, false)
}

/// `conv^T(y, w) + bias` (`geo` is the geometry of the convolution it transposes), recorded as
/// `ConvolutionBackward0`.
fn conv_transpose_core(y: &Tensor, w: &Tensor, bias: Option<&Tensor>, geo: Geo) -> Result<Tensor> {
    let (yc, wc) = (contig(y)?, contig(w)?);
    let bc = bias.map(contig).transpose()?;
    let geo = Geo { n: y.dims()[0], ..geo };
    let x = if yc.device().is_cuda() {
        on_cuda::backward_input(&yc, &wc, bc.as_ref(), &geo)?
    } else {
        conv_kernel!(y.dtype(), K => backward_input_kernel::<K>(&yc, &wc, bc.as_ref(), &geo))?
    };
    let mut inputs = vec![y, w];
    inputs.extend(bias);
    if !needs_grad(&inputs) {
        return Ok(x);
    }
    record1("ConvolutionBackward0", &inputs, x, &[Save::Input(y), Save::Input(w)], move |ctx, g| {
        let g = &g[0];
        let gy = if ctx.needs_input_grad(0) { Some(conv_core(g, &ctx.saved(1)?, None, geo)?) } else { None };
        let gw = if ctx.needs_input_grad(1) { Some(weight_grad(g, &ctx.saved(0)?, geo)?) } else { None };
        let mut r = vec![gy, gw];
        if ctx.needs_input_grad(2) {
            r.push(Some(bias_grad(g)?));
        }
        Ok(r)
    })
}

/// The weight gradient of `conv(x, w)` for output gradient `v`, recorded (as
/// `ConvolutionBackwardBackward0`) with its own gradients: a transposed convolution of `v` for
/// `x` and a convolution of `x` for `v`, both by the incoming weight-shaped gradient.
fn weight_grad(x: &Tensor, v: &Tensor, geo: Geo) -> Result<Tensor> {
    let (xc, vc) = (contig(x)?, contig(v)?);
    let geo = Geo { n: x.dims()[0], ..geo };
    let gw = if xc.device().is_cuda() {
        on_cuda::backward_weight(&xc, &vc, &geo)?
    } else {
        conv_kernel!(x.dtype(), K => backward_weight_kernel::<K>(&xc, &vc, &geo))?
    };
    if !needs_grad(&[x, v]) {
        return Ok(gw);
    }
    record1("ConvolutionBackwardBackward0", &[x, v], gw, &[Save::Input(x), Save::Input(v)], move |ctx, g| {
        let gg = &g[0];
        let gx = if ctx.needs_input_grad(0) {
            Some(conv_transpose_core(&ctx.saved(1)?, gg, None, geo)?)
        } else {
            None
        };
        let gv = if ctx.needs_input_grad(1) { Some(conv_core(&ctx.saved(0)?, gg, None, geo)?) } else { None };
        Ok(vec![gx, gv])
    })
}

/// f16/bf16 through f32: converts, runs `f`, converts back (the casts are recorded).
fn via_f32(
    ts: &[Option<&Tensor>],
    f: impl FnOnce(&[Option<Tensor>]) -> Result<Tensor>,
) -> Result<Option<Tensor>> {
    let dt = ts[0].unwrap().dtype();
    // The CUDA kernels and cuBLAS take the half types as they are.
    let native = ts[0].unwrap().device().is_cuda() || (dt == DType::BF16 && super::bf16gemm::available());
    if !matches!(dt, DType::F16 | DType::BF16) || native {
        return Ok(None);
    }
    let conv: Vec<Option<Tensor>> =
        ts.iter().map(|t| t.map(|t| t.to_dtype(DType::F32)).transpose()).collect::<Result<_>>()?;
    Ok(Some(f(&conv)?.to_dtype(dt)?))
}

/// `torch.nn.functional.conv1d/2d/3d(input, weight, bias, stride, padding, dilation, groups)`
/// with numeric padding, for `input: [N, C_in, *spatial]` (one to three spatial dims, taken
/// from the weight's rank) and `weight: [C_out, C_in / groups, *kernel]`. `stride`, `padding`
/// and `dilation` hold one value per spatial dim, or one value for all. The output has
/// `floor((in + 2 * padding - dilation * (kernel - 1) - 1) / stride) + 1` positions per dim.
/// f32 and f64 (f16 and bf16 computed in f32); recorded as `ConvolutionBackward0`.
///
/// ```
/// use pyrite_core::ops::conv::conv;
/// use pyrite_core::{DType, Tensor};
/// let x = Tensor::ones([1, 1, 4, 4], DType::F32)?;
/// let w = Tensor::ones([2, 1, 3, 3], DType::F32)?;
/// let y = conv(&x, &w, None, &[1], &[1], &[1], 1)?;
/// assert_eq!(y.dims(), &[1, 2, 4, 4]);
/// assert_eq!(y.to_vec::<f32>()?[..4], [4., 6., 6., 4.]);
/// # Ok::<(), pyrite_core::Error>(())
/// ```
pub fn conv(
    input: &Tensor,
    weight: &Tensor,
    bias: Option<&Tensor>,
    stride: &[usize],
    padding: &[usize],
    dilation: &[usize],
    groups: usize,
) -> Result<Tensor> {
    let name = autocast_name(["conv1d", "conv2d", "conv3d"], weight);
    if let Some(r) = crate::autocast::dispatch(name, &[Some(input), Some(weight), bias], |t| {
        conv(t.at(0), t.at(1), t.opt(2), stride, padding, dilation, groups)
    }) {
        return r;
    }
    conv_nd(input, weight, bias, stride, padding, dilation, groups, None)
}

#[allow(clippy::too_many_arguments)]
fn conv_nd(
    input: &Tensor,
    weight: &Tensor,
    bias: Option<&Tensor>,
    stride: &[usize],
    padding: &[usize],
    dilation: &[usize],
    groups: usize,
    nd: Option<usize>,
) -> Result<Tensor> {
    let _prof = crate::profiler_record::op("aten::convolution", &[input, weight]);
    let c = check_conv(input, weight, bias, stride, padding, dilation, groups, None, nd)?;
    if let Some(r) = via_f32(&[Some(input), Some(weight), bias], |t| {
        conv_core(t[0].as_ref().unwrap(), t[1].as_ref().unwrap(), t[2].as_ref(), c.geo)
    })? {
        return Ok(r);
    }
    conv_core(input, weight, bias, c.geo)
}

/// `torch.nn.functional.conv_transpose1d/2d/3d(input, weight, bias, stride, padding,
/// output_padding, groups, dilation)` for `input: [N, C_in, *spatial]` and
/// `weight: [C_in, C_out / groups, *kernel]`: the gradient of [`conv`] with respect to its
/// input. The output has `(in - 1) * stride - 2 * padding + dilation * (kernel - 1) +
/// output_padding + 1` positions per dim; `output_padding` must be smaller than the stride or
/// the dilation. Recorded as `ConvolutionBackward0`, as in PyTorch.
///
/// ```
/// use pyrite_core::ops::conv::conv_transpose;
/// use pyrite_core::{DType, Tensor};
/// let x = Tensor::ones([1, 1, 2, 2], DType::F32)?;
/// let w = Tensor::ones([1, 1, 2, 2], DType::F32)?;
/// let y = conv_transpose(&x, &w, None, &[2], &[0], &[0], &[1], 1)?;
/// assert_eq!(y.dims(), &[1, 1, 4, 4]);
/// assert_eq!(y.sum()?.item::<f32>()?, 16.);
/// # Ok::<(), pyrite_core::Error>(())
/// ```
#[allow(clippy::too_many_arguments)]
pub fn conv_transpose(
    input: &Tensor,
    weight: &Tensor,
    bias: Option<&Tensor>,
    stride: &[usize],
    padding: &[usize],
    output_padding: &[usize],
    dilation: &[usize],
    groups: usize,
) -> Result<Tensor> {
    let name = autocast_name(["conv_transpose1d", "conv_transpose2d", "conv_transpose3d"], weight);
    if let Some(r) = crate::autocast::dispatch(name, &[Some(input), Some(weight), bias], |t| {
        conv_transpose(t.at(0), t.at(1), t.opt(2), stride, padding, output_padding, dilation, groups)
    }) {
        return r;
    }
    conv_transpose_nd(input, weight, bias, stride, padding, output_padding, dilation, groups, None)
}

#[allow(clippy::too_many_arguments)]
fn conv_transpose_nd(
    input: &Tensor,
    weight: &Tensor,
    bias: Option<&Tensor>,
    stride: &[usize],
    padding: &[usize],
    output_padding: &[usize],
    dilation: &[usize],
    groups: usize,
    nd: Option<usize>,
) -> Result<Tensor> {
    let _prof = crate::profiler_record::op("aten::convolution", &[input, weight]);
    let c = check_conv(input, weight, bias, stride, padding, dilation, groups, Some(output_padding), nd)?;
    if let Some(r) = via_f32(&[Some(input), Some(weight), bias], |t| {
        conv_transpose_core(t[0].as_ref().unwrap(), t[1].as_ref().unwrap(), t[2].as_ref(), c.geo)
    })? {
        return Ok(r);
    }
    conv_transpose_core(input, weight, bias, c.geo)
}

macro_rules! conv_fixed {
    ($name:ident, $tname:ident, $nd:expr) => {
        #[doc = concat!("`torch.nn.functional.", stringify!($name), "` for batched input: [`conv`] that requires a ", stringify!($nd), "-d convolution (input of rank ", stringify!($nd), " + 2).")]
        pub fn $name(
            input: &Tensor,
            weight: &Tensor,
            bias: Option<&Tensor>,
            stride: &[usize],
            padding: &[usize],
            dilation: &[usize],
            groups: usize,
        ) -> Result<Tensor> {
            let _prof = crate::profiler_record::op(concat!("aten::", stringify!($name)), &[input, weight]);
            conv_nd(input, weight, bias, stride, padding, dilation, groups, Some($nd))
        }

        #[doc = concat!("`torch.nn.functional.", stringify!($tname), "` for batched input: [`conv_transpose`] that requires a ", stringify!($nd), "-d convolution.")]
        #[allow(clippy::too_many_arguments)]
        pub fn $tname(
            input: &Tensor,
            weight: &Tensor,
            bias: Option<&Tensor>,
            stride: &[usize],
            padding: &[usize],
            output_padding: &[usize],
            groups: usize,
            dilation: &[usize],
        ) -> Result<Tensor> {
            let _prof = crate::profiler_record::op(concat!("aten::", stringify!($tname)), &[input, weight]);
            conv_transpose_nd(input, weight, bias, stride, padding, output_padding, dilation, groups, Some($nd))
        }
    };
}
conv_fixed!(conv1d, conv_transpose1d, 1);
conv_fixed!(conv2d, conv_transpose2d, 2);
conv_fixed!(conv3d, conv_transpose3d, 3);

/// The aten name of a convolution with `weight` (`[out, in, k...]`), for autocast's lists.
fn autocast_name(names: [&'static str; 3], weight: &Tensor) -> &'static str {
    names[weight.rank().clamp(3, 5) - 3]
}
