"""Writes optimizer / LR-scheduler state fixtures (.pt) with real torch.optim into
reference/data/optim_state/.

For each case a tiny model (Linear(4, 3) -> Tanh -> Linear(3, 2), float32, seeded) is trained on
fixed data with MSE loss for K steps with one optimizer and, for most cases, one LR scheduler
(optimizer.step() then scheduler.step(), or scheduler.step(loss) for ReduceLROnPlateau). Then
<case>.pt holds, saved with torch.save:

  initial_model         the model's state_dict before training
  x, y                  the training batch (the same every step)
  model_state_dict      after K steps
  optimizer_state_dict  after K steps (what optimizer.state_dict() returns)
  scheduler_state_dict  after K steps (absent without a scheduler)
  next_params           M lists: the model's parameters after each of the next M steps
  next_lrs              M lists: each group's lr after each of the next M steps

The Rust tests (crates/pyrite-optim/tests/optim_state_files.rs) load the K-step states into
Pyrite's optimizer and scheduler, continue M steps and compare with next_params / next_lrs; and
train K steps from initial_model themselves and compare the state_dicts they save with these,
structurally. reference/check_pyrite_optim_files.py does the reverse with files Pyrite writes.
CI needs no Python. Run: python3 reference/gen_optim_state.py
"""
import os
from collections import OrderedDict

import torch
from torch.optim import lr_scheduler as L

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "optim_state")
K = 3
M = 4

# name -> (optimizer factory, scheduler factory or None). The Rust test builds the same pairs.
CASES = {
    "sgd_momentum_steplr": (
        lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01),
        lambda o: L.StepLR(o, step_size=2, gamma=0.5),
    ),
    "sgd_plain_multisteplr": (
        lambda p: torch.optim.SGD(p, lr=0.1),
        lambda o: L.MultiStepLR(o, milestones=[2, 4, 4], gamma=0.5),
    ),
    "sgd_dampening_constantlr": (
        lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.5, dampening=0.1),
        lambda o: L.ConstantLR(o, factor=0.5, total_iters=4),
    ),
    "adam_exponentiallr": (
        lambda p: torch.optim.Adam(p, lr=0.01),
        lambda o: L.ExponentialLR(o, gamma=0.9),
    ),
    "adam_amsgrad_cosine": (
        lambda p: torch.optim.Adam(p, lr=0.01, betas=(0.8, 0.99), amsgrad=True, weight_decay=0.1),
        lambda o: L.CosineAnnealingLR(o, T_max=10, eta_min=0.001),
    ),
    "adamw_linearlr": (
        lambda p: torch.optim.AdamW(p, lr=0.01),
        lambda o: L.LinearLR(o, start_factor=0.5, end_factor=1.0, total_iters=4),
    ),
    "rmsprop_onecycle": (
        lambda p: torch.optim.RMSprop(p, lr=0.01, momentum=0.9, centered=True),
        lambda o: L.OneCycleLR(o, max_lr=0.05, total_steps=20),
    ),
    "rmsprop_plain_polynomial": (
        lambda p: torch.optim.RMSprop(p, lr=0.01),
        lambda o: L.PolynomialLR(o, total_iters=5, power=2.0),
    ),
    "adagrad_plateau": (
        lambda p: torch.optim.Adagrad(p, lr=0.1),
        lambda o: L.ReduceLROnPlateau(o, factor=0.5, patience=0),
    ),
    "adadelta": (lambda p: torch.optim.Adadelta(p, lr=1.0), None),
    "adamax": (lambda p: torch.optim.Adamax(p, lr=0.01), None),
    "nadam": (lambda p: torch.optim.NAdam(p, lr=0.01), None),
    "radam": (lambda p: torch.optim.RAdam(p, lr=0.01), None),
    "asgd": (lambda p: torch.optim.ASGD(p, lr=0.01), None),
    "rprop": (lambda p: torch.optim.Rprop(p, lr=0.01), None),
}


def make_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Tanh(), torch.nn.Linear(3, 2))


def data():
    g = torch.Generator().manual_seed(1)
    return torch.randn(8, 4, generator=g), torch.randn(8, 2, generator=g)


def train_step(model, opt, sched, x, y):
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    if sched is not None:
        if isinstance(sched, L.ReduceLROnPlateau):
            sched.step(loss.item())
        else:
            sched.step()


def snapshot(model):
    return [p.detach().clone() for p in model.parameters()]


def main():
    os.makedirs(OUT, exist_ok=True)
    x, y = data()
    for name, (make_opt, make_sched) in CASES.items():
        model = make_model()
        initial = {k: v.clone() for k, v in model.state_dict().items()}
        opt = make_opt(model.parameters())
        sched = make_sched(opt) if make_sched else None
        for _ in range(K):
            train_step(model, opt, sched, x, y)
        out = {
            "initial_model": initial,
            "x": x,
            "y": y,
            # an OrderedDict, as model.state_dict() returns, with its tensors copied
            "model_state_dict": OrderedDict((k, v.clone()) for k, v in model.state_dict().items()),
        }
        # torch.save writes the live state; the next steps below mutate it in place, so save now.
        out["optimizer_state_dict"] = opt.state_dict()
        if sched is not None:
            out["scheduler_state_dict"] = sched.state_dict()
        path = os.path.join(OUT, name + ".pt")
        tmp = {"next_params": [], "next_lrs": []}
        torch.save(out, path)
        for _ in range(M):
            train_step(model, opt, sched, x, y)
            tmp["next_params"].append(snapshot(model))
            tmp["next_lrs"].append([g["lr"] for g in opt.param_groups])
        out = torch.load(path, weights_only=True)
        out.update(tmp)
        torch.save(out, path)
        print(f"{name}: {os.path.getsize(path)} bytes")


if __name__ == "__main__":
    main()
