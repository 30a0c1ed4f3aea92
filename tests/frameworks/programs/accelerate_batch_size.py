"""Hugging Face accelerate's ``find_executable_batch_size``, as its documentation writes it: the decorated function
is retried with a smaller batch (``int(batch_size * 0.9)``, accelerate's default) while it raises an out-of-memory
error.

``python accelerate_batch_size.py OUT_DIR --start N [--cpu] [--generate]``. By default the function trains a
regression MLP for 3 steps on a batch of that size (its activations grow with the batch); ``--generate`` instead
preallocates a static key/value cache for that many sequences, a Llama-7B's (32 layers, 32 heads of 128, 4,096
positions, float16: 2 GiB a sequence, one ``torch.empty`` per layer for keys and one for values, as static caches
are laid out), and writes the first position of each. Writes ``OUT_DIR/rank0.json``: the batch sizes tried, the
out-of-memory messages, the size that ran, the device's total memory and the peak of its allocated memory in that
run, and the losses (training).
"""

import argparse
import json
import os

import torch
from accelerate import Accelerator
from accelerate.utils import find_executable_batch_size
from torch import nn

LAYERS, HEADS, POSITIONS, HEAD_DIM = 32, 32, 4096, 128


def train(accelerator: Accelerator, batch_size: int) -> list[float]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 512), nn.ReLU(), nn.Linear(512, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    model, optimizer = accelerator.prepare(model, optimizer)
    x = torch.randn(batch_size, 64, generator=torch.Generator().manual_seed(1)).to(accelerator.device)
    y = x[:, :8].sum(-1, keepdim=True).tanh()
    losses = []
    for _ in range(3):
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        accelerator.backward(loss)
        optimizer.step()
        losses.append(loss.item())
    return losses


def generate(accelerator: Accelerator, batch_size: int) -> list[float]:
    shape = (batch_size, HEADS, POSITIONS, HEAD_DIM)
    cache = [(torch.empty(shape, dtype=torch.float16, device=accelerator.device),
              torch.empty(shape, dtype=torch.float16, device=accelerator.device)) for _ in range(LAYERS)]
    for keys, values in cache:
        keys[:, :, 0].fill_(1.0)
        values[:, :, 0].fill_(2.0)
    return []


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--start", type=int, required=True)
    parser.add_argument("--cpu", action="store_true")
    parser.add_argument("--generate", action="store_true")
    args = parser.parse_args()
    accelerator = Accelerator(cpu=args.cpu)
    tried, refused = [], []

    @find_executable_batch_size(starting_batch_size=args.start)
    def run(batch_size: int) -> tuple[int, list[float]]:
        tried.append(batch_size)
        accelerator.free_memory()
        if accelerator.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats()
        try:
            return batch_size, (generate if args.generate else train)(accelerator, batch_size)
        except torch.OutOfMemoryError as error:
            refused.append(str(error))
            raise

    ran, losses = run()
    cuda = accelerator.device.type == "cuda"
    record = {"device": str(accelerator.device), "tried": tried, "refused": refused, "ran": ran, "losses": losses,
              "total_memory": torch.cuda.get_device_properties(0).total_memory if cuda else None,
              "peak": torch.cuda.max_memory_allocated() if cuda else None}
    with open(os.path.join(args.out, "rank0.json"), "w") as out:
        json.dump(record, out)
