//! `pyrite::vision::transforms` against torchvision's tensor kernels
//! (`reference/gen_transforms.py` -> `reference/data/transforms.safetensors`), and the
//! semantics of the random transforms.

use pyrite::data::{DataLoader, DataLoaderOptions, Dataset, FnDataset, Sample};
use pyrite::vision::transforms::functional as F;
use pyrite::vision::transforms::*;
use pyrite::vision::Image;
use pyrite::{DType, Generator, Tensor};
use serde_json::Value as J;
use std::collections::HashMap;
use std::sync::Arc;

fn load() -> (HashMap<String, Tensor>, HashMap<String, String>) {
    let path = format!("{}/../../reference/data/transforms.safetensors", env!("CARGO_MANIFEST_DIR"));
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let (_, meta) = safetensors::SafeTensors::read_metadata(&bytes).unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let mut out = HashMap::new();
    for (k, v) in st.tensors() {
        let d = match v.dtype() {
            safetensors::Dtype::F32 => DType::F32,
            safetensors::Dtype::F64 => DType::F64,
            safetensors::Dtype::U8 => DType::U8,
            other => panic!("unsupported dtype {other:?}"),
        };
        out.insert(k, Tensor::from_raw_bytes(v.data(), v.shape(), d).unwrap());
    }
    (out, meta.metadata().clone().unwrap_or_default())
}

fn usizes(v: &J) -> Vec<usize> {
    v.as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as usize).collect()
}
fn f64s(v: &J) -> Vec<f64> {
    v.as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect()
}
fn size(v: &J) -> Size {
    match usizes(v)[..] {
        [n] => Size::Int(n),
        [h, w] => Size::Exact(h, w),
        _ => panic!("size {v}"),
    }
}
fn mode(v: &J) -> InterpolationMode {
    match v.as_str().unwrap() {
        "nearest" => InterpolationMode::Nearest,
        "bicubic" => InterpolationMode::Bicubic,
        _ => InterpolationMode::Bilinear,
    }
}
fn pair(v: &J) -> Option<(f64, f64)> {
    v.as_array().map(|a| (a[0].as_f64().unwrap(), a[1].as_f64().unwrap()))
}
fn fill(v: &J) -> Option<Vec<f64>> {
    v.as_array().map(|_| f64s(v))
}

