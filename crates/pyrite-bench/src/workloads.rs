//! The workloads, named and sized as in `torch_bench.py`.

use crate::timing::{min, round, spread, timeit};
use crate::Args;
use pyrite::{DType, Tensor};
use serde_json::{json, Map, Value};

type Workload = fn(&Args) -> Map<String, Value>;

/// Every workload Pyrite implements so far, in the reference's order.
pub fn all() -> Vec<(&'static str, Workload)> {
    vec![
        ("matmul", matmul),
        ("elementwise", elementwise),
        ("mlp_digits", crate::models::mlp_digits),
        ("mlp_big", crate::models::mlp_big),
        ("cnn", crate::models::cnn),
        ("transformer", crate::transformer::transformer),
        ("overhead", overhead),
        ("profiler_overhead", profiler_overhead),
        ("autograd", autograd),
        ("dataloader", crate::data::dataloader),
        ("checkpoint", crate::checkpoint::checkpoint),
        ("bert_forward", crate::bert::bert_forward),
        ("bert_ops", crate::bert::bert_ops),
        ("fit_digits", crate::fit::fit_digits),
        ("matmul_bf16", matmul_bf16),
        ("cnn_bf16", crate::models::cnn_bf16),
        ("transformer_bf16", crate::transformer::transformer_bf16),
        ("ddp_mlp_big", crate::ddp::ddp_mlp_big),
        ("ddp_cnn", crate::ddp::ddp_cnn),
        ("ddp_allreduce", crate::ddp::ddp_allreduce),
        ("tpe_suggest", crate::tune::tpe_suggest),
        ("asha_report", crate::tune::asha_report),
    ]
}

fn randn(shape: &[usize]) -> Tensor {
    Tensor::randn(shape, DType::F32).expect("input")
}

fn matmul(args: &Args) -> Map<String, Value> {
    matmul_in(args, DType::F32)
}

/// `matmul`'s sizes and metrics with bf16 operands (reference/bench/amp_bf16.py's side).
fn matmul_bf16(args: &Args) -> Map<String, Value> {
    matmul_in(args, DType::BF16)
}

fn matmul_in(args: &Args, dtype: DType) -> Map<String, Value> {
    pyrite::manual_seed(0);
    let mut res = Map::new();
    for n in [256usize, 512, 1024, 2048] {
        let a = randn(&[n, n]).to_dtype(dtype).unwrap();
        let b = randn(&[n, n]).to_dtype(dtype).unwrap();
        let (t, times) = timeit(args, 3, None, || drop(std::hint::black_box(a.matmul(&b).unwrap())));
        let flop = 2.0 * (n as f64).powi(3);
        res.insert(format!("n{n}_gflops"), json!(round(flop / t / 1e9, 2)));
        res.insert(format!("n{n}_gflops_best"), json!(round(flop / min(&times) / 1e9, 2)));
        res.insert(format!("n{n}_ms"), json!(round(t * 1e3, 4)));
        res.insert(format!("n{n}_spread"), json!(spread(&times)));
    }
    res
}

fn elementwise(args: &Args) -> Map<String, Value> {
    let n = 16 * 1024 * 1024;
    pyrite::manual_seed(0);
    let a = randn(&[n]);
    let b = randn(&[n]);
    let c = Tensor::empty([n], DType::F32).unwrap();
    let fb = 4.0;
    let mut res = Map::new();
    res.insert("numel".into(), json!(n));
    type Op<'a> = (&'a str, Box<dyn Fn() + 'a>, Box<dyn Fn() + 'a>, f64);
    let ops: Vec<Op> = vec![
        ("add", Box::new(|| drop(a.add(&b).unwrap())), Box::new(|| drop(a.add_out(&b, &c).unwrap())), 3.0),
        ("mul", Box::new(|| drop(a.mul(&b).unwrap())), Box::new(|| drop(a.mul_out(&b, &c).unwrap())), 3.0),
        (
            "relu",
            Box::new(|| drop(a.relu().unwrap())),
            Box::new(|| drop(a.clamp_out(Some(0.0.into()), None, &c).unwrap())),
            2.0,
        ),
        ("exp", Box::new(|| drop(a.exp().unwrap())), Box::new(|| drop(a.exp_out(&c).unwrap())), 2.0),
    ];
    for (name, f_alloc, f_out, k) in ops {
        let nbytes = k * n as f64 * fb;
        let (t, times) = timeit(args, 3, None, &*f_alloc);
        res.insert(format!("{name}_gbs"), json!(round(nbytes / t / 1e9, 2)));
        res.insert(format!("{name}_gbs_best"), json!(round(nbytes / min(&times) / 1e9, 2)));
        res.insert(format!("{name}_ms"), json!(round(t * 1e3, 3)));
        let (t2, times2) = timeit(args, 3, None, &*f_out);
        res.insert(format!("{name}_out_gbs"), json!(round(nbytes / t2 / 1e9, 2)));
        res.insert(format!("{name}_out_gbs_best"), json!(round(nbytes / min(&times2) / 1e9, 2)));
        res.insert(format!("{name}_out_ms"), json!(round(t2 * 1e3, 3)));
    }
    drop((a, b, c));
    let x = randn(&[4096, 1024]);
    let (t, times) = timeit(args, 3, None, || drop(std::hint::black_box(x.softmax(-1).unwrap())));
    res.insert("softmax_4096x1024_ms".into(), json!(round(t * 1e3, 3)));
    res.insert("softmax_4096x1024_ms_best".into(), json!(round(min(&times) * 1e3, 3)));
    res.insert("softmax_4096x1024_gbs".into(), json!(round(2.0 * x.numel() as f64 * fb / t / 1e9, 2)));
    res.insert(
        "note".into(),
        json!("gbs counts bytes read+written; plain = allocates result, _out = into preallocated tensor"),
    );
    res
}

