"""torch.utils.benchmark's Measurement on fixed samples of times, for
crates/pyrite-benchmark/tests/measurement.rs: the statistics (median, mean, IQR, significant
figures, warnings) and the text rendering, minus its first line (the object's address).

Writes reference/data/benchmark_measurement.json. Run: python3 reference/gen_benchmark_measurement.py
"""
import json
import os

import torch
from torch.utils.benchmark.utils.common import Measurement, TaskSpec, select_unit, trim_sigfig

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "benchmark_measurement.json")

g = torch.Generator().manual_seed(0)


def sample(n, center, spread):
    return [center * (1 + spread * float(x)) for x in torch.randn(n, generator=g, dtype=torch.float64)]


cases = [
    dict(number_per_run=100, raw_times=sample(40, 5.7e-4, 0.02), spec=dict(stmt="x + y", label="Broadcasting add", sub_label="4x8", num_threads=1)),
    dict(number_per_run=10, raw_times=sample(12, 3.2e-2, 0.15), spec=dict(stmt="model(x)", description="batch 64", num_threads=2)),
    dict(number_per_run=1000, raw_times=sample(7, 1.2e-3, 0.6), spec=dict(stmt="a.matmul(b)", setup="a = randn(64, 64)", num_threads=4)),
    dict(number_per_run=1, raw_times=[0.75], spec=dict(stmt="train_epoch()", label="epoch")),
    dict(number_per_run=5, raw_times=[2e-3, 2.1e-3, 1.9e-3], spec=dict(stmt="step()", sub_label="three")),
    dict(number_per_run=2000, raw_times=sample(25, 2.4e-4, 0.3), spec=dict(stmt="f()", label="noisy", setup="x = 1\ny = 2")),
    dict(number_per_run=1, raw_times=sample(9, 12.0, 0.05), spec=dict(stmt="long()")),
]
out = []
for c in cases:
    spec = TaskSpec(setup=c["spec"].pop("setup", ""), **c["spec"])
    m = Measurement(number_per_run=c["number_per_run"], raw_times=c["raw_times"], task_spec=spec)
    text = repr(m).split("\n", 1)[1]
    out.append(dict(
        number_per_run=c["number_per_run"], raw_times=c["raw_times"],
        spec=dict(stmt=spec.stmt, setup=spec.setup, label=spec.label, sub_label=spec.sub_label,
                  description=spec.description, num_threads=spec.num_threads),
        median=m.median, mean=m.mean, iqr=m.iqr, significant_figures=m.significant_figures,
        has_warnings=m.has_warnings, title=m.title, text=text,
    ))
    print(text, "\n")
units = [[t, *select_unit(t)] for t in [3e-10, 1e-9, 5.5e-8, 1e-6, 4.2e-4, 1e-3, 0.5, 1.0, 75.0]]
trims = [[x, n, trim_sigfig(x, n)] for x, n in [(3.14159, 2), (123456.0, 3), (0.000987654, 2), (42.0, 1)]]
with open(OUT, "w") as f:
    json.dump({"torch": torch.__version__, "cases": out, "select_unit": units, "trim_sigfig": trims}, f, indent=1)
print("wrote", OUT)
