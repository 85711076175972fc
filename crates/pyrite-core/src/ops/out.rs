//! `out=` forms of the ops whose kernels fill a fresh buffer (reductions, scans, joins, index
//! ops, sorts, softmax, vector products, lerp, nan_to_num, square): `x.sum_dims_out(&[1], false, &out)` is
//! `torch.sum(x, 1, out=out)`.
//!
//! The result is computed into a buffer from the caching allocator (reused, so no page faults)
//! and copied into `out`; an `out` that shares storage with an input is therefore safe. The
//! elementwise ops write into `out` directly (their `_out` forms live with them). As everywhere
//! in Pyrite, `out` must already have the result's shape (PyTorch would resize it), a dtype the
//! result casts to (indices: int64), and no argument may require grad.

use super::binary::can_cast;
use super::derivatives::check_out as check_no_grad;
use super::linalg::check_out;
use crate::{DType, Result, Tensor};

/// Whether an op's `out` may have another dtype than its result, which is then cast to it (as
/// PyTorch allows for sums, means, scans and joins: a wider float, an int to a float), or must
/// have exactly the result's dtype (as PyTorch requires for amax, gather, sort, softmax, ...).
#[derive(Clone, Copy, PartialEq)]
enum Cast {
    Allowed,
    Exact,
}
use Cast::*;

/// The dtype `out` must have for a result of `dtype`.
fn out_dtype(dtype: DType, out: &Tensor, cast: Cast) -> DType {
    if cast == Allowed && can_cast(dtype, out.dtype()) {
        out.dtype()
    } else {
        dtype
    }
}

/// The checks every out form makes before computing: no argument requires grad (PyTorch's
/// error), and every out may be written.
fn check_outs(op: &str, inputs: &[&Tensor], outs: &[&Tensor]) -> Result<()> {
    let all: Vec<&Tensor> = inputs.iter().chain(outs).copied().collect();
    check_no_grad(op, &all)?;
    outs.iter().try_for_each(|o| o.check_inplace_allowed())
}

/// Checks `out` against the result `r` and copies `r` into it.
fn copy_result(op: &str, cast: Cast, out: &Tensor, r: &Tensor) -> Result<()> {
    check_out(out, r.dims(), out_dtype(r.dtype(), out, cast), op)?;
    out.copy_(r)?;
    Ok(())
}

/// Computes `compute()` and copies it into `out` after checking `out` against it.
fn write_out(
    op: &str,
    cast: Cast,
    inputs: &[&Tensor],
    out: &Tensor,
    compute: impl FnOnce() -> Result<Tensor>,
) -> Result<Tensor> {
    check_outs(op, inputs, &[out])?;
    copy_result(op, cast, out, &compute()?)?;
    Ok(out.clone())
}

/// [`write_out`] for ops with two results (values and indices), each of its exact dtype.
fn write_out2(
    op: &str,
    inputs: &[&Tensor],
    outs: (&Tensor, &Tensor),
    compute: impl FnOnce() -> Result<(Tensor, Tensor)>,
) -> Result<(Tensor, Tensor)> {
    check_outs(op, inputs, &[outs.0, outs.1])?;
    if outs.0.same_storage(outs.1) {
        crate::bail!(Value, "{op}: the values and indices outputs must not share memory");
    }
    let (v, i) = compute()?;
    // Both outs are checked before either is written.
    check_out(outs.0, v.dims(), v.dtype(), op)?;
    check_out(outs.1, i.dims(), i.dtype(), op)?;
    outs.0.copy_(&v)?;
    outs.1.copy_(&i)?;
    Ok((outs.0.clone(), outs.1.clone()))
}

