//! The autograd engine's behaviour as a PyTorch user observes it: leaves and grads, graph
//! shapes, retain_graph, create_graph, grad modes, hooks, in-place checks, custom functions.

use pyrite_core::autograd::{self, Function, FunctionCtx};
use pyrite_core::{DType, ErrorKind, Result, Tensor};

fn leaf(v: &[f64]) -> Tensor {
    Tensor::from_slice(v, [v.len()]).unwrap().requires_grad_(true).unwrap()
}

fn vals(t: &Tensor) -> Vec<f64> {
    t.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap()
}

fn grad_of(t: &Tensor) -> Vec<f64> {
    vals(&t.grad().expect("grad is set"))
}

#[test]
fn leaves_non_leaves_and_grad_fn_names() -> Result<()> {
    let x = leaf(&[1., 2.]);
    assert!(x.is_leaf() && x.requires_grad() && x.grad().is_none() && x.grad_fn().is_none());
    let y = x.mul_scalar(3.0)?.exp()?;
    assert!(!y.is_leaf() && y.requires_grad());
    assert_eq!(y.grad_fn().unwrap().name(), "ExpBackward0");
    let next = y.grad_fn().unwrap().next_functions();
    assert_eq!(next[0].as_ref().unwrap().0.name(), "MulBackward0");
    // plain tensors stay out of the graph
    let c = Tensor::ones([2], DType::F64)?;
    assert!(!c.add(&c)?.requires_grad());
    assert!(Tensor::new([1i64])?.requires_grad_(true).is_err());
    assert!(y.requires_grad_(false).is_err(), "a non-leaf's flag cannot be turned off");
    Ok(())
}

#[test]
fn display_shows_grad_fn_and_requires_grad() -> Result<()> {
    let x = leaf(&[1., 2.]);
    assert_eq!(x.to_string(), "tensor([1., 2.], dtype=torch.float64, requires_grad=True)");
    let y = x.mul(&x)?;
    assert_eq!(y.to_string(), "tensor([1., 4.], dtype=torch.float64, grad_fn=<MulBackward0>)");
    Ok(())
}

#[test]
fn gradients_accumulate_until_cleared() -> Result<()> {
    let x = leaf(&[1., 2., 3.]);
    x.mul(&x)?.sum()?.backward()?;
    assert_eq!(grad_of(&x), vec![2., 4., 6.]);
    x.mul(&x)?.sum()?.backward()?;
    assert_eq!(grad_of(&x), vec![4., 8., 12.]);
    x.set_grad(None)?;
    x.sum()?.backward()?;
    assert_eq!(grad_of(&x), vec![1., 1., 1.]);
    x.grad().unwrap().zero_()?;
    assert_eq!(grad_of(&x), vec![0., 0., 0.]);
    Ok(())
}

#[test]
fn backward_needs_a_scalar_or_a_gradient() -> Result<()> {
    let x = leaf(&[1., 2.]);
    let y = x.mul_scalar(2.0)?;
    let e = y.backward().unwrap_err();
    assert_eq!(e.to_string(), "grad can be implicitly created only for scalar outputs");
    y.backward_with(&Tensor::new([1f64, 10.])?)?;
    assert_eq!(grad_of(&x), vec![2., 20.]);
    let e = Tensor::ones([1], DType::F32)?.backward().unwrap_err();
    assert!(e.to_string().contains("does not require grad and does not have a grad_fn"));
    let e = y.backward_with(&Tensor::ones([3], DType::F64)?).unwrap_err();
    assert!(e.to_string().contains("Mismatch in shape"));
    Ok(())
}

#[test]
fn a_freed_graph_cannot_be_used_twice_unless_retained() -> Result<()> {
    let x = leaf(&[1., 2.]);
    let y = x.exp()?.sum()?; // ExpBackward0 saves its output
    y.backward_opts(None, true, false)?;
    y.backward()?; // retained once, so this works and frees it
    assert_eq!(grad_of(&x), vals(&x.exp()?.mul_scalar(2.0)?));
    let e = y.backward().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Autograd);
    assert!(e.to_string().starts_with("Trying to backward through the graph a second time"));
    // A graph without saved tensors can be walked again (as in PyTorch).
    let z = x.add_scalar(1.0)?.sum()?;
    z.backward()?;
    z.backward()?;
    Ok(())
}

#[test]
fn diamond_graph_and_a_tensor_used_many_times() -> Result<()> {
    // y = x*x feeds two branches that meet again: d/dx (sin(y) + y*y*y) = (cos(y) + 3y^2) 2x
    let x = leaf(&[0.5, -1.5]);
    let y = x.mul(&x)?;
    let z = y.sin()?.add(&y.mul(&y)?.mul(&y)?)?.sum()?;
    z.backward()?;
    let want: Vec<f64> =
        [0.5f64, -1.5].iter().map(|&x| (2.0 * x) * ((x * x).cos() + 3.0 * (x * x).powi(2))).collect();
    for (g, w) in grad_of(&x).iter().zip(&want) {
        assert!((g - w).abs() < 1e-12, "{g} vs {w}");
    }
    Ok(())
}

