//! `GradScaler` against PyTorch's own (reference/gen_grad_scaler.py, torch 2.15, writes
//! reference/data/grad_scaler.json): a Linear regressor trained with SGD and momentum under the
//! scaler, the true gradients clipped after `unscale_`, and overflows injected by multiplying
//! the loss by inf or NaN on some steps (or by a loss so large that the scaled gradients
//! overflow). The scale used at each step, which steps were skipped, the scale and growth
//! tracker after each `update`, and the state_dict match PyTorch exactly; the gradient norms and
//! the final weights to float32 rounding. PyTorch's misuse errors are PyTorch's, word for word.

use pyrite::amp::{GradScaler, GradScalerOptions, GradScalerStateDict};
use pyrite::nn::utils::{clip_grad_norm_, ClipGradNormOptions};
use pyrite::nn::{Linear, Module};
use pyrite::optim::{Optimizer, SGDOptions, SGD};
use pyrite::{DType, Result, Tensor};
use serde_json::Value;

fn reference() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../reference/data/grad_scaler.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The script's data: X (8, 4), Y (8, 2), and the initial weights.
fn data() -> Result<(Tensor, Tensor)> {
    let x: Vec<f32> =
        (0..8).flat_map(|i| (0..4).map(move |j| ((i * 5 + j * 3) % 7) as f32 / 3.0 - 1.0)).collect();
    let y: Vec<f32> =
        (0..8).flat_map(|i| (0..2).map(move |j| ((i * 3 + j) % 5) as f32 / 2.0 - 1.0)).collect();
    Ok((Tensor::from_vec(x, [8, 4])?, Tensor::from_vec(y, [8, 2])?))
}

fn options(o: &Value) -> GradScalerOptions {
    let mut opts = GradScalerOptions::default();
    if let Some(v) = o["init_scale"].as_f64() {
        opts.init_scale = v;
    }
    if let Some(v) = o["growth_factor"].as_f64() {
        opts.growth_factor = v;
    }
    if let Some(v) = o["backoff_factor"].as_f64() {
        opts.backoff_factor = v;
    }
    if let Some(v) = o["growth_interval"].as_u64() {
        opts.growth_interval = v;
    }
    opts
}

fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol * (1.0 + b.abs())
}