fn run(c: &J, img: &Tensor, args: &HashMap<String, Tensor>, name: &str) -> pyrite::Result<Tensor> {
    let i = |k: &str| c[k].as_i64().unwrap();
    let u = |k: &str| c[k].as_u64().unwrap() as usize;
    match c["op"].as_str().unwrap() {
        "resize" => {
            let opts = ResizeOptions {
                interpolation: mode(&c["mode"]),
                max_size: c.get("max_size").and_then(|m| m.as_u64()).map(|m| m as usize),
                antialias: c["antialias"].as_bool().unwrap(),
            };
            Resize::with_options(size(&c["size"]), opts).apply(img)
        }
        "center_crop" => CenterCrop::new(size(&c["size"])).apply(img),
        "crop" => F::crop(img, i("top"), i("left"), u("height"), u("width")),
        "resized_crop" => F::resized_crop(
            img,
            i("top"),
            i("left"),
            u("height"),
            u("width"),
            size(&c["size"]),
            mode(&c["mode"]),
            c["antialias"].as_bool().unwrap(),
        ),
        "pad" => {
            let padding_mode = match c["mode"].as_str().unwrap() {
                "constant" => PaddingMode::Constant,
                "edge" => PaddingMode::Edge,
                "reflect" => PaddingMode::Reflect,
                _ => PaddingMode::Symmetric,
            };
            Pad { padding: usizes(&c["padding"]), fill: c["fill"].as_f64().unwrap(), padding_mode }.apply(img)
        }
        "normalize" => Normalize { mean: f64s(&c["mean"]), std: f64s(&c["std"]), inplace: false }.apply(img),
        "grayscale" => Grayscale { num_output_channels: u("n") }.apply(img),
        "hflip" => RandomHorizontalFlip(1.0).apply(img),
        "vflip" => RandomVerticalFlip(1.0).apply(img),
        "convert" => {
            let d = match c["dtype"].as_str().unwrap() {
                "uint8" => DType::U8,
                "float32" => DType::F32,
                _ => DType::F64,
            };
            ConvertImageDtype(d).apply(img)
        }
        "to_tensor" => ToTensor.forward(Image::from_hwc_tensor(img)?.into())?.into_tensor(),
        "blur" => {
            let k = usizes(&c["kernel"]);
            let s = f64s(&c["sigma"]);
            F::gaussian_blur(img, (k[1], k[0]), (s[1], s[0]))
        }
        "rotate" => F::rotate(
            img,
            c["angle"].as_f64().unwrap(),
            mode(&c["mode"]),
            c["expand"].as_bool().unwrap(),
            pair(&c["center"]),
            fill(&c["fill"]).as_deref(),
        ),
        "affine" => F::affine(
            img,
            c["angle"].as_f64().unwrap(),
            pair(&c["translate"]).unwrap(),
            c["scale"].as_f64().unwrap(),
            pair(&c["shear"]).unwrap(),
            mode(&c["mode"]),
            fill(&c["fill"]).as_deref(),
            pair(&c["center"]),
        ),
        "brightness" => F::adjust_brightness(img, c["factor"].as_f64().unwrap()),
        "contrast" => F::adjust_contrast(img, c["factor"].as_f64().unwrap()),
        "saturation" => F::adjust_saturation(img, c["factor"].as_f64().unwrap()),
        "hue" => F::adjust_hue(img, c["factor"].as_f64().unwrap()),
        "erase" => F::erase(img, u("i"), u("j"), u("h"), u("w"), &args[&format!("arg.{name}")], false),
        op => panic!("unknown op {op}"),
    }
}

#[test]
fn deterministic_transforms_match_torchvision() {
    let (t, meta) = load();
    let mut n = 0;
    let mut failures = vec![];
    for (name, desc) in &meta {
        if name == "torch" || name == "torchvision" {
            continue;
        }
        let c: J = serde_json::from_str(desc).unwrap();
        let img = &t[&format!("img.{}", c["img"].as_str().unwrap())];
        let want = &t[&format!("out.{name}")];
        let got = match run(&c, img, &t, name) {
            Ok(g) => g,
            Err(e) => {
                failures.push(format!("{name}: error {e}"));
                continue;
            }
        };
        n += 1;
        if got.dims() != want.dims() || got.dtype() != want.dtype() {
            failures.push(format!(
                "{name}: got {:?} {:?}, want {:?} {:?}",
                got.dims(),
                got.dtype(),
                want.dims(),
                want.dtype()
            ));
            continue;
        }
        // u8 outputs match exactly (resampling follows torch's fixed-point u8 kernel, the
        // colour ops and grid sampling its f32 arithmetic); float outputs to 1e-5
        let tol = if want.dtype() == DType::U8 { 0.0 } else { 1e-5 };
        let g = got.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap();
        let w = want.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap();
        if let Some((i, (a, b))) = g.iter().zip(&w).enumerate().find(|(_, (a, b))| (*a - *b).abs() > tol) {
            let bad = g.iter().zip(&w).filter(|(a, b)| (*a - *b).abs() > tol).count();
            let worst = g.iter().zip(&w).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
            failures.push(format!(
                "{name}: element {i}: got {a}, want {b} ({bad} of {} off, by up to {worst})",
                g.len()
            ));
        }
    }
    assert!(n >= 600, "only {n} cases ran");
    assert!(failures.is_empty(), "{} mismatches:\n{}", failures.len(), failures.join("\n"));
}

/// `[1, 4, 6]` with value `6 y + x`.
fn image() -> Tensor {
    Tensor::from_vec((0..24).map(|x| x as f32).collect::<Vec<_>>(), [1, 4, 6]).unwrap()
}

