//! Warnings (`warnings.warn`): advice that is not an error, such as PyTorch's "scheduler
//! stepped before the optimizer". Each distinct message is written to stderr once per process;
//! [`catch_warnings`] collects the warnings raised on this thread instead, for tests and
//! for programs that want to handle them.
//!
//! ```
//! use pyrite_core::warnings::{catch_warnings, warn};
//! let (_, seen) = catch_warnings(|| warn("lr_scheduler", "stepped too early"));
//! assert_eq!(seen, ["lr_scheduler: stepped too early"]);
//! ```

use std::cell::RefCell;
use std::collections::HashSet;
use std::sync::Mutex;

static PRINTED: Mutex<Option<HashSet<String>>> = Mutex::new(None);

thread_local! {
    static CAUGHT: RefCell<Vec<Vec<String>>> = const { RefCell::new(Vec::new()) };
}

/// Raises a warning from `source` (the module or op that warns). Inside [`catch_warnings`] it
/// is recorded; otherwise it is printed to stderr the first time this exact text is raised.
pub fn warn(source: &str, message: &str) {
    let text = format!("{source}: {message}");
    let caught = CAUGHT.with(|c| match c.borrow_mut().last_mut() {
        Some(list) => {
            list.push(text.clone());
            true
        }
        None => false,
    });
    if caught {
        return;
    }
    let mut printed = PRINTED.lock().unwrap_or_else(|e| e.into_inner());
    if printed.get_or_insert_with(HashSet::new).insert(text.clone()) {
        eprintln!("Warning: {text}");
    }
}

/// Runs `f` and returns its result with the warnings it raised on this thread, in order
/// (`warnings.catch_warnings(record=True)`); they are not printed.
pub fn catch_warnings<R>(f: impl FnOnce() -> R) -> (R, Vec<String>) {
    CAUGHT.with(|c| c.borrow_mut().push(Vec::new()));
    struct Pop;
    impl Drop for Pop {
        fn drop(&mut self) {
            let _ = CAUGHT.try_with(|c| c.borrow_mut().pop());
        }
    }
    let pop = Pop;
    let r = f();
    let seen = CAUGHT.with(|c| c.borrow_mut().last_mut().map(std::mem::take).unwrap_or_default());
    drop(pop);
    (r, seen)
}
