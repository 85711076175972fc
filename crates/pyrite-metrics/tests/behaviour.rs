//! What the reference data cannot show: errors for bad inputs and options, the state left as it
//! was by a failed update, and `MetricCollection`.

use pyrite_core::{ErrorKind, Tensor};
use pyrite_metrics::*;

fn t1(v: &[i64]) -> Tensor {
    Tensor::from_vec(v.to_vec(), [v.len()]).unwrap()
}

fn scores(rows: &[[f32; 3]]) -> Tensor {
    Tensor::new(rows.to_vec()).unwrap()
}

#[test]
fn a_target_out_of_range_is_an_index_error() {
    let mut acc = MulticlassAccuracy::new(3, MulticlassOptions::default()).unwrap();
    let e = acc.update(&t1(&[0, 1, 2]), &t1(&[0, 3, 1])).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Index);
    assert!(e.message().contains("[3]"), "{}", e.message());
    // ignore_index makes the same value acceptable, and leaves its position out: class 0 right,
    // class 1 missed, class 2 predicted once wrongly (so it counts, with recall 0).
    let mut acc =
        MulticlassAccuracy::new(3, MulticlassOptions { ignore_index: Some(3), ..Default::default() })
            .unwrap();
    acc.update(&t1(&[0, 1, 2]), &t1(&[0, 3, 1])).unwrap();
    assert!((acc.compute().unwrap().item::<f64>().unwrap() - 1.0 / 3.0).abs() < 1e-6);
}

#[test]
fn scores_with_another_number_of_classes_are_a_shape_error() {
    let mut f1 = MulticlassF1Score::new(4, MulticlassOptions::default()).unwrap();
    let e = f1.update(&scores(&[[0.2, 0.3, 0.5]]), &t1(&[2])).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Shape);
    let mut auroc = MulticlassAUROC::new(4, MulticlassCurveOptions::default()).unwrap();
    assert_eq!(auroc.update(&scores(&[[0.2, 0.3, 0.5]]), &t1(&[2])).unwrap_err().kind(), ErrorKind::Shape);
}

#[test]
fn a_0d_target_with_1d_scores_is_a_shape_error_not_a_panic() {
    let (p, t) = (Tensor::new([0.2f32, 0.3, 0.5]).unwrap(), Tensor::scalar(1i64).unwrap());
    let mut acc = MulticlassAccuracy::new(3, MulticlassOptions::default()).unwrap();
    assert_eq!(acc.update(&p, &t).unwrap_err().kind(), ErrorKind::Shape);
    let mut auroc = MulticlassAUROC::new(3, MulticlassCurveOptions::default()).unwrap();
    assert_eq!(auroc.update(&p, &t).unwrap_err().kind(), ErrorKind::Shape);
}

#[test]
fn preds_and_target_of_different_shapes_are_a_shape_error() {
    let mut p = BinaryPrecision::new(BinaryOptions::default()).unwrap();
    assert_eq!(
        p.update(&Tensor::new([0.2f32, 0.7]).unwrap(), &t1(&[1, 0, 1])).unwrap_err().kind(),
        ErrorKind::Shape
    );
    let mut mse = MeanSquaredError::new(MeanSquaredErrorOptions::default());
    let e = mse.update(&Tensor::new([1.0f32, 2.0]).unwrap(), &Tensor::new([1.0f32]).unwrap()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Shape);
}

#[test]
fn binary_targets_other_than_0_and_1_are_a_value_error() {
    let mut acc = BinaryAccuracy::new(BinaryOptions::default()).unwrap();
    let e = acc.update(&Tensor::new([0.2f32, 0.7]).unwrap(), &t1(&[1, 2])).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Value);
    let mut auroc = BinaryAUROC::new(BinaryCurveOptions::default()).unwrap();
    assert_eq!(
        auroc.update(&Tensor::new([0.2f32, 0.7]).unwrap(), &t1(&[1, 2])).unwrap_err().kind(),
        ErrorKind::Value
    );
    // Integer scores for a curve metric are a dtype error.
    assert_eq!(auroc.update(&t1(&[0, 1]), &t1(&[1, 0])).unwrap_err().kind(), ErrorKind::DType);
}

#[test]
fn options_out_of_range_are_errors() {
    assert!(MulticlassAccuracy::new(3, MulticlassOptions { top_k: 4, ..Default::default() }).is_err());
    assert!(MulticlassAccuracy::new(1, MulticlassOptions::default()).is_err());
    assert!(BinaryAccuracy::new(BinaryOptions { threshold: 1.5, ..Default::default() }).is_err());
    assert!(BinaryPrecision::new(BinaryOptions { zero_division: 0.5, ..Default::default() }).is_err());
    assert!(BinaryFBetaScore::new(0.0, BinaryOptions::default()).is_err());
    assert!(BinaryAUROC::new(BinaryCurveOptions { thresholds: Some(1), ..Default::default() }).is_err());
    let micro = MulticlassCurveOptions { average: Average::Micro, ..Default::default() };
    assert!(MulticlassAveragePrecision::new(3, micro).is_err());
}

