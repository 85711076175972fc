//! The vision functions of `nn.functional` (interpolate, unfold, fold, affine_grid,
//! grid_sample) against PyTorch (`reference/gen_nn_functional.py`): outputs and the gradients
//! of every input for the recorded `grad_output`; error cases must be errors. Then f64
//! gradchecks of each function on tiny inputs, argument errors, and the layers' reprs.

mod common;

use common::{assert_close, load_tensors, Kw};
use pyrite::autograd::{gradcheck, gradgradcheck, GradcheckOptions};
use pyrite::nn::functional::{
    self as F, FoldOptions, GridSampleMode, GridSampleOptions, GridSamplePadding, InterpolateMode,
    InterpolateOptions,
};
use pyrite::nn::{Fold, Module, Unfold, Upsample, UpsamplingBilinear2d, UpsamplingNearest2d};
use pyrite::{DType, Result, Tensor};
use serde_json::Value as J;
use std::collections::HashMap;

fn floats(k: &Kw, key: &str) -> Option<Vec<f64>> {
    match k.get(key)? {
        J::Array(a) => Some(a.iter().map(|v| v.as_f64().unwrap()).collect()),
        v => Some(vec![v.as_f64().unwrap()]),
    }
}

fn sizes(k: &Kw, key: &str) -> Option<Vec<usize>> {
    k.get(key).map(|_| k.sizes(key))
}

fn or(k: &Kw, key: &str, d: usize) -> Vec<usize> {
    sizes(k, key).unwrap_or_else(|| vec![d])
}

fn opt_bool(k: &Kw, key: &str) -> Option<bool> {
    k.get(key).map(|v| v.as_bool().unwrap())
}

/// `F.unfold` / `F.fold`'s keywords.
fn fold_options(k: &Kw) -> FoldOptions {
    FoldOptions { dilation: or(k, "dilation", 1), padding: or(k, "padding", 0), stride: or(k, "stride", 1) }
}

/// `F.interpolate`'s keywords `size=size, mode=mode`.
fn to_size(size: &[usize], mode: InterpolateMode) -> InterpolateOptions {
    InterpolateOptions { size: Some(size.to_vec()), mode, ..Default::default() }
}

/// `F.interpolate`'s keywords `scale_factor=scale, mode=mode`.
fn by_scale(scale: &[f64], mode: InterpolateMode) -> InterpolateOptions {
    InterpolateOptions { scale_factor: Some(scale.to_vec()), mode, ..Default::default() }
}

/// `F.grid_sample`'s keywords.
fn gs_opts(mode: GridSampleMode, padding_mode: GridSamplePadding, align_corners: bool) -> GridSampleOptions {
    GridSampleOptions { mode, padding_mode, align_corners }
}

fn string<'a>(k: &'a Kw, key: &str, d: &'a str) -> &'a str {
    k.get(key).and_then(|v| v.as_str()).unwrap_or(d)
}

/// The Pyrite call for PyTorch's function name and keyword arguments.
fn call(f: &str, k: &Kw, xs: &[Tensor]) -> Result<Tensor> {
    match f {
        "interpolate" => F::interpolate(
            &xs[0],
            &InterpolateOptions {
                size: sizes(k, "size"),
                scale_factor: floats(k, "scale_factor"),
                mode: InterpolateMode::parse(string(k, "mode", "nearest"))?,
                align_corners: opt_bool(k, "align_corners"),
                recompute_scale_factor: opt_bool(k, "recompute_scale_factor"),
            },
        ),
        "unfold" => F::unfold(&xs[0], &k.sizes("kernel_size"), &fold_options(k)),
        "fold" => F::fold(&xs[0], &k.sizes("output_size"), &k.sizes("kernel_size"), &fold_options(k)),
        "affine_grid" => F::affine_grid(&xs[0], &k.sizes("size"), k.b_or("align_corners", false)),
        "grid_sample" => F::grid_sample(
            &xs[0],
            &xs[1],
            &GridSampleOptions {
                mode: GridSampleMode::parse(string(k, "mode", "bilinear"))?,
                padding_mode: GridSamplePadding::parse(string(k, "padding_mode", "zeros"))?,
                align_corners: k.b_or("align_corners", false),
            },
        ),
        other => panic!("no mapping for function {other}"),
    }
}

