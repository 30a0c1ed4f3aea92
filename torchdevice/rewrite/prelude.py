"""The module-level helper naming the accelerator, and ``import torch``, added once per rewritten file.

The helper is ``_DEVICE = torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")``:
the accelerator present (CUDA, MPS, XPU...) or the CPU. It goes before the first top-level statement
that needs it, after every statement there that runs code (imports, environment set-up such as
``os.environ["CUDA_VISIBLE_DEVICES"] = ...``), so it is evaluated when the original would first have
touched the device, not earlier.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from itertools import count

from torchdevice.rewrite.outline import Statement

HELPER = "_DEVICE"
_DEFINITION = '{name} = torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")'


def helper_name(source: str) -> tuple[str, bool]:
    """A helper name for ``source`` and whether the source already defines it.

    ``_DEVICE``, or ``_DEVICE_1``, ``_DEVICE_2``... when the name is taken by something else.
    """
    for i in count():
        name = HELPER if i == 0 else f"{HELPER}_{i}"
        if not re.search(rf"\b{name}\b", source):
            return name, False
        if re.search(rf"^{re.escape(_DEFINITION.format(name=name))}[ \t]*$", source, re.MULTILINE):
            return name, True
    raise AssertionError("unreachable")


def prelude(
    statements: Sequence[Statement], first_use: int, helper: str | None, import_torch: bool, newline: str
) -> tuple[int, str, bool]:
    """``(line, text, imported)``: insert ``text`` after that many lines of the file.

    ``text`` holds ``import torch`` when ``import_torch`` and no earlier top-level statement imports
    it (then ``imported``), and the helper definition unless ``helper`` is None; ``first_use`` is the
    index of the first top-level statement that refers to them.
    """
    position = next((i + 1 for i in range(first_use - 1, -1, -1) if not statements[i].defines), 0)
    lines = []
    imported = import_torch and not any(s.imports_torch for s in statements[:position])
    if imported:
        lines.append("import torch" + newline)
    if helper is not None:
        definition = _DEFINITION.format(name=helper) + newline
        lines.append(definition if position == 0 and not lines else newline + definition)
    if not lines:
        return 0, "", False
    if position == 0:
        return statements[0].start - 1, "".join(lines) + newline, imported
    return statements[position - 1].end, "".join(lines), imported
