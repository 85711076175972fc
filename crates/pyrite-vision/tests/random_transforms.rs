//! The random transforms of torchvision's augmentation list as torchvision defines them:
//! `RandomRotation`, `RandomAffine`, `ColorJitter` and `RandomErasing` draw their parameters
//! from the documented ranges, apply the functional op with them, refuse bad options, and
//! repeat themselves under a seeded generator (see also `transforms.rs`).

use pyrite::data::{DataLoader, DataLoaderOptions, Dataset, FnDataset, Sample};
use pyrite::vision::transforms::functional as F;
use pyrite::vision::transforms::*;
use pyrite::{DType, Generator, Tensor};
use std::sync::Arc;

fn values(t: &Tensor) -> Vec<f64> {
    t.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap()
}

/// `[3, 12, 16]` f32 in `[0, 1)`, the same for every test.
fn picture() -> Tensor {
    let n = 3 * 12 * 16;
    let v: Vec<f32> = (0..n).map(|i| ((i * 37 % 101) as f32) / 101.0).collect();
    Tensor::from_vec(v, [3, 12, 16]).unwrap()
}

/// The augmented samples of a loader over `n` copies of `img` (`workers` threads, `seed`).
fn augment(t: Arc<dyn Transform>, img: &Tensor, seed: u64, workers: usize) -> Vec<Vec<f64>> {
    let img = img.clone();
    let ds: Arc<dyn Dataset> = Arc::new(FnDataset::new(6, move |_| Ok(Sample::Tensor(t.apply(&img)?))));
    let opts = DataLoaderOptions {
        batch_size: None,
        num_workers: workers,
        generator: Some(Arc::new(Generator::new(seed))),
        ..Default::default()
    };
    DataLoader::new(ds, opts)
        .unwrap()
        .iter()
        .unwrap()
        .map(|s| values(&s.unwrap().into_tensor().unwrap()))
        .collect()
}

fn reproducible(t: Arc<dyn Transform>) {
    let img = picture();
    let a = augment(t.clone(), &img, 11, 0);
    assert_eq!(a, augment(t.clone(), &img, 11, 2), "the same seed with 0 or 2 workers");
    assert_ne!(a, augment(t.clone(), &img, 12, 0), "another seed");
    assert!(a.windows(2).any(|w| w[0] != w[1]), "samples differ from each other");
}

#[test]
fn random_rotation_draws_the_angle_from_degrees() {
    let t = RandomRotation::new(30.0).unwrap();
    assert_eq!(t.degrees, (-30.0, 30.0));
    let t2 = RandomRotation::new((10.0, 20.0)).unwrap();
    for _ in 0..50 {
        assert!((-30.0..30.0).contains(&t.get_params().unwrap()));
        assert!((10.0..20.0).contains(&t2.get_params().unwrap()));
    }
    // a one-point range rotates by exactly that angle, with the options passed on
    let img = picture();
    let opts = RandomRotationOptions {
        interpolation: InterpolationMode::Bilinear,
        expand: true,
        center: None,
        fill: Some(vec![0.1, 0.2, 0.3]),
    };
    let fixed = RandomRotation::with_options((37.0, 37.0), opts).unwrap();
    let want =
        F::rotate(&img, 37.0, InterpolationMode::Bilinear, true, None, Some(&[0.1, 0.2, 0.3])).unwrap();
    let got = fixed.apply(&img).unwrap();
    assert_eq!(got.dims(), want.dims());
    assert_eq!(values(&got), values(&want));
    // torchvision's defaults: nearest, no expansion, fill 0
    let d = RandomRotationOptions::default();
    assert_eq!(
        (d.interpolation, d.expand, d.center, d.fill),
        (InterpolationMode::Nearest, false, None, Some(vec![0.0]))
    );
    reproducible(Arc::new(t));
}

#[test]
fn random_rotation_refuses_bad_options() {
    assert!(RandomRotation::new(-5.0).is_err());
    assert!(RandomRotation::new((20.0, 10.0)).is_err());
    assert!(RandomRotation::new(f64::NAN).is_err());
    let bad_fill = RandomRotationOptions { fill: Some(vec![0.0, 1.0]), ..Default::default() };
    let err =
        RandomRotation::with_options(10.0, bad_fill).unwrap().apply(&picture()).unwrap_err().to_string();
    assert!(err.contains("fill"), "{err}");
    let bicubic = RandomRotationOptions { interpolation: InterpolationMode::Bicubic, ..Default::default() };
    let err = RandomRotation::with_options(10.0, bicubic).unwrap().apply(&picture()).unwrap_err().to_string();
    assert!(err.contains("'bicubic' is unsupported"), "{err}");
}