/// `out=` forms of reductions over a list of dims.
macro_rules! dims_out {
    ($($name:ident => $base:ident, $torch:literal, $cast:ident;)*) => {
        impl Tensor {$(
            #[doc = concat!("`torch.", $torch, "(x, dims, keepdim, out=out)`: [`Tensor::", stringify!($base), "`] written into `out`.")]
            pub fn $name(&self, dims: &[isize], keepdim: bool, out: &Tensor) -> Result<Tensor> {
                write_out($torch, $cast, &[self], out, || self.$base(dims, keepdim))
            }
        )*}
    };
}

dims_out! {
    sum_dims_out => sum_dims, "sum", Allowed;
    nansum_dims_out => nansum_dims, "nansum", Allowed;
    mean_dims_out => mean_dims, "mean", Allowed;
    nanmean_dims_out => nanmean_dims, "nanmean", Allowed;
    prod_dims_out => prod_dims, "prod", Allowed;
    amax_out => amax, "amax", Exact;
    amin_out => amin, "amin", Exact;
    logsumexp_out => logsumexp, "logsumexp", Allowed;
    all_dims_out => all_dims, "all", Exact;
    any_dims_out => any_dims, "any", Exact;
}

/// `out=` forms of ops along one dim.
macro_rules! dim_out {
    ($($name:ident => $base:ident, $torch:literal, $cast:ident;)*) => {
        impl Tensor {$(
            #[doc = concat!("`torch.", $torch, "(x, dim, out=out)`: [`Tensor::", stringify!($base), "`] written into `out`.")]
            pub fn $name(&self, dim: isize, out: &Tensor) -> Result<Tensor> {
                write_out($torch, $cast, &[self], out, || self.$base(dim))
            }
        )*}
    };
}

dim_out! {
    cumsum_out => cumsum, "cumsum", Allowed;
    cumprod_out => cumprod, "cumprod", Allowed;
}

/// `out=` forms of products of vectors and matrices.
macro_rules! pair_out {
    ($($name:ident => $base:ident, $torch:literal, $cast:ident;)*) => {
        impl Tensor {$(
            #[doc = concat!("`torch.", $torch, "(x, other, out=out)`: [`Tensor::", stringify!($base), "`] written into `out`.")]
            pub fn $name(&self, other: &Tensor, out: &Tensor) -> Result<Tensor> {
                write_out($torch, $cast, &[self, other], out, || self.$base(other))
            }
        )*}
    };
}

pair_out! {
    dot_out => dot, "dot", Exact;
    mv_out => mv, "mv", Exact;
    outer_out => outer, "outer", Allowed;
}

/// Softmax or log-softmax into `out`: straight into it for f32 over the last dim (the common
/// case: attention scores, logits), else computed and copied.
fn softmax_out(x: &Tensor, dim: isize, log: bool, out: &Tensor) -> Result<Tensor> {
    let op = if log { "log_softmax" } else { "softmax" };
    check_outs(op, &[x], &[out])?;
    if !super::softmax::softmax_lastdim_into(x, dim, log, out)? {
        copy_result(op, Exact, out, &if log { x.log_softmax(dim)? } else { x.softmax(dim)? })?;
    }
    Ok(out.clone())
}

impl Tensor {
    /// `torch.softmax(x, dim, out=out)`.
    pub fn softmax_out(&self, dim: isize, out: &Tensor) -> Result<Tensor> {
        softmax_out(self, dim, false, out)
    }

    /// `torch.log_softmax(x, dim, out=out)`.
    pub fn log_softmax_out(&self, dim: isize, out: &Tensor) -> Result<Tensor> {
        softmax_out(self, dim, true, out)
    }

    /// `torch.var(x, dims, correction=c, keepdim=k, out=out)`.
    pub fn var_dims_out(
        &self,
        dims: &[isize],
        correction: f64,
        keepdim: bool,
        out: &Tensor,
    ) -> Result<Tensor> {
        write_out("var", Allowed, &[self], out, || self.var_dims(dims, correction, keepdim))
    }

