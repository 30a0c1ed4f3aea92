"""A Triton kernel launch under the runtime against the same launch run natively in Triton's interpreter, and the
interpreter against the torch op.

The tutorial's vector add of 4,096 float32 in blocks of 1,024 (a grid of 4 programs): natively with
``TRITON_INTERPRET=1`` on CPU tensors, torchdevice not installed; under the runtime (``cpu``, ``mps-sim``) on
tensors made on ``"cuda"``; and ``torch.add`` of the same tensors. Each round times the native side, then installs,
times the runtime's side and uninstalls (installing is outside the timings); calls are timed in the process's CPU
time.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import Any

import torch

import torchdevice
from bench.timing import per_call

N, BLOCK = 4096, 1024


def run() -> Iterator[dict[str, Any]]:
    os.environ["TRITON_INTERPRET"] = "1"  # before triton decorates the kernel: natively, as the baseline runs it
    import triton
    import triton.language as tl

    @triton.jit
    def add_kernel(x_ptr, y_ptr, output_ptr, n_elements, BLOCK_SIZE: tl.constexpr):  # type: ignore[no-untyped-def]
        offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
        mask = offsets < n_elements
        tl.store(output_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask),
                 mask=mask)

    def launch(x: torch.Tensor, y: torch.Tensor, out: torch.Tensor) -> None:
        add_kernel[(triton.cdiv(N, BLOCK),)](x, y, out, N, BLOCK_SIZE=BLOCK)

    x, y, out = torch.rand(N), torch.rand(N), torch.empty(N)
    torch_add = per_call(lambda: torch.add(x, y, out=out), number=2000, repeat=5, timer=time.process_time)
    for target in ("cpu", "mps-sim"):
        native = runtime = float("inf")
        for _ in range(3):
            native = min(native, per_call(lambda: launch(x, y, out), number=20, repeat=3, timer=time.process_time))
            with torchdevice.installed(target):
                dx, dy, dout = x.to("cuda"), y.to("cuda"), torch.empty(N, device="cuda")
                runtime = min(runtime, per_call(lambda: launch(dx, dy, dout), number=20, repeat=3,  # noqa: B023
                                                timer=time.process_time))
        yield {"name": f"vector add launch, 4096 float32, runtime ({target}) vs native TRITON_INTERPRET=1",
               "candidate_s": runtime, "baseline_s": native, "ratio": runtime / native}
    yield {"name": "vector add, 4096 float32: native TRITON_INTERPRET=1 launch vs torch.add",
           "candidate_s": native, "baseline_s": torch_add, "ratio": native / torch_add}
