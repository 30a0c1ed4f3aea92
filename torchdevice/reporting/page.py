"""The program's report as a page to look at (``--report FILE.html``): one self-contained HTML file, inline CSS
and SVG, no script to run and nothing fetched, rendered from the same document as the JSON report, which it
carries too (``<script type="application/json" id="torchdevice-report">``).

The page has the program's command, target, time and versions, a table of its processes, then the program's
totals and each process's own: what was redirected, the fallbacks by time (a bar per aten overload and route,
with its seconds, calls, share and why), the stand-ins, every other section the document has (a mapping of
names to numbers or to mappings of numbers, such as ``triton``'s launches and seconds per kernel) and the
warnings. Every text of the document is escaped.
"""

from __future__ import annotations

import html
import itertools
import json
from typing import Any

SUFFIXES = (".html", ".htm")
"""A report file with one of these suffixes is written as a page; any other as JSON."""

SECTIONS = {
    # key -> (heading, the column that names each row, the column of a plain number)
    "fallbacks": ("Fallbacks by time", "op", "calls"),
    "redirects": ("Redirected calls", "op", "calls"),
    "standins": ("Stand-ins", "function", "calls"),
    "triton": ("Triton launches", "kernel", "launches"),
    "fit": ("Will it fit: the largest peak reserved of a simulated GPU, on each card (the CUDA context and cuBLAS's "
            "workspaces not counted)", "card", "memory"),
    "gpu_memory": ("Simulated GPUs: their allocator's peaks", "device", "peak_reserved"),
    "warnings": ("Warnings", "warning", "value"),
}
NO_TOTALS = ("fit",)
"""Sections whose numbers do not add up (each card's memory, the same peaks on each row)."""
SHOWN_EMPTY = ("fallbacks", "redirects", "standins", "warnings")
"""Sections that say ``none`` when empty: the runtime counted them, and found nothing."""
HEADER = ("command", "target", "wall_seconds", "versions", "processes", "format")
"""The program's keys shown at the top of the page (with any other plain value it has), not in its sections."""
LABELS = {"parent_pid": "parent", "wall_seconds": "wall time", "count": "calls", "format": "report format"}
COLOURS = {"cpu": "#4c78a8", "mlx": "#e45756"}
"""Bar colours per fallback route; others get the last one."""
OTHER_COLOUR = "#54a24b"

CSS = """
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;color:#1f2328;
  background:#f6f8fa;margin:0}
main{max-width:1180px;margin:0 auto;padding:24px 28px 48px}
h1{font-size:26px;margin:0 0 6px}
h2{font-size:20px;margin:0 0 10px;padding-bottom:6px;border-bottom:1px solid #d0d7de}
h3{font-size:16px;margin:20px 0 6px}
section.block{background:#fff;border:1px solid #d0d7de;border-radius:8px;padding:16px 20px;margin:18px 0}
code,td.name{font-family:ui-monospace,"SFMono-Regular",Menlo,"DejaVu Sans Mono",monospace;font-size:13px}
.command{background:#f6f8fa;border-radius:6px;padding:6px 10px;overflow-wrap:anywhere;white-space:pre-wrap}
dl.facts{display:grid;grid-template-columns:max-content 1fr;gap:2px 16px;margin:10px 0}
dl.facts dt{color:#57606a}
dl.facts dd{margin:0;overflow-wrap:anywhere}
table{border-collapse:collapse;width:100%;margin:4px 0}
th,td{padding:4px 10px;border-bottom:1px solid #eaeef2;vertical-align:top;text-align:left}
th{font-size:13px;color:#57606a;font-weight:600;background:#f6f8fa}
td.name,td.text{overflow-wrap:break-word}
td.key{white-space:nowrap;width:1%}
td.text{font-size:14px}
th.num,td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap;width:1%}
td.bar{width:25%;padding-top:7px}
td.bar svg{display:block;width:100%;height:14px}
tfoot td{font-weight:600;border-top:2px solid #d0d7de;border-bottom:none}
.none{color:#57606a;font-style:italic;margin:4px 0}
ul.items{margin:4px 0;padding-left:20px}
ul.items li{overflow-wrap:anywhere}
a{color:#0969da;text-decoration:none}
"""


