"""Attribute patches that can be undone exactly.

Every runtime patch goes through a :class:`Patcher`, which remembers what the owner's own
``__dict__`` held (or that it held nothing, for attributes inherited from a base class or a C
type), so ``restore()`` puts back the identical original object.
"""

from __future__ import annotations

from typing import Any

_ABSENT = object()


class Patcher:
    """Set attributes on modules and classes, remembering how to undo each."""

    def __init__(self) -> None:
        self._undo: list[tuple[Any, str, Any]] = []

    def set(self, owner: Any, name: str, value: Any) -> None:
        """``setattr(owner, name, value)``, recording the owner's own previous value."""
        self._undo.append((owner, name, vars(owner).get(name, _ABSENT)))
        setattr(owner, name, value)

    def restore(self) -> None:
        """Undo every patch, newest first."""
        while self._undo:
            owner, name, before = self._undo.pop()
            if before is _ABSENT:
                delattr(owner, name)
            else:
                setattr(owner, name, before)

    def __len__(self) -> int:
        return len(self._undo)
