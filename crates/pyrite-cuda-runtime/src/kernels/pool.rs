//! Pooling: max (with the flat index of each window's maximum) and average pooling forward,
//! and average pooling's backward, over up to three spatial dims.
//!
//! The windows come tabulated from the host, as the CPU kernels use them: for each spatial
//! dim and output position, `(lo, hi, padded)` (input positions `lo..hi` by the dim's step;
//! `padded` is the window's length counting padding). So every pooling flavour (fixed windows
//! with padding, dilation and `ceil_mode`, adaptive windows) is one kernel. Max pooling's
//! backward adds at the indices (the indexing kernels); average pooling's gathers each input
//! element's share from the windows holding it (windows are ordered along each dim, found by
//! binary search): deterministic.

use super::{CType, KernelSpec};

/// The parameter block of the pooling kernels (C's `PoolParams`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PoolParams {
    /// Device addresses: the contiguous source, the destination, the int64 indices (max
    /// pooling) and the int64 window table (`(lo, hi, padded)` per output position, dim 0's
    /// positions first).
    pub src: u64,
    pub dst: u64,
    pub indices: u64,
    pub windows: u64,
    /// Elements to write.
    pub total: i64,
    /// Input and output spatial sizes, and the step between taps per dim.
    pub inp: [i64; 3],
    pub out: [i64; 3],
    pub step: [i64; 3],
    /// Average pooling's divisor: 0 the valid window, 1 the padded window, 2 `divisor`.
    pub div_mode: i64,
    pub divisor: i64,
}

const PARAMS_C: &str = "struct PoolParams { u64 src, dst, indices, windows; i64 total; i64 inp[3], out[3], step[3]; \
i64 div_mode, divisor; };\n\
// The window of output position o along dim d.\n\
__device__ __forceinline__ const i64* pool_win(const PoolParams& p, int d, i64 o) {\n\
  const i64* w = (const i64*)p.windows;\n\
  i64 base = 0;\n\
  for (int e = 0; e < d; e++) base += p.out[e];\n\
  return w + 3 * (base + o);\n\
}\n\
// The windows of flat output position o, per dim.\n\
__device__ __forceinline__ void pool_windows(const PoolParams& p, i64 o, const i64** wz, const i64** wy, const i64** wx) {\n\
  *wz = pool_win(p, 0, o / (p.out[1] * p.out[2]));\n\
  *wy = pool_win(p, 1, o / p.out[2] % p.out[1]);\n\
  *wx = pool_win(p, 2, o % p.out[2]);\n\
}\n\
__device__ __forceinline__ i64 pool_divisor(const PoolParams& p, const i64* wz, const i64* wy, const i64* wx) {\n\
  if (p.div_mode == 2) return p.divisor;\n\
  if (p.div_mode == 1) return wz[2] * wy[2] * wx[2];\n\
  return (wz[1] - wz[0]) * (wy[1] - wy[0]) * (wx[1] - wx[0]);\n\
}\n\
// The output positions along dim d whose windows hold input position i: lo..hi (windows are\n\
// ordered along a dim).\n\
__device__ inline void pool_holders(const PoolParams& p, int d, i64 i, i64* lo, i64* hi) {\n\
  i64 a = 0, b = p.out[d];\n\
  while (a < b) { const i64 m = (a + b) / 2; if (pool_win(p, d, m)[1] <= i) a = m + 1; else b = m; }\n\
  *lo = a;\n\
  b = p.out[d];\n\
  while (a < b) { const i64 m = (a + b) / 2; if (pool_win(p, d, m)[0] <= i) a = m + 1; else b = m; }\n\
  *hi = a;\n\
}\n";

/// Max pooling: each window's maximum (NaN wins; ties keep the first) and its flat index in
/// the input plane.
pub fn max_pool(t: CType) -> KernelSpec {
    let (st, c) = (t.storage(), t.compute());
    let name = format!("max_pool_{}", t.tag());
    let load = t.load("x[plane * L + i]");
    let store = t.store("best");
    let body = format!(
        r#"extern "C" __global__ void {name}(const PoolParams p) {{
  const {st}* x = (const {st}*)p.src;
  {st}* y = ({st}*)p.dst;
  i64* ix = (i64*)p.indices;
  const i64 L = p.inp[0] * p.inp[1] * p.inp[2], O = p.out[0] * p.out[1] * p.out[2];
  for (i64 idx = (i64)blockIdx.x * blockDim.x + threadIdx.x; idx < p.total; idx += (i64)blockDim.x * gridDim.x) {{
    const i64 plane = idx / O, o = idx % O;
    const i64 *wz, *wy, *wx;
    pool_windows(p, o, &wz, &wy, &wx);
    {c} best = -bits_f32(0x7f800000u);
    i64 at = (wz[0] * p.inp[1] + wy[0]) * p.inp[2] + wx[0];
    for (i64 z = wz[0]; z < wz[1]; z += p.step[0])
      for (i64 yy = wy[0]; yy < wy[1]; yy += p.step[1])
        for (i64 xx = wx[0]; xx < wx[1]; xx += p.step[2]) {{
          const i64 i = (z * p.inp[1] + yy) * p.inp[2] + xx;
          const {c} v = {load};
          if (v > best || v != v) {{ best = v; at = i; }}
        }}
    y[idx] = {store};
    ix[idx] = at;
  }}
}}
"#
    );
    KernelSpec { name, params: "PoolParams", params_c: PARAMS_C, body }
}