#[test]
fn trajectories_with_injected_overflows_match_pytorch() -> Result<()> {
    let (x, y) = data()?;
    for run in reference()["runs"].as_array().unwrap() {
        let name = run["name"].as_str().unwrap();
        let lin = Linear::new(4, 2)?;
        {
            let _g = pyrite::autograd::no_grad();
            lin.weight.copy_(&Tensor::new([[0.1f32, -0.2, 0.3, 0.05], [-0.1, 0.25, 0.0, 0.2]])?)?;
            lin.bias.as_ref().unwrap().copy_(&Tensor::new([0.01f32, -0.02])?)?;
        }
        let mut opt =
            SGD::new(lin.parameters(), SGDOptions { lr: 0.05, momentum: 0.9, ..Default::default() })?;
        let mut scaler = GradScaler::new(options(&run["options"]))?;
        let factor = run["loss_factor"].as_f64().unwrap();
        for t in run["trace"].as_array().unwrap() {
            let step = t["step"].as_u64().unwrap();
            opt.zero_grad()?;
            let mut loss = lin.call(&x)?.sub(&y)?.square()?.mean()?.mul_scalar(factor)?;
            if let Some(p) = run["poison"][step.to_string()].as_str() {
                loss = loss.mul_scalar(p.parse::<f64>().unwrap())?; // "inf" or "nan"
            }
            let scale_used = scaler.get_scale();
            scaler.scale(&loss)?.backward()?;
            scaler.unscale_(&opt)?;
            let norm = clip_grad_norm_(&lin.parameters(), 1.0, ClipGradNormOptions::default())?
                .item::<f32>()? as f64;
            let stepped = scaler.step(&mut opt)?;
            scaler.update()?;
            let at = format!("{name}, step {step}");
            assert_eq!(scale_used, t["scale_used"].as_f64().unwrap(), "{at}: scale used");
            assert_eq!(stepped, t["stepped"].as_bool().unwrap(), "{at}: stepped");
            assert_eq!(scaler.get_scale(), t["scale_after"].as_f64().unwrap(), "{at}: scale after");
            let sd = scaler.state_dict().unwrap();
            assert_eq!(sd.growth_tracker, t["growth_tracker"].as_u64().unwrap(), "{at}: growth tracker");
            match t["grad_norm"].as_f64() {
                Some(n) => assert!(close(norm, n, 1e-5), "{at}: grad norm {norm} vs {n}"),
                None => assert!(!norm.is_finite(), "{at}: grad norm {norm} should not be finite"),
            }
        }
        let w = lin.weight.to_vec2::<f32>()?;
        for (r, row) in run["weight"].as_array().unwrap().iter().enumerate() {
            for (c, v) in row.as_array().unwrap().iter().enumerate() {
                assert!(close(w[r][c] as f64, v.as_f64().unwrap(), 1e-5), "{name}: weight[{r}][{c}]");
            }
        }
        let sd = &run["state_dict"];
        assert_eq!(
            scaler.state_dict().unwrap(),
            GradScalerStateDict {
                scale: sd["scale"].as_f64().unwrap(),
                growth_factor: sd["growth_factor"].as_f64().unwrap(),
                backoff_factor: sd["backoff_factor"].as_f64().unwrap(),
                growth_interval: sd["growth_interval"].as_u64().unwrap(),
                growth_tracker: sd["_growth_tracker"].as_u64().unwrap(),
            },
            "{name}: state_dict"
        );
    }
    Ok(())
}

#[test]
fn misuse_is_pytorchs_error() -> Result<()> {
    let errors = &reference()["errors"];
    let msg = |k: &str| errors[k].as_str().unwrap().to_string();
    let w = Tensor::ones([1], DType::F32)?.requires_grad_(true)?;
    let mut opt = SGD::new(vec![w.clone()], SGDOptions { lr: 0.1, ..Default::default() })?;
    let mut s = GradScaler::new(GradScalerOptions::default())?;
    s.scale(&w.sum()?)?.backward()?;
    s.unscale_(&opt)?;
    assert_eq!(w.grad().unwrap().to_vec::<f32>()?, [1.0], "unscaled back");
    assert_eq!(s.unscale_(&opt).unwrap_err().to_string(), msg("unscale_twice"));
    assert!(s.step(&mut opt)?);
    assert_eq!(s.unscale_(&opt).unwrap_err().to_string(), msg("unscale_after_step"));
    assert_eq!(s.step(&mut opt).unwrap_err().to_string(), msg("step_twice"));
    s.update()?;
    assert_eq!(s.update().unwrap_err().to_string(), msg("update_without_step"));
    assert_eq!(
        GradScaler::new(GradScalerOptions::default())?.load_state_dict(None).unwrap_err().to_string(),
        msg("load_empty")
    );
    // Disabled: a pass-through, an empty state, a scale of 1.
    let mut off = GradScaler::new(GradScalerOptions { enabled: false, ..Default::default() })?;
    assert_eq!(errors["disabled_state_dict"], serde_json::json!({}));
    assert_eq!(off.state_dict(), None);
    assert_eq!(off.get_scale(), errors["disabled_get_scale"].as_f64().unwrap());
    let loss = w.sum()?;
    assert!(off.scale(&loss)?.is_same(&loss));
    // Bad options.
    let bad = |o: GradScalerOptions| GradScaler::new(o).unwrap_err().to_string();
    assert_eq!(
        bad(GradScalerOptions { growth_factor: 1.0, ..Default::default() }),
        "The growth factor must be > 1.0."
    );
    assert_eq!(
        bad(GradScalerOptions { backoff_factor: 1.0, ..Default::default() }),
        "The backoff factor must be < 1.0."
    );
    // FP16 gradients are not unscaled (PyTorch's ValueError).
    let h = Tensor::ones([1], DType::F16)?.requires_grad_(true)?;
    h.set_grad(Some(Tensor::ones([1], DType::F16)?))?;
    let opt16 = SGD::new(vec![h], SGDOptions::default())?;
    assert_eq!(s.unscale_(&opt16).unwrap_err().to_string(), "Attempting to unscale FP16 gradients.");
    Ok(())
}

