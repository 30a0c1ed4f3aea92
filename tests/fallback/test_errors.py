"""Device-compatibility errors are told from user errors by PyTorch's own messages."""

from __future__ import annotations

import pytest
import torch

from torchdevice.device.errors import classify
from torchdevice.simulated.kernels import MISSING, NO_FLOAT64

# Texts of aten/src/ATen/mps/EmptyTensor.cpp, native/mps/OperationUtils.mm and MPS kernels.
MPS_DTYPE_ERRORS = [
    TypeError(NO_FLOAT64),
    TypeError("Cannot convert a float64 Tensor to MPS as the MPS framework doesn't support float64. "
              "Please use float32 instead."),
    TypeError("Trying to convert ComplexDouble to the MPS backend but it does not have support for that dtype."),
    TypeError("MPS BFloat16 is only supported on MacOS 14 or newer"),
    RuntimeError("MPS does not support erfinv op with scalar type: Double"),
    RuntimeError("MPS does not support cumsum op with int64 input"),
]


def test_missing_kernel_messages():
    assert classify(NotImplementedError(MISSING.format(op="aten::_linalg_solve_ex.result")), "MPS") == "kernel"
    older = ("The operator 'aten::upsample_bicubic2d.out' is not currently implemented for the MPS device. If you "
             "want this op to be added in priority during the prototype phase of this feature, please comment on "
             "https://github.com/pytorch/pytorch/issues/77764.")
    assert classify(NotImplementedError(older), "MPS") == "kernel"


@pytest.mark.parametrize("exc", MPS_DTYPE_ERRORS, ids=lambda e: str(e)[:40])
def test_unsupported_dtype_messages(exc):
    assert classify(exc, "MPS") == "dtype"


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
    assert classify(ValueError(NO_FLOAT64), "MPS") is None
    assert classify(TypeError(MISSING.format(op="aten::cumsum")), "MPS") is None
