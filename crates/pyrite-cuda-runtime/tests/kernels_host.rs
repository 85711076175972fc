//! The kernels' arithmetic and indexing, checked against pyrite-core's CPU ops (themselves
//! checked against PyTorch) by running the CUDA sources on the host emulator
//! (`src/emulator.h`): strided and broadcast operands, every element type, NaNs.

mod common;

use common::Emulator;
use pyrite_core::{DType, Tensor};
use pyrite_cuda_runtime::kernels::elementwise::{self, binary, cast, unary, where_, BINARY_OPS};
use pyrite_cuda_runtime::kernels::reduce::{default_out, Reduce, ReduceOp};
use pyrite_cuda_runtime::kernels::{
    coalesce, grid_for, CType, Elementwise, EwParams, ReduceParams, Softmax, SoftmaxParams,
};

fn ctype(d: DType) -> CType {
    CType::ALL[DType::ALL.iter().position(|&x| x == d).unwrap()]
}

/// A tensor's elements as the emulated kernel sees them: its whole storage's bytes (with the
/// view's offset and strides), kept alive by the caller.
struct Operand {
    bytes: Vec<u8>,
    strides: Vec<i64>,
    offset: i64,
}

/// `view` must be a view of `base`, which is contiguous from offset 0.
fn operand(base: &Tensor, view: &Tensor, shape: &[usize]) -> Operand {
    let v = view.expand(shape.to_vec()).unwrap();
    Operand {
        bytes: base.to_raw_bytes().unwrap(),
        strides: v.layout().strides().iter().map(|&s| s as i64).collect(),
        offset: v.storage_offset() as i64,
    }
}

fn as_f64(t: &Tensor) -> Vec<f64> {
    t.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap()
}

fn assert_close(got: &[f64], want: &[f64], rtol: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let ok =
            (g.is_nan() && w.is_nan()) || g == w || (g - w).abs() <= rtol * w.abs().max(1e-30) + rtol * 1e-3;
        assert!(ok, "{what}: element {i}: kernel {g}, CPU {w}");
    }
}

/// Runs an elementwise kernel into a new contiguous output of `shape`.
fn run_ew(
    emu: &Emulator,
    k: &Elementwise,
    shape: &[usize],
    ins: &[Operand],
    fs: [f64; 2],
    is: [i64; 2],
) -> Tensor {
    let n: usize = shape.iter().product();
    let mut out = vec![0u8; n * k.out.size()];
    let sizes: Vec<i64> = shape.iter().map(|&s| s as i64).collect();
    let mut contiguous = vec![1i64; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        contiguous[d] = contiguous[d + 1] * shape[d + 1] as i64;
    }
    let mut strides = vec![contiguous];
    strides.extend(ins.iter().map(|o| o.strides.clone()));
    let (csizes, cstrides) = coalesce(&sizes, &strides);
    let mut p = EwParams { n: n as i64, ndim: csizes.len() as i32, contiguous: 0, ..Default::default() };
    p.ptrs[0] = out.as_mut_ptr() as u64;
    for (i, o) in ins.iter().enumerate() {
        p.ptrs[i + 1] = o.bytes.as_ptr() as u64;
        p.offsets[i + 1] = o.offset;
    }
    for (d, &s) in csizes.iter().enumerate() {
        p.sizes[d] = s;
        for (k, st) in cstrides.iter().enumerate() {
            p.strides[k][d] = st[d];
        }
    }
    p.fscalars = fs;
    p.iscalars = is;
    emu.launch(&k.kernel_name(), grid_for(n as u64).min(4), &p);
    Tensor::from_raw_bytes(
        &out,
        shape.to_vec(),
        DType::ALL[CType::ALL.iter().position(|&c| c == k.out).unwrap()],
    )
    .unwrap()
}

/// Test values of `dtype`: a base tensor of `n` elements with NaNs and infinities for floats,
/// small signed values for integers (so that division and powers stay in range).
fn values(dtype: DType, n: usize, seed: u64) -> Tensor {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let v: Vec<f64> = (0..n)
        .map(|i| {
            let r = next();
            match dtype {
                DType::Bool => (r % 2) as f64,
                DType::U8 => (r % 12) as f64,
                DType::I32 | DType::I64 => (r % 13) as f64 - 6.0,
                _ if i % 17 == 5 => f64::NAN,
                _ if i % 23 == 7 => f64::INFINITY,
                _ => ((r >> 11) as f64 / (1u64 << 53) as f64 - 0.5) * 8.0,
            }
        })
        .collect();
    Tensor::from_vec(v, [n]).unwrap().to_dtype(dtype).unwrap()
}

