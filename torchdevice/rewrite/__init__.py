"""``torchdevice rewrite``: turn CUDA-specific source into device-agnostic PyTorch (libcst based).

``command`` is the CLI; ``jobs`` rewrites many files (``files`` finds, reads and writes them);
``source`` rewrites one module: ``outline`` finds the statements worth parsing, ``transform``
(with ``values`` and ``calls``) rewrites them, ``prelude`` adds the accelerator helper. The rules
are data: ``catalog/overlays/rewrite.yaml``, rendered into ``torchdevice_generated.rewrite_rules`` as
``rule.RewriteRule`` records.
"""