#[test]
fn unused_inputs_and_mixed_requires_grad() -> Result<()> {
    let a = leaf(&[1., 2.]);
    let b = leaf(&[3., 4.]);
    let c = Tensor::new([5f64, 6.])?; // no grad
    let y = a.mul(&c)?.sum()?;
    let e = autograd::grad(&[&y], &[&a, &b], None, Some(true), false, false).unwrap_err();
    assert!(e.to_string().contains("appears to not have been used in the graph"));
    let g = autograd::grad(&[&y], &[&a, &b], None, None, false, true)?;
    assert_eq!(vals(g[0].as_ref().unwrap()), vec![5., 6.]);
    assert!(g[1].is_none());
    // grad() does not touch .grad
    assert!(a.grad().is_none());
    let e = autograd::grad(&[&y], &[&c], None, None, false, true).unwrap_err();
    assert!(e.to_string().contains("does not require grad"));
    Ok(())
}

#[test]
fn a_ten_thousand_op_chain_runs_and_frees_without_stack_overflow() -> Result<()> {
    let x = leaf(&[1.0]);
    let mut y = x.clone();
    for _ in 0..10_000 {
        y = y.mul_scalar(1.0001)?;
    }
    y.sum()?.backward()?;
    let want = 1.0001f64.powi(10_000);
    assert!((grad_of(&x)[0] - want).abs() < 1e-9 * want);
    // dropping an unused 100k-node graph must not recurse either
    let mut z = x.clone();
    for _ in 0..100_000 {
        z = z.add_scalar(1.0)?;
    }
    drop(z);
    Ok(())
}

#[test]
fn independent_backward_passes_on_many_threads() {
    let handles: Vec<_> = (0..4)
        .map(|k| {
            std::thread::spawn(move || {
                let x = leaf(&[k as f64, 1.0]);
                for _ in 0..50 {
                    x.set_grad(None).unwrap();
                    x.mul(&x).unwrap().mul_scalar(k as f64).unwrap().sum().unwrap().backward().unwrap();
                }
                grad_of(&x)
            })
        })
        .collect();
    for (k, h) in handles.into_iter().enumerate() {
        let k = k as f64;
        assert_eq!(h.join().unwrap(), vec![2.0 * k * k, 2.0 * k]);
    }
}

#[test]
fn higher_order_gradients_with_create_graph() -> Result<()> {
    // f = sum(x^3): grad = 3x^2, Hessian-vector product with v: 6 x v
    let x = leaf(&[1., -2., 0.5]);
    let f = x.pow_scalar(3.0)?.sum()?;
    let g = autograd::grad(&[&f], &[&x], None, None, true, false)?.remove(0).unwrap();
    assert!(g.requires_grad(), "create_graph records the gradient computation");
    assert_eq!(vals(&g), vec![3., 12., 0.75]);
    let v = Tensor::new([1f64, 1., 2.])?;
    let hv = autograd::grad(&[&g], &[&x], Some(&[&v]), None, false, false)?.remove(0).unwrap();
    assert_eq!(vals(&hv), vec![6., -12., 6.]);
    // a gradient penalty: d/dx ||grad||^2 accumulated through backward
    let y = x.pow_scalar(3.0)?.sum()?;
    let g = autograd::grad(&[&y], &[&x], None, None, true, false)?.remove(0).unwrap();
    g.square()?.sum()?.backward()?; // d/dx sum(9 x^4) = 36 x^3
    assert_eq!(grad_of(&x), vec![36., -288., 4.5]);
    Ok(())
}

#[test]
fn grad_modes_are_scoped_nested_and_per_thread() -> Result<()> {
    let x = leaf(&[1.]);
    {
        let _a = autograd::no_grad();
        assert!(!autograd::is_grad_enabled());
        assert!(!x.mul(&x)?.requires_grad());
        {
            let _b = autograd::enable_grad();
            assert!(x.mul(&x)?.requires_grad());
        }
        assert!(!x.mul(&x)?.requires_grad());
        // other threads keep their own mode
        std::thread::spawn(|| assert!(autograd::is_grad_enabled())).join().unwrap();
    }
    assert!(autograd::is_grad_enabled());
    {
        let _i = autograd::inference_mode();
        let _e = autograd::enable_grad(); // does not leave inference mode
        assert!(!x.mul(&x)?.requires_grad());
        assert!(autograd::is_inference_mode_enabled());
    }
    {
        let _s = autograd::set_grad_enabled(false);
        assert!(!x.exp()?.requires_grad());
    }
    assert!(x.exp()?.requires_grad());
    Ok(())
}

const INFERENCE_SAVE: &str = "Inference tensors cannot be saved for backward. Please do not use Tensors created in inference mode in computation tracked by autograd. To work around this, you can make a clone to get a normal tensor and use it in autograd, or use `torch.no_grad()` instead of `torch.inference_mode()`.";
const INFERENCE_INPLACE: &str = "Inplace update to inference tensor outside InferenceMode is not allowed.You can make a clone to get a normal tensor before doing inplace update.See https://github.com/pytorch/rfcs/pull/17 for more details.";

