"""Hand-curated overlays: the only hand-edited catalog data (``catalog/overlays/*.yaml``).

Each overlay file has a record class in a module of this package, except the rewrite rules: their
record, ``torchdevice.rewrite.rule.RewriteRule``, is built at run time by the generated rules table.
Per-entry overlays are YAML mappings from a torch qualified name to a record and end up on
``Entry.overlays``; list overlays (rewrite rules) are sequences of records that end up on the ``Catalog``.
"""

from __future__ import annotations

from dataclasses import dataclass

from codegen.overlays.cuda import CudaRule
from codegen.overlays.mlx import MlxMapping
from torchdevice.rewrite.rule import RewriteRule


@dataclass(frozen=True)
class OverlaySet:
    """The overlay records that apply to one entry."""

    mlx: MlxMapping | None = None
    cuda: CudaRule | None = None


PER_ENTRY: dict[str, type] = {"mlx": MlxMapping, "cuda": CudaRule}
"""File stem (``catalog/overlays/<stem>.yaml``) -> record class, attached as ``OverlaySet.<stem>``."""

LISTS: dict[str, type] = {"rewrite": RewriteRule}
"""File stem -> record class of overlays that are ordered lists of records."""
