"""Collectives on "cuda" tensors in an NCCL-written program; run with 2 processes under torchdevice.

Every collective runs twice: as the program calls it, then with the CPU staging kernels (the route
MPS tensors take) registered on the AutogradCPU key, where CPU tensors meet them. Each rank checks
its own results and prints ``rank R ok``.
"""

from __future__ import annotations

import os
from datetime import timedelta

import torch
import torch.distributed as dist

from torchdevice.distributed import staging

local_rank = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local_rank)
dist.init_process_group(backend="nccl", timeout=timedelta(seconds=45))
rank, world = dist.get_rank(), dist.get_world_size()
device = torch.device("cuda", local_rank)
ranks = torch.arange(world, dtype=torch.float32)
pair = dist.new_group(backend="nccl")
pair_mapped = dist.new_group(ranks=list(range(world)), backend="cuda:nccl,cpu:gloo")


def check(name: str, got: torch.Tensor, expected: torch.Tensor) -> None:
    assert got.device == torch.ones(1, device=f"cuda:{local_rank}").device, (name, got.device)
    torch.testing.assert_close(got.cpu(), expected, msg=lambda m: f"rank {rank} {name}: {m}")


def collectives(group: dist.ProcessGroup | None) -> None:
    base = torch.arange(2 * world, dtype=torch.float32)

    t = (base + rank).to(device)
    dist.all_reduce(t, group=group)
    check("all_reduce sum", t, world * base + ranks.sum())

    t = torch.full((3,), float(rank), device="cuda")
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=group)
    check("all_reduce max", t, torch.full((3,), float(world - 1)))

    t = torch.full((3,), float(rank), device="cuda")
    dist.all_reduce(t, op=dist.ReduceOp.AVG, group=group)
    check("all_reduce avg", t, torch.full((3,), ranks.mean().item()))

    t = torch.full((2,), float(rank + 7), device=device)
    dist.broadcast(t, src=world - 1, group=group)
    check("broadcast", t, torch.full((2,), float(world - 1 + 7)))

    gathered = [torch.empty(2, device=device) for _ in range(world)]
    dist.all_gather(gathered, torch.full((2,), float(rank), device=device), group=group)
    check("all_gather", torch.stack(gathered), ranks[:, None].expand(world, 2))

    flat = torch.empty(2 * world, device=device)
    dist.all_gather_into_tensor(flat, torch.full((2,), float(rank), device=device), group=group)
    check("all_gather_into_tensor", flat, ranks.repeat_interleave(2))

    out = torch.empty(2, device=device)
    dist.reduce_scatter(out, [torch.full((2,), float(rank + i), device=device) for i in range(world)], group=group)
    check("reduce_scatter", out, torch.full((2,), ranks.sum().item() + world * rank))

    out = torch.empty(2, device=device)
    dist.reduce_scatter_tensor(out, (base + rank).to(device), group=group)
    check("reduce_scatter_tensor", out, (world * base + ranks.sum())[2 * rank : 2 * rank + 2])

    out = torch.empty(2, device=device)
    dist.reduce_scatter_tensor(out, (base * (rank + 1)).to(device), op=dist.ReduceOp.MAX, group=group)
    check("reduce_scatter_tensor max", out, (base * world)[2 * rank : 2 * rank + 2])

    dist.barrier(group=group, device_ids=[local_rank])


def shapes() -> None:
    """NCCL's single-tensor collectives count elements: a stacked output, a 0-d input, (4, 1) into (8,)."""
    stacked = torch.empty(world, 3, device=device)
    dist.all_gather_into_tensor(stacked, torch.full((3,), float(rank), device=device))
    check("all_gather_into_tensor stacked", stacked, ranks[:, None].expand(world, 3))
    flat = torch.empty(world, device=device)
    dist.all_gather_into_tensor(flat, torch.tensor(float(rank), device=device))
    check("all_gather_into_tensor 0-d", flat, ranks)
    flat = torch.empty(4 * world, device=device)  # accelerate's gather on NCCL
    work = dist.all_gather_into_tensor(flat, torch.full((4, 1), float(rank), device=device), async_op=True)
    work.wait()
    check("all_gather_into_tensor (4, 1)", flat, ranks.repeat_interleave(4))
    out = torch.empty(2, 1, device=device)
    dist.reduce_scatter_tensor(out, (base := torch.arange(2.0 * world)).to(device) + rank)
    check("reduce_scatter_tensor (2, 1)", out, (world * base + ranks.sum())[2 * rank: 2 * rank + 2, None])
    for call, message in ((lambda: dist.all_gather_into_tensor(torch.empty(3, device=device),
                                                               torch.ones(2, device=device)), "world_size times"),
                          (lambda: dist.reduce_scatter_tensor(torch.empty(3, device=device),
                                                              torch.ones(2, device=device)), "output size times")):
        try:
            call()
        except ValueError as error:  # raised at the call, as NCCL does, before anything is sent
            assert message in str(error), error
        else:
            raise AssertionError("NCCL refuses element counts that do not add up")


shapes()
collectives(None)
collectives(pair)
collectives(pair_mapped)
objects = [None] * world
dist.all_gather_object(objects, {"rank": rank})
assert objects == [{"rank": r} for r in range(world)], objects

library = staging.register("cpu", dispatch_key="AutogradCPU")
t = torch.ones(2, device=device)
version = t._version
dist.all_reduce(t)
assert t._version > version, "the staging kernel did not copy the result back"
collectives(None)
model = torch.nn.Linear(3, 2).to(device)
torch.nn.init.ones_(model.weight)
ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local_rank], bucket_cap_mb=1e-5)
ddp(torch.full((4, 3), float(rank + 1), device=device)).sum().backward()
assert model.weight.grad is not None
check("ddp grad", model.weight.grad, torch.full((2, 3), 4 * (ranks + 1).mean().item()))
del library

# CUDA's answers in every rank (the start-up hook installed the runtime here); gloo underneath.
assert dist.is_nccl_available() and dist.is_backend_available("nccl")
world_group = dist.distributed_c10d._get_default_group()
answers = [(dist.get_backend(g), g.name()) for g in (world_group, pair)] + [dist.get_backend(pair_mapped)]
assert answers == [("nccl", "nccl"), ("nccl", "nccl"), "cuda:nccl,cpu:gloo"], answers
real = [dist.distributed_c10d._world.pg_map[g][0] for g in (world_group, pair_mapped)]
assert real == ["gloo", "cpu:gloo"], real
assert dist.distributed_c10d._get_default_group()._get_backend(torch.device("cpu")).options._timeout == timedelta(
    seconds=45
)
dist.destroy_process_group()
print(f"rank {rank} ok", flush=True)
