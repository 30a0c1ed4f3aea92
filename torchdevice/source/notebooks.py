"""Jupyter notebooks (``.ipynb``, nbformat 4) as sources of ``torchdevice check`` and ``torchdevice rewrite``.

As nbQA and Jupytext do, the code cells are read as one Python module (cells share one namespace, so an
import in cell 1 serves cell 5): :meth:`Notebook.script` joins them, each after a marker, and
:meth:`Notebook.rewritten` splits a rewritten script back at the markers into the cells' new sources. The first
marker is a comment (a cell may open with ``from __future__ import ...`` or a docstring), the others are statements
(a name alone), so that no rewrite joins the statements of two cells (as in one guard). A
line in the script is located by :meth:`Cells.locate` as a cell's number (counted among all cells from 1,
as nbQA counts) and a line in it.

IPython's syntax is left alone: a cell that Python parses is taken as is (no IPython syntax is valid
Python); in one that it does not, each line that begins with IPython's escapes (``!cmd``, ``%magic``,
``?name``, ``name = !cmd``, ``name = %magic``), asks for help (``name?``), or continues such a line, is
masked by a placeholder statement with its indentation and put back afterwards, so the rest of the cell is
still read and rewritten. A cell opened by a cell magic is read below it where the magic's body is Python
(``%%time``, ``%%timeit``, ``%%capture``) and set aside otherwise (``%%bash``...), as is a cell that still does
not parse: such cells are named in :attr:`Cells.skipped` and kept as they are, never broken.

A notebook is JSON (UTF-8); it is written back as it was formatted (the indent it has, ``nbformat``'s one
by default, key order, ``ensure_ascii`` as found, the final newline), only the changed code cells' sources
replaced (a list of lines where it was one, as nbformat writes it): outputs, metadata and cell ids stay. A
file that is not JSON or not a notebook of nbformat 4 is :class:`NotebookError` (a ``files.Unreadable``),
naming the file. The size limit of ``--max-file-size`` applies to the code cells' text (outputs such as plots make
notebooks large). Nothing here needs the ``nbformat`` package.
"""

from __future__ import annotations

import ast
import bisect
import json
import re
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torchdevice.source import files
from torchdevice.source.parsing import split_lines

SUFFIX = ".ipynb"
PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture"})
"""Cell magics whose body is Python: the body is read, the magic's line masked."""
_MARKER = "__torchdevice_cell"
_PLACEHOLDER = "__torchdevice_ipython"
_ESCAPES = re.compile(r"[ \t]*(?:[!%?]|[\w.]+[ \t]*=[ \t]*[!%]|[\w.*]+[ \t]*\?\??[ \t]*$)")
"""The start of a line in IPython's syntax: an escape, an assignment from one, or a help request."""


class NotebookError(files.Unreadable):
    """Not a notebook this tool reads; ``str()`` is ``path: reason``."""


def is_notebook(path: Path | str) -> bool:
    return str(path).endswith(SUFFIX)


@dataclass(frozen=True)
class Cells:
    """Where the code cells are in a notebook's script, and which were set aside."""

    starts: tuple[int, ...]
    """Each code cell's first line in the script (1-based), in order."""
    numbers: tuple[int, ...]
    """Each code cell's number among all cells (1-based)."""
    skipped: tuple[tuple[int, str], ...] = ()
    """(cell number, why) of the code cells left out of the script."""

    def locate(self, line: int) -> tuple[int, int]:
        """``(cell number, line in the cell)`` of a line of the script."""
        i = max(bisect.bisect_right(self.starts, line) - 1, 0)
        return self.numbers[i], line - self.starts[i] + 1


def place(path: str, cell: int | None, line: int) -> str:
    """``path:line``, or in a notebook ``path:cell N:line L``."""
    return f"{path}:{line}" if cell is None else f"{path}:cell {cell}:line {line}"


@dataclass(frozen=True)
class _Source:
    """One code cell as the script has it: its text with IPython's lines masked, and those lines."""

    number: int
    original: str
    text: str
    masked: tuple[str, ...]
    skip: str = ""


