//! `torch.autocast("cuda")`: CUDA ops follow PyTorch 2.15's CUDA lists
//! (reference/gen_autocast_cuda_lists.py reads them from the `autocast_mode.h` the wheel ships;
//! reference/data/autocast_cuda_lists.json), separately from the CPU's. Every op Pyrite puts on
//! a CUDA list is on the same list in PyTorch, every listed op is run on the device and gives
//! its policy's dtype, CPU and CUDA regions leave each other's ops alone, and the values and
//! gradients are those of the op on cast inputs. Runs on the emulated device, or on a real GPU
//! with `PYRITE_CUDA_TEST_ON_GPU=1` (`scripts/gpu_check.sh`).

use pyrite::amp::{
    autocast, cast_policy, get_autocast_dtype, is_autocast_enabled, listed_ops, AutocastOptions, CastPolicy,
};
use pyrite::nn::functional as F;
use pyrite::ops::conv::{conv, conv_transpose};
use pyrite::{DType, Device, Result, Tensor};

const CUDA: Device = Device::Cuda(0);

fn device() -> Option<std::sync::MutexGuard<'static, ()>> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    if std::env::var("PYRITE_CUDA_TEST_ON_GPU").as_deref() != Ok("1") {
        assert!(pyrite_cuda_runtime::emulator::enable());
    }
    if pyrite::cuda_is_available() {
        Some(SERIAL.lock().unwrap_or_else(|e| e.into_inner()))
    } else {
        eprintln!("SKIPPED: no CUDA device");
        None
    }
}

fn cuda_region() -> Result<pyrite::amp::AutocastGuard> {
    autocast(AutocastOptions { device_type: CUDA, ..Default::default() })
}

/// PyTorch's CUDA lists, by policy name.
fn pytorch_lists() -> serde_json::Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../reference/data/autocast_cuda_lists.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn names(v: &serde_json::Value, key: &str) -> Vec<String> {
    v[key].as_array().unwrap().iter().map(|s| s.as_str().unwrap().to_string()).collect()
}

/// The JSON lists a Pyrite policy stands for.
fn keys(p: CastPolicy) -> &'static [&'static str] {
    match p {
        CastPolicy::LowerPrecisionFp => &["lower_precision_fp"],
        CastPolicy::Fp32 => &["fp32"],
        CastPolicy::Fp32SetOptDtype => &["fp32_set_opt_dtype", "fp32_append_dtype"],
        CastPolicy::Promote => &["promote"],
    }
}

/// PyTorch's listed ops that Pyrite's CUDA lists leave out, and why. An op leaves this list
/// when it joins Pyrite's (the test below fails while it is on both).
const NOT_ROUTED: &[(&str, &str)] = &[
    // Internal aten names, overload spellings, or ops with no Pyrite counterpart.
    ("_convolution", "aten internal"),
    ("convolution", "aten internal (Pyrite's conv1d/2d/3d route it)"),
    ("conv_tbc", "no Pyrite op"),
    ("addmv", "no Pyrite op"),
    ("addr", "no Pyrite op"),
    ("linalg_vecdot", "no Pyrite op"),
    ("chain_matmul", "no Pyrite op"),
    ("linalg_multi_dot", "no Pyrite op"),
    ("_thnn_fused_lstm_cell", "aten internal"),
    ("_thnn_fused_gru_cell", "aten internal"),
    ("_scaled_dot_product_flash_attention", "aten internal"),
    ("native_layer_norm", "aten internal (layer_norm routes it)"),
    ("frobenius_norm", "no Pyrite op (norm routes the 2-norm)"),
    ("nuclear_norm", "no Pyrite op"),
    ("nll_loss2d", "aten internal (nll_loss routes it)"),
    ("dist", "no Pyrite op"),
    ("pdist", "no Pyrite op"),
    ("renorm", "no Pyrite op"),
    ("cdist", "no Pyrite op"),
    ("addbmm", "no Pyrite op (matmul and baddbmm route the products)"),
    ("_upsample_bilinear2d_aa", "no Pyrite op (interpolate has no antialias)"),
    ("_upsample_bicubic2d_aa", "no Pyrite op (interpolate has no antialias)"),
    ("linalg_vector_norm", "aten internal (norm routes it)"),
    ("linalg_matrix_norm", "no Pyrite op"),
    ("addcdiv", "no Pyrite op"),
    ("addcmul", "no Pyrite op"),
    ("cross", "no Pyrite op"),
    ("vdot", "no Pyrite op"),
    ("tensordot", "no Pyrite op"),
];

