"""torch.utils.benchmark.Compare on fixed measurements, for
crates/pyrite-benchmark/tests/compare.rs: the tables as PyTorch renders them, plain, with
trimmed significant figures, colorized (by column and by row) and with warnings highlighted.

Writes reference/data/benchmark_compare.json. Run: python3 reference/gen_benchmark_compare.py
"""
import json
import os

import torch
from torch.utils.benchmark import Compare
from torch.utils.benchmark.utils.common import Measurement, TaskSpec

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "benchmark_compare.json")
g = torch.Generator().manual_seed(1)


def sample(n, center, spread):
    return [center * (1 + spread * float(x)) for x in torch.randn(n, generator=g, dtype=torch.float64)]


specs = []
for label, base in [("add", 2e-6), ("matmul", 3e-4)]:
    for threads in [1, 4]:
        for sub in ["float32", "float64"]:
            for desc, size in [("[64]", 1), ("[1024]", 9), ("[65536]", 400)]:
                t = base * size * (1.6 if sub == "float64" else 1.0) / (threads ** 0.5)
                spread = 0.4 if (sub == "float64" and desc == "[1024]") else 0.03
                specs.append(dict(stmt="op(x)", label=label, sub_label=sub, description=desc,
                                  num_threads=threads, number_per_run=100, raw_times=[x * 100 for x in sample(9, t, spread)]))
# A replicate of one task: merged into it.
specs.append(dict(stmt="op(x)", label="add", sub_label="float32", description="[64]", num_threads=1,
                  number_per_run=50, raw_times=[x * 50 for x in sample(5, 2.1e-6, 0.03)]))
# A missing cell.
specs = [s for s in specs if not (s["label"] == "matmul" and s["sub_label"] == "float64" and s["description"] == "[65536]" and s["num_threads"] == 4)]

ms = [Measurement(number_per_run=s["number_per_run"], raw_times=s["raw_times"],
                  task_spec=TaskSpec(stmt=s["stmt"], setup="", label=s["label"], sub_label=s["sub_label"],
                                     description=s["description"], num_threads=s["num_threads"])) for s in specs]
tables = {}
c = Compare(ms)
tables["plain"] = str(c)
c = Compare(ms); c.trim_significant_figures()
tables["trimmed"] = str(c)
c = Compare(ms); c.trim_significant_figures(); c.colorize()
tables["colorized"] = str(c)
c = Compare(ms); c.colorize(rowwise=True)
tables["rowwise"] = str(c)
c = Compare(ms); c.trim_significant_figures(); c.highlight_warnings()
tables["warnings"] = str(c)
with open(OUT, "w") as f:
    json.dump({"torch": torch.__version__, "measurements": specs, "tables": tables}, f, indent=1)
print(tables["plain"]); print(tables["warnings"])
