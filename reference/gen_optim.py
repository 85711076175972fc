"""Optimizer trajectories from real PyTorch (torch.optim, CPU), for crates/pyrite-optim/tests/optim.rs.

Each case trains the same small problem for 200 steps from the same initial parameters:
  - a 2-layer MLP  y = W2 tanh(W1 x + b1) + b2  on fixed data, mean squared error, and
  - a "sparse-ish" embedding term: each step reads 3 rows of E (a fixed, recorded schedule),
    so most rows get a zero gradient that step.
The parameters after every 10th step are recorded, and PyTorch's optimizer state_dict after step
100 (to check that Pyrite loads a state_dict PyTorch wrote and continues on the same path).
Options cover every optimizer option the issue lists, param groups with different
hyperparameters, and maximize (which maximizes the negated loss, so it still trains).
`--check-conditioning` prints how far PyTorch strays from its own path when the start moves
by a rounding error (3e-7 in f32, 1e-10 in f64). Cases whose f64 path was chaotic (a 1e-13 change
grew to 1e-4) or whose f32 path strayed by 1e-4 or more were retuned (smaller lr, larger eps):
matching such a path to 1e-5 would test rounding luck, not the update.

Output: data/optim.safetensors (tensors) with the case list as JSON in its metadata.
Default dtype stays float32 (PyTorch keeps scalar state such as `step` and NAdam's `mu_product`
as float32 tensors then, even for float64 parameters); Pyrite's default does the same.
"""
import json
import os

import torch
from safetensors.torch import save_file

HERE = os.path.dirname(os.path.abspath(__file__))
STEPS = 200
EVERY = 10
RESUME_AT = 100
NAMES = ["W1", "b1", "W2", "b2", "E"]


def problem():
    g = torch.Generator().manual_seed(0)
    data = {
        "X": torch.randn(16, 4, generator=g, dtype=torch.float64),
        "Y": torch.randn(16, 2, generator=g, dtype=torch.float64),
        "u": torch.randn(3, generator=g, dtype=torch.float64),
        "t": torch.randn(10, generator=g, dtype=torch.float64),
        "idx": torch.randint(0, 10, (STEPS, 3), generator=g),
    }
    init = {
        "W1": torch.randn(8, 4, generator=g, dtype=torch.float64) * 0.5,
        "b1": torch.randn(8, generator=g, dtype=torch.float64) * 0.1,
        "W2": torch.randn(2, 8, generator=g, dtype=torch.float64) * 0.5,
        "b2": torch.randn(2, generator=g, dtype=torch.float64) * 0.1,
        "E": torch.randn(10, 3, generator=g, dtype=torch.float64),
    }
    return data, init


def loss_fn(p, d, step):
    h = torch.tanh(d["X"] @ p["W1"].t() + p["b1"])
    y = h @ p["W2"].t() + p["b2"]
    mse = ((y - d["Y"]) ** 2).mean()
    idx = d["idx"][step]
    rows = p["E"].index_select(0, idx)
    emb = (((rows * d["u"]).sum(1) - d["t"].index_select(0, idx)) ** 2).mean()
    return mse + emb


def groups_of(params, kind, group_opts):
    if kind == "one":
        return [params[n] for n in NAMES]
    first = {"params": [params["W1"], params["b1"]]}
    first.update(group_opts)
    return [first, {"params": [params["W2"], params["b2"], params["E"]]}]


