//! Intra-op threads: `set_num_threads` / `get_num_threads` like PyTorch's, and the pool that
//! parallel kernels run on.
//!
//! The default is the number of cores, overridden by `PYRITE_NUM_THREADS` (or `OMP_NUM_THREADS`,
//! as PyTorch honours it).
//!
//! # The pool
//! `n` threads take part in a parallel op: the calling thread and `n - 1` workers. A job is a
//! number of tasks, claimed one at a time from a shared counter by whoever is free, so a worker
//! that starts late simply finds fewer tasks left, and the result never depends on who ran
//! which task.
//!
//! Like OpenMP's runtime (which PyTorch uses), a worker keeps spinning for a short while after
//! a job ([`SPIN`]) before it goes to sleep. Waking a sleeping thread costs 20-60 us on a VM,
//! as much as a whole 256x256 matrix product; ops that follow each other closely find the
//! workers still awake. `PYRITE_SPIN_US` changes the spin time (0 = sleep at once).
//!
//! One job runs at a time. A parallel op started while the pool is busy (from another user
//! thread, or from inside a task) runs on its caller alone, so nesting never deadlocks.

use std::cell::Cell;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::*};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::time::{Duration, Instant};

/// How long an idle worker spins before it sleeps (default; `PYRITE_SPIN_US` overrides).
pub const SPIN: Duration = Duration::from_micros(200);

static POOL: RwLock<Option<Arc<Pool>>> = RwLock::new(None);

thread_local! {
    /// Set while this thread runs tasks of a job: nested parallel ops run inline.
    static IN_JOB: Cell<bool> = const { Cell::new(false) };
    /// This thread's own thread budget (0: none, the pool's size applies).
    static LOCAL_LIMIT: Cell<usize> = const { Cell::new(0) };
}

/// Caps the threads that parallel ops started on the calling thread use (`None` lifts the
/// cap). A tuning trial runs under its `resources_per_trial` budget this way: with a budget of
/// 1 its ops run on its own thread only, so two such trials on two cores do not fight over
/// the pool. [`get_num_threads`] reports the cap on this thread.
///
/// ```
/// use pyrite_core::threads::set_thread_num_threads;
/// std::thread::spawn(|| {
///     set_thread_num_threads(Some(1));
///     assert_eq!(pyrite_core::get_num_threads(), 1);
/// })
/// .join()
/// .unwrap();
/// ```
pub fn set_thread_num_threads(n: Option<usize>) {
    LOCAL_LIMIT.with(|c| c.set(n.map_or(0, |n| n.max(1))));
}

fn default_threads() -> usize {
    for var in ["PYRITE_NUM_THREADS", "OMP_NUM_THREADS"] {
        if let Some(n) = std::env::var(var).ok().and_then(|s| s.trim().parse::<usize>().ok())
            && n > 0
        {
            return n;
        }
    }
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}

fn spin_time() -> Duration {
    std::env::var("PYRITE_SPIN_US")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .map(Duration::from_micros)
        .unwrap_or(SPIN)
}

/// Sets the number of threads used by parallel kernels (`torch.set_num_threads`); 0 means 1.
pub fn set_num_threads(n: usize) {
    let new = Pool::start(n.max(1));
    let old = POOL.write().unwrap_or_else(|e| e.into_inner()).replace(new);
    if let Some(old) = old {
        old.shutdown();
    }
}

/// The number of threads used by parallel kernels (`torch.get_num_threads`).
pub fn get_num_threads() -> usize {
    let threads = pool().threads;
    match LOCAL_LIMIT.with(Cell::get) {
        0 => threads,
        limit => threads.min(limit),
    }
}

fn pool() -> Arc<Pool> {
    if let Some(p) = POOL.read().unwrap_or_else(|e| e.into_inner()).as_ref() {
        return p.clone();
    }
    let mut w = POOL.write().unwrap_or_else(|e| e.into_inner());
    w.get_or_insert_with(|| Pool::start(default_threads())).clone()
}

/// Runs `f(start, end)` over `0..n` split into one chunk per thread when `n` is at least
/// `grain` elements per thread; inline otherwise.
pub(crate) fn parallel_for(n: usize, grain: usize, f: impl Fn(usize, usize) + Sync) {
    let grain = grain.max(1);
    if n < 2 * grain {
        f(0, n);
        return;
    }
    let pool = pool();
    let threads = get_num_threads().min(n / grain).max(1);
    if threads == 1 {
        f(0, n);
        return;
    }
    let chunk = n.div_ceil(threads);
    run_tasks_on(&pool, n.div_ceil(chunk), |t| f(t * chunk, ((t + 1) * chunk).min(n)));
}

