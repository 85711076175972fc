//! `torchvision.datasets.MNIST` and `FashionMNIST`, read from the IDX files of a directory:
//! `train-images-idx3-ubyte` and `train-labels-idx1-ubyte` (train) or `t10k-images-idx3-ubyte`
//! and `t10k-labels-idx1-ubyte` (test), each raw or gzipped (`.gz` appended).
//!
//! A raw image file is read lazily: the header at construction, then one image per `get` (a
//! seek and a read). A gzipped image file cannot be seeked, so it is decompressed into memory
//! once at construction (47 MB for the MNIST train images). The labels (one byte per sample)
//! are always read at construction.

use crate::transforms::Transform;
use crate::Image;
use pyrite_core::{bail, err, Result};
use pyrite_data::{Dataset, Sample};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

const IMAGES_MAGIC: u32 = 2051;
const LABELS_MAGIC: u32 = 2049;

/// Where the image bytes are.
enum Pixels {
    /// An open raw file (images start at byte 16).
    File { file: Mutex<File>, path: PathBuf },
    /// The decompressed file (header included).
    Memory(Vec<u8>),
}

/// Finds `dir/name` or `dir/name.gz`.
fn find(dir: &Path, name: &str) -> Result<(PathBuf, bool)> {
    let raw = dir.join(name);
    if raw.is_file() {
        return Ok((raw, false));
    }
    let gz = dir.join(format!("{name}.gz"));
    if gz.is_file() {
        return Ok((gz, true));
    }
    bail!(Io, "IDX file not found: neither {} nor {} exists", raw.display(), gz.display())
}

fn gunzip(path: &Path) -> Result<Vec<u8>> {
    let f = File::open(path).map_err(|e| err!(Io, "cannot open {}: {e}", path.display()))?;
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(f)
        .read_to_end(&mut out)
        .map_err(|e| err!(Io, "cannot decompress {}: {e}", path.display()))?;
    Ok(out)
}

fn be_u32(b: &[u8], i: usize) -> u32 {
    u32::from_be_bytes([b[4 * i], b[4 * i + 1], b[4 * i + 2], b[4 * i + 3]])
}

/// Checks an IDX header (`magic`, then `dims` big-endian u32 sizes) and the total size.
fn check_header(path: &Path, header: &[u8], magic: u32, ndims: usize, total_len: u64) -> Result<Vec<usize>> {
    if header.len() < 4 * (ndims + 1) {
        bail!(
            Io,
            "{}: truncated IDX header: expected {} bytes, found {}",
            path.display(),
            4 * (ndims + 1),
            header.len()
        );
    }
    let found = be_u32(header, 0);
    if found != magic {
        bail!(Io, "{}: wrong IDX magic number: expected {magic}, found {found}", path.display());
    }
    let dims: Vec<usize> = (1..=ndims).map(|i| be_u32(header, i) as usize).collect();
    let expected = dims.iter().map(|&d| d as u64).product::<u64>() + 4 * (ndims as u64 + 1);
    if total_len != expected {
        bail!(
            Io,
            "{}: wrong size for an IDX file of shape {dims:?}: expected {expected} bytes, found {total_len}",
            path.display()
        );
    }
    Ok(dims)
}

/// The shared reader behind [`MNIST`] and [`FashionMNIST`].
struct Idx {
    name: &'static str,
    pixels: Pixels,
    labels: Vec<u8>,
    rows: usize,
    cols: usize,
    classes: &'static [&'static str],
    transform: Option<Arc<dyn Transform>>,
}

