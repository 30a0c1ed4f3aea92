"""``torchdevice rewrite``: turn CUDA-specific source into device-agnostic PyTorch (libcst based).

``torchdevice.cli.rewrite`` is the command; ``config`` reads ``[tool.torchdevice]``, ``selection`` which
rules apply where; ``jobs`` rewrites many files (``files`` finds, reads and safely replaces them);
``source`` rewrites one module: ``outline`` finds the statements worth parsing, ``facts`` what the
module as a whole tells (torch's name, guards, the program's own device), ``transform`` (with
``values`` and ``calls``) rewrites the statements with ``forms``, ``prelude`` adds the accelerator
helper. The rules are data: ``catalog/overlays/rewrite.yaml``, rendered into
``torchdevice_generated.rewrite_rules`` as ``rule.RewriteRule`` records.
"""

REQUIRES_TORCH = (2, 10)
"""The oldest torch release whose API has everything the rewritten code uses (checked by the tests
against the API of each release)."""
