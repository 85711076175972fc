#!/usr/bin/env python3
"""Runs Pyrite's and PyTorch's benchmarks side by side and prints Pyrite/PyTorch ratios.

For each workload, PyTorch's run and Pyrite's run follow each other in the same process
tree (same machine, same minute), so their ratio is meaningful even on a loaded machine.

Usage:
  python3 scripts/bench_compare.py [--only matmul,elementwise] [--threads 1,2] [--repeats 7]
      [--rounds 3] [--torch-bench ../shared/reference/torch_bench.py] [--json out.jsonl]
      [--bin target/release/pyrite-bench]

--bin (or $PYRITE_BENCH_BIN) names the pyrite-bench binary, e.g. when CARGO_TARGET_DIR is
elsewhere; the default is this checkout's target/release/pyrite-bench.

With --rounds R, PyTorch and Pyrite run alternately R times per workload (torch, pyrite, torch,
pyrite, ...); the table shows each side's median over the rounds and the median of the
per-round ratios. On a VM whose speed drifts by 10-30% from minute to minute, this is far more
stable than one run each.

Ratios are printed as "speedup": > 1 means Pyrite is faster. For throughput metrics (GFLOP/s,
GB/s, steps/s, samples/s, ...) speedup = pyrite / torch; for times (_us, _ms, _s) it is
torch / pyrite. Requires: cargo build --release -p pyrite-bench (with --features mpi for the
ddp_* workloads, which need OpenMPI), and torch installed.

Workloads that the shared torch_bench.py lacks have their PyTorch side in this repository
(TORCH_SCRIPTS below, e.g. reference/bench/checkpoint.py), with the same command line and
JSON record.
"""
import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The pyrite-bench binary: $PYRITE_BENCH_BIN or --bin, else this checkout's target/release.
BIN = os.environ.get("PYRITE_BENCH_BIN") or os.path.join(ROOT, "target", "release", "pyrite-bench")
# PyTorch sides of workloads that are not in the shared torch_bench.py.
TORCH_SCRIPTS = {
    "checkpoint": os.path.join(ROOT, "reference", "bench", "checkpoint.py"),
    "bert_forward": os.path.join(ROOT, "reference", "bench", "bert_forward.py"),
    "bert_ops": os.path.join(ROOT, "reference", "bench", "bert_ops.py"),
    "fit_digits": os.path.join(ROOT, "reference", "bench", "fit_digits.py"),
    "matmul_bf16": os.path.join(ROOT, "reference", "bench", "amp_bf16.py"),
    "cnn_bf16": os.path.join(ROOT, "reference", "bench", "amp_bf16.py"),
    "transformer_bf16": os.path.join(ROOT, "reference", "bench", "amp_bf16.py"),
    "profiler_overhead": os.path.join(ROOT, "reference", "bench", "profiler_overhead.py"),
    "ddp_mlp_big": os.path.join(ROOT, "reference", "bench", "ddp.py"),
    "ddp_cnn": os.path.join(ROOT, "reference", "bench", "ddp.py"),
    "ddp_allreduce": os.path.join(ROOT, "reference", "bench", "ddp.py"),
    "tpe_suggest": os.path.join(ROOT, "reference", "bench", "tune.py"),
    "asha_report": os.path.join(ROOT, "reference", "bench", "tune.py"),
}


def run(cmd):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def median(v):
    s = sorted(v)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def higher_is_better(key):
    k = key.lower()
    if k.endswith("_spread") or k == "spread":
        return None
    if k.startswith("ms_per_") or k.startswith("us_per_"):
        return False
    if any(t in k for t in ("gflops", "gbs", "per_s", "_acc")):
        return True
    if k.endswith(("_us", "_ms", "_s", "_us_best", "_ms_best")):
        return False
    return None


def main():
    global BIN
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", default="")
    p.add_argument("--threads", default="1,2")
    p.add_argument("--repeats", default="7")
    p.add_argument("--torch-bench", default=os.path.join(ROOT, "..", "shared", "reference", "torch_bench.py"))
    p.add_argument("--json", default="", help="also append every raw record to this file")
    p.add_argument("--rounds", type=int, default=1, help="alternate the two sides this many times")
    p.add_argument("--bin", default=BIN, help="the pyrite-bench binary (default: %(default)s)")
    a = p.parse_args()
    BIN = a.bin
    if not os.path.exists(BIN):
        sys.exit("build first: cargo build --release -p pyrite-bench")
    ours = subprocess.run([BIN, "--list"], check=True, capture_output=True, text=True).stdout.split()
    names = [n for n in a.only.split(",") if n] or ours
    rows = []
    for threads in a.threads.split(","):
        for name in names:
            if name not in ours:
                print(f"# {name}: not implemented in pyrite-bench yet", file=sys.stderr)
                continue
            common = ["--only", name, "--threads", threads, "--repeats", a.repeats]
            per_round = []
            for _ in range(a.rounds):
                t = run([sys.executable, TORCH_SCRIPTS.get(name, a.torch_bench)] + common)[0]
                r = run([BIN] + common)[0]
                if a.json:
                    with open(a.json, "a") as f:
                        f.write(json.dumps(t) + "\n" + json.dumps(r) + "\n")
                per_round.append((t["results"], r["results"]))
            for key, pv in per_round[0][1].items():
                hib = higher_is_better(key)
                if hib is None or key.endswith("_best"):
                    continue
                tvs, pvs, ratios = [], [], []
                for tres, pres in per_round:
                    tv, pv = tres.get(key), pres.get(key)
                    if not isinstance(pv, (int, float)) or not isinstance(tv, (int, float)) or pv == 0 or tv == 0:
                        continue
                    tvs.append(tv)
                    pvs.append(pv)
                    ratios.append(pv / tv if hib else tv / pv)
                if ratios:
                    rows.append((name, threads, key, median(tvs), median(pvs), median(ratios)))
    print(f"{'workload':<12} {'thr':>3} {'metric':<28} {'pytorch':>11} {'pyrite':>11} {'speedup':>8}")
    for name, threads, key, tv, pv, s in rows:
        print(f"{name:<12} {threads:>3} {key:<28} {tv:>11.4g} {pv:>11.4g} {s:>7.2f}x")


if __name__ == "__main__":
    main()