fn assert_autograd_error<T: std::fmt::Debug>(r: Result<T>, message: &str) {
    let e = r.expect_err("expected an error");
    assert_eq!(e.kind(), ErrorKind::Autograd, "{e}");
    assert!(e.to_string().contains(message), "{e}");
}

#[test]
fn tensors_made_in_inference_mode_are_inference_tensors() -> Result<()> {
    let normal = Tensor::ones([3], DType::F32)?;
    let (x, v, y, normal_view) = {
        let _g = autograd::inference_mode();
        let x = Tensor::ones([3], DType::F32)?;
        (x.clone(), x.narrow(0, 0, 2)?, x.mul_scalar(2.0)?, normal.narrow(0, 0, 2)?)
    };
    assert!(x.is_inference() && v.is_inference() && y.is_inference());
    // a view of a normal tensor stays normal, even when made in inference mode
    assert!(!normal.is_inference() && !normal_view.is_inference());
    // no_grad does not make inference tensors
    let z = {
        let _g = autograd::no_grad();
        Tensor::ones([2], DType::F32)?
    };
    assert!(!z.is_inference());
    // ops outside inference mode on inference tensors make normal tensors; views stay inference
    assert!(!x.add(&x)?.is_inference());
    assert!(x.narrow(0, 1, 1)?.is_inference() && x.detach().is_inference());
    assert!(!x.deep_clone()?.is_inference());
    Ok(())
}

/// Three ones made in inference mode: an inference tensor.
fn inference_ones(dtype: DType) -> Result<Tensor> {
    let _g = autograd::inference_mode();
    Tensor::ones([3], dtype)
}

#[test]
fn inference_tensors_cannot_be_saved_for_backward() -> Result<()> {
    let x = inference_ones(DType::F64)?;
    let w = leaf(&[1., 2., 3.]);
    // mul saves its inputs: refused when the graph is recorded
    assert_autograd_error(w.mul(&x), INFERENCE_SAVE);
    assert_autograd_error(x.mul(&w), INFERENCE_SAVE);
    // add saves nothing: allowed, and the gradient flows to w
    w.add(&x)?.sum()?.backward()?;
    assert_eq!(grad_of(&w), vec![1., 1., 1.]);
    // without recording it is fine, and a clone is a normal tensor
    {
        let _g = autograd::no_grad();
        w.mul(&x)?;
    }
    w.mul(&x.deep_clone()?)?.sum()?.backward()?;
    assert_eq!(grad_of(&w), vec![2., 2., 2.]);
    Ok(())
}

#[test]
fn inference_tensors_cannot_be_updated_in_place_outside_inference_mode() -> Result<()> {
    let x = inference_ones(DType::F32)?;
    assert_autograd_error(x.add_scalar_(1.0), INFERENCE_INPLACE);
    assert_autograd_error(x.mul_(&x), INFERENCE_INPLACE);
    assert_autograd_error(x.zero_(), INFERENCE_INPLACE);
    assert_autograd_error(x.fill_(2.0), INFERENCE_INPLACE);
    assert_autograd_error(x.copy_(&Tensor::zeros([3], DType::F32)?), INFERENCE_INPLACE);
    assert_autograd_error(x.narrow(0, 0, 1)?.relu_(), INFERENCE_INPLACE); // through a view
    assert_autograd_error(Tensor::ones([3], DType::F32)?.exp_out(&x), INFERENCE_INPLACE); // out=
    {
        let _g = autograd::no_grad(); // no_grad is not enough
        assert_autograd_error(x.add_scalar_(1.0), INFERENCE_INPLACE);
    }
    assert_eq!(x.to_vec::<f32>()?, vec![1., 1., 1.]); // nothing was written
    {
        let _g = autograd::inference_mode(); // inside inference mode it is allowed
        x.add_scalar_(1.0)?;
    }
    assert_eq!(x.to_vec::<f32>()?, vec![2., 2., 2.]);
    // a normal tensor may be updated in place from an inference tensor, and inside inference mode
    let n = Tensor::zeros([3], DType::F32)?;
    n.add_(&x)?;
    {
        let _g = autograd::inference_mode();
        n.add_scalar_(1.0)?;
    }
    assert!(!n.is_inference());
    assert_eq!(n.to_vec::<f32>()?, vec![3., 3., 3.]);
    Ok(())
}

#[test]
fn requires_grad_on_an_inference_tensor_only_inside_inference_mode() -> Result<()> {
    let x = inference_ones(DType::F32)?;
    assert_autograd_error(
        x.requires_grad_(true),
        "Setting requires_grad=True on inference tensor outside InferenceMode is not allowed.",
    );
    assert!(!x.requires_grad_(false)?.requires_grad());
    {
        let _g = autograd::inference_mode();
        assert!(x.requires_grad_(true)?.requires_grad());
    }
    Ok(())
}

#[test]
fn detach_shares_data_but_not_history() -> Result<()> {
    let x = leaf(&[1., 2.]);
    let y = x.mul_scalar(2.0)?;
    let d = y.detach();
    assert!(!d.requires_grad() && d.is_leaf());
    assert!(d.same_storage(&y));
    let z = y.mul_scalar(1.0)?;
    z.detach_()?;
    assert!(!z.requires_grad() && z.grad_fn().is_none());
    Ok(())
}

