"""Parsing a module with Python's ``ast``, and splitting its text into the lines ``ast`` numbers."""

from __future__ import annotations

import ast
import re
import warnings

_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


def parse_ast(source: str) -> ast.Module:
    """``ast.parse`` without its warnings (invalid escape sequences and the like are not ours to report)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ast.parse(source)


def split_lines(source: str) -> list[str]:
    """Lines with their endings, split where Python's tokenizer splits them (not at form feeds...)."""
    return _LINE.findall(source)
