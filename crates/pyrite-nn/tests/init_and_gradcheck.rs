//! `nn.init` as PyTorch defines it (gains, bounds, shapes, orthogonality), and every
//! differentiable functional op checked by finite differences in f64 (first and second order
//! where the op is smooth).

use pyrite::autograd::{gradcheck, gradgradcheck, GradcheckOptions};
use pyrite::nn::functional::{self as F, GeluApproximate, PadMode};
use pyrite::nn::init::{self, FanMode, Nonlinearity};
use pyrite::{DType, Generator, Result, Tensor};

#[test]
fn gains_match_pytorchs_calculate_gain() {
    use Nonlinearity::*;
    // torch.nn.init.calculate_gain, printed by PyTorch 2.15
    assert_eq!(init::calculate_gain(Linear, None), 1.0);
    assert_eq!(init::calculate_gain(Conv2d, None), 1.0);
    assert_eq!(init::calculate_gain(Sigmoid, None), 1.0);
    assert_eq!(init::calculate_gain(Tanh, None), 1.6666666666666667);
    assert_eq!(init::calculate_gain(Relu, None), std::f64::consts::SQRT_2); // 1.4142135623730951
    assert_eq!(init::calculate_gain(LeakyRelu, None), 1.4141428569978354);
    assert_eq!(init::calculate_gain(LeakyRelu, Some(0.2)), 1.3867504905630728);
    assert_eq!(init::calculate_gain(Selu, None), 0.75);
}

fn stats(t: &Tensor) -> (f64, f64, f64, f64) {
    let v = t.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap();
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n;
    let (lo, hi) = v.iter().fold((f64::MAX, f64::MIN), |(a, b), &x| (a.min(x), b.max(x)));
    (mean, var.sqrt(), lo, hi)
}

#[test]
fn initialisers_have_pytorchs_bounds_and_spreads() -> Result<()> {
    let g = Generator::new(0);
    let w = Tensor::empty([256, 128, 3, 3], DType::F32)?; // fan_in 1152, fan_out 2304
    init::kaiming_uniform_(&w, 0.0, FanMode::FanIn, Nonlinearity::Relu, Some(&g))?;
    let bound = 2f64.sqrt() * (3.0 / 1152.0f64).sqrt();
    let (m, s, lo, hi) = stats(&w);
    assert!(lo >= -bound && hi <= bound && hi > 0.99 * bound, "{lo} {hi} {bound}");
    assert!(m.abs() < 2e-3 && (s - bound / 3f64.sqrt()).abs() < 0.01 * bound);
    init::kaiming_normal_(&w, 0.0, FanMode::FanOut, Nonlinearity::Relu, Some(&g))?;
    let (_, s, _, _) = stats(&w);
    assert!((s - (2.0 / 2304.0f64).sqrt()).abs() < 0.01 * s);
    init::xavier_uniform_(&w, 1.0, Some(&g))?;
    let a = (6.0 / (1152.0 + 2304.0f64)).sqrt();
    let (_, _, lo, hi) = stats(&w);
    assert!(lo >= -a && hi <= a && hi > 0.99 * a);
    init::xavier_normal_(&w, 2.0, Some(&g))?;
    let (_, s, _, _) = stats(&w);
    assert!((s - 2.0 * (2.0 / (1152.0 + 2304.0f64)).sqrt()).abs() < 0.01 * s);
    let t = Tensor::empty([10000], DType::F64)?;
    init::trunc_normal_(&t, 1.0, 2.0, -1.0, 2.5, Some(&g))?;
    let (_, _, lo, hi) = stats(&t);
    assert!(lo >= -1.0 && hi <= 2.5 && lo < -0.9 && hi > 2.4);
    init::constant_(&t, 0.3)?;
    assert_eq!(stats(&t).2, 0.3);
    // a fan cannot be computed for a vector
    assert!(init::xavier_uniform_(&t, 1.0, None).unwrap_err().message().contains("fewer than 2 dimensions"));
    Ok(())
}

