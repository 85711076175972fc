//! The zip container of a `.pt` file: a small reader and writer for *stored* (uncompressed)
//! entries, which is all PyTorch writes (the reader also inflates deflated entries on request,
//! for `.npz` files: [`ZipReader::read_inflated`]).
//!
//! The writer aligns every entry's data to 64 bytes, as PyTorch does, by padding the local
//! header's extra field (so a reader could map tensors straight from the file). It switches to
//! zip64 records for entries or offsets past 4 GiB and always ends with a zip64 end record, as
//! PyTorch's writer does.
//!
//! The reader trusts nothing in the file: every size and offset is checked against the file's
//! length before anything is allocated, names must be unique, no two entries' data (local
//! header included) may overlap or run into the central directory (so the sizes of all
//! entries together are bounded by the file's size), and each entry's CRC-32 is verified when
//! it is read. Compressed or encrypted entries are refused with a clear error.
//!
//! ```
//! use pyrite_serialization::zip::{ZipReader, ZipWriter};
//! let mut w = ZipWriter::new(Vec::new());
//! w.add("archive/version", b"3\n")?;
//! let bytes = w.finish()?;
//! let mut r = ZipReader::new(std::io::Cursor::new(bytes))?;
//! assert_eq!(r.read("archive/version")?, b"3\n");
//! # Ok::<(), pyrite_core::Error>(())
//! ```

use pyrite_core::{bail, err, Result};
use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom, Write};

/// The alignment of every entry's data in files we write (PyTorch's `.storage_alignment`).
pub const DATA_ALIGNMENT: u64 = 64;

const LOCAL_SIG: u32 = 0x0403_4b50;
const CENTRAL_SIG: u32 = 0x0201_4b50;
const END_SIG: u32 = 0x0605_4b50;
const END64_SIG: u32 = 0x0606_4b50;
const END64_LOCATOR_SIG: u32 = 0x0706_4b50;
/// Extra-field id of the padding that aligns data ("FB", as PyTorch writes it).
const PAD_EXTRA_ID: u16 = 0x4246;
const ZIP64_EXTRA_ID: u16 = 0x0001;
/// Sizes and offsets at or above this need zip64 fields.
const ZIP32_MAX: u64 = 0xFFFF_FFFF;
/// General-purpose flag: names are UTF-8.
const FLAG_UTF8: u16 = 1 << 11;
/// DOS date 1980-01-01 (the earliest valid one), time 00:00.
const DOS_DATE: u16 = (1 << 5) | 1;

// ------------------------------------------------------------------------------------ CRC-32

/// The CRC-32 (IEEE, as zip uses) of `data`.
pub fn crc32(data: &[u8]) -> u32 {
    crc32_update(0, data)
}

/// Continues a CRC-32: `crc32_update(crc32(a), b) == crc32(a ++ b)`. `crc32fast` picks the
/// carry-less-multiply kernel at run time (about 10x a table method: the CRC was most of the
/// time of loading a large `.pt` file).
pub fn crc32_update(crc: u32, data: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new_with_initial(crc);
    h.update(data);
    h.finalize()
}

// ------------------------------------------------------------------------------------ writer

struct WrittenEntry {
    name: String,
    crc: u32,
    size: u64,
    offset: u64,
}

/// Writes a zip archive of stored entries, each aligned to [`DATA_ALIGNMENT`] bytes.
pub struct ZipWriter<W: Write> {
    out: W,
    pos: u64,
    entries: Vec<WrittenEntry>,
}

impl<W: Write> ZipWriter<W> {
    /// Starts an archive at the beginning of `out`.
    pub fn new(out: W) -> ZipWriter<W> {
        ZipWriter { out, pos: 0, entries: Vec::new() }
    }

    fn put(&mut self, bytes: &[u8]) -> Result<()> {
        self.out.write_all(bytes).map_err(|e| err!(Io, "zip: write failed: {e}"))?;
        self.pos += bytes.len() as u64;
        Ok(())
    }

