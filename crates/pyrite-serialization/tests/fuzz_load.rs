//! Mutation fuzzing of `load`: thousands of seeded corruptions of valid checkpoints (byte
//! flips, truncations, inserted and deleted bytes, overwritten fields) must each load or fail
//! with an error, never panic, hang or allocate wildly. Two kinds of mutants: of the whole
//! file (exercising the zip reader) and of `data.pkl` alone, re-wrapped in a valid zip with
//! the right CRC (exercising the pickle machine past the CRC check).
//!
//! For longer runs use the cargo-fuzz target in `crates/pyrite-serialization/fuzz`.

mod common;

use common::fixture;
use pyrite_serialization::zip::{ZipReader, ZipWriter};
use pyrite_serialization::{load_from_bytes, save_to_bytes, Object};

/// A small deterministic generator (xorshift64*), so failures reproduce from the seed.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Interesting values to write over a field: boundaries of the sizes that headers hold.
const SPECIAL: &[u32] = &[0, 1, 0x7F, 0x80, 0xFF, 0xFFFF, 0x7FFF_FFFF, 0xFFFF_FFFF, 0xFFFF_FFFE, 64, 1000];

fn mutate(input: &[u8], rng: &mut Rng) -> Vec<u8> {
    let mut b = input.to_vec();
    for _ in 0..1 + rng.below(3) {
        if b.is_empty() {
            b.push(rng.next() as u8);
            continue;
        }
        let at = rng.below(b.len());
        match rng.below(7) {
            0 => b[at] ^= 1 << rng.below(8),
            1 => b[at] = rng.next() as u8,
            2 => b.truncate(at),
            3 => b.insert(at, rng.next() as u8),
            4 => {
                b.remove(at);
            }
            5 => {
                let v = SPECIAL[rng.below(SPECIAL.len())].to_le_bytes();
                let n = [1, 2, 4][rng.below(3)].min(b.len() - at);
                b[at..at + n].copy_from_slice(&v[..n]);
            }
            _ => {
                // Duplicate a chunk (repeats opcodes, records, headers).
                let len = rng.below(16).min(b.len() - at);
                let chunk = b[at..at + len].to_vec();
                let to = rng.below(b.len());
                b.splice(to..to, chunk);
            }
        }
    }
    b
}

/// The records of a checkpoint, to re-wrap with a mutated data.pkl.
fn records(file: &[u8]) -> Vec<(String, Vec<u8>)> {
    let mut z = ZipReader::new(std::io::Cursor::new(file)).unwrap();
    let names: Vec<String> = z.names().map(String::from).collect();
    names.into_iter().map(|n| (n.clone(), z.read(&n).unwrap())).collect()
}

fn rewrap(records: &[(String, Vec<u8>)], pkl: &[u8]) -> Vec<u8> {
    rewrap_record(records, "/data.pkl", pkl)
}

/// The archive with the record whose name ends with `suffix` replaced by `data` (and a CRC
/// that matches).
fn rewrap_record(records: &[(String, Vec<u8>)], suffix: &str, new: &[u8]) -> Vec<u8> {
    let mut w = ZipWriter::new(Vec::new());
    for (name, data) in records {
        let data = if name.ends_with(suffix) { new } else { data };
        w.add(name, data).unwrap();
    }
    w.finish().unwrap()
}

fn seeds() -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = ["views", "nested", "adam_state_dict", "sequential_state_dict", "protocol4"]
        .iter()
        .map(|s| std::fs::read(fixture(&format!("{s}.pt"))).unwrap())
        .collect();
    let t = pyrite_core::Tensor::new([[1f32, 2.], [3., 4.]]).unwrap();
    let obj = Object::from_pairs([
        ("t", Object::from(&t)),
        ("tt", t.t().unwrap().into()),
        ("b", Object::Bytes(vec![1, 2, 3])),
        ("s", Object::Set(vec![1.into()])),
        ("c", Object::Complex(1.0, 2.0)),
    ]);
    out.push(save_to_bytes(&obj).unwrap());
    out
}

#[test]
fn mutated_files_never_panic() {
    let mut rng = Rng(0x5EED_0001);
    let mut loaded = 0;
    let mut n = 0;
    for seed in seeds() {
        assert!(load_from_bytes(&seed).is_ok());
        for _ in 0..1500 {
            let m = mutate(&seed, &mut rng);
            loaded += load_from_bytes(&m).is_ok() as usize;
            n += 1;
        }
    }
    // Most whole-file mutants hit the CRC or a header check; some (in padding) still load.
    eprintln!("whole-file mutants: {loaded} of {n} loaded");
    assert!(loaded > 0 && loaded < n, "{loaded} of {n} loaded");
}

#[test]
fn mutated_pickles_never_panic() {
    let mut rng = Rng(0x5EED_0002);
    let mut loaded = 0;
    let mut n = 0;
    for seed in seeds() {
        let recs = records(&seed);
        let pkl = recs.iter().find(|(n, _)| n.ends_with("/data.pkl")).unwrap().1.clone();
        for _ in 0..1500 {
            let m = mutate(&pkl, &mut rng);
            loaded += load_from_bytes(&rewrap(&recs, &m)).is_ok() as usize;
            n += 1;
        }
    }
    eprintln!("data.pkl mutants: {loaded} of {n} loaded");
    assert!(loaded > 0 && loaded < n, "{loaded} of {n} loaded");
}

