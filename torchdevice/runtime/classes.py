"""Device-taking classes that are C types: ``torch.Generator``, ``torch.Stream``, ``torch.Event``.

A C type's constructor cannot be patched, and replacing the class with a function would break
``isinstance``. The module attribute is replaced by a subclass whose metaclass builds real instances
of the original type from translated arguments and recognises every instance of the original type,
so ``isinstance(torch.default_generator, torch.Generator)`` still holds and pickling, which names
the original type, is unaffected.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from torchdevice.runtime.patching import Patcher
from torchdevice.runtime.redirect import Redirect


def shim(real: type, construct: Callable[..., Any]) -> type:
    """A stand-in for ``real``, installed as ``torch.<name>``: calls go to ``construct``, instance checks
    are ``real``'s, and pickles that name ``torch.<name>`` find the stand-in while it is installed."""

    class Meta(type(real)):  # type: ignore[misc]
        def __call__(cls, *args: Any, **kwargs: Any) -> Any:
            return construct(*args, **kwargs)

        def __instancecheck__(cls, instance: object) -> bool:
            return isinstance(instance, real)

        def __subclasscheck__(cls, subclass: type) -> bool:
            return issubclass(subclass, real)

    namespace = {"__module__": "torch", "__qualname__": real.__name__, "__doc__": real.__doc__}
    return Meta(real.__name__, (real,), namespace)


def patch(patcher: Patcher, r: Redirect) -> None:
    """Install the stand-ins for ``torch.Generator``, ``torch.Stream`` and ``torch.Event``."""
    from torchdevice.runtime.emulation import Event

    generator_slot, stream_slot, event_slot = (r.slot(f"torch.{n}") for n in ("Generator", "Stream", "Event"))
    generator, stream, event = torch.Generator, torch.Stream, torch.Event

    def make_generator(device: Any = "cpu") -> torch.Generator:
        return generator(r.device(generator_slot, device))

    def make_stream(device: Any = None, *args: Any, **kwargs: Any) -> torch.Stream:
        return stream(r.device(stream_slot, device), *args, **kwargs)

    def make_event(device: Any = None, *args: Any, **kwargs: Any) -> Any:
        translated = r.device(event_slot, device)
        if translated != device and r.target.type == "cpu":
            return Event(*args, **kwargs)  # CPU events cannot record: a timing event stands in
        return event(translated, *args, **kwargs)

    patcher.set(torch, "Generator", shim(generator, make_generator))
    patcher.set(torch, "Stream", shim(stream, make_stream))
    patcher.set(torch, "Event", shim(event, make_event))