    /// Adds an entry `name` holding `data`, stored uncompressed.
    pub fn add(&mut self, name: &str, data: &[u8]) -> Result<()> {
        if name.len() > u16::MAX as usize {
            bail!(Value, "zip: entry name of {} bytes is too long", name.len());
        }
        if self.entries.iter().any(|e| e.name == name) {
            bail!(Value, "zip: duplicate entry name '{name}'");
        }
        let crc = crc32(data);
        let size = data.len() as u64;
        let offset = self.pos;
        let zip64 = size >= ZIP32_MAX;
        // Local header: fixed part, name, then extra fields (zip64 sizes if needed, then
        // padding so that the data starts on an aligned offset).
        let mut extra = Vec::new();
        if zip64 {
            extra.extend_from_slice(&ZIP64_EXTRA_ID.to_le_bytes());
            extra.extend_from_slice(&16u16.to_le_bytes());
            extra.extend_from_slice(&size.to_le_bytes());
            extra.extend_from_slice(&size.to_le_bytes());
        }
        let unpadded = offset + 30 + name.len() as u64 + extra.len() as u64 + 4;
        let pad = (DATA_ALIGNMENT - unpadded % DATA_ALIGNMENT) % DATA_ALIGNMENT;
        extra.extend_from_slice(&PAD_EXTRA_ID.to_le_bytes());
        extra.extend_from_slice(&(pad as u16).to_le_bytes());
        extra.resize(extra.len() + pad as usize, b'Z');
        let size32 = if zip64 { u32::MAX } else { size as u32 };
        let mut h = Vec::with_capacity(30 + name.len() + extra.len());
        h.extend_from_slice(&LOCAL_SIG.to_le_bytes());
        h.extend_from_slice(&(if zip64 { 45u16 } else { 20u16 }).to_le_bytes()); // version needed
        h.extend_from_slice(&FLAG_UTF8.to_le_bytes());
        h.extend_from_slice(&0u16.to_le_bytes()); // method: stored
        h.extend_from_slice(&0u16.to_le_bytes()); // time
        h.extend_from_slice(&DOS_DATE.to_le_bytes());
        h.extend_from_slice(&crc.to_le_bytes());
        h.extend_from_slice(&size32.to_le_bytes());
        h.extend_from_slice(&size32.to_le_bytes());
        h.extend_from_slice(&(name.len() as u16).to_le_bytes());
        h.extend_from_slice(&(extra.len() as u16).to_le_bytes());
        h.extend_from_slice(name.as_bytes());
        h.extend_from_slice(&extra);
        self.put(&h)?;
        debug_assert_eq!(self.pos % DATA_ALIGNMENT, 0);
        self.put(data)?;
        self.entries.push(WrittenEntry { name: name.to_string(), crc, size, offset });
        Ok(())
    }

