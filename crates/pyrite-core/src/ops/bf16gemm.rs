//! bf16 x bf16 -> f32 products on AVX512-BF16 (`vdpbf16ps`), for CPUs that have it (Zen 4,
//! Zen 5, Intel since Cooper Lake). Every bf16 product goes here when the kernel is
//! [`available`]: `matmul` / `mm` / `bmm` / `addmm` / `baddbmm` / `linear` (and so attention),
//! and the three convolution kernels. Elsewhere, and with the kernel turned off
//! ([`set_enabled`], or `PYRITE_BF16_KERNEL=0`), bf16 operands are converted to f32 and
//! multiplied by the f32 kernels. Both ways multiply exactly (a product of two bf16 numbers
//! fits in an f32) and add in f32, so they differ only in the order of the additions.
//!
//! `vdpbf16ps` multiplies pairs: lane `j` of the result gains `a[2j] * b[2j] + a[2j + 1] *
//! b[2j + 1]`. So the depth (k) is walked two steps at a time:
//! - `B` is packed into micro-panels of up to 64 columns, pair of depths by pair of depths:
//!   for each column the two bf16 values `B[2p, j]`, `B[2p + 1, j]` side by side (one 32-bit
//!   lane), 16 columns per zmm register, a zero where `k` is odd or a micro-panel is narrower;
//! - `A` is read in place when its rows are contiguous and `k` is even (else packed once into
//!   rows of even length); a pair `A[i, 2p..2p + 2]` is one 32-bit broadcast;
//! - the register tile is `6 x 64` f32 (24 zmm accumulators), as in the f32 kernel
//!   (`ops/sgemm.rs`), one `vdpbf16ps` per accumulator and pair of depths: twice the
//!   multiply-adds of an f32 FMA in the same instruction slot.
//!
//! The blocking is the f32 kernel's: depth steps of at most [`DEPTH_PAIRS`] pairs outermost;
//! in a step, column panels of 256 (or 128) columns, shared among the threads, each thread
//! packing its panel of `B` into a thread-local buffer that stays in L2; in a panel, groups of
//! six rows of `A` (kept in L1) against each micro-panel. The result is f32 (`C = A @ B` or
//! `C += A @ B`); callers round it to bf16 once.

use super::SendPtr;
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether the kernel was turned off by [`set_enabled`]`(false)`.
static OFF: AtomicBool = AtomicBool::new(false);

/// Whether bf16 products run on the AVX512-BF16 kernel: the CPU has AVX512-BF16 (detected at
/// run time), `PYRITE_BF16_KERNEL=0` is not set and [`set_enabled`] has not turned it off.
pub fn available() -> bool {
    detected() && !OFF.load(Ordering::Relaxed)
}

/// Turns the AVX512-BF16 kernel on or off for the whole process (tests and comparisons: off,
/// bf16 products take the conversion path that CPUs without AVX512-BF16 take). Turning it on
/// has no effect on a CPU without it.
pub fn set_enabled(on: bool) {
    OFF.store(!on, Ordering::Relaxed);
}

fn detected() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        {
            std::arch::is_x86_feature_detected!("avx512f")
                && std::arch::is_x86_feature_detected!("avx512bf16")
                && crate::env_switch("PYRITE_BF16_KERNEL")
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            false
        }
    })
}

/// Rows of a register tile.
const MR: usize = 6;
/// Columns of a full micro-panel (4 zmm of 16 f32 lanes).
const NR: usize = 64;
/// Pairs of depths in one depth step at most (1536 depths: a full micro-panel of `B` is 192
/// KiB, in L2; six rows of `A` are 18 KiB, in L1).
const DEPTH_PAIRS: usize = 768;
/// Multiply-adds under which a product stays on the calling thread.
const PAR_WORK: usize = 64 * 64 * 64;

