"""Data-parallel training written for a machine with several NVIDIA GPUs, one process per GPU, NCCL; launched by
``mp.spawn`` (``python ddp_ranks.py OUT_DIR``: one rank per GPU) or by torchrun (``LOCAL_RANK``).

Each rank works on ``cuda:RANK``: the model (with BatchNorm, whose buffers DDP broadcasts), its half of every batch
(pinned, moved with ``non_blocking=True``), the gradients DDP all-reduces, a collective of its own. Every rank
writes ``OUT_DIR/rank<N>.json``: the devices its tensors were on and the trained state.
"""

import json
import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

STEPS, BATCH = 4, 16


def train(rank: int, world_size: int, out_dir: str) -> None:
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=world_size)

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.Tanh(), nn.Linear(16, 1)).cuda()
    ddp = DDP(model, device_ids=[rank], output_device=rank)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
    data = torch.randn(STEPS, BATCH, 8, generator=torch.Generator().manual_seed(0))
    target = data.sum(-1, keepdim=True).sin()
    seen = set()
    for x, y in zip(data, target, strict=True):
        x = x[rank::world_size].pin_memory().cuda(non_blocking=True)
        y = y[rank::world_size].to(f"cuda:{rank}")
        optimizer.zero_grad()
        out = ddp(x)
        loss = nn.functional.mse_loss(out, y)
        loss.backward()
        optimizer.step()
        seen.update(str(t.device) for t in (x, y, out, loss, *(p.grad for p in model.parameters())))
    total = loss.detach().clone()
    dist.all_reduce(total)
    seen.update(str(t.device) for t in (total, *model.state_dict().values()))

    state = {name: value.cpu().flatten().tolist() for name, value in model.state_dict().items()}
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as out:
        json.dump({"rank": rank, "current_device": torch.cuda.current_device(),
                   "device_count": torch.cuda.device_count(), "backend": dist.get_backend(), "seen": sorted(seen),
                   "loss_sum": total.item(), "state": state}, out)
    dist.destroy_process_group()


if __name__ == "__main__":
    if "LOCAL_RANK" in os.environ:
        train(int(os.environ["LOCAL_RANK"]), int(os.environ["WORLD_SIZE"]), sys.argv[1])
    else:
        os.environ.setdefault("MASTER_ADDR", "localhost")
        os.environ.setdefault("MASTER_PORT", "12355")
        world_size = torch.cuda.device_count()
        mp.spawn(train, args=(world_size, sys.argv[1]), nprocs=world_size)
