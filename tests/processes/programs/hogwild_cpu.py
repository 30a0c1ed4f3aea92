"""``hogwild.py`` written for the CPU."""

import sys

import torch
import torch.multiprocessing as mp
from torch import nn

WORKERS, STEPS = 2, 150
TRUE_WEIGHT = torch.arange(1.0, 9.0)


def train(rank: int, model: nn.Module, steps_done: torch.Tensor) -> None:
    generator = torch.Generator().manual_seed(rank)
    x = torch.randn(64, 8, generator=generator)
    y = x @ TRUE_WEIGHT
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    before = nn.functional.mse_loss(model(x).squeeze(-1), y).item()
    for _ in range(STEPS):
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x).squeeze(-1), y)
        loss.backward()
        optimizer.step()
        steps_done[rank] += 1
    print(f"worker {rank} on {x.device}: loss {before:.4f} -> {loss.item():.6f}", flush=True)


if __name__ == "__main__":
    mp.set_start_method(sys.argv[1])
    model = nn.Linear(8, 1, bias=False)
    model.share_memory()
    steps_done = torch.zeros(WORKERS, dtype=torch.long).share_memory_()
    workers = [mp.Process(target=train, args=(rank, model, steps_done)) for rank in range(WORKERS)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    print("exit codes", [worker.exitcode for worker in workers])
    print("steps done", steps_done.tolist())
    print("weight error", (model.weight.detach().squeeze(0) - TRUE_WEIGHT).abs().max().item())
