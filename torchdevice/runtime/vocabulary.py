"""The emulation vocabulary's registry: the words ``catalog/overlays/cuda.yaml`` names (``does:``), marked where
they are defined (``torchdevice.records.WORD_MODULES``: :mod:`.emulation`, :mod:`.graphs`) and looked up by
:class:`~.emulation.Emulation`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

WORDS: dict[str, str] = {}
"""Word -> how it is built: ``word`` (the method or class itself) or ``builder`` (called with the ``value``)."""


def word(obj: Any) -> Any:
    """Mark ``obj`` (a method of :class:`Emulation`, or a class) as the vocabulary word ``obj.__name__``."""
    WORDS[obj.__name__] = "word"
    return obj


def builder(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Mark method ``fn(self, value)`` as the builder of the vocabulary word ``fn.__name__``."""
    WORDS[fn.__name__] = "builder"
    return fn
