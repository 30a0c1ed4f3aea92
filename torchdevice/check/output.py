"""What ``torchdevice check`` prints: one line per finding like a linter, a grouped summary, or JSON."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from typing import Any, TextIO

from torchdevice.check.analyze import SEVERITIES, Finding
from torchdevice.check.scan import FileReport
from torchdevice.source.notebooks import place

GROUPS = {
    "import": "CUDA-only packages",
    "extension": "CUDA extension builds",
    "cuda-api": "torch.cuda",
    "op": "ops without a kernel on the target",
    "device": "device values",
    "dtype": "float64 on the device",
}
SHOWN = 3
"""Places named per group in the summary."""


def findings(reports: Sequence[FileReport]) -> list[Finding]:
    return [f for r in reports for f in r.findings]


def print_lines(reports: Sequence[FileReport], out: TextIO, err: TextIO, show: Sequence[str]) -> None:
    """``path:line:col: severity name message; todo`` for the severities in ``show``; unreadable files on ``err``."""
    for r in reports:
        for f in r.findings:
            if f.severity in show:
                print(f"{place(f.path, f.cell, f.line)}:{f.column}: {f.severity} {f.name} {f.message}"
                      + (f"; {f.todo}" if f.todo else ""), file=out)
        if r.error:
            print(f"error: {r.error}", file=err)
        elif r.skipped:
            print(f"skipped {r.path}: {r.skipped}", file=err)
        for number, why in r.cells:
            print(f"skipped {r.path}:cell {number}: {why}", file=err)


def summary(reports: Sequence[FileReport], target: str, seconds: float) -> str:
    """Findings grouped by severity, then kind and name, with counts and the first places; a closing count."""
    lines = []
    found = findings(reports)
    for severity in SEVERITIES:
        chosen = [f for f in found if f.severity == severity]
        if not chosen:
            continue
        lines.append(f"{severity}{'' if severity == 'info' else 's'} ({len(chosen)}):")
        groups: dict[tuple[str, str, str], list[Finding]] = {}
        for f in chosen:
            groups.setdefault((f.kind, f.name, f.message), []).append(f)
        for kind in GROUPS:
            for (k, name, message), items in sorted(groups.items(), key=lambda g: (-len(g[1]), g[0])):
                if k != kind:
                    continue
                places = ", ".join(place(f.path, f.cell, f.line) for f in items[:SHOWN])
                places += ", ..." if len(items) > SHOWN else ""
                lines.append(f"  {GROUPS[kind]}: {name} x{len(items)}: {message} ({places})")
    counts = Counter(f.severity for f in found)
    errors = sum(1 for r in reports if r.error)
    skipped = sum(1 for r in reports if r.skipped)
    files = "file" if len(reports) == 1 else "files"
    lines.append(f"{len(reports)} {files} checked for {target} in {seconds:.1f}s: {counts['blocker']} blockers, "
                 f"{counts['warning']} warnings, {counts['info']} info; {errors} unreadable, {skipped} skipped")
    return "\n".join(lines)


def as_json(reports: Sequence[FileReport], target: str) -> str:
    found = findings(reports)
    document: dict[str, Any] = {
        "target": target,
        "files": len(reports),
        "counts": {s: sum(1 for f in found if f.severity == s) for s in SEVERITIES},
        "findings": [f.as_dict() for f in found],
        "errors": [r.error for r in reports if r.error],
        "skipped": {r.path: r.skipped for r in reports if r.skipped},
    }
    return json.dumps(document, indent=1)


def exit_status(reports: Sequence[FileReport]) -> int:
    """1 when something blocks (or a file could not be read or parsed), else 0."""
    return 1 if any(r.error for r in reports) or any(f.severity == "blocker" for f in findings(reports)) else 0
