"""The harness that reference/bench/*.py share: torch_bench.py's command line (`--only`,
`--threads`, `--repeats`, `--min-time`, `--list`), its timing loop and its JSON record, so that
scripts/bench_compare.py pairs each script with `pyrite-bench --only <workload>`.

A script defines its workloads as functions returning a dict of results and calls
`harness.main(WORKLOADS, __doc__)`; inside a workload, `harness.ARGS` holds the parsed options.
"""
import argparse
import json
import os
import statistics
import time

import torch

ARGS = None


def loadavg():
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def timeit(fn, warmup=1):
    """Median seconds per call, as torch_bench.py times (inner loop of >= --min-time s)."""
    for _ in range(warmup):
        fn()
    inner = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        dt = time.perf_counter() - t0
        if dt >= ARGS.min_time or inner >= 1 << 24:
            break
        inner = max(inner * 2, int(inner * ARGS.min_time / max(dt, 1e-9) * 1.1))
    times = []
    for _ in range(ARGS.repeats):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        times.append((time.perf_counter() - t0) / inner)
    return statistics.median(times), times


def main(WORKLOADS, doc):
    global ARGS
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", default="")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--min-time", type=float, default=0.1)
    p.add_argument("--list", action="store_true")
    ARGS = p.parse_args()
    if ARGS.list:
        print("\n".join(WORKLOADS))
        return
    names = [s for s in ARGS.only.split(",") if s] or list(WORKLOADS)
    torch.set_num_threads(ARGS.threads)
    for n in names:
        la0 = loadavg()
        t0 = time.perf_counter()
        res = WORKLOADS[n]()
        rec = {
            "bench": n,
            "threads": ARGS.threads,
            "repeats": ARGS.repeats,
            "torch": torch.__version__,
            "date": time.strftime("%Y-%m-%dT%H:%M:%S"),
            "wall_s": round(time.perf_counter() - t0, 2),
            "loadavg_before": la0,
            "loadavg_after": loadavg(),
            "results": res,
        }
        print(json.dumps(rec), flush=True)
