"""Records the order in which Lightning's Trainer calls callback and LightningModule hooks, for
crates/pyrite-train/tests/hook_order.rs, which runs the same configurations through Pyrite's
Trainer and expects the same sequence.

Callback hooks are recorded as "name" (with the batch index for batch hooks), module hooks as
"module.name". Only the hooks Pyrite has are recorded. Writes reference/data/hook_order.json.
Run: python3 reference/gen_hook_order.py
"""
import json
import os
import warnings

import torch
import pytorch_lightning as pl

warnings.filterwarnings("ignore")
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "hook_order.json")

CALLBACK_HOOKS = [
    "setup", "teardown", "on_fit_start", "on_fit_end", "on_sanity_check_start", "on_sanity_check_end",
    "on_train_start", "on_train_end", "on_train_epoch_start", "on_train_epoch_end",
    "on_validation_start", "on_validation_end", "on_validation_epoch_start", "on_validation_epoch_end",
    "on_test_start", "on_test_end", "on_test_epoch_start", "on_test_epoch_end",
    "on_before_zero_grad", "on_before_backward", "on_after_backward", "on_before_optimizer_step",
]
BATCH_HOOKS = ["on_train_batch_start", "on_train_batch_end", "on_validation_batch_start",
               "on_validation_batch_end", "on_test_batch_start", "on_test_batch_end"]
MODULE_HOOKS = [
    "on_fit_start", "on_fit_end", "on_train_start", "on_train_end", "on_train_epoch_start",
    "on_train_epoch_end", "on_validation_epoch_start", "on_validation_epoch_end",
    "on_test_epoch_start", "on_test_epoch_end", "on_before_zero_grad", "on_before_backward",
    "on_after_backward", "on_before_optimizer_step",
]
EVENTS = []


def recorder(name, prefix, batch=False):
    def hook(self, *args, **kwargs):
        if batch:
            idx = kwargs.get("batch_idx", args[-1])
            EVENTS.append(f"{prefix}{name}({idx})")
        else:
            EVENTS.append(f"{prefix}{name}")
        base = getattr(super(type(self), self), name, None)
        if base is not None and prefix:
            return base(*args, **kwargs)
    return hook


class Recorder(pl.Callback):
    pass


for h in CALLBACK_HOOKS:
    setattr(Recorder, h, recorder(h, ""))
for h in BATCH_HOOKS:
    setattr(Recorder, h, recorder(h, "", batch=True))


class Lit(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Linear(4, 2)

    def training_step(self, batch, idx):
        EVENTS.append(f"module.training_step({idx})")
        x, y = batch
        return torch.nn.functional.cross_entropy(self.net(x), y)

    def validation_step(self, batch, idx):
        EVENTS.append(f"module.validation_step({idx})")
        x, y = batch
        self.log("val_loss", torch.nn.functional.cross_entropy(self.net(x), y))

    def test_step(self, batch, idx):
        EVENTS.append(f"module.test_step({idx})")

    def configure_optimizers(self):
        EVENTS.append("module.configure_optimizers")
        return torch.optim.SGD(self.parameters(), lr=0.1)


for h in MODULE_HOOKS:
    setattr(Lit, h, recorder(h, "module."))
for h in ["on_train_batch_start", "on_train_batch_end"]:
    setattr(Lit, h, recorder(h, "module.", batch=True))

torch.manual_seed(0)
X, Y = torch.randn(12, 4), torch.randint(0, 2, (12,))


def loader(n):
    return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(X[:n], Y[:n]), batch_size=4)


# Each configuration: Trainer options, the train/val sample counts, and whether to test after.
CONFIGS = [
    {"name": "one_epoch", "max_epochs": 1, "num_sanity_val_steps": 1, "train": 8, "val": 4, "test": 0},
    {"name": "accumulate_and_mid_epoch_validation", "max_epochs": 2, "num_sanity_val_steps": 0,
     "accumulate_grad_batches": 2, "val_check_interval": 2, "train": 12, "val": 8, "test": 0},
    {"name": "fit_then_test", "max_epochs": 1, "num_sanity_val_steps": 2, "train": 4, "val": 8, "test": 8},
]
out = []
for cfg in CONFIGS:
    EVENTS.clear()
    opts = {k: v for k, v in cfg.items() if k not in ("name", "train", "val", "test")}
    trainer = pl.Trainer(callbacks=[Recorder()], logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False, accelerator="cpu", **opts)
    model = Lit()
    trainer.fit(model, loader(cfg["train"]), loader(cfg["val"]))
    if cfg["test"]:
        trainer.test(model, loader(cfg["test"]), verbose=False)
    out.append({**cfg, "events": list(EVENTS)})
with open(OUT, "w") as f:
    json.dump({"lightning": pl.__version__, "configs": out}, f, indent=1)
print("wrote", OUT)
