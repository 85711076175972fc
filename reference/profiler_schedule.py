"""Records torch.profiler's schedule and ProfilerAction state machine for a few parameter sets.

Writes reference/data/profiler_schedule.json, read by crates/pyrite-profiler/tests/schedule.rs:
for each case, the action `torch.profiler.schedule(...)` returns at steps 0..steps-1, and, from
a real `torch.profiler.profile(schedule=..., on_trace_ready=...)` run of `steps` calls to
`prof.step()`, the step number at which each trace was handed to `on_trace_ready` and the
`ProfilerStep#N` annotations that trace holds.

    python3 reference/profiler_schedule.py
"""

import json
import os
import tempfile
import warnings

import torch
from torch.profiler import ProfilerActivity, profile, record_function, schedule

CASES = [
    dict(wait=1, warmup=1, active=2, repeat=1, skip_first=0, steps=8),
    dict(wait=1, warmup=1, active=2, repeat=2, skip_first=1, steps=12),
    dict(wait=0, warmup=0, active=1, repeat=0, skip_first=0, steps=4),
    dict(wait=2, warmup=1, active=3, repeat=0, skip_first=2, steps=16),
    dict(wait=0, warmup=2, active=1, repeat=3, skip_first=0, steps=10),
    dict(wait=1, warmup=0, active=3, repeat=1, skip_first=3, steps=9),
]


def run(case):
    params = {k: case[k] for k in ("wait", "warmup", "active", "repeat", "skip_first")}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sched = schedule(**params)
    actions = [sched(i).name for i in range(case["steps"])]
    traces = []
    a = torch.ones(1)

    def ready(p):
        # events() renames the step ranges "ProfilerStep*"; the trace keeps their numbers.
        path = os.path.join(tempfile.mkdtemp(), "t.json")
        p.export_chrome_trace(path)
        with open(path) as f:
            names = {e.get("name", "") for e in json.load(f)["traceEvents"]}
        steps = sorted((n for n in names if n.startswith("ProfilerStep#")), key=lambda s: int(s[13:]))
        traces.append({"at_step": p.step_num, "steps": steps})

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with profile(activities=[ProfilerActivity.CPU], schedule=sched, on_trace_ready=ready) as p:
            for _ in range(case["steps"]):
                with record_function("work"):
                    a = a + 1
                p.step()
    return dict(case, actions=actions, traces=traces)


if __name__ == "__main__":
    out = {"torch_version": torch.__version__, "cases": [run(c) for c in CASES]}
    path = os.path.join(os.path.dirname(__file__), "data", "profiler_schedule.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print(json.dumps(out["cases"][1]))
