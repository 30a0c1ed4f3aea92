"""The CI output formats that ``torchdevice check`` and ``torchdevice rewrite`` share (``--format``).

``github``: GitHub Actions workflow commands, one annotation per finding on its own line
(``::error file=PATH,line=N,col=M,title=TITLE::MESSAGE``), escaped as GitHub's toolkit escapes them: ``%``,
``\\r`` and ``\\n`` in the message, and ``:`` and ``,`` too in the properties.

``sarif``: one SARIF 2.1.0 log with one run: the tool and its rules, the results with their locations (URIs
relative to the working directory, under the base ``%SRCROOT%``), and the invocation (exit code, the files set
aside as notifications). Columns count code points (``columnKind``), 1-based, as the text lines do.

A finding in a notebook is placed in the ``.ipynb`` file without a line (its line is in a code cell, not in the
file's JSON), the cell and line said in the message.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import quote

from torchdevice.version import DISTRIBUTION, __version__

FORMATS = ("text", "json", "github", "sarif")
Level = Literal["error", "warning", "note"]
"""SARIF's levels; GitHub's commands are ``error``, ``warning`` and ``notice``."""

SARIF_SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
INFORMATION_URI = f"https://pypi.org/project/{DISTRIBUTION}/"
BASE = "%SRCROOT%"
"""The base of the results' relative URIs: the working directory (``originalUriBaseIds``)."""

_COMMANDS = {"error": "error", "warning": "warning", "note": "notice"}


@dataclass(frozen=True)
class Rule:
    id: str
    name: str
    short: str
    help: str


@dataclass(frozen=True)
class Result:
    """One finding, in the terms both formats need."""

    rule: str
    level: Level
    path: str
    message: str
    title: str
    line: int | None = None
    column: int | None = None
    end_line: int | None = None
    cell: int | None = None
    """In a notebook: the code cell ``line`` is in (the location then names the file alone)."""
    properties: Mapping[str, Any] | None = None

    @property
    def text(self) -> str:
        """The message, prefixed with the cell and line where they cannot be a location."""
        if self.cell is None:
            return self.message
        column = f", column {self.column}" if self.column is not None else ""
        return f"cell {self.cell}, line {self.line}{column}: {self.message}"


def relative(path: str) -> str:
    """``path`` relative to the working directory where it lies under it, else absolute; with ``/``."""
    absolute = Path(os.path.abspath(path))
    try:
        return absolute.relative_to(Path.cwd()).as_posix()
    except ValueError:
        return absolute.as_posix()


# GitHub Actions


def escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def annotation(result: Result) -> str:
    """The workflow command of one result: ``::error file=...,line=...,col=...,title=...::message``."""
    properties = [("file", relative(result.path))]
    if result.line is not None and result.cell is None:
        properties.append(("line", str(result.line)))
        if result.end_line is not None and result.end_line != result.line:
            properties.append(("endLine", str(result.end_line)))
        if result.column is not None:
            properties.append(("col", str(result.column)))
    properties.append(("title", result.title))
    given = ",".join(f"{key}={escape_property(value)}" for key, value in properties)
    return f"::{_COMMANDS[result.level]} {given}::{escape_data(result.text)}"


def commands(results: Iterable[Result]) -> str:
    return "".join(annotation(r) + "\n" for r in results)


# SARIF


def artifact(path: str) -> dict[str, Any]:
    where = relative(path)
    if where.startswith("/"):
        return {"uri": Path(where).as_uri()}
    return {"uri": quote(where), "uriBaseId": BASE}


def location(result: Result) -> dict[str, Any]:
    physical: dict[str, Any] = {"artifactLocation": artifact(result.path)}
    if result.line is not None and result.cell is None:
        region: dict[str, Any] = {"startLine": result.line}
        if result.column is not None:
            region["startColumn"] = result.column
        if result.end_line is not None and result.end_line != result.line:
            region["endLine"] = result.end_line
        physical["region"] = region
    return {"physicalLocation": physical}


def sarif(rules: Sequence[Rule], results: Iterable[Result], notes: Iterable[tuple[str, str]], exit_code: int,
          properties: Mapping[str, Any] | None = None) -> str:
    """The SARIF log of one run: every rule of ``rules``, the results, and ``notes`` (``path, text``: files set
    aside) as the invocation's notifications."""
    index = {rule.id: n for n, rule in enumerate(rules)}
    found = []
    for r in results:
        entry: dict[str, Any] = {
            "ruleId": r.rule,
            "ruleIndex": index[r.rule],
            "level": r.level,
            "message": {"text": r.text},
            "locations": [location(r)],
        }
        if r.properties:
            entry["properties"] = dict(r.properties)
        found.append(entry)
    invocation: dict[str, Any] = {"executionSuccessful": True, "exitCode": exit_code}
    notifications = [{"level": "note", "message": {"text": text},
                      "locations": [{"physicalLocation": {"artifactLocation": artifact(path)}}]}
                     for path, text in notes]
    if notifications:
        invocation["toolExecutionNotifications"] = notifications
    run: dict[str, Any] = {
        "tool": {"driver": {
            "name": "torchdevice",
            "version": __version__,
            "informationUri": INFORMATION_URI,
            "rules": [{
                "id": rule.id,
                "name": rule.name,
                "shortDescription": {"text": rule.short},
                "fullDescription": {"text": rule.help},
                "help": {"text": rule.help},
            } for rule in rules],
        }},
        "invocations": [invocation],
        "originalUriBaseIds": {BASE: {"uri": Path.cwd().as_uri().rstrip("/") + "/"}},
        "columnKind": "unicodeCodePoints",
        "results": found,
    }
    if properties:
        run["properties"] = dict(properties)
    return json.dumps({"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [run]}, indent=1)
