"""The rewrite rule record: one entry of ``catalog/overlays/rewrite.yaml``.

``codegen`` loads and validates the YAML into these records and renders them into
``torchdevice_generated.rewrite_rules``, which builds them at run time: the record lives here so that
the runtime package depends on nothing of ``codegen``.

A rule is one of five kinds:

``call``
    A call to the torch callable ``match`` becomes a call to ``to``; arguments can move between
    positions and keywords, the accelerator's device type can be inserted, and calls that raise
    where no accelerator exists are guarded and give ``without_accelerator`` there instead.
``method``
    A method call ``x.<match>(...)`` (``x.cuda()``) becomes ``x.<to>(<device>)``.
``device`` / ``backend``
    The string ``match`` (``"cuda"``, ``"nccl"``) where a device (backend) is expected becomes the
    accelerator's device (its default distributed backend). ``keywords``, ``names``, ``methods``,
    ``arguments``, ``options`` and ``lookups`` say where a value is "expected".
``argument``
    Arguments of the torch callable ``match`` that name CUDA devices (DDP's ``device_ids``) and are
    rejected elsewhere: ``value`` becomes ``value if <accelerator>.type == "cuda" else None`` (the
    type is the ``device`` rule's ``match``), which keeps them on CUDA.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import Field, dataclass, field, fields
from typing import Literal

Kind = Literal["call", "method", "device", "backend", "argument"]

_FIELDS: dict[str, set[str]] = {
    "call": {"to", "params", "args", "device_type", "without_accelerator", "result_methods"},
    "method": {"to", "params"},
    "device": {"cpu", "keywords", "type_keywords", "names", "methods", "arguments", "type_arguments", "options",
               "lookups"},
    "backend": {"to", "cpu", "keywords", "names", "arguments", "options", "lookups"},
    "argument": {"params", "keywords"},
}
_COMMON = {"name", "kind", "doc", "match"}


@dataclass(frozen=True)
class RewriteRule:
    """One CUDA-specific construct and its device-agnostic replacement."""

    name: str
    """Unique; the golden fixtures of the rule are ``tests/rewrite/fixtures/<name>*.in.py``."""
    kind: Kind
    doc: str
    """One line: what the rule rewrites and why."""
    match: str
    """call/argument: qualified torch name; method: method name; device/backend: the string value."""
    to: str = ""
    """call: qualified replacement; method: replacement method; backend: torch callable mapping a device to
    its default backend."""
    params: tuple[str, ...] = ()
    """call/method/argument: parameter names of the matched callable, in order (to move arguments, or to
    find those given by position)."""
    args: Literal["same", "positional", "keywords"] = "same"
    """call: how arguments are passed to ``to``: unchanged, all positionally, or all by keyword."""
    device_type: Literal["none", "first", "keyword"] = "none"
    """call: pass the accelerator's device type as first argument, as ``device_type=``, or not at all."""
    without_accelerator: str | None = None
    """call: Python expression the call gives where no accelerator exists (the call is then guarded);
    ``"None"`` on a call that is a statement of its own guards the statement with ``if``."""
    result_methods: dict[str, str] = field(default_factory=dict)
    """call: methods of the created object that raise where no accelerator exists -> value there."""
    cpu: str = ""
    """device/backend: the value meaning "no accelerator" (``"cpu"``), as in ``"cuda" if ... else "cpu"``."""
    keywords: tuple[str, ...] = ()
    """device/backend: keyword arguments that take the value; argument: the parameters that only apply on CUDA."""
    type_keywords: tuple[str, ...] = ()
    """device: keyword arguments that take a device type string."""
    names: str = ""
    """device/backend: regular expression for names that hold the value (variables, attributes, parameters,
    dictionary keys, command-line options)."""
    methods: tuple[str, ...] = ()
    """device: methods whose positional arguments take a device."""
    arguments: dict[str, int] = field(default_factory=dict)
    """device/backend: torch callable -> index of the positional argument that takes the value."""
    type_arguments: dict[str, int] = field(default_factory=dict)
    """device: torch callable -> index of the positional argument that takes a device type string."""
    options: tuple[str, ...] = ()
    """device/backend: calls declaring an option (``add_argument``) whose ``default=`` holds the value when the
    option's name matches ``names``."""
    lookups: tuple[str, ...] = ()
    """device/backend: calls ``x.get(key, default)`` whose second argument holds the value when ``key`` matches
    ``names``."""

    def __post_init__(self) -> None:
        allowed = _FIELDS[self.kind] | _COMMON
        for f in fields(self):
            if f.name not in allowed and getattr(self, f.name) != _default(f):
                raise ValueError(f"rewrite rule {self.name!r}: field {f.name!r} does not apply to kind {self.kind!r}")
        if self.kind in ("call", "method", "backend") and not self.to:
            raise ValueError(f"rewrite rule {self.name!r}: kind {self.kind!r} needs 'to'")
        if self.args != "same" and not self.params:
            raise ValueError(f"rewrite rule {self.name!r}: args {self.args!r} needs 'params'")
        if self.kind == "argument" and not (self.keywords and set(self.keywords) <= set(self.params)):
            raise ValueError(f"rewrite rule {self.name!r}: kind 'argument' needs 'keywords', each one of 'params'")

    def given(self) -> dict[str, object]:
        """The fields that differ from their defaults, in declaration order (for rendering)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) != _default(f)}

    def torch_names(self) -> Iterator[str]:
        """The torch entries this rule refers to (validated against the catalog)."""
        if self.kind in ("call", "argument"):
            yield self.match
        if self.kind in ("call", "backend"):
            yield self.to
        yield from self.arguments
        yield from self.type_arguments


def _default(f: Field) -> object:
    """The declared default of a dataclass field."""
    return f.default_factory() if callable(f.default_factory) else f.default
