//! Reductions over any set of dims: one block per output element, each thread folding a
//! fixed strided share of the reduced elements, then a tree in shared memory. The order of
//! additions depends only on the shape, so results are deterministic run to run.

use super::{CType, KernelSpec, BLOCK, MAX_DIMS};

/// The parameter block of every reduction kernel (C's `ReduceParams`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ReduceParams {
    /// Device address of the output values (0: not written; argmax/argmin).
    pub out: u64,
    /// Device address of the input.
    pub input: u64,
    /// Device address of the int64 indices (argmax, argmin, max/min with indices; else 0).
    pub out_index: u64,
    /// Output elements.
    pub n_out: i64,
    /// Elements reduced into each output.
    pub n_red: i64,
    /// Dims of the kept (output) index space.
    pub nd_out: i32,
    /// Dims of the reduced index space.
    pub nd_red: i32,
    /// Sizes of the kept dims.
    pub out_sizes: [i64; MAX_DIMS],
    /// Input strides of the kept dims.
    pub out_in_strides: [i64; MAX_DIMS],
    /// Output strides of the kept dims (values and indices share them).
    pub out_strides: [i64; MAX_DIMS],
    /// Sizes of the reduced dims.
    pub red_sizes: [i64; MAX_DIMS],
    /// Input strides of the reduced dims.
    pub red_strides: [i64; MAX_DIMS],
    /// Element offset of the input.
    pub in_offset: i64,
    /// Element offset of the values output.
    pub out_offset: i64,
    /// Element offset of the indices output.
    pub index_offset: i64,
}

impl Default for ReduceParams {
    fn default() -> Self {
        ReduceParams {
            out: 0,
            input: 0,
            out_index: 0,
            n_out: 0,
            n_red: 0,
            nd_out: 0,
            nd_red: 0,
            out_sizes: [1; MAX_DIMS],
            out_in_strides: [0; MAX_DIMS],
            out_strides: [0; MAX_DIMS],
            red_sizes: [1; MAX_DIMS],
            red_strides: [0; MAX_DIMS],
            in_offset: 0,
            out_offset: 0,
            index_offset: 0,
        }
    }
}

impl ReduceParams {
    /// The index spaces of reducing the dims of a tensor of `sizes` and element `strides`
    /// selected by `reduced`, into a contiguous output of the kept dims (addresses and offsets
    /// left 0 for the caller). `None` beyond [`MAX_DIMS`] kept or reduced dims.
    pub fn over(sizes: &[usize], strides: &[i64], reduced: &[bool]) -> Option<ReduceParams> {
        let kept: Vec<usize> = (0..sizes.len()).filter(|&d| !reduced[d]).collect();
        let red: Vec<usize> = (0..sizes.len()).filter(|&d| reduced[d]).collect();
        if kept.len() > MAX_DIMS || red.len() > MAX_DIMS {
            return None;
        }
        let mut p = ReduceParams::default();
        let mut out_stride = 1i64;
        for (i, &d) in kept.iter().enumerate().rev() {
            p.out_sizes[i] = sizes[d] as i64;
            p.out_in_strides[i] = strides[d];
            p.out_strides[i] = out_stride;
            out_stride *= sizes[d] as i64;
        }
        for (i, &d) in red.iter().enumerate() {
            p.red_sizes[i] = sizes[d] as i64;
            p.red_strides[i] = strides[d];
        }
        p.nd_out = kept.len() as i32;
        p.nd_red = red.len() as i32;
        p.n_out = out_stride;
        p.n_red = red.iter().map(|&d| sizes[d] as i64).product();
        Some(p)
    }
}

const PARAMS_C: &str = "struct ReduceParams { u64 out, in, out_index; i64 n_out, n_red; int nd_out, nd_red; \
i64 out_sizes[MAXD]; i64 out_in_strides[MAXD]; i64 out_strides[MAXD]; i64 red_sizes[MAXD]; i64 red_strides[MAXD]; \
i64 in_offset, out_offset, index_offset; };\n";

/// What a reduction computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    /// `sum` (integers and bool accumulate in int64, wrapping).
    Sum,
    /// `mean` (floats only).
    Mean,
    /// `prod`.
    Prod,
    /// `amax` (NaN propagates).
    Max,
    /// `amin` (NaN propagates).
    Min,
    /// `argmax` / `max(dim)`: the first index of the largest value (a NaN counts as largest).
    ArgMax,
    /// `argmin` / `min(dim)`: the first index of the smallest value (a NaN counts as smallest).
    ArgMin,
}

impl ReduceOp {
    fn tag(self) -> &'static str {
        match self {
            ReduceOp::Sum => "sum",
            ReduceOp::Mean => "mean",
            ReduceOp::Prod => "prod",
            ReduceOp::Max => "amax",
            ReduceOp::Min => "amin",
            ReduceOp::ArgMax => "argmax",
            ReduceOp::ArgMin => "argmin",
        }
    }
    fn is_arg(self) -> bool {
        matches!(self, ReduceOp::ArgMax | ReduceOp::ArgMin)
    }
}

/// A reduction kernel from `input` elements to `out` elements.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reduce {
    /// The reduction.
    pub op: ReduceOp,
    /// The input type.
    pub input: CType,
    /// The output values' type.
    pub out: CType,
}

