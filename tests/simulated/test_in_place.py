"""In-place ops whose composite code writes through their ``out=`` overload with ``self`` as the output (``addr_``,
``abs_``, ``logical_and_``): the kernel sees one tensor and checks it as the in-place op does, on the simulated Mac's
kernels and through the engine's CPU route (``addr_`` of integers, under MPS's ``addr`` limit), as on the CPU."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from mac_runs import on_both


def outcome(work: Callable[[], Any]) -> Callable[[], Any]:
    """``work``'s result, or the type and message of what it raised."""
    def run() -> Any:
        try:
            return work()
        except RuntimeError as exc:
            return type(exc).__name__, str(exc)

    return run


def addr_into(shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    x = torch.full(shape, 2, dtype=dtype, device="cuda")
    x.addr_(torch.arange(1, 6, dtype=dtype, device="cuda"), torch.arange(1, 11, dtype=dtype, device="cuda"))
    return x


def logical_and_into() -> torch.Tensor:
    x = torch.tensor([True, False, True], device="cuda")
    x.logical_and_(torch.tensor([[True], [False]], device="cuda"))  # would broadcast self
    return x


def abs_of_a_view() -> torch.Tensor:
    x = torch.tensor([[-1.0, 2.0], [3.0, -4.0]], device="cuda")
    x.t().abs_()
    return x


LINES: dict[str, Callable[[], Any]] = {
    "addr_ into a matrix": lambda: addr_into((5, 10), torch.float32),
    "addr_ into a 0-d tensor": lambda: addr_into((), torch.float32),
    "addr_ of integers (routed)": lambda: addr_into((5, 10), torch.int32),
    "addr_ of integers into a 0-d tensor": lambda: addr_into((), torch.int64),
    "logical_and_ broadcasting self": logical_and_into,
    "abs_ of a view": abs_of_a_view,
}


@pytest.mark.parametrize("line", sorted(LINES))
def test_in_place_through_out_checks_and_writes_as_the_cpu(line):
    native, mac = on_both(outcome(LINES[line]))
    if isinstance(native, tuple):
        assert mac == native  # the CPU's exception and message ("2D tensor expected, got 0D tensor for input")
    else:
        torch.testing.assert_close(mac, native)
