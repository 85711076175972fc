//! The file-reading datasets, on small files each test writes into its own temporary folder.

use pyrite::data::{Dataset, Sample};
use pyrite::vision::datasets::{Digits, DigitsSplit, FashionMNIST, ImageFolder, CIFAR10, MNIST};
use pyrite::vision::transforms::{
    CenterCrop, Compose, Grayscale, ImageOrTensor, Normalize, PILToTensor, RandomHorizontalFlip, ToTensor,
    Transform,
};
use pyrite::vision::Image;
use pyrite::{DType, Tensor};
use std::io::Write;
use std::path::{Path, PathBuf};

/// A fresh, empty folder for one test.
fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("pyrite-vision-ds-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// `PILToTensor()` then a cast to f32 (values unchanged).
fn bytes_as_f32() -> Compose {
    Compose(vec![Box::new(PILToTensor), Box::new(|x: &Tensor| x.to_dtype(DType::F32))])
}

fn image_and_label(s: &Sample) -> (Tensor, i64) {
    (s.item(0).unwrap().as_tensor().unwrap().clone(), s.item(1).unwrap().as_int().unwrap())
}

fn u8s(t: &Tensor) -> Vec<u8> {
    t.to_vec::<u8>().unwrap()
}

// ---------------------------------------------------------------- ImageFolder

fn grey_png(path: &Path, w: u32, h: u32, v: u8) {
    image::GrayImage::from_pixel(w, h, image::Luma([v]))
        .save_with_format(path, image::ImageFormat::Png)
        .unwrap();
}

/// root/cat/{b.png, a.PNG, notes.txt, sub/c.jpeg}, root/dog/x.jpg, root/ant/z.png
fn pets(root: &Path) {
    for c in ["cat", "dog", "ant", "cat/sub"] {
        std::fs::create_dir_all(root.join(c)).unwrap();
    }
    grey_png(&root.join("cat/b.png"), 2, 3, 10);
    grey_png(&root.join("cat/a.PNG"), 2, 3, 20);
    std::fs::write(root.join("cat/notes.txt"), "not an image").unwrap();
    image::RgbImage::from_pixel(4, 2, image::Rgb([200, 100, 50]))
        .save_with_format(root.join("cat/sub/c.jpeg"), image::ImageFormat::Jpeg)
        .unwrap();
    image::RgbImage::from_pixel(5, 5, image::Rgb([0, 255, 0]))
        .save_with_format(root.join("dog/x.jpg"), image::ImageFormat::Jpeg)
        .unwrap();
    image::RgbaImage::from_pixel(1, 2, image::Rgba([1, 2, 3, 4]))
        .save_with_format(root.join("ant/z.png"), image::ImageFormat::Png)
        .unwrap();
}

#[test]
fn image_folder_lists_classes_sorted_and_samples_sorted_per_class() {
    let root = tmp("if-list");
    pets(&root);
    let ds = ImageFolder::new(&root).unwrap();
    assert_eq!(ds.classes(), ["ant", "cat", "dog"]);
    let idx = ds.class_to_idx();
    assert_eq!((idx["ant"], idx["cat"], idx["dog"]), (0, 1, 2));
    let rel: Vec<(String, i64)> = ds
        .samples()
        .iter()
        .map(|(p, l)| (p.strip_prefix(&root).unwrap().to_string_lossy().replace('\\', "/"), *l))
        .collect();
    let want =
        [("ant/z.png", 0), ("cat/a.PNG", 1), ("cat/b.png", 1), ("cat/sub/c.jpeg", 1), ("dog/x.jpg", 2)];
    assert_eq!(rel, want.map(|(p, l)| (p.to_string(), l)));
    assert_eq!(ds.targets(), [0, 1, 1, 1, 2]);
    assert_eq!(ds.len(), 5);
}

#[test]
fn image_folder_decodes_every_image_to_rgb_u8_chw() {
    let root = tmp("if-decode");
    pets(&root);
    let ds = ImageFolder::new(&root).unwrap();

    // RGBA: alpha dropped, as PIL's convert("RGB").
    let (x, y) = image_and_label(&ds.get(0).unwrap());
    assert_eq!((x.dtype(), x.dims(), y), (DType::U8, &[3usize, 2, 1][..], 0));
    assert_eq!(u8s(&x), [1, 1, 2, 2, 3, 3]);

    // Grey: replicated into three channels; H=3, W=2.
    let (x, y) = image_and_label(&ds.get(1).unwrap());
    assert_eq!((x.dims(), y), (&[3usize, 3, 2][..], 1));
    assert_eq!(u8s(&x), vec![20u8; 18]);

    // JPEG (lossy): a flat colour stays close, channel by channel.
    let (x, _) = image_and_label(&ds.get(3).unwrap());
    assert_eq!(x.dims(), &[3, 2, 4]);
    let v = u8s(&x);
    for (c, want) in [200i32, 100, 50].into_iter().enumerate() {
        for &p in &v[c * 8..(c + 1) * 8] {
            assert!((p as i32 - want).abs() <= 3, "channel {c}: {p} vs {want}");
        }
    }
    assert!(ds.get(5).unwrap_err().to_string().contains("out of range"));
}

#[test]
fn image_folder_applies_the_transform() {
    let root = tmp("if-transform");
    pets(&root);
    let ds = ImageFolder::new(&root).unwrap().with_transform(bytes_as_f32());
    let (x, _) = image_and_label(&ds.get(2).unwrap());
    assert_eq!((x.dtype(), x.dims()), (DType::F32, &[3usize, 3, 2][..]));
    assert_eq!(x.to_vec::<f32>().unwrap(), vec![10f32; 18]);
}

#[test]
fn image_folder_errors_without_class_folders_or_with_an_empty_class() {
    let root = tmp("if-none");
    std::fs::write(root.join("loose.png"), "x").unwrap();
    let e = ImageFolder::new(&root).err().unwrap().to_string();
    assert!(e.contains("Couldn't find any class folder in") && e.contains(&*root.to_string_lossy()), "{e}");

    let root = tmp("if-empty");
    pets(&root);
    std::fs::create_dir_all(root.join("emu")).unwrap();
    std::fs::create_dir_all(root.join("bee/deeper")).unwrap();
    std::fs::write(root.join("emu/readme.txt"), "no images here").unwrap();
    let e = ImageFolder::new(&root).err().unwrap().to_string();
    assert!(e.contains("Found no valid file for the classes bee, emu"), "{e}");
    assert!(ImageFolder::new(root.join("missing")).is_err());
}

#[test]
fn image_folder_reports_a_file_that_does_not_decode() {
    let root = tmp("if-corrupt");
    std::fs::create_dir_all(root.join("a")).unwrap();
    std::fs::write(root.join("a/broken.png"), b"\x89PNG\r\n\x1a\nnot really").unwrap();
    let mut bytes = Vec::new();
    image::RgbImage::from_pixel(8, 8, image::Rgb([9, 9, 9]))
        .write_to(&mut std::io::Cursor::new(&mut bytes), image::ImageFormat::Png)
        .unwrap();
    std::fs::write(root.join("a/cut.png"), &bytes[..bytes.len() / 2]).unwrap();
    let ds = ImageFolder::new(&root).unwrap();
    assert_eq!(ds.len(), 2);
    for i in 0..2 {
        let e = ds.get(i).unwrap_err().to_string();
        assert!(e.contains(&*ds.samples()[i].0.to_string_lossy()), "{e}");
    }
}

// ---------------------------------------------------------------- MNIST

fn idx_bytes(magic: u32, dims: &[u32], data: &[u8]) -> Vec<u8> {
    let mut b = magic.to_be_bytes().to_vec();
    for d in dims {
        b.extend(d.to_be_bytes());
    }
    b.extend(data);
    b
}

fn gz(bytes: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

/// Image `i` has every pixel `p` equal to `(i * 7 + p) % 256`.
fn mnist_pixels(n: usize) -> Vec<u8> {
    (0..n).flat_map(|i| (0..784).map(move |p| ((i * 7 + p) % 256) as u8)).collect()
}

fn write_mnist(dir: &Path, split: &str, labels: &[u8], compress: bool) {
    let images = idx_bytes(2051, &[labels.len() as u32, 28, 28], &mnist_pixels(labels.len()));
    let labels = idx_bytes(2049, &[labels.len() as u32], labels);
    let (ext, images, labels) =
        if compress { (".gz", gz(&images), gz(&labels)) } else { ("", images, labels) };
    std::fs::write(dir.join(format!("{split}-images-idx3-ubyte{ext}")), images).unwrap();
    std::fs::write(dir.join(format!("{split}-labels-idx1-ubyte{ext}")), labels).unwrap();
}

#[test]
fn mnist_reads_raw_and_gzipped_idx_files() {
    let dir = tmp("mnist-ok");
    write_mnist(&dir, "train", &[5, 0, 4], false);
    write_mnist(&dir, "t10k", &[7, 2], true);
    let train = MNIST::new(&dir, true).unwrap();
    let test = MNIST::new(&dir, false).unwrap();
    assert_eq!((train.len(), test.len()), (3, 2));
    assert_eq!(train.targets(), [5, 0, 4]);
    assert_eq!(train.classes()[5], "5 - five");
    let want = mnist_pixels(3);
    for (i, label) in [5, 0, 4].into_iter().enumerate().rev() {
        let (x, y) = image_and_label(&train.get(i).unwrap());
        assert_eq!((x.dtype(), x.dims(), y), (DType::U8, &[1usize, 28, 28][..], label));
        assert_eq!(u8s(&x), &want[i * 784..(i + 1) * 784]);
    }
    let (x, y) = image_and_label(&test.get(1).unwrap());
    assert_eq!((u8s(&x), y), (want[784..2 * 784].to_vec(), 2));
    assert!(test.get(2).unwrap_err().to_string().contains("out of range"));
}

#[test]
fn fashion_mnist_reads_the_same_files_with_its_class_names() {
    let dir = tmp("fashion");
    write_mnist(&dir, "t10k", &[9, 0], false);
    let ds = FashionMNIST::new(&dir, false).unwrap().with_transform(bytes_as_f32());
    assert_eq!(ds.classes()[9], "Ankle boot");
    assert_eq!(ds.classes()[0], "T-shirt/top");
    let (x, y) = image_and_label(&ds.get(0).unwrap());
    assert_eq!((x.dtype(), y), (DType::F32, 9));
    assert_eq!(x.to_vec::<f32>().unwrap()[..3], [0., 1., 2.]);
}

#[test]
fn mnist_rejects_bad_files_with_the_path_in_the_message() {
    // Wrong magic number in the images file.
    let dir = tmp("mnist-magic");
    write_mnist(&dir, "train", &[1], false);
    std::fs::write(dir.join("train-images-idx3-ubyte"), idx_bytes(2049, &[1, 28, 28], &[0; 784])).unwrap();
    let e = MNIST::new(&dir, true).err().unwrap().to_string();
    assert!(e.contains("train-images-idx3-ubyte") && e.contains("expected 2051, found 2049"), "{e}");

    // Truncated images file: raw and gzipped.
    for compress in [false, true] {
        let dir = tmp(&format!("mnist-trunc-{compress}"));
        write_mnist(&dir, "train", &[1, 2], compress);
        let mut b = idx_bytes(2051, &[2, 28, 28], &[0; 784 + 100]);
        if compress {
            b = gz(&b);
        }
        let ext = if compress { ".gz" } else { "" };
        std::fs::write(dir.join(format!("train-images-idx3-ubyte{ext}")), b).unwrap();
        let e = MNIST::new(&dir, true).err().unwrap().to_string();
        assert!(e.contains("expected 1584 bytes, found 900"), "{e}");
    }

    // A gzip file cut in the middle.
    let dir = tmp("mnist-cutgz");
    write_mnist(&dir, "train", &[1, 2], true);
    let p = dir.join("train-images-idx3-ubyte.gz");
    let b = std::fs::read(&p).unwrap();
    std::fs::write(&p, &b[..b.len() / 2]).unwrap();
    let e = MNIST::new(&dir, true).err().unwrap().to_string();
    assert!(e.contains("cannot decompress") && e.contains("train-images-idx3-ubyte.gz"), "{e}");

    // Counts that disagree, a label out of range, a missing file.
    let dir = tmp("mnist-counts");
    write_mnist(&dir, "train", &[1, 2], false);
    std::fs::write(dir.join("train-labels-idx1-ubyte"), idx_bytes(2049, &[3], &[1, 2, 3])).unwrap();
    let e = MNIST::new(&dir, true).err().unwrap().to_string();
    assert!(e.contains("holds 2 images") && e.contains("holds 3 labels"), "{e}");
    std::fs::write(dir.join("train-labels-idx1-ubyte"), idx_bytes(2049, &[2], &[1, 10])).unwrap();
    assert!(MNIST::new(&dir, true).err().unwrap().to_string().contains("label 10 is out of range"));
    let e = MNIST::new(&dir, false).err().unwrap().to_string();
    assert!(e.contains("t10k-labels-idx1-ubyte") && e.contains("not found"), "{e}");
}

// ---------------------------------------------------------------- CIFAR10

/// Record `k` (over all files) has label `k % 10` and pixel `p` equal to `(k + p) % 251`.
fn cifar_records(first: usize, n: usize) -> Vec<u8> {
    let mut b = Vec::new();
    for k in first..first + n {
        b.push((k % 10) as u8);
        b.extend((0..3072).map(|p| ((k + p) % 251) as u8));
    }
    b
}

fn write_cifar(dir: &Path) {
    let mut k = 0;
    for (i, n) in [2, 1, 3, 1, 2].into_iter().enumerate() {
        std::fs::write(dir.join(format!("data_batch_{}.bin", i + 1)), cifar_records(k, n)).unwrap();
        k += n;
    }
    std::fs::write(dir.join("test_batch.bin"), cifar_records(100, 2)).unwrap();
}

#[test]
fn cifar10_reads_records_across_the_batch_files() {
    let dir = tmp("cifar-ok");
    write_cifar(&dir);
    let train = CIFAR10::new(&dir, true).unwrap();
    assert_eq!(train.len(), 9);
    assert_eq!(train.classes()[0], "airplane");
    assert_eq!(train.classes()[9], "truck");
    for k in [8, 0, 2, 3, 5, 6] {
        let (x, y) = image_and_label(&train.get(k).unwrap());
        assert_eq!((x.dtype(), x.dims(), y), (DType::U8, &[3usize, 32, 32][..], (k % 10) as i64));
        assert_eq!(u8s(&x), &cifar_records(k, 1)[1..]);
    }
    assert!(train.get(9).unwrap_err().to_string().contains("out of range"));
    let test = CIFAR10::new(&dir, false).unwrap().with_transform(bytes_as_f32());
    let (x, y) = image_and_label(&test.get(1).unwrap());
    assert_eq!((x.dtype(), y), (DType::F32, 1));
    assert_eq!(x.to_vec::<f32>().unwrap()[..2], [101., 102.]);
}

#[test]
fn cifar10_rejects_missing_truncated_and_mislabelled_files() {
    let dir = tmp("cifar-bad");
    write_cifar(&dir);
    std::fs::remove_file(dir.join("data_batch_4.bin")).unwrap();
    let e = CIFAR10::new(&dir, true).err().unwrap().to_string();
    assert!(e.contains("data_batch_4.bin"), "{e}");

    let mut b = cifar_records(0, 2);
    b.truncate(3073 + 1000);
    std::fs::write(dir.join("test_batch.bin"), b).unwrap();
    let e = CIFAR10::new(&dir, false).err().unwrap().to_string();
    assert!(e.contains("test_batch.bin has 4073 bytes") && e.contains("multiple of 3073"), "{e}");

    let mut b = cifar_records(0, 2);
    b[3073] = 12;
    std::fs::write(dir.join("test_batch.bin"), b).unwrap();
    let test = CIFAR10::new(&dir, false).unwrap();
    assert!(test.get(0).is_ok());
    let e = test.get(1).unwrap_err().to_string();
    assert!(e.contains("test_batch.bin") && e.contains("label 12"), "{e}");
}

// ---------------------------------------------------------------- images and ToTensor

/// torchvision's MNIST pipeline, ported literally, gives `[1, 28, 28]` with torchvision's
/// values (the old `ToTensor` permuted the `[1, 28, 28]` u8 tensor into `[28, 1, 28]`).
#[test]
fn mnist_with_torchvisions_pipeline_gives_1x28x28() {
    let dir = tmp("mnist-pipeline");
    write_mnist(&dir, "train", &[5, 0, 4], false);
    // transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.1307,), (0.3081,))])
    let t = Compose(vec![
        Box::new(ToTensor),
        Box::new(Normalize { mean: vec![0.1307], std: vec![0.3081], ..Default::default() }),
    ]);
    let ds = MNIST::new(&dir, true).unwrap().with_transform(t);
    let want = mnist_pixels(3);
    for i in 0..3 {
        let (x, y) = image_and_label(&ds.get(i).unwrap());
        assert_eq!((x.dtype(), x.dims(), y), (DType::F32, &[1usize, 28, 28][..], [5, 0, 4][i]));
        let w: Vec<u32> = want[i * 784..(i + 1) * 784]
            .iter()
            .map(|&b| ((b as f32 / 255.0 - 0.1307f32) / 0.3081f32).to_bits())
            .collect();
        let got: Vec<u32> = x.to_vec::<f32>().unwrap().iter().map(|v| v.to_bits()).collect();
        assert_eq!(got, w, "image {i}");
        // `x.view(-1, 784)` reads the pixels in row-major order
        assert_eq!(x.reshape([-1, 784]).unwrap().dims(), &[1, 784]);
    }
}

/// A transform that checks it was handed an `Image` of `mode` and `(width, height)`, and
/// returns its `[H, W, C]` bytes as a flat tensor.
struct HwcBytes(&'static str, (usize, usize));

impl Transform for HwcBytes {
    fn forward(&self, input: ImageOrTensor) -> pyrite::Result<ImageOrTensor> {
        let img = input.into_image()?;
        assert_eq!((img.mode(), img.size()), (self.0, self.1));
        let n = img.as_raw().len();
        Ok(Tensor::from_vec(img.into_raw(), [n])?.into())
    }
}

#[test]
fn datasets_hand_their_transform_a_pil_style_image() {
    let dir = tmp("image-mnist");
    write_mnist(&dir, "train", &[5, 0], false);
    let ds = MNIST::new(&dir, true).unwrap().with_transform(HwcBytes("L", (28, 28)));
    assert_eq!(u8s(&image_and_label(&ds.get(1).unwrap()).0), mnist_pixels(2)[784..]);

    // CIFAR-10's records are channel-major; the image is [32, 32, 3], as torchvision's
    let dir = tmp("image-cifar");
    write_cifar(&dir);
    let ds = CIFAR10::new(&dir, false).unwrap().with_transform(HwcBytes("RGB", (32, 32)));
    let hwc = u8s(&image_and_label(&ds.get(1).unwrap()).0);
    let rec = cifar_records(101, 1);
    for p in [0, 1, 32, 1023] {
        for c in 0..3 {
            assert_eq!(hwc[3 * p + c], rec[1 + c * 1024 + p], "pixel {p} channel {c}");
        }
    }
    // ToTensor makes the record's [3, 32, 32] again, divided by 255
    let ds = CIFAR10::new(&dir, false).unwrap().with_transform(ToTensor);
    let (x, _) = image_and_label(&ds.get(1).unwrap());
    assert_eq!(x.dims(), &[3, 32, 32]);
    let want: Vec<f32> = rec[1..].iter().map(|&b| b as f32 / 255.0).collect();
    assert_eq!(x.to_vec::<f32>().unwrap(), want);

    let root = tmp("image-folder");
    pets(&root);
    let ds = ImageFolder::new(&root).unwrap().with_transform(HwcBytes("RGB", (2, 3)));
    assert_eq!(u8s(&image_and_label(&ds.get(2).unwrap()).0), vec![10u8; 18]);
}

/// A tensor is `[C, H, W]` and is never permuted: `ToTensor` refuses one, as torchvision's
/// refuses a tensor (`TypeError: pic should be PIL Image or ndarray`).
#[test]
fn to_tensor_refuses_a_tensor_instead_of_permuting_it() {
    for t in [
        Tensor::zeros([1, 28, 28], DType::U8).unwrap(),
        Tensor::zeros([3, 8, 8], DType::F32).unwrap(),
        Tensor::zeros([28, 28, 1], DType::U8).unwrap(),
    ] {
        for e in [ToTensor.apply(&t).unwrap_err(), PILToTensor.apply(&t).unwrap_err()] {
            let e = e.to_string();
            assert!(e.contains("pic should be an Image") && e.contains("never permuted"), "{e}");
        }
    }
    // the Digits are [1, 8, 8] f32 tensors: ToTensor says so rather than transposing them
    let ds = Digits::new(DigitsSplit::Test).unwrap().with_transform(ToTensor);
    assert!(ds.get(0).unwrap_err().to_string().contains("pic should be an Image"));
    // without a transform, an image leaves the dataset as its [C, H, W] u8 tensor
    let dir = tmp("image-plain");
    write_mnist(&dir, "t10k", &[1], true);
    let (x, _) = image_and_label(&MNIST::new(&dir, false).unwrap().get(0).unwrap());
    assert_eq!((x.dtype(), x.dims()), (DType::U8, &[1usize, 28, 28][..]));
    // a transform ending on an image likewise
    let ds = MNIST::new(&dir, false).unwrap().with_transform(CenterCrop::new(20));
    let (x, _) = image_and_label(&ds.get(0).unwrap());
    assert_eq!((x.dtype(), x.dims()), (DType::U8, &[1usize, 20, 20][..]));
}

/// The geometric transforms take an `Image` as torchvision's take a PIL image and give the
/// pixels the tensor path gives; `Grayscale` of an image is PIL's `convert("L")`.
#[test]
fn transforms_take_an_image_as_torchvisions_take_a_pil_image() {
    let bytes: Vec<u8> = (0..6 * 5 * 3).map(|i| (i * 13 % 256) as u8).collect();
    let img = Image::new(6, 5, 3, bytes).unwrap();
    let t =
        Compose(vec![Box::new(RandomHorizontalFlip(1.0)), Box::new(CenterCrop::new(4)), Box::new(ToTensor)]);
    let got = t.forward(img.clone().into()).unwrap().into_tensor().unwrap();
    let chw = Tensor::from_vec(img.as_raw().to_vec(), [6, 5, 3]).unwrap().permute(&[2, 0, 1]).unwrap();
    let want = CenterCrop::new(4).apply(&chw.flip(&[-1]).unwrap()).unwrap();
    assert_eq!(got.dims(), &[3, 4, 4]);
    assert_eq!(
        got.to_vec::<f32>().unwrap(),
        want.to_dtype(DType::F32).unwrap().div_scalar(255.0).unwrap().to_vec::<f32>().unwrap()
    );
    // a geometric transform of an image is an image
    let out = CenterCrop::new(4).forward(img.into()).unwrap().into_image().unwrap();
    assert_eq!((out.mode(), out.size()), ("RGB", (4, 4)));

    // PIL's luma rounds: pure green is 150 (the tensor kernel's 0.587 * 255 truncates to 149)
    let green = Image::new(1, 2, 3, vec![0, 255, 0, 255, 0, 0]).unwrap();
    let g = Grayscale::default().forward(green.clone().into()).unwrap().into_image().unwrap();
    assert_eq!((g.mode(), g.as_raw()), ("L", &[150u8, 76][..]));
    let g3 =
        Grayscale { num_output_channels: 3 }.forward(green.clone().into()).unwrap().into_image().unwrap();
    assert_eq!((g3.mode(), g3.as_raw()), ("RGB", &[150u8, 150, 150, 76, 76, 76][..]));

    // Normalize takes tensors only, as torchvision's
    let e = Normalize { mean: vec![0.5], std: vec![0.5], ..Default::default() }
        .forward(green.into())
        .unwrap_err();
    assert!(e.to_string().contains("img should be a tensor image"), "{e}");
}
