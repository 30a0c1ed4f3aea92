"""The policy of every entry: what the runtime does with it, and why. Nothing else classifies entries.

In order, the first that applies:

1. a ``catalog/overlays/cuda.yaml`` record (every module-level ``torch.cuda`` entry has one):
   ``emulate``, ``unsupported`` or ``passthrough``, as the record says;
2. a device parameter: the ``catalog/overlays/devices.yaml`` policy (the entry's own record, else the
   first glob matching its name), else ``wrap`` for C functions and ``torch.Tensor`` methods; any
   other device-bearing entry without a policy is an error, so a new torch release is looked at,
   not guessed;
3. an aten overload the fallback engine registers on MPS: ``fallback`` (no MPS kernel: never tried
   there) or ``watch`` (measured failing there for some calls: tried first);
4. a member of an emulated ``torch.cuda`` class: ``passthrough``, the class stands in as a whole;
5. anything else: ``passthrough``, nothing to translate.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from functools import cached_property
from typing import Literal

from codegen.model import Catalog, Entry
from codegen.overlays.devices import DeviceRule
from torchdevice.records import dispatcher_name

PolicyName = Literal["wrap", "hand", "flows", "emulate", "unsupported", "fallback", "watch", "passthrough"]
"""What the runtime does with an entry: the ``cuda.yaml`` and ``devices.yaml`` policies, and the rules above."""


class PlanError(ValueError):
    """An entry the plan cannot decide on; the message names it and the file to change."""

    def __init__(self, entry: str, message: str):
        super().__init__(f"entry {entry}: {message}")


@dataclass(frozen=True)
class Policy:
    name: PolicyName
    why: str
    by: str = ""
    """``hand``: the runtime module that handles the entry."""


@dataclass(frozen=True)
class Policies:
    """The policy of each entry of ``catalog``; ``missing``/``watched``: the fallback engine's MPS overloads."""

    catalog: Catalog
    missing: frozenset[str]
    watched: frozenset[str]

    @cached_property
    def by_name(self) -> dict[str, Policy]:
        return {e.name: self._decide(e) for e in self.catalog.entries}

    def __getitem__(self, name: str) -> Policy:
        return self.by_name[name]

    def device_rule(self, entry: Entry) -> DeviceRule:
        """The ``devices.yaml`` fields that apply to ``entry``: its own record's over its glob's."""
        own = entry.devices or DeviceRule()
        if own.policy is not None:
            return own
        glob = next((rule for regex, rule in self._patterns if regex.match(entry.name)), None)
        if glob is None:
            return own
        return DeviceRule(policy=glob.policy, why=glob.why, by=glob.by, sample=own.sample or glob.sample,
                          shares=own.shares, module=own.module, places=own.places and glob.places)

    @cached_property
    def _patterns(self) -> list[tuple[re.Pattern[str], DeviceRule]]:
        return [(re.compile(fnmatch.translate(p.glob)), p.rule) for p in self.catalog.device_patterns]

    @cached_property
    def _emulated_classes(self) -> frozenset[str]:
        return frozenset(e.name for e in self.catalog.entries
                         if e.kind == "class" and e.cuda is not None and e.cuda.policy == "emulate")

    def _decide(self, entry: Entry) -> Policy:
        if entry.cuda is not None:
            return Policy(entry.cuda.policy, entry.cuda.why or f"emulated: {entry.cuda.does}")
        if entry.name.startswith("torch.cuda.") and entry.kind not in ("method", "property"):
            raise PlanError(entry.name, "no record in catalog/overlays/cuda.yaml: say what it does without CUDA")
        if entry.device_params:
            return self._device_policy(entry)
        if entry.kind == "op_overload":
            aten = dispatcher_name(entry.name)
            if aten in self.missing:
                return Policy("fallback", "no MPS kernel: on MPS it runs on MLX (when mapped) or on the CPU")
            if aten in self.watched:
                return Policy("watch", "measured failing on MPS for some calls: tried there first, then routed")
        if entry.namespace in self._emulated_classes:
            return Policy("passthrough", f"a member of {entry.namespace}, which the emulation replaces as a whole")
        return Policy("passthrough", "no device to translate; kernels where they are needed")

    def _device_policy(self, entry: Entry) -> Policy:
        rule = self.device_rule(entry)
        if rule.policy is not None:
            return Policy(rule.policy, rule.why, rule.by)
        if entry.kind == "builtin" or (entry.kind == "method" and entry.namespace == "torch.Tensor"):
            return Policy("wrap", "C code: a wrapper is the only place to translate its device")
        raise PlanError(entry.name, f"device parameters {', '.join(entry.device_params)} but no policy: "
                                    "give it one in catalog/overlays/devices.yaml")

