//! Searchers and PBT's explore as specifications: the same seed gives the same suggestions,
//! and explore perturbs as Ray's PBT does.

use pyrite_tune::schedulers::{Mutation, PbtOptions, PopulationBasedTraining};
use pyrite_tune::search::{
    BohbOptions, BohbSearch, SearchProperties, Searcher, Suggestion, TpeOptions, TpeSearch,
};
use pyrite_tune::{choice, loguniform, qrandint, uniform, Config, Metrics, Mode, ParamSpace};

fn space() -> ParamSpace {
    ParamSpace::new()
        .with("lr", loguniform(1e-4, 1e-1))
        .with("width", qrandint(8, 64, 8))
        .with("act", choice(["relu", "gelu", "tanh"]))
        .with("drop", uniform(0.0, 0.5))
}

/// 30 suggestions, each trial completed with a value computed from its config.
fn run(mut s: impl Searcher) -> Vec<Config> {
    let space = space();
    s.set_search_properties(&SearchProperties {
        metric: "loss",
        mode: Mode::Min,
        space: &space,
        num_samples: None,
    })
    .unwrap();
    (0..30)
        .map(|i| {
            let id = i.to_string();
            let Suggestion::Config(c) = s.suggest(&id).unwrap() else { panic!("a config") };
            let loss = (c.get::<f64>("lr").unwrap().log10() + 2.5).abs() + c.get::<f64>("drop").unwrap();
            s.on_trial_result(&id, &Metrics::from([("loss", loss), ("hyperband_info/budget", 1.0)]));
            s.on_trial_complete(&id, Some(&Metrics::from([("loss", loss)])), false);
            c
        })
        .collect()
}

#[test]
fn the_same_seed_gives_the_same_suggestions_and_another_seed_others() {
    let tpe = |seed| run(TpeSearch::new(TpeOptions { seed: Some(seed), ..Default::default() }));
    assert_eq!(tpe(3), tpe(3));
    assert_ne!(tpe(3), tpe(4));
    let bohb = |seed| {
        run(BohbSearch::new(BohbOptions {
            seed: Some(seed),
            min_points_in_model: Some(3),
            ..Default::default()
        }))
    };
    assert_eq!(bohb(3), bohb(3));
    assert_ne!(bohb(3), bohb(4));
    // Every suggestion stays in its domain.
    for c in tpe(5).iter().chain(bohb(5).iter()) {
        let w: i64 = c.get("width").unwrap();
        assert!(w % 8 == 0 && (8..=64).contains(&w), "{c}");
        assert!((1e-4..=1e-1).contains(&c.get::<f64>("lr").unwrap()), "{c}");
        assert!(["relu", "gelu", "tanh"].contains(&c.get::<String>("act").unwrap().as_str()));
    }
}

#[test]
fn pbt_explore_perturbs_numbers_by_its_factors_and_moves_lists_to_a_neighbour() {
    let mut pbt = PopulationBasedTraining::new(PbtOptions {
        hyperparam_mutations: vec![
            ("lr".into(), Mutation::from(uniform(0.0, 1.0))),
            ("batch".into(), Mutation::Choices(vec![16.into(), 32.into(), 64.into(), 128.into()])),
            ("layers".into(), Mutation::from(uniform(1.0, 10.0))),
        ],
        resample_probability: 0.0,
        seed: Some(1),
        ..Default::default()
    })
    .unwrap();
    let mut c = Config::default();
    c.set("lr", 0.5.into());
    c.set("batch", 32.into());
    c.set("layers", 4.into());
    c.set("fixed", "kept".into());
    for _ in 0..50 {
        let n = pbt.explore(&c);
        let lr: f64 = n.get("lr").unwrap();
        assert!((lr - 0.6).abs() < 1e-12 || (lr - 0.4).abs() < 1e-12, "lr x 1.2 or x 0.8: {lr}");
        let b: i64 = n.get("batch").unwrap();
        assert!(b == 16 || b == 64, "a neighbour of 32: {b}");
        // An integer stays an integer: round(4 x 1.2) = 5, round(4 x 0.8) = 3.
        let l = n.value("layers").unwrap();
        assert!(l.is_i64() && [3, 5].contains(&l.as_i64().unwrap()), "{l}");
        assert_eq!(n.get::<String>("fixed").unwrap(), "kept");
    }
    // With resampling always on, values come from the distribution and the list.
    let mut pbt = PopulationBasedTraining::new(PbtOptions {
        hyperparam_mutations: vec![("lr".into(), Mutation::from(uniform(0.0, 1.0)))],
        resample_probability: 1.0,
        seed: Some(2),
        ..Default::default()
    })
    .unwrap();
    let lrs: Vec<f64> = (0..20).map(|_| pbt.explore(&c).get("lr").unwrap()).collect();
    assert!(lrs.iter().all(|x| (0.0..1.0).contains(x)) && lrs.iter().any(|&x| x != 0.6 && x != 0.4));
}
