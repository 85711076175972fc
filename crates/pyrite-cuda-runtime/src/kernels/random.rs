//! Random fills on the device from pyrite-core's generator: Philox4x32-10, with element `i`
//! of a fill taking word `i % K` of counter block `base + i / K` (K = 4 or 2 by distribution
//! and dtype), exactly as the CPU fill does. So a seed gives the CPU's stream on the GPU:
//! uniform, Bernoulli and integer draws are bit for bit the CPU's; normal draws go through the
//! device's `logf` / `sinf` / `cosf` and match to a few ulps. (PyTorch's CUDA generator is
//! Philox too, but promises no particular stream, nor the CPU's.)

use super::{CType, KernelSpec};

/// The parameter block of the random kernels (C's `RandomParams`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RandomParams {
    /// Device address of the contiguous output.
    pub out: u64,
    /// Elements to fill.
    pub n: i64,
    /// The generator's key and the fill's first counter block.
    pub seed: u64,
    pub base: u64,
    /// Uniform: `from`, `to - from`; normal: `mean`, `std`; Bernoulli: `p`.
    pub f: [f64; 2],
    /// Integers: `low` and the range (up to 2^64, as two words: `range_lo`, `range_hi`).
    pub low: i64,
    pub range_lo: u64,
    pub range_hi: u64,
}

const PARAMS_C: &str = "struct RandomParams { u64 out; i64 n; u64 seed, base; double f[2]; i64 low; u64 range_lo, range_hi; };\n\
// Random123's philox4x32 with ten rounds: counter block `block` under key `seed`.\n\
__device__ inline void philox_block(u64 seed, u64 block, u32 w[4]) {\n\
  u32 c0 = (u32)block, c1 = (u32)(block >> 32), c2 = 0, c3 = 0;\n\
  u32 k0 = (u32)seed, k1 = (u32)(seed >> 32);\n\
  for (int r = 0; r < 10; r++) {\n\
    if (r > 0) { k0 += 0x9E3779B9u; k1 += 0xBB67AE85u; }\n\
    const u64 p0 = (u64)0xD2511F53u * c0, p1 = (u64)0xCD9E8D57u * c2;\n\
    const u32 n0 = (u32)(p1 >> 32) ^ c1 ^ k0, n2 = (u32)(p0 >> 32) ^ c3 ^ k1;\n\
    c0 = n0; c1 = (u32)p1; c2 = n2; c3 = (u32)p0;\n\
  }\n\
  w[0] = c0; w[1] = c1; w[2] = c2; w[3] = c3;\n\
}\n\
__device__ inline double rand_u53(u32 lo, u32 hi) { return (double)((((u64)hi << 32) | lo) >> 11) * (1.0 / 9007199254740992.0); }\n";

/// A distribution the kernels draw.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dist {
    Uniform,
    Normal,
    Bernoulli,
    /// Integers with a range up to 2^32 (one word each).
    Int32,
    /// Integers with a range up to 2^64 (two words each).
    Int64,
}

impl Dist {
    pub const ALL: [Dist; 5] = [Dist::Uniform, Dist::Normal, Dist::Bernoulli, Dist::Int32, Dist::Int64];

    /// Elements drawn per counter block into `t` (the CPU's `per_block`).
    pub fn per_block(self, t: CType) -> usize {
        match self {
            Dist::Uniform | Dist::Normal if t == CType::F64 => 2,
            Dist::Uniform | Dist::Normal | Dist::Int32 => 4,
            Dist::Bernoulli | Dist::Int64 => 2,
        }
    }

    fn tag(self) -> &'static str {
        match self {
            Dist::Uniform => "uniform",
            Dist::Normal => "normal",
            Dist::Bernoulli => "bernoulli",
            Dist::Int32 => "int32",
            Dist::Int64 => "int64",
        }
    }
}

/// Uniform mantissa digits of a float type (the CPU's `float_digits`).
fn digits(t: CType) -> u32 {
    match t {
        CType::F16 => 11,
        CType::BF16 => 8,
        CType::F32 => 24,
        _ => 53,
    }
}

