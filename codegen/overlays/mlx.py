"""MLX equivalents of torch entries (``catalog/overlays/mlx.yaml``).

A record says which MLX callable computes a torch entry and how each torch parameter reaches it::

    torch.sum:
      mlx: mlx.core.sum
      args: {input: 0, dim: axis, keepdim: keepdims}
      values: {dtype: accumulate}
      dtypes: [float, int, bool]

``args`` maps a torch parameter to an MLX parameter: a name (passed by keyword) or a position
(passed positionally; MLX's leading parameters are positional-only). Torch parameters that are
neither in ``args``, ``values`` nor ``ignore`` must keep their default: the generated shim refuses
any other value (``MlxUnsupported``) so the caller runs the call elsewhere.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Transform = Literal[
    "axis", "vector_axis", "dtype", "ddof_correction", "not_none", "shape", "repeats",
    "zero_if_none", "fft_norm", "pad", "sdpa_scale", "norm_eps", "last_dim", "cast_input", "accumulate",
]
"""How a torch argument's value is translated: ``torchdevice.fallback.mlx_bridge.translate_<kind>(value, ref)``
(``ref``: the first tensor input). ``cast_input`` and ``accumulate`` apply torch's ``dtype=``
to the first tensor input instead (``mlx_bridge.cast_input``); ``accumulate`` also widens integral
inputs to int64 as torch's sums and products do."""

INPUT_CASTS = ("cast_input", "accumulate")

Family = Literal["float", "float32", "int", "bool", "complex"]
"""Dtype families (``torchdevice.fallback.mlx_bridge.FAMILIES``); the generated test samples one dtype of each."""

Recipe = Literal["unary", "reduction", "square", "indices_table"]
"""Named input recipes of the generated tests (``generated/tests/mlx_samples.py``), used where
OpInfo has no sample the mapping supports."""


@dataclass(frozen=True)
class MlxCall:
    """A second MLX call whose result is the second output (e.g. the indices of ``torch.max``)."""

    mlx: str
    args: dict[str, str | int] = field(default_factory=dict)
    fixed: dict[str, str | int | float | bool] = field(default_factory=dict)
    cast: str | None = None
    """torch dtype name (``int64``) the result is cast to."""


@dataclass(frozen=True)
class MlxMapping:
    """How a torch entry runs on MLX."""

    mlx: str
    """Dotted name of the MLX callable, e.g. ``mlx.core.add``."""
    args: dict[str, str | int] = field(default_factory=dict)
    """torch parameter -> MLX parameter name (keyword) or position (positional)."""
    fixed: dict[str, str | int | float | bool] = field(default_factory=dict)
    """MLX keyword arguments with a constant value (e.g. ``axis: 0``)."""
    values: dict[str, Transform] = field(default_factory=dict)
    """torch parameter -> translation of its value; a parameter here but not in ``args`` is only
    checked (the translation refuses values MLX cannot honour)."""
    defaults: dict[str, str | int | float | bool | None] = field(default_factory=dict)
    """torch defaults the catalog signature lacks (written ``...`` there), so the shim can accept them."""
    ignore: tuple[str, ...] = ()
    """torch parameters without effect on the result (``_stacklevel``)."""
    promote: tuple[str, ...] = ()
    """Two torch parameters cast to ``torch.result_type`` of both before the call (binary ops)."""
    dtypes: tuple[Family, ...] = ("float",)
    """Dtype families the mapping is verified for (checked on the first tensor input)."""
    dtype_of: str | None = None
    """The tensor parameter whose dtype is checked, when not the first (embedding's ``weight``)."""
    cast: str | None = None
    """torch dtype name the (first) result is cast to, e.g. ``int64`` for MLX's uint32 indices."""
    also: MlxCall | None = None
    """A second call giving the second output."""
    returns: str | None = None
    """``None``: a tensor; ``tuple``; ``bool`` (a Python bool); else a ``torch.return_types`` name."""
    inplace: bool = False
    """Write the result into the first tensor input and return it (``Tensor.add_``, ``torch.relu_``)."""
    stream: Literal["default", "cpu"] = "default"
    """``cpu``: run on MLX's CPU stream (MLX has no GPU kernel, e.g. most of ``mlx.core.linalg``)."""
    nonempty: bool = False
    """Refuse tensor inputs with no elements (MLX's linalg kernels crash the process on them)."""
    overload: int | None = None
    """Index of the catalog signature the shim takes; default: the first with every mapped parameter."""
    sample: Recipe | None = None
    """Input recipe of the generated test when OpInfo has no usable sample."""
    opinfo: str | None = None
    """OpInfo name of the generated test's samples when it differs from the entry's name."""
    tolerance: float | None = None
    """rtol = atol of the generated test, where MLX's algorithm legitimately differs (fused attention)."""

    @property
    def torch_params(self) -> frozenset[str]:
        """Every torch parameter the record names."""
        return frozenset(self.args) | frozenset(self.values) | frozenset(self.ignore)

    @property
    def input_cast(self) -> tuple[str, str] | None:
        """``(torch parameter, kind)`` of the ``dtype=`` argument applied to the input, if any."""
        return next(((p, k) for p, k in self.values.items() if k in INPUT_CASTS), None)

    @property
    def result_type(self) -> str:
        """``tensor``, ``tuple``, ``bool`` or ``return_types`` (named by ``returns``)."""
        if self.returns is None:
            return "tensor"
        return self.returns if self.returns in ("tuple", "bool") else "return_types"