#[test]
fn r2_needs_two_samples() {
    let mut r2 = R2Score::new();
    r2.update(&Tensor::new([1.0f32]).unwrap(), &Tensor::new([2.0f32]).unwrap()).unwrap();
    assert_eq!(r2.compute().unwrap_err().kind(), ErrorKind::Value);
}

#[test]
fn a_failed_forward_leaves_the_state_as_it_was() {
    let mut acc =
        MulticlassAccuracy::new(3, MulticlassOptions { average: Average::Micro, ..Default::default() })
            .unwrap();
    acc.update(&t1(&[0, 1, 2, 2]), &t1(&[0, 1, 2, 0])).unwrap();
    assert!(acc.forward(&t1(&[0]), &t1(&[7])).is_err());
    assert_eq!(acc.update_count(), 1);
    assert_eq!(acc.compute().unwrap().item::<f64>().unwrap(), 0.75);
}

#[test]
fn states_are_sums_that_merge_by_addition() {
    let mut a = MulticlassRecall::new(3, MulticlassOptions::default()).unwrap();
    let mut b = a.clone();
    a.update(&t1(&[0, 1]), &t1(&[0, 2])).unwrap();
    b.update(&t1(&[2, 2]), &t1(&[2, 1])).unwrap();
    let states = a.states().unwrap();
    assert_eq!(states.iter().map(|s| s.name).collect::<Vec<_>>(), ["tp", "fp", "tn", "fn"]);
    assert!(states.iter().all(|s| s.reduce == Reduce::Sum));
    a.merge_states(b.metric_states()).unwrap();
    assert_eq!(a.metric_states().get("tp").unwrap().to_vec::<i64>().unwrap(), vec![1, 0, 1]);
    assert_eq!(a.update_count(), 2);
    // States of another kind of metric do not merge.
    let mse = MeanSquaredError::new(MeanSquaredErrorOptions::default());
    assert!(a.merge_states(mse.metric_states()).is_err());
}

#[test]
fn exact_curve_metrics_keep_their_inputs_and_binned_ones_a_count() {
    let exact = BinaryAUROC::new(BinaryCurveOptions::default()).unwrap();
    let reduces: Vec<_> = exact.states().unwrap().iter().map(|s| (s.name, s.reduce)).collect();
    assert_eq!(reduces, [("preds", Reduce::Cat), ("target", Reduce::Cat)]);
    let binned =
        MulticlassAUROC::new(3, MulticlassCurveOptions { thresholds: Some(5), ..Default::default() })
            .unwrap();
    let states = binned.states().unwrap();
    assert_eq!((states[0].name, states[0].reduce), ("confmat", Reduce::Sum));
    assert_eq!(states[0].value.dims(), [5, 3, 2, 2]);
}

#[test]
fn a_collection_updates_its_metrics_together_under_prefixed_names() {
    let opts = MulticlassOptions::default();
    let mut metrics = MetricCollection::new()
        .with("acc", MulticlassAccuracy::new(3, opts).unwrap())
        .unwrap()
        .with("precision", MulticlassPrecision::new(3, opts).unwrap())
        .unwrap()
        .prefix("val_");
    assert!(metrics.add("acc", Box::new(MulticlassRecall::new(3, opts).unwrap())).is_err());
    let (p1, t1_) = (t1(&[0, 2, 1, 2]), t1(&[0, 2, 2, 2]));
    let (p2, t2) = (t1(&[1, 1, 0]), t1(&[1, 0, 0]));
    let batch = metrics.forward(&p1, &t1_).unwrap();
    metrics.update(&p2, &t2).unwrap();
    let all = metrics.compute().unwrap();
    assert_eq!(all.keys().map(String::as_str).collect::<Vec<_>>(), ["val_acc", "val_precision"]);

    let mut acc = MulticlassAccuracy::new(3, opts).unwrap();
    let acc_batch = acc.forward(&p1, &t1_).unwrap().item::<f64>().unwrap();
    acc.update(&p2, &t2).unwrap();
    assert_eq!(batch["val_acc"].item::<f64>().unwrap(), acc_batch);
    assert_eq!(all["val_acc"].item::<f64>().unwrap(), acc.compute().unwrap().item::<f64>().unwrap());
    assert_eq!(metrics.get("acc").unwrap().update_count(), 2);

    // A failing metric is named in the error, with its kind.
    let e = metrics.update(&t1(&[5]), &t1(&[0])).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Index);
    assert!(e.message().starts_with("metric 'acc'"), "{}", e.message());
    metrics.reset();
    assert_eq!(metrics.get("precision").unwrap().update_count(), 0);
}
