"""Packages that need CUDA, or choose a CUDA backend of their own (``catalog/overlays/packages.yaml``): what
``torchdevice check`` says of a program that imports them, and which packages the runtime tells the truth.

Keys are module names (``apex``, ``apex.normalization``); the longest one that prefixes an imported module
applies. One record per module::

    cupy: {policy: blocker, why: CuPy arrays live in CUDA memory, instead: use torch tensors or NumPy}
    flash_attn: {policy: standin, why: torchdevice puts a PyTorch stand-in in its place}
    bitsandbytes: {policy: truth, probes: [torch.cuda.is_available], why: its CUDA backend needs CUDA,
                   gets: its CPU backend}
    triton: {policy: interpreted, why: its kernels compile for GPUs, runs_on: [cpu, mps-sim],
             cost: the runtime interprets them, instead: where it cannot be installed, keep a PyTorch path}
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from torchdevice.records.check import TARGETS

MODULE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


@dataclass(frozen=True)
class PackageRule:
    policy: Literal["blocker", "standin", "truth", "interpreted", "program"]
    """``blocker``: it cannot be imported, or does nothing, without CUDA, and has no stand-in;
    ``standin``: the runtime puts a stand-in in its place;
    ``truth``: it probes CUDA to choose a backend of its own, whose CUDA path cannot work without CUDA: the
    runtime answers its own code (the module and its submodules) as it answers torch's, with the machine as it
    is, so it takes another backend;
    ``interpreted``: its GPU code cannot run here, but where it can be installed (``runs_on``) the runtime runs it
    another way (Triton's kernels in Triton's interpreter), at a ``cost``; elsewhere it blocks (``instead``);
    ``program``: a module of torch's own that the runtime answers as it answers the program (it uses the emulated
    ``torch.cuda`` only through its public functions, or it speaks to the program), where the rest of torch is told
    the truth."""
    why: str
    instead: str = ""
    """``blocker``: what the user can do instead."""
    probes: tuple[str, ...] = ()
    """``truth``: the torch functions it asks to choose (torch names of the catalog)."""
    gets: str = ""
    """``truth``: what it does, told the truth."""
    runs_on: tuple[str, ...] = ()
    """``interpreted``: the targets of ``torchdevice check`` where it installs and the runtime runs it."""
    cost: str = ""
    """``interpreted``: what running it there costs."""

    def __post_init__(self) -> None:
        if self.policy in ("blocker", "interpreted") and not self.instead:
            raise ValueError(f"policy {self.policy} needs instead: what the user can do")
        interpreted = self.policy == "interpreted"
        if interpreted and not (self.runs_on and self.cost):
            raise ValueError("policy interpreted needs runs_on (the targets where it runs) and cost")
        if not interpreted and (self.runs_on or self.cost):
            raise ValueError(f"runs_on and cost are for policy interpreted, not {self.policy}")
        unknown = set(self.runs_on) - set(TARGETS)
        if unknown:
            raise ValueError(f"runs_on: {', '.join(sorted(unknown))} not a target ({', '.join(TARGETS)})")
        truth = self.policy == "truth"
        if truth and not (self.probes and self.gets):
            raise ValueError("policy truth needs probes (the torch functions it asks) and gets (what it does then)")
        if not truth and (self.probes or self.gets):
            raise ValueError(f"probes and gets are for policy truth, not {self.policy}")
        if truth and self.instead:
            raise ValueError("policy truth says what the package does (gets), not instead")
        if self.policy == "program" and self.instead:
            raise ValueError("policy program says why (what the module does with the answers), not instead")
