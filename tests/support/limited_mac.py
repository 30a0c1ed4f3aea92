"""A test-only Mac that refuses exactly MPS's limits, through PyTorch's dispatcher.

``with LimitedMac(macos=(14, 0)) as target:`` makes every CPU tensor of the block a device tensor (``PrivateUse1``
among the thread's included dispatch keys) and registers, for each overload of the limits table, a kernel that
raises the limit's exception (:meth:`torchdevice.device.limits.Limit.exception`) where the table says the Mac
does, on ``PrivateUse1``, or on ``AutogradPrivateUse1`` for an overload without a kernel of its own (whose limits
a Mac meets inside its decomposition); everything else runs on the CPU. ``refused`` keeps what it raised.

The fallback engine completes this target as it completes MPS on a Mac: it registers over these kernels, calls
them as the target's own and routes on what they raise.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch._C import DispatchKey, DispatchKeySet

from torchdevice.device import limits
from torchdevice.device.aten import OpSchema, overload
from torchdevice.device.hosted import Hosting
from torchdevice.device.target import Target


class _Outside(threading.local):
    keys: DispatchKeySet = DispatchKeySet(DispatchKey.Undefined)


_outside = _Outside()


def _escape() -> contextlib.AbstractContextManager[object]:
    return torch._C._ForceDispatchKeyGuard(_outside.keys, torch._C._dispatch_tls_local_exclude_set())


@dataclass(frozen=True)
class LimitedTarget(Target):
    """The device: CPU tensors, kernels under ``PrivateUse1``, MPS's messages."""

    def escape(self) -> contextlib.AbstractContextManager[object]:
        return _escape()


class LimitedMac:
    """``with LimitedMac(macos=..., overloads=...) as target:`` (``overloads``: dispatcher names to refuse; default:
    every overload of the table; ``missing``: dispatcher names of overloads that raise MPS's missing-kernel error;
    ``hosting``: float64 results are hosted, shown on ``mps:0``, as on a Mac)."""

    def __init__(self, *, macos: tuple[int, int] = limits.DEFAULT_MACOS, overloads: Iterable[str] | None = None,
                 missing: Iterable[str] = (), hosting: bool = False) -> None:
        self.macos = macos
        self.hosting = Hosting(torch.device("mps", 0), "cpu") if hosting else None
        self.overloads = tuple(overloads) if overloads is not None else limits.limited()
        self.missing = frozenset(missing)
        self.refused: list[BaseException] = []
        self._stack = contextlib.ExitStack()

    def target(self) -> LimitedTarget:
        return LimitedTarget("limited-mac", torch.device("cpu"), "PrivateUse1", "MPS", self.missing,
                             hosting=self.hosting)

    def register(self) -> torch.library.Library:
        library = torch.library.Library("aten", "IMPL")
        for name in self.overloads:
            op = overload(name)
            assert op is not None, name
            if torch._C._dispatch_has_kernel_for_dispatch_key(name, "CompositeImplicitAutograd"):
                library.impl(op, self._composite(op), "AutogradPrivateUse1", with_keyset=True)
            else:
                library.impl(op, self._backend(op), "PrivateUse1", with_keyset=True)
        for name in self.missing:
            op = overload(name)
            assert op is not None, name
            library.impl(op, self._missing(op), "PrivateUse1", with_keyset=True)
        return library

    def _missing(self, op: torch._ops.OpOverload) -> Any:
        (row,) = [limit.row for limit in limits.generic() if limit.name == "missing_kernel"]
        message = "".join({"{op}": op._name, "{commit}": "0000000"}.get(p, p) for p in row.message)

        def kernel(keyset: Any, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError(message)

        return kernel

    def _refuse(self, op: torch._ops.OpOverload, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        for limit in limits.limits_of(op):
            if limit.raises is not None and limit.applies(args, kwargs, self.macos):
                exc = limit.exception(args, kwargs)
                self.refused.append(exc)
                raise exc

    def _backend(self, op: torch._ops.OpOverload) -> Any:
        def kernel(keyset: Any, *args: Any, **kwargs: Any) -> Any:
            self._refuse(op, args, kwargs)
            with _escape():
                return op(*args, **kwargs)

        return kernel

    def _composite(self, op: torch._ops.OpOverload) -> Any:
        native = torch.library.get_kernel(op, "AutogradPrivateUse1")
        schema = OpSchema.of(op)

        def kernel(keyset: Any, *args: Any, **kwargs: Any) -> Any:
            self._refuse(op, args, kwargs)
            return native.call_boxed(keyset, *schema.boxed(args), **kwargs)

        return kernel

    def _fallback(self, keyset: Any, op: torch._ops.OpOverload, *args: Any, **kwargs: Any) -> Any:
        with _escape():
            return op(*args, **kwargs)

    def __enter__(self) -> LimitedTarget:
        fallback = torch.library.Library("_", "IMPL")
        fallback.fallback(self._fallback, "PrivateUse1", with_keyset=True)
        self._stack.callback(fallback._destroy)
        self._stack.callback(self.register()._destroy)
        self._stack.enter_context(_including())
        return self.target()

    def __exit__(self, *exc: object) -> None:
        self._stack.close()


@contextlib.contextmanager
def _including() -> Iterator[None]:
    outside, before = torch._C._dispatch_tls_local_include_set(), _outside.keys
    _outside.keys = outside
    try:
        with torch._C._ForceDispatchKeyGuard(outside.add(DispatchKey.PrivateUse1),
                                             torch._C._dispatch_tls_local_exclude_set()):
            yield
    finally:
        _outside.keys = before
