"""Measuring the MPS column of the tables on a device: what ``torchdevice probe`` runs.

Two tables say what MPS refuses: the fallback table (the overloads without an MPS kernel) and the limits table
(:mod:`torchdevice.device.limits`). A probe calls each on the device and compares what happens with what the table
says, for this torch and this macOS:

- a limit: its ``probe`` call (data of the table: tensors written ``"float32[2, 3]"`` become random tensors on the
  device) must raise the limit's exception where :meth:`~torchdevice.device.limits.Limit.applies` says so on this
  macOS, and run where it does not; a limit MPS answers differently (no exception) must give other values than the
  CPU for the same arguments;
- a missing kernel: the overload, called with arguments made from its schema (small tensors on the device), must
  raise MPS's missing-kernel error (the dispatcher raises it before any kernel looks at the arguments).

Each gives an :class:`Outcome`: ``confirmed``, ``contradicted`` (with what happened instead) or ``not probed``
(why). Nothing here knows the device: a Mac and the simulated Mac are probed alike.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

import torch

from torchdevice.device import limits
from torchdevice.device.aten import overload, tree_map
from torchdevice.device.errors import classify
from torchdevice.device.limits import Limit

Verdict = Literal["confirmed", "contradicted", "not probed"]
_TENSOR = re.compile(r"(\w+)\[([\d, ]*)\](?:<(\d+))?")
_CPU = torch.device("cpu")


@dataclass(frozen=True)
class Outcome:
    """What a probe found for one limit or one missing overload."""

    subject: str
    """The limit's name, or the overload's dispatcher name."""
    kind: Literal["limit", "missing"]
    verdict: Verdict
    expected: str
    observed: str

    def line(self) -> str:
        if self.verdict == "not probed":
            return f"{self.subject}: not probed ({self.observed})"
        return f"{self.subject}: expected {self.expected}; {self.observed}"


def probe_limits(device: torch.device, macos: tuple[int, int], names: Iterable[str] | None = None) -> list[Outcome]:
    """Probe each limit of the table (or those named) on ``device``, answering for macOS ``macos``."""
    wanted = set(names) if names is not None else None
    return [probe_limit(row_limit, device, macos) for row_limit in _limits()
            if wanted is None or row_limit.name in wanted]


def _limits() -> list[Limit]:
    """One :class:`Limit` per row: bound to its probe's overload (generic refusals too, where they have one)."""
    found = []
    for row in limits.table():
        op = overload(row.probe.op) if row.probe.op else None
        match = next((lim for lim in limits.limits_of(op) if lim.name == row.name), None) if op is not None else None
        found.append(match or Limit(row, op))
    return found