class Notebook:
    """A notebook read from JSON: its document, its formatting, and its code cells as a script."""

    def __init__(self, path: Path, document: dict[str, Any], style: dict[str, Any]) -> None:
        self.path = path
        self.document = document
        self._style = style
        code = [(number, _text(cell["source"])) for number, cell in enumerate(document["cells"], 1)
                if cell.get("cell_type") == "code"]
        text = "".join(source for _, source in code)
        self._marker = _unused(_MARKER, text)
        self._placeholder = _unused(_PLACEHOLDER, text)
        self._code = [_mask(number, source, self._placeholder) for number, source in code]
        lines: list[str] = []
        starts = []
        for source in self._code:
            lines.append(f"# {self._marker} {source.number}\n" if not lines else f"{self._marker}_{source.number}__\n")
            starts.append(len(lines) + 1)
            if not source.skip:
                body = source.text
                lines += split_lines(body if body.endswith(("\n", "\r")) or not body else body + "\n")
        self.script = "".join(lines)
        """The code cells as one module (what ``check`` reads and ``rewrite`` rewrites)."""
        self.cells = Cells(tuple(starts), tuple(c.number for c in self._code),
                           tuple((c.number, c.skip) for c in self._code if c.skip))

    def rewritten(self, script: str) -> list[tuple[int, str, str]]:
        """``(cell number, old source, new source)`` of each code cell ``script`` (a rewrite of :attr:`script`)
        changes; raises ValueError where its markers or placeholders are not all found as written."""
        marker = re.escape(self._marker)
        parts = re.split(rf"^(?:# {marker} (\d+)|{marker}_(\d+)__)\r?\n", script, flags=re.MULTILINE)
        numbers = [int(first or other) for first, other in zip(parts[1::3], parts[2::3], strict=True)]
        if numbers != list(self.cells.numbers):
            raise ValueError("the rewritten cells cannot be told apart")
        bodies = parts[3::3]
        if bodies:  # what was put before the first cell's marker (at the top of the module) is the first cell's
            bodies[0] = parts[0] + bodies[0]
        changed = []
        for source, body in zip(self._code, bodies, strict=True):
            if source.skip:
                continue
            if not source.original.endswith(("\n", "\r")):  # as Jupyter keeps a cell: without a final newline
                body = body.rstrip("\r\n")
            new = self._unmask(body, source)
            if new != source.original:
                changed.append((source.number, source.original, new))
        return changed

    def _unmask(self, body: str, source: _Source) -> str:
        pattern = re.compile(rf"^[ \t]*{re.escape(self._placeholder)}_(\d+)__[ \t]*(\r?\n)?$")
        lines = split_lines(body)
        seen = []
        for i, line in enumerate(lines):
            match = pattern.match(line)
            if match is not None and int(match[1]) < len(source.masked):
                seen.append(int(match[1]))
                original = source.masked[int(match[1])].rstrip("\r\n")
                lines[i] = original + line[len(line.rstrip("\r\n")):]
        if seen != list(range(len(source.masked))):
            raise ValueError(f"cell {source.number}: its IPython lines cannot be put back")
        return "".join(lines)

    def dumps(self, changed: list[tuple[int, str, str]]) -> bytes:
        """The notebook with the code cells' new sources, formatted as it was."""
        cells = self.document["cells"]
        for number, _, new in changed:
            cell = cells[number - 1]
            cell["source"] = new.splitlines(keepends=True) if isinstance(cell["source"], list) else new
        style = self._style
        text = json.dumps(self.document, indent=style["indent"], ensure_ascii=style["ascii"])
        return (text + style["end"]).encode("utf-8")


