"""MkDocs hooks (``hooks:`` in mkdocs.yml): the parts of pages that are data are rendered from that data when the site
is built, never copied into the Markdown by hand.

A page asks for a table with a marker line ``<!-- generated: NAME -->``:

``rewrite-rules``
    every rule of ``torchdevice rewrite``, from the generated table the rewriter runs
    (``torchdevice_generated.rewrite_rules.RULES``, rendered by ``make generate`` from
    ``catalog/overlays/rewrite.yaml``), grouped by the code families of :data:`torchdevice.records.rewrite.FAMILIES`;
``gpus``
    the cards a simulated GPU can be (``torchdevice.device.gpus.CARDS``);
``measurements``
    the benchmark results recorded in ``docs/measurements/bench.json`` (``make bench RECORD=1`` writes them, see
    ``bench/record.py``), one table per benchmark, with the command that reproduces each row;
``status``
    what the per-entry tests measured, counted per target and outcome (``catalog/status.yaml``, ``make status``);
``standins``
    every name each stand-in covers, with the library's signature and what computes it, and the names it does
    not cover with what to use instead (``torchdevice_generated.standins``, from ``catalog/overlays/standins.yaml``);
``pytest-options``
    the pytest plugin's options and ini keys, as the plugin adds them to pytest (``torchdevice.pytest_plugin``);
``release-facts``
    what each known release's own files say, against the catalog's release: the generated tables as each release
    has them (``torchdevice.releases.value``, from ``torchdevice_generated.releases``); this one imports torch;
``help-COMMAND``
    ``torchdevice COMMAND --help``, from the command line's own parser (``torchdevice.cli.parser``).

An unknown marker fails the build. Nothing here runs a benchmark; only ``release-facts`` imports torch.
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
MEASUREMENTS = ROOT / "docs" / "measurements" / "bench.json"
STATUS = ROOT / "catalog" / "status.yaml"
MARKER = re.compile(r"^<!-- generated: ([\w-]+) -->$", re.MULTILINE)

for _path in (ROOT, ROOT / "generated"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))


def cell(text: object) -> str:
    """A table cell: pipes escaped, lines joined."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def code(text: object) -> str:
    return f"`{cell(text)}`" if text not in (None, "") else ""


def table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def rewrite_rules() -> str:
    from torchdevice_generated.rewrite_rules import RULES

    from torchdevice.records.rewrite import FAMILIES

    parts = [f"{len(RULES)} rules, in {len({r.code[:3] for r in RULES})} families."]
    for prefix, title in FAMILIES.items():
        rules = [r for r in RULES if r.code.startswith(prefix)]
        if not rules:
            continue
        parts.append(f"## {prefix}xx: {title}")
        parts.append(table(["code", "name", "kind", "matches", "what it does"],
                           [[f"`{r.code}`", f"`{r.name}`", r.kind, code(r.match), cell(r.doc)] for r in rules]))
    unplaced = [r.code for r in RULES if not any(r.code.startswith(p) for p in FAMILIES)]
    if unplaced:
        raise ValueError(f"rewrite rules in no family of torchdevice.records.rewrite.FAMILIES: {', '.join(unplaced)}")
    return "\n\n".join(parts)


def gpus() -> str:
    from torchdevice.device.gpus import CARDS, DEFAULT

    rows = [[f"`{g.key}`" + (" (default)" if g.key == DEFAULT else ""), cell(g.name),
             f"{g.memory >> 20} MiB", f"{g.capability[0]}.{g.capability[1]}", str(g.multiprocessors),
             cell(f"{g.seen}: {g.source if '://' in g.source else f'`{g.source}`'}")]
            for g in CARDS.values()]
    return table(["`--gpu`", "`get_device_name()`", "memory", "capability", "multiprocessors", "seen"], rows)


FIELDS = ("bench", "name", "what", "measured", "goal", "command", "recorded")