#[test]
fn pyrites_cuda_lists_are_pytorchs() {
    let lists = pytorch_lists();
    assert_eq!(lists["torch"].as_str().unwrap().split('+').next(), Some("2.15.0"));
    let mut pytorch_all = Vec::new();
    for p in CastPolicy::ALL {
        let theirs: Vec<String> = keys(p).iter().flat_map(|k| names(&lists, k)).collect();
        pytorch_all.extend(theirs.iter().cloned());
        for op in listed_ops(CUDA, p) {
            assert!(theirs.iter().any(|t| t == op), "{op}: {p:?} in Pyrite, not on PyTorch's {:?}", keys(p));
            assert!(NOT_ROUTED.iter().all(|(n, _)| n != op), "{op} is routed: take it off NOT_ROUTED");
        }
    }
    // Every op of PyTorch's lists is routed, or said not to be.
    for op in &pytorch_all {
        let routed = cast_policy(CUDA, op).is_some();
        assert!(
            routed || NOT_ROUTED.iter().any(|(n, _)| n == op),
            "{op}: on PyTorch's CUDA lists, neither routed nor in NOT_ROUTED"
        );
    }
    for (op, _) in NOT_ROUTED {
        assert!(pytorch_all.iter().any(|t| t == op), "{op}: in NOT_ROUTED but on no PyTorch list");
    }
    assert_eq!(names(&lists, "banned"), ["binary_cross_entropy"]);
}

