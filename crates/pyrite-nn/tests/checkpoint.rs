//! `torch.utils.checkpoint` (`pyrite::utils::checkpoint`): a checkpointed model computes the
//! same gradients as the plain one, bit for bit, with dropout; the RNG state is preserved for
//! the recomputation (and without it the gradients differ); gradcheck passes through a
//! checkpoint; the errors and the warning are PyTorch's. The memory saving is measured in
//! `checkpoint_memory.rs` (its own test binary, so that no other test allocates meanwhile).

use pyrite::autograd;
use pyrite::nn::{Dropout, Linear, Module, ReLU, Sequential, Tanh};
use pyrite::utils::checkpoint::{checkpoint, checkpoint_sequential, CheckpointOptions};
use pyrite::{manual_seed, DType, ErrorKind, Tensor};
use std::sync::Mutex;

/// The tests draw from the global generator: one at a time, so that seeds mean the same.
static RNG: Mutex<()> = Mutex::new(());

fn rng_lock() -> std::sync::MutexGuard<'static, ()> {
    RNG.lock().unwrap_or_else(|e| e.into_inner())
}

/// `depth` blocks of Linear(width, width), Tanh, Dropout(0.2), in `dtype`.
fn deep_mlp(depth: usize, width: usize, dtype: DType) -> Sequential {
    let mut m = Sequential::new();
    for _ in 0..depth {
        m.push(Linear::new(width, width).unwrap());
        m.push(Tanh::new());
        m.push(Dropout::new(0.2).unwrap());
    }
    m.to_dtype(dtype).unwrap();
    m
}

/// Gradients of `sum(model(x)^2)` w.r.t. `x` and the parameters, with `segments` checkpointed
/// chunks (`None`: the plain model), from the RNG seeded with `seed`.
fn grads(model: &Sequential, x: &Tensor, segments: Option<usize>, seed: u64, preserve: bool) -> Vec<Tensor> {
    for p in model.parameters() {
        p.set_grad(None).unwrap();
    }
    let x = x.detach().requires_grad_(true).unwrap();
    manual_seed(seed);
    let y = match segments {
        None => model.call(&x).unwrap(),
        Some(s) => {
            let opts = CheckpointOptions { preserve_rng_state: preserve, ..Default::default() };
            checkpoint_sequential(model, s, &x, opts).unwrap()
        }
    };
    y.mul(&y).unwrap().sum().unwrap().backward().unwrap();
    let mut g = vec![x.grad().unwrap()];
    g.extend(model.parameters().iter().map(|p| p.grad().expect("every parameter gets a gradient")));
    g
}

/// Same shape and the same bits in every element (f32 to f64 is exact).
fn same_bits(a: &Tensor, b: &Tensor) -> bool {
    let bits = |t: &Tensor| -> Vec<u64> {
        t.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap().iter().map(|v| v.to_bits()).collect()
    };
    a.dims() == b.dims() && bits(a) == bits(b)
}

fn bitwise_equal(a: &[Tensor], b: &[Tensor]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(a, b)| same_bits(a, b))
}

#[test]
fn checkpoint_sequential_gradients_equal_the_plain_run_bit_for_bit() {
    let _l = rng_lock();
    for dtype in [DType::F32, DType::F64] {
        manual_seed(1);
        let model = deep_mlp(8, 32, dtype);
        let x = Tensor::randn([16, 32], dtype).unwrap();
        let plain = grads(&model, &x, None, 7, true);
        for segments in [1, 2, 3, 4, 24] {
            let ckpt = grads(&model, &x, Some(segments), 7, true);
            assert!(bitwise_equal(&plain, &ckpt), "{dtype}, {segments} segments: gradients differ");
        }
    }
}