/// Average pooling: each window's sum over its divisor (0 for a window wholly in the padding).
pub fn avg_pool(t: CType) -> KernelSpec {
    let (st, c) = (t.storage(), t.compute());
    let name = format!("avg_pool_{}", t.tag());
    let load = t.load("x[plane * L + (z * p.inp[1] + yy) * p.inp[2] + xx]");
    let store = t.store("r");
    let body = format!(
        r#"extern "C" __global__ void {name}(const PoolParams p) {{
  const {st}* x = (const {st}*)p.src;
  {st}* y = ({st}*)p.dst;
  const i64 L = p.inp[0] * p.inp[1] * p.inp[2], O = p.out[0] * p.out[1] * p.out[2];
  for (i64 idx = (i64)blockIdx.x * blockDim.x + threadIdx.x; idx < p.total; idx += (i64)blockDim.x * gridDim.x) {{
    const i64 plane = idx / O, o = idx % O;
    const i64 *wz, *wy, *wx;
    pool_windows(p, o, &wz, &wy, &wx);
    {c} sum = 0;
    for (i64 z = wz[0]; z < wz[1]; z++)
      for (i64 yy = wy[0]; yy < wy[1]; yy++)
        for (i64 xx = wx[0]; xx < wx[1]; xx++) sum += {load};
    const bool empty = wz[0] >= wz[1] || wy[0] >= wy[1] || wx[0] >= wx[1];
    const {c} r = empty ? ({c})0 : sum / ({c})pool_divisor(p, wz, wy, wx);
    y[idx] = {store};
  }}
}}
"#
    );
    KernelSpec { name, params: "PoolParams", params_c: PARAMS_C, body }
}

/// Average pooling's backward: each input element sums `grad / divisor` over the windows that
/// hold it (the adjoint of [`avg_pool`]).
pub fn avg_pool_backward(t: CType) -> KernelSpec {
    let (st, c) = (t.storage(), t.compute());
    let name = format!("avg_pool_backward_{}", t.tag());
    let load = t.load("g[plane * O + (oz * p.out[1] + oy) * p.out[2] + ox]");
    let store = t.store("acc");
    let body = format!(
        r#"extern "C" __global__ void {name}(const PoolParams p) {{
  const {st}* g = (const {st}*)p.src;
  {st}* x = ({st}*)p.dst;
  const i64 L = p.inp[0] * p.inp[1] * p.inp[2], O = p.out[0] * p.out[1] * p.out[2];
  for (i64 idx = (i64)blockIdx.x * blockDim.x + threadIdx.x; idx < p.total; idx += (i64)blockDim.x * gridDim.x) {{
    const i64 plane = idx / L, s = idx % L;
    const i64 i0 = s / (p.inp[1] * p.inp[2]), i1 = s / p.inp[2] % p.inp[1], i2 = s % p.inp[2];
    i64 z0, z1, y0, y1, x0, x1;
    pool_holders(p, 0, i0, &z0, &z1);
    pool_holders(p, 1, i1, &y0, &y1);
    pool_holders(p, 2, i2, &x0, &x1);
    {c} acc = 0;
    for (i64 oz = z0; oz < z1; oz++)
      for (i64 oy = y0; oy < y1; oy++)
        for (i64 ox = x0; ox < x1; ox++)
          acc += {load} / ({c})pool_divisor(p, pool_win(p, 0, oz), pool_win(p, 1, oy), pool_win(p, 2, ox));
    x[idx] = {store};
  }}
}}
"#
    );
    KernelSpec { name, params: "PoolParams", params_c: PARAMS_C, body }
}

/// Every pooling kernel (the float types), for the compile test.
pub fn all_kernels() -> Vec<KernelSpec> {
    [CType::F16, CType::BF16, CType::F32, CType::F64]
        .iter()
        .flat_map(|&t| [max_pool(t), avg_pool(t), avg_pool_backward(t)])
        .collect()
}
