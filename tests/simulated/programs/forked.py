"""CUDA and ``fork`` (Linux's default start method) as a program written for an NVIDIA GPU meets them: a process
forked before the program used the GPU may use it; after, DataLoader workers that make only host tensors run, and
workers that use the GPU fail with CUDA's error. Prints one JSON line."""

import json
import multiprocessing

import torch
from torch.utils.data import DataLoader, Dataset


def on_the_gpu(queue: multiprocessing.Queue) -> None:
    queue.put(str(torch.ones(1, device="cuda").device))


class Samples(Dataset):
    def __init__(self, device: str) -> None:
        self.device = device

    def __len__(self) -> int:
        return 2

    def __getitem__(self, index: int) -> torch.Tensor:
        return torch.full((2,), float(index), device=self.device).cpu()


def load(device: str) -> list | str:
    try:
        return [batch.tolist() for batch in DataLoader(Samples(device), num_workers=1, multiprocessing_context="fork")]
    except RuntimeError as exc:
        return str(exc).strip().splitlines()[-1]


if __name__ == "__main__":
    fork = multiprocessing.get_context("fork")
    queue = fork.Queue()
    before = fork.Process(target=on_the_gpu, args=(queue,))
    before.start()
    forked_before = queue.get(timeout=120)
    before.join()
    model = torch.nn.Linear(2, 2).cuda()
    print(json.dumps({"forked_before": forked_before, "host_workers": load("cpu"), "gpu_workers": load("cuda")}))
