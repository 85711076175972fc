#!/usr/bin/env python3
"""Ray Tune's side of crates/pyrite/examples/tune_digits.rs: BOHB on the digits CNN, with Ray Tune's
own API (TuneBOHB + HyperBandForBOHB) and PyTorch.

- Data: the fixed split's 1437 training images (digits.csv pixel counts / 16, as
  crates/pyrite-vision/src/datasets/digits.rs reads them) split 90/10 by random_split (seeded by
  --seed) into 1294 to train on, shifted by up to a pixel (torchvision's RandomCrop(8,
  padding=1), written out here: torchvision is not needed), and 143 to validate on (unshifted);
  the 360 test images for the final accuracy.
- Model: crates/pyrite/examples/common/digits_cnn.rs `Net::with_width(width)`: conv(1->w, 3,
  pad 1) relu, conv(w->2w, 3, pad 1) relu, max-pool 2, dropout 0.25, linear(2w*16 -> 128) relu,
  dropout 0.25, linear(128 -> 10). torch.optim.Adam(lr, weight_decay) (L2 decay added to the
  gradient, as pyrite's Adam with decoupled_weight_decay=false), the lr set each epoch e to
  lr * (1 + cos(pi * e / max_epochs)) / 2, cross entropy, shuffled batches of batch_size, one
  thread per trial. Validation: the mean (summed) cross entropy and accuracy over the 143.
- Space: lr loguniform(1e-4, 3e-2), weight_decay loguniform(1e-6, 1e-2), batch_size
  choice([32, 64, 128]), width choice([8, 16, 32]).
- Tuning: TuneBOHB(metric="val_loss", mode="min", seed) with HyperBandForBOHB(max_t=max_epochs,
  reduction_factor 3) on training_iteration (one epoch), --samples trials, --concurrency at once,
  {"cpu": 1} each, ray.init(num_cpus=concurrency). The function trainable reports
  {"val_loss", "val_acc"} with a checkpoint (model, optimizer, epoch) every epoch and resumes
  from tune.get_checkpoint() (HyperBandForBOHB pauses trials between rungs); num_to_keep=1.
- Then the best result by val_loss (min, last reported) is loaded from its checkpoint and tested.

Ray's session folder and the experiment's results live in a temporary folder under /tmp, removed
at the end. Model initialisation in the trials is not seeded (Ray's trials are not reproducible
anyway: the order of results depends on timing).

Usage: python3 reference/bench/tune_digits.py [--samples 98] [--max-epochs 27] [--concurrency 2]
    [--seed 0]
The data folder is $PYRITE_BENCH_DATA, else shared/data next to the repository. Prints one JSON
record: {"bench": "tune_digits", "results": {"wall_s": data + ray.init + fit + test, "fit_s":
tuner.fit() only, "test_acc": percent, "trials", "epochs": training iterations over all trials,
"best_config", "best_val_loss", "best_epochs", "errors": trials that failed, versions}}.
"""
import argparse
import json
import logging
import math
import os
import shutil
import sys
import tempfile
import time
import warnings

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset, TensorDataset, random_split

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.environ.get("PYRITE_BENCH_DATA", os.path.join(HERE, "..", "..", "..", "shared", "data"))
N_TRAIN = 1437


def load_digits():
    """(train x, train y, test x, test y): [N, 1, 8, 8] floats in [0, 1] and int64 labels."""
    rows = np.loadtxt(os.path.join(DATA, "digits.csv"), delimiter=",", dtype=np.int64)
    order = np.loadtxt(os.path.join(DATA, "digits_split_seed0.txt"), dtype=np.int64)

    def part(idx):
        x = torch.from_numpy(rows[idx, :64].astype(np.float32) / 16.0).reshape(-1, 1, 8, 8)
        return x, torch.from_numpy(rows[idx, 64].copy())

    return (*part(order[:N_TRAIN]), *part(order[N_TRAIN:]))


def random_shift(img):
    """torchvision.transforms.RandomCrop(8, padding=1) on a [1, 8, 8] tensor."""
    p = F.pad(img, (1, 1, 1, 1))
    top = int(torch.randint(0, 3, size=(1,)).item())
    left = int(torch.randint(0, 3, size=(1,)).item())
    return p[:, top : top + 8, left : left + 8]


class Shifted(Dataset):
    """Images and labels, each image shifted by random_shift when read."""

    def __init__(self, x, y):
        self.x, self.y = x, y

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return random_shift(self.x[i]), self.y[i]


