"""What the runtime does with each entry: the decisions ``device_wrappers.py.j2``, ``cuda_table.py.j2``
and the runtime's generated tests render.

Every entry with a device parameter takes one **route**:

- ``wrap``: a generated wrapper translates the device argument, then calls the original. C functions
  and ``torch.Tensor`` methods take it (nothing else sees their device before the C code does), and
  the few Python functions in :data:`PYTHON_WRAPPED` whose device reaches C code or a device check.
- ``hand``: a CUDA-specific entry point written by hand in the runtime (:data:`HAND_WRITTEN`).
- ``flows``: a Python entry whose device argument only reaches wrapped or hand-written entries
  (``nn.Linear(device="cuda")`` calls ``torch.empty(..., device="cuda")``): left untouched, zero cost.
- ``untouched``: not a CUDA entry point (other accelerators' namespaces, aten overloads, the
  ``torch.cuda`` namespace itself, which the emulation table replaces, distributed, owned by its
  feature module).

A Python entry with a device parameter that no rule classifies is an error: a new torch version
must be looked at, not guessed.

A wrapper's **form** says how its fast path reads the device argument, from the entry's overloads:
``keyword`` (never positional: read ``kwargs``), ``first`` (the first parameter after ``self``: a
named parameter of the wrapper) or ``at`` (positional at a later index: read ``args`` or
``kwargs``). Measured here, reading ``**kwargs`` beats repeating a long keyword signature: the C
argument parser pays for every keyword passed, including defaults.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from functools import cached_property
from typing import Literal

from codegen.model import Catalog, Entry, Param
from codegen.overlays.cuda import CudaRule

Route = Literal["wrap", "hand", "flows", "untouched"]
Form = Literal["keyword", "first", "at"]
Table = Literal["devices", "strict", "types"]

HAND_WRITTEN: dict[str, str] = {
    "torch.Tensor.cuda": "tensors: moves to the target",
    "torch.Tensor.pin_memory": "tensors: the tensor itself on a target without pinned memory",
    "torch.set_default_device": "tensors: DeviceContext translates (also `with torch.device(...)`)",
    "torch.load": "data: default_restore_location translates every map_location form",
    "torch.utils.data.DataLoader": "data: pin_memory dropped on a target without pinned memory",
    "torch.autocast": "amp: autocast.__init__ translates device_type",
    "torch.amp.autocast": "amp: autocast.__init__ translates device_type",
    "torch.GradScaler": "amp: GradScaler.__init__ translates device",
    "torch.amp.GradScaler": "amp: GradScaler.__init__ translates device",
    "torch.Generator": "shims: stand-in class building real generators on the target",
    "torch.Stream": "shims: stand-in class building real streams on the target",
    "torch.Event": "shims: stand-in class; a timing event on CPU",
}
"""Entries the runtime handles by hand (module of ``torchdevice``: what it does)."""

PYTHON_WRAPPED = frozenset({
    "torch.from_dlpack",  # the device goes to the producer's __dlpack__
    "torch.jit.load",  # validates map_location against CUDA before the C loader sees it
    "torch.nested.nested_tensor",  # the device goes to a private C constructor
    "torch.nested.as_nested_tensor",
    "torch.amp.custom_fwd",  # the decorated function casts inputs whose device type is its device_type
    "torch.amp.custom_bwd",
    "torch.nn.Module.to",  # its argument parser resolves a bare index (``model.to(rank)``) to a device itself
})
"""Python functions that get a generated wrapper: their device argument reaches C code or a check."""

FLOWS: tuple[tuple[str, str], ...] = (
    (r"^torch\.nn\.", "module constructors and methods pass the device to factories, Tensor.to and Tensor.cuda"),
    (r"^torch\.amp\.is_autocast_available$", "answers for its device type, translated or not"),
    (r"^torch\.autograd\.graph\.save_on_cpu$", "its device module is the emulated torch.cuda"),
    (r"^torch\.random\.fork_rng$", "forks the CPU generator, which CUDA tensors use on a CPU target"),
    (r"^torch\.optim\.swa_utils\.", "moves with Module.to and Tensor.to"),
    (r"^torch\.signal\.windows\.", "calls the factories"),
    (r"^torch\.get_device_module$", "returns torch.cuda, which is emulated"),
)
"""Python entries whose device argument reaches translated entries: (pattern, why)."""

UNTOUCHED: tuple[tuple[str, str], ...] = (
    (r"^torch\.cuda\.", "the torch.cuda namespace is replaced by the emulation table"),
    (r"^torch\.ops\.", "aten overloads: torch's internal vocabulary, called with translated devices"),
    (r"^torch\.(mps|accelerator|xpu|mtia|cpu)\.", "another backend's own namespace"),
    (r"^torch\.distributed\.|^torch\.nn\.parallel\.DistributedDataParallel$", "the distributed feature's"),
    (r"^torch\.(Tensor|nn\.Module)\.(xpu|ipu|mtia|is_pinned)$", "not a CUDA entry point"),
    (r"^torch\.nn\.(parallel\.\w+|DataParallel)$",
     "multi-GPU parallelism: torch's own code sees no CUDA, so DataParallel runs the module on one device"),
    (r"^torch\.import_ir_module", "TorchScript loader internals: torch.jit.load is translated"),
    (r"^torch\.(Event\.from_ipc_handle|jit\.Future)$", "inter-process handles: not translated"),
    (r"^torch\.autograd\.profiler\.", "profiler records: not translated"),
    (r"^torch\.device$", "the device type itself; never replaced"),
)
"""Device-bearing entries the runtime leaves alone: (pattern, why)."""

_POSITIONAL = ("positional_only", "positional_or_keyword")
_INT_LIKE = re.compile(r"\b(_?int|SymInt|Number|_size)\b")


class ModelError(ValueError):
    """An entry the model cannot decide on; the message names it."""

    def __init__(self, entry: str, message: str):
        super().__init__(f"entry {entry}: {message}")


def route_of(entry: Entry) -> tuple[Route, str]:
    """The route of a device-bearing entry and why."""
    if entry.name in HAND_WRITTEN:
        return "hand", HAND_WRITTEN[entry.name]
    for pattern, why in UNTOUCHED:
        if re.search(pattern, entry.name):
            return "untouched", why
    if entry.kind == "builtin" or (entry.kind == "method" and entry.namespace == "torch.Tensor"):
        return "wrap", "C code: the wrapper is the only place to translate"
    if entry.name in PYTHON_WRAPPED:
        return "wrap", "Python code whose device reaches C code or a device check"
    for pattern, why in FLOWS:
        if re.search(pattern, entry.name):
            return "flows", why
    raise ModelError(entry.name, f"device parameters {', '.join(entry.device_params)} but no route: "
                                 "classify it in codegen/runtime_model.py")


@dataclass(frozen=True)
class Wrapper:
    """The generated wrapper of one entry."""

    entry: Entry
    param: str
    """The translated parameter."""
    table: Table
    """The map translating it: ``devices``, ``strict`` (device strings and objects only; bare ints
    there are sizes in some overload) or ``types`` (device type strings)."""
    form: Form
    position: int | None
    """Index of ``param`` among positional arguments, ``self`` included (``None``: keyword only)."""
    pin_memory: bool
    """Whether ``pin_memory=True`` is accepted (and dropped: no emulated target pins memory)."""

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
    def stub_overloads(self) -> tuple[tuple[tuple[str, ...], str], ...]:
        """Each overload as (parameters of a protocol's ``__call__`` after its ``self``, return
        annotation); a wrapped method's own ``self`` is named ``self_``."""
        return tuple((_stub_params(params, self.method), _returns(signature))
                     for signature, params in zip(self.entry.signatures, self.entry.overloads, strict=True))


