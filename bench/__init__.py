"""Benchmarks: ``make bench`` runs every ``bench/bench_*.py`` and prints one JSON object per result."""
