//! Convolution's data movement: `im2col` unfolds the input windows into a column matrix for
//! cuBLAS, `col2im` folds a column matrix back onto the input positions (the input's gradient
//! and the transposed convolution). Up to three spatial dims (1-d and 2-d convolutions have
//! leading dims of size 1).
//!
//! The column matrix is `[C * K, N, L]` (channel-major rows of `K` kernel offsets, then batch
//! items, then output positions), so each group's rows form one `[C/groups * K, N * L]` matrix
//! and a convolution is one batched GEMM over the groups. `col2im` gathers each input
//! element's contributions in a fixed order (no atomics): deterministic.

use super::{CType, KernelSpec};

/// The parameter block of the convolution kernels (C's `ConvParams`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ConvParams {
    /// Device addresses: the contiguous source and destination.
    pub src: u64,
    pub dst: u64,
    /// Elements to write.
    pub total: i64,
    /// Batch items and input channels.
    pub n: i64,
    pub c: i64,
    /// Input (`big`) and output (`small`) spatial sizes, kernel sizes, and the geometry.
    pub big: [i64; 3],
    pub small: [i64; 3],
    pub k: [i64; 3],
    pub stride: [i64; 3],
    pub pad: [i64; 3],
    pub dil: [i64; 3],
}

const PARAMS_C: &str = "struct ConvParams { u64 src, dst; i64 total, n, c; i64 big[3], small[3], k[3], stride[3], pad[3], dil[3]; };\n";

/// `col[(c * K + kk) * N + n][l] = x[n][c][o * stride - pad + kk * dil]` (0 in the padding).
pub fn im2col(t: CType) -> KernelSpec {
    let st = t.storage();
    let name = format!("im2col_{}", t.tag());
    let body = format!(
        r#"extern "C" __global__ void {name}(const ConvParams p) {{
  const {st}* x = (const {st}*)p.src;
  {st}* col = ({st}*)p.dst;
  const i64 L = p.small[0] * p.small[1] * p.small[2], K = p.k[0] * p.k[1] * p.k[2];
  for (i64 idx = (i64)blockIdx.x * blockDim.x + threadIdx.x; idx < p.total; idx += (i64)blockDim.x * gridDim.x) {{
    i64 l = idx % L, t = idx / L;
    const i64 n = t % p.n; t /= p.n;
    i64 kk = t % K; const i64 c = t / K;
    i64 off = (n * p.c + c);
    bool inside = true;
    for (int d = 0; d < 3; d++) {{
      const i64 o = l / (d == 0 ? p.small[1] * p.small[2] : d == 1 ? p.small[2] : 1) % p.small[d];
      const i64 k = kk / (d == 0 ? p.k[1] * p.k[2] : d == 1 ? p.k[2] : 1) % p.k[d];
      const i64 i = o * p.stride[d] - p.pad[d] + k * p.dil[d];
      inside = inside && i >= 0 && i < p.big[d];
      off = off * p.big[d] + i;
    }}
    col[idx] = inside ? x[off] : ({st})0;
  }}
}}
"#
    );
    KernelSpec { name, params: "ConvParams", params_c: PARAMS_C, body }
}

/// `x[n][c][i] = sum over kernel offsets kk of col[(c * K + kk) * N + n][o]` for the output
/// positions `o` whose window holds `i` at `kk`.
pub fn col2im(t: CType) -> KernelSpec {
    let st = t.storage();
    let acc = t.compute();
    let name = format!("col2im_{}", t.tag());
    let load = t.load("col[((c * K + kk) * p.n + n) * L + l]");
    let store = t.store("acc");
    let body = format!(
        r#"extern "C" __global__ void {name}(const ConvParams p) {{
  const {st}* col = (const {st}*)p.src;
  {st}* x = ({st}*)p.dst;
  const i64 L = p.small[0] * p.small[1] * p.small[2], K = p.k[0] * p.k[1] * p.k[2];
  const i64 B = p.big[0] * p.big[1] * p.big[2];
  for (i64 idx = (i64)blockIdx.x * blockDim.x + threadIdx.x; idx < p.total; idx += (i64)blockDim.x * gridDim.x) {{
    const i64 s = idx % B, nc = idx / B;
    const i64 c = nc % p.c, n = nc / p.c;
    const i64 i0 = s / (p.big[1] * p.big[2]), i1 = s / p.big[2] % p.big[1], i2 = s % p.big[2];
    {acc} acc = 0;
    for (i64 k0 = 0; k0 < p.k[0]; k0++) {{
      const i64 q0 = i0 + p.pad[0] - k0 * p.dil[0];
      if (q0 < 0 || q0 % p.stride[0] != 0 || q0 / p.stride[0] >= p.small[0]) continue;
      for (i64 k1 = 0; k1 < p.k[1]; k1++) {{
        const i64 q1 = i1 + p.pad[1] - k1 * p.dil[1];
        if (q1 < 0 || q1 % p.stride[1] != 0 || q1 / p.stride[1] >= p.small[1]) continue;
        for (i64 k2 = 0; k2 < p.k[2]; k2++) {{
          const i64 q2 = i2 + p.pad[2] - k2 * p.dil[2];
          if (q2 < 0 || q2 % p.stride[2] != 0 || q2 / p.stride[2] >= p.small[2]) continue;
          const i64 kk = (k0 * p.k[1] + k1) * p.k[2] + k2;
          const i64 l = (q0 / p.stride[0] * p.small[1] + q1 / p.stride[1]) * p.small[2] + q2 / p.stride[2];
          acc += {load};
        }}
      }}
    }}
    x[idx] = {store};
  }}
}}
"#
    );
    KernelSpec { name, params: "ConvParams", params_c: PARAMS_C, body }
}

/// Every convolution kernel (the float types), for the compile test.
pub fn all_kernels() -> Vec<KernelSpec> {
    [CType::F16, CType::BF16, CType::F32, CType::F64].iter().flat_map(|&t| [im2col(t), col2im(t)]).collect()
}
