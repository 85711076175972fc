//! Random sampling: determinism (runs, reseeds, thread counts), statistics with loose but
//! failing-if-wrong bounds, generator independence, and errors.

use pyrite_core::random::philox4x32_10;
use pyrite_core::{
    get_rng_state, initial_seed, manual_seed, set_num_threads, set_rng_state, DType, Generator, Tensor,
};
use std::sync::{Mutex, MutexGuard};

/// Tests that touch the global generator or the thread count run one at a time.
static GLOBAL: Mutex<()> = Mutex::new(());
fn global() -> MutexGuard<'static, ()> {
    GLOBAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn f64s(t: &Tensor) -> Vec<f64> {
    t.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap()
}

fn mean_var(v: &[f64]) -> (f64, f64) {
    let n = v.len() as f64;
    let m = v.iter().sum::<f64>() / n;
    let var = v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / n;
    (m, var)
}

/// Pearson chi-square statistic of observed counts against expected counts.
fn chi_square(observed: &[usize], expected: &[f64]) -> f64 {
    observed.iter().zip(expected).map(|(&o, &e)| (o as f64 - e).powi(2) / e).sum()
}

/// The error message of a call that must fail.
fn err_msg<T>(r: pyrite_core::Result<T>) -> String {
    match r {
        Err(e) => e.to_string(),
        Ok(_) => panic!("expected an error"),
    }
}

fn generator(seed: u64) -> Generator {
    Generator::new(seed)
}

// ------------------------------------------------------------------------------ the generator

#[test]
fn philox_matches_random123_known_answers() {
    assert_eq!(philox4x32_10([0; 4], [0; 2]), [0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8]);
    assert_eq!(philox4x32_10([u32::MAX; 4], [u32::MAX; 2]), [0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd]);
    assert_eq!(
        philox4x32_10([0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344], [0xa4093822, 0x299f31d0]),
        [0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1]
    );
}

#[test]
fn same_seed_same_numbers_across_reseeds() {
    let _g = global();
    for dt in [DType::F16, DType::BF16, DType::F32, DType::F64] {
        manual_seed(123);
        let a = f64s(&Tensor::rand([37, 5], dt).unwrap());
        let b = f64s(&Tensor::randn([11], dt).unwrap());
        manual_seed(123);
        assert_eq!(a, f64s(&Tensor::rand([37, 5], dt).unwrap()), "{dt}");
        assert_eq!(b, f64s(&Tensor::randn([11], dt).unwrap()), "{dt}");
    }
    assert_eq!(initial_seed(), 123);
}

#[test]
fn consecutive_draws_differ_and_different_seeds_differ() {
    let g = generator(5);
    let a = f64s(&Tensor::rand_with([64], DType::F32, Some(&g)).unwrap());
    let b = f64s(&Tensor::rand_with([64], DType::F32, Some(&g)).unwrap());
    assert_ne!(a, b);
    let c = f64s(&Tensor::rand_with([64], DType::F32, Some(&generator(6))).unwrap());
    assert_ne!(a, c);
}

#[test]
fn fixed_seed_gives_fixed_values() {
    // Pins the stream: a change to the generator or the samplers must be deliberate.
    let g = generator(0);
    let v = Tensor::randint_with(0, 1000, [6], DType::I64, Some(&g)).unwrap().to_vec::<i64>().unwrap();
    let g2 = generator(0);
    let w = Tensor::randint_with(0, 1000, [6], DType::I64, Some(&g2)).unwrap().to_vec::<i64>().unwrap();
    assert_eq!(v, w);
    // Element i of a fill is word i % 4 of Philox block i / 4 (32-bit draws): check element 0.
    let x = philox4x32_10([0; 4], [0; 2])[0];
    assert_eq!(v[0], ((x as u64 * 1000) >> 32) as i64);
}