CASES = [
    # (name, optimizer, options, param groups: "one" or "two" with the first group's options)
    ("sgd", "SGD", {"lr": 0.1}, "one", {}),
    ("sgd_momentum", "SGD", {"lr": 0.05, "momentum": 0.9}, "one", {}),
    ("sgd_dampening_wd", "SGD", {"lr": 0.05, "momentum": 0.9, "dampening": 0.1, "weight_decay": 1e-2}, "one", {}),
    ("sgd_nesterov", "SGD", {"lr": 0.05, "momentum": 0.9, "nesterov": True, "weight_decay": 1e-3}, "one", {}),
    ("sgd_maximize", "SGD", {"lr": 0.05, "momentum": 0.5, "maximize": True}, "one", {}),
    ("sgd_groups", "SGD", {"lr": 0.05, "momentum": 0.9}, "two", {"lr": 0.01, "momentum": 0.5, "weight_decay": 1e-2}),
    ("adam", "Adam", {"lr": 1e-2}, "one", {}),
    ("adam_amsgrad_wd", "Adam", {"lr": 1e-2, "amsgrad": True, "weight_decay": 1e-2}, "one", {}),
    ("adam_betas_eps", "Adam", {"lr": 5e-3, "betas": (0.8, 0.99), "eps": 1e-6}, "one", {}),
    ("adam_maximize", "Adam", {"lr": 1e-2, "maximize": True}, "one", {}),
    ("adam_groups", "Adam", {"lr": 1e-2}, "two", {"lr": 1e-3, "betas": (0.5, 0.9), "amsgrad": True}),
    ("adamw", "AdamW", {"lr": 1e-2}, "one", {}),
    ("adamw_amsgrad", "AdamW", {"lr": 1e-2, "weight_decay": 0.1, "amsgrad": True}, "one", {}),
    ("adamw_maximize", "AdamW", {"lr": 1e-2, "maximize": True}, "one", {}),
    ("adamw_groups", "AdamW", {"lr": 1e-2}, "two", {"lr": 1e-3, "weight_decay": 0.5}),
    ("adamax", "Adamax", {"lr": 1e-2}, "one", {}),
    ("adamax_wd", "Adamax", {"lr": 1e-2, "weight_decay": 1e-2, "betas": (0.8, 0.99), "eps": 1e-3}, "one", {}),
    ("adamax_maximize", "Adamax", {"lr": 1e-2, "maximize": True}, "one", {}),
    ("adamax_groups", "Adamax", {"lr": 1e-2}, "two", {"lr": 2e-3, "eps": 1e-4}),
    ("nadam", "NAdam", {"lr": 1e-2}, "one", {}),
    ("nadam_wd", "NAdam", {"lr": 2e-3, "weight_decay": 1e-2, "momentum_decay": 8e-3}, "one", {}),
    ("nadam_decoupled", "NAdam", {"lr": 1e-2, "weight_decay": 1e-2, "decoupled_weight_decay": True}, "one", {}),
    ("nadam_maximize", "NAdam", {"lr": 1e-2, "maximize": True}, "one", {}),
    ("nadam_groups", "NAdam", {"lr": 1e-2}, "two", {"lr": 1e-3, "momentum_decay": 1e-2}),
    ("radam", "RAdam", {"lr": 1e-2}, "one", {}),
    ("radam_wd", "RAdam", {"lr": 1e-2, "weight_decay": 1e-2}, "one", {}),
    ("radam_decoupled", "RAdam", {"lr": 1e-2, "weight_decay": 1e-2, "decoupled_weight_decay": True}, "one", {}),
    ("radam_maximize", "RAdam", {"lr": 1e-2, "maximize": True}, "one", {}),
    ("radam_groups", "RAdam", {"lr": 1e-2}, "two", {"lr": 1e-3, "betas": (0.8, 0.95)}),
    ("rmsprop", "RMSprop", {"lr": 1e-2}, "one", {}),
    ("rmsprop_centered", "RMSprop", {"lr": 1e-3, "centered": True, "eps": 1e-4}, "one", {}),
    ("rmsprop_momentum", "RMSprop", {"lr": 1e-3, "momentum": 0.9}, "one", {}),
    ("rmsprop_all", "RMSprop", {"lr": 1e-3, "momentum": 0.5, "centered": True, "weight_decay": 1e-2, "eps": 1e-6}, "one", {}),
    ("rmsprop_maximize", "RMSprop", {"lr": 1e-2, "maximize": True}, "one", {}),
    ("rmsprop_groups", "RMSprop", {"lr": 1e-3}, "two", {"lr": 1e-4, "momentum": 0.9, "centered": True}),
    ("adagrad", "Adagrad", {"lr": 0.1}, "one", {}),
    ("adagrad_decay", "Adagrad", {"lr": 0.1, "lr_decay": 1e-2, "initial_accumulator_value": 0.1, "weight_decay": 1e-2}, "one", {}),
    ("adagrad_maximize", "Adagrad", {"lr": 0.1, "maximize": True}, "one", {}),
    ("adagrad_groups", "Adagrad", {"lr": 0.1}, "two", {"lr": 0.01, "initial_accumulator_value": 0.5, "eps": 1e-6}),
    ("adadelta", "Adadelta", {"lr": 1.0}, "one", {}),
    ("adadelta_rho_wd", "Adadelta", {"lr": 0.5, "rho": 0.95, "weight_decay": 1e-2, "eps": 1e-5}, "one", {}),
    ("adadelta_maximize", "Adadelta", {"lr": 1.0, "maximize": True}, "one", {}),
    ("adadelta_groups", "Adadelta", {"lr": 1.0}, "two", {"lr": 0.1, "rho": 0.5}),
    ("asgd", "ASGD", {"lr": 1e-2}, "one", {}),
    ("asgd_averaging", "ASGD", {"lr": 5e-2, "t0": 50, "lambd": 1e-3, "alpha": 0.5, "weight_decay": 1e-3}, "one", {}),
    ("asgd_maximize", "ASGD", {"lr": 1e-2, "maximize": True, "t0": 20}, "one", {}),
    ("asgd_groups", "ASGD", {"lr": 1e-2, "t0": 100}, "two", {"lr": 1e-3, "t0": 10}),
    ("rprop", "Rprop", {"lr": 1e-2}, "one", {}),
    ("rprop_etas", "Rprop", {"lr": 1e-3, "etas": (0.3, 1.5), "step_sizes": (1e-4, 1.0)}, "one", {}),
    ("rprop_maximize", "Rprop", {"lr": 1e-2, "maximize": True}, "one", {}),
    ("rprop_groups", "Rprop", {"lr": 1e-3}, "two", {"lr": 1e-4, "step_sizes": (1e-5, 0.1)}),
]


