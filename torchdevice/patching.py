"""Patches that can be undone exactly.

Every runtime patch goes through a :class:`Patcher`, which remembers what the owner's own
``__dict__`` held (or that it held nothing, for attributes inherited from a base class or a C
type), so ``restore()`` puts back the identical original object. Changes that are not attributes
(a table entry, an import hook) register their own undo with :meth:`Patcher.defer`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_ABSENT = object()


class Patcher:
    """Set attributes on modules and classes, remembering how to undo each."""

    def __init__(self) -> None:
        self._undo: list[Callable[[], None]] = []
        self.replaced: list[tuple[Any, str, Any]] = []
        """``(owner, name, original)`` of each attribute that had a value of its own, until :meth:`restore`."""

    def set(self, owner: Any, name: str, value: Any) -> None:
        """``setattr(owner, name, value)``, recording the owner's own previous value."""
        before = vars(owner).get(name, _ABSENT)
        self._undo.append(lambda: delattr(owner, name) if before is _ABSENT else setattr(owner, name, before))
        if before is not _ABSENT:
            self.replaced.append((owner, name, before))
        setattr(owner, name, value)

    def defer(self, undo: Callable[[], None]) -> None:
        """Run ``undo`` on :meth:`restore`, in its place among the patches (newest first)."""
        self._undo.append(undo)

    def restore(self) -> None:
        """Undo every patch, newest first."""
        while self._undo:
            self._undo.pop()()
        self.replaced.clear()

    def __len__(self) -> int:
        return len(self._undo)
