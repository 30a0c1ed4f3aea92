"""CUDA's attention backend choices as kernel preferences on the target.

``sdpa_kernel(SDPBackend.EFFICIENT_ATTENTION)`` (or ``CUDNN_ATTENTION``, or a list without ``MATH``) would leave
``scaled_dot_product_attention`` no backend the target has ("No viable backend"), where on a GPU it runs. The
runtime keeps the backends the program chose (what ``torch.backends.cuda.*_sdp_enabled()`` and
``sdpa_kernel`` report) apart from the flags torch dispatches on: when the program enables any fused CUDA
backend, the target's own fused kernel (the CPU's flash kernel) and ``MATH`` are enabled, with the same
semantics; ``MATH`` alone stays ``MATH`` alone. ``is_flash_attention_available`` and ``can_use_*_attention``
answer True, as the chosen backend then runs. Each pinned choice that is mapped is counted in the report.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch

from torchdevice.patching import Patcher
from torchdevice.reporting.counts import record_redirect

FLAGS = ("cudnn", "flash", "mem_efficient", "math", "overrideable")
"""torch's SDPA flags (``torch._C._set_sdp_use_<flag>``, ``torch._C._get_<flag>_sdp_enabled``)."""
FUSED = ("cudnn", "flash", "mem_efficient")
NAMES = {"cudnn": "CUDNN_ATTENTION", "flash": "FLASH_ATTENTION", "mem_efficient": "EFFICIENT_ATTENTION",
         "math": "MATH", "overrideable": "OVERRIDEABLE"}
TARGET_FUSED = {"cpu": ("flash",), "cuda-sim": ("flash",)}
"""The fused SDPA kernels each target has, by its name (MPS: none, its SDPA runs under ``MATH``; a simulated GPU
computes with the CPU's)."""


class Choices:
    """The backends the program chose, and the flags set from them for the target named ``target``."""

    def __init__(self, target: str, setters: dict[str, Any]):
        self.target, self.setters = target, setters
        self.chosen = {flag: bool(getattr(torch._C, f"_get_{flag}_sdp_enabled")()) for flag in FLAGS}
        self.deferred = False

    def set(self, flag: str, enabled: bool) -> None:
        self.chosen[flag] = bool(enabled)
        if not self.deferred:
            self.apply()

    def effective(self) -> dict[str, bool]:
        """The flags torch dispatches on."""
        flags = dict(self.chosen)
        if any(self.chosen[f] for f in FUSED):
            flags["math"] = True
            for fused in TARGET_FUSED.get(self.target, ()):
                flags[fused] = True
        return flags

    def apply(self) -> None:
        for flag, enabled in self.effective().items():
            self.setters[flag](enabled)

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """Apply once after several choices (``sdpa_kernel`` sets every flag in turn), counting a mapped one."""
        self.deferred = True
        try:
            yield
        finally:
            self.deferred = False
            self.apply()
        effective = self.effective()
        if effective != self.chosen:
            names = lambda flags: "+".join(NAMES[f] for f in FLAGS if flags[f]) or "none"  # noqa: E731
            record_redirect("torch.nn.attention.sdpa_kernel",
                            f"{names(self.chosen)}->{self.target}:{names(effective)}")


def activate(patcher: Patcher, target: str) -> None:
    """Patch torch's SDPA flag functions (``torch._C``) and ``torch.nn.attention._sdpa_kernel`` until restore."""
    import torch.nn.attention as attention

    setters = {flag: getattr(torch._C, f"_set_sdp_use_{flag}") for flag in FLAGS}
    choices = Choices(target, setters)

    def restore_flags() -> None:  # torch's flags become what the program chose
        for flag, enabled in choices.chosen.items():
            setters[flag](enabled)

    patcher.defer(restore_flags)
    for flag in FLAGS:
        patcher.set(torch._C, f"_set_sdp_use_{flag}", lambda enabled, flag=flag: choices.set(flag, enabled))
        patcher.set(torch._C, f"_get_{flag}_sdp_enabled", lambda flag=flag: choices.chosen[flag])
    original = attention._sdpa_kernel

    def _sdpa_kernel(backends: Any, set_priority: bool = False) -> None:
        with choices.batch():
            original(backends, set_priority)

    patcher.set(attention, "_sdpa_kernel", _sdpa_kernel)
    patcher.set(torch._C, "_is_flash_attention_available", lambda: True)
    for name in ("_can_use_flash_attention", "_can_use_mem_efficient_attention", "_can_use_cudnn_attention"):
        patcher.set(torch._C, name, lambda params, debug=False: True)
    choices.apply()
