"""CUDA's autocast policy: which aten overloads ``torch.autocast("cuda")`` runs in which precision.

The policy is data shipped with torch: the op lists of ``torch/include/ATen/autocast_mode.h``
(``AT_FORALL_LOWER_PRECISION_FP``, ``AT_FORALL_FP32``, ``AT_FORALL_FP32_SET_OPT_DTYPE``,
``AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE``, ``AT_FORALL_PROMOTE``), which ATen registers under
the ``AutocastCUDA`` dispatch key. Ops registered there that the lists do not name are probed: a
kernel that refuses any call (``binary_cross_entropy``) is recorded ``banned`` with its message; the
others (cuDNN's own convolutions) have no kernel off CUDA and are left out.

One record per overload, as ``torch.ops.aten`` names it::

    {name: softmax.int, policy: fp32_set_opt_dtype}
    {name: norm.Scalar, policy: fp32_append_dtype, redispatch: norm.ScalarOpt_dtype}
    {name: binary_cross_entropy.default, policy: banned, message: "..."}
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import torch

HEADER = Path(torch.__file__).parent / "include" / "ATen" / "autocast_mode.h"
LISTS = {
    "LOWER_PRECISION_FP": "lower_precision_fp",
    "FP32": "fp32",
    "FP32_SET_OPT_DTYPE": "fp32_set_opt_dtype",
    "DIFFERENT_REDISPATCH_SIGNATURE": None,  # each item names its policy
    "PROMOTE": "promote",
}
NOT_POLICIES = frozenset({"DEPRECATED_AUTOCAST_BACKENDS"})
KEY = "AutocastCUDA"
_DEFINE = re.compile(r"^#define AT_FORALL_(\w+)\(_\)((?:.*\\\n)*.*)$", re.MULTILINE)
_ITEM = re.compile(r"_\(\s*(\w+)\s*(?:,\s*(\w+)\s*)?\)")
_REDISPATCH = re.compile(r'"(\w+)(?:\.(\w+))?".*?(\w+)\)\s*$', re.DOTALL)


class ScanError(RuntimeError):
    """The header or the dispatcher says something the scanner does not understand (a new torch)."""


def records(header: Path = HEADER) -> list[dict[str, Any]]:
    """The policy records, sorted by name: the header's lists, then the banned registrations."""
    found: dict[str, dict[str, Any]] = {}
    for macro, body in _DEFINE.findall(header.read_text(encoding="utf-8")):
        if macro in NOT_POLICIES:
            continue
        if macro not in LISTS:
            raise ScanError(f"{header}: unknown op list AT_FORALL_{macro}: teach codegen/scan/autocast.py its policy")
        for name, policy in _items(macro, body):
            found[name] = {"name": name, "policy": policy, **_redispatch(name, policy)}
    for name in _unlisted(found):
        message = _refusal(name)
        if message is not None:
            found[name] = {"name": name, "policy": "banned", "message": message}
    return [found[name] for name in sorted(found)]


def _items(macro: str, body: str) -> list[tuple[str, str]]:
    body = body.replace("\\\n", "\n")
    if LISTS[macro] is not None:
        return [(f"{op}.{overload or 'default'}", str(LISTS[macro])) for op, overload in _ITEM.findall(body)]
    out = []
    for item in body.split("_(ADD_NS(")[1:]:
        match = _REDISPATCH.search(item)
        if match is None:
            raise ScanError(f"{HEADER}: cannot read AT_FORALL_{macro} item {item.strip()!r}")
        op, overload, policy = match.groups()
        out.append((f"{op}.{overload or 'default'}", policy))
    return out


def _overload(name: str) -> torch._ops.OpOverload:
    op, _, overload = name.partition(".")
    try:
        return getattr(getattr(torch.ops.aten, op), overload)
    except AttributeError:
        raise ScanError(f"{HEADER}: {name} is not an aten overload of this torch") from None


def _redispatch(name: str, policy: str) -> dict[str, str]:
    """``fp32_append_dtype``: the overload it redispatches to, the same arguments and a ``dtype``."""
    schema = _overload(name)._schema
    if policy != "fp32_append_dtype":
        return {}
    want = [a.name for a in schema.arguments] + ["dtype"]
    op = name.partition(".")[0]
    packet = getattr(torch.ops.aten, op)
    for overload in sorted(packet.overloads()):
        if [a.name for a in getattr(packet, overload)._schema.arguments] == want:
            return {"redispatch": f"{op}.{overload}"}
    raise ScanError(f"{HEADER}: {name} appends a dtype, but no overload of {op} takes {want}")


def _unlisted(listed: dict[str, Any]) -> list[str]:
    """Overloads with an ``AutocastCUDA`` kernel that no list names."""
    out = []
    for qualified in torch._C._dispatch_get_all_op_names():
        if qualified.startswith("aten::") and torch._C._dispatch_has_kernel_for_dispatch_key(qualified, KEY):
            op, _, overload = qualified.removeprefix("aten::").partition(".")
            name = f"{op}.{overload or 'default'}"
            if name not in listed:
                out.append(name)
    return sorted(out)


def _refusal(name: str) -> str | None:
    """The message of an ``AutocastCUDA`` kernel that refuses a call with meta arguments of the right
    types, before any backend runs; None if the call gets past it."""
    op = _overload(name)
    args = [_meta_value(a.type) for a in op._schema.arguments if not a.kwarg_only and not a.has_default_value()]
    keys = torch._C.DispatchKeySet(torch._C.DispatchKey.AutocastCUDA)
    try:
        op.redispatch(keys, *args)
    except NotImplementedError:
        return None  # reached a backend this build has no kernel for (cuDNN)
    except RuntimeError as exc:
        return str(exc)
    return None


def _meta_value(t: torch._C.JitType) -> Any:
    if isinstance(t, torch._C.OptionalType):
        return None
    if isinstance(t, torch._C.TensorType):
        return torch.empty(2, 2, 2, device="meta")
    if isinstance(t, torch._C.ListType):
        return [1]
    return {"bool": False, "float": 1.0}.get(str(t), 1)