/// Runs `f(0)`, ..., `f(tasks - 1)`, each once, on the calling thread and the pool's workers.
/// Returns when all have finished. A panic in a task is re-raised here.
pub(crate) fn run_tasks(tasks: usize, f: impl Fn(usize) + Sync) {
    if tasks > 0 {
        run_tasks_on(&pool(), tasks, f);
    }
}

fn run_tasks_on(pool: &Pool, tasks: usize, f: impl Fn(usize) + Sync) {
    if tasks == 1
        || pool.workers == 0
        || IN_JOB.with(Cell::get)
        || LOCAL_LIMIT.with(Cell::get) == 1
        || pool.busy.swap(true, Acquire)
    {
        (0..tasks).for_each(f);
        return;
    }
    // Frees the pool when the job ends, also when a task's panic is re-raised.
    struct Release<'a>(&'a AtomicBool);
    impl Drop for Release<'_> {
        fn drop(&mut self) {
            self.0.store(false, std::sync::atomic::Ordering::Release);
        }
    }
    let _free = Release(&pool.busy);
    pool.run(tasks, &f);
}

/// A job as the workers see it: a type-erased pointer to the caller's closure.
#[derive(Clone, Copy)]
struct JobRef {
    f: *const (dyn Fn(usize) + Sync),
    tasks: usize,
}
// SAFETY: the closure is `Sync`, and the caller keeps it alive until every worker that joined
// the job has left it (see `Pool::run`).
unsafe impl Send for JobRef {}

struct Pool {
    threads: usize,
    workers: usize,
    /// A job is running (one at a time).
    busy: AtomicBool,
    /// Bumped for every job: what idle workers watch.
    epoch: AtomicU64,
    job: Mutex<Option<JobRef>>,
    /// The next task index to hand out.
    next: AtomicUsize,
    /// Tasks finished in the current job.
    done: AtomicUsize,
    /// Workers inside the current job.
    active: AtomicUsize,
    /// The current job no longer admits workers.
    closed: AtomicBool,
    panic: Mutex<Option<Box<dyn std::any::Any + Send>>>,
    /// Sleeping workers wait here.
    sleepers: AtomicUsize,
    sleep_lock: Mutex<()>,
    wake: Condvar,
    shutdown: AtomicBool,
    spin: Duration,
}

impl Pool {
    fn start(threads: usize) -> Arc<Pool> {
        let pool = Arc::new(Pool {
            threads,
            workers: threads - 1,
            busy: AtomicBool::new(false),
            epoch: AtomicU64::new(0),
            job: Mutex::new(None),
            next: AtomicUsize::new(0),
            done: AtomicUsize::new(0),
            active: AtomicUsize::new(0),
            closed: AtomicBool::new(true),
            panic: Mutex::new(None),
            sleepers: AtomicUsize::new(0),
            sleep_lock: Mutex::new(()),
            wake: Condvar::new(),
            shutdown: AtomicBool::new(false),
            spin: spin_time(),
        });
        for i in 0..pool.workers {
            let p = pool.clone();
            std::thread::Builder::new()
                .name(format!("pyrite-{i}"))
                .spawn(move || p.worker())
                .expect("failed to start an intra-op worker thread");
        }
        pool
    }

    fn shutdown(&self) {
        self.shutdown.store(true, SeqCst);
        self.epoch.fetch_add(1, SeqCst);
        let _g = self.sleep_lock.lock().unwrap_or_else(|e| e.into_inner());
        self.wake.notify_all();
    }

