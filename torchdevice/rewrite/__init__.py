"""``torchdevice rewrite``: turn CUDA-specific source into device-agnostic PyTorch (libcst based).

``torchdevice.cli.rewrite`` is the command; ``selection`` says which rules apply where; ``jobs`` rewrites
many files (found, read, spread over workers and safely replaced by ``torchdevice.source``, which
``torchdevice check`` shares); ``source`` rewrites one module: ``outline`` finds the statements worth
parsing, ``facts`` what the module as a whole tells (what its names stand for, torch's name, guards, the
program's own device), the ``rewriter`` runs the ``rules`` (one module per kind of rule) over those
statements in one pass, sharing ``state``, writing with ``forms``; ``prelude`` adds the accelerator helper,
``imports`` removes the imports left unused. The rules are data: ``catalog/overlays/rewrite.yaml``, rendered
into ``torchdevice_generated.rewrite_rules`` as ``torchdevice.records.rewrite.RewriteRule`` records and
indexed by ``ruleset``.
"""

REQUIRES_TORCH = (2, 10)
"""The oldest torch release whose API has everything the rewritten code uses (checked by the tests
against the API of each release)."""