#[test]
fn the_output_and_the_rng_stream_after_a_checkpoint_are_those_of_the_plain_run() {
    let _l = rng_lock();
    manual_seed(2);
    let model = deep_mlp(4, 16, DType::F32);
    let x = Tensor::randn([8, 16], DType::F32).unwrap().requires_grad_(true).unwrap();
    manual_seed(3);
    let plain = model.call(&x).unwrap();
    let after_plain = Tensor::rand([4], DType::F32).unwrap();
    manual_seed(3);
    let ckpt = checkpoint_sequential(&model, 3, &x, CheckpointOptions::default()).unwrap();
    // the backward's recomputation draws the forward's masks again, then puts the stream back
    ckpt.sum().unwrap().backward().unwrap();
    let after_ckpt = Tensor::rand([4], DType::F32).unwrap();
    assert!(same_bits(&plain, &ckpt));
    assert!(same_bits(&after_plain, &after_ckpt));
}

#[test]
fn dropout_masks_are_the_same_in_the_recomputation_with_preserve_rng_state() {
    let _l = rng_lock();
    // y = dropout(x) * 1: dy/dx is the mask scaled by 1/(1-p), so the gradient shows the
    // mask the recomputation drew; it must be the forward's.
    let x = Tensor::ones([1000], DType::F64).unwrap().requires_grad_(true).unwrap();
    let drop = |xs: &[Tensor]| Ok(vec![pyrite::nn::functional::dropout(&xs[0], &Default::default())?]);
    manual_seed(11);
    let y = checkpoint(drop, &[&x], CheckpointOptions::default()).unwrap().remove(0);
    let _other_draws = Tensor::rand([100], DType::F64).unwrap(); // the RNG moves on meanwhile
    y.sum().unwrap().backward().unwrap();
    let g = x.grad().unwrap();
    assert!(same_bits(&g, &y), "the gradient's mask is the forward's mask");
    let zeros = y.eq_scalar(0.0).unwrap().sum().unwrap().to_dtype(DType::F64).unwrap().item::<f64>().unwrap();
    assert!(zeros > 400.0 && zeros < 600.0, "p = 0.5 drops about half: {zeros}");
}

#[test]
fn without_preserve_rng_state_the_recomputation_draws_other_masks_and_gradients_differ() {
    let _l = rng_lock();
    // Documented behaviour, as in PyTorch: with preserve_rng_state = false the backward
    // recomputes dropout with whatever the generator is at then, so the masks (and the
    // gradients) are not those of the forward that produced the output.
    manual_seed(4);
    let model = deep_mlp(4, 16, DType::F64);
    let x = Tensor::randn([8, 16], DType::F64).unwrap();
    let plain = grads(&model, &x, None, 5, true);
    let preserved = grads(&model, &x, Some(2), 5, true);
    let not_preserved = grads(&model, &x, Some(2), 5, false);
    assert!(bitwise_equal(&plain, &preserved));
    assert!(!bitwise_equal(&plain, &not_preserved));
    // the last segment is not checkpointed: its own parameters' gradients still differ,
    // because its input gradient does not; the first segment's weight certainly differs
    assert!(!same_bits(&plain[1], &not_preserved[1]));
}

#[test]
fn gradcheck_through_a_checkpointed_function() {
    let _l = rng_lock();
    manual_seed(6);
    let w = Tensor::randn([4, 3], DType::F64).unwrap().requires_grad_(true).unwrap();
    let x = Tensor::randn([2, 4], DType::F64).unwrap().requires_grad_(true).unwrap();
    let b = Tensor::randn([3], DType::F64).unwrap().requires_grad_(true).unwrap();
    let f = |xs: &[Tensor]| {
        // a two-input, two-output segment; the inputs of gradcheck are x, w and b
        let (w, b) = (xs[1].clone(), xs[2].clone());
        let seg = move |ins: &[Tensor]| {
            let h = ins[0].matmul(&w)?.add(&b)?.tanh()?;
            Ok(vec![h.mul(&ins[1])?, h.sin()?])
        };
        let opts = CheckpointOptions { params: vec![xs[1].clone(), xs[2].clone()], ..Default::default() };
        let scale = xs[0].mul_scalar(0.5)?;
        let outs = checkpoint(seg, &[&xs[0], &scale.narrow(1, 0, 3)?], opts)?;
        outs[0].add(&outs[1])?.sum_dims(&[1], false)
    };
    autograd::gradcheck(f, &[x, w, b], Default::default()).unwrap();
}