fn view(x: &Tensor, v: &J) -> Tensor {
    match v {
        J::Null => x.clone(),
        J::Array(a) if a[0] == "transpose" => {
            x.transpose(a[1].as_i64().unwrap() as isize, a[2].as_i64().unwrap() as isize).unwrap()
        }
        other => panic!("unknown view {other}"),
    }
}

fn run_case(c: &J, t: &HashMap<String, Tensor>) -> std::result::Result<(), String> {
    let name = c["name"].as_str().unwrap();
    let get = |k: String| t.get(&k).cloned().ok_or_else(|| format!("missing tensor {k}"));
    let kw = Kw(c["kwargs"].as_object().unwrap());
    let (atol, rtol) = (c["atol"].as_f64().unwrap(), c["rtol"].as_f64().unwrap());
    let n_in = c["inputs"].as_u64().unwrap() as usize;
    let needs: Vec<bool> =
        c["input_requires_grad"].as_array().unwrap().iter().map(|v| v.as_bool().unwrap()).collect();
    let inputs: Vec<Tensor> = (0..n_in)
        .map(|i| {
            let x = get(format!("{name}/in/{i}"))?;
            Ok(if needs[i] { x.requires_grad_(true).map_err(|e| e.to_string())? } else { x })
        })
        .collect::<std::result::Result<_, String>>()?;
    let viewed: Vec<Tensor> =
        inputs.iter().zip(c["views"].as_array().unwrap()).map(|(x, v)| view(x, v)).collect();
    let f = c["fn"].as_str().unwrap();
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| call(f, &kw, &viewed)))
        .map_err(|p| format!("panicked: {}", p.downcast_ref::<String>().cloned().unwrap_or_default()))?;
    if let Some(e) = c.get("error").filter(|e| !e.is_null()) {
        return match result {
            Err(_) => Ok(()),
            Ok(_) => Err(format!("PyTorch raised ({e}) but Pyrite returned Ok")),
        };
    }
    let out = result.map_err(|e| format!("error: {e}"))?;
    let check = |got: &Tensor, want: &Tensor, what: &str| -> std::result::Result<(), String> {
        if got.dtype() != want.dtype() {
            return Err(format!("{what}: dtype {:?}, PyTorch {:?}", got.dtype(), want.dtype()));
        }
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| assert_close(got, want, atol, rtol, what)))
            .map_err(|p| p.downcast_ref::<String>().cloned().unwrap_or_default())
    };
    check(&out, &get(format!("{name}/out/0"))?, "output")?;
    if out.requires_grad() {
        let gout = get(format!("{name}/gout/0"))?;
        pyrite::autograd::backward(&[&out], Some(&[&gout]), None, false)
            .map_err(|e| format!("backward: {e}"))?;
    }
    for (i, x) in inputs.iter().enumerate() {
        if needs[i] {
            let want = get(format!("{name}/gin/{i}"))?;
            let got = x.grad().unwrap_or(want.zeros_like().unwrap());
            check(&got, &want, &format!("grad of input {i}"))?;
        }
    }
    Ok(())
}