class Net(nn.Module):
    """digits_cnn.rs `Net::with_width(width)`."""

    def __init__(self, width):
        super().__init__()
        self.conv1 = nn.Conv2d(1, width, 3, padding=1)
        self.conv2 = nn.Conv2d(width, 2 * width, 3, padding=1)
        self.drop = nn.Dropout(0.25)
        self.fc1 = nn.Linear(2 * width * 4 * 4, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = self.drop(torch.flatten(x, 1))
        return self.fc2(self.drop(F.relu(self.fc1(x))))


def evaluate(net, loader):
    """Mean cross entropy and accuracy (a fraction) over a loader, as digits_cnn.rs `evaluate`."""
    net.eval()
    loss, correct, n = 0.0, 0, 0
    with torch.no_grad():
        for x, y in loader:
            logits = net(x)
            loss += F.cross_entropy(logits, y, reduction="sum").item()
            correct += int((logits.argmax(1) == y).sum())
            n += y.shape[0]
    return loss / n, correct / n


def train_digits(config, data, max_epochs):
    """One trial: train epoch by epoch, report val_loss / val_acc with a checkpoint after each;
    resume from the checkpoint when Ray restores a paused trial."""
    from ray import tune

    torch.set_num_threads(1)
    width, batch_size, base_lr = int(config["width"]), int(config["batch_size"]), float(config["lr"])
    net = Net(width)
    opt = torch.optim.Adam(net.parameters(), lr=base_lr, weight_decay=float(config["weight_decay"]))
    epoch = 0
    ck = tune.get_checkpoint()
    if ck is not None:
        with ck.as_directory() as d:
            state = torch.load(os.path.join(d, "checkpoint.pt"), weights_only=True)
        net.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        epoch = int(state["epoch"])
    train = DataLoader(
        Shifted(data["train_x"], data["train_y"]),
        batch_size=batch_size,
        shuffle=True,
        generator=torch.Generator().manual_seed(1000 + epoch),
    )
    val = DataLoader(TensorDataset(data["val_x"], data["val_y"]), batch_size=256)
    # HyperBandForBOHB decides how far a trial goes (it pauses or stops it after a report); the
    # bound is only a guard. The cosine runs over the largest budget, by epoch.
    while epoch < max_epochs:
        for g in opt.param_groups:
            g["lr"] = base_lr * 0.5 * (1.0 + math.cos(math.pi * epoch / max_epochs))
        net.train()
        for x, y in train:
            opt.zero_grad()
            F.cross_entropy(net(x), y).backward()
            opt.step()
        epoch += 1
        val_loss, val_acc = evaluate(net, val)
        with tempfile.TemporaryDirectory() as d:
            torch.save(
                {"model": net.state_dict(), "optimizer": opt.state_dict(), "epoch": epoch},
                os.path.join(d, "checkpoint.pt"),
            )
            tune.report({"val_loss": val_loss, "val_acc": val_acc}, checkpoint=tune.Checkpoint.from_directory(d))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--samples", type=int, default=98)
    p.add_argument("--max-epochs", type=int, default=27)
    p.add_argument("--concurrency", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()

    warnings.filterwarnings("ignore", category=FutureWarning)  # pandas/statsmodels in hpbandster's KDE
    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")  # the legacy reporter honours verbose=0
    import ray
    from ray import tune
    from ray.tune.schedulers import HyperBandForBOHB
    from ray.tune.search.bohb import TuneBOHB

    tmp = tempfile.mkdtemp(prefix="tune_digits_", dir="/tmp")
    try:
        start = time.perf_counter()
        train_x, train_y, test_x, test_y = load_digits()
        tr, va = random_split(range(N_TRAIN), [0.9, 0.1], generator=torch.Generator().manual_seed(a.seed))
        data = {
            "train_x": train_x[tr.indices],
            "train_y": train_y[tr.indices],
            "val_x": train_x[va.indices],
            "val_y": train_y[va.indices],
        }
        ray.init(
            num_cpus=a.concurrency,
            include_dashboard=False,
            logging_level=logging.ERROR,
            log_to_driver=False,
            _temp_dir=os.path.join(tmp, "ray"),
        )
        space = {
            "lr": tune.loguniform(1e-4, 3e-2),
            "weight_decay": tune.loguniform(1e-6, 1e-2),
            "batch_size": tune.choice([32, 64, 128]),
            "width": tune.choice([8, 16, 32]),
        }
        trainable = tune.with_resources(
            tune.with_parameters(train_digits, data=data, max_epochs=a.max_epochs), {"cpu": 1}
        )
        tuner = tune.Tuner(
            trainable,
            param_space=space,
            tune_config=tune.TuneConfig(
                num_samples=a.samples,
                max_concurrent_trials=a.concurrency,
                search_alg=TuneBOHB(metric="val_loss", mode="min", seed=a.seed),
                scheduler=HyperBandForBOHB(
                    time_attr="training_iteration", metric="val_loss", mode="min", max_t=a.max_epochs
                ),
            ),
            run_config=tune.RunConfig(
                name="bohb",
                storage_path=os.path.join(tmp, "results"),
                checkpoint_config=tune.CheckpointConfig(num_to_keep=1),
                verbose=0,
            ),
        )
        t0 = time.perf_counter()
        results = tuner.fit()
        fit_s = time.perf_counter() - t0

        best = results.get_best_result(metric="val_loss", mode="min", scope="last")
        with best.checkpoint.as_directory() as d:
            state = torch.load(os.path.join(d, "checkpoint.pt"), weights_only=True)
        net = Net(int(best.config["width"]))
        net.load_state_dict(state["model"])
        _, test_acc = evaluate(net, DataLoader(TensorDataset(test_x, test_y), batch_size=256))
        wall_s = time.perf_counter() - start

        epochs = sum(int(r.metrics.get("training_iteration", 0)) for r in results if r.metrics)
        cfg = {k: (float(v) if k in ("lr", "weight_decay") else int(v)) for k, v in best.config.items()}
        record = {
            "bench": "tune_digits",
            "results": {
                "wall_s": round(wall_s, 2),
                "fit_s": round(fit_s, 2),
                "test_acc": round(100.0 * test_acc, 2),
                "trials": len(results),
                "epochs": epochs,
                "best_config": cfg,
                "best_val_loss": round(float(best.metrics["val_loss"]), 5),
                "best_epochs": int(best.metrics["training_iteration"]),
                "errors": results.num_errors,
                "samples": a.samples,
                "max_epochs": a.max_epochs,
                "concurrency": a.concurrency,
                "seed": a.seed,
                "ray": ray.__version__,
                "torch": torch.__version__,
            },
        }
        if results.num_errors:
            print(f"tune_digits: {results.num_errors} trials failed", file=sys.stderr)
    finally:
        if ray.is_initialized():
            ray.shutdown()
        shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps(record))


if __name__ == "__main__":
    main()
