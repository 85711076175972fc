//! The collectives under `mpirun`: every op, dtype and layout on 3 ranks, asynchronous work,
//! objects, sub-groups, and the failures (a mismatch, a rank that never arrives, a rank that
//! dies) ending in errors that name the ranks, never in a hang.
#![cfg(feature = "mpi")]

mod common;

use common::{mpirun, under_mpirun};
use pyrite::{DType, Tensor};
use pyrite_distributed::{self as dist, InitOptions, ReduceOp};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(120);

fn init() -> (usize, usize) {
    assert!(under_mpirun(), "run by the test of the same name under mpirun");
    dist::init_process_group("mpi", InitOptions::default()).unwrap();
    (dist::get_rank().unwrap(), dist::get_world_size().unwrap())
}

fn f32s(t: &Tensor) -> Vec<f32> {
    t.to_dtype(DType::F32).unwrap().flatten(0, -1).unwrap().to_vec().unwrap()
}

// ------------------------------------------------------------------------- every op

#[test]
fn every_collective_gives_pytorchs_result() {
    mpirun(3, "scenario_every_collective", &[], LIMIT).assert_ok();
}

#[test]
#[ignore = "run under mpirun by every_collective_gives_pytorchs_result"]
fn scenario_every_collective() {
    let (r, n) = init();
    assert_eq!(n, 3);
    let rf = r as f32;
    // all_reduce, each op
    for (op, want) in [
        (ReduceOp::Sum, [3.0, 6.0]),
        (ReduceOp::Avg, [1.0, 2.0]),
        (ReduceOp::Product, [0.0, 6.0]),
        (ReduceOp::Min, [0.0, 1.0]),
        (ReduceOp::Max, [2.0, 3.0]),
    ] {
        let t = Tensor::new([rf, rf + 1.0]).unwrap();
        dist::all_reduce(&t, op).unwrap();
        assert_eq!(f32s(&t), want, "{op:?}");
    }
    // broadcast from rank 1
    let t = Tensor::new([rf; 4]).unwrap();
    dist::broadcast(&t, 1).unwrap();
    assert_eq!(f32s(&t), [1.0; 4]);
    // reduce to rank 2: only rank 2's tensor changes
    let t = Tensor::new([rf + 1.0]).unwrap();
    dist::reduce(&t, 2, ReduceOp::Product).unwrap();
    assert_eq!(f32s(&t), if r == 2 { vec![6.0] } else { vec![rf + 1.0] });
    // all_gather into a list and into one tensor
    let input = Tensor::new([[rf, 10.0 * rf]]).unwrap();
    let outs: Vec<Tensor> = (0..n).map(|_| Tensor::zeros([1, 2], DType::F32).unwrap()).collect();
    dist::all_gather(&outs, &input).unwrap();
    for (i, o) in outs.iter().enumerate() {
        assert_eq!(f32s(o), [i as f32, 10.0 * i as f32]);
    }
    let all = Tensor::zeros([3, 2], DType::F32).unwrap();
    dist::all_gather_into_tensor(&all, &input).unwrap();
    assert_eq!(f32s(&all), [0.0, 0.0, 1.0, 10.0, 2.0, 20.0]);
    // gather to rank 0
    let input = Tensor::new([rf * 2.0]).unwrap();
    if r == 0 {
        let list: Vec<Tensor> = (0..n).map(|_| Tensor::zeros([1], DType::F32).unwrap()).collect();
        dist::gather(&input, Some(&list), 0).unwrap();
        assert_eq!(list.iter().map(|t| f32s(t)[0]).collect::<Vec<_>>(), [0.0, 2.0, 4.0]);
    } else {
        dist::gather(&input, None, 0).unwrap();
    }
    // scatter from rank 2
    let out = Tensor::zeros([2], DType::F32).unwrap();
    if r == 2 {
        let list: Vec<Tensor> = (0..n).map(|i| Tensor::new([i as f32, 100.0]).unwrap()).collect();
        dist::scatter(&out, Some(&list), 2).unwrap();
    } else {
        dist::scatter(&out, None, 2).unwrap();
    }
    assert_eq!(f32s(&out), [rf, 100.0]);
    // reduce_scatter_tensor: chunk i of every rank summed onto rank i
    let input = Tensor::new([rf, rf + 10.0, rf + 20.0]).unwrap();
    let out = Tensor::zeros([1], DType::F32).unwrap();
    dist::reduce_scatter_tensor(&out, &input, ReduceOp::Sum).unwrap();
    assert_eq!(f32s(&out), [3.0 + 30.0 * rf]);
    // all_to_all_single, equal splits: rank r sends 10r + j to rank j
    let input = Tensor::new([10.0 * rf, 10.0 * rf + 1.0, 10.0 * rf + 2.0]).unwrap();
    let out = Tensor::zeros([3], DType::F32).unwrap();
    dist::all_to_all_single(&out, &input, None, None).unwrap();
    assert_eq!(f32s(&out), [rf, 10.0 + rf, 20.0 + rf]);
    // uneven splits: rank r sends j + 1 rows to rank j, each row holding (r, j)
    let send_splits: Vec<usize> = (0..n).map(|j| j + 1).collect();
    let rows: Vec<f32> = (0..n).flat_map(|j| std::iter::repeat_n([rf, j as f32], j + 1).flatten()).collect();
    let input = Tensor::from_vec(rows, [6, 2]).unwrap();
    let out = Tensor::zeros([3 * (r + 1), 2], DType::F32).unwrap();
    let recv_splits = vec![r + 1; n];
    dist::all_to_all_single(&out, &input, Some(&recv_splits), Some(&send_splits)).unwrap();
    let want: Vec<f32> = (0..n).flat_map(|s| std::iter::repeat_n([s as f32, rf], r + 1).flatten()).collect();
    assert_eq!(f32s(&out), want);
    // barrier, then point to point around the ring
    dist::barrier().unwrap();
    let next = (r + 1) % n;
    let prev = (r + n - 1) % n;
    let sent = Tensor::new([rf, -rf]).unwrap();
    let got = Tensor::zeros([2], DType::F32).unwrap();
    let w = dist::isend(&sent, next, 7).unwrap();
    let from = dist::recv(&got, Some(prev), 7).unwrap();
    w.wait().unwrap();
    assert_eq!(from, prev);
    assert_eq!(f32s(&got), [prev as f32, -(prev as f32)]);
    // recv from any source
    if r == 0 {
        let mut senders = Vec::new();
        for _ in 1..n {
            let t = Tensor::zeros([1], DType::F32).unwrap();
            let src = dist::recv(&t, None, 3).unwrap();
            assert_eq!(f32s(&t), [src as f32]);
            senders.push(src);
        }
        senders.sort();
        assert_eq!(senders, [1, 2]);
    } else {
        dist::send(&Tensor::new([rf]).unwrap(), 0, 3).unwrap();
    }
    dist::barrier().unwrap();
    println!("rank {r} done");
}

