"""Data-parallel training launched with ``mp.spawn``, one process per GPU, written for NVIDIA GPUs and NCCL.

``python ddp_spawn.py OUT_DIR``. Each rank trains on its half of every batch; ``world_size`` is the
number of GPUs. Every rank writes ``OUT_DIR/rank<N>.json``: what it saw of its device and the trained
parameters.
"""

import json
import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

STEPS, BATCH = 5, 16


def train(rank: int, world_size: int, out_dir: str) -> None:
    os.environ.setdefault("MASTER_ADDR", "localhost")
    os.environ.setdefault("MASTER_PORT", "12355")
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=world_size)

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1)).cuda(rank)
    ddp = DDP(model, device_ids=[rank])
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.1)
    data = torch.randn(STEPS, BATCH, 8, device=f"cuda:{rank}")
    target = data.sum(-1, keepdim=True).sin()
    for x, y in zip(data, target, strict=True):
        x, y = x[rank::world_size], y[rank::world_size]  # this rank's half of the batch
        optimizer.zero_grad()
        nn.functional.mse_loss(ddp(x), y).backward()
        optimizer.step()

    params = [p.detach().cpu().flatten().tolist() for p in model.parameters()]
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as out:
        json.dump({"rank": rank, "current_device": torch.cuda.current_device(),
                   "device_count": torch.cuda.device_count(), "on": str(next(model.parameters()).device),
                   "params": params}, out)
    dist.destroy_process_group()


if __name__ == "__main__":
    world_size = torch.cuda.device_count()
    mp.spawn(train, args=(world_size, sys.argv[1]), nprocs=world_size)