    /// Writes the central directory and end records; returns the sink.
    pub fn finish(mut self) -> Result<W> {
        let cd_start = self.pos;
        let mut cd = Vec::new();
        for e in &self.entries {
            let mut z64 = Vec::new();
            if e.size >= ZIP32_MAX {
                z64.extend_from_slice(&e.size.to_le_bytes());
                z64.extend_from_slice(&e.size.to_le_bytes());
            }
            if e.offset >= ZIP32_MAX {
                z64.extend_from_slice(&e.offset.to_le_bytes());
            }
            let size32 = if e.size >= ZIP32_MAX { u32::MAX } else { e.size as u32 };
            let off32 = if e.offset >= ZIP32_MAX { u32::MAX } else { e.offset as u32 };
            let extra_len = if z64.is_empty() { 0 } else { 4 + z64.len() };
            let version: u16 = if z64.is_empty() { 20 } else { 45 };
            cd.extend_from_slice(&CENTRAL_SIG.to_le_bytes());
            cd.extend_from_slice(&version.to_le_bytes()); // made by (MS-DOS attributes)
            cd.extend_from_slice(&version.to_le_bytes()); // needed to extract
            cd.extend_from_slice(&FLAG_UTF8.to_le_bytes());
            cd.extend_from_slice(&0u16.to_le_bytes()); // stored
            cd.extend_from_slice(&0u16.to_le_bytes());
            cd.extend_from_slice(&DOS_DATE.to_le_bytes());
            cd.extend_from_slice(&e.crc.to_le_bytes());
            cd.extend_from_slice(&size32.to_le_bytes());
            cd.extend_from_slice(&size32.to_le_bytes());
            cd.extend_from_slice(&(e.name.len() as u16).to_le_bytes());
            cd.extend_from_slice(&(extra_len as u16).to_le_bytes());
            cd.extend_from_slice(&0u16.to_le_bytes()); // comment length
            cd.extend_from_slice(&0u16.to_le_bytes()); // disk number
            cd.extend_from_slice(&0u16.to_le_bytes()); // internal attributes
            cd.extend_from_slice(&0u32.to_le_bytes()); // external attributes
            cd.extend_from_slice(&off32.to_le_bytes());
            cd.extend_from_slice(e.name.as_bytes());
            if !z64.is_empty() {
                cd.extend_from_slice(&ZIP64_EXTRA_ID.to_le_bytes());
                cd.extend_from_slice(&(z64.len() as u16).to_le_bytes());
                cd.extend_from_slice(&z64);
            }
        }
        self.put(&cd)?;
        let n = self.entries.len() as u64;
        let cd_size = cd.len() as u64;
        // zip64 end record and its locator, then the classic end record.
        let end64_at = self.pos;
        let mut end = Vec::with_capacity(56 + 20 + 22);
        end.extend_from_slice(&END64_SIG.to_le_bytes());
        end.extend_from_slice(&44u64.to_le_bytes()); // size of the rest of this record
        end.extend_from_slice(&45u16.to_le_bytes());
        end.extend_from_slice(&45u16.to_le_bytes());
        end.extend_from_slice(&0u32.to_le_bytes()); // this disk
        end.extend_from_slice(&0u32.to_le_bytes()); // disk with the central directory
        end.extend_from_slice(&n.to_le_bytes());
        end.extend_from_slice(&n.to_le_bytes());
        end.extend_from_slice(&cd_size.to_le_bytes());
        end.extend_from_slice(&cd_start.to_le_bytes());
        end.extend_from_slice(&END64_LOCATOR_SIG.to_le_bytes());
        end.extend_from_slice(&0u32.to_le_bytes());
        end.extend_from_slice(&end64_at.to_le_bytes());
        end.extend_from_slice(&1u32.to_le_bytes()); // total disks
        let n16 = n.min(0xFFFF) as u16;
        end.extend_from_slice(&END_SIG.to_le_bytes());
        end.extend_from_slice(&0u16.to_le_bytes());
        end.extend_from_slice(&0u16.to_le_bytes());
        end.extend_from_slice(&n16.to_le_bytes());
        end.extend_from_slice(&n16.to_le_bytes());
        end.extend_from_slice(&(cd_size.min(ZIP32_MAX) as u32).to_le_bytes());
        end.extend_from_slice(&(cd_start.min(ZIP32_MAX) as u32).to_le_bytes());
        end.extend_from_slice(&0u16.to_le_bytes()); // comment length
        self.put(&end)?;
        self.out.flush().map_err(|e| err!(Io, "zip: write failed: {e}"))?;
        Ok(self.out)
    }
}

// ------------------------------------------------------------------------------------ reader

/// One entry of the central directory.
#[derive(Clone, Debug)]
struct Entry {
    name: String,
    flags: u16,
    method: u16,
    crc: u32,
    compressed_size: u64,
    size: u64,
    header_offset: u64,
    /// Where the data starts, after the local header (read when the archive is opened).
    data_start: u64,
}

/// Reads stored entries of a zip archive from any seekable source.
pub struct ZipReader<R: Read + Seek> {
    src: R,
    entries: Vec<Entry>,
    by_name: HashMap<String, usize>,
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}
fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}
fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

fn corrupt(what: impl std::fmt::Display) -> pyrite_core::Error {
    err!(Io, "PytorchStreamReader failed reading zip archive: {what}")
}

