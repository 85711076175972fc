//! A tiny protobuf wire-format encoder and decoder: just what TensorBoard's messages need
//! (varints, 64/32-bit fixed, length-delimited, packed repeated doubles and floats).
//!
//! The encoder follows proto3: a plain field at its default (0, empty) is not written; a
//! oneof member or a sub-message is written even at its default (the `_always` methods).

use pyrite_core::{err, Result};

/// A message being encoded.
#[derive(Default, Clone, Debug)]
pub(crate) struct Enc {
    pub buf: Vec<u8>,
}

const VARINT: u32 = 0;
const FIXED64: u32 = 1;
const LEN: u32 = 2;
const FIXED32: u32 = 5;

impl Enc {
    pub fn new() -> Enc {
        Enc::default()
    }

    pub fn into_bytes(self) -> Vec<u8> {
        self.buf
    }

    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.buf.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.buf.push(v as u8);
    }

    fn key(&mut self, field: u32, wire: u32) {
        self.varint(((field as u64) << 3) | wire as u64);
    }

    /// An int32/int64/uint64/enum/bool field (negative ints as 10-byte varints).
    pub fn int(&mut self, field: u32, v: i64) {
        if v != 0 {
            self.int_always(field, v);
        }
    }

    pub fn int_always(&mut self, field: u32, v: i64) {
        self.key(field, VARINT);
        self.varint(v as u64);
    }

    pub fn double(&mut self, field: u32, v: f64) {
        if v.to_bits() != 0 {
            self.double_always(field, v);
        }
    }

    pub fn double_always(&mut self, field: u32, v: f64) {
        self.key(field, FIXED64);
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    pub fn float_always(&mut self, field: u32, v: f32) {
        self.key(field, FIXED32);
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    pub fn bytes(&mut self, field: u32, v: &[u8]) {
        if !v.is_empty() {
            self.bytes_always(field, v);
        }
    }

    pub fn bytes_always(&mut self, field: u32, v: &[u8]) {
        self.key(field, LEN);
        self.varint(v.len() as u64);
        self.buf.extend_from_slice(v);
    }

    pub fn string(&mut self, field: u32, v: &str) {
        self.bytes(field, v.as_bytes());
    }

    pub fn message(&mut self, field: u32, m: Enc) {
        self.bytes_always(field, &m.buf);
    }

    pub fn packed_doubles(&mut self, field: u32, v: &[f64]) {
        if v.is_empty() {
            return;
        }
        self.key(field, LEN);
        self.varint(8 * v.len() as u64);
        for x in v {
            self.buf.extend_from_slice(&x.to_le_bytes());
        }
    }

    pub fn packed_floats(&mut self, field: u32, v: &[f32]) {
        if v.is_empty() {
            return;
        }
        self.key(field, LEN);
        self.varint(4 * v.len() as u64);
        for x in v {
            self.buf.extend_from_slice(&x.to_le_bytes());
        }
    }
}

/// One decoded field's value.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Wire<'a> {
    Varint(u64),
    Fixed64(u64),
    Bytes(&'a [u8]),
    Fixed32(u32),
}

impl<'a> Wire<'a> {
    pub fn as_u64(&self, what: &str) -> Result<u64> {
        match *self {
            Wire::Varint(v) => Ok(v),
            _ => Err(err!(Value, "protobuf: {what}: expected a varint")),
        }
    }

    pub fn as_f64(&self, what: &str) -> Result<f64> {
        match *self {
            Wire::Fixed64(v) => Ok(f64::from_bits(v)),
            _ => Err(err!(Value, "protobuf: {what}: expected a 64-bit double")),
        }
    }

    pub fn as_f32(&self, what: &str) -> Result<f32> {
        match *self {
            Wire::Fixed32(v) => Ok(f32::from_bits(v)),
            _ => Err(err!(Value, "protobuf: {what}: expected a 32-bit float")),
        }
    }

    pub fn as_bytes(&self, what: &str) -> Result<&'a [u8]> {
        match *self {
            Wire::Bytes(b) => Ok(b),
            _ => Err(err!(Value, "protobuf: {what}: expected a length-delimited field")),
        }
    }

    pub fn as_string(&self, what: &str) -> Result<String> {
        String::from_utf8(self.as_bytes(what)?.to_vec())
            .map_err(|_| err!(Value, "protobuf: {what}: not UTF-8"))
    }

    /// A repeated double, packed or not.
    pub fn push_doubles(&self, out: &mut Vec<f64>, what: &str) -> Result<()> {
        match *self {
            Wire::Fixed64(v) => out.push(f64::from_bits(v)),
            Wire::Bytes(b) if b.len().is_multiple_of(8) => {
                out.extend(b.chunks_exact(8).map(|c| f64::from_le_bytes(c.try_into().unwrap())))
            }
            _ => return Err(err!(Value, "protobuf: {what}: bad repeated double")),
        }
        Ok(())
    }

    /// A repeated float, packed or not.
    pub fn push_floats(&self, out: &mut Vec<f32>, what: &str) -> Result<()> {
        match *self {
            Wire::Fixed32(v) => out.push(f32::from_bits(v)),
            Wire::Bytes(b) if b.len().is_multiple_of(4) => {
                out.extend(b.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())))
            }
            _ => return Err(err!(Value, "protobuf: {what}: bad repeated float")),
        }
        Ok(())
    }
}

