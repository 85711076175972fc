//! Gradients of the sorting, scanning, rearranging and indexing ops, checked against PyTorch
//! (reference/gen_autograd_index.py: f32 and f64) and by finite differences in f64
//! (`gradcheck`, and `gradgradcheck` for second derivatives).

mod common;

use common::Case;
use pyrite_core::{autograd, ErrorKind, Result, Tensor};

/// `cat([p * (i + 1) for i, p in enumerate(parts)], dim)`: every part's gradient differs.
fn weighted_cat(parts: Vec<Tensor>, dim: isize) -> Result<Tensor> {
    let ws: Vec<Tensor> =
        parts.iter().enumerate().map(|(i, p)| p.mul_scalar(i as f64 + 1.0)).collect::<Result<_>>()?;
    Tensor::cat(&ws, dim)
}

/// The Pyrite call mirroring the case's PyTorch call, on inputs `x` (without the upstream
/// gradient).
fn op(c: &Case, x: &[Tensor]) -> Result<Tensor> {
    let a = &x[0];
    let some = |i: usize| Some(x[i].clone());
    Ok(match c.op.as_str() {
        "sort" => a.sort(c.i("dim"), c.b("descending"))?.0,
        "topk" => a.topk(c.u("k"), c.i("dim"), c.b("largest"), true)?.0,
        "kthvalue" => a.kthvalue(c.u("k"), c.i("dim"), c.b("keepdim"))?.0,
        "cumsum" => a.cumsum(c.i("dim"))?,
        "cumprod" => a.cumprod(c.i("dim"))?,
        "cummax" => a.cummax(c.i("dim"))?.0,
        "cummin" => a.cummin(c.i("dim"))?.0,
        "flip" => a.flip(&c.dims("dims"))?,
        "roll" => a.roll(&c.dims("shifts"), &c.dims("dims"))?,
        "repeat" => a.repeat(&c.sizes("repeats"))?,
        "tile" => a.tile(&c.sizes("reps"))?,
        "repeat_interleave" => {
            a.repeat_interleave(c.u("repeats"), c.opt("dim").map(|d| d.as_i64().unwrap() as isize))?
        }
        "repeat_interleave_tensor" => a.repeat_interleave_tensor(&x[1], Some(c.i("dim")))?,
        "take" => a.take(&x[1])?,
        "split" => weighted_cat(a.split(c.u("size"), c.i("dim"))?, c.i("dim"))?,
        "split_sizes" => weighted_cat(a.split_sizes(&c.sizes("sizes"), c.i("dim"))?, c.i("dim"))?,
        "chunk" => weighted_cat(a.chunk(c.u("chunks"), c.i("dim"))?, c.i("dim"))?,
        "unbind" => {
            let ps = a.unbind(c.i("dim"))?;
            let ws: Vec<Tensor> =
                ps.iter().enumerate().map(|(i, p)| p.mul_scalar(i as f64 + 1.0)).collect::<Result<_>>()?;
            Tensor::stack(&ws, 0)?
        }
        "hstack" => Tensor::hstack(&[a, &x[1]])?,
        "vstack" => Tensor::vstack(&[a, &x[1]])?,
        "scatter" => a.scatter(c.i("dim"), &x[1], &x[2])?,
        "scatter_value" => a.scatter_value(c.i("dim"), &x[1], 2.5)?,
        "scatter_add" => a.scatter_add(c.i("dim"), &x[1], &x[2])?,
        "scatter_add_" => {
            let y = a.mul_scalar(1)?;
            y.scatter_add_(c.i("dim"), &x[1], &x[2])?;
            y
        }
        "scatter_reduce" => a.scatter_reduce(c.i("dim"), &x[1], &x[2], c.s("reduce"), c.b("include_self"))?,
        "index_add" => a.index_add(c.i("dim"), &x[1], &x[2], c.f("alpha"))?,
        "index_add_" => {
            let y = a.mul_scalar(1)?;
            y.index_add_(c.i("dim"), &x[1], &x[2], 1)?;
            y
        }
        "index_copy" => a.index_copy(c.i("dim"), &x[1], &x[2])?,
        "index_fill" => a.index_fill(c.i("dim"), &x[1], -1.0)?,
        "masked_select" => a.masked_select(&x[1])?,
        "masked_scatter" => a.masked_scatter(&x[1], &x[2])?,
        "masked_scatter_" => {
            let y = a.mul_scalar(1)?;
            y.masked_scatter_(&x[1], &x[2])?;
            y
        }
        "index_put" => a.index_put(&[some(1), some(2)], &x[3], c.b("accumulate"))?,
        "index_put_" => {
            let y = a.mul_scalar(1)?;
            y.index_put_(&[some(1), some(2)], &x[3], c.b("accumulate"))?;
            y
        }
        "index" => a.index_tensor(&[some(1), some(2)])?,
        "index_cols" => a.index_tensor(&[None, some(1)])?,
        "index_mask" => a.index_tensor(&[some(1)])?,
        "tril" => a.tril(c.i("diagonal"))?,
        "triu" => a.triu(c.i("diagonal"))?,
        _ => panic!("case {}: op '{}' has no Pyrite mapping ({})", c.name, c.op, c.call),
    })
}

