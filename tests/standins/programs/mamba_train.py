"""mamba-ssm's Mamba block trained for a few AdamW steps, written for CUDA: the fused path (mamba_inner_fn:
causal_conv1d_cuda + selective_scan_cuda) and the unfused one (use_fast_path=False: causal_conv1d_fn +
selective_scan_fn), and the fused one under autocast to bfloat16. argv: OUT [reference or cuda [SEQLEN STEPS]]
(default 32 tokens, 4 steps); with ``reference`` the same training runs on the CPU through mamba-ssm's own
reference code instead (nn.Conv1d and selective_scan_ref; float32 throughout), so it needs no CUDA extension.
Prints the milliseconds per training step of each path (after the first)."""

import json
import sys
import time
import types

import torch

reference = len(sys.argv) > 2 and sys.argv[2] == "reference"
seqlen, steps = (int(sys.argv[3]), int(sys.argv[4])) if len(sys.argv) > 4 else (32, 4)
if reference:  # mamba-ssm imports its compiled scan unguarded; the reference path never calls it
    sys.modules["selective_scan_cuda"] = types.ModuleType("selective_scan_cuda")

from mamba_ssm import Mamba  # noqa: E402
from mamba_ssm.modules import mamba_simple  # noqa: E402

device = "cpu" if reference else "cuda"
if reference:
    from mamba_ssm.ops.selective_scan_interface import selective_scan_ref

    mamba_simple.causal_conv1d_fn, mamba_simple.selective_scan_fn = None, selective_scan_ref


def train(use_fast_path: bool, amp: bool = False) -> dict:
    torch.manual_seed(0)
    block = Mamba(d_model=16, d_state=16, d_conv=4, expand=2, use_fast_path=use_fast_path).to(device)
    optimizer = torch.optim.AdamW(block.parameters(), lr=1e-2, weight_decay=0.01)
    x = torch.randn(2, seqlen, 16).to(device)
    target = torch.randn(2, seqlen, 16).to(device)
    losses, first_grads, seconds = [], {}, []
    for step in range(steps):
        start = time.perf_counter()
        with torch.autocast(device, dtype=torch.bfloat16, enabled=amp and not reference):
            out = block(x)
        loss = torch.nn.functional.mse_loss(out.float(), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        seconds.append(time.perf_counter() - start)
        losses.append(loss.item())
        if step == 0:
            first_out = out.detach().float().cpu()
            first_grads = {k: p.grad.detach().cpu() for k, p in block.named_parameters()}
    state = {k: v.detach().cpu() for k, v in block.state_dict().items()}
    assert block.A_log.is_cuda != reference
    steady = seconds[1:] or seconds
    return {"losses": losses, "out": first_out, "grads": first_grads, "state": state,
            "ms": 1000 * sum(steady) / len(steady)}


results = {"fast": train(True), "unfused": train(False), "bf16": train(True, amp=True)}
torch.save(results, sys.argv[1])
print(json.dumps({path: round(r["ms"], 2) for path, r in results.items()}))