fn core_binary(op: &str, a: &Tensor, b: &Tensor) -> Option<Tensor> {
    match op {
        "add" => a.add(b),
        "sub" => a.sub(b),
        "mul" => a.mul(b),
        "div" => a.div(b),
        "floor_divide" => a.floor_divide(b),
        "remainder" => a.remainder(b),
        "fmod" => a.fmod(b),
        "pow" => a.pow(b),
        "maximum" => a.maximum(b),
        "minimum" => a.minimum(b),
        "atan2" => a.atan2(b),
        "eq" => a.eq(b),
        "ne" => a.ne(b),
        "lt" => a.lt(b),
        "le" => a.le(b),
        "gt" => a.gt(b),
        "ge" => a.ge(b),
        "logical_and" => a.logical_and(b),
        "logical_or" => a.logical_or(b),
        "logical_xor" => a.logical_xor(b),
        _ => return None,
    }
    .ok()
}

#[test]
fn binary_kernels_match_the_cpu_on_strided_and_broadcast_operands() {
    let mut kernels = Vec::new();
    for &d in &DType::ALL {
        for op in BINARY_OPS {
            if let Some(k) = binary(op, ctype(d)) {
                kernels.push(k);
            }
        }
    }
    let Some(emu) = Emulator::build("binary", &kernels.iter().map(|k| k.spec()).collect::<Vec<_>>()) else {
        return;
    };
    let mut checked = 0;
    for k in &kernels {
        let d = DType::ALL[CType::ALL.iter().position(|&c| c == k.compute).unwrap()];
        // a: a transposed [4, 5] view of a [5, 4] tensor offset by one element; b: [5] broadcast
        // along the rows.
        let abase = values(d, 21, 1);
        let a = abase.narrow(0, 1, 20).unwrap().reshape([5, 4]).unwrap().transpose(0, 1).unwrap();
        let bbase = values(d, 5, 2);
        let Some(want) = core_binary(&k.op, &a, &bbase) else { continue };
        if want.dtype() != DType::ALL[CType::ALL.iter().position(|&c| c == k.out).unwrap()] {
            continue; // the CPU promotes (integer true division): pyrite-core casts before launching
        }
        let ins = [operand(&abase, &a, &[4, 5]), operand(&bbase, &bbase, &[4, 5])];
        let got = run_ew(&emu, k, &[4, 5], &ins, [0.0; 2], [0; 2]);
        let rtol = if matches!(d, DType::F16 | DType::BF16) { 1e-2 } else { 1e-6 };
        assert_close(&as_f64(&got), &as_f64(&want), rtol, &k.kernel_name());
        checked += 1;
    }
    assert!(checked >= 100, "only {checked} kernels checked");
}

#[test]
fn unary_float_kernels_match_the_cpu() {
    type Op = fn(&Tensor) -> pyrite_core::Result<Tensor>;
    let ops: &[(&str, Op)] = &[
        ("exp", Tensor::exp),
        ("log", Tensor::log),
        ("sqrt", Tensor::sqrt),
        ("sin", Tensor::sin),
        ("tanh", Tensor::tanh),
        ("sigmoid", Tensor::sigmoid),
        ("relu", Tensor::relu),
        ("neg", Tensor::neg),
        ("abs", Tensor::abs),
        ("erf", Tensor::erf),
        ("floor", Tensor::floor),
        ("round", Tensor::round),
        ("frac", Tensor::frac),
        ("silu", Tensor::silu),
        ("mish", Tensor::mish),
        ("log1p", Tensor::log1p),
        ("expm1", Tensor::expm1),
        ("rsqrt", Tensor::rsqrt),
        ("reciprocal", Tensor::reciprocal),
        ("sign", Tensor::sign),
        ("isnan", Tensor::isnan),
    ];
    let types = [DType::F32, DType::F64, DType::F16, DType::BF16];
    let kernels: Vec<Elementwise> =
        types.iter().flat_map(|&d| ops.iter().map(move |(op, _)| unary(op, ctype(d)).unwrap())).collect();
    let Some(emu) = Emulator::build("unary", &kernels.iter().map(|k| k.spec()).collect::<Vec<_>>()) else {
        return;
    };
    for &d in &types {
        let base = values(d, 40, 3);
        let x = base.reshape([8, 5]).unwrap().transpose(0, 1).unwrap();
        for (op, f) in ops {
            let k = unary(op, ctype(d)).unwrap();
            let want = f(&x).unwrap();
            let got = run_ew(&emu, &k, &[5, 8], &[operand(&base, &x, &[5, 8])], [0.0; 2], [0; 2]);
            let rtol = if matches!(d, DType::F16 | DType::BF16) { 1e-2 } else { 2e-6 };
            assert_close(&as_f64(&got), &as_f64(&want), rtol, &k.kernel_name());
        }
    }
}

