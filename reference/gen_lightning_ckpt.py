"""Writes a realistic PyTorch Lightning checkpoint fixture without Lightning installed:
reference/data/lightning/example.ckpt holds the dict Lightning's Trainer saves (built by hand
with torch alone): epoch, global_step, pytorch-lightning_version, state_dict with the
LightningModule's "model." prefixes, loops, callbacks (ModelCheckpoint, EarlyStopping and a
user callback whose state holds an instance of a user class, __main__.Foo), optimizer_states,
lr_schedulers, hparams_name and hyper_parameters as an AttributeDict (a dict subclass pickled
under Lightning's module name, lightning_fabric.utilities.data.AttributeDict).

torch.load(weights_only=True) refuses the file because of those two classes; Pyrite's
load_lightning_checkpoint loads the rest and reports them by key
(crates/pyrite-serialization/tests/lightning_ckpt.rs). Run: python3 reference/gen_lightning_ckpt.py
"""
import collections
import os
import sys
import types

import torch

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "lightning")

# A stand-in for Lightning's AttributeDict, pickled under Lightning's own module path.
_mod = types.ModuleType("lightning_fabric.utilities.data")


class AttributeDict(dict):
    def __getattr__(self, key):
        return self[key]


AttributeDict.__module__ = "lightning_fabric.utilities.data"
_mod.AttributeDict = AttributeDict
for name in ["lightning_fabric", "lightning_fabric.utilities", "lightning_fabric.utilities.data"]:
    sys.modules.setdefault(name, types.ModuleType(name))
sys.modules["lightning_fabric.utilities.data"] = _mod


class Foo:
    """A user class in a callback's state (pickled as __main__.Foo)."""

    def __init__(self):
        self.threshold = 0.5
        self.names = ["a", "b"]


def main():
    os.makedirs(OUT, exist_ok=True)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Tanh(), torch.nn.Linear(3, 2))
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    x, y = torch.randn(8, 4), torch.randn(8, 2)
    for _ in range(3):
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
        sched.step()
    state_dict = collections.OrderedDict((f"model.{k}", v) for k, v in model.state_dict().items())
    progress = {"ready": 5, "started": 5, "processed": 5, "completed": 5}
    score = torch.tensor(0.25)
    ckpt = {
        "epoch": 4,
        "global_step": 500,
        "pytorch-lightning_version": "2.5.1",
        "state_dict": state_dict,
        "loops": {
            "fit_loop": {
                "state_dict": {},
                "epoch_loop.state_dict": {"_batches_that_stepped": 500},
                "epoch_progress": {"total": dict(progress), "current": dict(progress)},
            },
            "validate_loop": {"state_dict": {}},
        },
        "callbacks": {
            "ModelCheckpoint{'monitor': 'val_loss', 'mode': 'min', 'every_n_train_steps': 0, "
            "'every_n_epochs': 1, 'train_time_interval': None}": {
                "monitor": "val_loss",
                "best_model_score": score,
                "best_model_path": "/ckpts/epoch=4-step=500.ckpt",
                "current_score": score,
                "dirpath": "/ckpts",
                "best_k_models": {"/ckpts/epoch=4-step=500.ckpt": score},
                "kth_best_model_path": "/ckpts/epoch=4-step=500.ckpt",
                "kth_value": score,
                "last_model_path": "",
            },
            "EarlyStopping{'monitor': 'val_loss', 'mode': 'min'}": {
                "wait_count": 0,
                "stopped_epoch": 0,
                "best_score": score,
                "patience": 3,
            },
            "MyCallback": {"calls": 7, "config": Foo()},
        },
        "optimizer_states": [opt.state_dict()],
        "lr_schedulers": [sched.state_dict()],
        "hparams_name": "kwargs",
        "hyper_parameters": AttributeDict(lr=0.01, hidden=3, activation="tanh"),
    }
    path = os.path.join(OUT, "example.ckpt")
    torch.save(ckpt, path)
    try:
        torch.load(path, weights_only=True)
        print("unexpected: weights_only=True loaded it")
    except Exception as e:  # noqa: BLE001
        print("weights_only=True refuses it:", str(e).splitlines()[0][:120])
    print(f"{path}: {os.path.getsize(path)} bytes")


if __name__ == "__main__":
    main()
