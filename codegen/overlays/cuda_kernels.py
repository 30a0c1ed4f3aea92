"""CUDA's determinism alerts (``catalog/overlays/cuda_kernels.yaml``): where CUDA's kernels call
``at::globalContext().alertNotDeterministic(name)``, which raises (or warns) under
``torch.use_deterministic_algorithms(True)``.

One record per call site, keyed by a name::

    histc:
      overloads: [histc.default, histc.out]
      alert: "_histc_cuda with floating point input"
      source: ATen/native/cuda/SummaryOps.cu _histc_cuda
      when: [{dtype: {arg: self, in: [floating]}}]

``when`` is ``always`` or a list of clauses that must all hold, each one key of this vocabulary
(:data:`torchdevice.records.determinism.CLAUSES` says what each means)::

    {value: {arg: reduce, in: [prod]}}, {value: {arg: mode, equals: 2}}
    {given: weights}                                   an optional argument is not None
    {dtype: {arg: self, in: [floating, complex]}}      dtype names or groups (floating, complex, integral)
    {nonempty: index}                                  a tensor argument has elements

:meth:`AlertRule.clauses` writes each in the normal form the runtime reads (``("value", "reduce", ("prod",))``);
a clause outside the vocabulary, or not well formed, is an error naming the record.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from codegen.overlays.limits import DTYPES
from torchdevice.records.determinism import CLAUSES
from torchdevice.records.limits import DTYPE_GROUPS

ALWAYS = "always"


@dataclass(frozen=True)
class AlertRule:
    overloads: tuple[str, ...]
    """Aten overloads whose CUDA kernel makes the call, as ``torch.ops.aten`` names them (``histc.default``)."""
    alert: str
    """The exact string handed to ``alertNotDeterministic``."""
    source: str
    """Where the call is: file and function of aten/src/ATen."""
    when: Any
    """``always``, or the clauses that must all hold."""
    note: str = ""

    def __post_init__(self) -> None:
        if not self.overloads:
            raise ValueError("overloads: at least one aten overload")
        if not self.alert.strip() or self.alert != self.alert.strip():
            raise ValueError("alert: the name handed to alertNotDeterministic, without surrounding blanks")
        if len(self.source.split()) < 2:
            raise ValueError("source: a file of aten/src/ATen and the function making the call")
        self.clauses()

    def clauses(self) -> tuple[tuple[Any, ...], ...]:
        """The condition in normal form (none: always); ValueError for a clause outside the vocabulary."""
        if self.when == ALWAYS:
            return ()
        if not isinstance(self.when, list) or not self.when:
            raise ValueError(f"when: {ALWAYS}, or a list of clauses of {', '.join(CLAUSES)}")
        return tuple(_clause(raw) for raw in self.when)

    def arguments(self) -> set[str]:
        """The argument names the clauses read (each must be a parameter of every overload)."""
        return {clause[1] for clause in self.clauses()}


def _clause(raw: Any) -> tuple[Any, ...]:
    if not isinstance(raw, dict) or len(raw) != 1:
        raise ValueError(f"when: each clause is one key of {', '.join(CLAUSES)}; got {raw!r}")
    ((kind, spec),) = raw.items()
    if kind not in CLAUSES:
        raise ValueError(f"when: unknown clause {kind!r}; the vocabulary is {', '.join(CLAUSES)}")
    try:
        return (kind, *_FORMS[kind](spec))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ValueError(f"when: {kind}: {exc or 'malformed'} (in {raw!r})") from None


def _name(value: Any) -> str:
    if not isinstance(value, str) or not value.isidentifier():
        raise ValueError(f"{value!r} is not an argument name")
    return value


def _value(spec: Any) -> tuple[Any, ...]:
    if not isinstance(spec, dict) or "arg" not in spec or len(spec) != 2 or not {"equals", "in"} & set(spec):
        raise ValueError("expected {arg: NAME, equals: VALUE} or {arg: NAME, in: [VALUES]}")
    if "in" in spec:
        if not isinstance(spec["in"], list) or not spec["in"]:
            raise ValueError("in: expected a list of values")
        return (_name(spec["arg"]), tuple(spec["in"]))
    return (_name(spec["arg"]), (spec["equals"],))


def _dtype(spec: Any) -> tuple[Any, ...]:
    if not isinstance(spec, dict) or set(spec) != {"arg", "in"}:
        raise ValueError("expected {arg: NAME, in: [DTYPES]}")
    names = spec["in"]
    if not isinstance(names, list) or not names:
        raise ValueError("in: expected a list of dtypes")
    out: list[str] = []
    for name in names:
        if name not in DTYPES and name not in DTYPE_GROUPS:
            raise ValueError(f"{name!r} is not a dtype or one of {', '.join(DTYPE_GROUPS)}")
        out += DTYPE_GROUPS.get(name, (name,))
    return (_name(spec["arg"]), tuple(dict.fromkeys(out)))


_FORMS: dict[str, Any] = {
    "value": _value,
    "given": lambda s: (_name(s),),
    "dtype": _dtype,
    "nonempty": lambda s: (_name(s),),
}
assert set(_FORMS) == set(CLAUSES), "every clause of the vocabulary has a form"