impl<R: Read + Seek> ZipReader<R> {
    /// Opens an archive: finds and checks the central directory.
    pub fn new(mut src: R) -> Result<ZipReader<R>> {
        let len = src.seek(SeekFrom::End(0)).map_err(|e| err!(Io, "zip: cannot seek: {e}"))?;
        // The end record is in the last 22 + 65535 bytes (it may be followed by a comment).
        let tail_len = len.min(22 + 0xFFFF);
        let tail = read_at(&mut src, len - tail_len, tail_len as usize)?;
        let Some(end_pos) = (0..tail.len().saturating_sub(21)).rev().find(|&i| u32_at(&tail, i) == END_SIG)
        else {
            return Err(corrupt("failed finding central directory"));
        };
        let end = &tail[end_pos..end_pos + 22];
        let end_at = len - tail_len + end_pos as u64;
        let mut n_entries = u16_at(end, 10) as u64;
        let mut cd_size = u32_at(end, 12) as u64;
        let mut cd_start = u32_at(end, 16) as u64;
        if u16_at(end, 4) != 0 || u16_at(end, 6) != 0 {
            return Err(corrupt("multi-disk archives are not supported"));
        }
        // A zip64 locator right before the end record points at the zip64 end record.
        if end_at >= 20 {
            let loc = read_at(&mut src, end_at - 20, 20)?;
            if u32_at(&loc, 0) == END64_LOCATOR_SIG {
                let at = u64_at(&loc, 8);
                if at.checked_add(56).is_none_or(|e| e > end_at - 20) {
                    return Err(corrupt("zip64 end record lies outside the file"));
                }
                let rec = read_at(&mut src, at, 56)?;
                if u32_at(&rec, 0) != END64_SIG {
                    return Err(corrupt("bad zip64 end record signature"));
                }
                n_entries = u64_at(&rec, 32);
                cd_size = u64_at(&rec, 40);
                cd_start = u64_at(&rec, 48);
            }
        }
        if cd_start.checked_add(cd_size).is_none_or(|e| e > end_at) {
            return Err(corrupt(format!(
                "central directory ({cd_size} bytes at {cd_start}) lies outside the file ({len} bytes)"
            )));
        }
        if n_entries > cd_size / 46 {
            return Err(corrupt(format!(
                "{n_entries} entries cannot fit in a {cd_size}-byte central directory"
            )));
        }
        let cd = read_at(&mut src, cd_start, cd_size as usize)?;
        let mut entries = Vec::with_capacity(n_entries as usize);
        let mut by_name = HashMap::with_capacity(n_entries as usize);
        let mut p = 0usize;
        for _ in 0..n_entries {
            if p + 46 > cd.len() || u32_at(&cd, p) != CENTRAL_SIG {
                return Err(corrupt("bad central directory entry"));
            }
            let flags = u16_at(&cd, p + 8);
            let method = u16_at(&cd, p + 10);
            let crc = u32_at(&cd, p + 16);
            let mut compressed_size = u32_at(&cd, p + 20) as u64;
            let mut size = u32_at(&cd, p + 24) as u64;
            let name_len = u16_at(&cd, p + 28) as usize;
            let extra_len = u16_at(&cd, p + 30) as usize;
            let comment_len = u16_at(&cd, p + 32) as usize;
            let mut header_offset = u32_at(&cd, p + 42) as u64;
            let name_at = p + 46;
            let extra_at = name_at + name_len;
            let next = extra_at + extra_len + comment_len;
            if next > cd.len() {
                return Err(corrupt("central directory entry runs past the directory"));
            }
            let name = std::str::from_utf8(&cd[name_at..extra_at])
                .map_err(|_| corrupt("an entry name is not UTF-8"))?
                .to_string();
            // zip64 extra: 8-byte values for the fields saturated at 0xFFFFFFFF, in order.
            let mut x = extra_at;
            while x + 4 <= extra_at + extra_len {
                let id = u16_at(&cd, x);
                let n = u16_at(&cd, x + 2) as usize;
                let body = x + 4;
                if body + n > extra_at + extra_len {
                    return Err(corrupt(format!("bad extra field in entry '{name}'")));
                }
                if id == ZIP64_EXTRA_ID {
                    let mut q = body;
                    for field in [&mut size, &mut compressed_size, &mut header_offset] {
                        if *field == ZIP32_MAX {
                            if q + 8 > body + n {
                                return Err(corrupt(format!("short zip64 field in entry '{name}'")));
                            }
                            *field = u64_at(&cd, q);
                            q += 8;
                        }
                    }
                }
                x = body + n;
            }
            // Data precedes the central directory: this bounds every size by the file's
            // length before anything is allocated for it.
            if header_offset
                .checked_add(30)
                .and_then(|h| h.checked_add(compressed_size))
                .is_none_or(|e| e > cd_start)
            {
                return Err(corrupt(format!(
                    "entry '{name}' ({compressed_size} bytes at {header_offset}) lies outside the file's data"
                )));
            }
            if by_name.insert(name.clone(), entries.len()).is_some() {
                return Err(corrupt(format!("duplicate entry '{name}'")));
            }
            entries.push(Entry {
                name,
                flags,
                method,
                crc,
                compressed_size,
                size,
                header_offset,
                data_start: 0,
            });
            p = next;
        }
        // Each entry's data, through its local header, must lie before the central directory,
        // and no two entries may overlap: otherwise a small file could name one large record
        // many times over and load as gigabytes.
        let mut spans = Vec::with_capacity(entries.len());
        for (i, e) in entries.iter_mut().enumerate() {
            e.data_start = local_data_start(&mut src, cd_start, e)?;
            spans.push((e.header_offset, e.data_start + e.compressed_size, i));
        }
        spans.sort_unstable();
        for w in spans.windows(2) {
            let ((_, end, a), (next_start, _, b)) = (w[0], w[1]);
            if next_start < end {
                return Err(corrupt(format!(
                    "entries '{}' and '{}' overlap (the first ends at byte {end}, the second starts at {next_start})",
                    entries[a].name, entries[b].name
                )));
            }
        }
        Ok(ZipReader { src, entries, by_name })
    }

