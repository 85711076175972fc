//! `torch.nn.utils.rnn`: batches of sequences of different lengths for the recurrent layers.
//!
//! - [`pad_sequence`] stacks sequences into one padded tensor; [`unpad_sequence`] undoes it.
//! - [`pack_padded_sequence`] / [`pack_sequence`] make a [`PackedSequence`]: the timesteps
//!   one after the other, each holding only the sequences still running, so that an `RNN`,
//!   `LSTM` or `GRU` computes nothing on padding and returns each sequence's own last state.
//! - [`pad_packed_sequence`] / [`unpack_sequence`] turn a packed output back into a padded
//!   tensor (with the lengths) or a list of sequences.
//!
//! Packing and padding are gathers (`index_select`), so they are differentiable with
//! respect to the data.
//!
//! ```
//! use pyrite::nn::utils::rnn::{pack_padded_sequence, pad_packed_sequence};
//! use pyrite::Tensor;
//! // two sequences of lengths 1 and 3, padded: [time, batch]
//! let x = Tensor::new([[1f32, 4.], [0., 5.], [0., 6.]])?;
//! let packed = pack_padded_sequence(&x, &[1, 3], false, false)?;
//! assert_eq!(packed.data.to_vec::<f32>()?, vec![4., 1., 5., 6.]);
//! assert_eq!(packed.batch_sizes.to_vec::<i64>()?, vec![2, 1, 1]);
//! let (padded, lengths) = pad_packed_sequence(&packed, false, 0.0, None)?;
//! assert_eq!(padded.to_vec2::<f32>()?, x.to_vec2::<f32>()?);
//! assert_eq!(lengths.to_vec::<i64>()?, vec![1, 3]);
//! # Ok::<(), pyrite::Error>(())
//! ```

use crate::value::Value;
use pyrite_core::{bail, DType, Result, Tensor};

/// A batch of sequences of different lengths, packed timestep by timestep
/// (`torch.nn.utils.rnn.PackedSequence`).
///
/// - `data`: `[sum(batch_sizes), *]`, the rows of timestep 0, then of timestep 1, ...; within
///   a timestep the sequences come longest first;
/// - `batch_sizes`: 1-D `int64`, how many sequences are still running at each timestep (non-
///   increasing);
/// - `sorted_indices`: the batch position of each packed sequence, when packing reordered
///   them (`enforce_sorted=false`); `unsorted_indices` its inverse, which puts results back in
///   the caller's order.
///
/// Through a module's [`Value`] interface a packed sequence travels as a [`Value::Dict`] with
/// these four keys, in this order ([`PackedSequence::to_value`],
/// [`PackedSequence::from_value`]).
#[derive(Clone, Debug)]
pub struct PackedSequence {
    pub data: Tensor,
    pub batch_sizes: Tensor,
    pub sorted_indices: Option<Tensor>,
    pub unsorted_indices: Option<Tensor>,
}

impl PackedSequence {
    /// `PackedSequence(data, batch_sizes, sorted_indices, unsorted_indices)`; as in PyTorch,
    /// a missing `unsorted_indices` is computed from `sorted_indices`. Checks that the parts
    /// fit together.
    pub fn new(
        data: Tensor,
        batch_sizes: Tensor,
        sorted_indices: Option<Tensor>,
        unsorted_indices: Option<Tensor>,
    ) -> Result<PackedSequence> {
        let unsorted_indices = match (&sorted_indices, unsorted_indices) {
            (Some(s), None) => Some(invert_permutation(s)?),
            (_, u) => u,
        };
        let p = PackedSequence { data, batch_sizes, sorted_indices, unsorted_indices };
        p.batch_sizes_vec()?;
        Ok(p)
    }

