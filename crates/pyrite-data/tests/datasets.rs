//! Datasets, `random_split` and worker info, specified by PyTorch's behaviour.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use pyrite::data::{
    get_worker_info, random_split, set_worker_info, ChainDataset, ConcatDataset, Dataset, FnDataset,
    IterableDataset, Sample, SplitLength, StackDataset, Subset, TensorDataset, WorkerInfo,
};
use pyrite::{DType, ErrorKind, Generator, Result, Tensor};

fn range(n: usize) -> Arc<dyn Dataset> {
    Arc::new(FnDataset::new(n, |i| Ok(Sample::from(i))))
}

fn ints(ds: &dyn Dataset) -> Vec<i64> {
    (0..ds.len()).map(|i| ds.get(i).unwrap().as_int().unwrap()).collect()
}

#[test]
fn tensor_dataset_rows() {
    let x = Tensor::arange(0., 6., 1., DType::F32).unwrap().reshape([3, 2]).unwrap();
    let y = Tensor::new([7i64, 8, 9]).unwrap();
    let ds = TensorDataset::new(vec![x, y]).unwrap();
    assert_eq!(ds.len(), 3);
    let s = ds.get(1).unwrap();
    let t = s.as_tuple().unwrap();
    assert_eq!(t.len(), 2);
    assert_eq!(t[0].as_tensor().unwrap().to_vec::<f32>().unwrap(), vec![2., 3.]);
    assert_eq!(t[1].as_tensor().unwrap().dims(), &[] as &[usize]);
    assert_eq!(t[1].as_tensor().unwrap().item::<i64>().unwrap(), 8);
    assert_eq!(ds.get(3).unwrap_err().kind(), ErrorKind::Index);
}

#[test]
fn tensor_dataset_size_mismatch() {
    let e = TensorDataset::new(vec![
        Tensor::zeros([3], DType::F32).unwrap(),
        Tensor::zeros([4], DType::F32).unwrap(),
    ])
    .err()
    .unwrap();
    assert!(e.message().starts_with("Size mismatch between tensors"), "{}", e.message());
    assert!(TensorDataset::new(vec![]).is_err());
    assert!(TensorDataset::new(vec![Tensor::scalar(1f32).unwrap()]).is_err());
}

#[test]
fn subset_maps_indices() {
    let s = Subset::new(range(10), vec![7, 2, 2]);
    assert_eq!(ints(&s), vec![7, 2, 2]);
    assert_eq!(s.get(3).unwrap_err().kind(), ErrorKind::Index);
    let bad = Subset::new(range(3), vec![5]);
    assert_eq!(bad.get(0).unwrap_err().kind(), ErrorKind::Index);
}

#[test]
fn concat_dataset_maps_like_bisect_right() {
    let ds = ConcatDataset::new(vec![range(2), range(0), range(3)]).unwrap();
    assert_eq!(ds.cumulative_sizes(), &[2, 2, 5]);
    assert_eq!(ds.len(), 5);
    assert_eq!(ints(&ds), vec![0, 1, 0, 1, 2]);
    assert_eq!(ds.get(5).unwrap_err().kind(), ErrorKind::Index);
    let e = ConcatDataset::new(vec![]).err().unwrap();
    assert_eq!(e.message(), "datasets should not be an empty iterable");
}

#[test]
fn negative_indices_count_from_the_end_as_in_pytorch() {
    // ConcatDataset.__getitem__: idx = len + idx; -idx > len is a ValueError
    let ds: Arc<dyn Dataset> = Arc::new(ConcatDataset::new(vec![range(2), range(3)]).unwrap());
    let at = |i: isize| ds.get_signed(i).unwrap().as_int().unwrap();
    assert_eq!([at(-1), at(-3), at(-4), at(-5), at(0), at(4)], [2, 0, 1, 0, 0, 2]);
    let e = ds.get_signed(-6).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Value);
    assert_eq!(e.message(), "absolute value of index should not exceed dataset length");
    assert_eq!(ds.get_signed(5).unwrap_err().kind(), ErrorKind::Index);
    // a tensor's rows and a Python list (Subset's indices) also take negative indices
    let t = TensorDataset::new(vec![Tensor::new([10i64, 11, 12]).unwrap()]).unwrap();
    let row =
        |i: isize| t.get_signed(i).unwrap().item(0).unwrap().as_tensor().unwrap().to_vec::<i64>().unwrap();
    assert_eq!((row(-1), row(-3)), (vec![12], vec![10]));
    assert_eq!(t.get_signed(-4).unwrap_err().kind(), ErrorKind::Index);
    let sub = Subset::new(range(10), vec![7, 3]);
    assert_eq!(sub.get_signed(-1).unwrap().as_int().unwrap(), 3);
}

struct Count(i64);
impl IterableDataset for Count {
    fn iter(&self) -> Box<dyn Iterator<Item = Result<Sample>> + Send + '_> {
        Box::new((0..self.0).map(|i| Ok(Sample::Int(i))))
    }
}

