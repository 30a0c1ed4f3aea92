"""The runtime's cost: redirected calls against native ones, side by side in one process.

- ``torch.zeros(8, device="cuda")`` redirected vs ``torch.zeros(8, device="cpu")``;
- ``x.to("cuda")`` redirected vs ``x.to("cpu")``;
- a ``torch.autocast("cuda")`` block redirected vs ``torch.autocast("cpu")``;
- ``torch.device("cuda", 0)`` with the runtime installed (its stand-in for ``torch.device``) vs not;
- ops that take no device (``torch.add``, ``torch.matmul``, ``F.gelu``): with the runtime installed vs
  not installed (they are not wrapped: the same function object either way);
- one training step of ``examples/gpt_train.py`` (written for CUDA, through the runtime) vs
  ``examples/gpt_train_cpu.py`` (written for the CPU);
- ``import torchdevice; torchdevice.install()`` after ``import torch``, in fresh interpreters.

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
        # The one redirected call in a step of the GPT example: its whole cost to the step.
        yield {**compare("torch.autocast('cuda') vs torch.autocast('cpu'), entered and left",
                         lambda: autocast_block("cuda"), lambda: autocast_block("cpu")), "target_ratio": 1.5}


def autocast_block(device_type: str) -> None:
    with torch.autocast(device_type=device_type, dtype=torch.bfloat16):
        pass


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


def device_construction() -> Iterator[dict[str, Any]]:
    """``torch.device(...)`` through the stand-in that makes ``torch.device(0)`` ``cuda:0``, vs the C type."""
    best_native = best_installed = float("inf")
    for _ in range(3):
        best_native = min(best_native, per_call(lambda: torch.device("cuda", 0)))
        with torchdevice.installed("cpu"):
            best_installed = min(best_installed, per_call(lambda: torch.device("cuda", 0)))
    yield {"name": "torch.device('cuda', 0) installed vs not", "candidate_s": best_installed,
           "baseline_s": best_native, "ratio": best_installed / best_native}


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
    with torchdevice.installed("cpu"):
        redirected = setup("cuda")
        xc, yc = x.pin_memory().to("cuda", non_blocking=True), y.pin_memory().to("cuda", non_blocking=True)
        cuda_step = lambda: gpt_train.train_step(*redirected, xc, yc)  # noqa: E731
        cpu_written = lambda: gpt_train_cpu.train_step(cpu_model, cpu_optimizer, x, y)  # noqa: E731
        # The same model, optimizer and scaler objects as the redirected step: only the spelling differs.
        spelled_cpu = lambda: step_for_cpu(*redirected, xc, yc)  # noqa: E731
        timing = {"number": 20, "repeat": 5, "rounds": 9}
        yield {**compare("GPT step: CUDA-written via runtime vs CPU-written twin", cuda_step, cpu_written, **timing),
               "target_ratio": 1.02}
        yield {**compare("GPT step: CUDA-written via runtime vs same code with 'cpu'", cuda_step, spelled_cpu,
                         **timing), "target_ratio": 1.02}


IMPORT_INSTALL = ("import time; s = time.perf_counter(); import torch; t = time.perf_counter(); import torchdevice; "
                  "torchdevice.install('cpu'); print(t - s, time.perf_counter() - t)")


def import_cost() -> Iterator[dict[str, Any]]:
    """``import torchdevice; install()`` after ``import torch``, timed inside fresh interpreters (medians):
    the difference of two whole-interpreter timings would drown it in the noise of importing torch."""

    def seconds() -> tuple[float, float]:
        out = subprocess.run([sys.executable, "-c", IMPORT_INSTALL], capture_output=True, text=True, check=True)
        torch_s, added_s = out.stdout.split()[-2:]
        return float(torch_s), float(added_s)

    seconds()  # warm the file system cache and bytecode
    runs = [seconds() for _ in range(7)]
    torch_s = statistics.median(r[0] for r in runs)
    added_s = statistics.median(r[1] for r in runs)
    yield {"name": "import torchdevice + install() after import torch", "import_torch_s": torch_s,
           "added_ms": added_s * 1e3, "target_added_ms": 50}


def run() -> Iterator[dict[str, Any]]:
    yield from calls()
    yield from untouched()
    yield from device_construction()
    yield from training_step()
    yield from import_cost()