#[test]
fn flips_with_p_zero_never_and_p_one_always() {
    let img = image();
    for _ in 0..20 {
        assert_eq!(
            RandomHorizontalFlip(0.0).apply(&img).unwrap().to_vec::<f32>().unwrap(),
            img.to_vec::<f32>().unwrap()
        );
        assert_eq!(
            RandomHorizontalFlip(1.0).apply(&img).unwrap().to_vec::<f32>().unwrap(),
            img.flip(&[-1]).unwrap().to_vec::<f32>().unwrap()
        );
        assert_eq!(
            RandomVerticalFlip(1.0).apply(&img).unwrap().to_vec::<f32>().unwrap(),
            img.flip(&[-2]).unwrap().to_vec::<f32>().unwrap()
        );
    }
    assert!(RandomHorizontalFlip(1.5).apply(&img).is_err());
}

#[test]
fn random_crop_is_a_window_of_the_image() {
    let img = image(); // [1, 4, 6], value = 6 y + x
    for _ in 0..20 {
        let out = RandomCrop::new((2, 3)).apply(&img).unwrap();
        assert_eq!(out.dims(), &[1, 2, 3]);
        let v = out.to_vec::<f32>().unwrap();
        let (y, x) = ((v[0] as usize) / 6, (v[0] as usize) % 6);
        assert!(y <= 2 && x <= 3);
        assert_eq!(v[5], v[0] + 6.0 + 2.0);
    }
    let err = RandomCrop::new(5).apply(&img).unwrap_err().to_string();
    assert!(err.contains("Required crop size (5, 5) is larger than input image size (4, 6)"), "{err}");
    let padded = RandomCrop::with_options(5, RandomCropOptions { pad_if_needed: true, ..Default::default() });
    assert_eq!(padded.apply(&img).unwrap().dims(), &[1, 5, 5]);
}

#[test]
fn random_resized_crop_gives_the_requested_size_and_a_valid_window() {
    let img = Tensor::rand([3, 20, 30], DType::F32).unwrap();
    let t = RandomResizedCrop::new((7, 9));
    for _ in 0..20 {
        assert_eq!(t.apply(&img).unwrap().dims(), &[3, 7, 9]);
        let (top, left, h, w) = t.get_params((20, 30)).unwrap();
        assert!(top >= 0 && left >= 0 && top as usize + h <= 20 && left as usize + w <= 30 && h > 0 && w > 0);
    }
    // impossible scale: every attempt fails, the fallback is the centre crop clamped to the ratio
    let t = RandomResizedCrop::with_options(
        4,
        RandomResizedCropOptions { scale: (2.0, 3.0), ratio: (1.0, 1.0), ..Default::default() },
    );
    assert_eq!(t.get_params((20, 30)).unwrap(), (0, 5, 20, 20));
}

#[test]
fn same_seeded_generator_gives_the_same_augmentation() {
    let img = Tensor::rand([3, 16, 16], DType::F32).unwrap();
    let aug = || {
        let ts: Vec<Box<dyn Transform>> = vec![
            Box::new(RandomResizedCrop::new(8)),
            Box::new(RandomHorizontalFlip(0.5)),
            Box::new(RandomCrop::with_options(
                8,
                RandomCropOptions { padding: Some(vec![2]), ..Default::default() },
            )),
            Box::new(RandomRotation::new(20.0).unwrap()),
            Box::new(
                RandomAffine::with_options(
                    5.0,
                    RandomAffineOptions { translate: Some((0.2, 0.2)), ..Default::default() },
                )
                .unwrap(),
            ),
            Box::new(ColorJitter::new(0.3, 0.3, 0.3, 0.1).unwrap()),
            Box::new(RandomErasing { value: ErasingValue::Random, ..Default::default() }),
        ];
        Compose(ts)
    };
    let run = |seed| {
        let ds = {
            let img = img.clone();
            let t = aug();
            FnDataset::new(6, move |_| Ok(Sample::Tensor(t.apply(&img)?)))
        };
        let ds: Arc<dyn Dataset> = Arc::new(ds);
        let mut outs = vec![];
        for workers in [0, 2] {
            let opts = DataLoaderOptions {
                batch_size: Some(3),
                num_workers: workers,
                generator: Some(Arc::new(Generator::new(seed))),
                ..Default::default()
            };
            let batches: Vec<Vec<f32>> = DataLoader::new(ds.clone(), opts)
                .unwrap()
                .iter()
                .unwrap()
                .map(|b| b.unwrap().into_tensor().unwrap().to_vec::<f32>().unwrap())
                .collect();
            outs.push(batches);
        }
        assert_eq!(outs[0], outs[1], "0 and 2 workers must augment identically");
        outs.remove(0)
    };
    assert_eq!(run(7), run(7));
    assert_ne!(run(7), run(8));
}

