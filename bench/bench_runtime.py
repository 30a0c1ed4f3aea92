"""The runtime's cost as a user sees it: each redirected call against plain PyTorch with torchdevice NOT
installed, in the same process, in alternating rounds (one round uninstalled, one installed, ...).

- ``torch.zeros(8, device="cuda")`` redirected vs plain ``torch.zeros(8, device="cpu")``;
- ``x.to("cuda")`` (a host-to-device move: a copy, as on a GPU) vs plain ``x.to("cpu", copy=True)``, a copy
  compared with a copy; and vs plain ``x.to("cpu")`` (a no-op), for what the wrapper alone costs;
- ``x.new_ones(8)`` (``x`` on the CPU) redirected vs plain;
- a ``torch.autocast("cuda")`` block redirected vs a plain ``torch.autocast("cpu")`` block;
- ``torch.device("cuda", 0)`` with the runtime installed (its stand-in for ``torch.device``) vs not;
- ops that take no device (``torch.add``, ``torch.matmul``, ``F.gelu``): with the runtime installed vs
  not installed (they are not wrapped: the same function object either way);
- one training step of ``examples/gpt_train.py`` (written for CUDA, through the runtime) vs the same
  step spelled for the CPU (``"cpu"`` for ``"cuda"``), on the same model objects, without torchdevice;
- ``import torchdevice; torchdevice.install()`` after ``import torch``, in fresh interpreters.

The **floor**: each plain call is also timed through a minimal pass-through Python wrapper put where the
runtime puts its own (``torch.zeros = lambda *a, **k: original(*a, **k)``, likewise ``Tensor.to``,
``Tensor.new_ones``), torchdevice not installed: what any Python-level wrapper costs at the least.
``ratio`` is candidate over baseline, ``floor_ratio`` the floor's wrapper over the same baseline; each
row also names the target it is judged against. Calls are timed in this process's CPU time
(``time.process_time``): on a shared machine, wall time mostly measures the other processes.
"""

from __future__ import annotations

import contextlib
import inspect
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

import torchdevice
from bench.timing import per_call

ROOT = Path(__file__).resolve().parent.parent


@contextlib.contextmanager
def passthrough(owner: Any, attribute: str) -> Iterator[None]:
    """The floor: ``owner.attribute`` replaced by the least a Python-level wrapper can be, where the runtime
    puts its own (so ``x.to(...)`` reaches it as a bound method, as it reaches the runtime's)."""
    original = getattr(owner, attribute)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return original(*args, **kwargs)

    setattr(owner, attribute, wrapper)
    try:
        yield
    finally:
        setattr(owner, attribute, original)


def against_plain(name: str, candidate: Callable[[], object], baseline: Callable[[], object],
                  floor: tuple[Any, str] | None = None, *, rounds: int = 5, **timing: Any) -> dict[str, Any]:
    """``candidate`` with the runtime installed on the CPU vs ``baseline`` with torchdevice not installed (and,
    with ``floor = (owner, attribute)``, ``baseline`` through a pass-through wrapper of that attribute), in
    alternating rounds; best of each."""
    timing.setdefault("timer", time.process_time)
    best_c = best_b = best_f = float("inf")
    for _ in range(rounds):
        best_b = min(best_b, per_call(baseline, **timing))
        if floor is not None:
            with passthrough(*floor):
                best_f = min(best_f, per_call(baseline, **timing))
        with torchdevice.installed("cpu"):
            best_c = min(best_c, per_call(candidate, **timing))
    row = {"name": name, "candidate_s": best_c, "baseline_s": best_b, "ratio": best_c / best_b}
    if floor is not None:
        row |= {"floor_s": best_f, "floor_ratio": best_f / best_b}
    return row


