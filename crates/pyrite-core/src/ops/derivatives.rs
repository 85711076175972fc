//! Backward formulas of the pointwise ops (PyTorch's `derivatives.yaml` for them): binary ops
//! by [`BinaryOp`], unary ops by name. Each public op computes its result with a kernel that
//! never records, then calls [`binary_ad`] / [`unary_ad`], which record a node when an input
//! requires grad. Formulas use public tensor ops, so they are differentiable again.

use super::binary::{binary, BinaryOp};
use super::Out;
use crate::autograd::record::{needs_grad, record1, Save};
use crate::{bail, Result, Tensor};

/// The error PyTorch gives for `out=` with an input that requires grad.
pub(crate) fn check_out(name: &str, inputs: &[&Tensor]) -> Result<()> {
    if needs_grad(inputs) {
        bail!(
            Autograd,
            "{name}(): functions with out=... arguments don't support automatic differentiation, but one of the arguments requires grad."
        );
    }
    Ok(())
}

/// `a op b` with broadcasting, recorded for autograd.
pub(crate) fn binary_ad(a: &Tensor, b: &Tensor, op: BinaryOp) -> Result<Tensor> {
    let y = binary(a, b, op, Out::New)?;
    if !needs_grad(&[a, b]) || !y.dtype().is_floating_point() {
        return Ok(y);
    }
    use BinaryOp::*;
    let name = match op {
        Add => "AddBackward0",
        Sub => "SubBackward0",
        Mul => "MulBackward0",
        Div => "DivBackward0",
        FloorDiv | TruncDiv => "DivBackward1",
        Remainder => "RemainderBackward0",
        Fmod => "FmodBackward0",
        Pow => "PowBackward1",
        Maximum => "MaximumBackward0",
        Minimum => "MinimumBackward0",
        Atan2 => "Atan2Backward0",
    };
    let saves: &[Save] = match op {
        Add | Sub | FloorDiv | TruncDiv => &[],
        Pow => &[Save::Input(a), Save::Input(b), Save::Output(0)],
        _ => &[Save::Input(a), Save::Input(b)],
    };
    record1(name, &[a, b], y, saves, move |ctx, g| {
        let g = &g[0];
        let (na, nb) = (ctx.needs_input_grad(0), ctx.needs_input_grad(1));
        let (ga, gb) = match op {
            Add => (Some(g.clone()), Some(g.clone())),
            Sub => (Some(g.clone()), nb.then(|| g.neg()).transpose()?),
            Mul => {
                let (a, b) = (ctx.saved(0)?, ctx.saved(1)?);
                (na.then(|| g.mul(&b)).transpose()?, nb.then(|| g.mul(&a)).transpose()?)
            }
            Div => {
                let (a, b) = (ctx.saved(0)?, ctx.saved(1)?);
                // d(a/b)/db = -a / b^2
                let gb = nb.then(|| g.neg()?.mul(&a)?.div(&b.mul(&b)?)).transpose()?;
                (na.then(|| g.div(&b)).transpose()?, gb)
            }
            FloorDiv | TruncDiv => (Some(g.zeros_like()?), Some(g.zeros_like()?)),
            Remainder | Fmod => {
                let (a, b) = (ctx.saved(0)?, ctx.saved(1)?);
                let q = if op == Remainder { BinaryOp::FloorDiv } else { BinaryOp::TruncDiv };
                let gb = nb.then(|| g.neg()?.mul(&binary(&a, &b, q, Out::New)?)).transpose()?;
                (Some(g.clone()), gb)
            }
            Pow => {
                let (a, b, y) = (ctx.saved(0)?, ctx.saved(1)?, ctx.saved(2)?);
                // d a^b / da = b a^(b-1), taken as 0 where b == 0 (PyTorch's convention)
                let ga = na
                    .then(|| {
                        let d = b.mul(&a.pow(&b.sub_scalar(1.0)?)?)?;
                        g.mul(&d.masked_fill(&b.eq_scalar(0.0)?, 0.0)?)
                    })
                    .transpose()?;
                // d a^b / db = a^b ln a, taken as 0 where a == 0 and b >= 0
                let gb = nb
                    .then(|| {
                        let d = y.mul(&a.log()?)?;
                        let zero = a.eq_scalar(0.0)?.logical_and(&b.ge_scalar(0.0)?)?;
                        g.mul(&d.masked_fill(&zero, 0.0)?)
                    })
                    .transpose()?;
                (ga, gb)
            }
            Maximum | Minimum => {
                let (a, b) = (ctx.saved(0)?, ctx.saved(1)?);
                // ties split the gradient in half
                let half = g.div_scalar(2.0)?;
                let tie = a.eq(&b)?;
                let shared = half.where_(&tie, g)?;
                let (a_loses, b_loses) =
                    if op == Maximum { (a.lt(&b)?, a.gt(&b)?) } else { (a.gt(&b)?, a.lt(&b)?) };
                (
                    na.then(|| shared.masked_fill(&a_loses, 0.0)).transpose()?,
                    nb.then(|| shared.masked_fill(&b_loses, 0.0)).transpose()?,
                )
            }
            Atan2 => {
                let (a, b) = (ctx.saved(0)?, ctx.saved(1)?);
                let r = a.mul(&a)?.add(&b.mul(&b)?)?;
                (
                    na.then(|| g.mul(&b)?.div(&r)).transpose()?,
                    nb.then(|| g.neg()?.mul(&a)?.div(&r)).transpose()?,
                )
            }
        };
        Ok(vec![ga, gb])
    })
}

