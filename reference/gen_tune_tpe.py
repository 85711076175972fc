"""Optuna's TPESampler (default arguments) and RandomSampler on standard test functions.

Run: python3 reference/gen_tune_tpe.py   (writes reference/data/tune/tpe_benchmarks.json)

For each function (branin, hartmann6, rosenbrock10) and sampler (tpe = TPESampler(seed=s) with
every other argument at its default; random = RandomSampler(seed=s)), seeds s = 0..19, one
sequential study.optimize of 100 trials minimising f. Parameters are suggest_float("x0"), ...,
suggest_float("x{d-1}") over the bounds, in that order. Recorded per function and sampler:
  best        the best value after 100 trials, per seed (index = seed)
  median, q25, q75   np.median / np.percentile(best, 25 / 75) (linear interpolation)
and for TPE also curve_median: per trial index i (0..99), the median over seeds of the best value
among trials 0..i.

"defaults" records TPESampler's defaults as read from the installed Optuna's source.
The function definitions below are the ones the Rust tests port
(crates/pyrite-tune/tests/common/functions.rs).
"""
import inspect
import json
import math
import os
import sys
import time
from importlib.metadata import version

import numpy as np
import optuna
from optuna.samplers._tpe import sampler as tpe_mod

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "data", "tune", "tpe_benchmarks.json")
CMD = "python3 reference/gen_tune_tpe.py"

N_TRIALS = 100
SEEDS = list(range(20))


def branin(x):
    """Branin on x1 in [-5, 10], x2 in [0, 15]; minimum 0.397887 (at (-pi, 12.275), (pi, 2.275),
    (9.42478, 2.475))."""
    x1, x2 = x[0], x[1]
    b = 5.1 / (4.0 * math.pi * math.pi)
    c = 5.0 / math.pi
    t = 1.0 / (8.0 * math.pi)
    return (x2 - b * x1 * x1 + c * x1 - 6.0) ** 2 + 10.0 * (1.0 - t) * math.cos(x1) + 10.0


HART_ALPHA = [1.0, 1.2, 3.0, 3.2]
HART_A = [
    [10.0, 3.0, 17.0, 3.5, 1.7, 8.0],
    [0.05, 10.0, 17.0, 0.1, 8.0, 14.0],
    [3.0, 3.5, 1.7, 10.0, 17.0, 8.0],
    [17.0, 8.0, 0.05, 10.0, 0.1, 14.0],
]
HART_P = [
    [1312.0, 1696.0, 5569.0, 124.0, 8283.0, 5886.0],
    [2329.0, 4135.0, 8307.0, 3736.0, 1004.0, 9991.0],
    [2348.0, 1451.0, 3522.0, 2883.0, 3047.0, 6650.0],
    [4047.0, 8828.0, 8732.0, 5743.0, 1091.0, 381.0],
]


def hartmann6(x):
    """Hartmann-6 on the unit cube; minimum -3.32237 at
    (0.20169, 0.150011, 0.476874, 0.275332, 0.311652, 0.6573)."""
    total = 0.0
    for i in range(4):
        inner = 0.0
        for j in range(6):
            inner += HART_A[i][j] * (x[j] - HART_P[i][j] * 1e-4) ** 2
        total += HART_ALPHA[i] * math.exp(-inner)
    return -total


def rosenbrock(x):
    """Rosenbrock in len(x) dimensions (each in [-5, 10]); minimum 0 at (1, ..., 1)."""
    return sum(100.0 * (x[i + 1] - x[i] * x[i]) ** 2 + (1.0 - x[i]) ** 2 for i in range(len(x) - 1))


FUNCTIONS = {
    "branin": (branin, [(-5.0, 10.0), (0.0, 15.0)], 0.397887),
    "hartmann6": (hartmann6, [(0.0, 1.0)] * 6, -3.32237),
    "rosenbrock10": (rosenbrock, [(-5.0, 10.0)] * 10, 0.0),
}


def r10(x):
    return float(f"{float(x):.10g}")


def run(f, bounds, sampler):
    study = optuna.create_study(direction="minimize", sampler=sampler)

    def objective(trial):
        x = [trial.suggest_float(f"x{i}", lo, hi) for i, (lo, hi) in enumerate(bounds)]
        return f(x)

    study.optimize(objective, n_trials=N_TRIALS)
    vals = [t.value for t in study.trials]
    return list(np.minimum.accumulate(vals))