impl Reduce {
    /// The accumulator's C type: f32 for 16-bit floats and f32, f64 for f64, int64 otherwise.
    pub fn acc(&self) -> &'static str {
        match self.input {
            CType::F64 => "double",
            t if t.is_float() => "float",
            _ if self.op.is_arg() || matches!(self.op, ReduceOp::Max | ReduceOp::Min) => self.input.compute(),
            _ => "i64",
        }
    }

    /// The kernel's entry-point name.
    pub fn kernel_name(&self) -> String {
        format!("reduce_{}_{}_{}", self.op.tag(), self.out.tag(), self.input.tag())
    }

    /// `None` where the op does not apply (mean of integers: pyrite-core casts first).
    pub fn spec(&self) -> Option<KernelSpec> {
        if self.op == ReduceOp::Mean && !self.input.is_float() {
            return None;
        }
        let acc = self.acc();
        let name = self.kernel_name();
        let int_acc = acc == "i64";
        let (init, fold) = match self.op {
            ReduceOp::Sum | ReduceOp::Mean if int_acc => ("0", "x = (i64)((u64)x + (u64)y)"),
            ReduceOp::Sum | ReduceOp::Mean => ("0", "x = x + y"),
            ReduceOp::Prod if int_acc => ("1", "x = (i64)((u64)x * (u64)y)"),
            ReduceOp::Prod => ("1", "x = x * y"),
            ReduceOp::Max => ("0", "x = (first ? y : nan_max(x, y))"),
            ReduceOp::Min => ("0", "x = (first ? y : nan_min(x, y))"),
            ReduceOp::ArgMax => ("0", "better = (y > x) || (y != y && x == x)"),
            ReduceOp::ArgMin => ("0", "better = (y < x) || (y != y && x == x)"),
        };
        let st = self.input.storage();
        let mut s = String::with_capacity(4096);
        s.push_str(&format!("extern \"C\" __global__ void {name}(const ReduceParams p) {{\n"));
        s.push_str(&format!("  __shared__ {acc} sv[{BLOCK}];\n  __shared__ i64 si[{BLOCK}];\n"));
        s.push_str(&format!("  const {st}* in = (const {st}*)p.in + p.in_offset;\n"));
        s.push_str("  const int t = threadIdx.x;\n");
        s.push_str("  for (i64 j = blockIdx.x; j < p.n_out; j += gridDim.x) {\n");
        s.push_str("    const i64 base = strided_offset(j, p.nd_out, p.out_sizes, p.out_in_strides);\n");
        s.push_str(&format!("    {acc} x = ({acc}){init}; i64 xi = -1;\n"));
        s.push_str("    for (i64 r = t; r < p.n_red; r += blockDim.x) {\n");
        s.push_str(&format!(
            "      const {acc} y = ({acc})({});\n",
            self.input.load("in[base + strided_offset(r, p.nd_red, p.red_sizes, p.red_strides)]")
        ));
        if self.op.is_arg() {
            s.push_str(&format!(
                "      bool better; {fold};\n      if (xi < 0 || better) {{ x = y; xi = r; }}\n"
            ));
        } else {
            s.push_str(&format!("      const bool first = xi < 0; (void)first; {fold}; xi = r;\n"));
        }
        s.push_str("    }\n    sv[t] = x; si[t] = xi;\n    __syncthreads();\n");
        s.push_str(
            "    for (int h = blockDim.x / 2; h > 0; h >>= 1) {\n      if (t < h && si[t + h] >= 0) {\n",
        );
        s.push_str(&format!(
            "        const {acc} y = sv[t + h]; const i64 yi = si[t + h]; x = sv[t]; xi = si[t];\n"
        ));
        if self.op.is_arg() {
            s.push_str(&format!(
                "        bool better; {fold};\n        if (xi < 0 || better || (!(x > y) && !(x < y) && (x == x) == (y == y) && yi < xi)) {{ sv[t] = y; si[t] = yi; }}\n"
            ));
        } else {
            s.push_str(&format!(
                "        const bool first = xi < 0; (void)first; {fold}; sv[t] = x; si[t] = yi;\n"
            ));
        }
        s.push_str("      }\n      __syncthreads();\n    }\n");
        s.push_str("    if (t == 0) {\n      const i64 o = strided_offset(j, p.nd_out, p.out_sizes, p.out_strides);\n");
        let value = match self.op {
            ReduceOp::Mean => format!("sv[0] / ({acc})p.n_red"),
            ReduceOp::Max | ReduceOp::Min if !self.input.is_float() => "sv[0]".to_string(),
            _ => "sv[0]".to_string(),
        };
        s.push_str(&format!(
            "      if (p.out) (({}*)p.out)[p.out_offset + o] = {};\n",
            self.out.storage(),
            self.out.store(&value)
        ));
        if self.op.is_arg() {
            s.push_str("      if (p.out_index) ((i64*)p.out_index)[p.index_offset + o] = si[0];\n");
        }
        s.push_str("    }\n    __syncthreads();\n  }\n}\n");
        Some(KernelSpec { name, params: "ReduceParams", params_c: PARAMS_C, body: s })
    }
}

/// The output type PyTorch gives a reduction of `input` (sum and prod of integers and bool
/// give int64; argmax/argmin write only indices, their values output keeps the input type).
pub fn default_out(op: ReduceOp, input: CType) -> CType {
    match op {
        ReduceOp::Sum | ReduceOp::Prod if !input.is_float() => CType::I64,
        _ => input,
    }
}

/// Every reduction kernel, for the compile test.
pub fn all_kernels() -> Vec<KernelSpec> {
    let ops = [
        ReduceOp::Sum,
        ReduceOp::Mean,
        ReduceOp::Prod,
        ReduceOp::Max,
        ReduceOp::Min,
        ReduceOp::ArgMax,
        ReduceOp::ArgMin,
    ];
    let mut v = Vec::new();
    for op in ops {
        for &t in &CType::ALL {
            if let Some(k) = (Reduce { op, input: t, out: default_out(op, t) }).spec() {
                v.push(k);
            }
        }
    }
    v
}
