//! Convolution and pooling against PyTorch (`reference/gen_conv.py`): outputs and gradients
//! of input, weight and bias for a recorded upstream gradient, in f32 and f64; f64 gradcheck
//! and gradgradcheck of every recorded case; error messages; larger shapes on the
//! multi-threaded paths against a naive reference; thread-count independence.

mod common;

use common::Case;
use pyrite_core::ops::conv::{conv, conv1d, conv2d, conv3d, conv_transpose, conv_transpose2d};
use pyrite_core::ops::pool::{
    adaptive_avg_pool, adaptive_max_pool, avg_pool, avg_pool2d, max_pool, max_pool1d, max_pool2d, max_unpool,
};
use pyrite_core::{DType, Result, Tensor};

fn opt_usize(c: &Case, key: &str) -> Option<usize> {
    c.opt(key).map(|v| v.as_u64().unwrap() as usize)
}

/// The Pyrite call of a case: its output and, for max pooling, the indices.
fn run(c: &Case, xs: &[Tensor]) -> Result<(Tensor, Option<Tensor>)> {
    let bias = |i: usize| if c.b("bias") { Some(&xs[i]) } else { None };
    Ok(match c.op.as_str() {
        // F.conv{n}d(x, w, b, stride, padding, dilation, groups)
        "conv" => (
            conv(
                &xs[0],
                &xs[1],
                bias(2),
                &c.sizes("stride"),
                &c.sizes("padding"),
                &c.sizes("dilation"),
                c.u("groups"),
            )?,
            None,
        ),
        // F.conv_transpose{n}d(x, w, b, stride, padding, output_padding, groups, dilation)
        "conv_transpose" => (
            conv_transpose(
                &xs[0],
                &xs[1],
                bias(2),
                &c.sizes("stride"),
                &c.sizes("padding"),
                &c.sizes("output_padding"),
                &c.sizes("dilation"),
                c.u("groups"),
            )?,
            None,
        ),
        // F.max_pool{n}d(x, kernel, stride, padding, dilation, ceil_mode, return_indices=True)
        "max_pool" | "max_pool_fwd" => {
            let (v, i) = max_pool(
                &xs[0],
                &c.sizes("kernel"),
                &c.sizes("stride"),
                &c.sizes("padding"),
                &c.sizes("dilation"),
                c.b("ceil_mode"),
            )?;
            (v, Some(i))
        }
        // F.avg_pool{n}d(x, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override)
        "avg_pool" => (
            avg_pool(
                &xs[0],
                &c.sizes("kernel"),
                &c.sizes("stride"),
                &c.sizes("padding"),
                c.b("ceil_mode"),
                c.b("count_include_pad"),
                opt_usize(c, "divisor_override"),
            )?,
            None,
        ),
        // F.adaptive_avg_pool{n}d(x, output_size)
        "adaptive_avg_pool" => (adaptive_avg_pool(&xs[0], &c.sizes("output_size"))?, None),
        // F.adaptive_max_pool{n}d(x, output_size, return_indices=True)
        "adaptive_max_pool" => {
            let (v, i) = adaptive_max_pool(&xs[0], &c.sizes("output_size"))?;
            (v, Some(i))
        }
        // F.max_unpool{n}d(v, indices, kernel, stride, padding, output_size)
        "max_unpool" => (max_unpool(&xs[0], &xs[1], &c.sizes("output_size"))?, None),
        _ => c.unhandled().map(|_| unreachable!())?,
    })
}

/// Runs a case: a gradient case gives `[out, grads..., indices?]`, others `[out, indices?]`.
fn run_case(c: &Case) -> Result<Vec<Tensor>> {
    if c.error.is_some() || c.opt("diff").is_none() {
        let (o, e) = run(c, &c.inputs)?;
        return Ok(std::iter::once(o).chain(e).collect());
    }
    let xs = common::grad_leaves(c);
    let (out, extra) = run(c, &xs)?;
    let g = c.inputs.last().unwrap();
    let diff: Vec<&Tensor> = c.sizes("diff").iter().map(|&i| &xs[i]).collect();
    let grads = pyrite_core::autograd::grad(&[&out], &diff, Some(&[g]), None, false, true)?;
    let mut res = vec![out.detach()];
    for (gr, x) in grads.into_iter().zip(&diff) {
        res.push(match gr {
            Some(g) => g,
            None => x.zeros_like()?,
        });
    }
    if c.b("extra_out") {
        res.push(extra.expect("indices"));
    }
    Ok(res)
}