def stats(best):
    return {
        "best": [r10(b) for b in best],
        "median": r10(np.median(best)),
        "q25": r10(np.percentile(best, 25)),
        "q75": r10(np.percentile(best, 75)),
    }


def tpe_defaults():
    sig = inspect.signature(optuna.samplers.TPESampler.__init__)
    src_file = inspect.getsourcefile(tpe_mod)
    gamma_src = inspect.getsource(tpe_mod.default_gamma).strip()
    weights_src = inspect.getsource(tpe_mod.default_weights).strip()
    s = optuna.samplers.TPESampler()
    pe = s._parzen_estimator_parameters
    return {
        "source": src_file.split("site-packages/")[-1],
        "signature_defaults": {k: (None if v.default is inspect.Parameter.empty else repr(v.default)) for k, v in sig.parameters.items() if k != "self"},
        "n_startup_trials": s._n_startup_trials,
        "n_ei_candidates": s._n_ei_candidates,
        "gamma": "None in the signature; resolved at the first model-based sample to default_gamma "
        "(single objective) or default_gamma_multiobjective: " + " ".join(gamma_src.split()),
        "gamma_formula_single_objective": "min(math.ceil(0.1 * n), 25) where n = number of finished (COMPLETE + PRUNED) trials, running trials excluded",
        "gamma_formula_multi_objective": "math.ceil(0.1 * n)",
        "weights": "default_weights: " + " ".join(weights_src.split()),
        "weights_formula": "n == 0: []; n < 25: ones(n); else concat(linspace(1/n, 1, n - 25), ones(25)) (oldest trials get the ramp; observations are ordered by trial number)",
        "prior_weight": pe.prior_weight,
        "consider_prior": True,
        "consider_magic_clip": pe.consider_magic_clip,
        "consider_endpoints": pe.consider_endpoints,
        "multivariate": "None in the signature -> treated as True for single-objective studies (TPESampler._is_multivariate returns not study._is_multi_objective())",
        "multivariate_effective_single_objective": s._is_multivariate(optuna.create_study()),
        "group": s._group,
        "constant_liar": s._constant_liar,
        "warn_independent_sampling": s._warn_independent_sampling,
        "seed": "None (LazyRandomState(seed) for TPE, plus an inner RandomSampler(seed=seed) for the startup trials)",
    }


def main():
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    t0 = time.time()
    out = {
        "meta": {
            "command": CMD,
            "python": sys.version.split()[0],
            "versions": {p: version(p) for p in ("optuna", "numpy")},
            "n_trials": N_TRIALS,
            "seeds": SEEDS,
            "samplers": {"tpe": "optuna.samplers.TPESampler(seed=s)", "random": "optuna.samplers.RandomSampler(seed=s)"},
            "params": "trial.suggest_float('x{i}', lo, hi) for i in order; direction minimize",
        },
        "defaults": tpe_defaults(),
        "functions": {},
    }
    timings = {}
    for name, (f, bounds, fmin) in FUNCTIONS.items():
        entry = {"bounds": [list(b) for b in bounds], "dim": len(bounds), "minimum": fmin}
        for sname in ("tpe", "random"):
            ts = time.time()
            curves = []
            for s in SEEDS:
                sampler = optuna.samplers.TPESampler(seed=s) if sname == "tpe" else optuna.samplers.RandomSampler(seed=s)
                curves.append(run(f, bounds, sampler))
            best = [c[-1] for c in curves]
            st = stats(best)
            if sname == "tpe":
                arr = np.array(curves)
                st["curve_median"] = [r10(v) for v in np.median(arr, axis=0)]
            entry[sname] = st
            timings[f"{name}/{sname}"] = round(time.time() - ts, 1)
            print(f"{name} {sname}: median {st['median']:.6g} q25 {st['q25']:.6g} q75 {st['q75']:.6g} ({timings[f'{name}/{sname}']} s)", flush=True)
        out["functions"][name] = entry
    out["meta"]["seconds"] = timings
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as fh:
        json.dump(out, fh, separators=(",", ":"), allow_nan=False)
    print(f"wrote {OUT} ({os.path.getsize(OUT)} bytes) in {time.time() - t0:.1f} s")


if __name__ == "__main__":
    main()
