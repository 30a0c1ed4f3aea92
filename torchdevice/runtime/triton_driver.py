"""Triton's active driver under the runtime: the interpreter's, where Triton would look for NVIDIA's driver.

Triton picks the driver of the GPU it finds (``libcuda``, ROCm); without one, ``triton.runtime.driver.active``
raises, and with it what programs and Triton's own helpers ask of it:
``get_active_torch_device()`` (the tutorials' ``DEVICE``), ``get_current_target()``, ``utils.get_device_properties``,
``triton.testing.do_bench`` (the device interface's events and ``synchronize``, the L2 cache to clear) and the
autotuner's benchmarker. :class:`InterpreterDriver` answers them as the emulated ``torch.cuda`` does: the device is
the one the program's ``cuda`` tensors are on, the target a CUDA GPU of the emulated capability, the device interface
``torch.cuda`` itself. Imported
only once the program has imported triton (:mod:`.triton_interpreter`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from types import SimpleNamespace
from typing import Any

import torch
from triton.backends.compiler import GPUTarget
from triton.backends.driver import GPUDriver

MAX_NUM_REGS = 65536
MAX_SHARED_MEM = 232448
"""Per-multiprocessor registers and shared memory that :meth:`Utils.get_device_properties` reports (an A100's):
programs size their launches from them; the interpreter has no such limits."""


def benchmark(fn: Callable[[], Any], quantiles: Sequence[float] | None = None, **_: Any) -> float | list[float]:
    """The autotuner's benchmarker: one timed run of ``fn`` (milliseconds), as every quantile asked for. Each config
    runs once, which checks it; timing the interpreter says nothing of a GPU, so more runs would buy nothing."""
    start = time.perf_counter()
    fn()
    ms = (time.perf_counter() - start) * 1e3
    return [ms] * len(quantiles) if quantiles else ms


class InterpretedKernel:
    """What ``kernel.warmup(...)`` returns under the runtime, where it would return a compiled kernel: launchable as
    one (``kernel[grid](*every argument, constexprs too)``), with the figures of a small compiled kernel (32 registers
    a thread, 1 KiB of shared memory, no spills) so that code sizing its launches from them (the fused softmax
    tutorial's occupancy) runs; the interpreter has neither registers nor shared memory."""

    n_regs = 32
    n_spills = 0

    def __init__(self, kernel: Any, num_warps: int = 4, num_stages: int = 3) -> None:
        self.kernel = kernel
        self.name = kernel.fn.__name__
        self.metadata = SimpleNamespace(shared=1024, num_warps=num_warps, num_stages=num_stages, name=self.name)

    def _init_handles(self) -> None:
        """Nothing to load: the interpreter runs the kernel's Python function."""

    def __getitem__(self, grid: Any) -> Callable[..., Any]:
        return lambda *args: self.kernel.run(*args, grid=grid, warmup=False)


class Utils:
    """``driver.active.utils``: what programs read of the device to size their launches."""

    @staticmethod
    def get_device_properties(device: int | torch.device | None = None) -> dict[str, int]:
        props = torch.cuda.get_device_properties(device)
        return {"multiprocessor_count": props.multi_processor_count, "warpSize": props.warp_size,
                "max_num_regs": MAX_NUM_REGS, "max_shared_mem": MAX_SHARED_MEM,
                "sm_clock_rate": 0, "mem_clock_rate": 0, "mem_bus_width": 0}


class InterpreterDriver(GPUDriver):
    """The driver Triton's interpreter runs under: the emulated CUDA device (see the module's docstring)."""

    utils = Utils()

    def __init__(self, device: torch.device) -> None:
        super().__init__()
        self.device = device
        """The device the program's ``cuda`` tensors say they are on (``cpu``, ``mps:0``)."""
        self.get_current_stream = lambda device=None: 0

    @classmethod
    def is_active(cls) -> bool:
        return True

    def map_python_to_cpp_type(self, ty: str) -> str:
        return ty

    def get_current_target(self) -> GPUTarget:
        major, minor = torch.cuda.get_device_capability(self.get_current_device())
        return GPUTarget("cuda", major * 10 + minor, 32)

    def get_active_torch_device(self) -> torch.device:
        """The device the program's ``cuda`` tensors say they are on, so that the tutorials' ``x.device == DEVICE``
        holds, as on a GPU."""
        return self.device

    def get_device_interface(self) -> Any:
        return torch.cuda

    def get_benchmarker(self) -> Callable[..., float | list[float]]:
        return benchmark

    def get_empty_cache_for_benchmark(self) -> None:
        return None  # no L2 cache to flush between runs

    def clear_cache(self, cache: None) -> None:
        pass
