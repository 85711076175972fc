"""Reference data for torch.optim.LBFGS (both line searches), mirrored by
crates/pyrite-optim/tests/lbfgs.rs.

Problems (the Rust test rebuilds each from the same tensors and ops):
  rosenbrock  f(x) = sum(100 * (x[1:] - x[:-1]**2)**2 + (1 - x[:-1])**2) of the first parameter
              (a second parameter, when given, is unused and never gets a gradient)
  mlp         least squares with a 2-layer tanh MLP written with raw tensors:
              h = tanh(x @ w1.t() + b1); z = h @ w2.t() + b2; loss = ((z - y)**2).mean()
  logistic    the same MLP with the logistic loss softplus(-y * z).mean() (labels +-1)
Each case runs `steps` calls of opt.step(closure) and records after every call: the returned loss,
the parameters, the number of closure calls of that step, state["func_evals"], state["n_iter"],
and state["t"] with its Python type (float or 0-d tensor). Cases with `resume_at` also save a
deep copy of state_dict() at that step, rebuild parameters and optimizer, load it and run on; the
script checks the resumed trajectory is bitwise the uninterrupted one and records the keys and
kinds of the saved state.
L-BFGS amplifies rounding differences exponentially over many iterations (PyTorch's own
trajectory, started 1e-14 away in f64 or 2e-7 away in f32, drifts to 1e-5 within 20 steps of some
settings), so the settings and step counts are chosen where PyTorch's own drift stays well inside
the test tolerances (1e-9 Rosenbrock f64, 1e-6 MLP f64, 1e-4 f32): `--sensitivity` prints it.
Exact inputs (start points, data, initial weights) are stored as the bit patterns of f64 values
(f32 values are exact in f64), so the Rust side reads them without any parsing error.

Run: python3 reference/gen_lbfgs.py [--sensitivity]  (writes reference/data/lbfgs.json)
"""
import copy
import json
import os
import struct
import sys

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "data", "lbfgs.json")
DT = {torch.float64: "F64", torch.float32: "F32"}
SENSITIVITY = "--sensitivity" in sys.argv


def bits(t):
    return [struct.unpack("<Q", struct.pack("<d", float(v)))[0] for v in t.detach().double().flatten().tolist()]


def rosenbrock(params, _data):
    x = params[0]
    return (100 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2).sum()


def mlp_out(params, x):
    w1, b1, w2, b2 = params
    h = torch.tanh(x @ w1.t() + b1)
    return h @ w2.t() + b2


def mlp(params, data):
    x, y = data
    return ((mlp_out(params, x) - y) ** 2).mean()


def logistic(params, data):
    x, y = data
    return F.softplus(-y * mlp_out(params, x)).mean()


PROBLEMS = {"rosenbrock": rosenbrock, "mlp": mlp, "logistic": logistic}


def make_opt(params, options):
    return torch.optim.LBFGS(params, **options)


def state_summary(opt, params):
    st = opt.state[params[0]]
    out = {}
    for k, v in st.items():
        if isinstance(v, torch.Tensor):
            out[k] = {"kind": "tensor", "numel": v.numel()}
        elif isinstance(v, list):
            out[k] = {"kind": "list", "len": sum(1 for e in v if e is not None), "none": sum(1 for e in v if e is None)}
        elif isinstance(v, bool):
            raise AssertionError(k)
        elif isinstance(v, int):
            out[k] = {"kind": "int", "value": v}
        else:
            out[k] = {"kind": "float", "value": v}
    return out


def run(problem, params, data, opt, steps, negate=False):
    f = PROBLEMS[problem]
    calls = [0]

    def closure():
        calls[0] += 1
        opt.zero_grad()
        loss = f(params, data)
        if negate:
            loss = -loss
        loss.backward()
        return loss

    rec = []
    for _ in range(steps):
        calls[0] = 0
        loss = opt.step(closure)
        st = opt.state[params[0]]
        t = st.get("t")
        rec.append(
            {
                "loss": float(loss.detach()),
                "params": [p.detach().double().flatten().tolist() for p in params],
                "evals": calls[0],
                "func_evals": st["func_evals"],
                "n_iter": st["n_iter"],
                "t": None if t is None else float(t),
                "t_kind": "none" if t is None else ("tensor" if isinstance(t, torch.Tensor) else "float"),
            }
        )
    return rec


