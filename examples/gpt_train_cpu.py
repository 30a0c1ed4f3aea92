"""The training loop of ``examples/gpt_train.py`` written for the CPU: the reference it is compared with.

    python examples/gpt_train_cpu.py --steps 20

Same model, data, optimizer and checkpoint round trip; CPU idioms instead of CUDA ones: device
``"cpu"``, ``autocast(device_type="cpu")``, no GradScaler, no pinned memory, no CUDA events.
"""

from __future__ import annotations

import argparse
import os
import tempfile

import torch
from gpt_train import CORPUS, GPT, batches
from torch.nn import functional as F


def train_step(model: GPT, optimizer: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
        logits = model(x)
        loss = F.cross_entropy(logits.float().view(-1, logits.shape[-1]), y.view(-1))
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    return loss


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--block", type=int, default=32)
    parser.add_argument("--lr", type=float, default=3e-3)
    args = parser.parse_args()

    device = "cpu"
    torch.manual_seed(0)
    chars = sorted(set(CORPUS))
    data = torch.tensor([chars.index(c) for c in CORPUS], dtype=torch.long)
    stream = batches(data, args.block, args.batch, seed=0)

    def fresh():
        model = GPT(len(chars), args.block).to(device)
        return model, torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.1, fused=True)

    model, optimizer = fresh()
    checkpoint = os.path.join(tempfile.mkdtemp(), "ckpt.pt")
    for step in range(args.steps):
        if step == args.steps // 2:
            torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()}, checkpoint)
            model, optimizer = fresh()
            state = torch.load(checkpoint, map_location="cpu")
            model.load_state_dict(state["model"])
            optimizer.load_state_dict(state["optimizer"])
        x, y = next(stream)
        loss = train_step(model, optimizer, x, y)
        print(f"{loss.item():.6f}")


if __name__ == "__main__":
    main()