def _stub_params(params: tuple[Param, ...], method: bool) -> tuple[str, ...]:
    out: list[str] = []
    for i, p in enumerate(params):
        if p.kind == "keyword_only" and not any(q.kind in ("var_positional", "keyword_only") for q in params[:i]):
            out.append("*")
        name = "self_" if method and i == 0 else p.name
        text = {"var_positional": f"*{name}", "var_keyword": f"**{name}"}.get(p.kind, name)
        text += f": {_modern(p.annotation)}" if p.annotation else ""
        text += (" = " if p.annotation else "=") + p.default if p.default is not None else ""
        out.append(text)
        if p.kind == "positional_only" and (i + 1 == len(params) or params[i + 1].kind != "positional_only"):
            out.append("/")
    return tuple(out)


def _returns(signature: str) -> str:
    fn = ast.parse(f"def f{signature}: ...").body[0]
    assert isinstance(fn, ast.FunctionDef)
    return _modern(ast.unparse(fn.returns)) if fn.returns is not None else "Any"


class _Optional(ast.NodeTransformer):
    def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.value, ast.Name) and node.value.id == "Optional":
            return ast.BinOp(node.slice, ast.BitOr(), ast.Constant(None))
        return node


def _modern(annotation: str) -> str:
    """``Optional[X]`` written ``X | None``, as the project's linter wants in stubs."""
    return ast.unparse(_Optional().visit(ast.parse(annotation, mode="eval")))


