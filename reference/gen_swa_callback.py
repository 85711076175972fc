"""Lightning's StochasticWeightAveraging callback on two tiny f64 models, for
crates/pyrite-train/tests/swa.rs: a Linear regressor (no BatchNorm) and Linear+BatchNorm1d
(the extra forward-only epoch that recomputes the running statistics). The weights, data and
batches are fixed (no shuffling), so Pyrite's Trainer must give the same numbers.

Writes reference/data/swa_callback.json: per case, the lr at each training step, the final
parameters and buffers, and the averaged parameters. Run: python3 reference/gen_swa_callback.py
"""
import json
import os
import warnings

import torch
import pytorch_lightning as pl
from pytorch_lightning.callbacks import StochasticWeightAveraging

warnings.filterwarnings("ignore")
torch.set_default_dtype(torch.float64)
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "swa_callback.json")

N, D = 12, 3
X = torch.tensor([[((i * 7 + j * 3) % 11) / 5.0 - 1.0 for j in range(D)] for i in range(N)])
Y = (X @ torch.tensor([[0.5], [-1.0], [2.0]]) + 0.3 + 0.1 * torch.sin(torch.arange(N, dtype=torch.float64)).unsqueeze(1))
W0 = [[0.1, -0.2, 0.3]]
B0 = [0.05]


class Lit(pl.LightningModule):
    def __init__(self, bn):
        super().__init__()
        layers = [torch.nn.Linear(D, 1)]
        with torch.no_grad():
            layers[0].weight.copy_(torch.tensor(W0))
            layers[0].bias.copy_(torch.tensor(B0))
        if bn:
            layers.insert(0, torch.nn.BatchNorm1d(D))
        self.net = torch.nn.Sequential(*layers)
        self.lrs = []

    def training_step(self, batch, idx):
        self.lrs.append(self.trainer.optimizers[0].param_groups[0]["lr"])
        x, y = batch
        return torch.nn.functional.mse_loss(self.net(x), y)

    def configure_optimizers(self):
        opt = torch.optim.SGD(self.parameters(), lr=0.1, momentum=0.5)
        return {"optimizer": opt, "lr_scheduler": torch.optim.lr_scheduler.StepLR(opt, 1, gamma=0.9)}


def run(bn, start, anneal, strategy):
    model = Lit(bn)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(X, Y), batch_size=4, shuffle=False)
    swa = StochasticWeightAveraging(swa_lrs=0.02, swa_epoch_start=start, annealing_epochs=anneal,
                                    annealing_strategy=strategy)
    trainer = pl.Trainer(max_epochs=6, callbacks=[swa], logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False, accelerator="cpu")
    trainer.fit(model, loader)
    return {
        "bn": bn, "swa_epoch_start": start, "annealing_epochs": anneal, "annealing_strategy": strategy,
        "lrs": model.lrs,
        "n_averaged": int(swa.n_averaged.item()),
        "global_step": trainer.global_step,
        "state": {k: v.flatten().tolist() for k, v in model.net.state_dict().items()},
        # The average itself. With BatchNorm, Lightning's forward-only epoch still calls
        # optimizer.step at its last batch, with the previous epoch's stale gradients (it
        # skips zero_grad too), so the module ends one SGD step away from the average, against
        # the callback's own comment ("no need to perform either backward or optimizer.step").
        # Pyrite follows the comment: the module ends with the average.
        "average": {k.removeprefix("net."): v.flatten().tolist()
                    for k, v in swa._average_model.named_parameters()},
    }


cases = [run(False, 3, 2, "cos"), run(False, 0.5, 1, "linear"), run(True, 4, 2, "cos")]
with open(OUT, "w") as f:
    json.dump({"x": X.tolist(), "y": Y.tolist(), "w0": W0, "b0": B0, "cases": cases}, f, indent=1)
print("wrote", OUT)
