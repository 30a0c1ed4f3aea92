"""MLX equivalents of aten ops (``catalog/overlays/mlx.yaml``), keyed like ``native_functions.yaml``.

A record says which MLX callable computes an aten op and how each schema parameter reaches it::

    sum:
      mlx: mlx.core.sum
      args: {self: 0, dim: axis, keepdim: keepdims}
      values: {dim: axis, dtype: accumulate}
      dtypes: [float, int, bool]

The key is an op (every overload of it and of its in-place op that the record covers) or one
overload (``max.dim``). ``args`` maps a schema parameter to an MLX parameter: a name (passed by
keyword) or a position (passed positionally; MLX's leading parameters are positional-only).
Parameters that are neither in ``args``, ``values`` nor ``ignore`` must keep their default: the
generated shim refuses any other value (``MlxUnsupported``) so the call runs elsewhere.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Transform = Literal[
    "axis", "vector_axis", "ddof_correction", "repeats", "zero_if_none", "reduction", "cast_input", "accumulate",
]
"""How an argument's value is translated: ``torchdevice.fallback.mlx_bridge.translate_<kind>(value, ref)``
(``ref``: the first tensor input). ``cast_input`` and ``accumulate`` apply the op's ``dtype=`` to the
first tensor input instead (``mlx_bridge.cast_input``); ``accumulate`` also widens integral inputs to
int64 as torch's sums and products do."""

INPUT_CASTS = ("cast_input", "accumulate")

Family = Literal["float", "float32", "int", "bool", "complex"]
"""Dtype families (``torchdevice.fallback.mlx_bridge.FAMILIES``)."""


@dataclass(frozen=True)
class MlxCall:
    """A second MLX call whose result is the second output (e.g. the indices of ``max.dim``)."""

    mlx: str
    args: dict[str, str | int] = field(default_factory=dict)
    fixed: dict[str, str | int | float | bool] = field(default_factory=dict)


@dataclass(frozen=True)
class IndexRange:
    """A check of index values torch's meta kernel cannot make (``index_select``, ``take``, ``embedding``)."""

    index: str
    """The parameter holding the indices."""
    of: str
    """The tensor parameter they index."""
    dim: str | int | None = None
    """The dimension indexed: a parameter naming it or a constant; ``None``: the flattened tensor."""
    wraps: bool = False
    """Negative indices count from the end (``take``); else they are out of range."""


@dataclass(frozen=True)
class MlxOp:
    """How an aten op runs on MLX."""

    mlx: str
    """Dotted name of the MLX callable, e.g. ``mlx.core.add``."""
    args: dict[str, str | int] = field(default_factory=dict)
    """Schema parameter -> MLX parameter name (keyword) or position (positional)."""
    fixed: dict[str, str | int | float | bool] = field(default_factory=dict)
    """MLX keyword arguments with a constant value (e.g. ``axis: 0``)."""
    values: dict[str, Transform] = field(default_factory=dict)
    """Schema parameter -> translation of its value; a parameter here but not in ``args`` is only
    checked (the translation refuses values MLX cannot honour)."""
    ignore: tuple[str, ...] = ()
    """Parameters without effect on the value computed here (``half_to_float``: results get torch's dtype anyway)."""
    promote: tuple[str, ...] = ()
    """Two parameters cast to ``torch.result_type`` of both before the call (binary ops)."""
    dtypes: tuple[Family, ...] = ("float",)
    """Dtype families routed to MLX (checked on the first tensor input); others run elsewhere."""
    dtype_of: str | None = None
    """The tensor parameter whose dtype is checked, when not the first (``embedding``'s ``weight``)."""
    index_range: IndexRange | None = None
    """Indices checked before the MLX call: out of range, the call goes to torch's kernel, which raises."""
    nonzero: str | None = None
    """A divisor checked for zeros in integer division (torch raises ``ZeroDivisionError``, MLX does not)."""
    representable: str | None = None
    """A scalar torch converts to the input's dtype, checked to fit it (torch raises on overflow)."""
    integer_power: str | None = None
    """A scalar exponent checked: an integral tensor to a negative integral power raises in torch."""
    unit_interval: str | None = None
    """A tensor checked to hold values in [0, 1] only (torch raises for others, MLX computes nan)."""
    opmath: bool = False
    """float16 and bfloat16 inputs are computed in float32 and the result rounded once, as torch's kernels
    do (reductions, softmax, division): MLX would accumulate in half precision."""
    also: MlxCall | None = None
    """A second call giving the second output."""
    outputs: int = 1
    """How many tensors the MLX call itself returns (``linalg.qr``: 2)."""
    overloads: tuple[str, ...] = ()
    """The overload names covered (of the op and of its in-place op); default: every one the record fits."""
    inplace: bool = True
    """Whether the in-place op's overloads (``abs_``) are covered too."""
    stream: Literal["default", "cpu"] = "default"
    """``cpu``: run on MLX's CPU stream (MLX has no GPU kernel, e.g. most of ``mlx.core.linalg``)."""
    nonempty: bool = False
    """Refuse tensor inputs with no elements (MLX's linalg kernels crash the process on them)."""
    opinfo: tuple[str, ...] = ()
    """Names of the OpInfos whose samples exercise the op (default: the op's name)."""
    tolerance: float | None = None
    """rtol = atol of the consistency test, where MLX's algorithm legitimately differs."""

    def __post_init__(self) -> None:
        if len(self.promote) not in (0, 2):
            raise ValueError(f"promote names two parameters, not {list(self.promote)}")
        if self.also is not None and self.outputs != 1:
            raise ValueError("a record has either a second call (also) or a call with several outputs")
        if self.outputs < 1:
            raise ValueError(f"outputs must be at least 1, got {self.outputs}")

    @property
    def params(self) -> frozenset[str]:
        """Every schema parameter the record names."""
        also = frozenset(self.also.args) if self.also else frozenset()
        return frozenset(self.args) | frozenset(self.values) | frozenset(self.ignore) | also | self.checked

    @property
    def checked(self) -> frozenset[str]:
        """The parameters the data checks read."""
        index = self.index_range
        names = {index.index, index.of, *([index.dim] if isinstance(index.dim, str) else [])} if index else set()
        checked = (self.nonzero, self.representable, self.integer_power, self.unit_interval)
        return frozenset(names | {p for p in checked if p})

    @property
    def input_cast(self) -> tuple[str, str] | None:
        """``(parameter, kind)`` of the ``dtype=`` argument applied to the input, if any."""
        return next(((p, k) for p, k in self.values.items() if k in INPUT_CASTS), None)