    /// The entry names, in central-directory order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|e| e.name.as_str())
    }

    /// True when the archive has an entry `name`.
    pub fn contains(&self, name: &str) -> bool {
        self.by_name.contains_key(name)
    }

    /// The uncompressed size of entry `name`.
    pub fn size(&self, name: &str) -> Option<u64> {
        self.by_name.get(name).map(|&i| self.entries[i].size)
    }

    /// Where entry `name`'s data starts in the file, after checking that it is stored and lies
    /// inside the file.
    fn data_range(&mut self, name: &str) -> Result<(u64, &Entry)> {
        let Some(&i) = self.by_name.get(name) else {
            bail!(Io, "PytorchStreamReader failed locating file {name}: file not found");
        };
        let e = &self.entries[i];
        if e.flags & 1 != 0 {
            bail!(NotImplemented, "zip: entry '{name}' is encrypted, which is not supported");
        }
        if e.method != 0 {
            bail!(
                NotImplemented,
                "zip: entry '{name}' is compressed (method {}); torch.save writes stored entries only, \
                 re-save the file with torch.save",
                e.method
            );
        }
        if e.compressed_size != e.size {
            return Err(corrupt(format!("stored entry '{name}' has different sizes")));
        }
        Ok((e.data_start, e))
    }

    /// Reads entry `name` in full, stored or deflated (method 8, as `zipfile.ZIP_DEFLATED`
    /// and `numpy.savez_compressed` write it), checking its CRC-32. A deflated entry may not
    /// claim more than deflate's largest ratio (1032:1) allows, and it is inflated with its
    /// claimed size as the limit, so memory grows only with what the data really expands to.
    pub fn read_inflated(&mut self, name: &str) -> Result<Vec<u8>> {
        let Some(&i) = self.by_name.get(name) else {
            bail!(Io, "zip: no entry named {name}");
        };
        let e = self.entries[i].clone();
        if e.method != 8 {
            return self.read(name);
        }
        if e.flags & 1 != 0 {
            bail!(NotImplemented, "zip: entry '{name}' is encrypted, which is not supported");
        }
        if e.size > e.compressed_size.saturating_mul(1032).saturating_add(64) {
            return Err(corrupt(format!(
                "deflated entry '{name}' claims {} bytes from {} compressed bytes, more than deflate can expand to",
                e.size, e.compressed_size
            )));
        }
        let size = usize::try_from(e.size)
            .map_err(|_| err!(OutOfMemory, "zip: cannot allocate {} bytes", e.size))?;
        let packed = read_at(&mut self.src, e.data_start, e.compressed_size as usize)?;
        let data = miniz_oxide::inflate::decompress_to_vec_with_limit(&packed, size)
            .map_err(|err| corrupt(format!("cannot inflate '{name}': {err}")))?;
        if data.len() != size {
            return Err(corrupt(format!(
                "entry '{name}' inflates to {} bytes, not the {size} it claims",
                data.len()
            )));
        }
        if crc32(&data) != e.crc {
            return Err(corrupt(format!(
                "invalid header or archive is corrupted: CRC-32 mismatch in '{name}'"
            )));
        }
        Ok(data)
    }

    /// Reads entry `name` in full (checking its CRC-32).
    pub fn read(&mut self, name: &str) -> Result<Vec<u8>> {
        let size = self.size(name).unwrap_or(0);
        // `data_range` checks the size against the file before we allocate it.
        self.data_range(name)?;
        let mut buf = Vec::new();
        buf.try_reserve_exact(size as usize)
            .map_err(|_| err!(OutOfMemory, "zip: cannot allocate {size} bytes"))?;
        buf.resize(size as usize, 0);
        self.read_into(name, &mut buf)?;
        Ok(buf)
    }

    /// Reads entry `name` into `buf`, whose length must be the entry's size (checking its
    /// CRC-32).
    pub fn read_into(&mut self, name: &str, buf: &mut [u8]) -> Result<()> {
        let (start, e) = self.data_range(name)?;
        if e.size != buf.len() as u64 {
            bail!(Io, "zip: entry '{name}' holds {} bytes, expected {}", e.size, buf.len());
        }
        let want = e.crc;
        self.src.seek(SeekFrom::Start(start)).map_err(|err| err!(Io, "zip: cannot seek: {err}"))?;
        self.src.read_exact(buf).map_err(|err| corrupt(format!("reading '{name}': {err}")))?;
        let got = crc32(buf);
        if got != want {
            return Err(corrupt(format!(
                "invalid header or archive is corrupted: CRC-32 mismatch in '{name}'"
            )));
        }
        Ok(())
    }
}

