//! The model workloads of the reference benchmark, written with `pyrite::nn`: `mlp_digits`,
//! `mlp_big` and `cnn`, each a full training step (forward, backward, `zero_grad`, and
//! `pyrite::optim::Adam`'s step, lr 1e-3, PyTorch's other defaults), as the reference does.

use crate::timing::{median, min, round, spread, timeit};
use crate::Args;
use pyrite::amp::AutocastOptions;
use pyrite::nn::functional as F;
use pyrite::nn::{self, Conv2d, ConvOptions, Linear, Module, ModuleBase, PoolOptions, ReLU, Sequential};
use pyrite::optim::{Adam, AdamOptions, Optimizer};
use pyrite::{autograd, DType, Result, Tensor};
use serde_json::{json, Map, Value};
use std::time::Instant;

pub const OPTIMIZER_NOTE: &str = "pyrite::optim::Adam lr=1e-3";

fn load_digits(dir: &str) -> (Tensor, Tensor, Tensor, Tensor) {
    let csv = std::fs::read_to_string(format!("{dir}/digits.csv")).expect("digits.csv");
    let rows: Vec<Vec<i64>> = csv
        .lines()
        .filter(|l| !l.is_empty())
        .map(|l| l.split(',').map(|v| v.parse().unwrap()).collect())
        .collect();
    let split = std::fs::read_to_string(format!("{dir}/digits_split_seed0.txt")).expect("split");
    let perm: Vec<usize> = split.lines().filter(|l| !l.is_empty()).map(|l| l.parse().unwrap()).collect();
    let n_train = rows.len() * 8 / 10;
    let pick = |idx: &[usize]| {
        let x: Vec<f32> = idx.iter().flat_map(|&i| rows[i][..64].iter().map(|&v| v as f32 / 16.0)).collect();
        let y: Vec<i64> = idx.iter().map(|&i| rows[i][64]).collect();
        (Tensor::from_vec(x, [idx.len(), 64]).unwrap(), Tensor::from_vec(y, [idx.len()]).unwrap())
    };
    let (xtr, ytr) = pick(&perm[..n_train]);
    let (xte, yte) = pick(&perm[n_train..]);
    (xtr, ytr, xte, yte)
}

fn digits_mlp() -> Sequential {
    Sequential::new()
        .append(Linear::new(64, 128).unwrap())
        .append(ReLU::new())
        .append(Linear::new(128, 64).unwrap())
        .append(ReLU::new())
        .append(Linear::new(64, 10).unwrap())
}

fn train_digits(xtr: &Tensor, ytr: &Tensor, epochs: usize) -> (Sequential, f64) {
    pyrite::manual_seed(0);
    let model = digits_mlp();
    let mut opt = Adam::new(model.parameters(), AdamOptions { lr: 1e-3, ..Default::default() }).unwrap();
    let g = pyrite::Generator::new(0);
    let n = xtr.dims()[0];
    let mut t_steps = 0.0;
    let ce = Default::default();
    for _ in 0..epochs {
        let perm = Tensor::randperm_with(n, Some(&g)).unwrap();
        let t0 = Instant::now();
        for i in (0..n).step_by(64) {
            let idx = perm.narrow(0, i as isize, 64.min(n - i)).unwrap();
            let (xb, yb) = (xtr.index_select(0, &idx).unwrap(), ytr.index_select(0, &idx).unwrap());
            opt.zero_grad().unwrap();
            let loss = F::cross_entropy(&model.call(&xb).unwrap(), &yb, &ce).unwrap();
            loss.backward().unwrap();
            opt.step().unwrap();
        }
        t_steps += t0.elapsed().as_secs_f64();
    }
    (model, t_steps)
}

fn accuracy(model: &Sequential, x: &Tensor, y: &Tensor) -> f64 {
    let _g = autograd::no_grad();
    let pred = model.call(x).unwrap().argmax(Some(1), false).unwrap();
    pred.eq(y).unwrap().to_dtype(DType::F64).unwrap().mean().unwrap().item::<f64>().unwrap()
}

