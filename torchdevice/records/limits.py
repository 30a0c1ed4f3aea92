"""The records of ``torchdevice_generated.limits_table.LIMITS``: MPS's limits, one row each.

``codegen/overlays/limits.py`` validates ``catalog/overlays/limits.yaml`` and writes each condition as clauses in
the normal form below; :mod:`torchdevice.device.limits` evaluates them on a call's aten arguments.
"""

from __future__ import annotations

from typing import Any, NamedTuple

ANY = "*"
"""``overloads`` of a generic refusal: every op."""

DTYPE_GROUPS: dict[str, tuple[str, ...]] = {
    "floating": ("float16", "bfloat16", "float32", "float64"),
    "complex": ("complex32", "complex64", "complex128"),
    "integral": ("uint8", "int8", "int16", "int32", "int64", "uint16", "uint32", "uint64"),
}
"""Names a ``dtype`` clause may use for several dtypes; any other name is one dtype (``torch.<name>``)."""

CLAUSES: dict[str, str] = {
    "dtype": "(arg, dtypes): the tensor argument (or any tensor of a list argument) has one of the dtypes",
    "asks_wide": "(arg,): the dtype argument asks for float64 or complex128",
    "any_dtype": "(dtypes,): a tensor argument, or a dtype argument, is one of the dtypes (generic refusals)",
    "any_size_above": "(n,): a tensor argument has a dimension above n (generic refusals)",
    "pool_sizes": "(input, output, case): adaptive pooling from the last two sizes of tensor `input` to `output` "
                  "(a size list, or a tensor's last two sizes); case shrink_not_divisible (each input size >= the "
                  "output's, one not a multiple), grow_not_divisible (each smaller or equal, an output size not a "
                  "multiple), mixed (one side shrinks, the other grows), not_divisible (either divisibility fails)",
    "dropout_without_grad": "(p, inputs): dropout probability argument p > 0 while no tensor of inputs requires "
                            "grad (or grad mode is off)",
    "ndim_above": "(arg, n): the tensor argument has more than n dimensions (a size list: more than n sizes)",
    "numel_above": "(arg, n): the tensor argument has more than n elements",
    "empty": "(arg,): the tensor argument has no elements",
    "on_host": "(arg, is): the argument, a device or a tensor, is (or is not) the host's (a device None, a tensor's "
               "own, is not)",
    "count_above": "(arg, n): the list of index tensors indexes more than n dimensions (a bool mask its own)",
    "product_above": "(refs, n): the product of the referenced sizes is above n",
    "size_above": "(refs, n): one of the referenced sizes is above n",
    "sizes_differ": "(refs,): the referenced sizes are not all equal",
    "conv_output_above": "(n,): a dimension of the convolution's output (input, weight, stride, padding, "
                         "dilation) is above n",
    "macos_below": "(major, minor): the Mac runs an older macOS",
    "value": "(arg, test, operand): the argument equals / is in / is above the operand",
    "contiguous": "(arg, is): the tensor argument is (or is not) contiguous",
}
"""Each clause kind and what its normal form ``(kind, *fields)`` holds. A reference (``refs``) is an argument
name followed by indices: ``self.0`` is ``self.size(0)``, ``hx.1.2`` is ``hx[1].size(2)``, ``N`` an int
argument; it is written ``(name, index, ...)``."""


class ProbeRow(NamedTuple):
    """The call ``torchdevice probe`` makes to see the limit on a device (tensors written ``"float32[2, 3]"``)."""

    op: str
    """The dispatcher name of the overload called."""
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    skip: str
    """Why the limit is not probed ('' when it is)."""


class LimitRow(NamedTuple):
    """A row of ``torchdevice_generated.limits_table.LIMITS``."""

    name: str
    overloads: tuple[str, ...]
    """Dispatcher names (``aten::sum.dim_IntList``), or (:data:`ANY`,) for a generic refusal."""
    when: tuple[tuple[Any, ...], ...]
    """Clauses in normal form (:data:`CLAUSES`), all of which hold; none: always."""
    raises: str
    """The exception type's name; '' when MPS runs the call and returns other values."""
    message: tuple[str, ...]
    """The message's pieces; ``{...}`` pieces stand for what is inserted."""
    reason: str
    """Generic refusals: ``kernel`` or ``dtype``; '' for the others."""
    why: str
    source: str
    cuda_runs: bool
    routed: bool
    cpu: str
    """The CPU's refusal of the call, '' when the CPU runs it."""
    instead: str
    """The dispatcher name of the overload the CPU runs in place of an MPS-only one."""
    probe: ProbeRow
