//! `torch.autograd.gradcheck` and `gradgradcheck`: compare the gradients autograd computes
//! with finite differences. Use f64 inputs; f32 is too coarse for the default tolerances.
//!
//! ```
//! use pyrite_core::autograd::{gradcheck, gradgradcheck, GradcheckOptions};
//! use pyrite_core::{DType, Tensor};
//! let x = Tensor::randn([3, 4], DType::F64)?.requires_grad_(true)?;
//! let f = |xs: &[Tensor]| xs[0].tanh()?.mul(&xs[0])?.sum_dims(&[1], false);
//! gradcheck(f, &[x.clone()], GradcheckOptions::default())?;
//! gradgradcheck(f, &[x], None, GradcheckOptions::default())?;
//! # Ok::<(), pyrite_core::Error>(())
//! ```

use crate::random::Generator;
use crate::{bail, DType, Result, Tensor};

/// Step and tolerances of [`gradcheck`] (PyTorch's defaults).
#[derive(Clone, Copy, Debug)]
pub struct GradcheckOptions {
    /// Finite-difference step.
    pub eps: f64,
    /// Absolute tolerance.
    pub atol: f64,
    /// Relative tolerance.
    pub rtol: f64,
}

impl Default for GradcheckOptions {
    fn default() -> Self {
        GradcheckOptions { eps: 1e-6, atol: 1e-5, rtol: 1e-3 }
    }
}

/// Checks the gradients of `f` at `inputs` (those that require grad) against central finite
/// differences: every element of the Jacobian must satisfy
/// `|analytical - numerical| <= atol + rtol * |numerical|`. Returns an error naming the
/// output and input whose Jacobians differ, with both Jacobians.
pub fn gradcheck(
    f: impl Fn(&[Tensor]) -> Result<Tensor>,
    inputs: &[Tensor],
    opts: GradcheckOptions,
) -> Result<()> {
    let diff: Vec<usize> = (0..inputs.len()).filter(|&i| inputs[i].requires_grad()).collect();
    if diff.is_empty() {
        bail!(Value, "gradcheck expects at least one input tensor to require gradient, but none of them have requires_grad=True.");
    }
    let out = f(inputs)?;
    let n_out = out.numel();
    // analytical[i][j * n_in + k]: d out[j] / d input_i[k], one backward per output element.
    let mut analytical: Vec<Vec<f64>> = diff.iter().map(|&i| vec![0.0; n_out * inputs[i].numel()]).collect();
    if out.requires_grad() {
        let refs: Vec<&Tensor> = diff.iter().map(|&i| &inputs[i]).collect();
        for j in 0..n_out {
            let mut onehot = vec![0.0f64; n_out];
            onehot[j] = 1.0;
            let go = Tensor::from_vec(onehot, out.shape().clone())?.to_dtype(out.dtype())?;
            let grads = super::grad(&[&out], &refs, Some(&[&go]), Some(true), false, true)?;
            for (a, (g, &i)) in analytical.iter_mut().zip(grads.iter().zip(&diff)) {
                if let Some(g) = g {
                    let n_in = inputs[i].numel();
                    let v = g.to_dtype(DType::F64)?.to_vec::<f64>()?;
                    a[j * n_in..(j + 1) * n_in].copy_from_slice(&v);
                }
            }
        }
    }
    // numerical, by central differences on copies of the inputs (which keep requires_grad, so
    // that a function that differentiates inside, as gradgradcheck's does, still can)
    for (a, &i) in analytical.iter().zip(&diff) {
        let x = &inputs[i];
        let base = x.to_dtype(DType::F64)?.to_vec::<f64>()?;
        let n_in = base.len();
        let mut numerical = vec![0.0; n_out * n_in];
        for k in 0..n_in {
            let eval = |delta: f64| -> Result<Vec<f64>> {
                let mut v = base.clone();
                v[k] += delta;
                let xk = Tensor::from_vec(v, x.shape().clone())?.to_dtype(x.dtype())?.requires_grad_(true)?;
                let mut args = inputs.to_vec();
                args[i] = xk;
                let y = f(&args)?;
                y.to_dtype(DType::F64)?.to_vec::<f64>()
            };
            let plus = eval(opts.eps)?;
            let minus = eval(-opts.eps)?;
            for j in 0..n_out {
                numerical[j * n_in + k] = (plus[j] - minus[j]) / (2.0 * opts.eps);
            }
        }
        let bad = a.iter().zip(&numerical).any(|(a, n)| !((a - n).abs() <= opts.atol + opts.rtol * n.abs()));
        if bad {
            bail!(
                Value,
                "Jacobian mismatch for output 0 with respect to input {i},\nnumerical:{}\nanalytical:{}",
                show(&numerical, n_out, n_in),
                show(a, n_out, n_in)
            );
        }
    }
    Ok(())
}

/// Checks second derivatives: [`gradcheck`] of the map `(inputs, v) -> vjp(f, inputs, v)`,
/// computed with `create_graph`. `grad_outputs` (`v`) defaults to random values.
pub fn gradgradcheck(
    f: impl Fn(&[Tensor]) -> Result<Tensor>,
    inputs: &[Tensor],
    grad_outputs: Option<Tensor>,
    opts: GradcheckOptions,
) -> Result<()> {
    let out = {
        let _ng = super::no_grad();
        f(inputs)?
    };
    let v = match grad_outputs {
        Some(v) => v,
        None => {
            let g = Generator::new(0);
            Tensor::randn_with(out.shape().clone(), out.dtype(), Some(&g))?.requires_grad_(true)?
        }
    };
    let diff: Vec<usize> = (0..inputs.len()).filter(|&i| inputs[i].requires_grad()).collect();
    let n = inputs.len();
    let vjp = |xs: &[Tensor]| -> Result<Tensor> {
        let (args, v) = xs.split_at(n);
        let y = f(args)?;
        let refs: Vec<&Tensor> = diff.iter().map(|&i| &args[i]).collect();
        let grads = super::grad(&[&y], &refs, Some(&[&v[0]]), Some(true), true, true)?;
        let flat = grads
            .into_iter()
            .zip(&diff)
            .map(|(g, &i)| match g {
                Some(g) => g.reshape([g.numel()]),
                None => Tensor::zeros([args[i].numel()], args[i].dtype()),
            })
            .collect::<Result<Vec<_>>>()?;
        Tensor::cat(&flat, 0)
    };
    let mut all = inputs.to_vec();
    all.push(v);
    gradcheck(vjp, &all, opts)
}

fn show(m: &[f64], rows: usize, cols: usize) -> String {
    // PyTorch prints the Jacobian as (input elements) x (output elements).
    let mut s = String::new();
    for k in 0..cols.min(8) {
        s.push_str("\n[");
        for j in 0..rows.min(8) {
            s.push_str(&format!("{:>10.4}", m[j * cols + k]));
        }
        s.push(']');
    }
    s
}