#[test]
fn retain_grad_keeps_a_non_leaf_gradient() -> Result<()> {
    let x = leaf(&[1., 2.]);
    let y = x.mul_scalar(3.0)?;
    y.retain_grad()?;
    assert!(y.retains_grad());
    y.mul(&y)?.sum()?.backward()?;
    assert_eq!(grad_of(&y), vec![6., 12.]);
    assert_eq!(grad_of(&x), vec![18., 36.]);
    assert!(Tensor::ones([1], DType::F32)?.retain_grad().is_err());
    Ok(())
}

#[test]
fn tensor_hooks_see_and_replace_gradients_until_removed() -> Result<()> {
    let x = leaf(&[1., 2.]);
    let y = x.mul_scalar(2.0)?;
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let s = seen.clone();
    let h1 = y.register_hook(move |g| {
        s.lock().unwrap().push(vals(g));
        Ok(None)
    })?;
    let h2 = x.register_hook(|g| Ok(Some(g.mul_scalar(10.0)?)))?;
    y.sum()?.backward_opts(None, true, false)?;
    assert_eq!(*seen.lock().unwrap(), vec![vec![1., 1.]]);
    assert_eq!(grad_of(&x), vec![20., 20.]);
    h1.remove();
    h2.remove();
    x.set_grad(None)?;
    y.sum()?.backward()?;
    assert_eq!(seen.lock().unwrap().len(), 1, "removed hook is not called");
    assert_eq!(grad_of(&x), vec![2., 2.]);
    // a post-accumulate hook sees the leaf after its .grad was updated
    let got = std::sync::Arc::new(std::sync::Mutex::new(None));
    let g2 = got.clone();
    x.register_post_accumulate_grad_hook(move |t| {
        *g2.lock().unwrap() = Some(vals(&t.grad().unwrap()));
        Ok(())
    })?;
    x.sum()?.backward()?;
    assert_eq!(got.lock().unwrap().clone().unwrap(), vec![3., 3.]);
    assert!(y.register_post_accumulate_grad_hook(|_| Ok(())).is_err());
    Ok(())
}

#[test]
fn in_place_ops_are_checked_like_pytorch() -> Result<()> {
    // on a leaf that requires grad: refused (allowed under no_grad, as optimizers do)
    let w = leaf(&[1., 2.]);
    let e = w.add_scalar_(1.0).unwrap_err();
    assert_eq!(e.to_string(), "a leaf Variable that requires grad is being used in an in-place operation.");
    {
        let _g = autograd::no_grad();
        w.add_scalar_(1.0)?;
    }
    assert_eq!(vals(&w), vec![2., 3.]);
    // a saved tensor modified in place: backward refuses
    let y = w.exp()?; // saves its output y
    let z = y.sum()?;
    y.mul_scalar_(2.0)?;
    let e = z.backward().unwrap_err();
    assert!(e.to_string().starts_with("one of the variables needed for gradient computation has been modified by an inplace operation: [torch.DoubleTensor [2]], which is output 0 of ExpBackward0, is at version 1; expected version 0 instead."), "{e}");
    // in-place on a non-leaf is recorded: d/dw sum((w * 3) += w) = 4
    let v = leaf(&[1., 2.]);
    let u = v.mul_scalar(3.0)?;
    u.add_(&v)?;
    assert_eq!(u.grad_fn().unwrap().name(), "AddBackward0");
    u.sum()?.backward()?;
    assert_eq!(grad_of(&v), vec![4., 4.]);
    // out= forms refuse inputs that require grad
    let out = Tensor::empty([2], DType::F64)?;
    assert!(v.add_out(&v, &out).unwrap_err().to_string().contains("don't support automatic differentiation"));
    Ok(())
}

/// y = x^3 with a hand-written backward.
struct Cube;
impl Function for Cube {
    fn forward(&self, ctx: &mut FunctionCtx, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        assert!(!autograd::is_grad_enabled(), "forward runs without recording");
        ctx.save_for_backward(&[inputs[0]]);
        ctx.save_value("p", 3.0f64);
        Ok(vec![inputs[0].pow_scalar(3.0)?])
    }
    fn backward(&self, ctx: &FunctionCtx, grads: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        let x = &ctx.saved_tensors()[0];
        let p: f64 = *ctx.value("p")?;
        Ok(vec![Some(grads[0].mul(&x.pow_scalar(p - 1.0)?.mul_scalar(p)?)?)])
    }
}

#[test]
fn custom_functions_are_differentiable_twice() -> Result<()> {
    let x = leaf(&[2., -1.]);
    let y = autograd::apply(Cube, &[&x])?.remove(0);
    assert_eq!(y.grad_fn().unwrap().name(), "CubeBackward");
    let g = autograd::grad(&[&y.sum()?], &[&x], None, None, true, false)?.remove(0).unwrap();
    assert_eq!(vals(&g), vec![12., 3.]);
    g.sum()?.backward()?; // d/dx 3x^2 = 6x through the custom backward
    assert_eq!(grad_of(&x), vec![12., -6.]);
    autograd::gradcheck(|xs| Ok(autograd::apply(Cube, &[&xs[0]])?.remove(0)), &[x], Default::default())?;
    Ok(())
}

