//! `pyrite::vision::utils`: `make_grid` against torchvision's layout formula, and `save_image`
//! read back from its PNG.

use pyrite::vision::utils::{make_grid, save_image, MakeGridOptions};
use pyrite::vision::Image;
use pyrite::{DType, Tensor};

/// `[n, c, h, w]` f32 with value `k * 100 + ch * 10 + y * w + x` at `[k, ch, y, x]`.
fn batch(n: usize, c: usize, h: usize, w: usize) -> Tensor {
    let v: Vec<f32> = (0..n * c * h * w)
        .map(|i| {
            let (k, ch, p) = (i / (c * h * w), i / (h * w) % c, i % (h * w));
            (k * 100 + ch * 10 + p) as f32
        })
        .collect();
    Tensor::from_vec(v, [n, c, h, w]).unwrap()
}

/// torchvision's grid, written out: `xmaps = min(nrow, n)`, `ymaps = ceil(n / xmaps)`, image
/// `k` at row `k / xmaps` and column `k % xmaps` of cells `(h + padding) x (w + padding)`, each
/// image placed `padding` pixels into its cell, everything else `pad_value`; one channel is
/// repeated to three.
fn want_grid(imgs: &Tensor, nrow: usize, padding: usize, pad_value: f32) -> (Vec<usize>, Vec<f32>) {
    let d = imgs.dims();
    let (n, c, h, w) = (d[0], d[1], d[2], d[3]);
    let v = imgs.to_vec::<f32>().unwrap();
    let xmaps = nrow.min(n);
    let ymaps = n.div_ceil(xmaps);
    let (gh, gw) = ((h + padding) * ymaps + padding, (w + padding) * xmaps + padding);
    let oc = if c == 1 { 3 } else { c };
    let mut out = vec![pad_value; oc * gh * gw];
    for k in 0..n {
        let (top, left) = ((k / xmaps) * (h + padding) + padding, (k % xmaps) * (w + padding) + padding);
        for ch in 0..oc {
            let sc = if c == 1 { 0 } else { ch };
            for y in 0..h {
                for x in 0..w {
                    out[(ch * gh + top + y) * gw + left + x] = v[((k * c + sc) * h + y) * w + x];
                }
            }
        }
    }
    (vec![oc, gh, gw], out)
}

#[test]
fn make_grid_lays_out_the_batch_as_torchvision() {
    for (n, c, nrow, padding, pad_value) in
        [(5, 1, 2, 1, 0.5f32), (5, 3, 8, 2, 0.0), (4, 3, 3, 0, 7.0), (7, 1, 3, 3, -1.0), (2, 3, 1, 2, 0.25)]
    {
        let imgs = batch(n, c, 3, 4);
        let opts = MakeGridOptions { nrow, padding, pad_value: pad_value as f64, ..Default::default() };
        let grid = make_grid(&imgs, opts).unwrap();
        let (shape, want) = want_grid(&imgs, nrow, padding, pad_value);
        assert_eq!(grid.dims(), &shape[..], "n={n} c={c} nrow={nrow} padding={padding}");
        assert_eq!(grid.to_vec::<f32>().unwrap(), want, "n={n} c={c} nrow={nrow} padding={padding}");
    }
    // the defaults: nrow 8, padding 2, pad_value 0
    assert_eq!(
        MakeGridOptions::default(),
        MakeGridOptions {
            nrow: 8,
            padding: 2,
            normalize: false,
            value_range: None,
            scale_each: false,
            pad_value: 0.0
        }
    );
    let grid = make_grid(&batch(10, 3, 5, 5), MakeGridOptions::default()).unwrap();
    assert_eq!(grid.dims(), &[3, 2 * 7 + 2, 8 * 7 + 2]);
    // a u8 batch keeps its dtype
    let u = make_grid(&batch(3, 3, 2, 2).to_dtype(DType::U8).unwrap(), MakeGridOptions::default()).unwrap();
    assert_eq!((u.dtype(), u.dims()), (DType::U8, &[3usize, 6, 14][..]));
}

#[test]
fn make_grid_of_one_image_is_that_image_without_padding() {
    let one = batch(1, 1, 3, 4);
    let want: Vec<f32> = one.to_vec::<f32>().unwrap().repeat(3);
    for t in [one.clone(), one.squeeze_dim(0).unwrap(), one.reshape([3, 4]).unwrap()] {
        let g = make_grid(&t, MakeGridOptions::default()).unwrap();
        assert_eq!(g.dims(), &[3, 3, 4]);
        assert_eq!(g.to_vec::<f32>().unwrap(), want);
    }
    let rgb = batch(1, 3, 2, 2).squeeze_dim(0).unwrap();
    assert_eq!(make_grid(&rgb, MakeGridOptions::default()).unwrap().dims(), &[3, 2, 2]);
    assert!(make_grid(&Tensor::zeros([2], DType::F32).unwrap(), MakeGridOptions::default()).is_err());
    assert!(make_grid(&batch(2, 3, 2, 2), MakeGridOptions { nrow: 0, ..Default::default() }).is_err());
}

