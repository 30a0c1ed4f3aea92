"""What ``torchdevice check`` says of a program that imports a CUDA-only package (``catalog/overlays/packages.yaml``).

Keys are module names (``apex``, ``apex.normalization``); the longest one that prefixes an imported module
applies. One record per module::

    cupy: {policy: blocker, why: CuPy arrays live in CUDA memory, instead: use torch tensors or NumPy}
    flash_attn: {policy: standin, why: torchdevice puts a PyTorch stand-in in its place}
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

MODULE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


@dataclass(frozen=True)
class PackageRule:
    policy: Literal["blocker", "standin"]
    """``blocker``: it cannot be imported, or does nothing, without CUDA, and has no stand-in;
    ``standin``: the runtime puts a stand-in in its place."""
    why: str
    instead: str = ""
    """``blocker``: what the user can do instead."""

    def __post_init__(self) -> None:
        if self.policy == "blocker" and not self.instead:
            raise ValueError("policy blocker needs instead: what the user can do")