    /// `batch_sizes` as numbers, after checking that the packed sequence is well formed:
    /// `batch_sizes` 1-D `int64`, positive and non-increasing, summing to the rows of `data`;
    /// the indices, when present, permutations of the batch.
    pub fn batch_sizes_vec(&self) -> Result<Vec<usize>> {
        let bs = &self.batch_sizes;
        if bs.rank() != 1 || bs.dtype() != DType::I64 {
            bail!(
                Value,
                "PackedSequence: batch_sizes must be a 1-D int64 tensor, got {}-D {}",
                bs.rank(),
                bs.dtype()
            );
        }
        let v = bs.to_vec::<i64>()?;
        if v.is_empty() {
            bail!(Value, "PackedSequence: batch_sizes is empty (no timesteps)");
        }
        if v.iter().any(|&b| b <= 0) || v.windows(2).any(|w| w[1] > w[0]) {
            bail!(Value, "PackedSequence: batch_sizes must be positive and non-increasing, got {v:?}");
        }
        let v: Vec<usize> = v.into_iter().map(|b| b as usize).collect();
        let total: usize = v.iter().sum();
        if self.data.rank() == 0 || self.data.dims()[0] != total {
            bail!(
                Shape,
                "PackedSequence: batch_sizes sum to {total} but data has shape {}",
                self.data.shape()
            );
        }
        for (name, idx) in
            [("sorted_indices", &self.sorted_indices), ("unsorted_indices", &self.unsorted_indices)]
        {
            if let Some(idx) = idx {
                check_permutation(idx, v[0], name)?;
            }
        }
        Ok(v)
    }

    /// The packed sequence as a module input or output: a [`Value::Dict`] with keys `data`,
    /// `batch_sizes`, `sorted_indices`, `unsorted_indices` (`None` when absent).
    pub fn to_value(&self) -> Value {
        Value::Dict(vec![
            ("data".to_string(), Value::Tensor(self.data.clone())),
            ("batch_sizes".to_string(), Value::Tensor(self.batch_sizes.clone())),
            ("sorted_indices".to_string(), self.sorted_indices.clone().into()),
            ("unsorted_indices".to_string(), self.unsorted_indices.clone().into()),
        ])
    }

    /// Reads a [`Value::Dict`] made by [`PackedSequence::to_value`] (keys in any order).
    pub fn from_value(v: &Value) -> Result<PackedSequence> {
        let Value::Dict(items) = v else {
            bail!(Value, "expected a PackedSequence (a dict of data, batch_sizes, ...), got {}", v.kind())
        };
        let get = |k: &str| items.iter().find(|(n, _)| n == k).map(|(_, x)| x);
        let tensor = |k: &str| -> Result<Tensor> {
            match get(k) {
                Some(Value::Tensor(t)) => Ok(t.clone()),
                Some(other) => bail!(Value, "PackedSequence: `{k}` must be a Tensor, got {}", other.kind()),
                None => bail!(Value, "PackedSequence: missing `{k}`"),
            }
        };
        let optional = |k: &str| -> Result<Option<Tensor>> {
            match get(k) {
                None | Some(Value::None) => Ok(None),
                Some(Value::Tensor(t)) => Ok(Some(t.clone())),
                Some(other) => {
                    bail!(Value, "PackedSequence: `{k}` must be a Tensor or None, got {}", other.kind())
                }
            }
        };
        if let Some((k, _)) = items.iter().find(|(k, _)| {
            !["data", "batch_sizes", "sorted_indices", "unsorted_indices"].contains(&k.as_str())
        }) {
            bail!(Value, "PackedSequence: unexpected key `{k}`");
        }
        PackedSequence::new(
            tensor("data")?,
            tensor("batch_sizes")?,
            optional("sorted_indices")?,
            optional("unsorted_indices")?,
        )
    }

    /// Whether `v` is a packed sequence's [`Value`] (a dict with a `batch_sizes` key).
    pub fn is_packed_value(v: &Value) -> bool {
        matches!(v, Value::Dict(items) if items.iter().any(|(k, _)| k == "batch_sizes"))
    }

    /// `packed.to(dtype)`: the data converted, the rest shared.
    pub fn to_dtype(&self, dtype: DType) -> Result<PackedSequence> {
        Ok(PackedSequence { data: self.data.to_dtype(dtype)?, ..self.clone() })
    }
}

impl From<PackedSequence> for Value {
    fn from(p: PackedSequence) -> Value {
        p.to_value()
    }
}

impl From<&PackedSequence> for Value {
    fn from(p: &PackedSequence) -> Value {
        p.to_value()
    }
}

