"""``[tool.torchdevice]`` in ``pyproject.toml``: a project's settings of ``torchdevice rewrite`` and
``torchdevice check``.

The file is found as black and ruff find theirs: from the directory the given paths have in common,
upwards, the first ``pyproject.toml`` with a ``[tool.torchdevice]`` table, not above the root of a
repository (a directory holding ``.git`` or ``.hg``). Command-line options override it. ``check`` reads
``exclude`` and ``max-file-size``; the rule choices and the time limit are ``rewrite``'s.

    [tool.torchdevice]
    select = ["TD"]                 # rule codes or prefixes, as --select
    ignore = ["TD8", "TD905"]       # as --ignore
    exclude = ["generated", "*_pb2.py"]
    max-file-size = 1000000         # bytes, as --max-file-size
    timeout = 60                    # seconds per file, as --timeout
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib


class ConfigError(ValueError):
    """A bad ``[tool.torchdevice]`` table; the message names the file."""


@dataclass(frozen=True)
class Config:
    path: Path | None = None
    select: tuple[str, ...] | None = None
    ignore: tuple[str, ...] | None = None
    exclude: tuple[str, ...] = ()
    max_file_size: int | None = None
    timeout: float | None = None


def find(paths: list[str]) -> Path | None:
    """The ``pyproject.toml`` with a ``[tool.torchdevice]`` table that governs ``paths``, if any."""
    absolute = [os.path.abspath(p) for p in paths]
    directory = Path(os.path.commonpath(absolute)) if absolute else Path.cwd()
    if not directory.is_dir():
        directory = directory.parent
    for folder in (directory, *directory.parents):
        candidate = folder / "pyproject.toml"
        if candidate.is_file() and "[tool.torchdevice]" in candidate.read_text(encoding="utf-8", errors="replace"):
            return candidate
        if (folder / ".git").exists() or (folder / ".hg").exists():
            return None
    return None


def load(path: Path) -> Config:
    """The settings of ``path``'s ``[tool.torchdevice]`` table, checked."""
    try:
        with path.open("rb") as f:
            table = tomllib.load(f).get("tool", {}).get("torchdevice", {})
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: {exc}") from None
    known = {"select", "ignore", "exclude", "max-file-size", "timeout"}
    unknown = sorted(set(table) - known)
    if unknown:
        raise ConfigError(f"{path}: [tool.torchdevice]: unknown key {unknown[0]!r} (known: {', '.join(sorted(known))})")
    return Config(
        path=path,
        select=_strings(path, table, "select"),
        ignore=_strings(path, table, "ignore"),
        exclude=_strings(path, table, "exclude") or (),
        max_file_size=_number(path, table, "max-file-size", int),
        timeout=_number(path, table, "timeout", float),
    )


def settings(paths: list[str], given: str | None, program: str) -> Config | None:
    """The settings for a run over ``paths``: from ``given`` (``--config``) or the file ``find`` finds, else the
    defaults; None after printing the error as ``program`` (``torchdevice rewrite``) to stderr."""
    try:
        path = Path(given) if given else find(paths)
        return load(path) if path is not None else Config()
    except ConfigError as exc:
        print(f"{program}: error: {exc}", file=sys.stderr)
        return None


def _strings(path: Path, table: dict[str, Any], key: str) -> tuple[str, ...] | None:
    value = table.get(key)
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{path}: [tool.torchdevice]: {key} must be a list of strings, got {value!r}")
    return tuple(value)


def _number(path: Path, table: dict[str, Any], key: str, kind: type) -> Any:
    value = table.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (kind is int and not isinstance(value, int)) \
            or value <= 0:
        raise ConfigError(f"{path}: [tool.torchdevice]: {key} must be a positive {kind.__name__}, got {value!r}")
    return kind(value)
