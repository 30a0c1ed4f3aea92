"""A small classifier trained with PyTorch Lightning, written for GPUs: ``Trainer(accelerator="gpu")``.

``python lightning_fit.py OUT_DIR [--accelerator gpu|cpu] [--precision P] [--strategy S] [--devices N]``.
Each rank writes ``OUT_DIR/rank<N>.json``: its losses step by step, its trained weights, the device its
parameters were on, the strategy's root device and the accelerator's class, what autocast was doing inside
``forward`` (enabled, dtype, the dtypes a linear layer and a log-softmax produced), and at each epoch's end what
it logged: values synced across ranks with ``sync_dist=True`` (means, a sum of integers) and torchmetrics
metrics, in training and validation.
"""

import argparse
import json
import os

import pytorch_lightning as pl
import torch
import torchmetrics
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Classifier(pl.LightningModule):
    def __init__(self, out: str) -> None:
        super().__init__()
        self.out = out
        self.body = nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 4))
        self.losses: list[float] = []
        self.autocast: dict = {}
        self.train_accuracy = torchmetrics.classification.MulticlassAccuracy(num_classes=4)
        self.val_accuracy = torchmetrics.classification.MulticlassAccuracy(num_classes=4)
        self.val_error = torchmetrics.MeanSquaredError()
        self.logged: list[dict] = []

    def forward(self, x):
        logits = self.body(x)
        scores = torch.log_softmax(logits, dim=-1)
        if not self.autocast:
            kind = self.device.type
            self.autocast = {"enabled": torch.is_autocast_enabled(kind), "dtype": str(torch.get_autocast_dtype(kind)),
                             "linear": str(logits.dtype), "log_softmax": str(scores.dtype)}
        return scores

    def training_step(self, batch, batch_idx):
        x, y = batch
        scores = self(x)
        loss = nn.functional.nll_loss(scores, y)
        self.losses.append(loss.item())
        self.log("train_loss", loss, on_step=False, on_epoch=True, sync_dist=True)
        self.train_accuracy(scores.argmax(-1), y)
        self.log("train_accuracy", self.train_accuracy, on_step=False, on_epoch=True)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        scores = self(x)
        self.log("val_loss", nn.functional.nll_loss(scores, y), sync_dist=True)
        self.log("val_seen", torch.tensor(float(len(y)), device=self.device), reduce_fx="sum", sync_dist=True)
        self.val_accuracy(scores.argmax(-1), y)
        self.val_error(scores.exp()[:, 0], (y == 0).float())
        self.log_dict({"val_accuracy": self.val_accuracy, "val_error": self.val_error})

    def on_train_epoch_end(self) -> None:
        self.logged.append({k: v.item() for k, v in sorted(self.trainer.callback_metrics.items())})

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.5)

    def on_train_end(self) -> None:
        weights = {k: v.detach().float().cpu().flatten().tolist() for k, v in self.state_dict().items()}
        record = {"rank": self.global_rank, "world_size": self.trainer.world_size, "on": str(self.device),
                  "root_device": str(self.trainer.strategy.root_device),
                  "accelerator": type(self.trainer.accelerator).__name__,
                  "cuda_current": torch.cuda.current_device() if self.device.type == "cuda" else None,
                  "losses": self.losses, "weights": weights, "autocast": self.autocast, "logged": self.logged}
        with open(os.path.join(self.out, f"rank{self.global_rank}.json"), "w") as out:
            json.dump(record, out)


def data(seed: int = 1, size: int = 64) -> DataLoader:
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(size, 8, generator=generator)
    y = (x[:, :4].sum(-1) > 0).long() * 2 + (x[:, 4:].sum(-1) > 0).long()
    return DataLoader(TensorDataset(x, y), batch_size=8)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--accelerator", default="gpu")
    parser.add_argument("--precision", default="32-true")
    parser.add_argument("--strategy", default="auto")
    parser.add_argument("--devices", type=int, default=1)
    args = parser.parse_args()
    pl.seed_everything(0, verbose=False)
    trainer = pl.Trainer(accelerator=args.accelerator, devices=args.devices, strategy=args.strategy,
                         precision=args.precision, max_epochs=2, logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False, deterministic=True)
    trainer.fit(Classifier(args.out), data(), data(seed=2, size=24))