#[test]
fn results_do_not_depend_on_thread_count() {
    let _g = global();
    let n = 300_001; // large enough to be split across threads, not a multiple of 4
    let draw = || {
        let g = generator(77);
        (
            Tensor::rand_with([n], DType::F32, Some(&g)).unwrap().to_vec::<f32>().unwrap(),
            Tensor::randn_with([n], DType::F64, Some(&g)).unwrap().to_vec::<f64>().unwrap(),
            Tensor::randint_with(-5, 1 << 40, [n], DType::I64, Some(&g)).unwrap().to_vec::<i64>().unwrap(),
            Tensor::randperm_with(n, Some(&g)).unwrap().to_vec::<i64>().unwrap(),
            Tensor::ones([2000, 300], DType::F32)
                .unwrap()
                .multinomial(5, false, Some(&g))
                .unwrap()
                .to_vec::<i64>()
                .unwrap(),
            g.get_offset(),
        )
    };
    let before = pyrite_core::get_num_threads();
    set_num_threads(1);
    let one = draw();
    set_num_threads(2);
    let two = draw();
    set_num_threads(5);
    let five = draw();
    set_num_threads(before);
    assert!(one == two, "1 vs 2 threads differ");
    assert!(one == five, "1 vs 5 threads differ");
}

#[test]
fn generators_with_same_seed_agree_and_leave_global_alone() {
    let _g = global();
    manual_seed(9);
    let global_first = f64s(&Tensor::rand([8], DType::F32).unwrap());
    manual_seed(9);
    let (g1, g2) = (generator(9), generator(9));
    let a = f64s(&Tensor::randn_with([100], DType::F32, Some(&g1)).unwrap());
    let b = f64s(&Tensor::randn_with([100], DType::F32, Some(&g2)).unwrap());
    assert_eq!(a, b);
    Tensor::zeros([50], DType::F32).unwrap().uniform_(0.0, 1.0, Some(&g1)).unwrap();
    // the explicit generators did not advance the global one
    assert_eq!(global_first, f64s(&Tensor::rand([8], DType::F32).unwrap()));
}

#[test]
fn clone_is_an_independent_copy() {
    let g = generator(4);
    Tensor::rand_with([10], DType::F32, Some(&g)).unwrap();
    let h = g.clone();
    let a = f64s(&Tensor::rand_with([10], DType::F64, Some(&g)).unwrap());
    let b = f64s(&Tensor::rand_with([10], DType::F64, Some(&h)).unwrap());
    assert_eq!(a, b);
    // drawing from g did not move h and vice versa
    assert_eq!(g.get_offset(), h.get_offset());
}

#[test]
fn state_round_trips_through_bytes_and_tensors() {
    let _g = global();
    let g = generator(11);
    Tensor::rand_with([3], DType::F32, Some(&g)).unwrap();
    let bytes = g.get_state_bytes();
    assert_eq!(bytes.len(), pyrite_core::random::STATE_LEN);
    let a = f64s(&Tensor::randn_with([20], DType::F32, Some(&g)).unwrap());
    let h = Generator::new(0);
    h.set_state_bytes(&bytes).unwrap();
    assert_eq!(h.initial_seed(), 11);
    assert_eq!(a, f64s(&Tensor::randn_with([20], DType::F32, Some(&h)).unwrap()));

    let saved = get_rng_state();
    assert_eq!(saved.dtype(), DType::U8);
    let x = f64s(&Tensor::rand([5], DType::F32).unwrap());
    set_rng_state(&saved).unwrap();
    assert_eq!(x, f64s(&Tensor::rand([5], DType::F32).unwrap()));

    // bad states are rejected and leave the generator unchanged
    let before = g.get_state_bytes();
    assert!(err_msg(g.set_state_bytes(&bytes[..10])).contains("24-byte"));
    let mut wrong = bytes.clone();
    wrong[0] = b'X';
    assert!(g.set_state_bytes(&wrong).is_err());
    assert!(g.set_state(&Tensor::zeros([24], DType::F32).unwrap()).is_err());
    assert_eq!(g.get_state_bytes(), before);
}

#[test]
fn manual_seed_rewinds_offset() {
    let g = generator(1);
    Tensor::rand_with([9], DType::F32, Some(&g)).unwrap();
    assert_eq!(g.get_offset(), 3); // 9 f32 uniforms = 3 blocks of 4
    g.manual_seed(1);
    assert_eq!(g.get_offset(), 0);
    let s = g.seed();
    assert_eq!(g.initial_seed(), s);
}