#[test]
fn every_function_matches_pytorch() {
    let (t, meta) = load_tensors("nn_functional.safetensors");
    let cases: Vec<J> = serde_json::from_str(&meta["cases"]).unwrap();
    let mut failures = Vec::new();
    let mut per_fn: std::collections::BTreeMap<&str, (usize, usize)> = Default::default();
    for c in &cases {
        let name = c["name"].as_str().unwrap();
        let e = per_fn.entry(c["fn"].as_str().unwrap()).or_default();
        if c.get("error").is_some_and(|e| !e.is_null()) {
            e.1 += 1;
        } else {
            e.0 += 1;
        }
        if let Err(e) = run_case(c, &t) {
            failures.push(format!("{name}: {e}"));
        }
    }
    eprintln!("{} cases (function: (value cases, error cases)): {per_fn:?}", cases.len());
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

// ---------------------------------------------------------------------------- gradcheck

fn randn(shape: &[usize], seed: u64) -> Tensor {
    let g = pyrite::Generator::new(seed);
    Tensor::randn_with(shape, DType::F64, Some(&g)).unwrap()
}

/// Uniform in `[lo, hi)`, f64.
fn uniform(shape: &[usize], lo: f64, hi: f64, seed: u64) -> Tensor {
    let g = pyrite::Generator::new(seed);
    Tensor::rand_with(shape, DType::F64, Some(&g))
        .unwrap()
        .mul_scalar(hi - lo)
        .unwrap()
        .add_scalar(lo)
        .unwrap()
}

fn leaf(x: Tensor) -> Tensor {
    x.requires_grad_(true).unwrap()
}

#[test]
fn interpolate_gradcheck() {
    use InterpolateMode::*;
    // (mode, input shape, size, scale_factor, align_corners)
    type Case<'a> = (InterpolateMode, &'a [usize], Option<&'a [usize]>, Option<&'a [f64]>, Option<bool>);
    let cases: &[Case] = &[
        (Nearest, &[1, 2, 4], None, Some(&[1.7]), None),
        (Nearest, &[1, 2, 3, 2], Some(&[5, 3]), None, None),
        (NearestExact, &[1, 1, 2, 3, 2], None, Some(&[1.5, 0.7, 2.0]), None),
        (Linear, &[1, 2, 4], None, Some(&[1.7]), Some(false)),
        (Linear, &[1, 2, 5], Some(&[3]), None, Some(true)),
        (Bilinear, &[1, 2, 3, 3], Some(&[4, 5]), None, Some(false)),
        (Bilinear, &[1, 1, 3, 4], None, Some(&[0.7, 1.5]), Some(true)),
        (Bicubic, &[1, 1, 3, 3], Some(&[5, 4]), None, Some(false)),
        (Bicubic, &[1, 1, 4, 3], Some(&[2, 5]), None, Some(true)),
        (Trilinear, &[1, 1, 2, 3, 2], None, Some(&[1.5]), Some(false)),
        (Area, &[1, 2, 5, 4], Some(&[2, 3]), None, None),
    ];
    for (i, &(mode, shape, size, scale, align)) in cases.iter().enumerate() {
        let x = leaf(randn(shape, 10 + i as u64));
        gradcheck(
            |xs| {
                let o = InterpolateOptions {
                    size: size.map(<[usize]>::to_vec),
                    scale_factor: scale.map(<[f64]>::to_vec),
                    mode,
                    align_corners: align,
                    ..Default::default()
                };
                F::interpolate(&xs[0], &o)
            },
            &[x],
            GradcheckOptions::default(),
        )
        .unwrap_or_else(|e| panic!("{mode} {shape:?}: {e}"));
    }
}

#[test]
fn unfold_fold_gradcheck() {
    let x = leaf(randn(&[2, 2, 4, 5], 1));
    gradcheck(
        |xs| {
            F::unfold(
                &xs[0],
                &[2, 3],
                &FoldOptions { dilation: vec![1, 2], padding: vec![1], stride: vec![2, 1] },
            )
        },
        &[x],
        GradcheckOptions::default(),
    )
    .unwrap();
    // 2 * 2 * 2 planes; blocks: (4 + 2 - 2) // 2 + 1 = 3 by (5 + 2 - 3) // 1 + 1 = 5
    let cols = leaf(randn(&[1, 8, 15], 2));
    gradcheck(
        |xs| {
            F::fold(
                &xs[0],
                &[4, 5],
                &[2],
                &FoldOptions { dilation: vec![1, 2], padding: vec![1], stride: vec![2, 1] },
            )
        },
        &[cols],
        GradcheckOptions::default(),
    )
    .unwrap();
}

#[test]
fn fold_is_the_adjoint_of_unfold() {
    // <unfold(x), y> == <x, fold(y)>
    let x = randn(&[2, 3, 5, 6], 3);
    let ux = F::unfold(
        &x,
        &[2, 3],
        &FoldOptions { dilation: vec![2, 1], padding: vec![1, 2], stride: vec![1, 2] },
    )
    .unwrap();
    let y = randn(ux.dims(), 4);
    let fy = F::fold(
        &y,
        &[5, 6],
        &[2, 3],
        &FoldOptions { dilation: vec![2, 1], padding: vec![1, 2], stride: vec![1, 2] },
    )
    .unwrap();
    let a = ux.mul(&y).unwrap().sum().unwrap().item::<f64>().unwrap();
    let b = x.mul(&fy).unwrap().sum().unwrap().item::<f64>().unwrap();
    assert!((a - b).abs() < 1e-10 * a.abs().max(1.0), "{a} vs {b}");
}