/// Op `name` of Pyrite's CUDA lists on CUDA inputs: `a` makes the first floating input,
/// `b` the others (given a shape).
fn run(
    name: &str,
    a: &dyn Fn(&[usize]) -> Result<Tensor>,
    b: &dyn Fn(&[usize]) -> Result<Tensor>,
) -> Result<Tensor> {
    let pos = |s: &[usize]| a(s)?.abs()?.add_scalar(0.5);
    let unit = |s: &[usize]| a(s)?.tanh()?.mul_scalar(0.5);
    let tgt = || Tensor::new([1i64, 0, 3, 2])?.to_device(CUDA);
    let sign = || Tensor::new([1f32, -1., 1., -1.])?.to_device(CUDA);
    Ok(match name {
        "conv1d" => conv(&a(&[1, 2, 8])?, &b(&[3, 2, 3])?, None, &[1], &[0], &[1], 1)?,
        "conv2d" => conv(&a(&[1, 2, 5, 5])?, &b(&[3, 2, 3, 3])?, None, &[1, 1], &[0, 0], &[1, 1], 1)?,
        "conv3d" => conv(&a(&[1, 2, 4, 4, 4])?, &b(&[3, 2, 3, 3, 3])?, None, &[1; 3], &[0; 3], &[1; 3], 1)?,
        "conv_transpose1d" => {
            conv_transpose(&a(&[1, 2, 5])?, &b(&[2, 3, 3])?, None, &[1], &[0], &[0], &[1], 1)?
        }
        "conv_transpose2d" => conv_transpose(
            &a(&[1, 2, 4, 4])?,
            &b(&[2, 3, 3, 3])?,
            None,
            &[1; 2],
            &[0; 2],
            &[0; 2],
            &[1; 2],
            1,
        )?,
        "conv_transpose3d" => conv_transpose(
            &a(&[1, 2, 3, 3, 3])?,
            &b(&[2, 3, 2, 2, 2])?,
            None,
            &[1; 3],
            &[0; 3],
            &[0; 3],
            &[1; 3],
            1,
        )?,
        "prelu" => F::prelu(&a(&[4, 3])?, &b(&[1])?)?,
        "addmm" => a(&[4, 3])?.addmm(&b(&[4, 5])?, &b(&[5, 3])?, 1, 1)?,
        "matmul" => a(&[4, 5])?.matmul(&b(&[5, 3])?)?,
        "einsum" => pyrite::ops::einsum::einsum("ij,jk->ik", &[&a(&[4, 5])?, &b(&[5, 3])?])?,
        "mm" => a(&[4, 5])?.mm(&b(&[5, 3])?)?,
        "mv" => a(&[4, 5])?.mv(&b(&[5])?)?,
        "linear" => F::linear(&a(&[4, 5])?, &b(&[3, 5])?, Some(&b(&[3])?))?,
        "baddbmm" => a(&[2, 4, 3])?.baddbmm(&b(&[2, 4, 5])?, &b(&[2, 5, 3])?, 1, 1)?,
        "bmm" => a(&[2, 4, 5])?.bmm(&b(&[2, 5, 3])?)?,
        "scaled_dot_product_attention" => F::scaled_dot_product_attention(
            &a(&[1, 2, 4, 8])?,
            &b(&[1, 2, 4, 8])?,
            &b(&[1, 2, 4, 8])?,
            &Default::default(),
        )?,
        "acos" => unit(&[5])?.acos()?,
        "asin" => unit(&[5])?.asin()?,
        "cosh" => a(&[5])?.cosh()?,
        "erfinv" => unit(&[5])?.erfinv()?,
        "exp" => a(&[5])?.exp()?,
        "expm1" => a(&[5])?.expm1()?,
        "log" => pos(&[5])?.log()?,
        "log10" => pos(&[5])?.log10()?,
        "log2" => pos(&[5])?.log2()?,
        "log1p" => pos(&[5])?.log1p()?,
        "reciprocal" => pos(&[5])?.reciprocal()?,
        "rsqrt" => pos(&[5])?.rsqrt()?,
        "sinh" => a(&[5])?.sinh()?,
        "tan" => unit(&[5])?.tan()?,
        "pow" => pos(&[5])?.pow(&b(&[5])?)?,
        "softplus" => a(&[5])?.softplus(1.0, 20.0)?,
        "layer_norm" => F::layer_norm(
            &a(&[4, 5])?,
            &[5],
            &F::LayerNormOptions { weight: Some(b(&[5])?), bias: Some(b(&[5])?), ..Default::default() },
        )?,
        "rms_norm" => {
            F::rms_norm(&a(&[4, 5])?, &[5], &F::RmsNormOptions { weight: Some(b(&[5])?), eps: None })?
        }
        "group_norm" => F::group_norm(&a(&[2, 4, 3])?, 2, &Default::default())?,
        "cosine_similarity" => F::cosine_similarity(&a(&[4, 5])?, &b(&[4, 5])?, &Default::default())?,
        "poisson_nll_loss" => F::poisson_nll_loss(&a(&[4])?, &b(&[4])?.abs()?, &Default::default())?,
        "cosine_embedding_loss" => {
            F::cosine_embedding_loss(&a(&[4, 5])?, &b(&[4, 5])?, &sign()?, &Default::default())?
        }
        "nll_loss" => F::nll_loss(&a(&[4, 5])?, &tgt()?, &Default::default())?,
        "hinge_embedding_loss" => F::hinge_embedding_loss(&a(&[4])?, &sign()?, &Default::default())?,
        "kl_div" => F::kl_div(&a(&[4, 5])?, &b(&[4, 5])?.abs()?, &Default::default())?,
        "l1_loss" => F::l1_loss(&a(&[4])?, &b(&[4])?, Default::default())?,
        "smooth_l1_loss" => F::smooth_l1_loss(&a(&[4])?, &b(&[4])?, &Default::default())?,
        "huber_loss" => F::huber_loss(&a(&[4])?, &b(&[4])?, &Default::default())?,
        "mse_loss" => F::mse_loss(&a(&[4])?, &b(&[4])?, Default::default())?,
        "margin_ranking_loss" => F::margin_ranking_loss(&a(&[4])?, &b(&[4])?, &sign()?, &Default::default())?,
        "multilabel_margin_loss" => {
            let y = Tensor::new([[1i64, 0, -1, 0, 0]])?.expand([4, 5])?.contiguous()?.to_device(CUDA)?;
            F::multilabel_margin_loss(&a(&[4, 5])?, &y, Default::default())?
        }
        "soft_margin_loss" => F::soft_margin_loss(&a(&[4])?, &sign()?, Default::default())?,
        "triplet_margin_loss" => {
            F::triplet_margin_loss(&a(&[4, 5])?, &b(&[4, 5])?, &b(&[4, 5])?, &Default::default())?
        }
        "multi_margin_loss" => F::multi_margin_loss(&a(&[4, 5])?, &tgt()?, &Default::default())?,
        "binary_cross_entropy_with_logits" => {
            F::binary_cross_entropy_with_logits(&a(&[4])?, &b(&[4])?.sigmoid()?, &Default::default())?
        }
        "logsumexp" => a(&[4, 5])?.logsumexp(&[1], false)?,
        "prod" => a(&[4])?.prod()?,
        "softmax" => a(&[4, 5])?.softmax(1)?,
        "log_softmax" => a(&[4, 5])?.log_softmax(1)?,
        "cumprod" => a(&[5])?.cumprod(0)?,
        "cumsum" => a(&[5])?.cumsum(0)?,
        "sum" => a(&[5])?.sum()?,
        "norm" => a(&[4, 5])?.norm(2.0, &[1], false)?,
        "atan2" => a(&[5])?.atan2(&b(&[5])?)?,
        "dot" => a(&[5])?.dot(&b(&[5])?)?,
        "grid_sampler" => {
            let grid = b(&[1, 3, 3, 2])?.clamp(Some((-1.0).into()), Some(1.0.into()))?;
            F::grid_sample(&a(&[1, 1, 4, 4])?, &grid, &Default::default())?
        }
        "scatter_add" => a(&[5])?.scatter_add(0, &Tensor::new([0i64, 2, 0])?.to_device(CUDA)?, &b(&[3])?)?,
        "upsample_nearest1d" | "_upsample_nearest_exact1d" | "upsample_linear1d" => {
            let mode = match name {
                "upsample_nearest1d" => F::InterpolateMode::Nearest,
                "upsample_linear1d" => F::InterpolateMode::Linear,
                _ => F::InterpolateMode::NearestExact,
            };
            F::interpolate(
                &a(&[1, 2, 5])?,
                &F::InterpolateOptions { size: Some(vec![7]), mode, ..Default::default() },
            )?
        }
        "upsample_nearest2d" | "_upsample_nearest_exact2d" | "upsample_bilinear2d" | "upsample_bicubic2d" => {
            let mode = match name {
                "upsample_nearest2d" => F::InterpolateMode::Nearest,
                "upsample_bilinear2d" => F::InterpolateMode::Bilinear,
                "upsample_bicubic2d" => F::InterpolateMode::Bicubic,
                _ => F::InterpolateMode::NearestExact,
            };
            let o = F::InterpolateOptions { size: Some(vec![5, 6]), mode, ..Default::default() };
            F::interpolate(&a(&[1, 2, 3, 4])?, &o)?
        }
        "upsample_nearest3d" | "_upsample_nearest_exact3d" | "upsample_trilinear3d" => {
            let mode = match name {
                "upsample_nearest3d" => F::InterpolateMode::Nearest,
                "upsample_trilinear3d" => F::InterpolateMode::Trilinear,
                _ => F::InterpolateMode::NearestExact,
            };
            let o = F::InterpolateOptions { size: Some(vec![3, 4, 5]), mode, ..Default::default() };
            F::interpolate(&a(&[1, 1, 2, 3, 3])?, &o)?
        }
        "bilinear" => F::bilinear(&a(&[4, 3])?, &b(&[4, 5])?, &b(&[2, 3, 5])?, Some(&b(&[2])?))?,
        "index_put" => {
            let idx = Tensor::new([0i64, 2])?.to_device(CUDA)?;
            a(&[5])?.index_put(&[Some(idx)], &b(&[2])?, false)?
        }
        "rnn_tanh_cell" => {
            F::rnn_tanh_cell(&a(&[4, 3])?, &b(&[4, 5])?, &b(&[5, 3])?, &b(&[5, 5])?, Some(&b(&[5])?), None)?
        }
        "rnn_relu_cell" => {
            F::rnn_relu_cell(&a(&[4, 3])?, &b(&[4, 5])?, &b(&[5, 3])?, &b(&[5, 5])?, None, Some(&b(&[5])?))?
        }
        "gru_cell" => F::gru_cell(
            &a(&[4, 3])?,
            &b(&[4, 5])?,
            &b(&[15, 3])?,
            &b(&[15, 5])?,
            Some(&b(&[15])?),
            Some(&b(&[15])?),
        )?,
        "lstm_cell" => {
            let (h, c) = F::lstm_cell(
                &a(&[4, 3])?,
                (&b(&[4, 5])?, &b(&[4, 5])?),
                &b(&[20, 3])?,
                &b(&[20, 5])?,
                None,
                None,
            )?;
            assert_eq!(c.dtype(), h.dtype(), "lstm_cell: h and c in one dtype");
            h
        }
        _ => panic!("{name}: on Pyrite's CUDA lists but has no runner here"),
    })
}