#[test]
fn conv_and_pool_match_pytorch() {
    common::check_family("conv", run_case);
}

/// The same gradients computed with `create_graph` (the formulas then record themselves).
#[test]
fn gradients_with_create_graph_match_pytorch() {
    common::check_family("conv", |c| {
        if c.error.is_some() || c.opt("diff").is_none() {
            return run_case(c);
        }
        let xs = common::grad_leaves(c);
        let (out, extra) = run(c, &xs)?;
        let g = c.inputs.last().unwrap();
        let diff: Vec<&Tensor> = c.sizes("diff").iter().map(|&i| &xs[i]).collect();
        let grads = pyrite_core::autograd::grad(&[&out], &diff, Some(&[g]), None, true, true)?;
        let mut res = vec![out.detach()];
        for (gr, x) in grads.into_iter().zip(&diff) {
            res.push(match gr {
                Some(g) => g.detach(),
                None => x.zeros_like()?,
            });
        }
        if c.b("extra_out") {
            res.push(extra.unwrap());
        }
        Ok(res)
    });
}

fn out_only(c: &Case, xs: &[Tensor]) -> Result<Tensor> {
    Ok(run(c, xs)?.0)
}

/// gradcheck and gradgradcheck (f64) on every recorded gradient case, the ties case excepted
/// (a maximum shared by two inputs has no derivative).
#[test]
fn conv_and_pool_gradcheck_and_gradgradcheck() {
    // max_unpool with repeated indices (overlapping pooling windows) keeps the last write, so
    // the overwritten inputs have no derivative there (PyTorch's gradcheck fails the same way).
    let skip = ["max_pool2d_ties", "max_pool2d_nan", "max_unpool1d_pad", "max_unpool2d_overlap"];
    let n = common::check_finite_differences("conv", out_only, &skip, &[]);
    assert!(n >= 70, "only {n} cases checked");
}

// ------------------------------------------------------------------ error messages

fn err_msg<T: std::fmt::Debug>(r: Result<T>) -> String {
    match r {
        Ok(t) => panic!("expected an error, got {t:?}"),
        Err(e) => e.message().to_string(),
    }
}

fn randn(shape: &[usize], dt: DType) -> Tensor {
    Tensor::randn(shape.to_vec(), dt).unwrap()
}

