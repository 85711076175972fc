//! Sorting and searching against PyTorch (reference/gen_sort.py), plus stability and
//! thread-count independence on inputs larger than the reference data.

mod common;

use common::one;
use pyrite_core::{DType, Result, Tensor};

fn pair(r: Result<(Tensor, Tensor)>) -> Result<Vec<Tensor>> {
    let (a, b) = r?;
    Ok(vec![a, b])
}

/// The outputs torch.unique returns for these flags.
fn unique_outs(r: Result<(Tensor, Option<Tensor>, Option<Tensor>)>) -> Result<Vec<Tensor>> {
    let (v, inv, cnt) = r?;
    Ok(std::iter::once(v).chain(inv).chain(cnt).collect())
}

#[test]
fn sort_matches_pytorch() {
    common::check_family("sort", |c| match c.op.as_str() {
        // torch.sort(a, dim, descending, stable=...)
        "sort" => pair(c.x(0).sort(c.i("dim"), c.b("descending"))),
        // torch.argsort(a, dim, descending, stable=True)
        "argsort" => one(c.x(0).argsort(c.i("dim"), c.b("descending"))),
        // torch.topk(a, k, dim, largest)
        "topk" => pair(c.x(0).topk(c.u("k"), c.i("dim"), c.b("largest"), true)),
        // torch.topk(a, k, dim, largest).values
        "topk_values" => one(c.x(0).topk(c.u("k"), c.i("dim"), c.b("largest"), true).map(|r| r.0)),
        // torch.kthvalue(a, k, dim, keepdim)
        "kthvalue" => pair(c.x(0).kthvalue(c.u("k"), c.i("dim"), c.b("keepdim"))),
        // torch.kthvalue(a, k, dim, keepdim).values
        "kthvalue_values" => one(c.x(0).kthvalue(c.u("k"), c.i("dim"), c.b("keepdim")).map(|r| r.0)),
        // torch.unique(a, sorted=True, return_inverse, return_counts)
        "unique" => unique_outs(c.x(0).unique(true, c.b("return_inverse"), c.b("return_counts"))),
        // torch.unique(a, sorted=True, return_inverse, return_counts, dim=dim)
        "unique_dim" => {
            unique_outs(c.x(0).unique_dim(c.i("dim"), true, c.b("return_inverse"), c.b("return_counts")))
        }
        // torch.searchsorted(s, v, right=..., side=..., out_int32=...)
        "searchsorted" => one(c.x(0).searchsorted(
            c.x(1),
            c.b("out_int32"),
            c.b("right"),
            c.opt("side").map(|s| s.as_str().unwrap()),
        )),
        // torch.searchsorted(s, scalar, right=...)
        "searchsorted_scalar" => {
            let v = c.arg("value");
            match v.as_i64() {
                Some(i) => one(c.x(0).searchsorted_scalar(i, false, c.b("right"), None)),
                None => one(c.x(0).searchsorted_scalar(v.as_f64().unwrap(), false, c.b("right"), None)),
            }
        }
        // torch.bucketize(v, boundaries, out_int32=..., right=...)
        "bucketize" => one(c.x(0).bucketize(c.x(1), c.b("out_int32"), c.b("right"))),
        _ => c.unhandled(),
    });
}

/// A deterministic pseudo-random sequence with many ties.
fn lcg(n: usize, modulo: u64) -> Vec<f32> {
    let mut s = 12345u64;
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((s >> 33) % modulo) as f32
        })
        .collect()
}

#[test]
fn sort_is_stable_on_large_inputs_in_both_directions() {
    let v = lcg(100_000, 50);
    let x = Tensor::from_vec(v.clone(), [100_000]).unwrap();
    for descending in [false, true] {
        let (s, i) = x.sort(0, descending).unwrap();
        let s = s.to_vec::<f32>().unwrap();
        let i = i.to_vec::<i64>().unwrap();
        for k in 1..s.len() {
            let ordered = if descending { s[k - 1] >= s[k] } else { s[k - 1] <= s[k] };
            assert!(ordered);
            if s[k - 1] == s[k] {
                assert!(i[k - 1] < i[k], "ties must keep input order");
            }
            assert_eq!(v[i[k] as usize], s[k]);
        }
    }
}

#[test]
fn results_do_not_depend_on_the_thread_count() {
    let x = Tensor::from_vec(lcg(120_000, 1000), [300, 400]).unwrap();
    let run = || {
        let (a, b) = x.sort(0, true).unwrap();
        let (c, d) = x.topk(5, 1, false, true).unwrap();
        let (e, f) = x.kthvalue(7, 0, false).unwrap();
        (
            a.to_vec::<f32>().unwrap(),
            b.to_vec::<i64>().unwrap(),
            c.to_vec::<f32>().unwrap(),
            d.to_vec::<i64>().unwrap(),
            e.to_vec::<f32>().unwrap(),
            f.to_vec::<i64>().unwrap(),
        )
    };
    let before = pyrite_core::get_num_threads();
    pyrite_core::set_num_threads(1);
    let p = run();
    pyrite_core::set_num_threads(4);
    let q = run();
    pyrite_core::set_num_threads(before);
    assert!(p == q);
}

#[test]
fn topk_and_kthvalue_agree_with_sort() {
    let x = Tensor::from_vec(lcg(2000, 97), [4, 500]).unwrap();
    let (sv, si) = x.sort(1, false).unwrap();
    let (tv, ti) = x.topk(10, 1, false, true).unwrap();
    assert_eq!(tv.to_vec2::<f32>().unwrap()[2], sv.narrow(1, 0, 10).unwrap().to_vec2::<f32>().unwrap()[2]);
    assert_eq!(ti.to_vec2::<i64>().unwrap()[3], si.narrow(1, 0, 10).unwrap().to_vec2::<i64>().unwrap()[3]);
    let (kv, ki) = x.kthvalue(250, 1, true).unwrap();
    assert_eq!(kv.dims(), &[4, 1]);
    assert_eq!(kv.to_vec::<f32>().unwrap(), sv.select(1, 249).unwrap().to_vec::<f32>().unwrap());
    assert_eq!(ki.to_vec::<i64>().unwrap(), si.select(1, 249).unwrap().to_vec::<i64>().unwrap());
}

#[test]
fn errors_not_panics() {
    let x = Tensor::zeros([2, 3], DType::F32).unwrap();
    assert!(x.topk(4, 1, true, true).is_err());
    assert!(x.kthvalue(0, 1, false).is_err());
    assert!(x.sort(2, false).is_err());
    assert!(x.searchsorted(&x, false, false, Some("middle")).is_err());
    let b = Tensor::ones([2], DType::Bool).unwrap();
    assert!(b.searchsorted(&b, false, false, None).is_err());
    assert!(Tensor::scalar(1.0f32).unwrap().unique_dim(0, true, false, false).is_err());
}
