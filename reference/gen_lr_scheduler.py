"""Reference data for the LR schedulers (torch.optim.lr_scheduler and swa_utils.SWALR).

Each case builds a small optimizer (SGD with momentum, Adam for the beta1-cycling cases, Adagrad
where an optimizer without momentum is needed), builds the scheduler from a JSON spec that the
Rust test (crates/pyrite-optim/tests/lr_scheduler.rs) interprets the same way, then runs
`optimizer.step(); scheduler.step()` (ReduceLROnPlateau: `scheduler.step(metrics[i])`) and records:

Every float of the results (and the metrics) is written as its repr in a string, read exactly by
Rust's `str::parse::<f64>`.

  initial      get_last_lr() right after construction
  lrs          get_last_lr() after each step
  momentum     per step, each group's momentum (SGD) or beta1 (Adam), for cycle_momentum cases
  state        scheduler.state_dict() after step `state_at` (inf written as the string "inf")
  order_warnings  how many "lr_scheduler.step() before optimizer.step()" warnings PyTorch raised

`errors` lists constructions (or runs) that must fail, with PyTorch's message.
Lambdas and custom scale functions are named; the Rust test reimplements each formula.

Run: python3 reference/gen_lr_scheduler.py   (writes reference/data/lr_scheduler.json)
"""
import json
import os
import warnings

import torch
from torch.optim import lr_scheduler as L
from torch.optim import swa_utils

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "data", "lr_scheduler.json")

STEPS = 300
STATE_AT = 150

LAMBDAS = {
    "pow095": lambda e: 0.95**e,
    "inv": lambda e: 1 / (1 + e),
    "warmup10": lambda e: min(1.0, (e + 1) / 10),
    "const099": lambda e: 0.99,
    "osc": lambda e: 1.01 if e % 2 else 0.985,
}

SCALE_FNS = {
    "inv_iter": lambda x: 1 / (1.0 + 0.01 * x),
    "half_pow": lambda x: 0.5**x,
}


def make_optimizer(spec):
    params = [torch.nn.Parameter(torch.zeros(2)) for _ in spec["lrs"]]
    groups = []
    for i, (p, lr) in enumerate(zip(params, spec["lrs"])):
        g = {"params": [p], "lr": lr}
        if "initial_lr" in spec:
            g["initial_lr"] = spec["initial_lr"][i]
        groups.append(g)
    kind = spec["kind"]
    if kind == "sgd":
        return torch.optim.SGD(groups, lr=spec["lrs"][0], momentum=spec.get("momentum", 0.0))
    if kind == "adam":
        return torch.optim.Adam(groups, lr=spec["lrs"][0])
    if kind == "adagrad":
        return torch.optim.Adagrad(groups, lr=spec["lrs"][0])
    raise ValueError(kind)


def fn_list(v, table):
    return [table[n] for n in v] if isinstance(v, list) else table[v]


def make_scheduler(opt, spec):
    t = spec["type"]
    kw = dict(spec.get("kw", {}))
    if t == "SequentialLR":
        inner = [make_scheduler(opt, s) for s in spec["schedulers"]]
        return L.SequentialLR(opt, inner, spec["milestones"], **kw)
    if t == "ChainedScheduler":
        inner = [make_scheduler(opt, s) for s in spec["schedulers"]]
        return L.ChainedScheduler(inner, opt)
    if "lr_lambda" in kw:
        kw["lr_lambda"] = fn_list(kw["lr_lambda"], LAMBDAS)
    if "scale_fn" in kw:
        kw["scale_fn"] = SCALE_FNS[kw["scale_fn"]]
    if t == "SWALR":
        return swa_utils.SWALR(opt, **kw)
    return getattr(L, t)(opt, **kw)


def momenta(opt):
    out = []
    for g in opt.param_groups:
        out.append(g["betas"][0] if "betas" in g else g["momentum"])
    return out


def F(x):
    """A float as its repr, in a string: JSON readers do not all parse 17-digit numbers exactly
    (serde_json does not by default), and Rust's `str::parse::<f64>` does."""
    return repr(float(x))