/// Records unary op `op` (its PyTorch name) that computed `y` from `x`.
pub(crate) fn unary_ad(op: &'static str, x: &Tensor, y: Tensor) -> Result<Tensor> {
    if !needs_grad(&[x]) || !y.dtype().is_floating_point() {
        return Ok(y);
    }
    // Formulas in terms of the output save it; the rest save the input.
    let uses_output = matches!(
        op,
        "exp"
            | "exp2"
            | "expm1"
            | "sqrt"
            | "rsqrt"
            | "tan"
            | "tanh"
            | "sigmoid"
            | "relu"
            | "reciprocal"
            | "erfinv"
    );
    let zero_grad = matches!(op, "sign" | "floor" | "ceil" | "round" | "trunc");
    let save: &[Save] = if zero_grad || op == "neg" || op == "frac" {
        &[]
    } else if uses_output {
        &[Save::Output(0)]
    } else {
        &[Save::Input(x)]
    };
    let name = node_name(op);
    record1(name, &[x], y, save, move |ctx, g| {
        let g = &g[0];
        let s = || ctx.saved(0);
        let gx = match op {
            "neg" => g.neg()?,
            "frac" => g.clone(),
            _ if zero_grad => g.zeros_like()?,
            "exp" => g.mul(&s()?)?,
            "exp2" => g.mul(&s()?)?.mul_scalar(std::f64::consts::LN_2)?,
            "expm1" => g.mul(&s()?.add_scalar(1.0)?)?,
            "sqrt" => g.div(&s()?.mul_scalar(2.0)?)?,
            "rsqrt" => g.mul(&s()?.pow_scalar(3.0)?)?.mul_scalar(-0.5)?,
            "tan" => g.mul(&s()?.square()?.add_scalar(1.0)?)?,
            "tanh" => g.mul(&s()?.square()?.rsub_scalar(1.0)?)?,
            "sigmoid" => {
                let y = s()?;
                g.mul(&y.mul(&y.rsub_scalar(1.0)?)?)?
            }
            "relu" => g.mul(&s()?.gt_scalar(0.0)?.to_dtype(g.dtype())?)?,
            "reciprocal" => g.mul(&s()?.square()?)?.neg()?,
            "erfinv" => g.mul(&s()?.square()?.exp()?)?.mul_scalar(std::f64::consts::PI.sqrt() / 2.0)?,
            "log" => g.div(&s()?)?,
            "log2" => g.div(&s()?.mul_scalar(std::f64::consts::LN_2)?)?,
            "log10" => g.div(&s()?.mul_scalar(std::f64::consts::LN_10)?)?,
            "log1p" => g.div(&s()?.add_scalar(1.0)?)?,
            "sin" => g.mul(&s()?.cos()?)?,
            "cos" => g.mul(&s()?.sin()?)?.neg()?,
            "asin" => g.mul(&s()?.square()?.rsub_scalar(1.0)?.rsqrt()?)?,
            "acos" => g.mul(&s()?.square()?.rsub_scalar(1.0)?.rsqrt()?)?.neg()?,
            "atan" => g.div(&s()?.square()?.add_scalar(1.0)?)?,
            "sinh" => g.mul(&s()?.cosh()?)?,
            "cosh" => g.mul(&s()?.sinh()?)?,
            "erf" => g.mul(&s()?.square()?.neg()?.exp()?)?.mul_scalar(2.0 / std::f64::consts::PI.sqrt())?,
            "abs" => g.mul(&s()?.sign()?)?,
            "square" => g.mul(&s()?.mul_scalar(2.0)?)?,
            "silu" => {
                let x = s()?;
                let sg = x.sigmoid()?;
                g.mul(&sg.mul(&x.mul(&sg.rsub_scalar(1.0)?)?.add_scalar(1.0)?)?)?
            }
            "mish" => {
                let x = s()?;
                let t = x.softplus(1.0, 20.0)?.tanh()?;
                let d = t.add(&x.mul(&x.sigmoid()?)?.mul(&t.square()?.rsub_scalar(1.0)?)?)?;
                g.mul(&d)?
            }
            "gelu" => {
                // x Phi(x): Phi(x) + x phi(x)
                let x = s()?;
                let cdf =
                    x.mul_scalar(std::f64::consts::FRAC_1_SQRT_2)?.erf()?.add_scalar(1.0)?.mul_scalar(0.5)?;
                let pdf =
                    x.square()?.mul_scalar(-0.5)?.exp()?.mul_scalar(
                        0.5 * std::f64::consts::FRAC_2_SQRT_PI * std::f64::consts::FRAC_1_SQRT_2,
                    )?;
                g.mul(&cdf.add(&x.mul(&pdf)?)?)?
            }
            "gelu_tanh" => {
                // 0.5 x (1 + tanh(u)), u = k (x + c x^3)
                let x = s()?;
                let k = (2.0 / std::f64::consts::PI).sqrt();
                let c = 0.044715;
                let u = x.add(&x.pow_scalar(3.0)?.mul_scalar(c)?)?.mul_scalar(k)?;
                let t = u.tanh()?;
                let du = x.square()?.mul_scalar(3.0 * c)?.add_scalar(1.0)?.mul_scalar(k)?;
                let left = t.add_scalar(1.0)?.mul_scalar(0.5)?;
                let right = x.mul(&t.square()?.rsub_scalar(1.0)?)?.mul(&du)?.mul_scalar(0.5)?;
                g.mul(&left.add(&right)?)?
            }
            _ => bail!(NotImplemented, "the derivative for '{op}' is not implemented"),
        };
        Ok(vec![Some(gx)])
    })
}

/// PyTorch's node name for a unary op: `exp` -> `ExpBackward0`.
fn node_name(op: &str) -> String {
    let base = match op {
        "gelu_tanh" => "Gelu",
        "log1p" => "Log1P",
        "expm1" => "Expm1",
        "exp2" => "Exp2",
        "log2" => "Log2",
        "log10" => "Log10",
        _ => "",
    };
    if !base.is_empty() {
        return format!("{base}Backward0");
    }
    let mut c = op.chars();
    let first = c.next().map(|f| f.to_ascii_uppercase()).unwrap_or_default();
    format!("{first}{}Backward0", c.as_str())
}
