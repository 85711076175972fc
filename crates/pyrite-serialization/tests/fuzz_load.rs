//! Mutation fuzzing of `load`: thousands of seeded corruptions of valid checkpoints (byte
//! flips, truncations, inserted and deleted bytes, overwritten fields) must each load or fail
//! with an error, never panic, hang or allocate wildly. Two kinds of mutants: of the whole
//! file (exercising the zip reader) and of `data.pkl` alone, re-wrapped in a valid zip with
//! the right CRC (exercising the pickle machine past the CRC check).
//!
//! For longer runs use the cargo-fuzz target in `crates/pyrite-serialization/fuzz`.

mod common;
mod formats_common;

use common::fixture;
use formats_common::{mutate, Rng};
use pyrite_serialization::zip::{ZipReader, ZipWriter};
use pyrite_serialization::{load_from_bytes, save_to_bytes, Object};

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

/// A zip of stored `records` in which each `(alias, target)` of `aliases` is one more
/// central-directory entry for the data of the record `target`: a small file that names one
/// record many times.
fn zip_with_aliases(records: &[(String, Vec<u8>)], aliases: &[(String, String)]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut at = std::collections::HashMap::new();
    for (name, data) in records {
        at.insert(name.clone(), out.len() as u32);
        out.extend_from_slice(b"PK\x03\x04\x14\x00\x00\x00\x00\x00\x00\x00\x00\x00");
        out.extend_from_slice(&pyrite_serialization::zip::crc32(data).to_le_bytes());
        out.extend_from_slice(&(data.len() as u32).to_le_bytes());
        out.extend_from_slice(&(data.len() as u32).to_le_bytes());
        out.extend_from_slice(&(name.len() as u16).to_le_bytes());
        out.extend_from_slice(&[0, 0]);
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(data);
    }
    let cd_start = out.len() as u32;
    let mut entries: Vec<(&str, &[u8], u32)> =
        records.iter().map(|(n, d)| (n.as_str(), d.as_slice(), at[n])).collect();
    for (alias, target) in aliases {
        let data = &records.iter().find(|(n, _)| n == target).unwrap().1;
        entries.push((alias, data, at[target]));
    }
    for (name, data, offset) in &entries {
        out.extend_from_slice(b"PK\x01\x02\x14\x00\x14\x00\x00\x00\x00\x00\x00\x00\x00\x00");
        out.extend_from_slice(&pyrite_serialization::zip::crc32(data).to_le_bytes());
        out.extend_from_slice(&(data.len() as u32).to_le_bytes());
        out.extend_from_slice(&(data.len() as u32).to_le_bytes());
        out.extend_from_slice(&(name.len() as u16).to_le_bytes());
        out.extend_from_slice(&[0; 12]);
        out.extend_from_slice(&offset.to_le_bytes());
        out.extend_from_slice(name.as_bytes());
    }
    let cd_len = out.len() as u32 - cd_start;
    out.extend_from_slice(b"PK\x05\x06\x00\x00\x00\x00");
    out.extend_from_slice(&(entries.len() as u16).to_le_bytes());
    out.extend_from_slice(&(entries.len() as u16).to_le_bytes());
    out.extend_from_slice(&cd_len.to_le_bytes());
    out.extend_from_slice(&cd_start.to_le_bytes());
    out.extend_from_slice(&[0, 0]);
    out
}

