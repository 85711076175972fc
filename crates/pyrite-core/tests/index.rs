//! Indexing ops against PyTorch (reference/gen_index.py), plus semantics the reference data
//! does not show: errors carry PyTorch's messages, failing in-place ops write nothing, in-place
//! ops write through views, results do not depend on the thread count.

mod common;

use common::{one, Case};
use pyrite_core::{DType, ErrorKind, Result, Scalar, Tensor};
use serde_json::Value;

fn scalar(v: &Value) -> Scalar {
    if let Some(b) = v.as_bool() {
        Scalar::Bool(b)
    } else if let Some(i) = v.as_i64() {
        Scalar::Int(i)
    } else {
        Scalar::Float(v.as_f64().unwrap())
    }
}

/// The index list of an advanced-indexing case: "t" takes the next input (from `first`),
/// null is a full slice.
fn indices(c: &Case, first: usize) -> Vec<Option<Tensor>> {
    let mut k = first;
    c.arg("pattern")
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            if p.is_null() {
                None
            } else {
                k += 1;
                Some(c.x(k - 1).clone())
            }
        })
        .collect()
}

/// Runs an in-place op on input 0 (a view, as recorded) and returns that view.
fn inplace(c: &Case, f: impl FnOnce(&Tensor) -> Result<&Tensor>) -> Result<Vec<Tensor>> {
    let t = c.x(0).clone();
    f(&t)?;
    Ok(vec![t])
}

#[test]
fn index_matches_pytorch() {
    common::check_family("index", |c| {
        let dim = || c.i("dim");
        match c.op.as_str() {
            // torch.index_select(a, dim, i)
            "index_select" => one(c.x(0).index_select(dim(), c.x(1))),
            // torch.gather(a, dim, i)
            "gather" => one(c.x(0).gather(dim(), c.x(1))),
            // torch.take(a, i)
            "take" => one(c.x(0).take(c.x(1))),
            // torch.masked_select(a, m)
            "masked_select" => one(c.x(0).masked_select(c.x(1))),
            // torch.nonzero(a)
            "nonzero" => one(c.x(0).nonzero()),
            // a[i0, :, i2] with tensor indices
            "index" => one(c.x(0).index_tensor(&indices(c, 1))),
            // a.index_put_(indices, v, accumulate) / a[i, :] = v, through a view of a
            "index_put" => {
                let n = c.inputs.len();
                let v = c.x(n - 1);
                inplace(c, |t| t.index_put_(&indices(c, 1), v, c.b("accumulate")))
            }
            // torch.scatter(a, dim, i, s)
            "scatter" => one(c.x(0).scatter(dim(), c.x(1), c.x(2))),
            // torch.scatter(a, dim, i, value)
            "scatter_value" => one(c.x(0).scatter_value(dim(), c.x(1), scalar(c.arg("value")))),
            // torch.scatter_add(a, dim, i, s)
            "scatter_add" => one(c.x(0).scatter_add(dim(), c.x(1), c.x(2))),
            // torch.scatter_reduce(a, dim, i, s, reduce, include_self=...)
            "scatter_reduce" => {
                one(c.x(0).scatter_reduce(dim(), c.x(1), c.x(2), c.s("reduce"), c.b("include_self")))
            }
            // a_view.scatter_(dim, i, s)
            "scatter_" => inplace(c, |t| t.scatter_(dim(), c.x(1), c.x(2))),
            // a_view.scatter_(dim, i, value)
            "scatter_value_" => inplace(c, |t| t.scatter_value_(dim(), c.x(1), scalar(c.arg("value")))),
            // a_view.scatter_add_(dim, i, s)
            "scatter_add_" => inplace(c, |t| t.scatter_add_(dim(), c.x(1), c.x(2))),
            // a_view.scatter_reduce_(dim, i, s, reduce, include_self=...)
            "scatter_reduce_" => {
                inplace(c, |t| t.scatter_reduce_(dim(), c.x(1), c.x(2), c.s("reduce"), c.b("include_self")))
            }
            // torch.index_add(a, dim, i, s, alpha=alpha)
            "index_add" => one(c.x(0).index_add(dim(), c.x(1), c.x(2), scalar(c.arg("alpha")))),
            // a_view.index_add_(dim, i, s, alpha=alpha)
            "index_add_" => inplace(c, |t| t.index_add_(dim(), c.x(1), c.x(2), scalar(c.arg("alpha")))),
            // torch.index_copy(a, dim, i, s)
            "index_copy" => one(c.x(0).index_copy(dim(), c.x(1), c.x(2))),
            // a_view.index_copy_(dim, i, s)
            "index_copy_" => inplace(c, |t| t.index_copy_(dim(), c.x(1), c.x(2))),
            // torch.index_fill(a, dim, i, value)
            "index_fill" => one(c.x(0).index_fill(dim(), c.x(1), scalar(c.arg("value")))),
            // a_view.index_fill_(dim, i, value)
            "index_fill_" => inplace(c, |t| t.index_fill_(dim(), c.x(1), scalar(c.arg("value")))),
            // torch.masked_scatter(a, m, s)
            "masked_scatter" => one(c.x(0).masked_scatter(c.x(1), c.x(2))),
            // a_view.masked_scatter_(m, s)
            "masked_scatter_" => inplace(c, |t| t.masked_scatter_(c.x(1), c.x(2))),
            _ => c.unhandled(),
        }
    });
}

