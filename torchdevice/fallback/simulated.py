"""A simulated MPS target for machines without one (tests, benchmarks), through PyTorch's dispatcher.

While a :class:`SimulatedMPS` is entered, this thread includes the ``PrivateUse1`` dispatch key,
so every op on CPU tensors dispatches to ``PrivateUse1`` first, where a backend fallback runs it
on the CPU; except the ops chosen as missing, which raise MPS's missing-kernel
``NotImplementedError``, and the ops chosen as lacking float64, which raise MPS's ``TypeError``
when given float64. The fallback engine registers its kernels under ``PrivateUse1`` and sees
exactly what it sees under ``MPS`` on a Mac. ``attempts`` counts the calls each chosen op got;
``raised`` keeps the exceptions the simulated device's kernels raised.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch._C import DispatchKey, DispatchKeySet
from torch.utils import _pytree as pytree

from torchdevice.fallback.target import Target

MISSING = (
    "The operator '{op}' is not currently implemented for the MPS device. If you want this op to be considered "
    "for addition please comment on https://github.com/pytorch/pytorch/issues/141287 and mention use-case, that "
    "resulted in missing op as well as commit hash 0000000. As a temporary fix, you can set the environment "
    "variable `PYTORCH_ENABLE_MPS_FALLBACK=1` to use the CPU as a fallback for this op. WARNING: this will be "
    "slower than running natively on MPS."
)
NAME = "simulated-mps"
"""The simulated target's name in the capability cache."""
NO_FLOAT64 = (
    "Cannot convert a MPS Tensor to float64 dtype as the MPS framework doesn't support float64. "
    "Please use float32 instead."
)


@dataclass(frozen=True)
class SimulatedTarget(Target):
    """The simulated device: CPU tensors, kernels under ``PrivateUse1``, MPS's error messages."""

    plain: DispatchKeySet = field(default_factory=torch._C._dispatch_tls_local_include_set)
    """The thread's included keys without the simulation: what :meth:`escape` returns to."""

    def escape(self) -> contextlib.AbstractContextManager[object]:
        return torch._C._ForceDispatchKeyGuard(self.plain, torch._C._dispatch_tls_local_exclude_set())


def uses_float64(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    return any(
        (isinstance(x, torch.Tensor) and x.dtype == torch.float64) or x is torch.float64
        for x in pytree.tree_leaves((args, kwargs))
    )


class SimulatedMPS:
    """``with SimulatedMPS(missing=..., no_float64=...) as target:`` (op names without ``aten::``,
    any overload); ``table_missing``/``try_first`` become the target's kernel table."""

    def __init__(self, *, missing: Iterable[str] = (), no_float64: Iterable[str] = (),
                 table_missing: Iterable[str] = (), try_first: Iterable[str] = ()) -> None:
        self.missing = frozenset(missing)
        self.no_float64 = frozenset(no_float64)
        self.table = (frozenset(table_missing), frozenset(try_first))
        self.attempts: Counter[str] = Counter()
        self.raised: list[BaseException] = []
        self._stack = contextlib.ExitStack()

    def __enter__(self) -> SimulatedTarget:
        plain = torch._C._dispatch_tls_local_include_set()
        target = SimulatedTarget(NAME, torch.device("cpu"), "PrivateUse1", "MPS", *self.table,
                                 frozenset(), plain)
        library = torch.library.Library("_", "IMPL")
        self._stack.callback(library._destroy)
        library.fallback(self._kernel(target), "PrivateUse1", with_keyset=True)
        simulated = plain.add(DispatchKey.PrivateUse1)
        excluded = torch._C._dispatch_tls_local_exclude_set()
        self._stack.enter_context(torch._C._ForceDispatchKeyGuard(simulated, excluded))
        return target

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def _kernel(self, target: SimulatedTarget):
        def simulated_kernel(keyset: Any, op: torch._ops.OpOverload, *args: Any, **kwargs: Any) -> Any:
            name = op._schema.name.removeprefix("aten::")
            if name in self.missing or name in self.no_float64:
                self.attempts[name] += 1
            if name in self.missing:
                raise NotImplementedError(MISSING.format(op=op._name))
            if name in self.no_float64 and uses_float64(args, kwargs):
                raise TypeError(NO_FLOAT64)
            with target.escape():
                try:
                    return op(*args, **kwargs)
                except Exception as exc:  # a user error of the CPU kernel: what the caller must get
                    self.raised.append(exc)
                    raise

        return simulated_kernel