def render(document: dict[str, Any]) -> str:
    """The page of a program's report (the document :func:`torchdevice.reporting.program.merge` makes)."""
    processes = document.get("processes", [])
    parts = [
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>torchdevice report: {_text(document.get('command', ''))}</title>",
        f"<style>{CSS}</style></head><body><main>",
        '<header><h1>torchdevice report</h1>',
        f'<div class="command"><code>{_text(document.get("command", ""))}</code></div>',
        _facts({"target": document.get("target"), "wall_seconds": document.get("wall_seconds"),
                "processes": len(processes), **document.get("versions", {}), "format": document.get("format"),
                **{k: v for k, v in document.items() if k not in HEADER and _scalar(v)}}),
        "</header>",
        _overview(processes),
        f'<section class="block" id="program"><h2>The program: {len(processes)} process'
        f'{"es" if len(processes) != 1 else ""}</h2>',
        _sections({k: v for k, v in document.items() if k not in HEADER and not _scalar(v)}),
        "</section>",
    ]
    for process in processes:
        pid = process.get("pid")
        parts += [f'<section class="block process" id="process-{_text(pid)}">',
                  f"<h2>Process {_text(pid)}: {_text(process.get('role', ''))}</h2>",
                  f'<div class="command"><code>{_text(process.get("command", ""))}</code></div>',
                  _facts({k: v for k, v in process.items() if k not in ("pid", "role", "command") and _scalar(v)}),
                  _sections({k: v for k, v in process.items() if not _scalar(v)}),
                  "</section>"]
    parts += ['<script type="application/json" id="torchdevice-report">', _embedded(document), "</script>",
              "</main></body></html>\n"]
    return "\n".join(parts)


def _overview(processes: list[dict[str, Any]]) -> str:
    """One row per process, linking to its section: its time, and how many calls were redirected and fell back."""
    rows = [{"pid": p.get("pid"), "role": p.get("role", ""), "parent": p.get("parent_pid"),
             "seconds": p.get("seconds", 0.0),
             "redirected calls": sum(sum(r.values()) for r in p.get("redirects", {}).values()),
             "fallback calls": sum(r.get("count", 0) for r in p.get("fallbacks", [])),
             "fallback seconds": sum(r.get("seconds", 0.0) for r in p.get("fallbacks", []))} for p in processes]
    return (f'<section class="block" id="processes"><h2>Processes</h2>'
            f"{_table(rows, list(rows[0]) if rows else [], links='pid')}</section>")


def _sections(values: dict[str, Any]) -> str:
    """A section per key: the known ones first, in :data:`SECTIONS`'s order, then the others in the document's."""
    order = [k for k in SECTIONS if k in values or k in SHOWN_EMPTY]
    order += [k for k in values if k not in order]
    return "\n".join(_section(key, values.get(key)) for key in order)


def _section(key: str, value: Any) -> str:
    heading, name, number = SECTIONS.get(key, (key.replace("_", " ").capitalize(), "name", "value"))
    if not value:
        body = '<p class="none">none</p>'
    elif isinstance(value, list) and not any(isinstance(item, dict) for item in value):
        body = '<ul class="items">' + "".join(f"<li>{_text(item)}</li>" for item in value) + "</ul>"
    else:
        body = _table(_rows(value, name, number), totals=key not in NO_TOTALS)
    return f'<div class="section" data-section="{_text(key)}"><h3>{_text(heading)}</h3>{body}</div>'


def _rows(value: Any, name: str, number: str) -> list[dict[str, Any]]:
    """The rows of a section: a list of mappings as is; a mapping of names to mappings or to plain values."""
    if isinstance(value, list):
        return [item if isinstance(item, dict) else {name: item} for item in value]
    return [{name: key, **item} if isinstance(item, dict) else {name: key, number: item}
            for key, item in value.items()]


