"""Data-parallel training with synchronized batch normalization, written for a machine with several NVIDIA GPUs: one
process per GPU, NCCL, the model's BatchNorm layers converted to ``nn.SyncBatchNorm``, DDP on ``device_ids=[rank]``,
launched by torchrun (``python -m torch.distributed.run --nproc_per_node N syncbn_ranks.py OUT_DIR``).

Each rank trains on ``cuda:LOCAL_RANK`` with its share of every batch, normalized with the statistics of the whole
batch, then evaluates its share of a test batch. Every rank writes ``OUT_DIR/rank<N>.json``: the device its outputs
were on, the kinds of its normalization layers, its losses, its evaluation outputs and the whole trained state
(parameters and running statistics).
"""

import json
import os
import sys

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

STEPS, BATCH = 4, 16


def main(out_dir: str) -> None:
    rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl")
    world = dist.get_world_size()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1, bias=False), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(),
                          nn.Linear(64, 8, bias=False), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 1))
    model = DDP(nn.SyncBatchNorm.convert_sync_batchnorm(model).cuda(), device_ids=[rank])
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    data = torch.randn(STEPS + 1, BATCH, 3, 4, 4, generator=torch.Generator().manual_seed(0))
    losses, seen = [], set()
    for x in data[:STEPS]:
        x = x[rank::world].cuda()
        out = model(x)
        seen.add(str(out.device))
        loss = nn.functional.mse_loss(out, x.mean((1, 2, 3)).sin()[:, None])
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    model.eval()
    with torch.no_grad():
        evaluated = model(data[STEPS][rank::world].cuda()).cpu().tolist()
    kinds = sorted({type(m).__name__ for m in model.modules() if "Norm" in type(m).__name__})
    state = {name: t.cpu().tolist() for name, t in model.module.state_dict().items()}
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump({"rank": rank, "seen": sorted(seen), "norms": kinds, "losses": losses, "eval": evaluated,
                   "state": state}, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
