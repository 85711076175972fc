//! What a process group asks its backend to run: the operations with their tensors, the
//! reduction ops, and the fingerprint every rank sends the others before a collective.

// Without a backend compiled in, only the argument checks read the operations.
#![cfg_attr(not(feature = "mpi"), allow(dead_code))]

use pyrite_core::{DType, Tensor};
use std::fmt;
use std::time::Duration;

/// `torch.distributed.ReduceOp`: how [`crate::all_reduce`], [`crate::reduce`] and
/// [`crate::reduce_scatter_tensor`] combine the ranks' tensors.
///
/// On `bool` tensors `Sum` and `Max` are a logical or, `Product` and `Min` a logical and. On
/// `float16` and `bfloat16` the values are summed (or multiplied, ...) in `float32` and
/// rounded once, which for two ranks is exactly PyTorch's result. `Avg` is for floating-point
/// tensors only.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ReduceOp {
    /// `ReduceOp.SUM` (the default).
    #[default]
    Sum,
    /// `ReduceOp.AVG`: the sum divided by the number of ranks.
    Avg,
    /// `ReduceOp.PRODUCT`.
    Product,
    /// `ReduceOp.MIN`.
    Min,
    /// `ReduceOp.MAX`.
    Max,
}

impl ReduceOp {
    /// PyTorch's name (`SUM`, `AVG`, ...).
    pub fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "SUM",
            ReduceOp::Avg => "AVG",
            ReduceOp::Product => "PRODUCT",
            ReduceOp::Min => "MIN",
            ReduceOp::Max => "MAX",
        }
    }
}

/// One operation with its tensors. Ranks (`root`, `peer`) are ranks within the group.
pub(crate) enum OpKind {
    AllReduce {
        tensor: Tensor,
        op: ReduceOp,
    },
    Broadcast {
        tensor: Tensor,
        root: usize,
    },
    Reduce {
        tensor: Tensor,
        root: usize,
        op: ReduceOp,
    },
    /// `outputs` receive the ranks' inputs one after another (one tensor per rank, or one
    /// tensor holding them all).
    AllGather {
        input: Tensor,
        outputs: Vec<Tensor>,
    },
    /// As `AllGather`, on `root` only (`outputs` is empty elsewhere).
    Gather {
        input: Tensor,
        outputs: Vec<Tensor>,
        root: usize,
    },
    /// `root` sends `inputs[i]` (one per rank) to rank `i` (`inputs` is empty elsewhere).
    Scatter {
        output: Tensor,
        inputs: Vec<Tensor>,
        root: usize,
    },
    ReduceScatter {
        output: Tensor,
        input: Tensor,
        op: ReduceOp,
    },
    /// Element counts sent to and received from each rank, in order.
    AllToAll {
        output: Tensor,
        input: Tensor,
        send_counts: Vec<usize>,
        recv_counts: Vec<usize>,
    },
    Barrier,
    Send {
        tensor: Tensor,
        peer: usize,
        tag: i32,
    },
    /// `peer: None` receives from any rank.
    Recv {
        tensor: Tensor,
        peer: Option<usize>,
        tag: i32,
    },
}

