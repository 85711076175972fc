//! Linear algebra against PyTorch (`reference/gen_linalg.py`), plus semantics the reference
//! data cannot show: out= tensors, in-place visibility, aliasing, thread-count independence,
//! large products against a naive f64 reference.

mod common;

use common::one;
use pyrite_core::{einsum, DType, Tensor};

#[test]
fn linalg_matches_pytorch() {
    common::check_family("linalg", |c| match c.op.as_str() {
        // torch.matmul(a, b)
        "matmul" => one(c.x(0).matmul(c.x(1))),
        // torch.matmul(a, b, out=out), out possibly transposed
        "matmul_out" => {
            let (a, b) = (c.x(0), c.x(1));
            let expect = c.outputs.first().map(|o| o.dims().to_vec());
            let dtype = match c.opt("out_dtype") {
                Some(_) => DType::F64,
                None => a.dtype(),
            };
            let shape = expect.unwrap_or_else(|| vec![a.dims()[0], b.dims()[1]]);
            let out = if c.opt("out_t").and_then(|v| v.as_bool()).unwrap_or(false) {
                let mut s = shape.clone();
                s.reverse();
                Tensor::zeros(s, dtype)?.t()?
            } else {
                Tensor::zeros(shape, dtype)?
            };
            let r = a.matmul_out(b, &out)?;
            assert!(r.is_same(&out));
            one(Ok(out))
        }
        // torch.mm / torch.bmm / torch.mv / torch.dot / torch.outer / torch.ger
        "mm" => one(c.x(0).mm(c.x(1))),
        "bmm" => one(c.x(0).bmm(c.x(1))),
        "mv" => one(c.x(0).mv(c.x(1))),
        "dot" => one(c.x(0).dot(c.x(1))),
        "outer" => one(c.x(0).outer(c.x(1))),
        "ger" => one(c.x(0).ger(c.x(1))),
        // torch.addmm(input, a, b, beta=, alpha=)
        "addmm" => one(c.x(0).addmm(c.x(1), c.x(2), scalar(c, "beta"), scalar(c, "alpha"))),
        // torch.baddbmm(input, a, b, beta=, alpha=)
        "baddbmm" => one(c.x(0).baddbmm(c.x(1), c.x(2), scalar(c, "beta"), scalar(c, "alpha"))),
        // torch.einsum(eq, *operands)
        "einsum" => {
            let ops: Vec<&Tensor> = c.inputs.iter().collect();
            one(einsum(c.s("eq"), &ops))
        }
        _ => c.unhandled(),
    });
}

/// The error of a call that must fail.
fn err(r: pyrite_core::Result<Tensor>) -> pyrite_core::Error {
    match r {
        Ok(t) => panic!("expected an error, got a tensor of shape {:?}", t.dims()),
        Err(e) => e,
    }
}

/// A Python number argument: int stays int (matters for integer tensors), else float.
fn scalar(c: &common::Case, key: &str) -> pyrite_core::Scalar {
    let v = c.arg(key);
    match v.as_i64() {
        Some(i) => pyrite_core::Scalar::Int(i),
        None => pyrite_core::Scalar::Float(v.as_f64().unwrap()),
    }
}

/// Deterministic pseudo-random f32 values in [-1, 1).
fn rand_vec(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

fn rand(shape: &[usize], seed: u64) -> Tensor {
    Tensor::from_vec(rand_vec(shape.iter().product(), seed), shape.to_vec()).unwrap()
}

/// Naive f64 matrix product of row-major data.
fn naive(a: &[f32], b: &[f32], m: usize, k: usize, n: usize) -> Vec<f64> {
    let mut c = vec![0f64; m * n];
    for i in 0..m {
        for p in 0..k {
            let x = a[i * k + p] as f64;
            for j in 0..n {
                c[i * n + j] += x * b[p * n + j] as f64;
            }
        }
    }
    c
}

fn assert_close(got: &[f32], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len());
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert!((g as f64 - w).abs() <= tol * (1.0 + w.abs()), "element {i}: {g} vs {w}");
    }
}

