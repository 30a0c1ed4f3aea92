"""MLX equivalents of torch entries (``catalog/overlays/mlx.yaml``)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class MlxMapping:
    """How a torch entry runs on MLX."""

    mlx: str
    """Dotted name of the MLX callable, e.g. ``mlx.core.add``."""
    args: dict[str, str] = field(default_factory=dict)
    """torch parameter -> MLX parameter; torch parameters not listed must keep their defaults."""