def figure(key: str, value: Any) -> str:
    """One figure of a recorded result: seconds in the unit that suits them, ratios as ×."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"{key}: {value}"
    if key == "ratio":
        return f"{value:.2f}×"
    if key.endswith("_s") or key == "seconds":
        label = key.removesuffix("_s")
        for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
            if abs(value) >= scale or unit == "µs":
                return f"{label}: {value / scale:.3g} {unit}"
    return f"{key}: {value:.4g}" if isinstance(value, float) else f"{key}: {value:,}"


def measured(result: dict[str, Any]) -> str:
    if "measured" in result:
        return cell(result["measured"])
    return cell("; ".join(figure(k, v) for k, v in result.items() if k not in FIELDS))


def _column(result: dict[str, Any], column: str) -> str:
    if column == "what":
        return cell(result.get("what", result["name"]))
    if column == "measured":
        return measured(result)
    if column == "command":
        return code(result["command"])
    return cell(result.get(column, ""))


def measurements() -> str:
    document = json.loads(MEASUREMENTS.read_text())
    results = document["results"]
    parts = [cell(document["machine"])]
    for bench in dict.fromkeys(r["bench"] for r in results):
        rows = [r for r in results if r["bench"] == bench]
        parts.append(f"### `{bench}`")
        recorded = {r.get("recorded", "") for r in rows}
        columns = ["what", "measured", "goal", "recorded", "command"]
        if len(recorded) == 1:  # one run: said once
            parts.append(f"Recorded: {cell(recorded.pop()) or 'unknown'}.")
            columns.remove("recorded")
        parts.append(table(columns, [[_column(r, c) for c in columns] for r in rows]))
    return "\n\n".join(parts)


def status() -> str:
    import yaml

    entries = yaml.safe_load(STATUS.read_text()) or {}
    counts: Counter[tuple[str, str]] = Counter(
        (target, outcome) for results in entries.values() for target, outcome in results.items())
    targets = sorted({t for t, _ in counts})
    outcomes = sorted({o for _, o in counts})
    rows = [[f"`{t}`", *(f"{counts[t, o]:,}" for o in outcomes)] for t in targets]
    return f"{len(entries):,} entries measured.\n\n" + table(["target", *outcomes], rows)


def standins() -> str:
    from torchdevice_generated.standins import COVERED, MISSING, PACKAGES, VERSIONS

    parts = []
    for package, (distribution, computes) in PACKAGES.items():
        parts.append(f"### `{package}` ({distribution} {VERSIONS[package]})")
        covered = [[code(name), code(signature), code(torch_api)] for name, (signature, torch_api) in COVERED.items()
                   if name == package or name.startswith(package + ".")]
        parts.append(table(["covered", "signature", "computed with"], covered))
        missing = [[code(name), cell(instead)] for name, instead in MISSING.items()
                   if name == package or name.startswith(package + ".")]
        if missing:
            parts.append(f"Not covered (an `ImportError` naming what to use; anything else: `{cell(computes)}`):")
            parts.append(table(["not covered", "use instead"], missing))
    return "\n\n".join(parts)


def pytest_options() -> str:
    from _pytest.config.argparsing import Parser

    from torchdevice import pytest_plugin

    parser = Parser(_ispytest=True)
    pytest_plugin.pytest_addoption(parser)
    rows = []
    for group in parser._groups:
        for option in group.options:
            attrs = option.attrs()
            [name] = option.names()
            ini = attrs["dest"] if name != "--torchdevice" else "torchdevice"
            if ini not in parser._inidict:
                raise ValueError(f"the pytest option {name} has no ini key {ini}")
            flag = f"{name}[={attrs['metavar']}]" if attrs.get("nargs") == "?" else f"{name} {attrs['metavar']}"
            rows.append([code(flag), code(ini), cell(attrs["help"])])
    return table(["option", "ini key", "meaning"], rows)


def release_facts() -> str:
    from torchdevice_generated import autocast_table, cuda_kernels_table, cuda_table, fallback_table
    from torchdevice_generated.releases import CHANGES, DIFFERS, KNOWN

    from torchdevice.releases import value

    [catalog] = [release for release in KNOWN if release not in CHANGES]
    lacks = value(fallback_table, "MISSING_ON_MPS", catalog)
    rows = []
    for release in KNOWN:
        missing = value(fallback_table, "MISSING_ON_MPS", release)
        rows.append([release + (" (the catalog's)" if release == catalog else ""), f"{len(missing):,}",
                     f"{len(missing - lacks):,}", f"{len(lacks - missing):,}",
                     f"{len(value(cuda_kernels_table, 'MISSING_ON_CUDA', release)):,}",
                     f"{len(value(autocast_table, 'POLICY', release)):,}",
                     f"{len(value(cuda_table, 'EMULATION', release)):,}", f"{len(DIFFERS.get(release, ())):,}"])
    return table(["release", "overloads MPS lacks", f"of them, with a kernel on {catalog}",
                  f"lacking on {catalog}, with a kernel here", "overloads CUDA lacks", "CUDA's autocast rows",
                  "`torch.cuda` entries the emulation answers", f"records kept with {catalog}'s words"], rows)


def command_help(command: str) -> str:
    import os

    from torchdevice.cli import COMMANDS, parser

    if command not in COMMANDS:
        raise ValueError(f"no command {command!r} in torchdevice.cli.COMMANDS")
    columns = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "100"  # argparse wraps to the terminal's width: the same page on every machine
    try:
        top = parser(command)
        [sub] = [a for a in top._actions if a.dest == "command"]
        text = sub.choices[command].format_help()  # type: ignore[attr-defined]
    finally:
        if columns is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = columns
    return f"```text\n{text.rstrip()}\n```"


RENDERERS: dict[str, Callable[[], str]] = {"rewrite-rules": rewrite_rules, "gpus": gpus, "standins": standins,
                                           "pytest-options": pytest_options, "release-facts": release_facts,
                                           "measurements": measurements, "status": status}
RENDERERS.update({f"help-{name}": (lambda name=name: command_help(name))
                  for name in ("run", "check", "rewrite", "kernel", "catalog", "doctor", "probe")})


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    def render(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in RENDERERS:
            raise ValueError(f"{page.file.src_path}: no renderer for '<!-- generated: {name} -->' in docs/hooks.py")
        return RENDERERS[name]()

    return MARKER.sub(render, markdown)