def load(path: Path, max_bytes: int | None = None) -> tuple[Notebook, files.Snapshot]:
    """Read the notebook at ``path`` (``files.read``); ``max_bytes`` limits its code cells' text, not the file, whose
    outputs (plots...) may be large. Raises ``files.Unreadable`` (NotebookError for what is not a notebook) and
    ``files.Skipped``."""
    data, snapshot = files.read(path)
    notebook = read(path, data)
    size = len(notebook.script.encode("utf-8"))
    if max_bytes is not None and size > max_bytes:
        raise files.Skipped(f"{size:,} bytes of code cells, over the limit of {max_bytes:,} (--max-file-size)")
    return notebook, snapshot


def read(path: Path, data: bytes) -> Notebook:
    """The notebook in ``data``; raises NotebookError naming ``path`` when it is not one of nbformat 4."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise NotebookError(f"{path}: not a notebook: not UTF-8 (byte {data[exc.start]:#04x})") from None
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise NotebookError(f"{path}:{exc.lineno}: not a notebook: invalid JSON: {exc.msg}") from None
    if not isinstance(document, dict) or "nbformat" not in document:
        raise NotebookError(f"{path}: not a notebook: no nbformat version")
    if document["nbformat"] != 4:
        raise NotebookError(f"{path}: not a notebook of nbformat 4 (version {document['nbformat']!r}); "
                            "upgrade it with `jupyter nbconvert --to notebook`")
    cells = document.get("cells")
    if not isinstance(cells, list):
        raise NotebookError(f"{path}: not a notebook: no list of cells")
    for number, cell in enumerate(cells, 1):
        source = cell.get("source") if isinstance(cell, dict) else None
        if not isinstance(source, (str, list)) or isinstance(source, list) and \
                not all(isinstance(s, str) for s in source):
            raise NotebookError(f"{path}: cell {number}: not a notebook cell: no source text")
    return Notebook(path, document, _style(text))


def _style(text: str) -> dict[str, Any]:
    """How the JSON was written, to write it back the same way."""
    indent = re.match(r"\{\r?\n([ \t]*)\S", text)
    return {"indent": indent[1] if indent else None,
            "ascii": text.isascii() and bool(re.search(r"\\u[0-9a-fA-F]{4}", text)),
            "end": text[len(text.rstrip("\r\n")):]}


def _text(source: str | list[str]) -> str:
    return source if isinstance(source, str) else "".join(source)


def _unused(word: str, text: str) -> str:
    """``word``, or a variant of it that ``text`` does not contain."""
    n = 0
    while f"{word}{n or ''}" in text:
        n += 1
    return f"{word}{n or ''}"


def _mask(number: int, source: str, placeholder: str) -> _Source:
    """A cell's text for the script: as is where Python parses it, else with IPython's lines masked."""
    if _parses(source):
        return _Source(number, source, source, ())
    lines = split_lines(source)
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    masked: list[str] = []
    out = list(lines)
    escaped = set()
    if first is not None and lines[first].startswith("%%"):
        magic = lines[first][2:].split(None, 1)[0] if lines[first][2:].strip() else ""
        if magic not in PYTHON_CELL_MAGICS:
            return _Source(number, source, source, (), f"cell magic %%{magic}: not Python, left as it is")
        escaped.add(first)
    continued = False
    for i, line in enumerate(lines):
        if continued or _ESCAPES.match(line):
            escaped.add(i)
        continued = i in escaped and line.rstrip("\r\n").endswith("\\")
    for i in sorted(escaped):
        indent = re.match(r"[ \t]*", lines[i])
        ending = lines[i][len(lines[i].rstrip("\r\n")):]
        out[i] = f"{indent[0] if indent else ''}{placeholder}_{len(masked)}__{ending}"
        masked.append(lines[i])
    text = "".join(out)
    if not _parses(text):
        try:
            compile(text, "<cell>", "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
            why = "does not parse"
        except SyntaxError as exc:
            why = f"line {exc.lineno}: {exc.msg}"
        return _Source(number, source, source, (), f"not Python ({why}), left as it is")
    return _Source(number, source, text, tuple(masked))


def _parses(text: str) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(text)
    except (SyntaxError, ValueError):
        return False
    return True