#[test]
fn entries_that_alias_one_record_are_refused() {
    // 64 tensors with storages data/0..data/63 of equal contents (so equal CRCs); the hostile
    // file stores data/0 once and points the other 63 entries at it: 64 KiB would load as 4 MiB
    // (a 1.4 MB file as 2 GB in the report).
    let tensors: Vec<Object> = (0..64)
        .map(|_| Object::from(pyrite_core::Tensor::zeros([16384], pyrite_core::DType::F32).unwrap()))
        .collect();
    let file = save_to_bytes(&Object::List(tensors)).unwrap();
    let recs = records(&file);
    let honest = zip_with_aliases(&recs, &[]);
    assert_eq!(load_from_bytes(&honest).unwrap().as_slice().unwrap().len(), 64);
    let (stored, aliased): (Vec<_>, Vec<_>) =
        recs.into_iter().partition(|(n, _)| !n.contains("/data/") || n.ends_with("/data/0"));
    let target = stored.iter().find(|(n, _)| n.ends_with("/data/0")).unwrap().0.clone();
    let aliases: Vec<(String, String)> = aliased.into_iter().map(|(n, _)| (n, target.clone())).collect();
    assert_eq!(aliases.len(), 63);
    let hostile = zip_with_aliases(&stored, &aliases);
    assert!(hostile.len() < 80_000, "{} bytes", hostile.len());
    let e = load_from_bytes(&hostile).unwrap_err().to_string();
    assert!(e.contains("overlap"), "{e}");
}

/// `{key_i: 0 for i in range(n)}` as a pickle, each key written by `key(i, &mut pickle)`.
fn dict_pickle(n: usize, prelude: &[u8], key: impl Fn(usize, &mut Vec<u8>)) -> Vec<u8> {
    let mut p = b"\x80\x02".to_vec();
    p.extend_from_slice(prelude);
    p.extend_from_slice(b"}(");
    for i in 0..n {
        key(i, &mut p);
        p.extend_from_slice(b"K\x00");
    }
    p.extend_from_slice(b"u.");
    p
}

#[test]
fn dicts_keyed_by_nans_or_sets_load_in_linear_time() {
    let recs = records(&save_to_bytes(&Object::None).unwrap());
    let n = 100_000;
    // 100000 NaN keys: a NaN equals nothing, so each is a key of its own (as in Python, where
    // each unpickled float is a distinct object). Hashed alike, they took n^2/2 comparisons.
    let nans = dict_pickle(n, b"", |_, p| {
        p.push(b'G');
        p.extend_from_slice(&f64::NAN.to_be_bytes());
    });
    // 100000 frozensets {i}: they hashed by size alone, so all collided.
    let sets = dict_pickle(n, b"c__builtin__\nfrozenset\nq\x000", |i, p| {
        p.extend_from_slice(b"h\x00]J");
        p.extend_from_slice(&(i as i32).to_le_bytes());
        p.extend_from_slice(b"a\x85R");
    });
    // 40000 tuples (i, nan): never equal to anything either.
    let tuples = dict_pickle(40_000, b"", |i, p| {
        p.push(b'J');
        p.extend_from_slice(&(i as i32).to_le_bytes());
        p.push(b'G');
        p.extend_from_slice(&f64::NAN.to_be_bytes());
        p.push(0x86);
    });
    for (what, pkl, len) in [("NaN", nans, n), ("frozenset", sets, n), ("tuple", tuples, 40_000)] {
        let t = std::time::Instant::now();
        let o = load_from_bytes(&rewrap(&recs, &pkl)).unwrap_or_else(|e| panic!("{what}: {e}"));
        let elapsed = t.elapsed();
        assert_eq!(o.as_dict().unwrap().len(), len, "{what}");
        // Linear: about 0.1 s. Quadratic (before): 20 s for the NaN keys.
        assert!(elapsed.as_secs_f64() < 3.0, "{what} keys: {elapsed:?}");
    }
    // Equal frozensets written in different orders are one key, as in Python.
    let pkl = dict_pickle(2, b"c__builtin__\nfrozenset\nq\x000", |i, p| {
        p.extend_from_slice(b"h\x00](");
        for k in 0..50i32 {
            let v = if i == 0 { k } else { 49 - k };
            p.push(b'J');
            p.extend_from_slice(&v.to_le_bytes());
        }
        p.extend_from_slice(b"e\x85R");
    });
    assert_eq!(load_from_bytes(&rewrap(&recs, &pkl)).unwrap().as_dict().unwrap().len(), 1);
}
