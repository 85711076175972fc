//! Our f32 register kernel for AVX-512 machines, used for each panel step of a large product
//! (see `panels` in `linalg.rs`); the columns it leaves over (fewer than 64), every other
//! dtype and every other machine use the `gemm` crate.
//!
//! One step computes `C = beta * C + alpha * A @ B` for a row-major `C` (`m x n`), `A` (`m x
//! k`) and `B` (`k x n`), each with unit column stride, and `k` at most one panel depth:
//! - `B` is copied into micro-panels of 64 columns, laid out depth by depth (64 contiguous
//!   floats per depth step, 64-byte aligned), a thread-local buffer that stays in L2;
//! - for every group of 6 rows of `A` and every micro-panel, the register kernel keeps the
//!   `6 x 64` tile of `C` in 24 zmm registers; it reads the 6 rows of `A` in place (one
//!   broadcast per row and depth step) and 4 vectors of the micro-panel per depth step; the
//!   last `m % 6` rows run as a zero-padded group.
//!
//! This is the layout `gemm` uses for a row-major product; the kernel differs in its
//! schedule: the depth loop is unrolled four times and every broadcast addresses its row as
//! base plus depth offset, so the loop carries almost no integer work beside the 24
//! multiply-adds per step. Measured in one process, calls interleaved, one thread: 1.07x
//! `gemm`'s panels at n = 1024 and 2048.

use std::arch::x86_64::*;
use std::cell::RefCell;

/// Rows of a register tile.
const MR: usize = 6;
/// Vectors of 16 floats per tile row.
const NV: usize = 4;
/// Columns of a register tile (and of a micro-panel of `B`).
const NR: usize = 16 * NV;

/// Whether this machine has AVX-512F, and `PYRITE_SGEMM=0` does not turn the kernel off
/// (then `gemm` computes every product, for comparison).
pub(super) fn available() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::arch::is_x86_feature_detected!("avx512f") && crate::env_switch("PYRITE_SGEMM"))
}

