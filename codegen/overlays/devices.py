"""How the runtime translates each entry that takes a device (``catalog/overlays/devices.yaml``).

Keys are entry names or globs (``torch.nn.*``); for an entry, its own record's fields win over those of
the first glob (in file order) matching its name. Entries without a route from either take the rule
of their kind: C functions and ``torch.Tensor`` methods get a generated wrapper (nothing else sees
their device before C code does); any other device-bearing entry must be given a route::

    torch.Tensor.cuda: {route: hand, by: tensors, why: moves to the target}
    torch.from_dlpack: {route: wrap, why: the device goes to the producer's __dlpack__}
    torch.nn.*: {route: flows, why: modules pass the device to factories and Tensor.to}
    torch.linspace: {sample: "torch.linspace(0, 5, 4, device=DEVICE)"}
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Route = Literal["wrap", "hand", "flows", "passthrough"]

HAND_WRITTEN = ("tensors", "data", "amp", "classes")
"""The runtime's hand-written modules (``torchdevice/runtime/<name>.py``)."""


@dataclass(frozen=True)
class DeviceRule:
    route: Route | None = None
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

    def __post_init__(self) -> None:
        if self.route is not None and not self.why:
            raise ValueError(f"route {self.route} needs why")
        if (self.route == "hand") != bool(self.by):
            raise ValueError("by names the hand-written module of route hand, and only of it")
        if self.shares and self.route != "wrap":
            raise ValueError("shares describes the result of a generated wrapper (route wrap)")
        if self.by and self.by not in HAND_WRITTEN:
            raise ValueError(f"by: {self.by!r} is not a hand-written runtime module ({', '.join(HAND_WRITTEN)})")