impl OpKind {
    /// PyTorch's `OpType` name.
    pub(crate) fn op_type(&self) -> &'static str {
        match self {
            OpKind::AllReduce { .. } => "ALLREDUCE",
            OpKind::Broadcast { .. } => "BROADCAST",
            OpKind::Reduce { .. } => "REDUCE",
            OpKind::AllGather { .. } => "ALLGATHER",
            OpKind::Gather { .. } => "GATHER",
            OpKind::Scatter { .. } => "SCATTER",
            OpKind::ReduceScatter { .. } => "REDUCE_SCATTER",
            OpKind::AllToAll { .. } => "ALLTOALL_BASE",
            OpKind::Barrier => "BARRIER",
            OpKind::Send { .. } => "SEND",
            OpKind::Recv { .. } => "RECV",
        }
    }

    /// The profiler's name for it (PyTorch's MPI backend's: `mpi:all_reduce`, ...).
    pub(crate) fn profile_name(&self) -> &'static str {
        match self {
            OpKind::AllReduce { .. } => "mpi:all_reduce",
            OpKind::Broadcast { .. } => "mpi:broadcast",
            OpKind::Reduce { .. } => "mpi:reduce",
            OpKind::AllGather { .. } => "mpi:all_gather",
            OpKind::Gather { .. } => "mpi:gather",
            OpKind::Scatter { .. } => "mpi:scatter",
            OpKind::ReduceScatter { .. } => "mpi:reduce_scatter",
            OpKind::AllToAll { .. } => "mpi:all_to_all",
            OpKind::Barrier => "mpi:barrier",
            OpKind::Send { .. } => "mpi:send",
            OpKind::Recv { .. } => "mpi:recv",
        }
    }

    /// The tensor the profiler shows as the input.
    pub(crate) fn main_tensor(&self) -> Option<&Tensor> {
        match self {
            OpKind::AllReduce { tensor, .. }
            | OpKind::Broadcast { tensor, .. }
            | OpKind::Reduce { tensor, .. }
            | OpKind::Send { tensor, .. }
            | OpKind::Recv { tensor, .. } => Some(tensor),
            OpKind::AllGather { input, .. }
            | OpKind::Gather { input, .. }
            | OpKind::ReduceScatter { input, .. }
            | OpKind::AllToAll { input, .. } => Some(input),
            OpKind::Scatter { output, .. } => Some(output),
            OpKind::Barrier => None,
        }
    }

    /// Whether every rank of the group takes part (and so exchanges fingerprints).
    pub(crate) fn is_collective(&self) -> bool {
        !matches!(self, OpKind::Send { .. } | OpKind::Recv { .. })
    }

    /// What must agree across ranks, for the fingerprint: the tensor each rank contributes (or
    /// receives, for scatter), the root and the reduction.
    pub(crate) fn fingerprint(&self, seq: u64) -> Fingerprint {
        let (tensor, root, reduce) = match self {
            OpKind::AllReduce { tensor, op } => (Some(tensor), None, Some(*op)),
            OpKind::Broadcast { tensor, root } => (Some(tensor), Some(*root), None),
            OpKind::Reduce { tensor, root, op } => (Some(tensor), Some(*root), Some(*op)),
            OpKind::AllGather { input, .. } => (Some(input), None, None),
            OpKind::Gather { input, root, .. } => (Some(input), Some(*root), None),
            OpKind::Scatter { output, root, .. } => (Some(output), Some(*root), None),
            OpKind::ReduceScatter { output, op, .. } => (Some(output), None, Some(*op)),
            // the split sizes may differ between ranks: only the dtype must agree
            OpKind::AllToAll { input, .. } => {
                return Fingerprint {
                    seq,
                    op_type: self.op_type(),
                    shape: None,
                    dtype: Some(input.dtype()),
                    root: None,
                    reduce: None,
                }
            }
            OpKind::Barrier | OpKind::Send { .. } | OpKind::Recv { .. } => (None, None, None),
        };
        Fingerprint {
            seq,
            op_type: self.op_type(),
            shape: tensor.map(|t| t.dims().to_vec()),
            dtype: tensor.map(|t| t.dtype()),
            root,
            reduce,
        }
    }
}

/// An operation as the backend gets it.
pub(crate) struct Op {
    pub kind: OpKind,
    /// The group's count of operations so far (PyTorch's `SequenceNumber`).
    pub seq: u64,
    pub timeout: Duration,
    /// Compare fingerprints (`PYRITE_DISTRIBUTED_DEBUG=DETAIL`).
    pub check: bool,
}

/// What a rank is running, as `PYRITE_DISTRIBUTED_DEBUG=DETAIL` compares it across ranks
/// (PyTorch's `CollectiveFingerPrint`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Fingerprint {
    pub seq: u64,
    pub op_type: &'static str,
    pub shape: Option<Vec<usize>>,
    pub dtype: Option<DType>,
    pub root: Option<usize>,
    pub reduce: Option<ReduceOp>,
}

impl fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CollectiveFingerPrint(SequenceNumber={}, OpType={}", self.seq, self.op_type)?;
        if let Some(s) = &self.shape {
            write!(f, ", TensorShape={s:?}")?;
        }
        if let Some(d) = self.dtype {
            write!(f, ", TensorDtype={d}")?;
        }
        if let Some(r) = self.root {
            write!(f, ", Root={r}")?;
        }
        if let Some(r) = self.reduce {
            write!(f, ", ReduceOp={}", r.name())?;
        }
        write!(f, ")")
    }
}

