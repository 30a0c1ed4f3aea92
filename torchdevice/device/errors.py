"""Which exceptions mean "this device cannot run this call" (fall back) rather than a user error.

Only these fall back; every other exception propagates unchanged. The texts are PyTorch's own:

- missing kernel, ``NotImplementedError`` from MPS's backend fallback (``aten/src/ATen/mps/MPSFallback.mm``):
  ``The operator 'aten::X' is not currently implemented for the MPS device. ...``; and the
  dispatcher's generic ``Could not run 'aten::X' with arguments from the 'MPS' backend`` (also
  ``SparseMPS`` and other functionality keys of the backend);
- unsupported dtype, ``TypeError`` from ``aten/src/ATen/mps/EmptyTensor.cpp`` and
  ``aten/src/ATen/native/mps/OperationUtils.mm``: ``Cannot convert a MPS Tensor to float64 dtype as
  the MPS framework doesn't support float64. Please use float32 instead.``, ``Cannot convert a
  float64 Tensor to MPS ...``, ``Trying to convert X to the MPS backend but it does not have support
  for that dtype.``, ``MPS BFloat16 is only supported on MacOS 14 or newer``; and kernels' own
  ``RuntimeError``s such as ``MPS does not support cumsum op with int64 input``.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Literal

Reason = Literal["kernel", "dtype"]
"""``kernel``: the device has no kernel for the op (any dtype fails); ``dtype``: this dtype fails."""

COMPATIBILITY_ERRORS = (RuntimeError, TypeError)
"""The exception types a device-compatibility error can have (``NotImplementedError`` is a
``RuntimeError``); catch these, then :func:`classify`."""


@cache
def _patterns(backend: str) -> tuple[tuple[type[BaseException], re.Pattern[str], Reason], ...]:
    b = re.escape(backend)
    return (
        (NotImplementedError, re.compile(rf"The operator '[\w:.]+' is not currently implemented for the {b} device"),
         "kernel"),
        (NotImplementedError, re.compile(rf"Could not run '[\w:.]+' with arguments from the '\w*{b}' backend"),
         "kernel"),
        (TypeError, re.compile(rf"Cannot convert a {b} Tensor to \w+ dtype as the {b} framework doesn't support"),
         "dtype"),
        (TypeError, re.compile(rf"Cannot convert a \w+ Tensor to {b} as the {b} framework doesn't support"), "dtype"),
        (TypeError, re.compile(rf"Trying to convert \w+ to the {b} backend but it does not have support for that "
                               "dtype"), "dtype"),
        (TypeError, re.compile(rf"{b} \w+ is only supported on MacOS"), "dtype"),
        (RuntimeError, re.compile(rf"^{b} does(?: not|n't) support .*\b(?:type|dtype|input|inputs)\b"), "dtype"),
    )


def classify(exc: BaseException, backend: str) -> Reason | None:
    """Why ``exc`` says the device named ``backend`` (``"MPS"``) cannot run the call; None: not a
    device-compatibility error (a user error, which must propagate)."""
    message = str(exc)
    for kind, pattern, reason in _patterns(backend):
        if isinstance(exc, kind) and pattern.search(message):
            return reason
    return None
