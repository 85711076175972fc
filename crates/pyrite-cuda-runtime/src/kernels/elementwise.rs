//! Elementwise kernels: one generated kernel per op and element types; the layout (sizes,
//! strides, offsets of up to three inputs and the output, broadcasting as stride 0) is a
//! launch parameter.
//!
//! An op is a C expression over the inputs `a`, `b`, `c` (converted to the compute type) and the
//! scalars `s0`, `s1` (launch parameters in the compute type). [`unary_expr`] and
//! [`binary_expr`] hold PyTorch's semantics per op and type, matching pyrite-core's CPU kernels
//! (integers wrap, Python's floor division and remainder, NaN-propagating maximum, 16-bit
//! floats computed in f32).

use super::{CType, KernelSpec, MAX_DIMS};

/// The parameter block of every elementwise kernel (C's `EwParams`, passed by value).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EwParams {
    /// Device addresses of the output and up to three inputs (element 0 of their storages).
    pub ptrs: [u64; 4],
    /// Elements to compute.
    pub n: i64,
    /// Dims in `sizes`.
    pub ndim: i32,
    /// 1 when every operand is contiguous over `n` elements (strides are then ignored).
    pub contiguous: i32,
    /// The iteration shape, outermost first.
    pub sizes: [i64; MAX_DIMS],
    /// Element strides of the output and each input over `sizes` (0 where broadcast).
    pub strides: [[i64; MAX_DIMS]; 4],
    /// Element offsets of the output and each input into their storages.
    pub offsets: [i64; 4],
    /// Float scalars `s0`, `s1` (used when the compute type is a float).
    pub fscalars: [f64; 2],
    /// Integer scalars `s0`, `s1` (used when the compute type is an integer or bool).
    pub iscalars: [i64; 2],
}

impl Default for EwParams {
    fn default() -> Self {
        EwParams {
            ptrs: [0; 4],
            n: 0,
            ndim: 0,
            contiguous: 1,
            sizes: [1; MAX_DIMS],
            strides: [[0; MAX_DIMS]; 4],
            offsets: [0; 4],
            fscalars: [0.0; 2],
            iscalars: [0; 2],
        }
    }
}

const PARAMS_C: &str = "struct EwParams { u64 ptrs[4]; i64 n; int ndim; int contiguous; i64 sizes[MAXD]; \
i64 strides[4][MAXD]; i64 offsets[4]; double fscalars[2]; i64 iscalars[2]; };\n";

/// An elementwise kernel: `out = expr(a, b, c, s0, s1)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Elementwise {
    /// The op's name (part of the kernel name).
    pub op: String,
    /// The input types (0 to 3).
    pub inputs: Vec<CType>,
    /// The output type.
    pub out: CType,
    /// The type the expression computes in (inputs and scalars are converted to it).
    pub compute: CType,
    /// The C expression.
    pub expr: String,
}

impl Elementwise {
    /// The kernel's entry-point name.
    pub fn kernel_name(&self) -> String {
        let ins: Vec<&str> = self.inputs.iter().map(|t| t.tag()).collect();
        format!("ew_{}_{}_{}_{}", self.op, self.out.tag(), ins.join(""), self.compute.tag())
    }

