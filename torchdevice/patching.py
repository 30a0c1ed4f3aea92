"""Patches that can be undone exactly.

Every runtime patch goes through a :class:`Patcher`, which remembers what the owner's own
``__dict__`` held (or that it held nothing, for attributes inherited from a base class or a C
type), so ``restore()`` puts back the identical original object. Changes that are not attributes
(a table entry, an import hook) register their own undo with :meth:`Patcher.defer`; patches of a module that
may not be imported yet wait for its import (:meth:`Patcher.after_import`).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types
from collections.abc import Callable
from types import ModuleType
from typing import Any

import torch

_ABSENT = object()


class TensorAttribute(property):
    """A property put in place of one of ``torch._C.TensorBase``'s attributes (``Tensor.device``, ``.grad``): it names
    itself and its class as the C attribute does (``__name__``, ``__objclass__``), which torch's own code reads of
    every attribute it lists (torch 2.10's Dynamo, at import: ``is_tensor_base_attr_getter``)."""

    __objclass__ = torch._C.TensorBase

    def __init__(self, name: str, fget: Callable[[Any], Any], fset: Callable[[Any, Any], None] | None = None,
                 fdel: Callable[[Any], None] | None = None) -> None:
        super().__init__(fget, fset, fdel, doc=getattr(vars(torch._C.TensorBase).get(name), "__doc__", None))
        self.__name__ = name


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
        _keep_wrapped(getattr(owner, name, None), value)
        setattr(owner, name, value)

    def defer(self, undo: Callable[[], None]) -> None:
        """Run ``undo`` on :meth:`restore`, in its place among the patches (newest first)."""
        self._undo.append(undo)

    def after_import(self, name: str, then: Callable[[ModuleType], None]) -> None:
        """``then(module)`` now if the module ``name`` is imported, else once a later import has executed it
        (a ``sys.meta_path`` hook, taken away on :meth:`restore`)."""
        module = sys.modules.get(name)
        if module is not None:
            then(module)
            return
        hook = _AfterImport(name, then)
        sys.meta_path.insert(0, hook)
        self.defer(lambda: sys.meta_path.remove(hook) if hook in sys.meta_path else None)

    def restore(self) -> None:
        """Undo every patch, newest first."""
        while self._undo:
            self._undo.pop()()
        self.replaced.clear()

    def __len__(self) -> int:
        return len(self._undo)


class _AfterImport(importlib.abc.MetaPathFinder):
    """Calls ``then(module)`` once the module ``name`` has been executed by a later import."""

    def __init__(self, name: str, then: Callable[[ModuleType], None]) -> None:
        self.name, self.then = name, then

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname != self.name:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return None
        exec_module, then = spec.loader.exec_module, self.then

        def exec_then(module: ModuleType) -> None:
            exec_module(module)
            then(module)

        spec.loader.exec_module = exec_then  # type: ignore[method-assign]  # this spec's own loader
        return spec


def _keep_wrapped(original: Any, value: Any) -> None:
    """A plain function put in place of a decorated one keeps its ``__wrapped__``, which torch's own code reads of the
    functions it lists (Dynamo, at import: ``torch.cuda.use_mem_pool.__wrapped__`` and
    ``torch.backends.mps.is_available.__wrapped__`` in torch 2.14)."""
    if isinstance(value, types.FunctionType) and hasattr(original, "__wrapped__") and "__wrapped__" not in vars(value):
        value.__wrapped__ = original.__wrapped__  # type: ignore[attr-defined]