#[test]
fn random_affine_draws_each_parameter_from_its_range() {
    let opts = RandomAffineOptions {
        translate: Some((0.1, 0.25)),
        scale: Some((0.8, 1.2)),
        shear: Some(vec![-5.0, 5.0, 10.0, 20.0]),
        ..Default::default()
    };
    let t = RandomAffine::with_options(15.0, opts).unwrap();
    let (mut tx_seen, mut ty_seen) = (std::collections::BTreeSet::new(), std::collections::BTreeSet::new());
    for _ in 0..200 {
        let (angle, (tx, ty), scale, (sx, sy)) = t.get_params((40, 20)).unwrap();
        assert!((-15.0..15.0).contains(&angle));
        // shifts are whole pixels within 0.1 * 40 and 0.25 * 20
        assert!(tx.abs() <= 4 && ty.abs() <= 5, "{tx} {ty}");
        tx_seen.insert(tx);
        ty_seen.insert(ty);
        assert!((0.8..1.2).contains(&scale));
        assert!((-5.0..5.0).contains(&sx) && (10.0..20.0).contains(&sy));
    }
    assert!(tx_seen.len() >= 7 && ty_seen.len() >= 9, "{tx_seen:?} {ty_seen:?}");
    // one shear number s: x shear in (-s, s), no y shear; nothing set: identity parameters
    let one =
        RandomAffine::with_options(0.0, RandomAffineOptions { shear: Some(vec![8.0]), ..Default::default() });
    let (_, _, _, (sx, sy)) = one.unwrap().get_params((10, 10)).unwrap();
    assert!(sx.abs() < 8.0 && sy == 0.0);
    let plain = RandomAffine::new((0.0, 0.0)).unwrap();
    assert_eq!(plain.get_params((10, 10)).unwrap(), (0.0, (0, 0), 1.0, (0.0, 0.0)));
    assert_eq!(values(&plain.apply(&picture()).unwrap()), values(&picture()));
    reproducible(Arc::new(t));
}

#[test]
fn random_affine_applies_the_drawn_map() {
    let img = picture();
    let opts = RandomAffineOptions {
        scale: Some((1.25, 1.25)),
        shear: Some(vec![5.0, 5.0, -3.0, -3.0]),
        interpolation: InterpolationMode::Bilinear,
        fill: Some(vec![0.5]),
        center: Some((4.0, 3.0)),
        ..Default::default()
    };
    let t = RandomAffine::with_options((10.0, 10.0), opts).unwrap();
    let want = F::affine(
        &img,
        10.0,
        (0.0, 0.0),
        1.25,
        (5.0, -3.0),
        InterpolationMode::Bilinear,
        Some(&[0.5]),
        Some((4.0, 3.0)),
    );
    assert_eq!(values(&t.apply(&img).unwrap()), values(&want.unwrap()));
}

#[test]
fn random_affine_refuses_bad_options() {
    let with = |o: RandomAffineOptions| RandomAffine::with_options(10.0, o).err().map(|e| e.to_string());
    let err = with(RandomAffineOptions { translate: Some((1.5, 0.0)), ..Default::default() }).unwrap();
    assert!(err.contains("translation values should be between 0 and 1"), "{err}");
    let err = with(RandomAffineOptions { scale: Some((0.0, 1.0)), ..Default::default() }).unwrap();
    assert!(err.contains("scale values should be positive"), "{err}");
    let err = with(RandomAffineOptions { shear: Some(vec![1.0, 2.0, 3.0]), ..Default::default() }).unwrap();
    assert!(err.contains("1, 2 or 4 values"), "{err}");
    assert!(with(RandomAffineOptions { shear: Some(vec![-3.0]), ..Default::default() }).is_some());
    assert!(with(RandomAffineOptions { scale: Some((1.2, 0.8)), ..Default::default() }).is_some());
    assert!(RandomAffine::new(-1.0).is_err());
}

/// The outputs of all 24 orders of the four adjustments with fixed factors.
fn every_order(img: &Tensor, (b, c, s, h): (f64, f64, f64, f64)) -> Vec<Vec<f64>> {
    let mut outs = vec![];
    for code in 0..256usize {
        let order: Vec<usize> = (0..4).map(|k| (code >> (2 * k)) & 3).collect();
        if (0..4).any(|id| !order.contains(&id)) {
            continue; // not a permutation
        }
        let mut x = img.clone();
        for id in order {
            x = match id {
                0 => F::adjust_brightness(&x, b),
                1 => F::adjust_contrast(&x, c),
                2 => F::adjust_saturation(&x, s),
                _ => F::adjust_hue(&x, h),
            }
            .unwrap();
        }
        outs.push(values(&x));
    }
    assert_eq!(outs.len(), 24);
    outs
}

