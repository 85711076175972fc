//! Sorting along rows: one step of a bitonic sorting network per launch, over rows padded to
//! a power of two. Elements are ordered by `(value, index)` (NaN above every number, as
//! PyTorch orders it; padding after everything), a total order, so the result is the stable
//! sort and does not depend on the launch configuration. `topk` is the sorted prefix.

use super::{CType, KernelSpec};

/// The parameter block of the sort kernel (C's `SortParams`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SortParams {
    /// Device addresses of the keys (the element type) and the int64 indices, `rows * width`
    /// each; indices `>= len` mark padding.
    pub keys: u64,
    pub indices: u64,
    pub rows: i64,
    /// The padded row length (a power of two) and the real one.
    pub width: i64,
    pub len: i64,
    /// The network's stage (the size of the sequences being merged) and step (partner distance).
    pub stage: i64,
    pub step: i64,
    /// 1 for descending order.
    pub descending: i32,
}

const PARAMS_C: &str =
    "struct SortParams { u64 keys, indices; i64 rows, width, len, stage, step; int descending; };\n";

/// One compare-exchange step of the network over every row.
pub fn sort_step(t: CType) -> KernelSpec {
    let (st, c) = (t.storage(), t.compute());
    let name = format!("sort_step_{}", t.tag());
    let la = t.load("keys[ia]");
    let lb = t.load("keys[ib]");
    let body = format!(
        r#"// Whether (a, ai) comes before (b, bi) in the sorted row.
__device__ __forceinline__ bool sort_before_{tag}({c} a, i64 ai, {c} b, i64 bi, i64 len, int desc) {{
  const bool pa = ai >= len, pb = bi >= len;
  if (pa || pb) return pa == pb ? ai < bi : pb;
  const bool na = a != a, nb = b != b;
  if (na || nb) {{
    if (na && nb) return ai < bi;
    return desc ? na : nb;
  }}
  if (a == b) return ai < bi;
  return desc ? a > b : a < b;
}}
extern "C" __global__ void {name}(const SortParams p) {{
  {st}* keys = ({st}*)p.keys;
  i64* idx = (i64*)p.indices;
  const i64 half = p.rows * p.width / 2;
  for (i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x; t < half; t += (i64)blockDim.x * gridDim.x) {{
    // Pair t: row r, the lower position of a pair p.step apart.
    const i64 r = t / (p.width / 2), q = t % (p.width / 2);
    const i64 lo = (q / p.step) * 2 * p.step + q % p.step;
    const i64 ia = r * p.width + lo, ib = ia + p.step;
    const bool up = (lo & p.stage) == 0;
    const {c} a = {la}, b = {lb};
    const bool swap = up ? sort_before_{tag}(b, idx[ib], a, idx[ia], p.len, p.descending)
                         : sort_before_{tag}(a, idx[ia], b, idx[ib], p.len, p.descending);
    if (swap) {{
      const {st} k = keys[ia]; keys[ia] = keys[ib]; keys[ib] = k;
      const i64 j = idx[ia]; idx[ia] = idx[ib]; idx[ib] = j;
    }}
  }}
}}
"#,
        tag = t.tag()
    );
    KernelSpec { name, params: "SortParams", params_c: PARAMS_C, body }
}

/// Every sort kernel, for the compile test.
pub fn all_kernels() -> Vec<KernelSpec> {
    CType::ALL.iter().map(|&t| sort_step(t)).collect()
}
