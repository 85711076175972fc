//! Autocast's dtypes against PyTorch 2.15's (reference/gen_autocast_dtypes.py measured them
//! in PyTorch on the CPU; reference/data/autocast_dtypes.json): for every op Pyrite has, under
//! bfloat16 and float16 autocast, the output dtype with float32 inputs, with inputs already in
//! the lower precision, and with mixed inputs. Then what autocast promises beyond dtypes: the
//! values are those of the op on cast inputs, backward gives float32 weights float32
//! gradients, regions nest, and weight casts are cached within a region.

use pyrite::amp::{autocast, get_autocast_dtype, is_autocast_enabled, AutocastOptions};
use pyrite::nn::functional as F;
use pyrite::ops::conv::{conv, conv_transpose};
use pyrite::{manual_seed, DType, Device, Result, Tensor};
use serde_json::Value;

fn reference() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../reference/data/autocast_dtypes.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn dtype_name(d: DType) -> &'static str {
    match d {
        DType::BF16 => "bfloat16",
        DType::F16 => "float16",
        DType::F32 => "float32",
        DType::F64 => "float64",
        _ => "other",
    }
}

/// Op `name` on inputs made in `dt` (`None`: Pyrite does not have the op).
fn run(name: &str, dt: DType) -> Option<Result<Tensor>> {
    let f = |s: &[usize]| Tensor::randn(s.to_vec(), DType::F32).and_then(|t| t.to_dtype(dt));
    let pos = |s: &[usize]| {
        Tensor::rand(s.to_vec(), DType::F32).and_then(|t| t.mul_scalar(0.8)?.add_scalar(0.1)?.to_dtype(dt))
    };
    let tgt = || Tensor::new([1i64, 0, 3, 2]);
    let sign = || Tensor::new([1f32, -1., 1., -1.]);
    let r = (|| -> Result<Tensor> {
        Ok(match name {
            "matmul" => f(&[4, 5])?.matmul(&f(&[5, 3])?)?,
            "mm" => f(&[4, 5])?.mm(&f(&[5, 3])?)?,
            "bmm" => f(&[2, 4, 5])?.bmm(&f(&[2, 5, 3])?)?,
            "addmm" => f(&[4, 3])?.addmm(&f(&[4, 5])?, &f(&[5, 3])?, 1, 1)?,
            "baddbmm" => f(&[2, 4, 3])?.baddbmm(&f(&[2, 4, 5])?, &f(&[2, 5, 3])?, 1, 1)?,
            "linear" => F::linear(&f(&[4, 5])?, &f(&[3, 5])?, Some(&f(&[3])?))?,
            "conv1d" => conv(&f(&[1, 2, 8])?, &f(&[3, 2, 3])?, None, &[1], &[0], &[1], 1)?,
            "conv2d" => conv(&f(&[1, 2, 6, 6])?, &f(&[3, 2, 3, 3])?, None, &[1, 1], &[0, 0], &[1, 1], 1)?,
            "conv3d" => {
                conv(&f(&[1, 2, 4, 4, 4])?, &f(&[3, 2, 3, 3, 3])?, None, &[1; 3], &[0; 3], &[1; 3], 1)?
            }
            "conv_transpose1d" => {
                conv_transpose(&f(&[1, 2, 8])?, &f(&[2, 3, 3])?, None, &[1], &[0], &[0], &[1], 1)?
            }
            "conv_transpose2d" => conv_transpose(
                &f(&[1, 2, 5, 5])?,
                &f(&[2, 3, 3, 3])?,
                None,
                &[1, 1],
                &[0, 0],
                &[0, 0],
                &[1, 1],
                1,
            )?,
            "prelu" => F::prelu(&f(&[4, 3])?, &f(&[1])?)?,
            "scaled_dot_product_attention" => {
                let q = || f(&[1, 2, 4, 8]);
                F::scaled_dot_product_attention(&q()?, &q()?, &q()?, &Default::default())?
            }
            "binary_cross_entropy" => F::binary_cross_entropy(&pos(&[4])?, &pos(&[4])?, &Default::default())?,
            "mse_loss" => F::mse_loss(&f(&[4])?, &f(&[4])?, Default::default())?,
            "l1_loss" => F::l1_loss(&f(&[4])?, &f(&[4])?, Default::default())?,
            "smooth_l1_loss" => F::smooth_l1_loss(&f(&[4])?, &f(&[4])?, &Default::default())?,
            "huber_loss" => F::huber_loss(&f(&[4])?, &f(&[4])?, &Default::default())?,
            "nll_loss" => F::nll_loss(&f(&[4, 5])?, &tgt()?, &Default::default())?,
            "cross_entropy" => F::cross_entropy(&f(&[4, 5])?, &tgt()?, &Default::default())?,
            "kl_div" => F::kl_div(&f(&[4, 5])?, &pos(&[4, 5])?, &Default::default())?,
            "binary_cross_entropy_with_logits" => {
                F::binary_cross_entropy_with_logits(&f(&[4])?, &pos(&[4])?, &Default::default())?
            }
            "cumsum" => f(&[5])?.cumsum(0)?,
            "softmax" => f(&[4, 5])?.softmax(1)?,
            "log_softmax" => f(&[4, 5])?.log_softmax(1)?,
            "layer_norm" => F::layer_norm(&f(&[4, 5])?, &[5], &Default::default())?,
            "sum" => f(&[5])?.sum()?,
            "mean" => f(&[5])?.mean()?,
            "exp" => f(&[5])?.exp()?,
            "relu" => f(&[5])?.relu()?,
            "gelu" => f(&[5])?.gelu(false)?,
            "add" => f(&[5])?.add(&f(&[5])?)?,
            "embedding" => F::embedding(&tgt()?, &f(&[5, 3])?, &Default::default())?,
            "max_pool2d" => F::max_pool2d(&f(&[1, 1, 4, 4])?, &[2], &Default::default())?,
            "avg_pool2d" => F::avg_pool2d(&f(&[1, 1, 4, 4])?, &[2], &Default::default())?,
            "max_pool1d" => F::max_pool(&f(&[1, 1, 4])?, &[2], &Default::default())?.0,
            "max_pool3d" => F::max_pool(&f(&[1, 1, 4, 4, 4])?, &[2], &Default::default())?.0,
            "avg_pool3d" => F::avg_pool(&f(&[1, 1, 4, 4, 4])?, &[2], &Default::default())?,
            "adaptive_avg_pool3d" => pyrite::ops::pool::adaptive_avg_pool(&f(&[1, 1, 4, 4, 4])?, &[2])?,
            "prod" => f(&[4])?.prod()?,
            "cumprod" => f(&[5])?.cumprod(0)?,
            "logsumexp" => f(&[4, 5])?.logsumexp(&[1], false)?,
            "reflection_pad1d" => {
                F::pad(&f(&[1, 2, 5])?, &[1, 1], &F::PadOptions { mode: F::PadMode::Reflect, value: None })?
            }
            "replication_pad2d" => F::pad(
                &f(&[1, 2, 5, 5])?,
                &[1, 1, 1, 1],
                &F::PadOptions { mode: F::PadMode::Replicate, value: None },
            )?,
            "pad_constant" => F::pad(&f(&[1, 2, 5])?, &[1, 1], &Default::default())?,
            "margin_ranking_loss" => {
                F::margin_ranking_loss(&f(&[4])?, &f(&[4])?, &sign()?.to_dtype(dt)?, &Default::default())?
            }
            "soft_margin_loss" => F::soft_margin_loss(&f(&[4])?, &sign()?.to_dtype(dt)?, Default::default())?,
            "triplet_margin_loss" => {
                F::triplet_margin_loss(&f(&[4, 5])?, &f(&[4, 5])?, &f(&[4, 5])?, &Default::default())?
            }
            "hinge_embedding_loss" => {
                F::hinge_embedding_loss(&f(&[4])?, &sign()?.to_dtype(dt)?, &Default::default())?
            }
            "poisson_nll_loss" => F::poisson_nll_loss(&f(&[4])?, &pos(&[4])?, &Default::default())?,
            "gaussian_nll_loss" => {
                F::gaussian_nll_loss(&f(&[4])?, &f(&[4])?, &pos(&[4])?, &Default::default())?
            }
            "cosine_embedding_loss" => F::cosine_embedding_loss(
                &f(&[4, 5])?,
                &f(&[4, 5])?,
                &sign()?.to_dtype(dt)?,
                &Default::default(),
            )?,
            "multi_margin_loss" => F::multi_margin_loss(&f(&[4, 5])?, &tgt()?, &Default::default())?,
            "multilabel_margin_loss" => {
                let y = Tensor::new([[1i64, 0, -1, 0, 0]])?.expand([4, 5])?.contiguous()?;
                F::multilabel_margin_loss(&f(&[4, 5])?, &y, Default::default())?
            }
            "grid_sample" => {
                let grid = f(&[1, 3, 3, 2])?.clamp(Some((-1.0).into()), Some(1.0.into()))?;
                F::grid_sample(&f(&[1, 1, 4, 4])?, &grid, &Default::default())?
            }
            "cosine_similarity" => F::cosine_similarity(&f(&[4, 5])?, &f(&[4, 5])?, &Default::default())?,
            _ => return Err(pyrite::Error::new(pyrite::ErrorKind::NotImplemented, "absent")),
        })
    })();
    match r {
        Err(e) if e.kind() == pyrite::ErrorKind::NotImplemented && e.to_string() == "absent" => None,
        r => Some(r),
    }
}

