//! The reducer behind [`crate::DistributedDataParallel`]: gradient buckets, the hooks that
//! fill them during backward, and the end-of-backward wait (PyTorch's `c10d::Reducer`).
//!
//! - **Buckets.** The parameters that require grad are packed, in reverse order (the order
//!   backward produces their gradients), into flat buffers of one dtype each: the first holds
//!   up to `first_bucket_cap` bytes (1 MiB, so communication starts early), the others up to
//!   `bucket_cap` (25 MiB). A parameter that does not fit starts the next bucket, except that
//!   every bucket takes at least one.
//! - **Hooks.** Each parameter's post-accumulate-grad hook copies its gradient into its slot
//!   of the bucket (or finds it there already, with `gradient_as_bucket_view`). When a bucket's
//!   last gradient arrives, the bucket, and any later ones already full, go to the
//!   communication hook, in bucket order on every rank: the all-reduce runs on the process
//!   group's thread while backward goes on.
//! - **The end of backward.** When every bucket is launched, a callback queued on the
//!   autograd engine waits for them in order and writes the averaged gradients back into the
//!   parameters' `.grad` (views of the buckets with `gradient_as_bucket_view`).
//! - **Unused parameters.** With `find_unused_parameters`, forward's output graph is searched
//!   for the parameters it reaches; the others are marked ready (zeros) at the first hook, and
//!   a parameter that no rank used keeps its `.grad`. Without it, a parameter that gets no
//!   gradient leaves its bucket unlaunched, and the next forward fails with PyTorch's message
//!   naming it.

use crate::comm_hooks::{allreduce_hook, BucketFuture, CommHook, GradBucket};
use crate::{ProcessGroup, ReduceOp};
use pyrite_core::{autograd, bail, DType, Result, Tensor};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, Weak};

/// How the reducer is set up (from the DDP options).
pub(crate) struct ReducerConfig {
    pub first_bucket_cap: usize,
    pub bucket_cap: usize,
    pub find_unused_parameters: bool,
    pub gradient_as_bucket_view: bool,
    pub static_graph: bool,
}

struct Bucket {
    /// Indices into the reducer's parameters, in buffer order.
    params: Vec<usize>,
    buffer: Tensor,
    /// One view of `buffer` per parameter, shaped like it.
    views: Vec<Tensor>,
}

/// Where each parameter's gradient lives: (bucket, position in it).
type Slot = (usize, usize);

pub(crate) struct Reducer {
    group: ProcessGroup,
    names: Vec<String>,
    params: Vec<Tensor>,
    buckets: Vec<Bucket>,
    slots: Vec<Slot>,
    config: ReducerConfig,
    hook: Mutex<CommHook>,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// `prepare_for_backward` ran: this backward reduces.
    armed: bool,
    /// An armed iteration whose backward has not finished reducing.
    in_flight: bool,
    ready: Vec<bool>,
    /// Gradients still missing per bucket.
    pending: Vec<usize>,
    next_bucket: usize,
    futures: Vec<Option<BucketFuture>>,
    /// Parameters forward did not reach (marked ready at the first hook).
    unused: Vec<usize>,
    unused_marked: bool,
    /// `static_graph`: the unused parameters found in the first iteration.
    static_unused: Option<Vec<usize>>,
    /// Whether this rank used each parameter this iteration.
    locally_used: Vec<bool>,
}

/// Splits parameter indices (in the order given) into buckets by byte size and dtype.
pub(crate) fn assign_buckets(
    sizes: &[(usize, DType)],
    order: &[usize],
    first_cap: usize,
    cap: usize,
) -> Vec<Vec<usize>> {
    let mut done: Vec<Vec<usize>> = Vec::new();
    // open buckets per dtype: (indices, bytes)
    let mut open: HashMap<DType, (Vec<usize>, usize)> = HashMap::new();
    let mut dtype_order: Vec<DType> = Vec::new();
    for &i in order {
        let (numel, dtype) = sizes[i];
        let limit = if done.is_empty() { first_cap } else { cap };
        let entry = open.entry(dtype).or_insert_with(|| {
            dtype_order.push(dtype);
            (Vec::new(), 0)
        });
        entry.0.push(i);
        entry.1 += numel * dtype.size_in_bytes();
        if entry.1 >= limit {
            done.push(std::mem::take(&mut entry.0));
            entry.1 = 0;
        }
    }
    for d in dtype_order {
        if let Some((b, _)) = open.remove(&d)
            && !b.is_empty()
        {
            done.push(b);
        }
    }
    done
}

