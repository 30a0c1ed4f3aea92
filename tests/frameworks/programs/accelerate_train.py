"""A regression model trained with Hugging Face accelerate, as its examples write it.

``accelerate launch --multi_gpu --num_processes 2 accelerate_train.py OUT_DIR`` (or ``python
accelerate_train.py OUT_DIR [--cpu]`` for one process, ``torchrun --nproc_per_node 2 accelerate_train.py OUT_DIR
--cpu`` for two CPU processes). The global batch is 16 samples, split over the processes; each process writes
``OUT_DIR/rank<N>.json``: its device, its losses, the trained weights, then an evaluation as accelerate's
examples write it: the predictions of the 10 evaluation samples gathered with ``gather_for_metrics`` (the
samples the last batch repeats dropped), a torchmetrics metric synced across the processes, and
``accelerator.reduce`` of integers (sum) and floats (mean).
"""

import argparse
import json
import os

import torch
import torchmetrics
from accelerate import Accelerator
from accelerate.utils import set_seed
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

GLOBAL_BATCH = 16

if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--cpu", action="store_true")
    args = parser.parse_args()

    accelerator = Accelerator(cpu=args.cpu)
    set_seed(0)
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(64, 8, generator=generator)
    y = x.sum(-1, keepdim=True).sin()
    loader = DataLoader(TensorDataset(x, y), batch_size=GLOBAL_BATCH // accelerator.num_processes)
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.2)
    initial = dict(model.state_dict())  # kept to rewind to: the device copy is what trains
    kept = {k: v.clone() for k, v in initial.items()}
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)

    losses = []
    for _ in range(2):
        for inputs, targets in loader:
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(model(inputs), targets)
            accelerator.backward(loss)
            optimizer.step()
            losses.append(accelerator.reduce(loss.detach(), reduction="mean").item())

    evaluation = DataLoader(TensorDataset(x[:10] + 0.5, y[:10]), batch_size=4)
    evaluation = accelerator.prepare(evaluation)
    model.eval()
    error = torchmetrics.MeanSquaredError().to(accelerator.device)
    gathered = []
    for inputs, targets in evaluation:
        with torch.no_grad():
            predictions = model(inputs)
        error.update(predictions, targets)
        gathered.append(accelerator.gather_for_metrics((predictions, targets)))
    rank = accelerator.process_index
    reduced = {"sum": accelerator.reduce(torch.tensor([rank + 1, 7], device=accelerator.device), "sum").tolist(),
               "mean": accelerator.reduce(torch.tensor([rank + 0.5, 3.0], device=accelerator.device), "mean").tolist()}

    weights = [p.detach().cpu().flatten().tolist() for p in accelerator.unwrap_model(model).parameters()]
    record = {"rank": accelerator.process_index, "processes": accelerator.num_processes,
              "device": str(accelerator.device), "distributed": str(accelerator.distributed_type),
              "backend": accelerator.state.backend, "losses": losses, "weights": weights,
              "initial_kept": all(torch.equal(initial[k], kept[k]) for k in kept),
              "predictions": torch.cat([p for p, _ in gathered]).flatten().tolist(),
              "targets": torch.cat([t for _, t in gathered]).flatten().tolist(),
              "error": error.compute().item(), "reduced": reduced}
    with open(os.path.join(args.out, f"rank{accelerator.process_index}.json"), "w") as out:
        json.dump(record, out)
    accelerator.end_training()