pub fn mlp_digits(args: &Args) -> Map<String, Value> {
    let (xtr, ytr, xte, yte) = load_digits(&args.data);
    let epochs = 20;
    train_digits(&xtr, &ytr, 2); // warm-up
    let mut totals = Vec::new();
    let mut model = None;
    for _ in 0..args.repeats {
        let (m, t) = train_digits(&xtr, &ytr, epochs);
        totals.push(t);
        model = Some(m);
    }
    let model = model.unwrap();
    let t = median(&totals);
    let n = xtr.dims()[0];
    let steps = epochs * n.div_ceil(64);
    let mut res = Map::new();
    res.insert("train_samples".into(), json!(n));
    res.insert("test_samples".into(), json!(xte.dims()[0]));
    res.insert("epochs".into(), json!(epochs));
    res.insert("steps".into(), json!(steps));
    res.insert("train_time_s".into(), json!(round(t, 4)));
    res.insert("samples_per_s".into(), json!(round((epochs * n) as f64 / t, 1)));
    res.insert("samples_per_s_best".into(), json!(round((epochs * n) as f64 / min(&totals), 1)));
    res.insert("us_per_step".into(), json!(round(t / steps as f64 * 1e6, 1)));
    res.insert("test_acc".into(), json!(round(accuracy(&model, &xte, &yte), 4)));
    res.insert("train_acc".into(), json!(round(accuracy(&model, &xtr, &ytr), 4)));
    res.insert("spread".into(), json!(spread(&totals)));
    res.insert("optimizer".into(), json!(OPTIMIZER_NOTE));
    res
}

pub fn mlp_big(args: &Args) -> Map<String, Value> {
    pyrite::manual_seed(0);
    let model = big_mlp();
    let mut opt = Adam::new(model.parameters(), AdamOptions { lr: 1e-3, ..Default::default() }).unwrap();
    let bs = 128;
    let x = Tensor::randn([bs, 784], DType::F32).unwrap();
    let y = Tensor::randint(0, 10, [bs], DType::I64).unwrap();
    let ce = Default::default();
    let mut step = || {
        opt.zero_grad().unwrap();
        let loss = F::cross_entropy(&model.call(&x).unwrap(), &y, &ce).unwrap();
        loss.backward().unwrap();
        opt.step().unwrap();
    };
    let (t, times) = timeit(args, 5, None, &mut step);
    let macs = 784 * 1024 + 1024 * 1024 + 1024 * 10;
    let flops = (3 * 2 * bs * macs) as f64;
    let mut res = Map::new();
    res.insert("batch".into(), json!(bs));
    res.insert("params".into(), json!(model.num_parameters(false)));
    res.insert("steps_per_s".into(), json!(round(1.0 / t, 2)));
    res.insert("steps_per_s_best".into(), json!(round(1.0 / min(&times), 2)));
    res.insert("samples_per_s".into(), json!(round(bs as f64 / t, 1)));
    res.insert("ms_per_step".into(), json!(round(t * 1e3, 3)));
    res.insert("approx_gflops".into(), json!(round(flops / t / 1e9, 2)));
    res.insert("spread".into(), json!(spread(&times)));
    res.insert("optimizer".into(), json!(OPTIMIZER_NOTE));
    res
}

/// `Linear(8, 8)` forward on a `(1, 8)` input, recording autograd (parameters require grad)
/// and under `no_grad`: the per-call cost of the Module system.
pub fn linear8(args: &Args, res: &mut Map<String, Value>) {
    pyrite::manual_seed(0);
    let lin = Linear::new(8, 8).unwrap();
    let x = Tensor::randn([1, 8], DType::F32).unwrap();
    let (t, times) = timeit(args, 1000, Some(0.2), || drop(std::hint::black_box(lin.call(&x).unwrap())));
    res.insert("linear8_fwd_us".into(), json!(round(t * 1e6, 3)));
    res.insert("linear8_fwd_us_best".into(), json!(round(min(&times) * 1e6, 3)));
    let _g = autograd::no_grad();
    let (t, _) = timeit(args, 1000, Some(0.2), || drop(std::hint::black_box(lin.call(&x).unwrap())));
    res.insert("linear8_fwd_nograd_us".into(), json!(round(t * 1e6, 3)));
    res.insert("note".into(), json!("linear8_fwd_us records autograd graph (params require grad)"));
}

