"""Sharded data-parallel training written for a machine with several NVIDIA GPUs: FSDP, one process per GPU, NCCL,
launched by torchrun (``python -m torch.distributed.run --nproc_per_node N fsdp_ranks.py OUT_DIR``).

Each rank trains on ``cuda:LOCAL_RANK`` with its share of every batch; FSDP shards the parameters, gathers them for
each forward and backward and reduce-scatters the gradients. Every rank writes ``OUT_DIR/rank<N>.json``: the device
its outputs were on, the losses and the whole trained state (the parameters gathered).
"""

import json
import os
import sys

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

STEPS, BATCH = 4, 16


def main(out_dir: str) -> None:
    rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl")
    world = dist.get_world_size()
    torch.manual_seed(0)
    model = FSDP(nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1)).cuda(),
                 device_id=torch.cuda.current_device())
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    data = torch.randn(STEPS, BATCH, 8, generator=torch.Generator().manual_seed(0))
    losses, seen = [], set()
    for x in data:
        x = x[rank::world].cuda()
        out = model(x)
        seen.add(str(out.device))
        loss = nn.functional.mse_loss(out, x.sum(-1, keepdim=True).sin())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    with FSDP.summon_full_params(model):
        state = {name: p.detach().cpu().tolist() for name, p in model.module.named_parameters()}
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump({"rank": rank, "seen": sorted(seen), "losses": losses, "state": state}, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