#[test]
fn crafted_hostile_pickles_fail_cleanly() {
    let recs = records(&save_to_bytes(&Object::None).unwrap());
    let load_pkl = |p: &[u8]| load_from_bytes(&rewrap(&recs, p));
    // A list that contains itself.
    let e = load_pkl(b"\x80\x02]q\x00h\x00a.").unwrap_err().to_string();
    assert!(e.contains("deep") || e.contains("itself"), "{e}");
    // Exponential sharing: l = [l0, l0] thirty times over.
    let mut p = b"\x80\x02]q\x00".to_vec();
    for i in 0..30u8 {
        p.extend_from_slice(&[b']', b'(', b'h', i, b'h', i, b'e', b'q', i + 1]);
    }
    p.push(b'.');
    let e = load_pkl(&p).unwrap_err().to_string();
    assert!(e.contains("far more"), "{e}");
    // Nesting 100000 deep.
    let mut p = b"\x80\x02".to_vec();
    p.extend(std::iter::repeat_n(b']', 100_000));
    p.extend(std::iter::repeat_n(b'a', 99_999));
    p.push(b'.');
    assert!(load_pkl(&p).unwrap_err().to_string().contains("deep"));
    // A string length far past the end, a memo key never stored, an empty stack, no STOP.
    for p in
        [&b"\x80\x02X\xff\xff\xff\xff"[..], b"\x80\x02h\x07.", b"\x80\x02.", b"\x80\x02N", b"\x80\x02(t(tR."]
    {
        assert!(load_pkl(p).is_err(), "{p:?}");
    }
    // Calls that are refused: a REDUCE on a non-callable, GLOBALs outside the allowlist.
    assert!(load_pkl(b"\x80\x02K\x01)R.").unwrap_err().to_string().contains("not an allowed function"));
    for (p, name) in [
        (&b"\x80\x02cbuiltins\neval\nX\x01\x00\x00\x001\x85R."[..], "builtins.eval"),
        (b"\x80\x02cos\nsystem\n.", "os.system"),
        (b"\x80\x02\x8c\x08builtins\x8c\x04exec\x93.", "builtins.exec"),
        (b"\x80\x02ctorch\nload\n.", "torch.load"),
    ] {
        let e = load_pkl(p).unwrap_err().to_string();
        assert!(e.contains(name), "{e}");
    }
}

#[test]
fn sizes_in_headers_are_checked_against_the_file_before_allocating() {
    let t = pyrite_core::Tensor::new([1f32, 2., 3., 4.]).unwrap();
    let file = save_to_bytes(&Object::from(&t)).unwrap();
    // Find data/0's central-directory entry and make it claim 2 GiB, then 16 EiB via zip64.
    let name = b"archive/data/0";
    let cd = (0..file.len() - name.len())
        .find(|&i| file[i..i + 4] == *b"PK\x01\x02" && file[i + 46..].starts_with(name))
        .unwrap();
    for size in [0x7FFF_FFFFu32, 0xFFFF_FFFE] {
        let mut m = file.clone();
        m[cd + 20..cd + 24].copy_from_slice(&size.to_le_bytes());
        m[cd + 24..cd + 28].copy_from_slice(&size.to_le_bytes());
        let e = load_from_bytes(&m).unwrap_err().to_string();
        assert!(e.contains("outside the file"), "{e}");
    }
}

#[test]
fn bool_bytes_other_than_0_and_1_read_as_true() {
    let t = pyrite_core::Tensor::new([true, false, true]).unwrap();
    let recs = records(&save_to_bytes(&Object::from(&t)).unwrap());
    let o = load_from_bytes(&rewrap_record(&recs, "/data/0", &[2, 0, 255])).unwrap();
    let b = o.as_tensor().unwrap();
    assert_eq!(b.to_vec::<bool>().unwrap(), [true, false, true]);
    assert_eq!(b.to_raw_bytes().unwrap(), [1, 0, 1]);
}

#[test]
fn hostile_storage_references_fail_cleanly() {
    // A valid file whose data.pkl is rewritten to point at bad storages.
    let t = pyrite_core::Tensor::new([1f32, 2., 3., 4.]).unwrap();
    let recs = records(&save_to_bytes(&Object::from(&t)).unwrap());
    let pkl = recs.iter().find(|(n, _)| n.ends_with("/data.pkl")).unwrap().1.clone();
    let load_pkl = |p: &[u8]| load_from_bytes(&rewrap(&recs, p)).map_err(|e| e.to_string());
    let edit = |from: &[u8], to: &[u8]| -> Vec<u8> {
        let at = pkl.windows(from.len()).position(|w| w == from).expect("pattern in data.pkl");
        let mut p = pkl.clone();
        p.splice(at..at + from.len(), to.iter().copied());
        p
    };
    assert!(load_pkl(&pkl).is_ok());
    // The key escapes the archive, or names a missing record.
    let e = load_pkl(&edit(b"X\x01\x00\x00\x000", b"X\x05\x00\x00\x00../..")).unwrap_err();
    assert!(e.contains("invalid storage key"), "{e}");
    let e = load_pkl(&edit(b"X\x01\x00\x00\x000", b"X\x01\x00\x00\x007")).unwrap_err();
    assert!(e.contains("no record"), "{e}");
    // numel larger than the record; a view past the end of the storage; too many strides.
    let e = load_pkl(&edit(b"K\x04t", b"K\x05t")).unwrap_err();
    assert!(e.contains("16 bytes"), "{e}");
    let e = load_pkl(&edit(b"K\x04\x85", b"K\x05\x85")).unwrap_err();
    assert!(e.contains("need more than"), "{e}");
    let e = load_pkl(&edit(b"K\x01\x85", b"K\x01K\x01\x86")).unwrap_err();
    assert!(e.contains("strides"), "{e}");
}