#[test]
fn structured_initialisers() -> Result<()> {
    let g = Generator::new(1);
    // orthogonal: rows (or columns) orthonormal, times the gain
    for shape in [[6usize, 4], [4, 6]] {
        let w = Tensor::empty(shape, DType::F64)?;
        init::orthogonal_(&w, 2.0, Some(&g))?;
        let (a, b) = if shape[0] >= shape[1] { (w.t()?, w.clone()) } else { (w.clone(), w.t()?) };
        let prod = a.matmul(&b)?;
        let eye = Tensor::eye(prod.dims()[0], prod.dims()[0], DType::F64)?.mul_scalar(4.0)?;
        assert!(prod.allclose(&eye, 1e-10, 1e-10, false)?, "{shape:?}");
    }
    let w = Tensor::empty([3, 5], DType::F32)?;
    init::eye_(&w)?;
    assert_eq!(w.sum()?.item::<f32>()?, 3.0);
    // dirac: a convolution that passes channels through
    let w = Tensor::empty([4, 2, 3, 3], DType::F32)?;
    init::dirac_(&w, 1)?;
    let x = Tensor::randn([1, 2, 5, 5], DType::F32)?;
    let y = F::conv(&x, &w, None, &pyrite::nn::ConvOptions::new().padding(1))?;
    assert!(y.narrow(1, 0, 2)?.allclose(&x, 1e-6, 1e-6, false)?);
    assert_eq!(y.narrow(1, 2, 2)?.abs()?.sum()?.item::<f32>()?, 0.0);
    // with groups, each group passes its own channels
    let w = Tensor::empty([4, 1, 3], DType::F32)?;
    init::dirac_(&w, 2)?;
    let x = Tensor::randn([1, 2, 6], DType::F32)?;
    let y = F::conv(&x, &w, None, &pyrite::nn::ConvOptions::new().padding(1).groups(2))?;
    assert!(y.narrow(1, 0, 1)?.allclose(&x.narrow(1, 0, 1)?, 1e-6, 1e-6, false)?);
    assert!(y.narrow(1, 2, 1)?.allclose(&x.narrow(1, 1, 1)?, 1e-6, 1e-6, false)?);
    // sparse: the asked fraction of each column is zero
    let w = Tensor::empty([10, 7], DType::F32)?;
    init::sparse_(&w, 0.3, 1.0, Some(&g))?;
    let zeros_per_col = w.eq_scalar(0)?.to_dtype(DType::F32)?.sum_dims(&[0], false)?.to_vec::<f32>()?;
    assert!(zeros_per_col.iter().all(|&z| z >= 3.0), "{zeros_per_col:?}");
    Ok(())
}

fn x64(shape: &[usize], seed: u64) -> Tensor {
    let g = Generator::new(seed);
    Tensor::randn_with(shape, DType::F64, Some(&g)).unwrap().requires_grad_(true).unwrap()
}

