"""Per-backend kernel availability of aten overloads, from torchgen's own reading of ``native_functions.yaml``.

``torchgen.gen.parse_native_yaml`` gives every overload (``autogen`` ones included) and a backend
index per dispatch key. Per overload and backend (``cpu``/``cuda``/``mps``):

* ``native``: the backend has a kernel, its own or its structured delegate's (``add.Tensor`` runs
  ``add.out``'s);
* ``composite``: a CompositeExplicitAutograd kernel serves every backend (``abs`` calls ``abs.out``);
* ``implicit``: CompositeImplicitAutograd, decomposed into other ops above the backends (``matmul``);
* ``missing``: none of these; ``none``: not in the file (TorchScript builtins such as ``add.str``).

A Python-level entry reaching several ops aggregates over their overloads, ``out=`` variants
excluded: ``missing`` if any is missing for the backend, else the first of ``native``,
``composite``, ``implicit`` present; ``none`` when no overload of its ops is in the file.

:func:`sparse_records` lists the overloads a backend has a sparse kernel of (``SparseMPS``: MPS's sparse COO
kernels, ``sparse_mps.yaml``; ``SparseCsrCUDA``: CUDA's sparse compressed ones, ``sparse_csr_cuda.yaml``): facts
about aten overloads, not entries. :func:`device_check_records` lists the overloads whose CUDA kernel wrapper checks
that its tensors are on one device, as torchgen writes ``RegisterCUDA.cpp`` (``cuda_device_checks.yaml``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import torchgen
from torchgen.dest.register_dispatch_key import RegisterDispatchKey
from torchgen.gen import ParsedYaml, get_grouped_native_functions, parse_native_yaml
from torchgen.model import BackendIndex, DispatchKey, NativeFunction
from torchgen.selective_build.selector import SelectiveBuilder
from torchgen.utils import Target

from torchdevice.records import BACKENDS

DISPATCH_KEYS = {b: DispatchKey[b.upper()] for b in BACKENDS}
NONE = dict.fromkeys(BACKENDS, "none")
PRECEDENCE = ("missing", "native", "composite", "implicit")
PACKAGED = Path(torchgen.__file__).parent / "packaged" / "ATen" / "native"


@dataclass(frozen=True)
class Overload:
    """One aten overload as ``native_functions.yaml`` describes it."""

    op: str
    overload: str  # "default" for the unnamed overload, as torch.ops names it
    kernels: dict[str, str]
    tags: frozenset[str]
    is_out: bool


@cache
def overloads() -> dict[tuple[str, str], Overload]:
    """Every overload of ``native_functions.yaml`` by ``(op, overload)``."""
    parsed = _parsed()
    by_name = {f.func.name: f for f in parsed.native_functions}
    out: dict[tuple[str, str], Overload] = {}
    for f in parsed.native_functions:
        op, overload = str(f.func.name.name), f.func.name.overload_name or "default"
        kernels = {b: _status(f, parsed.backend_indices[key], by_name) for b, key in DISPATCH_KEYS.items()}
        out[(op, overload)] = Overload(op, overload, kernels, frozenset(f.tags), f.func.is_out_fn())
    return out


@cache
def _parsed() -> ParsedYaml:
    return parse_native_yaml(str(PACKAGED / "native_functions.yaml"), str(PACKAGED / "tags.yaml"))


def _status(f: NativeFunction, index: BackendIndex, by_name: dict) -> str:
    delegate = by_name.get(f.structured_delegate) if f.structured_delegate else None
    if index.has_kernel(f) or (delegate is not None and index.has_kernel(delegate)):
        return "native"
    if f.has_composite_explicit_autograd_kernel or f.has_composite_explicit_autograd_non_functional_kernel:
        return "composite"
    if f.has_composite_implicit_autograd_kernel or f.has_composite_implicit_autograd_nested_tensor_kernel:
        return "implicit"
    return "missing"


def sparse_records(key: DispatchKey) -> list[dict[str, str]]:
    """One record per overload with a kernel for ``key``, as ``torch.ops.aten`` names it, sorted by name."""
    parsed = _parsed()
    index = parsed.backend_indices[key]
    found = {f"{f.func.name.name}.{f.func.name.overload_name or 'default'}" for f in parsed.native_functions
             if index.has_kernel(f)}
    return [{"name": name} for name in sorted(found)]


_CHECK = re.compile(r'check_and_update_common_device\(common_device, \w+, "(\w+)", "(\w+)"\)')
_REGISTERED = re.compile(r'm\.impl\("([\w.]+)",\s*TORCH_FN\((\w+)\)\)')


def device_check_records() -> list[dict[str, object]]:
    """One record per overload whose CUDA kernel wrapper checks its tensors' devices before the kernel runs (``Expected
    all tensors to be on the same device, but got mat2 is on cpu, ... (when checking argument in method
    wrapper_CUDA_mm)``): the overload as ``torch.ops.aten`` names it, the wrapper's name and the arguments it checks,
    in its order. Read from the code torchgen generates for ``RegisterCUDA.cpp`` (``c10::impl::
    check_and_update_common_device`` calls), not from a reimplementation of its rules."""
    parsed = _parsed()
    index = parsed.backend_indices[DispatchKey.CUDA]

    def generator(target: Target) -> RegisterDispatchKey:
        return RegisterDispatchKey(index, target, SelectiveBuilder.get_nop_selector(), rocm=False, symint=True,
                                   class_method_name=None, skip_dispatcher_op_registration=False)

    definitions, registrations = generator(Target.ANONYMOUS_DEFINITION), generator(Target.REGISTRATION)
    checks: dict[str, list[str]] = {}
    wrappers: dict[str, str] = {}
    for group in get_grouped_native_functions(parsed.native_functions):
        for method, argument in _CHECK.findall("\n".join(definitions(group))):
            checks.setdefault(method, []).append(argument)
        wrappers.update(_REGISTERED.findall("\n".join(registrations(group))))
    found = {(op if "." in op else f"{op}.default"): wrapper for op, wrapper in wrappers.items() if wrapper in checks}
    return [{"name": name, "wrapper": found[name], "arguments": checks[found[name]]} for name in sorted(found)]


@cache
def by_op() -> dict[str, tuple[Overload, ...]]:
    """Overloads grouped by op name, in overload-name order."""
    grouped: dict[str, list[Overload]] = {}
    for key in sorted(overloads()):
        grouped.setdefault(key[0], []).append(overloads()[key])
    return {op: tuple(v) for op, v in grouped.items()}


def functional(ops: list[str]) -> list[Overload]:
    """The non-``out=`` overloads of ``ops`` known to native_functions.yaml."""
    return [o for op in ops for o in by_op().get(op, ()) if not o.is_out]


def aggregate(ops: list[str]) -> dict[str, str]:
    """Kernel status of an entry reaching ``ops`` (see the module docstring)."""
    found = functional(ops)
    if not found:
        return dict(NONE)
    return {b: next(s for s in PRECEDENCE if any(o.kernels[b] == s for o in found)) for b in BACKENDS}