def case(name, problem, params0, data, options, steps, dtype, negate=False, resume_at=None):
    params = [p.detach().clone().to(dtype).requires_grad_(True) for p in params0]
    data = [d.to(dtype) for d in data]
    opt = make_opt(params, options)
    rec = run(problem, params, data, opt, steps, negate)
    if SENSITIVITY:
        eps = 1e-14 if dtype == torch.float64 else 2e-7
        moved = [(p.detach().clone() * (1 + eps)).to(dtype).requires_grad_(True) for p in params0]
        other = run(problem, moved, data, make_opt(moved, options), steps, negate)
        drift = [
            max(abs(u - v) / (1 + abs(v)) for pa, pb in zip(a["params"], b["params"]) for u, v in zip(pa, pb))
            for a, b in zip(other, rec)
        ]
        print(f"{name:28s} drift per step: " + " ".join(f"{e:.0e}" for e in drift))
    c = {
        "name": name,
        "problem": problem,
        "dtype": DT[dtype],
        "negate": negate,
        "options": options,
        "params0": [{"shape": list(p.shape), "bits": bits(p.to(dtype))} for p in params0],
        "data": [{"shape": list(d.shape), "bits": bits(d)} for d in data],
        "steps": rec,
    }
    if resume_at is not None:
        params = [p.detach().clone().to(dtype).requires_grad_(True) for p in params0]
        opt = make_opt(params, options)
        first = run(problem, params, data, opt, resume_at, negate)
        sd = copy.deepcopy(opt.state_dict())
        c["resume_state"] = state_summary(opt, params)
        params2 = [p.detach().clone().requires_grad_(True) for p in params]
        opt2 = make_opt(params2, options)
        opt2.load_state_dict(sd)
        second = run(problem, params2, data, opt2, steps - resume_at, negate)
        for a, b in zip(first + second, rec):
            assert a["params"] == b["params"] and a["evals"] == b["evals"], name
        c["resume_at"] = resume_at
    return c


def opts(**kw):
    o = {
        "lr": 1.0,
        "max_iter": 20,
        "max_eval": None,
        "tolerance_grad": 1e-7,
        "tolerance_change": 1e-9,
        "history_size": 100,
        "line_search_fn": None,
        "maximize": False,
    }
    o.update(kw)
    return o


