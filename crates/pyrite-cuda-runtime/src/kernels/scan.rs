//! Scans along a dim (`cumsum`, `cumprod`, `cummax`, `cummin`) and `nonzero`'s compaction.
//!
//! The input is contiguous and seen as `(outer, k, inner)` with the scanned dim in the middle.
//! One block walks one line: each thread scans its own chunk, one thread scans the chunk
//! totals, then every thread rescans its chunk from its prefix. The order of operations is
//! fixed by the line length and the block size, so results are the same on every run.
//! Accumulation follows PyTorch's CUDA kernels: integers and bool in int64 (wrapping), the
//! 16-bit floats and f32 in f32, f64 in f64.

use super::{CType, KernelSpec, MAX_DIMS};

/// The parameter block of the scan kernels (C's `ScanParams`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ScanParams {
    /// Device addresses of the contiguous input, the output values and (cummax/cummin) the
    /// int64 indices.
    pub input: u64,
    pub out: u64,
    pub out_index: u64,
    /// The `(outer, k, inner)` sizes.
    pub outer: i64,
    pub k: i64,
    pub inner: i64,
}

const PARAMS_C: &str = "struct ScanParams { u64 input, out, out_index; i64 outer, k, inner; };\n";

/// A scan's running operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScanOp {
    Sum,
    Prod,
    Max,
    Min,
}

impl ScanOp {
    pub const ALL: [ScanOp; 4] = [ScanOp::Sum, ScanOp::Prod, ScanOp::Max, ScanOp::Min];

    fn tag(self) -> &'static str {
        match self {
            ScanOp::Sum => "cumsum",
            ScanOp::Prod => "cumprod",
            ScanOp::Max => "cummax",
            ScanOp::Min => "cummin",
        }
    }

    /// Whether the scan also yields indices.
    pub fn is_extreme(self) -> bool {
        matches!(self, ScanOp::Max | ScanOp::Min)
    }

    /// The output's type for input `t`: int64 for integer and bool sums and products.
    pub fn out_type(self, t: CType) -> CType {
        if self.is_extreme() || t.is_float() {
            t
        } else {
            CType::I64
        }
    }
}

/// The scan kernel for `op` over `t` (block size: any; one line per block).
pub fn scan(op: ScanOp, t: CType) -> KernelSpec {
    let name = format!("{}_{}", op.tag(), t.tag());
    let out_t = op.out_type(t);
    let (ost, ist) = (out_t.storage(), t.storage());
    // The accumulator, its identity, and one step `a (op)= v` at position j.
    let acc = match (op, t) {
        (ScanOp::Sum | ScanOp::Prod, _) if !t.is_float() => "u64",
        _ => t.compute(),
    };
    let (init, step) = match op {
        ScanOp::Sum => ("0", "a = a + v"),
        ScanOp::Prod => ("1", "a = a * v"),
        ScanOp::Max => (lowest(t), "if (v != v || (a == a && v >= a)) { a = v; ai = j; }"),
        ScanOp::Min => (highest(t), "if (v != v || (a == a && v <= a)) { a = v; ai = j; }"),
    };
    let load = if acc == "u64" {
        format!("(u64)(i64)({})", t.load("in[base + j * p.inner]"))
    } else {
        format!("({acc})({})", t.load("in[base + j * p.inner]"))
    };
    let store_v = out_t.store(if acc == "u64" { "(i64)a" } else { "a" });
    let write_index = if op.is_extreme() { "oi[base + j * p.inner] = ai;" } else { "" };
    let body = format!(
        r#"extern "C" __global__ void {name}(const ScanParams p) {{
  const {ist}* in = (const {ist}*)p.input;
  {ost}* out = ({ost}*)p.out;
  i64* oi = (i64*)p.out_index; (void)oi;
  __shared__ {acc} tot[1024];
  __shared__ i64 toti[1024];
  const i64 lines = p.outer * p.inner;
  const i64 chunk = (p.k + blockDim.x - 1) / blockDim.x;
  const i64 j0 = threadIdx.x * chunk, j1 = j0 + chunk < p.k ? j0 + chunk : p.k;
  for (i64 line = blockIdx.x; line < lines; line += gridDim.x) {{
    const i64 base = (line / p.inner) * p.k * p.inner + line % p.inner;
    {acc} a = ({acc})({init}); i64 ai = 0; (void)ai;
    for (i64 j = j0; j < j1; j++) {{ const {acc} v = {load}; {step}; }}
    tot[threadIdx.x] = a; toti[threadIdx.x] = ai;
    __syncthreads();
    if (threadIdx.x == 0) {{
      a = ({acc})({init}); ai = 0;
      for (unsigned t = 0; t < blockDim.x && (i64)t * chunk < p.k; t++) {{
        const {acc} v = tot[t]; const i64 j = toti[t]; (void)j;
        tot[t] = a; toti[t] = ai;
        {step};
      }}
    }}
    __syncthreads();
    a = tot[threadIdx.x]; ai = toti[threadIdx.x];
    for (i64 j = j0; j < j1; j++) {{
      const {acc} v = {load}; {step};
      out[base + j * p.inner] = {store_v}; {write_index}
    }}
    __syncthreads();
  }}
}}
"#
    );
    KernelSpec { name, params: "ScanParams", params_c: PARAMS_C, body }
}

fn lowest(t: CType) -> &'static str {
    match t {
        CType::Bool | CType::U8 => "0",
        CType::I32 => "(-2147483647 - 1)",
        CType::I64 => "(-9223372036854775807LL - 1)",
        _ => "(-bits_f32(0x7f800000u))",
    }
}

fn highest(t: CType) -> &'static str {
    match t {
        CType::Bool => "1",
        CType::U8 => "255",
        CType::I32 => "2147483647",
        CType::I64 => "9223372036854775807LL",
        _ => "bits_f32(0x7f800000u)",
    }
}

/// The parameter block of `nonzero`'s compaction (C's `NonzeroParams`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct NonzeroParams {
    /// The inclusive running count of non-zero elements (int64, contiguous, `n` long) and the
    /// `(count, ndim)` int64 output.
    pub counts: u64,
    pub out: u64,
    pub n: i64,
    pub ndim: i32,
    /// The input's shape.
    pub sizes: [i64; MAX_DIMS],
}

const NONZERO_C: &str = "struct NonzeroParams { u64 counts, out; i64 n; int ndim; i64 sizes[MAXD]; };\n";

/// `nonzero`'s second pass: element `i` is non-zero where the running count steps up there;
/// its coordinates go to row `count - 1` of the output.
pub fn nonzero() -> KernelSpec {
    let name = "nonzero_write".to_string();
    let body = format!(
        r#"extern "C" __global__ void {name}(const NonzeroParams p) {{
  const i64* c = (const i64*)p.counts;
  i64* out = (i64*)p.out;
  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < p.n; i += (i64)blockDim.x * gridDim.x) {{
    const i64 before = i == 0 ? 0 : c[i - 1];
    if (c[i] == before) continue;
    i64 r = i;
    for (int d = p.ndim - 1; d >= 0; d--) {{ out[before * p.ndim + d] = r % p.sizes[d]; r /= p.sizes[d]; }}
  }}
}}
"#
    );
    KernelSpec { name, params: "NonzeroParams", params_c: NONZERO_C, body }
}

/// Every scan kernel, for the compile test.
pub fn all_kernels() -> Vec<KernelSpec> {
    let mut v: Vec<KernelSpec> =
        ScanOp::ALL.iter().flat_map(|&op| CType::ALL.iter().map(move |&t| scan(op, t))).collect();
    v.push(nonzero());
    v
}
