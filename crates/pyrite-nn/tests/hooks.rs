//! Module hooks, as PyTorch documents them: order, replacement, removal, backward hooks on
//! modules with several inputs, hooks on containers, and global hooks.

use pyrite::nn::{self, Linear, Module, ModuleBase, ModuleHooks, ReLU, Sequential, Value};
use pyrite::{DType, Result, Tensor};
use std::sync::{Arc, Mutex};

/// What a hook saw: the gradients as plain numbers (`None` for a missing one).
type Grads = Vec<Option<Vec<f64>>>;
type Shared<T> = Arc<Mutex<Vec<T>>>;

fn log() -> Arc<Mutex<Vec<String>>> {
    Arc::default()
}

fn ones(shape: &[usize]) -> Tensor {
    Tensor::ones(shape, DType::F64).unwrap()
}

#[test]
fn forward_hooks_run_in_registration_order_and_may_replace_values() -> Result<()> {
    let fc = Linear::with_options(2, 2, true, DType::F64)?;
    let calls = log();
    let (c1, c2, c3) = (calls.clone(), calls.clone(), calls.clone());
    let h1 = fc.register_forward_pre_hook(move |_m, _x| {
        c1.lock().unwrap().push("pre1".into());
        Ok(None)
    });
    // the second pre hook replaces the input by zeros
    // `args` is a tuple, as in PyTorch; a replacement that is not one becomes `(x,)`
    let _h2 = fc.register_forward_pre_hook(move |_m, args| {
        c2.lock().unwrap().push("pre2".into());
        Ok(Some(Value::Tensor(args.get(0)?.as_tensor()?.zeros_like()?)))
    });
    let _h3 = fc.register_forward_hook(move |m, args, output| {
        c3.lock().unwrap().push(format!(
            "fwd {} in={:?}",
            m.type_name(),
            args.get(0)?.as_tensor()?.to_vec2::<f64>()?[0]
        ));
        Ok(Some(Value::Tensor(output.as_tensor()?.add_scalar(100.0)?)))
    });
    let y = fc.call(&ones(&[1, 2]))?;
    // zeros in, so the output is the bias, plus the forward hook's 100
    let want = fc.bias.as_ref().unwrap().add_scalar(100.0)?.unsqueeze(0)?;
    assert!(y.allclose(&want, 0.0, 0.0, false)?);
    assert_eq!(*calls.lock().unwrap(), ["pre1", "pre2", "fwd Linear in=[0.0, 0.0]"]);
    // removed hooks no longer run; removing twice is harmless
    h1.remove();
    h1.remove();
    calls.lock().unwrap().clear();
    fc.call(&ones(&[1, 2]))?;
    assert_eq!(*calls.lock().unwrap(), ["pre2", "fwd Linear in=[0.0, 0.0]"]);
    Ok(())
}

#[test]
fn feature_extraction_with_forward_hooks_on_a_sequential() -> Result<()> {
    let net = Sequential::new()
        .append(Linear::with_options(3, 4, true, DType::F64)?)
        .append(ReLU::new())
        .append(Linear::with_options(4, 2, true, DType::F64)?);
    let feats: Shared<(String, Vec<usize>)> = Arc::default();
    let mut handles = Vec::new();
    for (name, m) in net.named_modules() {
        let f = feats.clone();
        let name = name.to_string();
        // hooks register on any module reached by name (a `&dyn Module`)
        handles.push(m.register_forward_hook(move |_m, _i, o| {
            f.lock().unwrap().push((name.clone(), o.as_tensor()?.dims().to_vec()));
            Ok(None)
        }));
    }
    net.call(&ones(&[5, 3]))?;
    let got = feats.lock().unwrap().clone();
    // inner modules finish first, the container last (as in PyTorch)
    let names: Vec<&str> = got.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["0", "1", "2", ""]);
    assert_eq!(got[1].1, [5, 4]);
    handles.iter().for_each(|h| h.remove());
    Ok(())
}