// ------------------------------------------------------------------------------- statistics

const N: usize = 1_000_000;

#[test]
fn rand_is_uniform_on_unit_interval() {
    let g = generator(100);
    for dt in [DType::F32, DType::F64] {
        let v = f64s(&Tensor::rand_with([N], dt, Some(&g)).unwrap());
        assert!(v.iter().all(|&x| (0.0..1.0).contains(&x)));
        let (m, var) = mean_var(&v);
        // sd of the mean is 0.29/1000; allow ~10 sd
        assert!((m - 0.5).abs() < 3e-3, "{dt} mean {m}");
        assert!((var - 1.0 / 12.0).abs() < 2e-3, "{dt} var {var}");
        // 10-bin chi-square, 9 dof: 99.99% quantile is ~33
        let mut counts = [0usize; 10];
        v.iter().for_each(|&x| counts[(x * 10.0) as usize] += 1);
        assert!(chi_square(&counts, &[N as f64 / 10.0; 10]) < 40.0, "{dt} {counts:?}");
    }
    for dt in [DType::F16, DType::BF16] {
        let v = f64s(&Tensor::rand_with([100_000], dt, Some(&g)).unwrap());
        assert!(v.iter().all(|&x| (0.0..1.0).contains(&x)), "{dt} hits 1.0");
        let (m, _) = mean_var(&v);
        assert!((m - 0.5).abs() < 0.01, "{dt} mean {m}");
    }
}

#[test]
fn f64_uniforms_use_53_bits() {
    let v = f64s(&Tensor::rand_with([1000], DType::F64, Some(&generator(3))).unwrap());
    // f32-precision values would all be multiples of 2^-24
    assert!(v.iter().any(|&x| (x * (1u64 << 24) as f64).fract() != 0.0));
}

#[test]
fn randn_has_zero_mean_unit_variance() {
    let g = generator(200);
    for dt in [DType::F32, DType::F64] {
        let v = f64s(&Tensor::randn_with([N], dt, Some(&g)).unwrap());
        let (m, var) = mean_var(&v);
        assert!(m.abs() < 5e-3, "{dt} mean {m}");
        assert!((var - 1.0).abs() < 1e-2, "{dt} var {var}");
        let within1 = v.iter().filter(|x| x.abs() < 1.0).count() as f64 / N as f64;
        assert!((within1 - 0.682_689).abs() < 3e-3, "{dt} P(|z|<1) = {within1}");
        let kurt = v.iter().map(|x| x.powi(4)).sum::<f64>() / N as f64;
        assert!((kurt - 3.0).abs() < 0.05, "{dt} 4th moment {kurt}");
    }
    let v = f64s(&Tensor::randn_with([100_000], DType::BF16, Some(&g)).unwrap());
    let (m, var) = mean_var(&v);
    assert!(m.abs() < 0.02 && (var - 1.0).abs() < 0.03, "bf16 {m} {var}");
}

#[test]
fn normal_and_normal_inplace_shift_and_scale() {
    let g = generator(300);
    let v = f64s(&Tensor::normal_with(3.0, 2.0, [N], DType::F32, Some(&g)).unwrap());
    let (m, var) = mean_var(&v);
    assert!((m - 3.0).abs() < 0.01 && (var - 4.0).abs() < 0.04, "{m} {var}");
    let t = Tensor::zeros([N], DType::F64).unwrap();
    t.normal_(-1.0, 0.5, Some(&g)).unwrap();
    let (m, var) = mean_var(&f64s(&t));
    assert!((m + 1.0).abs() < 3e-3 && (var - 0.25).abs() < 3e-3, "{m} {var}");
    // std = 0 gives the mean exactly
    let z = Tensor::normal_with(1.5, 0.0, [10], DType::F32, Some(&g)).unwrap();
    assert_eq!(f64s(&z), vec![1.5; 10]);
}

