"""What torch itself lists, counted without the scanner: the independent side of the catalog's counts."""

from __future__ import annotations

import importlib
import inspect
import types
import warnings
from functools import cache

import torch

from torchdevice.records import aten_entry

WITH_ALL = ("torch.fft", "torch.special", "torch.optim", "torch.distributions", "torch.autograd", "torch.amp",
            "torch.utils.data", "torch.mps", "torch.accelerator", "torch.func", "torch.sparse", "torch.nn.init",
            "torch.random")
"""Namespaces whose ``__all__`` lists only public API (``torch`` and ``torch.cuda`` list storages and
legacy tensor types too, which the catalog leaves out)."""


@cache
def aten_overloads() -> frozenset[str]:
    """Every aten overload the dispatcher registers, as a catalog entry name."""
    ops = {n.removeprefix("aten::").partition(".")[0] for n in torch._C._dispatch_get_all_op_names()
           if n.startswith("aten::")}
    return frozenset(aten_entry(f"{op}.{overload}") for op in ops
                     for overload in getattr(torch.ops.aten, op).overloads())


def _by_torch(obj: object) -> bool:
    home = getattr(obj, "__module__", None) or ""
    return home == "torch" or home.startswith("torch.")


@cache
def public_names() -> frozenset[str]:
    """Public functions and classes torch lists: the functions of ``torch.__all__``, the methods of
    ``torch.Tensor``, the modules of ``torch.nn``, the functions of ``torch.nn.functional``, and the
    callables in the ``__all__`` of :data:`WITH_ALL`."""
    import torch.nn.functional as F  # noqa: N812
    import torch.nn.modules

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # deprecated aliases warn when touched
        names = {f"torch.{n}" for n in torch.__all__ if not n.startswith("_") and (
                 inspect.isfunction(getattr(torch, n, None)) or inspect.isbuiltin(getattr(torch, n, None)))}
        names |= {f"torch.Tensor.{n}" for n in dir(torch.Tensor)
                  if not n.startswith("_") and callable(getattr(torch.Tensor, n))}
        names |= {f"torch.nn.{n}" for n in torch.nn.modules.__all__}
        names |= {f"torch.nn.functional.{n}" for n, f in vars(F).items()
                  if not n.startswith("_") and inspect.isfunction(f) and f.__module__ == F.__name__}
        for namespace in WITH_ALL:
            module = importlib.import_module(namespace)
            for n in (n for n in getattr(module, "__all__", ()) if not n.startswith("_")):  # torch.amp's: 2.11
                obj = getattr(module, n, None)
                if callable(obj) and not isinstance(obj, types.ModuleType) and _by_torch(obj):
                    names.add(f"{namespace}.{n}")
    return frozenset(names)
