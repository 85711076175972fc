//! Bad or unusual input never panics: every op is called on edge-case tensors (0-d, empty,
//! every dtype, non-contiguous, expanded, NaN) and with out-of-range dims and sizes, and must
//! return `Ok` or `Err`, never unwind. A failure names the op, the inputs and the panic.

use pyrite_core::ops::{conv, pool};
use pyrite_core::{DType, Generator, Result, RoundingMode, Scalar, Tensor, TensorIndex};
use std::panic::{catch_unwind, AssertUnwindSafe};

fn inputs() -> Vec<(&'static str, Tensor)> {
    let f = Tensor::new([[0.5f32, -1., 2.], [3., -4., 0.]]).unwrap();
    vec![
        ("0-d f32", Tensor::scalar(1.5f32).unwrap()),
        ("0-d i64", Tensor::scalar(3i64).unwrap()),
        ("empty [0]", Tensor::zeros([0], DType::F32).unwrap()),
        ("empty [0,3]", Tensor::zeros([0, 3], DType::F32).unwrap()),
        ("empty [2,0]", Tensor::zeros([2, 0], DType::F32).unwrap()),
        ("[2,3] f32", f.clone()),
        ("[2,3] f64", f.to_dtype(DType::F64).unwrap()),
        ("[2,3] f16", f.to_dtype(DType::F16).unwrap()),
        ("[2,3] bf16", f.to_dtype(DType::BF16).unwrap()),
        ("[2,3] i64", Tensor::new([[0i64, 1, 2], [1, 0, 2]]).unwrap()),
        ("[2,3] i32", Tensor::new([[0i32, -1, 2], [5, 0, 2]]).unwrap()),
        ("[2,3] u8", Tensor::new([[0u8, 1, 255], [3, 0, 2]]).unwrap()),
        ("[2,3] bool", Tensor::new([[true, false, true], [false, false, true]]).unwrap()),
        ("[3,2] transposed", f.t().unwrap()),
        ("[4,3] expanded", Tensor::new([1f32, 2., 3.]).unwrap().expand([4, 3]).unwrap()),
        ("[3] nan/inf", Tensor::new([f32::NAN, f32::INFINITY, f32::NEG_INFINITY]).unwrap()),
        ("[2,1,3] f32", f.reshape([2, 1, 3]).unwrap()),
        ("[1] i64 large", Tensor::new([i64::MAX]).unwrap()),
        ("[2] i64 negative", Tensor::new([-1i64, -7]).unwrap()),
        // Empty views whose offset lies past their storage, as PyTorch allows.
        ("empty view past storage", Tensor::zeros([0, 3], DType::F32).unwrap().select(1, 2).unwrap()),
        ("[2,0] narrowed at the end", Tensor::zeros([2, 3], DType::I64).unwrap().narrow(1, 3, 0).unwrap()),
        (
            "[0,1] f32 narrowed past storage",
            Tensor::zeros([0, 2], DType::F32).unwrap().narrow(1, 1, 1).unwrap(),
        ),
        ("[0,1] f32", Tensor::zeros([0, 1], DType::F32).unwrap()),
    ]
}

const DIMS: [isize; 6] = [0, 1, -1, 2, -4, isize::MIN];
const SIZES: [usize; 5] = [0, 1, 2, 7, usize::MAX];

/// Runs `f` and fails the test (with a description) if it panics.
fn check(failures: &mut Vec<String>, what: &str, f: impl FnOnce() -> Result<()>) {
    if std::env::var("HUNT").is_ok() {
        eprintln!("{what}");
    }
    if let Err(p) = catch_unwind(AssertUnwindSafe(f)) {
        let msg = p
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        failures.push(format!("{what}: panicked: {msg}"));
    }
}

fn ok<T>(r: Result<T>) -> Result<()> {
    r.map(|_| ())
}