#[test]
fn affine_grid_gradcheck() {
    let theta = leaf(randn(&[2, 2, 3], 5));
    for align in [false, true] {
        gradcheck(
            |xs| F::affine_grid(&xs[0], &[2, 1, 3, 4], align),
            std::slice::from_ref(&theta),
            GradcheckOptions::default(),
        )
        .unwrap();
    }
    let theta3 = leaf(randn(&[1, 3, 4], 6));
    gradcheck(|xs| F::affine_grid(&xs[0], &[1, 2, 2, 3, 2], false), &[theta3], GradcheckOptions::default())
        .unwrap();
}

#[test]
fn grid_sample_gradcheck() {
    use GridSampleMode::*;
    use GridSamplePadding::*;
    let mut seed = 100;
    for mode in [Bilinear, Nearest, Bicubic] {
        for pm in [Zeros, Border, Reflection] {
            for align in [false, true] {
                seed += 1;
                let x = leaf(randn(&[1, 2, 3, 4], seed));
                // nearest: the grid gets no gradient (the output is piecewise constant in it)
                let grid = uniform(&[1, 2, 3, 2], -1.6, 1.6, seed + 1000);
                let grid = if mode == Nearest { grid } else { leaf(grid) };
                gradcheck(
                    |xs| F::grid_sample(&xs[0], &xs[1], &gs_opts(mode, pm, align)),
                    &[x, grid],
                    GradcheckOptions::default(),
                )
                .unwrap_or_else(|e| panic!("{mode:?} {pm:?} align={align}: {e}"));
            }
        }
    }
    for mode in [Bilinear, Nearest] {
        for pm in [Zeros, Border, Reflection] {
            seed += 1;
            let x = leaf(randn(&[1, 1, 2, 3, 2], seed));
            let grid = uniform(&[1, 2, 1, 2, 3], -1.6, 1.6, seed + 1000);
            let grid = if mode == Nearest { grid } else { leaf(grid) };
            gradcheck(
                |xs| F::grid_sample(&xs[0], &xs[1], &gs_opts(mode, pm, false)),
                &[x, grid],
                GradcheckOptions::default(),
            )
            .unwrap_or_else(|e| panic!("3-D {mode:?} {pm:?}: {e}"));
        }
    }
    // through affine_grid, into theta
    let x = randn(&[1, 2, 3, 4], 7);
    let theta = leaf(
        Tensor::new([[[0.9f64, 0.2, 0.1], [-0.15, 1.1, -0.05]]])
            .unwrap()
            .add(&randn(&[1, 2, 3], 8).mul_scalar(0.05).unwrap())
            .unwrap(),
    );
    gradcheck(
        |xs| {
            let g = F::affine_grid(&xs[0], &[1, 2, 3, 4], false)?;
            F::grid_sample(&x, &g, &Default::default())
        },
        &[theta],
        GradcheckOptions::default(),
    )
    .unwrap();
}

#[test]
fn double_backward() {
    let x = leaf(randn(&[1, 1, 3, 3], 20));
    gradgradcheck(
        |xs| {
            F::interpolate(
                &xs[0],
                &InterpolateOptions {
                    align_corners: Some(false),
                    ..to_size(&[4, 5], InterpolateMode::Bicubic)
                },
            )
        },
        std::slice::from_ref(&x),
        None,
        GradcheckOptions::default(),
    )
    .unwrap();
    // bilinear is linear in the input but not in the grid: the mixed second derivatives
    let grid = leaf(uniform(&[1, 2, 2, 2], -1.3, 1.3, 21));
    gradgradcheck(
        |xs| {
            F::grid_sample(
                &xs[0],
                &xs[1],
                &gs_opts(GridSampleMode::Bilinear, GridSamplePadding::Reflection, false),
            )
        },
        &[x.clone(), grid.clone()],
        None,
        GradcheckOptions::default(),
    )
    .unwrap();
    gradgradcheck(
        |xs| {
            F::grid_sample(&xs[0], &xs[1], &gs_opts(GridSampleMode::Bicubic, GridSamplePadding::Border, true))
        },
        &[x, grid],
        None,
        GradcheckOptions::default(),
    )
    .unwrap();
}

