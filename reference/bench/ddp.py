"""PyTorch DistributedDataParallel on the gloo backend, as pyrite-bench's `ddp_*` workloads.

Each workload starts its own job: `torchrun --standalone --nproc_per_node 2` of this script,
one thread per rank (`--threads` is per rank), and prints rank 0's record.

- ddp_mlp_big / ddp_cnn: torch_bench.py's mlp_big and cnn training steps (Adam lr 1e-3),
  the same global batch (128 / 64) split over the ranks, the model wrapped in DDP. Every rank
  runs 3 warm-up steps, then `--repeats` rounds of a fixed number of steps between barriers;
  steps_per_s is global steps per second (median round).
- ddp_allreduce: all_reduce of a 100 MB float32 tensor between the ranks (median of
  `--repeats`), as milliseconds and GB/s of tensor (100 MB / time).

    python3 reference/bench/ddp.py [--only ddp_mlp_big,ddp_cnn,ddp_allreduce] [--repeats 7] [--threads 1]

Same command line and JSON record as torch_bench.py (reference/bench/harness.py), so
scripts/bench_compare.py pairs it with `pyrite-bench --only ddp_mlp_big` and the others.
"""

import json
import os
import statistics
import subprocess
import sys
import time

NPROC = 2
STEPS = {"ddp_mlp_big": 20, "ddp_cnn": 10}


def worker(name, repeats, threads):
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    import torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.set_num_threads(threads)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    res = {"ranks": world, "threads_per_rank": threads, "backend": "gloo"}
    if name == "ddp_allreduce":
        t = torch.ones(25_000_000)
        dist.all_reduce(t)  # warm-up
        times = []
        for _ in range(repeats):
            dist.barrier()
            t0 = time.perf_counter()
            dist.all_reduce(t)
            times.append(time.perf_counter() - t0)
        med = statistics.median(times)
        res.update({"bytes": 100_000_000, "allreduce_100mb_ms": round(med * 1e3, 2),
                    "allreduce_gbs": round(0.1 / med, 3)})
    else:
        torch.manual_seed(0)
        if name == "ddp_mlp_big":
            model = nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                                  nn.Linear(1024, 10))
            bs, shape = 128, (784,)
        else:
            class SmallCNN(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.c1 = nn.Conv2d(1, 32, 3, padding=1)
                    self.c2 = nn.Conv2d(32, 64, 3, padding=1)
                    self.f1 = nn.Linear(64 * 7 * 7, 128)
                    self.f2 = nn.Linear(128, 10)

                def forward(self, x):
                    x = F.max_pool2d(F.relu(self.c1(x)), 2)
                    x = F.max_pool2d(F.relu(self.c2(x)), 2)
                    return self.f2(F.relu(self.f1(torch.flatten(x, 1))))

            model = SmallCNN()
            bs, shape = 64, (1, 28, 28)
        ddp = DDP(model)
        opt = torch.optim.Adam(ddp.parameters(), lr=1e-3)
        local = bs // world
        torch.manual_seed(1 + rank)
        x = torch.randn(local, *shape)
        y = torch.randint(0, 10, (local,))

        def step():
            opt.zero_grad(set_to_none=True)
            F.cross_entropy(ddp(x), y).backward()
            opt.step()

        for _ in range(3):
            step()
        k = STEPS[name]
        times = []
        for _ in range(repeats):
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(k):
                step()
            times.append((time.perf_counter() - t0) / k)
        med = statistics.median(times)
        res.update({"global_batch": bs, "steps_per_s": round(1 / med, 2),
                    "steps_per_s_best": round(1 / min(times), 2), "ms_per_step": round(med * 1e3, 3)})
    if rank == 0:
        print("RESULT " + json.dumps(res), flush=True)
    dist.destroy_process_group()


def launch(name):
    import harness

    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={NPROC}",
           os.path.abspath(__file__), "--worker", name, str(harness.ARGS.repeats), str(harness.ARGS.threads)]
    env = dict(os.environ, OMP_NUM_THREADS=str(harness.ARGS.threads))
    # torchrun's standalone rendezvous now and then fails to start a job on this VM (a rank
    # exits during init): try again, and show the last failure if every try fails
    for attempt in range(3):
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
        out = proc.stdout
        if proc.returncode == 0:
            break
        with open(f"/tmp/ddp_bench_{name}_failure.txt", "w") as f:
            f.write(out + "\n" + proc.stderr)
        if attempt == 2:
            raise RuntimeError(f"the {name} job failed ({proc.returncode}):\n{out}\n{proc.stderr[-3000:]}")
    for line in out.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    raise RuntimeError(f"no result from the {name} job:\n{out}")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    else:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import harness

        harness.main({n: (lambda n=n: launch(n)) for n in ("ddp_mlp_big", "ddp_cnn", "ddp_allreduce")}, __doc__)