type Unary = (&'static str, fn(&Tensor, isize, usize) -> Result<()>);

fn unary_ops() -> Vec<Unary> {
    vec![
        ("sum", |x, _, _| ok(x.sum())),
        ("sum_dims", |x, d, _| ok(x.sum_dims(&[d], true))),
        ("sum_dims twice", |x, d, _| ok(x.sum_dims(&[d, d], false))),
        ("nansum_dims", |x, d, _| ok(x.nansum_dims(&[d], false))),
        ("mean", |x, _, _| ok(x.mean())),
        ("mean_dims", |x, d, _| ok(x.mean_dims(&[d], false))),
        ("nanmean_dims", |x, d, _| ok(x.nanmean_dims(&[d], true))),
        ("prod_dims", |x, d, _| ok(x.prod_dims(&[d], false))),
        ("max", |x, _, _| ok(x.max())),
        ("min", |x, _, _| ok(x.min())),
        ("max_dim", |x, d, _| ok(x.max_dim(d, true))),
        ("min_dim", |x, d, _| ok(x.min_dim(d, false))),
        ("amax", |x, d, _| ok(x.amax(&[d], false))),
        ("amin", |x, _, _| ok(x.amin(&[], true))),
        ("argmax", |x, d, _| ok(x.argmax(Some(d), false))),
        ("argmin all", |x, _, _| ok(x.argmin(None, true))),
        ("var", |x, _, _| ok(x.var())),
        ("var_dims", |x, d, k| ok(x.var_dims(&[d], k as f64, false))),
        ("std_mean", |x, d, _| ok(x.std_mean(&[d], 1.0, true))),
        ("norm p", |x, d, k| ok(x.norm(k as f64, &[d], false))),
        ("norm inf", |x, d, _| ok(x.norm(f64::INFINITY, &[d], false))),
        ("norm -inf", |x, _, _| ok(x.vector_norm(f64::NEG_INFINITY, &[], false))),
        ("norm_fro", |x, d, _| ok(x.norm_fro(&[d], true))),
        ("logsumexp", |x, d, _| ok(x.logsumexp(&[d], false))),
        ("all_dims", |x, d, _| ok(x.all_dims(&[d], false))),
        ("any", |x, _, _| ok(x.any())),
        ("count_nonzero", |x, d, _| ok(x.count_nonzero(&[d]))),
        ("cumsum", |x, d, _| ok(x.cumsum(d))),
        ("cumprod", |x, d, _| ok(x.cumprod(d))),
        ("cummax", |x, d, _| ok(x.cummax(d))),
        ("cummin", |x, d, _| ok(x.cummin(d))),
        ("softmax", |x, d, _| ok(x.softmax(d))),
        ("log_softmax", |x, d, _| ok(x.log_softmax(d))),
        ("softmax_dtype", |x, d, _| ok(x.softmax_dtype(d, DType::F64))),
        ("log_softmax_dtype i64", |x, d, _| ok(x.log_softmax_dtype(d, DType::I64))),
        ("chunk", |x, d, k| ok(x.chunk(k, d))),
        ("split", |x, d, k| ok(x.split(k, d))),
        ("split_sizes", |x, d, k| ok(x.split_sizes(&[k, 1], d))),
        ("unbind", |x, d, _| ok(x.unbind(d))),
        ("flip", |x, d, _| ok(x.flip(&[d]))),
        ("fliplr", |x, _, _| ok(x.fliplr())),
        ("flipud", |x, _, _| ok(x.flipud())),
        ("roll", |x, d, k| ok(x.roll(&[k as isize], &[d]))),
        ("roll flat", |x, d, _| ok(x.roll(&[d], &[]))),
        ("repeat", |x, _, k| ok(x.repeat(&[k, 2, 1]))),
        ("repeat short", |x, _, k| ok(x.repeat(&[k]))),
        ("tile", |x, _, k| ok(x.tile(&[k]))),
        ("repeat_interleave", |x, d, k| ok(x.repeat_interleave(k, Some(d)))),
        ("repeat_interleave flat", |x, _, k| ok(x.repeat_interleave(k, None))),
        ("repeat_interleave_counts", |x, _, _| ok(x.repeat_interleave_counts())),
        ("nonzero", |x, _, _| ok(x.nonzero())),
        ("conv self", |x, _, k| ok(conv::conv(x, x, None, &[k], &[k], &[k], k))),
        ("conv padded", |x, _, k| ok(conv::conv(x, x, Some(x), &[1], &[k], &[1], 1))),
        ("conv_transpose self", |x, _, k| ok(conv::conv_transpose(x, x, None, &[k], &[k], &[k], &[1], 1))),
        ("conv_transpose groups", |x, _, k| ok(conv::conv_transpose(x, x, None, &[1], &[0], &[0], &[1], k))),
        ("max_pool", |x, _, k| ok(pool::max_pool(x, &[k], &[], &[k / 2], &[1], true))),
        ("max_pool dilated", |x, _, k| ok(pool::max_pool(x, &[2], &[k], &[1], &[k], false))),
        ("avg_pool", |x, _, k| ok(pool::avg_pool(x, &[k], &[1], &[k / 2], true, false, Some(k)))),
        ("adaptive_avg_pool", |x, _, k| ok(pool::adaptive_avg_pool(x, &[k]))),
        ("adaptive_max_pool", |x, _, k| ok(pool::adaptive_max_pool(x, &[k]))),
        ("max_unpool", |x, _, k| ok(pool::max_unpool(x, &x.zeros_like()?.to_dtype(DType::I64)?, &[k]))),
        ("nonzero_tuple", |x, _, _| ok(x.nonzero_tuple())),
        ("sort", |x, d, _| ok(x.sort(d, true))),
        ("sort_stable", |x, d, _| ok(x.sort_stable(d, false))),
        ("argsort", |x, d, _| ok(x.argsort(d, false))),
        ("topk", |x, d, k| ok(x.topk(k, d, true, true))),
        ("topk smallest", |x, d, k| ok(x.topk(k, d, false, false))),
        ("kthvalue", |x, d, k| ok(x.kthvalue(k, d, true))),
        ("unique", |x, _, _| ok(x.unique(true, true, true))),
        ("unique_dim", |x, d, _| ok(x.unique_dim(d, true, true, true))),
        ("atleast_3d", |x, _, _| ok(x.atleast_3d())),
        ("view", |x, d, _| ok(x.view([d, 3]))),
        ("view -1 -1", |x, _, _| ok(x.view([-1, -1]))),
        ("reshape", |x, d, _| ok(x.reshape([d]))),
        ("reshape 0 -1", |x, _, _| ok(x.reshape([0, -1]))),
        ("squeeze_dim", |x, d, _| ok(x.squeeze_dim(d))),
        ("squeeze_dims", |x, d, _| ok(x.squeeze_dims(&[d, d]))),
        ("unsqueeze", |x, d, _| ok(x.unsqueeze(d))),
        ("permute", |x, d, _| ok(x.permute(&[d, 0]))),
        ("transpose", |x, d, _| ok(x.transpose(d, 0))),
        ("t", |x, _, _| ok(x.t())),
        ("expand", |x, d, k| ok(x.expand([d, k as isize]))),
        ("broadcast_to", |x, _, k| ok(x.broadcast_to(&[k, 3]))),
        ("narrow", |x, d, k| ok(x.narrow(d, d, k))),
        ("slice", |x, d, k| ok(x.slice(d, Some(d), Some(k as isize), d))),
        ("slice step", |x, d, k| ok(x.slice(0, None, None, (k as isize).max(d)))),
        ("select", |x, d, _| ok(x.select(d, d))),
        ("flatten", |x, d, _| ok(x.flatten(d, 0))),
        ("unflatten", |x, d, k| ok(x.unflatten(d, [k as isize, -1]))),
        ("unfold", |x, d, k| ok(x.unfold(d, k, k))),
        ("unfold step 0", |x, d, _| ok(x.unfold(d, 1, 0))),
        ("diagonal", |x, d, _| ok(x.diagonal(d, 0, -1))),
        ("diagonal same dims", |x, d, _| ok(x.diagonal(0, d, d))),
        ("index", |x, d, k| {
            ok(x.index(&[TensorIndex::Select(d), TensorIndex::Slice(None, Some(k as isize), 1)]))
        }),
        ("index two ellipses", |x, _, _| ok(x.index(&[TensorIndex::Ellipsis, TensorIndex::Ellipsis]))),
        ("index step 0", |x, _, _| ok(x.index(&[TensorIndex::Slice(None, None, 0)]))),
        ("index step neg", |x, d, _| ok(x.index(&[TensorIndex::Slice(None, None, d)]))),
        ("tril", |x, d, _| ok(x.tril(d))),
        ("triu", |x, d, _| ok(x.triu(d))),
        ("one_hot", |x, _, k| ok(x.one_hot(Some(k)))),
        ("one_hot infer", |x, _, _| ok(x.one_hot(None))),
        ("to_dtype", |x, _, _| ok(x.to_dtype(DType::U8))),
        ("to_dtype bool", |x, _, _| ok(x.to_dtype(DType::Bool))),
        ("contiguous", |x, _, _| ok(x.contiguous())),
        ("deep_clone", |x, _, _| ok(x.deep_clone())),
        ("neg", |x, _, _| ok(x.neg())),
        ("abs", |x, _, _| ok(x.abs())),
        ("sign", |x, _, _| ok(x.sign())),
        ("sqrt", |x, _, _| ok(x.sqrt())),
        ("exp", |x, _, _| ok(x.exp())),
        ("log1p", |x, _, _| ok(x.log1p())),
        ("erfinv", |x, _, _| ok(x.erfinv())),
        ("frac", |x, _, _| ok(x.frac())),
        ("mish", |x, _, _| ok(x.mish())),
        ("gelu", |x, _, _| ok(x.gelu(true))),
        ("softplus", |x, d, _| ok(x.softplus(d as f64, 0.0))),
        ("relu", |x, _, _| ok(x.relu())),
        ("square", |x, _, _| ok(x.square())),
        ("round_decimals", |x, d, _| ok(x.round_decimals(d.clamp(-400, 400) as i32))),
        ("floor", |x, _, _| ok(x.floor())),
        ("clamp", |x, d, _| ok(x.clamp(Some(Scalar::from(d as f64)), Some(Scalar::from(1.0))))),
        ("clamp int bounds", |x, d, _| ok(x.clamp(Some(Scalar::from(d as i64)), None))),
        ("nan_to_num", |x, _, _| ok(x.nan_to_num(0.0, None, Some(-1.0)))),
        ("isnan", |x, _, _| ok(x.isnan())),
        ("isinf", |x, _, _| ok(x.isinf())),
        ("logical_not", |x, _, _| ok(x.logical_not())),
        ("pow_scalar", |x, d, _| ok(x.pow_scalar(d))),
        ("pow_scalar float", |x, _, _| ok(x.pow_scalar(-0.5))),
        ("rpow_scalar", |x, d, _| ok(x.rpow_scalar(d))),
        ("div_scalar 0", |x, _, _| ok(x.div_scalar(0))),
        ("remainder_scalar 0", |x, _, _| ok(x.remainder_scalar(0))),
        ("fmod_scalar 0", |x, _, _| ok(x.fmod_scalar(0))),
        ("add_scalar huge", |x, _, _| ok(x.add_scalar(i64::MAX))),
        ("mul_scalar bool", |x, _, _| ok(x.mul_scalar(true))),
        ("fill_", |x, d, _| ok(x.deep_clone()?.fill_(d))),
        ("fill_ nan", |x, _, _| ok(x.deep_clone()?.fill_(f64::NAN))),
        ("zero_", |x, _, _| ok(x.zero_())),
        ("clamp_", |x, d, _| ok(x.deep_clone()?.clamp_(Some(Scalar::from(d)), None))),
        ("relu_", |x, _, _| ok(x.deep_clone()?.relu_())),
        ("add_scalar_", |x, d, _| ok(x.add_scalar_(d))),
        ("div_scalar_", |x, _, _| ok(x.deep_clone()?.div_scalar_(0))),
        ("uniform_", |x, d, _| ok(x.uniform_(d as f64, 1.0, None))),
        ("normal_", |x, d, _| ok(x.normal_(0.0, d as f64, None))),
        ("bernoulli_", |x, d, _| ok(x.bernoulli_(d as f64, None))),
        ("random_", |x, d, _| ok(x.random_(d as i64, Some(3), None))),
        ("random_ open", |x, d, _| ok(x.random_(d as i64, None, None))),
        ("bernoulli", |x, _, _| ok(x.bernoulli(None))),
        ("multinomial", |x, _, k| ok(x.multinomial(k, false, None))),
        ("multinomial replacement", |x, _, k| ok(x.multinomial(k, true, None))),
        ("rand_like", |x, _, _| ok(x.rand_like())),
        ("randint_like", |x, d, _| ok(x.randint_like(d as i64, 5))),
        ("full_like", |x, d, _| ok(x.full_like(d))),
        ("item", |x, _, _| ok(x.item::<f32>())),
        ("item i64", |x, _, _| ok(x.item::<i64>())),
        ("to_vec", |x, _, _| ok(x.to_vec::<f32>())),
        ("to_vec2", |x, _, _| ok(x.to_vec2::<f32>())),
        ("to_vec3", |x, _, _| ok(x.to_vec3::<i64>())),
        ("size", |x, d, _| ok(x.size(d))),
        ("display", |x, _, _| {
            let _ = format!("{x} {x:?}");
            Ok(())
        }),
        ("npy round trip", |x, _, _| {
            let mut buf = Vec::new();
            x.write_npy(&mut buf)?;
            ok(Tensor::read_npy(&buf))
        }),
        ("npy truncated", |x, _, k| {
            let mut buf = Vec::new();
            x.write_npy(&mut buf)?;
            ok(Tensor::read_npy(&buf[..buf.len().min(k.min(buf.len()))]))
        }),
        ("raw bytes", |x, _, k| ok(Tensor::from_raw_bytes(&x.to_raw_bytes()?, [k], x.dtype()))),
        ("sum_to_size", |x, _, k| ok(x.sum_to_size([k]))),
        ("matmul self", |x, _, _| ok(x.matmul(x))),
        ("mv self", |x, _, _| ok(x.mv(x))),
        ("dot self", |x, _, _| ok(x.dot(x))),
        ("einsum trace", |x, _, _| ok(pyrite_core::einsum("ii->i", &[x]))),
        ("einsum bad", |x, _, _| ok(pyrite_core::einsum("i...j->j...i", &[x]))),
        ("einsum too many", |x, _, _| ok(pyrite_core::einsum("ijk", &[x]))),
        ("einsum garbage", |x, _, _| ok(pyrite_core::einsum("->->,.", &[x]))),
    ]
}

type Binary = (&'static str, fn(&Tensor, &Tensor, isize) -> Result<()>);

fn binary_ops() -> Vec<Binary> {
    vec![
        ("add", |x, y, _| ok(x.add(y))),
        ("sub", |x, y, _| ok(x.sub(y))),
        ("mul", |x, y, _| ok(x.mul(y))),
        ("div", |x, y, _| ok(x.div(y))),
        ("div floor", |x, y, _| ok(x.div_mode(y, RoundingMode::Floor))),
        ("div trunc", |x, y, _| ok(x.div_mode(y, RoundingMode::Trunc))),
        ("remainder", |x, y, _| ok(x.remainder(y))),
        ("fmod", |x, y, _| ok(x.fmod(y))),
        ("pow", |x, y, _| ok(x.pow(y))),
        ("maximum", |x, y, _| ok(x.maximum(y))),
        ("atan2", |x, y, _| ok(x.atan2(y))),
        ("add_alpha", |x, y, d| ok(x.add_alpha(y, d))),
        ("add_out", |x, y, _| ok(x.add_out(y, x))),
        ("eq", |x, y, _| ok(x.eq(y))),
        ("lt", |x, y, _| ok(x.lt(y))),
        ("logical_xor", |x, y, _| ok(x.logical_xor(y))),
        ("isclose", |x, y, _| ok(x.isclose(y, 1e-5, 1e-8, true))),
        ("allclose", |x, y, _| ok(x.allclose(y, 1e-5, 1e-8, false))),
        ("where", |x, y, _| ok(x.where_(&y.to_dtype(DType::Bool)?, y))),
        ("where raw cond", |x, y, _| ok(x.where_(y, x))),
        ("lerp", |x, y, _| ok(x.lerp(y, y))),
        ("clamp_tensor", |x, y, _| ok(x.clamp_tensor(Some(y), Some(y)))),
        ("add_", |x, y, _| ok(x.deep_clone()?.add_(y))),
        ("div_", |x, y, _| ok(x.deep_clone()?.div_(y))),
        ("copy_", |x, y, _| ok(x.deep_clone()?.copy_(y))),
        ("copy_ into expanded", |x, y, _| ok(x.copy_(y))),
        ("masked_fill", |x, y, _| ok(x.masked_fill(y, 1.0))),
        ("masked_fill_", |x, y, _| ok(x.deep_clone()?.masked_fill_(y, 2))),
        ("masked_select", |x, y, _| ok(x.masked_select(y))),
        ("masked_scatter", |x, y, _| ok(x.masked_scatter(y, x))),
        ("index_select", |x, y, d| ok(x.index_select(d, y))),
        ("gather", |x, y, d| ok(x.gather(d, y))),
        ("take", |x, y, _| ok(x.take(y))),
        ("index_tensor", |x, y, _| ok(x.index_tensor(&[None, Some(y.clone())]))),
        ("index_tensor first", |x, y, _| ok(x.index_tensor(&[Some(y.clone())]))),
        ("scatter", |x, y, d| ok(x.scatter(d, y, x))),
        ("scatter_value", |x, y, d| ok(x.scatter_value(d, y, 1))),
        ("scatter_add", |x, y, d| ok(x.scatter_add(d, y, x))),
        ("scatter_reduce mean", |x, y, d| ok(x.scatter_reduce(d, y, x, "mean", false))),
        ("scatter_reduce amax", |x, y, d| ok(x.scatter_reduce(d, y, x, "amax", true))),
        ("scatter_reduce bad", |x, y, d| ok(x.scatter_reduce(d, y, x, "median", true))),
        ("index_add", |x, y, d| ok(x.index_add(d, y, x, 2))),
        ("index_copy", |x, y, d| ok(x.index_copy(d, y, x))),
        ("index_fill", |x, y, d| ok(x.index_fill(d, y, -1))),
        ("index_put", |x, y, _| ok(x.index_put(&[Some(y.clone())], x, false))),
        ("index_put accumulate", |x, y, _| ok(x.index_put(&[Some(y.clone())], y, true))),
        ("index_put_", |x, y, _| ok(x.deep_clone()?.index_put_(&[Some(y.clone()), None], y, true))),
        ("searchsorted", |x, y, _| ok(x.searchsorted(y, false, false, None))),
        ("searchsorted side", |x, y, _| ok(x.searchsorted(y, true, false, Some("middle")))),
        ("searchsorted_scalar", |x, _, d| ok(x.searchsorted_scalar(d, false, true, None))),
        ("bucketize", |x, y, _| ok(x.bucketize(y, true, true))),
        ("repeat_interleave_tensor", |x, y, d| ok(x.repeat_interleave_tensor(y, Some(d)))),
        ("matmul", |x, y, _| ok(x.matmul(y))),
        ("matmul_out", |x, y, _| ok(x.matmul_out(y, x))),
        ("mm", |x, y, _| ok(x.mm(y))),
        ("bmm", |x, y, _| ok(x.bmm(y))),
        ("addmm", |x, y, d| ok(x.addmm(y, y, d, 1))),
        ("baddbmm", |x, y, _| ok(x.baddbmm(y, y, 1, 1))),
        ("mv", |x, y, _| ok(x.mv(y))),
        ("dot", |x, y, _| ok(x.dot(y))),
        ("outer", |x, y, _| ok(x.outer(y))),
        ("einsum ij,jk", |x, y, _| ok(pyrite_core::einsum("ij,jk->ik", &[x, y]))),
        ("einsum ...", |x, y, _| ok(pyrite_core::einsum("...i,...i", &[x, y]))),
        ("cat", |x, y, d| ok(Tensor::cat(&[x, y], d))),
        ("stack", |x, y, d| ok(Tensor::stack(&[x, y], d))),
        ("hstack", |x, y, _| ok(Tensor::hstack(&[x, y]))),
        ("vstack", |x, y, _| ok(Tensor::vstack(&[x, y]))),
        ("dstack", |x, y, _| ok(Tensor::dstack(&[x, y]))),
        ("expand_as", |x, y, _| ok(x.expand_as(y))),
        ("normal_tensors", |x, y, _| ok(Tensor::normal_tensors(x, y, None))),
        ("sum_to_shape", |x, y, _| ok(x.sum_to_shape(y.dims()))),
        ("view as other", |x, y, _| ok(x.view(y.dims()))),
        ("sum_dims_out", |x, y, d| ok(x.sum_dims_out(&[d], false, y))),
        ("argmax_out", |x, y, d| ok(x.argmax_out(Some(d), true, y))),
        ("cumsum_out", |x, y, d| ok(x.cumsum_out(d, y))),
        ("softmax_out", |x, y, d| ok(x.softmax_out(d, y))),
        ("cat_out", |x, y, d| ok(Tensor::cat_out(&[x, x], d, y))),
        ("gather_out", |x, y, d| ok(x.gather_out(d, y, x))),
        ("max_dim_out", |x, y, d| ok(x.max_dim_out(d, false, y, x))),
        ("topk_out", |x, y, d| ok(x.topk_out(1, d, true, true, y, x))),
        ("eq_out", |x, y, _| ok(x.eq_out(y, y))),
        ("where_out", |x, y, _| ok(x.where_out(y, x, y))),
        ("logical_not_out", |x, y, _| ok(x.logical_not_out(y))),
        ("abs_out", |x, y, _| ok(x.abs_out(y))),
        ("neg_out", |x, y, _| ok(x.neg_out(y))),
        ("sigmoid_out", |x, y, _| ok(x.sigmoid_out(y))),
        ("take_out", |x, y, _| ok(x.take_out(y, x))),
        ("scatter_out", |x, y, d| ok(x.scatter_out(d, y, x, x))),
        ("index_add_out", |x, y, d| ok(x.index_add_out(d, y, x, 1, x))),
        ("cummax_out", |x, y, d| ok(x.cummax_out(d, x, y))),
        ("kthvalue_out", |x, y, d| ok(x.kthvalue_out(1, d, true, x, y))),
        ("lerp_out", |x, y, _| ok(x.lerp_out(y, y, x))),
        ("nan_to_num_out", |x, y, _| ok(x.nan_to_num_out(0.0, None, None, y))),
        ("square_out", |x, y, _| ok(x.square_out(y))),
        // Every other `_out` form, elementwise ones into `y` (of any shape and dtype here).
        ("exp_out", |x, y, _| ok(x.exp_out(y))),
        ("sqrt_out", |x, y, _| ok(x.sqrt_out(y))),
        ("rsqrt_out", |x, y, _| ok(x.rsqrt_out(y))),
        ("exp2_out", |x, y, _| ok(x.exp2_out(y))),
        ("log_out", |x, y, _| ok(x.log_out(y))),
        ("log2_out", |x, y, _| ok(x.log2_out(y))),
        ("log10_out", |x, y, _| ok(x.log10_out(y))),
        ("log1p_out", |x, y, _| ok(x.log1p_out(y))),
        ("expm1_out", |x, y, _| ok(x.expm1_out(y))),
        ("sin_out", |x, y, _| ok(x.sin_out(y))),
        ("cos_out", |x, y, _| ok(x.cos_out(y))),
        ("tan_out", |x, y, _| ok(x.tan_out(y))),
        ("asin_out", |x, y, _| ok(x.asin_out(y))),
        ("acos_out", |x, y, _| ok(x.acos_out(y))),
        ("atan_out", |x, y, _| ok(x.atan_out(y))),
        ("sinh_out", |x, y, _| ok(x.sinh_out(y))),
        ("cosh_out", |x, y, _| ok(x.cosh_out(y))),
        ("tanh_out", |x, y, _| ok(x.tanh_out(y))),
        ("erf_out", |x, y, _| ok(x.erf_out(y))),
        ("erfinv_out", |x, y, _| ok(x.erfinv_out(y))),
        ("reciprocal_out", |x, y, _| ok(x.reciprocal_out(y))),
        ("frac_out", |x, y, _| ok(x.frac_out(y))),
        ("sign_out", |x, y, _| ok(x.sign_out(y))),
        ("floor_out", |x, y, _| ok(x.floor_out(y))),
        ("ceil_out", |x, y, _| ok(x.ceil_out(y))),
        ("round_out", |x, y, _| ok(x.round_out(y))),
        ("trunc_out", |x, y, _| ok(x.trunc_out(y))),
        ("sub_out", |x, y, _| ok(x.sub_out(x, y))),
        ("mul_out", |x, y, _| ok(x.mul_out(x, y))),
        ("div_out", |x, y, _| ok(x.div_out(x, y))),
        ("floor_divide_out", |x, y, _| ok(x.floor_divide_out(x, y))),
        ("remainder_out", |x, y, _| ok(x.remainder_out(x, y))),
        ("fmod_out", |x, y, _| ok(x.fmod_out(x, y))),
        ("pow_out", |x, y, _| ok(x.pow_out(x, y))),
        ("maximum_out", |x, y, _| ok(x.maximum_out(x, y))),
        ("minimum_out", |x, y, _| ok(x.minimum_out(x, y))),
        ("atan2_out", |x, y, _| ok(x.atan2_out(x, y))),
        ("ne_out", |x, y, _| ok(x.ne_out(x, y))),
        ("lt_out", |x, y, _| ok(x.lt_out(x, y))),
        ("le_out", |x, y, _| ok(x.le_out(x, y))),
        ("gt_out", |x, y, _| ok(x.gt_out(x, y))),
        ("ge_out", |x, y, _| ok(x.ge_out(x, y))),
        ("logical_and_out", |x, y, _| ok(x.logical_and_out(x, y))),
        ("logical_or_out", |x, y, _| ok(x.logical_or_out(x, y))),
        ("logical_xor_out", |x, y, _| ok(x.logical_xor_out(x, y))),
        ("nansum_dims_out", |x, y, d| ok(x.nansum_dims_out(&[d], false, y))),
        ("mean_dims_out", |x, y, d| ok(x.mean_dims_out(&[d], false, y))),
        ("nanmean_dims_out", |x, y, d| ok(x.nanmean_dims_out(&[d], false, y))),
        ("prod_dims_out", |x, y, d| ok(x.prod_dims_out(&[d], false, y))),
        ("all_dims_out", |x, y, d| ok(x.all_dims_out(&[d], false, y))),
        ("any_dims_out", |x, y, d| ok(x.any_dims_out(&[d], false, y))),
        ("amax_out", |x, y, d| ok(x.amax_out(&[d], true, y))),
        ("amin_out", |x, y, d| ok(x.amin_out(&[d], false, y))),
        ("logsumexp_out", |x, y, d| ok(x.logsumexp_out(&[d], false, y))),
        ("var_dims_out", |x, y, d| ok(x.var_dims_out(&[d], 1.0, false, y))),
        ("std_dims_out", |x, y, d| ok(x.std_dims_out(&[d], 0.0, true, y))),
        ("norm_out", |x, y, d| ok(x.norm_out(2.0, &[d], false, y))),
        ("argmin_out", |x, y, d| ok(x.argmin_out(Some(d), false, y))),
        ("min_dim_out", |x, y, d| ok(x.min_dim_out(d, true, y, x))),
        ("sort_out", |x, y, d| ok(x.sort_out(d, false, x, y))),
        ("cumprod_out", |x, y, d| ok(x.cumprod_out(d, y))),
        ("cummin_out", |x, y, d| ok(x.cummin_out(d, y, x))),
        ("log_softmax_out", |x, y, d| ok(x.log_softmax_out(d, y))),
        ("stack_out", |x, y, d| ok(Tensor::stack_out(&[x, x], d, y))),
        ("index_select_out", |x, y, d| ok(x.index_select_out(d, y, x))),
        ("scatter_add_out", |x, y, d| ok(x.scatter_add_out(d, y, x, x))),
        ("clamp_out", |x, y, _| ok(x.clamp_out(Some(Scalar::from(0.0)), Some(Scalar::from(1i64)), y))),
        ("mm_out", |x, y, _| ok(x.mm_out(x, y))),
        ("bmm_out", |x, y, _| ok(x.bmm_out(x, y))),
        ("addmm_out", |x, y, _| ok(x.addmm_out(x, x, 1.0, 2.0, y))),
        ("baddbmm_out", |x, y, _| ok(x.baddbmm_out(x, x, 0.5, 1.0, y))),
        ("dot_out", |x, y, _| ok(x.dot_out(x, y))),
        ("mv_out", |x, y, _| ok(x.mv_out(x, y))),
        ("outer_out", |x, y, _| ok(x.outer_out(x, y))),
    ]
}

#[test]
fn no_op_panics_on_edge_case_inputs() {
    let ins = inputs();
    let mut failures = Vec::new();
    for (name, x) in &ins {
        for (op, f) in unary_ops() {
            for d in DIMS {
                for k in SIZES {
                    check(&mut failures, &format!("{op}({name}, dim={d}, size={k})"), || f(x, d, k));
                }
            }
        }
    }
    for (xn, x) in &ins {
        for (yn, y) in &ins {
            for (op, f) in binary_ops() {
                for d in [0, -1, 3] {
                    check(&mut failures, &format!("{op}({xn}, {yn}, dim={d})"), || f(x, y, d));
                }
            }
        }
    }
    failures.dedup_by(|a, b| {
        a.split('(').next() == b.split('(').next() && a.ends_with(b.rsplit(':').next().unwrap())
    });
    assert!(failures.is_empty(), "{} panics:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn creation_and_sampling_never_panic_on_bad_arguments() {
    let mut failures = Vec::new();
    let g = Generator::new(0);
    let f = [f64::NAN, f64::INFINITY, -1.0, 0.0, 1e300];
    for &a in &f {
        for &b in &f {
            check(&mut failures, &format!("arange({a}, {b}, 1)"), || {
                ok(Tensor::arange(a, b, 1.0, DType::F32))
            });
            check(&mut failures, &format!("arange(0, 1, {a})"), || {
                ok(Tensor::arange(0.0, 1.0, a, DType::I64))
            });
            check(&mut failures, &format!("linspace({a}, {b})"), || {
                ok(Tensor::linspace(a, b, 5, DType::I32))
            });
            check(&mut failures, &format!("logspace({a}, {b})"), || {
                ok(Tensor::logspace(a, b, 3, 2.0, DType::F16))
            });
            check(&mut failures, &format!("normal({a}, {b})"), || ok(Tensor::normal(a, b, [3], DType::F32)));
            check(&mut failures, &format!("full({a}) as u8"), || ok(Tensor::full([2], a, DType::U8)));
        }
    }
    for n in SIZES {
        check(&mut failures, &format!("randperm({n})"), || {
            ok(Tensor::randperm_with(n.min(1 << 40), Some(&g)))
        });
        check(&mut failures, &format!("eye({n})"), || ok(Tensor::eye(n.min(1 << 40), 2, DType::F32)));
        check(&mut failures, &format!("zeros([{n}, {n}])"), || ok(Tensor::zeros([n, n], DType::F32)));
        check(&mut failures, &format!("linspace steps {n}"), || {
            ok(Tensor::linspace(0.0, 1.0, n.min(1 << 40), DType::F64))
        });
    }
    for (lo, hi) in [(0, 0), (5, 1), (i64::MIN, i64::MAX), (-1, 300), (0, 2)] {
        for dt in [DType::U8, DType::Bool, DType::I32, DType::F16, DType::F64] {
            check(&mut failures, &format!("randint({lo}, {hi}, {dt:?})"), || {
                ok(Tensor::randint_with(lo, hi, [4], dt, Some(&g)))
            });
        }
    }
    check(&mut failures, "set_state garbage", || ok(g.set_state(&Tensor::zeros([3], DType::U8)?)));
    check(&mut failures, "set_state_bytes empty", || ok(g.set_state_bytes(&[])));
    check(&mut failures, "from_raw_bytes odd", || ok(Tensor::from_raw_bytes(&[1, 2, 3], [1], DType::F32)));
    check(&mut failures, "read_npy garbage", || ok(Tensor::read_npy(b"\x93NUMPY\x01\x00\xff\xffgarbage")));
    assert!(failures.is_empty(), "{} panics:\n{}", failures.len(), failures.join("\n"));
}

/// The first of several outputs (an empty list is the op's answer, not an error: the zeros of
/// a scalar stand in for it).
fn first(v: Vec<Tensor>) -> Result<Tensor> {
    v.into_iter().next().map_or_else(|| Tensor::zeros((), DType::F32), Ok)
}

type Differentiable = (&'static str, fn(&Tensor, isize, usize) -> Result<Tensor>);

fn differentiable_ops() -> Vec<Differentiable> {
    vec![
        ("sum_dims", |x, d, _| x.sum_dims(&[d], false)),
        ("mean_dims", |x, d, _| x.mean_dims(&[d], true)),
        ("prod_dims", |x, d, _| x.prod_dims(&[d], false)),
        ("max_dim", |x, d, _| Ok(x.max_dim(d, false)?.0)),
        ("max", |x, _, _| x.max()),
        ("amax", |x, d, _| x.amax(&[d], false)),
        ("var_dims", |x, d, k| x.var_dims(&[d], k as f64, false)),
        ("std", |x, _, _| x.std()),
        ("norm", |x, d, k| x.norm(k as f64, &[d], false)),
        ("norm inf", |x, _, _| x.norm(f64::INFINITY, &[], false)),
        ("logsumexp", |x, d, _| x.logsumexp(&[d], false)),
        ("cumsum", |x, d, _| x.cumsum(d)),
        ("cumprod", |x, d, _| x.cumprod(d)),
        ("cummax", |x, d, _| Ok(x.cummax(d)?.0)),
        ("softmax", |x, d, _| x.softmax(d)),
        ("log_softmax", |x, d, _| x.log_softmax(d)),
        ("flip", |x, d, _| x.flip(&[d])),
        ("roll", |x, d, k| x.roll(&[k as isize], &[d])),
        ("repeat", |x, _, k| x.repeat(&[k.min(3), 1, 1])),
        ("repeat_interleave", |x, d, k| x.repeat_interleave(k.min(3), Some(d))),
        ("sort", |x, d, _| Ok(x.sort(d, true)?.0)),
        ("topk", |x, d, k| Ok(x.topk(k, d, true, true)?.0)),
        ("kthvalue", |x, d, k| Ok(x.kthvalue(k, d, false)?.0)),
        ("view", |x, _, _| x.view([-1])),
        ("squeeze", |x, _, _| x.squeeze()),
        ("unsqueeze", |x, d, _| x.unsqueeze(d)),
        ("permute", |x, d, _| x.permute(&[d, 0])),
        ("expand", |x, _, k| x.expand([k as isize, -1, -1])),
        ("narrow", |x, d, k| x.narrow(d, 0, k)),
        ("slice", |x, d, k| x.slice(d, None, None, k.max(1) as isize)),
        ("select", |x, d, _| x.select(d, -1)),
        ("unfold", |x, d, k| x.unfold(d, k, 1)),
        ("diagonal", |x, d, _| x.diagonal(d, 0, -1)),
        ("chunk", |x, d, k| first(x.chunk(k, d)?)),
        ("unbind", |x, d, _| first(x.unbind(d)?)),
        ("pow_scalar", |x, d, _| x.pow_scalar(d)),
        ("rpow_scalar", |x, d, _| x.rpow_scalar(d)),
        ("sqrt", |x, _, _| x.sqrt()),
        ("rsqrt", |x, _, _| x.rsqrt()),
        ("log", |x, _, _| x.log()),
        ("erfinv", |x, _, _| x.erfinv()),
        ("clamp", |x, d, _| x.clamp(Some(Scalar::from(d as f64)), None)),
        ("abs", |x, _, _| x.abs()),
        ("div self", |x, _, _| x.div(x)),
        ("matmul self", |x, _, _| x.matmul(&x.t()?)),
        ("cat", |x, d, _| Tensor::cat(&[x, x], d)),
        ("stack", |x, d, _| Tensor::stack(&[x, x], d)),
        ("gather", |x, d, _| x.gather(d, &x.zeros_like()?.to_dtype(DType::I64)?)),
        ("index_select", |x, d, _| x.index_select(d, &Tensor::new([0i64, 0])?)),
        ("masked_fill", |x, _, _| x.masked_fill(&x.gt_scalar(0)?, 1.0)),
        ("where", |x, _, _| x.where_(&x.gt_scalar(0)?, &x.neg()?)),
        ("lerp", |x, _, _| x.lerp(x, x)),
        ("einsum", |x, _, _| pyrite_core::einsum("...i,...i->...", &[x, x])),
        ("conv", |x, _, k| {
            conv::conv(x, x, Some(&x.select(0, 0)?.select(0, 0)?), &[1], &[k.min(3)], &[1], 1)
        }),
        ("conv_transpose", |x, _, k| conv::conv_transpose(x, x, None, &[k.min(3)], &[0], &[0], &[1], 1)),
        ("max_pool", |x, _, k| Ok(pool::max_pool(x, &[k.min(3)], &[], &[0], &[1], true)?.0)),
        ("avg_pool", |x, _, k| pool::avg_pool(x, &[k.min(3)], &[], &[1], true, true, None)),
        ("adaptive_avg_pool", |x, _, k| pool::adaptive_avg_pool(x, &[k.min(5)])),
        ("adaptive_max_pool", |x, _, k| Ok(pool::adaptive_max_pool(x, &[k.min(5)])?.0)),
    ]
}

#[test]
fn backward_never_panics_on_edge_case_inputs() {
    let mut failures = Vec::new();
    for (name, x) in inputs().into_iter().filter(|(_, t)| t.dtype().is_floating_point()) {
        for (op, f) in differentiable_ops() {
            for d in DIMS {
                for k in SIZES {
                    check(&mut failures, &format!("{op}({name}, dim={d}, size={k}) backward"), || {
                        let leaf = x.deep_clone()?.requires_grad_(true)?;
                        let y = f(&leaf, d, k)?;
                        y.sum()?.backward()?;
                        // A second backward through the freed graph is an error, never a panic.
                        let _ = y.sum()?.backward();
                        Ok(())
                    });
                }
            }
        }
    }
    assert!(failures.is_empty(), "{} panics:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn sizes_that_overflow_are_errors_with_pytorch_messages() {
    use pyrite_core::ErrorKind;
    let e = Tensor::zeros([usize::MAX, 2], DType::F32).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::OutOfMemory);
    assert!(e.message().contains("Storage size calculation overflowed"), "{e}");
    assert_eq!(Tensor::randperm(1 << 40).unwrap_err().kind(), ErrorKind::OutOfMemory);
    let x = Tensor::new([[1f32, 2., 3.], [4., 5., 6.]]).unwrap();
    assert_eq!(x.repeat(&[usize::MAX, 2]).unwrap_err().kind(), ErrorKind::OutOfMemory);
    assert_eq!(x.repeat_interleave(usize::MAX, Some(0)).unwrap_err().kind(), ErrorKind::OutOfMemory);
    let e = x.narrow(1, 1, usize::MAX).unwrap_err();
    assert_eq!(e.message(), "start (1) + length (18446744073709551615) exceeds dimension size (3).");
    assert_eq!(x.split_sizes(&[usize::MAX, 4], 1).unwrap_err().kind(), ErrorKind::Value);
    // torch.diagonal with an offset past the matrix is empty, whatever its size
    assert_eq!(x.diagonal(isize::MIN, 0, 1).unwrap().dims(), &[0]);
    let e = Tensor::scalar(1f32).unwrap().size(0).unwrap_err();
    assert_eq!(e.message(), "Dimension specified as 0 but tensor has no dimensions");
}

/// A view whose element count overflows is refused where it is made, as PyTorch refuses it at
/// `expand` (before, `numel()` saturated to `usize::MAX` and every later op failed).
#[test]
fn views_whose_element_count_overflows_are_refused_when_made() {
    let x = Tensor::zeros([1, 1, 3, 5], DType::F32).unwrap();
    let e = x.expand([1isize << 62, 1, 3, 5]).unwrap_err();
    assert!(e.message().contains("expand: the expanded size") && e.message().contains("overflows"), "{e}");
    let e = x.broadcast_to(&[1 << 62, 1, 3, 5]).unwrap_err();
    assert!(e.message().contains("broadcast_to"), "{e}");
    // a broadcast of two valid tensors that would overflow is an error too
    let a = Tensor::zeros([1, 1], DType::F32).unwrap().expand([1isize << 40, 1]).unwrap();
    let b = Tensor::zeros([1, 1], DType::F32).unwrap().expand([1isize, 1 << 40]).unwrap();
    assert!(a.add(&b).is_err());
    // view / reshape sizes whose product wraps around to the element count
    let empty = Tensor::zeros([0], DType::F32).unwrap();
    let e = empty.view([1isize << 32, 1 << 32, 0]).unwrap_err();
    assert!(e.message().contains("overflows"), "{e}");
    assert!(empty.reshape([1isize << 62, 8, -1]).is_err());
    // an empty expanded size is fine however large its other sizes
    assert_eq!(Tensor::zeros([1, 0], DType::F32).unwrap().expand([1isize << 62, 0]).unwrap().numel(), 0);
}

#[test]
fn empty_views_past_the_end_of_their_storage_read_as_empty() {
    // PyTorch: torch.zeros(0, 3)[:, 2] has shape [0] and storage_offset 2, past its storage.
    let v = Tensor::zeros([0, 3], DType::F32).unwrap().select(1, 2).unwrap();
    assert_eq!((v.dims(), v.storage_offset()), (&[0usize][..], 2));
    assert!(v.to_vec::<f32>().unwrap().is_empty());
    assert!(v.to_raw_bytes().unwrap().is_empty());
    assert_eq!(v.sum().unwrap().item::<f32>().unwrap(), 0.0);
    assert_eq!(
        Tensor::cat(&[&v, &Tensor::new([1f32]).unwrap()], 0).unwrap().to_vec::<f32>().unwrap(),
        vec![1.]
    );
    let r = Tensor::zeros([2, 0], DType::F32).unwrap().roll(&[1], &[0]).unwrap();
    assert_eq!(r.dims(), &[2, 0]);
}

#[test]
fn corrupt_npy_files_are_errors_not_panics() {
    let mut failures = Vec::new();
    for (name, x) in inputs() {
        let mut good = Vec::new();
        if x.write_npy(&mut good).is_err() {
            continue; // bf16 has no NumPy dtype
        }
        for len in 0..good.len() {
            check(&mut failures, &format!("read_npy({name} cut at {len})"), || {
                ok(Tensor::read_npy(&good[..len]))
            });
        }
        let header = good.len().min(128);
        for i in 0..header {
            for b in [0u8, 0xff, b'9', b',', b')', b'(', b'\'', b' ', b'<', b'-'] {
                let mut bad = good.clone();
                bad[i] = b;
                check(&mut failures, &format!("read_npy({name} byte {i} = {b:#x})"), || {
                    ok(Tensor::read_npy(&bad))
                });
            }
        }
    }
    for header in [
        "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 4294967296), }",
        "{'descr': '<f4', 'fortran_order': True, 'shape': (-1,), }",
        "{'descr': '|b1', 'fortran_order': False, 'shape': (), }",
        "{'descr': '<U8', 'fortran_order': False, 'shape': (1,), }",
        "{}",
    ] {
        let mut f = b"\x93NUMPY\x01\x00".to_vec();
        f.extend_from_slice(&(header.len() as u16 + 1).to_le_bytes());
        f.extend_from_slice(header.as_bytes());
        f.push(b'\n');
        f.extend_from_slice(&[0; 16]);
        check(&mut failures, &format!("read_npy({header})"), || ok(Tensor::read_npy(&f)));
    }
    assert!(failures.is_empty(), "{} panics:\n{}", failures.len(), failures.join("\n"));
}

/// The same ops on inputs large enough to take the multi-threaded paths.
#[test]
fn no_op_panics_on_large_inputs() {
    let big = Tensor::randn([257, 513], DType::F32).unwrap();
    let nan = Tensor::full([1 << 17], f64::NAN, DType::F64).unwrap();
    let ins = [
        ("[513,257] transposed", big.t().unwrap()),
        ("[257,513] f32", big.clone()),
        ("[131072] f64 NaN", nan),
        ("[257,513] i64", big.mul_scalar(100).unwrap().to_dtype(DType::I64).unwrap()),
    ];
    let mut failures = Vec::new();
    for (name, x) in &ins {
        for (op, f) in unary_ops() {
            for d in [0, -1, 2] {
                for k in [0, 2, usize::MAX] {
                    check(&mut failures, &format!("{op}({name}, dim={d}, size={k})"), || f(x, d, k));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{} panics:\n{}", failures.len(), failures.join("\n"));
}

/// Convolution and pooling on inputs of their own ranks (3 to 5): empty batch, channel and
/// spatial dims, every dtype, non-contiguous and expanded inputs, NaN, with absurd kernel,
/// stride, padding, dilation and group sizes, forward and backward.
#[test]
fn conv_and_pool_never_panic_on_edge_cases() {
    let f = Tensor::randn([2, 4, 5, 6], DType::F32).unwrap();
    let mut ins: Vec<(String, Tensor)> = vec![
        ("[2,4,5,6] f32".into(), f.clone()),
        ("[0,4,5,6]".into(), Tensor::zeros([0, 4, 5, 6], DType::F32).unwrap()),
        ("[2,0,5,6]".into(), Tensor::zeros([2, 0, 5, 6], DType::F32).unwrap()),
        ("[2,4,0,6]".into(), Tensor::zeros([2, 4, 0, 6], DType::F32).unwrap()),
        ("[2,4,5,6] transposed".into(), f.transpose(2, 3).unwrap()),
        ("[2,4,5,6] expanded".into(), f.narrow(0, 0, 1).unwrap().expand([2, 4, 5, 6]).unwrap()),
        ("[2,4,5,6] NaN".into(), Tensor::full([2, 4, 5, 6], f64::NAN, DType::F32).unwrap()),
        ("[1,2,7] f64".into(), Tensor::randn([1, 2, 7], DType::F64).unwrap()),
        ("[1,2,3,3,3] f32".into(), Tensor::randn([1, 2, 3, 3, 3], DType::F32).unwrap()),
        ("[1,1,1,1,1,1] f32".into(), Tensor::ones([1, 1, 1, 1, 1, 1], DType::F32).unwrap()),
    ];
    for dt in [DType::F64, DType::F16, DType::BF16, DType::I64, DType::I32, DType::U8, DType::Bool] {
        ins.push((format!("[2,4,5,6] {dt:?}"), f.to_dtype(dt).unwrap()));
    }
    let weights = [
        Tensor::randn([3, 4, 3, 3], DType::F32).unwrap(),
        Tensor::randn([4, 1, 2, 2], DType::F32).unwrap(),
        Tensor::randn([3, 4, 1, 1], DType::F32).unwrap(),
        Tensor::randn([4, 3, 2, 2], DType::F64).unwrap(),
        Tensor::zeros([0, 4, 3, 3], DType::F32).unwrap(),
        Tensor::randn([2, 2, 3], DType::F32).unwrap(),
    ];
    let params = [0usize, 1, 2, 3, 7, 1 << 20, usize::MAX];
    let mut failures = Vec::new();
    for (name, x) in &ins {
        for (wi, w) in weights.iter().enumerate() {
            for &k in &params {
                let bias = Tensor::zeros([w.dims()[0]], w.dtype()).unwrap();
                for (op, g) in [(1usize, 1usize), (k, 1), (1, k)] {
                    check(&mut failures, &format!("conv({name}, w{wi}, s{op}, p{k}, g{g})"), || {
                        ok(conv::conv(x, w, Some(&bias), &[op], &[k], &[1], g))
                    });
                    check(&mut failures, &format!("conv({name}, w{wi}, d{k})"), || {
                        ok(conv::conv(x, w, None, &[1, op], &[0, 1], &[k], 1))
                    });
                    check(
                        &mut failures,
                        &format!("conv_transpose({name}, w{wi}, s{op}, op{k}, g{g})"),
                        || ok(conv::conv_transpose(x, w, None, &[op], &[k], &[k], &[1], g)),
                    );
                }
            }
        }
        for &k in &params {
            for &s in &[0usize, 1, 2, usize::MAX] {
                for ceil in [false, true] {
                    check(&mut failures, &format!("max_pool({name}, k{k}, s{s}, ceil {ceil})"), || {
                        ok(pool::max_pool(x, &[k], &[s], &[k / 2], &[s.clamp(1, 3)], ceil))
                    });
                    check(&mut failures, &format!("avg_pool({name}, k{k}, s{s}, ceil {ceil})"), || {
                        ok(pool::avg_pool(x, &[k, 2], &[s], &[1], ceil, !ceil, Some(s)))
                    });
                }
            }
            check(&mut failures, &format!("adaptive_avg_pool({name}, {k})"), || {
                ok(pool::adaptive_avg_pool(x, &[k, 3]))
            });
            check(&mut failures, &format!("adaptive_max_pool({name}, {k})"), || {
                ok(pool::adaptive_max_pool(x, &[k]))
            });
            check(&mut failures, &format!("max_unpool({name}, {k})"), || {
                let idx = Tensor::full(x.dims().to_vec(), k as f64, DType::I64)?;
                ok(pool::max_unpool(x, &idx, &[k.min(1 << 20), 4]))
            });
        }
        if x.dtype().is_floating_point() {
            check(&mut failures, &format!("conv backward({name})"), || {
                let xl = x.deep_clone()?.requires_grad_(true)?;
                let wl = weights[0].to_dtype(x.dtype())?.requires_grad_(true)?;
                let y = conv::conv(&xl, &wl, None, &[2], &[1], &[1], 1)?;
                let (p, _) = pool::max_pool(&y, &[2], &[], &[1], &[1], true)?;
                let a = pool::avg_pool(&y, &[3], &[2], &[1], true, false, None)?;
                let s = p.sum()?.add(&a.sum()?)?;
                s.backward()?;
                let _ = s.backward();
                Ok(())
            });
        }
    }
    assert!(failures.is_empty(), "{} panics:\n{}", failures.len(), failures.join("\n"));
}

/// Empty tensors with huge sizes: an op whose output is not empty must fail with an
/// out-of-memory error before allocating, never wrap a size into a small buffer (a tensor
/// larger than its storage, which the next op would write past) nor abort; an op whose output
/// is empty returns at once. A wrapped output buffer would also trip the check every fresh
/// tensor passes (`from_cpu_buffer`).
#[test]
fn huge_empty_inputs_never_wrap_a_size() {
    use pyrite_core::ErrorKind;
    // the defect found by fuzzing: var over the empty dim of [1, 2^62, 0] made a tensor of
    // 2^62 elements over a 0-byte storage (the value and index buffers sized unchecked)
    let x = Tensor::zeros([1, 1 << 62, 0], DType::F32).unwrap();
    let e = x.var_dims(&[2], 1.0, false).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::OutOfMemory, "{e}");
    assert_eq!(x.var_mean(&[2], 1.0, true).unwrap_err().kind(), ErrorKind::OutOfMemory);
    assert_eq!(x.sum_dims(&[2], false).unwrap_err().kind(), ErrorKind::OutOfMemory);

    // ops whose result is empty return at once, however many rows the other sizes make (a
    // scan, softmax or sort along the empty dim walked 2^62 empty rows before)
    for (what, r) in [
        ("cumsum", x.cumsum(2)),
        ("cumprod", x.cumprod(2)),
        ("cummax", x.cummax(2).map(|(v, _)| v)),
        ("softmax", x.softmax(2)),
        ("log_softmax", x.log_softmax(-1)),
        ("sort", x.sort(2, false).map(|(v, _)| v)),
        ("argsort", x.argsort(2, true)),
        ("topk", x.topk(0, 2, true, true).map(|(v, _)| v)),
    ] {
        assert_eq!(r.unwrap_or_else(|e| panic!("{what}: {e}")).dims(), &[1, 1 << 62, 0], "{what}");
    }
    let y = Tensor::zeros([1 << 40, 1 << 30, 0], DType::F32).unwrap();
    assert_eq!(y.sort(2, false).unwrap().0.numel(), 0);
    assert_eq!(y.cumsum(2).unwrap().numel(), 0);

    // splitting a 2^62-long dim into 2^62 or 2^61 views is an error up front, not a loop
    // that runs until the OOM killer stops the process
    for (what, r) in [("unbind", x.unbind(1)), ("split", x.split(2, 1)), ("chunk", x.chunk(1 << 61, 1))] {
        assert_eq!(r.map(|v| v.len()).unwrap_err().kind(), ErrorKind::OutOfMemory, "{what}");
    }
    assert_eq!(x.split(1 << 61, 1).unwrap().len(), 2);
}

/// Pooling with huge output or kernel sizes: per-window tables are never built for an empty
/// result, and a table too large for memory is an out-of-memory error, not an abort.
#[test]
fn pooling_with_huge_sizes_is_an_error_not_an_abort() {
    use pyrite_core::ErrorKind;
    let empty = Tensor::zeros([0, 1, 4], DType::F32).unwrap();
    assert_eq!(pool::adaptive_avg_pool(&empty, &[1 << 40]).unwrap().dims(), &[0, 1, 1 << 40]);
    assert_eq!(pool::adaptive_max_pool(&empty, &[1 << 40]).unwrap().0.dims(), &[0, 1, 1 << 40]);
    let x = Tensor::ones([1, 1, 4], DType::F32).unwrap();
    assert_eq!(pool::adaptive_avg_pool(&x, &[1 << 40]).unwrap_err().kind(), ErrorKind::OutOfMemory);
    assert_eq!(pool::adaptive_max_pool(&x, &[1 << 40]).unwrap_err().kind(), ErrorKind::OutOfMemory);
    // a kernel of 2^40 taps over one input element (padding half the kernel, as allowed)
    let one = Tensor::ones([1, 1, 1], DType::F32).unwrap();
    let r = pool::max_pool(&one, &[1 << 40], &[1 << 40], &[1 << 39], &[1], false);
    assert_eq!(r.unwrap_err().kind(), ErrorKind::OutOfMemory);
    let empty_batch = Tensor::zeros([0, 1, 1], DType::F32).unwrap();
    let (v, _) = pool::max_pool(&empty_batch, &[1 << 40], &[1 << 40], &[1 << 39], &[1], false).unwrap();
    assert_eq!(v.numel(), 0);
}
