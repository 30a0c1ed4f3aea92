"""MPS's limits (``catalog/overlays/limits.yaml``): the calls MPS's kernels refuse for device reasons.

One record per limit, keyed by its name::

    index_reduce_int64:
      overloads: [index_reduce.default, index_reduce.out]
      when: [{dtype: {arg: self, in: [int64]}}]
      raises: RuntimeError
      message: "index_reduce for MPS does not support torch.long dtype"
      source: ATen/native/mps/operations/Indexing.mm index_reduce_mps_out
      cuda_runs: true
      why: index_reduce of int64
      probe: {args: ["int64[4]<9", 0, "int64[2]<4", "int64[2]<9", amax]}

The condition (``when``) is a list of clauses that must all hold, each one key of this vocabulary
(:data:`torchdevice.records.limits.CLAUSES` says what each means)::

    {dtype: {arg: self, in: [int64, complex]}}          dtype names or groups (floating, complex, integral)
    {asks_wide: dtype}                                  the dtype= argument asks float64/complex128
    {any_dtype: [float64]}, {any_size_above: N}         generic refusals (overloads: [any])
    {pool_sizes: {input: self, output: output_size, case: shrink_not_divisible}}
    {dropout_without_grad: {p: dropout_p, inputs: [query, key, value]}}
    {ndim_above: {arg: size, n: 16}}, {numel_above: {arg: self, n: N}}, {count_above: {arg: indices, n: 16}}
    {empty: input}, {on_host: {arg: device, is: false}}
    {product_above: {sizes: [self.0, self.1, mat2.2], n: N}}, {size_above: {sizes: [...], n: N}}
    {sizes_differ: [hx.0.2, hx.1.2]}, {conv_output_above: 65536}
    {macos_below: "15.1"}
    {value: {arg: pivot, equals: false}}, {value: {arg: reduce, in: [amin, amax]}}, {value: {arg: p, above: 0}}
    {contiguous: {arg: self, is: false}}

:meth:`LimitRule.clauses` writes each in the normal form the runtime reads (``("dtype", "self", ("int64",))``);
a clause that is not of the vocabulary, or not well formed, is an error naming the record.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

from torchdevice.records.limits import CLAUSES, DTYPE_GROUPS

DTYPES = frozenset({"bool", "uint8", "int8", "int16", "int32", "int64", "uint16", "uint32", "uint64", "float16",
                    "bfloat16", "float32", "float64", "complex32", "complex64", "complex128"})
GENERIC_CLAUSES = ("any_dtype", "any_size_above")
CASES = ("shrink_not_divisible", "grow_not_divisible", "mixed", "not_divisible")
_REF = re.compile(r"[A-Za-z_]\w*(\.-?\d+)*")
_VERSION = re.compile(r"(\d+)\.(\d+)")
TENSOR_PROBE = re.compile(r"(\w+)\[([\d, ]*)\](?:<(\d+))?")
"""A probe's tensor: ``float32[2, 3]`` (random values), ``int64[4]<9`` (integers below 9)."""


@dataclass(frozen=True)
class Probe:
    """The call ``torchdevice probe`` makes on the device to see the limit."""

    op: str = ""
    """The overload called (``sum.dim_IntList``); default: the record's first."""
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    skip: str = ""
    """Why no probe is made (a tensor too large for a probe)."""

    def __post_init__(self) -> None:
        if self.skip and (self.args or self.kwargs or self.op):
            raise ValueError("probe: skip says why there is no probe; it takes no op, args or kwargs")
        for value in (*self.args, *self.kwargs.values()):
            for item in value if isinstance(value, list) else [value]:
                if isinstance(item, str) and "[" in item and not TENSOR_PROBE.fullmatch(item):
                    raise ValueError(f"probe: {item!r} is not a tensor (dtype[sizes], e.g. float32[2, 3])")
                match = TENSOR_PROBE.fullmatch(item) if isinstance(item, str) else None
                if match and match[1] not in DTYPES:
                    raise ValueError(f"probe: {item!r}: unknown dtype {match[1]!r}")


