"""What ``torchdevice check`` prints: one line per finding like a linter, a grouped summary, JSON, GitHub
Actions annotations or SARIF (:mod:`torchdevice.source.formats`)."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any, TextIO

from torchdevice.check.analyze import SEVERITIES, Finding
from torchdevice.check.scan import FileReport
from torchdevice.source import formats
from torchdevice.source.notebooks import place

GROUPS = {
    "import": "CUDA-only packages",
    "extension": "CUDA extension builds",
    "cuda-api": "torch.cuda",
    "op": "ops without a kernel on the target",
    "device": "device values",
    "dtype": "float64 on the device",
}
HELP = {
    "import": "An import of a package made for CUDA alone. Without a stand-in it blocks (a warning where a try/except "
              "ImportError or an `if` not about CUDA keeps a way around it); a package with a stand-in, or one told "
              "the truth about CUDA, is info.",
    "extension": "A build of CUDA code: CUDAExtension, or CppExtension, cpp_extension.load/load_inline and "
                 "setuptools' Extension given .cu/.cuh sources, cuda_sources=, extra_cuda_cflags= or with_cuda=True. "
                 "No CUDA compiler builds for the target: it blocks (a warning where guarded).",
    "cuda-api": "A torch.cuda API: emulated by the runtime on the target (info), or refused there (CUDA graphs, cuBLAS "
                "handles, raw pointers: a blocker, a warning where guarded).",
    "op": "A call the target has no kernel for: it falls back to MLX or the CPU (fine for occasional calls; in a hot "
          "loop a supported op is faster). Tensor methods, whose receiver is unknown, are info.",
    "device": "A CUDA device or backend value (\"cuda\", .cuda(), \"nccl\"): under the runtime it means the target's "
              "device (info).",
    "dtype": "float64 on the device (torch.float64, .double()): the target has no float64 tensors; the runtime keeps "
             "them on the host and runs their ops on the CPU (info).",
}
"""Each kind's help (the SARIF rules')."""
UNREADABLE = formats.Rule("unreadable", "unreadable", "files that could not be read or parsed",
                          "A file that could not be read, decoded or parsed: nothing in it was checked "
                          "(exit status 1).")
LEVELS: dict[str, formats.Level] = {"blocker": "error", "warning": "warning", "info": "note"}
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


def summary(reports: Sequence[FileReport], target: str, seconds: float, why: str = "") -> str:
    """Findings grouped by severity, then kind and name, with counts and the first places; a closing count, which
    says why the target is the one checked for where ``why`` does (not given: the machine's default)."""
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
    checked = f"{target} ({why})" if why else target
    lines.append(f"{len(reports)} {files} checked for {checked} in {seconds:.1f}s: {counts['blocker']} blockers, "
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


def results(reports: Sequence[FileReport], show: Sequence[str] = SEVERITIES) -> list[formats.Result]:
    """The findings of the severities in ``show``, then the files that could not be read, as the CI formats' results."""
    found = [formats.Result(f.kind, LEVELS[f.severity], f.path, f.message + (f"; {f.todo}" if f.todo else ""),
                            f"{f.severity} {f.name}", f.line, f.column, cell=f.cell,
                            properties={"severity": f.severity, "name": f.name})
             for f in findings(reports) if f.severity in show]
    for r in reports:
        if r.error:
            line = re.match(rf"{re.escape(r.path)}:(\d+): ", r.error)
            found.append(formats.Result(UNREADABLE.id, "error", r.path, r.error, "unreadable",
                                        int(line.group(1)) if line else None))
    return found


def set_aside(reports: Sequence[FileReport]) -> list[tuple[str, str]]:
    """(path, why) of the files and notebook cells set aside unread, as the text says them on stderr."""
    notes = [(r.path, f"skipped {r.path}: {r.skipped}") for r in reports if r.skipped]
    notes += [(r.path, f"skipped {r.path}:cell {number}: {why}") for r in reports for number, why in r.cells]
    return notes


def as_github(reports: Sequence[FileReport], show: Sequence[str]) -> str:
    """One workflow command per finding of the severities in ``show`` and per unreadable file; files set aside as
    notices."""
    aside = [formats.Result(UNREADABLE.id, "note", path, text, "skipped") for path, text in set_aside(reports)]
    return formats.commands([*results(reports, show), *aside])


def as_sarif(reports: Sequence[FileReport], target: str) -> str:
    """Every finding (info too, as in JSON) as a SARIF 2.1.0 log; one rule per kind of finding."""
    rules = [formats.Rule(kind, kind, GROUPS[kind], HELP[kind]) for kind in GROUPS] + [UNREADABLE]
    return formats.sarif(rules, results(reports), set_aside(reports), exit_status(reports), {"target": target})


def exit_status(reports: Sequence[FileReport]) -> int:
    """1 when something blocks (or a file could not be read or parsed), else 0."""
    return 1 if any(r.error for r in reports) or any(f.severity == "blocker" for f in findings(reports)) else 0