#[test]
fn conv_errors_name_the_op_and_shapes() {
    let x = randn(&[2, 4, 5, 5], DType::F32);
    let w = randn(&[6, 4, 3, 3], DType::F32);
    let m = err_msg(conv(&x, &randn(&[6, 3, 3, 3], DType::F32), None, &[1], &[0], &[1], 1));
    assert_eq!(m, "Given groups=1, weight of size [6, 3, 3, 3], expected input[2, 4, 5, 5] to have 3 channels, but got 4 channels instead");
    let m = err_msg(conv(&x, &w, None, &[1], &[0], &[1], 3));
    assert!(
        m.starts_with(
            "Given groups=3, weight of size [6, 4, 3, 3], expected input[2, 4, 5, 5] to have 12 channels"
        ),
        "{m}"
    );
    let m = err_msg(conv(&x, &randn(&[3, 2, 3, 3], DType::F32), None, &[1], &[0], &[1], 2));
    assert_eq!(m, "Given groups=2, expected weight to be divisible by 2 at dimension 0, but got weight of shape [3, 2, 3, 3] instead");
    let m = err_msg(conv(&x.narrow(2, 0, 2).unwrap(), &w, None, &[1], &[0], &[1], 1));
    assert!(m.contains("Calculated padded input size per channel: (2 x 5). Kernel size: (3 x 3). Kernel size can't be greater than actual input size"), "{m}");
    let m = err_msg(conv(&x, &w, None, &[1], &[0], &[3], 1));
    assert!(m.contains("Kernel size: (7 x 7)"), "{m}");
    assert_eq!(err_msg(conv(&x, &w, None, &[0], &[0], &[1], 1)), "non-positive stride is not supported");
    assert_eq!(err_msg(conv(&x, &w, None, &[1], &[0], &[0], 1)), "non-positive dilation is not supported");
    assert_eq!(err_msg(conv(&x, &w, None, &[1], &[0], &[1], 0)), "non-positive groups is not supported");
    let m = err_msg(conv(&x, &w, None, &[1, 1, 1], &[0], &[1], 1));
    assert!(m.starts_with("expected stride to be a single integer value or a list of 2 values"), "{m}");
    let m = err_msg(conv(&x, &w, Some(&randn(&[5], DType::F32)), &[1], &[0], &[1], 1));
    assert_eq!(m, "Given weight of size [6, 4, 3, 3], expected bias to be 1-dimensional with 6 elements, but got bias of size [5] instead");
    let m = err_msg(conv(&x, &w.to_dtype(DType::F64).unwrap(), None, &[1], &[0], &[1], 1));
    assert_eq!(m, "Input type (float) and weight type (double) should be the same");
    let m = err_msg(conv(
        &x.to_dtype(DType::I64).unwrap(),
        &w.to_dtype(DType::I64).unwrap(),
        None,
        &[1],
        &[0],
        &[1],
        1,
    ));
    assert!(m.starts_with("\"conv2d\" not implemented for 'Long'"), "{m}");
    let m = err_msg(conv(&x.select(0, 0).unwrap(), &w, None, &[1], &[0], &[1], 1));
    assert!(m.starts_with("Expected 4-dimensional input for 4-dimensional weight [6, 4, 3, 3], but got 3-dimensional input of size [4, 5, 5]"), "{m}");
    let m = err_msg(conv2d(&x.select(0, 0).unwrap(), &w, None, &[1], &[0], &[1], 1));
    assert!(m.starts_with("Expected 4D (batched) input to conv2d, but got input of size: [4, 5, 5]"), "{m}");
    let m = err_msg(conv1d(&x, &w, None, &[1], &[0], &[1], 1));
    assert!(m.starts_with("Expected 3D (batched) input to conv1d"), "{m}");
    let m = err_msg(conv(&x, &randn(&[2, 3], DType::F32), None, &[1], &[0], &[1], 1));
    assert!(m.contains("expected a 3-, 4- or 5-dimensional weight"), "{m}");
    let m = err_msg(conv3d(&x, &w, None, &[1], &[0], &[1], 1));
    assert!(m.starts_with("Expected 5D (batched) input to conv3d"), "{m}");
    // transposed
    let wt = randn(&[4, 3, 3, 3], DType::F32);
    let m = err_msg(conv_transpose(&x, &wt, None, &[1], &[0], &[1], &[1], 1));
    assert_eq!(m, "output padding must be smaller than either stride or dilation, but got output_padding_height: 1 output_padding_width: 1 stride_height: 1 stride_width: 1 dilation_height: 1 dilation_width: 1");
    let m = err_msg(conv_transpose(&x, &randn(&[3, 3, 3, 3], DType::F32), None, &[1], &[0], &[0], &[1], 1));
    assert_eq!(m, "Given transposed=1, weight of size [3, 3, 3, 3], expected input[2, 4, 5, 5] to have 3 channels, but got 4 channels instead");
    let m = err_msg(conv_transpose(&x, &wt, Some(&randn(&[4], DType::F32)), &[1], &[0], &[0], &[1], 1));
    assert!(m.starts_with("Given transposed=1, weight of size [4, 3, 3, 3], expected bias to be 1-dimensional with 3 elements"), "{m}");
    let m = err_msg(conv_transpose2d(
        &x.narrow(2, 0, 1).unwrap().narrow(3, 0, 1).unwrap(),
        &wt,
        None,
        &[1],
        &[2],
        &[0],
        1,
        &[1],
    ));
    assert!(m.ends_with("Output size is too small"), "{m}");
    // absurd sizes are errors, not panics or huge allocations
    assert!(conv(&x, &w, None, &[usize::MAX], &[0], &[1], 1).is_err());
    assert!(conv(&x, &w, None, &[1], &[usize::MAX], &[1], 1).is_err());
    assert!(conv(&x, &w, None, &[1], &[1 << 30], &[1], 1).is_err());
}