def calls() -> Iterator[dict[str, Any]]:
    """Redirected calls vs plain PyTorch, and the floor of a pass-through wrapper."""
    x = torch.ones(8)
    yield {**against_plain("torch.zeros(8, device='cuda') vs plain device='cpu'",
                           lambda: torch.zeros(8, device="cuda"), lambda: torch.zeros(8, device="cpu"),
                           (torch, "zeros")), "target_ratio": 1.15}
    yield {**against_plain("x.to('cuda') vs plain x.to('cpu', copy=True)", lambda: x.to("cuda"),
                           lambda: x.to("cpu", copy=True), (torch.Tensor, "to")), "target_ratio": 1.15}
    yield {**against_plain("x.to('cuda') vs plain x.to('cpu') (no copy)", lambda: x.to("cuda"),
                           lambda: x.to("cpu"), (torch.Tensor, "to")), "target_ratio": 1.5}
    yield {**against_plain("x.new_ones(8) vs plain", lambda: x.new_ones(8), lambda: x.new_ones(8),
                           (torch.Tensor, "new_ones")), "target_ratio": 1.15}
    # The one redirected call in a step of the GPT example: its whole cost to the step.
    yield {**against_plain("torch.autocast('cuda') block vs plain torch.autocast('cpu') block",
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
            best_native = min(best_native, per_call(call, number=5_000, repeat=5, timer=time.process_time))
            with torchdevice.installed("cpu"):
                same = (torch.add, torch.matmul, F.gelu) == originals
                best_installed = min(best_installed, per_call(call, number=5_000, repeat=5, timer=time.process_time))
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
    """One step of the GPT example through the runtime vs the same CUDA-written code spelled for the CPU
    (``"cpu"`` for ``"cuda"``) with torchdevice not installed, on the same model, optimizer and scaler objects:
    the runtime's whole cost to a step."""
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        import gpt_train
    finally:
        sys.path.pop(0)
    chars = sorted(set(gpt_train.CORPUS))
    data = torch.tensor([chars.index(c) for c in gpt_train.CORPUS], dtype=torch.long)
    x, y = next(gpt_train.batches(data, 32, 16, seed=0))
    # gpt_train.train_step's own source with "cpu" for "cuda": it runs natively, runtime or not.
    namespace = vars(gpt_train).copy()
    exec(inspect.getsource(gpt_train.train_step).replace('"cuda"', '"cpu"'), namespace)
    step_for_cpu = namespace["train_step"]
    with torchdevice.installed("cpu"):
        torch.manual_seed(0)
        model = gpt_train.GPT(len(chars), 32).to("cuda")
        optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.1, fused=True)
        scaler = torch.amp.GradScaler("cuda")
        xc, yc = x.pin_memory().to("cuda", non_blocking=True), y.pin_memory().to("cuda", non_blocking=True)
    cuda_step = lambda: gpt_train.train_step(model, optimizer, scaler, xc, yc)  # noqa: E731
    spelled_cpu = lambda: step_for_cpu(model, optimizer, scaler, xc, yc)  # noqa: E731
    yield {**against_plain("GPT step: CUDA-written via runtime vs same code with 'cpu', plain", cuda_step,
                           spelled_cpu, number=10, repeat=3, rounds=7), "target_ratio": 1.02}


IMPORT_INSTALL = """
import gc, time
s = time.perf_counter(); import torch; t = time.perf_counter()
collecting = [0.0, 0.0]
def timed(phase, info):
    collecting[phase == "stop"] += time.perf_counter() * (1 if phase == "stop" else -1)
gc.callbacks.append(timed)
import torchdevice; torchdevice.install("cpu"); u = time.perf_counter()
print(t - s, u - t, sum(collecting))
"""
"""Prints the seconds of ``import torch``, of ``import torchdevice`` and ``install()``, and of the garbage
collector's passes during the latter."""


def import_cost() -> Iterator[dict[str, Any]]:
    """``import torchdevice; install()`` after ``import torch``, timed inside fresh interpreters (medians):
    the difference of two whole-interpreter timings would drown it in the noise of importing torch. The
    garbage collector's passes during it are reported apart: importing torch leaves a full collection due
    (~80 ms over its objects), which the next ~70,000 allocations of any program set off, with the runtime
    installed or not."""

    def seconds() -> tuple[float, float, float]:
        out = subprocess.run([sys.executable, "-c", IMPORT_INSTALL], capture_output=True, text=True, check=True)
        torch_s, added_s, collecting_s = out.stdout.split()[-3:]
        return float(torch_s), float(added_s), float(collecting_s)

    seconds()  # warm the file system cache and bytecode
    runs = [seconds() for _ in range(7)]
    torch_s = statistics.median(r[0] for r in runs)
    added_s = statistics.median(r[1] for r in runs)
    own_s = statistics.median(r[1] - r[2] for r in runs)
    yield {"name": "import torchdevice + install() after import torch", "import_torch_s": torch_s,
           "added_ms": added_s * 1e3, "added_without_collections_ms": own_s * 1e3, "target_added_ms": 50}


def run() -> Iterator[dict[str, Any]]:
    yield from calls()
    yield from untouched()
    yield from device_construction()
    yield from training_step()
    yield from import_cost()
