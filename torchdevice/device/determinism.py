"""CUDA's determinism alerts: the calls CUDA's kernels refuse (or warn about) under
``torch.use_deterministic_algorithms(True)``, as ``at::globalContext().alertNotDeterministic(name)`` does.

The table (``torchdevice_generated.cuda_kernels_table.ALERTS``, from ``catalog/overlays/cuda_kernels.yaml``) has one
row per place CUDA's kernels make the call. This module answers, per aten overload, on a call's arguments as the
dispatcher hands them to a backend kernel (only shapes, dtypes and values are read, never tensor data):

- :func:`alerts_of` ``(op) -> tuple[Alert, ...]``: the alerts of an :class:`~torch._ops.OpOverload` (a dictionary
  look-up; most ops have none);
- :meth:`Alert.applies` ``(args, kwargs) -> bool``: whether CUDA's kernel makes the call for these arguments;
- :meth:`Alert.check` ``(args, kwargs)``: what torch does when it does: nothing unless deterministic algorithms are
  on, else ``RuntimeError`` with torch's message, or with ``warn_only=True`` a ``UserWarning`` with it;
- :func:`check` ``(op, args, kwargs)``: :meth:`Alert.check` of each alert of ``op``;
- :func:`message` ``(alert, warn_only) -> str``: torch's message for an alert name.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache, cached_property
from typing import Any

import torch
from torchdevice_generated.cuda_kernels_table import ALERTS

from torchdevice.callers import outside
from torchdevice.device.aten import ByOverload, OpSchema
from torchdevice.records.determinism import AlertRow

__all__ = ["Alert", "alerting", "alerts_of", "check", "message"]

log = logging.getLogger("torchdevice.determinism")

_RAISED = ("{} does not have a deterministic implementation, but you set 'torch.use_deterministic_algorithms(True)'. "
           "You can turn off determinism just for this operation, or you can use the 'warn_only=True' option, if "
           "that's acceptable for your application. You can also file an issue at "
           "https://github.com/pytorch/pytorch/issues to help us prioritize adding deterministic support for this "
           "operation.")
_WARNED = ("{} does not have a deterministic implementation, but you set "
           "'torch.use_deterministic_algorithms(True, warn_only=True)'. You can file an issue at "
           "https://github.com/pytorch/pytorch/issues to help us prioritize adding deterministic support for this "
           "operation.")
"""``at::Context::alertNotDeterministic``'s two messages (ATen/Context.cpp), ``{}`` the name it is handed."""


def message(alert: str, warn_only: bool = False) -> str:
    """torch's message for alert ``alert``: the error's, or (``warn_only``) the warning's, which torch follows with
    where in its C++ it was raised, as every warning of torch's C++ code is."""
    return _WARNED.format(alert) + _warning_suffix() if warn_only else _RAISED.format(alert)


_SUFFIX: list[str] = []


def _warning_suffix() -> str:
    """`` (Triggered internally at .../ATen/Context.cpp:N.)``, as torch's C++ warnings end: read off one real
    alert of the CPU (``put_`` of nothing, without ``accumulate``) while warn-only determinism is on (the only time
    a warning is needed), and kept once found."""
    if _SUFFIX:
        return _SUFFIX[0]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.empty(0).put_(torch.empty(0, dtype=torch.long), torch.empty(0))
    base = _WARNED.format("put_")
    text = next((str(w.message) for w in caught if str(w.message).startswith(base)), "")
    if text:
        _SUFFIX.append(text[len(base):])
    return text[len(base):]


@dataclass(frozen=True, eq=False)
class Alert:
    """One alert of one overload: its row of the table, read against the overload's schema."""

    row: AlertRow
    op: torch._ops.OpOverload

    @property
    def name(self) -> str:
        """The string CUDA's kernel hands ``alertNotDeterministic`` (``_histc_cuda with floating point input``)."""
        return self.row.alert

    @property
    def source(self) -> str:
        return self.row.source

    @cached_property
    def _tests(self) -> tuple[_Test, ...]:
        schema = OpSchema.of(self.op)
        return tuple(_COMPILE[clause[0]](schema.getter(clause[1]), *clause[2:]) for clause in self.row.when)

    def applies(self, args: Sequence[Any], kwargs: dict[str, Any]) -> bool:
        """Whether CUDA's kernel calls ``alertNotDeterministic`` for these arguments (whatever the mode). Arguments
        the condition cannot read (a user error the kernel will report) make it False."""
        try:
            return all(test(args, kwargs) for test in self._tests)
        except (KeyError, IndexError, TypeError, ValueError, AttributeError, RuntimeError) as exc:
            log.debug("determinism: %s: %s not evaluated on these arguments (%s)", self.row.name, self.op, exc)
            return False

    def check(self, args: Sequence[Any], kwargs: dict[str, Any]) -> None:
        """Do what torch does on a GPU for this call: nothing unless ``torch.are_deterministic_algorithms_enabled()``
        and the condition holds; then raise ``RuntimeError`` with torch's message, or warn (``UserWarning``) with it
        under ``warn_only=True``."""
        if not torch.are_deterministic_algorithms_enabled() or not self.applies(args, kwargs):
            return
        if torch.is_deterministic_algorithms_warn_only_enabled():
            warnings.warn(message(self.name, warn_only=True), UserWarning, stacklevel=outside())
        else:
            raise RuntimeError(message(self.name))

    def __repr__(self) -> str:
        return f"Alert({self.name!r}, {self.op._name!r})"


@cache
def _by_overload() -> ByOverload[AlertRow, Alert]:
    return ByOverload(ALERTS, Alert)


def alerts_of(op: torch._ops.OpOverload) -> tuple[Alert, ...]:
    """The determinism alerts of ``op``'s CUDA kernel (none for most ops)."""
    return _by_overload().of(op)


def check(op: torch._ops.OpOverload, args: Sequence[Any], kwargs: dict[str, Any]) -> None:
    """:meth:`Alert.check` of every alert of ``op`` (cheap when deterministic algorithms are off)."""
    if torch.are_deterministic_algorithms_enabled():
        for alert in alerts_of(op):
            alert.check(args, kwargs)


def alerting() -> tuple[str, ...]:
    """The dispatcher names of the overloads with alerts, sorted."""
    return _by_overload().names()


# -- the clauses (torchdevice.records.determinism.CLAUSES), each compiled once per alert ------------------------------

_Getter = Callable[[Sequence[Any], dict[str, Any]], Any]
_Test = Callable[[Sequence[Any], dict[str, Any]], bool]


def _value(get: _Getter, values: tuple[Any, ...]) -> _Test:
    return lambda args, kwargs: get(args, kwargs) in values


def _given(get: _Getter) -> _Test:
    return lambda args, kwargs: get(args, kwargs) is not None


def _dtype(get: _Getter, names: tuple[str, ...]) -> _Test:
    wanted = frozenset(d for d in (getattr(torch, n, None) for n in names) if isinstance(d, torch.dtype))
    return lambda args, kwargs: get(args, kwargs).dtype in wanted


def _nonempty(get: _Getter) -> _Test:
    return lambda args, kwargs: get(args, kwargs).numel() > 0


_COMPILE: dict[str, Callable[..., _Test]] = {"value": _value, "given": _given, "dtype": _dtype, "nonempty": _nonempty}