#[test]
fn pool_errors_name_the_op_and_shapes() {
    let x = randn(&[2, 4, 5, 5], DType::F32);
    let m = err_msg(max_pool(&x, &[3], &[], &[2], &[1], false));
    assert_eq!(
        m,
        "pad should be at most half of effective kernel size, but got pad=2, kernel_size=3 and dilation=1"
    );
    let m = err_msg(max_pool(&x, &[6], &[], &[0], &[1], false));
    assert_eq!(m, "Given input size: (4x5x5). Calculated output size: (4x0x0). Output size is too small");
    assert_eq!(err_msg(max_pool(&x, &[2], &[0], &[0], &[1], false)), "stride should not be zero");
    let m = err_msg(avg_pool(&x, &[3], &[], &[2], false, true, None));
    assert!(m.starts_with("pad should be smaller than or equal to half of kernel size"), "{m}");
    assert_eq!(err_msg(avg_pool(&x, &[2], &[], &[0], false, true, Some(0))), "divisor must be not zero");
    let m = err_msg(adaptive_avg_pool(&x.narrow(2, 0, 0).unwrap(), &[2]));
    assert_eq!(m, "adaptive_avg_pool2d(): Expected input to have non-zero size for non-batch dimensions, but input has sizes [2, 4, 0, 5] with dimension 2 being empty");
    let m = err_msg(max_pool2d(&x.select(0, 0).unwrap(), &[2], &[], &[0], &[1], false));
    assert!(m.contains("Expected 4D (batch mode) tensor"), "{m}");
    let m = err_msg(max_pool1d(&x, &[2], &[], &[0], &[1], false));
    assert!(m.contains("Expected 3D (batch mode) tensor"), "{m}");
    let m = err_msg(avg_pool2d(&x.to_dtype(DType::I64).unwrap(), &[2], &[], &[0], false, true, None));
    assert!(m.starts_with("\"avg_pool2d\" not implemented for 'Long'"), "{m}");
    let (v, i) = max_pool(&x, &[2], &[], &[0], &[1], false).unwrap();
    let m = err_msg(max_unpool(&v, &i.add_scalar(100).unwrap(), &[4, 4]));
    assert!(m.starts_with("Found an invalid max index: 1"), "{m}");
    assert!(m.ends_with("(output volumes are of size 4x4)"), "{m}");
    let m = err_msg(max_unpool(&v, &i.to_dtype(DType::I32).unwrap(), &[4, 4]));
    assert_eq!(m, "elements in indices should be type int64 but got: Int");
    let m = err_msg(max_unpool(&v, &i, &[4]));
    assert!(m.contains("exactly 2 elements"), "{m}");
    // batch of zero is fine, an empty channel dim is not
    assert_eq!(
        max_pool(&x.narrow(0, 0, 0).unwrap(), &[2], &[], &[0], &[1], false).unwrap().0.dims(),
        &[0, 4, 2, 2]
    );
    assert!(max_pool(&x.narrow(1, 0, 0).unwrap(), &[2], &[], &[0], &[1], false).is_err());
}

// ------------------------------------------------------------------ larger shapes

/// Naive f64 convolution (direct loops) of contiguous data.
#[allow(clippy::too_many_arguments)]
fn naive_conv2d(
    x: &[f64],
    w: &[f64],
    (n, ci, h, wd): (usize, usize, usize, usize),
    (co, k): (usize, usize),
    s: usize,
    p: usize,
    groups: usize,
) -> (Vec<f64>, usize, usize) {
    let oh = (h + 2 * p - k) / s + 1;
    let ow = (wd + 2 * p - k) / s + 1;
    let (cig, cog) = (ci / groups, co / groups);
    let mut y = vec![0f64; n * co * oh * ow];
    for b in 0..n {
        for o in 0..co {
            let gr = o / cog;
            for yy in 0..oh {
                for xx in 0..ow {
                    let mut acc = 0.0;
                    for c in 0..cig {
                        for a in 0..k {
                            for e in 0..k {
                                let iy = (yy * s + a) as isize - p as isize;
                                let ix = (xx * s + e) as isize - p as isize;
                                if iy < 0 || ix < 0 || iy >= h as isize || ix >= wd as isize {
                                    continue;
                                }
                                let xi = ((b * ci + gr * cig + c) * h + iy as usize) * wd + ix as usize;
                                let wi = ((o * cig + c) * k + a) * k + e;
                                acc += x[xi] * w[wi];
                            }
                        }
                    }
                    y[((b * co + o) * oh + yy) * ow + xx] = acc;
                }
            }
        }
    }
    (y, oh, ow)
}

