//! Memory history inside modules: which module is running when memory is allocated
//! (`features.3.conv`), and the names of the parameters, buffers and gradients of the model
//! being called (`features.0.weight`, `features.0.weight.grad`).
//!
//! [`Module::call`] enters a scope here while `pyrite_core::memory::record_memory_history`
//! is on; otherwise nothing is done. The outermost call names every sub-module once (a map
//! from module address to dotted name) and tags its parameters and buffers as parameter
//! memory, so a training loop needs no extra call.

use crate::module::{module_addr, Module};
use pyrite_core::memory::{Category, ScopeGuard};
use pyrite_core::memory_history as history;
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;

thread_local! {
    /// The dotted names of the outermost module's descendants, while it runs, and the depth
    /// of nested calls.
    static NAMES: RefCell<(usize, HashMap<usize, Arc<str>>)> = RefCell::new((0, HashMap::new()));
}

/// Ends a module's memory scope.
pub(crate) struct ModuleScope {
    _scope: ScopeGuard,
}

impl Drop for ModuleScope {
    fn drop(&mut self) {
        NAMES.with(|n| {
            let mut n = n.borrow_mut();
            n.0 -= 1;
            if n.0 == 0 {
                n.1.clear();
            }
        });
    }
}

/// Enters `m`'s memory scope: what is allocated until the scope ends is attributed to `m`.
pub(crate) fn enter(m: &dyn Module) -> ModuleScope {
    let outermost = NAMES.with(|n| n.borrow().0 == 0);
    if outermost {
        let mut names = HashMap::new();
        for (name, c) in m.named_modules() {
            let name = if name.is_empty() { c.type_name().to_string() } else { name };
            names.insert(module_addr(c), Arc::from(name));
        }
        NAMES.with(|n| n.borrow_mut().1 = names);
        tag_parameters(m);
    }
    let path = NAMES.with(|n| {
        let mut n = n.borrow_mut();
        n.0 += 1;
        n.1.get(&module_addr(m)).cloned()
    });
    let path = path.unwrap_or_else(|| Arc::from(m.type_name()));
    ModuleScope { _scope: history::module_scope(path) }
}

/// Tags `m`'s parameters and buffers (and the parameters' gradients) with their names.
fn tag_parameters(m: &dyn Module) {
    for (name, p) in m.named_parameters() {
        history::tag(&p, Category::Parameter, &name);
        if let Some(g) = p.grad() {
            history::tag(&g, Category::Gradient, &format!("{name}.grad"));
        }
    }
    for (name, b) in m.named_buffers() {
        history::tag(&b, Category::Parameter, &name);
    }
}
