"""torch.amp.GradScaler's trajectory with injected overflows, for crates/pyrite-amp/tests/grad_scaler.rs.

A Linear(4, 2) regressor in float32 trains 14 SGD steps (momentum 0.9) under a GradScaler with
growth_interval 3 (so growth shows), clipping the unscaled gradients to norm 1.0. On some steps
the loss is multiplied by inf or nan (a gradient overflow): the scaler must skip those optimizer
steps and back off. A second run uses PyTorch's defaults (init_scale 65536, growth_interval 2000)
with a loss so large that the scaled gradients overflow until the scale has come down.

Writes reference/data/grad_scaler.json (and grad_scaler_state.pt, a checkpoint holding the
first run's scaler state): per step the scale used, whether the optimizer stepped,
the scale and growth tracker after update(), the gradient norm after unscale_, and the final
parameters and state_dict. Run: python3 reference/gen_grad_scaler.py
"""
import json
import math
import os

import torch

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "grad_scaler.json")

X = torch.tensor([[((i * 5 + j * 3) % 7) / 3.0 - 1.0 for j in range(4)] for i in range(8)])
Y = torch.tensor([[((i * 3 + j) % 5) / 2.0 - 1.0 for j in range(2)] for i in range(8)])
W0 = [[0.1, -0.2, 0.3, 0.05], [-0.1, 0.25, 0.0, 0.2]]
B0 = [0.01, -0.02]


def run(name, steps, poison, options, loss_factor=1.0, clip=1.0):
    lin = torch.nn.Linear(4, 2)
    with torch.no_grad():
        lin.weight.copy_(torch.tensor(W0))
        lin.bias.copy_(torch.tensor(B0))
    opt = torch.optim.SGD(lin.parameters(), lr=0.05, momentum=0.9)
    scaler = torch.amp.GradScaler("cpu", **options)
    trace = []
    for step in range(steps):
        opt.zero_grad()
        loss = ((lin(X) - Y) ** 2).mean() * loss_factor
        if step in poison:
            loss = loss * poison[step]
        scale_used = scaler.get_scale()
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        norm = torch.nn.utils.clip_grad_norm_(lin.parameters(), clip)
        before = lin.weight.detach().clone()
        scaler.step(opt)
        stepped = not torch.equal(before, lin.weight.detach())
        scaler.update()
        trace.append({
            "step": step,
            "scale_used": scale_used,
            "stepped": stepped,
            "scale_after": scaler.get_scale(),
            "growth_tracker": scaler.state_dict()["_growth_tracker"],
            "grad_norm": norm.item() if math.isfinite(norm.item()) else str(norm.item()),
        })
    sd = scaler.state_dict()
    return {
        "name": name,
        "options": options,
        "loss_factor": loss_factor,
        "poison": {str(k): str(v) for k, v in poison.items()},
        "trace": trace,
        "weight": lin.weight.detach().tolist(),
        "bias": lin.bias.detach().tolist(),
        "state_dict": sd,
    }


runs = [
    run("injected", 14, {2: float("inf"), 3: float("nan"), 9: float("inf")},
        {"init_scale": 1024.0, "growth_interval": 3}),
    run("defaults_overflow", 8, {}, {}, loss_factor=1e36),
    run("growth_factor_4", 10, {5: float("inf")},
        {"init_scale": 8.0, "growth_factor": 4.0, "backoff_factor": 0.25, "growth_interval": 2}),
]
# The errors PyTorch raises for misuse, verbatim.
errors = {}
lin = torch.nn.Linear(1, 1)
opt = torch.optim.SGD(lin.parameters(), lr=0.1)
s = torch.amp.GradScaler("cpu")
s.scale(lin(torch.ones(1, 1)).sum()).backward()
s.unscale_(opt)
try:
    s.unscale_(opt)
except RuntimeError as e:
    errors["unscale_twice"] = str(e)
s.step(opt)
try:
    s.unscale_(opt)
except RuntimeError as e:
    errors["unscale_after_step"] = str(e)
try:
    s.step(opt)
except RuntimeError as e:
    errors["step_twice"] = str(e)
s.update()
try:
    s.update()
except AssertionError as e:
    errors["update_without_step"] = str(e)
try:
    torch.amp.GradScaler("cpu").load_state_dict({})
except RuntimeError as e:
    errors["load_empty"] = str(e)
errors["disabled_state_dict"] = torch.amp.GradScaler("cpu", enabled=False).state_dict()
errors["disabled_get_scale"] = torch.amp.GradScaler("cpu", enabled=False).get_scale()

# A checkpoint as PyTorch users write it: the scaler's state beside the model's.
torch.save({"scaler": runs[0]["state_dict"], "step": 14},
           os.path.join(os.path.dirname(OUT), "grad_scaler_state.pt"))
with open(OUT, "w") as f:
    json.dump({"torch": torch.__version__, "runs": runs, "errors": errors}, f, indent=1)
print("wrote", OUT)
for r in runs:
    print(r["name"], [(t["scale_used"], t["stepped"], t["growth_tracker"]) for t in r["trace"]])
print(errors)