fn close(got: &[f64], want: &[f64], tol: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() <= tol * (1.0 + w.abs()), "{what}: element {i}: {g} vs {w}");
    }
}

/// Shapes large enough for the threaded paths (batch split, and a batch of one with threaded
/// products), checked against direct loops, with the gradients checked through the identity
/// `<conv(x, w), g>` differentiated by hand: `sum(conv(x, w) * g)`'s gradient for `x` is
/// `conv_transpose(g, w)`, checked here by directional derivatives in f64.
#[test]
fn larger_convolutions_match_direct_loops() {
    for &(n, ci, h, co, k, s, p, groups) in &[
        (8, 16, 20, 32, 3, 1, 1, 1),
        (1, 32, 24, 64, 3, 1, 1, 1),
        (4, 12, 15, 12, 5, 2, 2, 3),
        (3, 64, 9, 32, 1, 1, 0, 1),
        (2, 6, 40, 8, 3, 2, 1, 2),
        (1, 16, 33, 8, 1, 1, 0, 1),
    ] {
        let x = Tensor::randn([n, ci, h, h], DType::F64).unwrap();
        let w = Tensor::randn([co, ci / groups, k, k], DType::F64).unwrap();
        let y = conv(&x, &w, None, &[s], &[p], &[1], groups).unwrap();
        let (want, oh, ow) = naive_conv2d(
            &x.to_vec::<f64>().unwrap(),
            &w.to_vec::<f64>().unwrap(),
            (n, ci, h, h),
            (co, k),
            s,
            p,
            groups,
        );
        assert_eq!(y.dims(), &[n, co, oh, ow]);
        close(&y.to_vec::<f64>().unwrap(), &want, 1e-10, "f64 forward");
        let y32 = conv(
            &x.to_dtype(DType::F32).unwrap(),
            &w.to_dtype(DType::F32).unwrap(),
            None,
            &[s],
            &[p],
            &[1],
            groups,
        )
        .unwrap();
        let got: Vec<f64> = y32.to_vec::<f32>().unwrap().iter().map(|&v| v as f64).collect();
        close(&got, &want, 1e-4, "f32 forward");
        // gradients: directional derivative of L = sum(conv(x, w) * g) along random dx, dw
        let g = Tensor::randn(y.dims().to_vec(), DType::F64).unwrap();
        let xl = x.requires_grad_(true).unwrap();
        let wl = w.requires_grad_(true).unwrap();
        let l = conv(&xl, &wl, None, &[s], &[p], &[1], groups).unwrap().mul(&g).unwrap().sum().unwrap();
        l.backward().unwrap();
        let (gx, gw) = (xl.grad().unwrap(), wl.grad().unwrap());
        let dx = Tensor::randn(x.dims().to_vec(), DType::F64).unwrap();
        let dw = Tensor::randn(w.dims().to_vec(), DType::F64).unwrap();
        let lin = |a: &Tensor, b: &Tensor| {
            conv(a, b, None, &[s], &[p], &[1], groups)
                .unwrap()
                .mul(&g)
                .unwrap()
                .sum()
                .unwrap()
                .item::<f64>()
                .unwrap()
        };
        let x0 = x.detach();
        let w0 = w.detach();
        // L is bilinear: L(x + dx, w) - L(x, w) = L(dx, w) exactly.
        let want_x = lin(&dx, &w0);
        let got_x = gx.mul(&dx).unwrap().sum().unwrap().item::<f64>().unwrap();
        assert!((want_x - got_x).abs() <= 1e-8 * (1.0 + want_x.abs()), "input grad: {got_x} vs {want_x}");
        let want_w = lin(&x0, &dw);
        let got_w = gw.mul(&dw).unwrap().sum().unwrap().item::<f64>().unwrap();
        assert!((want_w - got_w).abs() <= 1e-8 * (1.0 + want_w.abs()), "weight grad: {got_w} vs {want_w}");
    }
}