    /// The kernel, ready to compile.
    pub fn spec(&self) -> KernelSpec {
        let name = self.kernel_name();
        let c = self.compute.compute();
        let mut s = String::with_capacity(2048);
        s.push_str(&format!("extern \"C\" __global__ void {name}(const EwParams p) {{\n"));
        s.push_str(&format!(
            "  {}* out = ({}*)p.ptrs[0] + p.offsets[0];\n",
            self.out.storage(),
            self.out.storage()
        ));
        for (k, t) in self.inputs.iter().enumerate() {
            s.push_str(&format!(
                "  const {st}* in{k} = (const {st}*)p.ptrs[{}] + p.offsets[{}];\n",
                k + 1,
                k + 1,
                st = t.storage()
            ));
        }
        let scal = if self.compute.is_float() { "fscalars" } else { "iscalars" };
        s.push_str(&format!(
            "  const {c} s0 = ({c})p.{scal}[0], s1 = ({c})p.{scal}[1];\n  (void)s0; (void)s1;\n"
        ));
        let n_ops = self.inputs.len() + 1;
        s.push_str("  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < p.n; i += (i64)blockDim.x * gridDim.x) {\n");
        s.push_str(&format!("    i64 o[{n_ops}];\n"));
        s.push_str(&format!(
            "    if (p.contiguous) {{ for (int k = 0; k < {n_ops}; k++) o[k] = i; }} else {{\n"
        ));
        s.push_str(&format!("      for (int k = 0; k < {n_ops}; k++) o[k] = 0;\n"));
        s.push_str("      i64 r = i;\n      for (int d = p.ndim - 1; d >= 0; d--) {\n");
        s.push_str("        i64 sz = p.sizes[d], x = r % sz; r /= sz;\n");
        s.push_str(&format!(
            "        for (int k = 0; k < {n_ops}; k++) o[k] += x * p.strides[k][d];\n      }}\n    }}\n"
        ));
        for (k, (t, v)) in self.inputs.iter().zip(["a", "b", "c"]).enumerate() {
            s.push_str(&format!("    const {c} {v} = ({c})({});\n", t.load(&format!("in{k}[o[{}]]", k + 1))));
        }
        s.push_str(&format!("    out[o[0]] = {};\n  }}\n}}\n", self.out.store(&format!("({})", self.expr))));
        KernelSpec { name, params: "EwParams", params_c: PARAMS_C, body: s }
    }
}

/// `{f}` becomes `f` for f32 math and nothing for f64 (C's `expf` / `exp`).
fn math(expr: &str, c: CType) -> String {
    expr.replace("{f}", if c == CType::F64 { "" } else { "f" }).replace("{C}", c.compute())
}

