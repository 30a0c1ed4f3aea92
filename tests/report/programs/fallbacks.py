"""A program whose ops fall back on a Mac, in two processes: ``F.adaptive_max_pool3d`` (no MPS kernel) N times and
float64 arithmetic; the main process (N=2) starts a subprocess python (N=3). Each process prints its pid and
its N as a JSON line."""

import json
import os
import subprocess
import sys

import torch
import torch.nn.functional as F

pools = 3 if sys.argv[1:] == ["child"] else 2
volume = torch.randn(1, 2, 4, 4, 4, device="cuda")
for _ in range(pools):
    F.adaptive_max_pool3d(volume, 2)
halves = torch.rand(8, dtype=torch.float64, device="cuda") * 0.5
torch.erfinv(halves)
print(json.dumps({"pid": os.getpid(), "pools": pools}), flush=True)
if pools == 2:
    subprocess.run([sys.executable, __file__, "child"], check=True)
