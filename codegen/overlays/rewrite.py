"""Source rewrite rules (``catalog/overlays/rewrite.yaml``)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class RewriteRule:
    """One CUDA-specific construct and its device-agnostic replacement."""

    name: str
    match: str
    replace: str

    def torch_names(self) -> Iterator[str]:
        """The torch entries this rule refers to (validated against the catalog)."""
        if self.match.startswith("torch."):
            yield self.match
