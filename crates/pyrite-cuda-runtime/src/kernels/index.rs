//! Indexing kernels: `gather` (also `index_select`, with the index broadcast along the other
//! dims), `scatter` and `scatter_add` (also `index_add`, and the backward of both), over arbitrary
//! strides. The index holds already validated, non-negative positions along `dim`.
//! `scatter_add` adds with atomics, so the order of additions to one element varies between
//! runs, as in PyTorch's CUDA kernel.

use super::{CType, KernelSpec, MAX_DIMS};

/// The parameter block of the indexing kernels (C's `IndexParams`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct IndexParams {
    /// Device addresses of the output, the source and the int64 index.
    pub ptrs: [u64; 3],
    /// Elements to visit (the iteration shape's size).
    pub n: i64,
    /// Dims of the iteration shape.
    pub ndim: i32,
    /// The indexed dim.
    pub dim: i32,
    /// The iteration shape (the index's for gather and scatter, the output's for index_select,
    /// the source's for index_add).
    pub sizes: [i64; MAX_DIMS],
    /// Element strides of the output, the source and the index over the iteration shape
    /// (0 where broadcast; the output's `dim` stride for scatter, the source's for gather, is
    /// the stride the index steps along).
    pub strides: [[i64; MAX_DIMS]; 3],
    /// Element offsets of the output, the source and the index.
    pub offsets: [i64; 3],
    /// The factor applied to added values (`index_add`'s alpha).
    pub alpha: f64,
}

impl Default for IndexParams {
    fn default() -> Self {
        IndexParams {
            ptrs: [0; 3],
            n: 0,
            ndim: 0,
            dim: 0,
            sizes: [1; MAX_DIMS],
            strides: [[0; MAX_DIMS]; 3],
            offsets: [0; 3],
            alpha: 1.0,
        }
    }
}

const PARAMS_C: &str =
    "struct IndexParams { u64 ptrs[3]; i64 n; int ndim, dim; i64 sizes[MAXD]; i64 strides[3][MAXD]; \
i64 offsets[3]; double alpha; };\n\
// The offsets of iteration position i in the output, the source and the index; the operand the\n\
// index points into (`skip`) leaves out the indexed dim, which the index value supplies.\n\
__device__ __forceinline__ void index_offsets(const IndexParams& p, i64 i, int skip, i64 o[3]) {\n\
  o[0] = o[1] = o[2] = 0;\n\
  for (int d = p.ndim - 1; d >= 0; d--) {\n\
    const i64 c = i % p.sizes[d]; i /= p.sizes[d];\n\
    for (int k = 0; k < 3; k++) if (k != skip || d != p.dim) o[k] += c * p.strides[k][d];\n\
  }\n\
}\n";

/// `out[c] = src[c with c[dim] = index[c]]` over the iteration shape.
pub fn gather(t: CType) -> KernelSpec {
    let st = t.storage();
    let name = format!("gather_{}", t.tag());
    let body = format!(
        r#"extern "C" __global__ void {name}(const IndexParams p) {{
  {st}* out = ({st}*)p.ptrs[0] + p.offsets[0];
  const {st}* src = (const {st}*)p.ptrs[1] + p.offsets[1];
  const i64* index = (const i64*)p.ptrs[2] + p.offsets[2];
  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < p.n; i += (i64)blockDim.x * gridDim.x) {{
    i64 o[3];
    index_offsets(p, i, 1, o);
    out[o[0]] = src[o[1] + index[o[2]] * p.strides[1][p.dim]];
  }}
}}
"#
    );
    KernelSpec { name, params: "IndexParams", params_c: PARAMS_C, body }
}

/// `out[c with c[dim] = index[c]] += alpha * src[c]` over the iteration shape, atomically
/// (f32, f64, int32 and int64: the types CUDA adds atomically).
pub fn scatter_add(t: CType) -> Option<KernelSpec> {
    let (st, add) = match t {
        CType::F32 => ("float", "atomicAdd(&out[at], (float)(p.alpha * (double)v))"),
        CType::F64 => ("double", "atomicAdd(&out[at], p.alpha * v)"),
        CType::I32 => ("int", "atomicAdd(&out[at], (int)((i64)p.alpha * v))"),
        CType::I64 => ("i64", "atomicAdd((u64*)&out[at], (u64)((i64)p.alpha * v))"),
        _ => return None,
    };
    Some(scatter_with(format!("scatter_add_{}", t.tag()), st, add))
}

/// `out[c with c[dim] = index[c]] = src[c]` over the iteration shape (`scatter`: where
/// several positions name one element, one of the writes wins, as in PyTorch's CUDA kernel).
pub fn scatter(t: CType) -> KernelSpec {
    let st = t.storage();
    scatter_with(format!("scatter_{}", t.tag()), st, "out[at] = v")
}

/// A scatter kernel: `store` puts `v` (the source element) at `out[at]` (its indexed position).
fn scatter_with(name: String, st: &str, store: &str) -> KernelSpec {
    let body = format!(
        r#"extern "C" __global__ void {name}(const IndexParams p) {{
  {st}* out = ({st}*)p.ptrs[0] + p.offsets[0];
  const {st}* src = (const {st}*)p.ptrs[1] + p.offsets[1];
  const i64* index = (const i64*)p.ptrs[2] + p.offsets[2];
  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < p.n; i += (i64)blockDim.x * gridDim.x) {{
    i64 o[3];
    index_offsets(p, i, 0, o);
    const i64 at = o[0] + index[o[2]] * p.strides[0][p.dim];
    const {st} v = src[o[1]];
    {store};
  }}
}}
"#
    );
    KernelSpec { name, params: "IndexParams", params_c: PARAMS_C, body }
}

/// Every indexing kernel, for the compile test.
pub fn all_kernels() -> Vec<KernelSpec> {
    CType::ALL.iter().flat_map(|&t| [Some(gather(t)), scatter_add(t), Some(scatter(t))]).flatten().collect()
}