/// The fill kernel for `dist` into `t`: one thread per counter block. `None` where the CPU
/// does not draw that distribution into that type (uniform and normal need a float type).
pub fn fill(dist: Dist, t: CType) -> Option<KernelSpec> {
    if matches!(dist, Dist::Uniform | Dist::Normal) && !t.is_float() {
        return None;
    }
    let k = dist.per_block(t);
    let name = format!("random_{}_{}", dist.tag(), t.tag());
    let st = t.storage();
    // The K values of one block, as expressions `v[j]` of the compute type.
    let values = match dist {
        Dist::Uniform if t == CType::F64 => {
            "const double v[2] = { rand_u53(w[0], w[1]) * p.f[1] + p.f[0], rand_u53(w[2], w[3]) * p.f[1] + p.f[0] };"
                .to_string()
        }
        Dist::Uniform => format!(
            "const float from = (float)p.f[0], span = (float)p.f[1];\n    float v[4];\n    \
             for (int j = 0; j < 4; j++) v[j] = (float)(w[j] & ((1u << {d}) - 1)) * (1.0f / (float)(1u << {d})) * span + from;",
            d = digits(t)
        ),
        Dist::Normal if t == CType::F64 => "const double u1 = (double)(((((u64)w[1] << 32) | w[0]) >> 11) + 1) * (1.0 / 9007199254740992.0);\n    \
             const double u2 = rand_u53(w[2], w[3]);\n    const double r = sqrt(-2.0 * log(u1)), a = 6.283185307179586 * u2;\n    \
             const double v[2] = { r * cos(a) * p.f[1] + p.f[0], r * sin(a) * p.f[1] + p.f[0] };"
            .to_string(),
        Dist::Normal => "const float mean = (float)p.f[0], sd = (float)p.f[1];\n    float v[4];\n    \
             for (int j = 0; j < 2; j++) {\n      \
               const float u1 = (float)((w[2 * j] >> 8) + 1) * (1.0f / 16777216.0f), u2 = (float)(w[2 * j + 1] >> 8) * (1.0f / 16777216.0f);\n      \
               const float r = sqrtf(-2.0f * logf(u1)), a = 6.2831855f * u2;\n      \
               v[2 * j] = r * cosf(a) * sd + mean; v[2 * j + 1] = r * sinf(a) * sd + mean;\n    }"
            .to_string(),
        Dist::Bernoulli => "const int v[2] = { rand_u53(w[0], w[1]) < p.f[0], rand_u53(w[2], w[3]) < p.f[0] };".to_string(),
        Dist::Int32 => "i64 v[4];\n    for (int j = 0; j < 4; j++) v[j] = (i64)((u64)p.low + (((u64)w[j] * p.range_lo) >> 32));".to_string(),
        Dist::Int64 => "i64 v[2];\n    for (int j = 0; j < 2; j++) {\n      \
             const u64 x = ((u64)w[2 * j + 1] << 32) | w[2 * j];\n      \
             // floor(x * range / 2^64) for range = range_hi * 2^64 + range_lo (range_hi is 0 or 1)\n      \
             const u64 off = mulhi64(x, p.range_lo) + (p.range_hi ? x : 0);\n      \
             v[j] = (i64)((u64)p.low + off);\n    }"
            .to_string(),
    };
    let store = t.store("v[j]");
    let body = format!(
        r#"extern "C" __global__ void {name}(const RandomParams p) {{
  {st}* out = ({st}*)p.out;
  const i64 blocks = (p.n + {k} - 1) / {k};
  for (i64 b = (i64)blockIdx.x * blockDim.x + threadIdx.x; b < blocks; b += (i64)blockDim.x * gridDim.x) {{
    u32 w[4];
    philox_block(p.seed, p.base + (u64)b, w);
    {values}
    for (int j = 0; j < {k} && b * {k} + j < p.n; j++) out[b * {k} + j] = {store};
  }}
}}
"#
    );
    Some(KernelSpec { name, params: "RandomParams", params_c: PARAMS_C, body })
}

/// Every random kernel, for the compile test.
pub fn all_kernels() -> Vec<KernelSpec> {
    Dist::ALL.iter().flat_map(|&d| CType::ALL.iter().filter_map(move |&t| fill(d, t))).collect()
}