impl Reducer {
    pub(crate) fn new(
        group: ProcessGroup,
        named: Vec<(String, Tensor)>,
        config: ReducerConfig,
    ) -> Result<Arc<Reducer>> {
        let (names, params): (Vec<String>, Vec<Tensor>) = named.into_iter().unzip();
        let sizes: Vec<(usize, DType)> = params.iter().map(|p| (p.numel(), p.dtype())).collect();
        let order: Vec<usize> = (0..params.len()).rev().collect();
        let assignment = assign_buckets(&sizes, &order, config.first_bucket_cap, config.bucket_cap);
        let mut buckets = Vec::with_capacity(assignment.len());
        let mut slots = vec![(0, 0); params.len()];
        for (b, idx) in assignment.into_iter().enumerate() {
            let dtype = params[idx[0]].dtype();
            let mut offsets = Vec::with_capacity(idx.len());
            let mut total = 0;
            for (k, &i) in idx.iter().enumerate() {
                offsets.push(total);
                total += params[i].numel();
                slots[i] = (b, k);
            }
            let buffer = Tensor::zeros([total], dtype)?;
            let mut views = Vec::with_capacity(idx.len());
            for (k, &i) in idx.iter().enumerate() {
                views.push(buffer.narrow(0, offsets[k] as isize, params[i].numel())?.view(params[i].dims())?);
            }
            buckets.push(Bucket { params: idx, buffer, views });
        }
        let n = params.len();
        let reducer = Arc::new(Reducer {
            group,
            names,
            params,
            buckets,
            slots,
            config,
            hook: Mutex::new(Arc::new(allreduce_hook)),
            state: Mutex::new(State {
                ready: vec![false; n],
                locally_used: vec![false; n],
                ..Default::default()
            }),
        });
        if reducer.config.gradient_as_bucket_view {
            // gradients that exist already move into the buckets
            for (i, p) in reducer.params.iter().enumerate() {
                if let Some(g) = p.grad() {
                    let view = reducer.view(i).clone();
                    let _ng = autograd::no_grad();
                    view.copy_(&g)?;
                    p.set_grad(Some(view))?;
                }
            }
        }
        for (i, p) in reducer.params.iter().enumerate() {
            let weak: Weak<Reducer> = Arc::downgrade(&reducer);
            p.register_post_accumulate_grad_hook(move |_| match weak.upgrade() {
                Some(r) => r.on_grad_ready(i),
                None => Ok(()),
            })?;
        }
        Ok(reducer)
    }

    fn view(&self, i: usize) -> &Tensor {
        let (b, k) = self.slots[i];
        &self.buckets[b].views[k]
    }

    /// The bucket layout: each bucket's parameter names (`ddp._get_ddp_logging_data`'s bucket
    /// sizes, in a readable form).
    pub(crate) fn bucket_names(&self) -> Vec<Vec<String>> {
        self.buckets.iter().map(|b| b.params.iter().map(|&i| self.names[i].clone()).collect()).collect()
    }

    pub(crate) fn bucket_sizes_bytes(&self) -> Vec<usize> {
        self.buckets.iter().map(|b| b.buffer.numel() * b.buffer.element_size()).collect()
    }

    pub(crate) fn set_hook(&self, hook: CommHook) {
        *self.hook.lock().unwrap_or_else(|e| e.into_inner()) = hook;
    }

