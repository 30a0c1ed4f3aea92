"""The records of ``torchdevice_generated.cuda_kernels_table.ALERTS``: CUDA's determinism alerts, one row each.

``codegen/overlays/cuda_kernels.py`` validates ``catalog/overlays/cuda_kernels.yaml`` and writes each condition as
clauses in the normal form below; :mod:`torchdevice.device.determinism` evaluates them on a call's aten arguments.
"""

from __future__ import annotations

from typing import Any, NamedTuple

CLAUSES: dict[str, str] = {
    "value": "(arg, values): the argument's value is one of the values",
    "given": "(arg,): the optional argument is given (not None)",
    "dtype": "(arg, dtypes): the tensor argument has one of the dtypes",
    "nonempty": "(arg,): the tensor argument has at least one element",
}
"""Each clause kind and what its normal form ``(kind, *fields)`` holds; a row with no clause alerts on every call."""


class AlertRow(NamedTuple):
    """A row of ``torchdevice_generated.cuda_kernels_table.ALERTS``: where CUDA's kernels of ``overloads`` call
    ``at::globalContext().alertNotDeterministic(alert)``."""

    name: str
    """The overlay record's key."""
    overloads: tuple[str, ...]
    """Dispatcher names (``aten::histc``, ``aten::histc.out``)."""
    alert: str
    """The string the kernel hands ``alertNotDeterministic``: the start of torch's message."""
    when: tuple[tuple[Any, ...], ...]
    """Clauses in normal form (:data:`CLAUSES`), all of which hold; none: every call."""
    source: str
    """Where the call is: file and function of aten/src/ATen."""
    note: str
    """What the record's curator wants known (torch's documentation disagreeing, say); '' mostly."""
