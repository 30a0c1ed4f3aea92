"""A program of several processes, each making its own number of redirected ``torch.zeros`` calls: the main
process, two torch.multiprocessing.spawn ranks, two spawn-context DataLoader workers (one call per item), a
forked child (os.fork) and a subprocess python. Each process but the workers prints its pid, its role and
how many calls it made, as a JSON line."""

import json
import os
import subprocess
import sys

import torch
import torch.multiprocessing as mp
from torch.utils.data import DataLoader, Dataset


def rank(index: int) -> None:
    for _ in range(2):
        torch.zeros(2, device="cuda")
    print(json.dumps({"role": "rank", "pid": os.getpid(), "zeros": 2}), flush=True)


class Zeros(Dataset):
    def __len__(self) -> int:
        return 6

    def __getitem__(self, i: int) -> torch.Tensor:
        return torch.zeros(1, device="cuda")


def main() -> None:
    torch.zeros(1, device="cuda")
    print(json.dumps({"role": "main", "pid": os.getpid(), "zeros": 1}), flush=True)
    mp.spawn(rank, nprocs=2)
    loader = DataLoader(Zeros(), batch_size=1, num_workers=2, multiprocessing_context="spawn")
    assert len(list(loader)) == 6
    del loader
    child = os.fork()
    if child == 0:
        for _ in range(4):
            torch.zeros(1, device="cuda")
        print(json.dumps({"role": "fork", "pid": os.getpid(), "zeros": 4}), flush=True)
        sys.exit(0)
    os.waitpid(child, 0)
    code = ("import os, json, torch\nfor _ in range(5): torch.zeros(1, device='cuda')\n"
            "print(json.dumps({'role': 'subprocess', 'pid': os.getpid(), 'zeros': 5}))")
    subprocess.run([sys.executable, "-c", code], check=True)


if __name__ == "__main__":
    main()
