"""What torchdevice's stand-ins for flash-attn, xformers and apex cover (``catalog/overlays/standins.yaml``).

One record per name: a package (``flash_attn``: its distribution and the torch API to use for what is not
covered), a covered name (the library's signature, the torch API that computes it, semantics notes and the
test grid comparing it with a plain-torch reference) or a name known to be missing (what to use instead)::

    flash_attn: {policy: package, distribution: flash-attn, computes: torch.nn.functional.scaled_dot_product_attention}
    flash_attn.flash_attn_func:
      signature: (q, k, v, dropout_p=0.0, softmax_scale=None, causal=False, ...)
      computes: torch.nn.functional.scaled_dot_product_attention
      reference: attention
      grid: {shape: ["2,8,8,4,4,16"], dtype: [float32, float16], causal: [false, true]}
    apex.optimizers.FusedLAMB: {policy: missing, computes: torch.optim.AdamW}
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any, Literal

GRID_KEYS = ("shape", "dtype")
"""Grid keys every reference understands besides the covered function's own parameters."""


@dataclass(frozen=True)
class StandinRule:
    """One name of a stood-in package."""

    policy: Literal["package", "standin", "missing"] = "standin"
    computes: str = ""
    """``standin``: the torch API that computes it; ``package`` and ``missing``: the torch API to use instead."""
    distribution: str = ""
    """``package``: the name the library is installed under (``flash-attn``)."""
    version: str = ""
    """``package``: the release whose API the stand-in follows."""
    signature: str = ""
    """``standin``: the parameter list, as the library defines it (classes: ``__init__`` without ``self``)."""
    notes: str = ""
    """``standin``: the semantics, as the library documents them, and the stand-in's limits."""
    reference: str = ""
    """``standin``: the plain-torch reference of the generated tests (``tests/support/standin_references.py``)."""
    grid: dict[str, tuple[Any, ...]] = field(default_factory=dict)
    """``standin``: test cases, every combination of these values (function parameters, ``shape``, ``dtype``)."""

    def __post_init__(self) -> None:
        if not self.computes:
            raise ValueError("computes: the torch API that computes it (standin) or to use instead is required")
        if (self.policy == "package") != bool(self.distribution):
            raise ValueError("distribution is required for a package and only for a package")
        if self.policy == "standin":
            self.parameters()  # parses
        elif self.signature or self.grid or self.reference:
            raise ValueError(f"signature, reference and grid apply to covered names, not to a {self.policy}")
        if self.grid and not self.reference:
            raise ValueError("a grid needs the reference it is compared with")
        unknown = sorted(set(self.grid) - set(self.parameters()) - set(GRID_KEYS)) if self.grid else []
        if unknown:
            raise ValueError(f"grid: {', '.join(unknown)} is neither a parameter nor one of {', '.join(GRID_KEYS)}")
        empty = [key for key, values in self.grid.items() if not values]
        if empty:
            raise ValueError(f"grid: {', '.join(empty)} has no values")

    def parameters(self) -> tuple[str, ...]:
        """The parameter names of :attr:`signature`."""
        try:
            tree = ast.parse(f"def f{self.signature}: pass")
        except SyntaxError as exc:
            raise ValueError(f"signature: {self.signature!r} is not a parameter list ({exc.msg})") from None
        args = tree.body[0].args  # type: ignore[attr-defined]
        every = [*args.posonlyargs, *args.args, *([args.vararg] if args.vararg else []), *args.kwonlyargs,
                 *([args.kwarg] if args.kwarg else [])]
        return tuple(a.arg for a in every)
