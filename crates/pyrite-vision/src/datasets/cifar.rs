//! `torchvision.datasets.CIFAR10`, read from the binary version of the data set (the
//! `cifar-10-batches-bin` folder): `data_batch_1.bin` .. `data_batch_5.bin` (train) and
//! `test_batch.bin` (test). Each record is one label byte then 3072 pixel bytes (`[3, 32, 32]`,
//! channel-major). Only the file sizes are read at construction; each `get` seeks to its record
//! and reads it.

use crate::transforms::Transform;
use crate::Image;
use pyrite_core::{bail, err, Result};
use pyrite_data::{Dataset, Sample};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

const RECORD: u64 = 1 + 3 * 32 * 32;

const CLASSES: &[&str] =
    &["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"];

/// CIFAR-10: each image is a 32 x 32 RGB [`Image`] handed to the transform (without one, the
/// sample is its `[3, 32, 32]` u8 tensor), with its label 0..9.
///
/// ```no_run
/// use pyrite::data::Dataset;
/// use pyrite::vision::datasets::CIFAR10;
/// let test = CIFAR10::new("data/cifar-10-batches-bin", false)?;
/// assert_eq!(test.len(), 10000);
/// # Ok::<(), pyrite::Error>(())
/// ```
#[allow(clippy::upper_case_acronyms)]
pub struct CIFAR10 {
    /// Each batch file, its path and its number of records.
    files: Vec<(Mutex<File>, PathBuf, usize)>,
    len: usize,
    transform: Option<Arc<dyn Transform>>,
}

impl CIFAR10 {
    /// Opens the train (`train = true`) or test batch files in `dir`. Errors name the file when
    /// one is missing or its size is not a whole number of 3073-byte records.
    pub fn new(dir: impl AsRef<Path>, train: bool) -> Result<CIFAR10> {
        let dir = dir.as_ref();
        let names: Vec<String> = if train {
            (1..=5).map(|i| format!("data_batch_{i}.bin")).collect()
        } else {
            vec!["test_batch.bin".to_string()]
        };
        let mut files = Vec::new();
        let mut len = 0;
        for name in names {
            let path = dir.join(name);
            let file =
                File::open(&path).map_err(|e| err!(Io, "CIFAR10: cannot open {}: {e}", path.display()))?;
            let size =
                file.metadata().map_err(|e| err!(Io, "CIFAR10: cannot stat {}: {e}", path.display()))?.len();
            if size == 0 || !size.is_multiple_of(RECORD) {
                bail!(
                    Io,
                    "CIFAR10: {} has {size} bytes, expected a positive multiple of {RECORD} (1 label byte + 3072 pixel bytes per record)",
                    path.display()
                );
            }
            let n = (size / RECORD) as usize;
            len += n;
            files.push((Mutex::new(file), path, n));
        }
        Ok(CIFAR10 { files, len, transform: None })
    }

    /// Applies `t` to each image when it is read (`transform=`).
    pub fn with_transform(mut self, t: impl Transform + 'static) -> CIFAR10 {
        self.transform = Some(Arc::new(t));
        self
    }

    /// The class names, as torchvision has them.
    pub fn classes(&self) -> Vec<String> {
        CLASSES.iter().map(|c| c.to_string()).collect()
    }
}

impl Dataset for CIFAR10 {
    fn len(&self) -> usize {
        self.len
    }

    fn get(&self, index: usize) -> Result<Sample> {
        let mut i = index;
        let Some((file, path, _)) = self.files.iter().find(|f| {
            let here = i < f.2;
            if !here {
                i -= f.2;
            }
            here
        }) else {
            bail!(Index, "CIFAR10: index {index} is out of range for {} samples", self.len);
        };
        let mut buf = vec![0u8; RECORD as usize];
        {
            let mut f =
                file.lock().map_err(|_| err!(Io, "CIFAR10: {}: file lock poisoned", path.display()))?;
            f.seek(SeekFrom::Start(i as u64 * RECORD))
                .and_then(|_| f.read_exact(&mut buf))
                .map_err(|e| err!(Io, "CIFAR10: {}: cannot read record {i}: {e}", path.display()))?;
        }
        let label = buf[0];
        if label as usize >= CLASSES.len() {
            bail!(Io, "CIFAR10: {}: record {i} has label {label}, expected 0..9", path.display());
        }
        // the record is channel-major ([3, 32, 32]); the image is [32, 32, 3] (torchvision's
        // `reshape(-1, 3, 32, 32).transpose((0, 2, 3, 1))`)
        let px = &buf[1..];
        let hwc: Vec<u8> = (0..32 * 32).flat_map(|p| [px[p], px[1024 + p], px[2048 + p]]).collect();
        super::sample(Image::new(32, 32, 3, hwc)?, &self.transform, label as i64)
    }
}