#[test]
fn a_wrong_custom_backward_is_caught() -> Result<()> {
    struct Bad;
    impl Function for Bad {
        fn forward(&self, _: &mut FunctionCtx, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
            Ok(vec![inputs[0].mul_scalar(2.0)?])
        }
        fn backward(&self, _: &FunctionCtx, grads: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
            Ok(vec![Some(grads[0].narrow(0, 0, 1)?)])
        }
    }
    let x = leaf(&[1., 2.]);
    let e = autograd::apply(Bad, &[&x])?.remove(0).sum()?.backward().unwrap_err();
    assert!(e.to_string().contains("returned an invalid gradient at index 0"), "{e}");
    // and gradcheck notices a backward that is wrong but well-shaped
    struct Off;
    impl Function for Off {
        fn forward(&self, _: &mut FunctionCtx, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
            Ok(vec![inputs[0].mul_scalar(2.0)?])
        }
        fn backward(&self, _: &FunctionCtx, grads: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
            Ok(vec![Some(grads[0].mul_scalar(2.1)?)])
        }
    }
    let e =
        autograd::gradcheck(|xs| Ok(autograd::apply(Off, &[&xs[0]])?.remove(0)), &[x], Default::default())
            .unwrap_err();
    assert!(e.to_string().starts_with("Jacobian mismatch for output 0 with respect to input 0"));
    Ok(())
}

#[test]
fn anomaly_mode_names_the_op_that_made_nan() -> Result<()> {
    let x = leaf(&[0.]);
    let y = x.sqrt()?.mul_scalar(0.0)?.sum()?;
    {
        let _a = autograd::detect_anomaly();
        let e = y.backward_opts(None, true, false).unwrap_err();
        assert!(
            e.to_string().contains("Function 'SqrtBackward0' returned nan values in its 0th output"),
            "{e}"
        );
    }
    // without anomaly mode the NaN simply flows into .grad, as in PyTorch
    y.backward()?;
    assert!(grad_of(&x)[0].is_nan());
    Ok(())
}

#[test]
fn in_place_ops_on_views_rewrite_the_base_history() -> Result<()> {
    // y = 2x; y[:2] *= 3  =>  d sum(y) / dx = [6, 6, 2, 2]
    let x = leaf(&[1., 2., 3., 4.]);
    let y = x.mul_scalar(2.0)?;
    y.narrow(0, 0, 2)?.mul_scalar_(3.0)?;
    assert_eq!(vals(&y), vec![6., 12., 6., 8.]);
    assert_eq!(y.grad_fn().unwrap().name(), "CopySlices");
    y.mul(&Tensor::new([1f64, 10., 100., 1000.])?)?.sum()?.backward()?;
    assert_eq!(grad_of(&x), vec![6., 60., 200., 2000.]);

    // writing a tensor that requires grad into a slice of a plain buffer (an RNN output loop)
    let w = leaf(&[1., 2., 3.]);
    let out = Tensor::zeros([2, 3], DType::F64)?;
    for i in 0..2 {
        out.select(0, i)?.copy_(&w.mul_scalar((i + 1) as f64)?)?;
    }
    assert!(out.requires_grad());
    let c = Tensor::new([[1f64, 2., 3.], [4., 5., 6.]])?;
    out.mul(&c)?.sum()?.backward()?;
    // d/dw sum_i (i+1) w * c[i] = c[0] + 2 c[1]
    assert_eq!(grad_of(&w), vec![9., 12., 15.]);

    // a view of a leaf that requires grad cannot be modified in place
    let e = x.narrow(0, 0, 1)?.add_scalar_(1.0).unwrap_err();
    assert_eq!(
        e.to_string(),
        "a view of a leaf Variable that requires grad is being used in an in-place operation."
    );
    Ok(())
}

