"""Reading Python sources, shared by ``torchdevice rewrite`` and ``torchdevice check``.

``files`` finds the Python files under the given paths (never following a link out of them), reads and
decodes them as Python does and replaces them safely; ``config`` reads a project's ``[tool.torchdevice]``;
``pool`` runs a function over many files in worker processes; ``parsing`` parses with ``ast`` and splits
lines as Python does; ``names`` says what a module's names stand for, through its imports. Nothing here
imports libcst or torch.
"""
