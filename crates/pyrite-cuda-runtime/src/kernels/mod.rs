//! Kernels: CUDA C generated per op and element type, compiled with NVRTC at first use and
//! cached per device.
//!
//! A kernel is described by a [`KernelSpec`] (its name and its full source, made of the shared
//! [`PRELUDE`] and one generated body); the same text compiles on the GPU with NVRTC and, for
//! the tests, on the host with a C++ compiler and a small emulation of the CUDA launch model,
//! so every kernel's arithmetic is checked against the CPU without a GPU.
//!
//! Each kernel takes one `#[repr(C)]` parameter struct by value ([`EwParams`], [`ReduceParams`],
//! [`SoftmaxParams`]): one launch path for all of them.
//!
//! - [`elementwise`]: unary, binary, ternary, comparison, cast and fill over arbitrary strides
//!   and broadcasting (one kernel per op and types, with the layout a parameter).
//! - [`reduce`]: sum, mean, prod, max, min, argmax, argmin over any set of dims, one block per
//!   output, deterministic.
//! - [`softmax`]: softmax and log_softmax over the last dim.
//! - [`index`]: gather / index_select and scatter_add / index_add.
//! - [`gemm`]: batched matrix products over any strides (cuBLAS's stand-in).

pub mod conv;
pub mod elementwise;
pub mod foreach;
pub mod gemm;
pub mod index;
mod nvrtc;
pub mod pool;
pub mod random;
pub mod reduce;
pub mod scan;
pub mod softmax;
pub mod sort;

pub use conv::ConvParams;
pub use elementwise::{binary_expr, unary_expr, Elementwise, EwParams};
pub use foreach::ForeachParams;
pub use gemm::GemmParams;
pub use index::IndexParams;
pub use nvrtc::{compile_ptx, CompiledKernel, KernelCache};
pub use pool::PoolParams;
pub use random::RandomParams;
pub use reduce::{Reduce, ReduceOp, ReduceParams};
pub use scan::{NonzeroParams, ScanOp, ScanParams};
pub use softmax::{Softmax, SoftmaxParams};
pub use sort::SortParams;

/// The source every kernel starts with: element types, 16-bit float conversions, Python's
/// division rules, strided offsets.
pub const PRELUDE: &str = include_str!("prelude.cuh");

/// The most dims a kernel's layout holds after merging contiguous dims (more: the caller
/// copies to a contiguous layout first).
pub const MAX_DIMS: usize = 8;

/// Threads per block of every kernel.
pub const BLOCK: u32 = 256;

/// An element type as the kernels see it (pyrite-core's `DType`, one to one).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CType {
    /// `bool`, stored as one byte holding 0 or 1.
    Bool,
    /// `uint8`.
    U8,
    /// `int32`.
    I32,
    /// `int64`.
    I64,
    /// `float16`, stored as its bits; arithmetic in f32.
    F16,
    /// `bfloat16`, stored as its bits; arithmetic in f32.
    BF16,
    /// `float32`.
    F32,
    /// `float64`.
    F64,
}

impl CType {
    /// Every type.
    pub const ALL: [CType; 8] =
        [CType::Bool, CType::U8, CType::I32, CType::I64, CType::F16, CType::BF16, CType::F32, CType::F64];

    /// Short name used in kernel names.
    pub fn tag(self) -> &'static str {
        match self {
            CType::Bool => "b8",
            CType::U8 => "u8",
            CType::I32 => "i32",
            CType::I64 => "i64",
            CType::F16 => "f16",
            CType::BF16 => "bf16",
            CType::F32 => "f32",
            CType::F64 => "f64",
        }
    }
    /// The C type elements are stored as.
    pub fn storage(self) -> &'static str {
        match self {
            CType::Bool | CType::U8 => "u8",
            CType::I32 => "int",
            CType::I64 => "i64",
            CType::F16 | CType::BF16 => "u16",
            CType::F32 => "float",
            CType::F64 => "double",
        }
    }
    /// The C type arithmetic on this type is done in.
    pub fn compute(self) -> &'static str {
        match self {
            CType::Bool => "bool",
            CType::U8 => "u8",
            CType::I32 => "int",
            CType::I64 => "i64",
            CType::F16 | CType::BF16 | CType::F32 => "float",
            CType::F64 => "double",
        }
    }
    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            CType::Bool | CType::U8 => 1,
            CType::F16 | CType::BF16 => 2,
            CType::I32 | CType::F32 => 4,
            CType::I64 | CType::F64 => 8,
        }
    }
    /// True for the four float types.
    pub fn is_float(self) -> bool {
        matches!(self, CType::F16 | CType::BF16 | CType::F32 | CType::F64)
    }
    /// C for a stored element `v` as a value of [`CType::compute`].
    pub fn load(self, v: &str) -> String {
        match self {
            CType::F16 => format!("f16_to_f32({v})"),
            CType::BF16 => format!("bf16_to_f32({v})"),
            CType::Bool => format!("(({v}) != 0)"),
            _ => v.to_string(),
        }
    }
    /// C that converts a value `v` (of any arithmetic type) into this type's storage.
    pub fn store(self, v: &str) -> String {
        match self {
            CType::F16 => format!("f32_to_f16((float)({v}))"),
            CType::BF16 => format!("f32_to_bf16((float)({v}))"),
            CType::Bool => format!("(u8)(({v}) != 0)"),
            _ => format!("({})({v})", self.storage()),
        }
    }
}