#[test]
fn large_products_match_a_naive_reference() {
    for &(m, k, n) in
        &[(129, 257, 65), (300, 40, 300), (1, 500, 300), (300, 500, 1), (64, 64, 64), (80, 1100, 530)]
    {
        let a = rand(&[m, k], 1);
        let b = rand(&[k, n], 2);
        let want = naive(&a.to_vec::<f32>().unwrap(), &b.to_vec::<f32>().unwrap(), m, k, n);
        let got = a.matmul(&b).unwrap();
        assert_eq!(got.dims(), &[m, n]);
        assert_close(&got.to_vec::<f32>().unwrap(), &want, 1e-4);
        // The same product with both operands transposed in memory (no copies).
        let a_t = a.t().unwrap().contiguous().unwrap().t().unwrap();
        let b_t = b.t().unwrap().contiguous().unwrap().t().unwrap();
        assert!(!a_t.is_contiguous() || m == 1 || k == 1);
        assert_close(&a_t.matmul(&b_t).unwrap().to_vec::<f32>().unwrap(), &want, 1e-4);
    }
}

#[test]
fn results_do_not_depend_on_the_thread_count() {
    let a = rand(&[200, 150], 3);
    let b = rand(&[150, 220], 4);
    let batch_a = rand(&[40, 12, 20], 5);
    let batch_b = rand(&[40, 20, 16], 6);
    let ia = Tensor::from_vec((0..120 * 90).map(|i| (i % 251) as i64 - 120).collect::<Vec<_>>(), [120, 90])
        .unwrap();
    let ib =
        Tensor::from_vec((0..90 * 100).map(|i| (i % 13) as i64 - 6).collect::<Vec<_>>(), [90, 100]).unwrap();
    // Large enough to be split into column panels (and depth steps: k > 512), written into a
    // row-major and a column-major output.
    let pa = rand(&[70, 600], 11);
    let pb = rand(&[600, 300], 12);
    let before = pyrite_core::get_num_threads();
    let mut runs = Vec::new();
    for threads in [1, 2, 3] {
        pyrite_core::set_num_threads(threads);
        let col_major = Tensor::zeros([300, 70], DType::F32).unwrap().t().unwrap();
        pa.matmul_out(&pb, &col_major).unwrap();
        runs.push((
            a.matmul(&b).unwrap().to_vec::<f32>().unwrap(),
            batch_a.matmul(&batch_b).unwrap().to_vec::<f32>().unwrap(),
            ia.matmul(&ib).unwrap().to_vec::<i64>().unwrap(),
            einsum("bij,bjk->bik", &[&batch_a, &batch_b]).unwrap().to_vec::<f32>().unwrap(),
            pa.matmul(&pb).unwrap().to_vec::<f32>().unwrap(),
            col_major.to_vec::<f32>().unwrap(),
        ));
    }
    pyrite_core::set_num_threads(before);
    for r in &runs[1..] {
        assert!(r.0 == runs[0].0, "2-d product differs between thread counts");
        assert!(r.1 == runs[0].1, "batched product differs between thread counts");
        assert!(r.2 == runs[0].2, "integer product differs between thread counts");
        assert!(r.3 == runs[0].3, "einsum differs between thread counts");
        assert!(r.4 == runs[0].4, "paneled product differs between thread counts");
        assert!(r.5 == runs[0].5, "paneled product into a column-major output differs between thread counts");
    }
    let want = naive(&a.to_vec::<f32>().unwrap(), &b.to_vec::<f32>().unwrap(), 200, 150, 220);
    assert_close(&runs[0].0, &want, 1e-4);
    let want = naive(&pa.to_vec::<f32>().unwrap(), &pb.to_vec::<f32>().unwrap(), 70, 600, 300);
    assert_close(&runs[0].4, &want, 1e-4);
    assert_close(&runs[0].5, &want, 1e-4);
}