#[test]
fn casts_between_every_pair_of_types_round_as_the_cpu_does() {
    let kernels: Vec<Elementwise> =
        CType::ALL.iter().flat_map(|&a| CType::ALL.iter().map(move |&b| cast(a, b))).collect();
    let Some(emu) = Emulator::build("cast", &kernels.iter().map(|k| k.spec()).collect::<Vec<_>>()) else {
        return;
    };
    for &from in &DType::ALL {
        // Values that round differently in f16 and bf16, ties included, and subnormals.
        let src: Vec<f64> = if from.is_floating_point() {
            vec![
                0.0,
                -0.0,
                1.0,
                -2.5,
                3.5,
                65504.0,
                65520.0,
                1e-7,
                6.1e-5,
                1.0009765625,
                1.00048828125,
                0.1,
                -7.75,
                300.0,
                f64::INFINITY,
                f64::NAN,
            ]
        } else {
            vec![0.0, 1.0, 5.0, 2.0, 7.0, 1.0, 0.0, 3.0]
        };
        let base = Tensor::from_vec(src.clone(), [src.len()]).unwrap().to_dtype(from).unwrap();
        for &to in &DType::ALL {
            let k = cast(ctype(from), ctype(to));
            let want = base.to_dtype(to).unwrap();
            let got =
                run_ew(&emu, &k, &[src.len()], &[operand(&base, &base, &[src.len()])], [0.0; 2], [0; 2]);
            let (g, w) = (as_f64(&got), as_f64(&want));
            for i in 0..g.len() {
                // Float to integer of NaN, infinity or out of range is undefined in C and in PyTorch.
                let undefined = !to.is_floating_point()
                    && to != DType::Bool
                    && from.is_floating_point()
                    && !(src[i].is_finite() && src[i] >= 0.0 && src[i] < 256.0);
                if !undefined {
                    assert!(
                        g[i] == w[i] || (g[i].is_nan() && w[i].is_nan()),
                        "{from} -> {to}: {} gave {}, CPU {}",
                        src[i],
                        g[i],
                        w[i]
                    );
                }
            }
        }
    }
}

#[test]
fn scalar_ops_fill_and_where() {
    let kernels = [
        unary("add_scalar", CType::F32).unwrap(),
        unary("clamp", CType::F32).unwrap(),
        unary("fill", CType::I64).unwrap(),
        unary("mul_scalar", CType::I64).unwrap(),
        where_(CType::F32),
    ];
    let Some(emu) = Emulator::build("scalar", &kernels.iter().map(|k| k.spec()).collect::<Vec<_>>()) else {
        return;
    };
    let x = values(DType::F32, 12, 4);
    let op = |o: &Operand| Operand { bytes: o.bytes.clone(), strides: o.strides.clone(), offset: o.offset };
    let xo = operand(&x, &x, &[12]);
    let got = run_ew(&emu, &kernels[0], &[12], &[op(&xo)], [2.5, 0.0], [0; 2]);
    assert_close(&as_f64(&got), &as_f64(&x.add_scalar(2.5).unwrap()), 1e-7, "add_scalar");
    let got = run_ew(&emu, &kernels[1], &[12], &[op(&xo)], [-1.0, 0.5], [0; 2]);
    assert_close(
        &as_f64(&got),
        &as_f64(&x.clamp(Some((-1.0).into()), Some(0.5.into())).unwrap()),
        0.0,
        "clamp",
    );
    let got = run_ew(&emu, &kernels[2], &[3, 2], &[], [0.0; 2], [1 << 40, 0]);
    assert_eq!(got.to_vec::<i64>().unwrap(), vec![1i64 << 40; 6]);
    let i = Tensor::from_vec(vec![3i64, -4, 1 << 33], [3]).unwrap();
    let got = run_ew(&emu, &kernels[3], &[3], &[operand(&i, &i, &[3])], [0.0; 2], [3, 0]);
    assert_eq!(got.to_vec::<i64>().unwrap(), vec![9, -12, 3 << 33]);
    let c = x.gt_scalar(0.0).unwrap();
    let y = values(DType::F32, 12, 5);
    let got = run_ew(
        &emu,
        &kernels[4],
        &[12],
        &[operand(&c, &c, &[12]), op(&xo), operand(&y, &y, &[12])],
        [0.0; 2],
        [0; 2],
    );
    assert_close(&as_f64(&got), &as_f64(&x.where_(&c, &y).unwrap()), 0.0, "where");
}