    /// `torch.std(x, dims, correction=c, keepdim=k, out=out)`.
    pub fn std_dims_out(
        &self,
        dims: &[isize],
        correction: f64,
        keepdim: bool,
        out: &Tensor,
    ) -> Result<Tensor> {
        write_out("std", Allowed, &[self], out, || self.std_dims(dims, correction, keepdim))
    }

    /// `torch.linalg.vector_norm(x, ord, dims, keepdim, out=out)`.
    pub fn norm_out(&self, ord: f64, dims: &[isize], keepdim: bool, out: &Tensor) -> Result<Tensor> {
        write_out("norm", Exact, &[self], out, || self.norm(ord, dims, keepdim))
    }

    /// `torch.argmax(x, dim, keepdim, out=out)` (int64 indices).
    pub fn argmax_out(&self, dim: Option<isize>, keepdim: bool, out: &Tensor) -> Result<Tensor> {
        write_out("argmax", Exact, &[self], out, || self.argmax(dim, keepdim))
    }

    /// `torch.argmin(x, dim, keepdim, out=out)` (int64 indices).
    pub fn argmin_out(&self, dim: Option<isize>, keepdim: bool, out: &Tensor) -> Result<Tensor> {
        write_out("argmin", Exact, &[self], out, || self.argmin(dim, keepdim))
    }

    /// `torch.max(x, dim, keepdim, out=(values, indices))`.
    pub fn max_dim_out(
        &self,
        dim: isize,
        keepdim: bool,
        values: &Tensor,
        indices: &Tensor,
    ) -> Result<(Tensor, Tensor)> {
        write_out2("max", &[self], (values, indices), || self.max_dim(dim, keepdim))
    }

    /// `torch.min(x, dim, keepdim, out=(values, indices))`.
    pub fn min_dim_out(
        &self,
        dim: isize,
        keepdim: bool,
        values: &Tensor,
        indices: &Tensor,
    ) -> Result<(Tensor, Tensor)> {
        write_out2("min", &[self], (values, indices), || self.min_dim(dim, keepdim))
    }

    /// `torch.sort(x, dim, descending, out=(values, indices))`.
    pub fn sort_out(
        &self,
        dim: isize,
        descending: bool,
        values: &Tensor,
        indices: &Tensor,
    ) -> Result<(Tensor, Tensor)> {
        write_out2("sort", &[self], (values, indices), || self.sort(dim, descending))
    }

    /// `torch.topk(x, k, dim, largest, sorted, out=(values, indices))`.
    pub fn topk_out(
        &self,
        k: usize,
        dim: isize,
        largest: bool,
        sorted: bool,
        values: &Tensor,
        indices: &Tensor,
    ) -> Result<(Tensor, Tensor)> {
        write_out2("topk", &[self], (values, indices), || self.topk(k, dim, largest, sorted))
    }

    /// `torch.index_select(x, dim, index, out=out)`.
    pub fn index_select_out(&self, dim: isize, index: &Tensor, out: &Tensor) -> Result<Tensor> {
        write_out("index_select", Exact, &[self, index], out, || self.index_select(dim, index))
    }

    /// `torch.gather(x, dim, index, out=out)`.
    pub fn gather_out(&self, dim: isize, index: &Tensor, out: &Tensor) -> Result<Tensor> {
        write_out("gather", Exact, &[self, index], out, || self.gather(dim, index))
    }

    /// `torch.cummax(x, dim, out=(values, indices))`.
    pub fn cummax_out(&self, dim: isize, values: &Tensor, indices: &Tensor) -> Result<(Tensor, Tensor)> {
        write_out2("cummax", &[self], (values, indices), || self.cummax(dim))
    }

    /// `torch.cummin(x, dim, out=(values, indices))`.
    pub fn cummin_out(&self, dim: isize, values: &Tensor, indices: &Tensor) -> Result<(Tensor, Tensor)> {
        write_out2("cummin", &[self], (values, indices), || self.cummin(dim))
    }