def clean(v):
    """JSON-able copy of a state_dict value: floats as repr strings (inf included), Counter as a
    dict, tuples as lists."""
    if isinstance(v, float):
        return F(v)
    if isinstance(v, dict):
        return {str(k): clean(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [clean(x) for x in v]
    if isinstance(v, (bool, int, float, str)) or v is None:
        return v
    raise TypeError(f"state_dict value {v!r}")


CASES = []


def case(name, sched, opt=None, steps=STEPS, metrics=None, record_momentum=False):
    CASES.append(
        dict(
            name=name,
            optimizer=opt or {"kind": "sgd", "lrs": [0.1], "momentum": 0.9},
            scheduler=sched,
            steps=steps,
            metrics=metrics,
            record_momentum=record_momentum,
        )
    )


def S(t, **kw):
    return {"type": t, "kw": kw}


SGD2 = {"kind": "sgd", "lrs": [0.1, 0.05], "momentum": 0.9}
SGD2_NOMOM = {"kind": "sgd", "lrs": [0.1, 0.02]}
ADAM1 = {"kind": "adam", "lrs": [0.01]}
ADAM2 = {"kind": "adam", "lrs": [0.01, 0.003]}

# LambdaLR / MultiplicativeLR
case("lambda_pow095", S("LambdaLR", lr_lambda="pow095"), SGD2)
case("lambda_per_group", S("LambdaLR", lr_lambda=["inv", "warmup10"]), SGD2)
case("multiplicative_const099", S("MultiplicativeLR", lr_lambda="const099"))
case("multiplicative_per_group", S("MultiplicativeLR", lr_lambda=["osc", "const099"]), SGD2)
# StepLR / MultiStepLR
case("step_7_half", S("StepLR", step_size=7, gamma=0.5))
case("step_30_default_gamma", S("StepLR", step_size=30), SGD2)
case("multistep_repeated", S("MultiStepLR", milestones=[10, 50, 50, 120], gamma=0.5))
case("multistep_default_gamma", S("MultiStepLR", milestones=[30, 80]), SGD2)
# ConstantLR / LinearLR
case("constant_default", S("ConstantLR"))
case("constant_half_20", S("ConstantLR", factor=0.5, total_iters=20), SGD2)
case("linear_default", S("LinearLR"))
case("linear_01_09_100", S("LinearLR", start_factor=0.1, end_factor=0.9, total_iters=100), SGD2)
case("linear_to_zero_250", S("LinearLR", start_factor=1.0, end_factor=0.0, total_iters=250))
# ExponentialLR / PolynomialLR
case("exponential_098", S("ExponentialLR", gamma=0.98), SGD2)
case("polynomial_default", S("PolynomialLR"))
case("polynomial_200_pow2", S("PolynomialLR", total_iters=200, power=2.0), SGD2)
case("polynomial_100_sqrt", S("PolynomialLR", total_iters=100, power=0.5))
# CosineAnnealingLR / CosineAnnealingWarmRestarts
case("cosine_50", S("CosineAnnealingLR", T_max=50))
case("cosine_100_eta", S("CosineAnnealingLR", T_max=100, eta_min=0.001), SGD2)
case("cosine_7", S("CosineAnnealingLR", T_max=7, eta_min=1e-5))
case("warm_restarts_10", S("CosineAnnealingWarmRestarts", T_0=10))
case("warm_restarts_5_mult2", S("CosineAnnealingWarmRestarts", T_0=5, T_mult=2, eta_min=1e-4), SGD2)
# CyclicLR
case("cyclic_triangular", S("CyclicLR", base_lr=0.001, max_lr=0.1, step_size_up=20), record_momentum=True)
case(
    "cyclic_triangular2_groups",
    S("CyclicLR", base_lr=[0.001, 0.0005], max_lr=[0.1, 0.02], step_size_up=15, step_size_down=25,
      mode="triangular2", base_momentum=[0.8, 0.85], max_momentum=[0.9, 0.95]),
    SGD2,
    record_momentum=True,
)
case("cyclic_exp_range", S("CyclicLR", base_lr=0.001, max_lr=0.1, step_size_up=10, mode="exp_range", gamma=0.99),
     record_momentum=True)
case("cyclic_no_momentum", S("CyclicLR", base_lr=0.01, max_lr=0.05, step_size_up=12, cycle_momentum=False), SGD2_NOMOM)
case("cyclic_adam_betas", S("CyclicLR", base_lr=0.0001, max_lr=0.01, step_size_up=30, base_momentum=0.85,
                            max_momentum=0.95), ADAM2, record_momentum=True)
case("cyclic_custom_iterations", S("CyclicLR", base_lr=0.001, max_lr=0.1, step_size_up=8, scale_fn="inv_iter",
                                   scale_mode="iterations"), record_momentum=True)
case("cyclic_custom_cycle", S("CyclicLR", base_lr=0.001, max_lr=0.1, step_size_up=8, step_size_down=4,
                              scale_fn="half_pow", scale_mode="cycle"), record_momentum=True)
# OneCycleLR
case("onecycle_cos", S("OneCycleLR", max_lr=0.1, total_steps=300), record_momentum=True)
case("onecycle_linear", S("OneCycleLR", max_lr=0.1, total_steps=300, anneal_strategy="linear"), record_momentum=True)
case("onecycle_three_phase", S("OneCycleLR", max_lr=0.2, total_steps=300, three_phase=True, pct_start=0.25),
     record_momentum=True)
case("onecycle_adam", S("OneCycleLR", max_lr=[0.01, 0.005], epochs=10, steps_per_epoch=30, div_factor=10.0,
                        final_div_factor=100.0, base_momentum=0.8, max_momentum=0.9), ADAM2, record_momentum=True)
case("onecycle_no_momentum", S("OneCycleLR", max_lr=0.05, total_steps=320, cycle_momentum=False, pct_start=0.4),
     SGD2_NOMOM)

# ReduceLROnPlateau, fed a loss that falls with plateaus (and a rising score for mode="max").
LOSS = [1.0 / (1 + i // 25) + 0.001 * ((i * 7) % 5) for i in range(STEPS)]
SCORE = [-x for x in LOSS]
SLOW = [1.0 - 0.00005 * i for i in range(STEPS)]
case("plateau_default", S("ReduceLROnPlateau"), metrics=LOSS)
case("plateau_min_abs_cooldown", S("ReduceLROnPlateau", threshold=0.01, threshold_mode="abs", patience=5, cooldown=3),
     SGD2, metrics=LOSS)
case("plateau_max_rel", S("ReduceLROnPlateau", mode="max", factor=0.5, patience=4), metrics=SCORE)
case("plateau_max_abs", S("ReduceLROnPlateau", mode="max", threshold_mode="abs", threshold=0.002, patience=2,
                          cooldown=1), metrics=SCORE)
case("plateau_min_lr_groups", S("ReduceLROnPlateau", factor=0.5, patience=3, min_lr=[0.01, 0.001]), SGD2,
     metrics=LOSS)
case("plateau_min_lr_scalar_eps", S("ReduceLROnPlateau", factor=0.9, patience=1, min_lr=0.02, eps=0.003), SGD2,
     metrics=SLOW)
case("plateau_rel_slow", S("ReduceLROnPlateau", patience=2, threshold=1e-4), metrics=SLOW)

# SequentialLR / ChainedScheduler
case("sequential_warmup_cosine",
     {"type": "SequentialLR", "schedulers": [S("LinearLR", start_factor=0.1, total_iters=10),
                                             S("CosineAnnealingLR", T_max=290)], "milestones": [10]})
case("sequential_three", {"type": "SequentialLR", "schedulers": [S("ConstantLR", factor=0.5, total_iters=3),
                                                                 S("ExponentialLR", gamma=0.99),
                                                                 S("StepLR", step_size=20, gamma=0.5)],
                          "milestones": [5, 100]}, SGD2)
case("sequential_exp_lambda", {"type": "SequentialLR", "schedulers": [S("ExponentialLR", gamma=0.97),
                                                                      S("LambdaLR", lr_lambda="inv")],
                               "milestones": [50]})
case("sequential_multiplicative_poly",
     {"type": "SequentialLR", "schedulers": [S("MultiplicativeLR", lr_lambda="const099"),
                                             S("PolynomialLR", total_iters=100, power=2.0)], "milestones": [40]}, SGD2)
case("sequential_const_warm_restarts",
     {"type": "SequentialLR", "schedulers": [S("ConstantLR", factor=0.25, total_iters=20),
                                             S("CosineAnnealingWarmRestarts", T_0=30)], "milestones": [20]})
case("sequential_chained_first",
     {"type": "SequentialLR", "schedulers": [{"type": "ChainedScheduler",
                                              "schedulers": [S("ConstantLR", factor=0.5, total_iters=10),
                                                             S("ExponentialLR", gamma=0.98)]},
                                             S("CosineAnnealingLR", T_max=100, eta_min=0.001)], "milestones": [60]})
case("chained_const_exp", {"type": "ChainedScheduler", "schedulers": [S("ConstantLR", factor=0.5, total_iters=10),
                                                                      S("ExponentialLR", gamma=0.99)]})
case("chained_three_groups", {"type": "ChainedScheduler",
                              "schedulers": [S("StepLR", step_size=40, gamma=0.5), S("CosineAnnealingLR", T_max=60),
                                             S("LinearLR", start_factor=0.2, total_iters=30)]}, SGD2)
case("chained_with_sequential",
     {"type": "ChainedScheduler",
      "schedulers": [{"type": "SequentialLR", "schedulers": [S("LinearLR", start_factor=0.5, total_iters=5),
                                                             S("MultiStepLR", milestones=[50, 150])],
                      "milestones": [5]},
                     S("ExponentialLR", gamma=0.995)]}, SGD2)

# SWALR
case("swalr_cos_10", S("SWALR", swa_lr=0.05))
case("swalr_linear_5", S("SWALR", swa_lr=0.01, anneal_epochs=5, anneal_strategy="linear"), SGD2)
case("swalr_zero_epochs", S("SWALR", swa_lr=0.02, anneal_epochs=0))
case("swalr_groups_cos_30", S("SWALR", swa_lr=[0.05, 0.001], anneal_epochs=30), SGD2)

# Resuming with last_epoch >= 0 (the groups already hold initial_lr).
RESUME = {"kind": "sgd", "lrs": [0.02], "momentum": 0.9, "initial_lr": [0.1]}
case("resume_step_last_epoch_9", S("StepLR", step_size=5, gamma=0.5, last_epoch=9), RESUME)
case("resume_cosine_last_epoch_20", S("CosineAnnealingLR", T_max=40, last_epoch=20), RESUME)
case("resume_exponential_last_epoch_3", S("ExponentialLR", gamma=0.9, last_epoch=3), RESUME)


def order_warnings(record):
    return sum("before `optimizer.step()`" in str(w.message) for w in record)


def run_case(c):
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        out = run_case_quietly(c)
    out["order_warnings"] = order_warnings(record)
    return out


def run_case_quietly(c):
    opt = make_optimizer(c["optimizer"])
    sched = make_scheduler(opt, c["scheduler"])
    out = dict(c)
    out["initial"] = [F(x) for x in sched.get_last_lr()]
    lrs, moms, state = [], [], None
    if c["record_momentum"]:
        out["initial_momentum"] = [F(x) for x in momenta(opt)]
    for i in range(c["steps"]):
        opt.step()
        if c["metrics"] is not None:
            sched.step(c["metrics"][i])
        else:
            sched.step()
        lrs.append([F(x) for x in sched.get_last_lr()])
        if c["record_momentum"]:
            moms.append([F(x) for x in momenta(opt)])
        if i + 1 == STATE_AT:
            state = clean(sched.state_dict())
    if c["metrics"] is not None:
        out["metrics"] = [F(x) for x in c["metrics"]]
    out["lrs"] = lrs
    if c["record_momentum"]:
        out["momentum"] = moms
    out["state_at"] = STATE_AT
    out["state"] = state
    return out


def error_case(name, opt, sched, steps=0):
    try:
        o = make_optimizer(opt)
        s = make_scheduler(o, sched)
        for _ in range(steps):
            o.step()
            s.step()
    except (ValueError, KeyError, TypeError, RuntimeError) as e:
        msg = e.args[0] if isinstance(e, KeyError) else str(e)
        return dict(name=name, optimizer=opt, scheduler=sched, steps=steps, error=msg)
    raise AssertionError(f"{name} did not fail")


SGD1 = {"kind": "sgd", "lrs": [0.1], "momentum": 0.9}
ADAGRAD = {"kind": "adagrad", "lrs": [0.1]}
ERRORS = [
    error_case("plateau_factor", SGD1, S("ReduceLROnPlateau", factor=1.0)),
    error_case("plateau_min_lr_len", SGD2, S("ReduceLROnPlateau", min_lr=[0.1, 0.2, 0.3])),
    error_case("onecycle_no_total", SGD1, S("OneCycleLR", max_lr=0.1)),
    error_case("onecycle_total_zero", SGD1, S("OneCycleLR", max_lr=0.1, total_steps=0)),
    error_case("onecycle_epochs_zero", SGD1, S("OneCycleLR", max_lr=0.1, epochs=0, steps_per_epoch=10)),
    error_case("onecycle_pct_start", SGD1, S("OneCycleLR", max_lr=0.1, total_steps=10, pct_start=1.5)),
    error_case("onecycle_past_total", SGD1, S("OneCycleLR", max_lr=0.1, total_steps=10), steps=11),
    error_case("onecycle_no_momentum", ADAGRAD, S("OneCycleLR", max_lr=0.1, total_steps=10)),
    error_case("cyclic_no_momentum", ADAGRAD, S("CyclicLR", base_lr=0.01, max_lr=0.1)),
    error_case("cyclic_base_lr_len", SGD2, S("CyclicLR", base_lr=[0.1, 0.2, 0.3], max_lr=0.5)),
    error_case("constant_factor", SGD1, S("ConstantLR", factor=1.5)),
    error_case("linear_start", SGD1, S("LinearLR", start_factor=0.0)),
    error_case("linear_end", SGD1, S("LinearLR", end_factor=1.5)),
    error_case("warm_restarts_t0", SGD1, S("CosineAnnealingWarmRestarts", T_0=0)),
    error_case("warm_restarts_tmult", SGD1, S("CosineAnnealingWarmRestarts", T_0=3, T_mult=0)),
    error_case("lambda_count", SGD2, S("LambdaLR", lr_lambda=["inv", "inv", "inv"])),
    error_case("multiplicative_count", SGD2, S("MultiplicativeLR", lr_lambda=["inv"])),
    error_case("swalr_len", SGD1, S("SWALR", swa_lr=[0.1, 0.2])),
    error_case("sequential_milestones", SGD1, {"type": "SequentialLR", "schedulers": [S("ConstantLR"),
                                                                                       S("ExponentialLR", gamma=0.9)],
                                               "milestones": [3, 6]}),
    error_case("sequential_empty", SGD1, {"type": "SequentialLR", "schedulers": [], "milestones": []}),
    error_case("sequential_plateau", SGD1, {"type": "SequentialLR", "schedulers": [S("ReduceLROnPlateau")],
                                            "milestones": []}),
    error_case("chained_plateau", SGD1, {"type": "ChainedScheduler", "schedulers": [S("ExponentialLR", gamma=0.9),
                                                                                    S("ReduceLROnPlateau")]}),
    error_case("resume_without_initial_lr", SGD1, S("StepLR", step_size=3, last_epoch=4)),
]


def main():
    warnings.simplefilter("ignore")
    cases = [run_case(c) for c in CASES]
    data = {"torch_version": torch.__version__, "cases": cases, "errors": ERRORS}
    with open(OUT, "w") as f:
        json.dump(data, f, separators=(",", ":"), allow_nan=False)
    print(f"wrote {len(cases)} cases and {len(ERRORS)} error cases to {OUT} ({os.path.getsize(OUT)} bytes)")


if __name__ == "__main__":
    main()
