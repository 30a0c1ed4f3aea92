"""The runtime's cost: redirected calls against native ones, side by side in one process.

- ``torch.zeros(8, device="cuda")`` redirected vs ``torch.zeros(8, device="cpu")``;
- ``x.to("cuda")`` redirected vs ``x.to("cpu")``;
- ops that take no device (``torch.add``, ``torch.matmul``, ``F.gelu``): with the runtime installed vs
  not installed (they are not wrapped: the same function object either way);
- one training step of ``examples/gpt_train.py`` (written for CUDA, through the runtime) vs
  ``examples/gpt_train_cpu.py`` (written for the CPU);
- ``import torch; import torchdevice; torchdevice.install()`` vs ``import torch``, in fresh interpreters.

``ratio`` is candidate over baseline; each row also names the target it is judged against.
"""

from __future__ import annotations

import inspect
import statistics
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

import torchdevice
from bench.timing import compare, per_call

ROOT = Path(__file__).resolve().parent.parent


def calls() -> Iterator[dict[str, Any]]:
    """Redirected calls vs their native spelling, with the runtime installed on the CPU."""
    x = torch.ones(8)
    with torchdevice.installed("cpu"):
        yield {**compare("torch.zeros(8, device='cuda') vs device='cpu'",
                         lambda: torch.zeros(8, device="cuda"), lambda: torch.zeros(8, device="cpu")),
               "target_ratio": 1.15}
        yield {**compare("x.to('cuda') vs x.to('cpu')", lambda: x.to("cuda"), lambda: x.to("cpu")),
               "target_ratio": 1.5}


def untouched() -> Iterator[dict[str, Any]]:
    """Ops without a device parameter: installed vs not installed."""
    a, b = torch.randn(64, 64), torch.randn(64, 64)
    cases = {"torch.add": lambda: torch.add(a, b), "torch.matmul": lambda: torch.matmul(a, b),
             "F.gelu": lambda: F.gelu(a)}
    originals = (torch.add, torch.matmul, F.gelu)
    for name, call in cases.items():
        best_native = best_installed = float("inf")
        for _ in range(3):
            best_native = min(best_native, per_call(call, number=5_000, repeat=5))
            with torchdevice.installed("cpu"):
                same = (torch.add, torch.matmul, F.gelu) == originals
                best_installed = min(best_installed, per_call(call, number=5_000, repeat=5))
        yield {"name": f"{name} installed vs not", "candidate_s": best_installed, "baseline_s": best_native,
               "ratio": best_installed / best_native, "same_object": same, "target_ratio": 1.0}


def training_step() -> Iterator[dict[str, Any]]:
    """One step of the GPT example through the runtime, against (1) the CPU-written twin
    (``gpt_train_cpu.train_step``: no GradScaler, as CPU programs are written) and (2) the same
    CUDA-written code spelled natively for the CPU (``"cpu"`` for ``"cuda"``): the runtime's own cost."""
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        import gpt_train
        import gpt_train_cpu
    finally:
        sys.path.pop(0)
    chars = sorted(set(gpt_train.CORPUS))
    data = torch.tensor([chars.index(c) for c in gpt_train.CORPUS], dtype=torch.long)
    x, y = next(gpt_train.batches(data, 32, 16, seed=0))

    def setup(device: str) -> tuple[Any, Any, Any]:
        torch.manual_seed(0)
        model = gpt_train.GPT(len(chars), 32).to(device)
        optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.1, fused=True)
        return model, optimizer, torch.amp.GradScaler(device)

    # gpt_train.train_step's own source with "cpu" for "cuda": it runs natively, runtime or not.
    namespace = vars(gpt_train).copy()
    exec(inspect.getsource(gpt_train.train_step).replace('"cuda"', '"cpu"'), namespace)
    step_for_cpu = namespace["train_step"]
    cpu_model, cpu_optimizer, _ = setup("cpu")
    native = setup("cpu")
    with torchdevice.installed("cpu"):
        redirected = setup("cuda")
        xc, yc = x.pin_memory().to("cuda", non_blocking=True), y.pin_memory().to("cuda", non_blocking=True)
        cuda_step = lambda: gpt_train.train_step(*redirected, xc, yc)  # noqa: E731
        cpu_written = lambda: gpt_train_cpu.train_step(cpu_model, cpu_optimizer, x, y)  # noqa: E731
        spelled_cpu = lambda: step_for_cpu(*native, x, y)  # noqa: E731
        timing = {"number": 20, "repeat": 5, "rounds": 5}
        yield {**compare("GPT step: CUDA-written via runtime vs CPU-written twin", cuda_step, cpu_written, **timing),
               "target_ratio": 1.02}
        yield {**compare("GPT step: CUDA-written via runtime vs same code with 'cpu'", cuda_step, spelled_cpu,
                         **timing), "target_ratio": 1.02}


IMPORT_TORCH = "import time; s = time.perf_counter(); import torch; print(time.perf_counter() - s)"
IMPORT_INSTALL = ("import time; s = time.perf_counter(); import torch; import torchdevice; torchdevice.install('cpu'); "
                  "print(time.perf_counter() - s)")


def import_cost() -> Iterator[dict[str, Any]]:
    """``import torch`` plus ``import torchdevice; install()`` vs ``import torch``: medians of fresh interpreters."""

    def seconds(code: str) -> float:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        return float(out.stdout.split()[-1])

    seconds(IMPORT_INSTALL)  # warm the file system cache and bytecode
    plain, installed = [], []
    for _ in range(7):
        plain.append(seconds(IMPORT_TORCH))
        installed.append(seconds(IMPORT_INSTALL))
    base, cand = statistics.median(plain), statistics.median(installed)
    yield {"name": "import torch + torchdevice.install() vs import torch", "candidate_s": cand, "baseline_s": base,
           "added_ms": (cand - base) * 1e3, "target_added_ms": 50}


def run() -> Iterator[dict[str, Any]]:
    yield from calls()
    yield from untouched()
    yield from training_step()
    yield from import_cost()
