"""MPS's kernels simulated on the CPU, through PyTorch's dispatcher: the ops it lacks raise MPS's errors.

Ops dispatched with ``PrivateUse1`` among the thread's included keys reach a backend fallback
registered there, which runs each op on the CPU, except the ops MPS has no kernel for, which raise
MPS's missing-kernel ``NotImplementedError``, and calls with float64 (or complex128) where MPS
refuses them, which raise MPS's ``TypeError``. The fallback engine registers its kernels under
``PrivateUse1`` and sees exactly what it sees under ``MPS`` on a Mac.

Two users: the ``mps-sim`` target (:mod:`.mps_sim`) includes the key for each call on its device
tensors, with Apple silicon's whole table (:meth:`SimulatedMPS.apple`); tests and benchmarks enter a
:class:`SimulatedMPS` with chosen ops, which includes the key for the whole thread (every CPU tensor
is then a device tensor). ``attempts`` counts the calls each chosen op got; ``raised`` keeps the
exceptions the simulated kernels raised.
"""

from __future__ import annotations

import contextlib
import threading
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch._C import DispatchKey, DispatchKeySet

from torchdevice.device.aten import leaves
from torchdevice.device.hosted import WIDE, Hosting
from torchdevice.device.target import Target

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
CPU = torch.device("cpu")
EVERY_OP = "*"
"""``no_float64=EVERY_OP``: every op refuses float64, as on MPS."""


@dataclass(frozen=True)
class SimulatedTarget(Target):
    """The simulated device: CPU tensors, kernels under ``PrivateUse1``, MPS's error messages."""

    def escape(self) -> contextlib.AbstractContextManager[object]:
        return torch._C._ForceDispatchKeyGuard(_outside.keys, torch._C._dispatch_tls_local_exclude_set())


class _Outside(threading.local):
    keys: DispatchKeySet = DispatchKeySet(DispatchKey.Undefined)
    """The thread's included dispatch keys where the simulated device was entered (a key set's
    ``remove`` keeps the backend bit, so the set is kept, not computed)."""


_outside = _Outside()


@contextlib.contextmanager
def including(exclude: DispatchKeySet | None = None) -> Iterator[None]:
    """A block whose ops on CPU tensors dispatch to the simulated device first (``exclude``: keys to
    leave out as well)."""
    outside, before = torch._C._dispatch_tls_local_include_set(), _outside.keys
    excluded = torch._C._dispatch_tls_local_exclude_set()
    _outside.keys = outside
    try:
        with torch._C._ForceDispatchKeyGuard(outside.add(DispatchKey.PrivateUse1),
                                             excluded if exclude is None else excluded | exclude):
            yield
    finally:
        _outside.keys = before


def uses_float64(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether a call has a float64 or complex128 tensor, or asks for one."""
    return any((isinstance(x, torch.Tensor) and x.dtype in WIDE) or (isinstance(x, torch.dtype) and x in WIDE)
               for x in leaves((args, kwargs)))


class SimulatedMPS:
    """``with SimulatedMPS(missing=..., no_float64=...) as target:`` (op names without ``aten::``, any
    overload; ``missing_overloads``: aten overload names; ``no_float64=EVERY_OP``: all ops);
    ``table_missing``/``try_first`` become the target's kernel table."""

    def __init__(self, *, missing: Iterable[str] = (), no_float64: Iterable[str] = (),
                 table_missing: Iterable[str] = (), try_first: Iterable[str] = (),
                 missing_overloads: Iterable[str] = (), name: str = NAME) -> None:
        self.missing = frozenset(missing)
        self.missing_overloads = frozenset(missing_overloads)
        self.no_float64 = no_float64 if no_float64 == EVERY_OP else frozenset(no_float64)
        self.table = (frozenset(table_missing), frozenset(try_first))
        self.name = name
        self.attempts: Counter[str] = Counter()
        self.raised: list[BaseException] = []
        self._stack = contextlib.ExitStack()

    @classmethod
    def apple(cls, name: str = NAME) -> SimulatedMPS:
        """Apple silicon with the torch this package was built for: every overload of the generated
        kernel table missing, float64 refused by every op."""
        from torchdevice_generated.fallback_table import MISSING_ON_MPS, TRY_ON_MPS

        return cls(missing_overloads=MISSING_ON_MPS, no_float64=EVERY_OP, table_missing=MISSING_ON_MPS,
                   try_first=TRY_ON_MPS, name=name)

    def target(self, device: torch.device = CPU) -> SimulatedTarget:
        """The target the engine completes, its tensors shown on ``device`` (on ``mps:0``, refusing float64
        everywhere, it hosts float64; its tensors are host tensors in C++)."""
        hosting = Hosting(device, "cpu") if self.no_float64 == EVERY_OP and device.type != "cpu" else None
        return SimulatedTarget(self.name, device, "PrivateUse1", "MPS", *self.table, hosting)

    def register(self) -> torch.library.Library:
        """Register the simulated kernels; they stay registered while the returned library is alive."""
        library = torch.library.Library("_", "IMPL")
        library.fallback(self._kernel(self.target()), "PrivateUse1", with_keyset=True)
        return library

    def __enter__(self) -> SimulatedTarget:
        self._stack.callback(self.register()._destroy)
        self._stack.enter_context(including())
        return self.target()

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def _kernel(self, target: SimulatedTarget):
        missing, overloads, no_float64 = self.missing, self.missing_overloads, self.no_float64

        def simulated_kernel(keyset: Any, op: torch._ops.OpOverload, *args: Any, **kwargs: Any) -> Any:
            name = op._schema.name.removeprefix("aten::")
            lacks = name in missing or op._name in overloads
            refuses_float64 = no_float64 == EVERY_OP or name in no_float64
            if name in missing or name in no_float64:
                self.attempts[name] += 1
            if lacks:
                raise NotImplementedError(MISSING.format(op=op._name))
            if refuses_float64 and uses_float64(args, kwargs):
                raise TypeError(NO_FLOAT64)
            with target.escape():
                try:
                    return op(*args, **kwargs)
                except Exception as exc:  # a user error of the CPU kernel: what the caller must get
                    self.raised.append(exc)
                    raise

        return simulated_kernel