#[test]
fn bad_inputs_are_errors() {
    let img = Tensor::rand([3, 4, 4], DType::F32).unwrap();
    assert!(Resize::new(4).apply(&Tensor::rand([4, 4], DType::F32).unwrap()).is_err());
    assert!(Normalize { mean: vec![0.0; 2], std: vec![1.0; 2], ..Default::default() }.apply(&img).is_err());
    assert!(Normalize { mean: vec![0.0], std: vec![0.0], ..Default::default() }.apply(&img).is_err());
    assert!(Grayscale::default().apply(&Tensor::rand([2, 4, 4], DType::F32).unwrap()).is_err());
    assert!(Pad { padding: vec![4], padding_mode: PaddingMode::Reflect, ..Default::default() }
        .apply(&img)
        .is_err());
    let u8img = Tensor::zeros([3, 4, 4], DType::U8).unwrap();
    assert!(Normalize { mean: vec![0.0], std: vec![1.0], ..Default::default() }.apply(&u8img).is_err());
    // rotations and affine maps on tensors: nearest or bilinear, one fill value or one per channel
    let nearest = InterpolationMode::Nearest;
    let err = F::rotate(&img, 10.0, InterpolationMode::Bicubic, false, None, None).unwrap_err().to_string();
    assert!(err.contains("interpolation mode 'bicubic' is unsupported with tensor input"), "{err}");
    let err = F::rotate(&img, 10.0, nearest, false, None, Some(&[0.0, 1.0])).unwrap_err().to_string();
    assert!(err.contains("cannot broadcast to match the number of channels of the image (2 != 3)"), "{err}");
    assert!(F::affine(&img, 0.0, (0.0, 0.0), 0.0, (0.0, 0.0), nearest, None, None).is_err());
    assert!(F::rotate(&Tensor::rand([4, 4], DType::F32).unwrap(), 10.0, nearest, false, None, None).is_err());
    // colour: non-negative factors, hue within half a turn, 1 or 3 channels
    assert!(F::adjust_brightness(&img, -0.5).is_err());
    assert!(F::adjust_contrast(&img, -0.5).is_err());
    assert!(F::adjust_saturation(&img, -0.5).is_err());
    let err = F::adjust_hue(&img, 0.75).unwrap_err().to_string();
    assert!(err.contains("hue_factor (0.75) is not in [-0.5, 0.5]"), "{err}");
    let two = Tensor::rand([2, 4, 4], DType::F32).unwrap();
    let err = F::adjust_contrast(&two, 1.0).unwrap_err().to_string();
    assert!(err.contains("permitted channel values are 1 or 3, but found 2"), "{err}");
    // erase: the value must broadcast to the region
    let v = Tensor::zeros([2, 1, 1], DType::F32).unwrap();
    assert!(F::erase(&img, 0, 0, 2, 2, &v, false).is_err());
}

#[test]
fn random_apply_and_choice() {
    let img = image();
    let twice = || -> Vec<Box<dyn Transform>> { vec![Box::new(Lambda::new(|x: &Tensor| x.mul_scalar(2.0)))] };
    let v = |t: &dyn Transform| t.apply(&img).unwrap().to_vec::<f32>().unwrap();
    assert_eq!(v(&RandomApply::new(twice(), 0.0)), img.to_vec::<f32>().unwrap());
    assert_eq!(v(&RandomApply::new(twice(), 1.0))[1], 2.0);
    let choice = RandomChoice {
        transforms: vec![twice().remove(0), Box::new(RandomVerticalFlip(1.0))],
        p: Some(vec![0.0, 1.0]),
    };
    assert_eq!(v(&choice), img.flip(&[-2]).unwrap().to_vec::<f32>().unwrap());
}

