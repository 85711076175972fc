"""HpBandSter's BOHB, HyperBand and RandomSearch on the "counting ones" benchmark of the BOHB paper.

Run: python3 reference/gen_tune_bohb.py   (writes reference/data/tune/bohb_benchmark.json)

Benchmark (Falkner, Klein, Hutter 2018, "BOHB: Robust and Efficient Hyperparameter Optimization at
Scale", counting ones): 4 binary categorical dims c0..c3 (choices 0, 1) and 4 continuous dims
x0..x3 uniform in [0, 1]. Evaluated at budget b (b = number of samples, 9..243):
    loss(b) = -( sum_i c_i + sum_i mean of b Bernoulli(x_i) samples )
The mean of b Bernoulli(x) draws is drawn as Binomial(b, x) / b from a per-evaluation RNG,
numpy.random.default_rng([seed, iteration, 0, config index, b]) (the config id hpbandster assigns
is (iteration, 0, index)), so an evaluation is reproducible on its own. The optimum is -8. The
true (noise-free) value of a configuration is sum c_i + sum x_i; its regret is 8 - true.

Optimizers (hpbandster 0.7.4), eta = 3, min_budget = 9, max_budget = 243 -> budgets 9, 27, 81, 243:
  bohb        hpbandster.optimizers.BOHB with its defaults (min_points_in_model None -> dims + 1 = 9,
              top_n_percent 15, num_samples 64, random_fraction 1/3, bandwidth_factor 3,
              min_bandwidth 1e-3), n_iterations = N_ITER
  hyperband   hpbandster.optimizers.HyperBand (random configurations), n_iterations = N_ITER
  random      hpbandster.optimizers.RandomSearch (4 configurations per iteration, all on
              max_budget), n_iterations = N_ITER_RS
One in-process Pyro4 nameserver and one worker thread per run, as hpbandster's example 1 does.
Seeding: np.random.seed(seed) (BOHB's sampling uses the global numpy RNG and scipy's truncnorm)
and ConfigurationSpace(seed=seed) (random configurations). With one worker the run is sequential
and deterministic.

Incumbent after k evaluations (in completion order): among the evaluations so far made on
max_budget, the one with the lowest observed loss (first one on ties); regret = 8 - its true
value. Before the first max-budget evaluation the regret is undefined (null). Budgets are
reported in units of max_budget (cumulative sum of evaluated budgets / 243).

NOTE: hpbandster talks to its worker through Pyro4, whose default serializer (serpent) cannot
read back numpy 2 scalars (ConfigSpace 1.x configuration values are numpy floats; serpent writes
them as `np.float64(...)`, which the receiving side rejects with "malformed node or string", and
the job silently never runs: the optimizer hangs). This script therefore switches Pyro4 to the
pickle serializer (PYRO_SERIALIZER=pickle), which is safe here: everything is in one process.
"""
import os

os.environ["PYRO_SERIALIZER"] = "pickle"
os.environ["PYRO_SERIALIZERS_ACCEPTED"] = "pickle,serpent,json,marshal"

import json  # noqa: E402
import logging  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from importlib.metadata import version  # noqa: E402

import numpy as np  # noqa: E402
import Pyro4  # noqa: E402

Pyro4.config.SERIALIZER = "pickle"
Pyro4.config.SERIALIZERS_ACCEPTED = {"pickle", "serpent", "json", "marshal"}

import ConfigSpace as CS  # noqa: E402
import hpbandster.core.nameserver as hpns  # noqa: E402
from hpbandster.core.worker import Worker  # noqa: E402
from hpbandster.optimizers import BOHB, HyperBand, RandomSearch  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "data", "tune", "bohb_benchmark.json")
CMD = "python3 reference/gen_tune_bohb.py"

ETA = 3
MIN_BUDGET = 9
MAX_BUDGET = 243
N_ITER = 16  # 4 full HyperBand rounds of 4 brackets (60 max-budget units per run)
N_ITER_RS = 16  # 4 max-budget evaluations per RandomSearch iteration -> 64 units
SEEDS = list(range(20))
N_CAT = 4
N_CONT = 4
OPTIMUM = float(N_CAT + N_CONT)


