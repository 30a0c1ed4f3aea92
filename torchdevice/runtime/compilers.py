"""Torch's compilers keep recognizing torch functions while device wrappers stand in for them.

TorchScript and Dynamo both know torch's functions by identity. TorchScript's builtin table
(``id(torch.zeros) -> aten::zeros``) is read when a function is scripted: each wrapper gets its
original's entry, so scripted code calls the op (the stand-in for ``torch.device`` gets
``aten::device``, the op TorchScript compiles ``torch.device(...)`` to). Dynamo inlines a wrapper
(plain Python) and must then recognize the original it calls in its rule map, which it builds
from ``getattr(torch, name)`` when ``torch._dynamo`` is first imported (creating an optimizer does that) and again after
``init_process_group`` clears it. A map built while the wrappers are installed would name the
wrappers, and ``torch.compile`` would then refuse the originals; so while installed, every map
Dynamo builds is corrected, each wrapper's rule given back to its original. If ``torch._dynamo``
is not imported yet, a meta path hook applies the correction when it is.

Dynamo never traces torch's own autocast methods; it must not trace those that stand in for them either
(:data:`UNTRACED`): a region entered again after a graph break inside it calls ``__enter__`` in a frame
of its own, where Dynamo would model the autocast object as one whose attributes it cannot read.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

import torch
import torch.jit._builtins

from torchdevice.patching import Patcher

TRACE_RULES = "torch._dynamo.trace_rules"

UNTRACED = frozenset((Path(__file__).parent / name).as_posix() for name in ("amp.py", "autocast_policy.py"))
"""Runtime files whose functions Dynamo runs as they are, as it runs the torch functions they stand in for:
autocast's methods, and the CUDA policy the first region opened for CUDA registers."""

SCRIPTED_TYPES = {torch.device: "aten::device"}
"""C types TorchScript recognises by identity, with the op it compiles their calls to: a stand-in
for one (:mod:`torchdevice.runtime.device_classes`) is compiled to the same op."""


class Compilers:
    """The compilers' view of one installation's wrappers; undone by the patcher."""

    def __init__(self, patcher: Patcher) -> None:
        self.patcher = patcher
        self.originals: dict[Any, Any] = {}  # wrapper -> the function it stands in for
        self._jit = torch.jit._builtins._get_builtin_table()
        patcher.defer(self._forget)
        patcher.after_import(TRACE_RULES, self._adapt_dynamo)

    def add(self, original: Any, wrapper: Any) -> None:
        """``wrapper`` now stands where ``original`` was."""
        self.originals[wrapper] = original
        aten = self._jit.get(id(original)) or SCRIPTED_TYPES.get(original)
        if aten is not None:
            self._jit[id(wrapper)] = aten

    def _forget(self) -> None:
        for wrapper in self.originals:
            self._jit.pop(id(wrapper), None)
        self.originals.clear()

    def _adapt_dynamo(self, trace_rules: ModuleType) -> None:
        self._correct_rule_maps(trace_rules)
        self._skip_untraced(trace_rules)

    def _skip_untraced(self, trace_rules: ModuleType) -> None:
        added = UNTRACED - trace_rules.FORCE_SKIP_FILES
        trace_rules.FORCE_SKIP_FILES.update(added)
        self.patcher.defer(lambda: trace_rules.FORCE_SKIP_FILES.difference_update(added))

    def _correct_rule_maps(self, trace_rules: ModuleType) -> None:
        build = trace_rules.get_torch_obj_rule_map
        originals = self.originals
        corrected: dict[Any, Any] | None = None

        def get_torch_obj_rule_map() -> dict[Any, Any]:
            nonlocal corrected
            rules = build()
            if rules is not corrected:  # a map not seen yet: built, or rebuilt
                for wrapper in rules.keys() & originals.keys():
                    rules.setdefault(originals[wrapper], rules.pop(wrapper))
                corrected = rules
            return rules

        get_torch_obj_rule_map.cache_clear = build.cache_clear  # type: ignore[attr-defined]
        self.patcher.set(trace_rules, "get_torch_obj_rule_map", get_torch_obj_rule_map)
