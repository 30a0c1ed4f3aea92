"""What ``torchdevice rewrite`` tells the user: per-file lines, reports, the summary, the exit status; the same
as JSON, GitHub Actions annotations or SARIF (:mod:`torchdevice.source.formats`)."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any, TextIO

from torchdevice.rewrite import REQUIRES_TORCH
from torchdevice.rewrite.jobs import Change, FileResult, Mode, Status
from torchdevice.source import formats
from torchdevice.source.notebooks import place

EXIT_CHANGES = 1
EXIT_FAILED = 123

_DONE = {"check": "would rewrite", "diff": "would rewrite", "write": "rewrote"}
_CHANGED = {"check": "would be rewritten", "diff": "would be rewritten", "write": "rewritten"}
STATUSES: tuple[Status, ...] = ("changed", "unchanged", "clean", "skipped", "failed")
REWRITE = formats.Rule(
    "rewrite", "rewrite", "CUDA-specific code rewritten into device-agnostic PyTorch",
    'CUDA-specific code the rewriter rewrites: "cuda" device values, .cuda(), .to(local_rank), torch.cuda calls '
    "(to torch.accelerator, guarded where no accelerator may be), torch.cuda.amp (to torch.amp), CUDA events and "
    'streams (to torch.Event, torch.Stream), "nccl" (to the accelerator\'s default backend), DDP\'s device_ids, '
    "mp.spawn's process count. Apply with `torchdevice rewrite --write`; the rewritten code needs torch>="
    + ".".join(map(str, REQUIRES_TORCH)) + ".",
)
FAILED = formats.Rule("failed", "failed", "files that could not be read, parsed or written",
                      "A file that could not be read, decoded, parsed or written: it was left as it was (exit status "
                      "123).")
SHOWN_LINES = 40
"""Lines of a change's new text said in its message."""


def print_results(results: Sequence[FileResult], mode: Mode, out: TextIO, err: TextIO) -> None:
    """Diffs on ``out``; what changed, reports (``path:line:column: CODE message``), files set aside and errors
    on ``err``."""
    for r in results:
        if r.diff:
            out.write(r.diff)
        if r.status == "changed":
            print(f"{_DONE[mode]} {r.path}", file=err)
        for note in r.notes:
            print(f"{place(r.path, note.cell, note.line)}:{note.column}: {note.code} {note.message}", file=err)
        for number, why in r.cells:
            print(f"skipped {r.path}:cell {number}: {why}", file=err)
        if r.status == "skipped":
            print(f"skipped {r.path}: {r.reason}", file=err)
        elif r.status == "failed":
            print(f"error: {r.reason}", file=err)


def summary(results: Sequence[FileResult], mode: Mode, seconds: float) -> str:
    counts = Counter(r.status for r in results)
    files = "file" if len(results) == 1 else "files"
    sites = sum(n for r in results for n in r.sites.values())
    reported = sum(len(r.notes) for r in results)
    text = (
        f"{len(results)} {files} scanned in {seconds:.1f}s: {counts['changed']} {_CHANGED[mode]}, "
        f"{counts['unchanged']} unchanged, {counts['clean']} without CUDA code, {counts['skipped']} skipped, "
        f"{counts['failed']} failed; {sites} sites rewritten, {reported} reported"
    )
    if counts["changed"]:
        text += f"; the rewritten code needs torch>={'.'.join(map(str, REQUIRES_TORCH))}"
    return text


def rules() -> list[formats.Rule]:
    """The SARIF rules: the change, every rule of the catalog by its code (what it reports: its ``doc``), failures."""
    from torchdevice_generated.rewrite_rules import RULES

    return [REWRITE, *(formats.Rule(r.code, r.name, r.name.replace("-", " "), r.doc) for r in RULES), FAILED]


def _name(code: str) -> str:
    from torchdevice.rewrite.ruleset import default

    rule = default().by_code.get(code)
    return rule.name if rule is not None else ""


def _said(change: Change, mode: Mode) -> str:
    lines = change.text.splitlines()
    shown = "\n".join(lines[:SHOWN_LINES]) + ("\n..." if len(lines) > SHOWN_LINES else "")
    if not change.lines:
        where = "after" if change.after else "before"
        return f"{'inserted' if mode == 'write' else 'would insert'} {where} this line:\n{shown}"
    if not change.text:
        return "removed" if mode == "write" else "would be removed"
    return f"{_CHANGED[mode]} as:\n{shown}"


def results(done: Sequence[FileResult], mode: Mode) -> list[formats.Result]:
    """Per file: its changes (errors where they fail the run, notes once written), its reports (warnings), why it
    failed."""
    found: list[formats.Result] = []
    for r in done:
        title = "rewrote" if mode == "write" else "would rewrite"
        level: formats.Level = "note" if mode == "write" else "error"
        sites = {"sites": dict(r.sites)} if r.sites else None
        if r.status == "changed":
            found += [formats.Result(REWRITE.id, level, r.path, _said(c, mode), title, c.line, 1, c.end, c.cell, sites)
                      for c in r.changes]
        found += [formats.Result(n.code, "warning", r.path, n.message, f"{n.code} {_name(n.code)}", n.line, n.column,
                                 cell=n.cell) for n in r.notes]
        if r.status == "failed":
            line = re.match(rf"{re.escape(r.path)}:(\d+): ", r.reason)
            found.append(formats.Result(FAILED.id, "error", r.path, r.reason, "error",
                                        int(line.group(1)) if line else None))
    return found


def set_aside(results: Sequence[FileResult]) -> list[tuple[str, str]]:
    """(path, why) of the files and notebook cells set aside, as the text says them."""
    notes = [(r.path, f"skipped {r.path}:cell {number}: {why}") for r in results for number, why in r.cells]
    return notes + [(r.path, f"skipped {r.path}: {r.reason}") for r in results if r.status == "skipped"]


def as_github(found: Sequence[FileResult], mode: Mode) -> str:
    """One workflow command per change, report and failed file; files set aside as notices."""
    aside = [formats.Result(FAILED.id, "note", path, text, "skipped") for path, text in set_aside(found)]
    return formats.commands([*results(found, mode), *aside])


def as_sarif(found: Sequence[FileResult], mode: Mode) -> str:
    return formats.sarif(rules(), results(found, mode), set_aside(found), exit_status(found, mode), {"mode": mode})


def as_json(found: Sequence[FileResult], mode: Mode) -> str:
    """Every file's status, rewritten sites per rule code, changes, reports; the diff too with ``--diff``."""
    counts = Counter(r.status for r in found)

    def entry(r: FileResult) -> dict[str, Any]:
        item: dict[str, Any] = {
            "path": r.path, "status": r.status, "reason": r.reason, "sites": dict(r.sites), "added": r.added,
            "changes": [asdict(c) for c in r.changes], "notes": [asdict(n) for n in r.notes],
            "cells_skipped": [{"cell": n, "why": why} for n, why in r.cells],
        }
        if mode == "diff":
            item["diff"] = r.diff
        return item

    document = {
        "mode": mode,
        "files": len(found),
        "counts": {status: counts[status] for status in STATUSES},
        "sites": sum(n for r in found for n in r.sites.values()),
        "reported": sum(len(r.notes) for r in found),
        "requires_torch": ".".join(map(str, REQUIRES_TORCH)),
        "results": [entry(r) for r in found],
    }
    return json.dumps(document, indent=1)


def exit_status(results: Sequence[FileResult], mode: Mode) -> int:
    if any(r.status == "failed" for r in results):
        return EXIT_FAILED
    if mode != "write" and any(r.status == "changed" for r in results):
        return EXIT_CHANGES
    return 0
