//! NumPy's `.npy` files: [`Tensor::save_npy`], [`Tensor::load_npy`], and the in-memory
//! [`Tensor::write_npy`] / [`Tensor::read_npy`].
//!
//! Writing produces format version 1.0 (2.0 when the header is too long for 1.0) byte for
//! byte as `numpy.save` does, in C order. Reading accepts versions 1.0, 2.0 and 3.0, C and
//! Fortran order, little- and big-endian data, and the dtypes `f2 f4 f8 i4 i8 u1 b1`
//! (`float16 float32 float64 int32 int64 uint8 bool`). bfloat16 has no NumPy dtype and is
//! refused with a clear error. Malformed files give an `Err`, never a panic.
//!
//! ```
//! use pyrite_core::Tensor;
//! let t = Tensor::new([[1f32, 2.], [3., 4.]])?;
//! let mut bytes = Vec::new();
//! t.write_npy(&mut bytes)?;
//! assert_eq!(&bytes[..6], b"\x93NUMPY");
//! let back = Tensor::read_npy(&bytes)?;
//! assert_eq!(back.to_vec2::<f32>()?, vec![vec![1., 2.], vec![3., 4.]]);
//! # Ok::<(), pyrite_core::Error>(())
//! ```

use crate::shape::Shape;
use crate::{bail, err, DType, Result, Tensor};
use std::io::Write;
use std::path::Path;

const MAGIC: &[u8; 6] = b"\x93NUMPY";
/// numpy's `ARRAY_ALIGN`: the data starts at a multiple of this.
const ARRAY_ALIGN: usize = 64;
/// numpy's `GROWTH_AXIS_MAX_DIGITS`: spare header room so the shape can grow in place.
const GROWTH_AXIS_MAX_DIGITS: usize = 21;

/// The NumPy `descr` of a dtype, or an error for bfloat16.
fn descr_of(dtype: DType) -> Result<&'static str> {
    Ok(match dtype {
        DType::Bool => "|b1",
        DType::U8 => "|u1",
        DType::I32 => "<i4",
        DType::I64 => "<i8",
        DType::F16 => "<f2",
        DType::F32 => "<f4",
        DType::F64 => "<f8",
        DType::BF16 => {
            bail!(DType, "npy: torch.bfloat16 has no NumPy dtype; convert first, e.g. t.to_dtype(DType::F32)")
        }
    })
}

/// Parses a `descr` string: the dtype and whether the data is big-endian.
fn parse_descr(d: &str) -> Result<(DType, bool)> {
    let bad = || {
        err!(DType, "npy: unsupported dtype descr '{d}' (supported: <f2 <f4 <f8 <i4 <i8 |u1 |b1, or big-endian '>' forms)")
    };
    let mut chars = d.chars();
    let order = chars.next().ok_or_else(bad)?;
    let code = chars.as_str();
    let dtype = match code {
        "b1" => DType::Bool,
        "u1" => DType::U8,
        "i4" => DType::I32,
        "i8" => DType::I64,
        "f2" => DType::F16,
        "f4" => DType::F32,
        "f8" => DType::F64,
        _ => return Err(bad()),
    };
    let big = match order {
        '<' | '=' => false,
        '|' => {
            if dtype.size_in_bytes() != 1 {
                return Err(bad());
            }
            false
        }
        '>' => true,
        _ => return Err(bad()),
    };
    Ok((dtype, big))
}

/// numpy's header for an array: the dict literal, growth room, padding to 64 and a newline,
/// preceded by the magic, the version and the header length.
fn header_bytes(dtype: DType, dims: &[usize]) -> Result<Vec<u8>> {
    let shape = match dims {
        [] => "()".to_string(),
        [d] => format!("({d},)"),
        _ => format!("({})", dims.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(", ")),
    };
    let mut h = format!("{{'descr': '{}', 'fortran_order': False, 'shape': {shape}, }}", descr_of(dtype)?);
    if let Some(d0) = dims.first() {
        h.push_str(&" ".repeat(GROWTH_AXIS_MAX_DIGITS.saturating_sub(d0.to_string().len())));
    }
    let hlen = h.len() + 1; // the newline
    for (major, len_size) in [(1u8, 2usize), (2, 4)] {
        let pad = ARRAY_ALIGN - (MAGIC.len() + 2 + len_size + hlen) % ARRAY_ALIGN;
        let total = hlen + pad;
        if len_size == 2 && total > u16::MAX as usize {
            continue;
        }
        let mut out = Vec::with_capacity(MAGIC.len() + 2 + len_size + total);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&[major, 0]);
        if len_size == 2 {
            out.extend_from_slice(&(total as u16).to_le_bytes());
        } else {
            out.extend_from_slice(&(total as u32).to_le_bytes());
        }
        out.extend_from_slice(h.as_bytes());
        out.extend(std::iter::repeat_n(b' ', pad));
        out.push(b'\n');
        return Ok(out);
    }
    bail!(Value, "npy: header of {hlen} bytes is too long")
}

