//! [`summary`]: each layer's output shape and parameter count for an example input, as
//! torchinfo prints them.
//!
//! ```
//! use pyrite::nn::{summary, Linear, ReLU, Sequential};
//! use pyrite::{DType, Tensor};
//! let net = Sequential::new().append(Linear::new(4, 8)?).append(ReLU::new()).append(Linear::new(8, 2)?);
//! let s = summary(&net, &Tensor::zeros([1, 4], DType::F32)?.into())?;
//! assert!(s.contains("0 (Linear)") && s.contains("[1, 8]") && s.contains("Total params: 58"));
//! # Ok::<(), pyrite::Error>(())
//! ```

use crate::module::{module_id, Member, Module};
use crate::value::Value;
use pyrite_core::Result;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

type ModuleId = (usize, std::any::TypeId);

/// Runs `model` once on `input` (under `no_grad`, in the model's current mode) and returns a
/// table of every module called: its name and type, its output shape(s) and the number of
/// its own parameters, then the totals.
pub fn summary(model: &dyn Module, input: &Value) -> Result<String> {
    let names: HashMap<ModuleId, (String, String, usize)> = model
        .named_modules()
        .into_iter()
        .map(|(n, m)| {
            let mut own = 0;
            m.visit_members(&mut |mem| {
                if let Member::Parameter(_, Some(p)) = mem {
                    own += p.numel();
                }
            });
            (module_id(m), (n, m.type_name().to_string(), own))
        })
        .collect();
    let rows: Arc<Mutex<Vec<(ModuleId, String)>>> = Arc::default();
    let r = rows.clone();
    let ids: std::collections::HashSet<ModuleId> = names.keys().copied().collect();
    let handle = crate::hooks::register_module_forward_hook(move |m, _input, output| {
        let id = module_id(m);
        if ids.contains(&id) {
            let shapes: Vec<String> = output.tensors().iter().map(|t| format!("{:?}", t.dims())).collect();
            r.lock().unwrap().push((id, shapes.join(", ")));
        }
        Ok(None)
    });
    let result = {
        let _g = pyrite_core::autograd::no_grad();
        model.call_value(input.clone())
    };
    handle.remove();
    result?;
    let rows = rows.lock().unwrap().clone();
    let mut lines =
        vec![format!("{:<40} {:<24} {:>12}", "Layer (type)", "Output Shape", "Param #"), "=".repeat(78)];
    // Calls finish innermost first; show them in the model's order (named_modules order).
    let order: HashMap<ModuleId, usize> =
        model.named_modules().iter().enumerate().map(|(i, (_, m))| (module_id(*m), i)).collect();
    let mut rows = rows;
    rows.sort_by_key(|(id, _)| order[id]);
    for (id, shape) in rows {
        let (name, ty, own) = &names[&id];
        let depth = name.matches('.').count() + usize::from(!name.is_empty());
        let label =
            if name.is_empty() { ty.clone() } else { format!("{}{name} ({ty})", "  ".repeat(depth - 1)) };
        lines.push(format!("{label:<40} {shape:<24} {own:>12}"));
    }
    let total = model.num_parameters(false);
    let trainable = model.num_parameters(true);
    lines.push("=".repeat(78));
    lines.push(format!("Total params: {total}"));
    lines.push(format!("Trainable params: {trainable}"));
    lines.push(format!("Non-trainable params: {}", total - trainable));
    Ok(lines.join("\n"))
}