def probe_limit(limit: Limit, device: torch.device, macos: tuple[int, int]) -> Outcome:
    probe = limit.row.probe
    if probe.skip or limit.op is None:
        return Outcome(limit.name, "limit", "not probed", "", probe.skip or "no probe call")
    try:
        args, kwargs = _values(probe.args, device), {k: _values(v, device) for k, v in probe.kwargs.items()}
    except Exception as exc:  # noqa: BLE001 - the device cannot hold the arguments: nothing to measure
        return Outcome(limit.name, "limit", "not probed", "", f"its arguments cannot be made here ({_short(exc)})")
    if "device" in _parameters(limit.op) and "device" not in kwargs:
        kwargs["device"] = device
    applies = limit.applies(args, kwargs, macos)
    if limit.raises is None:
        return _probe_values(limit, args, kwargs, applies)
    expected = f"MPS to refuse it ({limit.raises.__name__})" if applies else "MPS to run it"
    try:
        with torch.no_grad():
            limit.op(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - what the device raised is the measurement
        if limit.raised(exc):
            return Outcome(limit.name, "limit", "confirmed" if applies else "contradicted", expected,
                           "it refused it" if applies else f"it refused it ({_short(exc)})")
        return Outcome(limit.name, "limit", "contradicted", expected, f"it raised another error: {_short(exc)}")
    return Outcome(limit.name, "limit", "contradicted" if applies else "confirmed", expected, "it ran")


def _probe_values(limit: Limit, args: Any, kwargs: dict[str, Any], applies: bool) -> Outcome:
    """A limit MPS answers differently: the device's values against the CPU's."""
    assert limit.op is not None
    expected = "values other than the CPU's" if applies else "the CPU's values"
    try:
        with torch.no_grad():
            got = limit.op(*args, **kwargs)
            on_cpu = limit.op(*tree_map(_to_cpu, args), **{k: tree_map(_to_cpu, v) for k, v in kwargs.items()})
    except Exception as exc:  # noqa: BLE001
        return Outcome(limit.name, "limit", "contradicted", expected, f"it raised {_short(exc)}")
    first = got[0] if isinstance(got, (tuple, list)) else got
    reference = on_cpu[0] if isinstance(on_cpu, (tuple, list)) else on_cpu
    same = torch.allclose(first.to(_CPU), reference, rtol=1e-4, atol=1e-5)
    observed = "it gave the CPU's values" if same else "it gave other values"
    return Outcome(limit.name, "limit", "confirmed" if same != applies else "contradicted", expected, observed)


def probe_missing(device: torch.device, overloads: Iterable[str] | None = None) -> list[Outcome]:
    """Probe each overload the fallback table says MPS has no kernel for (or those given)."""
    if overloads is None:
        from torchdevice_generated.fallback_table import MISSING_ON_MPS

        overloads = MISSING_ON_MPS
    return [_probe_missing(name, device) for name in sorted(overloads)]


def _probe_missing(name: str, device: torch.device) -> Outcome:
    expected = "no MPS kernel"
    op = overload(name)
    if op is None:
        return Outcome(name, "missing", "not probed", expected, "no such overload in this torch")
    try:
        args, kwargs = sample(op, device)
    except _NoSample as why:
        return Outcome(name, "missing", "not probed", expected, str(why))
    try:
        with torch.no_grad():
            op(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001
        if classify(exc, "MPS") == "kernel":
            return Outcome(name, "missing", "confirmed", expected, "it has none")
        return Outcome(name, "missing", "not probed", expected,  # torch's checks may run before the kernel is sought
                       f"inconclusive: the sample arguments raised {_short(exc)}")
    return Outcome(name, "missing", "contradicted", expected, "it has one (it ran)")


class _NoSample(Exception):
    """An argument the probe cannot make from its type."""


def sample(op: torch._ops.OpOverload, device: torch.device) -> tuple[list[Any], dict[str, Any]]:
    """Arguments for ``op`` made from its schema: small float32 tensors on ``device``, ones, empty strings, the
    device (also where optional: it chooses a factory's kernel); other optional ones left out (None)."""
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    for a in op._schema.arguments:
        writes = a.alias_info is not None and a.alias_info.is_write
        if a.name == "device":  # a factory: the device chooses the kernel
            value: Any = device
        elif a.has_default_value() and not (a.kwarg_only and writes):
            continue
        else:
            value = _value_of(a.type, a.name, device, getattr(a, "N", None))
        if a.kwarg_only:
            kwargs[a.name] = value
        else:
            args.append(value)
    return args, kwargs


def _value_of(kind: Any, name: str, device: torch.device, count: int | None) -> Any:
    text = str(kind)
    if text.startswith("Optional["):
        return None
    if text == "Tensor":
        return torch.zeros(2, 2, device=device)
    if text == "List[Tensor]":
        return [torch.zeros(2, 2, device=device)]
    simple = {"int": 1, "float": 0.5, "bool": False, "number": 1, "str": "", "List[int]": [1] * (count or 1),
              "List[bool]": [False] * (count or 1),
              "Device": device, "ScalarType": torch.float32, "Layout": torch.strided,
              "MemoryFormat": torch.contiguous_format}
    if text in simple:
        return simple[text]
    raise _NoSample(f"no sample for argument {name} of type {text}")


def _values(value: Any, device: torch.device) -> Any:
    """A probe's value: ``"float32[2, 3]"`` a random tensor on ``device``, ``"int64[4]<9"`` integers below 9, a
    dtype's name the dtype; lists element by element."""
    if isinstance(value, (list, tuple)):
        return [_values(v, device) for v in value]
    if not isinstance(value, str):
        return value
    match = _TENSOR.fullmatch(value)
    if match is None:
        dtype = getattr(torch, value, None)
        return dtype if isinstance(dtype, torch.dtype) else value
    dtype = getattr(torch, match[1])
    sizes = [int(s) for s in match[2].split(",") if s.strip()]
    generator = torch.Generator().manual_seed(0)
    if dtype.is_floating_point or dtype.is_complex:
        made = torch.randn(sizes, generator=generator, dtype=dtype)
    elif dtype == torch.bool:
        made = torch.randint(0, 2, sizes, generator=generator).bool()
    else:
        made = torch.randint(0, int(match[3] or 4), sizes, generator=generator, dtype=dtype)
    return made.reshape(-1).to(device).view(sizes)  # a view: MPS allocates at most 16 dimensions, views have more


def _to_cpu(x: Any) -> Any:
    if isinstance(x, torch.Tensor):
        return x.to(_CPU)
    return _CPU if isinstance(x, torch.device) else x


def _parameters(op: torch._ops.OpOverload) -> set[str]:
    return {a.name for a in op._schema.arguments}


def _short(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text[:160]}"


def summary(outcomes: list[Outcome]) -> dict[str, int]:
    """Outcome counts by verdict."""
    counts = {"confirmed": 0, "contradicted": 0, "not probed": 0}
    for outcome in outcomes:
        counts[outcome.verdict] += 1
    return counts
