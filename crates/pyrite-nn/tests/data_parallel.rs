//! nn.DataParallel on CPU threads: the same output and gradients as the module on the whole
//! batch.

use pyrite::nn::{self, DataParallel, DataParallelOptions, Linear, Module, ModuleBase, Tanh};
use pyrite::{DType, Device, Tensor};

#[derive(nn::Module)]
struct Mlp {
    base: ModuleBase,
    a: Linear,
    act: Tanh,
    b: Linear,
}

impl Module for Mlp {
    fn forward(&self, x: &Tensor) -> pyrite::Result<Tensor> {
        self.b.call(&self.act.call(&self.a.call(x)?)?)
    }
}

fn mlp() -> Mlp {
    pyrite::manual_seed(4);
    let mut m = Mlp {
        base: ModuleBase::new(),
        a: Linear::new(5, 16).unwrap(),
        act: Tanh::new(),
        b: Linear::new(16, 3).unwrap(),
    };
    m.to_dtype(DType::F64).unwrap();
    m
}

fn max_diff(a: &Tensor, b: &Tensor) -> f64 {
    a.sub(b).unwrap().abs().unwrap().max().unwrap().item::<f64>().unwrap()
}

#[test]
fn output_and_gradients_equal_the_plain_module() {
    let x = Tensor::randn([10, 5], DType::F64).unwrap();
    let plain = mlp();
    let want = plain.call(&x).unwrap();
    want.square().unwrap().sum().unwrap().backward().unwrap();
    // three replicas: chunks of 4, 3 and 3 rows
    // the same weights (tests run in parallel, sharing the global generator)
    let copy = mlp();
    copy.load_state_dict(&plain.state_dict().unwrap(), true).unwrap();
    let dp = DataParallel::new(
        copy,
        DataParallelOptions { device_ids: Some(vec![Device::Cpu; 3]), ..Default::default() },
    )
    .unwrap();
    let got = dp.call(&x).unwrap();
    assert!(got.grad_fn().is_some());
    got.square().unwrap().sum().unwrap().backward().unwrap();
    assert!(max_diff(&want, &got) < 1e-12);
    for ((name, p), (_, q)) in plain.named_parameters().iter().zip(dp.module.named_parameters()) {
        let d = max_diff(&p.grad().unwrap(), &q.grad().unwrap());
        assert!(d < 1e-12, "{name}: {d}");
    }
    // state_dict keys carry `module.`, as in PyTorch
    assert!(dp.state_dict().unwrap().keys().all(|k| k.starts_with("module.")));
    // without grad the threads run without grad too
    let _ng = pyrite::autograd::no_grad();
    assert!(dp.call(&x).unwrap().grad_fn().is_none());
}

#[test]
fn fewer_rows_than_replicas_and_bad_devices() {
    let dp = DataParallel::new(
        mlp(),
        DataParallelOptions { device_ids: Some(vec![Device::Cpu; 4]), ..Default::default() },
    )
    .unwrap();
    let x = Tensor::randn([2, 5], DType::F64).unwrap();
    assert_eq!(dp.call(&x).unwrap().dims(), &[2, 3]);
    // no device list: the module runs as it is (PyTorch's behaviour without GPUs)
    let plain = DataParallel::new(mlp(), DataParallelOptions::default()).unwrap();
    assert_eq!(plain.call(&x).unwrap().dims(), &[2, 3]);
    let e = DataParallel::new(
        mlp(),
        DataParallelOptions { device_ids: Some(vec![Device::Cuda(0)]), ..Default::default() },
    )
    .err()
    .unwrap();
    assert!(e.to_string().contains("not available"), "{e}");
}
