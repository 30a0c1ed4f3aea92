"""What the simulated devices (the Mac, an NVIDIA GPU) cost per op and per training step: the same work on their
device tensors (a kernel that computes on host memory, after the refusal checks the device makes) against plain CPU
tensors with torchdevice not installed, alternating rounds in one process. A Mac or a GPU has none of this cost; it
is what a Linux run under ``--target mps-sim`` or ``--target cuda-sim`` pays. The training steps are forward,
backward and AdamW: an MLP, and the GPT of ``examples/gpt_train.py`` (embeddings, two attention blocks) in
float32."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from bench.timing import per_call

ROUNDS = 3


def _gpt() -> Any:
    """``examples/gpt_train.py``'s GPT class."""
    path = Path(__file__).resolve().parents[1] / "examples" / "gpt_train.py"
    spec = importlib.util.spec_from_file_location("gpt_train", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.GPT


def _trainer(model: torch.nn.Module, loss: Callable[[torch.nn.Module], torch.Tensor]) -> Callable[[], None]:
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)

    def step() -> None:
        optimizer.zero_grad()
        loss(model).backward()
        optimizer.step()

    return step


def _cases(device: str) -> list[tuple[str, Callable[[], object], int]]:
    """``(name, call, calls per timing)`` on tensors made on ``device``."""
    torch.manual_seed(0)
    small, large = torch.randn(16, device=device), torch.randn(1_000_000, device=device)
    a, b = torch.randn(256, 256, device=device), torch.randn(256, 256, device=device)
    image = torch.randn(8, 16, 32, 32, device=device)
    conv = torch.nn.Conv2d(16, 16, 3, padding=1).to(device)
    mlp = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10)).to(device)
    batch = torch.randn(32, 64, device=device)
    gpt = _gpt()(vocab=32, block=32).to(device)
    tokens = torch.randint(32, (8, 33), device=device)
    return [
        ("x.device (the profile's device, shown to the program)", lambda: small.device, 100_000),
        ("add of 16 floats", lambda: small + 1, 20_000),
        ("view small[2:]", lambda: small[2:], 20_000),
        ("add of 1M floats", lambda: large + 1, 200),
        ("mm 256x256", lambda: a @ b, 200),
        ("conv2d 8x16x32x32, 3x3", lambda: conv(image), 50),
        ("MLP training step (forward, backward, AdamW)", _trainer(mlp, lambda m: m(batch).square().mean()), 200),
        ("GPT training step (2 blocks, forward, backward, AdamW)",
         _trainer(gpt, lambda m: F.cross_entropy(m(tokens[:, :-1]).flatten(0, 1), tokens[:, 1:].flatten())), 20),
    ]


def run() -> Iterator[dict[str, Any]]:
    import torchdevice

    targets = ("mps-sim", "cuda-sim")
    native = {name: float("inf") for name, _, _ in _cases("cpu")}
    simulated = {target: dict(native) for target in targets}
    for _ in range(ROUNDS):
        for name, call, number in _cases("cpu"):
            native[name] = min(native[name], per_call(call, number=number, repeat=3))
        for target in targets:
            with torchdevice.installed(target):
                for name, call, number in _cases("cuda"):
                    simulated[target][name] = min(simulated[target][name], per_call(call, number=number, repeat=3))
    for target in targets:
        for name in native:
            took = simulated[target][name]
            yield {"name": f"{target} per op: {name}", "native_cpu_s": native[name], "simulated_s": took,
                   "added_s": took - native[name], "simulated_over_native": took / native[name]}
