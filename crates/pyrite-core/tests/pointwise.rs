//! Pointwise ops, comparisons, casts, views, creation and in-place ops against PyTorch
//! (`reference/gen_pointwise.py`). Each arm names the PyTorch call it mirrors.

mod common;
use common::{one, Case};
use pyrite_core::{idx, DType, Result, RoundingMode, Scalar, Tensor};

fn scalar(v: &serde_json::Value) -> Scalar {
    if let Some(i) = v.as_i64() {
        Scalar::Int(i)
    } else {
        Scalar::Float(v.as_f64().unwrap())
    }
}

fn opt_scalar(c: &Case, key: &str) -> Option<Scalar> {
    c.opt(key).map(scalar)
}

fn dtype(c: &Case) -> DType {
    DType::from_name(c.s("dtype")).unwrap()
}

fn bool_tensor(b: bool) -> Result<Tensor> {
    Tensor::scalar(b)
}

fn run(c: &Case) -> Result<Vec<Tensor>> {
    let x = |i| c.x(i);
    match c.op.as_str() {
        // torch.<op>(a, b)
        "add" => one(x(0).add(x(1))),
        "sub" => one(x(0).sub(x(1))),
        "mul" => one(x(0).mul(x(1))),
        "div" => one(x(0).div(x(1))),
        "remainder" => one(x(0).remainder(x(1))),
        "fmod" => one(x(0).fmod(x(1))),
        "pow" => one(x(0).pow(x(1))),
        "maximum" => one(x(0).maximum(x(1))),
        "minimum" => one(x(0).minimum(x(1))),
        "atan2" => one(x(0).atan2(x(1))),
        // torch.div(a, b, rounding_mode=...)
        "div_mode" => {
            let mode = if c.s("mode") == "floor" { RoundingMode::Floor } else { RoundingMode::Trunc };
            one(x(0).div_mode(x(1), mode))
        }
        // torch.<op>(a, scalar)
        "add_scalar" => one(x(0).add_scalar(scalar(c.arg("other")))),
        "sub_scalar" => one(x(0).sub_scalar(scalar(c.arg("other")))),
        "mul_scalar" => one(x(0).mul_scalar(scalar(c.arg("other")))),
        "div_scalar" => one(x(0).div_scalar(scalar(c.arg("other")))),
        "pow_scalar" => one(x(0).pow_scalar(scalar(c.arg("other")))),
        "remainder_scalar" => one(x(0).remainder_scalar(scalar(c.arg("other")))),
        // torch.maximum(a, torch.tensor(s)): a 0-d tensor, not a Python scalar
        "maximum_scalar" => {
            let s = scalar(c.arg("other"));
            let t = match s {
                Scalar::Int(i) => Tensor::scalar(i)?,
                _ => Tensor::scalar(s.to_f64() as f32)?,
            };
            one(x(0).maximum(&t))
        }
        // torch.<op>(a)
        "neg" => one(x(0).neg()),
        "abs" => one(x(0).abs()),
        "sign" => one(x(0).sign()),
        "sqrt" => one(x(0).sqrt()),
        "rsqrt" => one(x(0).rsqrt()),
        "square" => one(x(0).square()),
        "exp" => one(x(0).exp()),
        "exp2" => one(x(0).exp2()),
        "log" => one(x(0).log()),
        "log2" => one(x(0).log2()),
        "log10" => one(x(0).log10()),
        "log1p" => one(x(0).log1p()),
        "expm1" => one(x(0).expm1()),
        "sin" => one(x(0).sin()),
        "cos" => one(x(0).cos()),
        "tan" => one(x(0).tan()),
        "asin" => one(x(0).asin()),
        "acos" => one(x(0).acos()),
        "atan" => one(x(0).atan()),
        "sinh" => one(x(0).sinh()),
        "cosh" => one(x(0).cosh()),
        "tanh" => one(x(0).tanh()),
        "sigmoid" => one(x(0).sigmoid()),
        "relu" => one(x(0).relu()),
        "silu" => one(x(0).silu()),
        "mish" => one(x(0).mish()),
        "erf" => one(x(0).erf()),
        "erfinv" => one(x(0).erfinv()),
        "floor" => one(x(0).floor()),
        "ceil" => one(x(0).ceil()),
        "round" => one(x(0).round()),
        "trunc" => one(x(0).trunc()),
        "frac" => one(x(0).frac()),
        "reciprocal" => one(x(0).reciprocal()),
        "round_decimals" => one(x(0).round_decimals(c.i("decimals") as i32)), // torch.round(a, decimals=d)
        "gelu" => one(x(0).gelu(c.s("approximate") == "tanh")),               // F.gelu(a, approximate=...)
        "softplus" => one(x(0).softplus(c.f("beta"), c.f("threshold"))), // F.softplus(a, beta, threshold)
        // torch.clamp(a, min, max)
        "clamp" => one(x(0).clamp(opt_scalar(c, "min"), opt_scalar(c, "max"))),
        "clamp_tensor" => one(x(0).clamp_tensor(Some(x(1)), Some(x(2)))),
        "lerp" => one(x(0).lerp(x(1), x(2))),
        "lerp_scalar" => one(x(0).lerp_scalar(x(1), c.f("weight"))),
        "where" => one(x(1).where_(x(0), x(2))), // torch.where(c, a, b)
        "nan_to_num" => one(x(0).nan_to_num(
            c.opt("nan").map_or(0.0, |v| v.as_f64().unwrap()),
            c.opt("posinf").map(|v| v.as_f64().unwrap()),
            c.opt("neginf").map(|v| v.as_f64().unwrap()),
        )),
        // comparisons
        "eq" => one(x(0).eq(x(1))),
        "ne" => one(x(0).ne(x(1))),
        "lt" => one(x(0).lt(x(1))),
        "le" => one(x(0).le(x(1))),
        "gt" => one(x(0).gt(x(1))),
        "ge" => one(x(0).ge(x(1))),
        "eq_scalar" => one(x(0).eq_scalar(c.f("other"))),
        "ne_scalar" => one(x(0).ne_scalar(c.f("other"))),
        "lt_scalar" => one(x(0).lt_scalar(c.f("other"))),
        "le_scalar" => one(x(0).le_scalar(c.f("other"))),
        "gt_scalar" => one(x(0).gt_scalar(c.f("other"))),
        "ge_scalar" => one(x(0).ge_scalar(c.f("other"))),
        "logical_and" => one(x(0).logical_and(x(1))),
        "logical_or" => one(x(0).logical_or(x(1))),
        "logical_xor" => one(x(0).logical_xor(x(1))),
        "logical_not" => one(x(0).logical_not()),
        "isnan" => one(x(0).isnan()),
        "isinf" => one(x(0).isinf()),
        "isfinite" => one(x(0).isfinite()),
        "isclose" => one(x(0).isclose(x(1), c.f("rtol"), c.f("atol"), c.b("equal_nan"))),
        "allclose" => one(bool_tensor(x(0).allclose(x(1), c.f("rtol"), c.f("atol"), c.b("equal_nan"))?)),
        // casts: a.to(dtype)
        "to" => one(x(0).to_dtype(dtype(c))),
        // views (values compared after the view)
        "contiguous" => one(x(0).contiguous()),
        "reshape" => one(x(0).reshape(c.dims("shape"))),
        "view" => one(x(0).view(c.dims("shape"))),
        "flatten" => one(x(0).flatten(c.i("start"), c.i("end"))),
        "diagonal" => one(x(0).diagonal(c.i("offset"), c.i("d1"), c.i("d2"))),
        "unfold" => one(x(0).unfold(c.i("dim"), c.u("size"), c.u("step"))),
        "narrow" => one(x(0).narrow(c.i("dim"), c.i("start"), c.u("length"))),
        "select" => one(x(0).select(c.i("dim"), c.i("index"))),
        // a[:, 1::2, ::3]
        "slice" => one(x(0).slice(1, Some(1), None, 2)?.slice(2, None, None, 3)),
        "index_newaxis" => one(x(0).index(&idx![1, ..., None, 1..3])), // a[1, ..., None, 1:3]
        "squeeze" => one(x(0).squeeze()),
        "squeeze_dim" => one(x(0).squeeze_dim(c.i("dim"))),
        // creation
        "arange" => one(Tensor::arange(c.f("start"), c.f("end"), c.f("step"), dtype(c))),
        "linspace" => one(Tensor::linspace(c.f("start"), c.f("end"), c.u("steps"), dtype(c))),
        "logspace" => one(Tensor::logspace(c.f("start"), c.f("end"), c.u("steps"), c.f("base"), dtype(c))),
        "eye" => one(Tensor::eye(c.u("n"), c.u("m"), dtype(c))),
        "tril" => one(x(0).tril(c.i("diagonal"))),
        "triu" => one(x(0).triu(c.i("diagonal"))),
        "one_hot" => one(x(0).one_hot(c.opt("num_classes").map(|v| v.as_u64().unwrap() as usize))),
        "full" => one(Tensor::full(c.sizes("shape"), scalar(c.arg("value")), dtype(c))),
        // in place (on a deep copy, as the PyTorch call clones first)
        "add_view_" => {
            let t = x(0).deep_clone()?;
            t.slice(1, Some(1), Some(3), 1)?.add_(x(1))?;
            one(Ok(t))
        }
        "mul_" => {
            let t = x(0).deep_clone()?;
            t.mul_(x(1))?;
            one(Ok(t))
        }
        "add_" => {
            let t = x(0).deep_clone()?;
            t.add_(x(1))?;
            one(Ok(t))
        }
        "div_scalar_" => {
            let t = x(0).deep_clone()?;
            t.div_scalar_(scalar(c.arg("other")))?;
            one(Ok(t))
        }
        "masked_fill_" => {
            let t = x(0).deep_clone()?;
            t.masked_fill_(x(1), scalar(c.arg("value")))?;
            one(Ok(t))
        }
        "masked_fill" => one(x(0).masked_fill(x(1), scalar(c.arg("value")))),
        "clamp_" => {
            let t = x(0).deep_clone()?;
            t.clamp_(Some((-0.5).into()), Some(0.5.into()))?;
            one(Ok(t))
        }
        "fill_view" => {
            let t = x(0).deep_clone()?;
            t.t()?.select(0, 1)?.fill_(3.0)?;
            one(Ok(t))
        }
        "copy_" => {
            let t = x(0).deep_clone()?;
            t.copy_(x(1))?;
            one(Ok(t))
        }
        _ => c.unhandled(),
    }
}

#[test]
fn pointwise_matches_pytorch() {
    common::check_family("pointwise", run);
}