fn maker(dt: DType, seed: u64) -> impl Fn(&[usize]) -> Result<Tensor> {
    let g = std::sync::Mutex::new(pyrite::Generator::new(seed));
    move |s: &[usize]| {
        let g = g.lock().unwrap();
        Tensor::randn_with(s.to_vec(), DType::F32, Some(&g))?.to_dtype(dt)?.to_device(CUDA)
    }
}

#[test]
fn every_op_on_the_cuda_lists_runs_in_its_policys_dtype() -> Result<()> {
    let Some(_serial) = device() else { return Ok(()) };
    let (f32s, f16s) = (maker(DType::F32, 1), maker(DType::F16, 2));
    let _ac = cuda_region()?;
    assert_eq!(get_autocast_dtype(CUDA), DType::F16, "CUDA's default lower precision");
    for p in CastPolicy::ALL {
        for &op in listed_ops(CUDA, p) {
            let check = |a: &dyn Fn(&[usize]) -> Result<Tensor>,
                         b: &dyn Fn(&[usize]) -> Result<Tensor>,
                         want,
                         case| {
                let y = run(op, a, b).unwrap_or_else(|e| panic!("{op} ({case}): {e}"));
                assert_eq!(y.device(), CUDA, "{op}");
                assert_eq!(y.dtype(), want, "{op} ({p:?}, {case})");
            };
            match p {
                CastPolicy::LowerPrecisionFp => check(&f32s, &f32s, DType::F16, "float32 inputs"),
                CastPolicy::Fp32 | CastPolicy::Fp32SetOptDtype => {
                    check(&f16s, &f16s, DType::F32, "float16 inputs")
                }
                CastPolicy::Promote => {
                    check(&f16s, &f32s, DType::F32, "float16 with float32");
                    check(&f16s, &f16s, DType::F16, "float16 inputs");
                }
            }
        }
    }
    Ok(())
}