/// The C expression of a one-input op on values of compute type `c` (`a`; scalars `s0`, `s1`),
/// with PyTorch's name. `None`: the op does not apply to that type (pyrite-core promotes or
/// refuses first).
pub fn unary_expr(op: &str, c: CType) -> Option<String> {
    let float = c.is_float();
    let e = match op {
        // Any type.
        "copy" => "a",
        "neg" => match c {
            CType::Bool => return None,
            CType::I32 => "(int)(0u - (u32)a)",
            CType::I64 => "(i64)(0ull - (u64)a)",
            CType::U8 => "(u8)(0 - a)",
            _ => "-a",
        },
        "abs" => match c {
            CType::Bool | CType::U8 => "a",
            _ if float => "fabs{f}(a)",
            _ => "(a < 0 ? ({C})(0 - a) : a)",
        },
        "square" => match c {
            CType::Bool => "a",
            _ => "a * a",
        },
        "sign" => match c {
            CType::Bool => "a",
            _ => "({C})((a > ({C})0) - (a < ({C})0))",
        },
        "relu" => match c {
            CType::Bool => return None,
            _ => "(a != a ? a : (a > ({C})0 ? a : ({C})0))",
        },
        "logical_not" => "!(a != ({C})0)",
        "bitwise_not" => match c {
            CType::Bool => "!a",
            _ if float => return None,
            _ => "({C})(~a)",
        },
        "fill" => "s0",
        "add_scalar" => "a + s0",
        "sub_scalar" => "a - s0",
        "rsub_scalar" => "s0 - a",
        "mul_scalar" => "a * s0",
        // As the CPU: the lower bound first, then the upper (min > max gives max).
        "clamp" => "(a != a ? a : ((a < s0 ? s0 : a) > s1 ? s1 : (a < s0 ? s0 : a)))",
        "clamp_min" => "(a != a ? a : (a < s0 ? s0 : a))",
        "clamp_max" => "(a != a ? a : (a > s0 ? s0 : a))",
        "eq_scalar" => "a == s0",
        "ne_scalar" => "a != s0",
        "lt_scalar" => "a < s0",
        "le_scalar" => "a <= s0",
        "gt_scalar" => "a > s0",
        "ge_scalar" => "a >= s0",
        // Floats only.
        _ if !float => return None,
        "div_scalar" => "a / s0",
        "rdiv_scalar" => "s0 / a",
        "pow_scalar" => "pow{f}(a, s0)",
        "rpow_scalar" => "pow{f}(s0, a)",
        "exp" => "exp{f}(a)",
        "exp2" => "exp2{f}(a)",
        "expm1" => "expm1{f}(a)",
        "log" => "log{f}(a)",
        "log2" => "log2{f}(a)",
        "log10" => "log10{f}(a)",
        "log1p" => "log1p{f}(a)",
        "sqrt" => "sqrt{f}(a)",
        "rsqrt" => "({C})1 / sqrt{f}(a)",
        "reciprocal" => "({C})1 / a",
        "sin" => "sin{f}(a)",
        "cos" => "cos{f}(a)",
        "tan" => "tan{f}(a)",
        "asin" => "asin{f}(a)",
        "acos" => "acos{f}(a)",
        "atan" => "atan{f}(a)",
        "sinh" => "sinh{f}(a)",
        "cosh" => "cosh{f}(a)",
        "tanh" => "tanh{f}(a)",
        "asinh" => "asinh{f}(a)",
        "acosh" => "acosh{f}(a)",
        "atanh" => "atanh{f}(a)",
        "erf" => "erf{f}(a)",
        "erfc" => "erfc{f}(a)",
        "erfinv" => "erfinv{f}(a)",
        "floor" => "floor{f}(a)",
        "ceil" => "ceil{f}(a)",
        "trunc" => "trunc{f}(a)",
        "round" => "rint{f}(a)",
        "frac" => "a - trunc{f}(a)",
        "sigmoid" => "({C})1 / (({C})1 + exp{f}(-a))",
        "logsigmoid" => "(a < ({C})0 ? a - log1p{f}(exp{f}(a)) : -log1p{f}(exp{f}(-a)))",
        "silu" => "a / (({C})1 + exp{f}(-a))",
        "gelu" => "a * ({C})0.5 * (({C})1 + erf{f}(a * ({C})0.70710678118654752440))",
        "gelu_tanh" => {
            "({C})0.5 * a * (({C})1 + tanh{f}(({C})0.79788456080286535588 * (a + ({C})0.044715 * a * a * a)))"
        }
        "mish" => "a * tanh{f}(a > ({C})20 ? a : log1p{f}(exp{f}(a)))",
        "softplus" => "(a * s0 > s1 ? a : log1p{f}(exp{f}(a * s0)) / s0)",
        "leaky_relu" => "(a > ({C})0 ? a : a * s0)",
        "elu" => "(a > ({C})0 ? a : s0 * expm1{f}(a))",
        "hardtanh" => "(a < s0 ? s0 : (a > s1 ? s1 : a))",
        "hardsigmoid" => "(a <= ({C})-3 ? ({C})0 : (a >= ({C})3 ? ({C})1 : a / ({C})6 + ({C})0.5))",
        "hardswish" => "(a <= ({C})-3 ? ({C})0 : (a >= ({C})3 ? a : a * (a + ({C})3) / ({C})6))",
        "isnan" => "a != a",
        "isinf" => "isinf(a)",
        "isfinite" => "isfinite(a)",
        _ => return None,
    };
    Some(math(e, c))
}