#[test]
fn normal_tensors_broadcasts_mean_and_std() {
    let g = generator(301);
    let mean = Tensor::new([[0f32], [10.0]]).unwrap();
    let std = Tensor::full([1, 50_000], 2.0, DType::F32).unwrap();
    let t = Tensor::normal_tensors(&mean, &std, Some(&g)).unwrap();
    assert_eq!(t.dims(), &[2, 50_000]);
    let rows = t.to_vec2::<f32>().unwrap();
    for (r, want) in rows.iter().zip([0.0, 10.0]) {
        let (m, var) = mean_var(&r.iter().map(|&x| x as f64).collect::<Vec<_>>());
        assert!((m - want).abs() < 0.05 && (var - 4.0).abs() < 0.15, "{m} {var}");
    }
    let bad = Tensor::new([1f32, -1.0]).unwrap();
    assert!(Tensor::normal_tensors(&mean, &bad, Some(&g)).is_err());
    let ints = Tensor::new([1i64]).unwrap();
    assert!(Tensor::normal_tensors(&ints, &ints, Some(&g)).is_err());
}

#[test]
fn uniform_inplace_respects_bounds() {
    let g = generator(400);
    let t = Tensor::zeros([N], DType::F32).unwrap();
    t.uniform_(-3.0, 5.0, Some(&g)).unwrap();
    let v = f64s(&t);
    assert!(v.iter().all(|&x| (-3.0..=5.0).contains(&x)));
    let (m, var) = mean_var(&v);
    assert!((m - 1.0).abs() < 0.03 && (var - 64.0 / 12.0).abs() < 0.05, "{m} {var}");
    // from == to fills a constant
    t.uniform_(2.0, 2.0, Some(&g)).unwrap();
    assert!(f64s(&t).iter().all(|&x| x == 2.0));
}

#[test]
fn inplace_fills_write_through_non_contiguous_views() {
    let g = generator(401);
    let base = Tensor::zeros([4, 6], DType::F32).unwrap();
    let view = base.t().unwrap().narrow(0, 1, 3).unwrap(); // columns 1..4, transposed
    assert!(!view.is_contiguous());
    view.uniform_(10.0, 11.0, Some(&g)).unwrap();
    let rows = base.to_vec2::<f32>().unwrap();
    for row in rows {
        for (j, x) in row.into_iter().enumerate() {
            if (1..4).contains(&j) {
                assert!((10.0..11.0).contains(&x));
            } else {
                assert_eq!(x, 0.0);
            }
        }
    }
    // a contiguous narrow writes in place too and bumps the version
    let v0 = base.version();
    base.narrow(0, 0, 1).unwrap().normal_(0.0, 1.0, Some(&g)).unwrap();
    assert!(base.version() > v0);
}

#[test]
fn randint_range_and_uniformity() {
    let g = generator(500);
    let v = Tensor::randint_with(-3, 7, [N], DType::I64, Some(&g)).unwrap().to_vec::<i64>().unwrap();
    let mut counts = [0usize; 10];
    for &x in &v {
        assert!((-3..7).contains(&x));
        counts[(x + 3) as usize] += 1;
    }
    assert!(chi_square(&counts, &[N as f64 / 10.0; 10]) < 40.0, "{counts:?}");
    // wide ranges (64-bit draws) stay in range and cover both halves
    let w = Tensor::randint_with(i64::MIN, i64::MAX, [10_000], DType::I64, Some(&g))
        .unwrap()
        .to_vec::<i64>()
        .unwrap();
    let neg = w.iter().filter(|&&x| x < 0).count();
    assert!((4500..5500).contains(&neg), "{neg}");
    assert!(w.iter().all(|&x| x < i64::MAX));
    // other dtypes
    for dt in [DType::U8, DType::I32, DType::F16, DType::BF16, DType::F32, DType::F64] {
        let t = Tensor::randint_with(0, 200, [1000], dt, Some(&g)).unwrap();
        assert_eq!(t.dtype(), dt);
        let v = f64s(&t);
        assert!(v.iter().all(|&x| (0.0..200.0).contains(&x) && x.fract() == 0.0), "{dt}");
    }
    let b = Tensor::randint_with(0, 2, [1000], DType::Bool, Some(&g)).unwrap();
    let ones = f64s(&b).iter().filter(|&&x| x == 1.0).count();
    assert!((400..600).contains(&ones));
}