#[test]
fn make_grid_normalizes_by_value_range_or_min_max() {
    let x = Tensor::from_vec(vec![-2.0f32, -1.0, 0.0, 0.5, 1.0, 3.0, 2.0, 4.0], [2, 1, 2, 2]).unwrap();
    let cell = |g: &Tensor, k: usize| -> Vec<f32> {
        // channel 0 of image k, padding 0, nrow 8: columns 2k..2k + 2
        let v = g.to_vec::<f32>().unwrap();
        let w = g.dims()[2];
        vec![v[2 * k], v[2 * k + 1], v[w + 2 * k], v[w + 2 * k + 1]]
    };
    let opts =
        MakeGridOptions { padding: 0, normalize: true, value_range: Some((-1.0, 1.0)), ..Default::default() };
    let g = make_grid(&x, opts.clone()).unwrap();
    assert_eq!(g.dims(), &[3, 2, 4]);
    // clamp to [-1, 1], then (x + 1) / 2
    assert_eq!(cell(&g, 0), vec![0.0, 0.0, 0.5, 0.75]);
    assert_eq!(cell(&g, 1), vec![1.0, 1.0, 1.0, 1.0]);
    // min and max of the whole batch: (x + 2) / 6
    let g = make_grid(&x, MakeGridOptions { value_range: None, ..opts.clone() }).unwrap();
    let f = |v: f32| (v + 2.0) / 6.0;
    assert_eq!(cell(&g, 0), vec![f(-2.0), f(-1.0), f(0.0), f(0.5)]);
    assert_eq!(cell(&g, 1), vec![f(1.0), f(3.0), f(2.0), f(4.0)]);
    // scale_each: each image by its own min and max
    let g = make_grid(&x, MakeGridOptions { value_range: None, scale_each: true, ..opts.clone() }).unwrap();
    assert_eq!(cell(&g, 0), vec![0.0, 0.4, 0.8, 1.0]);
    assert_eq!(cell(&g, 1), vec![0.0, 2.0 / 3.0, 1.0 / 3.0, 1.0]);
    // a constant image divides by 1e-5, not by zero
    let c = Tensor::full([2, 1, 1, 1], 3.0, DType::F32).unwrap();
    let g = make_grid(&c, MakeGridOptions { value_range: None, ..opts.clone() }).unwrap();
    assert_eq!(g.to_vec::<f32>().unwrap(), vec![0.0; 6]);
    // the input is not modified
    assert_eq!(x.to_vec::<f32>().unwrap()[0], -2.0);
    assert!(make_grid(&x.to_dtype(DType::U8).unwrap(), opts).is_err());
}

#[test]
fn save_image_writes_a_png_that_reads_back() {
    let dir = std::env::temp_dir().join(format!("pyrite-vision-utils-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("grid.png");
    let v: Vec<f32> = (0..2 * 3 * 2 * 3).map(|i| i as f32 / 35.0).chain([-0.5, 1.5, 0.2, 0.3]).collect();
    let x = Tensor::from_vec(v[..36].to_vec(), [2, 3, 2, 3]).unwrap();
    let opts = MakeGridOptions { padding: 1, pad_value: 0.2, ..Default::default() };
    save_image(&x, &path, opts.clone()).unwrap();
    let img = Image::open(&path).unwrap();
    let grid = make_grid(&x, opts).unwrap();
    assert_eq!((img.mode(), img.size()), ("RGB", (grid.dims()[2], grid.dims()[1])));
    // torchvision: grid.mul(255).add_(0.5).clamp_(0, 255).to(torch.uint8), in f32
    let g = grid.to_vec::<f32>().unwrap();
    let (h, w) = (grid.dims()[1], grid.dims()[2]);
    let mut want = vec![0u8; h * w * 3];
    for c in 0..3 {
        for p in 0..h * w {
            want[p * 3 + c] = (g[c * h * w + p] * 255.0 + 0.5).clamp(0.0, 255.0) as u8;
        }
    }
    assert_eq!(img.as_raw(), &want[..]);
    assert_eq!(want[0], 51, "pad 0.2: 51.5 truncates to 51");

    // grey images become RGB; values outside [0, 1] are clamped
    let grey = Tensor::from_vec(vec![-0.5f32, 1.5, 0.2, 0.3], [1, 1, 2, 2]).unwrap();
    let path = dir.join("grey.png");
    save_image(&grey, &path, MakeGridOptions::default()).unwrap();
    let img = Image::open(&path).unwrap();
    assert_eq!((img.mode(), img.size()), ("RGB", (2, 2)));
    assert_eq!(img.as_raw(), &[0u8, 0, 0, 255, 255, 255, 51, 51, 51, 77, 77, 77][..]);

    assert!(save_image(&grey.to_dtype(DType::U8).unwrap(), dir.join("u8.png"), MakeGridOptions::default())
        .is_err());
    assert!(save_image(
        &batch(1, 2, 2, 2).squeeze_dim(0).unwrap(),
        dir.join("two.png"),
        MakeGridOptions::default()
    )
    .is_err());
    std::fs::remove_dir_all(&dir).unwrap();
}
