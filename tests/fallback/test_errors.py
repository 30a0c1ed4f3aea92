"""Device-compatibility errors are told from user errors by PyTorch's own messages: those of MPS's limits table,
every one checked against torch 2.13's macOS wheel when the catalog loads."""

from __future__ import annotations

import pytest
import torch

from torchdevice.device import limits
from torchdevice.device.errors import classify

GENERIC = {limit.name: limit for limit in limits.generic()}
SPECIFIC = [limits.limits_of(torch.ops.aten._adaptive_avg_pool2d.default)[0],
            limits.limits_of(torch.ops.aten.index_reduce.default)[0]]


def test_missing_kernel_messages():
    missing = limits.Limit(GENERIC["missing_kernel"].row, torch.ops.aten._linalg_solve_ex.result)
    assert classify(missing.exception((), {}), "MPS") == "kernel"


@pytest.mark.parametrize("name", sorted(n for n, limit in GENERIC.items() if limit.row.reason == "dtype"))
def test_unsupported_dtype_messages(name):
    x = torch.ones(2, dtype=torch.complex128 if "complex" in name or "dtype" in name else torch.float64)
    assert classify(GENERIC[name].exception((x,), {}), "MPS") == "dtype"


def test_dtype_conversion_message_names_the_dtype():
    exc = GENERIC["dtype_conversion"].exception((torch.ones(2, dtype=torch.complex128),), {})
    assert str(exc) == "Trying to convert ComplexDouble to the MPS backend but it does not have support for that dtype."


def test_limit_messages_are_limits_not_verdicts():
    for limit in SPECIFIC:
        assert classify(limit.exception((torch.ones(1, 1, 5, 5, dtype=torch.int64), [3, 3]), {}), "MPS") == "limit"
    for limit in SPECIFIC:
        assert classify(limit.exception((torch.ones(1, 1, 5, 5), [3, 3]), {}), "CPU") is None


def test_dispatcher_message_names_the_backend():
    with pytest.raises(NotImplementedError) as info:  # a real one: no SparseCPU kernel for cumsum
        torch.cumsum(torch.ones(2, 2).to_sparse(), 0)
    assert classify(info.value, "CPU") == "kernel"
    assert classify(info.value, "MPS") is None


def user_errors() -> list[BaseException]:
    calls = [
        lambda: torch.ones(2) + torch.ones(3),
        lambda: torch.cumsum(torch.ones(2), 3),
        lambda: torch.add(torch.ones(2), "a"),  # type: ignore[call-overload]
        lambda: torch.ones(2, 3) @ torch.ones(2, 3),
        lambda: torch.gather(torch.ones(3, 3), 0, torch.zeros(2, dtype=torch.long)),
        lambda: torch.ones(2).view(3),
    ]
    errors: list[BaseException] = []
    for call in calls:
        with pytest.raises(Exception) as info:
            call()
        errors.append(info.value)
    return errors


def test_user_errors_are_not_device_errors():
    errors = user_errors()
    assert all(classify(e, "MPS") is None for e in errors)
    assert all(classify(e, "CPU") is None for e in errors)


def test_message_under_the_wrong_exception_type_is_not_trusted():
    assert classify(ValueError(str(GENERIC["float64_tensor"].exception((), {}))), "MPS") is None
    missing = limits.Limit(GENERIC["missing_kernel"].row, torch.ops.aten.cumsum.default).exception((), {})
    assert classify(TypeError(str(missing)), "MPS") is None