    /// `torch.kthvalue(x, k, dim, keepdim, out=(values, indices))`.
    pub fn kthvalue_out(
        &self,
        k: usize,
        dim: isize,
        keepdim: bool,
        values: &Tensor,
        indices: &Tensor,
    ) -> Result<(Tensor, Tensor)> {
        write_out2("kthvalue", &[self], (values, indices), || self.kthvalue(k, dim, keepdim))
    }

    /// `torch.take(x, index, out=out)`.
    pub fn take_out(&self, index: &Tensor, out: &Tensor) -> Result<Tensor> {
        write_out("take", Exact, &[self, index], out, || self.take(index))
    }

    /// `torch.scatter(x, dim, index, src, out=out)`: a copy of `x` with `src` scattered in.
    pub fn scatter_out(&self, dim: isize, index: &Tensor, src: &Tensor, out: &Tensor) -> Result<Tensor> {
        write_out("scatter", Exact, &[self, index, src], out, || self.scatter(dim, index, src))
    }

    /// `torch.scatter_add(x, dim, index, src, out=out)`.
    pub fn scatter_add_out(&self, dim: isize, index: &Tensor, src: &Tensor, out: &Tensor) -> Result<Tensor> {
        write_out("scatter_add", Exact, &[self, index, src], out, || self.scatter_add(dim, index, src))
    }

    /// `torch.index_add(x, dim, index, source, alpha=alpha, out=out)`.
    pub fn index_add_out(
        &self,
        dim: isize,
        index: &Tensor,
        source: &Tensor,
        alpha: impl Into<crate::Scalar>,
        out: &Tensor,
    ) -> Result<Tensor> {
        write_out("index_add", Exact, &[self, index, source], out, || {
            self.index_add(dim, index, source, alpha)
        })
    }

    /// `torch.lerp(x, end, weight, out=out)`.
    pub fn lerp_out(&self, end: &Tensor, weight: &Tensor, out: &Tensor) -> Result<Tensor> {
        write_out("lerp", Exact, &[self, end, weight], out, || self.lerp(end, weight))
    }

    /// `torch.nan_to_num(x, nan, posinf, neginf, out=out)`.
    pub fn nan_to_num_out(
        &self,
        nan: f64,
        posinf: Option<f64>,
        neginf: Option<f64>,
        out: &Tensor,
    ) -> Result<Tensor> {
        write_out("nan_to_num", Exact, &[self], out, || self.nan_to_num(nan, posinf, neginf))
    }

    /// `torch.square(x, out=out)`.
    pub fn square_out(&self, out: &Tensor) -> Result<Tensor> {
        write_out("square", Exact, &[self], out, || self.square())
    }

    /// `torch.cat(tensors, dim, out=out)`.
    ///
    /// ```
    /// use pyrite_core::{DType, Tensor};
    /// let a = Tensor::new([1f32, 2.])?;
    /// let out = Tensor::zeros([4], DType::F32)?;
    /// Tensor::cat_out(&[&a, &a], 0, &out)?;
    /// assert_eq!(out.to_vec::<f32>()?, vec![1., 2., 1., 2.]);
    /// # Ok::<(), pyrite_core::Error>(())
    /// ```
    pub fn cat_out<T: AsRef<Tensor>>(tensors: &[T], dim: isize, out: &Tensor) -> Result<Tensor> {
        let inputs: Vec<&Tensor> = tensors.iter().map(|t| t.as_ref()).collect();
        write_out("cat", Allowed, &inputs, out, || Tensor::cat(tensors, dim))
    }

    /// `torch.stack(tensors, dim, out=out)`.
    pub fn stack_out<T: AsRef<Tensor>>(tensors: &[T], dim: isize, out: &Tensor) -> Result<Tensor> {
        let inputs: Vec<&Tensor> = tensors.iter().map(|t| t.as_ref()).collect();
        write_out("stack", Allowed, &inputs, out, || Tensor::stack(tensors, dim))
    }
}