#[test]
fn color_jitter_ranges_follow_torchvision() {
    let t = ColorJitter::new(0.4, 0.5, 1.5, 0.1).unwrap();
    assert_eq!(t.brightness, Some((0.6, 1.4)));
    assert_eq!(t.contrast, Some((0.5, 1.5)));
    assert_eq!(t.saturation, Some((0.0, 2.5)), "a number's lower end is clipped at 0");
    assert_eq!(t.hue, Some((-0.1, 0.1)));
    // the neutral ranges are off: the transform is the identity and draws only the order
    let off = ColorJitter::new(0.0, (1.0, 1.0), 0.0, (0.0, 0.0)).unwrap();
    assert_eq!(off, ColorJitter::default());
    assert_eq!(values(&off.apply(&picture()).unwrap()), values(&picture()));
    for _ in 0..50 {
        let p = t.get_params().unwrap();
        let mut order = p.order;
        order.sort();
        assert_eq!(order, [0, 1, 2, 3]);
        assert!((0.6..1.4).contains(&p.brightness.unwrap()));
        assert!((0.5..1.5).contains(&p.contrast.unwrap()));
        assert!((0.0..2.5).contains(&p.saturation.unwrap()));
        assert!((-0.1..0.1).contains(&p.hue.unwrap()));
        let q = ColorJitter { brightness: None, ..t.clone() }.get_params().unwrap();
        assert_eq!(q.brightness, None);
    }
    let u8_img = Tensor::full([3, 4, 4], 100.0, DType::U8).unwrap();
    assert_eq!(t.apply(&u8_img).unwrap().dtype(), DType::U8);
    reproducible(Arc::new(t));
}

#[test]
fn color_jitter_applies_the_four_adjustments_in_a_random_order() {
    let img = picture();
    let factors = (0.7, 1.6, 0.3, 0.2);
    let t = ColorJitter::new((0.7, 0.7), (1.6, 1.6), (0.3, 0.3), (0.2, 0.2)).unwrap();
    let orders = every_order(&img, factors);
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..40 {
        let out = values(&t.apply(&img).unwrap());
        let k = orders.iter().position(|o| *o == out).expect("the output of one of the 24 orders");
        seen.insert(k);
    }
    assert!(seen.len() > 3, "several orders appear: {seen:?}");
    // a single adjustment is the functional op
    let hue = ColorJitter::new(0.0, 0.0, 0.0, (-0.3, -0.3)).unwrap();
    assert_eq!(values(&hue.apply(&img).unwrap()), values(&F::adjust_hue(&img, -0.3).unwrap()));
}

#[test]
fn color_jitter_refuses_bad_ranges() {
    let err = |r: pyrite::Result<ColorJitter>| r.unwrap_err().to_string();
    assert!(err(ColorJitter::new(0.0, 0.0, 0.0, 0.6)).contains("hue values should be between (-0.5, 0.5)"));
    assert!(err(ColorJitter::new(0.0, 0.0, 0.0, (-0.7, 0.2))).contains("hue"));
    assert!(err(ColorJitter::new(-0.1, 0.0, 0.0, 0.0)).contains("non negative"));
    assert!(err(ColorJitter::new(0.0, (1.5, 0.5), 0.0, 0.0)).contains("contrast values"));
    assert!(err(ColorJitter::new(0.0, 0.0, (-0.5, 1.0), 0.0)).contains("saturation values"));
    // ranges set by hand are checked when used
    let hand = ColorJitter { hue: Some((0.0, 0.9)), ..Default::default() };
    assert!(hand.apply(&picture()).is_err());
    // 2-channel images have no colour
    let t = ColorJitter::new(0.5, 0.0, 0.0, 0.0).unwrap();
    assert!(t.apply(&Tensor::rand([2, 4, 4], DType::F32).unwrap()).is_err());
}

/// The rectangle of `img` (`[C, H, W]`) where it differs from `base`: `(top, left, h, w)`.
fn changed_box(img: &[f64], base: &[f64], hh: usize, ww: usize) -> Option<(usize, usize, usize, usize)> {
    let (mut y0, mut x0, mut y1, mut x1) = (usize::MAX, usize::MAX, 0, 0);
    for (k, (a, b)) in img.iter().zip(base).enumerate() {
        if a != b {
            let (y, x) = ((k / ww) % hh, k % ww);
            (y0, x0, y1, x1) = (y0.min(y), x0.min(x), y1.max(y + 1), x1.max(x + 1));
        }
    }
    (y0 != usize::MAX).then(|| (y0, x0, y1 - y0, x1 - x0))
}