/// The reference benchmark's `SmallCNN`: conv(1->32, 3x3, p1)-relu-maxpool2-conv(32->64, 3x3,
/// p1)-relu-maxpool2-flatten-linear(3136->128)-relu-linear(128->10).
#[derive(nn::Module)]
pub(crate) struct SmallCnn {
    base: ModuleBase,
    c1: Conv2d,
    c2: Conv2d,
    f1: Linear,
    f2: Linear,
}

impl Module for SmallCnn {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let pool = PoolOptions::new();
        let x = F::max_pool2d(&self.c1.call(x)?.relu()?, &[2], &pool)?;
        let x = F::max_pool2d(&self.c2.call(&x)?.relu()?, &[2], &pool)?;
        self.f2.call(&self.f1.call(&x.flatten(1, -1)?)?.relu()?)
    }
}

pub fn cnn(args: &Args) -> Map<String, Value> {
    cnn_in(args, None)
}

/// The `cnn` step with its forward pass and loss under bf16 autocast (Lightning's
/// "bf16-mixed"), as reference/bench/amp_bf16.py's `cnn_bf16`.
pub fn cnn_bf16(args: &Args) -> Map<String, Value> {
    cnn_in(args, Some(DType::BF16))
}

/// The reference's `SmallCNN`, initialised from the current seed.
pub(crate) fn small_cnn() -> SmallCnn {
    let p1 = || ConvOptions::new().padding(1);
    SmallCnn {
        base: ModuleBase::new(),
        c1: Conv2d::new(1, 32, 3, p1()).unwrap(),
        c2: Conv2d::new(32, 64, 3, p1()).unwrap(),
        f1: Linear::new(64 * 7 * 7, 128).unwrap(),
        f2: Linear::new(128, 10).unwrap(),
    }
}

/// The reference's `mlp_big` model, initialised from the current seed.
pub(crate) fn big_mlp() -> Sequential {
    Sequential::new()
        .append(Linear::new(784, 1024).unwrap())
        .append(ReLU::new())
        .append(Linear::new(1024, 1024).unwrap())
        .append(ReLU::new())
        .append(Linear::new(1024, 10).unwrap())
}

fn cnn_in(args: &Args, autocast: Option<DType>) -> Map<String, Value> {
    pyrite::manual_seed(0);
    let model = small_cnn();
    let mut opt = Adam::new(model.parameters(), AdamOptions { lr: 1e-3, ..Default::default() }).unwrap();
    let bs = 64;
    let x = Tensor::randn([bs, 1, 28, 28], DType::F32).unwrap();
    let y = Tensor::randint(0, 10, [bs], DType::I64).unwrap();
    let ce = Default::default();
    let mut step = || {
        opt.zero_grad().unwrap();
        let loss = {
            let _amp = autocast.map(|dtype| {
                pyrite::amp::autocast(AutocastOptions { dtype: Some(dtype), ..Default::default() }).unwrap()
            });
            F::cross_entropy(&model.call(&x).unwrap(), &y, &ce).unwrap()
        };
        loss.backward().unwrap();
        opt.step().unwrap();
    };
    let (t, times) = timeit(args, 5, None, &mut step);
    let macs = 28 * 28 * 32 * 9 + 14 * 14 * 64 * 32 * 9 + 3136 * 128 + 128 * 10;
    let mut res = Map::new();
    if autocast.is_some() {
        res.insert("precision".into(), json!("bf16-mixed"));
    }
    res.insert("batch".into(), json!(bs));
    res.insert("optimizer".into(), json!(OPTIMIZER_NOTE));
    res.insert("steps_per_s".into(), json!(round(1.0 / t, 2)));
    res.insert("steps_per_s_best".into(), json!(round(1.0 / min(&times), 2)));
    res.insert("images_per_s".into(), json!(round(bs as f64 / t, 1)));
    res.insert("ms_per_step".into(), json!(round(t * 1e3, 3)));
    res.insert("approx_gflops".into(), json!(round((3 * 2 * bs * macs) as f64 / t / 1e9, 2)));
    res.insert("spread".into(), json!(spread(&times)));
    res
}
