"""A scikit-learn style classifier trained with skorch on the GPU: ``NeuralNetClassifier(device="cuda")``.

``python skorch_fit.py OUT_DIR [--device cuda|cpu]``. Writes ``OUT_DIR/rank0.json``: the training
history (losses and validation accuracy per epoch), the predicted probabilities of a few samples and the
device skorch's module ended up on.
"""

import argparse
import json
import os

import numpy as np
import torch
from skorch import NeuralNetClassifier
from torch import nn


class Net(nn.Module):
    def __init__(self, hidden: int = 16) -> None:
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(8, hidden), nn.ReLU(), nn.Linear(hidden, 3))

    def forward(self, x):
        return torch.softmax(self.layers(x), dim=-1)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()

    rng = np.random.default_rng(1)
    X = rng.standard_normal((120, 8)).astype(np.float32)
    y = (X[:, 0] > 0).astype(np.int64) + (X[:, 1] > 0.5).astype(np.int64)
    torch.manual_seed(0)
    net = NeuralNetClassifier(Net, max_epochs=4, lr=0.2, batch_size=16, device=args.device, verbose=0)
    net.fit(X, y)
    probabilities = net.predict_proba(X[:5])
    record = {"on": str(next(net.module_.parameters()).device),
              "history": [{k: epoch[k] for k in ("train_loss", "valid_loss", "valid_acc")} for epoch in net.history],
              "probabilities": probabilities.tolist()}
    with open(os.path.join(args.out, "rank0.json"), "w") as out:
        json.dump(record, out)