/// torchvision's u8 -> float conversions divide (`image.to(dtype) / 255`, `img.to(float).div(255)`
/// in `to_tensor`): every byte value bit for bit, in f32 and f64 (multiplying by `1 / 255`
/// differs in 126 of the 256 f32 values).
#[test]
fn u8_to_float_divides_by_255_bit_for_bit() {
    let bytes: Vec<u8> = (0..=255).collect();
    let img = Tensor::from_vec(bytes.clone(), [1, 16, 16]).unwrap();
    let want32: Vec<u32> = bytes.iter().map(|&b| (b as f32 / 255.0f32).to_bits()).collect();
    let want64: Vec<u64> = bytes.iter().map(|&b| (b as f64 / 255.0f64).to_bits()).collect();
    let bits32 = |t: &Tensor| t.to_vec::<f32>().unwrap().iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    let bits64 = |t: &Tensor| t.to_vec::<f64>().unwrap().iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits32(&ConvertImageDtype(DType::F32).apply(&img).unwrap()), want32);
    assert_eq!(bits32(&F::convert_image_dtype(&img, DType::F32).unwrap()), want32);
    assert_eq!(bits64(&ConvertImageDtype(DType::F64).apply(&img).unwrap()), want64);
    // the multiplication this replaced really differs
    let mul: Vec<u32> = bytes.iter().map(|&b| (b as f32 * (1.0f32 / 255.0)).to_bits()).collect();
    assert_eq!(mul.iter().zip(&want32).filter(|(a, b)| a != b).count(), 126);
    let pic = Image::new(16, 16, 1, bytes.clone()).unwrap();
    assert_eq!(bits32(&ToTensor.forward(pic.clone().into()).unwrap().into_tensor().unwrap()), want32);
    assert_eq!(bits32(&F::to_tensor(&pic).unwrap()), want32);
}

#[test]
fn to_pil_image_and_back() {
    let img = Image::new(2, 3, 4, (0..24).map(|i| i as u8 * 10).collect()).unwrap();
    let chw = F::pil_to_tensor(&img).unwrap();
    assert_eq!(chw.dims(), &[4, 2, 3]);
    assert_eq!(F::to_pil_image(&chw).unwrap(), img);
    assert!(ToPILImage.apply(&chw).unwrap_err().to_string().contains("expected a tensor"));
    let back = Compose(vec![Box::new(ToPILImage), Box::new(PILToTensor)]).apply(&chw).unwrap();
    assert_eq!(back.to_vec::<u8>().unwrap(), chw.to_vec::<u8>().unwrap());
    // a float tensor is `pic.mul(255).byte()`: truncated
    let f = Tensor::from_vec(vec![0.0f32, 0.5, 1.0, 0.999], [2, 2]).unwrap();
    let p = F::to_pil_image(&f).unwrap();
    assert_eq!((p.mode(), p.as_raw()), ("L", &[0u8, 127, 255, 254][..]));
    assert!(F::to_pil_image(&Tensor::zeros([2, 2, 2], DType::U8).unwrap()).is_err());
    assert!(F::to_pil_image(&Tensor::zeros([5, 2, 2], DType::U8).unwrap()).is_err());
    // HWC data becomes an image only through Image::from_hwc_tensor
    let hwc = Tensor::from_vec((0..12u8).collect::<Vec<_>>(), [2, 2, 3]).unwrap();
    let im = Image::from_hwc_tensor(&hwc).unwrap();
    assert_eq!((im.size(), im.as_raw()), ((2, 2), &(0..12u8).collect::<Vec<_>>()[..]));
    assert_eq!(F::to_tensor(&im).unwrap().dims(), &[3, 2, 2]);
}
