"""Gradients through the MLX route equal torch's.

The engine's kernels sit at the backend key, below autograd: the forward runs on MLX, and the
backward is the op's own derivative formula (``derivatives.yaml``), whose ops dispatch again (to
MLX where they are the routed op: ``mm``'s backward is two ``mm``). That holds for structured
kernels and for ``CompositeExplicitAutograd`` ops alike, which carry an explicit formula too
(``logsumexp``, ``mv``, ``masked_fill``, ``stack`` below); the autograd node is
torch's own. ``CompositeImplicitAutograd`` ops have no kernel to replace (the route check of the
consistency suite).
"""

from __future__ import annotations

from itertools import islice

import mlx_consistency as mc
import pytest
import torch
from outcomes import Call, compare, tensors

STRUCTURED = ["aten::exp", "aten::tanh", "aten::mm", "aten::sum.dim_IntList", "aten::mean.dim", "aten::cumsum",
              "aten::gelu", "aten::max.dim", "aten::index_select", "aten::cat", "aten::var.correction"]
COMPOSITE_EXPLICIT = ["aten::logsumexp", "aten::mv", "aten::masked_fill.Scalar", "aten::stack"]
SAMPLES = 4


def test_the_composite_explicit_ops_are_such():
    for name in COMPOSITE_EXPLICIT:
        assert torch._C._dispatch_has_kernel_for_dispatch_key(name, "CompositeExplicitAutograd"), name
        assert name in mc.registered(), name


@pytest.mark.parametrize("overload", STRUCTURED + COMPOSITE_EXPLICIT)
def test_gradients_through_the_mlx_route_equal_torchs(overload, fallbacks):
    torch.manual_seed(0)
    ran = 0
    valid = (c for c in mc.calls(overload, torch.float32, requires_grad=True)
             if not isinstance(c.native.result, Exception))
    for call in islice(valid, SAMPLES):
        native = _gradients(call)
        before = fallbacks[overload, "mlx"]
        with mc.mlx_route(overload):
            routed = _gradients(call)
        ran += fallbacks[overload, "mlx"] - before
        assert routed[0] == native[0], "another autograd node than torch's"
        compare(routed[1], native[1], None)
    assert ran, "no forward ran on MLX"


def _gradients(call: Call) -> tuple[list[str], list[torch.Tensor]]:
    """The autograd nodes of the call's floating results and the gradients of their sum, weighted by
    fixed random cotangents, with respect to its inputs."""
    done = call.run()
    result, inputs = done.result, done.after
    assert not isinstance(result, Exception), result
    outputs = [r for r in (result if isinstance(result, (tuple, list)) else (result,))
               if isinstance(r, torch.Tensor) and r.requires_grad]
    leaves = [t for t in tensors(inputs) if t.requires_grad]
    generator = torch.Generator().manual_seed(0)
    cotangents = [torch.randn(o.shape, generator=generator, dtype=o.dtype) for o in outputs]
    grads = torch.autograd.grad(outputs, leaves, cotangents, allow_unused=True)
    return [type(o.grad_fn).__name__ for o in outputs], [g if g is not None else torch.zeros(()) for g in grads]