#[test]
fn results_do_not_depend_on_the_thread_count() {
    let x = Tensor::randn([10, 8, 14, 14], DType::F32).unwrap();
    let w = Tensor::randn([16, 8, 3, 3], DType::F32).unwrap();
    let b = Tensor::randn([16], DType::F32).unwrap();
    let x1 = Tensor::randn([1, 16, 30, 30], DType::F32).unwrap();
    let w1 = Tensor::randn([32, 16, 3, 3], DType::F32).unwrap();
    let xg = Tensor::randn([2, 6, 40, 36], DType::F32).unwrap();
    let wg = Tensor::randn([8, 3, 3, 3], DType::F32).unwrap();
    let before = pyrite_core::get_num_threads();
    let mut runs = Vec::new();
    for threads in [1, 2, 3] {
        pyrite_core::set_num_threads(threads);
        // a small batch split into units of output rows, groups and stride 2, transposed too
        let xl = xg.detach().requires_grad_(true).unwrap();
        let wl = wg.detach().requires_grad_(true).unwrap();
        let y = conv(&xl, &wl, None, &[2], &[1], &[1], 2).unwrap();
        let t = conv_transpose(&y, &wl, None, &[2], &[1], &[1], &[1], 2).unwrap();
        t.sum().unwrap().backward().unwrap();
        let mut r = vec![
            t.to_vec::<f32>().unwrap(),
            xl.grad().unwrap().to_vec::<f32>().unwrap(),
            wl.grad().unwrap().to_vec::<f32>().unwrap(),
        ];
        for (x, w) in [(&x, &w), (&x1, &w1)] {
            let xl = x.detach().requires_grad_(true).unwrap();
            let wl = w.detach().requires_grad_(true).unwrap();
            let bl = b.detach().requires_grad_(true).unwrap();
            let bias = if x.dims()[0] == 10 { Some(&bl) } else { None };
            let y = conv(&xl, &wl, bias, &[1], &[1], &[1], 1).unwrap();
            let (p, _) = max_pool(&y, &[2], &[], &[0], &[1], false).unwrap();
            let a = avg_pool(&y, &[3], &[2], &[1], true, false, None).unwrap();
            p.sum().unwrap().add(&a.sum().unwrap()).unwrap().backward().unwrap();
            r.push(y.to_vec::<f32>().unwrap());
            r.push(xl.grad().unwrap().to_vec::<f32>().unwrap());
            r.push(wl.grad().unwrap().to_vec::<f32>().unwrap());
        }
        runs.push(r);
    }
    pyrite_core::set_num_threads(before);
    for r in &runs[1..] {
        for (k, (a, b)) in r.iter().zip(&runs[0]).enumerate() {
            assert!(a == b, "result {k} differs between thread counts");
        }
    }
}

#[test]
fn half_precision_computes_in_f32() {
    let x = Tensor::randn([2, 3, 6, 6], DType::F32).unwrap();
    let w = Tensor::randn([4, 3, 3, 3], DType::F32).unwrap();
    for dt in [DType::F16, DType::BF16] {
        let (xh, wh) = (x.to_dtype(dt).unwrap(), w.to_dtype(dt).unwrap());
        let y = conv(&xh, &wh, None, &[1], &[1], &[1], 1).unwrap();
        assert_eq!(y.dtype(), dt);
        let want = conv(
            &xh.to_dtype(DType::F32).unwrap(),
            &wh.to_dtype(DType::F32).unwrap(),
            None,
            &[1],
            &[1],
            &[1],
            1,
        )
        .unwrap()
        .to_dtype(dt)
        .unwrap();
        assert_eq!(
            y.to_dtype(DType::F32).unwrap().to_vec::<f32>().unwrap(),
            want.to_dtype(DType::F32).unwrap().to_vec::<f32>().unwrap()
        );
        let (v, i) = max_pool(&xh, &[2], &[], &[0], &[1], false).unwrap();
        assert_eq!(v.dtype(), dt);
        assert_eq!(i.dtype(), DType::I64);
        assert_eq!(avg_pool(&xh, &[2], &[], &[0], false, true, None).unwrap().dtype(), dt);
    }
}

