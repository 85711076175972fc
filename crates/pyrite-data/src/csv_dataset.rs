//! [`CsvDataset`]: rows of numbers in a delimited text file, one sample per row, one column the
//! integer label. Construction reads the file once to index where each row starts (no values are
//! kept); each `get` seeks to its row and parses it.

use crate::{Dataset, Sample};
use pyrite_core::{bail, err, Result, Tensor};
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// How a [`CsvDataset`] reads its file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CsvOptions {
    /// The label's column; negative counts from the end (default `-1`, the last column).
    pub label_column: isize,
    /// Whether the first line is a header to skip (default `false`).
    pub has_header: bool,
    /// The field separator (default `b','`).
    pub delimiter: u8,
}

impl Default for CsvOptions {
    fn default() -> Self {
        CsvOptions { label_column: -1, has_header: false, delimiter: b',' }
    }
}

/// A CSV file of numbers: `get(i)` returns `Sample::Tuple([features, Int(label)])` for the
/// `i`-th data row, the features an f32 tensor `[n]` of every other column in order. Blank lines
/// are skipped. Every row must have as many columns as the first one.
///
/// ```
/// use pyrite::data::{CsvDataset, Dataset};
/// let path = std::env::temp_dir().join(format!("pyrite-csv-doc-{}.csv", std::process::id()));
/// std::fs::write(&path, "1.5,2,0\n3,4.25,1\n")?;
/// let ds = CsvDataset::new(&path)?;
/// let s = ds.get(1)?;
/// assert_eq!(s.item(0)?.as_tensor()?.to_vec::<f32>()?, [3.0, 4.25]);
/// assert_eq!(s.item(1)?.as_int()?, 1);
/// # std::fs::remove_file(&path)?;
/// # Ok::<(), pyrite::Error>(())
/// ```
pub struct CsvDataset {
    path: PathBuf,
    file: Mutex<File>,
    /// Each data row: byte offset, byte length, 1-based line number.
    rows: Vec<(u64, usize, usize)>,
    columns: usize,
    label: usize,
    delimiter: u8,
}

impl CsvDataset {
    /// Reads `path` with the default options (no header, `,`, label last).
    pub fn new(path: impl AsRef<Path>) -> Result<CsvDataset> {
        CsvDataset::with_options(path, CsvOptions::default())
    }

    /// Reads `path` with `options`. Errors when the file cannot be read, has no data row, or
    /// when the label column is out of range for the first row.
    pub fn with_options(path: impl AsRef<Path>, options: CsvOptions) -> Result<CsvDataset> {
        let path = path.as_ref().to_path_buf();
        let file =
            File::open(&path).map_err(|e| err!(Io, "CsvDataset: cannot open {}: {e}", path.display()))?;
        let mut reader = BufReader::new(&file);
        let mut rows = Vec::new();
        let mut first = None;
        let (mut offset, mut line_no, mut line) = (0u64, 0usize, Vec::new());
        loop {
            line.clear();
            let n = reader
                .read_until(b'\n', &mut line)
                .map_err(|e| err!(Io, "CsvDataset: cannot read {}: {e}", path.display()))?;
            if n == 0 {
                break;
            }
            line_no += 1;
            let content = trim_eol(&line);
            let is_header = line_no == 1 && options.has_header;
            let is_blank = content.iter().all(u8::is_ascii_whitespace);
            if !is_header && !is_blank {
                if first.is_none() {
                    first = Some(content.split(|&b| b == options.delimiter).count());
                }
                rows.push((offset, content.len(), line_no));
            }
            offset += n as u64;
        }
        let Some(columns) = first else {
            bail!(Io, "CsvDataset: {} has no data row", path.display());
        };
        let label = if options.label_column < 0 {
            columns as isize + options.label_column
        } else {
            options.label_column
        };
        if label < 0 || label as usize >= columns {
            bail!(
                Index,
                "CsvDataset: {}: label_column {} is out of range for {columns} columns (line {})",
                path.display(),
                options.label_column,
                rows[0].2
            );
        }
        Ok(CsvDataset {
            path,
            file: Mutex::new(file),
            rows,
            columns,
            label: label as usize,
            delimiter: options.delimiter,
        })
    }

    /// The number of feature columns (all columns but the label).
    pub fn num_features(&self) -> usize {
        self.columns - 1
    }
}

fn trim_eol(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    line.strip_suffix(b"\r").unwrap_or(line)
}

impl Dataset for CsvDataset {
    fn len(&self) -> usize {
        self.rows.len()
    }

    fn get(&self, index: usize) -> Result<Sample> {
        let Some(&(offset, len, line_no)) = self.rows.get(index) else {
            bail!(Index, "CsvDataset: index {index} is out of range for {} rows", self.rows.len());
        };
        let p = self.path.display();
        let mut buf = vec![0u8; len];
        {
            let mut f = self.file.lock().map_err(|_| err!(Io, "CsvDataset: {p}: file lock poisoned"))?;
            f.seek(SeekFrom::Start(offset))
                .and_then(|_| f.read_exact(&mut buf))
                .map_err(|e| err!(Io, "CsvDataset: {p}: cannot read line {line_no}: {e}"))?;
        }
        let fields: Vec<&[u8]> = buf.split(|&b| b == self.delimiter).collect();
        if fields.len() != self.columns {
            bail!(
                Value,
                "CsvDataset: {p}: line {line_no} has {} columns, expected {}",
                fields.len(),
                self.columns
            );
        }
        let mut features = Vec::with_capacity(self.columns - 1);
        let mut label = 0i64;
        for (col, field) in fields.iter().enumerate() {
            let text = std::str::from_utf8(field).unwrap_or("").trim();
            let bad = |what: &str| {
                err!(
                    Value,
                    "CsvDataset: {p}: line {line_no}, column {}: expected {what}, found '{}'",
                    col + 1,
                    String::from_utf8_lossy(field).trim()
                )
            };
            if col == self.label {
                label = match text.parse::<i64>() {
                    Ok(v) => v,
                    Err(_) => match text.parse::<f64>() {
                        Ok(v) if v.fract() == 0.0 && v.abs() < 9.0e15 => v as i64,
                        _ => return Err(bad("an integer label")),
                    },
                };
            } else {
                features.push(text.parse::<f32>().map_err(|_| bad("a number"))?);
            }
        }
        let n = features.len();
        Ok(Sample::Tuple(vec![Tensor::from_vec(features, [n])?.into(), Sample::Int(label)]))
    }
}