def r10(x):
    return None if x is None else float(f"{float(x):.10g}")


def configspace(seed):
    cs = CS.ConfigurationSpace(seed=seed)
    for i in range(N_CAT):
        cs.add(CS.CategoricalHyperparameter(f"c{i}", [0, 1]))
    for i in range(N_CONT):
        cs.add(CS.UniformFloatHyperparameter(f"x{i}", lower=0.0, upper=1.0))
    return cs


def true_value(config):
    return sum(int(config[f"c{i}"]) for i in range(N_CAT)) + sum(float(config[f"x{i}"]) for i in range(N_CONT))


def counting_ones(config, budget, seed, config_id):
    b = int(round(budget))
    rng = np.random.default_rng([seed, *[int(v) for v in config_id], b])
    cat = sum(int(config[f"c{i}"]) for i in range(N_CAT))
    cont = sum(rng.binomial(b, float(config[f"x{i}"])) / b for i in range(N_CONT))
    return -(cat + cont)


class CountingOnesWorker(Worker):
    def __init__(self, *args, seed=0, **kwargs):
        super().__init__(*args, **kwargs)
        self.seed = seed
        self.order = 0
        self.lock = threading.Lock()

    def compute(self, config, budget, config_id=None, **kwargs):
        loss = counting_ones(config, budget, self.seed, config_id)
        with self.lock:
            k = self.order
            self.order += 1
        return {"loss": float(loss), "info": {"order": k, "true": true_value(config)}}


def run_one(method, seed):
    np.random.seed(seed)
    run_id = f"co_{method}_{seed}"
    ns = hpns.NameServer(run_id=run_id, host="127.0.0.1", port=0)
    host, port = ns.start()
    w = CountingOnesWorker(seed=seed, nameserver=host, nameserver_port=port, run_id=run_id)
    w.run(background=True)
    cs = configspace(seed)
    common = dict(configspace=cs, run_id=run_id, nameserver=host, nameserver_port=port, eta=ETA, min_budget=MIN_BUDGET, max_budget=MAX_BUDGET)
    if method == "bohb":
        opt = BOHB(**common)
        n_iter = N_ITER
    elif method == "hyperband":
        opt = HyperBand(**common)
        n_iter = N_ITER
    else:
        opt = RandomSearch(**common)
        n_iter = N_ITER_RS
    try:
        res = opt.run(n_iterations=n_iter)
    finally:
        opt.shutdown(shutdown_workers=True)
        ns.shutdown()
    id2conf = res.get_id2config_mapping()
    runs = [r for r in res.get_all_runs() if r.info is not None]
    runs.sort(key=lambda r: r.info["order"])
    evals = []
    cum = 0.0
    inc_loss, inc_true = None, None
    model_based = 0
    for r in runs:
        cum += r.budget
        on_max = abs(r.budget - MAX_BUDGET) < 1e-6
        if on_max and (inc_loss is None or r.loss < inc_loss):
            inc_loss, inc_true = r.loss, r.info["true"]
        evals.append({
            "budget": r.budget / MAX_BUDGET,
            "cum_budget": cum / MAX_BUDGET,
            "regret": None if inc_true is None else OPTIMUM - inc_true,
        })
    for cid, c in id2conf.items():
        if c.get("config_info", {}).get("model_based_pick"):
            model_based += 1
    return evals, {"n_configs": len(id2conf), "n_evals": len(runs), "model_based_picks": model_based}


def regret_at(evals, g):
    """Regret of the incumbent after all evaluations whose cumulative budget is <= g."""
    reg = None
    for e in evals:
        if e["cum_budget"] <= g + 1e-9:
            reg = e["regret"]
        else:
            break
    return reg