#[test]
fn other_views_of_a_base_see_an_in_place_op_through_one_of_them() -> Result<()> {
    // PyTorch: base = x.clone(); v1 = base[0]; col = base[:, 1]; v1.mul_(2)
    //   -> col.grad_fn is AsStridedBackward0, and col's gradient sees the doubling
    let x = Tensor::new([[1f64, 2., 3.], [4., 5., 6.]])?.requires_grad_(true)?;
    let base = x.deep_clone()?;
    let (v1, v2, col) = (base.select(0, 0)?, base.select(0, 1)?, base.select(1, 1)?);
    assert_eq!(col.grad_fn().unwrap().name(), "SelectBackward0");
    v1.mul_scalar_(2.0)?;
    assert_eq!(base.grad_fn().unwrap().name(), "CopySlices");
    assert_eq!(v1.grad_fn().unwrap().name(), "AsStridedBackward0");
    assert_eq!(v2.grad_fn().unwrap().name(), "AsStridedBackward0");
    assert_eq!(col.grad_fn().unwrap().name(), "AsStridedBackward0");
    col.mul(&Tensor::new([1f64, 10.])?)?.sum()?.backward()?;
    assert_eq!(grad_of(&x), vec![0., 2., 0., 0., 10., 0.]);

    // the brief's case: v2 and base in one loss after v1 *= 2
    let x = Tensor::new([[1f64, 2., 3.], [4., 5., 6.]])?.requires_grad_(true)?;
    let base = x.deep_clone()?;
    let (v1, v2) = (base.select(0, 0)?, base.select(0, 1)?);
    v1.mul_scalar_(2.0)?;
    let loss = v2.mul_scalar(3.0)?.sum()?.add(&base.square()?.sum()?)?;
    loss.backward()?;
    // d/dx: row 0 -> 2 * (2x) * 2 = 8x, row 1 -> 3 + 2x
    assert_eq!(grad_of(&x), vec![8., 16., 24., 11., 13., 15.]);

    // an in-place op on the base itself: a view of a view regenerates from the new history
    let x = leaf(&[1., 2., 3., 4.]);
    let base = x.deep_clone()?;
    let b = base.narrow(0, 1, 2)?.narrow(0, 0, 1)?;
    base.mul_scalar_(2.0)?;
    assert_eq!(b.grad_fn().unwrap().name(), "AsStridedBackward0");
    b.sum()?.backward()?;
    assert_eq!(grad_of(&x), vec![0., 2., 0., 0.]);

    // a later in-place op through a stale view builds on the latest history
    let x = leaf(&[1., 2., 3., 4.]);
    let base = x.deep_clone()?;
    let (lo, mid) = (base.narrow(0, 0, 2)?, base.narrow(0, 1, 2)?);
    lo.mul_scalar_(3.0)?; // base = [3, 6, 3, 4] x-wise
    mid.mul_scalar_(5.0)?; // base = [3, 30, 15, 4]
    base.sum()?.backward()?;
    assert_eq!(grad_of(&x), vec![3., 15., 5., 1.]);
    Ok(())
}

#[test]
fn a_view_of_a_plain_base_requires_grad_once_the_base_gains_history() -> Result<()> {
    // PyTorch: base = zeros(2, 3); col = base[:, 0]; base[0].copy_(h)
    //   -> col.requires_grad is True, col.grad_fn is AsStridedBackward0
    let h = leaf(&[1., 2., 3.]);
    let base = Tensor::zeros([2, 3], DType::F64)?;
    let (col, row1) = (base.select(1, 0)?, base.select(0, 1)?);
    assert!(!col.requires_grad());
    base.select(0, 0)?.copy_(&h)?;
    assert!(base.requires_grad());
    assert!(col.requires_grad() && row1.requires_grad());
    assert_eq!(col.grad_fn().unwrap().name(), "AsStridedBackward0");
    col.mul(&Tensor::new([5f64, 7.])?)?.sum()?.backward()?;
    assert_eq!(grad_of(&h), vec![5., 0., 0.]);
    // writes that bring no history leave other views as they were
    let plain = Tensor::zeros([2, 2], DType::F64)?;
    let v = plain.select(0, 1)?;
    plain.select(0, 0)?.fill_(1.0)?;
    assert!(!v.requires_grad() && !plain.requires_grad());
    Ok(())
}

#[test]
fn in_place_through_a_view_of_a_transposed_base() -> Result<()> {
    // A transposed buffer cut off from its source with detach (so it is its own base, and not
    // contiguous), then written through views with tensors that require grad; PyTorch 2.15
    // gives the same gradients (h.grad = [8, 10, 14]).
    let h = leaf(&[1., 2., 3.]);
    let buf = Tensor::zeros([3, 2], DType::F64)?.t()?.detach();
    assert!(!buf.is_contiguous());
    buf.select(0, 1)?.copy_(&h.mul_scalar(2.0)?)?;
    let other = buf.select(1, 2)?; // made after: sees the new history
    assert_eq!(buf.grad_fn().unwrap().name(), "CopySlices");
    let c = Tensor::new([[1f64, 2., 3.], [4., 5., 6.]])?;
    buf.mul(&c)?.sum()?.add(&other.sum()?)?.backward()?;
    // d/dh: 2 * c[1] + 2 * [0, 0, 1]
    assert_eq!(grad_of(&h), vec![8., 10., 14.]);
    autograd::gradcheck(
        |xs: &[Tensor]| {
            let buf = Tensor::zeros([3, 2], DType::F64)?.t()?.detach();
            buf.select(0, 0)?.copy_(&xs[0].sin()?)?;
            buf.narrow(1, 1, 2)?.mul_(&xs[0].narrow(0, 0, 2)?.unsqueeze(0)?)?;
            buf.square()?.sum()
        },
        &[leaf(&[0.3, -0.7, 1.1])],
        Default::default(),
    )?;
    Ok(())
}

#[test]
fn in_place_on_a_view_passes_gradcheck_and_gradgradcheck() -> Result<()> {
    let x = leaf(&[0.3, -1.2, 0.7, 2.0]);
    let f = |xs: &[Tensor]| -> Result<Tensor> {
        let y = xs[0].mul_scalar(2.0)?;
        y.narrow(0, 0, 2)?.mul_(&xs[0].narrow(0, 2, 2)?)?;
        y.square()?.sum()
    };
    autograd::gradcheck(f, std::slice::from_ref(&x), Default::default())?;
    autograd::gradgradcheck(f, &[x], None, Default::default())?;
    Ok(())
}

