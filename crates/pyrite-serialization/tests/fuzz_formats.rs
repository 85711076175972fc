//! Mutation fuzzing of the safetensors and `.npz` readers: thousands of seeded corruptions of
//! valid files (byte flips, truncations, inserted and deleted bytes, boundary values, digits
//! changed in text headers) must each load or fail with an error, never panic, hang or
//! allocate wildly. For `.npz`, a second kind of mutant edits one `.npy` member and re-wraps
//! it in a valid zip with the right CRC, to reach the `.npy` parser past the CRC check.
//!
//! For longer runs use the cargo-fuzz targets in `crates/pyrite-serialization/fuzz`.

mod formats_common;

use formats_common::{data_dir, mutate, Rng};
use pyrite_core::{DType, Tensor};
use pyrite_serialization::zip::{ZipReader, ZipWriter};
use pyrite_serialization::{npz, safetensors};

const MUTANTS_PER_SEED: usize = 1500;

fn st_seeds() -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = ["with_metadata", "no_metadata"]
        .iter()
        .map(|s| std::fs::read(data_dir("safetensors").join(format!("{s}.safetensors"))).unwrap())
        .collect();
    let a = Tensor::new([[1f32, 2.], [3., 4.]]).unwrap();
    let b = Tensor::new([true, false, true]).unwrap();
    let meta = std::collections::BTreeMap::from([("format".to_string(), "pt".to_string())]);
    out.push(safetensors::save([("a", &a), ("b", &b)], Some(&meta)).unwrap());
    out
}

#[test]
fn mutated_safetensors_files_never_panic() {
    let mut rng = Rng(0x5EED_0101);
    let (mut loaded, mut n) = (0, 0);
    for seed in st_seeds() {
        assert!(safetensors::load_with_metadata(&seed).is_ok());
        for _ in 0..MUTANTS_PER_SEED {
            let m = mutate(&seed, &mut rng);
            loaded += safetensors::load_with_metadata(&m).is_ok() as usize;
            n += 1;
        }
    }
    // Mutants of the data bytes still load; most header mutants are refused.
    eprintln!("safetensors mutants: {loaded} of {n} loaded");
    assert!(loaded > 0 && loaded < n, "{loaded} of {n} loaded");
}

fn npz_seeds() -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = ["savez", "savez_compressed"]
        .iter()
        .map(|s| std::fs::read(data_dir("npz").join(format!("{s}.npz"))).unwrap())
        .collect();
    let a = Tensor::new([[1f32, 2.], [3., 4.]]).unwrap();
    let b = Tensor::scalar(7i64).unwrap();
    out.push(npz::savez_to_bytes([("a", &a), ("b", &b)]).unwrap());
    out
}

#[test]
fn mutated_npz_files_never_panic() {
    let mut rng = Rng(0x5EED_0102);
    let (mut loaded, mut n) = (0, 0);
    for seed in npz_seeds() {
        assert!(npz::load_from_bytes(&seed).is_ok());
        for _ in 0..MUTANTS_PER_SEED {
            let m = mutate(&seed, &mut rng);
            loaded += npz::load_from_bytes(&m).is_ok() as usize;
            n += 1;
        }
    }
    eprintln!("npz mutants: {loaded} of {n} loaded");
    assert!(loaded > 0 && loaded < n, "{loaded} of {n} loaded");
}

#[test]
fn mutated_npy_members_never_panic() {
    let mut rng = Rng(0x5EED_0103);
    let (mut loaded, mut n) = (0, 0);
    let t = Tensor::arange(0.0, 12.0, 1.0, DType::F64).unwrap().reshape([3, 4]).unwrap();
    let f = Tensor::new([[1i32, 2], [3, 4]]).unwrap().t().unwrap();
    for seed in npz_seeds() {
        let mut z = ZipReader::new(std::io::Cursor::new(&seed)).unwrap();
        let names: Vec<String> = z.names().map(String::from).collect();
        let members: Vec<(String, Vec<u8>)> =
            names.into_iter().map(|n| (n.clone(), z.read_inflated(&n).unwrap())).collect();
        for _ in 0..MUTANTS_PER_SEED / 3 {
            let k = rng.below(members.len());
            let mut w = ZipWriter::new(Vec::new());
            for (i, (name, data)) in members.iter().enumerate() {
                let data = if i == k { mutate(data, &mut rng) } else { data.clone() };
                w.add(name, &data).unwrap();
            }
            loaded += npz::load_from_bytes(&w.finish().unwrap()).is_ok() as usize;
            n += 1;
        }
    }
    // And .npy headers alone, through Tensor::read_npy (Fortran order, 0-d, several dtypes).
    for t in [&t, &f, &Tensor::scalar(1.5f32).unwrap(), &Tensor::new([true, false]).unwrap()] {
        let mut npy = Vec::new();
        t.write_npy(&mut npy).unwrap();
        for _ in 0..MUTANTS_PER_SEED / 3 {
            let m = mutate(&npy, &mut rng);
            loaded += Tensor::read_npy(&m).is_ok() as usize;
            n += 1;
        }
    }
    eprintln!(".npy member mutants: {loaded} of {n} loaded");
    assert!(loaded > 0 && loaded < n, "{loaded} of {n} loaded");
}
