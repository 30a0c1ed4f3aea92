"""The records of the hand-edited catalog data, one module per overlay file (``catalog/overlays/<stem>.yaml``).

``cuda``, ``devices`` and ``mlx`` map torch names to records; ``rewrite`` is a list of records, whose
class, ``torchdevice.records.rewrite.RewriteRule``, is among the records torchdevice shares with codegen:
``torchdevice.rewrite`` builds them from the generated rules table.
"""
