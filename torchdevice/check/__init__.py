"""``torchdevice check``: what will not run on the target, and what will run differently, read from the sources.

:mod:`.knowledge` says what the runtime does with a name (from the generated tables), :mod:`.analyze`
finds the names and constructs in one module (``ast``; nothing is imported or executed), :mod:`.scan`
checks many files in parallel, found, read and resolved as ``torchdevice rewrite`` does
(``torchdevice.source``), and :mod:`.output` prints the findings like a linter, grouped at the end, or as JSON.
"""