#[test]
fn random_inplace_defaults_to_dtype_range() {
    let g = generator(501);
    let t = Tensor::zeros([10_000], DType::U8).unwrap();
    t.random_(0, None, Some(&g)).unwrap();
    let v = t.to_vec::<u8>().unwrap();
    assert!(v.contains(&255) && v.contains(&0));
    let f = Tensor::zeros([10_000], DType::F16).unwrap();
    f.random_(0, None, Some(&g)).unwrap();
    assert!(f64s(&f).iter().all(|&x| (0.0..=2048.0).contains(&x) && x.fract() == 0.0));
    let i = Tensor::zeros([1000], DType::I64).unwrap();
    i.random_(i64::MIN, None, Some(&g)).unwrap(); // the full 2^64 range
    assert!(i.to_vec::<i64>().unwrap().iter().any(|&x| x < 0));
    let r = Tensor::zeros([1000], DType::I32).unwrap();
    r.random_(5, Some(8), Some(&g)).unwrap();
    assert!(r.to_vec::<i32>().unwrap().iter().all(|&x| (5..8).contains(&x)));
}

#[test]
fn bernoulli_rates() {
    let g = generator(600);
    for p in [0.0, 0.1, 0.5, 0.9, 1.0] {
        let t = Tensor::zeros([N], DType::F32).unwrap();
        t.bernoulli_(p, Some(&g)).unwrap();
        let v = f64s(&t);
        assert!(v.iter().all(|&x| x == 0.0 || x == 1.0));
        let rate = v.iter().sum::<f64>() / N as f64;
        assert!((rate - p).abs() < 3e-3, "p={p}: rate {rate}");
    }
    let b = Tensor::zeros([N], DType::Bool).unwrap();
    b.bernoulli_(0.25, Some(&g)).unwrap();
    let rate = b.to_vec::<bool>().unwrap().iter().filter(|&&x| x).count() as f64 / N as f64;
    assert!((rate - 0.25).abs() < 3e-3);

    // tensor of probabilities: each element its own rate
    let probs = Tensor::new([0.0f64, 0.2, 0.7, 1.0]).unwrap().expand([250_000, 4]).unwrap();
    let s = probs.bernoulli(Some(&g)).unwrap();
    assert_eq!((s.dims(), s.dtype()), (&[250_000usize, 4][..], DType::F64));
    let cols = s.t().unwrap().contiguous().unwrap().to_vec2::<f64>().unwrap();
    for (c, p) in cols.iter().zip([0.0, 0.2, 0.7, 1.0]) {
        let rate = c.iter().sum::<f64>() / c.len() as f64;
        assert!((rate - p).abs() < 5e-3, "p={p}: {rate}");
    }
}

fn frequencies(samples: &[i64], k: usize) -> Vec<usize> {
    let mut c = vec![0usize; k];
    samples.iter().for_each(|&s| c[s as usize] += 1);
    c
}

#[test]
fn multinomial_with_replacement_matches_probabilities() {
    let g = generator(700);
    let w = [1.0f32, 0.0, 2.0, 3.0, 0.0, 4.0]; // unnormalised, zero weights included
    let t = Tensor::new(w).unwrap();
    let s = t.multinomial(N, true, Some(&g)).unwrap();
    assert_eq!((s.dims(), s.dtype()), (&[N][..], DType::I64));
    let counts = frequencies(&s.to_vec::<i64>().unwrap(), 6);
    assert_eq!((counts[1], counts[4]), (0, 0), "zero-weight category drawn");
    let expected: Vec<f64> = [1.0, 2.0, 3.0, 4.0].iter().map(|x| x / 10.0 * N as f64).collect();
    let obs = [counts[0], counts[2], counts[3], counts[5]];
    assert!(chi_square(&obs, &expected) < 30.0, "{counts:?}");

    // 2-d: each row its own distribution
    let rows = Tensor::new([[0.0f64, 1.0, 0.0], [0.5, 0.0, 0.5]]).unwrap();
    let s = rows.multinomial(1000, true, Some(&g)).unwrap().to_vec2::<i64>().unwrap();
    assert!(s[0].iter().all(|&x| x == 1));
    assert!(s[1].iter().all(|&x| x == 0 || x == 2));
    let zeros = s[1].iter().filter(|&&x| x == 0).count();
    assert!((400..600).contains(&zeros));
}