#[test]
fn batched_products_split_or_fold_correctly() {
    // Batch folded into rows: (b, m, k) @ (k, n).
    let a = rand(&[7, 9, 11], 7);
    let w = rand(&[11, 5], 8);
    let got = a.matmul(&w).unwrap().to_vec::<f32>().unwrap();
    let want = naive(&a.to_vec::<f32>().unwrap(), &w.to_vec::<f32>().unwrap(), 63, 11, 5);
    assert_close(&got, &want, 1e-5);
    // Many small products, broadcast batch dims on both sides.
    let x = rand(&[6, 1, 4, 3], 9);
    let y = rand(&[5, 3, 2], 10);
    let r = x.matmul(&y).unwrap();
    assert_eq!(r.dims(), &[6, 5, 4, 2]);
    for i in [0usize, 3, 5] {
        for j in [0usize, 2, 4] {
            let xi = x.select(0, i as isize).unwrap().select(0, 0).unwrap();
            let yj = y.select(0, j as isize).unwrap();
            let want = xi.mm(&yj).unwrap().to_vec::<f32>().unwrap();
            let got =
                r.select(0, i as isize).unwrap().select(0, j as isize).unwrap().to_vec::<f32>().unwrap();
            assert_eq!(got, want);
        }
    }
}

#[test]
fn matmul_out_writes_into_views_and_copies_aliased_inputs() {
    // Writing into a column slice of a bigger tensor.
    let big = Tensor::zeros([3, 6], DType::F32).unwrap();
    let a = Tensor::new([[1f32, 2.], [3., 4.], [5., 6.]]).unwrap();
    let b = Tensor::new([[1f32, 0.], [0., 1.]]).unwrap();
    let dst = big.narrow(1, 2, 2).unwrap();
    let v0 = big.version();
    a.matmul_out(&b, &dst).unwrap();
    assert!(big.version() > v0);
    assert_eq!(
        big.to_vec2::<f32>().unwrap(),
        vec![vec![0., 0., 1., 2., 0., 0.], vec![0., 0., 3., 4., 0., 0.], vec![0., 0., 5., 6., 0., 0.]]
    );
    // out aliasing an input: the input is read before it is overwritten.
    let x = Tensor::new([[1f32, 2.], [3., 4.]]).unwrap();
    x.matmul_out(&x.deep_clone().unwrap(), &x).unwrap();
    assert_eq!(x.to_vec2::<f32>().unwrap(), vec![vec![7., 10.], vec![15., 22.]]);
    let y = Tensor::new([[1f32, 2.], [3., 4.]]).unwrap();
    y.matmul_out(&y.t().unwrap(), &y).unwrap();
    assert_eq!(y.to_vec2::<f32>().unwrap(), vec![vec![5., 11.], vec![11., 25.]]);
    // Wrong shape, wrong dtype, overlapping output.
    let e = err(a.matmul_out(&b, &Tensor::zeros([2, 2], DType::F32).unwrap()));
    assert!(e.message().contains("shape"), "{e}");
    let e = err(a.matmul_out(&b, &Tensor::zeros([3, 2], DType::F64).unwrap()));
    assert!(e.message().contains("Expected out tensor to have dtype float, but got double"), "{e}");
    let over = Tensor::zeros([1, 2], DType::F32).unwrap().expand([3, 2]).unwrap();
    assert!(a.matmul_out(&b, &over).is_err());
}

