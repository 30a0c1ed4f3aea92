"""Catalog model and code generation: ``catalog/*.yaml`` -> typed model -> ``generated/``."""
