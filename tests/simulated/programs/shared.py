"""Tensors on a GPU handed to other processes, as a program written for NVIDIA GPUs hands them (CUDA's IPC: the
same memory): a spawned process adds to a tensor of ``cuda:1`` and doubles a Parameter it was given, and sends back
a tensor it made; a DataLoader worker returns a batch made on the GPU. Prints one JSON line."""

import json

import torch
import torch.multiprocessing as mp
from torch.utils.data import DataLoader, Dataset


def child(t: torch.Tensor, p: torch.nn.Parameter, queue: mp.Queue, done: mp.Event) -> None:
    t += 1
    with torch.no_grad():
        p.mul_(2)
    made = torch.full((2,), 7.0, device=t.device)
    queue.put({"t": str(t.device), "p": [type(p).__name__, str(p.device), p.requires_grad], "made": made})
    done.wait()  # CUDA's rule: the sender keeps a tensor it sent alive until the receiver is done with it


class OnTheGpu(Dataset):
    def __len__(self) -> int:
        return 2

    def __getitem__(self, index: int) -> torch.Tensor:
        return torch.full((3,), float(index), device="cuda")


if __name__ == "__main__":
    context = mp.get_context("spawn")
    t = torch.zeros(3, device="cuda:1")
    p = torch.nn.Parameter(torch.ones(2, device="cuda"))
    queue, done = context.Queue(), context.Event()
    process = context.Process(target=child, args=(t, p, queue, done))
    process.start()
    seen = queue.get(timeout=120)
    made = seen.pop("made")
    seen["made"] = [str(made.device), made.tolist()]
    done.set()
    process.join()
    (batch,) = DataLoader(OnTheGpu(), batch_size=2, num_workers=1, multiprocessing_context="spawn")
    print(json.dumps({"child": seen, "t": t.tolist(), "p": p.tolist(), "batch": [str(batch.device), batch.tolist()]}))
