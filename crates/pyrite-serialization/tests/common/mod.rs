//! Helpers shared by the serialization tests: where the PyTorch fixtures live and how to list
//! the tensors inside a loaded object.
#![allow(dead_code)]

use pyrite_core::Tensor;
use pyrite_serialization::Object;

/// `reference/data/pt/<name>`.
pub fn fixture(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../reference/data/pt").join(name)
}

/// How a dict key appears in a tensor path: strings as they are, ints in decimal.
fn key_text(k: &Object) -> String {
    match k {
        Object::Str(s) => s.clone(),
        Object::Int(i) => i.to_string(),
        other => format!("{other:?}"),
    }
}

/// Every tensor inside nested dicts, lists and tuples, with its path ("state/0/exp_avg"), in
/// order; the same walk as `walk` in reference/gen_pt.py.
pub fn tensors(obj: &Object) -> Vec<(String, Tensor)> {
    fn go(o: &Object, path: &str, out: &mut Vec<(String, Tensor)>) {
        let join = |k: String| if path.is_empty() { k } else { format!("{path}/{k}") };
        match o {
            Object::Tensor(t) => out.push((path.to_string(), t.clone())),
            Object::Dict(d) | Object::OrderedDict(d) => {
                for (k, v) in d.iter() {
                    go(v, &join(key_text(k)), out);
                }
            }
            Object::List(v) | Object::Tuple(v) => {
                for (i, x) in v.iter().enumerate() {
                    go(x, &join(i.to_string()), out);
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    go(obj, "", &mut out);
    out
}

/// A unique temporary folder for one test.
pub fn temp_dir(test: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("pyrite-ser-{test}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}
