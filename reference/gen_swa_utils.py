"""Reference data for torch.optim.swa_utils: AveragedModel (SWA and EMA, with and without
buffers, avg_fn and multi_avg_fn) and update_bn (crates/pyrite-optim/tests/swa_utils.rs).

The model is Net below (mirrored on the Rust side): fc1 -> bn -> relu -> fc2.

Per dtype d in (float32, float64):
  {d}/step{i}/{key}   the model's state_dict after "training" step i (i = 0..STEPS-1): each step
                      adds 0.1 * randn to every parameter and runs one batch in train mode (so
                      the BatchNorm buffers move too)
  {d}/x_eval          an input for the averaged models' forward (eval mode)
  {d}/loader{j}       the batches given to update_bn
Per variant v (see VARIANTS; each averages the STEPS states with update_parameters):
  {v}/avg{i}/{key}    the AveragedModel's state_dict (n_averaged and module.*) after update i,
                      for i in CHECK
  {v}/out             averaged(x_eval) in eval mode after the last update
  {v}/bn/{key}        for variants with update_bn: the state_dict after update_bn(loader, averaged)

Run: python3 reference/gen_swa_utils.py
"""
import torch
from torch import nn
from torch.optim.swa_utils import (
    AveragedModel,
    get_ema_avg_fn,
    get_ema_multi_avg_fn,
    get_swa_avg_fn,
    get_swa_multi_avg_fn,
    update_bn,
)

from refgen import RefFile

STEPS = 20
CHECK = [0, 1, 2, 9, 19]


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 8)
        self.bn = nn.BatchNorm1d(8)
        self.act = nn.ReLU()
        self.fc2 = nn.Linear(8, 3)

    def forward(self, x):
        return self.fc2(self.act(self.bn(self.fc1(x))))


# name, dtype, kwargs, run update_bn afterwards
VARIANTS = [
    ("swa_f32", torch.float32, dict(), True),
    ("swa_f64", torch.float64, dict(), True),
    ("swa_buffers_f32", torch.float32, dict(use_buffers=True), False),
    ("swa_buffers_f64", torch.float64, dict(use_buffers=True), False),
    ("swa_multi_f32", torch.float32, dict(multi_avg_fn=get_swa_multi_avg_fn()), False),
    ("swa_avgfn_f64", torch.float64, dict(avg_fn=get_swa_avg_fn()), False),
    ("ema_f32", torch.float32, dict(multi_avg_fn=get_ema_multi_avg_fn(0.9), use_buffers=True), False),
    ("ema_f64", torch.float64, dict(multi_avg_fn=get_ema_multi_avg_fn(0.9), use_buffers=True), False),
    ("ema_nobuf_f32", torch.float32, dict(multi_avg_fn=get_ema_multi_avg_fn(0.9)), True),
    ("ema_avgfn_f64", torch.float64, dict(avg_fn=get_ema_avg_fn(0.9)), False),
]

rf = RefFile("swa_utils")
torch.manual_seed(0)
states = {}
for dt in (torch.float32, torch.float64):
    d = str(dt).replace("torch.", "")
    net = Net().to(dt)
    steps = []
    for i in range(STEPS):
        with torch.no_grad():
            for p in net.parameters():
                p.add_(0.1 * torch.randn_like(p))
        net.train()
        net(torch.randn(6, 4, dtype=dt) * 2 + 0.5)
        sd = {k: v.clone() for k, v in net.state_dict().items()}
        steps.append(sd)
        for k, v in sd.items():
            rf._put(f"{d}/step{i}/{k}", v)
    x_eval = torch.randn(5, 4, dtype=dt)
    rf._put(f"{d}/x_eval", x_eval)
    loader = [torch.randn(7, 4, dtype=dt) * 3 - 1 for _ in range(4)]
    for j, b in enumerate(loader):
        rf._put(f"{d}/loader{j}", b)
    states[dt] = (steps, x_eval, loader)

for name, dt, kw, with_bn in VARIANTS:
    steps, x_eval, loader = states[dt]
    model = Net().to(dt)
    avg = AveragedModel(model, **kw)
    for i, sd in enumerate(steps):
        model.load_state_dict(sd)
        avg.update_parameters(model)
        if i in CHECK:
            for k, v in avg.state_dict().items():
                rf._put(f"{name}/avg{i}/{k}", v.clone())
    avg.eval()
    with torch.no_grad():
        rf._put(f"{name}/out", avg(x_eval))
    if with_bn:
        avg.train(False)
        update_bn(loader, avg)
        assert avg.module.bn.momentum == 0.1 and not avg.training
        for k, v in avg.state_dict().items():
            rf._put(f"{name}/bn/{k}", v.clone())
    rf.cases.append({"name": name, "dtype": str(dt).replace("torch.", ""), "update_bn": with_bn,
                     "use_buffers": kw.get("use_buffers", False), "check": CHECK, "steps": STEPS})

# update_bn on a model whose BatchNorm has momentum=None, in train mode, with a (input, target)
# loader (PyTorch uses each batch's first element)
torch.manual_seed(1)
net = Net()
net.bn.momentum = None
with torch.no_grad():
    net.bn.running_mean.fill_(5.0)
for k, v in net.state_dict().items():
    rf._put(f"bn_none/init/{k}", v.clone())
loader = [(torch.randn(5, 4) + 1, torch.zeros(5)) for _ in range(3)]
for j, (b, _) in enumerate(loader):
    rf._put(f"bn_none/loader{j}", b)
update_bn(loader, net)
assert net.bn.momentum is None and net.training
for k, v in net.state_dict().items():
    rf._put(f"bn_none/after/{k}", v.clone())

rf.save()