def wrapper_of(entry: Entry) -> Wrapper:
    """Decide how ``entry``'s wrapper reads and translates its device argument."""
    if len(entry.device_params) != 1:
        raise ModelError(entry.name, f"a wrapper translates one parameter, not {entry.device_params}")
    if not entry.overloads:
        raise ModelError(entry.name, "no signature to read the device argument from")
    param = entry.device_params[0]
    positions = {i for params in entry.overloads if (i := _position(params, param)) is not None}
    if len(positions) > 1:
        raise ModelError(entry.name, f"{param!r} at different positions {sorted(positions)} across overloads")
    position = positions.pop() if positions else None
    first = 1 if entry.kind == "method" else 0
    if position is None:
        form: Form = "keyword"
    else:
        form = "first" if position == first else "at"
    if param == "device_type":
        table: Table = "types"
    elif position is not None and _ints_elsewhere(entry.overloads, param, position):
        table = "strict"
    else:
        table = "devices"
    pin = any(p.name == "pin_memory" and p.kind == "keyword_only" for ps in entry.overloads for p in ps)
    return Wrapper(entry, param, table, form, position, pin)


def _position(params: tuple[Param, ...], name: str) -> int | None:
    positional = [p.name for p in params if p.kind in _POSITIONAL]
    return positional.index(name) if name in positional else None


def _ints_elsewhere(overloads: tuple[tuple[Param, ...], ...], name: str, position: int) -> bool:
    """Whether some overload takes an integer (a size) where ``name`` sits in another."""
    for params in overloads:
        positional = [p for p in params if p.kind in _POSITIONAL]
        if any(p.kind == "var_positional" for p in params) and len(positional) <= position:
            return True
        if position < len(positional) and positional[position].name != name:
            if _INT_LIKE.search(positional[position].annotation or ""):
                return True
    return False


@dataclass(frozen=True)
class Emulation:
    """One row of the ``torch.cuda`` emulation table."""

    entry: Entry
    rule: CudaRule

    @property
    def name(self) -> str:
        return self.entry.name

    @property
    def policy(self) -> str:
        return self.entry.policy

    @property
    def is_class(self) -> bool:
        return self.entry.kind == "class"

    @property
    def owner(self) -> tuple[str, tuple[str, ...], str]:
        return self.entry.module, self.entry.path[:-1], self.entry.attr


@dataclass(frozen=True)
class Member:
    """A method or property of a ``torch.cuda`` class: present on the class that stands in for it."""

    entry: Entry
    owner: Emulation