// ------------------------------------------------------------------ dtypes, layouts

#[test]
fn every_dtype_and_layout() {
    mpirun(2, "scenario_dtypes_and_layouts", &[], LIMIT).assert_ok();
}

#[test]
#[ignore = "run under mpirun by every_dtype_and_layout"]
fn scenario_dtypes_and_layouts() {
    let (r, _) = init();
    let rf = r as f64;
    for dtype in [DType::U8, DType::I32, DType::I64, DType::F16, DType::BF16, DType::F32, DType::F64] {
        let t = Tensor::new([rf + 1.0, 2.0 * rf + 3.0]).unwrap().to_dtype(dtype).unwrap();
        dist::all_reduce(&t, ReduceOp::Sum).unwrap();
        assert_eq!(t.dtype(), dtype);
        assert_eq!(f32s(&t), [3.0, 8.0], "{dtype}");
        let t = Tensor::new([rf + 1.0, 7.0 - rf]).unwrap().to_dtype(dtype).unwrap();
        dist::all_reduce(&t, ReduceOp::Max).unwrap();
        assert_eq!(f32s(&t), [2.0, 7.0], "{dtype}");
        let t = Tensor::new([5.0 * rf + 1.0]).unwrap().to_dtype(dtype).unwrap();
        dist::broadcast(&t, 1).unwrap();
        assert_eq!(f32s(&t), [6.0], "{dtype}");
    }
    // bfloat16 sums round once, as PyTorch's two-rank sum does: 256 + 1 is 256 in bf16
    let t = Tensor::new([if r == 0 { 256.0f32 } else { 1.0 }]).unwrap().to_dtype(DType::BF16).unwrap();
    dist::all_reduce(&t, ReduceOp::Sum).unwrap();
    assert_eq!(f32s(&t), [256.0]);
    // bool: SUM is or, MIN is and
    let t = Tensor::new([r == 0, false, true]).unwrap();
    dist::all_reduce(&t, ReduceOp::Sum).unwrap();
    assert_eq!(t.to_vec::<bool>().unwrap(), [true, false, true]);
    let t = Tensor::new([r == 0, true]).unwrap();
    dist::all_reduce(&t, ReduceOp::Min).unwrap();
    assert_eq!(t.to_vec::<bool>().unwrap(), [false, true]);
    // AVG on integers is an error on every rank, before anything moves
    let e = dist::all_reduce(&Tensor::new([1i64]).unwrap(), ReduceOp::Avg).unwrap_err();
    assert!(e.to_string().contains("ReduceOp.AVG needs a floating-point tensor"), "{e}");
    // a non-contiguous view: the transposed columns of a matrix, written in place
    let base =
        Tensor::from_vec((0..6).map(|i| i as f32 + 10.0 * rf as f32).collect::<Vec<_>>(), [2, 3]).unwrap();
    let view = base.transpose(0, 1).unwrap();
    assert!(!view.is_contiguous());
    dist::all_reduce(&view, ReduceOp::Sum).unwrap();
    assert_eq!(f32s(&base), [10.0, 12.0, 14.0, 16.0, 18.0, 20.0]);
    // a narrowed row of a bigger tensor: the rest is left alone
    let base = Tensor::full([3, 2], rf + 1.0, DType::F64).unwrap();
    let row = base.narrow(0, 1, 1).unwrap();
    dist::broadcast(&row, 1).unwrap();
    assert_eq!(f32s(&base), [rf as f32 + 1.0, rf as f32 + 1.0, 2.0, 2.0, rf as f32 + 1.0, rf as f32 + 1.0]);
    // all_gather into strided outputs
    let out = Tensor::zeros([2, 2], DType::F32).unwrap();
    let cols: Vec<Tensor> = (0..2).map(|j| out.select(1, j).unwrap()).collect();
    dist::all_gather(&cols, &Tensor::new([rf as f32, rf as f32 + 0.5]).unwrap()).unwrap();
    assert_eq!(f32s(&out), [0.0, 1.0, 0.5, 1.5]);
    // autograd does not see the write, and the version counter does
    let p = Tensor::new([1.0f32 + rf as f32]).unwrap().requires_grad_(true).unwrap();
    let v = p.version();
    dist::all_reduce(&p, ReduceOp::Sum).unwrap();
    assert_eq!(f32s(&p), [3.0]);
    assert!(p.version() > v && p.requires_grad() && p.is_leaf());
    println!("rank {r} done");
}

