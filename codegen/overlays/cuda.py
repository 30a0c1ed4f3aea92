"""What each public ``torch.cuda`` entry does on a non-CUDA target (``catalog/overlays/cuda.yaml``).

Every module-level entry under ``torch.cuda`` needs a record; entries elsewhere (``torch.backends.cuda``,
``torch.accelerator``) may have one. One record per entry::

    torch.cuda.synchronize: {does: synchronize}
    torch.cuda.get_arch_list: {does: constant, value: []}
    torch.cuda.graph: {policy: unsupported, why: CUDA graph capture records CUDA kernel launches}
    torch.cuda.OutOfMemoryError: {policy: passthrough, why: an exception class; works as is}
    torch.accelerator.device_count: {same_as: torch.cuda.device_count}
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal

from torchdevice.records import PACKAGE_DIR, WORD_MODULES

RUNTIME = PACKAGE_DIR / "runtime"


@cache
def vocabulary() -> frozenset[str]:
    """The emulation words the runtime implements: what its word modules (``WORD_MODULES``: ``emulation.py``,
    ``graphs.py``) mark with ``@word`` or ``@builder``, read from the source (no import of torch)."""
    trees = [ast.parse((RUNTIME / f"{module}.py").read_text(encoding="utf-8")) for module in WORD_MODULES]
    return frozenset(node.name for tree in trees for node in ast.walk(tree)
                     if isinstance(node, (ast.FunctionDef, ast.ClassDef))
                     and any(isinstance(d, ast.Name) and d.id in ("word", "builder") for d in node.decorator_list))


CudaPolicy = Literal["emulate", "unsupported", "passthrough"]


@dataclass(frozen=True)
class CudaRule:
    """The emulation of one ``torch.cuda`` entry."""

    policy: CudaPolicy = "emulate"
    does: str = ""
    """``emulate``: a word of the emulation vocabulary; the runtime installs what the word builds from
    ``value``."""
    value: Any = None
    """The argument of the word's builder: the constant returned (``constant``), a dtype name (``tensor_type``)."""
    why: str = ""
    """``unsupported``: why it cannot be emulated (the error raised on use says it); ``passthrough``: why
    the original works as is."""
    sample: str = ""
    """Arguments (Python source) the per-entry test calls the emulation with, when it needs any."""
    same_as: str = ""
    """The name of another entry of the file whose record this entry follows, field for field (its own
    ``sample`` kept): a ``torch.accelerator`` entry names the ``torch.cuda`` entry it agrees with."""

    def __post_init__(self) -> None:
        if self.same_as:
            if self.policy != "emulate" or self.does or self.value is not None or self.why:
                raise ValueError("same_as takes no policy, does, value or why: the named entry's record has them")
            return
        if self.policy == "emulate":
            if self.does not in vocabulary():
                known = ", ".join(sorted(vocabulary()))
                raise ValueError(f"does: {self.does!r} is not an emulation word; known: {known}")
        elif self.does:
            raise ValueError(f"does applies to policy emulate only, not {self.policy}")
        if self.policy != "emulate" and not self.why:
            raise ValueError(f"policy {self.policy} needs why: the reason given to the user")