fn check_permutation(idx: &Tensor, n: usize, name: &str) -> Result<()> {
    if idx.rank() != 1 || idx.dtype() != DType::I64 || idx.dims()[0] != n {
        bail!(
            Value,
            "PackedSequence: {name} must be a 1-D int64 tensor of {n} elements (the batch), got {}-D {} of shape {}",
            idx.rank(),
            idx.dtype(),
            idx.shape()
        );
    }
    let mut seen = vec![false; n];
    for i in idx.to_vec::<i64>()? {
        if i < 0 || i as usize >= n || seen[i as usize] {
            bail!(Value, "PackedSequence: {name} must be a permutation of 0..{n}");
        }
        seen[i as usize] = true;
    }
    Ok(())
}

/// The inverse of a permutation given as a 1-D int64 tensor.
fn invert_permutation(p: &Tensor) -> Result<Tensor> {
    check_permutation(p, p.numel(), "sorted_indices")?;
    let v = p.to_vec::<i64>()?;
    let mut inv = vec![0i64; v.len()];
    for (i, &j) in v.iter().enumerate() {
        inv[j as usize] = i as i64;
    }
    Tensor::from_vec(inv, [v.len()])
}

fn index_tensor(v: Vec<i64>) -> Result<Tensor> {
    let n = v.len();
    Tensor::from_vec(v, [n])
}

/// `padding_side=` of [`pad_sequence`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PaddingSide {
    /// Padding after each sequence (PyTorch's default).
    #[default]
    Right,
    /// Padding before each sequence.
    Left,
}

impl PaddingSide {
    /// `"right"` or `"left"`, as PyTorch spells them.
    pub fn parse(s: &str) -> Result<PaddingSide> {
        match s {
            "right" => Ok(PaddingSide::Right),
            "left" => Ok(PaddingSide::Left),
            other => bail!(Value, "Expected padding_side to be one of left or right, but got {other}."),
        }
    }
}

/// `pad_sequence(sequences, batch_first=False, padding_value=0.0, padding_side='right')`:
/// sequences `[L_i, *]` stacked into `[L_max, N, *]` (`[N, L_max, *]` with `batch_first`),
/// the missing steps filled with `padding_value`. The result has the first sequence's dtype.
///
/// ```
/// use pyrite::nn::utils::rnn::{pad_sequence, PaddingSide};
/// use pyrite::Tensor;
/// let (a, b) = (Tensor::new([1f32, 2., 3.])?, Tensor::new([4f32])?);
/// let right = pad_sequence(&[&a, &b], true, 0.0, PaddingSide::Right)?;
/// assert_eq!(right.to_vec2::<f32>()?, vec![vec![1., 2., 3.], vec![4., 0., 0.]]);
/// let left = pad_sequence(&[&a, &b], true, -1.0, PaddingSide::Left)?;
/// assert_eq!(left.to_vec2::<f32>()?, vec![vec![1., 2., 3.], vec![-1., -1., 4.]]);
/// # Ok::<(), pyrite::Error>(())
/// ```
pub fn pad_sequence<T: AsRef<Tensor>>(
    sequences: &[T],
    batch_first: bool,
    padding_value: f64,
    padding_side: PaddingSide,
) -> Result<Tensor> {
    let Some(first) = sequences.first().map(|s| s.as_ref()) else {
        bail!(Value, "received an empty list of sequences")
    };
    if first.rank() == 0 {
        bail!(Shape, "pad_sequence: sequences must have at least 1 dimension (time), got a 0-d tensor");
    }
    let rest = &first.dims()[1..];
    let dtype = first.dtype();
    for (i, s) in sequences.iter().enumerate() {
        let s = s.as_ref();
        if s.rank() == 0 || &s.dims()[1..] != rest {
            bail!(
                Shape,
                "pad_sequence: sequence {i} has shape {}, but sequence 0 has {}: all must match after the first (time) dimension",
                s.shape(),
                first.shape()
            );
        }
    }
    let max_len = sequences.iter().map(|s| s.as_ref().dims()[0]).max().unwrap_or(0);
    let padded = sequences
        .iter()
        .map(|s| {
            let s = s.as_ref();
            let s = if s.dtype() == dtype { s.clone() } else { s.to_dtype(dtype)? };
            let missing = max_len - s.dims()[0];
            if missing == 0 {
                return Ok(s);
            }
            let mut shape = vec![missing];
            shape.extend_from_slice(rest);
            let pad = Tensor::full(shape, padding_value, dtype)?;
            match padding_side {
                PaddingSide::Right => Tensor::cat(&[s, pad], 0),
                PaddingSide::Left => Tensor::cat(&[pad, s], 0),
            }
        })
        .collect::<Result<Vec<_>>>()?;
    Tensor::stack(&padded, if batch_first { 0 } else { 1 })
}