@dataclass(frozen=True)
class LimitRule:
    overloads: tuple[str, ...]
    """Aten overloads as ``torch.ops.aten`` names them (``softmax.int``); ``[any]``: every op."""
    source: str
    """Where the condition is: file and function of aten/src/ATen."""
    cuda_runs: bool
    why: str
    """The short reason reports give."""
    raises: Literal["RuntimeError", "NotImplementedError", "TypeError", "none"]
    """The exception type the Mac raises; ``none``: MPS runs the call and returns other values."""
    message: str | tuple[str, ...] = ""
    """The exact message, or its pieces as the C++ code concatenates them (``"{self.scalar_type}"`` inserted)."""
    when: tuple[dict[str, Any], ...] = ()
    reason: Literal["kernel", "dtype", ""] = ""
    """Generic refusals: ``kernel`` (no kernel) or ``dtype`` (a dtype the device has no tensors of)."""
    cpu: str = ""
    """The CPU's refusal of the call, where the CPU refuses it too."""
    instead: str = ""
    """The overload the CPU runs in place of an MPS-only one (same arguments)."""
    routed: bool = True
    """False: the fallback engine does not guard the overloads (``why`` says why)."""
    probe: Probe = field(default_factory=Probe)

    def __post_init__(self) -> None:
        generic = self.overloads == ("any",)
        if not self.overloads or ("any" in self.overloads and not generic):
            raise ValueError("overloads: aten overloads, or [any] alone for a refusal of every op")
        if self.reason and not generic:
            raise ValueError("reason (kernel or dtype) is for generic refusals (overloads: [any])")
        if (self.raises == "none") == bool(self.message):
            raise ValueError("message is what the Mac raises: required unless raises is none, and only then absent")
        if self.instead and self.cpu:
            raise ValueError("instead names what the CPU runs; cpu says the CPU refuses the call: not both")
        self.clauses()

    @property
    def generic(self) -> bool:
        return self.overloads == ("any",)

    @property
    def pieces(self) -> tuple[str, ...]:
        return (self.message,) if isinstance(self.message, str) else self.message

    def arguments(self) -> set[str]:
        """The argument names the clauses read (each must be a parameter of every overload)."""
        names: set[str] = set()
        for clause in self.clauses():
            kind, fields = clause[0], clause[1:]
            if kind in ("dtype", "asks_wide", "ndim_above", "numel_above", "count_above", "value", "contiguous",
                        "empty", "on_host"):
                names.add(fields[0])
            elif kind == "pool_sizes":
                names.update(fields[:2])
            elif kind == "dropout_without_grad":
                names.update((fields[0], *fields[1]))
            elif kind in ("product_above", "size_above", "sizes_differ"):
                names.update(ref[0] for ref in fields[0])
            elif kind == "conv_output_above":
                names.update(("input", "weight", "stride", "padding", "dilation"))
        for piece in self.pieces:
            if piece.startswith("{") and piece.endswith("}") and "." in piece and not piece.startswith("{any."):
                names.add(piece[1:-1].partition(".")[0])
        return names

    def clauses(self) -> tuple[tuple[Any, ...], ...]:
        """The condition in normal form; ValueError for a clause outside the vocabulary or not well formed."""
        return tuple(_clause(raw, self.generic) for raw in self.when)


def _clause(raw: dict[str, Any], generic: bool) -> tuple[Any, ...]:
    if len(raw) != 1:
        raise ValueError(f"when: each clause is one key of {', '.join(CLAUSES)}; got {raw!r}")
    ((kind, spec),) = raw.items()
    if kind not in CLAUSES:
        raise ValueError(f"when: unknown clause {kind!r}; the vocabulary is {', '.join(CLAUSES)}")
    if kind in GENERIC_CLAUSES and not generic:
        raise ValueError(f"when: {kind} is for generic refusals (overloads: [any])")
    if generic and kind not in (*GENERIC_CLAUSES, "macos_below"):
        raise ValueError(f"when: {kind} names arguments; a generic refusal (overloads: [any]) has none")
    try:
        return (kind, *_FORMS[kind](spec))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ValueError(f"when: {kind}: {exc or 'malformed'} (in {raw!r})") from None


def _keys(spec: Any, required: set[str], optional: set[str] = frozenset()) -> dict[str, Any]:  # type: ignore[assignment]
    if not isinstance(spec, dict) or not required <= set(spec) or set(spec) - required - optional:
        raise ValueError(f"expected the keys {sorted(required | optional)}")
    return spec


