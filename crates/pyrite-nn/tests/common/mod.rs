//! Reading the PyTorch reference data (`reference/data/*.safetensors` and `.json`) that
//! `reference/gen_nn_*.py` record.
#![allow(dead_code)]

use pyrite::{DType, Tensor};
use serde_json::Value as J;
use std::collections::HashMap;

pub fn data_path(name: &str) -> String {
    format!("{}/../../reference/data/{name}", env!("CARGO_MANIFEST_DIR"))
}

fn dtype_of(s: safetensors::Dtype) -> DType {
    use safetensors::Dtype as D;
    match s {
        D::F32 => DType::F32,
        D::F64 => DType::F64,
        D::F16 => DType::F16,
        D::BF16 => DType::BF16,
        D::I64 => DType::I64,
        D::I32 => DType::I32,
        D::U8 => DType::U8,
        D::BOOL => DType::Bool,
        other => panic!("unsupported dtype {other:?}"),
    }
}

/// Every tensor of a safetensors file, and its metadata.
pub fn load_tensors(name: &str) -> (HashMap<String, Tensor>, HashMap<String, String>) {
    let bytes = std::fs::read(data_path(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    let (_, meta) = safetensors::SafeTensors::read_metadata(&bytes).unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let mut out = HashMap::new();
    for (k, v) in st.tensors() {
        let t = Tensor::from_raw_bytes(v.data(), v.shape(), dtype_of(v.dtype())).unwrap();
        out.insert(k, t);
    }
    (out, meta.metadata().clone().unwrap_or_default())
}

pub fn load_json(name: &str) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(data_path(name)).unwrap()).unwrap()
}

/// `|got - want| <= atol + rtol |want|` everywhere (in f64), with a message naming `what`.
pub fn assert_close(got: &Tensor, want: &Tensor, atol: f64, rtol: f64, what: &str) {
    assert_eq!(got.dims(), want.dims(), "{what}: shape");
    let g = got.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap();
    let w = want.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap();
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        let ok = (a - b).abs() <= atol + rtol * b.abs() || (a.is_nan() && b.is_nan()) || a == b;
        assert!(ok, "{what}: element {i}: got {a}, want {b} (atol {atol}, rtol {rtol})");
    }
}

/// A case's keyword arguments (PyTorch's names, JSON values).
pub struct Kw<'a>(pub &'a serde_json::Map<String, J>);

impl Kw<'_> {
    pub fn get(&self, k: &str) -> Option<&J> {
        self.0.get(k).filter(|v| !v.is_null())
    }
    pub fn u(&self, k: &str) -> usize {
        self.get(k).unwrap_or_else(|| panic!("kwarg {k}")).as_u64().unwrap() as usize
    }
    pub fn u_or(&self, k: &str, d: usize) -> usize {
        self.get(k).map_or(d, |v| v.as_u64().unwrap() as usize)
    }
    pub fn i_or(&self, k: &str, d: i64) -> i64 {
        self.get(k).map_or(d, |v| v.as_i64().unwrap())
    }
    pub fn f_or(&self, k: &str, d: f64) -> f64 {
        self.get(k).map_or(d, |v| v.as_f64().unwrap())
    }
    pub fn b_or(&self, k: &str, d: bool) -> bool {
        self.get(k).map_or(d, |v| v.as_bool().unwrap())
    }
    pub fn opt_f(&self, k: &str) -> Option<f64> {
        self.get(k).map(|v| v.as_f64().unwrap())
    }
    /// An int or a list of ints, as a list.
    pub fn ints(&self, k: &str) -> Vec<i64> {
        match self.get(k) {
            Some(J::Array(a)) => a.iter().map(|v| v.as_i64().unwrap()).collect(),
            Some(v) => vec![v.as_i64().unwrap()],
            None => vec![],
        }
    }
    pub fn sizes(&self, k: &str) -> Vec<usize> {
        self.ints(k).into_iter().map(|v| v as usize).collect()
    }
}