/// grad_output and grad_input as `register_full_backward_hook` documents them, for a module
/// of two inputs where only one requires grad.
#[test]
fn full_backward_hooks_see_grad_input_and_grad_output() -> Result<()> {
    #[derive(nn::Module)]
    struct Mul {
        base: ModuleBase,
    }
    impl Module for Mul {
        fn forward_value(&self, input: Value) -> Result<Value> {
            let (a, b) = (input.get(0)?.as_tensor()?, input.get(1)?.as_tensor()?);
            Ok(Value::Tensor(a.mul(b)?.mul_scalar(3.0)?))
        }
    }
    let m = Mul { base: ModuleBase::new() };
    let seen: Shared<(Grads, Grads)> = Arc::default();
    let s = seen.clone();
    let v = |g: &[Option<Tensor>]| -> Grads {
        g.iter().map(|t| t.as_ref().map(|t| t.to_vec::<f64>().unwrap())).collect()
    };
    let _h = m.register_full_backward_hook(move |module, gi, go| {
        assert_eq!(module.type_name(), "Mul");
        s.lock().unwrap().push((v(gi), v(go)));
        Ok(None)
    });
    let pre: Arc<Mutex<usize>> = Arc::default();
    let p = pre.clone();
    let _hp = m.register_full_backward_pre_hook(move |_module, go| {
        *p.lock().unwrap() += 1;
        // doubles grad_output
        Ok(Some(go.iter().map(|g| g.as_ref().map(|g| g.mul_scalar(2.0).unwrap())).collect()))
    });
    let a = Tensor::new([1f64, 2.]).unwrap().requires_grad_(true)?;
    let b = Tensor::new([5f64, 7.]).unwrap();
    let y = m.call_value(Value::from((a.clone(), b.clone())))?.into_tensor()?;
    y.sum()?.backward()?;
    assert_eq!(*pre.lock().unwrap(), 1);
    let got = seen.lock().unwrap().clone();
    assert_eq!(got.len(), 1);
    // grad_output (after the pre hook doubled it): 2; grad_input: 3 * b * 2 for a, None for b
    assert_eq!(got[0].1, vec![Some(vec![2.0, 2.0])]);
    assert_eq!(got[0].0, vec![Some(vec![30.0, 42.0]), None]);
    assert_eq!(a.grad().unwrap().to_vec::<f64>()?, [30.0, 42.0]);
    Ok(())
}

#[test]
fn a_backward_hook_may_replace_grad_input() -> Result<()> {
    let fc = Linear::with_options(2, 1, false, DType::F64)?;
    let _h = fc.register_full_backward_hook(|_m, gi, _go| {
        Ok(Some(gi.iter().map(|g| g.as_ref().map(|g| g.zeros_like().unwrap())).collect()))
    });
    let x = ones(&[1, 2]).requires_grad_(true)?;
    fc.call(&x)?.sum()?.backward()?;
    assert_eq!(x.grad().unwrap().to_vec2::<f64>()?, [[0.0, 0.0]]);
    // the weight's gradient is not the hook's business
    assert_eq!(fc.weight.grad().unwrap().to_vec2::<f64>()?, [[1.0, 1.0]]);
    Ok(())
}

/// Inspecting gradient norms: a backward hook on every layer of a model whose input does not
/// require grad still runs (with grad_input = [None]), as in PyTorch.
#[test]
fn backward_hooks_run_when_no_input_requires_grad() -> Result<()> {
    let net = Sequential::new()
        .append(Linear::with_options(3, 4, true, DType::F64)?)
        .append(Linear::with_options(4, 1, true, DType::F64)?);
    let norms: Arc<Mutex<Vec<(usize, f64)>>> = Arc::default();
    for i in 0..2 {
        let n = norms.clone();
        net.get(i)?.register_full_backward_hook(move |_m, gi, go| {
            let g = go[0].as_ref().unwrap().norm(2.0, &[], false)?.item::<f64>()?;
            if i == 0 {
                assert!(gi[0].is_none());
            }
            n.lock().unwrap().push((i as usize, g));
            Ok(None)
        });
    }
    net.call(&ones(&[2, 3]))?.sum()?.backward()?;
    let got = norms.lock().unwrap().clone();
    assert_eq!(got.iter().map(|(i, _)| *i).collect::<Vec<_>>(), [1, 0]);
    assert!((got[0].1 - 2f64.sqrt()).abs() < 1e-12);
    Ok(())
}

