//! bf16 products on the AVX512-BF16 kernel give the values of the conversion path that CPUs
//! without it take (f32 products of the converted operands, rounded once), for matmul's
//! shapes and for convolutions forward and backward. Small integers keep every sum exact, so
//! the two paths must agree bit for bit; random values agree to the last bf16 place.
//!
//! One test at a time switches the kernel off and on again (a process-wide switch), so this
//! file holds a single test function.

use pyrite_core::backends::cpu::{bf16_kernel_available, set_bf16_kernel_enabled};
use pyrite_core::ops::conv::conv;
use pyrite_core::{DType, Result, Tensor};

/// Integers in -4..=4, exact in bf16.
fn ints(shape: &[usize], seed: u64) -> Result<Tensor> {
    pyrite_core::manual_seed(seed);
    Tensor::randint(-4, 5, shape, DType::F32)?.to_dtype(DType::BF16)
}

fn randn(shape: &[usize], seed: u64) -> Result<Tensor> {
    pyrite_core::manual_seed(seed);
    Tensor::randn(shape, DType::F32)?.to_dtype(DType::BF16)
}

/// The bf16 values of every product and gradient below, in order.
fn products(make: fn(&[usize], u64) -> Result<Tensor>) -> Result<Vec<Vec<f32>>> {
    let mut out = Vec::new();
    let mut push = |t: Tensor| -> Result<()> {
        assert_eq!(t.dtype(), DType::BF16);
        out.push(t.to_dtype(DType::F32)?.to_vec::<f32>()?);
        Ok(())
    };
    // Square, odd sizes, a transposed operand, batches and broadcasting.
    push(make(&[64, 96], 1)?.matmul(&make(&[96, 80], 2)?)?)?;
    push(make(&[7, 13], 3)?.matmul(&make(&[13, 5], 4)?)?)?;
    push(make(&[33, 70], 5)?.t()?.matmul(&make(&[33, 19], 6)?)?)?;
    push(make(&[3, 20, 17], 7)?.matmul(&make(&[17, 30], 8)?)?)?;
    push(make(&[4, 9, 31], 9)?.bmm(&make(&[4, 30, 31], 10)?.transpose(1, 2)?)?)?;
    push(make(&[130], 13)?.addmm(&make(&[5, 11], 11)?, &make(&[11, 130], 12)?, 1.0, 1.0)?)?;
    push(make(&[2, 6, 6], 16)?.baddbmm(&make(&[2, 6, 8], 14)?, &make(&[2, 8, 6], 15)?, 0.5, 2.0)?)?;
    push(make(&[9, 24], 17)?.linear(&make(&[40, 24], 18)?, Some(&make(&[40], 19)?))?)?;
    // A convolution and its three gradients (3x3, padding 1, a batch of 3, 2 groups).
    let x = make(&[3, 4, 9, 7], 20)?.requires_grad_(true)?;
    let w = make(&[6, 2, 3, 3], 21)?.requires_grad_(true)?;
    let b = make(&[6], 22)?.requires_grad_(true)?;
    let y = conv(&x, &w, Some(&b), &[1], &[1], &[1], 2)?;
    y.backward_with(&make(&[3, 6, 9, 7], 23)?)?;
    push(y.detach())?;
    for p in [&x, &w, &b] {
        push(p.grad().expect("a gradient"))?;
    }
    Ok(out)
}

#[test]
fn bf16_products_match_the_conversion_path() -> Result<()> {
    if !bf16_kernel_available() {
        eprintln!("no AVX512-BF16 on this CPU: every bf16 product takes the conversion path");
        return Ok(());
    }
    let exact_on = products(ints)?;
    let random_on = products(randn)?;
    set_bf16_kernel_enabled(false);
    assert!(!bf16_kernel_available(), "the switch turns the kernel off");
    let exact_off = products(ints);
    let random_off = products(randn);
    set_bf16_kernel_enabled(true);
    assert!(bf16_kernel_available());
    let (exact_off, random_off) = (exact_off?, random_off?);
    for (i, (a, b)) in exact_on.iter().zip(&exact_off).enumerate() {
        assert_eq!(a, b, "product {i} on small integers");
    }
    for (i, (a, b)) in random_on.iter().zip(&random_off).enumerate() {
        assert_eq!(a.len(), b.len());
        for (j, (&x, &y)) in a.iter().zip(b).enumerate() {
            // One bf16 place: 2^-7 relative (plus a little for sums that cancel).
            let tol = (x.abs().max(y.abs()) * 2f32.powi(-7)).max(0.05);
            assert!((x - y).abs() <= tol, "product {i}, element {j}: {x} (kernel) vs {y} (conversion)");
        }
    }
    Ok(())
}