#[test]
fn multinomial_without_replacement_never_repeats() {
    let g = generator(800);
    let w = Tensor::rand_with([500, 20], DType::F32, Some(&g)).unwrap();
    let s = w.multinomial(20, false, Some(&g)).unwrap().to_vec2::<i64>().unwrap();
    for row in s {
        let mut r = row.clone();
        r.sort();
        assert_eq!(r, (0..20).collect::<Vec<_>>());
    }
    // zero weights are never drawn while positive ones remain
    let z = Tensor::new([[0.0f32, 5.0, 0.0, 1.0, 2.0, 0.0]]).unwrap().expand([2000, 6]).unwrap();
    let s = z.multinomial(3, false, Some(&g)).unwrap().to_vec2::<i64>().unwrap();
    for row in &s {
        let mut r = row.clone();
        r.sort();
        assert_eq!(r, vec![1, 3, 4]);
    }
}

/// PyTorch's documentation: without replacement, `num_samples` must not exceed the number of
/// non-zero elements of the input (of each row, for a matrix). Its CPU kernel does not check
/// and fills in zero-weight categories (`torch.multinomial(torch.tensor([1., 0., 0.]), 3)` gives
/// `[0, 1, 2]`). We follow the documentation: a category of probability zero is never drawn,
/// so masking by zero weights (top-k sampling, excluded classes) stays a mask.
#[test]
fn multinomial_without_replacement_refuses_more_samples_than_non_zero_weights() {
    let g = generator(9);
    for dtype in [DType::F32, DType::F64, DType::F16, DType::BF16] {
        // 1-D: two positive weights, three samples asked
        let v = Tensor::new([0f32, 1., 0., 3.]).unwrap().to_dtype(dtype).unwrap();
        let e = err_msg(v.multinomial(3, false, Some(&g)));
        assert!(e.contains("row 0 has 2 non-zero probabilities but num_samples=3"), "{dtype}: {e}");
        assert!(e.contains("with replacement=False"), "{e}");
        // exactly as many as there are positive weights is fine, and draws only those
        let mut s = v.multinomial(2, false, Some(&g)).unwrap().to_vec::<i64>().unwrap();
        s.sort();
        assert_eq!(s, vec![1, 3], "{dtype}");
        // 2-D: the error names the first row that falls short
        let m = Tensor::new([[1f32, 2., 3.], [0., 5., 0.], [0., 0., 1.]]).unwrap().to_dtype(dtype).unwrap();
        let e = err_msg(m.multinomial(2, false, Some(&g)));
        assert!(e.contains("row 1 has 1 non-zero probabilities but num_samples=2"), "{dtype}: {e}");
        // with replacement, zero-weight categories are still never drawn
        let s = m.multinomial(50, true, Some(&g)).unwrap().to_vec2::<i64>().unwrap();
        assert!(s[1].iter().all(|&x| x == 1) && s[2].iter().all(|&x| x == 2), "{dtype}");
    }
    // a failed call does not advance the generator
    let before = g.get_offset();
    assert!(Tensor::new([1.0f32, 0.0, 0.0]).unwrap().multinomial(3, false, Some(&g)).is_err());
    assert_eq!(g.get_offset(), before);
}

