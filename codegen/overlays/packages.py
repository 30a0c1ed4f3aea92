"""Packages that need CUDA, or choose a CUDA backend of their own (``catalog/overlays/packages.yaml``): what
``torchdevice check`` says of a program that imports them, and which packages the runtime tells the truth.

Keys are module names (``apex``, ``apex.normalization``); the longest one that prefixes an imported module
applies. One record per module::

    cupy: {policy: blocker, why: CuPy arrays live in CUDA memory, instead: use torch tensors or NumPy}
    flash_attn: {policy: standin, why: torchdevice puts a PyTorch stand-in in its place}
    bitsandbytes: {policy: truth, probes: [torch.cuda.is_available], why: its CUDA backend needs CUDA,
                   gets: its CPU backend}
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

MODULE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


@dataclass(frozen=True)
class PackageRule:
    policy: Literal["blocker", "standin", "truth"]
    """``blocker``: it cannot be imported, or does nothing, without CUDA, and has no stand-in;
    ``standin``: the runtime puts a stand-in in its place;
    ``truth``: it probes CUDA to choose a backend of its own, whose CUDA path cannot work without CUDA: the
    runtime answers its own code (the module and its submodules) as it answers torch's, with the machine as it
    is, so it takes another backend."""
    why: str
    instead: str = ""
    """``blocker``: what the user can do instead."""
    probes: tuple[str, ...] = ()
    """``truth``: the torch functions it asks to choose (torch names of the catalog)."""
    gets: str = ""
    """``truth``: what it does, told the truth."""

    def __post_init__(self) -> None:
        if self.policy == "blocker" and not self.instead:
            raise ValueError("policy blocker needs instead: what the user can do")
        truth = self.policy == "truth"
        if truth and not (self.probes and self.gets):
            raise ValueError("policy truth needs probes (the torch functions it asks) and gets (what it does then)")
        if not truth and (self.probes or self.gets):
            raise ValueError(f"probes and gets are for policy truth, not {self.policy}")
        if truth and self.instead:
            raise ValueError("policy truth says what the package does (gets), not instead")
