//! Every differentiable op's gradient, checked twice: against PyTorch's gradients
//! (reference/gen_autograd.py: same inputs, same upstream gradient, f32 and f64) and by
//! finite differences in f64 (`gradcheck`, and `gradgradcheck` for second derivatives).

mod common;

use common::Case;
use pyrite_core::{DType, Result, Scalar, Tensor};

/// The Pyrite call mirroring the case's PyTorch call, on inputs `x` (without the upstream
/// gradient).
fn op(c: &Case, x: &[Tensor]) -> Result<Tensor> {
    let a = &x[0];
    let dims = |k: &str| c.dims(k);
    Ok(match c.op.as_str() {
        "add" => a.add(&x[1])?,
        "sub" => a.sub(&x[1])?,
        "mul" => a.mul(&x[1])?,
        "div" => a.div(&x[1])?,
        "maximum" => a.maximum(&x[1])?,
        "minimum" => a.minimum(&x[1])?,
        "atan2" => a.atan2(&x[1])?,
        "pow" => a.pow(&x[1])?,
        "remainder" => a.remainder(&x[1])?,
        "mul_scalar" => a.mul_scalar(2.5)?,
        "pow_scalar" => a.pow_scalar(3)?,
        "rsub_scalar" => a.rsub_scalar(1)?,
        "exp" => a.exp()?,
        "log" => a.log()?,
        "sqrt" => a.sqrt()?,
        "rsqrt" => a.rsqrt()?,
        "sin" => a.sin()?,
        "cos" => a.cos()?,
        "tan" => a.tan()?,
        "tanh" => a.tanh()?,
        "sigmoid" => a.sigmoid()?,
        "relu" => a.relu()?,
        "abs" => a.abs()?,
        "neg" => a.neg()?,
        "square" => a.square()?,
        "reciprocal" => a.reciprocal()?,
        "log1p" => a.log1p()?,
        "expm1" => a.expm1()?,
        "log2" => a.log2()?,
        "log10" => a.log10()?,
        "exp2" => a.exp2()?,
        "asin" => a.asin()?,
        "acos" => a.acos()?,
        "atan" => a.atan()?,
        "sinh" => a.sinh()?,
        "cosh" => a.cosh()?,
        "erf" => a.erf()?,
        "erfinv" => a.erfinv()?,
        "floor" => a.floor()?,
        "frac" => a.frac()?,
        "silu" => a.silu()?,
        "gelu" => a.gelu(false)?,
        "gelu_tanh" => a.gelu(true)?,
        "mish" => a.mish()?,
        "softplus" => a.softplus(2.0, 3.0)?,
        "clamp" => a.clamp(Some(Scalar::Float(-0.5)), Some(Scalar::Float(0.7)))?,
        "lerp" => a.lerp(&x[1], &x[2])?,
        "where" => x[1].where_(a, &x[2])?,
        "masked_fill" => a.masked_fill(&x[1], 2.0)?,
        "sum" => a.sum()?,
        "sum_dims" => a.sum_dims(&dims("dims"), c.b("keepdim"))?,
        "mean_dims" => a.mean_dims(&dims("dims"), c.b("keepdim"))?,
        "mean" => a.mean()?,
        "prod_dims" => a.prod_dims(&dims("dims"), c.b("keepdim"))?,
        "prod" => a.prod()?,
        "nansum_dims" => a.nansum_dims(&dims("dims"), c.b("keepdim"))?,
        "nanmean_dims" => a.nanmean_dims(&dims("dims"), c.b("keepdim"))?,
        "amax" => a.amax(&dims("dims"), c.b("keepdim"))?,
        "amin" => a.amin(&dims("dims"), c.b("keepdim"))?,
        "max" => a.max()?,
        "max_dim" => a.max_dim(c.i("dim"), c.b("keepdim"))?.0,
        "min_dim" => a.min_dim(c.i("dim"), c.b("keepdim"))?.0,
        "var_dims" => a.var_dims(&dims("dims"), c.f("correction"), c.b("keepdim"))?,
        "std_dims" => a.std_dims(&dims("dims"), c.f("correction"), c.b("keepdim"))?,
        "logsumexp" => a.logsumexp(&dims("dims"), c.b("keepdim"))?,
        "norm" => a.norm(c.s("ord").parse().unwrap(), &dims("dims"), c.b("keepdim"))?,
        "softmax" => a.softmax(c.i("dim"))?,
        "log_softmax" => a.log_softmax(c.i("dim"))?,
        "reshape" => a.reshape(c.dims("shape").as_slice())?,
        "permute" => {
            let w = Tensor::arange(0.0, 4.0, 1.0, a.dtype())?.view([1, 1, 4])?;
            a.permute(&dims("dims"))?.mul(&w)?
        }
        "narrow" => a.narrow(c.i("dim"), c.i("start"), c.u("len"))?,
        "slice" => a.slice(c.i("dim"), Some(c.i("start")), None, c.i("step"))?,
        "select" => a.select(c.i("dim"), c.i("index"))?,
        "diagonal" => a.diagonal(c.i("offset"), c.i("d1"), c.i("d2"))?,
        "expand" => a.expand(c.dims("shape").as_slice())?,
        "squeeze_unsqueeze" => a.squeeze_dim(1)?.unsqueeze(0)?,
        "unfold" => a.unfold(c.i("dim"), c.u("size"), c.u("step"))?,
        "matmul" => a.matmul(&x[1])?,
        "mm" => a.mm(&x[1])?,
        "addmm" => a.addmm(&x[1], &x[2], 0.5, 2.0)?,
        "baddbmm" => a.baddbmm(&x[1], &x[2], 1, 1.5)?,
        "einsum" => pyrite_core::einsum(c.s("eq"), &x.iter().collect::<Vec<_>>())?,
        "linear" => a.matmul(&x[1].t()?)?.add(&x[2])?,
        "bmm" => a.bmm(&x[1])?,
        "cat" => Tensor::cat(&[a, &x[1]], c.i("dim"))?,
        "stack" => Tensor::stack(&[a, &x[1]], c.i("dim"))?,
        "index_select" => a.index_select(c.i("dim"), &x[1])?,
        "gather" => a.gather(c.i("dim"), &x[1])?,
        "to_dtype" => {
            let other = if a.dtype() == DType::F32 { DType::F64 } else { DType::F32 };
            a.to_dtype(other)?.mul_scalar(2)?
        }
        _ => panic!("case {}: op '{}' has no Pyrite mapping ({})", c.name, c.op, c.call),
    })
}

#[test]
fn gradients_match_pytorch() {
    common::check_gradients("autograd", op);
}

/// Cases finite differences cannot check: points where the function is not differentiable
/// (ties), where only PyTorch's convention can be checked, and an f64 -> f32 cast.
const KINKED: &[&str] = &[
    "amax_ties",
    "amin_ties",
    "max_all_ties",
    "maximum_bcast",
    "minimum_bcast",
    "norm_pinf",
    "to_dtype",
    "nansum",
    "nanmean",
];

/// Cases whose second derivative is not smooth enough (or zero) for gradgradcheck.
const NO_GRADGRAD: &[&str] =
    &["floor", "frac", "relu", "abs", "clamp", "remainder", "max_dim", "min_dim", "norm_p1"];

#[test]
fn gradients_match_finite_differences() {
    let checked = common::check_finite_differences("autograd", op, KINKED, NO_GRADGRAD);
    assert!(checked > 80, "only {checked} cases checked");
}