#[test]
fn cpu_and_cuda_regions_leave_each_others_ops_alone() -> Result<()> {
    let Some(_serial) = device() else { return Ok(()) };
    let a = Tensor::ones([2, 2], DType::F32)?;
    let d = a.to_device(CUDA)?;
    {
        let _ac = cuda_region()?;
        assert!(is_autocast_enabled(CUDA) && !is_autocast_enabled(Device::Cpu));
        assert_eq!(d.matmul(&d)?.dtype(), DType::F16);
        assert_eq!(a.matmul(&a)?.dtype(), DType::F32, "a CPU op under CUDA autocast");
        // A CPU region inside: each device with its own state and dtype.
        let _cpu = autocast(AutocastOptions::default())?;
        assert_eq!(a.matmul(&a)?.dtype(), DType::BF16);
        assert_eq!(d.matmul(&d)?.dtype(), DType::F16);
        // exp is on CUDA's float32 list, not on the CPU's.
        let (h, hd) = (a.to_dtype(DType::BF16)?, d.to_dtype(DType::F16)?);
        assert_eq!((h.exp()?.dtype(), hd.exp()?.dtype()), (DType::BF16, DType::F32));
        // An inner region off turns off only its device.
        let _off = autocast(AutocastOptions { device_type: CUDA, enabled: false, ..Default::default() })?;
        assert_eq!((a.matmul(&a)?.dtype(), d.matmul(&d)?.dtype()), (DType::BF16, DType::F32));
    }
    assert!(!is_autocast_enabled(CUDA) && !is_autocast_enabled(Device::Cpu));
    // The dtype chosen for a region holds inside it, and the default returns after.
    {
        let _ac =
            autocast(AutocastOptions { device_type: CUDA, dtype: Some(DType::BF16), ..Default::default() })?;
        assert_eq!(d.matmul(&d)?.dtype(), DType::BF16);
    }
    assert_eq!(get_autocast_dtype(CUDA), DType::F16);
    Ok(())
}