// ---------------------------------------------------------------------------- errors

#[test]
fn bad_arguments_are_errors() {
    use InterpolateMode::*;
    let x3 = randn(&[1, 2, 4], 1);
    let x4 = randn(&[1, 2, 3, 3], 2);
    let x5 = randn(&[1, 2, 2, 2, 2], 3);
    let errs: Vec<(&str, Result<Tensor>)> = vec![
        (
            "size and scale",
            F::interpolate(
                &x3,
                &InterpolateOptions { scale_factor: Some(vec![2.0]), ..to_size(&[4], Nearest) },
            ),
        ),
        ("neither", F::interpolate(&x3, &InterpolateOptions { mode: Nearest, ..Default::default() })),
        (
            "align with nearest",
            F::interpolate(&x3, &InterpolateOptions { align_corners: Some(false), ..to_size(&[4], Nearest) }),
        ),
        (
            "align with area",
            F::interpolate(&x3, &InterpolateOptions { align_corners: Some(true), ..to_size(&[4], Area) }),
        ),
        ("bilinear on 3-D", F::interpolate(&x3, &to_size(&[4], Bilinear))),
        ("trilinear on 4-D", F::interpolate(&x4, &to_size(&[4], Trilinear))),
        ("bicubic on 5-D", F::interpolate(&x5, &to_size(&[4], Bicubic))),
        ("linear on 2-D", F::interpolate(&randn(&[2, 3], 4), &to_size(&[4], Linear))),
        ("0-D", F::interpolate(&Tensor::scalar(1f32).unwrap(), &to_size(&[4], Nearest))),
        ("size length", F::interpolate(&x4, &to_size(&[4, 4, 4], Bilinear))),
        ("scale length", F::interpolate(&x4, &by_scale(&[2.0, 2.0, 2.0], Nearest))),
        (
            "recompute with size",
            F::interpolate(
                &x3,
                &InterpolateOptions { recompute_scale_factor: Some(true), ..to_size(&[4], Linear) },
            ),
        ),
        ("zero output", F::interpolate(&x3, &by_scale(&[0.1], Linear))),
        ("negative scale", F::interpolate(&x3, &by_scale(&[-2.0], Nearest))),
        ("nan scale", F::interpolate(&x3, &by_scale(&[f64::NAN], Linear))),
        ("zero size", F::interpolate(&x4, &to_size(&[0, 2], Bicubic))),
        ("empty input", F::interpolate(&randn(&[1, 2, 0], 5), &to_size(&[3], Linear))),
        ("integer input", F::interpolate(&Tensor::new([[[1i64, 2]]]).unwrap(), &to_size(&[3], Linear))),
        ("unfold 2-D", F::unfold(&randn(&[3, 3], 1), &[2], &Default::default())),
        ("unfold kernel 0", F::unfold(&x4, &[0], &Default::default())),
        ("unfold dilation 0", F::unfold(&x4, &[2], &FoldOptions { dilation: vec![0], ..Default::default() })),
        ("unfold stride 0", F::unfold(&x4, &[2], &FoldOptions { stride: vec![0], ..Default::default() })),
        ("unfold kernel too big", F::unfold(&x4, &[4], &Default::default())),
        ("unfold 3 kernel values", F::unfold(&x4, &[1, 2, 3], &Default::default())),
        ("fold 4-D", F::fold(&x4, &[4], &[2], &Default::default())),
        ("fold not divisible", F::fold(&randn(&[1, 6, 9], 1), &[4], &[2], &Default::default())),
        ("fold blocks", F::fold(&randn(&[1, 8, 8], 1), &[4], &[2], &Default::default())),
        ("fold output 3 values", F::fold(&randn(&[1, 8, 9], 1), &[4, 4, 4], &[2], &Default::default())),
        ("fold output too small", F::fold(&randn(&[1, 4, 1], 1), &[1], &[2], &Default::default())),
        ("affine theta shape", F::affine_grid(&randn(&[1, 3, 3], 1), &[1, 1, 4, 4], false)),
        ("affine size length", F::affine_grid(&randn(&[1, 2, 3], 1), &[1, 4, 4], false)),
        ("affine batch", F::affine_grid(&randn(&[2, 2, 3], 1), &[3, 1, 4, 4], false)),
        (
            "affine integer theta",
            F::affine_grid(&Tensor::zeros([1, 2, 3], DType::I64).unwrap(), &[1, 1, 2, 2], false),
        ),
        ("affine zero size", F::affine_grid(&randn(&[1, 2, 3], 1), &[1, 1, 0, 4], true)),
    ];
    let g4 = uniform(&[1, 2, 2, 2], -1.0, 1.0, 9);
    let gs = |x: &Tensor, g: &Tensor, mode: GridSampleMode| {
        F::grid_sample(x, g, &GridSampleOptions { mode, ..Default::default() })
    };
    let more: Vec<(&str, Result<Tensor>)> = vec![
        ("grid rank", gs(&x4, &uniform(&[1, 2, 2], -1.0, 1.0, 1), GridSampleMode::Bilinear)),
        ("grid batch", gs(&randn(&[2, 2, 3, 3], 1), &g4, GridSampleMode::Bilinear)),
        ("grid last dim", gs(&x4, &uniform(&[1, 2, 2, 3], -1.0, 1.0, 1), GridSampleMode::Bilinear)),
        ("3-D input", gs(&x3, &uniform(&[1, 2, 1], -1.0, 1.0, 1), GridSampleMode::Bilinear)),
        ("empty spatial", gs(&randn(&[1, 2, 0, 3], 1), &g4, GridSampleMode::Bilinear)),
        ("dtype mismatch", gs(&x4.to_dtype(DType::F32).unwrap(), &g4, GridSampleMode::Bilinear)),
        (
            "integer input",
            gs(&x4.to_dtype(DType::I64).unwrap(), &g4.to_dtype(DType::I64).unwrap(), GridSampleMode::Nearest),
        ),
        // PyTorch 2.15's CPU kernel accepts this and returns uninitialised memory
        ("bicubic 5-D", gs(&x5, &uniform(&[1, 1, 2, 2, 3], -1.0, 1.0, 1), GridSampleMode::Bicubic)),
    ];
    for (what, r) in errs.into_iter().chain(more) {
        assert!(r.is_err(), "{what}: expected an error, got Ok");
    }
    assert!(InterpolateMode::parse("cubic").is_err());
    assert!(GridSampleMode::parse("linear").is_err());
    assert!(GridSamplePadding::parse("circular").is_err());
}

