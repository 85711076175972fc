#!/usr/bin/env python3
"""The tuning workloads' reference side: Optuna's TPESampler and Ray Tune's ASHA, measured the
way crates/pyrite-bench/src/tune.rs measures pyrite::tune.

- tpe_suggest: an in-memory study (minimize, TPESampler(seed=0), default arguments) holding 1000
  COMPLETE trials with random Hartmann-6 parameters x0..x5 in [0, 1] and their values; then time
  `study.ask()` plus the six `suggest_float` calls (TPE's multivariate model is fitted and
  sampled at the first one), median over --repeats suggestions after 3 untimed ones.
  Metric: suggest_us.
- asha_report: Ray's AsyncHyperBandScheduler (metric loss, mode min, its defaults: max_t 100,
  grace_period 1, reduction_factor 4) with 1000 trials added; then 100 rounds in which every
  trial reports its next iteration (a seeded random loss); the time per `on_trial_result`, as the
  mean over the rounds, median over --repeats. Metric: report_us.

Usage: python3 reference/bench/tune.py --only tpe_suggest,asha_report [--threads N] [--repeats R]
Prints one JSON record per workload: {"bench": ..., "results": {...}}, as pyrite-bench does.
"""
import argparse
import json
import os
import random
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def tpe_suggest(repeats):
    import numpy as np
    import optuna
    from optuna.distributions import FloatDistribution
    from gen_tune_tpe import hartmann6

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    study = optuna.create_study(direction="minimize", sampler=optuna.samplers.TPESampler(seed=0))
    dists = {f"x{i}": FloatDistribution(0.0, 1.0) for i in range(6)}
    rng = np.random.default_rng(0)
    trials = []
    for _ in range(1000):
        x = rng.uniform(0.0, 1.0, 6).tolist()
        trials.append(optuna.trial.create_trial(params={f"x{i}": x[i] for i in range(6)}, distributions=dists, value=hartmann6(x)))
    study.add_trials(trials)
    times = []
    for k in range(3 + repeats):
        t0 = time.perf_counter()
        trial = study.ask()
        x = [trial.suggest_float(f"x{i}", 0.0, 1.0) for i in range(6)]
        dt = time.perf_counter() - t0
        study.tell(trial, hartmann6(x))
        if k >= 3:
            times.append(dt)
    return {"suggest_us": round(statistics.median(times) * 1e6, 2), "history": 1000, "optuna": optuna.__version__}


def asha_report(repeats):
    import ray
    from ray.tune.schedulers import AsyncHyperBandScheduler

    class T:
        def __init__(self, i):
            self.trial_id = f"t{i}"

    per_call = []
    for r in range(repeats):
        sched = AsyncHyperBandScheduler(metric="loss", mode="min")
        trials = [T(i) for i in range(1000)]
        for t in trials:
            sched.on_trial_add(None, t)
        rng = random.Random(r)
        calls, spent = 0, 0.0
        for it in range(1, 101):
            for t in trials:
                res = {"training_iteration": it, "loss": rng.random()}
                t0 = time.perf_counter()
                sched.on_trial_result(None, t, res)
                spent += time.perf_counter() - t0
                calls += 1
        per_call.append(spent / calls)
    return {"report_us": round(statistics.median(per_call) * 1e6, 3), "ray": ray.__version__}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", default="tpe_suggest,asha_report")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--repeats", type=int, default=7)
    a = p.parse_args()
    for name in [n for n in a.only.split(",") if n]:
        t0 = time.perf_counter()
        if name == "tpe_suggest":
            res = tpe_suggest(max(a.repeats, 5))
        elif name == "asha_report":
            res = asha_report(min(a.repeats, 3))
        else:
            sys.exit(f"unknown workload {name}")
        print(json.dumps({"bench": name, "threads": a.threads, "repeats": a.repeats, "wall_s": round(time.perf_counter() - t0, 2), "results": res}))


if __name__ == "__main__":
    main()