/// Mixed-input cases: one input in `lo`, one in float32.
fn run_mixed(name: &str, lo: DType) -> Option<Result<Tensor>> {
    let f = |s: &[usize]| Tensor::randn(s.to_vec(), DType::F32);
    let l = |s: &[usize]| f(s)?.to_dtype(lo);
    Some((|| -> Result<Tensor> {
        Ok(match name {
            "cat" => Tensor::cat(&[l(&[2, 3])?, f(&[2, 3])?], 0)?,
            "stack" => Tensor::stack(&[l(&[2, 3])?, f(&[2, 3])?], 0)?,
            "add_mixed" => l(&[5])?.add(&f(&[5])?)?,
            "mul_mixed" => l(&[5])?.mul(&f(&[5])?)?,
            "matmul_mixed" => l(&[4, 5])?.matmul(&f(&[5, 3])?)?,
            "mse_loss_mixed" => F::mse_loss(&l(&[4])?, &f(&[4])?, Default::default())?,
            "exp_lower" => l(&[5])?.exp()?,
            "softmax_lower" => l(&[4, 5])?.softmax(1)?,
            "layer_norm_lower" => F::layer_norm(&l(&[4, 5])?, &[5], &Default::default())?,
            "sum_lower" => l(&[5])?.sum()?,
            _ => return Err(pyrite::Error::new(pyrite::ErrorKind::NotImplemented, "absent")),
        })
    })())
    .filter(|r| !matches!(r, Err(e) if e.to_string() == "absent"))
}