#[test]
fn gradients_match_pytorch() {
    common::check_gradients("autograd_index", op);
}

/// Cases finite differences cannot check: ties, where only PyTorch's choice of element can be
/// checked.
const KINKED: &[&str] =
    &["sort_ties", "cummax_ties", "cummin_ties", "scatter_reduce_amax_ties", "scatter_reduce_amin_ties"];

/// Cases whose second derivative is not smooth enough for gradgradcheck, or refused (two
/// zeros of src meeting in a scatter_reduce prod: PyTorch's DelayedError).
const NO_GRADGRAD: &[&str] = &["scatter_reduce_prod_twozeros"];

#[test]
fn gradients_match_finite_differences() {
    let checked = common::check_finite_differences("autograd_index", op, KINKED, NO_GRADGRAD);
    assert!(checked > 50, "only {checked} cases checked");
}

#[test]
fn node_names_follow_pytorch() -> Result<()> {
    let x = Tensor::new([[3f64, 1., 2.], [0.5, 4., 5.]])?.requires_grad_(true)?;
    let i = Tensor::new([[0i64, 1, 1]])?;
    let name = |t: Tensor| t.grad_fn().map(|f| f.name().to_string()).unwrap_or_default();
    assert_eq!(name(x.sort(1, false)?.0), "SortBackward0");
    assert_eq!(name(x.topk(2, 1, true, true)?.0), "TopkBackward0");
    assert_eq!(name(x.kthvalue(2, 1, false)?.0), "KthvalueBackward0");
    assert_eq!(name(x.cumsum(1)?), "CumsumBackward0");
    assert_eq!(name(x.cumprod(1)?), "CumprodBackward0");
    assert_eq!(name(x.cummax(1)?.0), "CummaxBackward0");
    assert_eq!(name(x.flip(&[0])?), "FlipBackward0");
    assert_eq!(name(x.roll(&[1], &[0])?), "RollBackward0");
    assert_eq!(name(x.roll(&[1], &[])?), "RollBackward0");
    assert_eq!(name(x.repeat(&[2, 1])?), "RepeatBackward0");
    assert_eq!(name(x.tril(0)?), "TrilBackward0");
    assert_eq!(name(x.scatter_add(0, &i, &x)?), "ScatterAddBackward0");
    assert_eq!(name(x.index_tensor(&[Some(Tensor::new([1i64])?)])?), "IndexBackward0");
    // argsort and the index outputs are not differentiable
    assert!(!x.argsort(1, false)?.requires_grad());
    assert!(!x.sort(1, false)?.1.requires_grad());
    Ok(())
}

#[test]
fn cumprod_through_zeros_has_gradients_and_second_derivatives() -> Result<()> {
    // y = [2, 0, 0]; dy_sum/dx = [1 + 0 + 0, 2 + 2*3, 0] = [1, 8, 0]
    let x = Tensor::new([2f64, 0., 3.])?.requires_grad_(true)?;
    let y = x.cumprod(0)?.sum()?;
    let g = autograd::grad(&[&y], &[&x], None, None, true, false)?.pop().unwrap().unwrap();
    assert_eq!(g.to_vec::<f64>()?, vec![1., 8., 0.]);
    // d/dx of g.sum() = d/dx (1 + x2 + x2 x3 + x1 + x1 x3 + x1 x2) at (2, 0, 3)
    let gg = autograd::grad(&[&g.sum()?], &[&x], None, None, false, false)?.pop().unwrap().unwrap();
    assert_eq!(gg.to_vec::<f64>()?, vec![4., 6., 2.]);
    Ok(())
}

