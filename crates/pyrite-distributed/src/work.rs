//! [`Work`]: the handle of an operation a process group runs in the background.

use pyrite_core::{bail, Result};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// An asynchronous collective or point-to-point operation (`torch.distributed.Work`), as the
/// methods of a [`crate::ProcessGroup`] return it. Its tensors must not be read or written
/// until [`Work::wait`] returns (a read blocks until the operation is done). Every operation
/// ends, with success or an error, within its group's timeout.
#[derive(Clone)]
pub struct Work(Arc<Inner>);

struct Inner {
    what: String,
    state: Mutex<State>,
    done: Condvar,
}

/// What runs when an operation finishes.
type Callback = Box<dyn FnOnce(&Result<()>) + Send>;

#[derive(Default)]
struct State {
    result: Option<Result<()>>,
    source_rank: Option<usize>,
    callbacks: Vec<Callback>,
}

impl Work {
    /// A pending operation described as `what` (`ALLREDUCE(SeqNum=3)`).
    pub(crate) fn pending(what: impl Into<String>) -> Work {
        Work(Arc::new(Inner { what: what.into(), state: Mutex::new(State::default()), done: Condvar::new() }))
    }

    /// An operation that has already finished (a world of one, an error found before it
    /// started).
    pub(crate) fn finished(what: impl Into<String>, result: Result<()>) -> Work {
        let w = Work::pending(what);
        w.complete(result);
        w
    }

    /// Marks the operation done, wakes its waiters and runs its callbacks.
    pub(crate) fn complete(&self, result: Result<()>) {
        let callbacks = {
            let mut s = self.0.state.lock().unwrap_or_else(|e| e.into_inner());
            if s.result.is_some() {
                return;
            }
            s.result = Some(result.clone());
            std::mem::take(&mut s.callbacks)
        };
        self.0.done.notify_all();
        for f in callbacks {
            f(&result);
        }
    }

    /// Records the rank a receive got its message from.
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub(crate) fn set_source_rank(&self, rank: usize) {
        self.0.state.lock().unwrap_or_else(|e| e.into_inner()).source_rank = Some(rank);
    }

    /// `work.wait()`: blocks until the operation is done; its error if it failed (a timeout, a
    /// mismatch between ranks, a failed backend).
    pub fn wait(&self) -> Result<()> {
        let mut s = self.0.state.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(r) = &s.result {
                return r.clone();
            }
            s = self.0.done.wait(s).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// `work.wait(timeout)`: as [`Work::wait`], but gives up after `timeout` with an error
    /// (the operation itself goes on until its group's timeout).
    pub fn wait_timeout(&self, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        let mut s = self.0.state.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(r) = &s.result {
                return r.clone();
            }
            let now = Instant::now();
            if now >= deadline {
                bail!(Distributed, "{} did not finish within {} ms", self.0.what, timeout.as_millis());
            }
            s = self.0.done.wait_timeout(s, deadline - now).unwrap_or_else(|e| e.into_inner()).0;
        }
    }

    /// `work.is_completed()`: whether the operation has finished (successfully or not).
    pub fn is_completed(&self) -> bool {
        self.0.state.lock().unwrap_or_else(|e| e.into_inner()).result.is_some()
    }

    /// `work.is_success()`: finished without an error.
    pub fn is_success(&self) -> bool {
        matches!(self.0.state.lock().unwrap_or_else(|e| e.into_inner()).result, Some(Ok(())))
    }

    /// `work._source_rank()`: for a receive from any rank, the rank whose message arrived
    /// (after [`Work::wait`]).
    pub fn source_rank(&self) -> Option<usize> {
        self.0.state.lock().unwrap_or_else(|e| e.into_inner()).source_rank
    }

    /// Runs `f` with the result once the operation is done (at once if it is), on the thread
    /// that completes it: keep it short.
    pub fn on_completion(&self, f: impl FnOnce(&Result<()>) + Send + 'static) {
        let mut s = self.0.state.lock().unwrap_or_else(|e| e.into_inner());
        match &s.result {
            Some(r) => {
                let r = r.clone();
                drop(s);
                f(&r)
            }
            None => s.callbacks.push(Box::new(f)),
        }
    }

    /// What the operation is (`ALLREDUCE(SeqNum=3, ...)`).
    pub fn describe(&self) -> &str {
        &self.0.what
    }
}

impl std::fmt::Debug for Work {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Work({}, completed={})", self.0.what, self.is_completed())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wait_returns_the_result_once_completed() {
        let w = Work::pending("ALLREDUCE");
        assert!(!w.is_completed());
        let w2 = w.clone();
        let t = std::thread::spawn(move || w2.wait());
        std::thread::sleep(Duration::from_millis(20));
        w.complete(Ok(()));
        assert!(t.join().unwrap().is_ok());
        assert!(w.is_completed() && w.is_success());
    }

    #[test]
    fn errors_and_timeouts_reach_waiters() {
        let w = Work::pending("BROADCAST");
        let e = w.wait_timeout(Duration::from_millis(10)).unwrap_err();
        assert!(e.to_string().contains("BROADCAST did not finish within 10 ms"), "{e}");
        w.complete(Err(pyrite_core::err!(Distributed, "rank 1 never arrived")));
        assert!(w.wait().unwrap_err().to_string().contains("rank 1 never arrived"));
        assert!(w.is_completed() && !w.is_success());
    }

    #[test]
    fn callbacks_run_on_completion_or_at_once() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let w = Work::pending("X");
        let s = seen.clone();
        w.on_completion(move |r| s.lock().unwrap().push(("before", r.is_ok())));
        w.complete(Ok(()));
        let s = seen.clone();
        w.on_completion(move |r| s.lock().unwrap().push(("after", r.is_ok())));
        assert_eq!(*seen.lock().unwrap(), [("before", true), ("after", true)]);
    }
}
