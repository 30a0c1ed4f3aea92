"""DDP with the options training scripts pass (``find_unused_parameters=True``, ``static_graph=True``,
``gradient_as_bucket_view=True``), launched with ``mp.spawn``, one process per GPU, written for NVIDIA GPUs and NCCL.

``python ddp_options.py OUT_DIR``. The model has a branch that some steps leave unused. Every rank writes
``OUT_DIR/rank<N>.json``: its device and, per option, the trained parameters.
"""

import json
import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

STEPS, BATCH = 4, 8
OPTIONS = {"find_unused_parameters": {"find_unused_parameters": True},
           "static_graph": {"static_graph": True},
           "gradient_as_bucket_view": {"gradient_as_bucket_view": True, "find_unused_parameters": True}}


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body, self.head, self.extra = nn.Linear(6, 12), nn.Linear(12, 1), nn.Linear(12, 1)

    def forward(self, x: torch.Tensor, use_extra: bool) -> torch.Tensor:
        h = torch.relu(self.body(x))
        return self.head(h) + (self.extra(h) if use_extra else 0)


def train(rank: int, world_size: int, out_dir: str) -> None:
    os.environ.setdefault("MASTER_ADDR", "localhost")
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=world_size)
    trained = {}
    for name, options in OPTIONS.items():
        torch.manual_seed(0)
        model = Net().cuda(rank)
        ddp = DDP(model, device_ids=[rank], **options)
        optimizer = torch.optim.SGD(ddp.parameters(), lr=0.1)
        data = torch.randn(STEPS, BATCH, 6, device=f"cuda:{rank}")
        for step, x in enumerate(data):
            x = x[rank::world_size]
            optimizer.zero_grad()
            ddp(x, use_extra=name != "static_graph" and step % 2 == 0).pow(2).mean().backward()
            optimizer.step()
        trained[name] = [p.detach().cpu().flatten().tolist() for p in model.parameters()]
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as out:
        json.dump({"rank": rank, "on": str(next(model.parameters()).device), "trained": trained}, out)
    dist.destroy_process_group()


if __name__ == "__main__":
    world_size = torch.cuda.device_count()
    mp.spawn(train, args=(world_size, sys.argv[1]), nprocs=world_size)