SAMPLES: dict[str, str] = {
    # CUDA-only forms: the native counterpart is the CPU spelling a CPU-written program would use.
    "torch.Tensor.cuda": "torch.ones(2, 3).cuda() if DEVICE == 'cuda' else torch.ones(2, 3).to(DEVICE)",
    "torch.Tensor.pin_memory": "torch.ones(2, 3).pin_memory() if DEVICE == 'cuda' else torch.ones(2, 3)",
    "torch.nn.Module.cuda": "torch.nn.Linear(3, 3).cuda() if DEVICE == 'cuda' else torch.nn.Linear(3, 3).to(DEVICE)",
    "torch.random.fork_rng": "forked(DEVICE if DEVICE == 'cuda' else None)",
    # Arguments the signature cannot suggest.
    "torch.Tensor.to": "torch.ones(2, 3).to(DEVICE, torch.float64)",
    "torch.nn.Module.to": "torch.nn.Linear(3, 3).to(DEVICE, torch.float64)",
    "torch.linspace": "torch.linspace(0, 5, 4, device=DEVICE)",
    "torch.logspace": "torch.logspace(0, 5, 4, device=DEVICE)",
    "torch.nn.Module.to_empty": "torch.nn.Linear(3, 3, device='meta').to_empty(device=DEVICE)",
    "torch.Tensor.new": "torch.ones(2, 3).new(2, 3, device=DEVICE)",
    "torch.empty_permuted": "torch.empty_permuted((2, 3), (1, 0), device=DEVICE)",
    "torch.empty_quantized": "torch.empty_quantized([2], quantized(), device=DEVICE)",
    "torch.from_file": "torch.from_file(data_file(), size=3, device=DEVICE)",
    "torch.from_dlpack": "torch.from_dlpack(torch.ones(2, 3), device=DEVICE)",
    "torch.sparse_coo_tensor": "torch.sparse_coo_tensor([[0, 1], [1, 0]], [1.0, 2.0], (2, 2), device=DEVICE)",
    "torch.sparse_csr_tensor": "torch.sparse_csr_tensor([0, 1, 2], [1, 0], [1.0, 2.0], (2, 2), device=DEVICE)",
    "torch.sparse_csc_tensor": "torch.sparse_csc_tensor([0, 1, 2], [1, 0], [1.0, 2.0], (2, 2), device=DEVICE)",
    "torch.sparse_bsr_tensor": "torch.sparse_bsr_tensor([0, 1], [0], torch.ones(1, 2, 2), (2, 2), device=DEVICE)",
    "torch.sparse_bsc_tensor": "torch.sparse_bsc_tensor([0, 1], [0], torch.ones(1, 2, 2), (2, 2), device=DEVICE)",
    "torch.sparse_compressed_tensor": "torch.sparse_compressed_tensor([0, 2], [0, 1], [1.0, 2.0], (1, 2), "
                                      "layout=torch.sparse_csr, device=DEVICE)",
    "torch.nested.nested_tensor": "torch.nested.nested_tensor([torch.ones(2), torch.ones(3)], device=DEVICE)",
    "torch.nested.as_nested_tensor": "torch.nested.as_nested_tensor([torch.ones(2), torch.ones(3)], device=DEVICE)",
    "torch.load": "torch.load(checkpoint(), map_location=DEVICE)",
    "torch.jit.load": "torch.jit.load(script_archive(), map_location=DEVICE)",
    "torch.set_default_device": "made_by_default(DEVICE)",
    "torch.set_autocast_enabled": "autocast_enabled_after(DEVICE)",
    "torch.set_autocast_dtype": "autocast_dtype_after(DEVICE)",
    "torch.autocast": "autocast_output(torch.autocast(DEVICE, dtype=torch.bfloat16))",
    "torch.amp.autocast": "autocast_output(torch.amp.autocast(DEVICE, dtype=torch.bfloat16))",
    "torch.GradScaler": "scaled(torch.GradScaler(DEVICE))",
    "torch.amp.GradScaler": "scaled(torch.amp.GradScaler(DEVICE))",
    "torch.amp.custom_fwd": "custom_function_output(DEVICE)",
    "torch.amp.custom_bwd": "custom_function_output(DEVICE)",
    "torch.autograd.graph.save_on_cpu": "saved_on_cpu_gradient(DEVICE)",
    "torch.get_device_module": "torch.get_device_module(DEVICE).device_count()",
    "torch.Generator": "torch.Generator(DEVICE).manual_seed(3)",
    "torch.utils.data.DataLoader": "loaded(DEVICE)",
    "torch.optim.swa_utils.update_bn": "batch_norm_statistics(DEVICE)",
    "torch.signal.windows.general_cosine": "torch.signal.windows.general_cosine(5, a=[0.5, 0.5], device=DEVICE)",
    "torch.nn.AdaptiveLogSoftmaxWithLoss": "torch.nn.AdaptiveLogSoftmaxWithLoss(8, 10, [4], device=DEVICE)",
    "torch.nn.RNNBase": "torch.nn.RNNBase('LSTM', 3, 3, device=DEVICE)",
    "torch.nn.MultiheadAttention": "torch.nn.MultiheadAttention(8, 2, device=DEVICE)",
    "torch.nn.RNNCellBase": "torch.nn.RNNCellBase(3, 3, True, 1, device=DEVICE)",
    "torch.nn.Transformer": "torch.nn.Transformer(8, 2, 1, 1, 16, device=DEVICE)",
    "torch.nn.TransformerEncoderLayer": "torch.nn.TransformerEncoderLayer(8, 2, 16, device=DEVICE)",
    "torch.nn.TransformerDecoderLayer": "torch.nn.TransformerDecoderLayer(8, 2, 16, device=DEVICE)",
}
"""Calls of device-bearing entries whose arguments the signature cannot suggest, with ``DEVICE`` standing
for ``"cuda"`` (through the runtime) or ``"cpu"`` (natively). Helpers they name are defined in
``codegen/templates/tests/test_device_entries.py.j2``."""

UNINITIALIZED = re.compile(r"(^|\.)(empty\w*|new_empty\w*|new|to_empty)$")
"""Entries whose results hold uninitialized memory: only their metadata can be compared."""

_BY_NAME = {"low": "0", "high": "5", "start": "0", "end": "5", "steps": "4", "step": "1", "fill_value": "1.5",
            "data": "[1.0, 2.0]", "obj": "[1.0, 2.0]", "M": "5", "kernel_size": "2", "module": "torch.nn.Linear(3, 3)",
            "model": "torch.nn.Linear(3, 3)"}