#[test]
fn addmm_in_place_and_out() {
    let acc = Tensor::new([[1f32, 1.], [1., 1.]]).unwrap();
    let view = acc.clone();
    let a = Tensor::new([[1f32, 2.], [3., 4.]]).unwrap();
    acc.addmm_(&a, &a, 2, 1).unwrap();
    assert_eq!(view.to_vec2::<f32>().unwrap(), vec![vec![9., 12.], vec![17., 24.]]);
    // Half precision in place: computed in f32, written back rounded.
    let h = Tensor::new([[1f32, 1.], [1., 1.]]).unwrap().to_dtype(DType::BF16).unwrap();
    let ah = a.to_dtype(DType::BF16).unwrap();
    h.addmm_(&ah, &ah, 1, 1).unwrap();
    assert_eq!(
        h.to_dtype(DType::F32).unwrap().to_vec2::<f32>().unwrap(),
        vec![vec![8., 11.], vec![16., 23.]]
    );
    // addmm_out with a broadcast bias into a fresh tensor.
    let out = Tensor::zeros([2, 2], DType::F32).unwrap();
    Tensor::new([10f32, 20.]).unwrap().addmm_out(&a, &a, 1, 1, &out).unwrap();
    assert_eq!(out.to_vec2::<f32>().unwrap(), vec![vec![17., 30.], vec![25., 42.]]);
    // In-place with a broadcast self is refused (the result does not fit).
    let row = Tensor::new([1f32, 1.]).unwrap();
    assert!(row.addmm_(&a, &a, 1, 1).is_err());
}

#[test]
fn errors_read_like_pytorch() {
    let a = Tensor::zeros([2, 3], DType::F32).unwrap();
    let b = Tensor::zeros([4, 5], DType::F32).unwrap();
    let e = err(a.matmul(&b));
    assert_eq!(e.message(), "mm: mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)");
    let e = err(a.matmul(&Tensor::zeros([3, 5], DType::F64).unwrap()));
    assert_eq!(e.message(), "expected m1 and m2 to have the same dtype, but got: float != double");
    let e = err(a.to_dtype(DType::Bool).unwrap().matmul(&a.t().unwrap().to_dtype(DType::Bool).unwrap()));
    assert_eq!(e.message(), "\"addmm_impl_cpu_\" not implemented for 'Bool'");
    let e = err(Tensor::scalar(1f32).unwrap().matmul(&a));
    assert!(e.message().contains("at least 1D"), "{e}");
    let e = err(einsum("ij,jk->ik", &[&a]));
    assert_eq!(e.message(), "einsum(): fewer operands were provided than specified in the equation");
    let e = err(einsum("ij,jk->ik", &[&a, &b]));
    assert_eq!(
        e.message(),
        "einsum(): subscript j has size 4 for operand 1 which does not broadcast with previously seen size 3"
    );
    let e = err(einsum("ijk->i", &[&a]));
    assert_eq!(
        e.message(),
        "einsum(): the number of subscripts in the equation (3) does not match the number of dimensions (2) for operand 0 and no ellipsis was given"
    );
    assert!(einsum("ij", &[]).is_err());
}

#[test]
fn einsum_views_and_dtypes() {
    let a = Tensor::arange(0.0, 9.0, 1.0, DType::F32).unwrap().reshape([3, 3]).unwrap();
    // A pure permutation or diagonal is a view, as in PyTorch.
    let t = einsum("ij->ji", &[&a]).unwrap();
    assert!(t.same_storage(&a) && !t.is_contiguous());
    let d = einsum("ii->i", &[&a]).unwrap();
    assert!(d.same_storage(&a));
    assert_eq!(d.to_vec::<f32>().unwrap(), vec![0., 4., 8.]);
    // Integer sums promote to int64; products keep the dtype.
    let u = a.to_dtype(DType::U8).unwrap();
    assert_eq!(einsum("ij->", &[&u]).unwrap().dtype(), DType::I64);
    assert_eq!(einsum("ij,jk->ik", &[&u, &u]).unwrap().dtype(), DType::U8);
    // Five operands, contracted left to right.
    let v = Tensor::ones([3], DType::F64).unwrap();
    let m = a.to_dtype(DType::F64).unwrap();
    let r = einsum("i,ij,jk,kl,l->", &[&v, &m, &m, &m, &v]).unwrap();
    let want = v.matmul(&m).unwrap().matmul(&m).unwrap().matmul(&m).unwrap().dot(&v).unwrap();
    assert_eq!(r.item::<f64>().unwrap(), want.item::<f64>().unwrap());
}

