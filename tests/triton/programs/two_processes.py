"""A program whose main process and a subprocess it starts each launch a Triton kernel twice, for the report's
``triton`` section merged over the program's processes. ``python two_processes.py [child]``."""

import subprocess
import sys

import torch
import triton
import triton.language as tl


@triton.jit
def double_kernel(x_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(x_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) * 2, mask=mask)


x = torch.ones(100, device="cuda")
for _ in range(2):
    double_kernel[(triton.cdiv(100, 64),)](x, 100, BLOCK=64)
assert torch.equal(x.cpu(), torch.full((100,), 4.0))
if sys.argv[1:] != ["child"]:
    subprocess.run([sys.executable, __file__, "child"], check=True)