    /// Before forward: the previous iteration must have finished reducing.
    pub(crate) fn check_previous_iteration(&self) -> Result<()> {
        let s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if !s.in_flight {
            return Ok(());
        }
        let missing: Vec<usize> = (0..self.params.len()).filter(|&i| !s.ready[i]).collect();
        let names: Vec<&str> = missing.iter().map(|&i| self.names[i].as_str()).collect();
        let indices: Vec<String> = missing.iter().map(|i| i.to_string()).collect();
        bail!(
            Value,
            "Expected to have finished reduction in the prior iteration before starting a new one. This error \
             indicates that your module has parameters that were not used in producing loss. You can enable unused \
             parameter detection by passing the keyword argument `find_unused_parameters=True` to \
             `torch.nn.parallel.DistributedDataParallel`, and by making sure all `forward` function outputs \
             participate in calculating loss. If you already have done the above, then the distributed data \
             parallel module wasn't able to locate the output tensors in the return value of your module's \
             `forward` function. Parameter indices which did not receive grad for rank {}: {}\n Parameters which \
             did not receive grad for rank {}: {}",
            self.group.rank().unwrap_or(0),
            indices.join(" "),
            self.group.rank().unwrap_or(0),
            names.join(", ")
        )
    }

    /// After a forward whose backward should reduce: resets the iteration and finds the
    /// parameters the outputs do not reach.
    pub(crate) fn prepare_for_backward(&self, outputs: &[&Tensor]) -> Result<()> {
        let n = self.params.len();
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        s.armed = true;
        s.in_flight = true;
        s.ready = vec![false; n];
        s.pending = self.buckets.iter().map(|b| b.params.len()).collect();
        s.next_bucket = 0;
        s.futures = (0..self.buckets.len()).map(|_| None).collect();
        s.unused_marked = false;
        s.locally_used = vec![false; n];
        s.unused = if self.config.static_graph {
            match &s.static_unused {
                Some(u) => u.clone(),
                None => {
                    let u = self.unreached(outputs);
                    s.static_unused = Some(u.clone());
                    u
                }
            }
        } else if self.config.find_unused_parameters {
            self.unreached(outputs)
        } else {
            Vec::new()
        };
        Ok(())
    }

    /// Parameters no path from `outputs` leads to.
    fn unreached(&self, outputs: &[&Tensor]) -> Vec<usize> {
        let index: HashMap<usize, usize> =
            self.params.iter().enumerate().map(|(i, p)| (p.handle_id(), i)).collect();
        let mut reached = vec![false; self.params.len()];
        let mut seen: HashSet<usize> = HashSet::new();
        let mut stack = Vec::new();
        for t in outputs {
            if let Some(&i) = index.get(&t.handle_id()) {
                reached[i] = true;
            }
            if let Some(f) = t.grad_fn() {
                stack.push(f);
            }
        }
        while let Some(node) = stack.pop() {
            if !seen.insert(Arc::as_ptr(&node) as *const () as usize) {
                continue;
            }
            if let Some(v) = node.variable()
                && let Some(&i) = index.get(&v.handle_id())
            {
                reached[i] = true;
            }
            for (next, _) in node.next_functions().into_iter().flatten() {
                stack.push(next);
            }
        }
        (0..self.params.len()).filter(|&i| !reached[i]).collect()
    }

    /// A parameter's gradient has been accumulated (its post-accumulate-grad hook).
    fn on_grad_ready(self: &Arc<Reducer>, i: usize) -> Result<()> {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if !s.armed {
            return Ok(()); // no_sync, eval, or a backward that DDP's forward did not prepare
        }
        if !s.unused_marked {
            s.unused_marked = true;
            for u in s.unused.clone() {
                self.mark_ready(&mut s, u, false)?;
            }
        }
        self.mark_ready(&mut s, i, true)
    }

