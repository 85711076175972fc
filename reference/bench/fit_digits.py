#!/usr/bin/env python3
"""PyTorch Lightning's side of pyrite-bench's `fit_digits` workload (torch_bench.py has none).

Same command line and JSON record as torch_bench.py, so scripts/bench_compare.py pairs it with
`pyrite-bench --only fit_digits` (crates/pyrite-bench/src/fit.rs). The digits CNN of
crates/pyrite/examples/fit_digits.rs trained with `pytorch_lightning.Trainer`: the fixed split's
1437 training images split 90/10 (random_split, seed 0) into 1294 to train on, shifted by up to
a pixel (torchvision's RandomCrop(8, padding=1), written out here: torchvision is not needed)
and 143 to validate on; batches of 64, shuffled, num_workers=0; 256 for validation; Adam with
OneCycleLR(max_lr=5e-3) stepped every batch; 2 epochs; train_loss logged every step
(log_every_n_steps=50), one validation per epoch after the default sanity check,
ModelCheckpoint(monitor="val_loss", save_last=True) and a CSVLogger in a temporary folder, no
progress bar, no model summary.

- samples_per_s: training samples per second over trainer.fit (the Trainer, the module and the
  loaders are built before the clock starts);
- plain_loop_samples_per_s: the same training as a hand-written PyTorch loop (validation and
  torch.save of last.ckpt every epoch, and of the best one when val_loss improves).

The two run alternately, --repeats times each after a warm-up of each.

Usage: python3 reference/bench/fit_digits.py [--only fit_digits] [--threads 2] [--repeats 7]
The data folder is $PYRITE_BENCH_DATA, else shared/data next to the repository.
"""
import logging
import os
import shutil
import statistics
import tempfile
import time
import warnings

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset, Subset, random_split

import harness

warnings.filterwarnings("ignore")
import pytorch_lightning as pl  # noqa: E402
from pytorch_lightning.callbacks import ModelCheckpoint  # noqa: E402
from pytorch_lightning.loggers import CSVLogger  # noqa: E402

for name in ("pytorch_lightning", "lightning", "lightning_fabric", "lightning.pytorch"):
    logging.getLogger(name).setLevel(logging.ERROR)

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.environ.get("PYRITE_BENCH_DATA", os.path.join(HERE, "..", "..", "..", "shared", "data"))
EPOCHS, BATCH, LR, SEED = 2, 64, 5e-3, 0


class Digits(Dataset):
    """The fixed split's 1437 training images as [1, 8, 8] floats in [0, 1], with labels."""

    def __init__(self, transform=None):
        rows = np.loadtxt(os.path.join(DATA, "digits.csv"), delimiter=",", dtype=np.int64)
        order = np.loadtxt(os.path.join(DATA, "digits_split_seed0.txt"), dtype=np.int64)[:1437]
        self.x = torch.from_numpy(rows[order, :64].astype(np.float32) / 16.0).reshape(-1, 1, 8, 8)
        self.y = rows[order, 64].tolist()
        self.transform = transform

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        x = self.x[i]
        if self.transform is not None:
            x = self.transform(x)
        return x, self.y[i]


def random_shift(img):
    """torchvision.transforms.RandomCrop(8, padding=1) on a [1, 8, 8] tensor."""
    p = F.pad(img, (1, 1, 1, 1))
    top = int(torch.randint(0, 3, size=(1,)).item())
    left = int(torch.randint(0, 3, size=(1,)).item())
    return p[:, top : top + 8, left : left + 8]


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, padding=1)
        self.conv2 = nn.Conv2d(32, 64, 3, padding=1)
        self.drop = nn.Dropout(0.25)
        self.fc1 = nn.Linear(64 * 4 * 4, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = self.drop(torch.flatten(x, 1))
        return self.fc2(self.drop(F.relu(self.fc1(x))))


def optimizer(net, steps_per_epoch):
    opt = torch.optim.Adam(net.parameters(), lr=LR)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=LR, epochs=EPOCHS, steps_per_epoch=steps_per_epoch)
    return opt, sched


class LitDigits(pl.LightningModule):
    def __init__(self, steps_per_epoch):
        super().__init__()
        self.net = Net()
        self.steps_per_epoch = steps_per_epoch

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = F.cross_entropy(self.net(x), y)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        logits = self.net(x)
        self.log("val_loss", F.cross_entropy(logits, y))
        self.log("val_acc", (logits.argmax(1) == y).float().mean())

    def configure_optimizers(self):
        opt, sched = optimizer(self.net, self.steps_per_epoch)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}


def datasets():
    train_full = Digits(transform=random_shift)
    plain = Digits()
    tr, va = random_split(train_full, [0.9, 0.1], generator=torch.Generator().manual_seed(SEED))
    return Subset(train_full, tr.indices), Subset(plain, va.indices)