impl Idx {
    fn open(name: &'static str, classes: &'static [&'static str], dir: &Path, train: bool) -> Result<Idx> {
        let split = if train { "train" } else { "t10k" };
        let (lpath, lgz) = find(dir, &format!("{split}-labels-idx1-ubyte"))?;
        let lbytes = if lgz {
            gunzip(&lpath)?
        } else {
            std::fs::read(&lpath).map_err(|e| err!(Io, "cannot read {}: {e}", lpath.display()))?
        };
        let ldims = check_header(&lpath, &lbytes, LABELS_MAGIC, 1, lbytes.len() as u64)?;
        let labels = lbytes[8..].to_vec();
        debug_assert_eq!(labels.len(), ldims[0]);
        if let Some(bad) = labels.iter().find(|&&l| l as usize >= classes.len()) {
            bail!(Io, "{}: label {bad} is out of range for {} classes", lpath.display(), classes.len());
        }

        let (ipath, igz) = find(dir, &format!("{split}-images-idx3-ubyte"))?;
        let (pixels, idims) = if igz {
            let bytes = gunzip(&ipath)?;
            let dims = check_header(&ipath, &bytes, IMAGES_MAGIC, 3, bytes.len() as u64)?;
            (Pixels::Memory(bytes), dims)
        } else {
            let mut file =
                File::open(&ipath).map_err(|e| err!(Io, "cannot open {}: {e}", ipath.display()))?;
            let len = file.metadata().map_err(|e| err!(Io, "cannot stat {}: {e}", ipath.display()))?.len();
            let mut header = Vec::with_capacity(16);
            (&mut file)
                .take(16)
                .read_to_end(&mut header)
                .map_err(|e| err!(Io, "cannot read {}: {e}", ipath.display()))?;
            let dims = check_header(&ipath, &header, IMAGES_MAGIC, 3, len)?;
            (Pixels::File { file: Mutex::new(file), path: ipath.clone() }, dims)
        };
        if idims[0] != labels.len() {
            bail!(
                Io,
                "{name}: {} holds {} images but {} holds {} labels",
                ipath.display(),
                idims[0],
                lpath.display(),
                labels.len()
            );
        }
        Ok(Idx { name, pixels, labels, rows: idims[1], cols: idims[2], classes, transform: None })
    }

    fn get(&self, index: usize) -> Result<Sample> {
        let Some(&label) = self.labels.get(index) else {
            bail!(Index, "{}: index {index} is out of range for {} samples", self.name, self.labels.len());
        };
        let n = self.rows * self.cols;
        let start = 16 + index * n;
        let pixels = match &self.pixels {
            Pixels::Memory(b) => b[start..start + n].to_vec(),
            Pixels::File { file, path } => {
                let mut buf = vec![0u8; n];
                let mut f = file.lock().map_err(|_| err!(Io, "{}: file lock poisoned", path.display()))?;
                f.seek(SeekFrom::Start(start as u64))
                    .and_then(|_| f.read_exact(&mut buf))
                    .map_err(|e| err!(Io, "{}: cannot read image {index}: {e}", path.display()))?;
                buf
            }
        };
        super::sample(Image::new(self.rows, self.cols, 1, pixels)?, &self.transform, label as i64)
    }
}

const MNIST_CLASSES: &[&str] = &[
    "0 - zero",
    "1 - one",
    "2 - two",
    "3 - three",
    "4 - four",
    "5 - five",
    "6 - six",
    "7 - seven",
    "8 - eight",
    "9 - nine",
];

const FASHION_CLASSES: &[&str] = &[
    "T-shirt/top",
    "Trouser",
    "Pullover",
    "Dress",
    "Coat",
    "Sandal",
    "Shirt",
    "Sneaker",
    "Bag",
    "Ankle boot",
];

macro_rules! idx_dataset {
    ($(#[$doc:meta])* $ty:ident, $name:literal, $classes:expr) => {
        $(#[$doc])*
        #[allow(clippy::upper_case_acronyms)]
        pub struct $ty(Idx);

        impl $ty {
            /// Opens the train (`train = true`) or test IDX files in `dir`. Errors name the file
            /// when one is missing, is not gzip, has the wrong magic number or the wrong size,
            /// or when the image and label counts differ.
            pub fn new(dir: impl AsRef<Path>, train: bool) -> Result<$ty> {
                Idx::open($name, $classes, dir.as_ref(), train).map($ty)
            }

            /// Applies `t` to each image when it is read (`transform=`).
            pub fn with_transform(mut self, t: impl Transform + 'static) -> $ty {
                self.0.transform = Some(Arc::new(t));
                self
            }

            /// The class names, as torchvision has them.
            pub fn classes(&self) -> Vec<String> {
                self.0.classes.iter().map(|c| c.to_string()).collect()
            }

            /// Every label, in sample order (`.targets`).
            pub fn targets(&self) -> Vec<i64> {
                self.0.labels.iter().map(|&l| l as i64).collect()
            }
        }

        impl Dataset for $ty {
            fn len(&self) -> usize {
                self.0.labels.len()
            }

            fn get(&self, index: usize) -> Result<Sample> {
                self.0.get(index)
            }
        }
    };
}

idx_dataset!(
    /// The MNIST handwritten digits: each image is a 28 x 28 [`Image`] of mode `"L"` handed to
    /// the transform (without one, the sample is its `[1, 28, 28]` u8 tensor), with its label
    /// 0..9. See the module docs for the files read.
    ///
    /// ```no_run
    /// use pyrite::data::Dataset;
    /// use pyrite::vision::datasets::MNIST;
    /// use pyrite::vision::transforms::{Compose, Normalize, ToTensor};
    /// // transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.1307,), (0.3081,))])
    /// let t = Compose(vec![
    ///     Box::new(ToTensor),
    ///     Box::new(Normalize { mean: vec![0.1307], std: vec![0.3081], ..Default::default() }),
    /// ]);
    /// let train = MNIST::new("data/MNIST/raw", true)?.with_transform(t);
    /// assert_eq!(train.len(), 60000);
    /// assert_eq!(train.get(0)?.item(0)?.as_tensor()?.dims(), &[1, 28, 28]);
    /// # Ok::<(), pyrite::Error>(())
    /// ```
    MNIST,
    "MNIST",
    MNIST_CLASSES
);

idx_dataset!(
    /// Fashion-MNIST (Zalando): the same files and layout as [`MNIST`], ten clothing classes.
    FashionMNIST,
    "FashionMNIST",
    FASHION_CLASSES
);