#[test]
fn grad_fn_names_follow_pytorch() {
    let x = Tensor::randn([1, 2, 6, 6], DType::F32).unwrap().requires_grad_(true).unwrap();
    let w = Tensor::randn([2, 2, 3, 3], DType::F32).unwrap().requires_grad_(true).unwrap();
    let name = |t: &Tensor| t.grad_fn().unwrap().name().to_string();
    assert_eq!(name(&conv(&x, &w, None, &[1], &[0], &[1], 1).unwrap()), "ConvolutionBackward0");
    assert_eq!(
        name(&conv_transpose(&x, &w, None, &[1], &[0], &[0], &[1], 1).unwrap()),
        "ConvolutionBackward0"
    );
    assert_eq!(name(&max_pool(&x, &[2], &[], &[0], &[1], false).unwrap().0), "MaxPool2DWithIndicesBackward0");
    assert_eq!(name(&avg_pool(&x, &[2], &[], &[0], false, true, None).unwrap()), "AvgPool2DBackward0");
    assert_eq!(name(&adaptive_avg_pool(&x, &[2]).unwrap()), "AdaptiveAvgPool2DBackward0");
    assert_eq!(name(&adaptive_max_pool(&x, &[2]).unwrap().0), "AdaptiveMaxPool2DBackward0");
    let (v, i) = max_pool(&x, &[2], &[], &[0], &[1], false).unwrap();
    assert_eq!(name(&max_unpool(&v, &i, &[6, 6]).unwrap()), "MaxUnpool2DBackward0");
    let x3 = x.unsqueeze(2).unwrap();
    assert_eq!(
        name(&max_pool(&x3, &[1], &[], &[0], &[1], false).unwrap().0),
        "MaxPool3DWithIndicesBackward0"
    );
}

/// bf16 2x2 max pooling (stride 2): the same values and indices as pooling the f32 copy (NaN wins, ties keep the first tap, -inf everywhere keeps the first
/// position), and the gradient lands on the same positions.
#[test]
fn bf16_max_pool_2x2_matches_the_f32_path() -> Result<()> {
    use pyrite_core::ops::pool::max_pool;
    pyrite_core::manual_seed(3);
    let mut v = Tensor::randint(-3, 4, [2, 3, 6, 7], DType::F32)?.to_vec::<f32>()?;
    v[0] = f32::NAN;
    v[9] = f32::NAN;
    for x in &mut v[14..16] {
        *x = f32::NEG_INFINITY;
    }
    for x in &mut v[21..23] {
        *x = f32::NEG_INFINITY;
    }
    let x32 = Tensor::from_vec(v, [2, 3, 6, 7])?.requires_grad_(true)?;
    let x16 = x32.detach().to_dtype(DType::BF16)?.requires_grad_(true)?;
    let (want_v, want_i) = max_pool(&x32, &[2], &[], &[0], &[1], false)?;
    let want_vals = want_v.detach();
    let (v16, i16) = max_pool(&x16, &[2], &[], &[0], &[1], false)?;
    assert_eq!(v16.dtype(), DType::BF16);
    assert_eq!(i16.to_vec::<i64>()?, want_i.to_vec::<i64>()?);
    let (a, b) = (v16.to_dtype(DType::F32)?.to_vec::<f32>()?, want_vals.to_vec::<f32>()?);
    assert!(a.iter().zip(&b).all(|(x, y)| x == y || (x.is_nan() && y.is_nan())));
    let w = Tensor::randint(1, 5, want_v.dims().to_vec(), DType::F32)?;
    v16.to_dtype(DType::F32)?.mul(&w)?.sum()?.backward()?;
    want_v.mul(&w)?.sum()?.backward()?;
    let g = x16.grad().unwrap();
    assert_eq!(g.dtype(), DType::BF16);
    assert_eq!(g.to_dtype(DType::F32)?.to_vec::<f32>()?, x32.grad().unwrap().to_vec::<f32>()?);
    Ok(())
}
