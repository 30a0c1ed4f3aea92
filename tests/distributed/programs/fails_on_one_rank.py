"""An NCCL-written program whose last rank raises while the others wait in a collective."""

import os

import torch
import torch.distributed as dist

torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
dist.init_process_group("nccl")
if dist.get_rank() == dist.get_world_size() - 1:
    raise RuntimeError(f"rank {dist.get_rank()} failed on purpose")
t = torch.ones(4, device="cuda")
dist.all_reduce(t)  # never completes: the last rank is gone
dist.barrier()
