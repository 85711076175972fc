//! Optimizer steps over many tensors in one launch (PyTorch's fused / multi-tensor apply).
//!
//! An update is C code for one element, written by the optimizer beside its CPU kernel: it
//! reads and writes `t0[i]`, `t1[i]`, ... (the item's tensors, in the optimizer's order; `tg`
//! is the last one, the gradient) in the element type `T` (f32 or f64), with the item's
//! coefficients `c[0]`, `c[1]`, ... as doubles, converted to `T` where the CPU kernel converts
//! them. `sqrt{f}` and friends take the type's math functions. The items' tensor addresses,
//! element counts and coefficients come in tables uploaded with each step.

use super::{CType, KernelSpec};

/// The parameter block of the foreach kernels (C's `ForeachParams`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ForeachParams {
    /// Device address of the table: per item, `arity` tensor addresses then the element count.
    pub table: u64,
    /// Device address of the coefficients: `ncoef` doubles per item.
    pub coefs: u64,
    pub items: i64,
    pub ncoef: i32,
}

const PARAMS_C: &str = "struct ForeachParams { u64 table, coefs; i64 items; int ncoef; };\n";

/// The kernel applying `body` (see the module) to every element of every item, for tensors of
/// type `t` (f32 or f64) in groups of `arity`.
pub fn foreach(op: &str, body: &str, t: CType, arity: usize) -> Option<KernelSpec> {
    if !matches!(t, CType::F32 | CType::F64) || arity == 0 {
        return None;
    }
    let name = format!("foreach_{op}_{arity}_{}", t.tag());
    let ty = t.compute();
    let body = body.replace("{f}", if t == CType::F64 { "" } else { "f" });
    let mut ptrs = String::new();
    for k in 0..arity {
        ptrs.push_str(&format!("    T* t{k} = (T*)row[{k}]; (void)t{k};\n"));
    }
    let src = format!(
        r#"extern "C" __global__ void {name}(const ForeachParams p) {{
  typedef {ty} T;
  const u64* table = (const u64*)p.table;
  for (i64 item = 0; item < p.items; item++) {{
    const u64* row = table + item * {stride};
{ptrs}    T* tg = t{last}; (void)tg;
    const double* c = (const double*)p.coefs + item * p.ncoef; (void)c;
    const i64 n = (i64)row[{arity}];
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)blockDim.x * gridDim.x) {{
{body}
    }}
  }}
}}
"#,
        stride = arity + 1,
        last = arity - 1,
    );
    Some(KernelSpec { name, params: "ForeachParams", params_c: PARAMS_C, body: src })
}
