//! `Compare` against torch.utils.benchmark's own (reference/gen_benchmark_compare.py, torch
//! 2.15, writes reference/data/benchmark_compare.json): the same measurements (two labels, two
//! thread counts, three sizes, a replicate to merge and a missing cell) give PyTorch's tables
//! character for character: plain, with trimmed significant figures, colorized by column and by
//! row (ANSI codes), and with high-variance cells highlighted.

use pyrite_benchmark::{Compare, Measurement, TaskSpec};
use serde_json::Value;

#[test]
fn tables_match_pytorch() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../reference/data/benchmark_compare.json");
    let data: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let ms: Vec<Measurement> = data["measurements"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let text = |k: &str| s[k].as_str().map(str::to_string);
            Measurement::new(
                s["number_per_run"].as_u64().unwrap() as usize,
                s["raw_times"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect(),
                TaskSpec {
                    stmt: text("stmt").unwrap(),
                    label: text("label"),
                    sub_label: text("sub_label"),
                    description: text("description"),
                    num_threads: s["num_threads"].as_u64().unwrap() as usize,
                    ..Default::default()
                },
            )
        })
        .collect();
    let tables = &data["tables"];
    let check = |name: &str, setup: &dyn Fn(&mut Compare)| {
        let mut c = Compare::new(ms.clone());
        setup(&mut c);
        let want = tables[name].as_str().unwrap();
        assert_eq!(c.to_string(), want, "{name}:\n{}\nPyTorch:\n{want}", c);
    };
    check("plain", &|_| {});
    check("trimmed", &|c| c.trim_significant_figures());
    check("colorized", &|c| {
        c.trim_significant_figures();
        c.colorize(false)
    });
    check("rowwise", &|c| c.colorize(true));
    check("warnings", &|c| {
        c.trim_significant_figures();
        c.highlight_warnings()
    });
}