#[test]
fn multinomial_without_replacement_first_draw_is_proportional() {
    // The first sample without replacement is a draw from the weights; the second from the
    // remaining weights: P(first = i) = w_i, P(second = j | first = i) = w_j / (1 - w_i).
    let g = generator(801);
    let w = [0.1f64, 0.2, 0.3, 0.4];
    let t = Tensor::new(w).unwrap().expand([200_000, 4]).unwrap();
    let s = t.multinomial(2, false, Some(&g)).unwrap().to_vec2::<i64>().unwrap();
    let first: Vec<i64> = s.iter().map(|r| r[0]).collect();
    let counts = frequencies(&first, 4);
    let expected: Vec<f64> = w.iter().map(|p| p * 200_000.0).collect();
    assert!(chi_square(&counts, &expected) < 25.0, "{counts:?}");
    let second: Vec<i64> = s.iter().map(|r| r[1]).collect();
    let counts2 = frequencies(&second, 4);
    let expected2: Vec<f64> = (0..4)
        .map(|j| (0..4).filter(|&i| i != j).map(|i| w[i] * w[j] / (1.0 - w[i])).sum::<f64>() * 200_000.0)
        .collect();
    assert!(chi_square(&counts2, &expected2) < 25.0, "{counts2:?} vs {expected2:?}");
}

#[test]
fn multinomial_half_precision_and_empty_rows() {
    let g = generator(802);
    let t = Tensor::new([1.0f32, 3.0]).unwrap().to_dtype(DType::BF16).unwrap();
    let s = t.multinomial(4, true, Some(&g)).unwrap();
    assert!(s.to_vec::<i64>().unwrap().iter().all(|&x| x == 0 || x == 1));
    let e = Tensor::ones([0, 3], DType::F32).unwrap().multinomial(2, false, Some(&g)).unwrap();
    assert_eq!(e.dims(), &[0, 2]);
}

#[test]
fn randperm_is_a_permutation() {
    let g = generator(900);
    for n in [0usize, 1, 2, 7, 1000, 100_003] {
        let p = Tensor::randperm_with(n, Some(&g)).unwrap();
        assert_eq!((p.dims(), p.dtype()), (&[n][..], DType::I64));
        let mut v = p.to_vec::<i64>().unwrap();
        v.sort();
        assert_eq!(v, (0..n as i64).collect::<Vec<_>>());
    }
    // every position is uniform: element 0 of randperm(4) over many draws
    let mut counts = [0usize; 4];
    for _ in 0..20_000 {
        counts[Tensor::randperm_with(4, Some(&g)).unwrap().to_vec::<i64>().unwrap()[0] as usize] += 1;
    }
    assert!(chi_square(&counts, &[5000.0; 4]) < 25.0, "{counts:?}");
}

#[test]
fn like_forms_copy_shape_and_dtype() {
    let _g = global();
    let x = Tensor::zeros([3, 4], DType::F64).unwrap();
    for t in [x.rand_like().unwrap(), x.randn_like().unwrap(), x.randint_like(0, 5).unwrap()] {
        assert_eq!((t.dims(), t.dtype()), (&[3usize, 4][..], DType::F64));
    }
    let e = Tensor::rand([0, 5], DType::F32).unwrap();
    assert_eq!(e.dims(), &[0, 5]);
    let s = Tensor::randn((), DType::F32).unwrap();
    assert_eq!(s.rank(), 0);
}

// ------------------------------------------------------------------------------------ errors

