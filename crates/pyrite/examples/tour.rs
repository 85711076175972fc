//! A tour of Pyrite's tensor library, end to end: creation, broadcasting, views, in-place ops,
//! reductions, linear algebra, indexing, random numbers, files and memory statistics.
//!
//! Run: `cargo run --release -p pyrite --example tour`

use pyrite::prelude::*;
use pyrite::{autograd, einsum, manual_seed, memory};

fn main() -> Result<()> {
    // Tensors from nested arrays; runtime dtypes with PyTorch's promotion rules.
    let x = Tensor::new([[1f32, 2., 3.], [4., 5., 6.]])?;
    let bias = Tensor::new([0.5f32, -0.5, 0.0])?;
    let y = ((&x * 2.0)? + &bias)?; // broadcasting, like x * 2 + bias
    println!("y = {y}");
    assert_eq!(Tensor::new([1i64, 2])?.div(&Tensor::new([2i64, 2])?)?.dtype(), DType::F32);

    // Views share storage; in-place writes show through every view.
    let col = y.select(1, 0)?; // y[:, 0]
    col.fill_(0.0)?;
    assert_eq!(y.to_vec2::<f32>()?[1][0], 0.0);
    let yt = y.t()?;
    println!(
        "y.T is contiguous: {}, y.T[1:, ..., None] has shape {:?}",
        yt.is_contiguous(),
        yt.index(&idx![1.., ..., None])?.dims()
    );

    // Reductions and a numerically stable softmax.
    let probs = y.softmax(-1)?;
    println!("softmax rows sum to {}", probs.sum_dims(&[-1], false)?);
    let (vals, idxs) = y.max_dim(1, false)?;
    println!("row max {vals}, argmax {idxs}");

    // Linear algebra: matmul with broadcasting, and einsum.
    manual_seed(0);
    let w = Tensor::randn([3, 4], DType::F32)?;
    let h = x.matmul(&w)?.relu()?;
    let same = einsum("ij,jk->ik", &[&x, &w])?.relu()?;
    assert!(h.allclose(&same, 1e-5, 1e-6, false)?);
    println!("relu(x @ w) = {h}");

    // Indexing, joining, sorting.
    let (top, at) = h.topk(2, -1, true, true)?;
    let picked = h.gather(1, &at)?;
    assert!(picked.allclose(&top, 0.0, 0.0, false)?);
    let both = Tensor::cat(&[&h, &top], 1)?;
    println!("cat -> {:?}, sorted row 0: {}", both.dims(), both.select(0, 0)?.sort(0, true)?.0);

    // Seeded random sampling: the same seed gives the same numbers, whatever the thread count.
    manual_seed(42);
    let a = Tensor::rand([4], DType::F64)?;
    manual_seed(42);
    let b = Tensor::rand([4], DType::F64)?;
    assert_eq!(a.to_vec::<f64>()?, b.to_vec::<f64>()?);
    let draws = Tensor::new([0.0f32, 0.3, 0.7])?.multinomial(5, true, None)?;
    println!("multinomial draws (category 0 has weight 0): {draws}");

    // .npy files for numpy users.
    let path = std::env::temp_dir().join("pyrite_tour.npy");
    h.save_npy(&path)?;
    let back = Tensor::load_npy(&path)?;
    assert!(back.allclose(&h, 0.0, 0.0, false)?);
    std::fs::remove_file(&path).ok();

    // Memory statistics from the caching allocator, with PyTorch's names.
    let big = Tensor::zeros([1 << 20], DType::F32)?;
    println!("allocated: {} bytes", memory::memory_allocated(Device::Cpu)?);
    drop(big);
    println!("reserved after free (cached for reuse): {} bytes", memory::memory_reserved(Device::Cpu)?);

    // Autograd: fit y = 3x - 1 by gradient descent, PyTorch style.
    manual_seed(0);
    let xs = Tensor::randn([100, 1], DType::F32)?;
    let ys = xs.mul_scalar(3.0)?.sub_scalar(1.0)?;
    let w = Tensor::zeros([1, 1], DType::F32)?.requires_grad_(true)?;
    let b = Tensor::zeros([1], DType::F32)?.requires_grad_(true)?;
    for _ in 0..200 {
        let loss = xs.matmul(&w)?.add(&b)?.sub(&ys)?.square()?.mean()?;
        loss.backward()?;
        let _no_grad = autograd::no_grad(); // the update is not part of the graph
        for p in [&w, &b] {
            p.sub_(&p.grad().expect("backward set it").mul_scalar(0.1)?)?;
            p.set_grad(None)?;
        }
    }
    println!("fitted w = {:.3}, b = {:.3}", w.item::<f32>()?, b.item::<f32>()?);
    let x1 = Tensor::new([2.0f64])?.requires_grad_(true)?;
    let y1 = x1.pow_scalar(3.0)?;
    let dy = autograd::grad(&[&y1], &[&x1], None, None, true, false)?.remove(0).unwrap();
    let d2y = autograd::grad(&[&dy], &[&x1], None, None, false, false)?.remove(0).unwrap();
    println!("d/dx x^3 at 2 = {dy}, second derivative = {d2y}");

    // Errors, not panics, with PyTorch's messages.
    let err = x.matmul(&x).expect_err("shapes do not fit");
    println!("x @ x -> error: {err}");
    println!("tour finished");
    Ok(())
}