#[test]
fn state_dict_round_trip_resumes_the_schedule() -> Result<()> {
    let w = Tensor::ones([2], DType::F32)?.requires_grad_(true)?;
    let mut opt = SGD::new(vec![w.clone()], SGDOptions { lr: 0.1, ..Default::default() })?;
    let mut a =
        GradScaler::new(GradScalerOptions { init_scale: 4.0, growth_interval: 3, ..Default::default() })?;
    for _ in 0..2 {
        opt.zero_grad()?;
        a.scale(&w.sum()?)?.backward()?;
        a.step(&mut opt)?;
        a.update()?;
    }
    let sd = a.state_dict().unwrap();
    assert_eq!((sd.scale, sd.growth_tracker), (4.0, 2));
    let mut b = GradScaler::new(GradScalerOptions::default())?;
    b.load_state_dict(Some(&sd))?;
    assert_eq!(b.state_dict().unwrap(), sd);
    // One more clean step grows the loaded scaler's scale, as it would have the original's.
    opt.zero_grad()?;
    b.scale(&w.sum()?)?.backward()?;
    b.step(&mut opt)?;
    b.update()?;
    assert_eq!(b.get_scale(), 8.0);
    // update_to sets the scale.
    opt.zero_grad()?;
    b.scale(&w.sum()?)?.backward()?;
    b.step(&mut opt)?;
    b.update_to(2.0)?;
    assert_eq!(b.get_scale(), 2.0);
    Ok(())
}

/// The state in `.pt` checkpoints, PyTorch's layout: a checkpoint that PyTorch wrote loads into
/// the scaler, and the one Pyrite writes reads back the same (and, checked by hand, in
/// `torch.load`).
#[test]
fn state_dict_in_pt_checkpoints() -> Result<()> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../reference/data");
    let ckpt = pyrite::load(format!("{dir}/grad_scaler_state.pt"))?;
    let sd = GradScalerStateDict::from_object(ckpt.as_dict().unwrap().get("scaler").unwrap())?.unwrap();
    let want = &reference()["runs"][0]["state_dict"];
    assert_eq!(sd.scale, want["scale"].as_f64().unwrap());
    assert_eq!(sd.growth_tracker, want["_growth_tracker"].as_u64().unwrap());
    assert_eq!(sd.growth_interval, 3);
    let mut scaler = GradScaler::new(GradScalerOptions::default())?;
    scaler.load_state_dict(Some(&sd))?;
    assert_eq!(scaler.get_scale(), sd.scale);

    let path = std::env::temp_dir().join(format!("pyrite_scaler_{}.pt", std::process::id()));
    pyrite::save(&sd.to_object(), &path)?;
    let back = GradScalerStateDict::from_object(&pyrite::load(&path)?)?;
    std::fs::remove_file(&path)?;
    assert_eq!(back, Some(sd));
    // A disabled scaler's empty dict, and bad dicts.
    let empty = pyrite::serialization::Object::Dict(Default::default());
    assert_eq!(GradScalerStateDict::from_object(&empty)?, None);
    let mut d = pyrite::serialization::Dict::new();
    d.insert("scale", pyrite::serialization::Object::Float(2.0));
    let e = GradScalerStateDict::from_object(&pyrite::serialization::Object::Dict(d)).unwrap_err();
    assert_eq!(e.to_string(), "GradScaler state_dict: the key 'growth_factor' is missing");
    Ok(())
}
