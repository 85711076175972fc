//! The workloads, named and sized as in `torch_bench.py`.

use crate::timing::{min, round, spread, timeit};
use crate::Args;
use pyrite::{DType, Tensor};
use serde_json::{json, Map, Value};

type Workload = fn(&Args) -> Map<String, Value>;

/// Every workload Pyrite implements so far, in the reference's order.
pub fn all() -> Vec<(&'static str, Workload)> {
    vec![("matmul", matmul), ("elementwise", elementwise), ("overhead", overhead)]
}

fn randn(shape: &[usize]) -> Tensor {
    Tensor::randn(shape, DType::F32).expect("input")
}

fn matmul(args: &Args) -> Map<String, Value> {
    pyrite::manual_seed(0);
    let mut res = Map::new();
    for n in [256usize, 512, 1024, 2048] {
        let a = randn(&[n, n]);
        let b = randn(&[n, n]);
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
    res
}