// -------------------------------------------------------- async work, objects, groups

#[test]
fn async_work_objects_and_groups() {
    mpirun(3, "scenario_async_objects_groups", &[], LIMIT).assert_ok();
}

#[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq, Clone)]
struct Meta {
    name: String,
    epoch: u32,
}

#[test]
#[ignore = "run under mpirun by async_work_objects_and_groups"]
fn scenario_async_objects_groups() {
    let (r, n) = init();
    let g = dist::default_group().unwrap();
    // several operations in flight, waited in reverse
    let ts: Vec<Tensor> = (0..4).map(|k| Tensor::new([(r * 10 + k) as f32]).unwrap()).collect();
    let works: Vec<dist::Work> = ts.iter().map(|t| g.all_reduce(t, ReduceOp::Sum).unwrap()).collect();
    for (k, w) in works.iter().enumerate().rev() {
        w.wait().unwrap();
        assert!(w.is_completed() && w.is_success());
        assert_eq!(f32s(&ts[k]), [(30 + 3 * k) as f32]);
    }
    // a receive posted before its send exists
    if r == 0 {
        let t = Tensor::zeros([3], DType::I64).unwrap();
        let w = g.irecv(&t, Some(2), 0).unwrap();
        dist::barrier().unwrap();
        w.wait().unwrap();
        assert_eq!(t.to_vec::<i64>().unwrap(), [7, 8, 9]);
        assert_eq!(w.source_rank(), Some(2));
    } else {
        dist::barrier().unwrap();
        if r == 2 {
            dist::send(&Tensor::new([7i64, 8, 9]).unwrap(), 0, 0).unwrap();
        }
    }
    // a message of the wrong size is an error on the receiver, which then goes on
    if r == 1 {
        dist::send(&Tensor::new([1f32, 2., 3.]).unwrap(), 0, 5).unwrap();
    } else if r == 0 {
        let e = dist::recv(&Tensor::zeros([2], DType::F32).unwrap(), Some(1), 5).unwrap_err();
        assert!(e.to_string().contains("the message from rank 1 (tag 5) has 12 bytes, but the tensor to receive it ([2], torch.float32) has 8"), "{e}");
    }
    // objects
    let mut list = if r == 0 {
        vec![Meta { name: "run".into(), epoch: 3 }, Meta { name: "b".into(), epoch: 9 }]
    } else {
        vec![Meta { name: String::new(), epoch: 0 }; 2]
    };
    dist::broadcast_object_list(&mut list, 0).unwrap();
    assert_eq!(list[0], Meta { name: "run".into(), epoch: 3 });
    assert_eq!(list[1].epoch, 9);
    let all = dist::all_gather_object(&format!("rank-{}", "x".repeat(r))).unwrap();
    assert_eq!(all, ["rank-", "rank-x", "rank-xx"]);
    // a group of ranks 2 and 0 (in that order): group rank 0 is global rank 2
    let sub = dist::new_group(Some(&[2, 0]), None).unwrap();
    assert_eq!(sub.size(), 2);
    assert_eq!(sub.ranks(), &[2, 0]);
    if r == 1 {
        assert_eq!(sub.rank(), None);
        let e = sub.all_reduce(&Tensor::new([1f32]).unwrap(), ReduceOp::Sum).unwrap_err();
        assert!(e.to_string().contains("rank 1 is not a member of this group"), "{e}");
    } else {
        assert_eq!(sub.rank(), Some(if r == 2 { 0 } else { 1 }));
        let t = Tensor::new([r as f32]).unwrap();
        sub.all_reduce(&t, ReduceOp::Sum).unwrap().wait().unwrap();
        assert_eq!(f32s(&t), [2.0]);
        let t = Tensor::new([r as f32 + 5.0]).unwrap();
        sub.broadcast(&t, 2).unwrap().wait().unwrap(); // src is a global rank
        assert_eq!(f32s(&t), [7.0]);
    }
    dist::barrier().unwrap();
    // destroy and init again: MPI stays up
    dist::destroy_process_group();
    assert!(!dist::is_initialized());
    assert!(dist::get_rank().is_err());
    dist::init_process_group("mpi", InitOptions::default()).unwrap();
    let t = Tensor::new([1f32]).unwrap();
    dist::all_reduce(&t, ReduceOp::Sum).unwrap();
    assert_eq!(f32s(&t), [n as f32]);
    println!("rank {r} done");
}

