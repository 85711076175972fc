"""Lightning's batch-size finder (Tuner.scale_batch_size) on a pretend model whose training
step runs out of memory above a set batch size, for crates/pyrite-train/tests/batch_size_finder.rs.

Each case records the batch sizes Lightning's trials ran (in order, one entry per trial) and the
size it returned, for power and binsearch modes and several limits. The step raises the error
Lightning recognises as CUDA's out-of-memory (a RuntimeError with "CUDA out of memory"), so the
search runs on a CPU. The dataset is larger than every size tried.

Writes reference/data/batch_size_finder.json. Run: python3 reference/gen_batch_size_finder.py
"""
import json
import logging
import os
import warnings

import torch
import pytorch_lightning as pl
from pytorch_lightning.tuner import Tuner
from torch.utils.data import DataLoader, TensorDataset

warnings.filterwarnings("ignore")
logging.getLogger("pytorch_lightning").setLevel(logging.ERROR)
logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "batch_size_finder.json")
N = 20000


class Pretend(pl.LightningModule):
    def __init__(self, fits_up_to, init_val):
        super().__init__()
        self.fits_up_to = fits_up_to
        self.batch_size = init_val
        self.layer = torch.nn.Linear(1, 1)
        self.steps = []

    def train_dataloader(self):
        return DataLoader(TensorDataset(torch.zeros(N, 1)), batch_size=self.batch_size)

    def training_step(self, batch, idx):
        bs = batch[0].shape[0]
        self.steps.append(bs)
        if bs > self.fits_up_to:
            raise RuntimeError("CUDA out of memory. (pretend)")
        return self.layer(batch[0]).sum()

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.0)


def trials(steps, steps_per_trial):
    """The steps grouped into trials: a trial ends after steps_per_trial steps or at a failure."""
    out, run = [], 0
    for i, s in enumerate(steps):
        if i > 0 and s == steps[i - 1] and run < steps_per_trial:
            run += 1
        else:
            out.append(s)
            run = 1
    return out


def case(mode, fits_up_to, init_val=2, max_trials=25, steps_per_trial=3, margin=None, max_val=None):
    model = Pretend(fits_up_to, init_val)
    trainer = pl.Trainer(
        max_epochs=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        accelerator="cpu",
    )
    kwargs = dict(mode=mode, init_val=init_val, max_trials=max_trials, steps_per_trial=steps_per_trial)
    if margin is not None:
        kwargs["margin"] = margin
    if max_val is not None:
        kwargs["max_val"] = max_val
    found = Tuner(trainer).scale_batch_size(model, **kwargs)
    # Steps of one trial at one size follow each other; a failed step ends its trial.
    tried, last, count = [], None, 0
    for s in model.steps:
        if s == last and count < steps_per_trial and s <= fits_up_to:
            count += 1
            continue
        tried.append(s)
        last, count = s, 1
    rec = dict(kwargs, fits_up_to=fits_up_to, tried=tried, found=found)
    print(rec)
    return rec


cases = []
for mode in ["power", "binsearch"]:
    for fits in [1, 2, 3, 5, 64, 100, 127, 128, 1000, 5000]:
        cases.append(case(mode, fits))
cases.append(case("power", 40, init_val=3))
cases.append(case("binsearch", 40, init_val=3))
cases.append(case("binsearch", 100, margin=0.0))
cases.append(case("power", 100000, max_trials=6))
cases.append(case("binsearch", 100, max_trials=6))
cases.append(case("binsearch", 100000, max_val=1000))
cases.append(case("power", 100000, max_val=1000))

with open(OUT, "w") as f:
    json.dump({"lightning": pl.__version__, "torch": torch.__version__, "cases": cases}, f, indent=1)
print("wrote", OUT)
