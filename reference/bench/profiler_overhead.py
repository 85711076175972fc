"""PyTorch's profiler cost per op, measured as pyrite-bench's `profiler_overhead` workload.

`a + b` on 1x1 float tensors in loops of 10,000, alternately with no profiler and inside
`torch.profiler.profile(activities=[ProfilerActivity.CPU])` (and with record_shapes=True); the
median per-op time of each, and the difference (what recording one op costs).

    python3 reference/bench/profiler_overhead.py [--only profiler_overhead] [--repeats 7] [--threads 2]

Same command line and JSON record as torch_bench.py (reference/bench/harness.py), so
scripts/bench_compare.py pairs it with `pyrite-bench --only profiler_overhead`.
"""

import statistics
import time

import torch
from torch.profiler import ProfilerActivity, profile

import harness


def profiler_overhead():
    a = torch.ones(1, 1)
    b = torch.ones(1, 1)
    n = 10_000

    def run():
        t0 = time.perf_counter()
        for _ in range(n):
            a + b
        return (time.perf_counter() - t0) / n

    def profiled(record_shapes):
        with profile(activities=[ProfilerActivity.CPU], record_shapes=record_shapes) as p:
            t = run()
        assert sum(1 for e in p.events() if e.name == "aten::add") == n
        return t

    run()
    profiled(False)  # warm-up
    off, on, shapes = [], [], []
    for _ in range(max(harness.ARGS.repeats, 5)):
        off.append(run())
        on.append(profiled(False))
        shapes.append(profiled(True))

    def us(v):
        return round(statistics.median(v) * 1e6, 4)

    res = {
        "torch_version": torch.__version__,
        "ops_per_loop": n,
        "add_1x1_off_us": us(off),
        "add_1x1_profiled_us": us(on),
        "add_1x1_profiled_shapes_us": us(shapes),
        "profiled_minus_off_us": round(us(on) - us(off), 4),
        "profiled_shapes_minus_off_us": round(us(shapes) - us(off), 4),
    }
    return res


if __name__ == "__main__":
    harness.main({"profiler_overhead": profiler_overhead}, __doc__)
