"""Reference data for torch.nn.utils: clip_grad_norm_, get_total_norm, clip_grads_with_norm_,
clip_grad_value_, parameters_to_vector and vector_to_parameters
(crates/pyrite-nn/tests/nn_utils.rs).

Each case is a list of parameters (shape, dtype, and a gradient or none) and a call. Recorded
tensors, by case name:
  {name}.g{i}     the gradient of parameter i before the call (absent for params without grad)
  {name}.p{i}     parameter i's value before the call (parameters_to_vector / vector_to_parameters)
  {name}.vec      the vector given to vector_to_parameters
  {name}.tn       the total_norm given to clip_grads_with_norm_
  {name}.total    what clip_grad_norm_ / get_total_norm returns
  {name}.gout{i}  the gradient of parameter i after the call
  {name}.pout{i}  parameter i after vector_to_parameters; {name}.out the vector of
                  parameters_to_vector
The case list (JSON, in the file's metadata) has the arguments; norm types are strings ("inf").
Cases where PyTorch raises record its message as "error".

Run: python3 reference/gen_nn_utils.py
"""
import torch
from torch.nn.utils import (
    clip_grad_norm_,
    clip_grad_value_,
    clip_grads_with_norm_,
    get_total_norm,
    parameters_to_vector,
    vector_to_parameters,
)

from refgen import RefFile

torch.manual_seed(0)
rf = RefFile("nn_utils")

SHAPES = [[3, 4], [5], [2, 3, 2], [4, 1]]


def make_params(name, dtypes, has_grad, scale=1.0, special=None):
    """Parameters of SHAPES with random gradients (scaled), recording the gradients."""
    ps = []
    for i, (shape, dt, hg) in enumerate(zip(SHAPES, dtypes, has_grad)):
        p = torch.nn.Parameter(torch.randn(shape, dtype=dt))
        if hg:
            g = torch.randn(shape, dtype=dt) * scale
            if special is not None and i == 0:
                g.view(-1)[1] = special
            p.grad = g
            rf._put(f"{name}.g{i}", g.clone())
        ps.append(p)
    return ps


def dtype_names(dts):
    return [str(d).replace("torch.", "") for d in dts]


def record_grads_after(name, ps):
    for i, p in enumerate(ps):
        if p.grad is not None:
            rf._put(f"{name}.gout{i}", p.grad.clone())


def clip_norm_case(name, dtypes, has_grad, max_norm, norm_type, error_if_nonfinite=False, scale=1.0,
                   special=None):
    ps = make_params(name, dtypes, has_grad, scale, special)
    case = {
        "name": name, "kind": "clip_grad_norm_", "dtypes": dtype_names(dtypes), "has_grad": has_grad,
        "max_norm": max_norm, "norm_type": str(float(norm_type)),
        "error_if_nonfinite": error_if_nonfinite,
    }
    try:
        total = clip_grad_norm_(ps, max_norm, norm_type=norm_type, error_if_nonfinite=error_if_nonfinite)
    except RuntimeError as e:
        case["error"] = str(e)
        record_grads_after(name, ps)  # unchanged
        rf.cases.append(case)
        return
    rf._put(f"{name}.total", total)
    case["total_dtype"] = str(total.dtype).replace("torch.", "")
    record_grads_after(name, ps)
    rf.cases.append(case)


# norm types x dtypes x (clipping / not clipping); the 4th parameter has no gradient
for dt in (torch.float32, torch.float64):
    for nt in (2.0, 1.0, float("inf"), 3.5, 0.5):
        for label, max_norm in (("clip", 0.7), ("noclip", 1e4)):
            clip_norm_case(f"norm_{dtype_names([dt])[0]}_{nt}_{label}", [dt] * 4, [True, True, True, False],
                           max_norm, nt)
# norm order 0 (count of non-zeros) and a large-norm case
clip_norm_case("norm_f32_0_clip", [torch.float32] * 4, [True, True, False, True], 3.0, 0.0)
clip_norm_case("norm_f32_2_big", [torch.float32] * 4, [True] * 4, 2.5, 2.0, scale=1e3)
# mixed dtypes: the total norm is in the promoted dtype
clip_norm_case("mixed_dtypes", [torch.float32, torch.float64, torch.float32, torch.float64], [True] * 4, 0.5, 2.0)
clip_norm_case("mixed_dtypes_inf", [torch.float64, torch.float32, torch.float32, torch.float64], [True] * 4, 0.5,
               float("inf"))