#[test]
fn autograd_grad_reaches_the_parameters_through_the_checkpoint() {
    let _l = rng_lock();
    manual_seed(8);
    let model = Sequential::new()
        .append(Linear::new(5, 5).unwrap())
        .append(ReLU::new())
        .append(Linear::new(5, 2).unwrap());
    let x = Tensor::randn([3, 5], DType::F32).unwrap();
    let w = model.parameters()[0].clone();
    let plain = model.call(&x).unwrap().sum().unwrap();
    let ckpt = checkpoint_sequential(&model, 2, &x, CheckpointOptions::default()).unwrap().sum().unwrap();
    let g0 = autograd::grad(&[&plain], &[&w], None, None, false, false).unwrap().remove(0).unwrap();
    let g1 = autograd::grad(&[&ckpt], &[&w], None, None, false, false).unwrap().remove(0).unwrap();
    assert!(same_bits(&g0, &g1));
    assert!(w.grad().is_none(), "autograd::grad leaves .grad alone");
}

#[test]
fn a_captured_leaf_not_listed_in_params_still_gets_its_grad() {
    let _l = rng_lock();
    let w = Tensor::new([2f64, 3.]).unwrap().requires_grad_(true).unwrap();
    let x = Tensor::new([1f64, 1.]).unwrap().requires_grad_(true).unwrap();
    let w2 = w.clone();
    let y = checkpoint(move |xs| Ok(vec![xs[0].mul(&w2)?.mul(&w2)?]), &[&x], CheckpointOptions::default())
        .unwrap()
        .remove(0);
    y.sum().unwrap().backward().unwrap();
    assert_eq!(x.grad().unwrap().to_vec::<f64>().unwrap(), vec![4., 9.]);
    assert_eq!(w.grad().unwrap().to_vec::<f64>().unwrap(), vec![4., 6.]);
}

#[test]
fn no_input_requiring_grad_warns_as_pytorch_and_still_runs() {
    let x = Tensor::new([1f32, 2.]).unwrap();
    let (out, seen) = pyrite_core::warnings::catch_warnings(|| {
        checkpoint(|xs| Ok(vec![xs[0].mul_scalar(2.0)?]), &[&x], CheckpointOptions::default())
    });
    assert_eq!(out.unwrap()[0].to_vec::<f32>().unwrap(), vec![2., 4.]);
    assert_eq!(
        seen,
        ["torch.utils.checkpoint: None of the inputs have requires_grad=True. Gradients will be None"]
    );
}

#[test]
fn more_segments_than_modules_is_an_error() {
    let model = Sequential::new().append(ReLU::new()).append(Tanh::new());
    let x = Tensor::ones([2], DType::F32).unwrap();
    for s in [0, 3] {
        let e = checkpoint_sequential(&model, s, &x, CheckpointOptions::default()).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Value, "{e}");
    }
}

#[test]
fn an_input_modified_in_place_before_backward_is_pytorchs_error() {
    let x = Tensor::new([1f64, 2.]).unwrap().requires_grad_(true).unwrap();
    let h = x.mul_scalar(1.0).unwrap();
    let y = checkpoint(|xs| Ok(vec![xs[0].exp()?]), &[&h], CheckpointOptions::default()).unwrap().remove(0);
    {
        let _g = autograd::no_grad();
        h.add_scalar_(1.0).unwrap();
    }
    let e = y.sum().unwrap().backward().unwrap_err();
    assert!(e.to_string().contains("modified by an inplace operation"), "{e}");
}
