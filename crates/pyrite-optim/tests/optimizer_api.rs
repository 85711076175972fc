//! The optimizer base as a PyTorch user meets it: parameter groups and their defaults, the
//! checks PyTorch makes, parameters without gradients, `zero_grad`, step hooks, closures and
//! the state_dict's structure.

use pyrite::nn::{Linear, Module};
use pyrite::optim::*;
use pyrite::{DType, Tensor};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

fn leaf<const N: usize>(v: [f64; N]) -> Tensor {
    Tensor::new(v).unwrap().requires_grad_(true).unwrap()
}

fn err<T>(r: pyrite::Result<T>) -> String {
    match r {
        Ok(_) => panic!("expected an error"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn groups_take_the_defaults_for_what_they_do_not_set() {
    let (a, b) = (leaf([1.0]), leaf([2.0]));
    let mut opt = Adam::with_groups(
        vec![ParamGroup::new(vec![a.clone()]).with("lr", 0.5).with("amsgrad", true)],
        AdamOptions { lr: 0.1, betas: (0.8, 0.9), ..Default::default() },
    )
    .unwrap();
    opt.add_param_group(ParamGroup::new(vec![b.clone()]).with("weight_decay", 0.25)).unwrap();
    let g = opt.param_groups();
    assert_eq!((g[0].lr, g[1].lr), (0.5, 0.1));
    assert!(g[0].bool("amsgrad").unwrap() && !g[1].bool("amsgrad").unwrap());
    assert_eq!(g[1].pair("betas").unwrap(), (0.8, 0.9));
    assert_eq!(g[1].f64("weight_decay").unwrap(), 0.25);
    assert_eq!(g[0].f64("weight_decay").unwrap(), 0.0);
    // A user (or a scheduler) changes a group's lr between steps.
    opt.param_groups_mut()[1].lr = 0.01;
    assert_eq!(opt.param_groups()[1].lr, 0.01);
}

#[test]
fn pytorchs_checks_are_errors_with_pytorchs_messages() {
    let a = leaf([1.0, 2.0]);
    let non_leaf = a.mul_scalar(2.0).unwrap();
    assert!(err(SGD::new(vec![non_leaf], SGDOptions::default())).contains("can't optimize a non-leaf Tensor"));
    assert!(err(SGD::new(vec![], SGDOptions::default())).contains("optimizer got an empty parameter list"));
    let two = SGD::with_groups(
        vec![ParamGroup::new(vec![a.clone()]), ParamGroup::new(vec![a.clone()])],
        SGDOptions::default(),
    );
    assert!(err(two).contains("some parameters appear in more than one parameter group"));
    assert!(err(SGD::new(vec![a.clone(), a.clone()], SGDOptions::default())).contains("same parameter twice"));
    assert!(err(SGD::new(vec![a.clone()], SGDOptions { lr: -1.0, ..Default::default() }))
        .contains("Invalid learning rate: -1"));
    assert!(err(SGD::new(vec![a.clone()], SGDOptions { nesterov: true, ..Default::default() }))
        .contains("Nesterov"));
    assert!(err(Adam::new(vec![a.clone()], AdamOptions { betas: (1.0, 0.9), ..Default::default() }))
        .contains("Invalid beta parameter at index 0: 1"));
    let ints = Tensor::new([1i64, 2]).unwrap();
    assert!(err(SGD::new(vec![ints], SGDOptions::default())).contains("floating-point"));
    // f16 parameters are refused when stepping, with the reason.
    let h = Tensor::new([1.0f32]).unwrap().to_dtype(DType::F16).unwrap().requires_grad_(true).unwrap();
    let mut opt = SGD::new(vec![h.clone()], SGDOptions { lr: 0.1, ..Default::default() }).unwrap();
    h.mul_scalar(2.0).unwrap().sum().unwrap().backward().unwrap();
    assert!(err(opt.step()).contains("F16"));
}

#[test]
fn parameters_without_a_gradient_are_skipped() {
    let (a, b) = (leaf([1.0]), leaf([5.0]));
    let mut opt =
        Adam::new(vec![a.clone(), b.clone()], AdamOptions { lr: 0.1, ..Default::default() }).unwrap();
    a.square().unwrap().sum().unwrap().backward().unwrap();
    opt.step().unwrap();
    assert_eq!(b.to_vec::<f64>().unwrap(), [5.0]);
    assert!(opt.state(&b).is_none(), "no state for a parameter never stepped");
    assert!((a.to_vec::<f64>().unwrap()[0] - 0.9).abs() < 1e-8); // lr * g / (|g| + eps)
    let st = opt.state(&a).unwrap();
    assert!(matches!(st["step"], StateValue::Float(s) if s == 1.0));
    assert!(
        st.contains_key("exp_avg") && st.contains_key("exp_avg_sq") && !st.contains_key("max_exp_avg_sq")
    );
}

#[test]
fn zero_grad_sets_to_none_or_zeroes_in_place() {
    let a = leaf([1.0, 2.0]);
    let opt = SGD::new(vec![a.clone()], SGDOptions::default()).unwrap();
    a.square().unwrap().sum().unwrap().backward().unwrap();
    opt.zero_grad_with(false).unwrap();
    assert_eq!(a.grad().unwrap().to_vec::<f64>().unwrap(), [0.0, 0.0]);
    opt.zero_grad().unwrap();
    assert!(a.grad().is_none());
}

#[test]
fn step_hooks_run_around_each_step_until_removed() {
    let a = leaf([1.0]);
    let mut opt = SGD::new(vec![a.clone()], SGDOptions { lr: 0.1, ..Default::default() }).unwrap();
    let (pre, post) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let p2 = pre.clone();
    let h = opt.register_step_pre_hook(move |groups| {
        p2.fetch_add(1, Ordering::SeqCst);
        groups[0].lr = 1.0; // a pre hook may change the step it precedes
    });
    let q2 = post.clone();
    let _keep = opt.register_step_post_hook(move |_| {
        q2.fetch_add(1, Ordering::SeqCst);
    });
    a.sum().unwrap().backward().unwrap();
    opt.step().unwrap();
    assert_eq!(a.to_vec::<f64>().unwrap(), [0.0], "the pre hook's lr of 1.0 was used");
    h.remove();
    opt.step().unwrap();
    assert_eq!((pre.load(Ordering::SeqCst), post.load(Ordering::SeqCst)), (1, 2));
}

#[test]
fn step_with_closure_evaluates_the_loss_with_grad_enabled() {
    let a = leaf([3.0]);
    let mut opt = SGD::new(vec![a.clone()], SGDOptions { lr: 0.25, ..Default::default() }).unwrap();
    let _ng = pyrite::autograd::no_grad();
    let aa = a.clone();
    let loss = opt
        .step_with_closure(&mut |optimizer| {
            optimizer.zero_grad()?;
            let l = aa.square()?.sum()?;
            l.backward()?;
            Ok(l)
        })
        .unwrap();
    assert_eq!(loss.item::<f64>().unwrap(), 9.0);
    assert_eq!(a.to_vec::<f64>().unwrap(), [1.5]); // 3 - 0.25 * 6
}

#[test]
fn state_dict_has_pytorchs_structure_and_load_checks_it() {
    let model = Linear::new(3, 2).unwrap();
    let extra = leaf([1.0]);
    let mut opt = SGD::with_groups(
        vec![ParamGroup::new(model.parameters()), ParamGroup::new(vec![extra.clone()]).with("lr", 0.5)],
        SGDOptions { lr: 0.1, momentum: 0.9, ..Default::default() },
    )
    .unwrap();
    model.forward(&Tensor::ones([4, 3], DType::F32).unwrap()).unwrap().sum().unwrap().backward().unwrap();
    opt.step().unwrap();
    let sd = opt.state_dict();
    // state keyed by the index of each parameter that has state; groups hold indices.
    assert_eq!(sd.state.keys().copied().collect::<Vec<_>>(), [0, 1]);
    assert!(matches!(sd.state[&0]["momentum_buffer"], StateValue::Tensor(_)));
    assert_eq!(sd.param_groups[0].params, [0, 1]);
    assert_eq!(sd.param_groups[1].params, [2]);
    for key in ["lr", "momentum", "dampening", "weight_decay", "nesterov", "maximize"] {
        assert!(sd.param_groups[0].options.contains_key(key), "{key}");
    }
    assert_eq!(sd.param_groups[1].options["lr"], Hyper::Float(0.5));

    // Loading into an optimizer with other groups fails and changes nothing.
    let mut one_group = SGD::new(model.parameters(), SGDOptions::default()).unwrap();
    assert!(err(one_group.load_state_dict(&sd)).contains("different number of parameter groups"));
    let mut other_sizes = SGD::with_groups(
        vec![ParamGroup::new(vec![model.parameters()[0].clone()]), ParamGroup::new(vec![extra.clone()])],
        SGDOptions::default(),
    )
    .unwrap();
    assert!(err(other_sizes.load_state_dict(&sd)).contains("doesn't match the size"));

    // A loaded state is a copy: stepping the original does not change it.
    let mut fresh = SGD::with_groups(
        vec![ParamGroup::new(model.parameters()), ParamGroup::new(vec![extra.clone()])],
        SGDOptions::default(),
    )
    .unwrap();
    fresh.load_state_dict(&sd).unwrap();
    assert_eq!(fresh.param_groups()[0].f64("momentum").unwrap(), 0.9);
    assert_eq!(fresh.param_groups()[1].lr, 0.5);
    let before = match &fresh.state(&model.parameters()[0]).unwrap()["momentum_buffer"] {
        StateValue::Tensor(t) => t.to_vec2::<f32>().unwrap(),
        _ => unreachable!(),
    };
    opt.step().unwrap();
    let after = match &fresh.state(&model.parameters()[0]).unwrap()["momentum_buffer"] {
        StateValue::Tensor(t) => t.to_vec2::<f32>().unwrap(),
        _ => unreachable!(),
    };
    assert_eq!(before, after);
}

#[test]
fn adagrad_has_state_from_construction_as_in_pytorch() {
    let a = leaf([1.0, 2.0]);
    let opt = Adagrad::new(
        vec![a.clone()],
        AdagradOptions { initial_accumulator_value: 0.5, ..Default::default() },
    )
    .unwrap();
    let st = opt.state(&a).unwrap();
    assert!(matches!(st["step"], StateValue::Float(s) if s == 0.0));
    match &st["sum"] {
        StateValue::Tensor(t) => assert_eq!(t.to_vec::<f64>().unwrap(), [0.5, 0.5]),
        _ => panic!("sum should be a tensor"),
    }
}

#[test]
fn large_parameters_update_in_parallel_chunks_like_small_ones() {
    // 100k elements is split across tasks; the result equals the formula everywhere.
    let n = 100_003;
    let p = Tensor::ones([n], DType::F32).unwrap().requires_grad_(true).unwrap();
    let mut opt =
        SGD::new(vec![p.clone()], SGDOptions { lr: 0.5, momentum: 0.5, ..Default::default() }).unwrap();
    for _ in 0..2 {
        p.set_grad(Some(Tensor::arange(0.0, n as f64, 1.0, DType::F32).unwrap())).unwrap();
        opt.step().unwrap();
    }
    let v = p.to_vec::<f32>().unwrap();
    for i in [0usize, 1, 40_000, n - 1] {
        let g = i as f32;
        // step 1: buf = g, p = 1 - 0.5 g; step 2: buf = 0.5 g + g, p -= 0.5 * 1.5 g
        let want = 1.0 - 0.5 * g - 0.75 * g;
        assert!((v[i] - want).abs() <= 1e-6 * want.abs().max(1.0), "{i}: {} vs {want}", v[i]);
    }
}