type Op = (&'static str, Box<dyn Fn(&[Tensor]) -> Result<Tensor>>, Vec<Vec<usize>>, bool);

/// Each functional op at a random point (away from kinks), with first (and, for smooth ops,
/// second) derivatives checked by central differences.
#[test]
fn functional_ops_pass_gradcheck() -> Result<()> {
    let ops: Vec<Op> = vec![
        (
            "linear",
            Box::new(|x| F::linear(&x[0], &x[1], Some(&x[2]))),
            vec![vec![3, 4], vec![2, 4], vec![2]],
            true,
        ),
        (
            "bilinear",
            Box::new(|x| F::bilinear(&x[0], &x[1], &x[2], None)),
            vec![vec![2, 3], vec![2, 2], vec![2, 3, 2]],
            true,
        ),
        ("elu", Box::new(|x| F::elu(&x[0], 1.3)), vec![vec![6]], false),
        ("selu", Box::new(|x| F::selu(&x[0])), vec![vec![6]], false),
        ("celu", Box::new(|x| F::celu(&x[0], 0.7)), vec![vec![6]], false),
        ("gelu", Box::new(|x| F::gelu(&x[0], GeluApproximate::None)), vec![vec![6]], true),
        ("gelu tanh", Box::new(|x| F::gelu(&x[0], GeluApproximate::Tanh)), vec![vec![6]], true),
        ("silu", Box::new(|x| F::silu(&x[0])), vec![vec![6]], true),
        ("mish", Box::new(|x| F::mish(&x[0])), vec![vec![6]], true),
        ("logsigmoid", Box::new(|x| F::logsigmoid(&x[0])), vec![vec![6]], true),
        (
            "softplus",
            Box::new(|x| F::softplus(&x[0], &F::SoftplusOptions { beta: 2.0, ..Default::default() })),
            vec![vec![6]],
            true,
        ),
        ("softsign", Box::new(|x| F::softsign(&x[0])), vec![vec![6]], false),
        ("tanhshrink", Box::new(|x| F::tanhshrink(&x[0])), vec![vec![6]], true),
        ("glu", Box::new(|x| F::glu(&x[0], 1)), vec![vec![2, 4]], true),
        ("softmin", Box::new(|x| F::softmin(&x[0], 1)), vec![vec![2, 4]], true),
        ("prelu", Box::new(|x| F::prelu(&x[0], &x[1])), vec![vec![2, 3, 2], vec![3]], false),
        (
            "layer_norm",
            Box::new(|x| {
                F::layer_norm(
                    &x[0],
                    &[4],
                    &F::LayerNormOptions {
                        weight: Some(x[1].clone()),
                        bias: Some(x[2].clone()),
                        ..Default::default()
                    },
                )
            }),
            vec![vec![3, 4], vec![4], vec![4]],
            true,
        ),
        (
            "rms_norm",
            Box::new(|x| {
                F::rms_norm(&x[0], &[4], &F::RmsNormOptions { weight: Some(x[1].clone()), eps: Some(1e-6) })
            }),
            vec![vec![3, 4], vec![4]],
            true,
        ),
        (
            "group_norm",
            Box::new(|x| {
                F::group_norm(
                    &x[0],
                    2,
                    &F::LayerNormOptions {
                        weight: Some(x[1].clone()),
                        bias: Some(x[2].clone()),
                        ..Default::default()
                    },
                )
            }),
            vec![vec![2, 4, 3], vec![4], vec![4]],
            true,
        ),
        (
            "batch_norm",
            Box::new(|x| {
                F::batch_norm(
                    &x[0],
                    None,
                    None,
                    &F::BatchNormOptions {
                        weight: Some(x[1].clone()),
                        bias: Some(x[2].clone()),
                        training: true,
                        ..Default::default()
                    },
                )
            }),
            vec![vec![4, 3, 2], vec![3], vec![3]],
            true,
        ),
        (
            "instance_norm",
            Box::new(|x| F::instance_norm(&x[0], &Default::default())),
            vec![vec![2, 2, 5]],
            true,
        ),
        (
            "local_response_norm",
            Box::new(|x| {
                F::local_response_norm(
                    &x[0],
                    3,
                    &F::LocalResponseNormOptions { alpha: 1e-2, ..Default::default() },
                )
            }),
            vec![vec![2, 4, 3]],
            true,
        ),
        ("normalize", Box::new(|x| F::normalize(&x[0], &Default::default())), vec![vec![3, 4]], true),
        (
            "cosine_similarity",
            Box::new(|x| F::cosine_similarity(&x[0], &x[1], &Default::default())),
            vec![vec![3, 4], vec![3, 4]],
            true,
        ),
        (
            "pairwise_distance",
            Box::new(|x| F::pairwise_distance(&x[0], &x[1], &Default::default())),
            vec![vec![3, 4], vec![3, 4]],
            true,
        ),
        (
            "pad reflect",
            Box::new(|x| F::pad(&x[0], &[2, 1], &F::PadOptions { mode: PadMode::Reflect, value: None })),
            vec![vec![2, 4]],
            true,
        ),
        (
            "pad circular",
            Box::new(|x| {
                F::pad(&x[0], &[1, 2, 1, 0], &F::PadOptions { mode: PadMode::Circular, value: None })
            }),
            vec![vec![1, 3, 4]],
            true,
        ),
        (
            "pad constant",
            Box::new(|x| F::pad(&x[0], &[1, -1], &F::PadOptions { value: Some(2.0), ..Default::default() })),
            vec![vec![2, 4]],
            true,
        ),
        ("pixel_shuffle", Box::new(|x| F::pixel_shuffle(&x[0], 2)), vec![vec![1, 8, 2, 3]], true),
        ("channel_shuffle", Box::new(|x| F::channel_shuffle(&x[0], 2)), vec![vec![1, 4, 3]], true),
        (
            "embedding",
            Box::new(|x| {
                let idx = Tensor::new([[1i64, 3], [0, 1]])?;
                F::embedding(&idx, &x[0], &F::EmbeddingOptions::default())
            }),
            vec![vec![4, 3]],
            true,
        ),
        (
            "conv",
            Box::new(|x| {
                F::conv(&x[0], &x[1], Some(&x[2]), &pyrite::nn::ConvOptions::new().padding(1).stride(2))
            }),
            vec![vec![1, 2, 5, 5], vec![3, 2, 3, 3], vec![3]],
            true,
        ),
    ];
    let opts = GradcheckOptions { eps: 1e-6, atol: 1e-6, rtol: 1e-4 };
    let mut failures = Vec::new();
    for (i, (name, f, shapes, second)) in ops.iter().enumerate() {
        let inputs: Vec<Tensor> =
            shapes.iter().enumerate().map(|(k, s)| x64(s, (i * 10 + k) as u64)).collect();
        if let Err(e) = gradcheck(|x| f(x), &inputs, opts) {
            failures.push(format!("{name}: {e}"));
        }
        if *second && let Err(e) = gradgradcheck(|x| f(x), &inputs, None, opts) {
            failures.push(format!("{name} (second order): {e}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    Ok(())
}