/// `x @ w.t()` (both operands running along the depth, a linear layer's forward pass) is
/// computed through a column-major buffer; the row-major result, `addmm` into an existing
/// output (beta != 0) and every thread count must agree with the plain product.
#[test]
fn linear_layout_products_match_the_naive_product() {
    let (m, k, n) = (130, 300, 270);
    let x = rand(&[m, k], 21);
    let w = rand(&[n, k], 22);
    let w_rows = w.t().unwrap().contiguous().unwrap().to_vec::<f32>().unwrap();
    let want = naive(&x.to_vec::<f32>().unwrap(), &w_rows, m, k, n);
    let bias = rand(&[m, n], 23);
    let before = pyrite_core::get_num_threads();
    for threads in [1, 2, 3] {
        pyrite_core::set_num_threads(threads);
        assert_close(&x.matmul(&w.t().unwrap()).unwrap().to_vec::<f32>().unwrap(), &want, 1e-4);
        // out = 0.5 * out + 2 * x @ w.t(), into a row-major existing tensor.
        let out = bias.deep_clone().unwrap();
        bias.addmm_out(&x, &w.t().unwrap(), 0.5, 2.0, &out).unwrap();
        let b = bias.to_vec::<f32>().unwrap();
        let want2: Vec<f64> = want.iter().zip(&b).map(|(p, &o)| 0.5 * o as f64 + 2.0 * p).collect();
        assert_close(&out.to_vec::<f32>().unwrap(), &want2, 1e-4);
    }
    pyrite_core::set_num_threads(before);
}

/// Large f32 products run on the AVX-512 register kernel where the machine has one (the last
/// m % 6 rows as a zero-padded group) and on `gemm` for the columns left over (fewer than 64);
/// the seams must not show. Shapes with leftover rows and columns (also inside a panel),
/// several depth steps (k > 512), `addmm` with alpha and beta, and `matmul_out` into an
/// output full of NaN (which must be overwritten, never read), on 1 to 3 threads.
#[test]
fn register_kernel_products_match_the_naive_product() {
    let before = pyrite_core::get_num_threads();
    for &(m, k, n) in &[(133, 700, 333), (64, 256, 1100), (301, 1030, 600)] {
        let a = rand(&[m, k], 31);
        let b = rand(&[k, n], 32);
        let input = rand(&[m, n], 33);
        let want = naive(&a.to_vec::<f32>().unwrap(), &b.to_vec::<f32>().unwrap(), m, k, n);
        let inp = input.to_vec::<f32>().unwrap();
        let want_addmm: Vec<f64> = want.iter().zip(&inp).map(|(p, &x)| 0.5 * x as f64 - 2.0 * p).collect();
        let mut runs = Vec::new();
        for threads in [1, 2, 3] {
            pyrite_core::set_num_threads(threads);
            let got = a.matmul(&b).unwrap().to_vec::<f32>().unwrap();
            assert_close(&got, &want, 1e-4);
            let out = Tensor::full([m, n], f32::NAN, DType::F32).unwrap();
            a.matmul_out(&b, &out).unwrap();
            assert_eq!(out.to_vec::<f32>().unwrap(), got, "matmul_out differs from matmul ({m}, {k}, {n})");
            let y = input.addmm(&a, &b, 0.5, -2.0).unwrap().to_vec::<f32>().unwrap();
            assert_close(&y, &want_addmm, 1e-4);
            runs.push((got, y));
        }
        assert!(runs.iter().all(|r| *r == runs[0]), "results differ between thread counts ({m}, {k}, {n})");
    }
    pyrite_core::set_num_threads(before);
}