// ------------------------------------------------------------------------ failures

#[test]
fn mismatched_collectives_are_errors_naming_the_ranks() {
    let job = mpirun(2, "scenario_mismatch", &[("PYRITE_DISTRIBUTED_DEBUG", "DETAIL")], LIMIT);
    // each rank checked its error, then the job was aborted at exit (a collective failed)
    job.assert_printed("rank 0 saw the mismatch");
    job.assert_printed("rank 1 saw the mismatch");
    job.assert_printed("rank 0 saw the shape mismatch");
    assert!(!job.success);
}

#[test]
#[ignore = "run under mpirun by mismatched_collectives_are_errors_naming_the_ranks"]
fn scenario_mismatch() {
    let (r, _) = init();
    assert_eq!(dist::default_group().unwrap().debug_level(), dist::DebugLevel::Detail);
    // the same collective, agreeing: fine
    dist::all_reduce(&Tensor::new([1f32]).unwrap(), ReduceOp::Sum).unwrap();
    // rank 0 all-reduces a [4, 3] tensor while rank 1 broadcasts a [4] one
    let e = if r == 0 {
        dist::all_reduce(&Tensor::zeros([4, 3], DType::F32).unwrap(), ReduceOp::Sum).unwrap_err()
    } else {
        dist::broadcast(&Tensor::zeros([4], DType::F32).unwrap(), 0).unwrap_err()
    };
    let msg = e.to_string();
    assert!(msg.contains("Detected mismatch between collectives on ranks."), "{msg}");
    let (mine, theirs) = if r == 0 { ("ALLREDUCE", "BROADCAST") } else { ("BROADCAST", "ALLREDUCE") };
    assert!(
        msg.contains(&format!(
            "Rank {r} is running collective: CollectiveFingerPrint(SequenceNumber=1, OpType={mine}"
        )),
        "{msg}"
    );
    assert!(
        msg.contains(&format!(
            "Rank {} is running collective: CollectiveFingerPrint(SequenceNumber=1, OpType={theirs}",
            1 - r
        )),
        "{msg}"
    );
    assert!(msg.contains(&format!("OpType: {mine} vs {theirs}")), "{msg}");
    println!("rank {r} saw the mismatch");
    // the group is unusable now; a new one checks shapes
    let e = dist::barrier().unwrap_err();
    assert!(e.to_string().contains("can no longer be used"), "{e}");
    let g = dist::new_group(None, None).unwrap();
    let t = Tensor::zeros([if r == 0 { 5 } else { 6 }], DType::F64).unwrap();
    let e = g.all_reduce(&t, ReduceOp::Sum).unwrap().wait().unwrap_err();
    assert!(
        e.to_string().contains("TensorShape: [5] vs [6]")
            || e.to_string().contains("TensorShape: [6] vs [5]"),
        "{e}"
    );
    println!("rank {r} saw the shape mismatch");
}