/// The error of a call that must fail.
fn err<T>(r: Result<T>) -> pyrite_core::Error {
    match r {
        Err(e) => e,
        Ok(_) => panic!("expected an error"),
    }
}

fn t1(v: &[f32]) -> Tensor {
    Tensor::new(v).unwrap()
}

fn i1(v: &[i64]) -> Tensor {
    Tensor::new(v).unwrap()
}

#[test]
fn out_of_range_errors_read_like_pytorch() {
    let x = Tensor::zeros([3, 2], DType::F32).unwrap();
    let e = err(x.gather(0, &Tensor::new([[5i64, 0]]).unwrap()));
    assert_eq!(e.kind(), ErrorKind::Index);
    assert!(e.message().contains("index 5 is out of bounds for dimension 0 with size 3"), "{e}");
    let e = err(x.index_select(1, &i1(&[2])));
    assert!(e.message().contains("index 2 is out of bounds for dimension 1 with size 2"), "{e}");
    let e = err(x.index_tensor(&[None, Some(i1(&[-3]))]));
    assert!(e.message().contains("index -3 is out of bounds for dimension 1 with size 2"), "{e}");
    let e = err(x.take(&i1(&[6])));
    assert_eq!(e.message(), "out of range: tried to access index 6 on a tensor of 6 elements.");
    let e = err(x.scatter_reduce(0, &Tensor::new([[0i64]]).unwrap(), &x, "median", true));
    assert!(e.message().contains("reduce argument must be either sum, prod, mean, amax or amin"), "{e}");
}

#[test]
fn failing_inplace_ops_leave_the_target_untouched() {
    let x = Tensor::zeros([4], DType::F32).unwrap();
    let v0 = x.to_vec::<f32>().unwrap();
    // The bad index comes last: nothing may be written before it is found.
    assert!(x.index_put_(&[Some(i1(&[0, 1, 9]))], &t1(&[1., 2., 3.]), false).is_err());
    assert!(x.scatter_(0, &i1(&[0, 1, 4]), &t1(&[1., 2., 3.])).is_err());
    assert!(x.index_add_(0, &i1(&[0, 7]), &t1(&[1., 2.]), 1).is_err());
    assert!(x.index_fill_(0, &i1(&[0, -5]), 1.0).is_err());
    assert_eq!(x.to_vec::<f32>().unwrap(), v0);
}

#[test]
fn inplace_ops_write_through_views() {
    let base = Tensor::zeros([3, 4], DType::F32).unwrap();
    let col = base.select(1, 2).unwrap(); // strided view of column 2
    col.index_put_(&[Some(i1(&[0, 2]))], &t1(&[5., 6.]), false).unwrap();
    col.scatter_add_(0, &i1(&[1, 1]), &t1(&[1., 2.])).unwrap();
    let v = base.to_vec2::<f32>().unwrap();
    assert_eq!(v[0], vec![0., 0., 5., 0.]);
    assert_eq!(v[1], vec![0., 0., 3., 0.]);
    assert_eq!(v[2], vec![0., 0., 6., 0.]);
    let version = base.version();
    base.t().unwrap().index_fill_(0, &i1(&[3]), -1.0).unwrap();
    assert!(base.version() > version);
    assert_eq!(base.to_vec2::<f32>().unwrap()[1], vec![0., 0., 3., -1.]);
}

#[test]
fn scatter_onto_an_expanded_tensor_is_an_error() {
    let x = Tensor::zeros([1, 3], DType::F32).unwrap().expand([4, 3]).unwrap();
    let e = err(x.scatter_value_(0, &Tensor::new([[0i64]]).unwrap(), 1.0));
    assert!(e.message().contains("more than one element of the written-to tensor"), "{e}");
}