#[test]
fn edge_shapes() {
    // an empty batch passes through
    let x = Tensor::zeros([0, 2, 3, 3], DType::F32).unwrap();
    let y = F::interpolate(&x, &by_scale(&[2.0], InterpolateMode::Bilinear)).unwrap();
    assert_eq!(y.dims(), &[0, 2, 6, 6]);
    let g = Tensor::zeros([0, 4, 5, 2], DType::F32).unwrap();
    assert_eq!(F::grid_sample(&x, &g, &Default::default()).unwrap().dims(), &[0, 2, 4, 5]);
    assert_eq!(F::unfold(&x, &[2], &Default::default()).unwrap().dims(), &[0, 8, 4]);
    // same size: a copy, not the input itself
    let x = randn(&[1, 2, 3, 3], 1);
    let y = F::interpolate(&x, &to_size(&[3, 3], InterpolateMode::Bilinear)).unwrap();
    assert_eq!(y.to_vec::<f64>().unwrap(), x.to_vec::<f64>().unwrap());
    y.fill_(0.0).unwrap();
    assert_ne!(x.to_vec::<f64>().unwrap(), y.to_vec::<f64>().unwrap());
    // uint8 works in the nearest modes
    let u = Tensor::new([[[1u8, 2, 3]]]).unwrap();
    let y = F::interpolate(&u, &to_size(&[6], InterpolateMode::Nearest)).unwrap();
    assert_eq!(y.to_vec::<u8>().unwrap(), vec![1, 1, 2, 2, 3, 3]);
}