def _name(value: Any) -> str:
    if not isinstance(value, str) or not value.isidentifier():
        raise ValueError(f"{value!r} is not an argument name")
    return value


def _count(value: Any) -> int:
    if type(value) is not int or value < 0:
        raise ValueError(f"{value!r} is not a count")
    return value


def _dtypes(names: Any) -> tuple[str, ...]:
    if not isinstance(names, list) or not names:
        raise ValueError("expected a list of dtypes")
    out: list[str] = []
    for name in names:
        if name not in DTYPES and name not in DTYPE_GROUPS:
            raise ValueError(f"{name!r} is not a dtype or one of {', '.join(DTYPE_GROUPS)}")
        out += DTYPE_GROUPS.get(name, (name,))
    return tuple(dict.fromkeys(out))


def _ref(text: Any) -> tuple[Any, ...]:
    if not isinstance(text, str) or not _REF.fullmatch(text):
        raise ValueError(f"{text!r} is not a size reference (arg, arg.dim, arg.index.dim)")
    name, *indices = text.split(".")
    return (name, *map(int, indices))


def _refs(values: Any) -> tuple[tuple[Any, ...], ...]:
    if not isinstance(values, list) or not values:
        raise ValueError("expected a list of size references")
    return tuple(_ref(v) for v in values)


def _value(spec: Any) -> tuple[Any, ...]:
    spec = _keys(spec, {"arg"}, {"equals", "in", "above"})
    tests = [k for k in ("equals", "in", "above") if k in spec]
    if len(tests) != 1:
        raise ValueError("one of equals, in, above")
    test = tests[0]
    operand = spec[test]
    if test == "in":
        if not isinstance(operand, list):
            raise ValueError("in: expected a list")
        operand = tuple(operand)
    if test == "above" and type(operand) not in (int, float):
        raise ValueError("above: expected a number")
    return (_name(spec["arg"]), test, operand)


def _pool(spec: Any) -> tuple[Any, ...]:
    spec = _keys(spec, {"input", "output", "case"})
    if spec["case"] not in CASES:
        raise ValueError(f"case: one of {', '.join(CASES)}")
    return (_name(spec["input"]), _name(spec["output"]), spec["case"])


def _macos(text: Any) -> tuple[int, int]:
    match = _VERSION.fullmatch(str(text)) if isinstance(text, str) else None
    if match is None:
        raise ValueError(f"{text!r} is not a macOS version (\"15.1\")")
    return int(match[1]), int(match[2])


_FORMS: dict[str, Any] = {
    "dtype": lambda s: (_name(_keys(s, {"arg", "in"})["arg"]), _dtypes(s["in"])),
    "asks_wide": lambda s: (_name(s),),
    "any_dtype": lambda s: (_dtypes(s),),
    "any_size_above": lambda s: (_count(s),),
    "pool_sizes": _pool,
    "dropout_without_grad": lambda s: (_name(_keys(s, {"p", "inputs"})["p"]),
                                       tuple(_name(n) for n in s["inputs"])),
    "ndim_above": lambda s: (_name(_keys(s, {"arg", "n"})["arg"]), _count(s["n"])),
    "numel_above": lambda s: (_name(_keys(s, {"arg", "n"})["arg"]), _count(s["n"])),
    "empty": lambda s: (_name(s),),
    "on_host": lambda s: (_name(_keys(s, {"arg", "is"})["arg"]), bool(s["is"])),
    "count_above": lambda s: (_name(_keys(s, {"arg", "n"})["arg"]), _count(s["n"])),
    "product_above": lambda s: (_refs(_keys(s, {"sizes", "n"})["sizes"]), _count(s["n"])),
    "size_above": lambda s: (_refs(_keys(s, {"sizes", "n"})["sizes"]), _count(s["n"])),
    "sizes_differ": lambda s: (_refs(s),),
    "conv_output_above": lambda s: (_count(s),),
    "macos_below": lambda s: (_macos(s),),
    "value": _value,
    "contiguous": lambda s: (_name(_keys(s, {"arg", "is"})["arg"]), bool(s["is"])),
}
assert set(_FORMS) == set(CLAUSES), "every clause of the vocabulary has a form"