#[test]
fn errors_read_like_pytorch() {
    let g = generator(1);
    let g = Some(&g);
    let msg = err_msg::<Tensor>;
    assert!(msg(Tensor::rand_with([2], DType::I64, g)).contains("not implemented for 'Long'"));
    assert!(msg(Tensor::randn_with([2], DType::Bool, g)).contains("normal_kernel_cpu"));
    assert!(msg(Tensor::randint_with(5, 5, [2], DType::I64, g))
        .contains("random_ expects 'from' to be less than 'to', but got from=5 >= to=5"));
    assert!(msg(Tensor::randint_with(0, 300, [2], DType::U8, g))
        .contains("to - 1 is out of bounds for unsigned char"));
    assert!(msg(Tensor::randint_with(-1, 3, [2], DType::U8, g)).contains("from is out of bounds"));
    assert!(msg(Tensor::randint_with(0, 3, [2], DType::Bool, g)).contains("out of bounds for bool"));
    assert!(msg(Tensor::normal_with(0.0, -1.0, [2], DType::F32, g)).contains("normal expects std >= 0.0"));
    assert!(msg(Tensor::normal_with(0.0, f64::NAN, [2], DType::F32, g)).contains("std >= 0.0"));

    let t = Tensor::zeros([3], DType::F32).unwrap();
    let e = err_msg(t.uniform_(2.0, 1.0, g));
    assert!(e.contains("expects to return a [from, to) range, but found from=2 > to=1"), "{e}");
    assert!(t.uniform_(1.0, f64::INFINITY, g).is_err());
    assert!(t.uniform_(f64::NAN, 1.0, g).is_err());
    assert!(Tensor::zeros([3], DType::F16).unwrap().uniform_(-1e6, 1e6, g).is_err());
    assert!(Tensor::zeros([3], DType::I64).unwrap().uniform_(0.0, 1.0, g).is_err());
    assert!(Tensor::zeros([3], DType::I64).unwrap().normal_(0.0, 1.0, g).is_err());
    let e = err_msg(t.bernoulli_(1.5, g));
    assert!(e.contains("bernoulli_ expects p to be in [0, 1], but got p=1.5"), "{e}");
    assert!(t.bernoulli_(f64::NAN, g).is_err());
    assert!(Tensor::zeros([3], DType::I32).unwrap().random_(0, Some(1 << 40), g).is_err());

    assert!(Tensor::new([0.5f32, 1.5]).unwrap().bernoulli(g).is_err());
    assert!(Tensor::new([f32::NAN]).unwrap().bernoulli(g).is_err());
    assert!(Tensor::new([1i64, 0]).unwrap().bernoulli(g).is_err());
}

#[test]
fn multinomial_errors() {
    let g = generator(1);
    let g = Some(&g);
    let msg = |t: Tensor, n: usize, r: bool| err_msg(t.multinomial(n, r, g));
    let p = |v: &[f32]| Tensor::from_slice(v, v.len()).unwrap();
    assert!(msg(Tensor::new([1i64, 2]).unwrap(), 1, true)
        .contains("multinomial only supports floating-point dtypes for input, got: Long"));
    assert!(msg(p(&[1.0, 2.0]), 3, false)
        .contains("cannot sample n_sample > prob_dist.size(-1) samples without replacement"));
    assert!(msg(p(&[1.0, 2.0]), 0, true).contains("cannot sample n_sample <= 0 samples"));
    for r in [true, false] {
        assert!(msg(p(&[0.0, 0.0]), 1, r)
            .contains("invalid multinomial distribution (sum of probabilities <= 0)"));
    }
    for bad in [-1.0, f32::INFINITY, f32::NAN] {
        assert!(msg(p(&[bad, 2.0]), 1, true)
            .contains("probability tensor contains either `inf`, `nan` or element < 0"));
    }
    assert!(
        msg(Tensor::ones([2, 2, 2], DType::F32).unwrap(), 1, true).contains("prob_dist must be 1 or 2 dim")
    );
    assert!(msg(Tensor::scalar(1f32).unwrap(), 1, true).contains("prob_dist must be 1 or 2 dim"));
    assert!(msg(Tensor::ones([2, 0], DType::F32).unwrap(), 1, false).contains("without replacement"));
    assert!(msg(Tensor::ones([2, 0], DType::F32).unwrap(), 1, true).contains("sum of probabilities"));
    // huge weights do not overflow the sum
    let huge = Tensor::new([f64::MAX, f64::MAX, 0.0]).unwrap();
    let s = huge.multinomial(1000, true, g).unwrap().to_vec::<i64>().unwrap();
    assert!(s.iter().all(|&x| x == 0 || x == 1) && s.contains(&0) && s.contains(&1));
    // a bad second row is reported too
    assert!(msg(Tensor::new([[1f32, 1.0], [0.0, 0.0]]).unwrap(), 1, true).contains("row 1"));
}

#[test]
fn failed_ops_do_not_advance_the_generator() {
    let g = generator(2);
    assert!(Tensor::randint_with(3, 1, [10], DType::I64, Some(&g)).is_err());
    assert!(Tensor::new([0f32, 0.0]).unwrap().multinomial(1, true, Some(&g)).is_err());
    assert_eq!(g.get_offset(), 0);
}