#[test]
fn binary_cross_entropy_is_refused_under_cuda_autocast() -> Result<()> {
    let Some(_serial) = device() else { return Ok(()) };
    let p = Tensor::new([0.2f32, 0.7])?.to_device(CUDA)?;
    let _ac = cuda_region()?;
    let e = F::binary_cross_entropy(&p, &p, &Default::default()).unwrap_err();
    assert!(e.to_string().contains("unsafe to autocast"), "{e}");
    assert!(e.to_string().contains("binary_cross_entropy_with_logits"), "{e}");
    // The logits form is safe, and runs in float32.
    assert_eq!(F::binary_cross_entropy_with_logits(&p, &p, &Default::default())?.dtype(), DType::F32);
    Ok(())
}

#[test]
fn values_and_gradients_are_those_of_the_op_on_cast_inputs() -> Result<()> {
    let Some(_serial) = device() else { return Ok(()) };
    let make = maker(DType::F32, 3);
    let x = make(&[4, 6])?;
    let w = make(&[3, 6])?.requires_grad_(true)?;
    let (y, loss) = {
        let _ac = cuda_region()?;
        let y = F::linear(&x, &w, None)?;
        // softmax's result is float32 (fp32_set_opt_dtype), and so the loss.
        let loss = y.softmax(1)?.sum()?;
        (y, loss)
    };
    let want = x.to_dtype(DType::F16)?.matmul(&w.detach().to_dtype(DType::F16)?.t()?)?;
    assert_eq!(y.dtype(), DType::F16);
    assert_eq!(y.to_device(Device::Cpu)?.to_raw_bytes()?, want.to_device(Device::Cpu)?.to_raw_bytes()?);
    assert_eq!(loss.dtype(), DType::F32);
    y.to_dtype(DType::F32)?.sum()?.backward()?;
    let g = w.grad().expect("the weight's gradient");
    assert_eq!((g.dtype(), g.device()), (DType::F32, CUDA), "a float32 weight gets a float32 gradient");
    Ok(())
}
