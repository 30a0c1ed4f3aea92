"""Catalog load time and full render time."""

from __future__ import annotations

import time


def run():
    from codegen.load import load
    from codegen.render import render_all

    start = time.perf_counter()
    catalog = load()
    loaded = time.perf_counter()
    files = render_all(catalog)
    rendered = time.perf_counter()
    yield {"name": "catalog_load", "seconds": loaded - start, "entries": len(catalog.entries)}
    yield {"name": "render_all", "seconds": rendered - loaded, "files": len(files),
           "bytes": sum(len(t) for t in files.values())}