/// `y.addmm_(m1, m2, beta, alpha)` on a non-leaf is recorded as `AddmmBackward0`, like the
/// out-of-place op: `b.grad` is `beta`, `m1.grad` is `alpha * g @ m2^T`.
#[test]
fn addmm_in_place_is_recorded_like_addmm() -> Result<()> {
    let b = Tensor::randn([2, 3], DType::F64)?.requires_grad_(true)?;
    let m1 = Tensor::randn([2, 4], DType::F64)?.requires_grad_(true)?;
    let m2 = Tensor::randn([4, 3], DType::F64)?;
    let y = b.mul_scalar(1.0)?;
    y.addmm_(&m1, &m2, 2.0, 3.0)?;
    assert_eq!(y.grad_fn().unwrap().name(), "AddmmBackward0");
    assert_eq!(
        b.baddbmm(&m1.unsqueeze(0)?, &m2.unsqueeze(0)?, 1, 1)?.grad_fn().unwrap().name(),
        "BaddbmmBackward0"
    );
    let want = b.detach().mul_scalar(2.0)?.add(&m1.detach().mm(&m2)?.mul_scalar(3.0)?)?;
    assert!(y.detach().allclose(&want, 1e-12, 1e-12, false)?);
    y.sum()?.backward()?;
    assert_eq!(b.grad().unwrap().to_vec::<f64>()?, vec![2.0; 6]);
    let g = Tensor::ones([2, 3], DType::F64)?.mm(&m2.t()?)?.mul_scalar(3.0)?;
    assert!(m1.grad().unwrap().allclose(&g, 1e-12, 1e-12, false)?);
    // On a leaf that requires grad it fails, as every in-place op does.
    assert_eq!(b.addmm_(&m1, &m2, 1.0, 1.0).unwrap_err().kind(), ErrorKind::Autograd);
    let f = |xs: &[Tensor]| -> Result<Tensor> {
        let y = xs[0].mul_scalar(1.5)?;
        y.addmm_(&xs[1], &m2, 2.0, 3.0)?;
        y.square()?.sum()
    };
    autograd::gradcheck(
        f,
        &[b.detach().requires_grad_(true)?, m1.detach().requires_grad_(true)?],
        Default::default(),
    )?;
    autograd::gradgradcheck(
        f,
        &[b.detach().requires_grad_(true)?, m1.detach().requires_grad_(true)?],
        None,
        Default::default(),
    )
}

/// Random in-place fills on a non-leaf are recorded with PyTorch's node names; the new values
/// do not depend on the old ones, so the gradient through them is zero.
#[test]
fn random_fills_in_place_pass_a_zero_gradient() -> Result<()> {
    let a = Tensor::randn([3], DType::F32)?.requires_grad_(true)?;
    type Fill<'a> = &'a dyn Fn(&Tensor) -> Result<()>;
    let cases: [(&str, Fill); 5] = [
        ("UniformBackward0", &|x| x.uniform_(0.0, 1.0, None).map(drop)),
        ("NormalBackward0", &|x| x.normal_(0.0, 1.0, None).map(drop)),
        ("BernoulliBackward2", &|x| x.bernoulli_(0.5, None).map(drop)),
        ("RandomBackward0", &|x| x.random_(0, Some(10), None).map(drop)),
        ("RandomBackward2", &|x| x.random_(0, None, None).map(drop)),
    ];
    for (node, fill) in cases {
        let x = a.mul_scalar(2.0)?;
        fill(&x)?;
        assert_eq!(x.grad_fn().unwrap().name(), node);
        a.set_grad(None)?;
        x.mul_scalar(5.0)?.sum()?.backward()?;
        assert_eq!(a.grad().unwrap().to_vec::<f32>()?, vec![0.0; 3], "{node}");
    }
    // A leaf that requires grad refuses, as in PyTorch (init functions use no_grad).
    assert_eq!(a.normal_(0.0, 1.0, None).unwrap_err().kind(), ErrorKind::Autograd);
    Ok(())
}

/// PyTorch forbids an in-place op, with grad mode on, on a view made under `no_grad` whenever
/// the op would be recorded: the view's base required grad, or the other operand does.
#[test]
fn a_view_made_under_no_grad_refuses_a_recorded_in_place_op() -> Result<()> {
    let a = Tensor::randn([3], DType::F32)?.requires_grad_(true)?;
    let ones = Tensor::ones([2], DType::F32)?;
    let ones_rg = Tensor::ones([2], DType::F32)?.requires_grad_(true)?;
    let plain = Tensor::randn([3], DType::F32)?;
    for (base, other, refused) in [
        (a.clone(), &ones, true),
        (a.clone(), &ones_rg, true),
        (a.mul_scalar(2.0)?, &ones, true),
        (plain.clone(), &ones, false),
        (plain.clone(), &ones_rg, true),
    ] {
        let v = {
            let _g = autograd::no_grad();
            base.narrow(0, 0, 2)?
        };
        let r = v.mul_(other);
        assert_eq!(r.is_err(), refused, "base requires grad: {}", base.requires_grad());
        if let Err(e) = r {
            assert_eq!(e.kind(), ErrorKind::Autograd);
            assert!(e
                .to_string()
                .contains("A view was created in no_grad mode and is being modified inplace"));
        }
        // Inside no_grad the same op is fine.
        let _g = autograd::no_grad();
        v.mul_(other)?;
    }
    Ok(())
}

