"""The standard torchrun + DistributedDataParallel recipe, written for NVIDIA GPUs (input of the end-to-end test).

    torchrun --nproc_per_node=2 ddp_local_rank.py CHECKPOINT
"""
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def main(checkpoint):
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    dist.init_process_group(backend="nccl")
    torch.manual_seed(0)
    torch.cuda.manual_seed_all(0)
    model = nn.Linear(8, 1).to(local_rank)
    if dist.get_rank() == 0:
        torch.save(model.state_dict(), checkpoint)
    dist.barrier()
    loc = f"cuda:{local_rank}"
    device = f"cuda:{local_rank}"
    scale = torch.ones(1, device=device) * torch.ones(1, device=f"cuda:{local_rank}")
    model.load_state_dict(torch.load(checkpoint, map_location=loc))
    ddp = DDP(model, device_ids=[local_rank], output_device=local_rank)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.1)
    generator = torch.Generator().manual_seed(dist.get_rank())
    for _ in range(3):
        x = torch.randn(4, 8, generator=generator).cuda(local_rank)
        loss = ddp(x).square().mean() * scale.to(device).cuda(local_rank)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        torch.cuda.synchronize()
    weights = [torch.zeros(8, device=local_rank) for _ in range(dist.get_world_size())]
    dist.all_gather(weights, ddp.module.weight.detach()[0])
    assert all(torch.equal(weights[0], w) for w in weights), "replicas diverged"
    sys.stdout.write(f"rank {dist.get_rank()} of {dist.get_world_size()} done on {x.device.type}\n")  # one write
    sys.stdout.flush()
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