def main():
    logging.basicConfig(level=logging.ERROR)
    logging.getLogger("hpbandster").setLevel(logging.ERROR)
    warnings.simplefilter("ignore")
    t0 = time.time()
    methods = ["bohb", "hyperband", "random"]
    out = {
        "meta": {
            "command": CMD,
            "python": sys.version.split()[0],
            "versions": {p: version(p) for p in ("hpbandster", "ConfigSpace", "statsmodels", "scipy", "numpy", "Pyro4", "serpent")},
            "pyro_serializer": "pickle (serpent cannot round-trip numpy 2 scalars; see the script's docstring)",
            "benchmark": "counting ones, 4 binary categorical + 4 continuous in [0,1]; loss(b) = -(sum c + sum_i Binomial(b, x_i)/b); optimum -8; regret = 8 - (sum c + sum x) of the incumbent",
            "eta": ETA,
            "min_budget": MIN_BUDGET,
            "max_budget": MAX_BUDGET,
            "budgets": [9, 27, 81, 243],
            "n_iterations": {"bohb": N_ITER, "hyperband": N_ITER, "random": N_ITER_RS},
            "seeds": SEEDS,
            "bohb_options": {"min_points_in_model": None, "top_n_percent": 15, "num_samples": 64, "random_fraction": 1 / 3, "bandwidth_factor": 3, "min_bandwidth": 1e-3},
            "incumbent": "lowest observed loss among evaluations on max_budget so far (first on ties); regret null before the first max-budget evaluation",
            "units": "budgets in units of max_budget (243)",
        },
        "methods": {},
    }
    timings = {}
    for m in methods:
        ts = time.time()
        per_seed = []
        for s in SEEDS:
            evals, info = run_one(m, s)
            per_seed.append({
                "seed": s, **info, "final_regret": r10(evals[-1]["regret"]), "total_budget": r10(evals[-1]["cum_budget"]),
                "max_budget_evals": [[r10(e["cum_budget"]), r10(e["regret"])] for e in evals if abs(e["budget"] - 1.0) < 1e-9],
            })
            print(f"{m} seed {s}: {info} final regret {evals[-1]['regret']:.4f} budget {evals[-1]['cum_budget']:.2f}", flush=True)
        total = min(p["total_budget"] for p in per_seed)
        grid = list(range(1, int(total) + 1))
        med, q25, q75, n_def = [], [], [], []
        for g in grid:
            vals = [regret_at([{"cum_budget": e[0], "regret": e[1]} for e in p["max_budget_evals"]], g) for p in per_seed]
            vals = [v for v in vals if v is not None]
            n_def.append(len(vals))
            if len(vals) == len(per_seed):
                med.append(r10(np.median(vals)))
                q25.append(r10(np.percentile(vals, 25)))
                q75.append(r10(np.percentile(vals, 75)))
            else:
                med.append(None)
                q25.append(None)
                q75.append(None)
        finals = [p["final_regret"] for p in per_seed]
        out["methods"][m] = {
            "grid": grid,
            "median_regret": med,
            "q25_regret": q25,
            "q75_regret": q75,
            "n_seeds_defined": n_def,
            "final_regret_median": r10(np.median(finals)),
            "final_regret_q25": r10(np.percentile(finals, 25)),
            "final_regret_q75": r10(np.percentile(finals, 75)),
            "per_seed": per_seed,
        }
        timings[m] = round(time.time() - ts, 1)
        print(f"{m}: final regret median {np.median(finals):.4f} ({timings[m]} s)", flush=True)
    out["meta"]["seconds"] = timings
    out["format"] = (
        "methods.<m>.per_seed[i].max_budget_evals: one row per evaluation on max_budget, in "
        "completion order: [cumulative budget spent up to and including it, regret of the "
        "incumbent after it] (budgets in units of max_budget; the incumbent only changes at these "
        "evaluations, so the regret after any cumulative budget g is the last row with "
        "cumulative budget <= g, null before the first). total_budget: the run's whole spend. "
        "grid: whole units of max_budget up to the smallest total over seeds; median_regret / "
        "q25_regret / q75_regret at each grid point g use, per seed, the incumbent after the "
        "evaluations with cumulative budget <= g (null where some seed has no max-budget "
        "evaluation yet). model_based_picks: configurations BOHB drew from its KDE model."
    )
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as fh:
        json.dump(out, fh, separators=(",", ":"), allow_nan=False)
    print(f"wrote {OUT} ({os.path.getsize(OUT)} bytes) in {time.time() - t0:.1f} s")


if __name__ == "__main__":
    main()