#[test]
fn random_erasing_blanks_a_rectangle_of_the_drawn_size() {
    let ones = Tensor::ones([3, 40, 50], DType::F32).unwrap();
    let base = values(&ones);
    let t = RandomErasing { p: 1.0, ..Default::default() };
    for _ in 0..30 {
        let (i, j, h, w, v) = t.get_params(&ones).unwrap();
        assert!(h < 40 && w < 50 && i + h <= 40 && j + w <= 50);
        // area from scale (0.02, 0.33) of 2000 pixels, up to the rounding of each side
        let area = (h * w) as f64;
        assert!(area >= 40.0 - (h + w) as f64 && area <= 660.0 + (h + w) as f64, "{h} x {w}");
        assert_eq!(v.dims(), &[1, 1, 1]);
        let out = values(&t.apply(&ones).unwrap());
        let (_, _, bh, bw) = changed_box(&out, &base, 40, 50).expect("something erased");
        // the erased box is filled with the value 0 in every channel
        assert_eq!(out.iter().filter(|&&x| x == 0.0).count(), 3 * bh * bw);
    }
    // per-channel values and noise
    let t = RandomErasing {
        p: 1.0,
        value: ErasingValue::PerChannel(vec![0.25, 0.5, 0.75]),
        ..Default::default()
    };
    let out = values(&t.apply(&ones).unwrap());
    for (c, v) in [0.25, 0.5, 0.75].iter().enumerate() {
        let plane = &out[c * 2000..(c + 1) * 2000];
        assert!(plane.iter().all(|x| x == v || *x == 1.0) && plane.contains(v));
    }
    let t = RandomErasing { p: 1.0, value: ErasingValue::Random, ..Default::default() };
    let (_, _, h, w, v) = t.get_params(&ones).unwrap();
    assert_eq!(v.dims(), &[3, h, w]);
    reproducible(Arc::new(RandomErasing { value: ErasingValue::Random, ..Default::default() }));
}

#[test]
fn random_erasing_p_inplace_and_the_ten_attempts() {
    let img = picture();
    let before = values(&img);
    let never = RandomErasing { p: 0.0, ..Default::default() };
    assert_eq!(values(&never.apply(&img).unwrap()), before);
    // inplace=False leaves the input alone, inplace=True overwrites it
    let t = RandomErasing { p: 1.0, value: ErasingValue::Value(-1.0), ..Default::default() };
    let out = t.apply(&img).unwrap();
    assert_eq!(values(&img), before);
    assert!(values(&out).contains(&-1.0));
    let copy = img.deep_clone().unwrap();
    let out = RandomErasing { inplace: true, ..t.clone() }.apply(&copy).unwrap();
    assert_eq!(values(&copy), values(&out));
    assert!(values(&copy).contains(&-1.0));
    // a rectangle that can never be smaller than the image: 10 attempts, then unchanged
    let full = RandomErasing { p: 1.0, scale: (0.99, 1.0), ratio: (1.0, 1.0), ..Default::default() };
    let square = Tensor::rand([1, 10, 10], DType::F32).unwrap();
    let (i, j, h, w, v) = full.get_params(&square).unwrap();
    assert_eq!((i, j, h, w), (0, 0, 10, 10));
    assert_eq!(values(&v), values(&square));
    assert_eq!(values(&full.apply(&square).unwrap()), values(&square));
    // u8 images
    let u = Tensor::full([3, 8, 8], 200.0, DType::U8).unwrap();
    for value in [ErasingValue::Value(0.0), ErasingValue::Random] {
        let out = RandomErasing { p: 1.0, value, ..Default::default() }.apply(&u).unwrap();
        assert_eq!(out.dtype(), DType::U8);
    }
}

#[test]
fn random_erasing_refuses_bad_options() {
    let img = picture();
    let err = |t: RandomErasing| t.apply(&img).unwrap_err().to_string();
    assert!(
        err(RandomErasing { p: 1.5, ..Default::default() }).contains("probability should be between 0 and 1")
    );
    assert!(err(RandomErasing { scale: (-0.1, 0.5), ..Default::default() })
        .contains("scale should be between 0 and 1"));
    assert!(err(RandomErasing { scale: (0.5, 0.2), ..Default::default() }).contains("(min, max)"));
    assert!(
        err(RandomErasing { ratio: (0.0, 1.0), ..Default::default() }).contains("ratio should be positive")
    );
    let two = RandomErasing { p: 1.0, value: ErasingValue::PerChannel(vec![0.0, 1.0]), ..Default::default() };
    assert!(err(two).contains("either a single value or 3"));
}