/// Backward passes on several threads into one leaf each add their whole contribution: the
/// read of `.grad` and the write of the sum are one step (PyTorch's `AccumulateGrad` holds a
/// mutex across them). Data-parallel training on threads rests on this. Before the fix, about
/// one round in 2,000 lost a thread's gradient (`[1, 1, 1]` instead of `[3, 3, 3]`). Each
/// round starts from `.grad = None` (the first-gradient path) or from a zero gradient (the
/// in-place add), and counts the post-accumulate hook's calls: one per contribution.
#[test]
fn concurrent_backward_into_one_leaf_loses_no_gradient() -> Result<()> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Barrier};
    const THREADS: usize = 4;
    let x = leaf(&[1., 2., 3.]);
    let calls = Arc::new(AtomicUsize::new(0));
    let c = calls.clone();
    let _h = x.register_post_accumulate_grad_hook(move |_| {
        c.fetch_add(1, Ordering::Relaxed);
        Ok(())
    })?;
    let start = Arc::new(Barrier::new(THREADS + 1));
    let done = Arc::new(Barrier::new(THREADS + 1));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let workers: Vec<_> = (0..THREADS)
        .map(|k| {
            let (x, start, done, stop) = (x.clone(), start.clone(), done.clone(), stop.clone());
            std::thread::spawn(move || -> Result<()> {
                loop {
                    start.wait();
                    if stop.load(Ordering::Relaxed) {
                        return Ok(());
                    }
                    x.mul_scalar(1.0 + k as f64)?.sum()?.backward()?;
                    done.wait();
                }
            })
        })
        .collect();
    let expected = (1..=THREADS).sum::<usize>() as f64;
    let (mut rounds, mut lost) = (0usize, 0usize);
    let began = std::time::Instant::now();
    // Bounded: at most 40,000 rounds or 4 seconds, whichever comes first.
    while rounds < 40_000 && began.elapsed() < std::time::Duration::from_secs(4) {
        let first_path = rounds % 2 == 0;
        x.set_grad(if first_path { None } else { Some(Tensor::zeros([3], DType::F64)?) })?;
        start.wait();
        done.wait();
        if grad_of(&x) != vec![expected; 3] {
            lost += 1;
        }
        rounds += 1;
    }
    stop.store(true, Ordering::Relaxed);
    start.wait();
    for w in workers {
        w.join().unwrap()?;
    }
    assert_eq!(lost, 0, "{lost} of {rounds} rounds lost a thread's gradient");
    assert_eq!(
        calls.load(Ordering::Relaxed),
        rounds * THREADS,
        "post-accumulate hooks: one call per contribution"
    );
    assert!(rounds >= 1_000, "only {rounds} rounds ran");
    Ok(())
}

/// A tensor with no elements has no two elements at one memory location, so expanding an
/// empty tensor and writing into it (as the backward of the expand does, through `copy_`)
/// is fine, as in PyTorch.
#[test]
fn backward_through_an_expanded_empty_tensor() -> Result<()> {
    let a = Tensor::zeros([1, 0], DType::F64)?.requires_grad_(true)?;
    let e = a.unsqueeze(0)?.expand([2isize, -1, -1])?;
    pyrite_core::einsum("...i,...i->...", &[&e, &a])?.sum()?.backward()?;
    assert_eq!(a.grad().unwrap().dims(), &[1, 0]);
    // writing into an expanded empty tensor is allowed; into an expanded non-empty one is not
    let z = Tensor::zeros([0], DType::F32)?.unsqueeze(0)?.expand([3isize, -1])?;
    z.copy_(&Tensor::zeros([3, 0], DType::F32)?)?;
    let w = Tensor::zeros([1], DType::F32)?.expand([3])?;
    let err = w.add_out(&w, &w).unwrap_err().to_string();
    assert!(
        err.contains("more than one element of the written-to tensor refers to a single memory location"),
        "{err}"
    );
    Ok(())
}

/// PyTorch: "hook ... has changed the type of value". A hook may replace a gradient, but not
/// with one of another dtype or device (nor shape): the engine would otherwise cast silently.
#[test]
fn a_hook_that_changes_the_gradients_dtype_is_an_error() -> Result<()> {
    let x = leaf(&[1., 2.]);
    let _h = x.register_hook(|g| Ok(Some(g.to_dtype(DType::I64)?)))?;
    let err = x.mul_scalar(2.0)?.sum()?.backward().unwrap_err();
    assert!(err.to_string().contains("has changed the type of value (was torch.float64"), "{err}");
    assert!(x.grad().is_none());
    // on a non-leaf too
    let y = leaf(&[1., 2.]);
    let z = y.mul_scalar(2.0)?;
    let _h = z.register_hook(|g| Ok(Some(g.to_dtype(DType::F32)?)))?;
    let err = z.sum()?.backward().unwrap_err();
    assert!(err.to_string().contains("changed the type of value"), "{err}");
    Ok(())
}
