"""pytorch-ignite's ``idist.Parallel(backend="nccl", nproc_per_node=2)``, as written for a 2-GPU machine.

Run under ``torchdevice run --devices 2``. Each rank prints one JSON line: what ignite reports
(backend, device, rank) and the results of its collectives, so the test can check that the ranks agree.
"""

from __future__ import annotations

import json
import os

import ignite.distributed as idist
import torch


def training(local_rank: int, seed: int) -> None:
    rank, world = idist.get_rank(), idist.get_world_size()
    device = idist.device()
    torch.manual_seed(seed)
    weights = torch.randn(4, device=device)  # the same draw on every rank
    summed = idist.all_reduce(torch.full((3,), float(rank + 1), device=device))
    gathered = idist.all_gather(torch.tensor([float(rank)], device=device))
    chosen = idist.broadcast(weights * (rank + 1), src=1)
    objects = idist.all_gather({"rank": rank})
    largest = idist.all_reduce(torch.tensor([rank + 2, 7 - rank], device=device), op="MAX")
    try:  # ignite's "AND" is ReduceOp.BAND, which NCCL refuses
        idist.all_reduce(torch.ones(2, dtype=torch.int32, device=device), op="AND")
        refused = ""
    except ValueError as error:
        refused = str(error)
    line = json.dumps({
        "rank": rank, "local_rank": local_rank, "world": world, "backend": idist.backend(),
        "device": str(device), "cuda_device": torch.cuda.current_device(), "summed": summed.tolist(),
        "gathered": gathered.tolist(), "chosen": chosen.tolist(), "weights": weights.tolist(), "objects": objects,
        "largest": largest.tolist(), "refused": refused,
    })
    os.write(1, f"{line}\n".encode())  # one write: the ranks' lines do not interleave


if __name__ == "__main__":
    with idist.Parallel(backend="nccl", nproc_per_node=2) as parallel:
        parallel.run(training, 1234)
