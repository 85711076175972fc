"""Records torch.profiler's key_averages() tables and the numbers behind them.

Writes reference/data/profiler_table.json, read by crates/pyrite-profiler/tests/table.rs:
for a profiled Linear + sum + backward with record_shapes and profile_memory, each averaged
row (key, input shapes, count, self/total CPU time in ns, CPU memory) and the text of
`table(...)` for a few option sets. The Rust test rebuilds the rows and must print the same
text.

    python3 reference/profiler_table.py
"""

import json
import os

import torch
from torch.profiler import ProfilerActivity, profile, record_function

TABLES = [
    dict(group_by_input_shape=False, sort_by="cpu_time_total", row_limit=8),
    dict(group_by_input_shape=False, sort_by="self_cpu_time_total", row_limit=5),
    dict(group_by_input_shape=True, sort_by="cpu_time_total", row_limit=6),
    dict(group_by_input_shape=False, sort_by="count", row_limit=100),
]


def ns(us):
    return int(round(us * 1000))


def main():
    torch.manual_seed(0)
    m = torch.nn.Linear(4, 3)
    x = torch.randn(2, 4)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True, profile_memory=True) as prof:
        with record_function("model_inference"):
            y = m(x).sum()
        y.backward()
    out = {"torch_version": torch.__version__, "tables": []}
    for t in TABLES:
        avg = prof.key_averages(group_by_input_shape=t["group_by_input_shape"])
        rows = [
            dict(
                key=e.key,
                input_shapes=e.input_shapes if t["group_by_input_shape"] else [],
                count=e.count,
                self_cpu_time_total_ns=ns(e.self_cpu_time_total),
                cpu_time_total_ns=ns(e.cpu_time_total),
                cpu_memory_usage=e.cpu_memory_usage,
                self_cpu_memory_usage=e.self_cpu_memory_usage,
            )
            for e in avg
        ]
        text = avg.table(sort_by=t["sort_by"], row_limit=t["row_limit"])
        out["tables"].append(dict(t, rows=rows, text=text))
    path = os.path.join(os.path.dirname(__file__), "data", "profiler_table.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print(out["tables"][2]["text"])


if __name__ == "__main__":
    main()
