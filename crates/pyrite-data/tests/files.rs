//! The file-backed datasets, on small files each test writes into its own temporary folder.

use pyrite::data::{CsvDataset, CsvOptions, Dataset, NpyDataset, Sample};
use pyrite::{DType, Tensor};
use std::path::PathBuf;

/// A fresh, empty folder for one test.
fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("pyrite-data-files-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn row(s: &Sample) -> (Vec<f32>, i64) {
    let x = s.item(0).unwrap().as_tensor().unwrap();
    assert_eq!(x.dtype(), DType::F32);
    (x.to_vec::<f32>().unwrap(), s.item(1).unwrap().as_int().unwrap())
}

// ---------------------------------------------------------------- CSV

#[test]
fn csv_reads_rows_with_the_label_last_by_default() {
    let p = tmp("csv-default").join("a.csv");
    std::fs::write(&p, "1,2.5,0\r\n\n-3,4e1,2\n 5 , 6 ,1").unwrap();
    let ds = CsvDataset::new(&p).unwrap();
    assert_eq!((ds.len(), ds.num_features()), (3, 2));
    assert_eq!(row(&ds.get(2).unwrap()), (vec![5., 6.], 1));
    assert_eq!(row(&ds.get(0).unwrap()), (vec![1., 2.5], 0));
    assert_eq!(row(&ds.get(1).unwrap()), (vec![-3., 40.], 2));
    assert!(ds.get(3).unwrap_err().to_string().contains("out of range"));
}

#[test]
fn csv_options_choose_header_delimiter_and_label_column() {
    let p = tmp("csv-options").join("b.tsv");
    std::fs::write(&p, "label\tx\ty\n3\t0.5\t1\n7.0\t2\t-1\n").unwrap();
    let opts = CsvOptions { label_column: 0, has_header: true, delimiter: b'\t' };
    let ds = CsvDataset::with_options(&p, opts).unwrap();
    assert_eq!(ds.len(), 2);
    assert_eq!(row(&ds.get(0).unwrap()), (vec![0.5, 1.], 3));
    assert_eq!(row(&ds.get(1).unwrap()), (vec![2., -1.], 7));
    let opts = CsvOptions { label_column: -2, ..opts };
    let ds = CsvDataset::with_options(&p, opts).unwrap();
    assert_eq!(row(&ds.get(1).unwrap()), (vec![7., -1.], 2));
    let opts = CsvOptions { label_column: 3, ..opts };
    let e = CsvDataset::with_options(&p, opts).err().unwrap().to_string();
    assert!(e.contains("label_column 3 is out of range for 3 columns"), "{e}");
}

#[test]
fn csv_errors_name_the_line_and_column() {
    let p = tmp("csv-bad").join("c.csv");
    std::fs::write(&p, "x,y,label\n1,2,0\n1,oops,1\n1,2,1.5\n1,2\n").unwrap();
    let ds = CsvDataset::with_options(&p, CsvOptions { has_header: true, ..Default::default() }).unwrap();
    assert_eq!(ds.len(), 4);
    assert!(ds.get(0).is_ok());
    let e = ds.get(1).unwrap_err().to_string();
    assert!(e.contains("c.csv") && e.contains("line 3, column 2") && e.contains("'oops'"), "{e}");
    let e = ds.get(2).unwrap_err().to_string();
    assert!(e.contains("line 4, column 3") && e.contains("integer label"), "{e}");
    let e = ds.get(3).unwrap_err().to_string();
    assert!(e.contains("line 5 has 2 columns, expected 3"), "{e}");

    let empty = tmp("csv-empty").join("d.csv");
    std::fs::write(&empty, "only,a,header\n\n").unwrap();
    let e = CsvDataset::with_options(&empty, CsvOptions { has_header: true, ..Default::default() })
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("no data row"), "{e}");
    assert!(CsvDataset::new(tmp("csv-missing").join("nope.csv")).is_err());
}

// ---------------------------------------------------------------- npy

