"""A DDP program written for NVIDIA GPUs with a classic bug: no rank calls ``torch.cuda.set_device``, so
``model.cuda()`` puts every rank's model on ``cuda:0`` while ``device_ids=[rank]`` sends rank 1's inputs to
``cuda:1``. On a machine with 2 GPUs rank 1 fails; it prints its error."""

import os

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


def train(rank: int, world_size: int) -> None:
    dist.init_process_group("nccl", rank=rank, world_size=world_size)
    model = nn.Linear(4, 1).cuda()
    try:
        DDP(model, device_ids=[rank])(torch.randn(2, 4)).sum().backward()
    except RuntimeError as exc:
        print(f"rank {rank}: {str(exc).splitlines()[0]}", flush=True)
        raise
    dist.destroy_process_group()


if __name__ == "__main__":
    os.environ.setdefault("MASTER_ADDR", "localhost")
    mp.spawn(train, args=(2,), nprocs=2)
