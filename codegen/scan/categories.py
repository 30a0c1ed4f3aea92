"""Category and policy of an entry, decided by ordered rules; the first that matches wins:

1. device namespaces (``torch.cuda``, ``torch.mps``, ``torch.accelerator``) and ``Stream``/``Event``
   classes: the class, attribute or submodule name says stream, event, memory, graph... else device;
2. attributes that move or locate tensors and modules (``to``, ``cuda``, ``is_cuda``...): device;
3. callables returning a tensor with a ``device`` parameter: factory;
4. the namespace (``torch.optim`` -> optim, ``torch.nn`` -> nn...);
5. vendor-library ops (``cudnn_*``...): backend; ``*autocast*``: amp;
6. the aten data: ``linalg_``/``fft_``/``special_`` ops, then native_functions.yaml tags (pointwise,
   reduction, nondeterministic_seeded -> random), then matrix products and ops with a
   ``linalg_`` twin (linalg), ops torch.nn.functional exports (nn), sparse and nested ops;
7. the defining module (``torch.serialization`` -> io...); else other.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

import torch.nn.functional

# Namespace prefix -> category, most specific first.
NAMESPACE_CATEGORIES: tuple[tuple[str, str], ...] = (
    ("torch.backends", "backend"),
    ("torch.amp", "amp"),
    ("torch.autograd", "autograd"),
    ("torch.func", "autograd"),
    ("torch.random", "random"),
    ("torch.distributions", "distributions"),
    ("torch.sparse", "sparse"),
    ("torch.nested", "nested"),
    ("torch.optim", "optim"),
    ("torch.utils.data", "data"),
    ("torch.distributed", "distributed"),
    ("torch.nn.parallel", "distributed"),
    ("torch.jit", "jit"),
    ("torch.compiler", "compile"),
    ("torch.export", "compile"),
    ("torch.profiler", "profiler"),
    ("torch.signal.windows", "factory"),
    ("torch.nn.init", "init"),
    ("torch.linalg", "linalg"),
    ("torch.fft", "fft"),
    ("torch.special", "special"),
    ("torch.nn", "nn"),
)
# The defining module of a torch.X object -> category (torch.save is torch.serialization.save...).
HOME_CATEGORIES: tuple[tuple[str, str], ...] = (
    ("torch.serialization", "io"),
    ("torch.amp", "amp"),
    ("torch.autograd", "autograd"),
    ("torch.random", "random"),
    ("torch.func", "autograd"),
    ("torch.jit", "jit"),
    ("torch._higher_order_ops", "compile"),
)
COMPILE_ATTRS = frozenset({"compile", "cond"})
# Device-management namespaces: their names say what they manage.
DEVICE_NAMESPACES = ("torch.cuda", "torch.mps", "torch.accelerator")
DEVICE_TERMS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("amp", re.compile(r"^torch\.cuda\.amp\b|autocast|GradScaler")),
    ("nvtx", re.compile(r"^torch\.cuda\.nvtx\b|nvtx")),
    ("profiler", re.compile(r"^torch\.mps\.profiler\b")),
    ("graph", re.compile(r"^torch\.cuda\.graphs\b|graph|Graph|stream_capturing")),
    ("stream", re.compile(r"stream|Stream")),
    ("event", re.compile(r"event|Event")),
    ("memory", re.compile(r"memory|Memory|cache|alloc|mem_|MemPool|host_memory")),
    ("random", re.compile(r"^torch\.cuda\.random\b|seed|rng")),
    ("sync", re.compile(r"synchronize")),
)
# Attributes that move a tensor/module between devices or ask where it lives.
DEVICE_ATTRS = frozenset(
    """
    to to_empty cpu cuda mps xpu ipu mtia pin_memory is_pinned get_device device set_device
    current_device device_count is_available set_default_device get_default_device get_device_module
    """.split()
)
PLAIN_NAMESPACES = frozenset({"torch", "torch.ops.aten"})
_IS_DEVICE = re.compile(r"^is_(cpu|cuda|mps|xpu|ipu|mtia|maia|meta|xla|vulkan)$")
# Ops bound to one vendor library.
BACKEND_PREFIXES = r"^(cudnn|miopen|mkldnn|fbgemm)_"
# Tensor attributes of autograd; no aten data says so.
AUTOGRAD_ATTRS = frozenset(
    """
    backward grad grad_fn requires_grad requires_grad_ retain_grad retains_grad is_leaf register_hook
    register_post_accumulate_grad_hook detach detach_ grad_dtype
    """.split()
)
# Matrix products: linear algebra without a linalg_ op to say so.
BLAS = frozenset(
    """
    mm bmm addmm addbmm baddbmm addmv mv dot vdot inner outer ger addr matmul chain_matmul tensordot
    einsum kron
    """.split()
)


@dataclass(frozen=True)
class Facts:
    """What the rules look at."""

    name: str
    kind: str
    home: str  # __module__ of the object ("" when unknown)
    device_params: tuple[str, ...]
    returns_tensor: bool
    ops: tuple[str, ...]  # aten op names reached (overload stripped)
    tags: frozenset[str]  # native_functions.yaml tags of the reached ops
    same_name_tags: frozenset[str]  # tags of the aten op named like the entry (torch.masked.sum -> sum)
    aten_names: frozenset[str]  # every registered aten op, to test ``linalg_<name>``


def category(f: Facts) -> str:
    namespace, _, attr = f.name.rpartition(".")
    if f.kind == "op_overload":
        namespace, attr = "torch.ops.aten", f.ops[0]
    owner = namespace.rpartition(".")[2] if f.kind in ("method", "property") else ""
    if f.name.startswith(DEVICE_NAMESPACES) or owner in ("Stream", "Event") or attr in ("Stream", "Event"):
        return _device_namespace(f.name, owner, attr)
    if (owner or namespace in PLAIN_NAMESPACES) and (attr in DEVICE_ATTRS or _IS_DEVICE.match(attr)):
        return "device"
    if f.device_params and f.returns_tensor and f.kind != "class" and "device" in f.device_params:
        return "factory"
    for prefix, name in NAMESPACE_CATEGORIES:
        if f.name.startswith(prefix + "."):
            return name
    if re.match(BACKEND_PREFIXES, attr):
        return "backend"
    if "autocast" in attr:
        return "amp"
    if f.name.startswith("torch.masked."):
        return _from_tags(f.same_name_tags) or "other"
    op = f.ops[0] if f.ops else attr
    if namespace == "torch.Tensor" and attr in AUTOGRAD_ATTRS:
        return "autograd"
    for prefix, name in (("linalg_", "linalg"), ("fft_", "fft"), ("special_", "special")):
        if op.startswith(prefix):
            return name
    if tagged := _from_tags(f.tags):
        return tagged
    if attr == "Generator" or owner == "Generator":
        return "random"
    if attr in BLAS or op in BLAS or f"linalg_{op}" in f.aten_names:
        return "linalg"
    if op in _functional_names():
        return "nn"
    if re.search(r"sparse|coo|csr|csc|bsr|bsc", op):
        return "sparse"
    if "nested" in op:
        return "nested"
    for prefix, name in HOME_CATEGORIES:
        if f.home == prefix or f.home.startswith(prefix + "."):
            return name
    return "compile" if attr in COMPILE_ATTRS else "other"


@lru_cache(maxsize=1)
def _functional_names() -> frozenset[str]:
    """Names torch.nn.functional exports: torch.conv2d is an nn op because F.conv2d is it."""
    return frozenset(n for n in dir(torch.nn.functional) if not n.startswith("_"))


def _device_namespace(name: str, owner: str, attr: str) -> str:
    for term in (owner, attr, name.rpartition(".")[0]):
        for category_name, pattern in DEVICE_TERMS:
            if term and pattern.search(term):
                return category_name
    return "device"


def _from_tags(tags: frozenset[str]) -> str | None:
    if "pointwise" in tags:
        return "pointwise"
    if "reduction" in tags:
        return "reduction"
    if "nondeterministic_seeded" in tags:
        return "random"
    return None


def policy(name: str, device_params: list[str], mps_kernel: str) -> str:
    """``emulate`` under torch.cuda, ``translate-device`` with a device parameter, ``fallback`` when
    MPS lacks a kernel, else ``passthrough``."""
    if name.startswith("torch.cuda."):
        return "emulate"
    if device_params:
        return "translate-device"
    if mps_kernel == "missing":
        return "fallback"
    return "passthrough"