def main():
    torch.manual_seed(0)
    cases = []
    x2 = torch.tensor([-1.5, 2.0], dtype=torch.float64)
    x10 = torch.tensor([-1.5, 2.0, -1.2, 1.0, 0.5, -0.8, 1.3, 0.2, -0.4, 0.9], dtype=torch.float64)
    f64 = torch.float64
    f32 = torch.float32

    cases.append(case("rosen2d_none", "rosenbrock", [x2], [], opts(lr=0.2, max_iter=3), 30, f64))
    cases.append(case("rosen2d_wolfe", "rosenbrock", [x2], [], opts(max_iter=2, line_search_fn="strong_wolfe"), 30, f64))
    cases.append(
        case("rosen2d_wolfe_default", "rosenbrock", [x2], [], opts(line_search_fn="strong_wolfe"), 5, f64)
    )
    cases.append(case("rosen10d_none", "rosenbrock", [x10], [], opts(lr=0.1, max_iter=2, history_size=5), 30, f64))
    cases.append(
        case(
            "rosen10d_wolfe",
            "rosenbrock",
            [x10],
            [],
            opts(max_iter=2, history_size=4, line_search_fn="strong_wolfe"),
            20,
            f64,
            resume_at=10,
        )
    )
    cases.append(
        case("rosen10d_wolfe_1iter", "rosenbrock", [x10], [], opts(max_iter=1, history_size=6, line_search_fn="strong_wolfe"), 30, f64)
    )
    cases.append(
        case(
            "rosen10d_wolfe_maximize",
            "rosenbrock",
            [x10],
            [],
            opts(max_iter=3, history_size=6, line_search_fn="strong_wolfe", maximize=True),
            12,
            f64,
            negate=True,
        )
    )
    cases.append(
        case("rosen10d_wolfe_maxeval", "rosenbrock", [x10], [], opts(max_iter=10, max_eval=6, line_search_fn="strong_wolfe"), 6, f64)
    )
    line_search_corners = [
        ("rosen2d_wolfe_small_lr", [x2], opts(lr=0.001, max_iter=3, max_eval=40, line_search_fn="strong_wolfe")),
        ("rosen2d_wolfe_lr5", [x2], opts(lr=5.0, max_iter=3, line_search_fn="strong_wolfe")),
        ("rosen10d_wolfe_lr5", [x10], opts(lr=5.0, max_iter=3, line_search_fn="strong_wolfe")),
        ("rosen2d_wolfe_max_ls", [x2], opts(lr=0.01, max_iter=3, line_search_fn="strong_wolfe")),
    ]
    for name, p0, o in line_search_corners:
        cases.append(case(name, "rosenbrock", p0, [], o, 10, f64))
    z = torch.tensor([[0.25, -0.5], [1.0, 2.0]], dtype=torch.float64)
    cases.append(
        case("rosen2d_unused_param_wolfe", "rosenbrock", [x2, z], [], opts(max_iter=3, line_search_fn="strong_wolfe"), 8, f64)
    )
    cases.append(case("rosen2d_f32_wolfe", "rosenbrock", [x2], [], opts(max_iter=2, line_search_fn="strong_wolfe"), 12, f32))
    cases.append(case("rosen2d_f32_none", "rosenbrock", [x2], [], opts(lr=0.2, max_iter=3), 20, f32))

    n, d_in, hid = 16, 3, 6
    x = torch.randn(n, d_in, dtype=f64)
    y = torch.sin(x.sum(1, keepdim=True))
    ylab = torch.where(x[:, :1] * x[:, 1:2] > 0, 1.0, -1.0).to(f64)
    w1 = torch.randn(hid, d_in, dtype=f64) * 0.5
    b1 = torch.randn(hid, dtype=f64) * 0.1
    w2 = torch.randn(1, hid, dtype=f64) * 0.5
    b2 = torch.zeros(1, dtype=f64)
    ps = [w1, b1, w2, b2]
    mlp_opts = lambda ls, **kw: opts(history_size=5, line_search_fn=ls, **kw)  # noqa: E731
    data = [x, y]
    cases.append(case("mlp_f64_none", "mlp", ps, data, mlp_opts(None, lr=0.2, max_iter=4), 20, f64))
    cases.append(case("mlp_f64_wolfe", "mlp", ps, data, mlp_opts("strong_wolfe", max_iter=3), 20, f64, resume_at=10))
    cases.append(case("mlp_f32_none", "mlp", ps, data, mlp_opts(None, lr=0.2, max_iter=2), 12, f32))
    cases.append(case("mlp_f32_wolfe", "mlp", ps, data, mlp_opts("strong_wolfe", max_iter=2), 12, f32))
    cases.append(case("mlp_f32_wolfe_5iter", "mlp", ps, data, mlp_opts("strong_wolfe", max_iter=5), 4, f32))
    cases.append(
        case("logistic_f64_wolfe", "logistic", ps, [x, ylab], opts(max_iter=5, history_size=5, line_search_fn="strong_wolfe"), 20, f64)
    )

    out = {"torch_version": torch.__version__, "cases": cases}
    with open(OUT, "w") as fh:
        json.dump(out, fh, indent=None, separators=(",", ":"))
        fh.write("\n")
    for c in cases:
        last = c["steps"][-1]
        print(f'{c["name"]:28s} loss0={c["steps"][0]["loss"]:.6g} last={last["loss"]:.6g} func_evals={last["func_evals"]} n_iter={last["n_iter"]} t_kinds={sorted(set(s["t_kind"] for s in c["steps"]))}')
    print("wrote", OUT, os.path.getsize(OUT), "bytes")


if __name__ == "__main__":
    main()
