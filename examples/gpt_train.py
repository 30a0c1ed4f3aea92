"""Train a small GPT on a character corpus, written for an NVIDIA GPU the way such scripts usually are.

    python examples/gpt_train.py --steps 20                   # on a CUDA machine
    torchdevice run examples/gpt_train.py --steps 20          # anywhere else, unchanged

bf16 autocast, a GradScaler, fused AdamW, pinned host batches copied with ``non_blocking=True``,
CUDA events for timing, and a checkpoint saved halfway and resumed with ``map_location="cuda"``.
Prints one loss per line; timings go to stderr. ``examples/gpt_train_cpu.py`` is the same program
written for the CPU.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile

import torch
from torch import nn
from torch.nn import functional as F

CORPUS = "".join(f"{n} squared is {n * n}; {n} cubed is {n ** 3}.\n" for n in range(200))


class Block(nn.Module):
    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, c))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, vocab: int, block: int, width: int = 64, heads: int = 4, layers: int = 2) -> None:
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, width), nn.Embedding(block, width)
        self.blocks = nn.Sequential(*(Block(width, heads) for _ in range(layers)))
        self.ln, self.head = nn.LayerNorm(width), nn.Linear(width, vocab, bias=False)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(idx.shape[1], device=idx.device)
        return self.head(self.ln(self.blocks(self.tok(idx) + self.pos(pos))))


def batches(data: torch.Tensor, block: int, batch: int, seed: int):
    """Endless random windows of the corpus, drawn on the host."""
    generator = torch.Generator().manual_seed(seed)
    while True:
        starts = torch.randint(len(data) - block - 1, (batch,), generator=generator)
        x = torch.stack([data[s:s + block] for s in starts])
        y = torch.stack([data[s + 1:s + block + 1] for s in starts])
        yield x, y


def train_step(model: GPT, optimizer: torch.optim.Optimizer, scaler: torch.amp.GradScaler,
               x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
        logits = model(x)
        loss = F.cross_entropy(logits.float().view(-1, logits.shape[-1]), y.view(-1))
    optimizer.zero_grad(set_to_none=True)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    return loss


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--block", type=int, default=32)
    parser.add_argument("--lr", type=float, default=3e-3)
    args = parser.parse_args()

    device = "cuda"
    torch.manual_seed(0)
    torch.cuda.manual_seed_all(0)
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.benchmark = True
    print(f"training on {torch.cuda.get_device_name(0)}", file=sys.stderr)

    chars = sorted(set(CORPUS))
    data = torch.tensor([chars.index(c) for c in CORPUS], dtype=torch.long)
    stream = batches(data, args.block, args.batch, seed=0)

    def fresh():
        model = GPT(len(chars), args.block).to(device)
        optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.1, fused=True)
        return model, optimizer, torch.amp.GradScaler("cuda")

    model, optimizer, scaler = fresh()
    checkpoint = os.path.join(tempfile.mkdtemp(), "ckpt.pt")
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for step in range(args.steps):
        if step == args.steps // 2:  # save, throw everything away, resume from the checkpoint
            torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                        "scaler": scaler.state_dict()}, checkpoint)
            model, optimizer, scaler = fresh()
            state = torch.load(checkpoint, map_location="cuda")
            model.load_state_dict(state["model"])
            optimizer.load_state_dict(state["optimizer"])
            scaler.load_state_dict(state["scaler"])
        x, y = next(stream)
        x, y = x.pin_memory().to(device, non_blocking=True), y.pin_memory().to(device, non_blocking=True)
        start.record()
        loss = train_step(model, optimizer, scaler, x, y)
        end.record()
        torch.cuda.synchronize()
        assert math.isfinite(loss.item())
        print(f"{loss.item():.6f}")
        print(f"step {step}: {start.elapsed_time(end):.1f} ms", file=sys.stderr)


if __name__ == "__main__":
    main()