#[test]
fn chain_dataset_chains() {
    let c = ChainDataset::new(vec![Arc::new(Count(2)), Arc::new(Count(0)), Arc::new(Count(3))]);
    let got: Vec<i64> = c.iter().map(|s| s.unwrap().as_int().unwrap()).collect();
    assert_eq!(got, vec![0, 1, 0, 1, 2]);
    // A second pass starts over.
    assert_eq!(c.iter().count(), 5);
}

#[test]
fn stack_dataset_tuple_and_map_forms() {
    let ds =
        StackDataset::new(vec![range(3), Arc::new(FnDataset::new(3, |i| Ok(Sample::from(format!("s{i}")))))])
            .unwrap();
    assert_eq!(ds.len(), 3);
    let s = ds.get(2).unwrap();
    assert_eq!(s.item(0).unwrap().as_int().unwrap(), 2);
    assert_eq!(s.item(1).unwrap().as_str().unwrap(), "s2");
    assert_eq!(ds.get(3).unwrap_err().kind(), ErrorKind::Index);

    let mut m: BTreeMap<String, Arc<dyn Dataset>> = BTreeMap::new();
    m.insert("x".into(), range(4));
    m.insert("y".into(), range(4));
    let ds = StackDataset::from_map(m).unwrap();
    let s = ds.get(1).unwrap();
    assert_eq!(s.key("x").unwrap().as_int().unwrap(), 1);
    assert_eq!(s.key("y").unwrap().as_int().unwrap(), 1);
    assert_eq!(s.key("z").unwrap_err().kind(), ErrorKind::Index);

    let e = StackDataset::new(vec![range(3), range(4)]).err().unwrap();
    assert_eq!(e.message(), "Size mismatch between datasets");
    let e = StackDataset::new(vec![]).err().unwrap();
    assert_eq!(e.message(), "At least one dataset should be passed");
}

#[test]
fn fn_dataset_checks_the_index() {
    let ds = FnDataset::new(2, |i| Ok(Sample::from((i, i as f64 * 0.5))));
    assert_eq!(ds.get(1).unwrap().item(1).unwrap().as_float().unwrap(), 0.5);
    assert_eq!(ds.get(2).unwrap_err().kind(), ErrorKind::Index);
    assert!(FnDataset::new(0, |_| Ok(Sample::Int(0))).is_empty());
}

fn split_sizes(n: usize, lengths: &[SplitLength]) -> Vec<usize> {
    let g = Generator::new(0);
    random_split(range(n), lengths, Some(&g)).unwrap().iter().map(|s| s.len()).collect()
}

#[test]
fn random_split_fraction_sizes_match_pytorch() {
    use SplitLength::Fraction as F;
    // [len(s) for s in random_split(range(n), fractions)] in PyTorch 2.x
    assert_eq!(split_sizes(10, &[F(0.3), F(0.3), F(0.4)]), vec![3, 3, 4]);
    assert_eq!(split_sizes(11, &[F(0.5), F(0.5)]), vec![6, 5]);
    assert_eq!(split_sizes(7, &[F(0.1), F(0.1), F(0.1), F(0.7)]), vec![1, 1, 1, 4]);
    assert_eq!(split_sizes(5, &[F(0.25), F(0.25), F(0.25), F(0.25)]), vec![2, 1, 1, 1]);
}

#[test]
fn random_split_is_a_seeded_partition() {
    use SplitLength::Count as C;
    let g = Generator::new(3);
    let parts = random_split(range(10), &[C(3), C(7)], Some(&g)).unwrap();
    assert_eq!(parts.iter().map(|p| p.len()).collect::<Vec<_>>(), vec![3, 7]);
    let all: Vec<i64> = parts.iter().flat_map(|p| ints(p)).collect();
    assert_eq!(BTreeSet::from_iter(all.iter().copied()), (0..10).collect());
    // The order is randperm(10) from the generator, cut in order.
    let perm = Tensor::randperm_with(10, Some(&Generator::new(3))).unwrap().to_vec::<i64>().unwrap();
    assert_eq!(all, perm);
}

#[test]
fn random_split_errors() {
    use SplitLength::{Count as C, Fraction as F};
    let g = Generator::new(0);
    let e = random_split(range(10), &[C(3), C(6)], Some(&g)).err().unwrap();
    assert_eq!(e.kind(), ErrorKind::Value);
    assert_eq!(e.message(), "Sum of input lengths does not equal the length of the input dataset!");
    let e = random_split(range(10), &[F(0.5), F(0.3)], Some(&g)).err().unwrap();
    assert_eq!(e.message(), "Sum of input lengths does not equal the length of the input dataset!");
    let e = random_split(range(10), &[F(1.5), F(-0.5)], Some(&g)).err().unwrap();
    assert_eq!(e.message(), "Fraction at index 0 is not between 0 and 1");
}

#[test]
fn worker_info_is_thread_local() {
    assert_eq!(get_worker_info(), None);
    let info = WorkerInfo { id: 1, num_workers: 4, seed: 99 };
    let seen = std::thread::spawn(move || {
        set_worker_info(Some(info));
        get_worker_info()
    })
    .join()
    .unwrap();
    assert_eq!(seen, Some(WorkerInfo { id: 1, num_workers: 4, seed: 99 }));
    assert_eq!(get_worker_info(), None, "the main thread is not a worker");
}