/// `unpad_sequence(padded_sequences, lengths, batch_first=False)`: the sequences of a padded
/// batch, each cut to its length (views of `padded`).
pub fn unpad_sequence(padded: &Tensor, lengths: &[usize], batch_first: bool) -> Result<Vec<Tensor>> {
    if padded.rank() < 2 {
        bail!(
            Shape,
            "unpad_sequence: expected a padded batch of at least 2 dimensions, got shape {}",
            padded.shape()
        );
    }
    let x = if batch_first { padded.clone() } else { padded.transpose(0, 1)? };
    let (n, l) = (x.dims()[0], x.dims()[1]);
    if lengths.len() != n {
        bail!(Value, "unpad_sequence: got {} lengths for a batch of {n} sequences", lengths.len());
    }
    lengths
        .iter()
        .enumerate()
        .map(|(i, &len)| {
            if len > l {
                bail!(Value, "unpad_sequence: length {len} of sequence {i} exceeds the padded length {l}");
            }
            x.select(0, i as isize)?.narrow(0, 0, len)
        })
        .collect()
}

/// `pack_padded_sequence(input, lengths, batch_first=False, enforce_sorted=True)`: packs a
/// padded batch `[L, N, *]` (`[N, L, *]` with `batch_first`) of sequences of the given
/// lengths. With `enforce_sorted`, `lengths` must be non-increasing; otherwise the sequences
/// are sorted (longest first, ties in batch order) and the order kept in the result's
/// indices.
pub fn pack_padded_sequence(
    input: &Tensor,
    lengths: &[usize],
    batch_first: bool,
    enforce_sorted: bool,
) -> Result<PackedSequence> {
    if input.rank() < 2 {
        bail!(
            Shape,
            "pack_padded_sequence: input must have at least 2 dimensions (time and batch), got shape {}",
            input.shape()
        );
    }
    let x = if batch_first { input.transpose(0, 1)? } else { input.clone() };
    let (l, n) = (x.dims()[0], x.dims()[1]);
    if lengths.len() != n {
        bail!(
            Value,
            "Expected `len(lengths)` to be equal to batch_size, but got {} (batch_size={n})",
            lengths.len()
        );
    }
    if n == 0 {
        bail!(Value, "Cannot pack empty tensors.");
    }
    let sorted: Option<Vec<usize>> = if enforce_sorted {
        if lengths.windows(2).any(|w| w[1] > w[0]) {
            bail!(
                Value,
                "`lengths` array must be sorted in decreasing order when `enforce_sorted` is True. You can pass `enforce_sorted=False` to pack_padded_sequence and/or pack_sequence to sidestep this requirement if you do not need ONNX exportability."
            );
        }
        None
    } else {
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by(|&a, &b| lengths[b].cmp(&lengths[a]));
        Some(order)
    };
    let order: Vec<usize> = sorted.clone().unwrap_or_else(|| (0..n).collect());
    let sorted_lengths: Vec<usize> = order.iter().map(|&i| lengths[i]).collect();
    if sorted_lengths[n - 1] == 0 {
        bail!(
            Value,
            "Length of all samples has to be greater than 0, but found an element in 'lengths' that is <= 0"
        );
    }
    if sorted_lengths[0] > l {
        bail!(
            Value,
            "pack_padded_sequence: a length of {} is longer than the padded input's {l} timesteps",
            sorted_lengths[0]
        );
    }
    let max_len = sorted_lengths[0];
    let mut batch_sizes = Vec::with_capacity(max_len);
    let mut rows = Vec::new();
    for t in 0..max_len {
        let b = sorted_lengths.iter().take_while(|&&len| len > t).count();
        batch_sizes.push(b as i64);
        rows.extend(order[..b].iter().map(|&j| (t * n + j) as i64));
    }
    let mut flat_shape = vec![l * n];
    flat_shape.extend_from_slice(&x.dims()[2..]);
    let data = x.reshape(flat_shape)?.index_select(0, &index_tensor(rows)?)?;
    let sorted_indices =
        sorted.map(|s| index_tensor(s.into_iter().map(|i| i as i64).collect())).transpose()?;
    PackedSequence::new(data, index_tensor(batch_sizes)?, sorted_indices, None)
}