#[test]
fn a_rank_that_never_arrives_is_named_after_the_timeout() {
    let job = mpirun(3, "scenario_never_arrives", &[], LIMIT);
    job.assert_printed("rank 0 timed out naming rank 2");
    job.assert_printed("rank 1 timed out naming rank 2");
    assert!(!job.success);
    assert!(job.elapsed < Duration::from_secs(60), "{:?}", job.elapsed);
}

#[test]
#[ignore = "run under mpirun by a_rank_that_never_arrives_is_named_after_the_timeout"]
fn scenario_never_arrives() {
    assert!(under_mpirun());
    dist::init_process_group("mpi", InitOptions { timeout: Duration::from_secs(2), ..Default::default() })
        .unwrap();
    let r = dist::get_rank().unwrap();
    dist::barrier().unwrap();
    if r == 2 {
        // busy elsewhere, far past the timeout (the job is aborted before this ends)
        std::thread::sleep(Duration::from_secs(30));
        return;
    }
    let t0 = std::time::Instant::now();
    let e = dist::all_reduce(&Tensor::new([1f32]).unwrap(), ReduceOp::Sum).unwrap_err();
    let msg = e.to_string();
    assert!(t0.elapsed() >= Duration::from_secs(2), "{:?}", t0.elapsed());
    assert!(
        msg.contains(&format!("[Rank {r}] CollectiveFingerPrint(SequenceNumber=1, OpType=ALLREDUCE")),
        "{msg}"
    );
    assert!(msg.contains("timed out after 2000 ms: rank 2 never arrived (ranks that did: "), "{msg}");
    assert_eq!(e.kind(), pyrite::ErrorKind::Distributed);
    println!("rank {r} timed out naming rank 2");
}

#[test]
fn a_rank_that_dies_ends_the_job() {
    for how in ["error", "killed"] {
        let job = mpirun(2, "scenario_rank_dies", &[("HOW_TO_DIE", how)], LIMIT);
        assert!(!job.success, "{}", job.output);
        // the survivor waits in a collective with a 30-minute timeout: the job must end long before
        assert!(job.elapsed < Duration::from_secs(30), "{how}: {:?}\n{}", job.elapsed, job.output);
        job.assert_printed("rank 1 is going");
        if how == "error" {
            job.assert_printed("[rank 1] pyrite.distributed: exiting with status 1; aborting the MPI job");
        } else {
            assert!(job.output.contains("signal 9") || job.output.contains("Killed"), "{}", job.output);
        }
    }
}

#[test]
#[ignore = "run under mpirun by a_rank_that_dies_ends_the_job"]
fn scenario_rank_dies() {
    let (r, _) = init();
    dist::barrier().unwrap();
    if r == 1 {
        println!("rank 1 is going");
        match std::env::var("HOW_TO_DIE").unwrap().as_str() {
            "error" => {
                eprintln!("Error: DataLoader worker failed (a stand-in for any error out of main)");
                std::process::exit(1)
            }
            _ => unsafe {
                libc::kill(libc::getpid(), libc::SIGKILL);
            },
        }
    }
    let _ = dist::all_reduce(&Tensor::new([1f32]).unwrap(), ReduceOp::Sum);
    std::thread::sleep(Duration::from_secs(60));
}
