"""``torchdevice catalog stats [--json] [--torch X.Y]`` and ``torchdevice catalog show NAME [--torch X.Y]``.

Reads the catalog as generated into the runtime package (``torchdevice_generated/catalog.jsonl``:
a header line, then one JSON object per entry, ``limits_table.py``: MPS's limits of the overloads an entry
is or reaches, and ``cuda_kernels_table.py``: the overloads CUDA lacks and its determinism alerts), never the YAML
of a source tree; in the view of the installed release or, with ``--torch``, another known one
(``catalog_releases.jsonl``: the rows that differ there; the tables through :func:`torchdevice.releases.value`).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Iterable
from importlib import resources
from typing import Any

from torchdevice.records import ATEN_NAMESPACE, BACKENDS, CatalogRow, aten_op, dispatcher_name
from torchdevice.records.determinism import AlertRow
from torchdevice.records.limits import ANY, LimitRow


def configure(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    stats = sub.add_parser("stats", help="counts by namespace, kind, policy and kernel status")
    stats.add_argument("--json", action="store_true", help="print one JSON object")
    show = sub.add_parser("show", help="print one entry")
    show.add_argument("name", help="qualified name, e.g. torch.zeros or torch.Tensor.to")
    for each in (stats, show):
        each.add_argument("--torch", metavar="X.Y", help="another known release's view (default: the installed "
                          "torch's)")


def run(args: argparse.Namespace) -> int:
    from torchdevice import releases

    try:
        version = releases.resolve(args.torch) if args.torch else releases.facts_of()
    except ValueError as exc:
        print(f"torchdevice: {exc}", file=sys.stderr)
        return 2
    header, entries = load(version)
    if args.action == "stats":
        found = stats(header, entries)
        print(json.dumps(found, indent=2) if args.json else format_stats(found))
        return 0
    by_name = {e.name: e for e in entries}
    if args.name not in by_name:
        close = sorted(n for n in by_name if n.endswith("." + args.name.rpartition(".")[2]))[:10]
        hint = f"; did you mean: {', '.join(close)}" if close else ""
        print(f"torchdevice: no catalog entry {args.name!r} in torch {version}{hint}", file=sys.stderr)
        return 1
    print(format_entry(by_name[args.name], version))
    return 0


def load(version: str | None = None) -> tuple[dict[str, Any], list[CatalogRow]]:
    """The generated catalog in known release ``version``'s view (default: the installed torch's): its header
    (``torch_version`` that release) and its entries, in catalog order."""
    from torchdevice import releases

    version = version or releases.facts_of()
    package = resources.files("torchdevice_generated")
    header_line, *lines = package.joinpath("catalog.jsonl").read_text(encoding="utf-8").splitlines()
    header = {**json.loads(header_line), "torch_version": version}
    rows = {json.loads(line)["name"]: line for line in lines}
    _, *changes = package.joinpath("catalog_releases.jsonl").read_text(encoding="utf-8").splitlines()
    for line in changes:
        change = json.loads(line)
        if version in change["torch"]:
            rows[change["name"]] = json.dumps(change["row"]) if change["row"] is not None else ""
    if version == releases.scanned().get("VERSION"):  # the installed release, scanned at its first use
        rows.update((name, "" if row == "null" else row) for name, row in releases.scanned()["ROWS"].items())
    entries = [CatalogRow.from_json(line) for line in rows.values() if line]
    return header, sorted(entries, key=lambda e: e.name)


def stats(header: dict[str, Any], entries: list[CatalogRow]) -> dict[str, Any]:
    """Counts by namespace, kind, policy and per-backend kernel status."""
    return {
        "torch_version": header["torch_version"],
        "entries": len(entries),
        **_mlx_counts(entries),
        "by_namespace": _count(_namespace(e) for e in entries),
        "by_kind": _count(e.kind for e in entries),
        "by_policy": _count(e.policy for e in entries),
        "kernels": {b: _count(e.kernels[b] for e in entries) for b in BACKENDS},
    }


def _mlx_counts(entries: list[CatalogRow]) -> dict[str, int]:
    """How much of aten runs on MLX: the overlay's records, the overloads they cover, and those (and
    their aten ops) routed to MLX because the consistency tests measured their record passing."""
    overloads = [e for e in entries if e.kind == "op_overload" and e.mlx]
    routed = [e for e in overloads if e.mlx[0].routed]
    return {
        "mlx_records": len({m.key for e in overloads for m in e.mlx}),
        "mlx_overloads": len(overloads),
        "mlx_routed_overloads": len(routed),
        "mlx_routed_ops": len({aten_op(e.name) for e in routed}),
    }


def _namespace(entry: CatalogRow) -> str:
    """Where the entry lives: ``torch.Tensor`` for methods, ``torch.ops.aten`` for every aten overload."""
    return ATEN_NAMESPACE if entry.kind == "op_overload" else entry.name.rpartition(".")[0]


def _count(values: Iterable[str]) -> dict[str, int]:
    return dict(sorted(Counter(values).items(), key=lambda kv: (-kv[1], kv[0])))


def format_stats(stats: dict[str, Any]) -> str:
    lines = [
        f"torch {stats['torch_version']}: {stats['entries']} entries",
        f"MLX: {stats['mlx_records']} records cover {stats['mlx_overloads']} aten overloads; "
        f"{stats['mlx_routed_overloads']} overloads of {stats['mlx_routed_ops']} aten ops run on MLX (verified)",
    ]
    for key in ("by_kind", "by_policy", "by_namespace"):
        lines.append(f"\n{key.removeprefix('by_')}:")
        lines += [f"  {name:<40} {count:>6}" for name, count in stats[key].items()]
    lines.append("\nkernels:")
    for backend, counts in stats["kernels"].items():
        lines.append(f"  {backend:<6} " + "  ".join(f"{k}={v}" for k, v in counts.items()))
    return "\n".join(lines)


def _table(module: str, name: str, version: str | None) -> Any:
    """A generated table's constant in known release ``version``'s view (default: the installed torch's)."""
    import importlib

    from torchdevice import releases

    return releases.value(importlib.import_module(f"torchdevice_generated.{module}"), name,
                          version or releases.facts_of())


def format_entry(entry: CatalogRow, version: str | None = None) -> str:
    by = f" (torchdevice/runtime/{entry.by}.py)" if entry.by else ""
    rows = [
        ("name", entry.name), ("kind", entry.kind), ("module", entry.module),
        ("policy", entry.policy), ("why", entry.why + by),
        ("device params", ", ".join(entry.device_params) or "-"),
        ("aten", ", ".join(entry.aten) or "-"),
        ("kernels", "  ".join(f"{b}={s}" for b, s in entry.kernels.items())),
        ("status", "  ".join(f"{b}={s or '-'}" for b, s in entry.status.items())),
    ]
    for m in entry.mlx:
        routed = ", ".join(m.routed) or "none yet (not verified)"
        rows.append(("mlx", f"{m.key}: {m.mlx}; runs on MLX: {routed}"))
    rows += [("mps limit", line) for line in limit_lines(entry, version)]
    rows += [("cuda", line) for line in cuda_lines(entry, version)]
    rows += [("cuda alert", line) for line in alert_lines(entry, version)]
    rows += [("signature", s) for s in entry.signatures]
    return "\n".join(f"{k:<14} {v}" for k, v in rows)


def limits_of(entry: CatalogRow, version: str | None = None) -> list[tuple[str, LimitRow]]:
    """MPS's limits of the overload the entry is, or of the overloads of the aten ops it reaches: (overload, row)."""
    LIMITS = _table("limits_table", "LIMITS", version)  # noqa: N806

    if entry.kind == "op_overload":
        wanted = {dispatcher_name(entry.name)}
        return [(name, row) for row in LIMITS for name in row.overloads if name in wanted]
    ops = set(entry.aten)
    return [(name, row) for row in LIMITS for name in row.overloads
            if name != ANY and name.removeprefix("aten::").partition(".")[0] in ops]


def limit_lines(entry: CatalogRow, version: str | None = None) -> list[str]:
    """One line per limit: the overload (for an entry reaching several), what MPS does, whether CUDA runs it and
    what the runtime does on a Mac."""
    lines = []
    for name, row in limits_of(entry, version):
        where = "" if entry.kind == "op_overload" else f"{name}: "
        does = f"raises {row.raises}" if row.raises else "answers differently"
        if not row.cuda_runs:
            then = "CUDA refuses it too"
        elif row.cpu:
            then = "CUDA runs it; the CPU refuses it too: an error names the limit"
        elif not row.routed:
            then = "CUDA runs it; not routed"
        else:
            then = "CUDA runs it; runs on the CPU" + (f" ({row.instead})" if row.instead else "")
        lines.append(f"{where}{row.why}: MPS {does} ({row.name}); {then}")
    return lines


def _reached(entry: CatalogRow, names: Iterable[str]) -> list[str]:
    """Of the dispatcher ``names``, the overload the entry is, or those of the aten ops it reaches, in order."""
    if entry.kind == "op_overload":
        return [n for n in names if n == dispatcher_name(entry.name)]
    ops = set(entry.aten)
    return [n for n in names if n.removeprefix("aten::").partition(".")[0] in ops]


def cuda_lines(entry: CatalogRow, version: str | None = None) -> list[str]:
    """An overload's CUDA kernel, present or missing; for an entry reaching aten ops, the overloads CUDA lacks."""
    missing = _reached(entry, sorted(_table("cuda_kernels_table", "MISSING_ON_CUDA", version)))
    if entry.kind != "op_overload":
        return [f"{name}: no CUDA kernel (the CPU has one)" for name in missing]
    status = entry.kernels.get("cuda", "none")
    if missing:
        return [f"kernel missing: a GPU refuses it (the CPU has a {entry.kernels.get('cpu')} kernel)"]
    if status in ("native", "composite", "implicit"):
        return [f"kernel present ({status})"]
    return [f"kernel {status}"]


def alert_lines(entry: CatalogRow, version: str | None = None) -> list[str]:
    """One line per determinism alert of CUDA's kernels: the name torch's message starts with, when, where."""
    by_overload: dict[str, list[AlertRow]] = {}
    for row in _table("cuda_kernels_table", "ALERTS", version):
        for name in row.overloads:
            by_overload.setdefault(name, []).append(row)
    lines = []
    for name in _reached(entry, sorted(by_overload)):
        where = "" if entry.kind == "op_overload" else f"{name}: "
        for row in by_overload[name]:
            when = condition(row)
            lines.append(f"{where}{row.alert!r} {when if when == 'always' else 'when ' + when} ({row.source})")
    return lines


def condition(row: AlertRow) -> str:
    """An alert's condition in words (``always``, ``reduce is 'prod' and index is not empty``)."""
    words = []
    for kind, arg, *rest in row.when:
        if kind == "value":
            (values,) = rest
            words.append(f"{arg} is {' or '.join(map(repr, values))}")
        elif kind == "given":
            words.append(f"{arg} is given")
        elif kind == "dtype":
            words.append(f"{arg} is {'/'.join(rest[0])}")
        else:
            words.append(f"{arg} is not empty")
    return " and ".join(words) or "always"
