//! Helpers shared by the safetensors and npz tests: reference manifests, the mutation fuzzer's
//! generator and mutations.
#![allow(dead_code)]

use pyrite_core::DType;

/// `reference/data/<folder>`.
pub fn data_dir(folder: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../reference/data").join(folder)
}

/// `reference/data/<folder>/manifest.json`.
pub fn manifest(folder: &str) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(data_dir(folder).join("manifest.json")).unwrap()).unwrap()
}

/// The Pyrite dtype of a reference manifest's dtype name ("float32", ...).
pub fn dtype_named(name: &str) -> DType {
    match name {
        "float32" => DType::F32,
        "float64" => DType::F64,
        "float16" => DType::F16,
        "bfloat16" => DType::BF16,
        "int64" => DType::I64,
        "int32" => DType::I32,
        "uint8" => DType::U8,
        "bool" => DType::Bool,
        other => panic!("unknown dtype name {other}"),
    }
}

/// The bytes of a hex string.
pub fn from_hex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

/// A unique temporary folder for one test.
pub fn temp_dir(test: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("pyrite-formats-{test}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A small deterministic generator (xorshift64*), so failures reproduce from the seed.
pub struct Rng(pub u64);
impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Interesting values to write over a field: boundaries of the sizes that headers hold.
const SPECIAL: &[u64] =
    &[0, 1, 0x7F, 0x80, 0xFF, 0xFFFF, 0x7FFF_FFFF, 0xFFFF_FFFF, 0xFFFF_FFFE, 64, 1000, u64::MAX, 1 << 40];

/// One to three random edits of `input`: bit flips, random bytes, truncation, inserted and
/// deleted bytes, boundary values written over 1-8 bytes, duplicated chunks, and (for text
/// headers) digits replaced by other digits.
pub fn mutate(input: &[u8], rng: &mut Rng) -> Vec<u8> {
    let mut b = input.to_vec();
    for _ in 0..1 + rng.below(3) {
        if b.is_empty() {
            b.push(rng.next() as u8);
            continue;
        }
        let at = rng.below(b.len());
        match rng.below(8) {
            0 => b[at] ^= 1 << rng.below(8),
            1 => b[at] = rng.next() as u8,
            2 => b.truncate(at),
            3 => b.insert(at, rng.next() as u8),
            4 => {
                b.remove(at);
            }
            5 => {
                let v = SPECIAL[rng.below(SPECIAL.len())].to_le_bytes();
                let n = [1, 2, 4, 8][rng.below(4)].min(b.len() - at);
                b[at..at + n].copy_from_slice(&v[..n]);
            }
            6 => {
                let len = rng.below(16).min(b.len() - at);
                let chunk = b[at..at + len].to_vec();
                let to = rng.below(b.len());
                b.splice(to..to, chunk);
            }
            _ => {
                // A digit somewhere at or after `at` becomes another digit (or a run of nines):
                // shapes and offsets in JSON and .npy headers.
                if let Some(p) = (at..b.len()).find(|&i| b[i].is_ascii_digit()) {
                    if rng.below(4) == 0 {
                        b.splice(p..p + 1, std::iter::repeat_n(b'9', 1 + rng.below(20)));
                    } else {
                        b[p] = b'0' + rng.below(10) as u8;
                    }
                }
            }
        }
    }
    b
}
