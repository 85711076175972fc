"""Logged metrics of a real PyTorch Lightning run, as input for pyrite::train::plot's tests.

Trains a small MLP on a synthetic 4-class problem with Lightning's Trainer (CSVLogger,
LearningRateMonitor, a OneCycleLR schedule stepped per batch), then writes
reference/data/plot_run.json with:

- "series": {metric name: [[global_step, value], ...]} read back from the CSVLogger's
  metrics.csv, exactly as Lightning named and logged them (train_loss_step, train_loss_epoch,
  train_acc_epoch, val_loss, val_acc, lr-Adam, epoch);
- "confusion_matrix": torchmetrics' MulticlassConfusionMatrix on the validation set (counts)
  and "confusion_matrix_normalized" (normalize="true"), with "class_names";
- "lr_find": Lightning's Tuner.lr_find results ("lr", "loss") and the index it suggests.

Run: python3 reference/gen_plot_run.py (CPU, about a minute).
"""
import csv
import json
import math
import os
import tempfile

import pytorch_lightning as pl
import torch
import torchmetrics
from pytorch_lightning.callbacks import LearningRateMonitor
from pytorch_lightning.loggers import CSVLogger
from pytorch_lightning.tuner import Tuner
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "plot_run.json")
CLASSES = ["circle", "square", "triangle", "star"]

torch.set_num_threads(1)
pl.seed_everything(0)


def make_data(n):
    centers = torch.tensor([[2.0, 0.0], [0.0, 2.0], [-2.0, 0.0], [0.0, -2.0]])
    y = torch.randint(0, 4, (n,))
    x = centers[y] + 1.3 * torch.randn(n, 2)
    return TensorDataset(torch.cat([x, torch.randn(n, 6)], dim=1), y)


class Classifier(pl.LightningModule):
    def __init__(self, lr=3e-3, epochs=8, steps_per_epoch=32):
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 4))
        self.train_acc = torchmetrics.classification.MulticlassAccuracy(num_classes=4, average="micro")
        self.val_acc = torchmetrics.classification.MulticlassAccuracy(num_classes=4, average="micro")
        self.val_cm = torchmetrics.classification.MulticlassConfusionMatrix(num_classes=4)
        self.lr = lr

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, _):
        x, y = batch
        logits = self(x)
        loss = nn.functional.cross_entropy(logits, y)
        self.train_acc(logits, y)
        self.log("train_loss", loss, on_step=True, on_epoch=True)
        self.log("train_acc", self.train_acc, on_step=True, on_epoch=True)
        return loss

    def validation_step(self, batch, _):
        x, y = batch
        logits = self(x)
        self.val_acc(logits, y)
        self.val_cm(logits, y)
        self.log("val_loss", nn.functional.cross_entropy(logits, y))
        self.log("val_acc", self.val_acc)

    def configure_optimizers(self):
        opt = torch.optim.Adam(self.parameters(), lr=self.lr)
        sched = torch.optim.lr_scheduler.OneCycleLR(
            opt, max_lr=self.lr, epochs=self.hparams.epochs, steps_per_epoch=self.hparams.steps_per_epoch
        )
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}


def finite(v):
    return v if math.isfinite(v) else None


def main():
    train = DataLoader(make_data(1024), batch_size=32, shuffle=True)
    val = DataLoader(make_data(256), batch_size=64)
    common = dict(accelerator="cpu", enable_progress_bar=False, enable_model_summary=False)
    with tempfile.TemporaryDirectory() as tmp:
        # lr_find on a fresh model, as `Tuner(trainer).lr_find(model)` does before fitting.
        finder_model = Classifier()
        finder_trainer = pl.Trainer(default_root_dir=tmp, logger=False, **common)
        finder = Tuner(finder_trainer).lr_find(finder_model, train, val, min_lr=1e-6, max_lr=1.0, num_training=100)
        suggestion_lr = finder.suggestion()
        lr_find = {
            "lr": [float(v) for v in finder.results["lr"]],
            "loss": [finite(float(v)) for v in finder.results["loss"]],
            "suggestion": finder._optimal_idx,
            "suggested_lr": suggestion_lr,
        }

        model = Classifier(epochs=8, steps_per_epoch=len(train))
        trainer = pl.Trainer(
            max_epochs=8,
            logger=CSVLogger(tmp, name="run"),
            callbacks=[LearningRateMonitor(logging_interval="step")],
            log_every_n_steps=2,
            **common,
        )
        trainer.fit(model, train, val)
        # One more pass over the validation set for the final confusion matrix.
        model.val_cm.reset()
        trainer.validate(model, val, verbose=False)
        cm = model.val_cm.compute()

        series = {}
        with open(os.path.join(trainer.logger.log_dir, "metrics.csv")) as f:
            for row in csv.DictReader(f):
                step = int(row["step"])
                for name, value in row.items():
                    if name == "step" or value == "":
                        continue
                    series.setdefault(name, []).append([step, float(value)])

    data = {
        "pytorch_lightning_version": pl.__version__,
        "torchmetrics_version": torchmetrics.__version__,
        "series": series,
        "class_names": CLASSES,
        "confusion_matrix": cm.tolist(),
        "confusion_matrix_normalized": (cm / cm.sum(dim=1, keepdim=True)).tolist(),
        "lr_find": lr_find,
    }
    with open(OUT, "w") as f:
        json.dump(data, f)
    print(OUT, {k: len(v) for k, v in series.items()}, lr_find["suggestion"], suggestion_lr)


if __name__ == "__main__":
    main()
