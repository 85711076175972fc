//! Softmax and log_softmax over the last dim of a contiguous tensor, and their backward
//! passes: one block per row, the row's max and sum folded in shared memory.

use super::{CType, KernelSpec, BLOCK};

/// The parameter block of the softmax kernels (C's `SoftmaxParams`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SoftmaxParams {
    /// Device address of the output.
    pub out: u64,
    /// Device address of the input (forward) or of the forward's output (backward).
    pub input: u64,
    /// Device address of the incoming gradient (backward only).
    pub grad: u64,
    /// Rows.
    pub rows: i64,
    /// Elements per row.
    pub cols: i64,
}

const PARAMS_C: &str = "struct SoftmaxParams { u64 out, in, grad; i64 rows, cols; };\n";

/// Which of the four kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Softmax {
    /// `softmax(x)`.
    Forward,
    /// `log_softmax(x)`.
    LogForward,
    /// Softmax's input gradient from its output `y` and gradient `g`: `y * (g - sum(g * y))`.
    Backward,
    /// log_softmax's from its output `y`: `g - exp(y) * sum(g)`.
    LogBackward,
}

impl Softmax {
    /// The kernel for elements of `t` (a float type).
    pub fn spec(self, t: CType) -> Option<KernelSpec> {
        if !t.is_float() {
            return None;
        }
        let tag = match self {
            Softmax::Forward => "softmax",
            Softmax::LogForward => "log_softmax",
            Softmax::Backward => "softmax_backward",
            Softmax::LogBackward => "log_softmax_backward",
        };
        let name = format!("{tag}_{}", t.tag());
        let acc = if t == CType::F64 { "double" } else { "float" };
        let f = if t == CType::F64 { "" } else { "f" };
        let st = t.storage();
        let ld = |p: &str| t.load(&format!("{p}[c]"));
        let mut s = String::with_capacity(4096);
        s.push_str(&format!("extern \"C\" __global__ void {name}(const SoftmaxParams p) {{\n"));
        s.push_str(&format!("  __shared__ {acc} red[{BLOCK}];\n  const int t = threadIdx.x;\n"));
        s.push_str("  for (i64 r = blockIdx.x; r < p.rows; r += gridDim.x) {\n");
        s.push_str(&format!(
            "    const {st}* x = (const {st}*)p.in + r * p.cols;\n    {st}* y = ({st}*)p.out + r * p.cols;\n"
        ));
        s.push_str(&format!("    const {st}* g = (const {st}*)p.grad + r * p.cols; (void)g;\n"));
        // A block-wide fold of `v` into red[0] with `op` (a C expression of a and b).
        let fold = |init: &str, each: &str, op: &str| {
            format!(
                "    {{ {acc} a = {init};\n      for (i64 c = t; c < p.cols; c += blockDim.x) {{ const {acc} b = {each}; a = {op}; }}\n      red[t] = a; __syncthreads();\n      for (int h = blockDim.x / 2; h > 0; h >>= 1) {{ if (t < h) {{ const {acc} a = red[t], b = red[t + h]; red[t] = {op}; }} __syncthreads(); }}\n    }}\n"
            )
        };
        match self {
            Softmax::Forward | Softmax::LogForward => {
                s.push_str(&fold(
                    &format!("-({acc})bits_f32(0x7f800000u)"),
                    &format!("({acc}){}", ld("x")),
                    "nan_max(a, b)",
                ));
                s.push_str(&format!("    const {acc} m = red[0]; __syncthreads();\n"));
                s.push_str(&fold(&format!("({acc})0"), &format!("exp{f}(({acc}){} - m)", ld("x")), "a + b"));
                s.push_str(&format!("    const {acc} sum = red[0]; __syncthreads();\n"));
                let v = if self == Softmax::Forward {
                    format!("exp{f}(({acc}){} - m) / sum", ld("x"))
                } else {
                    format!("({acc}){} - m - log{f}(sum)", ld("x"))
                };
                s.push_str(&format!(
                    "    for (i64 c = t; c < p.cols; c += blockDim.x) y[c] = {};\n",
                    t.store(&v)
                ));
            }
            Softmax::Backward | Softmax::LogBackward => {
                let each = if self == Softmax::Backward {
                    format!("({acc}){} * ({acc}){}", ld("g"), ld("x"))
                } else {
                    format!("({acc}){}", ld("g"))
                };
                s.push_str(&fold(&format!("({acc})0"), &each, "a + b"));
                s.push_str(&format!("    const {acc} sum = red[0]; __syncthreads();\n"));
                let v = if self == Softmax::Backward {
                    format!("({acc}){} * (({acc}){} - sum)", ld("x"), ld("g"))
                } else {
                    format!("({acc}){} - exp{f}(({acc}){}) * sum", ld("g"), ld("x"))
                };
                s.push_str(&format!(
                    "    for (i64 c = t; c < p.cols; c += blockDim.x) y[c] = {};\n",
                    t.store(&v)
                ));
            }
        }
        s.push_str("    __syncthreads();\n  }\n}\n");
        Some(KernelSpec { name, params: "SoftmaxParams", params_c: PARAMS_C, body: s })
    }
}

/// Every softmax kernel, for the compile test.
pub fn all_kernels() -> Vec<KernelSpec> {
    let mut v = Vec::new();
    for k in [Softmax::Forward, Softmax::LogForward, Softmax::Backward, Softmax::LogBackward] {
        for &t in &CType::ALL {
            v.extend(k.spec(t));
        }
    }
    v
}
