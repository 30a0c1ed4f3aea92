"""Sample calls of the device-bearing entries the runtime translates, for their per-entry test: the
``devices.yaml`` record's ``sample``, else a call derived from the entry's first overload that has
the device parameter and only required parameters a value can be found for."""

from __future__ import annotations

import re
from dataclasses import dataclass

from codegen.model import Entry
from codegen.plan.policies import PlanError, Policies
from codegen.signatures import INT_LIKE, P, Param

UNINITIALIZED = re.compile(r"(^|\.)(empty\w*|new_empty\w*|new|to_empty)$")
"""Entries whose results hold uninitialized memory: only their metadata can be compared."""

_BY_NAME = {"low": "0", "high": "5", "start": "0", "end": "5", "steps": "4", "step": "1", "fill_value": "1.5",
            "data": "[1.0, 2.0]", "obj": "[1.0, 2.0]", "M": "5", "kernel_size": "2", "module": "torch.nn.Linear(3, 3)",
            "model": "torch.nn.Linear(3, 3)"}
_BY_ANNOTATION = ((re.compile(r"\bTensor\b"), "torch.ones(2, 3)"),
                  (re.compile(r"Sequence\[|_size\b|tuple\[int"), "(2, 3)"),
                  (INT_LIKE, "3"), (re.compile(r"\bfloat\b|_float\b"), "1.5"), (re.compile(r"\bbool\b"), "True"))
_RECEIVERS = {"torch.Tensor": "torch.ones(2, 3)", "torch.nn.Module": "torch.nn.Linear(3, 3)"}


@dataclass(frozen=True)
class Sample:
    """How the test calls a device-bearing entry: ``call`` with ``DEVICE`` for the device."""

    name: str
    call: str
    values: bool
    """Whether results are compared by value (not for uninitialized memory)."""
    places: bool = True
    """Whether its tensors are made on the device it is given (``devices.yaml``'s ``places``)."""


def sample_of(entry: Entry, policies: Policies) -> Sample:
    values = not UNINITIALIZED.search(entry.name)
    rule = policies.device_rule(entry)
    if rule.sample:
        return Sample(entry.name, rule.sample, values, rule.places)
    receiver = _RECEIVERS.get(entry.namespace)
    callee = f"{receiver}.{entry.attr}" if receiver and entry.kind == "method" else entry.name
    param = entry.device_params[0]
    for signature in entry.signatures:
        params = signature.params
        if param not in (p.name for p in params):
            continue
        args = _arguments(params[1:] if receiver and entry.kind == "method" else params, param)
        if args is not None:
            return Sample(entry.name, f"{callee}({', '.join((*args, f'{param}=DEVICE'))})", values)
    raise PlanError(entry.name, "no sample call: its required arguments have no derivable value; "
                                "give one as `sample` in catalog/overlays/devices.yaml")


def _arguments(params: tuple[Param, ...], device: str) -> list[str] | None:
    """Source of the required arguments, positionally, or ``None`` when one has no derivable value."""
    args = []
    for p in params:
        if p.name == device or p.kind == P.VAR_KEYWORD or (p.default is not None and p.kind != P.VAR_POSITIONAL):
            continue
        if p.kind == P.VAR_POSITIONAL:
            if p.name == "size":
                args.append("2, 3")
            continue
        value = _BY_NAME.get(p.name) or next(
            (v for pattern, v in _BY_ANNOTATION if pattern.search(p.annotation or "")), None)
        if value is None:
            return None
        args.append(f"{p.name}={value}" if p.kind == P.KEYWORD_ONLY else value)
    return args