#[test]
fn scatter_reduce_amax_shares_the_gradient_among_ties() -> Result<()> {
    // self [1, 5], src [5, 5, 2] -> out [5, 5]: position 0 has the three-way tie self, src0, src1
    let x = Tensor::new([1f64, 5.])?.requires_grad_(true)?;
    let i = Tensor::new([0i64, 0, 1])?;
    let s = Tensor::new([5f64, 5., 2.])?.requires_grad_(true)?;
    let y = x.scatter_reduce(0, &i, &s, "amax", true)?;
    assert_eq!(y.grad_fn().unwrap().name(), "ScatterReduceBackward0");
    y.backward_with(&Tensor::new([1f64, 1.])?)?;
    assert_eq!(x.grad().unwrap().to_vec::<f64>()?, vec![0., 1.]);
    assert_eq!(s.grad().unwrap().to_vec::<f64>()?, vec![0.5, 0.5, 0.]);
    Ok(())
}

/// With `include_self=False` an excluded self takes no share, even when it equals the result.
/// Here Pyrite deliberately differs from PyTorch 2.15, whose formula still counts it
/// (`scatter_reduce_backward` compares `self == result` before excluding self) and so gives
/// `src.grad = [0.5, 0]`; the derivative (and finite differences) say 1.
#[test]
fn scatter_reduce_amax_without_self_gives_an_excluded_self_no_share() -> Result<()> {
    let x = Tensor::new([5f64, 1.])?.requires_grad_(true)?;
    let i = Tensor::new([0i64, 0])?;
    let s = Tensor::new([5f64, 3.])?.requires_grad_(true)?;
    let y = x.scatter_reduce(0, &i, &s, "amax", false)?;
    assert_eq!(y.to_vec::<f64>()?, vec![5., 1.]);
    y.backward_with(&Tensor::new([1f64, 1.])?)?;
    assert_eq!(s.grad().unwrap().to_vec::<f64>()?, vec![1., 0.]);
    assert_eq!(x.grad().unwrap().to_vec::<f64>()?, vec![0., 1.]);
    Ok(())
}

#[test]
fn scatter_reduce_prod_double_backward_through_two_zeros_is_a_delayed_error() -> Result<()> {
    let x = Tensor::new([2f64])?.requires_grad_(true)?;
    let i = Tensor::new([0i64, 0, 0])?;
    let s = Tensor::new([0f64, 3., 0.])?.requires_grad_(true)?;
    let y = x.scatter_reduce(0, &i, &s, "prod", true)?.sum()?;
    // the first derivative is fine: zero for every element (two factors are zero)
    let g = autograd::grad(&[&y], &[&s], None, None, true, false)?.pop().unwrap().unwrap();
    assert_eq!(g.to_vec::<f64>()?, vec![0., 0., 0.]);
    assert_eq!(g.grad_fn().unwrap().name(), "DelayedError");
    let e = g.sum()?.backward().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Autograd);
    assert!(e.to_string().contains("scatter_reduce(): Double backward is unsupported for src when >1 zeros in src are scattered to the same position."), "{e}");
    Ok(())
}

#[test]
fn scatter_reduce_in_place_on_a_non_leaf_is_recorded() -> Result<()> {
    let x = Tensor::new([1f64, 2.])?.requires_grad_(true)?;
    let i = Tensor::new([0i64, 0])?;
    let s = Tensor::new([3f64, 4.])?;
    let y = x.mul_scalar(1)?;
    y.scatter_reduce_(0, &i, &s, "prod", true)?;
    y.sum()?.backward()?;
    assert_eq!(x.grad().unwrap().to_vec::<f64>()?, vec![12., 1.]);
    Ok(())
}
