//! TFRecord framing: `u64` length (little-endian), masked CRC-32C of the length, the data,
//! masked CRC-32C of the data.

use crate::crc32c::masked_crc32c;
use crate::event::Event;
use pyrite_core::{err, Result};
use std::io::Read;
use std::path::{Path, PathBuf};

/// One framed record.
pub fn frame(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len() + 16);
    let len = (data.len() as u64).to_le_bytes();
    out.extend_from_slice(&len);
    out.extend_from_slice(&masked_crc32c(&len).to_le_bytes());
    out.extend_from_slice(data);
    out.extend_from_slice(&masked_crc32c(data).to_le_bytes());
    out
}

/// Splits a TFRecord file's bytes into its records, checking both CRCs of each. A truncated
/// or corrupted record is an error naming its offset.
pub fn records(bytes: &[u8]) -> Result<Vec<&[u8]>> {
    let mut out = vec![];
    let mut pos = 0usize;
    while pos < bytes.len() {
        if bytes.len() - pos < 12 {
            return Err(err!(Value, "TFRecord: truncated record header at byte {pos}"));
        }
        let len_bytes = &bytes[pos..pos + 8];
        let crc = u32::from_le_bytes(bytes[pos + 8..pos + 12].try_into().unwrap());
        if crc != masked_crc32c(len_bytes) {
            return Err(err!(Value, "TFRecord: length CRC mismatch at byte {pos}"));
        }
        let len = u64::from_le_bytes(len_bytes.try_into().unwrap());
        let start = pos + 12;
        let avail = (bytes.len() - start) as u64;
        if avail < 4 || len > avail - 4 {
            return Err(err!(
                Value,
                "TFRecord: truncated record at byte {pos} ({len} bytes of data announced)"
            ));
        }
        let end = start + len as usize;
        let data = &bytes[start..end];
        let crc = u32::from_le_bytes(bytes[end..end + 4].try_into().unwrap());
        if crc != masked_crc32c(data) {
            return Err(err!(Value, "TFRecord: data CRC mismatch in the record at byte {pos}"));
        }
        out.push(data);
        pos = end + 4;
    }
    Ok(out)
}

/// Reads an event file's records as [`Event`]s.
pub struct EventFileReader {
    path: PathBuf,
    bytes: Vec<u8>,
}

impl EventFileReader {
    /// Reads the file at `path`.
    pub fn open(path: impl AsRef<Path>) -> Result<EventFileReader> {
        let path = path.as_ref().to_path_buf();
        let mut bytes = vec![];
        std::fs::File::open(&path)
            .and_then(|mut f| f.read_to_end(&mut bytes))
            .map_err(|e| err!(Io, "EventFileReader: cannot read {}: {e}", path.display()))?;
        Ok(EventFileReader { path, bytes })
    }

    /// Every event of the file, in order; a bad CRC, a truncated record or a malformed
    /// protobuf is an error naming the file.
    pub fn events(&self) -> Result<Vec<Event>> {
        let ctx = |e: pyrite_core::Error| err!(Value, "{}: {e}", self.path.display());
        records(&self.bytes).map_err(ctx)?.into_iter().map(|r| Event::decode(r).map_err(ctx)).collect()
    }
}

/// Every event of the event file at `path` (see [`EventFileReader`]).
pub fn read_events(path: impl AsRef<Path>) -> Result<Vec<Event>> {
    EventFileReader::open(path)?.events()
}

/// The event files (`*tfevents*`) directly in `dir`, sorted by name (so by creation time).
pub fn event_files(dir: impl AsRef<Path>) -> Result<Vec<PathBuf>> {
    let dir = dir.as_ref();
    let entries = std::fs::read_dir(dir).map_err(|e| err!(Io, "cannot list {}: {e}", dir.display()))?;
    let mut out: Vec<PathBuf> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| {
            p.is_file() && p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.contains("tfevents"))
        })
        .collect();
    out.sort();
    Ok(out)
}

/// The events of every event file directly in `dir`, file after file.
pub fn read_dir_events(dir: impl AsRef<Path>) -> Result<Vec<Event>> {
    let mut out = vec![];
    for f in event_files(dir)? {
        out.extend(read_events(&f)?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_and_split() {
        let mut bytes = frame(b"hello");
        bytes.extend(frame(b""));
        bytes.extend(frame(&[7u8; 300]));
        let recs = records(&bytes).unwrap();
        assert_eq!(recs.len(), 3);
        assert_eq!(recs[0], b"hello");
        assert_eq!(recs[1], b"");
        assert_eq!(recs[2], &[7u8; 300][..]);
        for cut in 1..bytes.len() {
            if cut == 21 || cut == 37 {
                continue; // record boundaries
            }
            assert!(records(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut bad = bytes.clone();
        bad[14] ^= 1;
        assert!(records(&bad).unwrap_err().to_string().contains("data CRC"));
        let mut bad = bytes.clone();
        bad[0] ^= 1;
        assert!(records(&bad).unwrap_err().to_string().contains("length CRC"));
    }
}
