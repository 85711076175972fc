//! Batched matrix products `C = alpha * A @ B` over arbitrary strides: a 16x16-tiled kernel
//! with shared memory, accumulating in f32 (f64 for f64). pyrite-core uses cuBLAS on a GPU where
//! the layouts allow it; this kernel covers the rest, and is the reference the emulated device
//! runs.

use super::{CType, KernelSpec};

/// The parameter block of the GEMM kernels (C's `GemmParams`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct GemmParams {
    /// Device address of A's storage.
    pub a: u64,
    /// Device address of B's storage.
    pub b: u64,
    /// Device address of C's storage.
    pub c: u64,
    /// Matrices in the batch.
    pub batch: i64,
    /// Rows of A and C.
    pub m: i64,
    /// Columns of B and C.
    pub n: i64,
    /// Columns of A, rows of B.
    pub k: i64,
    /// A's element strides: batch, row, column.
    pub sa: [i64; 3],
    /// B's element strides.
    pub sb: [i64; 3],
    /// C's element strides.
    pub sc: [i64; 3],
    /// Element offsets of A, B, C.
    pub offsets: [i64; 3],
    /// The scale of the product.
    pub alpha: f64,
}

const PARAMS_C: &str = "struct GemmParams { u64 a, b, c; i64 batch, m, n, k; i64 sa[3], sb[3], sc[3]; \
i64 offsets[3]; double alpha; };\n";

/// The tile edge: blocks are `TILE * TILE` = 256 threads, which the kernel requires.
pub const TILE: u32 = 16;

/// The GEMM kernel for elements of `t` (a float type; PyTorch has no integer matmul on CUDA).
pub fn spec(t: CType) -> Option<KernelSpec> {
    if !t.is_float() {
        return None;
    }
    let acc = if t == CType::F64 { "double" } else { "float" };
    let st = t.storage();
    let name = format!("gemm_{}", t.tag());
    let ld = |p: &str| t.load(p);
    let body = format!(
        r#"extern "C" __global__ void {name}(const GemmParams p) {{
  __shared__ {acc} ta[16][17];
  __shared__ {acc} tb[16][17];
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const {st}* A = (const {st}*)p.a + p.offsets[0];
  const {st}* B = (const {st}*)p.b + p.offsets[1];
  {st}* C = ({st}*)p.c + p.offsets[2];
  const i64 tm = (p.m + 15) / 16, tn = (p.n + 15) / 16, tiles = p.batch * tm * tn;
  for (i64 t = blockIdx.x; t < tiles; t += gridDim.x) {{
    const i64 bi = t / (tm * tn), r = t % (tm * tn), i0 = (r / tn) * 16, j0 = (r % tn) * 16;
    const {st}* Ab = A + bi * p.sa[0];
    const {st}* Bb = B + bi * p.sb[0];
    {acc} acc = 0;
    for (i64 k0 = 0; k0 < p.k; k0 += 16) {{
      ta[ty][tx] = (i0 + ty < p.m && k0 + tx < p.k) ? ({acc}){la} : ({acc})0;
      tb[ty][tx] = (k0 + ty < p.k && j0 + tx < p.n) ? ({acc}){lb} : ({acc})0;
      __syncthreads();
      for (int kk = 0; kk < 16; kk++) acc += ta[ty][kk] * tb[kk][tx];
      __syncthreads();
    }}
    if (i0 + ty < p.m && j0 + tx < p.n) C[bi * p.sc[0] + (i0 + ty) * p.sc[1] + (j0 + tx) * p.sc[2]] = {store};
  }}
}}
"#,
        la = ld("Ab[(i0 + ty) * p.sa[1] + (k0 + tx) * p.sa[2]]"),
        lb = ld("Bb[(k0 + ty) * p.sb[1] + (j0 + tx) * p.sb[2]]"),
        store = t.store(&format!("({acc})p.alpha * acc")),
    );
    Some(KernelSpec { name, params: "GemmParams", params_c: PARAMS_C, body })
}

/// Every GEMM kernel, for the compile test.
pub fn all_kernels() -> Vec<KernelSpec> {
    CType::ALL.iter().filter_map(|&t| spec(t)).collect()
}
