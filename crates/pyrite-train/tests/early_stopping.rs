//! EarlyStopping with Keras 3's semantics: when it stops, what counts as an improvement
//! (min_delta as a magnitude, NaN never), a baseline that is never beaten, patience 0, max
//! mode, and restoring the best weights.

use pyrite::nn::Linear;
use pyrite::train::{EarlyStopping, EarlyStoppingOptions, Mode};

/// The epoch (from 0) at which `step` first says stop, feeding `values` in order.
fn stop_epoch(options: EarlyStoppingOptions, values: &[f64]) -> Option<usize> {
    let model = Linear::new(1, 1).unwrap();
    let mut s = EarlyStopping::new(options).unwrap();
    values.iter().position(|&v| s.step(v, &model).unwrap())
}

fn opts() -> EarlyStoppingOptions {
    EarlyStoppingOptions::default()
}

#[test]
fn patience_counts_epochs_without_improvement() {
    let losses = [1.0, 0.8, 0.9, 0.85, 0.95, 0.7];
    assert_eq!(stop_epoch(EarlyStoppingOptions { patience: 2, ..opts() }, &losses), Some(3));
    assert_eq!(stop_epoch(EarlyStoppingOptions { patience: 3, ..opts() }, &losses), Some(4));
    assert_eq!(stop_epoch(EarlyStoppingOptions { patience: 4, ..opts() }, &losses), None);
    // An improvement resets the count.
    assert_eq!(
        stop_epoch(EarlyStoppingOptions { patience: 2, ..opts() }, &[1.0, 1.1, 0.9, 1.0, 0.8, 0.9, 0.95]),
        Some(6)
    );
}

#[test]
fn patience_zero_stops_at_the_first_epoch_that_does_not_improve() {
    assert_eq!(stop_epoch(opts(), &[1.0, 0.9, 0.9]), Some(2)); // equal is not better
    assert_eq!(stop_epoch(opts(), &[1.0, 0.9, 0.8, 0.85]), Some(3));
    // Never on the first epoch, even when it is NaN (Keras's `epoch > 0`).
    assert_eq!(stop_epoch(opts(), &[f64::NAN, 1.0, 1.0]), Some(2));
}

#[test]
fn min_delta_is_a_magnitude_in_either_mode() {
    // 0.95 beats 1.0 by 0.05: not more than 0.1, so no improvement.
    for d in [0.1, -0.1] {
        let o = || EarlyStoppingOptions { min_delta: d, patience: 1, ..opts() };
        assert_eq!(stop_epoch(o(), &[1.0, 0.95, 0.85]), Some(1), "min_delta {d}");
        assert_eq!(stop_epoch(o(), &[1.0, 0.85, 0.7, 0.55]), None, "min_delta {d}");
        let max = || EarlyStoppingOptions { mode: Mode::Max, min_delta: d, patience: 1, ..opts() };
        assert_eq!(stop_epoch(max(), &[0.5, 0.55, 0.6]), Some(1), "max, min_delta {d}");
        assert_eq!(stop_epoch(max(), &[0.5, 0.65, 0.8]), None, "max, min_delta {d}");
    }
}

#[test]
fn nan_never_improves() {
    let model = Linear::new(1, 1).unwrap();
    let mut s = EarlyStopping::new(EarlyStoppingOptions { patience: 5, ..opts() }).unwrap();
    for v in [1.0, f64::NAN, 0.5, f64::NAN] {
        s.step(v, &model).unwrap();
    }
    assert_eq!((s.best_score(), s.best_epoch(), s.wait()), (Some(0.5), Some(2), 1));
}

#[test]
fn a_baseline_never_beaten_stops_after_patience_epochs() {
    // Improving epochs that stay above the baseline do not reset the wait (they never stop
    // training themselves), so the first epoch that does not improve may stop it.
    let o = || EarlyStoppingOptions { baseline: Some(0.5), patience: 3, ..opts() };
    assert_eq!(stop_epoch(o(), &[1.0, 0.9, 0.8, 0.7, 0.6]), None);
    assert_eq!(stop_epoch(o(), &[1.0, 0.9, 0.8, 0.85]), Some(3));
    assert_eq!(stop_epoch(EarlyStoppingOptions { patience: 3, ..opts() }, &[1.0, 0.9, 0.8, 0.85]), None);
    // Beating the baseline resets it.
    assert_eq!(stop_epoch(o(), &[1.0, 0.9, 0.4, 0.45, 0.46, 0.47, 0.48]), Some(5));
    // Max mode.
    let om = || EarlyStoppingOptions { mode: Mode::Max, baseline: Some(0.9), patience: 2, ..opts() };
    assert_eq!(stop_epoch(om(), &[0.5, 0.6, 0.55]), Some(2));
    assert_eq!(
        stop_epoch(EarlyStoppingOptions { mode: Mode::Max, patience: 2, ..opts() }, &[0.5, 0.6, 0.55]),
        None
    );
}

#[test]
fn restore_best_weights_loads_the_best_epochs_state_when_stopping() {
    let model = Linear::new(2, 1).unwrap();
    let set = |v: f32| {
        model.weight.detach().fill_(v).unwrap();
    };
    let mut s =
        EarlyStopping::new(EarlyStoppingOptions { patience: 1, restore_best_weights: true, ..opts() })
            .unwrap();
    for (epoch, (w, loss)) in [(1.0f32, 0.9), (2.0, 0.5), (3.0, 0.7), (4.0, 0.8)].into_iter().enumerate() {
        set(w);
        if s.step(loss, &model).unwrap() {
            assert_eq!(epoch, 2);
            break;
        }
    }
    assert_eq!(model.weight.detach().to_vec2::<f32>().unwrap(), vec![vec![2.0, 2.0]]);
    assert_eq!(s.stopped_epoch(), Some(2));
    // The copy is a copy: training on after it does not change it.
    set(9.0);
    s.restore_best(&model).unwrap();
    assert_eq!(model.weight.detach().to_vec2::<f32>().unwrap(), vec![vec![2.0, 2.0]]);
}

#[test]
fn nan_options_are_errors() {
    assert!(EarlyStopping::new(EarlyStoppingOptions { min_delta: f64::NAN, ..opts() }).is_err());
    assert!(EarlyStopping::new(EarlyStoppingOptions { baseline: Some(f64::NAN), ..opts() }).is_err());
}

#[test]
fn epochs_before_start_from_epoch_are_a_warm_up() {
    // keras.callbacks.EarlyStopping(patience=0, start_from_epoch=2): epochs 0 and 1 are
    // ignored, epoch 2 is the first monitored (and so the best), epoch 3 does not improve
    let losses = [1.0, 2.0, 3.0, 4.0];
    assert_eq!(stop_epoch(opts(), &losses), Some(1));
    assert_eq!(stop_epoch(EarlyStoppingOptions { start_from_epoch: 2, ..opts() }, &losses), Some(3));
    let model = Linear::new(1, 1).unwrap();
    let mut s = EarlyStopping::new(EarlyStoppingOptions { start_from_epoch: 2, ..opts() }).unwrap();
    for v in [0.5, 0.1, 0.9] {
        assert!(!s.step(v, &model).unwrap());
    }
    assert_eq!((s.best_score(), s.best_epoch(), s.wait()), (Some(0.9), Some(2), 0));
}
