"""Which exceptions mean "this device cannot run this call" (fall back) rather than a user error.

Only these fall back; every other exception propagates unchanged. The patterns are the messages of MPS's limits
table (:mod:`torchdevice.device.limits`, from ``catalog/overlays/limits.yaml``, every message checked against
the strings of torch 2.13's own macOS wheel), each under its exception type:

- ``kernel``: no kernel for the op, any dtype (MPS's backend fallback, ``The operator 'aten::X' is not
  currently implemented for the MPS device...``; the dispatcher's ``Could not run 'aten::X' with arguments from
  the 'MPS' backend``, also ``SparseMPS`` and the backend's other keys, and ``'CPU'`` on the CPU);
- ``dtype``: a dtype the device has no tensors of (float64, complex128: ``Cannot convert a MPS Tensor to float64
  dtype ...``, ``Trying to convert ComplexDouble to the MPS backend ...``);
- ``limit``: one of MPS's limits that CUDA runs (``Adaptive pool MPS: input sizes must be divisible by output sizes
  ...``): these arguments fail, others of the same dtype run. A limit CUDA has too is the program's error.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Literal

from torchdevice.device import limits

Reason = Literal["kernel", "dtype", "limit"]
"""``kernel``: the device has no kernel for the op (any dtype fails); ``dtype``: this dtype fails; ``limit``: these
arguments fail (a verdict about the op or its dtype would be wrong)."""

COMPATIBILITY_ERRORS = (RuntimeError, TypeError)
"""The exception types a device-compatibility error can have (``NotImplementedError`` is a
``RuntimeError``); catch these, then :func:`classify`."""

@cache
def _patterns(backend: str) -> tuple[tuple[type[BaseException], re.Pattern[str], Reason], ...]:
    generic = [(limits.EXCEPTIONS[row.raises], pattern, row.reason or "limit")
               for row, pattern in limits.backend_patterns(backend)]
    specific = [(limits.EXCEPTIONS[row.raises], limits.message_pattern(row.message, backend), "limit")
                for row in limits.table()
                if row.overloads != (limits.ANY,) and row.raises and row.cuda_runs and backend == "MPS"]
    return tuple((kind, pattern, reason) for kind, pattern, reason in generic + specific)  # type: ignore[misc]


def classify(exc: BaseException, backend: str) -> Reason | None:
    """Why ``exc`` says the device named ``backend`` (``"MPS"``) cannot run the call; None: not a
    device-compatibility error (a user error, which must propagate)."""
    message = str(exc)
    for kind, pattern, reason in _patterns(backend):
        if isinstance(exc, kind) and pattern.match(message):
            return reason
    return None
