"""Data-parallel training written for NVIDIA GPUs and NCCL, the way such programs usually look.

    torchrun --nproc_per_node=2 examples/ddp_train.py     # one process per GPU
    python examples/ddp_train.py                          # one process, no torch.distributed

Each optimizer step accumulates gradients over ``--accum`` micro-batches (DDP's ``no_sync()``
skips the all-reduce on all but the last). The global batch is ``--global-batch`` samples per
micro-batch whatever the number of processes, so every run sees the same samples per step and
rank 0 prints the same losses.
"""

from __future__ import annotations

import argparse
import contextlib
import os

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

INIT_FORMS = ("positional", "keyword", "device-map")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--samples", type=int, default=32)
    parser.add_argument("--global-batch", type=int, default=8)
    parser.add_argument("--accum", type=int, default=2)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--bucket-cap-mb", type=float, default=25.0)
    parser.add_argument("--init", choices=INIT_FORMS, default="positional", help="how init_process_group is called")
    parser.add_argument("--placement", choices=("cuda", "index"), default="cuda", help=".cuda() or .to(f'cuda:{i}')")
    return parser.parse_args()


def init_distributed(form: str) -> None:
    if form == "positional":
        dist.init_process_group("nccl")
    elif form == "keyword":
        dist.init_process_group(backend="nccl")
    else:
        dist.init_process_group(backend="cuda:nccl,cpu:gloo")


def synthetic_data(samples: int, seed: int) -> TensorDataset:
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(samples, 16, generator=generator)
    w = torch.randn(16, 1, generator=generator)
    y = torch.tanh(x @ w) + 0.1 * torch.randn(samples, 1, generator=generator)
    return TensorDataset(x, y)


def main() -> None:
    args = parse_args()
    distributed = "WORLD_SIZE" in os.environ
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    torch.cuda.set_device(local_rank)
    if distributed:
        init_distributed(args.init)
    rank = dist.get_rank() if distributed else 0
    world_size = dist.get_world_size() if distributed else 1

    torch.manual_seed(args.seed)
    net = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 1))
    net = net.cuda() if args.placement == "cuda" else net.to(f"cuda:{local_rank}")
    model: nn.Module = net
    if distributed:
        model = DDP(net, device_ids=[local_rank], output_device=local_rank, bucket_cap_mb=args.bucket_cap_mb)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)

    dataset = synthetic_data(args.samples, args.seed)
    sampler: DistributedSampler[tuple[torch.Tensor, ...]] = DistributedSampler(
        dataset, num_replicas=world_size, rank=rank, shuffle=True, seed=args.seed
    )
    loader = DataLoader(dataset, batch_size=args.global_batch // world_size, sampler=sampler, drop_last=True)

    step = 0
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        for micro, (x, y) in enumerate(loader):
            x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
            last = (micro + 1) % args.accum == 0
            skip_sync = model.no_sync() if isinstance(model, DDP) and not last else contextlib.nullcontext()
            with skip_sync:
                loss = nn.functional.mse_loss(model(x), y)
                (loss / args.accum).backward()
            logged = loss.detach().clone()
            if distributed:
                dist.all_reduce(logged)
                logged /= world_size
            if rank == 0:
                print(f"epoch {epoch} micro {micro} loss {logged.item()!r}", flush=True)
            if last:
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
                step += 1

    if rank == 0:
        print(f"done: {step} optimizer steps on {world_size} process(es)", flush=True)
    if distributed:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