/// Reads the fields of one message in order.
pub(crate) struct Dec<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Dec<'a> {
    pub fn new(buf: &'a [u8]) -> Dec<'a> {
        Dec { buf, pos: 0 }
    }

    fn varint(&mut self) -> Result<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let Some(&b) = self.buf.get(self.pos) else {
                return Err(err!(Value, "protobuf: truncated varint"));
            };
            self.pos += 1;
            v |= ((b & 0x7f) as u64) << shift;
            if b < 0x80 {
                return Ok(v);
            }
        }
        Err(err!(Value, "protobuf: varint longer than 10 bytes"))
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if self.buf.len() - self.pos < n {
            return Err(err!(Value, "protobuf: truncated field ({n} bytes wanted)"));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    /// The next field, or `None` at the message's end.
    pub fn next_field(&mut self) -> Result<Option<(u32, Wire<'a>)>> {
        if self.pos >= self.buf.len() {
            return Ok(None);
        }
        let key = self.varint()?;
        let field = (key >> 3) as u32;
        if field == 0 {
            return Err(err!(Value, "protobuf: field number 0"));
        }
        let wire = match (key & 7) as u32 {
            VARINT => Wire::Varint(self.varint()?),
            FIXED64 => Wire::Fixed64(u64::from_le_bytes(self.take(8)?.try_into().unwrap())),
            LEN => {
                let n = self.varint()?;
                let n = usize::try_from(n).map_err(|_| err!(Value, "protobuf: length too large"))?;
                Wire::Bytes(self.take(n)?)
            }
            FIXED32 => Wire::Fixed32(u32::from_le_bytes(self.take(4)?.try_into().unwrap())),
            w => return Err(err!(Value, "protobuf: unsupported wire type {w}")),
        };
        Ok(Some((field, wire)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let mut e = Enc::new();
        e.int(1, 300);
        e.int(2, 0); // default: skipped
        e.int_always(3, -1);
        e.double_always(4, 1.5);
        e.string(5, "hi");
        e.packed_doubles(6, &[1.0, 2.0]);
        e.float_always(7, 0.25);
        let bytes = e.into_bytes();
        assert_eq!(&bytes[..3], &[0x08, 0xac, 0x02]);
        let mut d = Dec::new(&bytes);
        let mut seen = vec![];
        while let Some((f, w)) = d.next_field().unwrap() {
            seen.push(f);
            match f {
                1 => assert_eq!(w.as_u64("").unwrap(), 300),
                3 => assert_eq!(w.as_u64("").unwrap() as i64, -1),
                4 => assert_eq!(w.as_f64("").unwrap(), 1.5),
                5 => assert_eq!(w.as_string("").unwrap(), "hi"),
                6 => {
                    let mut v = vec![];
                    w.push_doubles(&mut v, "").unwrap();
                    assert_eq!(v, [1.0, 2.0]);
                }
                7 => assert_eq!(w.as_f32("").unwrap(), 0.25),
                _ => unreachable!(),
            }
        }
        assert_eq!(seen, [1, 3, 4, 5, 6, 7]);
        assert!(Dec::new(&bytes[..bytes.len() - 1]).next_field().is_ok());
        let mut d = Dec::new(&[0x2a, 0x05, b'a']);
        assert!(d.next_field().is_err());
    }
}
