"""Sharded data-parallel training written for a machine with several NVIDIA GPUs, with FSDP2: one process per GPU,
NCCL, ``fully_shard`` on two blocks (on FSDP2's default mesh, the accelerator's) and on the model, whose last layer it
shards (on a device mesh of the GPUs), launched by torchrun
(``python -m torch.distributed.run --nproc_per_node N fsdp2_ranks.py OUT_DIR``).

Each rank trains on ``cuda:LOCAL_RANK`` with its share of every batch. Every rank writes ``OUT_DIR/rank<N>.json``: the
device its outputs were on, each parameter's mesh device type and the device of its shard, the losses and the whole
trained state (the ``state_dict``'s DTensors gathered with ``full_tensor()``).
"""

import json
import os
import sys

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

STEPS, BATCH = 4, 16


def main(out_dir: str) -> None:
    rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl")
    world = dist.get_world_size()
    mesh = init_device_mesh("cuda", (world,))
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 1)).cuda()
    for block in (model[0], model[2]):
        fully_shard(block)
    fully_shard(model, mesh=mesh)
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
    shards = {name: [p.device_mesh.device_type, str(p.to_local().device)] for name, p in model.named_parameters()}
    state = {name: t.full_tensor().cpu().tolist() for name, t in model.state_dict().items()}
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump({"rank": rank, "seen": sorted(seen), "shards": shards, "losses": losses, "state": state}, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
