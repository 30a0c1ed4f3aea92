"""Triton kernels run through Triton's own interpreter, over the tensors' memory, where no GPU compiles them.

A program written for NVIDIA GPUs may carry its own ``@triton.jit`` kernels (liger-kernel, unsloth,
flash-linear-attention). Under the runtime ``torch.cuda.is_available()`` is true, so such a program launches them,
and Triton would compile them for a GPU it cannot find. While installed, the runtime sets ``TRITON_INTERPRET=1``,
which Triton reads when it decorates a kernel (``triton.jit`` then makes an ``InterpretedFunction``), and once the
program imports triton (nothing is imported before):

- Triton's active driver is :class:`~.triton_driver.InterpreterDriver` (the emulated CUDA device: the device,
  target, properties, ``do_bench``'s events and the autotuner's benchmarker);
- a kernel decorated before the installation (a ``JITFunction``) is launched, and called from another kernel,
  through an ``InterpretedFunction`` of the same function; ``kernel.warmup(...)`` returns a launchable
  :class:`~.triton_driver.InterpretedKernel` where it would return a compiled kernel;
- a Python float given to a kernel is an fp32 scalar, as Triton's JIT makes it (the interpreter keeps a float), and
  libdevice's math functions run (:mod:`.triton_libdevice`);
- each launch is counted per kernel with its time (:func:`torchdevice.reporting.counts.record_triton`, the
  report's ``triton`` section), and a kernel the interpreter cannot run raises :class:`TritonKernelError`, naming
  the kernel, its file and the reason, chained from the interpreter's error.

The interpreter copies each tensor's storage to the host (``untyped_storage().cpu()``), runs every program of the
grid on NumPy views of it, and copies it back into the device's storage: a simulated device's tensors are read and
written through their own copy kernels.
"""

from __future__ import annotations

import inspect
import os
import time
import weakref
from types import ModuleType, TracebackType
from typing import Any

import torch

from torchdevice.patching import Patcher
from torchdevice.reporting.counts import record_triton

VARIABLE = "TRITON_INTERPRET"


class TritonKernelError(RuntimeError):
    """A Triton kernel that Triton's interpreter could not run (the interpreter's error is its ``__cause__``)."""


def activate(patcher: Patcher, device: torch.device) -> None:
    """Interpret Triton kernels until ``patcher.restore()`` (``device``: what the program's ``cuda`` tensors say they
    are on)."""
    before = os.environ.get(VARIABLE)
    os.environ[VARIABLE] = "1"

    def restore() -> None:
        if before is None:
            os.environ.pop(VARIABLE, None)
        else:
            os.environ[VARIABLE] = before

    patcher.defer(restore)
    patcher.after_import("triton", lambda triton: _patch(patcher, triton, device))


def _patch(patcher: Patcher, triton: ModuleType, device: torch.device) -> None:
    from triton.runtime import interpreter, jit

    from torchdevice.runtime.triton_driver import InterpretedKernel, InterpreterDriver
    from torchdevice.runtime.triton_libdevice import swapped

    patcher.set(triton.runtime.driver, "_active", InterpreterDriver(device))
    launch = interpreter.InterpretedFunction.run
    interpreted: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()

    def run(self: Any, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> Any:
        if warmup:
            return InterpretedKernel(self, kwargs.get("num_warps", 4), kwargs.get("num_stages", 3))
        args, kwargs = _fp32_scalars(self, args, kwargs)
        start = time.perf_counter()
        try:
            with swapped(self.fn):
                result = launch(self, *args, grid=grid, warmup=warmup, **kwargs)
        except interpreter.InterpreterError as exc:
            raise TritonKernelError(_explain(self.fn, exc, device)) from exc
        record_triton(f"{self.fn.__module__}.{self.fn.__qualname__}", time.perf_counter() - start)
        return result

    call = interpreter.InterpretedFunction.__call__

    def device_call(self: Any, *args: Any, **kwargs: Any) -> Any:
        with swapped(self.fn):
            return call(self, *args, **kwargs)

    def as_interpreted(kernel: Any) -> Any:
        if kernel not in interpreted:
            interpreted[kernel] = interpreter.InterpretedFunction(kernel.fn)
        return interpreted[kernel]

    patcher.set(interpreter.InterpretedFunction, "run", run)
    patcher.set(interpreter.InterpretedFunction, "__call__", device_call)
    patcher.set(jit.JITFunction, "run", lambda self, *args, **kwargs: as_interpreted(self).run(*args, **kwargs))
    patcher.set(jit.JITFunction, "__call__", lambda self, *args, **kwargs: as_interpreted(self)(*args, **kwargs))


def _fp32_scalars(kernel: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple[Any, ...],
                                                                                       dict[str, Any]]:
    """The launch's Python floats as fp32 scalars, as Triton's JIT specializes them, where the interpreter would keep
    Python floats (which have no ``.to``: liger-kernel's ``eps.to(tl.float32)`` fails on them); constexprs stay."""
    import numpy
    import triton.language as tl
    from triton.runtime.interpreter import TensorHandle
    from triton.runtime.jit import _normalize_ty

    def fp32(name: str, value: Any) -> Any:
        if type(value) is not float or _normalize_ty(hints.get(name)) == "constexpr":
            return value
        return tl.tensor(TensorHandle(numpy.array([value], numpy.float32), tl.float32), tl.float32)

    hints = inspect.get_annotations(kernel.fn)
    return (tuple(fp32(name, value) for name, value in zip(kernel.arg_names, args, strict=False)),
            {name: fp32(name, value) for name, value in kwargs.items()})


def _explain(fn: Any, exc: BaseException, device: torch.device) -> str:
    """What a failed launch says: the kernel, where it is defined, and the interpreter's reason (the error at the root
    of its chain: a device function's failure is wrapped once more by the kernel's)."""
    code = fn.__code__
    cause = exc
    while cause.__cause__ is not None:
        cause = cause.__cause__
    at = _line_in(cause.__traceback__, code.co_filename)
    reason = f"{type(cause).__name__}: {cause}" + (f" (at line {at})" if at is not None else "")
    return (f"Triton kernel {fn.__module__}.{fn.__qualname__} ({code.co_filename}:{code.co_firstlineno}) cannot run "
            f"in Triton's interpreter, which runs Triton kernels on {device} (no GPU compiles them there): {reason}")


def _line_in(traceback: TracebackType | None, filename: str) -> int | None:
    """The line of the innermost frame of ``traceback`` in ``filename``."""
    line = None
    while traceback is not None:
        if traceback.tb_frame.f_code.co_filename == filename:
            line = traceback.tb_lineno
        traceback = traceback.tb_next
    return line
