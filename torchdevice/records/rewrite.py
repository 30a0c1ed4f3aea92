"""The rewrite rule record: one entry of ``catalog/overlays/rewrite.yaml``, one row of
``torchdevice_generated.rewrite_rules.RULES``.

``codegen`` loads and validates the YAML into these records and renders them into the generated table,
which builds them at run time for ``torchdevice.rewrite``.

Every rule has a ``code`` (``TD101``), like a linter's: ``--select``/``--ignore``, the
``# torchdevice: ignore[CODE]`` comment and ``[tool.torchdevice]`` turn it on or off, and every
report names it. A rule rewrites what it can and reports, under its own code, what it leaves.

``call``
    A call to the torch callable ``match`` becomes a call to ``to``; arguments can move between
    positions and keywords, the accelerator's device type can be inserted, and calls that raise
    where no accelerator exists are guarded and give ``without_accelerator`` there instead.
``context``
    ``with match(x):`` becomes ``with x:`` where ``x`` is made by a rule of the same ``group``
    (``torch.cuda.stream(s)`` with ``s = torch.cuda.Stream()``: a ``torch.Stream`` is its own context).
``method``
    A method call ``x.<match>(...)`` (``x.cuda()``) becomes ``x.<to>(<device>)``.
``device`` / ``backend``
    The string ``match`` (``"cuda"``, ``"nccl"``) where a device (backend) is expected becomes the
    accelerator's device (its default distributed backend). ``keywords``, ``names``, ``methods``,
    ``arguments``, ``options`` and ``lookups`` say where a value is "expected".
``index``
    An integer device index where a device is expected (``model.to(local_rank)``: CUDA device N)
    becomes the accelerator's device N; ``names`` says which names hold indices.
``argument``
    Arguments of the torch callable ``match`` that name CUDA devices (DDP's ``device_ids``) and are
    rejected elsewhere: ``value`` becomes ``value if <accelerator>.type == "cuda" else None``.
``launcher``
    The process-count argument ``keywords[0]`` of the launcher ``match`` (``mp.spawn(nprocs=)``): a
    count of accelerators becomes at least 1, so a machine without one still runs one process.
``report``
    A CUDA-specific name (or, with ``prefix``, anything under it) that is left in place: every use is
    reported with ``doc``; with ``keywords``, only calls passing one of them.
``check``
    A CUDA-specific construct found by the rewriter's own analysis (``match`` names which, from
    ``CHECKS``), left in place and reported with ``doc``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import Field, dataclass, field, fields
from typing import Literal

Kind = Literal["call", "context", "method", "device", "backend", "index", "argument", "launcher", "report", "check"]

CHECKS: dict[str, str] = {
    "comparison": 'a test against "cuda" or "nccl" (device == "cuda", device.type in ("cuda", "xpu"))',
    "requirement": "a requirement of CUDA (assert torch.cuda.is_available(), if not ...: raise)",
    "cuda-only-branch": "a CUDA check kept because the code it guards uses CUDA-only APIs",
    "version-gate": "a conditional choosing between a device-agnostic API and its CUDA form (old torch)",
    "command-line": 'a command line passed by the program that selects CUDA (["--device", "cuda"])',
    "dynamic": "CUDA reached through strings or star imports (getattr(torch, 'cuda'), from torch.cuda import *)",
    "no-torch": "a site where torch is not imported early enough for the accelerator expression",
}
"""The analyses a ``check`` rule can name, with what each finds."""

FAMILIES: dict[str, str] = {
    "TD1": "device values",
    "TD2": "torch.cuda runtime",
    "TD3": "mixed precision",
    "TD4": "distributed",
    "TD5": "streams, events and errors",
    "TD8": "CUDA-specific names left in place",
    "TD9": "constructs left in place",
}
"""The code families, by prefix (``--select TD1``): what the rules of each are about."""

_FIELDS: dict[str, set[str]] = {
    "call": {"to", "params", "args", "device_type", "without_accelerator", "result_methods", "group",
             "accelerated_only", "current"},
    "context": {"group", "made_by"},
    "method": {"to", "params"},
    "device": {"cpu", "keywords", "type_keywords", "names", "methods", "arguments", "type_arguments", "options",
               "lookups", "unindexed"},
    "backend": {"to", "cpu", "keywords", "names", "arguments", "options", "lookups"},
    "index": {"names", "methods", "keywords"},
    "argument": {"params", "keywords"},
    "launcher": {"params", "keywords"},
    "report": {"keywords", "prefix"},
    "check": set(),
}
_COMMON = {"name", "code", "kind", "doc", "match"}
_CODE = re.compile(r"TD\d{3}")
_QUALIFIED = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)+")


@dataclass(frozen=True)
class RewriteRule:
    """One CUDA-specific construct: its device-agnostic replacement, or why it is left and reported."""

    name: str
    """Unique; the golden fixtures of the rule are ``tests/rewrite/fixtures/<module>/<name>*.in.py``, ``<module>``
    the module of ``torchdevice/rewrite/rules/`` applying it."""
    code: str
    """Unique ``TD`` and three digits: how users select, ignore and recognise the rule."""
    kind: Kind
    doc: str
    """One line: what the rule rewrites and why; for ``report`` and ``check``, why it is left in place."""
    match: str
    """call/context/argument/launcher/report: qualified name; method: method name; device/backend: the
    string value; index: a label; check: one of ``CHECKS``."""
    to: str = ""
    """call: qualified replacement; method: replacement method; backend: torch callable mapping a device to
    its default backend."""
    params: tuple[str, ...] = ()
    """call/method/argument/launcher: parameter names of the matched callable, in order (to move arguments,
    or to find those given by position)."""
    args: Literal["same", "positional", "keywords"] = "same"
    """call: how arguments are passed to ``to``: unchanged, all positionally, or all by keyword."""
    device_type: Literal["none", "first", "keyword"] = "none"
    """call: pass the accelerator's device type as first argument, as ``device_type=``, or not at all."""
    without_accelerator: str | None = None
    """call: Python expression the call gives where no accelerator exists (the call is then guarded);
    ``"None"``: nothing, and a call that is a statement of its own is guarded with ``if``."""
    result_methods: dict[str, str] = field(default_factory=dict)
    """call: methods of the created object that raise where no accelerator exists -> value there."""
    group: str = ""
    """call/context: the rules of a group are rewritten together in a file, or none of them."""
    current: bool = False
    """call: it gives the index of the current device; where a device is expected, the accelerator itself
    (which stands for its current device) is written instead."""
    made_by: tuple[str, ...] = ()
    """context: the callables that make what it takes (``torch.cuda.Stream``)."""
    accelerated_only: bool = False
    """call: the replacement raises without an accelerator and cannot be guarded (a context manager): the
    call is rewritten only in code that runs with an accelerator, and reported elsewhere."""
    cpu: str = ""
    """device/backend: the value meaning "no accelerator" (``"cpu"``), as in ``"cuda" if ... else "cpu"``."""
    keywords: tuple[str, ...] = ()
    """device/backend/index: keyword arguments that take the value; argument: the parameters that only apply
    on CUDA; launcher: the process-count parameter; report: report only calls passing one of these."""
    type_keywords: tuple[str, ...] = ()
    """device: keyword arguments that take a device type string."""
    names: str = ""
    """device/backend/index: regular expression for names that hold the value (variables, attributes,
    parameters, dictionary keys, command-line options)."""
    methods: tuple[str, ...] = ()
    """device/index: methods whose first positional argument takes a device."""
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
    unindexed: str = ""
    """device: regular expression for the keywords, names and callables where ``"cuda:N"`` becomes the
    accelerator without an index: ``torch.load`` cannot restore onto ``"cpu:N"``, and ``map_location="cuda"``
    already means the current device (which the torchrun recipe sets to N)."""
    prefix: bool = False
    """report: also report every name under ``match`` (``torch.backends.cudnn.*``)."""

    def __post_init__(self) -> None:
        if not _CODE.fullmatch(self.code):
            raise ValueError(f"code {self.code!r} is not TD and three digits")
        allowed = _FIELDS[self.kind] | _COMMON
        for f in fields(self):
            if f.name not in allowed and getattr(self, f.name) != _default(f):
                raise ValueError(f"field {f.name!r} does not apply to kind {self.kind!r}")
        if self.kind in ("call", "method", "backend") and not self.to:
            raise ValueError(f"kind {self.kind!r} needs 'to'")
        if self.args != "same" and not self.params:
            raise ValueError(f"args {self.args!r} needs 'params'")
        if self.kind in ("argument", "launcher") and not (self.keywords and set(self.keywords) <= set(self.params)):
            raise ValueError(f"kind {self.kind!r} needs 'keywords', each one of 'params'")
        if self.kind == "context" and not (self.group and self.made_by):
            raise ValueError("kind 'context' needs 'group' and 'made_by' (what makes its argument)")
        if self.kind == "check" and self.match not in CHECKS:
            raise ValueError(f"check {self.match!r} is not one of {', '.join(CHECKS)}")
        if self.kind in ("call", "context", "argument", "launcher", "report") and not _QUALIFIED.fullmatch(self.match):
            raise ValueError(f"match {self.match!r} is not a qualified name")
        if self.kind in ("device", "backend", "index") and not self.names:
            raise ValueError(f"kind {self.kind!r} needs 'names'")
        for name in ("names", "unindexed"):
            pattern = getattr(self, name)
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"{name} {pattern!r} is not a regular expression: {exc}") from None
        for expression in (self.without_accelerator, *self.result_methods.values()):
            if expression is not None:
                try:
                    compile(expression, "<rule>", "eval")
                except SyntaxError as exc:
                    raise ValueError(f"{expression!r} is not a Python expression: {exc.msg}") from None

    def given(self) -> dict[str, object]:
        """The fields that differ from their defaults, in declaration order (for rendering)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) != _default(f)}

    def torch_names(self) -> Iterator[str]:
        """The torch entries this rule refers to (validated against the catalog)."""
        if self.kind in ("call", "context", "argument") or (
            self.kind == "report" and not self.prefix and self.match.startswith("torch.")
        ):
            yield self.match
        if self.kind in ("call", "backend"):
            yield self.to
        yield from self.made_by
        yield from self.arguments
        yield from self.type_arguments


def _default(f: Field) -> object:
    """The declared default of a dataclass field."""
    return f.default_factory() if callable(f.default_factory) else f.default