def loaders(train_set, val_set):
    g = torch.Generator().manual_seed(SEED)
    train = DataLoader(train_set, batch_size=BATCH, shuffle=True, num_workers=0, generator=g)
    val = DataLoader(val_set, batch_size=256, num_workers=0)
    return train, val


def fit_lightning(train_set, val_set, folder):
    pl.seed_everything(SEED, verbose=False)
    train, val = loaders(train_set, val_set)
    lit = LitDigits(len(train))
    trainer = pl.Trainer(
        max_epochs=EPOCHS,
        accelerator="cpu",
        devices=1,
        default_root_dir=folder,
        enable_progress_bar=False,
        enable_model_summary=False,
        logger=CSVLogger(folder),
        callbacks=[ModelCheckpoint(dirpath=os.path.join(folder, "checkpoints"), monitor="val_loss", save_last=True)],
    )
    t0 = time.perf_counter()
    trainer.fit(lit, train, val)
    t = time.perf_counter() - t0
    assert trainer.current_epoch == EPOCHS and trainer.checkpoint_callback.best_model_path
    return t


def evaluate(net, val):
    net.eval()
    loss = acc = n = 0.0
    with torch.no_grad():
        for x, y in val:
            logits = net(x)
            b = y.shape[0]
            loss += F.cross_entropy(logits, y).item() * b
            acc += (logits.argmax(1) == y).float().mean().item() * b
            n += b
    net.train()
    return loss / n, acc / n


def fit_plain(train_set, val_set, folder):
    pl.seed_everything(SEED, verbose=False)
    train, val = loaders(train_set, val_set)
    net = Net()
    opt, sched = optimizer(net, len(train))
    os.makedirs(folder, exist_ok=True)
    t0 = time.perf_counter()
    best, best_path, step = float("inf"), None, 0
    for epoch in range(EPOCHS):
        net.train()
        loss_sum = 0.0
        for x, y in train:
            loss = F.cross_entropy(net(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            loss_sum += loss.item()
            step += 1
        val_loss, val_acc = evaluate(net, val)
        ck = {
            "epoch": epoch,
            "global_step": step,
            "model_state_dict": net.state_dict(),
            "optimizer_state_dict": opt.state_dict(),
            "lr_scheduler": sched.state_dict(),
            "train_loss": loss_sum / len(train),
            "val_loss": val_loss,
            "val_acc": val_acc,
        }
        if val_loss < best:
            best = val_loss
            path = os.path.join(folder, f"epoch={epoch}-step={step}.ckpt")
            torch.save(ck, path)
            if best_path is not None:
                os.remove(best_path)
            best_path = path
        torch.save(ck, os.path.join(folder, "last.ckpt"))
    return time.perf_counter() - t0


def bench_fit_digits():
    train_set, val_set = datasets()
    n = len(train_set)
    root = tempfile.mkdtemp(prefix="torch-bench-fit-digits-")
    runs = iter(range(1 << 30))

    def fresh():
        return os.path.join(root, f"run{next(runs)}")

    fit_lightning(train_set, val_set, fresh())  # warm-up
    fit_plain(train_set, val_set, fresh())
    tt, tp, ratios = [], [], []
    for _ in range(harness.ARGS.repeats):
        a = fit_lightning(train_set, val_set, fresh())
        b = fit_plain(train_set, val_set, fresh())
        tt.append(a)
        tp.append(b)
        ratios.append(b / a)
    shutil.rmtree(root, ignore_errors=True)
    samples = EPOCHS * n
    steps = EPOCHS * -(-n // BATCH)
    t, p = statistics.median(tt), statistics.median(tp)
    return {
        "train_samples": n,
        "val_samples": len(val_set),
        "epochs": EPOCHS,
        "steps": steps,
        "fit_time_s": round(t, 4),
        "samples_per_s": round(samples / t, 1),
        "samples_per_s_best": round(samples / min(tt), 1),
        "us_per_step": round(t / steps * 1e6, 1),
        "spread": round((max(tt) - min(tt)) / t, 3),
        "plain_loop_time_s": round(p, 4),
        "plain_loop_samples_per_s": round(samples / p, 1),
        "plain_loop_samples_per_s_best": round(samples / min(tp), 1),
        "plain_loop_spread": round((max(tp) - min(tp)) / p, 3),
        "trainer_over_plain": round(statistics.median(ratios), 4),
        "optimizer": "torch.optim.Adam + OneCycleLR(max_lr=5e-3), per step",
        "lightning": pl.__version__,
    }


WORKLOADS = {"fit_digits": bench_fit_digits}


if __name__ == "__main__":
    harness.main(WORKLOADS, __doc__)