#[test]
fn global_hooks_see_every_module_call() -> Result<()> {
    let net = Sequential::new().append(Linear::new(2, 2)?).append(ReLU::new());
    let names: Arc<Mutex<Vec<String>>> = Arc::default();
    let n = names.clone();
    let target = net.get(0)? as *const dyn Module as *const () as usize;
    let h = nn::register_module_forward_pre_hook(move |m, _x| {
        // other tests run in parallel: record only this test's modules
        let addr = m as *const dyn Module as *const () as usize;
        if addr == target || m.type_name() == "ReLU" {
            n.lock().unwrap().push(m.type_name().to_string());
        }
        Ok(None)
    });
    net.call(&Tensor::ones([1, 2], DType::F32)?)?;
    h.remove();
    net.call(&Tensor::ones([1, 2], DType::F32)?)?;
    let got = names.lock().unwrap().clone();
    assert!(got.starts_with(&["Linear".to_string(), "ReLU".to_string()]) && got.len() <= 3, "{got:?}");
    Ok(())
}

#[test]
fn state_dict_hooks_may_edit_and_rename() -> Result<()> {
    let fc = Linear::new(2, 2)?;
    let _h = fc.register_state_dict_post_hook(|_m, sd, prefix| {
        let w = sd.remove(&format!("{prefix}weight")).unwrap();
        sd.insert(format!("{prefix}w_renamed"), w);
        Ok(())
    });
    let sd = fc.state_dict()?;
    assert_eq!(sd.keys().collect::<Vec<_>>(), ["bias", "w_renamed"]);
    // a load pre hook maps the old name back
    let other = Linear::new(2, 2)?;
    let _l = other.register_load_state_dict_pre_hook(|_m, sd, prefix| {
        if let Some(w) = sd.remove(&format!("{prefix}w_renamed")) {
            sd.insert(format!("{prefix}weight"), w);
        }
        Ok(())
    });
    other.load_state_dict(&sd, true)?;
    assert!(other.weight.allclose(&fc.weight, 0.0, 0.0, false)?);
    // a load post hook can forgive missing keys
    let third = Linear::new(2, 2)?;
    let _p = third.register_load_state_dict_post_hook(|_m, keys| {
        keys.missing_keys.clear();
        Ok(())
    });
    let mut partial = pyrite::nn::StateDict::new();
    partial.insert("bias", Tensor::zeros([2], DType::F32)?);
    third.load_state_dict(&partial, true)?;
    Ok(())
}

/// PyTorch's `hook(module, args)`: `args` is the tuple of positional arguments for every
/// call form, and the forward hook sees the arguments after the pre-hooks replaced them.
#[test]
fn hooks_see_the_positional_arguments_as_a_tuple() -> Result<()> {
    let fc = Linear::with_options(2, 2, true, DType::F64)?;
    let kinds: Shared<(&'static str, usize)> = Arc::default();
    let (k1, k2) = (kinds.clone(), kinds.clone());
    let _pre = fc.register_forward_pre_hook(move |_m, args| {
        let n = match args {
            Value::Tuple(v) => v.len(),
            _ => 0,
        };
        k1.lock().unwrap().push((args.kind(), n));
        Ok(None)
    });
    let _fwd = fc.register_forward_hook(move |_m, args, _out| {
        k2.lock().unwrap().push((args.kind(), args.tensors().len()));
        Ok(None)
    });
    fc.call(&ones(&[1, 2]))?;
    fc.call_value(Value::Tensor(ones(&[1, 2])))?;
    fc.call_value(Value::Tuple(vec![Value::Tensor(ones(&[1, 2]))]))?;
    assert_eq!(*kinds.lock().unwrap(), [("tuple", 1), ("tuple", 1)].repeat(3));
    Ok(())
}

/// `register_forward_hook(hook, prepend=True)` and the same for the other call hooks: a
/// prepended hook runs before those already registered.
#[test]
fn prepended_hooks_run_first() -> Result<()> {
    use nn::HookOptions;
    let fc = Linear::with_options(2, 1, true, DType::F64)?;
    let calls = log();
    let c = |tag: &'static str| {
        let calls = calls.clone();
        move || calls.lock().unwrap().push(tag.to_string())
    };
    let (a, b, d, e) = (c("pre a"), c("pre b"), c("fwd a"), c("fwd b"));
    let (f, g, h, i) = (c("bwd a"), c("bwd b"), c("bwd-pre a"), c("bwd-pre b"));
    let prepend = HookOptions { prepend: true };
    fc.register_forward_pre_hook(move |_, _| {
        a();
        Ok(None)
    });
    fc.register_forward_pre_hook_with(
        move |_, _| {
            b();
            Ok(None)
        },
        prepend,
    );
    fc.register_forward_hook(move |_, _, _| {
        d();
        Ok(None)
    });
    fc.register_forward_hook_with(
        move |_, _, _| {
            e();
            Ok(None)
        },
        prepend,
    );
    fc.register_full_backward_hook(move |_, _, _| {
        f();
        Ok(None)
    });
    fc.register_full_backward_hook_with(
        move |_, _, _| {
            g();
            Ok(None)
        },
        prepend,
    );
    fc.register_full_backward_pre_hook(move |_, _| {
        h();
        Ok(None)
    });
    fc.register_full_backward_pre_hook_with(
        move |_, _| {
            i();
            Ok(None)
        },
        prepend,
    );
    let x = ones(&[1, 2]).requires_grad_(true)?;
    fc.call(&x)?.sum()?.backward()?;
    assert_eq!(
        *calls.lock().unwrap(),
        ["pre b", "pre a", "fwd b", "fwd a", "bwd-pre b", "bwd-pre a", "bwd b", "bwd a"]
    );
    Ok(())
}

