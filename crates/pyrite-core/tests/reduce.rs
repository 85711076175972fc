//! The reduction family against PyTorch (`reference/gen_reduce.py`), plus the semantics the
//! reference data does not pin down: error kinds, thread-count independence, long rows,
//! accuracy of f32 sums, views.

mod common;

use common::{one, Case};
use pyrite_core::{DType, ErrorKind, Result, Tensor};

/// The `dim` argument as a list; `None` (absent or null) means "every dim" (`&[]`).
fn dims_or_all(c: &Case) -> Vec<isize> {
    if c.opt("dim").is_some() {
        c.dims("dim")
    } else {
        vec![]
    }
}

fn two(r: Result<(Tensor, Tensor)>) -> Result<Vec<Tensor>> {
    let (a, b) = r?;
    Ok(vec![a, b])
}

/// The error of a call that must fail.
fn err<T>(r: Result<T>) -> pyrite_core::Error {
    match r {
        Err(e) => e,
        Ok(_) => panic!("expected an error"),
    }
}

fn ord(c: &Case) -> f64 {
    c.s("ord").parse().unwrap()
}

fn opt_dim(c: &Case) -> Option<isize> {
    c.opt("dim").map(|_| c.i("dim"))
}

#[test]
fn reduce_matches_pytorch() {
    common::check_family("reduce", |c| {
        let x = c.x(0);
        // Dims given as a list mirror `torch.op(x, dim=(...), keepdim=k)`; no dim mirrors `torch.op(x)`.
        let all = c.opt("dim").is_none();
        match c.op.as_str() {
            // torch.sum(x) / torch.sum(x, dim, keepdim)
            "sum" if all => one(x.sum()),
            "sum" => one(x.sum_dims(&c.dims("dim"), c.b("keepdim"))),
            // torch.mean(x) / torch.mean(x, dim, keepdim)
            "mean" if all => one(x.mean()),
            "mean" => one(x.mean_dims(&c.dims("dim"), c.b("keepdim"))),
            // torch.nansum / torch.nanmean
            "nansum" if all => one(x.nansum()),
            "nansum" => one(x.nansum_dims(&c.dims("dim"), c.b("keepdim"))),
            "nanmean" if all => one(x.nanmean()),
            "nanmean" => one(x.nanmean_dims(&c.dims("dim"), c.b("keepdim"))),
            // torch.prod(x) / torch.prod(x, dim, keepdim)
            "prod" if all => one(x.prod()),
            "prod" => one(x.prod_dims(&c.dims("dim"), c.b("keepdim"))),
            // x.sum_to_size(size)
            "sum_to_size" => one(x.sum_to_size(c.sizes("size"))),
            // torch.max(x) / torch.min(x)
            "max" => one(x.max()),
            "min" => one(x.min()),
            // torch.max(x, dim, keepdim) -> (values, indices)
            "max_dim" => two(x.max_dim(c.i("dim"), c.b("keepdim"))),
            "min_dim" => two(x.min_dim(c.i("dim"), c.b("keepdim"))),
            // torch.amax(x, dim, keepdim)
            "amax" => one(x.amax(&c.dims("dim"), c.b("keepdim"))),
            "amin" => one(x.amin(&c.dims("dim"), c.b("keepdim"))),
            // torch.argmax(x, dim=None|d, keepdim)
            "argmax" => one(x.argmax(opt_dim(c), c.b("keepdim"))),
            "argmin" => one(x.argmin(opt_dim(c), c.b("keepdim"))),
            // torch.var(x, dim, correction=c, keepdim=k) and friends
            "var" => one(x.var_dims(&dims_or_all(c), c.f("correction"), c.b("keepdim"))),
            "std" => one(x.std_dims(&dims_or_all(c), c.f("correction"), c.b("keepdim"))),
            "var_mean" => two(x.var_mean(&dims_or_all(c), c.f("correction"), c.b("keepdim"))),
            "std_mean" => two(x.std_mean(&dims_or_all(c), c.f("correction"), c.b("keepdim"))),
            // torch.linalg.vector_norm(x, ord, dim, keepdim)
            "norm" => one(x.norm(ord(c), &dims_or_all(c), c.b("keepdim"))),
            // torch.norm(x, p='fro', dim, keepdim)
            "norm_fro" => one(x.norm_fro(&dims_or_all(c), c.b("keepdim"))),
            // torch.logsumexp(x, dim, keepdim)
            "logsumexp" => one(x.logsumexp(&c.dims("dim"), c.b("keepdim"))),
            // torch.all(x) / torch.all(x, dim, keepdim)
            "all" if all => one(x.all()),
            "all" => one(x.all_dims(&c.dims("dim"), c.b("keepdim"))),
            "any" if all => one(x.any()),
            "any" => one(x.any_dims(&c.dims("dim"), c.b("keepdim"))),
            // torch.count_nonzero(x, dim)
            "count_nonzero" => one(x.count_nonzero(&dims_or_all(c))),
            // torch.cumsum(x, dim) ...
            "cumsum" => one(x.cumsum(c.i("dim"))),
            "cumprod" => one(x.cumprod(c.i("dim"))),
            "cummax" => two(x.cummax(c.i("dim"))),
            "cummin" => two(x.cummin(c.i("dim"))),
            // torch.softmax(x, dim[, dtype])
            "softmax" => match c.opt("dtype") {
                Some(_) => one(x.softmax_dtype(c.i("dim"), DType::from_name(c.s("dtype")).unwrap())),
                None => one(x.softmax(c.i("dim"))),
            },
            "log_softmax" => match c.opt("dtype") {
                Some(_) => one(x.log_softmax_dtype(c.i("dim"), DType::from_name(c.s("dtype")).unwrap())),
                None => one(x.log_softmax(c.i("dim"))),
            },
            _ => c.unhandled(),
        }
    });
}