fn run_reduce(emu: &Emulator, r: &Reduce, x: &Tensor, dims: &[usize]) -> (Tensor, Tensor) {
    let shape = x.dims().to_vec();
    let strides: Vec<i64> = x.layout().strides().iter().map(|&s| s as i64).collect();
    let reduced: Vec<bool> = (0..shape.len()).map(|d| dims.contains(&d)).collect();
    let mut p = ReduceParams::over(&shape, &strides, &reduced).unwrap();
    let kept: Vec<usize> = (0..shape.len()).filter(|d| !dims.contains(d)).collect();
    let n_out = p.n_out as usize;
    let bytes = x.contiguous().unwrap().to_raw_bytes().unwrap();
    assert!(x.is_contiguous());
    p.input = bytes.as_ptr() as u64;
    let mut out = vec![0u8; n_out * r.out.size()];
    let mut idx = vec![0i64; n_out];
    p.out = out.as_mut_ptr() as u64;
    p.out_index = idx.as_mut_ptr() as u64;
    emu.launch(&r.kernel_name(), 3, &p);
    let kept_shape: Vec<usize> = kept.iter().map(|&d| shape[d]).collect();
    let dt = DType::ALL[CType::ALL.iter().position(|&c| c == r.out).unwrap()];
    (
        Tensor::from_raw_bytes(&out, kept_shape.clone(), dt).unwrap(),
        Tensor::from_vec(idx, kept_shape).unwrap(),
    )
}

#[test]
fn reductions_over_any_dims_match_the_cpu() {
    let ops = [
        ReduceOp::Sum,
        ReduceOp::Mean,
        ReduceOp::Prod,
        ReduceOp::Max,
        ReduceOp::Min,
        ReduceOp::ArgMax,
        ReduceOp::ArgMin,
    ];
    let types = [DType::F32, DType::F64, DType::BF16, DType::I64, DType::I32, DType::U8, DType::Bool];
    let mut ks = Vec::new();
    for op in ops {
        for &d in &types {
            let r = Reduce { op, input: ctype(d), out: default_out(op, ctype(d)) };
            if r.spec().is_some() {
                ks.push(r);
            }
        }
    }
    let Some(emu) = Emulator::build("reduce", &ks.iter().map(|r| r.spec().unwrap()).collect::<Vec<_>>())
    else {
        return;
    };
    for r in &ks {
        let d = DType::ALL[CType::ALL.iter().position(|&c| c == r.input).unwrap()];
        // 600 reduced elements: more than a block, so the strided fold and the tree both run.
        let x = values(d, 3 * 600, 7).reshape([3, 20, 30]).unwrap();
        // Products of many values overflow; reduce fewer for prod.
        let x = if r.op == ReduceOp::Prod { values(d, 3 * 4 * 5, 9).reshape([3, 4, 5]).unwrap() } else { x };
        for dims in [vec![1usize, 2], vec![0], vec![2]] {
            if matches!(r.op, ReduceOp::ArgMax | ReduceOp::ArgMin) && (dims.len() != 1 || d == DType::Bool) {
                continue;
            }
            let id: Vec<isize> = dims.iter().map(|&v| v as isize).collect();
            let (got, idx) = run_reduce(&emu, r, &x, &dims);
            let what = format!("{} over {dims:?}", r.kernel_name());
            let rtol = if d == DType::BF16 { 1e-2 } else { 1e-5 };
            match r.op {
                ReduceOp::Sum => {
                    assert_close(&as_f64(&got), &as_f64(&x.sum_dims(&id, false).unwrap()), rtol, &what)
                }
                ReduceOp::Mean => {
                    assert_close(&as_f64(&got), &as_f64(&x.mean_dims(&id, false).unwrap()), rtol, &what)
                }
                ReduceOp::Prod => {
                    assert_close(&as_f64(&got), &as_f64(&x.prod_dims(&id, false).unwrap()), rtol, &what)
                }
                ReduceOp::Max if d != DType::Bool => {
                    assert_close(&as_f64(&got), &as_f64(&x.amax(&id, false).unwrap()), 0.0, &what)
                }
                ReduceOp::Min if d != DType::Bool => {
                    assert_close(&as_f64(&got), &as_f64(&x.amin(&id, false).unwrap()), 0.0, &what)
                }
                ReduceOp::ArgMax => {
                    assert_eq!(
                        idx.to_vec::<i64>().unwrap(),
                        x.argmax(Some(id[0]), false).unwrap().to_vec::<i64>().unwrap(),
                        "{what}"
                    )
                }
                ReduceOp::ArgMin => {
                    assert_eq!(
                        idx.to_vec::<i64>().unwrap(),
                        x.argmin(Some(id[0]), false).unwrap().to_vec::<i64>().unwrap(),
                        "{what}"
                    )
                }
                _ => {}
            }
        }
    }
}

