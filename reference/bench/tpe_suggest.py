#!/usr/bin/env python3
"""Optuna's TPESampler suggestion cost with a long history: pyrite-tune's `tpe_suggest` workload.

An in-memory study (direction minimize, TPESampler(seed=0) with its default arguments) gets 1000
COMPLETE trials added with study.add_trials: Hartmann-6 parameters x0..x5 drawn uniformly from
[0, 1] (numpy default_rng(0)) with their Hartmann-6 values. Then, REPEATS times: time one
`study.ask()` plus `trial.suggest_float("x{i}", 0, 1)` for i = 0..5 (TPE's default multivariate
model is fitted and sampled for all six at the first suggest_float); untimed,
`study.tell(trial, hartmann6(x))`. WARMUP
untimed suggestions come first (the first one fills Optuna's search-space cache).

Prints one JSON line: {"workload":"tpe_suggest","metric":"us_per_suggest","value":<median
microseconds>, ...extra fields}.

Usage: python3 reference/bench/tpe_suggest.py [--repeats 20] [--history 1000]
"""
import argparse
import json
import os
import statistics
import sys
import time

import numpy as np
import optuna
from optuna.distributions import FloatDistribution

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from gen_tune_tpe import hartmann6  # noqa: E402

WARMUP = 3


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--history", type=int, default=1000)
    args = p.parse_args()
    optuna.logging.set_verbosity(optuna.logging.ERROR)

    study = optuna.create_study(direction="minimize", sampler=optuna.samplers.TPESampler(seed=0))
    dists = {f"x{i}": FloatDistribution(0.0, 1.0) for i in range(6)}
    rng = np.random.default_rng(0)
    trials = []
    for _ in range(args.history):
        x = rng.uniform(0.0, 1.0, 6).tolist()
        trials.append(optuna.trial.create_trial(params={f"x{i}": x[i] for i in range(6)}, distributions=dists, value=hartmann6(x)))
    study.add_trials(trials)

    times = []
    for k in range(WARMUP + args.repeats):
        t0 = time.perf_counter()
        trial = study.ask()
        x = [trial.suggest_float(f"x{i}", 0.0, 1.0) for i in range(6)]
        dt = time.perf_counter() - t0
        study.tell(trial, hartmann6(x))
        if k >= WARMUP:
            times.append(dt)
    med_us = statistics.median(times) * 1e6
    print(json.dumps({
        "workload": "tpe_suggest",
        "metric": "us_per_suggest",
        "value": round(med_us, 1),
        "min_us": round(min(times) * 1e6, 1),
        "max_us": round(max(times) * 1e6, 1),
        "repeats": args.repeats,
        "history": args.history,
        "optuna": optuna.__version__,
        "numpy": np.__version__,
    }), flush=True)


if __name__ == "__main__":
    main()