_BY_ANNOTATION = ((re.compile(r"\bTensor\b"), "torch.ones(2, 3)"),
                  (re.compile(r"Sequence\[|_size\b|tuple\[int"), "(2, 3)"),
                  (_INT_LIKE, "3"), (re.compile(r"\bfloat\b|_float\b"), "1.5"), (re.compile(r"\bbool\b"), "True"))
_RECEIVERS = {"torch.Tensor": "torch.ones(2, 3)", "torch.nn.Module": "torch.nn.Linear(3, 3)"}


@dataclass(frozen=True)
class Sample:
    """How the generated test calls a device-bearing entry: ``call`` with ``DEVICE`` for the device."""

    entry: Entry
    call: str
    values: bool
    """Whether results are compared by value (not for uninitialized memory)."""


def sample_of(entry: Entry) -> Sample:
    """The sample call of ``entry``: from :data:`SAMPLES`, else derived from its first overload that has
    the device parameter and only required parameters a value can be found for."""
    values = not UNINITIALIZED.search(entry.name)
    if entry.name in SAMPLES:
        return Sample(entry, SAMPLES[entry.name], values)
    receiver = _RECEIVERS.get(entry.namespace)
    callee = f"{receiver}.{entry.attr}" if receiver and entry.kind == "method" else entry.name
    param = entry.device_params[0]
    for params in entry.overloads:
        if param not in (p.name for p in params):
            continue
        args = _arguments(params[1:] if receiver and entry.kind == "method" else params, param)
        if args is not None:
            return Sample(entry, f"{callee}({', '.join((*args, f'{param}=DEVICE'))})", values)
    raise ModelError(entry.name, "no sample call: its required arguments have no derivable value; "
                                 "add one to SAMPLES in codegen/runtime_model.py")


def _arguments(params: tuple[Param, ...], device: str) -> list[str] | None:
    """Source of the required arguments, positionally, or ``None`` when one has no derivable value."""
    args = []
    for p in params:
        if p.name == device or p.kind == "var_keyword" or (p.default is not None and p.kind != "var_positional"):
            continue
        if p.kind == "var_positional":
            if p.name == "size":
                args.append("2, 3")
            continue
        value = _BY_NAME.get(p.name) or next(
            (v for pattern, v in _BY_ANNOTATION if pattern.search(p.annotation or "")), None)
        if value is None:
            return None
        args.append(f"{p.name}={value}" if p.kind == "keyword_only" else value)
    return args


class RuntimeModel:
    """The runtime's view of the catalog."""

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog

    @cached_property
    def routes(self) -> dict[str, tuple[Route, str]]:
        """Route and reason of every device-bearing entry, by name."""
        return {e.name: route_of(e) for e in self.catalog.device_entries}

    @cached_property
    def wrappers(self) -> tuple[Wrapper, ...]:
        return tuple(wrapper_of(e) for e in self.catalog.device_entries if self.routes[e.name][0] == "wrap")

    @cached_property
    def samples(self) -> tuple[Sample, ...]:
        """A sample call for every device-bearing entry the runtime translates (not the untouched)."""
        return tuple(sample_of(e) for e in self.catalog.device_entries if self.routes[e.name][0] != "untouched")

    @cached_property
    def emulations(self) -> tuple[Emulation, ...]:
        """The rows of the emulation table: every module-level ``torch.cuda`` entry and every other
        entry with a rule, in catalog order."""
        rows = []
        for e in self.catalog.entries:
            in_cuda = e.name.startswith("torch.cuda.") and e.kind not in ("method", "property")
            if not (in_cuda or e.overlays.cuda is not None):
                continue
            rule = e.overlays.cuda
            if rule is None:
                raise ModelError(e.name, "no rule in catalog/overlays/cuda.yaml: say what it does on a non-CUDA target")
            if e.policy == "emulate" and not rule.does:
                raise ModelError(e.name, "policy emulate needs `does`: a word of the emulation VOCABULARY")
            if e.policy == "unsupported" and not rule.why:
                raise ModelError(e.name, "policy unsupported needs `why`: the reason given to the user")
            rows.append(Emulation(e, rule))
        return tuple(rows)

    @cached_property
    def members(self) -> tuple[Member, ...]:
        """Methods and properties of emulated classes (unsupported classes have none to offer)."""
        classes = {row.name: row for row in self.emulations if row.is_class and row.policy == "emulate"}
        return tuple(
            Member(e, classes[e.namespace]) for e in self.catalog.entries
            if e.kind in ("method", "property") and e.namespace in classes
        )