fn overhead(args: &Args) -> Map<String, Value> {
    let a = Tensor::ones([1, 1], DType::F32).unwrap();
    let b = Tensor::ones([1, 1], DType::F32).unwrap();
    let mut res = Map::new();
    let (t, times) = timeit(args, 1000, Some(0.2), || drop(std::hint::black_box(a.add(&b).unwrap())));
    res.insert("add_1x1_us".into(), json!(round(t * 1e6, 3)));
    res.insert("add_1x1_us_best".into(), json!(round(min(&times) * 1e6, 3)));
    res.insert("add_1x1_spread".into(), json!(spread(&times)));
    crate::models::linear8(args, &mut res);
    res
}

/// The profiler's cost per op: `a.add(&b)` on 1x1 tensors in loops of 10,000, alternately
/// with no profiler and inside `pyrite::profiler::profile` (CPU activity, PyTorch's defaults;
/// the profile is collected after each loop, outside the timing). `profiled_minus_off_us` is
/// what recording one op costs; `reference/bench/profiler_overhead.py` measures PyTorch the
/// same way.
fn profiler_overhead(args: &Args) -> Map<String, Value> {
    use pyrite::profiler::{profile, ProfileOptions};
    let a = Tensor::ones([1, 1], DType::F32).unwrap();
    let b = Tensor::ones([1, 1], DType::F32).unwrap();
    let n = 10_000;
    let run = || {
        let t0 = std::time::Instant::now();
        for _ in 0..n {
            drop(std::hint::black_box(a.add(&b).unwrap()));
        }
        t0.elapsed().as_secs_f64() / n as f64
    };
    let profiled = |record_shapes: bool| {
        let mut p = profile(ProfileOptions { record_shapes, ..Default::default() }).unwrap();
        let t = run();
        p.stop().unwrap();
        assert_eq!(p.events().len(), n, "one event per add");
        t
    };
    run();
    profiled(false); // warm-up
    let (mut off, mut on, mut shapes) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..args.repeats.max(5) {
        off.push(run());
        on.push(profiled(false));
        shapes.push(profiled(true));
    }
    let us = |v: &[f64]| round(crate::timing::median(v) * 1e6, 4);
    let mut res = Map::new();
    res.insert("ops_per_loop".into(), json!(n));
    res.insert("add_1x1_off_us".into(), json!(us(&off)));
    res.insert("add_1x1_profiled_us".into(), json!(us(&on)));
    res.insert("add_1x1_profiled_shapes_us".into(), json!(us(&shapes)));
    res.insert("profiled_minus_off_us".into(), json!(round(us(&on) - us(&off), 4)));
    res.insert("profiled_shapes_minus_off_us".into(), json!(round(us(&shapes) - us(&off), 4)));
    res.insert("spread".into(), json!(spread(&on)));
    res
}

/// Autograd engine overhead: a chain of 100 tiny ops, and mlp_big forward + backward written
/// with plain tensor ops (cross-entropy as log_softmax + gather + mean), no optimizer.
fn autograd(args: &Args) -> Map<String, Value> {
    pyrite::manual_seed(0);
    let mut res = Map::new();
    let x0 = Tensor::ones([1], DType::F32).unwrap().requires_grad_(true).unwrap();
    let c = Tensor::full([1], 1.0001, DType::F32).unwrap();
    let chain = || {
        let mut y = x0.clone();
        for _ in 0..50 {
            y = y.mul(&c).unwrap();
            y = y.add(&c).unwrap();
        }
        y.backward().unwrap();
        x0.set_grad(None).unwrap();
    };
    let (t, times) = timeit(args, 20, Some(0.2), chain);
    res.insert("chain_op_us".into(), json!(round(t / 100.0 * 1e6, 3)));
    res.insert("chain_op_us_best".into(), json!(round(min(&times) / 100.0 * 1e6, 3)));

    let bs = 128;
    let dims = [784usize, 1024, 1024, 10];
    let mut ws = Vec::new();
    let mut bias = Vec::new();
    for i in 0..3 {
        let w = randn(&[dims[i + 1], dims[i]]).mul_scalar((dims[i] as f64).powf(-0.5)).unwrap();
        ws.push(w.requires_grad_(true).unwrap());
        bias.push(Tensor::zeros([dims[i + 1]], DType::F32).unwrap().requires_grad_(true).unwrap());
    }
    let x = randn(&[bs, 784]);
    let y = Tensor::randint(0, 10, [bs], DType::I64).unwrap().unsqueeze(1).unwrap();
    let step = || {
        let mut h = x.clone();
        for i in 0..3 {
            h = h.matmul(&ws[i].t().unwrap()).unwrap().add(&bias[i]).unwrap();
            if i < 2 {
                h = h.relu().unwrap();
            }
        }
        let loss = h.log_softmax(1).unwrap().gather(1, &y).unwrap().mean().unwrap().neg().unwrap();
        loss.backward().unwrap();
        for p in ws.iter().chain(&bias) {
            p.set_grad(None).unwrap();
        }
    };
    let (t, times) = timeit(args, 5, None, step);
    res.insert("mlp_big_fwdbwd_steps_per_s".into(), json!(round(1.0 / t, 2)));
    res.insert("mlp_big_fwdbwd_steps_per_s_best".into(), json!(round(1.0 / min(&times), 2)));
    res.insert("mlp_big_fwdbwd_ms".into(), json!(round(t * 1e3, 3)));
    res
}