#[test]
fn output_dtypes_match_pytorch() -> Result<()> {
    manual_seed(0);
    let r = reference();
    let mut checked = 0;
    for (lname, lo) in [("bfloat16", DType::BF16), ("float16", DType::F16)] {
        let _ac = autocast(AutocastOptions { dtype: Some(lo), ..Default::default() })?;
        for (key, input) in [("ops", DType::F32), ("ops_lower_inputs", lo)] {
            for (name, want) in r[key].as_object().unwrap() {
                let Some(out) = run(name, input) else { continue };
                let out = out.unwrap_or_else(|e| panic!("{name} ({key}, {lname}): {e}"));
                assert_eq!(
                    dtype_name(out.dtype()),
                    want[lname].as_str().unwrap(),
                    "{name} ({key}) under {lname}"
                );
                checked += 1;
            }
        }
        for (name, want) in r["mixed"].as_object().unwrap() {
            let Some(out) = run_mixed(name, lo) else { continue };
            let out = out.unwrap_or_else(|e| panic!("{name} ({lname}): {e}"));
            assert_eq!(dtype_name(out.dtype()), want[lname].as_str().unwrap(), "{name} under {lname}");
            checked += 1;
        }
    }
    assert_eq!(checked, 244, "cases checked");
    Ok(())
}

#[test]
fn values_backward_nesting_and_the_weight_cache() -> Result<()> {
    manual_seed(1);
    let x = Tensor::randn([8, 16], DType::F32)?;
    let w = Tensor::randn([16, 4], DType::F32)?.requires_grad_(true)?;
    assert!(!is_autocast_enabled(Device::Cpu));
    let (y, cached_same) = {
        let _ac = autocast(AutocastOptions::default())?;
        assert!(is_autocast_enabled(Device::Cpu));
        assert_eq!(get_autocast_dtype(Device::Cpu), DType::BF16);
        let y = x.matmul(&w)?;
        // The weight's bf16 copy is made once per region.
        let a = x.matmul(&w)?;
        {
            let _off = autocast(AutocastOptions { enabled: false, ..Default::default() })?;
            assert!(!is_autocast_enabled(Device::Cpu));
            assert_eq!(x.matmul(&w)?.dtype(), DType::F32, "an inner disabled region");
        }
        assert_eq!(a.dtype(), DType::BF16, "back on after the inner region");
        let same = a.eq(&y)?.all()?.item::<bool>()?;
        (y, same)
    };
    assert!(cached_same);
    assert!(!is_autocast_enabled(Device::Cpu));
    // The values are the product of the bf16-cast inputs.
    let want = x.to_dtype(DType::BF16)?.matmul(&w.detach().to_dtype(DType::BF16)?)?;
    assert!(y.eq(&want)?.all()?.item::<bool>()?);
    // Backward in the forward's dtypes: the float32 weight gets a float32 gradient.
    y.to_dtype(DType::F32)?.sum()?.backward()?;
    assert_eq!(w.grad().unwrap().dtype(), DType::F32);
    // float64 is never cast; other dtypes are not autocast's on the CPU.
    {
        let _ac = autocast(AutocastOptions::default())?;
        let d = Tensor::randn([3, 3], DType::F64)?;
        assert_eq!(d.matmul(&d)?.dtype(), DType::F64);
    }
    let e = autocast(AutocastOptions { dtype: Some(DType::F64), ..Default::default() }).unwrap_err();
    assert!(
        e.to_string().contains("CPU Autocast only supports dtype of torch.bfloat16, torch.float16"),
        "{e}"
    );
    Ok(())
}