// ---------------------------------------------------------------- header parsing (no panics)

/// A value in the header's Python dict literal.
#[derive(Debug, PartialEq)]
enum PyVal {
    Str(String),
    Bool(bool),
    Tuple(Vec<u64>),
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn ws(&mut self) {
        while self.i < self.s.len() && self.s[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
    }
    fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.s.get(self.i).copied()
    }
    fn eat(&mut self, c: u8) -> bool {
        if self.peek() == Some(c) {
            self.i += 1;
            true
        } else {
            false
        }
    }
    fn expect(&mut self, c: u8) -> Result<()> {
        if self.eat(c) {
            Ok(())
        } else {
            bail!(Value, "npy: malformed header: expected '{}' at byte {}", c as char, self.i)
        }
    }
    fn string(&mut self) -> Result<String> {
        let q = match self.peek() {
            Some(q @ (b'\'' | b'"')) => q,
            _ => bail!(Value, "npy: malformed header: expected a string at byte {}", self.i),
        };
        self.i += 1;
        let start = self.i;
        while self.i < self.s.len() && self.s[self.i] != q {
            if self.s[self.i] == b'\\' {
                self.i += 1;
            }
            self.i += 1;
        }
        if self.i >= self.s.len() {
            bail!(Value, "npy: malformed header: unterminated string");
        }
        let v = String::from_utf8_lossy(&self.s[start..self.i]).into_owned();
        self.i += 1;
        Ok(v)
    }
    fn int(&mut self) -> Result<u64> {
        self.ws();
        let start = self.i;
        while self.i < self.s.len() && self.s[self.i].is_ascii_digit() {
            self.i += 1;
        }
        let digits = std::str::from_utf8(&self.s[start..self.i]).unwrap_or("");
        let v = digits
            .parse::<u64>()
            .map_err(|_| err!(Value, "npy: malformed header: bad dimension at byte {start}"))?;
        // Python 2 wrote long integers with an L suffix.
        if self.s.get(self.i) == Some(&b'L') {
            self.i += 1;
        }
        Ok(v)
    }
    fn value(&mut self) -> Result<PyVal> {
        match self.peek() {
            Some(b'\'' | b'"') => Ok(PyVal::Str(self.string()?)),
            Some(b'(') => {
                self.i += 1;
                let mut v = Vec::new();
                loop {
                    if self.eat(b')') {
                        break;
                    }
                    v.push(self.int()?);
                    if !self.eat(b',') {
                        self.expect(b')')?;
                        break;
                    }
                }
                Ok(PyVal::Tuple(v))
            }
            Some(b'[') => {
                bail!(DType, "npy: structured dtypes (a list of fields as descr) are not supported")
            }
            Some(b'T') if self.s[self.i..].starts_with(b"True") => {
                self.i += 4;
                Ok(PyVal::Bool(true))
            }
            Some(b'F') if self.s[self.i..].starts_with(b"False") => {
                self.i += 5;
                Ok(PyVal::Bool(false))
            }
            _ => bail!(Value, "npy: malformed header: unexpected value at byte {}", self.i),
        }
    }
}

