"""Checks that PyTorch loads the optimizer / scheduler files Pyrite writes and continues on its
own trajectory (the reverse of crates/pyrite-optim/tests/optim_state_files.rs).

Make the files, then check them:
    PYRITE_OPTIM_STATE_OUT=/tmp/pyrite-optim-state \\
        cargo test -p pyrite-optim --test optim_state_files pyrite_saves
    python3 reference/check_pyrite_optim_files.py /tmp/pyrite-optim-state

For every case of gen_optim_state.py: torch.load(..., weights_only=True) of Pyrite's file; the
model, a fresh torch optimizer and scheduler of the case load the state_dicts Pyrite saved after
K steps; M more steps must reproduce PyTorch's own next parameters (1e-6) and lrs (1e-12 rel).
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_optim_state import CASES, M, make_model, train_step  # noqa: E402


def main(folder):
    failures = 0
    for name, (make_opt, make_sched) in CASES.items():
        path = os.path.join(folder, name + ".pt")
        f = torch.load(path, weights_only=True)
        model = make_model()
        model.load_state_dict(f["model_state_dict"])
        opt = make_opt(model.parameters())
        sched = make_sched(opt) if make_sched else None
        opt.load_state_dict(f["optimizer_state_dict"])
        if sched is not None:
            sched.load_state_dict(f["scheduler_state_dict"])
        worst_p, worst_lr = 0.0, 0.0
        for step in range(M):
            train_step(model, opt, sched, f["x"], f["y"])
            for p, want in zip(model.parameters(), f["next_params"][step]):
                # relative to the value (absolute below 1): f32 rounding, which RMSprop's
                # 1 / sqrt(v) amplifies, differs between the two libraries' kernels
                worst_p = max(worst_p, ((p.detach() - want).abs() / want.abs().clamp(min=1)).max().item())
            for g, want in zip(opt.param_groups, f["next_lrs"][step]):
                worst_lr = max(worst_lr, abs(g["lr"] - want) / max(abs(want), 1e-300))
        ok = worst_p <= 1e-5 and worst_lr <= 1e-12
        failures += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {name}: max param rel diff {worst_p:.2e}, max lr rel diff {worst_lr:.2e}")
    print(f"{len(CASES) - failures}/{len(CASES)} cases continue PyTorch's trajectory from Pyrite's files")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "/tmp/pyrite-optim-state")