/// `C = A @ B` (`acc == false`) or `C += A @ B` for `A: m x k` and `B: k x n` in bf16 (as their
/// bit patterns), each with any (row, column) strides in elements, and `C: m x n` f32 with
/// row stride `ldc` and unit column stride, on up to `threads` threads.
///
/// # Safety
/// [`available`] must be true; the pointers with these strides must address valid elements
/// for every index in range, and `c` must not overlap `a` or `b`.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn gemm(
    (m, n, k): (usize, usize, usize),
    c: *mut f32,
    ldc: usize,
    a: *const u16,
    (ars, acs): (usize, usize),
    b: *const u16,
    (brs, bcs): (usize, usize),
    acc: bool,
    threads: usize,
) {
    unsafe {
        if m == 0 || n == 0 {
            return;
        }
        if k == 0 {
            if !acc {
                for i in 0..m {
                    std::ptr::write_bytes(c.add(i * ldc), 0, n);
                }
            }
            return;
        }
        #[cfg(target_arch = "x86_64")]
        {
            let pairs = k.div_ceil(2);
            let threads = if m * n * k < PAR_WORK { 1 } else { threads.max(1) };
            // Rows of A with contiguous, even-length depth are read in place; else packed into
            // this thread's buffer (kept between calls, as the packed B is).
            let mut packed_a = None;
            let (ap, lda) = if acs == 1 && k.is_multiple_of(2) {
                (a, ars)
            } else {
                let v = PACKED_A.with(|b| std::mem::take(&mut *b.borrow_mut()));
                let v = packed_a.insert(pack_a(v, m, k, a, (ars, acs), threads));
                (v.as_ptr() as *const u16, 2 * pairs)
            };
            let steps = pairs.div_ceil(DEPTH_PAIRS);
            let dp = pairs.div_ceil(steps);
            let width = if n < 512 { 128 } else { 256 };
            let panels = n.div_ceil(width);
            // Too few column panels for the threads: rows are split too.
            let row_parts = if panels >= threads { 1 } else { threads.div_ceil(panels).min(m.div_ceil(MR)) };
            let row_chunk = m.div_ceil(row_parts).next_multiple_of(MR);
            let row_parts = m.div_ceil(row_chunk);
            let tasks = panels * row_parts;
            let (cp, ap, bp) = (SendPtr(c), SendPtr(ap as *mut u16), SendPtr(b as *mut u16));
            for s in 0..steps {
                let q = s * dp;
                let dq = dp.min(pairs - q);
                let add = acc || s > 0;
                let task = |t: usize| {
                    let (cp, ap, bp) = (cp, ap, bp);
                    let (jp, rp) = (t / row_parts, t % row_parts);
                    let (j0, i0) = (jp * width, rp * row_chunk);
                    let step = Step {
                        m: row_chunk.min(m - i0),
                        n: width.min(n - j0),
                        k,
                        q,
                        dq,
                        c: cp.0.add(i0 * ldc + j0),
                        ldc,
                        a: ap.0.add(i0 * lda),
                        lda,
                        b: bp.0.add(j0 * bcs),
                        brs,
                        bcs,
                        add,
                    };
                    // SAFETY: a block of the validated product; tasks write disjoint blocks of C.
                    x86::step(step);
                };
                if tasks > 1 && threads > 1 {
                    crate::threads::run_tasks(tasks, task);
                } else {
                    (0..tasks).for_each(task);
                }
            }
            if let Some(v) = packed_a {
                PACKED_A.with(|b| *b.borrow_mut() = v);
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = (c, ldc, a, ars, acs, b, brs, bcs, acc, threads);
            unreachable!("bf16gemm::gemm without AVX512-BF16");
        }
    }
}

thread_local! {
    /// Rows of `A` packed to even length, kept between calls.
    static PACKED_A: std::cell::RefCell<Vec<u32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// `A` (`m x k`, strides `(ars, acs)`) as `m` rows of `ceil(k / 2)` bf16 pairs (a zero after
/// an odd `k`), in `buf` (grown as needed), blocks of rows shared among up to `threads`
/// threads. A transposed `A` (unit row stride) is read in blocks of rows, so that both the
/// reads and the writes stay in cache.
unsafe fn pack_a(
    mut buf: Vec<u32>,
    m: usize,
    k: usize,
    a: *const u16,
    (ars, acs): (usize, usize),
    threads: usize,
) -> Vec<u32> {
    let pairs = k.div_ceil(2);
    if buf.len() < m * pairs {
        buf = vec![0; m * pairs];
    }
    let (d, a) = (SendPtr(buf.as_mut_ptr()), SendPtr(a as *mut u16));
    let whole = k / 2;
    const BLOCK: usize = 32;
    let block = |b: usize| {
        let (d, a) = (d, a);
        let (d, a) = (d.0, a.0 as *const u16);
        let (i0, i1) = (b * BLOCK, ((b + 1) * BLOCK).min(m));
        // SAFETY: rows i0..i1 of the checked operand and of the buffer (m x pairs); blocks
        // write disjoint rows.
        unsafe {
            for q in 0..whole {
                let (lo, hi) = (a.add(2 * q * acs), a.add((2 * q + 1) * acs));
                for i in i0..i1 {
                    *d.add(i * pairs + q) = *lo.add(i * ars) as u32 | (*hi.add(i * ars) as u32) << 16;
                }
            }
            if whole < pairs {
                let lo = a.add(2 * whole * acs);
                for i in i0..i1 {
                    *d.add(i * pairs + whole) = *lo.add(i * ars) as u32;
                }
            }
        }
    };
    let blocks = m.div_ceil(BLOCK);
    if threads > 1 && blocks > 1 {
        crate::threads::parallel_for(blocks, 1, |s, e| (s..e).for_each(block));
    } else {
        (0..blocks).for_each(block);
    }
    buf
}

/// One depth step of one block of the product: `C[.., ..] (+)= A[.., 2q..2q+2dq] @ B[2q..2q+2dq,
/// ..]`. `a` points at the block's first row (depth 0), `b` at its first column (depth 0).
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
struct Step {
    m: usize,
    n: usize,
    k: usize,
    q: usize,
    dq: usize,
    c: *mut f32,
    ldc: usize,
    a: *const u16,
    lda: usize,
    b: *const u16,
    brs: usize,
    bcs: usize,
    add: bool,
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{Step, MR, NR};
    use std::arch::x86_64::*;
    use std::cell::RefCell;

    thread_local! {
        /// The packed micro-panels of `B` (pairs of bf16 as u32), kept between calls.
        static PACKED: RefCell<Vec<u32>> = const { RefCell::new(Vec::new()) };
    }

    /// Runs one [`Step`] on the calling thread.
    ///
    /// # Safety
    /// As for [`super::gemm`].
    pub(super) unsafe fn step(s: Step) {
        unsafe {
            let micro = s.n.div_ceil(NR);
            PACKED.with(|buf| {
                let mut buf = buf.borrow_mut();
                // The panel of B, then six zero-padded rows of A for a last short row group.
                let len = micro * s.dq * (NR / 2) * 2 + MR * s.dq + 16;
                if buf.len() < len {
                    *buf = vec![0; len];
                }
                let base = buf.as_mut_ptr();
                // SAFETY: 16 spare u32 reach a 64-byte boundary.
                let bp = base.add(base.align_offset(64));
                let mut offsets = [0usize; 8];
                let mut o = 0;
                for (jp, off) in offsets.iter_mut().enumerate().take(micro) {
                    *off = o;
                    let w = NR.min(s.n - jp * NR);
                    pack_b(&s, jp * NR, w, bp.add(o));
                    o += s.dq * w.div_ceil(16) * 16;
                }
                let pad = bp.add(o);
                let rows = s.m / MR * MR;
                for i in (0..s.m).step_by(MR) {
                    let h = MR.min(s.m - i);
                    let mut rows_a = [std::ptr::null::<u32>(); MR];
                    if h == MR {
                        for (r, ra) in rows_a.iter_mut().enumerate() {
                            *ra = s.a.add((i + r) * s.lda + 2 * s.q) as *const u32;
                        }
                    } else {
                        debug_assert_eq!(i, rows);
                        for (r, ra) in rows_a.iter_mut().enumerate() {
                            let dst = pad.add(r * s.dq);
                            if r < h {
                                let src = s.a.add((i + r) * s.lda + 2 * s.q) as *const u32;
                                // The last pair of an odd k was zero-padded when A was packed.
                                std::ptr::copy_nonoverlapping(src, dst, s.dq);
                            } else {
                                std::ptr::write_bytes(dst, 0, s.dq);
                            }
                            *ra = dst;
                        }
                    }
                    for (jp, &off) in offsets.iter().enumerate().take(micro) {
                        let w = NR.min(s.n - jp * NR);
                        let c = s.c.add(i * s.ldc + jp * NR);
                        let panel = bp.add(off) as *const u32;
                        if h == MR && w.is_multiple_of(16) {
                            tile_any(w / 16, s.dq, &rows_a, panel, c, s.ldc, s.add);
                        } else {
                            // A staged tile for a short row group or a partial micro-panel.
                            let mut staged = [0.0f32; MR * NR];
                            if s.add {
                                for r in 0..h {
                                    std::ptr::copy_nonoverlapping(
                                        c.add(r * s.ldc),
                                        staged.as_mut_ptr().add(r * NR),
                                        w,
                                    );
                                }
                            }
                            tile_any(w.div_ceil(16), s.dq, &rows_a, panel, staged.as_mut_ptr(), NR, s.add);
                            for r in 0..h {
                                std::ptr::copy_nonoverlapping(
                                    staged.as_ptr().add(r * NR),
                                    c.add(r * s.ldc),
                                    w,
                                );
                            }
                        }
                    }
                }
            });
        }
    }

    /// Packs columns `j0..j0 + w` of `B` for this step's depths: pair by pair, `nv * 16`
    /// u32 lanes (`nv = ceil(w / 16)`), each the bf16 pair `(B[2p, j], B[2p + 1, j])`, zeros
    /// past `w` and past `k`.
    unsafe fn pack_b(s: &Step, j0: usize, w: usize, dst: *mut u32) {
        unsafe {
            let lanes = w.div_ceil(16) * 16;
            let b = s.b.add(j0 * s.bcs);
            for p in 0..s.dq {
                let d0 = 2 * (s.q + p);
                let row = dst.add(p * lanes);
                let has1 = d0 + 1 < s.k;
                if s.brs == 1 && has1 {
                    // Column-major B: a pair is two adjacent bf16.
                    for j in 0..w {
                        *row.add(j) = (b.add(j * s.bcs + d0) as *const u32).read_unaligned();
                    }
                } else if s.bcs == 1 {
                    let r0 = b.add(d0 * s.brs);
                    if has1 {
                        let r1 = r0.add(s.brs);
                        for j in 0..w {
                            *row.add(j) = *r0.add(j) as u32 | (*r1.add(j) as u32) << 16;
                        }
                    } else {
                        for j in 0..w {
                            *row.add(j) = *r0.add(j) as u32;
                        }
                    }
                } else {
                    for j in 0..w {
                        let lo = *b.add(d0 * s.brs + j * s.bcs) as u32;
                        let hi = if has1 { *b.add((d0 + 1) * s.brs + j * s.bcs) as u32 } else { 0 };
                        *row.add(j) = lo | hi << 16;
                    }
                }
                for j in w..lanes {
                    *row.add(j) = 0;
                }
            }
        }
    }

    /// [`tile`] for `nv` (1 to 4) vectors of columns.
    unsafe fn tile_any(
        nv: usize,
        dq: usize,
        rows: &[*const u32; MR],
        bp: *const u32,
        c: *mut f32,
        ldc: usize,
        add: bool,
    ) {
        unsafe {
            match nv {
                4 => tile::<4>(dq, rows, bp, c, ldc, add),
                3 => tile::<3>(dq, rows, bp, c, ldc, add),
                2 => tile::<2>(dq, rows, bp, c, ldc, add),
                _ => tile::<1>(dq, rows, bp, c, ldc, add),
            }
        }
    }

    /// One `6 x 16NV` tile: `C (+)= A @ Bp` over `dq` pairs of depths.
    #[target_feature(enable = "avx512f,avx512bf16")]
    unsafe fn tile<const NV: usize>(
        dq: usize,
        rows: &[*const u32; MR],
        bp: *const u32,
        c: *mut f32,
        ldc: usize,
        add: bool,
    ) {
        unsafe {
            for i in 0..MR {
                for v in 0..NV {
                    _mm_prefetch::<_MM_HINT_T0>(c.add(i * ldc + 16 * v) as *const i8);
                }
            }
            let mut acc = [[_mm512_setzero_ps(); NV]; MR];
            let [a0, a1, a2, a3, a4, a5] = *rows;
            let mut b = bp;
            let mut p = 0;
            macro_rules! step {
                () => {{
                    let mut bv = [_mm512_setzero_si512(); NV];
                    for (v, x) in bv.iter_mut().enumerate() {
                        *x = _mm512_load_si512(b.add(16 * v) as *const _);
                    }
                    macro_rules! row {
                        ($i:expr, $a:expr) => {
                            let x: __m512bh =
                                std::mem::transmute(_mm512_set1_epi32($a.add(p).read_unaligned() as i32));
                            for v in 0..NV {
                                acc[$i][v] = _mm512_dpbf16_ps(
                                    acc[$i][v],
                                    x,
                                    std::mem::transmute::<__m512i, __m512bh>(bv[v]),
                                );
                            }
                        };
                    }
                    row!(0, a0);
                    row!(1, a1);
                    row!(2, a2);
                    row!(3, a3);
                    row!(4, a4);
                    row!(5, a5);
                    b = b.add(16 * NV);
                    p += 1;
                }};
            }
            while p + 2 <= dq {
                step!();
                step!();
            }
            while p < dq {
                step!();
            }
            for (i, row) in acc.iter().enumerate() {
                let o = c.add(i * ldc);
                for (v, &x) in row.iter().enumerate() {
                    let x = if add { _mm512_add_ps(_mm512_loadu_ps(o.add(16 * v)), x) } else { x };
                    _mm512_storeu_ps(o.add(16 * v), x);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::bf16;

    /// Small integers are exact in bf16 and their sums exact in f32: the kernel must match
    /// the plain triple loop bit for bit, whatever the shape, strides and blocking.
    #[test]
    fn matches_the_triple_loop_exactly_on_every_edge() {
        if !available() {
            eprintln!("no AVX512-BF16 here: nothing to check");
            return;
        }
        let val = |i: usize| ((i * 7919 % 13) as f32 - 6.0) * 0.5;
        for &(m, n, k) in &[
            (1, 1, 1),
            (6, 64, 2),
            (7, 65, 3),
            (13, 17, 33),
            (64, 196, 288),
            (5, 130, 1601),
            (50, 300, 1540),
        ] {
            for &(trans_a, trans_b, acc) in
                &[(false, false, false), (true, false, true), (false, true, false), (true, true, true)]
            {
                let av: Vec<u16> = (0..m * k).map(|i| bf16::from_f32(val(i)).to_bits()).collect();
                let bv: Vec<u16> = (0..k * n).map(|i| bf16::from_f32(val(i + 3)).to_bits()).collect();
                // Row-major storage, read transposed when asked (the same logical matrix).
                let (asr, asc) = if trans_a { (1, m) } else { (k, 1) };
                let (bsr, bsc) = if trans_b { (1, k) } else { (n, 1) };
                let a_at = |i: usize, p: usize| bf16::from_bits(av[i * asr + p * asc]).to_f32();
                let b_at = |p: usize, j: usize| bf16::from_bits(bv[p * bsr + j * bsc]).to_f32();
                let ldc = n + 3;
                let mut c: Vec<f32> = (0..m * ldc).map(|i| (i % 5) as f32).collect();
                let mut want = c.clone();
                for i in 0..m {
                    for j in 0..n {
                        let s: f32 = (0..k).map(|p| a_at(i, p) * b_at(p, j)).sum();
                        want[i * ldc + j] = if acc { want[i * ldc + j] + s } else { s };
                    }
                }
                for threads in [1, 2] {
                    let mut got = c.clone();
                    unsafe {
                        gemm(
                            (m, n, k),
                            got.as_mut_ptr(),
                            ldc,
                            av.as_ptr(),
                            (asr, asc),
                            bv.as_ptr(),
                            (bsr, bsc),
                            acc,
                            threads,
                        )
                    };
                    assert_eq!(
                        got, want,
                        "m={m} n={n} k={k} trans=({trans_a},{trans_b}) acc={acc} threads={threads}"
                    );
                }
                c.clear();
            }
        }
    }
}