/// Parses a `.npy` header dict (the text after the magic and the header length, e.g.
/// `{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2), }`) into
/// `(descr, fortran_order, shape)`. Readers of `.npy` files other than `Tensor::load_npy` use it too
/// (`pyrite::data::NpyDataset` memory-maps the data that follows).
pub fn parse_header(h: &[u8]) -> Result<(String, bool, Vec<u64>)> {
    let mut p = Parser { s: h, i: 0 };
    p.expect(b'{')?;
    let (mut descr, mut fortran, mut shape) = (None, None, None);
    loop {
        if p.eat(b'}') {
            break;
        }
        let key = p.string()?;
        p.expect(b':')?;
        let v = p.value()?;
        match (key.as_str(), v) {
            ("descr", PyVal::Str(s)) => descr = Some(s),
            ("descr", _) => bail!(DType, "npy: structured or non-string dtype descr is not supported"),
            ("fortran_order", PyVal::Bool(b)) => fortran = Some(b),
            ("shape", PyVal::Tuple(t)) => shape = Some(t),
            ("fortran_order" | "shape", _) => {
                bail!(Value, "npy: malformed header: bad value for '{key}'")
            }
            _ => bail!(Value, "npy: malformed header: unexpected key '{key}'"),
        }
        if !p.eat(b',') {
            p.expect(b'}')?;
            break;
        }
    }
    p.ws();
    if p.i != h.len() {
        bail!(Value, "npy: malformed header: trailing characters after the dict");
    }
    match (descr, fortran, shape) {
        (Some(d), Some(f), Some(s)) => Ok((d, f, s)),
        _ => bail!(Value, "npy: malformed header: 'descr', 'fortran_order' and 'shape' are all required"),
    }
}

impl Tensor {
    /// Writes this tensor as a `.npy` file to `w`, exactly as `numpy.save` would (version 1.0,
    /// C order). Errors for bfloat16, which NumPy lacks.
    pub fn write_npy<W: Write>(&self, mut w: W) -> Result<()> {
        let header = header_bytes(self.dtype(), self.dims())?;
        let data = self.to_raw_bytes()?;
        w.write_all(&header)?;
        w.write_all(&data)?;
        w.flush()?;
        Ok(())
    }

    /// Reads a tensor from the bytes of a `.npy` file (versions 1.0, 2.0, 3.0; C or Fortran
    /// order; little- or big-endian). The result is contiguous.
    pub fn read_npy(bytes: &[u8]) -> Result<Tensor> {
        if bytes.len() < 10 || &bytes[..6] != MAGIC {
            bail!(Value, "npy: not a .npy file (missing the \\x93NUMPY magic)");
        }
        let (major, minor) = (bytes[6], bytes[7]);
        let (hlen, start) = match (major, minor) {
            (1, 0) => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10usize),
            (2, 0) | (3, 0) => {
                if bytes.len() < 12 {
                    bail!(Value, "npy: file truncated in the header");
                }
                (u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize, 12)
            }
            _ => bail!(Value, "npy: unsupported format version {major}.{minor} (supported: 1.0, 2.0, 3.0)"),
        };
        let data_start = start
            .checked_add(hlen)
            .filter(|&e| e <= bytes.len())
            .ok_or_else(|| err!(Value, "npy: file truncated in the header"))?;
        let header = &bytes[start..data_start];
        if major < 3 && !header.is_ascii() {
            bail!(Value, "npy: header of a version {major}.0 file must be ASCII");
        }
        if major == 3 && std::str::from_utf8(header).is_err() {
            bail!(Value, "npy: header of a version 3.0 file must be UTF-8");
        }
        let (descr, fortran, shape) = parse_header(header)?;
        let (dtype, big) = parse_descr(&descr)?;
        let dims: Vec<usize> = shape
            .iter()
            .map(|&d| usize::try_from(d).map_err(|_| err!(Value, "npy: dimension {d} is too large")))
            .collect::<Result<_>>()?;
        let numel = dims
            .iter()
            .try_fold(1usize, |a, &d| a.checked_mul(d))
            .ok_or_else(|| err!(Value, "npy: shape {shape:?} has too many elements"))?;
        let nbytes = numel
            .checked_mul(dtype.size_in_bytes())
            .ok_or_else(|| err!(Value, "npy: shape {shape:?} has too many elements"))?;
        let data = &bytes[data_start..];
        if data.len() != nbytes {
            bail!(
                Value,
                "npy: shape {shape:?} of {descr} needs {nbytes} data bytes, but the file has {}",
                data.len()
            );
        }
        let swapped;
        let data = if big && dtype.size_in_bytes() > 1 {
            let sz = dtype.size_in_bytes();
            let mut v = data.to_vec();
            v.chunks_exact_mut(sz).for_each(|c| c.reverse());
            swapped = v;
            &swapped[..]
        } else {
            data
        };
        if fortran && dims.len() > 1 {
            // Column-major data is the row-major data of the reversed shape, transposed.
            let rev: Vec<usize> = dims.iter().rev().copied().collect();
            let perm: Vec<isize> = (0..dims.len() as isize).rev().collect();
            Tensor::from_raw_bytes(data, Shape::from(rev), dtype)?.permute(&perm)?.contiguous()
        } else {
            Tensor::from_raw_bytes(data, Shape::from(dims), dtype)
        }
    }

    /// Saves this tensor to a `.npy` file (`numpy.save(path, t.numpy())`). The data goes to a
    /// temporary file in the same directory first, which is then renamed over `path`, so a
    /// crash never leaves a half-written file.
    ///
    /// ```
    /// use pyrite_core::Tensor;
    /// let path = std::env::temp_dir().join(format!("pyrite_doc_{}.npy", std::process::id()));
    /// let t = Tensor::new([1i64, 2, 3])?;
    /// t.save_npy(&path)?;
    /// assert_eq!(Tensor::load_npy(&path)?.to_vec::<i64>()?, vec![1, 2, 3]);
    /// std::fs::remove_file(&path).unwrap();
    /// # Ok::<(), pyrite_core::Error>(())
    /// ```
    pub fn save_npy(&self, path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        let header = header_bytes(self.dtype(), self.dims())?; // fail before touching the disk
        let data = self.to_raw_bytes()?;
        write_atomically(path, &[&header, &data])
            .map_err(|e| err!(Io, "save_npy: cannot write {}: {e}", path.display()))
    }

    /// Loads a `.npy` file (`torch.from_numpy(numpy.load(path))`); see [`Tensor::read_npy`].
    pub fn load_npy(path: impl AsRef<Path>) -> Result<Tensor> {
        let path = path.as_ref();
        let bytes =
            std::fs::read(path).map_err(|e| err!(Io, "load_npy: cannot read {}: {e}", path.display()))?;
        Tensor::read_npy(&bytes)
            .map_err(|e| crate::Error::new(e.kind(), format!("{} ({})", e.message(), path.display())))
    }
}