def jsonable(v):
    if isinstance(v, tuple):
        return list(v)
    return v


def main():
    data, init = problem()
    tensors = {}
    for k, v in data.items():
        tensors[f"data/{k}"] = v.contiguous()
    for k, v in init.items():
        tensors[f"init/{k}"] = v.contiguous()
    cases = []
    for dtype, dname in [(torch.float64, "f64"), (torch.float32, "f32")]:
        d = {k: (v.to(dtype) if v.is_floating_point() else v) for k, v in data.items()}
        for name, opt_name, opts, kind, gopts in CASES:
            params = {k: v.to(dtype).clone().requires_grad_(True) for k, v in init.items()}
            opt = getattr(torch.optim, opt_name)(groups_of(params, kind, gopts), **opts)
            if opt_name == "Adagrad" and "initial_accumulator_value" in gopts:
                # PyTorch fills every `sum` with the constructor's initial_accumulator_value
                # and ignores a group's own; its documentation says a group's keys are that
                # group's options, and Pyrite follows the documentation. Record that path.
                for p in opt.param_groups[0]["params"]:
                    opt.state[p]["sum"].fill_(gopts["initial_accumulator_value"])
            sign = -1.0 if opts.get("maximize") else 1.0
            case = f"{name}_{dname}"
            for step in range(STEPS):
                opt.zero_grad()
                loss = sign * loss_fn(params, d, step)
                loss.backward()
                opt.step()
                if (step + 1) % EVERY == 0:
                    for k in NAMES:
                        tensors[f"{case}/step{step + 1}/{k}"] = params[k].detach().clone()
                if step + 1 == RESUME_AT and dname == "f64":
                    sd = opt.state_dict()
                    state_keys = {}
                    for idx, st in sd["state"].items():
                        state_keys[str(idx)] = {}
                        for key, val in st.items():
                            if isinstance(val, torch.Tensor):
                                tensors[f"{case}/state/{idx}/{key}"] = val.detach().clone().contiguous()
                                state_keys[str(idx)][key] = "tensor"
                            else:
                                state_keys[str(idx)][key] = val
                    saved_groups = []
                    for g in sd["param_groups"]:
                        saved_groups.append(
                            {k: jsonable(v) for k, v in g.items() if k not in ("foreach", "differentiable", "fused", "capturable")}
                        )
            entry = {
                "name": case,
                "optimizer": opt_name,
                "dtype": dname,
                "options": {k: jsonable(v) for k, v in opts.items()},
                "groups": kind,
                "group_options": {k: jsonable(v) for k, v in gopts.items()},
            }
            if dname == "f64":
                entry["state_dict"] = {"state": state_keys, "param_groups": saved_groups}
            cases.append(entry)
    meta = {"cases": json.dumps(cases), "steps": str(STEPS), "every": str(EVERY), "resume_at": str(RESUME_AT)}
    out = os.path.join(HERE, "data", "optim.safetensors")
    save_file(tensors, out, metadata=meta)
    print(f"wrote {len(cases)} cases, {len(tensors)} tensors to {out} ({os.path.getsize(out)} bytes)")


def run_case(case, data, init, dtype, perturb=0.0):
    _, opt_name, opts, kind, gopts = case
    d = {k: (v.to(dtype) if v.is_floating_point() else v) for k, v in data.items()}
    params = {k: (v.to(dtype) * (1 + perturb)).clone().requires_grad_(True) for k, v in init.items()}
    opt = getattr(torch.optim, opt_name)(groups_of(params, kind, gopts), **opts)
    sign = -1.0 if opts.get("maximize") else 1.0
    out = []
    for step in range(STEPS):
        opt.zero_grad()
        (sign * loss_fn(params, d, step)).backward()
        opt.step()
        if (step + 1) % EVERY == 0:
            out.append(torch.cat([params[k].detach().flatten() for k in NAMES]))
    return out


def check_conditioning():
    """How far PyTorch strays from its own path when the start moves by a rounding error."""
    data, init = problem()
    for case in CASES:
        drift = []
        for dtype, eps in [(torch.float32, 3e-7), (torch.float64, 1e-10)]:
            a = run_case(case, data, init, dtype)
            b = run_case(case, data, init, dtype, eps)
            drift.append(max(((x - y).abs().max() / x.abs().max()).item() for x, y in zip(a, b)))
        flag = "  ILL-CONDITIONED" if drift[0] > 2e-6 or drift[1] > 1e-8 else ""
        print(f"{case[0]:20s} f32 {drift[0]:.1e}  f64 {drift[1]:.1e}{flag}")


if __name__ == "__main__":
    import sys

    if "--check-conditioning" in sys.argv:
        check_conditioning()
    else:
        main()