    fn mark_ready(self: &Arc<Reducer>, s: &mut State, i: usize, used: bool) -> Result<()> {
        if s.ready[i] {
            bail!(
                Autograd,
                "Expected to mark a variable ready only once. This error is caused by one of the following reasons: \
                 1) Use of a module parameter outside the `forward` function. 2) Reused parameters in multiple \
                 reentrant backward passes. Parameter at index {i} with name {} has been marked as ready twice.",
                self.names[i]
            );
        }
        s.ready[i] = true;
        s.locally_used[i] = used;
        let view = self.view(i);
        {
            let _ng = autograd::no_grad();
            match (used, self.params[i].grad()) {
                (true, Some(g)) => {
                    let in_place = g.same_storage(view) && g.storage_offset() == view.storage_offset();
                    if !in_place {
                        view.copy_(&g)?;
                        if self.config.gradient_as_bucket_view {
                            self.params[i].set_grad(Some(view.clone()))?;
                        }
                    }
                }
                _ => {
                    view.zero_()?;
                }
            }
        }
        let (b, _) = self.slots[i];
        s.pending[b] -= 1;
        // launch every full bucket from the next one on, in order
        while s.next_bucket < self.buckets.len() && s.pending[s.next_bucket] == 0 {
            let k = s.next_bucket;
            let bucket = &self.buckets[k];
            let gb = GradBucket {
                index: k,
                buffer: bucket.buffer.clone(),
                parameters: bucket.params.iter().map(|&i| self.params[i].clone()).collect(),
            };
            let hook = self.hook.lock().unwrap_or_else(|e| e.into_inner()).clone();
            let _launch =
                pyrite_core::profiler_record::record_function("DistributedDataParallel.launch_bucket");
            s.futures[k] = Some(hook(&self.group, &gb)?);
            s.next_bucket += 1;
        }
        if s.next_bucket == self.buckets.len() {
            let me = Arc::downgrade(self);
            autograd::queue_callback(move || match me.upgrade() {
                Some(r) => r.finalize(),
                None => Ok(()),
            })?;
        }
        Ok(())
    }

    /// End of backward: waits for every bucket and writes the averaged gradients back.
    fn finalize(&self) -> Result<()> {
        let (futures, locally_used) = {
            let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
            s.armed = false;
            s.in_flight = false;
            (std::mem::take(&mut s.futures), std::mem::take(&mut s.locally_used))
        };
        // which parameters some rank used (only unused-parameter detection can leave one out)
        let globally_used = if self.config.find_unused_parameters || self.config.static_graph {
            let n = locally_used.len();
            let used = Tensor::from_vec(locally_used.into_iter().map(|u| u as u8).collect::<Vec<u8>>(), [n])?;
            self.group.all_reduce(&used, ReduceOp::Max)?.wait()?;
            Some(used.to_vec::<u8>()?.into_iter().map(|u| u != 0).collect::<Vec<bool>>())
        } else {
            None
        };
        let _ng = autograd::no_grad();
        for (k, f) in futures.into_iter().enumerate() {
            let Some(f) = f else { continue };
            let bucket = &self.buckets[k];
            let result = f.wait()?;
            if !result.is_same(&bucket.buffer) {
                bucket.buffer.copy_(&result.reshape([bucket.buffer.numel()])?)?;
            }
            for (pos, &i) in bucket.params.iter().enumerate() {
                if let Some(used) = &globally_used
                    && !used[i]
                {
                    continue;
                }
                let p = &self.params[i];
                let view = &bucket.views[pos];
                if self.config.gradient_as_bucket_view {
                    let is_view = p
                        .grad()
                        .is_some_and(|g| g.same_storage(view) && g.storage_offset() == view.storage_offset());
                    if !is_view {
                        p.set_grad(Some(view.clone()))?;
                    }
                } else {
                    match p.grad() {
                        Some(g) => {
                            g.copy_(view)?;
                        }
                        None => p.set_grad(Some(view.deep_clone()?))?,
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_fill_in_reverse_order_with_a_small_first_one() {
        // five f32 parameters of 100, 200, 300, 400 and 500 elements
        let sizes: Vec<(usize, DType)> = [100, 200, 300, 400, 500].iter().map(|&n| (n, DType::F32)).collect();
        let order: Vec<usize> = (0..5).rev().collect();
        // the first bucket closes at 1000 bytes: the last parameter (2000 bytes) alone; the next
        // closes once it reaches 3000 bytes (1600 + 1200 + 800), as PyTorch's assignment does
        let b = assign_buckets(&sizes, &order, 1000, 3000);
        assert_eq!(b, vec![vec![4], vec![3, 2, 1], vec![0]]);
        // everything in one bucket when the caps are large
        assert_eq!(assign_buckets(&sizes, &order, 1 << 20, 25 << 20), vec![vec![4, 3, 2, 1, 0]]);
    }

    #[test]
    fn buckets_hold_one_dtype() {
        let sizes = [(10, DType::F32), (10, DType::F64), (10, DType::F32)];
        let b = assign_buckets(&sizes, &[2, 1, 0], 1 << 20, 1 << 20);
        assert_eq!(b, vec![vec![2, 0], vec![1]]);
    }
}