/// The message when ranks' fingerprints differ: names this rank and every rank that differs,
/// each with what it runs, then which fields differ.
pub(crate) fn mismatch_message(my_rank: usize, mine: &str, others: &[(usize, String)]) -> Option<String> {
    let differing: Vec<&(usize, String)> = others.iter().filter(|(_, f)| f != mine).collect();
    if differing.is_empty() {
        return None;
    }
    let mut msg = String::from("Detected mismatch between collectives on ranks. ");
    msg += &format!("Rank {my_rank} is running collective: {mine}");
    for (r, f) in &differing {
        msg += &format!(", but Rank {r} is running collective: {f}");
    }
    msg += ". Collectives differ in the following aspects: ";
    let fields = |s: &str| -> Vec<(String, String)> {
        let inner = s.trim_start_matches("CollectiveFingerPrint(").trim_end_matches(')');
        split_fields(inner)
    };
    let a = fields(mine);
    let b = fields(&differing[0].1);
    let mut diffs = Vec::new();
    for (k, v) in &a {
        match b.iter().find(|(k2, _)| k2 == k) {
            Some((_, v2)) if v2 != v => diffs.push(format!("{k}: {v} vs {v2}")),
            None => diffs.push(format!("{k}: {v} vs (none)")),
            _ => {}
        }
    }
    for (k, v) in &b {
        if !a.iter().any(|(k2, _)| k2 == k) {
            diffs.push(format!("{k}: (none) vs {v}"));
        }
    }
    msg += &diffs.join("; ");
    Some(msg)
}

/// `a=1, b=[2, 3]` into pairs (commas inside brackets stay).
fn split_fields(s: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut depth = 0;
    let mut start = 0;
    let bytes = s.as_bytes();
    for i in 0..=bytes.len() {
        let end = i == bytes.len();
        if !end {
            match bytes[i] {
                b'[' | b'(' => depth += 1,
                b']' | b')' => depth -= 1,
                _ => {}
            }
        }
        if end || (bytes[i] == b',' && depth == 0) {
            let part = s[start..i].trim();
            if let Some((k, v)) = part.split_once('=') {
                out.push((k.to_string(), v.to_string()));
            }
            start = i + 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprints_read_like_pytorchs() {
        let t = Tensor::zeros([4, 3], DType::F32).unwrap();
        let f = OpKind::AllReduce { tensor: t.clone(), op: ReduceOp::Sum }.fingerprint(3);
        assert_eq!(
            f.to_string(),
            "CollectiveFingerPrint(SequenceNumber=3, OpType=ALLREDUCE, TensorShape=[4, 3], TensorDtype=torch.float32, ReduceOp=SUM)"
        );
        let f = OpKind::Broadcast { tensor: t, root: 1 }.fingerprint(0);
        assert_eq!(f.root, Some(1));
        assert_eq!(
            OpKind::Barrier.fingerprint(7).to_string(),
            "CollectiveFingerPrint(SequenceNumber=7, OpType=BARRIER)"
        );
    }

    #[test]
    fn mismatches_name_ranks_and_fields() {
        let mine = "CollectiveFingerPrint(SequenceNumber=2, OpType=ALLREDUCE, TensorShape=[4, 3], TensorDtype=torch.float32, ReduceOp=SUM)";
        let other = "CollectiveFingerPrint(SequenceNumber=2, OpType=BROADCAST, TensorShape=[4], TensorDtype=torch.float32, Root=0)";
        let m = mismatch_message(0, mine, &[(1, other.to_string())]).unwrap();
        assert!(m.starts_with("Detected mismatch between collectives on ranks. Rank 0 is running collective: CollectiveFingerPrint(SequenceNumber=2, OpType=ALLREDUCE"), "{m}");
        assert!(
            m.contains(
                "but Rank 1 is running collective: CollectiveFingerPrint(SequenceNumber=2, OpType=BROADCAST"
            ),
            "{m}"
        );
        assert!(m.contains("OpType: ALLREDUCE vs BROADCAST"), "{m}");
        assert!(m.contains("TensorShape: [4, 3] vs [4]"), "{m}");
        assert!(m.contains("ReduceOp: SUM vs (none)") && m.contains("Root: (none) vs 0"), "{m}");
        assert!(mismatch_message(0, mine, &[(1, mine.to_string()), (2, mine.to_string())]).is_none());
    }
}
