//! [`NpyDataset`]: a `.npy` file memory-mapped, its first axis indexing the samples. Only the
//! header is parsed at construction; `get(i)` copies the `i`-th slice out of the mapping.

use crate::{Dataset, Sample};
use memmap2::Mmap;
use pyrite_core::{bail, err, DType, Result, Tensor};
use std::fs::File;
use std::path::{Path, PathBuf};

/// A memory-mapped `.npy` array (versions 1.0 to 3.0, little-endian, C order; dtypes f16, f32,
/// f64, i32, i64, u8 and bool). `get(i)` returns `Sample::Tensor(x[i])` with the file's dtype and
/// the shape of the array without its first axis; [`NpyDataset::pair`] returns
/// `Sample::Tuple([x[i], y[i]])` from two files of the same length.
///
/// ```
/// use pyrite::data::{Dataset, NpyDataset};
/// use pyrite::{DType, Tensor};
/// let path = std::env::temp_dir().join(format!("pyrite-npy-doc-{}.npy", std::process::id()));
/// Tensor::arange(0., 6., 1., DType::F32)?.reshape([3, 2])?.save_npy(&path)?;
/// let ds = NpyDataset::new(&path)?;
/// assert_eq!(ds.len(), 3);
/// assert_eq!(ds.get(2)?.as_tensor()?.to_vec::<f32>()?, [4.0, 5.0]);
/// # std::fs::remove_file(&path)?;
/// # Ok::<(), pyrite::Error>(())
/// ```
pub struct NpyDataset {
    x: NpyArray,
    y: Option<NpyArray>,
}

struct NpyArray {
    path: PathBuf,
    map: Mmap,
    data_start: usize,
    dtype: DType,
    shape: Vec<usize>,
    /// Bytes per sample.
    stride: usize,
}

/// The `(descr, fortran_order, shape)` of a `.npy` header dict, by pyrite-core's parser.
fn parse_header(path: &Path, h: &str) -> Result<(String, bool, Vec<usize>)> {
    let (descr, fortran, shape) = pyrite_core::npy::parse_header(h.as_bytes())
        .map_err(|e| err!(Value, "NpyDataset: {}: {e}", path.display()))?;
    Ok((descr, fortran, shape.into_iter().map(|d| d as usize).collect()))
}

impl NpyArray {
    fn open(path: &Path) -> Result<NpyArray> {
        let p = path.display();
        let file = File::open(path).map_err(|e| err!(Io, "NpyDataset: cannot open {p}: {e}"))?;
        // SAFETY: the mapping is read-only; like every memory-mapped reader, it assumes the file
        // is not truncated or rewritten by another process while the dataset is alive.
        let map = unsafe { Mmap::map(&file) }.map_err(|e| err!(Io, "NpyDataset: cannot map {p}: {e}"))?;
        if map.len() < 10 || &map[..6] != b"\x93NUMPY" {
            bail!(Value, "NpyDataset: {p} is not a .npy file (missing the \\x93NUMPY magic)");
        }
        let (hlen, start) = match map[6] {
            1 => (u16::from_le_bytes([map[8], map[9]]) as usize, 10),
            2 | 3 if map.len() >= 12 => (u32::from_le_bytes([map[8], map[9], map[10], map[11]]) as usize, 12),
            v => bail!(Value, "NpyDataset: {p}: unsupported .npy version {v}.{} or truncated header", map[7]),
        };
        let data_start = start + hlen;
        if data_start > map.len() {
            bail!(
                Value,
                "NpyDataset: {p}: truncated header: expected {data_start} bytes, found {}",
                map.len()
            );
        }
        let header = std::str::from_utf8(&map[start..data_start])
            .map_err(|_| err!(Value, "NpyDataset: {p}: header is not text"))?;
        let (descr, fortran, shape) = parse_header(path, header)?;
        let dtype = match descr.as_str() {
            "|b1" => DType::Bool,
            "|u1" | "<u1" => DType::U8,
            "<i4" => DType::I32,
            "<i8" => DType::I64,
            "<f2" => DType::F16,
            "<f4" => DType::F32,
            "<f8" => DType::F64,
            d if d.starts_with('>') => {
                bail!(
                    DType,
                    "NpyDataset: {p}: big-endian dtype '{d}' is not supported; save it little-endian"
                )
            }
            d => bail!(
                DType,
                "NpyDataset: {p}: unsupported dtype '{d}' (supported: <f2 <f4 <f8 <i4 <i8 |u1 |b1)"
            ),
        };
        if fortran && shape.len() > 1 {
            bail!(Value, "NpyDataset: {p}: Fortran-order arrays are not supported; save it in C order");
        }
        if shape.is_empty() {
            bail!(Shape, "NpyDataset: {p}: a 0-d array has no first axis to index samples");
        }
        let stride = shape[1..]
            .iter()
            .try_fold(dtype.size_in_bytes(), |a, &d| a.checked_mul(d))
            .ok_or_else(|| err!(Value, "NpyDataset: {p}: shape {shape:?} is too large"))?;
        let need = stride
            .checked_mul(shape[0])
            .ok_or_else(|| err!(Value, "NpyDataset: {p}: shape {shape:?} is too large"))?;
        let found = map.len() - data_start;
        if found != need {
            bail!(
                Value,
                "NpyDataset: {p}: data of shape {shape:?} {dtype} needs {need} bytes, found {found}{}",
                if found < need { " (truncated)" } else { "" }
            );
        }
        Ok(NpyArray { path: path.to_path_buf(), map, data_start, dtype, shape, stride })
    }

    fn get(&self, index: usize) -> Result<Tensor> {
        if index >= self.shape[0] {
            bail!(Index, "NpyDataset: index {index} is out of range for {} samples", self.shape[0]);
        }
        let at = self.data_start + index * self.stride;
        Tensor::from_raw_bytes(&self.map[at..at + self.stride], self.shape[1..].to_vec(), self.dtype)
    }
}

impl NpyDataset {
    /// Maps `path`. Errors name the file when it is not a `.npy`, is truncated, is big-endian or
    /// Fortran-ordered, or has an unsupported dtype.
    pub fn new(path: impl AsRef<Path>) -> Result<NpyDataset> {
        Ok(NpyDataset { x: NpyArray::open(path.as_ref())?, y: None })
    }

    /// Inputs and targets from two files whose first axes have the same length.
    pub fn pair(x_path: impl AsRef<Path>, y_path: impl AsRef<Path>) -> Result<NpyDataset> {
        let (x, y) = (NpyArray::open(x_path.as_ref())?, NpyArray::open(y_path.as_ref())?);
        if x.shape[0] != y.shape[0] {
            bail!(
                Shape,
                "NpyDataset::pair: {} has {} samples but {} has {}",
                x.path.display(),
                x.shape[0],
                y.path.display(),
                y.shape[0]
            );
        }
        Ok(NpyDataset { x, y: Some(y) })
    }

    /// The dtype of the (first) file.
    pub fn dtype(&self) -> DType {
        self.x.dtype
    }

    /// The shape of the whole (first) array.
    pub fn shape(&self) -> &[usize] {
        &self.x.shape
    }
}

impl Dataset for NpyDataset {
    fn len(&self) -> usize {
        self.x.shape[0]
    }

    fn get(&self, index: usize) -> Result<Sample> {
        let x = self.x.get(index)?;
        Ok(match &self.y {
            None => Sample::Tensor(x),
            Some(y) => Sample::Tuple(vec![Sample::Tensor(x), Sample::Tensor(y.get(index)?)]),
        })
    }
}