#[test]
fn source_sharing_storage_with_the_target_is_read_before_writing() {
    // x.index_copy_(0, [1, 0], x): rows swap as if `x` were copied first.
    let x = Tensor::new([[1f32, 2.], [3., 4.]]).unwrap();
    x.index_copy_(0, &i1(&[1, 0]), &x.clone()).unwrap();
    assert_eq!(x.to_vec2::<f32>().unwrap(), vec![vec![3., 4.], vec![1., 2.]]);
    let y = Tensor::new([1f32, 2., 3.]).unwrap();
    y.index_put_(&[Some(i1(&[0, 1, 2]))], &y.flip(&[0]).unwrap(), false).unwrap();
    assert_eq!(y.to_vec::<f32>().unwrap(), vec![3., 2., 1.]);
    let z = Tensor::new([1f32, 2., 3.]).unwrap();
    z.scatter_(0, &i1(&[2, 1, 0]), &z.clone()).unwrap();
    assert_eq!(z.to_vec::<f32>().unwrap(), vec![3., 2., 1.]);
}

#[test]
fn large_gathers_do_not_depend_on_the_thread_count() {
    let n = 300_000;
    let x = Tensor::arange(0.0, n as f64, 1.0, DType::F32).unwrap().reshape([n / 3, 3]).unwrap();
    let idx: Vec<i64> = (0..n as i64).map(|i| (i * 7919) % (n as i64 / 3)).collect();
    let idx = Tensor::from_vec(idx, [n]).unwrap();
    let run = || {
        (
            x.index_select(0, &idx).unwrap().to_vec::<f32>().unwrap(),
            x.t().unwrap().index_select(1, &idx).unwrap().to_vec::<f32>().unwrap(),
            x.index_tensor(&[Some(idx.clone())]).unwrap().to_vec::<f32>().unwrap(),
            x.gather(0, &idx.narrow(0, 0, 90_000).unwrap().reshape([30_000, 3]).unwrap())
                .unwrap()
                .to_vec::<f32>()
                .unwrap(),
        )
    };
    let before = pyrite_core::get_num_threads();
    pyrite_core::set_num_threads(1);
    let a = run();
    pyrite_core::set_num_threads(4);
    let b = run();
    pyrite_core::set_num_threads(before);
    assert!(a == b);
    assert_eq!(a.0[3], ((7919 % (n / 3)) * 3) as f32);
}

#[test]
fn index_tensor_places_broadcast_dims_like_numpy() {
    let x = Tensor::zeros([2, 3, 4, 5], DType::F32).unwrap();
    let i = Tensor::zeros([6, 1], DType::I64).unwrap();
    let j = Tensor::zeros([7], DType::I64).unwrap();
    // adjacent: stay in place
    assert_eq!(x.index_tensor(&[None, Some(i.clone()), Some(j.clone())]).unwrap().dims(), &[2, 6, 7, 5]);
    // separated by a slice: go first
    assert_eq!(x.index_tensor(&[Some(i), None, Some(j)]).unwrap().dims(), &[6, 7, 3, 5]);
    // a bool mask consumes as many dims as it has
    let m = Tensor::ones([2, 3], DType::Bool).unwrap();
    assert_eq!(x.index_tensor(&[Some(m)]).unwrap().dims(), &[6, 4, 5]);
}

#[test]
fn nonzero_tuple_splits_columns() {
    let x = Tensor::new([[0i64, 3], [4, 0]]).unwrap();
    let t = x.nonzero_tuple().unwrap();
    assert_eq!(t[0].to_vec::<i64>().unwrap(), vec![0, 1]);
    assert_eq!(t[1].to_vec::<i64>().unwrap(), vec![1, 0]);
}

#[test]
fn empty_index_lists_give_empty_results() {
    let x = Tensor::zeros([2, 3, 4], DType::F32).unwrap();
    let e = Tensor::zeros([0], DType::I64).unwrap();
    let y = x.index_tensor(&[Some(e.clone()), None, Some(e.clone())]).unwrap();
    assert_eq!(y.dims(), &[0, 3]);
    let z = x.index_tensor(&[None, Some(e.clone()), Some(e.clone())]).unwrap();
    assert_eq!(z.dims(), &[2, 0]);
    x.index_put_(&[Some(e.clone()), Some(e)], &Tensor::scalar(1f32).unwrap(), true).unwrap();
    assert_eq!(total(&x), 0.0);
}

fn total(t: &Tensor) -> f64 {
    t.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap().iter().sum()
}
