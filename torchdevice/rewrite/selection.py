"""Which rules apply where: ``--select``/``--ignore`` (or ``[tool.torchdevice]``) for a run, and
``# torchdevice: ignore[CODE, ...]`` comments for one line.

Codes are matched by prefix, as ruff does: ``TD1`` names every ``TD1xx`` rule, ``TD`` all of them.
A bare ``# torchdevice: ignore`` turns every rule off on its line.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

_COMMENT = re.compile(r"#\s*torchdevice:\s*ignore\b(?:\[([^\]]*)\])?")
_PREFIX = re.compile(r"TD\d{0,3}")


class SelectionError(ValueError):
    """A code or prefix that names no rule."""


@dataclass(frozen=True)
class Selection:
    """The rules turned on for a run."""

    select: tuple[str, ...] = ("TD",)
    ignore: tuple[str, ...] = ()

    @classmethod
    def parse(cls, select: Iterable[str] | None, ignore: Iterable[str] | None, codes: Iterable[str]) -> Selection:
        """Validate ``select`` and ``ignore`` (codes or prefixes) against the rules' ``codes``."""
        known = tuple(codes)
        chosen = {}
        for option, values in (("select", select), ("ignore", ignore)):
            if values is None:
                continue
            entries = tuple(v.strip().upper() for v in values if v.strip())
            for entry in entries:
                if not _PREFIX.fullmatch(entry) or not any(code.startswith(entry) for code in known):
                    raise SelectionError(f"{option}: {entry!r} is not a rule code or prefix (TD101, TD1, TD)")
            chosen[option] = entries
        return cls(**chosen)

    def enabled(self, code: str) -> bool:
        return any(code.startswith(p) for p in self.select) and not any(code.startswith(p) for p in self.ignore)


def split_codes(text: str) -> list[str]:
    """``"TD101, TD2"`` -> ``["TD101", "TD2"]`` (command-line and comment lists)."""
    return [part for part in re.split(r"[,\s]+", text) if part]


def suppressions(lines: list[str]) -> dict[int, frozenset[str] | None]:
    """Line number -> codes (prefixes) its ``# torchdevice: ignore[...]`` comment turns off; None: all."""
    found: dict[int, frozenset[str] | None] = {}
    for number, line in enumerate(lines, 1):
        if "torchdevice:" not in line:
            continue
        comment = _COMMENT.search(line)
        if comment is not None:
            codes = comment.group(1)
            found[number] = None if codes is None else frozenset(c.upper() for c in split_codes(codes))
    return found


def suppressed(table: dict[int, frozenset[str] | None], lines: Iterable[int], code: str) -> bool:
    """Does a comment on one of ``lines`` turn ``code`` off?"""
    for line in lines:
        if line in table:
            codes = table[line]
            if codes is None or any(code.startswith(c) for c in codes):
                return True
    return False