thread_local! {
    /// The packed micro-panels of `B`, kept between calls.
    static PACKED: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// Computes the columns `0..n / 64 * 64` of `C = beta * C + alpha * A @ B`, every row, and
/// returns how many columns that is (0: nothing done). `beta == None`: `C` is write-only. `lda`, `ldb`, `ldc` are row strides in elements; column
/// strides are 1. The last `m % 6` rows go through a zero-padded copy of their rows of `A`
/// and a staged tile of `C`, so that they reuse the packed `B` (handing them to `gemm` would
/// pack `B`'s panel again for a few rows).
///
/// # Safety
/// AVX-512F must be [`available`]; the pointers with these strides must address valid
/// elements for every index in range, and `c` must not overlap `a` or `b`.
pub(super) unsafe fn bulk(
    m: usize,
    n: usize,
    k: usize,
    c: *mut f32,
    ldc: usize,
    a: *const f32,
    lda: usize,
    b: *const f32,
    ldb: usize,
    alpha: f32,
    beta: Option<f32>,
) -> usize {
    unsafe {
        let (rows, cols) = (m / MR * MR, n / NR * NR);
        if m == 0 || cols == 0 || k == 0 {
            return 0;
        }
        PACKED.with(|buf| {
            let mut buf = buf.borrow_mut();
            let len = k * cols + MR * k + 16;
            if buf.len() < len {
                *buf = vec![0.0; len];
            }
            let bp = buf.as_mut_ptr();
            // SAFETY: 16 spare floats are enough to reach a 64-byte boundary.
            let bp = bp.add(bp.align_offset(64));
            let panels = cols / NR;
            for jp in 0..panels {
                let o = bp.add(jp * k * NR);
                for p in 0..k {
                    std::ptr::copy_nonoverlapping(b.add(p * ldb + jp * NR), o.add(p * NR), NR);
                }
            }
            // Row groups outermost: a group's rows of `A` stay in L1 while the micro-panels pass.
            for i in (0..rows).step_by(MR) {
                let rows_a = [0, 1, 2, 3, 4, 5].map(|r| a.add((i + r) * lda));
                for jp in 0..panels {
                    tile(k, &rows_a, bp.add(jp * k * NR), c.add(i * ldc + jp * NR), ldc, alpha, beta);
                }
            }
            let rest = m - rows;
            if rest > 0 {
                // The leftover rows of `A`, zero-padded to a whole group, after the micro-panels.
                let pad = bp.add(k * cols);
                for r in 0..MR {
                    if r < rest {
                        std::ptr::copy_nonoverlapping(a.add((rows + r) * lda), pad.add(r * k), k);
                    } else {
                        std::ptr::write_bytes(pad.add(r * k), 0, k);
                    }
                }
                let rows_a = [0, 1, 2, 3, 4, 5].map(|r| pad.add(r * k) as *const f32);
                let mut staged = [0.0f32; MR * NR];
                for jp in 0..panels {
                    let o = c.add(rows * ldc + jp * NR);
                    if beta.is_some() {
                        for r in 0..rest {
                            std::ptr::copy_nonoverlapping(
                                o.add(r * ldc),
                                staged.as_mut_ptr().add(r * NR),
                                NR,
                            );
                        }
                    }
                    tile(k, &rows_a, bp.add(jp * k * NR), staged.as_mut_ptr(), NR, alpha, beta);
                    for r in 0..rest {
                        std::ptr::copy_nonoverlapping(staged.as_ptr().add(r * NR), o.add(r * ldc), NR);
                    }
                }
            }
        });
        cols
    }
}

/// One `6 x 64` tile: `C = beta * C + alpha * A @ Bp` over `k` depth steps.
#[target_feature(enable = "avx512f")]
unsafe fn tile(
    k: usize,
    rows: &[*const f32; MR],
    bp: *const f32,
    c: *mut f32,
    ldc: usize,
    alpha: f32,
    beta: Option<f32>,
) {
    unsafe {
        // The tile's 24 cache lines of C are fetched while the products run.
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
                let b0 = _mm512_load_ps(b);
                let b1 = _mm512_load_ps(b.add(16));
                let b2 = _mm512_load_ps(b.add(32));
                let b3 = _mm512_load_ps(b.add(48));
                macro_rules! row {
                    ($i:expr, $a:expr) => {
                        let x = _mm512_set1_ps(*$a.add(p));
                        acc[$i][0] = _mm512_fmadd_ps(x, b0, acc[$i][0]);
                        acc[$i][1] = _mm512_fmadd_ps(x, b1, acc[$i][1]);
                        acc[$i][2] = _mm512_fmadd_ps(x, b2, acc[$i][2]);
                        acc[$i][3] = _mm512_fmadd_ps(x, b3, acc[$i][3]);
                    };
                }
                row!(0, a0);
                row!(1, a1);
                row!(2, a2);
                row!(3, a3);
                row!(4, a4);
                row!(5, a5);
                b = b.add(NR);
                p += 1;
            }};
        }
        while p + 4 <= k {
            step!();
            step!();
            step!();
            step!();
        }
        while p < k {
            step!();
        }
        let va = _mm512_set1_ps(alpha);
        for (i, row) in acc.iter().enumerate() {
            let o = c.add(i * ldc);
            for (v, &x) in row.iter().enumerate() {
                let x = if alpha == 1.0 { x } else { _mm512_mul_ps(x, va) };
                let x = match beta {
                    None => x,
                    Some(1.0) => _mm512_add_ps(_mm512_loadu_ps(o.add(16 * v)), x),
                    Some(s) => _mm512_fmadd_ps(_mm512_loadu_ps(o.add(16 * v)), _mm512_set1_ps(s), x),
                };
                _mm512_storeu_ps(o.add(16 * v), x);
            }
        }
    }
}
