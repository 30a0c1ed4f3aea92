"""How the runtime translates each entry that takes a device (``catalog/overlays/devices.yaml``).

Keys are entry names or globs (``torch.nn.*``); for an entry, its own record's fields win over those of
the first glob (in file order) matching its name. Entries without a policy from either take the rule
of their kind: C functions and ``torch.Tensor`` methods get a generated wrapper (nothing else sees
their device before C code does); any other device-bearing entry must be given a policy::

    torch.Tensor.cuda: {policy: hand, by: tensors, why: moves to the target}
    torch.from_dlpack: {policy: wrap, why: the device goes to the producer's __dlpack__}
    torch.nn.*: {policy: flows, why: modules pass the device to factories and Tensor.to}
    torch.linspace: {sample: "torch.linspace(0, 5, 4, device=DEVICE)"}
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from torchdevice.records import HAND_WRITTEN

DevicePolicy = Literal["wrap", "hand", "flows", "passthrough"]


@dataclass(frozen=True)
class DeviceRule:
    policy: DevicePolicy | None = None
    """``wrap``: a generated wrapper translates the device argument; ``hand``: code written by hand in the
    runtime module ``by``; ``flows``: left alone, its device argument only reaches translated entries;
    ``passthrough``: left alone, not a CUDA entry point."""
    why: str = ""
    by: str = ""
    """``hand``: the runtime module that handles the entry."""
    sample: str = ""
    """A call of the entry with ``DEVICE`` for the device, where its signature cannot suggest one; the
    per-entry test runs it with ``"cuda"`` through the runtime and ``"cpu"`` natively."""
    shares: bool = False
    """``wrap``: the result may share its argument's memory (``torch.as_tensor``); asked for CUDA, it is
    copied unless it is already on that emulated device, as a host-to-device move copies on a GPU."""
    module: bool = False
    """``wrap``: the result is a module loaded onto the device (``torch.jit.load``); asked for CUDA, its
    parameters and buffers are marked as on the emulated device."""
    places: bool = True
    """Whether the sample's tensors are made on the device it is given (the per-entry test then checks they say
    so); false where they are results of operations (not followed: see docs/targets/cpu.md) or host memory."""

    def __post_init__(self) -> None:
        if self.policy is not None and not self.why:
            raise ValueError(f"policy {self.policy} needs why")
        if (self.policy == "hand") != bool(self.by):
            raise ValueError("by names the hand-written module of policy hand, and only of it")
        if (self.shares or self.module) and self.policy != "wrap":
            raise ValueError("shares and module describe the result of a generated wrapper (policy wrap)")
        if self.by and self.by not in HAND_WRITTEN:
            raise ValueError(f"by: {self.by!r} is not a hand-written runtime module ({', '.join(HAND_WRITTEN)})")
