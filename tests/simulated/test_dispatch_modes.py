"""A program's own ``TorchDispatchMode`` on the simulated Mac (``FlopCounterMode``, selective activation
checkpointing, a logging mode): it sees the program's ops and the calls run, where the device's kernels and the
fallback engine's are Python kernels stacked on one dispatch key (torch reaches a Python kernel as the newest one of
its op and key while a mode is active, so a kernel calling the one below it called itself for ever)."""

from __future__ import annotations

import functools
from typing import Any

import torch
import torch.nn.functional as F
from mac_runs import on_both
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.checkpoint import CheckpointPolicy, checkpoint, create_selective_checkpoint_contexts
from torch.utils.flop_counter import FlopCounterMode


class Seen(TorchDispatchMode):
    """Records the aten ops it sees."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[str] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        self.ops.append(func._opname)
        return func(*args, **(kwargs or {}))


def under_modes() -> dict[str, Any]:
    torch.manual_seed(0)
    x = torch.randn(4, 6, device="cuda")
    seen = Seen()
    with seen:
        labels = torch.tensor([0, 1, 2, 3], device="cuda")
        values = [torch.softmax(x, 1), F.log_softmax(x, 1), F.cross_entropy(x, labels),
                  torch.zeros(4, dtype=torch.long, device="cuda").index_reduce(  # under MPS's int64 limit: routed
                      0, torch.tensor([0, 1], device="cuda"), torch.tensor([5, 6], device="cuda"), "amax"),
                  torch.cummax(x, 1).values,  # no MPS kernel: routed
                  x.double().sum()]  # float64: hosted
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.GELU(), torch.nn.Linear(8, 2)).cuda()
    with FlopCounterMode(display=False) as flops:
        model(x).sum().backward()

    def policy(ctx: Any, op: Any, *args: Any, **kwargs: Any) -> CheckpointPolicy:
        return CheckpointPolicy.MUST_SAVE if op is torch.ops.aten.mm.default else CheckpointPolicy.PREFER_RECOMPUTE

    w = torch.randn(6, 6, device="cuda", requires_grad=True)
    out = checkpoint(lambda t: torch.softmax(t @ w, 1).sin().sum(), x, use_reentrant=False,
                     context_fn=functools.partial(create_selective_checkpoint_contexts, policy))
    out.backward()
    return {"values": values, "seen": seen.ops, "flops": flops.get_total_flops(), "sac_grad": w.grad}


def test_a_programs_dispatch_modes_see_its_ops_and_the_calls_run_as_on_the_cpu_target():
    native, mac = on_both(under_modes)
    assert mac["flops"] == native["flops"] > 0
    assert {"_softmax", "_log_softmax", "nll_loss_forward", "index_reduce", "cummax"} <= set(mac["seen"])
    torch.testing.assert_close(mac["values"], native["values"])
    torch.testing.assert_close(mac["sac_grad"], native["sac_grad"])