    /// Runs one job; `self.busy` is held by the caller.
    fn run(&self, tasks: usize, f: &(dyn Fn(usize) + Sync)) {
        // SAFETY: only the lifetime is erased; `Close` below waits for every worker that joined
        // this job to leave it before `f` goes out of scope, even if a task panics.
        let f: *const (dyn Fn(usize) + Sync) = unsafe { std::mem::transmute(f) };
        *self.job.lock().unwrap_or_else(|e| e.into_inner()) = Some(JobRef { f, tasks });
        self.next.store(0, SeqCst);
        self.done.store(0, SeqCst);
        self.closed.store(false, SeqCst);
        self.epoch.fetch_add(1, SeqCst);
        if self.sleepers.load(SeqCst) > 0 {
            let _g = self.sleep_lock.lock().unwrap_or_else(|e| e.into_inner());
            self.wake.notify_all();
        }

        struct Close<'a>(&'a Pool);
        impl Drop for Close<'_> {
            fn drop(&mut self) {
                let p = self.0;
                p.closed.store(true, SeqCst);
                let mut spins = 0u32;
                while p.active.load(SeqCst) != 0 {
                    spins += 1;
                    if spins < 1 << 16 {
                        std::hint::spin_loop();
                    } else {
                        std::thread::yield_now();
                    }
                }
                *p.job.lock().unwrap_or_else(|e| e.into_inner()) = None;
            }
        }
        let close = Close(self);
        IN_JOB.with(|c| c.set(true));
        let caller = catch_unwind(AssertUnwindSafe(|| self.claim(f, tasks)));
        IN_JOB.with(|c| c.set(false));
        // Wait for the tasks that workers are still running.
        let mut spins = 0u32;
        while self.done.load(Acquire) < tasks {
            spins += 1;
            if spins < 1 << 16 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
        drop(close);
        if let Err(e) = caller {
            resume_unwind(e);
        }
        if let Some(e) = self.panic.lock().unwrap_or_else(|e| e.into_inner()).take() {
            resume_unwind(e);
        }
    }

    /// Claims and runs tasks until none are left.
    fn claim(&self, f: *const (dyn Fn(usize) + Sync), tasks: usize) {
        loop {
            let i = self.next.fetch_add(1, Relaxed);
            if i >= tasks {
                return;
            }
            // SAFETY: the job is alive while this thread takes part in it (see `run`).
            let r = catch_unwind(AssertUnwindSafe(|| unsafe { (*f)(i) }));
            if let Err(e) = r {
                self.panic.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert(e);
            }
            self.done.fetch_add(1, Release);
        }
    }

    fn worker(&self) {
        IN_JOB.with(|c| c.set(true));
        let mut seen = 0u64;
        loop {
            let Some(epoch) = self.wait_for_job(seen) else { return };
            seen = epoch;
            // Join the job unless it is already closed (Dekker-style with `Close`: either the
            // caller sees this worker as active, or this worker sees the job closed).
            self.active.fetch_add(1, SeqCst);
            if !self.closed.load(SeqCst) {
                let job = *self.job.lock().unwrap_or_else(|e| e.into_inner());
                if let Some(JobRef { f, tasks }) = job {
                    self.claim(f, tasks);
                }
            }
            self.active.fetch_sub(1, SeqCst);
        }
    }

    /// Spins, then sleeps, until the epoch moves past `seen`; `None` on shutdown.
    fn wait_for_job(&self, seen: u64) -> Option<u64> {
        let start = Instant::now();
        let mut spins = 0u32;
        loop {
            let e = self.epoch.load(Acquire);
            if self.shutdown.load(Relaxed) {
                return None;
            }
            if e != seen {
                return Some(e);
            }
            spins = spins.wrapping_add(1);
            if spins.is_multiple_of(64) && start.elapsed() >= self.spin {
                break;
            }
            std::hint::spin_loop();
        }
        let mut g = self.sleep_lock.lock().unwrap_or_else(|e| e.into_inner());
        self.sleepers.fetch_add(1, SeqCst);
        loop {
            let e = self.epoch.load(SeqCst);
            if self.shutdown.load(SeqCst) {
                self.sleepers.fetch_sub(1, SeqCst);
                return None;
            }
            if e != seen {
                self.sleepers.fetch_sub(1, SeqCst);
                return Some(e);
            }
            g = self.wake.wait(g).unwrap_or_else(|e| e.into_inner());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_task_runs_once_and_nesting_runs_inline() {
        let hits: Vec<AtomicUsize> = (0..1000).map(|_| AtomicUsize::new(0)).collect();
        run_tasks(1000, |i| {
            // A nested parallel op inside a task must not deadlock.
            parallel_for(10, 1, |a, b| {
                if a == 0 && b > 0 {
                    hits[i].fetch_add(1, Relaxed);
                }
            });
        });
        assert!(hits.iter().all(|h| h.load(Relaxed) == 1));
    }

    #[test]
    fn parallel_for_covers_the_range_in_disjoint_chunks() {
        for n in [0usize, 1, 7, 100, 10_001] {
            let seen: Vec<AtomicUsize> = (0..n).map(|_| AtomicUsize::new(0)).collect();
            parallel_for(n, 3, |a, b| {
                (a..b).for_each(|i| {
                    seen[i].fetch_add(1, Relaxed);
                })
            });
            assert!(seen.iter().all(|h| h.load(Relaxed) == 1), "n = {n}");
        }
    }

    #[test]
    fn a_panicking_task_panics_the_caller_and_the_pool_still_works() {
        let r = catch_unwind(|| run_tasks(64, |i| assert!(i != 33, "task 33 fails")));
        assert!(r.is_err());
        let count = AtomicUsize::new(0);
        run_tasks(64, |_| {
            count.fetch_add(1, Relaxed);
        });
        assert_eq!(count.load(Relaxed), 64);
    }

    #[test]
    fn concurrent_callers_all_finish() {
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..200 {
                        let count = AtomicUsize::new(0);
                        run_tasks(8, |_| {
                            count.fetch_add(1, Relaxed);
                        });
                        assert_eq!(count.load(Relaxed), 8);
                    }
                });
            }
        });
    }
}
