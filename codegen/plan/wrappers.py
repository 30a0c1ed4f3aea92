"""The generated device wrappers (``device_wrappers.py.j2`` and its stub): one per entry of policy ``wrap``.

A wrapper's **device_arg** says where its fast path reads the device argument, from the entry's overloads:
``keyword`` (never positional: read ``kwargs``), ``first`` (the first parameter after ``self``: a
named parameter of the wrapper) or ``at`` (positional at a later index: read ``args`` or
``kwargs``). Measured here, reading ``**kwargs`` beats repeating a long keyword signature: the C
argument parser pays for every keyword passed, including defaults. Its **table** says which map
translates the value: ``devices``, ``strict`` (device strings and objects only: a bare int there is
a size in some overload) or ``types`` (device type strings, autocast's ``device_type``).
"""

from __future__ import annotations

import ast
import dataclasses
from dataclasses import dataclass
from typing import Literal

from codegen.model import Entry
from codegen.plan.policies import PlanError
from codegen.signatures import INT_LIKE, P, Signature, render

TENSOR_RETURNS = frozenset({"Tensor", "torch.Tensor"})
DeviceArg = Literal["keyword", "first", "at"]
Table = Literal["devices", "strict", "types"]
Result = Literal["new", "shares", "module", "other"]



@dataclass(frozen=True)
class Wrapper:
    """The generated wrapper of one entry."""

    entry: Entry
    param: str
    """The translated parameter."""
    table: Table
    device_arg: DeviceArg
    position: int | None
    """Index of ``param`` among positional arguments, ``self`` included (``None``: keyword only)."""
    pin_memory: bool
    """Whether ``pin_memory=True`` is accepted (and dropped: no emulated target pins memory)."""
    result: Result
    """What a call asked for CUDA returns: ``new`` memory (marked as on the emulated device), memory that
    may be the argument's (``shares``: copied unless already there), a ``module`` loaded there (its parameters
    and buffers marked), or ``other`` (not a tensor)."""
    inherits: bool
    """Whether, asked for no device, its result takes the device of its first argument, a tensor
    (``x.new_zeros``, ``torch.zeros_like``): a device tensor's result is then marked as on that device."""
    generator: bool
    """Whether it draws random numbers and takes ``generator=``: asked for CUDA, it draws from the
    emulated CUDA generator, as on a GPU, not from the host's."""

    @property
    def name(self) -> str:
        return self.entry.name

    @property
    def factory(self) -> str:
        """Name of the generated factory: ``torch.Tensor.to`` -> ``torch_Tensor_to``."""
        return self.entry.name.replace(".", "_")

    @property
    def method(self) -> bool:
        return self.entry.kind == "method"

    @property
    def owner(self) -> tuple[str, tuple[str, ...], str]:
        """``(module, attribute path to the owner, attribute)``."""
        return self.entry.module, self.entry.path[:-1], self.entry.attr

    @property
    def stubs(self) -> tuple[str, ...]:
        """Each overload as the parameters and return of a protocol's ``__call__`` after its own ``self``
        (a wrapped method's ``self`` is named ``self_``), ``Optional[X]`` written ``X | None``."""
        return tuple(_stub(signature, self.method) for signature in self.entry.signatures)


def _stub(signature: Signature, method: bool) -> str:
    params = tuple(
        dataclasses.replace(p, name="self_" if method and i == 0 else p.name,
                            annotation=p.annotation and _modern(p.annotation))
        for i, p in enumerate(signature.params)
    )
    text = render(Signature(params, _modern(signature.returns) if signature.returns else "Any"))
    return "(self, " + text[1:] if params else "(self" + text[1:]


class _Optional(ast.NodeTransformer):
    def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.value, ast.Name) and node.value.id == "Optional":
            return ast.BinOp(node.slice, ast.BitOr(), ast.Constant(None))
        return node


def _modern(annotation: str) -> str:
    """``Optional[X]`` written ``X | None``, as the project's linter wants in stubs."""
    return ast.unparse(_Optional().visit(ast.parse(annotation, mode="eval")))


def wrapper_of(entry: Entry, shares: bool = False, module: bool = False) -> Wrapper:
    """Decide how ``entry``'s wrapper reads and translates its device argument; ``shares``: its result may
    share its argument's memory; ``module``: it is a module loaded onto the device (``devices.yaml``)."""
    if len(entry.device_params) != 1:
        raise PlanError(entry.name, f"a wrapper translates one parameter, not {entry.device_params}")
    if not entry.signatures:
        raise PlanError(entry.name, "no signature to read the device argument from")
    param = entry.device_params[0]
    positions = {i for s in entry.signatures if (i := s.index(param)) is not None}
    if len(positions) > 1:
        raise PlanError(entry.name, f"{param!r} at different positions {sorted(positions)} across overloads")
    position = positions.pop() if positions else None
    first = 1 if entry.kind == "method" else 0
    device_arg: DeviceArg = "keyword" if position is None else "first" if position == first else "at"
    if param == "device_type":
        table: Table = "types"
    elif position is not None and _ints_elsewhere(entry.signatures, param, position):
        table = "strict"
    else:
        table = "devices"
    pin = any(p.name == "pin_memory" and p.kind == P.KEYWORD_ONLY for s in entry.signatures for p in s.params)
    returns = TENSOR_RETURNS | ({"Self"} if entry.namespace == "torch.Tensor" else set())  # a Tensor method's Self
    tensor = table != "types" and all(s.returns in returns for s in entry.signatures)
    result: Result = "module" if module else ("shares" if shares else "new") if tensor else "other"
    if shares and not tensor:
        raise PlanError(entry.name, "shares: the result is not a tensor")
    generator = tensor and any(p.name == "generator" and p.kind == P.KEYWORD_ONLY
                               for s in entry.signatures for p in s.params)
    inherits = result == "new" and all(
        s.params and (entry.kind == "method" or s.params[0].annotation in TENSOR_RETURNS) for s in entry.signatures)
    return Wrapper(entry, param, table, device_arg, position, pin, result, inherits, generator)


def _ints_elsewhere(signatures: tuple[Signature, ...], name: str, position: int) -> bool:
    """Whether some overload takes an integer (a size) where ``name`` sits in another."""
    for signature in signatures:
        positional = [p for p in signature.params if p.positional]
        if any(p.kind == P.VAR_POSITIONAL for p in signature.params) and len(positional) <= position:
            return True
        if position < len(positional) and positional[position].name != name:
            if INT_LIKE.search(positional[position].annotation or ""):
                return True
    return False