/// `pack_sequence(sequences, enforce_sorted=True)`: packs sequences `[L_i, *]` (pads them,
/// then [`pack_padded_sequence`]).
///
/// ```
/// use pyrite::nn::utils::rnn::pack_sequence;
/// use pyrite::Tensor;
/// let seqs = [Tensor::new([1f32, 2.])?, Tensor::new([3f32, 4., 5.])?, Tensor::new([6f32])?];
/// let p = pack_sequence(&seqs, false)?;
/// assert_eq!(p.data.to_vec::<f32>()?, vec![3., 1., 6., 4., 2., 5.]);
/// assert_eq!(p.batch_sizes.to_vec::<i64>()?, vec![3, 2, 1]);
/// assert_eq!(p.sorted_indices.unwrap().to_vec::<i64>()?, vec![1, 0, 2]);
/// # Ok::<(), pyrite::Error>(())
/// ```
pub fn pack_sequence<T: AsRef<Tensor>>(sequences: &[T], enforce_sorted: bool) -> Result<PackedSequence> {
    let padded = pad_sequence(sequences, false, 0.0, PaddingSide::Right)?;
    let lengths: Vec<usize> = sequences.iter().map(|s| s.as_ref().dims()[0]).collect();
    pack_padded_sequence(&padded, &lengths, false, enforce_sorted)
}

/// `pad_packed_sequence(sequence, batch_first=False, padding_value=0.0, total_length=None)`:
/// the padded batch `[T, N, *]` (`[N, T, *]` with `batch_first`), `T` the longest length or
/// `total_length`, and the lengths (`int64`), both in the order the sequences had before
/// packing.
pub fn pad_packed_sequence(
    sequence: &PackedSequence,
    batch_first: bool,
    padding_value: f64,
    total_length: Option<usize>,
) -> Result<(Tensor, Tensor)> {
    let bs = sequence.batch_sizes_vec()?;
    let max_len = bs.len();
    let t = match total_length {
        Some(t) if t < max_len => bail!(
            Value,
            "Expected total_length to be at least the length of the longest sequence in input, but got total_length={t} and max sequence length being {max_len}"
        ),
        Some(t) => t,
        None => max_len,
    };
    let n = bs[0];
    let data = &sequence.data;
    let rest = &data.dims()[1..];
    // column j of the result is the packed sequence unsorted[j]
    let unsorted: Vec<usize> = match &sequence.unsorted_indices {
        Some(u) => u.to_vec::<i64>()?.into_iter().map(|i| i as usize).collect(),
        None => (0..n).collect(),
    };
    let pad_row = data.dims()[0] as i64;
    let mut offsets = Vec::with_capacity(max_len);
    let mut off = 0usize;
    for &b in &bs {
        offsets.push(off);
        off += b;
    }
    let mut rows = Vec::with_capacity(t * n);
    for step in 0..t {
        for &s in &unsorted {
            let inside = step < max_len && s < bs[step];
            rows.push(if inside { (offsets[step] + s) as i64 } else { pad_row });
        }
    }
    let mut pad_shape = vec![1];
    pad_shape.extend_from_slice(rest);
    let src = Tensor::cat(&[data.clone(), Tensor::full(pad_shape, padding_value, data.dtype())?], 0)?;
    let mut out_shape = vec![t, n];
    out_shape.extend_from_slice(rest);
    let out = src.index_select(0, &index_tensor(rows)?)?.reshape(out_shape)?;
    let out = if batch_first { out.transpose(0, 1)? } else { out };
    // the length of packed sequence s: the steps whose batch includes it
    let lengths: Vec<i64> =
        unsorted.iter().map(|&s| bs.iter().take_while(|&&b| b > s).count() as i64).collect();
    Ok((out, index_tensor(lengths)?))
}

/// `unpack_sequence(packed_sequences)`: the list of sequences `[L_i, *]`, in the order they
/// had before packing.
pub fn unpack_sequence(packed: &PackedSequence) -> Result<Vec<Tensor>> {
    let (padded, lengths) = pad_packed_sequence(packed, true, 0.0, None)?;
    let lengths: Vec<usize> = lengths.to_vec::<i64>()?.into_iter().map(|l| l as usize).collect();
    unpad_sequence(&padded, &lengths, true)
}
