//! BOHB on the BOHB paper's "counting ones" (4 binary and 4 continuous dimensions; a budget of
//! b samples gives a noisy estimate), run as HpBandSter runs it (budgets 9, 27, 81, 243; eta 3;
//! one worker), against HpBandSter's own BOHB: our median regret reaches HpBandSter's final one
//! with no more budget. HpBandSter's numbers: reference/gen_tune_bohb.py ->
//! reference/data/tune/bohb_benchmark.json.

use pyrite_tune::search::{
    BohbOptions, BohbSearch, SearchProperties, Searcher, Suggestion, HYPERBAND_BUDGET,
};
use pyrite_tune::{choice, uniform, Config, Metrics, Mode, ParamSpace, Rng};

const BUDGETS: [f64; 4] = [9.0, 27.0, 81.0, 243.0];
const ETA: f64 = 3.0;

fn space() -> ParamSpace {
    let mut s = ParamSpace::new();
    for i in 0..4 {
        s = s.with(format!("c{i}"), choice([0, 1]));
    }
    for i in 0..4 {
        s = s.with(format!("x{i}"), uniform(0.0, 1.0));
    }
    s
}

/// The noise-free value: sum of the binary and the continuous dimensions (8 at best).
fn true_value(c: &Config) -> f64 {
    (0..4).map(|i| c.get::<f64>(&format!("c{i}")).unwrap() + c.get::<f64>(&format!("x{i}")).unwrap()).sum()
}

/// The loss at budget `b`: minus (the binaries plus, per continuous x, the mean of b Bernoulli(x)).
fn loss(c: &Config, b: f64, rng: &mut Rng) -> f64 {
    let mut v = 0.0;
    for i in 0..4 {
        v += c.get::<f64>(&format!("c{i}")).unwrap();
        let x: f64 = c.get(&format!("x{i}")).unwrap();
        let hits = (0..b as usize).filter(|_| rng.uniform() < x).count();
        v += hits as f64 / b;
    }
    -v
}

/// One seed: HpBandSter's iterations until `max_units` of max budget are spent. Returns
/// `(cumulative budget in max-budget units, regret of the incumbent)` after each evaluation on
/// the max budget.
fn run(seed: u64, max_units: f64) -> Vec<(f64, f64)> {
    let space = space();
    let mut bohb = BohbSearch::new(BohbOptions { seed: Some(seed), ..Default::default() });
    bohb.set_search_properties(&SearchProperties {
        metric: "loss",
        mode: Mode::Min,
        space: &space,
        num_samples: None,
    })
    .unwrap();
    let mut noise = Rng::seed_from(1000 + seed);
    let s_count = BUDGETS.len();
    let (mut spent, mut next_id) = (0.0, 0usize);
    let mut best: Option<(f64, f64)> = None; // (observed loss at max budget, true value)
    let mut out = vec![];
    for it in 0.. {
        let s = s_count - 1 - (it % s_count);
        let n0 = ((s_count / (s + 1)) as f64 * ETA.powi(s as i32)).floor() as usize;
        let ns: Vec<usize> = (0..=s).map(|k| ((n0 as f64 * ETA.powi(-(k as i32))) as usize).max(1)).collect();
        let budgets = &BUDGETS[s_count - 1 - s..];
        // Stage 0: new configurations, sampled one at a time (later ones see earlier results).
        let mut stage: Vec<(String, Config)> = vec![];
        let mut losses: Vec<f64> = vec![];
        for k in 0..=s {
            let b = budgets[k];
            if k == 0 {
                for _ in 0..ns[0] {
                    let id = format!("t{next_id}");
                    next_id += 1;
                    let Suggestion::Config(c) = bohb.suggest(&id).unwrap() else { panic!("no config") };
                    let l = loss(&c, b, &mut noise);
                    bohb.on_trial_result(&id, &Metrics::from([("loss", l), (HYPERBAND_BUDGET, b)]));
                    spent += b / 243.0;
                    stage.push((id, c));
                    losses.push(l);
                }
            } else {
                losses = stage
                    .iter()
                    .map(|(id, c)| {
                        let l = loss(c, b, &mut noise);
                        bohb.on_trial_result(id, &Metrics::from([("loss", l), (HYPERBAND_BUDGET, b)]));
                        spent += b / 243.0;
                        l
                    })
                    .collect();
            }
            if b == 243.0 {
                for ((_, c), &l) in stage.iter().zip(&losses) {
                    if best.is_none_or(|(bl, _)| l < bl) {
                        best = Some((l, true_value(c)));
                    }
                }
                // One row per max-budget evaluation, with the incumbent after the stage.
                for _ in &stage {
                    out.push((spent, 8.0 - best.unwrap().1));
                }
            }
            if k < s {
                // Successive halving: keep the best ns[k + 1].
                let mut order: Vec<usize> = (0..stage.len()).collect();
                order.sort_by(|&a, &b| losses[a].total_cmp(&losses[b]));
                let keep: Vec<usize> = order.into_iter().take(ns[k + 1]).collect();
                let mut kept: Vec<(String, Config)> = vec![];
                for (i, e) in stage.into_iter().enumerate() {
                    if keep.contains(&i) {
                        kept.push(e);
                    } else {
                        bohb.on_trial_complete(&e.0, None, false);
                    }
                }
                stage = kept;
            }
        }
        for (id, _) in stage {
            bohb.on_trial_complete(&id, None, false);
        }
        if spent >= max_units {
            break;
        }
    }
    out
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        0.5 * (v[n / 2 - 1] + v[n / 2])
    }
}

#[test]
fn bohb_reaches_hpbandsters_regret_with_no_more_budget() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../reference/data/tune/bohb_benchmark.json");
    let r: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let theirs = &r["methods"]["bohb"];
    let grid: Vec<f64> = theirs["grid"].as_array().unwrap().iter().map(|g| g.as_f64().unwrap()).collect();
    let their_median: Vec<Option<f64>> =
        theirs["median_regret"].as_array().unwrap().iter().map(|v| v.as_f64()).collect();
    let last = *grid.last().unwrap();
    let target = their_median.last().unwrap().unwrap();
    let runs: Vec<Vec<(f64, f64)>> = (0..20).map(|s| run(s, last)).collect();
    let ours_at = |g: f64| -> Option<f64> {
        let per_seed: Option<Vec<f64>> =
            runs.iter().map(|r| r.iter().take_while(|(b, _)| *b <= g + 1e-9).last().map(|x| x.1)).collect();
        per_seed.map(median)
    };
    let mut line = String::new();
    for (g, t) in grid.iter().zip(&their_median).filter(|(g, _)| (**g as usize).is_multiple_of(10)) {
        line += &format!(
            " {g}: ours {:?} HpBandSter {:?} |",
            ours_at(*g).map(|x| (x * 1000.0).round() / 1000.0),
            t.map(|x| (x * 1000.0).round() / 1000.0)
        );
    }
    println!("median regret by budget (units of max budget):{line}");
    let reached = grid.iter().find(|&&g| ours_at(g).is_some_and(|m| m <= target));
    println!(
        "HpBandSter's final median regret {target:.4} after {last} units; ours reaches it at {reached:?}"
    );
    assert!(reached.is_some(), "our median regret never reached HpBandSter's {target} within {last} units");
}