/// A kernel: its entry point's name, the parameter struct it takes and its body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelSpec {
    /// The `extern "C" __global__` function's name, unique across all kernels.
    pub name: String,
    /// The name of the parameter struct it takes by value.
    pub params: &'static str,
    /// The C definition of that struct.
    pub params_c: &'static str,
    /// The kernel function itself.
    pub body: String,
}

impl KernelSpec {
    /// The whole source: [`PRELUDE`], the parameter struct, the body.
    pub fn source(&self) -> String {
        format!("{PRELUDE}{}{}", self.params_c, self.body)
    }
    /// One source holding several kernels that take the same parameter struct (the compile
    /// test builds a family at once).
    pub fn source_of_many(specs: &[&KernelSpec]) -> String {
        let mut s = format!("{PRELUDE}{}", specs.first().map_or("", |k| k.params_c));
        for k in specs {
            debug_assert_eq!(k.params_c, specs[0].params_c);
            s.push_str(&k.body);
        }
        s
    }
}

/// Grid size for `n` work items at [`BLOCK`] threads each, capped so that grid-stride loops
/// cover the rest.
pub fn grid_for(n: u64) -> u32 {
    n.div_ceil(BLOCK as u64).clamp(1, 65_535 * 8) as u32
}

/// Merges adjacent dims that are contiguous with each other in every operand (and drops
/// size-1 dims), so that most layouts index with one or two dims. `strides[k]` are operand
/// `k`'s strides over `sizes`. Returns the merged sizes and strides.
pub fn coalesce(sizes: &[i64], strides: &[Vec<i64>]) -> (Vec<i64>, Vec<Vec<i64>>) {
    let mut out_sizes: Vec<i64> = Vec::new();
    let mut out_strides: Vec<Vec<i64>> = vec![Vec::new(); strides.len()];
    for d in 0..sizes.len() {
        if sizes[d] == 1 {
            continue;
        }
        if let Some(&last) = out_sizes.last() {
            let mergeable =
                strides.iter().zip(&out_strides).all(|(s, o)| *o.last().unwrap() == s[d] * sizes[d]);
            if mergeable {
                *out_sizes.last_mut().unwrap() = last * sizes[d];
                for (s, o) in strides.iter().zip(out_strides.iter_mut()) {
                    *o.last_mut().unwrap() = s[d];
                }
                continue;
            }
        }
        out_sizes.push(sizes[d]);
        for (s, o) in strides.iter().zip(out_strides.iter_mut()) {
            o.push(s[d]);
        }
    }
    (out_sizes, out_strides)
}

/// Every kernel that pyrite-core can ask for, for the compile test: elementwise ops for every
/// type they apply to, casts between every pair, fills, reductions and softmax.
pub fn all_kernels() -> Vec<KernelSpec> {
    let mut v = Vec::new();
    v.extend(elementwise::all_kernels());
    v.extend(reduce::all_kernels());
    v.extend(softmax::all_kernels());
    v.extend(gemm::all_kernels());
    v.extend(index::all_kernels());
    v.extend(scan::all_kernels());
    v.extend(conv::all_kernels());
    v.extend(pool::all_kernels());
    v.extend(sort::all_kernels());
    v.extend(random::all_kernels());
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coalescing_merges_contiguous_dims_and_drops_ones() {
        // A contiguous [2, 3, 4] tensor and a broadcast one ([1, 3, 1] expanded) stay 3 dims.
        let (s, st) = coalesce(&[2, 3, 4], &[vec![12, 4, 1], vec![0, 1, 0]]);
        assert_eq!(s, vec![2, 3, 4]);
        assert_eq!(st, vec![vec![12, 4, 1], vec![0, 1, 0]]);
        // Two contiguous operands become one dim.
        let (s, st) = coalesce(&[2, 3, 4], &[vec![12, 4, 1], vec![12, 4, 1]]);
        assert_eq!((s, st), (vec![24], vec![vec![1], vec![1]]));
        // A transposed operand blocks the merge of the swapped dims only.
        let (s, st) = coalesce(&[5, 2, 3], &[vec![6, 3, 1], vec![6, 1, 2]]);
        assert_eq!((s, st), (vec![5, 2, 3], vec![vec![6, 3, 1], vec![6, 1, 2]]));
        let (s, _) = coalesce(&[1, 1], &[vec![1, 1]]);
        assert!(s.is_empty());
    }
}