/// Writes `parts` to a fresh temporary file next to `path`, syncs it, and renames it over
/// `path`; the temporary file is removed on failure.
fn write_atomically(path: &Path, parts: &[&[u8]]) -> std::io::Result<()> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let name = path
        .file_name()
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidInput, "the path has no file name"))?;
    let tmp_name = format!(
        ".{}.{}.{}.tmp",
        name.to_string_lossy(),
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    );
    let tmp = path.with_file_name(tmp_name);
    let result = (|| {
        let mut f = std::fs::OpenOptions::new().write(true).create_new(true).open(&tmp)?;
        for p in parts {
            f.write_all(p)?;
        }
        f.sync_all()?;
        drop(f);
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_matches_numpy_layout() {
        let h = header_bytes(DType::F32, &[2, 3]).unwrap();
        assert_eq!(h.len(), 128);
        assert_eq!(&h[..10], b"\x93NUMPY\x01\x00v\x00");
        assert!(h[10..].starts_with(b"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"));
        assert_eq!(*h.last().unwrap(), b'\n');
        assert_eq!(header_bytes(DType::F64, &[]).unwrap().len(), 128);
    }

    #[test]
    fn parser_rejects_garbage_without_panicking() {
        for h in [
            &b""[..],
            b"{",
            b"{'descr'",
            b"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } x",
            b"{'descr': '<f4', 'fortran_order': Fals, 'shape': (2,), }",
            b"{'descr': '<f4', 'fortran_order': False, 'shape': (2,3,, }",
            b"{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }",
            b"{'descr': '<f4', 'fortran_order': False}",
            b"{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (), }",
        ] {
            assert!(parse_header(h).is_err(), "{}", String::from_utf8_lossy(h));
        }
        let (d, f, s) =
            parse_header(b"{'descr': '<f4', 'fortran_order': True, 'shape': (2L, 3L), }  ").unwrap();
        assert_eq!((d.as_str(), f, s), ("<f4", true, vec![2, 3]));
    }
}
