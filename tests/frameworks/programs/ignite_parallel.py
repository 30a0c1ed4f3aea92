"""pytorch-ignite's distributed launcher as its examples write it: ``idist.Parallel(backend="nccl",
nproc_per_node=2)``, collectives, then a data-parallel ignite ``Engine``.

``python ignite_parallel.py OUT_DIR [--backend nccl|gloo]``. Each rank writes ``OUT_DIR/rank<N>.json``.
"""

import argparse
import json
import os

import ignite.distributed as idist
import torch
from ignite.engine import Events, create_supervised_trainer
from torch import nn
from torch.utils.data import TensorDataset


def training(local_rank: int, out: str) -> None:
    rank, world = idist.get_rank(), idist.get_world_size()
    device = idist.device()
    mine = torch.full((3,), float(rank + 1), device=device)
    gathered = idist.all_gather(mine)
    summed = idist.all_reduce(mine.clone())
    shared = idist.broadcast(torch.arange(4.0, device=device) * (rank + 7), src=0)

    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(64, 8, generator=generator)
    data = TensorDataset(x, x.sum(-1, keepdim=True).sin())
    loader = idist.auto_dataloader(data, batch_size=16, shuffle=False)  # 16 in all, 8 per rank
    model = idist.auto_model(nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1)))
    optimizer = idist.auto_optim(torch.optim.SGD(model.parameters(), lr=0.2))
    trainer = create_supervised_trainer(model, optimizer, nn.functional.mse_loss, device=device)
    losses = []
    trainer.add_event_handler(Events.ITERATION_COMPLETED, lambda engine: losses.append(engine.state.output))
    trainer.run(loader, max_epochs=2)

    record = {"rank": rank, "world": world, "local_rank": local_rank, "device": str(device),
              "backend": idist.backend(), "gathered": gathered.tolist(), "summed": summed.tolist(),
              "shared": shared.tolist(), "losses": losses,
              "weights": [p.detach().cpu().flatten().tolist() for p in model.parameters()]}
    with open(os.path.join(out, f"rank{rank}.json"), "w") as file:
        json.dump(record, file)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--backend", default="nccl")
    args = parser.parse_args()
    with idist.Parallel(backend=args.backend, nproc_per_node=2) as parallel:
        parallel.run(training, args.out)
