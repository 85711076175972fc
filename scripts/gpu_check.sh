#!/usr/bin/env bash
# The CUDA backend on a real GPU, in one prepared run (a few minutes):
#   1. builds with `--features cuda` (nothing CUDA is needed to build: the driver, NVRTC and
#      cuBLAS are opened at run time);
#   2. runs the CUDA test suites on the GPU instead of the emulated device
#      (PYRITE_CUDA_TEST_ON_GPU=1): every op family against the CPU, gradients, memory and
#      out-of-memory, indexing, an MLP trained with SGD and Adam; every kernel compiled by NVRTC;
#   3. runs the GPU benchmark, and PyTorch's side of it when this machine's torch sees a GPU,
#      and prints Pyrite / PyTorch per metric.
# Usage: scripts/gpu_check.sh [--no-bench]. Exit status: that of the tests.
set -uo pipefail
cd "$(dirname "$0")/.."
export CARGO_INCREMENTAL=0 PYRITE_CUDA_TEST_ON_GPU=1 PYRITE_REQUIRE_NVRTC=1
# NVRTC and cuBLAS from the CUDA toolkit, or from the pip wheels (nvidia-*-cu12) if present.
for d in /usr/local/cuda/lib64 $(python3 -c 'import nvidia, os; p = list(nvidia.__path__)[0]; print(" ".join(os.path.join(p, x, "lib") for x in os.listdir(p)))' 2>/dev/null); do
  [ -d "$d" ] && export LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo "nvidia-smi: not found"

echo "== build (--features cuda)"
cargo build --release -p pyrite --features cuda --example gpu_bench || exit 1

echo "== tests on the GPU"
status=0
cargo test --release -p pyrite-cuda-runtime -p pyrite-cuda --test kernels_compile --test tensors --test no_driver 2>&1 | tail -n 40 || status=1
cargo test --release -p pyrite --test cuda_training --test cuda_autocast --test cuda_trainer 2>&1 | tail -n 20 || status=1

if [ "${1:-}" != "--no-bench" ]; then
  echo "== benchmark (cuda:0)"
  ours=$(target/release/examples/gpu_bench --repeats 5) && echo "pyrite:  $ours"
  if python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    theirs=$(python3 reference/bench/gpu.py --repeats 5 | python3 -c 'import json, sys; r = json.load(sys.stdin); r = r[0] if isinstance(r, list) else r; print(json.dumps(r.get("results", r).get("gpu", r)))')
    echo "pytorch: $theirs"
    python3 - "$ours" "$theirs" <<'PY'
import json, sys
a, b = json.loads(sys.argv[1]), json.loads(sys.argv[2])
for k in a:
    if k in b and isinstance(a[k], (int, float)):
        lower_better = k.endswith("_us") or k.endswith("_ms")
        ratio = (b[k] / a[k]) if lower_better else (a[k] / b[k])
        print(f"{k:22s} pyrite {a[k]:10.3f}  pytorch {b[k]:10.3f}  speedup {ratio:5.2f}x")
PY
  else
    echo "pytorch: no CUDA-enabled torch on this machine; only Pyrite's figures above"
  fi
fi
exit $status