#[test]
fn nan_grid_locations_read_as_pytorch() {
    // PyTorch 2.15: zeros -> bilinear/bicubic NaN, nearest 0; border/reflection clip NaN to
    // pixel 0 (bicubic stays NaN through its weights)
    let x = Tensor::arange(0.0, 12.0, 1.0, DType::F32).unwrap().reshape([1, 1, 3, 4]).unwrap();
    let g = Tensor::new([[[[f32::NAN, 0.2], [0.3, f32::NAN]]]]).unwrap();
    let want: &[(GridSamplePadding, GridSampleMode, [f32; 2])] = &[
        (GridSamplePadding::Zeros, GridSampleMode::Bilinear, [f32::NAN, f32::NAN]),
        (GridSamplePadding::Zeros, GridSampleMode::Nearest, [0.0, 0.0]),
        (GridSamplePadding::Zeros, GridSampleMode::Bicubic, [f32::NAN, f32::NAN]),
        (GridSamplePadding::Border, GridSampleMode::Bilinear, [5.2, 2.1]),
        (GridSamplePadding::Border, GridSampleMode::Nearest, [4.0, 2.0]),
        (GridSamplePadding::Border, GridSampleMode::Bicubic, [f32::NAN, f32::NAN]),
        (GridSamplePadding::Reflection, GridSampleMode::Bilinear, [5.2, 2.1]),
        (GridSamplePadding::Reflection, GridSampleMode::Nearest, [4.0, 2.0]),
        (GridSamplePadding::Reflection, GridSampleMode::Bicubic, [f32::NAN, f32::NAN]),
    ];
    for &(pm, mode, w) in want {
        let y = F::grid_sample(&x, &g, &gs_opts(mode, pm, false)).unwrap().to_vec::<f32>().unwrap();
        for (a, b) in y.iter().zip(w) {
            assert!((a.is_nan() && b.is_nan()) || (a - b).abs() < 1e-5, "{pm:?} {mode:?}: {y:?}, want {w:?}");
        }
    }
}

#[test]
fn layer_reprs_are_pytorchs() {
    let cases: Vec<(Box<dyn Module>, &str)> = vec![
        (
            Box::new(Upsample::new(None, Some(&[2.0]), InterpolateMode::Bilinear)),
            "Upsample(scale_factor=2.0, mode='bilinear')",
        ),
        (
            Box::new(Upsample::new(Some(&[5, 7]), None, InterpolateMode::Nearest)),
            "Upsample(size=(5, 7), mode='nearest')",
        ),
        (
            Box::new(Upsample::new(None, Some(&[2.0, 1.5]), InterpolateMode::Bicubic).align_corners(true)),
            "Upsample(scale_factor=(2.0, 1.5), mode='bicubic')",
        ),
        (
            Box::new(Upsample::new(None, Some(&[1.7]), InterpolateMode::NearestExact)),
            "Upsample(scale_factor=1.7, mode='nearest-exact')",
        ),
        (
            Box::new(UpsamplingNearest2d::new(None, Some(&[2.0]))),
            "UpsamplingNearest2d(scale_factor=2.0, mode='nearest')",
        ),
        (
            Box::new(UpsamplingBilinear2d::new(Some(&[4]), None)),
            "UpsamplingBilinear2d(size=4, mode='bilinear')",
        ),
        (
            Box::new(Unfold::new(&[2, 3]).padding(&[1])),
            "Unfold(kernel_size=(2, 3), dilation=1, padding=1, stride=1)",
        ),
        (
            Box::new(Fold::new(&[4, 5], &[2]).stride(&[1, 2])),
            "Fold(output_size=(4, 5), kernel_size=2, dilation=1, padding=0, stride=(1, 2))",
        ),
    ];
    for (m, want) in cases {
        assert_eq!(m.repr(), want);
        assert!(m.named_parameters().is_empty() && m.state_dict().unwrap().is_empty());
    }
}