/// PyTorch's backward hooks get the module first (`hook(module, grad_input, grad_output)`).
/// Backward runs after the call has returned, when the Rust module may have moved, so the
/// module is a snapshot taken at the call: its type, configuration, training flag and its own
/// parameters, which a gradient-inspection hook reads by name.
#[test]
fn backward_hooks_get_the_module_as_it_was_called() -> Result<()> {
    let fc = Linear::with_options(3, 2, true, DType::F64)?;
    let seen: Shared<(String, String, bool, Vec<usize>, bool)> = Arc::default();
    let s = seen.clone();
    let weight = fc.weight.tensor().clone();
    fc.register_full_backward_hook(move |m, _gi, _go| {
        let w = m.get_parameter("weight")?;
        s.lock().unwrap().push((
            m.type_name().to_string(),
            m.repr(),
            m.is_training(),
            w.dims().to_vec(),
            w.is_same(&weight),
        ));
        // the snapshot is not the module: calling it is an error, not a call of a stale module
        assert!(m.call(&Tensor::ones([1, 3], DType::F64)?).is_err());
        Ok(None)
    });
    fc.eval();
    let x = ones(&[4, 3]).requires_grad_(true)?;
    let y = fc.call(&x)?;
    let moved = vec![fc]; // the module moves before backward runs
    y.sum()?.backward()?;
    let got = seen.lock().unwrap().clone();
    assert_eq!(
        got,
        [(
            "Linear".into(),
            "Linear(in_features=3, out_features=2, bias=True)".into(),
            false,
            vec![2, 3],
            true
        )]
    );
    drop(moved);
    Ok(())
}

/// `named_parameters(remove_duplicate=False)` and `named_modules(remove_duplicate=False)`
/// list a shared (tied) module under each of its names.
#[test]
fn remove_duplicate_false_lists_shared_members_under_each_name() -> Result<()> {
    use nn::module::NamedOptions;
    #[derive(nn::Module)]
    struct Tied {
        base: ModuleBase,
        a: Arc<Linear>,
        b: Arc<Linear>,
    }
    impl Module for Tied {}
    let shared = Arc::new(Linear::new(2, 2)?);
    let m = Tied { base: ModuleBase::new(), a: shared.clone(), b: shared };
    let names = |v: Vec<(String, Tensor)>| v.into_iter().map(|(n, _)| n).collect::<Vec<_>>();
    assert_eq!(names(m.named_parameters()), ["a.weight", "a.bias"]);
    let all = NamedOptions { remove_duplicate: false, ..Default::default() };
    assert_eq!(names(m.named_parameters_with(&all)), ["a.weight", "a.bias", "b.weight", "b.bias"]);
    let mods: Vec<String> = m.named_modules_with(&all).into_iter().map(|(n, _)| n).collect();
    assert_eq!(mods, ["", "a", "b"]);
    assert_eq!(m.named_modules().len(), 2);
    // prefix and recurse=False
    let own = NamedOptions { prefix: "model".into(), recurse: false, ..Default::default() };
    assert!(m.named_parameters_with(&own).is_empty());
    let pre = NamedOptions { prefix: "model".into(), ..Default::default() };
    assert_eq!(names(m.named_parameters_with(&pre)), ["model.a.weight", "model.a.bias"]);
    Ok(())
}