/// Where entry `e`'s data starts (after its local header), checking that its compressed
/// bytes end by `limit` (the start of the central directory).
fn local_data_start<R: Read + Seek>(src: &mut R, limit: u64, e: &Entry) -> Result<u64> {
    let name = &e.name;
    let hdr = read_at(src, e.header_offset, 30)?;
    if u32_at(&hdr, 0) != LOCAL_SIG {
        return Err(corrupt(format!("bad local header for '{name}'")));
    }
    let start = e.header_offset + 30 + u16_at(&hdr, 26) as u64 + u16_at(&hdr, 28) as u64;
    if start.checked_add(e.compressed_size).is_none_or(|end| end > limit) {
        return Err(corrupt(format!(
            "entry '{name}' ({} bytes at {start}) runs into the central directory (at byte {limit}) or past the end of the file",
            e.compressed_size
        )));
    }
    Ok(start)
}

/// Reads `n` bytes at `at`; the caller has checked that they lie inside the source.
fn read_at<R: Read + Seek>(src: &mut R, at: u64, n: usize) -> Result<Vec<u8>> {
    src.seek(SeekFrom::Start(at)).map_err(|e| err!(Io, "zip: cannot seek: {e}"))?;
    let mut buf = vec![0u8; n];
    src.read_exact(&mut buf).map_err(|e| corrupt(format!("unexpected end of file: {e}")))?;
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32_matches_the_standard_check_value() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        let data: Vec<u8> = (0..1000u32).map(|i| (i * 7 + 3) as u8).collect();
        assert_eq!(crc32_update(crc32(&data[..333]), &data[333..]), crc32(&data));
        assert_eq!(crc32(b""), 0);
        let data: Vec<u8> = (0..1000u32).map(|i| (i * 7 % 251) as u8).collect();
        assert_eq!(crc32_update(crc32(&data[..333]), &data[333..]), crc32(&data));
    }

    #[test]
    fn entries_round_trip_aligned() {
        let mut w = ZipWriter::new(Vec::new());
        w.add("a/data.pkl", b"hello").unwrap();
        w.add("a/data/0", &[7u8; 100]).unwrap();
        w.add("a/empty", b"").unwrap();
        assert!(w.add("a/data/0", b"x").is_err());
        let bytes = w.finish().unwrap();
        let mut r = ZipReader::new(std::io::Cursor::new(bytes.clone())).unwrap();
        assert_eq!(r.names().collect::<Vec<_>>(), ["a/data.pkl", "a/data/0", "a/empty"]);
        assert_eq!(r.read("a/data.pkl").unwrap(), b"hello");
        assert_eq!(r.read("a/data/0").unwrap(), vec![7u8; 100]);
        assert_eq!(r.read("a/empty").unwrap(), b"");
        assert!(r.read("missing").is_err());
        for name in ["a/data.pkl", "a/data/0", "a/empty"] {
            let (start, _) = r.data_range(name).unwrap();
            assert_eq!(start % DATA_ALIGNMENT, 0, "{name}");
        }
    }

    #[test]
    fn a_flipped_data_byte_fails_the_crc() {
        let mut w = ZipWriter::new(Vec::new());
        w.add("x", &[1u8; 10]).unwrap();
        let mut bytes = w.finish().unwrap();
        bytes[64] ^= 1; // the first data byte
        let mut r = ZipReader::new(std::io::Cursor::new(bytes)).unwrap();
        assert!(r.read("x").unwrap_err().to_string().contains("CRC-32"));
    }

    /// The central-directory entry of a stored entry `name` at `offset`.
    fn central_entry(name: &str, crc: u32, size: u32, offset: u32) -> Vec<u8> {
        let mut cd = Vec::new();
        cd.extend_from_slice(&CENTRAL_SIG.to_le_bytes());
        cd.extend_from_slice(&[20, 0, 20, 0, 0, 0, 0, 0, 0, 0, 0, 0]); // versions, flags, method, time, date
        cd.extend_from_slice(&crc.to_le_bytes());
        cd.extend_from_slice(&size.to_le_bytes());
        cd.extend_from_slice(&size.to_le_bytes());
        cd.extend_from_slice(&(name.len() as u16).to_le_bytes());
        cd.extend_from_slice(&[0; 12]); // extra and comment lengths, disk, attributes
        cd.extend_from_slice(&offset.to_le_bytes());
        cd.extend_from_slice(name.as_bytes());
        cd
    }

    /// `data` stored once, then a central directory whose entries `names` all point at it.
    fn aliased(data: &[u8], names: &[&str]) -> Vec<u8> {
        let mut w = ZipWriter::new(Vec::new());
        w.add(names[0], data).unwrap();
        let mut bytes = w.finish().unwrap();
        let cd_start = bytes.windows(4).position(|x| x == CENTRAL_SIG.to_le_bytes()).unwrap();
        bytes.truncate(cd_start);
        let mut cd = Vec::new();
        for n in names {
            cd.extend(central_entry(n, crc32(data), data.len() as u32, 0));
        }
        bytes.extend_from_slice(&cd);
        bytes.extend_from_slice(&END_SIG.to_le_bytes());
        bytes.extend_from_slice(&[0, 0, 0, 0]);
        bytes.extend_from_slice(&(names.len() as u16).to_le_bytes());
        bytes.extend_from_slice(&(names.len() as u16).to_le_bytes());
        bytes.extend_from_slice(&(cd.len() as u32).to_le_bytes());
        bytes.extend_from_slice(&(cd_start as u32).to_le_bytes());
        bytes.extend_from_slice(&[0, 0]);
        bytes
    }

    #[test]
    fn entries_that_overlap_are_refused() {
        // One entry alone reads back; two names for its data are refused at open.
        let data = vec![5u8; 1000];
        let one = aliased(&data, &["a"]);
        assert_eq!(ZipReader::new(std::io::Cursor::new(one)).unwrap().read("a").unwrap(), data);
        let many: Vec<String> = (0..64).map(|i| format!("data/{i}")).collect();
        let names: Vec<&str> = many.iter().map(String::as_str).collect();
        let file = aliased(&data, &names);
        let e = ZipReader::new(std::io::Cursor::new(file)).err().unwrap().to_string();
        assert!(e.contains("overlap"), "{e}");

        // An entry whose local header (a long extra field) pushes its data into the central
        // directory.
        let mut w = ZipWriter::new(Vec::new());
        w.add("x", &[1u8; 10]).unwrap();
        let mut file = w.finish().unwrap();
        let extra = u16_at(&file, 28);
        file[28..30].copy_from_slice(&(extra + 20).to_le_bytes());
        let e = ZipReader::new(std::io::Cursor::new(file)).err().unwrap().to_string();
        assert!(e.contains("runs into the central directory"), "{e}");
    }
}