/// The C expression of a two-input op on values of compute type `c` (`a`, `b`; `s0` is
/// `add`'s and `sub`'s alpha where the op says so), with PyTorch's name.
pub fn binary_expr(op: &str, c: CType) -> Option<String> {
    use CType::*;
    let float = c.is_float();
    let e = match (op, c) {
        ("add", Bool) => "a || b",
        ("add", I32) => "(int)((u32)a + (u32)b)",
        ("add", I64) => "(i64)((u64)a + (u64)b)",
        ("add", _) => "a + b",
        ("add_alpha", Bool) => return None,
        ("add_alpha", _) => "a + s0 * b",
        ("sub", Bool) => "a != b",
        ("sub", I32) => "(int)((u32)a - (u32)b)",
        ("sub", I64) => "(i64)((u64)a - (u64)b)",
        ("sub", _) => "a - b",
        ("mul", Bool) => "a && b",
        ("mul", I32) => "(int)((u32)a * (u32)b)",
        ("mul", I64) => "(i64)((u64)a * (u64)b)",
        ("mul", _) => "a * b",
        ("div" | "floor_divide" | "trunc_divide", Bool) => "a && b",
        ("div" | "trunc_divide", _) if !float => "(b == 0 ? ({C})0 : ({C})(a / b))",
        ("div", _) => "a / b",
        ("trunc_divide", _) => "trunc{f}(a / b)",
        ("floor_divide", _) if float => "py_floor_div(a, b)",
        ("floor_divide", _) => "int_floor_div(a, b)",
        ("remainder" | "fmod", Bool) => "false",
        ("remainder", _) if float => "py_rem(a, b)",
        ("remainder", _) => "int_rem(a, b)",
        ("fmod", _) if float => "fmod{f}(a, b)",
        ("fmod", _) => "(b == 0 ? ({C})0 : ({C})(a % b))",
        ("pow", Bool) => "a || !b",
        ("pow", _) if float => "pow{f}(a, b)",
        ("pow", _) => "int_pow(a, b)",
        ("maximum", Bool) => "a || b",
        ("minimum", Bool) => "a && b",
        ("maximum", _) => "nan_max(a, b)",
        ("minimum", _) => "nan_min(a, b)",
        ("atan2", _) if float => "atan2{f}(a, b)",
        ("hypot", _) if float => "hypot{f}(a, b)",
        ("eq", _) => "a == b",
        ("ne", _) => "a != b",
        ("lt", _) => "a < b",
        ("le", _) => "a <= b",
        ("gt", _) => "a > b",
        ("ge", _) => "a >= b",
        ("logical_and", _) => "(a != ({C})0) && (b != ({C})0)",
        ("logical_or", _) => "(a != ({C})0) || (b != ({C})0)",
        ("logical_xor", _) => "(a != ({C})0) != (b != ({C})0)",
        ("bitwise_and", Bool) => "a && b",
        ("bitwise_or", Bool) => "a || b",
        ("bitwise_xor", Bool) => "a != b",
        ("bitwise_and", _) if !float => "({C})(a & b)",
        ("bitwise_or", _) if !float => "({C})(a | b)",
        ("bitwise_xor", _) if !float => "({C})(a ^ b)",
        // Gradient helpers: d relu, d sigmoid from the output, d tanh from the output.
        ("threshold_backward", _) => "(b <= s0 ? ({C})0 : a)",
        ("sigmoid_backward", _) if float => "a * b * (({C})1 - b)",
        ("tanh_backward", _) if float => "a * (({C})1 - b * b)",
        _ => return None,
    };
    Some(math(e, c))
}

/// The ops of one, two and three inputs that [`all_kernels`] instantiates.
pub const UNARY_OPS: &[&str] = &[
    "copy",
    "neg",
    "abs",
    "square",
    "sign",
    "relu",
    "logical_not",
    "bitwise_not",
    "fill",
    "add_scalar",
    "sub_scalar",
    "rsub_scalar",
    "mul_scalar",
    "clamp",
    "clamp_min",
    "clamp_max",
    "eq_scalar",
    "ne_scalar",
    "lt_scalar",
    "le_scalar",
    "gt_scalar",
    "ge_scalar",
    "div_scalar",
    "rdiv_scalar",
    "pow_scalar",
    "rpow_scalar",
    "exp",
    "exp2",
    "expm1",
    "log",
    "log2",
    "log10",
    "log1p",
    "sqrt",
    "rsqrt",
    "reciprocal",
    "sin",
    "cos",
    "tan",
    "asin",
    "acos",
    "atan",
    "sinh",
    "cosh",
    "tanh",
    "asinh",
    "acosh",
    "atanh",
    "erf",
    "erfc",
    "erfinv",
    "floor",
    "ceil",
    "trunc",
    "round",
    "frac",
    "sigmoid",
    "logsigmoid",
    "silu",
    "gelu",
    "gelu_tanh",
    "mish",
    "softplus",
    "leaky_relu",
    "elu",
    "hardtanh",
    "hardsigmoid",
    "hardswish",
    "isnan",
    "isinf",
    "isfinite",
];