#[test]
fn npy_indexes_samples_along_the_first_axis_in_every_dtype() {
    let dir = tmp("npy-dtypes");
    let base = Tensor::arange(0., 24., 1., DType::F32).unwrap().reshape([4, 3, 2]).unwrap();
    for dtype in [DType::F32, DType::F64, DType::I64, DType::I32, DType::U8, DType::Bool] {
        let p = dir.join(format!("{dtype:?}.npy"));
        let t = base.to_dtype(dtype).unwrap();
        t.save_npy(&p).unwrap();
        let ds = NpyDataset::new(&p).unwrap();
        assert_eq!((ds.len(), ds.dtype(), ds.shape()), (4, dtype, &[4usize, 3, 2][..]));
        let x = ds.get(2).unwrap().as_tensor().unwrap().clone();
        assert_eq!((x.dtype(), x.dims()), (dtype, &[3usize, 2][..]));
        let want = t.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap()[12..18].to_vec();
        assert_eq!(x.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap(), want, "{dtype:?}");
        assert!(ds.get(4).unwrap_err().to_string().contains("out of range"));
    }
}

#[test]
fn npy_pair_returns_inputs_and_targets() {
    let dir = tmp("npy-pair");
    Tensor::arange(0., 6., 1., DType::F32)
        .unwrap()
        .reshape([3, 2])
        .unwrap()
        .save_npy(dir.join("x.npy"))
        .unwrap();
    Tensor::new([1i64, 0, 1]).unwrap().save_npy(dir.join("y.npy")).unwrap();
    let ds = NpyDataset::pair(dir.join("x.npy"), dir.join("y.npy")).unwrap();
    let s = ds.get(1).unwrap();
    assert_eq!(s.item(0).unwrap().as_tensor().unwrap().to_vec::<f32>().unwrap(), [2., 3.]);
    let y = s.item(1).unwrap().as_tensor().unwrap();
    assert_eq!((y.dims(), y.to_vec::<i64>().unwrap()), (&[][..], vec![0]));
    Tensor::new([1i64, 0]).unwrap().save_npy(dir.join("y2.npy")).unwrap();
    let e = NpyDataset::pair(dir.join("x.npy"), dir.join("y2.npy")).err().unwrap().to_string();
    assert!(e.contains("has 3 samples") && e.contains("y2.npy has 2"), "{e}");
}

/// A version 1.0 `.npy` with the given header dict and data bytes.
fn raw_npy(dict: &str, data: &[u8]) -> Vec<u8> {
    let mut h = dict.to_string();
    while !(10 + h.len() + 1).is_multiple_of(64) {
        h.push(' ');
    }
    h.push('\n');
    let mut b = b"\x93NUMPY\x01\x00".to_vec();
    b.extend((h.len() as u16).to_le_bytes());
    b.extend(h.as_bytes());
    b.extend(data);
    b
}

#[test]
fn npy_rejects_bad_files_with_clear_errors() {
    let dir = tmp("npy-bad");
    let check = |name: &str, bytes: Vec<u8>, want: &str| {
        let p = dir.join(name);
        std::fs::write(&p, bytes).unwrap();
        let e = NpyDataset::new(&p).err().unwrap().to_string();
        assert!(e.contains(name) && e.contains(want), "{name}: {e}");
    };
    let ok = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }";
    // The well-formed file reads; each variant below breaks one thing.
    std::fs::write(dir.join("ok.npy"), raw_npy(ok, &[0; 16])).unwrap();
    assert_eq!(NpyDataset::new(dir.join("ok.npy")).unwrap().len(), 2);
    check("magic.npy", b"PK\x03\x04 not numpy at all".to_vec(), "not a .npy file");
    check("short.npy", raw_npy(ok, &[0; 12]), "needs 16 bytes, found 12 (truncated)");
    check("cut.npy", raw_npy(ok, &[])[..40].to_vec(), "truncated header");
    check("big.npy", raw_npy(&ok.replace("<f4", ">f4"), &[0; 16]), "big-endian");
    check("fortran.npy", raw_npy(&ok.replace("False", "True"), &[0; 16]), "Fortran-order");
    check("complex.npy", raw_npy(&ok.replace("<f4", "<c8"), &[0; 32]), "unsupported dtype '<c8'");
    check("scalar.npy", raw_npy(&ok.replace("(2, 2)", "()"), &[0; 4]), "0-d array");
}