#[test]
fn softmax_and_its_backward_match_the_cpu() {
    let types = [DType::F32, DType::F64, DType::BF16];
    let kinds = [Softmax::Forward, Softmax::LogForward, Softmax::Backward, Softmax::LogBackward];
    let specs: Vec<_> =
        types.iter().flat_map(|&d| kinds.iter().map(move |k| k.spec(ctype(d)).unwrap())).collect();
    let Some(emu) = Emulator::build("softmax", &specs) else { return };
    for &d in &types {
        let x = Tensor::randn([4, 700], DType::F32).unwrap().mul_scalar(3.0).unwrap().to_dtype(d).unwrap();
        let g = Tensor::randn([4, 700], DType::F32).unwrap().to_dtype(d).unwrap();
        let launch = |k: Softmax, input: &Tensor, grad: &Tensor| {
            let (xi, gi) = (input.to_raw_bytes().unwrap(), grad.to_raw_bytes().unwrap());
            let mut out = vec![0u8; xi.len()];
            let p = SoftmaxParams {
                out: out.as_mut_ptr() as u64,
                input: xi.as_ptr() as u64,
                grad: gi.as_ptr() as u64,
                rows: 4,
                cols: 700,
            };
            emu.launch(&k.spec(ctype(d)).unwrap().name, 2, &p);
            as_f64(&Tensor::from_raw_bytes(&out, [4, 700], d).unwrap())
        };
        let rtol = if d == DType::BF16 { 2e-2 } else { 1e-5 };
        let y = x.softmax(1).unwrap();
        assert_close(&launch(Softmax::Forward, &x, &g), &as_f64(&y), rtol, "softmax");
        let ly = x.log_softmax(1).unwrap();
        assert_close(&launch(Softmax::LogForward, &x, &g), &as_f64(&ly), rtol, "log_softmax");
        if d != DType::BF16 {
            // y * (g - sum(g * y)) and g - exp(ly) * sum(g), from the CPU's own ops.
            let want = y.mul(&g.sub(&g.mul(&y).unwrap().sum_dims(&[1], true).unwrap()).unwrap()).unwrap();
            assert_close(&launch(Softmax::Backward, &y, &g), &as_f64(&want), 1e-4, "softmax_backward");
            let want = g.sub(&ly.exp().unwrap().mul(&g.sum_dims(&[1], true).unwrap()).unwrap()).unwrap();
            assert_close(
                &launch(Softmax::LogBackward, &ly, &g),
                &as_f64(&want),
                1e-4,
                "log_softmax_backward",
            );
        }
    }
    let _ = elementwise::is_predicate("eq");
}