/// See [`UNARY_OPS`].
pub const BINARY_OPS: &[&str] = &[
    "add",
    "add_alpha",
    "sub",
    "mul",
    "div",
    "floor_divide",
    "trunc_divide",
    "remainder",
    "fmod",
    "pow",
    "maximum",
    "minimum",
    "atan2",
    "hypot",
    "eq",
    "ne",
    "lt",
    "le",
    "gt",
    "ge",
    "logical_and",
    "logical_or",
    "logical_xor",
    "bitwise_and",
    "bitwise_or",
    "bitwise_xor",
    "threshold_backward",
    "sigmoid_backward",
    "tanh_backward",
];

/// Whether `op` (a unary or binary op) gives bool.
pub fn is_predicate(op: &str) -> bool {
    matches!(
        op,
        "eq" | "ne"
            | "lt"
            | "le"
            | "gt"
            | "ge"
            | "logical_and"
            | "logical_or"
            | "logical_xor"
            | "logical_not"
    ) || op.ends_with("_scalar")
        && ["eq_", "ne_", "lt_", "le_", "gt_", "ge_"].iter().any(|p| op.starts_with(p))
        || matches!(op, "isnan" | "isinf" | "isfinite")
}

/// A unary op on type `t` (output `t`, or bool for predicates).
pub fn unary(op: &str, t: CType) -> Option<Elementwise> {
    let expr = unary_expr(op, t)?;
    let out = if is_predicate(op) { CType::Bool } else { t };
    let inputs = if op == "fill" { vec![] } else { vec![t] };
    Some(Elementwise { op: op.into(), inputs, out, compute: t, expr })
}

/// A binary op on two inputs of type `t` (output `t`, or bool for predicates).
pub fn binary(op: &str, t: CType) -> Option<Elementwise> {
    let expr = binary_expr(op, t)?;
    let out = if is_predicate(op) { CType::Bool } else { t };
    Some(Elementwise { op: op.into(), inputs: vec![t, t], out, compute: t, expr })
}

/// A cast from `from` to `to` (`tensor.to(dtype)`, and copies between types).
pub fn cast(from: CType, to: CType) -> Elementwise {
    // Through the wider of the two so that nothing rounds twice (f64 -> bf16 goes through f64
    // then rounds once to bf16 via f32: the f32 step is exact only for the f32-representable
    // part, as PyTorch's CUDA cast does).
    let compute = if to.is_float() || from.is_float() {
        if from == CType::F64 || to == CType::F64 {
            CType::F64
        } else {
            CType::F32
        }
    } else {
        CType::I64
    };
    let compute = if to == CType::Bool { from } else { compute };
    Elementwise { op: "cast".into(), inputs: vec![from], out: to, compute, expr: "a".into() }
}

/// `torch.where(cond, x, y)` on `t`.
pub fn where_(t: CType) -> Elementwise {
    Elementwise {
        op: "where".into(),
        inputs: vec![CType::Bool, t, t],
        out: t,
        compute: t,
        expr: "(a ? b : c)".into(),
    }
}

/// `addcmul`/`lerp`-style three-input ops on floats (`s0` the value/weight).
pub fn ternary(op: &str, t: CType) -> Option<Elementwise> {
    if !t.is_float() {
        return None;
    }
    let expr = match op {
        "addcmul" => "a + s0 * b * c",
        "addcdiv" => "a + s0 * b / c",
        "lerp" => "a + c * (b - a)",
        _ => return None,
    };
    Some(Elementwise { op: op.into(), inputs: vec![t, t, t], out: t, compute: t, expr: expr.into() })
}

/// Every elementwise kernel that applies, for the compile test.
pub fn all_kernels() -> Vec<KernelSpec> {
    let mut v = Vec::new();
    for &t in &CType::ALL {
        for op in UNARY_OPS {
            if let Some(e) = unary(op, t) {
                v.push(e.spec());
            }
        }
        for op in BINARY_OPS {
            if let Some(e) = binary(op, t) {
                v.push(e.spec());
            }
        }
        for op in ["addcmul", "addcdiv", "lerp"] {
            if let Some(e) = ternary(op, t) {
                v.push(e.spec());
            }
        }
        v.push(where_(t).spec());
        for &u in &CType::ALL {
            v.push(cast(t, u).spec());
        }
    }
    v
}