def _table(rows: list[dict[str, Any]], columns: list[str] | None = None, links: str = "", totals: bool = True) -> str:
    """Rows as a table, numbers right-aligned. Unless ``columns`` are given: the columns naming a row first, then
    the numbers (seconds and share first), then the other texts; the rows with the most seconds first, each
    with a bar of its seconds; a line of totals under several rows (where ``totals``)."""
    found = list(dict.fromkeys(key for row in rows for key, value in row.items()
                               if not isinstance(value, dict)))  # nested (a GPU's verdict per card): said elsewhere
    numeric = {c for c in found if all(_number(row.get(c, 0)) for row in rows)}
    plain = columns is not None
    leading = list(itertools.takewhile(lambda c: c not in numeric, found))
    if columns is None:
        numbers = sorted((c for c in found if c in numeric), key=lambda c: (c != "seconds", c != "share"))
        columns = leading + numbers + [c for c in found if c not in leading and c not in numeric]
    timed = not plain and "seconds" in numeric
    if timed:
        rows = sorted(rows, key=lambda row: -row.get("seconds", 0))
    most = max((row.get("seconds", 0) for row in rows), default=0) if timed else 0
    kinds = {c: "num" if c in numeric else "plain" if plain else "name" if i == 0 else "key" if c in leading
             else "text" for i, c in enumerate(columns)}
    head = "".join(('<th class="bar"></th>' if c == "seconds" and most else "")
                   + f'<th class="{kinds[c]}">{_text(LABELS.get(c, c))}</th>' for c in columns)
    body = []
    for row in rows:
        cells = []
        for c in columns:
            if c == "seconds" and most:
                cells.append(f'<td class="bar">{_bar(row.get(c, 0) / most, row.get("route", ""))}</td>')
            shown = _text(_format(c, row[c])) if c in row else ""
            if kinds[c] == "name":
                shown = _breakable(shown)
            if c == links:
                shown = f'<a href="#process-{_text(row[c])}">{shown}</a>'
            cells.append(f'<td class="{kinds[c]}" data-column="{_text(c)}">{shown}</td>')
        body.append(f"<tr>{''.join(cells)}</tr>")
    foot = ""
    if not plain and totals and len(rows) > 1 and numeric:
        cells = [f'<td class="num" data-column="{_text(c)}">{_text(_format(c, sum(r.get(c, 0) for r in rows)))}</td>'
                 if c in numeric else f'<td class="name">{"all" if c == columns[0] else ""}</td>' for c in columns]
        if most:
            cells.insert(columns.index("seconds"), "<td></td>")
        foot = f"<tfoot><tr>{''.join(cells)}</tr></tfoot>"
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody>{foot}</table>"


def _bar(fraction: float, route: str) -> str:
    colour = COLOURS.get(route, OTHER_COLOUR)
    return (f'<svg viewBox="0 0 100 14" preserveAspectRatio="none" aria-hidden="true">'
            f'<rect x="0" y="2" width="{fraction * 100:.2f}" height="10" rx="1" fill="{colour}"/></svg>')


def _facts(values: dict[str, Any]) -> str:
    """Named values as a list of facts (times in seconds with their unit)."""
    items = "".join(f"<dt>{_text({**LABELS, 'seconds': 'time'}.get(k, k.replace('_', ' ')))}</dt>"
                    f"<dd>{_text(_format(k, v) + (' s' if k.endswith('seconds') and _number(v) else ''))}</dd>"
                    for k, v in values.items() if v is not None)
    return f'<dl class="facts">{items}</dl>'


def _format(column: str, value: Any) -> str:
    if isinstance(value, bool) or not _number(value):
        return str(value)
    if column == "share":
        return f"{value:.1%}"
    if column.endswith("seconds"):
        return f"{value:,.3f}"
    if column in ("pid", "parent", "parent_pid", "format"):
        return str(value)
    return f"{value:,}" if isinstance(value, int) else f"{value:,.3f}"


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _scalar(value: Any) -> bool:
    return not isinstance(value, (dict, list))


def _text(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _breakable(name: str) -> str:
    """An escaped name (``aten::_foo_backward.Tensor``) that may wrap after its ``::``, ``_``, ``.`` and ``/``
    (and nowhere else: no word cut in two)."""
    for mark in ("::", "_", ".", "/"):
        name = name.replace(mark, mark + "<wbr>")
    return name


def _embedded(document: dict[str, Any]) -> str:
    """The document as JSON inside a script element: no ``<`` (so no ``</script>``), ``>`` or ``&`` in it."""
    text = json.dumps(document, indent=1)
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