// ---------------------------------------------------------------------------- semantics

fn randn(n: usize, seed: u64) -> Vec<f32> {
    // A small LCG + Box-Muller: deterministic data without a random-number dependency.
    let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    let mut next = || {
        s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((s >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    };
    (0..n)
        .map(|_| {
            let (u, v) = (next(), next());
            ((-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()) as f32
        })
        .collect()
}

#[test]
fn results_do_not_depend_on_thread_count() {
    let x = Tensor::from_vec(randn(300 * 1000, 1), [300, 1000]).unwrap();
    let long = Tensor::from_vec(randn(200_000, 2), [200_000]).unwrap();
    let run = || {
        vec![
            x.sum_dims(&[1], false).unwrap(),
            x.sum_dims(&[0], false).unwrap(),
            x.sum().unwrap(),
            long.sum().unwrap(),
            long.norm(2.0, &[], false).unwrap(),
            x.var_dims(&[1], 1.0, false).unwrap(),
            x.softmax(1).unwrap(),
            x.softmax(0).unwrap(),
            x.log_softmax(1).unwrap(),
            x.logsumexp(&[1], false).unwrap(),
            x.cumsum(1).unwrap(),
            x.max_dim(1, false).unwrap().1,
        ]
    };
    let before = pyrite_core::get_num_threads();
    pyrite_core::set_num_threads(1);
    let one = run();
    pyrite_core::set_num_threads(2);
    let two = run();
    pyrite_core::set_num_threads(3);
    let three = run();
    pyrite_core::set_num_threads(before);
    for ((a, b), c) in one.iter().zip(&two).zip(&three) {
        assert_eq!(a.to_raw_bytes().unwrap(), b.to_raw_bytes().unwrap());
        assert_eq!(a.to_raw_bytes().unwrap(), c.to_raw_bytes().unwrap());
    }
}

#[test]
fn f32_sums_are_accurate_for_long_rows() {
    // Blocked pairwise summation: far better than a naive f32 running sum.
    let v = randn(1_000_003, 3);
    let exact: f64 = v.iter().map(|&x| x as f64).sum();
    let abs: f64 = v.iter().map(|&x| x.abs() as f64).sum();
    let x = Tensor::from_vec(v.clone(), [v.len()]).unwrap();
    let got = x.sum().unwrap().item::<f64>().unwrap();
    assert!((got - exact).abs() <= 1e-6 * abs, "sum {got} vs exact {exact}");
    // A sum of a million ones is exact.
    let ones = Tensor::ones([1_000_000], DType::F32).unwrap();
    assert_eq!(ones.sum().unwrap().item::<f32>().unwrap(), 1_000_000.0);
    assert_eq!(ones.mean().unwrap().item::<f32>().unwrap(), 1.0);
    // Columns too.
    let ones2 = Tensor::ones([100_000, 3], DType::F32).unwrap();
    assert_eq!(ones2.sum_dims(&[0], false).unwrap().to_vec::<f32>().unwrap(), vec![100_000.0; 3]);
}

#[test]
fn long_rows_match_short_reductions() {
    // Rows longer than the internal block are reduced in blocks and combined.
    let v: Vec<f64> = randn(2 * 70_001, 4).into_iter().map(|x| x as f64).collect();
    let x = Tensor::from_vec(v.clone(), [2, 70_001]).unwrap();
    let want_max = v[70_001..].iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let got = x.amax(&[1], false).unwrap().to_vec::<f64>().unwrap();
    assert_eq!(got[1], want_max);
    let (vals, idx) = x.max_dim(1, false).unwrap();
    assert_eq!(vals.to_vec::<f64>().unwrap()[1], want_max);
    assert_eq!(v[70_001 + idx.to_vec::<i64>().unwrap()[1] as usize], want_max);
    let s = x.sum_dims(&[1], false).unwrap().to_vec::<f64>().unwrap();
    let want: f64 = v[..70_001].iter().sum();
    assert!((s[0] - want).abs() < 1e-9);
    let all = Tensor::ones([100_000], DType::Bool).unwrap();
    assert!(all.all().unwrap().item::<bool>().unwrap());
    assert_eq!(all.count_nonzero(&[]).unwrap().item::<i64>().unwrap(), 100_000);
}

#[test]
fn errors_have_pytorch_kinds() {
    let x = Tensor::new([[1f32, 2.], [3., 4.]]).unwrap();
    let i = Tensor::new([1i64, 2]).unwrap();
    let empty = Tensor::zeros([0, 3], DType::F32).unwrap();
    assert_eq!(err(x.sum_dims(&[2], false)).kind(), ErrorKind::Index);
    assert_eq!(err(x.sum_dims(&[0, -2], false)).kind(), ErrorKind::Value);
    assert_eq!(err(i.mean()).kind(), ErrorKind::DType);
    assert_eq!(err(i.var()).kind(), ErrorKind::DType);
    assert_eq!(err(i.norm(2.0, &[], false)).kind(), ErrorKind::DType);
    assert_eq!(err(i.softmax(0)).kind(), ErrorKind::DType);
    assert!(i.softmax_dtype(0, DType::F32).is_ok());
    let e = err(empty.max());
    assert_eq!(e.kind(), ErrorKind::Index);
    assert!(e.message().contains("max(): Expected reduction dim to be specified"), "{e}");
    assert!(err(empty.max_dim(0, false)).message().contains("dim 0 to have non-zero size"));
    assert_eq!(empty.max_dim(1, false).unwrap().0.dims(), &[0]);
    assert!(empty.norm(f64::INFINITY, &[0], false).is_err());
    assert!(Tensor::new([true, false]).unwrap().argmax(None, false).is_err());
    assert!(x.sum_to_size([3]).is_err());
}

#[test]
fn empty_reductions_give_identities() {
    let e = Tensor::zeros([2, 0], DType::F32).unwrap();
    assert_eq!(e.sum_dims(&[1], false).unwrap().to_vec::<f32>().unwrap(), vec![0., 0.]);
    assert_eq!(e.prod_dims(&[1], false).unwrap().to_vec::<f32>().unwrap(), vec![1., 1.]);
    assert!(e.mean_dims(&[1], false).unwrap().to_vec::<f32>().unwrap()[0].is_nan());
    assert_eq!(e.logsumexp(&[1], false).unwrap().to_vec::<f32>().unwrap(), vec![f32::NEG_INFINITY; 2]);
    assert_eq!(e.all_dims(&[1], false).unwrap().to_vec::<bool>().unwrap(), vec![true, true]);
    assert_eq!(e.any_dims(&[1], false).unwrap().to_vec::<bool>().unwrap(), vec![false, false]);
    assert_eq!(e.sum().unwrap().dims(), &[] as &[usize]);
    assert_eq!(e.cumsum(1).unwrap().dims(), &[2, 0]);
    assert_eq!(e.softmax(1).unwrap().dims(), &[2, 0]);
}

#[test]
fn reductions_read_views_without_changing_them() {
    let base = Tensor::from_vec((0..24).map(|v| v as f32).collect(), [2, 3, 4]).unwrap();
    let v = base.permute(&[2, 0, 1]).unwrap(); // (4, 2, 3), non-contiguous
    let s = v.sum_dims(&[0], false).unwrap();
    let want = base.sum_dims(&[2], false).unwrap();
    assert_eq!(s.to_vec::<f32>().unwrap(), want.to_vec::<f32>().unwrap());
    let s = v.sum_dims(&[1], true).unwrap();
    assert_eq!(s.dims(), &[4, 1, 3]);
    assert_eq!(s.to_vec::<f32>().unwrap()[..3], [12., 20., 28.]);
    assert_eq!(base.to_vec::<f32>().unwrap()[5], 5.0);
    // A fresh result never aliases its input.
    assert!(!s.same_storage(&base));
}

#[test]
fn sum_to_size_undoes_broadcasting() {
    let b = Tensor::new([[1f32], [2.]]).unwrap(); // (2, 1)
    let y = b.expand([3, 2, 4]).unwrap();
    let g = y.sum_to_size([2, 1]).unwrap();
    assert_eq!(g.to_vec::<f32>().unwrap(), vec![12., 24.]);
    assert_eq!(g.dims(), &[2, 1]);
    let same = b.sum_to_size([2, 1]).unwrap();
    assert!(same.is_same(&b));
}

#[test]
fn softmax_rows_sum_to_one_on_large_input() {
    let x = Tensor::from_vec(randn(64 * 1031, 5).iter().map(|v| v * 10.0).collect(), [64, 1031]).unwrap();
    let y = x.softmax(-1).unwrap();
    let s = y.sum_dims(&[1], false).unwrap().to_vec::<f32>().unwrap();
    assert!(s.iter().all(|v| (v - 1.0).abs() < 1e-5), "{s:?}");
    // log_softmax is the log of softmax.
    let l = x.log_softmax(-1).unwrap().exp().unwrap();
    assert!(l.allclose(&y, 1e-5, 1e-7, false).unwrap());
    // The generic path (f64, then converted) agrees with the fast f32 path.
    let y64 = x.to_dtype(DType::F64).unwrap().softmax(-1).unwrap().to_dtype(DType::F32).unwrap();
    assert!(y64.allclose(&y, 1e-5, 1e-7, false).unwrap());
    // And the column kernel agrees with the row kernel.
    let yt = x.t().unwrap().contiguous().unwrap().softmax(0).unwrap().t().unwrap();
    assert!(yt.allclose(&y, 1e-5, 1e-7, false).unwrap());
}

#[test]
fn softmax_larger_than_the_caches_matches_softmax_row_by_row_bit_for_bit() {
    // 4100 x 1031 f32 is 16.9 MB: the row kernel writes it with streaming stores (and rows of
    // 1031 floats start off the 64-byte grid). Each row must come out exactly as it does when
    // softmaxed alone, a small tensor that takes the plain path.
    let (rows, k) = (4100, 1031);
    let x = Tensor::from_vec(randn(rows * k, 11).iter().map(|v| v * 4.0).collect(), [rows, k]).unwrap();
    let out = Tensor::zeros([rows, k], DType::F32).unwrap();
    x.softmax_out(-1, &out).unwrap();
    for (name, big) in [
        ("softmax", x.softmax(-1).unwrap()),
        ("softmax_out", out),
        ("log_softmax", x.log_softmax(-1).unwrap()),
    ] {
        for r in [0, 1, 2047, rows as isize - 1] {
            let row = x.narrow(0, r, 1).unwrap().contiguous().unwrap();
            let alone = if name == "log_softmax" { row.log_softmax(-1) } else { row.softmax(-1) }.unwrap();
            let got = big.narrow(0, r, 1).unwrap().to_vec::<f32>().unwrap();
            let want = alone.to_vec::<f32>().unwrap();
            assert!(got.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits()), "{name}, row {r}");
        }
    }
}