# no gradients at all: tensor(0.) and nothing changes
clip_norm_case("no_grads", [torch.float32] * 4, [False] * 4, 1.0, 2.0)
# non-finite gradients: the error, and the scaling by the non-finite norm without it
for sp_name, sp in (("inf", float("inf")), ("nan", float("nan"))):
    for nt in (2.0, float("inf")):
        clip_norm_case(f"nonfinite_{sp_name}_{nt}_error", [torch.float32] * 4, [True] * 4, 1.0, nt, True,
                       special=sp)
        clip_norm_case(f"nonfinite_{sp_name}_{nt}_noerror", [torch.float32] * 4, [True] * 4, 1.0, nt, False,
                       special=sp)

# get_total_norm on plain tensors, clip_grads_with_norm_ with a given total norm
for dt in (torch.float32, torch.float64):
    d = dtype_names([dt])[0]
    for nt in (2.0, 1.0, float("inf"), 3.5):
        name = f"total_{d}_{nt}"
        ts = [torch.randn(s, dtype=dt) for s in SHAPES]
        for i, t in enumerate(ts):
            rf._put(f"{name}.g{i}", t)
        rf._put(f"{name}.total", get_total_norm(ts, nt))
        rf.cases.append({"name": name, "kind": "get_total_norm", "dtypes": [d] * 4, "norm_type": str(nt)})
    for tn in (0.3, 50.0):
        name = f"with_norm_{d}_{tn}"
        ps = make_params(name, [dt] * 4, [True, False, True, True])
        total = torch.tensor(tn, dtype=dt)
        rf._put(f"{name}.tn", total)
        clip_grads_with_norm_(ps, 1.5, total)
        record_grads_after(name, ps)
        rf.cases.append({"name": name, "kind": "clip_grads_with_norm_", "dtypes": [d] * 4,
                         "has_grad": [True, False, True, True], "max_norm": 1.5})

# clip_grad_value_
for dt in (torch.float32, torch.float64):
    d = dtype_names([dt])[0]
    for cv in (0.5, 2.0):
        name = f"value_{d}_{cv}"
        ps = make_params(name, [dt] * 4, [True, True, False, True], scale=2.0)
        clip_grad_value_(ps, cv)
        record_grads_after(name, ps)
        rf.cases.append({"name": name, "kind": "clip_grad_value_", "dtypes": [d] * 4,
                         "has_grad": [True, True, False, True], "clip_value": cv})
name = "value_nan"
ps = make_params(name, [torch.float32] * 4, [True] * 4, scale=2.0, special=float("nan"))
clip_grad_value_(ps, 1.0)
record_grads_after(name, ps)
rf.cases.append({"name": name, "kind": "clip_grad_value_", "dtypes": ["float32"] * 4, "has_grad": [True] * 4,
                 "clip_value": 1.0})


# parameters_to_vector / vector_to_parameters
def vec_case(name, dtypes, extra=0):
    ps = [torch.nn.Parameter(torch.randn(s, dtype=dt)) for s, dt in zip(SHAPES, dtypes)]
    for i, p in enumerate(ps):
        rf._put(f"{name}.p{i}", p.detach().clone())
    out = parameters_to_vector(ps)
    rf._put(f"{name}.out", out)
    n = sum(p.numel() for p in ps)
    vec = torch.randn(n + extra, dtype=out.dtype)
    rf._put(f"{name}.vec", vec)
    case = {"name": name, "kind": "vector", "dtypes": dtype_names(dtypes), "requires_grad": out.requires_grad}
    try:
        vector_to_parameters(vec, ps)
    except RuntimeError as e:
        case["error"] = str(e)
    else:
        for i, p in enumerate(ps):
            rf._put(f"{name}.pout{i}", p.detach().clone())
    rf.cases.append(case)


vec_case("vec_f32", [torch.float32] * 4)
vec_case("vec_f64", [torch.float64] * 4)
vec_case("vec_longer", [torch.float32] * 4, extra=3)
vec_case("vec_shorter", [torch.float32] * 4, extra=-5)

rf.save()
