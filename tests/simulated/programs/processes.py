"""Where "cuda" tensors live in this process, a spawned process and a spawned DataLoader worker; one JSON line."""

import json
import multiprocessing

import torch
from torch.utils.data import DataLoader, Dataset


class Where(Dataset):
    def __len__(self) -> int:
        return 1

    def __getitem__(self, i: int) -> str:
        return str(torch.zeros(1, device="cuda").device)


def first(batch: list) -> str:
    return batch[0]


def child(queue) -> None:
    queue.put(str(torch.ones(1, device="cuda").device))


if __name__ == "__main__":
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    process = context.Process(target=child, args=(queue,))
    process.start()
    spawned = queue.get(timeout=120)
    process.join()
    (worker,) = DataLoader(Where(), num_workers=1, multiprocessing_context="spawn", collate_fn=first)
    print(json.dumps({"main": str(torch.zeros(1, device="cuda").device), "spawned": spawned, "worker": worker}))
